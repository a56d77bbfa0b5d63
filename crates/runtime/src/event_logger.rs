//! The event logger of the message-logging modes as a server of its own
//! (`steadfast event-logger`), and the launcher's link to it.
//!
//! By default the launcher hosts the event logger (`steadfast_logging::EventLogger`) and
//! writes its journals itself. With `steadfast run --event-logger HOST:PORT` it relays
//! instead: every rank's message for the logger goes over one authenticated connection to
//! the standalone server, and every answer comes back the same way, so the determinants
//! live on the logger's host, which can be another machine than the launcher's.
//!
//! The server serves any number of jobs, each in a directory `job-ID` of its own: each
//! rank's events in a journal (`rank-R.events`, the format of
//! `steadfast_logging::logger::journal`), each rank's newest accepted process image
//! (`rank-R.image`), and the job's size (`job`). Started again with the same directory it
//! reads a job's back when the job's launcher connects again, and goes on where it stopped;
//! a job that ends well has its directory removed. The launcher
//! notices the lost connection, connects again (for at most [`DOWN_LIMIT`]) and sends again
//! everything not answered yet: the batches not acknowledged, a pending fetch, the last
//! image report. The logger takes a batch sent twice only once, so nothing is lost or
//! doubled, and a pessimistic rank just waits for its acknowledgement meanwhile.
//!
//! Who may talk to the server: a launcher that proves knowledge of the key in the server's
//! key file (keyed BLAKE3 challenge-response, each side proves it, the key never crosses
//! the wire; the proof covers the job's identity and size). A newer connection of a job
//! takes over from an older one.
//!
//! Wire: frames `u32 length (LE) | tag | fields`.
//! - launcher: `HELLO version u16, nonce [16], np u32, job (UTF-8)`; `PROOF mac [32]`;
//!   `TO rank u32, message` (a `ToLogger` encoding); `DONE` (the job ended well: its
//!   log is removed).
//! - server: `CHALLENGE nonce [16], mac [32]`; `READY`; `REFUSED reason (UTF-8)`;
//!   `FROM rank u32, message` (a `FromLogger` encoding).

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::{self, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use steadfast_logging::logger::{journal, Image};
use steadfast_logging::{Event, EventLogger, FromLogger, ToLogger};
use steadfast_paths::cm;

/// Protocol version spoken here.
pub const VERSION: u16 = 1;
pub const HELLO: u8 = 1;
pub const PROOF: u8 = 2;
pub const TO: u8 = 3;
pub const DONE: u8 = 4;
pub const CHALLENGE: u8 = 11;
pub const READY: u8 = 12;
pub const REFUSED: u8 = 13;
pub const FROM: u8 = 14;
const ROLE_LAUNCHER: u8 = 1;
const ROLE_SERVER: u8 = 2;
/// Largest frame: a fetch's answer holds all of a rank's events (a few bytes each).
pub const MAX_FRAME: usize = 1 << 30;
/// Longest job identity in a hello.
const MAX_JOB: usize = 64;
/// Before the key is proved nothing larger is read.
const MAX_HANDSHAKE_FRAME: usize = 256;
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections that have not proved the key yet, served at once (more are closed).
const MAX_HANDSHAKES: usize = 16;
/// The launcher gives up on a logger it cannot reach for this long: the job fails.
pub const DOWN_LIMIT: Duration = Duration::from_secs(60);
/// Between two attempts to connect again.
const RETRY: Duration = Duration::from_millis(250);

/// MAC of one side of the handshake: over the side's role, the version, both nonces, and
/// the job the launcher names.
fn handshake_mac(key: &[u8; 32], role: u8, client: &[u8; 16], server: &[u8; 16], np: u32, job: &str) -> [u8; 32] {
    let k = blake3::derive_key("steadfast event logger handshake v1", key);
    let mut m = Vec::with_capacity(39 + job.len());
    m.push(role);
    m.extend_from_slice(&VERSION.to_le_bytes());
    m.extend_from_slice(client);
    m.extend_from_slice(server);
    m.extend_from_slice(&np.to_le_bytes());
    m.extend_from_slice(job.as_bytes());
    *blake3::keyed_hash(&k, &m).as_bytes()
}

/// A launcher's hello, as the server reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    pub version: u16,
    pub nonce: [u8; 16],
    pub np: u32,
    pub job: String,
}

