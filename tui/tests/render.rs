//! Every pane rendered with ratatui's TestBackend from a replay of the
//! multipath fixtures through the real pipeline (decode + flow engine),
//! snapshot-tested with insta.

use std::path::PathBuf;
use std::sync::Arc;

use analyzer::Config;
mod common;

use common::{Replay, fixture};

use metaroce_tui::app::{App, SelKey, Selected, View};
use metaroce_tui::events::{EventConfig, FlowKey};
use metaroce_tui::keys::Action;
use metaroce_tui::model::{CaptureStats, RoceKey, RunState, Snapshot, SourceInfo};
use metaroce_tui::pipeline::{Pipeline, decode_config};
use metaroce_tui::render;
use proto_parse::capture::Reader;
use proto_parse::frame::LinkType;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

/// Replays `name` frame by frame, one tick per frame (1 ms of wall clock
/// each), and returns the final snapshot (3 kernel drops: drawn red).
fn replay(name: &str) -> Snapshot {
    replay_path(&fixture(name))
}

fn replay_path(path: &std::path::Path) -> Snapshot {
    replay_with(path, Config::default())
}

fn replay_with(path: &std::path::Path, cfg: Config) -> Snapshot {
    Replay::path(path)
        .config(cfg)
        .tick_every(1)
        .kernel_drops(3)
        .run()
}

fn app(name: &str) -> App {
    App::new(Arc::new(replay(name)), PathBuf::from("."))
}

fn draw(
    w: u16,
    h: u16,
    app: &mut App,
    f: impl Fn(&mut ratatui::Frame<'_>, &mut App),
) -> Terminal<TestBackend> {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|frame| f(frame, app)).unwrap();
    t
}

#[test]
fn status_line() {
    let mut a = app("multipath_loss_sender.pcap");
    let t = draw(150, 1, &mut a, |f, a| {
        render::status::render(f, f.area(), a)
    });
    insta::assert_snapshot!(t.backend());
}

#[test]
fn connections_table() {
    let mut a = app("multipath_loss_sender.pcap");
    let t = draw(150, 6, &mut a, |f, a| {
        render::connections::render(f, f.area(), a)
    });
    insta::assert_snapshot!(t.backend());
}

#[test]
fn connections_table_shows_all_and_sorts() {
    let mut a = app("multipath_loss_receiver.pcap");
    a.act(Action::ShowAll);
    a.act(Action::SortRetx);
    let rows: Vec<String> = a.rows().iter().map(|r| r.key.to_string()).collect();
    assert_eq!(rows.len(), 3, "{rows:?}");
    assert_eq!(
        rows[0], "10.0.0.1#256→10.0.0.2#512",
        "most retransmissions first"
    );
    a.act(Action::ReverseSort);
    assert_eq!(a.rows()[2].key.to_string(), "10.0.0.1#256→10.0.0.2#512");
    a.filter = "#512→".into();
    assert_eq!(a.rows().len(), 1);
    let t = draw(150, 7, &mut a, |f, a| {
        render::connections::render(f, f.area(), a)
    });
    insta::assert_snapshot!(t.backend());
}

#[test]
fn paths_pane() {
    let mut a = app("multipath_loss_receiver.pcap");
    let t = draw(90, 9, &mut a, |f, a| render::paths::render(f, f.area(), a));
    insta::assert_snapshot!(t.backend());
    // The loss heat strip: ev 0 and 1 green, ev 2 and 3 (1 of 3 lost) red.
    let buf = t.backend().buffer();
    let fg = |x: u16| buf[(x, 1)].fg;
    assert_eq!(fg(7), ratatui::style::Color::Green);
    assert_eq!(fg(8), ratatui::style::Color::Green);
    assert_eq!(fg(10), ratatui::style::Color::Red);
    // The CE strip: ev 1 carried the CE mark.
    assert_ne!(buf[(8, 2)].fg, ratatui::style::Color::Green);
}

