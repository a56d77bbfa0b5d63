//! Sans-IO run-through fault tolerance for MPI communicators (ULFM: User-Level Failure
//! Mitigation): the protocol logic of MPIX_Comm_revoke, MPIX_Comm_agree / iagree,
//! MPIX_Comm_shrink / ishrink and the failure bookkeeping behind MPIX_Comm_failure_ack,
//! MPIX_Comm_failure_get_acked, MPIX_Comm_get_failed and MPI_Comm_ack_failed.
//! Design, guarantees and their proofs: `docs/ulfm.md`.
//!
//! # The pieces
//! - [`Failures`]: failed members in detection order, the acknowledged prefix, the
//!   MPI_ANY_SOURCE rule.
//! - [`Revoke`]: REVOKE flooding, at most `size − 1` messages per process.
//! - [`Agreement`]: uniform consensus on a [`Value`] (flag AND, failed-set UNION,
//!   acknowledged-set INTERSECTION, context-id MAX) that terminates and agrees whatever
//!   crashes happen, given a failure detector that reports every death to every survivor
//!   eventually and never reports a living process.
//! - [`FtComm`]: the three together for one communicator instance at one process.
//!
//! # Driving it
//! One [`FtComm`] per communicator instance and process. Feed it [`FtComm::handle`] (or
//! [`FtComm::handle_bytes`]) for every protocol message, [`FtComm::process_failed`] for every
//! member death the launcher reports, [`FtComm::handle_timeout`] when
//! [`FtComm::poll_timeout`] is due, and the application's calls ([`FtComm::revoke`],
//! [`FtComm::start_agree`], [`FtComm::start_shrink`], [`FtComm::failure_ack`]...). After
//! each input drain [`FtComm::poll_transmit`] and [`FtComm::poll_event`]. Time is a
//! [`Time`] the driver passes in; the machine never reads a clock.

pub mod agree;
pub mod comm;
pub mod failures;
pub mod rankset;
pub mod revoke;
#[cfg(any(test, feature = "sim"))]
pub mod sim;
pub mod value;
pub mod wire;

use std::time::Duration;

pub use agree::{AgreeStats, Agreement, Decided};
pub use comm::{Event, FtComm, Stats};
pub use failures::Failures;
pub use rankset::{Rank, RankSet};
pub use revoke::Revoke;
pub use value::{Ballot, Contribution, Lock, Seq, Value};
pub use wire::{Body, DecodeError, Message, KINDS, KIND_NAMES};

pub use steadfast_proto::Time;

/// Tunables (the defaults suit a reliable transport).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Most agreements a process may have started and not yet decided (non-blocking
    /// MPIX_Comm_iagree / ishrink). It also bounds the decided history kept to answer late
    /// questions (twice this many instances), which is enough by the argument in
    /// `docs/ulfm.md`.
    pub max_outstanding: u32,
    /// Re-send votes, queries and proposals of undecided agreements this often. `None`
    /// (the default) relies on a reliable transport between live processes; with `Some`
    /// agreements also survive lost messages (REVOKE still needs a reliable transport).
    pub resend_interval: Option<Duration>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_outstanding: 16,
            resend_interval: None,
        }
    }
}

/// A message to send to a rank of the communicator; [`Message::encode`] gives its bytes.
pub type Transmit = steadfast_proto::Transmit<Message>;

/// Refused inputs: misuse by the caller, or a message that cannot belong to this
/// communicator instance. Never a panic.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A rank not below the communicator size.
    #[error("rank {rank} out of range for a communicator of {size}")]
    Rank {
        /// The rank.
        rank: Rank,
        /// Communicator size.
        size: u32,
    },
    /// An invalid setting or input.
    #[error("invalid configuration or input: {0}")]
    Config(&'static str),
    /// Agreements must be started in sequence order.
    #[error("agreement {seq} started out of order (next is {next})")]
    OutOfOrder {
        /// The sequence number given.
        seq: Seq,
        /// The one expected.
        next: Seq,
    },
    /// Too many agreements started and not decided.
    #[error("{0} agreements already outstanding on this communicator")]
    TooManyOutstanding(u32),
    /// A message claiming to come from this process itself.
    #[error("message from this process to itself")]
    FromSelf,
    /// A message of another communicator instance.
    #[error("message for communicator epoch {got}, this one is {want}")]
    Epoch {
        /// Epoch in the message.
        got: u64,
        /// This communicator's epoch.
        want: u64,
    },
    /// A QUERY or PROPOSE whose ballot is not its sender.
    #[error("ballot {ballot} sent by rank {from}")]
    BallotMismatch {
        /// Sender.
        from: Rank,
        /// Ballot it carried.
        ballot: Ballot,
    },
    /// A message kind this machine does not handle.
    #[error("unexpected message {0}")]
    Unexpected(&'static str),
    /// Undecodable or inconsistent message.
    #[error(transparent)]
    Decode(#[from] DecodeError),
}
