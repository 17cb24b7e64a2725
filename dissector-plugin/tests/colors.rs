//! The "Bad MetaRoCE" colouring rule (`dissector-plugin/colorfilters`), as
//! `scripts/install-plugin.sh --colors-only` adds it: first in the personal
//! colorfilters file, once however often it runs, the user's own rules kept;
//! and tshark (`--color`) then colours exactly the trouble frames with it.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::Tshark;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

const USER_RULE: &str = "@My UDP@udp@[0,0,0][65535,65535,65535]";

/// Runs the install script's colour step with `home` as HOME.
fn add_colors(home: &Path) -> String {
    let out = Command::new(repo().join("scripts/install-plugin.sh"))
        .arg("--colors-only")
        .env("HOME", home)
        .output()
        .expect("running scripts/install-plugin.sh");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "install-plugin.sh --colors-only failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// `(frame number, colouring rule name)` of every frame of `pcap`.
fn coloured(t: &Tshark, pcap: &Path) -> Vec<(String, String)> {
    t.fields_with(
        pcap,
        &["frame.number", "frame.coloring_rule.name"],
        None,
        &["--color"],
    )
    .into_iter()
    .map(|r| (r[0].clone(), r.get(1).cloned().unwrap_or_default()))
    .collect()
}

fn frames(t: &Tshark, pcap: &Path, filter: &str) -> Vec<String> {
    t.fields(pcap, &["frame.number"], Some(filter))
        .into_iter()
        .map(|r| r[0].clone())
        .collect()
}

#[test]
fn install_adds_the_rule_once_first_and_keeps_the_users_rules() {
    let t = Tshark::new();
    let conf = t.home().join(".config/wireshark");
    std::fs::create_dir_all(&conf).unwrap();
    let file = conf.join("colorfilters");
    std::fs::write(&file, format!("# my rules\n{USER_RULE}\n")).unwrap();

    assert!(add_colors(t.home()).contains("added first"));
    assert!(add_colors(t.home()).contains("already has"));
    let text = std::fs::read_to_string(&file).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].starts_with("@Bad MetaRoCE@"), "{text}");
    assert_eq!(
        lines.iter().filter(|l| l.contains("Bad MetaRoCE")).count(),
        1,
        "{text}"
    );
    assert_eq!(&lines[1..], ["# my rules", USER_RULE], "{text}");

    // tshark applies the rules in that order: the trouble frames are "Bad
    // MetaRoCE", every other UDP frame falls through to the user's rule.
    let pcap = repo().join("fixtures/generated/multipath_loss_sender.pcap");
    let pcap_copy = t.path("sender.pcap");
    std::fs::copy(pcap, &pcap_copy).unwrap();
    t.share(&pcap_copy);
    let trouble = frames(
        &t,
        &pcap_copy,
        "metaroce.analysis.retransmission || metaroce.analysis.path_loss || \
         metaroce.analysis.stall || metaroce.malformed || metaroce.crc.bad",
    );
    let retransmitted = frames(&t, &pcap_copy, "metaroce.analysis.retransmission");
    assert_eq!(retransmitted.len(), 4);
    assert!(trouble.len() > retransmitted.len());
    let rows = coloured(&t, &pcap_copy);
    assert_eq!(rows.len(), 32);
    for (frame, rule) in &rows {
        let expected = if trouble.contains(frame) {
            "Bad MetaRoCE"
        } else {
            "My UDP"
        };
        assert_eq!(rule, expected, "frame {frame}");
    }
}

#[test]
fn the_rule_marks_rocev2_trouble_too() {
    let t = Tshark::new();
    let conf = t.home().join(".config/wireshark");
    std::fs::create_dir_all(&conf).unwrap();
    std::fs::write(conf.join("colorfilters"), format!("{USER_RULE}\n")).unwrap();
    add_colors(t.home());
    let pcap = common::write_pcap(&t, "rocev2.pcap", &common::roce::script());
    let trouble = frames(
        &t,
        &pcap,
        "rocev2.analysis.retransmission || rocev2.analysis.psn_gap || rocev2.analysis.nak \
         || rocev2.icrc.status == 0",
    );
    // Four go-back-N resends, a duplicate, two NAKs, a gap, a bad ICRC.
    assert_eq!(trouble.len(), 9, "{trouble:?}");
    for (frame, rule) in coloured(&t, &pcap) {
        let expected = if trouble.contains(&frame) {
            "Bad MetaRoCE"
        } else {
            "My UDP"
        };
        assert_eq!(rule, expected, "frame {frame}");
    }
}

#[test]
fn without_personal_rules_the_global_ones_are_kept_after_the_new_rule() {
    let t = Tshark::new();
    add_colors(t.home());
    let text = std::fs::read_to_string(t.home().join(".config/wireshark/colorfilters")).unwrap();
    assert!(text.starts_with("@Bad MetaRoCE@"), "{text}");
    assert!(
        text.contains("@Bad TCP@"),
        "the global rules follow: {text}"
    );
}

#[test]
fn the_rule_marks_malformed_and_bad_crc_packets() {
    let t = Tshark::new();
    let conf = t.home().join(".config/wireshark");
    std::fs::create_dir_all(&conf).unwrap();
    std::fs::write(conf.join("colorfilters"), "").unwrap();
    add_colors(t.home());
    let pcap = t.path("malformed.pcap");
    std::fs::copy(repo().join("fixtures/generated/malformed.pcap"), &pcap).unwrap();
    t.share(&pcap);
    let bad = frames(&t, &pcap, "metaroce.malformed || metaroce.crc.bad");
    assert!(!bad.is_empty());
    let rows = coloured(&t, &pcap);
    for frame in &bad {
        let rule = &rows.iter().find(|(f, _)| f == frame).unwrap().1;
        assert_eq!(rule, "Bad MetaRoCE", "frame {frame}");
    }
}
