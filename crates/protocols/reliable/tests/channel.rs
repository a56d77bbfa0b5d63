//! Scenario tests of one channel pair, driven by hand.

use steadfast_reliable::frame::{Frame, FrameKey, FrameRepr, Kind, HEADER_LEN};
use steadfast_reliable::{Assembler, Channel, Config, Event, MsgId, Transmit};

const KEY: u64 = 0x1234_5678_9abc_def0;
const MS: u64 = 1_000_000;

fn cfg() -> Config {
    let mut c = Config::new(KEY, 0, 1);
    c.max_payload = 100;
    c.adaptive_rto = false;
    c.rto_initial_ns = 10 * MS;
    c.rto_max_ns = 80 * MS;
    c
}

fn pair(c: Config) -> (Channel, Channel) {
    let b = c.mirrored();
    (Channel::new(c).unwrap(), Channel::new(b).unwrap())
}

fn drain_tx(ch: &mut Channel, now: u64) -> Vec<Transmit> {
    std::iter::from_fn(|| ch.poll_transmit(now)).collect()
}

fn drain_ev(ch: &mut Channel) -> Vec<Event> {
    std::iter::from_fn(|| ch.poll_event()).collect()
}

/// Delivers every frame both ways until nothing moves; returns messages received by b.
fn settle(a: &mut Channel, b: &mut Channel, now: u64, asm: &mut Assembler) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    for _ in 0..1000 {
        let ta = drain_tx(a, now);
        for t in &ta {
            b.handle(now, &t.to_vec());
        }
        for e in drain_ev(b) {
            if let Event::Delivered(d) = e {
                if let Some((_, m)) = asm.push(d).unwrap() {
                    got.push(m);
                }
            }
        }
        let tb = drain_tx(b, now);
        for t in &tb {
            a.handle(now, &t.to_vec());
        }
        if ta.is_empty() && tb.is_empty() {
            return got;
        }
    }
    panic!("did not settle");
}

#[test]
fn message_is_delivered_and_acked() {
    let (mut a, mut b) = pair(cfg());
    let msg: Vec<u8> = (0..350u32).map(|i| i as u8).collect();
    assert_eq!(a.send(0, &msg).unwrap(), MsgId(1));
    let mut asm = Assembler::new(1 << 20);
    let got = settle(&mut a, &mut b, 1, &mut asm);
    assert_eq!(got, vec![msg]);
    assert_eq!(drain_ev(&mut a), vec![Event::Acked { msg: MsgId(1) }]);
    assert!(a.is_idle() && b.is_idle());
    assert_eq!(a.poll_timeout(), None);
    assert_eq!(a.counters().frags_sent, 4);
    assert_eq!(b.counters().frags_delivered, 4);
    assert_eq!(a.counters().retransmits, 0);
}

#[test]
fn empty_message_is_one_fragment() {
    let (mut a, mut b) = pair(cfg());
    a.send(0, &[]).unwrap();
    let got = settle(&mut a, &mut b, 1, &mut Assembler::new(10));
    assert_eq!(got, vec![Vec::<u8>::new()]);
}

#[test]
fn out_of_order_and_duplicates() {
    let (mut a, mut b) = pair(cfg());
    let m1 = vec![1u8; 250];
    let m2 = vec![2u8; 50];
    a.send(0, &m1).unwrap();
    a.send(0, &m2).unwrap();
    let mut tx = drain_tx(&mut a, 0);
    assert_eq!(tx.len(), 4);
    tx.reverse();
    for t in &tx {
        b.handle(1, &t.to_vec());
        b.handle(1, &t.to_vec()); // duplicate
    }
    let mut asm = Assembler::new(1000);
    let msgs: Vec<Vec<u8>> = drain_ev(&mut b)
        .into_iter()
        .filter_map(|e| match e {
            Event::Delivered(d) => asm.push(d).unwrap().map(|(_, m)| m),
            _ => None,
        })
        .collect();
    assert_eq!(msgs, vec![m1, m2]);
    assert_eq!(b.counters().dup_dropped, 4);
    settle(&mut a, &mut b, 2, &mut asm);
    assert_eq!(a.unacked_messages(), 0);
}

#[test]
fn corrupt_payload_is_nacked_and_resent() {
    let (mut a, mut b) = pair(cfg());
    a.send(0, b"hello, world").unwrap();
    let t = a.poll_transmit(0).unwrap();
    let mut bad = t.to_vec();
    bad[HEADER_LEN + 3] ^= 0x10;
    b.handle(1, &bad);
    assert_eq!(b.counters().corrupt_payload, 1);
    assert!(drain_ev(&mut b).contains(&Event::CorruptDropped { count: 1 }));
    let nack = b.poll_transmit(1).unwrap();
    assert_eq!(
        Frame::new_checked(&nack.to_vec()[..]).unwrap().kind(),
        Kind::Nack
    );
    a.handle(2, &nack.to_vec());
    let again = a
        .poll_transmit(2)
        .expect("NACK triggers an immediate resend");
    assert_eq!(
        Frame::new_checked(&again.to_vec()[..])
            .unwrap()
            .repr()
            .send_count,
        2
    );
    b.handle(3, &again.to_vec());
    match b.poll_event() {
        Some(Event::Delivered(d)) => assert_eq!(d.data, b"hello, world"),
        other => panic!("expected delivery, got {other:?}"),
    }
    assert_eq!(a.counters().nack_retransmits, 1);
}

