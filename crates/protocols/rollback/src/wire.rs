//! Messages, the channel record, and their compact binary encodings.
//!
//! Message layout: `version u8 | tag u8 | incarnation varint | fields (varints)`.
//! Channel record layout: `version u8 | 0xC1 | rank | size | wave | sent[size] |
//! received[size] | count | (from | incarnation | seq | len | bytes)*`.
//! Integers are LEB128 varints. The decoders check every field against its range, every
//! length against the bytes left before allocating, and reject overlong varints, unknown
//! tags and trailing bytes. They never panic.

use steadfast_proto::varint::{self, Reader, Writer};

use crate::{Ident, Rank, Wave, UNNUMBERED};

/// Wire format version.
pub const WIRE_VERSION: u8 = 1;

/// A protocol message between the scheduler and a rank or between two ranks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// The job incarnation the sender is in (number of rollbacks so far).
    pub incarnation: u16,
    /// What the message says.
    pub body: Body,
}

/// The protocol's messages (see the table in the crate documentation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Body {
    /// Scheduler → rank: start wave `wave`.
    Checkpoint { wave: Wave },
    /// Rank → rank: the sender's cut of `wave`; it had sent the receiver the application
    /// messages `1..=sent_upto` (of this incarnation's numbering) before the cut.
    Marker { wave: Wave, sent_upto: u64 },
    /// Rank → scheduler: image and channel record of `wave` stored; `in_transit` messages
    /// were recorded.
    Done { wave: Wave, in_transit: u64 },
    /// Rank → scheduler: the rank could not store `wave`.
    Failed { wave: Wave },
    /// Scheduler → rank: `wave` is committed; images of older waves may be deleted.
    Commit { wave: Wave },
    /// Scheduler → rank: `wave` will never be committed.
    Abort { wave: Wave },
    /// Scheduler → rank: restore checkpoint `wave` and become the message's incarnation.
    Rollback { wave: Wave },
    /// Rank → scheduler: checkpoint `wave` restored.
    RolledBack { wave: Wave },
    /// Scheduler → rank: every rank restored; the application may go on.
    Resume,
}

impl Body {
    /// Name for logs and statistics.
    pub fn name(&self) -> &'static str {
        KIND_NAMES[self.kind_index()]
    }

    /// Index of the message kind (0..KINDS), for per-kind counters.
    pub fn kind_index(&self) -> usize {
        match self {
            Body::Checkpoint { .. } => 0,
            Body::Marker { .. } => 1,
            Body::Done { .. } => 2,
            Body::Failed { .. } => 3,
            Body::Commit { .. } => 4,
            Body::Abort { .. } => 5,
            Body::Rollback { .. } => 6,
            Body::RolledBack { .. } => 7,
            Body::Resume => 8,
        }
    }
}

/// Number of message kinds.
pub const KINDS: usize = 9;

/// Names of the message kinds, indexed by [`Body::kind_index`].
pub const KIND_NAMES: [&str; KINDS] = [
    "CHECKPOINT",
    "MARKER",
    "DONE",
    "FAILED",
    "COMMIT",
    "ABORT",
    "ROLLBACK",
    "ROLLED_BACK",
    "RESUME",
];

/// Why bytes could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The input ended in the middle of a field.
    #[error("truncated input")]
    Truncated,
    /// Unknown format version.
    #[error("unsupported wire version {0}")]
    Version(u8),
    /// Unknown message tag.
    #[error("unknown tag {0}")]
    Tag(u8),
    /// A varint longer than its type allows, or not minimally encoded.
    #[error("malformed varint")]
    Varint,
    /// A field outside its allowed range.
    #[error("field {0} out of range")]
    Range(&'static str),
    /// A length larger than the remaining bytes.
    #[error("length {0} exceeds the input")]
    Length(u64),
    /// Bytes left after the end.
    #[error("{0} trailing bytes")]
    Trailing(usize),
}

const T_CHECKPOINT: u8 = 1;
const T_MARKER: u8 = 2;
const T_DONE: u8 = 3;
const T_FAILED: u8 = 4;
const T_COMMIT: u8 = 5;
const T_ABORT: u8 = 6;
const T_ROLLBACK: u8 = 7;
const T_ROLLED_BACK: u8 = 8;
const T_RESUME: u8 = 9;
/// Tag of a channel record (outside the message tags, so one can never pass for the other).
const T_RECORD: u8 = 0xC1;

impl From<varint::Error> for DecodeError {
    fn from(e: varint::Error) -> Self {
        match e {
            varint::Error::Truncated => DecodeError::Truncated,
            varint::Error::Malformed => DecodeError::Varint,
        }
    }
}

/// The shared cursor with this format's checks on top.
struct R<'a> {
    buf: &'a [u8],
    rd: Reader<'a>,
}

