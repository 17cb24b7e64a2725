//! Endpoint congestion control, one controller per path, behind a trait.
//!
//! Every method takes `now` (nanoseconds on the caller's clock): the
//! controllers never read a clock. Two implementations:
//! - [`DelayCc`]: a Swift-like delay-based AIMD window driven by the fabric
//!   RTT computed from T1..T4 (`(T4 - T1) - (T3 - T2)`), reacting to ECE/CNP
//!   and trimming at most once per RTT; loss alone is not a congestion
//!   signal (the queue that causes congestion loss shows in the delay).
//! - [`EcnCc`]: a DCQCN-like window (additive increase, `alpha`-scaled
//!   decrease on CNP/ECE, halving on loss) used by the RoCEv2-like
//!   go-back-N mode for A/B comparisons.

use crate::Time;

/// A congestion signal seen on a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// A packet was declared lost.
    Loss,
    /// Feedback carried ECE (the data packet was CE-marked).
    Ece,
    /// A CNP arrived.
    Cnp,
    /// A packet was trimmed by a switch.
    Trim,
}

/// The per-path congestion controller interface (quinn's `Controller`).
pub trait CongestionController: Send + std::fmt::Debug {
    /// `bytes` of payload left on this path.
    fn on_sent(&mut self, now: Time, bytes: u64);
    /// `bytes` were delivered; `fabric_rtt` is a fresh RTT sample, if any.
    fn on_ack(&mut self, now: Time, bytes: u64, fabric_rtt: Option<u64>);
    /// A congestion signal.
    fn on_congestion(&mut self, now: Time, signal: Signal);
    /// Bytes that may be in flight on this path.
    fn window(&self) -> u64;
    /// A short name for logs.
    fn name(&self) -> &'static str;
}

/// Swift: a delay above target shrinks the window by `SWIFT_BETA` x the
/// excess share of the RTT...
const SWIFT_BETA: f64 = 0.8;
/// ...keeping at least half of it.
const SWIFT_MAX_DECREASE: f64 = 0.5;
/// The delay controller's window factor on ECE, CNP or trimming.
const SIGNAL_DECREASE: f64 = 0.8;
/// DCQCN's gain `g` of the congestion estimate alpha.
const DCQCN_G: f64 = 1.0 / 16.0;
/// `CcParams::new` windows, in packets (connections set their own).
const DEFAULT_INITIAL_WINDOW_PACKETS: u64 = 32;
const DEFAULT_MAX_WINDOW_PACKETS: u64 = 1024;
/// `CcParams::new` delay target above the smallest RTT: 25 us.
const DEFAULT_TARGET_HEADROOM_NS: u64 = 25_000;

/// Parameters shared by the controllers.
#[derive(Debug, Clone, Copy)]
pub struct CcParams {
    /// Payload bytes of a full packet.
    pub mss: u64,
    pub initial_window: u64,
    pub min_window: u64,
    pub max_window: u64,
    /// Delay target above the smallest fabric RTT seen (ns).
    pub target_headroom: u64,
}

impl CcParams {
    pub fn new(mss: u64) -> Self {
        CcParams {
            mss,
            initial_window: DEFAULT_INITIAL_WINDOW_PACKETS * mss,
            min_window: mss,
            max_window: DEFAULT_MAX_WINDOW_PACKETS * mss,
            target_headroom: DEFAULT_TARGET_HEADROOM_NS,
        }
    }
}

/// Swift-like delay-based controller.
#[derive(Debug, Clone)]
pub struct DelayCc {
    p: CcParams,
    cwnd: f64,
    min_rtt: u64,
    srtt: u64,
    last_decrease: Option<Time>,
}

impl DelayCc {
    pub fn new(p: CcParams) -> Self {
        DelayCc {
            p,
            cwnd: p.initial_window as f64,
            min_rtt: u64::MAX,
            srtt: 0,
            last_decrease: None,
        }
    }

    fn can_decrease(&self, now: Time) -> bool {
        match self.last_decrease {
            None => true,
            Some(t) => now.saturating_sub(t) >= self.srtt.max(1),
        }
    }

    fn decrease(&mut self, now: Time, factor: f64) {
        if self.can_decrease(now) {
            self.cwnd = (self.cwnd * factor).max(self.p.min_window as f64);
            self.last_decrease = Some(now);
        }
    }

    /// The delay target: smallest RTT seen plus the headroom.
    pub fn target(&self) -> u64 {
        if self.min_rtt == u64::MAX {
            u64::MAX
        } else {
            self.min_rtt + self.p.target_headroom
        }
    }
}

impl CongestionController for DelayCc {
    fn on_sent(&mut self, _now: Time, _bytes: u64) {}

