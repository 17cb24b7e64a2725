//! A sliding window of per-PSN slots: a ring indexed by `psn - base`.
//! PSNs are mostly dense, so this needs no hashing, and once its capacity
//! is reached it reuses its memory: no allocation per packet.

use std::collections::VecDeque;

/// Serial-number `a < b` (RFC 1982, 32 bits).
#[inline]
pub(crate) const fn lt(a: u32, b: u32) -> bool {
    a != b && (b.wrapping_sub(a) as i32) > 0
}

/// `b - a` in serial arithmetic.
#[inline]
pub(crate) const fn diff(a: u32, b: u32) -> i32 {
    b.wrapping_sub(a) as i32
}

#[derive(Debug, Clone)]
pub(crate) struct Window<T> {
    base: u32,
    slots: VecDeque<T>,
    cap: usize,
    /// Slots dropped from the front because the window was full.
    pub overflow: u64,
}

impl<T: Default> Window<T> {
    pub fn new(cap: usize) -> Self {
        Window {
            base: 0,
            slots: VecDeque::new(),
            cap: cap.max(1),
            overflow: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// The lowest tracked PSN.
    #[cfg(test)]
    pub fn base(&self) -> u32 {
        self.base
    }

    #[cfg(test)]
    pub fn get(&self, psn: u32) -> Option<&T> {
        let d = diff(self.base, psn);
        if d < 0 {
            return None;
        }
        self.slots.get(d as usize)
    }

    #[inline]
    pub fn get_mut(&mut self, psn: u32) -> Option<&mut T> {
        let d = diff(self.base, psn);
        if d < 0 {
            return None;
        }
        self.slots.get_mut(d as usize)
    }

    /// The slot of `psn`, created (with empty slots up to it) if needed.
    /// `None` when `psn` lies too far below the window to fit.
    #[inline]
    pub fn entry(&mut self, psn: u32) -> Option<&mut T> {
        // Fast path, inlined: the next PSN, or one already tracked.
        let d = diff(self.base, psn);
        if !self.slots.is_empty() && d >= 0 && (d as usize) < self.cap {
            let idx = d as usize;
            if idx == self.slots.len() {
                self.slots.push_back(T::default());
            }
            if idx < self.slots.len() {
                return self.slots.get_mut(idx);
            }
        }
        self.entry_far(psn)
    }

    /// [`Window::entry`] for the first PSN, one below the window, or one
    /// past a gap or past the capacity.
    #[inline(never)]
    fn entry_far(&mut self, psn: u32) -> Option<&mut T> {
        if self.slots.is_empty() {
            self.base = psn;
            self.slots.push_back(T::default());
            return self.slots.back_mut();
        }
        let d = diff(self.base, psn);
        if d < 0 {
            let need = (-(d as i64)) as usize;
            if self.slots.len() + need > self.cap {
                return None;
            }
            for _ in 0..need {
                self.slots.push_front(T::default());
            }
            self.base = psn;
            return self.slots.front_mut();
        }
        let idx = d as usize;
        if idx >= self.cap {
            // Jump far ahead: keep only the new PSN's neighbourhood.
            let keep_from = idx + 1 - self.cap;
            if keep_from >= self.slots.len() {
                self.overflow += self.slots.len() as u64;
                self.slots.clear();
                self.base = psn;
                self.slots.push_back(T::default());
                return self.slots.back_mut();
            }
            self.overflow += keep_from as u64;
            self.slots.drain(..keep_from);
            self.base = self.base.wrapping_add(keep_from as u32);
        }
        let idx = diff(self.base, psn) as usize;
        while self.slots.len() <= idx {
            self.slots.push_back(T::default());
        }
        self.slots.get_mut(idx)
    }

    /// Drops every slot below `psn`, calling `f` on each one dropped.
    pub fn prune_below(&mut self, psn: u32, mut f: impl FnMut(u32, &T)) {
        if self.slots.is_empty() {
            return;
        }
        let d = diff(self.base, psn);
        if d <= 0 {
            return;
        }
        let n = (d as usize).min(self.slots.len());
        // pop_front beats drain(..n) for the few slots an ack prunes.
        for i in 0..n {
            if let Some(slot) = self.slots.pop_front() {
                f(self.base.wrapping_add(i as u32), &slot);
            }
        }
        self.base = if self.slots.is_empty() {
            psn
        } else {
            self.base.wrapping_add(n as u32)
        };
    }

    /// Every slot with its PSN, lowest first.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &T)> {
        let base = self.base;
        self.slots
            .iter()
            .enumerate()
            .map(move |(i, s)| (base.wrapping_add(i as u32), s))
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn grows_prunes_and_wraps() {
        let mut w: Window<u8> = Window::new(8);
        *w.entry(u32::MAX - 1).unwrap() = 1;
        *w.entry(1).unwrap() = 2;
        assert_eq!(w.len(), 4);
        assert_eq!(w.get(1), Some(&2));
        assert_eq!(w.get(0), Some(&0));
        let mut dropped = Vec::new();
        w.prune_below(1, |p, _| dropped.push(p));
        assert_eq!(dropped, [u32::MAX - 1, u32::MAX, 0]);
        assert_eq!(w.base(), 1);
        *w.entry(20).unwrap() = 3;
        assert!(w.len() <= 8);
        assert_eq!(w.get(20), Some(&3));
        assert!(w.overflow > 0);
        assert!(w.entry(0).is_none());
    }
}
