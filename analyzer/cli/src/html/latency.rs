//! Latency distributions. From the report: per direction, the ACK RTT's
//! and the message latency's percentiles on a log axis (a line from min
//! to max, a bar from p50 to p99, marks at p90 and p99.9), the worst
//! [`MAX_ROWS`] directions. From the verdict stream: histograms of both
//! for the worst [`MAX_HISTOGRAMS`] directions (40 bins from the smallest
//! sample to the p99.9; larger samples in the last bin).

use std::fmt::Write as _;

use super::svg::{PathData, Svg, decades, ticks};
use super::{Dir, Page, more_line, thousands};
use crate::series::{BINS, Binned, Samples, quantile};
use crate::text::fmt_ns;
use analyzer::engine::{DirectionReport, Summary};

/// Most directions in the percentile charts.
pub const MAX_ROWS: usize = 15;
/// Most directions with histograms.
pub const MAX_HISTOGRAMS: usize = 3;

const LABEL_W: f64 = 390.0;
const PLOT_W: f64 = 560.0;
const ROW_H: f64 = 20.0;

/// The message latency a direction has: acked completion (sender view),
/// else delivery (receiver view).
fn message_summary(d: &DirectionReport) -> (&'static str, &Summary) {
    if d.msg_completion_ns.count > 0 {
        ("completion", &d.msg_completion_ns)
    } else {
        ("delivery", &d.msg_delivery_ns)
    }
}

