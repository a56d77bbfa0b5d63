//! Encoding of determinants and of the messages between ranks and the event logger.
//!
//! `version | tag | fields`, LEB128 varints (`steadfast-proto`). The decoder checks every
//! length against the bytes left before allocating, rejects unknown tags, overlong varints,
//! values out of range and trailing bytes, so only canonical encodings decode.

use steadfast_proto::varint::{self, Reader, Writer};

/// Wire format version; a message of another version is refused.
pub const VERSION: u8 = 1;

/// A determinant: one nondeterministic event of a rank, in the order the rank saw them.
/// Events are numbered from 1 per rank (the rank's *event clock*).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Event {
    /// The message `seq` of world rank `from` (its sequence number among the messages it
    /// sent to this rank) was matched to a receive.
    Match { from: u32, seq: u64 },
    /// A call of the test/wait/probe family succeeded: it reported `indices` after
    /// `failed_before` unsuccessful calls of that family since the previous success. A
    /// probe names the message it saw in `probed`.
    Choice { call: u8, indices: Vec<u32>, failed_before: u64, probed: Option<(u32, u64)> },
}

impl Event {
    /// The message this event names (matched or probed), if any.
    pub fn message(&self) -> Option<(u32, u64)> {
        match self {
            Event::Match { from, seq } => Some((*from, *seq)),
            Event::Choice { probed, .. } => *probed,
        }
    }
}

/// A rank to the event logger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToLogger {
    /// Events `first, first+1, …` of the sending rank, whose process is `incarnation`.
    Log { incarnation: u16, first: u64, events: Vec<Event> },
    /// A rank started again as `incarnation` asks for its stored events from `from` on.
    Fetch { incarnation: u16, from: u64 },
    /// The sending rank's process image, taken when its events `1..=clock` were stored, is
    /// complete: a later failure restores it instead of re-executing from the start.
    Checkpointed { incarnation: u16, number: u64, clock: u64 },
    /// Answer to `ReportLog`: `bytes[d]` is how many payload bytes of messages to rank `d`
    /// the sending rank's sender-based log holds (what an image of `d` would free).
    LogSizes { bytes: Vec<u64> },
}

/// The event logger to a rank.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FromLogger {
    /// The receiver's events `1..=upto` are stored durably; `stable[r]` is the same for
    /// every rank `r` (the causal protocol stops piggybacking what is stable).
    Ack { upto: u64, stable: Vec<u64> },
    /// Answer to `Fetch`: the receiver's stored events, numbered from `first`.
    Events { first: u64, events: Vec<Event> },
    /// The checkpoint scheduler: take a process image now.
    Checkpoint,
    /// The launcher will restore image `number` if the rank fails: the senders may now be
    /// told to free their logs of what it holds.
    ImageKept { number: u64 },
    /// The checkpoint scheduler (best-effort policy) asks for the sizes of the sender-based
    /// log by destination.
    ReportLog,
}

/// Between ranks (causal protocol): determinants piggybacked on the next message, and the
/// collection of a recovering rank's determinants from the others.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Peer {
    /// Determinants not yet known stable, each `(rank, event number, event)`.
    Piggyback { dets: Vec<(u32, u64, Event)> },
    /// A rank started again asks for the determinants of its own events the receiver holds.
    Gather,
    /// Answer to `Gather`: the recovering rank's determinants held here.
    Held { dets: Vec<(u64, Event)> },
    /// The sender's image holds every message of the receiver up to sequence number `upto`
    /// (the receiver frees its log of them: they are never sent again).
    Checkpointed { upto: u64 },
}

/// Why bytes did not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("message truncated")]
    Truncated,
    #[error("malformed varint")]
    Malformed,
    #[error("unsupported version {0}")]
    Version(u8),
    #[error("unknown message tag {0}")]
    Tag(u8),
    #[error("field out of range")]
    Range,
    #[error("{0} trailing bytes")]
    Trailing(usize),
}

impl From<varint::Error> for DecodeError {
    fn from(e: varint::Error) -> Self {
        match e {
            varint::Error::Truncated => DecodeError::Truncated,
            varint::Error::Malformed => DecodeError::Malformed,
        }
    }
}

mod tag {
    pub const LOG: u8 = 1;
    pub const FETCH: u8 = 2;
    pub const ACK: u8 = 3;
    pub const EVENTS: u8 = 4;
    pub const PIGGYBACK: u8 = 5;
    pub const GATHER: u8 = 6;
    pub const HELD: u8 = 7;
    pub const CHECKPOINTED: u8 = 8;
    pub const CHECKPOINT: u8 = 9;
    pub const PEER_CHECKPOINTED: u8 = 10;
    pub const IMAGE_KEPT: u8 = 11;
    pub const REPORT_LOG: u8 = 12;
    pub const LOG_SIZES: u8 = 13;
    pub const MATCH: u8 = 0;
    pub const CHOICE: u8 = 1;
    pub const CHOICE_PROBED: u8 = 2;
}

