//! Throughput of `frame::decode` on the real RoCEv2 frames. Ignored by
//! default (timing is meaningless in debug builds); run with
//! `cargo test --release -p proto-parse --test frame_perf -- --ignored --nocapture`.

use std::time::Instant;

use pcap_parser::pcap::{parse_pcap_frame, parse_pcap_header};
use proto_parse::frame::{DecodeConfig, LinkType, decode};

fn frames() -> Vec<Vec<u8>> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/real/oferby_proxy_roce.pcap"
    );
    let bytes = std::fs::read(path).unwrap();
    let (mut rest, _) = parse_pcap_header(&bytes).unwrap();
    let mut out = Vec::new();
    while !rest.is_empty() {
        let (next, block) = parse_pcap_frame(rest).unwrap();
        out.push(block.data[..block.caplen as usize].to_vec());
        rest = next;
    }
    out
}

#[test]
#[ignore = "timing; run in release"]
fn decode_throughput() {
    let frames = frames();
    for verify_crc in [false, true] {
        let cfg = DecodeConfig {
            verify_crc,
            ..DecodeConfig::default()
        };
        let rounds = 20_000;
        let start = Instant::now();
        let mut psn_sum = 0u64;
        for _ in 0..rounds {
            for f in &frames {
                let frame = decode(LinkType::Ethernet, std::hint::black_box(f), &cfg);
                if let Some(p) = frame.rocev2().and_then(|r| r.packet.as_ref()) {
                    psn_sum += u64::from(p.bth().psn());
                }
            }
        }
        let n = rounds * frames.len();
        let secs = start.elapsed().as_secs_f64();
        println!(
            "verify_crc={verify_crc}: {:.1} M frames/s on one core ({:.0} ns/frame, psn sum {psn_sum})",
            n as f64 / secs / 1e6,
            secs * 1e9 / n as f64
        );
    }
    println!(
        "size_of::<Frame>() = {}",
        std::mem::size_of::<proto_parse::frame::Frame<'_>>()
    );
}

#[test]
#[ignore = "timing; run in release"]
fn crc_throughput() {
    let buf = vec![0x5au8; 1082];
    let n = 200_000;
    let start = Instant::now();
    let mut acc = 0u32;
    for _ in 0..n {
        acc ^= crc32fast::hash(std::hint::black_box(&buf));
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "crc32fast 1082 B: {:.0} ns ({:.2} GB/s) {acc}",
        secs * 1e9 / n as f64,
        1082.0 * n as f64 / secs / 1e9
    );
}
