//! A frame as multicast datagrams: the wire format of the channel broadcast across hosts.
//!
//! A frame ([`crate::frame`]) of up to a channel's capacity does not fit one datagram on a
//! real network, so the driver cuts it into fragments of at most `fragment` bytes; every
//! receiver reassembles them ([`Reassembly`]) and hands the whole frame to
//! [`crate::Machine::frame_arrived`], whose CRC32C checks it end to end. A lost fragment loses
//! the frame (the machine repairs it like any lost frame).
//!
//! ```text
//! 0       4     5     6       8          16       20     22     24      32        36       40       44        48      56
//! | magic | ver | kind | 0    | stream u64 | sender | index | count | seq u64 | frame len | offset | payload | pay crc | tag u64 | payload
//! ```
//! All fields little-endian. `stream` names the communicator's stream (drawn by its rank 0
//! when the stream is set up), so datagrams of another stream that reach the same group and
//! port are refused. `tag` is a SipHash-2-4 of the first 48 bytes under a key derived from
//! the job key ([`Key`]), as on the udp path: the payload is covered through its CRC32C,
//! which the header holds. The job key itself is never sent. A datagram whose length,
//! fields, tag or payload CRC do not check is refused ([`DatagramError`]) and the driver
//! counts and drops it.

use std::collections::BTreeMap;

use crate::{Rank, Seq};

/// Bytes of a datagram's header.
pub const HEADER: usize = 56;
const MAGIC: u32 = 0x434d_4653; // "SFMC"
const VERSION: u8 = 1;
/// Fragments of a frame are at most this many (a frame is at most 4 GiB / fragment; the
/// driver's channel capacity keeps it far below).
pub const MAX_FRAGMENTS: usize = u16::MAX as usize;

/// What a datagram carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A fragment of a frame.
    Fragment = 0,
    /// A probe of the stream at set-up (no payload).
    Probe = 1,
}

/// The datagram tag's key, derived from the job key.
#[derive(Clone)]
pub struct Key {
    k0: u64,
    k1: u64,
}

impl Key {
    /// The key of a job's multicast datagrams (its own context string: no other use of the
    /// job key yields it).
    pub fn from_job_key(job_key: u64) -> Key {
        let k = blake3::derive_key("steadfast multicast channel datagram tag v1", &job_key.to_le_bytes());
        let mut a = [0u8; 8];
        a.copy_from_slice(&k[..8]);
        let k0 = u64::from_le_bytes(a);
        a.copy_from_slice(&k[8..16]);
        Key { k0, k1: u64::from_le_bytes(a) }
    }

    fn tag(&self, head: &[u8]) -> u64 {
        let mut s = siphasher::sip::SipHasher24::new_with_keys(self.k0, self.k1);
        std::hash::Hasher::write(&mut s, head);
        std::hash::Hasher::finish(&s)
    }
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(..)")
    }
}

/// A checked datagram header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub kind: Kind,
    pub stream: u64,
    pub sender: Rank,
    pub index: u16,
    pub count: u16,
    pub seq: Seq,
    pub frame_len: u32,
    pub offset: u32,
}

/// Why a datagram was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DatagramError {
    /// Shorter than a header, or the payload length does not match.
    Length,
    /// Not ours: magic, version or kind unknown.
    Foreign,
    /// The tag does not verify under our key (another job, or forged).
    Tag,
    /// The payload's CRC does not match (damaged).
    Crc,
    /// Fields that contradict each other (fragment outside its frame, index beyond count).
    Fields,
}

