//! Control-channel wire format between the launcher and each rank.
//!
//! Every message is one frame: a 4-byte big-endian body length followed by the body.
//! The body starts with a one-byte tag; fields follow in big-endian order and strings are
//! a 4-byte length plus UTF-8 bytes. Decoding is checked: a short, oversized, trailing or
//! unknown frame is a [`WireError`], never a panic, and nothing is allocated before the
//! declared length has been checked against [`MAX_FRAME`].

use crate::event::{ExitStatus, LauncherEvent};
use thiserror::Error;

/// Protocol version sent in `Hello`; the launcher rejects any other value.
pub const PROTOCOL_VERSION: u16 = 1;
/// Bytes every `Hello` starts with, so a stray connection is recognised at once.
pub const HELLO_MAGIC: [u8; 4] = *b"SFBT";
/// Largest accepted frame body (1 MiB): bounds memory used by one peer.
pub const MAX_FRAME: usize = 1 << 20;

/// A frame that could not be decoded.
#[derive(Debug, Clone, Error, PartialEq, Eq)]
pub enum WireError {
    /// The frame declared a body length of zero.
    #[error("empty frame")]
    Empty,
    /// The frame declared a body longer than [`MAX_FRAME`].
    #[error("frame of {0} bytes exceeds the {MAX_FRAME}-byte limit")]
    TooLarge(usize),
    /// A field ran past the end of the frame body.
    #[error("truncated frame")]
    Truncated,
    /// Bytes were left over after the last field.
    #[error("{0} trailing bytes after message")]
    Trailing(usize),
    /// The tag byte names no known message.
    #[error("unknown message tag {0:#04x}")]
    UnknownTag(u8),
    /// A string field was not valid UTF-8.
    #[error("string field is not valid UTF-8")]
    BadUtf8,
    /// A field held a value outside its domain.
    #[error("invalid field: {0}")]
    BadField(&'static str),
}

/// Messages a rank sends to the launcher.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientMsg {
    /// First message on a connection: protocol version, claimed rank and a fresh nonce.
    /// The launcher answers with [`ServerMsg::Challenge`]; the job key itself is never
    /// sent (see [`handshake_mac`]).
    Hello { version: u16, rank: u32, nonce: [u8; 16] },
    /// Second message: proof that the rank knows the job key, the MAC of
    /// [`HANDSHAKE_PROOF`] over the transcript.
    Proof { mac: [u8; 32] },
    /// Publish `key = value` in the job's key-value space.
    Put { key: String, value: String },
    /// Ask for `key`; answered with `Value` once some rank has put it.
    Get { key: String },
    /// Enter barrier number `epoch` (0, 1, 2, ... per rank).
    Fence { epoch: u64 },
    /// MPI_Abort: tear the job down and exit with `code`.
    Abort { code: i32, msg: String },
    /// The rank reached MPI_Finalize.
    Finalize,
    /// A restarted rank (incarnation > 0) published its addresses and joins the running
    /// job; answered with `RejoinAck`, and the others are sent `RankRejoined`.
    Rejoin,
    /// A message of the coordinated-checkpoint protocol for the checkpoint scheduler
    /// (`steadfast-rollback` wire bytes: DONE, FAILED, ROLLED_BACK).
    Recovery { bytes: Vec<u8> },
    /// The rank is at its cut of checkpoint wave `wave` and writes nothing until answered
    /// with `OutputMarked`: the launcher notes how much of its output came before the cut.
    OutputMark { wave: u64 },
    /// `MPIX_Checkpoint`: the rank asks for a checkpoint wave now.
    CheckpointNow,
    /// `MPI_Comm_spawn(_multiple)` at the root: start the commands as one new world whose
    /// parents are `parents` (job-wide process indices) over intercommunicator context
    /// `ctx`. Answered with `Spawned`.
    Spawn { ctx: u32, parents: Vec<u32>, cmds: Vec<SpawnCmd> },
}

