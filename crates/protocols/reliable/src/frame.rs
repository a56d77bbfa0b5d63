//! Wire format of the reliable channel: one fixed 104-byte header, then the payload.
//!
//! All integers are little-endian. Every frame kind uses the same header; fields a kind
//! does not use must be zero, so a decoder can reject inconsistent frames outright.
//!
//! | off | size | field           | DATA                         | ACK                         | NACK                   |
//! |----:|-----:|-----------------|------------------------------|-----------------------------|------------------------|
//! |   0 |    4 | magic           | `"SFRL"`                     | same                        | same                   |
//! |   4 |    1 | version         | 1                            | same                        | same                   |
//! |   5 |    1 | kind            | 1                            | 2                           | 3                      |
//! |   6 |    1 | route           | route the sender used        | route the data came on      | same as ACK            |
//! |   7 |    1 | flags           | bit 0: no payload CRC²       | 0                           | 0                      |
//! |   8 |    8 | tag             | keyed MAC of the header³     | same                        | same                   |
//! |  16 |    4 | src             | sender id                    | same                        | same                   |
//! |  20 |    4 | dst             | receiver id                  | same                        | same                   |
//! |  24 |    8 | seq             | fragment sequence number ≥1  | fragment acked (0: none)¹   | fragment that failed   |
//! |  32 |    8 | timestamp       | sender clock at this send    | echo of the data timestamp  | echo                   |
//! |  40 |    4 | send_count      | 1 on first send, +1 per resend | echo                      | echo                   |
//! |  44 |    4 | payload_len     | bytes after the header       | 0                           | 0                      |
//! |  48 |    8 | msg_id          | message number ≥1            | 0                           | 0                      |
//! |  56 |    8 | msg_len         | total message length         | 0                           | 0                      |
//! |  64 |    8 | frag_offset     | offset of payload in message | 0                           | 0                      |
//! |  72 |    8 | cum_received    | piggybacked: largest in-order seq received from the peer | same | same         |
//! |  80 |    8 | cum_delivered   | piggybacked: largest in-order seq delivered to the application | same | same   |
//! |  88 |    8 | max_received    | piggybacked: largest seq received at all (gap hint) | same | same               |
//! |  96 |    4 | payload_crc     | CRC32C of the payload        | 0                           | 0                      |
//! | 100 |    4 | header_crc      | CRC32C of bytes 0..100       | same                        | same                   |
//!
//! ¹ An ACK's `seq` at or below its `cum_delivered` says "delivered to the application";
//! above it, "received intact and held" (a receipt for a fragment that arrived past a
//! gap, so the sender neither resends it nor blames its route).
//!
//! ² Only for channels configured without payload checksums (benchmarks of the checksum's
//! cost); `payload_crc` is then 0. The header checksum is always present, so a flipped
//! flag bit is caught like any other header damage.
//!
//! ³ SipHash-2-4 ([`FrameKey`], keyed from the job key) over the
//! header without the `tag` and `header_crc` fields. The job key itself never crosses the
//! wire; a frame whose tag does not match is counted as foreign and dropped. The tag
//! covers `payload_crc` and `payload_len`, so the payload is bound to the header through
//! its CRC32C: that stops strangers and accidents, but CRC32C is not a cryptographic hash,
//! so an attacker who can read a datagram *and* deliver a replacement before the original
//! arrives could substitute a payload with the same CRC. Tagging 104 header bytes per
//! transmission instead of every payload byte is what keeps the cost within the 2 %
//! goodput budget (see docs/security.md).
//!
//! Two CRCs rather than one: a receiver that finds the header intact but the payload
//! corrupt can trust `seq` and answer with a NACK; a corrupt header is dropped silently
//! and left to the sender's retransmission timer. The payload CRC is computed once while
//! the message is copied into the channel; each (re)transmission only checksums 100
//! header bytes.

use crate::crc;
use thiserror::Error;

