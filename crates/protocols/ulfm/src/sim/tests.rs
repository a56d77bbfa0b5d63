//! Seeded simulation tests: many seeds per scenario, invariants after every step.
//!
//! `STEADFAST_SIM_SEEDS=n` changes the number of seeds per scenario;
//! `STEADFAST_SEED=s` replays one seed with a trace of the last steps.

use std::time::Duration;

use steadfast_proto::sweep as harness;

use super::scenario::{run, Scenario};
use super::{Crash, CrashWhen, OpKind, Params, Sim};
use crate::Config;

const DEFAULT_SEEDS: u64 = 400;

fn sweep(s: Scenario, test: &str) {
    let replaying = harness::replay().is_some();
    let trace_len = if replaying { 5_000 } else { 0 };
    let seeds = harness::seeds(DEFAULT_SEEDS, |i| harness::spread(i, s as u64 * 1_000_003));
    let replay = format!("cargo test -p steadfast-ulfm --lib sim::tests::{test} -- --nocapture");
    let out = harness::sweep(&format!("{s:?}"), &replay, &seeds, |seed| {
        run(s, seed, trace_len).map_err(|f| {
            if !f.trace.is_empty() {
                eprintln!("{}", f.trace);
            }
            f.reason
        })
    });
    let (mut msgs, mut inst, mut crashed, mut worst) = (0u64, 0u64, 0u64, 0f64);
    for o in &out {
        msgs += o.sent.iter().sum::<u64>();
        inst += o.instances;
        crashed += o.crashed as u64;
        worst = worst.max(o.max_rounds);
    }
    eprintln!(
        "{s:?}: {} seeds, {inst} instances, {crashed} crashes, {:.1} messages per instance, worst latency {worst:.2} max delays after the last fault/start",
        seeds.len(),
        msgs as f64 / inst.max(1) as f64
    );
}

#[test]
fn fault_free() {
    sweep(Scenario::FaultFree, "fault_free");
}

#[test]
fn crashes_before() {
    sweep(Scenario::CrashBefore, "crashes_before");
}

#[test]
fn crashes_during() {
    sweep(Scenario::CrashDuring, "crashes_during");
}

#[test]
fn coordinator_crashes_mid_send() {
    sweep(Scenario::Coordinator, "coordinator_crashes_mid_send");
}

#[test]
fn simultaneous_crashes() {
    sweep(Scenario::Simultaneous, "simultaneous_crashes");
}

#[test]
fn revoke_initiator_dies_mid_flood() {
    sweep(Scenario::RevokeFlood, "revoke_initiator_dies_mid_flood");
}

#[test]
fn crashes_after() {
    sweep(Scenario::CrashAfter, "crashes_after");
}

#[test]
fn chaos() {
    sweep(Scenario::Chaos, "chaos");
}

#[test]
fn false_suspicions_then_kill() {
    sweep(Scenario::FalseSuspicion, "false_suspicions_then_kill");
}

#[test]
fn lossy_with_resends() {
    sweep(Scenario::Lossy, "lossy_with_resends");
}

/// Fixed-latency runs for the numbers in `docs/ulfm.md`: messages per agreement and
/// latency in message delays, fault-free and with the coordinator dying.
fn fixed(n: u32, crashes: Vec<Crash>, notice: Duration) -> (u64, f64) {
    let d = Duration::from_micros(10);
    let p = Params {
        n,
        cfg: Config::default(),
        ops: vec![OpKind::Agree],
        nonblocking: false,
        delay: (d, d),
        notice: (notice, notice),
        think: (Duration::ZERO, Duration::ZERO),
        spread: Duration::ZERO,
        crashes,
        revokes: Vec::new(),
        ack_pm: 0,
        loss_pm: 0,
        lost_from_dead_pm: 1000,
        check_bound: true,
    };
    let mut sim = Sim::new(p, 1, 0).unwrap();
    let o = sim.run().unwrap_or_else(|f| panic!("{}", f.reason));
    let total = o.sent.iter().sum();
    (total, o.last_decision.as_secs_f64() / d.as_secs_f64())
}

#[test]
fn message_counts_and_rounds() {
    for n in [4u32, 8, 16] {
        let (msgs, rounds) = fixed(n, Vec::new(), Duration::ZERO);
        assert_eq!(msgs, 4 * (n as u64 - 1));
        // VOTE, PROPOSE, ACK, DECIDE.
        assert!((rounds - 4.0).abs() < 1e-9, "n={n}: {rounds} rounds");
        // The coordinator crashes after its PROPOSE round, before any DECIDE; the
        // notices arrive one delay later; rank 1 takes over.
        let crash = Crash {
            who: 0,
            when: CrashWhen::AfterSends {
                from: Duration::ZERO,
                sends: n - 1,
                deadline: Duration::from_secs(1),
            },
        };
        let (msgs1, rounds1) = fixed(n, vec![crash], Duration::from_micros(10));
        eprintln!(
            "n={n}: fault-free {msgs} messages, {rounds:.0} delays; coordinator dies before DECIDE: {msgs1} messages, decided after {rounds1:.0} delays"
        );
        assert!(rounds1 <= 4.0 + 1.0 + 5.0, "n={n}: {rounds1}");
    }
}
