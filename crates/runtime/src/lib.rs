//! Steadfast runtime: how ranks find each other.
//!
//! - [`Bootstrap`] (client, in every rank): reads the job from `STEADFAST_*` variables
//!   ([`env`]), connects to the launcher's control server, and offers a key-value space
//!   (`put`/`get`), a barrier (`fence`), `abort`, `finalize`, and asynchronous launcher
//!   notices (`poll_events`).
//! - [`launcher`] (server, `steadfast run`): spawns the ranks, runs the control server
//!   (protocol logic in the sans-IO [`server::ControlCore`]), forwards output and
//!   signals, and tears the job down.
//! - [`wire`]: the length-prefixed control protocol shared by both sides.
//! - [`pmi`]: the same services over the PMI of other process managers (Hydra's PMI-1,
//!   Slurm's PMI-2, PMIx), chosen from the environment ([`pmi::from_env`]).
//! - [`ft`]: the failure detector and the membership control thread each rank runs.

pub mod binding;
pub mod channel_memory;
pub mod ckpt_store;
pub mod client;
pub mod env;
pub mod error;
pub mod event;
pub mod event_logger;
pub mod ft;
#[doc(hidden)]
pub mod fuzzing;
pub mod launcher;
pub mod pmi;
pub mod server;
pub mod wire;

pub use client::Bootstrap;
pub use env::{FtMode, JobEnv, PathKind};
pub use error::BootstrapError;
pub use event::{ExitStatus, LauncherEvent};