/// One command of a spawn request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SpawnCmd {
    pub program: String,
    pub args: Vec<String>,
    pub maxprocs: u32,
    /// `wdir` info key: the working directory.
    pub wdir: Option<String>,
    /// `path` info key: directories searched for the program (before `PATH`).
    pub path: Option<String>,
    /// `host` info key: the host to start the processes on.
    pub host: Option<String>,
}

/// Messages the launcher sends to a rank.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerMsg {
    /// Answer to `Hello`: the launcher's nonce and its own proof that it knows the job
    /// key (the MAC of [`HANDSHAKE_CHALLENGE`] over the transcript).
    Challenge { nonce: [u8; 16], mac: [u8; 32] },
    /// Handshake accepted; `size` repeats the world size as a consistency check.
    Welcome { size: u32 },
    /// Answer to `Get`.
    Value { key: String, value: String },
    /// Barrier `epoch` is complete.
    FenceDone { epoch: u64 },
    /// The abort request was received; teardown follows.
    AbortAck,
    /// The finalize notice was recorded.
    FinalizeAck,
    /// Asynchronous notice, may arrive at any time.
    Event(LauncherEvent),
    /// The launcher found the rank's request invalid and will close the connection.
    Error { msg: String },
    /// Answer to `Rejoin`: the job's next fence epoch (the start-up fence is long over).
    RejoinAck { fence_epoch: u64 },
    /// Answer to `OutputMark`.
    OutputMarked { wave: u64 },
    /// Answer to `Spawn`: the job-wide index of the new world's rank 0 and one error code
    /// per process asked for (0: started; otherwise an `errno` value).
    Spawned { base: u32, codes: Vec<i32>, msg: String },
}

/// What the launcher's challenge MACs (see [`handshake_mac`]).
pub const HANDSHAKE_CHALLENGE: u8 = 1;
/// What a rank's proof MACs.
pub const HANDSHAKE_PROOF: u8 = 2;

/// MAC of one side of the control handshake: keyed BLAKE3, under a key derived from the
/// job key, over `role`, the protocol version, the claimed rank and both nonces. Each side
/// proves it knows the job key without sending it; the nonces make every MAC fresh, and
/// `role` keeps the launcher's answer from being replayed as a rank's proof.
pub fn handshake_mac(job_key: u64, role: u8, version: u16, rank: u32, nonce_rank: &[u8; 16], nonce_launcher: &[u8; 16]) -> [u8; 32] {
    let key = blake3::derive_key("steadfast control handshake v1", &job_key.to_le_bytes());
    let mut m = [0u8; 39];
    m[0] = role;
    m[1..3].copy_from_slice(&version.to_le_bytes());
    m[3..7].copy_from_slice(&rank.to_le_bytes());
    m[7..23].copy_from_slice(nonce_rank);
    m[23..39].copy_from_slice(nonce_launcher);
    *blake3::keyed_hash(&key, &m).as_bytes()
}

/// Compares two MACs in constant time.
pub fn mac_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    blake3::Hash::from(*a) == blake3::Hash::from(*b)
}

mod tag {
    pub const HELLO: u8 = 0x01;
    pub const PUT: u8 = 0x02;
    pub const GET: u8 = 0x03;
    pub const FENCE: u8 = 0x04;
    pub const ABORT: u8 = 0x05;
    pub const FINALIZE: u8 = 0x06;
    pub const REJOIN: u8 = 0x07;
    pub const PROOF: u8 = 0x08;
    pub const RECOVERY: u8 = 0x09;
    pub const OUTPUT_MARK: u8 = 0x0a;
    pub const CHECKPOINT_NOW: u8 = 0x0b;
    pub const SPAWN: u8 = 0x0c;
    pub const SPAWNED: u8 = 0x8a;

