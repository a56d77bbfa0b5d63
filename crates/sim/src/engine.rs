//! The discrete-event engine: drives a population of sans-IO process machines over a
//! [`Network`], one time step at a time.
//!
//! Within a step, message deliveries are handled first, then every process that is woken
//! (its send channel became free, its timer expired, or it received something while idle) gets
//! at most one `poll_transmit`. A process sends at most one message per send slot; receptions
//! overlap with sends as in the paper's LogP model. Everything is deterministic: deliveries of
//! a step are handled in the order they were scheduled, woken processes in rank order (which
//! also keeps memory access sequential for large populations).

use crate::network::{Liveness, Network};
use crate::wheel::Wheel;

/// Internal time: steps since the start of the run (runs are far shorter than 2^32 steps).
type Tick = u32;
const NEVER: Tick = Tick::MAX;

/// Per-process bookkeeping, packed so one cache line serves four processes.
#[derive(Debug, Clone, Copy)]
struct Slot {
    /// When the send channel is free again.
    send_free: Tick,
    /// Armed timer.
    timer: Tick,
    /// Last step a wake-up was queued for (avoids duplicates within a step).
    woken: Tick,
    /// First step at which the process is dead.
    dies_at: Tick,
}

#[inline]
fn tick(t: u64) -> Tick {
    t.min(u64::from(NEVER - 1)) as Tick
}

/// A set of process state machines addressed by rank, with the push/pull shape of the
/// protocol crates. Implementations usually wrap a slice of per-process states and forward.
pub trait Population {
    /// Message type on the wire.
    type Msg: Copy;
    /// Number of processes.
    fn procs(&self) -> u32;
    /// Process `rank` received `msg` from `from` at `now`.
    fn handle(&mut self, rank: u32, now: u64, from: u32, msg: Self::Msg);
    /// Process `rank`'s timer expired at `now`.
    fn handle_timeout(&mut self, rank: u32, now: u64);
    /// Next message process `rank` wants to start sending at `now`: `(destination, message)`.
    fn poll_transmit(&mut self, rank: u32, now: u64) -> Option<(u32, Self::Msg)>;
    /// When process `rank` next needs `handle_timeout`.
    fn poll_timeout(&self, rank: u32) -> Option<u64>;
    /// Whether process `rank` may have something to do at time 0 (default: yes). Processes
    /// that answer `false` are first woken by a message or their timer.
    fn initially_active(&self, rank: u32) -> bool {
        let _ = rank;
        true
    }
    /// Whether `poll_transmit` could return a message now; `false` lets the engine skip the
    /// call (default: always poll). Must be exact: `false` only if polling would return
    /// `None` and change nothing.
    fn wants_poll(&self, rank: u32) -> bool {
        let _ = rank;
        true
    }
}

/// What one run did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunOutcome {
    /// End of the last activity (send, message flight or receive): quiescence.
    pub last_activity: u64,
    /// Messages whose send was started.
    pub sends: u64,
    /// Deliveries handled by live processes.
    pub deliveries: u64,
    /// The run was stopped at the time limit with work still queued.
    pub hit_limit: bool,
}

/// Reusable engine state; allocations survive between runs.
#[derive(Debug)]
pub struct Engine<N, M> {
    net: N,
    wheel: Wheel<M>,
    slots: Vec<Slot>,
    live: Liveness,
    /// Scratch bitset and list that put a step's wake-ups in rank order.
    marks: Vec<u64>,
    order: Vec<u32>,
}

impl<N: Network, M: Copy> Engine<N, M> {
    /// An engine over network `net`.
    pub fn new(net: N) -> Self {
        Engine {
            net,
            wheel: Wheel::new(),
            slots: Vec::new(),
            live: Liveness::default(),
            marks: Vec::new(),
            order: Vec::new(),
        }
    }

    /// The network model.
    pub fn network(&self) -> &N {
        &self.net
    }

    /// Liveness of the processes; set it up with [`Self::liveness_mut`] before a run.
    pub fn liveness(&self) -> &Liveness {
        &self.live
    }

    /// Liveness to fill in after [`Self::prepare`] and before [`Self::run`].
    pub fn liveness_mut(&mut self) -> &mut Liveness {
        &mut self.live
    }

