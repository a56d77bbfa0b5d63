//! What processes contribute to an agreement and what it decides: one monoid for every
//! fault-tolerant collective (bitwise AND for the flag, UNION for failed sets, INTERSECTION
//! for acknowledged sets, MAX for context ids), so agree and shrink share one consensus.

use crate::rankset::{Rank, RankSet};

/// Sequence number of an agreement instance on one communicator (agree and shrink share
/// the numbering; every member calls them in the same order, as MPI collectives require).
pub type Seq = u64;

/// Ballot of a proposal: the rank of the coordinator that made it. A rank only coordinates
/// when it knows every lower rank failed, so ballots of one instance grow over time.
pub type Ballot = Rank;

/// One process's input to an agreement instance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Contribution {
    /// Flag for MPIX_Comm_agree (bitwise AND); all ones for shrink.
    pub flag: i32,
    /// Context id proposal for shrink (MAX); 0 for agree.
    pub cid: u64,
    /// Failures this process knew of when it started the instance (UNION).
    pub failed: RankSet,
    /// Failures this process had acknowledged when it started (INTERSECTION); always a
    /// subset of `failed`.
    pub acked: RankSet,
}

impl Contribution {
    /// Input to MPIX_Comm_agree.
    pub fn agree(flag: i32, failed: RankSet, acked: RankSet) -> Self {
        Contribution {
            flag,
            cid: 0,
            failed,
            acked,
        }
    }

    /// Input to MPIX_Comm_shrink: the context id this process proposes for the new
    /// communicator (its lowest free one) and its known failures.
    pub fn shrink(cid: u64, failed: RankSet, acked: RankSet) -> Self {
        Contribution {
            flag: -1,
            cid,
            failed,
            acked,
        }
    }

    /// Whether this process knew of a failure it had not acknowledged.
    pub fn has_unacked(&self) -> bool {
        !self.failed.is_subset(&self.acked)
    }
}

/// The decided value of an agreement instance, identical at every process that decides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Value {
    /// Bitwise AND of the contributors' flags.
    pub flag: i32,
    /// Whether MPIX_Comm_agree returns MPIX_ERR_PROC_FAILED (the rule is in
    /// [`Value::combine`]); uniform because it is part of the decided value.
    pub proc_failed: bool,
    /// Largest context id proposed by a contributor.
    pub cid: u64,
    /// Union of the contributors' failed sets and the coordinator's: every rank in it is
    /// dead. Shrink excludes exactly these ranks.
    pub failed: RankSet,
    /// Members whose contribution is not in the value (a subset of `failed`).
    pub missing: RankSet,
}

impl Value {
    /// Folds the contributions of `contributors` (ascending ranks with their inputs) into a
    /// decision. `coordinator_failed` are the failures the coordinator knows; every member
    /// of the communicator (`0..size`) that did not contribute must be in it.
    ///
    /// `proc_failed` is true when (a) some member did not contribute and its failure was
    /// not acknowledged by every contributor before it started, or (b) some contributor
    /// knew, when it started, of a failure it had not acknowledged.
    pub fn combine<'a, I>(size: u32, contributors: I, coordinator_failed: &RankSet) -> Value
    where
        I: IntoIterator<Item = (Rank, &'a Contribution)>,
    {
        let mut flag = -1i32;
        let mut cid = 0u64;
        let mut failed = coordinator_failed.clone();
        let mut acked_by_all: Option<RankSet> = None;
        let mut someone_unacked = false;
        let mut present = RankSet::new();
        for (r, c) in contributors {
            present.insert(r);
            flag &= c.flag;
            cid = cid.max(c.cid);
            failed = failed.union(&c.failed);
            acked_by_all = Some(match acked_by_all {
                None => c.acked.clone(),
                Some(a) => a.intersection(&c.acked),
            });
            someone_unacked |= c.has_unacked();
        }
        let missing = RankSet::from_sorted_unchecked(present.complement(size));
        let acked_by_all = acked_by_all.unwrap_or_default();
        let proc_failed = someone_unacked || !missing.is_subset(&acked_by_all);
        Value {
            flag,
            proc_failed,
            cid,
            failed,
            missing,
        }
    }

    /// Members of the communicator built by shrink: the ranks not in `failed`, ascending
    /// (their order is the new rank order).
    pub fn survivors(&self, size: u32) -> Vec<Rank> {
        self.failed.complement(size)
    }
}

/// What a process has done about one instance, reported in its votes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lock {
    /// Accepted no proposal yet.
    Free,
    /// Accepted the proposal of coordinator `ballot` (and promised to ignore lower ballots).
    Accepted {
        /// The coordinator that proposed.
        ballot: Ballot,
        /// What it proposed.
        value: Value,
    },
    /// Decided.
    Decided(Value),
}

impl Lock {
    /// Order of knowledge: decided > accepted with a higher ballot > free. A process's lock
    /// only grows, so a coordinator keeps the largest it has heard (messages may reorder).
    pub fn rank(&self) -> (u8, Ballot) {
        match self {
            Lock::Free => (0, 0),
            Lock::Accepted { ballot, .. } => (1, *ballot),
            Lock::Decided(_) => (2, 0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(r: &[Rank]) -> RankSet {
        RankSet::from_ranks(r.iter().copied())
    }

    #[test]
    fn combine_is_and_union_max() {
        let a = Contribution::agree(0b110, set(&[3]), set(&[3]));
        let b = Contribution::shrink(7, set(&[2, 3]), set(&[2, 3]));
        let c = Contribution::agree(0b011, set(&[]), set(&[]));
        let v = Value::combine(5, [(0, &a), (1, &b), (4, &c)], &set(&[2, 3]));
        assert_eq!(v.flag, 0b010);
        assert_eq!(v.cid, 7);
        assert_eq!(v.failed, set(&[2, 3]));
        assert_eq!(v.missing, set(&[2, 3]));
        // Rank 4 did not acknowledge 2 and 3, which did not contribute.
        assert!(v.proc_failed);
        assert_eq!(v.survivors(5), vec![0, 1, 4]);
    }

    #[test]
    fn acknowledged_by_all_is_no_error() {
        let a = Contribution::agree(1, set(&[1]), set(&[1]));
        let b = Contribution::agree(1, set(&[1]), set(&[1]));
        let v = Value::combine(3, [(0, &a), (2, &b)], &set(&[1]));
        assert!(!v.proc_failed);
        // A contributor that knew of an unacknowledged failure makes it an error for all,
        // even when the failed process had contributed.
        let c = Contribution::agree(1, set(&[2]), set(&[]));
        let d = Contribution::agree(1, set(&[]), set(&[]));
        let v = Value::combine(3, [(0, &c), (1, &d), (2, &d)], &set(&[]));
        assert!(v.missing.is_empty());
        assert!(v.proc_failed);
    }
}
