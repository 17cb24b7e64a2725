//! `scripts/install-plugin.sh` refuses, before building anything, when the
//! tshark it finds and the Wireshark headers (pkg-config) differ in
//! major.minor: such a plugin would not load.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

#[test]
fn install_refuses_when_tshark_and_headers_differ() {
    let dir = tempfile::tempdir().unwrap();
    // A tshark of another line, first on PATH.
    let fake = dir.path().join("tshark");
    std::fs::write(
        &fake,
        "#!/bin/sh\necho 'TShark (Wireshark) 9.9.1 (Git v9.9.1 packaged as 9.9.1-1)'\n",
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!(
        "{}:{}",
        dir.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out =
        Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/install-plugin.sh"))
            .arg("--dir")
            .arg(dir.path().join("plugins"))
            .env("PATH", path)
            .output()
            .expect("running scripts/install-plugin.sh");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("tshark is 9.9.1 but the Wireshark headers (pkg-config) are"),
        "{stderr}"
    );
    assert!(stderr.contains("--wireshark 4.4|4.6"), "{stderr}");
    assert!(
        !dir.path().join("plugins").exists(),
        "nothing is installed when it refuses"
    );
}
