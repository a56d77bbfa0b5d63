//! Message matching: posted receives and unexpected messages, per communicator context.
//!
//! MPI's rules, which this module is the single place to enforce:
//! - a message matches the *earliest posted* receive whose (source, tag) accepts it
//!   (`ANY_SOURCE` / `ANY_TAG` accept anything);
//! - a receive matches the *earliest arrived* unexpected message it accepts;
//! - together with in-order delivery per sender by the paths, this gives non-overtaking
//!   order: two messages from one sender that both match a receive are received in send order.

use std::cell::Cell;
use std::collections::VecDeque;

use rustc_hash::FxHashMap;

/// Wildcard source.
pub const ANY_SOURCE: i32 = -1;
/// Wildcard tag.
pub const ANY_TAG: i32 = -2;

/// Whether a receive for (want_src, want_tag) accepts a message from `src` with `tag`.
pub fn accepts(want_src: i32, want_tag: i32, src: i32, tag: i32) -> bool {
    (want_src == ANY_SOURCE || want_src == src) && (want_tag == ANY_TAG || want_tag == tag)
}

struct Posted<R> {
    src: i32,
    tag: i32,
    id: R,
}

/// An unexpected message waiting for a receive.
pub struct Unexpected<U> {
    pub src: i32,
    pub tag: i32,
    pub msg: U,
}

struct Queues<R, U> {
    posted: VecDeque<Posted<R>>,
    unexpected: VecDeque<Unexpected<U>>,
}

impl<R, U> Default for Queues<R, U> {
    fn default() -> Self {
        Queues { posted: VecDeque::new(), unexpected: VecDeque::new() }
    }
}

/// Posted-receive and unexpected-message queues of every context.
pub struct Matcher<R, U> {
    /// Where each context's queues are in `queues`, by context id: a fast non-cryptographic
    /// hash (ids are our own, not an attacker's).
    index: FxHashMap<u32, usize>,
    /// The queues; a dropped context's (empty) entry is reused from `free`.
    queues: Vec<Queues<R, U>>,
    free: Vec<usize>,
    /// The context looked up last and its entry. Messages and receives come in runs on one
    /// context; a hit skips the hash table (two lookups of it were a sixth of a small
    /// receive's time).
    last: Cell<Option<(u32, usize)>>,
}

impl<R, U> Default for Matcher<R, U> {
    fn default() -> Self {
        Matcher { index: FxHashMap::default(), queues: Vec::new(), free: Vec::new(), last: Cell::new(None) }
    }
}

impl<R, U> Matcher<R, U> {
    /// The entry of `ctx`'s queues, if it has one.
    #[inline]
    fn slot(&self, ctx: u32) -> Option<usize> {
        if let Some((c, i)) = self.last.get() {
            if c == ctx {
                return Some(i);
            }
        }
        let i = *self.index.get(&ctx)?;
        self.last.set(Some((ctx, i)));
        Some(i)
    }

    #[inline]
    fn queues(&self, ctx: u32) -> Option<&Queues<R, U>> {
        self.slot(ctx).map(|i| &self.queues[i])
    }

    #[inline]
    fn queues_mut(&mut self, ctx: u32) -> Option<&mut Queues<R, U>> {
        self.slot(ctx).map(|i| &mut self.queues[i])
    }

    /// `ctx`'s queues, made empty if it has none yet.
    #[inline]
    fn queues_or_new(&mut self, ctx: u32) -> &mut Queues<R, U> {
        let i = match self.slot(ctx) {
            Some(i) => i,
            None => self.new_slot(ctx),
        };
        &mut self.queues[i]
    }

    #[inline(never)]
    fn new_slot(&mut self, ctx: u32) -> usize {
        let i = match self.free.pop() {
            Some(i) => i,
            None => {
                self.queues.push(Queues::default());
                self.queues.len() - 1
            }
        };
        self.index.insert(ctx, i);
        self.last.set(Some((ctx, i)));
        i
    }
}

