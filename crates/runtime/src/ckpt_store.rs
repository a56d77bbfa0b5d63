//! The checkpoint server of `--ft coordinated` (MPICH-V/CL's checkpoint server): a second
//! home for every rank's process image and channel record, off the rank's node, so that a
//! rank whose local copy is gone (a lost node, a wiped local disk) or damaged can still be
//! restored. The launcher runs one as a thread by default; `steadfast ckpt-server` runs one
//! standalone for jobs that span hosts.
//!
//! Transfers are transactions. An upload goes to a temporary file, is checked against the
//! CRC-32C the sender appends, synced, and only then renamed to its final name, so an
//! interrupted or damaged transfer changes nothing. A download is written the same way by
//! [`StoreClient::get`]. A file damaged on the server's disk is not caught by the transfer
//! checksum (the server sums what it reads); the launcher verifies every fetched image
//! with the image's own checksums before using it.
//!
//! Who may talk to a server: whoever proves knowledge of its 32-byte store key by a keyed
//! BLAKE3 challenge-response (each side proves it; the key never crosses the wire). The
//! launcher's own server uses a key derived from the job key ([`key_of_job`]); a
//! standalone server keeps its key in a file only its owner can read, and jobs name that
//! file (`STEADFAST_CKPT_SERVER_KEY_FILE`, present on every host of the job).
//!
//! Wire format: every message is a frame `u32 length (LE) | tag | fields`; file contents
//! follow a `Put` or `Data` message as raw bytes, then a `u32` CRC-32C of those bytes.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Protocol version spoken here.
pub const VERSION: u16 = 1;
/// Largest message frame (file contents are not framed).
pub const MAX_FRAME: usize = 1024;
/// Length of a store key.
pub const KEY_LEN: usize = 32;
/// A server's shared secret.
pub type StoreKey = [u8; KEY_LEN];

/// Connections a server serves at once; more are closed at once.
const MAX_CONNECTIONS: usize = 256;
/// How long a connection may stay silent in the handshake or between requests, and how
/// long one read or write of a transfer may stall.
const IDLE_TIMEOUT: Duration = Duration::from_secs(60);
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Which file of a rank's checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// The process image (`rank-R.img`).
    Image,
    /// The channel record: messages in transit at the cut (`rank-R.rec`).
    Record,
}

impl FileKind {
    fn code(self) -> u8 {
        match self {
            FileKind::Image => 0,
            FileKind::Record => 1,
        }
    }
    fn from_code(c: u8) -> Option<FileKind> {
        match c {
            0 => Some(FileKind::Image),
            1 => Some(FileKind::Record),
            _ => None,
        }
    }
    fn extension(self) -> &'static str {
        match self {
            FileKind::Image => "img",
            FileKind::Record => "rec",
        }
    }
}

/// One stored file: `JOB/wave-WAVE/rank-RANK.{img,rec}` under the server's directory (the
/// same layout as a job's local checkpoint directory, one level down).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileId {
    /// The job's name on the server (see [`valid_job_name`]).
    pub job: String,
    pub wave: u64,
    pub rank: u32,
    pub kind: FileKind,
}

impl FileId {
    /// Path relative to a checkpoint directory: `wave-W/rank-R.img`.
    pub fn relative(&self) -> PathBuf {
        PathBuf::from(format!("wave-{}", self.wave)).join(format!("rank-{}.{}", self.rank, self.kind.extension()))
    }
}

/// A job name is one path component of letters, digits, `.`, `_` and `-`, not starting
/// with a dot, at most 64 bytes: it names a directory on the server and must never climb
/// out of it.
pub fn valid_job_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// Client to server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Opens the handshake.
    Hello { version: u16, nonce: [u8; 16] },
    /// The client's answer to the server's challenge.
    Proof { mac: [u8; 32] },
    /// Store a file: `len` bytes and their CRC-32C follow.
    Put { file: FileId, len: u64 },
    /// Send a file back.
    Get { file: FileId },
    /// Remove the job's waves numbered below `keep_from`.
    Prune { job: String, keep_from: u64 },
    /// Check a stored file by its own checksums (an image's region checksums, a channel
    /// record's), where it is: answered `Done` if whole.
    Verify { file: FileId },
}