    fn on_ack(&mut self, now: Time, bytes: u64, fabric_rtt: Option<u64>) {
        if let Some(rtt) = fabric_rtt {
            self.min_rtt = self.min_rtt.min(rtt);
            self.srtt = if self.srtt == 0 {
                rtt
            } else {
                (7 * self.srtt + rtt) / 8
            };
            let target = self.target();
            if rtt > target {
                // Swift: decrease in proportion to the excess delay, capped.
                let excess = (rtt - target) as f64 / rtt as f64;
                self.decrease(now, (1.0 - SWIFT_BETA * excess).max(SWIFT_MAX_DECREASE));
                return;
            }
        }
        // Additive increase: one MSS per window of acknowledged bytes.
        self.cwnd += self.p.mss as f64 * bytes as f64 / self.cwnd;
        self.cwnd = self.cwnd.min(self.p.max_window as f64);
    }

    fn on_congestion(&mut self, now: Time, signal: Signal) {
        match signal {
            // Random loss on a lossy fabric is not congestion, and
            // congestion loss comes with a queue the delay signal already
            // reacts to (once per RTT): loss itself changes nothing.
            Signal::Loss => {}
            Signal::Trim => self.decrease(now, SIGNAL_DECREASE),
            Signal::Ece | Signal::Cnp => self.decrease(now, SIGNAL_DECREASE),
        }
    }

    fn window(&self) -> u64 {
        self.cwnd as u64
    }

    fn name(&self) -> &'static str {
        "delay"
    }
}

/// DCQCN-like window controller for the RoCEv2-like mode.
#[derive(Debug, Clone)]
pub struct EcnCc {
    p: CcParams,
    cwnd: f64,
    alpha: f64,
    last_decrease: Option<Time>,
    srtt: u64,
}

impl EcnCc {
    pub fn new(p: CcParams) -> Self {
        EcnCc {
            p,
            cwnd: p.initial_window as f64,
            alpha: 1.0,
            last_decrease: None,
            srtt: 0,
        }
    }

    fn decrease(&mut self, now: Time, factor: f64) {
        let ok = match self.last_decrease {
            None => true,
            Some(t) => now.saturating_sub(t) >= self.srtt.max(1),
        };
        if ok {
            self.cwnd = (self.cwnd * factor).max(self.p.min_window as f64);
            self.last_decrease = Some(now);
        }
    }
}

impl CongestionController for EcnCc {
    fn on_sent(&mut self, _now: Time, _bytes: u64) {}

    fn on_ack(&mut self, _now: Time, bytes: u64, fabric_rtt: Option<u64>) {
        if let Some(rtt) = fabric_rtt {
            self.srtt = if self.srtt == 0 {
                rtt
            } else {
                (7 * self.srtt + rtt) / 8
            };
        }
        self.alpha *= 1.0 - DCQCN_G;
        self.cwnd = (self.cwnd + self.p.mss as f64 * bytes as f64 / self.cwnd)
            .min(self.p.max_window as f64);
    }

    fn on_congestion(&mut self, now: Time, signal: Signal) {
        match signal {
            // DCQCN is driven by CNPs only; RoCEv2 pays for loss with
            // go-back-N.
            Signal::Loss => {}
            Signal::Ece | Signal::Cnp | Signal::Trim => {
                self.alpha = (1.0 - DCQCN_G) * self.alpha + DCQCN_G;
                let f = 1.0 - self.alpha / 2.0;
                self.decrease(now, f);
            }
        }
    }

    fn window(&self) -> u64 {
        self.cwnd as u64
    }

    fn name(&self) -> &'static str {
        "ecn"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delay_cc_grows_below_target_and_shrinks_above() {
        let p = CcParams::new(1000);
        let mut cc = DelayCc::new(p);
        let w0 = cc.window();
        for i in 0..100 {
            cc.on_ack(i * 1000, 1000, Some(10_000));
        }
        let grown = cc.window();
        assert!(grown > w0, "{grown} > {w0}");
        // Loss at low delay is not congestion.
        cc.on_congestion(150_000, Signal::Loss);
        assert_eq!(cc.window(), grown);
        cc.on_ack(200_000, 1000, Some(200_000));
        assert!(cc.window() < grown);
        // At most one decrease per RTT.
        let w = cc.window();
        cc.on_congestion(200_001, Signal::Trim);
        assert_eq!(cc.window(), w);
        cc.on_congestion(800_000, Signal::Trim);
        assert!(cc.window() < w);
    }

    #[test]
    fn windows_never_fall_below_one_mss() {
        let p = CcParams::new(1000);
        let mut d = DelayCc::new(p);
        let mut e = EcnCc::new(p);
        for i in 0..1000u64 {
            d.on_congestion(i * 1_000_000, Signal::Trim);
            e.on_congestion(i * 1_000_000, Signal::Cnp);
        }
        assert_eq!(d.window(), 1000);
        assert_eq!(e.window(), 1000);
    }
}
