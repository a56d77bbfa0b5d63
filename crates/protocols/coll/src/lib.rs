//! Sans-IO collective schedules for fault-tolerant broadcast (Corrected Trees, PPoPP'19).
//!
//! * [`tree`]: k-ary, binomial, Lamé and LogP-optimal trees with interleaved and in-order
//!   numbering; parent and children come from ranks alone.
//! * [`bcast`]: the per-process broadcast state machine — tree or gossip dissemination, then
//!   opportunistic, checked or delayed correction on the ring, or acknowledgments.
//! * [`msg`]: the protocol messages and their checked wire form.
//!
//! Ranks are relative to the root (root = 0); see [`relative_rank`].

pub mod bcast;
pub mod msg;
pub mod slots;
pub mod tree;

pub use bcast::{
    AckOptions, Bcast, BcastConfig, BcastState, ConfigError, Correction, CorrectionStart,
    Dissemination, Event, Kernel, Transmit, Via,
};
pub use msg::{DecodeError, Dir, Msg};
pub use tree::{ChildCursor, Children, Numbering, Topology, TreeError, TreeKind};

/// Rank of `rank` relative to `root` in a group of `procs` processes (root becomes 0).
pub fn relative_rank(rank: u32, root: u32, procs: u32) -> u32 {
    ((u64::from(rank) + u64::from(procs) - u64::from(root)) % u64::from(procs)) as u32
}

/// Inverse of [`relative_rank`].
pub fn absolute_rank(relative: u32, root: u32, procs: u32) -> u32 {
    ((u64::from(relative) + u64::from(root)) % u64::from(procs)) as u32
}