pub fn render(out: &mut String, page: &Page<'_>) {
    let with_samples: Vec<&Dir<'_>> = page
        .worst()
        .filter(|d| d.report.ack_rtt_ns.count > 0 || message_summary(d.report).1.count > 0)
        .collect();
    if with_samples.is_empty() {
        return;
    }
    out.push_str(r#"<h3 id="latency-charts">Latency percentiles (min, p50 to p99 bar, p90 and p99.9 marks, max)</h3>"#);
    let shown = &with_samples[..with_samples.len().min(MAX_ROWS)];
    out.push_str(r#"<div class="grid">"#);
    ladder(out, "ACK RTT", "latency-rtt", shown, |d| {
        Some(&d.ack_rtt_ns)
    });
    ladder(out, "message latency", "latency-msg", shown, |d| {
        Some(message_summary(d).1)
    });
    out.push_str("</div>");
    if with_samples.len() > shown.len() {
        more_line(
            out,
            &format!(
                "and {} more directions with latency samples (the least troubled; all are in the latency table)",
                thousands((with_samples.len() - shown.len()) as u64)
            ),
        );
    }

    let hist_dirs: Vec<&Dir<'_>> = page
        .worst()
        .filter(|d| {
            page.series_of(d)
                .is_some_and(|s| !s.msg.values.is_empty() || !s.rtt_by_ev.is_empty())
        })
        .take(MAX_HISTOGRAMS)
        .collect();
    if hist_dirs.is_empty() {
        return;
    }
    out.push_str(r#"<h3 id="histograms">Latency histograms of the worst directions (samples from the packet verdicts)</h3><div class="grid">"#);
    for d in hist_dirs {
        let Some(s) = page.series_of(d) else {
            continue;
        };
        let mut rtt = Samples::default();
        for ev in s.rtt_by_ev.values() {
            rtt.seen += ev.seen;
            rtt.values.extend_from_slice(&ev.values);
        }
        if !rtt.values.is_empty() {
            histogram(out, &format!("{}: ACK RTT", d.label), &rtt, "#2554c4");
        }
        if !s.msg.values.is_empty() {
            histogram(
                out,
                &format!("{}: message {}", d.label, s.msg_view.unwrap_or("latency")),
                &s.msg,
                "#2c8a4b",
            );
        }
    }
    out.push_str("</div>");
}

fn ladder(
    out: &mut String,
    title: &str,
    id: &str,
    rows: &[&Dir<'_>],
    pick: impl Fn(&DirectionReport) -> Option<&Summary>,
) {
    let sums: Vec<Option<&Summary>> = rows
        .iter()
        .map(|d| pick(d.report).filter(|s| s.count > 0))
        .collect();
    let lo = sums
        .iter()
        .flatten()
        .map(|s| s.min.max(1))
        .min()
        .unwrap_or(1) as f64;
    let hi = sums
        .iter()
        .flatten()
        .map(|s| s.max.max(1))
        .max()
        .unwrap_or(1) as f64;
    let (lo, hi) = (lo.min(hi / 1.5).max(1.0), hi.max(lo * 1.5));
    let (llo, lhi) = (lo.ln(), hi.ln());
    let x = |v: u64| LABEL_W + PLOT_W * ((v.max(1) as f64).ln() - llo) / (lhi - llo);
    let top = 24.0;
    let bottom = top + ROW_H * rows.len() as f64;
    let width = LABEL_W + PLOT_W + 150.0;
    let mut svg = Svg::new(width, bottom + 22.0, title);
    svg.text(0.0, 14.0, "start", "h", title);
    for t in decades(lo, hi) {
        let tx = x(t as u64);
        svg.line(tx, top, tx, bottom, "#e3e7eb", 1.0);
        svg.text(tx, bottom + 14.0, "middle", "s", &fmt_ns(t as u64));
    }
    let mut ranges = PathData::default();
    let mut marks = PathData::default();
    for (i, (d, s)) in rows.iter().zip(&sums).enumerate() {
        let y = top + ROW_H * i as f64;
        svg.text(LABEL_W - 6.0, y + 14.0, "end", "t", &d.label);
        let Some(s) = s else {
            svg.text(LABEL_W + 4.0, y + 14.0, "start", "s", "no samples");
            continue;
        };
        ranges.hline(x(s.min), x(s.max).max(x(s.min) + 1.0), y + 10.0);
        for v in [s.p90, s.p999] {
            marks.vline(x(v), y + 3.0, y + 17.0);
        }
        let tip = format!(
            "{} {title}: n={} min {} p50 {} p90 {} p99 {} p99.9 {} max {}",
            d.label,
            s.count,
            fmt_ns(s.min),
            fmt_ns(s.p50),
            fmt_ns(s.p90),
            fmt_ns(s.p99),
            fmt_ns(s.p999),
            fmt_ns(s.max)
        );
        let (a, b) = (x(s.p50), x(s.p99));
        svg.rect(a - 1.0, y + 4.0, (b - a) + 2.0, 12.0, "#6f93e0", Some(&tip));
        svg.text(
            LABEL_W + PLOT_W + 8.0,
            y + 14.0,
            "start",
            "s",
            &format!("p50 {} p99 {}", fmt_ns(s.p50), fmt_ns(s.p99)),
        );
    }
    svg.path(&ranges, "#7d8894", "none", None);
    svg.path(&marks, "#1b1f24", "none", None);
    let _ = write!(out, r#"<div id="{id}">{}</div>"#, svg.finish());
}

fn histogram(out: &mut String, title: &str, s: &Samples, color: &str) {
    const W: f64 = 520.0;
    const H: f64 = 150.0;
    const LEFT: f64 = 46.0;
    const TOP: f64 = 24.0;
    let b = Binned::new(&s.values);
    let (v, lo) = (&b.sorted, b.lo as f64);
    let ymax = b.peak() as f64;
    let mut svg = Svg::new(LEFT + W + 16.0, TOP + H + 36.0, title);
    svg.text(
        0.0,
        14.0,
        "start",
        "s",
        &format!(
            "n={}{}, p50 {}, p99 {}, max {}",
            thousands(s.seen),
            if (s.seen as usize) > v.len() {
                format!(" ({} sampled)", thousands(v.len() as u64))
            } else {
                String::new()
            },
            fmt_ns(quantile(v, 0.5)),
            fmt_ns(quantile(v, 0.99)),
            fmt_ns(v.last().copied().unwrap_or(0))
        ),
    );
    let base = TOP + H;
    svg.line(LEFT, base, LEFT + W, base, "#7d8894", 1.0);
    for t in ticks(0.0, ymax, 3) {
        let y = base - H * t / ymax;
        svg.text(LEFT - 4.0, y + 4.0, "end", "s", &format!("{t}"));
    }
    for t in ticks(lo, b.hi(), 5) {
        let x = LEFT + W * (t - lo) / (b.hi() - lo);
        svg.text(x, base + 14.0, "middle", "s", &fmt_ns(t as u64));
    }
    let bw = W / BINS as f64;
    let mut bars = PathData::default();
    for (i, &c) in b.counts.iter().enumerate().filter(|(_, c)| **c > 0) {
        let h = (H * c as f64 / ymax).max(1.0);
        bars.rect(LEFT + bw * i as f64 + 0.5, base - h, bw - 1.0, h);
    }
    svg.path(&bars, "none", color, None);
    let _ = write!(
        out,
        r#"<div class="histogram"><div class="htitle">{}</div>{}"#,
        super::esc(title),
        svg.finish()
    );
    out.push_str("</div>");
}
