//! `bench mirror`: `metaroce-analyze report` on an ERSPAN III copy of the
//! analyzer benchmark's bulk capture against the capture itself, per packet
//! of inner traffic (the budget, docs/mirrors.md: the copy at least 0.9
//! times the packet rate of the capture).
//!
//! The copy is `fixtures-generator mirror`: every frame in Ethernet / IPv4
//! / GRE (sequence number) / ERSPAN III with the IEEE 1588 platform
//! subheader, one session, 62 bytes more per frame; both captures are
//! written once under target/bench/. Both reports must be the same but for
//! the capture section, which must count every frame of the copy as
//! decapsulated from ERSPAN III (checked before anything is measured).
//!
//! Measured: instructions per packet from cachegrind (counted, not timed:
//! the figure this noisy machine cannot move; both threads' sum) and their
//! ratio, and the wall time of one run of each with its packet rate.

use std::process::Command;

use anyhow::{Context, bail};
use clap::Args;
use serde_json::Value;

use crate::figures::Figure;
use crate::proc::{
    Workspace, instructions, measure, require, run_quiet, stdout_of, warm_page_cache,
};
use crate::stats::{rate, ratio};

#[derive(Args, Debug)]
pub struct MirrorArgs {
    /// Packets of the bench capture.
    #[arg(default_value_t = 1_000_000)]
    packets: u64,
}

/// The budget: the copy's packet rate over the capture's.
const BUDGET: f64 = 0.9;

pub fn run(ws: &Workspace, a: &MirrorArgs, command: &str) -> anyhow::Result<Vec<Figure>> {
    require("valgrind", "mirror")?;
    ws.build(&[
        "-p",
        "metaroce-analyze",
        "--no-default-features",
        "--bin",
        "metaroce-analyze",
    ])?;
    ws.build(&["-p", "fixtures-generator"])?;
    let bin = ws.release("metaroce-analyze");
    let n = a.packets;
    let plain = ws.bulk_capture(&format!("bench-{n}.pcap"), n, &[])?;
    let copy = ws.bench_dir()?.join(format!("bench-{n}-erspan3.pcap"));
    if !std::fs::metadata(&copy).is_ok_and(|m| m.len() > 0) {
        run_quiet(
            Command::new(ws.release("fixtures-generator"))
                .arg("mirror")
                .arg(&plain)
                .arg(&copy),
        )?;
    }
    let (plain_s, copy_s) = (plain.to_string_lossy(), copy.to_string_lossy());
    let args = |f: &str| ["report", "--json", "--no-progress", f].map(str::to_string);
    let report = |f: &str| -> anyhow::Result<Value> {
        let out = stdout_of(Command::new(&bin).args(args(f)))?;
        serde_json::from_slice(&out).with_context(|| format!("the report of {f}"))
    };
    let frames = same_but_capture(&report(&plain_s)?, &report(&copy_s)?)?;
    println!(
        "reports: the same but for the capture section; all {frames} frames of the copy decapsulated from ERSPAN III"
    );
    let per_packet = frames as f64;

    let wall = |f: &str| -> anyhow::Result<f64> {
        warm_page_cache(std::path::Path::new(f))?;
        let a = args(f);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        Ok(measure(&bin, &a)?.wall_s)
    };
    let (pw, mw) = (wall(&plain_s)?, wall(&copy_s)?);
    let wall_ratio = ratio(pw, mw);
    println!(
        "wall, one run each ({frames} packets): capture {pw:.3} s ({:.2} M packets/s), ERSPAN III copy {mw:.3} s ({:.2} M packets/s): x{wall_ratio:.2} of the rate",
        rate(per_packet, pw) / 1e6,
        rate(per_packet, mw) / 1e6,
    );

    let count = |f: &str| -> anyhow::Result<u64> {
        let a = args(f);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        instructions(&bin, &a)
    };
    let (pi, mi) = (count(&plain_s)?, count(&copy_s)?);
    let (pi, mi) = (pi as f64 / per_packet, mi as f64 / per_packet);
    let rate_ratio = ratio(pi, mi);
    println!(
        "instructions per packet ({frames} packets): capture {pi:.0}, ERSPAN III copy {mi:.0}: the copy runs at x{rate_ratio:.3} of the packet rate (budget x{BUDGET})"
    );

    let fig = |what: String, value: String| Figure {
        command: command.to_string(),
        ..Figure::new("mirror", what, value)
    };
    Ok(vec![
        fig(
            format!(
                "`report`, {frames}-packet bench capture and its ERSPAN III copy: instructions per packet, capture; copy; copy's packet rate / capture's (budget {BUDGET})"
            ),
            format!("{pi:.0}; {mi:.0}; {rate_ratio:.3}"),
        ),
        fig(
            "same, wall time of one run each: M packets/s, capture; copy; ratio".into(),
            format!(
                "{:.2}; {:.2}; {wall_ratio:.2}",
                rate(per_packet, pw) / 1e6,
                rate(per_packet, mw) / 1e6
            ),
        ),
    ])
}

