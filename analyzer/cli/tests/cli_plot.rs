//! `metaroce-analyze plot`: PNG and SVG charts for every direction that
//! sent DATA (the PNGs were looked at by eye when this was written: they
//! have labels, drawn with the bundled DejaVu font).
#![cfg(feature = "plot")]

use std::path::Path;
use std::process::Command;

#[test]
fn plot_writes_png_and_svg_charts() {
    let tmp = tempfile::tempdir().unwrap();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/generated");
    let out = Command::new(env!("CARGO_BIN_EXE_metaroce-analyze"))
        .arg("plot")
        .arg("--out")
        .arg(tmp.path())
        .arg(fixtures.join("multipath_loss_sender.pcap"))
        .arg(fixtures.join("multipath_loss_receiver.pcap"))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for host in ["multipath_loss_sender", "multipath_loss_receiver"] {
        for chart in ["psn_time", "rtt_paths", "msg_latency"] {
            let base = tmp
                .path()
                .join(host)
                .join(format!("{chart}_10.0.0.1-256_to_10.0.0.2-512"));
            let ext = |e: &str| format!("{}.{e}", base.display());
            let png = std::fs::read(ext("png")).unwrap();
            assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "{host} {chart}");
            assert!(png.len() > 5_000, "{host} {chart}: {} bytes", png.len());
            let svg = std::fs::read_to_string(ext("svg")).unwrap();
            assert!(svg.contains("<svg"), "{host} {chart}");
            assert!(
                svg.contains("10.0.0.1:256 -&gt; 10.0.0.2:512")
                    || svg.contains("10.0.0.1:256 -> 10.0.0.2:512"),
                "{host} {chart}"
            );
        }
        // One histogram per path: the four evs of the scenario.
        let svg = std::fs::read_to_string(
            tmp.path()
                .join(host)
                .join("rtt_paths_10.0.0.1-256_to_10.0.0.2-512.svg"),
        )
        .unwrap();
        for ev in 0..4 {
            assert!(svg.contains(&format!("ev {ev}")), "{host}: ev {ev}");
        }
    }
}
