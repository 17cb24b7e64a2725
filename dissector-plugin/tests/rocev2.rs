//! The RoCEv2 analysis beside Wireshark's InfiniBand dissector
//! (`rocev2.analysis.*`, the `rocev2` post-dissector): what it says on a
//! scripted exchange with every case, that its numbers are
//! `metaroce-analyze report --json`'s `rocev2` section on that script and
//! the real captures, that the InfiniBand dissector's own fields do not
//! change, its filters, the stats tree, the lint's RC-* expert infos, its
//! preference, and bad input.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{Tshark, roce};

fn script_pcap(t: &Tshark) -> PathBuf {
    common::write_pcap_timed(t, "rocev2.pcap", &roce::script(), roce::offset_ns)
}

/// The frame numbers `filter` matches.
fn frames(t: &Tshark, pcap: &Path, filter: &str) -> Vec<u64> {
    t.fields(pcap, &["frame.number"], Some(filter))
        .iter()
        .map(|r| r[0].parse().unwrap())
        .collect()
}

/// `field` of every frame (empty when absent), by frame number.
fn column(t: &Tshark, pcap: &Path, field: &str) -> Vec<String> {
    t.fields(pcap, &[field], None)
        .into_iter()
        .map(|mut r| r.swap_remove(0))
        .collect()
}

/// The real captures shipped with the repository (the four of
/// /work/shared's real folder, with provenance).
fn real_captures() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/real");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("fixtures/real")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pcap"))
        .collect();
    v.sort();
    assert_eq!(v.len(), 4, "the four real captures in {}", dir.display());
    v
}

/// A copy of `src` in the test's folder (readable by tshark's user, and
/// inside the Debian root when the tests run one).
fn copy_in(t: &Tshark, src: &Path) -> PathBuf {
    let dst = t.path(src.file_name().unwrap().to_str().unwrap());
    std::fs::copy(src, &dst).unwrap();
    t.share(&dst);
    dst
}

