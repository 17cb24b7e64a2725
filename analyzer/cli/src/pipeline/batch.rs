//! Frames travel from the parsing thread to the engine thread in
//! reused [`Batch`]es: decoded items, or raw records the engine thread
//! decodes itself when it has time (the balance in `reading`), with what
//! decoding keeps beside the items ([`Side`]: fragments' bytes, mirror
//! sessions, the census of other frames).

use proto_parse::capture::Record;
use proto_parse::frame::DecodeConfig;

use analyzer::traffic::Census;
use proto_parse::mirror::MirrorSource;

use super::item::Item;

/// One record as read, for the engine thread to decode: its bytes are
/// `Batch::raw_bytes[previous end..end]`.
#[derive(Debug, Clone, Copy)]
pub(super) struct RawRecord {
    index: u64,
    ts_ns: u64,
    linktype: u16,
    end: usize,
}

/// Frames from the parsing thread to the engine thread: decoded
/// (`items`), or raw records the receiver decodes with [`Batch::decode`].
#[derive(Debug, Default)]
pub(super) struct Batch {
    pub(super) items: Vec<Item>,
    pub(super) raw: Vec<RawRecord>,
    pub(super) raw_bytes: Vec<u8>,
    pub(super) side: Side,
}

/// What decoding a batch's frames keeps beside its items.
#[derive(Debug, Default)]
pub(super) struct Side {
    /// The bytes of the batch's IP fragments (`Item::Fragment`).
    pub(super) fragment_bytes: Vec<u8>,
    /// The mirror sessions of the batch's mirrored packets (`Item::Packet`'s
    /// `session`).
    pub(super) sources: Vec<MirrorSource>,
    /// Mirrored frames and what the frames that made no packet were.
    pub(super) census: Census,
}

impl Side {
    /// The index of `source` in `sources` (added if new; a batch sees few).
    #[inline(always)]
    pub(super) fn source(&mut self, source: MirrorSource) -> u16 {
        let at = match self.sources.last() {
            // Most often the previous copy's.
            Some(last) if *last == source => self.sources.len() - 1,
            _ => match self.sources.iter().rposition(|s| *s == source) {
                Some(at) => at,
                None => {
                    self.sources.push(source);
                    self.sources.len() - 1
                }
            },
        };
        at as u16
    }

    /// The index of `source` in `sources`, if the batch has copies of it.
    pub(super) fn index_of(&self, source: MirrorSource) -> Option<u16> {
        self.sources
            .iter()
            .position(|s| *s == source)
            .map(|at| at as u16)
    }

    /// The bytes of an `Item::Fragment` of this batch.
    pub(super) fn fragment(&self, start: usize, end: usize) -> &[u8] {
        &self.fragment_bytes[start..end]
    }

    pub(super) fn clear(&mut self) {
        self.fragment_bytes.clear();
        self.sources.clear();
        self.census.clear();
    }
}

impl Batch {
    pub(super) fn with_capacity(n: usize) -> Batch {
        Batch {
            items: Vec::with_capacity(n),
            raw: Vec::new(),
            raw_bytes: Vec::new(),
            side: Side::default(),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.items.len() + self.raw.len()
    }

    pub(super) fn clear(&mut self) {
        self.items.clear();
        self.raw.clear();
        self.raw_bytes.clear();
        self.side.clear();
    }

    /// Keeps a record as read, for [`Batch::decode`] on the engine thread.
    pub(super) fn push_raw(&mut self, record: &Record<'_>) {
        self.raw_bytes.extend_from_slice(record.data);
        self.raw.push(RawRecord {
            index: record.index,
            ts_ns: record.ts_ns,
            linktype: record.linktype,
            end: self.raw_bytes.len(),
        });
    }

    /// Decodes the raw records into `items` (after those already there:
    /// a batch holds one kind or the other).
    pub(super) fn decode(&mut self, decode: &DecodeConfig) {
        let mut start = 0;
        for r in &self.raw {
            let data = &self.raw_bytes[start..r.end];
            start = r.end;
            let item = Item::decode(r.index, r.ts_ns, r.linktype, data, decode, &mut self.side);
            self.items.push(item);
        }
        self.raw.clear();
        self.raw_bytes.clear();
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::pipeline::{BATCH, Options};
    use analyzer::engine::Config;
    use proto_parse::capture::Reader;
    use std::path::Path;

    /// A batch sent raw and decoded on the engine thread holds exactly the
    /// items the parsing thread would have decoded itself.
    #[test]
    fn raw_batches_decode_like_the_parsing_thread() {
        let decode = Options::new(DecodeConfig::default(), Config::default()).decode;
        for name in [
            "all_types.pcap",
            "malformed.pcap",
            "snaplen.pcap",
            "ip_fragments.pcap",
        ] {
            let path = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../fixtures/generated")
                .join(name);
            let mut reader = Reader::open(&path).unwrap();
            let mut raw = Batch::with_capacity(BATCH);
            let mut direct = Vec::new();
            let mut side = Side::default();
            while let Some(record) = reader.next_record() {
                let record = record.unwrap();
                raw.push_raw(&record);
                direct.push(Item::decode(
                    record.index,
                    record.ts_ns,
                    record.linktype,
                    record.data,
                    &decode,
                    &mut side,
                ));
            }
            assert!(direct.len() > 10, "{name}: {} frames", direct.len());
            raw.decode(&decode);
            assert_eq!(raw.items, direct, "{name}");
            assert_eq!(raw.side.fragment_bytes, side.fragment_bytes, "{name}");
            assert_eq!(raw.side.sources, side.sources, "{name}");
            assert_eq!(raw.side.census.report(), side.census.report(), "{name}");
            assert!(raw.raw.is_empty() && raw.raw_bytes.is_empty());
        }
    }
}
