//! Latency histograms (HdrHistogram, ns, 3 significant digits) and their
//! JSON summary.

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
        // Bucket values, clamped to the exact extremes.
        // The lowest value of the quantile's bucket, or the exact extreme
        // when the bucket holds it.
        let q = |q: f64| {
            let v = h.value_at_quantile(q);
            let (lo, hi) = (h.lowest_equivalent(v), h.highest_equivalent(v));
            if (lo..=hi).contains(&self.max) {
                self.max
            } else if (lo..=hi).contains(&self.min) {
                self.min
            } else {
                lo.clamp(self.min, self.max)
            }
        };
        Summary {
            count: h.len(),
            min: self.min,
            p50: q(0.5),
            p90: q(0.9),
            p99: q(0.99),
            p999: q(0.999),
            max: self.max,
        }
    }
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

/// An optional, lazily allocated histogram (per path: most paths of a
/// short capture never get a sample).
#[derive(Debug, Clone, Default)]
pub struct LazyHist(Option<Box<Hist>>);

impl LazyHist {
    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.0
            .get_or_insert_with(|| Box::new(Hist::new()))
            .record(ns);
    }

    pub fn summary(&self) -> Summary {
        self.0
            .as_ref()
            .map_or_else(Summary::default, |h| h.summary())
    }

    /// The histogram of every sample of `parts`. A sample is recorded once,
    /// in the finest histogram it belongs to (a path's, an op's); coarser
    /// ones (a direction's) are sums made for a report: fewer recordings,
    /// the same summaries.
    pub fn sum<'a>(parts: impl IntoIterator<Item = &'a LazyHist>) -> LazyHist {
        let mut sum: Option<Box<Hist>> = None;
        for part in parts.into_iter().filter_map(|p| p.0.as_deref()) {
            match &mut sum {
                Some(sum) => sum.add(part),
                None => sum = Some(Box::new(part.clone())),
            }
        }
        LazyHist(sum)
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

    #[test]
    fn the_sum_of_nothing_is_empty() {
        let parts: [LazyHist; 2] = Default::default();
        assert_eq!(LazyHist::sum(&parts).summary(), Summary::default());
    }
}
