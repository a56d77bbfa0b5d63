//! Trees grown by a send schedule: binomial, Lamé of order k and the LogP-optimal tree.
//!
//! Every colored process sends one message each `step` time units, starting when it is colored;
//! a message colors its receiver `delay` time units after the send starts. `R(t)`, the number of
//! processes colored by time `t`, then obeys `R(t) = R(t - step) + R(t - delay)` (paper, eq. 1
//! and section 3.2.3). Ranks are handed out in coloring order and, among processes colored at
//! the same time, in the order of their senders' ranks. That is the interleaved numbering of the
//! paper; with `step = 1` the children of `r` are `r + R(x + delay - 1)` for every send time `x`
//! of `r` (paper, eq. 2).
//!
//! * binomial: `step = 1, delay = 1`,
//! * Lamé of order k: `step = 1, delay = k`,
//! * LogP-optimal for (L, o): `step = o, delay = 2o + L`.
//!
//! The paper's child formula `r + R(i + o + L)` only numbers the optimal tree consistently for
//! `o = 1`; for larger `o` two processes colored at times that differ modulo `o` send in
//! different time windows, so the position of a sender among the processes sending at the same
//! instant (`S`, below) is used instead. Both agree for `o = 1`. When `o` divides `L` every
//! process is colored at a multiple of `o` and the tree is the Lamé tree of order `2 + L/o` in
//! units of `o`, hence interleaved (Definition 1). When `o` does not divide `L` this numbering
//! keeps the tree latency-optimal but is not interleaved (see the interleaving tests).
//!
//! Only two small tables indexed by *time* are kept (length ≈ the tree's depth in time units),
//! never a table indexed by rank.

/// Interleaved tree defined by a send schedule (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleTree {
    procs: u32,
    step: u32,
    delay: u32,
    /// `ready[t] = R(t)`: processes colored by time `t`, for `t` up to the first time with
    /// `R(t) >= procs`.
    ready: Vec<u64>,
    /// `senders[t] = S(t)`: processes that start a send at time `t` in the full schedule.
    senders: Vec<u64>,
    /// `by_bits[b]`: the first `t` with `R(t) >= 2^b` (`ready.len()` if none), so a rank of
    /// bit length `b` is colored in `by_bits[b - 1] ..= by_bits[b]`: a few steps to scan
    /// instead of a binary search per coloring.
    by_bits: [u8; 33],
}

/// Iteration state over one process's children in a [`ScheduleTree`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct ScheduleCursor {
    /// Time of the next send.
    pub next_time: u32,
    /// Position of the sender among all processes sending at the same instant.
    pub pos: u32,
}

impl ScheduleTree {
    /// Builds the schedule tables for `procs` processes; `step >= 1` and `delay > step`
    /// (binomial: `delay = step = 1` is allowed too).
    pub(crate) fn new(procs: u32, step: u32, delay: u32) -> Self {
        debug_assert!(procs >= 1 && step >= 1 && delay >= step);
        let mut ready: Vec<u64> = Vec::new();
        let mut senders: Vec<u64> = Vec::new();
        let at = |v: &Vec<u64>, t: i64| if t < 0 { 0 } else { v[t as usize] };
        let mut t: i64 = 0;
        loop {
            let r = if t < i64::from(delay) {
                1
            } else {
                at(&ready, t - i64::from(step)) + at(&ready, t - i64::from(delay))
            };
            ready.push(r);
            let new_at_t = r - at(&ready, t - 1);
            let s = new_at_t + at(&senders, t - i64::from(step));
            senders.push(s);
            if r >= u64::from(procs) {
                break;
            }
            t += 1;
        }
        let mut by_bits = [0u8; 33];
        for (b, slot) in by_bits.iter_mut().enumerate() {
            // The table is at most a few hundred entries long (R grows geometrically).
            *slot = ready.partition_point(|&x| x < 1u64 << b).min(255) as u8;
        }
        ScheduleTree {
            procs,
            step,
            delay,
            ready,
            senders,
            by_bits,
        }
    }

    fn r(&self, t: i64) -> u64 {
        if t < 0 {
            0
        } else {
            // Past the table every process is colored; callers only ask for counts of kept
            // processes, so saturating at the last entry is exact for them.
            self.ready[(t as usize).min(self.ready.len() - 1)]
        }
    }

    fn s(&self, t: i64) -> u64 {
        if t < 0 {
            0
        } else {
            self.senders[t as usize]
        }
    }

    /// Schedule time at which `rank` is colored (the smallest `t` with `R(t) > rank`).
    #[inline]
    pub(crate) fn colored_at(&self, rank: u32) -> u32 {
        let r = u64::from(rank);
        let bits = (32 - rank.leading_zeros()) as usize;
        let mut t = if bits == 0 {
            0
        } else {
            usize::from(self.by_bits[bits - 1])
        };
        if self.ready.len() > 255 {
            // Very slow growth (huge delay): fall back to the binary search.
            return self.ready.partition_point(|&x| x <= r) as u32;
        }
        // R(by_bits[bits]) >= 2^bits > r, or the table ends, which only ranks >= procs reach.
        while t < self.ready.len() && self.ready[t] <= r {
            t += 1;
        }
        t as u32
    }

    /// Last time step of the schedule: every rank is colored by then.
    #[cfg(test)]
    pub(crate) fn last_time(&self) -> u32 {
        (self.ready.len() - 1) as u32
    }

