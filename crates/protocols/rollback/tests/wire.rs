//! The decoders accept exactly the encodings and reject every truncation, extension and
//! garbage input without panicking.

use steadfast_rollback::wire::{Body, ChannelRecord, DecodeError, Message, Recorded, KINDS};
use steadfast_rollback::{Ident, UNNUMBERED};

/// SplitMix64, so the garbage is the same on every run.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

fn messages() -> Vec<Message> {
    let mut out = Vec::new();
    for inc in [0u16, 1, 300, u16::MAX] {
        for wave in [0u64, 1, 127, 128, u64::MAX] {
            for body in [
                Body::Checkpoint { wave },
                Body::Marker {
                    wave,
                    sent_upto: wave / 3,
                },
                Body::Done {
                    wave,
                    in_transit: 17,
                },
                Body::Failed { wave },
                Body::Commit { wave },
                Body::Abort { wave },
                Body::Rollback { wave },
                Body::RolledBack { wave },
                Body::Resume,
            ] {
                out.push(Message::new(inc, body));
            }
        }
    }
    out
}

fn record() -> ChannelRecord {
    let m = |world, seq, len: usize| Recorded {
        from: Ident {
            world,
            incarnation: 2,
            seq,
        },
        bytes: vec![seq as u8; len],
    };
    ChannelRecord {
        rank: 1,
        wave: 9,
        sent: vec![4, 0, 300, 7],
        received: vec![2, 0, 0, 200],
        in_transit: vec![
            m(0, 3, 5),
            m(3, 201, 0),
            m(0, UNNUMBERED, 9),
            m(0, 4, 130),
            m(2, 1, 1),
        ],
    }
}

#[test]
fn messages_round_trip_and_every_kind_is_covered() {
    let mut kinds = [false; KINDS];
    for m in messages() {
        kinds[m.body.kind_index()] = true;
        assert_eq!(Message::decode(&m.encode()), Ok(m.clone()), "{m:?}");
    }
    assert!(kinds.iter().all(|&k| k));
}

#[test]
fn message_truncations_and_extensions_are_rejected() {
    for m in messages() {
        let b = m.encode();
        for cut in 0..b.len() {
            assert!(
                Message::decode(&b[..cut]).is_err(),
                "{m:?} cut at {cut} accepted"
            );
        }
        let mut longer = b.clone();
        longer.push(0);
        assert_eq!(Message::decode(&longer), Err(DecodeError::Trailing(1)));
    }
}

#[test]
fn message_garbage_never_panics_and_accepted_bytes_are_canonical() {
    let mut rng = Rng(7);
    let mut accepted = 0;
    for i in 0..200_000 {
        let len = (i % 24) as usize;
        let mut b = rng.bytes(len);
        // Half the inputs start like a real message, so the decoder gets past the header.
        if i % 2 == 0 && len >= 2 {
            b[0] = 1;
            b[1] = (rng.next() % 11) as u8;
        }
        if let Ok(m) = Message::decode(&b) {
            accepted += 1;
            assert_eq!(m.encode(), b, "non-canonical bytes accepted");
        }
    }
    assert!(accepted > 0, "the garbage never reached a valid message");
    // Every single-byte change of every valid encoding.
    for m in messages() {
        let b = m.encode();
        for pos in 0..b.len() {
            for v in 0..=255u8 {
                let mut c = b.clone();
                c[pos] = v;
                if let Ok(d) = Message::decode(&c) {
                    assert_eq!(d.encode(), c);
                }
            }
        }
    }
}

#[test]
fn overlong_varints_and_out_of_range_fields_are_rejected() {
    // Incarnation above u16.
    assert_eq!(
        Message::decode(&[1, 1, 0x80, 0x80, 0x04, 0]),
        Err(DecodeError::Range("incarnation"))
    );
    // Non-minimal varint (a zero continuation byte).
    assert_eq!(
        Message::decode(&[1, 1, 0x80, 0x00, 0]),
        Err(DecodeError::Varint)
    );
    // Eleven-byte varint.
    let mut b = vec![1, 5, 0];
    b.extend([0xff; 10]);
    b.push(1);
    assert_eq!(Message::decode(&b), Err(DecodeError::Varint));
    assert_eq!(Message::decode(&[2, 1, 0, 0]), Err(DecodeError::Version(2)));
    assert_eq!(Message::decode(&[1, 0, 0, 0]), Err(DecodeError::Tag(0)));
    // A channel record is not a message, and a message is not a record.
    assert!(Message::decode(&record().encode()).is_err());
    assert!(ChannelRecord::decode(&Message::new(0, Body::Resume).encode()).is_err());
}

#[test]
fn records_round_trip_and_reject_truncations() {
    for rec in [
        record(),
        ChannelRecord::initial(0, 1),
        ChannelRecord::initial(3, 5),
    ] {
        let b = rec.encode();
        assert_eq!(ChannelRecord::decode(&b), Ok(rec.clone()));
        for cut in 0..b.len() {
            assert!(
                ChannelRecord::decode(&b[..cut]).is_err(),
                "cut at {cut} accepted"
            );
        }
        let mut longer = b.clone();
        longer.push(0);
        assert_eq!(
            ChannelRecord::decode(&longer),
            Err(DecodeError::Trailing(1))
        );
    }
}

#[test]
fn record_garbage_never_panics() {
    let b = record().encode();
    for pos in 0..b.len() {
        for v in 0..=255u8 {
            let mut c = b.clone();
            c[pos] = v;
            if let Ok(d) = ChannelRecord::decode(&c) {
                assert_eq!(d.encode(), c, "non-canonical record accepted");
                assert!(d.validate().is_ok());
            }
        }
    }
    let mut rng = Rng(11);
    for i in 0..100_000 {
        let mut g = rng.bytes((i % 64) as usize);
        if g.len() >= 2 {
            g[0] = 1;
            g[1] = 0xC1;
        }
        let _ = ChannelRecord::decode(&g);
    }
}

#[test]
fn record_lengths_are_bounded_by_the_input() {
    // A size of 2^40 ranks in a few bytes: refused before any allocation.
    let b = [1, 0xC1, 0, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20, 0];
    assert!(matches!(
        ChannelRecord::decode(&b),
        Err(DecodeError::Length(_))
    ));
    // A count of 2^40 in-transit messages.
    let mut b = ChannelRecord::initial(0, 2).encode();
    b.pop();
    b.extend([0x80, 0x80, 0x80, 0x80, 0x80, 0x20]);
    assert!(matches!(
        ChannelRecord::decode(&b),
        Err(DecodeError::Length(_))
    ));
    // A payload longer than what is left.
    let mut r = record();
    r.in_transit.truncate(1);
    let mut b = r.encode();
    b.truncate(b.len() - 1);
    assert!(ChannelRecord::decode(&b).is_err());
}

#[test]
fn inconsistent_records_are_rejected() {
    let mut r = record();
    r.sent[1] = 1; // a channel to itself
    assert_eq!(
        ChannelRecord::decode(&r.encode()),
        Err(DecodeError::Range("own channel"))
    );
    let mut r = record();
    r.in_transit[0].from.seq = 4; // gap after received[0] = 2
    assert_eq!(
        ChannelRecord::decode(&r.encode()),
        Err(DecodeError::Range("in-transit sequence"))
    );
    let mut r = record();
    r.in_transit.push(r.in_transit[0].clone()); // the same message twice
    assert!(ChannelRecord::decode(&r.encode()).is_err());
    let mut r = record();
    r.rank = 4; // outside the job
    assert_eq!(
        ChannelRecord::decode(&r.encode()),
        Err(DecodeError::Range("rank"))
    );
}
