//! IP reassembly (IPv4 and IPv6): the stateful companion of
//! [`crate::frame::decode`] for links whose MTU is smaller than the
//! datagrams sent over them.
//!
//! [`frame::decode`] stops at an IP fragment (`Frame::error` says so); a
//! [`Reassembler`] takes such frames in capture order and, when the last
//! missing piece of a datagram arrives, hands back the whole IP packet
//! (raw IP, its header without fragmentation), which decodes like any other
//! frame with [`LinkType::Raw`]. The pieces are put together by etherparse
//! (`etherparse::defrag::IpDefragBuf`: offsets in 8-byte units, a later
//! piece overwrites an overlapping earlier one, a second end that
//! contradicts the first is an error); this module keys, bounds and counts.
//!
//! Memory is bounded: at most [`ReassemblyConfig::max_datagrams`] datagrams
//! and [`ReassemblyConfig::max_bytes`] bytes wait for their missing pieces
//! (the oldest is given up to make room), and a datagram not complete
//! [`ReassemblyConfig::timeout_ns`] of capture time after its first piece
//! is given up. Nothing is dropped silently: [`ReassemblyStats`] counts the
//! fragments read, the datagrams rebuilt, and the datagrams (and their
//! fragments) that never completed.
//!
//! A rebuilt IPv6 datagram keeps the fixed header and drops extension
//! headers that came before the fragment header (hop-by-hop, routing,
//! destination options): nothing after the IP layer reads them.

use std::collections::HashMap;
use std::net::IpAddr;

use etherparse::defrag::IpDefragBuf;
use etherparse::{
    IpFragOffset, IpNumber, Ipv4Header, Ipv4HeaderSlice, Ipv6ExtensionSlice, Ipv6ExtensionsSlice,
    Ipv6Header, Ipv6HeaderSlice,
};

use crate::frame::{self, DecodeConfig, Ip, LinkType, Vlans};
use crate::mirror::{Mirror, MirrorSource};

/// Bounds of a [`Reassembler`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReassemblyConfig {
    /// Datagrams waiting for pieces at once. Default 4096.
    pub max_datagrams: usize,
    /// Bytes held by the waiting datagrams. Default 64 MiB.
    pub max_bytes: usize,
    /// Capture time a datagram may wait for its pieces after its first.
    /// Default 30 s (Linux's `ipfrag_time`).
    pub timeout_ns: u64,
}

impl Default for ReassemblyConfig {
    fn default() -> Self {
        ReassemblyConfig {
            max_datagrams: 4096,
            max_bytes: 64 << 20,
            timeout_ns: 30_000_000_000,
        }
    }
}

/// What a [`Reassembler`] did, in datagrams and fragments.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReassemblyStats {
    /// IP fragments read.
    pub fragments: u64,
    /// Datagrams rebuilt from all their fragments.
    pub datagrams: u64,
    /// Datagrams given up: a piece did not come within the timeout, the
    /// memory bounds made room for newer ones, the capture ended first, a
    /// piece contradicted the others, or the capture cut a piece short.
    pub incomplete_datagrams: u64,
    /// The fragments of the datagrams given up (what they carried was not
    /// analysed).
    pub incomplete_fragments: u64,
}

impl ReassemblyStats {
    /// Adds another reassembler's counts (several captures).
    pub fn add(&mut self, other: &ReassemblyStats) {
        self.fragments += other.fragments;
        self.datagrams += other.datagrams;
        self.incomplete_datagrams += other.incomplete_datagrams;
        self.incomplete_fragments += other.incomplete_fragments;
    }
}

/// What [`Reassembler::push`] made of a frame.
#[derive(Debug, PartialEq, Eq)]
pub enum Reassembly<'r> {
    /// Not an IP fragment: the frame is analysed as it is.
    NotFragment,
    /// An IP fragment, kept (or given up and counted): nothing to analyse
    /// yet.
    Held,
    /// The fragment completed its datagram: the whole IP packet, to decode
    /// with [`LinkType::Raw`]. Valid until the next call.
    Datagram(&'r [u8]),
}

/// Identifies a datagram's pieces (RFC 791 and RFC 8200: addresses,
/// identification, protocol; and the VLANs it was captured on, and the
/// mirror session whose copies carried them: two sessions' copies of one
/// datagram are two datagrams).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Key {
    src: IpAddr,
    dst: IpAddr,
    id: u32,
    protocol: u8,
    vlans: Vlans,
    mirror: Option<MirrorSource>,
}