/// Length of the fixed header.
pub const HEADER_LEN: usize = 104;
/// Largest payload a frame may carry.
pub const MAX_PAYLOAD: usize = 1 << 20;
/// Largest frame (header plus payload).
pub const MAX_FRAME: usize = HEADER_LEN + MAX_PAYLOAD;
/// Magic number, the ASCII bytes `SFRL` read as a little-endian u32.
pub const MAGIC: u32 = u32::from_le_bytes(*b"SFRL");
/// Wire format version.
pub const VERSION: u8 = 1;
/// Flag: the payload carries no checksum (`payload_crc` is 0).
pub const FLAG_NO_PAYLOAD_CRC: u8 = 0x01;
const KNOWN_FLAGS: u8 = FLAG_NO_PAYLOAD_CRC;

mod field {
    use std::ops::Range;
    pub const MAGIC: Range<usize> = 0..4;
    pub const VERSION: usize = 4;
    pub const KIND: usize = 5;
    pub const ROUTE: usize = 6;
    pub const FLAGS: usize = 7;
    pub const TAG: Range<usize> = 8..16;
    pub const SRC: Range<usize> = 16..20;
    pub const DST: Range<usize> = 20..24;
    pub const SEQ: Range<usize> = 24..32;
    pub const TIMESTAMP: Range<usize> = 32..40;
    pub const SEND_COUNT: Range<usize> = 40..44;
    pub const PAYLOAD_LEN: Range<usize> = 44..48;
    pub const MSG_ID: Range<usize> = 48..56;
    pub const MSG_LEN: Range<usize> = 56..64;
    pub const FRAG_OFFSET: Range<usize> = 64..72;
    pub const CUM_RECEIVED: Range<usize> = 72..80;
    pub const CUM_DELIVERED: Range<usize> = 80..88;
    pub const MAX_RECEIVED: Range<usize> = 88..96;
    pub const PAYLOAD_CRC: Range<usize> = 96..100;
    pub const HEADER_CRC: Range<usize> = 100..104;
}

/// Kind of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A fragment of a message.
    Data,
    /// Positive acknowledgment (specific when `seq != 0`, always carrying the cumulative fields).
    Ack,
    /// Negative acknowledgment: the payload of `seq` failed its checksum.
    Nack,
}

impl Kind {
    /// Wire code of the kind.
    pub fn code(self) -> u8 {
        match self {
            Kind::Data => 1,
            Kind::Ack => 2,
            Kind::Nack => 3,
        }
    }

    /// Kind for a wire code.
    pub fn from_code(code: u8) -> Option<Kind> {
        match code {
            1 => Some(Kind::Data),
            2 => Some(Kind::Ack),
            3 => Some(Kind::Nack),
            _ => None,
        }
    }
}

/// Why a buffer is not a valid frame.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FrameError {
    /// Shorter than the fixed header.
    #[error("frame truncated: {len} bytes, header needs {HEADER_LEN}")]
    Truncated {
        /// Length of the buffer.
        len: usize,
    },
    /// Longer than the largest frame.
    #[error("frame oversized: {len} bytes, at most {MAX_FRAME}")]
    Oversized {
        /// Length of the buffer.
        len: usize,
    },
    /// The header checksum does not match: the header was corrupted.
    #[error("header checksum mismatch: frame says {stored:#010x}, computed {computed:#010x}")]
    HeaderCrc {
        /// Checksum carried in the frame.
        stored: u32,
        /// Checksum of the bytes received.
        computed: u32,
    },
    /// Not our magic number.
    #[error("bad magic {0:#010x}")]
    BadMagic(u32),
    /// A wire format version this build does not speak.
    #[error("unsupported version {0}")]
    Version(u8),
    /// Unknown frame kind.
    #[error("unknown frame kind {0}")]
    UnknownKind(u8),
    /// Reserved flag bits set.
    #[error("reserved flags set: {0:#04x}")]
    Flags(u8),
    /// The buffer length disagrees with the payload length field.
    #[error("length mismatch: header says {payload_len} payload bytes, buffer has {actual}")]
    LengthMismatch {
        /// Payload length field.
        payload_len: u32,
        /// Bytes after the header.
        actual: usize,
    },
    /// Header fields contradict each other.
    #[error("inconsistent header: {0}")]
    Inconsistent(&'static str),
    /// The payload checksum does not match: the payload was corrupted.
    #[error("payload checksum mismatch: frame says {stored:#010x}, computed {computed:#010x}")]
    PayloadCrc {
        /// Checksum carried in the frame.
        stored: u32,
        /// Checksum of the bytes received.
        computed: u32,
    },
}

