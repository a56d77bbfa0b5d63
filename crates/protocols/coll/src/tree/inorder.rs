//! In-order (depth-first) numbering of the same tree shapes.
//!
//! In-order numbering labels processes in depth-first pre-order, children visited in send
//! order, so every subtree is a contiguous block of ranks: one failure leaves one contiguous
//! gap of the subtree's size (paper, figure 3 left). The shape is the interleaved tree's shape;
//! only the labels change, so fault-free latency is identical.
//!
//! The binomial tree uses the closed form every MPI library uses (parent `r - lowbit(r)`,
//! children `r + 2^i` for `2^i < lowbit(r)`, largest subtree first), which costs O(log P)
//! per query. Other shapes map between numberings by walking down from the root with subtree
//! sizes (O(depth · fan-out) size queries), which is fine for tests and small runs.

use super::kary::{KAryCursor, KAryTree};
use super::schedule::{ScheduleCursor, ScheduleTree};

/// In-order binomial tree (the MPICH / Open MPI "in-order binomial" numbering).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BinomialInOrder {
    procs: u32,
}

/// Iteration state over one process's children in a [`BinomialInOrder`] tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct BinomialCursor {
    pub rank: u32,
    /// Next power of two to add; children are tried from the largest down.
    pub mask: u32,
}

impl BinomialInOrder {
    pub(crate) fn new(procs: u32) -> Self {
        BinomialInOrder { procs }
    }

    pub(crate) fn cursor(&self, rank: u32) -> BinomialCursor {
        let mask = if rank == 0 {
            if self.procs <= 1 {
                0
            } else {
                1u32 << (31 - (self.procs - 1).leading_zeros())
            }
        } else {
            (rank & rank.wrapping_neg()) >> 1
        };
        BinomialCursor { rank, mask }
    }

    pub(crate) fn next_child(&self, cur: &mut BinomialCursor) -> Option<u32> {
        while cur.mask > 0 {
            let child = u64::from(cur.rank) + u64::from(cur.mask);
            cur.mask >>= 1;
            if child < u64::from(self.procs) {
                return Some(child as u32);
            }
        }
        None
    }

    pub(crate) fn parent(&self, rank: u32) -> Option<u32> {
        if rank == 0 || rank >= self.procs {
            None
        } else {
            Some(rank - (rank & rank.wrapping_neg()))
        }
    }
}

/// Interleaved tree whose subtree sizes are cheap enough to renumber it depth-first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SizedBase {
    KAry(KAryTree),
    Schedule(ScheduleTree),
}

/// Base-tree cursor fields (which tree they belong to is known from [`SizedBase`]): k-ary
/// `[rank, next index]` (the stride is recomputed), schedule `[next time, position]`.
pub(crate) type BaseCursor = [u32; 2];

/// Depth-first renumbering of a [`SizedBase`] tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InOrder {
    base: SizedBase,
    procs: u32,
}

/// Iteration state over one process's children in an [`InOrder`] tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct InOrderCursor {
    pub base: BaseCursor,
    pub next: u32,
}

impl InOrder {
    pub(crate) fn new(base: SizedBase, procs: u32) -> Self {
        InOrder { base, procs }
    }

    fn base_cursor(&self, v: u32) -> BaseCursor {
        match &self.base {
            SizedBase::KAry(t) => {
                let c = t.cursor(v);
                [c.rank, c.next]
            }
            SizedBase::Schedule(t) => {
                let c = t.cursor(v);
                [c.next_time, c.pos]
            }
        }
    }

    fn base_next(&self, cur: &mut BaseCursor) -> Option<u32> {
        match &self.base {
            SizedBase::KAry(t) => {
                let mut c = KAryCursor {
                    next: cur[1],
                    ..t.cursor(cur[0])
                };
                let out = t.next_child(&mut c);
                cur[1] = c.next;
                out
            }
            SizedBase::Schedule(t) => {
                let mut c = ScheduleCursor {
                    next_time: cur[0],
                    pos: cur[1],
                };
                let out = t.next_child(&mut c);
                *cur = [c.next_time, c.pos];
                out
            }
        }
    }

    fn base_parent(&self, v: u32) -> Option<u32> {
        match &self.base {
            SizedBase::KAry(t) => t.parent(v),
            SizedBase::Schedule(t) => t.parent(v),
        }
    }

    fn size(&self, v: u32) -> u64 {
        match &self.base {
            SizedBase::KAry(t) => t.subtree_size(v),
            SizedBase::Schedule(t) => t.subtree_size_below(v, self.procs),
        }
    }

    /// Interleaved label of the process with in-order rank `q`.
    pub(crate) fn to_interleaved(&self, q: u32) -> u32 {
        let q = u64::from(q);
        let (mut v, mut at) = (0u32, 0u64);
        'down: while at != q {
            let mut cur = self.base_cursor(v);
            let mut first = at + 1;
            while let Some(u) = self.base_next(&mut cur) {
                let s = self.size(u);
                if q < first + s {
                    v = u;
                    at = first;
                    continue 'down;
                }
                first += s;
            }
            // q beyond the tree: only reachable with q >= procs, which callers exclude.
            break;
        }
        v
    }

    /// In-order rank of the process with interleaved label `v`.
    pub(crate) fn to_inorder(&self, v: u32) -> u32 {
        let mut q = 0u64;
        let mut child = v;
        while let Some(p) = self.base_parent(child) {
            q += 1;
            let mut cur = self.base_cursor(p);
            while let Some(u) = self.base_next(&mut cur) {
                if u == child {
                    break;
                }
                q += self.size(u);
            }
            child = p;
        }
        q as u32
    }

    pub(crate) fn cursor(&self, q: u32) -> InOrderCursor {
        let v = self.to_interleaved(q);
        InOrderCursor {
            base: self.base_cursor(v),
            next: q.saturating_add(1),
        }
    }

    pub(crate) fn next_child(&self, cur: &mut InOrderCursor) -> Option<u32> {
        let u = self.base_next(&mut cur.base)?;
        let q = cur.next;
        cur.next = (u64::from(q) + self.size(u)).min(u64::from(u32::MAX)) as u32;
        Some(q)
    }

    pub(crate) fn parent(&self, q: u32) -> Option<u32> {
        if q == 0 || q >= self.procs {
            return None;
        }
        let v = self.to_interleaved(q);
        self.base_parent(v).map(|p| self.to_inorder(p))
    }
}