/// One datagram waiting for pieces.
struct Pending {
    buf: IpDefragBuf,
    /// The IP header of the piece at offset 0, once seen (IPv4 with its
    /// options; IPv6 the fixed 40 bytes).
    header: Option<Vec<u8>>,
    first_ts_ns: u64,
    fragments: u64,
    /// A piece was cut short or contradicted the others: the datagram
    /// cannot complete and waits only to be counted.
    broken: bool,
}

/// The fragment fields of one IP header.
struct Piece<'a> {
    key: Key,
    offset: IpFragOffset,
    more: bool,
    /// The IP header to rebuild the datagram with.
    header: &'a [u8],
    payload: &'a [u8],
    /// The capture cut the piece short.
    cut: bool,
}

/// Reassembles IP datagrams from the fragments of one capture (see the
/// module documentation). Feed it frames in capture order.
pub struct Reassembler {
    cfg: ReassemblyConfig,
    pending: HashMap<Key, Pending>,
    /// Bytes held by `pending`.
    held: usize,
    /// When the timeout was last applied (capture time).
    expired_at: u64,
    stats: ReassemblyStats,
    /// The last datagram rebuilt.
    out: Vec<u8>,
    /// The mirror whose copy carried the fragment that completed it.
    out_mirror: Option<Mirror>,
}

impl Default for Reassembler {
    fn default() -> Self {
        Reassembler::new(ReassemblyConfig::default())
    }
}

impl Reassembler {
    pub fn new(cfg: ReassemblyConfig) -> Reassembler {
        Reassembler {
            cfg,
            pending: HashMap::new(),
            held: 0,
            expired_at: 0,
            stats: ReassemblyStats::default(),
            out: Vec::new(),
            out_mirror: None,
        }
    }

    pub fn stats(&self) -> ReassemblyStats {
        self.stats
    }

    /// The mirror (GRE, ERSPAN, VXLAN) whose copy carried the fragment that
    /// completed the datagram last handed back, when the fragments were
    /// inside mirrored frames: the datagram is then the mirrored packet,
    /// without the mirror's layers. `None` for a datagram of plain
    /// fragments, or of a copy whose outer datagram was fragmented (its
    /// mirror is inside the datagram).
    pub fn mirror(&self) -> Option<Mirror> {
        self.out_mirror
    }

