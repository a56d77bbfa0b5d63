//! Coordinated checkpoints and rollback in the engine (`--ft coordinated`, MPICH-V/CL): the
//! engine drives the `steadfast-rollback` rank machine through the door's interposition
//! hook, takes process images with `steadfast-ckpt` at the cut of each wave, and, in a
//! process restored from an image, rebuilds what lives in the kernel (the path to the other
//! ranks, the launcher link, the application's regular files) before the application goes
//! on. Design: `docs/rollback.md` (protocol) and `docs/checkpoint.md` (images).
//!
//! Where the cut is taken: the rank machine decides the cut when the scheduler's CHECKPOINT
//! or the first MARKER of a wave arrives. A marker arrives inside a path's poll, where the
//! path is borrowed and no image can be taken; from that moment every further packet is held
//! back unprocessed ([`Shared::held`]) until the engine, back at the top of its progress
//! round, takes the image. Then the held packets go through the door as if they had just
//! arrived (so the ones still in transit are recorded). A restored process drops them: they
//! came after the cut and are either in the channel record or sent again by a restored
//! sender.

use std::collections::VecDeque;
use std::path::{Path as FsPath, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use steadfast_paths::{RawHeader, HDR_LEN};
use steadfast_runtime::ckpt_store::{self, FileId, FileKind, StoreAddr, StoreClient};
use steadfast_rollback::rank::Event;
use steadfast_rollback::wire::ChannelRecord;
use steadfast_rollback::{Peer, RankMachine, Transmit, Verdict, Wave, UNNUMBERED};

use super::{Engine, OutOp, Sink};
use crate::door::{Door, Ident, Interpose};
use crate::error::{ErrorClass, MpiError, MpiResult};
use crate::wire::{Header, Kind};

/// What the hook and the engine share.
pub struct Shared {
    machine: RankMachine,
    rank: u32,
    /// Events taken out of the machine, for the engine to act on at its next safe point.
    events: VecDeque<Event>,
    /// A cut is due (the machine said TakeImage) and not yet taken.
    cut_due: bool,
    /// Packets admitted while a cut is due: (sender, header, payload).
    held: Vec<(u32, RawHeader, Vec<u8>)>,
    /// Something waits for the engine (an event, a message to send, a cut): checked by
    /// every progress round without taking the lock.
    attention: Arc<AtomicBool>,
}

impl Shared {
    fn pull_events(&mut self) {
        while let Some(ev) = self.machine.poll_event() {
            if matches!(ev, Event::TakeImage { .. }) {
                self.cut_due = true;
            }
            self.events.push_back(ev);
        }
        if self.pending() {
            self.attention.store(true, Ordering::Release);
        }
    }

    /// Something waits for the engine: a cut, an event, a message to send.
    fn pending(&self) -> bool {
        self.cut_due || !self.events.is_empty() || self.machine.has_transmit()
    }
}

/// The rank machine's state, kept in the door's hook (set in coordinated mode): the engine
/// reaches it through the door, so the hook needs no lock on the message path (the engine
/// is used by one thread at a time).
fn shared(door: &mut Door) -> Option<&mut Shared> {
    door.hook_mut::<Hook>().map(|h| &mut h.0)
}

/// The door's hook: feeds the rank machine what is sent and what arrives.
struct Hook(Shared);

impl Interpose for Hook {
    fn as_any(&mut self) -> Option<&mut dyn std::any::Any> {
        Some(self)
    }

    fn sent(&mut self, to: u32, ident: &Ident, hdr: &Header, _payload: &[u8]) {
        tracing::trace!(to, kind = ?hdr.kind, tag = hdr.tag, len = hdr.len, seq = ident.seq, b = hdr.b, "sent");
        let s = &mut self.0;
        if to != s.rank {
            s.machine.sent(to, rb_ident(ident));
        }
    }

    fn arrived(&mut self, from: u32, hdr: &Header, payload: &[u8]) -> bool {
        tracing::trace!(from, kind = ?hdr.kind, inc = hdr.incarnation, tag = hdr.tag, len = hdr.len, a = hdr.a, b = hdr.b, "arrived");
        let s = &mut self.0;
        if from == s.rank {
            // This process's own packets: part of its image, never of a channel.
            return true;
        }
        if s.cut_due {
            // Markers too: a marker closes its channel, so it must be taken in after the
            // packets that arrived before it, or those would not be recorded.
            s.held.push((from, hdr.encode(), payload.to_vec()));
            return false;
        }
        if hdr.kind == Kind::Recovery {
            if let Err(e) = s.machine.handle_bytes(Peer::Rank(from), payload) {
                tracing::warn!(from, error = %e, "malformed checkpoint protocol message dropped");
            }
            s.pull_events();
            return false;
        }
        let seq = if matches!(hdr.kind, Kind::Eager | Kind::Rts) { hdr.a } else { UNNUMBERED };
        let ident = steadfast_rollback::Ident { world: from, incarnation: hdr.incarnation, seq };
        // Only a packet that may be recorded needs its header kept with it.
        let verdict = if s.machine.current_wave().is_some() {
            let mut bytes = Vec::with_capacity(HDR_LEN + payload.len());
            bytes.extend_from_slice(&hdr.encode());
            bytes.extend_from_slice(payload);
            s.machine.arrived(ident, &bytes)
        } else {
            s.machine.arrived(ident, payload)
        };
        verdict == Verdict::Deliver
    }
}

fn rb_ident(i: &Ident) -> steadfast_rollback::Ident {
    steadfast_rollback::Ident { world: i.world, incarnation: i.incarnation, seq: i.seq }
}

/// A regular file the application had open at a cut, to open again after a restore.
#[derive(Debug, Clone)]
pub(super) struct SavedFile {
    fd: i32,
    path: PathBuf,
    flags: i32,
    offset: i64,
    size: u64,
}

/// What a restored process needs from the library's front end: the job as its new
/// environment describes it, and a fresh link to the launcher.
pub type Reconnect = Box<dyn FnMut() -> MpiResult<(super::JobInfo, Box<dyn super::Bootstrap>)> + Send>;

/// The engine's side of coordinated checkpointing.
pub struct Coordinator {
    /// Where this job's images and channel records go (`wave-N/rank-R.{img,rec}`).
    dir: PathBuf,
    /// Directories whose shared mappings (the paths' rings) are left out of images.
    jobdir: PathBuf,
    /// The image being written by a child, and its wave.
    pending: Option<(Wave, steadfast_ckpt::Pending, std::time::Instant)>,
    files: Vec<SavedFile>,
    /// The last committed wave.
    committed: Wave,
    polls: u32,
    reconnect: Reconnect,
    /// See [`Shared::attention`].
    attention: Arc<AtomicBool>,
    /// The job's checkpoint server: every image and record goes there too before the rank
    /// reports its part of a wave done.
    store: Option<StoreAddr>,
    /// Copies to the checkpoint server under way.
    uploads: Vec<Upload>,
    /// Keep no local copy of a committed wave (`STEADFAST_CKPT_LOCAL=drop`, with a server):
    /// a restore then fetches the image from the server.
    drop_local: bool,
    /// Checkpoints taken / restored, for the extension calls and tests.
    pub images: u64,
    pub restores: u64,
}

impl Coordinator {
    fn wave_dir(&self, wave: Wave) -> PathBuf {
        self.dir.join(format!("wave-{wave}"))
    }
    fn image_path(&self, wave: Wave, rank: u32) -> PathBuf {
        self.wave_dir(wave).join(format!("rank-{rank}.img"))
    }
    fn record_path(&self, wave: Wave, rank: u32) -> PathBuf {
        self.wave_dir(wave).join(format!("rank-{rank}.rec"))
    }

    /// With a checkpoint server: start copying `path` there and return `Some(true)` (the
    /// machine is told once the copy ended, see `coord_poll_uploads`), `Some(false)` if no
    /// copy can be started. Without a server: `None`.
    fn start_upload(&mut self, wave: Wave, rank: u32, kind: FileKind, path: PathBuf) -> Option<bool> {
        let store = self.store.clone()?;
        let id = FileId { job: store.job.clone(), wave, rank, kind };
        let thread = std::thread::Builder::new()
            .name("steadfast-ckpt-copy".into())
            .spawn(move || StoreClient::to(&store, Duration::from_secs(10)).and_then(|mut c| c.put(&id, &path)));
        match thread {
            Ok(thread) => {
                self.uploads.push(Upload { wave, kind, thread });
                Some(true)
            }
            Err(e) => {
                eprintln!("steadfast: rank {rank}: checkpoint {wave}: cannot start copying to the checkpoint server: {e}");
                Some(false)
            }
        }
    }
}

/// A copy of one file of a wave to the checkpoint server, on a thread of its own (the rank
/// goes on computing). It ends before the wave can commit, so no such thread exists when
/// the next image is taken.
struct Upload {
    wave: Wave,
    kind: FileKind,
    thread: std::thread::JoinHandle<std::io::Result<u64>>,
}

/// The checkpoint server named by the environment, if any (a misconfigured one is reported
/// and images stay local).
fn store_from_env() -> Option<StoreAddr> {
    ckpt_store::store_from_env().unwrap_or_else(|why| {
        eprintln!("steadfast: {why}; images stay local only");
        None
    })
}

fn other(msg: impl std::fmt::Display) -> MpiError {
    MpiError::new(ErrorClass::Other, format!("coordinated checkpoint: {msg}"))
}

/// A process this mode cannot checkpoint at all: its own threads (only the calling thread
/// is saved in an image), or address-space randomization.
fn refused(e: steadfast_ckpt::Error) -> MpiError {
    let why = match e {
        steadfast_ckpt::Error::Threads { tids } => {
            format!("it runs {} thread(s) of its own besides the caller (ids {tids:?}); programs with their own threads are not supported in this mode", tids.len())
        }
        e => e.to_string(),
    };
    MpiError::new(ErrorClass::Unsupported, format!("--ft coordinated cannot checkpoint this process: {why}"))
}

/// The application's open regular files (not the library's own: nothing under `skip`).
pub(super) fn saved_files(skip: &[&FsPath]) -> Vec<SavedFile> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else { return out };
    for e in dir.flatten() {
        let Some(fd) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        if fd <= 2 {
            continue;
        }
        let Ok(path) = std::fs::read_link(e.path()) else { continue };
        if !path.is_absolute() || skip.iter().any(|s| path.starts_with(s)) {
            continue;
        }
        // SAFETY: fstat on a descriptor number into a zeroed struct.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstat(fd, &mut st) } != 0 || st.st_mode & libc::S_IFMT != libc::S_IFREG {
            continue;
        }
        // SAFETY: plain queries of our own descriptor.
        let (flags, offset) = unsafe { (libc::fcntl(fd, libc::F_GETFL), libc::lseek(fd, 0, libc::SEEK_CUR)) };
        if flags < 0 || offset < 0 {
            continue;
        }
        out.push(SavedFile { fd, path, flags, offset, size: st.st_size as u64 });
    }
    out
}

