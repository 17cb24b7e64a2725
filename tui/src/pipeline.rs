//! Frames in, snapshots out: decode with `proto_parse`, analyse with the
//! analyzer's flow engine, and gather what the panes show. No threads, no
//! clock of its own: the capture thread (and tests) pass the times in.

use std::collections::HashMap;
use std::hash::Hash;

use analyzer::engine::MirrorTag;
use analyzer::traffic::{self, Census};
use analyzer::{Config, Engine, Observation};
use proto_parse::defrag::{self, Reassembler, Reassembly};
use proto_parse::frame::{DecodeConfig, LinkType};
use proto_parse::mirror::MirrorSource;

use crate::events::{EventConfig, EventDetector};
use crate::latency::LatencyRecorder;
use crate::metrics::latency::Recorder;
use crate::model::{CaptureStats, DirKey, DirRate, RoceKey, RunState, Snapshot, SourceInfo};
use crate::points::{self, CapturePoints};

/// Decode settings for the UDP ports, from the command line.
pub fn decode_config(metaroce_port: u16, rocev2_port: u16) -> DecodeConfig {
    DecodeConfig {
        metaroce_port,
        rocev2_port,
        heuristic: false,
        // The engine does not use the RoCEv2 ICRC; checking it costs more
        // than the rest of decoding.
        verify_crc: false,
    }
}

/// The capture-side state behind the panes.
pub struct Pipeline {
    source: SourceInfo,
    decode: DecodeConfig,
    engine_cfg: Config,
    event_cfg: EventConfig,
    engine: Engine,
    /// IP fragments wait here for their datagram (the slow route: a frame
    /// `Observation::decode` takes never reaches it).
    reassembler: Reassembler,
    /// What the frames that made no packet were (mirrors, other ports).
    census: Census,
    /// Which capture point (plain, or a mirror session) each host pair is
    /// analysed from.
    points: CapturePoints,
    latency: LatencyRecorder,
    events: EventDetector,
    frame_no: u64,
    bytes: u64,
    seq: u64,
    /// For rates: previous tick's (wall ns, frames, bytes), the capture
    /// time the flow counters below were taken at, and those counters:
    /// goodput bytes per MetaRoCE direction, request bytes per RoCEv2 flow.
    prev_wall: Option<(u64, u64, u64)>,
    prev_capture_ns: u64,
    dir_rates: FlowRates<DirKey>,
    roce_rates: FlowRates<RoceKey>,
    last_rates: (f64, f64),
    /// `--metrics`: the latency histograms fed from the verdicts.
    metrics: Option<Recorder>,
}

/// Rates of each flow between snapshots, from its (bytes, packets)
/// counters on the capture clock.
#[derive(Debug)]
struct FlowRates<K> {
    /// Counters at the last snapshot the capture clock moved for.
    prev: HashMap<K, (u64, u64)>,
    /// The rates last computed.
    rates: HashMap<K, DirRate>,
    /// Counters of this snapshot, until [`FlowRates::commit`].
    next: HashMap<K, (u64, u64)>,
}

impl<K> Default for FlowRates<K> {
    fn default() -> Self {
        FlowRates {
            prev: HashMap::new(),
            rates: HashMap::new(),
            next: HashMap::new(),
        }
    }
}

impl<K: Copy + Eq + Hash> FlowRates<K> {
    /// The rate of `key`, whose counters are now (`bytes`, `packets`),
    /// `dt` seconds of capture clock after the last commit; `first` when
    /// the flow is new.
    fn rate(&mut self, key: K, bytes: u64, packets: u64, dt: f64, first: DirRate) -> DirRate {
        let rate = match self.prev.get(&key) {
            Some(&(b, p)) if dt > 0.0 => DirRate {
                goodput_bps: bytes.saturating_sub(b) as f64 * 8.0 / dt,
                packets_per_s: packets.saturating_sub(p) as f64 / dt,
            },
            // The capture clock stood still (a finished replay): keep the
            // last rates.
            Some(_) => self.rates.get(&key).copied().unwrap_or_default(),
            None => first,
        };
        self.rates.insert(key, rate);
        self.next.insert(key, (bytes, packets));
        rate
    }

    /// Ends a snapshot: flows no longer reported are forgotten, and the
    /// counters become the reference if the capture clock moved.
    fn commit(&mut self, clock_moved: bool) {
        let next = std::mem::take(&mut self.next);
        self.rates.retain(|k, _| next.contains_key(k));
        if clock_moved {
            self.prev = next;
        } else {
            for (k, v) in next {
                self.prev.entry(k).or_insert(v);
            }
        }
    }
}

