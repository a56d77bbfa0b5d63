//! Failure detector and membership control thread (seed 000 in the runtime).
//!
//! Every rank of a job with more than one rank runs one background **control thread**
//! (started by MPI_Init, stopped by MPI_Finalize). It drives the sans-IO
//! [`steadfast_membership::Membership`] state machine and sleeps in `poll(2)` between
//! events, with the machine's [`poll_timeout`](steadfast_membership::Membership::poll_timeout)
//! and the detector's deadlines as timeout. It never takes the MPI engine's lock, so failures
//! are detected and views installed while the application computes or blocks.
//!
//! # The control channel
//! Membership messages travel on their own channel, independent of the application's data
//! path (shared memory or TCP): one TCP listener per rank on `STEADFAST_FT_HOST`
//! (default 127.0.0.1), its address published in the launcher's key-value space as
//! `ft.<rank>` before the job's start-up fence ([`kv_key`]). Connections are opened on first
//! use, without blocking (to a peer on a loopback address, over a Unix socket in the abstract
//! namespace named after its TCP address, when it answers: a quarter of the CPU time per
//! frame), and carry frames both ways ([`frame`]: a fixed header plus a
//! SipHash-2-4 tag keyed with the job key, so a frame from another job or another program is
//! dropped and counted, never acted upon).
//!
//! Why TCP and not UDP: the protocol treats a missing acknowledgement as a failure, so it
//! needs a channel that does not lose messages (the simulation tests assume the reliable
//! layer's guarantees); and a TCP connection gives the "broken connection" input for free,
//! since the kernel closes every socket of a process that dies.
//!
//! # Failure-detector inputs
//! All of them end in [`Membership::suspect`](steadfast_membership::Membership::suspect) /
//! [`suspect_member`](steadfast_membership::Membership::suspect_member):
//! - **launcher notice**: `RankExited` from the launcher for a rank that did not finalize
//!   ([`LauncherLink`], over the shared bootstrap connection);
//! - **broken connection** on the control channel (end-of-file, reset, refused), unless the
//!   peer said BYE (it reached MPI_Finalize);
//! - **the reliable layer** giving up on a peer: [`ViewBoard::report_suspect`];
//! - **query timeout** for a silent process: tree neighbours silent for
//!   `STEADFAST_HEARTBEAT_MS` get HOW_ARE_YOU, and are suspected after
//!   `STEADFAST_SUSPECT_MS` of silence ([`monitor`]).
//!
//! Tunables: [`config`] (every `STEADFAST_*` variable, with defaults). The MPI library reads
//! the views through [`ViewBoard`] (core's `ft` module wraps it).

pub mod board;
pub mod config;
pub mod control;
pub mod frame;
pub mod link;
pub mod mesh;
pub mod monitor;
pub mod trace;

use std::net::IpAddr;
use std::time::Duration;

pub use board::{StopMode, Subscription, ViewBoard, ViewSnapshot};
pub use config::FtConfig;
pub use control::{prepare, ControlThread, Prepared, SuspectSource};
pub use link::{LauncherLink, SharedBootstrap};
pub use steadfast_membership::ViewId;

/// Exit status of a process that leaves because the group declared it failed
/// (run-through mode; see [`FtConfig::exit_when_excluded`]).
pub const EXIT_EXCLUDED: i32 = 75;

/// Launcher key-value key under which rank `rank` publishes its control-channel address.
pub fn kv_key(rank: u32) -> String {
    format!("ft.{rank}")
}

/// Errors starting the control thread.
#[derive(Debug, thiserror::Error)]
pub enum FtError {
    /// The configuration is invalid.
    #[error("membership configuration: {0}")]
    Config(String),
    /// The control channel could not listen.
    #[error("cannot listen for the control channel on {0}: {1}")]
    Bind(IpAddr, std::io::Error),
    /// A peer published something that is not an address.
    #[error("rank {rank} published a bad control-channel address {value:?}")]
    BadAddress {
        /// The rank.
        rank: u32,
        /// What it published.
        value: String,
    },
    /// The thread or its wake-up socket could not be created.
    #[error("cannot start the control thread: {0}")]
    Spawn(std::io::Error),
}

/// CLOCK_MONOTONIC now, in nanoseconds (the clock MPI_Wtime reads, so traces and
/// application timestamps of one host compare directly).
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write into.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The membership machine's time: CLOCK_MONOTONIC as a duration.
pub fn mono_now() -> Duration {
    Duration::from_nanos(mono_ns())
}