/// `VecDeque::remove`, with the common case (the head of the queue matched) as a plain pop.
#[inline]
fn remove_at<T>(q: &mut VecDeque<T>, i: usize) -> Option<T> {
    if i == 0 {
        q.pop_front()
    } else {
        q.remove(i)
    }
}

impl<R: Copy + PartialEq, U> Matcher<R, U> {
    /// Post receive `id` for (src, tag) on `ctx`. If an unexpected message matches, it is
    /// removed and returned, and the receive is not queued.
    pub fn post(&mut self, ctx: u32, src: i32, tag: i32, id: R) -> Option<Unexpected<U>> {
        let q = self.queues_or_new(ctx);
        if let Some(i) = q.unexpected.iter().position(|u| accepts(src, tag, u.src, u.tag)) {
            return remove_at(&mut q.unexpected, i);
        }
        q.posted.push_back(Posted { src, tag, id });
        None
    }

    /// Post receive `id` ahead of every receive posted on `ctx` (it was logically posted
    /// before them). The caller knows no unexpected message matches it.
    pub fn post_first(&mut self, ctx: u32, src: i32, tag: i32, id: R) {
        self.queues_or_new(ctx).posted.push_front(Posted { src, tag, id });
    }

    /// Whether any receive is posted on `ctx`.
    pub fn has_posted(&self, ctx: u32) -> bool {
        self.queues(ctx).is_some_and(|q| !q.posted.is_empty())
    }

    /// A message from `src` with `tag` arrived on `ctx`. Returns the receive it matched, or
    /// queues it as unexpected (built by `make`, so a matched message costs no allocation).
    pub fn arrive(&mut self, ctx: u32, src: i32, tag: i32, make: impl FnOnce() -> U) -> Option<R> {
        let q = self.queues_or_new(ctx);
        if let Some(i) = q.posted.iter().position(|p| accepts(p.src, p.tag, src, tag)) {
            if let Some(p) = remove_at(&mut q.posted, i) {
                return Some(p.id);
            }
        }
        q.unexpected.push_back(Unexpected { src, tag, msg: make() });
        None
    }

    /// The receive a message from `src` with `tag` on `ctx` would match now, left posted (the
    /// caller fills its buffer before [`Matcher::arrive`] takes it).
    pub fn first_posted(&self, ctx: u32, src: i32, tag: i32) -> Option<R> {
        self.queues(ctx)?.posted.iter().find(|p| accepts(p.src, p.tag, src, tag)).map(|p| p.id)
    }

    /// Remove the first unexpected message of context `ctx` that `pred` selects; true if
    /// there was one (a cancelled send).
    pub fn remove_unexpected(&mut self, ctx: u32, pred: impl Fn(&Unexpected<U>) -> bool) -> bool {
        let Some(q) = self.queues_mut(ctx) else { return false };
        match q.unexpected.iter().position(pred) {
            Some(i) => q.unexpected.remove(i).is_some(),
            None => false,
        }
    }

    /// Remove every unexpected message (of any context) for which `pred` holds; returns how
    /// many went.
    pub fn remove_unexpected_all(&mut self, pred: impl Fn(&Unexpected<U>) -> bool) -> usize {
        let mut n = 0;
        for q in &mut self.queues {
            let before = q.unexpected.len();
            q.unexpected.retain(|u| !pred(u));
            n += before - q.unexpected.len();
        }
        n
    }

    /// Every unexpected message, of every context.
    pub fn unexpected_all(&self) -> impl Iterator<Item = &Unexpected<U>> {
        self.queues.iter().flat_map(|q| q.unexpected.iter())
    }

    /// The first unexpected message of context `ctx` that `pred` selects, to change in place.
    pub fn find_unexpected_mut(&mut self, ctx: u32, pred: impl Fn(&Unexpected<U>) -> bool) -> Option<&mut Unexpected<U>> {
        self.queues_mut(ctx)?.unexpected.iter_mut().find(|u| pred(u))
    }

