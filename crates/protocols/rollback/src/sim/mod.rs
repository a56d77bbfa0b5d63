//! A deterministic simulation of a job under coordinated checkpointing: `n` ranks (each a
//! [`RankMachine`] under a simulated host) and one [`Scheduler`] run a deterministic
//! application over FIFO channels (one per ordered pair, some seeds with slow links; the
//! order of delivery across channels is chosen by a seeded generator, never the order
//! within one: the transport is FIFO and reliable per pair, and markers rely on it). Time is
//! an input: every step advances a simulated clock; nothing reads a real one.
//!
//! Faults, at seeded points: crashes of one rank or several at once (up to every rank), also
//! while a DONE is on its way, right at a commit, right after a rollback starts and while
//! a ROLLED_BACK is on its way (a dead rank's last reports may still arrive); survivors restored in place or, as
//! `--ft coordinated` does, every rank killed and started again; image and record writes
//! that are slow, fail or never finish; restores that hang; committed images that go bad
//! on storage (the host checks them before relaying a ROLLBACK and falls back to the
//! previous commit or the start, [`Scheduler::fall_back`]; a restore that meets one exits);
//! whole-job restarts from what the host persisted. Waves are periodic, on demand, or both.
//! Stable storage survives crashes.
//!
//! The application is a seeded program per rank in rounds of sends and receives from named
//! sources; the values it sends depend on everything it received before, so its result
//! does not depend on the interleaving but does on every message arriving once, in order,
//! and on every rank resuming from the right state. Its fault-free run (the program alone,
//! without the protocol) gives the value of every message and every rank's final result.
//! A process image is the application's whole state, including the messages delivered but
//! not yet received (the library's unexpected queue).
//!
//! Checked after every step: the committed wave never goes back (except by a fallback) and
//! its images and records, and those of its fallback, are on storage for every rank;
//! incarnations of the scheduler and of every rank never go back and no rank is ahead of
//! the scheduler; every live rank's channel counters match its application state; every
//! delivered message is of the receiver's incarnation, the next one of its channel (none
//! lost, none twice) and carries the fault-free run's value; every message sent carries the
//! fault-free run's value; an early `handle_timeout` does nothing. At every commit: every
//! rank reported DONE for that wave in the current incarnation, and the global checkpoint
//! is a consistent cut whose records hold exactly the messages in transit. At every resume:
//! every rank restored the same wave as the same incarnation, never from a damaged image.
//! On deletions: a rank never discards a committed wave and deletes older images only on a
//! commit the scheduler made. At the end, once everything settled: every message was
//! delivered exactly once, no image of an aborted or abandoned wave is left, and every
//! rank's result equals the fault-free run's.
//!
//! Replay one seed: `STEADFAST_SEED=<seed> cargo test --release -p steadfast-rollback --lib
//! sim::tests::sweep -- --nocapture` (a failure prints this line with its reason, its
//! parameters and the last steps); more seeds: `STEADFAST_SIM_SEEDS=<n>`.

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use crate::rank::Event as REvent;
use crate::scheduler::{AbortReason, Event as SEvent};
use crate::wire::{Body, ChannelRecord, Message};
use crate::{Config, Ident, Peer, Rank, RankMachine, Scheduler, Time, Verdict, Wave, UNNUMBERED};
use steadfast_proto::Rng;

/// Shape of a run.
#[derive(Clone, Debug)]
pub struct Params {
    pub ranks: u32,
    pub steps: u32,
    pub max_crashes: u32,
    /// Chance per step (per mille) of a crash at a random point.
    pub crash_per_mille: u64,
    /// Chance (per mille) of a crash right when a global checkpoint commits, and right
    /// after a rollback starts.
    pub crash_at_commit_per_mille: u64,
    pub crash_at_restore_per_mille: u64,
    /// Chance (per mille) that an image write never finishes, or fails.
    pub stuck_per_mille: u64,
    /// Chance per step (per mille) that the whole job is killed and restarted from what
    /// the scheduler persisted (`steadfast restart`).
    pub job_restart_per_mille: u64,
    pub fail_per_mille: u64,
    /// Chance (per mille) that a crash takes several ranks at once (up to all of them).
    pub group_crash_per_mille: u64,
    /// Every failure kills and restarts every rank (as `--ft coordinated` does), not only
    /// the failed one; the others restore in place otherwise.
    pub respawn_all: bool,
    /// The host persists the incarnation at every `RollingBack` (as the scheduler's docs
    /// ask), not only with the commit record (as `--ft coordinated` does): a whole-job
    /// restart then never reuses an incarnation.
    pub persist_at_rollback: bool,
    /// Chance per step (per mille) of a checkpoint on demand (`MPIX_Checkpoint`,
    /// `steadfast checkpoint`); some seeds have no periodic waves at all.
    pub on_demand_per_mille: u64,
    /// Chance per step (per mille) that a stored image of the committed wave goes bad.
    pub damage_per_mille: u64,
    /// Rounds of the application's program.
    pub rounds: u32,
    pub config: Config,
}

impl Params {
    /// Parameters drawn from `seed`.
    pub fn from_seed(seed: u64) -> Params {
        let mut r = Rng::new(seed.wrapping_mul(0x9e37_79b9));
        let mut p = Params {
            ranks: r.range(1, 6) as u32,
            steps: r.range(1000, 6000) as u32,
            max_crashes: r.range(0, 4) as u32,
            crash_per_mille: r.range(0, 6),
            crash_at_commit_per_mille: r.range(0, 300),
            crash_at_restore_per_mille: r.range(0, 300),
            stuck_per_mille: r.range(0, 30),
            fail_per_mille: r.range(0, 20),
            job_restart_per_mille: if r.chance(200) { r.range(1, 3) } else { 0 },
            config: Config {
                interval: Some(ms(r.range(5, 60))),
                wave_timeout: ms(r.range(20, 200)),
                restore_timeout: ms(r.range(20, 200)),
            },
            group_crash_per_mille: 0,
            damage_per_mille: 0,
            respawn_all: false,
            persist_at_rollback: true,
            on_demand_per_mille: 0,
            rounds: 0,
        };
        p.group_crash_per_mille = r.range(0, 400);
        p.damage_per_mille = if r.chance(300) { r.range(1, 8) } else { 0 };
        p.respawn_all = r.chance(300);
        p.persist_at_rollback = r.chance(700);
        p.on_demand_per_mille = if r.chance(300) { r.range(1, 20) } else { 0 };
        if r.chance(150) {
            p.config.interval = None;
            p.on_demand_per_mille = r.range(1, 20);
        }
        // About as long as the faulty part of the run: faults hit the program while it runs
        // (and some seeds finish it early and only checkpoint and roll back).
        let per_round = 2 * p.ranks.saturating_sub(1).max(1);
        p.rounds = (p.steps / 5 / (p.ranks * per_round)).max(1) * r.range(50, 150) as u32 / 100 + 1;
        p
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A run that broke an invariant.
#[derive(Debug)]
pub struct Failure {
    pub seed: u64,
    pub reason: String,
    pub trace: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "seed {}: {}\nlast steps:\n{}",
            self.seed, self.reason, self.trace
        )
    }
}