#[test]
fn latency_pane() {
    let mut a = app("multipath_loss_sender.pcap");
    // The histogram takes every verdict's RTT sample: as many as the
    // engine's report counts.
    let per_dir: u64 = a
        .snapshot
        .report
        .directions
        .iter()
        .map(|d| d.ack_rtt_ns.count)
        .sum();
    assert_eq!(a.snapshot.latency.count, per_dir);
    assert!(per_dir > 0);
    let t = draw(66, 12, &mut a, |f, a| {
        render::latency::render(f, f.area(), a)
    });
    insta::assert_snapshot!(t.backend());
}

#[test]
fn events_pane() {
    let mut a = app("multipath_loss_sender.pcap");
    let t = draw(130, 10, &mut a, |f, a| {
        render::events::render(f, f.area(), a)
    });
    insta::assert_snapshot!(t.backend());
}

#[test]
fn detail_pane() {
    let mut a = app("multipath_loss_sender.pcap");
    let t = draw(150, 22, &mut a, |f, a| {
        render::detail::render(f, f.area(), a)
    });
    insta::assert_snapshot!(t.backend());
}

#[test]
fn help_overlay() {
    let mut a = app("multipath_loss_sender.pcap");
    let t = draw(74, 28, &mut a, |f, _| render::help::render(f, f.area()));
    insta::assert_snapshot!(t.backend());
}

#[test]
fn help_overlay_fits_80x24() {
    let mut a = app("multipath_loss_sender.pcap");
    let t = draw(80, 24, &mut a, |f, _| render::help::render(f, f.area()));
    let screen: String = t
        .backend()
        .buffer()
        .content()
        .iter()
        .map(|c| c.symbol())
        .collect();
    for b in metaroce_tui::keys::BINDINGS {
        assert!(
            screen.contains(b.help),
            "{:?} is not on an 80x24 screen",
            b.help
        );
    }
}

#[test]
fn whole_screen_main_and_detail() {
    let mut a = app("multipath_loss_receiver.pcap");
    let t = draw(160, 44, &mut a, render::app::render);
    insta::assert_snapshot!("whole_main", t.backend());
    a.act(Action::Detail);
    assert_eq!(a.view, View::Detail);
    let t = draw(160, 44, &mut a, render::app::render);
    insta::assert_snapshot!("whole_detail", t.backend());
}

#[test]
fn events_name_stall_nacks_and_cnp() {
    let s = replay("multipath_loss_sender.pcap");
    let kinds: Vec<&str> = s.events.iter().map(|e| e.kind.label()).collect();
    for k in ["NEW", "STALL", "NACK", "CNP"] {
        assert!(kinds.contains(&k), "{k} missing from {kinds:?}");
    }
}

#[test]
fn rocev2_flows_below_the_table() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/real/montybeatnik_roce_capture_read-write-ecn.pcap");
    let s = replay_path(&path);
    assert!(!s.report.rocev2.is_empty());
    let mut a = App::new(Arc::new(s), PathBuf::from("."));
    let t = draw(150, 14, &mut a, |f, a| {
        render::connections::render(f, f.area(), a)
    });
    insta::assert_snapshot!(t.backend());
}

/// The multipath receiver fixture, then the RoCEv2 script of
/// `common::rocev2_script` one second after its last frame, through one
/// pipeline.
fn mixed() -> Snapshot {
    let mut p = Pipeline::new(
        SourceInfo::Replay {
            file: "mixed.pcap".into(),
            speed: 1.0,
        },
        decode_config(4794, 4791),
        Config::default(),
        EventConfig::default(),
    );
    let mut reader = Reader::open(fixture("multipath_loss_receiver.pcap")).unwrap();
    let mut stats = CaptureStats::default();
    let mut n = 0u64;
    let mut last = 0;
    while let Some(rec) = reader.next_record() {
        let rec = rec.unwrap();
        n += 1;
        last = rec.ts_ns;
        p.on_frame(
            LinkType::from(u32::from(rec.linktype)),
            rec.ts_ns,
            rec.data,
            rec.orig_len,
        );
        p.snapshot(n * 1_000_000, RunState::Running, stats);
    }
    for (ts, f) in common::rocev2_script(last + 1_000_000_000) {
        n += 1;
        p.on_frame(LinkType::Ethernet, ts, &f, f.len() as u32);
        p.snapshot(n * 1_000_000, RunState::Running, stats);
    }
    stats.received = n;
    p.finish();
    p.snapshot((n + 1) * 1_000_000, RunState::Finished, stats)
}

