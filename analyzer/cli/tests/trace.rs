//! `metaroce-analyze trace`: the Chrome trace of the bundled two-host
//! scenario is valid trace JSON, holds the scenario's stall,
//! retransmissions, NACKs, CNPs, path loss and messages on the right tracks
//! at the right times (checked against `multipath_loss.expected.json` and
//! the timeline of `fixtures/generator/src/scenario.rs`, both written by
//! hand), and `--merge` keeps every event of a profiler trace.

mod common;

use common::{BIN, expected, fixture};

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use serde_json::Value;
use serde_json::value::RawValue;

/// The scenario's capture epoch (fixtures-generator's `EPOCH_NS`), from
/// the expected file's comment: "Times are ns since the first capture's
/// epoch 1764000000000000000".
const EPOCH_NS: i128 = 1_764_000_000_000_000_000;
const DIRECTION: &str = "10.0.0.1:256 -> 10.0.0.2:512";

fn sender() -> PathBuf {
    fixture("multipath_loss_sender.pcap")
}

fn receiver() -> PathBuf {
    fixture("multipath_loss_receiver.pcap")
}

fn profiler_trace() -> PathBuf {
    fixture("multipath_loss_rank0.trace.json")
}

fn run(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(BIN).arg("trace").args(args).output().unwrap()
}

/// Runs `trace` into a temporary file and returns its text.
fn trace(captures: &[PathBuf], extra: &[&str]) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let out_path = tmp.path().join("job.trace.json");
    let mut args: Vec<&std::ffi::OsStr> = captures.iter().map(|p| p.as_os_str()).collect();
    args.push("-o".as_ref());
    args.push(out_path.as_os_str());
    args.extend(extra.iter().map(std::ffi::OsStr::new));
    let out = run(&args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read_to_string(&out_path).unwrap()
}

/// A time written in the trace (microseconds, decimals allowed) in ns,
/// exactly: the text, not an f64 (epoch microseconds with nanoseconds
/// have more digits than an f64 keeps).
fn ns_of(raw: &str) -> i128 {
    let (sign, digits) = match raw.strip_prefix('-') {
        Some(rest) => (-1, rest),
        None => (1, raw),
    };
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    assert!(frac.len() <= 3, "{raw}: finer than a nanosecond");
    let frac = format!("{frac:0<3}");
    sign * (int.parse::<i128>().unwrap() * 1000 + frac.parse::<i128>().unwrap())
}

/// One event: its JSON value, and its `ts` and `dur` exactly (ns).
#[derive(Debug, Clone)]
struct Event {
    value: Value,
    ts_ns: Option<i128>,
    dur_ns: Option<i128>,
}

impl Event {
    fn ph(&self) -> &str {
        self.value["ph"].as_str().unwrap_or("")
    }
    fn name(&self) -> &str {
        self.value["name"].as_str().unwrap_or("")
    }
    fn pid(&self) -> &Value {
        &self.value["pid"]
    }
    fn track(&self) -> (String, String) {
        (self.value["pid"].to_string(), self.value["tid"].to_string())
    }
}

/// The trace's top level and its events.
fn parse(text: &str) -> (Value, Vec<Event>) {
    let top: Value = serde_json::from_str(text).expect("the trace is JSON");
    #[derive(serde::Deserialize)]
    struct Top<'a> {
        #[serde(rename = "traceEvents", borrow)]
        events: Vec<BTreeMap<String, &'a RawValue>>,
    }
    let raw: Top<'_> = serde_json::from_str(text).unwrap();
    let values = top["traceEvents"].as_array().expect("traceEvents").clone();
    assert_eq!(values.len(), raw.events.len());
    let events = values
        .into_iter()
        .zip(raw.events)
        .map(|(value, raw)| {
            let exact = |k: &str| {
                raw.get(k)
                    .filter(|r| {
                        r.get()
                            .starts_with(|c: char| c == '-' || c.is_ascii_digit())
                    })
                    .map(|r| ns_of(r.get()))
            };
            Event {
                ts_ns: exact("ts"),
                dur_ns: exact("dur"),
                value,
            }
        })
        .collect();
    (top, events)
}

