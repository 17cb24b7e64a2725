//! `metaroce-analyze plot`: PNG and SVG charts (plotters, feature `plot`).
//!
//! For every capture, under `OUT/<capture stem>/`, and for every connection
//! direction that sent DATA:
//!
//! - `rtt_paths_<direction>.{png,svg}`: one ACK-RTT histogram per path
//!   (ev), small multiples, with count, p50 and p99 in each title;
//! - `msg_latency_<direction>.{png,svg}`: the message-latency histogram of
//!   the direction (sender view: completion by cumulative ack; receiver
//!   captures: delivery);
//! - `psn_time_<direction>.{png,svg}`: PSN versus capture time, one colour
//!   per ev (tcptrace-style), retransmissions drawn as crosses. The PSN is
//!   drawn relative to the direction's first DATA, in serial arithmetic
//!   across the 2^32 wrap, and the axis names that first PSN.
//!
//! `<direction>` is the direction as the text report writes it, with
//! characters that file names avoid replaced: `10.0.0.1:256 ->
//! 10.0.0.2:512` becomes `10.0.0.1-256_to_10.0.0.2-512`.
//!
//! Values come from the engine's per-packet verdicts, collected by
//! [`crate::series`]: each series keeps at most [`MAX_SAMPLES`] values (a
//! uniform reservoir sample beyond that) and each PSN chart at most
//! [`MAX_POINTS`] points (every k-th packet, k doubling as needed).
//!
//! Text: plotters' `ttf` feature needs fontconfig and system fonts; this
//! build uses its `ab_glyph` feature with DejaVu Sans bundled by the
//! `dejavu` crate, so PNGs have labels on any machine. SVGs name the font
//! (`sans-serif`) and let the viewer draw it.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Once;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::pipeline::Sink;
use crate::series::{BINS, Binned, Caps, Collector, DirKey, Points, Samples, dir_name, quantile};
use crate::text::fmt_ns;
use analyzer::engine::{MsgDone, Observation, Report, Verdict};

/// Most samples kept per histogram series.
pub const MAX_SAMPLES: usize = 100_000;
/// Most points per PSN-versus-time chart.
pub const MAX_POINTS: usize = 200_000;
/// Most paths drawn per direction (the rest are counted in the title).
const MAX_PATHS: usize = 16;

fn file_name(k: &DirKey) -> String {
    format!("{}-{}_to_{}-{}", k.0, k.1, k.2, k.3).replace(':', "_")
}

/// The plot sink: collects each capture's series and draws them when the
/// capture ends.
pub struct Plotter {
    out: PathBuf,
    series: Collector,
    /// Per capture: its output folder.
    folders: Vec<PathBuf>,
    files: Vec<PathBuf>,
}

static FONT: Once = Once::new();

/// Registers the bundled font for bitmap text (once per process).
pub fn register_font() {
    FONT.call_once(|| {
        // A bad font only costs the labels of the PNGs.
        let _ = plotters::style::register_font(
            "sans-serif",
            FontStyle::Normal,
            dejavu::sans::regular(),
        );
    });
}

impl Plotter {
    pub fn new(out: PathBuf) -> Plotter {
        register_font();
        Plotter {
            out,
            series: Collector::new(Caps {
                samples: MAX_SAMPLES,
                points: MAX_POINTS,
            }),
            folders: Vec::new(),
            files: Vec::new(),
        }
    }

    /// Files written so far.
    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }
}

impl Sink for Plotter {
    fn begin_capture(&mut self, index: usize, path: &Path, stem: &str) {
        while self.folders.len() <= index {
            self.folders.push(PathBuf::new());
        }
        self.folders[index] = self.out.join(stem);
        self.series.begin_capture(index, path, stem);
    }

    fn packet(&mut self, capture: usize, obs: &Observation, v: &Verdict, done: &[MsgDone]) {
        self.series.packet(capture, obs, v, done);
    }