fn qp(dest_qp: u32) -> RoceKey {
    RoceKey {
        src: "10.9.0.1".parse().unwrap(),
        dst: "10.9.0.2".parse().unwrap(),
        dest_qp,
    }
}

#[test]
fn rocev2_detail_counts_psns_naks_cnps_and_ecn() {
    let s = mixed();
    let i = s.rocev2_flow(qp(0x20)).expect("flow QP 0x20").0;
    let f = &s.report.rocev2[i];
    assert_eq!(
        (f.data_packets, f.data_bytes, f.retransmissions),
        (9, 900, 4)
    );
    assert_eq!(
        (f.acks, f.naks, f.rnr_naks, f.cnps, f.ce_marked),
        (3, 1, 1, 1, 1)
    );
    assert_eq!(
        (
            f.fast_retransmissions,
            f.timeout_retransmissions,
            f.spurious_retransmissions
        ),
        (3, 1, 0)
    );
    assert_eq!(
        (f.first_psn, f.highest_psn, f.acked_psn),
        (Some(10), Some(14), Some(14))
    );
    assert_eq!(f.outstanding_psns, 0);
    assert_eq!(f.naks_by_code.get("PSN sequence error"), Some(&1));
    assert_eq!((f.ect_packets, f.fecn, f.becn), (15, 0, 1));
    let j = s.rocev2_flow(qp(0x21)).expect("flow QP 0x21").0;
    let f = &s.report.rocev2[j];
    assert_eq!((f.highest_psn, f.acked_psn, f.fecn), (Some(500), None, 1));
}

#[test]
fn rocev2_events_name_new_flow_naks_rnr_and_cnp() {
    let s = mixed();
    let events: Vec<(&str, &str)> = s
        .events
        .iter()
        .filter(|e| matches!(e.flow, FlowKey::Rocev2(k) if k.dest_qp == 0x20))
        .map(|e| (e.kind.label(), e.text.as_str()))
        .collect();
    // One snapshot per frame: each NAK is its own burst of one.
    assert_eq!(
        events,
        [
            ("NEW", "first request at frame 31"),
            ("NACK", "1 NAK(s): PSN sequence error 1"),
            ("CNP", "1 CNP(s)"),
            ("NACK", "1 NAK(s): RNR 1"),
        ],
        "{:?}",
        s.events
    );
}

