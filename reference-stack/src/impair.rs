//! The driver's impairment layer: seeded loss (global and per ev), delay,
//! jitter, reordering, duplication, trimming, CE marking and blackholing
//! one ev for a time, applied to datagrams on transmit and/or receive so
//! lossy-fabric behaviour is reproducible on one machine.
//!
//! Trimming keeps the header only (the length comes from proto-parse's
//! layout), as a switch that trims does.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use proto_parse::metaroce::{Packet, PacketType};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::Time;

/// One ev dropping everything in `[start, start + duration)` (ns after the
/// driver started).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Blackhole {
    pub ev: u16,
    pub start: Time,
    pub duration: Time,
}

/// What to do to datagrams. Probabilities are fractions (0.01 = 1%).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Impairment {
    pub loss: f64,
    pub per_ev_loss: BTreeMap<u16, f64>,
    pub delay: Time,
    pub jitter: Time,
    pub reorder: f64,
    pub reorder_delay: Time,
    pub dup: f64,
    pub trim: f64,
    pub ce: f64,
    pub blackholes: Vec<Blackhole>,
}

impl Impairment {
    pub fn is_none(&self) -> bool {
        *self == Impairment::default()
    }
}

/// Counters of the impairment layer.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub struct ImpairStats {
    pub passed: u64,
    pub dropped: u64,
    pub blackholed: u64,
    pub duplicated: u64,
    pub trimmed: u64,
    pub ce_marked: u64,
    pub reordered: u64,
}

/// A datagram released by the impairment layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Released<M> {
    pub meta: M,
    pub bytes: Vec<u8>,
    pub ce: bool,
}

/// Applies an [`Impairment`]; delayed datagrams wait in a timed queue.
#[derive(Debug)]
pub struct Impairer<M> {
    cfg: Impairment,
    rng: ChaCha8Rng,
    queue: BinaryHeap<Reverse<(Time, u64)>>,
    held: BTreeMap<u64, Released<M>>,
    seq: u64,
    pub stats: ImpairStats,
}

impl<M: Clone> Impairer<M> {
    pub fn new(cfg: Impairment, seed: u64) -> Self {
        Impairer {
            cfg,
            rng: ChaCha8Rng::seed_from_u64(seed),
            queue: BinaryHeap::new(),
            held: BTreeMap::new(),
            seq: 0,
            stats: ImpairStats::default(),
        }
    }

    pub fn is_passthrough(&self) -> bool {
        self.cfg.is_none()
    }

    fn hold(&mut self, at: Time, r: Released<M>) {
        self.seq += 1;
        self.queue.push(Reverse((at, self.seq)));
        self.held.insert(self.seq, r);
    }

    /// Submits one datagram sent or received on `ev` at `now`; it comes
    /// out of [`Impairer::pop_due`] (possibly never, twice, later, trimmed or
    /// CE-marked).
    pub fn submit(&mut self, now: Time, ev: u16, meta: M, mut bytes: Vec<u8>, ce: bool) {
        let cfg = &self.cfg;
        if cfg
            .blackholes
            .iter()
            .any(|b| b.ev == ev && now >= b.start && now < b.start.saturating_add(b.duration))
        {
            self.stats.blackholed += 1;
            return;
        }
        let loss = cfg.per_ev_loss.get(&ev).copied().unwrap_or(cfg.loss);
        if loss > 0.0 && self.rng.random_bool(loss.min(1.0)) {
            self.stats.dropped += 1;
            return;
        }
        let mut ce = ce;
        if cfg.ce > 0.0 && self.rng.random_bool(cfg.ce.min(1.0)) {
            ce = true;
            self.stats.ce_marked += 1;
        }
        if cfg.trim > 0.0 && self.rng.random_bool(cfg.trim.min(1.0)) {
            let header = Packet::new_checked(&bytes[..])
                .ok()
                .filter(|p| p.packet_type() == PacketType::Data)
                .and_then(|p| p.layout(bytes.len()).ok())
                .filter(|l| l.payload.end > l.payload.start)
                .map(|l| l.header_len);
            if let Some(h) = header {
                bytes.truncate(h);
                self.stats.trimmed += 1;
            }
        }
        let mut at = now + cfg.delay;
        if cfg.jitter > 0 {
            at += self.rng.random_range(0..cfg.jitter);
        }
        if cfg.reorder > 0.0 && self.rng.random_bool(cfg.reorder.min(1.0)) {
            at += cfg.reorder_delay;
            self.stats.reordered += 1;
        }
        if cfg.dup > 0.0 && self.rng.random_bool(cfg.dup.min(1.0)) {
            self.stats.duplicated += 1;
            let extra = at + self.rng.random_range(0..cfg.delay.max(10_000));
            self.hold(
                extra,
                Released {
                    meta: meta.clone(),
                    bytes: bytes.clone(),
                    ce,
                },
            );
        }
        self.stats.passed += 1;
        self.hold(at, Released { meta, bytes, ce });
    }

    /// The next datagram whose time has come.
    pub fn pop_due(&mut self, now: Time) -> Option<Released<M>> {
        let Reverse((t, id)) = *self.queue.peek()?;
        if t > now {
            return None;
        }
        self.queue.pop();
        self.held.remove(&id)
    }

    pub fn next_release(&self) -> Option<Time> {
        self.queue.peek().map(|Reverse((t, _))| *t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn impairer_is_seeded_and_counts() {
        let cfg = Impairment {
            loss: 0.1,
            dup: 0.1,
            delay: 1000,
            jitter: 500,
            blackholes: vec![Blackhole {
                ev: 2,
                start: 0,
                duration: 1_000_000,
            }],
            ..Impairment::default()
        };
        let run = || {
            let mut i = Impairer::new(cfg.clone(), 7);
            let mut out = Vec::new();
            for k in 0..1000u64 {
                i.submit(k * 100, (k % 4) as u16, k, vec![k as u8], false);
                while let Some(r) = i.pop_due(k * 100) {
                    out.push(r.meta);
                }
            }
            while let Some(r) = i.pop_due(u64::MAX) {
                out.push(r.meta);
            }
            (out, i.stats)
        };
        let (a, sa) = run();
        let (b, _) = run();
        assert_eq!(a, b);
        assert_eq!(sa.blackholed, 250);
        assert!(sa.dropped > 30 && sa.duplicated > 30, "{sa:?}");
        assert!(!a.iter().any(|k| k % 4 == 2));
    }
}