/// Server to client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// The server's nonce and its proof that it knows the key.
    Challenge { nonce: [u8; 16], mac: [u8; 32] },
    /// The request was carried out.
    Done,
    /// A `Get`'s file: `len` bytes and their CRC-32C follow.
    Data { len: u64 },
    /// The request failed; the connection stays usable unless the failure was in the
    /// framing or the handshake.
    Failed { msg: String },
}

/// A message that cannot be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("checkpoint server message: {0}")]
pub struct DecodeError(&'static str);

mod tag {
    pub const HELLO: u8 = 1;
    pub const PROOF: u8 = 2;
    pub const PUT: u8 = 3;
    pub const GET: u8 = 4;
    pub const PRUNE: u8 = 5;
    pub const VERIFY: u8 = 6;
    pub const CHALLENGE: u8 = 0x81;
    pub const DONE: u8 = 0x82;
    pub const DATA: u8 = 0x83;
    pub const FAILED: u8 = 0x84;
}

/// Reads fields off a message body, every read bounds-checked.
struct Fields<'a>(&'a [u8]);

impl<'a> Fields<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.0.len() < n {
            return Err(DecodeError("truncated"));
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }
    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_le_bytes(self.array()?))
    }
    fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    fn text(&mut self) -> Result<String, DecodeError> {
        let n = self.u16()? as usize;
        std::str::from_utf8(self.take(n)?).map(str::to_owned).map_err(|_| DecodeError("text is not UTF-8"))
    }
    fn job(&mut self) -> Result<String, DecodeError> {
        let j = self.text()?;
        if !valid_job_name(&j) {
            return Err(DecodeError("invalid job name"));
        }
        Ok(j)
    }
    fn file(&mut self) -> Result<FileId, DecodeError> {
        let job = self.job()?;
        let wave = self.u64()?;
        let rank = self.u32()?;
        let kind = FileKind::from_code(self.u8()?).ok_or(DecodeError("unknown file kind"))?;
        Ok(FileId { job, wave, rank, kind })
    }
    fn end(&self) -> Result<(), DecodeError> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(DecodeError("trailing bytes"))
        }
    }
}

fn put_text(out: &mut Vec<u8>, s: &str) {
    // Names are checked to be short; messages are cut to fit a frame.
    let b = &s.as_bytes()[..s.len().min(MAX_FRAME / 2)];
    out.extend_from_slice(&(b.len() as u16).to_le_bytes());
    out.extend_from_slice(b);
}

fn put_file(out: &mut Vec<u8>, f: &FileId) {
    put_text(out, &f.job);
    out.extend_from_slice(&f.wave.to_le_bytes());
    out.extend_from_slice(&f.rank.to_le_bytes());
    out.push(f.kind.code());
}

fn frame(body: Vec<u8>) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 4);
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&body);
    out
}

impl Request {
    /// The message as a frame (length included).
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        match self {
            Request::Hello { version, nonce } => {
                b.push(tag::HELLO);
                b.extend_from_slice(&version.to_le_bytes());
                b.extend_from_slice(nonce);
            }
            Request::Proof { mac } => {
                b.push(tag::PROOF);
                b.extend_from_slice(mac);
            }
            Request::Put { file, len } => {
                b.push(tag::PUT);
                put_file(&mut b, file);
                b.extend_from_slice(&len.to_le_bytes());
            }
            Request::Get { file } => {
                b.push(tag::GET);
                put_file(&mut b, file);
            }
            Request::Prune { job, keep_from } => {
                b.push(tag::PRUNE);
                put_text(&mut b, job);
                b.extend_from_slice(&keep_from.to_le_bytes());
            }
            Request::Verify { file } => {
                b.push(tag::VERIFY);
                put_file(&mut b, file);
            }
        }
        frame(b)
    }

    /// Decodes a frame's body (the length already taken off).
    pub fn decode(body: &[u8]) -> Result<Request, DecodeError> {
        let mut f = Fields(body);
        let m = match f.u8()? {
            tag::HELLO => Request::Hello { version: f.u16()?, nonce: f.array()? },
            tag::PROOF => Request::Proof { mac: f.array()? },
            tag::PUT => Request::Put { file: f.file()?, len: f.u64()? },
            tag::GET => Request::Get { file: f.file()? },
            tag::PRUNE => Request::Prune { job: f.job()?, keep_from: f.u64()? },
            tag::VERIFY => Request::Verify { file: f.file()? },
            _ => return Err(DecodeError("unknown request")),
        };
        f.end()?;
        Ok(m)
    }
}

