//! A deterministic simulation of a job under coordinated checkpointing: `n` ranks exchange
//! application messages over FIFO channels (one per ordered pair, the order across channels
//! chosen by a seeded generator), the scheduler takes periodic checkpoints, ranks crash and
//! are relaunched at seeded points (also during a commit and during a restart), image
//! writes are slow, fail or never finish. Stable storage survives crashes.
//!
//! Checked after every step: the committed wave never goes back and its images and records
//! are on storage for every rank; every live rank's channel counters match its application
//! state; every delivered message is the next one of its channel (none lost, none twice).
//! Checked at every commit: the global checkpoint is a consistent cut. Checked at the end,
//! once everything settled: every message sent by the surviving execution was delivered
//! exactly once.

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use crate::rank::Event as REvent;
use crate::scheduler::{AbortReason, Event as SEvent};
use crate::wire::ChannelRecord;
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
    pub config: Config,
}

impl Params {
    /// Parameters drawn from `seed`.
    pub fn from_seed(seed: u64) -> Params {
        let mut r = Rng::new(seed.wrapping_mul(0x9e37_79b9));
        Params {
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
        }
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
    pub job_restarts: u64,
    pub redelivered: u64,
    pub stale_dropped: u64,
    pub late_markers: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Packet {
    App { ident: Ident, payload: Vec<u8> },
    Ctrl(Vec<u8>),
}

/// The application of one rank: what it sent and received on each channel.
#[derive(Clone, Debug, PartialEq, Eq)]
struct App {
    sent: Vec<u64>,
    recv: Vec<u64>,
    /// Unnumbered packets (rendezvous traffic) sent and received, counted by the
    /// application itself (the protocol does not number them).
    csent: Vec<u64>,
    crecv: Vec<u64>,
}

impl App {
    fn new(n: u32) -> App {
        App {
            sent: vec![0; n as usize],
            recv: vec![0; n as usize],
            csent: vec![0; n as usize],
            crecv: vec![0; n as usize],
        }
    }
}

/// The bytes of the `k`-th unnumbered packet from `from` to `to`.
fn ctl_payload(from: Rank, to: Rank, k: u64) -> Vec<u8> {
    let mut v = vec![0xDA];
    v.extend_from_slice(&(from as u64 * 1_000_003 + to as u64 * 7_919 + k).to_le_bytes());
    v
}

/// The bytes of message `seq` from `from` to `to`: any execution sends the same ones.
fn payload(from: Rank, to: Rank, seq: u64) -> Vec<u8> {
    let len = (seq % 7) as usize;
    let mut v = Vec::with_capacity(8 + len);
    v.extend_from_slice(&(from as u64 * 1_000_003 + to as u64 * 7_919 + seq).to_le_bytes());
    v.extend_from_slice(&vec![seq as u8; len]);
    v
}

#[derive(Default)]
struct Stored {
    image: Option<App>,
    record: Option<ChannelRecord>,
}

struct Node {
    alive: bool,
    life: u32,
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

/// The simulated job.
pub struct Sim {
    p: Params,
    seed: u64,
    rng: Rng,
    now: Time,
    n: u32,
    nodes: Vec<Node>,
    sched: Scheduler,
    /// Channel `src * (n + 1) + dst`; node `n` is the scheduler.
    chans: Vec<VecDeque<Packet>>,
    storage: BTreeMap<(Rank, Wave), Stored>,
    timed: Vec<(Time, u64, Timed)>,
    timed_seq: u64,
    crashes: u32,
    /// Faults allowed (off while the run settles at the end).
    faults: bool,
    last_committed: Wave,
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
                machine: RankMachine::new(r, n),
                app: App::new(n),
                writing_image: BTreeMap::new(),
                writing_record: BTreeMap::new(),
            })
            .collect();
        let sched = Scheduler::new(n, p.config, Duration::ZERO);
        Sim {
            rng: Rng::new(seed),
            seed,
            now: Duration::ZERO,
            n,
            nodes,
            sched,
            chans: vec![VecDeque::new(); ((n + 1) * (n + 1)) as usize],
            storage: BTreeMap::new(),
            timed: Vec::new(),
            timed_seq: 0,
            crashes: 0,
            faults: true,
            last_committed: 0,
            out: Outcome::default(),
            trace: VecDeque::new(),
            p,
        }
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
                return Err(self.fail("the job does not settle (livelock or lost wakeup)".into()));
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
            && self.nodes.iter().all(|n| n.alive && n.machine.is_running())
            && self.chans.iter().all(|c| c.is_empty())
            && !self
                .timed
                .iter()
                .any(|(_, _, t)| matches!(t, Timed::Notice { .. } | Timed::RestoreDone { .. }))
    }

