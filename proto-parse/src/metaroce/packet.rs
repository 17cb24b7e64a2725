//! Zero-copy views over a MetaRoCE packet (one UDP payload).

use core::ops::Range;

use super::field::{self, Field};
use super::headers::{Ack, Ctrl, Data, Feedback, Nack};
use super::tlv::TlvIter;
use super::{CnpReason, DataOp, FbFlags, Flags, PacketType, VERSION};
use crate::error::{Error, Layer, LenSource, Warning};

// Readers take a field's start and read a fixed number of bytes: one bounds
// check, one load.
#[inline]
pub(super) fn be16(buf: &[u8], f: Field) -> u16 {
    u16::from_be_bytes(buf[f.start..f.start + 2].try_into().expect("2 bytes"))
}

#[inline]
pub(super) fn be32(buf: &[u8], f: Field) -> u32 {
    u32::from_be_bytes(buf[f.start..f.start + 4].try_into().expect("4 bytes"))
}

#[inline]
pub(super) fn be64(buf: &[u8], f: Field) -> u64 {
    u64::from_be_bytes(buf[f.start..f.start + 8].try_into().expect("8 bytes"))
}

#[inline]
pub(super) fn put16(buf: &mut [u8], f: Field, value: u16) {
    buf[f].copy_from_slice(&value.to_be_bytes());
}

#[inline]
pub(super) fn put32(buf: &mut [u8], f: Field, value: u32) {
    buf[f].copy_from_slice(&value.to_be_bytes());
}

/// A view over one MetaRoCE packet: the UDP payload, base header first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

/// Where the parts of a valid packet lie, as on the wire (the captured bytes
/// may end earlier; [`Packet::payload`] clips to them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// `hlen * 4`: base header, type header and TLVs.
    pub header_len: usize,
    /// The fixed part of the type header (base included).
    pub fixed_len: usize,
    /// The payload actually carried (shorter than `payload_len` if trimmed).
    pub payload: Range<usize>,
    /// The CRC32C trailer, when present on the wire.
    pub trailer: Option<Range<usize>>,
    /// A switch cut the payload (spec 11.1).
    pub trimmed: bool,
    /// The UDP payload length on the wire.
    pub wire_len: usize,
}

/// Result of checking the CRC32C trailer (spec section 7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrcStatus {
    Good,
    Bad {
        stored: u32,
        computed: u32,
    },
    /// No trailer: flags.CRC is clear, or the packet was trimmed.
    NotPresent,
    /// A trailer exists on the wire but the capture does not hold it (or the
    /// check was not asked for).
    NotChecked,
}