/// The checks every trace viewer relies on: the keys each phase needs,
/// `ts` sorted per track, complete events of one track nested (never
/// partly overlapping), and metadata naming every process and thread.
fn assert_valid(events: &[Event]) {
    let mut last_ts: BTreeMap<(String, String), i128> = BTreeMap::new();
    let mut open: BTreeMap<(String, String), Vec<i128>> = BTreeMap::new();
    let mut named_pids = BTreeSet::new();
    let mut named_tids = BTreeSet::new();
    let mut used_pids = BTreeSet::new();
    let mut used_tids = BTreeSet::new();
    for (i, e) in events.iter().enumerate() {
        let obj = e
            .value
            .as_object()
            .unwrap_or_else(|| panic!("event {i} is not an object"));
        let has = |k: &str| obj.contains_key(k);
        assert!(has("ph") && has("pid"), "event {i}: {}", e.value);
        let required: &[&str] = match e.ph() {
            "X" => &["name", "ts", "dur", "tid"],
            "i" | "I" => &["name", "ts", "tid", "s"],
            "C" => &["name", "ts", "args"],
            "M" => &["name", "args"],
            "s" | "f" | "t" => &["name", "ts", "tid", "id"],
            other => panic!("event {i}: unexpected ph {other}: {}", e.value),
        };
        for k in required {
            assert!(has(k), "event {i} ({}) lacks {k}: {}", e.ph(), e.value);
        }
        if e.ph() == "M" {
            match e.name() {
                "process_name" => {
                    named_pids.insert(e.pid().to_string());
                }
                "thread_name" => {
                    assert!(has("tid"), "event {i}: thread_name without tid");
                    named_tids.insert(e.track());
                }
                _ => {}
            }
            continue;
        }
        used_pids.insert(e.pid().to_string());
        let ts = e
            .ts_ns
            .unwrap_or_else(|| panic!("event {i}: ts is not a number"));
        // Counters are tracks of their own, by name.
        let track = if e.ph() == "C" {
            (e.pid().to_string(), format!("counter {}", e.name()))
        } else {
            used_tids.insert(e.track());
            e.track()
        };
        if let Some(&before) = last_ts.get(&track) {
            assert!(
                before <= ts,
                "event {i}: ts goes back on {track:?}: {}",
                e.value
            );
        }
        last_ts.insert(track.clone(), ts);
        if e.ph() == "X" {
            let dur = e
                .dur_ns
                .unwrap_or_else(|| panic!("event {i}: dur is not a number"));
            assert!(dur >= 0, "event {i}: negative dur");
            let stack = open.entry(track).or_default();
            while stack.last().is_some_and(|&end| end <= ts) {
                stack.pop();
            }
            if let Some(&end) = stack.last() {
                assert!(
                    ts + dur <= end,
                    "event {i} overlaps an enclosing complete event on its track: {}",
                    e.value
                );
            }
            stack.push(ts + dur);
        }
    }
    for pid in &used_pids {
        assert!(named_pids.contains(pid), "pid {pid} has no process_name");
    }
    for track in &used_tids {
        assert!(
            named_tids.contains(track),
            "track {track:?} has no thread_name"
        );
    }
}

/// The pid of the process named `name`.
fn pid_named(events: &[Event], name: &str) -> Value {
    events
        .iter()
        .find(|e| e.ph() == "M" && e.name() == "process_name" && e.value["args"]["name"] == name)
        .unwrap_or_else(|| panic!("no process named {name}"))
        .pid()
        .clone()
}

/// The tid of the thread named `name` in process `pid`.
fn tid_named(events: &[Event], pid: &Value, name: &str) -> Value {
    events
        .iter()
        .find(|e| {
            e.ph() == "M"
                && e.name() == "thread_name"
                && e.pid() == pid
                && e.value["args"]["name"] == name
        })
        .unwrap_or_else(|| panic!("no thread named {name} in {pid}"))
        .value["tid"]
        .clone()
}

/// The events of one track.
fn on_track<'a>(events: &'a [Event], pid: &Value, tid: &Value) -> Vec<&'a Event> {
    events
        .iter()
        .filter(|e| e.ph() != "M" && e.pid() == pid && &e.value["tid"] == tid)
        .collect()
}

fn us(t: i128) -> i128 {
    t * 1000
}

/// The two-host scenario's trace (with `--counters`), made once for the
/// tests below, one per aspect of the expected file.
struct Scenario {
    top: Value,
    events: Vec<Event>,
    expected: Value,
}