fn start(t: u8) -> Writer {
    let mut w = Writer::default();
    w.u8(VERSION);
    w.u8(t);
    w
}

fn put_event(w: &mut Writer, e: &Event) {
    match e {
        Event::Match { from, seq } => {
            w.u8(tag::MATCH);
            w.var(u64::from(*from));
            w.var(*seq);
        }
        Event::Choice { call, indices, failed_before, probed } => {
            w.u8(if probed.is_some() { tag::CHOICE_PROBED } else { tag::CHOICE });
            w.u8(*call);
            w.var(*failed_before);
            w.var(indices.len() as u64);
            for i in indices {
                w.var(u64::from(*i));
            }
            if let Some((from, seq)) = probed {
                w.var(u64::from(*from));
                w.var(*seq);
            }
        }
    }
}

fn put_events(w: &mut Writer, events: &[Event]) {
    w.var(events.len() as u64);
    for e in events {
        put_event(w, e);
    }
}

struct Rd<'a>(Reader<'a>);

impl Rd<'_> {
    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.0.u8()?)
    }
    fn var(&mut self) -> Result<u64, DecodeError> {
        Ok(self.0.var()?)
    }
    fn u32(&mut self) -> Result<u32, DecodeError> {
        u32::try_from(self.var()?).map_err(|_| DecodeError::Range)
    }
    fn u16(&mut self) -> Result<u16, DecodeError> {
        u16::try_from(self.var()?).map_err(|_| DecodeError::Range)
    }
    /// A count of items taking at least `min` bytes each: checked against what is left
    /// before anything is allocated.
    fn count(&mut self, min: usize) -> Result<usize, DecodeError> {
        let n = self.var()?;
        if n > (self.0.left() / min.max(1)) as u64 {
            return Err(DecodeError::Truncated);
        }
        Ok(n as usize)
    }
    fn event(&mut self) -> Result<Event, DecodeError> {
        match self.u8()? {
            tag::MATCH => Ok(Event::Match { from: self.u32()?, seq: self.var()? }),
            t @ (tag::CHOICE | tag::CHOICE_PROBED) => {
                let call = self.u8()?;
                let failed_before = self.var()?;
                let n = self.count(1)?;
                let mut indices = Vec::with_capacity(n);
                for _ in 0..n {
                    indices.push(self.u32()?);
                }
                let probed = if t == tag::CHOICE_PROBED { Some((self.u32()?, self.var()?)) } else { None };
                Ok(Event::Choice { call, indices, failed_before, probed })
            }
            t => Err(DecodeError::Tag(t)),
        }
    }
    fn events(&mut self) -> Result<Vec<Event>, DecodeError> {
        let n = self.count(3)?;
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push(self.event()?);
        }
        Ok(v)
    }
    fn header(&mut self) -> Result<u8, DecodeError> {
        let v = self.u8()?;
        if v != VERSION {
            return Err(DecodeError::Version(v));
        }
        self.u8()
    }
    fn end(&self) -> Result<(), DecodeError> {
        match self.0.left() {
            0 => Ok(()),
            n => Err(DecodeError::Trailing(n)),
        }
    }
}

fn decode_with<T>(bytes: &[u8], f: impl FnOnce(u8, &mut Rd) -> Result<T, DecodeError>) -> Result<T, DecodeError> {
    let mut r = Rd(Reader::new(bytes));
    let t = r.header()?;
    let v = f(t, &mut r)?;
    r.end()?;
    Ok(v)
}

impl ToLogger {
    pub fn encode(&self) -> Vec<u8> {
        match self {
            ToLogger::Log { incarnation, first, events } => {
                let mut w = start(tag::LOG);
                w.var(u64::from(*incarnation));
                w.var(*first);
                put_events(&mut w, events);
                w.into_inner()
            }
            ToLogger::Fetch { incarnation, from } => {
                let mut w = start(tag::FETCH);
                w.var(u64::from(*incarnation));
                w.var(*from);
                w.into_inner()
            }
            ToLogger::Checkpointed { incarnation, number, clock } => {
                let mut w = start(tag::CHECKPOINTED);
                w.var(u64::from(*incarnation));
                w.var(*number);
                w.var(*clock);
                w.into_inner()
            }
            ToLogger::LogSizes { bytes } => {
                let mut w = start(tag::LOG_SIZES);
                w.var(bytes.len() as u64);
                for b in bytes {
                    w.var(*b);
                }
                w.into_inner()
            }
        }
    }

