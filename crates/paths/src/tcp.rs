//! TCP path: one connection per pair of ranks, opened on first use and carrying data both
//! ways.
//!
//! Each rank listens on one address (published through the bootstrap). The rank that
//! sends first connects and the two prove to each other that they know the job key,
//! without sending it, and without waiting for each other (a sent message must leave even
//! if its sender never calls MPI again, so the connector cannot wait for a challenge):
//!
//! - each rank draws a random 16-byte **listener nonce** when it binds and publishes it
//!   with its address (`ip:port#nonce`, see [`TcpPath::contact`]);
//! - the connector sends `CONNECT` with its rank, a fresh 16-byte nonce and a MAC over
//!   both ranks, its nonce and the acceptor's listener nonce; its frames follow at once;
//! - the acceptor checks the MAC and that it never accepted this connector nonce before
//!   (so a recorded connection cannot be replayed to it), then answers `ACCEPT` or
//!   `ACCEPT_AFTER_DRAIN` (below) with a MAC over the same transcript, which the connector
//!   checks before it reads anything else from the connection.
//!
//! The MAC is keyed BLAKE3 under a key derived from the job key; each message's kind is
//! MACed, so an answer cannot pass for a connect. A connection whose handshake fails is
//! counted and dropped: nothing from it is delivered.
//!
//! Why one connection for both directions: with a connection per direction each data
//! segment is answered by a bare ACK segment, which the loopback device processes like
//! any other packet. A bare C ping-pong over loopback measured 9.4 µs per hop with two
//! one-way connections and 6.5 µs with one, where the ACK rides on the reply.
//!
//! Both ranks may connect at the same moment; neither waits for the other, since a sent
//! message must leave even if its sender never calls MPI again. The connection opened by the
//! lower rank wins: when the higher rank accepts it while it has its own, it answers
//! `ACCEPT_AFTER_DRAIN`, moves what it has not written yet behind that answer, and closes the
//! writing side of its own connection. The lower rank reads the higher rank's frames on the
//! winning connection only after its own end of the other one reached end-of-file, so the
//! frames of one direction keep their order across the switch.
//!
//! Frames are `[u32 len][u32 seq][u32 ack][u32 pcrc][u32 hcrc][header][payload][u32 fcrc]`:
//! `len` counts header and payload (bit 31 set = sent without checksum,
//! `STEADFAST_CHECKSUM=tcp=none`; the CRCs, `seq` and `ack` are then 0), `seq` numbers the
//! frames to one peer, `ack` acknowledges the peer's frames (every one numbered below it was
//! verified and delivered), `pcrc` is the CRC32C of the first three words, `hcrc` continues
//! it over the header and `fcrc` continues `hcrc` over the payload. A control frame has
//! bit 30 of `len` set: an acknowledgment is the first 16 bytes alone; a *sync frame*
//! ([`SYNC_LEN`] bytes: those 16, a magic number, flags, request numbers, the writer's next
//! frame number and a CRC32C of it all) carries repair requests and their answers. TCP's
//! own 16-bit checksum is computed by the NIC or kernel and does not cover the path between
//! memory and NIC; this one is end to end.
//!
//! **Damage is repaired, anywhere in a frame.** The sender keeps every checksummed frame as
//! it went out until the peer's cumulative acknowledgment covers it; acknowledgments ride on
//! the frames going back, and a receiver with nothing to send acknowledges on its own every
//! [`ACK_EVERY_FRAMES`] frames or [`ACK_EVERY_BYTES`] bytes.
//! - A receiver that finds the header or payload of a frame damaged drops it and sends a
//!   sync frame asking for the frames from its number on; it drops what follows until that
//!   frame came again intact. The sender answers with a sync frame (echoing the request's
//!   number) followed by that frame and every later kept one (go-back-N: the stream keeps
//!   its order, and a repeat is recognised by its number).
//! - A damaged prefix (length word, number, acknowledgment: caught by `pcrc` at once, so
//!   the receiver does not wait for a frame that never completes), or a damaged control
//!   frame, loses the frame boundaries. The receiver asks for a resend from the first
//!   frame it has not delivered, saying it is hunting, and throws bytes away until it finds
//!   an intact sync frame: every sync frame starts at a frame boundary, and the answer to
//!   the request starts with one, so from there the stream is followed again. Since the
//!   receiver may have thrown away requests and acknowledgments of the peer's, the answer
//!   carries the peer's current acknowledgment and, when a request of the peer's is
//!   waiting, that request again.
//! - A request no answer has begun to (its sync frame, or the one starting the answer,
//!   was damaged or thrown away) is sent again after [`REPEAT_FIRST`], then after twice as
//!   long each time, up to [`REPEAT_MAX`].
//!
//! A frame still damaged after [`DAMAGE_RUN_LIMIT`] requests for it (or as many lost frame
//! boundaries without a frame delivered in between) is reported as [`PathError::Corrupt`]
//! (the MPI call fails, nothing damaged is delivered): damage that survives that many fresh
//! copies is not transient.
//!
//! The payload is checksummed in the passes over it that happen anyway:
//! - **Sender**: the frame is built once, the payload checksummed in the copy into it,
//!   and written from there with one `sendmsg` (and kept for a resend). What the socket
//!   does not take is queued. Rendezvous data sent with [`Path::send_held`] goes out from
//!   the caller's buffer in pieces of up to [`PIECE`] bytes, each checksummed right before
//!   the `sendmsg` that copies it into the kernel, and only its prefix, header and address
//!   are kept (the engine keeps the buffer until the receiver's FIN). Without checksums
//!   nothing is kept and the payload goes out from the caller's buffer directly.
//! - **Receiver**: `pcrc` is checked as soon as the prefix is in (so a damaged length word
//!   is caught at once instead of waiting for bytes that never come), and `hcrc` before the
//!   header is trusted. The payload check is handed to the sink with the frame
//!   ([`PacketSink::packet_unverified`]), which fuses it into its copy to the final
//!   destination and lets nothing take effect unless it matches.
//!
//! Strangers: the kernel holds silent connections ([`defer_accept`]); an accepted
//! connection gets a small buffer until its hello is good, is closed (descriptor and slot
//! released) when the hello is wrong or missing after [`HELLO_TIMEOUT`], and at most
//! [`MAX_PENDING_HELLOS`] wait at once (the oldest goes first; hellos are read before more
//! connections are accepted). `accept` failing (descriptor limit) is logged, never
//! returned to an MPI call.

use std::io::{ErrorKind, IoSlice, Read, Write};

use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::Duration;

use crate::checksum::Checksum;
use crate::fault::Injector;
use crate::{PacketSink, Path, PathCounters, PathError, RawHeader, SendStatus, HDR_LEN};

const HELLO_MAGIC: u64 = 0x5354_4446_5443_5032; // "STDFTCP2"
/// Every handshake message: `[magic u64][rank u32][kind u32][nonce 16][mac 32]`.
const HELLO_LEN: usize = 64;
/// Handshake kinds: the connector's introduction and the acceptor's two answers.
const HELLO_CONNECT: u32 = 0;
const HELLO_ACCEPT: u32 = 1;
/// "My frames on the connection I opened come first: read it to its end before these."
const HELLO_ACCEPT_AFTER_DRAIN: u32 = 2;
/// Largest payload of one frame; larger messages are cut into frames by the message layer.
pub const TCP_MAX_PAYLOAD: usize = 512 << 10;
/// Bytes a connection may hold unsent in user space before `send` answers Full.
const OUT_LIMIT: usize = 4 << 20;
const IN_BUF: usize = 2 * (TCP_MAX_PAYLOAD + HDR_LEN + FRAME_PREFIX + TRAILER);
/// In front of every data frame: length word, sequence number, acknowledgment, `pcrc`
/// and `hcrc` (see the module docs).
const FRAME_PREFIX: usize = 20;
/// A control frame (acknowledgment or repair request) is the first 16 bytes of a prefix.
const CTRL_LEN: usize = 16;
/// Bit of the length word: this frame carries no checksum.
const NO_CRC: u32 = 1 << 31;
/// Bit of the length word: a control frame; the low bits say which.
const CTRL: u32 = 1 << 30;
/// Control frame: only the acknowledgment field means something.
const CTRL_ACK: u32 = 1;
/// Control frame kind 2 was a repair request by number alone; requests are sync frames now.
/// Control frame: a sync frame ([`SYNC_LEN`] bytes, see [`sync_frame`]): a repair request,
/// its answer, or both, and a mark a receiver that lost the frame boundaries finds again.
const CTRL_SYNC: u32 = 3;
/// Length of a sync frame: the 16-byte control prefix, then `[magic u64][flags u32]
/// [request u32][echo u32][next u32][crc u32]`, `crc` being the CRC32C of all before it.
const SYNC_LEN: usize = 44;
/// Its length word, the first thing a receiver hunting for it looks for.
const SYNC_WORD: u32 = CTRL | CTRL_SYNC;
const SYNC_MAGIC: u64 = 0x434e_5953_4644_5453; // "STDFSYNC"
/// Sync flag: "resend from the frame numbered in the sequence field on" (request `request`).
const SYNC_REQUEST: u32 = 1;
/// Sync flag: the writer lost the frame boundaries of our stream and threw bytes away
/// while it looked for them again: a request of ours may have been among them.
const SYNC_HUNTED: u32 = 2;
/// Sync flag: what follows answers the request numbered `echo` (the kept frames from the
/// number it asked for on, then new ones); `next` is the number of our next new frame.
const SYNC_ANSWER: u32 = 4;
/// New repair requests for one frame after which the damage is reported, not repaired
/// (damage that survives this many fresh copies is not transient).
const DAMAGE_RUN_LIMIT: u32 = 16;
/// A repair request not answered within this time is sent again, the wait doubling each
/// time up to [`REPEAT_MAX`]. On TCP a request (or the mark that starts its answer) is lost
/// only when the other side threw it away while it looked for frame boundaries of its own.
const REPEAT_FIRST: Duration = Duration::from_millis(20);
const REPEAT_MAX: Duration = Duration::from_secs(1);
/// A receiver acknowledges on its own (without a frame of its own to carry it) after
/// this many frames or bytes.
const ACK_EVERY_FRAMES: u32 = 64;
const ACK_EVERY_BYTES: usize = 1 << 20;
/// Bytes or frames a sender keeps for resending before `send` answers Full.
const KEEP_LIMIT_BYTES: usize = 8 << 20;
const KEEP_LIMIT_FRAMES: usize = 1024;
/// Frame CRC after the payload.
const TRAILER: usize = 4;
/// Largest piece of a payload checksummed and written by one `sendmsg`. A whole frame
/// (512 KiB) still fits the L2 cache, so the kernel's copy right after the checksum
/// reads cache-hot data. Smaller pieces would let the first bytes leave earlier, but
/// each costs one more `sendmsg` (3–4 µs of CPU on the test VM), which measured worse
/// than the ~12 µs of checksum they hide once per message (see
/// docs/performance-reliability.md).
pub const PIECE: usize = TCP_MAX_PAYLOAD;

/// The key that MACs handshake messages, derived from the job key.
#[derive(Clone)]
pub(crate) struct HandshakeKey([u8; 32]);

impl HandshakeKey {
    pub(crate) fn from_job_key(job_key: u64) -> HandshakeKey {
        HandshakeKey(blake3::derive_key("steadfast tcp handshake v1", &job_key.to_le_bytes()))
    }
}

/// The transcript of one connection's handshake (see the module docs).
#[derive(Clone, Copy, Default)]
struct Handshake {
    /// Ranks of the connector and the acceptor.
    rank_c: u32,
    rank_a: u32,
    /// The connector's fresh nonce and the acceptor's listener nonce.
    nonce_c: [u8; 16],
    nonce_a: [u8; 16],
}

/// What the acceptor side of handshakes needs: the key, our listener nonce and the
/// connector nonces accepted so far (a replayed connect is refused).
struct Auth {
    key: HandshakeKey,
    nonce: [u8; 16],
    seen: std::collections::HashSet<[u8; 16]>,
}

impl Handshake {
    /// MAC of a message of `kind` over the transcript (ranks and both nonces).
    fn mac(&self, key: &HandshakeKey, kind: u32) -> blake3::Hash {
        let mut m = [0u8; 44];
        m[0..4].copy_from_slice(&kind.to_le_bytes());
        m[4..8].copy_from_slice(&self.rank_c.to_le_bytes());
        m[8..12].copy_from_slice(&self.rank_a.to_le_bytes());
        m[12..28].copy_from_slice(&self.nonce_c);
        m[28..44].copy_from_slice(&self.nonce_a);
        blake3::keyed_hash(&key.0, &m)
    }

    /// A handshake message from `rank` (a connect carries the connector's nonce).
    fn message(&self, key: &HandshakeKey, rank: u32, kind: u32) -> [u8; HELLO_LEN] {
        let mut h = [0u8; HELLO_LEN];
        h[0..8].copy_from_slice(&HELLO_MAGIC.to_le_bytes());
        h[8..12].copy_from_slice(&rank.to_le_bytes());
        h[12..16].copy_from_slice(&kind.to_le_bytes());
        if kind == HELLO_CONNECT {
            h[16..32].copy_from_slice(&self.nonce_c);
        }
        h[32..64].copy_from_slice(self.mac(key, kind).as_bytes());
        h
    }

    /// True when `m` carries the right MAC for `kind` (compared in constant time).
    fn verify(&self, key: &HandshakeKey, kind: u32, m: &[u8]) -> bool {
        let Ok(mac) = <[u8; 32]>::try_from(&m[32..64]) else { return false };
        self.mac(key, kind) == blake3::Hash::from(mac)
    }
}

/// A fresh nonce from the kernel.
fn nonce() -> Result<[u8; 16], PathError> {
    let mut n = [0u8; 16];
    getrandom::getrandom(&mut n).map_err(|e| PathError::Tcp(format!("random nonce: {e}")))?;
    Ok(n)
}

/// The fields of a handshake message.
struct HelloMsg {
    magic: u64,
    rank: u32,
    kind: u32,
    nonce: [u8; 16],
}

fn read_hello(b: &[u8]) -> HelloMsg {
    HelloMsg {
        magic: u64::from_le_bytes(b[0..8].try_into().unwrap_or_default()),
        rank: u32::from_le_bytes(b[8..12].try_into().unwrap_or_default()),
        kind: u32::from_le_bytes(b[12..16].try_into().unwrap_or_default()),
        nonce: b[16..32].try_into().unwrap_or_default(),
    }
}

/// Bytes waiting to be written, in order.
#[derive(Default)]
struct Out {
    /// `queue[sent..]` is still to be written.
    queue: Vec<u8>,
    sent: usize,
    /// Stream offset of `queue[0]` (bytes removed from the front so far).
    base: u64,
    /// Stream offsets where frames that went to the queue whole begin (only those: a frame
    /// partly written has no boundary left to cut at).
    starts: std::collections::VecDeque<u64>,
}

impl Out {
    fn pending(&self) -> usize {
        self.queue.len() - self.sent
    }

