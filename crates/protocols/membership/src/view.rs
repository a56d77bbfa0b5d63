//! The view: who is a member, as an array for O(1) access plus the radix tree over it.
//!
//! The tree of a view is a pure function of its member set, so every process computes the
//! same tree locally (the paper's "local recalculation"): a member's parent is its nearest
//! live ancestor in the start-up tree, and a member with no live ancestor hangs under the
//! root, which is the lowest live id. Removing a node thus merges its children into its
//! parent's children (paper, Section 3.4), removing the root makes the next live id the
//! root, and a (re)joining id takes its place in the start-up tree again.

use steadfast_proto::rng::splitmix64;

use crate::id::{Member, NodeId, ViewId, MAX_INCARNATION, MAX_NODE_ID};
use crate::tree::{base_children, base_depth};

const ABSENT: u32 = u32::MAX;

/// Why a view could not be built from a member list or a delta.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ViewError {
    /// The resulting view would have no member.
    #[error("a view needs at least one member")]
    Empty,
    /// Members were not strictly ascending by id.
    #[error("member list not strictly ascending at id {0}")]
    Unsorted(NodeId),
    /// An id or incarnation beyond the accepted range.
    #[error("member {0} out of range")]
    OutOfRange(Member),
    /// A removed member was not in the base view with that incarnation.
    #[error("removed member {0} is not in the base view")]
    NotPresent(Member),
    /// An added id was already present after the removals.
    #[error("added member {0} is already present")]
    AlreadyPresent(Member),
}

/// A numbered member set with its radix tree (fan-out 2^k).
#[derive(Clone, Debug)]
pub struct View {
    id: ViewId,
    fanout_log2: u8,
    /// Index = node id, value = incarnation or ABSENT: the paper's array for O(1) access.
    slots: Vec<u32>,
    len: u32,
    root: NodeId,
    max: NodeId,
    digest: u64,
}

/// Order-independent hash of one member; the view digest is their wrapping sum.
fn mix(m: Member) -> u64 {
    // One SplitMix64 step from the packed member is a strong 64-bit hash of it.
    let mut z = (m.id as u64) << 32 | m.incarnation as u64;
    splitmix64(&mut z)
}

/// Digest of a member list, as [`View::digest`] computes it.
pub fn digest_of(members: &[Member]) -> u64 {
    members
        .iter()
        .fold(0u64, |acc, m| acc.wrapping_add(mix(*m)))
}

impl View {
    /// The start-up view: ids `0..n`, all at incarnation 0, id [`ViewId::INITIAL`].
    pub fn initial(n: u32, fanout_log2: u8) -> Result<View, ViewError> {
        if n == 0 {
            return Err(ViewError::Empty);
        }
        if n - 1 > MAX_NODE_ID {
            return Err(ViewError::OutOfRange(Member::new(n - 1, 0)));
        }
        let slots = vec![0u32; n as usize];
        let digest = (0..n).fold(0u64, |acc, i| acc.wrapping_add(mix(Member::new(i, 0))));
        Ok(View {
            id: ViewId::INITIAL,
            fanout_log2,
            slots,
            len: n,
            root: 0,
            max: n - 1,
            digest,
        })
    }

    /// Builds a view from a strictly ascending member list.
    pub fn from_members(
        id: ViewId,
        fanout_log2: u8,
        members: &[Member],
    ) -> Result<View, ViewError> {
        let last = members.last().ok_or(ViewError::Empty)?;
        let mut slots = vec![ABSENT; last.id as usize + 1];
        let mut prev: Option<NodeId> = None;
        let mut digest = 0u64;
        for m in members {
            if m.id > MAX_NODE_ID || m.incarnation > MAX_INCARNATION {
                return Err(ViewError::OutOfRange(*m));
            }
            if prev.is_some_and(|p| p >= m.id) {
                return Err(ViewError::Unsorted(m.id));
            }
            prev = Some(m.id);
            slots[m.id as usize] = m.incarnation;
            digest = digest.wrapping_add(mix(*m));
        }
        Ok(View {
            id,
            fanout_log2,
            slots,
            len: members.len() as u32,
            root: members[0].id,
            max: last.id,
            digest,
        })
    }

