//! RoCEv2: InfiniBand transport headers over UDP (destination port 4791).
//!
//! The UDP payload of a RoCEv2 packet is
//!
//! ```text
//! BTH (12) | extension headers (by opcode) | payload (+ pad) | ICRC (4)
//! ```
//!
//! One module per header ([`bth`], [`reth`], [`aeth`], [`deth`],
//! [`atomic`]) with smoltcp-style `Packet<T>` views and owned `Repr`s, the
//! [`opcode`] table saying which extension headers an opcode carries,
//! [`icrc`] for the invariant CRC, and two facts a flow tracker needs: an
//! opcode's [`role`] in the RC service and 24-bit [`psn`] arithmetic. [`Packet`] ties them together over a whole
//! UDP payload.
//!
//! # Panics and checks
//! When parsing untrusted input, construct views with `new_checked` (or
//! [`Packet::new_checked_lax`] / [`parse_lax`] for snaplen-cut captures):
//! getters of a checked view never panic. `new_unchecked` is for emitting
//! into a buffer of the right size; its getters and setters panic on a
//! shorter buffer.
//!
//! # Errors
//! Errors of [`Packet`] carry offsets relative to the first byte of the BTH
//! (= the UDP payload); the frame decoder shifts them with
//! [`Error::at_offset`]. The header that broke is named by its [`Layer`]
//! (`Bth`, `Deth`, `Reth`, `AtomicEth`, `Aeth`, `AtomicAckEth`, `ImmDt`,
//! `Ieth`, `CnpReserved`, `Icrc`).

pub mod aeth;
pub mod atomic;
pub mod bth;
pub mod deth;
pub mod icrc;
pub mod opcode;
pub mod psn;
pub mod reth;
pub mod role;

pub use aeth::{NakCode, Syndrome};
pub use atomic::AtomicEthRepr;
pub use icrc::{ICRC_LEN, IcrcStatus};
pub use opcode::{ExtHeaders, Opcode, Service};
pub use psn::{PSN_MASK, sext24};
pub use role::{RequestOp, Role, role};

use crate::{Error, Layer, LenSource, Warning};

/// The IANA UDP destination port of RoCEv2.
pub const UDP_PORT: u16 = 4791;
/// Length of the immediate data header.
pub const IMM_DT_LEN: usize = 4;
/// Length of the invalidate ETH.
pub const IETH_LEN: usize = 4;
/// Length of the reserved block after the BTH of a CNP.
pub const CNP_RESERVED_LEN: usize = 16;

pub(crate) type Field = core::ops::Range<usize>;

#[inline]
pub(crate) fn be16(b: &[u8], f: Field) -> u16 {
    u16::from_be_bytes([b[f.start], b[f.start + 1]])
}
#[inline]
pub(crate) fn be24(b: &[u8], f: Field) -> u32 {
    u32::from_be_bytes([0, b[f.start], b[f.start + 1], b[f.start + 2]])
}
#[inline]
pub(crate) fn be32(b: &[u8], f: Field) -> u32 {
    let s = f.start;
    u32::from_be_bytes([b[s], b[s + 1], b[s + 2], b[s + 3]])
}
#[inline]
pub(crate) fn be64(b: &[u8], f: Field) -> u64 {
    let s = f.start;
    u64::from_be_bytes([
        b[s],
        b[s + 1],
        b[s + 2],
        b[s + 3],
        b[s + 4],
        b[s + 5],
        b[s + 6],
        b[s + 7],
    ])
}

/// Checks that bytes `..end` exist. `captured` is how many bytes the buffer
/// holds, `wire` how many the packet has on the wire (from the UDP length).
/// The error offset is where the available data ends; `start` is where the
/// failing header starts (to compute what it needed).
#[inline]
pub(crate) fn check_len(
    layer: Layer,
    start: usize,
    end: usize,
    captured: usize,
    wire: usize,
) -> Result<(), Error> {
    if end <= captured && end <= wire {
        return Ok(());
    }
    let (avail, source) = if end > wire {
        (wire, LenSource::Header)
    } else {
        (captured, LenSource::Captured)
    };
    Err(Error::truncated(
        layer,
        avail,
        end - start,
        avail.saturating_sub(start),
        source,
    ))
}