    /// Look, without removing, at the first unexpected message `(src, tag)` would match.
    pub fn peek(&self, ctx: u32, src: i32, tag: i32) -> Option<&Unexpected<U>> {
        self.queues(ctx)?.unexpected.iter().find(|u| accepts(src, tag, u.src, u.tag))
    }

    /// Remove and return the first unexpected message `(src, tag)` would match (matched probe).
    pub fn take(&mut self, ctx: u32, src: i32, tag: i32) -> Option<Unexpected<U>> {
        let q = self.queues_mut(ctx)?;
        let i = q.unexpected.iter().position(|u| accepts(src, tag, u.src, u.tag))?;
        remove_at(&mut q.unexpected, i)
    }

    /// Withdraw posted receive `id`; true if it was still posted (i.e. the cancel succeeded).
    pub fn cancel(&mut self, ctx: u32, id: R) -> bool {
        let Some(q) = self.queues_mut(ctx) else { return false };
        match q.posted.iter().position(|p| p.id == id) {
            Some(i) => {
                q.posted.remove(i);
                true
            }
            None => false,
        }
    }

    /// Number of posted receives and unexpected messages on `ctx`.
    pub fn depth(&self, ctx: u32) -> (usize, usize) {
        self.queues(ctx).map_or((0, 0), |q| (q.posted.len(), q.unexpected.len()))
    }

    /// Forget a context whose communicator was freed (queues must be empty by then).
    pub fn drop_context(&mut self, ctx: u32) {
        let Some(i) = self.slot(ctx) else { return };
        let q = &self.queues[i];
        if q.posted.is_empty() && q.unexpected.is_empty() {
            self.index.remove(&ctx);
            self.free.push(i);
            self.last.set(None);
        }
    }
}

#[cfg(test)]
mod tests {
    //! Seeded differential test against a deliberately naive reference model that keeps every
    //! event with a global timestamp and decides matches by scanning all of history.
    use super::*;
    use std::collections::HashMap;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    #[derive(Default)]
    struct Model {
        // (time, ctx, src, tag, id) of receives still waiting
        posted: Vec<(u64, u32, i32, i32, u32)>,
        // (time, ctx, src, tag, msg id)
        unexpected: Vec<(u64, u32, i32, i32, u32)>,
    }

