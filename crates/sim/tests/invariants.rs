//! The broadcast machines on the LogP engine with invariants checked at every call, over many
//! seeds, trees, corrections and fault fractions.
//!
//! Promises checked: a dead process is never driven; a process sends nothing before it is
//! colored; coloring is never undone or changed; tree messages go to tree children only;
//! only participants send correction messages; the colored event is reported exactly once;
//! at the end every colored live process has finished, and with checked or delayed correction
//! every live process is colored.

mod common;

use common::*;
use steadfast_coll::{
    BcastConfig, BcastState, Correction, CorrectionStart, Dissemination, Event, Msg, Numbering,
    Topology, TreeKind, Via,
};
use steadfast_sim::faults::run_rng;
use steadfast_sim::{Engine, FaultPlan, FaultRates, Faulty, LogP, LogPParams, Network, Population};

struct Checked<'a> {
    cfg: &'a BcastConfig,
    topo: Option<&'a Topology>,
    states: Vec<BcastState>,
    dead: Vec<bool>,
    colored: Vec<Option<(u64, Via)>>,
    events: Vec<u32>,
}

impl Checked<'_> {
    fn check(&mut self, r: u32) {
        let s = &mut self.states[r as usize];
        while let Some(ev) = s.poll_event() {
            if let Event::Colored { at, via } = ev {
                self.events[r as usize] += 1;
                assert_eq!(
                    s.colored(),
                    Some((at, via)),
                    "event disagrees with state of {r}"
                );
            }
        }
        let now = s.colored();
        match (self.colored[r as usize], now) {
            (Some(before), after) => assert_eq!(Some(before), after, "coloring of {r} changed"),
            (None, after) => self.colored[r as usize] = after,
        }
    }
}

impl Population for Checked<'_> {
    type Msg = Msg;

    fn procs(&self) -> u32 {
        self.cfg.procs()
    }

    fn handle(&mut self, r: u32, now: u64, from: u32, msg: Msg) {
        assert!(!self.dead[r as usize], "dead process {r} got a message");
        self.states[r as usize].handle(self.cfg, now, from, msg);
        self.check(r);
    }

    fn handle_timeout(&mut self, r: u32, now: u64) {
        assert!(!self.dead[r as usize], "dead process {r} got a timeout");
        self.states[r as usize].handle_timeout(self.cfg, now);
        self.check(r);
    }

    fn poll_transmit(&mut self, r: u32, now: u64) -> Option<(u32, Msg)> {
        assert!(!self.dead[r as usize], "dead process {r} polled");
        let t = self.states[r as usize].poll_transmit(self.cfg, now);
        self.check(r);
        let t = t?;
        let s = &self.states[r as usize];
        assert!(s.is_colored(), "{r} sends before being colored");
        assert_ne!(t.dst, r, "{r} sends to itself");
        match t.msg {
            Msg::Tree => {
                // To a child, or (acknowledged trees adopting after a timeout) a descendant.
                if let Some(topo) = self.topo {
                    let mut a = topo.parent(t.dst);
                    while a.is_some_and(|a| a != r) {
                        a = topo.parent(a.unwrap_or(0));
                    }
                    assert_eq!(
                        a,
                        Some(r),
                        "tree message {r} -> {} to a non-descendant",
                        t.dst
                    );
                }
            }
            Msg::Correction(_) => {
                // Delayed correction's stop reply is sent by participants too.
                assert!(s.is_participant(), "non-participant {r} sends correction");
            }
            Msg::Gossip | Msg::Ack => {}
        }
        Some((t.dst, t.msg))
    }

    fn poll_timeout(&self, r: u32) -> Option<u64> {
        self.states[r as usize].poll_timeout(self.cfg)
    }
}

/// Runs one broadcast with invariant checks; returns (uncolored live, colored by correction).
fn run_checked(cfg: &BcastConfig, faults: &FaultPlan, seed: u64, all_colored: bool) -> (u32, u32) {
    run_on(
        LogP::new(LogPParams { l: 2, o: 1, g: 0 }),
        cfg,
        faults,
        seed,
        all_colored,
    )
}

fn run_on<N: Network>(
    net: N,
    cfg: &BcastConfig,
    faults: &FaultPlan,
    seed: u64,
    all_colored: bool,
) -> (u32, u32) {
    let procs = cfg.procs();
    let topo = match cfg.dissemination() {
        Dissemination::Tree { topology, .. } => Some(topology),
        Dissemination::Gossip { .. } => None,
    };
    let mut engine: Engine<N, Msg> = Engine::new(net);
    engine.prepare(procs, seed);
    faults.apply(engine.liveness_mut(), &mut run_rng(seed));
    let dead: Vec<bool> = (0..procs)
        .map(|r| engine.liveness().ever_fails(r))
        .collect();
    let mut pop = Checked {
        cfg,
        topo,
        states: (0..procs).map(|r| BcastState::new(cfg, r, 0)).collect(),
        dead: dead.clone(),
        colored: vec![None; procs as usize],
        events: vec![0; procs as usize],
    };
    let out = engine.run(&mut pop, 10_000_000);
    assert!(!out.hit_limit, "time limit; {}", replay(seed, "invariants"));
    let (mut uncolored, mut by_correction) = (0, 0);
    for (r, &is_dead) in dead.iter().enumerate() {
        if is_dead {
            continue;
        }
        let s = &pop.states[r];
        match s.colored() {
            None => uncolored += 1,
            Some((_, via)) => {
                assert_eq!(pop.events[r], 1, "colored event count of {r}");
                assert!(
                    s.is_finished(),
                    "{r} still has work at the end; {}",
                    replay(seed, "invariants")
                );
                if via == Via::Correction {
                    by_correction += 1;
                }
            }
        }
    }
    if all_colored {
        assert_eq!(
            uncolored,
            0,
            "live processes left uncolored; {}",
            replay(seed, "invariants")
        );
    }
    (uncolored, by_correction)
}

