//! The seeded sweep. `STEADFAST_SIM_SEEDS=n` changes the number of seeds (default 600);
//! `STEADFAST_SEED=s` replays one seed and prints its parameters and outcome.

use steadfast_proto::sweep as harness;

use super::*;

const DEFAULT_SEEDS: u64 = 600;

fn run_one(seed: u64, edit: impl Fn(&mut Params)) -> Result<Outcome, String> {
    let mut p = Params::from_seed(seed);
    edit(&mut p);
    if harness::replay().is_some() {
        eprintln!("params: {p:?}");
    }
    Sim::new(p.clone(), seed)
        .run()
        .map_err(|f| format!("{f}\nparams: {p:?}"))
}

fn total(outs: &[Outcome]) -> Outcome {
    let mut t = Outcome::default();
    for o in outs {
        t.deliveries += o.deliveries;
        t.writes += o.writes;
        t.retransmits += o.retransmits;
        t.bad_frames += o.bad_frames;
        t.repeats += o.repeats;
        t.early += o.early;
        t.repairs += o.repairs;
        t.syncs += o.syncs;
        t.sync_nacks += o.sync_nacks;
        t.deferred += o.deferred;
        t.failovers_reported += o.failovers_reported;
        t.failovers_detected += o.failovers_detected;
        t.tree_sends += o.tree_sends;
        t.lost_after_cut += o.lost_after_cut;
        t.datagrams += o.datagrams;
        t.bad_datagrams += o.bad_datagrams;
        t.reassembled += o.reassembled;
        t.direct_writes += o.direct_writes;
        t.direct_reads += o.direct_reads;
        t.in_place += o.in_place;
    }
    t
}

/// Every seed keeps every invariant, and together the seeds went through every path: damaged
/// and repeated frames, early frames, repairs, NACKed synchronizations and retransmissions,
/// deferred writes, reported and silently detected failures of the primitive, tree traffic.
#[test]
fn sweep() {
    let seeds = harness::seeds(DEFAULT_SEEDS, |i| harness::spread(i, 2002));
    let replay = "cargo test --release -p steadfast-chbcast --lib sim::tests::sweep -- --nocapture";
    let outs = harness::sweep("chbcast", replay, &seeds, |seed| run_one(seed, |_| {}));
    let t = total(&outs);
    eprintln!("{} seeds: {t:#?}", seeds.len());
    if harness::replay().is_some() {
        return;
    }
    for (what, n) in [
        ("deliveries", t.deliveries),
        ("damaged frames dropped", t.bad_frames),
        ("repeats ignored", t.repeats),
        ("early frames kept", t.early),
        ("repair requests", t.repairs),
        ("synchronizations", t.syncs),
        ("NACKed synchronizations", t.sync_nacks),
        ("retransmissions", t.retransmits),
        ("deferred writes", t.deferred),
        ("reported primitive failures", t.failovers_reported),
        ("silently detected primitive failures", t.failovers_detected),
        ("frames over the tree", t.tree_sends),
        ("multicast datagrams", t.datagrams),
        ("damaged datagrams refused", t.bad_datagrams),
        ("frames reassembled from datagrams", t.reassembled),
        ("roots' direct writes", t.direct_writes),
        ("receivers' reads from their channel", t.direct_reads),
        ("receivers' reads in place after the call", t.in_place),
    ] {
        assert!(n > 0, "no seed exercised {what}: {t:#?}");
    }
}

