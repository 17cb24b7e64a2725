//! Several captures analysed together: one engine per capture plus the
//! cross-capture matcher.

use super::super::report::BetweenReport;
use super::super::{Config, Engine, MsgDone, Report, Verdict};
use super::{CaptureCopy, CrossCapture, MAX_CAPTURES, MergeConfig};
use crate::observation::Observation;

/// Several captures analysed together: one engine per capture plus the
/// cross-capture matcher.
pub struct MultiEngine {
    engines: Vec<Engine>,
    cross: CrossCapture,
    /// The capture of the copy the last packet ingested was matched with.
    matched: Option<u16>,
}

impl MultiEngine {
    pub fn new(captures: usize, cfg: Config, merge: MergeConfig) -> Self {
        MultiEngine {
            engines: (0..captures.clamp(1, MAX_CAPTURES))
                .map(|_| Engine::new(cfg))
                .collect(),
            cross: CrossCapture::new(merge),
            matched: None,
        }
    }

    /// The first capture point is `engine`, which has analysed a capture
    /// until it found a second point in it (a second mirror session).
    pub fn from_engine(engine: Engine, merge: MergeConfig) -> Self {
        MultiEngine {
            engines: vec![engine],
            cross: CrossCapture::new(merge),
            matched: None,
        }
    }

    /// Gives the matcher a packet of capture `capture` that its engine
    /// has already ingested (`engine_mut(capture)`): the latest packets of
    /// a capture analysed alone until a second capture point turned up.
    pub fn remember(&mut self, capture: usize, obs: &Observation) {
        let c = capture.min(self.engines.len() - 1);
        self.cross.observe(c as u16, obs);
    }

    /// Adds a capture point (a mirror session found in a capture) and
    /// returns its index. Past [`MAX_CAPTURES`] points the last one takes
    /// the rest.
    pub fn add_capture(&mut self, cfg: Config) -> usize {
        if self.engines.len() < MAX_CAPTURES {
            self.engines.push(Engine::new(cfg));
        }
        self.engines.len() - 1
    }

    /// One packet of capture `capture` (0-based); the verdict is that
    /// capture's own. When the packet is the copy of a transmission in
    /// another capture, the lint (`Config::lint`) judges the two copies
    /// and may record a finding in either capture's engine, on a frame
    /// ingested earlier: [`MultiEngine::matched_capture`] names the other.
    pub fn ingest(&mut self, capture: usize, obs: &Observation) -> Verdict {
        let c = capture.min(self.engines.len() - 1);
        let matched = self.cross.observe(c as u16, obs);
        let v = self.engines[c].ingest(obs);
        self.matched = matched.map(|m| m.capture);
        if let Some(other) = matched {
            self.copies_matched(obs, CaptureCopy::of(c as u16, obs), other);
        }
        v
    }

    /// The capture (0-based) holding the copy that the packet last
    /// ingested was matched with, if any: the lint's findings on either
    /// copy wait in that capture's engine and the packet's own.
    pub fn matched_capture(&self) -> Option<usize> {
        self.matched.map(usize::from)
    }

    /// The same transmission `obs` in two captures (`here`, the packet
    /// just ingested, and `other`, seen earlier): each capture's lint
    /// judges its own copy against the other's (the rules of vantage
    /// two-capture, `lint::network`); its findings wait in that capture's
    /// engine, `Engine::findings`.
    fn copies_matched(&mut self, obs: &Observation, here: CaptureCopy, other: CaptureCopy) {
        for (own, theirs) in [(here, other), (other, here)] {
            if let Some(engine) = self.engines.get_mut(usize::from(own.capture)) {
                engine.lint_copies(obs, own, theirs);
            }
        }
    }

    /// Every message completed at the last packet ingested for `capture`.
    pub fn messages_done(&self, capture: usize) -> &[MsgDone] {
        self.engines.get(capture).map_or(&[], |e| e.messages_done())
    }

    pub fn ingest_other(&mut self, capture: usize, ts_ns: u64) {
        let c = capture.min(self.engines.len() - 1);
        self.cross.tick(c as u16, ts_ns);
        self.engines[c].ingest_other(ts_ns);
    }

    /// Ends every capture (`end_ts_ns[i]`: last time of capture i) and
    /// counts the transmissions never matched (`lost_between`).
    pub fn finish(&mut self, end_ts_ns: &[u64]) {
        for (e, &t) in self.engines.iter_mut().zip(end_ts_ns) {
            e.finish(t);
        }
        self.cross.finish();
    }

    pub fn engine(&self, capture: usize) -> Option<&Engine> {
        self.engines.get(capture)
    }

    /// Capture `capture`'s engine, to clear its lint findings.
    pub fn engine_mut(&mut self, capture: usize) -> Option<&mut Engine> {
        self.engines.get_mut(capture)
    }

    pub fn between(&self) -> Vec<BetweenReport> {
        self.cross.report()
    }

    /// The report of each capture, with `capture.files` set to the number
    /// of captures and `between_captures` filled in the first one.
    pub fn snapshots(&self) -> Vec<Report> {
        let between = self.between();
        self.engines
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let mut r = e.snapshot();
                r.capture.files = self.engines.len() as u64;
                if i == 0 {
                    r.between_captures = between.clone();
                }
                r
            })
            .collect()
    }
}
