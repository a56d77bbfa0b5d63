//! A specialized engine for the paper's Table 1 workload: tree dissemination followed by
//! synchronized checked correction starting once dissemination is over, LogP with `o = 1` and
//! `g <= 1`, processes dead from the start.
//!
//! It reproduces the generic engine ([`crate::engine`] driving
//! [`steadfast_coll::BcastState`]) exactly — the same sends in the same order, hence the same
//! metrics for every seed (checked by `tests/fast_engine.rs` and the `golden` example) — with a
//! fraction of the bookkeeping:
//!
//! * Dissemination does not depend on the faults except through who gets colored, and the
//!   generic engine's order of the tree sends of a run with faults is that of the fault-free
//!   run restricted to the colored senders (by induction over the steps: see the order below).
//!   So the fault-free tree sends are computed once per simulator, in that order, and a run
//!   replays them in one pass, skipping uncolored senders.
//! * Correction: with a send slot of one step, a participant sends at every step from the
//!   correction start until it finds nothing to send, and then never again (checked correction
//!   only ever lowers its stopping distances); nobody else ever sends. So instead of wake-ups,
//!   timers and a per-step rank set, the engine keeps one rank-ordered list of the
//!   participants still sending and walks it once per step.
//!
//! The order of sends within a step matters (it decides which of two simultaneous arrivals a
//! receiver handles first), and it is the generic engine's: first every receiver of the step's
//! deliveries that has something to send, right after its delivery (in delivery order), then
//! the other senders in rank order. Deliveries of a step are handled in the order their sends
//! were routed, as there. A delivery is `(receiver, distance << 1 | side)`: the distance of
//! the sender and the receiver's side it came from.

use steadfast_coll::{ChildCursor, Correction, Topology};

use crate::bcast::{BcastSpec, DissemSpec};
use crate::faults::FaultPlan;
use crate::network::Liveness;

const LEFT: usize = 0;
const RIGHT: usize = 1;

/// Never colored, never sends; messages to it vanish.
const DEAD: u32 = 1 << 0;
const COLORED: u32 = 1 << 1;
/// Colored by a correction message (never takes part in correction).
const VIA_CORRECTION: u32 = 1 << 2;
/// A participant still sending correction messages (it sends at every step until it finds
/// nothing to send).
const ACTIVE: u32 = 1 << 4;
/// Already polled this step, right after its delivery.
const POLLED: u32 = 1 << 5;

/// What the generic engine's [`steadfast_coll::BcastState`] and LogP receiver keep, reduced
/// to this workload. 24 bytes.
#[derive(Debug, Clone, Copy)]
struct Proc {
    /// Correction distance already sent to, per side.
    sent: [u32; 2],
    /// Distance of the nearest participant heard from, per side.
    stop: [u32; 2],
    /// When the receive channel is free again (`u32::MAX`: dead).
    recv_free: u32,
    colored_at: u32,
    flags: u32,
}

/// What one run did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct FastOutcome {
    pub last_activity: u64,
    pub tree_sends: u64,
    pub correction_sends: u64,
    pub hit_limit: bool,
}

/// Per-step delivery buckets, `[now, now + len)`; grows for long receive queues.
#[derive(Debug)]
struct Ring {
    buckets: Vec<Vec<(u32, u32)>>,
    mask: u64,
    pending: usize,
}

impl Ring {
    fn new() -> Self {
        Ring {
            buckets: (0..64).map(|_| Vec::new()).collect(),
            mask: 63,
            pending: 0,
        }
    }

    fn reset(&mut self) {
        for b in &mut self.buckets {
            b.clear();
        }
        self.pending = 0;
    }

    #[inline(always)]
    fn push(&mut self, now: u64, at: u64, d: (u32, u32)) {
        if at - now > self.mask {
            self.grow(now, at);
        }
        self.buckets[(at & self.mask) as usize].push(d);
        self.pending += 1;
    }

    #[cold]
    fn grow(&mut self, now: u64, at: u64) {
        let old_len = self.mask + 1;
        let mut len = old_len;
        while at - now >= len {
            len *= 2;
        }
        let mut buckets: Vec<Vec<(u32, u32)>> = (0..len).map(|_| Vec::new()).collect();
        for (i, b) in self.buckets.drain(..).enumerate() {
            // Slot i of the old ring holds time now + ((i - now) mod old_len).
            let t = now + ((i as u64).wrapping_sub(now) & (old_len - 1));
            buckets[(t & (len - 1)) as usize] = b;
        }
        self.buckets = buckets;
        self.mask = len - 1;
    }

