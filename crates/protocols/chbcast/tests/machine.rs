//! Hand-driven scenarios of the channel-broadcast machine: each names one rule of the
//! protocol (the seeded simulation in `src/sim` checks them all together under faults).

use std::time::Duration;

use steadfast_chbcast::{
    frame, tree_children, tree_parent, Config, Event, Machine, Message, Transmit,
};

fn cfg(channels: u32) -> Config {
    Config {
        channels,
        sync_every: 0,
        crc: true,
        repair_timeout: Duration::from_millis(1),
        max_repairs: 3,
        sync_backoff: Duration::from_millis(1),
        max_backoff: Duration::from_millis(8),
    }
}

fn t(ms: u64) -> Duration {
    Duration::from_millis(ms)
}

fn out(m: &mut Machine) -> Vec<Transmit> {
    std::iter::from_fn(|| m.poll_transmit()).collect()
}

fn events(m: &mut Machine) -> Vec<Event> {
    std::iter::from_fn(|| m.poll_event()).collect()
}

fn writes(ts: &[Transmit]) -> Vec<(u32, u64)> {
    ts.iter()
        .filter_map(|t| match t {
            Transmit::Write { channel, frame: f } => {
                Some((*channel, frame::decode(f).unwrap().seq))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn binomial_trees_cover_every_rank_once() {
    for n in 1..20u32 {
        for root in 0..n {
            let mut seen = vec![0; n as usize];
            seen[root as usize] += 1;
            for me in 0..n {
                for c in tree_children(root, me, n) {
                    seen[c as usize] += 1;
                    assert_eq!(tree_parent(root, c, n), Some(me));
                }
            }
            assert!(seen.iter().all(|&s| s == 1), "n {n} root {root}: {seen:?}");
            assert_eq!(tree_parent(root, root, n), None);
        }
    }
    // Out-of-range ranks do not overflow.
    assert_eq!(tree_parent(u32::MAX, u32::MAX, u32::MAX), None);
    let _ = tree_children(u32::MAX, 0, u32::MAX);
    assert!(tree_children(0, 0, 0).is_empty());
}

#[test]
fn the_root_writes_once_per_channel_and_synchronizes_only_when_they_run_out() {
    // Two ranks, two channels: rank 0 is the manager and the root of every broadcast.
    let (mut a, mut b) = (Machine::new(0, 2, cfg(2)), Machine::new(1, 2, cfg(2)));
    for i in 0..2u8 {
        assert_eq!(a.bcast(t(0), 0, Some(&[i])), Ok(u64::from(i)));
        assert_eq!(b.bcast(t(0), 0, None), Ok(u64::from(i)));
    }
    let w = out(&mut a);
    assert_eq!(writes(&w), vec![(0, 0), (1, 1)]);
    assert!(
        !a.syncing() && !b.syncing(),
        "channels left: no synchronization"
    );
    assert_eq!(
        events(&mut a),
        vec![Event::Sent { seq: 0 }, Event::Sent { seq: 1 }]
    );
    // The third broadcast has no free channel: the root defers its write and synchronizes.
    a.bcast(t(0), 0, Some(b"c")).unwrap();
    assert!(a.syncing());
    assert!(
        out(&mut a).is_empty(),
        "no write and no result before the receiver's ACK"
    );
    // The receiver reads both frames; the second arrives twice (a repeat is ignored).
    for tr in &w {
        let Transmit::Write { frame: f, .. } = tr else {
            unreachable!()
        };
        b.frame_arrived(t(0), f);
    }
    let Transmit::Write { frame: f1, .. } = &w[1] else {
        unreachable!()
    };
    b.frame_arrived(t(0), f1);
    assert_eq!(b.stats().repeats, 1);
    let ev = events(&mut b);
    assert_eq!(ev.len(), 2);
    assert_eq!(
        ev[0],
        Event::Delivered {
            seq: 0,
            root: 0,
            data: vec![0]
        }
    );
    // Its third call enters the synchronization with a complete window: ACK up.
    b.bcast(t(0), 0, None).unwrap();
    let up = out(&mut b);
    assert_eq!(
        up,
        vec![Transmit::Send {
            to: 0,
            message: Message::Up {
                sync: 1,
                attempt: 0,
                ok: true,
                failed: false
            }
        }]
    );
    a.handle(
        t(0),
        1,
        Message::Up {
            sync: 1,
            attempt: 0,
            ok: true,
            failed: false,
        },
    );
    let o = out(&mut a);
    assert_eq!(
        o[0],
        Transmit::Send {
            to: 1,
            message: Message::Down {
                sync: 1,
                attempt: 0,
                ok: true,
                failed: false
            }
        }
    );
    assert_eq!(
        writes(&o),
        vec![(0, 2)],
        "released: the deferred write goes out on channel 0 again"
    );
    assert_eq!(a.released(), 2);
    assert_eq!(a.stats().sync_attempts, 1);
}

#[test]
fn a_damaged_frame_is_dropped_and_a_nack_makes_the_root_retransmit() {
    let (mut a, mut b) = (Machine::new(0, 2, cfg(1)), Machine::new(1, 2, cfg(1)));
    a.bcast(t(0), 0, Some(b"hello")).unwrap();
    b.bcast(t(0), 0, None).unwrap();
    let Transmit::Write { frame: good, .. } = out(&mut a).remove(0) else {
        panic!()
    };
    let mut f = good.to_vec();
    f[frame::HEADER + 1] ^= 4;
    b.frame_arrived(t(0), &f);
    assert_eq!(b.stats().bad_frames, 1);
    assert!(events(&mut b).is_empty());
    // Next call: no free channel. The receiver waits out the backoff, then NACKs.
    a.bcast(t(0), 0, Some(b"x")).unwrap();
    b.bcast(t(0), 0, None).unwrap();
    assert!(out(&mut b).is_empty());
    b.handle_timeout(t(1));
    let up = out(&mut b);
    let nack = Message::Up {
        sync: 1,
        attempt: 0,
        ok: false,
        failed: false,
    };
    assert!(
        up.contains(&Transmit::Send {
            to: 0,
            message: nack.clone()
        }),
        "{up:?}"
    );
    a.handle(t(1), 1, nack);
    let o = out(&mut a);
    assert_eq!(
        writes(&o),
        vec![(0, 0)],
        "the root retransmits its broadcast of the window: {o:?}"
    );
    assert_eq!(a.stats().retransmits, 1);
    let down = Message::Down {
        sync: 1,
        attempt: 0,
        ok: false,
        failed: false,
    };
    b.handle(t(1), 0, down);
    b.frame_arrived(t(1), &good);
    assert_eq!(
        events(&mut b),
        vec![Event::Delivered {
            seq: 0,
            root: 0,
            data: b"hello".to_vec()
        }]
    );
    // Attempt 1: complete now, ACK.
    let up = out(&mut b);
    assert!(
        up.contains(&Transmit::Send {
            to: 0,
            message: Message::Up {
                sync: 1,
                attempt: 1,
                ok: true,
                failed: false
            }
        }),
        "{up:?}"
    );
}

#[test]
fn a_missing_broadcast_is_repaired_then_the_primitive_is_abandoned() {
    let (mut a, mut b) = (Machine::new(0, 2, cfg(4)), Machine::new(1, 2, cfg(4)));
    a.bcast(t(0), 0, Some(b"lost")).unwrap();
    b.bcast(t(0), 0, None).unwrap();
    out(&mut a);
    assert_eq!(b.poll_timeout(), Some(t(1)));
    b.handle_timeout(t(1));
    let r = out(&mut b);
    assert_eq!(
        r,
        vec![Transmit::Send {
            to: 0,
            message: Message::Repair {
                seq: 0,
                failed: false
            }
        }]
    );
    a.handle(
        t(1),
        1,
        Message::Repair {
            seq: 0,
            failed: false,
        },
    );
    assert_eq!(
        writes(&out(&mut a)),
        vec![(0, 0)],
        "retransmitted with the primitive"
    );
    // The retransmission is lost too, repeatedly: after max_repairs the receiver fails over.
    let mut now = t(1);
    while !b.failed() {
        now = b.poll_timeout().unwrap();
        b.handle_timeout(now);
    }
    assert_eq!(b.stats().repairs_sent, 3);
    let r = out(&mut b);
    assert_eq!(
        r.last(),
        Some(&Transmit::Send {
            to: 0,
            message: Message::Repair {
                seq: 0,
                failed: true
            }
        })
    );
    a.handle(
        now,
        1,
        Message::Repair {
            seq: 0,
            failed: true,
        },
    );
    assert!(a.failed());
    assert!(events(&mut a).contains(&Event::FailedOver));
    let o = out(&mut a);
    assert!(writes(&o).is_empty(), "no more primitive writes: {o:?}");
    // Rebound to the tree (rank 1 is rank 0's child), and the direct reply to the request.
    let datas: Vec<&Message> = o
        .iter()
        .filter_map(|t| {
            if let Transmit::Send { to: 1, message } = t {
                Some(message)
            } else {
                None
            }
        })
        .collect();
    assert_eq!(datas.len(), 2, "{o:?}");
    for m in datas {
        b.handle(now, 0, m.clone());
    }
    let ev = events(&mut b);
    assert!(
        ev.contains(&Event::Delivered {
            seq: 0,
            root: 0,
            data: b"lost".to_vec()
        }),
        "{ev:?}"
    );
    assert_eq!(b.stats().repeats, 1, "the second copy is a repeat");
    // New broadcasts of the failed-over root go over the tree.
    a.bcast(now, 0, Some(b"next")).unwrap();
    let o = out(&mut a);
    assert!(
        matches!(
            &o[..],
            [Transmit::Send {
                to: 1,
                message: Message::Data { forward: true, .. }
            }]
        ),
        "{o:?}"
    );
}

#[test]
fn tree_frames_are_passed_down_the_roots_tree() {
    // Rank 2 of 8 receives a tree frame of root 1: relative rank 1, whose children are none;
    // rank 1's children relative 1,2,4 are ranks 2,3,5.
    let f = frame::encode(0, 1, b"d", true);
    let mut m = Machine::new(3, 8, cfg(4));
    m.bcast(t(0), 1, None).unwrap();
    m.handle(
        t(0),
        1,
        Message::Data {
            forward: true,
            frame: f.clone(),
        },
    );
    // Rank 3 is relative 2 in root 1's tree: one child, relative 3 = rank 4.
    assert_eq!(
        out(&mut m),
        vec![Transmit::Send {
            to: 4,
            message: Message::Data {
                forward: true,
                frame: f.clone()
            }
        }]
    );
    assert_eq!(
        events(&mut m),
        vec![Event::Delivered {
            seq: 0,
            root: 1,
            data: b"d".to_vec()
        }]
    );
    // A direct repair copy is not forwarded.
    let mut m = Machine::new(3, 8, cfg(4));
    m.handle(
        t(0),
        1,
        Message::Data {
            forward: false,
            frame: f,
        },
    );
    assert!(out(&mut m).is_empty());
    assert_eq!(m.stats().early, 1, "kept until the broadcast is called");
    m.bcast(t(0), 1, None).unwrap();
    assert_eq!(events(&mut m).len(), 1);
}

#[test]
fn frames_outside_the_window_and_wrong_calls_are_refused() {
    let mut m = Machine::new(1, 3, cfg(2));
    // 2N ahead of what is released cannot be legitimate.
    m.frame_arrived(t(0), &frame::encode(4, 0, b"", true));
    assert_eq!(m.stats().out_of_window, 1);
    m.frame_arrived(t(0), &frame::encode(0, 1, b"", true));
    assert_eq!(m.stats().repeats, 1, "its own broadcast");
    assert_eq!(
        m.bcast(t(0), 3, None),
        Err(steadfast_chbcast::CallError::Root)
    );
    assert_eq!(
        m.bcast(t(0), 1, None),
        Err(steadfast_chbcast::CallError::Data)
    );
    assert_eq!(
        m.bcast(t(0), 0, Some(b"x")),
        Err(steadfast_chbcast::CallError::Data)
    );
}
