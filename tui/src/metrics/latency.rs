//! Latency histograms for Prometheus, with fixed bucket bounds.
//!
//! The engine's report carries latency *summaries* (count, min, percentiles,
//! max), not bucket counts, and its HdrHistograms (3 significant digits)
//! cannot be cut exactly at decimal bounds (one of their buckets may hold
//! both 5,000 and 5,003 ns). So the capture thread records the samples the
//! engine's verdicts carry (the same samples the engine records: a
//! feedback's ACK RTT and fabric RTT, every completed message's latency)
//! straight into Prometheus buckets: each sample is counted once, in the
//! first bucket whose bound it does not exceed, and the exposition sums
//! them into cumulative `le` buckets. Counts are exact by construction, and
//! `_count` equals the report summary's `count` (tests check it).

use std::net::IpAddr;
use std::sync::Arc;

use analyzer::engine::{MsgDone, MsgView, ObsKind};
use analyzer::{Observation, Verdict};
use rustc_hash::FxHashMap;

/// Bucket bounds (`le`, inclusive), ns: the 1-2-5 steps of the latency
/// pane, from 1 us (a sub-microsecond RTT lands in the first bucket) to
/// 1 s; `+Inf` above.
pub const BOUNDS_NS: [u64; 19] = crate::latency::BUCKET_BOUNDS_NS;

/// One histogram: samples per bucket (not cumulative; the last is `+Inf`),
/// their count and their sum.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hist {
    pub buckets: [u64; BOUNDS_NS.len() + 1],
    pub count: u64,
    pub sum_ns: u128,
}

impl Hist {
    #[inline]
    pub fn record(&mut self, ns: u64) {
        // The first bound the sample does not exceed (`le` is inclusive).
        self.buckets[BOUNDS_NS.partition_point(|&b| b < ns)] += 1;
        self.count += 1;
        self.sum_ns += u128::from(ns);
    }

    /// Adds `other`'s samples (folding series).
    pub fn add(&mut self, other: &Hist) {
        for (a, b) in self.buckets.iter_mut().zip(other.buckets) {
            *a += b;
        }
        self.count += other.count;
        self.sum_ns += other.sum_ns;
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
}

/// The latency histograms of one MetaRoCE direction (or RoCEv2 flow), as
/// the report's summaries of the same names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Latencies {
    pub ack_rtt: Hist,
    /// Non-negative fabric RTTs only (the engine keeps the same).
    pub fabric_rtt: Hist,
    /// Sender view (acked) and READs: `msg_completion_ns`.
    pub completion: Hist,
    /// Receiver view: `msg_delivery_ns`.
    pub delivery: Hist,
}

/// What a series (and a histogram) is keyed by: a DATA direction's (or a
/// RoCEv2 flow's requester and responder) addresses, and the connection
/// ids when the exporter is asked for connections; `Other` holds what the
/// series limit folded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SeriesKey {
    Flow {
        src: IpAddr,
        dst: IpAddr,
        /// (src_conn, dst_conn) of a MetaRoCE direction, per connection.
        conns: Option<(u32, u32)>,
    },
    Other,
}

/// One protocol's histograms by series. Fx: the capture thread looks a
/// key up for every feedback packet, and SipHash over two addresses was
/// the exporter's largest cost there.
pub type SeriesTable = FxHashMap<SeriesKey, Latencies>;

/// The histograms published with a snapshot.
#[derive(Debug, Clone, Default)]
pub struct Histograms {
    pub metaroce: SeriesTable,
    pub rocev2: SeriesTable,
}

/// Records the verdicts' samples on the capture thread; publishes a copy
/// when something changed.
#[derive(Debug)]
pub struct Recorder {
    per_connection: bool,
    max_keys: usize,
    tables: Histograms,
    published: Arc<Histograms>,
    dirty: bool,
}

impl Recorder {
    /// `max_keys` histogram keys per protocol; later keys fold into
    /// [`SeriesKey::Other`].
    pub fn new(per_connection: bool, max_keys: usize) -> Recorder {
        Recorder {
            per_connection,
            max_keys: max_keys.max(1),
            tables: Histograms::default(),
            published: Arc::default(),
            dirty: false,
        }
    }

    /// Forgets every sample (the analysis was reset).
    pub fn clear(&mut self) {
        self.tables = Histograms::default();
        self.dirty = true;
    }

    /// The samples of one packet's verdict: `done` is what
    /// `Engine::messages_done` returned for it.
    #[inline]
    pub fn record(&mut self, obs: &Observation, v: &Verdict, done: &[MsgDone]) {
        if v.ack_rtt_ns.is_none() && done.is_empty() {
            return;
        }
        self.record_cold(obs, v, done);
    }

