//! Per-path state: one path per entropy value (ev), its congestion
//! controller, RTT estimator, loss/CE history, PLB-like state and stats.

use crate::Time;
use crate::cc::CongestionController;
use serde::Serialize;

/// Spraying weights are 1 / srtt (in ms: `WEIGHT_SCALE_NS / srtt_ns`)...
const WEIGHT_SCALE_NS: f64 = 1e6;
/// ...with srtt taken as at least 1 us...
const WEIGHT_MIN_RTT_NS: u64 = 1_000;
/// ...and as 50 us before the first sample...
const WEIGHT_UNMEASURED_RTT_NS: u64 = 50_000;
/// ...scaled by the share of packets neither lost nor CE-marked, never
/// below 5 % each (a path keeps a trickle that can show it recovered).
const WEIGHT_FLOOR: f64 = 0.05;

/// Where a path stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathStatus {
    /// Carries data.
    Active,
    /// Retired; a PROBE is sent at `until`.
    Retired { until: Time },
    /// A PROBE with sequence `seq` is out; retired again at `deadline`.
    Probing { seq: u32, deadline: Time },
}

impl PathStatus {
    pub fn name(&self) -> &'static str {
        match self {
            PathStatus::Active => "active",
            PathStatus::Retired { .. } => "retired",
            PathStatus::Probing { .. } => "probing",
        }
    }
}

/// Counters of one path, as printed by the CLI.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct PathStats {
    pub ev: u16,
    pub state: &'static str,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub retransmissions: u64,
    pub lost: u64,
    pub delivered: u64,
    pub ce_marks: u64,
    pub probes: u64,
    pub retirements: u64,
    pub srtt_ns: u64,
    pub min_rtt_ns: u64,
    pub cwnd: u64,
}

#[derive(Debug)]
pub struct Path {
    pub ev: u16,
    pub status: PathStatus,
    pub cc: Box<dyn CongestionController>,
    pub inflight: u64,
    pub srtt: u64,
    pub rttvar: u64,
    pub min_rtt: u64,
    /// The latest fabric RTT sample (RACK's view of the path's queue now).
    pub latest_rtt: u64,
    pub has_rtt: bool,
    /// Reordering window for per-path RACK (ns).
    pub reo_wnd: u64,
    /// Latest send time among packets delivered on this path.
    pub rack_sent_at: Time,
    pub consecutive_losses: u32,
    pub round_start: Time,
    pub round_delivered: u32,
    pub round_congested: u32,
    pub bad_rounds: u32,
    pub loss_ewma: f64,
    pub ce_ewma: f64,
    pub swrr: f64,
    pub retire_backoff: u32,
    pub stats: PathStats,
}

impl Path {
    pub fn new(ev: u16, cc: Box<dyn CongestionController>, reo_wnd: u64) -> Self {
        Path {
            ev,
            status: PathStatus::Active,
            cc,
            inflight: 0,
            srtt: 0,
            rttvar: 0,
            min_rtt: u64::MAX,
            latest_rtt: 0,
            has_rtt: false,
            reo_wnd,
            rack_sent_at: 0,
            consecutive_losses: 0,
            round_start: 0,
            round_delivered: 0,
            round_congested: 0,
            bad_rounds: 0,
            loss_ewma: 0.0,
            ce_ewma: 0.0,
            swrr: 0.0,
            retire_backoff: 0,
            stats: PathStats {
                ev,
                ..PathStats::default()
            },
        }
    }

    pub fn is_active(&self) -> bool {
        self.status == PathStatus::Active
    }

    /// RFC 6298's estimator: rttvar gains 1/4 of the error, srtt 1/8 of
    /// the sample.
    pub fn on_rtt(&mut self, rtt: u64) {
        self.min_rtt = self.min_rtt.min(rtt);
        self.latest_rtt = rtt;
        if !self.has_rtt {
            self.srtt = rtt;
            self.rttvar = rtt / 2;
            self.has_rtt = true;
        } else {
            let err = self.srtt.abs_diff(rtt);
            self.rttvar = (3 * self.rttvar + err) / 4;
            self.srtt = (7 * self.srtt + rtt) / 8;
        }
    }

    /// The weight used by the weighted spraying policy: faster, cleaner
    /// paths get more packets.
    pub fn weight(&self) -> f64 {
        let rtt = if self.has_rtt {
            self.srtt.max(WEIGHT_MIN_RTT_NS)
        } else {
            WEIGHT_UNMEASURED_RTT_NS
        } as f64;
        WEIGHT_SCALE_NS / rtt
            * (1.0 - self.loss_ewma).max(WEIGHT_FLOOR)
            * (1.0 - self.ce_ewma).max(WEIGHT_FLOOR)
    }

    /// Room for a packet of `len` bytes in the congestion window (an idle
    /// path always takes one packet).
    pub fn has_room(&self, len: u64) -> bool {
        self.inflight == 0 || self.inflight + len <= self.cc.window()
    }

    pub fn snapshot(&self) -> PathStats {
        let mut s = self.stats.clone();
        s.state = self.status.name();
        s.srtt_ns = self.srtt;
        s.min_rtt_ns = if self.min_rtt == u64::MAX {
            0
        } else {
            self.min_rtt
        };
        s.cwnd = self.cc.window();
        s
    }
}
