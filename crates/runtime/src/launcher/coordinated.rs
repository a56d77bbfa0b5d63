//! The launcher as checkpoint dispatcher (`--ft coordinated`): it hosts the checkpoint
//! scheduler of `steadfast-rollback`, relays its messages over the control connections,
//! notes where each rank's output stood at every cut, and after a failure kills the
//! survivors and starts every rank again from its image of the last committed checkpoint,
//! forwarding only the output that comes after what was already forwarded.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use steadfast_rollback::scheduler::{AbortReason, Event as SchedEvent};

use super::output::OutPos;
use steadfast_rollback::wire::Body;
use steadfast_rollback::{Config as SchedConfig, Peer, Scheduler, Wave};

use super::output::{LineBuffer, StreamKind};
use crate::ckpt_store::{self, FileId, FileKind, StoreAddr, StoreClient, StoreServer};
use super::Launcher;
use crate::event::{ExitStatus, LauncherEvent};
use crate::wire::ServerMsg;

/// Name of the file in the checkpoint directory that names the last committed wave (and
/// the incarnation and output positions a restart needs).
pub const COMMITTED_FILE: &str = "COMMITTED";
/// Name of the file in the checkpoint directory that describes the job (program, arguments,
/// ranks, path), for `steadfast restart`.
pub const JOB_FILE: &str = "job";
/// The launcher's process id, for `steadfast checkpoint`.
pub const PID_FILE: &str = "launcher.pid";
/// The process id of each rank (`RANK PID` lines), rewritten after every rollback.
pub const RANKS_FILE: &str = "ranks";

/// Where `steadfast restart` starts from: the last committed wave of an earlier run.
#[derive(Debug, Clone)]
pub struct Restart {
    pub wave: Wave,
    /// The earlier run's incarnation (the restart is the next one).
    pub incarnation: u16,
    pub last_wave: Wave,
    /// Per rank: stdout and stderr bytes before the cut.
    pub marks: Vec<[u64; 2]>,
    /// The job's name on its checkpoint server.
    pub store_job: Option<String>,
}

/// Where the second copy of every image and channel record goes (MPICH-V/CL's checkpoint
/// server).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CkptServer {
    /// A server run by the launcher as a thread, keeping its copies under `DIR/server`.
    Builtin,
    /// No second copy.
    Off,
    /// A standalone `steadfast ckpt-server` at `addr`, whose key is in `key_file` (the same
    /// path on every host of the job).
    At { addr: String, key_file: PathBuf },
}

/// Exit status of a remote-start agent that could not reach its host (ssh's, and
/// `ip netns exec`'s for a namespace that is gone).
const AGENT_UNREACHABLE: i32 = 255;

/// How long the launcher waits for the checkpoint server to answer before it goes on
/// without it.
const SERVER_TIMEOUT: Duration = Duration::from_secs(3);

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
}

/// The job description `steadfast restart` needs, one `key value` per line (byte strings
/// in hex).
fn manifest(cfg: &super::LaunchConfig, exe: &std::path::Path, cwd: &std::path::Path, store_job: &str) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut m = format!("version 1\nnp {}\npath {}\n", cfg.np, cfg.path);
    m += &format!("exe {}\ncwd {}\n", hex(exe.as_os_str().as_bytes()), hex(cwd.as_os_str().as_bytes()));
    for a in &cfg.args {
        m += &format!("arg {}\n", hex(a.as_bytes()));
    }
    for (k, v) in &cfg.env {
        m += &format!("env {} {}\n", hex(k.as_bytes()), hex(v.as_bytes()));
    }
    match &cfg.ckpt_server {
        CkptServer::Builtin => m += "server builtin\n",
        CkptServer::Off => m += "server off\n",
        CkptServer::At { addr, key_file } => m += &format!("server at {} {}\n", hex(addr.as_bytes()), hex(key_file.as_os_str().as_bytes())),
    }
    if cfg.ckpt_drop_local {
        m += "local drop\n";
    }
    m += &format!("store_job {store_job}\n");
    m
}

