//! The terminal report of `metaroce-analyze report`: per-direction and
//! per-path tables, latency percentiles, the stall timeline, the top
//! offenders and the RoCEv2 flows.
//!
//! Everything is written with ANSI styles; the caller's `anstream` stream
//! strips them when the output is not a terminal, under `NO_COLOR`, or
//! with `--color never`. Column widths are computed on the plain text.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{self, Write};

use owo_colors::{OwoColorize, Style};

use crate::pipeline::CaptureResult;
use analyzer::engine::{DirectionReport, PathReport, Report, Summary};
use analyzer::fmt;

/// Nanoseconds as a short human duration: `850ns`, `24.0us`, `5.03ms`,
/// `1.20s`.
pub fn fmt_ns(ns: u64) -> String {
    fmt::duration_ns(ns, "us")
}

/// Bytes with a binary unit.
pub fn fmt_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b}B")
    } else {
        format!("{}{}", fmt::sig3(v), UNITS[u])
    }
}

/// Bits per second.
pub fn fmt_bps(bps: u64) -> String {
    fmt::si(bps as f64, "", "b/s")
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Tone {
    Plain,
    /// A count of trouble: red when non-zero.
    Bad,
    /// Yellow when non-zero.
    Warn,
    Dim,
}

struct Cell {
    text: String,
    tone: Tone,
    left: bool,
}

impl Cell {
    fn n(v: u64) -> Cell {
        Cell {
            text: v.to_string(),
            tone: Tone::Plain,
            left: false,
        }
    }
    fn bad(v: u64) -> Cell {
        Cell {
            text: v.to_string(),
            tone: if v > 0 { Tone::Bad } else { Tone::Dim },
            left: false,
        }
    }
    fn warn(v: u64) -> Cell {
        Cell {
            text: v.to_string(),
            tone: if v > 0 { Tone::Warn } else { Tone::Dim },
            left: false,
        }
    }
    fn s(text: impl Into<String>) -> Cell {
        Cell {
            text: text.into(),
            tone: Tone::Plain,
            left: false,
        }
    }
    fn l(text: impl Into<String>) -> Cell {
        Cell {
            text: text.into(),
            tone: Tone::Plain,
            left: true,
        }
    }
    fn ns(v: u64, count: u64) -> Cell {
        if count == 0 {
            Cell {
                text: "-".into(),
                tone: Tone::Dim,
                left: false,
            }
        } else {
            Cell::s(fmt_ns(v))
        }
    }
}

/// A table: headers and rows, printed with padded columns.
struct Table {
    headers: Vec<&'static str>,
    rows: Vec<Vec<Cell>>,
}

impl Table {
    fn new(headers: &[&'static str]) -> Table {
        Table {
            headers: headers.to_vec(),
            rows: Vec::new(),
        }
    }

    fn push(&mut self, row: Vec<Cell>) {
        self.rows.push(row);
    }

    fn render(&self, out: &mut String) {
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, c) in row.iter().enumerate() {
                if i < widths.len() {
                    widths[i] = widths[i].max(c.text.chars().count());
                }
            }
        }
        let header_style = Style::new().bold();
        let _ = write!(out, "  ");
        for (i, h) in self.headers.iter().enumerate() {
            let left = self
                .rows
                .first()
                .and_then(|r| r.get(i))
                .is_some_and(|c| c.left);
            let padded = pad(h, widths[i], left);
            let _ = write!(out, "{}", padded.style(header_style));
            if i + 1 < self.headers.len() {
                out.push_str("  ");
            }
        }
        out.push('\n');
        for row in &self.rows {
            let _ = write!(out, "  ");
            for (i, c) in row.iter().enumerate() {
                let w = widths.get(i).copied().unwrap_or(0);
                let padded = pad(&c.text, w, c.left);
                let style = match c.tone {
                    Tone::Plain => Style::new(),
                    Tone::Bad => Style::new().red().bold(),
                    Tone::Warn => Style::new().yellow(),
                    Tone::Dim => Style::new().dimmed(),
                };
                let _ = write!(out, "{}", padded.style(style));
                if i + 1 < row.len() {
                    out.push_str("  ");
                }
            }
            // No trailing spaces.
            while out.ends_with(' ') {
                out.pop();
            }
            out.push('\n');
        }
    }
}