impl CrcStatus {
    /// The name used in JSON output and by the dissector.
    pub const fn as_str(self) -> &'static str {
        match self {
            CrcStatus::Good => "good",
            CrcStatus::Bad { .. } => "bad",
            CrcStatus::NotPresent => "not_present",
            CrcStatus::NotChecked => "not_checked",
        }
    }
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checks; getters may panic on short buffers.
    pub const fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }

    /// Wraps a complete UDP payload and validates every rule of spec
    /// section 8 and 11.1. Getters of the result never panic.
    pub fn new_checked(buffer: T) -> Result<Self, Error> {
        let packet = Packet { buffer };
        let len = packet.buffer.as_ref().len();
        packet.layout(len)?;
        Ok(packet)
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn as_bytes(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    #[inline]
    fn buf(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    #[inline]
    pub fn version(&self) -> u8 {
        self.buf()[field::VER_TYPE] >> 4
    }

    #[inline(always)]
    pub fn packet_type(&self) -> PacketType {
        PacketType::from(self.buf()[field::VER_TYPE] & 0x0F)
    }

    #[inline]
    pub fn flags(&self) -> Flags {
        Flags::from_bits_retain(self.buf()[field::FLAGS])
    }

    /// Header length in 4-byte words.
    #[inline]
    pub fn hlen(&self) -> u8 {
        self.buf()[field::HLEN]
    }

    /// Header length in bytes: where the payload starts.
    #[inline]
    pub fn header_len(&self) -> usize {
        usize::from(self.hlen()) * field::TLV_WORD
    }

    #[inline]
    pub fn tx_attempt(&self) -> u8 {
        self.buf()[field::TX_ATTEMPT] >> 4
    }

    #[inline]
    pub fn ev(&self) -> u16 {
        be16(self.buf(), field::EV)
    }

    #[inline]
    pub fn path_seq(&self) -> u16 {
        be16(self.buf(), field::PATH_SEQ)
    }

    #[inline]
    pub fn dst_conn(&self) -> u32 {
        be32(self.buf(), field::DST_CONN)
    }

    #[inline]
    pub fn src_conn(&self) -> u32 {
        be32(self.buf(), field::SRC_CONN)
    }

    /// DATA: this packet's PSN; feedback: the cumulative ack; PROBE: the
    /// probe sequence number; CTRL: 0.
    #[inline]
    pub fn psn(&self) -> u32 {
        be32(self.buf(), field::PSN)
    }

    #[inline]
    pub fn tx_ts(&self) -> u32 {
        be32(self.buf(), field::TX_TS)
    }

    /// The DATA header, if this is a DATA packet whose header is present.
    #[inline(always)]
    pub fn data(&self) -> Option<Data<'_>> {
        let buf = self.buf();
        if self.packet_type() != PacketType::Data || buf.len() <= field::DATA_OP {
            return None;
        }
        let op = DataOp::from(buf[field::DATA_OP]);
        (buf.len() >= op.header_len()).then_some(Data { buf, op })
    }

    /// The feedback block of ACK, NACK, CNP and PROBE_REPLY.
    #[inline(always)]
    pub fn feedback(&self) -> Option<Feedback<'_>> {
        let buf = self.buf();
        (self.packet_type().has_feedback() && buf.len() >= field::FEEDBACK_LEN)
            .then_some(Feedback { buf })
    }

    #[inline]
    pub fn ack(&self) -> Option<Ack<'_>> {
        let feedback = self.feedback()?;
        let words = feedback.sack_words();
        (self.packet_type() == PacketType::Ack
            && words <= field::MAX_SACK_WORDS
            && self.buf().len() >= field::SACK_BITMAP(words).end)
            .then_some(Ack { feedback, words })
    }

    #[inline]
    pub fn nack(&self) -> Option<Nack<'_>> {
        let feedback = self.feedback()?;
        (self.packet_type() == PacketType::Nack && self.buf().len() >= field::NACK_LEN)
            .then_some(Nack { feedback })
    }

    #[inline]
    pub fn cnp_reason(&self) -> Option<CnpReason> {
        let buf = self.buf();
        (self.packet_type() == PacketType::Cnp && buf.len() >= field::CNP_LEN)
            .then(|| CnpReason::from(buf[field::CNP_REASON]))
    }

    pub fn ctrl(&self) -> Option<Ctrl<'_>> {
        let buf = self.buf();
        (self.packet_type() == PacketType::Ctrl && buf.len() >= field::CTRL_LEN)
            .then_some(Ctrl { buf })
    }

    /// The size of the base and type header without TLVs (spec sections 2
    /// to 5: a DATA header's depends on its op, an ACK's on its SACK
    /// words), when the capture holds it.
    pub fn fixed_len(&self) -> Option<usize> {
        let buf = self.buf();
        fixed_len(buf, buf.len())
            .ok()
            .filter(|&len| len <= buf.len())
    }

    /// TLVs between the fixed header and `hlen * 4`, when flags.EXT is set.
    /// Clipped to the captured bytes; a TLV that runs past them is reported
    /// by the iterator as a capture truncation.
    pub fn tlvs(&self) -> TlvIter<'_> {
        let buf = self.buf();
        if !self.flags().contains(Flags::EXT) {
            return TlvIter::empty();
        }
        let Ok(fixed) = fixed_len(buf, buf.len()) else {
            return TlvIter::empty();
        };
        let end = self.header_len();
        TlvIter::new(buf, fixed, end)
    }

    /// Computes where header, payload and trailer lie for a packet whose
    /// UDP payload is `wire_len` bytes long on the wire (the buffer may hold
    /// fewer: a snaplen cut). Checks every rule of spec sections 8 and 11.
    pub fn layout(&self, wire_len: usize) -> Result<Layout, Error> {
        inspect(self.buf(), wire_len)
    }

    /// The payload bytes the buffer holds (clipped to the capture).
    pub fn payload(&self, layout: &Layout) -> &[u8] {
        let buf = self.buf();
        let end = layout.payload.end.min(buf.len());
        buf.get(layout.payload.start..end).unwrap_or(&[])
    }

    /// The CRC32C value the trailer holds, when it is present and captured.
    pub fn stored_crc(&self, layout: &Layout) -> Option<u32> {
        let trailer = layout.trailer.clone()?;
        (self.buf().len() >= trailer.end).then(|| be32(self.buf(), trailer))
    }

    /// Checks the CRC32C trailer: over every byte from the base header to
    /// the end of the payload (spec section 7).
    pub fn crc_status(&self, layout: &Layout) -> CrcStatus {
        let Some(trailer) = layout.trailer.clone() else {
            return CrcStatus::NotPresent;
        };
        let buf = self.buf();
        if buf.len() < trailer.end {
            return CrcStatus::NotChecked;
        }
        let stored = be32(buf, trailer.clone());
        let computed = crc32c::crc32c(&buf[..trailer.start]);
        if stored == computed {
            CrcStatus::Good
        } else {
            CrcStatus::Bad { stored, computed }
        }
    }

    /// Legal but suspicious things: non-zero reserved bits, sack_words on a
    /// type other than ACK, header padding without flags.EXT, with where
    /// each is.
    pub fn warnings(&self) -> Vec<Warning> {
        let found = self.warning_flags();
        let mut warnings = Vec::new();
        let table = [
            (
                WarningFlags::RESERVED_FLAGS,
                Layer::MetaRoceBase,
                field::FLAGS,
                "reserved flag bits are set",
            ),
            (
                WarningFlags::RESERVED_TX_ATTEMPT,
                Layer::MetaRoceBase,
                field::TX_ATTEMPT,
                "reserved bits after tx_attempt are set",
            ),
            (
                WarningFlags::RESERVED_DATA,
                Layer::MetaRoceData,
                field::DATA_RESERVED,
                "reserved byte is not zero",
            ),
            (
                WarningFlags::RESERVED_FB_FLAGS,
                Layer::MetaRoceFeedback,
                field::FB_FLAGS,
                "reserved fb_flags bits are set",
            ),
            (
                WarningFlags::SACK_WORDS_NOT_ACK,
                Layer::MetaRoceFeedback,
                field::SACK_WORDS,
                "sack_words is not 0 on a type other than ACK",
            ),
            (
                WarningFlags::SACK_BASE,
                Layer::MetaRoceAck,
                field::SACK_BASE.start,
                "sack_base differs from the cumulative ack",
            ),
            (
                WarningFlags::RESERVED_NACK,
                Layer::MetaRoceNack,
                field::NACK_RESERVED.start,
                "reserved bytes are not zero",
            ),
            (
                WarningFlags::RESERVED_CNP,
                Layer::MetaRoceCnp,
                field::CNP_RESERVED.start,
                "reserved bytes are not zero",
            ),
        ];
        for (flag, layer, offset, message) in table {
            if found.contains(flag) {
                warnings.push(Warning {
                    layer,
                    offset,
                    message,
                });
            }
        }
        if found.contains(WarningFlags::HEADER_PADDING)
            && let Ok(fixed) = fixed_len(self.buf(), self.buf().len())
        {
            warnings.push(Warning {
                layer: Layer::MetaRoceBase,
                offset: fixed,
                message: "header padding after the fixed header without flags.EXT",
            });
        }
        warnings
    }

    /// [`Packet::warnings`] as a set of flags, without allocating.
    pub fn warning_flags(&self) -> WarningFlags {
        let buf = self.buf();
        self.warning_flags_fixed(fixed_len(buf, buf.len()).ok())
    }

    /// [`Packet::warning_flags`] of a packet whose layout was computed
    /// (its fixed header length is known): for a check on every packet,
    /// the analyzer's lint.
    #[inline]
    pub fn warning_flags_in(&self, layout: &Layout) -> WarningFlags {
        self.warning_flags_fixed_len(layout.fixed_len)
    }

    /// [`Packet::warning_flags_in`] given the layout's `fixed_len` alone.
    /// The common packets without a warning are told inline from the few
    /// places a warning can be: the reserved bits of flags and of
    /// tx_attempt's byte, header padding without flags.EXT, and byte 25
    /// (a DATA packet's reserved byte, a feedback's sack_words), with, for
    /// an ACK without SACK words, the reserved bits of its feedback flags.
    /// Any other packet is read in full.
    #[inline]
    pub fn warning_flags_fixed_len(&self, fixed_len: usize) -> WarningFlags {
        let buf = self.buf();
        if let (Some(&ver_type), Some(&flags), Some(&tx_attempt), Some(&byte_25)) = (
            buf.get(field::VER_TYPE),
            buf.get(field::FLAGS),
            buf.get(field::TX_ATTEMPT),
            buf.get(field::DATA_RESERVED),
        ) && flags & Flags::RESERVED == 0
            && tx_attempt & 0x0F == 0
            && byte_25 == 0
            && (flags & Flags::EXT.bits() != 0 || self.header_len() <= fixed_len)
        {
            const _: () = assert!(field::DATA_RESERVED == field::SACK_WORDS);
            match PacketType::from(ver_type & 0x0F) {
                PacketType::Data => return WarningFlags::empty(),
                PacketType::Ack
                    if buf.len() >= field::FEEDBACK_LEN
                        && buf[field::FB_FLAGS] & FbFlags::RESERVED == 0 =>
                {
                    return WarningFlags::empty();
                }
                _ => {}
            }
        }
        self.warning_flags_fixed(Some(fixed_len))
    }

    /// The warnings, given the fixed header length (`None`: the header is
    /// malformed there). The type is looked at once; each field is read
    /// only when the packet holds it, as its view would.
    #[inline(never)]
    pub(super) fn warning_flags_fixed(&self, fixed: Option<usize>) -> WarningFlags {
        let buf = self.buf();
        let mut found = WarningFlags::empty();
        if buf.len() < field::BASE_LEN {
            return found;
        }
        let flags = buf[field::FLAGS];
        found.set(WarningFlags::RESERVED_FLAGS, flags & Flags::RESERVED != 0);
        found.set(
            WarningFlags::RESERVED_TX_ATTEMPT,
            buf[field::TX_ATTEMPT] & 0x0F != 0,
        );
        let ptype = self.packet_type();
        if ptype == PacketType::Data {
            // A known fixed length holds the DATA header: no view to make.
            let holds_header =
                fixed.is_some_and(|f| f > field::DATA_RESERVED) || self.data().is_some();
            found.set(
                WarningFlags::RESERVED_DATA,
                holds_header && buf.get(field::DATA_RESERVED).is_some_and(|&b| b != 0),
            );
        } else if ptype.has_feedback() && buf.len() >= field::FEEDBACK_LEN {
            found.set(
                WarningFlags::RESERVED_FB_FLAGS,
                buf[field::FB_FLAGS] & FbFlags::RESERVED != 0,
            );
            let words = buf[field::SACK_WORDS];
            match ptype {
                PacketType::Ack => found.set(
                    WarningFlags::SACK_BASE,
                    words > 0
                        && words <= field::MAX_SACK_WORDS
                        && buf.len() >= field::SACK_BITMAP(words).end
                        && be32(buf, field::SACK_BASE) != self.psn(),
                ),
                _ => found.set(WarningFlags::SACK_WORDS_NOT_ACK, words != 0),
            }
            match ptype {
                PacketType::Nack if buf.len() >= field::NACK_LEN => found.set(
                    WarningFlags::RESERVED_NACK,
                    be16(buf, field::NACK_RESERVED) != 0,
                ),
                PacketType::Cnp if buf.len() >= field::CNP_LEN => found.set(
                    WarningFlags::RESERVED_CNP,
                    buf[field::CNP_RESERVED].iter().any(|&b| b != 0),
                ),
                _ => {}
            }
        }
        found.set(
            WarningFlags::HEADER_PADDING,
            flags & Flags::EXT.bits() == 0 && fixed.is_some_and(|f| self.header_len() > f),
        );
        found
    }
}