    /// First step `>= now` with deliveries (all pending ones are at `>= now`).
    fn next_from(&self, now: u64) -> Option<u64> {
        if self.pending == 0 {
            return None;
        }
        let mut t = now;
        while self.buckets[(t & self.mask) as usize].is_empty() {
            t += 1;
        }
        Some(t)
    }

    fn take(&mut self, now: u64) -> Vec<(u32, u32)> {
        let v = std::mem::take(&mut self.buckets[(now & self.mask) as usize]);
        self.pending -= v.len();
        v
    }

    fn restore(&mut self, now: u64, mut v: Vec<(u32, u32)>) {
        v.clear();
        self.buckets[(now & self.mask) as usize] = v;
    }
}

/// The fast engine for one [`BcastSpec`]; reusable across runs.
#[derive(Debug)]
pub(crate) struct FastChecked {
    procs: u32,
    /// `o + L`.
    flight: u64,
    /// Synchronized correction start (at or after the end of dissemination).
    sync_at: u64,
    /// Every tree send of a fault-free run in the generic engine's order: `(step, sender,
    /// child)`. A run with faults makes the sends of the colored senders, in this order.
    tree: Vec<(u32, u32, u32)>,
    st: Vec<Proc>,
    ring: Ring,
    /// Processes that send this step, in rank order.
    active: Vec<u32>,
    next: Vec<u32>,
    /// Processes colored by the tree at the correction start, in delivery order.
    last_colored: Vec<u32>,
    out: FastOutcome,
}

impl FastChecked {
    /// Whether this engine reproduces `spec` when correction starts at `sync_at` and
    /// fault-free dissemination ends at `latency` (`limit`: the run's time limit).
    pub(crate) fn applies(
        spec: &BcastSpec,
        sync_at: Option<u64>,
        latency: u64,
        limit: u64,
    ) -> bool {
        matches!(spec.dissemination, DissemSpec::Tree { .. })
            && !spec.ack
            && spec.correction == Correction::Checked
            // Correction starts once every tree message is handled, within the time limit.
            && sync_at.is_some_and(|t| t >= latency && t <= limit.min(u64::from(u32::MAX) / 4))
            && spec.logp.o == 1
            && spec.logp.g <= 1
            && spec.procs >= 2
            && matches!(
                spec.faults,
                FaultPlan::None | FaultPlan::List(_) | FaultPlan::Fraction(_)
            )
    }

    /// The engine for a spec [`Self::applies`] to, over `topology` (O(P log P) once).
    pub(crate) fn new(spec: &BcastSpec, topology: &Topology, sync_at: u64) -> Self {
        let flight = spec.logp.o + spec.logp.l;
        FastChecked {
            procs: spec.procs,
            flight,
            sync_at,
            tree: tree_sends(topology, spec.procs, flight),
            st: Vec::new(),
            ring: Ring::new(),
            active: Vec::new(),
            next: Vec::new(),
            last_colored: Vec::new(),
            out: FastOutcome::default(),
        }
    }

    /// Whether `rank` was colored in the last run, and when and how (`true`: by correction).
    #[inline]
    pub(crate) fn colored(&self, rank: u32) -> Option<(u64, bool)> {
        let s = self.st.get(rank as usize)?;
        (s.flags & COLORED != 0).then(|| (u64::from(s.colored_at), s.flags & VIA_CORRECTION != 0))
    }

