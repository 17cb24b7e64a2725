//! `--metrics ADDR:PORT`: the snapshots the TUI renders, served on
//! `/metrics` for Prometheus (text format 0.0.4, or OpenMetrics 1.0.0 when
//! the `Accept` header asks).
//!
//! ```text
//!  capture thread ─▶ Snapshot (Arc, published every tick) ◀─ clone ─ HTTP handler thread
//!    └─ latency::Recorder (verdict samples ─▶ fixed buckets)          └─ families::render
//! ```
//!
//! - [`latency`]: the histograms (the report has summaries only), fed by
//!   the capture thread from the verdicts.
//! - [`families`]: the metric names, labels and folding.
//! - [`exposition`]: the two text formats.
//! - [`server`]: the HTTP listener (std, own threads, timeouts): a scrape
//!   only clones the latest snapshot's `Arc`, so it never holds up the
//!   capture loop.

pub mod exposition;
pub mod families;
pub mod latency;
pub mod server;

/// What the exporter shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MetricsConfig {
    /// Keep connections apart (`src_conn`, `dst_conn`; RoCEv2: `qp`)
    /// instead of folding them into their host pair.
    pub per_connection: bool,
    /// Per-path (ev) series.
    pub paths: bool,
    /// Label sets per table (directions, paths, RoCEv2 flows, and each
    /// histogram table) that keep their own series; later ones fold into
    /// `src="other",dst="other"`.
    pub max_series: usize,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        MetricsConfig {
            per_connection: false,
            paths: false,
            max_series: 2048,
        }
    }
}
