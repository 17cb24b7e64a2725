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

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use serde::de::{MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Value, json};

use analyzer::engine::{
    BetweenReport, Engine, FbKind, MrBody, MsgDone, MsgView, ObsKind, Observation, Report,
    RetxKind, StallReport, Verdict,
};
use proto_parse::metaroce::{CnpReason, NackCode};

use crate::parse_duration;
use crate::pipeline::{CaptureResult, Sink, capture_stem};

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

/// A connection direction as its track names it: a MetaRoCE direction, or
/// a RoCEv2 flow (requests from `src` to `dst`'s QP).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Conn {
    MetaRoce {
        src: IpAddr,
        src_conn: u32,
        dst: IpAddr,
        dst_conn: u32,
    },
    RoceV2 {
        src: IpAddr,
        dst: IpAddr,
        qp: u32,
    },
}

impl Conn {
    fn name(&self) -> String {
        match self {
            Conn::MetaRoce {
                src,
                src_conn,
                dst,
                dst_conn,
            } => format!("{src}:{src_conn} -> {dst}:{dst_conn}"),
            Conn::RoceV2 { src, dst, qp } => format!("{src} -> {dst} qp 0x{qp:06x}"),
        }
    }
}

/// What one event says.
#[derive(Debug, Clone)]
enum What {
    /// Boxed: stalls are few, and the other events stay small.
    Stall(Box<StallReport>),
    Message {
        msg_id: u32,
        op: &'static str,
        view: MsgView,
        frame: u64,
    },
    Retransmission {
        frame: u64,
        psn: u32,
        ev: Option<u16>,
        kind: RetxKind,
        attempt: u8,
        original_frame: Option<u64>,
    },
    Nack {
        frame: u64,
        code: NackCode,
        nack_psn: Option<u32>,
    },
    Rocev2Nak {
        frame: u64,
        syndrome: u8,
    },
    Cnp {
        frame: u64,
        reason: Option<CnpReason>,
    },
    PathLoss {
        frame: u64,
        ev: u16,
        missing: u32,
    },
}

/// One event on the capture's raw clock; `track` indexes the capture's
/// tracks (connection tracks, then message tracks).
#[derive(Debug, Clone)]
struct Event {
    ts_ns: u64,
    dur_ns: Option<u64>,
    track: u32,
    what: What,
}

/// Counter values of one connection direction in one 1 ms bucket.
#[derive(Debug, Default, Clone)]
struct Bucket {
    goodput_bytes: u64,
    ce_marked: u64,
    /// By ev (RoCEv2: `None`, it has no paths).
    retransmissions: BTreeMap<Option<u16>, u64>,
}

/// Counter buckets are this long.
const BUCKET_NS: u64 = 1_000_000;

/// The bytes in flight of one connection direction as counter samples: in
/// each millisecond it changed, its largest value then, and, when it ended
/// the millisecond lower, that value from the next millisecond on (a
/// counter holds its value until the next sample: during a stall it
/// holds the bytes stuck in flight). The step function the samples draw
/// is the largest value of every millisecond.
#[derive(Debug, Default)]
struct InFlight {
    /// The millisecond being filled and its largest value so far.
    open: Option<(u64, u64)>,
    /// The latest value.
    last: u64,
    /// (millisecond, bytes), in time order.
    samples: Vec<(u64, u64)>,
}

impl InFlight {
    fn record(&mut self, ts_ns: u64, bytes: u64) {
        if bytes == self.last && self.open.is_some() {
            // Held since the last change: the samples already say it.
            return;
        }
        let mut bucket = ts_ns / BUCKET_NS;
        match self.open {
            Some((open, max)) if bucket <= open => {
                // The same millisecond (or a capture time that went back).
                bucket = open;
                self.open = Some((bucket, max.max(bytes)));
            }
            _ => {
                self.close(Some(bucket));
                // The millisecond starts with the value held before it.
                self.open = Some((bucket, self.last.max(bytes)));
            }
        }
        self.last = bytes;
    }

