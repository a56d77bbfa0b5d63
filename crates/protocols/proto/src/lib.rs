//! The small pieces the sans-IO protocol crates (`reliable`, `membership`, `coll`, `ulfm`)
//! share, kept once so the machines and their simulations agree on them. `membership` and
//! `ulfm` use all of them; `coll` the generator; `reliable` the generator and the sweep in
//! its simulation test.
//!
//! - [`Time`]: a duration since an origin the driver picks. The machines never read a clock.
//! - [`Rank`]: a process's index in its group (an MPI rank or a launcher-assigned id).
//! - [`Transmit`]: a message a machine wants sent, with its destination; drivers drain them
//!   with `poll_transmit`.
//! - [`Rng`] ([`rng`]): the SplitMix64 generator the simulations and the gossip schedule
//!   draw from; its stream is fixed here, so a seed replays the same run on every machine
//!   and after every dependency upgrade. Two ways to map it into `0..n` are kept apart
//!   ([`Rng::below`] by remainder for the simulations, [`Rng::below_u32`] by multiply-shift
//!   for `coll`'s gossip), since recorded seeds depend on each.
//! - [`varint`]: the LEB128 writer and the checked, canonical reader of the wire encodings.
//! - [`sweep`]: the seed-sweep harness of the simulation tests (`STEADFAST_SIM_SEEDS` seeds
//!   per test, `STEADFAST_SEED` to replay one; a failure prints its replay command).
//!
//! Nothing here does I/O or depends on another crate. What the protocols do *not* share
//! stays in their crates: `reliable` addresses a frame to a route of one channel (its
//! `Transmit` is a header and a payload, not a message to a rank) and counts time in `u64`
//! nanoseconds; `coll` keeps its small `Copy` transmit (`dst`, `msg`) and a `u64` time in a
//! unit the caller picks, so a simulator can hold millions of its per-process states.

pub mod rng;
pub mod sweep;
pub mod varint;

use std::time::Duration;

pub use rng::Rng;

/// Time as the driver sees it: a duration since an origin the driver picks (the runtime
/// uses the job's start, the simulator its virtual clock). A machine never reads a clock.
pub type Time = Duration;

/// A process's index in its group: an MPI rank in a communicator, or the id the launcher
/// gave a process.
pub type Rank = u32;

/// A message to send: `message` to the process `to`. Each protocol names its own message
/// type (`Transmit<Message>`) and says how it is encoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transmit<M> {
    /// Destination process.
    pub to: Rank,
    /// The message.
    pub message: M,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transmit_compares_destination_and_message() {
        let a = Transmit {
            to: 3,
            message: "x",
        };
        assert_eq!(
            a.clone(),
            Transmit {
                to: 3,
                message: "x"
            }
        );
        assert_ne!(
            a,
            Transmit {
                to: 4,
                message: "x"
            }
        );
        assert_ne!(
            a,
            Transmit {
                to: 3,
                message: "y"
            }
        );
    }
}