/// The extension headers in wire order, with the layer errors name.
const ORDER: [(ExtHeaders, Layer); 8] = [
    (ExtHeaders::DETH, Layer::Deth),
    (ExtHeaders::RETH, Layer::Reth),
    (ExtHeaders::ATOMIC_ETH, Layer::AtomicEth),
    (ExtHeaders::AETH, Layer::Aeth),
    (ExtHeaders::ATOMIC_ACK_ETH, Layer::AtomicAckEth),
    (ExtHeaders::IMM_DT, Layer::ImmDt),
    (ExtHeaders::IETH, Layer::Ieth),
    (ExtHeaders::CNP_RESERVED, Layer::CnpReserved),
];

/// Offset (from the BTH start) of extension header `which` in a packet
/// carrying `headers`.
#[inline]
fn ext_offset(headers: ExtHeaders, which: ExtHeaders) -> usize {
    let mut off = bth::HEADER_LEN;
    for (h, _) in ORDER {
        if h == which {
            break;
        }
        if headers.contains(h) {
            off += h.byte_len();
        }
    }
    off
}

/// A checked view of a whole RoCEv2 packet (the UDP payload: BTH to ICRC).
///
/// `wire_len` is the packet's length on the wire (UDP length - 8); the
/// buffer may hold fewer bytes when a snaplen cut the capture, in which
/// case the headers are readable but the ICRC is not present.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
    wire_len: usize,
    headers: ExtHeaders,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checks (emitting only); its length is taken
    /// as the wire length.
    pub fn new_unchecked(buffer: T) -> Packet<T> {
        let wire_len = buffer.as_ref().len();
        let headers = buffer
            .as_ref()
            .first()
            .map_or(ExtHeaders::PAYLOAD, |&op| Opcode::from(op).headers());
        Packet {
            buffer,
            wire_len,
            headers,
        }
    }

    /// Checks a buffer holding the whole packet: BTH, the extension
    /// headers of its opcode and the ICRC.
    pub fn new_checked(buffer: T) -> Result<Packet<T>, Error> {
        let len = buffer.as_ref().len();
        Self::new_checked_lax(buffer, len)
    }

    /// Checks a buffer that may be cut short of `wire_len` (the packet length
    /// from the UDP header): BTH and extension headers must be captured;
    /// the packet must be long enough on the wire for its headers and the
    /// ICRC. A buffer longer than `wire_len` is read only up to `wire_len`.
    pub fn new_checked_lax(buffer: T, wire_len: usize) -> Result<Packet<T>, Error> {
        let bytes = buffer.as_ref();
        let captured = bytes.len().min(wire_len);
        check_len(Layer::Bth, 0, bth::HEADER_LEN, captured, wire_len)?;
        let op = bytes[0];
        let headers = Opcode::from(op).headers();
        let end = bth::HEADER_LEN + opcode::ext_len(op);
        if end > captured || end > wire_len {
            // slow path: find the header that does not fit
            let mut end = bth::HEADER_LEN;
            for (h, layer) in ORDER {
                if headers.contains(h) {
                    let start = end;
                    end += h.byte_len();
                    check_len(layer, start, end, captured, wire_len)?;
                }
            }
        }
        if wire_len < end + ICRC_LEN {
            return Err(Error::truncated(
                Layer::Icrc,
                wire_len,
                ICRC_LEN,
                wire_len - end,
                LenSource::Header,
            ));
        }
        Ok(Packet {
            buffer,
            wire_len,
            headers,
        })
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    #[inline]
    fn bytes(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// A borrowed view of this packet, for the accessors that return
    /// slices and header views (they live on `Packet<&'a [u8]>` so that
    /// what they return outlives the view itself).
    #[inline]
    pub fn as_view(&self) -> Packet<&[u8]> {
        Packet {
            buffer: self.bytes(),
            wire_len: self.wire_len,
            headers: self.headers,
        }
    }
    #[inline]
    pub fn opcode(&self) -> Opcode {
        Opcode::from(self.bytes()[0])
    }
    /// Which extension headers this packet carries (from its opcode).
    #[inline]
    pub fn ext_headers(&self) -> ExtHeaders {
        self.headers
    }
    /// The AtomicETH of a Compare & Swap or Fetch & Add.
    pub fn atomic_eth(&self) -> Option<AtomicEthRepr> {
        ext(self.bytes(), self.headers, ExtHeaders::ATOMIC_ETH).and_then(AtomicEthRepr::parse)
    }
    /// The original remote data of an Atomic Acknowledge.
    pub fn atomic_ack_eth(&self) -> Option<u64> {
        ext(self.bytes(), self.headers, ExtHeaders::ATOMIC_ACK_ETH)
            .and_then(atomic::parse_atomic_ack)
    }
    /// Immediate data (big-endian, as `infiniband.immdt` shows it).
    pub fn imm_dt(&self) -> Option<u32> {
        ext(self.bytes(), self.headers, ExtHeaders::IMM_DT).map(|b| be32(b, 0..4))
    }
    /// The R_Key to invalidate of a Send with Invalidate.
    pub fn ieth(&self) -> Option<u32> {
        ext(self.bytes(), self.headers, ExtHeaders::IETH).map(|b| be32(b, 0..4))
    }

    /// Length of BTH plus extension headers.
    #[inline]
    pub fn header_len(&self) -> usize {
        bth::HEADER_LEN + opcode::ext_len(self.bytes()[0])
    }
    /// Length of the packet on the wire (BTH to ICRC included).
    #[inline]
    pub fn wire_len(&self) -> usize {
        self.wire_len
    }
    /// True when the buffer holds the whole packet (ICRC included).
    #[inline]
    pub fn is_complete(&self) -> bool {
        self.bytes().len() >= self.wire_len
    }
    /// Payload length on the wire, pad bytes included.
    #[inline]
    pub fn payload_wire_len(&self) -> usize {
        self.wire_len - ICRC_LEN - self.header_len()
    }
    /// Payload length on the wire without the BTH pad bytes.
    #[inline]
    pub fn data_len(&self) -> usize {
        let pad = (self.bytes()[1] >> 4) & 0x3;
        self.payload_wire_len().saturating_sub(usize::from(pad))
    }
    /// The four ICRC bytes as on the wire (`None` when cut by snaplen).
    pub fn icrc_bytes(&self) -> Option<[u8; 4]> {
        let b = self.bytes().get(self.wire_len - ICRC_LEN..self.wire_len)?;
        Some([b[0], b[1], b[2], b[3]])
    }
    /// The stored ICRC as a CRC-32 value (little-endian on the wire).
    pub fn icrc(&self) -> Option<u32> {
        self.icrc_bytes().map(u32::from_le_bytes)
    }
    /// Verifies the ICRC given the IP headers (IP header up to the UDP
    /// header) and the 8-byte UDP header that carried this packet.
    pub fn verify_icrc(&self, ip_headers: &[u8], udp_header: &[u8]) -> IcrcStatus {
        let view = self.as_view();
        match (view.icrc_covered(), view.icrc_bytes()) {
            (Some(covered), Some(stored)) => icrc::verify(ip_headers, udp_header, covered, stored),
            _ => IcrcStatus::NotPresent,
        }
    }
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Legal but suspicious contents, never fatal: a transport header
    /// version other than 0, non-zero reserved bits (BTH resv6a and resv7,
    /// DETH, AETH bit 7), a reserved AETH syndrome kind, a pad count larger
    /// than the payload. Offsets are from the BTH start. Does not allocate.
    pub fn warnings(&self) -> impl Iterator<Item = Warning> + use<T> {
        let view = self.as_view();
        let b = view.bth();
        let w = |cond: bool, layer: Layer, offset: usize, message: &'static str| {
            cond.then_some(Warning {
                layer,
                offset,
                message,
            })
        };
        let aeth_off = ext_offset(self.headers, ExtHeaders::AETH);
        let deth_off = ext_offset(self.headers, ExtHeaders::DETH);
        let syndrome = view.aeth().map(|a| a.syndrome_byte());
        [
            w(
                b.tver() != 0,
                Layer::Bth,
                1,
                "transport header version is not 0",
            ),
            w(
                b.resv6a() != 0,
                Layer::Bth,
                4,
                "reserved bits (resv6a) are not zero",
            ),
            w(
                b.resv7() != 0,
                Layer::Bth,
                8,
                "reserved bits (resv7) are not zero",
            ),
            w(
                view.deth().is_some_and(|d| d.reserved() != 0),
                Layer::Deth,
                deth_off + 4,
                "DETH reserved byte is not zero",
            ),
            w(
                syndrome.is_some_and(|s| s & 0x80 != 0),
                Layer::Aeth,
                aeth_off,
                "AETH syndrome reserved bit is set",
            ),
            w(
                syndrome.is_some_and(|s| s & 0x60 == 0x40),
                Layer::Aeth,
                aeth_off,
                "AETH syndrome kind is reserved (0b10)",
            ),
            w(
                usize::from(b.pad_count()) > self.payload_wire_len(),
                Layer::Bth,
                1,
                "pad count exceeds the payload",
            ),
        ]
        .into_iter()
        .flatten()
    }
}

