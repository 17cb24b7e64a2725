//! A small SVG writer for the page's charts: elements appended to a
//! string, every text escaped, coordinates rounded to a tenth of a pixel
//! (the page stays small), and a count of the elements written so the
//! charts can be checked against their caps.

use std::fmt::Write as _;

use super::esc;

/// An SVG element under construction.
pub struct Svg {
    out: String,
    elements: usize,
}

/// A number with at most one decimal, no trailing `.0`.
fn n(v: f64) -> String {
    let r = (v * 10.0).round() / 10.0;
    if r == r.trunc() {
        format!("{}", r as i64)
    } else {
        format!("{r:.1}")
    }
}

impl Svg {
    /// A chart `width` x `height` pixels wide, scaled to its container;
    /// `label` is what a screen reader says.
    pub fn new(width: f64, height: f64, label: &str) -> Svg {
        let mut out = String::new();
        let _ = write!(
            out,
            r#"<svg class="chart" viewBox="0 0 {} {}" width="{}" height="{}" role="img" aria-label="{}">"#,
            n(width),
            n(height),
            n(width),
            n(height),
            esc(label)
        );
        Svg { out, elements: 1 }
    }

    /// A filled rectangle, with a tooltip when `title` is given.
    pub fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, fill: &str, title: Option<&str>) {
        let _ = write!(
            self.out,
            r#"<rect x="{}" y="{}" width="{}" height="{}" fill="{fill}""#,
            n(x),
            n(y),
            n(w.max(0.0)),
            n(h.max(0.0))
        );
        self.elements += 1;
        match title {
            Some(t) => {
                let _ = write!(self.out, "><title>{}</title></rect>", esc(t));
                self.elements += 1;
            }
            None => self.out.push_str("/>"),
        }
    }

    /// A straight line.
    pub fn line(&mut self, x1: f64, y1: f64, x2: f64, y2: f64, stroke: &str, width: f64) {
        let _ = write!(
            self.out,
            r#"<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="{stroke}" stroke-width="{}"/>"#,
            n(x1),
            n(y1),
            n(x2),
            n(y2),
            n(width)
        );
        self.elements += 1;
    }

    /// Text anchored at `anchor` ("start", "middle" or "end"); `class`
    /// picks its style in the page's CSS.
    pub fn text(&mut self, x: f64, y: f64, anchor: &str, class: &str, s: &str) {
        let _ = write!(
            self.out,
            r#"<text x="{}" y="{}" text-anchor="{anchor}" class="{class}">{}</text>"#,
            n(x),
            n(y),
            esc(s)
        );
        self.elements += 1;
    }

    /// Text turned 90 degrees counter-clockwise (a y-axis title).
    pub fn vtext(&mut self, x: f64, y: f64, class: &str, s: &str) {
        let _ = write!(
            self.out,
            r#"<text transform="translate({},{}) rotate(-90)" text-anchor="middle" class="{class}">{}</text>"#,
            n(x),
            n(y),
            esc(s)
        );
        self.elements += 1;
    }

    /// A path from a `Path` builder: many marks in one element.
    pub fn path(&mut self, d: &PathData, stroke: &str, fill: &str, title: Option<&str>) {
        if d.0.is_empty() {
            return;
        }
        let _ = write!(
            self.out,
            r#"<path d="{}" stroke="{stroke}" fill="{fill}""#,
            d.0
        );
        self.elements += 1;
        match title {
            Some(t) => {
                let _ = write!(self.out, "><title>{}</title></path>", esc(t));
                self.elements += 1;
            }
            None => self.out.push_str("/>"),
        }
    }

    /// Elements written so far.
    pub fn elements(&self) -> usize {
        self.elements
    }

    /// The finished `<svg>` element.
    pub fn finish(mut self) -> String {
        self.out.push_str("</svg>");
        self.out
    }
}

/// The `d` attribute of a path, built mark by mark.
#[derive(Default)]
pub struct PathData(String);

impl PathData {
    /// A filled square of side `s` centred on (x, y).
    pub fn square(&mut self, x: f64, y: f64, s: f64) {
        let _ = write!(
            self.0,
            "M{} {}h{}v{}h-{}z",
            n(x - s / 2.0),
            n(y - s / 2.0),
            n(s),
            n(s),
            n(s)
        );
    }

