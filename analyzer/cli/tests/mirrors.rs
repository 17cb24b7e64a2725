//! Switch mirrors as capture points: a collector's capture of mirror
//! sessions (`fixtures/generated/mirror_*.pcap`, made from
//! `multipath_loss`) is analysed like the captures taken at each point;
//! broken mirrors are counted and named; a capture without our packets
//! says what it held; and tshark's own ERSPAN and GRE dissectors find the
//! same frames inside the mirrors as our decode. tshark is required:
//! without it the last test fails.

use std::path::{Path, PathBuf};
use std::process::Command;

use analyzer::engine::Config;
use metaroce_analyze::pipeline::{self, CaptureResult, NoProgress, NoSink, Options};
use proto_parse::build::{Encap, MirrorFrameBuilder};
use proto_parse::capture::{PcapWriter, Reader};
use proto_parse::defrag::{self, Reassembler, Reassembly};
use proto_parse::frame::{self, DecodeConfig, LinkType};
use proto_parse::mirror::MirrorKind;
use serde_json::Value;

fn generated(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/generated")
        .join(name)
}

fn analyze(names: &[&str]) -> Vec<CaptureResult> {
    let paths: Vec<PathBuf> = names.iter().map(|n| generated(n)).collect();
    let opts = Options::new(DecodeConfig::default(), Config::default());
    pipeline::analyze(&paths, &opts, &mut NoSink, &NoProgress).unwrap()
}

/// The merged report as JSON, without the capture section (frame counts,
/// file names and the decapsulation counts differ by design) and without
/// frame numbers (a point's frames are numbered in the file that holds
/// them: the collector's capture numbers both sessions' copies).
fn without_capture(results: &[CaptureResult]) -> Value {
    fn strip_frame_numbers(v: &mut Value) {
        match v {
            Value::Object(o) => {
                o.retain(|k, _| !k.ends_with("frame"));
                o.values_mut().for_each(strip_frame_numbers);
            }
            Value::Array(a) => a.iter_mut().for_each(strip_frame_numbers),
            _ => {}
        }
    }
    let merged = pipeline::merge_reports(results).unwrap();
    let mut v = serde_json::to_value(&merged).unwrap();
    v.as_object_mut().unwrap().remove("capture");
    strip_frame_numbers(&mut v);
    v
}

#[test]
fn two_mirror_sessions_in_one_capture_match_like_two_captures() {
    let apart = analyze(&["multipath_loss_sender.pcap", "multipath_loss_receiver.pcap"]);
    let expected = without_capture(&apart);
    assert!(
        expected["between_captures"][0]["matched_packets"]
            .as_u64()
            .unwrap()
            > 20,
        "{}",
        expected["between_captures"]
    );
    for (name, kind) in [
        ("mirror_erspan2.pcap", "erspan2"),
        ("mirror_erspan3.pcap", "erspan3"),
    ] {
        let mirrored = analyze(&[name]);
        assert_eq!(mirrored.len(), 2, "{name}: two capture points");
        assert_eq!(without_capture(&mirrored), expected, "{name}");
        for (i, r) in mirrored.iter().enumerate() {
            let m = r.mirror.expect("a mirror session");
            assert_eq!(m.session, i as u32 + 1, "{name}");
            assert_eq!(m.switch.to_string(), format!("192.0.2.{}", i + 1));
            assert_eq!(
                r.stem,
                format!("mirror_{kind}-{kind}-192.0.2.{}-s{}", i + 1, i + 1)
            );
            // Each point holds what the capture at that point held.
            assert_eq!(
                r.report.capture.metaroce_packets, apart[i].report.capture.metaroce_packets,
                "{name} point {i}"
            );
        }
        let merged = pipeline::merge_reports(&mirrored).unwrap();
        let frames = apart.iter().map(|r| r.read.frames).sum::<u64>();
        assert_eq!(merged.capture.files, 1);
        assert_eq!(merged.capture.frames, frames);
        assert_eq!(
            merged.capture.traffic.decapsulated.get(kind),
            Some(&frames),
            "{name}"
        );
        assert!(merged.capture.traffic.mirror_problems.is_empty());
    }
}

