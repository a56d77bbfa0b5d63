//! Hand-driven scenarios of the scheduler and the rank machine: each names one rule of the
//! protocol (the seeded simulation in `src/sim` checks them all together under crashes).

use std::time::Duration;

use steadfast_rollback::rank::Event as REv;
use steadfast_rollback::scheduler::Event as SEv;
use steadfast_rollback::wire::{Body, ChannelRecord, Message};
use steadfast_rollback::{
    AbortReason, Config, Ident, Peer, RankMachine, Scheduler, Transmit, Verdict, UNNUMBERED,
};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn config() -> Config {
    Config {
        interval: None,
        wave_timeout: ms(100),
        restore_timeout: ms(100),
    }
}

fn transmits(m: &mut RankMachine) -> Vec<Transmit> {
    std::iter::from_fn(|| m.poll_transmit()).collect()
}

fn events(m: &mut RankMachine) -> Vec<REv> {
    std::iter::from_fn(|| m.poll_event()).collect()
}

fn sched_out(s: &mut Scheduler) -> (Vec<Transmit>, Vec<SEv>) {
    (
        std::iter::from_fn(|| s.poll_transmit()).collect(),
        std::iter::from_fn(|| s.poll_event()).collect(),
    )
}

fn id(world: u32, incarnation: u16, seq: u64) -> Ident {
    Ident {
        world,
        incarnation,
        seq,
    }
}

fn marker(inc: u16, wave: u64, sent_upto: u64) -> Message {
    Message::new(inc, Body::Marker { wave, sent_upto })
}

fn from_sched(inc: u16, body: Body) -> (Peer, Message) {
    (Peer::Scheduler, Message::new(inc, body))
}

#[test]
fn first_marker_starts_the_wave_and_in_transit_messages_are_recorded() {
    // Rank 1 of 3; rank 0 sent it two messages before its cut, rank 2 one.
    let mut m = RankMachine::new(1, 3);
    assert_eq!(m.arrived(id(0, 0, 1), b"a"), Verdict::Deliver);
    m.sent(0, id(1, 0, 1));
    m.sent(2, id(1, 0, 1));
    m.sent(2, id(1, 0, 2));
    // Rank 2's marker arrives first: the cut is taken before its channel closes.
    m.handle(Peer::Rank(2), marker(0, 1, 0));
    assert_eq!(events(&mut m), vec![REv::TakeImage { wave: 1 }]);
    let t = transmits(&mut m);
    assert_eq!(t.len(), 2);
    assert_eq!(t[0].to, Peer::Rank(0));
    assert_eq!(t[0].message, marker(0, 1, 1));
    assert_eq!(t[1].message, marker(0, 1, 2));
    // Rank 0's second message was in transit; so is a rendezvous DATA packet after it.
    assert_eq!(m.arrived(id(0, 0, 2), b"b"), Verdict::Deliver);
    assert_eq!(m.arrived(id(0, 0, UNNUMBERED), b"data"), Verdict::Deliver);
    assert!(events(&mut m).is_empty(), "channel from 0 still open");
    m.handle(Peer::Rank(0), marker(0, 1, 2));
    let ev = events(&mut m);
    let [REv::StoreRecord { record }] = ev.as_slice() else {
        panic!("{ev:?}")
    };
    assert_eq!(record.sent, vec![1, 0, 2]);
    assert_eq!(record.received, vec![1, 0, 0]);
    let seqs: Vec<u64> = record.in_transit.iter().map(|r| r.from.seq).collect();
    assert_eq!(seqs, vec![2, UNNUMBERED]);
    // After the marker, nothing more is recorded.
    assert_eq!(m.arrived(id(0, 0, 3), b"c"), Verdict::Deliver);
    // Report only once image and record are both stored.
    m.record_stored(1, true);
    assert!(transmits(&mut m).is_empty());
    m.image_stored(1, true);
    let t = transmits(&mut m);
    assert_eq!(t.len(), 1);
    assert_eq!(t[0].to, Peer::Scheduler);
    assert_eq!(
        t[0].message,
        Message::new(
            0,
            Body::Done {
                wave: 1,
                in_transit: 2
            }
        )
    );
}

