//! Deterministic discrete-event simulator for Steadfast's sans-IO protocol machines.
//!
//! * [`engine`]: the event loop, bucketed by integral time step, driving a [`Population`] of
//!   process machines over a pluggable [`Network`].
//! * [`network`]: the LogP cost model of the Corrected Trees paper and a fault-injecting
//!   wrapper (loss, duplication, reordering).
//! * [`faults`]: which processes fail and when (root protected).
//! * [`bcast`]: one corrected broadcast ([`steadfast_coll`]) on the LogP engine, with the
//!   paper's metrics.
//! * [`runner`] and [`stats`]: many seeded runs over all cores, and their summaries.
//! * [`cli`]: `steadfast sim bcast | paper | bench`, embedded by the `steadfast` program.
//! * [`paper`] and [`plot`]: regeneration of the paper's tables and figures.

pub mod bcast;
pub mod cli;
pub mod cputime;
pub mod engine;
mod fast;
pub mod faults;
pub mod network;
pub mod paper;
pub mod plot;
pub mod runner;
pub mod stats;
mod wheel;

pub use bcast::{BcastSim, BcastSpec, DissemSpec, EngineChoice, RunMetrics, SimError, StartSpec};
pub use engine::{Engine, Population, RunOutcome};
pub use faults::{FaultError, FaultPlan};
pub use network::{FaultRates, Faulty, Liveness, LogP, LogPParams, Network, Routed};
