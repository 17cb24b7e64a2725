//! What an end host's capture holds of a direction's DATA beyond the
//! engine's window, for MR-RCV-004: the first and the latest transmission
//! (tx_ts and ev) of each of the latest [`PSNS`] PSNs captured, so that
//! the echo of a PSN the engine has pruned (more than 128 behind the
//! cumulative ack) is still checked against what was sent (at the sender)
//! or what arrived (at the receiver).
//!
//! A ring indexed by PSN modulo [`PSNS`]: each slot keeps the PSN's bits
//! above the index to tell which PSN it holds, so a PSN whose slot a later
//! one took is not held (and its echo not judged: the caller counts it).
//! Kept only for a direction whose connection start was captured (every
//! transmission in the capture), made at its first DATA packet: 16 bytes
//! per PSN, 16 KiB per direction.

/// PSNs held: the latest this many PSNs' slots (a power of two).
pub(super) const PSNS: usize = 1024;

/// The index bits of a PSN; the count of a slot lives in them.
const INDEX: u32 = PSNS as u32 - 1;

/// A slot's count saturates here: three or more transmissions.
const MANY: u32 = 3;

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    /// The PSN's bits above [`INDEX`], and in the index bits how many
    /// transmissions were captured (up to [`MANY`]); 0: empty.
    tag: u32,
    first_tx_ts: u32,
    last_tx_ts: u32,
    first_ev: u16,
    last_ev: u16,
}

/// The transmissions captured of one PSN, as the ring holds them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Held {
    /// 1, 2, or 3 for three or more.
    pub count: u32,
    /// tx_ts and ev of the first and the latest.
    pub first: (u32, u16),
    pub last: (u32, u16),
}

/// The ring of one direction (see the module documentation).
#[derive(Debug)]
pub(super) struct Captured {
    slots: Box<[Slot; PSNS]>,
}

impl Default for Captured {
    fn default() -> Self {
        Captured {
            slots: Box::new([Slot::default(); PSNS]),
        }
    }
}

impl Captured {
    /// A DATA packet of `psn` captured, sent at `tx_ts` on `ev`.
    #[inline(always)]
    pub fn record(&mut self, psn: u32, tx_ts: u32, ev: u16) {
        let slot = &mut self.slots[(psn & INDEX) as usize];
        let high = psn & !INDEX;
        let count = slot.tag & INDEX;
        if count != 0 && slot.tag & !INDEX == high {
            slot.tag = high | (count + 1).min(MANY);
        } else {
            slot.tag = high | 1;
            slot.first_tx_ts = tx_ts;
            slot.first_ev = ev;
        }
        slot.last_tx_ts = tx_ts;
        slot.last_ev = ev;
    }

    /// The transmissions held of `psn`, `None` when its slot is empty or
    /// holds another PSN.
    pub fn get(&self, psn: u32) -> Option<Held> {
        let slot = &self.slots[(psn & INDEX) as usize];
        let count = slot.tag & INDEX;
        (count != 0 && slot.tag & !INDEX == psn & !INDEX).then_some(Held {
            count,
            first: (slot.first_tx_ts, slot.first_ev),
            last: (slot.last_tx_ts, slot.last_ev),
        })
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn a_slot_holds_its_latest_psn_first_and_latest_transmission() {
        let mut c = Captured::default();
        assert_eq!(c.get(5), None);
        c.record(5, 100, 1);
        assert_eq!(
            c.get(5),
            Some(Held {
                count: 1,
                first: (100, 1),
                last: (100, 1)
            })
        );
        c.record(5, 200, 2);
        c.record(5, 300, 3);
        c.record(5, 400, 4);
        assert_eq!(
            c.get(5),
            Some(Held {
                count: MANY,
                first: (100, 1),
                last: (400, 4)
            })
        );
        // PSN 5 + 1024 takes the slot: 5 is no longer held.
        c.record(5 + PSNS as u32, 500, 0);
        assert_eq!(c.get(5), None);
        assert_eq!(c.get(5 + PSNS as u32).map(|h| h.count), Some(1));
        // Across the u32 wrap.
        c.record(u32::MAX, 7, 7);
        assert_eq!(c.get(u32::MAX).map(|h| h.first), Some((7, 7)));
        assert_eq!(c.get(u32::MAX - PSNS as u32), None);
    }
}
