//! Frames of the control channel, authenticated with the job key.
//!
//! ```text
//! 0  "SFFT"          magic
//! 4  u8  version     = 1
//! 5  u8  kind        1 Hello, 2 Membership, 3 HowAreYou, 4 IAmAlive, 5 Bye
//! 6  u16 reserved    = 0
//! 8  u32 from        sender's world rank
//! 12 u32 length      payload bytes (≤ MAX_PAYLOAD)
//! 16 u64 sent_ns     sender's CLOCK_MONOTONIC at sending (one-way latency on one host)
//! 24 payload
//! .. u64 tag         SipHash-2-4 of everything before it, keyed with the job key
//! ```
//! Integers are big-endian. A frame whose header or tag does not check out is foreign: the
//! connection it came on is dropped and counted, nothing of it is acted upon.

/// Magic bytes at the start of every frame.
pub const MAGIC: [u8; 4] = *b"SFFT";
/// Frame format version.
pub const VERSION: u8 = 1;
/// Fixed header length.
pub const HEADER_LEN: usize = 24;
/// Authentication tag length.
pub const TAG_LEN: usize = 8;
/// Largest payload accepted (a full member list of a very large job fits).
pub const MAX_PAYLOAD: usize = 8 << 20;

/// What a frame carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// First frame on a connection: who connects (payload: incarnation u32, world size u32).
    Hello = 1,
    /// An encoded `steadfast_membership::Message`.
    Membership = 2,
    /// The failure detector's query to a silent neighbour.
    HowAreYou = 3,
    /// The answer to [`Kind::HowAreYou`].
    IAmAlive = 4,
    /// The sender leaves the job normally (MPI_Finalize): its silence is no failure.
    Bye = 5,
}

impl Kind {
    fn from_u8(v: u8) -> Option<Kind> {
        Some(match v {
            1 => Kind::Hello,
            2 => Kind::Membership,
            3 => Kind::HowAreYou,
            4 => Kind::IAmAlive,
            5 => Kind::Bye,
            _ => return None,
        })
    }
}

/// One received frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// What it carries.
    pub kind: Kind,
    /// Sender's world rank (checked against the connection's peer by the caller).
    pub from: u32,
    /// Sender's monotonic clock at sending, in nanoseconds.
    pub sent_ns: u64,
    /// Payload bytes.
    pub payload: Vec<u8>,
}

/// Why bytes were not a frame of this job.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The magic bytes are wrong.
    #[error("bad magic")]
    Magic,
    /// Unknown format version.
    #[error("unsupported version {0}")]
    Version(u8),
    /// Unknown frame kind.
    #[error("unknown kind {0}")]
    Kind(u8),
    /// Reserved bits set.
    #[error("reserved field is {0:#x}")]
    Reserved(u16),
    /// Payload length above [`MAX_PAYLOAD`].
    #[error("payload of {0} bytes is too long")]
    TooLong(usize),
    /// The authentication tag does not match: not from this job, or corrupted.
    #[error("authentication tag mismatch")]
    Tag,
}

/// The job's frame-authentication key.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct FrameKey {
    k0: u64,
    k1: u64,
}

impl std::fmt::Debug for FrameKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FrameKey(..)")
    }
}

impl FrameKey {
    /// Derives the 128-bit SipHash key from the 64-bit job secret (domain-separated so the
    /// tag is useless for any other protocol keyed with the same secret).
    pub fn from_job_key(job_key: u64) -> FrameKey {
        FrameKey {
            k0: job_key,
            k1: job_key.rotate_left(29) ^ u64::from_be_bytes(*b"SFFTmbrs"),
        }
    }

    fn tag(&self, data: &[u8]) -> u64 {
        siphash24(self.k0, self.k1, data)
    }
}