/// What a run did (summed over seeds to show that the sweep exercised every path).
#[derive(Clone, Copy, Debug, Default)]
pub struct Outcome {
    pub app_messages: u64,
    pub commits: u64,
    pub in_transit_committed: u64,
    pub aborted_timeout: u64,
    pub aborted_storage: u64,
    pub aborted_failure: u64,
    pub rollbacks: u64,
    pub restore_timeouts: u64,
    pub crashes: u64,
    pub crashes_at_commit: u64,
    pub crashes_during_restore: u64,
    /// Crashes while a DONE was on its way to the scheduler.
    pub crashes_after_report: u64,
    pub job_restarts: u64,
    pub redelivered: u64,
    pub stale_dropped: u64,
    pub late_markers: u64,
    /// Crashes that took several ranks at once.
    pub group_crashes: u64,
    /// Operations of the application's program executed (again after rollbacks).
    pub program_ops: u64,
    /// Runs in which a fault hit the program before it finished.
    pub faults_mid_program: u64,
    /// Waves started on demand.
    pub on_demand: u64,
    /// Images of a committed wave damaged on storage.
    pub damaged: u64,
    /// Rollbacks that fell back to an earlier commit because an image was damaged.
    pub fallbacks: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Packet {
    App { ident: Ident, payload: Vec<u8> },
    Ctrl(Vec<u8>),
}

/// One operation of a rank's program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    /// Send the next message to this rank (non-blocking, like an eager `MPI_Send`).
    Send(Rank),
    /// Receive the next message from this rank (blocks until one was delivered, like
    /// `MPI_Recv` with a named source).
    Recv(Rank),
}

/// The application every rank runs: a deterministic program per rank, in rounds (in each
/// round a rank first sends its messages of the round, then receives those of the round,
/// from named sources in a seeded order), so it never deadlocks and its result does not
/// depend on the order of delivery across channels. The values it sends are computed from
/// everything it received before, so a message lost, duplicated or re-ordered within its
/// channel, or a rank resuming from the wrong state, changes the result.
struct Program {
    ops: Vec<Vec<Op>>,
    /// The fault-free run (the program run on its own, without the protocol or faults):
    /// the value of every message, `values[from][to][seq - 1]` ...
    values: Vec<Vec<Vec<u64>>>,
    /// ... and every rank's final result.
    results: Vec<u64>,
}

impl Program {
    fn new(n: u32, rounds: u32, seed: u64) -> Program {
        let mut r = Rng::new(seed ^ 0x6170_705f_7072_6f67);
        let mut ops = vec![Vec::new(); n as usize];
        for _ in 0..rounds {
            // count[i][j]: messages from i to j this round.
            let mut count = vec![vec![0u32; n as usize]; n as usize];
            for (i, row) in count.iter_mut().enumerate() {
                for (j, c) in row.iter_mut().enumerate() {
                    if i != j {
                        *c = [0, 0, 1, 1, 2][r.below(5) as usize];
                    }
                }
            }
            for me in 0..n as usize {
                for (j, &c) in count[me].iter().enumerate() {
                    for _ in 0..c {
                        ops[me].push(Op::Send(j as Rank));
                    }
                }
                let mut recvs: Vec<Rank> = (0..n as usize)
                    .flat_map(|i| std::iter::repeat_n(i as Rank, count[i][me] as usize))
                    .collect();
                // Seeded order of the receives of the round (Fisher-Yates).
                for k in (1..recvs.len()).rev() {
                    recvs.swap(k, r.below(k as u64 + 1) as usize);
                }
                ops[me].extend(recvs.into_iter().map(Op::Recv));
            }
        }
        let mut prog = Program {
            ops,
            values: vec![vec![Vec::new(); n as usize]; n as usize],
            results: Vec::new(),
        };
        prog.run_fault_free(n);
        prog
    }

    /// Runs the program on its own: every send goes straight into its receiver's queue.
    fn run_fault_free(&mut self, n: u32) {
        let mut apps: Vec<App> = (0..n).map(|_| App::new(n)).collect();
        loop {
            let mut progress = false;
            for me in 0..n {
                loop {
                    match apps[me as usize].step(me, &self.ops[me as usize]) {
                        Step::Sent { to, seq, value } => {
                            self.values[me as usize][to as usize].push(value);
                            let dst = &mut apps[to as usize];
                            dst.recv[me as usize] = seq;
                            dst.inbox[me as usize].push_back(value);
                        }
                        Step::Received => {}
                        Step::Blocked | Step::Done => break,
                    }
                    progress = true;
                }
            }
            if !progress {
                break;
            }
        }
        assert!(
            (0..n as usize).all(|r| apps[r].pc == self.ops[r].len()),
            "the generated program deadlocks"
        );
        self.results = apps.iter().map(|a| a.acc).collect();
    }

    fn len(&self, r: Rank) -> usize {
        self.ops[r as usize].len()
    }
}

/// What one step of a program did.
enum Step {
    Sent { to: Rank, seq: u64, value: u64 },
    Received,
    Blocked,
    Done,
}

fn mix(a: u64, b: u64) -> u64 {
    let mut s = a ^ b.rotate_left(29);
    steadfast_proto::rng::splitmix64(&mut s)
}

/// The state of one rank's application (what its process image holds): its program
/// counter, its result so far, what it sent and received on each channel, and the messages
/// delivered to it but not yet received by the program (the library's unexpected queue).
#[derive(Clone, Debug, PartialEq, Eq)]
struct App {
    /// The engine's note of the last committed wave it heard of (process memory, so part of
    /// the image): on the next commit it deletes the waves before it, keeping it as the
    /// fallback.
    kept: Wave,
    pc: usize,
    acc: u64,
    sent: Vec<u64>,
    recv: Vec<u64>,
    inbox: Vec<VecDeque<u64>>,
    /// Unnumbered packets (rendezvous traffic) sent and received, counted by the
    /// application itself (the protocol does not number them).
    csent: Vec<u64>,
    crecv: Vec<u64>,
}

impl App {
    fn new(n: u32) -> App {
        App {
            kept: 0,
            pc: 0,
            acc: 0,
            sent: vec![0; n as usize],
            recv: vec![0; n as usize],
            inbox: vec![VecDeque::new(); n as usize],
            csent: vec![0; n as usize],
            crecv: vec![0; n as usize],
        }
    }

    /// The next operation of the program, if it can go on.
    fn step(&mut self, me: Rank, ops: &[Op]) -> Step {
        let Some(&op) = ops.get(self.pc) else {
            return Step::Done;
        };
        match op {
            Op::Send(to) => {
                let seq = self.sent[to as usize] + 1;
                self.sent[to as usize] = seq;
                let value = mix(
                    self.acc,
                    (u64::from(me) << 48) ^ (u64::from(to) << 40) ^ seq,
                );
                self.acc = mix(self.acc, value);
                self.pc += 1;
                Step::Sent { to, seq, value }
            }
            Op::Recv(from) => {
                let Some(v) = self.inbox[from as usize].pop_front() else {
                    return Step::Blocked;
                };
                self.acc = mix(self.acc ^ 0x5a5a, v ^ u64::from(from));
                self.pc += 1;
                Step::Received
            }
        }
    }
}

