//! Decodes every frame of the real captures in `fixtures/real/` (see its
//! PROVENANCE.md) and checks every RoCEv2 field against tshark, which this
//! test runs; checks that the ICRC verifies on all 129 RoCEv2 frames; and
//! that the ERF capture gives a clean "unsupported link type" error.
//!
//! tshark is required: without it the test fails, it does not skip.

mod rocev2_tshark;

use std::path::PathBuf;

use proto_parse::frame::{DecodeConfig, LinkType, Transport, decode};
use proto_parse::rocev2::IcrcStatus;
use proto_parse::{ErrorKind, Layer};

const ROCE_FILES: [&str; 3] = [
    "montybeatnik_roce_capture_read-write-ecn.pcap",
    "montybeatnik_test.pcap",
    "oferby_proxy_roce.pcap",
];
const ERF_FILE: &str = "srinivaskoritala_infiniband.pcap";

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/real")
        .join(name)
}

fn read_pcap(name: &str) -> (u32, Vec<Vec<u8>>) {
    rocev2_tshark::read_pcap(&fixture(name))
}

#[test]
fn every_rocev2_field_agrees_with_tshark_and_every_icrc_verifies() {
    let cfg = DecodeConfig::default();
    let mut roce_frames = 0;
    let mut good_icrc = 0;
    let mut compared_fields = 0;
    for name in ROCE_FILES {
        let (link, frames) = read_pcap(name);
        assert_eq!(link, 1, "{name} is Ethernet");
        let rows = rocev2_tshark::tshark_rows(&fixture(name));
        assert_eq!(rows.len(), frames.len(), "{name}: tshark frame count");
        for (i, (data, theirs)) in frames.iter().zip(&rows).enumerate() {
            let frame = decode(LinkType::from(link), data, &cfg);
            assert_eq!(frame.error, None, "{name} frame {}", i + 1);
            let ours = rocev2_tshark::our_row(i + 1, &frame);
            assert_eq!(&ours, theirs, "{name} frame {}: ours vs tshark", i + 1);
            if let Transport::RoceV2(roce) = &frame.payload {
                roce_frames += 1;
                compared_fields += theirs.split('|').filter(|c| !c.is_empty()).count();
                assert_eq!(roce.icrc, IcrcStatus::Good, "{name} frame {} ICRC", i + 1);
                good_icrc += 1;
            } else {
                // tshark found no InfiniBand in it either
                assert!(
                    theirs
                        .split('|')
                        .skip(rocev2_tshark::FIRST_IB_FIELD)
                        .all(str::is_empty),
                    "{name} frame {}: tshark decoded RoCEv2, we did not",
                    i + 1
                );
            }
        }
    }
    assert_eq!(roce_frames, 129, "RoCEv2 frames in the three captures");
    assert_eq!(good_icrc, 129);
    assert!(
        compared_fields > 129 * 15,
        "{compared_fields} fields compared"
    );
}

#[test]
fn opcodes_and_syndromes_seen_in_the_captures() {
    use proto_parse::rocev2::{Opcode, Syndrome};
    let cfg = DecodeConfig::default();
    let mut opcodes = std::collections::BTreeSet::new();
    let mut credits = std::collections::BTreeSet::new();
    for name in ROCE_FILES {
        let (link, frames) = read_pcap(name);
        for data in &frames {
            let frame = decode(LinkType::from(link), data, &cfg);
            if let Some(p) = frame.rocev2().and_then(|r| r.packet) {
                opcodes.insert(p.opcode());
                if let Some(Syndrome::Ack { credit }) = p.aeth().map(|a| a.syndrome()) {
                    credits.insert(credit);
                }
            }
        }
    }
    for op in [
        Opcode::UdSendOnly,
        Opcode::RcRdmaWriteOnly,
        Opcode::RcAcknowledge,
        Opcode::RcRdmaReadRequest,
        Opcode::RcRdmaReadResponseFirst,
        Opcode::RcRdmaReadResponseMiddle,
        Opcode::RcRdmaReadResponseLast,
        Opcode::RcSendFirst,
        Opcode::RcSendLastImm,
        Opcode::RcSendOnlyImm,
    ] {
        assert!(opcodes.contains(&op), "{op} missing from {opcodes:?}");
    }
    assert_eq!(credits, [5, 6, 31].into_iter().collect());
}

#[test]
fn snaplen_cut_real_frames_never_panic_and_report_truncation() {
    let cfg = DecodeConfig::default();
    for name in ROCE_FILES {
        let (link, frames) = read_pcap(name);
        for data in &frames {
            let full = decode(LinkType::from(link), data, &cfg);
            if full.rocev2().is_none() {
                continue;
            }
            for cut in 0..data.len() {
                let frame = decode(LinkType::from(link), &data[..cut], &cfg);
                let err = frame.error.unwrap_or_else(|| panic!("{name}: cut {cut}"));
                assert!(matches!(err.kind, ErrorKind::Truncated { .. }), "{err}");
                assert!(err.is_capture_truncation(), "{name} cut {cut}: {err}");
                assert!(err.offset <= cut, "{name} cut {cut}: {err}");
            }
        }
    }
}

/// ERF is read, but these records are of type 21: native InfiniBand,
/// not RoCE; each is an unsupported record type, named.
#[test]
fn erf_infiniband_records_are_unsupported() {
    let (link, frames) = read_pcap(ERF_FILE);
    assert_eq!(link, 197);
    assert_eq!(frames.len(), 43);
    for data in &frames {
        let frame = decode(LinkType::from(link), data, &DecodeConfig::default());
        let err = frame.error.expect("an error");
        assert_eq!(err.layer, Layer::Capture);
        assert_eq!(
            err.kind,
            ErrorKind::Unsupported {
                what: "ERF record type (21: native InfiniBand)",
                value: 21
            }
        );
        assert!(frame.ip.is_none() && frame.udp.is_none());
    }
}