    fn end_capture(&mut self, index: usize, _report: &Report) -> io::Result<()> {
        let Some(out) = self.folders.get(index).cloned() else {
            return Ok(());
        };
        let dirs = self.series.take(index);
        std::fs::create_dir_all(&out)?;
        for (key, d) in &dirs {
            if d.psn.pts.is_empty() {
                continue;
            }
            let name = file_name(key);
            for ext in ["png", "svg"] {
                let path = out.join(format!("psn_time_{name}.{ext}"));
                draw(&path, (1200, 700), &Chart::Psn(key, &d.psn))?;
                self.files.push(path);
                if !d.rtt_by_ev.is_empty() {
                    let path = out.join(format!("rtt_paths_{name}.{ext}"));
                    let n = d.rtt_by_ev.len().min(MAX_PATHS);
                    let cols = (n as f64).sqrt().ceil().max(1.0) as u32;
                    let rows = (n as u32).div_ceil(cols);
                    let size = (360 * cols + 40, 260 * rows + 60);
                    draw(&path, size, &Chart::Rtt(key, &d.rtt_by_ev))?;
                    self.files.push(path);
                }
                if !d.msg.values.is_empty() {
                    let path = out.join(format!("msg_latency_{name}.{ext}"));
                    let title = format!(
                        "{}: message {}",
                        dir_name(key),
                        d.msg_view.unwrap_or("latency")
                    );
                    draw(&path, (900, 500), &Chart::Msg(&title, &d.msg))?;
                    self.files.push(path);
                }
            }
        }
        Ok(())
    }
}

type DrawResult = Result<(), Box<dyn std::error::Error>>;

/// What to draw.
enum Chart<'a> {
    Psn(&'a DirKey, &'a Points),
    Rtt(&'a DirKey, &'a BTreeMap<u16, Samples>),
    Msg(&'a str, &'a Samples),
}

fn render<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, chart: &Chart<'_>) -> DrawResult
where
    DB::ErrorType: 'static,
{
    area.fill(&WHITE)?;
    match chart {
        Chart::Psn(key, points) => psn_chart(area, key, points)?,
        Chart::Rtt(key, by_ev) => rtt_grid(area, key, by_ev)?,
        Chart::Msg(title, s) => histogram(area, title, s, RGBColor(40, 100, 180))?,
    }
    area.present()?;
    Ok(())
}

/// Draws into a PNG or an SVG file, by extension.
fn draw(path: &Path, size: (u32, u32), chart: &Chart<'_>) -> io::Result<()> {
    let res = if path.extension().is_some_and(|e| e == "svg") {
        render(&SVGBackend::new(path, size).into_drawing_area(), chart)
    } else {
        render(&BitMapBackend::new(path, size).into_drawing_area(), chart)
    };
    res.map_err(|e| io::Error::other(format!("{}: {e}", path.display())))
}

/// A distinct colour per ev.
fn ev_color(ev: u16) -> RGBColor {
    const P: [RGBColor; 10] = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(127, 127, 127),
        RGBColor(188, 189, 34),
        RGBColor(23, 190, 207),
    ];
    let c = P[usize::from(ev) % P.len()];
    if (ev as usize / P.len()) % 2 == 1 {
        RGBColor(c.0 / 2, c.1 / 2, c.2 / 2)
    } else {
        c
    }
}

/// A latency histogram: 40 linear bins from the minimum to the p99.9
/// (values beyond go into the last bin), x in microseconds.
fn histogram<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    s: &Samples,
    color: RGBColor,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let b = Binned::new(&s.values);
    let (v, lo, width, counts) = (&b.sorted, b.lo, b.width, &b.counts);
    let ymax = b.peak();
    let caption = format!(
        "{title}  (n={}, p50 {}, p99 {}, max {})",
        s.seen,
        fmt_ns(quantile(v, 0.5)),
        fmt_ns(quantile(v, 0.99)),
        fmt_ns(v.last().copied().unwrap_or(0)),
    );
    let us = |ns: f64| ns / 1000.0;
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 15))
        .margin(8)
        .x_label_area_size(34)
        .y_label_area_size(48)
        .build_cartesian_2d(
            us(lo as f64)..us(lo as f64 + width * BINS as f64),
            0u64..ymax + ymax / 10 + 1,
        )?;
    chart
        .configure_mesh()
        .x_desc("latency (us)")
        .y_desc("count")
        .x_labels(6)
        .y_labels(5)
        .label_style(("sans-serif", 12))
        .draw()?;
    chart.draw_series(
        counts
            .iter()
            .enumerate()
            .filter(|(_, c)| **c > 0)
            .map(|(i, &c)| {
                let x0 = us(lo as f64 + width * i as f64);
                let x1 = us(lo as f64 + width * (i + 1) as f64);
                Rectangle::new([(x0, 0), (x1, c)], color.filled())
            }),
    )?;
    Ok(())
}