/// Read the job and its last committed checkpoint from a checkpoint directory: the launch
/// configuration of `steadfast restart DIR`.
pub fn read_manifest(dir: &std::path::Path) -> Result<super::LaunchConfig, String> {
    use std::os::unix::ffi::OsStringExt;
    let bad = |what: &str| format!("{}: {what}", dir.display());
    let job = std::fs::read_to_string(dir.join(JOB_FILE)).map_err(|e| bad(&format!("{JOB_FILE}: {e}")))?;
    let committed = std::fs::read_to_string(dir.join(COMMITTED_FILE))
        .map_err(|e| bad(&format!("no committed checkpoint ({COMMITTED_FILE}: {e})")))?;
    let (mut np, mut path, mut exe, mut cwd) = (None, None, None, None);
    let (mut args, mut env) = (Vec::new(), Vec::new());
    let (mut server, mut store_job, mut drop_local) = (CkptServer::Builtin, None, false);
    for line in job.lines() {
        let mut w = line.split(' ');
        let bytes = |x: Option<&str>| x.and_then(unhex).map(OsString::from_vec).ok_or_else(|| bad(&format!("bad line {line:?}")));
        match w.next() {
            Some("version") => {}
            Some("np") => np = w.next().and_then(|v| v.parse::<u32>().ok()),
            Some("path") => path = w.next().and_then(|v| v.parse::<crate::env::PathKind>().ok()),
            Some("exe") => exe = Some(bytes(w.next())?),
            Some("cwd") => cwd = Some(bytes(w.next())?),
            Some("arg") => args.push(bytes(w.next())?),
            Some("env") => {
                let k = bytes(w.next())?;
                env.push((k, bytes(w.next())?));
            }
            Some("server") => {
                server = match w.next() {
                    Some("builtin") => CkptServer::Builtin,
                    Some("off") => CkptServer::Off,
                    Some("at") => {
                        let addr = bytes(w.next())?.into_string().map_err(|_| bad(&format!("bad line {line:?}")))?;
                        CkptServer::At { addr, key_file: PathBuf::from(bytes(w.next())?) }
                    }
                    _ => return Err(bad(&format!("bad line {line:?} in {JOB_FILE}"))),
                }
            }
            Some("local") => drop_local = w.next() == Some("drop"),
            Some("store_job") => store_job = w.next().filter(|j| ckpt_store::valid_job_name(j)).map(str::to_owned),
            _ => return Err(bad(&format!("unknown line {line:?} in {JOB_FILE}"))),
        }
    }
    let (Some(np), Some(path), Some(exe)) = (np, path, exe) else {
        return Err(bad(&format!("{JOB_FILE} is incomplete")));
    };
    let (mut wave, mut incarnation, mut last_wave) = (None, None, None);
    let mut marks = vec![[0u64; 2]; np as usize];
    for line in committed.lines() {
        let w: Vec<&str> = line.split(' ').collect();
        match w.as_slice() {
            ["wave", v] => wave = v.parse().ok(),
            ["incarnation", v] => incarnation = v.parse().ok(),
            ["last_wave", v] => last_wave = v.parse().ok(),
            ["mark", r, o, e] => {
                let (Ok(r), Ok(o), Ok(e)) = (r.parse::<usize>(), o.parse(), e.parse()) else {
                    return Err(bad(&format!("bad line {line:?} in {COMMITTED_FILE}")));
                };
                if let Some(m) = marks.get_mut(r) {
                    *m = [o, e];
                }
            }
            _ => return Err(bad(&format!("unknown line {line:?} in {COMMITTED_FILE}"))),
        }
    }
    let (Some(wave), Some(incarnation), Some(last_wave)) = (wave, incarnation, last_wave) else {
        return Err(bad(&format!("{COMMITTED_FILE} is incomplete")));
    };
    let mut cfg = super::LaunchConfig::new(np, exe, args);
    cfg.path = path;
    cfg.env = env;
    cfg.wdir = cwd.map(PathBuf::from);
    cfg.ft = crate::env::FtMode::Coordinated;
    cfg.ckpt_dir = Some(dir.to_path_buf());
    cfg.ckpt_server = server;
    cfg.ckpt_drop_local = drop_local;
    cfg.restart = Some(Restart { wave, incarnation, last_wave, marks, store_job });
    Ok(cfg)
}

/// Settings of coordinated checkpointing.
#[derive(Debug, Clone)]
pub struct CoordConfig {
    /// Start a wave this long after the previous one ended; `None`: never periodically.
    pub interval: Option<Duration>,
    /// Where images and channel records go; `None`: a fresh directory under `$TMPDIR`.
    pub dir: Option<PathBuf>,
    /// Where their second copy goes.
    pub server: CkptServer,
    /// The address the launcher's own server listens on (its control address).
    pub bind_ip: std::net::IpAddr,
    /// The job key (the launcher's own server's key is derived from it).
    pub job_key: u64,
}


pub(super) struct Coord {
    sched: Scheduler,
    pub(super) dir: PathBuf,
    /// Remove `dir` when the job ends well (it was not chosen by the user).
    temporary: bool,
    start: Instant,
    /// [rank][stream] output positions.
    out: Vec<[OutPos; 2]>,
    /// Output positions at each rank's cut of waves not yet ended: (wave, rank) → [stdout, stderr].
    marks: std::collections::HashMap<(Wave, u32), [u64; 2]>,
    /// Positions at the cut of the last committed wave.
    committed_marks: Vec<[u64; 2]>,
    /// The committed wave before the last one and its positions: kept on disk, the fallback
    /// when an image of the last one is damaged.
    previous: Option<(Wave, Vec<[u64; 2]>)>,
    /// The last committed wave.
    committed: Wave,
    /// Partial last lines of processes that ended, continued by the next process of the rank.
    pub(super) carry: Vec<[Option<LineBuffer>; 2]>,
    /// A rollback in progress: the wave and incarnation every rank restarts as, and the
    /// scheduler's ROLLBACK message each new process is sent once it connects.
    rolling: Option<(Wave, u16, Vec<u8>)>,
    /// The processes of the rollback in progress were started (until then, exits are the
    /// old processes going; after, an exit is a failure during the restart).
    respawned: bool,
    /// Rollbacks so far.
    rollbacks: u32,
    wave_started: Option<(Wave, Instant)>,
    /// When the first rollback since the job last went on began (the restore time reported).
    rollback_started: Option<Instant>,
    /// A checkpoint was asked for while a wave or a rollback was under way.
    requested: bool,
    /// Hosts given up on (their remote-start agent could not reach them): no rank is
    /// placed there again.
    dead_hosts: Vec<String>,
    /// The checkpoint server, if the images have a second copy.
    store: Option<StoreAddr>,
    /// A standalone server's key file (the ranks read it themselves).
    store_key_file: Option<PathBuf>,
    /// Ranks keep no local copy of committed waves (`--ckpt-local drop`).
    drop_local: bool,
}

