//! What the CLI's integration tests share: where the workspace and its
//! generated fixtures are, the binary under test, and the hand-written
//! expectations of the two-host scenario.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use serde_json::Value;

/// `metaroce-analyze`, as built for these tests.
pub const BIN: &str = env!("CARGO_BIN_EXE_metaroce-analyze");

/// The workspace's root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A file of `fixtures/generated/`.
pub fn fixture(name: &str) -> PathBuf {
    root().join("fixtures/generated").join(name)
}

/// The two captures of the multipath-loss scenario: sender, receiver.
pub fn two_hosts() -> [PathBuf; 2] {
    [
        fixture("multipath_loss_sender.pcap"),
        fixture("multipath_loss_receiver.pcap"),
    ]
}

/// `fixtures/generated/multipath_loss.expected.json`: the scenario's
/// expected results, written by hand (read here, never edited to match).
pub fn expected() -> Value {
    let text = std::fs::read_to_string(fixture("multipath_loss.expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}
