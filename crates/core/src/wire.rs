//! The message layer's packet header: what travels in front of every payload on every path.
//!
//! ```text
//! 0  kind u8 | 1 flags u8 | 2..4 sender incarnation u16 | 4..8 context id u32
//! 8..12 source rank i32 | 12..16 tag i32 | 16..24 length or offset u64 | 24..32 a u64
//! 32..40 b u64
//! ```
//! Messages (`Eager`, `Rts`) carry the sender's per-destination sequence number in `a`
//! (their identity, see `door.rs`). Rendezvous ids (`a` of `Cts`/`Data`, `b`) are request
//! handles of the side that will receive them back. Headers are built by the door only.

use steadfast_paths::{RawHeader, HDR_LEN};

/// Packet kinds of the point-to-point protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// Whole message inline. `len` = message length, `a` = sequence number.
    Eager = 1,
    /// Request to send. `len` = message length, `a` = sequence number, `b` = send request;
    /// payload: the sender's buffer address (u64, for a single-copy read).
    Rts = 2,
    /// Clear to send (no single-copy): `a` = receive request, `b` = send request.
    Cts = 3,
    /// Rendezvous data chunk: `a` = receive request, `len` = offset in the message.
    Data = 4,
    /// Receiver finished a single-copy read: `b` = send request.
    Fin = 5,
    /// Run-through fault-tolerance protocol message (revoke / agree / shrink) for the
    /// communicator with point-to-point context `ctx`; payload = encoded message.
    Ulfm = 6,
    /// A member gave up on the collective with tag `tag` on collective context `ctx`
    /// (run-through mode): the others stop waiting for it.
    CollAbort = 7,
    /// MPI_Cancel of a send: withdraw the unmatched message from `src` (comm rank) on `ctx`
    /// whose sequence number is `b`; `len` = the sender's request.
    CancelReq = 8,
    /// Answer to `CancelReq`: `a` = 1 if the message was withdrawn; `b` = the sender's request.
    CancelAck = 9,
    /// Coordinated-checkpoint protocol message between ranks (a Chandy-Lamport marker);
    /// payload = `steadfast-rollback` wire bytes. Travels in line with the messages it
    /// flushes.
    Recovery = 10,
    /// `--ft channel-memory`: the receiver matched the synchronous message `a` (its
    /// sequence number) of this rank to it, which completes the send.
    SyncAck = 11,
}

impl Kind {
    fn from_u8(v: u8) -> Option<Kind> {
        Some(match v {
            1 => Kind::Eager,
            2 => Kind::Rts,
            3 => Kind::Cts,
            4 => Kind::Data,
            5 => Kind::Fin,
            6 => Kind::Ulfm,
            7 => Kind::CollAbort,
            8 => Kind::CancelReq,
            9 => Kind::CancelAck,
            10 => Kind::Recovery,
            11 => Kind::SyncAck,
            _ => return None,
        })
    }
}

/// Decoded packet header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub kind: Kind,
    pub flags: u8,
    /// The sender's incarnation.
    pub incarnation: u16,
    pub ctx: u32,
    pub src: i32,
    pub tag: i32,
    pub len: u64,
    pub a: u64,
    pub b: u64,
}

/// Flag on Rts: the sender may be read with single copy (same host, contiguous buffer).
pub const FLAG_CMA: u8 = 1;
/// Flag on Eager (`--ft channel-memory`, where every message travels whole): a synchronous
/// send; the receiver answers `SyncAck` when it matches it.
pub const FLAG_SYNC: u8 = 2;
/// Flag on Rts: its payload also carries the CRC32C of the message's data, which a
/// single-copy read checks (the ring's records carry their own).
pub const FLAG_CRC: u8 = 4;

/// The payload of an Rts: the address of the sender's data, then (with [`FLAG_CRC`]) the
/// CRC32C of that data.
pub fn encode_rts(addr: u64, crc: Option<u32>) -> ([u8; 12], usize) {
    let mut p = [0u8; 12];
    p[..8].copy_from_slice(&addr.to_le_bytes());
    match crc {
        Some(c) => {
            p[8..].copy_from_slice(&c.to_le_bytes());
            (p, 12)
        }
        None => (p, 8),
    }
}