bitflags::bitflags! {
    /// What [`Packet::warning_flags`] found (spec-decisions 7).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct WarningFlags: u16 {
        /// flags 0x03.
        const RESERVED_FLAGS = 1 << 0;
        /// The nibble after tx_attempt.
        const RESERVED_TX_ATTEMPT = 1 << 1;
        /// DATA byte 25.
        const RESERVED_DATA = 1 << 2;
        /// fb_flags 0x0F.
        const RESERVED_FB_FLAGS = 1 << 3;
        /// NACK bytes 50..52.
        const RESERVED_NACK = 1 << 4;
        /// CNP bytes 49..52.
        const RESERVED_CNP = 1 << 5;
        /// sack_words non-zero on a type other than ACK (11.7).
        const SACK_WORDS_NOT_ACK = 1 << 6;
        /// An ACK's sack_base differs from its cumulative ack (11.7).
        const SACK_BASE = 1 << 7;
        /// Header bytes beyond the fixed part without flags.EXT (11.2).
        const HEADER_PADDING = 1 << 8;
    }
}

impl WarningFlags {
    /// Every non-zero reserved field.
    pub const RESERVED: WarningFlags = WarningFlags::RESERVED_FLAGS
        .union(WarningFlags::RESERVED_TX_ATTEMPT)
        .union(WarningFlags::RESERVED_DATA)
        .union(WarningFlags::RESERVED_FB_FLAGS)
        .union(WarningFlags::RESERVED_NACK)
        .union(WarningFlags::RESERVED_CNP);
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    #[inline]
    fn buf_mut(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }

