//! The summary box at the top of the page: the worst finding as one
//! sentence ("3 stalls, longest 5.03ms on 10.0.0.1:256 -> 10.0.0.2:512
//! ..."), then one line per other kind of trouble, each naming where it is
//! worst. Its border is red for stalls or loss, yellow for retransmissions
//! or congestion marks alone, green when the captures show none of them.

use std::fmt::Write as _;

use super::{Dir, Page, esc, path_loss_rate, thousands};
use crate::text::{fmt_ns, fmt_rate};
use analyzer::engine::PathReport;

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Level {
    Ok,
    Warn,
    Bad,
}

/// "33.3% (tx)" or "25.0% (rx)": the larger of a path's two loss rates,
/// with the side that measured it.
fn loss_phrase(p: &PathReport) -> String {
    let rx = p.receive_loss_rate().unwrap_or(0.0);
    let tx = p.send_loss_rate().unwrap_or(0.0);
    if tx >= rx {
        format!("{} tx loss", fmt_rate(Some(tx)))
    } else {
        format!("{} rx loss", fmt_rate(Some(rx)))
    }
}

/// The lines of the box, worst first, and the box's level.
fn findings(page: &Page<'_>) -> (Vec<String>, Level) {
    let mut lines = Vec::new();
    let mut level = Level::Ok;

    // Stalls: count, the longest, and the worst loss among its evs.
    let stalls: u64 = page.dirs.iter().map(Dir::stall_count).sum();
    let longest = page
        .dirs
        .iter()
        .flat_map(|d| d.report.stalls.iter().map(move |s| (d, s)))
        .max_by_key(|(_, s)| s.duration_ns);
    if let Some((dir, s)) = longest {
        level = Level::Bad;
        let mut line = format!(
            "{} stall{}, longest {} on {} ({}{})",
            thousands(stalls),
            if stalls == 1 { "" } else { "s" },
            fmt_ns(s.duration_ns),
            dir.label,
            if s.open {
                "still open at the end, "
            } else {
                ""
            },
            s.end_cause.replace('_', " ")
        );
        // The evs that had data in flight when it began, else all of the
        // direction's: the one that lost most is the likely cause.
        let in_flight =
            |p: &&PathReport| s.paths_in_flight.is_empty() || s.paths_in_flight.contains(&p.ev);
        let worst = dir
            .report
            .paths
            .iter()
            .filter(in_flight)
            .filter(|p| path_loss_rate(p) > 0.0)
            .max_by(|a, b| path_loss_rate(a).total_cmp(&path_loss_rate(b)));
        if let Some(p) = worst {
            let _ = write!(
                line,
                ", coincides with {} on ev {}{}",
                loss_phrase(p),
                p.ev,
                if s.paths_in_flight.contains(&p.ev) {
                    " (in flight when it began)"
                } else {
                    ""
                }
            );
        }
        lines.push(line);
    } else if stalls > 0 {
        level = Level::Bad;
        lines.push(format!(
            "{} stalls (beyond the per-direction cap: counted only)",
            thousands(stalls)
        ));
    }

    // The lossiest path.
    let lossiest = page
        .dirs
        .iter()
        .flat_map(|d| d.report.paths.iter().map(move |p| (d, p)))
        .filter(|(_, p)| path_loss_rate(p) > 0.0)
        .max_by(|a, b| {
            path_loss_rate(a.1)
                .total_cmp(&path_loss_rate(b.1))
                .then((a.1.lost + a.1.lost_inferred).cmp(&(b.1.lost + b.1.lost_inferred)))
        });
    let lost: u64 = page.dirs.iter().map(Dir::lost).sum();
    if let Some((dir, p)) = lossiest {
        level = Level::Bad;
        lines.push(format!(
            "{} packets lost; worst path: {} on {} ev {} ({} of {} DATA)",
            thousands(lost),
            loss_phrase(p),
            dir.label,
            p.ev,
            p.lost + p.lost_inferred,
            p.data_packets
        ));
    }

    // Loss between capture points.
    let between_worst = page
        .merged
        .between_captures
        .iter()
        .flat_map(|b| b.paths.iter())
        .filter(|p| p.lost_between > 0)
        .max_by_key(|p| (p.lost_between, p.matched));
    if let Some(p) = between_worst {
        level = Level::Bad;
        let total: u64 = page
            .merged
            .between_captures
            .iter()
            .flat_map(|b| b.paths.iter())
            .map(|p| p.lost_between)
            .sum();
        lines.push(format!(
            "{} transmissions lost between capture points; most on {}:{} -> {}:{} ev {} ({} lost, {} matched, {} -> {})",
            thousands(total),
            p.src,
            p.src_conn,
            p.dst,
            p.dst_conn,
            p.ev,
            p.lost_between,
            p.matched,
            page.capture_name(p.upstream),
            page.capture_name(p.downstream)
        ));
    }

    // Retransmissions.
    let retx: u64 = page.dirs.iter().map(|d| d.report.retransmissions).sum();
    if retx > 0 {
        level = level.max(Level::Warn);
        let timeout: u64 = page
            .dirs
            .iter()
            .map(|d| d.report.timeout_retransmissions)
            .sum();
        let data: u64 = page.dirs.iter().map(|d| d.report.data_packets).sum();
        let worst = page.dirs.iter().max_by_key(|d| d.report.retransmissions);
        let mut line = format!(
            "{} retransmissions ({} after a timeout) of {} DATA packets",
            thousands(retx),
            thousands(timeout),
            thousands(data)
        );
        if let Some(d) = worst {
            let _ = write!(line, "; most on {} ({})", d.label, d.report.retransmissions);
        }
        lines.push(line);
    }

    // RoCEv2 request flows: retransmissions and NAKs.
    let flows = &page.merged.rocev2;
    let roce_retx: u64 = flows.iter().map(|f| f.retransmissions).sum();
    let roce_naks: u64 = flows.iter().map(|f| f.naks + f.rnr_naks).sum();
    if roce_retx + roce_naks > 0 {
        level = level.max(Level::Warn);
        let worst = flows
            .iter()
            .max_by_key(|f| (f.retransmissions + f.naks + f.rnr_naks, f.data_packets));
        let mut line = format!(
            "RoCEv2: {} retransmissions ({} after a timeout) and {} NAKs ({} RNR) of {} request packets",
            thousands(roce_retx),
            thousands(flows.iter().map(|f| f.timeout_retransmissions).sum()),
            thousands(roce_naks),
            thousands(flows.iter().map(|f| f.rnr_naks).sum()),
            thousands(flows.iter().map(|f| f.data_packets).sum()),
        );
        if let Some(f) = worst {
            let _ = write!(
                line,
                "; most on {} -> {} qp 0x{:06x} ({} retx, {} NAKs)",
                f.src,
                f.dst,
                f.dest_qp,
                f.retransmissions,
                f.naks + f.rnr_naks
            );
        }
        lines.push(line);
    }

    // Tail latency: the path with the highest ACK-RTT p99.
    let slowest = page
        .dirs
        .iter()
        .flat_map(|d| d.report.paths.iter().map(move |p| (d, p)))
        .filter(|(_, p)| p.ack_rtt_ns.count > 0)
        .max_by_key(|(_, p)| p.ack_rtt_ns.p99);
    if let Some((dir, p)) = slowest {
        lines.push(format!(
            "highest ACK-RTT p99: {} on {} ev {} (p50 {}, {} samples)",
            fmt_ns(p.ack_rtt_ns.p99),
            dir.label,
            p.ev,
            fmt_ns(p.ack_rtt_ns.p50),
            p.ack_rtt_ns.count
        ));
    }

    // Congestion signals.
    let ce: u64 = page.dirs.iter().map(|d| d.report.ce_marked).sum();
    let cnps: u64 = page.dirs.iter().map(|d| d.report.cnps).sum();
    if ce + cnps > 0 {
        level = level.max(Level::Warn);
        lines.push(format!(
            "congestion: {} CE-marked packets, {} CNPs",
            thousands(ce),
            thousands(cnps)
        ));
    }

    // What the analysis could not see.
    let c = &page.merged.capture;
    let e = &page.merged.engine;
    if c.malformed + c.corrupt_records > 0 {
        level = level.max(Level::Warn);
        lines.push(format!(
            "{} malformed packets and {} corrupt capture records were counted, not analysed",
            thousands(c.malformed),
            thousands(c.corrupt_records)
        ));
    }
    if e.evicted_directions + e.evicted_rocev2_flows > 0 {
        level = level.max(Level::Warn);
        lines.push(format!(
            "{} directions evicted at the flow cap ({}): their counts are missing",
            thousands(e.evicted_directions + e.evicted_rocev2_flows),
            e.max_flows
        ));
    }

    if level == Level::Ok {
        let what = if page.dirs.is_empty() && page.merged.rocev2.is_empty() {
            "no MetaRoCE DATA or RoCEv2 requests in the captures"
        } else {
            "no stalls, no loss, no retransmissions, no NAKs"
        };
        lines.insert(0, what.to_string());
    }
    (lines, level)
}

/// Writes the box.
pub fn render(out: &mut String, page: &Page<'_>) {
    let (lines, level) = findings(page);
    let class = match level {
        Level::Ok => "ok",
        Level::Warn => "warn",
        Level::Bad => "bad",
    };
    let mut it = lines.iter();
    let _ = write!(
        out,
        r#"<div class="summary {class}" id="summary"><p class="headline">{}</p><ul>"#,
        esc(it.next().map_or("", String::as_str))
    );
    for l in it {
        let _ = write!(out, "<li>{}</li>", esc(l));
    }
    out.push_str("</ul></div>");
}
