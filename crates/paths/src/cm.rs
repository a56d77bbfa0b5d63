//! The channel-memory path (`--ft channel-memory`, MPICH-V1): no packet goes from rank to
//! rank. Every packet is deposited with its receiver's channel memory, a server that keeps
//! it and passes it on, and a rank takes its packets only from its own channel memory's
//! stream, in the order the server stored them. Ranks only need to reach the servers.
//!
//! Servers: `STEADFAST_CM_ADDRS` lists them; rank `r`'s stream is kept by server
//! `r % count`. The server side is in `steadfast-runtime` (`channel_memory`), the machine
//! that keeps the streams in `steadfast-logging` (`channel`).
//!
//! Who may talk to a server: a process that proves knowledge of the key derived from the
//! job key ([`key_of_job`]) by a keyed BLAKE3 challenge-response (each side proves it; the
//! key never crosses the wire; the client's proof covers the rank and incarnation it
//! claims).
//!
//! Wire: frames `u32 length (LE) | tag | fields`.
//! - client: `HELLO version u16, nonce [16], rank u32, incarnation u16, reads u8, from u64`;
//!   `PROOF mac [32]`; `DEPOSIT to u32, header [HDR_LEN], payload`; on the connection that
//!   reads the rank's stream, `RELEASE upto u64` (an image of the rank that read the stream
//!   up to that frame is kept: the server may drop the frames before it).
//! - server: `CHALLENGE nonce [16], mac [32]`; `READY`; `REFUSED reason (UTF-8)`;
//!   `DELIVER from u32, header [HDR_LEN], payload`.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::Duration;

use crate::{PacketSink, Path, PathCounters, PathError, RawHeader, SendStatus, HDR_LEN};

/// Protocol version spoken here.
pub const VERSION: u16 = 1;
/// Largest packet payload through a channel memory (the engine sends every message whole,
/// so this is also the largest message the mode carries in one piece).
pub const MAX_PAYLOAD: usize = 256 << 20;
/// Largest frame: a deposit or delivery of the largest payload.
pub const MAX_FRAME: usize = MAX_PAYLOAD + HDR_LEN + 16;
/// Bytes waiting for one server past which a send reports `Full`.
const OUT_LIMIT: usize = 64 << 20;
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);

pub const HELLO: u8 = 1;
pub const PROOF: u8 = 2;
pub const DEPOSIT: u8 = 3;
pub const RELEASE: u8 = 4;
pub const CHALLENGE: u8 = 11;
pub const READY: u8 = 12;
pub const REFUSED: u8 = 13;
pub const DELIVER: u8 = 14;

pub const ROLE_CLIENT: u8 = 1;
pub const ROLE_SERVER: u8 = 2;

/// The key of a job's channel memories, derived from the job key (every rank has it).
pub fn key_of_job(job_key: u64) -> [u8; 32] {
    blake3::derive_key("steadfast channel memory key v1", &job_key.to_le_bytes())
}

/// MAC of one side of the handshake: over the side's role, the version, both nonces and
/// the rank and incarnation the client claims.
pub fn handshake_mac(key: &[u8; 32], role: u8, client: &[u8; 16], server: &[u8; 16], rank: u32, incarnation: u16) -> [u8; 32] {
    let k = blake3::derive_key("steadfast channel memory handshake v1", key);
    let mut m = Vec::with_capacity(41);
    m.push(role);
    m.extend_from_slice(&VERSION.to_le_bytes());
    m.extend_from_slice(client);
    m.extend_from_slice(server);
    m.extend_from_slice(&rank.to_le_bytes());
    m.extend_from_slice(&incarnation.to_le_bytes());
    *blake3::keyed_hash(&k, &m).as_bytes()
}

/// A random nonce.
pub fn nonce() -> io::Result<[u8; 16]> {
    let mut n = [0u8; 16];
    getrandom::getrandom(&mut n).map_err(|e| io::Error::other(format!("random nonce: {e}")))?;
    Ok(n)
}

/// `len | tag | body`.
pub fn frame(tag: u8, body: &[&[u8]]) -> Vec<u8> {
    let len: usize = 1 + body.iter().map(|b| b.len()).sum::<usize>();
    let mut v = Vec::with_capacity(4 + len);
    v.extend_from_slice(&(len as u32).to_le_bytes());
    v.push(tag);
    for b in body {
        v.extend_from_slice(b);
    }
    v
}

/// Largest frame of the handshake (before the peer has proved the key, nothing larger is
/// read, so a stranger cannot make a server allocate much).
pub const MAX_HANDSHAKE_FRAME: usize = 256;