    pub const WELCOME: u8 = 0x81;
    pub const VALUE: u8 = 0x82;
    pub const FENCE_DONE: u8 = 0x83;
    pub const ABORT_ACK: u8 = 0x84;
    pub const FINALIZE_ACK: u8 = 0x85;
    pub const ERROR: u8 = 0x86;
    pub const REJOIN_ACK: u8 = 0x87;
    pub const CHALLENGE: u8 = 0x88;
    pub const OUTPUT_MARKED: u8 = 0x89;
    pub const EV_RANK_EXITED: u8 = 0x90;
    pub const EV_RANK_REJOINED: u8 = 0x91;
    pub const EV_RECOVERY: u8 = 0x92;
}

/// A byte field's length (a longer one cannot fit a frame; `finish` rejects it).
fn len32(b: &[u8]) -> u32 {
    u32::try_from(b.len()).unwrap_or(u32::MAX)
}

/// A list's length (a longer one cannot fit a frame; `finish` rejects it).
fn len32_items(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Builds one frame (length prefix included).
struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    fn new(tag: u8) -> Self {
        let mut buf = Vec::with_capacity(32);
        buf.extend_from_slice(&[0, 0, 0, 0, tag]);
        Writer { buf }
    }
    fn u8(mut self, v: u8) -> Self {
        self.buf.push(v);
        self
    }
    fn u16(mut self, v: u16) -> Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn u32(mut self, v: u32) -> Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn i32(mut self, v: i32) -> Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn u64(mut self, v: u64) -> Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }
    fn bytes(mut self, v: &[u8]) -> Self {
        self.buf.extend_from_slice(v);
        self
    }
    fn str(self, v: &str) -> Self {
        // Lengths beyond u32 cannot fit a frame anyway; `finish` rejects them.
        let len = u32::try_from(v.len()).unwrap_or(u32::MAX);
        self.u32(len).bytes(v.as_bytes())
    }
    fn finish(mut self) -> Result<Vec<u8>, WireError> {
        let body = self.buf.len() - 4;
        if body > MAX_FRAME {
            return Err(WireError::TooLarge(body));
        }
        let len = (body as u32).to_be_bytes();
        self.buf[..4].copy_from_slice(&len);
        Ok(self.buf)
    }
}

/// Checked cursor over one frame body.
struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        if self.buf.len() < n {
            return Err(WireError::Truncated);
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], WireError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }
    fn u8(&mut self) -> Result<u8, WireError> {
        Ok(self.array::<1>()?[0])
    }
    fn u16(&mut self) -> Result<u16, WireError> {
        Ok(u16::from_be_bytes(self.array()?))
    }
    fn u32(&mut self) -> Result<u32, WireError> {
        Ok(u32::from_be_bytes(self.array()?))
    }
    fn i32(&mut self) -> Result<i32, WireError> {
        Ok(i32::from_be_bytes(self.array()?))
    }
    fn u64(&mut self) -> Result<u64, WireError> {
        Ok(u64::from_be_bytes(self.array()?))
    }
    fn string(&mut self) -> Result<String, WireError> {
        let len = self.u32()? as usize;
        let raw = self.take(len)?;
        std::str::from_utf8(raw)
            .map(str::to_owned)
            .map_err(|_| WireError::BadUtf8)
    }
    fn blob(&mut self) -> Result<Vec<u8>, WireError> {
        let len = self.u32()? as usize;
        Ok(self.take(len)?.to_vec())
    }
    fn bool(&mut self) -> Result<bool, WireError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(WireError::BadField("boolean")),
        }
    }
    /// A list length whose items take at least `min_item` bytes each: a count the rest of
    /// the frame cannot hold is refused before anything is allocated.
    fn count(&mut self, min_item: usize) -> Result<usize, WireError> {
        let n = self.u32()? as usize;
        if n.saturating_mul(min_item) > self.buf.len() {
            return Err(WireError::Truncated);
        }
        Ok(n)
    }
    fn end(&self) -> Result<(), WireError> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(WireError::Trailing(self.buf.len()))
        }
    }
}

