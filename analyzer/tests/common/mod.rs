//! Scenario scripting: MetaRoCE packets built with `metaroce::Repr`, framed
//! with `UdpFrameBuilder`, decoded back with `frame::decode` and turned into
//! observations, so the whole path the CLI uses is exercised.

#![allow(dead_code)]

pub mod sprayed;

use std::net::{IpAddr, SocketAddr};

use analyzer::engine::{
    DataObs, DirectionReport, Engine, MrBody, MrObs, ObsKind, Observation, Report, Verdict,
};
use proto_parse::build::{ECN_CE, ECN_ECT0, UdpFrameBuilder};
use proto_parse::frame::{self, DecodeConfig, LinkType};
use proto_parse::metaroce::{
    AckRepr, Body, CcAlgo, CnpReason, CnpRepr, CtrlOp, CtrlRepr, DataOp, DataRepr, FbFlags,
    Features, FeedbackRepr, Flags, NackCode, NackRepr, Op, PacketType, Repr, SackBitmap,
    udp_source_port,
};

pub const A: &str = "10.0.0.1";
pub const B: &str = "10.0.0.2";
/// A's connection id, B's connection id.
pub const CONN_A: u32 = 0x11;
pub const CONN_B: u32 = 0x22;
/// Capture clock origin.
pub const T0: u64 = 1_700_000_000_000_000_000;

/// The direction of `report` that sent DATA (the scripts' A to B).
pub fn data_direction(report: &Report) -> &DirectionReport {
    report
        .directions
        .iter()
        .find(|d| d.data_packets > 0)
        .expect("a direction sent DATA")
}

pub fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// Microseconds after T0.
pub fn us(t: u64) -> u64 {
    T0 + t * 1000
}

/// A MetaRoCE packet from `src` to `dst` (UDP 0xC000 to 4794, ECT(0)) as
/// the engine takes it, for tests that feed observations directly.
pub fn metaroce_observation(
    frame: u64,
    ts_ns: u64,
    src: IpAddr,
    dst: IpAddr,
    mr: MrObs,
) -> Observation {
    Observation {
        frame,
        ts_ns,
        src,
        dst,
        src_port: 0xC000,
        dst_port: 4794,
        ecn: 2,
        malformed: false,
        kind: ObsKind::MetaRoce(mr),
    }
}

/// A one-packet SEND message (SOM and EOM, 100 bytes) as the engine sees
/// it, for tests that feed observations directly.
pub fn one_packet_send(
    src_conn: u32,
    dst_conn: u32,
    psn: u32,
    ev: u16,
    path_seq: u16,
    tx_ts: u32,
) -> MrObs {
    MrObs {
        checks: Default::default(),
        src_conn,
        dst_conn,
        psn,
        ev,
        path_seq,
        tx_ts,
        ptype: PacketType::Data,
        flags: Flags::SOM | Flags::EOM,
        tx_attempt: 0,
        body: MrBody::Data(DataObs {
            op: DataOp::Send,
            payload_len: 100,
            actual_len: 100,
            trimmed: false,
            msg_id: psn,
            msg_offset: 0,
            msg_len: 100,
        }),
    }
}

/// A scripted capture: frames numbered from 1 in the order added.
#[derive(Default)]
pub struct Script {
    pub frames: Vec<(u64, Vec<u8>)>,
}

static PAYLOAD: [u8; 4096] = [0x5a; 4096];

pub struct Data {
    pub psn: u32,
    pub ev: u16,
    pub path_seq: u16,
    pub tx_attempt: u8,
    pub op: Op,
    pub msg_id: u32,
    pub msg_offset: u32,
    pub msg_len: u32,
    pub len: u16,
    /// Bytes actually carried (< len: trimmed).
    pub carried: u16,
    pub som: bool,
    pub eom: bool,
    pub ce: bool,
    pub tx_ts: u32,
}

/// Where a SEND packet is: named, the rest from [`Default`] (ev 1, its
/// first path_seq, message 0 of one 1000-byte packet).
#[derive(Debug, Clone, Copy)]
pub struct SendPacket {
    pub psn: u32,
    pub ev: u16,
    pub path_seq: u16,
    pub msg_id: u32,
    pub msg_offset: u32,
    pub msg_len: u32,
}