impl Hello {
    pub fn encode(&self) -> Vec<u8> {
        cm::frame(HELLO, &[&self.version.to_le_bytes(), &self.nonce, &self.np.to_le_bytes(), self.job.as_bytes()])
    }

    pub fn decode(body: &[u8]) -> Option<Hello> {
        if body.len() < 22 || body.len() > 22 + MAX_JOB {
            return None;
        }
        let version = u16::from_le_bytes(body[0..2].try_into().ok()?);
        let nonce: [u8; 16] = body[2..18].try_into().ok()?;
        let np = u32::from_le_bytes(body[18..22].try_into().ok()?);
        let job = std::str::from_utf8(&body[22..]).ok()?.to_owned();
        (np > 0).then_some(Hello { version, nonce, np, job })
    }
}

/// `rank u32 | message` of a `TO` or `FROM` frame.
pub fn relayed(body: &[u8]) -> Option<(u32, &[u8])> {
    let rank = u32::from_le_bytes(body.get(..4)?.try_into().ok()?);
    Some((rank, &body[4..]))
}

/// Complete frames: (tag, body) each, and the bytes they took.
pub type Frames<'a> = (Vec<(u8, &'a [u8])>, usize);

/// The complete frames at the start of `inb`: (tag, body) each. Returns them and the bytes
/// they take; a length out of range is an error (the stream cannot be followed past it).
pub fn frames(inb: &[u8]) -> io::Result<Frames<'_>> {
    let mut at = 0;
    let mut out = Vec::new();
    while let Some(len) = inb.get(at..at + 4).and_then(|b| <[u8; 4]>::try_from(b).ok()).map(u32::from_le_bytes) {
        let len = len as usize;
        if len == 0 || len > MAX_FRAME {
            return Err(io::Error::new(ErrorKind::InvalidData, format!("event logger frame of {len} bytes")));
        }
        let Some(body) = inb.get(at + 4..at + 4 + len) else { break };
        out.push((body[0], &body[1..]));
        at += 4 + len;
    }
    Ok((out, at))
}

/// For the fuzzer: every decoder of this wire on arbitrary bytes.
pub fn fuzz_decode(data: &[u8]) {
    let _ = Hello::decode(data);
    if let Ok((fs, used)) = frames(data) {
        assert!(used <= data.len());
        for (tag, body) in fs {
            if let Some((_, m)) = relayed(body) {
                match tag {
                    TO => drop(ToLogger::decode(m)),
                    _ => drop(FromLogger::decode(m)),
                }
            }
        }
    }
}

/// The event journals of one job, one file per rank in `dir`.
pub struct Journals {
    dir: PathBuf,
    files: Vec<Option<File>>,
    /// Sync every record to the disk (durable against a crash of the host, at the cost of
    /// a disk flush per batch); else the page cache keeps it (durable against a crash of
    /// the logger's process).
    sync: bool,
}

impl Journals {
    pub fn new(dir: &Path, np: u32, sync: bool) -> Journals {
        Journals { dir: dir.to_path_buf(), files: (0..np).map(|_| None).collect(), sync }
    }

    fn path(dir: &Path, rank: u32) -> PathBuf {
        dir.join(format!("rank-{rank}.events"))
    }

    /// Appends the batch of `events` numbered from `first` to rank `rank`'s journal.
    pub fn append(&mut self, rank: u32, first: u64, events: &[Event]) -> io::Result<()> {
        let slot = self.files.get_mut(rank as usize).ok_or_else(|| io::Error::other("no such rank"))?;
        if slot.is_none() {
            *slot = Some(OpenOptions::new().create(true).append(true).open(Self::path(&self.dir, rank))?);
        }
        let Some(f) = slot.as_mut() else { return Ok(()) };
        f.write_all(&journal::record(first, events))?;
        if self.sync {
            f.sync_data()?;
        }
        Ok(())
    }

    /// Every rank's journaled events (from 1), as a logger started again takes them.
    pub fn read_all(dir: &Path, np: u32) -> io::Result<Vec<Vec<Event>>> {
        (0..np)
            .map(|r| match std::fs::read(Self::path(dir, r)) {
                Ok(bytes) => Ok(journal::read(&bytes)),
                Err(e) if e.kind() == ErrorKind::NotFound => Ok(Vec::new()),
                Err(e) => Err(e),
            })
            .collect()
    }
}

