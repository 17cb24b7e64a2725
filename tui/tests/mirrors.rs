//! A mirror collector in the live view: a replay of the fixture
//! generator's `mirror_erspan3.pcap` (the sender's capture mirrored by
//! switch 192.0.2.1, the receiver's by 192.0.2.2, into one collector
//! capture) through the real pipeline shows the sender's capture point,
//! the first that carried the connection: the analysis of
//! `multipath_loss_sender.pcap` replayed alone, not the two copies of
//! every transmission counted again. The status line names the points.

mod common;

use common::replay;

use std::path::PathBuf;
use std::sync::Arc;

use metaroce_tui::app::App;
use metaroce_tui::metrics::MetricsConfig;
use metaroce_tui::metrics::exposition::Format;
use metaroce_tui::metrics::families::{ProcessHealth, render as render_metrics};
use metaroce_tui::model::Snapshot;
use metaroce_tui::render;
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use serde_json::Value;

/// A report part without frame numbers (the collector's capture numbers
/// its frames otherwise) and with its times of day moved by `shift_ns`.
fn comparable(v: Value, shift_ns: i64) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .filter(|(k, _)| !k.ends_with("frame"))
                .map(|(k, v)| match v {
                    Value::Number(n) if k.ends_with("ts_ns") || k == "start_ns" => {
                        (k, Value::from(n.as_i64().unwrap() + shift_ns))
                    }
                    v => (k, comparable(v, shift_ns)),
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(|v| comparable(v, shift_ns)).collect()),
        other => other,
    }
}

/// `collector`, a replay of `multipath_loss` mirrored from the sender's
/// link (session 1 of 192.0.2.1, first) and the receiver's (`receiver`),
/// shows the sender's point: a replay of `multipath_loss_sender.pcap` on
/// the collector's clock, which records each copy 7 us later. The
/// receiver's session carried 30 copies of the same connection, counted
/// and not analysed again. Returns the collector's report as JSON.
fn shows_the_sender_point(collector: &Snapshot, receiver: &str) -> Value {
    let sender = replay("multipath_loss_sender.pcap");
    let json = |s: &Snapshot| serde_json::to_value(&s.report).unwrap();
    let (c, s) = (json(collector), json(&sender));
    assert_eq!(
        comparable(c["directions"].clone(), -7_000),
        comparable(s["directions"].clone(), 0)
    );
    let points: Vec<_> = collector
        .points
        .iter()
        .map(|p| (p.name.as_str(), p.packets, p.copies_not_analysed))
        .collect();
    assert_eq!(
        points,
        [
            ("ERSPAN III 192.0.2.1 session 1", 32, 0),
            (receiver, 30, 30)
        ]
    );
    c
}

#[test]
fn a_collector_shows_each_connection_from_one_capture_point() {
    let mirrored = replay("mirror_erspan3.pcap");
    let m = shows_the_sender_point(&mirrored, "ERSPAN III 192.0.2.2 session 2");
    assert_eq!(m["capture"]["traffic"]["decapsulated"]["erspan3"], 62);

    // The exporter names the points too.
    let text = render_metrics(
        &mirrored,
        &MetricsConfig::default(),
        Format::Prometheus,
        ProcessHealth::default(),
    );
    for line in [
        "metaroce_capture_point_packets_total{point=\"ERSPAN III 192.0.2.1 session 1\"} 32",
        "metaroce_capture_point_copies_not_analysed_total{point=\"ERSPAN III 192.0.2.2 session 2\"} 30",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
    }

    let app = App::new(Arc::new(mirrored), PathBuf::from("."));
    let mut t = Terminal::new(TestBackend::new(240, 1)).unwrap();
    t.draw(|frame| render::status::render(frame, frame.area(), &app))
        .unwrap();
    let line = format!("{}", t.backend());
    assert!(line.contains("mirrored 62"), "{line}");
    assert!(
        line.contains("2 capture points, 30 copies not analysed twice"),
        "{line}"
    );
}

#[test]
fn copies_cut_into_outer_fragments_keep_their_session() {
    // Every copy of a 1,122-byte frame cut into two outer IP fragments by
    // the collector path (ERSPAN III over IPv4 from 192.0.2.1, ERSPAN II
    // over IPv6 from 2001:db8::2): rebuilt, then decapsulated to their
    // session, as the copies sent whole.
    let cut = replay("mirror_fragments.pcap");
    let c = shows_the_sender_point(&cut, "ERSPAN II 2001:db8::2 session 2");
    let expected: Value = serde_json::from_str(
        &std::fs::read_to_string(common::fixture("mirror_fragments.expected.json")).unwrap(),
    )
    .unwrap();
    for key in [
        "ip_fragments",
        "reassembled_datagrams",
        "incomplete_datagrams",
    ] {
        assert_eq!(c["capture"][key], expected[key], "{key}");
    }
    assert_eq!(
        c["capture"]["traffic"]["decapsulated"],
        expected["decapsulated"]
    );
}
