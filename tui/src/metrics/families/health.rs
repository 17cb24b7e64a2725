//! The process's and the capture's own health: libpcap's counters, the
//! engine's state, the exporter's folding, CPU and memory.

use crate::metrics::exposition::{Kind, Writer, labels};
use crate::model::{RunState, Snapshot};

/// What a scrape reads of the process itself (`/proc/self`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProcessHealth {
    pub cpu_seconds: f64,
    pub resident_bytes: u64,
}

impl ProcessHealth {
    pub fn read() -> ProcessHealth {
        let cpu_seconds =
            crate::model::ProcessStats::read(0.0).map_or(0.0, |p| p.cpu_user_s + p.cpu_system_s);
        // statm: size resident ... in pages.
        let resident_bytes = std::fs::read_to_string("/proc/self/statm")
            .ok()
            .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
            .map_or(0, |pages| pages * page_size());
        ProcessHealth {
            cpu_seconds,
            resident_bytes,
        }
    }
}

fn page_size() -> u64 {
    rustix::param::page_size() as u64
}

/// The process's and the capture's own health.
pub(super) fn write(w: &mut Writer, snap: &Snapshot, health: ProcessHealth, folded: [u64; 3]) {
    let st = &snap.stats;
    let cap = &snap.report.capture;
    let eng = &snap.report.engine;
    let one = |w: &mut Writer, name: &str, kind: Kind, help: &str, v: u64| {
        w.family(name, kind, help);
        w.sample(name, "", None, v);
    };
    one(
        w,
        "metaroce_capture_received_packets",
        Kind::Counter,
        "Packets libpcap received (ps_recv); a replay: records read.",
        st.received,
    );
    w.family("metaroce_capture_drops", Kind::Counter, "Packets dropped before the analysis: by the kernel (ps_drop, capture buffer full) or the interface (ps_ifdrop). The capture thread feeds the engine directly: it has no queue of its own to drop from.");
    w.sample(
        "metaroce_capture_drops",
        "",
        Some(("where", "kernel")),
        st.kernel_drops,
    );
    w.sample(
        "metaroce_capture_drops",
        "",
        Some(("where", "interface")),
        st.interface_drops,
    );
    one(
        w,
        "metaroce_capture_errors",
        Kind::Counter,
        "Capture-file records that could not be read (replay).",
        st.capture_errors,
    );
    one(
        w,
        "metaroce_frames",
        Kind::Counter,
        "Frames handed to the engine.",
        st.frames,
    );
    one(
        w,
        "metaroce_frame_bytes",
        Kind::Counter,
        "Wire bytes of the frames handed to the engine.",
        st.bytes,
    );
    w.family(
        "metaroce_parsed_packets",
        Kind::Counter,
        "Packets parsed, by protocol (malformed ones included).",
    );
    w.sample(
        "metaroce_parsed_packets",
        "",
        Some(("protocol", "metaroce")),
        cap.metaroce_packets,
    );
    w.sample(
        "metaroce_parsed_packets",
        "",
        Some(("protocol", "rocev2")),
        cap.rocev2_packets,
    );
    one(
        w,
        "metaroce_parse_errors",
        Kind::Counter,
        "Packets of our ports that could not be decoded as their protocol (counted, not analysed).",
        cap.malformed,
    );
    one(
        w,
        "metaroce_ip_fragments",
        Kind::Counter,
        "IP fragments captured.",
        cap.ip_fragments,
    );
    one(
        w,
        "metaroce_reassembled_datagrams",
        Kind::Counter,
        "Datagrams rebuilt from IP fragments.",
        cap.reassembled_datagrams,
    );
    one(
        w,
        "metaroce_incomplete_datagrams",
        Kind::Counter,
        "Datagrams whose fragments never all came (given up after 30 s).",
        cap.incomplete_datagrams,
    );
    w.family(
        "metaroce_engine_flows",
        Kind::Gauge,
        "Flows the engine holds.",
    );
    w.sample(
        "metaroce_engine_flows",
        "",
        Some(("protocol", "metaroce")),
        eng.live_directions,
    );
    w.sample(
        "metaroce_engine_flows",
        "",
        Some(("protocol", "rocev2")),
        eng.live_rocev2_flows,
    );
    w.family(
        "metaroce_engine_evicted_flows",
        Kind::Counter,
        "Flows the engine evicted at its flow limit.",
    );
    w.sample(
        "metaroce_engine_evicted_flows",
        "",
        Some(("protocol", "metaroce")),
        eng.evicted_directions,
    );
    w.sample(
        "metaroce_engine_evicted_flows",
        "",
        Some(("protocol", "rocev2")),
        eng.evicted_rocev2_flows,
    );
    if let Some(s) = &snap.engine_state {
        w.family(
            "metaroce_engine_state_entries",
            Kind::Gauge,
            "Entries of the engine's state (its memory is bounded by them).",
        );
        for (kind, n) in [
            ("directions", s.directions),
            ("rocev2_flows", s.rocev2_flows),
            ("window_slots", s.window_slots),
            ("paths", s.paths),
            ("messages", s.messages),
            ("pending", s.pending),
            ("stalls", s.stalls),
            ("late_echoes", s.late_echoes),
            ("rocev2_slots", s.rocev2_slots),
            ("rocev2_messages", s.rocev2_messages),
        ] {
            w.sample(
                "metaroce_engine_state_entries",
                "",
                Some(("kind", kind)),
                n as u64,
            );
        }
    }
    one(
        w,
        "metaroce_rocev2_unmatched_responses",
        Kind::Counter,
        "RoCEv2 responses matched to no request flow.",
        eng.rocev2_unmatched_responses,
    );
    one(
        w,
        "metaroce_rocev2_not_rc_packets",
        Kind::Counter,
        "RoCEv2 packets of other services (UD, UC...): counted, not analysed.",
        eng.rocev2_not_rc,
    );
    w.family(
        "metaroce_exporter_folded_flows",
        Kind::Gauge,
        "Flows folded into the src=\"other\" series by --metrics-max-series, by table.",
    );
    for (table, n) in ["directions", "paths", "rocev2"].into_iter().zip(folded) {
        w.sample(
            "metaroce_exporter_folded_flows",
            "",
            Some(("table", table)),
            n,
        );
    }
    // Capture points (plain frames, each mirror session): a collector's
    // sessions, and the copies of host pairs analysed from another point.
    w.family(
        "metaroce_capture_point_packets",
        Kind::Counter,
        "Packets of ours each capture point carried (plain frames, or a mirror session).",
    );
    for p in &snap.points {
        let l = labels(&[("point", &p.name)]);
        w.sample("metaroce_capture_point_packets", &l, None, p.packets);
    }
    w.family(
        "metaroce_capture_point_copies_not_analysed",
        Kind::Counter,
        "Copies a capture point carried of host pairs another point is analysed from.",
    );
    for p in &snap.points {
        let l = labels(&[("point", &p.name)]);
        w.sample(
            "metaroce_capture_point_copies_not_analysed",
            &l,
            None,
            p.copies_not_analysed,
        );
    }
    let running = matches!(snap.state, RunState::Running);
    one(
        w,
        "metaroce_capture_running",
        Kind::Gauge,
        "1 while capturing; 0 once a replay ended or the capture failed.",
        u64::from(running),
    );
    w.family(
        "metaroce_capture_time_seconds",
        Kind::Gauge,
        "The capture clock: the latest packet's timestamp (Unix seconds).",
    );
    w.sample_f64(
        "metaroce_capture_time_seconds",
        "",
        snap.report.capture.last_ts_ns as f64 / 1e9,
    );
    w.family(
        "process_cpu_seconds",
        Kind::Counter,
        "CPU time of the process (user and system).",
    );
    w.sample_f64("process_cpu_seconds", "", health.cpu_seconds);
    one(
        w,
        "process_resident_memory_bytes",
        Kind::Gauge,
        "Resident memory of the process.",
        health.resident_bytes,
    );
    w.family(
        "metaroce_build",
        Kind::Info,
        "Build: version of metaroce-top.",
    );
    w.sample(
        "metaroce_build",
        "",
        Some(("version", env!("CARGO_PKG_VERSION"))),
        1,
    );
}