/// Delete the ranks' images and channel records (`rank-R.img`, `.rec`) in `dir`.
fn remove_rank_files(dir: &std::path::Path) {
    let Ok(rd) = std::fs::read_dir(dir) else { return };
    for e in rd.flatten() {
        if e.file_name().to_str().is_some_and(|n| n.starts_with("rank-") && (n.ends_with(".img") || n.ends_with(".rec"))) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// Replace `path` with `bytes` whole (see `steadfast_ckpt::write_atomically`); a failure is
/// logged, the job goes on.
fn write_atomically(path: &std::path::Path, bytes: &[u8]) {
    if let Err(e) = steadfast_ckpt::write_atomically(path, bytes) {
        tracing::warn!(path = %path.display(), error = %e, "cannot write a checkpoint directory file");
    }
}

fn idx(kind: StreamKind) -> usize {
    match kind {
        StreamKind::Stdout => 0,
        StreamKind::Stderr => 1,
    }
}

impl Coord {
    pub(super) fn new(cfg: &super::LaunchConfig, cc: &CoordConfig, jobid: &str, exe: &std::path::Path, cwd: &std::path::Path) -> std::io::Result<Coord> {
        let np = cfg.np;
        let (dir, temporary) = match &cc.dir {
            Some(d) => (std::path::absolute(d)?, false),
            None => {
                let tmp = std::env::var_os("TMPDIR").map_or_else(|| PathBuf::from("/tmp"), PathBuf::from);
                (tmp.join(format!("steadfast-ckpt-{jobid}")), true)
            }
        };
        // Images hold the whole memory of the ranks (the job key too): owner only.
        {
            use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
            std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir)?;
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
        }
        let config = SchedConfig {
            interval: cc.interval,
            wave_timeout: Duration::from_secs(300),
            restore_timeout: Duration::from_secs(120),
        };
        let mut out = vec![[OutPos::default(); 2]; np as usize];
        let mut committed_marks = vec![[0; 2]; np as usize];
        let store_job = cfg.restart.as_ref().and_then(|r| r.store_job.clone()).unwrap_or_else(|| format!("job-{jobid}"));
        let (store, store_key_file) = match &cc.server {
            CkptServer::Off => (None, None),
            CkptServer::Builtin => {
                let key = ckpt_store::key_of_job(cc.job_key);
                let server = StoreServer::bind(&dir.join("server"), std::net::SocketAddr::new(cc.bind_ip, 0), key)?;
                let addr = server.local_addr()?.to_string();
                server.spawn()?;
                (Some(StoreAddr { addr, key, job: store_job.clone() }), None)
            }
            CkptServer::At { addr, key_file } => {
                let key = ckpt_store::read_key_file(key_file)?;
                // Refuse at once a server that cannot be reached or does not know the key.
                StoreClient::connect(addr, &key, SERVER_TIMEOUT).map_err(|e| std::io::Error::new(e.kind(), format!("checkpoint server {addr}: {e}")))?;
                (Some(StoreAddr { addr: addr.clone(), key, job: store_job.clone() }), Some(std::path::absolute(key_file)?))
            }
        };
        let sched = match &cfg.restart {
            Some(r) => {
                // The output up to the checkpoint was forwarded by the earlier run.
                for (rank, m) in r.marks.iter().enumerate().take(np as usize) {
                    committed_marks[rank] = *m;
                    for k in 0..2 {
                        out[rank][k] = OutPos { base: m[k], read: 0, forwarded: m[k] };
                    }
                }
                Scheduler::restart(np, config, Duration::ZERO, r.wave, r.last_wave, r.incarnation)
            }
            None => {
                write_atomically(&dir.join(JOB_FILE), manifest(cfg, exe, cwd, &store_job).as_bytes());
                Scheduler::new(np, config, Duration::ZERO)
            }
        };
        write_atomically(&dir.join(PID_FILE), format!("{}\n", std::process::id()).as_bytes());
        Ok(Coord {
            sched,
            dir,
            temporary,
            start: Instant::now(),
            out,
            marks: Default::default(),
            committed: cfg.restart.as_ref().map_or(0, |r| r.wave),
            committed_marks,
            previous: None,
            carry: (0..np).map(|_| [None, None]).collect(),
            rolling: None,
            respawned: false,
            rollbacks: 0,
            wave_started: None,
            rollback_started: None,
            requested: false,
            store,
            store_key_file,
            drop_local: cfg.ckpt_drop_local,
            dead_hosts: Vec::new(),
        })
    }

    fn now(&self) -> Duration {
        self.start.elapsed()
    }

    /// What `steadfast restart` starts from: the committed wave, the output positions at
    /// its cut, and the highest incarnation used so far (rewritten at every commit, every
    /// rollback and every fallback, so a restart never reuses an incarnation or names an
    /// abandoned wave).
    fn write_committed(&self) {
        if self.committed == 0 && !self.dir.join(COMMITTED_FILE).exists() {
            // Nothing committed yet: `steadfast restart` has nothing to start from.
            return;
        }
        let mut text = format!("wave {}\nincarnation {}\nlast_wave {}\n", self.committed, self.sched.incarnation(), self.sched.last_wave());
        for (r, m) in self.committed_marks.iter().enumerate() {
            text += &format!("mark {r} {} {}\n", m[0], m[1]);
        }
        write_atomically(&self.dir.join(COMMITTED_FILE), text.as_bytes());
    }

    /// The environment a rank's process gets in this mode.
    pub(super) fn rank_env(&self, rank: u32) -> Vec<(OsString, OsString)> {
        let mut v = vec![(crate::env::CKPT_DIR.into(), self.dir.clone().into_os_string())];
        if let Some(s) = &self.store {
            v.push((crate::env::CKPT_SERVER.into(), s.addr.clone().into()));
            v.push((crate::env::CKPT_JOB.into(), s.job.clone().into()));
        }
        if let Some(f) = &self.store_key_file {
            v.push((crate::env::CKPT_SERVER_KEY_FILE.into(), f.clone().into_os_string()));
        }
        if self.drop_local && self.store.is_some() {
            v.push((crate::env::CKPT_LOCAL.into(), "drop".into()));
        }
        if let Some((wave, _, _)) = &self.rolling {
            if *wave > 0 {
                let img = self.dir.join(format!("wave-{wave}")).join(format!("rank-{rank}.img"));
                v.push(("STEADFAST_RESTORE_IMAGE".into(), img.into_os_string()));
            }
        }
        v
    }

    /// Of `data` just read from rank `rank`'s `kind` stream, the part not forwarded before.
    pub(super) fn fresh<'a>(&mut self, rank: usize, kind: StreamKind, data: &'a [u8]) -> &'a [u8] {
        match self.out.get_mut(rank) {
            Some(o) => o[idx(kind)].fresh(data),
            None => data,
        }
    }
}

