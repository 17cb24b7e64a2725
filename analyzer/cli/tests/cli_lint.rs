//! `metaroce-analyze lint`: exit codes, the text, JSON Lines and JUnit
//! outputs, `--rules`, `--allow`/`--deny` and `--vantage`, on the
//! generator's captures (the rules themselves are tested in
//! `analyzer/tests/lint/`).

mod common;

use common::fixture;

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_metaroce-analyze"))
        .env("NO_COLOR", "1")
        .arg("lint")
        .args(args)
        .output()
        .expect("run metaroce-analyze")
}

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The MetaRoCE frames of `malformed.expected.jsonl` that `pick` takes.
/// The findings (frame, evidence) of `rule`, a warning, that `lint --json
/// ARGS.. EXTRA..` prints; it must exit 0 (no error finding).
fn warning_findings(args: &[&str], extra: &[&str], rule: &str) -> Vec<(u64, String)> {
    let mut all = args.to_vec();
    all.extend_from_slice(extra);
    let out = run(&all);
    assert_eq!(out.status.code(), Some(0), "{extra:?}: {}", text(&out));
    text(&out)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["rule"] == rule)
        .map(|v| (v["frame"].as_u64().unwrap(), v["evidence"].to_string()))
        .collect()
}

/// The frames of [`warning_findings`].
fn warning_frames(args: &[&str], extra: &[&str], rule: &str) -> Vec<u64> {
    warning_findings(args, extra, rule)
        .into_iter()
        .map(|(frame, _)| frame)
        .collect()
}

/// A MetaRoCE packet from `src` to `dst` on ev 0's source port, as an
/// Ethernet frame with the IP ECN codepoint `ecn`.
fn metaroce_frame(
    src: std::net::Ipv4Addr,
    dst: std::net::Ipv4Addr,
    ecn: u8,
    repr: &proto_parse::metaroce::Repr<'_>,
) -> Vec<u8> {
    use proto_parse::metaroce::{DEFAULT_PORT, udp_source_port};
    proto_parse::build::UdpFrameBuilder::new(
        (src, udp_source_port(0)).into(),
        (dst, DEFAULT_PORT).into(),
    )
    .with_ecn(ecn)
    .build(&repr.to_vec())
}

/// A pcap file of `frames`, each at its capture time.
fn write_pcap(path: &Path, frames: &[(u64, Vec<u8>)]) {
    let mut w = proto_parse::capture::PcapWriter::create(path).unwrap();
    for (ts_ns, frame) in frames {
        w.write_frame(*ts_ns, frame).unwrap();
    }
    w.flush().unwrap();
}

