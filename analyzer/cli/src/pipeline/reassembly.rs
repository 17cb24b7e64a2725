//! IP reassembly on the engine thread, one [`Defrag`] per capture fed in
//! capture order: a fragment's bytes travel in its batch
//! (`Item::Fragment`), and the datagram it completes is decoded and
//! analysed like any other packet. The common frame never comes here.
//!
//! A mirror's copy whose outer IP datagram the collector path cut into
//! fragments is rebuilt here, then decapsulated like any copy; a packet
//! that was fragmented before it was mirrored is rebuilt from the copies
//! of its fragments (one datagram per session). Either way the datagram
//! names its mirror session, and the census of the datagrams rebuilt from
//! mirrors (`Census::mirrored`) joins the parsing thread's at the end.

use proto_parse::defrag::{Reassembler, Reassembly};
use proto_parse::frame::{DecodeConfig, LinkType};
use proto_parse::mirror::MirrorSource;

use analyzer::engine::{MirrorTag, Observation};
use analyzer::traffic::Census;

use super::ReadStats;
use super::batch::Side;
use super::item::Item;

/// The engine thread's side of IP reassembly for one capture.
pub(super) struct Defrag {
    reassembler: Reassembler,
    decode: DecodeConfig,
    /// The rebuilt datagrams that were mirrors' copies.
    census: Census,
}

/// A datagram rebuilt from IP fragments that decoded as MetaRoCE or
/// RoCEv2: its observation (at the completing fragment's frame, and time
/// or the switch's) and, for a mirror's copy, its session.
#[derive(Debug, Clone, Copy)]
pub(super) struct Datagram {
    pub(super) obs: Observation,
    pub(super) mirror: Option<MirrorSource>,
}

impl Defrag {
    pub(super) fn new(decode: DecodeConfig) -> Defrag {
        Defrag {
            reassembler: Reassembler::default(),
            decode,
            census: Census::default(),
        }
    }

    /// An item of a batch (whose side is `side`), in capture order: if it
    /// is the fragment that completes a datagram decoding as MetaRoCE or
    /// RoCEv2, plain or mirrored, that datagram.
    pub(super) fn datagram(&mut self, item: &Item, side: &Side) -> Option<Datagram> {
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
        let (obs, outer) = {
            let Reassembly::Datagram(ip) =
                self.reassembler
                    .push(ts_ns, link, side.fragment(start, end))
            else {
                return None;
            };
            let (obs, tag) =
                Observation::decode_full(frame, ts_ns, LinkType::Raw, ip, &self.decode);
            if obs.is_none() && tag.is_some() {
                // A copy of other traffic, or one that broke inside: named.
                self.census.other(LinkType::Raw, ip, &self.decode);
            }
            (obs, tag)
        };
        let mut obs = obs?;
        // Fragments inside mirrored frames: the datagram is the mirrored
        // packet, of the session that carried them.
        let tag = outer.or_else(|| self.reassembler.mirror().as_ref().map(MirrorTag::of));
        let Some(tag) = tag else {
            return Some(Datagram { obs, mirror: None });
        };
        self.census.mirrored(&tag);
        if let Some(switch_ts) = tag.switch_ts_ns {
            obs.ts_ns = switch_ts;
        }
        Some(Datagram {
            obs,
            mirror: Some(tag.source),
        })
    }

    /// The capture ended: what never completed is counted, and the
    /// rebuilt copies join the capture's census.
    pub(super) fn finish(mut self, read: &mut ReadStats) {
        self.reassembler.finish();
        read.reassembly = self.reassembler.stats();
        if !self.census.is_empty() {
            read.traffic.merge(&self.census.report());
        }
    }
}
