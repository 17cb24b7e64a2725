//! The reduce's bucket step: one call matches every host's sightings of
//! one bucket ([`crate::shard`]) with the engine's `CrossCapture` in row
//! mode (the sightings sorted by capture time here, the rules the
//! engine's) and returns mergeable partials, never a row per
//! transmission. Two passes over the same blobs:
//!
//! 1. [`match_paths`]: per path between captures a < b, the count, min,
//!    max and sum of `ts_b - ts_a` ([`PathSums`]): summed over the buckets
//!    ([`merge_paths`]), they give the clock offsets as the engine
//!    estimates them ([`offsets`]).
//! 2. [`match_partials`]: with the summed paths, the same matching again,
//!    now giving each match its one-way delay and each unmatched
//!    transmission its fate: [`Partials`] (delay histogram counts per
//!    path, fate counts, and the fabric views' and culprits' sums),
//!    merged and turned into the report by [`crate::assemble`].

use analyzer::engine::{
    CrossCapture, Fate, FlowPath, Hist, MergeConfig, Offsets, PathSums, one_way_delay,
};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::PyBytes;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use crate::matching::value_error;
use crate::shard::{Blob, Flow, Row};

/// A path between captures `a < b`: a flow and its ev.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PathKey {
    pub a: u8,
    pub b: u8,
    pub flow: Flow,
    pub ev: u16,
}

/// A path from the capture that saw its packets first (`up`) to the next
/// (`down`; `None` for a lost transmission of a flow never delivered).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct FabricPath {
    pub up: u8,
    pub down: Option<u8>,
    pub flow: Flow,
    pub ev: u16,
}

impl Flow {
    pub fn path(&self, ev: u16) -> FlowPath {
        FlowPath {
            rocev2: self.rocev2,
            src: self.src,
            dst: self.dst,
            src_conn: self.src_conn,
            dst_conn: self.dst_conn,
            ev,
        }
    }
}

/// `ts_b - ts_a` of a path's matches.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Sums {
    pub n: u64,
    pub min: i64,
    pub max: i64,
    pub sum: i128,
}

impl Sums {
    fn add(&mut self, o: &Sums) {
        self.n += o.n;
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
        self.sum += o.sum;
    }

    pub fn engine(&self) -> PathSums {
        PathSums {
            n: self.n,
            min: self.min,
            max: self.max,
            sum: self.sum,
        }
    }
}

/// Counts per histogram bucket (its lowest value), with the exact
/// extremes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Buckets {
    pub counts: FxHashMap<u64, u64>,
    pub min: u64,
    pub max: u64,
    pub sum: u64,
}

impl Default for Buckets {
    fn default() -> Self {
        Buckets {
            counts: FxHashMap::default(),
            min: u64::MAX,
            max: 0,
            sum: 0,
        }
    }
}

impl Buckets {
    pub fn record(&mut self, v: u64) {
        *self.counts.entry(Hist::bucket_lowest(v)).or_default() += 1;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        self.sum = self.sum.saturating_add(v);
    }

    pub fn add(&mut self, o: &Buckets) {
        for (&b, &n) in &o.counts {
            *self.counts.entry(b).or_default() += n;
        }
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
        self.sum = self.sum.saturating_add(o.sum);
    }

    pub fn count(&self) -> u64 {
        self.counts.values().sum()
    }

    pub fn hist(&self) -> Hist {
        let counts: Vec<(u64, u64)> = self.counts.iter().map(|(&b, &n)| (b, n)).collect();
        Hist::from_buckets(self.min, self.max, &counts)
    }
}

/// A fabric path's transmissions: all, lost (never reached `down`:
/// `lost_between` and `unknown`) and the delays of the delivered ones.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PathStats {
    pub transmissions: u64,
    pub lost: u64,
    pub owd: Buckets,
}

/// The hops one switch added on one path (HOP_TELEMETRY of the delivered
/// copies).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct HopStats {
    pub latency: Buckets,
    pub queue_sum: u64,
    pub queue_max: u64,
}

/// What fell in an incident's window, of one path or one switch.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct InWindow {
    /// Transmissions (a switch: hops).
    pub n: u64,
    pub lost: u64,
    /// Delivered transmissions and the sum of their delays (a switch: its
    /// hop latencies).
    pub delivered: u64,
    pub delay_sum: u64,
}