#[test]
fn late_and_duplicate_markers_are_ignored_by_wave_number() {
    let mut m = RankMachine::new(0, 2);
    let (p, msg) = from_sched(0, Body::Checkpoint { wave: 3 });
    m.handle(p, msg);
    m.handle(Peer::Rank(1), marker(0, 3, 0));
    events(&mut m);
    transmits(&mut m);
    let (p, msg) = from_sched(0, Body::Abort { wave: 3 });
    m.handle(p, msg);
    assert_eq!(events(&mut m), vec![REv::Discard { wave: 3 }]);
    // A marker of the aborted wave (or an older one) does not start it again.
    m.handle(Peer::Rank(1), marker(0, 3, 0));
    m.handle(Peer::Rank(1), marker(0, 2, 0));
    let (p, msg) = from_sched(0, Body::Checkpoint { wave: 3 });
    m.handle(p, msg);
    assert!(events(&mut m).is_empty());
    assert!(transmits(&mut m).is_empty());
    assert_eq!(m.stats().late_markers, 2);
}

#[test]
fn messages_and_markers_of_a_dead_incarnation_are_dropped() {
    let mut m = RankMachine::new(0, 2);
    let (p, msg) = from_sched(1, Body::Rollback { wave: 0 });
    m.handle(p, msg);
    assert_eq!(
        events(&mut m),
        vec![REv::Restore {
            wave: 0,
            incarnation: 1
        }]
    );
    // The same ROLLBACK again does not start the restore over.
    let (p, msg) = from_sched(1, Body::Rollback { wave: 0 });
    m.handle(p, msg);
    assert!(events(&mut m).is_empty());
    // Not restored yet: nothing is delivered.
    assert_eq!(m.arrived(id(1, 1, 1), b"x"), Verdict::Drop);
    let replay = m.restored(0, ChannelRecord::initial(0, 2)).unwrap();
    assert_eq!(replay.next_send, vec![1, 1]);
    assert_eq!(m.incarnation(), 1);
    assert_eq!(
        transmits(&mut m)[0].message,
        Message::new(1, Body::RolledBack { wave: 0 })
    );
    // From incarnation 0: a message and a marker of the rolled-back execution.
    assert_eq!(m.arrived(id(1, 0, 1), b"old"), Verdict::Drop);
    m.handle(Peer::Rank(1), marker(0, 9, 0));
    assert!(events(&mut m).is_empty());
    assert_eq!(
        m.stats().stale,
        3,
        "the repeated ROLLBACK, the message, the marker"
    );
    // Restored ranks accept the new incarnation's traffic before RESUME.
    assert_eq!(m.arrived(id(1, 1, 1), b"new"), Verdict::Deliver);
    let (p, msg) = from_sched(1, Body::Resume);
    m.handle(p, msg);
    assert_eq!(events(&mut m), vec![REv::Resume { incarnation: 1 }]);
    assert!(m.is_running());
}

#[test]
fn restore_hands_back_in_transit_messages_and_resume_points() {
    let mut m = RankMachine::relaunched(2, 3);
    assert_eq!(
        m.arrived(id(0, 0, 1), b"x"),
        Verdict::Drop,
        "relaunched: waits"
    );
    let (p, msg) = from_sched(4, Body::Rollback { wave: 7 });
    m.handle(p, msg);
    events(&mut m);
    let mut rec = ChannelRecord::initial(2, 3);
    rec.wave = 7;
    rec.sent = vec![5, 6, 0];
    rec.received = vec![3, 9, 0];
    rec.in_transit = vec![
        steadfast_rollback::Recorded {
            from: id(0, 3, 4),
            bytes: b"m4".to_vec(),
        },
        steadfast_rollback::Recorded {
            from: id(0, 3, UNNUMBERED),
            bytes: b"data".to_vec(),
        },
    ];
    // A record of another wave or rank is refused.
    let mut wrong = rec.clone();
    wrong.wave = 6;
    assert!(m.restored(7, wrong).is_err());
    let r = m.restored(7, rec.clone()).unwrap();
    assert_eq!(r.redeliver, rec.in_transit);
    assert_eq!(r.next_send, vec![6, 7, 1]);
    assert_eq!(r.next_receive, vec![5, 10, 1]);
    assert_eq!(r.incarnation, 4);
    // A second call (duplicate) is refused.
    assert!(m.restored(7, rec).is_err());
}