/// A collector that sees plain frames first (here the sender's link) and
/// a mirror session's copies later: the plain frames are a capture point
/// of their own from the first one on, and the copies of a transmission
/// seen at both points match, as with the two captures given apart.
#[test]
fn plain_frames_before_a_mirror_session_are_a_point_matched_like_a_capture() {
    let apart = analyze(&["multipath_loss_sender.pcap", "multipath_loss_receiver.pcap"]);
    let name = "mirror_plain_first.pcap";
    // The capture starts with 26 plain frames, then the first copy.
    let mut reader = Reader::open(generated(name)).unwrap();
    let mut first_copy = None;
    while let Some(record) = reader.next_record() {
        let record = record.unwrap();
        let f = frame::decode(LinkType::Ethernet, record.data, &DecodeConfig::default());
        if f.mirror.is_some() {
            first_copy = Some(record.index);
            break;
        }
    }
    assert_eq!(first_copy, Some(27));
    let mixed = analyze(&[name]);
    assert_eq!(mixed.len(), 2, "the plain point and the session");
    assert_eq!(
        (mixed[0].mirror, mixed[0].stem.as_str()),
        (None, "mirror_plain_first")
    );
    let m = mixed[1].mirror.expect("a mirror session");
    assert_eq!((m.session, m.switch.to_string()), (2, "192.0.2.2".into()));
    for (i, r) in mixed.iter().enumerate() {
        assert_eq!(
            r.report.capture.metaroce_packets, apart[i].report.capture.metaroce_packets,
            "point {i}"
        );
    }
    let (got, want) = (without_capture(&mixed), without_capture(&apart));
    assert_eq!(got["between_captures"], want["between_captures"]);
    assert_eq!(got, want);
}

/// Copies the collector path cut into outer IP fragments (IPv4 and IPv6)
/// are reassembled, then decapsulated: each session is its point, and the
/// analysis is the two captures'; the fragments are counted as the
/// generator wrote them (`mirror_fragments.expected.json`).
#[test]
fn copies_cut_into_outer_ip_fragments_are_reassembled_then_decapsulated() {
    let apart = analyze(&["multipath_loss_sender.pcap", "multipath_loss_receiver.pcap"]);
    let cut = analyze(&["mirror_fragments.pcap"]);
    assert_eq!(cut.len(), 2, "two sessions");
    let names: Vec<&str> = cut.iter().map(|r| r.stem.as_str()).collect();
    assert_eq!(
        names,
        [
            "mirror_fragments-erspan3-192.0.2.1-s1",
            "mirror_fragments-erspan2-2001_db8__2-s2"
        ]
    );
    for (i, r) in cut.iter().enumerate() {
        assert_eq!(
            r.report.capture.metaroce_packets, apart[i].report.capture.metaroce_packets,
            "point {i}"
        );
    }
    assert_eq!(without_capture(&cut), without_capture(&apart));
    let merged = pipeline::merge_reports(&cut).unwrap();
    let c = &merged.capture;
    let expected: Value = serde_json::from_str(
        &std::fs::read_to_string(generated("mirror_fragments.expected.json")).unwrap(),
    )
    .unwrap();
    let counted = serde_json::json!({
        "ip_fragments": c.ip_fragments,
        "reassembled_datagrams": c.reassembled_datagrams,
        "incomplete_datagrams": c.incomplete_datagrams,
        "incomplete_fragments": c.incomplete_fragments,
        "decapsulated": c.traffic.decapsulated,
    });
    assert_eq!(counted, expected);
    assert!(c.ip_fragments > 20, "{c:?}");
    assert!(c.traffic.mirror_problems.is_empty(), "{:?}", c.traffic);
    assert!(c.traffic.not_analysed.is_empty(), "{:?}", c.traffic);
}