fn scenario() -> &'static Scenario {
    static SCENARIO: OnceLock<Scenario> = OnceLock::new();
    SCENARIO.get_or_init(|| {
        let text = trace(&[sender(), receiver()], &["--counters"]);
        let (top, events) = parse(&text);
        Scenario {
            top,
            events,
            expected: expected(),
        }
    })
}

/// One capture's view of the scenario's direction: its side in the
/// expected file, its process and the events on the direction's track.
struct Side<'a> {
    side: &'static str,
    dir: &'a Value,
    pid: Value,
    track: Vec<&'a Event>,
}

impl Side<'_> {
    fn named(&self, prefix: &str) -> Vec<&Event> {
        self.track
            .iter()
            .copied()
            .filter(|e| e.name().starts_with(prefix))
            .collect()
    }
}

/// The sender's and the receiver's view, each checked to name the
/// direction the track is named after.
fn sides(s: &Scenario) -> Vec<Side<'_>> {
    [
        ("sender", "network multipath_loss_sender"),
        ("receiver", "network multipath_loss_receiver"),
    ]
    .into_iter()
    .map(|(side, pname)| {
        let dir = &s.expected[side]["direction_a_to_b"];
        assert_eq!(
            format!(
                "{}:{} -> {}:{}",
                dir["src"].as_str().unwrap(),
                dir["src_conn"],
                dir["dst"].as_str().unwrap(),
                dir["dst_conn"]
            ),
            DIRECTION
        );
        let pid = pid_named(&s.events, pname);
        let tid = tid_named(&s.events, &pid, DIRECTION);
        let track = on_track(&s.events, &pid, &tid);
        Side {
            side,
            dir,
            pid,
            track,
        }
    })
    .collect()
}

#[test]
fn scenario_trace_is_valid() {
    assert_valid(&scenario().events);
}

/// The receiver's clock offset, estimated by the engine, is applied and
/// written down.
#[test]
fn scenario_clock_offset_is_estimated_and_written_down() {
    let s = scenario();
    let offset = s.expected["between_captures"]["clock_offset_ns"]
        .as_i64()
        .unwrap();
    let captures = s.top["otherData"]["metaroce"]["captures"]
        .as_array()
        .unwrap();
    assert_eq!(captures.len(), 2);
    assert_eq!(captures[0]["clock_offset_ns"], 0);
    assert_eq!(captures[1]["host"], "multipath_loss_receiver");
    assert_eq!(captures[1]["clock_offset_ns"], offset);
    assert_eq!(captures[1]["clock_offset"], "estimated");
}

/// Stalls: as many, as long, starting when the expected file says.
#[test]
fn scenario_stalls() {
    for v in sides(scenario()) {
        let side = v.side;
        let stalls = v.named("stall");
        let want = v.dir["stalls"].as_array().unwrap();
        assert_eq!(stalls.len(), want.len(), "{side}: stalls");
        for (got, want) in stalls.iter().zip(want) {
            assert_eq!(got.ph(), "X");
            let start = EPOCH_NS + i128::from(want["start_ns"].as_u64().unwrap());
            assert_eq!(got.ts_ns, Some(start), "{side}: stall start");
            assert_eq!(
                got.dur_ns,
                Some(i128::from(want["duration_ns"].as_u64().unwrap()))
            );
            // "ack after a timeout retransmission"
            assert_eq!(got.value["args"]["cause"], "timeout_retransmission");
            assert_eq!(got.value["args"]["open"], want["open"]);
        }
    }
}

/// Retransmissions: count, spurious ones, per ev, and times.
#[test]
fn scenario_retransmissions() {
    for v in sides(scenario()) {
        let (side, dir) = (v.side, v.dir);
        let retx = v.named("retransmission");
        assert_eq!(
            retx.len() as u64,
            dir["retransmissions"].as_u64().unwrap(),
            "{side}"
        );
        let spurious = retx
            .iter()
            .filter(|e| e.value["args"]["kind"] == "spurious")
            .count();
        assert_eq!(
            spurious as u64,
            dir["spurious_retransmissions"].as_u64().unwrap()
        );
        for path in dir["paths"].as_array().unwrap() {
            let on_ev = retx
                .iter()
                .filter(|e| e.value["args"]["ev"] == path["ev"])
                .count();
            assert_eq!(on_ev as u64, path["retransmissions"].as_u64().unwrap());
        }
        // scenario.rs: A retransmits at 74, 76, 110 and 5200 us; B
        // captures them after 10, 12, 30 and 13 us (ev0, ev1, ev2, ev3),
        // on its own clock, which the applied offset brings back to A's.
        let times: Vec<i128> = match side {
            "sender" => vec![us(74), us(76), us(110), us(5200)],
            _ => vec![us(84), us(88), us(140), us(5213)],
        };
        let got: Vec<i128> = retx.iter().map(|e| e.ts_ns.unwrap() - EPOCH_NS).collect();
        assert_eq!(got, times, "{side}: retransmission times");
        for e in &retx {
            assert_eq!((e.ph(), &e.value["s"]), ("i", &Value::from("t")));
        }
    }
}

