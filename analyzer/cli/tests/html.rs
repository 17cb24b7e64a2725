//! `report --html`: the page renders in a real browser (headless Chromium,
//! Debian's `chromium`, installed by scripts/setup.sh) without console
//! errors and not blank, its visible numbers equal `report --json` on the
//! same captures, capture strings are escaped, and a report over 10,000
//! connections stays within the page's caps. A missing Chromium fails the
//! tests: it is part of what they check.
//!
//! How errors are seen: Chromium run with `--enable-logging=stderr --v=0`
//! writes every console message and uncaught exception of the page as a
//! `:CONSOLE` line on stderr. The page writes nothing to the console, so
//! any such line is an error; `broken_pages_are_caught` shows that an
//! uncaught exception and a blank page are both detected.

mod common;

use common::{fixture, two_hosts};

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use metaroce_analyze::text::{fmt_ns, fmt_rate};
use serde_json::Value;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_metaroce-analyze"))
}

/// Runs `report` with `args`; returns stdout. Exit status 0 expected.
fn report(args: &[&Path], extra: &[&str]) -> String {
    let out = bin()
        .arg("report")
        .args(extra)
        .args(args)
        .output()
        .expect("run metaroce-analyze");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

fn chromium() -> &'static str {
    let found = Command::new("chromium")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        found,
        "chromium is not installed: run scripts/setup.sh (Debian's chromium package); the HTML report is tested in a real browser"
    );
    "chromium"
}

/// What the browser made of a page.
struct Rendered {
    /// Console messages and uncaught exceptions.
    console: Vec<String>,
    /// The screenshot's pixels, RGB.
    rgb: Vec<[u8; 3]>,
}