/// Open the application's files again at their descriptor numbers, offsets and sizes.
pub(super) fn reopen_files(files: &[SavedFile]) {
    use std::os::unix::ffi::OsStrExt;
    for f in files {
        let Ok(c) = std::ffi::CString::new(f.path.as_os_str().as_bytes()) else { continue };
        let flags = f.flags & !(libc::O_CREAT | libc::O_TRUNC | libc::O_EXCL);
        // SAFETY: open/dup2/lseek/ftruncate/close on descriptors this code owns.
        unsafe {
            let fd = libc::open(c.as_ptr(), flags, 0o644);
            if fd < 0 {
                eprintln!("steadfast: after the rollback: cannot open {} again", f.path.display());
                continue;
            }
            if fd != f.fd {
                libc::dup2(fd, f.fd);
                libc::close(fd);
            }
            let acc = f.flags & libc::O_ACCMODE;
            if acc == libc::O_WRONLY || acc == libc::O_RDWR {
                // What was written after the cut is written again by the re-execution.
                libc::ftruncate(f.fd, f.size as libc::off_t);
            }
            libc::lseek(f.fd, f.offset, libc::SEEK_SET);
        }
    }
}

/// Shared mappings under the job directory (the paths' rings): left out of images, and
/// made again by the restored process's new path.
pub(super) fn skipped_mappings(jobdir: &FsPath) -> Vec<std::ops::Range<u64>> {
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else { return Vec::new() };
    let jobdir = jobdir.to_string_lossy();
    steadfast_ckpt::maps::lines(&maps)
        .filter(|l| l.shared && (l.path.starts_with(&*jobdir) || l.path.starts_with("/dev/shm/")))
        .map(|l| l.start..l.end)
        .collect()
}