/// A checked, zero-copy view of a frame. Only [`Frame::new_checked`] builds one, so every
/// accessor can rely on the header being present, intact and consistent.
#[derive(Debug, Clone, Copy)]
pub struct Frame<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Frame<T> {
    /// Checks length, header checksum, magic, version, kind and field consistency.
    /// The payload checksum is verified separately, fused with the copy out of the
    /// frame ([`Frame::copy_payload_checked`] / [`Frame::verify_payload`]).
    pub fn new_checked(buf: T) -> Result<Frame<T>, FrameError> {
        let b = buf.as_ref();
        if b.len() < HEADER_LEN {
            return Err(FrameError::Truncated { len: b.len() });
        }
        if b.len() > MAX_FRAME {
            return Err(FrameError::Oversized { len: b.len() });
        }
        let stored = read_u32(b, field::HEADER_CRC);
        let computed = crc::crc32c(&b[..field::HEADER_CRC.start]);
        if stored != computed {
            return Err(FrameError::HeaderCrc { stored, computed });
        }
        let repr = FrameRepr::read(b)?;
        let actual = b.len() - HEADER_LEN;
        if repr.payload_len as usize != actual {
            return Err(FrameError::LengthMismatch {
                payload_len: repr.payload_len,
                actual,
            });
        }
        repr.check()?;
        Ok(Frame { buf })
    }

    /// The whole frame.
    pub fn as_bytes(&self) -> &[u8] {
        self.buf.as_ref()
    }

    /// Parsed header fields.
    pub fn repr(&self) -> FrameRepr {
        // Cannot fail: new_checked already parsed the same bytes.
        match FrameRepr::read(self.buf.as_ref()) {
            Ok(r) => r,
            Err(_) => unreachable!("frame was checked at construction"),
        }
    }

    /// Frame kind.
    pub fn kind(&self) -> Kind {
        Kind::from_code(self.buf.as_ref()[field::KIND]).unwrap_or(Kind::Data)
    }
    /// The header's authentication tag (see [`FrameKey`]).
    pub fn tag(&self) -> u64 {
        read_u64(self.buf.as_ref(), field::TAG)
    }

    /// True when the header's tag was made with `key`, i.e. the frame comes from a
    /// member of the job and its header (payload checksum included) is as sent.
    pub fn verify_tag(&self, key: &FrameKey) -> bool {
        let b = self.buf.as_ref();
        key.header_tag(b) == self.tag()
    }
    /// Sender id.
    pub fn src(&self) -> u32 {
        read_u32(self.buf.as_ref(), field::SRC)
    }
    /// Receiver id.
    pub fn dst(&self) -> u32 {
        read_u32(self.buf.as_ref(), field::DST)
    }
    /// Sequence number.
    pub fn seq(&self) -> u64 {
        read_u64(self.buf.as_ref(), field::SEQ)
    }

    /// The payload bytes (not yet checksum-verified).
    pub fn payload(&self) -> &[u8] {
        &self.buf.as_ref()[HEADER_LEN..]
    }

    /// False when the sender marked the payload as carrying no checksum.
    pub fn has_payload_crc(&self) -> bool {
        self.buf.as_ref()[field::FLAGS] & FLAG_NO_PAYLOAD_CRC == 0
    }

    /// Verifies the payload checksum without copying (`Ok` for a frame without one:
    /// whether to accept those is the caller's policy, see [`Frame::has_payload_crc`]).
    pub fn verify_payload(&self) -> Result<(), FrameError> {
        if !self.has_payload_crc() {
            return Ok(());
        }
        let stored = read_u32(self.buf.as_ref(), field::PAYLOAD_CRC);
        let computed = crc::crc32c(self.payload());
        if stored == computed {
            Ok(())
        } else {
            Err(FrameError::PayloadCrc { stored, computed })
        }
    }

    /// Appends the payload to `out` while verifying its checksum in the same pass (a
    /// plain copy for a frame without one, see [`Frame::has_payload_crc`]). On a
    /// mismatch `out` is restored to its previous length.
    pub fn copy_payload_checked(&self, out: &mut Vec<u8>) -> Result<(), FrameError> {
        if !self.has_payload_crc() {
            out.extend_from_slice(self.payload());
            return Ok(());
        }
        let old = out.len();
        let stored = read_u32(self.buf.as_ref(), field::PAYLOAD_CRC);
        let computed = crc::extend_with_crc32c(0, out, self.payload());
        if stored == computed {
            Ok(())
        } else {
            out.truncate(old);
            Err(FrameError::PayloadCrc { stored, computed })
        }
    }
}

