//! Latency histograms (HdrHistogram, ns, 3 significant digits) and their
//! JSON summary.

use std::sync::OnceLock;

use hdrhistogram::Histogram;

/// A latency histogram in nanoseconds; created empty and small (it
/// resizes as larger values arrive).
#[derive(Debug, Clone)]
pub struct Hist {
    h: Histogram<u64>,
    min: u64,
    max: u64,
}

impl Default for Hist {
    fn default() -> Self {
        Hist::new()
    }
}

impl Hist {
    pub fn new() -> Self {
        let mut h = Histogram::<u64>::new(3).expect("3 significant digits is valid");
        h.auto(true);
        Hist {
            h,
            min: u64::MAX,
            max: 0,
        }
    }

    #[inline]
    pub fn record(&mut self, ns: u64) {
        // Auto-resize makes recording infallible for any u64 below the
        // histogram's hard limit; saturate rather than fail otherwise.
        if self.h.record(ns).is_err() {
            self.h.saturating_record(ns);
        }
        self.min = self.min.min(ns);
        self.max = self.max.max(ns);
    }

    pub fn len(&self) -> u64 {
        self.h.len()
    }

    /// The lowest value of the bucket `ns` falls in: a histogram's
    /// content is its count per bucket, so counts of these (summed over
    /// partitions of the samples) rebuild it ([`Hist::from_buckets`]).
    pub fn bucket_lowest(ns: u64) -> u64 {
        buckets().lowest_equivalent(ns)
    }

    /// The histogram of samples from `min` to `max` (exact) given as
    /// counts per bucket (`(bucket lowest value, count)`, a bucket may
    /// repeat): its summary is that of the samples themselves.
    pub fn from_buckets(min: u64, max: u64, counts: &[(u64, u64)]) -> Hist {
        let mut h = Hist::new();
        for &(bucket, n) in counts {
            if h.h.record_n(bucket, n).is_err() {
                h.h.saturating_record_n(bucket, n);
            }
        }
        if !h.h.is_empty() {
            h.min = min;
            h.max = max;
        }
        h
    }

    /// Adds `other`'s samples: the sum of two histograms is exactly the
    /// histogram of both sets of samples (same precision, counts added).
    pub fn add(&mut self, other: &Hist) {
        if self.h.add(&other.h).is_err() {
            // Only past the hard limit that `record` saturates at too.
            for v in other.h.iter_recorded() {
                self.h
                    .saturating_record_n(v.value_iterated_to(), v.count_at_value());
            }
        }
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    pub fn is_empty(&self) -> bool {
        self.h.is_empty()
    }

    pub fn inner(&self) -> &Histogram<u64> {
        &self.h
    }

    pub fn summary(&self) -> Summary {
        let h = &self.h;
        if h.is_empty() {
            return Summary::default();
        }
        summarise(h.len(), self.min, self.max, |q| h.value_at_quantile(q))
    }
}

/// The summary of `count` samples from `min` to `max` whose HdrHistogram
/// quantile values `value_at_quantile` gives: each percentile is the
/// lowest value of the quantile's bucket, or the exact extreme when the
/// bucket holds it.
fn summarise(count: u64, min: u64, max: u64, value_at_quantile: impl Fn(f64) -> u64) -> Summary {
    let h = buckets();
    let q = |q: f64| {
        let v = value_at_quantile(q);
        let (lo, hi) = (h.lowest_equivalent(v), h.highest_equivalent(v));
        if (lo..=hi).contains(&max) {
            max
        } else if (lo..=hi).contains(&min) {
            min
        } else {
            lo.clamp(min, max)
        }
    };
    Summary {
        count,
        min,
        p50: q(0.5),
        p90: q(0.9),
        p99: q(0.99),
        p999: q(0.999),
        max,
    }
}

/// An empty histogram of the engine's precision: its buckets (which value
/// falls in which) depend on the precision only, not on its counts.
fn buckets() -> &'static Histogram<u64> {
    static BUCKETS: OnceLock<Histogram<u64>> = OnceLock::new();
    BUCKETS.get_or_init(|| Histogram::new(3).expect("3 significant digits is valid"))
}

/// The summary of a few samples kept as they are: what a [`Hist`] of them
/// gives, exactly. HdrHistogram's value at quantile `q` of `n` samples is
/// the highest value of the bucket where the running count first reaches
/// `max(1, ceil(q * n))`, which is the bucket of the sorted samples'
/// `max(1, ceil(q * n))`-th.
fn few_summary(samples: &[u64]) -> Summary {
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    let (Some(&min), Some(&max)) = (sorted.first(), sorted.last()) else {
        return Summary::default();
    };
    let n = sorted.len() as u64;
    summarise(n, min, max, |q| {
        let k = ((q.min(1.0) * n as f64).ceil() as u64).clamp(1, n);
        buckets().highest_equivalent(sorted[k as usize - 1])
    })
}

/// `{"count", "min", "p50", "p90", "p99", "p999", "max"}` in ns; all 0
/// when `count` is 0. Values are HdrHistogram bucket values (3 significant
/// digits: the lowest value of the bucket, or the exact min/max when the
/// bucket holds it); `min` and `max` are exact.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Summary {
    pub count: u64,
    pub min: u64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
}

/// Samples a [`LazyHist`] keeps as they are before it takes a histogram:
/// a histogram of a range of tens of microseconds at 3 significant digits
/// holds about 64 KB of counts; 128 samples take 1 KB.
const FEW: usize = 128;

