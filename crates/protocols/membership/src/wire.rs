//! Messages and their compact binary encoding.
//!
//! Layout: `version u8 | tag u8 | sender_incarnation varint | body`. Integers are LEB128
//! varints; member lists are `count, (id gap, incarnation)*` with ids strictly ascending, so
//! a list of dead nodes costs about two bytes per entry. The decoder checks every length
//! against the bytes left before allocating, rejects out-of-range ids, overlong varints,
//! unknown tags and trailing bytes, and never panics.

use steadfast_proto::varint::{self, Reader, Writer};

use crate::id::{Member, NodeId, ViewId, MAX_INCARNATION, MAX_NODE_ID};

/// Wire format version.
pub const WIRE_VERSION: u8 = 1;

/// A message with the sender's incarnation, which lets receivers drop messages of an
/// earlier life of a restarted process and notice that the earlier life has ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// Incarnation of the sending process.
    pub sender_incarnation: u32,
    /// What the message says.
    pub body: Body,
}

/// The protocol's messages; names in capitals are the paper's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Body {
    /// NODE_FAILURE: a detector tells the root which members it found dead.
    NodeFailure {
        /// The detector's current view.
        view: ViewId,
        /// Members the detector knows are dead (ascending ids).
        dead: Vec<Member>,
    },
    /// ROOT_FAILURE: like NODE_FAILURE, sent to the next live id because the root is dead.
    RootFailure {
        /// The detector's current view.
        view: ViewId,
        /// Dead members, the old root included (ascending ids).
        dead: Vec<Member>,
    },
    /// FAILURE_DET_ACK: the coordinator took the report into account.
    FailureDetAck {
        /// The coordinator's view when it received the report.
        view: ViewId,
    },
    /// FAILED_NODE / ROOT_DEAD / ROOT_AND_NODE_FAILURE / NEW_NODE_JOIN / ALIVE_NODE_JOIN:
    /// a new view travelling down the tree.
    ViewChange(Change),
    /// FAILURE_ACK (also the join acknowledgement): the sender's subtree installed `view`
    /// or a newer view.
    FailureAck {
        /// The view acknowledged.
        view: ViewId,
    },
    /// NEW_NODE / NODE_ALIVE: a process asks the root to be added.
    Join {
        /// NEW_NODE or NODE_ALIVE.
        kind: JoinKind,
        /// The joining life (must match the sender).
        member: Member,
        /// Highest epoch the joiner has seen, so the new view numbers above it.
        max_epoch: u64,
    },
    /// JOIN_DET_ACK: the root accepted the join; the view including the joiner follows.
    JoinDetAck {
        /// The root's view when it accepted.
        view: ViewId,
        /// The root that accepted.
        root: NodeId,
    },
    /// A member that is not the coordinator names who is (answers a join or a report).
    Redirect {
        /// The sender's view.
        view: ViewId,
        /// Who coordinates that view.
        root: NodeId,
    },
    /// The message answered referred to an older view; here is the newer one.
    Stale {
        /// The sender's newer view.
        view: ViewId,
        /// Root of that view.
        root: NodeId,
        /// Whether the receiver (that exact life) is a member of `view`.
        member: bool,
    },
    /// A root tells a known id outside its view that the view exists (heals partitions).
    Probe {
        /// The prober's view.
        view: ViewId,
        /// The prober (root of `view`).
        root: NodeId,
    },
    /// Asks for the full member list of `view` (or newer) when a delta cannot be applied.
    ViewRequest {
        /// The view the requester heard of.
        view: ViewId,
    },
    /// A member tells its tree parent which view it holds (answered only if they differ).
    Sync {
        /// The sender's view.
        view: ViewId,
    },
}

/// Which join message (the paper treats both the same way).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum JoinKind {
    /// NEW_NODE: a process that has never been a member.
    New,
    /// NODE_ALIVE: a recovered rank that keeps its id.
    Recovered,
}

