//! Event queue bucketed by time step.
//!
//! LogP time is integral and almost every step has work, so a ring of per-step buckets beats a
//! heap: scheduling and popping are O(1) and each bucket keeps its capacity between runs. The
//! ring covers `[now, now + len)`; scheduling further out doubles it (rare: long timers).
//! Each step has two buckets: message deliveries, processed first, then process wake-ups, so a
//! process deciding what to send at `t` already knows every reception that ended at `t`.
//!
//! Wake-ups exactly one send slot ahead (a process that just started a send; the bulk of all
//! wake-ups) can instead go to a small ring of per-step bitsets over the ranks ([`Near`]):
//! setting a bit is cheaper than a push, and the engine reads them back in rank order without
//! sorting.

/// A message delivery: `(to, from, msg)`.
pub(crate) type Delivery<M> = (u32, u32, M);

/// A set of ranks as a bitset, with the number of members.
#[derive(Debug, Default)]
pub(crate) struct RankSet {
    words: Vec<u64>,
    count: usize,
}

impl RankSet {
    fn resize(&mut self, procs: u32) {
        self.words.clear();
        self.words.resize((procs as usize).div_ceil(64), 0);
        self.count = 0;
    }

    fn clear(&mut self) {
        if self.count > 0 {
            self.words.fill(0);
        }
        self.count = 0;
    }

    /// Adds `rank`, which must not be a member (cheaper than [`Self::insert`]).
    #[inline(always)]
    fn insert_new(&mut self, rank: u32) {
        let word = &mut self.words[(rank / 64) as usize];
        let bit = 1u64 << (rank % 64);
        debug_assert!(*word & bit == 0, "rank {rank} scheduled twice");
        *word |= bit;
        self.count += 1;
    }

    /// Adds `rank` if it is not a member yet.
    #[inline(always)]
    pub(crate) fn insert(&mut self, rank: u32) {
        let word = &mut self.words[(rank / 64) as usize];
        let bit = 1u64 << (rank % 64);
        if *word & bit == 0 {
            *word |= bit;
            self.count += 1;
        }
    }

    /// Calls `f` on every member in ascending order and empties the set. Scans every word:
    /// at most P/64 per step, against about P messages per step when the set is full.
    #[inline(always)]
    pub(crate) fn drain(&mut self, mut f: impl FnMut(u32)) {
        if self.count > 0 {
            for (w, word) in self.words.iter_mut().enumerate() {
                let mut bits = std::mem::take(word);
                while bits != 0 {
                    f(w as u32 * 64 + bits.trailing_zeros());
                    bits &= bits - 1;
                }
            }
        }
        self.count = 0;
    }
}

/// Wake-ups exactly `ahead` steps after the step they are scheduled in: one [`RankSet`] per
/// step of `now ..= now + ahead`, indexed by time modulo `ahead + 1`.
#[derive(Debug, Default)]
struct Near {
    /// 0: disabled (everything goes to the buckets).
    ahead: u64,
    sets: Vec<RankSet>,
    /// Index of the set for `now`.
    cur: usize,
    /// Index of the set for `now + ahead`.
    push: usize,
}

/// Largest send slot for which [`Near`] is used (it costs `ahead + 1` bitsets of P bits).
const MAX_NEAR: u64 = 4;

/// Ring of per-step buckets.
#[derive(Debug)]
pub(crate) struct Wheel<M> {
    deliveries: Vec<Vec<Delivery<M>>>,
    wakeups: Vec<Vec<u32>>,
    mask: u64,
    now: u64,
    pending: usize,
    near: Near,
}

impl<M: Copy> Wheel<M> {
    pub(crate) fn new() -> Self {
        let len = 64;
        Wheel {
            deliveries: (0..len).map(|_| Vec::new()).collect(),
            wakeups: (0..len).map(|_| Vec::new()).collect(),
            mask: len as u64 - 1,
            now: 0,
            pending: 0,
            near: Near::default(),
        }
    }

    /// Sets up [`Self::push_wakeup_near`] for wake-ups `ahead` steps out, over `procs` ranks
    /// (disabled unless `1 <= ahead <= MAX_NEAR`). Call after [`Self::reset`].
    pub(crate) fn configure_near(&mut self, ahead: u64, procs: u32) {
        let near = &mut self.near;
        near.ahead = if (1..=MAX_NEAR).contains(&ahead) {
            ahead
        } else {
            0
        };
        let sets = if near.ahead == 0 {
            0
        } else {
            near.ahead as usize + 1
        };
        near.sets.resize_with(sets, RankSet::default);
        for set in &mut near.sets {
            set.resize(procs);
        }
        near.cur = 0;
        near.push = near.ahead as usize;
    }

    /// How far ahead [`Self::push_wakeup_near`] schedules (0: not available).
    #[inline(always)]
    pub(crate) fn near_ahead(&self) -> u64 {
        self.near.ahead
    }

    /// Wakes `rank` at `now + near_ahead()`. Each rank may be scheduled at most once per
    /// step this way (a process starts at most one send per step).
    #[inline(always)]
    pub(crate) fn push_wakeup_near(&mut self, rank: u32) {
        let near = &mut self.near;
        near.sets[near.push].insert_new(rank);
        self.pending += 1;
    }

    /// Takes the near wake-ups of the current step (`None` if there are none); give the set
    /// back, drained, with [`Self::restore_near`].
    pub(crate) fn take_near(&mut self) -> Option<RankSet> {
        let near = &mut self.near;
        if near.ahead == 0 || near.sets[near.cur].count == 0 {
            return None;
        }
        let set = std::mem::take(&mut near.sets[near.cur]);
        self.pending -= set.count;
        Some(set)
    }

