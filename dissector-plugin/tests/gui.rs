//! The real Wireshark GUI under Xvfb with the plugin, on the line the tests
//! run (the host's, or the Debian root's of `METAROCE_WIRESHARK_ROOT`, whose
//! Wireshark runs inside the root on the host's Xvfb):
//! `scripts/wireshark-gui-screenshot.sh` opens the two-host scenario's
//! sender capture with a retransmitted MetaRoCE DATA packet selected and
//! its MetaRoCE tree expanded, then the RoCEv2 script (`common::roce`) with
//! a go-back-N retransmission selected and its "RoCEv2 analysis" tree
//! expanded. Each time the running Wireshark must have the plugin mapped
//! (its /proc/PID/maps: the plugin Wireshark loaded, which is what About >
//! Plugins lists), its window must show the capture, and the screenshot
//! must not be blank.

mod common;

use std::path::Path;
use std::process::Command;

/// Runs the screenshot script with `args`; returns its stdout.
fn screenshot(shot: &Path, args: &[&str]) -> String {
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/wireshark-gui-screenshot.sh");
    let mut cmd = Command::new(script);
    if common::wireshark_root().is_some() {
        cmd.args(["--wireshark", &common::tshark_version()]);
    }
    let out = cmd
        .arg("--plugin")
        .arg(common::plugin_so())
        .args(args)
        .arg(shot)
        .output()
        .expect("running scripts/wireshark-gui-screenshot.sh");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the GUI script failed:\n{stdout}\n{stderr}"
    );
    let loaded = stdout
        .lines()
        .find_map(|l| l.strip_prefix("plugin loaded: "))
        .unwrap_or_else(|| panic!("no plugin in the running Wireshark:\n{stdout}"));
    assert!(
        loaded.ends_with(&format!(
            "/{}/epan/libmetaroce_dissector.so",
            common::tshark_version()
        )),
        "{loaded}"
    );
    assert!(stdout.contains("window: capture.pcap"), "{stdout}");

    // Not blank, checked here too: the size Xvfb's screen has, and the
    // thousands of colours of text, icons and coloured rows.
    let identify = Command::new("convert")
        .arg(shot)
        .args(["-format", "%w %h %k", "info:"])
        .output()
        .expect("imagemagick's convert is installed");
    let info = String::from_utf8_lossy(&identify.stdout);
    let numbers: Vec<u32> = info
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect();
    assert_eq!(&numbers[..2], [1400, 1400], "{info}");
    assert!(
        numbers[2] > 500,
        "the screenshot has {} colours",
        numbers[2]
    );
    stdout
}

#[test]
fn wireshark_gui_runs_with_the_plugin_and_the_screenshot_is_not_blank() {
    let dir = tempfile::tempdir().unwrap();
    screenshot(&dir.path().join("metaroce.png"), &[]);

    let t = common::Tshark::new();
    let pcap = common::write_pcap(&t, "rocev2.pcap", &common::roce::script());
    screenshot(
        &dir.path().join("rocev2.png"),
        &[
            "--capture",
            pcap.to_str().unwrap(),
            "--select",
            "rocev2.analysis.go_back_n",
            "--expand",
            "rocev2",
        ],
    );
}