/// Writes what `logger` appended to `journals`, then acknowledges it. A batch that cannot
/// be written is not acknowledged (a pessimistic rank then waits) and the error is logged.
pub fn make_durable(logger: &mut EventLogger, journals: &mut Journals) {
    let mut stored = Vec::new();
    while let Some((rank, first, events)) = logger.poll_persist() {
        let upto = first + events.len() as u64 - 1;
        match journals.append(rank, first, events) {
            Ok(()) => stored.push((rank, upto)),
            Err(e) => tracing::error!(rank, error = %e, "cannot write the event journal"),
        }
    }
    for (rank, upto) in stored {
        logger.stored(rank, upto);
    }
}

/// Replaces `path` by `text` all at once (a crash leaves the old or the new content).
fn write_atomically(path: &Path, text: &str) -> io::Result<()> {
    let tmp = path.with_extension("tmp");
    let mut f = File::create(&tmp)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

fn invalid(what: impl Into<String>) -> io::Error {
    io::Error::new(ErrorKind::InvalidData, what.into())
}

/// One job's determinants, in the server.
struct JobLog {
    np: u32,
    dir: PathBuf,
    logger: EventLogger,
    journals: Journals,
    /// The connection served; a newer one of the job takes over.
    current: Option<(u64, TcpStream)>,
}

impl JobLog {
    /// The job's log in `dir`: read back if it is there, else started (and recorded).
    fn open(dir: PathBuf, np: u32, sync: bool) -> io::Result<JobLog> {
        let file = dir.join("job");
        match std::fs::read_to_string(&file) {
            Ok(text) => {
                let had: u32 = text.trim().parse().map_err(|_| invalid(format!("{}: not an event logger's job file", file.display())))?;
                if had != np {
                    return Err(invalid(format!("the job had {had} ranks, not {np}")));
                }
                let mut logger = EventLogger::recovered(Journals::read_all(&dir, np)?);
                for r in 0..np {
                    let Ok(t) = std::fs::read_to_string(dir.join(format!("rank-{r}.image"))) else { continue };
                    let mut w = t.split_whitespace().map(str::parse::<u64>);
                    if let (Some(Ok(number)), Some(Ok(clock))) = (w.next(), w.next()) {
                        logger.restore_image(r, Image { number, clock });
                    }
                }
                let journals = Journals::new(&dir, np, sync);
                Ok(JobLog { np, dir, logger, journals, current: None })
            }
            Err(e) if e.kind() == ErrorKind::NotFound => {
                std::fs::create_dir_all(&dir)?;
                write_atomically(&file, &format!("{np}\n"))?;
                let journals = Journals::new(&dir, np, sync);
                Ok(JobLog { np, dir, logger: EventLogger::new(np), journals, current: None })
            }
            Err(e) => Err(e),
        }
    }

    /// Rank `rank`'s message: the frames of the answers.
    fn handle(&mut self, rank: u32, msg: ToLogger) -> Vec<u8> {
        self.logger.handle(rank, msg);
        make_durable(&mut self.logger, &mut self.journals);
        let mut out = Vec::new();
        while let Some(t) = self.logger.poll_transmit() {
            if let FromLogger::ImageKept { number } = t.message {
                if let Some(img) = self.logger.image(t.to) {
                    let path = self.dir.join(format!("rank-{}.image", t.to));
                    if let Err(e) = write_atomically(&path, &format!("{number} {}\n", img.clock)) {
                        tracing::error!(rank = t.to, error = %e, "cannot record the process image");
                    }
                }
            }
            out.extend_from_slice(&cm::frame(FROM, &[&t.to.to_le_bytes(), &t.message.encode()]));
        }
        out
    }
}

/// What the server keeps between connections: the logs of the jobs it serves, each in
/// `job-ID` under its directory.
struct State {
    dir: PathBuf,
    sync: bool,
    jobs: std::collections::HashMap<String, JobLog>,
}

impl State {
    /// Admits job `job` of `np` ranks as connection `id` (taking over from an older one),
    /// or says why not.
    fn admit(&mut self, np: u32, job: &str, id: u64, conn: &TcpStream) -> Result<(), String> {
        if job.is_empty() || !job.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
            return Err(format!("{job:?} is not a job identity"));
        }
        if !self.jobs.contains_key(job) {
            let log = JobLog::open(self.dir.join(format!("job-{job}")), np, self.sync).map_err(|e| format!("job {job}: {e}"))?;
            self.jobs.insert(job.to_owned(), log);
        }
        let log = self.jobs.get_mut(job).ok_or("job vanished")?;
        if log.np != np {
            return Err(format!("job {job} has {} ranks, not {np}", log.np));
        }
        if let Some((_, old)) = log.current.take() {
            let _ = old.shutdown(std::net::Shutdown::Both);
        }
        log.current = Some((id, conn.try_clone().map_err(|e| e.to_string())?));
        Ok(())
    }

    /// The job's launcher says it ended well: its log is no longer needed.
    fn finished(&mut self, job: &str, id: u64) {
        if self.jobs.get(job).is_some_and(|l| l.current.as_ref().is_some_and(|(c, _)| *c == id)) {
            if let Some(l) = self.jobs.remove(job) {
                let _ = std::fs::remove_dir_all(&l.dir);
            }
        }
    }
}