impl Reply {
    /// The message as a frame (length included).
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        match self {
            Reply::Challenge { nonce, mac } => {
                b.push(tag::CHALLENGE);
                b.extend_from_slice(nonce);
                b.extend_from_slice(mac);
            }
            Reply::Done => b.push(tag::DONE),
            Reply::Data { len } => {
                b.push(tag::DATA);
                b.extend_from_slice(&len.to_le_bytes());
            }
            Reply::Failed { msg } => {
                b.push(tag::FAILED);
                put_text(&mut b, msg);
            }
        }
        frame(b)
    }

    /// Decodes a frame's body (the length already taken off).
    pub fn decode(body: &[u8]) -> Result<Reply, DecodeError> {
        let mut f = Fields(body);
        let m = match f.u8()? {
            tag::CHALLENGE => Reply::Challenge { nonce: f.array()?, mac: f.array()? },
            tag::DONE => Reply::Done,
            tag::DATA => Reply::Data { len: f.u64()? },
            tag::FAILED => Reply::Failed { msg: f.text()? },
            _ => return Err(DecodeError("unknown reply")),
        };
        f.end()?;
        Ok(m)
    }
}

const ROLE_SERVER: u8 = 1;
const ROLE_CLIENT: u8 = 2;

/// MAC of one side of the handshake: keyed BLAKE3 under a key derived from the store key,
/// over the side's role, the version and both nonces.
fn handshake_mac(key: &StoreKey, role: u8, version: u16, client: &[u8; 16], server: &[u8; 16]) -> [u8; 32] {
    let k = blake3::derive_key("steadfast checkpoint store handshake v1", key);
    let mut m = [0u8; 35];
    m[0] = role;
    m[1..3].copy_from_slice(&version.to_le_bytes());
    m[3..19].copy_from_slice(client);
    m[19..35].copy_from_slice(server);
    *blake3::keyed_hash(&k, &m).as_bytes()
}

fn nonce() -> io::Result<[u8; 16]> {
    let mut n = [0u8; 16];
    getrandom::getrandom(&mut n).map_err(|e| io::Error::other(format!("random nonce: {e}")))?;
    Ok(n)
}

/// A fresh random store key.
pub fn new_key() -> io::Result<StoreKey> {
    let mut k = [0u8; KEY_LEN];
    getrandom::getrandom(&mut k).map_err(|e| io::Error::other(format!("random key: {e}")))?;
    Ok(k)
}

/// The key of the launcher's own server: derived from the job key, which every rank has
/// already, so no second secret has to reach the ranks.
pub fn key_of_job(job_key: u64) -> StoreKey {
    blake3::derive_key("steadfast checkpoint store key v1", &job_key.to_le_bytes())
}

/// The key as 64 hex digits (how ranks get it in their environment and key files hold it).
pub fn key_to_hex(k: &StoreKey) -> String {
    k.iter().map(|b| format!("{b:02x}")).collect()
}

/// Parses 64 hex digits (surrounding white space ignored).
pub fn key_from_hex(s: &str) -> Option<StoreKey> {
    let s = s.trim();
    if s.len() != 2 * KEY_LEN {
        return None;
    }
    let mut k = [0u8; KEY_LEN];
    for (i, b) in k.iter_mut().enumerate() {
        *b = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(k)
}

/// Reads a key file, refusing one that others may read (the key admits anyone to the
/// images, which hold whole process memories).
pub fn read_key_file(path: &Path) -> io::Result<StoreKey> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path)?;
    if meta.mode() & 0o077 != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{}: the key file must be readable by its owner only (chmod 600)", path.display()),
        ));
    }
    let text = std::fs::read_to_string(path)?;
    key_from_hex(&text).ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, format!("{}: not a checkpoint server key", path.display())))
}

/// Reads the key file, or creates it (mode 0600) with a fresh key if it does not exist.
pub fn read_or_create_key_file(path: &Path) -> io::Result<StoreKey> {
    use std::os::unix::fs::OpenOptionsExt;
    let key = new_key()?;
    match std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path) {
        Ok(mut f) => {
            f.write_all(format!("{}\n", key_to_hex(&key)).as_bytes())?;
            f.sync_all()?;
            Ok(key)
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => read_key_file(path),
        Err(e) => Err(e),
    }
}

fn read_frame(s: &mut impl Read) -> io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len)?;
    let len = u32::from_le_bytes(len) as usize;
    if len == 0 || len > MAX_FRAME {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("checkpoint server frame of {len} bytes")));
    }
    let mut body = vec![0u8; len];
    s.read_exact(&mut body)?;
    Ok(body)
}