#[test]
fn corrupt_header_is_dropped_silently() {
    let (mut a, mut b) = pair(cfg());
    a.send(0, b"x").unwrap();
    let mut bad = a.poll_transmit(0).unwrap().to_vec();
    bad[26] ^= 1; // in seq
    b.handle(1, &bad);
    assert_eq!(b.counters().malformed_dropped, 1);
    assert!(
        b.poll_transmit(1).is_none(),
        "no answer to an untrusted header"
    );
}

#[test]
fn foreign_and_misdirected_frames_are_dropped() {
    let (mut a, mut b) = pair(cfg());
    let forged = FrameRepr {
        kind_code: Kind::Data.code(),
        src: 0,
        dst: 1,
        seq: 1,
        send_count: 1,
        msg_id: 1,
        msg_len: 3,
        ..FrameRepr::default()
    };
    // Sealed with another job's key, and carrying no valid tag at all.
    b.handle(0, &forged.to_sealed_frame(&FrameKey::from_job_key(KEY ^ 1), b"bad").unwrap());
    assert_eq!(b.counters().foreign_dropped, 1);
    assert_eq!(drain_ev(&mut b), vec![Event::ForeignDropped { count: 1 }]);
    b.handle(0, &FrameRepr { tag: KEY, ..forged }.to_frame(b"bad").unwrap());
    assert_eq!(b.counters().foreign_dropped, 2);
    assert_eq!(drain_ev(&mut b), vec![Event::ForeignDropped { count: 1 }]);
    let misdirected = FrameRepr { src: 7, ..forged };
    b.handle(0, &misdirected.to_sealed_frame(&FrameKey::from_job_key(KEY), b"bad").unwrap());
    assert_eq!(b.counters().misdirected_dropped, 1);
    assert!(drain_ev(&mut b).is_empty());
    // An ack for something never sent is ignored, not trusted.
    let ack = FrameRepr {
        kind_code: Kind::Ack.code(),
        src: 1,
        dst: 0,
        cum_received: 5,
        cum_delivered: 5,
        max_received: 5,
        ..FrameRepr::default()
    };
    a.send(0, b"data").unwrap();
    a.handle(0, &ack.to_sealed_frame(&FrameKey::from_job_key(KEY), &[]).unwrap());
    assert_eq!(a.counters().bad_acks, 1);
    assert_eq!(a.unacked_messages(), 1);
}

#[test]
fn lost_fragment_is_retransmitted_with_backoff() {
    let (mut a, mut b) = pair(cfg());
    a.send(0, b"once").unwrap();
    let _lost = a.poll_transmit(0).unwrap();
    let mut deadlines = Vec::new();
    let mut now = 0;
    for _ in 0..5 {
        let d = a.poll_timeout().unwrap();
        deadlines.push(d - now);
        now = d;
        a.handle_timeout(now);
        let _lost_again = a.poll_transmit(now).unwrap();
    }
    // 10, 20, 40, 80 (truncated), 80 ms.
    assert_eq!(deadlines, vec![10 * MS, 20 * MS, 40 * MS, 80 * MS, 80 * MS]);
    now = a.poll_timeout().unwrap();
    a.handle_timeout(now);
    let t = a.poll_transmit(now).unwrap();
    b.handle(now, &t.to_vec());
    assert!(matches!(b.poll_event(), Some(Event::Delivered(_))));
    a.handle(now, &b.poll_transmit(now).unwrap().to_vec());
    let events = drain_ev(&mut a);
    assert!(events.contains(&Event::Acked { msg: MsgId(1) }));
    // Default retries_per_route is 6: the sixth timeout reports the route once.
    assert!(events.contains(&Event::RetransmitExhausted { route: 0, seq: 1 }));
    assert_eq!(a.counters().timeouts, 6);
}

#[test]
fn received_but_undelivered_is_not_resent() {
    let (mut a, mut b) = pair(cfg());
    a.send(0, b"one").unwrap();
    let t = a.poll_transmit(0).unwrap();
    b.handle(1, &t.to_vec());
    // The application does not take it. The sender times out and resends once; the
    // duplicate draws a non-specific ACK saying "received, not delivered".
    a.handle_timeout(10 * MS);
    let t2 = a.poll_transmit(10 * MS).unwrap();
    b.handle(10 * MS, &t2.to_vec());
    let ack = b.poll_transmit(10 * MS).unwrap();
    a.handle(10 * MS, &ack.to_vec());
    // From now on the timer re-arms without resending.
    let d = a.poll_timeout().unwrap();
    a.handle_timeout(d);
    assert!(a.poll_transmit(d).is_none());
    assert_eq!(a.counters().retransmits_held, 1);
    assert_eq!(a.counters().retransmits, 1);
}

