//! The frame a root writes into a channel: a fixed 24-byte header followed by the data.
//!
//! ```text
//! 0        8       12      16      20      24
//! | seq u64 | root u32 | len u32 | flags u32 | crc u32 | data (len bytes) ...
//! ```
//! All fields little-endian. `crc` is the CRC32C of the first 20 header bytes followed by
//! the data when `flags` is [`FLAG_CRC`], else `flags` and `crc` are 0 and nothing is
//! checked (reliability off). A
//! receiver validates a frame before anything of it is used: a frame whose length does not
//! match, or whose CRC does not, is dropped as if it had been lost.
//!
//! The header carries everything a receiver needs to place the frame (sequence number, and
//! so channel `seq % channels`) and to check it, so a driver may write the data first and
//! the header last (the shared-memory channels do that above 16 KiB: a reader that sees the
//! header sees the data).

use crate::{Rank, Seq};

/// Bytes of the header.
pub const HEADER: usize = 24;

/// The flags word of a frame whose CRC field is set and must be checked. Flags are either
/// this or 0, no other value: one flipped bit cannot turn the check off.
pub const FLAG_CRC: u32 = 0x4352_4331;

/// A decoded and checked frame header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// The broadcast's sequence number on its communicator (from 0).
    pub seq: Seq,
    /// The broadcast's root.
    pub root: Rank,
    /// Bytes of data after the header.
    pub len: u32,
    /// Whether the CRC was set (and so checked).
    pub crc: bool,
}

/// Why a frame was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// Shorter than a header, or the header's length does not match the bytes.
    Length,
    /// Unknown flag bits.
    Flags,
    /// The CRC does not match the header and data.
    Crc,
}

/// Builds the frame of broadcast `seq` from `root` carrying `data`, with a CRC when `crc`.
///
/// # Panics
/// If `data` is 4 GiB or more (a channel broadcast carries at most one channel's bytes; the
/// caller chooses another algorithm above that).
pub fn encode(seq: Seq, root: Rank, data: &[u8], crc: bool) -> Vec<u8> {
    let mut f = vec![0u8; HEADER + data.len()];
    encode_into(&mut f, seq, root, data, crc);
    f
}

/// [`encode`] into one shared allocation: the frame a root keeps for retransmission and
/// hands to every write without copying it.
pub fn encode_shared(seq: Seq, root: Rank, data: &[u8], crc: bool) -> std::sync::Arc<[u8]> {
    let mut f: std::sync::Arc<[u8]> = (0..HEADER + data.len()).map(|_| 0u8).collect();
    if let Some(out) = std::sync::Arc::get_mut(&mut f) {
        encode_into(out, seq, root, data, crc);
    }
    f
}

/// Writes the frame of `data` into `out`, which is exactly `HEADER + data.len()` bytes.
///
/// # Panics
/// If `out` has another length, or `data` is 4 GiB or more.
pub fn encode_into(out: &mut [u8], seq: Seq, root: Rank, data: &[u8], crc: bool) {
    let len = u32::try_from(data.len()).expect("channel broadcast data under 4 GiB");
    let flags = if crc { FLAG_CRC } else { 0 };
    out[..8].copy_from_slice(&seq.to_le_bytes());
    out[8..12].copy_from_slice(&root.to_le_bytes());
    out[12..16].copy_from_slice(&len.to_le_bytes());
    out[16..20].copy_from_slice(&flags.to_le_bytes());
    // The data's CRC in the same pass as its copy: a large broadcast's root makes one
    // pass over the caller's buffer here, not two.
    let (head, body) = out.split_at_mut(HEADER);
    let sum = if crc {
        steadfast_reliable::crc::copy_with_crc32c_append(steadfast_reliable::crc::crc32c(&head[..20]), body, data)
    } else {
        body.copy_from_slice(data);
        0
    };
    head[20..].copy_from_slice(&sum.to_le_bytes());
}

/// The CRC32C of the first 20 header bytes followed by the data.
pub fn checksum(head: &[u8], data: &[u8]) -> u32 {
    // The reliable layer's CRC: one short chain for small frames, where the general
    // routine's set-up would cost more than the bytes (one broadcast per call).
    steadfast_reliable::crc::crc32c_parts(head, data)
}

/// Decodes and checks `frame`; never panics whatever the bytes.
pub fn decode(frame: &[u8]) -> Result<Header, FrameError> {
    let Some((head, data)) = frame.split_first_chunk::<HEADER>() else {
        return Err(FrameError::Length);
    };
    decode_parts(head, data)
}

/// [`decode`] of a frame whose header and data lie apart (a driver that copied the data
/// straight to its destination); never panics whatever the bytes.
pub fn decode_parts(head: &[u8; HEADER], data: &[u8]) -> Result<Header, FrameError> {
    check(head, data.len(), || checksum(&head[..20], data))
}

/// The header's word at byte `i`.
fn u32_at(head: &[u8; HEADER], i: usize) -> u32 {
    u32::from_le_bytes([head[i], head[i + 1], head[i + 2], head[i + 3]])
}