    /// One broadcast; `live` says who is dead (from the start), `limit` is the generic
    /// engine's time limit.
    pub(crate) fn run(&mut self, live: &Liveness, limit: u64) -> FastOutcome {
        let p = self.procs;
        debug_assert_eq!(live.procs(), p);
        self.st.clear();
        self.st.extend((0..p).map(|r| {
            let dead = live.ever_fails(r);
            debug_assert!(!dead || live.dies_at(r) == 0, "rank {r} crashes late");
            Proc {
                sent: [0; 2],
                stop: [u32::MAX; 2],
                recv_free: if dead { u32::MAX } else { 0 },
                colored_at: u32::MAX,
                flags: if dead { DEAD } else { 0 },
            }
        }));
        self.ring.reset();
        self.active.clear();
        self.next.clear();
        self.last_colored.clear();
        self.out = FastOutcome::default();

        // Dissemination: the fault-free sends whose sender got colored. No receive channel is
        // ever busy (one tree message per process), and nothing else happens before `sync_at`.
        self.st[0].flags |= COLORED | ACTIVE;
        self.st[0].colored_at = 0;
        let sync = self.sync_at as u32;
        let hop = self.flight as u32 + 1;
        for &(step, from, to) in &self.tree {
            if self.st[from as usize].flags & COLORED == 0 {
                continue;
            }
            self.out.tree_sends += 1;
            let c = &mut self.st[to as usize];
            if c.flags & DEAD != 0 {
                self.out.last_activity = self.out.last_activity.max(u64::from(step + hop - 1));
                continue;
            }
            let at = step + hop;
            c.flags |= COLORED | ACTIVE;
            c.colored_at = at;
            c.recv_free = at;
            self.out.last_activity = self.out.last_activity.max(u64::from(at));
            if at == sync {
                self.last_colored.push(to);
            }
        }

        // Correction start: every participant sends to its left neighbour, first those
        // colored right now (polled after their delivery), then the others in rank order.
        let u = self.sync_at;
        let FastChecked {
            procs,
            flight,
            st,
            ring,
            active,
            next,
            last_colored,
            out,
            ..
        } = self;
        let mut cx = Cx {
            st: &mut st[..],
            ring,
            procs: *procs,
            flight: *flight,
            sends: 0,
            last_activity: out.last_activity,
        };
        for &r in last_colored.iter() {
            cx.poll(r, u);
        }
        for r in 0..p {
            let s = &cx.st[r as usize];
            if s.flags & ACTIVE != 0 {
                if u64::from(s.colored_at) != u {
                    cx.poll(r, u);
                }
                active.push(r);
            }
        }
        out.hit_limit = cx.correct(u + 1, limit, active, next);
        out.correction_sends = cx.sends;
        out.last_activity = cx.last_activity;
        *out
    }
}

/// The tables of one run, borrowed apart so the hot loop keeps its counters in registers.
struct Cx<'a> {
    st: &'a mut [Proc],
    ring: &'a mut Ring,
    procs: u32,
    /// `o + L`.
    flight: u64,
    /// Correction messages sent.
    sends: u64,
    last_activity: u64,
}

impl Cx<'_> {
    /// The correction steps from `u` on, `active` holding the participants that sent in
    /// the previous step, in rank order (`next` is scratch). `true` if stopped at `limit`.
    fn correct(
        &mut self,
        mut u: u64,
        limit: u64,
        active: &mut Vec<u32>,
        next: &mut Vec<u32>,
    ) -> bool {
        let limit = limit.min(u64::from(u32::MAX) / 2);
        loop {
            if active.is_empty() {
                // Nobody sends: skip to the next delivery.
                match self.ring.next_from(u) {
                    Some(t) => u = t,
                    None => return false,
                }
            }
            if u > limit {
                return true;
            }
            // Deliveries first, each receiver with something to send polled right after.
            let bucket = self.ring.take(u);
            for &(to, info) in &bucket {
                self.deliver(to, info, u);
            }
            self.ring.restore(u, bucket);
            // Then everybody else still sending, in rank order.
            next.clear();
            for &r in active.iter() {
                let f = self.st[r as usize].flags;
                if f & POLLED != 0 {
                    self.st[r as usize].flags = f & !POLLED;
                    if f & ACTIVE != 0 {
                        next.push(r);
                    }
                } else if self.poll(r, u) {
                    next.push(r);
                }
            }
            std::mem::swap(active, next);
            u += 1;
        }
    }

    #[inline(always)]
    fn deliver(&mut self, to: u32, info: u32, u: u64) {
        let s = &mut self.st[to as usize];
        debug_assert!(s.flags & DEAD == 0);
        if s.flags & COLORED == 0 {
            s.flags |= COLORED | VIA_CORRECTION;
            s.colored_at = u as u32;
        }
        let side = (info & 1) as usize;
        s.stop[side] = s.stop[side].min(info >> 1);
        if s.flags & ACTIVE != 0 {
            s.flags |= POLLED;
            self.poll(to, u);
        }
    }

    /// The generic engine's `poll_transmit` for a participant running checked correction:
    /// `true` if it sent (and polls again next step).
    #[inline(always)]
    fn poll(&mut self, r: u32, u: u64) -> bool {
        let p = self.procs;
        let s = &mut self.st[r as usize];
        // The side with fewer messages (left on ties) until a participant there has been
        // reached and heard from, or everybody has one.
        let [sl, sr] = s.sent;
        let covered = u64::from(sl) + u64::from(sr) >= u64::from(p - 1);
        let left = sl < s.stop[LEFT];
        let right = sr < s.stop[RIGHT];
        if covered || !(left || right) {
            s.flags &= !ACTIVE;
            return false;
        }
        let (dst, info) = if left && (!right || sl <= sr) {
            s.sent[LEFT] = sl + 1;
            let d = sl + 1;
            // The receiver hears from its right.
            (
                if r >= d { r - d } else { r + p - d },
                d << 1 | RIGHT as u32,
            )
        } else {
            s.sent[RIGHT] = sr + 1;
            let d = sr + 1;
            let t = r + d;
            (if t >= p { t - p } else { t }, d << 1 | LEFT as u32)
        };
        self.sends += 1;
        self.route(dst, info, u);
        true
    }

    /// LogP with `o = 1`, `g <= 1`: arrival `o + L` after the send starts, one reception per
    /// step per receiver in arrival order, handled when its overhead ends.
    #[inline(always)]
    fn route(&mut self, to: u32, info: u32, u: u64) {
        let arrival = u + self.flight;
        let q = &mut self.st[to as usize];
        if q.recv_free == u32::MAX {
            self.last_activity = self.last_activity.max(arrival);
            return;
        }
        let start = arrival.max(u64::from(q.recv_free));
        q.recv_free = (start + 1) as u32;
        let at = start + 1;
        self.ring.push(u, at, (to, info));
        self.last_activity = self.last_activity.max(at);
    }
}

