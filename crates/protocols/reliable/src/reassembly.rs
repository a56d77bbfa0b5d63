//! Joins in-order fragments ([`Delivery`]) into whole messages.

use thiserror::Error;

use crate::channel::{Delivery, MsgId};

/// A fragment that does not continue the message being assembled.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AssembleError {
    /// A first fragment arrived while another message was incomplete, or a middle
    /// fragment arrived with the wrong message id or offset.
    #[error("fragment of message {msg} at offset {offset} does not continue the current message")]
    OutOfOrder {
        /// Message id of the fragment.
        msg: u64,
        /// Offset of the fragment.
        offset: u64,
    },
    /// The message is larger than the assembler accepts.
    #[error("message of {len} bytes exceeds the limit of {limit}")]
    TooLarge {
        /// Announced length.
        len: u64,
        /// The limit.
        limit: u64,
    },
}

/// Collects the fragments of one message at a time (they arrive in order).
#[derive(Debug)]
pub struct Assembler {
    current: Option<(MsgId, u64, Vec<u8>)>,
    max_len: u64,
}

impl Assembler {
    /// An assembler refusing messages longer than `max_len` bytes.
    pub fn new(max_len: u64) -> Assembler {
        Assembler {
            current: None,
            max_len,
        }
    }

    /// Adds a fragment; returns the message when it is complete.
    pub fn push(&mut self, d: Delivery) -> Result<Option<(MsgId, Vec<u8>)>, AssembleError> {
        let bad = AssembleError::OutOfOrder {
            msg: d.msg.0,
            offset: d.offset,
        };
        if d.msg_len > self.max_len {
            return Err(AssembleError::TooLarge {
                len: d.msg_len,
                limit: self.max_len,
            });
        }
        let last = d.is_last();
        match self.current.as_mut() {
            None if d.is_first() => {
                if last {
                    return Ok(Some((d.msg, d.data)));
                }
                // Grows with the fragments rather than trusting msg_len up front.
                self.current = Some((d.msg, d.msg_len, d.data));
            }
            Some((id, len, buf))
                if *id == d.msg && *len == d.msg_len && buf.len() as u64 == d.offset =>
            {
                buf.extend_from_slice(&d.data);
            }
            _ => return Err(bad),
        }
        if last {
            Ok(self.current.take().map(|(id, _, buf)| (id, buf)))
        } else {
            Ok(None)
        }
    }
}