/// The bytes of the `k`-th unnumbered packet from `from` to `to`.
fn ctl_payload(from: Rank, to: Rank, k: u64) -> Vec<u8> {
    let mut v = vec![0xDA];
    v.extend_from_slice(&(from as u64 * 1_000_003 + to as u64 * 7_919 + k).to_le_bytes());
    v
}

/// The bytes of message `seq` from `from` to `to` carrying `value`.
fn payload(from: Rank, to: Rank, seq: u64, value: u64) -> Vec<u8> {
    let len = (seq % 7) as usize;
    let mut v = Vec::with_capacity(16 + len);
    v.extend_from_slice(&(from as u64 * 1_000_003 + to as u64 * 7_919 + seq).to_le_bytes());
    v.extend_from_slice(&value.to_le_bytes());
    v.extend_from_slice(&vec![seq as u8; len]);
    v
}

/// The value message `seq` from `from` to `to` carries in the fault-free run.
fn reference(prog: &Program, from: Rank, to: Rank, seq: u64) -> Res<u64> {
    seq.checked_sub(1)
        .and_then(|k| prog.values[from as usize][to as usize].get(k as usize))
        .copied()
        .ok_or_else(|| {
            format!("r{from} -> r{to} message #{seq}: the fault-free run sends no such message")
        })
}

#[derive(Default)]
struct Stored {
    image: Option<App>,
    record: Option<ChannelRecord>,
    /// The image went bad on storage after it was written (its checksum no longer matches).
    damaged: bool,
}

struct Node {
    alive: bool,
    life: u32,
    /// Highest incarnation this rank was ever in (any life).
    max_inc: u16,
    /// The wave and incarnation of its last restore.
    restored: Option<(Wave, u16)>,
    machine: RankMachine,
    app: App,
    /// Images and records being written (the fork's child / the writer), by wave.
    writing_image: BTreeMap<Wave, App>,
    writing_record: BTreeMap<Wave, ChannelRecord>,
}

#[derive(Clone, Copy, Debug)]
enum Timed {
    ImageWritten {
        rank: Rank,
        life: u32,
        wave: Wave,
        ok: bool,
    },
    RecordWritten {
        rank: Rank,
        life: u32,
        wave: Wave,
        ok: bool,
    },
    RestoreDone {
        rank: Rank,
        life: u32,
        wave: Wave,
    },
    /// The launcher notices the death of `rank`, relaunches it and tells the scheduler.
    Notice {
        rank: Rank,
    },
}

/// A host that breaks its side of the contract on purpose, to show that the checks catch it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sabotage {
    /// Re-delivers one packet fewer than the restore handed back.
    SkipRedelivery,
    /// Re-delivers the first packet handed back twice.
    DoubleRedelivery,
    /// Takes process images without the messages delivered but not yet received.
    ImageWithoutQueue,
    /// Delivers what the rank machine said to drop.
    IgnoreDrop,
    /// Never checks images before a rollback (no fallback from a damaged one).
    NoFallback,
}

/// The simulated job.
pub struct Sim {
    sabotage: Option<Sabotage>,
    p: Params,
    seed: u64,
    rng: Rng,
    now: Time,
    n: u32,
    nodes: Vec<Node>,
    sched: Scheduler,
    /// Channel `src * (n + 1) + dst`; node `n` is the scheduler.
    chans: Vec<VecDeque<Packet>>,
    /// Relative speed of each channel (all 1 unless the seed has slow links).
    speed: Vec<u64>,
    storage: BTreeMap<(Rank, Wave), Stored>,
    timed: Vec<(Time, u64, Timed)>,
    timed_seq: u64,
    crashes: u32,
    /// Crashes due at the end of this step (decided while a report left).
    crash_soon: u32,
    /// Faults allowed (off while the run settles at the end).
    faults: bool,
    last_committed: Wave,
    prog: Program,
    /// DONE reports the scheduler received: (incarnation, wave, rank).
    reported: BTreeSet<(u16, Wave, Rank)>,
    /// Every wave the scheduler ever committed.
    committed_ever: BTreeSet<Wave>,
    /// Highest incarnation the scheduler was ever in.
    max_inc: u16,
    /// The launcher's committed wave before the last one: where a rollback falls back to
    /// when an image of the last one is damaged (the start once it was used).
    previous: Option<Wave>,
    /// The launcher's last committed wave.
    lcommitted: Wave,
    /// What the host persisted for a whole-job restart: the committed wave, the last wave
    /// started and the incarnation.
    persisted: (Wave, Wave, u16),
    out: Outcome,
    trace: VecDeque<String>,
}

type Res<T = ()> = Result<T, String>;

impl Sim {
    pub fn new(p: Params, seed: u64) -> Sim {
        let n = p.ranks;
        let nodes = (0..n)
            .map(|r| Node {
                alive: true,
                life: 0,
                max_inc: 0,
                restored: None,
                machine: RankMachine::new(r, n),
                app: App::new(n),
                writing_image: BTreeMap::new(),
                writing_record: BTreeMap::new(),
            })
            .collect();
        let sched = Scheduler::new(n, p.config, Duration::ZERO);
        Sim {
            sabotage: None,
            rng: Rng::new(seed),
            seed,
            now: Duration::ZERO,
            n,
            nodes,
            sched,
            chans: vec![VecDeque::new(); ((n + 1) * (n + 1)) as usize],
            speed: {
                let mut r = Rng::new(seed ^ 0x6c69_6e6b);
                let slow = r.chance(400);
                (0..(n + 1) * (n + 1))
                    .map(|_| if slow { r.range(1, 20) } else { 1 })
                    .collect()
            },
            storage: BTreeMap::new(),
            timed: Vec::new(),
            timed_seq: 0,
            crashes: 0,
            crash_soon: 0,
            faults: true,
            last_committed: 0,
            prog: Program::new(n, p.rounds, seed),
            reported: BTreeSet::new(),
            committed_ever: BTreeSet::from([0]),
            max_inc: 0,
            previous: None,
            lcommitted: 0,
            persisted: (0, 0, 0),
            out: Outcome::default(),
            trace: VecDeque::new(),
            p,
        }
    }

    /// The same job with a host that breaks the contract as `s` says.
    pub fn sabotaged(p: Params, seed: u64, s: Sabotage) -> Sim {
        let mut sim = Sim::new(p, seed);
        sim.sabotage = Some(s);
        sim
    }

    fn log(&mut self, f: impl FnOnce() -> String) {
        if self.trace.len() >= 60 {
            self.trace.pop_front();
        }
        let line = format!("{:>9.3}ms {}", self.now.as_secs_f64() * 1e3, f());
        self.trace.push_back(line);
    }

