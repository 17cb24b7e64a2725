//! The conformance lint in tshark: each rule a frame breaks is an expert
//! info `metaroce.lint.<rule>` (group Protocol, severity from the rule)
//! on that frame and no other, `metaroce.lint` names the rule, and a clean
//! capture shows no error-severity lint finding; the `lint` preference
//! turns it off.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use proto_parse::build::ECN_NOT_ECT;
use proto_parse::metaroce::{AckRepr, Body, FbFlags, Flags, Op, Repr, SackBitmap};

fn write_pkt(psn: u32, ev: u16, msg_id: u32, msg_offset: u32, msg_len: u32) -> Repr<'static> {
    let mut r = base(
        data(
            Op::Write {
                remote_va: 0x1000 + u64::from(msg_offset),
                rkey: 7,
            },
            64,
            msg_id,
            msg_offset,
            msg_len,
        ),
        psn,
        ev,
    );
    r.payload = &PAYLOAD;
    r
}

/// Frames (1-based):
/// 1 DATA, first of a 2-packet message (SOM)       clean
/// 2 DATA, its last packet (EOM), sent from the UDP source port of
///   another ev                                    MR-PKT-002 (error)
/// 3 DATA, a one-packet message without SOM       MR-PKT-003 (error)
/// 4 DATA, a one-packet message, not ECN-capable   MR-PKT-012 (warning)
/// 5 ACK of PSNs 100..103                          clean
fn capture(t: &Tshark) -> PathBuf {
    let mut first = write_pkt(100, 1, 1, 0, 128);
    first.flags = Flags::SOM;
    let mut last = write_pkt(101, 2, 1, 64, 128);
    last.flags = Flags::EOM;
    let mut no_som = write_pkt(102, 3, 2, 0, 64);
    no_som.flags = Flags::EOM;
    let mut not_ect = write_pkt(103, 1, 3, 0, 64);
    not_ect.flags = Flags::SOM | Flags::EOM;
    not_ect.path_seq = 2;
    let mut fb = feedback(103, 1);
    fb.flags = FbFlags::empty();
    let mut ack = base(
        Body::Ack(AckRepr {
            feedback: fb,
            sack_base: 104,
            sack: SackBitmap::default(),
        }),
        104,
        1,
    );
    ack.src_conn = 0x22;
    ack.dst_conn = 0x11;
    let frames = vec![
        metaroce_frame(&first, true),
        udp_frame(
            &last.to_vec(),
            proto_parse::metaroce::udp_source_port(5),
            PORT,
            true,
        ),
        metaroce_frame(&no_som, true),
        frame_with_ecn(&not_ect, ECN_NOT_ECT),
        metaroce_frame(&ack, false),
    ];
    write_pcap(t, "lint.pcap", &frames)
}

fn frame_with_ecn(repr: &Repr<'_>, ecn: u8) -> Vec<u8> {
    proto_parse::build::UdpFrameBuilder::new(
        (
            [10, 0, 0, 1],
            proto_parse::metaroce::udp_source_port(repr.ev),
        )
            .into(),
        ([10, 0, 0, 2], PORT).into(),
    )
    .with_ecn(ecn)
    .build(&repr.to_vec())
}

fn frames_matching(t: &Tshark, pcap: &Path, filter: &str, extra: &[&str]) -> Vec<u64> {
    t.fields_with(pcap, &["frame.number"], Some(filter), extra)
        .iter()
        .map(|row| row[0].parse().unwrap())
        .collect()
}