impl InWindow {
    fn add(&mut self, o: &InWindow) {
        self.n += o.n;
        self.lost += o.lost;
        self.delivered += o.delivered;
        self.delay_sum = self.delay_sum.saturating_add(o.delay_sum);
    }
}

/// The mergeable result of one bucket's second pass.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Partials {
    /// `between_captures`: per path, one-way delay histogram counts.
    pub owd: FxHashMap<PathKey, Buckets>,
    /// `between_captures`: per (capture, flow, ev), transmissions lost
    /// between the capture points and those whose fate is unknown.
    pub fates: FxHashMap<(u8, Flow, u16), (u64, u64)>,
    /// Per capture: its transmissions matched in no other capture.
    pub unmatched: FxHashMap<u8, u64>,
    pub paths: FxHashMap<FabricPath, PathStats>,
    pub hops: FxHashMap<(FabricPath, u32), HopStats>,
    /// Per (incident, path) and per (incident, switch).
    pub window_paths: FxHashMap<(u32, FabricPath), InWindow>,
    pub window_switches: FxHashMap<(u32, u32), InWindow>,
}

impl Partials {
    pub fn merge(&mut self, o: Partials) {
        for (k, v) in o.owd {
            self.owd.entry(k).or_default().add(&v);
        }
        for (k, (l, u)) in o.fates {
            let e = self.fates.entry(k).or_default();
            e.0 += l;
            e.1 += u;
        }
        for (k, v) in o.unmatched {
            *self.unmatched.entry(k).or_default() += v;
        }
        for (k, v) in o.paths {
            let e = self.paths.entry(k).or_default();
            e.transmissions += v.transmissions;
            e.lost += v.lost;
            e.owd.add(&v.owd);
        }
        for (k, v) in o.hops {
            let e = self.hops.entry(k).or_default();
            e.latency.add(&v.latency);
            e.queue_sum += v.queue_sum;
            e.queue_max = e.queue_max.max(v.queue_max);
        }
        for (k, v) in o.window_paths {
            self.window_paths.entry(k).or_default().add(&v);
        }
        for (k, v) in o.window_switches {
            self.window_switches.entry(k).or_default().add(&v);
        }
    }
}

/// The sightings of one bucket, every host's, in capture-time order.
struct Sightings {
    flows: Vec<Vec<Flow>>,
    /// (capture, blob, row).
    rows: Vec<(u8, u32, Row)>,
}

impl Sightings {
    /// `remap[host]`: the capture of each host read (negative: left out).
    fn decode(blobs: &[PyBackedBytes], remap: &[i32]) -> PyResult<Sightings> {
        let mut flows = Vec::with_capacity(blobs.len());
        let mut rows = Vec::new();
        for bytes in blobs {
            let blob: Blob = rmp_serde::from_slice(bytes)
                .map_err(|e| value_error(format!("a bucket blob does not decode: {e}")))?;
            let capture = match remap.get(blob.host as usize) {
                Some(&c) if c >= 0 => u8::try_from(c)
                    .map_err(|_| value_error("the engine matches at most 256 captures"))?,
                _ => continue,
            };
            let index = flows.len() as u32;
            rows.extend(blob.rows.into_iter().map(|r| (capture, index, r)));
            flows.push(blob.flows);
        }
        rows.sort_unstable_by_key(|(c, _, r)| (r.ts, *c, r.frame));
        Ok(Sightings { flows, rows })
    }

    fn flow(&self, i: usize) -> &Flow {
        let (_, blob, row) = &self.rows[i];
        &self.flows[*blob as usize][row.flow as usize]
    }

