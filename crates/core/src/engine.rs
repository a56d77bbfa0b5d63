//! The point-to-point engine: sending (eager and rendezvous), matching arrivals, progress.
//!
//! Protocols:
//! - **eager** (length ≤ eager limit, not synchronous): the whole message in one packet;
//!   the send completes as soon as a path took it.
//! - **rendezvous**: an RTS announces the message. When it matches, the receiver either reads
//!   the sender's buffer directly with `process_vm_readv` (same host, contiguous data) and
//!   answers FIN, or answers CTS and the sender streams DATA chunks. A synchronous send always
//!   uses rendezvous, so it cannot complete before a matching receive was posted.
//!
//! Order: every packet to a peer goes through that peer's queue when the queue is not empty,
//! so packets leave in the order they were produced; paths keep per-pair order.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;

use steadfast_paths::{cma, PacketSink, Path, RawHeader, SendStatus};

use crate::comm::Comm;
use crate::config::Config;
use crate::door::{self, Admitted, Door, Ident};
use crate::datatype::TypeRef;
use crate::ft::state::FtState;
use crate::error::{ErrorClass, MpiError, MpiResult};
use crate::matching::{Matcher, Unexpected, ANY_SOURCE, ANY_TAG};
use crate::mpi_err;
use crate::request::{MaybeRank, Mode, Op, RecvSpec, Request, SendSpec, Sent, Status};
use crate::slab::{Handle, Slab};
use crate::wire::{Header, Kind, FLAG_CMA};
pub use crate::ft::Ft;

#[path = "ft/ulfm.rs"]
mod ulfm;
#[path = "ft/coordinated.rs"]
mod coordinated;
#[path = "ft/logging.rs"]
mod logging;
#[path = "ft/logging_images.rs"]
mod logging_images;
pub use coordinated::Reconnect;
pub use logging_images::Images as LogImages;
#[path = "engine_fast.rs"]
mod fast;
#[path = "engine_worlds.rs"]
mod worlds;

/// Rank value of MPI_PROC_NULL.
pub const PROC_NULL: i32 = -3;

/// Idle polls before yielding when the job has more ranks than the host has CPUs.
const OVERSUBSCRIBED_SPIN: u32 = 0;
/// What a rank that waits for several others at once (a slot collective) publishes as the
/// rank it waits for (see `peer_spin`): nobody polls on for it.
pub(crate) const AWAITING_SEVERAL: u32 = u32::MAX - 1;
/// Largest message sent eagerly where ranks outnumber CPUs when the path has room for it.
const OVERSUBSCRIBED_EAGER: usize = 64 << 10;
/// Single-copy reads of one message whose copy fails its CRC32C before the pipelined copy
/// takes over.
const CMA_READS: u32 = 3;
/// A polling call serves the other ranks' collectives ([`Engine::serve_collectives`]) once
/// in this many rounds of progress (a pump of every channel broadcast driver costs about a
/// microsecond, a multicast socket's read included).
const POLL_SERVE_EVERY: u32 = 64;

/// The launcher services the engine needs (implemented over the runtime's bootstrap client).
pub trait Bootstrap: Send {
    fn put(&mut self, key: &str, value: &str) -> Result<(), String>;
    fn get(&mut self, key: &str) -> Result<String, String>;
    fn fence(&mut self) -> Result<(), String>;
    fn abort(&mut self, code: i32, msg: &str);
    fn finalize(&mut self) -> Result<(), String>;
    /// A restarted rank joins the running job (after publishing its addresses).
    fn rejoin(&mut self) -> Result<(), String> {
        Err("this bootstrap cannot rejoin a running job".into())
    }
    /// The launcher's notices received so far (relaunch mode, where the engine reads them
    /// itself), without blocking.
    fn poll_events(&mut self) -> Vec<steadfast_runtime::LauncherEvent> {
        Vec::new()
    }
    /// Send a coordinated-checkpoint protocol message to the checkpoint scheduler.
    fn send_recovery(&mut self, _bytes: &[u8]) -> Result<(), String> {
        Err("this bootstrap has no checkpoint scheduler".into())
    }
    /// At a checkpoint's cut: wait until the launcher took in this process's output so far.
    fn output_mark(&mut self, _wave: u64) -> Result<(), String> {
        Err("this bootstrap has no checkpoint scheduler".into())
    }
    /// Ask the checkpoint scheduler for a wave now.
    fn checkpoint_now(&mut self) -> Result<(), String> {
        Err("this bootstrap has no checkpoint scheduler".into())
    }
    /// Publishes `key = value` in the key-value space every world of the job shares.
    fn put_job(&mut self, _key: &str, _value: &str) -> Result<(), String> {
        Err("this bootstrap has no job-wide key-value space".into())
    }
    /// The value of `key` in the job-wide key-value space (blocks until put).
    fn get_job(&mut self, _key: &str) -> Result<String, String> {
        Err("this bootstrap has no job-wide key-value space".into())
    }
    /// Why this bootstrap cannot start processes, if it cannot.
    fn spawn_unsupported(&self) -> Option<String> {
        Some("the process manager that started this job cannot start processes at run time".into())
    }
    /// Asks the launcher to start `cmds` as a new world (see `engine_worlds.rs`).
    fn spawn(&mut self, _ctx: u32, _parents: Vec<u32>, _cmds: Vec<steadfast_runtime::wire::SpawnCmd>) -> Result<(u32, Vec<i32>, String), String> {
        Err("this bootstrap cannot start processes".into())
    }
    /// The launcher's failure notices for the membership control thread (None: none).
    fn launcher_link(&self) -> Option<Box<dyn steadfast_runtime::ft::LauncherLink>> {
        None
    }
}

/// Which path carries traffic between ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathKind {
    Shm,
    Tcp,
    /// UDP under the reliable channel (checksums, retransmission, routes).
    Udp,
}

/// What the launcher told this process about the job.
#[derive(Debug, Clone)]
pub struct JobInfo {
    pub rank: u32,
    pub size: u32,
    pub jobdir: PathBuf,
    pub job_key: u64,
    pub path: PathKind,
    /// Failed processes are reported to the application instead of ending the job.
    pub run_through: bool,
    /// Which start of this world rank this process is (0 first; the launcher's relaunch
    /// policy starts a failed rank again as the next incarnation).
    pub incarnation: u16,
    /// The launcher starts failed ranks again; its notices are the failure detector.
    pub relaunch: bool,
    /// Coordinated checkpointing (`--ft coordinated`): no membership service, the
    /// launcher's checkpoint scheduler drives waves and rollbacks.
    pub coordinated: bool,
    /// Job-wide process index of world rank 0 (0 but in worlds started by `MPI_Comm_spawn`).
    pub proc_base: u32,
    /// Path settings the bootstrap derived itself (PMI jobs: host layout, path between
    /// hosts, routes); they replace the `STEADFAST_HOSTMAP/NET_PATH/ROUTES` variables.
    pub path_overrides: Option<PathOverrides>,
}

/// What [`Engine::assemble`] builds an engine from.
pub struct Parts {
    pub rank: u32,
    pub size: u32,
    pub incarnation: u16,
    pub cfg: Config,
    /// The path to the other ranks (None: a singleton).
    pub net: Option<Box<dyn Path>>,
    pub boot: Option<Box<dyn Bootstrap>>,
    /// The membership view ([`Ft::fixed`] when no service runs).
    pub ft: Ft,
    pub run_through: bool,
    /// Relaunch mode: the engine reads the launcher's notices of failures and restarts.
    pub relaunch: bool,
    /// Process ids of the ranks on this host (0 elsewhere), for single-copy reads.
    pub pids: Vec<u32>,
    /// Per world rank: single-copy reads from it are allowed.
    pub cma_ok: Vec<bool>,
    pub eager_limit: usize,
}

/// See [`JobInfo::path_overrides`].
#[derive(Debug, Clone, Default)]
pub struct PathOverrides {
    pub hostmap: Option<String>,
    pub net_path: Option<String>,
    pub routes: Option<String>,
}

/// An unexpected message's body.
pub enum Body {
    Eager { data: Vec<u8>, from: Ident },
    Rts { from: Ident, len: u64, addr: u64, sreq: u64, flags: u8, crc: Option<u32> },
}

impl Body {
    pub(crate) fn from(&self) -> Ident {
        match self {
            Body::Eager { from, .. } | Body::Rts { from, .. } => *from,
        }
    }

    fn len(&self) -> u64 {
        match self {
            Body::Eager { data, .. } => data.len() as u64,
            Body::Rts { len, .. } => *len,
        }
    }
}

/// A message found waiting by [`Engine::next_arrived`].
pub(crate) enum Arrived {
    Data { src: i32, data: Vec<u8> },
    Announced { src: i32, len: u64 },
}

/// A message removed from matching by a matched probe, waiting for MPI_Mrecv.
pub struct ProbedMessage {
    pub src: i32,
    pub tag: i32,
    pub body: Body,
}

enum OutOp {
    Packet { hdr: RawHeader, payload: Vec<u8> },
    /// `hold`: the path may keep a reference to the data until the receiver's FIN
    /// (`SendState::unheld` otherwise).
    Stream { sreq: Handle, rreq: u64, ptr: *const u8, len: usize, off: usize, hold: bool },
}

// SAFETY: `ptr` is a send buffer the application keeps valid until the request completes;
// the engine is only ever used under one lock.
unsafe impl Send for OutOp {}

/// Everything packet handling touches (kept apart from the path so both can be borrowed).
struct State {
    rank: u32,
    reqs: Slab<Request>,
    comms: Slab<Comm>,
    matcher: Matcher<Handle, Body>,
    outq: Vec<VecDeque<OutOp>>,
    busy_peers: Vec<u32>,
    loopback: VecDeque<(RawHeader, Vec<u8>)>,
    pids: Vec<u32>,
    cma_ok: Vec<bool>,
    /// `STEADFAST_CMA=1`: every rendezvous message to a rank of this host is read with a
    /// single copy; otherwise only where `single_copy_send` asks for it.
    cma_always: bool,
    /// Set by a schedule while it starts the root's sends of a linear Scatter or Bcast: one
    /// process would otherwise copy every block into the rings while the receivers wait;
    /// with a single copy each receiver reads its own (see `Engine::single_copy`).
    pub(crate) single_copy_send: crate::coll::sched::SingleCopy,
    /// Set by a schedule while it starts a Gather's sends from the ranks other than the root,
    /// or a binomial Reduce's sends to the parents, where ranks outnumber CPUs. Each such send
    /// is its rank's last step, and holding its buffer until the receiver's FIN made the
    /// sender wait to be scheduled once more after the receiver had read the data (a 4-rank
    /// Gather of 256 KiB blocks on 2 CPUs took 2.1-2.5 times Open MPI's time). Such a send
    /// completes once its data is in the ring, the path copying what it may have to resend,
    /// as for an eager message. Not every send on a crowded host: applied to all, the extra
    /// copy cost more than the FIN where ranks send a lot (1 MiB Alltoall on 4 ranks 1.36-1.5
    /// times as long, 1 MiB binomial Bcast 1.6-2).
    pub(crate) copy_sends: bool,
    events: u64,
    dropped: u64,
    /// Headers, identities, incarnations, determinants and the interposition hook.
    door: Door,
    /// Ranks that came back whose paths still lead to the earlier incarnation.
    rejoined: Vec<u32>,
    /// The last message `start_send` put on its way (buffered sends hand it to the
    /// application's request).
    last_sent: Option<Sent>,
    bsend_used: usize,
    ft: FtState,
    ulfm: ulfm::UlfmState,
    /// A blocking receive waiting without a request (see `engine_fast.rs`).
    waiting: Option<fast::Waiting>,
    /// Message logging is on (`ft/logging.rs`): duplicates are dropped, fast paths are off.
    logging: bool,
    /// Logging modes: per sender, the messages taken in.
    admitted: Vec<logging::Admitted>,
    /// Logging modes: receives matched to a rendezvous whose data must come again, from a
    /// restarted sender: (sender, sequence number) → receive request.
    awaiting: std::collections::HashMap<(u32, u64), Handle>,
    /// Logging modes: messages dropped as taken in before.
    dup_messages: u64,
    /// `--ft channel-memory`: every packet goes through the receiver's channel memory (self
    /// included), and the order of a rank's stream there fixes its receptions.
    channel_memory: bool,
    /// Channel memory: synchronous messages arrived and not matched yet: (sender, seq).
    sync_from: std::collections::HashSet<(u32, u64)>,
    /// Channel memory: our synchronous sends waiting for their `SyncAck`: (dest, seq).
    sync_pending: std::collections::HashMap<(u32, u64), Handle>,
    /// Channel memory: `SyncAck`s that came before the send they answer (a re-executing
    /// rank reads its stream ahead of its program).
    sync_early: std::collections::HashSet<(u32, u64)>,
    /// Buffers of unexpected eager messages, recycled once matched.
    spares: crate::spare::Spares,
    /// Single-copy reads are checked against the sender's CRC32C (the shm checksum is on).
    cma_crc: bool,
    /// Single-copy reads whose copy failed that check (read again).
    cma_damaged: u64,
    /// `STEADFAST_FAULTS` `bus` on shm: damage to single-copy reads after the copy.
    cma_faults: Option<steadfast_paths::fault::Injector>,
}

/// Work a layer above the engine does in every round of progress, so that it advances
/// whenever any call makes progress (the network path of one-sided communication serves
/// the requests of remote origins this way).
pub trait Service: Send {
    /// One round of the work, with the engine's nonblocking calls; true if something moved.
    fn serve(&mut self, eng: &mut Engine) -> bool;
    /// The service itself, for its owner to reach its state.
    fn as_any(&mut self) -> &mut dyn std::any::Any;
    /// Work for it may arrive in shared memory that rings no doorbell (the one-sided
    /// mailboxes of the C layer): the engine's waits then yield the CPU instead of sleeping
    /// on the path.
    fn awake(&self) -> bool {
        false
    }
}

/// Set in the context id of partitioned communication ([`Engine::partitioned_view`]);
/// agreed context ids stay below it.
pub const PART_CTX_BIT: u32 = 1 << 31;

/// The MPI engine of one process.
pub struct Engine {
    pub rank: u32,
    pub size: u32,
    pub cfg: Config,
    pub world: Handle,
    pub self_comm: Handle,
    net: Option<Box<dyn Path>>,
    boot: Option<Box<dyn Bootstrap>>,
    st: State,
    eager_limit: usize,
    /// Largest message above `eager_limit` sent eagerly when the path has room for it now
    /// (0: none; see `eager_fits`).
    room_eager: usize,
    /// Where waits yield at once: polls a wait for one rank makes before each yield while
    /// that rank runs on another CPU and waits for nothing but this rank
    /// (`STEADFAST_PEER_SPIN`; 0: yield at once). A yield that hands the CPU to another
    /// rank costs about as much as a whole ping-pong hop here, and the message it waits for
    /// is then a few hundred nanoseconds away. 8 ranks on 2 CPUs, 4-byte pairwise
    /// ping-pong timed by the wall clock: 0.55 µs per hop against 3.4-4.2 (Open MPI
    /// 3.0-3.1).
    pub(crate) peer_spin: u32,
    /// The world rank this rank's wait is published to be for (see `set_awaiting`).
    pub(crate) awaiting: Option<u32>,
    chunk: usize,
    /// Stream large messages in the path's pieces ([`Path::stream_piece`]) rather than in
    /// `chunk`s: not where ranks outnumber CPUs, where sender and receiver seldom run at the
    /// same time and smaller pieces only add packets.
    pieces: bool,
    next_ctx: u32,
    messages: Slab<ProbedMessage>,
    /// Bytes of the attached Bsend buffer (0 = none).
    pub bsend_capacity: usize,
    finalized: bool,
    /// Collective state: sequence numbers, nonblocking and persistent collectives, user ops.
    pub coll: crate::coll::CollState,
    /// The membership view (failure detector and control thread).
    ft: crate::ft::Ft,
    /// View generation whose failures were last applied.
    ft_seen: u64,
    /// Nonblocking communicator duplications in flight (MPI_Comm_idup).
    pub(crate) idups: crate::group::Idups,
    /// Requests made of other requests in flight (MPI_Isendrecv).
    pub(crate) compounds: crate::compound::Compounds,
    /// Work of a layer above the engine done in every round of progress (see [`Service`]).
    service: Option<Box<dyn Service>>,
    /// Relaunch mode: failures and restarts come from the launcher's notices.
    relaunch: bool,
    /// Progress rounds since the launcher's notices were last read (relaunch mode).
    launcher_polls: u32,
    /// Per world rank, the incarnation the launcher's notices are about: a notice of an
    /// exit names no incarnation, and it can arrive after the new incarnation's first
    /// packets did.
    launcher_incarnation: Vec<u16>,
    /// Coordinated checkpointing (`--ft coordinated`), when on.
    coord: Option<Box<coordinated::Coordinator>>,
    /// Message logging (`--ft pessimistic` / `--ft causal`), when on.
    mlog: Option<Box<logging::MsgLog>>,
    /// Rounds of progress under way (a call made from inside one must not block).
    progress_depth: u32,
    /// Rounds of progress made by calls that poll ([`Engine::poll_progress`]).
    polls: u32,
    /// Job-wide process index of this world's rank 0 (`engine_worlds.rs`).
    proc_base: u32,
    /// Job-wide process indices of the peers of other worlds, by local index - `size`.
    others: Vec<u32>,
    /// Whether the path to other worlds is open.
    bridged: bool,
    /// The job's key (authenticates the path to other worlds).
    pub(crate) job_key: u64,
}

