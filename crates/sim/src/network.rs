//! Pluggable network and cost models.
//!
//! The engine asks the network what happens to each message a process starts sending; the
//! network answers with zero or more delivery times (zero: lost, two: duplicated) and the time
//! the message's last activity ends (for quiescence). [`LogP`] is the model of the paper;
//! [`Faulty`] wraps any model with seeded loss, duplication and extra delay (reordering) for
//! protocol tests.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Which processes are alive when: process `r` acts at times `< dies_at[r]`.
#[derive(Debug, Clone, Default)]
pub struct Liveness {
    /// Death step per process, saturated to `u32` (`u32::MAX`: never).
    dies_at: Vec<u32>,
}

impl Liveness {
    /// Everybody alive forever.
    pub fn all_alive(procs: u32) -> Self {
        Liveness {
            dies_at: vec![u32::MAX; procs as usize],
        }
    }

    /// Resets to `procs` processes, all alive.
    pub fn reset(&mut self, procs: u32) {
        self.dies_at.clear();
        self.dies_at.resize(procs as usize, u32::MAX);
    }

    /// Number of processes.
    pub fn procs(&self) -> u32 {
        self.dies_at.len() as u32
    }

    /// Marks `rank` as crashing at `at` (0: dead from the start).
    pub fn kill(&mut self, rank: u32, at: u64) {
        self.dies_at[rank as usize] = at.min(u64::from(u32::MAX - 1)) as u32;
    }

    /// Time from which `rank` is dead (`u64::MAX`: never).
    #[inline]
    pub fn dies_at(&self, rank: u32) -> u64 {
        match self.dies_at[rank as usize] {
            u32::MAX => u64::MAX,
            t => u64::from(t),
        }
    }

    /// Whether `rank` still acts at time `t`.
    #[inline]
    pub fn alive_at(&self, rank: u32, t: u64) -> bool {
        t < self.dies_at(rank)
    }

    /// Whether `rank` ever fails.
    #[inline]
    pub fn ever_fails(&self, rank: u32) -> bool {
        self.dies_at[rank as usize] != u32::MAX
    }
}

/// Outcome of one message on the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Routed {
    /// Up to two delivery times (when the receiver's `handle` runs).
    pub deliveries: [Option<u64>; 2],
    /// When the last activity caused by the message ends.
    pub activity_end: u64,
}

/// A network and cost model.
pub trait Network {
    /// Prepares for a run over `procs` processes; `seed` feeds any randomness.
    fn reset(&mut self, procs: u32, seed: u64);
    /// How long a send keeps the sender busy before its next send may start.
    fn send_slot(&self) -> u64;
    /// Time from the start of a send until the message has left the sender.
    fn send_overhead(&self) -> u64;
    /// Called at the start of each run, once the liveness of every process is known.
    fn begin(&mut self, live: &Liveness) {
        let _ = live;
    }
    /// A message from `from` to `to` starts being sent at `now`; `live` is the liveness given
    /// to [`Self::begin`].
    fn route(&mut self, now: u64, from: u32, to: u32, live: &Liveness) -> Routed;
    /// Whether no receiver ever gets two deliveries in the same step (lets the engine poll a
    /// receiver right after its delivery).
    fn one_delivery_per_step(&self) -> bool {
        false
    }
}

/// LogP parameters (paper, section 2.2): latency `l`, overhead `o`, gap `g`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogPParams {
    /// Network latency L.
    pub l: u64,
    /// Send and receive overhead o (at least 1).
    pub o: u64,
    /// Gap g between consecutive sends or receives of one process (ignored when `g <= o`).
    pub g: u64,
}

/// The LogP model of the paper: a process sends one message at a time (`o` each), receives
/// one message at a time (`o` each, in arrival order), and may overlap a send with a receive.
/// A message whose send starts at `t` arrives at `t + o + L`; its receiver handles it when the
/// receive overhead ends. Messages to dead processes vanish on arrival.
#[derive(Debug, Clone)]
pub struct LogP {
    params: LogPParams,
    /// `o + L`: from the start of a send to the arrival.
    flight: u64,
    /// `max(o, g)`: how long a reception keeps the receive channel busy.
    recv_busy: u64,
    /// Per receiver, side by side so a message touches one cache line.
    recv: Vec<Receiver>,
}

/// Receive side of one process.
#[derive(Debug, Clone, Copy)]
struct Receiver {
    /// When the receive channel becomes free (run-relative steps).
    free: u32,
    /// Copy of the process's death step ([`Liveness`] encoding: `u32::MAX` is never).
    dies_at: u32,
}