    fn fail(&self, reason: String) -> Failure {
        Failure {
            seed: self.seed,
            reason,
            trace: self.trace.iter().cloned().collect::<Vec<_>>().join("\n"),
        }
    }

    fn chan(&self, src: u32, dst: u32) -> usize {
        (src * (self.n + 1) + dst) as usize
    }

    fn schedule(&mut self, after: Duration, t: Timed) {
        self.timed_seq += 1;
        self.timed.push((self.now + after, self.timed_seq, t));
    }

    /// Runs the seeded scenario, then lets the job settle and checks the end state.
    pub fn run(mut self) -> Result<Outcome, Failure> {
        for _ in 0..self.p.steps {
            self.step().map_err(|e| self.fail(e))?;
        }
        self.faults = false;
        let mut settle = 0u32;
        loop {
            if self.settled() {
                break;
            }
            settle += 1;
            if settle > 200_000 {
                let progs: Vec<String> = (0..self.n)
                    .map(|r| {
                        format!(
                            "r{r} at {}/{}",
                            self.nodes[r as usize].app.pc,
                            self.prog.len(r)
                        )
                    })
                    .collect();
                return Err(self.fail(format!(
                    "the job does not settle (livelock, lost wakeup, or a program blocked on a message that never comes: {})",
                    progs.join(", ")
                )));
            }
            self.step().map_err(|e| self.fail(e))?;
        }
        self.check_end().map_err(|e| self.fail(e))?;
        for node in &self.nodes {
            let s = node.machine.stats();
            self.out.stale_dropped += s.stale;
            self.out.late_markers += s.late_markers;
        }
        Ok(self.out)
    }

    fn settled(&self) -> bool {
        self.sched.is_idle()
            && self.nodes.iter().enumerate().all(|(r, n)| {
                n.alive && n.machine.is_running() && n.app.pc == self.prog.len(r as Rank)
            })
            && self.chans.iter().all(|c| c.is_empty())
            && !self
                .timed
                .iter()
                .any(|(_, _, t)| matches!(t, Timed::Notice { .. } | Timed::RestoreDone { .. }))
    }

    fn step(&mut self) -> Res {
        self.now += Duration::from_micros(self.rng.range(0, 300));
        self.fire_timers()?;
        // The host may call `handle_timeout` early (any wakeup): nothing may happen then.
        if self.rng.chance(20) && self.sched.poll_timeout().is_none_or(|t| t > self.now) {
            self.sched.handle_timeout(self.now);
            if self.sched.poll_transmit().is_some() || self.sched.poll_event().is_some() {
                return Err(format!(
                    "the scheduler acted on handle_timeout({:?}) before its timeout {:?}",
                    self.now,
                    self.sched.poll_timeout()
                ));
            }
        }
        if self.sched.poll_timeout().is_some_and(|t| t <= self.now) {
            self.sched.handle_timeout(self.now);
            self.drain_sched()?;
        }
        let choice = self.rng.below(100);
        if choice < 55 {
            self.deliver_one()?;
        } else if choice < 90 {
            self.app_step()?;
        } else if !self.faults && self.chans.iter().all(|c| c.is_empty()) {
            // Settling: nothing to deliver, jump to the next timer.
            let next = self
                .timed
                .iter()
                .map(|t| t.0)
                .chain(self.sched.poll_timeout())
                .min();
            if let Some(t) = next {
                self.now = self.now.max(t);
            }
        }
        if self.faults
            && self.crashes < self.p.max_crashes
            && self.rng.chance(self.p.crash_per_mille)
        {
            self.crash_group();
        }
        if self.rng.chance(self.p.on_demand_per_mille) {
            if let Some(w) = self.sched.checkpoint_now(self.now) {
                self.out.on_demand += 1;
                self.log(|| format!("checkpoint {w} on demand"));
            }
            self.drain_sched()?;
        }
        if self.faults && self.rng.chance(self.p.damage_per_mille) {
            let (c, r) = (
                self.sched.committed(),
                self.rng.below(self.n as u64) as Rank,
            );
            if let Some(s) = self
                .storage
                .get_mut(&(r, c))
                .filter(|s| c > 0 && !s.damaged)
            {
                s.damaged = true;
                self.out.damaged += 1;
                self.log(|| format!("image of r{r} wave {c} DAMAGED"));
            }
        }
        if self.faults && self.rng.chance(self.p.job_restart_per_mille) {
            self.job_restart()?;
        }
        for _ in 0..std::mem::take(&mut self.crash_soon) {
            self.crash_group();
        }
        self.check_step()
    }

    /// Every process of the job dies (node loss, wall-time limit); the job is started again
    /// from what the scheduler persisted: its committed wave, last wave and incarnation.
    fn job_restart(&mut self) -> Res {
        self.out.job_restarts += 1;
        self.log(|| "WHOLE JOB KILLED".to_string());
        for c in &mut self.chans {
            c.clear();
        }
        self.timed.retain(|t| !matches!(t.2, Timed::Notice { .. }));
        let (committed, last, inc) = self.persisted;
        if !self.p.persist_at_rollback {
            // The restarted job may be in an incarnation an earlier rollback used: nothing
            // of the killed processes is left to mix with it.
            self.max_inc = 0;
            for node in &mut self.nodes {
                node.max_inc = 0;
            }
        }
        // Reports of the killed job do not count for waves numbered again.
        self.reported.clear();
        for r in 0..self.n {
            self.nodes[r as usize].life += 1;
            self.relaunch(r);
        }
        // The launcher is started again too: it knows the persisted commit, not the one
        // before it.
        self.previous = None;
        self.lcommitted = committed;
        self.sched = Scheduler::restart(self.n, self.p.config, self.now, committed, last, inc);
        self.drain_sched()
    }

    fn fire_timers(&mut self) -> Res {
        loop {
            let due = self
                .timed
                .iter()
                .enumerate()
                .filter(|(_, t)| t.0 <= self.now)
                .min_by_key(|(_, t)| (t.0, t.1))
                .map(|(i, _)| i);
            let Some(i) = due else { return Ok(()) };
            let (_, _, t) = self.timed.swap_remove(i);
            self.timer(t)?;
        }
    }