/// The tree sends of a fault-free run, `(step, sender, child)`, in the order the generic
/// engine makes them: within a step, first the processes colored in that step (right after
/// their delivery, in delivery order), then those still sending, in rank order. A process
/// colored at `c` sends to its children at `c`, `c + 1`, ...; a child is colored `flight + 1`
/// steps after its send started.
fn tree_sends(topology: &Topology, procs: u32, flight: u64) -> Vec<(u32, u32, u32)> {
    let mut sends = Vec::with_capacity(procs as usize);
    let mut cursors = vec![ChildCursor::default(); procs as usize];
    let hop = flight as usize + 1;
    // Deliveries per step, in send order.
    let mut arriving: Vec<Vec<u32>> = Vec::new();
    let mut active = vec![0u32];
    cursors[0] = topology.cursor(0);
    let (mut next, mut fresh, mut merged) = (Vec::new(), Vec::new(), Vec::new());
    let mut u = 0usize;
    while !active.is_empty() || u < arriving.len() {
        let mut send = |from: u32, cursor: &mut ChildCursor, arriving: &mut Vec<Vec<u32>>| {
            let child = topology.next_child(cursor)?;
            sends.push((u as u32, from, child));
            if arriving.len() <= u + hop {
                arriving.resize_with(u + hop + 1, Vec::new);
            }
            arriving[u + hop].push(child);
            Some(())
        };
        let colored = arriving.get_mut(u).map(std::mem::take).unwrap_or_default();
        for &c in &colored {
            cursors[c as usize] = topology.cursor(c);
            if send(c, &mut cursors[c as usize], &mut arriving).is_some() {
                fresh.push(c);
            }
        }
        next.clear();
        for &r in &active {
            if send(r, &mut cursors[r as usize], &mut arriving).is_some() {
                next.push(r);
            }
        }
        merge_into(&mut merged, &next, &mut fresh);
        std::mem::swap(&mut active, &mut merged);
        u += 1;
    }
    sends
}

/// `next` (sorted) and `fresh` (unsorted, disjoint from it) merged in rank order into
/// `out`; `fresh` is left empty.
fn merge_into(out: &mut Vec<u32>, next: &[u32], fresh: &mut Vec<u32>) {
    fresh.sort_unstable();
    out.clear();
    let (mut i, mut j) = (0, 0);
    while i < next.len() && j < fresh.len() {
        if next[i] < fresh[j] {
            out.push(next[i]);
            i += 1;
        } else {
            out.push(fresh[j]);
            j += 1;
        }
    }
    out.extend_from_slice(&next[i..]);
    out.extend_from_slice(&fresh[j..]);
    fresh.clear();
}
