//! Failure bookkeeping of one communicator: which members are known failed (in the order
//! this process learned of them) and how many of those the application acknowledged.
//!
//! Acknowledgement is always a prefix of the failure order: MPIX_Comm_failure_ack
//! acknowledges every failure known at the time of the call, MPI_Comm_ack_failed
//! (`num_to_ack`) the first `num_to_ack` of the group MPI_Comm_get_failed returns.

use crate::rankset::{Rank, RankSet};

/// Known and acknowledged failures of one communicator.
#[derive(Clone, Debug)]
pub struct Failures {
    size: u32,
    /// Failed ranks in the order this process learned of them (MPI_Comm_get_failed).
    order: Vec<Rank>,
    /// Same ranks as a set, for membership tests and the protocol's contributions.
    set: RankSet,
    /// The first `acked` entries of `order` are acknowledged.
    acked: usize,
}

impl Failures {
    /// No failure known in a communicator of `size` members.
    pub fn new(size: u32) -> Self {
        Failures {
            size,
            order: Vec::new(),
            set: RankSet::new(),
            acked: 0,
        }
    }

    /// Records that `rank` failed; returns whether it was new. Ranks out of range are
    /// ignored (the caller validated them).
    pub fn record(&mut self, rank: Rank) -> bool {
        if rank >= self.size || !self.set.insert(rank) {
            return false;
        }
        self.order.push(rank);
        true
    }

    /// Whether `rank` is known failed.
    pub fn is_failed(&self, rank: Rank) -> bool {
        self.set.contains(rank)
    }

    /// MPI_Comm_get_failed: failed ranks in detection order.
    pub fn failed(&self) -> &[Rank] {
        &self.order
    }

    /// The known failed ranks as a set.
    pub fn failed_set(&self) -> &RankSet {
        &self.set
    }

    /// MPIX_Comm_failure_get_acked: acknowledged ranks, in detection order.
    pub fn acked(&self) -> &[Rank] {
        &self.order[..self.acked]
    }

    /// The acknowledged ranks as a set.
    pub fn acked_set(&self) -> RankSet {
        RankSet::from_ranks(self.acked().iter().copied())
    }

    /// Number of acknowledged failures.
    pub fn num_acked(&self) -> usize {
        self.acked
    }

    /// MPIX_Comm_failure_ack: acknowledges every failure known now; returns their number.
    pub fn ack_all(&mut self) -> usize {
        self.acked = self.order.len();
        self.acked
    }

    /// MPI_Comm_ack_failed: acknowledges the first `num_to_ack` failures of
    /// [`Failures::failed`] (never un-acknowledges); returns `num_acked`, the number of
    /// acknowledged failures after the call.
    pub fn ack_first(&mut self, num_to_ack: usize) -> usize {
        self.acked = self.acked.max(num_to_ack.min(self.order.len()));
        self.acked
    }

    /// Whether some known failure is not acknowledged: then a receive from
    /// MPI_ANY_SOURCE must complete with MPIX_ERR_PROC_FAILED_PENDING (and a new one must
    /// not be posted silently), and the next agree returns MPIX_ERR_PROC_FAILED.
    pub fn has_unacked(&self) -> bool {
        self.acked < self.order.len()
    }

    /// Whether a receive from MPI_ANY_SOURCE must fail with MPIX_ERR_PROC_FAILED_PENDING.
    pub fn any_source_must_fail(&self) -> bool {
        self.has_unacked()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_and_acknowledgement() {
        let mut f = Failures::new(8);
        assert!(!f.any_source_must_fail());
        assert!(f.record(5));
        assert!(f.record(2));
        assert!(!f.record(5));
        assert!(!f.record(9));
        assert_eq!(f.failed(), &[5, 2]);
        assert!(f.any_source_must_fail());
        assert_eq!(f.ack_first(1), 1);
        assert_eq!(f.acked(), &[5]);
        assert!(f.any_source_must_fail());
        // Acknowledgements never shrink.
        assert_eq!(f.ack_first(0), 1);
        assert_eq!(f.ack_first(100), 2);
        assert!(!f.any_source_must_fail());
        assert!(f.record(7));
        assert!(f.has_unacked());
        assert_eq!(f.acked_set().as_slice(), &[2, 5]);
        assert_eq!(f.ack_all(), 3);
        assert_eq!(f.acked(), &[5, 2, 7]);
        assert_eq!(f.failed_set().as_slice(), &[2, 5, 7]);
    }
}