/// Which context and group a send goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    /// Point-to-point context; the rank is in the remote group of an intercommunicator.
    P2p,
    /// Collective context, same addressing as point-to-point.
    Coll,
    /// Collective context, rank in the local group (intercommunicator collectives).
    CollLocal,
}

struct Sink<'a>(&'a mut State);

impl PacketSink for Sink<'_> {
    fn packet(&mut self, peer: u32, hdr: &RawHeader, payload: &[u8]) {
        if let Some(h) = self.0.admit(peer, hdr) {
            if self.0.door.has_hook() && !self.0.door.arrived(peer, &h, payload) {
                return;
            }
            self.0.handle_packet(peer, &h, payload);
        }
    }

    fn wants_more(&self) -> bool {
        // A filled receive slot ends the blocking receive: what follows stays in the path
        // for the next receive instead of being copied into the unexpected queue.
        self.0.waiting.as_ref().is_none_or(|w| w.open())
    }

    fn packet_unverified(&mut self, peer: u32, hdr: &RawHeader, payload: &[u8], seed: u32, expected: u32) -> bool {
        let Some(h) = self.0.admit(peer, hdr) else {
            // Dropped and counted; the payload is not looked at.
            return true;
        };
        if self.0.door.has_hook() {
            // A recovery protocol sees only verified packets: check first, in its own pass.
            if steadfast_paths::checksum::crc32c_append(seed, payload) != expected {
                return false;
            }
            if self.0.door.arrived(peer, &h, payload) {
                self.0.handle_packet(peer, &h, payload);
            }
            return true;
        }
        // Rendezvous data: checksum while copying into the receive buffer (one pass).
        if h.kind == Kind::Data {
            self.0.events += 1;
            return self.0.rndv_data(Handle(h.a), h.len, payload, Some((seed, expected)), h.b);
        }
        // An eager message for the blocking receive waiting in the slot: checksum while
        // copying into the application's buffer (one pass).
        if self.0.waiting.is_some() {
            if let Some(intact) = self.0.eager_to_waiting_checked(peer, &h, payload, seed, expected) {
                return intact;
            }
        }
        if let Some(intact) = self.0.eager_to_posted_checked(peer, &h, payload, seed, expected) {
            return intact;
        }
        if steadfast_paths::checksum::crc32c_append(seed, payload) != expected {
            return false;
        }
        self.0.handle_packet(peer, &h, payload);
        true
    }
}

/// Copy a message's packed bytes into a receive buffer of `count` elements of `dtype`, as much
/// as fits. Returns the bytes copied and whether the message was longer than the buffer.
///
/// # Safety
/// `buf` must be valid for `count` elements of `dtype`.
unsafe fn copy_into(data: &[u8], buf: *mut u8, count: usize, dtype: &TypeRef) -> (usize, bool) {
    let cap = dtype.packed_size(count);
    let n = data.len().min(cap);
    if n > 0 {
        if dtype.is_contiguous() {
            // Not `copy_nonoverlapping`: see `steadfast_paths::copy` (glibc's `rep movsb`).
            steadfast_paths::copy::copy(data.as_ptr(), buf, n);
        } else {
            dtype.unpack(&data[..n], buf, count);
        }
    }
    (n, data.len() > cap)
}

fn revoked_status(peer: i32, tag: i32) -> Status {
    Status { source: peer, tag, error: Some(ErrorClass::Revoked), bytes: 0, cancelled: false }
}

/// The launcher's key-value space and fence, as path setup sees them.
struct BootExchange<'a>(&'a mut dyn Bootstrap);

impl steadfast_paths::setup::Exchange for BootExchange<'_> {
    fn put(&mut self, key: &str, value: &str) -> Result<(), String> {
        self.0.put(key, value)
    }
    fn get(&mut self, key: &str) -> Result<String, String> {
        self.0.get(key)
    }
    fn fence(&mut self) -> Result<(), String> {
        self.0.fence()
    }
}

/// The path to the other ranks, as [`Engine::init`] builds it (and a restored process again).
struct BuiltNet {
    net: Box<dyn Path>,
    /// Process ids of the ranks reached through shared memory (0 elsewhere).
    pids: Vec<u32>,
    shm_peer: Vec<bool>,
    eager_limit: usize,
}

/// Connect to the job's peers: publish this rank's addresses, fence, open the path.
/// The ranks of the job on this host: our launcher says (`STEADFAST_LOCAL_SIZE`), else the
/// host map counts them (PMI jobs across hosts), else the whole job is taken to be here.
fn ranks_on_this_host(job: &JobInfo, cfg: &Config) -> u32 {
    if let Some(n) = steadfast_runtime::binding::local_size() {
        return n;
    }
    let hosts = host_of_each_rank(job, &path_settings(job, cfg));
    match hosts.get(job.rank as usize) {
        Some(&mine) => hosts.iter().filter(|&&h| h == mine).count() as u32,
        None => job.size,
    }
}

/// The path settings as `build_net` reads them: the environment's, with what the bootstrap
/// derived itself (PMI jobs) in place of the host map and routes.
fn path_settings(job: &JobInfo, cfg: &Config) -> steadfast_paths::setup::Settings {
    let mut st = cfg.paths.clone();
    if let Some(o) = &job.path_overrides {
        st.hostmap = o.hostmap.clone();
        st.routes = o.routes.clone().or(st.routes);
    }
    st
}

/// The host of every rank from the host map (empty when there is none).
fn host_of_each_rank(job: &JobInfo, st: &steadfast_paths::setup::Settings) -> Vec<u32> {
    st.hostmap.as_deref().and_then(|m| steadfast_paths::setup::parse_hostmap(m, job.size).ok()).unwrap_or_default()
}

/// This rank's address towards the other hosts of a job spanning several, and the host of
/// every rank from the host map (empty when there is none), as `build_net` reads the path
/// settings: for the multicast channel broadcast.
fn network_ip(job: &JobInfo, cfg: &Config) -> (Option<std::net::IpAddr>, Vec<u32>) {
    let st = path_settings(job, cfg);
    let hosts = host_of_each_rank(job, &st);
    (steadfast_paths::setup::remote_ip(&st, job.size), hosts)
}

/// `stream_from`: channel memory mode, where this rank's stream is read from (0; a process
/// restored from an image reads on where the image's process had got to).
fn build_net(job: &JobInfo, b: &mut dyn Bootstrap, cfg: &Config, stream_from: u64) -> MpiResult<BuiltNet> {
    // `--ft channel-memory`: every packet goes through the channel memory servers; ranks
    // need not reach each other. Every message travels whole (no rendezvous), so that its
    // receiver's channel memory holds all of it.
    if let Some(addrs) = steadfast_config::lookup(steadfast_runtime::env::CM_ADDRS).filter(|a| !a.is_empty()) {
        let addrs: Vec<String> = addrs.split(',').map(str::to_owned).collect();
        // Standalone servers have a key of their own, in a file on every host; the
        // launcher's own derive theirs from the job key.
        let key = match steadfast_config::lookup(steadfast_runtime::env::CM_KEY_FILE).filter(|f| !f.is_empty()) {
            Some(f) => steadfast_runtime::ckpt_store::read_key_file(std::path::Path::new(&f)).map_err(|e| MpiError::new(ErrorClass::Other, format!("channel memory key: {e}")))?,
            None => steadfast_paths::cm::key_of_job(job.job_key),
        };
        let cm = steadfast_paths::cm::CmPath::connect(job.rank, job.incarnation, key, addrs, stream_from).map_err(|e| MpiError::new(ErrorClass::Other, e.to_string()))?;
        return Ok(BuiltNet {
            net: Box::new(cm),
            pids: vec![0; job.size as usize],
            shm_peer: vec![false; job.size as usize],
            eager_limit: steadfast_paths::cm::MAX_PAYLOAD,
        });
    }
    if job.path == PathKind::Shm {
        cma::allow_peer_reads();
    }
    let kind = match job.path {
        PathKind::Shm => steadfast_paths::setup::Kind::Shm,
        PathKind::Tcp => steadfast_paths::setup::Kind::Tcp,
        PathKind::Udp => steadfast_paths::setup::Kind::Udp,
    };
    let mut settings = cfg.paths.clone();
    settings.shm_ring = cfg.shm_ring;
    if let Some(o) = &job.path_overrides {
        settings.hostmap = o.hostmap.clone();
        settings.net_path = o.net_path.clone();
        settings.routes = o.routes.clone().or(settings.routes);
    }
    let params = steadfast_paths::setup::Params {
        rank: job.rank,
        size: job.size,
        job_key: job.job_key,
        jobdir: &job.jobdir,
        kind,
        settings,
        // A relaunched rank joins running peers; after a coordinated rollback every rank
        // starts over together.
        rejoin: job.incarnation > 0 && job.relaunch,
        incarnation: job.incarnation,
    };
    let built = steadfast_paths::setup::build(&params, &mut BootExchange(b))
        .map_err(|e| MpiError::new(ErrorClass::Other, e.to_string()))?;
    let mut pids = vec![0u32; job.size as usize];
    let mut shm_peer = vec![false; job.size as usize];
    for peer in 0..job.size {
        if built.is_shm(peer) {
            pids[peer as usize] = built.pids[peer as usize];
            shm_peer[peer as usize] = true;
        }
    }
    let any_shm = shm_peer.iter().any(|&s| s) || job.size == 1 && job.path == PathKind::Shm;
    let eager_limit = cfg.eager_limit.unwrap_or(if any_shm { 16 << 10 } else { 64 << 10 });
    Ok(BuiltNet { net: built.path, pids, shm_peer, eager_limit })
}

/// The status a collective's receive request completes with (as [`Engine::coll_request_done`]
/// gives a schedule's request): no source or tag, and a message shorter than the receive's
/// count is MPI_ERR_COUNT — the ranks' counts differ.
fn coll_recv_status(op: &Op, s: Status) -> Status {
    let short = matches!(op, Op::Recv(spec) if s.bytes < spec.dtype.packed_size(spec.count) as u64);
    let error = s.error.or(short.then_some(ErrorClass::Count));
    Status { source: ANY_SOURCE, tag: ANY_TAG, error, bytes: 0, cancelled: false }
}

fn failed_status(peer: i32, tag: i32) -> Status {
    Status { source: peer, tag, error: Some(ErrorClass::ProcFailed), bytes: 0, cancelled: false }
}

fn status_null() -> Status {
    Status { source: PROC_NULL, tag: ANY_TAG, error: None, bytes: 0, cancelled: false }
}

impl Engine {
    /// Start the engine: singleton when `job` is None, else connect to the job's peers.
    /// Reads the configuration from the environment, builds the path and starts the
    /// membership service, then [`Engine::assemble`]s the engine from those parts.
    pub fn init(job: Option<JobInfo>, mut boot: Option<Box<dyn Bootstrap>>) -> MpiResult<Engine> {
        let mut cfg = Config::from_env();
        let (rank, size) = job.as_ref().map_or((0, 1), |j| (j.rank, j.size));
        // More ranks than CPUs for them: a spinning rank holds the CPU the peer it waits
        // for needs, so yield at once, as Open MPI does when oversubscribed (an 8-byte
        // allreduce on 4 ranks / 2 CPUs went from ~1.5 ms to ~40 us). A rank bound to one
        // unit of CPUs (`--bind-to`, Slurm) sees one: then the ranks of its host count
        // against the CPUs they had before. Unbound, the whole job counts against the
        // process's CPUs: hosts emulated in network namespaces share one machine's CPUs,
        // which nothing in a rank can tell from separate hosts. An explicit STEADFAST_SPIN wins.
        let (local, cpus) = match steadfast_runtime::binding::bound_cpus() {
            Some(cpus) => (job.as_ref().map_or(1, |j| ranks_on_this_host(j, &cfg)), cpus),
            None => (size, std::thread::available_parallelism().map_or(1, |n| n.get())),
        };
        let oversubscribed = local as usize > cpus;
        if oversubscribed && !steadfast_config::is_set("STEADFAST_SPIN") {
            cfg.spin = cfg.spin.min(OVERSUBSCRIBED_SPIN);
            tracing::debug!("{local} ranks, {cpus} CPUs for them: oversubscribed, waits yield at once");
        } else {
            tracing::debug!("{local} ranks, {cpus} CPUs for them: waits spin {} rounds first", cfg.spin);
        }
        let mut net: Option<Box<dyn Path>> = None;
        let mut pids = vec![0u32; size as usize];
        pids[rank as usize] = std::process::id();
        let mut eager_limit = 64 << 10;
        // The control channel's address must be published before the start-up fence.
        let ft = crate::ft::Ft::prepare(job.as_ref(), boot.as_mut())?;
        let mut shm_peer = vec![false; size as usize];
        if let (Some(job), Some(b)) = (&job, boot.as_mut()) {
            let built = build_net(job, b.as_mut(), &cfg, 0)?;
            pids = built.pids;
            pids[rank as usize] = std::process::id();
            shm_peer = built.shm_peer;
            eager_limit = built.eager_limit;
            net = Some(built.net);
            if job.incarnation > 0 && job.relaunch {
                // Our addresses are published: the others may reconnect now.
                b.rejoin().map_err(|e| MpiError::new(ErrorClass::Other, format!("rejoining the job: {e}")))?;
            }
        }
        let ft = ft.start(boot.as_mut())?;
        let run_through = job.as_ref().is_some_and(|j| j.run_through);
        // Receivers take single-copy announcements unless turned off; senders make them as
        // `STEADFAST_CMA` says (see `State::cma_always`, `single_copy_send`).
        let cma_enabled = cfg.cma != Some(false) && job.as_ref().is_some_and(|j| j.path == PathKind::Shm);
        let cma_ok: Vec<bool> = shm_peer.iter().map(|&s| s && cma_enabled).collect();
        let incarnation = job.as_ref().map_or(0, |j| j.incarnation);
        let relaunch = job.as_ref().is_some_and(|j| j.relaunch);
        let jobdir = job.as_ref().map(|j| j.jobdir.clone());
        let eager_set = cfg.eager_limit.is_some();
        let mut eng = Engine::assemble(Parts { rank, size, incarnation, cfg, net, boot, ft, run_through, relaunch, pids, cma_ok, eager_limit });
        // More ranks than CPUs: each step of a rendezvous (announcement, answer, data) waits
        // for the other process to be scheduled, so a message that fits the path now goes
        // eagerly (Scan, Gather, and on 4 ranks Scatter and Alltoall, of 64 KiB on 2 CPUs 1.7-3.6
        // times faster; docs/performance.md). Only what fits: a stream of them
        // falls back to the handshake, its flow control, once the ring is half full.
        if oversubscribed && !eager_set && eng.net.is_some() {
            eng.room_eager = OVERSUBSCRIBED_EAGER.min(eng.chunk);
        }
        eng.pieces = !oversubscribed;
        // Waits that yield at once (ranks outnumber CPUs): a wait for one rank that runs on
        // another CPU and owes this one its message polls on a little instead (see
        // `peer_spin`).
        if eng.cfg.spin == 0 {
            eng.peer_spin = eng.cfg.peer_spin;
        }
        if let Some(jobdir) = jobdir {
            let (net_ip, hosts) = job.as_ref().map_or((None, Vec::new()), |j| network_ip(j, &eng.cfg));
            let net_ip = match net_ip {
                Some(std::net::IpAddr::V4(ip)) => Some(ip),
                _ => None,
            };
            let here = shm_peer.iter().enumerate().filter(|&(w, &l)| l || w == rank as usize).count();
            let crowded = here > crate::coll::host_cpus();
            eng.coll.channels.host = Some(crate::coll::channels::Host { jobdir, local: shm_peer, net_ip, hosts, crowded });
        }
        if let Some(j) = &job {
            eng.proc_base = j.proc_base;
            eng.job_key = j.job_key;
        }
        Ok(eng)
    }

    /// Build the engine from its parts: no environment is read, no thread is started and no
    /// I/O is done here, so a test can hand it an in-memory path (`crates/core/tests/bed`).
    pub fn assemble(parts: Parts) -> Engine {
        let Parts { rank, size, incarnation, cfg, net, boot, ft, run_through, relaunch, pids, cma_ok, eager_limit } = parts;
        let cma_always = cfg.cma == Some(true);
        let chunk = net.as_ref().map_or(1 << 20, |n| n.max_payload());
        let eager_limit = eager_limit.min(chunk);
        // Single-copy reads are checked and damaged as the shm path's records are.
        let cma_crc = steadfast_paths::checksum::for_path(cfg.paths.checksum.as_deref(), "shm").map_or(true, |c| c.enabled());
        let cma_faults = cfg.paths.faults.as_deref().and_then(|f| steadfast_paths::fault::FaultSpec::parse(f).ok());
        let cma_faults = cma_faults.filter(|f| f.applies_to("shm") && f.bus > 0.0).map(|f| steadfast_paths::fault::Injector::new(f, rank));
        let mut st = State {
            rank,
            reqs: Slab::default(),
            comms: Slab::default(),
            matcher: Matcher::default(),
            outq: (0..size).map(|_| VecDeque::new()).collect(),
            busy_peers: Vec::new(),
            loopback: VecDeque::new(),
            pids,
            cma_ok,
            cma_always,
            single_copy_send: crate::coll::sched::SingleCopy::No,
            copy_sends: false,
            events: 0,
            dropped: 0,
            last_sent: None,
            bsend_used: 0,
            ft: FtState::new(size, run_through),
            ulfm: Default::default(),
            waiting: None,
            logging: false,
            admitted: Vec::new(),
            awaiting: std::collections::HashMap::new(),
            dup_messages: 0,
            channel_memory: false,
            sync_from: Default::default(),
            sync_pending: Default::default(),
            sync_early: Default::default(),
            spares: Default::default(),
            cma_crc,
            cma_damaged: 0,
            cma_faults,
            door: Door::new(rank, incarnation, size),
            rejoined: Vec::new(),
        };
        let world = st.comms.insert(Comm {
            ctx: 0,
            rank: rank as i32,
            group: Arc::new((0..size).collect()),
            remote: None,
            name: "MPI_COMM_WORLD".into(),
            errhandler: 0,
            topo: None,
            local: None,
        });
        let self_comm = st.comms.insert(Comm {
            ctx: 2,
            rank: 0,
            group: Arc::new(vec![rank]),
            remote: None,
            name: "MPI_COMM_SELF".into(),
            errhandler: 0,
            topo: None,
            local: None,
        });
        Engine {
            rank,
            size,
            cfg,
            world,
            self_comm,
            net,
            boot,
            st,
            eager_limit,
            room_eager: 0,
            peer_spin: 0,
            awaiting: None,
            chunk,
            pieces: true,
            next_ctx: 4,
            messages: Slab::default(),
            bsend_capacity: 0,
            finalized: false,
            coll: Default::default(),
            ft,
            ft_seen: 0,
            idups: Default::default(),
            compounds: Default::default(),
            service: None,
            relaunch,
            launcher_polls: 0,
            coord: None,
            mlog: None,
            progress_depth: 0,
            polls: 0,
            launcher_incarnation: vec![0; size as usize],
            proc_base: 0,
            others: Vec::new(),
            bridged: false,
            job_key: 0,
        }
    }

