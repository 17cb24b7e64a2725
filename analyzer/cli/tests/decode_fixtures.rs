//! `decode --json` against the expected decodes the fixture generator wrote
//! from the representations it emitted (`fixtures/generated/*.expected.jsonl`),
//! and the malformed fixture's errors, layer and frame offset.

mod common;

use common::fixture;

use std::path::Path;
use std::process::Command;

use serde_json::Value;

fn decode_json(capture: &Path) -> (Vec<Value>, Option<i32>) {
    let output = Command::new(env!("CARGO_BIN_EXE_metaroce-analyze"))
        .args(["decode", "--json"])
        .arg(capture)
        .output()
        .unwrap();
    let lines = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (lines, output.status.code())
}

fn expected(name: &str) -> Vec<Value> {
    std::fs::read_to_string(fixture(name))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn every_packet_kind_decodes_to_the_fields_it_was_emitted_with() {
    let (ours, status) = decode_json(&fixture("all_types.pcap"));
    assert_eq!(status, Some(0));
    let expected = expected("all_types.expected.jsonl");
    assert_eq!(ours.len(), expected.len());
    for (ours, expected) in ours.iter().zip(&expected) {
        let frame = &expected["frame"];
        assert_eq!(&ours["frame"], frame);
        assert_eq!(ours["proto"], "metaroce", "frame {frame}");
        assert_eq!(ours["error"], Value::Null, "frame {frame}");
        assert_eq!(ours["crc"], expected["crc"], "frame {frame}");
        for (name, value) in expected["fields"].as_object().unwrap() {
            assert_eq!(&ours["fields"][name], value, "frame {frame} {name}");
        }
        let trimmed = ours["fields"].get("metaroce.analysis.trimmed").is_some();
        assert_eq!(
            trimmed,
            expected["trimmed"].as_bool().unwrap(),
            "frame {frame}"
        );
    }
}

#[test]
fn malformed_packets_name_layer_and_frame_offset_and_the_next_packet_still_decodes() {
    let (ours, status) = decode_json(&fixture("malformed.pcap"));
    assert_eq!(status, Some(2), "malformed packets give exit status 2");
    let expected = expected("malformed.expected.jsonl");
    assert_eq!(ours.len(), expected.len());
    for (ours, expected) in ours.iter().zip(&expected) {
        let what = &expected["description"];
        assert_eq!(ours["proto"], "metaroce", "{what}");
        assert_eq!(ours["crc"], expected["crc"], "{what}");
        match expected["error"].as_object() {
            None => assert_eq!(ours["error"], Value::Null, "{what}"),
            Some(error) => {
                assert_eq!(ours["error"]["layer"], error["layer"], "{what}");
                assert_eq!(ours["error"]["offset"], error["offset"], "{what}");
                assert_eq!(ours["error"]["kind"], "malformed", "{what}");
            }
        }
    }
}

#[test]
fn snaplen_cut_frames_decode_their_headers_and_say_where_they_stopped() {
    let (ours, status) = decode_json(&fixture("snaplen.pcap"));
    assert_eq!(status, Some(0), "a snaplen cut is not malformed");
    let expected = expected("all_types.expected.jsonl");
    for (ours, expected) in ours.iter().zip(&expected) {
        let frame = &expected["frame"];
        // 100 captured bytes hold the outer headers (42 to 62 bytes) and the base header.
        for name in [
            "metaroce.type",
            "metaroce.psn",
            "metaroce.src_conn",
            "metaroce.dst_conn",
        ] {
            assert_eq!(
                ours["fields"][name], expected["fields"][name],
                "frame {frame} {name}"
            );
        }
        let error = &ours["error"];
        if !error.is_null() {
            assert_eq!(error["kind"], "capture_truncated", "frame {frame}");
        }
        assert_ne!(ours["crc"], "bad", "frame {frame}");
    }
    let cut = ours.iter().filter(|o| !o["error"].is_null()).count();
    let mut longer_than_snaplen = 0;
    let mut reader = proto_parse::capture::Reader::open(fixture("all_types.pcap")).unwrap();
    while let Some(record) = reader.next_record() {
        longer_than_snaplen += usize::from(record.unwrap().data.len() > 100);
    }
    assert_eq!(cut, longer_than_snaplen);
    assert!(cut > 0);
}