impl LogP {
    /// A LogP network; `o` must be at least 1.
    pub fn new(params: LogPParams) -> Self {
        assert!(params.o >= 1, "LogP overhead must be at least 1");
        LogP {
            params,
            flight: params.o + params.l,
            recv_busy: params.o.max(params.g),
            recv: Vec::new(),
        }
    }

    /// The parameters.
    pub fn params(&self) -> LogPParams {
        self.params
    }
}

impl Network for LogP {
    fn reset(&mut self, procs: u32, _seed: u64) {
        self.recv.clear();
        self.recv.resize(
            procs as usize,
            Receiver {
                free: 0,
                dies_at: u32::MAX,
            },
        );
    }

    fn begin(&mut self, live: &Liveness) {
        for (r, d) in self.recv.iter_mut().zip(&live.dies_at) {
            r.dies_at = *d;
        }
    }

    #[inline]
    fn send_slot(&self) -> u64 {
        self.params.o.max(self.params.g)
    }

    #[inline]
    fn send_overhead(&self) -> u64 {
        self.params.o
    }

    fn one_delivery_per_step(&self) -> bool {
        // Receives are serialized max(o, g) >= 1 apart.
        true
    }

    #[inline]
    fn route(&mut self, now: u64, _from: u32, to: u32, live: &Liveness) -> Routed {
        debug_assert_eq!(live.dies_at(to), {
            let d = self.recv[to as usize].dies_at;
            if d == u32::MAX {
                u64::MAX
            } else {
                u64::from(d)
            }
        });
        let arrival = now + self.flight;
        // Sends are issued in time order with one latency for all, so arrivals reach each
        // receiver in order and the receive queue can be resolved right now.
        let rc = &mut self.recv[to as usize];
        let start = arrival.max(u64::from(rc.free));
        if rc.dies_at != u32::MAX && start >= u64::from(rc.dies_at) {
            return Routed {
                deliveries: [None, None],
                activity_end: arrival,
            };
        }
        rc.free = (start + self.recv_busy).min(u64::from(u32::MAX)) as u32;
        let at = start + self.params.o;
        Routed {
            deliveries: [Some(at), None],
            activity_end: at,
        }
    }
}

/// Fault rates for [`Faulty`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FaultRates {
    /// Probability that a message is lost.
    pub loss: f64,
    /// Probability that a message is delivered twice.
    pub duplicate: f64,
    /// Largest extra delay added to a delivery (uniform in `0..=max_delay`), which reorders.
    pub max_delay: u64,
}

/// Wraps a network with seeded loss, duplication and delay. Receive-channel contention of the
/// inner model is kept for the first copy; extra delay is added after it.
#[derive(Debug, Clone)]
pub struct Faulty<N> {
    inner: N,
    rates: FaultRates,
    rng: ChaCha8Rng,
}

impl<N: Network> Faulty<N> {
    /// Wraps `inner`.
    pub fn new(inner: N, rates: FaultRates) -> Self {
        Faulty {
            inner,
            rates,
            rng: ChaCha8Rng::seed_from_u64(0),
        }
    }
}

impl<N: Network> Network for Faulty<N> {
    fn reset(&mut self, procs: u32, seed: u64) {
        self.inner.reset(procs, seed);
        self.rng = ChaCha8Rng::seed_from_u64(seed ^ 0xFA17_FA17_FA17_FA17);
    }

    fn begin(&mut self, live: &Liveness) {
        self.inner.begin(live);
    }

    fn send_slot(&self) -> u64 {
        self.inner.send_slot()
    }

    fn send_overhead(&self) -> u64 {
        self.inner.send_overhead()
    }

    fn route(&mut self, now: u64, from: u32, to: u32, live: &Liveness) -> Routed {
        let mut r = self.inner.route(now, from, to, live);
        let Some(first) = r.deliveries[0] else {
            return r;
        };
        if self.rng.gen_bool(self.rates.loss.clamp(0.0, 1.0)) {
            r.deliveries = [None, None];
            return r;
        }
        let max = self.rates.max_delay;
        let rng = &mut self.rng;
        let jitter = |rng: &mut ChaCha8Rng| if max == 0 { 0 } else { rng.gen_range(0..=max) };
        let a = first + jitter(rng);
        let dup = rng.gen_bool(self.rates.duplicate.clamp(0.0, 1.0));
        let b = dup.then(|| first + jitter(rng));
        r.deliveries = [Some(a), b];
        r.activity_end = r.activity_end.max(a).max(b.unwrap_or(0));
        r
    }
}