impl Launcher {
    /// Read everything rank `rank` wrote so far (it is waiting for the launcher's answer and
    /// writes nothing meanwhile).
    pub(super) fn drain_output(&mut self, rank: u32) {
        let read = |l: &Launcher, kind: StreamKind| match (l.coord.as_ref(), l.mlog.as_ref()) {
            (Some(c), _) => c.out.get(rank as usize).map(|o| o[idx(kind)].read),
            (None, Some(m)) => m.read_of(rank as usize, kind),
            (None, None) => None,
        };
        for kind in [StreamKind::Stdout, StreamKind::Stderr] {
            // A pipe holds at most a few hundred KiB; each call reads up to 256 KiB.
            for _ in 0..64 {
                let before = read(self, kind);
                self.pipe_readable(rank as usize, kind);
                if read(self, kind) == before {
                    break;
                }
            }
        }
    }

    /// Answer a rank at its cut: everything it wrote before is read (it writes nothing
    /// until answered), so its output position at the cut is known exactly.
    pub(super) fn coord_output_mark(&mut self, rank: u32, wave: u64) {
        if self.mlog.is_some() {
            return self.mlog_output_mark(rank, wave);
        }
        self.drain_output(rank);
        if let Some(c) = self.coord.as_mut() {
            let o = &c.out[rank as usize];
            c.marks.insert((wave, rank), [o[0].base + o[0].read, o[1].base + o[1].read]);
        }
        self.core.send_to(rank, ServerMsg::OutputMarked { wave });
    }

    /// Before the first ranks start: a restart rolls back at once. Returns the incarnation
    /// the ranks start as.
    pub(super) fn coord_start(&mut self) -> u16 {
        self.coord_pump();
        let Some(c) = self.coord.as_ref() else { return 0 };
        match &c.rolling {
            Some((wave, inc, _)) => {
                let msg = format!("steadfast run: restarting the job from checkpoint {wave} in {}", c.dir.display());
                let inc = *inc;
                self.stderr_sink.message(&msg);
                inc
            }
            None => 0,
        }
    }

    /// `steadfast checkpoint`, `MPIX_Checkpoint`: a wave now, or as soon as the one under
    /// way (or a rollback) ended.
    pub(super) fn coord_checkpoint_now(&mut self) {
        let Some(c) = self.coord.as_mut() else { return };
        let now = c.now();
        if c.sched.checkpoint_now(now).is_none() {
            c.requested = true;
        }
        self.coord_pump();
    }

    pub(super) fn coord_recovery(&mut self, rank: u32, bytes: &[u8]) {
        let Some(c) = self.coord.as_mut() else { return };
        let now = c.now();
        if let Err(e) = c.sched.handle_bytes(now, rank, bytes) {
            tracing::warn!(rank, error = %e, "malformed checkpoint protocol message");
        }
        self.coord_pump();
    }

