//! Message logging for automatic rollback recovery of unmodified MPI programs (MPICH-V2,
//! MPICH-Vcausal, MPICH-V1; Bouteiller et al., sections III-B to III-D): only a failed rank rolls
//! back, re-executes, and receives again, in the logged order, the messages it had
//! received; the others go on.
//!
//! Sans-IO: the machines take messages (and the engine's events) and give messages to
//! send; they never do I/O or read a clock.
//!
//! - [`wire`]: determinants ([`wire::Event`]) and the messages between ranks and the
//!   event logger, with a checked decoder.
//! - [`logger`]: the event logger (durable through a journal the host writes).
//! - [`rank`]: a rank's log: numbering, acknowledgements (pessimistic), piggybacking
//!   (causal), and the replay of a recovering rank.
//! - [`channel`]: a channel memory server (MPICH-V1): stores every message for its
//!   receiver, in the order the receiver takes them, and gives a recovering rank its
//!   stream again.
//!
//! In the V2 and causal modes the payloads are logged by their senders (sender-based logging) in the
//! engine, which re-sends them to a recovering rank; the engine also drops the messages a
//! recovering rank sends again (by their sequence numbers). `docs/recovery.md` describes
//! the whole.

pub mod channel;
pub mod logger;
pub mod rank;
pub mod wire;

pub use channel::ChannelMemory;
pub use logger::{EventLogger, Image};
pub use rank::{Divergence, Forced, Mode, RankLog};
pub use wire::{Event, FromLogger, Peer, ToLogger};
