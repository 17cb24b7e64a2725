//! Messages: delivery (every byte captured, receiver view), completion
//! (the cumulative ack passes the last PSN, sender view, in
//! `feedback.rs`) and READs (request to the last response byte).

use proto_parse::metaroce::{DataOp, Flags};

use super::Direction;
use crate::engine::context::PacketContext;
use crate::engine::interval::IntervalSet;
use crate::engine::verdict::{MsgDone, MsgView};
use crate::engine::window::lt;
use crate::observation::DataObs;

#[derive(Debug, Clone)]
pub(super) struct Msg {
    pub(super) op: DataOp,
    pub(super) first_ts: u64,
    pub(super) som_ts: Option<u64>,
    pub(super) msg_len: u32,
    pub(super) last_psn: Option<u32>,
    pub(super) bytes: IntervalSet,
    pub(super) delivered: bool,
}

pub(super) fn op_index(op: DataOp) -> Option<usize> {
    match op {
        DataOp::Send | DataOp::SendImm => Some(0),
        DataOp::Write | DataOp::WriteImm => Some(1),
        _ => None,
    }
}

/// Op name as the verdict and report show it.
pub(crate) fn op_name(op: DataOp) -> &'static str {
    match op {
        DataOp::Send | DataOp::SendImm => "send",
        DataOp::Write | DataOp::WriteImm => "write",
        DataOp::ReadReq | DataOp::ReadResp => "read",
        DataOp::Unknown(_) => "unknown",
    }
}

impl Direction {
    /// A DATA packet's part of its message (not below the cumulative
    /// ack). Returns the msg_id of a READ_RESP message whose last byte
    /// arrived.
    pub(super) fn on_message(
        &mut self,
        pkt: &mut PacketContext<'_>,
        psn: u32,
        flags: Flags,
        d: &DataObs,
    ) -> Option<u32> {
        let (ts, cfg) = (pkt.ts, pkt.cfg);
        let key = (d.msg_id, d.op == DataOp::ReadResp);
        if self.msgs.len() >= cfg.max_messages && !self.msgs.contains_key(&key) {
            self.evict_messages();
        }
        let msg = self.msgs.entry(key).or_insert_with(|| Msg {
            op: d.op,
            first_ts: ts,
            som_ts: None,
            msg_len: d.msg_len,
            last_psn: None,
            bytes: IntervalSet::default(),
            delivered: false,
        });
        if d.msg_offset == 0 && msg.som_ts.is_none() {
            msg.som_ts = Some(ts);
        }
        if flags.contains(Flags::EOM) && msg.last_psn.is_none() {
            msg.last_psn = Some(psn);
            // Keep pending_last sorted by PSN (EOMs arrive nearly in order).
            let mut at = self.pending_last.len();
            while at > 0 && lt(psn, self.pending_last[at - 1].0) {
                at -= 1;
            }
            if self.pending_last.len() >= cfg.max_messages {
                self.pending_last.pop_front();
            }
            let at = at.min(self.pending_last.len());
            // `insert` stays a call even at the end, the usual place.
            if at == self.pending_last.len() {
                self.pending_last.push_back((psn, key.0, key.1));
            } else {
                self.pending_last.insert(at, (psn, key.0, key.1));
            }
        }
        if !d.trimmed {
            let end = d.msg_offset.saturating_add(d.actual_len);
            msg.bytes.insert(d.msg_offset, end);
        }
        let mut read_done = None;
        if !msg.delivered
            && (msg.op == DataOp::ReadReq || msg.msg_len == 0 || msg.bytes.covers(msg.msg_len))
        {
            msg.delivered = true;
            let latency = ts.saturating_sub(msg.first_ts);
            let op = msg.op;
            let som = msg.som_ts.unwrap_or(msg.first_ts);
            self.c.messages_delivered += 1;
            self.msg_delivered.record(latency);
            pkt.v.message_done(
                pkt.done,
                MsgDone {
                    msg_id: d.msg_id,
                    op: op_name(op),
                    view: MsgView::Delivered,
                    latency_ns: latency,
                },
            );
            match op {
                DataOp::ReadReq => {
                    if self.pending_reads.len() >= cfg.max_messages {
                        self.pending_reads.clear();
                        self.messages_evicted += 1;
                    }
                    self.pending_reads.insert(d.msg_id, som);
                }
                DataOp::ReadResp => read_done = Some(d.msg_id),
                _ => {}
            }
        }
        read_done
    }

    pub(super) fn evict_messages(&mut self) {
        // Delivered messages go first (a capture without feedback never
        // acks them); then the oldest. Only undelivered ones are counted.
        let mut ages: Vec<(bool, u64, (u32, bool))> = self
            .msgs
            .iter()
            .map(|(k, m)| (!m.delivered, m.first_ts, *k))
            .collect();
        let n = (ages.len() / 4).max(1).min(ages.len());
        if n == 0 {
            return;
        }
        ages.select_nth_unstable(n - 1);
        for (undelivered, _, k) in &ages[..n] {
            self.msgs.remove(k);
            if *undelivered {
                self.messages_evicted += 1;
            }
        }
    }

    /// The READ request `msg_id` of this direction got its last response
    /// byte at `ts`: the READ's response time. The READ_REQ is one message
    /// of this direction (spec 11.4), completed once, when the cumulative
    /// ack passes it (`advance`, spec 9): this is not a second completion
    /// and adds nothing to `messages_completed`.
    pub(crate) fn complete_read(&mut self, pkt: &mut PacketContext<'_>, msg_id: u32) {
        if let Some(start) = self.pending_reads.remove(&msg_id) {
            let latency = pkt.ts.saturating_sub(start);
            self.by_op[2].record(latency);
            let read = MsgDone {
                msg_id,
                op: "read",
                view: MsgView::Read,
                latency_ns: latency,
            };
            // The READ's completion is what this packet means to the
            // requester: it wins over the response's own delivery.
            pkt.v.message = Some(read);
            pkt.done.push(read);
        }
    }
}
