//! Simulating one corrected broadcast: the [`steadfast_coll`] machines on the LogP engine.

use steadfast_coll::{
    AckOptions, BcastConfig, BcastState, ConfigError, Correction, CorrectionStart, Dissemination,
    Kernel, Msg, Numbering, Topology, TreeError, TreeKind, Via,
};

use crate::engine::{Engine, Population};
use crate::fast::FastChecked;
use crate::faults::{run_rng, FaultError, FaultPlan};
use crate::network::{Liveness, LogP, LogPParams};

/// Dissemination phase of a simulated broadcast.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DissemSpec {
    /// A tree.
    Tree {
        /// Shape.
        kind: TreeKind,
        /// Labelling.
        numbering: Numbering,
    },
    /// Gossip for a fixed time, then synchronized correction.
    Gossip {
        /// Gossip phase length.
        duration: u64,
    },
}

/// When correction starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartSpec {
    /// Right after each process's dissemination sends.
    Overlapped,
    /// On all processes when fault-free dissemination is over (gossip: when gossip ends).
    Synchronized,
    /// On all processes at this time.
    SynchronizedAt(u64),
}

/// Everything that defines a simulated broadcast.
#[derive(Debug, Clone, PartialEq)]
pub struct BcastSpec {
    /// Number of processes.
    pub procs: u32,
    /// LogP parameters.
    pub logp: LogPParams,
    /// Dissemination phase.
    pub dissemination: DissemSpec,
    /// Correction phase.
    pub correction: Correction,
    /// When correction starts.
    pub start: StartSpec,
    /// Acknowledged tree (requires `Correction::None`).
    pub ack: bool,
    /// Fault injection.
    pub faults: FaultPlan,
}

/// Why a simulation could not be set up.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SimError {
    /// Bad tree parameters.
    #[error(transparent)]
    Tree(#[from] TreeError),
    /// Bad broadcast configuration.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Bad fault plan.
    #[error(transparent)]
    Faults(#[from] FaultError),
    /// LogP overhead must be positive.
    #[error("LogP overhead o must be at least 1")]
    Overhead,
}

/// Metrics of one simulated broadcast.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunMetrics {
    /// Seed of the run (replays it exactly).
    pub seed: u64,
    /// Processes in the run.
    pub procs: u32,
    /// Processes that failed.
    pub failed: u32,
    /// Live processes never colored.
    pub uncolored: u32,
    /// Time the last live process was colored.
    pub coloring_latency: u64,
    /// Time all activity ended.
    pub quiescence_latency: u64,
    /// Quiescence minus the synchronized correction start (synchronized runs only).
    pub correction_latency: Option<u64>,
    /// All messages sent.
    pub messages: u64,
    /// Tree messages.
    pub tree_messages: u64,
    /// Gossip messages.
    pub gossip_messages: u64,
    /// Correction messages.
    pub correction_messages: u64,
    /// Acknowledgments.
    pub ack_messages: u64,
    /// Longest run of consecutive ring positions not colored by dissemination.
    pub max_gap: u32,
    /// Number of such runs.
    pub gaps: u32,
    /// The run hit the time limit.
    pub hit_limit: bool,
}

impl RunMetrics {
    /// Average messages per process.
    pub fn messages_per_process(&self) -> f64 {
        self.messages as f64 / f64::from(self.procs.max(1))
    }
}

/// The population of one run; `K` is the configuration's [`Kernel`], so the engine loop is
/// compiled once per kernel with the configuration's variant checks folded away.
struct Pop<'a, const K: u8> {
    cfg: &'a BcastConfig,
    states: &'a mut [BcastState],
    counts: [u64; 4],
}

impl<const K: u8> Population for Pop<'_, K> {
    type Msg = Msg;

    #[inline(always)]
    fn procs(&self) -> u32 {
        self.cfg.procs()
    }

    #[inline(always)]
    fn handle(&mut self, rank: u32, now: u64, from: u32, msg: Msg) {
        self.states[rank as usize].handle_in::<K>(self.cfg, now, from, msg);
    }

    #[inline(always)]
    fn handle_timeout(&mut self, rank: u32, now: u64) {
        self.states[rank as usize].handle_timeout_in::<K>(self.cfg, now);
    }

    #[inline(always)]
    fn poll_transmit(&mut self, rank: u32, now: u64) -> Option<(u32, Msg)> {
        let t = self.states[rank as usize].poll_transmit_in::<K>(self.cfg, now)?;
        let kind = match t.msg {
            Msg::Tree => 0,
            Msg::Gossip => 1,
            Msg::Correction(_) => 2,
            Msg::Ack => 3,
        };
        self.counts[kind] += 1;
        Some((t.dst, t.msg))
    }

    #[inline(always)]
    fn poll_timeout(&self, rank: u32) -> Option<u64> {
        self.states[rank as usize].poll_timeout_in::<K>(self.cfg)
    }

    #[inline(always)]
    fn initially_active(&self, rank: u32) -> bool {
        self.states[rank as usize].is_colored()
    }

    #[inline(always)]
    fn wants_poll(&self, rank: u32) -> bool {
        self.states[rank as usize].may_transmit()
    }
}

