//! A DATA packet of the direction: its PSN's window slot, bytes in
//! flight, reordering; retransmissions go to `retransmissions.rs`,
//! messages to `messages.rs`.

use super::{Direction, Tx};
use crate::engine::context::PacketContext;
use crate::engine::window::{diff, lt};
use crate::observation::{DataObs, MrObs};

impl Direction {
    /// A DATA packet of this direction. Returns the msg_id of a READ_RESP
    /// message whose last byte arrived (the engine then completes the READ
    /// on the reverse direction).
    pub(crate) fn on_data(
        &mut self,
        pkt: &mut PacketContext<'_>,
        mr: &MrObs,
        d: &DataObs,
        ce: bool,
    ) -> Option<u32> {
        let (frame, ts, cfg) = (pkt.frame, pkt.ts, pkt.cfg);
        let psn = mr.psn;
        self.c.data_packets += 1;
        self.c.data_bytes += u64::from(d.actual_len);
        self.first_data_ts.get_or_insert(ts);
        self.last_data_ts = ts;
        if d.trimmed {
            self.c.trimmed += 1;
            pkt.v.trimmed = true;
        }
        if ce {
            self.c.ce_marked += 1;
            pkt.v.ce_marked = true;
        }
        self.check_stall(ts, cfg);
        let was_outstanding = self.outstanding();

        let below_cum = self.cum.is_some_and(|c| lt(psn, c));
        let tx = Tx {
            frame,
            ts,
            tx_ts: mr.tx_ts,
            ev: mr.ev,
            sampled: false,
        };
        let slot = if below_cum {
            self.window.get_mut(psn)
        } else {
            // Slots dropped on overflow leave the bytes in flight (cold:
            // the closure runs on the out-of-line path only).
            let c = &mut self.c;
            self.window.entry(psn, |s| {
                c.max_bytes_in_flight = c.max_bytes_in_flight.max(c.bytes_in_flight);
                c.bytes_in_flight = c.bytes_in_flight.saturating_sub(u64::from(s.flight));
            })
        };
        let seen_before = slot.as_ref().is_some_and(|s| s.seen);
        let is_retx = mr.tx_attempt > 0 || seen_before || below_cum;

        if is_retx {
            self.on_retransmission(pkt, psn, tx, mr, d.payload_len, below_cum);
            if !below_cum && self.highest.is_none_or(|h| lt(h, psn)) {
                self.highest = Some(psn);
            }
        } else {
            if let Some(slot) = slot {
                slot.seen = true;
                slot.first = tx;
                slot.last = tx;
                slot.count = 1;
                if !slot.sacked {
                    slot.flight = d.payload_len;
                    self.c.bytes_in_flight += u64::from(d.payload_len);
                }
            }
            if !d.trimmed {
                self.c.goodput_bytes += u64::from(d.payload_len);
            }
            // One look at the highest PSN for both questions (serial
            // order: `lt` is false both ways at a distance of 2^31).
            match self.highest {
                Some(h) if lt(psn, h) => {
                    let dist = diff(psn, h) as u32;
                    self.c.out_of_order += 1;
                    self.max_reorder = self.max_reorder.max(dist);
                    pkt.v.out_of_order = Some(dist);
                }
                Some(h) if !lt(h, psn) => {}
                _ => self.highest = Some(psn),
            }
        }
        if !was_outstanding && self.outstanding() {
            self.stall_ref = ts;
        }
        pkt.v.stall = self.stall_mark(ts);

        if below_cum {
            return None;
        }
        self.on_message(pkt, psn, mr.flags, d)
    }
}
