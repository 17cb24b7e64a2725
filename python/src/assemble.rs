//! The reduce's last step, one engine call on the driver: every bucket's
//! [`Partials`] summed and turned into the report's `between_captures`
//! (the engine's own report code), fabric views and culprits
//! (cluster/README.md names each field). Percentiles come from the
//! summed histogram bucket counts: those of all samples, at the engine's
//! histogram precision (3 significant digits).

use std::cmp::Ordering;

use analyzer::engine::Fate;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use rustc_hash::{FxHashMap, FxHashSet};
use serde_json::{Value, json};

use crate::buckets::{
    Buckets, FabricPath, InWindow, Partials, matcher_of_paths, merge_partials, path_list,
};
use crate::matching::value_error;

fn ratio(a: f64, b: f64) -> Option<f64> {
    (b != 0.0).then(|| a / b)
}

/// Loss and delay percentiles of a group of fabric paths.
fn loss_delay(tx: u64, lost: u64, owd: &Buckets) -> Value {
    let (p50, p99, max) = if owd.count() == 0 {
        (None, None, None)
    } else {
        let s = owd.hist().summary();
        (Some(s.p50), Some(s.p99), Some(s.max))
    };
    json!({
        "transmissions": tx,
        "lost": lost,
        "loss_rate": ratio(lost as f64, tx as f64),
        "owd_p50_ns": p50,
        "owd_p99_ns": p99,
        "owd_max_ns": max,
    })
}

fn fabric(p: &Partials) -> (Value, Value, Value) {
    let mut hosts: FxHashMap<(u16, Option<u16>), (u64, u64, Buckets)> = FxHashMap::default();
    let mut evs: FxHashMap<u16, (u64, u64, Buckets)> = FxHashMap::default();
    for (k, v) in &p.paths {
        for e in [
            hosts.entry((k.up, k.down)).or_default(),
            evs.entry(k.ev).or_default(),
        ] {
            e.0 += v.transmissions;
            e.1 += v.lost;
            e.2.add(&v.owd);
        }
    }
    let mut hosts: Vec<_> = hosts.into_iter().collect();
    hosts.sort_by_key(|(k, _)| *k);
    let hosts = hosts
        .into_iter()
        .map(|((up, down), (tx, lost, owd))| {
            let mut v = loss_delay(tx, lost, &owd);
            v["up"] = json!(up);
            v["down"] = json!(down);
            v
        })
        .collect();
    let mut evs: Vec<_> = evs.into_iter().collect();
    evs.sort_by_key(|(k, _)| *k);
    let evs = evs
        .into_iter()
        .map(|(ev, (tx, lost, owd))| {
            let mut v = json!({ "ev": ev });
            v.as_object_mut().expect("an object").extend(
                loss_delay(tx, lost, &owd)
                    .as_object()
                    .expect("an object")
                    .clone(),
            );
            v
        })
        .collect();
    // Per switch: its hops, and the loss of the paths that cross it.
    let mut sw: FxHashMap<u32, (Buckets, u64, u64, u64, u64)> = FxHashMap::default();
    for ((path, id), h) in &p.hops {
        let e = sw.entry(*id).or_default();
        e.0.add(&h.latency);
        e.1 += h.queue_sum;
        e.2 = e.2.max(h.queue_max);
        if let Some(ps) = p.paths.get(path) {
            e.3 += ps.transmissions;
            e.4 += ps.lost;
        }
    }
    let mut sw: Vec<_> = sw.into_iter().collect();
    sw.sort_by_key(|(k, _)| *k);
    let switches = sw
        .into_iter()
        .map(|(id, (lat, q_sum, q_max, tx, lost))| {
            let hops = lat.count();
            let s = lat.hist().summary();
            json!({
                "switch_id": id,
                "hops": hops,
                "hop_latency_mean_ns": ratio(lat.sum as f64, hops as f64),
                "hop_latency_max_ns": s.max,
                "queue_depth_max": q_max,
                "queue_depth_mean": ratio(q_sum as f64, hops as f64),
                "hop_latency_p50_ns": s.p50,
                "hop_latency_p99_ns": s.p99,
                "transmissions": tx,
                "lost": lost,
                "loss_rate": ratio(lost as f64, tx as f64),
            })
        })
        .collect();
    (
        Value::Array(hosts),
        Value::Array(evs),
        Value::Array(switches),
    )
}

/// A candidate culprit in one incident: its delay and loss inside the
/// window and in the rest of the job.
#[derive(Default)]
struct Rise {
    lat_in: Option<f64>,
    lat_out: Option<f64>,
    loss_in: Option<f64>,
    loss_out: Option<f64>,
    n_in: Option<u64>,
}

