//! Base Transport Header (IBTA vol. 1, 9.2): the 12 bytes after the UDP
//! header of every RoCEv2 packet.

use super::opcode::Opcode;
use super::{Field, be16, be24, check_len};
use crate::{Error, Layer};

/// A read/write view of a BTH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

mod field {
    use super::Field;
    pub const OPCODE: usize = 0;
    /// SE (0x80), M (0x40), pad count (0x30), transport version (0x0f).
    pub const FLAGS: usize = 1;
    pub const P_KEY: Field = 2..4;
    /// FECN (0x80), BECN (0x40), resv6a (0x3f). Called resv8a before IBTA
    /// 1.3; masked to all-ones in the ICRC.
    pub const FB: usize = 4;
    pub const DEST_QP: Field = 5..8;
    /// AckReq (0x80), resv7 (0x7f).
    pub const ACK_REQ: usize = 8;
    pub const PSN: Field = 9..12;
}

/// Length of the BTH.
pub const HEADER_LEN: usize = field::PSN.end;
/// Offset of the byte masked to all-ones in the ICRC (FECN/BECN/resv6a).
pub const ICRC_MASKED_BYTE: usize = field::FB;

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking its length: getters panic if it is
    /// shorter than [`HEADER_LEN`]. Use for emitting only.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer after checking it holds a whole BTH.
    pub fn new_checked(buffer: T) -> Result<Packet<T>, Error> {
        let len = buffer.as_ref().len();
        check_len(Layer::Bth, 0, HEADER_LEN, len, usize::MAX)?;
        Ok(Packet { buffer })
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    #[inline]
    pub fn opcode(&self) -> Opcode {
        Opcode::from(self.buffer.as_ref()[field::OPCODE])
    }
    /// Solicited event.
    #[inline]
    pub fn solicited(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS] & 0x80 != 0
    }
    /// Migration request (M).
    #[inline]
    pub fn mig_req(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS] & 0x40 != 0
    }
    /// Pad count: bytes of padding at the end of the payload (0..=3).
    #[inline]
    pub fn pad_count(&self) -> u8 {
        (self.buffer.as_ref()[field::FLAGS] >> 4) & 0x3
    }
    /// Transport header version (0 today).
    #[inline]
    pub fn tver(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS] & 0x0f
    }
    #[inline]
    pub fn p_key(&self) -> u16 {
        be16(self.buffer.as_ref(), field::P_KEY)
    }
    /// Forward explicit congestion notification.
    #[inline]
    pub fn fecn(&self) -> bool {
        self.buffer.as_ref()[field::FB] & 0x80 != 0
    }
    /// Backward explicit congestion notification.
    #[inline]
    pub fn becn(&self) -> bool {
        self.buffer.as_ref()[field::FB] & 0x40 != 0
    }
    /// The six reserved bits after FECN/BECN.
    #[inline]
    pub fn resv6a(&self) -> u8 {
        self.buffer.as_ref()[field::FB] & 0x3f
    }
    /// Destination queue pair (24 bits).
    #[inline]
    pub fn dest_qp(&self) -> u32 {
        be24(self.buffer.as_ref(), field::DEST_QP)
    }
    /// Acknowledge request.
    #[inline]
    pub fn ack_req(&self) -> bool {
        self.buffer.as_ref()[field::ACK_REQ] & 0x80 != 0
    }
    /// The seven reserved bits after AckReq.
    #[inline]
    pub fn resv7(&self) -> u8 {
        self.buffer.as_ref()[field::ACK_REQ] & 0x7f
    }
    /// Packet sequence number (24 bits).
    #[inline]
    pub fn psn(&self) -> u32 {
        be24(self.buffer.as_ref(), field::PSN)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    #[inline]
    pub fn set_opcode(&mut self, value: Opcode) {
        self.buffer.as_mut()[field::OPCODE] = value.into();
    }
    /// Sets SE, M, pad count and transport version at once.
    #[inline]
    pub fn set_flags(&mut self, solicited: bool, mig_req: bool, pad_count: u8, tver: u8) {
        self.buffer.as_mut()[field::FLAGS] = (u8::from(solicited) << 7)
            | (u8::from(mig_req) << 6)
            | ((pad_count & 0x3) << 4)
            | (tver & 0x0f);
    }
    #[inline]
    pub fn set_p_key(&mut self, value: u16) {
        self.buffer.as_mut()[field::P_KEY].copy_from_slice(&value.to_be_bytes());
    }
    /// Sets FECN, BECN and the six reserved bits.
    #[inline]
    pub fn set_fb(&mut self, fecn: bool, becn: bool, resv6a: u8) {
        self.buffer.as_mut()[field::FB] =
            (u8::from(fecn) << 7) | (u8::from(becn) << 6) | (resv6a & 0x3f);
    }
    #[inline]
    pub fn set_dest_qp(&mut self, value: u32) {
        self.buffer.as_mut()[field::DEST_QP].copy_from_slice(&value.to_be_bytes()[1..]);
    }
    #[inline]
    pub fn set_ack_req(&mut self, ack_req: bool, resv7: u8) {
        self.buffer.as_mut()[field::ACK_REQ] = (u8::from(ack_req) << 7) | (resv7 & 0x7f);
    }
    #[inline]
    pub fn set_psn(&mut self, value: u32) {
        self.buffer.as_mut()[field::PSN].copy_from_slice(&value.to_be_bytes()[1..]);
    }
}

