//! `metaroce-analyze export`: Parquet and CSV tables read back with polars
//! and checked against the HAND-WRITTEN expectations of the scripted
//! captures (`fixtures/generated/multipath_loss.expected.json`).
#![cfg(feature = "export")]

mod common;

use common::{expected, fixture};

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;

use polars::prelude::*;

fn export(dir: &Path) {
    let out = Command::new(env!("CARGO_BIN_EXE_metaroce-analyze"))
        .arg("export")
        .arg("--parquet")
        .arg(dir.join("pq"))
        .arg("--csv")
        .arg(dir.join("csv"))
        .arg(fixture("multipath_loss_sender.pcap"))
        .arg(fixture("multipath_loss_receiver.pcap"))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn parquet(path: PathBuf) -> DataFrame {
    ParquetReader::new(File::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .finish()
        .unwrap()
}

fn csv(path: PathBuf) -> DataFrame {
    CsvReadOptions::default()
        .with_has_header(true)
        .try_into_reader_with_file_path(Some(path))
        .unwrap()
        .finish()
        .unwrap()
}

fn table(dir: &Path, table: &str, host: &str) -> DataFrame {
    parquet(dir.join(format!("pq/table={table}/host={host}/part-0.parquet")))
}

fn u64s(df: &DataFrame, name: &str) -> Vec<Option<u64>> {
    let c = df.column(name).unwrap().cast(&DataType::UInt64).unwrap();
    let ca = c.u64().unwrap();
    (0..ca.len()).map(|i| ca.get(i)).collect()
}

fn strs(df: &DataFrame, name: &str) -> Vec<Option<String>> {
    let c = df.column(name).unwrap();
    let ca = c.str().unwrap();
    (0..ca.len())
        .map(|i| ca.get(i).map(str::to_string))
        .collect()
}

#[test]
fn export_tables_match_hand_written_expectations() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    export(dir);
    let exp = expected();

    // packets: one row per MetaRoCE frame of each capture.
    let sender = table(dir, "packets", "multipath_loss_sender");
    let receiver = table(dir, "packets", "multipath_loss_receiver");
    assert_eq!(
        sender.height() as u64,
        exp["sender"]["frames"].as_u64().unwrap()
    );
    assert_eq!(
        receiver.height() as u64,
        exp["receiver"]["frames"].as_u64().unwrap()
    );

    for (df, side) in [(&sender, "sender"), (&receiver, "receiver")] {
        let want = &exp[side]["direction_a_to_b"];
        let types = strs(df, "type");
        let src = strs(df, "src");
        let data: Vec<usize> = (0..df.height())
            .filter(|&i| {
                types[i].as_deref() == Some("DATA") && src[i].as_deref() == Some("10.0.0.1")
            })
            .collect();
        assert_eq!(
            data.len() as u64,
            want["data_packets"].as_u64().unwrap(),
            "{side}"
        );
        let retx = strs(df, "retransmission");
        let n_retx = retx.iter().filter(|r| r.is_some()).count();
        assert_eq!(
            n_retx as u64,
            want["retransmissions"].as_u64().unwrap(),
            "{side}"
        );
        let spurious = retx
            .iter()
            .filter(|r| r.as_deref() == Some("spurious"))
            .count();
        assert_eq!(
            spurious as u64,
            want["spurious_retransmissions"].as_u64().unwrap(),
            "{side}"
        );
        let ooo = u64s(df, "out_of_order")
            .iter()
            .filter(|v| v.is_some())
            .count();
        assert_eq!(ooo as u64, want["out_of_order"].as_u64().unwrap(), "{side}");
        let trimmed = df
            .column("trimmed")
            .unwrap()
            .bool()
            .unwrap()
            .sum()
            .unwrap_or(0);
        assert_eq!(
            u64::from(trimmed),
            want["trimmed"].as_u64().unwrap(),
            "{side}"
        );
    }
    // The receiver's out-of-order PSNs, by hand: 1003 and 1006.
    let psn = u64s(&receiver, "psn");
    let ooo = u64s(&receiver, "out_of_order");
    let ooo_psns: Vec<u64> = (0..receiver.height())
        .filter(|&i| ooo[i].is_some())
        .map(|i| psn[i].unwrap())
        .collect();
    let want: Vec<u64> = exp["receiver"]["direction_a_to_b"]["out_of_order_psns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(ooo_psns, want);

    // Every ACK RTT sample at the sender, per packet (spec 11.9: the first
    // feedback echoing each DATA or PROBE transmission).
    let mut samples: Vec<u64> = u64s(&sender, "ack_rtt_ns").into_iter().flatten().collect();
    samples.sort_unstable();
    let want: Vec<u64> = exp["sender"]["direction_a_to_b"]["ack_rtt_samples_ns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(samples, want, "ack RTT samples");
    // Fabric RTT: ack RTT less the receiver's hold time T3 - T2.
    let mut fabric: Vec<u64> = u64s(&sender, "fabric_rtt_ns")
        .into_iter()
        .flatten()
        .collect();
    fabric.sort_unstable();
    let want: Vec<u64> = exp["sender"]["direction_a_to_b"]["fabric_rtt_samples_ns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(fabric, want, "fabric RTT samples");

    // messages: the sender's two WRITEs, acked after 60 us and 5.026 ms.
    let msgs = table(dir, "messages", "multipath_loss_sender");
    let view = strs(&msgs, "view");
    let lat = u64s(&msgs, "latency_ns");
    let mut acked: Vec<u64> = (0..msgs.height())
        .filter(|&i| view[i].as_deref() == Some("acked"))
        .map(|i| lat[i].unwrap())
        .collect();
    acked.sort_unstable();
    let w = &exp["sender"]["direction_a_to_b"]["msg_completion_ns"];
    assert_eq!(acked.len() as u64, w["count"].as_u64().unwrap());
    assert_eq!(acked[0], w["min"].as_u64().unwrap());
    assert_eq!(acked[acked.len() - 1], w["max"].as_u64().unwrap());
    assert!(
        strs(&msgs, "op")
            .iter()
            .all(|o| o.as_deref() == Some("write"))
    );

    // paths: DATA per ev of A->B at both capture points.
    for side in ["sender", "receiver"] {
        let paths = table(dir, "paths", &format!("multipath_loss_{side}"));
        let src = strs(&paths, "src");
        let ev = u64s(&paths, "ev");
        let data = u64s(&paths, "data_packets");
        let retx = u64s(&paths, "retransmissions");
        for w in exp[side]["direction_a_to_b"]["paths"].as_array().unwrap() {
            let i = (0..paths.height())
                .find(|&i| src[i].as_deref() == Some("10.0.0.1") && ev[i] == w["ev"].as_u64())
                .unwrap_or_else(|| panic!("{side}: no path {w}"));
            assert_eq!(data[i], w["data_packets"].as_u64(), "{side} {w}");
            assert_eq!(retx[i], w["retransmissions"].as_u64(), "{side} {w}");
        }
    }

    // CSV holds the same rows.
    let csv_sender = csv(dir.join("csv/table=packets/host=multipath_loss_sender/part-0.csv"));
    assert_eq!(csv_sender.height(), sender.height());
    assert_eq!(csv_sender.get_column_names(), sender.get_column_names());
}

#[test]
fn hive_partitions_read_together() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    export(dir);
    let packets = dir.join("pq/table=packets");
    let args = ScanArgsParquet {
        // No date inference of partition values (it needs dtype features).
        hive_options: HiveOptions {
            try_parse_dates: false,
            ..HiveOptions::new_enabled()
        },
        ..ScanArgsParquet::default()
    };
    let df = LazyFrame::scan_parquet(PlRefPath::from(packets.to_str().unwrap()), args)
        .unwrap()
        .group_by([col("host")])
        .agg([len().alias("n")])
        .sort(["host"], SortMultipleOptions::default())
        .collect()
        .unwrap();
    assert_eq!(
        strs(&df, "host"),
        [
            Some("multipath_loss_receiver".to_string()),
            Some("multipath_loss_sender".to_string())
        ]
    );
    assert_eq!(u64s(&df, "n"), [Some(30), Some(32)]);
}
