//! Spare buffers for eager messages that arrive before their receive is posted.
//!
//! Such a message is copied out of the path into a buffer of its own and copied again when a
//! receive matches it. With a fresh heap allocation per message, a window of unexpected
//! 8-16 KiB messages (both ranks of a bidirectional stream send before they receive) frees
//! a megabyte at once; the allocator gives it back to the kernel and the next window
//! page-faults it in again: a fifth of the time of such a stream went to those faults.
//! Buffers consumed by a match come back here and are handed out again instead.

/// Smallest buffer kept: below it an allocation comes from the allocator's bins without
/// touching fresh pages, and recycling would only add work.
const MIN_SHIFT: u32 = 10;
/// Largest buffer kept (the largest eager payload of any path).
const MAX_SHIFT: u32 = 16;
const CLASSES: usize = (MAX_SHIFT - MIN_SHIFT + 1) as usize;
/// Bytes the spares may hold at most: two windows of 64 messages of 16 KiB.
const MAX_HELD: usize = 2 << 20;

/// Recycled buffers, one stack per power-of-two capacity from 1 KiB to 64 KiB.
#[derive(Default)]
pub(crate) struct Spares {
    classes: [Vec<Vec<u8>>; CLASSES],
    held: usize,
}

/// The class of a buffer that holds `len` bytes: the smallest power of two at least `len`.
fn class_for(len: usize) -> Option<usize> {
    if len < 1 << MIN_SHIFT || len > 1 << MAX_SHIFT {
        return None;
    }
    Some((len.next_power_of_two().trailing_zeros() - MIN_SHIFT) as usize)
}

impl Spares {
    /// A buffer holding a copy of `bytes`: a spare one when there is one of its class.
    pub(crate) fn filled(&mut self, bytes: &[u8]) -> Vec<u8> {
        let Some(c) = class_for(bytes.len()) else { return bytes.to_vec() };
        let mut v = match self.classes[c].pop() {
            Some(v) => {
                self.held -= v.capacity();
                v
            }
            None => Vec::with_capacity(1 << (c as u32 + MIN_SHIFT)),
        };
        v.clear();
        v.extend_from_slice(bytes);
        v
    }

    /// Take back a buffer whose contents were consumed; dropped when it is not of a class or
    /// the spares hold enough.
    pub(crate) fn put(&mut self, v: Vec<u8>) {
        let cap = v.capacity();
        if !cap.is_power_of_two() || self.held + cap > MAX_HELD {
            return;
        }
        let Some(c) = class_for(cap) else { return };
        self.held += cap;
        self.classes[c].push(v);
    }

    /// Bytes held as spares.
    #[cfg(test)]
    fn held(&self) -> usize {
        self.held
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_and_large_messages_are_plain_copies() {
        let mut s = Spares::default();
        let v = s.filled(&[7u8; 100]);
        assert_eq!(v, vec![7u8; 100]);
        s.put(v);
        assert_eq!(s.held(), 0);
        let big = vec![1u8; (1 << MAX_SHIFT) + 1];
        let v = s.filled(&big);
        assert_eq!(v, big);
        s.put(v);
        assert_eq!(s.held(), 0);
    }

    #[test]
    fn a_consumed_buffer_is_handed_out_again() {
        let mut s = Spares::default();
        let v = s.filled(&[3u8; 16 << 10]);
        assert_eq!(v.capacity(), 16 << 10);
        let ptr = v.as_ptr();
        s.put(v);
        assert_eq!(s.held(), 16 << 10);
        // Any length of the same class reuses it, with exactly the new contents.
        let w = s.filled(&[9u8; 9000]);
        assert_eq!(w.as_ptr(), ptr);
        assert_eq!(w, vec![9u8; 9000]);
        assert_eq!(s.held(), 0);
        // Another class does not.
        s.put(w);
        let x = s.filled(&[1u8; 2000]);
        assert_ne!(x.as_ptr(), ptr);
        assert_eq!(x.capacity(), 2048);
    }

    #[test]
    fn the_spares_hold_at_most_their_budget() {
        let mut s = Spares::default();
        let bufs: Vec<_> = (0..200).map(|_| s.filled(&[0u8; 64 << 10])).collect();
        for b in bufs {
            s.put(b);
        }
        assert!(s.held() <= MAX_HELD);
        assert_eq!(s.held(), MAX_HELD);
        // A buffer not made here (capacity not a power of two) is not kept.
        let mut s = Spares::default();
        s.put(Vec::with_capacity(3000));
        assert_eq!(s.held(), 0);
    }
}