#[test]
fn rocev2_rows_are_selectable_after_the_metaroce_rows() {
    let mut a = App::new(Arc::new(mixed()), PathBuf::from("."));
    let first = a.rows()[0].key;
    assert!(matches!(a.selection(), Some(Selected::Dir(r)) if r.key == first));
    // One MetaRoCE row (A→B), then the two RoCEv2 flows (first frame order).
    a.act(Action::Down);
    assert_eq!(a.selected, Some(SelKey::Roce(qp(0x20))));
    a.act(Action::Down);
    assert_eq!(a.selected, Some(SelKey::Roce(qp(0x21))));
    a.act(Action::Down);
    assert_eq!(
        a.selected,
        Some(SelKey::Roce(qp(0x21))),
        "stays on the last"
    );
    a.act(Action::Top);
    assert_eq!(a.selected, Some(SelKey::Dir(first)));
    a.act(Action::Bottom);
    assert_eq!(a.selected, Some(SelKey::Roce(qp(0x21))));
    // Sort by retransmissions: QP 0x20 (4) before QP 0x21 (0).
    a.act(Action::SortRetx);
    assert_eq!(a.roce_rows()[0].key, qp(0x20));
    a.act(Action::ReverseSort);
    assert_eq!(a.roce_rows()[0].key, qp(0x21));
    // The filter takes QPs.
    a.filter = "0x21".into();
    assert_eq!(a.rows().len(), 0);
    let rows: Vec<RoceKey> = a.roce_rows().iter().map(|r| r.key).collect();
    assert_eq!(rows, [qp(0x21)]);
    a.filter = "qp 0x000020".into();
    assert_eq!(a.roce_rows().len(), 1);
    a.filter.clear();
    a.act(Action::SortGoodput);
    a.act(Action::ReverseSort);

    // The main screen highlights the RoCEv2 row; Enter opens its detail.
    a.selected = Some(SelKey::Roce(qp(0x20)));
    let t = draw(160, 44, &mut a, render::app::render);
    insta::assert_snapshot!("whole_main_rocev2_selected", t.backend());
    a.act(Action::Detail);
    assert_eq!(a.view, View::Detail);
    let t = draw(160, 44, &mut a, render::app::render);
    insta::assert_snapshot!("whole_detail_rocev2", t.backend());
}

#[test]
fn rocev2_detail_pane() {
    let mut a = App::new(Arc::new(mixed()), PathBuf::from("."));
    a.selected = Some(SelKey::Roce(qp(0x20)));
    let t = draw(150, 24, &mut a, |f, a| {
        render::detail::render(f, f.area(), a)
    });
    insta::assert_snapshot!(t.backend());
}

/// Drops are never hidden: on a narrow terminal the source name is cut
/// first; on a very narrow one the drops come right after the title.
#[test]
fn status_line_never_hides_drops() {
    let mut snap = replay("multipath_loss_sender.pcap");
    snap.source = SourceInfo::Replay {
        file: "/a/rather/long/directory/name/some-very-long-capture-file-name-from-a-lab.pcap"
            .into(),
        speed: 1.0,
    };
    snap.stats.interface_drops = 12;
    let mut a = App::new(Arc::new(snap), PathBuf::from("."));
    let line = |w: u16, a: &mut App| {
        let t = draw(w, 1, a, |f, a| render::status::render(f, f.area(), a));
        let buf = t.backend().buffer();
        (0..w).map(|x| buf[(x, 0)].symbol()).collect::<String>()
    };
    let l = line(80, &mut a);
    assert!(l.contains("drops kernel 3 if 12"), "{l}");
    assert!(l.contains("replay some-very-long"), "{l}");
    assert!(l.contains('…'), "{l}");
    let l = line(40, &mut a);
    assert!(l.starts_with(" metaroce-top  drops kernel 3 if 12"), "{l}");
}

