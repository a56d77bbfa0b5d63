//! Communicators: a context id pair and a group of world ranks.

use std::sync::Arc;

use crate::slab::Handle;
use crate::topo::Topology;

/// A communicator as the engine sees it.
#[derive(Debug, Clone, Default)]
pub struct Comm {
    /// Context id for point-to-point traffic; `ctx + 1` carries collective traffic.
    pub ctx: u32,
    /// This process's rank in the (local) group.
    pub rank: i32,
    /// World ranks of the local group, indexed by communicator rank.
    pub group: Arc<Vec<u32>>,
    /// World ranks of the remote group, for intercommunicators.
    pub remote: Option<Arc<Vec<u32>>>,
    /// Name given with Comm_set_name.
    pub name: String,
    /// Error handler handle value (owned by the C layer).
    pub errhandler: u64,
    /// Process topology attached by Cart/Graph/Dist_graph creation.
    pub topo: Option<Arc<Topology>>,
    /// Intercommunicators: the hidden intracommunicator over the local group (context
    /// `ctx + 2`), for agreement and local phases of intercommunicator collectives.
    pub local: Option<Handle>,
}

impl Comm {
    /// Number of ranks in the local group.
    pub fn size(&self) -> i32 {
        self.group.len() as i32
    }
    /// Number of ranks a point-to-point rank argument refers to (remote group if inter).
    pub fn peer_size(&self) -> i32 {
        self.remote.as_ref().map_or(self.group.len(), |r| r.len()) as i32
    }
    /// World rank of point-to-point peer `r`.
    pub fn peer_world(&self, r: i32) -> Option<u32> {
        let g = self.remote.as_ref().unwrap_or(&self.group);
        g.get(usize::try_from(r).ok()?).copied()
    }
    /// Context id of collective traffic.
    pub fn coll_ctx(&self) -> u32 {
        self.ctx + 1
    }
}