impl ClientMsg {
    /// Encodes the message as one frame.
    pub fn encode(&self) -> Result<Vec<u8>, WireError> {
        match self {
            ClientMsg::Hello { version, rank, nonce } => Writer::new(tag::HELLO)
                .bytes(&HELLO_MAGIC)
                .u16(*version)
                .u32(*rank)
                .bytes(nonce),
            ClientMsg::Proof { mac } => Writer::new(tag::PROOF).bytes(mac),
            ClientMsg::Put { key, value } => Writer::new(tag::PUT).str(key).str(value),
            ClientMsg::Get { key } => Writer::new(tag::GET).str(key),
            ClientMsg::Fence { epoch } => Writer::new(tag::FENCE).u64(*epoch),
            ClientMsg::Abort { code, msg } => Writer::new(tag::ABORT).i32(*code).str(msg),
            ClientMsg::Finalize => Writer::new(tag::FINALIZE),
            ClientMsg::Rejoin => Writer::new(tag::REJOIN),
            ClientMsg::Recovery { bytes } => Writer::new(tag::RECOVERY).u32(len32(bytes)).bytes(bytes),
            ClientMsg::OutputMark { wave } => Writer::new(tag::OUTPUT_MARK).u64(*wave),
            ClientMsg::CheckpointNow => Writer::new(tag::CHECKPOINT_NOW),
            ClientMsg::Spawn { ctx, parents, cmds } => {
                let mut w = Writer::new(tag::SPAWN).u32(*ctx).u32(len32_items(parents.len()));
                for p in parents {
                    w = w.u32(*p);
                }
                w = w.u32(len32_items(cmds.len()));
                for c in cmds {
                    w = w.str(&c.program).u32(c.maxprocs).u32(len32_items(c.args.len()));
                    for a in &c.args {
                        w = w.str(a);
                    }
                    for o in [&c.wdir, &c.path, &c.host] {
                        w = match o {
                            Some(v) => w.u8(1).str(v),
                            None => w.u8(0),
                        };
                    }
                }
                w
            }
        }
        .finish()
    }

    /// Decodes one frame body (without the length prefix).
    pub fn decode(body: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader { buf: body };
        let msg = match r.u8()? {
            tag::HELLO => {
                if r.array::<4>()? != HELLO_MAGIC {
                    return Err(WireError::BadField("hello magic"));
                }
                ClientMsg::Hello {
                    version: r.u16()?,
                    rank: r.u32()?,
                    nonce: r.array()?,
                }
            }
            tag::PROOF => ClientMsg::Proof { mac: r.array()? },
            tag::PUT => ClientMsg::Put {
                key: r.string()?,
                value: r.string()?,
            },
            tag::GET => ClientMsg::Get { key: r.string()? },
            tag::FENCE => ClientMsg::Fence { epoch: r.u64()? },
            tag::ABORT => ClientMsg::Abort {
                code: r.i32()?,
                msg: r.string()?,
            },
            tag::FINALIZE => ClientMsg::Finalize,
            tag::REJOIN => ClientMsg::Rejoin,
            tag::RECOVERY => ClientMsg::Recovery { bytes: r.blob()? },
            tag::OUTPUT_MARK => ClientMsg::OutputMark { wave: r.u64()? },
            tag::CHECKPOINT_NOW => ClientMsg::CheckpointNow,
            tag::SPAWN => {
                let ctx = r.u32()?;
                let n = r.count(4)?;
                let parents = (0..n).map(|_| r.u32()).collect::<Result<Vec<_>, _>>()?;
                let n = r.count(9)?;
                let mut cmds = Vec::with_capacity(n);
                for _ in 0..n {
                    let program = r.string()?;
                    let maxprocs = r.u32()?;
                    let na = r.count(4)?;
                    let args = (0..na).map(|_| r.string()).collect::<Result<Vec<_>, _>>()?;
                    let mut opt = || -> Result<Option<String>, WireError> { if r.bool()? { Ok(Some(r.string()?)) } else { Ok(None) } };
                    let (wdir, path, host) = (opt()?, opt()?, opt()?);
                    cmds.push(SpawnCmd { program, args, maxprocs, wdir, path, host });
                }
                ClientMsg::Spawn { ctx, parents, cmds }
            }
            other => return Err(WireError::UnknownTag(other)),
        };
        r.end()?;
        Ok(msg)
    }
}