impl<'a> R<'a> {
    fn new(buf: &'a [u8]) -> Self {
        R {
            buf,
            rd: Reader::new(buf),
        }
    }
    fn left(&self) -> usize {
        self.rd.left()
    }
    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.rd.u8()?)
    }
    fn var(&mut self) -> Result<u64, DecodeError> {
        Ok(self.rd.var()?)
    }
    fn u16(&mut self, field: &'static str) -> Result<u16, DecodeError> {
        u16::try_from(self.var()?).map_err(|_| DecodeError::Range(field))
    }
    fn u32(&mut self, field: &'static str) -> Result<u32, DecodeError> {
        u32::try_from(self.var()?).map_err(|_| DecodeError::Range(field))
    }
    fn bytes(&mut self) -> Result<Vec<u8>, DecodeError> {
        let n = self.var()?;
        // Bound the allocation by the input.
        if n > self.left() as u64 {
            return Err(DecodeError::Length(n));
        }
        let start = self.buf.len() - self.left();
        let (taken, rest) = self.buf[start..].split_at(n as usize);
        // The shared reader has no skip: go on with one over what follows.
        self.rd = Reader::new(rest);
        Ok(taken.to_vec())
    }
    fn header(&mut self) -> Result<u8, DecodeError> {
        let v = self.u8()?;
        if v != WIRE_VERSION {
            return Err(DecodeError::Version(v));
        }
        self.u8()
    }
    fn end(&self) -> Result<(), DecodeError> {
        match self.left() {
            0 => Ok(()),
            n => Err(DecodeError::Trailing(n)),
        }
    }
}

impl Message {
    /// A message of incarnation `incarnation`.
    pub fn new(incarnation: u16, body: Body) -> Message {
        Message { incarnation, body }
    }

    /// Encodes into a fresh buffer.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new(Vec::with_capacity(12));
        w.u8(WIRE_VERSION);
        let tag = match self.body {
            Body::Checkpoint { .. } => T_CHECKPOINT,
            Body::Marker { .. } => T_MARKER,
            Body::Done { .. } => T_DONE,
            Body::Failed { .. } => T_FAILED,
            Body::Commit { .. } => T_COMMIT,
            Body::Abort { .. } => T_ABORT,
            Body::Rollback { .. } => T_ROLLBACK,
            Body::RolledBack { .. } => T_ROLLED_BACK,
            Body::Resume => T_RESUME,
        };
        w.u8(tag);
        w.var(self.incarnation as u64);
        match self.body {
            Body::Checkpoint { wave }
            | Body::Failed { wave }
            | Body::Commit { wave }
            | Body::Abort { wave }
            | Body::Rollback { wave }
            | Body::RolledBack { wave } => w.var(wave),
            Body::Marker { wave, sent_upto } => {
                w.var(wave);
                w.var(sent_upto);
            }
            Body::Done { wave, in_transit } => {
                w.var(wave);
                w.var(in_transit);
            }
            Body::Resume => {}
        }
        w.into_inner()
    }

    /// Decodes one message that fills `bytes` exactly.
    pub fn decode(bytes: &[u8]) -> Result<Message, DecodeError> {
        let mut r = R::new(bytes);
        let tag = r.header()?;
        let incarnation = r.u16("incarnation")?;
        let body = match tag {
            T_CHECKPOINT => Body::Checkpoint { wave: r.var()? },
            T_MARKER => Body::Marker {
                wave: r.var()?,
                sent_upto: r.var()?,
            },
            T_DONE => Body::Done {
                wave: r.var()?,
                in_transit: r.var()?,
            },
            T_FAILED => Body::Failed { wave: r.var()? },
            T_COMMIT => Body::Commit { wave: r.var()? },
            T_ABORT => Body::Abort { wave: r.var()? },
            T_ROLLBACK => Body::Rollback { wave: r.var()? },
            T_ROLLED_BACK => Body::RolledBack { wave: r.var()? },
            T_RESUME => Body::Resume,
            t => return Err(DecodeError::Tag(t)),
        };
        r.end()?;
        Ok(Message { incarnation, body })
    }
}

/// One application message recorded in transit: its identity and its bytes as the engine
/// handed them over (opaque to this crate).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recorded {
    pub from: Ident,
    pub bytes: Vec<u8>,
}

/// What a rank stores next to its process image for one wave: the sequence numbers of its
/// channels at the cut and the messages that were in transit towards it.
///
/// Restoring wave `wave` at `rank` means: restore the image, re-deliver `in_transit` in
/// order, send to rank `j` from sequence number `sent[j] + 1` on, and expect from rank `i`
/// the sequence number after the last in-transit one from `i` (or `received[i] + 1`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChannelRecord {
    pub rank: Rank,
    pub wave: Wave,
    /// Last sequence number sent to each rank before the cut (0: none; own entry 0).
    pub sent: Vec<u64>,
    /// Last sequence number received from each rank before the cut (own entry 0).
    pub received: Vec<u64>,
    /// Messages that arrived after the cut and before the sender's marker, in arrival order.
    pub in_transit: Vec<Recorded>,
}

impl ChannelRecord {
    /// The record of wave 0, the start of the job: nothing sent, nothing received.
    pub fn initial(rank: Rank, size: u32) -> ChannelRecord {
        ChannelRecord {
            rank,
            wave: 0,
            sent: vec![0; size as usize],
            received: vec![0; size as usize],
            in_transit: Vec::new(),
        }
    }

