//! A connection's report: goodput, message latency, retransmissions,
//! per-path state, as text or JSON.

use reference_stack::driver::{Driver, DriverStats};
use reference_stack::impair::ImpairStats;
use reference_stack::{ConnStats, Connection, EndpointStats, Mode, PathStats};
use serde::Serialize;

use crate::args::OpArg;

#[derive(Debug, Serialize)]
pub(crate) struct Latency {
    count: usize,
    mean_us: f64,
    p50_us: f64,
    p90_us: f64,
    p99_us: f64,
    max_us: f64,
}

fn latency(mut v: Vec<u64>) -> Latency {
    v.sort_unstable();
    let pct = |p: f64| {
        if v.is_empty() {
            0.0
        } else {
            v[((v.len() - 1) as f64 * p).round() as usize] as f64 / 1000.0
        }
    };
    Latency {
        count: v.len(),
        mean_us: if v.is_empty() {
            0.0
        } else {
            v.iter().sum::<u64>() as f64 / v.len() as f64 / 1000.0
        },
        p50_us: pct(0.5),
        p90_us: pct(0.9),
        p99_us: pct(0.99),
        max_us: pct(1.0),
    }
}

#[derive(Debug, Serialize)]
pub(crate) struct Report {
    pub(crate) role: &'static str,
    pub(crate) op: Option<OpArg>,
    pub(crate) mode: Mode,
    pub(crate) paths: usize,
    pub(crate) size: u32,
    /// The negotiated payload MTU.
    pub(crate) mtu: u16,
    pub(crate) messages: u64,
    pub(crate) bytes: u64,
    pub(crate) elapsed_s: f64,
    pub(crate) goodput_gbps: f64,
    pub(crate) latency: Latency,
    pub(crate) retransmissions: u64,
    pub(crate) spurious_retransmissions: u64,
    pub(crate) closed_error: Option<String>,
    pub(crate) conn: ConnStats,
    pub(crate) path_stats: Vec<PathStats>,
    pub(crate) endpoint: EndpointStats,
    pub(crate) driver: DriverStats,
    pub(crate) pcap_frames: u64,
    /// Server with `--digest`: FNV-1a 64 of the registered region, in hex.
    pub(crate) region_digest: Option<String>,
}

/// The impairment counters as words.
pub(crate) fn impairment_summary(s: &ImpairStats) -> String {
    format!(
        "passed {} dropped {} blackholed {} duplicated {} trimmed {} CE-marked {} reordered {}",
        s.passed, s.dropped, s.blackholed, s.duplicated, s.trimmed, s.ce_marked, s.reordered
    )
}

pub(crate) fn print_report(r: &Report, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(r)?);
        return Ok(());
    }
    let op = r.op.map_or(String::new(), |op| format!(" {}", op.name()));
    println!(
        "{} {}{op}: {} messages of {} B, {} B in {:.3} s: goodput {:.3} Gb/s (MTU {})",
        r.role,
        r.mode.name(),
        r.messages,
        r.size,
        r.bytes,
        r.elapsed_s,
        r.goodput_gbps,
        r.mtu
    );
    let l = &r.latency;
    println!(
        "message latency (us): mean {:.1} p50 {:.1} p90 {:.1} p99 {:.1} max {:.1} (n={})",
        l.mean_us, l.p50_us, l.p90_us, l.p99_us, l.max_us, l.count
    );
    println!(
        "retransmissions {} (spurious {}), early losses {}, rto {}, nack gap/trim/rnr {}/{}/{}, cnp {}, ece {}, dup rx {}, trimmed rx {}",
        r.retransmissions,
        r.spurious_retransmissions,
        r.conn.spurious_losses,
        r.conn.rto_fires,
        r.conn.nack_gap_rx,
        r.conn.nack_trimmed_rx,
        r.conn.nack_rnr_rx,
        r.conn.cnp_rx,
        r.conn.ece_rx,
        r.conn.dup_rx,
        r.conn.trimmed_rx
    );
    println!("  ev state    tx_pkts   retx   lost  delivered  ce  retired  srtt_us  cwnd");
    for p in &r.path_stats {
        println!(
            "  {:>2} {:<8} {:>8} {:>6} {:>6} {:>10} {:>3} {:>8} {:>8.1} {:>6}",
            p.ev,
            p.state,
            p.tx_packets,
            p.retransmissions,
            p.lost,
            p.delivered,
            p.ce_marks,
            p.retirements,
            p.srtt_ns as f64 / 1000.0,
            p.cwnd
        );
    }
    let e = &r.endpoint;
    println!(
        "refused datagrams: malformed {} bad CRC {} unknown connection {} unsupported {}; impairment on transmit: {}",
        e.malformed,
        e.bad_crc,
        e.unknown_conn,
        e.unsupported,
        impairment_summary(&r.driver.impair_tx)
    );
    if let Some(d) = &r.region_digest {
        println!("registered region digest (FNV-1a 64): {d}");
    }
    Ok(())
}

/// What one connection moved, for its report.
pub(crate) struct Traffic {
    pub(crate) messages: u64,
    pub(crate) bytes: u64,
    pub(crate) elapsed_s: f64,
    pub(crate) latencies: Vec<u64>,
    /// Messages that completed with an error.
    pub(crate) failed: u64,
    /// Why the connection closed, if not by a graceful close.
    pub(crate) closed_error: Option<String>,
}

/// What a report takes from a connection.
pub(crate) struct ConnSummary {
    pub(crate) mode: Mode,
    pub(crate) mtu: u16,
    pub(crate) stats: ConnStats,
    pub(crate) path_stats: Vec<PathStats>,
}

impl ConnSummary {
    pub(crate) fn of(conn: &Connection) -> ConnSummary {
        ConnSummary {
            mode: conn.mode(),
            mtu: conn.mtu(),
            stats: conn.stats().clone(),
            path_stats: conn.path_stats(),
        }
    }
}

/// The report of a connection of `d`'s endpoint.
pub(crate) fn report_of(
    role: &'static str,
    op: Option<OpArg>,
    size: u32,
    conn: ConnSummary,
    d: &mut Driver,
    t: Traffic,
) -> Report {
    Report {
        role,
        op,
        mode: conn.mode,
        paths: conn.path_stats.len(),
        size,
        mtu: conn.mtu,
        messages: t.messages,
        bytes: t.bytes,
        elapsed_s: t.elapsed_s,
        goodput_gbps: if t.elapsed_s > 0.0 {
            t.bytes as f64 * 8.0 / t.elapsed_s / 1e9
        } else {
            0.0
        },
        latency: latency(t.latencies),
        retransmissions: conn.stats.retransmissions,
        spurious_retransmissions: conn.stats.spurious_retransmissions,
        closed_error: t
            .closed_error
            .or_else(|| (t.failed > 0).then(|| format!("{} messages failed", t.failed))),
        conn: conn.stats,
        path_stats: conn.path_stats,
        endpoint: d.endpoint.stats().clone(),
        driver: d.impair_stats(),
        pcap_frames: d.pcap_frames(),
        region_digest: None,
    }
}