#[test]
fn the_script_shows_every_case() {
    let t = Tshark::new();
    let pcap = script_pcap(&t);
    assert_eq!(
        frames(&t, &pcap, "rocev2.analysis.go_back_n"),
        [8, 9, 10, 14]
    );
    assert_eq!(
        t.fields(
            &pcap,
            &[
                "rocev2.analysis.retransmission.original_frame",
                "rocev2.analysis.retransmission.kind"
            ],
            Some("rocev2.analysis.retransmission")
        ),
        [
            ["2", "fast"],
            ["3", "fast"],
            ["4", "fast"],
            ["12", "timeout"],
            // Acknowledged: the engine no longer holds its first frame.
            ["", "spurious"]
        ]
    );
    assert_eq!(frames(&t, &pcap, "rocev2.analysis.duplicate"), [16]);
    assert_eq!(
        t.fields(
            &pcap,
            &[
                "frame.number",
                "rocev2.analysis.psn_gap",
                "rocev2.analysis.expected_psn"
            ],
            Some("rocev2.analysis.psn_gap")
        ),
        [["22", "2", "19"]]
    );
    // Expected PSN on every request but the flow's first.
    let expected = column(&t, &pcap, "rocev2.analysis.expected_psn");
    assert_eq!(expected[0], "");
    assert_eq!(expected[1], "11");
    assert_eq!(expected[7], "14", "the go-back-N resend of 11 expects 14");
    // ACKs and NAKs name what they acknowledge; READ responses their READ.
    assert_eq!(
        t.fields(
            &pcap,
            &["frame.number", "rocev2.analysis.acked_frame"],
            Some("rocev2.analysis.acked_frame && frame.number <= 5")
        ),
        [["5", "1"]]
    );
    assert_eq!(
        frames(&t, &pcap, "rocev2.analysis.request_frame == 17"),
        [18, 19, 20, 21]
    );
    assert_eq!(
        t.fields(
            &pcap,
            &["rocev2.analysis.read.response", "rocev2.analysis.read.span"],
            Some("rocev2.analysis.read.response")
        ),
        [["1", "4"], ["2", "4"], ["3", "4"], ["4", "4"]]
    );
    assert_eq!(frames(&t, &pcap, "rocev2.analysis.read.complete"), [21]);
    assert!(frames(&t, &pcap, "rocev2.analysis.read.discarded").is_empty());
    // NAK syndromes in words, the RNR timer as a time.
    assert_eq!(
        t.fields(
            &pcap,
            &[
                "frame.number",
                "rocev2.analysis.nak",
                "rocev2.analysis.nak.syndrome"
            ],
            Some("rocev2.analysis.nak")
        ),
        [
            ["6", "NAK: PSN sequence error", "0x60"],
            ["13", "RNR NAK, retry after 30.000 us", "0x23"]
        ]
    );
    assert_eq!(
        t.fields(
            &pcap,
            &["rocev2.analysis.nak.rnr_timer"],
            Some("rocev2.analysis.nak.rnr_timer")
        ),
        [["0.000030000"]]
    );
    // CNP pacing: the second CNP 31 us after the first.
    assert_eq!(frames(&t, &pcap, "rocev2.analysis.cnp"), [7, 23]);
    assert_eq!(
        t.fields(
            &pcap,
            &["rocev2.analysis.cnp.interval"],
            Some("rocev2.analysis.cnp.interval")
        ),
        [["0.000031000"]]
    );
    assert_eq!(frames(&t, &pcap, "rocev2.analysis.ce_marked"), [3]);
    // The ICRC, computed over the masked fields: every frame's good but
    // the last, whose computed value is what Wireshark shows stored on the
    // others.
    assert_eq!(frames(&t, &pcap, "rocev2.icrc.status == 0"), [24]);
    assert_eq!(frames(&t, &pcap, "rocev2.icrc.status == 1").len(), 23);
    let both = t.fields(
        &pcap,
        &["rocev2.icrc", "infiniband.invariant.crc"],
        Some("frame.number == 1"),
    );
    assert_eq!(
        both[0][0], both[0][1],
        "the computed ICRC is the one on the wire"
    );
    assert_eq!(
        frames(&t, &pcap, "_ws.expert.message contains \"Bad ICRC\""),
        [24]
    );
    // The RoCEv2 flow's QP on its requests and its responses, for filters.
    assert_eq!(frames(&t, &pcap, "rocev2.analysis.qp == 0x20").len(), 24);
    // Info tags, as tshark's summary lines show the Info column (4.4 and
    // 4.6 fill `-e _ws.col.Info` before post-dissectors run; the summary
    // and the GUI show the whole column).
    let filter =
        "frame.number == 8 || frame.number == 16 || frame.number == 22 || frame.number == 24";
    let lines = t.ok(&["-n", "-r", pcap.to_str().unwrap(), "-Y", filter]);
    let lines: Vec<&str> = lines.lines().collect();
    assert_eq!(lines.len(), 4, "{lines:?}");
    for (line, tag) in lines.iter().zip([
        "[Go-Back-N Retransmission]",
        "[Duplicate]",
        "[PSN Gap]",
        "[Bad ICRC]",
    ]) {
        assert!(line.contains(tag), "{line} lacks {tag}");
    }
    // The same on a second pass.
    let two = t.fields_with(
        &pcap,
        &["frame.number"],
        Some("rocev2.analysis.go_back_n"),
        &["-2"],
    );
    assert_eq!(two, [["8"], ["9"], ["10"], ["14"]]);
}

#[test]
fn rc_lint_findings_are_expert_infos() {
    let t = Tshark::new();
    let pcap = script_pcap(&t);
    // The retry 16 us after an RNR NAK of 30 us; two CNPs 31 us apart.
    assert_eq!(frames(&t, &pcap, "rocev2.lint.rc_req_003"), [14]);
    assert_eq!(frames(&t, &pcap, "rocev2.lint.rc_cnp_001"), [23]);
    assert!(frames(&t, &pcap, "rocev2.lint").contains(&14));
    let text = t.fields(&pcap, &["_ws.expert.message"], Some("frame.number == 14"));
    assert!(text[0][0].contains("[RC-REQ-003]"), "{text:?}");
    let off = t.fields_with(
        &pcap,
        &["frame.number"],
        Some("rocev2.lint"),
        &["-o", "metaroce.lint:FALSE"],
    );
    assert!(off.is_empty(), "{off:?}");
}