/// Which of the paper's messages a view change is; receivers treat all of them alike.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ChangeKind {
    /// FAILED_NODE: members failed, the root did not.
    FailedNode,
    /// ROOT_DEAD: only the root failed.
    RootDead,
    /// ROOT_AND_NODE_FAILURE: the root and other members failed.
    RootAndNodeFailure,
    /// NEW_NODE_JOIN / ALIVE_NODE_JOIN: members joined, none failed.
    NodeJoin,
    /// Failures and joins in one change (the paper's "list of failed and joined nodes").
    FailedAndJoined,
}

/// A view change: the new view as a delta from a base view, optionally with the full list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    /// Which paper message this is.
    pub kind: ChangeKind,
    /// The new view's number.
    pub view: ViewId,
    /// The view the delta applies to.
    pub base: ViewId,
    /// Number of members of the new view (self-check).
    pub len: u32,
    /// Digest of the new member set (self-check, see [`crate::view::digest_of`]).
    pub digest: u64,
    /// Members of `base` not in `view` (ascending).
    pub removed: Vec<Member>,
    /// Members of `view` not in `base` (ascending).
    pub added: Vec<Member>,
    /// The whole member list, sent to receivers that may not have `base` (joiners).
    pub members: Option<Vec<Member>>,
}

impl Change {
    /// The paper's name for this change.
    pub fn paper_name(&self) -> &'static str {
        match self.kind {
            ChangeKind::FailedNode => "FAILED_NODE",
            ChangeKind::RootDead => "ROOT_DEAD",
            ChangeKind::RootAndNodeFailure => "ROOT_AND_NODE_FAILURE",
            ChangeKind::NodeJoin => "NODE_JOIN",
            ChangeKind::FailedAndJoined => "FAILED_NODE+NODE_JOIN",
        }
    }
}

impl Body {
    /// The paper's (or our) name of the message, for logs.
    pub fn name(&self) -> &'static str {
        match self {
            Body::NodeFailure { .. } => "NODE_FAILURE",
            Body::RootFailure { .. } => "ROOT_FAILURE",
            Body::FailureDetAck { .. } => "FAILURE_DET_ACK",
            Body::ViewChange(c) => c.paper_name(),
            Body::FailureAck { .. } => "FAILURE_ACK",
            Body::Join {
                kind: JoinKind::New,
                ..
            } => "NEW_NODE",
            Body::Join {
                kind: JoinKind::Recovered,
                ..
            } => "NODE_ALIVE",
            Body::JoinDetAck { .. } => "JOIN_DET_ACK",
            Body::Redirect { .. } => "REDIRECT",
            Body::Stale { .. } => "STALE",
            Body::Probe { .. } => "PROBE",
            Body::ViewRequest { .. } => "VIEW_REQUEST",
            Body::Sync { .. } => "SYNC",
        }
    }
}

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
    /// A varint longer than its type allows.
    #[error("varint overflow")]
    Varint,
    /// A field outside its allowed range.
    #[error("field {0} out of range")]
    Range(&'static str),
    /// A list claims more entries than the remaining bytes can hold.
    #[error("list length {0} exceeds the message")]
    Length(u64),
    /// Bytes left after the message.
    #[error("{0} trailing bytes")]
    Trailing(usize),
}

// Tags.
const T_NODE_FAILURE: u8 = 1;
const T_ROOT_FAILURE: u8 = 2;
const T_FAILURE_DET_ACK: u8 = 3;
const T_VIEW_CHANGE: u8 = 4;
const T_FAILURE_ACK: u8 = 5;
const T_JOIN: u8 = 6;
const T_JOIN_DET_ACK: u8 = 7;
const T_REDIRECT: u8 = 8;
const T_STALE: u8 = 9;
const T_PROBE: u8 = 10;
const T_VIEW_REQUEST: u8 = 11;
const T_SYNC: u8 = 12;

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
    fn view(&mut self, v: ViewId);
    fn members(&mut self, ms: &[Member]);
}

