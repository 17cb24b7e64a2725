//! The plugin over the repository's own captures: `fixtures/generated`
//! (written by the fixture generator, with hand-written expectations) and
//! `fixtures/real` (public RoCEv2 captures). No dissector bug on any; the
//! malformed packets are reported at the layer and frame offset the
//! expectations name; the analysis counts of the multipath scenario match
//! the hand-written ones.

mod common;

use std::path::{Path, PathBuf};

use common::Tshark;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn shared_copy(t: &Tshark, path: &Path) -> PathBuf {
    let copy = t.path(path.file_name().unwrap().to_str().unwrap());
    std::fs::copy(path, &copy).unwrap();
    t.share(&copy);
    copy
}

#[test]
fn every_repository_capture_dissects_without_a_bug() {
    let t = Tshark::new();
    let mut files = 0;
    let mut frames = 0;
    for dir in ["fixtures/generated", "fixtures/real"] {
        let Ok(entries) = std::fs::read_dir(repo().join(dir)) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            if path
                .extension()
                .is_some_and(|e| e == "pcap" || e == "pcapng")
            {
                let copy = shared_copy(&t, &path);
                let out = t.ok(&["-n", "-V", "-r", copy.to_str().unwrap()]);
                frames += out.lines().filter(|l| l.starts_with("Frame ")).count();
                files += 1;
            }
        }
    }
    println!("{files} repository captures, {frames} frames: no dissector bug");
    assert!(files >= 4, "the repository captures were found");
}

/// `{"frame":1,...,"proto":"metaroce","error":{"layer":"metaroce","offset":42},...}`
fn expected_errors(path: &Path) -> Vec<(u64, Option<(String, u64)>)> {
    let text = std::fs::read_to_string(path).unwrap();
    let field = |line: &str, key: &str| -> Option<String> {
        let at = line.find(&format!("\"{key}\":"))? + key.len() + 3;
        let rest = &line[at..];
        let end = rest.find([',', '}']).unwrap_or(rest.len());
        Some(rest[..end].trim_matches('"').to_string())
    };
    text.lines()
        .filter(|l| l.contains("\"proto\":\"metaroce\""))
        .map(|l| {
            let frame = field(l, "frame").unwrap().parse().unwrap();
            let error = if l.contains("\"error\":null") {
                None
            } else {
                Some((
                    field(l, "layer").unwrap(),
                    field(l, "offset").unwrap().parse().unwrap(),
                ))
            };
            (frame, error)
        })
        .collect()
}

#[test]
fn malformed_fixture_errors_name_the_expected_layer_and_frame_offset() {
    let gen_dir = repo().join("fixtures/generated");
    let expected = expected_errors(&gen_dir.join("malformed.expected.jsonl"));
    assert!(expected.iter().filter(|(_, e)| e.is_some()).count() >= 8);
    let t = Tshark::new();
    let pcap = shared_copy(&t, &gen_dir.join("malformed.pcap"));
    let rows = t.fields(
        &pcap,
        &["frame.number", "_ws.expert.message"],
        Some("metaroce.malformed || metaroce.capture_truncated"),
    );
    for (frame, error) in &expected {
        let row = rows.iter().find(|r| r[0] == frame.to_string());
        match error {
            Some((layer, offset)) => {
                let row = row.unwrap_or_else(|| panic!("frame {frame} not flagged malformed"));
                let prefix = format!("{layer} at byte {offset}:");
                assert!(
                    row[1].split(',').any(|m| m.starts_with(&prefix)),
                    "frame {frame}: expected {prefix:?}, got {:?}",
                    row[1]
                );
            }
            None => assert!(row.is_none(), "frame {frame} flagged: {row:?}"),
        }
    }
}

fn count(t: &Tshark, pcap: &Path, filter: &str) -> usize {
    t.fields(pcap, &["frame.number"], Some(filter)).len()
}

#[test]
fn multipath_scenario_analysis_matches_the_hand_written_counts() {
    let gen_dir = repo().join("fixtures/generated");
    let t = Tshark::new();
    // Counts from fixtures/generated/multipath_loss.expected.json (direction
    // A to B; the only DATA direction of the scenario).
    let sender = shared_copy(&t, &gen_dir.join("multipath_loss_sender.pcap"));
    assert_eq!(count(&t, &sender, "metaroce"), 32);
    assert_eq!(count(&t, &sender, "metaroce.type == 0"), 13);
    assert_eq!(count(&t, &sender, "metaroce.analysis.retransmission"), 4);
    assert_eq!(
        count(&t, &sender, "metaroce.analysis.spurious_retransmission"),
        1
    );
    assert_eq!(count(&t, &sender, "metaroce.analysis.out_of_order"), 0);

    let receiver = shared_copy(&t, &gen_dir.join("multipath_loss_receiver.pcap"));
    assert_eq!(count(&t, &receiver, "metaroce"), 30);
    assert_eq!(count(&t, &receiver, "metaroce.type == 0"), 11);
    assert_eq!(count(&t, &receiver, "metaroce.analysis.retransmission"), 4);
    assert_eq!(
        count(&t, &receiver, "metaroce.analysis.spurious_retransmission"),
        1
    );
    assert_eq!(count(&t, &receiver, "metaroce.analysis.out_of_order"), 2);
    assert_eq!(count(&t, &receiver, "metaroce.analysis.trimmed"), 1);
    assert_eq!(
        count(
            &t,
            &receiver,
            "metaroce.analysis.ce_marked && metaroce.type == 0"
        ),
        1
    );
    assert_eq!(count(&t, &receiver, "metaroce.malformed"), 0);
}
