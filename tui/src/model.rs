//! What the capture thread publishes and the UI renders: one immutable
//! [`Snapshot`] per tick, shared as an `Arc` (the UI clones the `Arc` under
//! a short lock and renders without holding it). It is also the JSON that
//! `w` (save) and `--headless --json-out` write.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use analyzer::Report;
use analyzer::engine::{DirectionReport, RoceFlowReport, StateSize};
use analyzer::lint::{RuleId, Severity};
use serde::Serialize;

use crate::events::Event;
use crate::latency::LatencyView;
use crate::metrics::latency::Histograms;

/// Where the packets come from.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SourceInfo {
    Live {
        interface: String,
        filter: String,
    },
    /// `speed` 0 = as fast as possible.
    Replay {
        file: String,
        speed: f64,
    },
}

/// State of the capture thread.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", content = "detail", rename_all = "snake_case")]
pub enum RunState {
    Running,
    /// Replay reached the end of the file.
    Finished,
    /// Capture failed after it started.
    Failed(String),
}

/// Counters of the capture itself. Drops are never hidden: `kernel_drops`
/// and `interface_drops` are libpcap's `ps_drop` / `ps_ifdrop` (0 for a
/// replay), `capture_errors` the corrupt records of a replayed file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct CaptureStats {
    /// Packets libpcap says it received (`ps_recv`; a replay: records read).
    pub received: u64,
    pub kernel_drops: u64,
    pub interface_drops: u64,
    /// Frames handed to the engine (decoded or not).
    pub frames: u64,
    /// Captured bytes of those frames (wire length).
    pub bytes: u64,
    pub capture_errors: u64,
    /// Over the last tick (wall clock).
    pub packets_per_s: f64,
    pub bytes_per_s: f64,
}

/// Key of one connection direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct DirKey {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub src_conn: u32,
    pub dst_conn: u32,
}

impl DirKey {
    pub fn of(d: &DirectionReport) -> DirKey {
        DirKey {
            src: d.src,
            dst: d.dst,
            src_conn: d.src_conn,
            dst_conn: d.dst_conn,
        }
    }

    pub fn reverse(self) -> DirKey {
        DirKey {
            src: self.dst,
            dst: self.src,
            src_conn: self.dst_conn,
            dst_conn: self.src_conn,
        }
    }
}

impl std::fmt::Display for DirKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}#{}→{}#{}",
            self.src, self.src_conn, self.dst, self.dst_conn
        )
    }
}

/// Key of one RoCEv2 RC flow: the requester's address, the responder's
/// address and the destination QP of the requests (as the engine keys it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct RoceKey {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub dest_qp: u32,
}

impl RoceKey {
    pub fn of(r: &RoceFlowReport) -> RoceKey {
        RoceKey {
            src: r.src,
            dst: r.dst,
            dest_qp: r.dest_qp,
        }
    }
}

impl std::fmt::Display for RoceKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}→{} QP {:#08x}", self.src, self.dst, self.dest_qp)
    }
}

/// Rates of one direction over the last tick (capture clock).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct DirRate {
    pub goodput_bps: f64,
    pub packets_per_s: f64,
}

/// Everything one frame shows.
#[derive(Debug, Clone, Serialize)]
pub struct Snapshot {
    pub source: SourceInfo,
    pub state: RunState,
    /// Publication counter (increments every tick).
    pub seq: u64,
    /// Wall-clock seconds since the capture started.
    pub elapsed_s: f64,
    pub stats: CaptureStats,
    /// Per direction, in `report.directions` order.
    pub rates: Vec<DirRate>,
    /// Per RoCEv2 flow, in `report.rocev2` order: `goodput_bps` is the
    /// rate of request payload (retransmissions included), `packets_per_s`
    /// requests and responses.
    pub rocev2_rates: Vec<DirRate>,
    pub latency: LatencyView,
    /// Most recent last; at most [`crate::events::MAX_EVENTS`].
    pub events: Vec<Event>,
    /// The capture points seen (plain frames, mirror sessions), first
    /// seen first: what each carried, and the copies not analysed
    /// because another point is analysed for their host pair.
    pub points: Vec<crate::points::PointView>,
    /// CPU use (set by `--headless` at the end).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub process: Option<ProcessStats>,
    /// The flow engine's report (analyzer/SCHEMA.md).
    pub report: Report,
    /// `--metrics`: the latency histograms fed from the verdicts
    /// (`metrics::latency`), and the engine's state sizes.
    #[serde(skip)]
    pub histograms: Option<Arc<Histograms>>,
    #[serde(skip)]
    pub engine_state: Option<StateSize>,
}

