//! `metaroce-analyze trace`: the engine's results as Chrome trace event
//! JSON, the format Perfetto, chrome://tracing and Holistic Trace Analysis
//! read, optionally merged into a profiler (Kineto/NCCL) trace.
//!
//! Layout (docs/trace.md): one process per capture; one
//! thread track per connection direction holding its stalls (`X`) and its
//! retransmissions, NACKs, CNPs and path losses (thread-scoped instants);
//! beside it, "messages" tracks holding each message's lifetime (`X`).
//! Messages of a pipelined transport overlap, and Perfetto and
//! chrome://tracing require the complete events of one track to nest, so a
//! direction's messages are spread over as many message tracks as it had
//! messages in flight at once (each message on the first track free at its
//! start). Complete events, unlike async ones, are what every viewer and
//! HTA read, and they stay next to their connection's track.
//!
//! Everything comes from the engine: per-packet verdicts and completed
//! messages through the pipeline's [`Sink`], stalls from each capture's
//! final report, clock offsets from `between_captures`. A message's start
//! is its completion's capture time minus the latency the engine measured
//! (the engine's latency is exactly that difference).
//!
//! Time: `ts` is the capture's wall clock in microseconds since the epoch,
//! with the nanoseconds as three decimals, after the capture's clock
//! correction (its estimated offset to the first capture, or
//! `--clock-offset`). With `--merge`, it is the profiler's time base:
//! microseconds since its `baseTimeNanoseconds` when the trace has one (as
//! recent Kineto writes), else since the epoch.
//!
//! Memory: the events are kept as small structs (72 bytes each) and
//! written, sorted by time, one at a time; no JSON tree of the whole trace
//! is built. A profiler trace given to `--merge` is held as its text: each
//! of its events is copied to the output byte for byte.

//!
//! Files: `collect.rs` turns the pipeline's verdicts into events and
//! counters per capture, `chrome.rs` writes them as Chrome trace JSON,
//! `profiler.rs` reads the profiler traces `--merge` writes in.

mod chrome;
mod collect;
mod profiler;

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;

use serde_json::{Value, json};

use analyzer::engine::BetweenReport;

use crate::parse_duration;
use crate::pipeline::{CaptureResult, capture_stem};

use chrome::{sep, write_capture};
use collect::CaptureTrace;
use profiler::Profiler;

/// The options of `trace` (beside the captures and how to analyse them).
#[derive(Debug, Clone, clap::Args)]
pub struct TraceOptions {
    /// The trace file to write (`-` for standard output).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: PathBuf,
    /// Add counters per 1 ms and connection direction: goodput (first
    /// transmissions' payload, MetaRoCE), bytes in flight (the largest
    /// value of each millisecond), CE-marked packets and retransmissions
    /// per path (ev).
    #[arg(long)]
    pub counters: bool,
    /// HOST's clock is NS ahead of the trace's clock (the first
    /// capture's; negative: behind): its events are written NS earlier,
    /// instead of by the offset estimated from the traffic. HOST is a capture's file stem (`host1` for
    /// `host1.pcap`); NS is nanoseconds or a duration (`-1.5ms`, `20us`).
    #[arg(long = "clock-offset", value_name = "HOST=NS", value_parser = parse_clock_offset)]
    pub clock_offset: Vec<(String, i64)>,
    /// A profiler trace (Kineto, NCCL profiler: Chrome trace JSON) to
    /// write into the output with every event unchanged; the network
    /// events take its time base. Repeatable (the traces must share one
    /// time base).
    #[arg(long, value_name = "PROFILER_TRACE")]
    pub merge: Vec<PathBuf>,
}

/// Parses `HOST=NS` of `--clock-offset`.
pub fn parse_clock_offset(s: &str) -> Result<(String, i64), String> {
    let (host, value) = s
        .rsplit_once('=')
        .ok_or_else(|| format!("'{s}': expected HOST=NS (e.g. host2=-1.5ms)"))?;
    if host.is_empty() {
        return Err(format!("'{s}': HOST is empty"));
    }
    let (negative, magnitude) = match value.trim().strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, value.trim().trim_start_matches('+')),
    };
    let ns = i64::try_from(parse_duration(magnitude)?)
        .map_err(|_| format!("'{value}' is out of range"))?;
    Ok((host.to_string(), if negative { -ns } else { ns }))
}