    /// Children iteration state of `rank`.
    pub(crate) fn cursor(&self, rank: u32) -> ScheduleCursor {
        let c = self.colored_at(rank);
        let pos = self.s(i64::from(c) - i64::from(self.step)) + u64::from(rank)
            - self.r(i64::from(c) - 1);
        ScheduleCursor {
            next_time: c,
            pos: pos as u32,
        }
    }

    /// Next child in send order, or `None` once all children are enumerated.
    #[inline]
    pub(crate) fn next_child(&self, cur: &mut ScheduleCursor) -> Option<u32> {
        let colored = i64::from(cur.next_time) + i64::from(self.delay);
        if colored as usize >= self.ready.len() {
            return None;
        }
        let child = self.r(colored - 1) + u64::from(cur.pos);
        if child >= u64::from(self.procs) {
            return None;
        }
        cur.next_time += self.step;
        Some(child as u32)
    }

    /// Parent of `rank`, `None` for the root. Costs O(depth) when `step > 1`, O(log) otherwise.
    pub(crate) fn parent(&self, rank: u32) -> Option<u32> {
        if rank == 0 || rank >= self.procs {
            return None;
        }
        let t = i64::from(self.colored_at(rank));
        let pos = u64::from(rank) - self.r(t - 1);
        let x = t - i64::from(self.delay);
        if self.step == 1 {
            return Some(pos as u32);
        }
        // Senders at x in rank order: the processes colored at c ≡ x (mod step), c <= x,
        // ascending c, each block in rank order.
        let step = i64::from(self.step);
        let mut c = x.rem_euclid(step);
        let mut acc = 0u64;
        while c <= x {
            let block = self.r(c) - self.r(c - 1);
            if pos < acc + block {
                return Some((self.r(c - 1) + pos - acc) as u32);
            }
            acc += block;
            c += step;
        }
        None
    }

    /// Number of processes in the subtree of `rank` (itself included) when only ranks `< n`
    /// exist. Defined for `step == 1`, where a subtree is the same schedule shifted in time.
    pub(crate) fn subtree_size_below(&self, rank: u32, n: u32) -> u64 {
        debug_assert_eq!(self.step, 1);
        let mut total = 0u64;
        let mut n = u64::from(n);
        let v = u64::from(rank);
        let cv = i64::from(self.colored_at(rank));
        // size(v, n) = R(T*-1-c_v) + size(v, m): the levels before T* are complete, and the
        // processes kept at T* are the children of the senders with rank < m.
        while v < n {
            let last = self.ready.partition_point(|&x| x < n) as i64;
            if cv == last {
                return total + 1;
            }
            total += self.r(last - 1 - cv);
            n -= self.r(last - 1);
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binomial_children_are_powers_of_two_above_rank() {
        let t = ScheduleTree::new(16, 1, 1);
        let mut cur = t.cursor(0);
        let kids: Vec<u32> = std::iter::from_fn(|| t.next_child(&mut cur)).collect();
        assert_eq!(kids, vec![1, 2, 4, 8]);
        let mut cur = t.cursor(3);
        let kids: Vec<u32> = std::iter::from_fn(|| t.next_child(&mut cur)).collect();
        assert_eq!(kids, vec![7, 11]);
        assert_eq!(t.parent(11), Some(3));
        assert_eq!(t.parent(8), Some(0));
    }

    #[test]
    fn lame_three_matches_paper_figure_5() {
        // Figure 5: k = 3, P = 9: root sends to R(i+2) = 1, 2, 3, 4, 6; process 1 first sends
        // at iteration 3, process 2 at iteration 4.
        let t = ScheduleTree::new(9, 1, 3);
        let mut cur = t.cursor(0);
        let kids: Vec<u32> = std::iter::from_fn(|| t.next_child(&mut cur)).collect();
        assert_eq!(kids, vec![1, 2, 3, 4, 6]);
        assert_eq!(t.colored_at(1), 3);
        assert_eq!(t.colored_at(2), 4);
        let mut cur = t.cursor(1);
        let kids: Vec<u32> = std::iter::from_fn(|| t.next_child(&mut cur)).collect();
        assert_eq!(kids, vec![5, 7]);
    }

    #[test]
    fn colored_at_matches_binary_search() {
        for (step, delay) in [
            (1, 1),
            (1, 2),
            (1, 3),
            (1, 4),
            (2, 6),
            (3, 11),
            (1, 40),
            (1, 300),
        ] {
            for procs in [1u32, 2, 5, 64, 1000, 70_000] {
                let t = ScheduleTree::new(procs, step, delay);
                for rank in (0..procs).step_by(((procs / 3000) as usize).max(1)) {
                    let want = t.ready.partition_point(|&x| x <= u64::from(rank)) as u32;
                    assert_eq!(
                        t.colored_at(rank),
                        want,
                        "step {step} delay {delay} rank {rank}"
                    );
                }
            }
        }
    }

    #[test]
    fn optimal_ready_counts_follow_recurrence() {
        // L = 2, o = 1: R = 1,1,1,1,2,3,4,5,7,...
        let t = ScheduleTree::new(7, 1, 4);
        assert_eq!(t.ready, vec![1, 1, 1, 1, 2, 3, 4, 5, 7]);
    }
}
