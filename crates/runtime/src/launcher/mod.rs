//! `steadfast run`: spawn the ranks of a single-host job, serve their control
//! connections, forward their output, and tear the job down cleanly.
//!
//! One thread runs one `poll(2)` loop over: a self-pipe woken by signals (SIGCHLD,
//! SIGINT, SIGTERM, SIGHUP), the control listener and connections, every rank's stdout
//! and stderr pipe, and the stdin forwarding to rank 0. The control protocol logic lives
//! in the sans-IO [`crate::server::ControlCore`]; this module only moves bytes and
//! manages processes.
//!
//! Multi-host (`--hosts`): ranks are placed on hosts in blocks ([`place_on_hosts`]); a
//! rank whose host is not this one is started through the remote-start agent
//! (`--agent`, `ssh {host}` by default; `ip netns exec {host}` for network namespaces)
//! as `AGENT sh -c READ-KEY sh env -C DIR VAR=VALUE… PROGRAM ARGS`, the program at the
//! same absolute path there; the job key goes through the agent's standard input, never
//! on a command line. The control server then listens on an address the other hosts reach
//! (`--control-addr`, else the local address that routes to the first remote host), and
//! every rank learns the host of every other rank (`STEADFAST_HOSTMAP`).

mod coordinated;
mod jobdir;
mod logging;
pub use logging::ImagePolicy;
pub mod output;
mod refusals;
pub mod program;
pub mod slurm;
mod sys;

use crate::env::{FtMode, JobEnv, PathKind};
use crate::event::{signal_name, ExitStatus};
use crate::server::{ConnId, ControlCore, ControlEvent};
use crate::wire::FrameBuf;
pub use coordinated::{read_manifest, CkptServer, Restart, COMMITTED_FILE, JOB_FILE};
use jobdir::JobDir;
use refusals::Refusals;
use output::{LineBuffer, Sink, StreamKind};
use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::os::unix::fs::DirBuilderExt;
use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Exit status when `--timeout` expires (as timeout(1)).
pub const EXIT_TIMEOUT: i32 = 124;
/// Exit status for launcher setup errors (bad working directory, no job directory, ...).
pub const EXIT_SETUP: i32 = 1;
/// An unauthenticated control connection is dropped after this long (a rank writes its
/// hello right after connecting; whatever arrived is read before the drop).
const HELLO_TIMEOUT: Duration = Duration::from_secs(3);
/// At most this many control connections wait for their hello at once, apart from the
/// ranks' (a full budget closes the oldest silent one), so strangers holding idle
/// connections cannot keep ranks out.
const UNAUTH_BUDGET: usize = 32;
/// After SIGKILL, give up waiting for unkillable processes after this long.
const KILL_WAIT: Duration = Duration::from_secs(5);
/// After the last rank exited, wait this long for its pipes to reach end-of-file
/// (a descendant that escaped the process group may keep them open).
const DRAIN_WAIT: Duration = Duration::from_secs(1);
/// While tearing down, re-check process groups this often.
const TEARDOWN_TICK: Duration = Duration::from_millis(50);
/// Bytes buffered from our stdin for rank 0 before we stop reading.
const STDIN_BUFFER: usize = 64 * 1024;
/// A rank that does not read its control connection is dropped past this backlog.
const MAX_CONN_BACKLOG: usize = 64 << 20;

/// What to do with the job when a rank fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnFailure {
    /// Tear the whole job down.
    Abort,
    /// Keep the survivors running.
    Continue,
    /// Keep the survivors running and start the failed rank again, as its next
    /// incarnation (at most [`LaunchConfig::max_restarts`] times per rank).
    Relaunch,
    /// Roll every rank back to the last committed coordinated checkpoint (at most
    /// [`LaunchConfig::max_restarts`] rollbacks per job).
    Rollback,
}

/// Everything `steadfast run` needs to start a job.
#[derive(Debug, Clone)]
pub struct LaunchConfig {
    /// Number of ranks.
    pub np: u32,
    /// Program as given by the user (searched in PATH if it has no slash).
    pub program: OsString,
    /// Program arguments.
    pub args: Vec<OsString>,
    /// Working directory of the ranks (default: the launcher's).
    pub wdir: Option<PathBuf>,
    /// Environment additions/overrides, applied in order over the inherited environment.
    pub env: Vec<(OsString, OsString)>,
    /// Data path the ranks should use.
    pub path: PathKind,
    /// Fault-tolerance mode told to the ranks.
    pub ft: FtMode,
    /// Teardown policy; `None` follows `ft` (abort → Abort, run-through → Continue).
    pub on_failure: Option<OnFailure>,
    /// Kill the job after this long.
    pub timeout: Option<Duration>,
    /// Prefix output lines with `[1,R]<stdout>: ` / `[1,R]<stderr>: `.
    pub tag_output: bool,
    /// Time between SIGTERM and SIGKILL at teardown.
    pub kill_grace: Duration,
    /// Report rank failures on stderr even when the job continues through them. Off by
    /// default in that mode: a failure there is an event the application handles, and its
    /// output should be its own (the exit status still says a rank failed).
    pub verbose: bool,
    /// Hosts to place ranks on (`name` or `name:slots`); empty = this host only.
    pub hosts: Vec<String>,
    /// Remote-start agent, `{host}` replaced by the host name (default `ssh {host}`).
    pub agent: String,
    /// Address (IP or IP:PORT) the control server listens on.
    pub control_addr: Option<String>,
    /// Under the relaunch policy, how often one rank may be started again; under
    /// coordinated checkpointing, how often the job may roll back.
    pub max_restarts: u32,
    /// Coordinated checkpointing: time between checkpoint waves (`None`: none periodic).
    pub ckpt_interval: Option<Duration>,
    /// Message-logging modes with `ckpt_interval`: which rank is asked for an image next.
    pub ckpt_policy: logging::ImagePolicy,
    /// `--ft channel-memory`: how many channel memory servers the launcher runs (rank r's
    /// stream is kept by server r mod count).
    pub channel_memories: u32,
    /// `--ft channel-memory` with standalone servers (`steadfast channel-memory`): their
    /// addresses (server i keeps the streams of ranks r with r mod count == i) and the file
    /// of their key; empty: the launcher runs its own.
    pub channel_memory_servers: Vec<String>,
    pub channel_memory_key_file: Option<PathBuf>,
    /// Message-logging modes: a standalone event logger (`steadfast event-logger`) at this
    /// address, whose key is in `event_logger_key_file`; None: the launcher hosts it.
    pub event_logger: Option<String>,
    pub event_logger_key_file: Option<PathBuf>,
    /// Coordinated checkpointing: directory of images (default: a fresh one under `$TMPDIR`).
    pub ckpt_dir: Option<PathBuf>,
    /// `steadfast restart`: start every rank from the last committed checkpoint in `ckpt_dir`.
    pub restart: Option<Restart>,
    /// Coordinated checkpointing: where the second copy of every image goes.
    pub ckpt_server: CkptServer,
    /// Coordinated checkpointing with a server: ranks delete their local copies once a wave
    /// is committed (every restore fetches from the server, as MPICH-V/CL without local
    /// copies).
    pub ckpt_drop_local: bool,
    /// `MPI_UNIVERSE_SIZE` (`None`: the CPUs of the job's hosts, at least `np`).
    pub universe_size: Option<u32>,
}

impl LaunchConfig {
    /// A configuration with defaults for everything but the ranks and program.
    pub fn new(np: u32, program: impl Into<OsString>, args: Vec<OsString>) -> Self {
        LaunchConfig {
            np,
            program: program.into(),
            args,
            wdir: None,
            env: Vec::new(),
            path: PathKind::Shm,
            ft: FtMode::Abort,
            on_failure: None,
            timeout: None,
            tag_output: false,
            kill_grace: Duration::from_secs(2),
            verbose: false,
            hosts: Vec::new(),
            agent: DEFAULT_AGENT.to_owned(),
            control_addr: None,
            max_restarts: 3,
            ckpt_interval: None,
            ckpt_policy: logging::ImagePolicy::RoundRobin,
            channel_memories: 1,
            channel_memory_servers: Vec::new(),
            channel_memory_key_file: None,
            event_logger: None,
            event_logger_key_file: None,
            ckpt_dir: None,
            restart: None,
            ckpt_server: CkptServer::Builtin,
            ckpt_drop_local: false,
            universe_size: None,
        }
    }

    /// The effective failure policy.
    pub fn failure_policy(&self) -> OnFailure {
        self.on_failure.unwrap_or(match self.ft {
            FtMode::Abort => OnFailure::Abort,
            FtMode::RunThrough => OnFailure::Continue,
            FtMode::Relaunch | FtMode::Pessimistic | FtMode::Causal | FtMode::ChannelMemory => OnFailure::Relaunch,
            FtMode::Coordinated => OnFailure::Rollback,
        })
    }

    /// The mode told to the ranks: the relaunch policy needs ranks in relaunch mode.
    pub fn rank_mode(&self) -> FtMode {
        if self.failure_policy() == OnFailure::Relaunch && !self.ft.logs_messages() {
            FtMode::Relaunch
        } else {
            self.ft
        }
    }
}