/// The `STEADFAST_*` environment the process was started with (kept across the restore by
/// `steadfast_ckpt`), which a restored process must use instead of the one in its image
/// (another launcher, key and directory after `steadfast restart`).
pub(super) fn refresh_environment() {
    let Some(vars) = steadfast_ckpt::restart_environment() else {
        eprintln!("steadfast: restored without the environment of the restart; using the image's");
        return;
    };
    for (k, v) in vars {
        if k.to_string_lossy().starts_with("STEADFAST_") {
            std::env::set_var(k, v);
        }
    }
}

impl Engine {
    /// Turn coordinated checkpointing on (`--ft coordinated`): images and records go under
    /// `dir`. `restarted` is the incarnation of a process started again from scratch after a
    /// rollback to the start of the job (wave 0); 0 at a first start.
    pub fn enable_coordinated(&mut self, dir: PathBuf, jobdir: PathBuf, reconnect: Reconnect) -> MpiResult<()> {
        std::fs::create_dir_all(&dir).map_err(|e| other(format!("cannot create {}: {e}", dir.display())))?;
        // The library runs no thread of its own in this mode: any other thread is the
        // application's, which no image could hold. Refused now rather than at every wave.
        match steadfast_ckpt::other_threads(&[]) {
            Ok(t) if !t.is_empty() => return Err(refused(steadfast_ckpt::Error::Threads { tids: t })),
            _ => {}
        }
        let incarnation = self.st.door.incarnation;
        let machine = if incarnation == 0 {
            RankMachine::new(self.rank, self.size)
        } else {
            RankMachine::relaunched(self.rank, self.size)
        };
        let attention = Arc::new(AtomicBool::new(false));
        let shared = Shared {
            machine,
            rank: self.rank,
            events: VecDeque::new(),
            cut_due: false,
            held: Vec::new(),
            attention: attention.clone(),
        };
        self.st.door.set_hook(Some(Box::new(Hook(shared))));
        self.coord = Some(Box::new(Coordinator {
            dir,
            jobdir,
            pending: None,
            files: Vec::new(),
            committed: 0,
            polls: 0,
            reconnect,
            attention,
            store: store_from_env(),
            uploads: Vec::new(),
            drop_local: steadfast_config::lookup(steadfast_runtime::env::CKPT_LOCAL).as_deref() == Some("drop"),
            images: 0,
            restores: 0,
        }));
        if incarnation > 0 {
            // Started again from the beginning (no committed checkpoint): wait for the
            // scheduler's ROLLBACK to wave 0 and its RESUME like every restored rank.
            self.rejoin_rollback(0)?;
        }
        Ok(())
    }