    fn run(seed: u64) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut m: Matcher<u32, u32> = Matcher::default();
        let mut model = Model::default();
        let mut t = 0u64;
        let mut next_id = 0u32;
        // Per (ctx, src) send counters: with messages sent in order, matched receives of one
        // (src, tag) must see increasing sequence numbers (non-overtaking).
        let mut seen: HashMap<(u32, i32, i32), u32> = HashMap::new();
        let mut msg_meta: HashMap<u32, (u32, i32, i32)> = HashMap::new();
        for step in 0..400 {
            t += 1;
            let ctx = rng.gen_range(0..2u32);
            match rng.gen_range(0..10) {
                0..=3 => {
                    let src = if rng.gen_bool(0.3) { ANY_SOURCE } else { rng.gen_range(0..3) };
                    let tag = if rng.gen_bool(0.3) { ANY_TAG } else { rng.gen_range(0..3) };
                    next_id += 1;
                    let id = next_id;
                    let got = m.post(ctx, src, tag, id).map(|u| u.msg);
                    let cand = model
                        .unexpected
                        .iter()
                        .enumerate()
                        .filter(|(_, u)| u.1 == ctx && accepts(src, tag, u.2, u.3))
                        .min_by_key(|(_, u)| u.0)
                        .map(|(i, _)| i);
                    let want = cand.map(|i| model.unexpected.remove(i).4);
                    assert_eq!(got, want, "seed {seed} step {step}: post matched wrongly");
                    if want.is_none() {
                        model.posted.push((t, ctx, src, tag, id));
                    }
                }
                4..=8 => {
                    let src = rng.gen_range(0..3);
                    let tag = rng.gen_range(0..3);
                    next_id += 1;
                    let msg = next_id;
                    msg_meta.insert(msg, (ctx, src, tag));
                    let got = m.arrive(ctx, src, tag, || msg);
                    let cand = model
                        .posted
                        .iter()
                        .enumerate()
                        .filter(|(_, p)| p.1 == ctx && accepts(p.2, p.3, src, tag))
                        .min_by_key(|(_, p)| p.0)
                        .map(|(i, _)| i);
                    let want = cand.map(|i| model.posted.remove(i).4);
                    assert_eq!(got, want, "seed {seed} step {step}: arrival matched wrongly");
                    if want.is_none() {
                        model.unexpected.push((t, ctx, src, tag, msg));
                    } else {
                        let last = seen.entry((ctx, src, tag)).or_insert(0);
                        assert!(msg > *last, "seed {seed}: overtaking");
                        *last = msg;
                    }
                }
                _ => {
                    if model.posted.is_empty() {
                        continue;
                    }
                    let i = rng.gen_range(0..model.posted.len());
                    let p = model.posted.remove(i);
                    assert!(m.cancel(p.1, p.4), "seed {seed}: cancel of a posted receive failed");
                    assert!(!m.cancel(p.1, p.4), "seed {seed}: double cancel succeeded");
                }
            }
            for c in 0..2 {
                let (np, nu) = m.depth(c);
                assert_eq!(np, model.posted.iter().filter(|p| p.1 == c).count());
                assert_eq!(nu, model.unexpected.iter().filter(|u| u.1 == c).count());
            }
        }
    }

    #[test]
    fn matches_reference_model_over_many_seeds() {
        let seeds: u64 = std::env::var("STEADFAST_SIM_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(2000);
        if let Ok(s) = std::env::var("STEADFAST_SEED") {
            run(s.parse().unwrap_or(0));
            return;
        }
        for seed in 0..seeds {
            let r = std::panic::catch_unwind(|| run(seed));
            if r.is_err() {
                panic!("matching failed; replay: STEADFAST_SEED={seed} cargo test -p steadfast-core matching");
            }
        }
    }

    #[test]
    fn wildcards_take_earliest() {
        let mut m: Matcher<u32, &str> = Matcher::default();
        assert!(m.arrive(0, 1, 5, || "a").is_none());
        assert!(m.arrive(0, 2, 5, || "b").is_none());
        assert_eq!(m.post(0, ANY_SOURCE, 5, 1).map(|u| u.msg), Some("a"));
        assert_eq!(m.peek(0, ANY_SOURCE, ANY_TAG).map(|u| u.msg), Some("b"));
        assert_eq!(m.take(0, 2, ANY_TAG).map(|u| u.msg), Some("b"));
        assert!(m.take(0, 2, ANY_TAG).is_none());
    }

    #[test]
    fn dropped_contexts_keep_nothing_and_their_entries_are_reused() {
        let mut m: Matcher<u32, &str> = Matcher::default();
        assert!(m.post(1, 0, 5, 10).is_none());
        assert_eq!(m.arrive(2, 0, 5, || "on 2"), None);
        // Not empty: kept.
        m.drop_context(1);
        assert!(m.has_posted(1));
        assert_eq!(m.arrive(1, 0, 5, || "x"), Some(10));
        m.drop_context(1);
        assert!(!m.has_posted(1));
        assert_eq!(m.depth(1), (0, 0));
        // A new context takes the freed entry and starts empty; the others are untouched.
        assert!(m.post(3, 0, 7, 30).is_none());
        assert_eq!(m.depth(3), (1, 0));
        assert_eq!(m.depth(2), (0, 1));
        assert_eq!(m.queues.len(), 2);
        // Looked up again after the last lookup went elsewhere.
        assert_eq!(m.take(2, 0, 5).map(|u| u.msg), Some("on 2"));
        assert_eq!(m.arrive(3, 0, 7, || "y"), Some(30));
        assert!(m.post(1, ANY_SOURCE, ANY_TAG, 11).is_none());
        assert_eq!(m.depth(1), (1, 0));
        assert_eq!(m.queues.len(), 3);
    }
}
