//! `metaroce-analyze decode --json` against tshark's own InfiniBand
//! dissector, field by field, on every real RoCEv2 capture in
//! `fixtures/real/`. tshark is required: without it this test fails.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// Fields compared, with tshark's names (the JSON uses the same names).
const FIELDS: &[&str] = &[
    "infiniband.bth.opcode",
    "infiniband.bth.se",
    "infiniband.bth.m",
    "infiniband.bth.padcnt",
    "infiniband.bth.tver",
    "infiniband.bth.p_key",
    "infiniband.bth.destqp",
    "infiniband.bth.a",
    "infiniband.bth.psn",
    "infiniband.deth.q_key",
    "infiniband.deth.srcqp",
    "infiniband.reth.va",
    "infiniband.reth.r_key",
    "infiniband.reth.dmalen",
    "infiniband.aeth.syndrome",
    "infiniband.aeth.msn",
    "infiniband.immdt",
    "infiniband.invariant.crc",
];

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/real")
}

/// tshark's value as a number: decimal, 0x-hex, a bytes field in hex, or a
/// boolean; the first occurrence when a field repeats.
fn tshark_number(text: &str) -> Option<u64> {
    let first = text.split(',').next()?.trim();
    if first.is_empty() {
        return None;
    }
    match first {
        "True" => return Some(1),
        "False" => return Some(0),
        _ => {}
    }
    if let Some(hex) = first.strip_prefix("0x") {
        return u64::from_str_radix(hex, 16).ok();
    }
    if first.contains(':') || first.len() == 8 && first.chars().any(|c| c.is_ascii_alphabetic()) {
        return u64::from_str_radix(&first.replace(':', ""), 16).ok();
    }
    first.parse().ok()
}

fn json_number(value: &Value) -> Option<u64> {
    match value {
        Value::Bool(b) => Some(u64::from(*b)),
        Value::Number(n) => n.as_u64(),
        _ => None,
    }
}

fn tshark_fields(capture: &Path) -> BTreeMap<u64, Vec<Option<u64>>> {
    let mut cmd = Command::new("tshark");
    // One side of the oferby capture sends from UDP port 69 (TFTP to tshark).
    cmd.args(["-r"]).arg(capture).args([
        "-d",
        "udp.port==69,infiniband",
        "-T",
        "fields",
        "-E",
        "separator=|",
        "-e",
        "frame.number",
    ]);
    for field in FIELDS {
        cmd.args(["-e", field]);
    }
    let output = cmd
        .output()
        .expect("tshark must be installed (apt-get install tshark); .ci/run installs it");
    assert!(
        output.status.success(),
        "tshark failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .filter_map(|line| {
            let mut cols = line.split('|');
            let frame: u64 = cols.next()?.parse().ok()?;
            let values: Vec<Option<u64>> = cols.map(tshark_number).collect();
            // Only frames tshark decoded as InfiniBand (an opcode is present).
            values[0].is_some().then_some((frame, values))
        })
        .collect()
}

fn our_fields(capture: &Path) -> BTreeMap<u64, Vec<Option<u64>>> {
    let output = Command::new(env!("CARGO_BIN_EXE_metaroce-analyze"))
        .args(["decode", "--json"])
        .arg(capture)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|obj| obj["proto"] == "rocev2")
        .map(|obj| {
            let frame = obj["frame"].as_u64().unwrap();
            let values = FIELDS
                .iter()
                .map(|f| obj["fields"].get(*f).and_then(json_number))
                .collect();
            assert_eq!(
                obj["crc"],
                "good",
                "ICRC of frame {frame} of {}",
                capture.display()
            );
            (frame, values)
        })
        .collect()
}

#[test]
fn rocev2_fields_agree_with_tshark_on_every_real_capture() {
    let mut compared_frames = 0;
    for name in [
        "montybeatnik_roce_capture_read-write-ecn.pcap",
        "montybeatnik_test.pcap",
        "oferby_proxy_roce.pcap",
    ] {
        let capture = fixtures().join(name);
        let theirs = tshark_fields(&capture);
        let ours = our_fields(&capture);
        assert_eq!(
            ours.keys().collect::<Vec<_>>(),
            theirs.keys().collect::<Vec<_>>(),
            "{name}: the same frames are RoCEv2"
        );
        for (frame, their_values) in &theirs {
            for (i, field) in FIELDS.iter().enumerate() {
                assert_eq!(
                    ours[frame][i], their_values[i],
                    "{name} frame {frame} {field}"
                );
            }
        }
        compared_frames += theirs.len();
    }
    // PROVENANCE.md: 12 + 12 + 105 RoCEv2 frames.
    assert_eq!(compared_frames, 129);
}

#[test]
fn native_infiniband_capture_is_reported_unsupported_not_crashed() {
    let output = Command::new(env!("CARGO_BIN_EXE_metaroce-analyze"))
        .args(["decode", "--json"])
        .arg(fixtures().join("srinivaskoritala_infiniband.pcap"))
        .output()
        .unwrap();
    assert!(output.status.success());
    let lines: Vec<Value> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 43);
    for line in &lines {
        assert_eq!(line["error"]["kind"], "unsupported");
        assert_eq!(line["error"]["layer"], "capture");
    }
}