    /// Writes the open millisecond's samples; `next` is the millisecond
    /// about to open (it then says the held value itself).
    fn close(&mut self, next: Option<u64>) {
        if let Some((bucket, max)) = self.open.take() {
            self.samples.push((bucket, max));
            if self.last != max && next != Some(bucket + 1) {
                self.samples.push((bucket + 1, self.last));
            }
        }
    }
}

/// What one capture contributes.
#[derive(Debug, Default)]
struct CaptureTrace {
    stem: String,
    path: PathBuf,
    /// Addresses seen, for the process's label; the last packet's pair
    /// (most packets repeat it: no set lookup for them).
    addresses: BTreeSet<IpAddr>,
    last_pair: Option<(IpAddr, IpAddr)>,
    /// Connection tracks, in order of first appearance.
    conns: Vec<Conn>,
    conn_index: BTreeMap<Conn, u32>,
    /// RoCEv2: the request flow of each engine flow index (a response
    /// names its request flow only through the verdict's `flow`).
    roce_flows: BTreeMap<u32, Conn>,
    events: Vec<Event>,
    /// (connection track, bucket) -> counters.
    buckets: BTreeMap<(u32, u64), Bucket>,
    /// The connection of the last packet's verdict `flow` (a feedback's is
    /// the direction it acknowledges), for `flow_state`.
    flow_conn: Option<Conn>,
    /// Bytes in flight by connection; only those that ever had any.
    in_flight: BTreeMap<Conn, InFlight>,
}

impl CaptureTrace {
    fn track(&mut self, conn: Conn) -> u32 {
        if let Some(&t) = self.conn_index.get(&conn) {
            return t;
        }
        let t = self.conns.len() as u32;
        self.conns.push(conn);
        self.conn_index.insert(conn, t);
        t
    }

    fn instant(&mut self, ts_ns: u64, track: u32, what: What) {
        self.events.push(Event {
            ts_ns,
            dur_ns: None,
            track,
            what,
        });
    }

    fn bucket(&mut self, track: u32, ts_ns: u64) -> &mut Bucket {
        self.buckets.entry((track, ts_ns / BUCKET_NS)).or_default()
    }

    /// The connection a RoCEv2 packet belongs to: the request flow of its
    /// verdict's flow (learnt from the request that created it).
    fn roce_conn(&mut self, obs: &Observation, dest_qp: u32, flow: u32) -> Conn {
        let request = Conn::RoceV2 {
            src: obs.src,
            dst: obs.dst,
            qp: dest_qp,
        };
        match self.roce_flows.get(&flow) {
            // The same flow, or its responses (the reverse host pair).
            Some(&c @ Conn::RoceV2 { src, dst, .. })
                if (src, dst) == (obs.src, obs.dst) || (src, dst) == (obs.dst, obs.src) =>
            {
                c
            }
            // A new flow (or an index the engine reused): flows are
            // created by requests.
            _ => {
                self.roce_flows.insert(flow, request);
                request
            }
        }
    }
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

impl Sink for Tracer {
    fn begin_capture(&mut self, index: usize, path: &Path, stem: &str) {
        while self.captures.len() <= index {
            self.captures.push(CaptureTrace::default());
        }
        self.captures[index].stem = stem.to_string();
        self.captures[index].path = path.to_path_buf();
    }