/// Which engine simulates a broadcast.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EngineChoice {
    /// The specialized engine where it applies (tree dissemination, synchronized checked
    /// correction, LogP with `o = 1` and `g <= 1`, processes dead from the start), which gives
    /// the same results much faster; the generic one otherwise.
    #[default]
    Auto,
    /// Always the generic engine driving the [`steadfast_coll`] state machines.
    Generic,
}

/// A reusable simulator for one [`BcastSpec`]: call [`BcastSim::run`] once per seed.
#[derive(Debug)]
pub struct BcastSim {
    spec: BcastSpec,
    cfg: BcastConfig,
    /// Synchronized correction start, if any.
    sync_at: Option<u64>,
    /// Fault-free dissemination latency of the tree (gossip: its duration).
    dissemination_latency: u64,
    limit: u64,
    states: Vec<BcastState>,
    engine: Engine<LogP, Msg>,
    /// The specialized engine, when chosen (then `engine` and `states` stay unused).
    fast: Option<FastChecked>,
    /// Liveness of the last run on `fast`.
    fast_live: Liveness,
}

/// Adds the coloring metrics of one run to `m`: `rank(r)` says whether rank `r` stays alive,
/// when it was colored, and whether dissemination (not correction) colored it.
fn add_coloring(m: &mut RunMetrics, procs: u32, rank: impl Fn(u32) -> (bool, Option<u64>, bool)) {
    let mut run = 0u32;
    for r in 0..procs {
        let (alive, colored_at, by_dissemination) = rank(r);
        if alive {
            match colored_at {
                Some(at) => m.coloring_latency = m.coloring_latency.max(at),
                None => m.uncolored += 1,
            }
        }
        // Gaps: ring positions that dissemination left uncolored (dead ones included).
        // Rank 0 is always colored, so the ring needs no wrap-around.
        if alive && by_dissemination {
            run = 0;
        } else {
            if run == 0 {
                m.gaps += 1;
            }
            run += 1;
            m.max_gap = m.max_gap.max(run);
        }
    }
}

impl BcastSim {
    /// Sets up the simulator (O(P) time for the tree's fault-free latency), on the fastest
    /// engine that reproduces `spec` exactly ([`EngineChoice::Auto`]).
    pub fn new(spec: BcastSpec) -> Result<Self, SimError> {
        Self::with_engine(spec, EngineChoice::Auto)
    }

    /// Sets up the simulator on the chosen engine.
    pub fn with_engine(spec: BcastSpec, choice: EngineChoice) -> Result<Self, SimError> {
        if spec.logp.o == 0 {
            return Err(SimError::Overhead);
        }
        spec.faults.validate(spec.procs)?;
        let LogPParams { l, o, g } = spec.logp;
        let (dissemination, latency) = match spec.dissemination {
            DissemSpec::Tree { kind, numbering } => {
                let topology = Topology::new(kind, numbering, spec.procs)?;
                let latency = topology.fault_free_latency(l, o, g);
                // An acknowledgment round trip takes about twice the dissemination; wait a
                // little longer before declaring a child silent.
                let ack = spec.ack.then(|| AckOptions {
                    timeout: 2 * latency + 2 * (2 * o + l),
                });
                (Dissemination::Tree { topology, ack }, latency)
            }
            DissemSpec::Gossip { duration } => {
                (Dissemination::Gossip { duration, seed: 0 }, duration)
            }
        };
        let sync_at = match spec.start {
            StartSpec::Overlapped => None,
            StartSpec::Synchronized => Some(latency),
            StartSpec::SynchronizedAt(t) => Some(t),
        };
        let start = match sync_at {
            None => CorrectionStart::Overlapped,
            Some(at) => CorrectionStart::Synchronized { at },
        };
        let cfg = BcastConfig::new(spec.procs, dissemination, spec.correction, start)?;
        // Generous bound: a correction that walks the whole ring twice, plus timeouts.
        let limit = 1_000_000 + 8 * u64::from(spec.procs) * (o.max(g) + l + 2 * o);
        let engine = Engine::new(LogP::new(spec.logp));
        let fast = match (choice, cfg.dissemination(), sync_at) {
            (EngineChoice::Auto, Dissemination::Tree { topology, .. }, Some(at))
                if FastChecked::applies(&spec, sync_at, latency, limit) =>
            {
                Some(FastChecked::new(&spec, topology, at))
            }
            _ => None,
        };
        Ok(BcastSim {
            spec,
            cfg,
            sync_at,
            dissemination_latency: latency,
            limit,
            states: Vec::new(),
            engine,
            fast,
            fast_live: Liveness::default(),
        })
    }

    /// Whether runs use the specialized engine.
    pub fn is_fast(&self) -> bool {
        self.fast.is_some()
    }

    /// The specification.
    pub fn spec(&self) -> &BcastSpec {
        &self.spec
    }

    /// The protocol configuration every process runs.
    pub fn config(&self) -> &BcastConfig {
        &self.cfg
    }