    /// Whether coordinated checkpointing is on.
    pub fn coordinated(&self) -> bool {
        self.coord.is_some()
    }

    /// A progress round's share of coordinated checkpointing: cheap unless something is due.
    pub(super) fn coord_step(&mut self) -> MpiResult<()> {
        let Some(c) = self.coord.as_mut() else { return Ok(()) };
        c.polls += 1;
        if c.polls >= 256 {
            c.polls = 0;
            self.coord_poll_launcher();
            self.coord_poll_image();
            self.coord_poll_uploads();
        }
        // A plain load first: the flag is almost always clear, and a swap would cost an
        // atomic read-modify-write in every progress round.
        let due = self.coord.as_ref().is_some_and(|c| c.attention.load(Ordering::Relaxed) && c.attention.swap(false, Ordering::Acquire));
        if due {
            self.coord_act()?;
            // Whatever acting on it left pending is looked at again next round.
            if let Some(c) = self.coord.as_ref() {
                if shared(&mut self.st.door).is_some_and(|s| s.pending()) {
                    c.attention.store(true, Ordering::Release);
                }
            }
        }
        Ok(())
    }

    /// Messages from the checkpoint scheduler.
    fn coord_poll_launcher(&mut self) {
        let Some(boot) = self.boot.as_mut() else { return };
        let evs = boot.poll_events();
        let Some(s) = shared(&mut self.st.door) else { return };
        for ev in evs {
            if let steadfast_runtime::LauncherEvent::Recovery { bytes } = ev {
                if let Err(e) = s.machine.handle_bytes(Peer::Scheduler, &bytes) {
                    tracing::warn!(error = %e, "malformed message from the checkpoint scheduler dropped");
                }
            }
        }
        s.pull_events();
    }

