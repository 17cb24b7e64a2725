//! Writes the captures `cargo xtask bench plugin` times tshark on, all with
//! the same number of frames and the same frame sizes, frame by frame:
//! - `metaroce.pcap`: MetaRoCE DATA WRITEs with CRC32C and ACKs with SACK,
//!   four DATA to one ACK, over 8 paths;
//! - `rocev2.pcap`: its RoCEv2 twin packet for packet: a MetaRoCE DATA
//!   WRITE names its remote address and key in every packet (placement in
//!   any order), so its twin is an RC RDMA WRITE Only, whose RETH carries
//!   the same (the payload is 16 bytes shorter to keep the size); an ACK
//!   slot is a Send Middle (a RoCEv2 Acknowledge cannot carry the bytes);
//! - `rocev2-bth-only.pcap`: the cheapest twin for the InfiniBand
//!   dissector, Write Middle and Send Middle (BTH only).
//!
//! All are emitted with `proto_parse` (MetaRoCE `Repr::emit`, RoCEv2
//! `Repr::emit`), the RoCEv2 ICRC computed (`rocev2::icrc`): the plugin's
//! RoCEv2 analysis checks it, and a capture of bad ICRCs would time its
//! expert infos instead of the common packet.
//!
//! `cargo run --release -p metaroce-dissector --example bench_captures -- OUT_DIR [PACKETS] [PAYLOAD]`

use std::net::SocketAddr;
use std::path::PathBuf;

use proto_parse::build::UdpFrameBuilder;
use proto_parse::capture::PcapWriter;
use proto_parse::metaroce::{
    self, AckRepr, Body, DataRepr, FeedbackRepr, Flags, Op, Repr, SackBitmap,
};
use proto_parse::rocev2::{self, Opcode, bth, reth};

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let out = PathBuf::from(args.next().unwrap_or_else(|| ".".into()));
    let packets: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(200_000);
    let payload_len: u16 = args.next().and_then(|a| a.parse().ok()).unwrap_or(256);
    std::fs::create_dir_all(&out)?;
    let payload = vec![0x5A; usize::from(payload_len)];

    let mut mr = PcapWriter::create(out.join("metaroce.pcap"))?;
    let mut ib = PcapWriter::create(out.join("rocev2.pcap"))?;
    let mut ib_bth = PcapWriter::create(out.join("rocev2-bth-only.pcap"))?;
    let a: SocketAddr = ([10, 0, 0, 1], 0).into();
    let b: SocketAddr = ([10, 0, 0, 2], 0).into();
    let mut psn = 1000u32;
    // path_seq of the last DATA sent on each path (ev 1..=8): consecutive
    // per path, as a sender numbers them, so the capture has no path loss.
    let mut path_seq = [0u16; 9];
    let mut bytes = 0u64;
    for i in 0..packets {
        let ts = 1_700_000_000_000_000_000 + i * 1000;
        let ev = (i % 8) as u16 + 1;
        let is_ack = i % 5 == 4;
        let repr = if is_ack {
            Repr {
                flags: Flags::empty(),
                tx_attempt: 0,
                ev,
                path_seq: 0,
                dst_conn: 0x11,
                src_conn: 0x22,
                psn,
                tx_ts: i as u32,
                body: Body::Ack(AckRepr {
                    feedback: FeedbackRepr {
                        echo_ev: ev,
                        echo_psn: psn.wrapping_sub(1),
                        echo_tx_ts: i as u32,
                        rx_ts: i as u32,
                        credit: u32::MAX,
                        ..FeedbackRepr::default()
                    },
                    sack_base: psn,
                    sack: SackBitmap::from_psns(psn, [psn + 2]),
                }),
                tlvs: Vec::new(),
                payload: &[],
                crc: false,
            }
        } else {
            psn = psn.wrapping_add(1);
            let seq = &mut path_seq[usize::from(ev)];
            *seq = seq.wrapping_add(1);
            Repr {
                flags: Flags::empty(),
                tx_attempt: 0,
                ev,
                path_seq: *seq,
                dst_conn: 0x22,
                src_conn: 0x11,
                psn,
                tx_ts: i as u32,
                body: Body::Data(DataRepr {
                    op: Op::Write {
                        remote_va: 0x1000_0000,
                        rkey: 7,
                    },
                    payload_len,
                    msg_id: psn / 16,
                    msg_offset: (psn % 16) * u32::from(payload_len),
                    msg_len: 16 * u32::from(payload_len),
                }),
                tlvs: Vec::new(),
                payload: &payload,
                crc: true,
            }
        };
        let udp_payload = repr.to_vec();
        let (mut src, mut dst) = if is_ack { (b, a) } else { (a, b) };
        src.set_port(metaroce::udp_source_port(ev));
        dst.set_port(metaroce::DEFAULT_PORT);
        let frame = UdpFrameBuilder::new(src, dst).build(&udp_payload);
        mr.write_frame(ts, &frame)?;

        // The RoCEv2 twins: same UDP payload length.
        src.set_port(0xC000 | ev);
        dst.set_port(rocev2::UDP_PORT);
        let dest_qp = if is_ack { 0x11 } else { 0x22 };
        let equivalent = if is_ack {
            twin(Opcode::RcSendMiddle, dest_qp, psn, None, udp_payload.len())
        } else {
            let reth = reth::Repr {
                va: 0x1000_0000 + u64::from((psn % 16) * u32::from(payload_len)),
                r_key: 7,
                dma_len: u32::from(payload_len),
            };
            twin(
                Opcode::RcRdmaWriteOnly,
                dest_qp,
                psn,
                Some(reth),
                udp_payload.len(),
            )
        };
        let bth_only = if is_ack {
            Opcode::RcSendMiddle
        } else {
            Opcode::RcRdmaWriteMiddle
        };
        let bth_only = twin(bth_only, dest_qp, psn, None, udp_payload.len());
        for (writer, packet) in [(&mut ib, equivalent), (&mut ib_bth, bth_only)] {
            let mut frame2 = UdpFrameBuilder::new(src, dst).build(&packet);
            // Ethernet (14), IPv4 without options (20), UDP (8), BTH...ICRC.
            let n = frame2.len();
            let icrc = rocev2::icrc::compute(&frame2[14..34], &frame2[34..42], &frame2[42..n - 4]);
            frame2[n - 4..].copy_from_slice(&icrc.to_le_bytes());
            assert_eq!(frame.len(), frame2.len(), "twins have the same size");
            writer.write_frame(ts, &frame2)?;
        }
        bytes += frame.len() as u64;
    }
    mr.flush()?;
    ib.flush()?;
    ib_bth.flush()?;
    println!(
        "wrote {packets} frames ({bytes} bytes each) to {0}/metaroce.pcap, {0}/rocev2.pcap and {0}/rocev2-bth-only.pcap",
        out.display()
    );
    Ok(())
}

/// A RoCEv2 RC packet (BTH, an optional RETH, payload, zero ICRC) whose UDP
/// payload is `udp_len` bytes.
fn twin(
    opcode: Opcode,
    dest_qp: u32,
    psn: u32,
    reth: Option<reth::Repr>,
    udp_len: usize,
) -> Vec<u8> {
    let headers = bth::HEADER_LEN + reth.map_or(0, |_| reth::HEADER_LEN) + rocev2::ICRC_LEN;
    let bth = bth::Repr {
        mig_req: true,
        ..bth::Repr::new(opcode, dest_qp, psn)
    };
    rocev2::Repr {
        reth,
        ..rocev2::Repr::new(bth, udp_len - headers)
    }
    .to_vec()
}