impl Put for Writer {
    fn view(&mut self, v: ViewId) {
        self.var(v.epoch);
        self.var(v.coordinator as u64);
        self.var(v.coordinator_incarnation as u64);
    }
    fn members(&mut self, ms: &[Member]) {
        self.var(ms.len() as u64);
        let mut next = 0u64;
        for m in ms {
            // Gap to the previous id + 1, so ascending order is implied by the encoding.
            self.var((m.id as u64).saturating_sub(next));
            self.var(m.incarnation as u64);
            next = m.id as u64 + 1;
        }
    }
}

/// This format's checked fields, on top of the shared reader.
trait Get {
    fn var_u32(&mut self, max: u32, field: &'static str) -> Result<u32, DecodeError>;
    fn id(&mut self) -> Result<NodeId, DecodeError>;
    fn flag(&mut self) -> Result<bool, DecodeError>;
    fn view(&mut self) -> Result<ViewId, DecodeError>;
    fn member(&mut self) -> Result<Member, DecodeError>;
    fn members(&mut self) -> Result<Vec<Member>, DecodeError>;
}

impl Get for Reader<'_> {
    fn var_u32(&mut self, max: u32, field: &'static str) -> Result<u32, DecodeError> {
        let v = self.var()?;
        if v > max as u64 {
            return Err(DecodeError::Range(field));
        }
        Ok(v as u32)
    }
    fn id(&mut self) -> Result<NodeId, DecodeError> {
        self.var_u32(MAX_NODE_ID, "node id")
    }
    fn flag(&mut self) -> Result<bool, DecodeError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(DecodeError::Range("flag")),
        }
    }
    fn view(&mut self) -> Result<ViewId, DecodeError> {
        Ok(ViewId {
            epoch: self.var()?,
            coordinator: self.id()?,
            coordinator_incarnation: self.var_u32(MAX_INCARNATION, "incarnation")?,
        })
    }
    fn member(&mut self) -> Result<Member, DecodeError> {
        Ok(Member {
            id: self.id()?,
            incarnation: self.var_u32(MAX_INCARNATION, "incarnation")?,
        })
    }
    fn members(&mut self) -> Result<Vec<Member>, DecodeError> {
        let n = self.var()?;
        // Every entry takes at least two bytes: bound the allocation by the input.
        if n > (self.left() / 2) as u64 {
            return Err(DecodeError::Length(n));
        }
        let mut out = Vec::with_capacity(n as usize);
        let mut next = 0u64;
        for _ in 0..n {
            // A gap near 2^64 must not wrap around to an id already in the list.
            let id = next
                .checked_add(self.var()?)
                .ok_or(DecodeError::Range("node id"))?;
            if id > MAX_NODE_ID as u64 {
                return Err(DecodeError::Range("node id"));
            }
            let incarnation = self.var_u32(MAX_INCARNATION, "incarnation")?;
            out.push(Member {
                id: id as NodeId,
                incarnation,
            });
            next = id + 1;
        }
        Ok(out)
    }
}

