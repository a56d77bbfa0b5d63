//! Determinism, fault injection and message counts of the simulated broadcast.

mod common;

use common::*;
use steadfast_coll::{Correction, Numbering, TreeKind};
use steadfast_sim::{BcastSim, BcastSpec, DissemSpec, FaultPlan, LogPParams, StartSpec};

fn binomial(faults: FaultPlan, correction: Correction, start: StartSpec) -> BcastSim {
    BcastSim::new(tree_spec(
        4096,
        TreeKind::Binomial,
        Numbering::Interleaved,
        correction,
        start,
        faults,
    ))
    .unwrap()
}

#[test]
fn a_seed_replays_exactly() {
    let mut a = binomial(
        FaultPlan::Fraction(0.02),
        Correction::Checked,
        StartSpec::Synchronized,
    );
    let mut b = binomial(
        FaultPlan::Fraction(0.02),
        Correction::Checked,
        StartSpec::Synchronized,
    );
    let runs_a: Vec<_> = (0..20).map(|s| a.run(s)).collect();
    // Other runs in between do not disturb a replay.
    let _ = b.run(999);
    let runs_b: Vec<_> = (0..20).rev().map(|s| b.run(s)).collect();
    let runs_b: Vec<_> = runs_b.into_iter().rev().collect();
    assert_eq!(runs_a, runs_b);
    // Different seeds fail different processes.
    assert!(runs_a
        .windows(2)
        .any(|w| w[0].max_gap != w[1].max_gap
            || w[0].correction_messages != w[1].correction_messages));
}

#[test]
fn fraction_faults_spare_the_root_and_count_exactly() {
    let mut sim = binomial(
        FaultPlan::Fraction(0.04),
        Correction::Checked,
        StartSpec::Synchronized,
    );
    for seed in seeds(0, 20) {
        let m = sim.run(seed);
        assert_eq!(m.failed, 164, "{}", replay(seed, "behaviour"));
        assert!(!sim.liveness().ever_fails(0));
        let dead = (0..4096).filter(|&r| sim.liveness().ever_fails(r)).count();
        assert_eq!(dead, 164);
        // Dead processes never get colored and never send.
        for r in 0..4096u32 {
            if sim.liveness().ever_fails(r) {
                assert!(sim.colored(r).is_none());
            }
        }
    }
}

#[test]
fn listed_faults_leave_the_expected_gap() {
    // Interleaved binomial: process 1 roots the subtree of all odd ranks, so its failure
    // uncolors every odd rank: gaps of one between every pair of even ranks.
    let mut sim = binomial(
        FaultPlan::List(vec![1]),
        Correction::Checked,
        StartSpec::Synchronized,
    );
    let m = sim.run(0);
    assert_eq!(m.failed, 1);
    assert_eq!(m.max_gap, 1);
    assert_eq!(m.gaps, 2048);
    assert_eq!(m.uncolored, 0);
    // In-order numbering puts that subtree in one block: rank 1 is the smallest subtree (a
    // leaf) there, while the first child (rank 2048) carries half of the tree.
    let mut sim = BcastSim::new(tree_spec(
        4096,
        TreeKind::Binomial,
        Numbering::InOrder,
        Correction::Checked,
        StartSpec::Synchronized,
        FaultPlan::List(vec![2048]),
    ))
    .unwrap();
    let m = sim.run(0);
    assert_eq!(m.max_gap, 2048);
    assert_eq!(m.gaps, 1);
    assert_eq!(m.uncolored, 0);
    // Lemma 3 upper bound still holds for the huge gap.
    let l = m.correction_latency.unwrap();
    assert!((8 + 2048..=8 + 2 * 2048 + 1).contains(&l), "L_SCC = {l}");
}