    /// The engine's matcher over the rows: the matches (row indexes, the
    /// earlier sighting first), then the rest with their fate
    /// (`Some(Lost)`: left the window; `None`: waiting at the end).
    #[allow(clippy::type_complexity)]
    fn run(
        &self,
        spans: &[(u64, u64)],
        window_ns: u64,
    ) -> (Vec<(usize, usize)>, Vec<(usize, Option<Fate>)>) {
        let cfg = MergeConfig {
            window_ns,
            max_pending: usize::MAX,
            ..MergeConfig::default()
        };
        let mut cross = CrossCapture::for_rows(cfg, spans);
        // A copy is named by (capture, frame).
        let mut index: FxHashMap<(u8, u64), usize> = FxHashMap::default();
        let mut matched = Vec::new();
        for (i, (capture, _, row)) in self.rows.iter().enumerate() {
            let tx = row.transmission(self.flow(i));
            let frame = row.frame & ((1 << 48) - 1);
            match cross.observe_transmission(*capture, &tx, row.ts, frame, row.ecn) {
                Some(other) => {
                    if let Some(j) = index.remove(&(other.capture, other.frame)) {
                        matched.push((j, i));
                    }
                }
                None => {
                    index.insert((*capture, frame), i);
                }
            }
        }
        let unmatched = cross
            .take_unmatched()
            .into_iter()
            .filter_map(|(_, copy, fate)| Some((*index.get(&(copy.capture, copy.frame))?, fate)))
            .collect();
        (matched, unmatched)
    }
}

fn to_bytes<T: Serialize>(py: Python<'_>, v: &T) -> PyResult<Py<PyBytes>> {
    let bytes = rmp_serde::to_vec(v).map_err(value_error)?;
    Ok(PyBytes::new(py, &bytes).unbind())
}

fn from_bytes<'a, T: Deserialize<'a>>(bytes: &'a [u8], what: &str) -> PyResult<T> {
    rmp_serde::from_slice(bytes).map_err(|e| value_error(format!("{what} do not decode: {e}")))
}

/// Paths' sums, as [`match_paths`] and [`merge_paths`] return them.
pub type PathList = Vec<(PathKey, Sums)>;

/// Pass 1 over one bucket: per path, the sums of `ts_b - ts_a` of its
/// matches. `blobs`: the bucket's blobs of every host; `remap[host]`: the
/// capture of each host index the blobs name (negative: left out);
/// `spans[c]`: capture c's `(first_ts_ns, last_ts_ns)`.
#[pyfunction]
#[pyo3(signature = (blobs, spans, remap, *, window_ns = 1_000_000_000))]
pub fn match_paths(
    py: Python<'_>,
    blobs: Vec<PyBackedBytes>,
    spans: Vec<(u64, u64)>,
    remap: Vec<i32>,
    window_ns: u64,
) -> PyResult<Py<PyBytes>> {
    let paths = py.detach(|| -> PyResult<PathList> {
        let s = Sightings::decode(&blobs, &remap)?;
        let mut sums: FxHashMap<PathKey, Sums> = FxHashMap::default();
        let (matched, _) = s.run(&spans, window_ns);
        for (j, i) in matched {
            let (key, delta) = path_of(&s, j, i);
            let e = sums.entry(key).or_insert(Sums {
                n: 0,
                min: i64::MAX,
                max: i64::MIN,
                sum: 0,
            });
            e.add(&Sums {
                n: 1,
                min: delta,
                max: delta,
                sum: i128::from(delta),
            });
        }
        Ok(sums.into_iter().collect())
    })?;
    to_bytes(py, &paths)
}

/// The path of a match of rows `j` and `i` and its `ts_b - ts_a`.
fn path_of(s: &Sightings, j: usize, i: usize) -> (PathKey, i64) {
    let (cj, _, rj) = &s.rows[j];
    let (ci, _, ri) = &s.rows[i];
    let ((a, ta), (b, tb)) = if cj < ci {
        ((*cj, rj.ts), (*ci, ri.ts))
    } else {
        ((*ci, ri.ts), (*cj, rj.ts))
    };
    let delta = (i128::from(tb) - i128::from(ta)).clamp(i64::MIN.into(), i64::MAX.into()) as i64;
    let key = PathKey {
        a,
        b,
        flow: *s.flow(i),
        ev: ri.ev,
    };
    (key, delta)
}

/// The sums of every bucket's [`match_paths`], path by path.
#[pyfunction]
pub fn merge_paths(py: Python<'_>, parts: Vec<PyBackedBytes>) -> PyResult<Py<PyBytes>> {
    let mut all: FxHashMap<PathKey, Sums> = FxHashMap::default();
    for part in &parts {
        let list: PathList = from_bytes(part, "path sums")?;
        for (k, v) in list {
            all.entry(k).and_modify(|e| e.add(&v)).or_insert(v);
        }
    }
    let mut list: PathList = all.into_iter().collect();
    list.sort_by_key(|(k, _)| *k);
    to_bytes(py, &list)
}