/// Renders `page` in headless Chromium at `width` x `height` and takes a
/// screenshot.
fn render(page: &Path, width: u32, height: u32) -> Rendered {
    let dir = tempfile::tempdir().unwrap();
    let shot = dir.path().join("shot.png");
    let mut child = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--enable-logging=stderr",
            "--v=0",
            "--hide-scrollbars",
            &format!("--user-data-dir={}", dir.path().join("profile").display()),
            &format!("--window-size={width},{height}"),
            &format!("--screenshot={}", shot.display()),
        ])
        .arg(format!("file://{}", page.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start chromium");
    let mut stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!(
                "chromium did not finish rendering {} in 120 s",
                page.display()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let log = reader.join().unwrap();
    assert!(status.success(), "chromium failed: {status}\n{log}");
    let console = log
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(str::to_string)
        .collect();
    let file = std::fs::File::open(&shot).unwrap_or_else(|e| panic!("no screenshot: {e}\n{log}"));
    let mut decoder = png::Decoder::new(file);
    decoder.set_transformations(png::Transformations::normalize_to_color8());
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!((info.width, info.height), (width, height));
    let channels = info.color_type.samples();
    let rgb = buf[..info.buffer_size()]
        .chunks(channels)
        .map(|p| {
            if channels >= 3 {
                [p[0], p[1], p[2]]
            } else {
                [p[0], p[0], p[0]]
            }
        })
        .collect();
    Rendered { console, rgb }
}

impl Rendered {
    /// Share of pixels that are not the white background.
    fn ink(&self) -> f64 {
        let n = self
            .rgb
            .iter()
            .filter(|p| p.iter().any(|&c| c < 245))
            .count();
        n as f64 / self.rgb.len() as f64
    }

    /// Pixels of a strong red (stall bars, lossy cells, the summary's
    /// border).
    fn red(&self) -> usize {
        self.rgb
            .iter()
            .filter(|p| p[0] > 150 && p[1] < 90 && p[2] < 100)
            .count()
    }
}

/// The visible text of an HTML fragment: tags dropped, entities decoded.
fn visible(html: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// The rows of the table `id`: its header cells and every body row's cells,
/// as the reader sees them.
fn table(html: &str, id: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let start = html
        .find(&format!(r#"<table class="sortable" id="{id}">"#))
        .unwrap_or_else(|| panic!("no table {id}"));
    let end = start + html[start..].find("</table>").unwrap();
    let t = &html[start..end];
    let cells = |row: &str, tag: &str| -> Vec<String> {
        row.split(&format!("<{tag}"))
            .skip(1)
            // `<th` also begins `<thead>`.
            .filter(|c| c.starts_with('>') || c.starts_with(' '))
            .map(|c| {
                let body = &c[c.find('>').unwrap() + 1..];
                visible(&body[..body.find(&format!("</{tag}>")).unwrap()])
            })
            .collect()
    };
    let head = &t[..t.find("</thead>").unwrap()];
    let headers = cells(head, "th");
    let body = &t[t.find("<tbody>").unwrap()..];
    let rows = body.split("<tr>").skip(1).map(|r| cells(r, "td")).collect();
    (headers, rows)
}

fn col(headers: &[String], name: &str) -> usize {
    headers
        .iter()
        .position(|h| h == name)
        .unwrap_or_else(|| panic!("no column {name} in {headers:?}"))
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

const STEMS: [&str; 2] = ["multipath_loss_sender", "multipath_loss_receiver"];

/// The two-host scenario's page and JSON report, made once for the tests
/// below, one per part of the page.
struct TwoHostPage {
    page: PathBuf,
    html: String,
    json: Value,
}

fn two_host_page() -> &'static TwoHostPage {
    static PAGE: OnceLock<TwoHostPage> = OnceLock::new();
    PAGE.get_or_init(|| {
        let caps = two_hosts();
        let caps: Vec<&Path> = caps.iter().map(PathBuf::as_path).collect();
        // Kept for the browser test (a static is never dropped: no
        // temporary folder to leak), under cargo's folder for test files.
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("html-two-host");
        std::fs::create_dir_all(&dir).unwrap();
        let page = dir.join("report.html");
        report(&caps, &["--html", page.to_str().unwrap()]);
        let html = std::fs::read_to_string(&page).unwrap();
        let json: Value = serde_json::from_str(&report(&caps, &["--json"])).unwrap();
        TwoHostPage { page, html, json }
    })
}

#[test]
fn two_host_page_is_self_contained() {
    let html = &two_host_page().html;
    for needle in [
        "http:", "https:", "src=", "href=", "url(", "@import", "<link", "<img",
    ] {
        assert!(!html.contains(needle), "the page refers to {needle}");
    }
}

/// In the browser: no console error, not blank, the red of the stall and
/// the lossy paths is on screen.
#[test]
fn two_host_page_renders() {
    let page = &two_host_page().page;
    let shot = render(page, 1280, 1600);
    assert!(shot.console.is_empty(), "console: {:#?}", shot.console);
    assert!(
        shot.ink() > 0.05,
        "the page looks blank: {:.3} of pixels inked",
        shot.ink()
    );
    assert!(shot.red() > 500, "no red on screen ({} pixels)", shot.red());
}

/// Directions, their ACK RTT percentiles and their paths: the numbers of
/// the JSON report. The JSON lists each capture's directions in capture
/// order; the i-th occurrence of a direction belongs to the i-th capture
/// that saw it.
#[test]
fn two_host_page_directions_equal_the_json_report() {
    let TwoHostPage { html, json, .. } = two_host_page();
    let (h, rows) = table(html, "directions");
    let (lh, lrows) = table(html, "latency");
    let (ph, prows) = table(html, "paths");
    let mut seen: std::collections::HashMap<String, usize> = Default::default();
    let mut checked = 0;
    for d in json["directions"].as_array().unwrap() {
        let name = format!(
            "{}:{} -> {}:{}",
            d["src"].as_str().unwrap(),
            d["src_conn"],
            d["dst"].as_str().unwrap(),
            d["dst_conn"]
        );
        let nth = seen.entry(name.clone()).or_default();
        let label = format!("[{}] {name}", STEMS[*nth]);
        *nth += 1;
        if u(&d["data_packets"]) == 0
            && u(&d["probes"]) == 0
            && d["stalls"].as_array().unwrap().is_empty()
        {
            assert!(
                !rows.iter().any(|r| r[0] == label),
                "{label} has no DATA yet a row"
            );
            continue;
        }
        let row = rows
            .iter()
            .find(|r| r[0] == label)
            .unwrap_or_else(|| panic!("no row for {label}"));
        assert_eq!(
            row[col(&h, "data")],
            d["data_packets"].to_string(),
            "{label}"
        );
        assert_eq!(
            row[col(&h, "retx")],
            d["retransmissions"].to_string(),
            "{label}"
        );
        assert_eq!(row[col(&h, "nacks")], d["nacks"].to_string(), "{label}");
        let paths = d["paths"].as_array().unwrap();
        let lost = u(&d["path_loss"]) + paths.iter().map(|p| u(&p["lost_inferred"])).sum::<u64>();
        assert_eq!(row[col(&h, "lost")], lost.to_string(), "{label}");
        let stalls = d["stalls"].as_array().unwrap().len() as u64 + u(&d["stalls_dropped"]);
        assert_eq!(row[col(&h, "stalls")], stalls.to_string(), "{label}");

        // ACK RTT percentiles.
        let rtt = &d["ack_rtt_ns"];
        let lrow = lrows
            .iter()
            .find(|r| r[0] == label && r[1] == "ack RTT")
            .unwrap_or_else(|| panic!("no ack RTT row for {label}"));
        assert_eq!(lrow[col(&lh, "count")], rtt["count"].to_string());
        assert_eq!(lrow[col(&lh, "p50")], fmt_ns(u(&rtt["p50"])), "{label}");
        assert_eq!(lrow[col(&lh, "p99")], fmt_ns(u(&rtt["p99"])), "{label}");

        // Per path: loss rates and RTT.
        for p in paths.iter().filter(|p| u(&p["data_packets"]) > 0) {
            let ev = p["ev"].to_string();
            let prow = prows
                .iter()
                .find(|r| r[0] == label && r[1] == ev)
                .unwrap_or_else(|| panic!("no path row for {label} ev {ev}"));
            let rate = |part: u64, whole: u64| (whole > 0).then(|| part as f64 / whole as f64);
            let rx = rate(u(&p["lost"]), u(&p["packets"]) + u(&p["lost"]));
            let tx = rate(u(&p["lost_inferred"]), u(&p["data_packets"]));
            assert_eq!(prow[col(&ph, "rx loss%")], fmt_rate(rx), "{label} ev {ev}");
            assert_eq!(prow[col(&ph, "tx loss%")], fmt_rate(tx), "{label} ev {ev}");
            assert_eq!(prow[col(&ph, "retx")], p["retransmissions"].to_string());
            assert_eq!(
                prow[col(&ph, "rtt p99")],
                fmt_ns(u(&p["ack_rtt_ns"]["p99"]))
            );
            checked += 1;
        }
    }
    assert!(checked >= 8, "only {checked} paths compared");
}

/// Stalls: one row per stall, the longest in the summary's headline.
#[test]
fn two_host_page_stalls_and_headline() {
    let TwoHostPage { html, json, .. } = two_host_page();
    let stalls: Vec<&Value> = json["directions"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|d| d["stalls"].as_array().unwrap())
        .collect();
    assert!(!stalls.is_empty(), "the scenario has a stall");
    let (sh, srows) = table(html, "stalls");
    assert_eq!(srows.len(), stalls.len());
    let longest = stalls.iter().map(|s| u(&s["duration_ns"])).max().unwrap();
    assert!(
        srows
            .iter()
            .any(|r| r[col(&sh, "duration")] == fmt_ns(longest))
    );
    let summary = &html[html.find(r#"id="summary""#).unwrap()..];
    let headline = visible(&summary[..summary.find("</p>").unwrap()]);
    let expected = format!(
        "{} stall{}, longest {} on ",
        stalls.len(),
        if stalls.len() == 1 { "" } else { "s" },
        fmt_ns(longest)
    );
    assert!(
        headline.contains(&expected),
        "headline {headline:?} lacks {expected:?}"
    );
}

/// Between captures: matched and lost per path, the host matrix, and the
/// stall timeline's shift of the receiver onto the sender's clock.
#[test]
fn two_host_page_between_captures() {
    let TwoHostPage { html, json, .. } = two_host_page();
    let (bh, brows) = table(html, "between");
    let bpaths = json["between_captures"][0]["paths"].as_array().unwrap();
    assert_eq!(brows.len(), bpaths.len());
    for (row, p) in brows.iter().zip(bpaths) {
        assert_eq!(row[col(&bh, "matched")], p["matched"].to_string());
        assert_eq!(row[col(&bh, "lost")], p["lost_between"].to_string());
        assert_eq!(
            row[col(&bh, "owd p50")],
            fmt_ns(u(&p["one_way_delay_ns"]["p50"]))
        );
    }
    assert!(html.contains(r#"id="host-matrix-chart""#));
    // The stall timeline puts the receiver on the sender's clock, shifted
    // by the estimated offset.
    let offset = json["between_captures"][0]["clock_offset_ns"]
        .as_i64()
        .unwrap();
    let shift = format!(
        "multipath_loss_receiver {}",
        metaroce_analyze::text::signed_ns(-offset)
    );
    assert!(
        visible(html).contains(&shift),
        "no {shift:?} in the timeline's caption"
    );
}

#[test]
fn two_host_page_has_every_chart() {
    let html = &two_host_page().html;
    for id in [
        "heatmap-loss",
        "heatmap-rtt",
        "stall-chart",
        "latency-rtt",
        "psn-chart",
    ] {
        assert!(html.contains(&format!(r#"id="{id}""#)), "no {id}");
    }
}

#[test]
fn broken_pages_are_caught() {
    let caps = two_hosts();
    let caps: Vec<&Path> = caps.iter().map(PathBuf::as_path).collect();
    let tmp = tempfile::tempdir().unwrap();
    let page = tmp.path().join("report.html");
    report(&caps, &["--html", page.to_str().unwrap()]);
    let html = std::fs::read_to_string(&page).unwrap();

    // An uncaught exception in the page's script is seen.
    let broken = tmp.path().join("broken.html");
    std::fs::write(
        &broken,
        html.replacen("<script>", "<script>no_such_function();", 1),
    )
    .unwrap();
    let shot = render(&broken, 800, 600);
    assert!(
        shot.console.iter().any(|l| l.contains("no_such_function")),
        "the exception went unseen: {:#?}",
        shot.console
    );

    // A page that draws nothing is seen as blank.
    let blank = tmp.path().join("blank.html");
    std::fs::write(&blank, "<!DOCTYPE html><html><body></body></html>").unwrap();
    let shot = render(&blank, 800, 600);
    assert!(shot.console.is_empty());
    assert!(shot.ink() < 0.01, "a blank page inked {:.3}", shot.ink());
}

/// `24.0us` as nanoseconds.
fn parse_ns(s: &str) -> f64 {
    let split = s.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(s.len());
    let (v, unit) = s.split_at(split);
    let scale = match unit {
        "ns" => 1.0,
        "us" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => panic!("not a duration: {s}"),
    };
    v.parse::<f64>().unwrap() * scale
}

#[test]
fn clicking_a_header_sorts_its_table_by_value() {
    let caps = two_hosts();
    let caps: Vec<&Path> = caps.iter().map(PathBuf::as_path).collect();
    let tmp = tempfile::tempdir().unwrap();
    let page = tmp.path().join("report.html");
    report(&caps, &["--html", page.to_str().unwrap()]);
    let html = std::fs::read_to_string(&page).unwrap();
    // Click the latency table's "max" header, then print the column.
    // Sorted as text, "5.03ms" would come between "38.0us" and "60.0us".
    let click = r#"<script>
var t = document.getElementById("latency");
var th = Array.prototype.find.call(t.tHead.rows[0].cells, function (c) { return c.textContent === "max"; });
th.click();
console.log("sorted " + Array.prototype.map.call(t.tBodies[0].rows, function (r) { return r.cells[th.cellIndex].textContent; }).join("|"));
</script></body>"#;
    let probe = tmp.path().join("probe.html");
    std::fs::write(&probe, html.replace("</body>", click)).unwrap();
    let shot = render(&probe, 800, 600);
    let line = shot
        .console
        .iter()
        .find_map(|l| l.split("\"sorted ").nth(1)?.split('"').next())
        .unwrap_or_else(|| panic!("no sorted column: {:#?}", shot.console));
    let values: Vec<f64> = line.split('|').map(parse_ns).collect();
    let (_, rows) = table(&html, "latency");
    assert_eq!(values.len(), rows.len());
    assert!(
        values.windows(2).all(|w| w[0] >= w[1]),
        "not sorted by value, largest first: {line}"
    );
}

#[test]
fn capture_names_are_escaped() {
    let tmp = tempfile::tempdir().unwrap();
    let evil = tmp.path().join("<img src=x onerror=alert(1)>&'\".pcap");
    std::fs::copy(fixture("multipath_loss_sender.pcap"), &evil).unwrap();
    let other = tmp.path().join("receiver.pcap");
    std::fs::copy(fixture("multipath_loss_receiver.pcap"), &other).unwrap();
    let page = tmp.path().join("report.html");
    report(&[&evil, &other], &["--html", page.to_str().unwrap()]);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        !html.contains("<img"),
        "a capture name was written as markup"
    );
    assert!(html.contains("[&lt;img src=x onerror=alert(1)&gt;&amp;&#39;&quot;] 10.0.0.1:256"));
    let shot = render(&page, 1000, 800);
    assert!(shot.console.is_empty(), "console: {:#?}", shot.console);
}

/// Counts the occurrences of each needle.
fn count(html: &str, needle: &str) -> usize {
    html.matches(needle).count()
}

#[test]
fn ten_thousand_connections_stay_within_the_caps() {
    let tmp = tempfile::tempdir().unwrap();
    let capture = tmp.path().join("bulk.pcap");
    fixtures_generator::bulk::write_bulk(
        &capture,
        &fixtures_generator::bulk::BulkConfig {
            packets: 150_000,
            connections: 10_000,
            loss_per_mille: 20,
            payload_len: 64,
        },
    )
    .unwrap();
    let page = tmp.path().join("report.html");
    let json: Value = serde_json::from_str(&report(
        &[&capture],
        // Two directions per connection: above the default flow cap.
        &[
            "--max-flows",
            "50000",
            "--json",
            "--html",
            page.to_str().unwrap(),
        ],
    ))
    .unwrap();
    let html = std::fs::read_to_string(&page).unwrap();
    let data_dirs = json["directions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| u(&d["data_packets"]) > 0)
        .count();
    assert!(data_dirs >= 10_000, "{data_dirs} directions with DATA");

    let svg_elements: usize = ["<rect", "<line", "<text", "<path", "<title", "<circle"]
        .iter()
        .map(|n| count(&html, n))
        .sum();
    let rows = count(&html, "<tr>");
    assert!(svg_elements < 10_000, "{svg_elements} SVG elements");
    assert!(rows < 1_000, "{rows} table rows");
    assert!(html.len() < 3 << 20, "{} bytes", html.len());
    let (_, listed) = table(&html, "directions");
    let more = format!(
        "and {} more directions",
        metaroce_analyze::html::thousands((data_dirs - listed.len()) as u64)
    );
    assert!(html.contains(&more), "no line saying {more:?}");

    let shot = render(&page, 1280, 1000);
    assert!(shot.console.is_empty(), "console: {:#?}", shot.console);
    assert!(shot.ink() > 0.05, "blank: {:.3}", shot.ink());
}
