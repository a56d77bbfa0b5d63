//! Attribute caching: keyvals (with their copy / delete callbacks) and per-object attribute
//! lists.
//!
//! Callbacks are opaque values here (the C layer stores function pointers, with the ABI's
//! sentinels 0 = "null" and 1 = "dup"); calling them is the C layer's job, done without the
//! library lock because a callback may call MPI.
//!
//! Keyval lifetime: a keyval lives while the application holds it or any attribute uses it.
//! Freeing marks it (a second free of a marked keyval is harmless, and the keyval stays
//! usable for attribute calls, as MPICH allows); it is dropped once the last attribute using
//! it is deleted.

use std::collections::HashMap;

use crate::error::MpiResult;
use crate::mpi_err;

/// What kind of object a keyval caches attributes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttrKind {
    Comm,
    Type,
    Win,
}

/// A keyval: callbacks and extra state given at creation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keyval {
    pub kind: AttrKind,
    /// Copy callback (0: do not copy, 1: copy the value, else a function pointer).
    pub copy_fn: usize,
    /// Delete callback (0: none, else a function pointer).
    pub delete_fn: usize,
    /// The application's extra_state pointer.
    pub extra: usize,
    /// References: the application's (until freed) plus one per attribute using it.
    refs: u32,
    freed: bool,
}

/// First keyval value handed out (clear of the predefined attribute keys 501..605).
pub const FIRST_KEYVAL: i32 = 0x1000;

/// The process's keyvals.
#[derive(Debug)]
pub struct Keyvals {
    map: HashMap<i32, Keyval>,
    next: i32,
}

impl Default for Keyvals {
    fn default() -> Self {
        Keyvals { map: HashMap::new(), next: FIRST_KEYVAL }
    }
}

impl Keyvals {
    /// Create a keyval; values are never reused, so a stale one is recognised.
    pub fn create(&mut self, kind: AttrKind, copy_fn: usize, delete_fn: usize, extra: usize) -> MpiResult<i32> {
        if self.next == i32::MAX {
            return mpi_err!(NoMem, "out of keyvals");
        }
        let k = self.next;
        self.next += 1;
        self.map.insert(k, Keyval { kind, copy_fn, delete_fn, extra, refs: 1, freed: false });
        Ok(k)
    }

    /// A keyval of `kind` that still exists (what set/get/delete accept). A freed keyval
    /// stays usable while attributes use it, as in MPICH: an application may delete such an
    /// attribute with the value it saved before freeing.
    pub fn get(&self, k: i32, kind: AttrKind) -> MpiResult<Keyval> {
        match self.map.get(&k) {
            Some(kv) if kv.kind != kind => mpi_err!(Keyval, "keyval {k} belongs to another kind of object ({:?})", kv.kind),
            Some(kv) => Ok(*kv),
            None => mpi_err!(Keyval, "invalid keyval {k} (never created, or freed and no longer used)"),
        }
    }

    /// A keyval that still exists, freed or not (callbacks of attributes outliving the
    /// application's handle).
    pub fn lookup(&self, k: i32) -> Option<Keyval> {
        self.map.get(&k).copied()
    }

    /// The application frees its handle on `k`.
    pub fn free(&mut self, k: i32, kind: AttrKind) -> MpiResult<()> {
        match self.map.get_mut(&k) {
            Some(kv) if kv.kind != kind => mpi_err!(Keyval, "keyval {k} belongs to another kind of object ({:?})", kv.kind),
            Some(kv) if kv.freed => Ok(()),
            Some(kv) => {
                kv.freed = true;
                self.release(k);
                Ok(())
            }
            None => mpi_err!(Keyval, "invalid keyval {k}"),
        }
    }

    /// An attribute now uses `k`.
    pub fn attach(&mut self, k: i32) {
        if let Some(kv) = self.map.get_mut(&k) {
            kv.refs += 1;
        }
    }

    /// An attribute using `k` is gone.
    pub fn release(&mut self, k: i32) {
        if let Some(kv) = self.map.get_mut(&k) {
            kv.refs = kv.refs.saturating_sub(1);
            if kv.refs == 0 {
                self.map.remove(&k);
            }
        }
    }

    /// Number of live keyvals (for tests and leak checks).
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether no keyval is live.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// Attributes cached on one object, in the order they were first set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AttrList {
    entries: Vec<(i32, usize)>,
}

impl AttrList {
    /// Set `k` to `v`; returns the previous value (kept in its place in the order).
    pub fn set(&mut self, k: i32, v: usize) -> Option<usize> {
        match self.entries.iter_mut().find(|e| e.0 == k) {
            Some(e) => Some(std::mem::replace(&mut e.1, v)),
            None => {
                self.entries.push((k, v));
                None
            }
        }
    }

    /// The value of `k`.
    pub fn get(&self, k: i32) -> Option<usize> {
        self.entries.iter().find(|e| e.0 == k).map(|e| e.1)
    }

    /// Remove `k`, returning its value.
    pub fn remove(&mut self, k: i32) -> Option<usize> {
        let i = self.entries.iter().position(|e| e.0 == k)?;
        Some(self.entries.remove(i).1)
    }

    /// The most recently set attribute (deletion runs last-in, first-out).
    pub fn last(&self) -> Option<(i32, usize)> {
        self.entries.last().copied()
    }

    /// All (keyval, value) pairs in set order.
    pub fn iter(&self) -> impl Iterator<Item = (i32, usize)> + '_ {
        self.entries.iter().copied()
    }

    /// Number of attributes.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no attribute is set.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorClass;

    #[test]
    fn keyval_lives_while_attributes_use_it() {
        let mut kv = Keyvals::default();
        let k = kv.create(AttrKind::Comm, 1, 0, 7).unwrap();
        kv.attach(k);
        kv.free(k, AttrKind::Comm).unwrap();
        // Still usable while an attribute uses it.
        assert_eq!(kv.get(k, AttrKind::Comm).map(|x| x.extra).unwrap(), 7);
        assert_eq!(kv.lookup(k).map(|x| x.extra), Some(7));
        kv.free(k, AttrKind::Comm).unwrap(); // a second free is harmless while alive
        kv.release(k);
        assert!(kv.lookup(k).is_none());
        assert_eq!(kv.get(k, AttrKind::Comm).unwrap_err().class, ErrorClass::Keyval);
        assert_eq!(kv.free(k, AttrKind::Comm).unwrap_err().class, ErrorClass::Keyval);
    }

    #[test]
    fn kinds_are_checked_and_values_not_reused() {
        let mut kv = Keyvals::default();
        let a = kv.create(AttrKind::Type, 0, 0, 0).unwrap();
        assert_eq!(kv.get(a, AttrKind::Comm).unwrap_err().class, ErrorClass::Keyval);
        kv.free(a, AttrKind::Type).unwrap();
        let b = kv.create(AttrKind::Comm, 0, 0, 0).unwrap();
        assert_ne!(a, b);
        assert!(kv.get(501, AttrKind::Comm).is_err());
    }

    #[test]
    fn list_keeps_first_set_order() {
        let mut l = AttrList::default();
        assert_eq!(l.set(5, 50), None);
        assert_eq!(l.set(3, 30), None);
        assert_eq!(l.set(5, 51), Some(50));
        assert_eq!(l.iter().collect::<Vec<_>>(), vec![(5, 51), (3, 30)]);
        assert_eq!(l.last(), Some((3, 30)));
        assert_eq!(l.remove(3), Some(30));
        assert_eq!(l.last(), Some((5, 51)));
        assert_eq!(l.remove(3), None);
    }
}
