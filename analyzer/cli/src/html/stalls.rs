//! The stall timeline across captures: one lane per stalled direction
//! (the [`MAX_LANES`] with the longest stalls), its active span (first to
//! last packet) in grey and each stall as a red bar, open stalls darker.
//! Time runs from the first frame of all captures, on the first capture's
//! clock: another capture's times are shifted by the clock offset that
//! `between_captures` estimated from the traffic, or left on their own
//! clock (and named so) where none was estimated.

use std::fmt::Write as _;

use super::svg::{Svg, ticks};
use super::{Dir, Page, esc, more_line, thousands};
use crate::text::{fmt_ns, signed_ns};

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
    // Every time on the first capture's clock, where an offset is known.
    let offsets = clock_offsets(page);
    let off = |capture: usize| i128::from(offsets.get(capture).copied().flatten().unwrap_or(0));
    let aligned = |capture: usize, ts: u64| i128::from(ts) - off(capture);
    let captures = page
        .results
        .iter()
        .enumerate()
        .filter(|(_, r)| r.report.capture.frames > 0);
    let origin = captures
        .clone()
        .map(|(i, r)| aligned(i, r.report.capture.first_ts_ns))
        .min()
        .unwrap_or(0);
    let end = captures
        .map(|(i, r)| aligned(i, r.report.capture.last_ts_ns))
        .chain(shown.iter().flat_map(|d| {
            d.report
                .stalls
                .iter()
                .map(|s| aligned(d.capture, s.start_ns + s.duration_ns))
        }))
        .max()
        .unwrap_or(0);
    let span = (end - origin).max(1) as f64;
    let x = |d: &Dir<'_>, ts: u64| {
        LABEL_W + PLOT_W * ((aligned(d.capture, ts) - origin).max(0) as f64 / span)
    };
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
        "time since the first frame; red: stall, dark red: still open at the end",
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
        let (a, b) = (x(d, d.report.first_ts_ns), x(d, d.report.last_ts_ns));
        svg.rect(a, y + 8.0, (b - a).max(1.0), 6.0, "#d9dee4", None);
        for s in &d.report.stalls {
            if s.duration_ns < min_drawn || budget == 0 {
                continue;
            }
            budget -= 1;
            let (a, b) = (x(d, s.start_ns), x(d, s.start_ns + s.duration_ns));
            let tip = format!(
                "{}: stall of {} from +{}, {}{}, {} unacked, {} retx, evs in flight {}",
                d.label,
                fmt_ns(s.duration_ns),
                fmt_ns((aligned(d.capture, s.start_ns) - origin).max(0) as u64),
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
    if page.results.len() > 1 {
        let mut shifted = Vec::new();
        let mut unaligned = Vec::new();
        for (i, r) in page.results.iter().enumerate().skip(1) {
            match offsets.get(i).copied().flatten() {
                Some(o) => shifted.push(format!("{} {}", r.stem, signed_ns(-o))),
                None => unaligned.push(r.stem.clone()),
            }
        }
        let mut note = format!(
            "times on the clock of {} (the first capture)",
            page.results[0].stem
        );
        if !shifted.is_empty() {
            let _ = write!(
                note,
                "; shifted by the clock offsets estimated from the traffic: {}",
                shifted.join(", ")
            );
        }
        if !unaligned.is_empty() {
            let _ = write!(
                note,
                "; on their own clocks (no offset estimated): {}",
                unaligned.join(", ")
            );
        }
        let _ = write!(out, r#"<p class="note">{}</p>"#, esc(&note));
    }
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

/// Each capture's clock minus the first capture's, as `between_captures`
/// estimated it from the traffic (0 for the first; `None` where no
/// estimate links the capture to the first).
fn clock_offsets(page: &Page<'_>) -> Vec<Option<i64>> {
    let mut offsets = vec![None; page.results.len()];
    if let Some(first) = offsets.first_mut() {
        *first = Some(0);
    }
    for b in page
        .merged
        .between_captures
        .iter()
        .filter(|b| b.offset_estimated)
    {
        let (a, c) = (b.capture_a as usize, b.capture_b as usize);
        if a == 0 && c < offsets.len() {
            offsets[c] = Some(b.clock_offset_ns);
        } else if c == 0 && a < offsets.len() {
            offsets[a] = Some(-b.clock_offset_ns);
        }
    }
    offsets
}