fn put_header(out: &mut Vec<u8>, key: &Key, h: &Header, payload: &[u8]) {
    let start = out.len();
    out.extend_from_slice(&MAGIC.to_le_bytes());
    out.push(VERSION);
    out.push(h.kind as u8);
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&h.stream.to_le_bytes());
    out.extend_from_slice(&h.sender.to_le_bytes());
    out.extend_from_slice(&h.index.to_le_bytes());
    out.extend_from_slice(&h.count.to_le_bytes());
    out.extend_from_slice(&h.seq.to_le_bytes());
    out.extend_from_slice(&h.frame_len.to_le_bytes());
    out.extend_from_slice(&h.offset.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32c::crc32c(payload).to_le_bytes());
    let tag = key.tag(&out[start..start + 48]);
    out.extend_from_slice(&tag.to_le_bytes());
    out.extend_from_slice(payload);
}

/// The datagrams of `frame` (broadcast `seq`) from `sender` on `stream`, each with at most
/// `fragment` bytes of payload (at least 1). `None` if that takes more than
/// [`MAX_FRAGMENTS`] datagrams or the frame is 4 GiB or more.
pub fn fragments(key: &Key, stream: u64, sender: Rank, seq: Seq, frame: &[u8], fragment: usize) -> Option<Vec<Vec<u8>>> {
    let fragment = fragment.max(1);
    let frame_len = u32::try_from(frame.len()).ok()?;
    let count = frame.len().div_ceil(fragment).max(1);
    if count > MAX_FRAGMENTS {
        return None;
    }
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        let lo = i * fragment;
        let hi = (lo + fragment).min(frame.len());
        let payload = &frame[lo..hi];
        let h = Header {
            kind: Kind::Fragment,
            stream,
            sender,
            index: i as u16,
            count: count as u16,
            seq,
            frame_len,
            offset: lo as u32,
        };
        let mut d = Vec::with_capacity(HEADER + payload.len());
        put_header(&mut d, key, &h, payload);
        out.push(d);
    }
    Some(out)
}

/// A probe datagram of `stream` (set-up: does the group reach every member?).
pub fn probe(key: &Key, stream: u64, sender: Rank, nonce: u64) -> Vec<u8> {
    let h = Header { kind: Kind::Probe, stream, sender, index: 0, count: 0, seq: nonce, frame_len: 0, offset: 0 };
    let mut d = Vec::with_capacity(HEADER);
    put_header(&mut d, key, &h, &[]);
    d
}

/// Checks a datagram and returns its header and payload; never panics whatever the bytes.
pub fn parse<'a>(key: &Key, d: &'a [u8]) -> Result<(Header, &'a [u8]), DatagramError> {
    if d.len() < HEADER {
        return Err(DatagramError::Length);
    }
    let u16_at = |i: usize| u16::from_le_bytes([d[i], d[i + 1]]);
    let u32_at = |i: usize| u32::from_le_bytes([d[i], d[i + 1], d[i + 2], d[i + 3]]);
    let u64_at = |i: usize| {
        let mut a = [0u8; 8];
        a.copy_from_slice(&d[i..i + 8]);
        u64::from_le_bytes(a)
    };
    if u32_at(0) != MAGIC || d[4] != VERSION || d[6] != 0 || d[7] != 0 {
        return Err(DatagramError::Foreign);
    }
    let kind = match d[5] {
        0 => Kind::Fragment,
        1 => Kind::Probe,
        _ => return Err(DatagramError::Foreign),
    };
    if key.tag(&d[..48]) != u64_at(48) {
        return Err(DatagramError::Tag);
    }
    let payload = &d[HEADER..];
    if u32_at(40) as usize != payload.len() {
        return Err(DatagramError::Length);
    }
    if crc32c::crc32c(payload) != u32_at(44) {
        return Err(DatagramError::Crc);
    }
    let h = Header {
        kind,
        stream: u64_at(8),
        sender: u32_at(16),
        index: u16_at(20),
        count: u16_at(22),
        seq: u64_at(24),
        frame_len: u32_at(32),
        offset: u32_at(36),
    };
    let fits = u64::from(h.offset) + payload.len() as u64 <= u64::from(h.frame_len);
    if kind == Kind::Fragment && (h.count == 0 || h.index >= h.count || !fits) {
        return Err(DatagramError::Fields);
    }
    Ok((h, payload))
}

