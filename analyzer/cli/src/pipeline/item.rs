//! What the parsing thread makes of one frame: an [`Item`], the owned
//! observation of a packet of ours (plain or mirrored) or what the engine
//! thread still needs of any other frame.
//!
//! The common frame's route, and after it the common mirror's, are
//! inlined into the loops that build batches: each builds its packet's
//! observation in the item it returns, once. The rest is out of line so
//! that they stay small (instruction counts: docs/performance.md,
//! docs/mirrors.md).

use proto_parse::defrag;
use proto_parse::frame::{self, CommonIpv4, DecodeConfig, LinkType};

use analyzer::engine::{MirrorTag, Observation};

use super::batch::Side;

/// What the parsing thread produced for one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Item {
    /// A MetaRoCE or RoCEv2 frame (malformed ones included: the engine
    /// counts them). A mirrored one has `session`, the index of its mirror
    /// session in `Batch::side.sources`, and the switch's time when the
    /// copy carries a whole IEEE 1588 one.
    Packet {
        obs: Observation,
        session: Option<u16>,
    },
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
            Item::Packet { obs, .. } => obs.ts_ns,
            Item::Other { ts_ns, .. } | Item::Fragment { ts_ns, .. } => *ts_ns,
        }
    }
}

impl Item {
    /// Decodes one captured frame; an IP fragment's bytes, a mirror's
    /// session and what a frame of no protocol of ours was go to `side`.
    /// The common plain frame first, then the common mirror (counted in
    /// the census here; its time the switch's when the copy carries a
    /// whole one). Always inlined into the batch loops: as a call it costs
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
        // The Ethernet and IPv4 headers are checked once for both routes.
        if let Some(ip) = CommonIpv4::of(link, data) {
            if let Some(udp) = ip.udp() {
                match Observation::of_common_udp(index, ts_ns, &udp, decode) {
                    Some(Some(obs)) => return Item::Packet { obs, session: None },
                    Some(None) => {
                        return Item::not_observed(index, ts_ns, linktype, data, decode, side);
                    }
                    None => {}
                }
            } else if let Some(m) = ip.mirror()
                && let Some(udp) = frame::ipv4_udp(LinkType::Ethernet, m.inner)
            {
                let tag = MirrorTag::of(&m.mirror);
                side.census.mirrored(&tag);
                let session = side.source(tag.source);
                let packet_ts = tag.switch_ts_ns.unwrap_or(ts_ns);
                return match Observation::of_common_udp(index, packet_ts, &udp, decode) {
                    Some(Some(obs)) => Item::Packet {
                        obs,
                        session: Some(session),
                    },
                    _ => Item::in_counted_mirror(
                        index, ts_ns, packet_ts, session, linktype, data, decode, side,
                    ),
                };
            }
        }
        Item::uncommon(index, ts_ns, linktype, data, decode, side)
    }

    /// A frame the common routes did not take, through the full decode.
    /// Out of line, so that the common routes stay small.
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
        match Observation::decode_full(index, ts_ns, link, data, decode) {
            (Some(obs), None) => Item::Packet { obs, session: None },
            (Some(mut obs), Some(tag)) => {
                side.census.mirrored(&tag);
                if let Some(switch_ts) = tag.switch_ts_ns {
                    obs.ts_ns = switch_ts;
                }
                Item::Packet {
                    obs,
                    session: Some(side.source(tag.source)),
                }
            }
            (None, _) => Item::not_observed(index, ts_ns, linktype, data, decode, side),
        }
    }

    /// A common mirror (counted, its session known: `Item::decode`)
    /// whose copy the common route did not take (a RoCEv2 packet, a cut
    /// or malformed one, other UDP), through the full decode; at
    /// `packet_ts` if it is a packet of ours, else at the capture's
    /// `ts_ns`.
    #[cold]
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn in_counted_mirror(
        index: u64,
        ts_ns: u64,
        packet_ts: u64,
        session: u16,
        linktype: u16,
        data: &[u8],
        decode: &DecodeConfig,
        side: &mut Side,
    ) -> Item {
        let link = LinkType::from(u32::from(linktype));
        match Observation::decode_full(index, packet_ts, link, data, decode).0 {
            Some(obs) => Item::Packet {
                obs,
                session: Some(session),
            },
            None => {
                side.census.other_in_counted_mirror(link, data, decode);
                Item::Other {
                    frame: index,
                    ts_ns,
                }
            }
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