    pub fn decode(bytes: &[u8]) -> Result<ToLogger, DecodeError> {
        decode_with(bytes, |t, r| match t {
            tag::LOG => {
                let incarnation = r.u16()?;
                let first = r.var()?;
                if first == 0 {
                    return Err(DecodeError::Range);
                }
                Ok(ToLogger::Log { incarnation, first, events: r.events()? })
            }
            tag::FETCH => {
                let incarnation = r.u16()?;
                let from = r.var()?;
                if from == 0 {
                    return Err(DecodeError::Range);
                }
                Ok(ToLogger::Fetch { incarnation, from })
            }
            tag::CHECKPOINTED => {
                let incarnation = r.u16()?;
                let number = r.var()?;
                if number == 0 {
                    return Err(DecodeError::Range);
                }
                let clock = r.var()?;
                Ok(ToLogger::Checkpointed { incarnation, number, clock })
            }
            tag::LOG_SIZES => {
                let n = r.count(1)?;
                let mut bytes = Vec::with_capacity(n);
                for _ in 0..n {
                    bytes.push(r.var()?);
                }
                Ok(ToLogger::LogSizes { bytes })
            }
            t => Err(DecodeError::Tag(t)),
        })
    }
}

impl FromLogger {
    pub fn encode(&self) -> Vec<u8> {
        match self {
            FromLogger::Ack { upto, stable } => {
                let mut w = start(tag::ACK);
                w.var(*upto);
                w.var(stable.len() as u64);
                for s in stable {
                    w.var(*s);
                }
                w.into_inner()
            }
            FromLogger::Events { first, events } => {
                let mut w = start(tag::EVENTS);
                w.var(*first);
                put_events(&mut w, events);
                w.into_inner()
            }
            FromLogger::Checkpoint => start(tag::CHECKPOINT).into_inner(),
            FromLogger::ImageKept { number } => {
                let mut w = start(tag::IMAGE_KEPT);
                w.var(*number);
                w.into_inner()
            }
            FromLogger::ReportLog => start(tag::REPORT_LOG).into_inner(),
        }
    }

    pub fn decode(bytes: &[u8]) -> Result<FromLogger, DecodeError> {
        decode_with(bytes, |t, r| match t {
            tag::ACK => {
                let upto = r.var()?;
                let n = r.count(1)?;
                let mut stable = Vec::with_capacity(n);
                for _ in 0..n {
                    stable.push(r.var()?);
                }
                Ok(FromLogger::Ack { upto, stable })
            }
            tag::EVENTS => {
                let first = r.var()?;
                if first == 0 {
                    return Err(DecodeError::Range);
                }
                Ok(FromLogger::Events { first, events: r.events()? })
            }
            tag::CHECKPOINT => Ok(FromLogger::Checkpoint),
            tag::IMAGE_KEPT => Ok(FromLogger::ImageKept { number: r.var()? }),
            tag::REPORT_LOG => Ok(FromLogger::ReportLog),
            t => Err(DecodeError::Tag(t)),
        })
    }
}

impl Peer {
    pub fn encode(&self) -> Vec<u8> {
        match self {
            Peer::Piggyback { dets } => {
                let mut w = start(tag::PIGGYBACK);
                w.var(dets.len() as u64);
                for (rank, n, e) in dets {
                    w.var(u64::from(*rank));
                    w.var(*n);
                    put_event(&mut w, e);
                }
                w.into_inner()
            }
            Peer::Gather => start(tag::GATHER).into_inner(),
            Peer::Held { dets } => {
                let mut w = start(tag::HELD);
                w.var(dets.len() as u64);
                for (n, e) in dets {
                    w.var(*n);
                    put_event(&mut w, e);
                }
                w.into_inner()
            }
            Peer::Checkpointed { upto } => {
                let mut w = start(tag::PEER_CHECKPOINTED);
                w.var(*upto);
                w.into_inner()
            }
        }
    }

    pub fn decode(bytes: &[u8]) -> Result<Peer, DecodeError> {
        decode_with(bytes, |t, r| match t {
            tag::PIGGYBACK => {
                let n = r.count(5)?;
                let mut dets = Vec::with_capacity(n);
                for _ in 0..n {
                    let rank = r.u32()?;
                    let k = r.var()?;
                    if k == 0 {
                        return Err(DecodeError::Range);
                    }
                    dets.push((rank, k, r.event()?));
                }
                Ok(Peer::Piggyback { dets })
            }
            tag::GATHER => Ok(Peer::Gather),
            tag::HELD => {
                let n = r.count(4)?;
                let mut dets = Vec::with_capacity(n);
                for _ in 0..n {
                    let k = r.var()?;
                    if k == 0 {
                        return Err(DecodeError::Range);
                    }
                    dets.push((k, r.event()?));
                }
                Ok(Peer::Held { dets })
            }
            tag::PEER_CHECKPOINTED => Ok(Peer::Checkpointed { upto: r.var()? }),
            t => Err(DecodeError::Tag(t)),
        })
    }
}