impl Rise {
    /// Delay inside (`inside`: count and sum) and outside (the rest of
    /// `all`); present only when something fell inside.
    fn delay(&mut self, inside: (u64, u64), all: (u64, u64)) {
        if inside.0 == 0 {
            return;
        }
        self.lat_in = ratio(inside.1 as f64, inside.0 as f64);
        self.lat_out = ratio(all.1 as f64 - inside.1 as f64, (all.0 - inside.0) as f64);
    }

    /// Loss inside (`inside`: transmissions, lost) and outside.
    fn loss(&mut self, inside: (u64, u64), all: (u64, u64)) {
        if inside.0 == 0 {
            return;
        }
        self.n_in = Some(inside.0);
        self.loss_in = ratio(inside.1 as f64, inside.0 as f64);
        self.loss_out = ratio(all.1 as f64 - inside.1 as f64, (all.0 - inside.0) as f64);
    }

    fn rises(&self) -> (f64, f64) {
        let lat_in = self.lat_in.unwrap_or(0.0);
        let lat_out = self.lat_out.or(self.lat_in).unwrap_or(0.0);
        let d_lat = (lat_in - lat_out).max(0.0);
        let d_loss = (self.loss_in.unwrap_or(0.0) - self.loss_out.unwrap_or(0.0)).max(0.0);
        (d_lat, d_loss)
    }
}

/// Candidates of one incident scored (`score` = loss rise / largest loss
/// rise + delay rise / largest delay rise) and ranked, the `top` first;
/// ties in key order.
/// A scored candidate: score, sort key, columns, rise, (delay rise, loss
/// rise).
type Scored<K> = (f64, K, Value, Rise, (f64, f64));

fn ranked<K: Ord>(cands: Vec<(K, Value, Rise)>, top: usize) -> Vec<Value> {
    let rises: Vec<(f64, f64)> = cands.iter().map(|c| c.2.rises()).collect();
    let max_lat = rises.iter().map(|r| r.0).fold(0.0, f64::max);
    let max_loss = rises.iter().map(|r| r.1).fold(0.0, f64::max);
    let norm = |v: f64, m: f64| if m > 0.0 { v / m } else { 0.0 };
    let mut scored: Vec<Scored<K>> = cands
        .into_iter()
        .zip(rises)
        .map(|((k, v, r), rise)| {
            (
                norm(rise.1, max_loss) + norm(rise.0, max_lat),
                k,
                v,
                r,
                rise,
            )
        })
        .collect();
    scored.sort_by(|a, b| {
        b.0.partial_cmp(&a.0)
            .unwrap_or(Ordering::Equal)
            .then_with(|| a.1.cmp(&b.1))
    });
    scored
        .into_iter()
        .take(top)
        .enumerate()
        .map(|(i, (score, _, mut v, r, (d_lat, d_loss)))| {
            let o = v.as_object_mut().expect("an object");
            o.insert("lat_in".into(), json!(r.lat_in));
            o.insert("lat_out".into(), json!(r.lat_out));
            o.insert("loss_in".into(), json!(r.loss_in));
            o.insert("loss_out".into(), json!(r.loss_out));
            o.insert("n_in".into(), json!(r.n_in));
            o.insert("delay_rise_ns".into(), json!(d_lat));
            o.insert("loss_rise".into(), json!(d_loss));
            o.insert("score".into(), json!(score));
            o.insert("rank".into(), json!(i + 1));
            v
        })
        .collect()
}

/// The path's columns as the report names them; its sort key compares
/// addresses as their text, like the tables.
fn path_value(p: &FabricPath) -> (impl Ord + use<>, Value) {
    let key = (
        p.up,
        p.down,
        p.flow.rocev2,
        p.flow.src.to_string(),
        p.flow.dst.to_string(),
        p.flow.src_conn,
        p.flow.dst_conn,
        p.ev,
    );
    let v = json!({
        "up": p.up, "down": p.down, "rocev2": p.flow.rocev2,
        "src": p.flow.src.to_string(), "dst": p.flow.dst.to_string(),
        "src_conn": p.flow.src_conn, "dst_conn": p.flow.dst_conn, "ev": p.ev,
    });
    (key, v)
}