/// An owned BTH. Reserved bits are kept so that `emit(parse(x))` gives back
/// the same bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    pub opcode: Opcode,
    pub solicited: bool,
    pub mig_req: bool,
    /// 0..=3
    pub pad_count: u8,
    /// 0..=15
    pub tver: u8,
    pub p_key: u16,
    pub fecn: bool,
    pub becn: bool,
    /// 0..=63
    pub resv6a: u8,
    /// 24 bits
    pub dest_qp: u32,
    pub ack_req: bool,
    /// 0..=127
    pub resv7: u8,
    /// 24 bits
    pub psn: u32,
}

impl Repr {
    /// A BTH with the given opcode, destination QP and PSN and every other
    /// field at the value of ordinary traffic: the default partition key
    /// `0xffff`, no AckReq, no padding, no solicited event, migration state
    /// and congestion bits clear, transport version and reserved bits zero.
    /// Set another field with [`with_ack_req`](Self::with_ack_req),
    /// [`with_pad_count`](Self::with_pad_count) or struct update syntax.
    pub const fn new(opcode: Opcode, dest_qp: u32, psn: u32) -> Repr {
        Repr {
            opcode,
            solicited: false,
            mig_req: false,
            pad_count: 0,
            tver: 0,
            p_key: 0xffff,
            fecn: false,
            becn: false,
            resv6a: 0,
            dest_qp,
            ack_req: false,
            resv7: 0,
            psn,
        }
    }

    /// This header with the AckReq bit set to `ack_req`.
    #[must_use]
    pub const fn with_ack_req(self, ack_req: bool) -> Repr {
        Repr { ack_req, ..self }
    }

    /// This header with `pad_count` (0..=3) bytes of padding after the payload.
    #[must_use]
    pub const fn with_pad_count(self, pad_count: u8) -> Repr {
        Repr { pad_count, ..self }
    }

    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Repr {
        Repr {
            opcode: packet.opcode(),
            solicited: packet.solicited(),
            mig_req: packet.mig_req(),
            pad_count: packet.pad_count(),
            tver: packet.tver(),
            p_key: packet.p_key(),
            fecn: packet.fecn(),
            becn: packet.becn(),
            resv6a: packet.resv6a(),
            dest_qp: packet.dest_qp(),
            ack_req: packet.ack_req(),
            resv7: packet.resv7(),
            psn: packet.psn(),
        }
    }

    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header; out-of-range values are masked to their width.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_opcode(self.opcode);
        packet.set_flags(self.solicited, self.mig_req, self.pad_count, self.tver);
        packet.set_p_key(self.p_key);
        packet.set_fb(self.fecn, self.becn, self.resv6a);
        packet.set_dest_qp(self.dest_qp);
        packet.set_ack_req(self.ack_req, self.resv7);
        packet.set_psn(self.psn);
    }
}

