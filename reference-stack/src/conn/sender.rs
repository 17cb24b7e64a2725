//! The send direction's work: posted messages, their packetization into
//! DATA packets under the PSN window and the receiver's credit, the
//! messages waiting for their acknowledgement, and pending READs.

use std::collections::{BTreeMap, VecDeque};

use proto_parse::metaroce::{Body, DataRepr, Flags, Op, Repr, psn_lt};

use super::events::{Completion, CompletionKind, Log};
use super::ts;
use crate::Time;

/// A message not yet fully packetized.
#[derive(Debug)]
struct OutMsg {
    wr_id: u64,
    msg_id: u32,
    op: Op,
    data: Vec<u8>,
    len: u32,
    next_off: u32,
    posted: Time,
    /// Sender completion tracked (SEND/WRITE).
    track: Option<CompletionKind>,
    started: bool,
}

/// A SEND or WRITE waiting for the cumulative ack to pass its last PSN.
#[derive(Debug)]
struct SenderMsg {
    wr_id: u64,
    msg_id: u32,
    kind: CompletionKind,
    len: u32,
    first_psn: u32,
    last_psn: u32,
    done_packetizing: bool,
    ok: bool,
    posted: Time,
}

/// A READ waiting for its response data.
#[derive(Debug)]
struct PendingRead {
    wr_id: u64,
    len: u32,
    buf: Vec<u8>,
    got: u32,
    req_psn: Option<u32>,
    posted: Time,
}

/// Where a new DATA packet goes and what its header carries besides the
/// message fields.
pub(super) struct DataHeader {
    pub(super) psn: u32,
    pub(super) ev: u16,
    pub(super) path_seq: u16,
    pub(super) dst_conn: u32,
    pub(super) src_conn: u32,
    pub(super) crc: bool,
}

/// A first transmission written to the caller's buffer.
pub(super) struct NewPacket {
    pub(super) len: usize,
    pub(super) msg_id: u32,
    pub(super) msg_offset: u32,
    pub(super) payload_len: u16,
    pub(super) op: &'static str,
}

#[derive(Debug)]
pub(super) struct Sender {
    queue: VecDeque<OutMsg>,
    next_msg_id: u32,
    next_wr_id: u64,
    /// Tracked messages in PSN order.
    acked_wait: VecDeque<SenderMsg>,
    reads: BTreeMap<u32, PendingRead>,
    /// The receiver's credit (bytes beyond its cumulative ack);
    /// `u64::MAX`: unlimited.
    credit: u64,
    pub(super) close_requested: bool,
}

impl Sender {
    pub(super) fn new() -> Self {
        Sender {
            queue: VecDeque::new(),
            next_msg_id: 0,
            next_wr_id: 1,
            acked_wait: VecDeque::new(),
            reads: BTreeMap::new(),
            credit: u64::MAX,
            close_requested: false,
        }
    }

    /// Releases queued and partial messages (the connection closed).
    pub(super) fn clear(&mut self) {
        self.queue.clear();
    }

    pub(super) fn next_wr_id(&mut self) -> u64 {
        let id = self.next_wr_id;
        self.next_wr_id += 1;
        id
    }

    /// Work requests not yet completed (queued, in flight, or READs waiting).
    pub(super) fn pending_work(&self) -> usize {
        self.queue.len() + self.acked_wait.len() + self.reads.len()
    }

    pub(super) fn queued_bytes(&self) -> u64 {
        self.queue
            .iter()
            .map(|m| u64::from(m.len - m.next_off))
            .sum()
    }

    pub(super) fn set_credit(&mut self, credit: u32) {
        self.credit = if credit != u32::MAX {
            u64::from(credit)
        } else {
            u64::MAX
        };
    }

    /// Queues a message; its work request id.
    pub(super) fn push(
        &mut self,
        now: Time,
        op: Op,
        data: Vec<u8>,
        len: u32,
        track: Option<CompletionKind>,
    ) -> u64 {
        let wr_id = self.next_wr_id();
        let msg_id = self.next_msg_id;
        self.next_msg_id = self.next_msg_id.wrapping_add(1);
        self.queue.push_back(OutMsg {
            wr_id,
            msg_id,
            op,
            data,
            len,
            next_off: 0,
            posted: now,
            track,
            started: false,
        });
        wr_id
    }