    /// Whether the image being written is complete.
    fn coord_poll_image(&mut self) {
        let Some(c) = self.coord.as_mut() else { return };
        let Some((wave, p, started)) = c.pending.as_mut() else { return };
        let wave = *wave;
        let done = match p.try_wait() {
            Ok(None) => return,
            Ok(Some(stats)) => {
                tracing::debug!(wave, bytes = stats.bytes, elapsed = ?started.elapsed(), "image stored");
                let path = c.image_path(wave, self.rank);
                match c.start_upload(wave, self.rank, FileKind::Image, path) {
                    Some(true) => {
                        c.pending = None;
                        return;
                    }
                    Some(false) => false,
                    None => true,
                }
            }
            Err(e) => {
                eprintln!("steadfast: rank {}: checkpoint {wave}: {e}", self.rank);
                false
            }
        };
        c.pending = None;
        let Some(s) = shared(&mut self.st.door) else { return };
        s.machine.image_stored(wave, done);
        s.pull_events();
    }

    /// Copies to the checkpoint server that ended: the file is stored once both copies are.
    fn coord_poll_uploads(&mut self) {
        let Some(c) = self.coord.as_mut() else { return };
        if c.uploads.is_empty() {
            return;
        }
        let (done, running): (Vec<Upload>, Vec<Upload>) = std::mem::take(&mut c.uploads).into_iter().partition(|u| u.thread.is_finished());
        c.uploads = running;
        for u in done {
            let result = u.thread.join().unwrap_or_else(|_| Err(std::io::Error::other("the copying thread panicked")));
            let ok = match result {
                Ok(bytes) => {
                    tracing::debug!(wave = u.wave, kind = ?u.kind, bytes, "copied to the checkpoint server");
                    true
                }
                Err(e) => {
                    let addr = c.store.as_ref().map_or("", |s| s.addr.as_str());
                    eprintln!("steadfast: rank {}: checkpoint {}: cannot store a copy on the checkpoint server {addr}: {e}", self.rank, u.wave);
                    false
                }
            };
            let Some(s) = shared(&mut self.st.door) else { return };
            match u.kind {
                FileKind::Image => s.machine.image_stored(u.wave, ok),
                FileKind::Record => s.machine.record_stored(u.wave, ok),
            }
            s.pull_events();
        }
    }

    /// Act on the machine's events and send what it queued.
    fn coord_act(&mut self) -> MpiResult<()> {
        loop {
            let (ev, cut) = {
                let Some(s) = shared(&mut self.st.door) else { return Ok(()) };
                s.pull_events();
                (s.events.pop_front(), s.cut_due)
            };
            match ev {
                Some(Event::TakeImage { wave }) => {
                    self.take_cut(wave)?;
                    continue;
                }
                Some(ev) => {
                    self.coord_event(ev);
                    continue;
                }
                None if cut => {
                    // The TakeImage was acted on already; a cut cannot stay due without one.
                    if let Some(s) = shared(&mut self.st.door) {
                        s.cut_due = false;
                    }
                }
                None => {}
            }
            break;
        }
        self.coord_send()
    }