/// Samples this large go to a histogram at once (it saturates near the
/// top of the u64 range; the few-samples summary would not).
const FEW_BELOW: u64 = 1 << 62;

#[derive(Debug, Clone)]
enum Samples {
    /// Up to [`FEW`] samples, as recorded.
    Few(Vec<u64>),
    Dense(Hist),
}

/// A latency histogram that costs nothing until its first sample, then
/// keeps its first [`FEW`] samples as they are (most paths of a capture of
/// short connections get a handful), and only then takes a [`Hist`]. Its
/// summary is the same either way ([`few_summary`]).
#[derive(Debug, Clone, Default)]
pub struct LazyHist(Option<Box<Samples>>);

impl LazyHist {
    /// Always inlined: each call site is a hot path of its own (a
    /// direction's parts live in several files, compiled apart).
    #[inline(always)]
    pub fn record(&mut self, ns: u64) {
        match self.0.as_deref_mut() {
            Some(Samples::Few(few)) if few.len() < FEW && ns < FEW_BELOW => few.push(ns),
            Some(Samples::Dense(h)) => h.record(ns),
            _ => self.record_cold(ns),
        }
    }

    /// [`LazyHist::record`] of the first sample, or of the one that turns
    /// the samples into a histogram.
    #[cold]
    #[inline(never)]
    fn record_cold(&mut self, ns: u64) {
        match self.0.as_deref_mut() {
            None if ns < FEW_BELOW => self.0 = Some(Box::new(Samples::Few(vec![ns]))),
            Some(Samples::Few(few)) => {
                let mut h = Hist::new();
                for &v in few.iter() {
                    h.record(v);
                }
                h.record(ns);
                self.0 = Some(Box::new(Samples::Dense(h)));
            }
            _ => {
                let mut h = Hist::new();
                h.record(ns);
                self.0 = Some(Box::new(Samples::Dense(h)));
            }
        }
    }

    pub fn summary(&self) -> Summary {
        match self.0.as_deref() {
            None => Summary::default(),
            Some(Samples::Few(few)) => few_summary(few),
            Some(Samples::Dense(h)) => h.summary(),
        }
    }

    /// The histogram of every sample of `parts`. A sample is recorded once,
    /// in the finest histogram it belongs to (a path's, an op's); coarser
    /// ones (a direction's) are sums made for a report: fewer recordings,
    /// the same summaries.
    pub fn sum<'a>(parts: impl IntoIterator<Item = &'a LazyHist>) -> LazyHist {
        let mut sum = LazyHist::default();
        for part in parts.into_iter().filter_map(|p| p.0.as_deref()) {
            match (sum.0.as_deref_mut(), part) {
                (None, part) => sum.0 = Some(Box::new(part.clone())),
                (Some(Samples::Dense(sum)), Samples::Dense(part)) => sum.add(part),
                (_, Samples::Few(few)) => {
                    for &ns in few {
                        sum.record(ns);
                    }
                }
                (Some(Samples::Few(few)), Samples::Dense(part)) => {
                    let mut h = part.clone();
                    for &ns in few.iter() {
                        h.record(ns);
                    }
                    sum.0 = Some(Box::new(Samples::Dense(h)));
                }
            }
        }
        sum
    }

    /// The summary as if `more` had been recorded too (on a copy: the
    /// histogram itself is unchanged).
    pub fn summary_with(&self, more: impl IntoIterator<Item = u64>) -> Summary {
        let mut more = more.into_iter().peekable();
        if more.peek().is_none() {
            return self.summary();
        }
        let mut copy = self.clone();
        for ns in more {
            copy.record(ns);
        }
        copy.summary()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Recording samples into parts and summing them gives the summary
        /// of recording them all into one histogram.
        #[test]
        fn a_sum_of_parts_summarises_like_one_histogram(
            samples in prop::collection::vec((0usize..4, 0u64..(1 << 40)), 0..300),
        ) {
            let mut parts: [LazyHist; 4] = Default::default();
            let mut whole = LazyHist::default();
            for &(part, ns) in &samples {
                parts[part].record(ns);
                whole.record(ns);
            }
            prop_assert_eq!(LazyHist::sum(&parts).summary(), whole.summary());
        }
    }

    proptest! {
        /// A few samples kept as they are summarise exactly as a
        /// histogram of them does, alone and summed with histograms (parts
        /// of up to 300 samples: some stay few, some turn dense).
        #[test]
        fn few_samples_summarise_as_a_histogram(
            parts in prop::collection::vec(
                prop::collection::vec(
                    prop_oneof![0u64..4096, 0u64..(1 << 40), Just(0), Just(u64::MAX)],
                    0..300,
                ),
                1..4,
            ),
        ) {
            let mut lazy: Vec<LazyHist> = Vec::new();
            let mut whole = Hist::new();
            for part in &parts {
                let mut h = LazyHist::default();
                let mut dense = Hist::new();
                for &ns in part {
                    h.record(ns);
                    dense.record(ns);
                    whole.record(ns);
                }
                let want = if part.is_empty() { Summary::default() } else { dense.summary() };
                prop_assert_eq!(h.summary(), want);
                lazy.push(h);
            }
            let want = if whole.is_empty() { Summary::default() } else { whole.summary() };
            prop_assert_eq!(LazyHist::sum(&lazy).summary(), want);
        }
    }

    #[test]
    fn the_sum_of_nothing_is_empty() {
        let parts: [LazyHist; 2] = Default::default();
        assert_eq!(LazyHist::sum(&parts).summary(), Summary::default());
    }
}
