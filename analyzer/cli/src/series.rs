//! Per-direction series taken from the verdict stream: ACK-RTT samples per
//! path, message-latency samples, and PSN-versus-time points. The engine's
//! `Report` holds percentiles only; the charts that show a distribution or
//! a sequence over time (`plot`'s PNG/SVG, `report --html`) draw these.
//!
//! Nothing here is computed anew: every value is a verdict's (`ack_rtt_ns`,
//! `retransmission`) or a completed message's latency, filed under the
//! direction it belongs to. Memory is bounded by [`Caps`]: each series keeps
//! at most `samples` values (a uniform reservoir sample beyond that) and
//! each PSN series at most `points` points (every k-th packet, k doubling
//! as needed; retransmissions are always kept).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::Path;

use crate::pipeline::Sink;
use analyzer::engine::{MrBody, MsgDone, MsgView, ObsKind, Observation, Verdict};

/// A connection direction: source address and connection, destination
/// address and connection.
pub type DirKey = (IpAddr, u32, IpAddr, u32);

/// `10.0.0.1:256 -> 10.0.0.2:512`, as the text report writes a direction.
pub fn dir_name(k: &DirKey) -> String {
    format!("{}:{} -> {}:{}", k.0, k.1, k.2, k.3)
}

/// How much each series keeps.
#[derive(Debug, Clone, Copy)]
pub struct Caps {
    /// Most samples per latency series.
    pub samples: usize,
    /// Most points per PSN-versus-time series.
    pub points: usize,
}

/// A bounded uniform sample (reservoir, deterministic).
#[derive(Debug, Default)]
pub struct Samples {
    /// Samples offered (kept or not).
    pub seen: u64,
    pub values: Vec<u64>,
    cap: usize,
    rng: u64,
}

impl Samples {
    fn with_cap(cap: usize) -> Samples {
        Samples {
            cap: cap.max(1),
            ..Samples::default()
        }
    }

    fn push(&mut self, v: u64) {
        self.seen += 1;
        if self.values.len() < self.cap {
            self.values.push(v);
            return;
        }
        self.rng = self
            .rng
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let j = (self.rng >> 11) % self.seen;
        if (j as usize) < self.cap {
            self.values[j as usize] = v;
        }
    }
}

/// One DATA transmission on a PSN-versus-time chart.
#[derive(Debug, Clone, Copy)]
pub struct PsnPoint {
    pub ts_ns: u64,
    pub psn: u32,
    pub ev: u16,
    pub retransmission: bool,
}

/// PSN-versus-time points, thinned to every `stride`-th first transmission.
#[derive(Debug, Default)]
pub struct Points {
    /// Every `stride`-th first transmission is kept (1: all of them).
    pub stride: u64,
    /// DATA transmissions offered.
    pub n: u64,
    /// The PSN of the direction's first DATA: the chart's origin.
    pub first_psn: Option<u32>,
    pub pts: Vec<PsnPoint>,
    cap: usize,
}

impl Points {
    fn with_cap(cap: usize) -> Points {
        Points {
            stride: 1,
            cap: cap.max(2),
            ..Points::default()
        }
    }

    fn push(&mut self, p: PsnPoint) {
        self.first_psn.get_or_insert(p.psn);
        self.n += 1;
        // Retransmissions are always kept: they are what the chart is for.
        if !p.retransmission && !self.n.is_multiple_of(self.stride) {
            return;
        }
        self.pts.push(p);
        if self.pts.len() >= self.cap {
            self.stride *= 2;
            let mut i = 0u64;
            self.pts.retain(|p| {
                i += 1;
                p.retransmission || i.is_multiple_of(2)
            });
        }
    }

    /// The PSN relative to the direction's first DATA, in serial arithmetic
    /// (PSNs are 32-bit and wrap): a PSN space that starts high or wraps
    /// through 0 still rises from 0.
    pub fn relative(&self, psn: u32) -> i64 {
        i64::from(psn.wrapping_sub(self.first_psn.unwrap_or(0)) as i32)
    }
}