    fn coord_event(&mut self, ev: Event) {
        let Some(c) = self.coord.as_ref() else { return };
        let rank = self.rank;
        match ev {
            Event::StoreRecord { record } => {
                let wave = record.wave;
                let path = c.record_path(wave, rank);
                let ok = std::fs::create_dir_all(c.wave_dir(wave)).and_then(|()| steadfast_ckpt::write_atomically(&path, &record.encode()));
                if let Err(e) = &ok {
                    eprintln!("steadfast: rank {rank}: cannot store the channel record {}: {e}", path.display());
                }
                let mut stored = ok.is_ok();
                if stored {
                    match self.coord.as_mut().and_then(|c| c.start_upload(wave, rank, FileKind::Record, path)) {
                        Some(true) => return,
                        Some(false) => stored = false,
                        None => {}
                    }
                }
                let Some(s) = shared(&mut self.st.door) else { return };
                s.machine.record_stored(wave, stored);
                s.pull_events();
            }
            Event::Discard { wave } => {
                let _ = std::fs::remove_file(c.image_path(wave, rank));
                let _ = std::fs::remove_file(c.record_path(wave, rank));
            }
            Event::Committed { wave } => {
                // Waves before the previous committed one are no longer needed (that one is
                // the fallback should an image of `wave` be damaged).
                let keep = c.committed;
                if let Some(c) = self.coord.as_mut() {
                    c.committed = wave;
                }
                let Some(c) = self.coord.as_ref() else { return };
                // Without local copies the committed waves stay on the server only (it
                // keeps the previous one too): a restore fetches the image from there.
                let keep = if c.drop_local && c.store.is_some() { wave + 1 } else { keep };
                if let Ok(rd) = std::fs::read_dir(&c.dir) {
                    for e in rd.flatten() {
                        let name = e.file_name();
                        let Some(n) = name.to_str().and_then(|n| n.strip_prefix("wave-")).and_then(|n| n.parse::<u64>().ok()) else {
                            continue;
                        };
                        if n < keep {
                            let _ = std::fs::remove_file(c.image_path(n, rank));
                            let _ = std::fs::remove_file(c.record_path(n, rank));
                        }
                    }
                }
            }
            Event::TakeImage { .. } | Event::Restore { .. } | Event::Resume { .. } => {}
        }
    }

    /// Send the machine's queued messages: markers on the paths, reports to the launcher.
    fn coord_send(&mut self) -> MpiResult<()> {
        loop {
            let t = {
                let Some(s) = shared(&mut self.st.door) else { return Ok(()) };
                s.machine.poll_transmit()
            };
            let Some(t) = t else { return Ok(()) };
            self.coord_transmit(t)?;
        }
    }

    fn coord_transmit(&mut self, t: Transmit) -> MpiResult<()> {
        let bytes = t.message.encode();
        match t.to {
            Peer::Scheduler => {
                if let Some(b) = self.boot.as_mut() {
                    b.send_recovery(&bytes).map_err(other)?;
                }
                Ok(())
            }
            Peer::Rank(j) => {
                let hdr = self.st.door.control(Kind::Recovery, 0, 0, 0, bytes.len() as u64, 0, 0);
                self.emit(j, hdr, &bytes)
            }
        }
    }

    /// The cut of `wave`: note the output, take the image, send the markers, then act on
    /// the packets held back since the cut became due.
    fn take_cut(&mut self, wave: Wave) -> MpiResult<()> {
        let rank = self.rank;
        tracing::debug!(rank, wave, outq = ?self.st.outq.iter().map(|q| q.len()).collect::<Vec<_>>(), "cut");
        let markers: Vec<Transmit> = {
            let Some(s) = shared(&mut self.st.door) else { return Ok(()) };
            std::iter::from_fn(|| s.machine.poll_transmit()).collect()
        };
        if let Some(b) = self.boot.as_mut() {
            // The launcher takes in what this process wrote before the cut; nothing is
            // written until it answers.
            b.output_mark(wave).map_err(other)?;
        }
        let Some(c) = self.coord.as_mut() else { return Ok(()) };
        let wdir = c.wave_dir(wave);
        let image = c.image_path(wave, rank);
        let jobdir = c.jobdir.clone();
        let skip = [jobdir.as_path(), c.dir.as_path(), FsPath::new("/dev/shm")];
        c.files = saved_files(&skip);
        let outcome = std::fs::create_dir_all(&wdir)
            .map_err(|e| steadfast_ckpt::Error::Io { what: wdir.display().to_string(), err: e.to_string() })
            .and_then(|()| {
                let opts = steadfast_ckpt::Options { ignore_threads: Vec::new(), skip_ranges: skipped_mappings(&jobdir) };
                steadfast_ckpt::checkpoint(&image, &opts)
            });
        // Copies of an abandoned wave to the checkpoint server may still run: threads of the
        // library, which make this image fail but are no reason to refuse the program.
        let copying = c.uploads.len();
        let mut refusal = None;
        match outcome {
            Ok(steadfast_ckpt::Outcome::Restored) => {
                drop(markers);
                return self.after_restore(wave);
            }
            Ok(steadfast_ckpt::Outcome::Checkpointed(p)) => {
                c.images += 1;
                c.pending = Some((wave, p, std::time::Instant::now()));
            }
            Err(e) => {
                let ours = matches!(&e, steadfast_ckpt::Error::Threads { tids } if tids.len() <= copying);
                if !ours && matches!(e, steadfast_ckpt::Error::Threads { .. } | steadfast_ckpt::Error::Randomized) {
                    // No later wave can succeed either: the application is told (after
                    // the cut is completed below, so the channels stay consistent).
                    refusal = Some(refused(e));
                } else {
                    eprintln!("steadfast: rank {rank}: checkpoint {wave}: {e}");
                }
                if let Some(s) = shared(&mut self.st.door) {
                    s.machine.image_stored(wave, false);
                }
            }
        }
        let held = {
            let Some(s) = shared(&mut self.st.door) else { return Ok(()) };
            s.cut_due = false;
            std::mem::take(&mut s.held)
        };
        for t in markers {
            self.coord_transmit(t)?;
        }
        let mut sink = Sink(&mut self.st);
        for (from, hdr, payload) in held {
            steadfast_paths::PacketSink::packet(&mut sink, from, &hdr, &payload);
        }
        refusal.map_or(Ok(()), Err)
    }