/// A standalone event logger bound to its address.
pub struct LoggerServer {
    listener: TcpListener,
    key: [u8; 32],
    state: Arc<Mutex<State>>,
}

impl LoggerServer {
    /// A server on `addr` keeping its journals in `dir` (which it reads back if they are
    /// there), admitting whoever proves `key`; `sync`: sync every batch to the disk.
    pub fn bind(addr: SocketAddr, dir: &Path, key: [u8; 32], sync: bool) -> io::Result<LoggerServer> {
        use std::os::unix::fs::DirBuilderExt;
        // Owner-only: the journals say what every rank received.
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
        let state = State { dir: dir.to_path_buf(), sync, jobs: Default::default() };
        Ok(LoggerServer { listener: TcpListener::bind(addr)?, key, state: Arc::new(Mutex::new(state)) })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Jobs whose logs the directory holds from before (their launchers may connect again).
    pub fn kept_jobs(&self) -> Vec<String> {
        let Ok(st) = self.state.lock() else { return Vec::new() };
        let mut v: Vec<String> = std::fs::read_dir(&st.dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.path().join("job").is_file())
            .filter_map(|e| e.file_name().to_str().and_then(|n| n.strip_prefix("job-")).map(str::to_owned))
            .collect();
        v.sort();
        v
    }

    /// Serves on a thread of this process.
    pub fn spawn(self) -> io::Result<()> {
        std::thread::Builder::new().name("steadfast-evlog".into()).spawn(move || self.serve())?;
        Ok(())
    }

    /// Serves on this thread until the process ends: one thread per connection.
    pub fn serve(self) {
        let handshaking = Arc::new(AtomicUsize::new(0));
        let ids = AtomicU64::new(1);
        for conn in self.listener.incoming() {
            let Ok(stream) = conn else { continue };
            if handshaking.load(Ordering::Relaxed) >= MAX_HANDSHAKES {
                continue;
            }
            handshaking.fetch_add(1, Ordering::Relaxed);
            let id = ids.fetch_add(1, Ordering::Relaxed);
            let (state, key, hs) = (self.state.clone(), self.key, handshaking.clone());
            let spawned = std::thread::Builder::new().name("steadfast-evlog-conn".into()).spawn(move || {
                if let Err(e) = serve_connection(stream, id, &state, &key, &hs) {
                    if e.kind() != ErrorKind::UnexpectedEof {
                        tracing::debug!(conn = id, error = %e, "event logger connection ended");
                    }
                }
            });
            if spawned.is_err() {
                handshaking.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }
}

fn serve_connection(mut s: TcpStream, id: u64, state: &Mutex<State>, key: &[u8; 32], handshaking: &AtomicUsize) -> io::Result<()> {
    let admitted = handshake_server(&mut s, id, state, key);
    handshaking.fetch_sub(1, Ordering::Relaxed);
    let job = admitted?;
    s.set_read_timeout(None)?;
    s.set_write_timeout(None)?;
    loop {
        let (tag, body) = cm::read_frame_max(&mut s, MAX_FRAME)?;
        let mut st = state.lock().map_err(|_| io::Error::other("event logger state poisoned"))?;
        if tag == DONE {
            st.finished(&job, id);
            return Ok(());
        }
        let (rank, bytes) = (tag == TO).then(|| relayed(&body)).flatten().ok_or_else(|| invalid("not a relayed message"))?;
        let msg = ToLogger::decode(bytes).map_err(|e| invalid(format!("message of rank {rank}: {e}")))?;
        let log = st.jobs.get_mut(&job).filter(|l| l.current.as_ref().is_some_and(|(c, _)| *c == id));
        let Some(log) = log else {
            return Err(io::Error::new(ErrorKind::ConnectionAborted, "a newer connection took over"));
        };
        let out = log.handle(rank, msg);
        drop(st);
        s.write_all(&out)?;
    }
}

/// The handshake of connection `id`: the job it was admitted for.
fn handshake_server(s: &mut TcpStream, id: u64, state: &Mutex<State>, key: &[u8; 32]) -> io::Result<String> {
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(HANDSHAKE_TIMEOUT))?;
    s.set_write_timeout(Some(HANDSHAKE_TIMEOUT))?;
    let (tag, body) = cm::read_frame_max(s, MAX_HANDSHAKE_FRAME)?;
    let hello = (tag == HELLO).then(|| Hello::decode(&body)).flatten().ok_or_else(|| invalid("no hello"))?;
    if hello.version != VERSION {
        s.write_all(&cm::frame(REFUSED, &[format!("protocol version {} is not spoken here ({VERSION} is)", hello.version).as_bytes()]))?;
        return Err(invalid("version"));
    }
    let ours = cm::nonce()?;
    let mac = handshake_mac(key, ROLE_SERVER, &hello.nonce, &ours, hello.np, &hello.job);
    s.write_all(&cm::frame(CHALLENGE, &[&ours, &mac]))?;
    let (tag, body) = cm::read_frame_max(s, MAX_HANDSHAKE_FRAME)?;
    let want = blake3::Hash::from(handshake_mac(key, ROLE_LAUNCHER, &hello.nonce, &ours, hello.np, &hello.job));
    let proved = tag == PROOF && <[u8; 32]>::try_from(&body[..]).is_ok_and(|p| want == blake3::Hash::from(p));
    if !proved {
        // Nothing is said to a stranger.
        return Err(io::Error::new(ErrorKind::PermissionDenied, "wrong key"));
    }
    let mut st = state.lock().map_err(|_| io::Error::other("event logger state poisoned"))?;
    if let Err(why) = st.admit(hello.np, &hello.job, id, s) {
        s.write_all(&cm::frame(REFUSED, &[why.as_bytes()]))?;
        return Err(io::Error::new(ErrorKind::PermissionDenied, why));
    }
    // Under the lock: no answer on an older connection of the job can come after READY.
    s.write_all(&cm::frame(READY, &[]))?;
    Ok(hello.job)
}

/// Connects to the event logger at `addr` and proves the key: the connection, ready for
/// `TO` frames.
fn connect(addr: &str, key: &[u8; 32], np: u32, job: &str, timeout: Duration) -> io::Result<TcpStream> {
    let mut s = cm::connect_any(addr, timeout)?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(HANDSHAKE_TIMEOUT))?;
    s.set_write_timeout(Some(HANDSHAKE_TIMEOUT))?;
    let nonce = cm::nonce()?;
    s.write_all(&Hello { version: VERSION, nonce, np, job: job.to_owned() }.encode())?;
    let (tag, body) = cm::read_frame_max(&mut s, MAX_HANDSHAKE_FRAME)?;
    if tag == REFUSED {
        return Err(io::Error::new(ErrorKind::PermissionDenied, String::from_utf8_lossy(&body).into_owned()));
    }
    if tag != CHALLENGE || body.len() != 48 {
        return Err(invalid("not an event logger"));
    }
    let theirs: [u8; 16] = body[..16].try_into().map_err(|_| invalid("challenge"))?;
    let want = blake3::Hash::from(handshake_mac(key, ROLE_SERVER, &nonce, &theirs, np, job));
    if <[u8; 32]>::try_from(&body[16..]).map_or(true, |m| want != blake3::Hash::from(m)) {
        return Err(io::Error::new(ErrorKind::PermissionDenied, "the event logger does not know the key"));
    }
    s.write_all(&cm::frame(PROOF, &[&handshake_mac(key, ROLE_LAUNCHER, &nonce, &theirs, np, job)]))?;
    let (tag, body) = cm::read_frame_max(&mut s, MAX_HANDSHAKE_FRAME)?;
    match tag {
        READY => {}
        REFUSED => return Err(io::Error::new(ErrorKind::PermissionDenied, String::from_utf8_lossy(&body).into_owned())),
        _ => return Err(invalid("not an event logger")),
    }
    s.set_read_timeout(None)?;
    s.set_write_timeout(None)?;
    s.set_nonblocking(true)?;
    Ok(s)
}

/// What the launcher sends again after connecting again: everything not answered.
#[derive(Default)]
struct Unanswered {
    /// [rank] batches not acknowledged: (incarnation, last event number, encoding).
    logs: Vec<VecDeque<(u16, u64, Vec<u8>)>>,
    /// [rank] a fetch not answered.
    fetch: Vec<Option<Vec<u8>>>,
    /// [rank] the newest image report not answered.
    image: Vec<Option<Vec<u8>>>,
}

/// The launcher's side: one connection to a standalone event logger, kept up.
pub struct RemoteLogger {
    addr: String,
    key: [u8; 32],
    np: u32,
    job: String,
    conn: Option<TcpStream>,
    inb: Vec<u8>,
    out: Vec<u8>,
    /// Bytes of `out` already written.
    sent: usize,
    /// Since when the logger is unreachable, and when to try again.
    down: Option<(Instant, Instant)>,
    unanswered: Unanswered,
    /// Times the connection was made again.
    pub reconnects: u64,
}

/// What the link has to tell the launcher.
#[derive(Debug)]
pub enum LinkNews {
    Lost(String),
    Back,
    GaveUp(String),
}

impl RemoteLogger {
    /// Connects to the logger at `addr` for job `job` of `np` ranks.
    pub fn connect(addr: &str, key: [u8; 32], np: u32, job: &str) -> io::Result<RemoteLogger> {
        if job.len() > MAX_JOB {
            return Err(io::Error::new(ErrorKind::InvalidInput, "job identity too long"));
        }
        let conn = connect(addr, &key, np, job, Duration::from_secs(5))?;
        let n = np as usize;
        Ok(RemoteLogger {
            addr: addr.to_owned(),
            key,
            np,
            job: job.to_owned(),
            conn: Some(conn),
            inb: Vec::new(),
            out: Vec::new(),
            sent: 0,
            down: None,
            unanswered: Unanswered { logs: vec![VecDeque::new(); n], fetch: vec![None; n], image: vec![None; n] },
            reconnects: 0,
        })
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Relays rank `rank`'s message `msg` (encoded: `bytes`).
    pub fn send(&mut self, rank: u32, msg: &ToLogger, bytes: &[u8]) -> Option<LinkNews> {
        let r = rank as usize;
        if r >= self.np as usize {
            return None;
        }
        match msg {
            ToLogger::Log { incarnation, first, events } => {
                let last = first + events.len() as u64 - 1;
                self.unanswered.logs[r].push_back((*incarnation, last, bytes.to_vec()));
            }
            ToLogger::Fetch { incarnation, .. } => {
                // The batches of older processes of the rank are refused now anyway.
                self.unanswered.logs[r].retain(|(inc, _, _)| inc >= incarnation);
                self.unanswered.fetch[r] = Some(bytes.to_vec());
            }
            ToLogger::Checkpointed { .. } => self.unanswered.image[r] = Some(bytes.to_vec()),
            ToLogger::LogSizes { .. } => return None,
        }
        if self.conn.is_some() {
            self.out.extend_from_slice(&cm::frame(TO, &[&rank.to_le_bytes(), bytes]));
            return self.flush();
        }
        None
    }

    /// The descriptor to poll, and whether for writing too.
    pub fn poll_fd(&self) -> Option<(std::os::fd::RawFd, bool)> {
        use std::os::fd::AsRawFd;
        self.conn.as_ref().map(|c| (c.as_raw_fd(), self.sent < self.out.len()))
    }

    /// Writes what it can.
    pub fn flush(&mut self) -> Option<LinkNews> {
        let c = self.conn.as_mut()?;
        while self.sent < self.out.len() {
            match c.write(&self.out[self.sent..]) {
                Ok(0) => return Some(self.lost("connection closed".into())),
                Ok(n) => self.sent += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Some(self.lost(e.to_string())),
            }
        }
        if self.sent == self.out.len() {
            self.out.clear();
            self.sent = 0;
        }
        None
    }

    /// Reads the logger's answers: (rank, answer) each, in order.
    pub fn readable(&mut self) -> (Vec<(u32, FromLogger)>, Option<LinkNews>) {
        let mut got = Vec::new();
        let Some(c) = self.conn.as_mut() else { return (got, None) };
        let mut buf = [0u8; 64 * 1024];
        let mut news = None;
        for _ in 0..64 {
            match c.read(&mut buf) {
                Ok(0) => {
                    news = Some("connection closed".to_owned());
                    break;
                }
                Ok(n) => self.inb.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    news = Some(e.to_string());
                    break;
                }
            }
        }
        match frames(&self.inb) {
            Ok((fs, used)) => {
                for (tag, body) in fs {
                    let answer = (tag == FROM).then(|| relayed(body)).flatten().and_then(|(r, m)| Some((r, FromLogger::decode(m).ok()?)));
                    match answer {
                        Some((rank, msg)) if rank < self.np => got.push((rank, msg)),
                        _ => tracing::warn!(tag, "malformed frame from the event logger, dropped"),
                    }
                }
                self.inb.drain(..used);
            }
            Err(e) => news = Some(e.to_string()),
        }
        for (rank, msg) in &got {
            self.answered(*rank, msg);
        }
        (got, news.map(|why| self.lost(why)))
    }