    fn packet(&mut self, capture: usize, obs: &Observation, v: &Verdict, done: &[MsgDone]) {
        let counters = self.args.counters;
        let Some(c) = self.captures.get_mut(capture) else {
            return;
        };
        if c.last_pair != Some((obs.src, obs.dst)) {
            c.last_pair = Some((obs.src, obs.dst));
            c.addresses.insert(obs.src);
            c.addresses.insert(obs.dst);
        }
        let ts = obs.ts_ns;
        // The packet's own direction, and the one a feedback is about.
        let (own, reverse) = match &obs.kind {
            ObsKind::MetaRoce(mr) => (
                Conn::MetaRoce {
                    src: obs.src,
                    src_conn: mr.src_conn,
                    dst: obs.dst,
                    dst_conn: mr.dst_conn,
                },
                Conn::MetaRoce {
                    src: obs.dst,
                    src_conn: mr.dst_conn,
                    dst: obs.src,
                    dst_conn: mr.src_conn,
                },
            ),
            ObsKind::RoceV2(r) => {
                let Some(flow) = v.flow else { return };
                let conn = c.roce_conn(obs, r.dest_qp, flow);
                (conn, conn)
            }
        };
        c.flow_conn = match (&obs.kind, v.flow) {
            (_, None) => None,
            (ObsKind::MetaRoce(mr), Some(_)) if matches!(mr.body, MrBody::Feedback(_)) => {
                Some(reverse)
            }
            (_, Some(_)) => Some(own),
        };
        let frame = obs.frame;
        if let Some(r) = v.retransmission {
            let ev = match &obs.kind {
                ObsKind::MetaRoce(mr) => Some(mr.ev),
                ObsKind::RoceV2(_) => None,
            };
            let psn = match &obs.kind {
                ObsKind::MetaRoce(mr) => mr.psn,
                ObsKind::RoceV2(r) => r.psn,
            };
            let t = c.track(own);
            c.instant(
                ts,
                t,
                What::Retransmission {
                    frame,
                    psn,
                    ev,
                    kind: r.kind,
                    attempt: r.attempt,
                    original_frame: r.original_frame,
                },
            );
            if counters {
                *c.bucket(t, ts).retransmissions.entry(ev).or_default() += 1;
            }
        }
        if let Some(code) = v.nack {
            let nack_psn = match &obs.kind {
                ObsKind::MetaRoce(mr) => match &mr.body {
                    MrBody::Feedback(fb) => match fb.kind {
                        FbKind::Nack { nack_psn, .. } => Some(nack_psn),
                        _ => None,
                    },
                    _ => None,
                },
                ObsKind::RoceV2(_) => None,
            };
            let t = c.track(reverse);
            c.instant(
                ts,
                t,
                What::Nack {
                    frame,
                    code,
                    nack_psn,
                },
            );
        }
        if let Some(syndrome) = v.rocev2_nak {
            let t = c.track(reverse);
            c.instant(ts, t, What::Rocev2Nak { frame, syndrome });
        }
        if v.cnp.is_some() || v.cnp_rocev2 {
            let t = c.track(reverse);
            c.instant(
                ts,
                t,
                What::Cnp {
                    frame,
                    reason: v.cnp,
                },
            );
        }
        if let (Some(missing), ObsKind::MetaRoce(mr)) = (v.path_loss, &obs.kind) {
            let t = c.track(own);
            c.instant(
                ts,
                t,
                What::PathLoss {
                    frame,
                    ev: mr.ev,
                    missing,
                },
            );
        }
        for m in done {
            // Delivered: the receiver's view, at the direction's own DATA;
            // acked and READ completions come in the reverse direction's
            // packets (feedback, READ response). RoCEv2: the request flow.
            let conn = match (m.view, &obs.kind) {
                (_, ObsKind::RoceV2(_)) | (MsgView::Delivered, _) => own,
                (MsgView::Acked | MsgView::Read, ObsKind::MetaRoce(_)) => reverse,
            };
            let t = c.track(conn);
            c.events.push(Event {
                ts_ns: ts.saturating_sub(m.latency_ns),
                dur_ns: Some(m.latency_ns),
                track: t,
                what: What::Message {
                    msg_id: m.msg_id,
                    op: m.op,
                    view: m.view,
                    frame,
                },
            });
        }
        if counters {
            if v.ce_marked {
                let t = c.track(own);
                c.bucket(t, ts).ce_marked += 1;
            }
            if let ObsKind::MetaRoce(mr) = &obs.kind
                && let MrBody::Data(d) = &mr.body
                && v.retransmission.is_none()
                && !d.trimmed
            {
                let t = c.track(own);
                c.bucket(t, ts).goodput_bytes += u64::from(d.payload_len);
            }
        }
    }

