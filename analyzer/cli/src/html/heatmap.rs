//! Per-path heatmaps, direction x ev: the loss rate (the larger of the rx
//! and tx rates, white to red) and the ACK-RTT p99 (white to blue, log
//! scale between the smallest and largest shown). One row per direction,
//! the worst [`MAX_ROWS`]; one column per ev, at most [`MAX_COLS`] (those
//! that lost most). Each cell's tooltip gives the path's numbers.

use std::collections::BTreeMap;

use super::svg::{Svg, shade};
use super::{Dir, Page, esc, more_line, path_loss_rate, thousands};
use crate::text::{fmt_ns, fmt_rate};
use analyzer::engine::PathReport;

/// Most directions (rows) drawn.
pub const MAX_ROWS: usize = 30;
/// Most evs (columns) drawn.
pub const MAX_COLS: usize = 32;

const LABEL_W: f64 = 390.0;
const CELL_H: f64 = 20.0;
const TOP: f64 = 34.0;

/// Which value a heatmap shows.
#[derive(Clone, Copy)]
enum Measure {
    Loss,
    RttP99,
}

fn has_path_data(p: &PathReport) -> bool {
    p.data_packets > 0 || p.ack_rtt_ns.count > 0
}

pub fn render(out: &mut String, page: &Page<'_>) {
    let rows: Vec<&Dir<'_>> = page
        .worst()
        .filter(|d| d.report.paths.iter().any(has_path_data))
        .collect();
    if rows.is_empty() {
        return;
    }
    let shown = &rows[..rows.len().min(MAX_ROWS)];
    // Columns: the evs of the shown rows, the lossiest first when cut.
    let mut by_ev: BTreeMap<u16, (u64, u64)> = BTreeMap::new();
    for d in shown {
        for p in d.report.paths.iter().filter(|p| has_path_data(p)) {
            let e = by_ev.entry(p.ev).or_default();
            e.0 += p.lost + p.lost_inferred;
            e.1 += p.packets;
        }
    }
    let mut evs: Vec<(u16, (u64, u64))> = by_ev.into_iter().collect();
    let all_evs = evs.len();
    if all_evs > MAX_COLS {
        evs.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        evs.truncate(MAX_COLS);
        evs.sort_by_key(|e| e.0);
    }
    let evs: Vec<u16> = evs.into_iter().map(|e| e.0).collect();

    out.push_str(r#"<h3 id="heatmaps">Paths: loss and ACK-RTT p99 per direction and ev</h3>"#);
    out.push_str(r#"<div class="grid">"#);
    heatmap(out, shown, &evs, Measure::Loss);
    heatmap(out, shown, &evs, Measure::RttP99);
    out.push_str("</div>");
    let mut notes = Vec::new();
    if rows.len() > shown.len() {
        let rest = &rows[shown.len()..];
        notes.push(format!(
            "and {} more directions with paths (the least troubled): {} lost, {} retransmissions",
            thousands(rest.len() as u64),
            thousands(rest.iter().map(|d| d.lost()).sum()),
            thousands(rest.iter().map(|d| d.report.retransmissions).sum())
        ));
    }
    if all_evs > evs.len() {
        notes.push(format!(
            "{} of {all_evs} evs shown (those that lost most)",
            evs.len()
        ));
    }
    for n in notes {
        more_line(out, &n);
    }
}

fn heatmap(out: &mut String, rows: &[&Dir<'_>], evs: &[u16], m: Measure) {
    let cell_w = ((760.0 - LABEL_W) / evs.len().max(1) as f64).clamp(14.0, 44.0);
    let width = LABEL_W + cell_w * evs.len() as f64 + 10.0;
    let height = TOP + CELL_H * rows.len() as f64 + 8.0;
    let (title, id) = match m {
        Measure::Loss => ("loss rate (larger of rx and tx)", "heatmap-loss"),
        Measure::RttP99 => ("ACK-RTT p99", "heatmap-rtt"),
    };
    let mut svg = Svg::new(width, height, title);
    svg.text(0.0, 14.0, "start", "h", title);
    // Scale: loss up to the largest rate shown; RTT log between extremes.
    let paths = || {
        rows.iter()
            .flat_map(|d| d.report.paths.iter())
            .filter(|p| evs.contains(&p.ev) && has_path_data(p))
    };
    let max_loss = paths().map(path_loss_rate).fold(0.0, f64::max);
    let rtts: Vec<u64> = paths()
        .filter(|p| p.ack_rtt_ns.count > 0)
        .map(|p| p.ack_rtt_ns.p99)
        .collect();
    let rtt_min = rtts.iter().copied().min().unwrap_or(0);
    let rtt_max = rtts.iter().copied().max().unwrap_or(0);
    // The log scale starts at 1 ns (a p99 of 0 is the lightest).
    let (rtt_lo, rtt_hi) = (rtt_min.max(1) as f64, rtt_max.max(1) as f64);
    let show_text = cell_w >= 30.0;
    for (i, ev) in evs.iter().enumerate() {
        svg.text(
            LABEL_W + cell_w * (i as f64 + 0.5),
            TOP - 6.0,
            "middle",
            "s",
            &ev.to_string(),
        );
    }
    svg.text(LABEL_W - 6.0, TOP - 6.0, "end", "s", "ev");
    for (r, d) in rows.iter().enumerate() {
        let y = TOP + CELL_H * r as f64;
        svg.text(LABEL_W - 6.0, y + 14.0, "end", "t", &d.label);
        for (c, ev) in evs.iter().enumerate() {
            let Some(p) = d
                .report
                .paths
                .iter()
                .find(|p| p.ev == *ev && has_path_data(p))
            else {
                continue;
            };
            let x = LABEL_W + cell_w * c as f64;
            let tip = format!(
                "{} ev {}: {} DATA, {} retx, rx loss {}, tx loss {}, ACK RTT p50 {} p99 {} ({} samples)",
                d.label,
                ev,
                p.data_packets,
                p.retransmissions,
                fmt_rate(p.receive_loss_rate()),
                fmt_rate(p.send_loss_rate()),
                if p.ack_rtt_ns.count > 0 {
                    fmt_ns(p.ack_rtt_ns.p50)
                } else {
                    "-".into()
                },
                if p.ack_rtt_ns.count > 0 {
                    fmt_ns(p.ack_rtt_ns.p99)
                } else {
                    "-".into()
                },
                p.ack_rtt_ns.count
            );
            let (fill, label) = match m {
                Measure::Loss => {
                    let rate = path_loss_rate(p);
                    if rate > 0.0 {
                        let t = 0.15 + 0.85 * (rate / max_loss.max(1e-12)).sqrt();
                        (shade((196, 30, 45), t), format!("{:.0}%", rate * 100.0))
                    } else {
                        ("#eef1f4".to_string(), "0".to_string())
                    }
                }
                Measure::RttP99 => {
                    if p.ack_rtt_ns.count == 0 {
                        ("#f7f8fa".to_string(), "-".to_string())
                    } else {
                        let v = p.ack_rtt_ns.p99.max(1) as f64;
                        let t = if rtt_hi > rtt_lo {
                            (v / rtt_lo).ln() / (rtt_hi / rtt_lo).ln()
                        } else {
                            0.5
                        };
                        (
                            shade((37, 84, 196), 0.1 + 0.8 * t),
                            fmt_ns(p.ack_rtt_ns.p99),
                        )
                    }
                }
            };
            svg.rect(
                x + 1.0,
                y + 1.0,
                cell_w - 2.0,
                CELL_H - 2.0,
                &fill,
                Some(&tip),
            );
            if show_text {
                svg.text(x + cell_w / 2.0, y + 14.0, "middle", "c", &label);
            }
        }
    }
    out.push_str(&format!(r#"<div id="{id}">"#));
    out.push_str(&svg.finish());
    let scale = match m {
        Measure::Loss => format!(
            "white: no loss; darkest red: {} (the largest shown)",
            fmt_rate(Some(max_loss))
        ),
        Measure::RttP99 => format!(
            "light: {}, darkest blue: {} (log scale)",
            fmt_ns(rtt_min),
            fmt_ns(rtt_max)
        ),
    };
    out.push_str(&format!(r#"<p class="note">{}</p></div>"#, esc(&scale)));
}
