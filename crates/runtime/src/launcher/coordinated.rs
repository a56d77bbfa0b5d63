//! The launcher as checkpoint dispatcher (`--ft coordinated`): it hosts the checkpoint
//! scheduler of `steadfast-rollback`, relays its messages over the control connections,
//! notes where each rank's output stood at every cut, and after a failure kills the
//! survivors and starts every rank again from its image of the last committed checkpoint,
//! forwarding only the output that comes after what was already forwarded.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use steadfast_rollback::scheduler::Event as SchedEvent;
use steadfast_rollback::wire::Body;
use steadfast_rollback::{Config as SchedConfig, Peer, Scheduler, Wave};

use super::output::{LineBuffer, StreamKind};
use super::Launcher;
use crate::event::{ExitStatus, LauncherEvent};
use crate::wire::ServerMsg;

/// Name of the file in the checkpoint directory that names the last committed wave.
pub const COMMITTED_FILE: &str = "COMMITTED";

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
    /// Partial last lines of processes that ended, continued by the next process of the rank.
    pub(super) carry: Vec<[Option<LineBuffer>; 2]>,
    /// A rollback in progress: the wave and incarnation every rank restarts as, and the
    /// scheduler's ROLLBACK message each new process is sent once it connects.
    rolling: Option<(Wave, u16, Vec<u8>)>,
    /// Rollbacks so far.
    rollbacks: u32,
    wave_started: Option<(Wave, Instant)>,
}

/// Replace `path` with `bytes` whole (a crash leaves the old or the new content).
fn write_atomically(path: &std::path::Path, bytes: &[u8]) {
    let tmp = path.with_extension("partial");
    let r = std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = r {
        tracing::warn!(path = %path.display(), error = %e, "cannot record the committed checkpoint");
    }
}

fn idx(kind: StreamKind) -> usize {
    match kind {
        StreamKind::Stdout => 0,
        StreamKind::Stderr => 1,
    }
}

impl Coord {
    pub(super) fn new(np: u32, cfg: &CoordConfig, jobid: &str) -> std::io::Result<Coord> {
        let (dir, temporary) = match &cfg.dir {
            Some(d) => (std::path::absolute(d)?, false),
            None => {
                let tmp = std::env::var_os("TMPDIR").map_or_else(|| PathBuf::from("/tmp"), PathBuf::from);
                (tmp.join(format!("steadfast-ckpt-{jobid}")), true)
            }
        };
        std::fs::create_dir_all(&dir)?;
        let config = SchedConfig {
            interval: cfg.interval,
            wave_timeout: Duration::from_secs(300),
            restore_timeout: Duration::from_secs(120),
        };
        Ok(Coord {
            sched: Scheduler::new(np, config, Duration::ZERO),
            dir,
            temporary,
            start: Instant::now(),
            out: vec![[OutPos::default(); 2]; np as usize],
            marks: Default::default(),
            committed_marks: vec![[0; 2]; np as usize],
            carry: (0..np).map(|_| [None, None]).collect(),
            rolling: None,
            rollbacks: 0,
            wave_started: None,
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
                    continue;
                }
                let bytes = t.message.encode();
                self.core.send_to(r, ServerMsg::Event(LauncherEvent::Recovery { bytes }));
                continue;
            }
            let Some(ev) = c.sched.poll_event() else { break };
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
            }
            SchedEvent::Committed { wave, in_transit } => {
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
                write_atomically(&c.dir.join(COMMITTED_FILE), format!("{wave}\n").as_bytes());
                // Older waves are no longer needed (the ranks delete their own files too).
                if let Ok(rd) = std::fs::read_dir(&c.dir) {
                    for e in rd.flatten() {
                        let n = e.file_name().to_str().and_then(|n| n.strip_prefix("wave-")).and_then(|n| n.parse::<u64>().ok());
                        if n.is_some_and(|n| n < wave) {
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
                self.stderr_sink.message(&format!("steadfast run: checkpoint {wave} abandoned ({reason:?})"));
            }
            SchedEvent::RollingBack { wave, incarnation } => {
                if c.rolling.as_ref().is_none_or(|r| r.1 != incarnation) {
                    c.rolling = Some((wave, incarnation, Vec::new()));
                }
                c.rollbacks += 1;
                let from = if wave == 0 { "the start".to_owned() } else { format!("checkpoint {wave}") };
                self.stderr_sink.message(&format!(
                    "steadfast run: rolling every rank back to {from} (incarnation {incarnation})"
                ));
            }
            SchedEvent::RestoreTimedOut { missing } => {
                self.stderr_sink.message(&format!("steadfast run: ranks {missing:?} did not restore in time; rolling back again"));
            }
            SchedEvent::Resumed { wave, incarnation } => {
                c.rolling = None;
                tracing::info!(wave, incarnation, "job resumed");
                self.stderr_sink.message(&format!("steadfast run: every rank restored checkpoint {wave}; the job goes on"));
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
        if c.rolling.is_some() {
            // A process that died while the job was being rolled back: it is started
            // again with the others.
            return true;
        }
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
        if self.coord.as_ref().is_some_and(|c| c.rolling.is_some()) {
            self.coord_maybe_restart();
            return;
        }
        let missing_finalize = status.success() && ever_connected && !finalized;
        if status.success() && !missing_finalize {
            return;
        }
        let what = if missing_finalize {
            "exited with status 0 without calling MPI_Finalize".to_owned()
        } else {
            status.to_string()
        };
        if self.coord_rank_failed(idx, &format!("(pid {pid}) {what}")) {
            return;
        }
        self.exit_code.get_or_insert(if missing_finalize { 1 } else { status.shell_code() });
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

    /// Once every process of the job is gone, start them all from the images.
    pub(super) fn coord_maybe_restart(&mut self) {
        let Some(c) = self.coord.as_ref() else { return };
        let Some((wave, incarnation, _)) = c.rolling.clone() else { return };
        if self.ranks.iter().any(|r| r.status.is_none()) {
            return;
        }
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
