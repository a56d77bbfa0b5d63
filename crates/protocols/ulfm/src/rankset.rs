//! Sets of communicator ranks: sorted, duplicate-free vectors. The sets the protocol carries
//! (failed, acknowledged, missing contributors) are small, so a sorted list is both the
//! cheapest in memory and the natural wire form.

use std::fmt;

/// A rank within one communicator (`0..size`).
pub use steadfast_proto::Rank;

/// A set of ranks kept in ascending order without duplicates.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct RankSet(Vec<Rank>);

impl RankSet {
    /// The empty set.
    pub const fn new() -> Self {
        RankSet(Vec::new())
    }

    /// Builds a set from any ranks (sorted and deduplicated here).
    pub fn from_ranks<I: IntoIterator<Item = Rank>>(ranks: I) -> Self {
        let mut v: Vec<Rank> = ranks.into_iter().collect();
        v.sort_unstable();
        v.dedup();
        RankSet(v)
    }

    /// Builds a set from a vector already strictly ascending (the decoder checks that).
    pub(crate) fn from_sorted_unchecked(v: Vec<Rank>) -> Self {
        debug_assert!(v.windows(2).all(|w| w[0] < w[1]));
        RankSet(v)
    }

    /// Number of ranks.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when the set has no rank.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Membership test (binary search).
    pub fn contains(&self, r: Rank) -> bool {
        self.0.binary_search(&r).is_ok()
    }

    /// Adds `r`; returns whether it was new.
    pub fn insert(&mut self, r: Rank) -> bool {
        match self.0.binary_search(&r) {
            Ok(_) => false,
            Err(i) => {
                self.0.insert(i, r);
                true
            }
        }
    }

    /// The ranks in ascending order.
    pub fn as_slice(&self) -> &[Rank] {
        &self.0
    }

    /// Iterates in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = Rank> + '_ {
        self.0.iter().copied()
    }

    /// Largest rank, if any.
    pub fn max(&self) -> Option<Rank> {
        self.0.last().copied()
    }

    /// `self ∪ other`.
    pub fn union(&self, other: &RankSet) -> RankSet {
        let (a, b) = (&self.0, &other.0);
        let mut out = Vec::with_capacity(a.len() + b.len());
        let (mut i, mut j) = (0, 0);
        while i < a.len() && j < b.len() {
            match a[i].cmp(&b[j]) {
                std::cmp::Ordering::Less => {
                    out.push(a[i]);
                    i += 1;
                }
                std::cmp::Ordering::Greater => {
                    out.push(b[j]);
                    j += 1;
                }
                std::cmp::Ordering::Equal => {
                    out.push(a[i]);
                    i += 1;
                    j += 1;
                }
            }
        }
        out.extend_from_slice(&a[i..]);
        out.extend_from_slice(&b[j..]);
        RankSet(out)
    }

    /// `self ∩ other`.
    pub fn intersection(&self, other: &RankSet) -> RankSet {
        RankSet(
            self.0
                .iter()
                .copied()
                .filter(|r| other.contains(*r))
                .collect(),
        )
    }

    /// `self \ other`.
    pub fn difference(&self, other: &RankSet) -> RankSet {
        RankSet(
            self.0
                .iter()
                .copied()
                .filter(|r| !other.contains(*r))
                .collect(),
        )
    }

    /// `self ⊆ other`.
    pub fn is_subset(&self, other: &RankSet) -> bool {
        self.0.iter().all(|r| other.contains(*r))
    }

    /// `{0..size} \ self`, ascending.
    pub fn complement(&self, size: u32) -> Vec<Rank> {
        (0..size).filter(|r| !self.contains(*r)).collect()
    }
}

impl fmt::Debug for RankSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.0.iter()).finish()
    }
}

impl FromIterator<Rank> for RankSet {
    fn from_iter<I: IntoIterator<Item = Rank>>(iter: I) -> Self {
        RankSet::from_ranks(iter)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_algebra() {
        let a = RankSet::from_ranks([5, 1, 3, 3]);
        let b = RankSet::from_ranks([3, 4]);
        assert_eq!(a.as_slice(), &[1, 3, 5]);
        assert_eq!(a.union(&b).as_slice(), &[1, 3, 4, 5]);
        assert_eq!(a.intersection(&b).as_slice(), &[3]);
        assert_eq!(a.difference(&b).as_slice(), &[1, 5]);
        assert!(RankSet::from_ranks([3]).is_subset(&a));
        assert!(!b.is_subset(&a));
        assert_eq!(a.complement(7), vec![0, 2, 4, 6]);
        let mut c = RankSet::new();
        assert!(c.insert(2));
        assert!(!c.insert(2));
        assert!(c.insert(0));
        assert_eq!(c.as_slice(), &[0, 2]);
    }
}
