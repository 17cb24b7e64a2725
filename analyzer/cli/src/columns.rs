//! The report's tables as data, drawn by both the terminal report
//! ([`crate::text`]) and the HTML page ([`crate::html`]). A table is a
//! list of [`Column`]s: a header and how a row gives its [`Cell`] (the
//! value, its format, its tone and its sort key). Each renderer only lays
//! the cells out, so a column added here reaches both outputs, formatted
//! the same.
//!
//! The tables with a column model: connections ([`directions`]), paths
//! ([`paths`]), the stall timeline ([`stalls`]), between captures
//! ([`between`]) and RoCEv2 flows ([`rocev2`]); the latency table's
//! numbers ([`SUMMARY`]) under labels each renderer lays out its own way;
//! and the top-offender lists' rankings ([`OFFENDERS`]), which the text
//! report prints as lines and the page as tables.

use analyzer::engine::{
    BetweenPath, DirectionReport, PathReport, RoceFlowReport, StallReport, Summary,
};

use crate::pipeline::CaptureResult;
use crate::text::{capture_name, fmt_bps, fmt_bytes, fmt_ns, fmt_rate};

/// How a cell is coloured (ANSI style in the terminal, CSS class on the page).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    Plain,
    /// A count of trouble: red when non-zero.
    Bad,
    /// Yellow when non-zero.
    Warn,
    Dim,
}

/// One cell: its text, tone, alignment and the value the page sorts it by.
pub struct Cell {
    pub text: String,
    pub tone: Tone,
    /// Left-aligned (names); numbers are right-aligned.
    pub left: bool,
    /// The sort key, for cells whose text does not sort (`13.0KiB`);
    /// `None` sorts by the text.
    pub key: Option<f64>,
}

impl Cell {
    /// A count.
    pub fn n(v: u64) -> Cell {
        Cell {
            text: v.to_string(),
            tone: Tone::Plain,
            left: false,
            key: Some(v as f64),
        }
    }
    fn toned(v: u64, tone: Tone) -> Cell {
        Cell {
            tone: if v > 0 { tone } else { Tone::Dim },
            ..Cell::n(v)
        }
    }
    /// A count of trouble: red when non-zero, dim at zero.
    pub fn bad(v: u64) -> Cell {
        Cell::toned(v, Tone::Bad)
    }
    /// A count worth a look: yellow when non-zero, dim at zero.
    pub fn warn(v: u64) -> Cell {
        Cell::toned(v, Tone::Warn)
    }
    /// A formatted value, right-aligned, sorted by `key`.
    pub fn s(text: impl Into<String>, key: f64) -> Cell {
        Cell {
            text: text.into(),
            tone: Tone::Plain,
            left: false,
            key: Some(key),
        }
    }
    /// A name, left-aligned.
    pub fn l(text: impl Into<String>) -> Cell {
        Cell {
            text: text.into(),
            tone: Tone::Plain,
            left: true,
            key: None,
        }
    }
    /// A byte count with a binary unit.
    pub fn bytes(v: u64) -> Cell {
        Cell::s(fmt_bytes(v), v as f64)
    }
    /// A latency out of a summary of `count` samples: `-` (dim) without any.
    pub fn ns(v: u64, count: u64) -> Cell {
        if count == 0 {
            Cell {
                text: "-".into(),
                tone: Tone::Dim,
                left: false,
                key: Some(-1.0),
            }
        } else {
            Cell::s(fmt_ns(v), v as f64)
        }
    }
    /// A rate as a percentage; `-` when undefined.
    pub fn rate(r: Option<f64>) -> Cell {
        Cell::s(fmt_rate(r), r.unwrap_or(-1.0))
    }
    /// A number (`-` when absent).
    pub fn opt(v: Option<u64>) -> Cell {
        Cell::s(
            v.map_or_else(|| "-".into(), |v| v.to_string()),
            v.map_or(-1.0, |v| v as f64),
        )
    }
    pub fn tone(self, tone: Tone) -> Cell {
        Cell { tone, ..self }
    }
}

/// A column of a table whose rows are `R`s.
pub struct Column<R> {
    pub header: &'static str,
    pub cell: fn(&R) -> Cell,
}