/// Appends one frame to `out`.
pub fn encode(
    key: &FrameKey,
    kind: Kind,
    from: u32,
    sent_ns: u64,
    payload: &[u8],
    out: &mut Vec<u8>,
) {
    let start = out.len();
    out.extend_from_slice(&MAGIC);
    out.push(VERSION);
    out.push(kind as u8);
    out.extend_from_slice(&0u16.to_be_bytes());
    out.extend_from_slice(&from.to_be_bytes());
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    out.extend_from_slice(&sent_ns.to_be_bytes());
    out.extend_from_slice(payload);
    let tag = key.tag(&out[start..]);
    out.extend_from_slice(&tag.to_be_bytes());
}

fn be_u16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}
fn be_u32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}
fn be_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

/// Parses the frame at the front of `buf`: `Ok(None)` when more bytes are needed, else the
/// frame and how many bytes it used. The header is checked as soon as it is complete, so a
/// foreign connection is rejected without waiting for a bogus length.
pub fn decode(key: &FrameKey, buf: &[u8]) -> Result<Option<(Frame, usize)>, FrameError> {
    if buf.len() < HEADER_LEN {
        // Reject foreign bytes early when even the magic is wrong.
        let n = buf.len().min(4);
        if buf[..n] != MAGIC[..n] {
            return Err(FrameError::Magic);
        }
        return Ok(None);
    }
    if buf[..4] != MAGIC {
        return Err(FrameError::Magic);
    }
    if buf[4] != VERSION {
        return Err(FrameError::Version(buf[4]));
    }
    let kind = Kind::from_u8(buf[5]).ok_or(FrameError::Kind(buf[5]))?;
    let reserved = be_u16(&buf[6..8]);
    if reserved != 0 {
        return Err(FrameError::Reserved(reserved));
    }
    let from = be_u32(&buf[8..12]);
    let len = be_u32(&buf[12..16]) as usize;
    if len > MAX_PAYLOAD {
        return Err(FrameError::TooLong(len));
    }
    let total = HEADER_LEN + len + TAG_LEN;
    if buf.len() < total {
        return Ok(None);
    }
    let body_end = HEADER_LEN + len;
    if key.tag(&buf[..body_end]) != be_u64(&buf[body_end..total]) {
        return Err(FrameError::Tag);
    }
    let frame = Frame {
        kind,
        from,
        sent_ns: be_u64(&buf[16..24]),
        payload: buf[HEADER_LEN..body_end].to_vec(),
    };
    Ok(Some((frame, total)))
}