    fn step(&mut self) -> Res {
        self.now += Duration::from_micros(self.rng.range(0, 300));
        self.fire_timers()?;
        if self.sched.poll_timeout().is_some_and(|t| t <= self.now) {
            self.sched.handle_timeout(self.now);
            self.drain_sched()?;
        }
        let choice = self.rng.below(100);
        if choice < 55 {
            self.deliver_one()?;
        } else if choice < 90 && self.faults {
            self.app_send()?;
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
            let r = self.rng.below(self.n as u64) as Rank;
            self.crash(r);
            // Sometimes two at once.
            if self.rng.chance(150) && self.crashes < self.p.max_crashes {
                let r2 = self.rng.below(self.n as u64) as Rank;
                self.crash(r2);
            }
        }
        if self.faults && self.rng.chance(self.p.job_restart_per_mille) {
            self.job_restart()?;
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
        let (committed, last, inc) = (
            self.sched.committed(),
            self.sched.last_wave(),
            self.sched.incarnation(),
        );
        for (r, node) in self.nodes.iter_mut().enumerate() {
            node.life += 1;
            node.alive = true;
            node.machine = RankMachine::relaunched(r as Rank, self.n);
            node.app = App::new(self.n);
            node.writing_image.clear();
            node.writing_record.clear();
        }
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
                let node = &mut self.nodes[rank as usize];
                node.alive = true;
                node.machine = RankMachine::relaunched(rank, self.n);
                node.app = App::new(self.n);
                node.writing_image.clear();
                node.writing_record.clear();
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
                }) => (i.clone(), r.clone()),
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
        let k = replay.redeliver.len();
        for m in &replay.redeliver {
            deliver_app(rank, &mut node.app, m.from, &m.bytes)
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

    fn crash(&mut self, r: Rank) {
        let node = &mut self.nodes[r as usize];
        if !node.alive {
            return;
        }
        node.alive = false;
        node.life += 1;
        self.crashes += 1;
        self.out.crashes += 1;
        // What was on its way to the dead process is gone with its connections; what it
        // sent may still arrive (from an incarnation about to be rolled back).
        for src in 0..=self.n {
            let c = self.chan(src, r);
            self.chans[c].clear();
        }
        let c = self.chan(r, self.n);
        self.chans[c].clear();
        let delay = Duration::from_micros(self.rng.range(100, 20_000));
        self.schedule(delay, Timed::Notice { rank: r });
        self.log(|| format!("CRASH r{r}"));
    }

    fn deliver_one(&mut self) -> Res {
        let nonempty: Vec<usize> = (0..self.chans.len())
            .filter(|&c| !self.chans[c].is_empty())
            .collect();
        let Some(c) = self.rng.pick(&nonempty) else {
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
                if v == Verdict::Deliver {
                    deliver_app(dst, &mut node.app, ident, &payload)?;
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

    fn app_send(&mut self) -> Res {
        if self.n < 2 {
            return Ok(());
        }
        let from = self.rng.below(self.n as u64) as Rank;
        let mut to = self.rng.below(self.n as u64 - 1) as Rank;
        if to >= from {
            to += 1;
        }
        let node = &mut self.nodes[from as usize];
        if !node.alive || !node.machine.is_running() {
            return Ok(());
        }
        // A quarter of the traffic is unnumbered (the DATA of a rendezvous).
        let unnumbered = node.app.sent[to as usize] > 0 && self.rng.chance(250);
        let (seq, bytes) = if unnumbered {
            let k = node.app.csent[to as usize] + 1;
            node.app.csent[to as usize] = k;
            (UNNUMBERED, ctl_payload(from, to, k))
        } else {
            let seq = node.app.sent[to as usize] + 1;
            node.app.sent[to as usize] = seq;
            (seq, payload(from, to, seq))
        };
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
                    node.writing_image.insert(wave, node.app.clone());
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
                    if wave == self.sched.committed() && wave > 0 {
                        return Err(format!("r{r} told to discard committed wave {wave}"));
                    }
                    self.storage.remove(&(r, wave));
                }
                REvent::Committed { wave } => {
                    self.storage.retain(|&(rank, w), _| rank != r || w >= wave);
                }
                REvent::Restore { wave, incarnation } => {
                    node.writing_image.clear();
                    node.writing_record.clear();
                    self.storage.retain(|&(rank, w), _| rank != r || w == wave);
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
                SEvent::RollingBack { .. } => {
                    self.out.rollbacks += 1;
                    if self.faults && self.rng.chance(self.p.crash_at_restore_per_mille) {
                        crash_now += 1;
                        self.out.crashes_during_restore += 1;
                    }
                }
                SEvent::RestoreTimedOut { .. } => self.out.restore_timeouts += 1,
                SEvent::GaveUp => return Err("scheduler gave up".into()),
                SEvent::WaveStarted { .. } | SEvent::Resumed { .. } => {}
            }
        }
        for _ in 0..crash_now {
            let r = self.rng.below(self.n as u64) as Rank;
            self.crash(r);
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
                    if m.bytes != payload(i, j, m.from.seq) {
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
        for r in 0..self.n {
            if c > 0 {
                match self.storage.get(&(r, c)) {
                    Some(Stored {
                        image: Some(_),
                        record: Some(_),
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
            // Every older or aborted image was deleted; only the committed one is kept.
            let kept: Vec<Wave> = self
                .storage
                .range((i, 0)..(i + 1, 0))
                .map(|(k, _)| k.1)
                .collect();
            let c = self.sched.committed();
            let expect = if c == 0 { vec![] } else { vec![c] };
            if kept != expect {
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
fn deliver_app(me: Rank, app: &mut App, from: Ident, bytes: &[u8]) -> Res {
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
    if bytes != payload(from.world, me, from.seq) {
        return Err(format!(
            "r{me}: bytes of #{} from r{} differ",
            from.seq, from.world
        ));
    }
    app.recv[i] = expect;
    Ok(())
}