    /// Flush everything this rank still has to send, then leave the job.
    pub fn finalize(&mut self) -> MpiResult<()> {
        if self.finalized {
            return Ok(());
        }
        // Keep serving the others (cancel requests, rendezvous) until every rank got here;
        // the launcher's fence below does not run the engine. In relaunch mode a restarted
        // rank started its collectives over, so the ranks' collective sequence numbers need
        // not line up (and not every rank may know of a restart yet): only the fence
        // remains, after this rank's own output has left.
        if self.size > 1 && self.boot.is_some() && (!self.relaunch || self.st.logging) {
            let world = self.world;
            if let Ok(req) = self.icoll(world, crate::coll::Coll::Barrier) {
                // A failed rank never arrives: stop waiting once the membership view has one.
                let _ = self.block_until(|e| e.is_complete(req).unwrap_or(true) || !e.ft.failed().is_empty());
                if self.is_complete(req).unwrap_or(false) {
                    self.release(req);
                    // Every rank is here: no channel broadcast driver is needed any more,
                    // nor must one's late traffic hold the wait below.
                    self.channels_end();
                }
            }
        }
        // Output queued for a rank the membership declared failed can never leave: do not wait for it.
        self.block_until(|e| {
            e.st.busy_peers.iter().all(|&p| e.ft.is_failed(p) || e.st.ft.is_dead(p)) && e.net.as_ref().map_or(0, |n| n.backlog()) == 0
        })?;
        // A reliable path keeps answering peers (lost ACKs) while we block in the fence.
        let linger = match self.net.take() {
            Some(n) if n.needs_linger() => Some(steadfast_paths::linger::Linger::start(n)),
            other => {
                self.net = other;
                None
            }
        };
        if let Some(b) = self.boot.as_mut() {
            b.fence().map_err(|e| MpiError::new(ErrorClass::Other, format!("bootstrap: {e}")))?;
            // Every live rank reached MPI_Finalize: the membership service can stop.
            self.ft.stop();
            b.finalize().map_err(|e| MpiError::new(ErrorClass::Other, format!("bootstrap: {e}")))?;
        }
        if let Some(l) = linger {
            self.net = l.stop().0;
        }
        if steadfast_config::flag("STEADFAST_STATS") == Some(true) {
            if let Some(line) = self.mlog_stats() {
                eprintln!("steadfast stats rank {}: {line}", self.rank);
            }
            if let Some((c, _)) = self.path_counters() {
                eprintln!("steadfast stats rank {}: {c}", self.rank);
            }
            if let Some(n) = &self.net {
                for line in n.stats_detail() {
                    eprintln!("steadfast stats rank {}: {line}", self.rank);
                }
            }
        }
        self.net = None;
        self.finalized = true;
        Ok(())
    }