/// Reads one frame (tag, body), refusing empty and oversized ones.
pub fn read_frame(s: &mut impl Read) -> io::Result<(u8, Vec<u8>)> {
    read_frame_max(s, MAX_FRAME)
}

/// Reads one frame of at most `max` bytes.
pub fn read_frame_max(s: &mut impl Read, max: usize) -> io::Result<(u8, Vec<u8>)> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len)?;
    let len = u32::from_le_bytes(len) as usize;
    if len == 0 || len > max {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("channel memory frame of {len} bytes")));
    }
    let mut body = vec![0u8; len];
    s.read_exact(&mut body)?;
    let tag = body.remove(0);
    Ok((tag, body))
}

/// A connection to the first address `addr` (HOST:PORT) resolves to that answers.
pub fn connect_any(addr: &str, timeout: Duration) -> io::Result<TcpStream> {
    use std::net::ToSocketAddrs;
    let mut last = io::Error::new(io::ErrorKind::NotFound, format!("{addr}: no address"));
    for a in addr.to_socket_addrs()? {
        match TcpStream::connect_timeout(&a, timeout) {
            Ok(c) => return Ok(c),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// The complete `DELIVER` frames at the start of `inb`, each given to `each(from, header,
/// payload)`, which says whether to go on; a frame that is not a delivery is given as
/// `(None, None, body)` (and dropped by the caller). Returns the bytes consumed; a length
/// out of range is an error (the stream cannot be followed past it).
pub fn deliveries(inb: &[u8], mut each: impl FnMut(Option<u32>, Option<&RawHeader>, &[u8]) -> bool) -> Result<usize, PathError> {
    let mut at = 0;
    let mut more = true;
    while inb.len() - at >= 4 && more {
        let len = u32::from_le_bytes([inb[at], inb[at + 1], inb[at + 2], inb[at + 3]]) as usize;
        if len == 0 || len > MAX_FRAME {
            return Err(PathError::Io(io::Error::new(io::ErrorKind::InvalidData, format!("channel memory frame of {len} bytes"))));
        }
        if inb.len() - at < 4 + len {
            break;
        }
        let tag = inb[at + 4];
        let body = &inb[at + 5..at + 4 + len];
        at += 4 + len;
        if tag != DELIVER || body.len() < 4 + HDR_LEN {
            more = each(None, None, body);
            continue;
        }
        let from = u32::from_le_bytes([body[0], body[1], body[2], body[3]]);
        let mut hdr: RawHeader = [0; HDR_LEN];
        hdr.copy_from_slice(&body[4..4 + HDR_LEN]);
        more = each(Some(from), Some(&hdr), &body[4 + HDR_LEN..]);
    }
    Ok(at)
}

/// The rank a frame read by a server deposits for, if it is a well-formed deposit (the
/// packet follows the first 4 bytes of `body`).
pub fn deposit_to(tag: u8, body: &[u8]) -> Option<u32> {
    if tag != DEPOSIT || body.len() < 4 + HDR_LEN {
        return None;
    }
    Some(u32::from_le_bytes([body[0], body[1], body[2], body[3]]))
}

/// The place a `RELEASE` frame read by a server names, if it is one.
pub fn release_upto(tag: u8, body: &[u8]) -> Option<u64> {
    (tag == RELEASE).then(|| body.try_into().ok().map(u64::from_le_bytes)).flatten()
}

/// The fuzzing oracle for outside data of this module: `data` read as a server reads a
/// client (a hello, then frames) and as a rank reads its channel memory (deliveries).
/// Whatever decodes must encode back to the same bytes.
pub fn fuzz_decode(data: &[u8]) {
    let mut r = data;
    if let Ok((tag, body)) = read_frame_max(&mut r, MAX_HANDSHAKE_FRAME) {
        if let Some(h) = (tag == HELLO).then(|| Hello::decode(&body)).flatten() {
            let enc = h.encode();
            assert_eq!(&enc[5..], &body[..], "a hello does not survive encode");
        }
    }
    let mut r = data;
    while let Ok((tag, body)) = read_frame(&mut r) {
        if let Some(to) = deposit_to(tag, &body) {
            assert!(body.len() >= 4 + HDR_LEN && to.to_le_bytes() == body[..4]);
        }
        if let Some(upto) = release_upto(tag, &body) {
            assert_eq!(upto.to_le_bytes()[..], body[..]);
        }
    }
    let mut total = 0usize;
    let _ = deliveries(data, |_, _, p| {
        total += p.len();
        true
    });
    assert!(total <= data.len());
}

/// A client's hello, as the server reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hello {
    pub version: u16,
    pub nonce: [u8; 16],
    pub rank: u32,
    pub incarnation: u16,
    /// Reads its stream from this frame on (None: deposits only).
    pub reads_from: Option<u64>,
}

impl Hello {
    pub fn encode(&self) -> Vec<u8> {
        let reads = [u8::from(self.reads_from.is_some())];
        frame(
            HELLO,
            &[
                &self.version.to_le_bytes(),
                &self.nonce,
                &self.rank.to_le_bytes(),
                &self.incarnation.to_le_bytes(),
                &reads,
                &self.reads_from.unwrap_or(0).to_le_bytes(),
            ],
        )
    }

    pub fn decode(body: &[u8]) -> Option<Hello> {
        if body.len() != 2 + 16 + 4 + 2 + 1 + 8 {
            return None;
        }
        let version = u16::from_le_bytes(body[0..2].try_into().ok()?);
        let nonce: [u8; 16] = body[2..18].try_into().ok()?;
        let rank = u32::from_le_bytes(body[18..22].try_into().ok()?);
        let incarnation = u16::from_le_bytes(body[22..24].try_into().ok()?);
        let from = u64::from_le_bytes(body[25..33].try_into().ok()?);
        let reads_from = match body[24] {
            0 if from == 0 => None,
            1 => Some(from),
            _ => return None,
        };
        Some(Hello { version, nonce, rank, incarnation, reads_from })
    }
}

/// One connection to a channel memory server.
struct Conn {
    s: TcpStream,
    out: Vec<u8>,
    /// Bytes of `out` already written.
    sent: usize,
    inb: Vec<u8>,
}

impl Conn {
    fn connect(addr: &str, key: &[u8; 32], rank: u32, incarnation: u16, reads_from: Option<u64>) -> io::Result<Conn> {
        let mut s = connect_any(addr, HANDSHAKE_TIMEOUT)?;
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(HANDSHAKE_TIMEOUT))?;
        s.set_write_timeout(Some(HANDSHAKE_TIMEOUT))?;
        let ours = nonce()?;
        s.write_all(&Hello { version: VERSION, nonce: ours, rank, incarnation, reads_from }.encode())?;
        let (tag, body) = read_frame_max(&mut s, MAX_HANDSHAKE_FRAME)?;
        if tag == REFUSED {
            return Err(io::Error::new(io::ErrorKind::PermissionDenied, format!("channel memory {addr}: {}", String::from_utf8_lossy(&body))));
        }
        if tag != CHALLENGE || body.len() != 48 {
            return Err(io::Error::new(io::ErrorKind::InvalidData, format!("{addr}: not a channel memory of this version")));
        }
        let theirs: [u8; 16] = body[..16].try_into().map_err(io::Error::other)?;
        let expected = handshake_mac(key, ROLE_SERVER, &ours, &theirs, rank, incarnation);
        if blake3::Hash::from(expected) != blake3::Hash::from(<[u8; 32]>::try_from(&body[16..48]).map_err(io::Error::other)?) {
            return Err(io::Error::new(io::ErrorKind::PermissionDenied, format!("{addr}: the channel memory does not know this job's key")));
        }
        s.write_all(&frame(PROOF, &[&handshake_mac(key, ROLE_CLIENT, &ours, &theirs, rank, incarnation)]))?;
        let (tag, body) = read_frame_max(&mut s, MAX_HANDSHAKE_FRAME)?;
        match tag {
            READY => {}
            REFUSED => return Err(io::Error::new(io::ErrorKind::PermissionDenied, format!("channel memory {addr}: {}", String::from_utf8_lossy(&body)))),
            t => return Err(io::Error::new(io::ErrorKind::InvalidData, format!("{addr}: handshake answered with frame {t}"))),
        }
        s.set_nonblocking(true)?;
        Ok(Conn { s, out: Vec::new(), sent: 0, inb: Vec::new() })
    }

    /// Writes what it can without blocking.
    fn flush(&mut self) -> io::Result<()> {
        while self.sent < self.out.len() {
            match self.s.write(&self.out[self.sent..]) {
                Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "channel memory connection closed")),
                Ok(n) => self.sent += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if self.sent == self.out.len() {
            self.out.clear();
            self.sent = 0;
        } else if self.sent > (1 << 20) {
            self.out.drain(..self.sent);
            self.sent = 0;
        }
        Ok(())
    }

    fn pending(&self) -> usize {
        self.out.len() - self.sent
    }
}

/// The path of a rank in `--ft channel-memory`.
pub struct CmPath {
    rank: u32,
    incarnation: u16,
    key: [u8; 32],
    addrs: Vec<String>,
    conns: Vec<Option<Conn>>,
    /// Frames of this rank's stream taken so far (where an image of this process would
    /// start reading again).
    pub taken: u64,
    counters: PathCounters,
}

impl CmPath {
    /// Connects to the server that keeps this rank's stream and reads it from frame
    /// `reads_from` (0 for a process that starts from the beginning).
    /// `key`: the servers' key ([`key_of_job`] for the launcher's own servers).
    pub fn connect(rank: u32, incarnation: u16, key: [u8; 32], addrs: Vec<String>, reads_from: u64) -> Result<CmPath, PathError> {
        if addrs.is_empty() {
            return Err(PathError::Config("no channel memory servers (STEADFAST_CM_ADDRS)".into()));
        }
        let mut p = CmPath { rank, incarnation, key, conns: addrs.iter().map(|_| None).collect(), addrs, taken: reads_from, counters: PathCounters::default() };
        let home = p.server_of(rank);
        let c = Conn::connect(&p.addrs[home], &p.key, rank, incarnation, Some(reads_from)).map_err(|e| PathError::Config(format!("channel memory {}: {e}", p.addrs[home])))?;
        p.conns[home] = Some(c);
        Ok(p)
    }

    fn server_of(&self, rank: u32) -> usize {
        rank as usize % self.addrs.len()
    }

    fn conn_for(&mut self, peer: u32) -> Result<&mut Conn, PathError> {
        let i = self.server_of(peer);
        if self.conns[i].is_none() {
            let c = Conn::connect(&self.addrs[i], &self.key, self.rank, self.incarnation, None).map_err(|e| PathError::Config(format!("channel memory {}: {e}", self.addrs[i])))?;
            self.conns[i] = Some(c);
        }
        self.conns[i].as_mut().ok_or_else(|| PathError::Config("channel memory connection".into()))
    }
}

fn io_err(e: io::Error) -> PathError {
    PathError::Io(e)
}

impl Path for CmPath {
    fn send(&mut self, peer: u32, hdr: &RawHeader, payload: &[u8]) -> Result<SendStatus, PathError> {
        if payload.len() > MAX_PAYLOAD {
            return Err(PathError::Config(format!("a packet of {} bytes is larger than a channel memory takes ({MAX_PAYLOAD})", payload.len())));
        }
        let c = self.conn_for(peer)?;
        if c.pending() > OUT_LIMIT {
            c.flush().map_err(io_err)?;
            if c.pending() > OUT_LIMIT {
                return Ok(SendStatus::Full);
            }
        }
        let f = frame(DEPOSIT, &[&peer.to_le_bytes(), hdr, payload]);
        c.out.extend_from_slice(&f);
        c.flush().map_err(io_err)?;
        self.counters.packets_sent += 1;
        self.counters.bytes_sent += payload.len() as u64;
        Ok(SendStatus::Done)
    }

    fn poll(&mut self, sink: &mut dyn PacketSink) -> Result<usize, PathError> {
        for c in self.conns.iter_mut().flatten() {
            if c.pending() > 0 {
                c.flush().map_err(io_err)?;
            }
        }
        let home = self.server_of(self.rank);
        let Some(c) = self.conns[home].as_mut() else { return Ok(0) };
        let mut buf = [0u8; 64 << 10];
        loop {
            match c.s.read(&mut buf) {
                Ok(0) => return Err(PathError::Io(io::Error::new(io::ErrorKind::UnexpectedEof, "the channel memory closed the connection"))),
                Ok(n) => {
                    c.inb.extend_from_slice(&buf[..n]);
                    if n < buf.len() {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(io_err(e)),
            }
        }
        let counters = &mut self.counters;
        let taken = &mut self.taken;
        let mut n = 0;
        if !sink.wants_more() {
            return Ok(0);
        }
        let at = deliveries(&c.inb, |from, hdr, payload| {
            match (from, hdr) {
                (Some(from), Some(hdr)) => {
                    *taken += 1;
                    counters.packets_received += 1;
                    counters.bytes_received += payload.len() as u64;
                    sink.packet(from, hdr, payload);
                    n += 1;
                }
                _ => counters.frames_dropped += 1,
            }
            sink.wants_more()
        })?;
        c.inb.drain(..at);
        Ok(n)
    }

    fn max_payload(&self) -> usize {
        MAX_PAYLOAD
    }

    fn wait(&mut self, timeout: Duration) -> Result<(), PathError> {
        let home = self.server_of(self.rank);
        // A frame read already and not yet handed over does not wake a poll on the socket.
        if let Some(c) = &self.conns[home] {
            if c.inb.len() >= 4 {
                let len = u32::from_le_bytes([c.inb[0], c.inb[1], c.inb[2], c.inb[3]]) as usize;
                if c.inb.len() >= 4 + len {
                    return Ok(());
                }
            }
        }
        let mut fds: Vec<libc::pollfd> = Vec::new();
        for (i, c) in self.conns.iter().enumerate() {
            let Some(c) = c else { continue };
            let mut events = 0;
            if i == home {
                events |= libc::POLLIN;
            }
            if c.pending() > 0 {
                events |= libc::POLLOUT;
            }
            if events != 0 {
                fds.push(libc::pollfd { fd: c.s.as_raw_fd(), events, revents: 0 });
            }
        }
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: fds is a valid array of pollfd for the call's duration.
        unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        Ok(())
    }

    fn backlog(&self) -> usize {
        self.conns.iter().flatten().filter(|c| c.pending() > 0).count()
    }

    fn counters(&self) -> PathCounters {
        self.counters
    }

    fn counters_by_path(&self) -> Vec<(&'static str, PathCounters)> {
        vec![("channel-memory", self.counters)]
    }

    fn stream_position(&self) -> Option<u64> {
        Some(self.taken)
    }

    fn release_stream(&mut self, upto: u64) -> Result<(), PathError> {
        let home = self.server_of(self.rank);
        let Some(c) = self.conns[home].as_mut() else { return Ok(()) };
        c.out.extend_from_slice(&frame(RELEASE, &[&upto.to_le_bytes()]));
        c.flush().map_err(io_err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hello_roundtrips_and_rejects_noncanonical_bytes() {
        for reads_from in [None, Some(0), Some(77)] {
            let h = Hello { version: VERSION, nonce: [7; 16], rank: 3, incarnation: 2, reads_from };
            let f = h.encode();
            let (tag, body) = read_frame(&mut &f[..]).unwrap();
            assert_eq!(tag, HELLO);
            assert_eq!(Hello::decode(&body), Some(h));
            for n in 0..body.len() {
                assert_eq!(Hello::decode(&body[..n]), None);
            }
            let mut bad = body.clone();
            bad[24] = 2;
            assert_eq!(Hello::decode(&bad), None);
        }
        // Reads nothing yet says where from: not canonical.
        let mut b = Hello { version: VERSION, nonce: [0; 16], rank: 0, incarnation: 0, reads_from: None }.encode();
        let last = b.len() - 1;
        b[last] = 1;
        let (_, body) = read_frame(&mut &b[..]).unwrap();
        assert_eq!(Hello::decode(&body), None);
    }

    #[test]
    fn a_handshake_frame_is_small() {
        let mut b = Vec::new();
        b.extend_from_slice(&((MAX_HANDSHAKE_FRAME + 1) as u32).to_le_bytes());
        b.resize(4 + MAX_HANDSHAKE_FRAME + 1, 0);
        assert!(read_frame_max(&mut &b[..], MAX_HANDSHAKE_FRAME).is_err());
        assert!(read_frame(&mut &b[..]).is_ok());
    }

    #[test]
    fn oversized_and_empty_frames_are_refused() {
        let mut b = Vec::new();
        b.extend_from_slice(&0u32.to_le_bytes());
        assert!(read_frame(&mut &b[..]).is_err());
        let mut b = Vec::new();
        b.extend_from_slice(&((MAX_FRAME + 1) as u32).to_le_bytes());
        assert!(read_frame(&mut &b[..]).is_err());
    }

    #[test]
    fn the_mac_binds_role_rank_and_incarnation() {
        let k = key_of_job(42);
        let a = handshake_mac(&k, ROLE_CLIENT, &[1; 16], &[2; 16], 3, 0);
        assert_ne!(a, handshake_mac(&k, ROLE_SERVER, &[1; 16], &[2; 16], 3, 0));
        assert_ne!(a, handshake_mac(&k, ROLE_CLIENT, &[1; 16], &[2; 16], 4, 0));
        assert_ne!(a, handshake_mac(&k, ROLE_CLIENT, &[1; 16], &[2; 16], 3, 1));
        assert_ne!(a, handshake_mac(&key_of_job(43), ROLE_CLIENT, &[1; 16], &[2; 16], 3, 0));
    }
}
