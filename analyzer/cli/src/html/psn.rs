//! PSN versus time for the worst direction that sent DATA in its capture
//! (tcptrace-style): one colour per ev, first transmissions as dots,
//! retransmissions as crosses, the direction's stalls shaded behind. The
//! PSN is relative to the direction's first DATA (serial arithmetic, as in
//! `plot`). At most [`MAX_POINTS`] first transmissions are drawn (every
//! k-th; retransmissions always), one SVG path per ev and kind, so the
//! chart is a few dozen elements whatever the capture.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::svg::{PathData, Svg, ev_color, ticks};
use super::{Page, esc, thousands};
use crate::series::Points;
use crate::text::fmt_ns;

/// Most first transmissions drawn.
pub const MAX_POINTS: usize = 4000;

const LEFT: f64 = 70.0;
const TOP: f64 = 40.0;
const W: f64 = 1000.0;
const H: f64 = 340.0;

pub fn render(out: &mut String, page: &Page<'_>) {
    let Some((dir, series)) = page.worst().find_map(|d| {
        page.series_of(d)
            .filter(|s| !s.psn.pts.is_empty())
            .map(|s| (d, s))
    }) else {
        return;
    };
    let points: &Points = &series.psn;
    let pts = &points.pts;
    let _ = write!(
        out,
        r#"<h3 id="psn">PSN versus time: {}</h3>"#,
        esc(&dir.label)
    );
    let t0 = pts.iter().map(|p| p.ts_ns).min().unwrap_or(0);
    let t1 = pts
        .iter()
        .map(|p| p.ts_ns)
        .max()
        .unwrap_or(0)
        .max(
            dir.report
                .stalls
                .iter()
                .map(|s| s.start_ns + s.duration_ns)
                .max()
                .unwrap_or(0),
        )
        .max(t0 + 1);
    let p0 = pts
        .iter()
        .map(|p| points.relative(p.psn))
        .min()
        .unwrap_or(0);
    let p1 = pts
        .iter()
        .map(|p| points.relative(p.psn))
        .max()
        .unwrap_or(0)
        .max(p0 + 1);
    let span_t = (t1 - t0) as f64;
    let span_p = (p1 - p0) as f64;
    let x = |ts: u64| LEFT + W * (ts.saturating_sub(t0) as f64 / span_t);
    let y = |rel: i64| TOP + H - H * ((rel - p0) as f64 / span_p);

    let first = pts.iter().filter(|p| !p.retransmission).count();
    let step = first.div_ceil(MAX_POINTS).max(1);
    let retx = pts.len() - first;
    let mut svg = Svg::new(LEFT + W + 20.0, TOP + H + 44.0, "PSN versus time");
    svg.text(
        LEFT,
        14.0,
        "start",
        "s",
        &format!(
            "{} DATA, {} retransmissions; dots: first transmissions{}, crosses: retransmissions; shaded: stalls",
            thousands(points.n),
            thousands(retx as u64),
            match points.stride * step as u64 {
                1 => String::new(),
                k => format!(" (every {k}th drawn)"),
            }
        ),
    );
    // Stalls behind the points.
    for s in &dir.report.stalls {
        let (a, b) = (x(s.start_ns), x(s.start_ns + s.duration_ns));
        let tip = format!(
            "stall of {} ({})",
            fmt_ns(s.duration_ns),
            s.end_cause.replace('_', " ")
        );
        svg.rect(
            a,
            TOP,
            (b - a).max(2.0),
            H,
            "rgba(208,53,63,0.15)",
            Some(&tip),
        );
    }
    // Axes.
    svg.line(LEFT, TOP + H, LEFT + W, TOP + H, "#7d8894", 1.0);
    svg.line(LEFT, TOP, LEFT, TOP + H, "#7d8894", 1.0);
    for t in ticks(0.0, span_t, 8) {
        let tx = LEFT + W * t / span_t;
        svg.text(
            tx,
            TOP + H + 14.0,
            "middle",
            "s",
            &format!("+{}", fmt_ns(t as u64)),
        );
    }
    for p in ticks(p0 as f64, p1 as f64, 6) {
        svg.text(LEFT - 6.0, y(p as i64) + 4.0, "end", "s", &format!("{p}"));
    }
    svg.text(
        LEFT + W / 2.0,
        TOP + H + 32.0,
        "middle",
        "s",
        "time since the direction's first DATA",
    );
    svg.vtext(
        14.0,
        TOP + H / 2.0,
        "s",
        &format!("PSN - {}", points.first_psn.unwrap_or(0)),
    );
    // One path per ev and kind.
    let mut dots: BTreeMap<u16, PathData> = BTreeMap::new();
    let mut crosses: BTreeMap<u16, PathData> = BTreeMap::new();
    let size = if first > 1000 { 2.0 } else { 4.0 };
    let mut k = 0usize;
    for p in pts {
        let (px, py) = (x(p.ts_ns), y(points.relative(p.psn)));
        if p.retransmission {
            crosses.entry(p.ev).or_default().cross(px, py, 4.0);
        } else {
            k += 1;
            if k.is_multiple_of(step) || step == 1 {
                dots.entry(p.ev).or_default().square(px, py, size);
            }
        }
    }
    for (ev, d) in &dots {
        svg.path(d, "none", &ev_color(*ev), Some(&format!("ev {ev}")));
    }
    for (ev, d) in &crosses {
        svg.path(
            d,
            &ev_color(*ev),
            "none",
            Some(&format!("ev {ev}: retransmissions")),
        );
    }
    let _ = write!(out, r#"<div id="psn-chart">{}</div>"#, svg.finish());
    // The legend (HTML, so it wraps).
    let mut evs: Vec<u16> = dots.keys().chain(crosses.keys()).copied().collect();
    evs.sort_unstable();
    evs.dedup();
    out.push_str(r#"<div class="legend">"#);
    for ev in evs.iter().take(64) {
        let _ = write!(out, r#"<span style="--c:{}">ev {ev}</span>"#, ev_color(*ev));
    }
    if evs.len() > 64 {
        let _ = write!(out, "<span>and {} more evs</span>", evs.len() - 64);
    }
    out.push_str("</div>");
}
