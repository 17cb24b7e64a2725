//! The text report's tables (`crate::text`) as sortable HTML tables: the
//! same column models ([`crate::columns`]), so the same columns and the
//! same formatting of every value. Long tables are cut
//! to their worst rows ([`MAX_DIRECTIONS`], [`MAX_PATHS`], [`MAX_STALLS`],
//! [`MAX_BETWEEN`], [`MAX_ROCEV2`]) with one line summing the rest.

use std::fmt::Write as _;

use super::{Dir, Page, esc, more_line, section, thousands};
use crate::columns::{self, BetweenRow, Cell, Named, OFFENDERS, StallRow, Table, Tone};
use crate::text::{self, fmt_ns};
use analyzer::engine::{PathReport, StallReport};

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

/// Writes `table` as a sortable table: a numeric cell carries its sort key
/// in `data-v`, a tone is a CSS class.
fn render_table(out: &mut String, id: &str, table: &Table) {
    let _ = write!(
        out,
        r#"<div class="scroll"><table class="sortable" id="{id}"><thead><tr>"#,
    );
    for (i, h) in table.headers.iter().enumerate() {
        let _ = write!(
            out,
            "<th{}>{}</th>",
            if table.left(i) { r#" class="l""# } else { "" },
            esc(h)
        );
    }
    out.push_str("</tr></thead><tbody>");
    for row in &table.rows {
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
            if let Some(v) = c.key {
                let _ = write!(out, r#" data-v="{v}""#);
            }
            let _ = write!(out, ">{}</td>", esc(&c.text));
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table></div>");
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
    let rows = listed.iter().map(|dir| Named {
        name: &dir.label,
        item: dir.report,
    });
    render_table(out, "directions", &Table::of(&columns::directions(), rows));
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

fn latency(out: &mut String, listed: &[&Dir<'_>]) {
    section(
        out,
        "t-latency",
        "Latency per direction (p50/p90/p99/p99.9 are HdrHistogram buckets, 3 digits)",
    );
    let headers = ["direction", "latency"]
        .into_iter()
        .chain(columns::SUMMARY.iter().map(|c| c.header));
    let mut t = Table::new(headers.collect());
    for dir in listed {
        let latencies = columns::latencies(dir.report);
        if latencies.is_empty() {
            t.push(vec![Cell::l(dir.label.clone()), Cell::l("(no samples)")]);
        }
        for (what, s) in latencies {
            let labels = [Cell::l(dir.label.clone()), Cell::l(what)];
            let numbers = columns::SUMMARY.iter().map(|c| (c.cell)(s));
            t.push(labels.into_iter().chain(numbers).collect());
        }
    }
    render_table(out, "latency", &t);
}

fn paths(out: &mut String, listed: &[&Dir<'_>]) {
    section(
        out,
        "t-paths",
        "Paths (direction, ev; evs that carried DATA or PROBEs)",
    );
    let all: Vec<(&Dir<'_>, &PathReport)> = listed
        .iter()
        .flat_map(|d| {
            d.report
                .paths
                .iter()
                .filter(|p| columns::listed_path(p))
                .map(move |p| (*d, p))
        })
        .collect();
    let rows = all.iter().take(MAX_PATHS).map(|(dir, p)| Named {
        name: &dir.label,
        item: *p,
    });
    render_table(out, "paths", &Table::of(&columns::paths(), rows));
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
    let rows = stalls.iter().map(|(dir, stall)| StallRow {
        name: &dir.label,
        stall,
        origin,
    });
    render_table(out, "stalls", &Table::of(&columns::stalls(), rows));
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

/// The top-offender lists as tables (the text report prints them as lines).
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
    for list in &OFFENDERS {
        let ranked = list.rank(paths.iter().copied(), top);
        let _ = write!(out, "<h3>{}</h3>", esc(list.title));
        if ranked.is_empty() {
            out.push_str(r#"<p class="note">none</p>"#);
            continue;
        }
        let mut t = Table::new(vec![
            "value",
            "direction",
            "ev",
            "data",
            "retx",
            "rx lost",
            "tx lost",
            "rtt p99",
        ]);
        for (dir, p) in ranked {
            t.push(vec![
                Cell::s(list.value(p), (list.key)(p) as f64).tone(Tone::Bad),
                Cell::l(dir.label.clone()),
                Cell::n(u64::from(p.ev)),
                Cell::n(p.data_packets),
                Cell::n(p.retransmissions),
                Cell::n(p.lost),
                Cell::n(p.lost_inferred),
                Cell::ns(p.ack_rtt_ns.p99, p.ack_rtt_ns.count),
            ]);
        }
        render_table(out, list.id, &t);
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
        // Worst first when cut: most lost, then most matched.
        let mut rows: Vec<_> = b.paths.iter().collect();
        if rows.len() > MAX_BETWEEN {
            rows.sort_by_key(|p| std::cmp::Reverse((p.lost_between, p.matched)));
        }
        let shown = rows.iter().take(MAX_BETWEEN).map(|path| BetweenRow {
            path,
            captures: page.results,
        });
        render_table(out, "between", &Table::of(&columns::between(), shown));
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
    let mut flows = text::rocev2_flows(page.results);
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
    let rows = flows.iter().map(|(name, f)| Named { name, item: *f });
    render_table(out, "rocev2", &Table::of(&columns::rocev2(), rows));
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
