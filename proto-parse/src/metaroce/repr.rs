//! Owned representations of MetaRoCE packets: `Repr::parse` and `emit`.

use super::field;
use super::packet::{Packet, be16, be32, put16, put32};
use super::tlv::TlvRepr;
use super::{
    CcAlgo, CnpReason, CtrlOp, DataOp, FbFlags, Features, Flags, NackCode, PacketType, VERSION,
};
use crate::error::{Error, ErrorKind, Layer};

/// A whole MetaRoCE packet in owned form (the payload is borrowed).
///
/// `flags` holds AR, SOM, EOM, SE and any reserved bits; EXT is derived from
/// `tlvs` and CRC from `crc` when emitting. A DATA packet whose `payload` is
/// shorter than its `payload_len` is emitted trimmed: no trailer.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Repr<'a> {
    pub flags: Flags,
    pub tx_attempt: u8,
    pub ev: u16,
    pub path_seq: u16,
    pub dst_conn: u32,
    pub src_conn: u32,
    pub psn: u32,
    pub tx_ts: u32,
    pub body: Body,
    pub tlvs: Vec<TlvRepr>,
    pub payload: &'a [u8],
    pub crc: bool,
}

/// The type header.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Body {
    Data(DataRepr),
    Ack(AckRepr),
    Nack(NackRepr),
    Cnp(CnpRepr),
    Probe,
    ProbeReply(FeedbackRepr),
    Ctrl(CtrlRepr),
}

/// A DATA op with the fields only that op carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    Send,
    SendImm {
        imm_data: u32,
    },
    Write {
        remote_va: u64,
        rkey: u32,
    },
    WriteImm {
        remote_va: u64,
        rkey: u32,
        imm_data: u32,
    },
    ReadReq {
        remote_va: u64,
        rkey: u32,
    },
    ReadResp,
}