    #[inline(never)]
    fn record_cold(&mut self, obs: &Observation, v: &Verdict, done: &[MsgDone]) {
        self.dirty = true;
        let max = self.max_keys;
        match &obs.kind {
            ObsKind::MetaRoce(mr) => {
                let conns = |a, b| self.per_connection.then_some((a, b));
                // A feedback (the RTTs, an acked completion, a READ's last
                // response) is about the reverse direction's DATA; a
                // delivery completes at the receiver's last DATA packet.
                let reverse = SeriesKey::Flow {
                    src: obs.dst,
                    dst: obs.src,
                    conns: conns(mr.dst_conn, mr.src_conn),
                };
                let forward = SeriesKey::Flow {
                    src: obs.src,
                    dst: obs.dst,
                    conns: conns(mr.src_conn, mr.dst_conn),
                };
                let table = &mut self.tables.metaroce;
                if let Some(rtt) = v.ack_rtt_ns {
                    let l = entry(table, reverse, max);
                    l.ack_rtt.record(rtt);
                    if let Some(f) = v.fabric_rtt_ns.and_then(|f| u64::try_from(f).ok()) {
                        l.fabric_rtt.record(f);
                    }
                }
                for m in done {
                    match m.view {
                        MsgView::Delivered => {
                            entry(table, forward, max).delivery.record(m.latency_ns)
                        }
                        MsgView::Acked | MsgView::Read => {
                            entry(table, reverse, max).completion.record(m.latency_ns)
                        }
                    }
                }
            }
            ObsKind::RoceV2(_) => {
                // Responses (ACK, NAK, READ response) carry both: the flow
                // is the requester's, the reverse of the packet. Keyed by
                // host pair only: a response names the requester's QP, not
                // the flow's.
                let reverse = SeriesKey::Flow {
                    src: obs.dst,
                    dst: obs.src,
                    conns: None,
                };
                let l = entry(&mut self.tables.rocev2, reverse, max);
                if let Some(rtt) = v.ack_rtt_ns {
                    l.ack_rtt.record(rtt);
                }
                for m in done {
                    l.completion.record(m.latency_ns);
                }
            }
        }
    }

    /// The histograms as of now (a new copy only when samples came since
    /// the last call).
    pub fn publish(&mut self) -> Arc<Histograms> {
        if self.dirty {
            self.dirty = false;
            self.published = Arc::new(self.tables.clone());
        }
        self.published.clone()
    }
}

fn entry(table: &mut SeriesTable, key: SeriesKey, max: usize) -> &mut Latencies {
    // Keys beyond the limit fold into `Other` (which does not count). The
    // lookups for the limit are made only near it: this runs per feedback.
    let full = table.len() >= max
        && table.len() >= max.saturating_add(usize::from(table.contains_key(&SeriesKey::Other)));
    let key = if full && !table.contains_key(&key) {
        SeriesKey::Other
    } else {
        key
    };
    table.entry(key).or_default()
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn bounds_are_inclusive() {
        let mut h = Hist::default();
        for ns in [0, 1_000, 1_001, 2_000, 1_000_000_000, 1_000_000_001] {
            h.record(ns);
        }
        assert_eq!(h.buckets[0], 2, "0 and 1000 ns are <= 1 us");
        assert_eq!(h.buckets[1], 2, "1001 and 2000 ns are <= 2 us");
        assert_eq!(h.buckets[18], 1, "1 s is <= 1 s");
        assert_eq!(h.buckets[19], 1, "above 1 s: +Inf only");
        assert_eq!(h.count, 6);
        assert_eq!(
            h.sum_ns,
            1_000 + 1_001 + 2_000 + 1_000_000_000 + 1_000_000_001
        );
    }

    #[test]
    fn keys_beyond_the_limit_fold_into_other() {
        let mut t = SeriesTable::default();
        let key = |i: u8| SeriesKey::Flow {
            src: IpAddr::from([10, 0, 0, i]),
            dst: IpAddr::from([10, 0, 1, i]),
            conns: None,
        };
        for i in 0..5 {
            entry(&mut t, key(i), 3).ack_rtt.record(1);
        }
        entry(&mut t, key(1), 3).ack_rtt.record(1);
        assert_eq!(t.len(), 4, "3 keys and other");
        assert_eq!(t[&SeriesKey::Other].ack_rtt.count, 2);
        assert_eq!(t[&key(1)].ack_rtt.count, 2);
    }
}