impl Message {
    /// Encodes into a fresh buffer.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new(Vec::with_capacity(32));
        self.encode_into(&mut w);
        w.into_inner()
    }

    fn encode_into(&self, w: &mut Writer) {
        w.u8(WIRE_VERSION);
        let tag = match &self.body {
            Body::NodeFailure { .. } => T_NODE_FAILURE,
            Body::RootFailure { .. } => T_ROOT_FAILURE,
            Body::FailureDetAck { .. } => T_FAILURE_DET_ACK,
            Body::ViewChange(_) => T_VIEW_CHANGE,
            Body::FailureAck { .. } => T_FAILURE_ACK,
            Body::Join { .. } => T_JOIN,
            Body::JoinDetAck { .. } => T_JOIN_DET_ACK,
            Body::Redirect { .. } => T_REDIRECT,
            Body::Stale { .. } => T_STALE,
            Body::Probe { .. } => T_PROBE,
            Body::ViewRequest { .. } => T_VIEW_REQUEST,
            Body::Sync { .. } => T_SYNC,
        };
        w.u8(tag);
        w.var(self.sender_incarnation as u64);
        match &self.body {
            Body::NodeFailure { view, dead } | Body::RootFailure { view, dead } => {
                w.view(*view);
                w.members(dead);
            }
            Body::FailureDetAck { view }
            | Body::FailureAck { view }
            | Body::ViewRequest { view }
            | Body::Sync { view } => w.view(*view),
            Body::ViewChange(c) => {
                w.u8(match c.kind {
                    ChangeKind::FailedNode => 1,
                    ChangeKind::RootDead => 2,
                    ChangeKind::RootAndNodeFailure => 3,
                    ChangeKind::NodeJoin => 4,
                    ChangeKind::FailedAndJoined => 5,
                });
                w.view(c.view);
                w.view(c.base);
                w.var(c.len as u64);
                w.bytes(&c.digest.to_le_bytes());
                w.members(&c.removed);
                w.members(&c.added);
                match &c.members {
                    None => w.u8(0),
                    Some(ms) => {
                        w.u8(1);
                        w.members(ms);
                    }
                }
            }
            Body::Join {
                kind,
                member,
                max_epoch,
            } => {
                w.u8(match kind {
                    JoinKind::New => 1,
                    JoinKind::Recovered => 2,
                });
                w.var(member.id as u64);
                w.var(member.incarnation as u64);
                w.var(*max_epoch);
            }
            Body::JoinDetAck { view, root }
            | Body::Redirect { view, root }
            | Body::Probe { view, root } => {
                w.view(*view);
                w.var(*root as u64);
            }
            Body::Stale { view, root, member } => {
                w.view(*view);
                w.var(*root as u64);
                w.u8(*member as u8);
            }
        }
    }

    /// Decodes and checks one message; never panics, whatever the bytes.
    pub fn decode(bytes: &[u8]) -> Result<Message, DecodeError> {
        let mut r = Reader::new(bytes);
        let version = r.u8()?;
        if version != WIRE_VERSION {
            return Err(DecodeError::Version(version));
        }
        let tag = r.u8()?;
        let sender_incarnation = r.var_u32(MAX_INCARNATION, "incarnation")?;
        let body = match tag {
            T_NODE_FAILURE | T_ROOT_FAILURE => {
                let view = r.view()?;
                let dead = r.members()?;
                if tag == T_NODE_FAILURE {
                    Body::NodeFailure { view, dead }
                } else {
                    Body::RootFailure { view, dead }
                }
            }
            T_FAILURE_DET_ACK => Body::FailureDetAck { view: r.view()? },
            T_FAILURE_ACK => Body::FailureAck { view: r.view()? },
            T_VIEW_REQUEST => Body::ViewRequest { view: r.view()? },
            T_SYNC => Body::Sync { view: r.view()? },
            T_VIEW_CHANGE => {
                let kind = match r.u8()? {
                    1 => ChangeKind::FailedNode,
                    2 => ChangeKind::RootDead,
                    3 => ChangeKind::RootAndNodeFailure,
                    4 => ChangeKind::NodeJoin,
                    5 => ChangeKind::FailedAndJoined,
                    _ => return Err(DecodeError::Range("change kind")),
                };
                let view = r.view()?;
                let base = r.view()?;
                let len = r.var_u32(MAX_NODE_ID + 1, "view length")?;
                let mut d = [0u8; 8];
                for b in d.iter_mut() {
                    *b = r.u8()?;
                }
                let removed = r.members()?;
                let added = r.members()?;
                let members = if r.flag()? { Some(r.members()?) } else { None };
                Body::ViewChange(Change {
                    kind,
                    view,
                    base,
                    len,
                    digest: u64::from_le_bytes(d),
                    removed,
                    added,
                    members,
                })
            }
            T_JOIN => {
                let kind = match r.u8()? {
                    1 => JoinKind::New,
                    2 => JoinKind::Recovered,
                    _ => return Err(DecodeError::Range("join kind")),
                };
                let member = r.member()?;
                let max_epoch = r.var()?;
                Body::Join {
                    kind,
                    member,
                    max_epoch,
                }
            }
            T_JOIN_DET_ACK | T_REDIRECT | T_PROBE => {
                let view = r.view()?;
                let root = r.id()?;
                match tag {
                    T_JOIN_DET_ACK => Body::JoinDetAck { view, root },
                    T_REDIRECT => Body::Redirect { view, root },
                    _ => Body::Probe { view, root },
                }
            }
            T_STALE => {
                let view = r.view()?;
                let root = r.id()?;
                let member = r.flag()?;
                Body::Stale { view, root, member }
            }
            t => return Err(DecodeError::Tag(t)),
        };
        if r.left() != 0 {
            return Err(DecodeError::Trailing(r.left()));
        }
        Ok(Message {
            sender_incarnation,
            body,
        })
    }
}

