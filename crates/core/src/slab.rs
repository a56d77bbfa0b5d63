//! Generation-checked slot storage behind every MPI handle the library hands out.
//!
//! A handle packs `(generation, index)` so a stale or forged handle is recognised instead of
//! aliasing a newer object. Values stay at or above 0x1000, clear of the standard ABI's
//! predefined handle constants (1..4095).

/// Handle value of a live slab entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Handle(pub u64);

const IDX_SHIFT: u32 = 12;
const IDX_BITS: u32 = 28;
const GEN_SHIFT: u32 = IDX_SHIFT + IDX_BITS;

impl Handle {
    fn new(idx: usize, gen: u32) -> Handle {
        Handle(((gen as u64) << GEN_SHIFT) | (((idx as u64) + 1) << IDX_SHIFT))
    }
    fn parts(self) -> Option<(usize, u32)> {
        let raw_idx = (self.0 >> IDX_SHIFT) & ((1 << IDX_BITS) - 1);
        if raw_idx == 0 || self.0 & ((1 << IDX_SHIFT) - 1) != 0 {
            return None;
        }
        Some(((raw_idx - 1) as usize, (self.0 >> GEN_SHIFT) as u32))
    }
}

enum Slot<T> {
    Used(u32, T),
    Free(u32, Option<usize>),
}

/// Slot storage with generation checks and a free list.
pub struct Slab<T> {
    slots: Vec<Slot<T>>,
    free: Option<usize>,
    len: usize,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab { slots: Vec::new(), free: None, len: 0 }
    }
}

impl<T> Slab<T> {
    /// Store `v`, returning its handle.
    pub fn insert(&mut self, v: T) -> Handle {
        self.len += 1;
        if let Some(i) = self.free {
            if let Slot::Free(g, next) = self.slots[i] {
                self.free = next;
                let g = g.wrapping_add(1) & 0x00ff_ffff;
                self.slots[i] = Slot::Used(g, v);
                return Handle::new(i, g);
            }
        }
        self.slots.push(Slot::Used(0, v));
        Handle::new(self.slots.len() - 1, 0)
    }
    /// The entry behind `h`, if `h` is live.
    pub fn get(&self, h: Handle) -> Option<&T> {
        let (i, g) = h.parts()?;
        match self.slots.get(i)? {
            Slot::Used(sg, v) if *sg == g => Some(v),
            _ => None,
        }
    }
    /// Mutable access to the entry behind `h`, if live.
    pub fn get_mut(&mut self, h: Handle) -> Option<&mut T> {
        let (i, g) = h.parts()?;
        match self.slots.get_mut(i)? {
            Slot::Used(sg, v) if *sg == g => Some(v),
            _ => None,
        }
    }
    /// Remove and return the entry behind `h`.
    pub fn remove(&mut self, h: Handle) -> Option<T> {
        let (i, g) = h.parts()?;
        match self.slots.get(i)? {
            Slot::Used(sg, _) if *sg == g => {}
            _ => return None,
        }
        let old = std::mem::replace(&mut self.slots[i], Slot::Free(g, self.free));
        self.free = Some(i);
        self.len -= 1;
        match old {
            Slot::Used(_, v) => Some(v),
            Slot::Free(..) => None,
        }
    }
    /// Drop the entry behind `h` where it lies (no move out, unlike [`Slab::remove`]);
    /// whether `h` was live.
    pub fn discard(&mut self, h: Handle) -> bool {
        let Some((i, g)) = h.parts() else { return false };
        let Some(slot) = self.slots.get_mut(i) else { return false };
        if !matches!(slot, Slot::Used(sg, _) if *sg == g) {
            return false;
        }
        // Assignment drops the old entry in place.
        *slot = Slot::Free(g, self.free);
        self.free = Some(i);
        self.len -= 1;
        true
    }
    /// Handles of all live entries (for sweeps such as failing requests to a dead peer).
    pub fn handles(&self) -> Vec<Handle> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| match s {
                Slot::Used(g, _) => Some(Handle::new(i, *g)),
                Slot::Free(..) => None,
            })
            .collect()
    }
    /// Number of live entries.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether there are no live entries.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn stale_handles_are_rejected() {
        let mut s = Slab::default();
        let a = s.insert(1);
        assert!(a.0 >= 0x1000);
        assert_eq!(s.remove(a), Some(1));
        let b = s.insert(2);
        assert_ne!(a, b);
        assert!(s.get(a).is_none());
        assert_eq!(s.get(b), Some(&2));
        assert!(s.get(Handle(0x101)).is_none());
        assert!(s.get(Handle(0)).is_none());
    }
    #[test]
    fn discarded_entries_are_dropped_and_their_slot_reused() {
        let mut s = Slab::default();
        let v = std::rc::Rc::new(());
        let a = s.insert(v.clone());
        assert!(s.discard(a));
        assert_eq!(std::rc::Rc::strong_count(&v), 1, "the entry was dropped");
        assert!(!s.discard(a), "a stale handle discards nothing");
        assert!(s.is_empty());
        let b = s.insert(v.clone());
        assert_ne!(a, b);
        assert!(s.get(b).is_some());
        assert_eq!(s.len(), 1);
    }
}
