//! Exact replay: the metrics of a grid of seeded runs hash to a recorded digest.
//!
//! The digest was recorded with the engine before its performance rework and reproduced
//! unchanged after it; any change of simulated behaviour (event order, LogP timing, protocol
//! decisions, fault draws) changes it. When a change of behaviour is intended, rerun with
//! `STEADFAST_PRINT_DIGEST=1 cargo test -p steadfast-sim --test replay_digest -- --nocapture`,
//! check the diff of the printed lines against the previous build, and update `EXPECTED`.
//! (`cargo run --release -p steadfast-sim --example golden` prints a larger grid.)

use steadfast_sim::cli::{NumberingArg, SpecArgs};
use steadfast_sim::runner::run_seed;
use steadfast_sim::BcastSim;

const EXPECTED: u64 = 0xc737_f059_a579_bc0e;

fn spec(
    tree: &str,
    numbering: NumberingArg,
    correction: &str,
    start: &str,
    faults: &str,
) -> SpecArgs {
    SpecArgs {
        tree: tree.into(),
        numbering,
        correction: correction.into(),
        start: start.into(),
        ack: false,
        relay: false,
        procs: 257,
        l: 2,
        o: 1,
        g: 0,
        faults: faults.into(),
    }
}

fn grid() -> Vec<SpecArgs> {
    let mut grid = Vec::new();
    for tree in ["binomial", "kary:3", "lame:2", "optimal"] {
        for numbering in [NumberingArg::Interleaved, NumberingArg::InOrder] {
            for correction in [
                "none",
                "checked",
                "failure-proof:2",
                "delayed:5",
                "optimized:2",
            ] {
                for start in ["auto", "overlapped"] {
                    for faults in ["4%", "crash:3%@0..30"] {
                        grid.push(spec(tree, numbering, correction, start, faults));
                    }
                }
            }
        }
    }
    for faults in ["none", "5%"] {
        let mut s = spec("kary:2", NumberingArg::Interleaved, "none", "auto", faults);
        s.ack = true;
        grid.push(s);
        grid.push(spec(
            "gossip:8",
            NumberingArg::Interleaved,
            "checked",
            "auto",
            faults,
        ));
        let mut s = spec(
            "binomial",
            NumberingArg::Interleaved,
            "opportunistic:2",
            "overlapped",
            faults,
        );
        s.relay = true;
        grid.push(s);
        let mut s = spec(
            "binomial",
            NumberingArg::Interleaved,
            "checked",
            "auto",
            faults,
        );
        (s.l, s.o, s.g) = (3, 2, 4);
        grid.push(s);
    }
    grid
}

#[test]
fn seeded_runs_replay_exactly() {
    let print = std::env::var_os("STEADFAST_PRINT_DIGEST").is_some();
    // FNV-1a over the debug form of every run's metrics.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut runs = 0;
    for (i, a) in grid().iter().enumerate() {
        let spec = a
            .to_spec()
            .unwrap_or_else(|e| panic!("grid entry {i}: {e}"));
        let mut sim = BcastSim::new(spec).unwrap_or_else(|e| panic!("grid entry {i}: {e}"));
        for k in 0..2 {
            let m = sim.run(run_seed(i as u64, k));
            let line = format!("{i} {m:?}\n");
            if print {
                print!("{line}");
            }
            for b in line.bytes() {
                h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
            }
            runs += 1;
        }
    }
    assert_eq!(runs, 2 * grid().len());
    assert_eq!(
        h, EXPECTED,
        "simulated behaviour changed: digest {h:#x} over {runs} runs (see the module comment)"
    );
}
