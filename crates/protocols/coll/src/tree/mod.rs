//! Dissemination trees with interleaved and in-order numbering (paper, section 3.2).
//!
//! Ranks are relative to the broadcast root (root = 0). Parent and children come from the rank
//! alone: O(1) per child and O(log P) per parent for the interleaved trees; no table indexed by
//! rank is ever built.

mod inorder;
mod kary;
mod schedule;

use inorder::{BinomialCursor, BinomialInOrder, InOrder, InOrderCursor, SizedBase};
use kary::{KAryCursor, KAryTree};
use schedule::{ScheduleCursor, ScheduleTree};

/// Largest process count a topology accepts (ring arithmetic stays inside `u32`).
pub const MAX_PROCS: u32 = 1 << 30;

/// Shape of a dissemination tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TreeKind {
    /// Every inner process has up to `k` children.
    KAry {
        /// Fan-out.
        k: u32,
    },
    /// Binomial tree (Lamé tree of order 1).
    Binomial,
    /// Lamé tree of order `k`: `T_t = T_{t-1} • T_{t-k}`.
    Lame {
        /// Order: a new process starts sending `k` iterations after it was created.
        k: u32,
    },
    /// Latency-optimal tree for LogP latency `l` and overhead `o`: `T_t = T_{t-o} • T_{t-2o-L}`.
    /// Interleaved (Definition 1) when `o` divides `l`.
    Optimal {
        /// LogP latency L.
        l: u32,
        /// LogP overhead o.
        o: u32,
    },
}

/// How processes are labelled in the tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Numbering {
    /// Subtrees spread over the ring (Definition 1): failures leave small gaps.
    Interleaved,
    /// Depth-first pre-order: subtrees are contiguous rank blocks.
    InOrder,
}

/// Why a topology cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TreeError {
    /// The process count is zero or above [`MAX_PROCS`].
    #[error("process count {0} out of range 1..={max}", max = MAX_PROCS)]
    Procs(u32),
    /// A fan-out or order parameter is zero.
    #[error("tree parameter {name} must be at least 1, got {value}")]
    Parameter {
        /// Parameter name.
        name: &'static str,
        /// Rejected value.
        value: u32,
    },
    /// In-order numbering of an optimal tree with `o > 1` is not implemented.
    #[error("in-order numbering of the optimal tree needs o = 1 (got o = {0})")]
    InOrderOptimal(u32),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Imp {
    KAry(KAryTree),
    Schedule(ScheduleTree),
    BinomialInOrder(BinomialInOrder),
    InOrder(InOrder),
}

/// A dissemination tree over `procs` processes rooted at rank 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    kind: TreeKind,
    numbering: Numbering,
    procs: u32,
    imp: Imp,
}

/// Where a process is in enumerating its children (see [`Topology::next_child`]).
///
/// Twelve bytes whatever the tree, so per-process protocol state stays small; the topology
/// that made the cursor knows how to read it. A finished cursor has `u32::MAX` in the word
/// each tree uses as its progress marker, which is what [`Default`] gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChildCursor([u32; 3]);

impl Default for ChildCursor {
    fn default() -> Self {
        ChildCursor([u32::MAX; 3])
    }
}

impl Topology {
    /// Builds the tree; O(depth) work and memory.
    pub fn new(kind: TreeKind, numbering: Numbering, procs: u32) -> Result<Self, TreeError> {
        if procs == 0 || procs > MAX_PROCS {
            return Err(TreeError::Procs(procs));
        }
        let positive = |name, value: u32| {
            if value == 0 {
                Err(TreeError::Parameter { name, value })
            } else {
                Ok(value)
            }
        };
        let imp = match (kind, numbering) {
            (TreeKind::KAry { k }, Numbering::Interleaved) => {
                Imp::KAry(KAryTree::new(procs, positive("k", k)?))
            }
            (TreeKind::KAry { k }, Numbering::InOrder) => Imp::InOrder(InOrder::new(
                SizedBase::KAry(KAryTree::new(procs, positive("k", k)?)),
                procs,
            )),
            (TreeKind::Binomial, Numbering::Interleaved) => {
                Imp::Schedule(ScheduleTree::new(procs, 1, 1))
            }
            (TreeKind::Binomial, Numbering::InOrder) => {
                Imp::BinomialInOrder(BinomialInOrder::new(procs))
            }
            (TreeKind::Lame { k }, Numbering::Interleaved) => {
                Imp::Schedule(ScheduleTree::new(procs, 1, positive("k", k)?))
            }
            (TreeKind::Lame { k }, Numbering::InOrder) => Imp::InOrder(InOrder::new(
                SizedBase::Schedule(ScheduleTree::new(procs, 1, positive("k", k)?)),
                procs,
            )),
            (TreeKind::Optimal { l, o }, Numbering::Interleaved) => {
                let o = positive("o", o)?;
                Imp::Schedule(ScheduleTree::new(procs, o, 2 * o + l))
            }
            (TreeKind::Optimal { l, o }, Numbering::InOrder) => {
                if o != 1 {
                    return Err(TreeError::InOrderOptimal(o));
                }
                Imp::InOrder(InOrder::new(
                    SizedBase::Schedule(ScheduleTree::new(procs, 1, 2 + l)),
                    procs,
                ))
            }
        };
        Ok(Topology {
            kind,
            numbering,
            procs,
            imp,
        })
    }

