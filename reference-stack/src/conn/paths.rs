//! The connection's paths (one per ev): building them, spraying packets
//! over them, their status changes and the per-path share of delivery,
//! congestion and RTO bookkeeping.

use std::collections::BTreeMap;

use super::config::{
    CC_PACKET_OVERHEAD, CONGESTION_EWMA_GAIN, Config, DELIVERY_EWMA_DECAY, MAX_RTO_BACKOFF_SHIFT,
    MIN_ROUND_NS, MIN_ROUND_PACKETS, Mode, RTTVAR_FACTOR, Spray,
};
use crate::Time;
use crate::cc::{CcParams, CongestionController, DelayCc, EcnCc, Signal};
use crate::path::{Path, PathStats, PathStatus};
use crate::trace::{TraceEvent, TxCause};

#[derive(Debug)]
pub(super) struct PathSet {
    pub(super) paths: Vec<Path>,
    /// Round-robin spraying: the next path to try.
    rr: usize,
    /// Sequence number of the next PROBE.
    probe_seq: u32,
    /// Last `path_seq` sent per ev.
    tx_path_seq: BTreeMap<u16, u16>,
}

fn make_cc(cfg: &Config, mtu: u16) -> Box<dyn CongestionController> {
    let mss = u64::from(mtu) + CC_PACKET_OVERHEAD;
    let mut p = CcParams::new(mss);
    p.initial_window = u64::from(cfg.initial_cwnd_packets.max(1)) * mss;
    p.max_window = u64::from(cfg.window_packets) * mss;
    p.target_headroom = cfg.cc_target_headroom;
    match cfg.mode {
        Mode::MetaRoce => Box::new(DelayCc::new(p)),
        Mode::GoBackN => Box::new(EcnCc::new(p)),
    }
}

impl PathSet {
    pub(super) fn new(cfg: &Config, mtu: u16) -> Self {
        let mut set = PathSet {
            paths: Vec::new(),
            rr: 0,
            probe_seq: 1,
            tx_path_seq: BTreeMap::new(),
        };
        set.rebuild(cfg, mtu);
        set
    }

    /// Fresh paths (and controllers) for the negotiated MTU; go-back-N
    /// uses the first ev only.
    pub(super) fn rebuild(&mut self, cfg: &Config, mtu: u16) {
        let evs: &[u16] = match cfg.mode {
            Mode::MetaRoce => &cfg.evs,
            Mode::GoBackN => &cfg.evs[..1],
        };
        self.paths = evs
            .iter()
            .map(|&ev| Path::new(ev, make_cc(cfg, mtu), cfg.reorder_window))
            .collect();
    }

    pub(super) fn index(&self, ev: u16) -> Option<usize> {
        self.paths.iter().position(|p| p.ev == ev)
    }

    pub(super) fn first_ev(&self) -> u16 {
        self.paths[0].ev
    }

    pub(super) fn snapshot(&self) -> Vec<PathStats> {
        self.paths.iter().map(Path::snapshot).collect()
    }

    /// The retransmission timeout: the largest srtt + 4 rttvar over the
    /// paths (at least `rto_min`), doubled per `backoff`, at most `rto_max`.
    pub(super) fn rto(&self, cfg: &Config, backoff: u32) -> u64 {
        let base = self
            .paths
            .iter()
            .filter(|p| p.has_rtt)
            .map(|p| p.srtt + RTTVAR_FACTOR * p.rttvar)
            .max()
            .map_or(cfg.rto_initial, |r| r.max(cfg.rto_min));
        (base << backoff.min(MAX_RTO_BACKOFF_SHIFT)).min(cfg.rto_max)
    }

    pub(super) fn max_srtt(&self) -> u64 {
        self.paths
            .iter()
            .filter(|p| p.has_rtt)
            .map(|p| p.srtt)
            .max()
            .unwrap_or(0)
    }

    /// The latest RTT of the path of `ev`, or the slowest srtt when it has
    /// none.
    pub(super) fn latest_rtt_or_max_srtt(&self, ev: u16) -> u64 {
        match self.index(ev).map(|i| &self.paths[i]) {
            Some(p) if p.has_rtt => p.latest_rtt,
            _ => self.max_srtt(),
        }
    }

    pub(super) fn active_count(&self) -> usize {
        self.paths.iter().filter(|p| p.is_active()).count()
    }