fn pad(text: &str, width: usize, left: bool) -> String {
    let n = text.chars().count();
    let fill = " ".repeat(width.saturating_sub(n));
    if left {
        format!("{text}{fill}")
    } else {
        format!("{fill}{text}")
    }
}

/// "GAP 1, TRIMMED 2": the entries of a count map.
pub fn counts<K: std::fmt::Display>(m: &BTreeMap<K, u64>) -> String {
    let parts: Vec<String> = m.iter().map(|(k, v)| format!("{k} {v}")).collect();
    parts.join(", ")
}

fn heading(out: &mut String, title: &str) {
    let _ = writeln!(out, "\n{}", title.style(Style::new().bold().underline()));
}

/// `10.0.0.1:256 -> 10.0.0.2:512`
pub fn direction_name(d: &DirectionReport) -> String {
    format!("{}:{} -> {}:{}", d.src, d.src_conn, d.dst, d.dst_conn)
}

/// A direction's label, prefixed by its capture when there are several.
fn label(captures: usize, stem: &str, d: &DirectionReport) -> String {
    if captures > 1 {
        format!("[{stem}] {}", direction_name(d))
    } else {
        direction_name(d)
    }
}

fn latency_row(table: &mut Table, what: String, s: &Summary) {
    table.push(vec![
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

const LATENCY_HEADERS: [&str; 8] = ["", "count", "min", "p50", "p90", "p99", "p99.9", "max"];

/// A path with its direction, for the offender lists.
struct PathRef<'a> {
    dir: String,
    path: &'a PathReport,
}

/// Renders the report of `results` (one or several captures) as text with
/// ANSI styles. `top` is the length of each offender list.
pub fn render(results: &[CaptureResult], merged: &Report, top: usize) -> String {
    let mut out = String::new();
    let n = results.len();
    let c = &merged.capture;
    let title = format!(
        "MetaRoCE analysis: {} capture{}, {} frames ({} MetaRoCE, {} RoCEv2), {}",
        n,
        if n == 1 { "" } else { "s" },
        c.frames,
        c.metaroce_packets,
        c.rocev2_packets,
        fmt_ns(c.duration_ns),
    );
    let _ = writeln!(out, "{}", title.style(Style::new().bold()));
    for r in results {
        let rc = &r.report.capture;
        let corrupt = r.read.corrupt_records;
        let _ = write!(
            out,
            "  {}: {} frames, {}, ",
            r.path.display(),
            rc.frames,
            fmt_ns(rc.duration_ns)
        );
        let malformed = format!("{} malformed", rc.malformed);
        let corrupt_s = format!("{corrupt} corrupt records");
        if rc.malformed > 0 {
            let _ = write!(out, "{}", malformed.yellow());
        } else {
            out.push_str(&malformed);
        }
        out.push_str(", ");
        if corrupt > 0 {
            let _ = write!(out, "{}", corrupt_s.yellow());
        } else {
            out.push_str(&corrupt_s);
        }
        if rc.time_went_backwards > 0 {
            let _ = write!(
                out,
                ", {}",
                format!(
                    "{} frames earlier than the one before",
                    rc.time_went_backwards
                )
                .yellow()
            );
        }
        out.push('\n');
        if rc.ip_fragments > 0 {
            let incomplete = format!(
                "{} datagrams ({} fragments) never completed",
                rc.incomplete_datagrams, rc.incomplete_fragments
            );
            let _ = write!(
                out,
                "    IP fragments: {} read, {} datagrams reassembled, ",
                rc.ip_fragments, rc.reassembled_datagrams
            );
            if rc.incomplete_datagrams > 0 {
                let _ = writeln!(out, "{}", incomplete.yellow());
            } else {
                let _ = writeln!(out, "{incomplete}");
            }
        }
        if let Some(e) = &r.read.io_error {
            let _ = writeln!(out, "    {}", format!("read error: {e}").red());
        }
    }
    let _ = writeln!(
        out,
        "  stall threshold {}",
        fmt_ns(merged.engine.stall_threshold_ns)
    );

    let all: Vec<(String, &DirectionReport)> = results
        .iter()
        .flat_map(|r| {
            r.report
                .directions
                .iter()
                .map(move |d| (label(n, &r.stem, d), d))
        })
        .collect();
    let total = all.len();
    let dirs: Vec<(String, &DirectionReport)> =
        all.into_iter().filter(|(_, d)| carries_data(d)).collect();
    if dirs.len() < total {
        let _ = writeln!(
            out,
            "  {}",
            format!(
                "{} of {total} directions carry no DATA (CTRL or feedback only): not listed",
                total - dirs.len()
            )
            .dimmed()
        );
    }

    if !dirs.is_empty() {
        render_directions(&mut out, &dirs);
        render_paths(&mut out, &dirs);
        render_stalls(&mut out, &dirs, merged.capture.first_ts_ns);
        render_offenders(&mut out, &dirs, top);
    }
    render_between(&mut out, results, merged);
    render_rocev2(&mut out, results);
    render_notes(&mut out, results, merged);
    out
}

/// A direction worth a row: it sent DATA or PROBEs, or was stalled.
pub fn carries_data(d: &DirectionReport) -> bool {
    d.data_packets > 0 || d.probes > 0 || !d.stalls.is_empty() || d.stalls_dropped > 0
}

fn render_directions(out: &mut String, dirs: &[(String, &DirectionReport)]) {
    heading(
        out,
        "Connections (one row per direction; feedback counted on the direction it acknowledges)",
    );
    let mut t = Table::new(&[
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
    ]);
    for (name, d) in dirs {
        t.push(vec![
            Cell::l(name.clone()),
            Cell::n(d.data_packets),
            Cell::s(fmt_bytes(d.data_bytes)),
            Cell::s(fmt_bps(d.goodput_bps)),
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
            Cell::bad(d.path_loss + d.paths.iter().map(|p| p.lost_inferred).sum::<u64>()),
            Cell::n(d.messages_completed.max(d.messages_delivered)),
            Cell::bad(d.stalls.len() as u64 + d.stalls_dropped),
            Cell::n(d.outstanding_packets),
        ]);
    }
    t.render(out);
    let _ = writeln!(
        out,
        "  {}",
        "lost = rx lost (path_seq gaps, seen by a receiver-side capture) + tx lost (transmissions retransmitted before any ack, seen by a sender-side capture); rates per path below"
            .dimmed()
    );
    for (name, d) in dirs {
        if let Some(details) = direction_details(d) {
            let _ = writeln!(out, "  {name}: {details}");
        }
    }

    heading(
        out,
        "Latency per direction (p50/p90/p99/p99.9 are HdrHistogram buckets, 3 digits)",
    );
    let mut t = Table::new(&LATENCY_HEADERS);
    for (name, d) in dirs {
        let rows: [(&str, &Summary); 4] = [
            ("ack RTT", &d.ack_rtt_ns),
            ("fabric RTT", &d.fabric_rtt_ns),
            ("msg completion", &d.msg_completion_ns),
            ("msg delivery", &d.msg_delivery_ns),
        ];
        let mut any = false;
        for (what, s) in rows {
            if s.count > 0 {
                latency_row(&mut t, format!("{name}  {what}"), s);
                any = true;
            }
        }
        for (op, s) in &d.msg_completion_by_op_ns {
            if s.count > 0 {
                latency_row(&mut t, format!("{name}  completion {op}"), s);
                any = true;
            }
        }
        if !any {
            t.push(vec![Cell::l(format!("{name}  (no samples)"))]);
        }
    }
    t.render(out);
}

/// What a direction's row leaves out: "NACKs: GAP 1, TRIMMED 1; CNPs: ECN
/// 1; probes 1 / replies 1", or `None` when there is nothing.
pub fn direction_details(d: &DirectionReport) -> Option<String> {
    let mut parts = Vec::new();
    if !d.nacks_by_code.is_empty() {
        parts.push(format!("NACKs: {}", counts(&d.nacks_by_code)));
    }
    if !d.cnps_by_reason.is_empty() {
        parts.push(format!("CNPs: {}", counts(&d.cnps_by_reason)));
    }
    if d.probes + d.probe_replies > 0 {
        parts.push(format!("probes {} / replies {}", d.probes, d.probe_replies));
    }
    if d.max_bytes_in_flight > 0 {
        parts.push(format!(
            "in flight at most {}, at the end {}",
            fmt_bytes(d.max_bytes_in_flight),
            fmt_bytes(d.bytes_in_flight)
        ));
    }
    if d.window_overflow > 0 {
        parts.push(format!("window overflow {}", d.window_overflow));
    }
    if d.messages_evicted > 0 {
        parts.push(format!("messages evicted {}", d.messages_evicted));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

fn render_paths(out: &mut String, dirs: &[(String, &DirectionReport)]) {
    heading(
        out,
        "Paths (direction, ev; evs that carried DATA or PROBEs)",
    );
    let mut t = Table::new(&[
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
    ]);
    for (name, d) in dirs {
        for p in d
            .paths
            .iter()
            .filter(|p| p.data_packets > 0 || p.ack_rtt_ns.count > 0)
        {
            let s = &p.ack_rtt_ns;
            t.push(vec![
                Cell::l(name.clone()),
                Cell::n(u64::from(p.ev)),
                Cell::n(p.packets),
                Cell::n(p.data_packets),
                Cell::s(fmt_bytes(p.data_bytes)),
                Cell::bad(p.retransmissions),
                Cell::bad(p.lost),
                Cell::s(fmt_rate(p.receive_loss_rate())),
                Cell::bad(p.lost_inferred),
                Cell::s(fmt_rate(p.send_loss_rate())),
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
    }
    t.render(out);
    let _ = writeln!(
        out,
        "  {}",
        "rx lost = path_seq gaps, rx loss% = lost / (received + lost): the rate a receiver-side capture measures\n  \
         tx lost = transmissions retransmitted before any ack, tx loss% = lost / sent DATA: the rate a sender-side capture measures"
            .dimmed()
    );
}

/// A rate as a percentage with one decimal; "-" when undefined.
pub fn fmt_rate(rate: Option<f64>) -> String {
    rate.map_or_else(|| "-".into(), |r| format!("{:.1}%", r * 100.0))
}

fn render_stalls(out: &mut String, dirs: &[(String, &DirectionReport)], origin: u64) {
    heading(out, "Stall timeline (start relative to the first frame)");
    let mut stalls: Vec<(&String, &analyzer::engine::StallReport)> = dirs
        .iter()
        .flat_map(|(name, d)| d.stalls.iter().map(move |s| (name, s)))
        .collect();
    let dropped: u64 = dirs.iter().map(|(_, d)| d.stalls_dropped).sum();
    if stalls.is_empty() {
        let _ = writeln!(out, "  {}", "no stalls".green());
        return;
    }
    stalls.sort_by_key(|(_, s)| s.start_ns);
    let mut t = Table::new(&[
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
    ]);
    for (name, s) in stalls {
        let evs: Vec<String> = s.paths_in_flight.iter().map(ToString::to_string).collect();
        t.push(vec![
            Cell::s(format!("+{}", fmt_ns(s.start_ns.saturating_sub(origin)))),
            Cell {
                text: fmt_ns(s.duration_ns),
                tone: Tone::Bad,
                left: false,
            },
            Cell::l(name.clone()),
            Cell {
                text: if s.open { "OPEN" } else { "ended" }.into(),
                tone: if s.open { Tone::Bad } else { Tone::Plain },
                left: true,
            },
            Cell::l(s.end_cause),
            Cell::s(s.end_frame.map_or_else(|| "-".into(), |f| f.to_string())),
            Cell::s(s.cum_ack.map_or_else(|| "-".into(), |a| a.to_string())),
            Cell::n(s.outstanding_packets),
            Cell::n(s.retransmissions),
            Cell::l(evs.join(",")),
        ]);
    }
    t.render(out);
    if dropped > 0 {
        let _ = writeln!(
            out,
            "  {}",
            format!("{dropped} more stalls beyond the per-direction cap (counted only)").yellow()
        );
    }
}

/// A top-offender list: title, ranking key, whether the key is a time.
type OffenderList<'a> = (&'a str, Box<dyn Fn(&PathReport) -> u64>, bool);

fn render_offenders(out: &mut String, dirs: &[(String, &DirectionReport)], top: usize) {
    let paths: Vec<PathRef<'_>> = dirs
        .iter()
        .flat_map(|(name, d)| {
            d.paths.iter().map(move |p| PathRef {
                dir: name.clone(),
                path: p,
            })
        })
        .collect();
    if paths.is_empty() || top == 0 {
        return;
    }
    heading(out, &format!("Top offenders (worst {top} paths)"));
    let lost = |p: &PathReport| p.lost + p.lost_inferred;
    let lists: [OffenderList<'_>; 3] = [
        ("by loss (rx lost + tx lost)", Box::new(lost), false),
        (
            "by ack RTT p99",
            Box::new(|p: &PathReport| p.ack_rtt_ns.p99),
            true,
        ),
        (
            "by retransmissions",
            Box::new(|p: &PathReport| p.retransmissions),
            false,
        ),
    ];
    for (what, key, is_time) in lists {
        let mut ranked: Vec<&PathRef<'_>> = paths.iter().filter(|p| key(p.path) > 0).collect();
        ranked.sort_by(|a, b| {
            key(b.path)
                .cmp(&key(a.path))
                .then(a.path.ev.cmp(&b.path.ev))
        });
        let _ = writeln!(out, "  {}", what.bold());
        if ranked.is_empty() {
            let _ = writeln!(out, "    {}", "none".dimmed());
            continue;
        }
        for p in ranked.into_iter().take(top) {
            let v = key(p.path);
            let value = if is_time { fmt_ns(v) } else { v.to_string() };
            let _ = writeln!(
                out,
                "    {:>8}  {} ev {}  ({} data, {} retx, {} rx lost, {} tx lost, rtt p99 {})",
                value.red(),
                p.dir,
                p.path.ev,
                p.path.data_packets,
                p.path.retransmissions,
                p.path.lost,
                p.path.lost_inferred,
                if p.path.ack_rtt_ns.count > 0 {
                    fmt_ns(p.path.ack_rtt_ns.p99)
                } else {
                    "-".into()
                },
            );
        }
    }
}

/// A signed duration: `+1.00ms`, `-24.0us`.
pub fn signed_ns(ns: i64) -> String {
    if ns < 0 {
        format!("-{}", fmt_ns(ns.unsigned_abs()))
    } else {
        format!("+{}", fmt_ns(ns as u64))
    }
}

fn render_between(out: &mut String, results: &[CaptureResult], merged: &Report) {
    if merged.between_captures.is_empty() {
        return;
    }
    let name = |i: u64| {
        results
            .get(i as usize)
            .map_or_else(|| format!("#{i}"), |r| r.stem.clone())
    };
    heading(
        out,
        "Between captures (same transmissions seen at two capture points)",
    );
    for b in &merged.between_captures {
        let offset = if b.offset_estimated {
            format!(
                "clock offset {} ({} minus {})",
                signed_ns(b.clock_offset_ns),
                name(b.capture_b),
                name(b.capture_a)
            )
        } else {
            "clock offset not estimated (no direction matched both ways)".to_string()
        };
        let _ = writeln!(
            out,
            "  {} <-> {}: {} matched transmissions, {offset}",
            name(b.capture_a),
            name(b.capture_b),
            b.matched_packets
        );
        let mut t = Table::new(&[
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
        ]);
        for p in &b.paths {
            let s = &p.one_way_delay_ns;
            t.push(vec![
                Cell::l(if p.proto == "rocev2" {
                    format!("{} -> {} qp 0x{:06x}", p.src, p.dst, p.dst_conn)
                } else {
                    format!("{}:{} -> {}:{}", p.src, p.src_conn, p.dst, p.dst_conn)
                }),
                Cell::n(u64::from(p.ev)),
                Cell::l(name(p.upstream)),
                Cell::l(name(p.downstream)),
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
    }
}

fn render_rocev2(out: &mut String, results: &[CaptureResult]) {
    let n = results.len();
    let flows: Vec<(String, &analyzer::engine::RoceFlowReport)> = results
        .iter()
        .flat_map(|r| {
            r.report.rocev2.iter().map(move |f| {
                let name = format!("{} -> {} qp 0x{:06x}", f.src, f.dst, f.dest_qp);
                let name = if n > 1 {
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
    heading(
        out,
        "RoCEv2 flows (requests; responses counted on their request flow)",
    );
    let mut t = Table::new(&[
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
    ]);
    for (name, f) in &flows {
        let r = &f.ack_rtt_ns;
        let m = &f.msg_completion_ns;
        t.push(vec![
            Cell::l(name.clone()),
            Cell::n(f.data_packets),
            Cell::s(fmt_bytes(f.data_bytes)),
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
    for (name, f) in &flows {
        if let Some(details) = flow_details(f) {
            let _ = writeln!(out, "  {name}: {details}");
        }
    }
}

/// What a RoCEv2 flow's row leaves out: NAKs by code, PSNs unacknowledged,
/// FECN/BECN; `None` when there is nothing.
pub fn flow_details(f: &analyzer::engine::RoceFlowReport) -> Option<String> {
    let mut parts = Vec::new();
    if !f.naks_by_code.is_empty() {
        parts.push(format!("NAKs: {}", counts(&f.naks_by_code)));
    }
    if f.outstanding_psns > 0 {
        parts.push(format!(
            "{} PSNs unacknowledged at the end",
            f.outstanding_psns
        ));
    }
    if f.fecn + f.becn > 0 {
        parts.push(format!("FECN {} / BECN {}", f.fecn, f.becn));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

fn render_notes(out: &mut String, results: &[CaptureResult], merged: &Report) {
    let notes = notes(results, merged);
    if notes.is_empty() {
        return;
    }
    heading(out, "Notes");
    for n in notes {
        let _ = writeln!(out, "  {}", n.yellow());
    }
}

/// The report's notes: what was counted but not analysed, what is missing,
/// and how several captures' times compare (a read error's line starts
/// with two spaces, under the line it belongs to).
pub fn notes(results: &[CaptureResult], merged: &Report) -> Vec<String> {
    let e = &merged.engine;
    let mut notes = Vec::new();
    let malformed = merged.capture.malformed;
    let corrupt: u64 = results.iter().map(|r| r.read.corrupt_records).sum();
    if malformed > 0 {
        notes.push(format!(
            "{malformed} malformed MetaRoCE/RoCEv2 packets were counted and not analysed"
        ));
    }
    if corrupt > 0 {
        notes.push(format!(
            "{corrupt} corrupt capture records were skipped (the reader resynchronised)"
        ));
        for r in results {
            for err in r.read.errors.iter().take(5) {
                notes.push(format!("  {}: {err}", r.path.display()));
            }
        }
    }
    if e.evicted_directions + e.evicted_rocev2_flows > 0 {
        notes.push(format!(
            "{} directions and {} RoCEv2 flows were evicted at the flow cap ({}): their counts are missing",
            e.evicted_directions, e.evicted_rocev2_flows, e.max_flows
        ));
    }
    if e.rocev2_unmatched_responses > 0 {
        notes.push(format!(
            "{} RoCEv2 responses matched no request flow",
            e.rocev2_unmatched_responses
        ));
    }
    if e.rocev2_not_rc > 0 {
        notes.push(format!(
            "{} RoCEv2 packets of other services (UD, UC, ...) were counted, not analysed",
            e.rocev2_not_rc
        ));
    }
    if results.len() > 1 {
        notes.push(
            "several captures: each is analysed on its own clock (times above are each capture's own); a direction captured at both ends is listed once per capture"
                .to_string(),
        );
    }
    notes
}

/// Writes `text` to `out`.
pub fn write(out: &mut dyn Write, text: &str) -> io::Result<()> {
    out.write_all(text.as_bytes())
}
