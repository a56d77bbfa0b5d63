//! Deterministic simulation of one communicator's [`FtComm`] machines on a virtual clock.
//!
//! One event queue ordered by (time, insertion number) drives every process. Messages go
//! through the wire encoding and take a random delay (so they reorder); messages still in
//! flight when their sender crashes may be lost; the failure detector tells each survivor
//! of a crash after its own random delay (so notices arrive at different times). Crashes
//! can be armed to strike after a process's next `k` sends, which kills a coordinator in
//! the middle of its PROPOSE or DECIDE round or a revoke initiator mid-flood. After every
//! step the [`check::Checker`] invariants run; a run is a pure function of its parameters.

pub mod check;
pub mod scenario;
#[cfg(test)]
mod tests;

/// The seeded generator every run draws from (shared by the protocol crates' simulations).
pub use steadfast_proto::rng;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::fmt::Write as _;
use std::time::Duration;

use check::{Checker, Failure, StartRecord};
use rng::Rng;

use crate::{Ballot, Config, Event, FtComm, Lock, Rank, Time};

/// Last observed (lock order, promise) of one process in one instance.
type Seen = ((u8, Ballot), Ballot);

/// Which collective a process runs in an instance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpKind {
    /// MPIX_Comm_agree.
    Agree,
    /// MPIX_Comm_shrink.
    Shrink,
}

/// When a process crashes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrashWhen {
    /// At this time.
    At(Time),
    /// From time `from`, after its next `sends` messages (in the middle of a multi-send);
    /// at `deadline` regardless.
    AfterSends {
        /// When the countdown starts.
        from: Time,
        /// Messages it may still send.
        sends: u32,
        /// Crash at this time if the budget was not used up.
        deadline: Time,
    },
    /// A false suspicion: at `at` some others are told it failed while it keeps running;
    /// the runtime kills it `kill_after` later (then everyone is told).
    Suspected {
        /// When the suspicion reaches the detectors.
        at: Time,
        /// Delay until the kill.
        kill_after: Duration,
    },
}

/// A scheduled crash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Crash {
    /// Who crashes.
    pub who: Rank,
    /// When.
    pub when: CrashWhen,
}

/// Everything that defines one simulated run.
#[derive(Clone, Debug)]
pub struct Params {
    /// Communicator size.
    pub n: u32,
    /// Machine configuration.
    pub cfg: Config,
    /// The collectives every process runs, in order.
    pub ops: Vec<OpKind>,
    /// Start the next operation without waiting for the previous decision (iagree /
    /// ishrink), up to `cfg.max_outstanding` at once.
    pub nonblocking: bool,
    /// Message delay range (uniform).
    pub delay: (Duration, Duration),
    /// Failure notice delay range, per survivor (uniform).
    pub notice: (Duration, Duration),
    /// Pause between two operations of one process (uniform).
    pub think: (Duration, Duration),
    /// First operation starts uniformly in `0..=spread`.
    pub spread: Duration,
    /// Crashes.
    pub crashes: Vec<Crash>,
    /// MPIX_Comm_revoke calls: (time, rank).
    pub revokes: Vec<(Time, Rank)>,
    /// Per mille: before an operation a process acknowledges failures (all, or a prefix).
    pub ack_pm: u64,
    /// Per mille: a message between two live processes is lost (needs resends).
    pub loss_pm: u64,
    /// Per mille: a message still in flight when its sender crashes is lost.
    pub lost_from_dead_pm: u64,
    /// Check the termination bound (delays bounded, no loss).
    pub check_bound: bool,
}

/// Results of a run that passed every check.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// Messages delivered or lost, per kind.
    pub sent: [u64; crate::KINDS],
    /// Instances run.
    pub instances: u64,
    /// Processes that crashed.
    pub crashed: u32,
    /// Largest (last survivor decision − time everything it needs was in place) over
    /// instances, in maximum message delays.
    pub max_rounds: f64,
    /// Virtual time at the end.
    pub end: Time,
    /// Time of the last decision.
    pub last_decision: Time,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Action {
    Deliver {
        from: Rank,
        to: Rank,
        bytes: Vec<u8>,
    },
    Notice {
        to: Rank,
        dead: Rank,
    },
    Crash {
        who: Rank,
    },
    Suspect {
        who: Rank,
    },
    Arm {
        who: Rank,
        sends: u32,
    },
    Start {
        who: Rank,
    },
    Revoke {
        who: Rank,
    },
    Timer {
        who: Rank,
        at: Time,
    },
}