    /// Drop written bytes from the front once they are half of the queue (amortized:
    /// every byte is moved at most once on average).
    fn compact(&mut self) {
        if self.sent == self.queue.len() {
            self.written_all();
        } else if self.sent > self.queue.len() / 2 {
            self.queue.drain(..self.sent);
            self.base += self.sent as u64;
            self.sent = 0;
            while self.starts.front().is_some_and(|&s| s < self.base) {
                self.starts.pop_front();
            }
        }
    }

    /// Everything queued was written.
    fn written_all(&mut self) {
        self.base += self.queue.len() as u64;
        self.queue.clear();
        self.sent = 0;
        self.starts.clear();
    }

    /// A frame is about to be written: if it goes to the queue whole, note where it begins.
    fn frame_start(&mut self) {
        if self.pending() > 0 {
            self.starts.push_back(self.base + self.queue.len() as u64);
        }
    }

    /// Drops what is queued from the first frame not yet begun on (the receiver asked for
    /// a resend from an earlier one: it would throw those copies away). Returns whether
    /// anything was dropped.
    fn drop_unsent_frames(&mut self) -> bool {
        let written = self.base + self.sent as u64;
        while self.starts.front().is_some_and(|&s| s < written) {
            self.starts.pop_front();
        }
        let Some(&first) = self.starts.front() else { return false };
        self.queue.truncate((first - self.base) as usize);
        self.starts.clear();
        true
    }

    /// Writes `parts` to `stream` now (nothing is queued, so order is kept) and queues
    /// what the socket does not take.
    fn write_or_queue(&mut self, stream: &TcpStream, peer: u32, parts: &[&[u8]]) -> Result<(), PathError> {
        let written = if self.pending() == 0 {
            let iov: Vec<IoSlice<'_>> = parts.iter().map(|p| IoSlice::new(p)).collect();
            loop {
                match send_vectored(stream, &iov) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break 0,
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(e) => return Err(PathError::PeerLost(peer, format!("write: {e}"))),
                }
            }
        } else {
            0
        };
        let mut skip = written;
        for part in parts {
            if skip >= part.len() {
                skip -= part.len();
                continue;
            }
            self.compact();
            self.queue.extend_from_slice(&part[skip..]);
            skip = 0;
        }
        Ok(())
    }
}

/// One TCP connection to a peer, either direction.
struct Conn {
    /// `None` once the connection is closed: its descriptor is released at once (the
    /// slot stays, so epoll tokens are never reused).
    stream: Option<TcpStream>,
    open: bool,
    /// When an accepted connection arrived; it is closed if no valid hello follows
    /// within [`HELLO_TIMEOUT`].
    accepted_at: Option<std::time::Instant>,
    /// Known from the start on connections we opened, from the hello on accepted ones.
    peer: Option<u32>,
    /// We opened it (the first thing to read is the acceptor's answer).
    opened: bool,
    /// The handshake is complete: the peer proved it knows the job key.
    greeted: bool,
    hs: Handshake,
    /// Frames from the peer wait until its other connection to us reached end-of-file
    /// (answer `ACCEPT_AFTER_DRAIN`).
    gated: bool,
    /// Close the writing side once `out` is empty (the peer's connection replaced it).
    finish: bool,
    /// A frame prefix failed its check: the frame boundaries are lost, and bytes are
    /// thrown away until a sync frame (which the peer writes when asked) is found.
    hunting: bool,
    /// Fault injection (`bus`): the buffer offset of the frame the die was cast for, and
    /// the offset in it and bit of a flip still to make once the frame is complete.
    bus: Option<(usize, Option<(usize, u8)>)>,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    out: Out,
}

impl Conn {
    fn new(stream: TcpStream, peer: Option<u32>, opened: bool) -> Conn {
        Conn {
            hs: Handshake::default(),
            stream: Some(stream),
            open: true,
            accepted_at: (!opened).then(std::time::Instant::now),
            peer,
            opened,
            greeted: false,
            gated: false,
            finish: false,
            hunting: false,
            bus: None,
            // An accepted connection gets its full buffer only once its hello is good:
            // strangers cost a few bytes each, not a megabyte.
            buf: vec![0; if opened { IN_BUF } else { HELLO_LEN }],
            start: 0,
            end: 0,
            out: Out::default(),
        }
    }
}

/// Which connection carries what we send to one peer.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Link {
    /// Nothing sent or accepted yet.
    Idle,
    /// Frames go to this connection.
    Ready(usize),
    /// The peer's connection broke (it died) or it was reported failed: what was queued
    /// for it is dropped and sends fail.
    Lost,
}

struct Peer {
    addr: Option<SocketAddr>,
    /// The peer's listener nonce (published with its address).
    nonce: [u8; 16],
    link: Link,
    /// A connection the peer opened to us, other than the link, reached end-of-file.
    other_done: bool,
    /// Frames to the peer kept until it acknowledged them.
    tx: Tx,
    /// Where the peer's frames to us stand.
    rx: Rx,
}

impl Peer {
    fn new(addr: Option<SocketAddr>, nonce: [u8; 16]) -> Peer {
        Peer { addr, nonce, link: Link::Idle, other_done: false, tx: Tx::default(), rx: Rx::default() }
    }
}

/// Send side of the repair protocol for one peer: every checksummed frame is numbered
/// and kept, as it went out, until the peer's cumulative acknowledgment covers it.
#[derive(Default)]
struct Tx {
    /// Number of the next frame.
    next: u32,
    /// Frames not acknowledged yet, oldest first.
    kept: std::collections::VecDeque<Kept>,
    kept_bytes: usize,
    /// Buffers of acknowledged frames, reused for new ones (allocating a large frame
    /// anew costs page faults every time), at most `KEEP_LIMIT_BYTES` of them.
    spare: Vec<Vec<u8>>,
    spare_bytes: usize,
}

impl Tx {
    /// Drops the frames numbered before `upto` (the peer verified and delivered them).
    fn acknowledged(&mut self, upto: u32) {
        while let Some(k) = self.kept.front() {
            if (k.seq.wrapping_sub(upto) as i32) >= 0 {
                break;
            }
            if let Some(Kept { frame: f, .. }) = self.kept.pop_front() {
                self.kept_bytes -= f.len();
                if self.spare_bytes + f.capacity() <= KEEP_LIMIT_BYTES {
                    self.spare_bytes += f.capacity();
                    self.spare.push(f);
                }
            }
        }
    }
}

/// A frame kept for resending.
struct Kept {
    seq: u32,
    /// The whole frame, or with `by_ref` its prefix and header only.
    frame: Vec<u8>,
    /// Payload the caller keeps until the peer confirmed the message ([`Path::send_held`]):
    /// address, length and the frame CRC.
    by_ref: Option<(usize, usize, u32)>,
}

/// Payloads at least this long sent with [`Path::send_held`] are kept by reference.
const HELD_MIN: usize = 4096;

/// Receive side of the repair protocol for one peer.
#[derive(Default)]
struct Rx {
    /// Number of the next frame to deliver: every earlier one was verified and delivered.
    next: u32,
    /// Delivered since the last acknowledgment we sent.
    unacked_frames: u32,
    unacked_bytes: usize,
    /// New repair requests since a frame was last delivered.
    damage_run: u32,
    /// A repair request is out: frames after the damaged one are not delivered until it
    /// came again intact.
    awaiting: bool,
    /// Number of the latest repair request (a repeat keeps it; an answer echoes it).
    request: u32,
    /// The answer to `request` started arriving (its sync frame was read).
    answered: bool,
    /// When the request is sent again if `awaiting` still holds, and the wait after that.
    repeat_at: Option<std::time::Instant>,
    backoff: Duration,
}

impl Rx {
    /// A frame was delivered, or the peer said nothing is missing: the request is over.
    fn repaired(&mut self) {
        self.awaiting = false;
        self.damage_run = 0;
        self.repeat_at = None;
    }

    /// Something from the peer was lost (a damaged frame, or bytes thrown away while
    /// hunting for frame boundaries): ask for the frames from `next` on. A new request,
    /// unless one is out that no answer has begun to: the peer answers that one from the
    /// same number. Err once the damage outlived [`DAMAGE_RUN_LIMIT`] requests.
    fn lost(&mut self) -> Result<(), u32> {
        if !self.awaiting || self.answered {
            self.request = self.request.wrapping_add(1);
            self.answered = false;
            self.damage_run += 1;
            if self.damage_run > DAMAGE_RUN_LIMIT {
                return Err(self.damage_run);
            }
        }
        self.awaiting = true;
        self.backoff = REPEAT_FIRST;
        self.repeat_at = Some(std::time::Instant::now() + REPEAT_FIRST);
        Ok(())
    }
}

/// What parsing found that the path must act on after it (it needs the connections).
enum Repair {
    /// The peer acknowledged our frames before this number.
    Acked(u32, u32),
    /// The peer asks us to resend from frame `from` on (its request `id`; `hunted`: it
    /// threw bytes of ours away, so a request of ours may be lost).
    Answer { peer: u32, from: u32, id: u32, hunted: bool },
    /// Ask the peer to resend from the next frame we miss on (`hunted` as above).
    Request(u32, bool),
    /// Acknowledge what we delivered from the peer.
    Acknowledge(u32),
}

/// epoll token of the listener; connections use their index + 1.
const LISTENER_TOKEN: u64 = 0;

/// TCP path for the ranks of one job.
pub struct TcpPath {
    rank: u32,
    auth: Auth,
    listener: TcpListener,
    /// One epoll set over the listener and the connections: an idle poll is one syscall.
    epfd: std::os::fd::OwnedFd,
    ready: Vec<libc::epoll_event>,
    peers: Vec<Peer>,
    /// Slots are never reused, so an epoll token always names the same connection.
    conns: Vec<Conn>,
    counters: PathCounters,
    checksum: Checksum,
    faults: Option<Injector>,
    /// Damage found while reading, reported by the next `poll`.
    corrupt: Option<(u32, String)>,
    /// Polls since the last `epoll_wait` (see [`TcpPath::poll`]).
    polls: u32,
    /// `accept` failures (descriptor limit, resets): logged, never returned to a caller.
    accept_errors: u64,
    hello_timeout: Duration,
    /// Slots of strangers' closed connections, free for the next accepted one.
    free: Vec<usize>,
    /// Repair-protocol actions found while parsing, done right after.
    repairs: Vec<Repair>,
    /// Some peer may have a repair request out (see [`TcpPath::repeat_requests`]).
    timers: bool,
    /// Hellos from ranks below this are accepted even past the peer table, which then
    /// grows (a path between worlds of one job, whose processes come and go at run time).
    accept_below: usize,
}