/// Header fields of a frame, for parsing and emitting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FrameRepr {
    /// Frame kind (as a wire code, so a default value exists; see [`FrameRepr::kind`]).
    pub kind_code: u8,
    /// Flag bits ([`FLAG_NO_PAYLOAD_CRC`]).
    pub flags: u8,
    /// Route index.
    pub route: u8,
    /// Authentication tag. [`FrameRepr::write_sealed`] and [`FrameRepr::to_sealed_frame`]
    /// compute it; [`FrameRepr::emit`] and [`FrameRepr::to_frame`] write it as given.
    pub tag: u64,
    /// Sender id.
    pub src: u32,
    /// Receiver id.
    pub dst: u32,
    /// Sequence number (DATA), acked seq (ACK, 0 = non-specific), failed seq (NACK).
    pub seq: u64,
    /// Sender clock at transmission (DATA) or its echo (ACK/NACK), nanoseconds.
    pub timestamp: u64,
    /// Transmission count (DATA) or its echo.
    pub send_count: u32,
    /// Payload length.
    pub payload_len: u32,
    /// Message number (DATA).
    pub msg_id: u64,
    /// Total message length (DATA).
    pub msg_len: u64,
    /// Offset of this payload in the message (DATA).
    pub frag_offset: u64,
    /// Largest in-order seq received from the peer.
    pub cum_received: u64,
    /// Largest in-order seq delivered to the application.
    pub cum_delivered: u64,
    /// Largest seq received at all.
    pub max_received: u64,
    /// CRC32C of the payload (DATA).
    pub payload_crc: u32,
}

impl FrameRepr {
    /// Frame kind, if the code is known.
    pub fn kind(&self) -> Option<Kind> {
        Kind::from_code(self.kind_code)
    }

    /// Reads and checks the fixed identification fields; `b` holds at least a header.
    fn read(b: &[u8]) -> Result<FrameRepr, FrameError> {
        let magic = read_u32(b, field::MAGIC);
        if magic != MAGIC {
            return Err(FrameError::BadMagic(magic));
        }
        if b[field::VERSION] != VERSION {
            return Err(FrameError::Version(b[field::VERSION]));
        }
        let kind_code = b[field::KIND];
        if Kind::from_code(kind_code).is_none() {
            return Err(FrameError::UnknownKind(kind_code));
        }
        if b[field::FLAGS] & !KNOWN_FLAGS != 0 {
            return Err(FrameError::Flags(b[field::FLAGS]));
        }
        Ok(FrameRepr {
            kind_code,
            flags: b[field::FLAGS],
            route: b[field::ROUTE],
            tag: read_u64(b, field::TAG),
            src: read_u32(b, field::SRC),
            dst: read_u32(b, field::DST),
            seq: read_u64(b, field::SEQ),
            timestamp: read_u64(b, field::TIMESTAMP),
            send_count: read_u32(b, field::SEND_COUNT),
            payload_len: read_u32(b, field::PAYLOAD_LEN),
            msg_id: read_u64(b, field::MSG_ID),
            msg_len: read_u64(b, field::MSG_LEN),
            frag_offset: read_u64(b, field::FRAG_OFFSET),
            cum_received: read_u64(b, field::CUM_RECEIVED),
            cum_delivered: read_u64(b, field::CUM_DELIVERED),
            max_received: read_u64(b, field::MAX_RECEIVED),
            payload_crc: read_u32(b, field::PAYLOAD_CRC),
        })
    }