fn expected_frames(pick: fn(&Value) -> bool) -> Vec<u64> {
    std::fs::read_to_string(fixture("malformed.expected.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["proto"] == "metaroce" && pick(v))
        .map(|v| v["frame"].as_u64().unwrap())
        .collect()
}

#[test]
fn a_capture_without_errors_exits_0_and_says_where_it_was_taken() {
    for (name, host) in [
        ("multipath_loss_sender.pcap", "10.0.0.1"),
        ("multipath_loss_receiver.pcap", "10.0.0.2"),
    ] {
        let path = fixture(name);
        let out = run(&[path.to_str().unwrap()]);
        let stdout = text(&out);
        assert_eq!(out.status.code(), Some(0), "{name}: {stdout}");
        assert!(stdout.contains(&format!("captured on {host}")), "{stdout}");
        // No error; warnings are allowed (the scenario retransmits one PSN
        // spuriously on purpose).
        assert!(
            stdout.contains("lint: clean") || stdout.contains("lint: 0 error findings"),
            "{stdout}"
        );
    }
}

#[test]
fn malformed_packets_are_error_findings_exit_3_and_json_names_each_frame() {
    let path = fixture("malformed.pcap");
    let out = run(&[path.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let lines: Vec<Value> = text(&out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    let frames = |rule: &str| -> Vec<u64> {
        lines
            .iter()
            .filter(|v| v["rule"] == rule)
            .map(|v| v["frame"].as_u64().unwrap())
            .collect()
    };
    // Every malformed packet, and the valid one with a bad CRC32C.
    assert_eq!(
        frames("MR-PKT-001"),
        expected_frames(|v| !v["error"].is_null())
    );
    assert_eq!(frames("MR-PKT-014"), expected_frames(|v| v["crc"] == "bad"));
    assert_eq!(frames("MR-PKT-014").len(), 1);
    for v in &lines {
        assert_eq!(v["severity"], "error");
        assert_eq!(v["capture"], "malformed");
        for key in ["connection", "evidence", "ts_ns", "path", "related_frame"] {
            assert!(v.get(key).is_some(), "{key} missing in {v}");
        }
    }
    // Allowed, the rules no longer fire: the malformed packets still make
    // the exit status 2.
    let out = run(&[
        path.to_str().unwrap(),
        "--allow",
        "MR-PKT-001",
        "--allow",
        "MR-PKT-014",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(!text(&out).contains("MR-PKT-0"), "{}", text(&out));
}

#[test]
fn junit_has_a_test_case_per_rule_and_fails_the_broken_ones() {
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("lint.xml");
    let path = fixture("malformed.pcap");
    let out = run(&[
        path.to_str().unwrap(),
        "--junit",
        junit.to_str().unwrap(),
        "--vantage",
        "none",
    ]);
    assert_eq!(out.status.code(), Some(3));
    let xml = std::fs::read_to_string(&junit).unwrap();
    let rules = text(&run(&["--rules"])).lines().count();
    assert!(rules > 10, "{rules} rules");
    assert!(xml.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites"));
    assert_eq!(xml.matches("<testcase ").count(), rules);
    assert_eq!(xml.matches("</testcase>").count(), rules);
    assert!(
        xml.contains(&format!("tests=\"{rules}\" failures=\"2\"")),
        "{xml}"
    );
    assert_eq!(xml.matches("<failure ").count(), 2);
    for rule in ["MR-PKT-001", "MR-PKT-014"] {
        let failed = format!("name=\"{rule}\">\n      <failure type=\"{rule}\"");
        assert!(xml.contains(&failed), "{rule}");
    }
    // The point is unknown: side-specific rules are skipped, not passed.
    assert!(
        xml.contains("name=\"MR-CONN-009\">\n      <skipped "),
        "{xml}"
    );
    well_formed(&xml);
}

/// Checks that `xml` is well-formed as this writer writes it: tags
/// balanced and nested, attribute values quoted, no raw `<` or stray `&`
/// in text or attributes.
fn well_formed(xml: &str) {
    let body = xml
        .strip_prefix("<?xml version=\"1.0\" encoding=\"UTF-8\"?>")
        .expect("XML declaration");
    let entity = |s: &str| {
        let mut rest = s;
        while let Some(at) = rest.find('&') {
            rest = &rest[at..];
            assert!(
                ["&amp;", "&lt;", "&gt;", "&quot;", "&apos;"]
                    .iter()
                    .any(|e| rest.starts_with(e)),
                "stray & in {s:?}"
            );
            rest = &rest[1..];
        }
    };
    let mut stack: Vec<&str> = Vec::new();
    let mut rest = body;
    while let Some(open) = rest.find('<') {
        entity(&rest[..open]);
        let close = rest[open..].find('>').expect("unclosed tag") + open;
        let tag = &rest[open + 1..close];
        assert!(!tag.contains('<'), "'<' inside {tag:?}");
        if let Some(name) = tag.strip_prefix('/') {
            assert_eq!(stack.pop(), Some(name), "mismatched </{name}>");
        } else {
            let self_closing = tag.ends_with('/');
            let tag = tag.trim_end_matches('/');
            let name = tag.split_whitespace().next().expect("a tag name");
            let attrs = &tag[name.len()..];
            assert_eq!(
                attrs.matches('"').count() % 2,
                0,
                "unquoted attribute in {tag:?}"
            );
            entity(attrs);
            if !self_closing {
                stack.push(name);
            }
        }
        rest = &rest[close + 1..];
    }
    entity(rest);
    assert!(rest.trim().is_empty(), "text after the root");
    assert!(stack.is_empty(), "unclosed {stack:?}");
}

#[test]
fn rules_are_listed_in_text_and_json() {
    let out = run(&["--rules"]);
    assert_eq!(out.status.code(), Some(0));
    let stdout = text(&out);
    assert!(stdout.lines().any(|l| l.starts_with("MR-PKT-001 ")));
    let json = text(&run(&["--rules", "--json"]));
    let ids: Vec<String> = json
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["rule"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(ids.len(), stdout.lines().count());
    assert_eq!(ids.len(), analyzer::lint::rule_count());
}

#[test]
fn bad_arguments_exit_1() {
    let path = fixture("multipath_loss_sender.pcap");
    let p = path.to_str().unwrap();
    assert_eq!(run(&[p, "--deny", "MR-NOPE-001"]).status.code(), Some(1));
    assert_eq!(run(&[p, "--vantage", "sender"]).status.code(), Some(1));
    assert_eq!(run(&[p, p, "--vantage", "10.0.0.1"]).status.code(), Some(1));
    assert_eq!(run(&[]).status.code(), Some(1));
}

/// A RoCEv2 capture: one SEND from A to B's QP, then CNPs from B to A's QP
/// at `cnps_us` (us after the SEND).
fn rocev2_cnps(path: &Path, cnps_us: &[u64]) {
    use proto_parse::build::{ECN_ECT0, UdpFrameBuilder};
    use proto_parse::rocev2::{self, Opcode, bth};
    use std::net::{IpAddr, Ipv4Addr, SocketAddr};

    let a = IpAddr::V4(Ipv4Addr::new(10, 9, 0, 1));
    let b = IpAddr::V4(Ipv4Addr::new(10, 9, 0, 2));
    let packet = |opcode: Opcode, dest_qp: u32, payload_len: usize| {
        let bth = bth::Repr::new(opcode, dest_qp, 100).with_ack_req(opcode == Opcode::RcSendOnly);
        rocev2::Repr::new(bth, payload_len).to_vec()
    };
    let frame = |src: IpAddr, dst: IpAddr, bytes: &[u8]| {
        UdpFrameBuilder::new(
            SocketAddr::new(src, 49152),
            SocketAddr::new(dst, rocev2::UDP_PORT),
        )
        .with_ecn(ECN_ECT0)
        .build(bytes)
    };
    let start_ns = 1_764_000_000_000_000_000;
    let mut frames = vec![(start_ns, frame(a, b, &packet(Opcode::RcSendOnly, 0x22, 64)))];
    for &us in cnps_us {
        frames.push((
            start_ns + us * 1_000,
            frame(b, a, &packet(Opcode::Cnp, 0x11, 0)),
        ));
    }
    write_pcap(path, &frames);
}

#[test]
fn cnp_interval_sets_rc_cnp_001s_interval_and_0_turns_it_off() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cnps.pcap");
    // CNPs 20 us, then 100 us apart (frames 2, 3 and 4).
    rocev2_cnps(&path, &[10, 30, 130]);
    let frames =
        |extra: &[&str]| warning_frames(&["--json", path.to_str().unwrap()], extra, "RC-CNP-001");
    assert_eq!(frames(&[]), [3], "the default interval, 50 us");
    assert_eq!(frames(&["--cnp-interval", "10us"]), Vec::<u64>::new());
    assert_eq!(frames(&["--cnp-interval", "1ms"]), [3, 4]);
    assert_eq!(frames(&["--cnp-interval", "0"]), Vec::<u64>::new());
    let out = run(&["--cnp-interval", "soon", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
}

/// A MetaRoCE capture: a DATA packet with AR from A to B, and B's ACK of
/// it `ack_after_ns` later (frames 1 and 2).
fn metaroce_late_ack(path: &Path, ack_after_ns: u64) {
    use proto_parse::build::ECN_ECT0;
    use proto_parse::metaroce::{
        AckRepr, Body, DataRepr, FbFlags, FeedbackRepr, Flags, Op, Repr, SackBitmap,
    };
    use std::net::Ipv4Addr;

    let a = Ipv4Addr::new(10, 9, 0, 1);
    let b = Ipv4Addr::new(10, 9, 0, 2);
    let start_ns: u64 = 1_764_000_000_000_000_000;
    let payload = [0x5Au8; 256];
    let data = Repr {
        flags: Flags::SOM | Flags::EOM | Flags::AR,
        tx_attempt: 0,
        ev: 0,
        path_seq: 1,
        dst_conn: 0x200,
        src_conn: 0x100,
        psn: 1000,
        tx_ts: start_ns as u32,
        body: Body::Data(DataRepr {
            op: Op::Write {
                remote_va: 0x10_0000,
                rkey: 0x42,
            },
            payload_len: payload.len() as u16,
            msg_id: 1,
            msg_offset: 0,
            msg_len: payload.len() as u32,
        }),
        tlvs: Vec::new(),
        payload: &payload,
        crc: true,
    };
    let ack_ts = start_ns + ack_after_ns;
    let ack = Repr {
        flags: Flags::empty(),
        path_seq: 1,
        dst_conn: 0x100,
        src_conn: 0x200,
        psn: 1001,
        tx_ts: ack_ts as u32,
        body: Body::Ack(AckRepr {
            feedback: FeedbackRepr {
                flags: FbFlags::empty(),
                echo_ev: 0,
                echo_psn: 1000,
                echo_tx_ts: start_ns as u32,
                rx_ts: ack_ts as u32,
                ce_count: 0,
                rx_buf_level: 0,
                fwd_hops: 0,
                credit: u32::MAX,
            },
            sack_base: 1001,
            sack: SackBitmap::default(),
        }),
        payload: &[],
        ..data.clone()
    };
    write_pcap(
        path,
        &[
            (start_ns, metaroce_frame(a, b, ECN_ECT0, &data)),
            (ack_ts, metaroce_frame(b, a, ECN_ECT0, &ack)),
        ],
    );
}

#[test]
fn ack_delay_sets_mr_rcv_008s_bound() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("late-ack.pcap");
    // The ACK 2 ms after the AR packet.
    metaroce_late_ack(&path, 2_000_000);
    let args = ["--json", "--vantage", "10.9.0.2", path.to_str().unwrap()];
    let findings = |extra: &[&str]| warning_findings(&args, extra, "MR-RCV-008");
    let default = findings(&[]);
    assert_eq!(default.len(), 1, "{default:?}");
    assert_eq!(default[0].0, 2, "the default ack delay, 1 ms");
    assert!(default[0].1.contains("ack delay 1000 us"), "{default:?}");
    assert_eq!(findings(&["--ack-delay", "4ms"]), []);
    let shorter = findings(&["--ack-delay", "1500us"]);
    assert!(shorter[0].1.contains("ack delay 1500 us"), "{shorter:?}");
    let out = run(&["--ack-delay", "soon", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
}

/// A MetaRoCE capture: A's CLOSE, then a KEEPALIVE of B's `after_ns`
/// later and no CLOSE_ACK (frames 1 and 2).
fn metaroce_unanswered_close(path: &Path, after_ns: u64) {
    use proto_parse::build::ECN_ECT0;
    use proto_parse::metaroce::{Body, CcAlgo, CtrlOp, CtrlRepr, Features, Flags, Repr};
    use std::net::Ipv4Addr;

    let a = Ipv4Addr::new(10, 9, 0, 1);
    let b = Ipv4Addr::new(10, 9, 0, 2);
    let start_ns: u64 = 1_764_000_000_000_000_000;
    let ctrl = |op, src_conn, dst_conn, ts: u64| Repr {
        flags: Flags::empty(),
        tx_attempt: 0,
        ev: 0,
        path_seq: 0,
        dst_conn,
        src_conn,
        psn: 0,
        tx_ts: ts as u32,
        body: Body::Ctrl(CtrlRepr {
            op,
            cc_algo: CcAlgo::DelayBased,
            mtu: 1024,
            init_psn: 0,
            features: Features::empty(),
            ts_unit_ps: 1000,
        }),
        tlvs: Vec::new(),
        payload: &[],
        crc: false,
    };
    let later = start_ns + after_ns;
    let close = ctrl(CtrlOp::Close, 0x100, 0x200, start_ns);
    let keepalive = ctrl(CtrlOp::Keepalive, 0x200, 0x100, later);
    write_pcap(
        path,
        &[
            (start_ns, metaroce_frame(a, b, ECN_ECT0, &close)),
            (later, metaroce_frame(b, a, ECN_ECT0, &keepalive)),
        ],
    );
}

/// MR-CONN-010 is judged when the capture ends, and reaches the output.
#[test]
fn an_unanswered_close_is_reported_and_close_wait_sets_its_bound() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("close.pcap");
    metaroce_unanswered_close(&path, 20_000_000);
    let frames =
        |extra: &[&str]| warning_frames(&["--json", path.to_str().unwrap()], extra, "MR-CONN-010");
    assert_eq!(frames(&[]), [1], "the default close wait, 10 ms");
    assert_eq!(frames(&["--close-wait", "30ms"]), Vec::<u64>::new());
}

/// The same three one-packet WRITEs from A to B captured at two points:
/// `ecns` the IP ECN codepoint of each copy, `delay_ns` the capture time
/// after A's first (frames 1 to 3, 10 us apart).
fn metaroce_writes(path: &Path, ecns: [u8; 3], delay_ns: u64) {
    use proto_parse::metaroce::{Body, DataRepr, Flags, Op, Repr};
    use std::net::Ipv4Addr;

    let a = Ipv4Addr::new(10, 9, 0, 1);
    let b = Ipv4Addr::new(10, 9, 0, 2);
    let start_ns: u64 = 1_764_000_000_000_000_000;
    let payload = [0x5Au8; 256];
    let mut frames = Vec::new();
    for (i, ecn) in ecns.into_iter().enumerate() {
        let sent_ns = start_ns + i as u64 * 10_000;
        let data = Repr {
            flags: Flags::SOM | Flags::EOM,
            tx_attempt: 0,
            ev: 0,
            path_seq: 1 + i as u16,
            dst_conn: 0x200,
            src_conn: 0x100,
            psn: 1000 + i as u32,
            tx_ts: sent_ns as u32,
            body: Body::Data(DataRepr {
                op: Op::Write {
                    remote_va: 0x10_0000,
                    rkey: 0x42,
                },
                payload_len: payload.len() as u16,
                msg_id: 1 + i as u32,
                msg_offset: 0,
                msg_len: payload.len() as u32,
            }),
            tlvs: Vec::new(),
            payload: &payload,
            crc: true,
        };
        frames.push((sent_ns + delay_ns, metaroce_frame(a, b, ecn, &data)));
    }
    write_pcap(path, &frames);
}

/// MR-NET-001 (two-capture): a copy cleared to Not-ECT between the
/// capture points is reported on its frame, in its capture, with the
/// other capture's frame; a CE mark is not; one capture never reports it.
#[test]
fn an_ecn_field_cleared_between_two_captures_is_reported_in_the_downstream_capture() {
    use proto_parse::build::{ECN_CE, ECN_ECT0, ECN_NOT_ECT};
    let dir = tempfile::tempdir().unwrap();
    let upstream = dir.path().join("upstream.pcap");
    let downstream = dir.path().join("downstream.pcap");
    metaroce_writes(&upstream, [ECN_ECT0; 3], 0);
    metaroce_writes(&downstream, [ECN_ECT0, ECN_NOT_ECT, ECN_CE], 5_000);
    let (up, down) = (upstream.to_str().unwrap(), downstream.to_str().unwrap());
    let out = run(&["--json", up, down]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let found: Vec<Value> = text(&out)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["rule"] == "MR-NET-001")
        .collect();
    assert_eq!(found.len(), 1, "{found:?}");
    let f = &found[0];
    assert_eq!(f["capture"], "downstream");
    assert_eq!(f["frame"], 2);
    assert_eq!(f["related_frame"], 2);
    assert_eq!(f["severity"], "warning");
    assert_eq!(f["connection"], "10.9.0.1:256 -> 10.9.0.2:512");
    let evidence = f["evidence"].as_str().unwrap();
    assert!(
        evidence.contains("codepoint 0 (0 Not-ECT) where frame 2 of another capture")
            && evidence.contains("carries 2"),
        "{evidence}"
    );
    // Either order of the files: the finding stays on the Not-ECT copy.
    let swapped = warning_findings(&["--json", down, up], &[], "MR-NET-001");
    assert_eq!(swapped.len(), 1, "{swapped:?}");
    assert_eq!(swapped[0].0, 2);
    // The text output lists it with its capture.
    let out = run(&[up, down]);
    let stdout = text(&out);
    assert!(stdout.contains("MR-NET-001"), "{stdout}");
    // One capture alone cannot judge it; JUnit says so.
    let junit = dir.path().join("junit.xml");
    let alone = warning_frames(
        &["--json", down, "--junit", junit.to_str().unwrap()],
        &[],
        "MR-NET-001",
    );
    assert_eq!(alone, Vec::<u64>::new());
    let xml = std::fs::read_to_string(&junit).unwrap();
    let case = xml
        .split("<testcase ")
        .find(|c| c.contains("name=\"MR-NET-001\""))
        .expect("a test case for MR-NET-001");
    assert!(
        case.contains("<skipped message=\"not judged: a two-capture rule"),
        "{case}"
    );
}

/// A capture taken on A (10.9.0.1) of `seconds` of A's one-packet WRITEs
/// to B, one a millisecond, each answered by B's ACK: A's tx_ts is its
/// clock from `a_clock`, B's its own from `b_clock`, each ACK captured
/// 5 to 35 us after its WRITE left (the two trips vary). 1 ns units: both
/// clocks wrap every 4.3 s.
fn two_hosts_at_a(path: &Path, seconds: u64, a_clock: u32, b_clock: u32) {
    use proto_parse::metaroce::{
        AckRepr, Body, DataRepr, FbFlags, FeedbackRepr, Flags, Op, Repr, SackBitmap,
    };
    use std::net::Ipv4Addr;

    let a = Ipv4Addr::new(10, 9, 0, 1);
    let b = Ipv4Addr::new(10, 9, 0, 2);
    let start_ns: u64 = 1_764_000_000_000_000_000;
    let payload = [0x5Au8; 256];
    let mut frames = Vec::new();
    for i in 0..seconds * 1000 {
        let sent = i * 1_000_000;
        let psn = 1000 + i as u32;
        let path_seq = 1 + i as u16;
        let data = Repr {
            flags: Flags::SOM | Flags::EOM,
            tx_attempt: 0,
            ev: 0,
            path_seq,
            dst_conn: 0x200,
            src_conn: 0x100,
            psn,
            tx_ts: a_clock.wrapping_add(sent as u32),
            body: Body::Data(DataRepr {
                op: Op::Write {
                    remote_va: 0x10_0000,
                    rkey: 0x42,
                },
                payload_len: payload.len() as u16,
                msg_id: 1 + i as u32,
                msg_offset: 0,
                msg_len: payload.len() as u32,
            }),
            tlvs: Vec::new(),
            payload: &payload,
            crc: true,
        };
        frames.push((start_ns + sent, metaroce_frame(a, b, 2, &data)));
        let arrived = sent + 2_000 + (i * 7_919) % 15_000;
        let acked = arrived + 1_000;
        let back = 2_000 + (i * 104_729) % 15_000;
        let ack = Repr {
            flags: Flags::empty(),
            tx_attempt: 0,
            ev: 0,
            path_seq,
            dst_conn: 0x100,
            src_conn: 0x200,
            psn: psn + 1,
            tx_ts: b_clock.wrapping_add(acked as u32),
            body: Body::Ack(AckRepr {
                feedback: FeedbackRepr {
                    flags: FbFlags::empty(),
                    echo_ev: 0,
                    echo_psn: psn,
                    echo_tx_ts: data.tx_ts,
                    rx_ts: b_clock.wrapping_add(arrived as u32),
                    ce_count: 0,
                    rx_buf_level: 0,
                    fwd_hops: 0,
                    credit: u32::MAX,
                },
                sack_base: psn + 1,
                sack: SackBitmap::default(),
            }),
            tlvs: Vec::new(),
            payload: &[],
            crc: true,
        };
        frames.push((start_ns + acked + back, metaroce_frame(b, a, 2, &ack)));
    }
    write_pcap(path, &frames);
}

/// Spec 2: tx_ts is its sender's clock modulo 2^32 (1 ns units: a wrap
/// every 4.3 s). On a 6 s capture taken on A, whose tx_ts wraps during
/// the capture (and B's too, or not), capture time minus tx_ts modulo 2^32
/// is constant for A's packets: the lint finds the capture point without
/// `--vantage`.
#[test]
fn the_capture_point_is_found_on_a_capture_longer_than_a_tx_ts_wrap() {
    let dir = tempfile::tempdir().unwrap();
    for (a_clock, b_clock) in [
        (u32::MAX - 500_000_000, 0x1234_5678),
        (0x1000, u32::MAX - 2_000_000_000),
    ] {
        let path = dir.path().join("long.pcap");
        two_hosts_at_a(&path, 6, a_clock, b_clock);
        let out = run(&[path.to_str().unwrap()]);
        let stdout = text(&out);
        assert!(
            stdout.contains("captured on 10.9.0.1"),
            "A's clock from {a_clock:#x}, B's from {b_clock:#x}: {stdout}"
        );
    }
}

/// When the traffic does not say where the capture was taken, the lint
/// says how to tell it: `--vantage ADDR`.
#[test]
fn an_unknown_capture_point_says_how_to_give_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("one_way.pcap");
    // A's DATA only: both addresses are in every packet, and B sent
    // nothing whose timestamps could tell the two ends apart.
    metaroce_writes(&path, [2; 3], 5_000);
    let out = run(&[path.to_str().unwrap()]);
    let stdout = text(&out);
    assert!(stdout.contains("capture point unknown"), "{stdout}");
    assert!(stdout.contains("--vantage ADDR"), "{stdout}");
    let out = run(&["--vantage", "none", path.to_str().unwrap()]);
    let stdout = text(&out);
    assert!(
        stdout.contains("capture point unknown (--vantage none)"),
        "{stdout}"
    );
}