fn rtt_grid<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    key: &DirKey,
    by_ev: &BTreeMap<u16, Samples>,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let n = by_ev.len().min(MAX_PATHS);
    let title = if by_ev.len() > MAX_PATHS {
        format!(
            "{}: ACK RTT per path (first {MAX_PATHS} of {} evs)",
            dir_name(key),
            by_ev.len()
        )
    } else {
        format!("{}: ACK RTT per path (ev)", dir_name(key))
    };
    let area = area.titled(&title, ("sans-serif", 20))?;
    let cols = (n as f64).sqrt().ceil().max(1.0) as usize;
    let rows = n.div_ceil(cols);
    let cells = area.split_evenly((rows, cols));
    for ((ev, s), cell) in by_ev.iter().take(MAX_PATHS).zip(cells.iter()) {
        histogram(cell, &format!("ev {ev}"), s, ev_color(*ev))?;
    }
    Ok(())
}

fn psn_chart<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    key: &DirKey,
    points: &Points,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let pts = &points.pts;
    let t0 = pts.iter().map(|p| p.ts_ns).min().unwrap_or(0);
    let t1 = pts.iter().map(|p| p.ts_ns).max().unwrap_or(0).max(t0 + 1);
    // PSNs relative to the direction's first (serial arithmetic).
    let first = points.first_psn.unwrap_or(0);
    let rel = |psn: u32| points.relative(psn);
    let p0 = pts.iter().map(|p| rel(p.psn)).min().unwrap_or(0);
    let p1 = pts
        .iter()
        .map(|p| rel(p.psn))
        .max()
        .unwrap_or(0)
        .max(p0 + 1);
    let ms = |t: u64| (t - t0) as f64 / 1e6;
    let retx = pts.iter().filter(|p| p.retransmission).count();
    let thinned = if points.stride > 1 {
        format!(", every {}th first transmission shown", points.stride)
    } else {
        String::new()
    };
    let caption = format!(
        "{}: PSN vs time, colour = ev, x = retransmission ({} DATA, {retx} retx{thinned})",
        dir_name(key),
        points.n
    );
    let mut chart = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..ms(t1) * 1.02, p0..p1 + 1)?;
    chart
        .configure_mesh()
        .x_desc("time since first DATA (ms)")
        .y_desc(format!("PSN - {first} (the first DATA's PSN, mod 2^32)"))
        .label_style(("sans-serif", 13))
        .draw()?;
    let mut evs: Vec<u16> = pts.iter().map(|p| p.ev).collect();
    evs.sort_unstable();
    evs.dedup();
    let size = if pts.len() > 5000 { 1 } else { 3 };
    for ev in evs.iter().copied() {
        let color = ev_color(ev);
        chart
            .draw_series(
                pts.iter()
                    .filter(|p| p.ev == ev && !p.retransmission)
                    .map(|p| Circle::new((ms(p.ts_ns), rel(p.psn)), size, color.filled())),
            )?
            .label(format!("ev {ev}"))
            .legend(move |(x, y)| Circle::new((x, y), 4, color.filled()));
        chart.draw_series(
            pts.iter()
                .filter(|p| p.ev == ev && p.retransmission)
                .map(|p| Cross::new((ms(p.ts_ns), rel(p.psn)), 6, color.stroke_width(2))),
        )?;
    }
    if evs.len() <= 32 {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::MiddleRight)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .label_font(("sans-serif", 12))
            .draw()?;
    }
    Ok(())
}
