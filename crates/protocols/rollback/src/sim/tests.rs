//! The seeded sweep. `STEADFAST_SIM_SEEDS=n` changes the number of seeds (default 2000 in
//! release builds, which `make test` runs, 300 in debug builds); `STEADFAST_SEED=s`
//! replays one seed.

use steadfast_proto::sweep as harness;

use super::*;

const DEFAULT_SEEDS: u64 = if cfg!(debug_assertions) { 300 } else { 2000 };

/// Every seed must keep every invariant, and together they must have gone through every
/// path (commits with in-transit packets, crashes during waves, commits and restarts, each
/// kind of abort, restore timeouts, stale packets dropped, whole-job restarts).
#[test]
fn sweep() {
    let seeds = harness::seeds(DEFAULT_SEEDS, |i| i);
    let replay =
        "cargo test --release -p steadfast-rollback --lib sim::tests::sweep -- --nocapture";
    let outs = harness::sweep("rollback", replay, &seeds, |seed| {
        let p = Params::from_seed(seed);
        Sim::new(p.clone(), seed)
            .run()
            .map_err(|f| format!("{f}\nparams: {p:?}"))
    });
    let mut t = Outcome::default();
    for o in outs {
        t.app_messages += o.app_messages;
        t.commits += o.commits;
        t.in_transit_committed += o.in_transit_committed;
        t.aborted_timeout += o.aborted_timeout;
        t.aborted_storage += o.aborted_storage;
        t.aborted_failure += o.aborted_failure;
        t.rollbacks += o.rollbacks;
        t.restore_timeouts += o.restore_timeouts;
        t.crashes += o.crashes;
        t.crashes_at_commit += o.crashes_at_commit;
        t.crashes_during_restore += o.crashes_during_restore;
        t.crashes_after_report += o.crashes_after_report;
        t.job_restarts += o.job_restarts;
        t.redelivered += o.redelivered;
        t.stale_dropped += o.stale_dropped;
        t.late_markers += o.late_markers;
        t.group_crashes += o.group_crashes;
        t.program_ops += o.program_ops;
        t.faults_mid_program += o.faults_mid_program;
        t.damaged += o.damaged;
        t.on_demand += o.on_demand;
        t.fallbacks += o.fallbacks;
    }
    eprintln!("{} seeds: {t:#?}", seeds.len());
    if harness::replay().is_some() {
        return;
    }
    for (what, n) in [
        ("commits", t.commits),
        ("in-transit packets committed", t.in_transit_committed),
        ("waves aborted by timeout", t.aborted_timeout),
        ("waves aborted by a storage failure", t.aborted_storage),
        ("waves aborted by a rank failure", t.aborted_failure),
        ("rollbacks", t.rollbacks),
        ("crashes at a commit", t.crashes_at_commit),
        ("crashes during a restore", t.crashes_during_restore),
        ("crashes while a DONE is on its way", t.crashes_after_report),
        ("in-transit packets re-delivered", t.redelivered),
        ("stale packets dropped", t.stale_dropped),
        ("late markers ignored", t.late_markers),
        ("whole-job restarts", t.job_restarts),
        ("restore timeouts", t.restore_timeouts),
        ("crashes of several ranks at once", t.group_crashes),
        ("crashes while the program runs", t.faults_mid_program),
        ("damaged images", t.damaged),
        ("checkpoints on demand", t.on_demand),
        ("fallbacks to an earlier commit", t.fallbacks),
    ] {
        assert!(n > 0, "the sweep never exercised {what}: {t:#?}");
    }
}

/// Each way a host can break its side of the contract is caught within a few seeds: the
/// checks above can fail.
#[test]
fn broken_hosts_are_caught() {
    if harness::replay().is_some() {
        return;
    }
    for s in [
        Sabotage::SkipRedelivery,
        Sabotage::DoubleRedelivery,
        Sabotage::ImageWithoutQueue,
        Sabotage::IgnoreDrop,
        Sabotage::NoFallback,
    ] {
        let caught =
            (0..200).find_map(|seed| Sim::sabotaged(Params::from_seed(seed), seed, s).run().err());
        match caught {
            Some(f) => eprintln!("{s:?}: seed {}: {}", f.seed, f.reason),
            None => panic!("a host with {s:?} passes 200 seeds"),
        }
    }
}