    /// Checks that the fields agree with each other and with the kind.
    pub fn check(&self) -> Result<(), FrameError> {
        use FrameError::Inconsistent as Bad;
        let kind = self.kind().ok_or(FrameError::UnknownKind(self.kind_code))?;
        if self.cum_delivered > self.cum_received {
            return Err(Bad("cum_delivered beyond cum_received"));
        }
        if self.cum_received > self.max_received {
            return Err(Bad("cum_received beyond max_received"));
        }
        if self.payload_len as usize > MAX_PAYLOAD {
            return Err(Bad("payload_len beyond MAX_PAYLOAD"));
        }
        if self.flags & !KNOWN_FLAGS != 0 {
            return Err(FrameError::Flags(self.flags));
        }
        let unchecked = self.flags & FLAG_NO_PAYLOAD_CRC != 0;
        if unchecked && (kind != Kind::Data || self.payload_crc != 0) {
            return Err(Bad(
                "no-checksum flag on a non-data frame or with a checksum",
            ));
        }
        match kind {
            Kind::Data => {
                if self.seq == 0 {
                    return Err(Bad("data frame with seq 0"));
                }
                if self.send_count == 0 {
                    return Err(Bad("data frame with send_count 0"));
                }
                if self.msg_id == 0 {
                    return Err(Bad("data frame with msg_id 0"));
                }
                let end = self.frag_offset.checked_add(u64::from(self.payload_len));
                if !matches!(end, Some(end) if end <= self.msg_len) {
                    return Err(Bad("fragment extends beyond the message"));
                }
                if self.payload_len == 0 && self.msg_len != 0 {
                    return Err(Bad("empty fragment of a non-empty message"));
                }
            }
            Kind::Ack | Kind::Nack => {
                if self.payload_len != 0 || self.payload_crc != 0 {
                    return Err(Bad("acknowledgment with a payload"));
                }
                if self.msg_id != 0 || self.msg_len != 0 || self.frag_offset != 0 {
                    return Err(Bad("acknowledgment with message fields"));
                }
                if kind == Kind::Ack && self.seq > self.max_received {
                    return Err(Bad("specific ack of a fragment not received"));
                }
                if kind == Kind::Nack && (self.seq == 0 || self.seq <= self.cum_received) {
                    return Err(Bad("nack of a fragment already received"));
                }
            }
        }
        Ok(())
    }

    /// Writes the header (with its checksum) into `out`. The payload, if any, follows
    /// separately; `payload_crc` and `payload_len` must already describe it.
    pub fn emit(&self, out: &mut [u8; HEADER_LEN]) -> Result<(), FrameError> {
        self.check()?;
        self.write_header(out);
        Ok(())
    }

    /// Writes the header without the consistency check, for frames the channel builds
    /// itself (its invariants make them consistent; debug builds still check).
    pub(crate) fn write_header(&self, out: &mut [u8; HEADER_LEN]) {
        self.write_fields(out);
        let crc = crc::crc32c(&out[..field::HEADER_CRC.start]);
        out[field::HEADER_CRC].copy_from_slice(&crc.to_le_bytes());
    }

    /// Writes the header with the tag computed under `key` (the `tag` field of `self`
    /// is ignored), then the header checksum over both. What the channel sends.
    pub fn write_sealed(&self, key: &FrameKey, out: &mut [u8; HEADER_LEN]) {
        self.write_fields(out);
        let tag = key.header_tag(out);
        out[field::TAG].copy_from_slice(&tag.to_le_bytes());
        let crc = crc::crc32c(&out[..field::HEADER_CRC.start]);
        out[field::HEADER_CRC].copy_from_slice(&crc.to_le_bytes());
    }

    fn write_fields(&self, out: &mut [u8; HEADER_LEN]) {
        debug_assert_eq!(
            self.check(),
            Ok(()),
            "channel built an inconsistent frame: {self:?}"
        );
        out[field::MAGIC].copy_from_slice(&MAGIC.to_le_bytes());
        out[field::VERSION] = VERSION;
        out[field::KIND] = self.kind_code;
        out[field::ROUTE] = self.route;
        out[field::FLAGS] = self.flags;
        out[field::TAG].copy_from_slice(&self.tag.to_le_bytes());
        out[field::SRC].copy_from_slice(&self.src.to_le_bytes());
        out[field::DST].copy_from_slice(&self.dst.to_le_bytes());
        out[field::SEQ].copy_from_slice(&self.seq.to_le_bytes());
        out[field::TIMESTAMP].copy_from_slice(&self.timestamp.to_le_bytes());
        out[field::SEND_COUNT].copy_from_slice(&self.send_count.to_le_bytes());
        out[field::PAYLOAD_LEN].copy_from_slice(&self.payload_len.to_le_bytes());
        out[field::MSG_ID].copy_from_slice(&self.msg_id.to_le_bytes());
        out[field::MSG_LEN].copy_from_slice(&self.msg_len.to_le_bytes());
        out[field::FRAG_OFFSET].copy_from_slice(&self.frag_offset.to_le_bytes());
        out[field::CUM_RECEIVED].copy_from_slice(&self.cum_received.to_le_bytes());
        out[field::CUM_DELIVERED].copy_from_slice(&self.cum_delivered.to_le_bytes());
        out[field::MAX_RECEIVED].copy_from_slice(&self.max_received.to_le_bytes());
        out[field::PAYLOAD_CRC].copy_from_slice(&self.payload_crc.to_le_bytes());
    }