    /// The path counters, for MPI_T: every path's together (with the frames the engine
    /// dropped itself) and each kind of path's; `None` while no path is open.
    pub fn path_counters(&self) -> Option<(steadfast_paths::PathCounters, Vec<(&'static str, steadfast_paths::PathCounters)>)> {
        let n = self.net.as_ref()?;
        let mut total = n.counters();
        total.frames_dropped += self.st.dropped;
        let mut by_path = n.counters_by_path();
        // Single-copy reads are shm traffic outside the path.
        let injected = self.st.cma_faults.as_ref().map_or(0, |f| f.counts.injected_bus);
        for c in std::iter::once(&mut total).chain(by_path.iter_mut().filter(|(k, _)| *k == "shm").map(|(_, c)| c)) {
            c.corrupt_detected += self.st.cma_damaged;
            c.injected_bus += injected;
        }
        Some((total, by_path))
    }

    /// Ask the launcher to tear the job down with `code`; exits if there is no launcher.
    pub fn abort(&mut self, code: i32, msg: &str) -> ! {
        if let Some(b) = self.boot.as_mut() {
            b.abort(code, msg);
        }
        eprintln!("steadfast: {msg}");
        std::process::exit(if code == 0 { 1 } else { code & 0xff });
    }

    /// The membership view: live and failed ranks, epoch, change notification.
    pub fn ft(&self) -> &crate::ft::Ft {
        &self.ft
    }

    // ---- communicators -------------------------------------------------------------------

    /// The communicator behind handle `c`.
    pub fn comm(&self, c: Handle) -> MpiResult<&Comm> {
        match self.st.comms.get(c) {
            Some(c) => Ok(c),
            None => mpi_err!(Comm, "invalid communicator"),
        }
    }

    /// Mutable access to communicator `c`.
    pub fn comm_mut(&mut self, c: Handle) -> MpiResult<&mut Comm> {
        match self.st.comms.get_mut(c) {
            Some(c) => Ok(c),
            None => mpi_err!(Comm, "invalid communicator"),
        }
    }

    /// Register a new communicator (its context id must already be agreed).
    pub fn add_comm(&mut self, comm: Comm) -> Handle {
        let ctx = comm.ctx;
        let h = self.st.comms.insert(comm);
        // Fault-tolerance messages (e.g. a revoke) may have arrived before this process
        // finished building the communicator: replay them now.
        if self.st.ulfm_has_early(ctx) {
            let _ = self.st.ulfm_instance(h);
        }
        h
    }

    /// Whether point-to-point requests on communicator `c` are active and not complete.
    pub(crate) fn requests_on(&self, c: Handle) -> bool {
        self.st.reqs.handles().into_iter().any(|h| {
            self.st.reqs.get(h).is_some_and(|r| {
                r.active
                    && !r.complete
                    && match &r.op {
                        Op::Send(s) => s.comm == c,
                        Op::Recv(spec) => spec.comm == c,
                        Op::Null => false,
                    }
            })
        })
    }

    /// Remove communicator `c`.
    pub fn free_comm(&mut self, c: Handle) -> MpiResult<Comm> {
        if c == self.world || c == self.self_comm {
            return mpi_err!(Comm, "cannot free a predefined communicator");
        }
        let comm = self.st.comms.remove(c).ok_or_else(|| MpiError::new(ErrorClass::Comm, "invalid communicator"))?;
        self.coll.forget_context(comm.ctx);
        self.st.matcher.drop_context(comm.ctx);
        self.st.matcher.drop_context(comm.ctx + 1);
        Ok(comm)
    }

    /// Whether the installed service asks the waits not to sleep ([`Service::awake`]).
    pub(crate) fn service_awake(&self) -> bool {
        self.service.as_ref().is_some_and(|s| s.awake())
    }

    /// Install (or remove) the [`Service`] run in every round of progress.
    pub fn set_service(&mut self, s: Option<Box<dyn Service>>) {
        self.service = s;
    }

    /// The installed [`Service`], if any (None while it runs).
    pub fn service_mut(&mut self) -> Option<&mut (dyn Service + 'static)> {
        self.service.as_deref_mut()
    }

    /// Register a communicator that shares its context with another (a view of a subgroup,
    /// see [`Engine::forget_comm`]): nothing of the context is replayed onto it.
    pub(crate) fn add_view(&mut self, comm: Comm) -> Handle {
        self.st.comms.insert(comm)
    }

    /// Remove communicator `c` from the table but keep whatever arrived on its contexts:
    /// for communicators that share their context with another (a view of a subgroup) or
    /// whose context is about to serve another communicator.
    pub fn forget_comm(&mut self, c: Handle) {
        self.st.comms.remove(c);
    }

    /// Agree on a fresh context id among the members of `c` (collective over `c`).
    pub fn new_context(&mut self, c: Handle) -> MpiResult<u32> {
        let mine = self.next_ctx as u64;
        let agreed = self.allreduce_max_u64(c, mine)? as u32;
        if agreed >= PART_CTX_BIT - 4 {
            return mpi_err!(Intern, "communicator context ids are exhausted");
        }
        self.next_ctx = agreed + 2;
        Ok(agreed)
    }

    /// A view of communicator `c` whose point-to-point context is `c`'s with
    /// [`PART_CTX_BIT`] set: partitioned communication travels there, so that ordinary
    /// receives (wildcards included) never match it, as the standard requires. Every member
    /// derives the same context without agreeing on it.
    pub fn partitioned_view(&mut self, c: Handle) -> MpiResult<Handle> {
        let mut v = self.comm(c)?.clone();
        v.ctx |= PART_CTX_BIT;
        v.local = None;
        v.topo = None;
        Ok(self.add_view(v))
    }

    /// The next context id this process would propose (every id in use here is below it).
    pub fn next_context(&self) -> u32 {
        self.next_ctx
    }

    /// Record that ids `base .. base + n` were agreed on and are taken.
    pub fn claim_contexts(&mut self, base: u32, n: u32) {
        self.next_ctx = self.next_ctx.max(base + n);
    }

    /// Duplicate `c` (collective).
    pub fn comm_dup(&mut self, c: Handle) -> MpiResult<Handle> {
        let ctx = self.new_context(c)?;
        let mut comm = self.comm(c)?.clone();
        comm.ctx = ctx;
        comm.name = String::new();
        Ok(self.add_comm(comm))
    }

    // ---- requests ---------------------------------------------------------------------------

    /// The request behind `h`.
    #[inline]
    pub fn request(&self, h: Handle) -> MpiResult<&Request> {
        match self.st.reqs.get(h) {
            Some(r) => Ok(r),
            None => Err(invalid_request()),
        }
    }

    fn check_peer(&self, comm: &Comm, r: i32, what: &str, allow_any: bool) -> MpiResult<()> {
        if r == PROC_NULL || (allow_any && r == ANY_SOURCE) || (0..comm.peer_size()).contains(&r) {
            Ok(())
        } else {
            mpi_err!(Rank, "invalid {what} rank {r} (communicator has {} ranks)", comm.peer_size())
        }
    }

    /// Create an (inactive) send request.
    pub fn send_init(&mut self, spec: SendSpec, persistent: bool) -> MpiResult<Handle> {
        let comm = self.comm(spec.comm)?;
        self.check_peer(comm, spec.dest, "destination", false)?;
        Ok(self.st.reqs.insert(Request::new(Op::Send(spec), persistent)))
    }

    /// Create an (inactive) receive request.
    pub fn recv_init(&mut self, spec: RecvSpec, persistent: bool) -> MpiResult<Handle> {
        let comm = self.comm(spec.comm)?;
        self.check_peer(comm, spec.src, "source", true)?;
        Ok(self.st.reqs.insert(Request::new(Op::Recv(spec), persistent)))
    }

    /// Nonblocking send: create and start.
    pub fn isend(&mut self, spec: SendSpec) -> MpiResult<Handle> {
        let h = self.send_init(spec, false)?;
        self.start(h)?;
        Ok(h)
    }

    /// Nonblocking receive: create and start (what [`Engine::start`] does to a new receive,
    /// without taking a copy of the spec it just stored).
    pub fn irecv(&mut self, spec: RecvSpec) -> MpiResult<Handle> {
        let (c, src, tag) = (spec.comm, spec.src, spec.tag);
        let comm = self.comm(c)?;
        self.check_peer(comm, src, "source", true)?;
        let ctx = comm.ctx;
        let ft = &self.st.ft;
        let special = src == PROC_NULL || ft.is_revoked(ctx) || (src != ANY_SOURCE && comm.peer_world(src).is_some_and(|w| ft.is_dead(w)));
        if special {
            // A null source, a revoked communicator or a dead source can complete the
            // receive at once: the general start decides.
            let mut r = Request::new(Op::Recv(spec), false);
            r.active = true;
            let h = self.st.reqs.insert(r);
            self.start_recv(h, c, src, tag)?;
            return Ok(h);
        }
        // The common case: the request is stored already posted, with one lookup of the
        // communicator. A message that matches at once completes it, which clears `posted`.
        let h = self.st.reqs.insert_with(|| posted_recv(spec, ctx));
        self.post_stored(h, ctx, src, tag)?;
        Ok(h)
    }

    /// Post receive request `h`, stored already posted ([`posted_recv`]) on context `ctx`:
    /// an unexpected message that matches completes it at once.
    #[inline]
    pub(crate) fn post_stored(&mut self, h: Handle, ctx: u32, src: i32, tag: i32) -> MpiResult<()> {
        if let Some(u) = self.st.post(ctx, src, tag, h) {
            self.st.deliver(h, u.src, u.tag, u.body_into());
            // A rendezvous read here queued its FIN: send it before the program can exit.
            if !self.st.busy_peers.is_empty() {
                self.flush()?;
            }
        }
        Ok(())
    }

    /// Start request `h` (MPI_Start for persistent requests; used by isend/irecv too).
    pub fn start(&mut self, h: Handle) -> MpiResult<()> {
        if self.coll.is_persistent(h) {
            return self.coll_start_persistent(h);
        }
        let r = self.st.reqs.get_mut(h).ok_or_else(|| MpiError::new(ErrorClass::Request, "invalid request handle"))?;
        if r.active && !r.complete {
            return mpi_err!(Request, "request is already active");
        }
        r.active = true;
        r.complete = false;
        r.status = Status::default();
        r.send = Default::default();
        r.recv = Default::default();
        match &r.op {
            Op::Send(s) if s.mode == Mode::Buffered => {
                // Buffered sends complete locally: the data moves to a detached internal send.
                let s = s.clone();
                let sent = self.bsend(s)?;
                self.st.complete(h, status_null());
                if let Some(r) = self.st.reqs.get_mut(h) {
                    r.send.sent = sent;
                }
                Ok(())
            }
            Op::Send(s) => {
                let s = s.clone();
                self.start_send(h, &s, Route::P2p)?;
                if self.st.logging {
                    // Pessimistic logging: the message leaves before the call returns (the
                    // program may compute for long before its next MPI call).
                    self.mlog_send_now()?;
                }
                Ok(())
            }
            Op::Recv(s) => {
                let (c, src, tag) = (s.comm, s.src, s.tag);
                self.start_recv(h, c, src, tag)
            }
            Op::Null => {
                r.complete = true;
                Ok(())
            }
        }
    }

    /// Send per `s` for request `h` on the context and group `route` selects.
    fn start_send(&mut self, h: Handle, s: &SendSpec, route: Route) -> MpiResult<()> {
        if s.dest == PROC_NULL {
            self.st.complete(h, status_null());
            return Ok(());
        }
        let comm = self.comm(s.comm)?;
        let peer = match route {
            Route::CollLocal => usize::try_from(s.dest).ok().and_then(|d| comm.group.get(d).copied()),
            _ => comm.peer_world(s.dest),
        };
        let peer = peer.ok_or_else(|| MpiError::new(ErrorClass::Rank, "invalid destination"))?;
        let ctx = if route == Route::P2p { comm.ctx } else { comm.coll_ctx() };
        if self.st.ft.is_dead(peer) {
            self.st.complete(h, failed_status(s.dest, s.tag));
            return Ok(());
        }
        if self.st.ft.is_revoked(comm.ctx) {
            self.st.complete(h, revoked_status(s.dest, s.tag));
            return Ok(());
        }
        let src = comm.rank;
        let len = s.dtype.packed_size(s.count);
        let mut owned = None;
        if !s.dtype.is_contiguous() || s.mode == Mode::Buffered {
            let mut v = vec![0u8; len];
            // SAFETY: the application passed a buffer valid for `count` elements of `dtype`.
            unsafe { s.dtype.pack(s.buf, s.count, &mut v) };
            owned = Some(v);
        }
        if s.mode == Mode::Buffered {
            let need = len + crate::BSEND_OVERHEAD;
            if self.st.bsend_used + need > self.bsend_capacity {
                return mpi_err!(
                    Buffer,
                    "insufficient space in the attached Bsend buffer: need {need} bytes, {} of {} free",
                    self.bsend_capacity - self.st.bsend_used,
                    self.bsend_capacity
                );
            }
            self.st.bsend_used += need;
            if let Some(r) = self.st.reqs.get_mut(h) {
                r.send.bsend_reserved = need;
            }
        }
        let data_ptr = owned.as_ref().map_or(s.buf, |v| v.as_ptr());
        let unheld = self.st.copy_sends;
        if let Some(r) = self.st.reqs.get_mut(h) {
            r.send.owned = owned;
            r.send.unheld = unheld;
        }
        let sync = self.st.channel_memory && s.mode == Mode::Synchronous;
        if self.st.channel_memory && len > self.eager_limit {
            return mpi_err!(Count, "a message of {len} bytes is larger than --ft channel-memory carries ({} bytes)", self.eager_limit);
        }
        // A block a collective has its receiver read with a single copy goes eagerly while it
        // fits only where the shm checksum is on. With the checksum a single copy takes three
        // passes over the data (the root's CRC, on its critical path, then the receiver's copy
        // and its check), the ring two fused ones (copy with CRC in, copy with check out):
        // 64 KiB Scatter on 2 CPUs (AMD Zen 3, medians of 8 alternating launches), 4 ranks
        // 24.0 µs read by the receivers, 15.7 eagerly (Open MPI 18.5); 8 ranks 33.5 / 23.6
        // (28.5). Without the checksum the root would copy every block into the ring itself
        // where the receivers copy in parallel (an earlier Zen 4 guest measured 20-28 µs
        // eagerly against 10.7-12.6 by single copy for 8 ranks).
        let eager = (s.mode != Mode::Synchronous || sync) && (len <= self.eager_limit || ((!self.single_copy() || self.st.cma_crc) && self.eager_fits(peer, len)));
        if eager {
            let flags = if sync { crate::wire::FLAG_SYNC } else { 0 };
            let hdr = self.st.door.message(peer, Kind::Eager, flags, ctx, src, s.tag, len as u64, 0);
            let sent = Sent { peer, ctx, src, seq: hdr.a, id: 0, rendezvous: false, buffered: false };
            self.st.last_sent = Some(sent);
            if let Some(r) = self.st.reqs.get_mut(h) {
                r.send.sent = Some(sent);
            }
            // SAFETY: data_ptr is valid for len bytes (user buffer or our packed copy).
            let payload = unsafe { std::slice::from_raw_parts(if len == 0 { [].as_ptr() } else { data_ptr }, len) };
            if self.st.logging {
                self.mlog_keep(peer, &hdr, payload)?;
            }
            self.emit_message(peer, &hdr, payload)?;
            if sync {
                // Complete once the receiver matched it (its SyncAck may be here already
                // when this process re-executes).
                if !self.st.sync_early.remove(&(peer, hdr.a)) {
                    self.st.sync_pending.insert((peer, hdr.a), h);
                    return Ok(());
                }
            }
            self.st.complete(h, Status { source: PROC_NULL, tag: s.tag, error: None, bytes: 0, cancelled: false });
        } else {
            let cma = self.st.cma_ok[peer as usize] && (self.st.cma_always || self.single_copy());
            let mut flags = if cma || peer == self.rank { FLAG_CMA } else { 0 };
            // A single-copy read bypasses the ring and its records' checksums: the data's
            // own CRC32C goes with the announcement for the receiver to check its copy.
            let crc = (cma && self.st.cma_crc && len > 0).then(|| {
                // SAFETY: data_ptr is valid for len bytes (user buffer or our packed copy).
                steadfast_paths::checksum::crc32c_append(0, unsafe { std::slice::from_raw_parts(data_ptr, len) })
            });
            if crc.is_some() {
                flags |= crate::wire::FLAG_CRC;
            }
            let hdr = self.st.door.message(peer, Kind::Rts, flags, ctx, src, s.tag, len as u64, h.0);
            let sent = Sent { peer, ctx, src, seq: hdr.a, id: h.0, rendezvous: true, buffered: false };
            self.st.last_sent = Some(sent);
            if let Some(r) = self.st.reqs.get_mut(h) {
                r.send.sent = Some(sent);
            }
            if self.st.logging {
                // SAFETY: as above.
                let data = unsafe { std::slice::from_raw_parts(if len == 0 { [].as_ptr() } else { data_ptr }, len) };
                self.mlog_keep(peer, &hdr, data)?;
            }
            let (payload, n) = crate::wire::encode_rts(data_ptr as u64, crc);
            self.emit_message(peer, &hdr, &payload[..n])?;
        }
        Ok(())
    }

    /// Whether a message of `len` bytes above the eager limit goes eagerly to `peer` all the
    /// same: ranks outnumber CPUs and the path has room for it now (see `room_eager`).
    /// Message logging keeps its protocols as they are.
    fn eager_fits(&self, peer: u32, len: usize) -> bool {
        len <= self.room_eager
            && !self.st.logging
            && !self.st.channel_memory
            && peer != self.rank
            && self.st.outq[peer as usize].is_empty()
            && self.net.as_ref().is_some_and(|n| n.room(peer) >= len)
    }

    /// Send message `hdr` (built by [`Door::message`]) to `peer`: it takes its sequence
    /// number and the interposition hook sees it.
    fn emit_message(&mut self, peer: u32, hdr: &Header, payload: &[u8]) -> MpiResult<()> {
        self.st.door.commit(peer, hdr, payload);
        self.emit(peer, hdr.encode(), payload)
    }

    /// Send one packet to `peer`, queueing behind earlier packets if any are waiting.
    fn emit(&mut self, peer: u32, hdr: RawHeader, payload: &[u8]) -> MpiResult<()> {
        // Channel memory: messages to oneself take their place in one's stream too.
        if peer == self.rank && !self.st.channel_memory {
            self.st.loopback.push_back((hdr, payload.to_vec()));
            return Ok(());
        }
        // Pessimistic logging: nothing leaves before every event so far is stable.
        if self.st.outq[peer as usize].is_empty() && !(self.st.logging && self.mlog_gate_closed()) {
            let net = self.net.as_mut().ok_or_else(|| MpiError::new(ErrorClass::Intern, "no path to peers"))?;
            match door::transmit(net.as_mut(), peer, &hdr, payload) {
                Ok(SendStatus::Done) => return Ok(()),
                Ok(SendStatus::Full) => {}
                Err(e) if self.st.ft.run_through => {
                    tracing::info!("rank {peer} unreachable ({e}); treating it as failed");
                    self.st.peer_failed(peer);
                    return Ok(());
                }
                Err(e) if self.coord.is_some() => {
                    // Rolled back soon (see `progress`): the packet is not needed.
                    tracing::info!("rank {peer} unreachable ({e}); waiting for the rollback");
                    return Ok(());
                }
                Err(e) if self.st.logging => {
                    // Started again soon; it is sent everything again from the log then.
                    tracing::info!("rank {peer} unreachable ({e}); waiting for it to restart");
                    return Ok(());
                }
                Err(e) => return mpi_err!(Other, "sending to rank {peer}: {e}"),
            }
        }
        self.st.queue(peer, OutOp::Packet { hdr, payload: payload.to_vec() });
        Ok(())
    }

    fn start_recv(&mut self, h: Handle, comm: Handle, src: i32, tag: i32) -> MpiResult<()> {
        if src == PROC_NULL {
            self.st.complete(h, status_null());
            return Ok(());
        }
        let comm = self.comm(comm)?;
        let ctx = comm.ctx;
        if self.st.ft.is_revoked(ctx) {
            self.st.complete(h, revoked_status(src, tag));
            return Ok(());
        }
        if src != ANY_SOURCE && comm.peer_world(src).is_some_and(|w| self.st.ft.is_dead(w)) {
            // Messages the dead process sent before failing may still be matched.
            if self.st.matcher.peek(ctx, src, tag).is_none() {
                self.st.complete(h, failed_status(src, tag));
                return Ok(());
            }
        }
        if let Some(r) = self.st.reqs.get_mut(h) {
            r.recv.ctx = ctx;
        }
        match self.st.post(ctx, src, tag, h) {
            Some(u) => {
                self.st.deliver(h, u.src, u.tag, u.body_into());
                // A rendezvous read here queued its FIN: send it before the program can exit.
                if !self.st.busy_peers.is_empty() {
                    self.flush()?;
                }
            }
            None => {
                if let Some(r) = self.st.reqs.get_mut(h) {
                    r.recv.posted = true;
                }
            }
        }
        Ok(())
    }

    /// Whether request `h` has completed (no progress is made).
    pub fn is_complete(&self, h: Handle) -> MpiResult<bool> {
        Ok(self.request(h)?.complete)
    }

    /// The status of request `h` (valid once complete).
    pub fn status(&self, h: Handle) -> MpiResult<Status> {
        Ok(self.request(h)?.status)
    }

    /// After the application saw `h` complete: free it (returns true) or, if persistent, make
    /// it inactive (returns false).
    pub fn release(&mut self, h: Handle) -> bool {
        match self.st.reqs.get_mut(h) {
            Some(r) if r.persistent => {
                r.active = false;
                false
            }
            Some(_) => {
                self.st.reqs.discard(h);
                true
            }
            None => true,
        }
    }

    /// What the application's completion of `h` leaves: its status, and whether the handle
    /// is gone (false: a persistent request, now inactive). [`Engine::status`] and
    /// [`Engine::release`] in one lookup, for the completion calls. None for a persistent
    /// request that is not active: there is nothing to complete (its status is empty).
    #[inline]
    pub fn take_status(&mut self, h: Handle) -> MpiResult<Option<(Status, bool)>> {
        let Some(r) = self.st.reqs.get_mut(h) else { return mpi_err!(Request, "invalid request handle") };
        let s = r.status;
        if r.persistent && !r.active {
            return Ok(None);
        }
        if r.persistent {
            r.active = false;
            return Ok(Some((s, false)));
        }
        self.st.reqs.discard(h);
        Ok(Some((s, true)))
    }

    /// Whether `h` is a persistent request that is not active (waits on it return at once).
    pub fn is_inactive(&self, h: Handle) -> MpiResult<bool> {
        let r = self.request(h)?;
        Ok(r.persistent && !r.active)
    }

    /// MPI_Request_free: forget `h` now if done, else when it completes.
    pub fn request_free(&mut self, h: Handle) -> MpiResult<()> {
        self.coll_forget_request(h);
        let r = self.st.reqs.get_mut(h).ok_or_else(|| MpiError::new(ErrorClass::Request, "invalid request handle"))?;
        if r.complete || !r.active {
            self.st.reqs.remove(h);
        } else {
            r.freed = true;
            r.persistent = false;
        }
        Ok(())
    }

    /// MPI_Cancel: a posted receive is withdrawn; a send is left to complete normally.
    pub fn cancel(&mut self, h: Handle) -> MpiResult<()> {
        let r = self.st.reqs.get_mut(h).ok_or_else(|| MpiError::new(ErrorClass::Request, "invalid request handle"))?;
        if matches!(r.op, Op::Send(_)) || r.send.sent.is_some() {
            return self.cancel_send(h);
        }
        if r.complete || !r.recv.posted || r.recv.coll {
            return Ok(());
        }
        let ctx = r.recv.ctx;
        if self.st.matcher.cancel(ctx, h) {
            if let Some(r) = self.st.reqs.get_mut(h) {
                r.recv.posted = false;
            }
            self.st.complete(h, Status { source: PROC_NULL, tag: ANY_TAG, error: None, bytes: 0, cancelled: true });
        }
        Ok(())
    }

    /// MPI_Cancel of a send: ask the receiver to withdraw the message if no receive matched
    /// it yet. The request completes again when the answer arrives, cancelled or not (an
    /// eager send that already completed locally is reopened until then).
    fn cancel_send(&mut self, h: Handle) -> MpiResult<()> {
        if self.st.channel_memory {
            // The message is in its receiver's channel memory already, placed in its stream:
            // it is not withdrawn (the send completes as sent; MPI allows a cancel to fail).
            return Ok(());
        }
        let Some(r) = self.st.reqs.get_mut(h) else { return mpi_err!(Request, "invalid request handle") };
        if !r.active || r.send.cancelling || r.freed {
            return Ok(());
        }
        let Some(sent) = r.send.sent else { return Ok(()) };
        if sent.rendezvous && !sent.buffered && r.complete {
            // Delivered.
            return Ok(());
        }
        if sent.buffered && sent.rendezvous && self.st.reqs.get(Handle(sent.id)).is_none_or(|x| x.complete) {
            return Ok(());
        }
        let Some(r) = self.st.reqs.get_mut(h) else { return Ok(()) };
        if self.st.ft.is_dead(sent.peer) {
            return Ok(());
        }
        r.send.cancelling = true;
        r.complete = false;
        let hdr = self.st.door.control(Kind::CancelReq, sent.ctx, sent.src, 0, h.0, sent.rendezvous as u64, sent.seq);
        self.emit(sent.peer, hdr, &[])
    }

    /// Account a buffered send's reservation when the application attaches/detaches.
    pub fn bsend_in_use(&self) -> usize {
        self.st.bsend_used
    }

    /// Ready for buffered sends: a user-visible request that is already complete.
    pub fn completed_request(&mut self) -> Handle {
        let mut r = Request::new(Op::Null, false);
        r.active = true;
        r.complete = true;
        r.status = status_null();
        self.st.reqs.insert(r)
    }

    /// Start a buffered send: the data is copied now and sent in the background.
    /// Returns what MPI_Cancel of the application's request needs.
    pub fn bsend(&mut self, mut spec: SendSpec) -> MpiResult<Option<Sent>> {
        spec.mode = Mode::Buffered;
        self.st.last_sent = None;
        let h = self.send_init(spec.clone(), false)?;
        if let Some(r) = self.st.reqs.get_mut(h) {
            r.freed = true;
            r.active = true;
        }
        let res = self.start_send(h, &spec, Route::P2p);
        if res.is_err() || self.st.reqs.get(h).is_some_and(|r| r.complete) {
            self.st.reqs.remove(h);
        }
        res?;
        Ok(self.st.last_sent.take().map(|s| Sent { buffered: true, ..s }))
    }

    /// The application's request of a nonblocking buffered send: complete at once, and
    /// cancellable while the message is unmatched.
    pub fn bsend_request(&mut self, sent: Option<Sent>) -> Handle {
        let h = self.completed_request();
        if let Some(r) = self.st.reqs.get_mut(h) {
            r.send.sent = sent;
        }
        h
    }

    // ---- probe ------------------------------------------------------------------------------

    /// MPI_Iprobe: the status of a matching message, if one has arrived.
    pub fn iprobe(&mut self, comm: Handle, src: i32, tag: i32) -> MpiResult<Option<Status>> {
        let c = self.comm(comm)?;
        self.check_peer(c, src, "source", true)?;
        if src == PROC_NULL {
            return Ok(Some(status_null()));
        }
        let ctx = c.ctx;
        let found = |e: &Engine| {
            e.st.matcher.peek(ctx, src, tag).map(|u| Status {
                source: u.src,
                tag: u.tag,
                error: None,
                bytes: u.msg.len(),
                cancelled: false,
            })
        };
        let seen = |e: &Engine| e.st.matcher.peek(ctx, src, tag).map(|u| u.msg.from());
        if self.logging() {
            // A replay reports what the logged run saw: nothing, or one message, once it
            // is here.
            match self.mlog_forced(crate::door::CompletionCall::Iprobe) {
                Some(steadfast_logging::Forced::Fail) => {
                    self.progress()?;
                    self.st.door.test_failed();
                    return Ok(None);
                }
                Some(steadfast_logging::Forced::Report { .. }) => self.block_until(|e| found(e).is_some())?,
                None => {}
            }
        }
        if let Some(s) = found(self) {
            let probed = seen(self);
            self.st.door.completed_probe(crate::door::CompletionCall::Iprobe, &[0], probed);
            return Ok(Some(s));
        }
        self.poll_progress()?;
        let s = found(self);
        match s {
            Some(_) => {
                let probed = seen(self);
                self.st.door.completed_probe(crate::door::CompletionCall::Iprobe, &[0], probed)
            }
            None => self.st.door.test_failed(),
        }
        Ok(s)
    }

    /// MPI_Probe: block until a matching message has arrived.
    pub fn probe(&mut self, comm: Handle, src: i32, tag: i32) -> MpiResult<Status> {
        let c = self.comm(comm)?;
        self.check_peer(c, src, "source", true)?;
        if src == PROC_NULL {
            return Ok(status_null());
        }
        let ctx = c.ctx;
        self.block_until(|e| e.st.matcher.peek(ctx, src, tag).is_some())?;
        self.iprobe(comm, src, tag)?.ok_or_else(|| MpiError::new(ErrorClass::Intern, "probed message vanished"))
    }

    /// MPI_Mprobe: block until a matching message has arrived and take it out of matching.
    pub fn mprobe(&mut self, comm: Handle, src: i32, tag: i32) -> MpiResult<(Option<Handle>, Status)> {
        let c = self.comm(comm)?;
        self.check_peer(c, src, "source", true)?;
        if src == PROC_NULL {
            return Ok((None, status_null()));
        }
        let ctx = c.ctx;
        self.block_until(|e| e.st.matcher.peek(ctx, src, tag).is_some())?;
        self.improbe(comm, src, tag)?.ok_or_else(|| MpiError::new(ErrorClass::Intern, "probed message vanished"))
    }

    /// MPI_Improbe: remove a matching message from matching, returning a message handle.
    pub fn improbe(&mut self, comm: Handle, src: i32, tag: i32) -> MpiResult<Option<(Option<Handle>, Status)>> {
        let c = self.comm(comm)?;
        self.check_peer(c, src, "source", true)?;
        if src == PROC_NULL {
            return Ok(Some((None, status_null())));
        }
        let ctx = c.ctx;
        if self.logging() {
            match self.mlog_forced(crate::door::CompletionCall::Improbe) {
                Some(steadfast_logging::Forced::Fail) => {
                    self.progress()?;
                    self.st.door.test_failed();
                    return Ok(None);
                }
                Some(steadfast_logging::Forced::Report { .. }) => self.block_until(|e| e.st.matcher.peek(ctx, src, tag).is_some())?,
                None => {}
            }
        }
        if self.st.matcher.peek(ctx, src, tag).is_none() {
            self.poll_progress()?;
        }
        match self.st.matcher.peek(ctx, src, tag).map(|u| u.msg.from()) {
            Some(probed) => self.st.door.completed_probe(crate::door::CompletionCall::Improbe, &[0], Some(probed)),
            None => self.st.door.test_failed(),
        }
        Ok(self.st.take(ctx, src, tag).map(|u| {
            let status = Status { source: u.src, tag: u.tag, error: None, bytes: u.msg.len(), cancelled: false };
            let h = self.messages.insert(ProbedMessage { src: u.src, tag: u.tag, body: u.msg });
            (Some(h), status)
        }))
    }

    /// MPI_Imrecv: receive a probed message into a new request.
    pub fn imrecv(&mut self, msg: Option<Handle>, spec: RecvSpec) -> MpiResult<Handle> {
        let Some(m) = msg else {
            let h = self.completed_request();
            return Ok(h);
        };
        let pm = self.messages.remove(m).ok_or_else(|| MpiError::new(ErrorClass::Request, "invalid message handle"))?;
        let mut r = Request::new(Op::Recv(spec), false);
        r.active = true;
        let h = self.st.reqs.insert(r);
        self.st.deliver(h, pm.src, pm.tag, pm.body);
        Ok(h)
    }

    // ---- progress ---------------------------------------------------------------------------

    /// One round of progress: take in packets, answer them, push queued output.
    /// Returns whether anything happened.
    pub fn progress(&mut self) -> MpiResult<bool> {
        self.progress_depth += 1;
        let r = self.progress_round();
        self.progress_depth -= 1;
        r
    }

    /// One round of progress for a call that polls (the test family, `MPI_Iprobe`,
    /// `MPI_Request_get_status`): [`Engine::progress`], and every [`POLL_SERVE_EVERY`]th
    /// time what a blocking wait serves once idle ([`Engine::serve_collectives`]). A
    /// program that polls instead of waiting must still answer the other ranks'
    /// shared-segment and multicast collectives: a root that returned from a channel
    /// broadcast and then polls `MPI_Testall` on requests that need the other ranks was
    /// never asked for the frames they lost, and they waited for it in that broadcast
    /// (`tests/c/chbcast/hosts.sh`, "faults", which runs `chbcast.c`'s `MPI_Ibcast`
    /// phases).
    pub fn poll_progress(&mut self) -> MpiResult<bool> {
        let moved = self.progress()?;
        self.polls = self.polls.wrapping_add(1);
        if self.polls.is_multiple_of(POLL_SERVE_EVERY) {
            self.serve_collectives()?;
        }
        Ok(moved)
    }

    fn progress_round(&mut self) -> MpiResult<bool> {
        let before = self.st.events;
        // Failures reach programs that only poll (MPI_Test, MPIX_Comm_get_failed) too; one
        // atomic load when nothing changed.
        if self.st.ft.run_through {
            self.poll_failures();
            if self.relaunch {
                self.launcher_polls += 1;
                // A socket read: not on every round of a busy loop.
                if self.launcher_polls >= 1024 {
                    self.poll_launcher();
                }
            }
        }
        if self.bridged {
            self.adopt_strangers();
        }
        if let Some(net) = self.net.as_mut() {
            match net.poll(&mut Sink(&mut self.st)) {
                Ok(_) => {}
                Err(steadfast_paths::PathError::PeerLost(p, why)) if self.st.ft.run_through => {
                    tracing::info!("rank {p} lost ({why}); treating it as failed");
                    self.st.peer_failed(p);
                }
                Err(steadfast_paths::PathError::PeerLost(p, why)) if self.st.logging => {
                    tracing::info!("rank {p} lost ({why}); waiting for it to restart");
                }
                Err(steadfast_paths::PathError::PeerLost(p, why)) if self.coord.is_some() => {
                    // The launcher rolls the whole job back; this process is about to be
                    // replaced by one restored from its last image. Nothing to tell the
                    // application: wait.
                    tracing::info!("rank {p} lost ({why}); waiting for the rollback");
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                Err(e) => return mpi_err!(Other, "{e}"),
            }
        }
        if self.coord.is_some() {
            self.coord_step()?;
        }
        if self.mlog.is_some() {
            self.mlog_step()?;
        }
        if !self.st.rejoined.is_empty() {
            self.reconnect_rejoined();
        }
        while let Some((hdr, payload)) = self.st.loopback.pop_front() {
            let me = self.rank;
            if let Some(h) = self.st.admit(me, &hdr) {
                if self.st.door.has_hook() && !self.st.door.arrived(me, &h, &payload) {
                    continue;
                }
                self.st.handle_packet(me, &h, &payload);
            }
        }
        if !self.st.busy_peers.is_empty() {
            self.flush()?;
        }
        if !self.st.ulfm.pending_revokes.is_empty() {
            // Messages already in the paths were sent before the revoke: take them in first.
            if let Some(net) = self.net.as_mut() {
                let _ = net.poll(&mut Sink(&mut self.st));
            }
            for ctx in std::mem::take(&mut self.st.ulfm.pending_revokes) {
                self.st.revoked(ctx);
            }
        }
        if self.coll.busy() && self.coll_progress() {
            self.st.events += 1;
        }
        if !self.idups.active.is_empty() && self.idup_progress() {
            self.st.events += 1;
        }
        if self.st.ulfm.calls > 0 {
            self.ulfm_service();
        }
        if !self.compounds.is_empty() && self.compound_progress() {
            self.st.events += 1;
        }
        // Taken out while it runs: its own calls into the engine do not run it again.
        if let Some(mut s) = self.service.take() {
            if s.serve(self) {
                self.st.events += 1;
            }
            self.service = Some(s);
        }
        Ok(self.st.events != before)
    }

    fn flush(&mut self) -> MpiResult<()> {
        if self.st.logging && self.mlog_gate_closed() {
            return Ok(());
        }
        let Some(net) = self.net.as_mut() else { return Ok(()) };
        let chunk = self.chunk;
        let run_through = self.st.ft.run_through;
        // Coordinated mode: a lost peer means a rollback is coming; logging modes: it is
        // started again and sent everything again. Keep the packets.
        let coordinated = self.coord.is_some() || self.st.logging;
        let mut lost = Vec::new();
        let mut finished = Vec::new();
        let mut i = 0;
        while i < self.st.busy_peers.len() {
            let peer = self.st.busy_peers[i];
            let q = &mut self.st.outq[peer as usize];
            while let Some(op) = q.front_mut() {
                match op {
                    OutOp::Packet { hdr, payload } => match door::transmit(net.as_mut(), peer, hdr, payload) {
                        Ok(SendStatus::Done) => {
                            q.pop_front();
                            self.st.events += 1;
                        }
                        Ok(SendStatus::Full) => break,
                        Err(_) if run_through => {
                            lost.push(peer);
                            break;
                        }
                        Err(_) if coordinated => break,
                        Err(e) => return mpi_err!(Other, "sending to rank {peer}: {e}"),
                    },
                    OutOp::Stream { sreq, rreq, ptr, len, off, hold } => {
                        // A path that keeps a reference to the data for resending damaged
                        // pieces (instead of a copy) needs the buffer until the receiver has
                        // all of it: DATA then names the send (`b` = handle + 1) and the
                        // receiver answers FIN, which completes the send. Otherwise (see
                        // `State::copy_sends`) the path copies what it may have to resend.
                        let held = *hold && net.holds_references(peer);
                        let fin_to = if held { sreq.0.wrapping_add(1) } else { 0 };
                        let mut full = false;
                        let piece = if self.pieces { net.stream_piece(peer, *len).clamp(1, chunk) } else { chunk };
                        while *off < *len {
                            let n = (*len - *off).min(piece);
                            let hdr = self.st.door.control(Kind::Data, 0, 0, 0, *off as u64, *rreq, fin_to);
                            // SAFETY: the send request keeps its buffer valid until complete,
                            // which with `held` is only once the receiver answered FIN.
                            let data = unsafe { std::slice::from_raw_parts(ptr.add(*off), n) };
                            let sent = if held {
                                // SAFETY: as above: the buffer outlives the path's reference.
                                unsafe { door::transmit_held(net.as_mut(), peer, &hdr, data) }
                            } else {
                                door::transmit(net.as_mut(), peer, &hdr, data)
                            };
                            match sent {
                                Ok(SendStatus::Done) => *off += n,
                                Ok(SendStatus::Full) => {
                                    full = true;
                                    break;
                                }
                                Err(_) if run_through => {
                                    lost.push(peer);
                                    full = true;
                                    break;
                                }
                                Err(_) if coordinated => {
                                    full = true;
                                    break;
                                }
                                Err(e) => return mpi_err!(Other, "sending to rank {peer}: {e}"),
                            }
                        }
                        if full {
                            break;
                        }
                        if !held {
                            finished.push(*sreq);
                        }
                        q.pop_front();
                        self.st.events += 1;
                    }
                }
            }
            if self.st.outq[peer as usize].is_empty() {
                self.st.busy_peers.swap_remove(i);
            } else {
                i += 1;
            }
        }
        for s in finished {
            self.st.complete_send(s);
        }
        for p in lost {
            self.st.peer_failed(p);
        }
        Ok(())
    }

    /// What a rank with nothing to do owes the other ranks' shared-segment collectives:
    /// the channel broadcasts' synchronization words and repairs, the slot exchanges'
    /// rewrites. A blocking wait calls it once idle (here, and `MPI_THREAD_MULTIPLE`'s wait
    /// with the lock released): a rank's next channel broadcast may otherwise wait for this
    /// one to pass a synchronization's result on, while this one waits for that rank.
    pub fn serve_collectives(&mut self) -> MpiResult<()> {
        self.channels_service()?;
        self.slots_service();
        Ok(())
    }

    /// Make progress until `done` holds: spin, then yield, then sleep on the path.
    pub fn block_until(&mut self, mut done: impl FnMut(&Engine) -> bool) -> MpiResult<()> {
        let mut idle = 0u32;
        let mut sleeps = 0u32;
        let mut spun = 0u32;
        loop {
            // Pessimistic logging: what the call queued behind the closed gate leaves before
            // it returns (the program may block outside MPI next, e.g. in a socket).
            if done(self) && !(self.st.logging && self.progress_depth == 0 && !self.st.busy_peers.is_empty() && self.mlog_gate_closed()) {
                // Control packets queued while the operation completed (a rendezvous FIN)
                // leave now: the program may exit right after this call.
                if !self.st.busy_peers.is_empty() {
                    self.flush()?;
                }
                return Ok(());
            }
            if self.progress()? {
                idle = 0;
                sleeps = 0;
                spun = 0;
                continue;
            }
            idle += 1;
            if idle % 256 == 0 {
                self.poll_failures();
                if self.relaunch {
                    self.poll_launcher();
                }
            }
            if idle == self.cfg.spin.max(1) {
                self.serve_collectives()?;
            }
            if idle < self.cfg.spin {
                std::hint::spin_loop();
            } else if idle < self.cfg.spin + self.cfg.yields {
                // A wait for one rank that runs on another CPU and owes this one its
                // message polls on for a few rounds: the message is nearer than the round
                // trip of a yield (see `peer_spin`).
                if self.poll_on_or_yield(&mut spun) {
                    idle -= 1;
                }
            } else if !self.coll.channels.ops.is_empty() && sleeps == 0 && idle < self.cfg.spin + crate::coll::channels::FRAME_YIELDS {
                // A channel broadcast's slot write rings no doorbell: wait for its frame as
                // the blocking broadcast does, the root a yield away.
                self.yield_cpu();
            } else if !self.st.loopback.is_empty() || !self.st.busy_peers.is_empty() && self.net.is_none() {
                continue;
            } else if self.service_awake() {
                // Poll as in the spin phase; yield where ranks outnumber CPUs (spin 0).
                if self.cfg.spin > 0 {
                    std::hint::spin_loop();
                } else {
                    self.yield_cpu();
                }
            } else if self.st.logging && self.mlog_awaits_launcher() {
                // The event logger's answer comes on the launcher link, which does not
                // wake a sleep on the path.
                self.yield_cpu();
            } else if let Some(net) = self.net.as_mut() {
                // Failure notices do not ring the doorbell: sleep shorter in run-through mode.
                let mut sleep = if self.st.ft.run_through { self.cfg.sleep.min(std::time::Duration::from_millis(5)) } else { self.cfg.sleep };
                if !self.coll.channels.ops.is_empty() {
                    // Nor does its frame wake a sleep on the path: look again soon, then
                    // less often, as the blocking broadcast does.
                    sleep = sleep.min(crate::coll::channels::frame_sleep(sleeps));
                }
                if self.coll.slots.ops.is_empty() {
                    net.wait(sleep).map_err(|e| MpiError::new(ErrorClass::Other, e.to_string()))?;
                } else {
                    // A slot exchange publishes in memory: look at it after announcing the sleep.
                    let ops = &self.coll.slots.ops;
                    net.wait_unless(sleep, &mut || Engine::slots_ready(ops)).map_err(|e| MpiError::new(ErrorClass::Other, e.to_string()))?;
                }
                sleeps += 1;
                // A rank waiting in a slot collective may have asked this one for a rewrite.
                self.slots_service();
                if sleeps == 64 && self.st.logging {
                    self.mlog_trace_stall();
                }
                self.poll_failures();
                if self.relaunch {
                    self.poll_launcher();
                }
                idle = self.cfg.spin;
            } else {
                // A singleton with nothing in flight can never be woken: the wait is a deadlock.
                return mpi_err!(Other, "deadlock: waiting for a message that no process can send");
            }
        }
    }

    /// The world rank every open request among `hs` waits for (a receive from it, a send
    /// to it), if it is one rank.
    pub(crate) fn requests_awaited(&self, hs: impl IntoIterator<Item = Handle>) -> Option<u32> {
        let mut peer = None;
        for h in hs {
            let Some(r) = self.st.reqs.get(h) else { continue };
            if r.complete || (r.persistent && !r.active) {
                continue;
            }
            let (comm, rank) = match &r.op {
                Op::Recv(s) if s.src >= 0 => (s.comm, s.src),
                Op::Send(s) if s.dest >= 0 => (s.comm, s.dest),
                _ => return None,
            };
            let w = self.comm(comm).ok()?.peer_world(rank)?;
            if peer.is_some_and(|p| p != w) {
                return None;
            }
            peer = Some(w);
        }
        peer
    }

    /// [`Engine::block_until`] for a wait on world rank `peer` (None: several, or not
    /// known): the wait is published for the other ranks and polls on for `peer` while it
    /// runs (see `peer_spin`). Callers name a peer only where `peer_spin` is on.
    pub(crate) fn block_until_for(&mut self, peer: Option<u32>, done: impl FnMut(&Engine) -> bool) -> MpiResult<()> {
        let published = match peer {
            Some(w) if self.awaiting.is_none() => {
                self.set_awaiting(w);
                true
            }
            _ => false,
        };
        let r = self.block_until(done);
        if published {
            self.end_awaiting();
        }
        r
    }

    /// Publish that this rank waits for world rank `w` (or [`AWAITING_SEVERAL`]), for the
    /// other ranks' `peer_spin`.
    pub(crate) fn set_awaiting(&mut self, w: u32) {
        self.awaiting = Some(w);
        if let Some(net) = self.net.as_ref() {
            net.set_awaiting(Some(w));
        }
    }

    /// End what [`Engine::set_awaiting`] published.
    pub(crate) fn end_awaiting(&mut self) {
        if self.awaiting.take().is_some() {
            if let Some(net) = self.net.as_ref() {
                net.set_awaiting(None);
            }
        }
    }

    /// Give up the CPU for one `sched_yield`, telling the ranks that may wait for this one
    /// that it does (so they do not poll on for it, see `peer_spin`).
    pub(crate) fn yield_cpu(&self) {
        match self.net.as_ref() {
            Some(net) if self.peer_spin > 0 => {
                net.set_off_cpu(true);
                std::thread::yield_now();
                net.set_off_cpu(false);
            }
            _ => std::thread::yield_now(),
        }
    }

    /// One idle round of a wait that yields: poll on (true, counted in `spun`) while the
    /// one rank the wait is published to be for runs and owes this rank its message, at
    /// most `peer_spin` rounds in a row; else yield (false).
    pub(crate) fn poll_on_or_yield(&mut self, spun: &mut u32) -> bool {
        if *spun < self.peer_spin && self.awaited_peer_runs() {
            *spun += 1;
            std::hint::spin_loop();
            true
        } else {
            *spun = 0;
            self.yield_cpu();
            false
        }
    }

    /// Whether the one rank this rank's wait is published to be for runs on a CPU now and
    /// owes this rank its message (it waits for nothing else).
    fn awaited_peer_runs(&mut self) -> bool {
        match (self.awaiting.filter(|&p| p != AWAITING_SEVERAL), self.net.as_mut()) {
            (Some(p), Some(net)) => net.peer_sends_soon(p),
            _ => false,
        }
    }

    /// Sleep until a packet may have arrived (the path's doorbell) or `max` passed.
    pub fn sleep_on_path(&mut self, max: std::time::Duration) -> MpiResult<()> {
        if !self.st.loopback.is_empty() || !self.st.busy_peers.is_empty() {
            return Ok(());
        }
        match self.net.as_mut() {
            Some(net) => net.wait(max).map_err(|e| MpiError::new(ErrorClass::Other, e.to_string())),
            None => {
                std::thread::sleep(max);
                Ok(())
            }
        }
    }

    /// As [`Engine::sleep_on_path`], but no sleep once `ready` holds; the path asks it after
    /// announcing the sleep (see [`steadfast_paths::Path::wait_unless`]).
    pub(crate) fn sleep_on_path_unless(&mut self, max: std::time::Duration, ready: &mut dyn FnMut() -> bool) -> MpiResult<()> {
        if !self.st.loopback.is_empty() || !self.st.busy_peers.is_empty() {
            return Ok(());
        }
        match self.net.as_mut() {
            Some(net) => net.wait_unless(max, ready).map_err(|e| MpiError::new(ErrorClass::Other, e.to_string())),
            None => {
                if !ready() {
                    std::thread::sleep(max);
                }
                Ok(())
            }
        }
    }

    /// Wait for request `h` to complete and return its status.
    ///
    /// In run-through mode an `ANY_SOURCE` receive on a communicator with unacknowledged
    /// failures returns `ProcFailedPending` without completing (it stays matchable).
    pub fn wait(&mut self, h: Handle) -> MpiResult<Status> {
        let r = self.request(h)?;
        // Where waits yield at once: whom this wait is for, if one rank (see `peer_spin`):
        // a receive's sender, a send's receiver, a collective's round's one peer.
        let peer = match r.op {
            _ if self.peer_spin == 0 || r.complete => None,
            Op::Null => self.coll_awaited(h),
            _ => self.requests_awaited([h]),
        };
        self.block_until_for(peer, |e| {
            e.st.reqs.get(h).is_none_or(|r| r.complete || (r.persistent && !r.active)) || e.any_source_blocked(h)
        })?;
        if !self.request(h)?.complete && self.any_source_blocked(h) {
            return mpi_err!(ProcFailedPending, "a process failed and the failure is not acknowledged on this communicator");
        }
        self.status(h)
    }

    // ---- failed processes -------------------------------------------------------------------

    /// The request-free fast paths (`engine_fast.rs`, `coll/small.rs`) are off: in
    /// run-through mode (failures complete requests) and with message logging (every
    /// message is logged, and a pessimistic send may have to wait).
    #[inline]
    pub(crate) fn fast_paths_off(&self) -> bool {
        self.st.ft.run_through || self.st.logging
    }

    /// Whether the job runs in run-through mode (failures reported, not fatal).
    pub fn run_through(&self) -> bool {
        self.st.ft.run_through
    }

    /// Record that world rank `w` failed: every operation that depends on it completes with
    /// `ProcFailed`, and it is never sent to again.
    pub fn peer_failed(&mut self, w: u32) {
        self.st.peer_failed(w);
    }

    /// World rank `w` was started again as incarnation `incarnation` (the launcher's
    /// notice, or the first packet of the new incarnation): it is no longer failed, and
    /// what earlier incarnations sent is dropped.
    pub fn peer_rejoined(&mut self, w: u32, incarnation: u16) {
        self.st.peer_rejoined(w, incarnation);
    }

    /// The incarnation of world rank `w` this process knows (its own for `w == rank`).
    pub fn incarnation_of(&self, w: u32) -> u16 {
        self.st.door.incarnation_of(w)
    }

    pub(crate) fn door_mut(&mut self) -> &mut Door {
        &mut self.st.door
    }

    /// Plug a recovery protocol into the door (see [`crate::door::Interpose`]).
    pub fn set_interpose(&mut self, hook: Option<Box<dyn crate::door::Interpose>>) {
        self.st.door.set_hook(hook);
    }

    /// Packets dropped so far: malformed, from an earlier incarnation, or unusable.
    pub fn dropped_packets(&self) -> u64 {
        self.st.dropped
    }

    /// World ranks known failed, in detection order.
    pub fn failed_ranks(&self) -> &[u32] {
        &self.st.ft.order
    }

    /// Whether world rank `w` is known to have failed.
    pub fn is_failed(&self, w: u32) -> bool {
        self.st.ft.is_dead(w)
    }

    /// Failed members of communicator `c` (as communicator ranks), in detection order;
    /// with `acked_only`, only those acknowledged on `c`.
    pub fn comm_failed(&self, c: Handle, acked_only: bool) -> MpiResult<Vec<i32>> {
        let comm = self.comm(c)?;
        let upto = if acked_only { self.st.ft.comm(comm.ctx).acked } else { self.st.ft.order.len() };
        let g = comm.remote.as_ref().unwrap_or(&comm.group);
        Ok(self.st.ft.order[..upto]
            .iter()
            .filter_map(|w| g.iter().position(|x| x == w).map(|r| r as i32))
            .collect())
    }

    /// Acknowledge on `c` every failure known now (MPIX_Comm_failure_ack), or only the first
    /// `n` failed members of `c` (MPI_Comm_ack_failed); returns how many members are acked.
    pub fn comm_ack_failures(&mut self, c: Handle, n: Option<usize>) -> MpiResult<usize> {
        let ctx = self.comm(c)?.ctx;
        let members = self.comm_failed(c, false)?;
        let total = self.st.ft.order.len();
        let upto = match n {
            None => total,
            Some(n) => {
                // Advance over the global order until n members of c are covered.
                let comm = self.comm(c)?;
                let g = comm.remote.as_ref().unwrap_or(&comm.group);
                let mut seen = 0;
                let mut idx = 0;
                while idx < total && seen < n.min(members.len()) {
                    if g.contains(&self.st.ft.order[idx]) {
                        seen += 1;
                    }
                    idx += 1;
                }
                idx.max(self.st.ft.comm(ctx).acked)
            }
        };
        self.st.ft.comm.entry(ctx).or_default().acked = upto;
        if self.st.ft.run_through {
            self.ulfm_ack(c, n);
        }
        self.comm_failed(c, true).map(|v| v.len())
    }

    /// Whether the failure of rank `peer` of communicator `c` was already reported to the
    /// application on `c` (by an error or an acknowledgement).
    pub fn failure_reported(&self, c: Handle, peer: i32) -> bool {
        let Ok(comm) = self.comm(c) else { return false };
        let Some(w) = comm.peer_world(peer) else { return false };
        let ft = self.st.ft.comm.get(&comm.ctx);
        ft.is_some_and(|f| f.reported.contains(&w) || self.st.ft.order[..f.acked.min(self.st.ft.order.len())].contains(&w))
    }

    /// A call on `c` returned MPIX_ERR_PROC_FAILED: every failure of a member known now
    /// counts as reported on `c`.
    pub fn comm_mark_reported(&mut self, c: Handle) {
        let Ok(comm) = self.comm(c) else { return };
        let ctx = comm.ctx;
        let g = comm.remote.as_ref().unwrap_or(&comm.group);
        let dead: Vec<u32> = g.iter().copied().filter(|w| self.st.ft.is_dead(*w)).collect();
        let f = self.st.ft.comm.entry(ctx).or_default();
        for w in dead {
            if !f.reported.contains(&w) {
                f.reported.push(w);
            }
        }
    }

    /// Whether a member gave up on the collective with tag `tag` on `c` (run-through mode).
    pub(crate) fn coll_aborted(&self, c: Handle, tag: i32) -> bool {
        !self.st.ft.aborted.is_empty()
            && self.comm(c).is_ok_and(|comm| {
                let ctx = comm.coll_ctx();
                self.st.ft.aborted.iter().any(|(x, t, at)| *x == ctx && *t == tag && at.elapsed() < crate::ft::state::ABORT_TTL)
            })
    }

    /// The collective with tag `tag` on `c` ended here: forget abort notices for it.
    pub(crate) fn coll_forget_abort(&mut self, c: Handle, tag: i32) {
        if self.st.ft.aborted.is_empty() {
            return;
        }
        if let Ok(comm) = self.comm(c) {
            let ctx = comm.coll_ctx();
            self.st.ft.aborted.retain(|(x, t, _)| !(*x == ctx && *t == tag));
        }
    }

    /// This process gives up on the collective with tag `tag` on `c` because a member
    /// failed: tell the other live members, so they stop waiting for it at once instead of
    /// after the grace period.
    pub(crate) fn coll_abort_notify(&mut self, c: Handle, tag: i32) {
        if !self.st.ft.run_through {
            return;
        }
        let Ok(comm) = self.comm(c) else { return };
        let (ctx, me) = (comm.coll_ctx(), comm.rank);
        let peers: Vec<u32> = comm.group.iter().copied().filter(|w| *w != self.rank && !self.st.ft.is_dead(*w)).collect();
        let hdr = self.st.door.control(Kind::CollAbort, ctx, me, tag, 0, 0, 0);
        for w in peers {
            self.st.queue(w, OutOp::Packet { hdr, payload: Vec::new() });
        }
    }

    /// Largest message sent in one eager packet.
    pub(crate) fn eager_limit(&self) -> usize {
        self.eager_limit
    }

    /// Drop one unexpected message matching (`ctx`, `src`, `tag`); false when none waits.
    pub(crate) fn take_unexpected(&mut self, ctx: u32, src: i32, tag: i32) -> bool {
        self.st.take(ctx, src, tag).is_some()
    }

    /// Take an eager message matching (`ctx`, `src`, `tag`) that already arrived: its source
    /// and data. A rendezvous announcement there is dropped (protocols that use this send
    /// eagerly only).
    pub(crate) fn take_eager(&mut self, ctx: u32, src: i32, tag: i32) -> Option<(i32, Vec<u8>)> {
        let u = self.st.take(ctx, src, tag)?;
        match u.msg {
            Body::Eager { data, .. } => Some((u.src, data)),
            Body::Rts { .. } => {
                self.st.dropped += 1;
                None
            }
        }
    }

    /// The oldest message on (`ctx`, any source, `tag`) that arrived: an eager one is taken
    /// (its source and data); a rendezvous one is left in place and only its source and
    /// length are returned, for the caller to post a receive that takes it.
    pub(crate) fn next_arrived(&mut self, ctx: u32, tag: i32) -> Option<Arrived> {
        let u = self.st.matcher.peek(ctx, ANY_SOURCE, tag)?;
        if let Body::Rts { len, .. } = u.msg {
            return Some(Arrived::Announced { src: u.src, len });
        }
        let u = self.st.take(ctx, ANY_SOURCE, tag)?;
        match u.msg {
            Body::Eager { data, .. } => Some(Arrived::Data { src: u.src, data }),
            Body::Rts { .. } => None,
        }
    }

    /// Whether a message matching (`ctx`, `src`, `tag`) arrived and waits.
    pub(crate) fn has_unexpected(&self, ctx: u32, src: i32, tag: i32) -> bool {
        self.st.matcher.peek(ctx, src, tag).is_some()
    }

    /// Count a message dropped as malformed.
    pub(crate) fn dropped_packet(&mut self) {
        self.st.dropped += 1;
    }

    /// Send `data` eagerly on the collective context of `c` (it must fit one packet).
    pub(crate) fn coll_send_bytes(&mut self, c: Handle, dest: i32, tag: i32, data: &[u8]) -> MpiResult<()> {
        let byte = self.byte_type();
        if self.coll_send_now(c, dest, false, tag, data.as_ptr(), data.len(), &byte)? {
            Ok(())
        } else {
            mpi_err!(Intern, "message of {} bytes does not fit one eager packet", data.len())
        }
    }

    /// Whether every member of `c` other than this process is known failed.
    pub(crate) fn all_others_failed(&self, c: Handle) -> bool {
        if self.st.ft.order.is_empty() {
            return false;
        }
        self.comm(c).is_ok_and(|comm| {
            comm.group.iter().enumerate().all(|(r, w)| r as i32 == comm.rank || self.st.ft.is_dead(*w))
        })
    }

    /// Whether some member of communicator `c` is known to have failed.
    pub fn comm_has_failed_member(&self, c: Handle) -> bool {
        if self.st.ft.order.is_empty() {
            return false;
        }
        self.comm(c).is_ok_and(|comm| {
            let dead = |g: &Vec<u32>| g.iter().any(|w| self.st.ft.is_dead(*w));
            dead(&comm.group) || comm.remote.as_ref().is_some_and(|r| dead(r))
        })
    }

    /// Take failures from the membership view (run-through mode only): one atomic load
    /// when nothing changed.
    pub(crate) fn poll_failures(&mut self) {
        if !self.st.ft.run_through {
            return;
        }
        let generation = self.ft.generation();
        if generation == self.ft_seen {
            return;
        }
        self.ft_seen = generation;
        // Take in what the dead ranks sent before they died, so it is still received.
        if let Some(net) = self.net.as_mut() {
            let _ = net.poll(&mut Sink(&mut self.st));
        }
        for w in self.ft.failed() {
            self.st.peer_failed(w);
            // Nothing more is owed to it: a reliable path stops retransmitting.
            if let Some(n) = self.net.as_mut() {
                n.peer_failed(w);
            }
        }
    }

    /// Relaunch mode: act on the launcher's notices of failed and restarted ranks.
    fn poll_launcher(&mut self) {
        self.launcher_polls = 0;
        let Some(boot) = self.boot.as_mut() else { return };
        for ev in boot.poll_events() {
            match ev {
                steadfast_runtime::LauncherEvent::RankExited { rank, finalized: false, .. } => {
                    if let Some(net) = self.net.as_mut() {
                        // Take in what it sent before it died, so it is still received.
                        let _ = net.poll(&mut Sink(&mut self.st));
                    }
                    let noticed = self.launcher_incarnation.get(rank as usize).copied().unwrap_or(0);
                    if self.st.door.incarnation_of(rank) > noticed {
                        // The exit of an earlier incarnation: the new one already spoke.
                        continue;
                    }
                    if let Some(net) = self.net.as_mut() {
                        net.peer_failed(rank);
                    }
                    if !self.st.logging {
                        self.st.peer_failed(rank);
                    }
                }
                steadfast_runtime::LauncherEvent::Recovery { bytes } => self.mlog_from_logger(&bytes),
                steadfast_runtime::LauncherEvent::RankRejoined { rank, incarnation } => {
                    if let Some(n) = self.launcher_incarnation.get_mut(rank as usize) {
                        *n = incarnation;
                    }
                    // Channel memory: the new process is known from its first packet in this
                    // rank's stream, so that a re-execution of this rank sees the same.
                    if !self.st.channel_memory {
                        self.st.peer_rejoined(rank, incarnation);
                    }
                }
                _ => {}
            }
        }
        if !self.st.rejoined.is_empty() {
            self.reconnect_rejoined();
        }
        self.publish_view();
    }

    /// Relaunch mode: the membership view is the set of ranks not known failed (the
    /// `MPIX_Steadfast_view` calls show failures and rejoins).
    fn publish_view(&mut self) {
        let members: Vec<u32> = (0..self.size).filter(|w| !self.st.ft.is_dead(*w)).collect();
        self.ft.publish_external(members);
        // This process made the change: nothing new for poll_failures.
        self.ft_seen = self.ft.generation();
    }

    /// Point the paths at the new incarnations of ranks that came back.
    fn reconnect_rejoined(&mut self) {
        for w in std::mem::take(&mut self.st.rejoined) {
            if let Some(ok) = self.st.cma_ok.get_mut(w as usize) {
                // Another process now: its memory is not where the old one's was.
                *ok = false;
            }
            let (Some(net), Some(boot)) = (self.net.as_mut(), self.boot.as_mut()) else { continue };
            if let Err(e) = net.peer_rejoined(w, &mut BootExchange(boot.as_mut())) {
                tracing::warn!("cannot reconnect to rank {w}: {e}");
                self.st.peer_failed(w);
                continue;
            }
            if let Err(e) = self.mlog_peer_rejoined(w) {
                tracing::warn!("cannot send rank {w} its messages again: {e}");
            }
        }
        if self.relaunch {
            self.publish_view();
        }
    }

    /// Whether a wait on `h` must return ProcFailedPending (see [`Engine::wait`]).
    #[inline]
    pub fn any_source_blocked(&self, h: Handle) -> bool {
        if !self.st.ft.run_through || self.st.ft.order.is_empty() {
            return false;
        }
        let Some(r) = self.st.reqs.get(h) else { return false };
        let Op::Recv(s) = &r.op else { return false };
        if r.complete || !r.recv.posted || s.src != ANY_SOURCE {
            return false;
        }
        let Ok(comm) = self.comm(s.comm) else { return false };
        let acked = self.st.ft.comm(comm.ctx).acked;
        let g = comm.remote.as_ref().unwrap_or(&comm.group);
        self.st.ft.order[acked..].iter().any(|w| g.contains(w))
    }

    /// Bytes of unexpected messages and posted receives outstanding on a context (for tests).
    pub fn queue_depth(&self, ctx: u32) -> (usize, usize) {
        self.st.matcher.depth(ctx)
    }

    // ---- internal collectives used by the engine itself ----------------------------------

    /// Blocking send on the collective context of `c`.
    pub fn coll_send(&mut self, c: Handle, dest: i32, tag: i32, data: &[u8]) -> MpiResult<()> {
        let h = self.coll_isend(c, dest, tag, data)?;
        self.wait(h)?;
        self.release(h);
        Ok(())
    }

    /// Whether the send being started is read by its receiver with a single copy because a
    /// collective asked for it (`State::single_copy_send`): not in the fault-tolerance
    /// modes that keep, replay or cut messages (their data passes the rings).
    fn single_copy(&self) -> bool {
        self.single_copy_usable(self.st.single_copy_send)
    }

    /// Whether a send a collective marks `how` would be read with a single copy.
    pub(crate) fn single_copy_usable(&self, how: crate::coll::sched::SingleCopy) -> bool {
        use crate::coll::sched::SingleCopy;
        let asked = match how {
            SingleCopy::No => return false,
            SingleCopy::Yes => true,
            SingleCopy::WhereFast => steadfast_paths::cma::fast_here(),
        };
        asked && !self.st.logging && self.coord.is_none() && !self.st.ft.run_through
    }

    /// See `State::single_copy_send`.
    pub(crate) fn set_single_copy_send(&mut self, how: crate::coll::sched::SingleCopy) {
        self.st.single_copy_send = how;
    }

    /// See `State::copy_sends`.
    pub(crate) fn set_copy_sends(&mut self, on: bool) {
        self.st.copy_sends = on;
    }

    /// Nonblocking send on the collective context of `c`.
    pub fn coll_isend(&mut self, c: Handle, dest: i32, tag: i32, data: &[u8]) -> MpiResult<Handle> {
        let byte = self.byte_type();
        let spec = SendSpec { buf: data.as_ptr(), count: data.len(), dtype: byte, comm: c, dest, tag, mode: Mode::Standard };
        let h = self.st.reqs.insert(Request::new(Op::Send(spec.clone()), false));
        let r = self.st.reqs.get_mut(h).ok_or_else(|| MpiError::new(ErrorClass::Intern, "lost request"))?;
        r.active = true;
        self.start_send(h, &spec, Route::Coll)?;
        Ok(h)
    }

    /// Nonblocking send of `count` elements of `dtype` at `buf` on the collective context of
    /// `c`; `local` addresses the local group of an intercommunicator.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn coll_isend_typed(
        &mut self,
        c: Handle,
        dest: i32,
        local: bool,
        tag: i32,
        buf: *const u8,
        count: usize,
        dtype: TypeRef,
    ) -> MpiResult<Handle> {
        let spec = SendSpec { buf, count, dtype, comm: c, dest, tag, mode: Mode::Standard };
        let mut r = Request::new(Op::Send(spec.clone()), false);
        r.active = true;
        let h = self.st.reqs.insert(r);
        let route = if local { Route::CollLocal } else { Route::Coll };
        if let Err(e) = self.start_send(h, &spec, route) {
            self.st.reqs.remove(h);
            return Err(e);
        }
        Ok(h)
    }

    /// Nonblocking receive of `count` elements of `dtype` into `buf` on the collective
    /// context of `c`.
    pub(crate) fn coll_irecv_typed(&mut self, c: Handle, src: i32, tag: i32, buf: *mut u8, count: usize, dtype: TypeRef) -> MpiResult<Handle> {
        let ctx = self.comm(c)?.coll_ctx();
        let spec = RecvSpec { buf, count, dtype, comm: c, src, tag };
        let mut r = Request::new(Op::Recv(spec), false);
        r.active = true;
        r.recv.ctx = ctx;
        let h = self.st.reqs.insert(r);
        let dead = src != ANY_SOURCE && self.comm(c)?.peer_world(src).is_some_and(|w| self.st.ft.is_dead(w));
        match self.st.post(ctx, src, tag, h) {
            Some(u) => self.st.deliver(h, u.src, u.tag, u.body_into()),
            None if dead => {
                // Nothing the failed process sent is waiting, and nothing more will come.
                self.st.matcher.cancel(ctx, h);
                self.st.complete(h, failed_status(src, tag));
            }
            None => {
                if let Some(r) = self.st.reqs.get_mut(h) {
                    r.recv.posted = true;
                }
            }
        }
        Ok(h)
    }

    /// Eager send on the collective context without a request, when the data can leave at
    /// once (contiguous, within the eager limit): what collectives send most. Returns false
    /// when the caller must use a request ([`Engine::coll_isend_typed`]).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn coll_send_now(
        &mut self,
        c: Handle,
        dest: i32,
        local: bool,
        tag: i32,
        buf: *const u8,
        count: usize,
        dtype: &TypeRef,
    ) -> MpiResult<bool> {
        let len = dtype.packed_size(count);
        if len > self.eager_limit || !dtype.is_contiguous() {
            return Ok(false);
        }
        let comm = self.comm(c)?;
        let peer = if local { usize::try_from(dest).ok().and_then(|d| comm.group.get(d).copied()) } else { comm.peer_world(dest) };
        let peer = peer.ok_or_else(|| MpiError::new(ErrorClass::Rank, "invalid destination"))?;
        let hdr = self.st.door.message(peer, Kind::Eager, 0, comm.coll_ctx(), comm.rank, tag, len as u64, 0);
        // SAFETY: the collective's buffer is valid for `len` bytes (contiguous type).
        let payload = unsafe { std::slice::from_raw_parts(if len == 0 { [].as_ptr() } else { buf }, len) };
        if self.st.logging {
            self.mlog_keep(peer, &hdr, payload)?;
        }
        self.emit_message(peer, &hdr, payload)?;
        self.st.events += 1;
        Ok(true)
    }

