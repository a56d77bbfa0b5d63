//! Radix-tree arithmetic on ids: the start-up tree every process computes without messages.
//!
//! Ids are laid out level by level with 2^k children per node: the children of `i` are
//! `i·2^k + 1 ..= i·2^k + 2^k` and the parent of `i > 0` is `(i − 1) >> k`, so routing needs
//! only shifts. An ancestor always has a lower id than its descendants, which is why the
//! lowest live id can serve as the root after failures (see [`crate::View`]).

use crate::NodeId;

/// Parent of `id` in the start-up tree; `None` for id 0.
#[inline]
pub fn base_parent(id: NodeId, fanout_log2: u8) -> Option<NodeId> {
    if id == 0 {
        None
    } else {
        Some((id - 1) >> fanout_log2)
    }
}

/// First and last child of `id` in the start-up tree (as u64: they may exceed the id range).
#[inline]
pub fn base_children(id: NodeId, fanout_log2: u8) -> (u64, u64) {
    let first = ((id as u64) << fanout_log2) + 1;
    (first, first + (1u64 << fanout_log2) - 1)
}

/// Depth of `id` in the start-up tree (root 0 has depth 0).
pub fn base_depth(mut id: NodeId, fanout_log2: u8) -> u32 {
    let mut d = 0;
    while id > 0 {
        id = (id - 1) >> fanout_log2;
        d += 1;
    }
    d
}

/// Height H (number of levels) of the start-up tree with `n` processes; 0 when `n` is 0.
pub fn tree_height(n: u32, fanout_log2: u8) -> u32 {
    if n == 0 {
        0
    } else {
        base_depth(n - 1, fanout_log2) + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parent_child_inverse() {
        for k in 1..=4u8 {
            for id in 0..2000u32 {
                let (a, b) = base_children(id, k);
                for c in a..=b {
                    assert_eq!(base_parent(c as u32, k), Some(id));
                    assert_eq!(base_depth(c as u32, k), base_depth(id, k) + 1);
                }
            }
        }
    }

    #[test]
    fn heights_match_the_paper() {
        // Four children: the height grows above 5 and above 21 nodes (paper, Section 7.2).
        assert_eq!(tree_height(5, 2), 2);
        assert_eq!(tree_height(6, 2), 3);
        assert_eq!(tree_height(21, 2), 3);
        assert_eq!(tree_height(22, 2), 4);
        // Binary: full trees have 2^n − 1 nodes.
        assert_eq!(tree_height(1, 1), 1);
        assert_eq!(tree_height(3, 1), 2);
        assert_eq!(tree_height(7, 1), 3);
        assert_eq!(tree_height(8, 1), 4);
        assert_eq!(tree_height(65536, 1), 17);
        assert_eq!(tree_height(65536, 2), 9);
    }
}
