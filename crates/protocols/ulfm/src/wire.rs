//! Messages and their compact binary encoding.
//!
//! Layout: `version u8 | tag u8 | epoch varint | body`. Integers are LEB128 varints (the
//! flag as its 32 bits); rank sets are `count, first, (gap − 1)*` in ascending order, so a
//! set of a few failed ranks costs a few bytes. The decoder checks every rank against the
//! communicator size, every length against the bytes left before allocating, and rejects
//! overlong varints, unknown tags and trailing bytes. It never panics.

use steadfast_proto::varint::{self, Reader, Writer};

use crate::rankset::{Rank, RankSet};
use crate::value::{Ballot, Contribution, Lock, Seq, Value};

/// Wire format version.
pub const WIRE_VERSION: u8 = 1;

/// A message between two members of one communicator instance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// Identity of the communicator instance (the engine's context id or generation):
    /// a message for another instance is refused, so a reused context id cannot mix them.
    pub epoch: u64,
    /// What the message says.
    pub body: Body,
}

/// The protocol's messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Body {
    /// REVOKE: the communicator is revoked; a first receipt is forwarded to every other
    /// live member (reliable flooding).
    Revoke,
    /// VOTE: a participant's input to instance `seq` and what it knows of the outcome,
    /// sent to the coordinator it believes in (again whenever that changes).
    Vote {
        /// Instance.
        seq: Seq,
        /// The participant's input.
        contribution: Contribution,
        /// Accepted proposal or decision, if any.
        lock: Lock,
    },
    /// QUERY: a new coordinator asks a member for its vote (also a promise request: the
    /// receiver ignores proposals of lower ballots afterwards).
    Query {
        /// Instance.
        seq: Seq,
        /// The new coordinator's ballot (its rank).
        ballot: Ballot,
    },
    /// PROPOSE: the coordinator's value for `seq`, to be accepted by every live member.
    Propose {
        /// Instance.
        seq: Seq,
        /// The coordinator's ballot (its rank).
        ballot: Ballot,
        /// The proposed value.
        value: Value,
    },
    /// ACK: the sender accepted the proposal of `ballot`.
    Ack {
        /// Instance.
        seq: Seq,
        /// The accepted ballot.
        ballot: Ballot,
    },
    /// DECIDE: `value` is the decision of `seq` (a fact: safe to adopt from anyone).
    Decide {
        /// Instance.
        seq: Seq,
        /// The decided value.
        value: Value,
    },
}

impl Body {
    /// Name for logs and statistics.
    pub fn name(&self) -> &'static str {
        match self {
            Body::Revoke => "REVOKE",
            Body::Vote { .. } => "VOTE",
            Body::Query { .. } => "QUERY",
            Body::Propose { .. } => "PROPOSE",
            Body::Ack { .. } => "ACK",
            Body::Decide { .. } => "DECIDE",
        }
    }

    /// Index of the message kind (0..KINDS), for per-kind counters.
    pub fn kind_index(&self) -> usize {
        match self {
            Body::Revoke => 0,
            Body::Vote { .. } => 1,
            Body::Query { .. } => 2,
            Body::Propose { .. } => 3,
            Body::Ack { .. } => 4,
            Body::Decide { .. } => 5,
        }
    }

    /// The agreement instance the message is about (none for REVOKE).
    pub fn seq(&self) -> Option<Seq> {
        match self {
            Body::Revoke => None,
            Body::Vote { seq, .. }
            | Body::Query { seq, .. }
            | Body::Propose { seq, .. }
            | Body::Ack { seq, .. }
            | Body::Decide { seq, .. } => Some(*seq),
        }
    }
}

/// Number of message kinds.
pub const KINDS: usize = 6;

/// Names of the message kinds, indexed by [`Body::kind_index`].
pub const KIND_NAMES: [&str; KINDS] = ["REVOKE", "VOTE", "QUERY", "PROPOSE", "ACK", "DECIDE"];

/// Why bytes could not be decoded into a [`Message`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The input ended in the middle of a field.
    #[error("truncated message")]
    Truncated,
    /// Unknown format version.
    #[error("unsupported wire version {0}")]
    Version(u8),
    /// Unknown message tag.
    #[error("unknown message tag {0}")]
    Tag(u8),
    /// A varint longer than its type allows, or not minimally encoded.
    #[error("malformed varint")]
    Varint,
    /// A field outside its allowed range (a rank not below the communicator size...).
    #[error("field {0} out of range")]
    Range(&'static str),
    /// A set claims more entries than the remaining bytes or the communicator can hold.
    #[error("set length {0} exceeds the message or the communicator")]
    Length(u64),
    /// Bytes left after the message.
    #[error("{0} trailing bytes")]
    Trailing(usize),
}