    /// A new view: this one minus `removed` plus `added` (removals first, so an id may be
    /// replaced by a newer incarnation in one step).
    pub fn apply(
        &self,
        id: ViewId,
        removed: &[Member],
        added: &[Member],
    ) -> Result<View, ViewError> {
        let mut v = self.clone();
        v.id = id;
        for m in removed {
            if v.incarnation(m.id) != Some(m.incarnation) {
                return Err(ViewError::NotPresent(*m));
            }
            v.slots[m.id as usize] = ABSENT;
            v.len -= 1;
            v.digest = v.digest.wrapping_sub(mix(*m));
        }
        for m in added {
            if m.id > MAX_NODE_ID || m.incarnation > MAX_INCARNATION {
                return Err(ViewError::OutOfRange(*m));
            }
            if v.contains(m.id) {
                return Err(ViewError::AlreadyPresent(*m));
            }
            if m.id as usize >= v.slots.len() {
                v.slots.resize(m.id as usize + 1, ABSENT);
            }
            v.slots[m.id as usize] = m.incarnation;
            v.len += 1;
            v.digest = v.digest.wrapping_add(mix(*m));
        }
        if v.len == 0 {
            return Err(ViewError::Empty);
        }
        // Root = lowest live id, max = highest: scans are short unless the ends were removed.
        v.root = (0..v.slots.len())
            .find(|&i| v.slots[i] != ABSENT)
            .unwrap_or(0) as NodeId;
        v.max = (0..v.slots.len())
            .rev()
            .find(|&i| v.slots[i] != ABSENT)
            .unwrap_or(0) as NodeId;
        v.slots.truncate(v.max as usize + 1);
        Ok(v)
    }

    /// The view number.
    pub fn id(&self) -> ViewId {
        self.id
    }

    /// Fan-out exponent k of the tree.
    pub fn fanout_log2(&self) -> u8 {
        self.fanout_log2
    }

    /// Number of members.
    pub fn len(&self) -> u32 {
        self.len
    }

    /// Always false: a view has at least one member.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The root: the lowest member id.
    pub fn root(&self) -> NodeId {
        self.root
    }

    /// The highest member id.
    pub fn max_id(&self) -> NodeId {
        self.max
    }

    /// Order-independent hash of the member set, carried in view changes as a self-check.
    pub fn digest(&self) -> u64 {
        self.digest
    }

    /// Whether `id` is a member (any incarnation), in O(1).
    #[inline]
    pub fn contains(&self, id: NodeId) -> bool {
        self.slots.get(id as usize).is_some_and(|&s| s != ABSENT)
    }

    /// Incarnation of member `id`, in O(1).
    #[inline]
    pub fn incarnation(&self, id: NodeId) -> Option<u32> {
        self.slots
            .get(id as usize)
            .copied()
            .filter(|&s| s != ABSENT)
    }

    /// Whether this exact life of a process is a member.
    #[inline]
    pub fn contains_member(&self, m: Member) -> bool {
        self.incarnation(m.id) == Some(m.incarnation)
    }

    /// Members in ascending id order.
    pub fn members(&self) -> impl Iterator<Item = Member> + '_ {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, &s)| s != ABSENT)
            .map(|(i, &s)| Member::new(i as NodeId, s))
    }

    /// Members as a vector (ascending ids).
    pub fn member_list(&self) -> Vec<Member> {
        self.members().collect()
    }

    /// Members from `from` upwards (ascending).
    pub fn members_from(&self, from: NodeId) -> impl Iterator<Item = Member> + '_ {
        let start = (from as usize).min(self.slots.len());
        self.slots[start..]
            .iter()
            .enumerate()
            .filter(|(_, &s)| s != ABSENT)
            .map(move |(i, &s)| Member::new((start + i) as NodeId, s))
    }

    /// Parent of member `id` in this view's tree; `None` for the root or a non-member.
    pub fn parent(&self, id: NodeId) -> Option<NodeId> {
        if !self.contains(id) || id == self.root {
            return None;
        }
        let mut y = id;
        loop {
            if y == 0 {
                return Some(self.root);
            }
            y = (y - 1) >> self.fanout_log2;
            if self.contains(y) {
                return Some(y);
            }
        }
    }

    /// Children of member `id` in this view's tree, ascending. Cost: the live children plus
    /// the dead nodes skipped over, so O(2^k) without failures.
    pub fn children(&self, id: NodeId) -> Vec<NodeId> {
        let mut out = Vec::new();
        if !self.contains(id) {
            return out;
        }
        self.collect_below(id, &mut out);
        if id == self.root && id != 0 {
            // Members whose start-up ancestors are all dead hang under the root.
            let mut orphans = Vec::new();
            self.collect_below(0, &mut orphans);
            out.extend(orphans.into_iter().filter(|&c| c != id));
        }
        out.sort_unstable();
        out
    }

    /// First members below `from` on every start-up path, skipping non-members.
    fn collect_below(&self, from: NodeId, out: &mut Vec<NodeId>) {
        let mut stack = vec![from];
        while let Some(v) = stack.pop() {
            let (first, last) = base_children(v, self.fanout_log2);
            if first > self.max as u64 {
                continue;
            }
            for c in first..=last.min(self.max as u64) {
                let c = c as NodeId;
                if self.contains(c) {
                    out.push(c);
                } else {
                    stack.push(c);
                }
            }
        }
    }

    /// Upper bound on the number of levels in the subtree of member `id` (1 for a leaf),
    /// in O(H); used to scale ack timeouts so a parent never times out before its child.
    pub fn subtree_levels_bound(&self, id: NodeId) -> u32 {
        let deepest = base_depth(self.max, self.fanout_log2);
        if id == self.root {
            deepest + 1
        } else {
            deepest.saturating_sub(base_depth(id, self.fanout_log2)) + 1
        }
    }

    /// Exact height (levels) of this view's tree, by walking it: O(N).
    pub fn height(&self) -> u32 {
        let mut level = vec![self.root];
        let mut h = 0;
        while !level.is_empty() {
            h += 1;
            level = level.iter().flat_map(|&n| self.children(n)).collect();
        }
        h
    }
}