    pub(super) fn post_read(&mut self, now: Time, len: u32, remote_va: u64, rkey: u32) -> u64 {
        let wr_id = self.push(now, Op::ReadReq { remote_va, rkey }, Vec::new(), len, None);
        let msg_id = self.next_msg_id.wrapping_sub(1);
        self.reads.insert(
            msg_id,
            PendingRead {
                wr_id,
                len,
                buf: vec![0; len as usize],
                got: 0,
                req_psn: None,
                posted: now,
            },
        );
        wr_id
    }

    /// Queues the READ_RESP answering a READ_REQ of the peer.
    pub(super) fn push_read_response(&mut self, now: Time, msg_id: u32, len: u32, bytes: Vec<u8>) {
        self.queue.push_back(OutMsg {
            wr_id: 0,
            msg_id,
            op: Op::ReadResp,
            len,
            data: bytes,
            next_off: 0,
            posted: now,
            track: None,
            started: false,
        });
    }

    /// The payload size of the next DATA packet, if the PSN window
    /// (`inflight_psns` of `window_packets`) and the receiver's credit
    /// allow one.
    pub(super) fn next_chunk(
        &self,
        inflight_psns: u64,
        window_packets: u32,
        mtu: u16,
    ) -> Option<u32> {
        let m = self.queue.front()?;
        if inflight_psns >= u64::from(window_packets) {
            return None;
        }
        let mtu = u64::from(mtu);
        // The credit counts bytes beyond the cumulative ack at the time
        // the feedback left; what we sent since is already inside it.
        if self.credit != u64::MAX
            && inflight_psns > 0
            && (inflight_psns + 1) * mtu > self.credit + inflight_psns * mtu
        {
            return None;
        }
        Some(match m.op {
            Op::ReadReq { .. } => 0,
            _ => (m.len - m.next_off).min(mtu as u32),
        })
    }

    /// Writes the next `chunk` bytes of the front message as a DATA packet
    /// into `buf` (SOM on its first packet, EOM on its last, AR on the last
    /// one queued) and records which message it carries.
    // One sequence: the header fields follow from the message's state and
    // the bookkeeping after emission from the same fields (kept together so
    // that the PSN ranges of tracked messages cannot drift from what left).
    pub(super) fn emit_next(
        &mut self,
        now: Time,
        chunk: u32,
        h: &DataHeader,
        buf: &mut Vec<u8>,
    ) -> Option<NewPacket> {
        let more_queued = self.queue.len() > 1;
        let m = self.queue.front_mut()?;
        let off = m.next_off;
        let end = off + chunk;
        let is_read = matches!(m.op, Op::ReadReq { .. });
        let last = end >= m.len || is_read;
        let mut flags = Flags::empty();
        if off == 0 {
            flags |= Flags::SOM;
        }
        if last {
            flags |= Flags::EOM;
            if !more_queued {
                flags |= Flags::AR;
            }
        }
        let repr = Repr {
            flags,
            tx_attempt: 0,
            ev: h.ev,
            path_seq: h.path_seq,
            dst_conn: h.dst_conn,
            src_conn: h.src_conn,
            psn: h.psn,
            tx_ts: ts(now),
            body: Body::Data(DataRepr {
                op: m.op,
                payload_len: chunk as u16,
                msg_id: m.msg_id,
                msg_offset: off,
                msg_len: m.len,
            }),
            tlvs: Vec::new(),
            payload: &m.data[off as usize..end as usize],
            crc: h.crc,
        };
        let len = repr.buffer_len();
        if buf.len() < len {
            buf.resize(len, 0);
        }
        repr.emit(&mut buf[..len]);
        let packet = NewPacket {
            len,
            msg_id: m.msg_id,
            msg_offset: off,
            payload_len: chunk as u16,
            op: m.op.code().name(),
        };
        let first = !m.started;
        m.started = true;
        m.next_off = end;
        let track = m.track.map(|kind| (kind, m.wr_id, m.len, m.posted));
        if last {
            self.queue.pop_front();
        }
        if is_read && let Some(r) = self.reads.get_mut(&packet.msg_id) {
            r.req_psn = Some(h.psn);
        }
        if let Some((kind, wr_id, len, posted)) = track {
            if first {
                self.acked_wait.push_back(SenderMsg {
                    wr_id,
                    msg_id: packet.msg_id,
                    kind,
                    len,
                    first_psn: h.psn,
                    last_psn: h.psn,
                    done_packetizing: false,
                    ok: true,
                    posted,
                });
            }
            self.extend_tracked(h.psn, last);
        }
        Some(packet)
    }