    /// Emits a complete frame (header, then `payload`) into a new vector. Fills in
    /// `payload_len` and `payload_crc` from `payload`. Meant for tests and tools.
    pub fn to_frame(&self, payload: &[u8]) -> Result<Vec<u8>, FrameError> {
        self.build_frame(None, payload)
    }

    /// Like [`FrameRepr::to_frame`], with the tag computed under `key`: a frame the
    /// channel of a job with that key accepts. Meant for tests and tools.
    pub fn to_sealed_frame(&self, key: &FrameKey, payload: &[u8]) -> Result<Vec<u8>, FrameError> {
        self.build_frame(Some(key), payload)
    }

    fn build_frame(&self, key: Option<&FrameKey>, payload: &[u8]) -> Result<Vec<u8>, FrameError> {
        let mut repr = *self;
        repr.payload_len = u32::try_from(payload.len())
            .map_err(|_| FrameError::Inconsistent("payload longer than u32"))?;
        repr.payload_crc = if payload.is_empty() || repr.flags & FLAG_NO_PAYLOAD_CRC != 0 {
            0
        } else {
            crc::crc32c(payload)
        };
        let mut header = [0u8; HEADER_LEN];
        match key {
            Some(k) => {
                repr.check()?;
                repr.write_sealed(k, &mut header);
            }
            None => repr.emit(&mut header)?,
        }
        let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
        out.extend_from_slice(&header);
        out.extend_from_slice(payload);
        Ok(out)
    }
}

/// The secret that tags frames, derived from the job key (which never crosses the wire).
///
/// The tag is SipHash-2-4 (the `siphasher` crate), a keyed PRF made to authenticate short
/// inputs, with a 128-bit key and a 64-bit tag. Its key is `blake3::derive_key` of the job
/// key under a context string, so the same job key used elsewhere (control and tcp
/// handshakes) yields unrelated keys. SipHash rather than keyed BLAKE3 or HMAC-SHA256 for
/// this per-datagram tag because it is several times cheaper on 92 bytes (docs/security.md
/// gives the measurement); the handshakes, which run once per connection, use BLAKE3.
#[derive(Clone)]
pub struct FrameKey {
    k0: u64,
    k1: u64,
}

impl FrameKey {
    /// Derives the frame key of a job.
    pub fn from_job_key(job_key: u64) -> FrameKey {
        let k = blake3::derive_key("steadfast reliable frame tag v1", &job_key.to_le_bytes());
        let mut a = [0u8; 8];
        a.copy_from_slice(&k[..8]);
        let k0 = u64::from_le_bytes(a);
        a.copy_from_slice(&k[8..16]);
        FrameKey { k0, k1: u64::from_le_bytes(a) }
    }

    /// Tag of a 104-byte frame header: everything but the `tag` and `header_crc` fields.
    fn header_tag(&self, h: &[u8]) -> u64 {
        let mut s = siphasher::sip::SipHasher24::new_with_keys(self.k0, self.k1);
        std::hash::Hasher::write(&mut s, &h[..field::TAG.start]);
        std::hash::Hasher::write(&mut s, &h[field::TAG.end..field::HEADER_CRC.start]);
        std::hash::Hasher::finish(&s)
    }

    /// 64-bit tag of `msg` (for other small records of the path, e.g. route probes; give
    /// each record kind its own leading magic so tags of different kinds never collide).
    pub fn tag(&self, msg: &[u8]) -> u64 {
        let mut s = siphasher::sip::SipHasher24::new_with_keys(self.k0, self.k1);
        std::hash::Hasher::write(&mut s, msg);
        std::hash::Hasher::finish(&s)
    }
}