#[test]
fn exhaustion_then_failover_and_failback() {
    let mut c = cfg();
    c.routes = 2;
    c.retries_per_route = 3;
    let (mut a, mut b) = pair(c);
    a.send(0, &[9u8; 400]).unwrap(); // 4 fragments, striped over routes 0 and 1
    let tx = drain_tx(&mut a, 0);
    assert_eq!(
        tx.iter().map(|t| t.route).collect::<Vec<_>>(),
        vec![0, 1, 0, 1]
    );
    // Route 1 is dead: only route-0 frames arrive.
    let mut now = 0;
    for t in tx.iter().filter(|t| t.route == 0) {
        b.handle(now, &t.to_vec());
    }
    let mut asm = Assembler::new(1000);
    let mut exhausted = None;
    for _ in 0..20 {
        for e in drain_ev(&mut b) {
            if let Event::Delivered(d) = e {
                asm.push(d).unwrap();
            }
        }
        for t in drain_tx(&mut b, now) {
            a.handle(now, &t.to_vec());
        }
        for e in drain_ev(&mut a) {
            if let Event::RetransmitExhausted { route, .. } = e {
                exhausted = Some(route);
            }
        }
        if exhausted.is_some() {
            break;
        }
        now = a.poll_timeout().unwrap();
        a.handle_timeout(now);
        for t in drain_tx(&mut a, now) {
            if t.route == 0 {
                b.handle(now, &t.to_vec());
            }
        }
    }
    assert_eq!(exhausted, Some(1));
    a.fail_route(1);
    assert!(!a.route_is_up(1));
    let tx = drain_tx(&mut a, now);
    assert!(
        !tx.is_empty() && tx.iter().all(|t| t.route == 0),
        "rebound to route 0"
    );
    for t in &tx {
        b.handle(now, &t.to_vec());
    }
    let got = settle(&mut a, &mut b, now, &mut asm);
    assert_eq!(got, vec![vec![9u8; 400]]);
    assert!(a.counters().rebound >= 1);
    a.restore_route(1);
    a.send(now, &[1u8; 200]).unwrap();
    let tx = drain_tx(&mut a, now);
    assert!(
        tx.iter().any(|t| t.route == 1),
        "fail-back stripes onto route 1 again"
    );
}

#[test]
fn send_buffer_and_windows_are_bounded() {
    let mut c = cfg();
    c.send_buffer_bytes = 1000;
    c.send_window_frags = 3;
    let (mut a, mut b) = pair(c);
    a.send(0, &[0u8; 900]).unwrap();
    assert_eq!(a.send(0, &[0u8; 200]), Err(steadfast_reliable::WouldBlock));
    assert!(a.can_send(100));
    let first = drain_tx(&mut a, 0);
    assert_eq!(first.len(), 3, "window of 3 fragments");
    for t in &first {
        b.handle(0, &t.to_vec());
    }
    settle(&mut a, &mut b, 1, &mut Assembler::new(10_000));
    assert!(a.is_idle(), "{:?} / {:?}", a.counters(), b.counters());
    assert!(
        a.send(2, &[0u8; 2000]).is_ok(),
        "a big message is accepted when empty"
    );

    // Receiver window: frames far beyond cum_delivered are dropped.
    let c = cfg();
    let mut small = c.mirrored();
    small.send_window_frags = 2;
    small.recv_window_frags = 2;
    let (mut a, mut b) = (Channel::new(c).unwrap(), Channel::new(small).unwrap());
    a.send(0, &[0u8; 500]).unwrap();
    let tx = drain_tx(&mut a, 0);
    for t in tx.iter().rev() {
        b.handle(0, &t.to_vec());
    }
    assert_eq!(b.counters().window_dropped, 3);
    assert_eq!(b.counters().frags_received, 2);
}

#[test]
fn without_payload_checksums_data_flows_and_checking_peers_refuse_it() {
    let mut c = cfg();
    c.payload_checksum = false;
    let (mut a, mut b) = pair(c.clone());
    let msg: Vec<u8> = (0..250u32).map(|i| (i * 3) as u8).collect();
    a.send(0, &msg).unwrap();
    a.send_bytes(0, bytes::Bytes::from(msg.clone())).unwrap();
    let got = settle(&mut a, &mut b, 1, &mut Assembler::new(1000));
    assert_eq!(got, vec![msg.clone(), msg.clone()]);
    // The header stays protected: a damaged header is still caught.
    a.send(2, &msg).unwrap();
    let mut bad = a.poll_transmit(2).unwrap().to_vec();
    bad[30] ^= 2;
    b.handle(2, &bad);
    assert_eq!(b.counters().malformed_dropped, 1);

    // A receiver that requires checksums refuses unchecked fragments.
    let (mut a, _) = pair(c);
    let mut strict = Channel::new(cfg().mirrored()).unwrap();
    a.send(0, &msg).unwrap();
    for t in drain_tx(&mut a, 0) {
        strict.handle(0, &t.to_vec());
    }
    assert_eq!(strict.counters().unchecked_refused, 3);
    assert_eq!(strict.counters().frags_received, 0);
    assert!(strict.poll_event().is_none());
}
