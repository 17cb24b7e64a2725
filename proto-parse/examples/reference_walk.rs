//! The reference floor of issue #3's benchmark, with none of this project's
//! code: the capture file mapped into memory, its records split by
//! `pcap-parser`, each frame's Ethernet/IP/UDP headers sliced by
//! `etherparse`, and the UDP datagrams to the MetaRoCE and RoCEv2 ports
//! counted. `cargo xtask bench analyzer` runs it beside the analyzer, so
//! that the analyzer's rate is read against this floor on the same host
//! (docs/performance.md).
//!
//!     reference_walk CAPTURE.pcap   (little-endian classic pcap)
//!
//! Prints one JSON line: {"frames", "udp_4794", "udp_4791", "seconds",
//! "frames_per_s"}.
// The one `unsafe` of this example: mapping the file, as the walk does.
#![allow(unsafe_code)]

use std::process::ExitCode;
use std::time::Instant;

use etherparse::{SlicedPacket, TransportSlice};
use pcap_parser::pcap::{parse_pcap_frame, parse_pcap_header};

fn main() -> ExitCode {
    let Some(path) = std::env::args_os().nth(1) else {
        eprintln!("usage: reference_walk CAPTURE.pcap");
        return ExitCode::from(2);
    };
    let file = match std::fs::File::open(&path) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("reference_walk: {}: {e}", path.to_string_lossy());
            return ExitCode::from(1);
        }
    };
    let start = Instant::now();
    // SAFETY: read-only mapping of a capture that nothing writes while the
    // benchmark runs; every byte is validated by the parsers.
    let map = match unsafe { memmap2::Mmap::map(&file) } {
        Ok(m) => m,
        Err(e) => {
            eprintln!("reference_walk: cannot map the file: {e}");
            return ExitCode::from(1);
        }
    };
    let Ok((mut rest, header)) = parse_pcap_header(&map) else {
        eprintln!("reference_walk: not a pcap file");
        return ExitCode::from(1);
    };
    if header.is_bigendian() {
        eprintln!("reference_walk: big-endian pcap is not supported");
        return ExitCode::from(1);
    }
    let (mut frames, mut metaroce, mut rocev2) = (0u64, 0u64, 0u64);
    while let Ok((next, block)) = parse_pcap_frame(rest) {
        rest = next;
        frames += 1;
        if let Ok(packet) = SlicedPacket::from_ethernet(block.data)
            && let Some(TransportSlice::Udp(udp)) = packet.transport
        {
            match udp.destination_port() {
                4794 => metaroce += 1,
                4791 => rocev2 += 1,
                _ => {}
            }
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{{\"frames\": {frames}, \"udp_4794\": {metaroce}, \"udp_4791\": {rocev2}, \"seconds\": {secs:.4}, \"frames_per_s\": {:.0}}}",
        frames as f64 / secs.max(1e-9)
    );
    ExitCode::SUCCESS
}