impl Default for SendPacket {
    fn default() -> SendPacket {
        SendPacket {
            psn: 0,
            ev: 1,
            path_seq: 1,
            msg_id: 0,
            msg_offset: 0,
            msg_len: 1000,
        }
    }
}

impl Data {
    /// A SEND packet of up to 1000 bytes; SOM/EOM from offset and msg_len.
    pub fn send(at: SendPacket) -> Data {
        let SendPacket {
            psn,
            ev,
            path_seq,
            msg_id,
            msg_offset,
            msg_len,
        } = at;
        let len = 1000u16.min((msg_len - msg_offset) as u16);
        Data {
            psn,
            ev,
            path_seq,
            tx_attempt: 0,
            op: Op::Send,
            msg_id,
            msg_offset,
            msg_len,
            len,
            carried: len,
            som: msg_offset == 0,
            eom: msg_offset + u32::from(len) == msg_len,
            ce: false,
            tx_ts: 0,
        }
    }
}

impl Script {
    fn push(&mut self, ts: u64, src: &str, dst: &str, ev: u16, ecn: u8, repr: &Repr<'_>) -> u64 {
        let payload = repr.to_vec();
        let frame = UdpFrameBuilder::new(
            SocketAddr::new(ip(src), udp_source_port(ev)),
            SocketAddr::new(ip(dst), 4794),
        )
        .with_ecn(ecn)
        .build(&payload);
        self.frames.push((ts, frame));
        self.frames.len() as u64
    }

    /// DATA from A to B; `tx_ts` defaults to the capture time in ns.
    pub fn data(&mut self, t_us: u64, d: Data) -> u64 {
        self.data_from(true, t_us, d)
    }

    /// DATA from B to A (READ responses, the reverse direction's traffic).
    pub fn data_b(&mut self, t_us: u64, d: Data) -> u64 {
        self.data_from(false, t_us, d)
    }

    fn data_from(&mut self, from_a: bool, t_us: u64, d: Data) -> u64 {
        let (src, dst, src_conn, dst_conn) = if from_a {
            (A, B, CONN_A, CONN_B)
        } else {
            (B, A, CONN_B, CONN_A)
        };
        let mut flags = Flags::empty();
        flags.set(Flags::SOM, d.som);
        flags.set(Flags::EOM, d.eom);
        let repr = Repr {
            flags,
            tx_attempt: d.tx_attempt,
            ev: d.ev,
            path_seq: d.path_seq,
            dst_conn,
            src_conn,
            psn: d.psn,
            tx_ts: if d.tx_ts == 0 {
                (us(t_us) % (1 << 32)) as u32
            } else {
                d.tx_ts
            },
            body: Body::Data(DataRepr {
                op: d.op,
                payload_len: d.len,
                msg_id: d.msg_id,
                msg_offset: d.msg_offset,
                msg_len: d.msg_len,
            }),
            tlvs: Vec::new(),
            payload: &PAYLOAD[..usize::from(d.carried)],
            crc: false,
        };
        let ecn = if d.ce { ECN_CE } else { ECN_ECT0 };
        self.push(us(t_us), src, dst, d.ev, ecn, &repr)
    }