    /// Clears all state for a run over `procs` processes (everybody alive).
    pub fn prepare(&mut self, procs: u32, seed: u64) {
        let n = procs as usize;
        self.wheel.reset();
        self.slots.clear();
        self.slots.resize(
            n,
            Slot {
                send_free: 0,
                timer: NEVER,
                woken: NEVER,
                dies_at: NEVER,
            },
        );
        self.live.reset(procs);
        self.net.reset(procs, seed);
        self.wheel.configure_near(self.net.send_slot(), procs);
        self.marks.clear();
        self.marks.resize(n.div_ceil(64), 0);
    }

    /// Runs until nothing is left to do or time passes `limit`. Call [`Self::prepare`] (and set
    /// up liveness) first; every live process that is initially active gets a first wake-up at
    /// time 0.
    ///
    /// Order inside a step: deliveries in the order they were scheduled, each receiver that is
    /// idle and has no timer due polled right after its delivery (the network promises at most
    /// one delivery per receiver per step, so nothing else could change its decision); then
    /// the remaining woken processes in rank order.
    pub fn run<P: Population<Msg = M>>(&mut self, pop: &mut P, limit: u64) -> RunOutcome {
        let procs = pop.procs();
        debug_assert_eq!(procs, self.live.procs());
        let limit = limit.min(u64::from(NEVER) / 2);
        for r in 0..procs {
            self.slots[r as usize].dies_at = tick(self.live.dies_at(r));
        }
        self.net.begin(&self.live);
        let inline_poll = self.net.one_delivery_per_step();
        let Engine {
            net,
            wheel,
            slots,
            live,
            marks,
            order,
        } = self;
        // Split borrows keep every table's address and length in registers in the hot loop.
        let mut cx = Cx {
            send_slot: net.send_slot(),
            send_overhead: net.send_overhead(),
            near: wheel.near_ahead() != 0 && wheel.near_ahead() == net.send_slot(),
            net,
            wheel,
            slots: &mut slots[..procs as usize],
            live,
            procs,
            out: RunOutcome::default(),
        };
        for r in 0..procs {
            if cx.live.alive_at(r, 0) {
                if pop.initially_active(r) {
                    cx.wake(r, 0);
                } else {
                    cx.rearm_timer(pop, r, 0);
                }
            }
        }
        while cx.wheel.advance() {
            let now = cx.wheel.now();
            if now > limit {
                cx.out.hit_limit = true;
                break;
            }
            let tnow = now as Tick;
            // Receptions that end now come first.
            let deliveries = cx.wheel.take_deliveries();
            for &(to, from, msg) in &deliveries {
                let slot = cx.slots[to as usize];
                if slot.dies_at <= tnow {
                    continue;
                }
                cx.out.deliveries += 1;
                pop.handle(to, now, from, msg);
                if slot.send_free <= tnow {
                    if inline_poll && slot.timer > tnow {
                        cx.poll_once(pop, to, tnow);
                        cx.rearm_timer(pop, to, tnow);
                    } else {
                        cx.rearm_timer(pop, to, tnow);
                        cx.wake(to, tnow);
                    }
                } else {
                    cx.rearm_timer(pop, to, tnow);
                }
            }
            cx.wheel.restore_deliveries(deliveries);
            // Then each woken process may start one send.
            loop {
                let near = cx.wheel.take_near();
                let wakeups = cx.wheel.take_wakeups();
                let spare = if let Some(mut set) = near {
                    // Next-send-slot wake-ups are a bitset already: add the others to it and
                    // walk it in rank order.
                    for &r in &wakeups {
                        set.insert(r);
                    }
                    set.drain(|r| cx.wakeup(pop, r, tnow));
                    cx.wheel.restore_near(set);
                    wakeups
                } else {
                    // Walk the bucket itself when it is already in rank order, else `order`;
                    // the other vector goes back to the bucket, so capacity is recycled
                    // either way.
                    let (list, spare) = if sort_wakeups(marks, order, &wakeups) {
                        (wakeups, std::mem::take(order))
                    } else {
                        (std::mem::take(order), wakeups)
                    };
                    for &r in &list {
                        cx.wakeup(pop, r, tnow);
                    }
                    *order = list;
                    spare
                };
                let done = cx.wheel.restore_wakeups(spare);
                if done && !cx.wheel.has_wakeups_now() {
                    break;
                }
            }
        }
        cx.out
    }
}