#[test]
fn the_preference_turns_it_off() {
    let t = Tshark::new();
    let pcap = script_pcap(&t);
    let off = t.fields_with(
        &pcap,
        &["frame.number"],
        Some("rocev2"),
        &["-o", "rocev2.analyze:FALSE"],
    );
    assert!(off.is_empty(), "{off:?}");
    // The InfiniBand dissector still decodes every frame.
    assert_eq!(frames(&t, &pcap, "infiniband").len(), 24);
}

/// The report's numbers, per RoCEv2 flow (by its first frame).
#[derive(Debug, Default, PartialEq, Eq, Clone)]
struct FlowCounts {
    key: String,
    data_packets: u64,
    retransmissions: u64,
    fast: u64,
    timeout: u64,
    spurious: u64,
    naks: u64,
    rnr_naks: u64,
    cnps: u64,
    ce_marked: u64,
    read_response_packets: u64,
    messages_completed: u64,
}

fn report_flows(pcap: &Path) -> BTreeMap<u64, FlowCounts> {
    let out = Command::new(common::cli())
        .args(["report", "--json"])
        .arg(pcap)
        .output()
        .expect("running metaroce-analyze report --json");
    assert!(
        matches!(out.status.code(), Some(0 | 2)),
        "metaroce-analyze report failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("report JSON");
    let n = |f: &serde_json::Value, k: &str| f[k].as_u64().unwrap_or_else(|| panic!("{k} in {f}"));
    json["rocev2"]
        .as_array()
        .expect("rocev2 flows")
        .iter()
        .map(|f| {
            (
                n(f, "first_frame"),
                FlowCounts {
                    key: format!(
                        "{} {} 0x{:x}",
                        f["src"].as_str().unwrap(),
                        f["dst"].as_str().unwrap(),
                        n(f, "dest_qp")
                    ),
                    data_packets: n(f, "data_packets"),
                    retransmissions: n(f, "retransmissions"),
                    fast: n(f, "fast_retransmissions"),
                    timeout: n(f, "timeout_retransmissions"),
                    spurious: n(f, "spurious_retransmissions"),
                    naks: n(f, "naks"),
                    rnr_naks: n(f, "rnr_naks"),
                    cnps: n(f, "cnps"),
                    ce_marked: n(f, "ce_marked"),
                    read_response_packets: n(f, "read_response_packets"),
                    messages_completed: n(f, "messages_completed"),
                },
            )
        })
        .collect()
}

/// The same numbers counted from the plugin's fields, per flow (keyed by
/// the flow's first frame, as the report does).
fn plugin_flows(t: &Tshark, pcap: &Path) -> BTreeMap<u64, FlowCounts> {
    let fields = [
        "frame.number",
        "rocev2.analysis.flow",
        "ip.src",
        "ip.dst",
        "rocev2.analysis.qp",
        "rocev2.analysis.expected_psn",
        "rocev2.analysis.retransmission.kind",
        "rocev2.analysis.nak.syndrome",
        "rocev2.analysis.messages_completed",
        "rocev2.analysis.read.response",
    ];
    // Markers print no value: the frames with them, by filter.
    let marked = |filter: &str| -> Vec<u64> { frames(t, pcap, filter) };
    let cnp = marked("rocev2.analysis.cnp");
    let ce = marked("rocev2.analysis.ce_marked");
    let rows = t.fields(pcap, &fields, Some("rocev2.analysis.flow"));
    let mut first: BTreeMap<u64, u64> = BTreeMap::new();
    let mut by_flow: BTreeMap<u64, FlowCounts> = BTreeMap::new();
    for r in &rows {
        let frame: u64 = r[0].parse().unwrap();
        let flow: u64 = r[1].parse().unwrap();
        let c = by_flow.entry(flow).or_default();
        if let std::collections::btree_map::Entry::Vacant(e) = first.entry(flow) {
            // A flow's first frame is its first request.
            e.insert(frame);
            let qp = u64::from_str_radix(r[4].trim_start_matches("0x"), 16).unwrap();
            c.key = format!("{} {} 0x{qp:x}", r[2], r[3]);
            c.data_packets += 1;
        }
        c.data_packets += u64::from(!r[5].is_empty());
        match r[6].as_str() {
            "" => {}
            kind => {
                c.retransmissions += 1;
                match kind {
                    "fast" => c.fast += 1,
                    "timeout" => c.timeout += 1,
                    "spurious" => c.spurious += 1,
                    other => panic!("kind {other}"),
                }
            }
        }
        if !r[7].is_empty() {
            let s = u8::from_str_radix(r[7].trim_start_matches("0x"), 16).unwrap();
            match (s >> 5) & 3 {
                1 => c.rnr_naks += 1,
                3 => c.naks += 1,
                _ => {}
            }
        }
        c.messages_completed += r[8].parse::<u64>().unwrap_or(0);
        c.read_response_packets += u64::from(!r[9].is_empty());
        c.cnps += u64::from(cnp.contains(&frame));
        c.ce_marked += u64::from(ce.contains(&frame));
    }
    by_flow
        .into_iter()
        .map(|(flow, c)| (first[&flow], c))
        .collect()
}

#[test]
fn the_numbers_are_the_reports_on_the_script_and_the_real_captures() {
    let t = Tshark::new();
    let mut captures = vec![script_pcap(&t)];
    captures.extend(real_captures().iter().map(|p| copy_in(&t, p)));
    let mut flows = 0;
    for pcap in &captures {
        let report = report_flows(pcap);
        let plugin = plugin_flows(&t, pcap);
        assert_eq!(plugin, report, "{}", pcap.display());
        flows += report.len();
    }
    assert!(flows >= 4, "only {flows} RoCEv2 flows compared");
}

#[test]
fn the_stats_tree_counts_per_qp() {
    let t = Tshark::new();
    let pcap = script_pcap(&t);
    let out = t.ok(&[
        "-n",
        "-q",
        "-r",
        pcap.to_str().unwrap(),
        "-z",
        "rocev2,tree",
    ]);
    let count = |label: &str| -> u64 {
        let line = out
            .lines()
            .find(|l| l.trim_start().starts_with(label))
            .unwrap_or_else(|| panic!("no {label} in\n{out}"));
        line.trim_start()[label.len()..]
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    assert_eq!(count("10.0.0.1 -> 10.0.0.2 QP 0x000020"), 24, "{out}");
    assert_eq!(count("Retransmissions"), 5, "{out}");
    assert_eq!(count("Duplicates"), 1);
    assert_eq!(count("PSN gaps"), 1);
    assert_eq!(count("NAKs"), 1);
    assert_eq!(count("RNR NAKs"), 1);
    assert_eq!(count("CNPs"), 2);
    assert_eq!(count("CE-marked"), 1);
    assert_eq!(count("Bad ICRC"), 1);
}

/// A `tshark -T json` packet without what the plugin adds: the `rocev2`
/// (and `metaroce`) layers, and the `rocev2` in `frame.protocols`.
fn without_ours(mut packet: serde_json::Value) -> serde_json::Value {
    let layers = &mut packet["_source"]["layers"];
    if let Some(map) = layers.as_object_mut() {
        map.remove("rocev2");
        map.remove("metaroce");
    }
    if let Some(p) = layers["frame"]["frame.protocols"].as_str() {
        let p = p.replace(":rocev2", "");
        layers["frame"]["frame.protocols"] = p.into();
    }
    packet
}

#[test]
fn the_infiniband_dissector_is_unchanged() {
    let with = Tshark::new();
    let without = Tshark::new();
    // The same Wireshark without the plugin.
    let so = without
        .dir
        .path()
        .join("plugins")
        .join(common::tshark_version())
        .join("epan")
        .join("libmetaroce_dissector.so");
    std::fs::remove_file(&so).unwrap();
    let mut captures = vec![script_pcap(&with)];
    captures.extend(real_captures().iter().map(|p| copy_in(&with, p)));
    for pcap in &captures {
        let copy = copy_in(&without, pcap);
        let json = |t: &Tshark, p: &Path| -> Vec<serde_json::Value> {
            let out = t.ok(&["-n", "-r", p.to_str().unwrap(), "-T", "json"]);
            serde_json::from_str::<Vec<serde_json::Value>>(&out).expect("tshark -T json")
        };
        let a: Vec<_> = json(&with, pcap).into_iter().map(without_ours).collect();
        let b = json(&without, &copy);
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(x, y, "{}", pcap.display());
        }
        if !pcap.ends_with("srinivaskoritala_infiniband.pcap") {
            let ours = json(&with, pcap)
                .iter()
                .filter(|p| p["_source"]["layers"].get("rocev2").is_some())
                .count();
            assert!(ours > 0, "no rocev2 layer in {}", pcap.display());
        }
    }
}

#[test]
fn bad_input_breaks_nothing_and_the_next_frame_is_analysed() {
    let t = Tshark::new();
    // Frame 9 (a go-back-N resend) cut inside its BTH, frame 20 cut by a
    // snaplen inside its payload: neither stops the analysis of the next.
    let mut script = roce::script();
    script[8].truncate(14 + 20 + 8 + 6);
    script[19].truncate(80);
    let cut = common::write_pcap(&t, "cut.pcap", &script);
    let rows = t.fields(&cut, &["frame.number"], Some("rocev2.analysis.go_back_n"));
    assert_eq!(rows, [["8"], ["10"], ["14"]]);
    assert_eq!(frames(&t, &cut, "rocev2.analysis.read.complete"), [21]);
    t.ok(&[
        "-n",
        "-r",
        cut.to_str().unwrap(),
        "-V",
        "-2",
        "--disable-protocol",
        "rpcordma",
    ]);

    // The real captures, corrupted copies (editcap -E 0.05, 8 seeds each)
    // and copies cut to 60 bytes a frame, merged into one capture, with
    // every field printed, on one pass and two, aborting on a dissector bug.
    let mut originals = real_captures()
        .iter()
        .map(|p| copy_in(&t, p))
        .collect::<Vec<_>>();
    originals.push(script_pcap(&t));
    let mut inputs = originals.clone();
    for (i, pcap) in originals.iter().enumerate() {
        for seed in 0..8 {
            let out = t.path(&format!("corrupt-{i}-{seed}.pcap"));
            editcap(&t, &["-E", "0.05", "--seed", &seed.to_string()], pcap, &out);
            inputs.push(out);
        }
        let snap = t.path(&format!("snap-{i}.pcap"));
        editcap(&t, &["-s", "60"], pcap, &snap);
        inputs.push(snap);
    }
    let all = t.path("all.pcapng");
    let status = Command::new("mergecap")
        .args(["-a", "-F", "pcapng", "-w"])
        .arg(&all)
        .args(&inputs)
        .status()
        .expect("mergecap is installed (scripts/setup.sh)");
    assert!(status.success(), "mergecap failed");
    t.share(&all);
    let p = all.to_str().unwrap();
    t.ok(&["-n", "-r", p, "-V"]);
    t.ok(&["-n", "-r", p, "-2", "-V", "--disable-protocol", "rpcordma"]);
    let analysed = frames(&t, &all, "rocev2.analysis.flow").len();
    assert!(analysed > 500, "only {analysed} frames analysed");
}

/// The host's editcap (Wireshark's tools) from `input` to `output`.
fn editcap(t: &Tshark, args: &[&str], input: &Path, output: &Path) {
    let status = Command::new("editcap")
        .args(args)
        .arg(input)
        .arg(output)
        .status()
        .expect("editcap is installed (scripts/setup.sh)");
    assert!(status.success(), "editcap {args:?} failed");
    t.share(output);
}
