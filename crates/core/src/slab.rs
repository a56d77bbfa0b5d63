//! Generation-checked slot storage behind every MPI handle the library hands out.
//!
//! A handle packs `(generation, index)` so a stale or forged handle is recognised instead of
//! aliasing a newer object. Values stay at or above 0x1000, clear of the standard ABI's
//! predefined handle constants (1..4095).

use std::mem::MaybeUninit;

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

/// A slot's tag: its generation (low 24 bits) and whether it holds a value.
const USED: u32 = 1 << 31;
const GEN_MASK: u32 = 0x00ff_ffff;
/// End of the free list.
const NO_SLOT: u32 = u32::MAX;

/// Slot storage with generation checks and a free list.
///
/// Values live in a plain array of possibly uninitialised slots, with the generations and
/// the free list beside them, so an entry is written where it will stay: a slab of
/// enum slots built each value on the stack and copied it in (a request is over 200 bytes, and
/// one is stored for every nonblocking call).
pub struct Slab<T> {
    /// Per slot: generation and [`USED`].
    tags: Vec<u32>,
    /// Per free slot: the next free slot ([`NO_SLOT`]: none).
    next: Vec<u32>,
    vals: Vec<MaybeUninit<T>>,
    free: u32,
    len: usize,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab { tags: Vec::new(), next: Vec::new(), vals: Vec::new(), free: NO_SLOT, len: 0 }
    }
}

impl<T> Drop for Slab<T> {
    fn drop(&mut self) {
        for (tag, v) in self.tags.iter().zip(self.vals.iter_mut()) {
            if tag & USED != 0 {
                // SAFETY: a used slot holds an initialised value, dropped once here.
                unsafe { v.assume_init_drop() };
            }
        }
    }
}

impl<T> Slab<T> {
    /// Store `v`, returning its handle.
    #[inline]
    pub fn insert(&mut self, v: T) -> Handle {
        self.insert_with(|| v)
    }

    /// Store the value `make` builds, returning its handle: `make` runs once the slot is
    /// chosen, so the value can be built in place.
    #[inline]
    pub fn insert_with(&mut self, make: impl FnOnce() -> T) -> Handle {
        let i = self.free as usize;
        if let (Some(tag), Some(v)) = (self.tags.get_mut(i), self.vals.get_mut(i)) {
            v.write(make());
            let g = (*tag & GEN_MASK).wrapping_add(1) & GEN_MASK;
            *tag = g | USED;
            self.free = self.next[i];
            self.len += 1;
            return Handle::new(i, g);
        }
        self.vals.push(MaybeUninit::new(make()));
        self.tags.push(USED);
        self.next.push(NO_SLOT);
        self.len += 1;
        Handle::new(self.vals.len() - 1, 0)
    }

    /// The slot index of `h` if `h` is live.
    #[inline]
    fn live(&self, h: Handle) -> Option<usize> {
        let (i, g) = h.parts()?;
        (*self.tags.get(i)? == g | USED).then_some(i)
    }

    /// The entry behind `h`, if `h` is live.
    #[inline]
    pub fn get(&self, h: Handle) -> Option<&T> {
        let i = self.live(h)?;
        // SAFETY: a used slot holds an initialised value.
        Some(unsafe { self.vals[i].assume_init_ref() })
    }
    /// Mutable access to the entry behind `h`, if live.
    #[inline]
    pub fn get_mut(&mut self, h: Handle) -> Option<&mut T> {
        let i = self.live(h)?;
        // SAFETY: a used slot holds an initialised value.
        Some(unsafe { self.vals[i].assume_init_mut() })
    }
    /// Mark slot `i` free (its value already taken or about to be dropped).
    #[inline]
    fn release(&mut self, i: usize) {
        self.tags[i] &= GEN_MASK;
        self.next[i] = self.free;
        self.free = i as u32;
        self.len -= 1;
    }
    /// Remove and return the entry behind `h`.
    pub fn remove(&mut self, h: Handle) -> Option<T> {
        let i = self.live(h)?;
        self.release(i);
        // SAFETY: the slot held an initialised value and is now marked free, so it is read
        // out exactly once.
        Some(unsafe { self.vals[i].assume_init_read() })
    }
    /// Drop the entry behind `h` where it lies (no move out, unlike [`Slab::remove`]);
    /// whether `h` was live.
    #[inline]
    pub fn discard(&mut self, h: Handle) -> bool {
        let Some(i) = self.live(h) else { return false };
        self.release(i);
        // SAFETY: as in `remove`; marked free first, so a panic in the value's drop cannot
        // drop it twice.
        unsafe { self.vals[i].assume_init_drop() };
        true
    }
    /// Handles of all live entries (for sweeps such as failing requests to a dead peer).
    pub fn handles(&self) -> Vec<Handle> {
        self.tags
            .iter()
            .enumerate()
            .filter(|(_, t)| **t & USED != 0)
            .map(|(i, t)| Handle::new(i, t & GEN_MASK))
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
    #[test]
    fn entries_are_built_in_their_slot_and_dropped_with_the_slab() {
        let v = std::rc::Rc::new(());
        let mut s = Slab::default();
        let a = s.insert_with(|| v.clone());
        let b = s.insert(v.clone());
        assert_eq!(s.remove(a).map(|x| std::rc::Rc::ptr_eq(&x, &v)), Some(true));
        // The freed slot is taken again, under a new generation.
        let c = s.insert_with(|| v.clone());
        assert_ne!(a, c);
        assert_eq!(a.0 & ((1 << GEN_SHIFT) - 1), c.0 & ((1 << GEN_SHIFT) - 1), "same slot");
        assert!(s.get(a).is_none());
        assert_eq!(s.handles(), vec![c, b]);
        assert_eq!(std::rc::Rc::strong_count(&v), 3);
        drop(s);
        assert_eq!(std::rc::Rc::strong_count(&v), 1, "the slab dropped what it held");
    }
}