const fn col<R>(header: &'static str, cell: fn(&R) -> Cell) -> Column<R> {
    Column { header, cell }
}

/// Headers and rows of cells, for a renderer to lay out.
pub struct Table {
    pub headers: Vec<&'static str>,
    pub rows: Vec<Vec<Cell>>,
}

impl Table {
    /// A table laid out by hand (the latency table).
    pub fn new(headers: Vec<&'static str>) -> Table {
        Table {
            headers,
            rows: Vec::new(),
        }
    }

    /// The table of `columns` over `rows`.
    pub fn of<R>(columns: &[Column<R>], rows: impl IntoIterator<Item = R>) -> Table {
        Table {
            headers: columns.iter().map(|c| c.header).collect(),
            rows: rows
                .into_iter()
                .map(|r| columns.iter().map(|c| (c.cell)(&r)).collect())
                .collect(),
        }
    }

    pub fn push(&mut self, row: Vec<Cell>) {
        self.rows.push(row);
    }

    /// Whether column `i`'s header aligns left: as the first row's cell
    /// (names left, numbers right); right in a table without rows.
    pub fn left(&self, i: usize) -> bool {
        self.rows
            .first()
            .and_then(|r| r.get(i))
            .is_some_and(|c| c.left)
    }
}

/// A report item and the name its row shows first: a direction's label
/// (`[stem] 10.0.0.1:256 -> 10.0.0.2:512`), or a RoCEv2 flow's.
pub struct Named<'a, T> {
    pub name: &'a str,
    pub item: &'a T,
}

/// rx lost + tx lost of a direction: the connections table's `lost`.
pub fn lost(d: &DirectionReport) -> u64 {
    d.path_loss + d.paths.iter().map(|p| p.lost_inferred).sum::<u64>()
}

/// Stalls of a direction, listed or beyond the per-direction cap.
pub fn stall_count(d: &DirectionReport) -> u64 {
    d.stalls.len() as u64 + d.stalls_dropped
}

/// The connections table: one row per direction.
pub fn directions<'a>() -> [Column<Named<'a, DirectionReport>>; 20] {
    [
        col("direction", |r| Cell::l(r.name)),
        col("data", |r| Cell::n(r.item.data_packets)),
        col("bytes", |r| Cell::bytes(r.item.data_bytes)),
        col("goodput", |r| {
            Cell::s(fmt_bps(r.item.goodput_bps), r.item.goodput_bps as f64)
        }),
        col("retx", |r| Cell::bad(r.item.retransmissions)),
        col("fast", |r| Cell::n(r.item.fast_retransmissions)),
        col("timeout", |r| Cell::bad(r.item.timeout_retransmissions)),
        col("spurious", |r| Cell::warn(r.item.spurious_retransmissions)),
        col("ooo", |r| Cell::n(r.item.out_of_order)),
        col("reorder", |r| {
            Cell::n(u64::from(r.item.max_reorder_distance))
        }),
        col("trim", |r| Cell::warn(r.item.trimmed)),
        col("CE", |r| Cell::warn(r.item.ce_marked)),
        col("ECE", |r| Cell::warn(r.item.ece)),
        col("acks", |r| Cell::n(r.item.acks)),
        col("nacks", |r| Cell::warn(r.item.nacks)),
        col("cnps", |r| Cell::warn(r.item.cnps)),
        col("lost", |r| Cell::bad(lost(r.item))),
        col("msgs", |r| {
            Cell::n(r.item.messages_completed.max(r.item.messages_delivered))
        }),
        col("stalls", |r| Cell::bad(stall_count(r.item))),
        col("unacked", |r| Cell::n(r.item.outstanding_packets)),
    ]
}

/// A path worth a row of the paths table: it carried DATA or has RTT
/// samples (PROBEs).
pub fn listed_path(p: &PathReport) -> bool {
    p.data_packets > 0 || p.ack_rtt_ns.count > 0
}