    fn timer(&mut self, t: Timed) -> Res {
        match t {
            Timed::ImageWritten {
                rank,
                life,
                wave,
                ok,
            } => {
                let node = &mut self.nodes[rank as usize];
                if !node.alive || node.life != life {
                    return Ok(());
                }
                let Some(img) = node.writing_image.remove(&wave) else {
                    return Ok(());
                };
                if ok {
                    self.storage.entry((rank, wave)).or_default().image = Some(img);
                }
                self.log(|| format!("r{rank} image {wave} written ok={ok}"));
                self.nodes[rank as usize].machine.image_stored(wave, ok);
                self.drain_rank(rank)
            }
            Timed::RecordWritten {
                rank,
                life,
                wave,
                ok,
            } => {
                let node = &mut self.nodes[rank as usize];
                if !node.alive || node.life != life {
                    return Ok(());
                }
                let Some(rec) = node.writing_record.remove(&wave) else {
                    return Ok(());
                };
                // Through its encoding, as the engine stores it.
                let rec = ChannelRecord::decode(&rec.encode()).map_err(|e| {
                    format!("r{rank}: own record of wave {wave} does not decode: {e}")
                })?;
                if ok {
                    self.storage.entry((rank, wave)).or_default().record = Some(rec);
                }
                self.nodes[rank as usize].machine.record_stored(wave, ok);
                self.drain_rank(rank)
            }
            Timed::RestoreDone { rank, life, wave } => {
                let node = &self.nodes[rank as usize];
                if !node.alive || node.life != life || node.machine.restoring() != Some(wave) {
                    return Ok(());
                }
                self.restore(rank, wave)
            }
            Timed::Notice { rank } => {
                if self.nodes[rank as usize].alive {
                    // Started again already, with every other rank (`respawn_all`).
                    return Ok(());
                }
                self.relaunch(rank);
                if self.p.respawn_all {
                    // As the engine does it: every other process is killed and started
                    // again from its image too, the scheduler goes on.
                    for r in 0..self.n {
                        if r != rank {
                            self.crash(r);
                            self.relaunch(r);
                        }
                    }
                }
                self.log(|| format!("launcher: r{rank} relaunched, scheduler told"));
                self.sched.rank_failed(self.now, rank);
                self.drain_sched()
            }
        }
    }

    fn restore(&mut self, rank: Rank, wave: Wave) -> Res {
        let (image, record) = if wave == 0 {
            (App::new(self.n), ChannelRecord::initial(rank, self.n))
        } else {
            let s = self.storage.get(&(rank, wave));
            match s {
                Some(Stored {
                    image: Some(i),
                    record: Some(r),
                    damaged: false,
                }) => (i.clone(), r.clone()),
                Some(Stored { damaged: true, .. }) => {
                    // Went bad after the launcher checked it: the restore fails its
                    // checksum and the process exits; the next rollback falls back.
                    self.log(|| {
                        format!("r{rank} finds its image of wave {wave} damaged and exits")
                    });
                    self.crash(rank);
                    return Ok(());
                }
                _ => {
                    return Err(format!(
                        "r{rank} must restore committed wave {wave} but its image or record is gone"
                    ))
                }
            }
        };
        let node = &mut self.nodes[rank as usize];
        node.app = image;
        let replay = node
            .machine
            .restored(wave, record)
            .map_err(|e| format!("r{rank} restore of wave {wave}: {e}"))?;
        node.restored = Some((wave, replay.incarnation));
        let mut redeliver = replay.redeliver.clone();
        match self.sabotage {
            Some(Sabotage::SkipRedelivery) => {
                redeliver.pop();
            }
            Some(Sabotage::DoubleRedelivery) if !redeliver.is_empty() => {
                redeliver.insert(1, redeliver[0].clone());
            }
            _ => {}
        }
        let k = redeliver.len();
        for m in &redeliver {
            deliver_app(&self.prog, rank, &mut node.app, m.from, &m.bytes)
                .map_err(|e| format!("re-delivery after restore of wave {wave}: {e}"))?;
        }
        self.out.redelivered += k as u64;
        let node = &self.nodes[rank as usize];
        let next_recv: Vec<u64> = node.app.recv.iter().map(|r| r + 1).collect();
        let next_send: Vec<u64> = node.app.sent.iter().map(|s| s + 1).collect();
        if replay.next_receive != next_recv || replay.next_send != next_send {
            return Err(format!(
                "r{rank} replay of wave {wave}: resume points {:?}/{:?} do not match the restored state {:?}/{:?}",
                replay.next_send, replay.next_receive, next_send, next_recv
            ));
        }
        self.log(|| format!("r{rank} restored wave {wave}, {k} re-delivered"));
        self.drain_rank(rank)
    }

    /// A new process for rank `r`: it knows nothing until the scheduler's ROLLBACK.
    fn relaunch(&mut self, r: Rank) {
        let node = &mut self.nodes[r as usize];
        node.alive = true;
        node.machine = RankMachine::relaunched(r, self.n);
        node.app = App::new(self.n);
        node.restored = None;
        node.writing_image.clear();
        node.writing_record.clear();
    }

    /// One rank crashes, or several at once (up to every rank of the job).
    fn crash_group(&mut self) {
        if self.rng.chance(self.p.group_crash_per_mille) && self.n > 1 {
            let k = self.rng.range(2, self.n as u64);
            let mut ranks: Vec<Rank> = (0..self.n).collect();
            for i in (1..ranks.len()).rev() {
                ranks.swap(i, self.rng.below(i as u64 + 1) as usize);
            }
            self.out.group_crashes += 1;
            for &r in &ranks[..k as usize] {
                self.crash(r);
            }
        } else {
            let r = self.rng.below(self.n as u64) as Rank;
            self.crash(r);
        }
    }

    fn crash(&mut self, r: Rank) {
        let node = &mut self.nodes[r as usize];
        if !node.alive {
            return;
        }
        node.alive = false;
        node.life += 1;
        self.crashes += 1;
        if (0..self.n).any(|r| self.nodes[r as usize].app.pc < self.prog.len(r)) {
            self.out.faults_mid_program = 1;
        }
        self.out.crashes += 1;
        // What was on its way to the dead process is gone with its connections; what it
        // sent may still arrive (from an incarnation about to be rolled back).
        for src in 0..=self.n {
            let c = self.chan(src, r);
            self.chans[c].clear();
        }
        // Its last reports to the scheduler may or may not get through (written to the
        // socket before the death, or lost with it).
        if self.rng.chance(500) {
            let c = self.chan(r, self.n);
            self.chans[c].clear();
        }
        let delay = Duration::from_micros(self.rng.range(100, 20_000));
        self.schedule(delay, Timed::Notice { rank: r });
        self.log(|| format!("CRASH r{r}"));
    }