    /// Sets tx_attempt (saturating at 15), keeping the reserved bits.
    pub fn set_tx_attempt(&mut self, attempt: u8) {
        let byte = &mut self.buf_mut()[field::TX_ATTEMPT];
        *byte = (attempt.min(15) << 4) | (*byte & 0x0F);
    }

    pub fn set_ev(&mut self, ev: u16) {
        put16(self.buf_mut(), field::EV, ev);
    }

    pub fn set_path_seq(&mut self, path_seq: u16) {
        put16(self.buf_mut(), field::PATH_SEQ, path_seq);
    }

    pub fn set_tx_ts(&mut self, tx_ts: u32) {
        put32(self.buf_mut(), field::TX_TS, tx_ts);
    }

    pub fn set_flags(&mut self, flags: Flags) {
        self.buf_mut()[field::FLAGS] = flags.bits();
    }

    /// Rewrites the CRC32C trailer after header fields changed (a
    /// retransmission on another ev, say).
    pub fn fill_crc(&mut self, layout: &Layout) {
        if let Some(trailer) = layout.trailer.clone() {
            let crc = crc32c::crc32c(&self.buf()[..trailer.start]);
            put32(self.buf_mut(), trailer, crc);
        }
    }
}

/// What a snaplen-cut capture gave: the view (when at least the base header
/// is there), the layout (when the headers could be checked) and where
/// decoding stopped, with offsets relative to the UDP payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lax<'a> {
    pub packet: Option<Packet<&'a [u8]>>,
    pub layout: Option<Layout>,
    pub stop: Option<Error>,
}

