//! `bench html`: the cost of `report --html` pages in a browser: size, SVG
//! elements, table rows, and the time headless Chromium takes to load and
//! render each (median over the rounds; a probe script logs the time from
//! navigation start to the first frame after `load`), for the two-host
//! fixture and a bulk capture of many connections.

use std::process::Command;
use std::time::Instant;

use anyhow::{Context, bail};
use clap::Args;

use crate::figures::Figure;
use crate::proc::{TempDir, Workspace, require, run_quiet};
use crate::stats::median;

#[derive(Args, Debug)]
pub struct HtmlArgs {
    /// Connections of the bulk capture.
    #[arg(default_value_t = 10_000)]
    connections: u64,
    /// Frames of the bulk capture.
    #[arg(default_value_t = 150_000)]
    frames: u64,
    #[arg(long, default_value_t = 5)]
    rounds: usize,
}

const PROBE: &str = r#"<script>addEventListener("load",function(){requestAnimationFrame(function(){setTimeout(function(){console.log("render-ms "+performance.now().toFixed(1))},0)})})</script>"#;

pub fn run(ws: &Workspace, a: &HtmlArgs, command: &str) -> anyhow::Result<Vec<Figure>> {
    require("chromium", "html")?;
    ws.build(&["-p", "fixtures-generator"])?;
    ws.build(&["-p", "metaroce-analyze", "--no-default-features"])?;
    let analyze = ws.release("metaroce-analyze");
    let work = TempDir::new(None, "html")?;
    let w = work.path();
    let gen_dir = ws.root.join("fixtures/generated");
    run_quiet(
        Command::new(&analyze)
            .arg("report")
            .arg("--html")
            .arg(w.join("two-host.html"))
            .arg(gen_dir.join("multipath_loss_sender.pcap"))
            .arg(gen_dir.join("multipath_loss_receiver.pcap")),
    )?;
    run_quiet(
        Command::new(ws.release("fixtures-generator"))
            .arg("bulk")
            .arg(w.join("bulk.pcap"))
            .args([
                a.frames.to_string(),
                a.connections.to_string(),
                "20".into(),
                "64".into(),
            ]),
    )?;
    run_quiet(
        Command::new(&analyze)
            .arg("report")
            .arg("--max-flows")
            .arg((a.connections * 4).to_string())
            .arg("--html")
            .arg(w.join("bulk.html"))
            .arg(w.join("bulk.pcap")),
    )?;
    println!(
        "{:<28} {:>10} {:>12} {:>10} {:>12} {:>12}",
        "page", "bytes", "svg-elements", "table-rows", "render-ms", "chromium-s"
    );
    let mut figures = Vec::new();
    for name in ["two-host", "bulk"] {
        let page = std::fs::read_to_string(w.join(format!("{name}.html")))?;
        let probe_page = w.join(format!("{name}.probe.html"));
        std::fs::write(
            &probe_page,
            page.replacen("</body>", &format!("{PROBE}</body>"), 1),
        )?;
        let elements: usize = ["<rect", "<line", "<text", "<path", "<title", "<circle"]
            .iter()
            .map(|t| page.matches(t).count())
            .sum();
        let rows = page.matches("<tr>").count();
        let (mut ms, mut wall) = (Vec::new(), Vec::new());
        for _ in 0..a.rounds.max(1) {
            let start = Instant::now();
            let out = Command::new("chromium")
                .args([
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--hide-scrollbars",
                    "--enable-logging=stderr",
                    "--v=0",
                ])
                .arg(format!("--user-data-dir={}", w.join("profile").display()))
                .arg("--window-size=1280,2000")
                .arg(format!("--screenshot={}", w.join("shot.png").display()))
                .arg(format!("file://{}", probe_page.display()))
                .output()
                .context("running chromium")?;
            wall.push(start.elapsed().as_secs_f64());
            let log = String::from_utf8_lossy(&out.stderr);
            if let Some(v) = render_ms(&log) {
                ms.push(v);
            }
        }
        if ms.is_empty() {
            bail!("no timing from chromium for {name}");
        }
        let label = if name == "bulk" {
            format!("{} connections", a.connections)
        } else {
            name.to_string()
        };
        println!(
            "{label:<28} {:>10} {elements:>12} {rows:>10} {:>12.1} {:>12.2}",
            page.len(),
            median(&ms),
            median(&wall)
        );
        figures.push(Figure {
            command: command.to_string(),
            ..Figure::new(
                "html",
                format!("`report --html`, {label}: page bytes; render ms in headless Chromium (median of {})", a.rounds),
                format!("{}; {:.1}", page.len(), median(&ms)),
            )
        });
    }
    Ok(figures)
}

/// The probe's `render-ms N` in Chromium's console log.
fn render_ms(log: &str) -> Option<f64> {
    log.lines().find_map(|l| {
        let (_, rest) = l.split_once("\"render-ms ")?;
        rest.split('"').next()?.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_probe_line_is_read() {
        let log = "[1202/150000.1:INFO:CONSOLE(1)] \"render-ms 123.4\", source: file:///x (1)\n";
        assert_eq!(super::render_ms(log), Some(123.4));
        assert_eq!(super::render_ms("nothing"), None);
    }
}