/// The fuzzing oracle: every decoder on `data`; whatever decodes must encode back to the
/// same bytes (only canonical encodings are accepted). Returns whether anything decoded.
pub fn fuzz_decode(data: &[u8]) -> bool {
    let mut any = false;
    if let Ok(m) = ToLogger::decode(data) {
        assert_eq!(m.encode(), data, "a message to the logger does not survive encode");
        any = true;
    }
    if let Ok(m) = FromLogger::decode(data) {
        assert_eq!(m.encode(), data, "a message from the logger does not survive encode");
        any = true;
    }
    if let Ok(m) = Peer::decode(data) {
        assert_eq!(m.encode(), data, "a message between ranks does not survive encode");
        any = true;
    }
    let _ = crate::logger::journal::read(data);
    any
}

#[cfg(test)]
mod tests {
    use super::*;
    use steadfast_proto::Rng;

    fn samples() -> Vec<Vec<u8>> {
        let m = Event::Match { from: 3, seq: 300 };
        let c = Event::Choice { call: 2, indices: vec![0, 7], failed_before: 12, probed: None };
        let p = Event::Choice { call: 6, indices: vec![0], failed_before: 0, probed: Some((1, 9)) };
        vec![
            ToLogger::Log { incarnation: 2, first: 5, events: vec![m.clone(), c.clone(), p.clone()] }.encode(),
            ToLogger::Fetch { incarnation: 1, from: 1 }.encode(),
            FromLogger::Ack { upto: 40, stable: vec![1, 2, 3] }.encode(),
            FromLogger::Events { first: 1, events: vec![p.clone(), m.clone()] }.encode(),
            Peer::Piggyback { dets: vec![(0, 4, m.clone()), (2, 1, c.clone())] }.encode(),
            Peer::Gather.encode(),
            Peer::Held { dets: vec![(3, p)] }.encode(),
            ToLogger::Checkpointed { incarnation: 1, number: 3, clock: 77 }.encode(),
            FromLogger::Checkpoint.encode(),
            FromLogger::ImageKept { number: 3 }.encode(),
            Peer::Checkpointed { upto: 41 }.encode(),
            FromLogger::ReportLog.encode(),
            ToLogger::LogSizes { bytes: vec![0, 1 << 20, 300] }.encode(),
        ]
    }

    fn roundtrips(b: &[u8]) -> bool {
        ToLogger::decode(b).map(|m| m.encode() == b).unwrap_or(false)
            || FromLogger::decode(b).map(|m| m.encode() == b).unwrap_or(false)
            || Peer::decode(b).map(|m| m.encode() == b).unwrap_or(false)
    }

    fn accepted_canonical(b: &[u8]) {
        if let Ok(m) = ToLogger::decode(b) {
            assert_eq!(m.encode(), b);
        }
        if let Ok(m) = FromLogger::decode(b) {
            assert_eq!(m.encode(), b);
        }
        if let Ok(m) = Peer::decode(b) {
            assert_eq!(m.encode(), b);
        }
    }

    #[test]
    fn every_message_roundtrips() {
        for s in samples() {
            assert!(roundtrips(&s), "{s:?}");
        }
    }

    #[test]
    fn truncations_and_byte_changes_never_panic_and_only_canonical_bytes_decode() {
        for s in samples() {
            for n in 0..s.len() {
                assert!(!roundtrips(&s[..n]) || n == s.len(), "truncated to {n}: {s:?}");
                accepted_canonical(&s[..n]);
            }
            for i in 0..s.len() {
                for v in 0..=255u8 {
                    let mut b = s.clone();
                    b[i] = v;
                    accepted_canonical(&b);
                }
            }
            let mut long = s.clone();
            long.push(0);
            assert!(!roundtrips(&long));
        }
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut rng = Rng::new(14);
        for _ in 0..200_000 {
            let n = rng.below(40) as usize;
            let mut b: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
            if n >= 2 && rng.chance(800) {
                b[0] = VERSION;
                b[1] = 1 + rng.below(7) as u8;
            }
            accepted_canonical(&b);
        }
    }

    #[test]
    fn the_fuzzing_corpus_decodes() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../fuzz/corpus/logging_wire");
        let mut n = 0;
        for e in std::fs::read_dir(dir).expect("corpus directory").flatten() {
            let b = std::fs::read(e.path()).expect("corpus file");
            assert!(fuzz_decode(&b), "{} does not decode", e.path().display());
            n += 1;
        }
        assert!(n >= 7);
    }

    #[test]
    fn huge_counts_are_refused_before_allocating() {
        let mut w = start(tag::EVENTS);
        w.var(1);
        w.var(u64::MAX >> 1);
        assert_eq!(FromLogger::decode(&w.into_inner()), Err(DecodeError::Truncated));
    }
}