    pub(super) fn coord_timer(&mut self) {
        let Some(c) = self.coord.as_mut() else { return };
        let now = c.now();
        if c.sched.poll_timeout().is_some_and(|t| t <= now) {
            c.sched.handle_timeout(now);
            self.coord_pump();
        }
    }

    pub(super) fn coord_next_timeout(&self) -> Option<Instant> {
        let c = self.coord.as_ref()?;
        c.sched.poll_timeout().map(|t| c.start + t)
    }

    /// A rank connected: a process restored in a rollback gets the scheduler's ROLLBACK.
    pub(super) fn coord_connected(&mut self, rank: u32) {
        let Some(c) = self.coord.as_ref() else { return };
        if let Some((_, _, msg)) = &c.rolling {
            let msg = msg.clone();
            self.core.send_to(rank, ServerMsg::Event(LauncherEvent::Recovery { bytes: msg }));
        }
    }

    /// Relay the scheduler's messages and act on its events.
    fn coord_pump(&mut self) {
        loop {
            let Some(c) = self.coord.as_mut() else { return };
            if let Some(t) = c.sched.poll_transmit() {
                let Peer::Rank(r) = t.to else { continue };
                if let Body::Rollback { wave } = t.message.body {
                    // For the processes that will be started from the images, not for the
                    // ones about to be killed (the same message for every rank).
                    c.rolling = Some((wave, t.message.incarnation, t.message.encode()));
                    c.respawned = false;
                    continue;
                }
                let bytes = t.message.encode();
                self.core.send_to(r, ServerMsg::Event(LauncherEvent::Recovery { bytes }));
                continue;
            }
            let Some(ev) = c.sched.poll_event() else {
                if c.requested && c.sched.is_idle() {
                    c.requested = false;
                    let now = c.now();
                    c.sched.checkpoint_now(now);
                    continue;
                }
                break;
            };
            self.coord_event(ev);
        }
        self.pump_core();
    }

    fn coord_event(&mut self, ev: SchedEvent) {
        let Some(c) = self.coord.as_mut() else { return };
        match ev {
            SchedEvent::WaveStarted { wave } => {
                c.wave_started = Some((wave, Instant::now()));
                tracing::debug!(wave, "checkpoint wave started");
                if self.cfg.verbose {
                    self.stderr_sink.message(&format!("steadfast run: checkpoint {wave} started"));
                }
            }
            SchedEvent::Committed { wave, in_transit } => {
                if c.committed > 0 {
                    c.previous = Some((c.committed, c.committed_marks.clone()));
                }
                c.committed = wave;
                for r in 0..c.committed_marks.len() as u32 {
                    if let Some(m) = c.marks.remove(&(wave, r)) {
                        c.committed_marks[r as usize] = m;
                    }
                }
                c.marks.retain(|(w, _), _| *w > wave);
                let bytes: u64 = std::fs::read_dir(c.dir.join(format!("wave-{wave}")))
                    .map(|rd| rd.flatten().filter_map(|e| e.metadata().ok()).map(|m| m.len()).sum())
                    .unwrap_or(0);
                let secs = c.wave_started.filter(|(w, _)| *w == wave).map_or(0.0, |(_, t)| t.elapsed().as_secs_f64());
                c.write_committed();
                // Waves before the previous committed one are no longer needed (the ranks
                // delete their own files too). Without local copies the files of the kept
                // waves go as well: every one is on the server (a rank reports its part done
                // only then). The ranks of this host would drop theirs at their next call;
                // dropped here at once, no restore can find them in between. Ranks on other
                // hosts drop their own.
                let keep = c.previous.as_ref().map_or(wave, |p| p.0);
                let drop_files = c.drop_local && c.store.is_some();
                if let Ok(rd) = std::fs::read_dir(&c.dir) {
                    for e in rd.flatten() {
                        let n = e.file_name().to_str().and_then(|n| n.strip_prefix("wave-")).and_then(|n| n.parse::<u64>().ok());
                        match n {
                            Some(n) if n < keep => {
                                let _ = std::fs::remove_dir_all(e.path());
                            }
                            Some(n) if drop_files && n <= wave => remove_rank_files(&e.path()),
                            _ => {}
                        }
                    }
                }
                if let Some(store) = &c.store {
                    let pruned = StoreClient::to(&store, SERVER_TIMEOUT).and_then(|mut s| s.prune(&store.job, keep));
                    if let Err(e) = pruned {
                        tracing::warn!(server = %store.addr, error = %e, "cannot remove old checkpoints from the checkpoint server");
                    }
                }
                let copies = match (&c.store, c.drop_local) {
                    (Some(_), true) => ", on the checkpoint server only (local copies dropped)",
                    (Some(_), false) => ", with a copy on the checkpoint server",
                    (None, _) => "",
                };
                let msg = format!(
                    "steadfast run: checkpoint {wave} committed: {:.1} MiB in {secs:.2} s, {in_transit} message(s) in transit{copies}",
                    bytes as f64 / (1 << 20) as f64
                );
                self.stderr_sink.message(&msg);
            }
            SchedEvent::WaveAborted { wave, reason } => {
                let _ = std::fs::remove_dir_all(c.dir.join(format!("wave-{wave}")));
                let why = match reason {
                    AbortReason::Timeout { missing } => format!("ranks {missing:?} did not report in time"),
                    AbortReason::StorageFailed { rank } => format!("rank {rank} could not store its image or record"),
                    AbortReason::RankFailed { rank } => format!("rank {rank} failed during it"),
                };
                self.stderr_sink.message(&format!("steadfast run: checkpoint {wave} abandoned: {why}"));
            }
            SchedEvent::RollingBack { wave, incarnation } => {
                if c.rolling.as_ref().is_none_or(|r| r.1 != incarnation) {
                    c.rolling = Some((wave, incarnation, Vec::new()));
                    c.respawned = false;
                }
                c.rollbacks += 1;
                c.write_committed();
                c.rollback_started.get_or_insert_with(Instant::now);
                let from = if wave == 0 { "the start".to_owned() } else { format!("checkpoint {wave}") };
                self.stderr_sink.message(&format!(
                    "steadfast run: rolling every rank back to {from} (incarnation {incarnation})"
                ));
            }
            SchedEvent::RestoreTimedOut { missing } => {
                self.stderr_sink.message(&format!("steadfast run: ranks {missing:?} did not restore in time; rolling back again"));
                // The scheduler rolled back again: the processes of the timed-out restore
                // go, and all are started again once they are gone.
                for r in &self.ranks {
                    if r.status.is_none() && r.pid > 0 {
                        // SAFETY: signalling the rank's own process group.
                        unsafe { libc::kill(-r.pid, libc::SIGKILL) };
                    }
                }
            }
            SchedEvent::Resumed { wave, incarnation } => {
                c.rolling = None;
                tracing::info!(wave, incarnation, "job resumed");
                let secs = c.rollback_started.take().map_or(0.0, |t| t.elapsed().as_secs_f64());
                self.stderr_sink.message(&format!("steadfast run: every rank restored checkpoint {wave} in {secs:.2} s; the job goes on"));
            }
            SchedEvent::GaveUp => {
                self.stderr_sink.message("steadfast run: no more rollbacks possible; ending the job");
                self.exit_code.get_or_insert(1);
                self.begin_teardown(libc::SIGTERM, Instant::now());
            }
        }
    }

