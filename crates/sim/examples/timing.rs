use std::time::Instant;
use steadfast_coll::{Correction, Numbering, TreeKind};
use steadfast_sim::*;

fn main() {
    let spec = BcastSpec {
        procs: std::env::var("P")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(65536),
        logp: LogPParams { l: 2, o: 1, g: 0 },
        dissemination: DissemSpec::Tree {
            kind: TreeKind::Binomial,
            numbering: Numbering::Interleaved,
        },
        correction: Correction::Checked,
        start: StartSpec::Synchronized,
        ack: false,
        faults: FaultPlan::Fraction(0.01),
    };
    let mut sim = BcastSim::new(spec).unwrap();
    let mut times = vec![];
    let mut walls = vec![];
    let mut last = None;
    for s in 0..200 {
        let w = Instant::now();
        let t = steadfast_sim::cputime::thread_cpu_time();
        let m = sim.run(s);
        times.push((steadfast_sim::cputime::thread_cpu_time() - t).as_secs_f64() * 1e3);
        walls.push(w.elapsed().as_secs_f64() * 1e3);
        last = Some(m);
    }
    times.sort_by(|a, b| a.partial_cmp(b).unwrap());
    walls.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!(
        "cpu median {:.3} ms p10 {:.3} p90 {:.3}; wall median {:.3}",
        times[100], times[20], times[180], walls[100]
    );
    println!("{:?}", last.unwrap());
}
