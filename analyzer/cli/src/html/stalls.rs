//! The stall timeline across captures: one lane per stalled direction
//! (the [`MAX_LANES`] with the longest stalls), its active span (first to
//! last packet) in grey and each stall as a red bar, open stalls darker.
//! Time runs from the first frame of all captures; each capture is on its
//! own clock (the between-captures offset is in the tables).

use std::fmt::Write as _;

use super::svg::{Svg, ticks};
use super::{Dir, Page, esc, more_line, thousands};
use crate::text::fmt_ns;

/// Most lanes (directions) drawn.
pub const MAX_LANES: usize = 30;
/// Most stall bars drawn (the longest).
pub const MAX_BARS: usize = 1000;

const LABEL_W: f64 = 390.0;
const PLOT_W: f64 = 760.0;
const LANE_H: f64 = 22.0;
const TOP: f64 = 26.0;

pub fn render(out: &mut String, page: &Page<'_>) {
    out.push_str(r#"<h3 id="stall-timeline">Stall timeline</h3>"#);
    let lanes: Vec<&Dir<'_>> = page
        .worst()
        .filter(|d| !d.report.stalls.is_empty())
        .collect();
    if lanes.is_empty() {
        let dropped: u64 = page.dirs.iter().map(|d| d.report.stalls_dropped).sum();
        let text = if dropped > 0 {
            format!("{dropped} stalls beyond the per-direction cap (counted only, not drawn)")
        } else {
            format!(
                "no stalls (threshold {})",
                fmt_ns(page.merged.engine.stall_threshold_ns)
            )
        };
        let _ = write!(out, r#"<p class="note">{}</p>"#, esc(&text));
        return;
    }
    let shown = &lanes[..lanes.len().min(MAX_LANES)];
    let origin = page.merged.capture.first_ts_ns;
    let span = page
        .merged
        .capture
        .last_ts_ns
        .saturating_sub(origin)
        .max(
            shown
                .iter()
                .flat_map(|d| d.report.stalls.iter())
                .map(|s| (s.start_ns + s.duration_ns).saturating_sub(origin))
                .max()
                .unwrap_or(0),
        )
        .max(1) as f64;
    let x = |ts: u64| LABEL_W + PLOT_W * (ts.saturating_sub(origin) as f64 / span);
    // The longest bars when there are too many.
    let mut durations: Vec<u64> = shown
        .iter()
        .flat_map(|d| d.report.stalls.iter().map(|s| s.duration_ns))
        .collect();
    durations.sort_unstable_by(|a, b| b.cmp(a));
    let min_drawn = durations.get(MAX_BARS - 1).copied().unwrap_or(0);
    let mut budget = MAX_BARS;

    let height = TOP + LANE_H * shown.len() as f64 + 40.0;
    let mut svg = Svg::new(LABEL_W + PLOT_W + 20.0, height, "stall timeline");
    svg.text(
        LABEL_W,
        14.0,
        "start",
        "s",
        "time since the first frame (each capture on its own clock); red: stall, dark red: still open at the end",
    );
    let bottom = TOP + LANE_H * shown.len() as f64;
    for t in ticks(0.0, span, 6) {
        let tx = LABEL_W + PLOT_W * t / span;
        svg.line(tx, TOP, tx, bottom, "#e3e7eb", 1.0);
        svg.text(
            tx,
            bottom + 14.0,
            "middle",
            "s",
            &format!("+{}", fmt_ns(t as u64)),
        );
    }
    for (i, d) in shown.iter().enumerate() {
        let y = TOP + LANE_H * i as f64;
        svg.text(LABEL_W - 6.0, y + 15.0, "end", "t", &d.label);
        let (a, b) = (x(d.report.first_ts_ns), x(d.report.last_ts_ns));
        svg.rect(a, y + 8.0, (b - a).max(1.0), 6.0, "#d9dee4", None);
        for s in &d.report.stalls {
            if s.duration_ns < min_drawn || budget == 0 {
                continue;
            }
            budget -= 1;
            let (a, b) = (x(s.start_ns), x(s.start_ns + s.duration_ns));
            let tip = format!(
                "{}: stall of {} from +{}, {}{}, {} unacked, {} retx, evs in flight {}",
                d.label,
                fmt_ns(s.duration_ns),
                fmt_ns(s.start_ns.saturating_sub(origin)),
                if s.open { "still open, " } else { "ended by " },
                s.end_cause.replace('_', " "),
                s.outstanding_packets,
                s.retransmissions,
                s.paths_in_flight
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            );
            let fill = if s.open { "#7a0f16" } else { "#d0353f" };
            svg.rect(a, y + 3.0, (b - a).max(2.0), LANE_H - 6.0, fill, Some(&tip));
        }
    }
    out.push_str(r#"<div id="stall-chart">"#);
    out.push_str(&svg.finish());
    out.push_str("</div>");
    if lanes.len() > shown.len() {
        let rest = &lanes[shown.len()..];
        more_line(
            out,
            &format!(
                "and {} more stalled directions with shorter stalls: {} stalls",
                thousands(rest.len() as u64),
                thousands(rest.iter().map(|d| d.stall_count()).sum())
            ),
        );
    }
    if budget == 0 && durations.len() > MAX_BARS {
        more_line(
            out,
            &format!(
                "the {MAX_BARS} longest of {} stalls drawn",
                thousands(durations.len() as u64)
            ),
        );
    }
}