/// Asks the kernel to hand over connections only once they sent data (a peer's hello
/// follows its connect at once; a silent stranger waits in the kernel, not in our
/// descriptor table). Best effort: without it the budget and timeout still apply.
pub fn defer_accept(listener: &TcpListener, secs: u32) {
    let secs = secs as libc::c_int;
    // SAFETY: setsockopt with a valid int option value on our own socket.
    unsafe {
        libc::setsockopt(
            listener.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_DEFER_ACCEPT,
            (&secs as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

/// Seconds the kernel holds a connection that sent nothing before handing it over.
const DEFER_ACCEPT_SECS: u32 = 2;
/// An accepted connection that sends no valid hello for this long is closed.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);
/// At most this many accepted connections wait for their hello at once; past it the
/// oldest is closed, so strangers cannot hold descriptors a rank needs.
const MAX_PENDING_HELLOS: usize = 32;

/// With at most this many open connections, `poll` asks `poll(2)` about them directly
/// instead of `epoll_wait` (no ready-list bookkeeping; measured a little faster than epoll
/// for a ping-pong, and level with reading every connection blindly, which holds the
/// socket lock against the kernel's delivery on every idle poll).
const DIRECT_READ_MAX: usize = 4;
/// Even then, every this many polls go through epoll (new connections on the listener).
const EPOLL_EVERY: u32 = 64;

impl TcpPath {
    /// Listen on `bind` (e.g. `127.0.0.1:0`) for a job of `nranks` ranks.
    pub fn bind(bind: &str, rank: u32, nranks: u32, job_key: u64) -> Result<TcpPath, PathError> {
        let listener = TcpListener::bind(bind).map_err(|e| PathError::Tcp(format!("listen on {bind}: {e}")))?;
        listener.set_nonblocking(true)?;
        // SAFETY: epoll_create1 returns a new descriptor or -1.
        let raw = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if raw < 0 {
            return Err(PathError::Io(std::io::Error::last_os_error()));
        }
        // SAFETY: raw is a fresh descriptor we own.
        let epfd = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(raw) };
        epoll_add(&epfd, listener.as_raw_fd(), LISTENER_TOKEN)?;
        defer_accept(&listener, DEFER_ACCEPT_SECS);
        Ok(TcpPath {
            rank,
            auth: Auth { key: HandshakeKey::from_job_key(job_key), nonce: nonce()?, seen: Default::default() },
            listener,
            epfd,
            ready: vec![libc::epoll_event { events: 0, u64: 0 }; 64],
            peers: (0..nranks).map(|_| Peer::new(None, [0; 16])).collect(),
            conns: Vec::new(),
            counters: PathCounters::default(),
            checksum: Checksum::Crc32c,
            faults: None,
            corrupt: None,
            polls: 0,
            accept_errors: 0,
            hello_timeout: HELLO_TIMEOUT,
            free: Vec::new(),
            repairs: Vec::new(),
            timers: false,
            accept_below: 0,
        })
    }

    /// Accept connections from any rank below `n`, growing the peer table as they come
    /// (processes that join the job at run time).
    pub fn accept_ranks_below(&mut self, n: u32) {
        self.accept_below = n as usize;
    }

    /// Makes room for peers up to `peer`.
    fn ensure_peer(&mut self, peer: u32) {
        let n = peer as usize + 1;
        if self.peers.len() < n {
            self.peers.resize_with(n, || Peer::new(None, [0; 16]));
        }
    }

    /// End-to-end checksum of frames (default CRC32C).
    pub fn set_checksum(&mut self, c: Checksum) {
        self.checksum = c;
    }

    /// Damage frames as `inj` decides (`corrupt` on send, `bus` on receive).
    pub fn set_faults(&mut self, inj: Injector) {
        self.faults = Some(inj);
    }

    /// The address peers should connect to.
    pub fn local_addr(&self) -> Result<SocketAddr, PathError> {
        Ok(self.listener.local_addr()?)
    }

    /// What peers need to connect: `ip:port#listener-nonce` (nonce in hex).
    pub fn contact(&self) -> Result<String, PathError> {
        let hex: String = self.auth.nonce.iter().map(|b| format!("{b:02x}")).collect();
        Ok(format!("{}#{hex}", self.local_addr()?))
    }

    /// Records where `peer` listens, from what it published ([`TcpPath::contact`]).
    pub fn set_peer_contact(&mut self, peer: u32, contact: &str) -> Result<(), PathError> {
        let bad = || PathError::Config(format!("bad tcp contact {contact:?} for rank {peer}"));
        let (addr, hex) = contact.split_once('#').ok_or_else(bad)?;
        let addr: SocketAddr = addr.parse().map_err(|_| bad())?;
        if hex.len() != 32 || !hex.is_ascii() {
            return Err(bad());
        }
        let mut nonce = [0u8; 16];
        for (i, b) in nonce.iter_mut().enumerate() {
            *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
        }
        if (peer as usize) < self.accept_below {
            self.ensure_peer(peer);
        }
        let p = self.peers.get_mut(peer as usize).ok_or_else(bad)?;
        p.addr = Some(addr);
        p.nonce = nonce;
        Ok(())
    }

    fn add_conn(&mut self, c: Conn) -> Result<usize, PathError> {
        // A stranger's slot (closed before its hello) is reused for another accepted
        // connection: no link ever named it, so strangers cannot grow `conns` without
        // bound. Other slots are never reused, so an epoll token keeps naming one peer's
        // connection.
        let reuse = if c.accepted_at.is_some() { self.free.pop() } else { None };
        let i = reuse.unwrap_or(self.conns.len());
        if let Some(st) = &c.stream {
            if let Err(e) = epoll_add(&self.epfd, st.as_raw_fd(), i as u64 + 1) {
                if let Some(f) = reuse {
                    self.free.push(f);
                }
                return Err(e);
            }
        }
        match reuse {
            Some(f) => self.conns[f] = c,
            None => self.conns.push(c),
        }
        Ok(i)
    }

    /// Where frames to `peer` go now, connecting first if nothing links us yet.
    fn link(&mut self, peer: u32) -> Result<usize, PathError> {
        let idx = peer as usize;
        let Some(p) = self.peers.get(idx) else {
            return Err(PathError::Tcp(format!("no such peer {peer}")));
        };
        match p.link {
            Link::Idle => {}
            Link::Lost => return Err(PathError::PeerLost(peer, "connection lost".into())),
            Link::Ready(i) => return Ok(i),
        }
        let addr = p.addr.ok_or_else(|| PathError::Tcp(format!("address of rank {peer} unknown")))?;
        let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(10))
            .map_err(|e| PathError::PeerLost(peer, format!("connect {addr}: {e}")))?;
        stream.set_nodelay(true)?;
        let hs = Handshake { rank_c: self.rank, rank_a: peer, nonce_c: nonce()?, nonce_a: p.nonce };
        stream
            .write_all(&hs.message(&self.auth.key, self.rank, HELLO_CONNECT))
            .map_err(|e| PathError::PeerLost(peer, format!("hello: {e}")))?;
        stream.set_nonblocking(true)?;
        let mut c = Conn::new(stream, Some(peer), true);
        c.hs = hs;
        let i = self.add_conn(c)?;
        self.peers[idx].link = Link::Ready(i);
        Ok(i)
    }

    fn flush_out(&mut self) -> Result<(), PathError> {
        let mut lost = None;
        for (i, c) in self.conns.iter_mut().enumerate().filter(|(_, c)| c.open) {
            let peer = c.peer.unwrap_or(u32::MAX);
            let Some(stream) = &c.stream else { continue };
            while c.out.pending() > 0 {
                match send_vectored(stream, &[IoSlice::new(&c.out.queue[c.out.sent..])]) {
                    Ok(0) => {
                        lost = Some((i, peer, "connection closed".to_string()));
                        break;
                    }
                    Ok(n) => {
                        c.out.sent += n;
                        if c.out.sent == c.out.queue.len() {
                            c.out.written_all();
                        }
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(e) => {
                        lost = Some((i, peer, format!("write: {e}")));
                        break;
                    }
                }
            }
            if lost.is_some() {
                break;
            }
            if c.finish && c.out.pending() == 0 {
                c.finish = false;
                let _ = stream.shutdown(Shutdown::Write);
            }
        }
        match lost {
            Some((i, peer, why)) => {
                self.close_conn(i);
                self.lose(peer);
                Err(PathError::PeerLost(peer, why))
            }
            None => Ok(()),
        }
    }

    /// `peer` is gone: what is queued for it can never be delivered, and later sends fail.
    fn lose(&mut self, peer: u32) {
        let Some(p) = self.peers.get_mut(peer as usize) else { return };
        p.tx = Tx::default();
        // Nothing more comes from it: no request of ours waits any more.
        p.rx.repaired();
        if let Link::Ready(i) = p.link {
            p.link = Link::Lost;
            if let Some(c) = self.conns.get_mut(i) {
                c.out = Out::default();
            }
            self.close_conn(i);
        }
        self.peers[peer as usize].link = Link::Lost;
    }

    /// Accepts what waits on the listener. Trouble here (a stranger's connections,
    /// `EMFILE`, a connection reset before it was accepted) never fails the MPI call that
    /// happened to poll: it is logged and the listener is tried again later.
    fn accept_new(&mut self) {
        // At most half the pending budget per poll: a rank's connection accepted in this
        // batch is among the newest, never the oldest one closed to make room, and the
        // next poll reads its hello before accepting more.
        for _ in 0..MAX_PENDING_HELLOS / 2 {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    if stream.set_nonblocking(true).is_err() {
                        continue; // dropped: closed
                    }
                    let _ = stream.set_nodelay(true);
                    if self.pending_hellos() >= MAX_PENDING_HELLOS {
                        // Make room: the oldest silent connection goes first (a rank's
                        // hello follows its connect at once, a squatter's never does).
                        if let Some(old) = self.oldest_pending_hello() {
                            self.counters.foreign_dropped += 1;
                            self.close_conn(old);
                        }
                    }
                    if self.add_conn(Conn::new(stream, None, false)).is_err() {
                        continue;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.accept_errors += 1;
                    if self.accept_errors.is_power_of_two() {
                        tracing::warn!(rank = self.rank, errors = self.accept_errors, "tcp accept: {e}");
                    }
                    return;
                }
            }
        }
    }

    /// Accepted connections still waiting for their hello.
    fn pending_hellos(&self) -> usize {
        self.conns.iter().filter(|c| c.open && c.accepted_at.is_some()).count()
    }

    fn oldest_pending_hello(&self) -> Option<usize> {
        self.conns
            .iter()
            .enumerate()
            .filter(|(_, c)| c.open && c.accepted_at.is_some())
            .min_by_key(|(_, c)| c.accepted_at)
            .map(|(i, _)| i)
    }

    /// Closes accepted connections that sent no valid hello in time.
    fn expire_hellos(&mut self) {
        if !self.conns.iter().any(|c| c.open && c.accepted_at.is_some()) {
            return;
        }
        let now = std::time::Instant::now();
        for i in 0..self.conns.len() {
            let c = &self.conns[i];
            if c.open && c.accepted_at.is_some_and(|t| now.duration_since(t) > self.hello_timeout) {
                self.counters.foreign_dropped += 1;
                self.close_conn(i);
            }
        }
    }

    /// How long an accepted connection may stay silent before its hello (tests shorten it).
    pub fn set_hello_timeout(&mut self, t: Duration) {
        self.hello_timeout = t;
    }

    /// Stop using connection `i` and close its descriptor (the slot stays, so epoll
    /// tokens are never reused).
    fn close_conn(&mut self, i: usize) {
        let Some(c) = self.conns.get_mut(i) else { return };
        if !c.open {
            return;
        }
        if let Some(st) = c.stream.take() {
            // SAFETY: removing a registered descriptor from our epoll set.
            unsafe {
                libc::epoll_ctl(self.epfd.as_raw_fd(), libc::EPOLL_CTL_DEL, st.as_raw_fd(), std::ptr::null_mut());
            }
            let _ = st.shutdown(Shutdown::Both);
        }
        let stranger = c.peer.is_none() && !c.opened;
        c.open = false;
        c.accepted_at = None;
        c.buf = Vec::new();
        c.out = Out::default();
        if stranger {
            self.free.push(i);
        }
    }

    /// The hello on connection `i` was read: decide which connection links us to `from`.
    /// Returns why the connection must be dropped, if it must.
    fn greeted(&mut self, i: usize, from: u32, kind: u32) -> Option<&'static str> {
        let idx = from as usize;
        if idx >= self.peers.len() {
            if idx >= self.accept_below {
                return Some("hello from an unknown rank");
            }
            self.ensure_peer(from);
        }
        if self.peers[idx].link == Link::Lost {
            if self.conns[i].opened {
                return Some("peer was lost before");
            }
            // A process that died cannot connect: this is a new incarnation of the rank
            // (relaunch policy), which may reach us before the launcher's notice does.
            self.peers[idx] = Peer::new(self.peers[idx].addr, self.peers[idx].nonce);
        }
        if self.conns[i].opened {
            // The answer to a connection we opened.
            if self.conns[i].peer != Some(from) || kind == HELLO_CONNECT {
                return Some("unexpected answer to our hello");
            }
            if kind == HELLO_ACCEPT_AFTER_DRAIN && !self.peers[idx].other_done {
                self.conns[i].gated = true;
            }
            return None;
        }
        if kind != HELLO_CONNECT {
            return Some("answer on a connection we did not open");
        }
        self.conns[i].peer = Some(from);
        self.conns[i].accepted_at = None;
        if self.conns[i].buf.len() < IN_BUF {
            self.conns[i].buf.resize(IN_BUF, 0);
        }
        // A higher rank that has its own connection to us goes on using it for what it
        // sends: no switch on this side.
        let mine = match self.peers[idx].link {
            Link::Ready(m) if from < self.rank => Some(m),
            Link::Ready(_) => {
                let c = &mut self.conns[i];
                if let Some(st) = &c.stream {
                    let _ = c.out.write_or_queue(st, from, &[&c.hs.message(&self.auth.key, self.rank, HELLO_ACCEPT)]);
                }
                return None;
            }
            _ => None,
        };
        let kind = if mine.is_some() { HELLO_ACCEPT_AFTER_DRAIN } else { HELLO_ACCEPT };
        let c = &mut self.conns[i];
        // The answer goes first: later frames queue behind it.
        if let Some(st) = &c.stream {
            let _ = c.out.write_or_queue(st, from, &[&c.hs.message(&self.auth.key, self.rank, kind)]);
        }
        if let Some(m) = mine {
            // Switch to the lower rank's connection. Ours ends once what it holds is
            // written (a partly written frame must finish there); its end-of-file ungates
            // the other side.
            let old = &mut self.conns[m];
            old.finish = true;
            if let (0, Some(st)) = (old.out.pending(), &old.stream) {
                let _ = st.shutdown(Shutdown::Write);
            }
        }
        self.peers[idx].link = Link::Ready(i);
        None
    }
}

/// Writes one frame (`head` = length word, `hcrc`, header) to `out`, checksumming the
/// payload piece by piece right before each piece is written (`crc` = `hcrc` when
/// checksummed).
fn send_frame(
    out: &mut Out,
    stream: &TcpStream,
    peer: u32,
    head: &[u8],
    payload: &[u8],
    mut crc: Option<u32>,
) -> Result<u32, PathError> {
    let mut head = head;
    let mut off = 0;
    let piece = if crc.is_some() { PIECE } else { payload.len().max(1) };
    loop {
        if out.pending() > 0 {
            // The socket is full: copy the rest into the queue, checksumming in that copy.
            out.compact();
            out.queue.extend_from_slice(head);
            let rest = &payload[off..];
            match crc {
                Some(v) => crc = Some(crate::checksum::extend_with_crc32c(v, &mut out.queue, rest)),
                None => out.queue.extend_from_slice(rest),
            }
            out.queue.extend_from_slice(&crc.unwrap_or(0).to_le_bytes());
            return Ok(crc.unwrap_or(0));
        }
        let end = off + (payload.len() - off).min(piece);
        let part = &payload[off..end];
        if let Some(v) = crc {
            crc = Some(crate::checksum::crc32c_append(v, part));
        }
        let last = end == payload.len();
        let trailer = crc.unwrap_or(0).to_le_bytes();
        out.write_or_queue(stream, peer, &[head, part, if last { &trailer[..] } else { &[] }])?;
        if last {
            return Ok(crc.unwrap_or(0));
        }
        head = &[];
        off = end;
    }
}

/// Result of parsing what one connection has buffered.
enum Parsed {
    More,
    /// A valid hello from `rank` of this `kind`; parsing stops so the path can decide.
    Hello(u32, u32),
    Drop(&'static str),
    /// The stream from `peer` carried damage (the frame was not delivered).
    Corrupt(u32, String),
}

/// The first 16 bytes of a frame: length word, number, acknowledgment and `pcrc` (0
/// without checksums).
fn frame_prefix(word: u32, seq: u32, ack: u32, on: bool) -> [u8; CTRL_LEN] {
    let mut p = [0u8; CTRL_LEN];
    p[0..4].copy_from_slice(&word.to_le_bytes());
    p[4..8].copy_from_slice(&seq.to_le_bytes());
    p[8..12].copy_from_slice(&ack.to_le_bytes());
    if on {
        let pcrc = crate::checksum::crc32c(&p[..12]);
        p[12..16].copy_from_slice(&pcrc.to_le_bytes());
    }
    p
}

/// What a sync frame says (see [`SYNC_LEN`] for the layout).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Sync {
    /// With [`SYNC_REQUEST`]: resend from this frame on.
    from: u32,
    ack: u32,
    flags: u32,
    /// The writer's latest repair request (meaningful with [`SYNC_REQUEST`]).
    request: u32,
    /// The request this answers (with [`SYNC_ANSWER`]).
    echo: u32,
    /// The writer's next new frame number.
    next: u32,
}

fn sync_frame(y: &Sync) -> [u8; SYNC_LEN] {
    let mut f = [0u8; SYNC_LEN];
    f[..CTRL_LEN].copy_from_slice(&frame_prefix(SYNC_WORD, y.from, y.ack, true));
    f[16..24].copy_from_slice(&SYNC_MAGIC.to_le_bytes());
    f[24..28].copy_from_slice(&y.flags.to_le_bytes());
    f[28..32].copy_from_slice(&y.request.to_le_bytes());
    f[32..36].copy_from_slice(&y.echo.to_le_bytes());
    f[36..40].copy_from_slice(&y.next.to_le_bytes());
    let crc = crate::checksum::crc32c(&f[..40]);
    f[40..44].copy_from_slice(&crc.to_le_bytes());
    f
}

/// The sync frame at the start of `b`, if one is there whole and intact (both CRCs).
fn read_sync(b: &[u8]) -> Option<Sync> {
    let b = b.get(..SYNC_LEN)?;
    let w = |k: usize| u32::from_le_bytes(b[k..k + 4].try_into().unwrap_or_default());
    let magic = u64::from_le_bytes(b[16..24].try_into().unwrap_or_default());
    if w(0) != SYNC_WORD
        || magic != SYNC_MAGIC
        || crate::checksum::crc32c(&b[..12]) != w(12)
        || crate::checksum::crc32c(&b[..40]) != w(40)
    {
        return None;
    }
    Some(Sync { from: w(4), ack: w(8), flags: w(24), request: w(28), echo: w(32), next: w(36) })
}

/// Where the first intact sync frame in `b` begins. The receiver looks for one after a
/// damaged prefix: what the peer writes from a sync frame on starts at a frame boundary.
/// A false find needs 12 fixed bytes and two matching CRCs at a wrong place.
fn find_sync(b: &[u8]) -> Option<usize> {
    let word = SYNC_WORD.to_le_bytes();
    let mut from = 0;
    while b.len() >= from + SYNC_LEN {
        let at = from + b[from..b.len() - SYNC_LEN + 4].windows(4).position(|x| x == word)?;
        if read_sync(&b[at..]).is_some() {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

/// A whole checksummed data frame (tests write frames by hand with it).
#[cfg(test)]
fn encode_frame(seq: u32, ack: u32, hdr: &RawHeader, payload: &[u8]) -> Vec<u8> {
    let p = frame_prefix((HDR_LEN + payload.len()) as u32, seq, ack, true);
    let pcrc = u32::from_le_bytes(p[12..16].try_into().unwrap_or_default());
    let hcrc = crate::checksum::crc32c_append(pcrc, hdr);
    let mut f = p.to_vec();
    f.extend_from_slice(&hcrc.to_le_bytes());
    f.extend_from_slice(hdr);
    f.extend_from_slice(payload);
    f.extend_from_slice(&crate::checksum::crc32c_append(hcrc, payload).to_le_bytes());
    f
}

impl Conn {
    #[allow(clippy::too_many_arguments)]
    fn parse(
        &mut self,
        auth: &mut Auth,
        my_rank: u32,
        nranks: usize,
        sink: &mut dyn PacketSink,
        counters: &mut PathCounters,
        checksum: Checksum,
        faults: &mut Option<Injector>,
        peers: &mut [Peer],
        repairs: &mut Vec<Repair>,
    ) -> Parsed {
        loop {
            let avail = &self.buf[self.start..self.end];
            let peer = match (self.greeted, self.peer) {
                (true, Some(p)) => p,
                _ => {
                    if avail.len() < HELLO_LEN {
                        return Parsed::More;
                    }
                    let m = read_hello(&avail[..HELLO_LEN]);
                    let msg: [u8; HELLO_LEN] = avail[..HELLO_LEN].try_into().unwrap_or([0; HELLO_LEN]);
                    self.start += HELLO_LEN;
                    match self.handshake(auth, my_rank, nranks, &m, &msg) {
                        Ok((rank, kind)) => {
                            self.greeted = true;
                            return Parsed::Hello(rank, kind);
                        }
                        Err(why) => {
                            counters.foreign_dropped += 1;
                            return Parsed::Drop(why);
                        }
                    }
                }
            };
            if avail.len() < CTRL_LEN || self.gated {
                return Parsed::More;
            }
            let Some(rx) = peers.get_mut(peer as usize).map(|p| &mut p.rx) else {
                return Parsed::Drop("frame from a rank outside the job");
            };
            if self.hunting {
                // Past a damaged prefix: throw bytes away up to the next sync frame (the
                // peer writes one when it answers the request sent when the damage was
                // found), which starts at a frame boundary.
                match find_sync(avail) {
                    Some(at) => {
                        self.start += at;
                        self.hunting = false;
                        counters.resyncs += 1;
                        continue;
                    }
                    None => {
                        // Keep what may be the beginning of a sync frame.
                        self.start = self.end - avail.len().min(SYNC_LEN - 1);
                        return Parsed::More;
                    }
                }
            }
            let verify = checksum.enabled();
            if verify {
                if let Some(inj) = faults.as_mut() {
                    self.cast_bus_die(inj);
                }
            }
            let avail = &self.buf[self.start..self.end];
            let w = |k: usize| u32::from_le_bytes(avail[4 * k..4 * k + 4].try_into().unwrap_or_default());
            let (word, seq, ack, pcrc) = (w(0), w(1), w(2), w(3));
            let carries_crc = word & NO_CRC == 0;
            if verify {
                if !carries_crc && pcrc == 0 && seq == 0 && ack == 0 {
                    counters.corrupt_detected += 1;
                    return Parsed::Corrupt(peer, "frame without checksum (sender runs STEADFAST_CHECKSUM=none)".into());
                }
                // (A checksummed frame whose flag bit was damaged fails the check below.)
                // The prefix is checked before anything else: past a damaged length word
                // the frame boundaries are lost (and the receiver would wait for bytes
                // that never come), so the stream is searched for the next sync frame.
                if crate::checksum::crc32c(&avail[..12]) != pcrc {
                    counters.corrupt_detected += 1;
                    if let Err(p) = self.start_hunt(rx, peer, repairs) {
                        return p;
                    }
                    continue;
                }
            }
            if word & CTRL != 0 {
                if word & !(CTRL | NO_CRC) == CTRL_SYNC && carries_crc {
                    if avail.len() < SYNC_LEN {
                        return Parsed::More;
                    }
                    self.flip_pending();
                    let Some(y) = read_sync(&self.buf[self.start..self.end]) else {
                        if !verify {
                            self.start += SYNC_LEN;
                            continue;
                        }
                        counters.corrupt_detected += 1;
                        if let Err(p) = self.start_hunt(rx, peer, repairs) {
                            return p;
                        }
                        continue;
                    };
                    self.start += SYNC_LEN;
                    repairs.push(Repair::Acked(peer, y.ack));
                    if y.flags & SYNC_ANSWER != 0 && rx.awaiting && y.echo == rx.request {
                        // The resent frames follow; they come in order, so the request
                        // is not repeated any more. Nothing to resend: nothing is missing.
                        rx.answered = true;
                        rx.repeat_at = None;
                        if y.next == rx.next {
                            rx.repaired();
                        }
                    }
                    if y.flags & SYNC_REQUEST != 0 {
                        let hunted = y.flags & SYNC_HUNTED != 0;
                        repairs.push(Repair::Answer { peer, from: y.from, id: y.request, hunted });
                    }
                    continue;
                }
                self.start += CTRL_LEN;
                if carries_crc {
                    repairs.push(Repair::Acked(peer, ack));
                }
                continue;
            }
            let len = (word & !(NO_CRC | CTRL)) as usize;
            if !(HDR_LEN..=HDR_LEN + TCP_MAX_PAYLOAD).contains(&len) {
                counters.corrupt_detected += 1;
                return Parsed::Corrupt(peer, format!("frame length {len} out of range"));
            }
            if avail.len() < FRAME_PREFIX + len + TRAILER {
                return Parsed::More;
            }
            let stored_hcrc = w(4);
            let frame_len = FRAME_PREFIX + len + TRAILER;
            let (s, e) = (self.start + FRAME_PREFIX, self.start + FRAME_PREFIX + len);
            if verify {
                self.flip_pending();
            } else if let Some(inj) = faults.as_mut() {
                // Without checksums nothing finds the frame boundaries again: a bus
                // error only hits header and payload.
                inj.bus_error(&mut self.buf[s..e], HDR_LEN);
            }
            let body = &self.buf[s..e];
            let stored = u32::from_le_bytes(self.buf[e..e + TRAILER].try_into().unwrap_or_default());
            let (hdr, payload) = body.split_at(HDR_LEN);
            let hdr: &RawHeader = match hdr.try_into() {
                Ok(h) => h,
                Err(_) => return Parsed::Drop("short header"),
            };
            if !carries_crc {
                // A sender without checksums numbers nothing and resends nothing.
                sink.packet(peer, hdr, payload);
                counters.packets_received += 1;
                counters.bytes_received += (len - HDR_LEN) as u64;
                self.start += frame_len;
                continue;
            }
            // The acknowledgment is covered by `pcrc`, checked above.
            repairs.push(Repair::Acked(peer, ack));
            // The number is covered by `pcrc` too: even a frame whose header or payload is
            // damaged says which one it is.
            let ahead = seq.wrapping_sub(rx.next) as i32;
            if ahead < 0 || (ahead > 0 && rx.awaiting) {
                // Sent again after a repair request (already delivered), or sent after a
                // damaged or lost frame that is being resent: dropped unlooked-at (damaged
                // or not, it comes again, or came already).
                counters.dup_dropped += 1;
                self.start += frame_len;
                continue;
            }
            // (`ahead > 0` without a request out: the numbering restarted on the peer's
            // side; follow it.)
            rx.next = seq;
            let hcrc = crate::checksum::crc32c_append(pcrc, hdr);
            let intact = if !verify {
                sink.packet(peer, hdr, payload);
                true
            } else {
                // The sink checks the payload while copying it where it belongs.
                hcrc == stored_hcrc && sink.packet_unverified(peer, hdr, payload, hcrc, stored)
            };
            self.start += frame_len;
            if !intact {
                counters.corrupt_detected += 1;
                // Nothing after it is delivered until it came again intact.
                if let Err(n) = rx.lost() {
                    return Parsed::Corrupt(peer, format!("frame {seq} still damaged after {} repair requests", n - 1));
                }
                repairs.push(Repair::Request(peer, false));
                continue;
            }
            rx.next = rx.next.wrapping_add(1);
            rx.repaired();
            rx.unacked_frames += 1;
            rx.unacked_bytes += len;
            if rx.unacked_frames >= ACK_EVERY_FRAMES || rx.unacked_bytes >= ACK_EVERY_BYTES {
                repairs.push(Repair::Acknowledge(peer));
            }
            counters.packets_received += 1;
            counters.bytes_received += (len - HDR_LEN) as u64;
        }
    }

    /// The prefix at `start` failed its check: look for the next sync frame, and ask the
    /// peer for a resend that starts with one.
    fn start_hunt(&mut self, rx: &mut Rx, peer: u32, repairs: &mut Vec<Repair>) -> Result<(), Parsed> {
        self.hunting = true;
        self.bus = None;
        // The damaged bytes are never looked at again.
        self.start += 1;
        if let Err(n) = rx.lost() {
            return Err(Parsed::Corrupt(
                peer,
                format!("damaged frame prefixes (length words) {} times without a frame delivered in between", n - 1),
            ));
        }
        repairs.push(Repair::Request(peer, true));
        Ok(())
    }

    /// Fault injection (`bus`), once per frame when its prefix is first looked at: maybe
    /// flip a bit anywhere in the frame, in the prefix at once, elsewhere once the frame
    /// is complete ([`Conn::flip_pending`]).
    #[cold]
    fn cast_bus_die(&mut self, inj: &mut Injector) {
        if self.bus.is_some_and(|(at, _)| at == self.start) {
            return;
        }
        let word = u32::from_le_bytes(self.buf[self.start..self.start + 4].try_into().unwrap_or_default());
        let len = (word & !(NO_CRC | CTRL)) as usize;
        let frame_len = if word == SYNC_WORD {
            SYNC_LEN
        } else if word & CTRL == 0 && (HDR_LEN..=HDR_LEN + TCP_MAX_PAYLOAD).contains(&len) {
            FRAME_PREFIX + len + TRAILER
        } else {
            CTRL_LEN
        };
        let mut pending = None;
        if let Some(off) = inj.bus_roll(frame_len) {
            let mut bit = 0;
            inj.flip_bit(&mut bit);
            if off < CTRL_LEN {
                self.buf[self.start + off] ^= bit;
            } else {
                pending = Some((off, bit));
            }
        }
        self.bus = Some((self.start, pending));
    }

    /// Makes the flip [`Conn::cast_bus_die`] left for when the frame at `start` is whole.
    fn flip_pending(&mut self) {
        if let Some((at, Some((off, bit)))) = self.bus {
            if at == self.start && at + off < self.end {
                self.buf[at + off] ^= bit;
            }
            self.bus = Some((at, None));
        }
    }

    /// Checks handshake message `m` (raw bytes `msg`): `Ok((rank, kind))` once the peer
    /// proved itself; `kind` is `CONNECT` on an accepted connection, the acceptor's answer
    /// on one we opened.
    fn handshake(
        &mut self,
        auth: &mut Auth,
        my_rank: u32,
        nranks: usize,
        m: &HelloMsg,
        msg: &[u8; HELLO_LEN],
    ) -> Result<(u32, u32), &'static str> {
        const BAD: &str = "bad hello (foreign process, wrong job key or forged handshake)";
        if m.magic != HELLO_MAGIC || m.rank as usize >= nranks {
            return Err(BAD);
        }
        if self.opened {
            // The acceptor's answer to our connect (self.hs was set when we connected).
            let answer = m.kind == HELLO_ACCEPT || m.kind == HELLO_ACCEPT_AFTER_DRAIN;
            if Some(m.rank) != self.peer || !answer || !self.hs.verify(&auth.key, m.kind, msg) {
                return Err(BAD);
            }
            return Ok((m.rank, m.kind));
        }
        if m.kind != HELLO_CONNECT {
            return Err(BAD);
        }
        let hs = Handshake { rank_c: m.rank, rank_a: my_rank, nonce_c: m.nonce, nonce_a: auth.nonce };
        if !hs.verify(&auth.key, HELLO_CONNECT, msg) {
            return Err(BAD);
        }
        if !auth.seen.insert(m.nonce) {
            return Err("replayed hello (a connector nonce seen before)");
        }
        self.hs = hs;
        Ok((m.rank, HELLO_CONNECT))
    }

    /// Make room at the end of the buffer by moving unparsed bytes to the front.
    fn compact(&mut self) {
        if self.start > 0 {
            self.bus = match self.bus {
                Some((at, p)) if at == self.start => Some((0, p)),
                _ => None,
            };
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
    }
}

/// Gather-write without SIGPIPE: a peer that died must be an error, not the end of the
/// application (whose SIGPIPE disposition is its own).
fn send_vectored(stream: &TcpStream, parts: &[IoSlice<'_>]) -> std::io::Result<usize> {
    // SAFETY: msghdr points at `parts`, which outlives the call; IoSlice is ABI-compatible
    // with iovec.
    let n = unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = parts.as_ptr() as *mut libc::iovec;
        msg.msg_iovlen = parts.len();
        libc::sendmsg(stream.as_raw_fd(), &msg, libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT)
    };
    if n < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

fn epoll_add(epfd: &std::os::fd::OwnedFd, fd: i32, token: u64) -> Result<(), PathError> {
    let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: token };
    // SAFETY: valid descriptors; the kernel copies `ev`.
    let rc = unsafe { libc::epoll_ctl(epfd.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) };
    if rc < 0 {
        return Err(PathError::Io(std::io::Error::last_os_error()));
    }
    Ok(())
}

impl TcpPath {
    /// Collect ready descriptors into `self.ready` (level-triggered), waiting up to `ms`.
    fn epoll(&mut self, ms: i32) -> Result<usize, PathError> {
        // SAFETY: `ready` has `len` writable entries.
        let n = unsafe { libc::epoll_wait(self.epfd.as_raw_fd(), self.ready.as_mut_ptr(), self.ready.len() as i32, ms) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == ErrorKind::Interrupted {
                return Ok(0);
            }
            return Err(PathError::Io(e));
        }
        Ok(n as usize)
    }

    /// Deliver the complete frames buffered on connection `i`; returns why the connection
    /// must be dropped, if it must.
    fn parse_conn(&mut self, i: usize, sink: &mut dyn PacketSink) -> Option<&'static str> {
        let nranks = self.peers.len().max(self.accept_below);
        let stop = loop {
            let c = &mut self.conns[i];
            let parsed = c.parse(
                &mut self.auth,
                self.rank,
                nranks,
                sink,
                &mut self.counters,
                self.checksum,
                &mut self.faults,
                &mut self.peers,
                &mut self.repairs,
            );
            match parsed {
                Parsed::More => break None,
                Parsed::Hello(from, kind) => {
                    if let Some(why) = self.greeted(i, from, kind) {
                        break Some(why);
                    }
                }
                Parsed::Drop(why) => {
                    self.counters.frames_dropped += 1;
                    break Some(why);
                }
                Parsed::Corrupt(peer, what) => {
                    // Damage that cannot be repaired: the stream cannot be followed past it.
                    self.counters.frames_dropped += 1;
                    self.corrupt.get_or_insert((peer, what));
                    break Some("corrupt frame");
                }
            }
        };
        if !self.repairs.is_empty() {
            self.do_repairs();
        }
        if stop.is_some() {
            return stop;
        }
        let c = &mut self.conns[i];
        if c.start == c.end {
            c.start = 0;
            c.end = 0;
            c.bus = None;
        }
        None
    }

    /// Acts on what parsing found: acknowledgments retire kept frames, repair requests
    /// from a peer resend, damage found here asks the peer to resend.
    fn do_repairs(&mut self) {
        let mut acts = std::mem::take(&mut self.repairs);
        for a in acts.drain(..) {
            match a {
                Repair::Acked(p, upto) => {
                    if let Some(peer) = self.peers.get_mut(p as usize) {
                        peer.tx.acknowledged(upto);
                    }
                }
                Repair::Answer { peer, from, id, hunted } => {
                    // Frames still queued whole would only be thrown away as ahead of the
                    // one asked for: dropped (the kept ones among them are resent below),
                    // so under heavy damage the queue holds at most one answer.
                    let dropped = match self.peers.get(peer as usize).map(|p| p.link) {
                        Some(Link::Ready(l)) => self.conns[l].out.drop_unsent_frames(),
                        _ => false,
                    };
                    // The peer threw bytes of ours away, or we just did: a request of ours
                    // may have been among them, so it goes along again.
                    let own = if hunted || dropped { SYNC_REQUEST } else { 0 };
                    self.send_sync(peer, SYNC_ANSWER | own, id);
                    self.resend(peer, from);
                }
                Repair::Request(p, hunted) => {
                    self.timers = true;
                    self.send_sync(p, SYNC_REQUEST | if hunted { SYNC_HUNTED } else { 0 }, 0);
                }
                Repair::Acknowledge(p) => {
                    if self.peers.get(p as usize).is_some_and(|x| x.rx.unacked_frames > 0) {
                        self.send_control(p, CTRL_ACK, 0);
                    }
                }
            }
        }
        self.repairs = acts;
    }

    /// The acknowledgment to carry to `peer` now (every frame before it was delivered).
    fn take_ack(&mut self, peer: u32) -> u32 {
        let rx = &mut self.peers[peer as usize].rx;
        rx.unacked_frames = 0;
        rx.unacked_bytes = 0;
        rx.next
    }

    /// Sends a control frame (`CTRL_ACK`, with `seq` 0).
    /// Trouble here is the data path's to report: a lost peer shows on its next send.
    fn send_control(&mut self, peer: u32, kind: u32, seq: u32) {
        let Ok(link) = self.link(peer) else { return };
        let ack = self.take_ack(peer);
        let f = frame_prefix(CTRL | kind, seq, ack, true);
        self.write_control(link, peer, &f);
    }

    /// Sends a sync frame with `flags` (answering request `echo` with [`SYNC_ANSWER`]);
    /// [`SYNC_REQUEST`] asks for the frames from the first one we miss on, and is left
    /// out when no request of ours is waiting for its answer.
    fn send_sync(&mut self, peer: u32, mut flags: u32, echo: u32) {
        let Ok(link) = self.link(peer) else { return };
        let ack = self.take_ack(peer);
        let p = &self.peers[peer as usize];
        if !p.rx.awaiting || p.rx.answered {
            flags &= !SYNC_REQUEST;
        }
        let y = Sync { from: p.rx.next, ack, flags, request: p.rx.request, echo, next: p.tx.next };
        self.write_control(link, peer, &sync_frame(&y));
    }

    /// Writes a control frame, which crosses the same wire as data frames (`corrupt`).
    fn write_control(&mut self, link: usize, peer: u32, f: &[u8]) {
        let damage = self.faults.as_mut().is_some_and(|inj| inj.will_corrupt());
        let c = &mut self.conns[link];
        let Some(st) = &c.stream else { return };
        c.out.frame_start();
        match self.faults.as_mut().filter(|_| damage) {
            Some(inj) => {
                let mut d = f.to_vec();
                inj.damage(&mut d);
                let _ = c.out.write_or_queue(st, peer, &[&d]);
            }
            None => {
                let _ = c.out.write_or_queue(st, peer, &[f]);
            }
        }
    }

    /// Sends again the repair requests that no answer has begun to within their time
    /// (the request, or the sync frame that starts its answer, may have been thrown away
    /// by a side hunting for frame boundaries), each wait twice the one before, up to
    /// [`REPEAT_MAX`].
    #[cold]
    fn repeat_requests(&mut self) {
        let now = std::time::Instant::now();
        let mut waiting = false;
        for peer in 0..self.peers.len() {
            let rx = &mut self.peers[peer].rx;
            if !rx.awaiting || rx.answered {
                continue;
            }
            waiting = true;
            if rx.repeat_at.is_some_and(|t| t > now) {
                continue;
            }
            rx.backoff = (rx.backoff * 2).clamp(REPEAT_FIRST, REPEAT_MAX);
            rx.repeat_at = Some(now + rx.backoff);
            let hunting = self.conns.iter().any(|c| c.open && c.hunting && c.peer == Some(peer as u32));
            self.counters.requests_repeated += 1;
            self.send_sync(peer as u32, SYNC_REQUEST | if hunting { SYNC_HUNTED } else { 0 }, 0);
        }
        self.timers = waiting;
    }

    /// `peer` found the frame numbered `from` damaged: send it and every later kept frame
    /// again, in order (the peer dropped what followed the damaged one).
    fn resend(&mut self, peer: u32, from: u32) {
        let Ok(link) = self.link(peer) else { return };
        let TcpPath { peers, conns, faults, counters, .. } = self;
        let c = &mut conns[link];
        let Some(st) = c.stream.as_ref() else { return };
        for k in peers[peer as usize].tx.kept.iter() {
            if (k.seq.wrapping_sub(from) as i32) < 0 {
                continue;
            }
            counters.retransmits += 1;
            let f = &k.frame;
            // SAFETY: the caller of `send_held` keeps the payload until the peer confirmed
            // the message, which it has not: it just asked for this frame again.
            let (payload, trailer): (&[u8], [u8; TRAILER]) = match k.by_ref {
                Some((ptr, len, fcrc)) => (unsafe { std::slice::from_raw_parts(ptr as *const u8, len) }, fcrc.to_le_bytes()),
                None => (&[], [0; TRAILER]),
            };
            let trailer: &[u8] = if k.by_ref.is_some() { &trailer } else { &[] };
            c.out.frame_start();
            // The copy crosses the same wire as the first one did.
            let damage = faults.as_mut().is_some_and(|inj| inj.will_corrupt());
            let r = match faults.as_mut().filter(|_| damage) {
                Some(inj) => {
                    // Anywhere in the frame, its length word included.
                    let mut d = [&f[..], payload, trailer].concat();
                    inj.damage(&mut d);
                    c.out.write_or_queue(st, peer, &[&d])
                }
                None => c.out.write_or_queue(st, peer, &[f, payload, trailer]),
            };
            if r.is_err() {
                return;
            }
        }
    }

    /// Read everything available on connection `i` and deliver complete frames.
    fn read_conn(&mut self, i: usize, sink: &mut dyn PacketSink) {
        if !self.conns.get(i).is_some_and(|c| c.open) {
            return;
        }
        let mut drop_reason = None;
        loop {
            let c = &mut self.conns[i];
            if c.end == c.buf.len() {
                c.compact();
                if c.end == c.buf.len() {
                    break; // gated with a full buffer: the rest waits in the socket
                }
            }
            let Some(mut stream) = c.stream.as_ref() else { break };
            match stream.read(&mut c.buf[c.end..]) {
                Ok(0) => {
                    drop_reason = Some("closed");
                    break;
                }
                Ok(n) => {
                    c.end += n;
                    let drained = n < c.buf.len() / 2;
                    drop_reason = self.parse_conn(i, sink);
                    if drop_reason.is_some() || drained {
                        break; // level-triggered readiness reports any rest
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => {
                    drop_reason = Some("read error");
                    break;
                }
            }
        }
        let Some(why) = drop_reason else { return };
        let (peer, opened) = (self.conns[i].peer, self.conns[i].opened);
        self.close_conn(i);
        if let Some(p) = peer {
            match self.peers[p as usize].link {
                // The connection carrying our frames ended: the peer died.
                Link::Ready(l) if l == i => self.lose(p),
                // The peer's own connection, replaced by ours, ended: what it sent after
                // the switch can be read now.
                Link::Ready(l) if !opened => {
                    self.peers[p as usize].other_done = true;
                    if self.conns[l].gated {
                        self.conns[l].gated = false;
                        if let Some(why) = self.parse_conn(l, sink) {
                            tracing::warn!(rank = self.rank, "dropping connection: {why}");
                            self.close_conn(l);
                        }
                    }
                }
                _ => {}
            }
        }
        if why != "closed" {
            tracing::warn!(rank = self.rank, "dropping connection: {why}");
        }
    }
}

impl TcpPath {
    /// With `held`, the caller keeps `payload` valid and unchanged until the peer confirmed
    /// the message ([`Path::send_held`]): a large payload is then kept by reference and
    /// written from the caller's buffer directly.
    fn send_with(&mut self, peer: u32, hdr: &RawHeader, payload: &[u8], held: bool) -> Result<SendStatus, PathError> {
        if payload.len() > TCP_MAX_PAYLOAD {
            return Err(PathError::Tcp(format!("payload {} exceeds frame limit", payload.len())));
        }
        let on = self.checksum.enabled();
        let link = self.link(peer)?;
        if self.conns[link].out.pending() > OUT_LIMIT {
            return Ok(SendStatus::Full);
        }
        let tx = &self.peers[peer as usize].tx;
        if on && (tx.kept_bytes > KEEP_LIMIT_BYTES || tx.kept.len() >= KEEP_LIMIT_FRAMES) {
            // Wait for the peer's acknowledgment (it sends one on its own every
            // `ACK_EVERY_*`, which this limit is well above).
            return Ok(SendStatus::Full);
        }
        let body = HDR_LEN + payload.len();
        let word = if on { body as u32 } else { body as u32 | NO_CRC };
        let ack = self.take_ack(peer);
        let TcpPath { peers, conns, faults, counters, .. } = self;
        let tx = &mut peers[peer as usize].tx;
        let Conn { out, stream, .. } = &mut conns[link];
        let Some(stream) = stream.as_ref() else {
            return Err(PathError::PeerLost(peer, "connection closed".into()));
        };
        let seq = if on { tx.next } else { 0 };
        let prefix = frame_prefix(word, seq, ack, on);
        let pcrc = u32::from_le_bytes(prefix[12..16].try_into().unwrap_or_default());
        let hcrc = if on { crate::checksum::crc32c_append(pcrc, hdr) } else { 0 };
        let mut head = [0u8; FRAME_PREFIX + HDR_LEN];
        head[..CTRL_LEN].copy_from_slice(&prefix);
        head[CTRL_LEN..FRAME_PREFIX].copy_from_slice(&hcrc.to_le_bytes());
        head[FRAME_PREFIX..].copy_from_slice(hdr);
        let damage = faults.as_mut().is_some_and(|inj| inj.will_corrupt());
        out.frame_start();
        if on && held && payload.len() >= HELD_MIN && !damage {
            // Written from the caller's buffer, checksummed right before each piece goes;
            // only prefix and header are kept, the payload by reference.
            let fcrc = send_frame(out, stream, peer, &head, payload, Some(hcrc))?;
            let mut f = tx.spare.pop().unwrap_or_default();
            tx.spare_bytes -= f.capacity().min(tx.spare_bytes);
            f.clear();
            f.extend_from_slice(&head);
            tx.kept_bytes += f.len();
            tx.kept.push_back(Kept { seq, frame: f, by_ref: Some((payload.as_ptr() as usize, payload.len(), fcrc)) });
            tx.next = tx.next.wrapping_add(1);
        } else if on {
            // The frame is built once, checksummed in the copy, and kept as it went out
            // until the peer acknowledges it: a damaged arrival is resent from here.
            // A spare buffer grows once to the frames it carries and is reused after that.
            let mut f = match tx.spare.pop() {
                Some(f) => {
                    tx.spare_bytes -= f.capacity();
                    f
                }
                None => Vec::new(),
            };
            f.clear();
            f.reserve(FRAME_PREFIX + body + TRAILER);
            f.extend_from_slice(&head);
            let fcrc = crate::checksum::extend_with_crc32c(hcrc, &mut f, payload);
            f.extend_from_slice(&fcrc.to_le_bytes());
            match faults.as_mut().filter(|_| damage) {
                Some(inj) => {
                    // Damage a private copy after the checksums were computed, anywhere
                    // in the frame (its length word included).
                    let mut d = f.clone();
                    inj.damage(&mut d);
                    out.write_or_queue(stream, peer, &[&d])?;
                }
                None => out.write_or_queue(stream, peer, &[&f])?,
            }
            tx.kept_bytes += f.len();
            tx.kept.push_back(Kept { seq, frame: f, by_ref: None });
            tx.next = tx.next.wrapping_add(1);
        } else if damage {
            let mut f = Vec::with_capacity(head.len() + payload.len() + TRAILER);
            f.extend_from_slice(&head);
            f.extend_from_slice(payload);
            f.extend_from_slice(&0u32.to_le_bytes());
            if let Some(inj) = faults.as_mut() {
                inj.damage(&mut f[FRAME_PREFIX..FRAME_PREFIX + body]);
            }
            out.write_or_queue(stream, peer, &[&f])?;
        } else {
            send_frame(out, stream, peer, &head, payload, None)?;
        }
        counters.packets_sent += 1;
        counters.bytes_sent += payload.len() as u64;
        Ok(SendStatus::Done)
    }
}

impl Path for TcpPath {
    fn send(&mut self, peer: u32, hdr: &RawHeader, payload: &[u8]) -> Result<SendStatus, PathError> {
        self.send_with(peer, hdr, payload, false)
    }

    unsafe fn send_held(&mut self, peer: u32, hdr: &RawHeader, payload: &[u8]) -> Result<SendStatus, PathError> {
        self.send_with(peer, hdr, payload, true)
    }

    fn holds_references(&self, _peer: u32) -> bool {
        self.checksum.enabled()
    }

    fn poll(&mut self, sink: &mut dyn PacketSink) -> Result<usize, PathError> {
        if self.timers {
            self.repeat_requests();
        }
        self.flush_out()?;
        let before = self.counters.packets_received;
        self.polls = self.polls.wrapping_add(1);
        let open = self.conns.iter().filter(|c| c.open).count();
        if open > 0 && open <= DIRECT_READ_MAX && !self.polls.is_multiple_of(EPOLL_EVERY) {
            let mut fds = [libc::pollfd { fd: -1, events: libc::POLLIN, revents: 0 }; DIRECT_READ_MAX];
            let mut idx = [0usize; DIRECT_READ_MAX];
            let mut k = 0;
            for (i, c) in self.conns.iter().enumerate().filter(|(_, c)| c.open) {
                let Some(st) = &c.stream else { continue };
                fds[k].fd = st.as_raw_fd();
                idx[k] = i;
                k += 1;
            }
            // SAFETY: `fds` holds `k` initialised entries.
            let r = unsafe { libc::poll(fds.as_mut_ptr(), k as libc::nfds_t, 0) };
            if r > 0 {
                for j in 0..k {
                    if fds[j].revents != 0 {
                        self.read_conn(idx[j], sink);
                    }
                }
            }
        } else {
            if self.polls.is_multiple_of(EPOLL_EVERY) {
                self.expire_hellos();
            }
            let n = self.epoll(0)?;
            // Connections first: a hello that arrived is read (and its connection no
            // longer waits) before new arrivals can push it out of the pending budget.
            let mut listener = false;
            for k in 0..n {
                let token = self.ready[k].u64;
                if token == LISTENER_TOKEN {
                    listener = true;
                } else {
                    self.read_conn(token as usize - 1, sink);
                }
            }
            if listener {
                self.accept_new();
            }
        }
        if let Some((peer, what)) = self.corrupt.take() {
            return Err(PathError::Corrupt { peer, path: "tcp", what });
        }
        Ok((self.counters.packets_received - before) as usize)
    }

    fn max_payload(&self) -> usize {
        TCP_MAX_PAYLOAD
    }

    fn wait(&mut self, timeout: Duration) -> Result<(), PathError> {
        // A repair request waiting for its answer is repeated from `poll`: wake up for it.
        let timeout = if self.timers { timeout.min(REPEAT_FIRST) } else { timeout };
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        let blocked = |c: &&Conn| c.open && c.out.pending() > 0;
        if self.conns.iter().any(|c| blocked(&c)) {
            // Output is waiting for socket space: poll those sockets for writability too.
            let mut fds: Vec<libc::pollfd> = vec![libc::pollfd { fd: self.epfd.as_raw_fd(), events: libc::POLLIN, revents: 0 }];
            for st in self.conns.iter().filter(blocked).filter_map(|c| c.stream.as_ref()) {
                fds.push(libc::pollfd { fd: st.as_raw_fd(), events: libc::POLLOUT, revents: 0 });
            }
            // SAFETY: fds is a valid array for the duration of the call.
            unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
            return Ok(());
        }
        let mut ev = libc::epoll_event { events: 0, u64: 0 };
        // Only wait for readiness here; the next poll() collects the events.
        // SAFETY: one-element buffer.
        unsafe { libc::epoll_wait(self.epfd.as_raw_fd(), &mut ev, 1, ms) };
        Ok(())
    }

    fn peer_failed(&mut self, peer: u32) {
        self.lose(peer);
    }

    fn peer_rejoined(&mut self, peer: u32, ex: &mut dyn crate::setup::Exchange) -> Result<(), PathError> {
        let Some(p) = self.peers.get(peer as usize) else {
            return Err(PathError::Tcp(format!("no such peer {peer}")));
        };
        if let Link::Ready(i) = p.link {
            if self.conns[i].open && self.conns[i].greeted {
                // Already linked to the new incarnation (it connected to us first).
                return Ok(());
            }
            self.close_conn(i);
        }
        let a = ex.get(&format!("tcp.{peer}")).map_err(|e| PathError::Config(format!("bootstrap: {e}")))?;
        self.peers[peer as usize] = Peer::new(None, [0; 16]);
        self.set_peer_contact(peer, &a)?;
        Ok(())
    }

    fn backlog(&self) -> usize {
        self.conns.iter().filter(|c| c.open).map(|c| c.out.pending()).sum()
    }

    fn counters_by_path(&self) -> Vec<(&'static str, PathCounters)> {
        vec![("tcp", self.counters())]
    }

    /// A peer may still find damage in a frame we sent (the last of a barrier, say) and ask
    /// for it again while we block in the final fence: keep answering.
    fn needs_linger(&self) -> bool {
        self.checksum.enabled()
    }

    fn counters(&self) -> PathCounters {
        let mut c = self.counters;
        if let Some(inj) = &self.faults {
            c.injected_corrupt += inj.counts.injected_corrupt;
            c.injected_bus += inj.counts.injected_bus;
        }
        c
    }
}

/// Fuzz entry point: feeds `data` to an accepted connection's stream parser (hello, then
/// frames), cut into reads of varying size, as bytes from the network would arrive. Only a
/// bug panics. Used by fuzz/fuzz_targets/tcp_stream.rs and the stable randomized test.
#[doc(hidden)]
pub fn fuzz_stream(data: &[u8]) {
    struct Count(u64);
    impl PacketSink for Count {
        fn packet(&mut self, _peer: u32, _hdr: &RawHeader, payload: &[u8]) {
            assert!(payload.len() <= TCP_MAX_PAYLOAD);
            self.0 += 1;
        }
    }
    // First byte: bit 0 = start past the handshake (a fuzzer cannot forge a proof, so
    // frames are reached this way), the rest sets how the stream is cut into reads.
    let (first, rest) = data.split_first().map_or((0, data), |(c, r)| (*c, r));
    let cut = usize::from(first >> 1) * 37 + 1;
    let authenticated = first & 1 == 1;
    let mut c = Conn {
        stream: None,
        open: true,
        accepted_at: None,
        peer: authenticated.then_some(1),
        opened: false,
        greeted: authenticated,
        hs: Handshake::default(),
        gated: false,
        finish: false,
        hunting: false,
        bus: None,
        buf: vec![0; if authenticated { IN_BUF } else { HELLO_LEN }],
        start: 0,
        end: 0,
        out: Out::default(),
    };
    let mut auth = Auth { key: HandshakeKey::from_job_key(0x42), nonce: [0; 16], seen: Default::default() };
    let mut sink = Count(0);
    let mut counters = PathCounters::default();
    let mut faults = None;
    let mut peers: Vec<Peer> = (0..4).map(|_| Peer::new(None, [0; 16])).collect();
    let mut repairs = Vec::new();
    let mut input = rest;
    'feed: while !input.is_empty() {
        if c.end == c.buf.len() {
            c.compact();
            if c.end == c.buf.len() {
                break;
            }
        }
        let n = cut.min(input.len()).min(c.buf.len() - c.end);
        c.buf[c.end..c.end + n].copy_from_slice(&input[..n]);
        c.end += n;
        input = &input[n..];
        loop {
            let parsed =
                c.parse(&mut auth, 0, 4, &mut sink, &mut counters, Checksum::Crc32c, &mut faults, &mut peers, &mut repairs);
            repairs.clear();
            match parsed {
                Parsed::More => break,
                Parsed::Hello(from, _) => {
                    // As `greeted` does for an accepted connection.
                    assert!(from < 4);
                    c.peer = Some(from);
                    c.buf.resize(IN_BUF, 0);
                }
                Parsed::Drop(_) | Parsed::Corrupt(..) => break 'feed,
            }
        }
        assert!(c.start <= c.end && c.end <= c.buf.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Collect(Vec<(u32, Vec<u8>)>);
    impl PacketSink for Collect {
        fn packet(&mut self, peer: u32, _hdr: &RawHeader, payload: &[u8]) {
            self.0.push((peer, payload.to_vec()));
        }
    }

    /// Descriptors this process holds on accepted sockets of the listener at `port`
    /// (asked of every descriptor with getsockname, so other tests' sockets running in
    /// parallel do not count; a socket shut down but never closed still counts).
    fn accepted_fds(port: u16) -> usize {
        let fds: Vec<i32> = std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect();
        fds.into_iter()
            .filter(|&fd| {
                // SAFETY: getsockname/getsockopt on a descriptor number; a stale or
                // non-socket one only makes them fail.
                unsafe {
                    let mut sa: libc::sockaddr_in = std::mem::zeroed();
                    let mut len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
                    if libc::getsockname(fd, (&mut sa as *mut libc::sockaddr_in).cast(), &mut len) != 0
                        || sa.sin_family != libc::AF_INET as libc::sa_family_t
                        || u16::from_be(sa.sin_port) != port
                    {
                        return false;
                    }
                    let mut listening: libc::c_int = 0;
                    let mut l = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
                    libc::getsockopt(fd, libc::SOL_SOCKET, libc::SO_ACCEPTCONN, (&mut listening as *mut libc::c_int).cast(), &mut l);
                    listening == 0
                }
            })
            .count()
    }

    /// Connects to `b` as rank `rank` of the job `job_key`, writing the connect message by
    /// hand with connector nonce `nonce_c` (with `forge`, a damaged MAC).
    fn connect_as(b: &TcpPath, rank: u32, job_key: u64, nonce_c: [u8; 16], forge: bool) -> TcpStream {
        let key = HandshakeKey::from_job_key(job_key);
        let mut s = TcpStream::connect(b.local_addr().unwrap()).unwrap();
        let hs = Handshake { rank_c: rank, rank_a: b.rank, nonce_c, nonce_a: b.auth.nonce };
        let mut m = hs.message(&key, rank, HELLO_CONNECT);
        if forge {
            m[40] ^= 1;
        }
        s.write_all(&m).unwrap();
        s
    }

    /// Security: the job key never crosses the wire. A relay between two ranks records
    /// every byte of a handshake and of frames both ways; the key is not among them, and
    /// a connector whose proof is wrong (or made for another job) is refused and counted.
    #[test]
    fn handshake_never_sends_the_key_and_forged_hellos_are_refused() {
        const KEY: u64 = 0x5eb1_7c0d_e4a9_3f61;
        let mut a = TcpPath::bind("127.0.0.1:0", 0, 2, KEY).unwrap();
        let mut b = TcpPath::bind("127.0.0.1:0", 1, 2, KEY).unwrap();
        let relay = TcpListener::bind("127.0.0.1:0").unwrap();
        let contact = b.contact().unwrap();
        let nonce = contact.split_once('#').unwrap().1;
        a.set_peer_contact(1, &format!("{}#{nonce}", relay.local_addr().unwrap())).unwrap();
        let baddr = b.local_addr().unwrap();
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
        let pump = |mut from: TcpStream, mut to: TcpStream, seen: std::sync::Arc<std::sync::Mutex<Vec<u8>>>| {
            std::thread::spawn(move || {
                let mut buf = [0u8; 65536];
                while let Ok(n) = from.read(&mut buf) {
                    if n == 0 || to.write_all(&buf[..n]).is_err() {
                        break;
                    }
                    seen.lock().unwrap().extend_from_slice(&buf[..n]);
                }
                let _ = to.shutdown(Shutdown::Write);
            })
        };
        let seen2 = seen.clone();
        std::thread::spawn(move || {
            let (x, _) = relay.accept().unwrap();
            let y = TcpStream::connect(baddr).unwrap();
            pump(x.try_clone().unwrap(), y.try_clone().unwrap(), seen2.clone());
            pump(y, x, seen2);
        });
        let mut got = Collect(Vec::new());
        a.send(1, &[1; HDR_LEN], b"from a").unwrap();
        poll_until(&mut [&mut a, &mut b], &mut got, |_, g| !g.0.is_empty());
        b.send(0, &[2; HDR_LEN], b"from b").unwrap();
        poll_until(&mut [&mut a, &mut b], &mut got, |_, g| g.0.len() == 2);
        assert_eq!(got.0, vec![(0, b"from a".to_vec()), (1, b"from b".to_vec())]);
        let seen = seen.lock().unwrap().clone();
        assert!(seen.len() > 2 * HELLO_LEN, "the relay saw {} bytes", seen.len());
        assert!(!seen.windows(8).any(|w| w == KEY.to_le_bytes() || w == KEY.to_be_bytes()), "job key on the wire");
        let before = b.counters().foreign_dropped;
        // A forged MAC, a connect made with another job's key, and a replay of a connect
        // that was accepted (same connector nonce), each followed by a frame.
        // Numbered 1: rank 0's frame 0 ("from a") was delivered already.
        let frame = |s: &mut TcpStream| {
            let _ = s.write_all(&encode_frame(1, 0, &[5u8; HDR_LEN], b"bad"));
        };
        let mut genuine = connect_as(&b, 0, KEY, [1; 16], false);
        frame(&mut genuine);
        poll_until(&mut [&mut b], &mut got, |_, g| g.0.len() == 3);
        for (key, nonce, forge) in [(KEY, [2; 16], true), (KEY ^ 1 << 40, [3; 16], false), (KEY, [1; 16], false)] {
            let mut f = connect_as(&b, 0, key, nonce, forge);
            frame(&mut f);
        }
        poll_until(&mut [&mut b], &mut got, |p, _| p[0].counters().foreign_dropped >= before + 3);
        assert_eq!(got.0.len(), 3, "nothing from a forger is delivered");
        // A connector refuses an impostor's answer (a listener that does not know the key).
        let impostor = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpPath::bind("127.0.0.1:0", 0, 2, KEY).unwrap();
        c.set_peer_contact(1, &format!("{}#{nonce}", impostor.local_addr().unwrap())).unwrap();
        c.send(1, &[0; HDR_LEN], b"to the impostor").unwrap();
        let (mut s, _) = impostor.accept().unwrap();
        let mut connect = [0u8; HELLO_LEN];
        s.read_exact(&mut connect).unwrap();
        let mut answer = connect;
        answer[8..12].copy_from_slice(&1u32.to_le_bytes());
        answer[12..16].copy_from_slice(&HELLO_ACCEPT.to_le_bytes());
        s.write_all(&answer).unwrap();
        frame(&mut s);
        let mut cgot = Collect(Vec::new());
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while c.counters().foreign_dropped == 0 {
            assert!(std::time::Instant::now() < deadline, "impostor's answer not refused");
            let _ = c.poll(&mut cgot);
        }
        assert!(cgot.0.is_empty());
    }

    fn poll_until(paths: &mut [&mut TcpPath], got: &mut Collect, mut done: impl FnMut(&[&mut TcpPath], &Collect) -> bool) {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while !done(paths, got) {
            assert!(std::time::Instant::now() < deadline, "condition not reached in time");
            for p in paths.iter_mut() {
                p.poll(got).unwrap();
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Security: a stranger's connections (wrong key, or silent) are closed, not kept
    /// half-open, and at most `MAX_PENDING_HELLOS` silent ones are held at a time.
    #[test]
    fn rejected_and_silent_connections_release_their_descriptors() {
        let mut a = TcpPath::bind("127.0.0.1:0", 0, 2, 42).unwrap();
        let mut b = TcpPath::bind("127.0.0.1:0", 1, 2, 42).unwrap();
        b.set_hello_timeout(Duration::from_millis(300));
        let baddr = b.local_addr().unwrap();
        a.set_peer_contact(1, &b.contact().unwrap()).unwrap();
        let mut got = Collect(Vec::new());
        // 100 connections with a wrong key, hung up by the stranger.
        for _ in 0..100 {
            let mut s = TcpStream::connect(baddr).unwrap();
            // A connect message, then a proof the stranger cannot make.
            let mut h = Handshake::default().message(&HandshakeKey::from_job_key(7), 0, HELLO_CONNECT).to_vec();
            h.extend_from_slice(&[0u8; 64]);
            s.write_all(&h).unwrap();
        }
        poll_until(&mut [&mut b], &mut got, |p, _| p[0].counters().foreign_dropped >= 100);
        assert!(accepted_fds(baddr.port()) <= 2, "rejected connections still hold {} descriptors", accepted_fds(baddr.port()));
        // 80 silent connections, kept open by the stranger.
        let silent: Vec<TcpStream> = (0..80).map(|_| TcpStream::connect(baddr).unwrap()).collect();
        let mut most = 0;
        poll_until(&mut [&mut b], &mut got, |p, _| {
            most = most.max(accepted_fds(baddr.port()));
            p[0].counters().foreign_dropped >= 180
        });
        assert!(most <= MAX_PENDING_HELLOS + 2, "{most} silent connections held at once");
        assert!(b.conns.len() <= MAX_PENDING_HELLOS + 2, "{} connection slots for 180 strangers", b.conns.len());
        assert!(accepted_fds(baddr.port()) <= 2);
        for mut s in silent {
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut one = [0u8; 1];
            assert_eq!(s.read(&mut one).unwrap_or(0), 0, "silent connection not closed");
        }
        // The job's own traffic still flows.
        a.send(1, &[0; HDR_LEN], b"after the strangers").unwrap();
        poll_until(&mut [&mut a, &mut b], &mut got, |_, g| !g.0.is_empty());
        assert_eq!(got.0[0], (0, b"after the strangers".to_vec()));
    }

    /// Security: `accept` failing (here `EMFILE`, as when strangers exhaust the
    /// descriptor limit) never fails the `poll` of a running MPI call. Runs in a child
    /// process, since it lowers the descriptor limit.
    #[test]
    fn accept_errors_never_fail_a_poll() {
        const NAME: &str = "tcp::tests::accept_errors_never_fail_a_poll";
        if std::env::var_os("STEADFAST_TEST_CHILD").is_none() {
            let out = std::process::Command::new(std::env::current_exe().unwrap())
                .args(["--exact", NAME, "--test-threads", "1", "--nocapture"])
                .env("STEADFAST_TEST_CHILD", "1")
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success() && text.contains("1 passed"), "{text}");
            return;
        }
        let mut b = TcpPath::bind("127.0.0.1:0", 1, 2, 42).unwrap();
        let baddr = b.local_addr().unwrap();
        // Each sends a byte, so the kernel hands it over (the listener defers silent ones).
        let _waiting: Vec<TcpStream> = (0..8)
            .map(|_| {
                let mut s = TcpStream::connect(baddr).unwrap();
                s.write_all(b"x").unwrap();
                s
            })
            .collect();
        // Allow no new descriptor: every accept fails with EMFILE.
        let used = std::fs::read_dir("/proc/self/fd").unwrap().count() as u64;
        let lim = libc::rlimit { rlim_cur: used.saturating_sub(1), rlim_max: used.saturating_sub(1) };
        // SAFETY: plain setrlimit on this (child) process.
        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) }, 0);
        let mut got = Collect(Vec::new());
        for _ in 0..(3 * EPOLL_EVERY) {
            b.poll(&mut got).expect("a failed accept reached the caller");
        }
        assert!(b.accept_errors > 0, "accept never failed: the test did not test anything");
    }

    #[test]
    fn frames_arrive_in_order_and_foreign_hello_is_dropped() {
        let mut a = TcpPath::bind("127.0.0.1:0", 0, 2, 42).unwrap();
        let mut b = TcpPath::bind("127.0.0.1:0", 1, 2, 42).unwrap();
        let baddr = b.local_addr().unwrap();
        a.set_peer_contact(1, &b.contact().unwrap()).unwrap();
        // A foreign process connecting with the wrong key must not get anything delivered.
        let mut foreign = TcpStream::connect(baddr).unwrap();
        let mut hello = [0u8; HELLO_LEN];
        hello[0..8].copy_from_slice(&HELLO_MAGIC.to_le_bytes());
        hello[8..16].copy_from_slice(&7u64.to_le_bytes());
        foreign.write_all(&hello).unwrap();
        foreign.write_all(&[48, 0, 0, 0]).unwrap();
        foreign.write_all(&[0u8; 48]).unwrap();
        let mut sent = Vec::new();
        let mut got = Collect(Vec::new());
        for i in 0..200u32 {
            let p: Vec<u8> = (0..(i as usize * 997) % 300_000).map(|j| (j as u32 ^ i) as u8).collect();
            while a.send(1, &[0; HDR_LEN], &p).unwrap() == SendStatus::Full {
                a.poll(&mut Collect(Vec::new())).unwrap();
                b.poll(&mut got).unwrap();
            }
            sent.push(p);
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while got.0.len() < sent.len() && std::time::Instant::now() < deadline {
            a.poll(&mut Collect(Vec::new())).unwrap();
            b.poll(&mut got).unwrap();
        }
        assert_eq!(got.0.len(), sent.len());
        for ((peer, p), s) in got.0.iter().zip(&sent) {
            assert_eq!(*peer, 0);
            assert_eq!(p, s);
        }
        assert!(b.counters().frames_dropped >= 1);
    }

    /// Payload `k` of the stream from `from`: distinct per message and sender.
    fn msg(from: u32, k: usize) -> Vec<u8> {
        (0..(k * 7919) % 70_000 + 1).map(|j| (j as u32 ^ (k as u32 * 31 + from)) as u8).collect()
    }

    /// Whichever rank sends first, and also when both connect at the same moment, the
    /// pair ends with one open connection carrying both directions, and every message
    /// arrives once and in order, also those sent around the switch from the higher rank's
    /// connection to the lower rank's. What is sent leaves without its sender polling again.
    #[test]
    fn one_connection_per_pair_whoever_connects() {
        for first in ["lower", "higher", "both"] {
            let mut p = [TcpPath::bind("127.0.0.1:0", 0, 2, 3).unwrap(), TcpPath::bind("127.0.0.1:0", 1, 2, 3).unwrap()];
            let contacts = [p[0].contact().unwrap(), p[1].contact().unwrap()];
            p[0].set_peer_contact(1, &contacts[1]).unwrap();
            p[1].set_peer_contact(0, &contacts[0]).unwrap();
            let n = 40;
            let mut sent = [0usize; 2];
            let mut got = [Collect(Vec::new()), Collect(Vec::new())];
            let starters: &[usize] = match first {
                "lower" => &[0],
                "higher" => &[1],
                _ => &[0, 1],
            };
            for &r in starters {
                for _ in 0..3 {
                    p[r].send(1 - r as u32, &[0; HDR_LEN], &msg(r as u32, sent[r])).unwrap();
                    sent[r] += 1;
                }
            }
            // Only the receivers poll: the first messages must arrive anyway.
            let deadline = std::time::Instant::now() + Duration::from_secs(20);
            for &r in starters {
                let to = 1 - r;
                while got[to].0.len() < 3 {
                    assert!(std::time::Instant::now() < deadline, "{first}: rank {r}'s messages need it to poll");
                    p[to].poll(&mut got[to]).unwrap();
                }
            }
            while got[0].0.len() < n || got[1].0.len() < n {
                assert!(std::time::Instant::now() < deadline, "{first}: stalled at {} / {}", got[0].0.len(), got[1].0.len());
                for r in 0..2 {
                    // Each side answers what it received, so sends overlap with the switch.
                    if sent[r] < n && sent[r] <= got[r].0.len() + 3 {
                        p[r].send(1 - r as u32, &[0; HDR_LEN], &msg(r as u32, sent[r])).unwrap();
                        sent[r] += 1;
                    }
                    p[r].poll(&mut got[r]).unwrap();
                }
            }
            let open = |p: &TcpPath| p.conns.iter().filter(|c| c.open).count();
            while open(&p[0]) + open(&p[1]) > 2 {
                assert!(std::time::Instant::now() < deadline, "{first}: {} and {} connections stay open", open(&p[0]), open(&p[1]));
                for r in 0..2 {
                    p[r].poll(&mut got[r]).unwrap();
                }
            }
            for r in 0..2 {
                let from = 1 - r as u32;
                assert_eq!(got[r].0.len(), n, "{first}: rank {r} got extra messages");
                for (k, (peer, payload)) in got[r].0.iter().enumerate() {
                    assert_eq!(*peer, from);
                    assert_eq!(*payload, msg(from, k), "{first}: rank {r}, message {k}");
                }
                assert_eq!(open(&p[r]), 1, "{first}: rank {r}");
                assert_eq!(p[r].backlog(), 0);
            }
            // Both directions use the lower rank's connection when it opened one.
            if first != "higher" {
                assert!(p[0].conns.iter().any(|c| c.open && c.opened), "{first}: rank 0's own connection lost");
            }
        }
    }

    /// Both ranks connect; the higher one switches to the lower one's connection before
    /// the lower one even accepted the higher one's. The frames sent after the switch
    /// must still be delivered after those sent before it.
    #[test]
    fn switch_to_the_lower_ranks_connection_keeps_order() {
        let mut a = TcpPath::bind("127.0.0.1:0", 0, 2, 8).unwrap();
        let mut b = TcpPath::bind("127.0.0.1:0", 1, 2, 8).unwrap();
        a.set_peer_contact(1, &b.contact().unwrap()).unwrap();
        b.set_peer_contact(0, &a.contact().unwrap()).unwrap();
        a.send(1, &[0; HDR_LEN], &msg(0, 0)).unwrap();
        for k in 0..3 {
            b.send(0, &[0; HDR_LEN], &msg(1, k)).unwrap();
        }
        let mut got_b = Collect(Vec::new());
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while got_b.0.is_empty() {
            assert!(std::time::Instant::now() < deadline, "rank 0's connection never accepted");
            b.poll(&mut got_b).unwrap();
        }
        assert!(matches!(b.peers[0].link, Link::Ready(i) if !b.conns[i].opened), "rank 1 did not switch");
        for k in 3..6 {
            b.send(0, &[0; HDR_LEN], &msg(1, k)).unwrap();
        }
        let mut got_a = Collect(Vec::new());
        while got_a.0.len() < 6 {
            assert!(std::time::Instant::now() < deadline, "stalled at {}", got_a.0.len());
            a.poll(&mut got_a).unwrap();
            b.poll(&mut got_b).unwrap();
        }
        for (k, (_, payload)) in got_a.0.iter().enumerate() {
            assert_eq!(*payload, msg(1, k), "message {k} out of order");
        }
    }

    /// A peer whose connection breaks is lost: what was queued for it is dropped (so it
    /// does not hold up MPI_Finalize) and later sends fail.
    #[test]
    fn broken_connection_loses_the_peer() {
        let mut a = TcpPath::bind("127.0.0.1:0", 0, 2, 4).unwrap();
        let mut b = TcpPath::bind("127.0.0.1:0", 1, 2, 4).unwrap();
        a.set_peer_contact(1, &b.contact().unwrap()).unwrap();
        a.send(1, &[0; HDR_LEN], &[1, 2, 3]).unwrap();
        let mut got = Collect(Vec::new());
        while got.0.is_empty() {
            b.poll(&mut got).unwrap();
        }
        drop(b);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let err = loop {
            assert!(std::time::Instant::now() < deadline, "broken connection not noticed");
            if let Err(e) = a.poll(&mut Collect(Vec::new())).and_then(|_| a.send(1, &[0; HDR_LEN], &[4; 100])) {
                break e;
            }
        };
        assert!(matches!(err, PathError::PeerLost(1, _)), "{err}");
        assert_eq!(a.backlog(), 0);
        assert!(matches!(a.send(1, &[0; HDR_LEN], &[5]), Err(PathError::PeerLost(1, _))));
    }

    /// Damage after the checksum (sender: `corrupt`, receiver: `bus`) is detected, never
    /// delivered, and repaired: the receiver asks for the frame again, the sender resends
    /// it (and what followed it) from the copy it keeps, and everything arrives once, in
    /// order. Acknowledgments then let the sender drop its copies.
    #[test]
    fn damaged_frames_are_resent_and_delivered_in_order() {
        use crate::fault::{FaultSpec, Injector};
        for (who, spec) in [("sender", "corrupt=1"), ("receiver", "bus=1")] {
            let mut a = TcpPath::bind("127.0.0.1:0", 0, 2, 5).unwrap();
            let mut b = TcpPath::bind("127.0.0.1:0", 1, 2, 5).unwrap();
            a.set_peer_contact(1, &b.contact().unwrap()).unwrap();
            b.set_peer_contact(0, &a.contact().unwrap()).unwrap();
            let inj = Injector::new(FaultSpec::parse(spec).unwrap(), 0);
            if who == "sender" {
                a.set_faults(inj);
            } else {
                b.set_faults(inj);
            }
            let frames: Vec<Vec<u8>> = (0..5u8).map(|k| vec![k; 5000]).collect();
            a.send(1, &[1; HDR_LEN], &frames[0]).unwrap();
            a.faults = None;
            for f in &frames[1..] {
                a.send(1, &[1; HDR_LEN], f).unwrap();
            }
            let mut got = Collect(Vec::new());
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while got.0.len() < frames.len() {
                assert!(std::time::Instant::now() < deadline, "{who}: not repaired");
                a.poll(&mut Collect(Vec::new())).unwrap();
                b.poll(&mut got).unwrap();
                if b.counters().corrupt_detected > 0 {
                    b.faults = None;
                }
            }
            let want: Vec<(u32, Vec<u8>)> = frames.iter().map(|f| (0, f.clone())).collect();
            assert_eq!(got.0, want, "{who}: every frame once, in order");
            assert_eq!(b.counters().corrupt_detected, 1, "{who}");
            assert!(a.counters().retransmits >= 1, "{who}");
            // An answer carries the acknowledgment: the sender's copies go.
            b.send(0, &[2; HDR_LEN], b"ack").unwrap();
            let mut back = Collect(Vec::new());
            poll_until(&mut [&mut a], &mut back, |_, g| !g.0.is_empty());
            assert_eq!(a.peers[1].tx.kept.len(), 0, "{who}: copies kept after the acknowledgment");
        }
    }

    /// Rendezvous data kept by reference (`send_held`): written from the caller's buffer,
    /// and resent from it when the receiver finds the frame damaged.
    #[test]
    fn damaged_frame_kept_by_reference_is_resent_from_the_callers_buffer() {
        use crate::fault::{FaultSpec, Injector};
        let mut a = TcpPath::bind("127.0.0.1:0", 0, 2, 8).unwrap();
        let mut b = TcpPath::bind("127.0.0.1:0", 1, 2, 8).unwrap();
        a.set_peer_contact(1, &b.contact().unwrap()).unwrap();
        b.set_peer_contact(0, &a.contact().unwrap()).unwrap();
        assert!(a.holds_references(1));
        let data: Vec<Vec<u8>> = (0..3u32).map(|k| (0..100_000u32).map(|i| (i * 7 + k) as u8).collect()).collect();
        b.set_faults(Injector::new(FaultSpec::parse("bus=1").unwrap(), 1));
        for d in &data {
            // SAFETY: `data` outlives the exchange and is not changed.
            assert_eq!(unsafe { a.send_held(1, &[6; HDR_LEN], d) }.unwrap(), SendStatus::Done);
        }
        assert!(a.peers[1].tx.kept.iter().all(|k| k.by_ref.is_some() && k.frame.len() == FRAME_PREFIX + HDR_LEN));
        let mut got = Collect(Vec::new());
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while got.0.len() < data.len() {
            assert!(std::time::Instant::now() < deadline, "not repaired");
            a.poll(&mut Collect(Vec::new())).unwrap();
            b.poll(&mut got).unwrap();
            if b.counters().corrupt_detected > 0 {
                b.faults = None;
            }
        }
        let want: Vec<(u32, Vec<u8>)> = data.iter().map(|d| (0, d.clone())).collect();
        assert_eq!(got.0, want);
        assert!(a.counters().retransmits >= 1);
    }

    /// A receiver that never answers still acknowledges on its own, so a one-way stream
    /// does not stall on the sender's limit of kept frames.
    #[test]
    fn one_way_stream_is_acknowledged_without_answers() {
        let mut a = TcpPath::bind("127.0.0.1:0", 0, 2, 6).unwrap();
        let mut b = TcpPath::bind("127.0.0.1:0", 1, 2, 6).unwrap();
        a.set_peer_contact(1, &b.contact().unwrap()).unwrap();
        b.set_peer_contact(0, &a.contact().unwrap()).unwrap();
        let n = 3 * KEEP_LIMIT_FRAMES;
        let mut sent = 0;
        let mut got = Collect(Vec::new());
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while got.0.len() < n {
            assert!(std::time::Instant::now() < deadline, "stalled at {sent} sent, {} received", got.0.len());
            while sent < n && a.send(1, &[0; HDR_LEN], &(sent as u32).to_le_bytes()).unwrap() == SendStatus::Done {
                sent += 1;
            }
            a.poll(&mut Collect(Vec::new())).unwrap();
            b.poll(&mut got).unwrap();
        }
        assert!(got.0.iter().enumerate().all(|(i, (_, p))| p[..] == (i as u32).to_le_bytes()));
        assert!(a.peers[1].tx.kept.len() <= KEEP_LIMIT_FRAMES);
    }

    /// Records packets the way the engine does with rendezvous data: copies the payload
    /// into its destination with the checksum fused into the copy, and counts the packet
    /// as delivered ("completes the receive") only if the checksum matched.
    struct FusingSink {
        dest: Vec<u8>,
        completed: Vec<Vec<u8>>,
        mismatches: usize,
    }
    impl PacketSink for FusingSink {
        fn packet(&mut self, _peer: u32, _hdr: &RawHeader, payload: &[u8]) {
            self.completed.push(payload.to_vec());
        }
        fn packet_unverified(&mut self, _peer: u32, _hdr: &RawHeader, payload: &[u8], seed: u32, expected: u32) -> bool {
            self.dest.resize(payload.len(), 0);
            let crc = crate::checksum::copy_with_crc32c_append(seed, &mut self.dest, payload);
            if crc != expected {
                self.mismatches += 1;
                return false;
            }
            self.completed.push(self.dest.clone());
            true
        }
    }

    /// Frames larger than several send pieces arrive intact through a sink that verifies
    /// while copying; the damaged one (sender-side damage after the checksum) never
    /// completes although its bytes were copied to the destination, and is resent.
    #[test]
    fn fused_receive_check_delivers_good_frames_and_repairs_damage() {
        use crate::fault::{FaultSpec, Injector};
        let mut a = TcpPath::bind("127.0.0.1:0", 0, 2, 9).unwrap();
        let mut b = TcpPath::bind("127.0.0.1:0", 1, 2, 9).unwrap();
        a.set_peer_contact(1, &b.contact().unwrap()).unwrap();
        b.set_peer_contact(0, &a.contact().unwrap()).unwrap();
        // Frames 1..=3 are sent intact, the 4th is damaged (its resent copy is not).
        a.set_faults(Injector::new(FaultSpec::parse("corrupt=1,after=3").unwrap(), 0));
        let sizes = [TCP_MAX_PAYLOAD, 300_003, 1, TCP_MAX_PAYLOAD - 5];
        let frames: Vec<Vec<u8>> =
            sizes.iter().enumerate().map(|(k, &n)| (0..n).map(|i| (i * 7 + k * 13) as u8).collect()).collect();
        let mut sink = FusingSink { dest: Vec::new(), completed: Vec::new(), mismatches: 0 };
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let mut next = 0;
        while sink.completed.len() < frames.len() {
            assert!(std::time::Instant::now() < deadline, "damage not repaired");
            if next < frames.len() && a.send(1, &[2; HDR_LEN], &frames[next]).unwrap() == SendStatus::Done {
                next += 1;
                if next == frames.len() {
                    a.faults = None;
                }
            }
            a.poll(&mut Collect(Vec::new())).unwrap();
            b.poll(&mut sink).unwrap();
        }
        assert_eq!(sink.completed, frames, "frames must arrive whole, once and in order");
        // The header CRC of the damaged frame may have caught it first (1–3 bits flipped
        // anywhere in header or payload): then the sink never saw it.
        assert!(sink.mismatches <= 1);
        assert_eq!(b.counters().corrupt_detected, 1);
        assert_eq!(b.counters().packets_received, 4);
    }

    impl TcpPath {
        fn debug_state(&self) -> String {
            let mut o = format!("rank {} timers {} ", self.rank, self.timers);
            for (i, p) in self.peers.iter().enumerate() {
                let r = &p.rx;
                o += &format!(
                    "[peer {i} link {:?} rx next {} awaiting {} answered {} req {} run {} repeat {:?} | tx next {} kept {}] ",
                    p.link, r.next, r.awaiting, r.answered, r.request, r.damage_run, r.repeat_at.map(|t| t.saturating_duration_since(std::time::Instant::now())), p.tx.next, p.tx.kept.len()
                );
            }
            for (i, c) in self.conns.iter().enumerate() {
                o += &format!("(conn {i} open {} peer {:?} hunting {} gated {} buffered {} out {}) ", c.open, c.peer, c.hunting, c.gated, c.end - c.start, c.out.pending());
            }
            o
        }
    }

    /// Reads exactly `n` bytes from a test peer's socket within a few seconds.
    fn read_n(s: &mut TcpStream, n: usize, poll: &mut dyn FnMut()) -> Vec<u8> {
        s.set_nonblocking(true).unwrap();
        let mut v = vec![0; n];
        let mut got = 0;
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while got < n {
            assert!(std::time::Instant::now() < deadline, "{got} of {n} bytes came");
            match s.read(&mut v[got..]) {
                Ok(0) => panic!("closed"),
                Ok(k) => got += k,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    poll();
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(e) => panic!("{e}"),
            }
        }
        v
    }

    /// A length word damaged in flight is caught by the prefix CRC at once (the receiver
    /// does not wait for a frame that never completes). The receiver then throws bytes
    /// away up to a sync frame and asks for a resend; the sender answers with a sync frame
    /// and the frames from the lost one on. A damaged answer is not found, so the
    /// request is sent again on its timer. Everything arrives once, in order.
    #[test]
    fn damaged_length_word_is_resynchronised_and_repaired() {
        let b = std::cell::RefCell::new(TcpPath::bind("127.0.0.1:0", 1, 2, 77).unwrap());
        let mut s = connect_as(&b.borrow(), 0, 77, [4; 16], false);
        let got = std::cell::RefCell::new(Collect(Vec::new()));
        let mut poll = || {
            b.borrow_mut().poll(&mut *got.borrow_mut()).expect("damage reported instead of repaired");
        };
        let hello = read_n(&mut s, HELLO_LEN, &mut poll);
        assert_eq!(read_hello(&hello).kind, HELLO_ACCEPT);
        let frames: Vec<Vec<u8>> = (0..3u32).map(|k| encode_frame(k, 0, &[3u8; HDR_LEN], &[k as u8 + 1; 100])).collect();
        let mut bad = frames[1].clone();
        bad[2] ^= 1 << 2; // still a valid length, far more than will come
        s.write_all(&[&frames[0][..], &bad, &frames[2]].concat()).unwrap();
        // The request: a sync frame asking for frame 1 on, saying bytes were thrown away.
        let req = read_sync(&read_n(&mut s, SYNC_LEN, &mut poll)).expect("a sync frame");
        assert_eq!((req.flags, req.from), (SYNC_REQUEST | SYNC_HUNTED, 1));
        assert_eq!(got.borrow().0.len(), 1, "the frame before the damage is delivered");
        let answer = Sync { from: 0, ack: 0, flags: SYNC_ANSWER, request: 0, echo: req.request, next: 3 };
        // A damaged answer is never found: the request comes again after its timer.
        let mut damaged = sync_frame(&answer);
        damaged[30] ^= 1;
        s.write_all(&[&damaged[..], &frames[1], &frames[2]].concat()).unwrap();
        let t = std::time::Instant::now();
        let again = read_sync(&read_n(&mut s, SYNC_LEN, &mut poll)).expect("a sync frame");
        assert!(t.elapsed() >= REPEAT_FIRST / 2, "repeated after {:?}", t.elapsed());
        assert_eq!((again.flags, again.from, again.request), (SYNC_REQUEST | SYNC_HUNTED, 1, req.request));
        assert_eq!(b.borrow().counters().requests_repeated, 1);
        // The real answer: garbage first (the rest of a frame), then the sync frame.
        s.write_all(&[&[7u8; 33][..], &sync_frame(&answer), &frames[1], &frames[2]].concat()).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while got.borrow().0.len() < 3 {
            assert!(std::time::Instant::now() < deadline, "not repaired");
            poll();
        }
        let want: Vec<(u32, Vec<u8>)> = (0..3u8).map(|k| (0, vec![k + 1; 100])).collect();
        assert_eq!(got.borrow().0, want);
        let c = b.borrow().counters();
        assert_eq!((c.corrupt_detected, c.resyncs), (1, 1), "{c}");
        // Nothing is missing: no more requests.
        std::thread::sleep(REPEAT_FIRST * 3);
        poll();
        assert_eq!(b.borrow().counters().requests_repeated, 1);
    }

    /// A repair request that gets no answer (on TCP: thrown away by a peer hunting for
    /// frame boundaries) is sent again on a timer, each wait longer, until the frame came.
    #[test]
    fn unanswered_repair_request_is_sent_again_with_backoff() {
        let b = std::cell::RefCell::new(TcpPath::bind("127.0.0.1:0", 1, 2, 78).unwrap());
        let mut s = connect_as(&b.borrow(), 0, 78, [5; 16], false);
        let got = std::cell::RefCell::new(Collect(Vec::new()));
        let mut poll = || {
            b.borrow_mut().poll(&mut *got.borrow_mut()).expect("damage reported instead of repaired");
        };
        read_n(&mut s, HELLO_LEN, &mut poll);
        let frame = encode_frame(0, 0, &[3u8; HDR_LEN], &[9; 100]);
        let mut bad = frame.clone();
        bad[FRAME_PREFIX + HDR_LEN + 50] ^= 0x10; // payload damage: the stream stays in step
        s.write_all(&bad).unwrap();
        let first = read_sync(&read_n(&mut s, SYNC_LEN, &mut poll)).expect("a request");
        assert_eq!((first.flags, first.from), (SYNC_REQUEST, 0));
        // Ignored twice: each repeat waits longer than the one before.
        let t0 = std::time::Instant::now();
        let second = read_sync(&read_n(&mut s, SYNC_LEN, &mut poll)).expect("a repeat");
        let t1 = std::time::Instant::now();
        let third = read_sync(&read_n(&mut s, SYNC_LEN, &mut poll)).expect("another repeat");
        let (d1, d2) = (t1 - t0, t1.elapsed());
        assert!(d2 > d1, "backoff: {d1:?} then {d2:?}");
        for r in [second, third] {
            assert_eq!((r.flags, r.from, r.request), (first.flags, 0, first.request));
        }
        let answer = Sync { from: 0, ack: 0, flags: SYNC_ANSWER, request: 0, echo: first.request, next: 1 };
        s.write_all(&[&sync_frame(&answer)[..], &frame].concat()).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while got.borrow().0.is_empty() {
            assert!(std::time::Instant::now() < deadline, "not repaired");
            poll();
        }
        assert_eq!(got.borrow().0, vec![(0, vec![9; 100])]);
        assert_eq!(b.borrow().counters().requests_repeated, 2);
        assert!(!b.borrow().timers || { poll(); !b.borrow().timers });
    }

    /// Heavy damage both ways on the wire (`corrupt`) and in the receivers' memory (`bus`),
    /// anywhere in data frames, acknowledgments and sync frames, length words included:
    /// every frame arrives once and in order on both sides, and the counters show length
    /// words lost and found again.
    #[test]
    fn heavy_damage_anywhere_in_any_frame_is_repaired_both_ways() {
        use crate::fault::{FaultSpec, Injector};
        let mut a = TcpPath::bind("127.0.0.1:0", 0, 2, 12).unwrap();
        let mut b = TcpPath::bind("127.0.0.1:0", 1, 2, 12).unwrap();
        a.set_peer_contact(1, &b.contact().unwrap()).unwrap();
        b.set_peer_contact(0, &a.contact().unwrap()).unwrap();
        let spec = FaultSpec::parse("corrupt=0.05,bus=0.05,seed=3").unwrap();
        a.set_faults(Injector::new(spec.clone(), 0));
        b.set_faults(Injector::new(spec, 1));
        let n = 2000usize;
        // Mostly small frames (a length word is a large part of them), some large ones.
        let payload = |from: usize, k: usize| -> Vec<u8> {
            let len = if k.is_multiple_of(97) { 200_000 } else { (k * 13) % 300 };
            (0..len).map(|i| (i + k * 7 + from * 3) as u8).collect()
        };
        let mut got = [Collect(Vec::new()), Collect(Vec::new())];
        let mut sent = [0usize; 2];
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while got[0].0.len() < n || got[1].0.len() < n {
            assert!(
                std::time::Instant::now() < deadline,
                "stalled: sent {sent:?}, got {} / {}\n{}\n{}\n{}\n{}",
                got[0].0.len(),
                got[1].0.len(),
                a.debug_state(),
                b.debug_state(),
                a.counters(),
                b.counters()
            );
            for (me, path) in [&mut a, &mut b].into_iter().enumerate() {
                let to = 1 - me as u32;
                while sent[me] < n && path.send(to, &[1; HDR_LEN], &payload(me, sent[me])).unwrap() == SendStatus::Done {
                    sent[me] += 1;
                    if sent[me] % 50 == 0 {
                        break;
                    }
                }
                path.poll(&mut got[me]).expect("damage reported instead of repaired");
            }
        }
        for (me, g) in got.iter().enumerate() {
            let from = 1 - me;
            assert!(g.0.iter().enumerate().all(|(k, (p, d))| *p == from as u32 && *d == payload(from, k)), "rank {me}: wrong data");
        }
        let (ca, cb) = (a.counters(), b.counters());
        assert!(ca.injected_corrupt + cb.injected_corrupt > 0 && ca.injected_bus + cb.injected_bus > 0, "{ca} / {cb}");
        assert!(ca.resyncs > 0 && cb.resyncs > 0, "length words lost and found: {ca} / {cb}");
        assert!(ca.retransmits > 0 && cb.retransmits > 0, "{ca} / {cb}");
    }
}
