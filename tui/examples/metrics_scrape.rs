//! Benchmark of one `/metrics` scrape of 10,000 MetaRoCE connections (the
//! issue's bound: under 100 ms), with the body's size: one host's exporter,
//! its connections to 1,000 peers (10 each), in the exporter's label modes:
//! host pairs (the default), per connection (the default series limit
//! folds most of them), per connection without a limit, and per connection
//! and path without a limit.
//!
//! The connections are generated traffic analysed by the real pipeline
//! (8 DATA over 4 evs with a path_seq gap on one, ACKs with RTT samples,
//! completed messages), so the snapshot holds what a live run holds; the
//! time is `families::render` on it, as a scrape runs it (after cloning
//! the snapshot's `Arc`), then the gzip a scrape that asks for it (as
//! Prometheus does) adds, and the gzipped body's size.
//!
//! `cargo run --release -p metaroce-tui --example metrics_scrape [CONNECTIONS]`

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Instant;

use metaroce_tui::events::EventConfig;
use metaroce_tui::metrics::MetricsConfig;
use metaroce_tui::metrics::exposition::Format;
use metaroce_tui::metrics::families::{ProcessHealth, render};
use metaroce_tui::metrics::server::gzipped;
use metaroce_tui::model::{CaptureStats, RunState, SourceInfo};
use metaroce_tui::pipeline::{Pipeline, decode_config};
use proto_parse::build::UdpFrameBuilder;
use proto_parse::frame::LinkType;
use proto_parse::metaroce::{
    self, AckRepr, Body, DataRepr, FbFlags, FeedbackRepr, Flags, Op, Repr, SackBitmap,
};

const PAYLOAD: [u8; 256] = [0x5a; 256];
const PATHS: u16 = 4;
const PACKETS: u32 = 8;
/// Peers of the one host whose exporter is scraped.
const HOST_PAIRS: u32 = 1000;

/// The frames of connection `i`: (timestamp ns, frame).
fn connection(i: u32, t0: u64) -> Vec<(u64, Vec<u8>)> {
    let pair = i % HOST_PAIRS;
    let a = IpAddr::V4(Ipv4Addr::new(10, 1, 0, 1));
    let b = IpAddr::V4(Ipv4Addr::new(10, 2, (pair >> 8) as u8, pair as u8));
    let (a_conn, b_conn) = (0x1000 + i, 0x8000_0000 + i);
    let mut path_seq = [0u16; PATHS as usize];
    let mut frames = Vec::new();
    for psn in 0..PACKETS {
        let ev = (psn % u32::from(PATHS)) as u16;
        path_seq[usize::from(ev)] += 1;
        // A path_seq gap on ev 1: a lost packet.
        if psn == 1 {
            path_seq[1] += 1;
        }
        let mut flags = Flags::empty();
        if psn % 4 == 0 {
            flags |= Flags::SOM;
        }
        if psn % 4 == 3 {
            flags |= Flags::EOM | Flags::AR;
        }
        let data = Repr {
            flags,
            tx_attempt: 0,
            ev,
            path_seq: path_seq[usize::from(ev)],
            dst_conn: b_conn,
            src_conn: a_conn,
            psn,
            tx_ts: psn * 1000,
            body: Body::Data(DataRepr {
                op: Op::Write {
                    remote_va: 0x1000,
                    rkey: 7,
                },
                payload_len: PAYLOAD.len() as u16,
                msg_id: psn / 4,
                msg_offset: (psn % 4) * PAYLOAD.len() as u32,
                msg_len: 4 * PAYLOAD.len() as u32,
            }),
            tlvs: Vec::new(),
            payload: &PAYLOAD,
            crc: false,
        };
        let t = t0 + u64::from(psn) * 1_000;
        frames.push((t, frame(a, b, ev, &data)));
        if psn % 4 == 3 {
            let ack = Repr {
                flags: Flags::empty(),
                tx_attempt: 0,
                ev,
                path_seq: (psn / 4 + 1) as u16,
                dst_conn: a_conn,
                src_conn: b_conn,
                psn: psn + 1,
                tx_ts: psn * 1000 + 500,
                body: Body::Ack(AckRepr {
                    feedback: FeedbackRepr {
                        flags: FbFlags::empty(),
                        echo_ev: ev,
                        echo_psn: psn,
                        echo_tx_ts: psn * 1000,
                        rx_ts: psn * 1000 + 200,
                        ..FeedbackRepr::default()
                    },
                    sack_base: psn + 1,
                    sack: SackBitmap::default(),
                }),
                tlvs: Vec::new(),
                payload: &[],
                crc: false,
            };
            frames.push((t + 8_000 + u64::from(i % 50) * 1_000, frame(b, a, ev, &ack)));
        }
    }
    frames
}