/// The series of one connection direction.
#[derive(Debug)]
pub struct DirSeries {
    /// ACK-RTT samples per ev of the echoed transmission.
    pub rtt_by_ev: BTreeMap<u16, Samples>,
    /// Message latencies, one view per direction (see [`DirSeries::msg_view`]).
    pub msg: Samples,
    /// What `msg` measures: "completion (acked, sender view)", "delivery
    /// (receiver view)" or "READ completion". The sender view wins when a
    /// capture sees both.
    pub msg_view: Option<&'static str>,
    pub psn: Points,
    caps: Caps,
}

impl DirSeries {
    fn new(caps: Caps) -> DirSeries {
        DirSeries {
            rtt_by_ev: BTreeMap::new(),
            msg: Samples::with_cap(caps.samples),
            msg_view: None,
            psn: Points::with_cap(caps.points),
            caps,
        }
    }
}

/// The directions of one capture.
pub type CaptureSeries = BTreeMap<DirKey, DirSeries>;

/// A sink that files every verdict's samples under its direction, per
/// capture.
pub struct Collector {
    caps: Caps,
    captures: Vec<CaptureSeries>,
}

impl Collector {
    pub fn new(caps: Caps) -> Collector {
        Collector {
            caps,
            captures: Vec::new(),
        }
    }

    /// The series of capture `index` (empty if it had none).
    pub fn capture(&self, index: usize) -> Option<&CaptureSeries> {
        self.captures.get(index)
    }

    /// Takes the series of capture `index` out of the collector (to draw
    /// and drop them as soon as a capture ends).
    pub fn take(&mut self, index: usize) -> CaptureSeries {
        self.captures
            .get_mut(index)
            .map(std::mem::take)
            .unwrap_or_default()
    }
}

impl Sink for Collector {
    fn begin_capture(&mut self, index: usize, _path: &Path, _stem: &str) {
        while self.captures.len() <= index {
            self.captures.push(BTreeMap::new());
        }
        self.captures[index] = BTreeMap::new();
    }

    fn packet(&mut self, capture: usize, obs: &Observation, v: &Verdict, done: &[MsgDone]) {
        let ObsKind::MetaRoce(mr) = &obs.kind else {
            return;
        };
        let caps = self.caps;
        let Some(dirs) = self.captures.get_mut(capture) else {
            return;
        };
        let own = (obs.src, mr.src_conn, obs.dst, mr.dst_conn);
        let reverse = (obs.dst, mr.dst_conn, obs.src, mr.src_conn);
        match &mr.body {
            MrBody::Data(_) => {
                dirs.entry(own)
                    .or_insert_with(|| DirSeries::new(caps))
                    .psn
                    .push(PsnPoint {
                        ts_ns: obs.ts_ns,
                        psn: mr.psn,
                        ev: mr.ev,
                        retransmission: v.retransmission.is_some(),
                    });
            }
            MrBody::Feedback(fb) => {
                if let Some(rtt) = v.ack_rtt_ns {
                    dirs.entry(reverse)
                        .or_insert_with(|| DirSeries::new(caps))
                        .rtt_by_ev
                        .entry(fb.echo_ev)
                        .or_insert_with(|| Samples::with_cap(caps.samples))
                        .push(rtt);
                }
            }
            _ => {}
        }
        for m in done {
            let (key, view) = match m.view {
                MsgView::Delivered => (own, "delivery (receiver view)"),
                MsgView::Acked => (reverse, "completion (acked, sender view)"),
                MsgView::Read => (reverse, "READ completion"),
            };
            let d = dirs.entry(key).or_insert_with(|| DirSeries::new(caps));
            // One view per chart: the sender view wins when both exist.
            match (d.msg_view, m.view) {
                (Some(v0), MsgView::Acked) if v0 != view => {
                    d.msg = Samples::with_cap(d.caps.samples);
                    d.msg_view = Some(view);
                }
                (Some(v0), _) if v0 != view => continue,
                _ => d.msg_view = Some(view),
            }
            d.msg.push(m.latency_ns);
        }
    }
}