#[derive(Debug, PartialEq, Eq)]
struct Item {
    at: Time,
    n: u64,
    action: Action,
}

impl Ord for Item {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.n).cmp(&(other.at, other.n))
    }
}

impl PartialOrd for Item {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

struct Proc {
    ft: FtComm,
    alive: bool,
    /// Sends left before an armed crash strikes.
    budget: Option<u32>,
    /// Operations started so far (the next one is `ops[started]`).
    started: usize,
    /// A `Start` is scheduled.
    scheduled: bool,
    /// Non-blocking mode with a full window: the next start waits for a decision.
    blocked: bool,
    timer: Option<Time>,
}

/// The simulated system.
pub struct Sim {
    p: Params,
    now: Time,
    queue: BinaryHeap<Reverse<Item>>,
    n_items: u64,
    procs: Vec<Proc>,
    rng: Rng,
    /// The invariant checker (public for tests that inspect it).
    pub chk: Checker,
    trace: Option<VecDeque<String>>,
    trace_cap: usize,
    sent: [u64; crate::KINDS],
    /// Last seen (lock order, promise) per process and instance.
    seen: Vec<Vec<Option<Seen>>>,
    /// Processes that took an input in the current step.
    touched: Vec<Rank>,
    /// Instances decided somewhere, as of the previous step.
    first_decisions: usize,
}

/// Steps after which a run is declared stuck.
const MAX_STEPS: u64 = 2_000_000;

impl Sim {
    /// A system for `p`, its randomness from `seed`; `trace` keeps the last that many steps
    /// for a failure report.
    pub fn new(p: Params, seed: u64, trace: usize) -> Result<Sim, Failure> {
        let mut procs = Vec::new();
        for r in 0..p.n {
            let ft =
                FtComm::new(p.cfg, 77, p.n, r).map_err(|e| Failure::new(format!("new: {e}")))?;
            procs.push(Proc {
                ft,
                alive: true,
                budget: None,
                started: 0,
                scheduled: true,
                blocked: false,
                timer: None,
            });
        }
        let mut sim = Sim {
            chk: Checker::new(p.n, p.ops.clone()),
            p,
            now: Time::ZERO,
            queue: BinaryHeap::new(),
            n_items: 0,
            procs,
            rng: Rng::new(seed),
            trace: (trace > 0).then(VecDeque::new),
            trace_cap: trace,
            sent: [0; crate::KINDS],
            seen: Vec::new(),
            touched: Vec::new(),
            first_decisions: 0,
        };
        sim.seen = vec![vec![None; sim.p.ops.len()]; sim.p.n as usize];
        for r in 0..sim.p.n {
            let at = sim.rng.duration(Duration::ZERO, sim.p.spread);
            sim.schedule(at, Action::Start { who: r });
        }
        for c in sim.p.crashes.clone() {
            match c.when {
                CrashWhen::At(t) => sim.schedule(t, Action::Crash { who: c.who }),
                CrashWhen::AfterSends {
                    from,
                    sends,
                    deadline,
                } => {
                    sim.schedule(from, Action::Arm { who: c.who, sends });
                    sim.schedule(deadline, Action::Crash { who: c.who });
                }
                CrashWhen::Suspected { at, kill_after } => {
                    sim.schedule(at, Action::Suspect { who: c.who });
                    sim.schedule(at + kill_after, Action::Crash { who: c.who });
                }
            }
        }
        for (t, r) in sim.p.revokes.clone() {
            sim.schedule(t, Action::Revoke { who: r });
        }
        Ok(sim)
    }

    fn schedule(&mut self, at: Time, action: Action) {
        self.n_items += 1;
        self.queue.push(Reverse(Item {
            at,
            n: self.n_items,
            action,
        }));
    }

    fn log(&mut self, f: impl FnOnce() -> String) {
        if let Some(t) = &mut self.trace {
            if t.len() == self.trace_cap {
                t.pop_front();
            }
            t.push_back(format!("{:>12?} {}", self.now, f()));
        }
    }

    /// The kept trace, oldest first.
    pub fn trace(&self) -> String {
        let mut s = String::new();
        if let Some(t) = &self.trace {
            for l in t {
                let _ = writeln!(s, "{l}");
            }
        }
        s
    }

