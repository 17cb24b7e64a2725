//! A sliding window of per-PSN slots: a ring indexed by `psn - base`.
//! PSNs are mostly dense, so this needs no hashing, and once its capacity
//! is reached it reuses its memory: no allocation per packet.
//!
//! The ring is a power-of-two `Vec` indexed by mask rather than a
//! `VecDeque`: pruning an ack's worth of slots is then a move of the head,
//! not a copy of each slot out (docs/performance.md).

/// Serial-number `a < b` and `b - a` of PSNs (RFC 1982, 32 bits), as the
/// spec defines them in proto-parse.
pub(crate) use proto_parse::metaroce::{psn_diff as diff, psn_lt as lt};

#[derive(Debug, Clone)]
pub(crate) struct Window<T> {
    /// PSN of the first slot.
    base: u32,
    /// The slots: `len` of them from `head`, wrapping; `ring.len()` is 0 or
    /// a power of two.
    ring: Vec<T>,
    head: usize,
    len: usize,
    cap: usize,
    /// Slots dropped from the front because the window was full.
    pub overflow: u64,
}

impl<T: Default + Copy> Window<T> {
    pub fn new(cap: usize) -> Self {
        Window {
            base: 0,
            ring: Vec::new(),
            head: 0,
            len: 0,
            cap: cap.max(1),
            overflow: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// The lowest tracked PSN.
    #[inline]
    pub fn base(&self) -> u32 {
        self.base
    }

    #[inline]
    fn at(&self, i: usize) -> usize {
        (self.head + i) & (self.ring.len() - 1)
    }

    /// The ring index of `psn`'s slot, if the window holds it.
    #[inline]
    fn ring_index(&self, psn: u32) -> Option<usize> {
        let d = diff(self.base, psn);
        (d >= 0 && (d as usize) < self.len).then(|| self.at(d as usize))
    }

    #[inline]
    pub fn get(&self, psn: u32) -> Option<&T> {
        self.ring_index(psn).map(|i| &self.ring[i])
    }

    #[inline]
    pub fn get_mut(&mut self, psn: u32) -> Option<&mut T> {
        self.ring_index(psn).map(|i| &mut self.ring[i])
    }

    /// The slot of `psn`, created (with empty slots up to it) if needed.
    /// `None` when `psn` lies too far below the window to fit. `dropped`
    /// sees every slot dropped from the front to stay within the capacity
    /// (a caller keeping a sum over the slots subtracts them); only the
    /// out-of-line path ever drops one.
    #[inline]
    pub fn entry(&mut self, psn: u32, dropped: impl FnMut(&T)) -> Option<&mut T> {
        // Fast path, inlined: the next PSN, or one already tracked.
        let d = diff(self.base, psn);
        if self.len > 0 && d >= 0 && (d as usize) < self.cap {
            let idx = d as usize;
            if idx == self.len {
                self.push_back();
            }
            if idx < self.len {
                let i = self.at(idx);
                return Some(&mut self.ring[i]);
            }
        }
        self.entry_far(psn, dropped)
    }

    /// [`Window::entry`] for the first PSN, one below the window, or one
    /// past a gap or past the capacity.
    #[inline(never)]
    fn entry_far(&mut self, psn: u32, mut dropped: impl FnMut(&T)) -> Option<&mut T> {
        if self.len == 0 {
            self.base = psn;
            self.push_back();
            return self.get_mut(psn);
        }
        let d = diff(self.base, psn);
        if d < 0 {
            let need = (-(d as i64)) as usize;
            if self.len + need > self.cap {
                return None;
            }
            for _ in 0..need {
                self.push_front();
            }
            self.base = psn;
            return self.get_mut(psn);
        }
        let idx = d as usize;
        if idx >= self.cap {
            // Jump far ahead: keep only the new PSN's neighbourhood.
            let keep_from = idx + 1 - self.cap;
            for i in 0..keep_from.min(self.len) {
                dropped(&self.ring[self.at(i)]);
            }
            if keep_from >= self.len {
                self.overflow += self.len as u64;
                self.head = 0;
                self.len = 0;
                self.base = psn;
                self.push_back();
                return self.get_mut(psn);
            }
            self.overflow += keep_from as u64;
            self.drop_front(keep_from);
            self.base = self.base.wrapping_add(keep_from as u32);
        }
        while self.len <= diff(self.base, psn) as usize {
            self.push_back();
        }
        self.get_mut(psn)
    }

    /// Appends an empty slot.
    #[inline]
    fn push_back(&mut self) {
        if self.len == self.ring.len() {
            self.grow();
        }
        let i = self.at(self.len);
        self.ring[i] = T::default();
        self.len += 1;
    }

    /// Prepends an empty slot (the caller moves `base`).
    fn push_front(&mut self) {
        if self.len == self.ring.len() {
            self.grow();
        }
        self.head = (self.head + self.ring.len() - 1) & (self.ring.len() - 1);
        self.ring[self.head] = T::default();
        self.len += 1;
    }

    /// Doubles the ring (16 slots at first), the slots in order from 0.
    #[cold]
    fn grow(&mut self) {
        let new_len = (self.ring.len() * 2).max(16);
        let mut ring = Vec::with_capacity(new_len);
        ring.extend((0..self.len).map(|i| self.ring[self.at(i)]));
        ring.resize(new_len, T::default());
        self.ring = ring;
        self.head = 0;
    }

    /// Forgets the first `n` slots (the caller moves `base`).
    #[inline]
    fn drop_front(&mut self, n: usize) {
        let n = n.min(self.len);
        if n > 0 {
            self.head = self.at(n);
            self.len -= n;
        }
    }

    /// Drops every slot below `psn`, unread (a slot written thousands of
    /// packets earlier is a cache miss: callers that must see some of them
    /// look those up first).
    #[inline]
    pub fn prune_below(&mut self, psn: u32) {
        if self.len == 0 {
            return;
        }
        let d = diff(self.base, psn);
        if d <= 0 {
            return;
        }
        let n = (d as usize).min(self.len);
        self.drop_front(n);
        self.base = if self.len == 0 {
            psn
        } else {
            self.base.wrapping_add(n as u32)
        };
    }

    /// The slots of every PSN from `from` up to `to` (not included) that
    /// the window holds, lowest first: the one or two runs of the ring
    /// they occupy (a loop over a slice keeps its sum in a register).
    #[inline]
    pub fn range_mut(&mut self, from: u32, to: u32) -> (&mut [T], &mut [T]) {
        let start = diff(self.base, from).max(0) as usize;
        let end = (diff(self.base, to).max(0) as usize).min(self.len);
        if start >= end {
            return (&mut [], &mut []);
        }
        let first = self.at(start);
        let n = end - start;
        let run = n.min(self.ring.len() - first);
        let (wrapped, tail) = self.ring.split_at_mut(first);
        (&mut tail[..run], &mut wrapped[..n - run])
    }

    /// The sum of `take` over the slots of [`Window::range_mut`]`(from,
    /// to)`, which `take` may change (empty a count it returns).
    #[inline]
    pub fn take_sum(&mut self, from: u32, to: u32, mut take: impl FnMut(&mut T) -> u64) -> u64 {
        let (run, wrapped) = self.range_mut(from, to);
        run.iter_mut().map(&mut take).sum::<u64>() + wrapped.iter_mut().map(take).sum::<u64>()
    }

    /// Every slot with its PSN, lowest first.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &T)> {
        let base = self.base;
        (0..self.len).map(move |i| (base.wrapping_add(i as u32), &self.ring[self.at(i)]))
    }
}

#[cfg(test)]
mod test {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    #[derive(Debug, Clone)]
    enum Op {
        Entry(u32, u8),
        Prune(u32),
        Range(u32, u32),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0u32..96, any::<u8>()).prop_map(|(d, v)| Op::Entry(d, v)),
            1 => (0u32..96).prop_map(Op::Prune),
            1 => (0u32..100, 0u32..100).prop_map(|(a, b)| Op::Range(a, b)),
        ]
    }

    proptest! {
        /// The ring keeps the PSN -> slot mapping of a plain map through
        /// growth, pruning and wrap-around of its head (PSNs near the u32
        /// wrap too): what `entry` created or pruned, it shows or forgets.
        #[test]
        fn ring_matches_a_map(ops in proptest::collection::vec(op(), 1..200), start in any::<u32>()) {
            let cap = 64;
            let mut w: Window<u8> = Window::new(cap);
            let mut model: BTreeMap<u32, u8> = BTreeMap::new(); // offset from `start`
            for op in ops {
                match op {
                    Op::Entry(d, v) => {
                        let psn = start.wrapping_add(d);
                        // What the window holds below `psn - cap + 1` (all of
                        // it, when `psn` is that far above its base) is what
                        // `entry` drops.
                        let far = w.len() > 0 && diff(w.base(), psn) >= cap as i32;
                        let keep_from = psn.wrapping_sub(cap as u32 - 1);
                        let drops: Vec<u8> = w
                            .iter()
                            .filter(|&(p, _)| far && lt(p, keep_from))
                            .map(|(_, &v)| v)
                            .collect();
                        let mut dropped = Vec::new();
                        let fits = model.keys().next().is_none_or(|&lo| d >= lo || model.keys().last().unwrap() - d < cap as u32);
                        match w.entry(psn, |&v| dropped.push(v)) {
                            Some(slot) => {
                                *slot = v;
                                model.insert(d, v);
                            }
                            None => prop_assert!(!fits, "entry({d}) refused"),
                        }
                        prop_assert_eq!(&dropped, &drops, "entry({})", d);
                        // Slots beyond the capacity were dropped from the front.
                        let hi = *model.keys().last().unwrap();
                        model.retain(|&k, _| hi - k < cap as u32 || k > hi);
                    }
                    Op::Range(a, b) => {
                        let (run, wrapped) = w.range_mut(start.wrapping_add(a), start.wrapping_add(b));
                        let got: Vec<u8> = run.iter().chain(wrapped.iter()).copied().collect();
                        // Every slot the window holds in the range (`get`
                        // agrees with the model, checked below), in order.
                        let held: Vec<u8> = (a..b.max(a))
                            .filter_map(|k| w.get(start.wrapping_add(k)).copied())
                            .collect();
                        prop_assert_eq!(&got, &held);
                    }
                    Op::Prune(d) => {
                        w.prune_below(start.wrapping_add(d));
                        model.retain(|&k, _| k >= d);
                    }
                }
                for (&k, &v) in &model {
                    prop_assert_eq!(w.get(start.wrapping_add(k)).copied(), Some(v), "psn offset {}", k);
                }
                prop_assert!(w.len() <= cap);
            }
        }
    }

    #[test]
    fn grows_prunes_and_wraps() {
        let mut w: Window<u8> = Window::new(8);
        *w.entry(u32::MAX - 1, |_| {}).unwrap() = 1;
        *w.entry(1, |_| {}).unwrap() = 2;
        assert_eq!(w.len(), 4);
        assert_eq!(w.get(1), Some(&2));
        assert_eq!(w.get(0), Some(&0));
        w.prune_below(1);
        assert_eq!(w.base(), 1);
        assert_eq!(w.len(), 1);
        assert_eq!(w.get(0), None);
        assert_eq!(w.get(1), Some(&2));
        *w.entry(20, |_| {}).unwrap() = 3;
        assert!(w.len() <= 8);
        assert_eq!(w.get(20), Some(&3));
        assert!(w.overflow > 0);
        assert!(w.entry(0, |_| {}).is_none());
    }
}