/// The paths table: one row per path of a direction, named by the direction.
pub fn paths<'a>() -> [Column<Named<'a, PathReport>>; 18] {
    [
        col("direction", |r| Cell::l(r.name)),
        col("ev", |r| Cell::n(u64::from(r.item.ev))),
        col("packets", |r| Cell::n(r.item.packets)),
        col("data", |r| Cell::n(r.item.data_packets)),
        col("bytes", |r| Cell::bytes(r.item.data_bytes)),
        col("retx", |r| Cell::bad(r.item.retransmissions)),
        col("rx lost", |r| Cell::bad(r.item.lost)),
        col("rx loss%", |r| Cell::rate(r.item.receive_loss_rate())),
        col("tx lost", |r| Cell::bad(r.item.lost_inferred)),
        col("tx loss%", |r| Cell::rate(r.item.send_loss_rate())),
        col("reord", |r| Cell::warn(r.item.reordered)),
        col("CE", |r| Cell::warn(r.item.ce_marked)),
        col("rtt n", |r| Cell::n(r.item.ack_rtt_ns.count)),
        col("rtt p50", |r| summary_cell(&r.item.ack_rtt_ns, |s| s.p50)),
        col("rtt p90", |r| summary_cell(&r.item.ack_rtt_ns, |s| s.p90)),
        col("rtt p99", |r| summary_cell(&r.item.ack_rtt_ns, |s| s.p99)),
        col("rtt p99.9", |r| {
            summary_cell(&r.item.ack_rtt_ns, |s| s.p999)
        }),
        col("rtt max", |r| summary_cell(&r.item.ack_rtt_ns, |s| s.max)),
    ]
}

/// A row of the stall timeline: the stall, its direction's label and the
/// first frame's time, which its start is shown relative to.
pub struct StallRow<'a> {
    pub name: &'a str,
    pub stall: &'a StallReport,
    pub origin: u64,
}

/// The stall timeline: one row per stall.
pub fn stalls<'a>() -> [Column<StallRow<'a>>; 10] {
    [
        col("start", |r| {
            let start = r.stall.start_ns.saturating_sub(r.origin);
            Cell::s(format!("+{}", fmt_ns(start)), start as f64)
        }),
        col("duration", |r| {
            Cell::s(fmt_ns(r.stall.duration_ns), r.stall.duration_ns as f64).tone(Tone::Bad)
        }),
        col("direction", |r| Cell::l(r.name)),
        col("state", |r| {
            let open = r.stall.open;
            Cell::l(if open { "OPEN" } else { "ended" }).tone(if open {
                Tone::Bad
            } else {
                Tone::Plain
            })
        }),
        col("first event", |r| Cell::l(r.stall.end_cause)),
        col("end frame", |r| Cell::opt(r.stall.end_frame)),
        col("cum_ack", |r| Cell::opt(r.stall.cum_ack.map(u64::from))),
        col("unacked", |r| Cell::n(r.stall.outstanding_packets)),
        col("retx", |r| Cell::n(r.stall.retransmissions)),
        col("evs in flight", |r| {
            let evs: Vec<String> = r
                .stall
                .paths_in_flight
                .iter()
                .map(ToString::to_string)
                .collect();
            Cell::l(evs.join(","))
        }),
    ]
}

/// A row of a between-captures table: a path seen at two capture points,
/// and the captures, which name its two ends.
pub struct BetweenRow<'a> {
    pub path: &'a BetweenPath,
    pub captures: &'a [CaptureResult],
}

/// A between-captures table: one row per path matched at both captures.
pub fn between<'a>() -> [Column<BetweenRow<'a>>; 12] {
    [
        col("direction", |r| {
            let p = r.path;
            Cell::l(if p.proto == "rocev2" {
                format!("{} -> {} qp 0x{:06x}", p.src, p.dst, p.dst_conn)
            } else {
                format!("{}:{} -> {}:{}", p.src, p.src_conn, p.dst, p.dst_conn)
            })
        }),
        col("ev/port", |r| Cell::n(u64::from(r.path.ev))),
        col("from", |r| {
            Cell::l(capture_name(r.captures, r.path.upstream))
        }),
        col("to", |r| {
            Cell::l(capture_name(r.captures, r.path.downstream))
        }),
        col("matched", |r| Cell::n(r.path.matched)),
        col("lost", |r| Cell::bad(r.path.lost_between)),
        col("unknown", |r| Cell::warn(r.path.unknown)),
        col("owd n", |r| Cell::n(r.path.one_way_delay_ns.count)),
        col("owd min", |r| {
            summary_cell(&r.path.one_way_delay_ns, |s| s.min)
        }),
        col("owd p50", |r| {
            summary_cell(&r.path.one_way_delay_ns, |s| s.p50)
        }),
        col("owd p99", |r| {
            summary_cell(&r.path.one_way_delay_ns, |s| s.p99)
        }),
        col("owd max", |r| {
            summary_cell(&r.path.one_way_delay_ns, |s| s.max)
        }),
    ]
}

