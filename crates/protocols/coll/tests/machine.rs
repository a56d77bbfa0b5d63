//! The broadcast machine driven the way a runtime drives it: one `Bcast` per process sharing
//! an `Arc<BcastConfig>`, messages encoded to bytes and decoded on arrival, a simple network
//! with a fixed delay, and a clock that only moves forward.

use std::collections::VecDeque;
use std::sync::Arc;

use steadfast_coll::{
    Bcast, BcastConfig, Correction, CorrectionStart, Dissemination, Event, Msg, Numbering,
    Topology, TreeKind, Via,
};

/// Runs a broadcast where `dead` processes never act; returns per-process coloring.
fn drive(cfg: Arc<BcastConfig>, dead: &[u32], delay: u64) -> Vec<Option<(u64, Via)>> {
    let p = cfg.procs();
    let mut procs: Vec<Bcast<Arc<BcastConfig>>> = (0..p)
        .map(|r| Bcast::new(Arc::clone(&cfg), r, 1000))
        .collect();
    let mut colored = vec![None; p as usize];
    let mut wire: VecDeque<(u64, u32, u32, Vec<u8>)> = VecDeque::new();
    let mut now = 1000u64;
    for _ in 0..100_000 {
        // Every live process sends what it has (one message per process per tick).
        for r in 0..p {
            if dead.contains(&r) {
                continue;
            }
            let b = &mut procs[r as usize];
            if b.poll_timeout().is_some_and(|t| t <= now) {
                b.handle_timeout(now);
            }
            if let Some(t) = b.poll_transmit(now) {
                wire.push_back((now + delay, r, t.dst, t.msg.to_bytes().to_vec()));
            }
            while let Some(ev) = b.poll_event() {
                if let Event::Colored { at, via } = ev {
                    assert!(colored[r as usize].is_none(), "colored twice");
                    colored[r as usize] = Some((at, via));
                }
            }
        }
        now += 1;
        while wire.front().is_some_and(|m| m.0 <= now) {
            let Some((_, from, to, bytes)) = wire.pop_front() else {
                break;
            };
            if dead.contains(&to) {
                continue;
            }
            let msg = Msg::from_bytes(&bytes).expect("own encoding decodes");
            procs[to as usize].handle(now, from, msg);
        }
        let idle = wire.is_empty()
            && procs.iter().enumerate().all(|(r, b)| {
                dead.contains(&(r as u32)) || (b.state().is_finished() || !b.state().is_colored())
            })
            && procs
                .iter()
                .all(|b| b.poll_timeout().map_or(true, |t| t < now));
        if idle {
            break;
        }
    }
    colored
}

fn config(p: u32, c: Correction, start: CorrectionStart) -> Arc<BcastConfig> {
    let topology = Topology::new(TreeKind::Lame { k: 2 }, Numbering::Interleaved, p).unwrap();
    Arc::new(
        BcastConfig::new(
            p,
            Dissemination::Tree {
                topology,
                ack: None,
            },
            c,
            start,
        )
        .unwrap(),
    )
}

#[test]
fn checked_correction_reaches_every_live_process_over_a_real_wire_format() {
    let dead = [1, 2, 5, 17, 33, 34, 35];
    for start in [
        CorrectionStart::Overlapped,
        CorrectionStart::Synchronized { at: 40 },
    ] {
        let colored = drive(config(100, Correction::Checked, start), &dead, 3);
        for r in 0..100u32 {
            if dead.contains(&r) {
                assert!(colored[r as usize].is_none());
            } else {
                assert!(colored[r as usize].is_some(), "{r} uncolored ({start:?})");
            }
        }
        // Children of the dead process 1 can only have been reached by correction.
        assert!(colored
            .iter()
            .any(|c| matches!(c, Some((_, Via::Correction)))));
        // Times are the driver's clock, which started at 1000.
        assert_eq!(colored[0], Some((1000, Via::Dissemination)));
    }
}

#[test]
fn without_correction_a_dead_inner_process_cuts_off_its_subtree() {
    let colored = drive(
        config(100, Correction::None, CorrectionStart::Overlapped),
        &[1],
        2,
    );
    let topology = Topology::new(TreeKind::Lame { k: 2 }, Numbering::Interleaved, 100).unwrap();
    let mut stack: Vec<u32> = topology.children(1).collect();
    assert!(!stack.is_empty());
    while let Some(c) = stack.pop() {
        assert!(
            colored[c as usize].is_none(),
            "descendant {c} of the dead process colored"
        );
        stack.extend(topology.children(c));
    }
}

#[test]
fn configuration_errors_are_typed() {
    let topology = Topology::new(TreeKind::Binomial, Numbering::Interleaved, 10).unwrap();
    let tree = Dissemination::Tree {
        topology,
        ack: None,
    };
    let e = BcastConfig::new(
        11,
        tree.clone(),
        Correction::Checked,
        CorrectionStart::Overlapped,
    );
    assert!(matches!(
        e,
        Err(steadfast_coll::ConfigError::TreeSize {
            tree: 10,
            procs: 11
        })
    ));
    let d = Correction::Opportunistic {
        distance: 5,
        optimized: true,
        relay: false,
    };
    assert!(BcastConfig::new(10, tree.clone(), d, CorrectionStart::Overlapped).is_err());
    let g = Dissemination::Gossip {
        duration: 5,
        seed: 1,
    };
    assert!(BcastConfig::new(10, g, Correction::Checked, CorrectionStart::Overlapped).is_err());
}
