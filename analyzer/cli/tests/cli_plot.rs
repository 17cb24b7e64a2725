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

/// A direction whose PSNs start 20 below 2^32 and wrap through 0: 40 DATA
/// packets, 1 us apart.
fn wrapping_psn_capture(path: &Path) {
    use proto_parse::build::UdpFrameBuilder;
    use proto_parse::capture::PcapWriter;
    use proto_parse::metaroce::{Body, DataRepr, Flags, Op, Repr};
    let builder = UdpFrameBuilder::new(
        "10.0.0.1:49152".parse().unwrap(),
        "10.0.0.2:4794".parse().unwrap(),
    );
    let payload = [0x5a; 64];
    let mut w = PcapWriter::create(path).unwrap();
    for i in 0..40u32 {
        let repr = Repr {
            flags: Flags::SOM | Flags::EOM,
            tx_attempt: 0,
            ev: 0,
            path_seq: i as u16 + 1,
            dst_conn: 0xbeef,
            src_conn: 0xcafe,
            psn: 0xffff_ffec_u32.wrapping_add(i),
            tx_ts: i * 1000,
            body: Body::Data(DataRepr {
                op: Op::Send,
                payload_len: payload.len() as u16,
                msg_id: i,
                msg_offset: 0,
                msg_len: payload.len() as u32,
            }),
            tlvs: Vec::new(),
            payload: &payload,
            crc: false,
        };
        let frame = builder.build(&repr.to_vec());
        w.write_frame(1_700_000_000_000_000_000 + u64::from(i) * 1000, &frame)
            .unwrap();
    }
    w.flush().unwrap();
}

/// Issue 17 item 8: PSNs that start high and wrap through 0 rise from 0 on
/// the chart (relative to the first, serial arithmetic) instead of lying
/// in two flat rows at the bottom and the top; the y axis says so, and the
/// file is named with the direction as the text report writes it.
#[test]
fn psn_chart_is_relative_to_the_first_psn_across_the_wrap() {
    let tmp = tempfile::tempdir().unwrap();
    let pcap = tmp.path().join("wrap.pcap");
    wrapping_psn_capture(&pcap);
    let bin = env!("CARGO_BIN_EXE_metaroce-analyze");
    let report = Command::new(bin).arg("report").arg(&pcap).output().unwrap();
    let text = String::from_utf8_lossy(&report.stdout);
    let direction = "10.0.0.1:51966 -> 10.0.0.2:48879";
    assert!(text.contains(direction), "{text}");
    let out = Command::new(bin)
        .arg("plot")
        .arg("--out")
        .arg(tmp.path())
        .arg(&pcap)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let file = format!(
        "psn_time_{}.svg",
        direction.replace(':', "-").replace(" -> ", "_to_")
    );
    let svg = std::fs::read_to_string(tmp.path().join("wrap").join(&file))
        .unwrap_or_else(|e| panic!("{file}: {e}"));
    assert!(
        svg.contains("PSN - 4294967276 (the first DATA"),
        "the y axis names the first PSN"
    );
    // One point per packet, each at its own height: a rising line (the
    // legend's marker is the larger circle).
    let ys: Vec<f64> = svg
        .split("<circle")
        .skip(1)
        .filter(|c| c.contains("r=\"3\""))
        .filter_map(|c| {
            let at = c.find("cy=\"")? + 4;
            c[at..].split('"').next()?.parse().ok()
        })
        .collect();
    assert_eq!(ys.len(), 40, "one point per DATA packet");
    assert!(
        ys.windows(2).all(|w| w[1] < w[0]),
        "PSN order is height order (SVG y grows downwards): {ys:?}"
    );
    let span = ys[0] - ys[39];
    assert!(span > 300.0, "the points span {span} px of a 700 px chart");
    // The y axis has tick labels: 0 and 30 among them.
    let texts: Vec<&str> = svg
        .split("<text")
        .skip(1)
        .filter_map(|t| Some(t.split('>').nth(1)?.split('<').next()?.trim()))
        .collect();
    assert!(
        texts.contains(&"0") && texts.contains(&"30"),
        "no y tick labels in {texts:?}"
    );
}