    /// Receive on the collective context of `c`: a message that already arrived eagerly is
    /// copied at once without a request (returns None; a truncation goes to `err`); otherwise
    /// returns the request of a posted receive.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn coll_recv_or_post(
        &mut self,
        c: Handle,
        src: i32,
        tag: i32,
        buf: *mut u8,
        count: usize,
        dtype: TypeRef,
        err: &mut Option<ErrorClass>,
        received: &mut u64,
    ) -> MpiResult<Option<Handle>> {
        let ctx = self.comm(c)?.coll_ctx();
        let Some(u) = self.st.take(ctx, src, tag) else {
            return self.coll_irecv_typed(c, src, tag, buf, count, dtype).map(Some);
        };
        match u.msg {
            Body::Eager { data, .. } => {
                // SAFETY: the collective's receive buffer holds `count` elements of `dtype`.
                let (_, truncated) = unsafe { copy_into(&data, buf, count, &dtype) };
                if truncated {
                    err.get_or_insert(ErrorClass::Truncate);
                }
                *received = data.len() as u64;
                self.st.spares.put(data);
                self.st.events += 1;
                Ok(None)
            }
            body => {
                // Rendezvous: a request takes it, as a posted receive would have.
                let mut r = Request::new(Op::Recv(RecvSpec { buf, count, dtype, comm: c, src, tag }), false);
                r.active = true;
                r.recv.ctx = ctx;
                let h = self.st.reqs.insert(r);
                self.st.deliver(h, u.src, u.tag, body);
                Ok(Some(h))
            }
        }
    }

    /// Make receive request `h` the whole of a nonblocking collective at this rank
    /// ([`crate::request::RecvState::coll`]).
    pub(crate) fn coll_recv_request(&mut self, h: Handle) {
        if let Some(r) = self.st.reqs.get_mut(h) {
            r.recv.coll = true;
            if r.complete {
                r.status = coll_recv_status(&r.op, r.status);
            }
        }
    }

    /// A request standing for a collective: active (unless persistent) and not complete.
    pub(crate) fn coll_request(&mut self, persistent: bool) -> Handle {
        let mut r = Request::new(Op::Null, persistent);
        r.active = !persistent;
        self.st.reqs.insert(r)
    }

    /// Mark persistent collective request `h` started.
    pub(crate) fn coll_request_activate(&mut self, h: Handle) {
        if let Some(r) = self.st.reqs.get_mut(h) {
            r.active = true;
            r.complete = false;
            r.status = Status::default();
        }
    }

    /// Complete request `h` with `status` (requests the engine completes itself).
    pub(crate) fn complete_request(&mut self, h: Handle, status: Status) {
        self.st.complete(h, status);
    }

    /// Complete collective request `h`, with the error class of a failed transfer if any.
    pub(crate) fn coll_request_done(&mut self, h: Handle, error: Option<ErrorClass>) {
        let status = Status { source: ANY_SOURCE, tag: ANY_TAG, error, bytes: 0, cancelled: false };
        self.st.complete(h, status);
    }

    /// Nonblocking receive on the collective context of `c`.
    pub fn coll_irecv(&mut self, c: Handle, src: i32, tag: i32, buf: &mut [u8]) -> MpiResult<Handle> {
        let byte = self.byte_type();
        let spec = RecvSpec { buf: buf.as_mut_ptr(), count: buf.len(), dtype: byte, comm: c, src, tag };
        let mut r = Request::new(Op::Recv(spec.clone()), false);
        r.active = true;
        let h = self.st.reqs.insert(r);
        let ctx = self.comm(c)?.coll_ctx();
        if let Some(r) = self.st.reqs.get_mut(h) {
            r.recv.ctx = ctx;
        }
        match self.st.post(ctx, src, tag, h) {
            Some(u) => self.st.deliver(h, u.src, u.tag, u.body_into()),
            None => {
                if let Some(r) = self.st.reqs.get_mut(h) {
                    r.recv.posted = true;
                }
            }
        }
        Ok(h)
    }

    /// Blocking receive on the collective context of `c`. In run-through mode it fails, on
    /// every survivor, as soon as any member of `c` is known failed, so no collective hangs.
    pub fn coll_recv(&mut self, c: Handle, src: i32, tag: i32, buf: &mut [u8]) -> MpiResult<Status> {
        let h = self.coll_irecv(c, src, tag, buf)?;
        let res = self.coll_wait(c, h);
        if res.as_ref().map_or(true, |s| s.error.is_some()) {
            // The buffer is the caller's: never leave a receive posted into it.
            let _ = self.cancel(h);
        }
        self.release(h);
        match res {
            Ok(s) => match s.error {
                Some(ErrorClass::ProcFailed) => mpi_err!(ProcFailed, "a member of the communicator failed"),
                _ => Ok(s),
            },
            Err(e) => Err(e),
        }
    }

    /// Wait for a request of a collective on `c`, failing when a member of `c` failed.
    pub fn coll_wait(&mut self, c: Handle, h: Handle) -> MpiResult<Status> {
        self.block_until(|e| e.st.reqs.get(h).is_none_or(|r| r.complete) || e.comm_has_failed_member(c))?;
        if !self.request(h)?.complete {
            // The failed member may play no part here (e.g. a group creation that excludes
            // it): live peers get the collectives' grace period.
            let deadline = std::time::Instant::now() + crate::coll::sched::COLL_FAILURE_GRACE;
            self.block_until(|e| e.st.reqs.get(h).is_none_or(|r| r.complete) || std::time::Instant::now() >= deadline)?;
        }
        if !self.request(h)?.complete {
            return mpi_err!(ProcFailed, "a member of the communicator failed");
        }
        self.status(h)
    }

    pub fn byte_type(&self) -> TypeRef {
        crate::coll::byte_type()
    }

    /// Maximum of one u64 over the members of `c` (used to agree on context ids).
    pub fn allreduce_max_u64(&mut self, c: Handle, v: u64) -> MpiResult<u64> {
        const TAG: i32 = 0x7fff_0001;
        let comm = self.comm(c)?;
        let (rank, size) = (comm.rank, comm.size());
        if comm.remote.is_some() {
            return mpi_err!(Comm, "context agreement over an intercommunicator needs its local comm");
        }
        // Recursive doubling over the largest power of two, with the extra ranks folded in.
        let mut pof2 = 1;
        while pof2 * 2 <= size {
            pof2 *= 2;
        }
        let mut acc = v;
        let mut buf = [0u8; 8];
        if rank >= pof2 {
            self.coll_send(c, rank - pof2, TAG, &acc.to_le_bytes())?;
            self.coll_recv(c, rank - pof2, TAG, &mut buf)?;
            return Ok(u64::from_le_bytes(buf));
        }
        if rank + pof2 < size {
            self.coll_recv(c, rank + pof2, TAG, &mut buf)?;
            acc = acc.max(u64::from_le_bytes(buf));
        }
        let mut mask = 1;
        while mask < pof2 {
            let partner = rank ^ mask;
            let s = self.coll_isend(c, partner, TAG, &acc.to_le_bytes())?;
            self.coll_recv(c, partner, TAG, &mut buf)?;
            self.wait(s)?;
            self.release(s);
            acc = acc.max(u64::from_le_bytes(buf));
            mask <<= 1;
        }
        if rank + pof2 < size {
            self.coll_send(c, rank + pof2, TAG, &acc.to_le_bytes())?;
        }
        Ok(acc)
    }
}

