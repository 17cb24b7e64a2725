//! tshark with the plugin (and `WIRESHARK_ABORT_ON_DISSECTOR_BUG=1`) over
//! corrupted and random input: it must exit 0 and report no dissector bug.
//! The heuristic must not take anything that is not MetaRoCE: real RoCEv2
//! captures, DNS, random UDP payloads.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use proto_parse::capture::PcapWriter;
use proto_parse::metaroce::udp_source_port;

/// Frames of the fixture with varied field values (PSN, ev, payload).
fn varied_fixture(copies: u32) -> Vec<Vec<u8>> {
    let mut rng = Rng(0x5eed);
    let mut out = Vec::new();
    for _ in 0..copies {
        for f in fixture_frames() {
            let mut f = f;
            // Vary the PSN and tx_ts (bytes 42+16..42+24) and re-emit the CRC
            // only where the packet has none: keep the fixture's statuses.
            let psn = (rng.next() as u32).to_be_bytes();
            if f[42 + 1] & 0x04 == 0 {
                f[42 + 16..42 + 20].copy_from_slice(&psn);
            }
            out.push(f);
        }
    }
    out
}

fn tshark_fields_count(t: &Tshark, pcap: &Path, filter: Option<&str>, extra: &[&str]) -> usize {
    t.fields_with(pcap, &["frame.number"], filter, extra).len()
}