/// SipHash-2-4 (Aumasson and Bernstein), the keyed hash that authenticates frames.
pub fn siphash24(k0: u64, k1: u64, data: &[u8]) -> u64 {
    let mut v = [
        k0 ^ 0x736f_6d65_7073_6575,
        k1 ^ 0x646f_7261_6e64_6f6d,
        k0 ^ 0x6c79_6765_6e65_7261,
        k1 ^ 0x7465_6462_7974_6573,
    ];
    fn round(v: &mut [u64; 4]) {
        v[0] = v[0].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(13) ^ v[0];
        v[0] = v[0].rotate_left(32);
        v[2] = v[2].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(16) ^ v[2];
        v[0] = v[0].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(21) ^ v[0];
        v[2] = v[2].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(17) ^ v[2];
        v[2] = v[2].rotate_left(32);
    }
    let compress = |v: &mut [u64; 4], m: u64| {
        v[3] ^= m;
        round(v);
        round(v);
        v[0] ^= m;
    };
    let chunks = data.chunks_exact(8);
    let rest = chunks.remainder();
    for c in chunks {
        let mut a = [0u8; 8];
        a.copy_from_slice(c);
        compress(&mut v, u64::from_le_bytes(a));
    }
    let mut last = (data.len() as u64) << 56;
    for (i, &b) in rest.iter().enumerate() {
        last |= (b as u64) << (8 * i);
    }
    compress(&mut v, last);
    v[2] ^= 0xff;
    for _ in 0..4 {
        round(&mut v);
    }
    v[0] ^ v[1] ^ v[2] ^ v[3]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn siphash_reference_vectors() {
        // The reference implementation's key 00..0f.
        let (k0, k1) = (0x0706_0504_0302_0100, 0x0f0e_0d0c_0b0a_0908);
        assert_eq!(siphash24(k0, k1, &[]), 0x726f_db47_dd0e_0e31);
        let msg: Vec<u8> = (0..15).collect();
        assert_eq!(siphash24(k0, k1, &msg), 0xa129_ca61_49be_45e5);
        // Cross-check every length up to 64 against the standard library's SipHash-2-4.
        #[allow(deprecated)]
        for len in 0..64u8 {
            use std::hash::Hasher;
            let msg: Vec<u8> = (0..len).collect();
            let mut h = std::hash::SipHasher::new_with_keys(k0, k1);
            h.write(&msg);
            assert_eq!(siphash24(k0, k1, &msg), h.finish(), "length {len}");
        }
    }

    #[test]
    fn frames_roundtrip_in_pieces() {
        let key = FrameKey::from_job_key(0xdead_beef_0123_4567);
        let mut buf = Vec::new();
        encode(
            &key,
            Kind::Hello,
            7,
            11,
            &[0, 0, 0, 0, 0, 0, 0, 16],
            &mut buf,
        );
        encode(&key, Kind::Membership, 7, 12, b"hello world", &mut buf);
        encode(&key, Kind::Bye, 7, 13, &[], &mut buf);
        // Every prefix either needs more bytes or yields the first frame.
        let first_len = HEADER_LEN + 8 + TAG_LEN;
        for cut in 0..first_len {
            assert_eq!(decode(&key, &buf[..cut]), Ok(None), "cut {cut}");
        }
        let mut at = 0;
        let mut got = Vec::new();
        while let Some((f, used)) = decode(&key, &buf[at..]).unwrap() {
            got.push(f);
            at += used;
        }
        assert_eq!(at, buf.len());
        assert_eq!(got.len(), 3);
        assert_eq!(got[1].kind, Kind::Membership);
        assert_eq!(got[1].payload, b"hello world");
        assert_eq!(got[1].sent_ns, 12);
        assert_eq!(got[2].from, 7);
    }

    #[test]
    fn foreign_and_corrupt_frames_are_rejected() {
        let key = FrameKey::from_job_key(1);
        let other = FrameKey::from_job_key(2);
        let mut buf = Vec::new();
        encode(&other, Kind::IAmAlive, 1, 0, b"x", &mut buf);
        assert_eq!(decode(&key, &buf), Err(FrameError::Tag));
        let mut good = Vec::new();
        encode(&key, Kind::IAmAlive, 1, 0, b"xyz", &mut good);
        // Flipping any single bit anywhere is caught (header check or tag).
        for i in 0..good.len() {
            for bit in 0..8 {
                let mut b = good.clone();
                b[i] ^= 1 << bit;
                match decode(&key, &b) {
                    Err(_) => {}
                    Ok(None) => assert!((12..16).contains(&i), "byte {i} bit {bit}"),
                    Ok(Some(_)) => panic!("corruption at byte {i} bit {bit} accepted"),
                }
            }
        }
        assert_eq!(decode(&key, b"GET / HTTP/1.1\r\n"), Err(FrameError::Magic));
        assert_eq!(decode(&key, b"SFX"), Err(FrameError::Magic));
        let mut long = good.clone();
        long[12..16].copy_from_slice(&((MAX_PAYLOAD as u32) + 1).to_be_bytes());
        assert_eq!(
            decode(&key, &long),
            Err(FrameError::TooLong(MAX_PAYLOAD + 1))
        );
    }

    #[test]
    fn decoder_survives_garbage() {
        let key = FrameKey::from_job_key(3);
        let mut x = 0x1234_5678_9abc_def0u64;
        for _ in 0..5000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let len = (x % 64) as usize;
            let mut b: Vec<u8> = (0..len).map(|i| (x >> (i % 8 * 8)) as u8).collect();
            if x.is_multiple_of(3) && b.len() >= 6 {
                b[..4].copy_from_slice(&MAGIC);
                b[4] = VERSION;
                b[5] = 2;
            }
            let _ = decode(&key, &b);
        }
    }
}