/// Remote side of an agent start: reads the job key from the first line of standard
/// input, then runs the rest of the command line with it in the environment.
const KEY_FROM_STDIN: &str =
    "IFS= read -r STEADFAST_JOB_KEY && export STEADFAST_JOB_KEY && exec \"$@\"";

/// Default remote-start agent.
pub const DEFAULT_AGENT: &str = "ssh {host}";

/// Where a rank runs. Single-host jobs put every rank on host 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankPlacement {
    /// World rank.
    pub rank: u32,
    /// Index of the host in the host list (0 = this host).
    pub host: usize,
    /// Rank among the ranks on that host.
    pub local_rank: u32,
    /// Ranks on that host.
    pub local_size: u32,
}

/// Places `np` ranks on this host.
pub fn place_single_host(np: u32) -> Vec<RankPlacement> {
    (0..np)
        .map(|rank| RankPlacement {
            rank,
            host: 0,
            local_rank: rank,
            local_size: np,
        })
        .collect()
}

/// Places `np` ranks on `hosts` (`name` or `name:slots`) in blocks: ranks 0.. fill the
/// first host's slots, then the next host's, cycling when every slot is taken. Hosts
/// without a slot count get an even share, `ceil(np / hosts)`.
pub fn place_on_hosts(np: u32, hosts: &[String]) -> Result<Vec<RankPlacement>, String> {
    if hosts.is_empty() {
        return Ok(place_single_host(np));
    }
    let share = np.div_ceil(hosts.len() as u32).max(1);
    let mut slots = Vec::new();
    for h in hosts {
        let n = match h.rsplit_once(':') {
            Some((name, n)) if !name.is_empty() => n
                .parse::<u32>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| format!("bad slot count in host {h:?}"))?,
            _ => share,
        };
        slots.push(n);
    }
    let mut host_of = Vec::with_capacity(np as usize);
    'fill: loop {
        for (i, n) in slots.iter().enumerate() {
            for _ in 0..*n {
                if host_of.len() == np as usize {
                    break 'fill;
                }
                host_of.push(i);
            }
        }
    }
    let mut count = vec![0u32; hosts.len()];
    for &h in &host_of {
        count[h] += 1;
    }
    let mut seen = vec![0u32; hosts.len()];
    Ok(host_of
        .iter()
        .enumerate()
        .map(|(rank, &h)| {
            let local_rank = seen[h];
            seen[h] += 1;
            RankPlacement {
                rank: rank as u32,
                host: h,
                local_rank,
                local_size: count[h],
            }
        })
        .collect())
}

/// `STEADFAST_HOSTMAP` for a placement: runs of `host*count` in rank order.
pub fn hostmap(places: &[RankPlacement]) -> String {
    let mut runs: Vec<(usize, u32)> = Vec::new();
    for p in places {
        match runs.last_mut() {
            Some((h, n)) if *h == p.host => *n += 1,
            _ => runs.push((p.host, 1)),
        }
    }
    runs.iter()
        .map(|(h, n)| format!("{h}*{n}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Host name without its `:slots` suffix.
fn host_name(h: &str) -> &str {
    match h.rsplit_once(':') {
        Some((name, n)) if !name.is_empty() && n.parse::<u32>().is_ok() => name,
        _ => h,
    }
}

/// Whether `name` designates the machine the launcher runs on (started without agent).
fn is_this_host(name: &str) -> bool {
    if name == "localhost" || name == "127.0.0.1" {
        return true;
    }
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return false;
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    std::str::from_utf8(&buf[..end]).is_ok_and(|h| h == name)
}

/// Quotes `s` for a POSIX shell (ssh runs the remote command through one).
fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,@%+".contains(&b))
    {
        return s.to_owned();
    }
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// The address the control server should listen on.
fn control_bind(cfg: &LaunchConfig) -> Result<SocketAddr, String> {
    if let Some(a) = &cfg.control_addr {
        if let Ok(sa) = a.parse::<SocketAddr>() {
            return Ok(sa);
        }
        return a
            .parse::<std::net::IpAddr>()
            .map(|ip| SocketAddr::new(ip, 0))
            .map_err(|_| format!("--control-addr {a:?} is not an IP address"));
    }
    let remote: Vec<&str> = cfg
        .hosts
        .iter()
        .map(|h| host_name(h))
        .filter(|h| !is_this_host(h))
        .collect();
    let Some(first) = remote.first() else {
        return Ok(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)));
    };
    use std::net::ToSocketAddrs;
    let target = (*first, 9)
        .to_socket_addrs()
        .ok()
        .and_then(|mut it| it.next())
        .ok_or_else(|| {
            format!("cannot resolve host {first:?} to find the address it reaches us on; give --control-addr")
        })?;
    let probe = std::net::UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))
        .and_then(|s| s.connect(target).map(|()| s))
        .and_then(|s| s.local_addr())
        .map_err(|e| format!("no route to host {first:?} ({e}); give --control-addr"))?;
    Ok(SocketAddr::new(probe.ip(), 0))
}

/// Runs the job to completion and returns the launcher's exit status.
///
/// Reaps *every* child of the calling process (it becomes a child subreaper), so call it
/// from a process that has no other children of its own, such as the `steadfast` binary.
/// Whether a rank's exit is a failure, and then how to say it and the job's exit code: a
/// rank that exits with 0 without `MPI_Finalize` (after it connected) failed too.
/// `MPI_UNIVERSE_SIZE`: as given, else the CPUs of the job's hosts (this host's count for
/// each), at least the number of ranks.
fn universe_size(cfg: &LaunchConfig) -> u32 {
    cfg.universe_size.unwrap_or_else(|| {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
        let hosts = cfg.hosts.len().max(1) as u32;
        cpus.saturating_mul(hosts).max(cfg.np)
    })
}

fn failure_of(status: ExitStatus, ever_connected: bool, finalized: bool) -> Option<(String, i32)> {
    let missing_finalize = status.success() && ever_connected && !finalized;
    if status.success() && !missing_finalize {
        return None;
    }
    Some(if missing_finalize {
        ("exited with status 0 without calling MPI_Finalize".to_owned(), 1)
    } else {
        (status.to_string(), status.shell_code())
    })
}

pub fn run(cfg: LaunchConfig) -> i32 {
    let mut errors = Sink::new(StreamKind::Stderr);
    match Launcher::setup(cfg) {
        Ok(mut l) => {
            let code = exit_byte(l.run());
            tracing::debug!(code, "job finished");
            code
        }
        Err((code, msg)) => {
            errors.message(&format!("steadfast run: {msg}"));
            code
        }
    }
}

struct Pipe {
    fd: OwnedFd,
    lines: LineBuffer,
}

struct RankProc {
    pid: i32,
    /// Starts of this rank so far beyond the first.
    restarts: u32,
    status: Option<ExitStatus>,
    ever_connected: bool,
    out: Option<Pipe>,
    err: Option<Pipe>,
}

/// What starting a rank again needs: the program, directory, and each rank's environment
/// and host as first started.
#[derive(Default)]
struct Respawn {
    exe: PathBuf,
    cwd: PathBuf,
    envs: Vec<JobEnv>,
    hosts: Vec<Option<String>>,
    map: Option<String>,
}

struct Conn {
    stream: TcpStream,
    rbuf: FrameBuf,
    wbuf: Vec<u8>,
    wpos: usize,
    /// Set until the peer authenticates.
    hello_deadline: Option<Instant>,
    closing: bool,
}

/// Rank 0's stdin, fed from ours.
struct StdinFwd {
    pipe: Option<OwnedFd>,
    buf: Vec<u8>,
    input_open: bool,
}

struct Teardown {
    kill_at: Instant,
    killed: bool,
    give_up_at: Option<Instant>,
}

/// Signals the launcher handles, each with a flag set by its handler.
struct Signals {
    wake_rx: UnixStream,
    flags: Vec<(i32, Arc<AtomicBool>)>,
    ids: Vec<signal_hook::SigId>,
}

impl Signals {
    fn install() -> std::io::Result<Signals> {
        let (wake_rx, wake_tx) = UnixStream::pair()?;
        wake_rx.set_nonblocking(true)?;
        wake_tx.set_nonblocking(true)?;
        let mut flags = Vec::new();
        let mut ids = Vec::new();
        for sig in [libc::SIGCHLD, libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGUSR1] {
            let flag = Arc::new(AtomicBool::new(false));
            ids.push(signal_hook::flag::register(sig, Arc::clone(&flag))?);
            ids.push(signal_hook::low_level::pipe::register(
                sig,
                wake_tx.try_clone()?,
            )?);
            flags.push((sig, flag));
        }
        Ok(Signals {
            wake_rx,
            flags,
            ids,
        })
    }

    fn take(&self, sig: i32) -> bool {
        self.flags
            .iter()
            .any(|(s, f)| *s == sig && f.swap(false, Ordering::SeqCst))
    }