/// Packets fragmented before they were mirrored (every frame of
/// `ip_fragments.pcap` as an ERSPAN II copy): the copies of a datagram's
/// fragments are rebuilt into the mirrored datagram, of the session that
/// carried them, and the analysis is the plain capture's.
#[test]
fn fragments_inside_mirrored_frames_are_rebuilt_in_their_session() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mirrored_fragments.pcap");
    let mut reader = Reader::open(generated("ip_fragments.pcap")).unwrap();
    let mut writer = PcapWriter::create(&path).unwrap();
    let copy = MirrorFrameBuilder::new(
        "192.0.2.3".parse().unwrap(),
        "198.51.100.9".parse().unwrap(),
        Encap::ErspanII { session: 3, seq: 0 },
    );
    while let Some(record) = reader.next_record() {
        let record = record.unwrap();
        writer
            .write_frame(record.ts_ns, &copy.build(record.data))
            .unwrap();
    }
    writer.flush().unwrap();
    drop(writer);
    let apart = analyze(&["ip_fragments.pcap"]);
    let opts = Options::new(DecodeConfig::default(), Config::default());
    let mirrored = pipeline::analyze(&[path], &opts, &mut NoSink, &NoProgress).unwrap();
    assert_eq!(mirrored.len(), 1, "one point: the session");
    assert_eq!(mirrored[0].mirror.map(|m| m.session), Some(3));
    let (c, a) = (&mirrored[0].report.capture, &apart[0].report.capture);
    let counts = |c: &analyzer::engine::CaptureReport| {
        (
            c.ip_fragments,
            c.reassembled_datagrams,
            c.incomplete_datagrams,
            c.incomplete_fragments,
            c.metaroce_packets,
            c.rocev2_packets,
        )
    };
    assert_eq!(counts(c), counts(a));
    assert_eq!(without_capture(&mirrored), without_capture(&apart));
}

#[test]
fn one_gre_session_over_ipv6_equals_its_capture() {
    let apart = analyze(&["multipath_loss_sender.pcap"]);
    let mirrored = analyze(&["mirror_gre.pcap"]);
    assert_eq!(mirrored.len(), 1);
    assert_eq!(without_capture(&mirrored), without_capture(&apart));
    let m = mirrored[0].mirror.unwrap();
    assert_eq!(
        (m.kind, m.session, m.switch.to_string()),
        (MirrorKind::Gre, 100, "2001:db8::1".into())
    );
    let c = &mirrored[0].report.capture;
    assert_eq!(
        c.traffic.decapsulated.get("gre"),
        Some(&apart[0].read.frames)
    );
}

#[test]
fn broken_mirrors_are_counted_and_named_and_the_next_copy_analysed() {
    let results = analyze(&["mirror_bad.pcap"]);
    let merged = pipeline::merge_reports(&results).unwrap();
    let t = &merged.capture.traffic;
    let problems: Vec<&str> = t.mirror_problems.keys().map(String::as_str).collect();
    assert_eq!(
        problems,
        [
            "erspan version 3 (expected 1 (type II) or 2 (type III))",
            "gre longer than its length field allows",
            "gre: unsupported GRE protocol type 0x8847",
            "gre: unsupported encapsulation inside a mirrored frame (recursion), depth 2",
        ],
        "{t:?}"
    );
    assert!(t.mirror_problems.values().all(|&n| n == 1), "{t:?}");
    assert_eq!(t.mirror_truncated, 1, "{t:?}");
    // The five good copies and the one the switch cut (counted malformed:
    // its packet is not whole) were read as MetaRoCE.
    assert_eq!(merged.capture.metaroce_packets, 6, "{:?}", merged.capture);
    assert_eq!(merged.capture.malformed, 1);
    assert_eq!(t.decapsulated.get("erspan2"), Some(&7), "{t:?}");
}