/// The `trace` sink and writer.
pub struct Tracer {
    args: TraceOptions,
    profiler: Option<Profiler>,
    captures: Vec<CaptureTrace>,
}

impl Tracer {
    /// Checks `--clock-offset`'s hosts against the captures' names and
    /// reads the profiler traces to merge: before the captures are
    /// analysed, so that a typo or a bad file fails at once.
    pub fn new(args: &TraceOptions, captures: &[PathBuf]) -> Result<Tracer, String> {
        for (host, _) in &args.clock_offset {
            // The names `pipeline::analyze` gives (a repeated stem gets
            // the capture's position as a suffix).
            let named = captures.iter().enumerate().any(|(i, path)| {
                let stem = capture_stem(path);
                *host == stem || *host == format!("{stem}-{}", i + 1)
            });
            if !named {
                let stems: Vec<String> = captures.iter().map(|p| capture_stem(p)).collect();
                return Err(no_capture_named(host, &stems));
            }
        }
        let profiler = if args.merge.is_empty() {
            None
        } else {
            Some(Profiler::read(&args.merge)?)
        };
        Ok(Tracer {
            args: args.clone(),
            profiler,
            captures: Vec::new(),
        })
    }

    /// Writes the trace (after the analysis); the message names the file.
    pub fn write(mut self, results: &[CaptureResult]) -> Result<(), String> {
        let offsets = self.clock_offsets(results)?;
        let output = self.args.output.clone();
        let named = |e: io::Error| format!("{}: {e}", output.display());
        if output.as_os_str() == "-" {
            let mut out = BufWriter::with_capacity(1 << 16, io::stdout().lock());
            self.write_to(&mut out, &offsets).map_err(named)?;
            out.flush().map_err(named)
        } else {
            let file = File::create(&output).map_err(named)?;
            let mut out = BufWriter::with_capacity(1 << 16, file);
            self.write_to(&mut out, &offsets).map_err(named)?;
            out.flush().map_err(named)
        }
    }