    /// An x of half-width `r` centred on (x, y) (stroked).
    pub fn cross(&mut self, x: f64, y: f64, r: f64) {
        let _ = write!(
            self.0,
            "M{} {}l{} {}M{} {}l{} -{}",
            n(x - r),
            n(y - r),
            n(2.0 * r),
            n(2.0 * r),
            n(x - r),
            n(y + r),
            n(2.0 * r),
            n(2.0 * r)
        );
    }

    /// A rectangle (filled).
    pub fn rect(&mut self, x: f64, y: f64, w: f64, h: f64) {
        let _ = write!(self.0, "M{} {}h{}v{}h-{}z", n(x), n(y), n(w), n(h), n(w));
    }

    /// A vertical segment from y1 to y2 at x (stroked).
    pub fn vline(&mut self, x: f64, y1: f64, y2: f64) {
        let _ = write!(self.0, "M{} {}V{}", n(x), n(y1), n(y2));
    }

    /// A horizontal segment from x1 to x2 at y (stroked).
    pub fn hline(&mut self, x1: f64, x2: f64, y: f64) {
        let _ = write!(self.0, "M{} {}H{}", n(x1), n(y), n(x2));
    }
}

/// "Nice" tick values covering `lo..=hi`: about `count` steps of 1, 2 or 5
/// times a power of ten.
pub fn ticks(lo: f64, hi: f64, count: usize) -> Vec<f64> {
    if hi <= lo || !lo.is_finite() || !hi.is_finite() {
        return vec![lo];
    }
    let raw = (hi - lo) / count.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let mut v = (lo / step).ceil() * step;
    let mut out = Vec::new();
    while v <= hi + step * 1e-9 && out.len() < 50 {
        out.push(v);
        v += step;
    }
    out
}

/// Powers of ten covering `lo..=hi` (both positive), for a log axis.
pub fn decades(lo: f64, hi: f64) -> Vec<f64> {
    let mut out = Vec::new();
    let mut v = 10f64.powf(lo.max(1.0).log10().floor());
    while v <= hi * 1.000_001 && out.len() < 24 {
        if v >= lo * 0.999_999 {
            out.push(v);
        }
        v *= 10.0;
    }
    out
}

/// A colour from white (`t` = 0) to `to` (`t` = 1), as `rgb(...)`.
pub fn shade(to: (u8, u8, u8), t: f64) -> String {
    let t = t.clamp(0.0, 1.0);
    let mix = |c: u8| (255.0 - (255.0 - f64::from(c)) * t).round() as u8;
    format!("rgb({},{},{})", mix(to.0), mix(to.1), mix(to.2))
}

/// A distinct colour per ev (the palette of `plot`'s PSN charts).
pub fn ev_color(ev: u16) -> String {
    const P: [(u8, u8, u8); 10] = [
        (31, 119, 180),
        (255, 127, 14),
        (44, 160, 44),
        (214, 39, 40),
        (148, 103, 189),
        (140, 86, 75),
        (227, 119, 194),
        (127, 127, 127),
        (188, 189, 34),
        (23, 190, 207),
    ];
    let c = P[usize::from(ev) % P.len()];
    let c = if (usize::from(ev) / P.len()) % 2 == 1 {
        (c.0 / 2, c.1 / 2, c.2 / 2)
    } else {
        c
    };
    format!("rgb({},{},{})", c.0, c.1, c.2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        assert_eq!(ticks(0.0, 10.0, 5), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(ticks(0.0, 1.0, 4), vec![0.0, 0.5, 1.0]);
        assert_eq!(ticks(3.0, 3.0, 4), vec![3.0]);
        assert_eq!(decades(20.0, 5_000.0), vec![100.0, 1000.0]);
    }

    #[test]
    fn text_is_escaped_and_counted() {
        let mut s = Svg::new(10.0, 10.0, "a<b");
        s.text(1.0, 2.0, "start", "t", "<script>&");
        s.rect(0.0, 0.0, 1.0, 1.0, "red", Some("\"x\""));
        assert_eq!(s.elements(), 4);
        let out = s.finish();
        assert!(out.contains("&lt;script&gt;&amp;"));
        assert!(out.contains("aria-label=\"a&lt;b\""));
        assert!(out.contains("<title>&quot;x&quot;</title>"));
        assert!(!out.contains("<script>"));
    }
}