    /// A rank's process ended badly in coordinated mode. Returns true if the job rolls back
    /// (the caller reports nothing more).
    pub(super) fn coord_rank_failed(&mut self, idx: usize, what: &str) -> bool {
        let max = self.cfg.max_restarts;
        let Some(c) = self.coord.as_mut() else { return false };
        if c.rolling.is_some() && !c.respawned {
            // A process that died while the job was being rolled back: it is started
            // again with the others.
            return true;
        }
        // A process started by the rollback in progress failed before the job went on:
        // the job rolls back again (as the next incarnation).
        let what = if c.rolling.is_some() { format!("{what} during the rollback") } else { what.to_owned() };
        let what = what.as_str();
        if c.rollbacks >= max {
            self.stderr_sink.message(&format!(
                "steadfast run: rank {idx} {what}; the limit of {max} rollback(s) is reached"
            ));
            return false;
        }
        self.stderr_sink.message(&format!("steadfast run: rank {idx} {what}"));
        let now = c.now();
        c.sched.rank_failed(now, idx as u32);
        self.coord_pump();
        if self.coord.as_ref().is_none_or(|c| c.rolling.is_none()) {
            return false;
        }
        // Every other process goes; they are all started again from their images.
        for r in &self.ranks {
            if r.status.is_none() && r.pid > 0 {
                // SAFETY: signalling the rank's own process group.
                unsafe { libc::kill(-r.pid, libc::SIGKILL) };
            }
        }
        self.coord_maybe_restart();
        true
    }

    /// A rank's process ended (coordinated mode, not during the job's teardown).
    pub(super) fn on_rank_exit_coordinated(&mut self, idx: usize, status: ExitStatus, finalized: bool, ever_connected: bool, pid: i32) {
        if self.coord.as_ref().is_some_and(|c| c.rolling.is_some() && !c.respawned) {
            self.coord_maybe_restart();
            return;
        }
        let Some((what, code)) = super::failure_of(status, ever_connected, finalized) else { return };
        // The remote-start agent's own failure (ssh and `ip netns exec` exit with 255 when
        // they cannot reach the host) before the rank ever connected: the host is gone, and
        // its ranks are placed on the other hosts for the rollback that follows.
        if !ever_connected && status == ExitStatus::Exited(AGENT_UNREACHABLE) && self.coord_rank_is_remote(idx) {
            self.coord_move_off_host(idx);
        }
        if self.coord_rank_failed(idx, &format!("(pid {pid}) {what}")) {
            return;
        }
        self.exit_code.get_or_insert(code);
        self.begin_teardown(libc::SIGTERM, Instant::now());
    }

