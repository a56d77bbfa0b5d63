//! Deterministic discrete-event simulator for Steadfast's sans-IO protocol machines.
//!
//! * [`engine`]: the event loop, bucketed by integral time step, driving a [`Population`] of
//!   process machines over a pluggable [`Network`].
//! * [`network`]: the LogP cost model of the Corrected Trees paper and a fault-injecting
//!   wrapper (loss, duplication, reordering).
//! * [`faults`]: which processes fail and when (root protected).
//! * [`bcast`]: one corrected broadcast ([`steadfast_coll`]) on the LogP engine, with the
//!   paper's metrics.

pub mod bcast;
pub mod cputime;
pub mod engine;
pub mod faults;
pub mod network;
mod wheel;

pub use bcast::{BcastSim, BcastSpec, DissemSpec, RunMetrics, SimError, StartSpec};
pub use engine::{Engine, Population, RunOutcome};
pub use faults::{FaultError, FaultPlan};
pub use network::{FaultRates, Faulty, LogP, LogPParams, Liveness, Network, Routed};
