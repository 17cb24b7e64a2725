//! The export's columns for the fabric-wide analysis (`cluster/`): tx_ts,
//! type codes, the capture point's host, HOP_TELEMETRY entries as lists,
//! and the `captures` table, read back with polars. Expected values are
//! those the fixtures generator emits (`fixtures/generator/src/catalogue.rs`:
//! frame 5 of `all_types.pcap` carries two hops) and its hand-checked
//! field list (`all_types.expected.jsonl`).
#![cfg(feature = "export")]

mod common;

use common::fixture;

use std::fs::File;
use std::path::Path;
use std::process::Command;

use polars::prelude::*;
use serde_json::Value;

fn export(dir: &Path) {
    let out = Command::new(env!("CARGO_BIN_EXE_metaroce-analyze"))
        .args(["export", "--no-progress", "--parquet"])
        .arg(dir.join("pq"))
        .arg("--csv")
        .arg(dir.join("csv"))
        .arg(fixture("all_types.pcap"))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn parquet(dir: &Path, table: &str) -> DataFrame {
    let path = dir.join(format!("pq/table={table}/host=all_types/part-0.parquet"));
    ParquetReader::new(File::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .finish()
        .unwrap()
}

fn list_at(df: &DataFrame, name: &str, row: usize) -> Option<Vec<u64>> {
    let s = df
        .column(name)
        .unwrap()
        .list()
        .unwrap()
        .get_as_series(row)?;
    let s = s.cast(&DataType::UInt64).unwrap();
    let values = s.u64().unwrap();
    Some((0..values.len()).map(|i| values.get(i).unwrap()).collect())
}

#[test]
fn packets_carry_tx_ts_type_codes_host_and_hop_telemetry() {
    let dir = tempfile::tempdir().unwrap();
    export(dir.path());
    let packets = parquet(dir.path(), "packets");
    let expected: Vec<Value> = std::fs::read_to_string(fixture("all_types.expected.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let frames = packets.column("frame").unwrap().u64().unwrap().clone();
    let tx_ts = packets.column("tx_ts").unwrap().u32().unwrap().clone();
    let type_code = packets.column("type_code").unwrap().u8().unwrap().clone();
    let host = packets
        .column("capture_host")
        .unwrap()
        .str()
        .unwrap()
        .clone();
    let mut with_hops = Vec::new();
    for row in 0..packets.height() {
        let frame = frames.get(row).unwrap();
        let e = &expected[frame as usize - 1];
        assert_eq!(host.get(row), Some("all_types"));
        if e["proto"] == "metaroce" {
            let fields = &e["fields"];
            assert_eq!(
                tx_ts.get(row).map(u64::from),
                fields["metaroce.tx_ts"].as_u64(),
                "frame {frame}"
            );
            assert_eq!(
                type_code.get(row).map(u64::from),
                fields["metaroce.type"].as_u64(),
                "frame {frame}"
            );
        } else {
            assert_eq!(tx_ts.get(row), None, "frame {frame}: no tx_ts in RoCEv2");
        }
        if let Some(ids) = list_at(&packets, "hop_switch_id", row) {
            with_hops.push((frame, ids));
        }
    }
    assert_eq!(with_hops, vec![(5, vec![0x5101, 0x5202])]);
    let row = (0..packets.height())
        .find(|&r| frames.get(r) == Some(5))
        .unwrap();
    assert_eq!(list_at(&packets, "hop_queue_depth", row), Some(vec![12, 0]));
    assert_eq!(
        list_at(&packets, "hop_latency_ns", row),
        Some(vec![850, 410])
    );

    // CSV: the lists as numbers separated by spaces.
    let csv = std::fs::read_to_string(
        dir.path()
            .join("csv/table=packets/host=all_types/part-0.csv"),
    )
    .unwrap();
    assert!(
        csv.contains("20737 20994"),
        "switch ids 0x5101 0x5202 in the CSV"
    );
}

#[test]
fn the_captures_table_tells_a_complete_export() {
    let dir = tempfile::tempdir().unwrap();
    export(dir.path());
    let packets = parquet(dir.path(), "packets");
    let captures = parquet(dir.path(), "captures");
    assert_eq!(captures.height(), 1);
    let get = |name: &str| {
        captures
            .column(name)
            .unwrap()
            .u64()
            .unwrap()
            .get(0)
            .unwrap()
    };
    assert_eq!(get("frames"), 25, "every frame of all_types.pcap");
    assert_eq!(get("packets_exported"), packets.height() as u64);
    let ts = packets.column("ts_ns").unwrap().u64().unwrap();
    assert_eq!(get("first_ts_ns"), ts.min().unwrap());
    assert_eq!(get("last_ts_ns"), ts.max().unwrap());
}
