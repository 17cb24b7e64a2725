//! Where the capture was taken ([`CapturePoint`]), which end of a
//! direction that is ([`Side`]), and, when not given, the guess of the
//! host from the traffic ([`HostGuess`]).

use std::net::IpAddr;

use super::rule::Vantage;

/// Where the capture was taken, for rules that can be judged only at the
/// sender or only at the receiver.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum CapturePoint {
    /// Decided from the traffic ([`HostGuess`]).
    #[default]
    Auto,
    /// On the host with this address.
    Host(IpAddr),
    /// Unknown or in the middle (a mirror port): only rules of vantage
    /// `Either` are judged.
    Unknown,
}

/// Which end of a direction the capture was taken at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Sender,
    Receiver,
    Unknown,
}

impl Side {
    /// The side of the direction `src -> dst` for a capture taken on `host`.
    pub fn of(src: IpAddr, dst: IpAddr, host: Option<IpAddr>) -> Side {
        match host {
            Some(h) if h == src => Side::Sender,
            Some(h) if h == dst => Side::Receiver,
            _ => Side::Unknown,
        }
    }

    /// Whether a rule of `vantage` can be judged from this side.
    pub fn judges(self, vantage: Vantage) -> bool {
        match vantage {
            Vantage::Either | Vantage::TwoCapture => true,
            Vantage::Sender => self == Side::Sender,
            Vantage::Receiver => self == Side::Receiver,
            Vantage::Endpoint => self != Side::Unknown,
        }
    }
}

/// What a direction's side judges and which host guess candidates its
/// source is, as bits worked out once (when its first packet decides
/// them) for the lint's fast paths: bit `1 << vantage` for each vantage
/// the side judges (`Sender`, `Receiver`, `Endpoint`: bits 1 to 3), and
/// the flags below.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct SideBits(u8);

impl SideBits {
    /// The side is decided: the vantage bits (1 to 3) hold. At bit 0,
    /// `Either`'s (judged by every side); `TwoCapture`'s, bit 4, is
    /// never set (not a side's to judge).
    const SIDE: u8 = 1 << 0;
    /// The host guess candidates are decided (or not needed): the
    /// source bits hold.
    const SOURCES: u8 = 1 << 5;
    /// The source is the first candidate, and the second.
    const SOURCE_A: u8 = 1 << 6;
    const SOURCE_B: u8 = 1 << 7;

    /// From a direction's side (`None`: not decided; `Some(None)`: the
    /// capture point is guessed, every side judged) and its candidates
    /// (`None` with `guessed`: not decided).
    pub fn of(side: Option<Option<Side>>, sources: Option<[bool; 2]>, guessed: bool) -> SideBits {
        let mut bits = 0;
        if let Some(side) = side {
            bits |= Self::SIDE;
            for v in [Vantage::Sender, Vantage::Receiver, Vantage::Endpoint] {
                if side.is_none_or(|s| s.judges(v)) {
                    bits |= 1 << v as u8;
                }
            }
        }
        if let Some([a, b]) = sources {
            bits |= Self::SOURCES;
            bits |= if a { Self::SOURCE_A } else { 0 } | if b { Self::SOURCE_B } else { 0 };
        } else if !guessed {
            bits |= Self::SOURCES;
        }
        SideBits(bits)
    }

    /// Side and candidates decided: a packet may take a fast path.
    #[inline(always)]
    pub fn ready(self) -> bool {
        self.0 & (Self::SIDE | Self::SOURCES) == Self::SIDE | Self::SOURCES
    }

    #[inline(always)]
    pub fn side_known(self) -> bool {
        self.0 & Self::SIDE != 0
    }

    /// Whether the side judges rules of `vantage` (`Sender`, `Receiver`
    /// or `Endpoint`).
    #[inline(always)]
    pub fn judges(self, vantage: Vantage) -> bool {
        self.0 & (1 << vantage as u8) != 0
    }

    /// The candidates the source is, `None` for none.
    #[inline(always)]
    pub fn sources(self) -> Option<[bool; 2]> {
        (self.0 & (Self::SOURCE_A | Self::SOURCE_B) != 0)
            .then_some([self.0 & Self::SOURCE_A != 0, self.0 & Self::SOURCE_B != 0])
    }
}

/// Decides the host a capture was taken on, for `CapturePoint::Auto`.
///
/// A host's capture holds only packets it sent or received, so the host is
/// an address found in every MetaRoCE packet. When two are (a capture of
/// one pair of hosts, at either end), their packets' timestamps tell them
/// apart: a packet's tx_ts is its sender's clock when it left, so at the
/// sender's own capture the capture time minus tx_ts stays nearly constant
/// (the same clock, read twice a few microseconds apart), while at the
/// other end it also holds the one-way delay, which varies from path to
/// path and packet to packet. The host is the address whose packets show
/// the smaller spread of that difference, when it is less than half the
/// other's and either it is 0 (exactly constant: the same clock) or the
/// other's is at least 1 us; otherwise (or when one side
/// sent fewer than 2 packets) the point stays unknown and only rules of
/// vantage `Either` are judged.
#[derive(Debug, Clone, Copy, Default)]
pub struct HostGuess {
    /// Addresses in every packet so far (`None`: no packet yet).
    candidates: Option<[Option<IpAddr>; 2]>,
    /// Per candidate, the spread of its packets' capture time minus tx_ts.
    spread: [Spread; 2],
}