impl Snapshot {
    /// An empty snapshot before the first tick.
    pub fn empty(source: SourceInfo) -> Snapshot {
        Snapshot {
            source,
            state: RunState::Running,
            seq: 0,
            elapsed_s: 0.0,
            stats: CaptureStats::default(),
            rates: Vec::new(),
            rocev2_rates: Vec::new(),
            latency: LatencyView::default(),
            events: Vec::new(),
            points: Vec::new(),
            process: None,
            report: analyzer::Engine::default().snapshot(),
            histograms: None,
            engine_state: None,
        }
    }

    pub fn rocev2_flow(&self, key: RoceKey) -> Option<(usize, &RoceFlowReport)> {
        self.report
            .rocev2
            .iter()
            .enumerate()
            .find(|(_, r)| RoceKey::of(r) == key)
    }

    pub fn direction(&self, key: DirKey) -> Option<(usize, &DirectionReport)> {
        self.report
            .directions
            .iter()
            .enumerate()
            .find(|(_, d)| DirKey::of(d) == key)
    }

    /// Whether the conformance lint ran (its counts are in the report).
    pub fn lint_on(&self) -> bool {
        self.report.lint.is_some()
    }

    /// The lint's findings on the connection of direction `key`: on the
    /// packets of both its directions (a DATA direction's own packets,
    /// and the feedback about it, which the reverse direction sends).
    pub fn connection_lint(&self, key: DirKey) -> LintCounts {
        [key, key.reverse()]
            .into_iter()
            .filter_map(|k| self.direction(k))
            .map(|(_, d)| LintCounts::of(d))
            .fold(LintCounts::default(), |a, b| a + b)
    }
}

/// Lint findings by severity, from a direction's per-rule counts
/// (`DirectionReport::lint`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct LintCounts {
    pub errors: u64,
    pub warnings: u64,
}

impl LintCounts {
    pub fn of(d: &DirectionReport) -> LintCounts {
        LintCounts::of_rules(&d.lint)
    }

    /// From per-rule counts (a direction's or a RoCEv2 flow's `lint`).
    pub fn of_rules(counts: &BTreeMap<&'static str, u64>) -> LintCounts {
        counts
            .iter()
            .map(|(id, &n)| match severity(id) {
                Severity::Error => LintCounts {
                    errors: n,
                    warnings: 0,
                },
                Severity::Warning => LintCounts {
                    errors: 0,
                    warnings: n,
                },
            })
            .fold(LintCounts::default(), |a, b| a + b)
    }
}

impl std::ops::Add for LintCounts {
    type Output = LintCounts;

    fn add(self, o: LintCounts) -> LintCounts {
        LintCounts {
            errors: self.errors + o.errors,
            warnings: self.warnings + o.warnings,
        }
    }
}

/// The severity of the rule with id `id` (the report names only rules of
/// the registry; an id it does not know counts as a warning).
pub fn severity(id: &str) -> Severity {
    RuleId::find(id).map_or(Severity::Warning, |r| r.rule().severity)
}

/// CPU time of this process (all threads), from `/proc/self/stat`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct ProcessStats {
    pub cpu_user_s: f64,
    pub cpu_system_s: f64,
    pub wall_s: f64,
    /// Highest packet rate of one tick seen by `--headless` (frames handed
    /// to the engine per wall-clock second).
    pub peak_packets_per_s: f64,
}

impl ProcessStats {
    /// Reads utime and stime (clock ticks of 1/100 s, Linux's USER_HZ).
    pub fn read(wall_s: f64) -> Option<ProcessStats> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        // Fields after the command name (which is in parentheses).
        let rest = &stat[stat.rfind(')')? + 2..];
        let f: Vec<&str> = rest.split_whitespace().collect();
        let utime: f64 = f.get(11)?.parse().ok()?;
        let stime: f64 = f.get(12)?.parse().ok()?;
        Some(ProcessStats {
            cpu_user_s: utime / 100.0,
            cpu_system_s: stime / 100.0,
            wall_s,
            peak_packets_per_s: 0.0,
        })
    }
}