    fn answered(&mut self, rank: u32, msg: &FromLogger) {
        let r = rank as usize;
        match msg {
            FromLogger::Ack { upto, .. } => {
                let logs = &mut self.unanswered.logs[r];
                while logs.front().is_some_and(|(_, last, _)| last <= upto) {
                    logs.pop_front();
                }
            }
            FromLogger::Events { .. } => self.unanswered.fetch[r] = None,
            FromLogger::ImageKept { .. } => self.unanswered.image[r] = None,
            FromLogger::Checkpoint | FromLogger::ReportLog => {}
        }
    }

    fn lost(&mut self, why: String) -> LinkNews {
        let now = Instant::now();
        self.conn = None;
        self.inb.clear();
        self.out.clear();
        self.sent = 0;
        self.down = Some((now, now));
        LinkNews::Lost(why)
    }

    /// The job ended well: tell the logger (which removes the job's log), waiting a little
    /// for what is still queued to go.
    pub fn finish(&mut self) {
        let Some(c) = self.conn.as_mut() else { return };
        self.out.extend_from_slice(&cm::frame(DONE, &[]));
        let _ = c.set_nonblocking(false);
        let _ = c.set_write_timeout(Some(Duration::from_secs(2)));
        let _ = c.write_all(&self.out[self.sent..]);
        self.out.clear();
        self.sent = 0;
    }