/// Parse an Rts payload (see [`encode_rts`]); None if its length does not match its flags.
pub fn decode_rts(flags: u8, payload: &[u8]) -> Option<(u64, Option<u32>)> {
    let addr = u64::from_le_bytes(payload.get(..8)?.try_into().ok()?);
    match (flags & FLAG_CRC != 0, payload.len()) {
        (false, 8) => Some((addr, None)),
        (true, 12) => Some((addr, Some(u32::from_le_bytes(payload[8..12].try_into().ok()?)))),
        _ => None,
    }
}

impl Header {
    /// Encode into raw bytes.
    ///
    /// Written as five 8-byte words: the paths copy a header with 8-byte loads right after
    /// this, and a load that needs bytes of several narrower stores cannot take them from
    /// the store buffer, so it waited for every earlier store to reach the cache, the
    /// previous message's ring writes included.
    pub fn encode(&self) -> RawHeader {
        let mut h = [0u8; HDR_LEN];
        let w0 = u64::from(self.kind as u8) | u64::from(self.flags) << 8 | u64::from(self.incarnation) << 16 | u64::from(self.ctx) << 32;
        let w1 = u64::from(self.src as u32) | u64::from(self.tag as u32) << 32;
        h[0..8].copy_from_slice(&w0.to_le_bytes());
        h[8..16].copy_from_slice(&w1.to_le_bytes());
        h[16..24].copy_from_slice(&self.len.to_le_bytes());
        h[24..32].copy_from_slice(&self.a.to_le_bytes());
        h[32..40].copy_from_slice(&self.b.to_le_bytes());
        h
    }
    /// Decode raw bytes; `None` for an unknown kind.
    pub fn decode(h: &RawHeader) -> Option<Header> {
        let u32at = |o: usize| u32::from_le_bytes([h[o], h[o + 1], h[o + 2], h[o + 3]]);
        let u64at = |o: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&h[o..o + 8]);
            u64::from_le_bytes(b)
        };
        Some(Header {
            kind: Kind::from_u8(h[0])?,
            flags: h[1],
            incarnation: u16::from_le_bytes([h[2], h[3]]),
            ctx: u32at(4),
            src: u32at(8) as i32,
            tag: u32at(12) as i32,
            len: u64at(16),
            a: u64at(24),
            b: u64at(32),
        })
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn rts_payload_round_trips_and_rejects_a_wrong_length() {
        let (p, n) = encode_rts(0x1234_5678_9abc, None);
        assert_eq!(decode_rts(0, &p[..n]), Some((0x1234_5678_9abc, None)));
        let (p, n) = encode_rts(42, Some(0xdead_beef));
        assert_eq!(decode_rts(FLAG_CMA | FLAG_CRC, &p[..n]), Some((42, Some(0xdead_beef))));
        // A length that does not match the flags is refused, never half read.
        assert_eq!(decode_rts(FLAG_CMA, &p[..n]), None);
        assert_eq!(decode_rts(FLAG_CRC, &p[..8]), None);
        assert_eq!(decode_rts(0, &p[..5]), None);
        assert_eq!(decode_rts(0, &[]), None);
    }
    use super::*;
    #[test]
    fn roundtrip() {
        let h = Header { kind: Kind::Rts, flags: 1, incarnation: 3, ctx: 7, src: -3, tag: 99, len: 1 << 40, a: 5, b: u64::MAX };
        assert_eq!(Header::decode(&h.encode()), Some(h));
        // The layout: kind, flags, incarnation, then each field little-endian in turn.
        let mut want = vec![Kind::Rts as u8, 1, 3, 0, 7, 0, 0, 0];
        want.extend_from_slice(&(-3i32).to_le_bytes());
        want.extend_from_slice(&99i32.to_le_bytes());
        want.extend_from_slice(&(1u64 << 40).to_le_bytes());
        want.extend_from_slice(&5u64.to_le_bytes());
        want.extend_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(h.encode().to_vec(), want);
        let mut bad = h.encode();
        bad[0] = 77;
        assert_eq!(Header::decode(&bad), None);
    }
}
