//! The `metaroce` tap's listeners, through tshark's `-z`: the stats tree
//! (Statistics > MetaRoCE in the GUI), and the conversation and endpoint
//! tables (Statistics > Conversations / Endpoints), keyed by the addresses
//! and the connection ids, on the two-host scenario's sender capture.

mod common;

use std::path::{Path, PathBuf};

use common::Tshark;

fn sender(t: &Tshark) -> PathBuf {
    let path = t.path("sender.pcap");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../fixtures/generated/multipath_loss_sender.pcap"),
        &path,
    )
    .unwrap();
    t.share(&path);
    path
}

fn z(t: &Tshark, pcap: &Path, stat: &str) -> String {
    t.ok(&["-n", "-q", "-r", pcap.to_str().unwrap(), "-z", stat])
}

fn count(t: &Tshark, pcap: &Path, filter: &str) -> usize {
    t.fields(pcap, &["frame.number"], Some(filter)).len()
}

/// The count column of the stats tree row `name` (indented by `depth`).
fn tree_count(tree: &str, name: &str, depth: usize) -> usize {
    let prefix = format!("{}{name} ", " ".repeat(depth));
    tree.lines()
        .find(|l| l.starts_with(&prefix))
        .and_then(|l| l[prefix.len()..].split_whitespace().next())
        .unwrap_or_else(|| panic!("no row {name:?} in the stats tree:\n{tree}"))
        .parse()
        .unwrap()
}

#[test]
fn stats_tree_counts_types_and_trouble() {
    let t = Tshark::new();
    let pcap = sender(&t);
    let tree = z(&t, &pcap, "metaroce,tree");
    assert_eq!(tree_count(&tree, "Packets by type", 0), 32);
    assert_eq!(tree_count(&tree, "DATA", 1), 13);
    assert_eq!(tree_count(&tree, "ACK", 1), 10);
    assert_eq!(tree_count(&tree, "NACK", 1), 2);
    assert_eq!(
        tree_count(&tree, "Retransmission", 1),
        count(&t, &pcap, "metaroce.analysis.retransmission")
    );
    assert_eq!(tree_count(&tree, "Retransmission", 1), 4);
    assert_eq!(
        tree_count(&tree, "Stall", 1),
        count(&t, &pcap, "metaroce.analysis.stall")
    );
    assert_eq!(
        tree_count(&tree, "Analysis and errors", 0),
        count(
            &t,
            &pcap,
            "metaroce.analysis.retransmission || metaroce.analysis.path_loss || \
             metaroce.analysis.stall || metaroce.malformed || metaroce.crc.bad"
        )
    );
}

/// The data rows of a `-z conv,...` / `-z endpoints,...` table.
fn table_rows(text: &str) -> Vec<Vec<String>> {
    text.lines()
        .filter(|l| l.starts_with("10.0.0."))
        .map(|l| l.split_whitespace().map(str::to_owned).collect())
        .collect()
}

#[test]
fn conversations_and_endpoints_are_keyed_by_connection_ids() {
    let t = Tshark::new();
    let pcap = sender(&t);
    let conv = z(&t, &pcap, "conv,metaroce");
    assert!(conv.contains("MetaRoCE Conversations"), "{conv}");
    let rows = table_rows(&conv);
    // One address pair, two connection-id pairs: the connection's 31
    // packets (0x100 <-> 0x200), and the opening CTRL, sent before the
    // peer's id is known (destination connection 0).
    assert_eq!(rows.len(), 2, "{conv}");
    let frames: Vec<usize> = rows
        .iter()
        .map(|r| {
            // "<-" frames, bytes (value and unit), "->" frames, ...: the
            // total frames are the column after the two directions.
            let numbers: Vec<usize> = r.iter().filter_map(|c| c.parse().ok()).collect();
            numbers[0] + numbers[2]
        })
        .collect();
    assert_eq!(frames.iter().sum::<usize>(), 32, "{conv}");
    assert!(
        frames.contains(&31) && frames.contains(&1),
        "{frames:?}\n{conv}"
    );
    assert_eq!(count(&t, &pcap, "metaroce.dst_conn == 0"), 1);

    let endpoints = z(&t, &pcap, "endpoints,metaroce");
    let rows = table_rows(&endpoints);
    // 10.0.0.1 with 0x100; 10.0.0.2 with 0x200 and with 0.
    assert_eq!(rows.len(), 3, "{endpoints}");
    assert_eq!(rows.iter().filter(|r| r[0] == "10.0.0.2").count(), 2);
}

/// "Apply as filter" on a conversation (either direction) filters by the
/// hidden `metaroce.conn`, which holds both connection ids of a packet.
#[test]
fn metaroce_conn_matches_either_connection_id() {
    let t = Tshark::new();
    let pcap = sender(&t);
    let rows = t.fields(
        &pcap,
        &["metaroce.src_conn", "metaroce.dst_conn"],
        Some("metaroce.type == 0"),
    );
    let (a, b) = (rows[0][0].clone(), rows[0][1].clone());
    let either = count(
        &t,
        &pcap,
        &format!("metaroce.src_conn == {a} || metaroce.dst_conn == {a}"),
    );
    assert!(either > 0);
    assert_eq!(count(&t, &pcap, &format!("metaroce.conn == {a}")), either);
    // A conversation, both ways: the filter the conversation table applies.
    let both = count(
        &t,
        &pcap,
        &format!("metaroce.conn == {a} && metaroce.conn == {b}"),
    );
    let pair = count(
        &t,
        &pcap,
        &format!(
            "(metaroce.src_conn == {a} && metaroce.dst_conn == {b}) || \
             (metaroce.src_conn == {b} && metaroce.dst_conn == {a})"
        ),
    );
    assert!(pair > 1);
    assert_eq!(both, pair);
    // Hidden: in the tree for filters, not shown in the packet details.
    let details = t.ok(&["-n", "-r", pcap.to_str().unwrap(), "-V", "-c", "1"]);
    assert!(details.contains("Source connection"), "{details}");
    assert!(!details.contains("Connection: "), "{details}");
}
