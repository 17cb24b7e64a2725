//! The reduce's bucket step: the engine's `CrossCapture` in row mode
//! matches every host's sightings of one bucket ([`crate::shard`]) once
//! (the sightings sorted by capture time here, the rules the engine's),
//! and the match is read twice; what comes out is mergeable partials,
//! never a row per transmission:
//!
//! 1. [`match_paths`]: per path between captures a < b, the count, min,
//!    max and sum of `ts_b - ts_a` ([`PathSums`]): summed over the buckets
//!    ([`merge_paths`]), they give the clock offsets as the engine
//!    estimates them ([`offsets`]). Also the bucket as matched, which
//!    the job keeps for the second read: what pass 2 reads of it
//!    ([`Digest`]), or every row ([`Matched`]) when the
//!    per-transmission tables are asked for too ([`crate::tables`]).
//! 2. [`match_partials`]: with the summed paths, each match of the kept
//!    bucket gets its one-way delay and each unmatched transmission its
//!    fate: [`Partials`] (delay histogram counts per path, fate counts,
//!    and the fabric views' and culprits' sums), merged and turned into
//!    the report by [`crate::assemble`].

use analyzer::engine::{
    CrossCapture, Fate, FlowPath, Hist, MAX_CAPTURES, MergeConfig, Offsets, PathSums, one_way_delay,
};
use std::path::PathBuf;

use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::PyBytes;
use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};

use crate::blob::{Flow, FlowIndex, Reader, Row, Sightings, Widths};
use crate::digest::{self, Digest};
use crate::matching::value_error;
use crate::packed::unpack;

/// A path between captures `a < b`: a flow and its ev.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PathKey {
    pub a: u16,
    pub b: u16,
    pub flow: Flow,
    pub ev: u16,
}

/// A path from the capture that saw its packets first (`up`) to the next
/// (`down`; `None` for a lost transmission of a flow never delivered).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct FabricPath {
    pub up: u16,
    pub down: Option<u16>,
    pub flow: Flow,
    pub ev: u16,
}

/// Samples as counts per histogram bucket, with the exact extremes and
/// sum. Recorded into the engine's histogram (an array increment: a
/// bucket records millions of delays); sent between tasks as (bucket
/// lowest value, count) pairs, which rebuild it exactly
/// ([`Hist::from_buckets`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(into = "BucketCounts", from = "BucketCounts")]
pub struct Buckets {
    hist: Hist,
    pub min: u64,
    pub max: u64,
    pub sum: u64,
}

/// [`Buckets`] as sent.
#[derive(Serialize, Deserialize)]
struct BucketCounts {
    counts: Vec<(u64, u64)>,
    min: u64,
    max: u64,
    sum: u64,
}

impl From<Buckets> for BucketCounts {
    fn from(b: Buckets) -> Self {
        BucketCounts {
            counts: b.counts().collect(),
            min: b.min,
            max: b.max,
            sum: b.sum,
        }
    }
}

impl From<BucketCounts> for Buckets {
    fn from(c: BucketCounts) -> Self {
        Buckets {
            hist: Hist::from_buckets(c.min, c.max, &c.counts),
            min: c.min,
            max: c.max,
            sum: c.sum,
        }
    }
}

impl Default for Buckets {
    fn default() -> Self {
        Buckets {
            hist: Hist::new(),
            min: u64::MAX,
            max: 0,
            sum: 0,
        }
    }
}

impl Buckets {
    pub fn record(&mut self, v: u64) {
        self.hist.record(v);
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        self.sum = self.sum.saturating_add(v);
    }

    pub fn add(&mut self, o: &Buckets) {
        self.hist.add(&o.hist);
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
        self.sum = self.sum.saturating_add(o.sum);
    }

    /// Samples recorded in one pass: a bucket's samples are gathered per
    /// path first and recorded here one histogram at a time (recorded
    /// as they come, each would touch another path's histogram, most
    /// often out of the cache).
    pub fn of_samples(samples: &[u64]) -> Buckets {
        let mut b = Buckets::default();
        for &v in samples {
            b.record(v);
        }
        b
    }

    pub fn count(&self) -> u64 {
        self.hist.len()
    }