fn tree_cfg(
    procs: u32,
    kind: TreeKind,
    numbering: Numbering,
    c: Correction,
    sync: bool,
) -> BcastConfig {
    let topology = Topology::new(kind, numbering, procs).unwrap();
    let start = if sync {
        CorrectionStart::Synchronized {
            at: topology.fault_free_latency(2, 1, 0),
        }
    } else {
        CorrectionStart::Overlapped
    };
    BcastConfig::new(
        procs,
        Dissemination::Tree {
            topology,
            ack: None,
        },
        c,
        start,
    )
    .unwrap()
}

#[test]
fn checked_and_delayed_color_every_live_process() {
    let mut corrected = 0;
    for seed in seeds(1, scaled(6, 2)) {
        for kind in TREES {
            for numbering in [Numbering::Interleaved, Numbering::InOrder] {
                for correction in [
                    Correction::Checked,
                    Correction::Delayed { delay: 4 },
                    Correction::FailureProof { crashes: 1 },
                ] {
                    for sync in [true, false] {
                        for frac in [0.0, 0.01, 0.1, 0.4] {
                            let procs = 200 + (seed as u32 * 37) % 300;
                            let cfg = tree_cfg(procs, kind, numbering, correction, sync);
                            let (_, c) = run_checked(&cfg, &FaultPlan::Fraction(frac), seed, true);
                            corrected += c;
                        }
                    }
                }
            }
        }
    }
    // The faults must actually have left work for correction.
    assert!(
        corrected > 300,
        "correction colored only {corrected} processes"
    );
}

#[test]
fn opportunistic_keeps_invariants_and_tolerates_fewer_than_k_failures() {
    // Paper, section 4.2: in a k-ary tree, opportunistic correction with d >= k tolerates at
    // least k - 1 failures.
    for seed in seeds(1, scaled(30, 8)) {
        for k in [2u32, 3, 4] {
            for optimized in [false, true] {
                let c = Correction::Opportunistic {
                    distance: k,
                    optimized,
                    relay: false,
                };
                let cfg = tree_cfg(500, TreeKind::KAry { k }, Numbering::Interleaved, c, false);
                let faults = FaultPlan::Fraction(f64::from(k - 1) / 500.0);
                run_checked(&cfg, &faults, seed, true);
            }
        }
        // Large fault fractions: no coloring guarantee, invariants only.
        let c = Correction::Opportunistic {
            distance: 4,
            optimized: true,
            relay: false,
        };
        let cfg = tree_cfg(1000, TreeKind::Binomial, Numbering::Interleaved, c, false);
        run_checked(&cfg, &FaultPlan::Fraction(0.2), seed, false);
    }
}

#[test]
fn acknowledged_tree_and_gossip_keep_invariants() {
    for seed in seeds(1, scaled(8, 3)) {
        for kind in TREES {
            let topology = Topology::new(kind, Numbering::Interleaved, 300).unwrap();
            let lat = topology.fault_free_latency(2, 1, 0);
            let ack = Some(steadfast_coll::AckOptions {
                timeout: 2 * lat + 8,
            });
            let cfg = BcastConfig::new(
                300,
                Dissemination::Tree { topology, ack },
                Correction::None,
                CorrectionStart::Overlapped,
            )
            .unwrap();
            for frac in [0.0, 0.05, 0.3] {
                run_checked(&cfg, &FaultPlan::Fraction(frac), seed, true);
            }
        }
        let cfg = BcastConfig::new(
            700,
            Dissemination::Gossip { duration: 20, seed },
            Correction::Checked,
            CorrectionStart::Synchronized { at: 20 },
        )
        .unwrap();
        for frac in [0.0, 0.05, 0.3] {
            run_checked(&cfg, &FaultPlan::Fraction(frac), seed, true);
        }
    }
}

/// The network model is pluggable: with duplicated and reordered (but not lost) messages,
/// checked, failure-proof and delayed correction still color every live process.
#[test]
fn corrections_survive_duplication_and_reordering() {
    for seed in seeds(1, scaled(20, 5)) {
        for correction in [
            Correction::Checked,
            Correction::FailureProof { crashes: 1 },
            Correction::Delayed { delay: 4 },
        ] {
            for sync in [true, false] {
                let cfg = tree_cfg(
                    400,
                    TreeKind::Binomial,
                    Numbering::Interleaved,
                    correction,
                    sync,
                );
                let net = Faulty::new(
                    LogP::new(LogPParams { l: 2, o: 1, g: 0 }),
                    FaultRates {
                        loss: 0.0,
                        duplicate: 0.2,
                        max_delay: 6,
                    },
                );
                run_on(net, &cfg, &FaultPlan::Fraction(0.05), seed, true);
            }
        }
    }
}

/// Negative space: the protocols assume a reliable network, so heavy loss leaves processes
/// uncolored (the reliable layer below them exists for that).
#[test]
fn heavy_message_loss_breaks_coloring() {
    let mut uncolored = 0;
    for seed in seeds(1, 10) {
        let cfg = tree_cfg(
            400,
            TreeKind::Binomial,
            Numbering::Interleaved,
            Correction::Checked,
            true,
        );
        let net = Faulty::new(
            LogP::new(LogPParams { l: 2, o: 1, g: 0 }),
            FaultRates {
                loss: 0.5,
                duplicate: 0.0,
                max_delay: 0,
            },
        );
        uncolored += run_on(net, &cfg, &FaultPlan::None, seed, false).0;
    }
    assert!(uncolored > 0);
}