/// Decodes as much as `captured` holds of a packet that is `wire_len` bytes
/// long on the wire (from the UDP length). Never panics.
pub fn parse_lax(captured: &[u8], wire_len: usize) -> Lax<'_> {
    if captured.len() < field::BASE_LEN {
        return Lax {
            packet: None,
            layout: None,
            stop: Some(short(
                Layer::MetaRoceBase,
                field::BASE_LEN,
                captured.len(),
                wire_len,
            )),
        };
    }
    let packet = Packet::new_unchecked(captured);
    match inspect(captured, wire_len) {
        Ok(layout) => {
            let needed = layout
                .trailer
                .as_ref()
                .map_or(layout.payload.end, |t| t.end);
            let stop = (captured.len() < needed).then(|| {
                Error::truncated(
                    Layer::MetaRocePayload,
                    captured.len(),
                    needed,
                    captured.len(),
                    LenSource::Captured,
                )
            });
            Lax {
                packet: Some(packet),
                layout: Some(layout),
                stop,
            }
        }
        Err(err) => Lax {
            packet: Some(packet),
            layout: None,
            stop: Some(err),
        },
    }
}

/// The heuristic test for MetaRoCE on a port that is not configured: only a
/// complete, fully valid packet of a defined type and op, with no reserved
/// bits set and a good CRC when it has one, is taken.
pub fn looks_like(udp_payload: &[u8]) -> bool {
    let Ok(packet) = Packet::new_checked(udp_payload) else {
        return false;
    };
    let Ok(layout) = packet.layout(udp_payload.len()) else {
        return false;
    };
    let known_subtype = match packet.packet_type() {
        PacketType::Data => packet.data().is_some_and(|d| d.op().is_known()),
        PacketType::Ctrl => packet.ctrl().is_some_and(|c| c.op().is_known()),
        PacketType::Nack => packet.nack().is_some_and(|n| n.code().is_known()),
        PacketType::Cnp => packet.cnp_reason().is_some_and(CnpReason::is_known),
        PacketType::Experimental | PacketType::Unknown(_) => false,
        _ => true,
    };
    known_subtype
        && packet.warnings().is_empty()
        && !matches!(packet.crc_status(&layout), CrcStatus::Bad { .. })
}