    /// Number of processes.
    pub fn procs(&self) -> u32 {
        self.procs
    }

    /// Shape of the tree.
    pub fn kind(&self) -> TreeKind {
        self.kind
    }

    /// Labelling of the tree.
    pub fn numbering(&self) -> Numbering {
        self.numbering
    }

    /// Parent of `rank`; `None` for the root and for ranks outside the tree.
    pub fn parent(&self, rank: u32) -> Option<u32> {
        if rank >= self.procs {
            return None;
        }
        match &self.imp {
            Imp::KAry(t) => t.parent(rank),
            Imp::Schedule(t) => t.parent(rank),
            Imp::BinomialInOrder(t) => t.parent(rank),
            Imp::InOrder(t) => t.parent(rank),
        }
    }

    /// Starts enumerating the children of `rank` in send order.
    pub fn cursor(&self, rank: u32) -> ChildCursor {
        if rank >= self.procs {
            return ChildCursor::default();
        }
        // Word layouts; the marker word is u32::MAX once done.
        ChildCursor(match &self.imp {
            // [rank, stride, next index (marker)]
            Imp::KAry(t) => {
                let c = t.cursor(rank);
                [c.rank, c.stride, c.next]
            }
            // [next time (marker), position, -]
            Imp::Schedule(t) => {
                let c = t.cursor(rank);
                [c.next_time, c.pos, 0]
            }
            // [rank (marker), mask, -]
            Imp::BinomialInOrder(t) => {
                let c = t.cursor(rank);
                [c.rank, c.mask, 0]
            }
            // [base cursor (first word is the marker), next in-order rank]
            Imp::InOrder(t) => {
                let c = t.cursor(rank);
                [c.base[0], c.base[1], c.next]
            }
        })
    }

    fn cursor_done(&self, cur: &ChildCursor) -> bool {
        let w = &cur.0;
        match &self.imp {
            Imp::KAry(_) => w[2] == u32::MAX,
            Imp::Schedule(_) | Imp::BinomialInOrder(_) | Imp::InOrder(_) => w[0] == u32::MAX,
        }
    }

    /// Next child in send order, O(1) for interleaved trees.
    #[inline]
    pub fn next_child(&self, cur: &mut ChildCursor) -> Option<u32> {
        if self.cursor_done(cur) {
            return None;
        }
        let w = &mut cur.0;
        let next = match &self.imp {
            Imp::Schedule(t) => {
                let mut c = ScheduleCursor {
                    next_time: w[0],
                    pos: w[1],
                };
                let out = t.next_child(&mut c);
                w[0] = c.next_time;
                out
            }
            Imp::KAry(t) => {
                let mut c = KAryCursor {
                    rank: w[0],
                    stride: w[1],
                    next: w[2],
                };
                let out = t.next_child(&mut c);
                w[2] = c.next;
                out
            }
            Imp::BinomialInOrder(t) => {
                let mut c = BinomialCursor {
                    rank: w[0],
                    mask: w[1],
                };
                let out = t.next_child(&mut c);
                w[1] = c.mask;
                out
            }
            Imp::InOrder(t) => {
                let mut c = InOrderCursor {
                    base: [w[0], w[1]],
                    next: w[2],
                };
                let out = t.next_child(&mut c);
                *w = [c.base[0], c.base[1], c.next];
                out
            }
        };
        if next.is_none() {
            let marker = if matches!(self.imp, Imp::KAry(_)) {
                2
            } else {
                0
            };
            w[marker] = u32::MAX;
        }
        next
    }

    /// Children of `rank` in send order.
    pub fn children(&self, rank: u32) -> Children<'_> {
        Children {
            tree: self,
            cur: self.cursor(rank),
        }
    }

    /// Time at which the last process is colored in a fault-free run under LogP (`l`, `o`,
    /// `g`): a process colored at `c` starts its `j`-th send at `c + j·max(o, g)` and that child
    /// is colored at `c + j·max(o, g) + 2o + l`. O(P) time, O(depth) memory.
    pub fn fault_free_latency(&self, l: u64, o: u64, g: u64) -> u64 {
        let slot = o.max(g);
        let hop = 2 * o + l;
        let mut latest = 0u64;
        // Depth-first walk: (children cursor, time of the next send).
        let mut stack: Vec<(ChildCursor, u64)> = vec![(self.cursor(0), 0)];
        while let Some((cur, next_send)) = stack.last_mut() {
            match self.next_child(cur) {
                Some(child) => {
                    let colored = *next_send + hop;
                    *next_send += slot;
                    latest = latest.max(colored);
                    stack.push((self.cursor(child), colored));
                }
                None => {
                    stack.pop();
                }
            }
        }
        latest
    }

    /// Depth of the tree in edges (O(P)).
    pub fn height(&self) -> u32 {
        let mut best = 0u32;
        let mut stack: Vec<(ChildCursor, u32)> = vec![(self.cursor(0), 0)];
        while let Some((cur, depth)) = stack.last_mut() {
            let d = *depth;
            match self.next_child(cur) {
                Some(child) => {
                    best = best.max(d + 1);
                    stack.push((self.cursor(child), d + 1));
                }
                None => {
                    stack.pop();
                }
            }
        }
        best
    }
}