fn invalid(e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e.to_string())
}

/// Copies exactly `len` bytes from `from` to `to`, returning their CRC-32C.
fn copy_summed(from: &mut impl Read, to: &mut impl Write, len: u64) -> io::Result<u32> {
    let mut buf = vec![0u8; 1 << 20];
    let mut left = len;
    let mut crc = 0u32;
    while left > 0 {
        let n = (buf.len() as u64).min(left) as usize;
        let got = from.read(&mut buf[..n])?;
        if got == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, format!("transfer ended {left} bytes early")));
        }
        crc = crc32c::crc32c_append(crc, &buf[..got]);
        to.write_all(&buf[..got])?;
        left -= got as u64;
    }
    Ok(crc)
}

/// Writes `len` bytes from `from` into `dest` as a transaction: a temporary file next to
/// it, the trailing CRC-32C checked, synced, then renamed. On any failure `dest` is as it
/// was and the temporary file is gone.
fn receive_file(from: &mut impl Read, dest: &Path, len: u64) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = dest.parent().ok_or_else(|| invalid("file without a directory"))?;
    let name = dest.file_name().ok_or_else(|| invalid("file without a name"))?;
    let tmp = dir.join(format!(".{}.part-{}", name.to_string_lossy(), key_to_hex(&new_key()?).get(..12).unwrap_or("0")));
    let result = (|| {
        let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp)?;
        let crc = copy_summed(from, &mut f, len)?;
        let mut want = [0u8; 4];
        from.read_exact(&mut want)?;
        if u32::from_le_bytes(want) != crc {
            return Err(invalid("checksum mismatch: the transfer was damaged"));
        }
        f.sync_all()?;
        std::fs::rename(&tmp, dest)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Sends an open file's `len` bytes and their CRC-32C.
fn send_file(to: &mut impl Write, file: &mut std::fs::File, len: u64) -> io::Result<()> {
    let crc = copy_summed(file, to, len)?;
    to.write_all(&crc.to_le_bytes())?;
    to.flush()
}

/// A checkpoint server bound to its address.
pub struct StoreServer {
    listener: TcpListener,
    dir: PathBuf,
    key: StoreKey,
}

impl StoreServer {
    /// Listens on `addr` and keeps files under `dir` (created, mode 0700).
    pub fn bind(dir: &Path, addr: SocketAddr, key: StoreKey) -> io::Result<StoreServer> {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
        let listener = TcpListener::bind(addr)?;
        Ok(StoreServer { listener, dir: dir.to_path_buf(), key })
    }

    /// The address clients connect to.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until the process ends: one thread per connection.
    pub fn serve(self) {
        let open = Arc::new(AtomicUsize::new(0));
        let dir = Arc::new(self.dir);
        for conn in self.listener.incoming() {
            let Ok(stream) = conn else { continue };
            if open.load(Ordering::Relaxed) >= MAX_CONNECTIONS {
                drop(stream);
                continue;
            }
            open.fetch_add(1, Ordering::Relaxed);
            let (counter, dir, key) = (open.clone(), dir.clone(), self.key);
            let spawned = std::thread::Builder::new().name("steadfast-ckpt-conn".into()).spawn(move || {
                let peer = stream.peer_addr().ok();
                if let Err(e) = serve_connection(stream, &dir, &key) {
                    if e.kind() != io::ErrorKind::UnexpectedEof {
                        tracing::debug!(?peer, error = %e, "checkpoint server connection ended");
                    }
                }
                counter.fetch_sub(1, Ordering::Relaxed);
            });
            if spawned.is_err() {
                open.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }

    /// Serves on a thread of this process.
    pub fn spawn(self) -> io::Result<std::thread::JoinHandle<()>> {
        std::thread::Builder::new().name("steadfast-ckpt-server".into()).spawn(move || self.serve())
    }
}

fn serve_connection(mut s: TcpStream, dir: &Path, key: &StoreKey) -> io::Result<()> {
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(HANDSHAKE_TIMEOUT))?;
    s.set_write_timeout(Some(IDLE_TIMEOUT))?;
    let Request::Hello { version, nonce: client } = Request::decode(&read_frame(&mut s)?).map_err(invalid)? else {
        return Err(invalid("no hello"));
    };
    if version != VERSION {
        s.write_all(&Reply::Failed { msg: format!("protocol version {version} is not spoken here ({VERSION} is)") }.encode())?;
        return Err(invalid("version"));
    }
    let ours = nonce()?;
    let mac = handshake_mac(key, ROLE_SERVER, version, &client, &ours);
    s.write_all(&Reply::Challenge { nonce: ours, mac }.encode())?;
    let Request::Proof { mac } = Request::decode(&read_frame(&mut s)?).map_err(invalid)? else {
        return Err(invalid("no proof"));
    };
    if blake3::Hash::from(mac) != blake3::Hash::from(handshake_mac(key, ROLE_CLIENT, version, &client, &ours)) {
        // Nothing is said to a stranger.
        return Err(io::Error::new(io::ErrorKind::PermissionDenied, "wrong key"));
    }
    s.write_all(&Reply::Done.encode())?;
    s.set_read_timeout(Some(IDLE_TIMEOUT))?;
    loop {
        let req = Request::decode(&read_frame(&mut s)?).map_err(invalid)?;
        let reply = match req {
            Request::Put { file, len } => {
                let dest = dir.join(&file.job).join(file.relative());
                let made = dest.parent().map_or(Ok(()), |p| {
                    use std::os::unix::fs::DirBuilderExt;
                    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(p)
                });
                match made {
                    Ok(()) => match receive_file(&mut s, &dest, len) {
                        Ok(()) => Reply::Done,
                        // The stream is out of step after a failed transfer: end it.
                        Err(e) => {
                            let _ = s.write_all(&Reply::Failed { msg: e.to_string() }.encode());
                            return Err(e);
                        }
                    },
                    Err(e) => {
                        // The bytes are still coming: read and drop them, then say why.
                        copy_summed(&mut s, &mut io::sink(), len)?;
                        s.read_exact(&mut [0u8; 4])?;
                        Reply::Failed { msg: format!("{}: {e}", dest.display()) }
                    }
                }
            }
            Request::Get { file } => {
                let path = dir.join(&file.job).join(file.relative());
                match std::fs::File::open(&path).and_then(|f| Ok((f.metadata()?.len(), f))) {
                    Ok((len, mut f)) => {
                        s.write_all(&Reply::Data { len }.encode())?;
                        send_file(&mut s, &mut f, len)?;
                        continue;
                    }
                    Err(e) => Reply::Failed { msg: format!("{}: {e}", file.relative().display()) },
                }
            }
            Request::Prune { job, keep_from } => {
                if let Ok(rd) = std::fs::read_dir(dir.join(&job)) {
                    for e in rd.flatten() {
                        let n = e.file_name().to_str().and_then(|n| n.strip_prefix("wave-")).and_then(|n| n.parse::<u64>().ok());
                        if n.is_some_and(|n| n < keep_from) {
                            let _ = std::fs::remove_dir_all(e.path());
                        }
                    }
                }
                Reply::Done
            }
            Request::Verify { file } => {
                let path = dir.join(&file.job).join(file.relative());
                let checked = match file.kind {
                    FileKind::Image => verify_image(&path),
                    FileKind::Record => verify_record(&path),
                };
                match checked {
                    Ok(()) => Reply::Done,
                    Err(msg) => Reply::Failed { msg },
                }
            }
            Request::Hello { .. } | Request::Proof { .. } => return Err(invalid("handshake message after the handshake")),
        };
        s.write_all(&reply.encode())?;
    }
}

/// Where a job's checkpoint server is and how to prove we may use it.
#[derive(Clone)]
pub struct StoreAddr {
    pub addr: String,
    pub key: StoreKey,
    /// The job's name on the server.
    pub job: String,
}

impl std::fmt::Debug for StoreAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("StoreAddr").field("addr", &self.addr).field("job", &self.job).finish_non_exhaustive()
    }
}