    fn fb_repr(
        &self,
        cum: u32,
        echo_psn: u32,
        echo_t_us: u64,
        flags: FbFlags,
        body: impl FnOnce(FeedbackRepr) -> Body,
    ) -> Repr<'static> {
        // Receiver clock in 2 ns units: T2 = 1000, T3 = 1500 -> hold 1 us.
        let feedback = FeedbackRepr {
            flags,
            echo_ev: 0,
            echo_psn,
            echo_tx_ts: (us(echo_t_us) % (1 << 32)) as u32,
            rx_ts: 1000,
            ce_count: 0,
            rx_buf_level: 0,
            fwd_hops: 0,
            credit: u32::MAX,
        };
        Repr {
            flags: Flags::empty(),
            tx_attempt: 0,
            ev: 0,
            path_seq: 0,
            dst_conn: CONN_A,
            src_conn: CONN_B,
            psn: cum,
            tx_ts: 1500,
            body: body(feedback),
            tlvs: Vec::new(),
            payload: &[],
            crc: false,
        }
    }

    /// ACK from B: cumulative ack `cum`, echoing the DATA sent at
    /// `echo_t_us` with PSN `echo_psn`; `sacked` PSNs in the bitmap.
    pub fn ack(
        &mut self,
        t_us: u64,
        cum: u32,
        echo_psn: u32,
        echo_t_us: u64,
        flags: FbFlags,
        sacked: &[u32],
    ) -> u64 {
        let sack = if sacked.is_empty() {
            SackBitmap::default()
        } else {
            SackBitmap::from_psns(cum, sacked.iter().copied())
        };
        let repr = self.fb_repr(cum, echo_psn, echo_t_us, flags, |feedback| {
            Body::Ack(AckRepr {
                feedback,
                sack_base: cum,
                sack,
            })
        });
        self.push(us(t_us), B, A, 0, ECN_ECT0, &repr)
    }

    /// ACK from A about B's DATA (READ responses): cumulative ack `cum`,
    /// echoing B's DATA sent at `echo_t_us` with PSN `echo_psn`.
    pub fn ack_from_a(&mut self, t_us: u64, cum: u32, echo_psn: u32, echo_t_us: u64) -> u64 {
        let mut repr = self.fb_repr(cum, echo_psn, echo_t_us, FbFlags::empty(), |feedback| {
            Body::Ack(AckRepr {
                feedback,
                sack_base: cum,
                sack: SackBitmap::default(),
            })
        });
        (repr.src_conn, repr.dst_conn) = (CONN_A, CONN_B);
        self.push(us(t_us), A, B, 0, ECN_ECT0, &repr)
    }

    #[allow(clippy::too_many_arguments)]
    pub fn nack(
        &mut self,
        t_us: u64,
        cum: u32,
        echo_psn: u32,
        echo_t_us: u64,
        flags: FbFlags,
        code: NackCode,
        nack_psn: u32,
    ) -> u64 {
        let repr = self.fb_repr(cum, echo_psn, echo_t_us, flags, |feedback| {
            Body::Nack(NackRepr {
                feedback,
                code,
                rnr_timer: 0,
                nack_psn,
            })
        });
        self.push(us(t_us), B, A, 0, ECN_ECT0, &repr)
    }

    pub fn cnp(&mut self, t_us: u64, cum: u32, echo_psn: u32, echo_t_us: u64) -> u64 {
        let repr = self.fb_repr(cum, echo_psn, echo_t_us, FbFlags::ECE, |feedback| {
            Body::Cnp(CnpRepr {
                feedback,
                reason: CnpReason::Ecn,
            })
        });
        self.push(us(t_us), B, A, 0, ECN_ECT0, &repr)
    }

    /// CONNECT from A (dst_conn 0) or ACCEPT from B, with a ts unit.
    pub fn ctrl(&mut self, t_us: u64, from_a: bool, ts_unit_ps: u32) -> u64 {
        let (op, src, dst, src_conn, dst_conn) = if from_a {
            (CtrlOp::Connect, A, B, CONN_A, 0)
        } else {
            (CtrlOp::Accept, B, A, CONN_B, CONN_A)
        };
        let repr = Repr {
            flags: Flags::empty(),
            tx_attempt: 0,
            ev: 0,
            path_seq: 0,
            dst_conn,
            src_conn,
            psn: 0,
            tx_ts: 0,
            body: Body::Ctrl(CtrlRepr {
                op,
                cc_algo: CcAlgo::Hybrid,
                mtu: 1000,
                init_psn: 100,
                features: Features::PATH_SEQ,
                ts_unit_ps,
            }),
            tlvs: Vec::new(),
            payload: &[],
            crc: false,
        };
        self.push(us(t_us), src, dst, 0, ECN_ECT0, &repr)
    }

    /// Decodes every frame and returns the observations.
    pub fn observations(&self) -> Vec<Observation> {
        let cfg = DecodeConfig::default();
        self.frames
            .iter()
            .enumerate()
            .map(|(i, (ts, bytes))| {
                let f = frame::decode(LinkType::Ethernet, bytes, &cfg);
                Observation::from_frame(i as u64 + 1, *ts, &f).expect("a MetaRoCE frame")
            })
            .collect()
    }

    /// Runs the engine over the script; returns the verdicts (index 0 =
    /// frame 1).
    pub fn run(&self, engine: &mut Engine) -> Vec<Verdict> {
        self.observations()
            .iter()
            .map(|o| engine.ingest(o))
            .collect()
    }
}
