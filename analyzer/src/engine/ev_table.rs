//! Per-ev state of one direction (its paths), found by ev on every packet.
//!
//! Entries live in a `Vec` in the order their ev was first seen and are
//! never removed (a direction's paths go with the direction). A lookup
//! first tries one direct-mapped slot chosen by the ev's low bits, then a
//! hash map. Evs numbered from 0 or 1 (the reference stack's 1..=N, the
//! generators') never share a slot up to 64 paths, so the slot holds the
//! answer; evs spread over the 16 bits may share one and then fall back to
//! the map. Spraying means consecutive packets use different evs, so a
//! "last used" cache would miss. The hash map's own lookup stayed an
//! out-of-line call per packet (docs/performance.md).

use rustc_hash::FxHashMap;

/// Direct-mapped slots (a power of two): 64 evs in a row never collide.
const SLOTS: usize = 64;
/// The initial slot value. A slot is only a hint (the entry's ev is
/// checked), so this may also be a real index.
const EMPTY: u16 = u16::MAX;

/// One entry on its own cache line(s): the ev the lookup checks and the
/// start of the value share the first line.
#[derive(Debug, Clone)]
#[repr(C, align(64))]
struct Entry<V> {
    ev: u16,
    value: V,
}

/// `repr(C)`: the slots next to the entries' pointer, the map last.
#[derive(Debug, Clone)]
#[repr(C)]
pub(crate) struct EvTable<V> {
    entries: Vec<Entry<V>>,
    /// Entry index of the ev last found through each slot (`EMPTY` for an
    /// index too large to store here).
    slots: [u16; SLOTS],
    /// Entry index by ev, for every entry.
    index: FxHashMap<u16, u32>,
}

impl<V> Default for EvTable<V> {
    fn default() -> Self {
        EvTable {
            entries: Vec::new(),
            index: FxHashMap::default(),
            slots: [EMPTY; SLOTS],
        }
    }
}

#[inline]
fn slot_of(ev: u16) -> usize {
    usize::from(ev) % SLOTS
}

impl<V> EvTable<V> {
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    #[inline]
    pub fn get_mut(&mut self, ev: u16) -> Option<&mut V> {
        let i = usize::from(self.slots[slot_of(ev)]);
        if self.entries.get(i).is_some_and(|e| e.ev == ev) {
            return Some(&mut self.entries[i].value);
        }
        self.get_mut_by_index(ev)
    }

    /// [`EvTable::get_mut`] past its slot: the hash map, then the slot
    /// remembers the answer.
    #[inline(never)]
    fn get_mut_by_index(&mut self, ev: u16) -> Option<&mut V> {
        let i = *self.index.get(&ev)?;
        self.slots[slot_of(ev)] = u16::try_from(i).unwrap_or(EMPTY);
        Some(&mut self.entries[i as usize].value)
    }

    /// Adds `ev`, which must not be present yet, and returns its value.
    pub fn insert_new(&mut self, ev: u16, value: V) -> &mut V {
        debug_assert!(!self.index.contains_key(&ev));
        let i = self.entries.len();
        self.entries.push(Entry { ev, value });
        self.index.insert(ev, i as u32);
        self.slots[slot_of(ev)] = u16::try_from(i).unwrap_or(EMPTY);
        &mut self.entries[i].value
    }

    /// Every entry, in the order the evs were first seen.
    pub fn iter(&self) -> impl Iterator<Item = (u16, &V)> {
        self.entries.iter().map(|e| (e.ev, &e.value))
    }
}

#[cfg(test)]
mod test {
    use super::*;

    /// Evs that share a slot (and a table larger than a slot index can
    /// hold) are each found with their own value.
    #[test]
    fn colliding_evs_keep_their_own_values() {
        let mut t: EvTable<u32> = EvTable::default();
        // Every ev once, in a scrambled order (40,503 is odd: a bijection).
        let evs: Vec<u16> = (0..=u16::MAX).map(|i| i.wrapping_mul(40_503)).collect();
        for &ev in &evs {
            assert!(t.get_mut(ev).is_none());
            *t.insert_new(ev, 0) = u32::from(ev) * 3;
        }
        // Alternate evs 64 apart (one slot) and far-apart ones.
        for round in 0..3 {
            for &ev in [0u16, 64, 128, 0, 65_535, 65_471, 7].iter() {
                let v = t.get_mut(ev).unwrap();
                assert_eq!(*v, u32::from(ev) * 3 + round, "ev {ev}");
            }
            for &ev in [0u16, 64, 128, 65_535, 65_471, 7].iter() {
                *t.get_mut(ev).unwrap() += 1;
            }
        }
        assert_eq!(t.len(), 65_536);
        assert_eq!(t.iter().count(), 65_536);
    }

    #[test]
    fn absent_evs_are_absent() {
        let mut t: EvTable<u8> = EvTable::default();
        t.insert_new(3, 1);
        assert!(t.get_mut(67).is_none(), "same slot, other ev");
        assert!(t.get_mut(4).is_none());
        assert_eq!(t.get_mut(3), Some(&mut 1));
        assert_eq!(t.iter().collect::<Vec<_>>(), vec![(3, &1)]);
    }
}