/// Extension header `which` of a checked packet, if its opcode has it.
#[inline]
fn ext(bytes: &[u8], headers: ExtHeaders, which: ExtHeaders) -> Option<&[u8]> {
    if headers.contains(which) {
        let off = ext_offset(headers, which);
        bytes.get(off..off + which.byte_len())
    } else {
        None
    }
}

/// Accessors returning slices and header views that borrow the
/// underlying buffer (`'a`), not the `Packet` value.
impl<'a> Packet<&'a [u8]> {
    /// The BTH.
    #[inline]
    pub fn bth(&self) -> bth::Packet<&'a [u8]> {
        bth::Packet::new_unchecked(&self.buffer[..bth::HEADER_LEN])
    }
    #[inline]
    pub fn deth(&self) -> Option<deth::Packet<&'a [u8]>> {
        ext(self.buffer, self.headers, ExtHeaders::DETH).map(deth::Packet::new_unchecked)
    }
    #[inline]
    pub fn reth(&self) -> Option<reth::Packet<&'a [u8]>> {
        ext(self.buffer, self.headers, ExtHeaders::RETH).map(reth::Packet::new_unchecked)
    }
    #[inline]
    pub fn aeth(&self) -> Option<aeth::Packet<&'a [u8]>> {
        ext(self.buffer, self.headers, ExtHeaders::AETH).map(aeth::Packet::new_unchecked)
    }
    /// The captured payload bytes (pad included; fewer than
    /// [`payload_wire_len`](Self::payload_wire_len) when cut by snaplen).
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        let start = self.header_len();
        let end = (self.wire_len - ICRC_LEN).min(self.buffer.len());
        self.buffer.get(start..end).unwrap_or(&[])
    }
    /// The bytes the ICRC covers after the pseudo-header: BTH up to the
    /// ICRC (`None` when cut by snaplen).
    pub fn icrc_covered(&self) -> Option<&'a [u8]> {
        self.buffer.get(..self.wire_len - ICRC_LEN)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// The payload bytes, for emitting (pad included).
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let start = self.header_len();
        let end = self.wire_len - ICRC_LEN;
        &mut self.buffer.as_mut()[start..end]
    }
    /// Writes the ICRC value (little-endian).
    pub fn set_icrc(&mut self, value: u32) {
        let end = self.wire_len;
        self.buffer.as_mut()[end - ICRC_LEN..end].copy_from_slice(&value.to_le_bytes());
    }
    /// Computes and writes the ICRC for the given IP and UDP headers.
    pub fn fill_icrc(&mut self, ip_headers: &[u8], udp_header: &[u8]) {
        let end = self.wire_len - ICRC_LEN;
        let value = icrc::compute(ip_headers, udp_header, &self.buffer.as_ref()[..end]);
        self.set_icrc(value);
    }
}