impl Unexpected<Body> {
    fn body_into(self) -> Body {
        self.msg
    }
}

impl State {
    /// The incoming door: a packet from `peer` that may be acted on, or None (dropped and
    /// counted: malformed, or from an incarnation of `peer` older than the newest known).
    #[inline]
    fn admit(&mut self, peer: u32, raw: &RawHeader) -> Option<Header> {
        match self.door.admit(peer, raw) {
            Admitted::Packet(h) => Some(h),
            Admitted::Rejoined(h) => {
                self.peer_rejoined(peer, h.incarnation);
                Some(h)
            }
            Admitted::Dropped => {
                self.dropped += 1;
                None
            }
        }
    }

    /// Post receive `h`; a message that already arrived and matches is returned (and
    /// recorded as received).
    #[inline]
    fn post(&mut self, ctx: u32, src: i32, tag: i32, h: Handle) -> Option<Unexpected<Body>> {
        let u = self.matcher.post(ctx, src, tag, h)?;
        self.door.matched(u.msg.from(), ctx, u.src, u.tag);
        self.sync_matched(u.msg.from());
        Some(u)
    }

    /// Take the earliest arrived message matching (`ctx`, `src`, `tag`) for a receive
    /// that is not a posted request (recorded as received).
    #[inline]
    fn take(&mut self, ctx: u32, src: i32, tag: i32) -> Option<Unexpected<Body>> {
        let u = self.matcher.take(ctx, src, tag)?;
        self.door.matched(u.msg.from(), ctx, u.src, u.tag);
        self.sync_matched(u.msg.from());
        Some(u)
    }

