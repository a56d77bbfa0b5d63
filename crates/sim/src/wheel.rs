//! Event queue bucketed by time step.
//!
//! LogP time is integral and almost every step has work, so a ring of per-step buckets beats a
//! heap: scheduling and popping are O(1) and each bucket keeps its capacity between runs. The
//! ring covers `[now, now + len)`; scheduling further out doubles it (rare: long timers).
//! Each step has two buckets: message deliveries, processed first, then process wake-ups, so a
//! process deciding what to send at `t` already knows every reception that ended at `t`.

/// A message delivery: `(to, from, msg)`.
pub(crate) type Delivery<M> = (u32, u32, M);

/// Ring of per-step buckets.
#[derive(Debug)]
pub(crate) struct Wheel<M> {
    deliveries: Vec<Vec<Delivery<M>>>,
    wakeups: Vec<Vec<u32>>,
    mask: u64,
    now: u64,
    pending: usize,
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
        }
    }

    /// Empties the queue and restarts time at zero; bucket capacity is kept.
    pub(crate) fn reset(&mut self) {
        for b in &mut self.deliveries {
            b.clear();
        }
        for b in &mut self.wakeups {
            b.clear();
        }
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
            if !self.deliveries[i].is_empty() || !self.wakeups[i].is_empty() {
                return true;
            }
            self.now += 1;
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