/// A frame being put back together.
#[derive(Debug)]
struct Partial {
    frame_len: u32,
    count: u16,
    have: Vec<bool>,
    missing: usize,
    buf: Vec<u8>,
}

/// Reassembles frames from their fragments, in any order, with repeats. Holds at most
/// `limit` partial frames (the oldest by sequence number goes first), so a stream of
/// fragments of frames that never complete takes bounded memory.
#[derive(Debug)]
pub struct Reassembly {
    limit: usize,
    partial: BTreeMap<Seq, Partial>,
    /// Fragments that contradicted the partial frame they belong to (dropped).
    pub inconsistent: u64,
    /// Partial frames evicted to make room.
    pub evicted: u64,
}

impl Reassembly {
    /// At most `limit` (at least 1) partial frames at once.
    pub fn new(limit: usize) -> Reassembly {
        Reassembly { limit: limit.max(1), partial: BTreeMap::new(), inconsistent: 0, evicted: 0 }
    }

    /// Partial frames held.
    pub fn pending(&self) -> usize {
        self.partial.len()
    }

    /// Forget the partial frame of `seq` (e.g. the frame arrived by another way).
    pub fn forget_below(&mut self, seq: Seq) {
        self.partial = self.partial.split_off(&seq);
    }

    /// Takes a checked fragment; returns the whole frame once its last fragment is in.
    pub fn add(&mut self, h: &Header, payload: &[u8]) -> Option<Vec<u8>> {
        if h.kind != Kind::Fragment {
            return None;
        }
        if h.count == 1 && h.offset == 0 && payload.len() == h.frame_len as usize {
            // One fragment: no copy to keep (a stale partial of the same frame is moot).
            self.partial.remove(&h.seq);
            return Some(payload.to_vec());
        }
        if !self.partial.contains_key(&h.seq) {
            while self.partial.len() >= self.limit {
                self.partial.pop_first();
                self.evicted += 1;
            }
            self.partial.insert(
                h.seq,
                Partial {
                    frame_len: h.frame_len,
                    count: h.count,
                    have: vec![false; usize::from(h.count)],
                    missing: usize::from(h.count),
                    buf: vec![0; h.frame_len as usize],
                },
            );
        }
        let p = self.partial.get_mut(&h.seq)?;
        if p.frame_len != h.frame_len || p.count != h.count {
            self.inconsistent += 1;
            return None;
        }
        let i = usize::from(h.index);
        if p.have[i] {
            return None;
        }
        let lo = h.offset as usize;
        p.buf[lo..lo + payload.len()].copy_from_slice(payload);
        p.have[i] = true;
        p.missing -= 1;
        if p.missing == 0 {
            return self.partial.remove(&h.seq).map(|p| p.buf);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use steadfast_proto::Rng;

    fn key() -> Key {
        Key::from_job_key(0x1234_5678_9abc_def0)
    }

    #[test]
    fn fragments_round_trip_in_any_order() {
        let k = key();
        let frame: Vec<u8> = (0..10_000u32).map(|i| (i * 7) as u8).collect();
        let mut ds = fragments(&k, 9, 3, 42, &frame, 1000).unwrap();
        assert_eq!(ds.len(), 10);
        ds.reverse();
        let mut r = Reassembly::new(4);
        let mut got = None;
        for d in &ds {
            let (h, p) = parse(&k, d).unwrap();
            assert_eq!((h.stream, h.sender, h.seq), (9, 3, 42));
            if let Some(f) = r.add(&h, p) {
                got = Some(f);
            }
        }
        assert_eq!(got.as_deref(), Some(&frame[..]));
        assert_eq!(r.pending(), 0);
    }

    #[test]
    fn another_key_a_bit_flip_and_truncation_are_refused() {
        let k = key();
        let d = &fragments(&k, 1, 0, 0, b"abcdefgh", 4).unwrap()[0];
        assert_eq!(parse(&Key::from_job_key(1), d).map(|_| ()), Err(DatagramError::Tag));
        for bit in 0..d.len() * 8 {
            let mut e = d.clone();
            e[bit / 8] ^= 1 << (bit % 8);
            assert!(parse(&k, &e).is_err(), "bit {bit} not caught");
        }
        for n in 0..d.len() {
            assert!(parse(&k, &d[..n]).is_err(), "truncated to {n} accepted");
        }
    }

    #[test]
    fn the_key_is_not_in_the_datagram() {
        let job_key: u64 = 0x0123_4567_89ab_cdef;
        let k = Key::from_job_key(job_key);
        for d in fragments(&k, 5, 1, 7, &[0u8; 300], 100).unwrap().iter().chain([probe(&k, 5, 1, 9)].iter()) {
            for w in [job_key.to_le_bytes(), job_key.to_be_bytes(), k.k0.to_le_bytes(), k.k1.to_le_bytes()] {
                assert!(!d.windows(8).any(|x| x == w));
            }
        }
    }

    /// Promise: whatever a network does to the datagrams (loss, repeats, reordering by a
    /// few places, damage, truncation), every frame reassembled is one that was sent, byte for byte;
    /// without loss every frame comes out; memory stays within the limit.
    #[test]
    fn seeded_network_never_yields_a_frame_that_was_not_sent() {
        let seeds = steadfast_proto::sweep::seeds(300, |i| steadfast_proto::sweep::spread(i, 2003));
        for seed in seeds {
            let mut g = Rng::new(seed);
            let k = key();
            let frag = 1 + g.below(2000) as usize;
            let lossy = g.below(2) == 0;
            let frames: Vec<Vec<u8>> = (0..20)
                .map(|_| {
                    let n = g.below(9000) as usize;
                    (0..n).map(|_| g.next_u64() as u8).collect()
                })
                .collect();
            let mut net: Vec<Vec<u8>> = Vec::new();
            for (s, f) in frames.iter().enumerate() {
                for d in fragments(&k, 1, 0, s as u64, f, frag).unwrap() {
                    if lossy && g.below(10) == 0 {
                        continue;
                    }
                    if g.below(8) == 0 {
                        net.push(d.clone());
                    }
                    let mut d = d;
                    if lossy && g.below(10) == 0 {
                        let bit = g.below(d.len() as u64 * 8) as usize;
                        d[bit / 8] ^= 1 << (bit % 8);
                        // The intact copy is lost: damage counts as a loss.
                    } else if lossy && g.below(20) == 0 {
                        d.truncate(g.below(d.len() as u64) as usize);
                    }
                    net.push(d);
                }
            }
            // Reorder within a window of a few datagrams (as a network would): each moves at
            // most three places. (Swapping each with one of the next three let a datagram ride
            // along arbitrarily far: a fragment held back past more frames than the partial
            // limit evicts its frame, a loss the machine repairs but no lossless run has.)
            let mut keyed: Vec<(usize, Vec<u8>)> = net.into_iter().enumerate().map(|(i, d)| (i + g.below(4) as usize, d)).collect();
            keyed.sort_by_key(|(at, _)| *at);
            let net: Vec<Vec<u8>> = keyed.into_iter().map(|(_, d)| d).collect();
            let mut r = Reassembly::new(4);
            let mut out = std::collections::BTreeSet::new();
            for d in &net {
                let Ok((h, p)) = parse(&k, d) else { continue };
                if let Some(f) = r.add(&h, p) {
                    assert_eq!(f, frames[h.seq as usize], "seed {seed}: frame {} not as sent", h.seq);
                    out.insert(h.seq);
                }
                assert!(r.pending() <= 4, "seed {seed}: more partial frames than the limit");
            }
            if !lossy {
                assert_eq!(out.len(), frames.len(), "seed {seed}: frames lost without loss");
            }
        }
    }
}