#[test]
fn a_capture_without_our_packets_says_what_it_held() {
    // The multipath capture on another MetaRoCE port: nothing of ours.
    let paths = vec![generated("mirror_erspan3.pcap")];
    let decode = DecodeConfig {
        metaroce_port: 5000,
        ..DecodeConfig::default()
    };
    let opts = Options::new(decode, Config::default());
    let results = pipeline::analyze(&paths, &opts, &mut NoSink, &NoProgress).unwrap();
    let merged = pipeline::merge_reports(&results).unwrap();
    let note = merged.capture.traffic.note.clone().expect("a note");
    assert!(
        note.starts_with("no MetaRoCE or RoCEv2 packet in "),
        "{note}"
    );
    assert!(note.contains("decapsulated: erspan3"), "{note}");
    assert!(note.contains("seen: UDP port 4794"), "{note}");
    assert!(note.contains("--port 4794"), "{note}");
    // The CLI says it too, on stderr, for report and lint.
    for sub in ["report", "lint"] {
        let out = Command::new(env!("CARGO_BIN_EXE_metaroce-analyze"))
            .args([sub, "--port", "5000"])
            .arg(&paths[0])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("likely cause: the RDMA traffic uses another UDP port"),
            "{sub}: {err}"
        );
    }
}

/// (frame, session, inner IPv4 src, inner IPv4 dst, inner UDP ports) of
/// every mirrored frame, as tshark's dissectors read them.
fn tshark_inner(capture: &Path, session_field: &str) -> Vec<String> {
    let out = Command::new("tshark")
        .arg("-r")
        .arg(capture)
        // Frames with GRE: a copy cut into outer IP fragments shows at
        // its last fragment, reassembled (tshark's default).
        .args([
            "-Y",
            "gre",
            "-T",
            "fields",
            "-E",
            "occurrence=l",
            "-E",
            "separator=,",
        ])
        .args(["-e", "frame.number", "-e", session_field])
        .args([
            "-e",
            "ip.src",
            "-e",
            "ip.dst",
            "-e",
            "udp.srcport",
            "-e",
            "udp.dstport",
        ])
        .output()
        .expect("tshark must be installed (apt-get install tshark); .ci/run installs it");
    assert!(
        out.status.success(),
        "tshark failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // tshark prints GRE's key in hex: decimal, as ours.
    let decimal = |field: &str| match field.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).map_or(field.to_string(), |n| n.to_string()),
        None => field.to_string(),
    };
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|line| line.split(',').map(decimal).collect::<Vec<_>>().join(","))
        .collect()
}

/// The same fields from our decode, a copy cut into outer IP fragments
/// at the fragment that completes it (as tshark shows it).
fn ours(capture: &Path) -> Vec<String> {
    let mut reader = Reader::open(capture).unwrap();
    let mut reassembler = Reassembler::default();
    let mut lines = Vec::new();
    let cfg = DecodeConfig::default();
    while let Some(record) = reader.next_record() {
        let record = record.unwrap();
        let link = LinkType::from(u32::from(record.linktype));
        let datagram;
        let (link, data) = if defrag::is_fragment(link, record.data) {
            match reassembler.push(record.ts_ns, link, record.data) {
                Reassembly::Datagram(ip) => {
                    datagram = ip.to_vec();
                    (LinkType::Raw, &datagram[..])
                }
                _ => continue,
            }
        } else {
            (link, record.data)
        };
        let f = frame::decode(link, data, &cfg);
        let m = f.mirror.expect("every frame is mirrored");
        let (ip, udp) = (f.ip.unwrap(), f.udp.unwrap());
        lines.push(format!(
            "{},{},{},{},{},{}",
            record.index, m.session, ip.src, ip.dst, udp.src_port, udp.dst_port
        ));
    }
    lines
}

#[test]
fn tshark_finds_the_same_frames_inside_the_mirrors() {
    for (name, session) in [
        ("mirror_erspan2.pcap", "erspan.spanid"),
        ("mirror_erspan3.pcap", "erspan.spanid"),
        ("mirror_gre.pcap", "gre.key"),
        ("mirror_fragments.pcap", "erspan.spanid"),
    ] {
        let capture = generated(name);
        let theirs = tshark_inner(&capture, session);
        let ours = ours(&capture);
        assert!(ours.len() > 25, "{name}: {} frames", ours.len());
        assert_eq!(theirs, ours, "{name}");
    }
}
