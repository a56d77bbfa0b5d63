//! Prints the metrics of a grid of seeded runs, one line per run, so two builds of the
//! simulator can be compared for bit-identical results (`diff` the outputs).
//!
//! `cargo run --release -p steadfast-sim --example golden > before.txt`

use steadfast_sim::cli::{NumberingArg, SpecArgs};
use steadfast_sim::runner::run_seed;
use steadfast_sim::BcastSim;

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
        procs: 1000,
        l: 2,
        o: 1,
        g: 0,
        faults: faults.into(),
    }
}

fn main() {
    let seeds: u64 = std::env::var("SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4);
    let mut grid = Vec::new();
    let trees = ["binomial", "kary:2", "kary:4", "lame:2", "optimal"];
    let corrections = [
        "none",
        "checked",
        "failure-proof:1",
        "failure-proof:3",
        "delayed",
        "delayed:7",
        "opportunistic:2",
        "optimized:3",
    ];
    let faults = ["none", "1%", "4%", "crash:2%@0..40", "crash:5%@10..60"];
    for tree in trees {
        for numbering in [NumberingArg::Interleaved, NumberingArg::InOrder] {
            for correction in corrections {
                for start in ["auto", "sync", "overlapped"] {
                    for f in faults {
                        grid.push(spec(tree, numbering, correction, start, f));
                    }
                }
            }
        }
    }
    for f in faults {
        for tree in ["kary:2", "binomial"] {
            let mut s = spec(tree, NumberingArg::Interleaved, "none", "auto", f);
            s.ack = true;
            grid.push(s);
        }
        for correction in ["none", "checked", "delayed", "failure-proof:2"] {
            grid.push(spec(
                "gossip",
                NumberingArg::Interleaved,
                correction,
                "auto",
                f,
            ));
            grid.push(spec(
                "gossip:9",
                NumberingArg::Interleaved,
                correction,
                "sync",
                f,
            ));
        }
        let mut s = spec(
            "binomial",
            NumberingArg::Interleaved,
            "opportunistic:3",
            "overlapped",
            f,
        );
        s.relay = true;
        grid.push(s);
        let mut s = spec(
            "lame:3",
            NumberingArg::InOrder,
            "opportunistic:2",
            "overlapped",
            f,
        );
        s.relay = true;
        grid.push(s);
        for (l, o, g) in [(5, 1, 0), (3, 2, 0), (2, 1, 3), (0, 2, 1)] {
            for correction in ["checked", "delayed", "optimized:2", "none"] {
                let mut s = spec("binomial", NumberingArg::Interleaved, correction, "auto", f);
                (s.l, s.o, s.g) = (l, o, g);
                grid.push(s.clone());
                s.tree = "optimal".into();
                grid.push(s);
            }
        }
    }
    for procs in [1, 2, 3, 7, 64, 65, 4097] {
        for correction in ["checked", "delayed", "none", "failure-proof:1"] {
            let mut s = spec(
                "binomial",
                NumberingArg::Interleaved,
                correction,
                "auto",
                "4%",
            );
            s.procs = procs;
            grid.push(s.clone());
            s.numbering = NumberingArg::InOrder;
            grid.push(s);
        }
    }
    let mut big = spec(
        "binomial",
        NumberingArg::Interleaved,
        "checked",
        "auto",
        "1%",
    );
    big.procs = 65536;
    grid.push(big);
    let mut ok = 0;
    for (i, a) in grid.iter().enumerate() {
        let Ok(s) = a.to_spec() else {
            println!("{i} invalid {a:?}");
            continue;
        };
        let Ok(mut sim) = BcastSim::new(s) else {
            println!("{i} rejected {a:?}");
            continue;
        };
        ok += 1;
        for k in 0..seeds {
            let m = sim.run(run_seed(i as u64, k));
            println!("{i} {m:?}");
        }
    }
    eprintln!("{ok} of {} configurations ran", grid.len());
}