    fn drain_wake(&mut self) {
        let mut b = [0u8; 64];
        while matches!(self.wake_rx.read(&mut b), Ok(n) if n > 0) {}
    }
}

impl Drop for Signals {
    fn drop(&mut self) {
        for id in self.ids.drain(..) {
            signal_hook::low_level::unregister(id);
        }
    }
}

#[derive(Clone, Copy)]
enum Token {
    Wake,
    Listener,
    Conn(ConnId),
    Out(usize, StreamKind),
    StdinIn,
    StdinOut,
    EventLogger,
}

struct Launcher {
    cfg: LaunchConfig,
    policy: OnFailure,
    signals: Signals,
    listener: TcpListener,
    core: ControlCore,
    conns: HashMap<ConnId, Conn>,
    next_conn: ConnId,
    refusals: Refusals,
    ranks: Vec<RankProc>,
    pid_to_rank: HashMap<i32, usize>,
    stdin: StdinFwd,
    stdout_sink: Sink,
    stderr_sink: Sink,
    start: Instant,
    deadline: Option<Instant>,
    timed_out: bool,
    teardown: Option<Teardown>,
    drain_deadline: Option<Instant>,
    exit_code: Option<i32>,
    /// What starting a rank again needs (relaunch policy).
    respawn: Respawn,
    /// Variables for the process being spawned beyond its `JobEnv` (`MPI_APPNUM`).
    spawn_extra: Vec<(OsString, OsString)>,
    /// Coordinated checkpointing: the checkpoint scheduler and the output bookkeeping.
    coord: Option<coordinated::Coord>,
    /// Message logging: the event logger and the output bookkeeping.
    mlog: Option<logging::Logging>,
    // Dropped last: removes the directory after every rank is gone.
    _jobdir: JobDir,
}

impl Launcher {
    fn setup(cfg: LaunchConfig) -> Result<Launcher, (i32, String)> {
        let start = Instant::now();
        if cfg.np == 0 {
            return Err((EXIT_SETUP, "the number of ranks must be at least 1".into()));
        }
        let cwd = match &cfg.wdir {
            Some(w) => {
                if !w.is_dir() {
                    return Err((
                        EXIT_SETUP,
                        format!("working directory {} does not exist", w.display()),
                    ));
                }
                std::path::absolute(w).unwrap_or_else(|_| w.clone())
            }
            None => std::env::current_dir().map_err(|e| {
                (
                    EXIT_SETUP,
                    format!("cannot read the current directory: {e}"),
                )
            })?,
        };
        let path_var = cfg
            .env
            .iter()
            .rev()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.clone())
            .or_else(|| std::env::var_os("PATH"));
        let exe = program::resolve(&cfg.program, &cwd, path_var.as_deref())
            .map_err(|e| (e.exit_code(), e.to_string()))?;

        let rand = |what: &str| {
            sys::random_u64().map_err(|e| (EXIT_SETUP, format!("cannot get random {what}: {e}")))
        };
        let jobid = format!("{:016x}", rand("job id")?);
        let job_key = rand("job key")?;
        let jobdir = JobDir::create(&jobid)
            .map_err(|e| (EXIT_SETUP, format!("cannot create the job directory: {e}")))?;
        let places = place_on_hosts(cfg.np, &cfg.hosts).map_err(|e| (EXIT_SETUP, e))?;
        let bind = control_bind(&cfg).map_err(|e| (EXIT_SETUP, e))?;
        let listener = TcpListener::bind(bind)
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            // Silent connections wait in the kernel, not in the launcher's budget.
            .inspect(|l| steadfast_paths::tcp::defer_accept(l, 2))
            .map_err(|e| {
                (
                    EXIT_SETUP,
                    format!("cannot open the control port on {bind}: {e}"),
                )
            })?;
        let control: SocketAddr = listener
            .local_addr()
            .map_err(|e| (EXIT_SETUP, format!("control port: {e}")))?;
        let signals = Signals::install()
            .map_err(|e| (EXIT_SETUP, format!("cannot install signal handlers: {e}")))?;
        sys::become_subreaper();

