//! Crashes during correction. Checked correction guarantees coloring only if no participant
//! fails during correction; failure-proof correction with `crashes = f` tolerates f.

mod common;

use common::*;
use steadfast_coll::{Correction, Numbering, TreeKind};
use steadfast_sim::{BcastSim, FaultPlan, StartSpec};

/// P = 64 interleaved binomial, L = 2, o = 1: correction starts at T0 = 24. Killing 16..19
/// leaves the live ranks 48..51 uncolored between participants 47 and 52. Rank 47 crashes
/// after its first (leftward) message has left, 52 after its first two: both neighbours (46
/// and 53) hear from them and stop after covering two ranks each, so nobody covers 49.
fn counterexample() -> FaultPlan {
    let mut at: Vec<(u32, u64)> = (16..=19).map(|r| (r, 0)).collect();
    at.push((47, 26));
    at.push((52, 27));
    FaultPlan::At(at)
}

#[test]
fn two_crashes_during_checked_correction_can_leave_a_process_uncolored() {
    let mut sim = BcastSim::new(tree_spec(
        64,
        TreeKind::Binomial,
        Numbering::Interleaved,
        Correction::Checked,
        StartSpec::Synchronized,
        counterexample(),
    ))
    .unwrap();
    assert_eq!(sim.sync_at(), Some(24));
    let m = sim.run(0);
    assert_eq!(m.uncolored, 1);
    assert!(sim.colored(49).is_none());
}

#[test]
fn failure_proof_correction_survives_the_same_crashes() {
    for crashes in [2, 3] {
        let mut sim = BcastSim::new(tree_spec(
            64,
            TreeKind::Binomial,
            Numbering::Interleaved,
            Correction::FailureProof { crashes },
            StartSpec::Synchronized,
            counterexample(),
        ))
        .unwrap();
        assert_eq!(sim.run(0).uncolored, 0, "crashes = {crashes}");
    }
}

#[test]
fn failure_proof_tolerates_up_to_f_random_crashes() {
    for seed in seeds(1, scaled(100, 25)) {
        for f in [1u32, 2, 3] {
            for kind in [TreeKind::Binomial, TreeKind::KAry { k: 4 }] {
                for start in [StartSpec::Synchronized, StartSpec::Overlapped] {
                    let procs = 300;
                    // Exactly f crashes, anywhere during dissemination or correction.
                    let faults = FaultPlan::Crash {
                        fraction: f64::from(f) / f64::from(procs),
                        from: 0,
                        until: 60,
                    };
                    let mut sim = BcastSim::new(tree_spec(
                        procs,
                        kind,
                        Numbering::Interleaved,
                        Correction::FailureProof { crashes: f },
                        start,
                        faults,
                    ))
                    .unwrap();
                    let m = sim.run(seed);
                    assert_eq!(m.failed, f);
                    assert_eq!(
                        m.uncolored,
                        0,
                        "f={f} {kind:?} {start:?}; {}",
                        replay(seed, "crashes")
                    );
                }
            }
        }
    }
}

#[test]
fn failure_proof_costs_two_messages_per_tolerated_crash_fault_free() {
    for f in 0..3u32 {
        let mut sim = BcastSim::new(tree_spec(
            1024,
            TreeKind::Binomial,
            Numbering::Interleaved,
            Correction::FailureProof { crashes: f },
            StartSpec::Synchronized,
            FaultPlan::None,
        ))
        .unwrap();
        let m = sim.run(0);
        assert_eq!(
            m.correction_messages,
            u64::from(5 + 2 * f) * 1024,
            "f = {f}"
        );
    }
}
