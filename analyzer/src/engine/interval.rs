//! A set of half-open byte ranges, for rebuilding messages from packets
//! that arrive out of order. Up to four disjoint ranges live inline; more
//! spill to the heap (only for badly fragmented messages).

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IntervalSet {
    inline: [(u32, u32); 4],
    n: u8,
    spill: Vec<(u32, u32)>,
}

impl IntervalSet {
    /// Number of disjoint ranges.
    pub fn ranges(&self) -> usize {
        if self.spill.is_empty() {
            usize::from(self.n)
        } else {
            self.spill.len()
        }
    }

    /// Adds `[start, end)`; returns the number of bytes that were new.
    #[inline]
    pub fn insert(&mut self, start: u32, end: u32) -> u64 {
        if end <= start {
            return 0;
        }
        // Fast path, inlined: a message's first range, or in-order data
        // that extends or follows the last range.
        if self.spill.is_empty() {
            let n = usize::from(self.n);
            if n == 0 {
                self.inline[0] = (start, end);
                self.n = 1;
                return u64::from(end - start);
            }
            let last = &mut self.inline[n - 1];
            if start >= last.0 {
                if start <= last.1 {
                    let added = u64::from(end.saturating_sub(last.1));
                    last.1 = last.1.max(end);
                    return added;
                }
                if n < 4 {
                    self.inline[n] = (start, end);
                    self.n += 1;
                    return u64::from(end - start);
                }
            }
        }
        self.insert_out_of_order(start, end)
    }

    /// [`IntervalSet::insert`] of a range that lands before the last one,
    /// or past four inline ranges.
    #[inline(never)]
    fn insert_out_of_order(&mut self, start: u32, end: u32) -> u64 {
        if self.spill.is_empty() {
            let mut tmp = [(0u32, 0u32); 5];
            let n = usize::from(self.n);
            tmp[..n].copy_from_slice(&self.inline[..n]);
            let (added, len) = merge(&mut tmp, n, start, end);
            if len <= 4 {
                self.inline[..len].copy_from_slice(&tmp[..len]);
                self.n = len as u8;
            } else {
                self.spill.extend_from_slice(&tmp[..len]);
                self.n = 0;
            }
            added
        } else {
            let n = self.spill.len();
            self.spill.push((0, 0));
            let (added, len) = merge(&mut self.spill, n, start, end);
            self.spill.truncate(len);
            added
        }
    }

    /// True when `[0, len)` is covered.
    #[inline]
    pub fn covers(&self, len: u32) -> bool {
        let first = if self.spill.is_empty() {
            (self.n > 0).then(|| self.inline[0])
        } else {
            self.spill.first().copied()
        };
        first.is_some_and(|(s, e)| s == 0 && e >= len)
    }

    pub fn clear(&mut self) {
        self.n = 0;
        self.spill.clear();
    }
}

/// Merges `[start, end)` into the sorted disjoint ranges `v[..n]` (with room
/// for one more); returns (new bytes, new length).
fn merge(v: &mut [(u32, u32)], n: usize, start: u32, end: u32) -> (u64, usize) {
    // Find the first range that ends at or after start.
    let mut i = 0;
    while i < n && v[i].1 < start {
        i += 1;
    }
    let mut j = i;
    let mut s = start;
    let mut e = end;
    let mut overlap: u64 = 0;
    while j < n && v[j].0 <= end {
        let (a, b) = v[j];
        let lo = a.max(start);
        let hi = b.min(end);
        if hi > lo {
            overlap += u64::from(hi - lo);
        }
        s = s.min(a);
        e = e.max(b);
        j += 1;
    }
    let added = u64::from(end - start) - overlap;
    // Replace v[i..j] by (s, e).
    let removed = j - i;
    if removed == 0 {
        v.copy_within(i..n, i + 1);
        v[i] = (s, e);
        (added, n + 1)
    } else {
        v[i] = (s, e);
        v.copy_within(j..n, i + 1);
        (added, n - removed + 1)
    }
}

#[cfg(test)]
mod test {
    use super::*;

    #[test]
    fn out_of_order_ranges_merge() {
        let mut s = IntervalSet::default();
        assert_eq!(s.insert(100, 200), 100);
        assert_eq!(s.insert(300, 400), 100);
        assert!(!s.covers(400));
        assert_eq!(s.insert(150, 350), 100);
        assert_eq!(s.ranges(), 1);
        assert_eq!(s.insert(0, 100), 100);
        assert!(s.covers(400));
        assert_eq!(s.insert(0, 400), 0);
    }

    #[test]
    fn spills_past_four_ranges() {
        let mut s = IntervalSet::default();
        for k in (0..10u32).rev() {
            s.insert(k * 10, k * 10 + 5);
        }
        assert_eq!(s.ranges(), 10);
        for k in 0..10u32 {
            s.insert(k * 10 + 5, k * 10 + 10);
        }
        assert_eq!(s.ranges(), 1);
        assert!(s.covers(100));
    }
}
