//! Clock offsets and the `between_captures` report from the matches: per
//! path the sums of `ts_b - ts_a`, a reservoir of samples or, in a reduce,
//! histogram bucket counts of the one-way delays.

use rustc_hash::FxHashMap;

use super::super::direction::{DirKey, PackedKey};
use super::super::hist::Hist;
use super::super::report::{BetweenPath, BetweenReport};
use super::{CrossCapture, FlowId, Offsets};

/// The end margin of a path, in its largest measured one-way delays: a
/// copy later than that is not expected (delays vary; a few times the
/// largest seen leaves room for queueing the captures did not show).
pub(super) const END_MARGIN_DELAYS: i128 = 4;

/// The largest offset-corrected one-way delay of a path's samples,
/// whichever capture sees it first (`ts_b - ts_a` is `offset + delay`
/// one way, `offset - delay` the other).
pub(super) fn max_one_way_delay(d: &PathDeltas, offset: i64) -> i64 {
    d.max
        .saturating_sub(offset)
        .max(offset.saturating_sub(d.min))
}

/// Time differences `ts_b - ts_a` of one direction and ev between captures
/// a < b.
#[derive(Debug, Clone)]
pub(super) struct PathDeltas {
    pub(super) rocev2: bool,
    pub(super) dir: DirKey,
    pub(super) ev: u16,
    pub(super) n: u64,
    pub(super) min: i64,
    pub(super) max: i64,
    pub(super) sum: i128,
    pub(super) samples: Vec<i64>,
    /// One-way delays as histogram bucket counts (lowest value of the
    /// bucket, count), added by [`CrossCapture::add_one_way_delays`]
    /// instead of samples.
    pub(super) owd_buckets: Vec<(u64, u64)>,
}

/// `ts_b - ts_a` over every ev of a direction (RoCEv2: of a host pair),
/// for the clock offset.
#[derive(Debug, Clone, Copy)]
pub(super) struct DirSpread {
    pub(super) rocev2: bool,
    pub(super) dir: DirKey,
    pub(super) min: i64,
    pub(super) max: i64,
    pub(super) sum: i128,
    pub(super) n: u64,
}

/// The one-way delay of a matched transmission whose copies differ by
/// `delta` = `ts_b - ts_a` on a path whose packets reach capture a first
/// (`a_first`) or b first, with b's clock `offset` ahead of a's; at least
/// 0 (clocks estimated from minimum delays can leave a sample below).
pub fn one_way_delay(a_first: bool, delta: i64, offset: i64) -> u64 {
    let owd = if a_first {
        delta.saturating_sub(offset)
    } else {
        offset.saturating_sub(delta)
    };
    owd.max(0) as u64
}

impl CrossCapture {
    /// The largest one-way delay measured from `from` to the other
    /// capture of the pair (a, b) on `flow`'s path `ev`, or on any path of
    /// the pair when that one has no match; `None` without any.
    pub(super) fn max_delay(
        &self,
        a: u16,
        b: u16,
        offset: i64,
        flow: FlowId,
        ev: u16,
    ) -> Option<i64> {
        let owd = |d: &PathDeltas| max_one_way_delay(d, offset);
        self.deltas.get(&(a, b, flow, ev)).map(owd).or_else(|| {
            self.deltas
                .iter()
                .filter(|(k, _)| k.0 == a && k.1 == b)
                .map(|(_, d)| owd(d))
                .max()
        })
    }

    /// The clock offsets estimated so far.
    pub fn offsets(&self) -> Offsets {
        Offsets(
            self.report()
                .iter()
                .filter(|r| r.offset_estimated)
                .map(|r| ((r.capture_a as u16, r.capture_b as u16), r.clock_offset_ns))
                .collect(),
        )
    }

