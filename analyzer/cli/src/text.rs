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

use crate::columns::{self, BetweenRow, Cell, Named, OFFENDERS, StallRow, Table, Tone};
use crate::pipeline::CaptureResult;
use analyzer::engine::{DirectionReport, PathReport, Report, RoceFlowReport};
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

/// Writes `table` with padded columns, a bold header and each cell in
/// its tone.
fn render_table(table: &Table, out: &mut String) {
    let mut widths: Vec<usize> = table.headers.iter().map(|h| h.chars().count()).collect();
    for row in &table.rows {
        for (i, c) in row.iter().enumerate() {
            if i < widths.len() {
                widths[i] = widths[i].max(c.text.chars().count());
            }
        }
    }
    let header_style = Style::new().bold();
    let _ = write!(out, "  ");
    for (i, h) in table.headers.iter().enumerate() {
        let padded = pad(h, widths[i], table.left(i));
        let _ = write!(out, "{}", padded.style(header_style));
        if i + 1 < table.headers.len() {
            out.push_str("  ");
        }
    }
    out.push('\n');
    for row in &table.rows {
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

/// Renders the report of `results` (one or several captures) as text with
/// ANSI styles. `top` is the length of each offender list.
pub fn render(results: &[CaptureResult], merged: &Report, top: usize) -> String {
    let mut out = String::new();
    let n = results.len();
    let c = &merged.capture;
    let files = c.files.max(1) as usize;
    let points = if n > files {
        format!(
            "{files} capture{}, {n} capture points",
            if files == 1 { "" } else { "s" }
        )
    } else {
        format!("{n} capture{}", if n == 1 { "" } else { "s" })
    };
    let title = format!(
        "MetaRoCE analysis: {points}, {} frames ({} MetaRoCE, {} RoCEv2), {}",
        c.frames,
        c.metaroce_packets,
        c.rocev2_packets,
        fmt_ns(c.duration_ns),
    );
    let _ = writeln!(out, "{}", title.style(Style::new().bold()));
    for r in results {
        let rc = &r.report.capture;
        let corrupt = r.read.corrupt_records;
        let point = match &r.mirror {
            Some(m) => format!("{} [{m}]", r.path.display()),
            None => r.path.display().to_string(),
        };
        let _ = write!(
            out,
            "  {point}: {} frames, {}, ",
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
        render_traffic(&mut out, &rc.traffic);
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
    let rows = dirs.iter().map(|(name, d)| Named { name, item: *d });
    render_table(&Table::of(&columns::directions(), rows), out);
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
    let headers = std::iter::once("").chain(columns::SUMMARY.iter().map(|c| c.header));
    let mut t = Table::new(headers.collect());
    for (name, d) in dirs {
        let latencies = columns::latencies(d);
        if latencies.is_empty() {
            t.push(vec![Cell::l(format!("{name}  (no samples)"))]);
        }
        for (what, s) in latencies {
            let label = Cell::l(format!("{name}  {what}"));
            t.push(
                std::iter::once(label)
                    .chain(columns::SUMMARY.iter().map(|c| (c.cell)(s)))
                    .collect(),
            );
        }
    }
    render_table(&t, out);
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
    let rows = dirs.iter().flat_map(|(name, d)| {
        d.paths
            .iter()
            .filter(|p| columns::listed_path(p))
            .map(move |p| Named { name, item: p })
    });
    render_table(&Table::of(&columns::paths(), rows), out);
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
    let rows = stalls.into_iter().map(|(name, stall)| StallRow {
        name,
        stall,
        origin,
    });
    render_table(&Table::of(&columns::stalls(), rows), out);
    if dropped > 0 {
        let _ = writeln!(
            out,
            "  {}",
            format!("{dropped} more stalls beyond the per-direction cap (counted only)").yellow()
        );
    }
}

fn render_offenders(out: &mut String, dirs: &[(String, &DirectionReport)], top: usize) {
    let paths: Vec<(&str, &PathReport)> = dirs
        .iter()
        .flat_map(|(name, d)| d.paths.iter().map(move |p| (name.as_str(), p)))
        .collect();
    if paths.is_empty() || top == 0 {
        return;
    }
    heading(out, &format!("Top offenders (worst {top} paths)"));
    for list in &OFFENDERS {
        let ranked = list.rank(paths.iter().copied(), top);
        let _ = writeln!(out, "  {}", list.title.bold());
        if ranked.is_empty() {
            let _ = writeln!(out, "    {}", "none".dimmed());
            continue;
        }
        for (dir, p) in ranked {
            let _ = writeln!(
                out,
                "    {:>8}  {} ev {}  ({} data, {} retx, {} rx lost, {} tx lost, rtt p99 {})",
                list.value(p).red(),
                dir,
                p.ev,
                p.data_packets,
                p.retransmissions,
                p.lost,
                p.lost_inferred,
                if p.ack_rtt_ns.count > 0 {
                    fmt_ns(p.ack_rtt_ns.p99)
                } else {
                    "-".into()
                },
            );
        }
    }
}

/// A capture's mirrored frames: decapsulated per encapsulation, cut by
/// the switch, and those that could not be decapsulated.
fn render_traffic(out: &mut String, t: &analyzer::traffic::TrafficReport) {
    if t.decapsulated.is_empty() && t.mirror_problems.is_empty() {
        return;
    }
    let kinds: Vec<String> = t
        .decapsulated
        .iter()
        .map(|(k, n)| format!("{n} {k}"))
        .collect();
    let _ = write!(
        out,
        "    mirrored frames decapsulated: {}",
        kinds.join(", ")
    );
    if t.mirror_truncated > 0 {
        let cut = format!(", {} cut by the switch (ERSPAN T bit)", t.mirror_truncated);
        let _ = write!(out, "{}", cut.yellow());
    }
    out.push('\n');
    for (what, n) in &t.mirror_problems {
        let line = format!("    not decapsulated or broken inside: {what}: {n} frames");
        let _ = writeln!(out, "{}", line.yellow());
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
    let name = |i: u64| capture_name(results, i);
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
        let rows = b.paths.iter().map(|path| BetweenRow {
            path,
            captures: results,
        });
        render_table(&Table::of(&columns::between(), rows), out);
    }
}

/// A capture's name (its file stem) by index; `#i` past the end.
pub fn capture_name(results: &[CaptureResult], i: u64) -> String {
    results
        .get(i as usize)
        .map_or_else(|| format!("#{i}"), |r| r.stem.clone())
}

/// The RoCEv2 flows of every capture in order, each with its name
/// (`10.0.0.1 -> 10.0.0.2 qp 0x000011`, after `[stem] ` with several
/// captures).
pub fn rocev2_flows(results: &[CaptureResult]) -> Vec<(String, &RoceFlowReport)> {
    let many = results.len() > 1;
    results
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
        .collect()
}

fn render_rocev2(out: &mut String, results: &[CaptureResult]) {
    let flows = rocev2_flows(results);
    if flows.is_empty() {
        return;
    }
    heading(
        out,
        "RoCEv2 flows (requests; responses counted on their request flow)",
    );
    let rows = flows.iter().map(|(name, f)| Named { name, item: *f });
    render_table(&Table::of(&columns::rocev2(), rows), out);
    for (name, f) in &flows {
        if let Some(details) = flow_details(f) {
            let _ = writeln!(out, "  {name}: {details}");
        }
    }
}

/// What a RoCEv2 flow's row leaves out: NAKs by code, PSNs unacknowledged,
/// FECN/BECN; `None` when there is nothing.
pub fn flow_details(f: &RoceFlowReport) -> Option<String> {
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
    if let Some(note) = &merged.capture.traffic.note {
        notes.push(note.clone());
    }
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
