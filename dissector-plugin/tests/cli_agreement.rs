//! The plugin and `metaroce-analyze decode --json` agree: on the
//! repository's generated captures, every MetaRoCE field the CLI prints as
//! a number or a boolean has the same name and value in tshark with the
//! plugin (`-T fields`), frame by frame.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use common::Tshark;

/// A JSON scalar as a number (booleans as 0/1); `None` for text and nulls.
fn json_number(text: &str) -> Option<u64> {
    match text {
        "true" => Some(1),
        "false" => Some(0),
        _ => text.parse().ok(),
    }
}

/// A tshark `-T fields` value as a number: decimal or 0x-hex.
fn tshark_number(text: &str) -> Option<u64> {
    match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

/// `frame -> (field -> value)` of the CLI's JSON Lines, MetaRoCE numbers only.
fn cli_fields(pcap: &Path) -> BTreeMap<u64, BTreeMap<String, u64>> {
    let out = Command::new(common::cli())
        .args(["decode", "--json"])
        .arg(pcap)
        .output()
        .expect("running metaroce-analyze decode --json");
    // Exit 2: some packets were malformed (they are still printed).
    assert!(
        matches!(out.status.code(), Some(0 | 2)),
        "metaroce-analyze decode failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut frames = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let frame: u64 = field_text(line, "\"frame\":")
            .and_then(|f| f.parse().ok())
            .expect("a frame number in every JSON line");
        let Some(start) = line.find("\"fields\":{") else {
            continue;
        };
        let mut fields = BTreeMap::new();
        for (key, value) in scalars(&line[start + 10..]) {
            if let (true, Some(v)) = (key.starts_with("metaroce."), json_number(value)) {
                fields.insert(key.to_owned(), v);
            }
        }
        frames.insert(frame, fields);
    }
    frames
}

/// The `"key":value` pairs of a flat JSON object's body (scalar values;
/// strings kept with their quotes, so they never read as numbers).
fn scalars(body: &str) -> Vec<(&str, &str)> {
    let mut out = Vec::new();
    let mut rest = body;
    while let Some(open) = rest.find('"') {
        let after = &rest[open + 1..];
        let Some(close) = after.find('"') else { break };
        let key = &after[..close];
        let value_start = after[close + 1..].trim_start_matches(':');
        let end = if let Some(text) = value_start.strip_prefix('"') {
            // A string: up to its closing quote (spec names and numbers
            // carry no escaped quotes).
            text.find('"').map_or(value_start.len(), |e| e + 2)
        } else {
            value_start.find([',', '}']).unwrap_or(value_start.len())
        };
        out.push((key, &value_start[..end]));
        rest = &value_start[end..];
    }
    out
}

/// The text after `key` up to the next comma.
fn field_text<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let rest = &line[line.find(key)? + key.len()..];
    Some(rest.split(',').next().unwrap_or(rest))
}

fn agree_on(capture: &str) -> usize {
    let t = Tshark::new();
    let pcap = t.path(capture);
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../fixtures/generated")
            .join(capture),
        &pcap,
    )
    .unwrap();
    t.share(&pcap);
    let expected = cli_fields(&pcap);
    let names: Vec<&str> = {
        let mut all: Vec<&str> = expected
            .values()
            .flat_map(|f| f.keys().map(String::as_str))
            .collect();
        all.sort_unstable();
        all.dedup();
        all
    };
    assert!(names.len() > 20, "{names:?}");
    let mut columns = vec!["frame.number"];
    columns.extend(&names);
    let rows = t.fields(&pcap, &columns, None);
    let mut compared = 0;
    for row in rows {
        let frame: u64 = row[0].parse().unwrap();
        let Some(want) = expected.get(&frame) else {
            continue;
        };
        for (name, cell) in names.iter().zip(&row[1..]) {
            let Some(&value) = want.get(*name) else {
                continue;
            };
            // A field repeated in one packet (TLVs) is compared by the CLI's
            // first value only when tshark has one.
            if cell.contains(',') {
                continue;
            }
            assert_eq!(
                tshark_number(cell),
                Some(value),
                "{capture} frame {frame}: {name} is {cell:?} in tshark, {value} in the CLI"
            );
            compared += 1;
        }
    }
    compared
}

#[test]
fn every_type_agrees_field_by_field() {
    let compared = agree_on("all_types.pcap");
    println!("all_types.pcap: {compared} field values agree");
    assert!(compared > 200, "{compared}");
}

#[test]
fn the_two_host_scenario_agrees_field_by_field() {
    let compared =
        agree_on("multipath_loss_sender.pcap") + agree_on("multipath_loss_receiver.pcap");
    println!("multipath_loss: {compared} field values agree");
    assert!(compared > 500, "{compared}");
}
