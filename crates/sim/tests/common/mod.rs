//! Helpers shared by the simulator tests.
#![allow(dead_code)]

use steadfast_coll::{Correction, Numbering, TreeKind};
use steadfast_sim::{BcastSpec, DissemSpec, FaultPlan, LogPParams, StartSpec};

/// Seeds to run: `STEADFAST_SEED=<s>` replays exactly one, otherwise `count` seeds from `base`.
pub fn seeds(base: u64, count: u64) -> Vec<u64> {
    match std::env::var("STEADFAST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        Some(s) => vec![s],
        None => (base..base + count).collect(),
    }
}

/// `release` in optimized builds, `debug` otherwise (keeps `cargo test` fast in both).
pub fn scaled(release: u64, debug: u64) -> u64 {
    if cfg!(debug_assertions) {
        debug
    } else {
        release
    }
}

/// One-line replay command for a failing seed.
pub fn replay(seed: u64, test: &str) -> String {
    format!("replay: STEADFAST_SEED={seed} cargo test -p steadfast-sim --test {test}")
}

pub const TREES: [TreeKind; 5] = [
    TreeKind::Binomial,
    TreeKind::KAry { k: 2 },
    TreeKind::KAry { k: 4 },
    TreeKind::Lame { k: 2 },
    TreeKind::Optimal { l: 2, o: 1 },
];

pub fn tree_spec(
    procs: u32,
    kind: TreeKind,
    numbering: Numbering,
    correction: Correction,
    start: StartSpec,
    faults: FaultPlan,
) -> BcastSpec {
    BcastSpec {
        procs,
        logp: LogPParams { l: 2, o: 1, g: 0 },
        dissemination: DissemSpec::Tree { kind, numbering },
        correction,
        start,
        ack: false,
        faults,
    }
}