/// An authenticated connection to a checkpoint server.
pub struct StoreClient {
    s: TcpStream,
}

impl StoreClient {
    /// Connects and runs the handshake (both sides prove the key).
    pub fn connect(addr: &str, key: &StoreKey, timeout: Duration) -> io::Result<StoreClient> {
        let mut s = steadfast_paths::cm::connect_any(addr, timeout)?;
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(IDLE_TIMEOUT))?;
        s.set_write_timeout(Some(IDLE_TIMEOUT))?;
        let ours = nonce()?;
        s.write_all(&Request::Hello { version: VERSION, nonce: ours }.encode())?;
        let Reply::Challenge { nonce: theirs, mac } = Reply::decode(&read_frame(&mut s)?).map_err(invalid)? else {
            return Err(invalid(format!("{addr}: not a checkpoint server of this version")));
        };
        if blake3::Hash::from(mac) != blake3::Hash::from(handshake_mac(key, ROLE_SERVER, VERSION, &ours, &theirs)) {
            return Err(io::Error::new(io::ErrorKind::PermissionDenied, format!("{addr}: the checkpoint server does not know our key")));
        }
        s.write_all(&Request::Proof { mac: handshake_mac(key, ROLE_CLIENT, VERSION, &ours, &theirs) }.encode())?;
        match Reply::decode(&read_frame(&mut s)?).map_err(invalid)? {
            Reply::Done => Ok(StoreClient { s }),
            other => Err(invalid(format!("{addr}: handshake answered with {other:?}"))),
        }
    }

    /// Connects to a job's server.
    pub fn to(store: &StoreAddr, timeout: Duration) -> io::Result<StoreClient> {
        StoreClient::connect(&store.addr, &store.key, timeout)
    }

    /// Fetches rank `rank`'s image of `wave` to `image` and its channel record next to it
    /// (`rank-R.rec`), each a transaction; returns their size.
    pub fn get_checkpoint(&mut self, job: &str, wave: u64, rank: u32, image: &Path) -> io::Result<u64> {
        if let Some(p) = image.parent() {
            std::fs::create_dir_all(p)?;
        }
        let mut bytes = 0;
        for (kind, dest) in [(FileKind::Image, image.to_path_buf()), (FileKind::Record, image.with_extension("rec"))] {
            bytes += self.get(&FileId { job: job.to_owned(), wave, rank, kind }, &dest)?;
        }
        Ok(bytes)
    }

    fn expect_done(&mut self) -> io::Result<()> {
        match Reply::decode(&read_frame(&mut self.s)?).map_err(invalid)? {
            Reply::Done => Ok(()),
            Reply::Failed { msg } => Err(io::Error::other(msg)),
            other => Err(invalid(format!("unexpected answer {other:?}"))),
        }
    }

    /// Stores the local file `path` as `file`; returns its size.
    pub fn put(&mut self, file: &FileId, path: &Path) -> io::Result<u64> {
        let mut f = std::fs::File::open(path)?;
        let len = f.metadata()?.len();
        self.s.write_all(&Request::Put { file: file.clone(), len }.encode())?;
        send_file(&mut self.s, &mut f, len)?;
        self.expect_done()?;
        Ok(len)
    }

    /// Fetches `file` into `dest` (a transaction, see [`receive_file`]); returns its size.
    pub fn get(&mut self, file: &FileId, dest: &Path) -> io::Result<u64> {
        self.s.write_all(&Request::Get { file: file.clone() }.encode())?;
        match Reply::decode(&read_frame(&mut self.s)?).map_err(invalid)? {
            Reply::Data { len } => {
                receive_file(&mut self.s, dest, len)?;
                Ok(len)
            }
            Reply::Failed { msg } => Err(io::Error::new(io::ErrorKind::NotFound, msg)),
            other => Err(invalid(format!("unexpected answer {other:?}"))),
        }
    }

    /// Whether the server's copy of `file` is whole (checked there, not transferred).
    pub fn verify(&mut self, file: &FileId) -> io::Result<()> {
        self.s.write_all(&Request::Verify { file: file.clone() }.encode())?;
        self.expect_done()
    }

    /// Removes the job's waves below `keep_from` on the server.
    pub fn prune(&mut self, job: &str, keep_from: u64) -> io::Result<()> {
        self.s.write_all(&Request::Prune { job: job.to_owned(), keep_from }.encode())?;
        self.expect_done()
    }
}

