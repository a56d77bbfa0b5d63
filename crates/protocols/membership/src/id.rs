//! Identities: processes, their incarnations, and numbered views.

use std::fmt;

/// Identifier of a process in the membership service (an MPI rank or a launcher-assigned id).
pub type NodeId = steadfast_proto::Rank;

/// Largest node id the wire format and the view array accept (bounds the O(1) access array).
pub const MAX_NODE_ID: NodeId = (1 << 24) - 1;

/// Largest incarnation number; `u32::MAX` is reserved as the "absent" marker of the view array.
pub const MAX_INCARNATION: u32 = u32::MAX - 1;

/// One life of a process: its id plus how many times it has (re)joined under that id.
///
/// A recovered rank keeps its id (NODE_ALIVE) but comes back with a higher incarnation, so
/// a suspicion of the old life can never exclude the new one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Member {
    /// The process id (rank).
    pub id: NodeId,
    /// The life of that process; 0 at start-up, higher after each re-join.
    pub incarnation: u32,
}

impl Member {
    /// Builds a member from id and incarnation.
    pub const fn new(id: NodeId, incarnation: u32) -> Self {
        Member { id, incarnation }
    }
}

impl fmt::Display for Member {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#{}", self.id, self.incarnation)
    }
}

/// Number of a view: views are totally ordered by `(epoch, coordinator, coordinator_incarnation)`.
///
/// The paper keeps no view ids; we add them so that stale messages are recognized. A
/// coordinator (one life of one process) creates views with strictly increasing epochs, and
/// the id names that coordinator, so two different member sets can never share an id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ViewId {
    /// Increases with every view change; a new coordinator starts above every epoch it saw.
    pub epoch: u64,
    /// Process that computed the view.
    pub coordinator: NodeId,
    /// Incarnation of that process, so a restarted coordinator never reuses an id.
    pub coordinator_incarnation: u32,
}

impl ViewId {
    /// The start-up view every process knows without messages.
    pub const INITIAL: ViewId = ViewId {
        epoch: 0,
        coordinator: 0,
        coordinator_incarnation: 0,
    };
}

impl fmt::Display for ViewId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "v{}.{}#{}",
            self.epoch, self.coordinator, self.coordinator_incarnation
        )
    }
}
