//! `metaroce-analyze report --html FILE`: the report as one self-contained
//! page for people who never run the CLI (an incident ticket's
//! attachment). No network, no external script, font or image: inline
//! CSS with the system font stack, charts as inline SVG, and a few lines
//! of inline JavaScript that sort a table by the column clicked.
//!
//! The numbers are those of the merged `Report` that `report --json`
//! prints (the engine's snapshot through the pipeline); the page computes
//! nothing but rankings, sums of its counters and chart geometry. The two
//! things a `Report` does not hold, latency histograms and PSN versus time,
//! are drawn from the verdict stream ([`crate::series`]), like `plot`'s.
//!
//! Layout, worst first: a summary box (the worst finding in one sentence,
//! then the others), the charts (loss and RTT heatmaps per direction and
//! ev, the stall timeline, latency percentiles and histograms, PSN versus
//! time for the worst direction, the host-pair one-way delay and loss
//! matrix with several captures), then the text report's tables.
//!
//! Scale: every chart and table draws at most a fixed number of
//! directions, paths, stalls and points (the `MAX_*` constants of each
//! module), worst first, and says in one line what it left out, so a
//! report over 10,000 connections stays a page of a few thousand elements.
//! Every string that comes from a capture (file names, addresses, NACK
//! codes, read errors) is escaped.

mod heatmap;
mod latency;
mod matrix;
mod psn;
mod stalls;
mod summary;
pub mod svg;
mod tables;

use std::fmt::Write as _;
use std::io;
use std::path::Path;

use crate::columns;
use crate::pipeline::CaptureResult;
use crate::series::{Caps, Collector, DirKey, DirSeries};
use crate::text;
use analyzer::engine::{DirectionReport, PathReport, Report};

/// What the page keeps of the verdict stream: enough for its histograms
/// and PSN chart, bounded per direction.
pub const SERIES_CAPS: Caps = Caps {
    samples: 20_000,
    points: 20_000,
};

/// Escapes text for HTML content and attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `12,345`: counts people read at a glance.
pub fn thousands(v: u64) -> String {
    let s = v.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A connection direction of the report, with its capture and label.
pub struct Dir<'a> {
    /// Index of its capture in the order given.
    pub capture: usize,
    /// As the text report labels it: `[stem] 10.0.0.1:256 -> 10.0.0.2:512`
    /// with several captures, without the stem with one.
    pub label: String,
    pub report: &'a DirectionReport,
}

impl Dir<'_> {
    pub fn key(&self) -> DirKey {
        let d = self.report;
        (d.src, d.src_conn, d.dst, d.dst_conn)
    }

    /// Longest stall (open ones to the end of the capture).
    pub fn longest_stall_ns(&self) -> u64 {
        self.report
            .stalls
            .iter()
            .map(|s| s.duration_ns)
            .max()
            .unwrap_or(0)
    }

    /// Stalls listed or beyond the cap, as the `stalls` column.
    pub fn stall_count(&self) -> u64 {
        columns::stall_count(self.report)
    }

    /// rx lost + tx lost, as the `lost` column.
    pub fn lost(&self) -> u64 {
        columns::lost(self.report)
    }

    /// The ranking key: longest stall, then loss, then retransmissions,
    /// then traffic (all larger is worse).
    fn severity(&self) -> (u64, u64, u64, u64) {
        (
            self.longest_stall_ns(),
            self.lost(),
            self.report.retransmissions,
            self.report.data_packets,
        )
    }
}

/// A path's loss rate as the page colours it: the larger of the receiver
/// side's and the sender side's rate (a capture measures one of them).
pub fn path_loss_rate(p: &PathReport) -> f64 {
    p.receive_loss_rate()
        .unwrap_or(0.0)
        .max(p.send_loss_rate().unwrap_or(0.0))
}

/// Everything the page's parts read.
pub struct Page<'a> {
    pub results: &'a [CaptureResult],
    pub merged: &'a Report,
    pub series: &'a Collector,
    /// Directions that carry DATA (the text report's rows), in report order.
    pub dirs: Vec<Dir<'a>>,
    /// Indexes into `dirs`, worst first.
    pub ranked: Vec<usize>,
    /// Directions without DATA (CTRL or feedback only), not listed.
    pub quiet_dirs: usize,
    pub top: usize,
}