#[test]
fn scheduler_commits_only_when_every_rank_reported_then_deletes_older() {
    let mut s = Scheduler::new(3, config(), ms(0));
    assert_eq!(s.checkpoint_now(ms(1)), Some(1));
    assert_eq!(s.checkpoint_now(ms(1)), None, "one wave at a time");
    let (t, _) = sched_out(&mut s);
    assert_eq!(t.len(), 3);
    for r in 0..2 {
        s.handle(
            ms(2),
            r,
            Message::new(
                0,
                Body::Done {
                    wave: 1,
                    in_transit: r as u64,
                },
            ),
        );
    }
    // A report of another wave or incarnation does not count.
    s.handle(
        ms(2),
        2,
        Message::new(
            0,
            Body::Done {
                wave: 2,
                in_transit: 0,
            },
        ),
    );
    s.handle(
        ms(2),
        2,
        Message::new(
            1,
            Body::Done {
                wave: 1,
                in_transit: 0,
            },
        ),
    );
    assert_eq!(s.committed(), 0);
    s.handle(
        ms(3),
        2,
        Message::new(
            0,
            Body::Done {
                wave: 1,
                in_transit: 5,
            },
        ),
    );
    assert_eq!(s.committed(), 1);
    let (t, e) = sched_out(&mut s);
    assert!(e.contains(&SEv::Committed {
        wave: 1,
        in_transit: 6
    }));
    assert_eq!(t.len(), 3);
    assert!(t
        .iter()
        .all(|t| t.message == Message::new(0, Body::Commit { wave: 1 })));
}

#[test]
fn a_rank_that_never_reports_aborts_the_wave() {
    let mut s = Scheduler::new(2, config(), ms(0));
    s.checkpoint_now(ms(0));
    sched_out(&mut s);
    s.handle(
        ms(5),
        0,
        Message::new(
            0,
            Body::Done {
                wave: 1,
                in_transit: 0,
            },
        ),
    );
    assert_eq!(s.poll_timeout(), Some(ms(100)));
    s.handle_timeout(ms(99));
    assert_eq!(s.current_wave(), Some(1));
    s.handle_timeout(ms(100));
    let (t, e) = sched_out(&mut s);
    assert!(e.contains(&SEv::WaveAborted {
        wave: 1,
        reason: AbortReason::Timeout { missing: vec![1] }
    }));
    assert!(t
        .iter()
        .all(|t| t.message == Message::new(0, Body::Abort { wave: 1 })));
    // The late report changes nothing; the next wave has a new number.
    s.handle(
        ms(101),
        1,
        Message::new(
            0,
            Body::Done {
                wave: 1,
                in_transit: 0,
            },
        ),
    );
    assert_eq!(s.committed(), 0);
    assert_eq!(s.checkpoint_now(ms(102)), Some(2));
}

