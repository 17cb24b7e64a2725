//! What the detail view of a RoCEv2 flow shows beyond the engine's
//! [`RoceFlowReport`]: PSN positions (first, highest, acknowledged),
//! retransmission kinds, NAK codes and ECN marks. Nothing is analysed here:
//! each packet's [`Verdict`] says which engine flow it belongs to
//! (`Verdict::flow`, matched by the engine, responses included) and what
//! it was (retransmission kind, NAK syndrome, cumulative ack advance); this
//! table only files those facts and the packet's own PSN, ECN and BTH bits
//! under the flow.
//!
//! Entries are indexed by the engine's flow index (stable until the flow is
//! evicted); an index reused by a new flow is recognised at its first
//! request (another key) and starts over.

use std::collections::HashMap;

use analyzer::engine::{Observation, RetxKind, RoceFlowReport, RoceObs, Verdict};
use proto_parse::rocev2::{NakCode, Opcode, Service, Syndrome};

use crate::model::{RoceDetail, RoceKey};

const PSN_MASK: u32 = 0x00FF_FFFF;

/// True when `a` is after `b` in 24-bit serial arithmetic.
fn psn_after(a: u32, b: u32) -> bool {
    let d = a.wrapping_sub(b) & PSN_MASK;
    d != 0 && d < 1 << 23
}

/// Responses travel from the responder to the requester's QP; everything
/// else of an RC flow is a request.
pub fn is_response(op: Opcode) -> bool {
    matches!(
        op,
        Opcode::RcAcknowledge
            | Opcode::RcAtomicAcknowledge
            | Opcode::RcRdmaReadResponseFirst
            | Opcode::RcRdmaReadResponseMiddle
            | Opcode::RcRdmaReadResponseLast
            | Opcode::RcRdmaReadResponseOnly
            | Opcode::Cnp
    ) || op.service() == Service::Cnp
}

/// The name of a NAK code (IBTA table 43).
pub fn nak_name(code: NakCode) -> &'static str {
    match code {
        NakCode::PsnSequenceError => "PSN sequence error",
        NakCode::InvalidRequest => "invalid request",
        NakCode::RemoteAccessError => "remote access error",
        NakCode::RemoteOperationalError => "remote operational error",
        NakCode::InvalidRdRequest => "invalid RD request",
        NakCode::Unknown(_) => "reserved code",
    }
}

#[derive(Debug, Clone)]
struct Track {
    key: RoceKey,
    detail: RoceDetail,
}

/// Per engine flow index, what the verdicts said.
#[derive(Debug, Default)]
pub struct RoceTracker {
    flows: Vec<Option<Track>>,
}

impl RoceTracker {
    pub fn reset(&mut self) {
        self.flows.clear();
    }

    /// Files one RoCEv2 packet and its verdict.
    pub fn record(&mut self, obs: &Observation, r: &RoceObs, v: &Verdict) {
        let Some(i) = v.flow else { return };
        let i = i as usize;
        let psn = r.psn & PSN_MASK;
        let response = is_response(r.opcode);
        if !response {
            let key = RoceKey {
                src: obs.src,
                dst: obs.dst,
                dest_qp: r.dest_qp,
            };
            if self.flows.len() <= i {
                self.flows.resize(i + 1, None);
            }
            let slot = &mut self.flows[i];
            if slot.as_ref().is_none_or(|t| t.key != key) {
                *slot = Some(Track {
                    key,
                    detail: RoceDetail::default(),
                });
            }
        }
        // A response always follows a request of its flow.
        let Some(Some(t)) = self.flows.get_mut(i) else {
            return;
        };
        let d = &mut t.detail;
        if obs.ecn != 0 {
            d.ect_packets += 1;
        }
        d.fecn += u64::from(r.fecn);
        d.becn += u64::from(r.becn);
        if response {
            if v.cum_ack_advance.is_some() {
                // The engine acks through the PSN of an ACK or READ
                // response, and through the one before a NAK's.
                let through = if v.rocev2_nak.is_some() {
                    psn.wrapping_sub(1) & PSN_MASK
                } else {
                    psn
                };
                d.acked_psn = Some(through);
            }
            if let Some(Syndrome::Nak(code)) = v.rocev2_nak.map(Syndrome::from_byte) {
                *d.naks_by_code.entry(nak_name(code)).or_default() += 1;
            }
        } else {
            match v.retransmission.map(|x| x.kind) {
                Some(RetxKind::Fast) => d.fast_retransmissions += 1,
                Some(RetxKind::Timeout) => d.timeout_retransmissions += 1,
                Some(RetxKind::Spurious) => d.spurious_retransmissions += 1,
                None => {
                    d.first_psn.get_or_insert(psn);
                    if d.highest_psn.is_none_or(|h| psn_after(psn, h)) {
                        d.highest_psn = Some(psn);
                    }
                }
            }
        }
    }

    /// The details of `flows` (the engine report's order).
    pub fn details(&self, flows: &[RoceFlowReport]) -> Vec<RoceDetail> {
        let by_key: HashMap<RoceKey, &RoceDetail> = self
            .flows
            .iter()
            .flatten()
            .map(|t| (t.key, &t.detail))
            .collect();
        flows
            .iter()
            .map(|f| {
                let mut d = by_key
                    .get(&RoceKey::of(f))
                    .map(|d| (*d).clone())
                    .unwrap_or_default();
                if let (Some(h), Some(a)) = (d.highest_psn, d.acked_psn)
                    && psn_after(h, a)
                {
                    d.outstanding_psns = h.wrapping_sub(a) & PSN_MASK;
                }
                d
            })
            .collect()
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn psn_serial_order_wraps() {
        assert!(psn_after(1, 0));
        assert!(!psn_after(0, 0));
        assert!(!psn_after(0, 1));
        assert!(psn_after(0, PSN_MASK));
        assert!(psn_after(5, PSN_MASK - 5));
    }

    #[test]
    fn responses_and_requests() {
        assert!(is_response(Opcode::RcAcknowledge));
        assert!(is_response(Opcode::Cnp));
        assert!(is_response(Opcode::RcRdmaReadResponseOnly));
        assert!(!is_response(Opcode::RcSendOnly));
        assert!(!is_response(Opcode::RcRdmaReadRequest));
    }
}