/// The result of a lax parse: whatever decoded, and where it stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lax<'a> {
    /// The packet view, when BTH and extension headers were captured.
    pub packet: Option<Packet<&'a [u8]>>,
    /// Why decoding stopped (offsets from the BTH start): a header cut
    /// short, or an ICRC truncation when only the payload or ICRC is
    /// missing from the capture.
    pub stop: Option<Error>,
}

/// Parses a UDP payload that may be cut short of its wire length.
/// Never panics; `stop` is `Some` whenever the packet is not whole.
pub fn parse_lax(captured: &[u8], wire_len: usize) -> Lax<'_> {
    match Packet::new_checked_lax(captured, wire_len) {
        Err(err) => Lax {
            packet: None,
            stop: Some(err),
        },
        Ok(packet) => {
            let stop = if packet.is_complete() {
                None
            } else {
                Some(Error::truncated(
                    Layer::Icrc,
                    captured.len(),
                    wire_len,
                    captured.len(),
                    LenSource::Captured,
                ))
            };
            Lax {
                packet: Some(packet),
                stop,
            }
        }
    }
}

/// An owned RoCEv2 packet header set. Which `Option`s are `Some` must
/// follow [`Opcode::headers`] of `bth.opcode` ([`Repr::is_consistent`]);
/// `emit` writes exactly the headers of the opcode (absent ones as zeros).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    pub bth: bth::Repr,
    pub deth: Option<deth::Repr>,
    pub reth: Option<reth::Repr>,
    pub atomic_eth: Option<AtomicEthRepr>,
    pub aeth: Option<aeth::Repr>,
    pub atomic_ack_eth: Option<u64>,
    pub imm_dt: Option<u32>,
    pub ieth: Option<u32>,
    /// Payload bytes between the headers and the ICRC, pad included.
    pub payload_len: usize,
}