#[cfg(test)]
mod tests {
    use steadfast_proto::Rng;

    use super::*;

    fn members(rng: &mut Rng) -> Vec<Member> {
        let n = rng.below(6);
        let mut id = 0u32;
        (0..n)
            .map(|_| {
                id += rng.below(1000) as u32 + 1;
                Member::new(id, rng.below(5) as u32)
            })
            .collect()
    }

    fn view(rng: &mut Rng) -> ViewId {
        ViewId {
            epoch: rng.next_u64() >> rng.below(64),
            coordinator: rng.below(MAX_NODE_ID as u64 + 1) as u32,
            coordinator_incarnation: rng.below(7) as u32,
        }
    }

    fn sample(rng: &mut Rng) -> Message {
        let v = view(rng);
        let body = match rng.below(12) {
            0 => Body::NodeFailure {
                view: v,
                dead: members(rng),
            },
            1 => Body::RootFailure {
                view: v,
                dead: members(rng),
            },
            2 => Body::FailureDetAck { view: v },
            3 => Body::ViewChange(Change {
                kind: ChangeKind::RootAndNodeFailure,
                view: v,
                base: view(rng),
                len: rng.below(100) as u32,
                digest: rng.next_u64(),
                removed: members(rng),
                added: members(rng),
                members: if rng.below(2) == 0 {
                    None
                } else {
                    Some(members(rng))
                },
            }),
            4 => Body::FailureAck { view: v },
            5 => Body::Join {
                kind: if rng.below(2) == 0 {
                    JoinKind::New
                } else {
                    JoinKind::Recovered
                },
                member: Member::new(rng.below(1 << 20) as u32, 3),
                max_epoch: rng.next_u64(),
            },
            6 => Body::JoinDetAck { view: v, root: 7 },
            7 => Body::Redirect { view: v, root: 0 },
            8 => Body::Stale {
                view: v,
                root: 3,
                member: rng.below(2) == 1,
            },
            9 => Body::Probe { view: v, root: 9 },
            10 => Body::ViewRequest { view: v },
            _ => Body::Sync { view: v },
        };
        Message {
            sender_incarnation: rng.below(4) as u32,
            body,
        }
    }

    #[test]
    fn roundtrip() {
        let mut rng = Rng::from_state(1);
        for _ in 0..5000 {
            let m = sample(&mut rng);
            let bytes = m.encode();
            assert_eq!(Message::decode(&bytes), Ok(m));
        }
    }

    #[test]
    fn dead_list_is_compact() {
        let m = Message {
            sender_incarnation: 0,
            body: Body::NodeFailure {
                view: ViewId::INITIAL,
                dead: vec![Member::new(4, 0), Member::new(5, 0)],
            },
        };
        // version, tag, inc, 3 view varints, count, 2 × (gap, inc)
        assert_eq!(m.encode().len(), 11);
    }