#[test]
fn a_failure_during_a_wave_rolls_back_to_the_last_commit_and_again_during_the_restore() {
    let mut s = Scheduler::new(2, config(), ms(0));
    s.checkpoint_now(ms(0));
    for r in 0..2 {
        s.handle(
            ms(1),
            r,
            Message::new(
                0,
                Body::Done {
                    wave: 1,
                    in_transit: 0,
                },
            ),
        );
    }
    s.checkpoint_now(ms(2));
    sched_out(&mut s);
    s.handle(
        ms(3),
        0,
        Message::new(
            0,
            Body::Done {
                wave: 2,
                in_transit: 0,
            },
        ),
    );
    s.rank_failed(ms(4), 1);
    let (t, e) = sched_out(&mut s);
    assert!(e.contains(&SEv::WaveAborted {
        wave: 2,
        reason: AbortReason::RankFailed { rank: 1 }
    }));
    assert!(e.contains(&SEv::RollingBack {
        wave: 1,
        incarnation: 1
    }));
    assert!(t
        .iter()
        .all(|t| t.message == Message::new(1, Body::Rollback { wave: 1 })));
    assert!(
        s.checkpoint_now(ms(5)).is_none(),
        "no wave during a restore"
    );
    s.handle(ms(5), 0, Message::new(1, Body::RolledBack { wave: 1 }));
    // Rank 1 dies again while restoring: the rollback starts over as incarnation 2, and
    // rank 0's report of incarnation 1 no longer counts.
    s.rank_failed(ms(6), 1);
    let (_, e) = sched_out(&mut s);
    assert!(e.contains(&SEv::RollingBack {
        wave: 1,
        incarnation: 2
    }));
    s.handle(ms(7), 1, Message::new(2, Body::RolledBack { wave: 1 }));
    s.handle(ms(7), 0, Message::new(1, Body::RolledBack { wave: 1 }));
    assert!(s.is_restoring());
    s.handle(ms(8), 0, Message::new(2, Body::RolledBack { wave: 1 }));
    let (t, e) = sched_out(&mut s);
    assert!(e.contains(&SEv::Resumed {
        wave: 1,
        incarnation: 2
    }));
    assert!(t.iter().all(|t| t.message == Message::new(2, Body::Resume)));
    assert!(s.is_idle());
}

#[test]
fn a_restore_that_hangs_is_started_over() {
    let mut s = Scheduler::new(2, config(), ms(0));
    s.rank_failed(ms(0), 0);
    sched_out(&mut s);
    s.handle(ms(1), 1, Message::new(1, Body::RolledBack { wave: 0 }));
    s.handle_timeout(ms(100));
    let (_, e) = sched_out(&mut s);
    assert!(e.contains(&SEv::RestoreTimedOut { missing: vec![0] }));
    assert!(e.contains(&SEv::RollingBack {
        wave: 0,
        incarnation: 2
    }));
}

#[test]
fn a_whole_job_restart_resumes_numbering_and_incarnations() {
    let mut s = Scheduler::restart(2, config(), ms(0), 4, 6, 3);
    let (t, e) = sched_out(&mut s);
    assert!(e.contains(&SEv::RollingBack {
        wave: 4,
        incarnation: 4
    }));
    assert_eq!(t.len(), 2);
    for r in 0..2 {
        s.handle(ms(1), r, Message::new(4, Body::RolledBack { wave: 4 }));
    }
    assert_eq!(s.checkpoint_now(ms(2)), Some(7));
}

#[test]
fn out_of_incarnations_the_scheduler_gives_up_and_stays_stopped() {
    // A restart from a record whose incarnation is the last one: no rollback is possible.
    let mut s = Scheduler::restart(2, config(), ms(0), 4, 6, u16::MAX);
    let (t, e) = sched_out(&mut s);
    assert_eq!(e, vec![SEv::GaveUp]);
    assert!(t.is_empty(), "no ROLLBACK with a wrapped incarnation: {t:?}");
    assert_eq!(s.incarnation(), u16::MAX);
    assert_eq!(s.poll_timeout(), None);
    // Nothing starts it again: failures, waves on demand, timeouts, late reports.
    s.rank_failed(ms(1), 0);
    assert_eq!(s.checkpoint_now(ms(2)), None);
    s.handle_timeout(ms(10_000));
    s.handle(ms(3), 1, Message::new(u16::MAX, Body::RolledBack { wave: 4 }));
    assert_eq!(sched_out(&mut s), (vec![], vec![]));
}

#[test]
fn periodic_waves_follow_the_interval() {
    let mut c = config();
    c.interval = Some(ms(30));
    let mut s = Scheduler::new(1, c, ms(0));
    assert_eq!(s.poll_timeout(), Some(ms(30)));
    s.handle_timeout(ms(30));
    assert_eq!(s.current_wave(), Some(1));
    s.handle(
        ms(31),
        0,
        Message::new(
            0,
            Body::Done {
                wave: 1,
                in_transit: 0,
            },
        ),
    );
    assert_eq!(s.poll_timeout(), Some(ms(61)));
}

