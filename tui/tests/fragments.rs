//! IP fragments (issue 23): a replay of the fixture generator's
//! `ip_fragments.pcap` through the real pipeline shows the analysis of
//! `ip_fragments_unfragmented.pcap` (the same traffic sent whole, without
//! the datagrams that cannot be rebuilt), and the status line counts the
//! fragments, the datagrams rebuilt and those that never completed.

mod common;

use common::{fixture, replay};

use std::path::PathBuf;
use std::sync::Arc;

use metaroce_tui::app::App;
use metaroce_tui::model::Snapshot;
use metaroce_tui::render;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use serde_json::Value;

/// A report part without frame numbers (fragments shift them).
fn without_frame_numbers(v: Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .filter(|(k, _)| !k.ends_with("frame"))
                .map(|(k, v)| (k, without_frame_numbers(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(without_frame_numbers).collect()),
        other => other,
    }
}

#[test]
fn fragments_are_reassembled_and_counted_on_the_status_line() {
    let frag = replay("ip_fragments.pcap");
    let whole = replay("ip_fragments_unfragmented.pcap");
    let json = |s: &Snapshot| serde_json::to_value(&s.report).unwrap();
    let (f, w) = (json(&frag), json(&whole));
    for key in ["directions", "rocev2"] {
        assert_eq!(
            without_frame_numbers(f[key].clone()),
            without_frame_numbers(w[key].clone()),
            "{key}"
        );
    }
    assert_eq!(
        frag.report.directions.len(),
        4,
        "two connections, both ways"
    );

    let expected: Value = serde_json::from_str(
        &std::fs::read_to_string(fixture("ip_fragments.expected.json")).unwrap(),
    )
    .unwrap();
    for (key, value) in expected.as_object().unwrap() {
        assert_eq!(&f["capture"][key], value, "capture.{key}");
    }

    let mut app = App::new(Arc::new(frag), PathBuf::from("."));
    let mut t = Terminal::new(TestBackend::new(200, 1)).unwrap();
    t.draw(|frame| render::status::render(frame, frame.area(), &app))
        .unwrap();
    let line = format!("{}", t.backend());
    assert!(
        line.contains("IP frags 43: 12 rebuilt, 2 incomplete (4 frags)"),
        "{line}"
    );
    // The connections table shows both MetaRoCE connections' DATA.
    let mut t = Terminal::new(TestBackend::new(160, 20)).unwrap();
    t.draw(|frame| render::connections::render(frame, frame.area(), &mut app))
        .unwrap();
    let table = format!("{}", t.backend());
    assert!(table.contains("10.0.0.1#256→10.0.0.2#512"), "{table}");
    assert!(table.contains("fd00::1#768→fd00::2#1024"), "{table}");
}
