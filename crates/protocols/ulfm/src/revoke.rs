//! MPIX_Comm_revoke: reliable flooding of one REVOKE per communicator instance.
//!
//! The first time a process revokes (locally or on receiving REVOKE) it marks the
//! communicator revoked and sends REVOKE to every other member it does not know failed,
//! except the one it heard from. Later REVOKEs are ignored, so each process sends at most
//! `size − 1` messages and the flood ends. If any process that stays alive marks the
//! communicator revoked, every survivor does: it sent to all of them. If the initiator
//! dies in the middle of its sends, every survivor that got one forwards it to all.

use crate::rankset::Rank;

/// Revocation state of one communicator at one process.
#[derive(Clone, Debug, Default)]
pub struct Revoke {
    revoked: bool,
    /// Whether this process initiated (MPIX_Comm_revoke) rather than heard of it.
    initiated: bool,
    sent: u64,
}

impl Revoke {
    /// Not revoked.
    pub fn new() -> Self {
        Revoke::default()
    }

    /// Whether the communicator is revoked here.
    pub fn is_revoked(&self) -> bool {
        self.revoked
    }

    /// Whether this process called MPIX_Comm_revoke first.
    pub fn initiated(&self) -> bool {
        self.initiated
    }

    /// REVOKE messages this process sent.
    pub fn sent(&self) -> u64 {
        self.sent
    }

    /// Local MPIX_Comm_revoke. Returns the ranks to send REVOKE to (empty when already
    /// revoked); `alive(r)` says whether `r` is not known failed.
    pub fn revoke(&mut self, me: Rank, size: u32, alive: impl Fn(Rank) -> bool) -> Vec<Rank> {
        if self.revoked {
            return Vec::new();
        }
        self.initiated = true;
        self.mark(me, None, size, alive)
    }

    /// REVOKE received from `from`. Returns the ranks to forward it to (empty unless this
    /// is the first time).
    pub fn on_revoke(
        &mut self,
        me: Rank,
        from: Rank,
        size: u32,
        alive: impl Fn(Rank) -> bool,
    ) -> Vec<Rank> {
        if self.revoked {
            return Vec::new();
        }
        self.mark(me, Some(from), size, alive)
    }

    fn mark(
        &mut self,
        me: Rank,
        from: Option<Rank>,
        size: u32,
        alive: impl Fn(Rank) -> bool,
    ) -> Vec<Rank> {
        self.revoked = true;
        let to: Vec<Rank> = (0..size)
            .filter(|r| *r != me && Some(*r) != from && alive(*r))
            .collect();
        self.sent += to.len() as u64;
        to
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floods_once() {
        let mut r = Revoke::new();
        assert!(!r.is_revoked());
        let to = r.on_revoke(2, 0, 5, |x| x != 4);
        assert_eq!(to, vec![1, 3]);
        assert!(r.is_revoked() && !r.initiated());
        assert!(r.on_revoke(2, 1, 5, |_| true).is_empty());
        assert!(r.revoke(2, 5, |_| true).is_empty());
        assert_eq!(r.sent(), 2);
        let mut s = Revoke::new();
        assert_eq!(s.revoke(0, 3, |_| true), vec![1, 2]);
        assert!(s.initiated());
    }
}
