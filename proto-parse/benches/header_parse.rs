//! Header parsing throughput, one core: MetaRoCE headers per second through
//! the checked view (`Packet::new_checked`, which validates the whole packet
//! as spec section 8 asks, plus the getters an analyzer reads), and whole
//! frames through `frame::decode` (Ethernet/IPv4/UDP + MetaRoCE, and the
//! real RoCEv2 frames with and without the ICRC check).
//! Goal (issue "Foundation"): >= 50 million MetaRoCE headers/s per core.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use proto_parse::build::UdpFrameBuilder;
use proto_parse::frame::{self, DecodeConfig, LinkType};
use proto_parse::metaroce::{
    AckRepr, Body, DataRepr, FeedbackRepr, Flags, Op, Packet, Repr, SackBitmap, udp_source_port,
};

const BATCH: usize = 1024;

/// A mix like a busy sender's capture: 3 WRITE data packets (4 KiB payload,
/// CRC) per ACK with a one-word SACK.
fn packets() -> Vec<Vec<u8>> {
    let payload = vec![0x5a; 4096];
    (0..BATCH as u32)
        .map(|i| {
            let base = Repr {
                flags: Flags::empty(),
                tx_attempt: 0,
                ev: (i % 8) as u16,
                path_seq: i as u16,
                dst_conn: 7,
                src_conn: 9,
                psn: i,
                tx_ts: i * 1000,
                body: Body::Probe,
                tlvs: Vec::new(),
                payload: &[],
                crc: false,
            };
            if i % 4 == 3 {
                Repr {
                    body: Body::Ack(AckRepr {
                        feedback: FeedbackRepr {
                            echo_psn: i - 1,
                            credit: u32::MAX,
                            ..FeedbackRepr::default()
                        },
                        sack_base: i - 2,
                        sack: SackBitmap::from_psns(i - 2, [i, i + 1]),
                    }),
                    ..base
                }
                .to_vec()
            } else {
                Repr {
                    body: Body::Data(DataRepr {
                        op: Op::Write {
                            remote_va: 0x1000,
                            rkey: 5,
                        },
                        payload_len: 4096,
                        msg_id: i / 256,
                        msg_offset: (i % 256) * 4096,
                        msg_len: 1 << 20,
                    }),
                    payload: &payload,
                    crc: true,
                    ..base
                }
                .to_vec()
            }
        })
        .collect()
}

fn metaroce_headers(c: &mut Criterion) {
    let packets = packets();
    let mut group = c.benchmark_group("metaroce");
    group.throughput(Throughput::Elements(BATCH as u64));
    group.bench_function("new_checked+fields", |b| {
        b.iter(|| {
            let mut sum = 0u64;
            for bytes in &packets {
                let packet = Packet::new_checked(black_box(&bytes[..])).unwrap();
                sum +=
                    u64::from(packet.psn()) + u64::from(packet.ev()) + u64::from(packet.src_conn());
                if let Some(data) = packet.data() {
                    sum += u64::from(data.msg_offset());
                } else if let Some(ack) = packet.ack() {
                    sum += u64::from(ack.feedback().echo_psn());
                }
            }
            sum
        });
    });
    group.bench_function("new_checked+crc32c", |b| {
        b.iter(|| {
            let mut good = 0usize;
            for bytes in &packets {
                let packet = Packet::new_checked(black_box(&bytes[..])).unwrap();
                let layout = packet.layout(bytes.len()).unwrap();
                good += usize::from(
                    packet.crc_status(&layout)
                        != proto_parse::metaroce::CrcStatus::Bad {
                            stored: 0,
                            computed: 0,
                        },
                );
            }
            good
        });
    });
    group.finish();
}

fn whole_frames(c: &mut Criterion) {
    let frames: Vec<Vec<u8>> = packets()
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let ev = i as u16 % 8;
            UdpFrameBuilder::new(
                format!("10.0.0.1:{}", udp_source_port(ev)).parse().unwrap(),
                "10.0.0.2:4794".parse().unwrap(),
            )
            .build(p)
        })
        .collect();
    let config = DecodeConfig {
        verify_crc: false,
        ..DecodeConfig::default()
    };
    let mut group = c.benchmark_group("frame");
    group.throughput(Throughput::Elements(BATCH as u64));
    group.bench_function("decode_eth_ipv4_udp_metaroce", |b| {
        b.iter(|| {
            let mut n = 0u64;
            for bytes in &frames {
                let frame = frame::decode(LinkType::Ethernet, black_box(bytes), &config);
                n += frame.metaroce().map_or(0, |p| u64::from(p.psn()));
            }
            n
        });
    });
    group.finish();
}

/// The real RoCEv2 frames of `fixtures/real/oferby_proxy_roce.pcap`, with
/// and without the ICRC check (CRC-32 over the whole frame dominates).
fn real_rocev2_frames(c: &mut Criterion) {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/real/oferby_proxy_roce.pcap"
    );
    let mut reader = proto_parse::capture::Reader::open(path).unwrap();
    let mut frames = Vec::new();
    while let Some(record) = reader.next_record() {
        frames.push(record.unwrap().data.to_vec());
    }
    let mut group = c.benchmark_group("rocev2");
    group.throughput(Throughput::Elements(frames.len() as u64));
    for verify_crc in [false, true] {
        let config = DecodeConfig {
            verify_crc,
            ..DecodeConfig::default()
        };
        let name = if verify_crc {
            "decode_real_with_icrc"
        } else {
            "decode_real"
        };
        group.bench_function(name, |b| {
            b.iter(|| {
                let mut n = 0u64;
                for bytes in &frames {
                    let frame = frame::decode(LinkType::Ethernet, black_box(bytes), &config);
                    n += frame
                        .rocev2()
                        .and_then(|r| r.packet.as_ref())
                        .map_or(0, |p| u64::from(p.bth().psn()));
                }
                n
            });
        });
    }
    group.finish();
}

criterion_group!(benches, metaroce_headers, whole_frames, real_rocev2_frames);
criterion_main!(benches);