impl core::fmt::Display for Repr {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "BTH {} qp=0x{:06x} psn={} pkey=0x{:04x}{}{}{}",
            self.opcode,
            self.dest_qp,
            self.psn,
            self.p_key,
            if self.ack_req { " A" } else { "" },
            if self.fecn { " FECN" } else { "" },
            if self.becn { " BECN" } else { "" },
        )
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::{ErrorKind, LenSource};

    /// BTH of frame 4 of montybeatnik_roce_capture_read-write-ecn.pcap
    /// (RC RDMA Write Only, pad count 2, QP 0x11, PSN 9209053, AckReq).
    static BTH_BYTES: [u8; 12] = [
        0x0a, 0x20, 0xff, 0xff, 0x00, 0x00, 0x00, 0x11, 0x80, 0x8c, 0x84, 0xdd,
    ];

    fn repr() -> Repr {
        Repr {
            opcode: Opcode::RcRdmaWriteOnly,
            solicited: false,
            mig_req: false,
            pad_count: 2,
            tver: 0,
            p_key: 0xffff,
            fecn: false,
            becn: false,
            resv6a: 0,
            dest_qp: 0x11,
            ack_req: true,
            resv7: 0,
            psn: 9_209_053,
        }
    }

    #[test]
    fn test_parse() {
        let packet = Packet::new_checked(&BTH_BYTES[..]).unwrap();
        assert_eq!(packet.opcode(), Opcode::RcRdmaWriteOnly);
        assert_eq!(packet.pad_count(), 2);
        assert_eq!(packet.dest_qp(), 0x11);
        assert!(packet.ack_req());
        assert_eq!(Repr::parse(&packet), repr());
    }

    #[test]
    fn test_new_takes_the_defaults_of_ordinary_traffic() {
        let built = Repr::new(Opcode::RcRdmaWriteOnly, 0x11, 9_209_053)
            .with_pad_count(2)
            .with_ack_req(true);
        assert_eq!(built, repr());
        let mut bytes = vec![0xa5; HEADER_LEN];
        built.emit(&mut Packet::new_unchecked(&mut bytes));
        assert_eq!(bytes, BTH_BYTES);

        let plain = Repr::new(Opcode::RcAcknowledge, 0xab_cdef, 0x12_3456);
        assert_eq!(
            (plain.opcode, plain.dest_qp, plain.psn),
            (Opcode::RcAcknowledge, 0xab_cdef, 0x12_3456)
        );
        assert_eq!(plain.p_key, 0xffff);
        assert!(!(plain.ack_req || plain.solicited || plain.mig_req || plain.fecn || plain.becn));
        assert_eq!(
            (plain.pad_count, plain.tver, plain.resv6a, plain.resv7),
            (0, 0, 0, 0)
        );
        assert_eq!(plain.with_ack_req(true).with_ack_req(false), plain);
    }

    #[test]
    fn test_emit() {
        let mut bytes = vec![0xa5; HEADER_LEN];
        repr().emit(&mut Packet::new_unchecked(&mut bytes));
        assert_eq!(bytes, BTH_BYTES);
    }

    #[test]
    fn test_flags_and_congestion_bits() {
        let mut bytes = BTH_BYTES;
        bytes[1] = 0xc3;
        bytes[4] = 0xc0;
        let packet = Packet::new_checked(&bytes[..]).unwrap();
        assert!(packet.solicited() && packet.mig_req() && packet.fecn() && packet.becn());
        assert_eq!((packet.pad_count(), packet.tver()), (0, 3));
    }

    #[test]
    fn test_truncated() {
        let err = Packet::new_checked(&BTH_BYTES[..7]).unwrap_err();
        assert_eq!(err.layer, Layer::Bth);
        assert_eq!(err.offset, 7);
        assert_eq!(
            err.kind,
            ErrorKind::Truncated {
                required: 12,
                available: 7,
                source: LenSource::Captured
            }
        );
    }
}
