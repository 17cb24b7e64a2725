//! IP reassembly on the engine thread, one [`Defrag`] per capture fed in
//! capture order: a fragment's bytes travel in its batch
//! (`Item::Fragment`), and the datagram it completes is decoded and
//! analysed like any other packet. The common frame never comes here.

use proto_parse::defrag::{Reassembler, Reassembly, ReassemblyStats};
use proto_parse::frame::{DecodeConfig, LinkType};

use analyzer::engine::Observation;

use super::batch::Batch;
use super::item::Item;

/// The engine thread's side of IP reassembly for one capture.
pub(super) struct Defrag {
    reassembler: Reassembler,
    decode: DecodeConfig,
}

impl Defrag {
    pub(super) fn new(decode: DecodeConfig) -> Defrag {
        Defrag {
            reassembler: Reassembler::default(),
            decode,
        }
    }

    /// An item of `batch`, in capture order: if it is the fragment that
    /// completes a datagram decoding as MetaRoCE or RoCEv2, the datagram's
    /// observation (at the completing fragment's frame and time).
    pub(super) fn datagram(&mut self, item: &Item, batch: &Batch) -> Option<Observation> {
        let Item::Fragment {
            frame,
            ts_ns,
            linktype,
            start,
            end,
        } = *item
        else {
            return None;
        };
        let link = LinkType::from(u32::from(linktype));
        match self
            .reassembler
            .push(ts_ns, link, batch.fragment(start, end))
        {
            Reassembly::Datagram(ip) => {
                Observation::decode(frame, ts_ns, LinkType::Raw, ip, &self.decode)
            }
            Reassembly::Held | Reassembly::NotFragment => None,
        }
    }

    /// The capture ended: what never completed is counted.
    pub(super) fn finish(mut self) -> ReassemblyStats {
        self.reassembler.finish();
        self.reassembler.stats()
    }
}