    /// Whether an active path other than `ev` delivered a packet sent after
    /// `sent_at`: evidence that the fabric works elsewhere.
    pub(super) fn others_delivered_after(&self, ev: u16, sent_at: Time) -> bool {
        self.paths
            .iter()
            .any(|q| q.ev != ev && q.is_active() && q.rack_sent_at > sent_at)
    }

    /// The next `path_seq` of `ev` (never 0, which CTRL packets carry).
    pub(super) fn next_path_seq(&mut self, ev: u16) -> u16 {
        let c = self.tx_path_seq.entry(ev).or_insert(0);
        *c = c.wrapping_add(1);
        if *c == 0 {
            *c = 1;
        }
        *c
    }

    pub(super) fn next_probe_seq(&mut self) -> u32 {
        let seq = self.probe_seq;
        self.probe_seq = self.probe_seq.wrapping_add(1);
        seq
    }

    /// Changes the status of path `i`; the trace event, if it changed.
    pub(super) fn set_status(
        &mut self,
        i: usize,
        status: PathStatus,
        reason: &'static str,
    ) -> Option<TraceEvent> {
        let p = &mut self.paths[i];
        let from = p.status.name();
        p.status = status;
        let to = status.name();
        (from != to).then_some(TraceEvent::PathChange {
            ev: p.ev,
            from,
            to,
            reason,
        })
    }

    /// When the next retired path is to be probed or probe times out.
    pub(super) fn next_deadline(&self) -> Option<Time> {
        self.paths
            .iter()
            .filter_map(|p| match p.status {
                PathStatus::Retired { until } => Some(until),
                PathStatus::Probing { deadline, .. } => Some(deadline),
                PathStatus::Active => None,
            })
            .min()
    }

    /// A PROBE_REPLY brought path `i` back: a fresh controller and history.
    pub(super) fn restore(&mut self, i: usize, cfg: &Config, mtu: u16) {
        let path = &mut self.paths[i];
        path.cc = make_cc(cfg, mtu);
        path.consecutive_losses = 0;
        path.bad_rounds = 0;
        path.loss_ewma = 0.0;
        path.ce_ewma = 0.0;
        path.retire_backoff = 0;
    }

    /// A loss on path `ev` was spurious: double its reordering window (up
    /// to its smoothed RTT). It is not shrunk back: resetting it after a
    /// number of losses (RFC 8985's reo_wnd_persist) cost simulated
    /// long-run goodput under loss (`tests/goodput.rs`).
    pub(super) fn widen_reorder_window(&mut self, ev: u16, min: u64) {
        if let Some(i) = self.index(ev) {
            let p = &mut self.paths[i];
            p.reo_wnd = (p.reo_wnd * 2).min(p.srtt.max(min)).max(min);
        }
    }

    /// Feedback echoing a packet of path `i` carried ECE.
    pub(super) fn on_ece(&mut self, i: usize, now: Time) {
        let p = &mut self.paths[i];
        p.stats.ce_marks += 1;
        p.cc.on_congestion(now, Signal::Ece);
        p.round_congested += 1;
        p.ce_ewma += (1.0 - p.ce_ewma) / CONGESTION_EWMA_GAIN;
    }

    /// A packet of `len` bytes sent at `sent_at` on `ev` was delivered;
    /// `rack`: the delivery is unambiguous and moves the path's RACK clock.
    /// Returns whether the path is known.
    pub(super) fn on_delivered(
        &mut self,
        now: Time,
        ev: u16,
        sent_at: Time,
        len: u64,
        in_flight: bool,
        rack: bool,
    ) -> bool {
        let Some(i) = self.index(ev) else {
            return false;
        };
        let p = &mut self.paths[i];
        if in_flight {
            p.inflight = p.inflight.saturating_sub(len);
        }
        if rack {
            p.rack_sent_at = p.rack_sent_at.max(sent_at);
        }
        p.consecutive_losses = 0;
        p.round_delivered += 1;
        p.stats.delivered += 1;
        p.loss_ewma -= p.loss_ewma / DELIVERY_EWMA_DECAY;
        p.ce_ewma -= p.ce_ewma / DELIVERY_EWMA_DECAY;
        p.cc.on_ack(now, len, p.has_rtt.then_some(p.srtt));
        true
    }