    /// Number of ranks in the job.
    pub fn size(&self) -> u32 {
        self.sent.len() as u32
    }

    /// Last sequence number from each rank once the in-transit messages are re-delivered.
    pub fn received_after_replay(&self) -> Vec<u64> {
        let mut r = self.received.clone();
        for m in self.in_transit.iter().filter(|m| m.from.seq != UNNUMBERED) {
            if let Some(x) = r.get_mut(m.from.world as usize) {
                *x = m.from.seq;
            }
        }
        r
    }

    /// Checks the record's own consistency: ranks in range, no channel to itself, and the
    /// in-transit messages from each sender numbered on from `received` without gap or
    /// repetition (unnumbered packets aside).
    pub fn validate(&self) -> Result<(), DecodeError> {
        let size = self.sent.len();
        if size == 0 || self.received.len() != size {
            return Err(DecodeError::Range("size"));
        }
        let me = self.rank as usize;
        if me >= size {
            return Err(DecodeError::Range("rank"));
        }
        if self.sent[me] != 0 || self.received[me] != 0 {
            return Err(DecodeError::Range("own channel"));
        }
        let mut next = self.received.clone();
        for m in &self.in_transit {
            let from = m.from.world as usize;
            if from >= size || from == me {
                return Err(DecodeError::Range("in-transit sender"));
            }
            if m.from.seq == UNNUMBERED {
                continue;
            }
            if Some(m.from.seq) != next[from].checked_add(1) {
                return Err(DecodeError::Range("in-transit sequence"));
            }
            next[from] = m.from.seq;
        }
        Ok(())
    }

    /// Encodes into a fresh buffer.
    pub fn encode(&self) -> Vec<u8> {
        let payload: usize = self.in_transit.iter().map(|m| m.bytes.len() + 16).sum();
        let mut w = Writer::new(Vec::with_capacity(16 + self.sent.len() * 4 + payload));
        w.u8(WIRE_VERSION);
        w.u8(T_RECORD);
        w.var(self.rank as u64);
        w.var(self.sent.len() as u64);
        w.var(self.wave);
        for &s in &self.sent {
            w.var(s);
        }
        for &r in &self.received {
            w.var(r);
        }
        w.var(self.in_transit.len() as u64);
        for m in &self.in_transit {
            w.var(m.from.world as u64);
            w.var(m.from.incarnation as u64);
            w.var(m.from.seq);
            w.var(m.bytes.len() as u64);
            w.bytes(&m.bytes);
        }
        w.into_inner()
    }

    /// Decodes and [validates](Self::validate) a record that fills `bytes` exactly.
    pub fn decode(bytes: &[u8]) -> Result<ChannelRecord, DecodeError> {
        let mut r = R::new(bytes);
        match r.header()? {
            T_RECORD => {}
            t => return Err(DecodeError::Tag(t)),
        }
        let rank = r.u32("rank")?;
        let size = r.var()?;
        // Two varints of at least one byte per rank follow: bound the allocation by the input.
        if size == 0 || size > u32::MAX as u64 || size.saturating_mul(2) > r.left() as u64 {
            return Err(DecodeError::Length(size));
        }
        let wave = r.var()?;
        let mut sent = Vec::with_capacity(size as usize);
        for _ in 0..size {
            sent.push(r.var()?);
        }
        let mut received = Vec::with_capacity(size as usize);
        for _ in 0..size {
            received.push(r.var()?);
        }
        let count = r.var()?;
        // Each recorded message takes at least four bytes.
        if count.saturating_mul(4) > r.left() as u64 {
            return Err(DecodeError::Length(count));
        }
        let mut in_transit = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let world = r.u32("in-transit sender")?;
            let incarnation = r.u16("in-transit incarnation")?;
            let seq = r.var()?;
            let bytes = r.bytes()?;
            in_transit.push(Recorded {
                from: Ident {
                    world,
                    incarnation,
                    seq,
                },
                bytes,
            });
        }
        r.end()?;
        let rec = ChannelRecord {
            rank,
            wave,
            sent,
            received,
            in_transit,
        };
        rec.validate()?;
        Ok(rec)
    }
}

/// Fuzz entry point (fuzz/fuzz_targets/rollback_wire.rs and the stable randomized
/// test): `data` as a protocol message and as a channel record, as a peer's bytes (or a
/// checkpoint image's) would arrive. Only a bug panics: a decoder that panics, or a decoded
/// value that does not survive encode → decode. Returns whether either decoded.
#[doc(hidden)]
pub fn fuzz_decode(data: &[u8]) -> bool {
    let mut any = false;
    if let Ok(m) = Message::decode(data) {
        assert_eq!(Message::decode(&m.encode()), Ok(m), "message does not survive encode");
        any = true;
    }
    if let Ok(r) = ChannelRecord::decode(data) {
        assert_eq!(ChannelRecord::decode(&r.encode()), Ok(r), "record does not survive encode");
        any = true;
    }
    any
}
