//! The real Wireshark GUI (Debian's wireshark-qt: the host's Wireshark
//! line) under Xvfb with the plugin: `scripts/wireshark-gui-screenshot.sh`
//! opens the two-host scenario's sender capture, selects a retransmitted
//! DATA packet and expands its MetaRoCE tree. The running Wireshark must
//! have the plugin mapped, its window must show the capture, and the
//! screenshot must not be blank.

mod common;

use std::path::Path;
use std::process::Command;

#[test]
fn wireshark_gui_runs_with_the_plugin_and_the_screenshot_is_not_blank() {
    assert!(
        common::wireshark_root().is_none(),
        "the GUI test runs the host's Wireshark (the roots have no Qt): \
         run it without METAROCE_WIRESHARK_ROOT (scripts/run.sh skips it in the roots)"
    );
    let dir = tempfile::tempdir().unwrap();
    let shot = dir.path().join("gui.png");
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/wireshark-gui-screenshot.sh");
    let out = Command::new(script)
        .arg("--plugin")
        .arg(common::plugin_so())
        .arg(&shot)
        .output()
        .expect("running scripts/wireshark-gui-screenshot.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
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
        loaded.ends_with("/epan/libmetaroce_dissector.so"),
        "{loaded}"
    );
    assert!(stdout.contains("window: capture.pcap"), "{stdout}");

    // Not blank, checked here too: the size Xvfb's screen has, and the
    // thousands of colours of text, icons and coloured rows.
    let identify = Command::new("convert")
        .arg(&shot)
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
}