/// Puts the distinct ranks of `list` in ascending order: `true` if `list` already is (the
/// common case: wake-ups for the next send slot arrive in rank order), otherwise they are
/// written to `order`, using `marks` as a scratch bitset.
fn sort_wakeups(marks: &mut [u64], order: &mut Vec<u32>, list: &[u32]) -> bool {
    if list.windows(2).all(|w| w[0] < w[1]) {
        return true;
    }
    order.clear();
    if list.len() < 64 {
        order.extend_from_slice(list);
        order.sort_unstable();
        order.dedup();
        return false;
    }
    let (mut lo, mut hi) = (usize::MAX, 0usize);
    for &r in list {
        let w = (r / 64) as usize;
        marks[w] |= 1u64 << (r % 64);
        lo = lo.min(w);
        hi = hi.max(w);
    }
    for (i, word) in marks[lo..=hi].iter_mut().enumerate() {
        let w = lo + i;
        let mut bits = std::mem::take(word);
        while bits != 0 {
            order.push(w as u32 * 64 + bits.trailing_zeros());
            bits &= bits - 1;
        }
    }
    false
}

/// The engine's tables borrowed for one run.
struct Cx<'a, N, M> {
    net: &'a mut N,
    wheel: &'a mut Wheel<M>,
    slots: &'a mut [Slot],
    live: &'a Liveness,
    procs: u32,
    send_slot: u64,
    send_overhead: u64,
    /// Next-send-slot wake-ups go to the wheel's bitsets.
    near: bool,
    out: RunOutcome,
}

impl<N: Network, M: Copy> Cx<'_, N, M> {
    #[inline(always)]
    fn wake(&mut self, rank: u32, at: Tick) {
        let w = &mut self.slots[rank as usize].woken;
        if *w != at {
            *w = at;
            self.wheel.push_wakeup(u64::from(at), rank);
        }
    }

    #[inline(always)]
    fn rearm_timer<P: Population<Msg = M>>(&mut self, pop: &P, rank: u32, earliest: Tick) {
        let t = pop.poll_timeout(rank).map_or(NEVER, tick);
        let slot = &mut self.slots[rank as usize];
        if t != slot.timer {
            slot.timer = t;
            if t != NEVER {
                self.wake(rank, t.max(earliest));
            }
        }
    }

    /// Handles one wake-up of `r` at `tnow`: fires its timer if due, lets it start a send if
    /// its channel is free, and rearms its timer if anything was called.
    #[inline(always)]
    fn wakeup<P: Population<Msg = M>>(&mut self, pop: &mut P, r: u32, tnow: Tick) {
        let slot = self.slots[r as usize];
        if slot.dies_at <= tnow {
            return;
        }
        let mut earliest = tnow;
        let mut touched = false;
        if slot.timer <= tnow {
            self.slots[r as usize].timer = NEVER;
            pop.handle_timeout(r, u64::from(tnow));
            // A timer that keeps asking for `now` must not spin this step.
            earliest = tnow + 1;
            touched = true;
        }
        if slot.send_free <= tnow {
            self.poll_once(pop, r, tnow);
            touched = true;
        }
        // Otherwise nothing was called, and every call is followed by a rearm, so the timer
        // is already right (typically: the process was polled right after a delivery in
        // this step and its channel is busy again).
        if touched {
            self.rearm_timer(pop, r, earliest);
        }
    }

    /// Lets an idle process start one send.
    #[inline(always)]
    fn poll_once<P: Population<Msg = M>>(&mut self, pop: &mut P, r: u32, tnow: Tick) {
        if !pop.wants_poll(r) {
            return;
        }
        let now = u64::from(tnow);
        let Some((to, msg)) = pop.poll_transmit(r, now) else {
            return;
        };
        self.out.sends += 1;
        let free = tick(now + self.send_slot);
        let slot = &mut self.slots[r as usize];
        slot.send_free = free;
        let sent_at = now + self.send_overhead;
        let completes = u64::from(slot.dies_at) > sent_at;
        if self.near {
            // free == now + send_slot: the wheel's bitset for the next send slot.
            let w = &mut self.slots[r as usize].woken;
            if *w != free {
                *w = free;
                self.wheel.push_wakeup_near(r);
            }
        } else {
            self.wake(r, free);
        }
        debug_assert!(to < self.procs, "process {r} sent to unknown rank {to}");
        if completes && to < self.procs {
            let routed = self.net.route(now, r, to, self.live);
            self.out.last_activity = self.out.last_activity.max(sent_at).max(routed.activity_end);
            for at in routed.deliveries.into_iter().flatten() {
                self.wheel.push_delivery(at, (to, r, msg));
            }
        }
    }
}