const T_REVOKE: u8 = 1;
const T_VOTE: u8 = 2;
const T_QUERY: u8 = 3;
const T_PROPOSE: u8 = 4;
const T_ACK: u8 = 5;
const T_DECIDE: u8 = 6;

const L_FREE: u8 = 0;
const L_ACCEPTED: u8 = 1;
const L_DECIDED: u8 = 2;

impl From<varint::Error> for DecodeError {
    fn from(e: varint::Error) -> Self {
        match e {
            varint::Error::Truncated => DecodeError::Truncated,
            varint::Error::Malformed => DecodeError::Varint,
        }
    }
}

/// This format's composite fields, on top of the shared writer.
trait Put {
    fn set(&mut self, s: &RankSet);
    fn value(&mut self, v: &Value);
}

impl Put for Writer {
    fn set(&mut self, s: &RankSet) {
        self.var(s.len() as u64);
        let mut next = 0u64;
        for r in s.iter() {
            // Gap to the previous rank + 1: ascending order is implied by the encoding.
            self.var(r as u64 - next);
            next = r as u64 + 1;
        }
    }
    fn value(&mut self, v: &Value) {
        self.var(v.flag as u32 as u64);
        self.u8(v.proc_failed as u8);
        self.var(v.cid);
        self.set(&v.failed);
        self.set(&v.missing);
    }
}

/// This format's checked fields, on top of the shared reader; ranks must be below `size`,
/// the communicator's.
trait Get {
    fn bool(&mut self) -> Result<bool, DecodeError>;
    fn flag(&mut self) -> Result<i32, DecodeError>;
    fn rank(&mut self, size: u32, field: &'static str) -> Result<Rank, DecodeError>;
    fn set(&mut self, size: u32) -> Result<RankSet, DecodeError>;
    fn value(&mut self, size: u32) -> Result<Value, DecodeError>;
}

impl Get for Reader<'_> {
    fn bool(&mut self) -> Result<bool, DecodeError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(DecodeError::Range("boolean")),
        }
    }
    fn flag(&mut self) -> Result<i32, DecodeError> {
        let v = self.var()?;
        if v > u32::MAX as u64 {
            return Err(DecodeError::Range("flag"));
        }
        Ok(v as u32 as i32)
    }
    fn rank(&mut self, size: u32, field: &'static str) -> Result<Rank, DecodeError> {
        let v = self.var()?;
        if v >= size as u64 {
            return Err(DecodeError::Range(field));
        }
        Ok(v as Rank)
    }
    fn set(&mut self, size: u32) -> Result<RankSet, DecodeError> {
        let n = self.var()?;
        // Every entry takes at least one byte: bound the allocation by the input.
        if n > self.left() as u64 || n > size as u64 {
            return Err(DecodeError::Length(n));
        }
        let mut out = Vec::with_capacity(n as usize);
        let mut next = 0u64;
        for _ in 0..n {
            let r = next
                .checked_add(self.var()?)
                .ok_or(DecodeError::Range("rank"))?;
            if r >= size as u64 {
                return Err(DecodeError::Range("rank"));
            }
            out.push(r as Rank);
            next = r + 1;
        }
        Ok(RankSet::from_sorted_unchecked(out))
    }
    fn value(&mut self, size: u32) -> Result<Value, DecodeError> {
        let v = Value {
            flag: self.flag()?,
            proc_failed: self.bool()?,
            cid: self.var()?,
            failed: self.set(size)?,
            missing: self.set(size)?,
        };
        if !v.missing.is_subset(&v.failed) {
            return Err(DecodeError::Range("missing contributors"));
        }
        Ok(v)
    }
}