/// What the second pass needs of every bucket's first: the engine with
/// the summed paths, its clock offsets and each path's direction.
pub struct Context {
    pub cross: CrossCapture,
    pub offsets: Offsets,
    /// Per path: (its packets reach a first, the pair's clock offset).
    pub direction: FxHashMap<PathKey, (bool, i64)>,
    /// Per (upstream capture, flow): the captures its packets reached.
    pub downs: FxHashMap<(u8, Flow), Vec<u8>>,
}

impl Context {
    pub fn new(spans: &[(u64, u64)], paths: &[u8]) -> PyResult<Context> {
        let cross = matcher_of_paths(spans, &path_list(paths)?)?;
        let offsets = cross.offsets();
        let mut direction = FxHashMap::default();
        let mut downs: FxHashMap<(u8, Flow), Vec<u8>> = FxHashMap::default();
        for pair in cross.report() {
            let (a, b) = (pair.capture_a as u8, pair.capture_b as u8);
            for p in &pair.paths {
                let flow = Flow::of_path(&FlowPath::of(p));
                let a_first = p.upstream == u64::from(a);
                direction.insert(
                    PathKey {
                        a,
                        b,
                        flow,
                        ev: p.ev,
                    },
                    (a_first, pair.clock_offset_ns),
                );
                let (up, down) = if a_first { (a, b) } else { (b, a) };
                let d = downs.entry((up, flow)).or_default();
                if !d.contains(&down) {
                    d.push(down);
                    d.sort_unstable();
                }
            }
        }
        Ok(Context {
            cross,
            offsets,
            direction,
            downs,
        })
    }
}

