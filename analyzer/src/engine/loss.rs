//! Loss rates of a path, one per capture point (spec 9). The counters are
//! the report's; the rates are defined here once for every output.
//!
//! - A capture at (or near) the receiver sees which `path_seq` values never
//!   arrived: its rate is lost / (received + lost).
//! - A capture at the sender sees every transmission and infers the lost
//!   ones from retransmissions: its rate is lost / sent.

use super::report::PathReport;

impl PathReport {
    /// Receiver-side loss rate: `path_seq` gaps over the packets that
    /// should have arrived, `lost / (packets + lost)`; `None` with neither.
    pub fn receive_loss_rate(&self) -> Option<f64> {
        ratio(self.lost, self.packets + self.lost)
    }

    /// Sender-side loss rate: DATA transmissions inferred lost over those
    /// sent, `lost_inferred / data_packets`; `None` before any DATA.
    pub fn send_loss_rate(&self) -> Option<f64> {
        ratio(self.lost_inferred, self.data_packets)
    }
}

fn ratio(part: u64, whole: u64) -> Option<f64> {
    (whole > 0).then(|| part as f64 / whole as f64)
}

#[cfg(test)]
mod test {
    use super::*;
    use crate::engine::Summary;

    fn path(packets: u64, data_packets: u64, lost: u64, lost_inferred: u64) -> PathReport {
        PathReport {
            ev: 3,
            packets,
            data_packets,
            data_bytes: 0,
            retransmissions: 0,
            lost,
            lost_inferred,
            reordered: 0,
            ce_marked: 0,
            ack_rtt_ns: Summary::default(),
        }
    }

    #[test]
    fn rates_divide_by_what_each_capture_point_counts() {
        // Issue 23's receiver-side path: 22.8k lost of 90.2k received is
        // 20.2 %, not 25.2 %.
        let rx = path(90_200, 90_000, 22_800, 0);
        let rate = rx.receive_loss_rate().unwrap();
        assert!((rate - 22_800.0 / 113_000.0).abs() < 1e-12, "{rate}");
        assert_eq!(rx.send_loss_rate(), Some(0.0));
        // Sender side: 10 of 40 DATA transmissions retransmitted before
        // any ack; 50 packets sent with the feedback.
        let tx = path(50, 40, 0, 10);
        assert_eq!(tx.send_loss_rate(), Some(0.25));
        assert_eq!(tx.receive_loss_rate(), Some(0.0));
        assert_eq!(path(0, 0, 0, 0).receive_loss_rate(), None);
        assert_eq!(path(0, 0, 0, 0).send_loss_rate(), None);
        assert_eq!(path(0, 0, 4, 0).receive_loss_rate(), Some(1.0));
    }
}