    /// Synchronized correction start, if correction is synchronized.
    pub fn sync_at(&self) -> Option<u64> {
        self.sync_at
    }

    /// Fault-free dissemination latency (gossip: the gossip duration).
    pub fn dissemination_latency(&self) -> u64 {
        self.dissemination_latency
    }

    /// Per-process states after the last run; `None` on the specialized engine, which keeps
    /// no [`BcastState`] (see [`Self::colored`]).
    pub fn states(&self) -> Option<&[BcastState]> {
        self.fast.is_none().then_some(&self.states[..])
    }

    /// When and how process `rank` was colored in the last run (`None`: never), whichever
    /// engine ran it.
    pub fn colored(&self, rank: u32) -> Option<(u64, Via)> {
        match &self.fast {
            Some(f) => f.colored(rank).map(|(at, by_correction)| {
                let via = if by_correction {
                    Via::Correction
                } else {
                    Via::Dissemination
                };
                (at, via)
            }),
            None => self.states.get(rank as usize)?.colored(),
        }
    }

    /// Which processes failed in the last run.
    pub fn liveness(&self) -> &Liveness {
        if self.fast.is_some() {
            &self.fast_live
        } else {
            self.engine.liveness()
        }
    }

    /// Simulates one broadcast. The same seed gives the same run.
    pub fn run(&mut self, seed: u64) -> RunMetrics {
        if self.fast.is_some() {
            return self.run_fast(seed);
        }
        let procs = self.spec.procs;
        let mut rng = run_rng(seed);
        self.engine.prepare(procs, seed);
        let failed = self.spec.faults.apply(self.engine.liveness_mut(), &mut rng);
        if let Dissemination::Gossip { .. } = self.cfg.dissemination() {
            // Gossip targets depend on the run seed too.
            self.reseed_gossip(seed);
        }
        if self.states.len() != procs as usize {
            self.states = (0..procs)
                .map(|r| BcastState::new(&self.cfg, r, 0))
                .collect();
        } else {
            for (r, s) in self.states.iter_mut().enumerate() {
                s.reset(&self.cfg, r as u32, 0);
            }
        }
        let (outcome, counts) = match self.cfg.kernel() {
            Kernel::CHECKED => {
                let mut pop = Pop::<{ Kernel::CHECKED }> {
                    cfg: &self.cfg,
                    states: &mut self.states,
                    counts: [0; 4],
                };
                (self.engine.run(&mut pop, self.limit), pop.counts)
            }
            _ => {
                let mut pop = Pop::<{ Kernel::ANY }> {
                    cfg: &self.cfg,
                    states: &mut self.states,
                    counts: [0; 4],
                };
                (self.engine.run(&mut pop, self.limit), pop.counts)
            }
        };

        let live = self.engine.liveness();
        let mut m = RunMetrics {
            seed,
            procs,
            failed,
            quiescence_latency: outcome.last_activity,
            messages: outcome.sends,
            tree_messages: counts[0],
            gossip_messages: counts[1],
            correction_messages: counts[2],
            ack_messages: counts[3],
            hit_limit: outcome.hit_limit,
            ..RunMetrics::default()
        };
        let states = &self.states;
        add_coloring(&mut m, procs, |r| {
            let alive = !live.ever_fails(r);
            let colored = states[r as usize].colored();
            (alive, colored.map(|(at, _)| at), matches!(colored, Some((_, Via::Dissemination))))
        });
        m.correction_latency = self.sync_at.map(|t| m.quiescence_latency.saturating_sub(t));
        m
    }

    /// [`Self::run`] on the specialized engine: the same fault draws, the same metrics.
    fn run_fast(&mut self, seed: u64) -> RunMetrics {
        let procs = self.spec.procs;
        let mut rng = run_rng(seed);
        self.fast_live.reset(procs);
        let failed = self.spec.faults.apply(&mut self.fast_live, &mut rng);
        let Some(fast) = self.fast.as_mut() else {
            return RunMetrics::default();
        };
        let out = fast.run(&self.fast_live, self.limit);
        let mut m = RunMetrics {
            seed,
            procs,
            failed,
            quiescence_latency: out.last_activity,
            messages: out.tree_sends + out.correction_sends,
            tree_messages: out.tree_sends,
            correction_messages: out.correction_sends,
            hit_limit: out.hit_limit,
            ..RunMetrics::default()
        };
        let live = &self.fast_live;
        add_coloring(&mut m, procs, |r| {
            let colored = fast.colored(r);
            (!live.ever_fails(r), colored.map(|(at, _)| at), matches!(colored, Some((_, false))))
        });
        m.correction_latency = self.sync_at.map(|t| m.quiescence_latency.saturating_sub(t));
        m
    }

    fn reseed_gossip(&mut self, seed: u64) {
        if let Dissemination::Gossip { duration, .. } = *self.cfg.dissemination() {
            let cfg = BcastConfig::new(
                self.cfg.procs(),
                Dissemination::Gossip { duration, seed },
                self.cfg.correction(),
                self.cfg.start(),
            );
            if let Ok(cfg) = cfg {
                self.cfg = cfg;
            }
        }
    }
}