    /// Datagrams waiting for pieces now.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Takes one captured frame (in capture order, at capture time
    /// `ts_ns`). Frames that are not IP fragments cost one
    /// [`frame::decode`]; hot loops call this only for frames their fast
    /// route did not take.
    pub fn push(&mut self, ts_ns: u64, link: LinkType, data: &[u8]) -> Reassembly<'_> {
        let frame = frame::decode(link, data, &DecodeConfig::default());
        let mirror = frame.mirror;
        let Some(piece) = frame
            .ip
            .as_ref()
            .and_then(|ip| piece(ip, data, frame.vlans, mirror.map(|m| m.source())))
        else {
            return Reassembly::NotFragment;
        };
        self.stats.fragments += 1;
        self.expire(ts_ns);
        if !self.pending.contains_key(&piece.key) {
            self.evict_oldest(None, 1);
            let buf = IpDefragBuf::new(IpNumber(piece.key.protocol), Vec::new(), Vec::new());
            self.pending.insert(
                piece.key,
                Pending {
                    buf,
                    header: None,
                    first_ts_ns: ts_ns,
                    fragments: 0,
                    broken: false,
                },
            );
        }
        let Some(entry) = self.pending.get_mut(&piece.key) else {
            return Reassembly::Held;
        };
        entry.fragments += 1;
        if entry.broken {
            return Reassembly::Held;
        }
        let before = entry.buf.data().len();
        // A piece the capture cut short, or one that contradicts the others
        // (etherparse's error), breaks the datagram: its bytes are let go,
        // and its pieces are counted until it is given up.
        if piece.cut
            || entry
                .buf
                .add(piece.offset, piece.more, piece.payload)
                .is_err()
        {
            let empty = IpDefragBuf::new(IpNumber(piece.key.protocol), Vec::new(), Vec::new());
            entry.buf = empty;
            entry.broken = true;
            self.held -= before;
            return Reassembly::Held;
        }
        if piece.offset.value() == 0 {
            entry.header = Some(piece.header.to_vec());
        }
        self.held = self.held - before + entry.buf.data().len();
        if !entry.buf.is_complete() {
            // A datagram that grew past the byte bound makes room by giving
            // up others, oldest first.
            self.evict_oldest(Some(piece.key), 0);
            return Reassembly::Held;
        }
        let Some(done) = self.pending.remove(&piece.key) else {
            return Reassembly::Held;
        };
        self.held -= done.buf.data().len();
        let Some(header) = done.header else {
            // Complete means the piece at offset 0 was added.
            self.count_incomplete(done.fragments);
            return Reassembly::Held;
        };
        let (payload, _) = done.buf.take_bufs();
        if rebuild(&header, piece.key.protocol, &payload, &mut self.out) {
            self.stats.datagrams += 1;
            self.out_mirror = mirror;
            Reassembly::Datagram(&self.out)
        } else {
            self.count_incomplete(done.fragments);
            Reassembly::Held
        }
    }

    /// Gives up the datagrams whose first piece came more than the timeout
    /// before `now_ns` (capture time). [`Reassembler::push`] does this as
    /// capture time goes on.
    pub fn expire(&mut self, now_ns: u64) {
        let timeout = self.cfg.timeout_ns;
        // Scanning every pending datagram once per eighth of the timeout
        // keeps the cost off the common fragment.
        if now_ns < self.expired_at.saturating_add(timeout / 8) {
            return;
        }
        self.expired_at = now_ns;
        let old: Vec<Key> = self
            .pending
            .iter()
            .filter(|(_, p)| now_ns.saturating_sub(p.first_ts_ns) > timeout)
            .map(|(k, _)| *k)
            .collect();
        for key in old {
            self.give_up(key);
        }
    }

    /// The capture ended: every datagram still waiting is given up.
    pub fn finish(&mut self) {
        let keys: Vec<Key> = self.pending.keys().copied().collect();
        for key in keys {
            self.give_up(key);
        }
    }

    /// Gives up the datagram `key`, counting it and its fragments.
    fn give_up(&mut self, key: Key) {
        if let Some(p) = self.pending.remove(&key) {
            self.held -= p.buf.data().len();
            self.count_incomplete(p.fragments);
        }
    }

    fn count_incomplete(&mut self, fragments: u64) {
        self.stats.incomplete_datagrams += 1;
        self.stats.incomplete_fragments += fragments;
    }

    /// Gives up the oldest datagrams (never `keep`) while `room` more
    /// would not fit under `max_datagrams`, or more than `max_bytes` are
    /// held.
    fn evict_oldest(&mut self, keep: Option<Key>, room: usize) {
        while self.pending.len() + room > self.cfg.max_datagrams || self.held > self.cfg.max_bytes {
            let oldest = self
                .pending
                .iter()
                .filter(|(k, _)| Some(**k) != keep)
                .min_by_key(|(_, p)| p.first_ts_ns)
                .map(|(k, _)| *k);
            match oldest {
                Some(key) => self.give_up(key),
                None => return,
            }
        }
    }
}

/// Whether the frame is an IP fragment, which [`Reassembler::push`] takes.
/// Costs one [`frame::decode`]: for frames a hot loop's fast route did not
/// take.
pub fn is_fragment(link: LinkType, data: &[u8]) -> bool {
    let frame = frame::decode(link, data, &DecodeConfig::default());
    // A fragment always stops decoding at the IP layer.
    frame.error.is_some()
        && frame
            .ip
            .as_ref()
            .is_some_and(|ip| piece(ip, data, frame.vlans, None).is_some())
}

/// The fragment fields of the IP layer `ip` of frame `data`; `None` when
/// it is not a fragment.
fn piece<'a>(
    ip: &Ip<'a>,
    data: &'a [u8],
    vlans: Vlans,
    mirror: Option<MirrorSource>,
) -> Option<Piece<'a>> {
    let payload_start = ip.offset + ip.headers.len();
    let wire_end = ip.offset + ip.wire_len;
    let payload = data.get(payload_start..wire_end.min(data.len()))?;
    let cut = data.len() < wire_end;
    let (id, offset, more, header) = if ip.is_ipv6() {
        let fixed = Ipv6HeaderSlice::from_slice(ip.headers).ok()?;
        let (exts, _, _) =
            Ipv6ExtensionsSlice::from_slice(fixed.next_header(), &ip.headers[Ipv6Header::LEN..])
                .ok()?;
        let frag = exts.into_iter().find_map(|ext| match ext {
            Ipv6ExtensionSlice::Fragment(f) => Some(f),
            _ => None,
        })?;
        if !frag.is_fragmenting_payload() {
            return None;
        }
        (
            frag.identification(),
            frag.fragment_offset(),
            frag.more_fragments(),
            &ip.headers[..Ipv6Header::LEN],
        )
    } else {
        let hdr = Ipv4HeaderSlice::from_slice(ip.headers).ok()?;
        if !hdr.is_fragmenting_payload() {
            return None;
        }
        (
            u32::from(hdr.identification()),
            hdr.fragments_offset(),
            hdr.more_fragments(),
            ip.headers,
        )
    };
    Some(Piece {
        key: Key {
            src: ip.src,
            dst: ip.dst,
            id,
            protocol: ip.protocol,
            vlans,
            mirror,
        },
        offset,
        more,
        header,
        payload,
        cut,
    })
}

