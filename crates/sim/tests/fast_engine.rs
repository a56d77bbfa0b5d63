//! The specialized engine (synchronized checked correction over trees) gives exactly the
//! generic engine's results: every metric and every process's coloring, seed by seed, over
//! random configurations (trees, numberings, process counts including non-powers of two,
//! fault rates from 0 to 50 %, LogP parameters, correction start times).

mod common;

use common::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use steadfast_coll::{Correction, Numbering, TreeKind};
use steadfast_sim::{
    BcastSim, BcastSpec, DissemSpec, EngineChoice, FaultPlan, LogPParams, StartSpec,
};

/// A random configuration the fast engine applies to, drawn from `seed`.
fn config(seed: u64) -> BcastSpec {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let logp = [(2, 0), (2, 1), (0, 0), (1, 1), (5, 0), (3, 1)][rng.gen_range(0..6)];
    let logp = LogPParams {
        l: logp.0,
        o: 1,
        g: logp.1,
    };
    let kind = match rng.gen_range(0..8) {
        0 => TreeKind::Binomial,
        1 => TreeKind::KAry { k: 1 },
        2 => TreeKind::KAry { k: 2 },
        3 => TreeKind::KAry { k: 4 },
        4 => TreeKind::Lame { k: 2 },
        5 => TreeKind::Lame { k: 3 },
        6 => TreeKind::Optimal { l: 2, o: 1 },
        _ => TreeKind::Optimal {
            l: logp.l as u32,
            o: 1,
        },
    };
    let numbering = if rng.gen_bool(0.5) {
        Numbering::Interleaved
    } else {
        Numbering::InOrder
    };
    let procs: u32 = match rng.gen_range(0..6) {
        0 => rng.gen_range(2..10),
        1 => rng.gen_range(10..100),
        2 => [64, 128, 256, 1024][rng.gen_range(0..4)],
        _ => rng.gen_range(100..scaled(3000, 600) as u32),
    };
    // A chain (1-ary tree) costs O(P) per process in the tree code, in-order even more.
    let (numbering, procs) = match kind {
        TreeKind::KAry { k: 1 } => (Numbering::Interleaved, procs.min(300)),
        _ => (numbering, procs),
    };
    let faults = match rng.gen_range(0..9) {
        0 => FaultPlan::None,
        1 => FaultPlan::Fraction(0.0),
        2 => FaultPlan::Fraction(0.001),
        3 | 4 => FaultPlan::Fraction(0.01),
        5 | 6 => FaultPlan::Fraction(0.04),
        7 => FaultPlan::Fraction([0.1, 0.2, 0.5][rng.gen_range(0..3)]),
        _ => {
            let n = rng.gen_range(1..procs.min(6));
            let mut ranks: Vec<u32> = (0..n).map(|_| rng.gen_range(1..procs)).collect();
            ranks.sort_unstable();
            ranks.dedup();
            FaultPlan::List(ranks)
        }
    };
    let start = if rng.gen_bool(0.75) {
        StartSpec::Synchronized
    } else {
        // Any start at or after the end of dissemination.
        StartSpec::SynchronizedAt(u64::MAX)
    };
    BcastSpec {
        procs,
        logp,
        dissemination: DissemSpec::Tree { kind, numbering },
        correction: Correction::Checked,
        start,
        ack: false,
        faults,
    }
}

fn compare(spec: BcastSpec, runs: &[u64], seed: u64) {
    let mut spec = spec;
    if spec.start == StartSpec::SynchronizedAt(u64::MAX) {
        let latency = BcastSim::new(spec.clone()).unwrap().dissemination_latency();
        spec.start = StartSpec::SynchronizedAt(latency + seed % 7);
    }
    let mut fast = BcastSim::new(spec.clone()).unwrap();
    let mut generic = BcastSim::with_engine(spec.clone(), EngineChoice::Generic).unwrap();
    assert!(fast.is_fast(), "{spec:?}: {}", replay(seed, "fast_engine"));
    assert!(!generic.is_fast());
    for &run in runs {
        let a = generic.run(run);
        let b = fast.run(run);
        assert_eq!(
            a,
            b,
            "run {run} of {spec:?}: {}",
            replay(seed, "fast_engine")
        );
        for r in 0..spec.procs {
            assert_eq!(
                generic.liveness().ever_fails(r),
                fast.liveness().ever_fails(r)
            );
            assert_eq!(
                generic.colored(r),
                fast.colored(r),
                "rank {r}, run {run} of {spec:?}: {}",
                replay(seed, "fast_engine")
            );
        }
    }
}

#[test]
fn fast_engine_matches_generic_engine() {
    for seed in seeds(0, scaled(400, 60)) {
        compare(config(seed), &[seed, seed ^ 0x5eed, 1 + seed * 7], seed);
    }
}

#[test]
fn fast_engine_matches_generic_engine_at_paper_scale() {
    // Table 1 at the paper's P = 65536, the four tree types, 1 % and 4 % faults.
    if cfg!(debug_assertions) {
        return;
    }
    for (i, kind) in [
        TreeKind::Binomial,
        TreeKind::KAry { k: 4 },
        TreeKind::Lame { k: 2 },
        TreeKind::Optimal { l: 2, o: 1 },
    ]
    .into_iter()
    .enumerate()
    {
        for rate in [0.01, 0.04] {
            let spec = tree_spec(
                65536,
                kind,
                Numbering::Interleaved,
                Correction::Checked,
                StartSpec::Synchronized,
                FaultPlan::Fraction(rate),
            );
            compare(spec, &[i as u64, 100 + i as u64], i as u64);
        }
    }
}

#[test]
fn other_configurations_stay_on_the_generic_engine() {
    let base = tree_spec(
        100,
        TreeKind::Binomial,
        Numbering::Interleaved,
        Correction::Checked,
        StartSpec::Synchronized,
        FaultPlan::Fraction(0.04),
    );
    assert!(BcastSim::new(base.clone()).unwrap().is_fast());
    let latency = BcastSim::new(base.clone()).unwrap().dissemination_latency();
    let others = [
        BcastSpec {
            correction: Correction::Delayed { delay: 4 },
            ..base.clone()
        },
        BcastSpec {
            start: StartSpec::Overlapped,
            ..base.clone()
        },
        BcastSpec {
            start: StartSpec::SynchronizedAt(latency - 1),
            ..base.clone()
        },
        BcastSpec {
            logp: LogPParams { l: 2, o: 2, g: 0 },
            ..base.clone()
        },
        BcastSpec {
            logp: LogPParams { l: 2, o: 1, g: 2 },
            ..base.clone()
        },
        BcastSpec {
            faults: FaultPlan::Crash {
                fraction: 0.02,
                from: 0,
                until: 10,
            },
            ..base.clone()
        },
        BcastSpec {
            procs: 1,
            faults: FaultPlan::None,
            ..base.clone()
        },
        BcastSpec {
            dissemination: DissemSpec::Gossip { duration: 10 },
            ..base.clone()
        },
    ];
    for spec in others {
        assert!(!BcastSim::new(spec.clone()).unwrap().is_fast(), "{spec:?}");
    }
    assert!(!BcastSim::with_engine(base, EngineChoice::Generic)
        .unwrap()
        .is_fast());
}
