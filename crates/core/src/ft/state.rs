//! Fault-tolerance state of the engine: which processes failed, in what order, and per
//! communicator which failures were acknowledged and whether it was revoked.
//!
//! Whoever detects a failure (the launcher's exit notice, a broken connection, the membership
//! service) calls [`crate::Engine::peer_failed`]; everything else follows from this state.

use rustc_hash::FxHashMap as HashMap;

/// How long a collective abort notice stays valid.
pub const ABORT_TTL: std::time::Duration = std::time::Duration::from_secs(10);

/// Per-communicator fault-tolerance state, keyed by the point-to-point context id.
#[derive(Debug, Default, Clone)]
pub struct CommFt {
    /// MPIX_Comm_revoke reached this process.
    pub revoked: bool,
    /// Failures acknowledged on this communicator: a prefix of [`FtState::order`].
    pub acked: usize,
    /// World ranks whose failure a call on this communicator already reported to the
    /// application (MPIX_ERR_PROC_FAILED); run-through collectives then go on without them.
    pub reported: Vec<u32>,
}

/// Job-wide failure knowledge of this process.
#[derive(Debug, Default)]
pub struct FtState {
    /// Failed processes are reported instead of ending the job (`--ft run-through`).
    pub run_through: bool,
    /// `dead[w]`: world rank `w` is known to have failed.
    pub dead: Vec<bool>,
    /// World ranks in the order their failures became known here.
    pub order: Vec<u32>,
    /// Per communicator (by point-to-point context id).
    pub comm: HashMap<u32, CommFt>,
    /// Collectives another member gave up on: (collective context, tag, when), most recent
    /// last. Tags repeat after 65 536 collectives on a communicator, so entries go when the
    /// collective ends here and expire after [`ABORT_TTL`].
    pub aborted: Vec<(u32, i32, std::time::Instant)>,
}

impl FtState {
    /// State for a job of `size` ranks.
    pub fn new(size: u32, run_through: bool) -> FtState {
        FtState { run_through, dead: vec![false; size as usize], order: Vec::new(), comm: HashMap::default(), aborted: Vec::new() }
    }
    /// Whether world rank `w` failed.
    pub fn is_dead(&self, w: u32) -> bool {
        self.dead.get(w as usize).copied().unwrap_or(false)
    }
    /// Whether the communicator with context `ctx` was revoked (cheap when nothing was).
    #[inline]
    pub fn is_revoked(&self, ctx: u32) -> bool {
        !self.comm.is_empty() && self.comm.get(&ctx).is_some_and(|c| c.revoked)
    }
    /// The communicator state for context `ctx`.
    pub fn comm(&self, ctx: u32) -> CommFt {
        self.comm.get(&ctx).cloned().unwrap_or_default()
    }
}
