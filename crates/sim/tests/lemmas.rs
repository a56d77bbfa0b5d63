//! Lemma 2, Corollary 1 and Lemma 3 of the paper, checked on the simulator.

mod common;

use common::*;
use steadfast_coll::{Correction, Numbering, TreeKind};
use steadfast_sim::{BcastSim, FaultPlan, LogPParams, StartSpec};

/// Lemma 2 / Corollary 1 with ⌊L/o⌋ replaced by ⌈L/o⌉: a process decides each send when its
/// send channel frees, so it still sends in every slot that starts before the stopping message
/// has been received (3o + L). The paper's ⌊L/o⌋ form is exact when o divides L.
fn lemma2(l: u64, o: u64) -> (u64, u64) {
    let c = l.div_ceil(o);
    (4 * o + l + c * o, 3 + c)
}

#[test]
fn lemma2_and_corollary1_over_a_grid() {
    for l in 0..=8u64 {
        for o in 1..=4u64 {
            for kind in [
                TreeKind::Binomial,
                TreeKind::KAry { k: 3 },
                TreeKind::Lame { k: 2 },
            ] {
                for procs in [64u32, scaled(1000, 200) as u32] {
                    let mut spec = tree_spec(
                        procs,
                        kind,
                        Numbering::Interleaved,
                        Correction::Checked,
                        StartSpec::Synchronized,
                        FaultPlan::None,
                    );
                    spec.logp = LogPParams { l, o, g: 0 };
                    let mut sim = BcastSim::new(spec).unwrap();
                    let m = sim.run(1);
                    let (latency, msgs) = lemma2(l, o);
                    assert_eq!(m.uncolored, 0);
                    assert_eq!(
                        m.correction_latency,
                        Some(latency),
                        "L={l} o={o} {kind:?} P={procs}"
                    );
                    assert_eq!(
                        m.correction_messages,
                        msgs * u64::from(procs),
                        "L={l} o={o} {kind:?} P={procs}"
                    );
                    if l % o == 0 {
                        let paper = 4 * o + l + (l / o) * o;
                        assert_eq!(latency, paper);
                        assert_eq!(msgs, 3 + l / o);
                    }
                }
            }
        }
    }
}

#[test]
fn paper_default_parameters_give_eight_steps_and_five_messages() {
    let procs = scaled(65536, 8192) as u32;
    for kind in TREES {
        let mut sim = BcastSim::new(tree_spec(
            procs,
            kind,
            Numbering::Interleaved,
            Correction::Checked,
            StartSpec::Synchronized,
            FaultPlan::None,
        ))
        .unwrap();
        let m = sim.run(0);
        assert_eq!(m.correction_latency, Some(8), "{kind:?}");
        assert_eq!(m.correction_messages, 5 * u64::from(procs), "{kind:?}");
        assert_eq!(m.max_gap, 0);
    }
}

/// Lemma 3: L_FF + g·o <= L_SCC <= L_FF + (2g + 1)·o for every run with faults.
#[test]
fn lemma3_bounds_hold_under_faults() {
    let mut violations = Vec::new();
    for kind in [TreeKind::Binomial, TreeKind::Lame { k: 2 }] {
        for frac in [0.01, 0.04] {
            let mut sim = BcastSim::new(tree_spec(
                8192,
                kind,
                Numbering::Interleaved,
                Correction::Checked,
                StartSpec::Synchronized,
                FaultPlan::Fraction(frac),
            ))
            .unwrap();
            for seed in seeds(100, scaled(40, 10)) {
                let m = sim.run(seed);
                let g = u64::from(m.max_gap);
                let l = m.correction_latency.unwrap();
                assert_eq!(m.uncolored, 0, "{}", replay(seed, "lemmas"));
                if l < 8 + g || l > 8 + 2 * g + 1 {
                    violations.push((kind, frac, seed, g, l));
                }
            }
        }
    }
    assert!(violations.is_empty(), "Lemma 3 violated: {violations:?}");
}