    /// Runs to quiescence (or the step limit), then checks the end-state properties.
    pub fn run(&mut self) -> Result<Outcome, Failure> {
        let mut steps = 0u64;
        while let Some(Reverse(item)) = self.queue.pop() {
            steps += 1;
            if steps > MAX_STEPS {
                return Err(Failure::new(format!(
                    "no quiescence after {MAX_STEPS} steps (t={:?})",
                    self.now
                )));
            }
            self.now = item.at;
            self.step(item.action)?;
            self.chk.after_step(self.now)?;
            self.check_locks()?;
        }
        let alive: Vec<bool> = self.procs.iter().map(|p| p.alive).collect();
        let revoked: Vec<bool> = self.procs.iter().map(|p| p.ft.is_revoked()).collect();
        let max_delay = self.p.delay.1;
        let rounds = self
            .chk
            .at_end(&alive, &revoked, self.p.check_bound.then_some(max_delay))?;
        for (r, p) in self.procs.iter().enumerate() {
            let s = p.ft.stats();
            if s.conflicts != 0 {
                return Err(Failure::new(format!(
                    "rank {r} heard conflicting decisions"
                )));
            }
            if s.out_of_window != 0 {
                return Err(Failure::new(format!(
                    "rank {r} dropped {} messages outside its window",
                    s.out_of_window
                )));
            }
            if s.refused != 0 {
                return Err(Failure::new(format!(
                    "rank {r} refused {} messages",
                    s.refused
                )));
            }
            let revokes = s.sent[crate::Body::Revoke.kind_index()];
            if revokes > self.p.n as u64 - 1 {
                return Err(Failure::new(format!("rank {r} sent {revokes} REVOKEs")));
            }
        }
        Ok(Outcome {
            sent: self.sent,
            instances: self.p.ops.len() as u64,
            crashed: alive.iter().filter(|a| !**a).count() as u32,
            max_rounds: rounds,
            end: self.now,
            last_decision: self.chk.last_decision(),
        })
    }

    /// Paxos invariants on every live process's acceptor state, after every step:
    /// promises and locks only grow, an accepted ballot never exceeds the promise, and
    /// once an instance is decided every live process that started it holds the decided
    /// value (the heart of the uniform-agreement argument in `docs/ulfm.md`).
    fn check_locks(&mut self) -> Result<(), Failure> {
        // Locks change only where an input landed; a new decision concerns everyone.
        let decided = (0..self.p.ops.len())
            .filter(|s| self.chk.decided_value(*s).is_some())
            .count();
        let all = decided != self.first_decisions;
        self.first_decisions = decided;
        let touched = std::mem::take(&mut self.touched);
        for (r, p) in self.procs.iter().enumerate() {
            // A suspected process is doomed: the runtime kills it; it need not hold anything.
            if !p.alive
                || self.chk.is_suspected(r as Rank)
                || !(all || touched.contains(&(r as Rank)))
            {
                continue;
            }
            let a = p.ft.agreement();
            for s in 0..self.p.ops.len() {
                let (Some(lock), Some(promised)) = (a.lock(s as u64), a.promised(s as u64)) else {
                    continue;
                };
                let cur = (lock.rank(), promised);
                if let Some((l, pr)) = self.seen[r][s] {
                    if cur.0 < l || cur.1 < pr {
                        return Err(Failure::new(format!(
                            "rank {r} #{s}: lock/promise went back from {:?} to {cur:?}",
                            (l, pr)
                        )));
                    }
                }
                self.seen[r][s] = Some(cur);
                if let Lock::Accepted { ballot, .. } = lock {
                    if *ballot > promised {
                        return Err(Failure::new(format!(
                            "rank {r} #{s}: accepted ballot {ballot} above its promise {promised}"
                        )));
                    }
                }
                if let Some(v) = self.chk.decided_value(s) {
                    let held = match lock {
                        Lock::Free => None,
                        Lock::Accepted { value, .. } | Lock::Decided(value) => Some(value),
                    };
                    if held.is_none() && self.chk.has_started(r as Rank, s) {
                        return Err(Failure::new(format!(
                            "rank {r} #{s}: alive, started, holds nothing after the decision"
                        )));
                    }
                    if held.is_some_and(|h| h != v) {
                        return Err(Failure::new(format!(
                            "rank {r} #{s}: holds {held:?} after the decision {v:?}"
                        )));
                    }
                }
            }
        }
        Ok(())
    }