impl<'a> Page<'a> {
    fn new(
        results: &'a [CaptureResult],
        merged: &'a Report,
        series: &'a Collector,
        top: usize,
    ) -> Page<'a> {
        // `merged.directions` lists each capture's directions in capture
        // order (pipeline::merge_reports): walk them alongside the per-
        // capture counts to know each one's capture.
        let mut capture_of = Vec::with_capacity(merged.directions.len());
        for (i, r) in results.iter().enumerate() {
            capture_of.extend(std::iter::repeat_n(i, r.report.directions.len()));
        }
        let many = results.len() > 1;
        let mut dirs = Vec::new();
        let mut quiet_dirs = 0;
        for (j, d) in merged.directions.iter().enumerate() {
            if !text::carries_data(d) {
                quiet_dirs += 1;
                continue;
            }
            let capture = capture_of.get(j).copied().unwrap_or(0);
            let name = text::direction_name(d);
            let label = match results.get(capture) {
                Some(r) if many => format!("[{}] {name}", r.stem),
                _ => name,
            };
            dirs.push(Dir {
                capture,
                label,
                report: d,
            });
        }
        let mut ranked: Vec<usize> = (0..dirs.len()).collect();
        ranked.sort_by(|&a, &b| dirs[b].severity().cmp(&dirs[a].severity()).then(a.cmp(&b)));
        Page {
            results,
            merged,
            series,
            dirs,
            ranked,
            quiet_dirs,
            top,
        }
    }

    /// The directions, worst first.
    pub fn worst(&self) -> impl Iterator<Item = &Dir<'a>> {
        self.ranked.iter().map(|&i| &self.dirs[i])
    }

    /// The verdict-stream series of a direction, if it sent or was acked.
    pub fn series_of(&self, d: &Dir<'_>) -> Option<&'a DirSeries> {
        self.series.capture(d.capture)?.get(&d.key())
    }

    /// A capture's name (its file stem) by index.
    pub fn capture_name(&self, i: u64) -> String {
        text::capture_name(self.results, i)
    }
}

