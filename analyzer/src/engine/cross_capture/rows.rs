//! Row mode: the matcher of a reduce that partitions many captures' rows
//! by transmission (the Spark job, through the `metaroce` Python
//! package), and the partial sums such a reduce adds back.

use std::net::IpAddr;

use rustc_hash::FxHashMap;

use super::super::direction::DirKey;
use super::super::report::BetweenPath;
use super::report::PathDeltas;
use super::{CaptureCopy, CrossCapture, Fate, FlowId, MergeConfig, Sighting, Transmission, TxKey};

/// What a matcher in row mode keeps for [`CrossCapture::take_unmatched`]:
/// the transmissions that left the window counted as lost, and each
/// flow's addresses to name them.
#[derive(Default)]
pub(super) struct Rows {
    pub(super) flows: FxHashMap<FlowId, DirKey>,
    pub(super) left: Vec<(TxKey, Sighting)>,
}

/// A path between two capture points as [`CrossCapture::add_path`] and
/// its siblings name it: a flow and its ev (RoCEv2: UDP source port).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowPath {
    pub rocev2: bool,
    pub src: IpAddr,
    pub dst: IpAddr,
    pub src_conn: u32,
    pub dst_conn: u32,
    pub ev: u16,
}

impl FlowPath {
    /// The path a between-captures report entry is about.
    pub fn of(p: &BetweenPath) -> FlowPath {
        FlowPath {
            rocev2: p.proto == "rocev2",
            src: p.src,
            dst: p.dst,
            src_conn: p.src_conn,
            dst_conn: p.dst_conn,
            ev: p.ev,
        }
    }

    pub(super) fn dir(&self) -> DirKey {
        DirKey {
            src: self.src,
            dst: self.dst,
            src_conn: self.src_conn,
            dst_conn: self.dst_conn,
        }
    }

    pub(super) fn flow(&self) -> FlowId {
        FlowId {
            rocev2: self.rocev2,
            dir: self.dir().packed(),
        }
    }
}

/// The matches of one path summed: `n` transmissions whose `ts_b - ts_a`
/// ran from `min` to `max` and summed to `sum`. Partitions' sums add
/// up ([`PathSums::add`]): a reduce sums them before [`CrossCapture::add_path`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct PathSums {
    pub n: u64,
    pub min: i64,
    pub max: i64,
    pub sum: i128,
}

impl PathSums {
    /// No match yet.
    pub const EMPTY: PathSums = PathSums {
        n: 0,
        min: i64::MAX,
        max: i64::MIN,
        sum: 0,
    };

    /// One match whose `ts_b - ts_a` is `delta`.
    pub fn add_delta(&mut self, delta: i64) {
        self.n += 1;
        self.min = self.min.min(delta);
        self.max = self.max.max(delta);
        self.sum += i128::from(delta);
    }

    /// Another partition's sums of the same path.
    pub fn add(&mut self, other: &PathSums) {
        self.n += other.n;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        self.sum += other.sum;
    }
}

impl CrossCapture {
    /// A matcher in row mode, for a reduce that partitions the sightings
    /// of many captures by transmission (every sighting of a transmission
    /// in the same partition, each partition in capture-time order): it
    /// applies the rules of [`CrossCapture::observe`] to the rows given
    /// to [`CrossCapture::observe_transmission`], and keeps what is
    /// unmatched for [`CrossCapture::take_unmatched`] instead of only
    /// counting it. `spans[c]` is capture c's first and last time: a
    /// partition sees only some of each capture's packets, and a
    /// transmission that leaves the window counts as lost only when every
    /// other capture had started before it. A matcher in row mode keeps no
    /// delays: the reduce sums each path's matches ([`PathSums`]) and
    /// gives them to the matcher that reports ([`CrossCapture::add_path`]).
    pub fn for_rows(cfg: MergeConfig, spans: &[(u64, u64)]) -> Self {
        let mut m = CrossCapture::new(cfg);
        for (c, &(first, last)) in spans.iter().enumerate() {
            m.set_span(c as u16, first, last);
        }
        m.rows = Some(Rows::default());
        m
    }

