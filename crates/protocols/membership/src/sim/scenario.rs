//! Seeded fault schedules and the run that checks them.

use std::collections::BTreeSet;
use std::time::Duration;

use super::net::JitterNet;
use super::rng::Rng;
use super::{Input, Sim};
use crate::tree::tree_height;
use crate::{Config, NodeId, Time};

/// Families of fault schedules (each seed draws sizes, fan-out, latencies and times).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    /// One non-root process crashes.
    Single,
    /// Several processes crash at the same instant.
    Multiple,
    /// The root crashes.
    Root,
    /// The root crashes, then each new root in turn, while stabilizing.
    ChainedRoot,
    /// The root and the next ids crash at once (linear selection of the next root).
    TopNodes,
    /// A second and third crash land while the first change is still stabilizing.
    DuringStabilization,
    /// Crashed ranks come back with their id (NODE_ALIVE), new ids join (NEW_NODE).
    Joins,
    /// Joins and re-joins arrive while a failure is being stabilized.
    JoinsDuringStabilization,
    /// The network splits in two (both sides suspect each other), then heals.
    Partition,
    /// Live processes are suspected by mistake (they are excluded and re-join).
    FalseSuspicion,
    /// Everything at once, with duplicated messages.
    Chaos,
}

impl Scenario {
    /// All scenarios.
    pub const ALL: [Scenario; 11] = [
        Scenario::Single,
        Scenario::Multiple,
        Scenario::Root,
        Scenario::ChainedRoot,
        Scenario::TopNodes,
        Scenario::DuringStabilization,
        Scenario::Joins,
        Scenario::JoinsDuringStabilization,
        Scenario::Partition,
        Scenario::FalseSuspicion,
        Scenario::Chaos,
    ];

    fn salt(self) -> u64 {
        (self as u64 + 1).wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// How the failure detector learns of a crash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Notice {
    /// The launcher tells every process.
    All,
    /// Each process hears of it with this probability (per mille); at least one does.
    Some(u64),
    /// One process notices (a heartbeat or a broken connection).
    One,
}

/// Result of one seed.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// Processes at start.
    pub n: u32,
    /// Fan-out exponent.
    pub fanout_log2: u8,
    /// From the last fault to the final view's end of stabilization.
    pub settle: Duration,
    /// The bound `settle` had to stay under.
    pub bound: Duration,
    /// Messages sent in the whole run.
    pub messages: u64,
    /// Members of the final view.
    pub final_size: u32,
    /// Processes excluded after a suspicion while alive.
    pub exclusions: u64,
}

/// A failed seed: what broke, and the trace leading to it.
#[derive(Clone, Debug)]
pub struct Failure {
    /// The violated invariant.
    pub reason: String,
    /// The last steps before the violation (empty unless tracing was on).
    pub trace: String,
}

fn ms(x: u64) -> Duration {
    Duration::from_millis(x)
}

fn us(x: u64) -> Duration {
    Duration::from_micros(x)
}

/// The protocol configuration used by the simulations.
pub fn sim_config(fanout_log2: u8) -> Config {
    Config {
        fanout_log2,
        ack_timeout: ms(10),
        report_timeout: ms(20),
        join_timeout: ms(25),
        probe_interval: Some(ms(40)),
        probe_batch: 4,
        sync_interval: Some(ms(50)),
        auto_rejoin: true,
    }
}

struct Plan {
    rng: Rng,
    inputs: Vec<(Time, Input)>,
    up: BTreeSet<NodeId>,
    down: Vec<NodeId>,
    next_id: NodeId,
    faults: u32,
    crashes: u32,
    joins: u32,
    last: Time,
}

