//! Sans-IO reliable channel after LA-MPI (seed 004): end-to-end CRC32C, 64-bit sequence
//! numbers, fragment-specific and non-specific ACKs, NACKs, per-fragment retransmission
//! with truncated exponential backoff, duplicate drop, bounded reordering, and routes a
//! path scheduler can fail and restore.
//!
//! - [`frame`]: the wire format, a checked zero-copy view and an emitter.
//! - [`crc`]: CRC32C and the fused copy-and-checksum pass.
//! - [`Channel`]: the per-peer state machine.
//! - [`Assembler`]: joins delivered fragments into whole messages (for simple users).

mod channel;
mod config;
mod counters;
pub mod crc;
pub mod frame;
#[doc(hidden)]
pub mod fuzzing;
mod reassembly;

pub use channel::{Channel, Delivery, Event, MsgId, RouteId, RttEstimator, Transmit, WouldBlock};
pub use config::{
    Config, ConfigError, DEFAULT_MAX_PAYLOAD, DEFAULT_RETRIES_PER_ROUTE, DEFAULT_RTO_INITIAL_NS,
    DEFAULT_RTO_MAX_NS, DEFAULT_RTO_MIN_NS,
};
pub use counters::Counters;
pub use reassembly::{AssembleError, Assembler};