    /// The newest tracked message now ends at `psn` (`last`: its final one).
    fn extend_tracked(&mut self, psn: u32, last: bool) {
        if let Some(sm) = self.acked_wait.back_mut() {
            sm.last_psn = psn;
            sm.done_packetizing = last;
        }
    }

    /// Completes the messages whose last PSN is below the cumulative ack.
    pub(super) fn complete_acked(&mut self, now: Time, snd_una: u32, log: &mut Log) {
        while let Some(m) = self.acked_wait.front() {
            if !m.done_packetizing || !psn_lt(m.last_psn, snd_una) {
                break;
            }
            let Some(m) = self.acked_wait.pop_front() else {
                break;
            };
            log.complete_sender(
                now,
                Completion {
                    kind: m.kind,
                    wr_id: m.wr_id,
                    msg_id: m.msg_id,
                    len: m.len,
                    ok: m.ok,
                    imm: None,
                    data: None,
                    latency: now.saturating_sub(m.posted),
                },
            );
        }
    }

    /// NACK REMOTE_ACCESS for `psn`: the message carrying it completes with
    /// `ok: false`.
    pub(super) fn refuse_message_at(&mut self, psn: u32) {
        for m in self.acked_wait.iter_mut() {
            if !psn_lt(psn, m.first_psn) && !psn_lt(m.last_psn, psn) {
                m.ok = false;
            }
        }
    }

    /// NACK REMOTE_ACCESS for a READ_REQ's PSN: the READ completes with
    /// `ok: false`.
    pub(super) fn fail_reads_at(&mut self, now: Time, psn: u32, log: &mut Log) {
        let failed: Vec<u32> = self
            .reads
            .iter()
            .filter(|(_, r)| r.req_psn == Some(psn))
            .map(|(k, _)| *k)
            .collect();
        for msg_id in failed {
            if let Some(r) = self.reads.remove(&msg_id) {
                log.complete_sender(
                    now,
                    Completion {
                        kind: CompletionKind::Read,
                        wr_id: r.wr_id,
                        msg_id,
                        len: r.len,
                        ok: false,
                        imm: None,
                        data: None,
                        latency: now.saturating_sub(r.posted),
                    },
                );
            }
        }
    }

    /// Copies READ_RESP data into the READ's buffer; false when no READ of
    /// that id and length is waiting (the caller checked that the bytes
    /// lie inside `msg_len`).
    pub(super) fn place_read_response(
        &mut self,
        msg_id: u32,
        msg_len: u32,
        offset: u32,
        payload: &[u8],
    ) -> bool {
        let Some(r) = self.reads.get_mut(&msg_id) else {
            return false;
        };
        if r.len != msg_len {
            return false;
        }
        let start = offset as usize;
        r.buf[start..start + payload.len()].copy_from_slice(payload);
        true
    }

    /// Counts `plen` READ_RESP bytes placed; the READ completes when all
    /// arrived.
    pub(super) fn account_read_response(
        &mut self,
        now: Time,
        msg_id: u32,
        plen: u32,
        log: &mut Log,
    ) {
        let done = self.reads.get_mut(&msg_id).is_some_and(|r| {
            r.got += plen;
            r.got >= r.len
        });
        if done && let Some(r) = self.reads.remove(&msg_id) {
            log.complete_sender(
                now,
                Completion {
                    kind: CompletionKind::Read,
                    wr_id: r.wr_id,
                    msg_id,
                    len: r.len,
                    ok: true,
                    imm: None,
                    data: Some(r.buf),
                    latency: now.saturating_sub(r.posted),
                },
            );
        }
    }
}