#[test]
fn fault_free_message_counts() {
    let p = 4096u64;
    // Synchronized checked: one tree message per non-root process plus five per process.
    let m = binomial(
        FaultPlan::None,
        Correction::Checked,
        StartSpec::Synchronized,
    )
    .run(0);
    assert_eq!(m.tree_messages, p - 1);
    assert_eq!(m.correction_messages, 5 * p);
    // Delayed: one correction message per process.
    let m = binomial(
        FaultPlan::None,
        Correction::Delayed { delay: 4 },
        StartSpec::Synchronized,
    )
    .run(0);
    assert_eq!(m.correction_messages, p);
    assert_eq!(m.uncolored, 0);
    // Opportunistic, d = 4 each way: exactly 8 per process when synchronized; overlapped,
    // processes reached by correction before their tree message do not take part, and the
    // optimization saves more.
    let plain = Correction::Opportunistic {
        distance: 4,
        optimized: false,
        relay: false,
    };
    let m = binomial(FaultPlan::None, plain, StartSpec::Synchronized).run(0);
    assert_eq!(m.correction_messages, 8 * p);
    let overlapped = binomial(FaultPlan::None, plain, StartSpec::Overlapped).run(0);
    assert!(overlapped.correction_messages < 8 * p);
    let opt = Correction::Opportunistic {
        distance: 4,
        optimized: true,
        relay: false,
    };
    let m = binomial(FaultPlan::None, opt, StartSpec::Overlapped).run(0);
    assert!(
        m.correction_messages < overlapped.correction_messages,
        "{}",
        m.correction_messages
    );
    assert_eq!(m.uncolored, 0);
    // Acknowledged tree: every non-root process sends one acknowledgment.
    let mut spec = tree_spec(
        4096,
        TreeKind::Binomial,
        Numbering::Interleaved,
        Correction::None,
        StartSpec::Overlapped,
        FaultPlan::None,
    );
    spec.ack = true;
    let m = BcastSim::new(spec).unwrap().run(0);
    assert_eq!(m.ack_messages, p - 1);
    assert_eq!(m.messages, 2 * (p - 1));
}

#[test]
fn fault_free_tree_latency_matches_the_schedule() {
    // L = 2, o = 1, P = 65536: binomial 16 hops of 2o + L = 64 steps; the optimal tree is
    // colored exactly when R(t) reaches P.
    let lat = |kind| {
        BcastSim::new(tree_spec(
            65536,
            kind,
            Numbering::Interleaved,
            Correction::None,
            StartSpec::Overlapped,
            FaultPlan::None,
        ))
        .unwrap()
        .run(0)
        .coloring_latency
    };
    assert_eq!(lat(TreeKind::Binomial), 64);
    let opt = lat(TreeKind::Optimal { l: 2, o: 1 });
    assert!(opt < lat(TreeKind::Lame { k: 2 }));
    assert!(lat(TreeKind::Lame { k: 2 }) < 64);
}

#[test]
fn gossip_with_checked_correction_colors_everybody() {
    let spec = BcastSpec {
        procs: 4096,
        logp: LogPParams { l: 2, o: 1, g: 0 },
        dissemination: DissemSpec::Gossip { duration: 30 },
        correction: Correction::Checked,
        start: StartSpec::Synchronized,
        ack: false,
        faults: FaultPlan::Fraction(0.01),
    };
    let mut sim = BcastSim::new(spec).unwrap();
    for seed in seeds(0, 10) {
        let m = sim.run(seed);
        assert_eq!(m.uncolored, 0, "{}", replay(seed, "behaviour"));
        assert!(m.gossip_messages > 4096);
    }
}

/// Opportunistic correction with distance d covers every gap of at most 2d processes, and the
/// optimization must not lose that: whatever a process skips, a participant to its right
/// covers. (Applying the skip rule to messages from both sides loses coverage: two
/// participants each skip the ranks they expect the other to cover.)
#[test]
fn optimized_opportunistic_covers_every_gap_up_to_2d() {
    let mut checked_runs = 0;
    for optimized in [false, true] {
        for start in [StartSpec::Synchronized, StartSpec::Overlapped] {
            let c = Correction::Opportunistic {
                distance: 4,
                optimized,
                relay: false,
            };
            let mut sim = binomial(FaultPlan::Fraction(0.02), c, start);
            for seed in seeds(0, scaled(60, 15)) {
                let m = sim.run(seed);
                if m.max_gap <= 8 {
                    checked_runs += 1;
                    assert_eq!(
                        m.uncolored,
                        0,
                        "{optimized} {start:?}; {}",
                        replay(seed, "behaviour")
                    );
                }
            }
        }
    }
    assert!(checked_runs > 20);
}