impl ServerMsg {
    /// Encodes the message as one frame.
    pub fn encode(&self) -> Result<Vec<u8>, WireError> {
        match self {
            ServerMsg::Challenge { nonce, mac } => Writer::new(tag::CHALLENGE).bytes(nonce).bytes(mac),
            ServerMsg::Welcome { size } => Writer::new(tag::WELCOME).u32(*size),
            ServerMsg::Value { key, value } => Writer::new(tag::VALUE).str(key).str(value),
            ServerMsg::FenceDone { epoch } => Writer::new(tag::FENCE_DONE).u64(*epoch),
            ServerMsg::AbortAck => Writer::new(tag::ABORT_ACK),
            ServerMsg::FinalizeAck => Writer::new(tag::FINALIZE_ACK),
            ServerMsg::Error { msg } => Writer::new(tag::ERROR).str(msg),
            ServerMsg::RejoinAck { fence_epoch } => Writer::new(tag::REJOIN_ACK).u64(*fence_epoch),
            ServerMsg::OutputMarked { wave } => Writer::new(tag::OUTPUT_MARKED).u64(*wave),
            ServerMsg::Spawned { base, codes, msg } => {
                let mut w = Writer::new(tag::SPAWNED).u32(*base).u32(len32_items(codes.len()));
                for c in codes {
                    w = w.i32(*c);
                }
                w.str(msg)
            }
            ServerMsg::Event(LauncherEvent::Recovery { bytes }) => {
                Writer::new(tag::EV_RECOVERY).u32(len32(bytes)).bytes(bytes)
            }
            ServerMsg::Event(LauncherEvent::RankRejoined { rank, incarnation }) => {
                Writer::new(tag::EV_RANK_REJOINED).u32(*rank).u16(*incarnation)
            }
            ServerMsg::Event(LauncherEvent::RankExited {
                rank,
                status,
                finalized,
            }) => {
                let (kind, value) = match status {
                    ExitStatus::Exited(c) => (0u8, *c),
                    ExitStatus::Signaled(s) => (1u8, *s),
                };
                Writer::new(tag::EV_RANK_EXITED)
                    .u32(*rank)
                    .u8(kind)
                    .i32(value)
                    .u8(u8::from(*finalized))
            }
            ServerMsg::Event(LauncherEvent::Disconnected) => {
                // Synthesised locally by the client; never sent.
                return Err(WireError::BadField("Disconnected is not a wire event"));
            }
        }
        .finish()
    }

    /// Decodes one frame body (without the length prefix).
    pub fn decode(body: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader { buf: body };
        let msg = match r.u8()? {
            tag::CHALLENGE => ServerMsg::Challenge { nonce: r.array()?, mac: r.array()? },
            tag::WELCOME => ServerMsg::Welcome { size: r.u32()? },
            tag::VALUE => ServerMsg::Value {
                key: r.string()?,
                value: r.string()?,
            },
            tag::FENCE_DONE => ServerMsg::FenceDone { epoch: r.u64()? },
            tag::ABORT_ACK => ServerMsg::AbortAck,
            tag::FINALIZE_ACK => ServerMsg::FinalizeAck,
            tag::ERROR => ServerMsg::Error { msg: r.string()? },
            tag::REJOIN_ACK => ServerMsg::RejoinAck { fence_epoch: r.u64()? },
            tag::OUTPUT_MARKED => ServerMsg::OutputMarked { wave: r.u64()? },
            tag::SPAWNED => {
                let base = r.u32()?;
                let n = r.count(4)?;
                let codes = (0..n).map(|_| r.i32()).collect::<Result<Vec<_>, _>>()?;
                ServerMsg::Spawned { base, codes, msg: r.string()? }
            }
            tag::EV_RECOVERY => ServerMsg::Event(LauncherEvent::Recovery { bytes: r.blob()? }),
            tag::EV_RANK_REJOINED => ServerMsg::Event(LauncherEvent::RankRejoined {
                rank: r.u32()?,
                incarnation: r.u16()?,
            }),
            tag::EV_RANK_EXITED => {
                let rank = r.u32()?;
                let status = match (r.u8()?, r.i32()?) {
                    (0, c) => ExitStatus::Exited(c),
                    (1, s) => ExitStatus::Signaled(s),
                    _ => return Err(WireError::BadField("exit kind")),
                };
                ServerMsg::Event(LauncherEvent::RankExited {
                    rank,
                    status,
                    finalized: r.bool()?,
                })
            }
            other => return Err(WireError::UnknownTag(other)),
        };
        r.end()?;
        Ok(msg)
    }
}

