//! IP fragments (issue 23): the fixture generator's `ip_fragments.pcap`
//! (MetaRoCE over IPv4 and IPv6 and RoCEv2, cut by a 1,500-byte MTU: out of
//! order, overlapping, a missing piece) gives the same analysis as
//! `ip_fragments_unfragmented.pcap` (the same traffic sent whole, without
//! the datagrams that cannot be rebuilt), and counts the fragments as
//! `ip_fragments.expected.json` says: nothing dropped silently.

mod common;

use common::fixture;

use std::process::Command;

use serde_json::Value;

fn report(args: &[&str], capture: &str) -> (Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_metaroce-analyze"))
        .arg("report")
        .args(args)
        .arg(fixture(capture))
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{capture}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json = if args.contains(&"--json") {
        serde_json::from_str(&stdout).unwrap()
    } else {
        Value::Null
    };
    (json, stdout)
}

/// The report without frame numbers (fragments shift them).
fn without_frame_numbers(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !k.ends_with("frame"))
                .map(|(k, v)| (k.clone(), without_frame_numbers(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(without_frame_numbers).collect()),
        other => other.clone(),
    }
}

#[test]
fn fragmented_capture_gives_the_unfragmented_analysis() {
    let (frag, _) = report(&["--json"], "ip_fragments.pcap");
    let (whole, _) = report(&["--json"], "ip_fragments_unfragmented.pcap");
    for key in ["directions", "rocev2", "between_captures"] {
        assert_eq!(
            without_frame_numbers(&frag[key]),
            without_frame_numbers(&whole[key]),
            "{key}"
        );
    }
    // Something to compare: both MetaRoCE connections (IPv4 and IPv6) and
    // the RoCEv2 flow, with their DATA.
    let data: Vec<u64> = frag["directions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["data_packets"].as_u64().unwrap())
        .filter(|n| *n > 0)
        .collect();
    assert_eq!(data, [5, 4], "DATA rebuilt (one IPv4 datagram lost)");
    assert_eq!(frag["rocev2"][0]["data_packets"], 3, "one SEND lost");
    for key in ["metaroce_packets", "rocev2_packets", "malformed"] {
        assert_eq!(frag["capture"][key], whole["capture"][key], "{key}");
    }

    let expected: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("ip_fragments.expected.json")).unwrap(),
    )
    .unwrap();
    for (key, value) in expected.as_object().unwrap() {
        assert_eq!(&frag["capture"][key], value, "capture.{key}");
        assert_eq!(whole["capture"][key], 0, "unfragmented capture.{key}");
    }
    // Every frame read is counted once: the fragments and the whole frames.
    assert_eq!(
        frag["capture"]["frames"].as_u64().unwrap(),
        expected["ip_fragments"].as_u64().unwrap() + whole["capture"]["frames"].as_u64().unwrap()
            - expected["reassembled_datagrams"].as_u64().unwrap()
    );
}

#[test]
fn text_report_counts_the_fragments() {
    let (_, text) = report(&[], "ip_fragments.pcap");
    assert!(
        text.contains(
            "IP fragments: 43 read, 12 datagrams reassembled, 2 datagrams (4 fragments) never completed"
        ),
        "{text}"
    );
    let (_, text) = report(&[], "ip_fragments_unfragmented.pcap");
    assert!(!text.contains("IP fragments"), "{text}");
}
