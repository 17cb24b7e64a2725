//! The text report's tables (`crate::text`), same columns and the same
//! formatting of every value, as sortable HTML tables. Long tables are cut
//! to their worst rows ([`MAX_DIRECTIONS`], [`MAX_PATHS`], [`MAX_STALLS`],
//! [`MAX_BETWEEN`], [`MAX_ROCEV2`]) with one line summing the rest.

use std::fmt::Write as _;

use super::{Dir, Page, esc, more_line, section, thousands};
use crate::text::{self, fmt_bps, fmt_bytes, fmt_ns, fmt_rate};
use analyzer::engine::{PathReport, RoceFlowReport, StallReport, Summary};

/// Most directions in the connection and latency tables.
pub const MAX_DIRECTIONS: usize = 50;
/// Most rows of the paths table.
pub const MAX_PATHS: usize = 200;
/// Most rows of the stall table.
pub const MAX_STALLS: usize = 100;
/// Most rows per capture pair in the between-captures tables.
pub const MAX_BETWEEN: usize = 100;
/// Most RoCEv2 flows.
pub const MAX_ROCEV2: usize = 50;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Tone {
    Plain,
    Bad,
    Warn,
    Dim,
}

struct Cell {
    text: String,
    tone: Tone,
    left: bool,
    /// The sort key, for cells whose text does not sort (`13.0KiB`).
    v: Option<f64>,
}

impl Cell {
    fn n(v: u64) -> Cell {
        Cell {
            text: v.to_string(),
            tone: Tone::Plain,
            left: false,
            v: Some(v as f64),
        }
    }
    fn toned(v: u64, tone: Tone) -> Cell {
        Cell {
            tone: if v > 0 { tone } else { Tone::Dim },
            ..Cell::n(v)
        }
    }
    fn bad(v: u64) -> Cell {
        Cell::toned(v, Tone::Bad)
    }
    fn warn(v: u64) -> Cell {
        Cell::toned(v, Tone::Warn)
    }
    fn s(text: impl Into<String>, v: f64) -> Cell {
        Cell {
            text: text.into(),
            tone: Tone::Plain,
            left: false,
            v: Some(v),
        }
    }
    fn l(text: impl Into<String>) -> Cell {
        Cell {
            text: text.into(),
            tone: Tone::Plain,
            left: true,
            v: None,
        }
    }
    fn ns(v: u64, count: u64) -> Cell {
        if count == 0 {
            Cell {
                text: "-".into(),
                tone: Tone::Dim,
                left: false,
                v: Some(-1.0),
            }
        } else {
            Cell::s(fmt_ns(v), v as f64)
        }
    }
    fn rate(r: Option<f64>) -> Cell {
        Cell::s(fmt_rate(r), r.unwrap_or(-1.0))
    }
    fn tone(mut self, tone: Tone) -> Cell {
        self.tone = tone;
        self
    }
}

struct Table {
    id: &'static str,
    headers: Vec<&'static str>,
    rows: Vec<Vec<Cell>>,
}