    fn step(&mut self, a: Action) -> Result<(), Failure> {
        match a {
            Action::Deliver { from, to, bytes } => {
                if !self.procs[to as usize].alive {
                    return Ok(());
                }
                let from_dead = !self.procs[from as usize].alive;
                if from_dead && self.rng.chance(self.p.lost_from_dead_pm) {
                    self.log(|| format!("{from}->{to} lost (sender dead)"));
                    return Ok(());
                }
                if self.p.loss_pm > 0 && self.rng.chance(self.p.loss_pm) {
                    self.log(|| format!("{from}->{to} lost"));
                    return Ok(());
                }
                let now = self.now;
                let p = &mut self.procs[to as usize];
                if let Err(e) = p.ft.handle_bytes(now, from, &bytes) {
                    return Err(Failure::new(format!(
                        "rank {to} refused a message from {from}: {e}"
                    )));
                }
                self.log(|| {
                    let m = crate::Message::decode(&bytes, u32::MAX);
                    format!("{from}->{to} {:?}", m.map(|m| m.body))
                });
                self.drain(to)?;
            }
            Action::Notice { to, dead } => {
                if self.procs[to as usize].alive {
                    self.log(|| format!("{to} learns {dead} failed"));
                    let now = self.now;
                    self.chk.notice(now);
                    self.procs[to as usize]
                        .ft
                        .process_failed(now, dead)
                        .map_err(|e| Failure::new(format!("process_failed: {e}")))?;
                    self.drain(to)?;
                }
            }
            Action::Crash { who } => self.crash(who),
            Action::Suspect { who } => {
                if self.procs[who as usize].alive {
                    self.log(|| format!("{who} SUSPECTED (still running)"));
                    self.chk.suspected(who);
                    for q in 0..self.p.n {
                        if q != who && self.procs[q as usize].alive && self.rng.chance(600) {
                            let d = self.rng.duration(self.p.notice.0, self.p.notice.1);
                            self.schedule(self.now + d, Action::Notice { to: q, dead: who });
                        }
                    }
                }
            }
            Action::Arm { who, sends } => {
                if self.procs[who as usize].alive {
                    self.log(|| format!("{who} armed to crash after {sends} sends"));
                    if sends == 0 {
                        self.crash(who);
                    } else {
                        self.procs[who as usize].budget = Some(sends);
                    }
                }
            }
            Action::Start { who } => self.start_next(who)?,
            Action::Revoke { who } => {
                if self.procs[who as usize].alive {
                    self.log(|| format!("{who} revokes"));
                    self.chk.revoke_called(who);
                    let now = self.now;
                    self.procs[who as usize].ft.revoke(now);
                    self.drain(who)?;
                }
            }
            Action::Timer { who, at } => {
                let p = &mut self.procs[who as usize];
                if p.alive && p.timer == Some(at) {
                    p.timer = None;
                    let now = self.now;
                    p.ft.handle_timeout(now);
                    self.drain(who)?;
                }
            }
        }
        Ok(())
    }

    fn crash(&mut self, who: Rank) {
        if !self.procs[who as usize].alive {
            return;
        }
        self.log(|| format!("{who} CRASHES"));
        self.procs[who as usize].alive = false;
        self.chk.crashed(who, self.now);
        for q in 0..self.p.n {
            if q != who && self.procs[q as usize].alive {
                let d = self.rng.duration(self.p.notice.0, self.p.notice.1);
                self.schedule(self.now + d, Action::Notice { to: q, dead: who });
            }
        }
    }

