//! The metrics: one [`Snapshot`] (what the TUI renders) in, the exposition
//! out. Every figure is the engine report's, the capture statistics' or
//! the verdict-fed histograms' ([`super::latency`]); nothing is analysed
//! here.
//!
//! Series are keyed per DATA direction by `src` and `dst` host: a host's
//! connections to one peer fold into one series, unless
//! `--metrics-connections` adds `src_conn` and `dst_conn` (RoCEv2: `qp`).
//! At most `--metrics-max-series` label sets per table keep their own
//! series, the first seen first; the rest fold into `src="other",
//! dst="other"` and `metaroce_exporter_folded_flows` says how many.
//!
//! One file per family group: [`metaroce`], [`rocev2`], [`health`]; the
//! folding in [`rows`].

mod health;
mod metaroce;
mod rocev2;
mod rows;

use std::collections::BTreeMap;

pub use health::ProcessHealth;

use super::MetricsConfig;
use super::exposition::{Format, Kind, Writer};
use super::latency::{Hist, Latencies, SeriesKey, SeriesTable};
use crate::model::{Snapshot, severity};

/// One field of an aggregate, for the tables of counters.
type Field<A> = fn(&A) -> u64;
/// One histogram of a direction's or flow's latencies.
type HistField = fn(&Latencies) -> &Hist;

/// Renders the snapshot in `format`.
pub fn render(
    snap: &Snapshot,
    cfg: &MetricsConfig,
    format: Format,
    health: ProcessHealth,
) -> String {
    let report = &snap.report;
    let mut w = Writer::new(
        format,
        4096 + 4096 * (report.directions.len() + report.rocev2.len()).min(cfg.max_series),
    );
    let hists = snap.histograms.as_deref();
    let [dirs, paths] = metaroce::write(&mut w, report, hists, cfg);
    let roce = rocev2::write(&mut w, report, hists, cfg);
    health::write(&mut w, snap, health, [dirs, paths, roce]);
    w.finish()
}

/// Histogram rows in a stable order (`other` last).
fn sorted(table: Option<&SeriesTable>) -> Vec<(&SeriesKey, &Latencies)> {
    let mut rows: Vec<_> = table.into_iter().flatten().collect();
    rows.sort_by(|a, b| a.0.cmp(b.0));
    rows
}

fn gauge<A>(w: &mut Writer, name: &str, help: &str, rows: &[(&str, &A)], field: Field<A>) {
    w.family(name, Kind::Gauge, help);
    for (l, a) in rows {
        w.sample(name, l, None, field(a));
    }
}

fn labelled_counter<A, K: AsRef<str>>(
    w: &mut Writer,
    name: &str,
    help: &str,
    label: &str,
    rows: &[(&str, &A)],
    map: fn(&A) -> &BTreeMap<K, u64>,
) {
    w.family(name, Kind::Counter, help);
    for (l, a) in rows {
        for (k, v) in map(a) {
            w.sample(name, l, Some((label, k.as_ref())), *v);
        }
    }
}

fn lint_counter<A>(
    w: &mut Writer,
    name: &str,
    help: &str,
    rows: &[(&str, &A)],
    map: fn(&A) -> &BTreeMap<&'static str, u64>,
) {
    w.family(name, Kind::Counter, help);
    for (l, a) in rows {
        for (rule, n) in map(a) {
            let sev = match severity(rule) {
                analyzer::lint::Severity::Error => "error",
                analyzer::lint::Severity::Warning => "warning",
            };
            let l = format!("{l},rule=\"{rule}\"");
            w.sample(name, &l, Some(("severity", sev)), *n);
        }
    }
}

fn add_map<K: Ord>(into: &mut BTreeMap<K, u64>, from: impl Iterator<Item = (K, u64)>) {
    for (k, v) in from {
        *into.entry(k).or_default() += v;
    }
}