impl Repr {
    /// A packet with a BTH and no other header (set the opcode's headers
    /// with struct update syntax: `Repr { aeth: Some(..), ..Repr::new(..) }`)
    /// and `payload_len` payload bytes.
    pub const fn new(bth: bth::Repr, payload_len: usize) -> Repr {
        Repr {
            bth,
            deth: None,
            reth: None,
            atomic_eth: None,
            aeth: None,
            atomic_ack_eth: None,
            imm_dt: None,
            ieth: None,
            payload_len,
        }
    }

    /// Emits into a new vector (a zero payload).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut buf = vec![0; self.buffer_len()];
        self.emit(&mut Packet::new_unchecked(&mut buf[..]));
        buf
    }

    /// Reads the headers of a checked packet.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Repr {
        let packet = packet.as_view();
        Repr {
            bth: bth::Repr::parse(&packet.bth()),
            deth: packet.deth().map(|p| deth::Repr::parse(&p)),
            reth: packet.reth().map(|p| reth::Repr::parse(&p)),
            atomic_eth: packet.atomic_eth(),
            aeth: packet.aeth().map(|p| aeth::Repr::parse(&p)),
            atomic_ack_eth: packet.atomic_ack_eth(),
            imm_dt: packet.imm_dt(),
            ieth: packet.ieth(),
            payload_len: packet.payload_wire_len(),
        }
    }

    /// True when the present headers are exactly those of the opcode.
    pub fn is_consistent(&self) -> bool {
        let h = self.bth.opcode.headers();
        h.contains(ExtHeaders::DETH) == self.deth.is_some()
            && h.contains(ExtHeaders::RETH) == self.reth.is_some()
            && h.contains(ExtHeaders::ATOMIC_ETH) == self.atomic_eth.is_some()
            && h.contains(ExtHeaders::AETH) == self.aeth.is_some()
            && h.contains(ExtHeaders::ATOMIC_ACK_ETH) == self.atomic_ack_eth.is_some()
            && h.contains(ExtHeaders::IMM_DT) == self.imm_dt.is_some()
            && h.contains(ExtHeaders::IETH) == self.ieth.is_some()
    }

    /// BTH plus extension headers.
    pub fn header_len(&self) -> usize {
        bth::HEADER_LEN + self.bth.opcode.headers().byte_len()
    }

    /// The whole packet: headers, payload and ICRC.
    pub fn buffer_len(&self) -> usize {
        self.header_len() + self.payload_len + ICRC_LEN
    }

    /// Writes the headers into `packet` (a buffer of exactly
    /// [`buffer_len`](Self::buffer_len) bytes) and zeroes the ICRC; the caller
    /// writes the payload with [`Packet::payload_mut`] and then the ICRC with
    /// [`Packet::fill_icrc`].
    ///
    /// # Panics
    /// If the buffer is shorter than `buffer_len()` (an emitting bug).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        let headers = self.bth.opcode.headers();
        packet.headers = headers;
        let buf = packet.buffer.as_mut();
        self.bth
            .emit(&mut bth::Packet::new_unchecked(&mut buf[..bth::HEADER_LEN]));
        let mut off = bth::HEADER_LEN;
        for (h, _) in ORDER {
            if !headers.contains(h) {
                continue;
            }
            let dst = &mut buf[off..off + h.byte_len()];
            dst.fill(0);
            self.emit_ext(h, dst);
            off += h.byte_len();
        }
        let end = self.buffer_len();
        buf[end - ICRC_LEN..end].fill(0);
        packet.wire_len = end;
    }
}