    /// Back from an image: rebuild the kernel side and rejoin the job.
    fn after_restore(&mut self, wave: Wave) -> MpiResult<()> {
        // The image's descriptors, mappings and child are gone: forget, never close, them
        // (their numbers may belong to new descriptors already).
        std::mem::forget(self.net.take());
        std::mem::forget(self.boot.take());
        refresh_environment();
        let Some(c) = self.coord.as_mut() else { return Ok(()) };
        if let Some(p) = c.pending.take() {
            std::mem::forget(p);
        }
        // The image's copying threads do not exist in this process.
        std::mem::forget(std::mem::take(&mut c.uploads));
        c.store = store_from_env();
        c.restores += 1;
        let files = std::mem::take(&mut c.files);
        reopen_files(&files);
        if let Some(s) = shared(&mut self.st.door) {
            s.held.clear();
            s.cut_due = false;
            s.events.clear();
            while s.machine.poll_transmit().is_some() {}
        }
        let (job, mut boot) = (c.reconnect)()?;
        let built = super::build_net(&job, boot.as_mut(), &self.cfg, 0)?;
        for w in 0..self.size as usize {
            if let Some(p) = self.st.pids.get_mut(w) {
                *p = built.pids[w];
            }
            if let Some(ok) = self.st.cma_ok.get_mut(w) {
                *ok = *ok && built.shm_peer[w];
            }
        }
        if let Some(p) = self.st.pids.get_mut(self.rank as usize) {
            *p = std::process::id();
        }
        // The new path may carry less per packet (its rings are sized by the free space of
        // the host now): never stream chunks it cannot take.
        self.chunk = self.chunk.min(built.net.max_payload());
        self.eager_limit = self.eager_limit.min(self.chunk);
        self.room_eager = self.room_eager.min(self.chunk);
        self.net = Some(built.net);
        self.boot = Some(boot);
        self.rejoin_rollback(wave)?;
        Ok(())
    }