/// Pass 2 over one bucket: [`Partials`]. `paths`: [`merge_paths`] of
/// every bucket's first pass; `to_ref[c]`: capture c's clock minus the
/// reference's (the fabric's one clock); `windows`: each incident's
/// `(start, end)` on the reference clock, culprits looked for inside.
#[pyfunction]
#[pyo3(signature = (blobs, spans, remap, paths, to_ref, windows, *, window_ns = 1_000_000_000))]
#[allow(clippy::too_many_arguments)]
pub fn match_partials(
    py: Python<'_>,
    blobs: Vec<PyBackedBytes>,
    spans: Vec<(u64, u64)>,
    remap: Vec<i32>,
    paths: PyBackedBytes,
    to_ref: Vec<i64>,
    windows: Vec<(i64, i64)>,
    window_ns: u64,
) -> PyResult<Py<PyBytes>> {
    let partials = py.detach(|| -> PyResult<Partials> {
        let s = Sightings::decode(&blobs, &remap)?;
        let ctx = Context::new(&spans, &paths)?;
        let mut out = Partials::default();
        let t_ref = |c: u8, ts: u64| -> i64 {
            ts as i64 - to_ref.get(usize::from(c)).copied().unwrap_or(0)
        };
        let inside = |t: i64| {
            windows
                .iter()
                .enumerate()
                .filter(move |(_, w)| w.0 <= t && t <= w.1)
                .map(|(i, _)| i as u32)
        };
        let (matched, unmatched) = s.run(&spans, window_ns);
        for (j, i) in matched {
            let (key, delta) = path_of(&s, j, i);
            let Some(&(a_first, offset)) = ctx.direction.get(&key) else {
                return Err(value_error(format!(
                    "a match of a path the first pass did not sum: {key:?} (the two passes saw \
                         different sightings)"
                )));
            };
            let owd = one_way_delay(a_first, delta, offset);
            out.owd.entry(key).or_default().record(owd);
            // The copies upstream and downstream.
            let (rj, ri) = (&s.rows[j], &s.rows[i]);
            let (up, down) = if (rj.0 == key.a) == a_first {
                (rj, ri)
            } else {
                (ri, rj)
            };
            let path = FabricPath {
                up: up.0,
                down: Some(down.0),
                flow: key.flow,
                ev: key.ev,
            };
            let stats = out.paths.entry(path).or_default();
            stats.transmissions += 1;
            stats.owd.record(owd);
            let t = t_ref(up.0, up.2.ts);
            for w in inside(t) {
                out.window_paths
                    .entry((w, path))
                    .or_default()
                    .add(&InWindow {
                        n: 1,
                        lost: 0,
                        delivered: 1,
                        delay_sum: owd,
                    });
            }
            for &(sw, q, lat) in &down.2.hops {
                let h = out.hops.entry((path, sw)).or_default();
                h.latency.record(u64::from(lat));
                h.queue_sum += u64::from(q);
                h.queue_max = h.queue_max.max(u64::from(q));
                for w in inside(t) {
                    out.window_switches
                        .entry((w, sw))
                        .or_default()
                        .add(&InWindow {
                            n: 1,
                            lost: 0,
                            delivered: 1,
                            delay_sum: u64::from(lat),
                        });
                }
            }
        }
        for (i, left) in unmatched {
            let (capture, _, row) = &s.rows[i];
            let flow = *s.flow(i);
            *out.unmatched.entry(*capture).or_default() += 1;
            let fate = match left {
                Some(f) => Some(f),
                None => {
                    ctx.cross
                        .fate_at_end(&ctx.offsets, &row.transmission(&flow), *capture, row.ts)
                }
            };
            let Some(fate) = fate else { continue };
            let counts = out.fates.entry((*capture, flow, row.ev)).or_default();
            match fate {
                Fate::Lost => counts.0 += 1,
                Fate::Unknown => counts.1 += 1,
            }
            let downs = ctx.downs.get(&(*capture, flow));
            let downs: Vec<Option<u8>> = match downs {
                Some(d) => d.iter().map(|&d| Some(d)).collect(),
                None => vec![None],
            };
            let t = t_ref(*capture, row.ts);
            for down in downs {
                let path = FabricPath {
                    up: *capture,
                    down,
                    flow,
                    ev: row.ev,
                };
                let stats = out.paths.entry(path).or_default();
                stats.transmissions += 1;
                stats.lost += 1;
                for w in inside(t) {
                    out.window_paths
                        .entry((w, path))
                        .or_default()
                        .add(&InWindow {
                            n: 1,
                            lost: 1,
                            delivered: 0,
                            delay_sum: 0,
                        });
                }
            }
        }
        Ok(out)
    })?;
    to_bytes(py, &partials)
}

/// Decodes and merges every bucket's [`Partials`].
pub fn merge_partials(parts: &[PyBackedBytes]) -> PyResult<Partials> {
    let mut all = Partials::default();
    for p in parts {
        all.merge(from_bytes(p, "partials")?);
    }
    Ok(all)
}

/// Pass 1's sums decoded.
pub fn path_list(bytes: &[u8]) -> PyResult<PathList> {
    from_bytes(bytes, "path sums")
}

/// The engine's matcher told each capture's span and the first pass's
/// summed paths: what its offsets, delays and reports start from.
pub fn matcher_of_paths(spans: &[(u64, u64)], list: &PathList) -> PyResult<CrossCapture> {
    let mut cross = CrossCapture::new(MergeConfig::default());
    for (c, &(first, last)) in spans.iter().enumerate() {
        let c =
            u8::try_from(c).map_err(|_| value_error("the engine matches at most 256 captures"))?;
        cross.set_span(c, first, last);
    }
    for (k, v) in list {
        cross.add_path(k.a, k.b, &k.flow.path(k.ev), v.engine());
    }
    Ok(cross)
}

/// Clock offsets estimated from the summed paths: `[(a, b, clock of b
/// minus clock of a)]` of the pairs whose offset could be estimated.
#[pyfunction]
pub fn offsets(spans: Vec<(u64, u64)>, paths: PyBackedBytes) -> PyResult<Vec<(u8, u8, i64)>> {
    let ctx = Context::new(&spans, &paths)?;
    Ok(ctx
        .cross
        .report()
        .iter()
        .filter(|r| r.offset_estimated)
        .map(|r| (r.capture_a as u8, r.capture_b as u8, r.clock_offset_ns))
        .collect())
}
