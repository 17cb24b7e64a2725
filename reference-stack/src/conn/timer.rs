//! Every deadline of a connection in one table, as quinn-proto's
//! `connection/timer.rs`: [`Connection::poll_timeout`] is the minimum over
//! the table and [`Connection::handle_timeout`] dispatches on the timers
//! that expired, in [`Timer::ALL`] order.
//!
//! [`Connection::poll_timeout`]: super::Connection::poll_timeout
//! [`Connection::handle_timeout`]: super::Connection::handle_timeout

use crate::Time;

/// A connection timer. The declaration order is the order in which
/// expired timers are handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Timer {
    /// Resend CONNECT (or give up) while connecting.
    Handshake,
    /// Resend CLOSE (or give up) while closing.
    Close,
    /// A coalesced ACK is due.
    Ack,
    /// The receiver's hole at the cumulative ack is reported with NACK GAP.
    NackGap,
    /// A PSN refused with NACK RNR may be resent.
    Rnr,
    /// The retransmission (probe) timer.
    Rto,
    /// The RACK time threshold of a packet with delivery evidence.
    LossDetection,
    /// A retired path is probed, or a probe timed out.
    Path,
    /// Nothing arrived for `idle_timeout`: abort.
    Idle,
    /// Nothing was sent for `keepalive`: send a KEEPALIVE.
    Keepalive,
    /// Ground truth: data outstanding and no progress for `stall_threshold`.
    Stall,
    /// A closed connection's drain period ended: the endpoint drops it.
    Drain,
}

impl Timer {
    const COUNT: usize = 12;

    /// Every timer, in dispatch order.
    pub(super) const ALL: [Timer; Timer::COUNT] = [
        Timer::Handshake,
        Timer::Close,
        Timer::Ack,
        Timer::NackGap,
        Timer::Rnr,
        Timer::Rto,
        Timer::LossDetection,
        Timer::Path,
        Timer::Idle,
        Timer::Keepalive,
        Timer::Stall,
        Timer::Drain,
    ];
}

/// The deadline of every timer, `None` when it is stopped.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct TimerTable {
    data: [Option<Time>; Timer::COUNT],
}

impl TimerTable {
    pub(super) fn set(&mut self, timer: Timer, deadline: Time) {
        self.data[timer as usize] = Some(deadline);
    }

    /// Sets the timer to `deadline`, or stops it when `None`.
    pub(super) fn set_or_stop(&mut self, timer: Timer, deadline: Option<Time>) {
        self.data[timer as usize] = deadline;
    }

    pub(super) fn get(&self, timer: Timer) -> Option<Time> {
        self.data[timer as usize]
    }

    pub(super) fn stop(&mut self, timer: Timer) {
        self.data[timer as usize] = None;
    }

    pub(super) fn is_expired(&self, timer: Timer, now: Time) -> bool {
        self.get(timer).is_some_and(|t| t <= now)
    }

    /// The earliest deadline over the table.
    pub(super) fn next_timeout(&self) -> Option<Time> {
        self.data.iter().flatten().min().copied()
    }

    pub(super) fn stop_all(&mut self) {
        self.data = [None; Timer::COUNT];
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn next_timeout_is_the_minimum() {
        let mut t = TimerTable::default();
        assert_eq!(t.next_timeout(), None);
        t.set(Timer::Idle, 50);
        t.set(Timer::Ack, 20);
        t.set(Timer::Drain, 30);
        assert_eq!(t.next_timeout(), Some(20));
        t.stop(Timer::Ack);
        assert_eq!(t.next_timeout(), Some(30));
        assert!(t.is_expired(Timer::Drain, 30) && !t.is_expired(Timer::Idle, 30));
    }

    #[test]
    fn all_lists_each_timer_at_its_index() {
        for (i, t) in Timer::ALL.iter().enumerate() {
            assert_eq!(*t as usize, i);
        }
    }
}