    #[test]
    fn failed_node_is_compact() {
        let v = |e| ViewId {
            epoch: e,
            coordinator: 0,
            coordinator_incarnation: 0,
        };
        let m = Message {
            sender_incarnation: 0,
            body: Body::ViewChange(Change {
                kind: ChangeKind::FailedNode,
                view: v(8),
                base: v(7),
                len: 1023,
                digest: u64::MAX,
                removed: vec![Member::new(4, 0)],
                added: vec![],
                members: None,
            }),
        };
        // One failed node in a view of 1024: 25 bytes, whatever the group size.
        assert_eq!(m.encode().len(), 25);
    }

    /// Garbage and mutated messages: the decoder returns an error or a message that
    /// re-encodes to the same bytes; it never panics or over-allocates.
    #[test]
    fn decoder_survives_garbage() {
        let mut rng = Rng::from_state(0xdead_beef);
        for round in 0..20_000 {
            let bytes: Vec<u8> = if round % 2 == 0 {
                let n = rng.below(64) as usize;
                let mut b: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
                if n >= 2 && rng.below(2) == 0 {
                    b[0] = WIRE_VERSION;
                    b[1] = rng.below(13) as u8;
                }
                b
            } else {
                let mut b = sample(&mut rng).encode();
                for _ in 0..=rng.below(3) {
                    match rng.below(3) {
                        0 if !b.is_empty() => {
                            let i = rng.below(b.len() as u64) as usize;
                            b[i] ^= 1 << rng.below(8);
                        }
                        1 if !b.is_empty() => {
                            let keep = rng.below(b.len() as u64) as usize;
                            b.truncate(keep);
                        }
                        _ => b.push(rng.next_u64() as u8),
                    }
                }
                b
            };
            if let Ok(m) = Message::decode(&bytes) {
                assert_eq!(m.encode(), bytes, "accepted bytes must be canonical");
            }
        }
    }

    #[test]
    fn rejects_specific_bad_inputs() {
        assert_eq!(Message::decode(&[]), Err(DecodeError::Truncated));
        assert_eq!(Message::decode(&[9, 1, 0]), Err(DecodeError::Version(9)));
        assert_eq!(Message::decode(&[1, 99, 0]), Err(DecodeError::Tag(99)));
        // A list claiming 2^40 entries must not allocate.
        let mut b = vec![WIRE_VERSION, T_NODE_FAILURE, 0, 0, 0, 0];
        b.extend_from_slice(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x20]);
        assert!(matches!(Message::decode(&b), Err(DecodeError::Length(_))));
        // Overlong varint.
        let b = [
            WIRE_VERSION,
            T_FAILURE_ACK,
            0xff,
            0xff,
            0xff,
            0xff,
            0xff,
            0xff,
            0xff,
            0xff,
            0xff,
            0x7f,
        ];
        assert_eq!(Message::decode(&b), Err(DecodeError::Varint));
        // Trailing byte.
        let mut ok = Message {
            sender_incarnation: 0,
            body: Body::FailureAck {
                view: ViewId::INITIAL,
            },
        }
        .encode();
        ok.push(0);
        assert_eq!(Message::decode(&ok), Err(DecodeError::Trailing(1)));
    }

    /// A member gap so large that adding it to the previous id overflows: rejected, never a
    /// panic (debug builds) nor a wrapped, repeated id (release builds).
    #[test]
    fn member_gap_overflow_is_rejected() {
        let mut b = vec![WIRE_VERSION, T_NODE_FAILURE, 0, 0, 0, 0, 2, 5, 0];
        b.extend_from_slice(&[
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0,
        ]);
        assert_eq!(Message::decode(&b), Err(DecodeError::Range("node id")));
    }
}
