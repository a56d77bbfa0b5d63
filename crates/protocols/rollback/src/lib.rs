//! Sans-IO coordinated checkpointing with the Chandy-Lamport algorithm, as MPICH-V/CL does it:
//! a **checkpoint scheduler** starts numbered waves, every **rank** takes its local
//! checkpoint, flushes its outgoing channels with markers and records the messages in transit
//! on its incoming channels, the scheduler **commits** a global checkpoint once every rank
//! reported, and after a failure every rank **rolls back** to the last committed checkpoint
//! and is given the recorded in-transit messages to re-deliver. Design and the engine's side
//! of the contract: `docs/rollback.md`.
//!
//! # The pieces
//! - [`Scheduler`]: one per job (in the launcher). Starts waves periodically or on demand,
//!   collects the ranks' reports, commits or aborts waves (a rank that does not report before
//!   the wave timeout aborts the wave), and drives the rollback after a failure.
//! - [`RankMachine`]: one per rank. Takes its cut when the scheduler asks or on the first
//!   marker of a wave, sends markers, records in-transit messages, reports, and restores.
//! - [`wire`]: the protocol's messages ([`Message`]) and the per-rank channel record
//!   ([`ChannelRecord`]) stored next to each process image, with checked decoders that never
//!   panic.
//!
//! # Messages and states
//! | message | from → to | meaning |
//! |---|---|---|
//! | `CHECKPOINT(inc, n)` | scheduler → rank | start wave `n` (take your cut now if not yet) |
//! | `MARKER(inc, n, upto)` | rank → rank | my cut of wave `n`; I had sent you messages `1..=upto` before it |
//! | `DONE(inc, n, k)` | rank → scheduler | image of wave `n` stored, `k` in-transit messages recorded and stored |
//! | `FAILED(inc, n)` | rank → scheduler | could not store wave `n` |
//! | `COMMIT(inc, n)` | scheduler → rank | global checkpoint `n` is committed; delete older images |
//! | `ABORT(inc, n)` | scheduler → rank | wave `n` will never commit; delete its image |
//! | `ROLLBACK(inc, n)` | scheduler → rank | become incarnation `inc`, restore checkpoint `n` |
//! | `ROLLED_BACK(inc, n)` | rank → scheduler | restored |
//! | `RESUME(inc)` | scheduler → rank | every rank is restored: let the application go on |
//!
//! `inc` is the job's incarnation: the number of rollbacks so far. Every rank has the same
//! one; a message of another incarnation is dropped, so nothing from before a rollback
//! (application message, marker, report) mixes with what comes after it.
//!
//! # States
//! - Scheduler: `Running(idle)` → (interval or [`Scheduler::checkpoint_now`]) →
//!   `Running(wave n)` → every `DONE(n)`: commit / `FAILED(n)` or the wave timeout: abort →
//!   `Running(idle)`. A reported failure ([`Scheduler::rank_failed`]) in any state →
//!   `Restoring(last committed, inc + 1)` → every `ROLLED_BACK` → `Running(idle)`; another
//!   failure or the restore timeout while restoring starts the rollback over.
//! - Rank: `Live` (a wave's cut may be in progress: channels open until their markers, then
//!   image and record stored, then `DONE`, then `COMMIT`/`ABORT`) → `ROLLBACK` →
//!   `Restoring` → [`RankMachine::restored`] → `Live(paused)` → `RESUME` → `Live(running)`.
//!   A relaunched rank starts in `Waiting` and drops everything until `ROLLBACK`.
//!
//! # What the engine provides
//! - FIFO channels between ranks on which markers travel in line with application packets,
//!   and a reliable FIFO link between each rank and the scheduler (the launcher link).
//! - Every application packet it sends ([`RankMachine::sent`], from the door's `sent` hook)
//!   and every one the door admits ([`RankMachine::arrived`], whose [`Verdict`] it obeys):
//!   `Eager`/`Rts` with their door [`Ident`], rendezvous `Cts`/`Data`/`Fin` with
//!   [`UNNUMBERED`] so a rendezvous cut in the middle is replayed too.
//! - The process image on [`rank::Event::TakeImage`], storage of images and
//!   [`ChannelRecord`]s (reported with [`RankMachine::image_stored`] /
//!   [`RankMachine::record_stored`]), deletion on `Committed`/`Discard`/`Restore`, and the
//!   restore itself, after which it re-delivers [`Replay::redeliver`] before anything new.
//!
//! # Driving it
//! The machines never read a clock and never do I/O. After every input drain
//! `poll_transmit` and `poll_event`, **before** the next input: the cut of a wave is the
//! moment the [`rank::Event::TakeImage`] is produced, and the engine must take the process
//! image (fork) and send the queued markers before it delivers or sends another application
//! message. The engine feeds the rank machine every application message it sends
//! ([`RankMachine::sent`]) and every application message it receives
//! ([`RankMachine::arrived`]) with the identity the door gave it ([`Ident`]), through the
//! door's interposition hook; markers travel on the same FIFO path as application messages.

pub mod rank;
pub mod scheduler;
#[cfg(any(test, feature = "sim"))]
pub mod sim;
pub mod wire;

use std::time::Duration;

pub use steadfast_proto::{Rank, Time};

pub use rank::{RankMachine, Replay, RestoreError, Verdict};
pub use scheduler::{AbortReason, Scheduler};
pub use wire::{ChannelRecord, DecodeError, Message, Recorded};

/// A wave (global checkpoint) number. Wave 0 is the start of the job: it is always
/// committed and restoring it means starting from the beginning.
pub type Wave = u64;

/// Who sent an application message, and which of their messages to us it was: the door's
/// identity of a message (mirrors the engine's type so this crate stays independent of it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ident {
    /// Sender's world rank.
    pub world: Rank,
    /// Sender's incarnation.
    pub incarnation: u16,
    /// Sender's sequence number of this message among those it sent to the receiver (from 1).
    pub seq: u64,
}

/// The sequence number of a packet that is not a message of its own (the CTS, DATA and FIN
/// packets of a rendezvous): the door numbers messages from 1.
pub const UNNUMBERED: u64 = 0;

/// The other end of a protocol message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Peer {
    /// The checkpoint scheduler.
    Scheduler,
    /// A rank.
    Rank(Rank),
}

/// A protocol message to send. (Not `steadfast_proto::Transmit`: a rank's messages go to
/// other ranks or to the scheduler, which is not a rank.)
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// Destination.
    pub to: Peer,
    /// The message; [`Message::encode`] gives its bytes.
    pub message: Message,
}

/// Tunables of the scheduler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Start a wave this long after the previous one ended (committed or aborted), or after
    /// the job resumed from a rollback. `None`: only on demand ([`Scheduler::checkpoint_now`]).
    pub interval: Option<Duration>,
    /// Abort a wave that has not been reported by every rank this long after it started.
    pub wave_timeout: Duration,
    /// Start the rollback again (next incarnation) if some rank has not restored this long
    /// after the rollback started.
    pub restore_timeout: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            interval: Some(Duration::from_secs(30)),
            wave_timeout: Duration::from_secs(600),
            restore_timeout: Duration::from_secs(600),
        }
    }
}