/// Every value of a long, busy run in the connections table and the paths
/// pane: each column is as wide as its widest value, so none is cut (the
/// Stalls column once showed `758+open` as `758+ope`).
#[test]
fn large_values_fit_their_columns() {
    let mut snap = replay("multipath_loss_sender.pcap");
    let i = snap
        .report
        .directions
        .iter()
        .position(|d| d.data_packets > 0)
        .unwrap();
    snap.rates[i].goodput_bps = 1.234e12;
    snap.rates[i].packets_per_s = 98.7e6;
    let d = &mut snap.report.directions[i];
    d.data_packets = 1_234_567_890;
    d.retransmissions = 98_765_432;
    d.out_of_order = 123_456_789;
    d.ce_marked = 99_999_999;
    d.nacks = 1_234_567;
    d.cnps = 7_654_321;
    d.ack_rtt_ns.p50 = 123_456_789;
    d.ack_rtt_ns.p99 = 12_345_678_901;
    assert!(!d.stalls.is_empty(), "the fixture has a stall");
    d.stalls_dropped = 758 - d.stalls.len() as u64;
    d.stalls[0].open = true;
    let p = &mut d.paths[0];
    p.packets = 123_456_789;
    p.data_packets = 120_000_000;
    p.lost = 22_800_000;
    p.lost_inferred = 1_200_000;
    p.ce_marked = 4_567_890;
    p.retransmissions = 98_765_432;
    p.ack_rtt_ns.p99 = 12_345_678_901;
    let mut a = App::new(Arc::new(snap), PathBuf::from("."));

    let t = draw(160, 6, &mut a, |f, a| {
        render::connections::render(f, f.area(), a)
    });
    let screen = format!("{}", t.backend());
    for value in [
        "1234 Gb/s",
        "98.7M",
        "1.23G",
        "98.77M",
        "8.0%",
        "123.46M",
        "100.00M",
        "1.23M",
        "7.65M",
        "123.46ms",
        "12.35s",
        "758+open",
    ] {
        assert!(screen.contains(value), "{value} cut:\n{screen}");
    }
    insta::assert_snapshot!("large_values_connections", t.backend());

    let t = draw(88, 10, &mut a, |f, a| render::paths::render(f, f.area(), a));
    let screen = format!("{}", t.backend());
    // 22.8M of 146.3M expected; 1.2M of 120M sent.
    for value in [
        "123.46M", "22.80M", "15.6%", "1.20M", "1.0%", "4.57M", "12.35s",
    ] {
        assert!(screen.contains(value), "{value} cut:\n{screen}");
    }
    insta::assert_snapshot!("large_values_paths", t.backend());
}

#[test]
fn lint_findings_per_connection() {
    let dir = tempfile::tempdir().unwrap();
    let path = common::lint_capture(dir.path());
    let lint_on = Config {
        lint: Some(Default::default()),
        ..Config::default()
    };
    let snap = replay_with(&path, lint_on);
    assert!(snap.lint_on());
    let key = metaroce_tui::model::DirKey {
        src: "10.0.0.1".parse().unwrap(),
        dst: "10.0.0.2".parse().unwrap(),
        src_conn: 0x100,
        dst_conn: 0x200,
    };
    // The counts come from the report: per direction, per rule.
    let (_, d) = snap.direction(key).unwrap();
    let rules: Vec<(&str, u64)> = d.lint.iter().map(|(k, v)| (*k, *v)).collect();
    assert_eq!(
        rules,
        [("MR-PKT-002", 1), ("MR-PKT-003", 1), ("MR-PKT-012", 1)]
    );
    let counts = snap.connection_lint(key);
    assert_eq!((counts.errors, counts.warnings), (2, 1));
    // The same on the reverse direction's row (one connection).
    assert_eq!(snap.connection_lint(key.reverse()), counts);

    let mut a = App::new(Arc::new(snap), PathBuf::from("."));
    a.act(Action::ShowAll);
    let t = draw(150, 6, &mut a, |f, a| {
        render::connections::render(f, f.area(), a)
    });
    let screen = format!("{}", t.backend());
    assert!(
        screen.contains("Lint") && screen.contains("2/1"),
        "{screen}"
    );
    // Red: the connection has errors.
    let buf = t.backend().buffer();
    let (x, y) = (0..150u16)
        .flat_map(|x| (0..6u16).map(move |y| (x, y)))
        .find(|&(x, y)| buf[(x, y)].symbol() == "2" && buf[(x + 1, y)].symbol() == "/")
        .expect("the lint cell");
    assert_eq!(buf[(x, y)].fg, ratatui::style::Color::Red);
    insta::assert_snapshot!("lint_connections_table", t.backend());

    let t = draw(150, 22, &mut a, |f, a| {
        render::detail::render(f, f.area(), a)
    });
    let screen = format!("{}", t.backend());
    assert!(
        screen.contains("Lint: 2 errors, 1 warning ")
            && screen.contains("MR-PKT-002")
            && screen.contains("MR-PKT-012"),
        "{screen}"
    );
    insta::assert_snapshot!("lint_detail_pane", t.backend());

    // With the lint off the column says so.
    let snap = replay_with(&path, Config::default());
    assert!(!snap.lint_on());
    let mut a = App::new(Arc::new(snap), PathBuf::from("."));
    let t = draw(150, 6, &mut a, |f, a| {
        render::connections::render(f, f.area(), a)
    });
    assert!(!format!("{}", t.backend()).contains("2/1"));
}