/// Min and max of `capture time - tx_ts` (mod 2^32, relative to the first
/// packet's).
#[derive(Debug, Clone, Copy, Default)]
struct Spread {
    first: Option<u32>,
    min: i32,
    max: i32,
    packets: u64,
}

impl Spread {
    fn add(&mut self, offset: u32) {
        self.packets += 1;
        let Some(first) = self.first else {
            self.first = Some(offset);
            return;
        };
        let d = offset.wrapping_sub(first) as i32;
        self.min = self.min.min(d);
        self.max = self.max.max(d);
    }

    fn width(&self) -> Option<u64> {
        (self.packets >= 2).then(|| (i64::from(self.max) - i64::from(self.min)) as u64)
    }
}

impl HostGuess {
    /// One MetaRoCE packet: its addresses, capture time and tx_ts.
    pub fn packet(&mut self, src: &IpAddr, dst: &IpAddr, ts_ns: u64, tx_ts: u32) {
        let sources = self.direction(src, dst);
        self.timestamps(sources, ts_ns, tx_ts);
    }

    /// The first packet of a direction `src -> dst`: its addresses, and
    /// which candidates are its source (where its packets' timestamps go,
    /// [`HostGuess::timestamps`]). The addresses of the direction's later
    /// packets change nothing, and a candidate dropped later stays dropped
    /// (its spread no longer counts).
    pub fn direction(&mut self, src: &IpAddr, dst: &IpAddr) -> [bool; 2] {
        self.addresses(src, dst);
        match &self.candidates {
            Some([a, b]) => [a.as_ref() == Some(src), b.as_ref() == Some(src)],
            None => [false; 2],
        }
    }

    /// A MetaRoCE packet's capture time and tx_ts, from a source that is
    /// the candidates `sources` ([`HostGuess::direction`]).
    #[inline(always)]
    pub fn timestamps(&mut self, sources: [bool; 2], ts_ns: u64, tx_ts: u32) {
        for (&source, spread) in sources.iter().zip(self.spread.iter_mut()) {
            if source {
                spread.add((ts_ns as u32).wrapping_sub(tx_ts));
            }
        }
    }

    /// A packet's addresses (RoCEv2 has no transmit timestamp: its
    /// captures are decided only when one address is in every packet).
    #[inline]
    pub fn addresses(&mut self, src: &IpAddr, dst: &IpAddr) {
        let c = self.candidates.get_or_insert([Some(*src), Some(*dst)]);
        for slot in c.iter_mut() {
            if slot.is_some_and(|a| a != *src && a != *dst) {
                *slot = None;
            }
        }
    }

    /// The host, when the traffic says it.
    pub fn host(&self) -> Option<IpAddr> {
        const MIN_REMOTE_SPREAD_NS: u64 = 1_000;
        let c = self.candidates?;
        // A spread of exactly 0 is the capture host's own clock read twice
        // (no timestamp noise at all), so any other spread decides; a
        // spread under 1 us otherwise could be timestamp resolution alone.
        let clear = |own: Option<u64>, other: Option<u64>| match (own, other) {
            (Some(own), Some(other)) => {
                (own == 0 || other >= MIN_REMOTE_SPREAD_NS) && own * 2 < other
            }
            _ => false,
        };
        let [wa, wb] = [self.spread[0].width(), self.spread[1].width()];
        match c {
            [Some(a), None] => Some(a),
            [None, Some(b)] => Some(b),
            [Some(a), Some(_)] if clear(wa, wb) => Some(a),
            [Some(_), Some(b)] if clear(wb, wa) => Some(b),
            _ => None,
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn the_host_is_the_address_in_every_packet_or_the_one_with_the_steadier_clock() {
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let c: IpAddr = "10.0.0.3".parse().unwrap();
        let mut g = HostGuess::default();
        // Captured on A: A's packets leave 100 ns after their tx_ts, B's
        // arrive 10 to 30 us after theirs (B's clock 1 ms ahead).
        for (i, delay) in [10_000u64, 30_000, 12_000].into_iter().enumerate() {
            let t = 5_000_000 + i as u64 * 100_000;
            g.packet(&a, &b, t + 100, t as u32);
            if i < 2 {
                assert_eq!(g.host(), None, "fewer than 2 packets of B");
            }
            g.packet(&b, &a, t + delay, (t + 1_000_000) as u32);
        }
        assert_eq!(g.host(), Some(a));
        g.packet(&c, &a, 9_000_000, 0);
        assert_eq!(g.host(), Some(a), "A is in every packet");
        g.packet(&b, &c, 9_100_000, 0);
        assert_eq!(g.host(), None);
    }
}