    /// World rank `w` started again as incarnation `inc`: its failure is over; messages
    /// from earlier incarnations are dropped from now on.
    pub(crate) fn peer_rejoined(&mut self, w: u32, inc: u16) {
        if !self.door.rejoined(w, inc) {
            return;
        }
        tracing::info!("rank {w} rejoined as incarnation {inc}");
        if self.channel_memory {
            // Nothing to do: what it sent stays in the streams, its own stream goes to the
            // new process from the channel memory, and the paths lead to the servers.
            self.events += 1;
            return;
        }
        if self.logging {
            // Nothing is lost: what it sent stays, what it was sent goes again (the engine
            // does that once the path leads to the new process, `mlog_peer_rejoined`).
            if let Some(d) = self.ft.dead.get_mut(w as usize) {
                *d = false;
            }
            self.mlog_forget_process(w);
            self.rejoined.push(w);
            self.events += 1;
            return;
        }
        if !self.ft.is_dead(w) {
            // The new incarnation spoke before the notice of the old one's death: what was
            // under way with the old one (a receive from it, a rendezvous it had answered)
            // ends now as failed, as the notice would have made it.
            self.peer_failed(w);
        }
        if let Some(d) = self.ft.dead.get_mut(w as usize) {
            *d = false;
        }
        // Output still queued was meant for the earlier incarnation.
        if let Some(q) = self.outq.get_mut(w as usize) {
            q.clear();
        }
        self.busy_peers.retain(|p| *p != w);
        self.rejoined.push(w);
        // What the earlier incarnation sent and nobody received is gone with it.
        let n = self.matcher.remove_unexpected_all(|u| u.msg.from().world == w && u.msg.from().incarnation < inc);
        self.dropped += n as u64;
        self.events += 1;
    }

    fn queue(&mut self, peer: u32, op: OutOp) {
        let q = &mut self.outq[peer as usize];
        if q.is_empty() {
            self.busy_peers.push(peer);
        }
        q.push_back(op);
    }

    // Inlined: its callers build the status field by field, and passed through memory it
    // was read back a word at a time (a store-forwarding failure on every completion).
    #[inline(always)]
    fn complete(&mut self, h: Handle, status: Status) {
        self.events += 1;
        let Some(r) = self.reqs.get_mut(h) else { return };
        r.complete = true;
        r.status = if r.recv.coll { coll_recv_status(&r.op, status) } else { status };
        r.recv.posted = false;
        if r.send.bsend_reserved > 0 || r.send.owned.is_some() || r.freed {
            self.complete_rest(h);
        }
    }

    /// The less common part of [`State::complete`]: buffer space and packed data to give
    /// back, a freed request to drop.
    #[inline(never)]
    fn complete_rest(&mut self, h: Handle) {
        let Some(r) = self.reqs.get_mut(h) else { return };
        if r.send.bsend_reserved > 0 {
            self.bsend_used -= r.send.bsend_reserved;
            r.send.bsend_reserved = 0;
        }
        r.send.owned = None;
        if r.freed {
            self.reqs.remove(h);
        }
    }

    fn peer_failed(&mut self, w: u32) {
        if w as usize >= self.ft.dead.len() || self.ft.dead[w as usize] {
            return;
        }
        self.ft.dead[w as usize] = true;
        if !self.ft.order.contains(&w) {
            self.ft.order.push(w);
        }
        self.events += 1;
        self.ulfm_process_failed(w);
        self.outq[w as usize].clear();
        self.busy_peers.retain(|p| *p != w);
        for h in self.reqs.handles() {
            let Some(r) = self.reqs.get(h) else { continue };
            if r.complete || !r.active {
                continue;
            }
            let fail = match &r.op {
                Op::Send(s) => {
                    s.dest != PROC_NULL && self.comms.get(s.comm).and_then(|c| c.peer_world(s.dest)) == Some(w)
                }
                Op::Recv(s) => {
                    r.recv.peer.get() == Some(w)
                        || (r.recv.posted
                            && s.src != ANY_SOURCE
                            && self.comms.get(s.comm).and_then(|c| c.peer_world(s.src)) == Some(w))
                }
                Op::Null => false,
            };
            if fail {
                let (ctx, posted) = (r.recv.ctx, r.recv.posted);
                let (src, tag) = match &r.op {
                    Op::Send(s) => (s.dest, s.tag),
                    Op::Recv(s) => (s.src, s.tag),
                    Op::Null => (PROC_NULL, 0),
                };
                if posted {
                    self.matcher.cancel(ctx, h);
                }
                self.complete(h, failed_status(src, tag));
            }
        }
    }