/// "and 9,950 more directions: ..." under a capped chart or table.
pub fn more_line(out: &mut String, text: &str) {
    let _ = write!(out, r#"<p class="more">{}</p>"#, esc(text));
}

/// A section heading with an anchor.
fn section(out: &mut String, id: &str, title: &str) {
    let _ = write!(out, r#"<h2 id="{id}">{}</h2>"#, esc(title));
}

/// Renders the page. `top` is the length of each offender list, as in the
/// text report.
pub fn render(
    results: &[CaptureResult],
    merged: &Report,
    series: &Collector,
    top: usize,
) -> String {
    let page = Page::new(results, merged, series, top);
    let mut body = String::new();
    header(&mut body, &page);
    summary::render(&mut body, &page);

    section(&mut body, "charts", "Charts");
    heatmap::render(&mut body, &page);
    stalls::render(&mut body, &page);
    latency::render(&mut body, &page);
    psn::render(&mut body, &page);
    matrix::render(&mut body, &page);

    tables::render(&mut body, &page);

    let c = &merged.capture;
    let title = format!(
        "MetaRoCE analysis: {} capture{}, {} frames",
        results.len(),
        if results.len() == 1 { "" } else { "s" },
        thousands(c.frames)
    );
    let mut out = String::with_capacity(body.len() + 8192);
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{}</title><style>{CSS}</style></head><body>{body}<script>{JS}</script></body></html>\n",
        esc(&title)
    );
    out
}

/// Writes the page to `path`.
pub fn write_file(path: &Path, html: &str) -> io::Result<()> {
    std::fs::write(path, html)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}

fn header(out: &mut String, page: &Page<'_>) {
    let c = &page.merged.capture;
    let n = page.results.len();
    let _ = write!(
        out,
        "<h1>MetaRoCE analysis</h1><p class=\"sub\">{} capture{}, {} frames ({} MetaRoCE, {} RoCEv2), {}; stall threshold {}</p><ul class=\"captures\">",
        n,
        if n == 1 { "" } else { "s" },
        thousands(c.frames),
        thousands(c.metaroce_packets),
        thousands(c.rocev2_packets),
        esc(&text::fmt_ns(c.duration_ns)),
        esc(&text::fmt_ns(page.merged.engine.stall_threshold_ns)),
    );
    for r in page.results {
        let rc = &r.report.capture;
        let point = match &r.mirror {
            Some(m) => format!("{} [{m}]", r.path.display()),
            None => r.path.display().to_string(),
        };
        let mut line = format!(
            "{point}: {} frames, {}, {} malformed, {} corrupt records",
            thousands(rc.frames),
            text::fmt_ns(rc.duration_ns),
            rc.malformed,
            r.read.corrupt_records
        );
        if rc.time_went_backwards > 0 {
            let _ = write!(
                line,
                ", {} frames earlier than the one before",
                rc.time_went_backwards
            );
        }
        if rc.ip_fragments > 0 {
            let _ = write!(
                line,
                "; IP fragments: {} read, {} datagrams reassembled, {} datagrams ({} fragments) never completed",
                rc.ip_fragments,
                rc.reassembled_datagrams,
                rc.incomplete_datagrams,
                rc.incomplete_fragments
            );
        }
        if let Some(e) = &r.read.io_error {
            let _ = write!(line, "; read error: {e}");
        }
        let _ = write!(out, "<li>{}</li>", esc(&line));
    }
    out.push_str("</ul>");
    if page.quiet_dirs > 0 {
        let total = page.quiet_dirs + page.dirs.len();
        let _ = write!(
            out,
            r#"<p class="more">{} of {} directions carry no DATA (CTRL or feedback only): not listed</p>"#,
            thousands(page.quiet_dirs as u64),
            thousands(total as u64)
        );
    }
}

/// The page's style: system fonts, tabular figures, tables that scroll
/// sideways on a narrow screen, charts that shrink to fit. Tables are laid
/// out only when scrolled near (`content-visibility: auto`): a report over
/// thousands of connections has hundreds of rows below the fold.
const CSS: &str = r#"
:root{--fg:#1b1f24;--dim:#5f6b7a;--line:#d6dbe1;--bad:#b4232a;--warn:#9a6700;--ok:#1a7f37;--bg2:#f5f7f9}
*{box-sizing:border-box}
body{margin:0 auto;max-width:1280px;padding:16px 24px 48px;color:var(--fg);background:#fff;
font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
h1{font-size:22px;margin:4px 0}
h2{font-size:18px;margin:28px 0 8px;padding-bottom:4px;border-bottom:1px solid var(--line)}
h3{font-size:15px;margin:18px 0 6px}
.sub,.more,.note{color:var(--dim)}
.more{font-style:italic;margin:4px 0}
ul.captures{margin:4px 0 8px;padding-left:20px;color:var(--dim)}
.summary{border:2px solid var(--line);border-left-width:8px;border-radius:6px;padding:10px 16px;margin:14px 0;background:var(--bg2)}
.summary.bad{border-color:var(--bad)}.summary.warn{border-color:var(--warn)}.summary.ok{border-color:var(--ok)}
.summary .headline{font-size:18px;font-weight:600;margin:2px 0 6px}
.summary ul{margin:0;padding-left:20px}
.scroll{overflow-x:auto;margin:6px 0;content-visibility:auto;contain-intrinsic-size:auto 400px}
table{border-collapse:collapse;font-variant-numeric:tabular-nums;font-size:13px}
th,td{padding:3px 8px;border-bottom:1px solid var(--line);white-space:nowrap;text-align:right}
th{background:var(--bg2);position:sticky;top:0;cursor:pointer;user-select:none}
th.sorted-asc::after{content:" \25B2"}th.sorted-desc::after{content:" \25BC"}
td.l,th.l{text-align:left}
td.bad{color:var(--bad);font-weight:600}td.warn{color:var(--warn)}td.dim{color:#9aa4af}
tr:hover td{background:#eef3f8}
svg.chart{display:block;max-width:100%;height:auto;margin:6px 0;font-family:inherit}
svg .t{font-size:12px;fill:var(--fg)}svg .s{font-size:11px;fill:var(--dim)}svg .h{font-size:13px;font-weight:600;fill:var(--fg)}
svg .c{font-size:10px;fill:#1b1f24}
.legend{display:flex;flex-wrap:wrap;gap:4px 14px;color:var(--dim);font-size:12px;margin:2px 0}
.legend span::before{content:"";display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:-1px;background:var(--c)}
.grid{display:flex;flex-wrap:wrap;gap:8px 20px}
.histogram{max-width:560px}.htitle{font-weight:600;font-size:13px;overflow-wrap:anywhere}
"#;

/// Sorts a table by the clicked column: numerically by the cells'
/// `data-v` when they have one, else by their text. A second click
/// reverses the order.
const JS: &str = r#"
document.querySelectorAll("table.sortable").forEach(function (table) {
  var heads = table.tHead ? table.tHead.rows[0].cells : [];
  Array.prototype.forEach.call(heads, function (th, col) {
    th.addEventListener("click", function () {
      var desc = !th.classList.contains("sorted-desc");
      Array.prototype.forEach.call(heads, function (h) { h.classList.remove("sorted-asc", "sorted-desc"); });
      th.classList.add(desc ? "sorted-desc" : "sorted-asc");
      var body = table.tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      var key = function (row) {
        var cell = row.cells[col];
        if (!cell) { return ""; }
        var v = cell.getAttribute("data-v");
        return v === null ? cell.textContent : parseFloat(v);
      };
      rows.sort(function (a, b) {
        var x = key(a), y = key(b);
        var c = (typeof x === "number" && typeof y === "number") ? x - y : String(x).localeCompare(String(y));
        return desc ? -c : c;
      });
      rows.forEach(function (r) { body.appendChild(r); });
    });
  });
});
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(
            esc(r#"<img src=x onerror='a'>&"#),
            "&lt;img src=x onerror=&#39;a&#39;&gt;&amp;"
        );
        assert_eq!(
            esc("10.0.0.1:256 -> 10.0.0.2"),
            "10.0.0.1:256 -&gt; 10.0.0.2"
        );
    }

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(9_950_123), "9,950,123");
    }
}
