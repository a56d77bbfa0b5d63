//! Broadcast protocol messages and their wire form.
//!
//! The wire form is two bytes: a magic byte and a kind byte. The payload being broadcast and
//! the identity of the collective travel in the runtime's own framing; this is only the
//! protocol header, decoded through a checked decoder that rejects anything else. Every
//! message except [`Msg::Ack`] must carry the payload: whichever arrives first colors the
//! receiver.

/// Direction a correction message travels on the ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dir {
    /// Towards lower ranks (`r - 1, r - 2, …` modulo P).
    Left,
    /// Towards higher ranks (`r + 1, r + 2, …` modulo P).
    Right,
}

/// A broadcast protocol message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Msg {
    /// Dissemination along a tree edge.
    Tree,
    /// Dissemination by gossip to a random process.
    Gossip,
    /// Correction message sent on the ring in the given direction.
    Correction(Dir),
    /// Acknowledgment of a whole subtree (acknowledged trees only).
    Ack,
}

/// Why bytes were not a valid [`Msg`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The frame does not have exactly [`Msg::WIRE_LEN`] bytes.
    #[error("broadcast header must be {expected} bytes, got {got}", expected = Msg::WIRE_LEN)]
    Length {
        /// Received length.
        got: usize,
    },
    /// The first byte is not the broadcast magic.
    #[error("bad broadcast header magic {0:#04x}")]
    Magic(u8),
    /// Unknown message kind.
    #[error("unknown broadcast message kind {0}")]
    Kind(u8),
}

const MAGIC: u8 = 0xC7;

impl Msg {
    /// Length of the wire form in bytes.
    pub const WIRE_LEN: usize = 2;

    /// Encodes the message.
    pub fn to_bytes(self) -> [u8; Self::WIRE_LEN] {
        let kind = match self {
            Msg::Tree => 1,
            Msg::Gossip => 2,
            Msg::Correction(Dir::Left) => 3,
            Msg::Correction(Dir::Right) => 4,
            Msg::Ack => 5,
        };
        [MAGIC, kind]
    }

    /// Decodes a message, rejecting short, long or foreign input.
    pub fn from_bytes(bytes: &[u8]) -> Result<Msg, DecodeError> {
        let &[magic, kind] = bytes else {
            return Err(DecodeError::Length { got: bytes.len() });
        };
        if magic != MAGIC {
            return Err(DecodeError::Magic(magic));
        }
        Ok(match kind {
            1 => Msg::Tree,
            2 => Msg::Gossip,
            3 => Msg::Correction(Dir::Left),
            4 => Msg::Correction(Dir::Right),
            5 => Msg::Ack,
            other => return Err(DecodeError::Kind(other)),
        })
    }

    /// Whether this message belongs to the correction phase.
    pub fn is_correction(self) -> bool {
        matches!(self, Msg::Correction(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_rejects() {
        for m in [
            Msg::Tree,
            Msg::Gossip,
            Msg::Correction(Dir::Left),
            Msg::Correction(Dir::Right),
            Msg::Ack,
        ] {
            assert_eq!(Msg::from_bytes(&m.to_bytes()), Ok(m));
        }
        assert_eq!(Msg::from_bytes(&[]), Err(DecodeError::Length { got: 0 }));
        assert_eq!(
            Msg::from_bytes(&[MAGIC, 1, 0]),
            Err(DecodeError::Length { got: 3 })
        );
        assert_eq!(Msg::from_bytes(&[0, 1]), Err(DecodeError::Magic(0)));
        assert_eq!(Msg::from_bytes(&[MAGIC, 0]), Err(DecodeError::Kind(0)));
        assert_eq!(Msg::from_bytes(&[MAGIC, 6]), Err(DecodeError::Kind(6)));
    }
}