    /// Each capture's clock offset (ns its clock is ahead of the first
    /// capture's) and where it comes from.
    fn clock_offsets(&self, results: &[CaptureResult]) -> Result<Vec<(i64, &'static str)>, String> {
        for (host, _) in &self.args.clock_offset {
            if !self.captures.iter().any(|c| &c.stem == host) {
                let stems: Vec<String> = self.captures.iter().map(|c| c.stem.clone()).collect();
                return Err(no_capture_named(host, &stems));
            }
        }
        let between = results
            .first()
            .map_or(&[][..], |r| &r.report.between_captures[..]);
        let estimated = estimated_offsets(self.captures.len(), between);
        Ok(self
            .captures
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let given = self
                    .args
                    .clock_offset
                    .iter()
                    .rev()
                    .find(|(h, _)| h == &c.stem);
                match (given, estimated[i]) {
                    (Some(&(_, ns)), _) => (ns, "--clock-offset"),
                    (None, _) if i == 0 => (0, "reference"),
                    (None, Some(ns)) => (ns, "estimated"),
                    (None, None) => (0, "not estimated"),
                }
            })
            .collect())
    }

    fn write_to(&mut self, out: &mut dyn Write, offsets: &[(i64, &'static str)]) -> io::Result<()> {
        let base_ns = self.profiler.as_ref().map_or(0, |p| p.base_ns.unwrap_or(0));
        // Network pids above every numeric pid of the profiler's (which
        // are OS process ids and device numbers: far below 2^63).
        let first_pid = self
            .profiler
            .as_ref()
            .map_or(1, |p| p.max_pid.min(1 << 62) + 1);
        let metadata = self.metadata(offsets, base_ns, first_pid);
        out.write_all(b"{")?;
        match &self.profiler {
            Some(p) => p.write_head(out, metadata)?,
            None => {
                out.write_all(b"\"displayTimeUnit\":\"ms\",\"otherData\":")?;
                serde_json::to_writer(&mut *out, &json!({ "metaroce": metadata }))?;
                out.write_all(b",\"traceEvents\":[")?;
            }
        }
        let mut first = true;
        if let Some(p) = &self.profiler {
            for event in p.events() {
                sep(out, &mut first)?;
                out.write_all(event.as_bytes())?;
            }
        }
        let counters = self.args.counters;
        for (i, capture) in self.captures.iter_mut().enumerate() {
            let pid = first_pid + i as u64;
            let shift = -i128::from(offsets[i].0) - i128::from(base_ns);
            write_capture(out, &mut first, capture, pid, shift, counters)?;
        }
        out.write_all(b"\n]}\n")
    }

    /// What the network part of the trace is based on: `otherData.metaroce`.
    fn metadata(&self, offsets: &[(i64, &'static str)], base_ns: u64, first_pid: u64) -> Value {
        let time_base = match self.profiler.as_ref().and_then(|p| p.base_ns) {
            Some(_) => "us since the profiler's baseTimeNanoseconds",
            None => "us since the epoch",
        };
        let captures: Vec<Value> = self
            .captures
            .iter()
            .enumerate()
            .map(|(i, c)| {
                json!({
                    "pid": first_pid + i as u64,
                    "host": c.stem,
                    "file": c.path.display().to_string(),
                    "addresses": c.addresses.iter().map(ToString::to_string).collect::<Vec<_>>(),
                    "clock_offset_ns": offsets[i].0,
                    "clock_offset": offsets[i].1,
                })
            })
            .collect();
        json!({
            "tool": concat!("metaroce-analyze ", env!("CARGO_PKG_VERSION"), " trace"),
            "time_base": time_base,
            "base_time_ns": base_ns,
            "clock_offset_rule": "a capture's events are written clock_offset_ns earlier (its clock minus the first capture's)",
            "captures": captures,
        })
    }
}

fn no_capture_named(host: &str, stems: &[String]) -> String {
    format!(
        "--clock-offset {host}=...: no capture named {host} (captures: {})",
        stems.join(", ")
    )
}

/// Each capture's clock minus the first capture's, from the engine's
/// pairwise estimates (chained through other captures when needed).
fn estimated_offsets(n: usize, between: &[BetweenReport]) -> Vec<Option<i64>> {
    let mut offset: Vec<Option<i64>> = vec![None; n];
    if n == 0 {
        return offset;
    }
    offset[0] = Some(0);
    loop {
        let mut changed = false;
        for b in between.iter().filter(|b| b.offset_estimated) {
            let (a, c) = (b.capture_a as usize, b.capture_b as usize);
            if a >= n || c >= n {
                continue;
            }
            match (offset[a], offset[c]) {
                (Some(oa), None) => offset[c] = Some(oa + b.clock_offset_ns),
                (None, Some(oc)) => offset[a] = Some(oc - b.clock_offset_ns),
                _ => continue,
            }
            changed = true;
        }
        if !changed {
            return offset;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_offsets_parse() {
        assert_eq!(parse_clock_offset("b=1ms"), Ok(("b".into(), 1_000_000)));
        assert_eq!(parse_clock_offset("b=-250"), Ok(("b".into(), -250)));
        assert_eq!(parse_clock_offset("a=b=2us"), Ok(("a=b".into(), 2_000)));
        assert!(parse_clock_offset("b").is_err());
        assert!(parse_clock_offset("=5").is_err());
        assert!(parse_clock_offset("b=soon").is_err());
    }

    #[test]
    fn offsets_chain_through_other_captures() {
        let pair = |a, b, o| BetweenReport {
            capture_a: a,
            capture_b: b,
            clock_offset_ns: o,
            offset_estimated: true,
            matched_packets: 1,
            paths: Vec::new(),
        };
        // 0-1 and 1-2 estimated, 0-2 not: 2 is 1's offset plus 1-2's.
        let got = estimated_offsets(4, &[pair(1, 2, 5), pair(0, 1, 10)]);
        assert_eq!(got, vec![Some(0), Some(10), Some(15), None]);
    }
}
