//! The event log: notable changes found by comparing successive engine
//! reports (stalls, NACK bursts, CNP bursts, new connections, paths that
//! went quiet or came back; for RoCEv2 flows: new flows, NAK and RNR NAK
//! bursts, CNP bursts). It reads only [`Report`]s: the flow analysis itself
//! stays in the engine.

use std::collections::{BTreeMap, HashMap, VecDeque};

use analyzer::Report;
use serde::Serialize;

use crate::model::{DirKey, RoceKey};

/// Most events kept.
pub const MAX_EVENTS: usize = 1000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    NewConnection,
    Stall,
    StallEnded,
    NackBurst,
    CnpBurst,
    PathRetired,
    PathResumed,
}

impl EventKind {
    pub const fn label(self) -> &'static str {
        match self {
            EventKind::NewConnection => "NEW",
            EventKind::Stall => "STALL",
            EventKind::StallEnded => "STALL END",
            EventKind::NackBurst => "NACK",
            EventKind::CnpBurst => "CNP",
            EventKind::PathRetired => "PATH OFF",
            EventKind::PathResumed => "PATH ON",
        }
    }
}

/// The flow an event is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FlowKey {
    /// A MetaRoCE connection direction.
    Metaroce(DirKey),
    /// A RoCEv2 RC flow (its requests' direction and destination QP).
    Rocev2(RoceKey),
}

impl std::fmt::Display for FlowKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FlowKey::Metaroce(k) => k.fmt(f),
            FlowKey::Rocev2(k) => k.fmt(f),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Event {
    /// Capture time (ns) at which it was seen.
    pub ts_ns: u64,
    pub kind: EventKind,
    pub flow: FlowKey,
    pub ev: Option<u16>,
    pub text: String,
}

/// Thresholds of the detector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventConfig {
    /// NACKs (or CNPs) of one direction within one tick that make a burst.
    pub burst: u64,
    /// A path with no packet for this long while its direction still sends
    /// on other paths is reported retired (capture clock).
    pub path_idle_ns: u64,
}

impl Default for EventConfig {
    fn default() -> Self {
        EventConfig {
            burst: 1,
            path_idle_ns: 1_000_000_000,
        }
    }
}

#[derive(Debug, Default)]
struct DirSeen {
    nacks: u64,
    cnps: u64,
    nacks_by_code: BTreeMap<String, u64>,
    cnps_by_reason: BTreeMap<String, u64>,
    /// start_ns -> still open when last seen.
    stalls: HashMap<u64, bool>,
    /// ev -> (packets, capture time of the last change, retired).
    paths: BTreeMap<u16, (u64, u64, bool)>,
}

#[derive(Debug, Default)]
struct RoceSeen {
    naks: u64,
    rnr_naks: u64,
    cnps: u64,
    naks_by_code: BTreeMap<&'static str, u64>,
}

/// Diffs successive reports into events.
#[derive(Debug, Default)]
pub struct EventDetector {
    cfg: EventConfig,
    dirs: HashMap<DirKey, DirSeen>,
    roce: HashMap<RoceKey, RoceSeen>,
    log: VecDeque<Event>,
}