    /// A packet of path `i` was declared lost (`cause`); whether PLB
    /// retires the path for it (`others_fine`: another path delivered
    /// later-sent packets).
    pub(super) fn on_lost(
        &mut self,
        i: usize,
        now: Time,
        cause: TxCause,
        others_fine: bool,
        cfg: &Config,
    ) -> bool {
        let p = &mut self.paths[i];
        p.stats.lost += 1;
        p.consecutive_losses += 1;
        p.round_congested += 1;
        p.loss_ewma += (1.0 - p.loss_ewma) / CONGESTION_EWMA_GAIN;
        // A receiver without buffers and a retired path are not congestion.
        if cause != TxCause::Rnr && cause != TxCause::PathRetired {
            p.cc.on_congestion(now, Signal::Loss);
        }
        cfg.plb
            && p.is_active()
            && p.consecutive_losses >= cfg.plb_losses
            && others_fine
            && cause != TxCause::Rnr
    }

    /// `len` bytes of path `i` are no longer in flight.
    pub(super) fn release(&mut self, i: usize, len: u64) {
        let p = &mut self.paths[i];
        p.inflight = p.inflight.saturating_sub(len);
    }

    /// A DATA packet of `len` bytes left on path `i`.
    pub(super) fn on_sent(&mut self, i: usize, now: Time, len: u64, retransmission: bool) {
        let p = &mut self.paths[i];
        p.inflight += len;
        p.stats.tx_packets += 1;
        p.stats.tx_bytes += len;
        if retransmission {
            p.stats.retransmissions += 1;
        }
        p.cc.on_sent(now, len);
    }

    /// PLB-like rounds: ends the RTT round of every path whose round is
    /// over; the paths that were mostly congested (CE, trimmed or lost) for
    /// `plb_rounds` consecutive rounds, to be retired.
    pub(super) fn end_rounds(&mut self, now: Time, cfg: &Config) -> Vec<usize> {
        let mut retire = Vec::new();
        for (i, p) in self.paths.iter_mut().enumerate() {
            if !p.has_rtt {
                continue;
            }
            if now < p.round_start + p.srtt.max(MIN_ROUND_NS) {
                continue;
            }
            let total = p.round_delivered + p.round_congested;
            if total >= MIN_ROUND_PACKETS && p.round_congested * 2 >= total {
                p.bad_rounds += 1;
            } else if total >= MIN_ROUND_PACKETS {
                p.bad_rounds = 0;
            }
            p.round_start = now;
            p.round_delivered = 0;
            p.round_congested = 0;
            if p.bad_rounds >= cfg.plb_rounds && p.is_active() {
                p.bad_rounds = 0;
                retire.push(i);
            }
        }
        retire
    }

    /// Chooses a path for a packet of `len` bytes; `avoid` is the ev a lost
    /// packet went on (a retransmission prefers another path).
    pub(super) fn pick(&mut self, spray: Spray, len: u64, avoid: Option<u16>) -> Option<usize> {
        let room: Vec<bool> = self
            .paths
            .iter()
            .map(|p| p.is_active() && p.has_room(len))
            .collect();
        let any_other =
            avoid.is_some_and(|ev| self.paths.iter().zip(&room).any(|(p, &r)| r && p.ev != ev));
        let ok = |i: usize, paths: &[Path]| room[i] && !(any_other && Some(paths[i].ev) == avoid);
        match spray {
            Spray::RoundRobin => self.pick_round_robin(ok),
            Spray::Weighted => self.pick_weighted(ok),
        }
    }

    fn pick_round_robin(&mut self, ok: impl Fn(usize, &[Path]) -> bool) -> Option<usize> {
        let n = self.paths.len();
        let i = (0..n)
            .map(|k| (self.rr + k) % n)
            .find(|&i| ok(i, &self.paths))?;
        self.rr = i + 1;
        Some(i)
    }

    /// Smooth weighted round-robin (nginx's): every eligible path gains its
    /// weight, the richest is chosen and pays the total.
    fn pick_weighted(&mut self, ok: impl Fn(usize, &[Path]) -> bool) -> Option<usize> {
        let mut total = 0.0;
        let mut best: Option<usize> = None;
        for i in 0..self.paths.len() {
            if !ok(i, &self.paths) {
                continue;
            }
            let w = self.paths[i].weight();
            total += w;
            self.paths[i].swrr += w;
            if best.is_none_or(|b| self.paths[i].swrr > self.paths[b].swrr) {
                best = Some(i);
            }
        }
        if let Some(b) = best {
            self.paths[b].swrr -= total;
        }
        best
    }
}