impl Plan {
    fn at(&mut self, t: Time, i: Input) {
        self.last = self.last.max(t);
        self.inputs.push((t, i));
    }
    /// Crash `id` at `t` if that leaves someone alive.
    fn crash(&mut self, t: Time, id: NodeId) -> bool {
        if self.up.len() <= 1 || !self.up.remove(&id) {
            return false;
        }
        self.down.push(id);
        self.faults += 1;
        self.crashes += 1;
        self.at(t, Input::Crash(id));
        true
    }
    fn random_up(&mut self) -> Option<NodeId> {
        let v: Vec<NodeId> = self.up.iter().copied().collect();
        self.rng.pick(&v)
    }
    fn random_up_not_root(&mut self) -> Option<NodeId> {
        let v: Vec<NodeId> = self.up.iter().copied().skip(1).collect();
        self.rng.pick(&v)
    }
    fn lowest_up(&self) -> Option<NodeId> {
        self.up.iter().next().copied()
    }
    fn restart_one(&mut self, t: Time) {
        if self.down.is_empty() {
            return;
        }
        let i = self.rng.below(self.down.len() as u64) as usize;
        let id = self.down.swap_remove(i);
        self.up.insert(id);
        self.joins += 1;
        self.at(t, Input::Restart(id));
    }
    fn join_new(&mut self, t: Time) {
        let id = self.next_id;
        self.next_id += 1;
        self.up.insert(id);
        self.joins += 1;
        self.at(t, Input::JoinNew(id));
    }
    fn false_suspicion(&mut self, t: Time) {
        if self.up.len() < 2 {
            return;
        }
        let Some(a) = self.random_up() else { return };
        let others: Vec<NodeId> = self.up.iter().copied().filter(|&b| b != a).collect();
        if let Some(b) = self.rng.pick(&others) {
            self.faults += 1;
            self.at(t, Input::SuspectId { at: a, target: b });
        }
    }
    fn partition(&mut self, t: Time, len: Duration) {
        let ids: Vec<NodeId> = self.up.iter().copied().collect();
        if ids.len() < 2 {
            return;
        }
        let mut side: Vec<NodeId> = ids
            .iter()
            .copied()
            .filter(|_| self.rng.chance(500))
            .collect();
        if side.is_empty() {
            side.extend(self.rng.pick(&ids));
        }
        if side.len() == ids.len() {
            let drop = self.rng.below(side.len() as u64) as usize;
            side.remove(drop);
        }
        self.faults += 2;
        self.at(t, Input::Partition(side.clone()));
        // Heartbeats across the cut time out: some processes suspect someone on the other side.
        for &a in &ids {
            if self.rng.chance(300) {
                let other: Vec<NodeId> = ids
                    .iter()
                    .copied()
                    .filter(|b| side.contains(b) != side.contains(&a))
                    .collect();
                if let Some(b) = self.rng.pick(&other) {
                    let when = t + self.rng.duration(ms(1), len.max(ms(1)));
                    self.at(when, Input::SuspectId { at: a, target: b });
                }
            }
        }
        self.at(t + len, Input::Heal);
    }
}

