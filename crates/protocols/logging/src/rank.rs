//! A rank's side of message logging: numbers its nondeterministic events, ships them to the
//! event logger, knows which are stable, and — in a rank started again — replays the
//! logged events: it says which arriving message may enter matching next, and forces the
//! outcome of every test/probe call to be the logged one.
//!
//! **Pessimistic** (MPICH-V2): a message may leave only when every event before it is
//! stable ([`RankLog::may_send`]); so no other process ever depends on an event that could
//! be lost, and a failed rank recovers from the logger alone.
//!
//! **Causal** (MPICH-Vcausal): messages leave at once; the determinants not yet known
//! stable travel with them ([`RankLog::piggyback_for`]), minus what the destination is
//! known to hold already (the last event of each rank sent to or received from it). A
//! recovering rank collects its determinants from the logger and from every other rank.
//!
//! **Replay.** The engine holds back every arriving message (its first packet, `Eager` or
//! `Rts`) while a replay runs and releases them one at a time: the message the next logged
//! event names ([`RankLog::to_release`]), once every earlier event was replayed. Each
//! message then meets the same posted receives as in the logged run (by induction on the
//! events: the program is piecewise deterministic, so it posts the same receives in the
//! same order given the same outcomes), and matches the same one. Test/probe calls get the
//! logged outcome ([`RankLog::forced`]): a failure until the logged number of failures is
//! reached, then the logged indices. When the log is exhausted the held messages are
//! released in arrival order and the rank runs free.

use std::collections::{BTreeMap, HashSet, VecDeque};

use crate::wire::{Event, FromLogger, ToLogger};

/// Which logging protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Pessimistic,
    Causal,
    /// MPICH-V1: the receiver's channel memory fixes the order of its receptions, so
    /// matches are not events here; only the outcomes of test/probe calls are, logged as
    /// in the pessimistic protocol.
    ChannelMemory,
}

/// The outcome a test/probe call must report during a replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Forced {
    /// Report nothing (the logged run found nothing at this call).
    Fail,
    /// Report these indices (and, for a probe, this message).
    Report { indices: Vec<u32>, probed: Option<(u32, u64)> },
}

/// The re-executed run did something the logged run did not: the program is not piecewise
/// deterministic (it decided on a clock, a random number, an uninitialized value …).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("replay diverged at event {at}: the logged run had {logged:?}, this run {now:?}")]
pub struct Divergence {
    pub at: u64,
    pub logged: Option<Event>,
    pub now: Event,
}

#[derive(Debug, Default, Clone)]
struct Replay {
    /// Logged events not replayed yet; the front is event number `next`.
    events: VecDeque<Event>,
    next: u64,
    released: HashSet<(u32, u64)>,
}

/// A rank's message-logging state (cloned whole into a process image, in the simulation).
#[derive(Debug, Clone)]
pub struct RankLog {
    mode: Mode,
    rank: u32,
    incarnation: u16,
    /// Events so far (the event clock).
    clock: u64,
    /// Events `1..=sent` were handed to the logger; `1..=acked` are stable.
    sent: u64,
    acked: u64,
    /// Events not yet handed to the logger.
    unsent: VecDeque<Event>,
    /// Events handed to the logger and not acknowledged (`acked+1..=sent`), to hand over
    /// again if the logger restarted and lost them.
    inflight: VecDeque<Event>,
    replay: Option<Replay>,
    /// Causal: determinants not known stable, per rank (own and others').
    held: Vec<BTreeMap<u64, Event>>,
    /// Causal: per rank, its events `1..=stable[r]` are stable at the logger.
    stable: Vec<u64>,
    /// Causal: `known[d][r]`: rank `d` holds rank `r`'s determinants up to this number.
    known: Vec<Vec<u64>>,
    /// Determinants piggybacked so far (for the cost measurements).
    pub piggybacked: u64,
    /// Causal recovery: determinants of ours gathered from the others, not yet merged.
    gathered: BTreeMap<u64, Event>,
    /// Causal recovery: runs of gathered determinants to hand to the logger, in order.
    regather: VecDeque<ToLogger>,
    /// Causal recovery: determinants from the others are still taken in (until the replay
    /// starts; a late answer could otherwise extend a run this process already left).
    gather_open: bool,
}