/// The job's checkpoint server as the environment names it (`STEADFAST_CKPT_SERVER`; the
/// key from `STEADFAST_CKPT_SERVER_KEY_FILE` or derived from `STEADFAST_JOB_KEY`; the job's
/// name `STEADFAST_CKPT_JOB`). `Ok(None)`: no server.
pub fn store_from_env() -> Result<Option<StoreAddr>, String> {
    use crate::env as e;
    let Some(addr) = steadfast_config::lookup(e::CKPT_SERVER).filter(|a| !a.is_empty()) else { return Ok(None) };
    let key = match steadfast_config::lookup(e::CKPT_SERVER_KEY_FILE) {
        Some(f) => read_key_file(Path::new(&f)).map_err(|err| format!("checkpoint server {addr}: {err}"))?,
        None => steadfast_config::lookup(e::JOB_KEY)
            .and_then(|k| u64::from_str_radix(k.trim(), 16).ok())
            .map(key_of_job)
            .ok_or_else(|| format!("checkpoint server {addr}: no job key"))?,
    };
    let job = steadfast_config::lookup(e::CKPT_JOB)
        .filter(|j| valid_job_name(j))
        .ok_or_else(|| format!("checkpoint server {addr}: no valid {}", e::CKPT_JOB))?;
    Ok(Some(StoreAddr { addr, key, job }))
}

