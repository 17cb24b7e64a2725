//! Writing the collected events as Chrome trace event JSON: metadata of
//! the process and its tracks, events by time, counter samples.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::io::{self, Write};

use serde_json::{Value, json};

use analyzer::engine::MsgView;

use super::collect::{BUCKET_NS, Bucket, CaptureTrace, Conn, What};

/// Writes `,` before every element but the first.
pub(super) fn sep(out: &mut dyn Write, first: &mut bool) -> io::Result<()> {
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
pub(super) fn write_capture(
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn micros_are_exact() {
        assert_eq!(micros(1_764_000_000_000_200_000), "1764000000000200");
        assert_eq!(micros(1_764_000_000_000_200_123), "1764000000000200.123");
        assert_eq!(micros(1_500), "1.5");
        assert_eq!(micros(-2_010), "-2.01");
        assert_eq!(micros(0), "0");
    }
}