impl std::fmt::Debug for FrameKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FrameKey(..)")
    }
}

fn read_u32(b: &[u8], r: std::ops::Range<usize>) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[r]);
    u32::from_le_bytes(a)
}

fn read_u64(b: &[u8], r: std::ops::Range<usize>) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[r]);
    u64::from_le_bytes(a)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn data_repr() -> FrameRepr {
        FrameRepr {
            kind_code: Kind::Data.code(),
            route: 1,
            tag: 0xdead_beef_cafe_f00d,
            src: 3,
            dst: 7,
            seq: 42,
            timestamp: 1_000_000,
            send_count: 1,
            msg_id: 5,
            msg_len: 100,
            frag_offset: 20,
            cum_received: 10,
            cum_delivered: 9,
            max_received: 12,
            ..FrameRepr::default()
        }
    }

    #[test]
    fn roundtrip_data() {
        let payload = [0xabu8; 30];
        let bytes = data_repr().to_frame(&payload).unwrap();
        let frame = Frame::new_checked(&bytes[..]).unwrap();
        let r = frame.repr();
        assert_eq!(r.kind(), Some(Kind::Data));
        assert_eq!(r.seq, 42);
        assert_eq!(r.payload_len, 30);
        assert_eq!(frame.payload(), &payload);
        frame.verify_payload().unwrap();
        let mut out = vec![1u8];
        frame.copy_payload_checked(&mut out).unwrap();
        assert_eq!(&out[1..], &payload);
    }

    #[test]
    fn roundtrip_ack_nack() {
        let ack = FrameRepr {
            kind_code: Kind::Ack.code(),
            seq: 9,
            cum_received: 10,
            cum_delivered: 9,
            max_received: 10,
            ..FrameRepr::default()
        };
        let bytes = ack.to_frame(&[]).unwrap();
        assert_eq!(bytes.len(), HEADER_LEN);
        assert_eq!(Frame::new_checked(&bytes[..]).unwrap().repr(), ack);
        let nack = FrameRepr {
            kind_code: Kind::Nack.code(),
            seq: 11,
            ..ack
        };
        let bytes = nack.to_frame(&[]).unwrap();
        assert_eq!(Frame::new_checked(&bytes[..]).unwrap().kind(), Kind::Nack);
    }

    #[test]
    fn rejects_bad_frames() {
        let bytes = data_repr().to_frame(&[1u8; 30]).unwrap();
        assert_eq!(
            Frame::new_checked(&bytes[..50]).unwrap_err(),
            FrameError::Truncated { len: 50 }
        );
        assert!(matches!(
            Frame::new_checked(&bytes[..bytes.len() - 1]).unwrap_err(),
            FrameError::LengthMismatch { .. }
        ));
        let mut long = bytes.clone();
        long.push(0);
        assert!(matches!(
            Frame::new_checked(&long[..]).unwrap_err(),
            FrameError::LengthMismatch { .. }
        ));
        let huge = vec![0u8; MAX_FRAME + 1];
        assert!(matches!(
            Frame::new_checked(&huge[..]),
            Err(FrameError::Oversized { .. })
        ));
        let mut flipped = bytes.clone();
        flipped[30] ^= 4;
        assert!(matches!(
            Frame::new_checked(&flipped[..]),
            Err(FrameError::HeaderCrc { .. })
        ));
        let mut flipped = bytes.clone();
        flipped[HEADER_LEN + 3] ^= 4;
        let f = Frame::new_checked(&flipped[..]).unwrap();
        assert!(matches!(
            f.verify_payload(),
            Err(FrameError::PayloadCrc { .. })
        ));
        let mut out = vec![7u8];
        assert!(f.copy_payload_checked(&mut out).is_err());
        assert_eq!(out, vec![7u8]);
    }

    #[test]
    fn emit_refuses_inconsistent() {
        let mut r = data_repr();
        r.frag_offset = 90; // 90 + 30 > 100
        assert!(matches!(
            r.to_frame(&[0u8; 30]),
            Err(FrameError::Inconsistent(_))
        ));
        let mut r = data_repr();
        r.cum_delivered = 11; // > cum_received
        assert!(r.to_frame(&[0u8; 30]).is_err());
        let mut r = data_repr();
        r.frag_offset = u64::MAX; // overflow
        assert!(r.to_frame(&[0u8; 30]).is_err());
        let ack = FrameRepr {
            kind_code: Kind::Ack.code(),
            seq: 3,
            max_received: 2,
            cum_received: 1,
            ..FrameRepr::default()
        };
        assert!(ack.to_frame(&[]).is_err(), "ack of a seq never received");
    }

    /// The tag: the job key is not in the frame, a frame verifies only under the key it
    /// was sealed with, and a header changed after sealing (checksum fixed up, as a
    /// forger would) no longer verifies.
    #[test]
    fn sealed_frames_carry_a_tag_not_the_key() {
        let job_key = 0x0123_4567_89ab_cdefu64;
        let key = FrameKey::from_job_key(job_key);
        let bytes = data_repr().to_sealed_frame(&key, &[7u8; 30]).unwrap();
        assert!(!bytes.windows(8).any(|w| w == job_key.to_le_bytes()), "job key on the wire");
        let f = Frame::new_checked(&bytes[..]).unwrap();
        assert!(f.verify_tag(&key));
        assert!(!f.verify_tag(&FrameKey::from_job_key(job_key ^ 1)));
        for byte in (0..field::HEADER_CRC.start).filter(|b| !field::TAG.contains(b)) {
            let mut c = bytes.clone();
            c[byte] ^= 0x10;
            let crc = crc::crc32c(&c[..field::HEADER_CRC.start]);
            c[field::HEADER_CRC].copy_from_slice(&crc.to_le_bytes());
            if let Ok(f) = Frame::new_checked(&c[..]) {
                assert!(!f.verify_tag(&key), "header byte {byte} changed, tag still valid");
            }
        }
    }

    /// Builds a frame whose header checksum is valid but whose fields are arbitrary, so
    /// the consistency checks (not only the checksum) are exercised.
    fn forge(header: &[u8], payload: &[u8]) -> Vec<u8> {
        let mut b = header.to_vec();
        b.resize(HEADER_LEN, 0);
        b.extend_from_slice(payload);
        b[field::MAGIC].copy_from_slice(&MAGIC.to_le_bytes());
        b[field::VERSION] = VERSION;
        let c = crc::crc32c(&b[..field::HEADER_CRC.start]);
        b[field::HEADER_CRC].copy_from_slice(&c.to_le_bytes());
        b
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..400)) {
            if let Ok(f) = Frame::new_checked(&data[..]) {
                let r = f.repr();
                prop_assert!(r.check().is_ok());
                let _ = f.verify_payload();
            }
        }

        #[test]
        fn forged_headers_are_checked(header in proptest::collection::vec(any::<u8>(), HEADER_LEN),
                                      payload in proptest::collection::vec(any::<u8>(), 0..64)) {
            let b = forge(&header, &payload);
            match Frame::new_checked(&b[..]) {
                Ok(f) => {
                    let r = f.repr();
                    prop_assert!(r.check().is_ok());
                    prop_assert_eq!(r.payload_len as usize, payload.len());
                    // A valid frame re-emits to the same header bytes.
                    let mut out = [0u8; HEADER_LEN];
                    r.emit(&mut out).unwrap();
                    prop_assert_eq!(&out[..], &b[..HEADER_LEN]);
                }
                Err(e) => prop_assert!(!matches!(e, FrameError::HeaderCrc { .. }), "forged crc rejected: {}", e),
            }
        }

        #[test]
        fn any_one_to_three_bit_flips_are_detected(flips in proptest::collection::vec(any::<u16>(), 1..4)) {
            let bytes = data_repr().to_frame(&[0x5au8; 30]).unwrap();
            let mut c = bytes.clone();
            let bits = bytes.len() * 8;
            for f in &flips { let bit = *f as usize % bits; c[bit / 8] ^= 1 << (bit % 8); }
            if c != bytes {
                let ok = Frame::new_checked(&c[..]).map(|f| f.verify_payload().is_ok()).unwrap_or(false);
                prop_assert!(!ok);
            }
        }
    }
}