    fn deliver_one(&mut self) -> Res {
        // A channel with packets, chosen by its speed: slow links keep packets in flight
        // across cuts.
        let total: u64 = (0..self.chans.len())
            .filter(|&c| !self.chans[c].is_empty())
            .map(|c| self.speed[c])
            .sum();
        if total == 0 {
            return Ok(());
        }
        let mut x = self.rng.below(total);
        let Some(c) = (0..self.chans.len())
            .filter(|&c| !self.chans[c].is_empty())
            .find(|&c| {
                if x < self.speed[c] {
                    true
                } else {
                    x -= self.speed[c];
                    false
                }
            })
        else {
            return Ok(());
        };
        let Some(pkt) = self.chans[c].pop_front() else {
            return Ok(());
        };
        let (src, dst) = (c as u32 / (self.n + 1), c as u32 % (self.n + 1));
        if dst == self.n {
            let Packet::Ctrl(bytes) = pkt else {
                return Err("application message to the scheduler".into());
            };
            if let Ok(Message {
                incarnation,
                body: Body::Done { wave, .. },
            }) = Message::decode(&bytes)
            {
                self.reported.insert((incarnation, wave, src));
            }
            self.sched
                .handle_bytes(self.now, src, &bytes)
                .map_err(|e| format!("scheduler cannot decode from r{src}: {e}"))?;
            return self.drain_sched();
        }
        let node = &mut self.nodes[dst as usize];
        if !node.alive {
            return Ok(());
        }
        match pkt {
            Packet::App { ident, payload } => {
                let v = node.machine.arrived(ident, &payload);
                let ignore = self.sabotage == Some(Sabotage::IgnoreDrop) && node.machine.is_live();
                if v == Verdict::Deliver || ignore {
                    if ident.incarnation != node.machine.incarnation() {
                        return Err(format!(
                            "r{dst} (incarnation {}) delivered a packet of incarnation {}",
                            node.machine.incarnation(),
                            ident.incarnation
                        ));
                    }
                    deliver_app(&self.prog, dst, &mut node.app, ident, &payload)?;
                }
            }
            Packet::Ctrl(bytes) => {
                let from = if src == self.n {
                    Peer::Scheduler
                } else {
                    Peer::Rank(src)
                };
                node.machine
                    .handle_bytes(from, &bytes)
                    .map_err(|e| format!("r{dst} cannot decode from {from:?}: {e}"))?;
                self.drain_rank(dst)?;
            }
        }
        Ok(())
    }

    /// One rank's application goes on by one operation of its program (or, now and then,
    /// sends an unnumbered packet: the DATA of a rendezvous).
    fn app_step(&mut self) -> Res {
        let me = self.rng.below(self.n as u64) as Rank;
        let node = &mut self.nodes[me as usize];
        if !node.alive || !node.machine.is_running() {
            return Ok(());
        }
        if self.faults && self.n >= 2 && self.rng.chance(200) {
            let mut to = self.rng.below(self.n as u64 - 1) as Rank;
            if to >= me {
                to += 1;
            }
            if node.app.sent[to as usize] == 0 {
                return Ok(());
            }
            let k = node.app.csent[to as usize] + 1;
            node.app.csent[to as usize] = k;
            let bytes = ctl_payload(me, to, k);
            return self.app_packet(me, to, UNNUMBERED, bytes);
        }
        match node.app.step(me, &self.prog.ops[me as usize]) {
            Step::Sent { to, seq, value } => {
                self.out.program_ops += 1;
                let expect = reference(&self.prog, me, to, seq)?;
                if value != expect {
                    return Err(format!(
                        "r{me} sends message #{seq} to r{to} with value {value:#x}, the fault-free run {expect:#x} (resumed from a wrong state)"
                    ));
                }
                self.app_packet(me, to, seq, payload(me, to, seq, value))
            }
            Step::Received => {
                self.out.program_ops += 1;
                Ok(())
            }
            Step::Blocked | Step::Done => Ok(()),
        }
    }

    /// The engine sends an application packet of `from` (through the door's `sent` hook).
    fn app_packet(&mut self, from: Rank, to: Rank, seq: u64, bytes: Vec<u8>) -> Res {
        let node = &mut self.nodes[from as usize];
        let ident = Ident {
            world: from,
            incarnation: node.machine.incarnation(),
            seq,
        };
        node.machine.sent(to, ident);
        let c = self.chan(from, to);
        self.chans[c].push_back(Packet::App {
            ident,
            payload: bytes,
        });
        self.out.app_messages += 1;
        self.drain_rank(from)
    }

    fn drain_rank(&mut self, r: Rank) -> Res {
        loop {
            let node = &mut self.nodes[r as usize];
            if let Some(t) = node.machine.poll_transmit() {
                let dst = match t.to {
                    Peer::Scheduler => self.n,
                    Peer::Rank(j) => j,
                };
                // A crash while a report is on its way: the last DONE of a wave (before
                // the commit point) or a ROLLED_BACK while others still restore.
                if self.faults && self.crashes < self.p.max_crashes {
                    match t.message.body {
                        Body::Done { .. }
                            if self.rng.chance(self.p.crash_at_commit_per_mille / 2) =>
                        {
                            self.out.crashes_after_report += 1;
                            self.crash_soon += 1;
                        }
                        Body::RolledBack { .. }
                            if self.rng.chance(self.p.crash_at_restore_per_mille / 2) =>
                        {
                            self.out.crashes_during_restore += 1;
                            self.crash_soon += 1;
                        }
                        _ => {}
                    }
                }
                let c = self.chan(r, dst);
                self.chans[c].push_back(Packet::Ctrl(t.message.encode()));
                continue;
            }
            let Some(ev) = node.machine.poll_event() else {
                return Ok(());
            };
            let life = node.life;
            match ev {
                REvent::TakeImage { wave } => {
                    // The fork: the image is the state at the cut, written in the background.
                    let mut image = node.app.clone();
                    if self.sabotage == Some(Sabotage::ImageWithoutQueue) {
                        image.inbox.iter_mut().for_each(VecDeque::clear);
                    }
                    node.writing_image.insert(wave, image);
                    let stuck = self.faults && self.rng.chance(self.p.stuck_per_mille);
                    let ok = !(self.faults && self.rng.chance(self.p.fail_per_mille));
                    if !stuck {
                        let d = Duration::from_micros(self.rng.range(0, 15_000));
                        self.schedule(
                            d,
                            Timed::ImageWritten {
                                rank: r,
                                life,
                                wave,
                                ok,
                            },
                        );
                    }
                    self.log(|| format!("r{r} cut of wave {wave} (stuck={stuck} ok={ok})"));
                }
                REvent::StoreRecord { record } => {
                    let wave = record.wave;
                    node.writing_record.insert(wave, record);
                    let ok = !(self.faults && self.rng.chance(self.p.fail_per_mille));
                    let d = Duration::from_micros(self.rng.range(0, 5_000));
                    self.schedule(
                        d,
                        Timed::RecordWritten {
                            rank: r,
                            life,
                            wave,
                            ok,
                        },
                    );
                }
                REvent::Discard { wave } => {
                    node.writing_image.remove(&wave);
                    node.writing_record.remove(&wave);
                    if self.committed_ever.contains(&wave) {
                        return Err(format!("r{r} told to discard committed wave {wave}"));
                    }
                    self.storage.remove(&(r, wave));
                }
                REvent::Committed { wave } => {
                    if !self.committed_ever.contains(&wave) {
                        return Err(format!(
                            "r{r} deletes images older than wave {wave}, which the scheduler never committed"
                        ));
                    }
                    // As the engine: waves before the previous commit go, the previous one
                    // stays as the fallback.
                    let keep = std::mem::replace(&mut node.app.kept, wave);
                    self.storage.retain(|&(rank, w), _| rank != r || w >= keep);
                }
                REvent::Restore { wave, incarnation } => {
                    node.writing_image.clear();
                    node.writing_record.clear();
                    // Waves after the one restored will never commit; older ones stay (the
                    // fallback should that one be damaged) until the next commit.
                    self.storage.retain(|&(rank, w), _| rank != r || w <= wave);
                    // Sometimes the restore hangs: the scheduler's restore timeout starts over.
                    if !(self.faults && self.rng.chance(self.p.stuck_per_mille * 4)) {
                        let d = Duration::from_micros(self.rng.range(100, 10_000));
                        self.schedule(
                            d,
                            Timed::RestoreDone {
                                rank: r,
                                life,
                                wave,
                            },
                        );
                    }
                    self.log(|| format!("r{r} restoring wave {wave} as incarnation {incarnation}"));
                }
                REvent::Resume { incarnation } => {
                    self.log(|| format!("r{r} resumes in incarnation {incarnation}"));
                }
            }
        }
    }

