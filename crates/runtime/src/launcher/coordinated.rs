//! The launcher as checkpoint dispatcher (`--ft coordinated`): it hosts the checkpoint
//! scheduler of `steadfast-rollback`, relays its messages over the control connections,
//! notes where each rank's output stood at every cut, and after a failure kills the
//! survivors and starts every rank again from its image of the last committed checkpoint,
//! forwarding only the output that comes after what was already forwarded.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use steadfast_rollback::scheduler::{AbortReason, Event as SchedEvent};
use steadfast_rollback::wire::Body;
use steadfast_rollback::{Config as SchedConfig, Peer, Scheduler, Wave};

use super::output::{LineBuffer, StreamKind};
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
}

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
fn manifest(cfg: &super::LaunchConfig, exe: &std::path::Path, cwd: &std::path::Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut m = format!("version 1\nnp {}\npath {}\n", cfg.np, cfg.path);
    m += &format!("exe {}\ncwd {}\n", hex(exe.as_os_str().as_bytes()), hex(cwd.as_os_str().as_bytes()));
    for a in &cfg.args {
        m += &format!("arg {}\n", hex(a.as_bytes()));
    }
    for (k, v) in &cfg.env {
        m += &format!("env {} {}\n", hex(k.as_bytes()), hex(v.as_bytes()));
    }
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
    cfg.restart = Some(Restart { wave, incarnation, last_wave, marks });
    Ok(cfg)
}

/// Settings of coordinated checkpointing.
#[derive(Debug, Clone)]
pub struct CoordConfig {
    /// Start a wave this long after the previous one ended; `None`: never periodically.
    pub interval: Option<Duration>,
    /// Where images and channel records go; `None`: a fresh directory under `$TMPDIR`.
    pub dir: Option<PathBuf>,
}

/// Per rank and stream: where the rank's output stands, in bytes of the output of an
/// uninterrupted run.
#[derive(Debug, Default, Clone, Copy)]
struct OutPos {
    /// Offset at which the current process's output starts (the cut it was restored from).
    base: u64,
    /// Bytes read from the current process.
    read: u64,
    /// Highest offset forwarded so far, by any process of the rank.
    forwarded: u64,
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
                write_atomically(&dir.join(JOB_FILE), manifest(cfg, exe, cwd).as_bytes());
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
        })
    }

    fn now(&self) -> Duration {
        self.start.elapsed()
    }

    /// The environment a rank's process gets in this mode.
    pub(super) fn rank_env(&self, rank: u32) -> Vec<(OsString, OsString)> {
        let mut v = vec![(crate::env::CKPT_DIR.into(), self.dir.clone().into_os_string())];
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
        let Some(p) = self.out.get_mut(rank).map(|o| &mut o[idx(kind)]) else { return data };
        let at = p.base + p.read;
        p.read += data.len() as u64;
        let end = at + data.len() as u64;
        let skip = p.forwarded.saturating_sub(at).min(data.len() as u64) as usize;
        p.forwarded = p.forwarded.max(end);
        &data[skip..]
    }
}

impl Launcher {
    /// Answer a rank at its cut: everything it wrote before is read (it writes nothing
    /// until answered), so its output position at the cut is known exactly.
    pub(super) fn coord_output_mark(&mut self, rank: u32, wave: u64) {
        for kind in [StreamKind::Stdout, StreamKind::Stderr] {
            // A pipe holds at most a few hundred KiB; each call reads up to 256 KiB.
            for _ in 0..64 {
                let before = self.coord.as_ref().map(|c| c.out[rank as usize][idx(kind)].read);
                self.pipe_readable(rank as usize, kind);
                if self.coord.as_ref().map(|c| c.out[rank as usize][idx(kind)].read) == before {
                    break;
                }
            }
        }
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
                let mut text = format!("wave {wave}\nincarnation {}\nlast_wave {}\n", c.sched.incarnation(), c.sched.last_wave());
                for (r, m) in c.committed_marks.iter().enumerate() {
                    text += &format!("mark {r} {} {}\n", m[0], m[1]);
                }
                write_atomically(&c.dir.join(COMMITTED_FILE), text.as_bytes());
                // Waves before the previous committed one are no longer needed (the ranks
                // delete their own files too).
                let keep = c.previous.as_ref().map_or(wave, |p| p.0);
                if let Ok(rd) = std::fs::read_dir(&c.dir) {
                    for e in rd.flatten() {
                        let n = e.file_name().to_str().and_then(|n| n.strip_prefix("wave-")).and_then(|n| n.parse::<u64>().ok());
                        if n.is_some_and(|n| n < keep) {
                            let _ = std::fs::remove_dir_all(e.path());
                        }
                    }
                }
                let msg = format!(
                    "steadfast run: checkpoint {wave} committed: {:.1} MiB in {secs:.2} s, {in_transit} message(s) in transit",
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
        if self.coord_rank_failed(idx, &format!("(pid {pid}) {what}")) {
            return;
        }
        self.exit_code.get_or_insert(code);
        self.begin_teardown(libc::SIGTERM, Instant::now());
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

    /// Whether every rank's image and channel record of `wave` is whole (checksums).
    fn coord_damage(&self, wave: Wave) -> Option<String> {
        let c = self.coord.as_ref()?;
        if wave == 0 {
            return None;
        }
        let wdir = c.dir.join(format!("wave-{wave}"));
        for r in 0..self.cfg.np {
            if let Err(e) = steadfast_ckpt::verify(&wdir.join(format!("rank-{r}.img"))) {
                return Some(e.to_string());
            }
            let rec = wdir.join(format!("rank-{r}.rec"));
            match std::fs::read(&rec) {
                Ok(b) => {
                    if let Err(e) = steadfast_rollback::wire::ChannelRecord::decode(&b) {
                        return Some(format!("{}: {e}", rec.display()));
                    }
                }
                Err(e) => return Some(format!("{}: {e}", rec.display())),
            }
        }
        None
    }

    /// Once every process of the job is gone, start them all from the images.
    pub(super) fn coord_maybe_restart(&mut self) {
        if self.ranks.iter().any(|r| r.status.is_none()) {
            return;
        }
        // A damaged or missing image: the committed wave before it, or the start.
        loop {
            let Some((wave, _, _)) = self.coord.as_ref().and_then(|c| c.rolling.clone()) else { return };
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
        let Some(c) = self.coord.as_ref() else { return };
        let text: String = self.ranks.iter().enumerate().map(|(r, p)| format!("{r} {}\n", p.pid)).collect();
        write_atomically(&c.dir.join(RANKS_FILE), text.as_bytes());
    }

    /// The job ended: flush carried partial lines, remove a temporary checkpoint directory.
    pub(super) fn coord_finish(&mut self, ok: bool) {
        let Some(c) = self.coord.as_mut() else { return };
        let carry: Vec<(usize, usize, LineBuffer)> = c
            .carry
            .iter_mut()
            .enumerate()
            .flat_map(|(r, k)| k.iter_mut().enumerate().filter_map(move |(i, l)| l.take().map(|l| (r, i, l))))
            .collect();
        let (dir, temporary) = (c.dir.clone(), c.temporary);
        for (r, i, mut l) in carry {
            let mut out = Vec::new();
            l.finish(&mut out);
            let kind = if i == 0 { StreamKind::Stdout } else { StreamKind::Stderr };
            self.sink(kind).write_from(Some(r as u32), &out);
        }
        if ok && temporary {
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}