    /// `(bucket lowest value, count)` of every bucket that holds samples.
    pub fn counts(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.hist.inner().iter_recorded().map(|v| {
            (
                Hist::bucket_lowest(v.value_iterated_to()),
                v.count_at_value(),
            )
        })
    }

    pub fn hist(&self) -> Hist {
        self.hist.clone()
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
    pub fates: FxHashMap<(u16, Flow, u16), (u64, u64)>,
    /// Per capture: its transmissions matched in no other capture.
    pub unmatched: FxHashMap<u16, u64>,
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

/// A bucket's sightings of every host in capture-time order and what the
/// engine's matcher made of them: pass 1's work, kept (as bytes, by
/// Spark) for pass 2, which then only reads it.
pub struct Matched {
    pub s: Sightings,
    /// The matches (row indexes, the earlier sighting first).
    pub pairs: Vec<(u32, u32)>,
    /// The rest with their fate (`Some(Lost)`: left the window; `None`:
    /// waiting at the end).
    pub unmatched: Vec<(u32, Option<Fate>)>,
}

impl Matched {
    /// Every host's blob of a bucket decoded (`remap[host]`: the capture
    /// of each host index the blobs name; negative: left out), sorted by
    /// capture time and run through the engine's matcher.
    fn run(
        blobs: &[PyBackedBytes],
        remap: &[i32],
        spans: &[(u64, u64)],
        window_ns: u64,
    ) -> Result<Matched, String> {
        let mut decoded = Vec::with_capacity(blobs.len());
        for bytes in blobs {
            let (blob, _) = unpack(bytes)
                .and_then(|raw| Sightings::decode(&raw))
                .map_err(|e| format!("a bucket blob does not decode: {e}"))?;
            let capture = match remap.get(blob.host as usize) {
                Some(&c) if c >= 0 => u16::try_from(c).map_err(|_| {
                    format!("capture {c}: the engine matches at most {MAX_CAPTURES} captures")
                })?,
                _ => continue,
            };
            decoded.push((blob, capture));
        }
        let mut s = Sightings {
            host: Sightings::ALL,
            rows: Vec::with_capacity(decoded.iter().map(|(b, _)| b.rows.len()).sum()),
            hops: Vec::with_capacity(decoded.iter().map(|(b, _)| b.hops.len()).sum()),
            ..Sightings::default()
        };
        let mut flows = FlowIndex::default();
        for (blob, capture) in decoded {
            s.append(blob, capture, &mut flows);
        }
        // Each host's rows come in its capture's order: a stable sort
        // merges these runs instead of sorting from scratch (the key is
        // unique, so any sort gives the same order).
        s.rows.sort_by_key(|r| (r.ts, r.capture, r.frame));
        let cfg = MergeConfig {
            window_ns,
            max_pending: usize::MAX,
            ..MergeConfig::default()
        };
        let mut cross = CrossCapture::for_rows(cfg, spans);
        // A copy is named by its row's index (in place of its frame
        // number, which the matching never reads).
        let mut pairs = Vec::new();
        for (i, row) in s.rows.iter().enumerate() {
            let tx = row.transmission(s.flow(row));
            if let Some(other) =
                cross.observe_transmission(row.capture, &tx, row.ts, i as u64, row.ecn)
            {
                pairs.push((other.frame as u32, i as u32));
            }
        }
        let unmatched = cross
            .take_unmatched()
            .into_iter()
            .map(|(_, copy, fate)| (copy.frame as u32, fate))
            .collect();
        Ok(Matched {
            s,
            pairs,
            unmatched,
        })
    }

    /// What the tables read: the kept bucket's rows decoded, and the
    /// context of the summed paths ([`merge_paths`]'s bytes).
    pub(crate) fn read(
        kept: &Kept,
        spans: &[(u64, u64)],
        paths: &[u8],
    ) -> PyResult<(Matched, Context)> {
        Ok((kept.read()?, Context::new(spans, paths)?))
    }

    fn encode(&self) -> Vec<u8> {
        let mut out = self.s.encode(Widths::Full);
        out.reserve(8 + self.pairs.len() * 8 + self.unmatched.len() * 5);
        out.extend_from_slice(&(self.pairs.len() as u32).to_le_bytes());
        for &(j, i) in &self.pairs {
            out.extend_from_slice(&j.to_le_bytes());
            out.extend_from_slice(&i.to_le_bytes());
        }
        out.extend_from_slice(&(self.unmatched.len() as u32).to_le_bytes());
        for &(i, fate) in &self.unmatched {
            out.extend_from_slice(&i.to_le_bytes());
            out.push(match fate {
                None => 0,
                Some(Fate::Lost) => 1,
                Some(Fate::Unknown) => 2,
            });
        }
        out
    }

    fn decode(bytes: &[u8]) -> Result<Matched, String> {
        let (s, at) = Sightings::decode(bytes)?;
        let mut r = Reader::new(bytes, at);
        let rows = s.rows.len() as u32;
        let row = |i: u32| {
            if i < rows {
                Ok(i)
            } else {
                Err(format!("a match names row {i} of {rows}"))
            }
        };
        let n = r.u32("the matches' count")? as usize;
        let raw = r.take(n.saturating_mul(8), "the matches")?;
        let pairs = raw
            .chunks_exact(8)
            .map(|c| Ok((row(le_u32(&c[..4]))?, row(le_u32(&c[4..]))?)))
            .collect::<Result<Vec<_>, String>>()?;
        let n = r.u32("the unmatched count")? as usize;
        let raw = r.take(n.saturating_mul(5), "the unmatched")?;
        let unmatched = raw
            .chunks_exact(5)
            .map(|c| {
                let fate = match c[4] {
                    0 => None,
                    1 => Some(Fate::Lost),
                    2 => Some(Fate::Unknown),
                    v => return Err(format!("an unmatched row's fate is {v} (legal: 0, 1, 2)")),
                };
                Ok((row(le_u32(&c[..4]))?, fate))
            })
            .collect::<Result<Vec<_>, String>>()?;
        r.end()?;
        Ok(Matched {
            s,
            pairs,
            unmatched,
        })
    }
}

fn le_u32(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

fn to_bytes<T: Serialize>(py: Python<'_>, v: &T) -> PyResult<Py<PyBytes>> {
    let bytes = rmp_serde::to_vec(v).map_err(value_error)?;
    Ok(PyBytes::new(py, &bytes).unbind())
}

fn from_bytes<'a, T: Deserialize<'a>>(bytes: &'a [u8], what: &str) -> PyResult<T> {
    rmp_serde::from_slice(bytes).map_err(|e| value_error(format!("{what} do not decode: {e}")))
}

/// Paths' sums, as [`match_paths`] and [`merge_paths`] return them.
pub type PathList = Vec<(PathKey, PathSums)>;

/// Pass 1 over one bucket: the engine's matcher over every host's
/// sightings of it. Returns `(paths, kept)`: per path, the sums of
/// `ts_b - ts_a` of its matches, and the bucket as matched, for
/// [`match_partials`] (a [`Digest`]; with `rows`, every row, which
/// [`crate::tables::match_tables`] reads too): its bytes, or `None` when
/// `kept_file` names a file to write them to (whole, then renamed: a
/// reader sees all of it or nothing; no copy of them is made for
/// Python). `blobs`: the bucket's blobs of every host; `remap[host]`: the
/// capture of each host index the blobs name (negative: left out);
/// `spans[c]`: capture c's `(first_ts_ns, last_ts_ns)`.
#[pyfunction]
#[pyo3(signature = (blobs, spans, remap, *, window_ns = 1_000_000_000, kept_file = None, rows = false))]
pub fn match_paths(
    py: Python<'_>,
    blobs: Vec<PyBackedBytes>,
    spans: Vec<(u64, u64)>,
    remap: Vec<i32>,
    window_ns: u64,
    kept_file: Option<PathBuf>,
    rows: bool,
) -> PyResult<(Py<PyBytes>, Option<Py<PyBytes>>)> {
    let (paths, kept) = py.detach(|| -> PyResult<(Vec<u8>, Option<Vec<u8>>)> {
        let m = Matched::run(&blobs, &remap, &spans, window_ns).map_err(value_error)?;
        let (keys, path_of_match) = digest::paths(&m);
        let mut sums = vec![PathSums::EMPTY; keys.len()];
        for (&(j, i), &p) in m.pairs.iter().zip(&path_of_match) {
            sums[p as usize].add_delta(in_capture_order(&m.s, j, i).2);
        }
        let list: PathList = keys.iter().copied().zip(sums).collect();
        let paths = rmp_serde::to_vec(&list).map_err(value_error)?;
        let kept = if rows {
            m.encode()
        } else {
            Digest::of(&m, keys, &path_of_match)
                .encode()
                .map_err(value_error)?
        };
        let Some(file) = kept_file else {
            return Ok((paths, Some(kept)));
        };
        let partial = PathBuf::from(format!("{}.{}", file.display(), std::process::id()));
        std::fs::write(&partial, kept)
            .and_then(|()| std::fs::rename(&partial, &file))
            .map_err(|e| os_error(&file, &e))?;
        Ok((paths, None))
    })?;
    Ok((
        PyBytes::new(py, &paths).unbind(),
        kept.map(|k| PyBytes::new(py, &k).unbind()),
    ))
}

/// An I/O error on a kept bucket's file, naming the file.
fn os_error(file: &std::path::Path, e: &std::io::Error) -> PyErr {
    PyOSError::new_err(format!("{}: {e}", file.display()))
}

/// A bucket as [`match_paths`] kept it: its bytes, or the file it wrote.
#[derive(FromPyObject)]
pub enum Kept {
    Bytes(PyBackedBytes),
    File(PathBuf),
}

impl Kept {
    /// `decode` of its bytes (read from its file), its error named.
    fn with_bytes<T>(&self, decode: impl FnOnce(&[u8]) -> Result<T, String>) -> PyResult<T> {
        let from_file;
        let bytes: &[u8] = match self {
            Kept::Bytes(b) => b,
            Kept::File(f) => {
                from_file = std::fs::read(f).map_err(|e| os_error(f, &e))?;
                &from_file
            }
        };
        decode(bytes).map_err(|e| value_error(format!("a kept bucket does not decode: {e}")))
    }

    /// The match with every row (kept with `rows`).
    pub(crate) fn read(&self) -> PyResult<Matched> {
        self.with_bytes(|bytes| {
            if is_digest(bytes) {
                return Err(
                    "it holds what pass 2 reads, not its rows: match_paths(..., \
                            rows=True) keeps them"
                        .into(),
                );
            }
            Matched::decode(bytes)
        })
    }

    /// What pass 2 reads, whichever way the bucket was kept.
    pub(crate) fn digest(&self) -> PyResult<Digest> {
        self.with_bytes(|bytes| {
            if is_digest(bytes) {
                Digest::decode(bytes)
            } else {
                Matched::decode(bytes).map(|m| {
                    let (keys, path_of_match) = digest::paths(&m);
                    Digest::of(&m, keys, &path_of_match)
                })
            }
        })
    }
}

fn is_digest(bytes: &[u8]) -> bool {
    bytes.starts_with(&digest::MAGIC.to_le_bytes())
}

/// The rows of a match of rows `j` and `i` in capture order, `(a's, b's)`,
/// and its `ts_b - ts_a`.
#[inline]
pub(crate) fn in_capture_order(s: &Sightings, j: u32, i: u32) -> (u32, u32, i64) {
    let (lo, hi) = if s.rows[j as usize].capture < s.rows[i as usize].capture {
        (j, i)
    } else {
        (i, j)
    };
    let (a, b) = (&s.rows[lo as usize], &s.rows[hi as usize]);
    let delta =
        (i128::from(b.ts) - i128::from(a.ts)).clamp(i64::MIN.into(), i64::MAX.into()) as i64;
    (lo, hi, delta)
}

/// The path of a match of rows `j` and `i` and its `ts_b - ts_a`.
pub(crate) fn path_of(s: &Sightings, j: u32, i: u32) -> (PathKey, i64) {
    let (lo, hi, delta) = in_capture_order(s, j, i);
    let ri = &s.rows[i as usize];
    let key = PathKey {
        a: s.rows[lo as usize].capture,
        b: s.rows[hi as usize].capture,
        flow: *s.flow(ri),
        ev: ri.ev,
    };
    (key, delta)
}

/// The sums of every bucket's [`match_paths`], path by path.
#[pyfunction]
pub fn merge_paths(py: Python<'_>, parts: Vec<PyBackedBytes>) -> PyResult<Py<PyBytes>> {
    let mut all: FxHashMap<PathKey, PathSums> = FxHashMap::default();
    for part in &parts {
        let list: PathList = from_bytes(part, "path sums")?;
        for (k, v) in list {
            all.entry(k).or_insert(PathSums::EMPTY).add(&v);
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
    pub downs: FxHashMap<(u16, Flow), Vec<u16>>,
}

impl Context {
    /// From [`merge_paths`]'s bytes.
    pub fn new(spans: &[(u64, u64)], paths: &[u8]) -> PyResult<Context> {
        Context::of_list(spans, &path_list(paths)?)
    }

    fn of_list(spans: &[(u64, u64)], paths: &PathList) -> PyResult<Context> {
        let cross = matcher_of_paths(spans, paths)?;
        let offsets = cross.offsets();
        let mut direction = FxHashMap::default();
        let mut downs: FxHashMap<(u16, Flow), Vec<u16>> = FxHashMap::default();
        for pair in cross.report() {
            let (a, b) = (pair.capture_a as u16, pair.capture_b as u16);
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

    /// A matched path's direction: (its packets reach a first, the pair's
    /// clock offset).
    pub fn direction_of(&self, key: &PathKey) -> PyResult<(bool, i64)> {
        self.direction.get(key).copied().ok_or_else(|| {
            value_error(format!(
                "a match of a path the first pass did not sum: {key:?} (the two passes saw \
                 different sightings)"
            ))
        })
    }

    /// What became of an unmatched transmission: `left` (the window) as
    /// the matcher judged it, else the engine's rule at the end of the
    /// captures; `None`: it counts in neither `lost_between` nor
    /// `unknown`.
    pub fn fate(&self, s: &Sightings, row: &Row, left: Option<Fate>) -> Option<Fate> {
        left.or_else(|| {
            self.cross.fate_at_end(
                &self.offsets,
                &row.transmission(s.flow(row)),
                row.capture,
                row.ts,
            )
        })
    }

    /// The downstream captures of a lost transmission of `flow` sent from
    /// `up`: where its flow's other packets arrived (`None` when none
    /// did).
    pub fn downs_of(&self, up: u16, flow: &Flow) -> Vec<Option<u16>> {
        match self.downs.get(&(up, *flow)) {
            Some(d) => d.iter().map(|&d| Some(d)).collect(),
            None => vec![None],
        }
    }
}

/// One path of a bucket in pass 2, its direction looked up once: what
/// its matches add up to before they join the [`Partials`] (delays and
/// hop latencies as samples, recorded at the end: [`Buckets::of_samples`]).
struct BucketPath {
    key: PathKey,
    a_first: bool,
    offset: i64,
    path: FabricPath,
    transmissions: u64,
    owd: Vec<u64>,
    hops: Vec<(u32, HopSamples)>,
}

/// A switch on a [`BucketPath`]: its hop latencies and queue sums.
#[derive(Default)]
struct HopSamples {
    latency: Vec<u64>,
    queue_sum: u64,
    queue_max: u64,
}

/// Pass 2 over one bucket: [`Partials`]. `kept`: the bucket as
/// [`match_paths`] kept it ([`Kept`]); `paths`: [`merge_paths`] of every
/// bucket's first pass; `to_ref[c]`: capture c's clock minus the
/// reference's (the fabric's one clock); `windows`: each incident's
/// `(start, end)` on the reference clock, culprits looked for inside.
#[pyfunction]
pub fn match_partials(
    py: Python<'_>,
    kept: Kept,
    spans: Vec<(u64, u64)>,
    paths: PyBackedBytes,
    to_ref: Vec<i64>,
    windows: Vec<(i64, i64)>,
) -> PyResult<Py<PyBytes>> {
    let partials = py.detach(|| -> PyResult<Partials> {
        let (d, ctx) = (kept.digest()?, Context::new(&spans, &paths)?);
        let mut out = Partials::default();
        let t_ref = |c: u16, ts: u64| -> i64 {
            ts as i64 - to_ref.get(usize::from(c)).copied().unwrap_or(0)
        };
        let inside = |t: i64| {
            windows
                .iter()
                .enumerate()
                .filter(move |(_, w)| w.0 <= t && t <= w.1)
                .map(|(i, _)| i as u32)
        };
        // The bucket's paths, each direction looked up once.
        let mut local = d
            .paths
            .iter()
            .map(|&key| {
                let (a_first, offset) = ctx.direction_of(&key)?;
                let (up, down) = if a_first {
                    (key.a, key.b)
                } else {
                    (key.b, key.a)
                };
                Ok(BucketPath {
                    key,
                    a_first,
                    offset,
                    path: FabricPath {
                        up,
                        down: Some(down),
                        flow: key.flow,
                        ev: key.ev,
                    },
                    transmissions: 0,
                    owd: Vec::new(),
                    hops: Vec::new(),
                })
            })
            .collect::<PyResult<Vec<BucketPath>>>()?;
        let mut hop_at = 0;
        for pair in &d.pairs {
            let p = &mut local[pair.path as usize];
            let owd = one_way_delay(p.a_first, pair.delta(), p.offset);
            p.transmissions += 1;
            p.owd.push(owd);
            // The copies upstream and downstream (a's hops come first).
            let (in_a, in_b) = (usize::from(pair.hops_a), usize::from(pair.hops_b));
            let (hops_a, hops_b) = d.hops[hop_at..hop_at + in_a + in_b].split_at(in_a);
            hop_at += in_a + in_b;
            let (up_ts, down_hops) = if p.a_first {
                (pair.ts_a, hops_b)
            } else {
                (pair.ts_b, hops_a)
            };
            let t = t_ref(p.path.up, up_ts);
            for w in inside(t) {
                out.window_paths
                    .entry((w, p.path))
                    .or_default()
                    .add(&InWindow {
                        n: 1,
                        lost: 0,
                        delivered: 1,
                        delay_sum: owd,
                    });
            }
            for &(sw, q, lat) in down_hops {
                let k = match p.hops.iter().position(|(id, _)| *id == sw) {
                    Some(k) => k,
                    None => {
                        p.hops.push((sw, HopSamples::default()));
                        p.hops.len() - 1
                    }
                };
                let h = &mut p.hops[k].1;
                h.latency.push(u64::from(lat));
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
        for p in local {
            let owd = Buckets::of_samples(&p.owd);
            let stats = out.paths.entry(p.path).or_default();
            stats.transmissions += p.transmissions;
            stats.owd.add(&owd);
            for (sw, h) in p.hops {
                let e = out.hops.entry((p.path, sw)).or_default();
                e.latency.add(&Buckets::of_samples(&h.latency));
                e.queue_sum += h.queue_sum;
                e.queue_max = e.queue_max.max(h.queue_max);
            }
            out.owd.entry(p.key).or_default().add(&owd);
        }
        let s = &d.unmatched;
        for (row, &left) in s.rows.iter().zip(&d.fates) {
            let capture = row.capture;
            let flow = *s.flow(row);
            *out.unmatched.entry(capture).or_default() += 1;
            let Some(fate) = ctx.fate(s, row, left) else {
                continue;
            };
            let counts = out.fates.entry((capture, flow, row.ev)).or_default();
            match fate {
                Fate::Lost => counts.0 += 1,
                Fate::Unknown => counts.1 += 1,
            }
            let t = t_ref(capture, row.ts);
            for down in ctx.downs_of(capture, &flow) {
                let path = FabricPath {
                    up: capture,
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
        let c = u16::try_from(c).map_err(|_| {
            value_error(format!(
                "capture {c}: the engine matches at most {MAX_CAPTURES} captures"
            ))
        })?;
        cross.set_span(c, first, last);
    }
    for (k, v) in list {
        cross.add_path(k.a, k.b, &k.flow.path(k.ev), *v);
    }
    Ok(cross)
}

/// Clock offsets estimated from the summed paths: `[(a, b, clock of b
/// minus clock of a)]` of the pairs whose offset could be estimated.
#[pyfunction]
pub fn offsets(spans: Vec<(u64, u64)>, paths: PyBackedBytes) -> PyResult<Vec<(u16, u16, i64)>> {
    let ctx = Context::new(&spans, &paths)?;
    Ok(ctx
        .cross
        .report()
        .iter()
        .filter(|r| r.offset_estimated)
        .map(|r| (r.capture_a as u16, r.capture_b as u16, r.clock_offset_ns))
        .collect())
}