fn frame(src: IpAddr, dst: IpAddr, ev: u16, repr: &Repr<'_>) -> Vec<u8> {
    UdpFrameBuilder::new(
        SocketAddr::new(src, metaroce::udp_source_port(ev)),
        SocketAddr::new(dst, metaroce::DEFAULT_PORT),
    )
    .build(&repr.to_vec())
}

fn main() {
    let connections: u32 = std::env::args()
        .nth(1)
        .map_or(10_000, |s| s.parse().expect("CONNECTIONS"));
    let t0 = 1_764_000_000_000_000_000u64;
    let mut frames: Vec<(u64, Vec<u8>)> = (0..connections)
        .flat_map(|i| connection(i, t0 + u64::from(i) * 100))
        .collect();
    frames.sort_by_key(|f| f.0);
    println!(
        "{connections} connections ({} directions), {} frames; scrape = families::render of the snapshot, median of 7",
        2 * connections,
        frames.len()
    );
    println!(
        "{:<30} {:>8} {:>12} {:>10} {:>11} {:>8}",
        "labels", "series", "body_bytes", "render_ms", "gzip_bytes", "gzip_ms"
    );
    let limit = MetricsConfig::default().max_series;
    let modes = [
        ("host pairs (default)", false, false, limit),
        ("per connection, limit", true, false, limit),
        ("per connection, no limit", true, false, usize::MAX),
        ("per conn. and path, no limit", true, true, usize::MAX),
    ];
    for (name, per_connection, paths, max_series) in modes {
        let cfg = MetricsConfig {
            per_connection,
            paths,
            max_series,
        };
        let mut p = Pipeline::new(
            SourceInfo::Replay {
                file: "generated".into(),
                speed: 0.0,
            },
            decode_config(4794, 4791),
            analyzer::Config {
                lint: Some(Default::default()),
                // 20,000 directions: above the default flow limit.
                max_flows: 65_536,
                ..analyzer::Config::default()
            },
            EventConfig::default(),
        )
        .with_metrics(cfg.per_connection, cfg.max_series);
        for (ts, f) in &frames {
            p.on_frame(LinkType::Ethernet, *ts, f, f.len() as u32);
        }
        let snap = p.snapshot(1_000_000_000, RunState::Running, CaptureStats::default());
        assert_eq!(snap.report.directions.len() as u32, 2 * connections);
        let health = ProcessHealth::read();
        let mut times = Vec::new();
        let mut body = String::new();
        for _ in 0..7 {
            let t = Instant::now();
            body = render(&snap, &cfg, Format::Prometheus, health);
            times.push(t.elapsed().as_secs_f64() * 1e3);
        }
        times.sort_by(f64::total_cmp);
        let mut gzip_times = Vec::new();
        let mut gz = Vec::new();
        for _ in 0..7 {
            let t = Instant::now();
            gz = gzipped(body.as_bytes()).expect("gzip into memory");
            gzip_times.push(t.elapsed().as_secs_f64() * 1e3);
        }
        gzip_times.sort_by(f64::total_cmp);
        let series = body.lines().filter(|l| !l.starts_with('#')).count();
        println!(
            "{:<30} {:>8} {:>12} {:>10.1} {:>11} {:>8.1}",
            name,
            series,
            body.len(),
            times[times.len() / 2],
            gz.len(),
            gzip_times[gzip_times.len() / 2]
        );
    }
}
