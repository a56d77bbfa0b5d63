//! Interleaved k-ary trees (paper, section 3.2.1).
//!
//! Level `l` holds ranks `a_l .. a_{l+1}` with `a_l = (k^l - 1) / (k - 1)`; a process `r` on
//! level `l` has the children `r + i * k^l` for `i = 1..=k`. Neighbours on the ring thus never
//! share a parent below the root, and a failed process on level `l` leaves every `k^l`-th
//! process uncolored instead of a contiguous block.

/// Interleaved k-ary tree over `procs` processes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KAryTree {
    procs: u32,
    k: u32,
}

/// Iteration state over one process's children in a [`KAryTree`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct KAryCursor {
    pub rank: u32,
    /// `k^l` for the level `l` of `rank`, saturated (a saturated stride has no children
    /// below `MAX_PROCS`).
    pub stride: u32,
    /// Index `i` of the next child, `1..=k`.
    pub next: u32,
}

impl KAryTree {
    pub(crate) fn new(procs: u32, k: u32) -> Self {
        debug_assert!(procs >= 1 && k >= 1);
        KAryTree { procs, k }
    }

    /// Level of `rank`, the first rank of that level, and `k^level`.
    pub(crate) fn level(&self, rank: u32) -> (u32, u64, u64) {
        let k = u64::from(self.k);
        let r = u64::from(rank);
        let (mut level, mut first, mut width) = (0u32, 0u64, 1u64);
        while r >= first + width {
            first += width;
            width *= k;
            level += 1;
        }
        (level, first, width)
    }

    pub(crate) fn cursor(&self, rank: u32) -> KAryCursor {
        let (_, _, width) = self.level(rank);
        KAryCursor {
            rank,
            stride: width.min(u64::from(u32::MAX)) as u32,
            next: 1,
        }
    }

    #[inline]
    pub(crate) fn next_child(&self, cur: &mut KAryCursor) -> Option<u32> {
        if cur.next > self.k {
            return None;
        }
        let child = u64::from(cur.rank) + u64::from(cur.next) * u64::from(cur.stride);
        if child >= u64::from(self.procs) {
            cur.next = self.k + 1;
            return None;
        }
        cur.next += 1;
        Some(child as u32)
    }

    pub(crate) fn parent(&self, rank: u32) -> Option<u32> {
        if rank == 0 || rank >= self.procs {
            return None;
        }
        let (_, first, width) = self.level(rank);
        let up = width / u64::from(self.k);
        let i = (u64::from(rank) - first) / up + 1;
        Some((u64::from(rank) - i * up) as u32)
    }

    /// Size of the subtree of `rank` (itself included).
    pub(crate) fn subtree_size(&self, rank: u32) -> u64 {
        let p = u64::from(self.procs);
        let k = u64::from(self.k);
        if k == 1 {
            return p - u64::from(rank);
        }
        let (level, first, width) = self.level(rank);
        let j = u64::from(rank) - first;
        let (last_level, last_first, _) = self.level(self.procs - 1);
        let kept_last = p - last_first;
        if level == last_level {
            return 1;
        }
        // Descendants on level m sit at in-level indices j + t * k^level, t < k^(m - level).
        let mut size = 0u64;
        let mut count = 1u64;
        for _ in level..last_level {
            size += count;
            count *= k;
        }
        // Partial last level: indices j, j + width, ... below kept_last.
        if kept_last > j {
            size += ((kept_last - j).div_ceil(width)).min(count);
        }
        size
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_matches_paper_figure_3() {
        // Figure 3 (right): 0 -> 1, 2; 1 -> 3, 5; 2 -> 4, 6.
        let t = KAryTree::new(7, 2);
        let kids = |r| {
            let mut c = t.cursor(r);
            std::iter::from_fn(|| t.next_child(&mut c)).collect::<Vec<_>>()
        };
        assert_eq!(kids(0), vec![1, 2]);
        assert_eq!(kids(1), vec![3, 5]);
        assert_eq!(kids(2), vec![4, 6]);
        assert_eq!(t.parent(5), Some(1));
        assert_eq!(t.parent(4), Some(2));
    }
}