/// The synchronization runs once per `N` broadcasts and only then: on a clean primitive,
/// `b` broadcasts on `N` channels take exactly `ceil(b / N) - 1` synchronizations, and with
/// early synchronization every `H` broadcasts between `ceil((b - N) / H)` and
/// `ceil(b / H) - 1`, each
/// with one attempt per rank, and nothing is retransmitted or repaired.
#[test]
fn clean_runs_synchronize_once_per_window() {
    let seeds = harness::seeds(200, |i| harness::spread(i, 7));
    let replay = "cargo test --release -p steadfast-chbcast --lib sim::tests::clean_runs_synchronize_once_per_window";
    harness::sweep("chbcast clean", replay, &seeds, |seed| {
        let mut p = Params::from_seed(seed);
        (p.loss, p.corrupt, p.dup, p.cut_at, p.slow) = (0, 0, 0, None, None);
        // Timers long enough that nothing fires on a clean network.
        p.config.repair_timeout = Duration::from_secs(1);
        p.config.sync_backoff = Duration::from_secs(1);
        let (b, nch) = (u64::from(p.bcasts), u64::from(p.config.channels));
        let step = match u64::from(p.config.sync_every) {
            0 => nch,
            h => h.min(nch),
        };
        let o = run_one(seed, |q| *q = p.clone())?;
        // Every N only the synchronizations the calls wait for run; early ones may leave
        // the last few unfinished (no call needs them): at least those the last root needed.
        let want = b.div_ceil(step) - 1;
        let needed = b.saturating_sub(nch).div_ceil(step);
        if !(needed..=want).contains(&o.syncs)
            || o.retransmits != 0
            || o.repairs != 0
            || o.sync_nacks != 0
            || o.tree_sends != 0
        {
            return Err(format!("{b} broadcasts on {nch} channels: {o:?}, expected {needed}..={want} synchronizations and no repair"));
        }
        if o.writes != b {
            return Err(format!("{} writes for {b} broadcasts", o.writes));
        }
        Ok(())
    });
}

/// A slow receiver holds every channel it has not read: the others wait at the
/// synchronization instead of overwriting it (checked at every write), and still finish.
#[test]
fn slow_receiver_is_never_overrun() {
    let seeds = harness::seeds(100, |i| harness::spread(i, 99));
    let replay = "cargo test --release -p steadfast-chbcast --lib sim::tests::slow_receiver_is_never_overrun";
    harness::sweep("chbcast slow", replay, &seeds, |seed| {
        run_one(seed, |p| {
            p.ranks = p.ranks.max(3);
            p.slow = Some(1);
            p.slow_by = Duration::from_millis(2);
            p.depth = 8;
            p.bcasts = p.bcasts.max(40);
        })
        .map(|_| ())
    });
}

/// The primitive dies in the middle of the stream: every outstanding broadcast is rebound to
/// the point-to-point tree and nothing is lost, whether a write error tells a root or the
/// receivers find out by their unanswered repairs.
#[test]
fn primitive_failing_mid_stream_rebinds_to_the_tree() {
    for reported in [true, false] {
        let seeds = harness::seeds(150, |i| harness::spread(i, 31 + u64::from(reported)));
        let replay = "cargo test --release -p steadfast-chbcast --lib sim::tests::primitive_failing_mid_stream_rebinds_to_the_tree";
        let outs = harness::sweep("chbcast cut", replay, &seeds, |seed| {
            run_one(seed, |p| {
                p.ranks = p.ranks.max(2);
                p.bcasts = p.bcasts.max(30);
                p.cut_at = Some(Duration::from_micros(300));
                p.cut_reported = reported;
            })
        });
        if harness::replay().is_none() {
            let t = total(&outs);
            assert!(t.tree_sends > 0 && t.lost_after_cut > 0, "{t:?}");
        }
    }
}

/// Over a multicast stream (frames cut into datagrams that are lost, damaged, repeated
/// and reordered one by one) that stops mid-stream: every receiver still gets every
/// broadcast once, intact and in order, the outstanding ones over the tree.
#[test]
fn multicast_stream_with_lossy_datagrams_failing_mid_stream() {
    for reported in [true, false] {
        let seeds = harness::seeds(150, |i| harness::spread(i, 41 + u64::from(reported)));
        let replay = "cargo test --release -p steadfast-chbcast --lib sim::tests::multicast_stream_with_lossy_datagrams_failing_mid_stream";
        let outs = harness::sweep("chbcast multicast", replay, &seeds, |seed| {
            run_one(seed, |p| {
                p.ranks = p.ranks.max(2);
                p.bcasts = p.bcasts.max(30);
                p.max_len = 4096;
                p.fragment = Some(p.fragment.unwrap_or(200).min(600));
                p.loss = p.loss.max(40);
                p.corrupt = p.corrupt.max(40);
                p.dup = p.dup.max(40);
                p.cut_at = Some(Duration::from_micros(500));
                p.cut_reported = reported;
            })
        });
        if harness::replay().is_none() {
            let t = total(&outs);
            assert!(t.reassembled > 0 && t.bad_datagrams > 0 && t.tree_sends > 0 && t.lost_after_cut > 0, "{t:?}");
        }
    }
}