impl RankLog {
    /// The log of world rank `rank` (of `size`) in its first run.
    pub fn new(mode: Mode, rank: u32, size: u32) -> RankLog {
        let n = size as usize;
        RankLog {
            mode,
            rank,
            incarnation: 0,
            clock: 0,
            sent: 0,
            acked: 0,
            unsent: VecDeque::new(),
            inflight: VecDeque::new(),
            replay: None,
            held: if mode == Mode::Causal { vec![BTreeMap::new(); n] } else { Vec::new() },
            stable: vec![0; n],
            known: if mode == Mode::Causal { vec![vec![0; n]; n] } else { Vec::new() },
            piggybacked: 0,
            gathered: BTreeMap::new(),
            regather: VecDeque::new(),
            gather_open: false,
        }
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Events so far.
    pub fn clock(&self) -> u64 {
        self.clock
    }

    /// Events stable at the logger.
    pub fn acked(&self) -> u64 {
        self.acked
    }

    /// A rank started again as `incarnation` from the state it had after event `clock`
    /// (0: from the beginning): ask the logger for what came after.
    pub fn restarted(&mut self, incarnation: u16, clock: u64) -> ToLogger {
        self.incarnation = incarnation;
        self.clock = clock;
        self.sent = clock;
        self.acked = clock;
        self.unsent.clear();
        self.inflight.clear();
        self.gathered.clear();
        self.regather.clear();
        self.gather_open = true;
        self.replay = None;
        ToLogger::Fetch { incarnation, from: clock + 1 }
    }

    /// The events to replay, from the logger (and, causal, the other ranks), numbered from
    /// `first`. Only the contiguous run from the next event counts.
    pub fn replay_from(&mut self, first: u64, events: Vec<Event>) {
        let next = self.clock + 1;
        if first > next {
            return;
        }
        // What the logger holds is stable by definition (it came from where it is kept).
        let stored = first - 1 + events.len() as u64;
        let mut events: VecDeque<Event> = events.into_iter().skip((next - first) as usize).collect();
        let have = match &mut self.replay {
            Some(r) => r.events.len() as u64,
            None => 0,
        };
        // Merge: a longer log (from another source) extends what is known.
        if let Some(r) = &mut self.replay {
            if (events.len() as u64) > have {
                r.events.extend(events.drain(have as usize..));
            }
        } else if !events.is_empty() {
            self.replay = Some(Replay { events, next, released: HashSet::new() });
        }
        self.settle_stable(stored);
    }

    /// Events `1..=upto` are stable: `acked` and `inflight` follow (and `sent` if behind).
    fn settle_stable(&mut self, upto: u64) {
        if upto <= self.acked {
            return;
        }
        if upto >= self.sent {
            self.inflight.clear();
            self.sent = upto;
        } else {
            for _ in self.acked..upto {
                self.inflight.pop_front();
            }
        }
        self.acked = upto;
    }

    /// Causal recovery: the replay starts; answers to the gathering that come later are
    /// ignored.
    pub fn close_gather(&mut self) {
        self.gather_open = false;
    }

    /// Whether a replay is under way.
    pub fn replaying(&self) -> bool {
        self.replay.is_some()
    }

    /// The next event to replay, and whether the message it names was let into matching.
    pub fn next_to_replay(&self) -> Option<(&Event, bool)> {
        let r = self.replay.as_ref()?;
        let e = r.events.front()?;
        Some((e, e.message().is_some_and(|m| r.released.contains(&m))))
    }

    /// Events still to replay.
    pub fn replay_left(&self) -> usize {
        self.replay.as_ref().map_or(0, |r| r.events.len())
    }

    /// The message that must enter matching now, if the next logged event names one that
    /// was not released yet.
    pub fn to_release(&self) -> Option<(u32, u64)> {
        let r = self.replay.as_ref()?;
        let m = r.events.front()?.message()?;
        (!r.released.contains(&m)).then_some(m)
    }

    /// The engine let message `m` into matching.
    pub fn released(&mut self, m: (u32, u64)) {
        if let Some(r) = &mut self.replay {
            r.released.insert(m);
        }
    }

    /// What the test/probe call `call` must report, after `failed` unsuccessful calls since
    /// the last success; None outside a replay (the call decides by itself).
    pub fn forced(&self, call: u8, failed: u64) -> Option<Forced> {
        let r = self.replay.as_ref()?;
        Some(match r.events.front() {
            Some(Event::Choice { call: c, indices, failed_before, probed }) if *c == call && *failed_before == failed => {
                Forced::Report { indices: indices.clone(), probed: *probed }
            }
            _ => Forced::Fail,
        })
    }

    /// An event happened. During a replay it must be the next logged one (else the run
    /// diverged); afterwards it is numbered and queued for the logger.
    pub fn record(&mut self, event: Event) -> Result<(), Divergence> {
        if self.mode == Mode::ChannelMemory && matches!(event, Event::Match { .. }) {
            return Ok(());
        }
        if let Some(r) = &mut self.replay {
            let at = r.next;
            match r.events.front() {
                Some(e) if *e == event => {
                    r.events.pop_front();
                    r.next += 1;
                    self.clock += 1;
                    if r.events.is_empty() {
                        self.replay = None;
                    }
                    return Ok(());
                }
                logged => return Err(Divergence { at, logged: logged.cloned(), now: event }),
            }
        }
        self.clock += 1;
        if self.mode == Mode::Causal {
            if let Some(h) = self.held.get_mut(self.rank as usize) {
                h.insert(self.clock, event.clone());
            }
        }
        self.unsent.push_back(event);
        Ok(())
    }

    /// Events to hand to the logger, if any.
    pub fn take_batch(&mut self) -> Option<ToLogger> {
        if let Some(b) = self.regather.pop_front() {
            return Some(b);
        }
        if self.unsent.is_empty() {
            return None;
        }
        let first = self.sent + 1;
        let events: Vec<Event> = self.unsent.drain(..).collect();
        self.sent += events.len() as u64;
        self.inflight.extend(events.iter().cloned());
        Some(ToLogger::Log { incarnation: self.incarnation, first, events })
    }

    /// The logger was started again: what it has not acknowledged, to hand over again.
    pub fn resend(&self) -> Option<ToLogger> {
        (!self.inflight.is_empty()).then(|| ToLogger::Log { incarnation: self.incarnation, first: self.acked + 1, events: self.inflight.iter().cloned().collect() })
    }

    /// Events recorded and not yet handed to the logger.
    pub fn unsent(&self) -> usize {
        self.unsent.len()
    }

    /// Pessimistic: whether a message may leave now (every event so far is stable).
    /// Always true in causal mode.
    pub fn may_send(&self) -> bool {
        self.mode == Mode::Causal || self.acked >= self.clock
    }

    /// A message from the logger. Returns the events to replay when it is the answer to a
    /// fetch (also given to [`RankLog::replay_from`] here).
    pub fn from_logger(&mut self, msg: FromLogger) {
        match msg {
            FromLogger::Ack { upto, stable } => {
                let before = self.acked;
                self.acked = self.acked.max(upto.min(self.sent));
                for _ in before..self.acked {
                    self.inflight.pop_front();
                }
                for (r, s) in stable.into_iter().enumerate() {
                    if let Some(x) = self.stable.get_mut(r) {
                        *x = (*x).max(s);
                    }
                }
                if let Some(x) = self.stable.get_mut(self.rank as usize) {
                    *x = (*x).max(self.acked);
                }
                // What is stable need not travel any more.
                for (r, h) in self.held.iter_mut().enumerate() {
                    let s = self.stable[r];
                    while h.first_key_value().is_some_and(|(k, _)| *k <= s) {
                        h.pop_first();
                    }
                }
            }
            FromLogger::Events { first, events } => {
                self.replay_from(first, events);
                self.merge_gathered();
            }
            // For the engine (it takes an image); nothing of the log changes.
            FromLogger::Checkpoint | FromLogger::ImageKept { .. } | FromLogger::ReportLog => {}
        }
    }

    /// Causal: the determinants to piggyback on a message to `dest` (nothing the
    /// destination is known to hold, nothing stable); they count as held by `dest` after.
    pub fn piggyback_for(&mut self, dest: u32) -> Vec<(u32, u64, Event)> {
        if self.mode != Mode::Causal {
            return Vec::new();
        }
        let mut out = Vec::new();
        let Some(known) = self.known.get_mut(dest as usize) else { return out };
        for (r, h) in self.held.iter().enumerate() {
            if r == dest as usize {
                // The destination's own determinants: it logged them itself, and if it
                // fails it gathers them back from here.
                continue;
            }
            let from = known[r].max(self.stable[r]);
            for (k, e) in h.range(from + 1..) {
                out.push((r as u32, *k, e.clone()));
                known[r] = *k;
            }
        }
        self.piggybacked += out.len() as u64;
        out
    }

    /// Causal: determinants that came with a message from `from`.
    pub fn piggybacked_from(&mut self, from: u32, dets: Vec<(u32, u64, Event)>) {
        for (r, k, e) in dets {
            let ru = r as usize;
            if ru >= self.held.len() || r == self.rank {
                continue;
            }
            if let Some(known) = self.known.get_mut(from as usize) {
                known[ru] = known[ru].max(k);
            }
            if k > self.stable[ru] {
                self.held[ru].insert(k, e);
            }
        }
    }

    /// Rank `rank` was started again: its new process holds no determinants of anyone.
    pub fn peer_restarted(&mut self, rank: u32) {
        if let Some(k) = self.known.get_mut(rank as usize) {
            k.iter_mut().for_each(|x| *x = 0);
        }
    }

    /// Causal: what this rank holds of rank `rank`'s determinants (for its recovery).
    pub fn held_of(&self, rank: u32) -> Vec<(u64, Event)> {
        self.held.get(rank as usize).map_or_else(Vec::new, |h| h.iter().map(|(k, e)| (*k, e.clone())).collect())
    }

    /// Causal: determinants of this rank held by another, for the replay. They extend what
    /// the logger gave, where it has not stored them yet; kept until the logger's answer is
    /// in if they arrive first.
    pub fn held_by_others(&mut self, dets: Vec<(u64, Event)>) {
        if !self.gather_open {
            return;
        }
        for (k, e) in dets {
            if k > self.clock {
                self.gathered.entry(k).or_insert(e);
            }
        }
        self.merge_gathered();
    }

    /// Extend the replay with the gathered determinants that follow it without a gap; they
    /// are not stable, so they are handed to the logger again, each run at its own event
    /// numbers (answers come from several ranks, so there may be several runs).
    fn merge_gathered(&mut self) {
        let start = self.clock + 1 + self.replay_left() as u64;
        let mut want = start;
        let mut run = Vec::new();
        while let Some(e) = self.gathered.remove(&want) {
            run.push(e);
            want += 1;
        }
        if run.is_empty() {
            return;
        }
        let next = self.clock + 1;
        match &mut self.replay {
            Some(r) => r.events.extend(run.iter().cloned()),
            None => self.replay = Some(Replay { events: run.iter().cloned().collect(), next, released: HashSet::new() }),
        }
        // `inflight` keeps `acked+1..=sent`, for a logger that restarts.
        let last = want - 1;
        if last > self.sent {
            let skip = (self.sent + 1).saturating_sub(start) as usize;
            self.inflight.extend(run.iter().skip(skip).cloned());
            self.sent = last;
        }
        self.regather.push_back(ToLogger::Log { incarnation: self.incarnation, first: start, events: run });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(from: u32, seq: u64) -> Event {
        Event::Match { from, seq }
    }

    #[test]
    fn pessimistic_sends_wait_for_acknowledgements() {
        let mut l = RankLog::new(Mode::Pessimistic, 0, 3);
        assert!(l.may_send());
        l.record(m(1, 1)).unwrap();
        assert!(!l.may_send());
        let b = l.take_batch().unwrap();
        assert_eq!(b, ToLogger::Log { incarnation: 0, first: 1, events: vec![m(1, 1)] });
        l.record(m(2, 1)).unwrap();
        l.from_logger(FromLogger::Ack { upto: 1, stable: vec![1, 0, 0] });
        assert!(!l.may_send(), "event 2 is not stable yet");
        let b = l.take_batch().unwrap();
        assert!(matches!(b, ToLogger::Log { first: 2, .. }));
        l.from_logger(FromLogger::Ack { upto: 2, stable: vec![2, 0, 0] });
        assert!(l.may_send());
    }

    #[test]
    fn replay_releases_in_logged_order_and_forces_outcomes() {
        let mut l = RankLog::new(Mode::Pessimistic, 0, 3);
        let fetch = l.restarted(1, 0);
        assert_eq!(fetch, ToLogger::Fetch { incarnation: 1, from: 1 });
        let probe = Event::Choice { call: 6, indices: vec![0], failed_before: 2, probed: Some((2, 1)) };
        let any = Event::Choice { call: 1, indices: vec![1], failed_before: 0, probed: None };
        l.from_logger(FromLogger::Events { first: 1, events: vec![m(2, 1), probe.clone(), m(1, 1), any.clone()] });
        assert!(l.may_send(), "replayed events are stable");
        assert_eq!(l.to_release(), Some((2, 1)));
        l.released((2, 1));
        assert_eq!(l.to_release(), None, "released once");
        assert_eq!(l.forced(6, 0), Some(Forced::Fail));
        l.record(m(2, 1)).unwrap();
        // The probe names a message released already, so nothing new to release.
        l.released((2, 1));
        assert_eq!(l.forced(6, 1), Some(Forced::Fail));
        assert_eq!(l.forced(6, 2), Some(Forced::Report { indices: vec![0], probed: Some((2, 1)) }));
        l.record(probe).unwrap();
        assert_eq!(l.to_release(), Some((1, 1)));
        l.released((1, 1));
        let err = l.record(m(2, 2)).unwrap_err();
        assert_eq!(err.at, 3);
        l.record(m(1, 1)).unwrap();
        assert_eq!(l.forced(1, 0), Some(Forced::Report { indices: vec![1], probed: None }));
        l.record(any).unwrap();
        assert!(!l.replaying());
        assert_eq!(l.forced(1, 0), None);
        // After the replay, events are numbered on and logged.
        l.record(m(1, 2)).unwrap();
        assert_eq!(l.take_batch(), Some(ToLogger::Log { incarnation: 1, first: 5, events: vec![m(1, 2)] }));
    }

    #[test]
    fn causal_piggybacks_only_what_the_destination_lacks() {
        let mut a = RankLog::new(Mode::Causal, 0, 3);
        a.record(m(1, 1)).unwrap();
        a.record(m(2, 1)).unwrap();
        assert!(a.may_send());
        let to2 = a.piggyback_for(2);
        assert_eq!(to2, vec![(0, 1, m(1, 1)), (0, 2, m(2, 1))]);
        assert!(a.piggyback_for(2).is_empty(), "known by rank 2 now");
        // Rank 2 passes them on to rank 1, which gets rank 0's determinants.
        let mut c = RankLog::new(Mode::Causal, 2, 3);
        c.piggybacked_from(0, to2);
        let to1 = c.piggyback_for(1);
        assert_eq!(to1.len(), 2);
        assert!(c.piggyback_for(0).is_empty(), "rank 0's own determinants do not go back to it");
        // Once stable they stop travelling.
        c.from_logger(FromLogger::Ack { upto: 0, stable: vec![2, 0, 0] });
        assert!(c.held_of(0).is_empty());
        // A recovering rank 0 gets them back from a holder.
        let mut b = RankLog::new(Mode::Causal, 1, 3);
        b.piggybacked_from(2, to1);
        let held = b.held_of(0);
        let mut r = RankLog::new(Mode::Causal, 0, 3);
        r.restarted(1, 0);
        r.from_logger(FromLogger::Events { first: 1, events: vec![] });
        r.held_by_others(held);
        assert_eq!(r.replay_left(), 2);
        assert_eq!(r.to_release(), Some((1, 1)));
        // They are logged again, so that they become stable.
        assert!(matches!(r.take_batch(), Some(ToLogger::Log { first: 1, .. })));
    }

    #[test]
    fn gathered_runs_from_several_ranks_keep_their_event_numbers() {
        // Rank 0 was stored up to event 2; rank 1 held its events up to 4, rank 2 up to 6.
        let e: Vec<Event> = (1..=7).map(|s| m(1, s)).collect();
        let mut logger = crate::logger::EventLogger::new(3);
        logger.handle(0, ToLogger::Log { incarnation: 0, first: 1, events: e[..2].to_vec() });
        while let Some((r, first, ev)) = logger.poll_persist() {
            let upto = first - 1 + ev.len() as u64;
            logger.stored(r, upto);
        }
        for (held_first, events_first) in [(false, true), (true, false)] {
            let mut r = RankLog::new(Mode::Causal, 0, 3);
            let fetch = r.restarted(1, 0);
            let mut l = crate::logger::EventLogger::recovered(vec![logger.events(0).to_vec(), vec![], vec![]]);
            l.handle(0, fetch);
            let answer = std::iter::from_fn(|| l.poll_transmit()).find(|t| matches!(t.message, FromLogger::Events { .. })).unwrap();
            if events_first && !held_first {
                r.from_logger(answer.message.clone());
            }
            r.held_by_others((3..=4).map(|k| (k, e[k as usize - 1].clone())).collect());
            r.held_by_others((3..=6).map(|k| (k, e[k as usize - 1].clone())).collect());
            if held_first {
                r.from_logger(answer.message);
            }
            r.close_gather();
            r.held_by_others(vec![(7, e[6].clone())]);
            assert_eq!(r.replay_left(), 6, "the logger's 2 and the gathered 4, not the late one");
            while let Some(b) = r.take_batch() {
                l.handle(0, b);
            }
            assert_eq!(l.events(0), &e[..6], "every run at its own numbers");
            for x in &e[..6] {
                r.record(x.clone()).unwrap();
            }
            r.record(e[6].clone()).unwrap();
            let Some(ToLogger::Log { first, .. }) = r.take_batch() else { panic!("no batch") };
            assert_eq!(first, 7);
        }
    }
}
