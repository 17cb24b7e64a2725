//! What the parsing thread makes of one frame: an [`Item`], the owned
//! observation of a packet of ours (plain or mirrored) or what the engine
//! thread still needs of any other frame. The common frame's route is
//! inlined into the loops that build batches; the rest is out of line so
//! that it stays small (instruction counts: docs/performance.md).

use proto_parse::defrag;
use proto_parse::frame::{DecodeConfig, LinkType};

use analyzer::engine::Observation;
use analyzer::observation::MirrorTag;

use super::batch::Side;

/// What the parsing thread produced for one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Item {
    /// A MetaRoCE or RoCEv2 frame (malformed ones included: the engine
    /// counts them).
    Packet(Observation),
    /// A MetaRoCE or RoCEv2 frame mirrored by the session
    /// `Batch::side.sources[source]` (its time: the switch's, when the
    /// copy carries a whole IEEE 1588 one).
    Mirrored { obs: Observation, source: u16 },
    /// Any other frame: its number and timestamp.
    Other { frame: u64, ts_ns: u64 },
    /// An IP fragment, for the engine thread's reassembler: its bytes are
    /// `Batch::fragment_bytes[start..end]`.
    Fragment {
        frame: u64,
        ts_ns: u64,
        linktype: u16,
        start: usize,
        end: usize,
    },
}

impl Item {
    pub(super) fn ts_ns(&self) -> u64 {
        match self {
            Item::Packet(obs) | Item::Mirrored { obs, .. } => obs.ts_ns,
            Item::Other { ts_ns, .. } | Item::Fragment { ts_ns, .. } => *ts_ns,
        }
    }
}

impl Item {
    /// Decodes one captured frame; an IP fragment's bytes, a mirror's
    /// session and what a frame of no protocol of ours was go to `side`.
    /// Always inlined into the batch loops: as a call it costs
    /// instructions per packet (cachegrind), most of them moving the
    /// returned `Item`.
    #[inline(always)]
    pub(super) fn decode(
        index: u64,
        ts_ns: u64,
        linktype: u16,
        data: &[u8],
        decode: &DecodeConfig,
        side: &mut Side,
    ) -> Item {
        let link = LinkType::from(u32::from(linktype));
        match Observation::decode_common(index, ts_ns, link, data, decode) {
            Some(Some(obs)) => Item::Packet(obs),
            Some(None) => Item::not_observed(index, ts_ns, linktype, data, decode, side),
            None => Item::uncommon(index, ts_ns, linktype, data, decode, side),
        }
    }

    /// A packet mirrored where `tag` says, counted in the census; its time
    /// is the switch's when the copy carries a whole one.
    #[inline(always)]
    fn mirrored(mut obs: Observation, tag: &MirrorTag, side: &mut Side) -> Item {
        side.census.mirrored(tag);
        if let Some(switch_ts) = tag.switch_ts_ns {
            obs.ts_ns = switch_ts;
        }
        Item::Mirrored {
            obs,
            source: side.source(tag.source),
        }
    }

    /// A frame the common route did not take: the common mirror, read
    /// here as the common frame is in `decode` (its observation built in
    /// the returned item, not moved into it), or anything else through
    /// the full decode. Out of line, so that the common frame's route
    /// stays as it is.
    #[inline(never)]
    fn uncommon(
        index: u64,
        ts_ns: u64,
        linktype: u16,
        data: &[u8],
        decode: &DecodeConfig,
        side: &mut Side,
    ) -> Item {
        let link = LinkType::from(u32::from(linktype));
        if let Some((obs, tag)) =
            Observation::decode_common_mirrored(index, ts_ns, link, data, decode)
        {
            return Item::mirrored(obs, &tag, side);
        }
        match Observation::decode_full(index, ts_ns, link, data, decode) {
            (Some(obs), None) => Item::Packet(obs),
            (Some(obs), Some(tag)) => Item::mirrored(obs, &tag, side),
            (None, _) => Item::not_observed(index, ts_ns, linktype, data, decode, side),
        }
    }

    /// A frame that is no packet of ours: an IP fragment (its bytes kept
    /// for the reassembler) or any other frame (counted by what it was,
    /// `Census::other`). Out of line, so that the common frame's `decode`
    /// stays small enough to be inlined into the loops that build batches.
    #[cold]
    #[inline(never)]
    fn not_observed(
        index: u64,
        ts_ns: u64,
        linktype: u16,
        data: &[u8],
        decode: &DecodeConfig,
        side: &mut Side,
    ) -> Item {
        let link = LinkType::from(u32::from(linktype));
        if !defrag::is_fragment(link, data) {
            side.census.other(link, data, decode);
            return Item::Other {
                frame: index,
                ts_ns,
            };
        }
        let start = side.fragment_bytes.len();
        side.fragment_bytes.extend_from_slice(data);
        Item::Fragment {
            frame: index,
            ts_ns,
            linktype,
            start,
            end: side.fragment_bytes.len(),
        }
    }
}