/// Per incident: switches and paths ranked.
fn culprits(p: &Partials, incidents: u32, top: usize) -> Vec<(Vec<Value>, Vec<Value>)> {
    // Whole-job sums: per switch (hops, latency sum) and the paths
    // crossing it; per path (transmissions, lost), (delivered, delay sum).
    let mut sw_all: FxHashMap<u32, (u64, u64)> = FxHashMap::default();
    let mut sw_paths: FxHashMap<u32, FxHashSet<FabricPath>> = FxHashMap::default();
    for ((path, id), h) in &p.hops {
        let e = sw_all.entry(*id).or_default();
        e.0 += h.latency.count();
        e.1 = e.1.saturating_add(h.latency.sum);
        sw_paths.entry(*id).or_default().insert(*path);
    }
    let mut per_incident: Vec<FxHashMap<FabricPath, InWindow>> =
        (0..incidents).map(|_| FxHashMap::default()).collect();
    for ((i, path), w) in &p.window_paths {
        if let Some(m) = per_incident.get_mut(*i as usize) {
            m.insert(*path, *w);
        }
    }
    let mut sw_in: Vec<FxHashMap<u32, InWindow>> =
        (0..incidents).map(|_| FxHashMap::default()).collect();
    for ((i, id), w) in &p.window_switches {
        if let Some(m) = sw_in.get_mut(*i as usize) {
            m.insert(*id, *w);
        }
    }
    let path_all = |path: &FabricPath| {
        p.paths.get(path).map_or((0, 0, 0, 0), |s| {
            let delivered = s.owd.count();
            (s.transmissions, s.lost, delivered, s.owd.sum)
        })
    };
    (0..incidents as usize)
        .map(|i| {
            let paths_in = &per_incident[i];
            // Switches.
            let mut ids: Vec<u32> = sw_in[i].keys().copied().collect();
            for (id, paths) in &sw_paths {
                if paths
                    .iter()
                    .any(|pa| paths_in.get(pa).is_some_and(|w| w.n > 0))
                {
                    ids.push(*id);
                }
            }
            ids.sort_unstable();
            ids.dedup();
            let switches = ids
                .into_iter()
                .map(|id| {
                    let mut r = Rise::default();
                    if let Some(w) = sw_in[i].get(&id) {
                        r.delay(
                            (w.n, w.delay_sum),
                            sw_all.get(&id).copied().unwrap_or_default(),
                        );
                    }
                    let (mut n_in, mut lost_in, mut n_all, mut lost_all) = (0, 0, 0, 0);
                    for pa in sw_paths.get(&id).into_iter().flatten() {
                        if let Some(w) = paths_in.get(pa) {
                            n_in += w.n;
                            lost_in += w.lost;
                        }
                        let (n, l, _, _) = path_all(pa);
                        n_all += n;
                        lost_all += l;
                    }
                    r.loss((n_in, lost_in), (n_all, lost_all));
                    (id, json!({ "switch_id": id }), r)
                })
                .collect();
            // Paths.
            let paths = paths_in
                .iter()
                .filter(|(_, w)| w.n > 0)
                .map(|(pa, w)| {
                    let (n, l, delivered, delay_sum) = path_all(pa);
                    let mut r = Rise::default();
                    r.delay((w.delivered, w.delay_sum), (delivered, delay_sum));
                    r.loss((w.n, w.lost), (n, l));
                    let (key, v) = path_value(pa);
                    (key, v, r)
                })
                .collect();
            (ranked(switches, top), ranked(paths, top))
        })
        .collect()
}

/// The report's parts from the reduce's partials, as JSON text:
/// `between_captures`, `unmatched` (per capture, its transmissions matched
/// nowhere), `fabric` (`hosts` with `up`/`down` captures, `evs`,
/// `switches`) and `culprits` (per incident: `switches`, `paths`).
/// `paths`: the first pass's summed paths; `partials`: every bucket's
/// second pass; `incidents`: how many windows the second pass was given.
#[pyfunction]
#[pyo3(signature = (spans, paths, partials, incidents, *, top = 5))]
pub fn assemble(
    py: Python<'_>,
    spans: Vec<(u64, u64)>,
    paths: PyBackedBytes,
    partials: Vec<PyBackedBytes>,
    incidents: u32,
    top: usize,
) -> PyResult<String> {
    py.detach(|| {
        let list = path_list(&paths)?;
        let p = merge_partials(&partials)?;
        let mut cross = matcher_of_paths(&spans, &list)?;
        for (k, b) in &p.owd {
            let path = k.flow.path(k.ev);
            for (bucket, n) in b.counts() {
                cross.add_one_way_delays(k.a, k.b, &path, bucket, n);
            }
        }
        for ((capture, flow, ev), (lost, unknown)) in &p.fates {
            let path = flow.path(*ev);
            if *lost > 0 {
                cross.add_unmatched(*capture, &path, Fate::Lost, *lost);
            }
            if *unknown > 0 {
                cross.add_unmatched(*capture, &path, Fate::Unknown, *unknown);
            }
        }
        let (hosts, evs, switches) = fabric(&p);
        let culprits: Vec<Value> = culprits(&p, incidents, top)
            .into_iter()
            .map(|(s, pa)| json!({ "switches": s, "paths": pa }))
            .collect();
        let mut unmatched: Vec<(u16, u64)> = p.unmatched.iter().map(|(&c, &n)| (c, n)).collect();
        unmatched.sort_unstable();
        let out = json!({
            "between_captures": cross.report(),
            "unmatched": unmatched,
            "fabric": { "hosts": hosts, "evs": evs, "switches": switches },
            "culprits": culprits,
        });
        serde_json::to_string(&out).map_err(value_error)
    })
}