/// Whether the image at `image` and the channel record next to it are whole.
pub fn local_copy_ok(image: &Path) -> Result<(), String> {
    verify_image(image)?;
    verify_record(&image.with_extension("rec"))
}

fn verify_record(rec: &Path) -> Result<(), String> {
    let b = std::fs::read(rec).map_err(|e| format!("{}: {e}", rec.display()))?;
    steadfast_rollback::wire::ChannelRecord::decode(&b).map(|_| ()).map_err(|e| format!("{}: {e}", rec.display()))
}

fn verify_image(image: &Path) -> Result<(), String> {
    steadfast_ckpt::verify(image).map(|_| ()).map_err(|e| e.to_string())
}

/// Before a rank restores `image` (`DIR/wave-W/rank-R.img`): if the image or its channel
/// record (`rank-R.rec`) is missing or damaged on this host and the job has a checkpoint
/// server, both are fetched from it. This is how a rank started again on a host that lost
/// its copy (or never had it) is restored, as in MPICH-V/CL: only the rank that needs the
/// server's copy fetches it. Returns a line for the log when something was fetched.
pub fn ensure_local_copy(image: &Path) -> Result<Option<String>, String> {
    let Err(why) = local_copy_ok(image) else { return Ok(None) };
    let Some(store) = store_from_env()? else { return Err(why) };
    let num = |s: Option<&std::ffi::OsStr>, prefix: &str, suffix: &str| {
        s.and_then(|n| n.to_str())
            .and_then(|n| n.strip_prefix(prefix))
            .and_then(|n| n.strip_suffix(suffix))
            .and_then(|n| n.parse::<u64>().ok())
    };
    let (Some(rank), Some(wave)) = (num(image.file_name(), "rank-", ".img"), num(image.parent().and_then(|p| p.file_name()), "wave-", "")) else {
        return Err(format!("{why}; {} does not name a checkpoint file", image.display()));
    };
    let rank = u32::try_from(rank).map_err(|_| format!("{}: rank out of range", image.display()))?;
    let bytes = StoreClient::to(&store, Duration::from_secs(10))
        .and_then(|mut c| c.get_checkpoint(&store.job, wave, rank, image))
        .map_err(|e| format!("{why}; checkpoint server {}: {e}", store.addr))?;
    local_copy_ok(image).map_err(|e| format!("{why}; the checkpoint server's copy is unusable too: {e}"))?;
    Ok(Some(format!(
        "rank {rank}: the local copy of checkpoint {wave} was unusable ({why}); fetched {:.1} MiB from the checkpoint server {}",
        bytes as f64 / (1 << 20) as f64,
        store.addr
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(key: StoreKey) -> (tempdir::Dir, String) {
        let d = tempdir::Dir::new();
        let s = StoreServer::bind(&d.0.join("store"), "127.0.0.1:0".parse().unwrap(), key).unwrap();
        let addr = s.local_addr().unwrap().to_string();
        s.spawn().unwrap();
        (d, addr)
    }

    mod tempdir {
        pub struct Dir(pub std::path::PathBuf);
        impl Dir {
            pub fn new() -> Dir {
                let p = std::env::temp_dir().join(format!("steadfast-store-test-{}-{}", std::process::id(), super::key_to_hex(&super::new_key().unwrap())));
                std::fs::create_dir_all(&p).unwrap();
                Dir(p)
            }
        }
        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }

    fn id(wave: u64, rank: u32) -> FileId {
        FileId { job: "job-1".into(), wave, rank, kind: FileKind::Image }
    }

    #[test]
    fn put_get_prune_round_trip() {
        let key = new_key().unwrap();
        let (d, addr) = server(key);
        let src = d.0.join("src");
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 + i / 255) as u8).collect();
        std::fs::write(&src, &data).unwrap();
        let mut c = StoreClient::connect(&addr, &key, Duration::from_secs(5)).unwrap();
        assert_eq!(c.put(&id(1, 0), &src).unwrap(), data.len() as u64);
        assert_eq!(c.put(&id(2, 0), &src).unwrap(), data.len() as u64);
        assert_eq!(std::fs::read(d.0.join("store/job-1/wave-1/rank-0.img")).unwrap(), data);
        let back = d.0.join("back");
        assert_eq!(c.get(&id(2, 0), &back).unwrap(), data.len() as u64);
        assert_eq!(std::fs::read(&back).unwrap(), data);
        // A missing file is an error, and the connection goes on.
        assert_eq!(c.get(&id(9, 0), &d.0.join("none")).unwrap_err().kind(), io::ErrorKind::NotFound);
        assert!(!d.0.join("none").exists());
        // Not an image: the server's check says so.
        assert!(c.verify(&id(2, 0)).is_err());
        c.prune("job-1", 2).unwrap();
        assert!(!d.0.join("store/job-1/wave-1").exists());
        assert!(d.0.join("store/job-1/wave-2/rank-0.img").exists());
    }

    #[test]
    fn a_wrong_key_is_refused_both_ways() {
        let key = new_key().unwrap();
        let (_d, addr) = server(key);
        let other = new_key().unwrap();
        let e = StoreClient::connect(&addr, &other, Duration::from_secs(5)).err().expect("refused");
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
    }

    #[test]
    fn a_damaged_or_interrupted_upload_changes_nothing() {
        let key = new_key().unwrap();
        let (d, addr) = server(key);
        let src = d.0.join("src");
        std::fs::write(&src, b"good image").unwrap();
        let mut c = StoreClient::connect(&addr, &key, Duration::from_secs(5)).unwrap();
        c.put(&id(1, 3), &src).unwrap();
        // The same file again, with a wrong checksum.
        let mut s = StoreClient::connect(&addr, &key, Duration::from_secs(5)).unwrap().s;
        s.write_all(&Request::Put { file: id(1, 3), len: 4 }.encode()).unwrap();
        s.write_all(b"evil").unwrap();
        s.write_all(&0u32.to_le_bytes()).unwrap();
        let r = Reply::decode(&read_frame(&mut s).unwrap()).unwrap();
        assert!(matches!(r, Reply::Failed { .. }), "{r:?}");
        // And cut short.
        let mut s = StoreClient::connect(&addr, &key, Duration::from_secs(5)).unwrap().s;
        s.write_all(&Request::Put { file: id(1, 3), len: 100 }.encode()).unwrap();
        s.write_all(b"half").unwrap();
        drop(s);
        std::thread::sleep(Duration::from_millis(200));
        let wdir = d.0.join("store/job-1/wave-1");
        assert_eq!(std::fs::read(wdir.join("rank-3.img")).unwrap(), b"good image");
        let names: Vec<_> = std::fs::read_dir(&wdir).unwrap().flatten().map(|e| e.file_name()).collect();
        assert_eq!(names.len(), 1, "no temporary file left: {names:?}");
    }

    #[test]
    fn job_names_cannot_leave_the_directory() {
        for bad in ["", "..", "../x", "a/b", ".hidden", "x\0y"] {
            assert!(!valid_job_name(bad), "{bad:?}");
        }
        let mut body = vec![tag::GET];
        put_text(&mut body, "../etc");
        body.extend_from_slice(&[0; 13]);
        assert!(Request::decode(&body).is_err());
    }

    #[test]
    fn messages_round_trip() {
        let msgs = [
            Request::Hello { version: 1, nonce: [7; 16] },
            Request::Proof { mac: [9; 32] },
            Request::Put { file: id(5, 2), len: 77 },
            Request::Get { file: FileId { kind: FileKind::Record, ..id(5, 2) } },
            Request::Prune { job: "j".into(), keep_from: 4 },
            Request::Verify { file: id(3, 1) },
        ];
        for m in msgs {
            let f = m.encode();
            assert_eq!(Request::decode(&f[4..]).unwrap(), m);
        }
        for m in [Reply::Challenge { nonce: [1; 16], mac: [2; 32] }, Reply::Done, Reply::Data { len: 5 }, Reply::Failed { msg: "no".into() }] {
            let f = m.encode();
            assert_eq!(Reply::decode(&f[4..]).unwrap(), m);
        }
    }
}