/// The checker can fail: without the CRC, damaged frames are delivered and the simulation
/// catches a wrong delivery.
#[test]
fn without_crc_damage_is_caught_by_the_checker() {
    let mut caught = 0;
    for seed in 0..100 {
        let mut p = Params::from_seed(seed);
        (
            p.ranks, p.bcasts, p.max_len, p.corrupt, p.loss, p.dup, p.cut_at,
        ) = (4, 60, 64, 300, 0, 0, None);
        p.config.crc = false;
        // Datagrams carry their own CRC: damage must reach the frame layer here.
        p.fragment = None;
        if let Err(f) = Sim::new(p, seed).run() {
            assert!(
                f.reason.contains("delivered")
                    || f.reason.contains("stuck")
                    || f.reason.contains("wrote"),
                "{f}"
            );
            caught += 1;
        }
    }
    assert!(
        caught > 50,
        "only {caught} of 100 runs without CRC went wrong"
    );
}

/// A communicator freed after its last broadcast: a rank that drops its machine at once
/// (without [`Machine::close`]) strands the others whose copy of one of the last frames was
/// lost or damaged: nobody answers their repair requests, nor takes part in the
/// synchronization their last calls wait for (`MPI_Bcast` on a freed communicator hung so).
/// This is the model of that bug, kept to show the test below can fail.
#[test]
fn freeing_at_once_strands_a_receiver() {
    let mut stranded = 0;
    for seed in 0..100 {
        let mut p = Params::from_seed(seed);
        (p.ranks, p.bcasts, p.loss, p.corrupt, p.dup, p.cut_at, p.slow) = (4, 20, 100, 100, 0, None, None);
        p.free = Free::AtOnce;
        if let Err(f) = Sim::new(p, seed).run() {
            assert!(f.reason.contains("stuck"), "{f}");
            stranded += 1;
        }
    }
    assert!(stranded > 10, "only {stranded} of 100 lossy runs stranded a rank with the machines dropped at once");
}

/// Every rank closes its machine after its last broadcast and drops it once quiet: every
/// rank still completes every broadcast (the closed machines answer the repairs, the
/// failover's tree and the synchronizations), and every closed machine becomes quiet, so
/// the driver goes (checked by the simulation), with lost, damaged and repeated frames, a
/// slow rank, a primitive that fails and multicast datagrams.
#[test]
fn freed_machines_stay_until_quiet() {
    let seeds = harness::seeds(300, |i| harness::spread(i, 51));
    let replay = "cargo test --release -p steadfast-chbcast --lib sim::tests::freed_machines_stay_until_quiet";
    let outs = harness::sweep("chbcast free", replay, &seeds, |seed| {
        run_one(seed, |p| {
            p.free = Free::WhenQuiet;
        })
    });
    if harness::replay().is_none() {
        let t = total(&outs);
        assert!(t.repairs > 0 && t.retransmits > 0 && t.tree_sends > 0, "{t:?}");
    }
    // A clean primitive: the last synchronization is the only one added.
    let seeds = harness::seeds(100, |i| harness::spread(i, 53));
    harness::sweep("chbcast free clean", replay, &seeds, |seed| {
        let mut p = Params::from_seed(seed);
        (p.loss, p.corrupt, p.dup, p.cut_at, p.slow) = (0, 0, 0, None, None);
        p.config.repair_timeout = Duration::from_secs(1);
        p.config.sync_backoff = Duration::from_secs(1);
        p.free = Free::WhenQuiet;
        let o = run_one(seed, |q| *q = p.clone())?;
        if o.retransmits != 0 || o.repairs != 0 || o.sync_nacks != 0 {
            return Err(format!("clean run with the machines closed: {o:?}"));
        }
        Ok(())
    });
}