/// The generator's multipath scenario is conformant: with the lint on, no
/// connection has an error-severity finding.
#[test]
fn a_clean_capture_has_no_lint_errors() {
    let cfg = Config {
        lint: Some(Default::default()),
        ..Config::default()
    };
    for name in ["multipath_loss_sender.pcap", "multipath_loss_receiver.pcap"] {
        let snap = replay_with(&fixture(name), cfg);
        assert!(snap.lint_on());
        assert!(!snap.report.directions.is_empty());
        for d in &snap.report.directions {
            let key = metaroce_tui::model::DirKey::of(d);
            assert_eq!(
                snap.connection_lint(key).errors,
                0,
                "{name} {key}: {:?}",
                d.lint
            );
        }
    }
}

/// With the lint on, each RoCEv2 row shows its flow's findings
/// (errors/warnings), as the MetaRoCE rows do.
#[test]
fn rocev2_rows_show_their_lint_findings() {
    let mut p = Pipeline::new(
        SourceInfo::Replay {
            file: "rocev2.pcap".into(),
            speed: 1.0,
        },
        decode_config(4794, 4791),
        Config {
            lint: Some(Default::default()),
            ..Config::default()
        },
        EventConfig::default(),
    );
    let stats = CaptureStats::default();
    for (ts, f) in common::rocev2_script(1_000_000_000) {
        p.on_frame(LinkType::Ethernet, ts, &f, f.len() as u32);
    }
    p.finish();
    let snap = p.snapshot(1_000_000, RunState::Finished, stats);
    // The script's retry 14 us after an RNR NAK asking for 30 us (later
    // than the requester's reaction time, earlier than it was asked)
    // breaks RC-REQ-003 (an error) on the flow to QP 0x20.
    let linted: Vec<_> = snap
        .report
        .rocev2
        .iter()
        .filter(|f| !f.lint.is_empty())
        .map(|f| (f.dest_qp, f.lint.clone()))
        .collect();
    assert_eq!(
        linted,
        [(0x20, std::collections::BTreeMap::from([("RC-REQ-003", 1)]))]
    );
    let mut a = App::new(Arc::new(snap), PathBuf::from("."));
    let t = draw(170, 12, &mut a, |f, a| {
        render::connections::render(f, f.area(), a)
    });
    let screen = format!("{}", t.backend());
    let row = |qp: &str| {
        screen
            .lines()
            .find(|l| l.contains(qp))
            .unwrap_or_else(|| panic!("no row of {qp}: {screen}"))
            .to_string()
    };
    assert!(screen.contains("Lint"), "{screen}");
    assert!(row("QP 0x000020").contains(" 1/0 "), "{screen}");
    assert!(row("QP 0x000021").contains(" 0/0 "), "{screen}");
    // Red: the flow has an error.
    let buf = t.backend().buffer();
    let (x, y) = (0..170u16)
        .flat_map(|x| (0..12u16).map(move |y| (x, y)))
        .find(|&(x, y)| buf[(x, y)].symbol() == "1" && buf[(x + 1, y)].symbol() == "/")
        .expect("the lint cell");
    assert_eq!(buf[(x, y)].fg, ratatui::style::Color::Red);
}
