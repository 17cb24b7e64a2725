//! A scripted RoCEv2 RC exchange with every case the RoCEv2 analysis
//! names, emitted with `proto_parse::rocev2` with a correct ICRC (but one
//! frame's), and what the analysis must say of it.
//!
//! 10.0.0.1 (requester, QP 0x30) sends to QP 0x20 of 10.0.0.2; frames are
//! 1 us apart, but for a pause of 15 us before f14 ([`offset_ns`]; with
//! `super::write_pcap` all are 1 us apart).
//!
//! ```text
//! f1-f4   SEND ONLY psn 10..13 (f3 CE-marked)
//! f5      ACK 10                       -> acks the request in f1
//! f6      NAK PSN sequence error 11
//! f7      CNP to QP 0x30
//! f8-f10  psn 11, 12, 13 again         -> go-back-N of f2, f3, f4
//! f11     ACK 13
//! f12     SEND ONLY psn 14
//! f13     RNR NAK 14 (timer 3: 30 us)
//! f14     psn 14 again, 16 us later    -> go-back-N (timeout), RC-REQ-003
//!                                          (after a reaction time, before the timer)
//! f15     ACK 14
//! f16     psn 14 again                 -> duplicate (already acknowledged)
//! f17     READ request psn 15, 1024 bytes (4 responses at 256-byte PMTU)
//! f18-f21 READ response first, middle, middle, last psn 15..18 -> complete
//! f22     SEND ONLY psn 21             -> PSN gap 2 (expected 19)
//! f23     CNP to QP 0x30               -> 31 us after f7's, RC-CNP-001
//! f24     SEND ONLY psn 22 with a bad ICRC
//! ```

use std::net::SocketAddr;

use proto_parse::build::UdpFrameBuilder;
use proto_parse::rocev2::{self, Opcode, aeth, bth, icrc, reth};

pub const REQUEST_QP: u32 = 0x20;
pub const RESPONSE_QP: u32 = 0x30;

/// A RoCEv2 frame over Ethernet and IPv4 with its ICRC computed.
pub fn frame(repr: &rocev2::Repr, forward: bool, ce: bool) -> Vec<u8> {
    let (a, b) = if forward {
        ([10, 0, 0, 1], [10, 0, 0, 2])
    } else {
        ([10, 0, 0, 2], [10, 0, 0, 1])
    };
    let mut f = UdpFrameBuilder::new(
        SocketAddr::from((a, 49152)),
        SocketAddr::from((b, rocev2::UDP_PORT)),
    )
    .with_ecn(if ce { 3 } else { 2 })
    .build(&repr.to_vec());
    let n = f.len();
    // Ethernet (14), IPv4 without options (20), UDP (8), BTH...ICRC.
    let c = icrc::compute(&f[14..34], &f[34..42], &f[42..n - 4]);
    f[n - 4..].copy_from_slice(&c.to_le_bytes());
    f
}

fn bth(opcode: Opcode, qp: u32, psn: u32) -> bth::Repr {
    bth::Repr {
        ack_req: true,
        ..bth::Repr::new(opcode, qp, psn)
    }
}

/// A request from 10.0.0.1 with `payload` bytes.
pub fn request(opcode: Opcode, psn: u32, payload: usize) -> rocev2::Repr {
    rocev2::Repr::new(bth(opcode, REQUEST_QP, psn), payload)
}

/// An ACK or NAK from 10.0.0.2 with this syndrome.
pub fn ack(psn: u32, syndrome: u8) -> rocev2::Repr {
    rocev2::Repr {
        aeth: Some(aeth::Repr { syndrome, msn: 0 }),
        ..rocev2::Repr::new(bth(Opcode::RcAcknowledge, RESPONSE_QP, psn), 0)
    }
}

/// A READ response from 10.0.0.2 (an AETH on the first and last).
pub fn read_response(opcode: Opcode, psn: u32) -> rocev2::Repr {
    let aeth = matches!(
        opcode,
        Opcode::RcRdmaReadResponseFirst | Opcode::RcRdmaReadResponseLast
    )
    .then_some(aeth::Repr {
        syndrome: 0x1f,
        msn: 0,
    });
    rocev2::Repr {
        aeth,
        ..rocev2::Repr::new(bth(opcode, RESPONSE_QP, psn), 256)
    }
}

pub fn cnp() -> rocev2::Repr {
    rocev2::Repr::new(bth::Repr::new(Opcode::Cnp, RESPONSE_QP, 0), 16)
}

/// The frames of the script above.
/// When frame `i` (from 0) of [`script`] is captured, after the first: 1 us
/// apart, with 15 us more before f14 (the retry after the RNR NAK must
/// come later than the requester's reaction time, `--reaction-min`).
pub fn offset_ns(i: usize) -> u64 {
    i as u64 * 1_000 + if i >= 13 { 15_000 } else { 0 }
}

pub fn script() -> Vec<Vec<u8>> {
    use Opcode::*;
    let send = |psn| frame(&request(RcSendOnly, psn, 64), true, false);
    let reply = |r: rocev2::Repr| frame(&r, false, false);
    let read = rocev2::Repr {
        reth: Some(reth::Repr {
            va: 0x1000,
            r_key: 7,
            dma_len: 1024,
        }),
        ..request(RcRdmaReadRequest, 15, 0)
    };
    let mut bad = send(22);
    let n = bad.len();
    bad[n - 1] ^= 0xff;
    vec![
        send(10),
        send(11),
        frame(&request(RcSendOnly, 12, 64), true, true),
        send(13),
        reply(ack(10, 0x1f)),
        reply(ack(11, 0x60)),
        reply(cnp()),
        send(11),
        send(12),
        send(13),
        reply(ack(13, 0x1f)),
        send(14),
        reply(ack(14, 0x23)),
        send(14),
        reply(ack(14, 0x1f)),
        send(14),
        frame(&read, true, false),
        reply(read_response(RcRdmaReadResponseFirst, 15)),
        reply(read_response(RcRdmaReadResponseMiddle, 16)),
        reply(read_response(RcRdmaReadResponseMiddle, 17)),
        reply(read_response(RcRdmaReadResponseLast, 18)),
        send(21),
        reply(cnp()),
        bad,
    ]
}
