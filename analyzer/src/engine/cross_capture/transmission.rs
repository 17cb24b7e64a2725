//! A transmission as the matcher keys it.

use std::net::IpAddr;

use proto_parse::metaroce::PacketType;
use proto_parse::rocev2::{Opcode, Service};

use super::super::direction::DirKey;
use super::{FlowId, FlowPath, TxKey};
use crate::observation::{MrBody, ObsKind, Observation};

/// A transmission as the matcher keys it, for callers that hold packets
/// as rows rather than as [`Observation`]s (the Spark reduce over every
/// host's `packets` table, through the `metaroce` Python package): built by
/// [`Transmission::matchable`] from the export's columns, matched by
/// [`CrossCapture::observe_transmission`] with the rules of
/// [`CrossCapture::observe`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Transmission {
    pub rocev2: bool,
    pub src: IpAddr,
    pub dst: IpAddr,
    /// MetaRoCE: the direction's connection ids. RoCEv2: 0 and the
    /// destination QP.
    pub src_conn: u32,
    pub dst_conn: u32,
    /// MetaRoCE type or RoCEv2 opcode.
    pub ptype: u8,
    pub psn: u32,
    /// MetaRoCE tx_ts; 0 for RoCEv2.
    pub tx_ts: u32,
    /// MetaRoCE ev; RoCEv2: the UDP source port (the entropy ECMP hashes).
    pub ev: u16,
    /// MetaRoCE path_seq; 0 for RoCEv2.
    pub path_seq: u16,
}

impl Transmission {
    /// The transmission `obs` is a copy of; `None` for packets that are
    /// not matched across captures: malformed ones, MetaRoCE CTRL and
    /// RoCEv2 CNPs (they carry no PSN of their own).
    pub fn of(obs: &Observation) -> Option<Transmission> {
        if obs.malformed {
            return None;
        }
        match &obs.kind {
            ObsKind::MetaRoce(mr) => {
                if matches!(mr.body, MrBody::Ctrl(_) | MrBody::Malformed) {
                    return None;
                }
                Some(Transmission {
                    rocev2: false,
                    src: obs.src,
                    dst: obs.dst,
                    src_conn: mr.src_conn,
                    dst_conn: mr.dst_conn,
                    ptype: u8::from(mr.ptype),
                    psn: mr.psn,
                    tx_ts: mr.tx_ts,
                    ev: mr.ev,
                    path_seq: mr.path_seq,
                })
            }
            ObsKind::RoceV2(r) => {
                if r.opcode.service() == Service::Cnp {
                    return None;
                }
                Some(Transmission {
                    rocev2: true,
                    src: obs.src,
                    dst: obs.dst,
                    src_conn: 0,
                    dst_conn: r.dest_qp,
                    ptype: u8::from(r.opcode),
                    psn: r.psn,
                    tx_ts: 0,
                    ev: obs.src_port,
                    path_seq: 0,
                })
            }
        }
    }

    /// The transmission of one row of the export's `packets` table
    /// (`self`, with `ptype` its `type_code`; for RoCEv2, `ev` the row's
    /// `src_port` and `dst_conn` its `dest_qp`), or `None` when
    /// [`Transmission::of`] would exclude it: `malformed`, MetaRoCE CTRL,
    /// RoCEv2 CNP. RoCEv2's MetaRoCE-only fields are set to 0.
    pub fn matchable(self, malformed: bool) -> Option<Transmission> {
        let excluded = if self.rocev2 {
            Opcode::from(self.ptype).service() == Service::Cnp
        } else {
            PacketType::from(self.ptype) == PacketType::Ctrl
        };
        if malformed || excluded {
            return None;
        }
        Some(if self.rocev2 {
            Transmission {
                src_conn: 0,
                tx_ts: 0,
                path_seq: 0,
                ..self
            }
        } else {
            self
        })
    }

    /// The path it took, as the row mode and the reports name paths.
    pub fn path(&self) -> FlowPath {
        FlowPath {
            rocev2: self.rocev2,
            src: self.src,
            dst: self.dst,
            src_conn: self.src_conn,
            dst_conn: self.dst_conn,
            ev: self.ev,
        }
    }

    pub(super) fn dir(&self) -> DirKey {
        self.path().dir()
    }

    pub(super) fn flow(&self) -> FlowId {
        self.path().flow()
    }

    pub(super) fn key(&self) -> TxKey {
        TxKey {
            flow: self.flow(),
            ptype: self.ptype,
            psn: self.psn,
            tx_ts: self.tx_ts,
            ev: self.ev,
            path_seq: self.path_seq,
        }
    }
}