impl Op {
    pub const fn code(self) -> DataOp {
        match self {
            Op::Send => DataOp::Send,
            Op::SendImm { .. } => DataOp::SendImm,
            Op::Write { .. } => DataOp::Write,
            Op::WriteImm { .. } => DataOp::WriteImm,
            Op::ReadReq { .. } => DataOp::ReadReq,
            Op::ReadResp => DataOp::ReadResp,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DataRepr {
    pub op: Op,
    /// Payload bytes as sent (the payload may be shorter: trimmed).
    pub payload_len: u16,
    pub msg_id: u32,
    pub msg_offset: u32,
    pub msg_len: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FeedbackRepr {
    pub flags: FbFlags,
    pub echo_ev: u16,
    pub echo_psn: u32,
    pub echo_tx_ts: u32,
    pub rx_ts: u32,
    pub ce_count: u16,
    pub rx_buf_level: u8,
    pub fwd_hops: u8,
    pub credit: u32,
}

/// Up to four 64-bit SACK words; bit `i` counts from the most significant
/// bit of the first word, as on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SackBitmap {
    words: [u64; field::MAX_SACK_WORDS as usize],
    len: u8,
}

impl SackBitmap {
    pub const MAX_BITS: usize = field::MAX_SACK_WORDS as usize * 64;

    /// A bitmap of `len` words (at most 4), all clear.
    #[inline]
    pub fn with_words(len: u8) -> Self {
        SackBitmap {
            words: [0; 4],
            len: len.min(field::MAX_SACK_WORDS),
        }
    }

    /// The smallest bitmap that reports `psns` relative to `base`; PSNs
    /// outside `base..base + 256` are left out.
    pub fn from_psns(base: u32, psns: impl IntoIterator<Item = u32>) -> Self {
        let mut bitmap = SackBitmap::default();
        for psn in psns {
            let i = psn.wrapping_sub(base) as usize;
            if i < Self::MAX_BITS {
                bitmap.len = bitmap.len.max((i / 64 + 1) as u8);
                bitmap.words[i / 64] |= 1 << (63 - i % 64);
            }
        }
        bitmap
    }

    #[inline]
    pub fn words(&self) -> &[u64] {
        &self.words[..usize::from(self.len)]
    }

    #[inline]
    pub fn len_words(&self) -> u8 {
        self.len
    }

    #[inline]
    pub fn get(&self, i: usize) -> bool {
        i < usize::from(self.len) * 64 && self.words[i / 64] & (1 << (63 - i % 64)) != 0
    }

    /// Sets word `i` (0..len) as read from the wire.
    #[inline]
    pub(super) fn set_word(&mut self, i: usize, word: u64) {
        self.words[i] = word;
    }

    /// Sets bit `i`; returns false (and changes nothing) past the bitmap.
    pub fn set(&mut self, i: usize) -> bool {
        if i >= usize::from(self.len) * 64 {
            return false;
        }
        self.words[i / 64] |= 1 << (63 - i % 64);
        true
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AckRepr {
    pub feedback: FeedbackRepr,
    pub sack_base: u32,
    pub sack: SackBitmap,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NackRepr {
    pub feedback: FeedbackRepr,
    pub code: NackCode,
    /// RNR back-off in units of 10 us.
    pub rnr_timer: u8,
    pub nack_psn: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CnpRepr {
    pub feedback: FeedbackRepr,
    pub reason: CnpReason,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CtrlRepr {
    pub op: CtrlOp,
    pub cc_algo: CcAlgo,
    pub mtu: u16,
    pub init_psn: u32,
    pub features: Features,
    pub ts_unit_ps: u32,
}

impl Body {
    pub const fn packet_type(&self) -> PacketType {
        match self {
            Body::Data(_) => PacketType::Data,
            Body::Ack(_) => PacketType::Ack,
            Body::Nack(_) => PacketType::Nack,
            Body::Cnp(_) => PacketType::Cnp,
            Body::Probe => PacketType::Probe,
            Body::ProbeReply(_) => PacketType::ProbeReply,
            Body::Ctrl(_) => PacketType::Ctrl,
        }
    }

    /// Fixed size with the base header.
    pub fn fixed_len(&self) -> usize {
        match self {
            Body::Data(data) => data.op.code().header_len(),
            Body::Ack(ack) => field::SACK_BITMAP(ack.sack.len_words()).end,
            Body::Nack(_) => field::NACK_LEN,
            Body::Cnp(_) => field::CNP_LEN,
            Body::Probe => field::BASE_LEN,
            Body::ProbeReply(_) => field::FEEDBACK_LEN,
            Body::Ctrl(_) => field::CTRL_LEN,
        }
    }

    pub fn feedback(&self) -> Option<&FeedbackRepr> {
        match self {
            Body::Ack(ack) => Some(&ack.feedback),
            Body::Nack(nack) => Some(&nack.feedback),
            Body::Cnp(cnp) => Some(&cnp.feedback),
            Body::ProbeReply(feedback) => Some(feedback),
            _ => None,
        }
    }
}

fn unsupported(layer: Layer, offset: usize, what: &'static str, value: u8) -> Error {
    Error {
        layer,
        offset,
        kind: ErrorKind::Unsupported {
            what,
            value: value.into(),
        },
    }
}

fn parse_feedback(buf: &[u8]) -> FeedbackRepr {
    FeedbackRepr {
        flags: FbFlags::from_bits_retain(buf[field::FB_FLAGS]),
        echo_ev: be16(buf, field::ECHO_EV),
        echo_psn: be32(buf, field::ECHO_PSN),
        echo_tx_ts: be32(buf, field::ECHO_TX_TS),
        rx_ts: be32(buf, field::RX_TS),
        ce_count: be16(buf, field::CE_COUNT),
        rx_buf_level: buf[field::RX_BUF_LEVEL],
        fwd_hops: buf[field::FWD_HOPS],
        credit: be32(buf, field::CREDIT),
    }
}

fn emit_feedback(buf: &mut [u8], feedback: &FeedbackRepr, sack_words: u8) {
    buf[field::FB_FLAGS] = feedback.flags.bits();
    buf[field::SACK_WORDS] = sack_words;
    put16(buf, field::ECHO_EV, feedback.echo_ev);
    put32(buf, field::ECHO_PSN, feedback.echo_psn);
    put32(buf, field::ECHO_TX_TS, feedback.echo_tx_ts);
    put32(buf, field::RX_TS, feedback.rx_ts);
    put16(buf, field::CE_COUNT, feedback.ce_count);
    buf[field::RX_BUF_LEVEL] = feedback.rx_buf_level;
    buf[field::FWD_HOPS] = feedback.fwd_hops;
    put32(buf, field::CREDIT, feedback.credit);
}

impl<'a> Repr<'a> {
    /// Parses a complete packet (the whole UDP payload). Unknown types and
    /// ops, which have no owned form, give `ErrorKind::Unsupported`.
    pub fn parse(packet: &Packet<&'a [u8]>) -> Result<Self, Error> {
        let buf: &'a [u8] = packet.into_inner();
        let layout = packet.layout(buf.len())?;
        let body = match packet.packet_type() {
            PacketType::Data => {
                let data = packet.data().expect("layout checked the DATA header");
                let remote = || (be64_va(buf), be32(buf, field::RKEY));
                let op = match data.op() {
                    DataOp::Send => Op::Send,
                    DataOp::SendImm => Op::SendImm {
                        imm_data: be32(buf, field::IMM_DATA_SEND),
                    },
                    DataOp::Write => {
                        let (remote_va, rkey) = remote();
                        Op::Write { remote_va, rkey }
                    }
                    DataOp::WriteImm => {
                        let (remote_va, rkey) = remote();
                        Op::WriteImm {
                            remote_va,
                            rkey,
                            imm_data: be32(buf, field::IMM_DATA_WRITE),
                        }
                    }
                    DataOp::ReadReq => {
                        let (remote_va, rkey) = remote();
                        Op::ReadReq { remote_va, rkey }
                    }
                    DataOp::ReadResp => Op::ReadResp,
                    DataOp::Unknown(op) => {
                        return Err(unsupported(
                            Layer::MetaRoceData,
                            field::DATA_OP,
                            "DATA op",
                            op,
                        ));
                    }
                };
                Body::Data(DataRepr {
                    op,
                    payload_len: data.payload_len(),
                    msg_id: data.msg_id(),
                    msg_offset: data.msg_offset(),
                    msg_len: data.msg_len(),
                })
            }
            PacketType::Ack => {
                let ack = packet.ack().expect("layout checked the ACK header");
                Body::Ack(AckRepr {
                    feedback: parse_feedback(buf),
                    sack_base: ack.sack_base(),
                    sack: ack.sack(),
                })
            }
            PacketType::Nack => {
                let nack = packet.nack().expect("layout checked the NACK header");
                Body::Nack(NackRepr {
                    feedback: parse_feedback(buf),
                    code: nack.code(),
                    rnr_timer: nack.rnr_timer(),
                    nack_psn: nack.nack_psn(),
                })
            }
            PacketType::Cnp => Body::Cnp(CnpRepr {
                feedback: parse_feedback(buf),
                reason: packet.cnp_reason().expect("layout checked the CNP header"),
            }),
            PacketType::Probe => Body::Probe,
            PacketType::ProbeReply => Body::ProbeReply(parse_feedback(buf)),
            PacketType::Ctrl => {
                let ctrl = packet.ctrl().expect("layout checked the CTRL header");
                Body::Ctrl(CtrlRepr {
                    op: ctrl.op(),
                    cc_algo: ctrl.cc_algo(),
                    mtu: ctrl.mtu(),
                    init_psn: ctrl.init_psn(),
                    features: ctrl.features(),
                    ts_unit_ps: ctrl.ts_unit_ps(),
                })
            }
            PacketType::Experimental | PacketType::Unknown(_) => {
                return Err(unsupported(
                    Layer::MetaRoceBase,
                    field::VER_TYPE,
                    "packet type",
                    packet.packet_type().into(),
                ));
            }
        };
        let tlvs = packet
            .tlvs()
            .filter_map(|tlv| tlv.ok().as_ref().and_then(TlvRepr::parse))
            .collect();
        let flags = packet.flags();
        Ok(Repr {
            flags: flags.difference(Flags::EXT | Flags::CRC),
            tx_attempt: packet.tx_attempt(),
            ev: packet.ev(),
            path_seq: packet.path_seq(),
            dst_conn: packet.dst_conn(),
            src_conn: packet.src_conn(),
            psn: packet.psn(),
            tx_ts: packet.tx_ts(),
            body,
            tlvs,
            payload: &buf[layout.payload],
            crc: flags.contains(Flags::CRC),
        })
    }

    pub fn packet_type(&self) -> PacketType {
        self.body.packet_type()
    }

    /// `hlen * 4`: fixed header plus TLVs.
    pub fn header_len(&self) -> usize {
        self.body.fixed_len() + self.tlvs.iter().map(TlvRepr::buffer_len).sum::<usize>()
    }

    /// A DATA packet whose payload is shorter than `payload_len`.
    pub fn is_trimmed(&self) -> bool {
        matches!(&self.body, Body::Data(d) if self.payload.len() < usize::from(d.payload_len))
    }

    fn has_trailer(&self) -> bool {
        self.crc && !self.is_trimmed()
    }

    /// Bytes `emit` writes: the whole UDP payload.
    pub fn buffer_len(&self) -> usize {
        self.header_len()
            + self.payload.len()
            + if self.has_trailer() {
                field::CRC_LEN
            } else {
                0
            }
    }

    /// Writes the packet at the start of `buf` and returns its length.
    ///
    /// Panics when `buf` is shorter than `buffer_len()`, when the header
    /// exceeds 255 words or a DATA payload is longer than its `payload_len`:
    /// emitting is trusted, as in smoltcp.
    pub fn emit(&self, buf: &mut [u8]) -> usize {
        let header_len = self.header_len();
        assert!(
            header_len <= 255 * 4,
            "MetaRoCE headers are at most 1020 bytes"
        );
        let len = self.buffer_len();
        let buf = &mut buf[..len];
        buf[..header_len].fill(0);

        let mut flags = self.flags.difference(Flags::EXT | Flags::CRC);
        flags.set(Flags::EXT, !self.tlvs.is_empty());
        flags.set(Flags::CRC, self.crc);
        buf[field::VER_TYPE] = (VERSION << 4) | (u8::from(self.packet_type()) & 0x0F);
        buf[field::FLAGS] = flags.bits();
        buf[field::HLEN] = (header_len / 4) as u8;
        buf[field::TX_ATTEMPT] = self.tx_attempt.min(15) << 4;
        put16(buf, field::EV, self.ev);
        put16(buf, field::PATH_SEQ, self.path_seq);
        put32(buf, field::DST_CONN, self.dst_conn);
        put32(buf, field::SRC_CONN, self.src_conn);
        put32(buf, field::PSN, self.psn);
        put32(buf, field::TX_TS, self.tx_ts);

        match &self.body {
            Body::Data(data) => {
                assert!(
                    self.payload.len() <= usize::from(data.payload_len),
                    "payload longer than payload_len"
                );
                buf[field::DATA_OP] = data.op.code().into();
                put16(buf, field::PAYLOAD_LEN, data.payload_len);
                put32(buf, field::MSG_ID, data.msg_id);
                put32(buf, field::MSG_OFFSET, data.msg_offset);
                put32(buf, field::MSG_LEN, data.msg_len);
                match data.op {
                    Op::Send | Op::ReadResp => {}
                    Op::SendImm { imm_data } => put32(buf, field::IMM_DATA_SEND, imm_data),
                    Op::Write { remote_va, rkey } | Op::ReadReq { remote_va, rkey } => {
                        buf[field::REMOTE_VA].copy_from_slice(&remote_va.to_be_bytes());
                        put32(buf, field::RKEY, rkey);
                    }
                    Op::WriteImm {
                        remote_va,
                        rkey,
                        imm_data,
                    } => {
                        buf[field::REMOTE_VA].copy_from_slice(&remote_va.to_be_bytes());
                        put32(buf, field::RKEY, rkey);
                        put32(buf, field::IMM_DATA_WRITE, imm_data);
                    }
                }
            }
            Body::Ack(ack) => {
                emit_feedback(buf, &ack.feedback, ack.sack.len_words());
                put32(buf, field::SACK_BASE, ack.sack_base);
                let bitmap = &mut buf[field::SACK_BITMAP(ack.sack.len_words())];
                for (chunk, word) in bitmap.chunks_exact_mut(8).zip(ack.sack.words()) {
                    chunk.copy_from_slice(&word.to_be_bytes());
                }
            }
            Body::Nack(nack) => {
                emit_feedback(buf, &nack.feedback, 0);
                buf[field::NACK_CODE] = nack.code.into();
                buf[field::RNR_TIMER] = nack.rnr_timer;
                put32(buf, field::NACK_PSN, nack.nack_psn);
            }
            Body::Cnp(cnp) => {
                emit_feedback(buf, &cnp.feedback, 0);
                buf[field::CNP_REASON] = cnp.reason.into();
            }
            Body::Probe => {}
            Body::ProbeReply(feedback) => emit_feedback(buf, feedback, 0),
            Body::Ctrl(ctrl) => {
                buf[field::CTRL_OP] = ctrl.op.into();
                buf[field::CC_ALGO] = ctrl.cc_algo.into();
                put16(buf, field::MTU, ctrl.mtu);
                put32(buf, field::INIT_PSN, ctrl.init_psn);
                put32(buf, field::FEATURES, ctrl.features.bits());
                put32(buf, field::TS_UNIT_PS, ctrl.ts_unit_ps);
            }
        }

        let mut at = self.body.fixed_len();
        for tlv in &self.tlvs {
            tlv.emit(&mut buf[at..]);
            at += tlv.buffer_len();
        }
        let payload_end = header_len + self.payload.len();
        buf[header_len..payload_end].copy_from_slice(self.payload);
        if self.has_trailer() {
            let crc = crc32c::crc32c(&buf[..payload_end]);
            put32(buf, payload_end..payload_end + field::CRC_LEN, crc);
        }
        len
    }

    /// Emits into a new vector.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut buf = vec![0; self.buffer_len()];
        self.emit(&mut buf);
        buf
    }
}

fn be64_va(buf: &[u8]) -> u64 {
    super::packet::be64(buf, field::REMOTE_VA)
}