fn diff_map<K: Ord + std::fmt::Display>(
    now: &BTreeMap<K, u64>,
    before: &BTreeMap<K, u64>,
) -> String {
    now.iter()
        .filter_map(|(k, v)| {
            let d = v - before.get(k).copied().unwrap_or(0).min(*v);
            (d > 0).then(|| format!("{k} {d}"))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn ms(ns: u64) -> String {
    format!("{:.3} ms", ns as f64 / 1e6)
}

impl EventDetector {
    pub fn new(cfg: EventConfig) -> Self {
        EventDetector {
            cfg,
            ..EventDetector::default()
        }
    }

    pub fn events(&self) -> Vec<Event> {
        self.log.iter().cloned().collect()
    }

    fn push(&mut self, e: Event) {
        if self.log.len() == MAX_EVENTS {
            self.log.pop_front();
        }
        self.log.push_back(e);
    }

    /// Compares `report` (capture clock `now_ns`) with the previous one.
    pub fn update(&mut self, report: &Report, now_ns: u64) {
        let mut out = Vec::new();
        for d in &report.directions {
            let key = DirKey::of(d);
            let is_new = !self.dirs.contains_key(&key);
            let seen = self.dirs.entry(key).or_default();
            let ev_event = |kind, ev, text: String| Event {
                ts_ns: now_ns,
                kind,
                flow: FlowKey::Metaroce(key),
                ev,
                text,
            };
            if is_new && d.data_packets > 0 {
                out.push(ev_event(
                    EventKind::NewConnection,
                    None,
                    format!("first DATA at frame {}", d.first_frame),
                ));
            }
            if d.nacks > seen.nacks && d.nacks - seen.nacks >= self.cfg.burst {
                out.push(ev_event(
                    EventKind::NackBurst,
                    None,
                    format!(
                        "{} NACK(s): {}",
                        d.nacks - seen.nacks,
                        diff_map(&d.nacks_by_code, &seen.nacks_by_code)
                    ),
                ));
            }
            if d.cnps > seen.cnps && d.cnps - seen.cnps >= self.cfg.burst {
                out.push(ev_event(
                    EventKind::CnpBurst,
                    None,
                    format!(
                        "{} CNP(s): {}",
                        d.cnps - seen.cnps,
                        diff_map(&d.cnps_by_reason, &seen.cnps_by_reason)
                    ),
                ));
            }
            seen.nacks = d.nacks;
            seen.cnps = d.cnps;
            seen.nacks_by_code.clone_from(&d.nacks_by_code);
            seen.cnps_by_reason.clone_from(&d.cnps_by_reason);
            for s in &d.stalls {
                let before = seen.stalls.insert(s.start_ns, s.open);
                let text = if s.open {
                    format!(
                        "open {}: {} packets outstanding, paths {}",
                        ms(s.duration_ns),
                        s.outstanding_packets,
                        crate::render::fmt::evs(&s.paths_in_flight)
                    )
                } else {
                    format!(
                        "{} ended by {} ({} outstanding)",
                        ms(s.duration_ns),
                        s.end_cause.replace('_', " "),
                        s.outstanding_packets
                    )
                };
                match before {
                    None => out.push(ev_event(EventKind::Stall, None, text)),
                    Some(true) if !s.open => out.push(ev_event(EventKind::StallEnded, None, text)),
                    _ => {}
                }
            }
            let mut active_other = false;
            for p in &d.paths {
                let e = seen.paths.entry(p.ev).or_insert((0, now_ns, false));
                if p.packets != e.0 {
                    e.0 = p.packets;
                    e.1 = now_ns;
                    active_other = true;
                    if e.2 {
                        e.2 = false;
                        out.push(ev_event(
                            EventKind::PathResumed,
                            Some(p.ev),
                            format!("ev {} carries traffic again", p.ev),
                        ));
                    }
                }
            }
            for (&ev, e) in &mut seen.paths {
                let quiet = now_ns.saturating_sub(e.1);
                if !e.2 && quiet >= self.cfg.path_idle_ns && d.last_ts_ns > e.1 && active_other {
                    e.2 = true;
                    out.push(Event {
                        ts_ns: now_ns,
                        kind: EventKind::PathRetired,
                        flow: FlowKey::Metaroce(key),
                        ev: Some(ev),
                        text: format!(
                            "ev {ev} silent for {} while other paths carry traffic",
                            ms(quiet)
                        ),
                    });
                }
            }
        }
        self.update_rocev2(report, now_ns, &mut out);
        for e in out {
            self.push(e);
        }
    }

    fn update_rocev2(&mut self, report: &Report, now_ns: u64, out: &mut Vec<Event>) {
        for f in &report.rocev2 {
            let key = RoceKey::of(f);
            let is_new = !self.roce.contains_key(&key);
            let seen = self.roce.entry(key).or_default();
            let event = |kind, text: String| Event {
                ts_ns: now_ns,
                kind,
                flow: FlowKey::Rocev2(key),
                ev: None,
                text,
            };
            if is_new && f.data_packets > 0 {
                out.push(event(
                    EventKind::NewConnection,
                    format!("first request at frame {}", f.first_frame),
                ));
            }
            let naks = f.naks.saturating_sub(seen.naks);
            let rnr = f.rnr_naks.saturating_sub(seen.rnr_naks);
            if naks + rnr > 0 && naks + rnr >= self.cfg.burst {
                let mut parts = Vec::new();
                if naks > 0 {
                    parts.push(diff_map(&f.naks_by_code, &seen.naks_by_code));
                }
                if rnr > 0 {
                    parts.push(format!("RNR {rnr}"));
                }
                out.push(event(
                    EventKind::NackBurst,
                    format!("{} NAK(s): {}", naks + rnr, parts.join(", ")),
                ));
            }
            let cnps = f.cnps.saturating_sub(seen.cnps);
            if cnps > 0 && cnps >= self.cfg.burst {
                out.push(event(EventKind::CnpBurst, format!("{cnps} CNP(s)")));
            }
            seen.naks = f.naks;
            seen.rnr_naks = f.rnr_naks;
            seen.cnps = f.cnps;
            seen.naks_by_code.clone_from(&f.naks_by_code);
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use analyzer::engine::{PathReport, Summary};
    use analyzer::{Config, Engine};

    fn path(ev: u16, packets: u64) -> PathReport {
        PathReport {
            ev,
            packets,
            data_packets: packets,
            data_bytes: 0,
            retransmissions: 0,
            lost: 0,
            lost_inferred: 0,
            reordered: 0,
            ce_marked: 0,
            ack_rtt_ns: Summary::default(),
        }
    }

    /// A report with one direction whose paths carry `packets` at `now`.
    fn report(template: &Report, packets: &[(u16, u64)], now: u64, nacks: u64) -> Report {
        let mut r = template.clone();
        let d = &mut r.directions[0];
        d.paths = packets.iter().map(|&(ev, n)| path(ev, n)).collect();
        d.data_packets = packets.iter().map(|p| p.1).sum();
        d.last_ts_ns = now;
        d.nacks = nacks;
        d.nacks_by_code = [("GAP".to_string(), nacks)].into_iter().collect();
        r
    }

    #[test]
    fn quiet_path_is_retired_then_resumes_and_nack_bursts_count() {
        // A real direction from the fixture, then edited paths.
        let mut engine = Engine::new(Config::default());
        let mut reader = proto_parse::capture::Reader::open(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../fixtures/generated/multipath_loss_sender.pcap"
        ))
        .unwrap();
        let cfg = proto_parse::frame::DecodeConfig::default();
        let mut n = 0;
        while let Some(Ok(rec)) = reader.next_record() {
            n += 1;
            let f =
                proto_parse::frame::decode(proto_parse::frame::LinkType::Ethernet, rec.data, &cfg);
            if let Some(obs) = analyzer::Observation::from_frame(n, rec.ts_ns, &f) {
                engine.ingest(&obs);
            }
        }
        let mut t = engine.snapshot();
        t.directions.retain(|d| d.data_packets > 0);
        t.directions[0].stalls.clear();
        let s = 1_000_000_000;
        let mut det = EventDetector::new(EventConfig {
            burst: 3,
            path_idle_ns: s,
        });
        det.update(&report(&t, &[(0, 10), (1, 10)], 0, 0), 0);
        det.update(&report(&t, &[(0, 20), (1, 10)], s / 2, 2), s / 2);
        det.update(&report(&t, &[(0, 30), (1, 10)], s + 1, 5), s + 1);
        det.update(&report(&t, &[(0, 40), (1, 20)], 2 * s, 5), 2 * s);
        let got: Vec<(EventKind, Option<u16>)> =
            det.events().iter().map(|e| (e.kind, e.ev)).collect();
        assert_eq!(
            got,
            [
                (EventKind::NewConnection, None),
                // 2 NACKs: under the burst threshold of 3; then 3 more.
                (EventKind::NackBurst, None),
                (EventKind::PathRetired, Some(1)),
                (EventKind::PathResumed, Some(1)),
            ]
        );
        assert!(
            det.events()[1].text.starts_with("3 NACK(s): GAP 3"),
            "{:?}",
            det.events()[1]
        );
    }
}