#[test]
fn each_broken_rule_is_an_expert_info_on_its_frame() {
    let t = Tshark::new();
    let pcap = capture(&t);
    for two_pass in [false, true] {
        let extra: &[&str] = if two_pass { &["-2"] } else { &[] };
        let find = |filter: &str| frames_matching(&t, &pcap, filter, extra);
        assert_eq!(find("metaroce.lint.mr_pkt_002"), [2], "two pass {two_pass}");
        assert_eq!(find("metaroce.lint.mr_pkt_003"), [3]);
        assert_eq!(find("metaroce.lint.mr_pkt_012"), [4]);
        assert_eq!(find("metaroce.lint"), [2, 3, 4], "any finding");
        assert_eq!(find("metaroce.lint == \"MR-PKT-003\""), [3]);
        assert_eq!(
            find("_ws.expert.severity == 0x00800000 && metaroce.lint"),
            [2, 3]
        );
        assert_eq!(
            find("_ws.expert.group == 0x09000000 && metaroce.lint"),
            [2, 3, 4]
        );
    }
    // The rule id in the field, the expert text with the evidence.
    let rows = t.fields(
        &pcap,
        &["frame.number", "metaroce.lint", "_ws.expert.message"],
        Some("metaroce.lint"),
    );
    assert_eq!(rows[0][1], "MR-PKT-002");
    assert!(
        rows[0][2].contains("[MR-PKT-002] The UDP source port is 0xC000 | (ev & 0x3FFF)")
            && rows[0][2]
                .contains("UDP source port 49157 (ev 2) where 0xC000 | (ev & 0x3FFF) is 49154"),
        "{rows:?}"
    );
    assert!(rows[1][2].contains("msg_offset 0 with SOM 0"), "{rows:?}");

    // `-z expert`: under Errors and Warnings, group Protocol.
    let out = t.ok(&["-n", "-q", "-r", pcap.to_str().unwrap(), "-z", "expert"]);
    let errors = section(&out, "Errors");
    let warns = section(&out, "Warns");
    assert!(
        errors
            .iter()
            .any(|l| l.contains("Protocol") && l.contains("[MR-PKT-002]"))
            && errors.iter().any(|l| l.contains("[MR-PKT-003]")),
        "{out}"
    );
    assert!(
        warns
            .iter()
            .any(|l| l.contains("Protocol") && l.contains("[MR-PKT-012]")),
        "{out}"
    );
    assert!(!errors.iter().any(|l| l.contains("[MR-PKT-012]")), "{out}");

    // Off with the preference (the rest of the analysis stays on).
    let off = ["-o", "metaroce.lint:FALSE"];
    assert!(frames_matching(&t, &pcap, "metaroce.lint", &off).is_empty());
    assert!(!frames_matching(&t, &pcap, "metaroce.analysis.flow", &off).is_empty());
}

/// The lines of one section of `-z expert` ("Errors (2)" up to the next
/// blank-line-separated heading).
fn section<'a>(out: &'a str, name: &str) -> Vec<&'a str> {
    let mut lines = out.lines().skip_while(|l| !l.starts_with(name));
    let mut got = Vec::new();
    if lines.next().is_none() {
        return got;
    }
    for l in lines {
        if l.is_empty() {
            if got.len() > 2 {
                break;
            }
            continue;
        }
        got.push(l);
    }
    got
}

/// The generator's multipath scenario (a handshake, a sprayed transfer with
/// loss, reordering, CE and repairs), at both capture points: the lint
/// judges it conformant, so no frame carries an error-severity lint
/// expert info, on one pass or two.
#[test]
fn a_clean_capture_has_no_error_severity_finding() {
    let t = Tshark::new();
    for name in ["multipath_loss_sender.pcap", "multipath_loss_receiver.pcap"] {
        let src = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../fixtures/generated")
            .join(name);
        let copy = t.path(name);
        std::fs::copy(&src, &copy).unwrap();
        t.share(&copy);
        for extra in [&[][..], &["-2"][..]] {
            let analysed = frames_matching(&t, &copy, "metaroce.analysis.flow", extra);
            assert!(analysed.len() > 20, "{name}: the analysis ran");
            let errors = frames_matching(
                &t,
                &copy,
                "metaroce.lint && _ws.expert.severity == 0x00800000",
                extra,
            );
            assert!(errors.is_empty(), "{name} {extra:?}: frames {errors:?}");
        }
        let out = t.ok(&[
            "-n",
            "-q",
            "-r",
            copy.to_str().unwrap(),
            "-z",
            "expert,error",
        ]);
        assert!(
            !out.contains("[MR-") && !out.contains("[RC-"),
            "{name}:\n{out}"
        );
    }
}