/// Checks that the report of an ERSPAN III copy is the capture's report
/// but for the capture section, where every frame of the capture must be
/// counted as decapsulated from ERSPAN III; returns that count.
fn same_but_capture(plain: &Value, copy: &Value) -> anyhow::Result<u64> {
    let frames = plain
        .pointer("/capture/frames")
        .and_then(Value::as_u64)
        .context("the capture's report has no capture.frames")?;
    let decapsulated = copy
        .pointer("/capture/traffic/decapsulated/erspan3")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    if decapsulated != frames {
        bail!(
            "the copy's report counts {decapsulated} frames decapsulated from ERSPAN III, the capture has {frames}: {}",
            copy.pointer("/capture/traffic").unwrap_or(&Value::Null)
        );
    }
    let without_capture = |v: &Value| {
        let mut v = v.clone();
        if let Some(o) = v.as_object_mut() {
            o.remove("capture");
        }
        v
    };
    let (a, b) = (without_capture(plain), without_capture(copy));
    if let Some(at) = first_difference(&a, &b, String::new()) {
        bail!("the ERSPAN III copy's report differs from the capture's at {at}");
    }
    Ok(frames)
}

/// The JSON pointer of the first place where two values differ (`None`
/// when they are equal).
fn first_difference(a: &Value, b: &Value, at: String) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            keys.into_iter().find_map(|k| match (x.get(k), y.get(k)) {
                (Some(u), Some(v)) => first_difference(u, v, format!("{at}/{k}")),
                _ => Some(format!("{at}/{k}")),
            })
        }
        (Value::Array(x), Value::Array(y)) => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (u, v))| first_difference(u, v, format!("{at}/{i}")))
            .or_else(|| (x.len() != y.len()).then(|| format!("{at} (length)"))),
        _ => (a != b).then(|| if at.is_empty() { "/".into() } else { at }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn report(frames: u64, erspan3: Option<u64>, bytes: u64) -> Value {
        let decapsulated = match erspan3 {
            Some(n) => json!({ "erspan3": n }),
            None => json!({}),
        };
        json!({
            "capture": { "frames": frames, "traffic": { "decapsulated": decapsulated } },
            "directions": [ { "src": "10.0.0.1", "bytes": bytes, "paths": [1, 2] } ],
            "engine": { "flows": 1 }
        })
    }

    #[test]
    fn a_copy_with_the_same_analysis_passes() {
        let plain = report(100, None, 6400);
        let copy = report(100, Some(100), 6400);
        assert_eq!(same_but_capture(&plain, &copy).unwrap(), 100);
    }

    #[test]
    fn a_copy_not_wholly_decapsulated_fails() {
        let plain = report(100, None, 6400);
        let err = same_but_capture(&plain, &report(100, Some(99), 6400)).unwrap_err();
        assert!(err.to_string().contains("99 frames"), "{err}");
        assert!(same_but_capture(&plain, &report(100, None, 6400)).is_err());
    }

    #[test]
    fn a_difference_outside_the_capture_is_named() {
        let plain = report(100, None, 6400);
        let err = same_but_capture(&plain, &report(100, Some(100), 6401)).unwrap_err();
        assert!(err.to_string().ends_with("at /directions/0/bytes"), "{err}");
    }

    #[test]
    fn first_differences_are_json_pointers() {
        let a = json!({ "x": [1, 2], "y": { "z": true } });
        assert_eq!(first_difference(&a, &a.clone(), String::new()), None);
        let b = json!({ "x": [1, 2, 3], "y": { "z": true } });
        assert_eq!(
            first_difference(&a, &b, String::new()).as_deref(),
            Some("/x (length)")
        );
        let c = json!({ "x": [1, 2], "y": { "z": true, "w": 0 } });
        assert_eq!(
            first_difference(&a, &c, String::new()).as_deref(),
            Some("/y/w")
        );
        assert_eq!(
            first_difference(&json!(1), &json!(2), String::new()).as_deref(),
            Some("/")
        );
    }
}