/// Reassembles frames from a byte stream that arrives in arbitrary pieces.
#[derive(Debug, Default)]
pub struct FrameBuf {
    buf: Vec<u8>,
    start: usize,
}

impl FrameBuf {
    /// Creates an empty buffer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends bytes read from the stream.
    pub fn extend(&mut self, data: &[u8]) {
        if self.start > 0 && self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        }
        self.buf.extend_from_slice(data);
    }

    /// Bytes received but not yet returned as frames.
    pub fn pending(&self) -> usize {
        self.buf.len() - self.start
    }

    /// Returns the next complete frame body, `Ok(None)` if more bytes are needed, or an
    /// error if the length prefix is invalid (the stream cannot be resynchronised then).
    pub fn next_body(&mut self) -> Result<Option<Vec<u8>>, WireError> {
        let avail = &self.buf[self.start..];
        if avail.len() < 4 {
            return Ok(None);
        }
        let len = u32::from_be_bytes([avail[0], avail[1], avail[2], avail[3]]) as usize;
        if len == 0 {
            return Err(WireError::Empty);
        }
        if len > MAX_FRAME {
            return Err(WireError::TooLarge(len));
        }
        if avail.len() < 4 + len {
            return Ok(None);
        }
        let body = avail[4..4 + len].to_vec();
        self.start += 4 + len;
        // Compact once the consumed prefix dominates, keeping extend amortised O(1).
        if self.start > 64 * 1024 && self.start * 2 > self.buf.len() {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        Ok(Some(body))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client_roundtrip(m: ClientMsg) {
        let frame = m.encode().unwrap();
        let mut fb = FrameBuf::new();
        // Feed one byte at a time: framing must not depend on read boundaries.
        let mut out = None;
        for b in &frame {
            assert!(out.is_none());
            fb.extend(std::slice::from_ref(b));
            out = fb.next_body().unwrap();
        }
        assert_eq!(ClientMsg::decode(&out.unwrap()).unwrap(), m);
        assert_eq!(fb.pending(), 0);
    }

    fn server_roundtrip(m: ServerMsg) {
        let frame = m.encode().unwrap();
        assert_eq!(ServerMsg::decode(&frame[4..]).unwrap(), m);
    }

    #[test]
    fn roundtrips() {
        client_roundtrip(ClientMsg::Hello {
            version: 1,
            rank: 7,
            nonce: [0xa5; 16],
        });
        client_roundtrip(ClientMsg::Proof { mac: [7; 32] });
        server_roundtrip(ServerMsg::Challenge { nonce: [1; 16], mac: [2; 32] });
        client_roundtrip(ClientMsg::Put {
            key: "k".into(),
            value: "välue".into(),
        });
        client_roundtrip(ClientMsg::Get { key: String::new() });
        client_roundtrip(ClientMsg::Fence { epoch: 3 });
        client_roundtrip(ClientMsg::Abort {
            code: -2,
            msg: "bye".into(),
        });
        client_roundtrip(ClientMsg::Finalize);
        client_roundtrip(ClientMsg::Spawn {
            ctx: 12,
            parents: vec![0, 3, 5],
            cmds: vec![
                SpawnCmd { program: "./child".into(), args: vec!["a".into(), String::new()], maxprocs: 3, wdir: Some("/tmp".into()), path: None, host: Some("h".into()) },
                SpawnCmd { program: "x".into(), maxprocs: 1, ..SpawnCmd::default() },
            ],
        });
        server_roundtrip(ServerMsg::Spawned { base: 4, codes: vec![0, 2, 0], msg: "why".into() });
        // A list count the frame cannot hold is refused before anything is allocated.
        let mut body = vec![tag::SPAWN];
        body.extend_from_slice(&1u32.to_be_bytes());
        body.extend_from_slice(&u32::MAX.to_be_bytes());
        assert!(ClientMsg::decode(&body).is_err());
        client_roundtrip(ClientMsg::Rejoin);
        server_roundtrip(ServerMsg::RejoinAck { fence_epoch: 4 });
        server_roundtrip(ServerMsg::Event(LauncherEvent::RankRejoined { rank: 3, incarnation: 2 }));
        server_roundtrip(ServerMsg::Welcome { size: 64 });
        server_roundtrip(ServerMsg::Value {
            key: "a".into(),
            value: "b".into(),
        });
        server_roundtrip(ServerMsg::FenceDone { epoch: 9 });
        server_roundtrip(ServerMsg::AbortAck);
        server_roundtrip(ServerMsg::FinalizeAck);
        server_roundtrip(ServerMsg::Error { msg: "no".into() });
        server_roundtrip(ServerMsg::Event(LauncherEvent::RankExited {
            rank: 2,
            status: ExitStatus::Signaled(9),
            finalized: false,
        }));
    }

    #[test]
    fn rejects_bad_input() {
        assert_eq!(ClientMsg::decode(&[]), Err(WireError::Truncated));
        assert_eq!(ClientMsg::decode(&[0x7f]), Err(WireError::UnknownTag(0x7f)));
        assert_eq!(
            ClientMsg::decode(&[tag::FINALIZE, 0]),
            Err(WireError::Trailing(1))
        );
        assert_eq!(
            ClientMsg::decode(&[tag::GET, 0, 0, 0, 9, b'a']),
            Err(WireError::Truncated)
        );
        assert_eq!(
            ClientMsg::decode(&[tag::GET, 0, 0, 0, 1, 0xff]),
            Err(WireError::BadUtf8)
        );
        assert_eq!(
            ClientMsg::decode(&[
                tag::HELLO,
                b'X',
                b'F',
                b'B',
                b'T',
                0,
                1,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0
            ]),
            Err(WireError::BadField("hello magic"))
        );
        // A string length near u32::MAX must not allocate or panic.
        assert_eq!(
            ClientMsg::decode(&[tag::GET, 0xff, 0xff, 0xff, 0xff]),
            Err(WireError::Truncated)
        );
        let mut fb = FrameBuf::new();
        fb.extend(&[0xff, 0xff, 0xff, 0xff]);
        assert_eq!(fb.next_body(), Err(WireError::TooLarge(u32::MAX as usize)));
        let mut fb = FrameBuf::new();
        fb.extend(&[0, 0, 0, 0]);
        assert_eq!(fb.next_body(), Err(WireError::Empty));
    }

    #[test]
    fn oversized_put_is_refused_on_encode() {
        let m = ClientMsg::Put {
            key: "k".into(),
            value: "x".repeat(MAX_FRAME),
        };
        assert!(matches!(m.encode(), Err(WireError::TooLarge(_))));
    }

    #[test]
    fn random_bytes_never_panic() {
        // Tiny deterministic xorshift so the test has no dependencies.
        let mut s: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..20_000 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let len = (s % 24) as usize;
            let bytes: Vec<u8> = (0..len).map(|i| (s >> (i % 8 * 8)) as u8).collect();
            let _ = ClientMsg::decode(&bytes);
            let _ = ServerMsg::decode(&bytes);
        }
    }
}
