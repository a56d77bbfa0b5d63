//! Seeded simulation tests: many seeds per scenario, invariants after every step.
//!
//! `STEADFAST_SIM_SEEDS=n` changes the number of seeds per scenario;
//! `STEADFAST_SEED=s` replays one seed with a trace of the last steps.

use std::time::Duration;

use steadfast_proto::sweep as harness;

use super::scenario::{run, Outcome, Scenario};

const DEFAULT_SEEDS: u64 = 300;

fn sweep(s: Scenario, test: &str) -> Vec<Outcome> {
    let replaying = harness::replay().is_some();
    let trace_len = if replaying { 20_000 } else { 0 };
    let seeds = harness::seeds(DEFAULT_SEEDS, |i| harness::spread(i, s as u64 * 1_000_003));
    let replay =
        format!("cargo test -p steadfast-membership --lib sim::tests::{test} -- --nocapture");
    let out = harness::sweep(&format!("{s:?}"), &replay, &seeds, |seed| {
        run(s, seed, trace_len).map_err(|f| {
            if !f.trace.is_empty() {
                eprintln!("{}", f.trace);
            }
            f.reason
        })
    });
    if let Some(max) = out.iter().map(|o| o.settle).max() {
        let mean = out.iter().map(|o| o.settle).sum::<Duration>() / out.len() as u32;
        let bound = out.iter().map(|o| o.bound).min().unwrap_or_default();
        let msgs = out.iter().map(|o| o.messages).sum::<u64>() / out.len() as u64;
        eprintln!("{s:?}: {} seeds, settle mean {mean:?} max {max:?} (smallest bound {bound:?}), {msgs} messages per run", out.len());
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
    sweep(
        Scenario::DuringStabilization,
        "failures_during_stabilization",
    );
}

#[test]
fn joins_and_rejoins() {
    sweep(Scenario::Joins, "joins_and_rejoins");
}

#[test]
fn joins_during_stabilization() {
    sweep(
        Scenario::JoinsDuringStabilization,
        "joins_during_stabilization",
    );
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

/// The latency model and the real state machines agree to the nanosecond: the machines,
/// driven over a fixed-latency network with the same processing costs, stabilize in
/// exactly the time [`crate::model::simulate_single_failure`] computes.
#[test]
fn latency_model_matches_the_state_machines() {
    use super::net::FixedLatency;
    use super::{Costs, Input, Observed, Sim};
    use crate::model::{example_detector, example_failed_node, simulate_single_failure, CostModel};
    use crate::{Body, Config, Event, Member};

    let costs = [
        CostModel {
            latency: Duration::from_nanos(4600),
            ocp: Duration::from_nanos(2000),
            ..CostModel::default()
        },
        CostModel {
            latency: Duration::from_micros(118),
            ocp: Duration::from_micros(2),
            ack_cost: Duration::from_micros(1),
            send_gap: Duration::from_nanos(700),
        },
    ];
    let sizes: Vec<u32> = (3..=40)
        .chain([64, 85, 86, 255, 256, 341, 342, 1000])
        .collect();
    let cfg = |k| Config {
        fanout_log2: k,
        ack_timeout: Duration::from_secs(10),
        report_timeout: Duration::from_secs(10),
        join_timeout: Duration::from_secs(10),
        probe_interval: None,
        probe_batch: 1,
        sync_interval: None,
        auto_rejoin: false,
    };
    for k in 1..=3u8 {
        for &n in &sizes {
            for cost in costs {
                let failed = example_failed_node(n, k);
                let detector = example_detector(n, failed);
                let model = simulate_single_failure(n, k, failed, detector, cost).unwrap();
                let mut sim = Sim::new(cfg(k), n, FixedLatency(cost.latency), 1).unwrap();
                sim.costs = Costs {
                    ocp: cost.ocp,
                    other: cost.ack_cost,
                    gap: cost.send_gap,
                };
                sim.observe = Some(Vec::new());
                sim.schedule(
                    Duration::from_millis(1),
                    Input::Suspect {
                        at: detector,
                        target: Member::new(failed, 0),
                    },
                );
                sim.run_until(Duration::from_secs(1)).unwrap();
                let obs = sim.observe.take().unwrap();
                let start = obs.iter().find_map(|o| match o {
                    Observed::Delivered {
                        at,
                        to: 0,
                        body: Body::NodeFailure { .. },
                    } => Some(*at),
                    _ => None,
                });
                let end = obs.iter().find_map(|o| match o {
                    Observed::Event {
                        at,
                        node: 0,
                        event: Event::StabilizationComplete { installed_at, .. },
                    } => Some((*at, *installed_at)),
                    _ => None,
                });
                let (Some(start), Some((end, installed_at))) = (start, end) else {
                    panic!("n={n} k={k}: no stabilization observed");
                };
                assert_eq!(end - start, model.ts, "n={n} k={k} cost={cost:?}");
                // What a runtime can measure alone: the event carries the start of Ts.
                assert_eq!(installed_at, start);
            }
        }
    }
}