    fn drain_sched(&mut self) -> Res {
        let mut crash_now = 0;
        loop {
            if let Some(t) = self.sched.poll_transmit() {
                let Peer::Rank(j) = t.to else {
                    return Err("scheduler sends to the scheduler".into());
                };
                if self.nodes[j as usize].alive {
                    let c = self.chan(self.n, j);
                    self.chans[c].push_back(Packet::Ctrl(t.message.encode()));
                }
                continue;
            }
            let Some(ev) = self.sched.poll_event() else {
                break;
            };
            self.log(|| format!("scheduler: {ev:?}"));
            match ev {
                SEvent::Committed { wave, in_transit } => {
                    let inc = self.sched.incarnation();
                    if let Some(r) = (0..self.n).find(|&r| !self.reported.contains(&(inc, wave, r)))
                    {
                        return Err(format!(
                            "wave {wave} committed before r{r} reported DONE in incarnation {inc}"
                        ));
                    }
                    self.committed_ever.insert(wave);
                    if self.lcommitted > 0 {
                        self.previous = Some(self.lcommitted);
                    }
                    self.lcommitted = wave;
                    self.persisted = (wave, self.sched.last_wave(), self.sched.incarnation());
                    self.out.commits += 1;
                    self.out.in_transit_committed += in_transit;
                    self.check_cut(wave)?;
                    if self.faults && self.rng.chance(self.p.crash_at_commit_per_mille) {
                        crash_now += 1;
                        self.out.crashes_at_commit += 1;
                    }
                }
                SEvent::WaveAborted { reason, .. } => match reason {
                    AbortReason::Timeout { .. } => self.out.aborted_timeout += 1,
                    AbortReason::StorageFailed { .. } => self.out.aborted_storage += 1,
                    AbortReason::RankFailed { .. } => self.out.aborted_failure += 1,
                },
                SEvent::RollingBack { wave, incarnation } => {
                    self.out.rollbacks += 1;
                    if self.p.persist_at_rollback {
                        self.persisted.2 = incarnation;
                    }
                    // Damaged or missing (a restart from a commit record written before a
                    // fallback: the images of the wave fallen back from are gone).
                    let damaged = self.sabotage != Some(Sabotage::NoFallback)
                        && wave > 0
                        && (0..self.n).any(|r| {
                            self.storage.get(&(r, wave)).is_none_or(|s| {
                                s.damaged || s.image.is_none() || s.record.is_none()
                            })
                        });
                    if damaged {
                        // The launcher checks the images before any rank is told to restore
                        // them: the ROLLBACK to the damaged wave is never relayed, and the
                        // job falls back to the commit before it (or the start).
                        for j in 0..self.n {
                            let c = self.chan(self.n, j);
                            self.chans[c].retain(|p| !is_rollback(p, incarnation));
                        }
                        let to = self.previous.take().filter(|&p| p < wave).unwrap_or(0);
                        self.log(|| format!("launcher: an image of wave {wave} is damaged, falling back to {to}"));
                        self.out.fallbacks += 1;
                        self.lcommitted = to;
                        self.sched.fall_back(self.now, to);
                        if self.sched.committed() != to {
                            return Err(format!(
                                "fall_back to {to} left the committed wave at {}",
                                self.sched.committed()
                            ));
                        }
                        // The one way the committed wave may go back.
                        self.last_committed = to;
                        continue;
                    }
                    if self.faults && self.rng.chance(self.p.crash_at_restore_per_mille) {
                        crash_now += 1;
                        self.out.crashes_during_restore += 1;
                    }
                }
                SEvent::RestoreTimedOut { .. } => self.out.restore_timeouts += 1,
                SEvent::GaveUp => return Err("scheduler gave up".into()),
                SEvent::Resumed { wave, incarnation } => {
                    // Every rank resumes from the same committed wave, in the same incarnation.
                    for (r, node) in self.nodes.iter().enumerate() {
                        if node.restored != Some((wave, incarnation)) {
                            return Err(format!(
                                "resumed from wave {wave} in incarnation {incarnation}, but r{r}'s last restore was {:?}",
                                node.restored
                            ));
                        }
                    }
                }
                SEvent::WaveStarted { .. } => {}
            }
        }
        for _ in 0..crash_now {
            self.crash_group();
        }
        Ok(())
    }