        let mut l = Launcher {
            policy: cfg.failure_policy(),
            core: ControlCore::new(cfg.np, job_key),
            deadline: cfg.timeout.map(|t| start + t),
            cfg,
            signals,
            listener,
            conns: HashMap::new(),
            next_conn: 1,
            refusals: Refusals::default(),
            ranks: Vec::new(),
            pid_to_rank: HashMap::new(),
            stdin: StdinFwd {
                pipe: None,
                buf: Vec::new(),
                input_open: false,
            },
            stdout_sink: Sink::new(StreamKind::Stdout),
            stderr_sink: Sink::new(StreamKind::Stderr),
            start,
            timed_out: false,
            teardown: None,
            drain_deadline: None,
            exit_code: None,
            respawn: Respawn::default(),
            spawn_extra: Vec::new(),
            coord: None,
            mlog: None,
            _jobdir: jobdir,
        };
        let mut incarnation = 0;
        if l.cfg.ft == FtMode::Coordinated {
            let cc = coordinated::CoordConfig {
                interval: l.cfg.ckpt_interval,
                dir: l.cfg.ckpt_dir.clone(),
                server: l.cfg.ckpt_server.clone(),
                bind_ip: control.ip(),
                job_key,
            };
            let c = coordinated::Coord::new(&l.cfg, &cc, &jobid, &exe, &cwd)
                .map_err(|e| (EXIT_SETUP, format!("checkpoint directory: {e}")))?;
            if l.cfg.restart.is_none() {
                l.stderr_sink.message(&format!("steadfast run: checkpoints of this job go to {}", c.dir.display()));
            }
            l.coord = Some(c);
            incarnation = l.coord_start();
        }
        if l.cfg.ft.logs_messages() {
            let images = l.cfg.ckpt_interval.map(|i| (i, l.cfg.ckpt_policy));
            let mut m = logging::Logging::new(l.cfg.np, l.cfg.ckpt_dir.clone(), &jobid, images)
                .map_err(|e| (EXIT_SETUP, format!("event log directory: {e}")))?;
            if l.cfg.ft == FtMode::ChannelMemory {
                if l.cfg.channel_memory_servers.is_empty() {
                    m.start_channel_memories(l.cfg.np, l.cfg.channel_memories, control.ip(), job_key)
                        .map_err(|e| (EXIT_SETUP, format!("channel memory servers: {e}")))?;
                } else {
                    let key_file = l.cfg.channel_memory_key_file.clone().ok_or((EXIT_SETUP, "--channel-memory-servers needs --channel-memory-key-file".to_owned()))?;
                    // Refuse at once a key file the ranks would refuse.
                    crate::ckpt_store::read_key_file(&key_file).map_err(|e| (EXIT_SETUP, format!("channel memory key: {e}")))?;
                    let key_file = std::path::absolute(&key_file).map_err(|e| (EXIT_SETUP, format!("channel memory key: {e}")))?;
                    m.use_channel_memories(l.cfg.channel_memory_servers.join(","), key_file);
                }
            }
            if let Some(addr) = &l.cfg.event_logger {
                let key_file = l.cfg.event_logger_key_file.clone().ok_or((EXIT_SETUP, "--event-logger needs --event-logger-key-file".to_owned()))?;
                m.use_event_logger(addr, &key_file, l.cfg.np, &jobid).map_err(|e| (EXIT_SETUP, format!("event logger at {addr}: {e}")))?;
            }
            tracing::debug!(dir = %m.dir.display(), "event log");
            l.mlog = Some(m);
        }
        let template = JobEnv {
            rank: 0,
            size: l.cfg.np,
            local_rank: 0,
            local_size: l.cfg.np,
            jobid,
            job_key,
            jobdir: l._jobdir.path().to_path_buf(),
            control,
            path: l.cfg.path,
            ft: l.cfg.rank_mode(),
            incarnation,
            proc_base: 0,
            parent: None,
            universe_size: Some(universe_size(&l.cfg)),
        };
        l.respawn = Respawn { exe: exe.clone(), cwd: cwd.clone(), envs: Vec::new(), hosts: Vec::new(), map: None };
        tracing::debug!(np = l.cfg.np, exe = %exe.display(), %control, jobdir = %template.jobdir.display(), "starting job");
        let map = (!l.cfg.hosts.is_empty()).then(|| hostmap(&places));
        for place in places {
            let env = JobEnv {
                rank: place.rank,
                local_rank: place.local_rank,
                local_size: place.local_size,
                ..template.clone()
            };
            // Accept early connections as we go so a large job never overflows the
            // listen backlog while it is still spawning.
            if place.rank % 16 == 15 {
                l.accept_all();
            }
            let host = l.cfg.hosts.get(place.host).map(|h| host_name(h).to_owned());
            l.respawn.envs.push(env.clone());
            l.respawn.hosts.push(host.clone());
            l.respawn.map.clone_from(&map);
            if let Err(e) = l.spawn_rank(&exe, &env, host.as_deref(), map.as_deref(), &cwd, None) {
                let code = if e.kind() == ErrorKind::NotFound {
                    127
                } else {
                    126
                };
                l.stderr_sink.message(&format!(
                    "steadfast run: cannot start rank {}: {}: {e}",
                    place.rank,
                    l.cfg.program.to_string_lossy()
                ));
                l.exit_code.get_or_insert(code);
                // Ranks never started count as exited so the job can finish.
                let now = Instant::now();
                for r in place.rank..l.cfg.np {
                    l.ranks.push(RankProc {
                        restarts: 0,
                        pid: 0,
                        status: Some(ExitStatus::Exited(code)),
                        ever_connected: false,
                        out: None,
                        err: None,
                    });
                    l.core.rank_exited(r, ExitStatus::Exited(code));
                }
                l.begin_teardown(libc::SIGTERM, now);
                break;
            }
        }
        tracing::debug!(elapsed = ?l.start.elapsed(), "all ranks spawned");
        l.coord_write_pids();
        Ok(l)
    }

    /// The command that starts a rank on `host` through the agent:
    /// `AGENT sh -c READ-KEY sh env -C DIR VAR=VALUE… PROGRAM ARGS` (key on stdin).
    fn agent_command(
        &self,
        host: &str,
        exe: &Path,
        args: &[OsString],
        vars: &[(OsString, OsString)],
        cwd: &Path,
    ) -> std::io::Result<Command> {
        let words: Vec<String> = self
            .cfg
            .agent
            .split_whitespace()
            .map(|w| w.replace("{host}", host))
            .collect();
        let Some((prog, pre)) = words.split_first() else {
            return Err(std::io::Error::new(
                ErrorKind::InvalidInput,
                "the remote-start agent is empty",
            ));
        };
        // ssh hands the command to a remote shell: quote every word.
        let quote = Path::new(prog).file_name().is_some_and(|f| f == "ssh");
        let q = |s: &str| if quote { shell_quote(s) } else { s.to_owned() };
        // The job key never goes on a command line (any local user reads those from
        // /proc): the launcher writes it as the first line of the agent's standard input,
        // and a shell on the far side reads exactly that line (`read` takes a pipe byte by
        // byte) into the environment before the rank starts with the rest of the stream.
        let mut rest: Vec<String> = vec![
            "sh".into(),
            "-c".into(),
            q(KEY_FROM_STDIN),
            "sh".into(),
            "env".into(),
            "-C".into(),
            q(&cwd.to_string_lossy()),
        ];
        for (k, v) in vars.iter().filter(|(k, _)| k != crate::env::JOB_KEY) {
            rest.push(q(&format!(
                "{}={}",
                k.to_string_lossy(),
                v.to_string_lossy()
            )));
        }
        rest.push(q(&exe.to_string_lossy()));
        for a in args {
            rest.push(q(&a.to_string_lossy()));
        }
        let mut cmd = Command::new(prog);
        cmd.args(pre).args(rest);
        Ok(cmd)
    }

    /// Starts one rank, in its own process group: directly on this host, or through the
    /// remote-start agent on `host`.
    fn spawn_rank(
        &mut self,
        exe: &Path,
        env: &JobEnv,
        host: Option<&str>,
        hostmap: Option<&str>,
        cwd: &Path,
        replace: Option<usize>,
    ) -> std::io::Result<()> {
        let argv = (self.cfg.program.clone(), self.cfg.args.clone());
        self.spawn_process(exe, &argv, env, host, hostmap, cwd, replace)
    }

    /// Starts one process of the job running `argv` (program as given, arguments).
    #[allow(clippy::too_many_arguments)]
    fn spawn_process(
        &mut self,
        exe: &Path,
        argv: &(OsString, Vec<OsString>),
        env: &JobEnv,
        host: Option<&str>,
        hostmap: Option<&str>,
        cwd: &Path,
        replace: Option<usize>,
    ) -> std::io::Result<()> {
        let mut vars: Vec<(OsString, OsString)> = Vec::new();
        if let Some(h) = host {
            // A remote shell does not inherit our environment: forward the job's own
            // variables and the user's overrides.
            for (k, v) in std::env::vars_os() {
                if k.to_string_lossy().starts_with("STEADFAST_") && k != crate::env::JOB_KEY {
                    vars.push((k, v));
                }
            }
            vars.extend(self.cfg.env.iter().cloned());
            vars.push((crate::env::HOST.into(), h.into()));
        }
        vars.extend(env.to_vars().into_iter().map(|(k, v)| (k.into(), v.into())));
        vars.extend(self.spawn_extra.iter().cloned());
        if let Some(m) = hostmap {
            vars.push((crate::env::HOSTMAP.into(), m.into()));
        }
        if let Some(c) = &self.coord {
            vars.extend(c.rank_env(env.rank));
        }
        if let Some(l) = &self.mlog {
            vars.extend(l.rank_env(env.rank));
        }
        let remote = host.is_some_and(|h| !is_this_host(h));
        let mut cmd = match host {
            Some(h) if remote => self.agent_command(h, exe, &argv.1, &vars, cwd)?,
            _ => {
                let mut c = Command::new(exe);
                c.arg0(&argv.0).args(&argv.1);
                c
            }
        };
        cmd.envs(self.cfg.env.iter().map(|(k, v)| (k, v)))
            .envs(vars.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        cmd.current_dir(cwd);
        let launcher_pid = std::process::id() as i32;
        // SAFETY: the closure runs between fork and exec and only makes
        // async-signal-safe system calls (prctl, getppid).
        unsafe {
            cmd.pre_exec(move || {
                // A rank must not outlive a launcher that was SIGKILLed (no teardown).
                #[cfg(target_os = "linux")]
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // The launcher may have died before the prctl took effect.
                if libc::getppid() != launcher_pid {
                    return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
                }
                Ok(())
            });
        }
        if self.coord.is_some() || self.mlog.as_ref().is_some_and(|l| l.images_on()) {
            // SAFETY: personality only changes how the exec'd program's address space is
            // laid out: the same layout every run, which process images need.
            unsafe {
                cmd.pre_exec(|| {
                    let cur = libc::personality(0xffff_ffff);
                    if cur != -1 {
                        libc::personality((cur as libc::c_ulong) | libc::ADDR_NO_RANDOMIZE as libc::c_ulong);
                    }
                    Ok(())
                });
            }
        }
        let give_stdin = env.proc_index() == 0 && stdin_usable();
        cmd.stdin(if give_stdin || remote {
            Stdio::piped()
        } else {
            Stdio::null()
        });
        let mut child = cmd.spawn()?;
        if remote {
            if let Some(sin) = child.stdin.as_mut() {
                // A fresh pipe holds far more than one line: this write never blocks.
                // An agent that ended at once (its host cannot be reached) closed the pipe:
                // its exit status tells the rest.
                match sin.write_all(format!("{:016x}\n", env.job_key).as_bytes()) {
                    Err(e) if e.kind() != ErrorKind::BrokenPipe => return Err(e),
                    _ => {}
                }
            }
            if !give_stdin {
                // Only the key for ranks other than 0: end of file after it.
                drop(child.stdin.take());
            }
        }
        let pid = child.id() as i32;
        let tag = self.cfg.tag_output;
        let pipe = |fd: Option<OwnedFd>, kind| -> std::io::Result<Option<Pipe>> {
            let Some(fd) = fd else { return Ok(None) };
            sys::set_nonblocking(fd.as_raw_fd(), true)?;
            Ok(Some(Pipe {
                fd,
                lines: LineBuffer::new(env.rank, kind, tag),
            }))
        };
        let mut out = pipe(child.stdout.take().map(OwnedFd::from), StreamKind::Stdout)?;
        let mut err = pipe(child.stderr.take().map(OwnedFd::from), StreamKind::Stderr)?;
        // A rank started again after a rollback, or re-executing, continues the line its
        // earlier process left.
        if let (Some(p), Some(l)) = (out.as_mut(), self.carried(env.rank as usize, StreamKind::Stdout).and_then(Option::take)) {
            p.lines = l;
        }
        if let (Some(p), Some(l)) = (err.as_mut(), self.carried(env.rank as usize, StreamKind::Stderr).and_then(Option::take)) {
            p.lines = l;
        }
        if let Some(sin) = child.stdin.take() {
            let fd = OwnedFd::from(sin);
            sys::set_nonblocking(fd.as_raw_fd(), true)?;
            self.stdin.pipe = Some(fd);
            self.stdin.input_open = true;
        }
        // The child is reaped by `reap`, not through `Child`; dropping it does not wait.
        drop(child);
        tracing::debug!(rank = env.rank, pid, incarnation = env.incarnation, "rank spawned");
        let proc_ = RankProc { pid, restarts: u32::from(env.incarnation), status: None, ever_connected: false, out, err };
        match replace {
            Some(idx) => {
                self.pid_to_rank.insert(pid, idx);
                // The earlier process's output pipes are at end of file: forward what
                // they still hold before they go.
                self.pipe_readable(idx, StreamKind::Stdout);
                self.pipe_readable(idx, StreamKind::Stderr);
                self.ranks[idx] = proc_;
            }
            None => {
                self.pid_to_rank.insert(pid, self.ranks.len());
                self.ranks.push(proc_);
            }
        }
        Ok(())
    }

    fn run(&mut self) -> i32 {
        loop {
            let now = Instant::now();
            self.handle_signals(now);
            self.check_timers(now);
            self.pump_core();
            if self.is_done(now) {
                break;
            }
            self.poll_once(now);
        }
        if self.core.rejected() > 0 {
            self.stderr_sink.message(&format!(
                "steadfast run: refused {} control connection(s): {}",
                self.core.rejected(),
                self.refusals.summary()
            ));
        }
        let code = self.exit_code.unwrap_or(0);
        self.coord_finish(code == 0);
        self.mlog_finish(code == 0);
        code
    }

    fn handle_signals(&mut self, now: Instant) {
        // Reap on every pass: cheap, and immune to coalesced SIGCHLDs.
        self.signals.take(libc::SIGCHLD);
        while let Some((pid, status)) = sys::reap_one() {
            match self.pid_to_rank.get(&pid).copied() {
                Some(idx) => self.on_rank_exit(idx, status, now),
                None => tracing::debug!(pid, %status, "reaped a descendant"),
            }
        }
        if self.signals.take(libc::SIGUSR1) {
            // `steadfast checkpoint DIR`: a checkpoint now (coordinated mode).
            self.coord_checkpoint_now();
        }
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            if self.signals.take(sig) {
                self.on_signal(sig, now);
            }
        }
    }

    fn on_signal(&mut self, sig: i32, now: Instant) {
        if self.teardown.is_some() && self.exit_code.is_some() {
            // A second interrupt means "now": skip the grace period.
            self.stderr_sink.message(&format!(
                "steadfast run: received {} again; killing all ranks",
                signal_name(sig)
            ));
            self.kill_all(now);
            return;
        }
        self.stderr_sink.message(&format!(
            "steadfast run: received {}; forwarding it to all ranks",
            signal_name(sig)
        ));
        self.exit_code.get_or_insert(128 + sig);
        self.begin_teardown(sig, now);
    }

    fn on_rank_exit(&mut self, idx: usize, status: ExitStatus, now: Instant) {
        let rank = idx as u32;
        let finalized = self.core.is_finalized(rank);
        let proc_ = &mut self.ranks[idx];
        if proc_.status.is_some() {
            return;
        }
        proc_.status = Some(status);
        let pid = proc_.pid;
        if idx == 0 {
            // Nobody reads stdin any more: stop consuming ours.
            self.stdin = StdinFwd {
                pipe: None,
                buf: Vec::new(),
                input_open: false,
            };
        }
        let ever_connected = proc_.ever_connected;
        self.core.rank_exited(rank, status);
        tracing::debug!(rank, pid, %status, finalized, "rank exited");
        if self.teardown.is_some() {
            // Exits during teardown are the teardown's doing, not new failures.
            return;
        }
        if self.coord.is_some() {
            self.on_rank_exit_coordinated(idx, status, finalized, ever_connected, pid);
            return;
        }
        let Some((what, code)) = failure_of(status, ever_connected, finalized) else { return };
        if finalized && self.policy == OnFailure::Relaunch {
            // Every rank had passed MPI_Finalize's fence, so the others may have ended
            // already: a new incarnation would find no one to replay its receptions from.
            // Its MPI part is done; only what it did after MPI_Finalize is lost.
            self.stderr_sink.message(&format!(
                "steadfast run: rank {rank} (pid {pid}) {what} after MPI_Finalize; not started again (its part of the communication had finished)"
            ));
            self.exit_code.get_or_insert(code);
            return;
        }
        let restarts = self.ranks[idx].restarts;
        // Message logging re-executes a rank to the state it had: a rank that ended itself
        // (an exit status, not a signal) would only do so again; the job ends as in abort
        // mode. A killed or crashed one is started again.
        let logging = self.cfg.ft.logs_messages();
        let recoverable = !logging || matches!(status, ExitStatus::Signaled(_));
        if self.policy == OnFailure::Relaunch && recoverable && restarts < self.cfg.max_restarts {
            let incarnation = (restarts + 1).min(u32::from(u16::MAX)) as u16;
            let image = if self.mlog.is_some() { self.mlog_restarting(idx) } else { None };
            let from = image.map_or(String::new(), |n| format!(" from its process image {n}"));
            self.stderr_sink.message(&format!(
                "steadfast run: rank {rank} (pid {pid}) {what}; starting it again as incarnation {incarnation}{from}"
            ));
            if self.relaunch(idx, incarnation).is_ok() {
                self.coord_write_pids();
                return;
            }
        }
        if self.policy == OnFailure::Abort || self.policy == OnFailure::Relaunch || self.cfg.verbose {
            self.stderr_sink
                .message(&format!("steadfast run: rank {rank} (pid {pid}) {what}"));
        }
        self.exit_code.get_or_insert(code);
        if self.policy == OnFailure::Abort || logging {
            // With message logging the others would wait for it forever.
            if logging && recoverable {
                self.stderr_sink.message(&format!("steadfast run: rank {rank} cannot be started again (--max-restarts {} reached); ending the job", self.cfg.max_restarts));
            }
            self.begin_teardown(libc::SIGTERM, now);
        }
    }

    /// `MPI_Comm_spawn`: starts `cmds` as one new world of the job, children of `parents`
    /// over intercommunicator context `ctx`. Returns the world's first job-wide index,
    /// one code per process asked for (0 or an `errno` value) and why some did not start.
    /// A command whose program cannot be found starts nothing at all, so a world is never
    /// left waiting for members that do not exist.
    fn spawn_world(&mut self, ctx: u32, parents: &[u32], cmds: &[crate::wire::SpawnCmd]) -> (u32, Vec<i32>, String) {
        let total: u32 = cmds.iter().map(|c| c.maxprocs).fold(0u32, u32::saturating_add);
        let fail = |code: i32, msg: String| (0, vec![code; total as usize], msg);
        if self.teardown.is_some() {
            return fail(libc::ECANCELED, "the job is ending".into());
        }
        if self.coord.is_some() || self.policy == OnFailure::Relaunch {
            return fail(libc::ENOTSUP, format!("processes cannot be spawned under --ft {}", self.cfg.ft));
        }
        let Some(template) = self.respawn.envs.first().cloned() else {
            return fail(libc::ECANCELED, "the job has no processes".into());
        };
        if total == 0 || self.ranks.len() as u64 + u64::from(total) > u64::from(u32::MAX / 2) {
            return fail(libc::EINVAL, format!("cannot start {total} processes"));
        }
        let path_var = self.cfg.env.iter().rev().find(|(k, _)| k == "PATH").map(|(_, v)| v.clone()).or_else(|| std::env::var_os("PATH"));
        let mut plan = Vec::new();
        for c in cmds {
            let cwd = match &c.wdir {
                Some(w) => {
                    let w = self.respawn.cwd.join(w);
                    if !w.is_dir() {
                        return fail(libc::ENOENT, format!("working directory {} does not exist", w.display()));
                    }
                    w
                }
                None => self.respawn.cwd.clone(),
            };
            let search: Option<OsString> = match (&c.path, &path_var) {
                (Some(p), Some(v)) => {
                    let mut s = OsString::from(p);
                    s.push(":");
                    s.push(v);
                    Some(s)
                }
                (Some(p), None) => Some(p.into()),
                (None, v) => v.clone(),
            };
            let exe = match program::resolve(OsStr::new(&c.program), &cwd, search.as_deref()) {
                Ok(e) => e,
                Err(e) => return fail(if e.exit_code() == 127 { libc::ENOENT } else { libc::EACCES }, e.to_string()),
            };
            let host = match c.host.as_deref() {
                None => None,
                Some(h) if is_this_host(h) => None,
                Some(h) if self.cfg.hosts.iter().any(|x| host_name(x) == h) => Some(h.to_owned()),
                Some(h) => return fail(libc::EHOSTUNREACH, format!("host {h:?} is not one of the job's hosts")),
            };
            let argv = (OsString::from(&c.program), c.args.iter().map(OsString::from).collect::<Vec<_>>());
            plan.push((exe, argv, cwd, host, c.maxprocs));
        }
        let base = self.core.add_world(total);
        debug_assert_eq!(self.ranks.len() as u32, base);
        let jobdir = template.jobdir.join(format!("w{base}"));
        if let Err(e) = std::fs::DirBuilder::new().mode(0o700).create(&jobdir) {
            for r in 0..total {
                self.push_unstarted(base + r, libc::EIO);
            }
            return fail(e.raw_os_error().unwrap_or(libc::EIO), format!("cannot create {}: {e}", jobdir.display()));
        }
        let parent = format!("{ctx}:{}", parents.iter().map(u32::to_string).collect::<Vec<_>>().join(","));
        let mut codes = Vec::with_capacity(total as usize);
        let mut why = String::new();
        let mut rank = 0u32;
        for (appnum, (exe, argv, cwd, host, n)) in plan.into_iter().enumerate() {
            for _ in 0..n {
                let env = JobEnv {
                    rank,
                    size: total,
                    local_rank: rank,
                    local_size: total,
                    jobdir: jobdir.clone(),
                    incarnation: 0,
                    proc_base: base,
                    parent: Some(parent.clone()),
                    ..template.clone()
                };
                self.respawn.envs.push(env.clone());
                self.respawn.hosts.push(host.clone());
                self.spawn_extra = vec![(crate::env::APPNUM.into(), appnum.to_string().into())];
                let started = self.spawn_process(&exe, &argv, &env, host.as_deref(), None, &cwd, None);
                self.spawn_extra.clear();
                match started {
                    Ok(()) => codes.push(0),
                    Err(e) => {
                        why = format!("cannot start {}: {e}", argv.0.to_string_lossy());
                        codes.push(e.raw_os_error().unwrap_or(libc::EIO));
                        self.push_unstarted(base + rank, 127);
                    }
                }
                rank += 1;
            }
        }
        tracing::debug!(base, total, "spawned a world");
        (base, codes, why)
    }

    /// Process `idx` of a spawned world could not be started: it counts as exited.
    fn push_unstarted(&mut self, idx: u32, code: i32) {
        if self.ranks.len() as u32 == idx {
            self.ranks.push(RankProc { restarts: 0, pid: 0, status: Some(ExitStatus::Exited(code)), ever_connected: false, out: None, err: None });
        }
        self.core.rank_exited(idx, ExitStatus::Exited(code));
    }

    /// Start rank `idx` again as `incarnation` (relaunch policy).
    fn relaunch(&mut self, idx: usize, incarnation: u16) -> std::io::Result<()> {
        let Some(env) = self.respawn.envs.get(idx) else {
            return Err(std::io::Error::new(ErrorKind::NotFound, "rank was never started"));
        };
        let env = JobEnv { incarnation, ..env.clone() };
        let host = self.respawn.hosts.get(idx).cloned().flatten();
        let (exe, cwd, map) = (self.respawn.exe.clone(), self.respawn.cwd.clone(), self.respawn.map.clone());
        self.core.rank_relaunched(idx as u32, incarnation);
        let r = self.spawn_rank(&exe, &env, host.as_deref(), map.as_deref(), &cwd, Some(idx));
        if let Err(e) = &r {
            self.stderr_sink.message(&format!("steadfast run: cannot start rank {idx} again: {e}"));
            // Not started: it stays exited for fences and notices.
            self.core.rank_exited(idx as u32, ExitStatus::Exited(127));
        }
        r
    }

    fn check_timers(&mut self, now: Instant) {
        self.coord_timer();
        self.mlog_timer(now);
        if let Some(d) = self.deadline {
            if now >= d && !self.timed_out && self.ranks.iter().any(|r| r.status.is_none()) {
                self.timed_out = true;
                let secs = self.cfg.timeout.map(|t| t.as_secs_f64()).unwrap_or(0.0);
                self.stderr_sink.message(&format!(
                    "steadfast run: job timed out after {secs} s; killing all ranks"
                ));
                self.exit_code.get_or_insert(EXIT_TIMEOUT);
                self.begin_teardown(libc::SIGTERM, now);
            }
        }
        if let Some(t) = &self.teardown {
            if !t.killed && now >= t.kill_at && !self.all_gone() {
                let left = self
                    .ranks
                    .iter()
                    .filter(|r| r.status.is_none() || (r.pid > 0 && sys::group_alive(r.pid)))
                    .count();
                self.stderr_sink.message(&format!(
                    "steadfast run: processes of {left} rank(s) still running {} s after SIGTERM; sending SIGKILL",
                    self.cfg.kill_grace.as_secs_f64()
                ));
                self.kill_all(now);
            }
        }
        let expired: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| c.hello_deadline.is_some_and(|d| now >= d))
            .map(|(id, _)| *id)
            .collect();
        for id in expired {
            // Read what arrived first: a busy launcher must not drop a rank whose hello
            // is waiting in the socket.
            self.conn_readable(id);
            if self.conns.get(&id).is_some_and(|c| c.hello_deadline.is_some()) {
                tracing::debug!(conn = id, "control connection never authenticated");
                self.refusals.timed_out(id);
                self.drop_conn(id);
            }
        }
    }

    /// Sends `sig` to every rank's process group and starts the SIGKILL countdown.
    fn begin_teardown(&mut self, sig: i32, now: Instant) {
        if self.teardown.is_none() {
            self.teardown = Some(Teardown {
                kill_at: now + self.cfg.kill_grace,
                killed: false,
                give_up_at: None,
            });
        }
        self.signal_all(sig);
    }

    fn kill_all(&mut self, now: Instant) {
        self.signal_all(libc::SIGKILL);
        let t = self.teardown.get_or_insert(Teardown {
            kill_at: now,
            killed: true,
            give_up_at: None,
        });
        t.killed = true;
        t.give_up_at = Some(now + KILL_WAIT);
    }

    fn signal_all(&mut self, sig: i32) {
        for r in &self.ranks {
            // Each rank leads its own group (pgid == pid); the group outlives the
            // leader while descendants remain, and we are their reaper.
            if r.pid > 0 && sys::kill_group(r.pid, sig) {
                tracing::debug!(pid = r.pid, sig, "signalled process group");
            }
        }
    }

    fn all_gone(&self) -> bool {
        self.ranks
            .iter()
            .all(|r| r.status.is_some() && (r.pid == 0 || !sys::group_alive(r.pid)))
    }

    fn is_done(&mut self, now: Instant) -> bool {
        if self.ranks.iter().any(|r| r.status.is_none()) {
            return false;
        }
        match &self.teardown {
            None => {
                if !self.all_gone() {
                    // Ranks are done but left processes behind in their groups.
                    tracing::debug!("cleaning up leftover processes");
                    self.begin_teardown(libc::SIGTERM, now);
                    return false;
                }
            }
            Some(t) => {
                let gave_up = t.give_up_at.is_some_and(|g| now >= g);
                if !self.all_gone() && !gave_up {
                    return false;
                }
                if gave_up && !self.all_gone() {
                    self.stderr_sink.message(
                        "steadfast run: some processes could not be killed; giving up on them",
                    );
                }
            }
        }
        let pipes_open = self
            .ranks
            .iter()
            .any(|r| r.out.is_some() || r.err.is_some());
        if pipes_open {
            let d = *self.drain_deadline.get_or_insert(now + DRAIN_WAIT);
            if now < d {
                return false;
            }
        }
        self.flush_partial_lines();
        true
    }

    fn flush_partial_lines(&mut self) {
        for idx in 0..self.ranks.len() {
            for kind in [StreamKind::Stdout, StreamKind::Stderr] {
                self.close_pipe(idx, kind);
            }
        }
    }

    fn next_timeout(&self, now: Instant) -> Option<Duration> {
        let mut soonest: Option<Instant> = None;
        let mut consider = |t: Instant| {
            soonest = Some(soonest.map_or(t, |s| s.min(t)));
        };
        if let Some(d) = self.deadline {
            if !self.timed_out {
                consider(d);
            }
        }
        if let Some(t) = &self.teardown {
            consider(now + TEARDOWN_TICK);
            if !t.killed {
                consider(t.kill_at);
            }
            if let Some(g) = t.give_up_at {
                consider(g);
            }
        }
        if let Some(d) = self.drain_deadline {
            consider(d);
        }
        if let Some(t) = self.coord_next_timeout() {
            consider(t);
        }
        if let Some(t) = self.mlog_next_timeout() {
            consider(t);
        }
        for c in self.conns.values() {
            if let Some(d) = c.hello_deadline {
                consider(d);
            }
        }
        soonest.map(|t| t.saturating_duration_since(now))
    }

    fn poll_once(&mut self, now: Instant) {
        let mut fds = Vec::with_capacity(4 + self.conns.len() + 2 * self.ranks.len());
        let mut tokens = Vec::with_capacity(fds.capacity());
        let mut add = |fd: RawFd, ev: i16, t: Token| {
            fds.push(sys::pollfd(fd, ev));
            tokens.push(t);
        };
        add(self.signals.wake_rx.as_raw_fd(), sys::POLLIN, Token::Wake);
        add(self.listener.as_raw_fd(), sys::POLLIN, Token::Listener);
        for (id, c) in &self.conns {
            let ev = if c.wpos < c.wbuf.len() {
                sys::POLLIN | sys::POLLOUT
            } else {
                sys::POLLIN
            };
            add(c.stream.as_raw_fd(), ev, Token::Conn(*id));
        }
        for (idx, r) in self.ranks.iter().enumerate() {
            if let Some(p) = &r.out {
                add(
                    p.fd.as_raw_fd(),
                    sys::POLLIN,
                    Token::Out(idx, StreamKind::Stdout),
                );
            }
            if let Some(p) = &r.err {
                add(
                    p.fd.as_raw_fd(),
                    sys::POLLIN,
                    Token::Out(idx, StreamKind::Stderr),
                );
            }
        }
        if let Some(p) = &self.stdin.pipe {
            if self.stdin.input_open && self.stdin.buf.len() < STDIN_BUFFER {
                add(0, sys::POLLIN, Token::StdinIn);
            }
            if !self.stdin.buf.is_empty() {
                add(p.as_raw_fd(), sys::POLLOUT, Token::StdinOut);
            }
        }
        if let Some((fd, write)) = self.mlog_poll_fd() {
            add(fd, if write { sys::POLLIN | sys::POLLOUT } else { sys::POLLIN }, Token::EventLogger);
        }
        let timeout = self.next_timeout(now);
        match sys::poll(&mut fds, timeout) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(error = %e, "poll failed");
                std::thread::sleep(Duration::from_millis(10));
                return;
            }
        }
        for (pfd, token) in fds.iter().zip(tokens) {
            let rev = pfd.revents;
            if rev == 0 {
                continue;
            }
            match token {
                Token::Wake => self.signals.drain_wake(),
                Token::Listener => self.accept_all(),
                Token::Conn(id) => {
                    if rev & (sys::POLLIN | sys::POLLERRS) != 0 {
                        self.conn_readable(id);
                    }
                    if rev & sys::POLLOUT != 0 {
                        self.flush_conn(id);
                    }
                }
                Token::Out(idx, kind) => self.pipe_readable(idx, kind),
                Token::StdinIn => self.stdin_readable(),
                Token::StdinOut => self.stdin_writable(),
                Token::EventLogger => self.mlog_link_ready(rev & (sys::POLLIN | sys::POLLERRS) != 0, rev & sys::POLLOUT != 0),
            }
        }
    }

    fn accept_all(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((stream, peer)) => {
                    let id = self.next_conn;
                    self.next_conn += 1;
                    if self.conns.len() >= 4 * self.ranks_started() + 64 {
                        tracing::warn!(%peer, "too many control connections; refusing");
                        self.refusals.over_limit(id);
                        self.core.unauthenticated_closed(id);
                        continue;
                    }
                    self.make_unauth_room();
                    if stream.set_nonblocking(true).is_err() {
                        continue;
                    }
                    let _ = stream.set_nodelay(true);
                    tracing::debug!(conn = id, %peer, "control connection accepted");
                    self.conns.insert(
                        id,
                        Conn {
                            stream,
                            rbuf: FrameBuf::new(),
                            wbuf: Vec::new(),
                            wpos: 0,
                            hello_deadline: Some(Instant::now() + HELLO_TIMEOUT),
                            closing: false,
                        },
                    );
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    break;
                }
            }
        }
    }

    /// Ranks of the job so far, the ones `MPI_Comm_spawn` started included (at least the
    /// launch's `-n`): the control connections' limits grow with them. Counted against the
    /// launch's `-n` alone, a spawn-heavy job (mpi4py's tests on 8 ranks) had a spawned
    /// rank's connection refused, and that rank failed to join.
    fn ranks_started(&self) -> usize {
        self.ranks.len().max(self.cfg.np as usize)
    }

    /// Keeps unauthenticated connections within budget by closing the oldest one that,
    /// once read, still has not authenticated. Connections that sent a `Hello` and were
    /// challenged (a rank's proof follows one round trip later) have their own budget of
    /// the ranks started plus `UNAUTH_BUDGET`, so a whole job starting at once is never evicted while it
    /// answers, and strangers that only connect cannot crowd them out; strangers that
    /// also send a `Hello` compete with the ranks only past that budget, oldest first.
    fn make_unauth_room(&mut self) {
        for challenged in [false, true] {
            let budget = if challenged { self.ranks_started() + UNAUTH_BUDGET } else { UNAUTH_BUDGET };
            for _ in 0..budget {
                let candidates = || {
                    self.conns.iter().filter(|(id, c)| {
                        c.hello_deadline.is_some() && !c.closing && self.core.is_challenged(**id) == challenged
                    })
                };
                if candidates().count() < budget {
                    break;
                }
                let oldest = candidates().min_by_key(|(id, c)| (c.hello_deadline, **id)).map(|(id, _)| *id);
                let Some(id) = oldest else { break };
                self.conn_readable(id);
                // Evicted unless what it sent made it a rank, or (read now) a challenged
                // connection, which the next round weighs against its own budget.
                let moved = !challenged && self.core.is_challenged(id);
                if !moved && self.conns.get(&id).is_some_and(|c| c.hello_deadline.is_some()) {
                    tracing::debug!(conn = id, "unauthenticated control connection evicted");
                    self.refusals.over_limit(id);
                    self.drop_conn(id);
                }
            }
        }
    }

    fn conn_readable(&mut self, id: ConnId) {
        let mut chunk = [0u8; 16 * 1024];
        // Bounded per wake-up so one chatty rank cannot starve the others.
        for _ in 0..16 {
            let Some(c) = self.conns.get_mut(&id) else {
                return;
            };
            if c.closing {
                return;
            }
            match c.stream.read(&mut chunk) {
                Ok(0) => {
                    tracing::debug!(conn = id, "control connection closed by peer");
                    self.drop_conn(id);
                    return;
                }
                Ok(n) => {
                    c.rbuf.extend(&chunk[..n]);
                    self.process_frames(id);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    tracing::debug!(conn = id, error = %e, "control connection failed");
                    self.drop_conn(id);
                    return;
                }
            }
        }
    }

    fn process_frames(&mut self, id: ConnId) {
        loop {
            let Some(c) = self.conns.get_mut(&id) else {
                return;
            };
            if c.closing {
                return;
            }
            match c.rbuf.next_body() {
                Ok(Some(body)) => self.core.handle_frame(id, &body),
                Ok(None) => return,
                Err(e) => self.core.framing_error(id, e),
            }
            // Apply closes (and authentication) before reading the next frame.
            self.pump_core();
        }
    }

    /// Moves the control core's output to the sockets and acts on its events.
    fn pump_core(&mut self) {
        let mut touched = Vec::new();
        while let Some((id, msg)) = self.core.poll_transmit() {
            let Some(c) = self.conns.get_mut(&id) else {
                continue;
            };
            match msg.encode() {
                Ok(frame) => {
                    c.wbuf.extend_from_slice(&frame);
                    touched.push(id);
                }
                Err(e) => tracing::warn!(error = %e, "cannot encode reply"),
            }
        }
        while let Some(id) = self.core.poll_close() {
            if let Some(c) = self.conns.get_mut(&id) {
                c.closing = true;
                touched.push(id);
            }
        }
        touched.sort_unstable();
        touched.dedup();
        for id in touched {
            self.flush_conn(id);
        }
        while let Some(ev) = self.core.poll_event() {
            self.on_control_event(ev);
        }
    }

    fn on_control_event(&mut self, ev: ControlEvent) {
        let now = Instant::now();
        match ev {
            ControlEvent::Connected { rank, conn } => {
                if let Some(r) = self.ranks.get_mut(rank as usize) {
                    r.ever_connected = true;
                }
                // The connection is authenticated now: no hello deadline.
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.hello_deadline = None;
                }
                tracing::debug!(rank, "rank connected");
                self.coord_connected(rank);
            }
            ControlEvent::Abort { rank, code, msg } => {
                if self.teardown.is_some() {
                    return;
                }
                self.stderr_sink.message(&format!(
                    "steadfast run: rank {rank} called MPI_Abort with code {code}: {msg}"
                ));
                self.exit_code
                    .get_or_insert(if code == 0 { 1 } else { code });
                self.begin_teardown(libc::SIGTERM, now);
            }
            ControlEvent::Finalized { rank } => tracing::debug!(rank, "rank finalized"),
            ControlEvent::Rejected { conn, reason } => {
                tracing::warn!(conn, ?reason, "control connection refused");
                self.refusals.record(conn, &reason);
            }
            ControlEvent::ProtocolError { rank, error } => {
                tracing::warn!(rank, %error, "protocol error on control connection");
            }
            ControlEvent::Recovery { rank, bytes } if self.mlog.is_some() => self.mlog_recovery(rank, &bytes),
            ControlEvent::Recovery { rank, bytes } => self.coord_recovery(rank, &bytes),
            ControlEvent::OutputMark { rank, wave } => self.coord_output_mark(rank, wave),
            ControlEvent::Spawn { rank, ctx, parents, cmds } => {
                let (base, codes, msg) = self.spawn_world(ctx, &parents, &cmds);
                self.core.send_to(rank, crate::wire::ServerMsg::Spawned { base, codes, msg });
            }
            ControlEvent::CheckpointNow { rank } => {
                tracing::debug!(rank, "checkpoint asked for");
                self.coord_checkpoint_now();
            }
            ControlEvent::FenceDone { epoch } => {
                tracing::debug!(epoch, elapsed = ?self.start.elapsed(), "fence complete")
            }
        }
    }

    fn flush_conn(&mut self, id: ConnId) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        while c.wpos < c.wbuf.len() {
            match c.stream.write(&c.wbuf[c.wpos..]) {
                Ok(0) => break,
                Ok(n) => c.wpos += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    tracing::debug!(conn = id, error = %e, "write to control connection failed");
                    self.drop_conn(id);
                    return;
                }
            }
        }
        if c.wpos == c.wbuf.len() {
            c.wbuf.clear();
            c.wpos = 0;
        } else if c.wpos > 64 * 1024 {
            c.wbuf.drain(..c.wpos);
            c.wpos = 0;
        }
        let backlog = c.wbuf.len() - c.wpos;
        // A closing connection gets one best-effort flush (its Error frame), no more.
        if c.closing || backlog > MAX_CONN_BACKLOG {
            if backlog > MAX_CONN_BACKLOG {
                tracing::warn!(
                    conn = id,
                    backlog,
                    "rank does not read its control connection; dropping it"
                );
            }
            self.drop_conn(id);
        }
    }

    fn drop_conn(&mut self, id: ConnId) {
        let Some(c) = self.conns.remove(&id) else {
            return;
        };
        if self.core.rank_of(id).is_some() {
            self.core.conn_closed(id);
        } else if !c.closing {
            // Closed or timed out before authenticating (refusals were counted already).
            self.core.unauthenticated_closed(id);
        }
    }

    fn pipe_readable(&mut self, idx: usize, kind: StreamKind) {
        let mut chunk = vec![0u8; 64 * 1024];
        let mut out = Vec::new();
        let mut eof = false;
        {
            let r = &mut self.ranks[idx];
            let Some(p) = (match kind {
                StreamKind::Stdout => r.out.as_mut(),
                StreamKind::Stderr => r.err.as_mut(),
            }) else {
                return;
            };
            for _ in 0..4 {
                // SAFETY: reading into our own buffer from a descriptor we own.
                let n =
                    unsafe { libc::read(p.fd.as_raw_fd(), chunk.as_mut_ptr().cast(), chunk.len()) };
                if n > 0 {
                    let data = match (self.coord.as_mut(), self.mlog.as_mut()) {
                        (Some(c), _) => c.fresh(idx, kind, &chunk[..n as usize]),
                        (None, Some(l)) => l.fresh(idx, kind, &chunk[..n as usize]),
                        (None, None) => &chunk[..n as usize],
                    };
                    p.lines.push(data, &mut out);
                    continue;
                }
                if n == 0 {
                    eof = true;
                } else {
                    let err = std::io::Error::last_os_error();
                    match err.kind() {
                        ErrorKind::WouldBlock => {}
                        ErrorKind::Interrupted => continue,
                        _ => eof = true,
                    }
                }
                break;
            }
        }
        self.sink(kind).write_from(Some(idx as u32), &out);
        if eof {
            self.close_pipe(idx, kind);
        }
    }

    fn close_pipe(&mut self, idx: usize, kind: StreamKind) {
        let r = &mut self.ranks[idx];
        let pipe = match kind {
            StreamKind::Stdout => r.out.take(),
            StreamKind::Stderr => r.err.take(),
        };
        if let Some(mut p) = pipe {
            if let Some(slot) = self.carried(idx, kind) {
                // The rank's output may go on in a process restored after a rollback or
                // started again: keep its unfinished line (flushed when the job ends).
                *slot = Some(p.lines);
                return;
            }
            let mut out = Vec::new();
            p.lines.finish(&mut out);
            self.sink(kind).write_from(Some(idx as u32), &out);
        }
    }

    /// Where the unfinished last line of rank `idx`'s `kind` stream waits for the rank's
    /// next process (modes that start processes of a rank again).
    fn carried(&mut self, idx: usize, kind: StreamKind) -> Option<&mut Option<LineBuffer>> {
        let carry = match (self.coord.as_mut(), self.mlog.as_mut()) {
            (Some(c), _) => &mut c.carry,
            (None, Some(l)) => &mut l.carry,
            (None, None) => return None,
        };
        carry.get_mut(idx).map(|k| &mut k[kind as usize])
    }

    /// The job ended: forward the unfinished last lines kept for processes that never came.
    fn flush_carried(&mut self, carry: Vec<[Option<LineBuffer>; 2]>) {
        for (r, k) in carry.into_iter().enumerate() {
            for (i, l) in k.into_iter().enumerate() {
                let Some(mut l) = l else { continue };
                let mut out = Vec::new();
                l.finish(&mut out);
                let kind = if i == 0 { StreamKind::Stdout } else { StreamKind::Stderr };
                self.sink(kind).write_from(Some(r as u32), &out);
            }
        }
    }

    fn sink(&mut self, kind: StreamKind) -> &mut Sink {
        match kind {
            StreamKind::Stdout => &mut self.stdout_sink,
            StreamKind::Stderr => &mut self.stderr_sink,
        }
    }

    fn stdin_readable(&mut self) {
        let mut chunk = vec![0u8; STDIN_BUFFER];
        // One read per readiness report: stdin stays blocking (it is shared with our
        // parent), and a single read after POLLIN does not block.
        // SAFETY: reading into our own buffer.
        let n = unsafe { libc::read(0, chunk.as_mut_ptr().cast(), chunk.len()) };
        if n > 0 {
            self.stdin.buf.extend_from_slice(&chunk[..n as usize]);
            self.stdin_writable();
        } else if n == 0 || std::io::Error::last_os_error().kind() != ErrorKind::Interrupted {
            self.stdin.input_open = false;
            if self.stdin.buf.is_empty() {
                // End of input: close rank 0's stdin so it sees EOF.
                self.stdin.pipe = None;
            }
        }
    }

    fn stdin_writable(&mut self) {
        let Some(p) = &self.stdin.pipe else {
            self.stdin.buf.clear();
            return;
        };
        while !self.stdin.buf.is_empty() {
            // SAFETY: writing from our own buffer to a descriptor we own.
            let n = unsafe {
                libc::write(
                    p.as_raw_fd(),
                    self.stdin.buf.as_ptr().cast(),
                    self.stdin.buf.len(),
                )
            };
            if n >= 0 {
                self.stdin.buf.drain(..n as usize);
                continue;
            }
            match std::io::Error::last_os_error().kind() {
                ErrorKind::WouldBlock => return,
                ErrorKind::Interrupted => continue,
                _ => {
                    // Rank 0 closed its stdin (or exited): stop consuming ours.
                    self.stdin.pipe = None;
                    self.stdin.buf.clear();
                    self.stdin.input_open = false;
                    return;
                }
            }
        }
        if !self.stdin.input_open {
            self.stdin.pipe = None;
        }
    }
}