    /// When to call [`RemoteLogger::tick`] next.
    pub fn next_timeout(&self) -> Option<Instant> {
        self.down.map(|(_, at)| at)
    }

    /// While the logger is unreachable: try to connect again, and send everything not
    /// answered when that works.
    pub fn tick(&mut self, now: Instant) -> Option<LinkNews> {
        let (since, at) = self.down?;
        if now < at {
            return None;
        }
        match connect(&self.addr, &self.key, self.np, &self.job, RETRY) {
            Ok(c) => {
                self.conn = Some(c);
                self.down = None;
                self.reconnects += 1;
                let u = &self.unanswered;
                for r in 0..self.np as usize {
                    let rank = (r as u32).to_le_bytes();
                    let again = u.fetch[r].iter().chain(u.logs[r].iter().map(|(_, _, b)| b)).chain(u.image[r].iter());
                    for bytes in again {
                        self.out.extend_from_slice(&cm::frame(TO, &[&rank, bytes]));
                    }
                }
                Some(self.flush().unwrap_or(LinkNews::Back))
            }
            Err(e) if now.duration_since(since) >= DOWN_LIMIT => {
                self.down = None;
                Some(LinkNews::GaveUp(format!("the event logger at {} is unreachable for {} s: {e}", self.addr, DOWN_LIMIT.as_secs())))
            }
            Err(_) => {
                self.down = Some((since, now + RETRY));
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wait_answers(l: &mut RemoteLogger, n: usize) -> Vec<(u32, FromLogger)> {
        let mut all = Vec::new();
        for _ in 0..400 {
            let (got, news) = l.readable();
            assert!(news.is_none(), "{news:?}");
            all.extend(got);
            if all.len() >= n {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        all
    }

    fn log(l: &mut RemoteLogger, rank: u32, incarnation: u16, first: u64, n: u64) {
        let events: Vec<Event> = (first..first + n).map(|s| Event::Match { from: 0, seq: s }).collect();
        let m = ToLogger::Log { incarnation, first, events };
        assert!(l.send(rank, &m, &m.encode()).is_none());
    }

    #[test]
    fn events_survive_the_server_and_a_wrong_key_or_another_job_is_refused() {
        let dir = std::env::temp_dir().join(format!("steadfast-evlog-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let key = [7u8; 32];
        let server = LoggerServer::bind("127.0.0.1:0".parse().unwrap(), &dir, key, false).unwrap();
        let addr = server.local_addr().unwrap().to_string();
        server.spawn().unwrap();
        let mut l = RemoteLogger::connect(&addr, key, 2, "ja").unwrap();
        log(&mut l, 1, 0, 1, 3);
        log(&mut l, 1, 0, 4, 2);
        let got = wait_answers(&mut l, 2);
        assert!(matches!(got.last(), Some((1, FromLogger::Ack { upto: 5, .. }))), "{got:?}");
        assert!(l.unanswered.logs[1].is_empty());
        // The wrong key gets nowhere; the same job with another size is refused.
        assert!(RemoteLogger::connect(&addr, [8u8; 32], 2, "ja").is_err());
        let e = RemoteLogger::connect(&addr, key, 3, "ja").err().unwrap();
        assert!(e.to_string().contains("has 2 ranks, not 3"), "{e}");
        // Another job at the same time has a log of its own, removed when it ends well.
        let mut other = RemoteLogger::connect(&addr, key, 1, "jb").unwrap();
        log(&mut other, 0, 0, 1, 1);
        assert_eq!(wait_answers(&mut other, 1).len(), 1);
        assert!(dir.join("job-jb/rank-0.events").exists());
        other.finish();
        for _ in 0..200 {
            if !dir.join("jb").exists() {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(!dir.join("jb").exists());

        // A second server on the same directory (the first one "started again") has them.
        let again = LoggerServer::bind("127.0.0.1:0".parse().unwrap(), &dir, key, true).unwrap();
        let addr2 = again.local_addr().unwrap().to_string();
        again.spawn().unwrap();
        let mut l2 = RemoteLogger::connect(&addr2, key, 2, "ja").unwrap();
        let f = ToLogger::Fetch { incarnation: 1, from: 2 };
        assert!(l2.send(1, &f, &f.encode()).is_none());
        let got = wait_answers(&mut l2, 1);
        match &got[..] {
            [(1, FromLogger::Events { first: 2, events })] => assert_eq!(events.len(), 4),
            other => panic!("{other:?}"),
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_link_sends_again_what_was_not_answered() {
        let dir = std::env::temp_dir().join(format!("steadfast-evlog-test2-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let key = [3u8; 32];
        let server = LoggerServer::bind("127.0.0.1:0".parse().unwrap(), &dir, key, false).unwrap();
        let addr = server.local_addr().unwrap().to_string();
        server.spawn().unwrap();
        let mut l = RemoteLogger::connect(&addr, key, 1, "j").unwrap();
        // Lost before the server saw it: sent again after connecting again.
        let _ = l.lost("test".into());
        log(&mut l, 0, 0, 1, 2);
        assert_eq!(l.unanswered.logs[0].len(), 1);
        let news = l.tick(Instant::now());
        assert!(matches!(news, Some(LinkNews::Back)), "{news:?}");
        let got = wait_answers(&mut l, 1);
        assert!(matches!(got[..], [(0, FromLogger::Ack { upto: 2, .. })]), "{got:?}");
        // Sent twice: stored once.
        let _ = l.lost("test".into());
        log(&mut l, 0, 0, 1, 3);
        assert!(matches!(l.tick(Instant::now()), Some(LinkNews::Back)));
        let got = wait_answers(&mut l, 1);
        assert!(matches!(got[..], [(0, FromLogger::Ack { upto: 3, .. })]), "{got:?}");
        assert_eq!(Journals::read_all(&dir.join("job-j"), 1).unwrap()[0].len(), 3);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn frames_and_hellos_decode_only_what_they_should() {
        let h = Hello { version: VERSION, nonce: [1; 16], np: 4, job: "x".into() };
        let f = h.encode();
        let (fs, used) = frames(&f).unwrap();
        assert_eq!(used, f.len());
        assert_eq!(Hello::decode(fs[0].1), Some(h));
        assert!(frames(&[0, 0, 0, 0]).is_err());
        assert_eq!(frames(&f[..f.len() - 1]).unwrap().1, 0);
        assert_eq!(Hello::decode(&[0; 10]), None);
        fuzz_decode(&f);
    }
}
