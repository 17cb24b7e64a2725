//! Decodes every frame of the real captures in `fixtures/real/` (see its
//! PROVENANCE.md) and checks every RoCEv2 field against tshark, which this
//! test runs; checks that the ICRC verifies on all 129 RoCEv2 frames; and
//! that the ERF capture gives a clean "unsupported link type" error.
//!
//! tshark is required: without it the test fails, it does not skip.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::Command;

use pcap_parser::pcap::{parse_pcap_frame, parse_pcap_frame_be, parse_pcap_header};
use proto_parse::frame::{DecodeConfig, Frame, LinkType, Transport, decode};
use proto_parse::rocev2::IcrcStatus;
use proto_parse::{ErrorKind, Layer};

const ROCE_FILES: [&str; 3] = [
    "montybeatnik_roce_capture_read-write-ecn.pcap",
    "montybeatnik_test.pcap",
    "oferby_proxy_roce.pcap",
];
const ERF_FILE: &str = "srinivaskoritala_infiniband.pcap";

/// The tshark fields compared, in order (`frame.number` first).
const FIELDS: [&str; 25] = [
    "frame.number",
    "udp.srcport",
    "udp.dstport",
    "ip.dsfield.dscp",
    "ip.dsfield.ecn",
    "ip.ttl",
    "infiniband.bth.opcode",
    "infiniband.bth.se",
    "infiniband.bth.m",
    "infiniband.bth.padcnt",
    "infiniband.bth.tver",
    "infiniband.bth.p_key",
    "infiniband.bth.destqp",
    "infiniband.bth.a",
    "infiniband.bth.reserved7",
    "infiniband.bth.psn",
    "infiniband.reth.va",
    "infiniband.reth.r_key",
    "infiniband.reth.dmalen",
    "infiniband.aeth.syndrome",
    "infiniband.aeth.msn",
    "infiniband.immdt",
    "infiniband.deth.q_key",
    "infiniband.deth.srcqp",
    "infiniband.invariant.crc",
];

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/real")
        .join(name)
}

/// The link type and the captured bytes of every record.
fn read_pcap(name: &str) -> (u32, Vec<Vec<u8>>) {
    let bytes = std::fs::read(fixture(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    let (mut rest, header) = parse_pcap_header(&bytes).expect("pcap header");
    let mut frames = Vec::new();
    while !rest.is_empty() {
        let parsed = if header.is_bigendian() {
            parse_pcap_frame_be(rest)
        } else {
            parse_pcap_frame(rest)
        };
        let (next, block) = parsed.unwrap_or_else(|e| panic!("{name}: record: {e:?}"));
        frames.push(block.data[..block.caplen as usize].to_vec());
        rest = next;
    }
    (header.network.0 as u32, frames)
}

/// tshark's rows, one `|`-separated line per frame, `-d udp.port==69`
/// added because one capture sends RoCEv2 from UDP source port 69.
fn tshark_rows(name: &str) -> Vec<String> {
    let mut cmd = Command::new("tshark");
    cmd.arg("-r")
        .arg(fixture(name))
        .args(["-n", "-d", "udp.port==69,infiniband", "-T", "fields"])
        .args(["-E", "separator=|", "-E", "occurrence=f"]);
    for field in FIELDS {
        cmd.args(["-e", field]);
    }
    let out = cmd.output().unwrap_or_else(|e| {
        panic!("tshark is required by this test and could not be run ({e}); install tshark")
    });
    assert!(
        out.status.success(),
        "tshark failed on {name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .lines()
        .map(str::to_owned)
        .collect()
}

fn opt<T>(value: Option<T>, f: impl FnOnce(T) -> String) -> String {
    value.map_or_else(String::new, f)
}

/// Our decode of one frame, printed in tshark's `-T fields` format.
fn our_row(number: usize, frame: &Frame<'_>) -> String {
    let mut row = number.to_string();
    let udp = frame.udp.as_ref();
    let ip = frame.ip.as_ref().filter(|ip| !ip.is_ipv6());
    let roce = frame.rocev2().and_then(|r| r.packet.as_ref());
    let bth = roce.map(|p| p.bth());
    let b = |v: bool| u8::from(v).to_string();
    let cols = [
        opt(udp, |u| u.src_port.to_string()),
        opt(udp, |u| u.dst_port.to_string()),
        opt(ip, |ip| ip.dscp.to_string()),
        opt(ip, |ip| ip.ecn.bits().to_string()),
        opt(ip, |ip| ip.ttl.to_string()),
        opt(bth, |h| u8::from(h.opcode()).to_string()),
        opt(bth, |h| b(h.solicited())),
        opt(bth, |h| b(h.mig_req())),
        opt(bth, |h| h.pad_count().to_string()),
        opt(bth, |h| h.tver().to_string()),
        opt(bth, |h| h.p_key().to_string()),
        opt(bth, |h| format!("0x{:06x}", h.dest_qp())),
        opt(bth, |h| b(h.ack_req())),
        opt(bth, |h| h.resv7().to_string()),
        opt(bth, |h| h.psn().to_string()),
        opt(roce.and_then(|p| p.reth()), |r| {
            format!("0x{:016x}", r.va())
        }),
        opt(roce.and_then(|p| p.reth()), |r| {
            format!("0x{:08x}", r.r_key())
        }),
        opt(roce.and_then(|p| p.reth()), |r| r.dma_len().to_string()),
        opt(roce.and_then(|p| p.aeth()), |a| {
            a.syndrome_byte().to_string()
        }),
        opt(roce.and_then(|p| p.aeth()), |a| a.msn().to_string()),
        opt(roce.and_then(|p| p.imm_dt()), |i| format!("{i:08x}")),
        opt(roce.and_then(|p| p.deth()), |d| {
            format!("0x{:016x}", d.q_key())
        }),
        opt(roce.and_then(|p| p.deth()), |d| {
            format!("0x{:08x}", d.src_qp())
        }),
        opt(roce.and_then(|p| p.icrc()), |c| {
            format!("0x{:08x}", c.swap_bytes())
        }),
    ];
    for col in cols {
        write!(row, "|{col}").unwrap();
    }
    row
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
        let rows = tshark_rows(name);
        assert_eq!(rows.len(), frames.len(), "{name}: tshark frame count");
        for (i, (data, theirs)) in frames.iter().zip(&rows).enumerate() {
            let frame = decode(LinkType::from(link), data, &cfg);
            assert_eq!(frame.error, None, "{name} frame {}", i + 1);
            let ours = our_row(i + 1, &frame);
            assert_eq!(&ours, theirs, "{name} frame {}: ours vs tshark", i + 1);
            if let Transport::RoceV2(roce) = &frame.payload {
                roce_frames += 1;
                compared_fields += theirs.split('|').filter(|c| !c.is_empty()).count();
                assert_eq!(roce.icrc, IcrcStatus::Good, "{name} frame {} ICRC", i + 1);
                good_icrc += 1;
            } else {
                // tshark found no InfiniBand in it either
                assert!(
                    theirs.split('|').skip(6).all(str::is_empty),
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

#[test]
fn erf_capture_is_an_unsupported_link_type() {
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
                what: "link type",
                value: 197
            }
        );
        assert!(frame.ip.is_none() && frame.udp.is_none());
    }
}