/// The RoCEv2 flows table: one row per request flow.
pub fn rocev2<'a>() -> [Column<Named<'a, RoceFlowReport>>; 20] {
    [
        col("flow", |r| Cell::l(r.name)),
        col("data", |r| Cell::n(r.item.data_packets)),
        col("bytes", |r| Cell::bytes(r.item.data_bytes)),
        col("retx", |r| Cell::bad(r.item.retransmissions)),
        col("fast", |r| Cell::n(r.item.fast_retransmissions)),
        col("timeout", |r| Cell::bad(r.item.timeout_retransmissions)),
        col("spurious", |r| Cell::warn(r.item.spurious_retransmissions)),
        col("naks", |r| Cell::bad(r.item.naks)),
        col("rnr", |r| Cell::warn(r.item.rnr_naks)),
        col("acks", |r| Cell::n(r.item.acks)),
        col("cnps", |r| Cell::warn(r.item.cnps)),
        col("CE", |r| Cell::warn(r.item.ce_marked)),
        col("reads", |r| Cell::n(r.item.read_requests)),
        col("msgs", |r| Cell::n(r.item.messages_completed)),
        col("rtt n", |r| Cell::n(r.item.ack_rtt_ns.count)),
        col("rtt p50", |r| summary_cell(&r.item.ack_rtt_ns, |s| s.p50)),
        col("rtt p99", |r| summary_cell(&r.item.ack_rtt_ns, |s| s.p99)),
        col("rtt max", |r| summary_cell(&r.item.ack_rtt_ns, |s| s.max)),
        col("compl p50", |r| {
            summary_cell(&r.item.msg_completion_ns, |s| s.p50)
        }),
        col("compl p99", |r| {
            summary_cell(&r.item.msg_completion_ns, |s| s.p99)
        }),
    ]
}

/// One value of a latency summary (`-` without samples).
fn summary_cell(s: &Summary, value: fn(&Summary) -> u64) -> Cell {
    Cell::ns(value(s), s.count)
}

/// The latency table's numbers: one row per latency summary, after the
/// labels (the text report joins direction and latency in one column, the
/// page gives each its own).
pub const SUMMARY: [Column<Summary>; 7] = [
    col("count", |s| Cell::n(s.count)),
    col("min", |s| Cell::ns(s.min, s.count)),
    col("p50", |s| Cell::ns(s.p50, s.count)),
    col("p90", |s| Cell::ns(s.p90, s.count)),
    col("p99", |s| Cell::ns(s.p99, s.count)),
    col("p99.9", |s| Cell::ns(s.p999, s.count)),
    col("max", |s| Cell::ns(s.max, s.count)),
];

/// The latencies of a direction the latency table lists, in order: those
/// with samples among ack RTT, fabric RTT, message completion and
/// delivery, then completion per op.
pub fn latencies(d: &DirectionReport) -> Vec<(String, &Summary)> {
    let fixed: [(&str, &Summary); 4] = [
        ("ack RTT", &d.ack_rtt_ns),
        ("fabric RTT", &d.fabric_rtt_ns),
        ("msg completion", &d.msg_completion_ns),
        ("msg delivery", &d.msg_delivery_ns),
    ];
    let by_op = d
        .msg_completion_by_op_ns
        .iter()
        .map(|(op, s)| (format!("completion {op}"), s));
    fixed
        .into_iter()
        .map(|(what, s)| (what.to_string(), s))
        .chain(by_op)
        .filter(|(_, s)| s.count > 0)
        .collect()
}

