//! Sans-IO channel broadcast with delayed synchronization, after LA-MPI's broadcast over the
//! Quadrics hardware broadcast (Yu, Sur, Panda, Aulwes, Graham): the group shares a global
//! buffer split into `N` **channels**; broadcast number `s` binds to channel `s mod N`, its
//! root writes header + CRC32C + data **once** with the one-to-many primitive (a
//! shared-memory segment on one host, a multicast datagram across hosts), and every receiver
//! reads it from its copy of the channel. A channel may be written again only once every
//! receiver released it, and that is learned by a **two-phase tree synchronization** (up:
//! ACK/NACK combined towards a manager, down: its result) which runs **only when no channel
//! is free**: its cost is shared by `N` broadcasts.
//!
//! # Reliability
//! - Every frame carries a CRC32C ([`frame`]); a damaged frame is dropped as if lost.
//! - A synchronization attempt whose combined status is a NACK (some rank still misses a
//!   broadcast of the window) makes **every root retransmit all of its broadcasts of the
//!   window**; receivers ignore repeats by their channel state (sequence numbers); the next
//!   attempt follows after a backoff that doubles.
//! - A receiver whose broadcast has not arrived `repair_timeout` after its channel was bound
//!   asks the root for it ([`Message::Repair`]), with exponential backoff: broadcasts are
//!   repaired without waiting for the next synchronization (a blocking `MPI_Bcast` receiver
//!   could not reach it).
//! - After `max_repairs` unanswered requests, or when the driver reports a failure
//!   ([`Machine::primitive_failed`]), the rank **fails over**: it abandons the primitive,
//!   rebinds every outstanding broadcast it is root of to the point-to-point binomial tree
//!   ([`Message::Data`] passed down the tree), tells the roots it asks for repairs and the
//!   manager (the `failed` bit of the synchronization), and the synchronization's result
//!   fails every rank over. Frames from both paths mix safely: a receiver keeps the first
//!   intact copy of each broadcast.
//!
//! # What the driver provides
//! - The primitive: [`Transmit::Write`] reaches every other rank's channel (it may lose,
//!   damage or duplicate frames, and reorder them); each frame read is handed to
//!   [`Machine::frame_arrived`].
//! - A reliable, ordered point-to-point path for [`Transmit::Send`] (the engine's), whose
//!   messages it hands to [`Machine::handle`].
//! - A clock: [`Machine::poll_timeout`] / [`Machine::handle_timeout`]. The machine never reads
//!   one and never does I/O.
//! - Calls in MPI's collective order: every rank calls [`Machine::bcast`] for the same
//!   broadcasts in the same order with the same root.
//!
//! # Guarantees (checked by the seeded simulation in `src/sim` after every step)
//! Every receiver delivers every broadcast exactly once, intact, in order; no root writes
//! a channel before every receiver completed the broadcast it held before.

pub mod datagram;
pub mod frame;
pub mod machine;
#[cfg(any(test, feature = "sim"))]
pub mod sim;
pub mod wire;

use std::time::Duration;

pub use steadfast_proto::{Rank, Time};

pub use machine::{tree_children, tree_parent, CallError, Event, Machine, Stats, Transmit};
pub use wire::{DecodeError, Message};

/// A broadcast's sequence number on its communicator, from 0.
pub type Seq = u64;

/// Tunables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Channels of the global buffer: broadcasts between two synchronizations.
    pub channels: u32,
    /// Broadcasts one synchronization releases; 0 (or more than `channels`) means
    /// `channels`, the paper's delayed synchronization, which starts when no channel is free
    /// and so makes every root wait for it. A smaller step starts each synchronization
    /// while `channels - sync_every` channels are still free: a root waits only when the
    /// synchronization takes longer than those broadcasts (early synchronization, ours).
    pub sync_every: u32,
    /// Write a CRC32C with every frame (reliability on). Receivers check it whenever a
    /// frame carries one.
    pub crc: bool,
    /// A receiver asks the root for a broadcast this long after its channel was bound, then
    /// after twice, four times ... as long.
    pub repair_timeout: Duration,
    /// After this many unanswered repair requests the rank abandons the primitive.
    pub max_repairs: u32,
    /// A rank entering a synchronization with its window incomplete waits this long (then
    /// twice as long for each failed attempt, up to `max_backoff`) before it reports a NACK.
    pub sync_backoff: Duration,
    pub max_backoff: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            channels: 16,
            sync_every: 0,
            crc: true,
            repair_timeout: Duration::from_millis(20),
            max_repairs: 6,
            sync_backoff: Duration::from_millis(5),
            max_backoff: Duration::from_millis(200),
        }
    }
}