/// NACKs by code, CNPs.
#[test]
fn scenario_nacks_and_cnps() {
    for v in sides(scenario()) {
        let (side, dir) = (v.side, v.dir);
        let nacks = v.named("NACK ");
        assert_eq!(nacks.len() as u64, dir["nacks"].as_u64().unwrap(), "{side}");
        if let Some(codes) = dir["nacks_by_code"].as_object() {
            for (code, n) in codes {
                let c = nacks
                    .iter()
                    .filter(|e| e.value["args"]["code"] == code.as_str())
                    .count();
                assert_eq!(c as u64, n.as_u64().unwrap(), "{side}: NACK {code}");
            }
        }
        assert_eq!(
            v.named("CNP").len() as u64,
            dir["cnps"].as_u64().unwrap(),
            "{side}"
        );
    }
}

/// Path loss: the receiver's path_seq gaps.
#[test]
fn scenario_path_losses() {
    for v in sides(scenario()) {
        let side = v.side;
        let losses = v.named("path loss");
        let gaps = v.dir["path_seq_gaps"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        assert_eq!(losses.len(), gaps.len(), "{side}: path losses");
        for (ev, n) in &gaps {
            let e = losses
                .iter()
                .find(|e| format!("ev{}", e.value["args"]["ev"]) == *ev)
                .unwrap_or_else(|| panic!("{side}: no path loss on {ev}"));
            assert_eq!(&e.value["args"]["missing_path_seqs"], n);
        }
    }
}

/// Messages (sender view: acked) on the direction's message track.
#[test]
fn scenario_messages() {
    let s = scenario();
    for v in sides(s) {
        let (side, dir) = (v.side, v.dir);
        let msg_tid = tid_named(&s.events, &v.pid, &format!("{DIRECTION} messages acked"));
        let msgs = on_track(&s.events, &v.pid, &msg_tid);
        assert!(
            msgs.iter()
                .all(|e| e.ph() == "X" && e.value["args"]["view"] == "acked")
        );
        assert_eq!(
            msgs.len() as u64,
            dir["messages_completed"].as_u64().unwrap(),
            "{side}: acked messages"
        );
        if let Some(completion) = dir["msg_completion_ns"].as_object() {
            let mut durs: Vec<i128> = msgs.iter().map(|e| e.dur_ns.unwrap()).collect();
            durs.sort_unstable();
            assert_eq!(
                durs.first().copied(),
                completion["min"].as_u64().map(i128::from)
            );
            assert_eq!(
                durs.last().copied(),
                completion["max"].as_u64().map(i128::from)
            );
            // scenario.rs: message 1 starts at 40 us, message 2 at 200 us.
            let starts: Vec<i128> = msgs.iter().map(|e| e.ts_ns.unwrap() - EPOCH_NS).collect();
            assert_eq!(starts, vec![us(40), us(200)]);
        }
    }
}

/// Bytes in flight: per millisecond the largest value, then the value
/// held (scenario.rs; every DATA has payload_len 1024).
/// Sender, A's clock: PSN 1000..1007 leave at 40..47 us, before any
/// feedback is back (ACK(1000), sent at 50 on ev0, arrives at 60): 8192.
/// ACK cum 1008 arrives at 88 + 12 = 100 us: all acked. PSN 1008 leaves at
/// 200 us and stays in flight through the stall until ACK cum 1009 arrives
/// at 5213 + 13 = 5226 us.
/// Receiver, B's clock brought back by the offset: each arrival is acked
/// or SACKed at once, but 1007 (trimmed at 60, counting the 1024 B it was
/// sent with, NACKed) is still in flight when 1006 arrives at 76: 2048; the
/// SACK of 1007 at 84 and ACK cum 1008 at 88 (right after 1002's
/// retransmission, its first capture at B) leave 0. 1008's
/// retransmission, its first capture at B, arrives at 5200 + 13 us and is
/// acked at once.
#[test]
fn scenario_bytes_in_flight() {
    let s = scenario();
    for v in sides(s) {
        let side = v.side;
        let in_flight: Vec<(i128, u64)> = s
            .events
            .iter()
            .filter(|e| e.ph() == "C" && e.pid() == &v.pid)
            .filter(|e| e.name() == format!("bytes in flight {DIRECTION}"))
            .map(|e| {
                let bytes = e.value["args"]["bytes"].as_u64().unwrap();
                (e.ts_ns.unwrap() - EPOCH_NS, bytes)
            })
            .collect();
        let peak = if side == "sender" { 8 * 1024 } else { 2 * 1024 };
        let held = if side == "sender" { 1024 } else { 0 };
        let want = vec![
            (us(0), peak),
            (us(1000), held),
            (us(5000), 1024),
            (us(6000), 0),
        ];
        assert_eq!(in_flight, want, "{side}: bytes in flight");
    }
}

/// Counters: retransmissions per path add up to the expected count.
#[test]
fn scenario_retransmission_counters_add_up() {
    let s = scenario();
    let pid = pid_named(&s.events, "network multipath_loss_sender");
    let per_ev: i64 = s
        .events
        .iter()
        .filter(|e| e.ph() == "C" && e.pid() == &pid)
        .filter(|e| e.name() == format!("retransmissions {DIRECTION}"))
        .flat_map(|e| e.value["args"].as_object().unwrap().values().cloned())
        .map(|v| v.as_i64().unwrap())
        .sum();
    assert_eq!(
        per_ev,
        s.expected["sender"]["direction_a_to_b"]["retransmissions"]
            .as_i64()
            .unwrap()
    );
}

/// `--clock-offset HOST=NS` moves every event of that capture NS earlier,
/// and nothing else.
#[test]
fn clock_offset_shifts_one_capture_exactly() {
    let plain = trace(&[receiver()], &[]);
    let shifted = trace(
        &[receiver()],
        &["--clock-offset", "multipath_loss_receiver=-1.25ms"],
    );
    let (_, a) = parse(&plain);
    let (top, b) = parse(&shifted);
    assert_valid(&b);
    assert_eq!(a.len(), b.len());
    let mut moved = 0;
    for (a, b) in a.iter().zip(&b) {
        let strip = |e: &Event| {
            let mut v = e.value.clone();
            v.as_object_mut().unwrap().remove("ts");
            v
        };
        assert_eq!(strip(a), strip(b));
        if a.ph() != "M" {
            assert_eq!(
                b.ts_ns.unwrap() - a.ts_ns.unwrap(),
                1_250_000,
                "{}",
                a.value
            );
            moved += 1;
        }
    }
    assert!(moved > 10, "{moved} events");
    let capture = &top["otherData"]["metaroce"]["captures"][0];
    assert_eq!(capture["clock_offset_ns"], -1_250_000);
    assert_eq!(capture["clock_offset"], "--clock-offset");

    // With both captures, the given offset replaces the estimate.
    let both = trace(
        &[sender(), receiver()],
        &["--clock-offset", "multipath_loss_receiver=0"],
    );
    let (top, events) = parse(&both);
    assert_eq!(
        top["otherData"]["metaroce"]["captures"][1]["clock_offset_ns"],
        0
    );
    let pid = pid_named(&events, "network multipath_loss_receiver");
    let tid = tid_named(&events, &pid, DIRECTION);
    let first_retx = on_track(&events, &pid, &tid)
        .into_iter()
        .find(|e| e.name().starts_with("retransmission"))
        .unwrap();
    // B's clock, uncorrected: 84 us plus the 1 ms it runs ahead.
    assert_eq!(first_retx.ts_ns.unwrap() - EPOCH_NS, us(84) + us(1000));

    // A host no capture is named after: refused before the analysis, no
    // output written.
    let tmp = tempfile::tempdir().unwrap();
    let out_path = tmp.path().join("t.json");
    let out = run(&[
        receiver().as_os_str(),
        "-o".as_ref(),
        out_path.as_os_str(),
        "--clock-offset".as_ref(),
        "nosuchhost=5".as_ref(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(!out_path.exists());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("nosuchhost") && err.contains("multipath_loss_receiver"),
        "{err}"
    );
}

/// `--merge`: every event of the profiler trace, unchanged, its top-level
/// keys, and the network's events in its time base, the stall inside the
/// all-reduce kernel it held up.
#[test]
fn merged_trace_keeps_the_profiler_trace_and_its_time_base() {
    let profiler_text = std::fs::read_to_string(profiler_trace()).unwrap();
    let profiler: Value = serde_json::from_str(&profiler_text).unwrap();
    let text = trace(
        &[sender(), receiver()],
        &["--counters", "--merge", profiler_trace().to_str().unwrap()],
    );
    let (top, events) = parse(&text);
    assert_valid(&events);

    // Every profiler event, as a JSON value, in its order.
    let theirs = profiler["traceEvents"].as_array().unwrap();
    assert!(theirs.len() > 10);
    let ours: Vec<&Value> = events.iter().map(|e| &e.value).collect();
    for (i, event) in theirs.iter().enumerate() {
        assert_eq!(ours[i], event, "profiler event {i}");
    }
    for (key, value) in profiler.as_object().unwrap() {
        if key != "traceEvents" {
            assert_eq!(&top[key], value, "top-level {key}");
        }
    }

    // Network pids are not the profiler's.
    let profiler_pids: BTreeSet<String> = theirs.iter().map(|e| e["pid"].to_string()).collect();
    let network_pids: BTreeSet<String> = events[theirs.len()..]
        .iter()
        .map(|e| e.pid().to_string())
        .collect();
    assert!(!network_pids.is_empty());
    assert!(profiler_pids.is_disjoint(&network_pids), "{network_pids:?}");

    // Kineto's base: ts are us since baseTimeNanoseconds.
    let base = i128::from(profiler["baseTimeNanoseconds"].as_u64().unwrap());
    assert_eq!(
        top["otherData"]["metaroce"]["time_base"],
        "us since the profiler's baseTimeNanoseconds"
    );
    let pid = pid_named(&events, "network multipath_loss_sender");
    let tid = tid_named(&events, &pid, DIRECTION);
    let stall = on_track(&events, &pid, &tid)
        .into_iter()
        .find(|e| e.name() == "stall")
        .unwrap();
    let want = &expected()["sender"]["direction_a_to_b"]["stalls"][0];
    let start = EPOCH_NS + i128::from(want["start_ns"].as_u64().unwrap()) - base;
    assert_eq!(stall.ts_ns, Some(start));

    // The stall lies inside the NCCL all-reduce kernel of rank 0.
    let kernel = events[..theirs.len()]
        .iter()
        .find(|e| e.ph() == "X" && e.name().starts_with("ncclKernel_AllReduce"))
        .unwrap();
    let (k0, k1) = (
        kernel.ts_ns.unwrap(),
        kernel.ts_ns.unwrap() + kernel.dur_ns.unwrap(),
    );
    let (s0, s1) = (
        stall.ts_ns.unwrap(),
        stall.ts_ns.unwrap() + stall.dur_ns.unwrap(),
    );
    assert!(
        k0 <= s0 && s1 <= k1,
        "stall {s0}..{s1} outside kernel {k0}..{k1}"
    );
}

/// Two profiler traces with different time bases cannot both stay
/// unchanged: refused, naming both.
#[test]
fn merge_refuses_traces_of_different_time_bases() {
    let tmp = tempfile::tempdir().unwrap();
    let mut other: Value =
        serde_json::from_str(&std::fs::read_to_string(profiler_trace()).unwrap()).unwrap();
    other["baseTimeNanoseconds"] = Value::from(1_764_000_000_000_000_000u64);
    let other_path = tmp.path().join("rank1.json");
    std::fs::write(&other_path, other.to_string()).unwrap();
    let out = run(&[
        sender().as_os_str(),
        "-o".as_ref(),
        tmp.path().join("t.json").as_os_str(),
        "--merge".as_ref(),
        profiler_trace().as_os_str(),
        "--merge".as_ref(),
        other_path.as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("rank1.json") && err.contains("multipath_loss_rank0.trace.json"),
        "{err}"
    );
}

/// A bad profiler trace: exit 1 before any analysis, the message names
/// the file and the place.
#[test]
fn bad_merge_file_is_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let cases: [(&str, &str, &[&str]); 4] = [
        (
            "cut.json",
            "{\"traceEvents\": [\n  {\"ph\": \"X\", \"ts\": 1,\n",
            &["line 3"],
        ),
        (
            "notarray.json",
            "{\"traceEvents\": 5}",
            &["traceEvents is not an array"],
        ),
        (
            "notobject.json",
            "[{\"ph\": \"i\"}, 7]",
            &["traceEvents[1]", "not an object"],
        ),
        (
            "base.json",
            "{\"traceEvents\": [], \"baseTimeNanoseconds\": \"soon\"}",
            &["baseTimeNanoseconds"],
        ),
    ];
    for (name, body, wants) in cases {
        let path = tmp.path().join(name);
        std::fs::write(&path, body).unwrap();
        let out_path = tmp.path().join(format!("{name}.out"));
        let out = run(&[
            sender().as_os_str(),
            "-o".as_ref(),
            out_path.as_os_str(),
            "--merge".as_ref(),
            path.as_os_str(),
        ]);
        assert_eq!(out.status.code(), Some(1), "{name}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(name), "{name}: {err}");
        for want in wants {
            assert!(err.contains(want), "{name}: {err}");
        }
        assert!(!out_path.exists(), "{name}: an output was written");
    }
}

/// Pipelined messages, captured at the sender: three 2-packet messages
/// sent 2 us apart, each acknowledged 10 us after its first packet (so
/// they are all in flight at once), then a fourth after the others.
fn pipelined_capture(path: &Path) {
    use proto_parse::build::UdpFrameBuilder;
    use proto_parse::capture::PcapWriter;
    use proto_parse::metaroce::{
        AckRepr, Body, DataRepr, FeedbackRepr, Flags, Op, Repr, SackBitmap,
    };
    static PAYLOAD: [u8; 64] = [0x5a; 64];
    let a = "10.0.0.1:49152".parse().unwrap();
    let b = "10.0.0.2:4794".parse().unwrap();
    let (to_b, to_a) = (UdpFrameBuilder::new(a, b), UdpFrameBuilder::new(b, a));
    let repr = |psn: u32, path_seq: u16, body: Body, flags: Flags, payload: &'static [u8]| Repr {
        flags,
        tx_attempt: 0,
        ev: 0,
        path_seq,
        dst_conn: 2,
        src_conn: 1,
        psn,
        tx_ts: psn * 1000,
        body,
        tlvs: Vec::new(),
        payload,
        crc: false,
    };
    // (time us, frame)
    let mut frames: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut data = |msg: u32, start_us: u64| {
        for (i, flags) in [(0u32, Flags::SOM), (1, Flags::EOM)] {
            let psn = msg * 2 + i;
            let body = Body::Data(DataRepr {
                op: Op::Write {
                    remote_va: 0x1000,
                    rkey: 7,
                },
                payload_len: 64,
                msg_id: msg,
                msg_offset: i * 64,
                msg_len: 128,
            });
            let r = repr(psn, psn as u16 + 1, body, flags, &PAYLOAD);
            frames.push((start_us + u64::from(i), to_b.build(&r.to_vec())));
        }
    };
    for (msg, start) in [(0, 0), (1, 2), (2, 4), (3, 30)] {
        data(msg, start);
    }
    let mut ack = |cum: u32, at_us: u64, seq: u16| {
        let body = Body::Ack(AckRepr {
            feedback: FeedbackRepr {
                echo_psn: cum - 1,
                echo_tx_ts: (cum - 1) * 1000,
                ..FeedbackRepr::default()
            },
            sack_base: cum,
            sack: SackBitmap::default(),
        });
        let mut r = repr(cum, seq, body, Flags::empty(), &[]);
        (r.dst_conn, r.src_conn) = (1, 2);
        frames.push((at_us, to_a.build(&r.to_vec())));
    };
    for (i, (cum, at)) in [(2, 10), (4, 12), (6, 14), (8, 40)].into_iter().enumerate() {
        ack(cum, at, i as u16 + 1);
    }
    frames.sort_by_key(|f| f.0);
    let mut w = PcapWriter::create(path).unwrap();
    for (t, frame) in frames {
        w.write_frame(1_700_000_000_000_000_000 + t * 1000, &frame)
            .unwrap();
    }
    w.flush().unwrap();
}

/// Messages in flight together go on as many message tracks as were in
/// flight at once, never overlapping on one; a later message takes the
/// first track again.
#[test]
fn overlapping_messages_spread_over_message_tracks() {
    let tmp = tempfile::tempdir().unwrap();
    let pcap = tmp.path().join("pipelined.pcap");
    pipelined_capture(&pcap);
    let text = trace(&[pcap], &[]);
    let (_, events) = parse(&text);
    assert_valid(&events);
    let pid = pid_named(&events, "network pipelined");
    let direction = "10.0.0.1:1 -> 10.0.0.2:2";
    let lanes: Vec<Value> = ["", " (2)", " (3)"]
        .iter()
        .map(|n| tid_named(&events, &pid, &format!("{direction} messages acked{n}")))
        .collect();
    let spans = |tid: &Value| -> Vec<(String, i128, i128)> {
        on_track(&events, &pid, tid)
            .iter()
            .map(|e| {
                let t0 = e.ts_ns.unwrap() - 1_700_000_000_000_000_000;
                (e.name().to_string(), t0, e.dur_ns.unwrap())
            })
            .collect()
    };
    assert_eq!(
        spans(&lanes[0]),
        vec![
            ("write 0".to_string(), us(0), us(10)),
            ("write 3".to_string(), us(30), us(10))
        ]
    );
    assert_eq!(
        spans(&lanes[1]),
        vec![("write 1".to_string(), us(2), us(10))]
    );
    assert_eq!(
        spans(&lanes[2]),
        vec![("write 2".to_string(), us(4), us(10))]
    );
}

/// The public RoCEv2 captures: valid traces, each completed message on
/// its request flow's message tracks (as many as the report counts), and
/// each flow's bytes in flight peaking where the report says.
#[test]
fn rocev2_captures_give_valid_traces() {
    let real = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/real");
    let mut flows_seen = 0;
    for name in [
        "montybeatnik_roce_capture_read-write-ecn.pcap",
        "montybeatnik_test.pcap",
        "oferby_proxy_roce.pcap",
    ] {
        let pcap = real.join(name);
        let (_, events) = parse(&trace(std::slice::from_ref(&pcap), &["--counters"]));
        assert_valid(&events);
        let report = Command::new(BIN)
            .args(["report", "--json"])
            .arg(&pcap)
            .output()
            .unwrap();
        let report: Value = serde_json::from_slice(&report.stdout).unwrap();
        let stem = name.trim_end_matches(".pcap");
        let pid = pid_named(&events, &format!("network {stem}"));
        for flow in report["rocev2"].as_array().unwrap() {
            let track = format!(
                "{} -> {} qp 0x{:06x}",
                flow["src"].as_str().unwrap(),
                flow["dst"].as_str().unwrap(),
                flow["dest_qp"].as_u64().unwrap()
            );
            let message_tids: Vec<Value> = events
                .iter()
                .filter(|e| e.ph() == "M" && e.name() == "thread_name" && e.pid() == &pid)
                .filter(|e| {
                    e.value["args"]["name"]
                        .as_str()
                        .unwrap()
                        .starts_with(&format!("{track} messages"))
                })
                .map(|e| e.value["tid"].clone())
                .collect();
            let messages: usize = message_tids
                .iter()
                .map(|tid| on_track(&events, &pid, tid).len())
                .sum();
            assert_eq!(
                messages as u64,
                flow["messages_completed"].as_u64().unwrap(),
                "{name}: {track}"
            );
            // The bytes in flight counter peaks at the report's maximum
            // (none for a flow that never had any).
            let peak = events
                .iter()
                .filter(|e| e.ph() == "C" && e.pid() == &pid)
                .filter(|e| e.name() == format!("bytes in flight {track}"))
                .map(|e| e.value["args"]["bytes"].as_u64().unwrap())
                .max()
                .unwrap_or(0);
            assert_eq!(
                peak,
                flow["max_bytes_in_flight"].as_u64().unwrap(),
                "{name}: {track}"
            );
            flows_seen += 1;
        }
    }
    assert_eq!(flows_seen, 4);
}

/// `-o -` writes the same trace to standard output.
#[test]
fn output_to_stdout_is_the_same_trace() {
    let in_file = trace(&[sender()], &["--counters"]);
    let out = run(&[
        sender().as_os_str(),
        "--counters".as_ref(),
        "-o".as_ref(),
        "-".as_ref(),
    ]);
    assert_eq!(out.status.code(), Some(0));
    let on_stdout = String::from_utf8(out.stdout).unwrap();
    // The metadata names the output's captures by path, the same in both.
    assert_eq!(on_stdout, in_file);
}