/// Runs tshark -V over `pcap` and checks that it exits 0 and reports no
/// dissector bug. Every packet is dissected into a visible tree (labels and
/// all), but only the first is printed: with
/// `WIRESHARK_ABORT_ON_DISSECTOR_BUG=1` a bug in any packet aborts tshark,
/// and printing a hundred thousand trees would only fill memory.
fn full_tree_ok(t: &Tshark, pcap: &Path) {
    let out_path = t.path("verbose.txt");
    let out = t.run(&[
        "-n",
        "-V",
        "-r",
        pcap.to_str().unwrap(),
        "-Y",
        "frame.number == 1",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    std::fs::write(&out_path, stdout.as_bytes()).unwrap();
    assert!(
        out.status.success(),
        "tshark -V crashed on {} ({:?}): {stderr}",
        pcap.display(),
        out.status
    );
    assert!(
        !stdout.contains("[Dissector bug") && !stderr.contains("[Dissector bug"),
        "dissector bug reported on {}",
        pcap.display()
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

fn editcap(input: &Path, output: &Path, seed: u32) {
    let status = Command::new("editcap")
        .args(["-E", "0.02", "--seed", &seed.to_string()])
        .arg(input)
        .arg(output)
        .status()
        .expect("editcap is installed (wireshark tools)");
    assert!(status.success(), "editcap failed");
}

fn mergecap(inputs: &[PathBuf], output: &Path) {
    let status = Command::new("mergecap")
        .arg("-a")
        .arg("-F")
        .arg("pcap")
        .arg("-w")
        .arg(output)
        .args(inputs)
        .status()
        .expect("mergecap is installed");
    assert!(status.success(), "mergecap failed");
}

#[test]
fn editcap_corrupted_fixtures_never_crash_tshark() {
    // 84 seeds of 1,200 frames: 100,800 packets tried.
    const SEEDS: u32 = 84;
    let t = Tshark::new();
    let frames = varied_fixture(100);
    let clean = write_pcap(&t, "clean.pcap", &frames);
    let corrupted: Vec<PathBuf> = (1..=SEEDS)
        .map(|seed| {
            let out = t.path(&format!("corrupt-{seed}.pcap"));
            editcap(&clean, &out, seed);
            out
        })
        .collect();
    let all = t.path("corrupted.pcap");
    mergecap(&corrupted, &all);
    t.share(&all);

    full_tree_ok(&t, &all);
    let total = tshark_fields_count(&t, &all, None, &[]);
    let reached = tshark_fields_count(&t, &all, Some("metaroce"), &[]);
    let malformed = tshark_fields_count(
        &t,
        &all,
        Some("metaroce.malformed || metaroce.crc.bad"),
        &[],
    );
    println!(
        "editcap -E 0.02, {SEEDS} seeds: {total} packets, {reached} dissected as MetaRoCE, \
         {malformed} malformed or bad CRC, 0 crashes, 0 dissector bugs"
    );
    assert_eq!(total, frames.len() * SEEDS as usize);
    assert!(total >= 100_000, "{total} packets tried");
    assert!(
        reached > total / 2,
        "most corrupted frames still reach the dissector"
    );
    assert!(malformed > 0);
}

/// Random and mutated UDP payloads to port 4794, some cut by a snaplen.
fn random_frames(n: usize, seed: u64) -> Vec<(Vec<u8>, u32)> {
    let mut rng = Rng(seed);
    let valid: Vec<Vec<u8>> = fixture_frames()
        .into_iter()
        .map(|f| f[42..].to_vec())
        .collect();
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let payload: Vec<u8> = match i % 5 {
            // Pure noise.
            0 => (0..rng.below(300)).map(|_| rng.next() as u8).collect(),
            // A valid packet with a few bytes changed.
            1 | 2 => {
                let mut p = valid[rng.below(valid.len() as u64) as usize].clone();
                for _ in 0..=rng.below(4) {
                    let at = rng.below(p.len() as u64) as usize;
                    p[at] = rng.next() as u8;
                }
                p
            }
            // Version 1, a random type, flags and hlen, random rest (TLVs).
            3 => {
                let len = 24 + rng.below(200) as usize;
                let mut p: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
                p[0] = 0x10 | (rng.below(16) as u8);
                p[1] |= 0x08; // EXT
                p[2] = (rng.below(len as u64 / 4 + 2)) as u8;
                p
            }
            // A valid packet cut short or with bytes appended.
            _ => {
                let mut p = valid[rng.below(valid.len() as u64) as usize].clone();
                if rng.below(2) == 0 {
                    p.truncate(rng.below(p.len() as u64) as usize);
                } else {
                    p.extend((0..rng.below(9)).map(|_| rng.next() as u8));
                }
                p
            }
        };
        let ev = rng.next() as u16;
        let frame = udp_frame(&payload, udp_source_port(ev), PORT, rng.below(2) == 0);
        // One frame in 7 is cut by a snaplen (orig_len stays the wire length).
        let orig = frame.len() as u32;
        out.push((frame, orig));
    }
    out
}

/// Writes the frames, one in 7 cut by a random snaplen; returns the pcap and
/// how many frames have a non-empty captured UDP payload.
fn write_cut_pcap(
    t: &Tshark,
    name: &str,
    frames: &[(Vec<u8>, u32)],
    seed: u64,
) -> (PathBuf, usize) {
    let mut rng = Rng(seed);
    let mut with_payload = 0;
    let path = t.path(name);
    let mut w = PcapWriter::create(&path).unwrap();
    for (i, (frame, orig)) in frames.iter().enumerate() {
        let data = if rng.below(7) == 0 {
            &frame[..(42 + rng.below(frame.len() as u64 - 41) as usize).min(frame.len())]
        } else {
            &frame[..]
        };
        with_payload += usize::from(data.len() > 42);
        w.write_frame_with_len(i as u64 * 1000, data, *orig)
            .unwrap();
    }
    w.flush().unwrap();
    drop(w);
    t.share(&path);
    (path, with_payload)
}

#[test]
fn random_and_mutated_packets_on_port_4794_never_crash_tshark() {
    const N: usize = 30_000;
    let t = Tshark::new();
    let frames = random_frames(N, 0xC0FFEE);
    let (pcap, with_payload) = write_cut_pcap(&t, "random.pcap", &frames, 7);
    full_tree_ok(&t, &pcap);
    // Filters over every field kind, and the CRC check turned off.
    let hits = tshark_fields_count(
        &t,
        &pcap,
        Some(
            "metaroce.psn > 5 || metaroce.tlv.type || metaroce.ack.sack_ranges contains \"-\" \
             || metaroce.data.remote_va == 0 || metaroce.analysis.trimmed",
        ),
        &["-o", "metaroce.check_crc:FALSE"],
    );
    let dissected = tshark_fields_count(&t, &pcap, Some("metaroce"), &[]);
    let malformed = tshark_fields_count(&t, &pcap, Some("metaroce.malformed"), &[]);
    println!(
        "random/mutated: {N} packets to port {PORT}, {dissected} dissected, {malformed} malformed, \
         {hits} matched a mixed filter, 0 crashes, 0 dissector bugs"
    );
    // UDP hands every payload of which at least one byte is captured to
    // the port's dissector.
    assert_eq!(dissected, with_payload);
    assert!(malformed > N / 5);
}

/// A DNS query and response for example.com (hand-assembled).
fn dns_payloads() -> Vec<Vec<u8>> {
    let name: &[u8] = b"\x07example\x03com\x00";
    let mut query = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
    query.extend_from_slice(name);
    query.extend_from_slice(&[0, 1, 0, 1]);
    let mut resp = vec![0x12, 0x34, 0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0];
    resp.extend_from_slice(name);
    resp.extend_from_slice(&[0, 1, 0, 1]);
    resp.extend_from_slice(&[
        0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0x0e, 0x10, 0, 4, 93, 184, 216, 34,
    ]);
    vec![query, resp]
}

#[test]
fn heuristic_does_not_misfire_on_real_rocev2_dns_or_random_udp() {
    let t = Tshark::new();
    // Run every UDP heuristic before the port tables, so the heuristic sees
    // RoCEv2 (4791), DNS (53) and everything else.
    let heur_first = ["-o", "udp.try_heuristic_first:TRUE"];

    let real = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/real");
    let mut real_packets = 0;
    for entry in std::fs::read_dir(&real).expect("the real captures folder") {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "pcap") {
            let copy = t.path(path.file_name().unwrap().to_str().unwrap());
            std::fs::copy(&path, &copy).unwrap();
            t.share(&copy);
            real_packets += tshark_fields_count(&t, &copy, None, &heur_first);
            let taken = tshark_fields_count(&t, &copy, Some("metaroce"), &heur_first);
            assert_eq!(taken, 0, "the heuristic took frames of {}", path.display());
            let ib = tshark_fields_count(&t, &copy, Some("infiniband"), &heur_first);
            println!(
                "{}: {ib} InfiniBand frames, 0 taken as MetaRoCE",
                path.display()
            );
        }
    }
    assert!(real_packets > 100, "the real captures were read");

    // DNS both ways, and random UDP payloads on random ports, 1/4 of them
    // sent from a port that would match their bytes 4..6 as an ev.
    let mut rng = Rng(0xD15EA5E);
    let mut frames = Vec::new();
    for _ in 0..200 {
        for (i, p) in dns_payloads().iter().enumerate() {
            let (s, d) = if i == 0 { (40000, 53) } else { (53, 40000) };
            frames.push(udp_frame(p, s, d, i == 0));
        }
    }
    for i in 0..20_000 {
        let len = rng.below(200) as usize;
        let mut p: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        if i % 2 == 0 && len > 0 {
            p[0] = 0x10 | (p[0] & 0x0F); // version 1: the first check passes
        }
        let sport = if i % 4 == 0 && len >= 6 {
            udp_source_port(u16::from_be_bytes([p[4], p[5]]))
        } else {
            1024 + rng.below(60000) as u16
        };
        let dport = 1024 + rng.below(60000) as u16;
        // Never the MetaRoCE port itself (either way): the port table, not
        // the heuristic, would take those.
        let avoid = |port: u16| if port == PORT { PORT + 1 } else { port };
        frames.push(udp_frame(&p, avoid(sport), avoid(dport), true));
    }
    let pcap = write_pcap(&t, "noise.pcap", &frames);
    let total = tshark_fields_count(&t, &pcap, None, &heur_first);
    let taken = tshark_fields_count(&t, &pcap, Some("metaroce"), &heur_first);
    let dns = tshark_fields_count(&t, &pcap, Some("dns"), &heur_first);
    let taken_any_port = tshark_fields_count(
        &t,
        &pcap,
        Some("metaroce"),
        &[
            "-o",
            "udp.try_heuristic_first:TRUE",
            "-o",
            "metaroce.heuristic_source_port:FALSE",
        ],
    );
    println!(
        "heuristic: {real_packets} real frames and {total} DNS/random UDP frames, {dns} DNS, \
         {taken} taken ({taken_any_port} without the source-port check)"
    );
    assert_eq!(total, frames.len());
    assert_eq!(dns, 400);
    if taken > 0 {
        let shown = t.ok(&[
            "-n",
            "-r",
            pcap.to_str().unwrap(),
            "-Y",
            "metaroce",
            "-V",
            "-x",
            "-o",
            "udp.try_heuristic_first:TRUE",
        ]);
        panic!("the heuristic took {taken} frames:\n{shown}");
    }
    assert_eq!(taken_any_port, 0);
}

#[test]
fn a_panic_is_reported_as_a_dissector_bug_not_a_crash() {
    let t = Tshark::new();
    let pcap = write_pcap(&t, "fixture.pcap", &fixture_frames());
    let pcap = pcap.to_str().unwrap();
    // Without WIRESHARK_ABORT_ON_DISSECTOR_BUG: every frame shows the bug,
    // tshark goes on and exits 0.
    let out = t.run_env(&["METAROCE_DISSECTOR_TEST_PANIC=1"], &["-n", "-r", pcap]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    let bugs = stdout
        .lines()
        .filter(|l| {
            l.contains("[Dissector bug, protocol MetaRoCE: MetaRoCE dissector panicked: test panic")
        })
        .count();
    assert_eq!(bugs, 12, "{stdout}");
    // With it, tshark aborts: what every other test would see on a bug.
    let out = t.run_env(
        &[
            "METAROCE_DISSECTOR_TEST_PANIC=1",
            "WIRESHARK_ABORT_ON_DISSECTOR_BUG=1",
        ],
        &["-n", "-r", pcap],
    );
    assert!(!out.status.success(), "tshark should abort: {out:?}");
}