    /// Rank `idx`'s host cannot be reached: every rank placed there moves to the live host
    /// with the fewest ranks (each restores from the checkpoint server's copy, its new
    /// host having none). Returns false if there is no other host.
    fn coord_move_off_host(&mut self, idx: usize) -> bool {
        let Some(dead) = self.respawn.hosts.get(idx).cloned().flatten() else { return false };
        let names: Vec<String> = self.cfg.hosts.iter().map(|h| super::host_name(h).to_owned()).collect();
        let Some(c) = self.coord.as_mut() else { return false };
        if !c.dead_hosts.contains(&dead) {
            c.dead_hosts.push(dead.clone());
        }
        let live: Vec<usize> = (0..names.len()).filter(|&i| !c.dead_hosts.contains(&names[i])).collect();
        if live.is_empty() {
            self.stderr_sink.message(&format!("steadfast run: host {dead} cannot be reached and no other host is left"));
            return false;
        }
        let mut host_of: Vec<usize> = self
            .respawn
            .hosts
            .iter()
            .map(|h| h.as_ref().and_then(|h| names.iter().position(|n| n == h)).unwrap_or(0))
            .collect();
        let mut moved = Vec::new();
        for r in 0..host_of.len() {
            if names.get(host_of[r]) == Some(&dead) {
                let load = |i: usize| host_of.iter().filter(|&&h| h == i).count();
                let to = live.iter().copied().min_by_key(|&i| load(i)).unwrap_or(live[0]);
                host_of[r] = to;
                moved.push((r, names[to].clone()));
            }
        }
        // Everything that depends on the placement: host names, local ranks and sizes, the
        // host map every rank gets.
        let mut seen = vec![0u32; names.len()];
        let counts: Vec<u32> = (0..names.len()).map(|i| host_of.iter().filter(|&&h| h == i).count() as u32).collect();
        for (r, &h) in host_of.iter().enumerate() {
            if let Some(env) = self.respawn.envs.get_mut(r) {
                env.local_rank = seen[h];
                env.local_size = counts[h];
            }
            seen[h] += 1;
            if let Some(slot) = self.respawn.hosts.get_mut(r) {
                *slot = Some(names[h].clone());
            }
        }
        let places: Vec<super::RankPlacement> = host_of
            .iter()
            .enumerate()
            .map(|(r, &h)| super::RankPlacement { rank: r as u32, host: h, local_rank: 0, local_size: 0 })
            .collect();
        self.respawn.map = Some(super::hostmap(&places));
        if moved.is_empty() {
            return true;
        }
        let list: Vec<String> = moved.iter().map(|(r, h)| format!("rank {r} to {h}")).collect();
        self.stderr_sink.message(&format!("steadfast run: host {dead} cannot be reached; moving {}", list.join(", ")));
        true
    }

    /// Start rank `idx` again as `incarnation`, with the environment it was first started with.
    fn respawn_rank(&mut self, idx: usize, incarnation: u16) -> std::io::Result<()> {
        let Some(env) = self.respawn.envs.get(idx) else {
            return Err(std::io::Error::new(std::io::ErrorKind::NotFound, "rank was never started"));
        };
        let env = crate::env::JobEnv { incarnation, ..env.clone() };
        let host = self.respawn.hosts.get(idx).cloned().flatten();
        let (exe, cwd, map) = (self.respawn.exe.clone(), self.respawn.cwd.clone(), self.respawn.map.clone());
        self.spawn_rank(&exe, &env, host.as_deref(), map.as_deref(), &cwd, Some(idx))
    }

    /// Whether rank `r`'s image and channel record of `wave` in the local directory are
    /// whole (checksums): `Err` says what is wrong.
    fn coord_local_files_ok(dir: &std::path::Path, wave: Wave, r: u32) -> Result<(), String> {
        ckpt_store::local_copy_ok(&dir.join(format!("wave-{wave}")).join(format!("rank-{r}.img")))
    }

    /// Whether rank `idx` runs on another host (its copy is on that host's disk).
    fn coord_rank_is_remote(&self, idx: usize) -> bool {
        self.respawn.hosts.get(idx).cloned().flatten().is_some_and(|h| !super::is_this_host(&h))
    }

    /// Whether rank `r`'s files of `wave` can be restored from: on this host, its local copy
    /// (checksums); on another host, the checkpoint server's copy, checked by the server
    /// (the rank fetches it if its own host's copy is unusable). Without a server a remote
    /// rank's copy cannot be checked from here and is trusted.
    fn coord_files_ok(&self, wave: Wave, r: u32) -> Result<(), String> {
        let Some(c) = self.coord.as_ref() else { return Ok(()) };
        if !self.coord_rank_is_remote(r as usize) {
            return Self::coord_local_files_ok(&c.dir, wave, r);
        }
        let Some(store) = &c.store else { return Ok(()) };
        let mut s = StoreClient::to(&store, SERVER_TIMEOUT).map_err(|e| format!("checkpoint server {}: {e}", store.addr))?;
        for kind in [FileKind::Image, FileKind::Record] {
            let id = FileId { job: store.job.clone(), wave, rank: r, kind };
            s.verify(&id).map_err(|e| format!("the checkpoint server's copy of rank {r}: {e}"))?;
        }
        Ok(())
    }