/// Samples binned for a histogram chart: [`BINS`] linear bins from the
/// smallest sample to the p99.9 (larger samples go into the last bin),
/// widened to a readable range around (nearly) equal samples.
pub struct Binned {
    /// The samples, sorted.
    pub sorted: Vec<u64>,
    /// The first bin's lower edge and every bin's width, in ns.
    pub lo: u64,
    pub width: f64,
    pub counts: [u64; BINS],
}

/// Bins of a [`Binned`] histogram.
pub const BINS: usize = 40;

impl Binned {
    pub fn new(values: &[u64]) -> Binned {
        let mut sorted = values.to_vec();
        sorted.sort_unstable();
        let mut lo = sorted.first().copied().unwrap_or(0);
        let mut hi = quantile(&sorted, 0.999).max(lo + 1);
        let span = (lo / 5).max(1000);
        if hi - lo < span {
            let mid = lo + (hi - lo) / 2;
            lo = mid.saturating_sub(span / 2);
            hi = lo + span;
        }
        let width = (hi - lo) as f64 / BINS as f64;
        let mut counts = [0u64; BINS];
        for &x in &sorted {
            let b = ((x.saturating_sub(lo) as f64 / width) as usize).min(BINS - 1);
            counts[b] += 1;
        }
        Binned {
            sorted,
            lo,
            width,
            counts,
        }
    }

    /// The upper edge of the last bin.
    pub fn hi(&self) -> f64 {
        self.lo as f64 + self.width * BINS as f64
    }

    /// The largest bin's count (at least 1).
    pub fn peak(&self) -> u64 {
        self.counts.iter().copied().max().unwrap_or(1).max(1)
    }
}

/// The value at quantile `q` (0 to 1) of sorted samples (nearest rank).
pub fn quantile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservoir_keeps_its_cap_and_counts_every_sample() {
        let mut s = Samples::with_cap(10);
        for v in 0..1000 {
            s.push(v);
        }
        assert_eq!(s.seen, 1000);
        assert_eq!(s.values.len(), 10);
    }

    #[test]
    fn points_thin_first_transmissions_but_keep_retransmissions() {
        let mut p = Points::with_cap(100);
        for i in 0..1000u32 {
            p.push(PsnPoint {
                ts_ns: u64::from(i),
                psn: i,
                ev: 0,
                retransmission: i % 100 == 7,
            });
        }
        assert_eq!(p.n, 1000);
        assert!(p.pts.len() < 100, "{}", p.pts.len());
        assert_eq!(p.pts.iter().filter(|q| q.retransmission).count(), 10);
        assert!(p.stride > 1);
    }

    #[test]
    fn bins_span_min_to_p999_and_widen_around_equal_samples() {
        let b = Binned::new(&[5_000; 10]);
        assert_eq!(b.counts.iter().sum::<u64>(), 10);
        assert!(b.lo < 5_000 && b.hi() > 5_000.0);
        let values: Vec<u64> = (0..10_000).collect();
        let b = Binned::new(&values);
        assert_eq!(b.lo, 0);
        assert_eq!(b.counts.iter().sum::<u64>(), 10_000);
        assert!((b.hi() - 9_989.0).abs() < 1.0, "{}", b.hi());
    }

    #[test]
    fn relative_psn_crosses_the_wrap() {
        let mut p = Points::with_cap(10);
        p.push(PsnPoint {
            ts_ns: 0,
            psn: u32::MAX,
            ev: 0,
            retransmission: false,
        });
        assert_eq!(p.relative(u32::MAX), 0);
        assert_eq!(p.relative(1), 2);
    }
}
