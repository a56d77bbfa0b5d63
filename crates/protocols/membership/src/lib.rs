//! Sans-IO membership service after "A scalable, decentralized membership service for MPI
//! runtimes" (seed 000): every process keeps the same numbered view of who is alive, and
//! after failures or joins all survivors install the same new view with O(log N) message
//! depth. Details, deviations from the paper and measurements: `docs/reproduction/membership.md`.
//!
//! # The protocol in short
//! - The view is an array indexed by id (O(1) access) plus a radix tree with 2^k children
//!   per node computed from the ids alone ([`tree`], [`View`]); the root is the lowest live
//!   id. The start-up view needs no message.
//! - A failure detector input ([`Membership::suspect`]) makes the detector send NODE_FAILURE
//!   to the root (ROOT_FAILURE to the next live id when the root itself is dead). The
//!   coordinator (lowest member not known dead) answers FAILURE_DET_ACK, computes the next
//!   view and sends it down the tree as FAILED_NODE / ROOT_DEAD / ROOT_AND_NODE_FAILURE; each
//!   node recalculates its tree locally, forwards, and acknowledges with FAILURE_ACK once its
//!   subtree has; the root's receipt of all acks ends stabilization
//!   ([`Event::StabilizationComplete`]). A missing FAILURE_DET_ACK or FAILURE_ACK is a new
//!   failure. Failures found during stabilization start a newer view at once.
//! - Joins: NEW_NODE / NODE_ALIVE to the root (found by a linear scan of ids, or a redirect),
//!   JOIN_DET_ACK, then the view including the joiner travels down the tree the same way.
//!
//! # Safety properties (checked after every step of the simulation tests, module `sim`)
//! - **Self inclusion**: a process only installs views that contain its current life.
//! - **Agreement**: one [`ViewId`] always names one member set, everywhere, for ever. View ids
//!   carry the coordinator's life and a per-coordinator increasing epoch; receivers rebuild
//!   the member set from a delta and check it against the coordinator's length and digest.
//! - **No duplication**: a process installs a view at most once; within one life the views
//!   it installs strictly increase, so a stale message can never roll it back.
//! - **Same-view delivery**: protocol messages act only in the view they name (an ack counts
//!   for that view only; an older view change is answered with STALE, never applied). The
//!   layer above stamps its messages with [`Membership::view_id`] and delivers only when
//!   [`Membership::accepts`] the stamp; by agreement both ends then see the same members.
//! - **No spurious exclusion**: a coordinator only removes lives that crashed, were
//!   suspected by a failure detector, or were replaced by a newer incarnation.
//!
//! Liveness (checked at the end of every simulated run): within a bound after the last
//! fault, every live process is a member of the same view, that view is exactly the set of
//! live processes, and its root announced the end of stabilization.
//!
//! # Driving it
//! Create one [`Membership`] per process ([`Membership::new`] for the start-up group,
//! [`Membership::new_outside`] + [`Membership::join`] for a new or recovered process). Feed it
//! [`Membership::handle`] (or [`Membership::handle_bytes`]), [`Membership::handle_timeout`]
//! when [`Membership::poll_timeout`] is due, and [`Membership::suspect`] from the failure
//! detector; after each input drain [`Membership::poll_transmit`] and
//! [`Membership::poll_event`]. Time is a [`Time`] the driver passes in.

pub mod config;
pub mod id;
pub mod machine;
pub mod model;
#[cfg(any(test, feature = "sim"))]
pub mod sim;
pub mod tree;
pub mod view;
pub mod wire;

pub use config::{Config, ConfigError};
pub use id::{Member, NodeId, ViewId, MAX_INCARNATION, MAX_NODE_ID};
pub use machine::{Error, Event, Membership, Status, Time, Transmit};
pub use view::{View, ViewError};
pub use wire::{Body, Change, ChangeKind, DecodeError, JoinKind, Message};