    /// [`CrossCapture::observe`] for a transmission given as a row: its
    /// copy in capture `capture`, frame `frame`, captured at `ts_ns` with
    /// the IP ECN codepoint `ecn`. The matching never reads `frame`: it
    /// names the copy in what this returns and in
    /// [`CrossCapture::take_unmatched`] (a frame number, or the caller's
    /// own index of its rows, below 2^40).
    pub fn observe_transmission(
        &mut self,
        capture: u16,
        tx: &Transmission,
        ts_ns: u64,
        frame: u64,
        ecn: u8,
    ) -> Option<CaptureCopy> {
        self.tick(capture, ts_ns);
        self.sighting(tx, Sighting::new(capture, ts_ns, frame, ecn))
    }

    /// Row mode: every transmission this matcher did not match, with its
    /// copy: those that left the window counted as lost
    /// (`Some(Fate::Lost)`), then those still waiting, to be judged with
    /// every partition's matches (`None`: [`CrossCapture::fate_at_end`]).
    /// Empty outside row mode.
    pub fn take_unmatched(&mut self) -> Vec<(Transmission, CaptureCopy, Option<Fate>)> {
        if self.rows.is_none() {
            return Vec::new();
        }
        // The single matcher sees every capture's packets up to the last:
        // what waited longer than the window before that left it.
        self.newest = self
            .newest
            .max(self.last_ts.iter().copied().max().unwrap_or(0));
        self.expire();
        let left = match &mut self.rows {
            Some(rows) => std::mem::take(&mut rows.left),
            None => return Vec::new(),
        };
        let mut waiting: Vec<(TxKey, Sighting)> = self.pending.drain().collect();
        self.order.clear();
        waiting.sort_by_key(|(_, s)| (s.ts, s.packed));
        let Some(rows) = &self.rows else {
            return Vec::new();
        };
        let named = |key: &TxKey| -> Option<Transmission> {
            let dir = rows.flows.get(&key.flow)?;
            Some(Transmission {
                rocev2: key.flow.rocev2,
                src: dir.src,
                dst: dir.dst,
                src_conn: dir.src_conn,
                dst_conn: dir.dst_conn,
                ptype: key.ptype,
                psn: key.psn,
                tx_ts: key.tx_ts,
                ev: key.ev,
                path_seq: key.path_seq,
            })
        };
        let left = left.into_iter().map(|(k, s)| (k, s, Some(Fate::Lost)));
        let waiting = waiting.into_iter().map(|(k, s)| (k, s, None));
        left.chain(waiting)
            .filter_map(|(k, s, fate)| Some((named(&k)?, s.copy(), fate)))
            .collect()
    }

    /// The reduce's last step: the matches of path `path` between
    /// captures `a < b`, summed over the partitions.
    pub fn add_path(&mut self, a: u16, b: u16, path: &FlowPath, sums: PathSums) {
        let d = self
            .deltas
            .entry((a, b, path.flow(), path.ev))
            .or_insert_with(|| PathDeltas {
                rocev2: path.rocev2,
                dir: path.dir(),
                ev: path.ev,
                n: 0,
                min: i64::MAX,
                max: i64::MIN,
                sum: 0,
                samples: Vec::new(),
                owd_buckets: Vec::new(),
            });
        d.n += sums.n;
        d.min = d.min.min(sums.min);
        d.max = d.max.max(sums.max);
        d.sum += sums.sum;
    }

    /// `count` one-way delays of path `path` (added by
    /// [`CrossCapture::add_path`]) fell in the histogram bucket whose
    /// lowest value is `bucket` ([`Hist::bucket_lowest`]): the report's
    /// delay summary comes from these counts, which give the percentiles
    /// all the samples give.
    pub fn add_one_way_delays(&mut self, a: u16, b: u16, path: &FlowPath, bucket: u64, count: u64) {
        if let Some(d) = self.deltas.get_mut(&(a, b, path.flow(), path.ev)) {
            d.owd_buckets.push((bucket, count));
        }
    }

    /// `count` transmissions of path `path` captured in `capture` and not
    /// at the next capture point, with their fate.
    pub fn add_unmatched(&mut self, capture: u16, path: &FlowPath, fate: Fate, count: u64) {
        let counts = match fate {
            Fate::Lost => &mut self.unmatched,
            Fate::Unknown => &mut self.unknown,
        };
        *counts.entry((capture, path.flow(), path.ev)).or_default() += count;
    }
}