impl Table {
    fn new(id: &'static str, headers: &[&'static str]) -> Table {
        Table {
            id,
            headers: headers.to_vec(),
            rows: Vec::new(),
        }
    }

    fn push(&mut self, row: Vec<Cell>) {
        self.rows.push(row);
    }

    fn render(&self, out: &mut String) {
        let _ = write!(
            out,
            r#"<div class="scroll"><table class="sortable" id="{}"><thead><tr>"#,
            self.id
        );
        for (i, h) in self.headers.iter().enumerate() {
            let left = self
                .rows
                .first()
                .and_then(|r| r.get(i))
                .is_some_and(|c| c.left);
            let _ = write!(
                out,
                "<th{}>{}</th>",
                if left { r#" class="l""# } else { "" },
                esc(h)
            );
        }
        out.push_str("</tr></thead><tbody>");
        for row in &self.rows {
            out.push_str("<tr>");
            for c in row {
                let mut class = Vec::new();
                if c.left {
                    class.push("l");
                }
                match c.tone {
                    Tone::Plain => {}
                    Tone::Bad => class.push("bad"),
                    Tone::Warn => class.push("warn"),
                    Tone::Dim => class.push("dim"),
                }
                out.push_str("<td");
                if !class.is_empty() {
                    let _ = write!(out, r#" class="{}""#, class.join(" "));
                }
                if let Some(v) = c.v {
                    let _ = write!(out, r#" data-v="{v}""#);
                }
                let _ = write!(out, ">{}</td>", esc(&c.text));
            }
            out.push_str("</tr>");
        }
        out.push_str("</tbody></table></div>");
    }
}

/// Renders every table section.
pub fn render(out: &mut String, page: &Page<'_>) {
    section(out, "tables", "Tables");
    if !page.dirs.is_empty() {
        let listed: Vec<&Dir<'_>> = page.worst().take(MAX_DIRECTIONS).collect();
        directions(out, page, &listed);
        latency(out, &listed);
        paths(out, &listed);
        stall_table(out, page);
        offenders(out, page);
    }
    between(out, page);
    rocev2(out, page);
    notes(out, page);
}

/// "and 9,900 more directions: 1.2M DATA, 40 retransmissions, ...".
fn more_directions(out: &mut String, page: &Page<'_>, listed: usize) {
    let rest: Vec<&Dir<'_>> = page.worst().skip(listed).collect();
    if rest.is_empty() {
        return;
    }
    let sum = |f: &dyn Fn(&Dir<'_>) -> u64| rest.iter().map(|d| f(d)).sum::<u64>();
    more_line(
        out,
        &format!(
            "and {} more directions (the least troubled): {} DATA packets, {} retransmissions, {} lost, {} stalls",
            thousands(rest.len() as u64),
            thousands(sum(&|d| d.report.data_packets)),
            thousands(sum(&|d| d.report.retransmissions)),
            thousands(sum(&|d| d.lost())),
            thousands(sum(&|d| d.stall_count())),
        ),
    );
}

fn directions(out: &mut String, page: &Page<'_>, listed: &[&Dir<'_>]) {
    section(
        out,
        "t-directions",
        "Connections (one row per direction, worst first; feedback counted on the direction it acknowledges)",
    );
    let mut t = Table::new(
        "directions",
        &[
            "direction",
            "data",
            "bytes",
            "goodput",
            "retx",
            "fast",
            "timeout",
            "spurious",
            "ooo",
            "reorder",
            "trim",
            "CE",
            "ECE",
            "acks",
            "nacks",
            "cnps",
            "lost",
            "msgs",
            "stalls",
            "unacked",
        ],
    );
    for dir in listed {
        let d = dir.report;
        t.push(vec![
            Cell::l(dir.label.clone()),
            Cell::n(d.data_packets),
            Cell::s(fmt_bytes(d.data_bytes), d.data_bytes as f64),
            Cell::s(fmt_bps(d.goodput_bps), d.goodput_bps as f64),
            Cell::bad(d.retransmissions),
            Cell::n(d.fast_retransmissions),
            Cell::bad(d.timeout_retransmissions),
            Cell::warn(d.spurious_retransmissions),
            Cell::n(d.out_of_order),
            Cell::n(u64::from(d.max_reorder_distance)),
            Cell::warn(d.trimmed),
            Cell::warn(d.ce_marked),
            Cell::warn(d.ece),
            Cell::n(d.acks),
            Cell::warn(d.nacks),
            Cell::warn(d.cnps),
            Cell::bad(dir.lost()),
            Cell::n(d.messages_completed.max(d.messages_delivered)),
            Cell::bad(dir.stall_count()),
            Cell::n(d.outstanding_packets),
        ]);
    }
    t.render(out);
    more_directions(out, page, listed.len());
    let _ = write!(
        out,
        r#"<p class="note">lost = rx lost (path_seq gaps, seen by a receiver-side capture) + tx lost (transmissions retransmitted before any ack, seen by a sender-side capture); rates per path below</p>"#
    );
    let mut details = String::new();
    for dir in listed {
        if let Some(d) = text::direction_details(dir.report) {
            let _ = write!(details, "<li>{}: {}</li>", esc(&dir.label), esc(&d));
        }
    }
    if !details.is_empty() {
        let _ = write!(out, r#"<ul class="note">{details}</ul>"#);
    }
}

const LATENCY_HEADERS: [&str; 9] = [
    "direction",
    "latency",
    "count",
    "min",
    "p50",
    "p90",
    "p99",
    "p99.9",
    "max",
];

fn latency_row(t: &mut Table, dir: &str, what: String, s: &Summary) {
    t.push(vec![
        Cell::l(dir),
        Cell::l(what),
        Cell::n(s.count),
        Cell::ns(s.min, s.count),
        Cell::ns(s.p50, s.count),
        Cell::ns(s.p90, s.count),
        Cell::ns(s.p99, s.count),
        Cell::ns(s.p999, s.count),
        Cell::ns(s.max, s.count),
    ]);
}

fn latency(out: &mut String, listed: &[&Dir<'_>]) {
    section(
        out,
        "t-latency",
        "Latency per direction (p50/p90/p99/p99.9 are HdrHistogram buckets, 3 digits)",
    );
    let mut t = Table::new("latency", &LATENCY_HEADERS);
    for dir in listed {
        let d = dir.report;
        let rows: [(&str, &Summary); 4] = [
            ("ack RTT", &d.ack_rtt_ns),
            ("fabric RTT", &d.fabric_rtt_ns),
            ("msg completion", &d.msg_completion_ns),
            ("msg delivery", &d.msg_delivery_ns),
        ];
        let mut any = false;
        for (what, s) in rows {
            if s.count > 0 {
                latency_row(&mut t, &dir.label, what.to_string(), s);
                any = true;
            }
        }
        for (op, s) in &d.msg_completion_by_op_ns {
            if s.count > 0 {
                latency_row(&mut t, &dir.label, format!("completion {op}"), s);
                any = true;
            }
        }
        if !any {
            t.push(vec![Cell::l(dir.label.clone()), Cell::l("(no samples)")]);
        }
    }
    t.render(out);
}

/// A path worth a row: it carried DATA or has RTT samples (PROBEs).
fn listed_path(p: &PathReport) -> bool {
    p.data_packets > 0 || p.ack_rtt_ns.count > 0
}

fn paths(out: &mut String, listed: &[&Dir<'_>]) {
    section(
        out,
        "t-paths",
        "Paths (direction, ev; evs that carried DATA or PROBEs)",
    );
    let mut t = Table::new(
        "paths",
        &[
            "direction",
            "ev",
            "packets",
            "data",
            "bytes",
            "retx",
            "rx lost",
            "rx loss%",
            "tx lost",
            "tx loss%",
            "reord",
            "CE",
            "rtt n",
            "rtt p50",
            "rtt p90",
            "rtt p99",
            "rtt p99.9",
            "rtt max",
        ],
    );
    let all: Vec<(&Dir<'_>, &PathReport)> = listed
        .iter()
        .flat_map(|d| {
            d.report
                .paths
                .iter()
                .filter(|p| listed_path(p))
                .map(move |p| (*d, p))
        })
        .collect();
    for (dir, p) in all.iter().take(MAX_PATHS) {
        let s = &p.ack_rtt_ns;
        t.push(vec![
            Cell::l(dir.label.clone()),
            Cell::n(u64::from(p.ev)),
            Cell::n(p.packets),
            Cell::n(p.data_packets),
            Cell::s(fmt_bytes(p.data_bytes), p.data_bytes as f64),
            Cell::bad(p.retransmissions),
            Cell::bad(p.lost),
            Cell::rate(p.receive_loss_rate()),
            Cell::bad(p.lost_inferred),
            Cell::rate(p.send_loss_rate()),
            Cell::warn(p.reordered),
            Cell::warn(p.ce_marked),
            Cell::n(s.count),
            Cell::ns(s.p50, s.count),
            Cell::ns(s.p90, s.count),
            Cell::ns(s.p99, s.count),
            Cell::ns(s.p999, s.count),
            Cell::ns(s.max, s.count),
        ]);
    }
    t.render(out);
    if all.len() > MAX_PATHS {
        let rest = &all[MAX_PATHS..];
        more_line(
            out,
            &format!(
                "and {} more paths of the directions above: {} DATA packets, {} retransmissions, {} rx lost, {} tx lost",
                thousands(rest.len() as u64),
                thousands(rest.iter().map(|(_, p)| p.data_packets).sum()),
                thousands(rest.iter().map(|(_, p)| p.retransmissions).sum()),
                thousands(rest.iter().map(|(_, p)| p.lost).sum()),
                thousands(rest.iter().map(|(_, p)| p.lost_inferred).sum()),
            ),
        );
    }
    let _ = write!(
        out,
        r#"<p class="note">rx lost = path_seq gaps, rx loss% = lost / (received + lost): the rate a receiver-side capture measures<br>tx lost = transmissions retransmitted before any ack, tx loss% = lost / sent DATA: the rate a sender-side capture measures</p>"#
    );
}

fn stall_table(out: &mut String, page: &Page<'_>) {
    section(
        out,
        "t-stalls",
        "Stall timeline (start relative to the first frame)",
    );
    let mut stalls: Vec<(&Dir<'_>, &StallReport)> = page
        .dirs
        .iter()
        .flat_map(|d| d.report.stalls.iter().map(move |s| (d, s)))
        .collect();
    let dropped: u64 = page.dirs.iter().map(|d| d.report.stalls_dropped).sum();
    if stalls.is_empty() && dropped == 0 {
        out.push_str(r#"<p class="note" id="no-stalls">no stalls</p>"#);
        return;
    }
    // The longest ones when there are too many, then in time order.
    stalls.sort_by_key(|(_, s)| std::cmp::Reverse(s.duration_ns));
    let rest = stalls.split_off(stalls.len().min(MAX_STALLS));
    stalls.sort_by_key(|(_, s)| s.start_ns);
    let origin = page.merged.capture.first_ts_ns;
    let mut t = Table::new(
        "stalls",
        &[
            "start",
            "duration",
            "direction",
            "state",
            "first event",
            "end frame",
            "cum_ack",
            "unacked",
            "retx",
            "evs in flight",
        ],
    );
    for (dir, s) in &stalls {
        let evs: Vec<String> = s.paths_in_flight.iter().map(ToString::to_string).collect();
        let start = s.start_ns.saturating_sub(origin);
        t.push(vec![
            Cell::s(format!("+{}", fmt_ns(start)), start as f64),
            Cell::s(fmt_ns(s.duration_ns), s.duration_ns as f64).tone(Tone::Bad),
            Cell::l(dir.label.clone()),
            Cell::l(if s.open { "OPEN" } else { "ended" }).tone(if s.open {
                Tone::Bad
            } else {
                Tone::Plain
            }),
            Cell::l(s.end_cause),
            Cell::s(
                s.end_frame.map_or_else(|| "-".into(), |f| f.to_string()),
                s.end_frame.map_or(-1.0, |f| f as f64),
            ),
            Cell::s(
                s.cum_ack.map_or_else(|| "-".into(), |a| a.to_string()),
                s.cum_ack.map_or(-1.0, f64::from),
            ),
            Cell::n(s.outstanding_packets),
            Cell::n(s.retransmissions),
            Cell::l(evs.join(",")),
        ]);
    }
    t.render(out);
    if !rest.is_empty() {
        more_line(
            out,
            &format!(
                "and {} shorter stalls, {} in all",
                thousands(rest.len() as u64),
                fmt_ns(rest.iter().map(|(_, s)| s.duration_ns).sum())
            ),
        );
    }
    if dropped > 0 {
        more_line(
            out,
            &format!("{dropped} more stalls beyond the per-direction cap (counted only)"),
        );
    }
}

/// A top-offender list: title, ranking key, whether the key is a time.
type OffenderList<'a> = (&'a str, &'static str, Box<dyn Fn(&PathReport) -> u64>, bool);

fn offenders(out: &mut String, page: &Page<'_>) {
    let top = page.top;
    let paths: Vec<(&Dir<'_>, &PathReport)> = page
        .dirs
        .iter()
        .flat_map(|d| d.report.paths.iter().map(move |p| (d, p)))
        .collect();
    if paths.is_empty() || top == 0 {
        return;
    }
    section(
        out,
        "t-offenders",
        &format!("Top offenders (worst {top} paths)"),
    );
    let lists: [OffenderList<'_>; 3] = [
        (
            "by loss (rx lost + tx lost)",
            "offenders-loss",
            Box::new(|p: &PathReport| p.lost + p.lost_inferred),
            false,
        ),
        (
            "by ack RTT p99",
            "offenders-rtt",
            Box::new(|p: &PathReport| p.ack_rtt_ns.p99),
            true,
        ),
        (
            "by retransmissions",
            "offenders-retx",
            Box::new(|p: &PathReport| p.retransmissions),
            false,
        ),
    ];
    for (what, id, key, is_time) in lists {
        let mut ranked: Vec<&(&Dir<'_>, &PathReport)> =
            paths.iter().filter(|(_, p)| key(p) > 0).collect();
        ranked.sort_by(|a, b| key(b.1).cmp(&key(a.1)).then(a.1.ev.cmp(&b.1.ev)));
        let _ = write!(out, "<h3>{}</h3>", esc(what));
        if ranked.is_empty() {
            out.push_str(r#"<p class="note">none</p>"#);
            continue;
        }
        let mut t = Table::new(
            id,
            &[
                "value",
                "direction",
                "ev",
                "data",
                "retx",
                "rx lost",
                "tx lost",
                "rtt p99",
            ],
        );
        for (dir, p) in ranked.into_iter().take(top) {
            let v = key(p);
            let value = if is_time { fmt_ns(v) } else { v.to_string() };
            t.push(vec![
                Cell::s(value, v as f64).tone(Tone::Bad),
                Cell::l(dir.label.clone()),
                Cell::n(u64::from(p.ev)),
                Cell::n(p.data_packets),
                Cell::n(p.retransmissions),
                Cell::n(p.lost),
                Cell::n(p.lost_inferred),
                Cell::ns(p.ack_rtt_ns.p99, p.ack_rtt_ns.count),
            ]);
        }
        t.render(out);
    }
}

fn between(out: &mut String, page: &Page<'_>) {
    let merged = page.merged;
    if merged.between_captures.is_empty() {
        return;
    }
    section(
        out,
        "t-between",
        "Between captures (same transmissions seen at two capture points)",
    );
    for b in &merged.between_captures {
        let offset = if b.offset_estimated {
            format!(
                "clock offset {} ({} minus {})",
                text::signed_ns(b.clock_offset_ns),
                page.capture_name(b.capture_b),
                page.capture_name(b.capture_a)
            )
        } else {
            "clock offset not estimated (no direction matched both ways)".to_string()
        };
        let _ = write!(
            out,
            "<h3>{}</h3>",
            esc(&format!(
                "{} <-> {}: {} matched transmissions, {offset}",
                page.capture_name(b.capture_a),
                page.capture_name(b.capture_b),
                thousands(b.matched_packets)
            ))
        );
        let mut t = Table::new(
            "between",
            &[
                "direction",
                "ev/port",
                "from",
                "to",
                "matched",
                "lost",
                "unknown",
                "owd n",
                "owd min",
                "owd p50",
                "owd p99",
                "owd max",
            ],
        );
        // Worst first when cut: most lost, then most matched.
        let mut rows: Vec<_> = b.paths.iter().collect();
        if rows.len() > MAX_BETWEEN {
            rows.sort_by_key(|p| std::cmp::Reverse((p.lost_between, p.matched)));
        }
        for p in rows.iter().take(MAX_BETWEEN) {
            let s = &p.one_way_delay_ns;
            t.push(vec![
                Cell::l(if p.proto == "rocev2" {
                    format!("{} -> {} qp 0x{:06x}", p.src, p.dst, p.dst_conn)
                } else {
                    format!("{}:{} -> {}:{}", p.src, p.src_conn, p.dst, p.dst_conn)
                }),
                Cell::n(u64::from(p.ev)),
                Cell::l(page.capture_name(p.upstream)),
                Cell::l(page.capture_name(p.downstream)),
                Cell::n(p.matched),
                Cell::bad(p.lost_between),
                Cell::warn(p.unknown),
                Cell::n(s.count),
                Cell::ns(s.min, s.count),
                Cell::ns(s.p50, s.count),
                Cell::ns(s.p99, s.count),
                Cell::ns(s.max, s.count),
            ]);
        }
        t.render(out);
        if rows.len() > MAX_BETWEEN {
            let rest = &rows[MAX_BETWEEN..];
            more_line(
                out,
                &format!(
                    "and {} more paths: {} matched, {} lost, {} unknown",
                    thousands(rest.len() as u64),
                    thousands(rest.iter().map(|p| p.matched).sum()),
                    thousands(rest.iter().map(|p| p.lost_between).sum()),
                    thousands(rest.iter().map(|p| p.unknown).sum()),
                ),
            );
        }
    }
}

fn rocev2(out: &mut String, page: &Page<'_>) {
    let many = page.results.len() > 1;
    let mut flows: Vec<(String, &RoceFlowReport)> = page
        .results
        .iter()
        .flat_map(|r| {
            r.report.rocev2.iter().map(move |f| {
                let name = format!("{} -> {} qp 0x{:06x}", f.src, f.dst, f.dest_qp);
                let name = if many {
                    format!("[{}] {name}", r.stem)
                } else {
                    name
                };
                (name, f)
            })
        })
        .collect();
    if flows.is_empty() {
        return;
    }
    section(
        out,
        "t-rocev2",
        "RoCEv2 flows (requests; responses counted on their request flow)",
    );
    let total = flows.len();
    if total > MAX_ROCEV2 {
        flows.sort_by_key(|(_, f)| std::cmp::Reverse((f.retransmissions + f.naks, f.data_packets)));
    }
    let rest = flows.split_off(total.min(MAX_ROCEV2));
    let mut t = Table::new(
        "rocev2",
        &[
            "flow",
            "data",
            "bytes",
            "retx",
            "fast",
            "timeout",
            "spurious",
            "naks",
            "rnr",
            "acks",
            "cnps",
            "CE",
            "reads",
            "msgs",
            "rtt n",
            "rtt p50",
            "rtt p99",
            "rtt max",
            "compl p50",
            "compl p99",
        ],
    );
    for (name, f) in &flows {
        let r = &f.ack_rtt_ns;
        let m = &f.msg_completion_ns;
        t.push(vec![
            Cell::l(name.clone()),
            Cell::n(f.data_packets),
            Cell::s(fmt_bytes(f.data_bytes), f.data_bytes as f64),
            Cell::bad(f.retransmissions),
            Cell::n(f.fast_retransmissions),
            Cell::bad(f.timeout_retransmissions),
            Cell::warn(f.spurious_retransmissions),
            Cell::bad(f.naks),
            Cell::warn(f.rnr_naks),
            Cell::n(f.acks),
            Cell::warn(f.cnps),
            Cell::warn(f.ce_marked),
            Cell::n(f.read_requests),
            Cell::n(f.messages_completed),
            Cell::n(r.count),
            Cell::ns(r.p50, r.count),
            Cell::ns(r.p99, r.count),
            Cell::ns(r.max, r.count),
            Cell::ns(m.p50, m.count),
            Cell::ns(m.p99, m.count),
        ]);
    }
    t.render(out);
    if !rest.is_empty() {
        more_line(
            out,
            &format!(
                "and {} more RoCEv2 flows: {} DATA packets, {} retransmissions, {} NAKs",
                thousands(rest.len() as u64),
                thousands(rest.iter().map(|(_, f)| f.data_packets).sum()),
                thousands(rest.iter().map(|(_, f)| f.retransmissions).sum()),
                thousands(rest.iter().map(|(_, f)| f.naks).sum()),
            ),
        );
    }
    let mut details = String::new();
    for (name, f) in &flows {
        if let Some(d) = text::flow_details(f) {
            let _ = write!(details, "<li>{}: {}</li>", esc(name), esc(&d));
        }
    }
    if !details.is_empty() {
        let _ = write!(out, r#"<ul class="note">{details}</ul>"#);
    }
}

fn notes(out: &mut String, page: &Page<'_>) {
    let notes = text::notes(page.results, page.merged);
    if notes.is_empty() {
        return;
    }
    section(out, "t-notes", "Notes");
    out.push_str(r#"<ul class="note">"#);
    for n in notes {
        let _ = write!(out, "<li>{}</li>", esc(n.trim_start()));
    }
    out.push_str("</ul>");
}
