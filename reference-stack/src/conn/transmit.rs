//! Packet emission, in priority order: CTRL, feedback, PROBEs,
//! retransmissions, new DATA.

use proto_parse::metaroce::{
    AckRepr, Body, CcAlgo, CnpRepr, CtrlOp, CtrlRepr, DEFAULT_TS_UNIT_PS, Features, FeedbackRepr,
    Flags, Layout, NackRepr, Packet, PacketType, Repr, SackBitmap, psn_diff, udp_source_port,
};

use super::config::{DATA_PACKET_OVERHEAD_ESTIMATE, Misbehaviour, Mode};
use super::receiver::{FbOut, Trigger};
use super::recovery::{Sent, SentState};
use super::sender::DataHeader;
use super::timer::Timer;
use super::{Connection, CtrlOut, State, ts};
use crate::path::PathStatus;
use crate::trace::{TraceEvent, TxCause};
use crate::{Ecn, Time, Transmit};

fn emit_repr(repr: &Repr<'_>, buf: &mut Vec<u8>) -> usize {
    let len = repr.buffer_len();
    if buf.len() < len {
        buf.resize(len, 0);
    }
    repr.emit(&mut buf[..len])
}

impl Connection {
    /// Fills `buf` with the next datagram to send, if any. Call until it
    /// returns `None`, after every input.
    pub fn poll_transmit(&mut self, now: Time, buf: &mut Vec<u8>) -> Option<Transmit> {
        let t = self.next_transmit(now, buf);
        self.arm_stall_timer();
        t
    }

    fn next_transmit(&mut self, now: Time, buf: &mut Vec<u8>) -> Option<Transmit> {
        self.close_if_done(now);
        if let Some(c) = self.ctrl_out.pop_front() {
            return Some(self.emit_ctrl(now, c, buf));
        }
        if self.state == State::Closed {
            return None;
        }
        if self.timers.is_expired(Timer::Ack, now) {
            self.receiver.flush_pending_ack(&mut self.timers);
        }
        if let Some(f) = self.receiver.next_feedback(&mut self.log) {
            return Some(self.emit_feedback(now, f, buf));
        }
        if let Some(i) = self.probes_out.pop_front() {
            return Some(self.emit_probe(now, i, buf));
        }
        if !matches!(self.state, State::Established | State::Closing { .. }) {
            return None;
        }
        if let Some(t) = self.poll_retransmit(now, buf) {
            return Some(t);
        }
        self.poll_new_data(now, buf)
    }