impl Message {
    /// Encodes into a fresh buffer.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new(Vec::with_capacity(16));
        self.encode_into_inner(&mut w);
        w.into_inner()
    }

    /// Appends the encoding to `out`.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        let mut w = Writer::new(std::mem::take(out));
        self.encode_into_inner(&mut w);
        *out = w.into_inner();
    }

    fn encode_into_inner(&self, w: &mut Writer) {
        w.u8(WIRE_VERSION);
        let tag = match &self.body {
            Body::Revoke => T_REVOKE,
            Body::Vote { .. } => T_VOTE,
            Body::Query { .. } => T_QUERY,
            Body::Propose { .. } => T_PROPOSE,
            Body::Ack { .. } => T_ACK,
            Body::Decide { .. } => T_DECIDE,
        };
        w.u8(tag);
        w.var(self.epoch);
        match &self.body {
            Body::Revoke => {}
            Body::Vote {
                seq,
                contribution,
                lock,
            } => {
                w.var(*seq);
                w.var(contribution.flag as u32 as u64);
                w.var(contribution.cid);
                w.set(&contribution.failed);
                w.set(&contribution.acked);
                match lock {
                    Lock::Free => w.u8(L_FREE),
                    Lock::Accepted { ballot, value } => {
                        w.u8(L_ACCEPTED);
                        w.var(*ballot as u64);
                        w.value(value);
                    }
                    Lock::Decided(value) => {
                        w.u8(L_DECIDED);
                        w.value(value);
                    }
                }
            }
            Body::Query { seq, ballot } | Body::Ack { seq, ballot } => {
                w.var(*seq);
                w.var(*ballot as u64);
            }
            Body::Propose { seq, ballot, value } => {
                w.var(*seq);
                w.var(*ballot as u64);
                w.value(value);
            }
            Body::Decide { seq, value } => {
                w.var(*seq);
                w.value(value);
            }
        }
    }

    /// The epoch of an encoded message, read without decoding the rest: lets the engine
    /// route bytes to the right communicator instance (or keep them until it exists).
    pub fn peek_epoch(bytes: &[u8]) -> Result<u64, DecodeError> {
        let mut r = Reader::new(bytes);
        let version = r.u8()?;
        if version != WIRE_VERSION {
            return Err(DecodeError::Version(version));
        }
        r.u8()?;
        Ok(r.var()?)
    }

    /// Decodes a message of a communicator with `size` members (ranks must be below it).
    pub fn decode(bytes: &[u8], size: u32) -> Result<Message, DecodeError> {
        let mut r = Reader::new(bytes);
        let version = r.u8()?;
        if version != WIRE_VERSION {
            return Err(DecodeError::Version(version));
        }
        let tag = r.u8()?;
        let epoch = r.var()?;
        let body = match tag {
            T_REVOKE => Body::Revoke,
            T_VOTE => {
                let seq = r.var()?;
                let contribution = Contribution {
                    flag: r.flag()?,
                    cid: r.var()?,
                    failed: r.set(size)?,
                    acked: r.set(size)?,
                };
                if !contribution.acked.is_subset(&contribution.failed) {
                    return Err(DecodeError::Range("acknowledged set"));
                }
                let lock = match r.u8()? {
                    L_FREE => Lock::Free,
                    L_ACCEPTED => Lock::Accepted {
                        ballot: r.rank(size, "ballot")?,
                        value: r.value(size)?,
                    },
                    L_DECIDED => Lock::Decided(r.value(size)?),
                    _ => return Err(DecodeError::Range("lock")),
                };
                Body::Vote {
                    seq,
                    contribution,
                    lock,
                }
            }
            T_QUERY => Body::Query {
                seq: r.var()?,
                ballot: r.rank(size, "ballot")?,
            },
            T_ACK => Body::Ack {
                seq: r.var()?,
                ballot: r.rank(size, "ballot")?,
            },
            T_PROPOSE => Body::Propose {
                seq: r.var()?,
                ballot: r.rank(size, "ballot")?,
                value: r.value(size)?,
            },
            T_DECIDE => Body::Decide {
                seq: r.var()?,
                value: r.value(size)?,
            },
            t => return Err(DecodeError::Tag(t)),
        };
        if r.left() != 0 {
            return Err(DecodeError::Trailing(r.left()));
        }
        Ok(Message { epoch, body })
    }

    /// Checks a message built in memory the way [`Message::decode`] checks bytes: every
    /// rank below `size`, sets well formed. The machine calls it on every input.
    pub fn validate(&self, size: u32) -> Result<(), DecodeError> {
        let set_ok = |s: &RankSet| s.max().is_none_or(|m| m < size);
        let value_ok = |v: &Value| {
            if !set_ok(&v.failed) || !set_ok(&v.missing) {
                return Err(DecodeError::Range("rank"));
            }
            if !v.missing.is_subset(&v.failed) {
                return Err(DecodeError::Range("missing contributors"));
            }
            Ok(())
        };
        let ballot_ok = |b: Ballot| {
            if b < size {
                Ok(())
            } else {
                Err(DecodeError::Range("ballot"))
            }
        };
        match &self.body {
            Body::Revoke => Ok(()),
            Body::Vote {
                contribution, lock, ..
            } => {
                if !set_ok(&contribution.failed) || !set_ok(&contribution.acked) {
                    return Err(DecodeError::Range("rank"));
                }
                if !contribution.acked.is_subset(&contribution.failed) {
                    return Err(DecodeError::Range("acknowledged set"));
                }
                match lock {
                    Lock::Free => Ok(()),
                    Lock::Accepted { ballot, value } => {
                        ballot_ok(*ballot)?;
                        value_ok(value)
                    }
                    Lock::Decided(value) => value_ok(value),
                }
            }
            Body::Query { ballot, .. } | Body::Ack { ballot, .. } => ballot_ok(*ballot),
            Body::Propose { ballot, value, .. } => {
                ballot_ok(*ballot)?;
                value_ok(value)
            }
            Body::Decide { value, .. } => value_ok(value),
        }
    }
}