    /// Channel memory: a synchronous message was matched here: its sender's send may
    /// complete (the answer goes through the sender's channel memory, in its stream).
    #[inline]
    fn sync_matched(&mut self, from: crate::door::Ident) {
        if !self.channel_memory || self.sync_from.is_empty() {
            return;
        }
        if self.sync_from.remove(&(from.world, from.seq)) {
            let hdr = self.door.control(Kind::SyncAck, 0, 0, 0, 0, from.seq, 0);
            self.queue(from.world, OutOp::Packet { hdr, payload: Vec::new() });
        }
    }

    fn complete_send(&mut self, sreq: Handle) {
        let tag = match self.reqs.get(sreq).map(|r| &r.op) {
            Some(Op::Send(s)) => s.tag,
            _ => 0,
        };
        self.complete(sreq, Status { source: PROC_NULL, tag, error: None, bytes: 0, cancelled: false });
    }

    /// Act on an admitted packet from `peer`.
    fn handle_packet(&mut self, peer: u32, h: &Header, payload: &[u8]) {
        self.events += 1;
        match h.kind {
            Kind::Eager => {
                if h.len != payload.len() as u64 {
                    self.dropped += 1;
                    return;
                }
                if self.logging && self.mlog_duplicate(peer, h, payload) {
                    return;
                }
                let from = self.door.ident(peer, h.a);
                if self.channel_memory && h.flags & crate::wire::FLAG_SYNC != 0 {
                    self.sync_from.insert((peer, h.a));
                }
                if self.waiting.is_some() && self.eager_to_waiting(h, payload) {
                    self.door.matched(from, h.ctx, h.src, h.tag);
                    self.sync_matched(from);
                    return;
                }
                if let Some(r) = self.matcher.arrive(h.ctx, h.src, h.tag, || Body::Eager { data: self.spares.filled(payload), from }) {
                    self.door.matched(from, h.ctx, h.src, h.tag);
                    self.sync_matched(from);
                    self.deliver_bytes(r, h.src, h.tag, payload, h.len);
                }
            }
            Kind::Rts => {
                if self.logging && self.mlog_duplicate(peer, h, payload) {
                    return;
                }
                if self.waiting.is_some() {
                    self.promote_waiting(h.ctx, h.src, h.tag);
                }
                let Some((addr, crc)) = crate::wire::decode_rts(h.flags, payload) else {
                    self.dropped += 1;
                    return;
                };
                let from = self.door.ident(peer, h.a);
                let body = || Body::Rts { from, len: h.len, addr, sreq: h.b, flags: h.flags, crc };
                if let Some(r) = self.matcher.arrive(h.ctx, h.src, h.tag, body) {
                    self.door.matched(from, h.ctx, h.src, h.tag);
                    self.deliver(r, h.src, h.tag, body());
                }
            }
            Kind::Cts => {
                let sreq = Handle(h.b);
                let Some(req) = self.reqs.get(sreq) else {
                    self.dropped += 1;
                    return;
                };
                let Op::Send(s) = &req.op else {
                    self.dropped += 1;
                    return;
                };
                // The answer of a receiver that failed after sending it: the send already
                // completed with the failure, and nothing may be streamed to that rank (a
                // later incarnation would take the data for one of its own receives).
                if req.complete || self.ft.is_dead(peer) {
                    self.dropped += 1;
                    return;
                }
                let ptr = req.send.owned.as_ref().map_or(s.buf, |v| v.as_ptr());
                let len = s.dtype.packed_size(s.count);
                let hold = !req.send.unheld;
                self.queue(peer, OutOp::Stream { sreq, rreq: h.a, ptr, len, off: 0, hold });
            }
            Kind::Data => {
                self.rndv_data(Handle(h.a), h.len, payload, None, h.b);
            }
            Kind::Fin => {
                // As for Cts: a send already failed with its receiver stays failed.
                let sreq = Handle(h.b);
                if self.ft.is_dead(peer) || self.reqs.get(sreq).is_none_or(|r| r.complete) {
                    self.dropped += 1;
                    return;
                }
                self.complete_send(sreq);
            }
            Kind::SyncAck => {
                if let Some(sreq) = self.sync_pending.remove(&(peer, h.a)) {
                    self.complete_send(sreq);
                } else if h.a >= self.door.next_seq(peer) {
                    self.sync_early.insert((peer, h.a));
                } else {
                    // The answer again, from a receiver that re-executes.
                    self.dropped += 1;
                }
            }
            Kind::Ulfm => self.ulfm_packet(peer, h.ctx, h.src, payload),
            // Consumed by the coordinated-checkpoint hook; without one it means nothing.
            Kind::Recovery => self.dropped += 1,
            Kind::CancelReq => {
                // A message is named by its sender and sequence number.
                let (src, from) = (h.src, self.door.ident(peer, h.b));
                let withdrawn = self.matcher.remove_unexpected(h.ctx, |u| u.src == src && u.msg.from() == from);
                let hdr = self.door.control(Kind::CancelAck, h.ctx, 0, 0, 0, withdrawn as u64, h.len);
                if peer == self.rank {
                    self.loopback.push_back((hdr, Vec::new()));
                } else {
                    self.queue(peer, OutOp::Packet { hdr, payload: Vec::new() });
                }
            }
            Kind::CancelAck => {
                let sreq = Handle(h.b);
                let Some(r) = self.reqs.get_mut(sreq) else {
                    self.dropped += 1;
                    return;
                };
                if !r.send.cancelling {
                    self.dropped += 1;
                    return;
                }
                r.send.cancelling = false;
                let sent = r.send.sent;
                let rts = sent.is_some_and(|s| s.rendezvous && !s.buffered);
                let tag = match &r.op {
                    Op::Send(s) => s.tag,
                    _ => 0,
                };
                if h.a == 1 {
                    self.complete(sreq, Status { source: PROC_NULL, tag, error: None, bytes: 0, cancelled: true });
                    if let Some(s) = sent.filter(|s| s.buffered && s.rendezvous) {
                        // The internal send that held the buffered data ends too.
                        self.complete(Handle(s.id), Status { source: PROC_NULL, tag, error: None, bytes: 0, cancelled: true });
                    }
                } else if !rts {
                    // The eager message was already received: the send stands.
                    self.complete(sreq, Status { source: PROC_NULL, tag, error: None, bytes: 0, cancelled: false });
                }
                // A matched rendezvous completes as usual.
            }
            Kind::CollAbort => {
                if self.ft.run_through {
                    self.ft.aborted.push((h.ctx, h.tag, std::time::Instant::now()));
                    if self.ft.aborted.len() > 256 {
                        self.ft.aborted.remove(0);
                    }
                    self.events += 1;
                } else {
                    self.dropped += 1;
                }
            }
        }
    }

    /// Hand a matched message to receive `h`.
    fn deliver(&mut self, h: Handle, src: i32, tag: i32, body: Body) {
        match body {
            Body::Eager { data, .. } => {
                let len = data.len() as u64;
                self.deliver_bytes(h, src, tag, &data, len);
                self.spares.put(data);
            }
            Body::Rts { from, len, addr, sreq, flags, crc } => self.start_rndv(h, src, tag, from, len, addr, sreq, flags, crc),
        }
    }

    fn recv_target(&self, h: Handle) -> Option<(*mut u8, usize, TypeRef)> {
        match &self.reqs.get(h)?.op {
            Op::Recv(s) => Some((s.buf, s.count, s.dtype.clone())),
            _ => None,
        }
    }

    fn deliver_bytes(&mut self, h: Handle, src: i32, tag: i32, data: &[u8], total: u64) {
        // The receive's type is borrowed, not cloned: no reference count changes per message.
        let Some(Op::Recv(s)) = self.reqs.get(h).map(|r| &r.op) else { return };
        // SAFETY: the receive request's buffer holds `count` elements of `dtype`.
        let (n, _) = unsafe { copy_into(data, s.buf, s.count, &s.dtype) };
        let error = (total > s.dtype.packed_size(s.count) as u64).then_some(ErrorClass::Truncate);
        self.complete(h, Status { source: src, tag, error, bytes: n as u64, cancelled: false });
    }

    #[allow(clippy::too_many_arguments)]
    fn start_rndv(&mut self, h: Handle, src: i32, tag: i32, from: Ident, len: u64, addr: u64, sreq: u64, flags: u8, crc: Option<u32>) {
        let peer = from.world;
        let Some((buf, count, dtype)) = self.recv_target(h) else { return };
        let cap = dtype.packed_size(count);
        let n = (len as usize).min(cap);
        let error = (len > cap as u64).then_some(ErrorClass::Truncate);
        let fin = self.door.control(Kind::Fin, 0, 0, 0, 0, 0, sreq);
        if self.ft.is_dead(peer) {
            self.complete(h, failed_status(src, tag));
            return;
        }
        if peer == self.rank {
            // Our own memory: one copy, straight from the sender's bytes into a contiguous
            // receive buffer apart from them (MPI_Sendrecv to self of 256 KiB took 15-19 µs
            // through a fresh staging vector, Open MPI 5-6). Overlapping buffers (erroneous,
            // but not to be made worse) and other receive types go through a copy.
            let (a, b) = (addr as usize, buf as usize);
            let apart = a.checked_add(n).is_some_and(|e| e <= b) || b.checked_add(n).is_some_and(|e| e <= a);
            self.loopback.push_back((fin, Vec::new()));
            if apart && dtype.is_contiguous() {
                // SAFETY: the sender's request keeps `addr` valid for `len` ≥ `n` bytes until
                // FIN, which is only queued: the sender sees it at the next progress.
                let data = unsafe { std::slice::from_raw_parts(addr as *const u8, n) };
                self.deliver_bytes(h, src, tag, data, len);
            } else {
                let mut tmp = vec![0u8; n];
                // SAFETY: as above.
                unsafe { steadfast_paths::copy::copy(addr as *const u8, tmp.as_mut_ptr(), n) };
                self.deliver_bytes(h, src, tag, &tmp, len);
            }
            return;
        }
        // Logging modes: announced by a process that failed since. Its restarted process
        // announces the message again, and the data is asked of it then.
        let stale = self.logging && from.incarnation < self.door.incarnation_of(peer);
        // A checked single copy reads the whole message: a truncated one takes the pipeline.
        let whole = crc.is_none() || n as u64 == len;
        if !stale && (len == 0 || (flags & FLAG_CMA != 0 && self.cma_ok[peer as usize] && whole)) {
            let ok = if n == 0 {
                true
            } else if dtype.is_contiguous() {
                self.cma_read(peer, addr, buf, n, crc)
            } else {
                let mut tmp = vec![0u8; n];
                let ok = self.cma_read(peer, addr, tmp.as_mut_ptr(), n, crc);
                if ok {
                    // SAFETY: buf is valid for `count` elements of dtype.
                    unsafe { dtype.unpack(&tmp, buf, count) };
                }
                ok
            };
            if ok {
                self.queue(peer, OutOp::Packet { hdr: fin, payload: Vec::new() });
                self.complete(h, Status { source: src, tag, error, bytes: n as u64, cancelled: false });
                return;
            }
        }
        // Pipelined: ask the sender to stream the data.
        let logging = self.logging;
        if let Some(r) = self.reqs.get_mut(h) {
            r.recv.peer = MaybeRank::some(peer);
            r.recv.seq = from.seq;
            r.recv.expected = len;
            r.recv.received = 0;
            r.recv.sreq = if logging { sreq } else { 0 };
            r.status = Status { source: src, tag, error, bytes: n as u64, cancelled: false };
            if !dtype.is_contiguous() {
                r.recv.temp = vec![0u8; n];
            }
        }
        if stale {
            self.awaiting.insert((peer, from.seq), h);
            return;
        }
        let cts = self.door.control(Kind::Cts, 0, 0, 0, len, h.0, sreq);
        self.queue(peer, OutOp::Packet { hdr: cts, payload: Vec::new() });
    }

    /// Read `n` bytes of rank `peer`'s memory at `addr` into `dst` with one copy, checked
    /// against the sender's CRC32C of them when it sent one. False when the read failed
    /// (single copy is then off for that peer) or its copy kept failing the check: the
    /// pipelined copy through the ring, checked record by record, moves the data instead.
    fn cma_read(&mut self, peer: u32, addr: u64, dst: *mut u8, n: usize, crc: Option<u32>) -> bool {
        for _ in 0..CMA_READS {
            // SAFETY: the caller's `dst` holds `n` bytes; the sender's request keeps `addr`
            // valid for them until our FIN.
            if let Err(e) = unsafe { cma::read_from(self.pids[peer as usize], addr, dst, n) } {
                tracing::info!("single-copy read from rank {peer} failed ({e}); using pipelined copy");
                self.cma_ok[peer as usize] = false;
                return false;
            }
            let Some(want) = crc else { return true };
            // SAFETY: as above; the read filled them.
            let got = unsafe { std::slice::from_raw_parts_mut(dst, n) };
            if let Some(inj) = self.cma_faults.as_mut() {
                inj.bus_error(got, 0);
            }
            if steadfast_paths::checksum::crc32c_append(0, got) == want {
                return true;
            }
            self.cma_damaged += 1;
            tracing::warn!("single-copy read of {n} bytes from rank {peer} failed its CRC32C; reading again");
        }
        false
    }

    /// A piece of rendezvous data. With `check = Some((seed, expected))` the payload is not
    /// verified yet: it is checksummed in the same pass that copies it into the receive
    /// buffer, and counts (and may complete the receive) only if
    /// `crc32c_append(seed, data) == expected`; on a mismatch it returns false and the
    /// request stays incomplete (the path then has the data sent again). Bytes
    /// already copied into the application's buffer are harmless then: a receive buffer
    /// belongs to MPI until the receive completes, and this one never completes from them.
    /// Returns false only on a checksum mismatch. `fin` non-zero: the sender's path kept a
    /// reference to its buffer, so the send completes on our FIN to send request `fin - 1`
    /// once the receive has all the data.
    fn rndv_data(&mut self, h: Handle, off: u64, data: &[u8], check: Option<(u32, u32)>, fin: u64) -> bool {
        use steadfast_paths::checksum::{copy_with_crc32c_append, crc32c_append};
        let verify_only = |check: Option<(u32, u32)>| check.is_none_or(|(seed, want)| crc32c_append(seed, data) == want);
        let Some((buf, count, dtype)) = self.recv_target(h) else {
            // Report damage rather than drop it silently (a damaged handle lands here).
            if !verify_only(check) {
                return false;
            }
            self.dropped += 1;
            return true;
        };
        let Some(r) = self.reqs.get_mut(h) else { return verify_only(check) };
        if r.complete || off.checked_add(data.len() as u64).is_none_or(|end| end > r.recv.expected) {
            if !verify_only(check) {
                return false;
            }
            self.dropped += 1;
            return true;
        }
        let cap = dtype.packed_size(count) as u64;
        let mut crc = check.map(|(seed, _)| seed);
        if off < cap {
            let n = (data.len() as u64).min(cap - off) as usize;
            let dst: &mut [u8] = if !r.recv.temp.is_empty() {
                &mut r.recv.temp[off as usize..off as usize + n]
            } else {
                // SAFETY: off + n <= cap, the size of the receive buffer, which MPI owns
                // until this request completes.
                unsafe { std::slice::from_raw_parts_mut(buf.add(off as usize), n) }
            };
            match crc {
                Some(c) => crc = Some(copy_with_crc32c_append(c, dst, &data[..n])),
                None => dst.copy_from_slice(&data[..n]),
            }
            if let Some(c) = crc {
                crc = Some(crc32c_append(c, &data[n..]));
            }
        } else if let Some(c) = crc {
            crc = Some(crc32c_append(c, data));
        }
        if let (Some(got), Some((_, want))) = (crc, check) {
            if got != want {
                return false;
            }
        }
        r.recv.received += data.len() as u64;
        if r.recv.received == r.recv.expected {
            let t = std::mem::take(&mut r.recv.temp);
            if !t.is_empty() {
                // SAFETY: buf is valid for `count` elements of dtype.
                unsafe { dtype.unpack(&t, buf, count) };
            }
            let status = r.status;
            let peer = r.recv.peer.get();
            self.complete(h, status);
            if let (true, Some(p)) = (fin != 0, peer) {
                let hdr = self.door.control(Kind::Fin, 0, 0, 0, 0, 0, fin.wrapping_sub(1));
                self.queue(p, OutOp::Packet { hdr, payload: Vec::new() });
            }
        }
        true
    }
}

/// An active receive request for `spec`, already posted on context `ctx` (the common case
/// of MPI_Irecv; a message that matches at once completes it, which clears `posted`).
#[inline]
pub(crate) fn posted_recv(spec: RecvSpec, ctx: u32) -> Request {
    let mut r = Request::new(Op::Recv(spec), false);
    r.active = true;
    r.recv.ctx = ctx;
    r.recv.posted = true;
    r
}

/// The error of a handle that names no request (kept out of line: the lookups that may
/// return it are on every completion's path).
#[cold]
#[inline(never)]
fn invalid_request() -> MpiError {
    MpiError::new(ErrorClass::Request, "invalid request handle")
}
