//! Network models: how long a message takes, or whether it is lost. A trait, so the LogP
//! simulator crate can stand in for these later.

use std::time::Duration;

use super::rng::Rng;
use crate::{NodeId, Time};

/// What the network does with one message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// Lost (the sender's reliable layer eventually reports the peer as failed).
    Drop,
    /// Delivered after this delay.
    Deliver(Duration),
    /// Delivered twice (a duplicate the reliable layer failed to filter).
    Duplicate(Duration, Duration),
}

/// A network between simulated processes.
pub trait NetworkModel {
    /// Decides the fate of one message sent at `now`.
    fn route(&mut self, now: Time, from: NodeId, to: NodeId, rng: &mut Rng) -> Route;
}

/// Every message takes exactly `L` (the paper's base model).
#[derive(Clone, Copy, Debug)]
pub struct FixedLatency(pub Duration);

impl NetworkModel for FixedLatency {
    fn route(&mut self, _: Time, _: NodeId, _: NodeId, _: &mut Rng) -> Route {
        Route::Deliver(self.0)
    }
}

/// Uniform random latency per message, so messages overtake each other; optional duplicates.
#[derive(Clone, Copy, Debug)]
pub struct JitterNet {
    /// Shortest delay.
    pub min: Duration,
    /// Longest delay.
    pub max: Duration,
    /// Duplicates per thousand messages.
    pub dup_per_mille: u64,
}

impl NetworkModel for JitterNet {
    fn route(&mut self, _: Time, _: NodeId, _: NodeId, rng: &mut Rng) -> Route {
        let d = rng.duration(self.min, self.max);
        if rng.chance(self.dup_per_mille) {
            Route::Duplicate(d, rng.duration(self.min, self.max))
        } else {
            Route::Deliver(d)
        }
    }
}
