//! Seeded simulation tests: many seeds per scenario, invariants after every step.
//!
//! `STEADFAST_SIM_SEEDS=n` changes the number of seeds per scenario;
//! `STEADFAST_SEED=s` replays one seed with a trace of the last steps.

use std::time::Duration;

use super::scenario::{run, Outcome, Scenario};

const DEFAULT_SEEDS: u64 = 200;

fn seeds() -> u64 {
    std::env::var("STEADFAST_SIM_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(DEFAULT_SEEDS)
}

fn sweep(s: Scenario, test: &str) -> Vec<Outcome> {
    let replay: Option<u64> = std::env::var("STEADFAST_SEED").ok().and_then(|s| s.parse().ok());
    let list: Vec<u64> = match replay {
        Some(seed) => vec![seed],
        None => (0..seeds()).map(|i| i.wrapping_mul(0x9e37_79b9).wrapping_add(s as u64 * 1_000_003)).collect(),
    };
    let mut out = Vec::new();
    for seed in list {
        let trace_len = if replay.is_some() { 20_000 } else { 0 };
        let r = std::panic::catch_unwind(|| run(s, seed, trace_len));
        let reason = match r {
            Ok(Ok(o)) => {
                out.push(o);
                continue;
            }
            Ok(Err(f)) => {
                if !f.trace.is_empty() {
                    eprintln!("{}", f.trace);
                }
                f.reason
            }
            Err(_) => "panic inside the simulation".to_string(),
        };
        panic!(
            "{s:?} failed at seed {seed}: {reason}\nreplay: STEADFAST_SEED={seed} cargo test -p steadfast-membership --lib sim::tests::{test} -- --nocapture"
        );
    }
    if let Some(max) = out.iter().map(|o| o.settle).max() {
        let mean = out.iter().map(|o| o.settle).sum::<Duration>() / out.len() as u32;
        eprintln!("{s:?}: {} seeds, settle mean {mean:?} max {max:?}", out.len());
    }
    out
}

#[test]
fn single_failure() {
    sweep(Scenario::Single, "single_failure");
}

#[test]
fn multiple_simultaneous_failures() {
    sweep(Scenario::Multiple, "multiple_simultaneous_failures");
}

#[test]
fn root_failure() {
    sweep(Scenario::Root, "root_failure");
}

#[test]
fn chained_root_failures() {
    sweep(Scenario::ChainedRoot, "chained_root_failures");
}

#[test]
fn root_and_top_nodes_fail_together() {
    sweep(Scenario::TopNodes, "root_and_top_nodes_fail_together");
}

#[test]
fn failures_during_stabilization() {
    sweep(Scenario::DuringStabilization, "failures_during_stabilization");
}

#[test]
fn joins_and_rejoins() {
    sweep(Scenario::Joins, "joins_and_rejoins");
}

#[test]
fn joins_during_stabilization() {
    sweep(Scenario::JoinsDuringStabilization, "joins_during_stabilization");
}

#[test]
fn partitions_that_heal() {
    sweep(Scenario::Partition, "partitions_that_heal");
}

#[test]
fn false_suspicions() {
    sweep(Scenario::FalseSuspicion, "false_suspicions");
}

#[test]
fn chaos() {
    sweep(Scenario::Chaos, "chaos");
}
