//! Collecting the trace: the pipeline's verdicts, completed messages and
//! final reports become events on connection tracks and 1 ms counter
//! buckets, per capture.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use analyzer::engine::{
    Engine, FbKind, MrBody, MsgDone, MsgView, ObsKind, Observation, Report, RetxKind, StallReport,
    Verdict,
};
use proto_parse::metaroce::{CnpReason, NackCode};

use super::Tracer;
use crate::pipeline::Sink;

/// A connection direction as its track names it: a MetaRoCE direction, or
/// a RoCEv2 flow (requests from `src` to `dst`'s QP).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) enum Conn {
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
    pub(super) fn name(&self) -> String {
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
pub(super) enum What {
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
pub(super) struct Event {
    pub(super) ts_ns: u64,
    pub(super) dur_ns: Option<u64>,
    pub(super) track: u32,
    pub(super) what: What,
}

/// Counter values of one connection direction in one 1 ms bucket.
#[derive(Debug, Default, Clone)]
pub(super) struct Bucket {
    pub(super) goodput_bytes: u64,
    pub(super) ce_marked: u64,
    /// By ev (RoCEv2: `None`, it has no paths).
    pub(super) retransmissions: BTreeMap<Option<u16>, u64>,
}

/// Counter buckets are this long.
pub(super) const BUCKET_NS: u64 = 1_000_000;

/// The bytes in flight of one connection direction as counter samples: in
/// each millisecond it changed, its largest value then, and, when it ended
/// the millisecond lower, that value from the next millisecond on (a
/// counter holds its value until the next sample: during a stall it
/// holds the bytes stuck in flight). The step function the samples draw
/// is the largest value of every millisecond.
#[derive(Debug, Default)]
pub(super) struct InFlight {
    /// The millisecond being filled and its largest value so far.
    pub(super) open: Option<(u64, u64)>,
    /// The latest value.
    pub(super) last: u64,
    /// (millisecond, bytes), in time order.
    pub(super) samples: Vec<(u64, u64)>,
}

impl InFlight {
    pub(super) fn record(&mut self, ts_ns: u64, bytes: u64) {
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
    pub(super) fn close(&mut self, next: Option<u64>) {
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
pub(super) struct CaptureTrace {
    pub(super) stem: String,
    pub(super) path: PathBuf,
    /// Addresses seen, for the process's label; the last packet's pair
    /// (most packets repeat it: no set lookup for them).
    pub(super) addresses: BTreeSet<IpAddr>,
    pub(super) last_pair: Option<(IpAddr, IpAddr)>,
    /// Connection tracks, in order of first appearance.
    pub(super) conns: Vec<Conn>,
    pub(super) conn_index: BTreeMap<Conn, u32>,
    /// RoCEv2: the request flow of each engine flow index (a response
    /// names its request flow only through the verdict's `flow`).
    pub(super) roce_flows: BTreeMap<u32, Conn>,
    pub(super) events: Vec<Event>,
    /// (connection track, bucket) -> counters.
    pub(super) buckets: BTreeMap<(u32, u64), Bucket>,
    /// The connection of the last packet's verdict `flow` (a feedback's is
    /// the direction it acknowledges), for `flow_state`.
    pub(super) flow_conn: Option<Conn>,
    /// Bytes in flight by connection; only those that ever had any.
    pub(super) in_flight: BTreeMap<Conn, InFlight>,
}

impl CaptureTrace {
    pub(super) fn track(&mut self, conn: Conn) -> u32 {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_stay_small() {
        // What the memory note in `super` promises (a boxed stall keeps it so).
        assert!(std::mem::size_of::<Event>() <= 72);
    }
}