/// Maps a status to what a process can return (0..=255) without ever turning a
/// failure into success: MPI_Abort(comm, 256) must not exit 0.
fn exit_byte(code: i32) -> i32 {
    match code & 0xff {
        0 if code != 0 => 1,
        c => c,
    }
}

/// Whether we should forward our stdin: it must be open, and if it is a terminal we must
/// be in its foreground process group (reading it from the background would stop us).
fn stdin_usable() -> bool {
    // SAFETY: plain integer system calls on descriptor 0.
    unsafe {
        if libc::fcntl(0, libc::F_GETFD) < 0 {
            return false;
        }
        if libc::isatty(0) == 1 {
            return libc::tcgetpgrp(0) == libc::getpgrp();
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_get_blocks_and_a_compact_map() {
        let hosts = vec!["a".to_string(), "b".to_string()];
        let p = place_on_hosts(5, &hosts).unwrap();
        assert_eq!(
            p.iter()
                .map(|r| (r.host, r.local_rank, r.local_size))
                .collect::<Vec<_>>(),
            vec![(0, 0, 3), (0, 1, 3), (0, 2, 3), (1, 0, 2), (1, 1, 2)]
        );
        assert_eq!(hostmap(&p), "0*3,1*2");
        let slots = vec!["a:1".to_string(), "b:2".to_string()];
        let p = place_on_hosts(4, &slots).unwrap();
        assert_eq!(hostmap(&p), "0*1,1*2,0*1");
        assert!(place_on_hosts(2, &["a:0".to_string()]).is_err());
        assert_eq!(host_name("n1:4"), "n1");
        assert_eq!(host_name("n1"), "n1");
        assert_eq!(shell_quote("a b'c"), "'a b'\\''c'");
        assert_eq!(shell_quote("/x/y=1"), "/x/y=1");
    }

    #[test]
    fn exit_codes_fit_a_byte_and_never_become_success() {
        assert_eq!(exit_byte(0), 0);
        assert_eq!(exit_byte(7), 7);
        assert_eq!(exit_byte(255), 255);
        assert_eq!(exit_byte(256), 1);
        assert_eq!(exit_byte(-1), 255);
        assert_eq!(exit_byte(-256), 1);
        assert_eq!(exit_byte(300), 44);
    }

    #[test]
    fn failure_policy_follows_ft_unless_given() {
        let mut cfg = LaunchConfig::new(2, "true", vec![]);
        assert_eq!(cfg.failure_policy(), OnFailure::Abort);
        cfg.ft = FtMode::RunThrough;
        assert_eq!(cfg.failure_policy(), OnFailure::Continue);
        cfg.on_failure = Some(OnFailure::Abort);
        assert_eq!(cfg.failure_policy(), OnFailure::Abort);
    }
}