/// A length error: malformed when the wire itself is too short, a capture
/// truncation when only the captured bytes are.
fn short(layer: Layer, required: usize, captured: usize, wire_len: usize) -> Error {
    if wire_len < required {
        Error::truncated(
            layer,
            wire_len.min(captured),
            required,
            wire_len,
            LenSource::Header,
        )
    } else {
        Error::truncated(layer, captured, required, captured, LenSource::Captured)
    }
}

/// `DataOp::header_len` of every op byte, looked up once per packet.
const DATA_HEADER_LEN: [u8; 256] = {
    let mut table = [0; 256];
    let mut op = 0;
    while op < 256 {
        table[op] = DataOp::from_raw(op as u8).header_len() as u8;
        op += 1;
    }
    table
};

/// The fixed size of the base plus type header (section 2 to 5), reading
/// op / sack_words where the size depends on them.
#[inline(always)]
fn fixed_len(buf: &[u8], wire_len: usize) -> Result<usize, Error> {
    let ty = PacketType::from(buf[field::VER_TYPE] & 0x0F);
    let need = |layer, at: usize| -> Result<(), Error> {
        if buf.len() > at {
            Ok(())
        } else {
            Err(short(layer, at + 1, buf.len(), wire_len))
        }
    };
    Ok(match ty {
        PacketType::Data => {
            need(Layer::MetaRoceData, field::DATA_OP)?;
            usize::from(DATA_HEADER_LEN[usize::from(buf[field::DATA_OP])])
        }
        PacketType::Ack => {
            need(Layer::MetaRoceFeedback, field::SACK_WORDS)?;
            let words = buf[field::SACK_WORDS];
            if words > field::MAX_SACK_WORDS {
                return Err(Error::bad_value(
                    Layer::MetaRoceFeedback,
                    field::SACK_WORDS,
                    "sack_words",
                    words.into(),
                    "0 to 4",
                ));
            }
            field::SACK_BITMAP(words).end
        }
        PacketType::Nack => field::NACK_LEN,
        PacketType::Cnp => field::CNP_LEN,
        PacketType::ProbeReply => field::FEEDBACK_LEN,
        PacketType::Ctrl => field::CTRL_LEN,
        PacketType::Probe | PacketType::Experimental | PacketType::Unknown(_) => field::BASE_LEN,
    })
}