    fn header(&self, ev: u16, path_seq: u16, psn: u32, now: Time, body: Body) -> Repr<'static> {
        Repr {
            flags: Flags::empty(),
            tx_attempt: 0,
            ev,
            path_seq,
            dst_conn: self.remote_id,
            src_conn: self.local_id,
            psn,
            tx_ts: ts(now),
            body,
            tlvs: Vec::new(),
            payload: &[],
            crc: self.crc,
        }
    }

    fn transmit(&self, ev: u16, len: usize, kind: PacketType) -> Transmit {
        Transmit {
            remote: self.remote,
            ev,
            src_port: udp_source_port(ev),
            len,
            ecn: Ecn::Ect0,
            kind,
            conn: self.local_id,
        }
    }

    fn emit_ctrl(&mut self, now: Time, c: CtrlOut, buf: &mut Vec<u8>) -> Transmit {
        self.on_ctrl_sent(now, c);
        let (op, init_psn) = match c {
            CtrlOut::Connect => (CtrlOp::Connect, self.init_psn),
            CtrlOut::Accept => (CtrlOp::Accept, self.init_psn),
            CtrlOut::Close => (CtrlOp::Close, 0),
            CtrlOut::CloseAck => (CtrlOp::CloseAck, 0),
            CtrlOut::Keepalive => (CtrlOp::Keepalive, 0),
            CtrlOut::Abort => (CtrlOp::Abort, 0),
        };
        let mut features = Features::PATH_SEQ | Features::TRIMMING_AWARE;
        if self.crc {
            features |= Features::CRC;
        }
        let cc_algo = match self.cfg.mode {
            Mode::MetaRoce => CcAlgo::DelayBased,
            Mode::GoBackN => CcAlgo::Ecn,
        };
        let ev = self.paths.first_ev();
        let body = Body::Ctrl(CtrlRepr {
            op,
            cc_algo,
            mtu: self.mtu,
            init_psn,
            features,
            ts_unit_ps: DEFAULT_TS_UNIT_PS,
        });
        let mut repr = self.header(ev, 0, 0, now, body);
        if op == CtrlOp::Connect {
            repr.dst_conn = 0;
        }
        let len = emit_repr(&repr, buf);
        self.log.trace(
            now,
            TraceEvent::TxControl {
                kind: "CTRL",
                psn: 0,
                ev,
                path_seq: 0,
                detail: op.name().to_string(),
            },
        );
        self.note_tx(now);
        self.transmit(ev, len, PacketType::Ctrl)
    }

    fn feedback_repr(&self, trig: &Trigger) -> FeedbackRepr {
        FeedbackRepr {
            flags: trig.flags,
            echo_ev: trig.ev,
            echo_psn: trig.psn,
            echo_tx_ts: trig.tx_ts,
            rx_ts: trig.rx_ts,
            ce_count: self.receiver.ce_count(),
            rx_buf_level: self.receiver.buf_level(&self.cfg),
            fwd_hops: 0,
            credit: self.receiver.credit_bytes(&self.cfg, self.mtu),
        }
    }

    /// Feedback travels on the ev of the packet it answers.
    fn emit_feedback(&mut self, now: Time, f: FbOut, buf: &mut Vec<u8>) -> Transmit {
        // The cumulative ack, in the header's psn (and an ACK's sack_base).
        let mut psn = self.receiver.rcv_nxt;
        let (ev, body, kind, detail) = match f {
            FbOut::Ack(trig) => {
                self.log.stats.acks_tx += 1;
                let mut sack = self.receiver.sack_bitmap(self.cfg.mode);
                if self.cfg.misbehave == Some(Misbehaviour::AckBackwards)
                    && self.log.stats.acks_tx.is_multiple_of(8)
                    && let Some(last) = self.receiver.last_ack_cum
                {
                    // Test only: one below the last ACK's cumulative ack.
                    psn = last.wrapping_sub(1);
                    sack = SackBitmap::with_words(0);
                } else {
                    self.receiver.last_ack_cum = Some(psn);
                }
                let ack = AckRepr {
                    feedback: self.feedback_repr(&trig),
                    sack_base: psn,
                    sack,
                };
                (trig.ev, Body::Ack(ack), PacketType::Ack, String::new())
            }
            FbOut::Nack {
                trig,
                code,
                psn,
                rnr,
            } => {
                let nack = NackRepr {
                    feedback: self.feedback_repr(&trig),
                    code,
                    rnr_timer: rnr,
                    nack_psn: psn,
                };
                let detail = format!("{} {}", code.name(), psn);
                (trig.ev, Body::Nack(nack), PacketType::Nack, detail)
            }
            FbOut::Cnp { trig, reason } => {
                let cnp = CnpRepr {
                    feedback: self.feedback_repr(&trig),
                    reason,
                };
                let detail = reason.name().to_string();
                (trig.ev, Body::Cnp(cnp), PacketType::Cnp, detail)
            }
            FbOut::ProbeReply(trig) => {
                let body = Body::ProbeReply(self.feedback_repr(&trig));
                (trig.ev, body, PacketType::ProbeReply, String::new())
            }
        };
        let path_seq = self.paths.next_path_seq(ev);
        let repr = self.header(ev, path_seq, psn, now, body);
        let len = emit_repr(&repr, buf);
        let kind_name = kind.name();
        self.log.trace(
            now,
            TraceEvent::TxControl {
                kind: kind_name,
                psn,
                ev,
                path_seq,
                detail,
            },
        );
        self.note_tx(now);
        self.transmit(ev, len, kind)
    }

    fn emit_probe(&mut self, now: Time, i: usize, buf: &mut Vec<u8>) -> Transmit {
        let ev = self.paths.paths[i].ev;
        let seq = match self.paths.paths[i].status {
            PathStatus::Probing { seq, .. } => seq,
            _ => 0,
        };
        let path_seq = self.paths.next_path_seq(ev);
        let repr = self.header(ev, path_seq, seq, now, Body::Probe);
        let len = emit_repr(&repr, buf);
        self.log.trace(
            now,
            TraceEvent::TxControl {
                kind: "PROBE",
                psn: seq,
                ev,
                path_seq,
                detail: String::new(),
            },
        );
        self.note_tx(now);
        self.transmit(ev, len, PacketType::Probe)
    }

    fn poll_retransmit(&mut self, now: Time, buf: &mut Vec<u8>) -> Option<Transmit> {
        let resent = self.with_recovery(|r, ctx| r.poll_retransmit(now, buf, ctx))?;
        self.note_tx(now);
        if resent.attempts > self.cfg.max_retries {
            let (psn, attempts) = (resent.psn, resent.attempts);
            self.abort(now, format!("PSN {psn} retransmitted {attempts} times"));
        }
        Some(self.transmit(resent.ev, resent.len, PacketType::Data))
    }

    /// The next DATA packet of the queued messages, if the window, the
    /// credit and a path's congestion window allow it.
    fn poll_new_data(&mut self, now: Time, buf: &mut Vec<u8>) -> Option<Transmit> {
        let sent = &self.recovery.sent;
        let inflight_psns = psn_diff(sent.una(), sent.nxt()) as u64;
        let chunk = self
            .sender
            .next_chunk(inflight_psns, self.cfg.window_packets, self.mtu)?;
        let estimate = u64::from(chunk) + DATA_PACKET_OVERHEAD_ESTIMATE;
        let i = self.paths.pick(self.cfg.spray, estimate, None)?;
        let ev = self.paths.paths[i].ev;
        let header = DataHeader {
            psn: self.recovery.sent.nxt(),
            ev,
            path_seq: self.paths.next_path_seq(ev),
            dst_conn: self.remote_id,
            src_conn: self.local_id,
            crc: self.crc,
        };
        let p = self.sender.emit_next(now, chunk, &header, buf)?;
        let len = p.len;
        let bytes = buf[..len].to_vec();
        // The packet was just emitted by proto-parse: its layout parses.
        let layout = Packet::new_checked(&bytes[..])
            .and_then(|pkt| pkt.layout(len))
            .unwrap_or(Layout {
                header_len: 0,
                fixed_len: 0,
                payload: 0..0,
                trailer: None,
                trimmed: false,
                wire_len: len,
            });
        let trace = TraceEvent::Tx {
            psn: header.psn,
            ev,
            path_seq: header.path_seq,
            tx_attempt: 0,
            msg_id: p.msg_id,
            op: p.op,
            msg_offset: p.msg_offset,
            payload_len: p.payload_len,
            retransmission: false,
            cause: TxCause::New,
        };
        let sent = Sent {
            bytes,
            layout,
            ev,
            sent_at: now,
            tx_ts: ts(now),
            attempts: 0,
            state: SentState::Outstanding,
            in_flight: true,
            sampled: false,
            ack_req: false,
            msg_id: p.msg_id,
            msg_offset: p.msg_offset,
            payload_len: p.payload_len,
            op: p.op,
            cause: TxCause::New,
        };
        self.log.stats.data_tx += 1;
        self.log.stats.data_tx_bytes += u64::from(chunk);
        self.paths.on_sent(i, now, len as u64, false);
        self.with_recovery(|r, ctx| r.on_new_packet(now, sent, ctx));
        self.log.trace(now, trace);
        self.note_tx(now);
        Some(self.transmit(ev, len, PacketType::Data))
    }
}
