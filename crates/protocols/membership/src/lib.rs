//! Sans-IO membership service after "A scalable, decentralized membership service for MPI
//! runtimes" (seed 000): a radix-tree view, failure and join handling, and numbered views.
//! See `docs/reproduction/membership.md` for the protocol, its guarantees and measurements.

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