/// Whatever arrives, in whatever order, with whatever numbers: no panic, and the machines
/// stay usable (their outputs drain).
#[test]
fn arbitrary_inputs_never_panic() {
    let mut rng = steadfast_proto::Rng::new(99);
    let edge = [0u64, 1, 2, 3, u64::MAX - 1, u64::MAX];
    for round in 0..300u64 {
        let size = 1 + (round % 4) as u32;
        let mut m = if round % 2 == 0 {
            RankMachine::new(round as u32 % size, size)
        } else {
            RankMachine::relaunched(round as u32 % size, size)
        };
        let mut s = Scheduler::new(size, config(), ms(0));
        for step in 0..400u64 {
            let mut num = || {
                if rng.chance(500) {
                    edge[rng.below(edge.len() as u64) as usize]
                } else {
                    rng.below(6)
                }
            };
            let (wave, x, seq) = (num(), num(), num());
            let inc = (num() % 4) as u16;
            let body = match rng.below(9) {
                0 => Body::Checkpoint { wave },
                1 => Body::Marker { wave, sent_upto: x },
                2 => Body::Done {
                    wave,
                    in_transit: x,
                },
                3 => Body::Failed { wave },
                4 => Body::Commit { wave },
                5 => Body::Abort { wave },
                6 => Body::Rollback { wave },
                7 => Body::RolledBack { wave },
                _ => Body::Resume,
            };
            let peer = rng.below(size as u64 + 2) as u32;
            let msg = Message::new(inc, body);
            match rng.below(8) {
                0 => m.handle(Peer::Scheduler, msg.clone()),
                1 => m.handle(Peer::Rank(peer), msg.clone()),
                2 => {
                    m.arrived(id(peer, inc, seq), b"p");
                }
                3 => m.sent(peer, id(peer, inc, seq)),
                4 => m.image_stored(wave, rng.chance(800)),
                5 => m.record_stored(wave, rng.chance(800)),
                6 => {
                    let mut rec = ChannelRecord::initial(m.rank(), size);
                    rec.wave = wave;
                    if size > 1 {
                        rec.sent[((m.rank() + 1) % size) as usize] = x;
                    }
                    let _ = m.restored(wave, rec);
                }
                _ => {
                    s.handle(ms(step), peer, msg);
                    if rng.chance(50) {
                        s.rank_failed(ms(step), peer);
                    }
                    s.handle_timeout(ms(step * 7));
                    let _ = s.checkpoint_now(ms(step));
                }
            }
            transmits(&mut m);
            events(&mut m);
            sched_out(&mut s);
        }
    }
}

#[test]
fn a_damaged_checkpoint_falls_back_to_an_earlier_one_as_a_new_incarnation() {
    let mut s = Scheduler::new(2, config(), ms(0));
    for wave in 1..=2 {
        s.checkpoint_now(ms(wave));
        for r in 0..2 {
            s.handle(ms(wave), r, Message::new(0, Body::Done { wave, in_transit: 0 }));
        }
    }
    assert_eq!(s.committed(), 2);
    s.rank_failed(ms(10), 0);
    sched_out(&mut s);
    // The launcher finds an image of wave 2 damaged: wave 1 instead, next incarnation.
    s.fall_back(ms(11), 1);
    let (t, e) = sched_out(&mut s);
    assert!(e.contains(&SEv::RollingBack { wave: 1, incarnation: 2 }));
    assert!(t.iter().all(|t| t.message == Message::new(2, Body::Rollback { wave: 1 })));
    assert_eq!(s.committed(), 1);
    // Not forward, not to the same wave.
    s.fall_back(ms(12), 1);
    assert!(sched_out(&mut s).1.is_empty());
    // Every rank restored wave 1 as incarnation 2: the job resumes.
    for r in 0..2 {
        s.handle(ms(13), r, Message::new(2, Body::RolledBack { wave: 1 }));
    }
    assert!(sched_out(&mut s).1.contains(&SEv::Resumed { wave: 1, incarnation: 2 }));
}