/// Writes into `out` the datagram of `payload` under the first piece's IP
/// `header`, without fragmentation: IPv4 with its total length and
/// checksum, IPv6 with its payload length and `protocol` as next header.
/// False when the datagram does not fit one IP packet.
fn rebuild(header: &[u8], protocol: u8, payload: &[u8], out: &mut Vec<u8>) -> bool {
    out.clear();
    if header.first().is_some_and(|b| b >> 4 == 6) {
        let Ok((mut h, _)) = Ipv6Header::from_slice(header) else {
            return false;
        };
        let Ok(len) = u16::try_from(payload.len()) else {
            return false;
        };
        h.next_header = IpNumber(protocol);
        h.payload_length = len;
        out.extend_from_slice(&h.to_bytes());
    } else {
        let Ok((mut h, _)) = Ipv4Header::from_slice(header) else {
            return false;
        };
        h.more_fragments = false;
        h.fragment_offset = IpFragOffset::ZERO;
        if h.set_payload_len(payload.len()).is_err() || h.write(out).is_err() {
            return false;
        }
    }
    out.extend_from_slice(payload);
    true
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::build::UdpFrameBuilder;

    fn builder(v6: bool) -> UdpFrameBuilder {
        if v6 {
            UdpFrameBuilder::new(
                "[fd00::1]:49152".parse().unwrap(),
                "[fd00::2]:9000".parse().unwrap(),
            )
        } else {
            UdpFrameBuilder::new(
                "10.0.0.1:49152".parse().unwrap(),
                "10.0.0.2:9000".parse().unwrap(),
            )
        }
    }

    fn payload() -> Vec<u8> {
        (0..3000u32).map(|i| (i * 7) as u8).collect()
    }

    /// The UDP payload of a decoded frame.
    fn udp_payload(link: LinkType, bytes: &[u8]) -> Vec<u8> {
        let frame = frame::decode(link, bytes, &DecodeConfig::default());
        assert!(frame.error.is_none(), "{:?}", frame.error);
        frame.udp.unwrap().payload.to_vec()
    }

    #[test]
    fn out_of_order_and_overlapping_pieces_rebuild_the_datagram() {
        for v6 in [false, true] {
            let b = builder(v6);
            let p = payload();
            let whole = udp_payload(LinkType::Ethernet, &b.build(&p));
            let mut pieces = b.build_fragments(&p, 77, 1000);
            assert_eq!(pieces.len(), 4);
            pieces.reverse();
            // An overlapping piece with the same bytes (a resent fragment).
            pieces.insert(1, b.build_fragment(&p, 77, 504..1504, true));
            let mut r = Reassembler::default();
            let n = pieces.len();
            for (i, piece) in pieces.iter().enumerate() {
                match r.push(1_000 + i as u64, LinkType::Ethernet, piece) {
                    Reassembly::Held => assert!(i + 1 < n, "v6 {v6}: piece {i}"),
                    Reassembly::Datagram(ip) => {
                        assert_eq!(i + 1, n);
                        assert_eq!(udp_payload(LinkType::Raw, ip), whole, "v6 {v6}");
                    }
                    Reassembly::NotFragment => panic!("a fragment"),
                }
            }
            let stats = r.stats();
            assert_eq!(
                (stats.fragments, stats.datagrams, stats.incomplete_datagrams),
                (5, 1, 0)
            );
            assert_eq!(r.pending(), 0);
        }
    }

    #[test]
    fn a_missing_piece_is_counted_when_the_datagram_is_given_up() {
        let b = builder(false);
        let p = payload();
        let mut pieces = b.build_fragments(&p, 9, 1000);
        pieces.remove(1);
        let mut r = Reassembler::default();
        for piece in &pieces {
            assert_eq!(r.push(5, LinkType::Ethernet, piece), Reassembly::Held);
        }
        // A frame that is not a fragment passes.
        let plain = b.build(&[1, 2, 3]);
        assert!(!is_fragment(LinkType::Ethernet, &plain));
        assert!(is_fragment(LinkType::Ethernet, &pieces[0]));
        assert_eq!(
            r.push(6, LinkType::Ethernet, &plain),
            Reassembly::NotFragment
        );
        // Past the timeout, the next fragment gives the old datagram up.
        let later = b.build_fragments(&p, 10, 1000);
        r.push(40_000_000_000, LinkType::Ethernet, &later[0]);
        let stats = r.stats();
        assert_eq!(
            (stats.incomplete_datagrams, stats.incomplete_fragments),
            (1, 3)
        );
        r.finish();
        let stats = r.stats();
        assert_eq!((stats.fragments, stats.datagrams), (4, 0));
        assert_eq!(
            (stats.incomplete_datagrams, stats.incomplete_fragments),
            (2, 4)
        );
    }

    proptest::proptest! {
        /// Fragments with bytes changed anywhere (headers, offsets,
        /// lengths) and cut anywhere, in any order: no panic, every
        /// datagram handed back decodes, the counts add up.
        #[test]
        fn mutated_fragments_never_panic(
            v6 in proptest::prelude::any::<bool>(),
            edits in proptest::collection::vec(
                (0usize..4, 0usize..1100, proptest::prelude::any::<u8>()), 0..12),
            cuts in proptest::collection::vec((0usize..4, 0usize..1100), 0..3),
            order in proptest::collection::vec(0usize..4, 1..8),
        ) {
            let b = builder(v6);
            let p = payload();
            let mut pieces = b.build_fragments(&p, 5, 1000);
            for (i, at, byte) in edits {
                if let Some(x) = pieces[i].get_mut(at) {
                    *x = byte;
                }
            }
            for (i, at) in cuts {
                let piece = &mut pieces[i];
                piece.truncate(at.min(piece.len()));
            }
            let cfg = ReassemblyConfig { max_datagrams: 2, max_bytes: 4000, timeout_ns: 10 };
            let mut r = Reassembler::new(cfg);
            for (ts, i) in order.into_iter().enumerate() {
                if let Reassembly::Datagram(ip) = r.push(ts as u64 * 3, LinkType::Ethernet, &pieces[i]) {
                    let _ = frame::decode(LinkType::Raw, ip, &DecodeConfig::default());
                }
            }
            r.finish();
            let s = r.stats();
            proptest::prop_assert_eq!(r.pending(), 0);
            proptest::prop_assert!(s.datagrams + s.incomplete_datagrams <= s.fragments);
            proptest::prop_assert!(s.incomplete_fragments <= s.fragments);
        }
    }

    #[test]
    fn memory_is_bounded_by_the_oldest_given_up() {
        let b = builder(false);
        let p = payload();
        let cfg = ReassemblyConfig {
            max_datagrams: 3,
            ..ReassemblyConfig::default()
        };
        let mut r = Reassembler::new(cfg);
        for id in 0..10u32 {
            let first = &b.build_fragments(&p, id, 1000)[0];
            r.push(u64::from(id), LinkType::Ethernet, first);
            assert!(r.pending() <= 3);
        }
        assert_eq!(r.stats().incomplete_datagrams, 7);

        // Bytes: datagrams that grow give up older ones, never themselves.
        let cfg = ReassemblyConfig {
            max_bytes: 3500,
            ..ReassemblyConfig::default()
        };
        let mut r = Reassembler::new(cfg);
        let a = b.build_fragments(&p, 1, 1000);
        let c = b.build_fragments(&p, 2, 1000);
        r.push(1, LinkType::Ethernet, &a[0]);
        r.push(2, LinkType::Ethernet, &c[0]);
        r.push(3, LinkType::Ethernet, &c[1]);
        assert_eq!((r.pending(), r.stats().incomplete_datagrams), (2, 0));
        r.push(4, LinkType::Ethernet, &c[2]);
        assert_eq!((r.pending(), r.stats().incomplete_datagrams), (1, 1));
        let done = r.push(5, LinkType::Ethernet, &c[3]);
        assert!(matches!(done, Reassembly::Datagram(_)));
    }

    #[test]
    fn a_piece_cut_by_the_snaplen_cannot_complete() {
        let b = builder(false);
        let p = payload();
        let pieces = b.build_fragments(&p, 3, 1000);
        let mut r = Reassembler::default();
        r.push(1, LinkType::Ethernet, &pieces[0][..200]);
        for piece in &pieces[1..] {
            assert_eq!(r.push(2, LinkType::Ethernet, piece), Reassembly::Held);
        }
        r.finish();
        let stats = r.stats();
        assert_eq!(stats.datagrams, 0);
        assert_eq!(
            (stats.incomplete_datagrams, stats.incomplete_fragments),
            (1, 4)
        );
    }
}
