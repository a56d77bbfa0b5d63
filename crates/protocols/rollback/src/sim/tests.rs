use super::*;

fn seeds() -> Vec<u64> {
    if let Ok(s) = std::env::var("STEADFAST_SEED") {
        if let Ok(seed) = s.trim().parse() {
            return vec![seed];
        }
    }
    let count = std::env::var("STEADFAST_SIM_SEEDS")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1000u64);
    (0..count).collect()
}

/// The seeded sweep: every seed must keep every invariant, and together they must have
/// gone through every path (commits with in-transit messages, crashes during waves, commits
/// and restarts, each kind of abort, restore timeouts, stale and late messages dropped).
#[test]
fn sweep() {
    let mut total = Outcome::default();
    let seeds = seeds();
    let single = seeds.len() == 1;
    for seed in seeds {
        let p = Params::from_seed(seed);
        match Sim::new(p.clone(), seed).run() {
            Ok(o) => {
                total.app_messages += o.app_messages;
                total.commits += o.commits;
                total.in_transit_committed += o.in_transit_committed;
                total.aborted_timeout += o.aborted_timeout;
                total.aborted_storage += o.aborted_storage;
                total.aborted_failure += o.aborted_failure;
                total.rollbacks += o.rollbacks;
                total.restore_timeouts += o.restore_timeouts;
                total.crashes += o.crashes;
                total.crashes_at_commit += o.crashes_at_commit;
                total.crashes_during_restore += o.crashes_during_restore;
                total.redelivered += o.redelivered;
                total.job_restarts += o.job_restarts;
                total.stale_dropped += o.stale_dropped;
                total.late_markers += o.late_markers;
            }
            Err(f) => panic!("{f}\nparams: {p:?}"),
        }
    }
    eprintln!("{total:#?}");
    if single {
        return;
    }
    let t = total;
    for (what, n) in [
        ("commits", t.commits),
        ("in-transit messages committed", t.in_transit_committed),
        ("waves aborted by timeout", t.aborted_timeout),
        ("waves aborted by a storage failure", t.aborted_storage),
        ("waves aborted by a rank failure", t.aborted_failure),
        ("rollbacks", t.rollbacks),
        ("crashes at a commit", t.crashes_at_commit),
        ("crashes during a restore", t.crashes_during_restore),
        ("in-transit messages re-delivered", t.redelivered),
        ("whole-job restarts", t.job_restarts),
        ("restore timeouts", t.restore_timeouts),
        ("stale messages dropped", t.stale_dropped),
    ] {
        assert!(n > 0, "the sweep never exercised {what}: {t:#?}");
    }
}