/// A top-offender list: which paths it ranks and by what.
pub struct Offenders {
    pub title: &'static str,
    /// The page's table id.
    pub id: &'static str,
    /// The ranking key; paths where it is zero are not listed.
    pub key: fn(&PathReport) -> u64,
    /// Whether the key is a time in nanoseconds.
    pub is_time: bool,
}

impl Offenders {
    /// The `top` paths of `paths` with the largest non-zero key, worst
    /// first (ties: lower ev first, then in the given order).
    pub fn rank<'p, T>(
        &self,
        paths: impl IntoIterator<Item = (T, &'p PathReport)>,
        top: usize,
    ) -> Vec<(T, &'p PathReport)> {
        let key = self.key;
        let mut ranked: Vec<(T, &PathReport)> =
            paths.into_iter().filter(|(_, p)| key(p) > 0).collect();
        ranked.sort_by(|a, b| key(b.1).cmp(&key(a.1)).then(a.1.ev.cmp(&b.1.ev)));
        ranked.truncate(top);
        ranked
    }

    /// A path's key as the list shows it.
    pub fn value(&self, p: &PathReport) -> String {
        let v = (self.key)(p);
        if self.is_time {
            fmt_ns(v)
        } else {
            v.to_string()
        }
    }
}

/// The top-offender lists, in the order they are shown.
pub const OFFENDERS: [Offenders; 3] = [
    Offenders {
        title: "by loss (rx lost + tx lost)",
        id: "offenders-loss",
        key: |p| p.lost + p.lost_inferred,
        is_time: false,
    },
    Offenders {
        title: "by ack RTT p99",
        id: "offenders-rtt",
        key: |p| p.ack_rtt_ns.p99,
        is_time: true,
    },
    Offenders {
        title: "by retransmissions",
        id: "offenders-retx",
        key: |p| p.retransmissions,
        is_time: false,
    },
];

#[cfg(test)]
mod test {
    use super::*;

    fn headers<R>(columns: &[Column<R>]) -> Vec<&'static str> {
        columns.iter().map(|c| c.header).collect()
    }

    /// The page finds a column by its header, and a reader too.
    #[test]
    fn every_table_names_each_column_once() {
        let tables = [
            headers(&directions()),
            headers(&paths()),
            headers(&stalls()),
            headers(&between()),
            headers(&rocev2()),
            headers(&SUMMARY),
        ];
        for t in tables {
            let mut sorted = t.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(sorted.len(), t.len(), "a header twice in {t:?}");
        }
    }

    #[test]
    fn a_table_has_one_cell_per_column_in_column_order() {
        let with = Summary {
            count: 3,
            min: 1_000,
            p50: 2_000,
            p90: 3_000,
            p99: 4_000,
            p999: 5_000,
            max: 6_000,
        };
        let without = Summary { count: 0, ..with };
        let t = Table::of(&SUMMARY, [with, without]);
        assert_eq!(
            t.headers,
            ["count", "min", "p50", "p90", "p99", "p99.9", "max"]
        );
        let texts: Vec<Vec<&str>> = t
            .rows
            .iter()
            .map(|r| r.iter().map(|c| c.text.as_str()).collect())
            .collect();
        assert_eq!(
            texts,
            [
                vec![
                    "3", "1.00us", "2.00us", "3.00us", "4.00us", "5.00us", "6.00us"
                ],
                vec!["0", "-", "-", "-", "-", "-", "-"],
            ]
        );
        // A latency without samples is dim and sorts below every value.
        let dash = &t.rows[1][1];
        assert!(dash.tone == Tone::Dim && dash.key == Some(-1.0));
        assert_eq!(t.rows[0][6].key, Some(6_000.0));
    }

    #[test]
    fn counts_of_trouble_are_toned_only_when_non_zero() {
        assert!(Cell::bad(1).tone == Tone::Bad && Cell::bad(0).tone == Tone::Dim);
        assert!(Cell::warn(2).tone == Tone::Warn && Cell::warn(0).tone == Tone::Dim);
        assert!(Cell::n(0).tone == Tone::Plain);
        assert_eq!(Cell::opt(None).text, "-");
        assert_eq!(Cell::opt(Some(7)).key, Some(7.0));
    }
}
