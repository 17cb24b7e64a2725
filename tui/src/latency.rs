//! The live latency histogram: every ACK RTT sample the engine's verdicts
//! carry (all flows), as HdrHistogram percentiles and 1-2-5 display
//! buckets from 1 us to 1 s.

use hdrhistogram::Histogram;
use serde::Serialize;

/// Upper bounds (ns, exclusive) of the display buckets; the last bucket
/// holds everything at or above 1 s.
pub const BUCKET_BOUNDS_NS: [u64; 19] = [
    1_000,
    2_000,
    5_000,
    10_000,
    20_000,
    50_000,
    100_000,
    200_000,
    500_000,
    1_000_000,
    2_000_000,
    5_000_000,
    10_000_000,
    20_000_000,
    50_000_000,
    100_000_000,
    200_000_000,
    500_000_000,
    1_000_000_000,
];

/// Number of display buckets (the bounds plus the overflow bucket).
pub const BUCKETS: usize = BUCKET_BOUNDS_NS.len() + 1;

/// Short label of bucket `i` (its lower bound).
pub fn bucket_label(i: usize) -> String {
    let lower = if i == 0 { 0 } else { BUCKET_BOUNDS_NS[i - 1] };
    short_ns(lower)
}

/// "0", "1u", "20u", "5m", "1s": compact time for axis labels.
pub fn short_ns(ns: u64) -> String {
    if ns == 0 {
        "0".into()
    } else if ns < 1_000 {
        format!("{ns}n")
    } else if ns < 1_000_000 {
        format!("{}u", ns / 1_000)
    } else if ns < 1_000_000_000 {
        format!("{}m", ns / 1_000_000)
    } else {
        format!("{}s", ns / 1_000_000_000)
    }
}

/// Index of the display bucket holding `ns`.
pub fn bucket_of(ns: u64) -> usize {
    BUCKET_BOUNDS_NS.partition_point(|&b| b <= ns)
}

/// Accumulates RTT samples (capture thread).
#[derive(Debug, Clone)]
pub struct LatencyRecorder {
    h: Histogram<u64>,
    buckets: [u64; BUCKETS],
    max: u64,
}

impl Default for LatencyRecorder {
    fn default() -> Self {
        let mut h = Histogram::<u64>::new(3).expect("3 significant digits is valid");
        h.auto(true);
        LatencyRecorder {
            h,
            buckets: [0; BUCKETS],
            max: 0,
        }
    }
}

impl LatencyRecorder {
    #[inline]
    pub fn record(&mut self, ns: u64) {
        if self.h.record(ns).is_err() {
            self.h.saturating_record(ns);
        }
        self.buckets[bucket_of(ns)] += 1;
        self.max = self.max.max(ns);
    }

    /// The histogram as the UI shows it.
    pub fn view(&self) -> LatencyView {
        let q = |q: f64| {
            if self.h.is_empty() {
                0
            } else {
                self.h.value_at_quantile(q).min(self.max)
            }
        };
        LatencyView {
            count: self.h.len(),
            p50_ns: q(0.5),
            p99_ns: q(0.99),
            p999_ns: q(0.999),
            max_ns: self.max,
            buckets: self.buckets.to_vec(),
        }
    }
}

/// A copy of the histogram for one frame (and the JSON snapshot).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LatencyView {
    pub count: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
    /// Sample counts of the display buckets ([`BUCKET_BOUNDS_NS`]).
    pub buckets: Vec<u64>,
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn buckets_split_at_their_bounds() {
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(999), 0);
        assert_eq!(bucket_of(1_000), 1);
        assert_eq!(bucket_of(24_000), 5);
        assert_eq!(bucket_of(1_000_000_000), BUCKETS - 1);
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn percentiles_follow_the_samples() {
        let mut r = LatencyRecorder::default();
        for _ in 0..990 {
            r.record(10_000);
        }
        for _ in 0..10 {
            r.record(1_000_000);
        }
        let v = r.view();
        assert_eq!(v.count, 1000);
        assert!((9_990..=10_010).contains(&v.p50_ns), "{v:?}");
        assert!(v.p999_ns >= 999_000, "{v:?}");
        assert_eq!(v.buckets.iter().sum::<u64>(), 1000);
        assert_eq!(bucket_label(5), "20u");
    }
}