    pub fn report(&self) -> Vec<BetweenReport> {
        let mut pairs: Vec<(u16, u16)> = self.deltas.keys().map(|k| (k.0, k.1)).collect();
        pairs.sort_unstable();
        pairs.dedup();
        let mut out = Vec::new();
        for (a, b) in pairs {
            let dirs: Vec<&PathDeltas> = self
                .deltas
                .iter()
                .filter(|(k, _)| k.0 == a && k.1 == b)
                .map(|(_, v)| v)
                .collect();
            // Per direction (all evs): min, max, mean of ts_b - ts_a. A
            // RoCEv2 flow's reverse is any RoCEv2 flow between the same
            // hosts the other way (responses go to the requester's QP),
            // so RoCEv2 flows are grouped by host pair.
            let group = |rocev2: bool, dir: DirKey| -> (bool, PackedKey) {
                let dir = if rocev2 {
                    DirKey {
                        src_conn: 0,
                        dst_conn: 0,
                        ..dir
                    }
                } else {
                    dir
                };
                (rocev2, dir.packed())
            };
            let mut per_dir: FxHashMap<(bool, PackedKey), DirSpread> = FxHashMap::default();
            for d in &dirs {
                let e = per_dir.entry(group(d.rocev2, d.dir)).or_insert(DirSpread {
                    rocev2: d.rocev2,
                    dir: d.dir,
                    min: i64::MAX,
                    max: i64::MIN,
                    sum: 0,
                    n: 0,
                });
                e.min = e.min.min(d.min);
                e.max = e.max.max(d.max);
                e.sum += d.sum;
                e.n += d.n;
            }
            let mut estimates = Vec::new();
            for d in per_dir.values() {
                let Some(r) = per_dir.get(&group(d.rocev2, d.dir.reverse())) else {
                    continue;
                };
                let mean = d.sum as f64 / d.n as f64;
                let rmean = r.sum as f64 / r.n as f64;
                // The NTP estimate, with the direction seen first at a.
                let (forward, reverse) = if mean > rmean { (d, r) } else { (r, d) };
                estimates.push(((i128::from(forward.min) + i128::from(reverse.max)) / 2) as i64);
            }
            let offset_estimated = !estimates.is_empty();
            let offset = if offset_estimated {
                (estimates.iter().map(|&e| i128::from(e)).sum::<i128>() / estimates.len() as i128)
                    as i64
            } else {
                0
            };
            let mut paths = Vec::new();
            let mut matched_packets = 0;
            for d in &dirs {
                matched_packets += d.n;
                let mean = (d.sum / i128::from(d.n.max(1))) as i64;
                let a_first = mean >= offset;
                let (up, down) = if a_first { (a, b) } else { (b, a) };
                let h = if d.owd_buckets.is_empty() {
                    let mut h = Hist::new();
                    for &s in &d.samples {
                        h.record(one_way_delay(a_first, s, offset));
                    }
                    h
                } else {
                    // The extremes are exact: the delay is monotonic in
                    // ts_b - ts_a.
                    let (lo, hi) = (
                        one_way_delay(a_first, d.min, offset),
                        one_way_delay(a_first, d.max, offset),
                    );
                    Hist::from_buckets(lo.min(hi), lo.max(hi), &d.owd_buckets)
                };
                let flow = FlowId {
                    rocev2: d.rocev2,
                    dir: d.dir.packed(),
                };
                let lost = self.unmatched.get(&(up, flow, d.ev)).copied().unwrap_or(0);
                let unknown = self.unknown.get(&(up, flow, d.ev)).copied().unwrap_or(0);
                let end_margin_ns =
                    max_one_way_delay(d, offset).max(0) as u64 * END_MARGIN_DELAYS as u64;
                paths.push(BetweenPath {
                    proto: if d.rocev2 { "rocev2" } else { "metaroce" },
                    src: d.dir.src,
                    dst: d.dir.dst,
                    src_conn: d.dir.src_conn,
                    dst_conn: d.dir.dst_conn,
                    ev: d.ev,
                    upstream: u64::from(up),
                    downstream: u64::from(down),
                    matched: d.n,
                    lost_between: lost,
                    unknown,
                    end_margin_ns,
                    one_way_delay_ns: h.summary(),
                });
            }
            paths.sort_by_key(|p| (p.proto, p.src, p.dst, p.src_conn, p.dst_conn, p.ev));
            out.push(BetweenReport {
                capture_a: u64::from(a),
                capture_b: u64::from(b),
                clock_offset_ns: offset,
                offset_estimated,
                matched_packets,
                paths,
            });
        }
        out
    }
}