/// Runs one seed of a scenario; `trace_len` > 0 keeps that many trace lines for failures.
pub fn run(s: Scenario, seed: u64, trace_len: usize) -> Result<Outcome, Failure> {
    let mut rng = Rng::new(seed ^ s.salt());
    let k = rng.range(1, 3) as u8;
    let min_n = match s {
        Scenario::Multiple | Scenario::ChainedRoot | Scenario::TopNodes | Scenario::Partition => 4,
        _ => 2,
    };
    let n = rng.range(min_n, 24) as u32;
    let lat_min = rng.duration(us(10), us(200));
    let lat_max = lat_min + rng.duration(Duration::ZERO, ms(2));
    let dup = if s == Scenario::Chaos {
        rng.range(0, 30)
    } else {
        0
    };
    let notice = match rng.below(3) {
        0 => Notice::All,
        1 => Notice::Some(rng.range(100, 600)),
        _ => Notice::One,
    };
    let cfg = sim_config(k);
    let net = JitterNet {
        min: lat_min,
        max: lat_max,
        dup_per_mille: dup,
    };
    let fail = |reason: String| Failure {
        reason,
        trace: String::new(),
    };
    let mut sim = Sim::new(cfg.clone(), n, net, seed).map_err(fail)?;
    sim.trace_len = trace_len;
    sim.notice = notice;

    let mut p = Plan {
        rng: Rng::new(seed.rotate_left(17) ^ s.salt()),
        inputs: Vec::new(),
        up: (0..n).collect(),
        down: Vec::new(),
        next_id: n,
        faults: 0,
        crashes: 0,
        joins: 0,
        last: Duration::ZERO,
    };
    let t0 = p.rng.duration(ms(1), ms(10));
    match s {
        Scenario::Single => {
            if let Some(x) = p.random_up_not_root() {
                p.crash(t0, x);
            }
        }
        Scenario::Multiple => {
            let m = p.rng.range(2, 5.min(n as u64 - 1));
            for _ in 0..m {
                if let Some(x) = p.random_up() {
                    p.crash(t0, x);
                }
            }
        }
        Scenario::Root => {
            p.crash(t0, 0);
            if p.rng.chance(500) {
                let t = t0 + p.rng.duration(Duration::ZERO, ms(30));
                if let Some(x) = p.random_up() {
                    p.crash(t, x);
                }
            }
        }
        Scenario::ChainedRoot => {
            let c = p.rng.range(2, 4.min(n as u64 - 1));
            let mut t = t0;
            for _ in 0..c {
                if let Some(r) = p.lowest_up() {
                    p.crash(t, r);
                }
                t += p.rng.duration(Duration::ZERO, ms(6));
            }
        }
        Scenario::TopNodes => {
            let c = p.rng.range(2, 5.min(n as u64 - 1));
            for _ in 0..c {
                if let Some(r) = p.lowest_up() {
                    p.crash(t0, r);
                }
            }
        }
        Scenario::DuringStabilization => {
            let c = p.rng.range(2, 3);
            let mut t = t0;
            for _ in 0..c {
                if let Some(x) = p.random_up() {
                    p.crash(t, x);
                }
                t += p.rng.duration(us(50), ms(3));
            }
        }
        Scenario::Joins => {
            let crashes = p.rng.range(1, 3);
            for _ in 0..crashes {
                if let Some(x) = p.random_up() {
                    p.crash(t0, x);
                }
            }
            // The lowest id sometimes comes back: it becomes root again on re-joining.
            if p.rng.chance(300) {
                p.crash(t0, 0);
            }
            let mut t = t0 + p.rng.duration(ms(5), ms(60));
            while !p.down.is_empty() {
                p.restart_one(t);
                t += p.rng.duration(Duration::ZERO, ms(20));
            }
            for _ in 0..p.rng.range(1, 3) {
                let t = t0 + p.rng.duration(Duration::ZERO, ms(80));
                p.join_new(t);
            }
        }
        Scenario::JoinsDuringStabilization => {
            if let Some(x) = p.random_up() {
                p.crash(t0, x);
            }
            let t1 = t0 + p.rng.duration(us(100), ms(8));
            let t = t1 + p.rng.duration(Duration::ZERO, ms(3));
            p.restart_one(t);
            for _ in 0..p.rng.range(1, 3) {
                let t = t1 + p.rng.duration(Duration::ZERO, ms(3));
                p.join_new(t);
            }
            if p.rng.chance(500) {
                if let Some(x) = p.random_up() {
                    let t = t1 + p.rng.duration(Duration::ZERO, ms(3));
                    p.crash(t, x);
                }
            }
        }
        Scenario::Partition => {
            let len = p.rng.duration(ms(5), ms(150));
            p.partition(t0, len);
            if p.rng.chance(300) {
                if let Some(x) = p.random_up() {
                    let t = t0 + p.rng.duration(Duration::ZERO, len);
                    p.crash(t, x);
                }
            }
        }
        Scenario::FalseSuspicion => {
            for _ in 0..p.rng.range(1, 3) {
                let t = t0 + p.rng.duration(Duration::ZERO, ms(30));
                p.false_suspicion(t);
            }
        }
        Scenario::Chaos => {
            let mut t = t0;
            for _ in 0..p.rng.range(2, 7) {
                match p.rng.below(6) {
                    0 => {
                        if let Some(x) = p.random_up() {
                            p.crash(t, x);
                        }
                    }
                    1 => {
                        if let Some(r) = p.lowest_up() {
                            p.crash(t, r);
                        }
                    }
                    2 => p.restart_one(t),
                    3 => p.join_new(t),
                    4 => p.false_suspicion(t),
                    _ => {
                        let len = p.rng.duration(ms(5), ms(80));
                        p.partition(t, len);
                    }
                }
                t += p.rng.duration(Duration::ZERO, ms(25));
            }
        }
    }
    let last_fault = p.last;
    for (t, i) in std::mem::take(&mut p.inputs) {
        sim.schedule(t, i);
    }

    // Bound: detection, then one report / change / ack round per fault (a missing ack or a
    // dead coordinator found on the way costs one more round), joiners scanning past dead
    // candidates, and one probe period for split groups to find each other.
    let total = p.next_id;
    let h = tree_height(total, k) + 1;
    let round = cfg.report_timeout + cfg.ack_timeout * (h + 2) + lat_max * 4;
    let joining = p.joins > 0
        || matches!(
            s,
            Scenario::FalseSuspicion | Scenario::Partition | Scenario::Chaos
        );
    let partitioned = matches!(s, Scenario::Partition | Scenario::Chaos);
    let bound = sim.notice_delay.1 * 2
        + sim.retransmit_give_up
        + round * (p.faults + 2)
        + if joining {
            cfg.join_timeout * (4 + p.crashes)
        } else {
            Duration::ZERO
        }
        + if partitioned {
            cfg.probe_interval.unwrap_or_default() * 2
        } else {
            Duration::ZERO
        };
    let end = last_fault + bound;
    let traced = |sim: &Sim<JitterNet>, reason: String| Failure {
        reason,
        trace: sim.trace(),
    };

    if let Err(e) = sim.run_until(end) {
        return Err(traced(&sim, e));
    }
    let v = match sim.check.converged(&sim.views(), &sim.world()) {
        Ok(v) => v,
        Err(e) => {
            return Err(traced(
                &sim,
                format!("{e} (at {:?}, last fault {:?})", end, last_fault),
            ))
        }
    };
    let stable_at = sim.check.stabilized.get(&v).copied().unwrap_or_default();
    let settle = stable_at.saturating_sub(last_fault);
    // Once converged, nothing changes any more (no stray suspicion, no flapping).
    let installs = sim.check.installs;
    if let Err(e) = sim.run_until(end + ms(300)) {
        return Err(traced(&sim, e));
    }
    if sim.check.installs != installs || sim.views().values().any(|x| x.is_some_and(|x| x != v)) {
        return Err(traced(
            &sim,
            format!("view changed again after convergence on {v}"),
        ));
    }
    let final_size = sim.live().len() as u32;
    Ok(Outcome {
        n,
        fanout_log2: k,
        settle,
        bound,
        messages: sim.messages,
        final_size,
        exclusions: sim.check.exclusions,
    })
}