    /// Gives back a set from [`Self::take_near`] once it is empty.
    pub(crate) fn restore_near(&mut self, set: RankSet) {
        debug_assert_eq!(set.count, 0);
        let cur = self.near.cur;
        self.near.sets[cur] = set;
    }

    /// Empties the queue and restarts time at zero; bucket capacity is kept.
    pub(crate) fn reset(&mut self) {
        for b in &mut self.deliveries {
            b.clear();
        }
        for b in &mut self.wakeups {
            b.clear();
        }
        for set in &mut self.near.sets {
            set.clear();
        }
        self.near.cur = 0;
        self.near.push = self.near.ahead as usize;
        self.now = 0;
        self.pending = 0;
    }

    pub(crate) fn now(&self) -> u64 {
        self.now
    }

    #[inline]
    fn fit(&mut self, at: u64) {
        debug_assert!(
            at >= self.now,
            "scheduling into the past: {at} < {}",
            self.now
        );
        if at - self.now > self.mask {
            self.grow(at);
        }
    }

    #[cold]
    fn grow(&mut self, at: u64) {
        let mut len = (self.mask + 1) as usize;
        while (at - self.now) as usize >= len {
            len *= 2;
        }
        // Re-bucket: slot i of the old ring holds time now + ((i - now) mod old_len).
        let old_len = self.mask + 1;
        let mut deliveries: Vec<Vec<Delivery<M>>> = (0..len).map(|_| Vec::new()).collect();
        let mut wakeups: Vec<Vec<u32>> = (0..len).map(|_| Vec::new()).collect();
        let new_mask = len as u64 - 1;
        for (i, (d, w)) in self
            .deliveries
            .drain(..)
            .zip(self.wakeups.drain(..))
            .enumerate()
        {
            let t = self.now + ((i as u64).wrapping_sub(self.now) & (old_len - 1));
            let slot = (t & new_mask) as usize;
            if !d.is_empty() {
                deliveries[slot] = d;
            }
            if !w.is_empty() {
                wakeups[slot] = w;
            }
        }
        self.deliveries = deliveries;
        self.wakeups = wakeups;
        self.mask = new_mask;
    }

    #[inline]
    pub(crate) fn push_delivery(&mut self, at: u64, d: Delivery<M>) {
        self.fit(at);
        self.deliveries[(at & self.mask) as usize].push(d);
        self.pending += 1;
    }

    #[inline]
    pub(crate) fn push_wakeup(&mut self, at: u64, rank: u32) {
        self.fit(at);
        self.wakeups[(at & self.mask) as usize].push(rank);
        self.pending += 1;
    }

    /// Moves `now` to the next step that has work; `false` when the queue is empty.
    pub(crate) fn advance(&mut self) -> bool {
        if self.pending == 0 {
            return false;
        }
        loop {
            let i = (self.now & self.mask) as usize;
            if !self.deliveries[i].is_empty()
                || !self.wakeups[i].is_empty()
                || (self.near.ahead != 0 && self.near.sets[self.near.cur].count != 0)
            {
                return true;
            }
            self.now += 1;
            if self.near.ahead != 0 {
                let n = self.near.sets.len();
                self.near.cur = if self.near.cur + 1 == n {
                    0
                } else {
                    self.near.cur + 1
                };
                self.near.push = if self.near.push + 1 == n {
                    0
                } else {
                    self.near.push + 1
                };
            }
        }
    }

    /// Takes this step's deliveries; give the vector back with [`Self::restore_deliveries`].
    pub(crate) fn take_deliveries(&mut self) -> Vec<Delivery<M>> {
        let i = (self.now & self.mask) as usize;
        let v = std::mem::take(&mut self.deliveries[i]);
        self.pending -= v.len();
        v
    }

    pub(crate) fn restore_deliveries(&mut self, mut v: Vec<Delivery<M>>) {
        let i = (self.now & self.mask) as usize;
        debug_assert!(
            self.deliveries[i].is_empty(),
            "delivery scheduled for the current step"
        );
        v.clear();
        self.deliveries[i] = v;
    }

    /// Takes this step's wake-ups (more may be added for the same step meanwhile).
    pub(crate) fn take_wakeups(&mut self) -> Vec<u32> {
        let i = (self.now & self.mask) as usize;
        let v = std::mem::take(&mut self.wakeups[i]);
        self.pending -= v.len();
        v
    }

    /// Gives back a drained wake-up vector (kept if the bucket is still empty).
    pub(crate) fn restore_wakeups(&mut self, mut v: Vec<u32>) -> bool {
        let i = (self.now & self.mask) as usize;
        v.clear();
        if self.wakeups[i].is_empty() {
            self.wakeups[i] = v;
            true
        } else {
            false
        }
    }

    /// Whether wake-ups are queued for the current step.
    pub(crate) fn has_wakeups_now(&self) -> bool {
        !self.wakeups[(self.now & self.mask) as usize].is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_and_keeps_order() {
        let mut w: Wheel<u8> = Wheel::new();
        w.push_delivery(3, (1, 0, 7));
        w.push_wakeup(1000, 5);
        w.push_delivery(3, (2, 0, 8));
        assert!(w.advance());
        assert_eq!(w.now(), 3);
        let d = w.take_deliveries();
        assert_eq!(d, vec![(1, 0, 7), (2, 0, 8)]);
        w.restore_deliveries(d);
        assert!(w.advance());
        assert_eq!(w.now(), 1000);
        assert_eq!(w.take_wakeups(), vec![5]);
        assert!(!w.advance());
    }
}