    fn start_next(&mut self, who: Rank) -> Result<(), Failure> {
        let now = self.now;
        let ack_pm = self.p.ack_pm;
        let k = self.p.ops.len();
        let p = &mut self.procs[who as usize];
        p.scheduled = false;
        if !p.alive || p.started >= k {
            return Ok(());
        }
        if !p.ft.can_start() {
            // Wait for a decision (non-blocking mode with a full window).
            p.blocked = true;
            return Ok(());
        }
        // Sometimes acknowledge failures first (all of them, or a prefix).
        if self.rng.chance(ack_pm) {
            let len = p.ft.get_failed().len();
            if self.rng.chance(500) {
                p.ft.failure_ack();
            } else {
                let k = self.rng.below(len as u64 + 2) as usize;
                p.ft.ack_failed(k);
            }
        }
        let op = self.p.ops[p.started];
        let flag = if self.rng.chance(700) {
            -1
        } else {
            !(1i32 << self.rng.below(8))
        };
        let cid = self.rng.below(1000);
        // What the machine contributes: shrink ignores the flag, agree the context id.
        let (rflag, rcid) = match op {
            OpKind::Agree => (flag, 0),
            OpKind::Shrink => (-1, cid),
        };
        let rec = StartRecord {
            at: now,
            flag: rflag,
            cid: rcid,
            failed: p.ft.failures().failed_set().clone(),
            acked: p.ft.failures().acked_set(),
        };
        let seq = match op {
            OpKind::Agree => p.ft.start_agree(now, flag),
            OpKind::Shrink => p.ft.start_shrink(now, cid),
        }
        .map_err(|e| Failure::new(format!("rank {who} start: {e}")))?;
        if seq != p.started as u64 {
            return Err(Failure::new(format!(
                "rank {who} got seq {seq}, expected {}",
                p.started
            )));
        }
        p.started += 1;
        self.log(|| format!("{who} starts {op:?} #{seq} flag={flag:#x} cid={cid}"));
        self.chk.started(who, seq, op, rec)?;
        if self.p.nonblocking {
            self.schedule_next_start(who);
        }
        self.drain(who)
    }

    fn schedule_next_start(&mut self, who: Rank) {
        let p = &self.procs[who as usize];
        if p.scheduled || p.started >= self.p.ops.len() {
            return;
        }
        let d = self.rng.duration(self.p.think.0, self.p.think.1);
        self.procs[who as usize].scheduled = true;
        self.schedule(self.now + d, Action::Start { who });
    }

    /// Collects what `who` produced after an input: events first (a decision happens at
    /// the input), then messages, one by one, so an armed crash can cut a multi-send.
    fn drain(&mut self, who: Rank) -> Result<(), Failure> {
        let now = self.now;
        self.touched.push(who);
        let mut decided = false;
        while let Some(ev) = self.procs[who as usize].ft.poll_event() {
            self.log(|| format!("{who} event {ev:?}"));
            if let Event::Agreed { seq, .. } | Event::Shrunk { seq, .. } = &ev {
                let value = self.procs[who as usize].ft.decision(*seq).cloned();
                // A decision teaches the failures it names.
                if let Some(v) = &value {
                    let known = self.procs[who as usize].ft.failures().failed_set();
                    // (A suspected process may see itself named; it is about to be killed.)
                    let named: crate::RankSet = v.failed.iter().filter(|r| *r != who).collect();
                    if !named.is_subset(known) {
                        return Err(Failure::new(format!(
                            "rank {who} #{seq}: decision names {:?} failed, bookkeeping has {known:?}",
                            v.failed
                        )));
                    }
                }
                self.chk.decided(who, now, &ev, value)?;
                decided = true;
            } else {
                self.chk.event(who, now, &ev)?;
            }
        }
        loop {
            let p = &mut self.procs[who as usize];
            if !p.alive {
                break;
            }
            let Some(t) = p.ft.poll_transmit() else { break };
            if let Some(b) = &mut p.budget {
                if *b == 0 {
                    self.crash(who);
                    break;
                }
                *b -= 1;
            }
            self.sent[t.message.body.kind_index()] += 1;
            let d = self.rng.duration(self.p.delay.0, self.p.delay.1);
            let bytes = t.message.encode();
            self.schedule(
                now + d,
                Action::Deliver {
                    from: who,
                    to: t.to,
                    bytes,
                },
            );
        }
        let p = &mut self.procs[who as usize];
        if !p.alive {
            return Ok(());
        }
        if let Some(t) = p.ft.poll_timeout() {
            if p.timer != Some(t) {
                p.timer = Some(t);
                self.schedule(t.max(now), Action::Timer { who, at: t });
            }
        }
        if decided {
            let p = &mut self.procs[who as usize];
            if !self.p.nonblocking || p.blocked {
                // Blocking: the next operation follows the decision; non-blocking with a
                // full window: a slot is free again.
                p.blocked = false;
                self.schedule_next_start(who);
            }
        }
        Ok(())
    }
}