impl Pipeline {
    pub fn new(
        source: SourceInfo,
        decode: DecodeConfig,
        engine_cfg: Config,
        event_cfg: EventConfig,
    ) -> Pipeline {
        Pipeline {
            source,
            decode,
            engine_cfg,
            event_cfg,
            engine: Engine::new(engine_cfg),
            reassembler: Reassembler::default(),
            census: Census::default(),
            points: CapturePoints::default(),
            latency: LatencyRecorder::default(),
            events: EventDetector::new(event_cfg),
            frame_no: 0,
            bytes: 0,
            seq: 0,
            prev_wall: None,
            prev_capture_ns: 0,
            dir_rates: FlowRates::default(),
            roce_rates: FlowRates::default(),
            last_rates: (0.0, 0.0),
            metrics: None,
        }
    }

    /// Feeds the exporter's latency histograms from now on (`--metrics`):
    /// per connection or per host pair, at most `max_keys` keys.
    pub fn with_metrics(mut self, per_connection: bool, max_keys: usize) -> Pipeline {
        self.metrics = Some(Recorder::new(per_connection, max_keys));
        self
    }

    /// Forgets everything seen so far (the `r` key).
    pub fn reset(&mut self) {
        self.engine = Engine::new(self.engine_cfg);
        self.reassembler = Reassembler::default();
        self.census = Census::default();
        self.points = CapturePoints::default();
        self.latency = LatencyRecorder::default();
        self.events = EventDetector::new(self.event_cfg);
        self.frame_no = 0;
        self.bytes = 0;
        self.prev_wall = None;
        self.prev_capture_ns = 0;
        self.dir_rates = FlowRates::default();
        self.roce_rates = FlowRates::default();
        if let Some(rec) = &mut self.metrics {
            rec.clear();
        }
    }

    /// Frames handed to the engine since the start (or the last reset).
    pub fn frames(&self) -> u64 {
        self.frame_no
    }

    /// The engine's capture clock (ns).
    pub fn now_ns(&self) -> u64 {
        self.engine.now()
    }

    /// One captured frame.
    #[inline]
    pub fn on_frame(&mut self, link: LinkType, ts_ns: u64, data: &[u8], wire_len: u32) {
        self.frame_no += 1;
        self.bytes += u64::from(wire_len);
        let (obs, source) = self.decode(link, ts_ns, data);
        let engine = &self.engine;
        let obs = obs.filter(|obs| {
            self.points.admit(source, obs.src, obs.dst, || {
                points::pairs_of(&engine.snapshot())
            })
        });
        match obs {
            Some(obs) => {
                let v = self.engine.ingest(&obs);
                if let Some(rtt) = v.ack_rtt_ns {
                    self.latency.record(rtt);
                }
                if let Some(rec) = &mut self.metrics {
                    rec.record(&obs, &v, self.engine.messages_done());
                }
                if !v.lint.is_empty() {
                    // The panes show the report's per-rule counts; the
                    // findings themselves are not kept.
                    self.engine.clear_findings();
                }
            }
            None => self.engine.ingest_other(ts_ns),
        }
    }

    /// The frame's observation and the mirror session that carried it:
    /// the routes of [`Observation::decode`], keeping the session.
    #[inline]
    fn decode(
        &mut self,
        link: LinkType,
        ts_ns: u64,
        data: &[u8],
    ) -> (Option<Observation>, Option<MirrorSource>) {
        let n = self.frame_no;
        if let Some(plain) = Observation::decode_common(n, ts_ns, link, data, &self.decode) {
            return (plain, None);
        }
        if let Some((obs, tag)) =
            Observation::decode_common_mirrored(n, ts_ns, link, data, &self.decode)
        {
            self.census.mirrored(&tag);
            return (Some(obs), Some(tag.source));
        }
        match Observation::decode_full(n, ts_ns, link, data, &self.decode) {
            (Some(obs), tag) => {
                if let Some(tag) = &tag {
                    self.census.mirrored(tag);
                }
                (Some(obs), tag.map(|t| t.source))
            }
            (None, _) => self.reassemble(link, ts_ns, data),
        }
    }

    /// A frame the decode routes did not take: if it is the IP fragment
    /// that completes a datagram, the datagram's observation (at this
    /// frame) and, for a mirror's copy, its session: a copy whose outer
    /// datagram the collector path cut, or a packet cut before it was
    /// mirrored (the session that carried its fragments).
    fn reassemble(
        &mut self,
        link: LinkType,
        ts_ns: u64,
        data: &[u8],
    ) -> (Option<Observation>, Option<MirrorSource>) {
        if !defrag::is_fragment(link, data) {
            self.census.other(link, data, &self.decode);
            return (None, None);
        }
        let Reassembly::Datagram(ip) = self.reassembler.push(ts_ns, link, data) else {
            return (None, None);
        };
        let (obs, outer) =
            Observation::decode_full(self.frame_no, ts_ns, LinkType::Raw, ip, &self.decode);
        if obs.is_none() {
            if outer.is_some() {
                self.census.other(LinkType::Raw, ip, &self.decode);
            }
            return (None, None);
        }
        let tag = outer.or_else(|| self.reassembler.mirror().as_ref().map(MirrorTag::of));
        if let Some(tag) = &tag {
            self.census.mirrored(tag);
        }
        (obs, tag.map(|t| t.source))
    }