    fn flow_state(&mut self, capture: usize, obs: &Observation, v: &Verdict, engine: &Engine) {
        if !self.args.counters {
            return;
        }
        let Some(c) = self.captures.get_mut(capture) else {
            return;
        };
        let (Some(conn), Some(flow)) = (c.flow_conn, v.flow) else {
            return;
        };
        let bytes = match obs.kind {
            ObsKind::MetaRoce(_) => engine.bytes_in_flight(flow),
            ObsKind::RoceV2(_) => engine.rocev2_bytes_in_flight(flow),
        };
        match (c.in_flight.get_mut(&conn), bytes) {
            (Some(gauge), Some(bytes)) => gauge.record(obs.ts_ns, bytes),
            (None, Some(bytes)) if bytes > 0 => {
                c.in_flight
                    .entry(conn)
                    .or_default()
                    .record(obs.ts_ns, bytes);
            }
            _ => {}
        }
    }

    fn end_capture(&mut self, index: usize, report: &Report) -> io::Result<()> {
        let Some(c) = self.captures.get_mut(index) else {
            return Ok(());
        };
        for gauge in c.in_flight.values_mut() {
            gauge.close(None);
        }
        for d in &report.directions {
            if d.stalls.is_empty() {
                continue;
            }
            let t = c.track(Conn::MetaRoce {
                src: d.src,
                src_conn: d.src_conn,
                dst: d.dst,
                dst_conn: d.dst_conn,
            });
            for s in &d.stalls {
                c.events.push(Event {
                    ts_ns: s.start_ns,
                    dur_ns: Some(s.duration_ns),
                    track: t,
                    what: What::Stall(Box::new(s.clone())),
                });
            }
        }
        Ok(())
    }
}

/// Writes `,` before every element but the first.
fn sep(out: &mut dyn Write, first: &mut bool) -> io::Result<()> {
    if *first {
        *first = false;
        out.write_all(b"\n")
    } else {
        out.write_all(b",\n")
    }
}

/// A time in ns as trace microseconds: exact decimals, not a float
/// (epoch microseconds with nanoseconds need more digits than an f64 has).
fn micros(ns: i128) -> String {
    let sign = if ns < 0 { "-" } else { "" };
    let ns = ns.unsigned_abs();
    let (us, frac) = (ns / 1000, ns % 1000);
    if frac == 0 {
        format!("{sign}{us}")
    } else {
        let mut s = format!("{sign}{us}.{frac:03}");
        while s.ends_with('0') {
            s.pop();
        }
        s
    }
}

/// One capture's process: metadata, then its events sorted by time, then
/// its counters (each counter track in time order).
fn write_capture(
    out: &mut dyn Write,
    first: &mut bool,
    c: &mut CaptureTrace,
    pid: u64,
    shift_ns: i128,
    counters: bool,
) -> io::Result<()> {
    // Message tracks: per connection, each message on the first track free
    // at its start (by start time, longer first, so that equal spans nest).
    let conn_tracks = c.conns.len() as u32;
    let mut message_tracks: Vec<(u32, &'static str, usize)> = Vec::new(); // (conn, view, k)
    let mut messages: Vec<usize> = c
        .events
        .iter()
        .enumerate()
        .filter(|(_, e)| matches!(e.what, What::Message { .. }))
        .map(|(i, _)| i)
        .collect();
    messages.sort_by_key(|&i| {
        let e = &c.events[i];
        (
            e.track,
            view_name(&e.what),
            e.ts_ns,
            std::cmp::Reverse(e.dur_ns),
        )
    });
    // (conn, view) -> (free from, track) of each of its message tracks.
    let mut free_at: BTreeMap<(u32, &'static str), Vec<(u64, u32)>> = BTreeMap::new();
    for i in messages {
        let e = &mut c.events[i];
        let end = e.ts_ns + e.dur_ns.unwrap_or(0);
        let view = view_name(&e.what);
        let lanes = free_at.entry((e.track, view)).or_default();
        let track = match lanes.iter_mut().find(|(until, _)| *until <= e.ts_ns) {
            Some(lane) => {
                lane.0 = end;
                lane.1
            }
            None => {
                let t = conn_tracks + message_tracks.len() as u32;
                message_tracks.push((e.track, view, lanes.len()));
                lanes.push((end, t));
                t
            }
        };
        e.track = track;
    }

    // Metadata: the process and every track.
    let mut label = c
        .addresses
        .iter()
        .take(8)
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    if c.addresses.len() > 8 {
        let _ = write!(label, " and {} more", c.addresses.len() - 8);
    }
    let process = format!("network {}", c.stem);
    meta(
        out,
        first,
        "process_name",
        pid,
        None,
        json!({ "name": process }),
    )?;
    meta(
        out,
        first,
        "process_labels",
        pid,
        None,
        json!({ "labels": label }),
    )?;
    meta(
        out,
        first,
        "process_sort_index",
        pid,
        None,
        // Below a profiler's processes (Kineto sorts its GPUs from
        // 5,000,000 on), in the order of the captures.
        json!({ "sort_index": (1u64 << 30) + pid }),
    )?;
    // Tracks sorted by connection name, each connection's message tracks
    // right below it.
    let mut order: Vec<u32> = (0..conn_tracks).collect();
    order.sort_by_key(|&t| c.conns[t as usize]);
    let mut rank = vec![0u64; conn_tracks as usize];
    for (r, &t) in order.iter().enumerate() {
        rank[t as usize] = r as u64 * 1000;
    }
    for (t, conn) in c.conns.iter().enumerate() {
        thread_meta(out, first, pid, t as u64 + 1, &conn.name(), rank[t])?;
    }
    // Within a connection: acked, delivered, read, each by lane.
    let view_rank = |view: &str| match view {
        "acked" => 0,
        "delivered" => 1,
        _ => 2,
    };
    for (k, &(conn, view, lane)) in message_tracks.iter().enumerate() {
        let tid = u64::from(conn_tracks) + k as u64 + 1;
        let conn_name = c.conns[conn as usize].name();
        let name = match lane {
            0 => format!("{conn_name} messages {view}"),
            n => format!("{conn_name} messages {view} ({})", n + 1),
        };
        let sort = rank[conn as usize] + 1 + view_rank(view) * 300 + lane.min(299) as u64;
        thread_meta(out, first, pid, tid, &name, sort)?;
    }

    // Events by time; at one time the longer complete event first (it is
    // the parent), instants after the complete events starting with them.
    c.events.sort_by_key(|e| {
        (
            e.ts_ns,
            std::cmp::Reverse(e.dur_ns.map_or(0, |d| d + 1)),
            e.track,
        )
    });
    let at = |ns: u64| micros(i128::from(ns) + shift_ns);
    for e in &c.events {
        sep(out, first)?;
        let tid = u64::from(e.track) + 1;
        let (name, args) = describe(&e.what);
        out.write_all(b"{\"ph\":")?;
        match e.dur_ns {
            Some(_) => out.write_all(b"\"X\"")?,
            None => out.write_all(b"\"i\",\"s\":\"t\"")?,
        }
        out.write_all(b",\"cat\":\"network\",\"name\":")?;
        serde_json::to_writer(&mut *out, &name)?;
        write!(out, ",\"pid\":{pid},\"tid\":{tid},\"ts\":{}", at(e.ts_ns))?;
        if let Some(d) = e.dur_ns {
            write!(out, ",\"dur\":{}", micros(i128::from(d)))?;
        }
        out.write_all(b",\"args\":")?;
        serde_json::to_writer(&mut *out, &args)?;
        out.write_all(b"}")?;
    }

    if counters {
        write_counters(out, first, c, pid, shift_ns)?;
    }
    Ok(())
}

/// The counter tracks of one capture: per connection and 1 ms bucket, the
/// bucket's values at its start, and zeros at the end of a busy stretch
/// (a counter holds its value until the next sample).
fn write_counters(
    out: &mut dyn Write,
    first: &mut bool,
    c: &CaptureTrace,
    pid: u64,
    shift_ns: i128,
) -> io::Result<()> {
    // Every ev a connection retransmitted on gets a value in each sample.
    let mut evs: BTreeMap<u32, BTreeSet<Option<u16>>> = BTreeMap::new();
    for (&(t, _), b) in &c.buckets {
        evs.entry(t).or_default().extend(b.retransmissions.keys());
    }
    let empty = Bucket::default();
    for (kind, unit) in [
        ("goodput", "Mbit/s"),
        ("CE-marked packets", "per ms"),
        ("retransmissions", ""),
    ] {
        let mut samples: Vec<(u32, u64, &Bucket)> = Vec::new();
        let mut last: Option<(u32, u64)> = None;
        for (&(t, bucket), b) in &c.buckets {
            if let Some((lt, lb)) = last
                && lt == t
                && lb + 1 < bucket
            {
                samples.push((t, lb + 1, &empty));
            } else if let Some((lt, lb)) = last
                && lt != t
            {
                samples.push((lt, lb + 1, &empty));
            }
            samples.push((t, bucket, b));
            last = Some((t, bucket));
        }
        if let Some((lt, lb)) = last {
            samples.push((lt, lb + 1, &empty));
        }
        for (t, bucket, b) in samples {
            let conn = &c.conns[t as usize];
            // RoCEv2 flows get no goodput: the engine counts it for
            // MetaRoCE directions only.
            if kind == "goodput" && matches!(conn, Conn::RoceV2 { .. }) {
                continue;
            }
            let conn = conn.name();
            let args = match kind {
                "goodput" => json!({ unit: b.goodput_bytes as f64 * 8.0 / 1000.0 }),
                "CE-marked packets" => json!({ unit: b.ce_marked }),
                _ => {
                    let mut m = serde_json::Map::new();
                    for ev in evs.get(&t).into_iter().flatten() {
                        let n = b.retransmissions.get(ev).copied().unwrap_or(0);
                        let series =
                            ev.map_or_else(|| "packets".to_string(), |ev| format!("ev{ev}"));
                        m.insert(series, json!(n));
                    }
                    if m.is_empty() {
                        continue;
                    }
                    Value::Object(m)
                }
            };
            let ts = micros(i128::from(bucket * BUCKET_NS) + shift_ns);
            counter(out, first, &format!("{kind} {conn}"), pid, &ts, &args)?;
        }
    }
    for (conn, gauge) in &c.in_flight {
        let name = format!("bytes in flight {}", conn.name());
        for &(bucket, bytes) in &gauge.samples {
            let ts = micros(i128::from(bucket * BUCKET_NS) + shift_ns);
            counter(out, first, &name, pid, &ts, &json!({ "bytes": bytes }))?;
        }
    }
    Ok(())
}

/// A counter (`C`) sample.
fn counter(
    out: &mut dyn Write,
    first: &mut bool,
    name: &str,
    pid: u64,
    ts: &str,
    args: &Value,
) -> io::Result<()> {
    sep(out, first)?;
    out.write_all(b"{\"ph\":\"C\",\"cat\":\"network\",\"name\":")?;
    serde_json::to_writer(&mut *out, name)?;
    write!(out, ",\"pid\":{pid},\"ts\":{ts},\"args\":")?;
    serde_json::to_writer(&mut *out, args)?;
    out.write_all(b"}")
}

/// A metadata (`M`) event.
fn meta(
    out: &mut dyn Write,
    first: &mut bool,
    name: &str,
    pid: u64,
    tid: Option<u64>,
    args: Value,
) -> io::Result<()> {
    sep(out, first)?;
    write!(out, "{{\"ph\":\"M\",\"name\":\"{name}\",\"pid\":{pid}")?;
    if let Some(tid) = tid {
        write!(out, ",\"tid\":{tid}")?;
    }
    out.write_all(b",\"args\":")?;
    serde_json::to_writer(&mut *out, &args)?;
    out.write_all(b"}")
}

fn view_str(view: MsgView) -> &'static str {
    match view {
        MsgView::Acked => "acked",
        MsgView::Delivered => "delivered",
        MsgView::Read => "read",
    }
}

/// The view of a message event ("" for other events).
fn view_name(what: &What) -> &'static str {
    match what {
        What::Message { view, .. } => view_str(*view),
        _ => "",
    }
}

/// A track's name and its place among the process's tracks.
fn thread_meta(
    out: &mut dyn Write,
    first: &mut bool,
    pid: u64,
    tid: u64,
    name: &str,
    sort_index: u64,
) -> io::Result<()> {
    let args = json!({ "name": name });
    meta(out, first, "thread_name", pid, Some(tid), args)?;
    let args = json!({ "sort_index": sort_index });
    meta(out, first, "thread_sort_index", pid, Some(tid), args)
}

/// An event's name and args.
fn describe(what: &What) -> (String, Value) {
    match what {
        What::Stall(s) => (
            "stall".to_string(),
            json!({
                "cause": s.end_cause,
                "open": s.open,
                "end_frame": s.end_frame,
                "cum_ack": s.cum_ack,
                "outstanding_packets": s.outstanding_packets,
                "paths_in_flight": s.paths_in_flight,
                "retransmissions": s.retransmissions,
            }),
        ),
        What::Message {
            msg_id,
            op,
            view,
            frame,
        } => {
            let view = view_str(*view);
            (
                format!("{op} {msg_id}"),
                json!({"msg_id": msg_id, "op": op, "view": view, "end_frame": frame}),
            )
        }
        What::Retransmission {
            frame,
            psn,
            ev,
            kind,
            attempt,
            original_frame,
        } => (
            format!("retransmission ({})", kind.as_str()),
            json!({
                "frame": frame,
                "psn": psn,
                "ev": ev,
                "kind": kind.as_str(),
                "attempt": attempt,
                "original_frame": original_frame,
            }),
        ),
        What::Nack {
            frame,
            code,
            nack_psn,
        } => (
            format!("NACK {code}"),
            json!({"frame": frame, "code": code.to_string(), "nack_psn": nack_psn}),
        ),
        What::Rocev2Nak { frame, syndrome } => (
            "NAK".to_string(),
            json!({"frame": frame, "syndrome": syndrome}),
        ),
        What::Cnp { frame, reason } => (
            "CNP".to_string(),
            json!({"frame": frame, "reason": reason.map(|r| r.to_string())}),
        ),
        What::PathLoss { frame, ev, missing } => (
            format!("path loss ev{ev}"),
            json!({"frame": frame, "ev": ev, "missing_path_seqs": missing}),
        ),
    }
}

/// The profiler traces given to `--merge`, as read.
struct Profiler {
    /// The first trace's top-level keys but `traceEvents` (and `otherData`),
    /// then keys only later traces have.
    head: Vec<(String, Box<RawValue>)>,
    other_data: Option<serde_json::Map<String, Value>>,
    /// Every event of every trace, as written.
    events: Vec<Box<RawValue>>,
    base_ns: Option<u64>,
    /// The largest numeric pid of the profiler's events (0 if none).
    max_pid: u64,
}

impl Profiler {
    fn read(paths: &[PathBuf]) -> Result<Profiler, String> {
        let mut p = Profiler {
            head: Vec::new(),
            other_data: None,
            events: Vec::new(),
            base_ns: None,
            max_pid: 0,
        };
        let mut base_from: Option<(&Path, Option<u64>)> = None;
        for path in paths {
            let name = path.display();
            let text = std::fs::read_to_string(path).map_err(|e| format!("{name}: {e}"))?;
            let parsed = parse_trace(&text).map_err(|e| format!("{name}: {e}"))?;
            let base = parsed.base_ns;
            match base_from {
                None => {
                    base_from = Some((path, base));
                    p.base_ns = base;
                }
                Some((other, b)) if b != base => {
                    let show = |b: Option<u64>| b.map_or("none".to_string(), |b| b.to_string());
                    return Err(format!(
                        "{name}: baseTimeNanoseconds {} differs from {}'s ({}): the merged traces \
                         keep their events unchanged, so they must share one time base",
                        show(base),
                        other.display(),
                        show(b)
                    ));
                }
                Some(_) => {}
            }
            for (i, event) in parsed.events.iter().enumerate() {
                let value: Value = serde_json::from_str(event.get())
                    .map_err(|e| format!("{name}: traceEvents[{i}]: {e}"))?;
                let Value::Object(obj) = value else {
                    return Err(format!("{name}: traceEvents[{i}] is not an object"));
                };
                if let Some(pid) = obj.get("pid").and_then(Value::as_u64) {
                    p.max_pid = p.max_pid.max(pid);
                }
            }
            p.events.extend(parsed.events);
            for (key, value) in parsed.rest {
                if key == "otherData" {
                    if p.other_data.is_none() {
                        match serde_json::from_str::<Value>(value.get()) {
                            Ok(Value::Object(m)) => p.other_data = Some(m),
                            _ => return Err(format!("{name}: otherData is not an object")),
                        }
                    }
                } else if !p.head.iter().any(|(k, _)| k == &key) {
                    p.head.push((key, value));
                }
            }
        }
        Ok(p)
    }