    /// The global checkpoint `wave` is a consistent cut and its records hold exactly the
    /// messages in transit.
    fn check_cut(&self, wave: Wave) -> Res {
        let mut imgs = Vec::new();
        for r in 0..self.n {
            match self.storage.get(&(r, wave)) {
                Some(Stored {
                    image: Some(i),
                    record: Some(c),
                    ..
                }) => imgs.push((i, c)),
                _ => {
                    return Err(format!(
                        "wave {wave} committed without r{r}'s image and record"
                    ))
                }
            }
        }
        for i in 0..self.n {
            for j in 0..self.n {
                if i == j {
                    continue;
                }
                let (img_i, rec_i) = imgs[i as usize];
                let (img_j, rec_j) = imgs[j as usize];
                let sent = img_i.sent[j as usize];
                let recv = img_j.recv[i as usize];
                if recv > sent {
                    return Err(format!(
                        "wave {wave} is not a consistent cut: r{j} received {recv} messages from r{i}, which had sent only {sent}"
                    ));
                }
                if rec_i.sent[j as usize] != sent || rec_j.received[i as usize] != recv {
                    return Err(format!(
                        "wave {wave}: records disagree with images on r{i}->r{j}"
                    ));
                }
                let (csent, crecv) = (img_i.csent[j as usize], img_j.crecv[i as usize]);
                if crecv > csent {
                    return Err(format!(
                        "wave {wave} is not a consistent cut: r{j} received {crecv} unnumbered packets from r{i}, which had sent only {csent}"
                    ));
                }
                let ctl: Vec<&Vec<u8>> = rec_j
                    .in_transit
                    .iter()
                    .filter(|m| m.from.world == i && m.from.seq == UNNUMBERED)
                    .map(|m| &m.bytes)
                    .collect();
                let expect_ctl: Vec<Vec<u8>> =
                    (crecv + 1..=csent).map(|k| ctl_payload(i, j, k)).collect();
                if ctl.len() != expect_ctl.len()
                    || ctl.iter().zip(&expect_ctl).any(|(a, b)| *a != b)
                {
                    return Err(format!(
                        "wave {wave}: unnumbered packets in transit r{i}->r{j}: recorded {}, expected {}..={csent}",
                        ctl.len(),
                        crecv + 1
                    ));
                }
                let recorded: Vec<_> = rec_j
                    .in_transit
                    .iter()
                    .filter(|m| m.from.world == i && m.from.seq != UNNUMBERED)
                    .collect();
                let expect: Vec<u64> = (recv + 1..=sent).collect();
                let got: Vec<u64> = recorded.iter().map(|m| m.from.seq).collect();
                if got != expect {
                    return Err(format!(
                        "wave {wave}: in transit r{i}->r{j} recorded {got:?}, expected {expect:?} (lost or duplicated)"
                    ));
                }
                for m in recorded {
                    let value = reference(&self.prog, i, j, m.from.seq)?;
                    if m.bytes != payload(i, j, m.from.seq, value) {
                        return Err(format!(
                            "wave {wave}: recorded bytes of r{i}->r{j} #{} differ",
                            m.from.seq
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    fn check_step(&mut self) -> Res {
        let c = self.sched.committed();
        if c < self.last_committed {
            return Err(format!(
                "committed wave went back from {} to {c}",
                self.last_committed
            ));
        }
        self.last_committed = c;
        let inc = self.sched.incarnation();
        if inc < self.max_inc {
            return Err(format!(
                "scheduler's incarnation went back from {} to {inc}",
                self.max_inc
            ));
        }
        self.max_inc = inc;
        // The fallback of the committed wave is still on storage for every rank.
        if let Some(p) = self.previous.filter(|&p| p > 0) {
            if let Some(r) = (0..self.n).find(|&r| {
                !self
                    .storage
                    .get(&(r, p))
                    .is_some_and(|s| s.image.is_some() && s.record.is_some())
            }) {
                return Err(format!(
                    "r{r}'s images of wave {p}, the fallback of committed wave {c}, were deleted"
                ));
            }
        }
        for r in 0..self.n {
            let node = &mut self.nodes[r as usize];
            if node.alive && node.machine.is_live() {
                let mi = node.machine.incarnation();
                if mi < node.max_inc || mi > inc {
                    return Err(format!(
                        "r{r} is in incarnation {mi}: it was in {} before, the scheduler is in {inc}",
                        node.max_inc
                    ));
                }
                node.max_inc = mi;
            }
        }
        for r in 0..self.n {
            if c > 0 {
                match self.storage.get(&(r, c)) {
                    Some(Stored {
                        image: Some(_),
                        record: Some(_),
                        ..
                    }) => {}
                    _ => {
                        return Err(format!(
                            "committed wave {c}: r{r}'s image or record was deleted"
                        ))
                    }
                }
            }
            let node = &self.nodes[r as usize];
            if node.alive && node.machine.is_live() {
                if node.machine.sent_counts() != node.app.sent.as_slice()
                    || node.machine.received_counts() != node.app.recv.as_slice()
                {
                    return Err(format!(
                        "r{r}: protocol counters {:?}/{:?} differ from the application's {:?}/{:?}",
                        node.machine.sent_counts(),
                        node.machine.received_counts(),
                        node.app.sent,
                        node.app.recv
                    ));
                }
                let s = node.machine.stats();
                if s.fifo_violations > 0 || s.unexpected > 0 {
                    return Err(format!("r{r}: {s:?}"));
                }
            }
        }
        Ok(())
    }

    fn check_end(&self) -> Res {
        for i in 0..self.n {
            // The end-to-end result: what the program computed equals the fault-free run.
            let app = &self.nodes[i as usize].app;
            if app.acc != self.prog.results[i as usize] || app.inbox.iter().any(|q| !q.is_empty()) {
                return Err(format!(
                    "r{i}'s result {:#x} differs from the fault-free run's {:#x} (or messages are left over: {:?})",
                    app.acc, self.prog.results[i as usize], app.inbox
                ));
            }
            for j in 0..self.n {
                let sent = self.nodes[i as usize].app.sent[j as usize];
                let recv = self.nodes[j as usize].app.recv[i as usize];
                let csent = self.nodes[i as usize].app.csent[j as usize];
                let crecv = self.nodes[j as usize].app.crecv[i as usize];
                if csent != crecv {
                    return Err(format!(
                        "after settling r{i} sent {csent} unnumbered packets to r{j}, which received {crecv}"
                    ));
                }
                if sent != recv {
                    return Err(format!(
                        "after settling r{i} sent {sent} messages to r{j}, which received {recv}"
                    ));
                }
            }
            // Every image of an aborted or abandoned wave was deleted; the committed one
            // is kept (and perhaps the one before it: the fallback).
            let kept: Vec<Wave> = self
                .storage
                .range((i, 0)..(i + 1, 0))
                .map(|(k, _)| k.1)
                .collect();
            let c = self.sched.committed();
            if kept
                .iter()
                .any(|w| !self.committed_ever.contains(w) || *w > c)
                || (c > 0 && !kept.contains(&c))
            {
                return Err(format!(
                    "r{i} keeps images of waves {kept:?} after settling, committed {c}"
                ));
            }
        }
        let s = self.sched.stats();
        if s.unexpected > 0 {
            return Err(format!("scheduler: {s:?}"));
        }
        Ok(())
    }
}

/// The application receives message `from` (checked: the next of its channel, right bytes).
/// Whether `p` is the scheduler's ROLLBACK of `incarnation`.
fn is_rollback(p: &Packet, incarnation: u16) -> bool {
    matches!(p, Packet::Ctrl(b) if matches!(
        Message::decode(b),
        Ok(Message { incarnation: i, body: Body::Rollback { .. } }) if i == incarnation
    ))
}

/// The value it carries is the fault-free run's and goes to the program's queue.
fn deliver_app(prog: &Program, me: Rank, app: &mut App, from: Ident, bytes: &[u8]) -> Res {
    let i = from.world as usize;
    if from.seq == UNNUMBERED {
        let k = app.crecv[i] + 1;
        if bytes != ctl_payload(from.world, me, k) {
            return Err(format!(
                "r{me}: unnumbered packet from r{} is not the #{k} expected (lost or duplicated)",
                from.world
            ));
        }
        app.crecv[i] = k;
        return Ok(());
    }
    let expect = app.recv[i] + 1;
    if from.seq != expect {
        return Err(format!(
            "r{me} got message #{} from r{} but expected #{expect}: {}",
            from.seq,
            from.world,
            if from.seq < expect {
                "duplicate"
            } else {
                "lost message"
            }
        ));
    }
    let value = reference(prog, from.world, me, from.seq)?;
    if bytes != payload(from.world, me, from.seq, value) {
        return Err(format!(
            "r{me}: bytes of #{} from r{} differ from the fault-free run's",
            from.seq, from.world
        ));
    }
    app.recv[i] = expect;
    app.inbox[i].push_back(value);
    Ok(())
}