    /// Moves the capture clock without a packet (stalls become visible).
    pub fn advance_time(&mut self, now_ns: u64) {
        self.engine.advance_time(now_ns);
    }

    /// Ends a replay at its last timestamp.
    pub fn finish(&mut self) {
        let now = self.engine.now();
        self.engine.finish(now);
        self.reassembler.finish();
    }

    /// Builds the snapshot for this tick. `wall_ns` is a monotonic wall
    /// clock (ns since the capture started) for packet and byte rates;
    /// `stats` carries libpcap's counters (received and drops).
    pub fn snapshot(&mut self, wall_ns: u64, state: RunState, mut stats: CaptureStats) -> Snapshot {
        self.seq += 1;
        let mut report = self.engine.snapshot();
        let r = self.reassembler.stats();
        report.capture.ip_fragments = r.fragments;
        report.capture.reassembled_datagrams = r.datagrams;
        report.capture.incomplete_datagrams = r.incomplete_datagrams;
        report.capture.incomplete_fragments = r.incomplete_fragments;
        report.capture.traffic = self.census.report();
        let c = &report.capture;
        report.capture.traffic.note =
            traffic::explain(c.frames, c.metaroce_packets + c.rocev2_packets, &c.traffic);
        let now = self.engine.now();
        self.events.update(&report, now);

        stats.frames = self.frame_no;
        stats.bytes = self.bytes;
        match self.prev_wall {
            Some((w, f, b)) if wall_ns > w => {
                let dt = (wall_ns - w) as f64 / 1e9;
                self.last_rates = (
                    self.frame_no.saturating_sub(f) as f64 / dt,
                    self.bytes.saturating_sub(b) as f64 / dt,
                );
            }
            Some(_) => {}
            None => self.last_rates = (0.0, 0.0),
        }
        self.prev_wall = Some((wall_ns, self.frame_no, self.bytes));
        (stats.packets_per_s, stats.bytes_per_s) = self.last_rates;

        let dt = now.saturating_sub(self.prev_capture_ns) as f64 / 1e9;
        let rates = report
            .directions
            .iter()
            .map(|d| {
                let sent = d.data_packets + d.feedback_sent + d.probes + d.ctrl;
                // First sight: the whole life so far.
                let first = DirRate {
                    goodput_bps: d.goodput_bps as f64,
                    packets_per_s: 0.0,
                };
                self.dir_rates
                    .rate(DirKey::of(d), d.goodput_bytes, sent, dt, first)
            })
            .collect();
        let rocev2_rates = report
            .rocev2
            .iter()
            .map(|f| {
                let sent = f.data_packets
                    + f.acks
                    + f.naks
                    + f.rnr_naks
                    + f.cnps
                    + f.read_response_packets;
                self.roce_rates
                    .rate(RoceKey::of(f), f.data_bytes, sent, dt, DirRate::default())
            })
            .collect();
        self.dir_rates.commit(dt > 0.0);
        self.roce_rates.commit(dt > 0.0);
        if dt > 0.0 {
            self.prev_capture_ns = now;
        }

        Snapshot {
            source: self.source.clone(),
            state,
            seq: self.seq,
            elapsed_s: wall_ns as f64 / 1e9,
            stats,
            rates,
            rocev2_rates,
            latency: self.latency.view(),
            events: self.events.events(),
            process: None,
            points: self.points.view(),
            report,
            histograms: self.metrics.as_mut().map(Recorder::publish),
            engine_state: self.metrics.as_ref().map(|_| self.engine.state_size()),
        }
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn flow_rates_over_the_capture_clock() {
        let first = DirRate {
            goodput_bps: 7.0,
            packets_per_s: 0.0,
        };
        let mut r = FlowRates::<u8>::default();
        // First sight: `first`, whatever dt says.
        assert_eq!(r.rate(1, 1000, 10, 0.5, first), first);
        r.commit(true);
        // 0.5 s later: 1000 bytes and 10 packets more.
        let moved = DirRate {
            goodput_bps: 16_000.0,
            packets_per_s: 20.0,
        };
        assert_eq!(r.rate(1, 2000, 20, 0.5, first), moved);
        r.commit(true);
        // The clock stood still: the last rates stay, the reference too.
        assert_eq!(r.rate(1, 2500, 25, 0.0, first), moved);
        r.commit(false);
        assert_eq!(
            r.rate(1, 3000, 30, 1.0, first),
            DirRate {
                goodput_bps: 8_000.0,
                packets_per_s: 10.0,
            }
        );
        r.commit(true);
        // A flow the report no longer lists is forgotten: new again.
        r.commit(true);
        assert_eq!(r.rate(1, 4000, 40, 1.0, first), first);
    }
}