    fn events(&self) -> impl Iterator<Item = &str> {
        self.events.iter().map(|e| e.get())
    }

    /// The top-level keys before `traceEvents`, `otherData` with the
    /// network's metadata under `metaroce`, and the opening of
    /// `traceEvents`.
    fn write_head(&self, out: &mut dyn Write, metadata: Value) -> io::Result<()> {
        for (key, value) in &self.head {
            serde_json::to_writer(&mut *out, key)?;
            out.write_all(b":")?;
            out.write_all(value.get().as_bytes())?;
            out.write_all(b",")?;
        }
        let mut other = self.other_data.clone().unwrap_or_default();
        other.insert("metaroce".to_string(), metadata);
        out.write_all(b"\"otherData\":")?;
        serde_json::to_writer(&mut *out, &other)?;
        out.write_all(b",\"traceEvents\":[")
    }
}

/// A profiler trace: its events and its other top-level keys, as written.
struct ParsedTrace {
    events: Vec<Box<RawValue>>,
    rest: Vec<(String, Box<RawValue>)>,
    base_ns: Option<u64>,
}

/// Reads a Chrome trace: an object with `traceEvents`, or a bare array of
/// events (the format's other form). Errors name the line and column.
fn parse_trace(text: &str) -> Result<ParsedTrace, String> {
    if text.trim_start().starts_with('[') {
        let events: Vec<Box<RawValue>> = serde_json::from_str(text).map_err(|e| e.to_string())?;
        return Ok(ParsedTrace {
            events,
            rest: Vec::new(),
            base_ns: None,
        });
    }
    let entries: Entries = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let mut events = None;
    let mut rest = Vec::new();
    let mut base_ns = None;
    for (key, value) in entries.0 {
        match key.as_str() {
            "traceEvents" => {
                let list: Vec<Box<RawValue>> = serde_json::from_str(value.get())
                    .map_err(|_| "traceEvents is not an array".to_string())?;
                events = Some(list);
            }
            "baseTimeNanoseconds" => {
                let v: Value = serde_json::from_str(value.get()).map_err(|e| e.to_string())?;
                // Kineto writes a number; a string of digits is taken too.
                let ns = v
                    .as_u64()
                    .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
                    .ok_or_else(|| {
                        format!("baseTimeNanoseconds: expected an integer (ns since the epoch), found {v}")
                    })?;
                base_ns = Some(ns);
                rest.push((key, value));
            }
            _ => rest.push((key, value)),
        }
    }
    let events = events.ok_or_else(|| "no traceEvents array".to_string())?;
    Ok(ParsedTrace {
        events,
        rest,
        base_ns,
    })
}

/// A JSON object's entries in the order written, values unparsed.
struct Entries(Vec<(String, Box<RawValue>)>);

impl<'de> serde::Deserialize<'de> for Entries {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Entries, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Entries;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a trace object (with traceEvents) or an array of events")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entries, A::Error> {
                let mut entries = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, Box<RawValue>>()? {
                    entries.push((k, v));
                }
                Ok(Entries(entries))
            }
        }
        d.deserialize_map(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_stay_small() {
        // What the memory note above promises (a boxed stall keeps it so).
        assert!(std::mem::size_of::<Event>() <= 72);
    }

    #[test]
    fn micros_are_exact() {
        assert_eq!(micros(1_764_000_000_000_200_000), "1764000000000200");
        assert_eq!(micros(1_764_000_000_000_200_123), "1764000000000200.123");
        assert_eq!(micros(1_500), "1.5");
        assert_eq!(micros(-2_010), "-2.01");
        assert_eq!(micros(0), "0");
    }

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
