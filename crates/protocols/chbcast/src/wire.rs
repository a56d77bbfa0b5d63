//! The point-to-point messages of the protocol and their encoding. They travel on the
//! engine's reliable, ordered point-to-point path (not on the broadcast primitive): the
//! synchronization's two phases, repair requests, and frames sent over the point-to-point
//! tree once the primitive is abandoned.
//!
//! Encoding: a kind byte, then varint fields ([`steadfast_proto::varint`]); `Data` ends with
//! the frame's bytes. [`Message::decode`] never panics and accepts only what
//! [`Message::encode`] writes.

use steadfast_proto::varint::{Reader, Writer};

use crate::Seq;

const UP: u8 = 1;
const DOWN: u8 = 2;
const REPAIR: u8 = 3;
const DATA: u8 = 4;

/// A protocol message between two ranks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// Synchronization, up phase: the sender's subtree's combined status for attempt
    /// `attempt` of synchronization `sync` (which releases the channels of window
    /// `sync - 1`). `ok`: ACK (every broadcast of the window arrived intact everywhere in
    /// the subtree), else NACK. `failed`: someone in the subtree abandoned the primitive.
    Up {
        sync: u64,
        attempt: u32,
        ok: bool,
        failed: bool,
    },
    /// Synchronization, down phase: the manager's result for that attempt, passed down the
    /// same tree. `ok` releases the window's channels; otherwise every root retransmits.
    Down {
        sync: u64,
        attempt: u32,
        ok: bool,
        failed: bool,
    },
    /// Receiver → root: broadcast `seq` has not arrived (intact) in time. `failed`: the
    /// receiver gave up on the primitive; the root rebinds its broadcasts to the tree.
    Repair { seq: Seq, failed: bool },
    /// A frame sent point-to-point: over the broadcast's point-to-point tree when `forward`
    /// (the receiver passes it on to its children in the root's tree), else a direct repair.
    Data { forward: bool, frame: Vec<u8> },
}

/// A message that could not be decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// Empty, truncated or a malformed field.
    Malformed,
    /// Unknown kind byte.
    Kind(u8),
    /// Bytes after the last field.
    Trailing,
}

impl From<steadfast_proto::varint::Error> for DecodeError {
    fn from(_: steadfast_proto::varint::Error) -> Self {
        DecodeError::Malformed
    }
}

fn flags(a: bool, b: bool) -> u8 {
    u8::from(a) | (u8::from(b) << 1)
}

impl Message {
    /// The message's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        match self {
            Message::Up {
                sync,
                attempt,
                ok,
                failed,
            }
            | Message::Down {
                sync,
                attempt,
                ok,
                failed,
            } => {
                w.u8(if matches!(self, Message::Up { .. }) {
                    UP
                } else {
                    DOWN
                });
                w.u8(flags(*ok, *failed));
                w.var(*sync);
                w.var(u64::from(*attempt));
            }
            Message::Repair { seq, failed } => {
                w.u8(REPAIR);
                w.u8(flags(false, *failed));
                w.var(*seq);
            }
            Message::Data { forward, frame } => {
                w.u8(DATA);
                w.u8(flags(*forward, false));
                w.bytes(frame);
            }
        }
        w.into_inner()
    }

    /// Decodes `bytes`; never panics.
    pub fn decode(bytes: &[u8]) -> Result<Message, DecodeError> {
        let mut r = Reader::new(bytes);
        let kind = r.u8()?;
        let f = r.u8()?;
        let (a, b) = (f & 1 != 0, f & 2 != 0);
        let m = match kind {
            UP | DOWN => {
                if f > 3 {
                    return Err(DecodeError::Malformed);
                }
                let sync = r.var()?;
                let attempt = u32::try_from(r.var()?).map_err(|_| DecodeError::Malformed)?;
                if kind == UP {
                    Message::Up {
                        sync,
                        attempt,
                        ok: a,
                        failed: b,
                    }
                } else {
                    Message::Down {
                        sync,
                        attempt,
                        ok: a,
                        failed: b,
                    }
                }
            }
            REPAIR => {
                if f & !2 != 0 {
                    return Err(DecodeError::Malformed);
                }
                Message::Repair {
                    seq: r.var()?,
                    failed: b,
                }
            }
            DATA => {
                if f > 1 {
                    return Err(DecodeError::Malformed);
                }
                let frame = bytes[bytes.len() - r.left()..].to_vec();
                return Ok(Message::Data { forward: a, frame });
            }
            k => return Err(DecodeError::Kind(k)),
        };
        if r.left() != 0 {
            return Err(DecodeError::Trailing);
        }
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all() -> Vec<Message> {
        let mut v = Vec::new();
        for (ok, failed) in [(false, false), (true, false), (false, true), (true, true)] {
            v.push(Message::Up {
                sync: 3,
                attempt: 2,
                ok,
                failed,
            });
            v.push(Message::Down {
                sync: u64::MAX,
                attempt: u32::MAX,
                ok,
                failed,
            });
        }
        v.push(Message::Repair {
            seq: 0,
            failed: false,
        });
        v.push(Message::Repair {
            seq: 1 << 50,
            failed: true,
        });
        v.push(Message::Data {
            forward: true,
            frame: crate::frame::encode(9, 1, b"xyz", true),
        });
        v.push(Message::Data {
            forward: false,
            frame: Vec::new(),
        });
        v
    }

    #[test]
    fn round_trip() {
        for m in all() {
            assert_eq!(Message::decode(&m.encode()), Ok(m.clone()), "{m:?}");
        }
    }

    #[test]
    fn truncations_and_garbage_never_panic_and_rarely_decode() {
        for m in all() {
            let b = m.encode();
            for cut in 0..b.len() {
                if !matches!(m, Message::Data { .. }) {
                    assert!(Message::decode(&b[..cut]).is_err(), "{m:?} cut {cut}");
                }
            }
            let mut t = b.clone();
            t.push(0);
            if !matches!(m, Message::Data { .. }) {
                assert_eq!(Message::decode(&t), Err(DecodeError::Trailing));
            }
        }
        assert_eq!(Message::decode(&[9, 0]), Err(DecodeError::Kind(9)));
        assert_eq!(Message::decode(&[UP, 4, 0, 0]), Err(DecodeError::Malformed));
        assert_eq!(
            Message::decode(&[REPAIR, 1, 0]),
            Err(DecodeError::Malformed)
        );
        let mut rng = steadfast_proto::Rng::new(4);
        for _ in 0..20_000 {
            let n = rng.below(12) as usize;
            let b: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
            if let Ok(m) = Message::decode(&b) {
                assert_eq!(m.encode(), b, "decodes only the canonical form");
            }
        }
    }
}