impl Repr {
    /// Writes extension header `h` (zeroed `dst` of its length), if present.
    fn emit_ext(&self, h: ExtHeaders, dst: &mut [u8]) {
        let word = |v: Option<u32>, dst: &mut [u8]| {
            if let Some(v) = v {
                dst.copy_from_slice(&v.to_be_bytes());
            }
        };
        match h {
            ExtHeaders::DETH => {
                if let Some(r) = self.deth {
                    r.emit(&mut deth::Packet::new_unchecked(dst));
                }
            }
            ExtHeaders::RETH => {
                if let Some(r) = self.reth {
                    r.emit(&mut reth::Packet::new_unchecked(dst));
                }
            }
            ExtHeaders::ATOMIC_ETH => {
                if let Some(r) = self.atomic_eth {
                    r.emit(dst);
                }
            }
            ExtHeaders::AETH => {
                if let Some(r) = self.aeth {
                    r.emit(&mut aeth::Packet::new_unchecked(dst));
                }
            }
            ExtHeaders::ATOMIC_ACK_ETH => {
                if let Some(v) = self.atomic_ack_eth {
                    dst.copy_from_slice(&v.to_be_bytes());
                }
            }
            ExtHeaders::IMM_DT => word(self.imm_dt, dst),
            ExtHeaders::IETH => word(self.ieth, dst),
            _ => {}
        }
    }
}