    /// Become the rollback's incarnation: wait for the scheduler's ROLLBACK, load the
    /// channel record, report, wait for RESUME, re-deliver what was in transit at the cut.
    fn rejoin_rollback(&mut self, wave: Wave) -> MpiResult<()> {
        let rank = self.rank;
        let restore = self.coord_wait(|ev| matches!(ev, Event::Restore { .. }))?;
        let Event::Restore { wave: target, incarnation } = restore else { unreachable!() };
        if target != wave {
            return Err(other(format!("told to restore wave {target}, this image is of wave {wave}")));
        }
        let record = if wave == 0 {
            ChannelRecord::initial(rank, self.size)
        } else {
            let Some(c) = self.coord.as_ref() else { return Ok(()) };
            let path = c.record_path(wave, rank);
            let bytes = std::fs::read(&path).map_err(|e| other(format!("{}: {e}", path.display())))?;
            ChannelRecord::decode(&bytes).map_err(|e| other(format!("{}: {e}", path.display())))?
        };
        let replay = {
            let Some(s) = shared(&mut self.st.door) else { return Ok(()) };
            let r = s.machine.restored(wave, record).map_err(other)?;
            s.pull_events();
            r
        };
        // Every rank of the job is this incarnation now.
        self.st.door.restart_all(incarnation);
        // What waited in the output queues at the cut left before this rank's markers (the
        // queues are FIFO), and the wave was committed, so every receiver has it: in its
        // image, or in its record of messages in transit. Sending it again would deliver it
        // twice. A rendezvous stream that was under way is complete for the same reason.
        let mut streams = Vec::new();
        let mut dropped = 0;
        for q in &mut self.st.outq {
            for op in q.drain(..) {
                match op {
                    OutOp::Stream { sreq, .. } => streams.push(sreq),
                    OutOp::Packet { .. } => dropped += 1,
                }
            }
        }
        tracing::debug!(rank, dropped, streams = streams.len(), replay = replay.redeliver.len(), loopback = self.st.loopback.len(), "restored: queued packets dropped");
        self.st.busy_peers.clear();
        for sreq in streams {
            self.st.complete_send(sreq);
        }
        for (hdr, _) in &mut self.st.loopback {
            hdr[2..4].copy_from_slice(&incarnation.to_le_bytes());
        }
        self.coord_send()?;
        self.coord_wait(|ev| matches!(ev, Event::Resume { .. }))?;
        for rec in replay.redeliver {
            let (Some(raw), Some(payload)) = (rec.bytes.get(..HDR_LEN), rec.bytes.get(HDR_LEN..)) else { continue };
            let Ok(raw) = <RawHeader>::try_from(raw) else { continue };
            if let Some(h) = Header::decode(&raw) {
                self.st.handle_packet(rec.from.world, &h, payload);
            }
        }
        tracing::debug!(rank, wave, incarnation, "restored");
        Ok(())
    }

    /// Block on the launcher link until the machine produces an event `want` accepts
    /// (others are acted on on the way).
    fn coord_wait(&mut self, want: impl Fn(&Event) -> bool) -> MpiResult<Event> {
        loop {
            let ev = {
                let Some(s) = shared(&mut self.st.door) else { return Err(other("not enabled")) };
                s.events.pop_front()
            };
            match ev {
                Some(ev) if want(&ev) => return Ok(ev),
                Some(ev) => self.coord_event(ev),
                None => {
                    let Some(boot) = self.boot.as_mut() else { return Err(other("no launcher link")) };
                    let evs = boot.poll_events();
                    if evs.is_empty() {
                        std::thread::sleep(Duration::from_millis(1));
                        continue;
                    }
                    let Some(s) = shared(&mut self.st.door) else { return Err(other("not enabled")) };
                    for ev in evs {
                        match ev {
                            steadfast_runtime::LauncherEvent::Recovery { bytes } => {
                                let _ = s.machine.handle_bytes(Peer::Scheduler, &bytes);
                            }
                            steadfast_runtime::LauncherEvent::Disconnected => {
                                return Err(other("the launcher went away during a rollback"));
                            }
                            _ => {}
                        }
                    }
                    s.pull_events();
                }
            }
        }
    }

    /// `MPIX_Checkpoint`: ask the scheduler for a wave now and return once this rank took
    /// its cut of it (or, in a process restored from that cut, once restored).
    pub fn request_checkpoint(&mut self) -> MpiResult<()> {
        if self.coord.is_none() && self.mlog.is_some() {
            return self.mlog_request_image();
        }
        let Some(c) = self.coord.as_ref() else {
            return Err(MpiError::new(ErrorClass::Unsupported, "MPIX_Checkpoint needs mpiexec --ft coordinated, pessimistic or causal"));
        };
        let (images, restores) = (c.images, c.restores);
        self.boot.as_mut().ok_or_else(|| other("no launcher link"))?.checkpoint_now().map_err(other)?;
        self.block_until(|e| e.coord.as_ref().is_none_or(|c| c.images > images || c.restores > restores))
    }
}