/// Fuzz entry point (fuzz/fuzz_targets/ulfm_wire.rs and the stable randomized test):
/// the first byte sets the communicator size (1..=64), the rest is a message as a peer's
/// bytes would arrive. Only a bug panics: a decoder that panics, a decoded message that
/// does not survive encode → decode, or an epoch that `peek_epoch` reads differently.
/// Returns whether the bytes decoded (the stable harness keeps those as seeds).
#[doc(hidden)]
pub fn fuzz_decode(data: &[u8]) -> bool {
    let (size, bytes) = data.split_first().map_or((1, data), |(s, r)| (u32::from(*s % 64) + 1, r));
    let peek = Message::peek_epoch(bytes);
    let Ok(m) = Message::decode(bytes, size) else { return false };
    assert_eq!(peek, Ok(m.epoch), "peek_epoch disagrees with decode");
    let again = m.encode();
    assert_eq!(Message::decode(&again, size), Ok(m), "decoded message does not survive encode");
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::rng::Rng;

    fn random_set(rng: &mut Rng, size: u32) -> RankSet {
        (0..rng.below(4))
            .map(|_| rng.below(size as u64) as Rank)
            .collect()
    }

    fn random_value(rng: &mut Rng, size: u32) -> Value {
        let failed = random_set(rng, size);
        let missing = failed.iter().filter(|_| rng.chance(500)).collect();
        Value {
            flag: rng.next_u64() as i32,
            proc_failed: rng.chance(500),
            cid: rng.next_u64() >> rng.below(64),
            failed,
            missing,
        }
    }

    /// A random well-formed message of a communicator of `size`.
    pub(crate) fn random_message(rng: &mut Rng, size: u32) -> Message {
        let seq = rng.next_u64() >> rng.below(64);
        let ballot = rng.below(size as u64) as Rank;
        let body = match rng.below(6) {
            0 => Body::Revoke,
            1 => {
                let failed = random_set(rng, size);
                let acked = failed.iter().filter(|_| rng.chance(500)).collect();
                let lock = match rng.below(3) {
                    0 => Lock::Free,
                    1 => Lock::Accepted {
                        ballot,
                        value: random_value(rng, size),
                    },
                    _ => Lock::Decided(random_value(rng, size)),
                };
                Body::Vote {
                    seq,
                    contribution: Contribution {
                        flag: rng.next_u64() as i32,
                        cid: rng.next_u64() >> rng.below(64),
                        failed,
                        acked,
                    },
                    lock,
                }
            }
            2 => Body::Query { seq, ballot },
            3 => Body::Propose {
                seq,
                ballot,
                value: random_value(rng, size),
            },
            4 => Body::Ack { seq, ballot },
            _ => Body::Decide {
                seq,
                value: random_value(rng, size),
            },
        };
        Message {
            epoch: rng.next_u64() >> rng.below(64),
            body,
        }
    }

    #[test]
    fn round_trip() {
        let mut rng = Rng::new(7);
        for _ in 0..20_000 {
            let size = rng.range(1, 5000) as u32;
            let m = random_message(&mut rng, size);
            assert_eq!(m.validate(size), Ok(()));
            let b = m.encode();
            assert_eq!(Message::decode(&b, size), Ok(m.clone()), "{b:?}");
            assert_eq!(Message::peek_epoch(&b), Ok(m.epoch));
            let mut out = vec![9];
            m.encode_into(&mut out);
            assert_eq!(&out[1..], &b[..]);
        }
    }

    #[test]
    fn sizes_are_compact() {
        let v = Value {
            flag: 1,
            proc_failed: false,
            cid: 1234,
            failed: RankSet::from_ranks([3]),
            missing: RankSet::from_ranks([3]),
        };
        let m = |body| Message { epoch: 5, body };
        assert_eq!(m(Body::Revoke).encode().len(), 3);
        assert_eq!(m(Body::Ack { seq: 9, ballot: 2 }).encode().len(), 5);
        assert_eq!(m(Body::Decide { seq: 9, value: v }).encode().len(), 12);
        // A fault-free agree vote (flag -1 takes five bytes).
        let vote = Body::Vote {
            seq: 9,
            contribution: Contribution::agree(-1, RankSet::new(), RankSet::new()),
            lock: Lock::Free,
        };
        assert_eq!(m(vote).encode().len(), 13);
    }

    /// Garbage never panics, never allocates beyond the input, and whatever decodes is
    /// canonical: it re-encodes to the same bytes and passes validation.
    #[test]
    fn garbage_never_panics() {
        let mut rng = Rng::new(99);
        let mut accepted = 0;
        for i in 0..200_000u32 {
            let size = rng.range(1, 40) as u32;
            let bytes: Vec<u8> = if i % 2 == 0 {
                (0..rng.below(40)).map(|_| rng.next_u64() as u8).collect()
            } else {
                // Mutations of valid messages reach deep into the decoder.
                let mut b = random_message(&mut rng, size).encode();
                for _ in 0..rng.range(1, 3) {
                    match rng.below(4) {
                        0 if !b.is_empty() => {
                            let k = rng.below(b.len() as u64) as usize;
                            b[k] = rng.next_u64() as u8;
                        }
                        1 if !b.is_empty() => {
                            b.truncate(rng.below(b.len() as u64) as usize);
                        }
                        2 => b.push(rng.next_u64() as u8),
                        _ => {
                            let k = rng.below(b.len() as u64 + 1) as usize;
                            b.insert(k, rng.next_u64() as u8);
                        }
                    }
                }
                b
            };
            let _ = Message::peek_epoch(&bytes);
            if let Ok(m) = Message::decode(&bytes, size) {
                accepted += 1;
                assert_eq!(Message::peek_epoch(&bytes), Ok(m.epoch));
                assert_eq!(m.encode(), bytes);
                assert_eq!(m.validate(size), Ok(()));
            }
        }
        // The mutations must keep some inputs valid, or the test proves nothing.
        assert!(accepted > 1000, "only {accepted} inputs decoded");
    }

    #[test]
    fn rejects_specific_garbage() {
        let ok = Message {
            epoch: 1,
            body: Body::Query { seq: 3, ballot: 2 },
        }
        .encode();
        assert_eq!(Message::decode(&ok, 3).map(|_| ()), Ok(()));
        assert_eq!(Message::decode(&ok, 2), Err(DecodeError::Range("ballot")));
        assert_eq!(Message::decode(&[], 3), Err(DecodeError::Truncated));
        assert_eq!(Message::decode(&[2, 1, 0], 3), Err(DecodeError::Version(2)));
        assert_eq!(Message::decode(&[1, 77, 0], 3), Err(DecodeError::Tag(77)));
        assert_eq!(
            Message::decode(&[1, 1, 0, 0], 3),
            Err(DecodeError::Trailing(1))
        );
        // Non-minimal varint.
        assert_eq!(
            Message::decode(&[1, 1, 0x80, 0], 3),
            Err(DecodeError::Varint)
        );
        // A set claiming a million entries in a handful of bytes.
        let mut b = vec![1, T_DECIDE, 0, 0, 0, 0, 0];
        b.extend_from_slice(&[0xc0, 0x84, 0x3d]);
        assert_eq!(Message::decode(&b, 3), Err(DecodeError::Length(1_000_000)));
    }
}