impl core::fmt::Display for Repr {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}", self.bth)?;
        if let Some(r) = self.reth {
            write!(f, " {r}")?;
        }
        if let Some(a) = self.aeth {
            write!(f, " {a}")?;
        }
        if let Some(i) = self.imm_dt {
            write!(f, " imm=0x{i:08x}")?;
        }
        write!(f, " payload={}", self.payload_len)
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::ErrorKind;

    /// UDP payload of frame 5 of montybeatnik_roce_capture_read-write-ecn.pcap
    /// (RC Acknowledge): BTH, AETH, ICRC.
    static ACK_BYTES: [u8; 20] = [
        0x11, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x11, 0x00, 0x8c, 0x84, 0xdd, 0x1f, 0x00, 0x00,
        0x01, 0xb3, 0x0c, 0xc2, 0xc0,
    ];

    /// RC RDMA Write Only with Immediate, 5 payload bytes + 3 pad, built by
    /// hand: BTH, RETH, ImmDt, payload, ICRC (zero: not verified here).
    static WRITE_IMM_BYTES: [u8; 44] = [
        0x0b, 0x30, 0xff, 0xff, 0x80, 0x00, 0x00, 0x12, 0x80, 0x00, 0x00, 0x07, // BTH
        0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x23, 0x00, 0x00, 0x00,
        0x05, // RETH
        0xca, 0xfe, 0xba, 0xbe, // ImmDt
        b'h', b'e', b'l', b'l', b'o', 0, 0, 0, // payload + pad
        0x00, 0x00, 0x00, 0x00, // ICRC
    ];

    fn write_imm_repr() -> Repr {
        let bth = bth::Repr {
            fecn: true,
            ..bth::Repr::new(Opcode::RcRdmaWriteOnlyImm, 0x12, 7)
                .with_pad_count(3)
                .with_ack_req(true)
        };
        Repr {
            reth: Some(reth::Repr {
                va: 0x1000_0000,
                r_key: 0x123,
                dma_len: 5,
            }),
            imm_dt: Some(0xcafe_babe),
            ..Repr::new(bth, 8)
        }
    }

    /// `Repr::new` is a packet of the BTH alone; `to_vec` emits what
    /// `parse` reads back.
    #[test]
    fn a_bth_only_repr_emits_what_parses_back() {
        let repr = Repr::new(bth::Repr::new(Opcode::RcSendOnly, 0x22, 100), 64);
        assert!(repr.is_consistent());
        let bytes = repr.to_vec();
        assert_eq!(bytes.len(), bth::HEADER_LEN + 64 + ICRC_LEN);
        let packet = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(Repr::parse(&packet), repr);
        let written = write_imm_repr();
        let packet = Packet::new_checked(written.to_vec()).unwrap();
        assert_eq!(Repr::parse(&packet), written);
    }

    #[test]
    fn test_parse_ack() {
        let packet = Packet::new_checked(&ACK_BYTES[..]).unwrap();
        assert_eq!(packet.opcode(), Opcode::RcAcknowledge);
        let aeth = packet.aeth().unwrap();
        assert_eq!(aeth.syndrome(), Syndrome::Ack { credit: 0x1f });
        assert_eq!(aeth.msn(), 1);
        assert!(packet.reth().is_none());
        assert_eq!(packet.payload(), &[] as &[u8]);
        assert_eq!(packet.icrc().unwrap().swap_bytes(), 0xb30c_c2c0);
    }

    #[test]
    fn test_parse_write_imm() {
        let bytes = &WRITE_IMM_BYTES[..];
        let packet = Packet::new_checked(bytes).unwrap();
        assert_eq!(Repr::parse(&packet), write_imm_repr());
        assert_eq!(packet.payload(), b"hello\0\0\0");
        assert_eq!(packet.data_len(), 5);
        assert!(packet.bth().fecn());
    }

    #[test]
    fn test_emit_write_imm() {
        let repr = write_imm_repr();
        assert!(repr.is_consistent());
        let mut bytes = vec![0xa5; repr.buffer_len()];
        let mut packet = Packet::new_unchecked(&mut bytes[..]);
        repr.emit(&mut packet);
        packet.payload_mut().copy_from_slice(b"hello\0\0\0");
        assert_eq!(&bytes[..], &WRITE_IMM_BYTES[..]);
    }

    #[test]
    fn test_cnp() {
        let mut bytes = [0u8; 32];
        bytes[0] = 0x81;
        bytes[4] = 0x40; // BECN
        bytes[7] = 0x42;
        let packet = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(packet.opcode(), Opcode::Cnp);
        assert_eq!(packet.header_len(), 28);
        assert_eq!(packet.payload_wire_len(), 0);
        assert!(packet.bth().becn());
        assert_eq!(packet.bth().dest_qp(), 0x42);
        let err = Packet::new_checked(&bytes[..31]).unwrap_err();
        assert_eq!(err.layer, Layer::Icrc);
        let err = Packet::new_checked(&bytes[..20]).unwrap_err();
        assert_eq!((err.layer, err.offset), (Layer::CnpReserved, 20));
    }

    #[test]
    fn test_truncation_names_layer_and_source() {
        let bytes = &WRITE_IMM_BYTES[..];
        let cases = [(5, Layer::Bth), (20, Layer::Reth), (30, Layer::ImmDt)];
        for (cut, layer) in cases {
            // cut by snaplen: the wire length says 44
            let err = Packet::new_checked_lax(&bytes[..cut], 44).unwrap_err();
            assert_eq!((err.layer, err.offset), (layer, cut));
            assert!(err.is_capture_truncation());
            // cut on the wire: malformed
            let err = Packet::new_checked(&bytes[..cut]).unwrap_err();
            assert_eq!((err.layer, err.offset), (layer, cut));
            assert!(matches!(
                err.kind,
                ErrorKind::Truncated {
                    source: LenSource::Header,
                    ..
                }
            ));
        }
        // payload cut by snaplen: headers readable, ICRC missing
        let lax = parse_lax(&bytes[..35], 44);
        let packet = lax.packet.unwrap();
        assert_eq!(packet.imm_dt(), Some(0xcafe_babe));
        assert_eq!(packet.payload(), b"hel");
        assert_eq!(packet.icrc(), None);
        let stop = lax.stop.unwrap();
        assert_eq!((stop.layer, stop.offset), (Layer::Icrc, 35));
        assert!(stop.is_capture_truncation());
        assert_eq!(packet.verify_icrc(&[], &[]), IcrcStatus::NotPresent);
    }

    #[test]
    fn test_warnings() {
        let packet = Packet::new_checked(&ACK_BYTES[..]).unwrap();
        assert_eq!(packet.warnings().count(), 0);
        let mut bytes = ACK_BYTES;
        bytes[8] = 0x81; // AckReq + resv7
        bytes[12] = 0xdf; // AETH reserved bit 7 + reserved kind 0b10
        let packet = Packet::new_checked(&bytes[..]).unwrap();
        let warnings: Vec<_> = packet.warnings().collect();
        assert_eq!(warnings.len(), 3, "{warnings:?}");
        assert_eq!((warnings[0].layer, warnings[0].offset), (Layer::Bth, 8));
        assert_eq!((warnings[1].layer, warnings[1].offset), (Layer::Aeth, 12));
        // pad count larger than an empty payload
        let mut bytes = ACK_BYTES;
        bytes[1] = 0x30;
        let packet = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(packet.warnings().count(), 1);
    }

    #[test]
    fn test_unknown_opcode_is_bth_and_payload() {
        let mut bytes = [0u8; 20];
        bytes[0] = 0x4a; // RD RDMA Write Only: not decoded
        let packet = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(packet.opcode(), Opcode::Unknown(0x4a));
        assert_eq!(packet.payload().len(), 4);
    }
}