impl PartialEq for View {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id && self.len == other.len && self.members().eq(other.members())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vid(e: u64) -> ViewId {
        ViewId {
            epoch: e,
            coordinator: 0,
            coordinator_incarnation: 0,
        }
    }

    /// Checks the tree of `v` is a spanning tree whose parent and children agree.
    fn check_tree(v: &View) {
        let mut reached = 0;
        let mut stack = vec![v.root()];
        while let Some(n) = stack.pop() {
            reached += 1;
            for c in v.children(n) {
                assert!(v.contains(c));
                assert_eq!(v.parent(c), Some(n), "parent/children disagree for {c}");
                assert!(v.subtree_levels_bound(c) < v.subtree_levels_bound(n));
                stack.push(c);
            }
        }
        assert_eq!(reached, v.len(), "tree does not span the view");
        assert!(v.height() <= v.subtree_levels_bound(v.root()));
    }

    #[test]
    fn startup_tree_is_the_radix_tree() {
        let v = View::initial(21, 2).unwrap();
        assert_eq!(v.children(0), vec![1, 2, 3, 4]);
        assert_eq!(v.children(1), vec![5, 6, 7, 8]);
        assert_eq!(v.children(4), vec![17, 18, 19, 20]);
        assert_eq!(v.height(), 3);
        check_tree(&v);
    }

    #[test]
    fn failed_node_children_merge_into_parent() {
        let v = View::initial(21, 2).unwrap();
        let w = v.apply(vid(1), &[Member::new(4, 0)], &[]).unwrap();
        assert_eq!(w.children(0), vec![1, 2, 3, 17, 18, 19, 20]);
        assert_eq!(w.parent(17), Some(0));
        check_tree(&w);
    }

    #[test]
    fn root_failure_makes_next_id_root_and_adopts_orphans() {
        let v = View::initial(21, 2).unwrap();
        let w = v.apply(vid(1), &[Member::new(0, 0)], &[]).unwrap();
        assert_eq!(w.root(), 1);
        assert_eq!(w.children(1), vec![2, 3, 4, 5, 6, 7, 8]);
        check_tree(&w);
        let x = w
            .apply(vid(2), &[Member::new(1, 0), Member::new(2, 0)], &[])
            .unwrap();
        assert_eq!(x.root(), 3);
        check_tree(&x);
    }

    #[test]
    fn random_member_sets_give_spanning_trees() {
        let mut s = 0x1234_5678u64;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        for _ in 0..300 {
            let k = (next() % 3 + 1) as u8;
            let n = (next() % 200 + 1) as u32;
            let keep = next() % 100;
            let mut members = Vec::new();
            for i in 0..n {
                if next() % 100 >= keep / 2 {
                    members.push(Member::new(i, (next() % 3) as u32));
                }
            }
            if members.is_empty() {
                continue;
            }
            let v = View::from_members(vid(1), k, &members).unwrap();
            assert_eq!(v.member_list(), members);
            assert_eq!(v.digest(), digest_of(&members));
            check_tree(&v);
        }
    }

    #[test]
    fn apply_checks_and_digest_tracks() {
        let v = View::initial(8, 1).unwrap();
        assert!(matches!(
            v.apply(vid(1), &[Member::new(3, 1)], &[]),
            Err(ViewError::NotPresent(_))
        ));
        assert!(matches!(
            v.apply(vid(1), &[], &[Member::new(3, 0)]),
            Err(ViewError::AlreadyPresent(_))
        ));
        let w = v
            .apply(
                vid(1),
                &[Member::new(3, 0)],
                &[Member::new(3, 1), Member::new(40, 0)],
            )
            .unwrap();
        assert_eq!(w.incarnation(3), Some(1));
        assert_eq!(w.max_id(), 40);
        assert_eq!(w.digest(), digest_of(&w.member_list()));
        let all: Vec<Member> = v.member_list();
        assert!(matches!(v.apply(vid(1), &all, &[]), Err(ViewError::Empty)));
        check_tree(&w);
    }
}