/// Checks a header against `data_len` data bytes, asking `crc_of` for the CRC of header
/// and data only where the frame carries one and its length is right.
fn check(head: &[u8; HEADER], data_len: usize, crc_of: impl FnOnce() -> u32) -> Result<Header, FrameError> {
    let mut seq = [0u8; 8];
    seq.copy_from_slice(&head[..8]);
    let seq = u64::from_le_bytes(seq);
    let (root, len, flags, sum) = (u32_at(head, 8), u32_at(head, 12), u32_at(head, 16), u32_at(head, 20));
    if data_len != len as usize {
        return Err(FrameError::Length);
    }
    if flags != 0 && flags != FLAG_CRC {
        return Err(FrameError::Flags);
    }
    let crc = flags == FLAG_CRC;
    if crc && crc_of() != sum {
        return Err(FrameError::Crc);
    }
    Ok(Header {
        seq,
        root,
        len,
        crc,
    })
}

/// [`decode_parts`] of a frame whose data is copied from `src` (where the root wrote it)
/// into `dst` in the same pass that computes its CRC; `dst` then holds the bytes checked,
/// damaged or not. Never panics whatever the bytes.
///
/// # Panics
/// If `dst.len() != src.len()` (a caller bug, not a property of the frame).
pub fn copy_decode(head: &[u8; HEADER], src: &[u8], dst: &mut [u8]) -> Result<Header, FrameError> {
    // The CRC is computed with the copy where `check` will ask for it: a frame that says
    // it carries one and whose length is right.
    let fused = u32_at(head, 16) == FLAG_CRC && src.len() == u32_at(head, 12) as usize;
    let sum = if fused {
        steadfast_reliable::crc::copy_with_crc32c_append(steadfast_reliable::crc::crc32c(&head[..20]), dst, src)
    } else {
        dst.copy_from_slice(src);
        0
    };
    check(head, src.len(), || sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_with_and_without_crc() {
        for crc in [true, false] {
            let f = encode(7, 3, b"hello", crc);
            assert_eq!(f.len(), HEADER + 5);
            assert_eq!(
                decode(&f),
                Ok(Header {
                    seq: 7,
                    root: 3,
                    len: 5,
                    crc
                })
            );
            assert_eq!(&f[HEADER..], b"hello");
        }
        assert_eq!(decode(&encode(0, 0, b"", true)).map(|h| h.len), Ok(0));
    }

    #[test]
    fn every_single_bit_flip_is_caught_with_crc() {
        let f = encode(1 << 40, 5, &[0xa5; 40], true);
        for bit in 0..f.len() * 8 {
            let mut g = f.clone();
            g[bit / 8] ^= 1 << (bit % 8);
            assert!(decode(&g).is_err(), "bit {bit} not caught");
        }
    }

    #[test]
    fn without_crc_a_data_flip_goes_through() {
        let mut f = encode(1, 0, b"abc", false);
        f[HEADER] ^= 1;
        assert_eq!(decode(&f).map(|h| h.seq), Ok(1));
    }

    #[test]
    fn copying_decode_agrees_with_decode_and_copies_what_it_checked() {
        // Sizes on both sides of the CRC kernels' thresholds; every frame intact, with a
        // flipped data bit, header bit, unknown flag, and wrong length.
        for len in [0usize, 5, 255, 256, 4096, 70_000] {
            let data: Vec<u8> = (0..len).map(|i| (i * 31 + 7) as u8).collect();
            for crc in [true, false] {
                let f = encode(9, 2, &data, crc);
                let mut damaged = vec![f.clone()];
                if len > 0 {
                    let mut g = f.clone();
                    g[HEADER + len / 2] ^= 0x10;
                    damaged.push(g);
                }
                let mut g = f.clone();
                g[3] ^= 1;
                damaged.push(g);
                let mut g = f.clone();
                g[16] |= 2;
                damaged.push(g);
                for g in std::iter::once(f.clone()).chain(damaged) {
                    let head: &[u8; HEADER] = g[..HEADER].try_into().unwrap();
                    let mut dst = vec![0u8; g.len() - HEADER];
                    assert_eq!(copy_decode(head, &g[HEADER..], &mut dst), decode(&g), "{len} {crc}");
                    assert_eq!(dst, g[HEADER..]);
                }
                // The caller's buffer is one byte short of the header's length.
                if len > 0 {
                    let head: &[u8; HEADER] = f[..HEADER].try_into().unwrap();
                    let mut dst = vec![0u8; len - 1];
                    assert_eq!(copy_decode(head, &f[HEADER..HEADER + len - 1], &mut dst), Err(FrameError::Length));
                }
            }
        }
    }

    #[test]
    fn short_long_and_unknown_flags_are_refused() {
        let f = encode(1, 0, b"abc", true);
        assert_eq!(decode(&f[..HEADER - 1]), Err(FrameError::Length));
        assert_eq!(decode(&f[..f.len() - 1]), Err(FrameError::Length));
        let mut g = f.clone();
        g.push(0);
        assert_eq!(decode(&g), Err(FrameError::Length));
        let mut g = encode(1, 0, b"abc", false);
        g[16] = 1;
        assert_eq!(decode(&g), Err(FrameError::Flags));
    }
}