fn type_layer(ty: PacketType) -> Layer {
    match ty {
        PacketType::Data => Layer::MetaRoceData,
        PacketType::Ack => Layer::MetaRoceAck,
        PacketType::Nack => Layer::MetaRoceNack,
        PacketType::Cnp => Layer::MetaRoceCnp,
        PacketType::ProbeReply => Layer::MetaRoceFeedback,
        PacketType::Ctrl => Layer::MetaRoceCtrl,
        _ => Layer::MetaRoceBase,
    }
}

/// The validation of spec sections 8 and 11, shared by the strict and lax
/// constructors. `buf` holds the captured bytes (at least the base header);
/// `wire_len` is the UDP payload length on the wire.
#[inline(always)]
fn inspect(buf: &[u8], wire_len: usize) -> Result<Layout, Error> {
    if buf.len() < field::BASE_LEN || wire_len < field::BASE_LEN {
        return Err(short(
            Layer::MetaRoceBase,
            field::BASE_LEN,
            buf.len(),
            wire_len,
        ));
    }
    let packet = Packet::new_unchecked(buf);
    let version = packet.version();
    if version != VERSION {
        return Err(Error::bad_value(
            Layer::MetaRoceBase,
            field::VER_TYPE,
            "version",
            version.into(),
            "1",
        ));
    }
    let ty = packet.packet_type();
    let fixed_len = fixed_len(buf, wire_len)?;
    let header_len = packet.header_len();
    if header_len < fixed_len {
        return Err(Error::bad_value(
            Layer::MetaRoceBase,
            field::HLEN,
            "hlen",
            packet.hlen().into(),
            "hlen*4 at least the fixed size of the type and op",
        ));
    }
    if header_len > wire_len {
        return Err(Error::bad_value(
            Layer::MetaRoceBase,
            field::HLEN,
            "hlen",
            packet.hlen().into(),
            "hlen*4 at most the UDP payload length",
        ));
    }
    if fixed_len > buf.len() {
        return Err(short(type_layer(ty), fixed_len, buf.len(), wire_len));
    }
    if packet.flags().contains(Flags::EXT) {
        for tlv in TlvIter::new(buf, fixed_len, header_len) {
            tlv?;
        }
    }

    let crc_len = if packet.flags().contains(Flags::CRC) {
        field::CRC_LEN
    } else {
        0
    };
    let avail = wire_len - header_len;
    let (payload_len, trailer, trimmed) = match ty {
        PacketType::Data => {
            let declared = usize::from(be16(buf, field::PAYLOAD_LEN));
            if avail == declared + crc_len {
                (declared, crc_len > 0, false)
            } else if avail < declared + crc_len {
                (avail.min(declared), false, true)
            } else {
                return Err(Error::bad_value(
                    Layer::MetaRoceData,
                    field::PAYLOAD_LEN.start,
                    "payload_len",
                    declared as u64,
                    "the UDP payload minus hlen*4 and the trailer (a longer payload is malformed)",
                ));
            }
        }
        // Unknown types: everything after the header is payload (docs/spec-decisions.md).
        PacketType::Experimental | PacketType::Unknown(_) => {
            let trailer = crc_len > 0 && avail >= crc_len;
            (avail - if trailer { crc_len } else { 0 }, trailer, false)
        }
        _ => {
            if avail != crc_len {
                return Err(Error::bad_value(
                    Layer::MetaRocePayload,
                    header_len,
                    "bytes after the header",
                    avail as u64,
                    if crc_len > 0 {
                        "exactly the 4-byte trailer (this type has no payload)"
                    } else {
                        "none (this type has no payload)"
                    },
                ));
            }
            (0, crc_len > 0, false)
        }
    };
    let payload = header_len..header_len + payload_len;
    let trailer = trailer.then(|| payload.end..payload.end + field::CRC_LEN);
    Ok(Layout {
        header_len,
        fixed_len,
        payload,
        trailer,
        trimmed,
        wire_len,
    })
}