/// Iterator over the children of one process, in send order.
#[derive(Debug, Clone)]
pub struct Children<'a> {
    tree: &'a Topology,
    cur: ChildCursor,
}

impl Iterator for Children<'_> {
    type Item = u32;

    fn next(&mut self) -> Option<u32> {
        self.tree.next_child(&mut self.cur)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_kinds() -> Vec<TreeKind> {
        vec![
            TreeKind::KAry { k: 1 },
            TreeKind::KAry { k: 2 },
            TreeKind::KAry { k: 4 },
            TreeKind::Binomial,
            TreeKind::Lame { k: 2 },
            TreeKind::Lame { k: 3 },
            TreeKind::Optimal { l: 2, o: 1 },
            TreeKind::Optimal { l: 3, o: 2 },
            TreeKind::Optimal { l: 0, o: 3 },
        ]
    }

    /// Every rank except the root has exactly one parent, and `parent` agrees with the
    /// children lists.
    #[test]
    fn parent_and_children_agree() {
        for p in [1u32, 2, 3, 7, 8, 9, 31, 64, 100, 257] {
            for kind in all_kinds() {
                for numbering in [Numbering::Interleaved, Numbering::InOrder] {
                    let Ok(t) = Topology::new(kind, numbering, p) else {
                        continue;
                    };
                    let mut seen = vec![0u32; p as usize];
                    for r in 0..p {
                        for c in t.children(r) {
                            assert!(c < p, "{kind:?} {numbering:?} P={p}: child {c} of {r}");
                            seen[c as usize] += 1;
                            assert_eq!(t.parent(c), Some(r), "{kind:?} {numbering:?} P={p} c={c}");
                        }
                    }
                    assert_eq!(seen[0], 0);
                    assert!(
                        seen[1..].iter().all(|&n| n == 1),
                        "{kind:?} {numbering:?} P={p}"
                    );
                }
            }
        }
    }

    #[test]
    fn in_order_subtrees_are_contiguous() {
        for p in [5u32, 16, 33, 100] {
            for kind in [
                TreeKind::Binomial,
                TreeKind::KAry { k: 2 },
                TreeKind::Lame { k: 2 },
            ] {
                let t = Topology::new(kind, Numbering::InOrder, p).unwrap();
                for r in 0..p {
                    let mut all = vec![r];
                    let mut stack: Vec<u32> = t.children(r).collect();
                    while let Some(c) = stack.pop() {
                        all.push(c);
                        stack.extend(t.children(c));
                    }
                    all.sort_unstable();
                    assert_eq!(all[0], r, "{kind:?} P={p} r={r}");
                    assert!(
                        all.windows(2).all(|w| w[1] == w[0] + 1),
                        "{kind:?} P={p} r={r}"
                    );
                }
            }
        }
    }

    #[test]
    fn optimal_latency_is_first_time_all_colored() {
        // With the optimal tree every process sends until the end, so the last process is
        // colored exactly when R(t) reaches P.
        for (l, o) in [(2u32, 1u32), (1, 1), (5, 1), (3, 2), (1, 3), (0, 2)] {
            for p in [2u32, 10, 100, 1000, 4097] {
                let t =
                    Topology::new(TreeKind::Optimal { l, o }, Numbering::Interleaved, p).unwrap();
                let Imp::Schedule(s) = &t.imp else {
                    unreachable!()
                };
                assert_eq!(
                    t.fault_free_latency(u64::from(l), u64::from(o), 0),
                    u64::from(s.last_time()),
                    "L={l} o={o} P={p}"
                );
            }
        }
    }

    #[test]
    fn rejects_bad_parameters() {
        assert!(Topology::new(TreeKind::Binomial, Numbering::Interleaved, 0).is_err());
        assert!(Topology::new(TreeKind::KAry { k: 0 }, Numbering::Interleaved, 4).is_err());
        assert!(Topology::new(TreeKind::Lame { k: 0 }, Numbering::Interleaved, 4).is_err());
        assert_eq!(
            Topology::new(TreeKind::Optimal { l: 1, o: 2 }, Numbering::InOrder, 4),
            Err(TreeError::InOrderOptimal(2))
        );
    }
}