    /// Ranks on this host whose local image or record of `wave` is missing or damaged get
    /// the checkpoint server's copy (the others restart from their local copy, as MPICH-V/CL
    /// does; a rank on another host fetches its own, see `ckpt_store::ensure_local_copy`).
    fn coord_fetch(&mut self, wave: Wave) {
        if wave == 0 {
            return;
        }
        let Some(c) = self.coord.as_ref() else { return };
        let Some(store) = c.store.clone() else { return };
        let dir = c.dir.clone();
        let drop_local = c.drop_local;
        for r in 0..self.cfg.np {
            if self.coord_rank_is_remote(r as usize) {
                continue;
            }
            let Err(why) = Self::coord_local_files_ok(&dir, wave, r) else { continue };
            let image = dir.join(format!("wave-{wave}")).join(format!("rank-{r}.img"));
            let fetched = StoreClient::to(&store, SERVER_TIMEOUT).and_then(|mut s| s.get_checkpoint(&store.job, wave, r, &image));
            let msg = match fetched {
                Ok(bytes) if drop_local => format!(
                    "steadfast run: rank {r}'s image of checkpoint {wave} fetched from the checkpoint server ({:.1} MiB; no local copies)",
                    bytes as f64 / (1 << 20) as f64
                ),
                Ok(bytes) => format!(
                    "steadfast run: rank {r}'s copy of checkpoint {wave} is unusable ({why}); fetched {:.1} MiB from the checkpoint server",
                    bytes as f64 / (1 << 20) as f64
                ),
                Err(e) => format!("steadfast run: rank {r}'s copy of checkpoint {wave} is unusable ({why}), and the checkpoint server's cannot be fetched: {e}"),
            };
            self.stderr_sink.message(&msg);
        }
    }

    /// Whether every rank's image and channel record of `wave` is whole (checksums).
    fn coord_damage(&self, wave: Wave) -> Option<String> {
        if self.coord.is_none() || wave == 0 {
            return None;
        }
        (0..self.cfg.np).find_map(|r| self.coord_files_ok(wave, r).err())
    }

    /// Once every process of the job is gone, start them all from the images.
    pub(super) fn coord_maybe_restart(&mut self) {
        if self.ranks.iter().any(|r| r.status.is_none()) {
            return;
        }
        // A damaged or missing image: the checkpoint server's copy, else the committed wave
        // before it, or the start.
        loop {
            let Some((wave, _, _)) = self.coord.as_ref().and_then(|c| c.rolling.clone()) else { return };
            self.coord_fetch(wave);
            let Some(why) = self.coord_damage(wave) else { break };
            let Some(c) = self.coord.as_mut() else { return };
            let (to, marks) = match c.previous.take() {
                Some((p, m)) if p < wave => (p, m),
                _ => (0, vec![[0; 2]; self.cfg.np as usize]),
            };
            c.committed = to;
            c.committed_marks = marks;
            let now = c.now();
            c.sched.fall_back(now, to);
            c.write_committed();
            self.stderr_sink.message(&format!("steadfast run: checkpoint {wave} cannot be used ({why}); falling back"));
            self.coord_pump();
        }
        let Some(c) = self.coord.as_ref() else { return };
        let Some((wave, incarnation, _)) = c.rolling.clone() else { return };
        let np = self.cfg.np;
        // Output the new processes repeat is not forwarded twice.
        if let Some(c) = self.coord.as_mut() {
            let marks = if wave == 0 { vec![[0; 2]; np as usize] } else { c.committed_marks.clone() };
            for (r, m) in marks.iter().enumerate() {
                for k in 0..2 {
                    c.out[r][k].base = m[k];
                    c.out[r][k].read = 0;
                }
            }
        }
        self.core.restart_job(incarnation);
        for idx in 0..np as usize {
            if let Err(e) = self.respawn_rank(idx, incarnation) {
                self.stderr_sink.message(&format!("steadfast run: cannot start rank {idx} again: {e}"));
                self.exit_code.get_or_insert(1);
                self.core.rank_exited(idx as u32, ExitStatus::Exited(127));
                self.begin_teardown(libc::SIGTERM, Instant::now());
                return;
            }
        }
        if let Some(c) = self.coord.as_mut() {
            c.respawned = true;
        }
        self.coord_write_pids();
    }

    /// Note which process is which rank (for operators, and tests that kill a rank).
    pub(super) fn coord_write_pids(&self) {
        let dir = match (self.coord.as_ref(), self.mlog.as_ref()) {
            (Some(c), _) => &c.dir,
            (None, Some(l)) => &l.dir,
            (None, None) => return,
        };
        let text: String = self.ranks.iter().enumerate().map(|(r, p)| format!("{r} {}\n", p.pid)).collect();
        write_atomically(&dir.join(RANKS_FILE), text.as_bytes());
    }

    /// The job ended: flush carried partial lines, remove a temporary checkpoint directory.
    pub(super) fn coord_finish(&mut self, ok: bool) {
        let Some(c) = self.coord.as_mut() else { return };
        let carry = std::mem::take(&mut c.carry);
        let (dir, temporary) = (c.dir.clone(), c.temporary);
        self.flush_carried(carry);
        if ok && temporary {
            // Nobody can restart the job from this directory: the server's copies go too.
            if let Some(store) = self.coord.as_ref().and_then(|c| c.store.clone()) {
                let _ = StoreClient::to(&store, SERVER_TIMEOUT).and_then(|mut s| s.prune(&store.job, u64::MAX));
            }
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}
