//! Process images of single ranks in the message-logging modes (MPICH-V2 and Vcausal's
//! uncoordinated checkpoints): a rank takes an image of itself when the launcher's
//! checkpoint scheduler asks (or the program calls `MPIX_Checkpoint`), with no other rank
//! taking part. When it fails later, its new process is restored from the image and
//! replays only the events after it; the senders free their logs of every message the
//! image holds. Design and limits: `docs/recovery.md`.
//!
//! The order that keeps this safe:
//!
//! 1. The image is taken only when every event of the rank is stored by the event logger
//!    (a restored process fetches the events after the image, so none before it may be
//!    missing) and no replay is under way.
//! 2. The launcher takes in the output written so far (the restored process writes again
//!    only what came after).
//! 3. Once the image is complete, the rank reports it; the launcher confirms it will restore
//!    this image (`ImageKept`), and only then are the senders told to free their logs up to
//!    what the image holds. A failure before the confirmation restores the previous image,
//!    whose messages are all still logged.

use std::path::{Path as FsPath, PathBuf};
use std::time::Instant;

use steadfast_logging::{Peer as PeerMsg, ToLogger};

use super::coordinated::{refresh_environment, reopen_files, saved_files, skipped_mappings, SavedFile};
use super::logging::Hook;
use super::{Engine, Reconnect};
use crate::error::{ErrorClass, MpiError, MpiResult};
use crate::wire::Kind;

/// An image being written by the checkpoint's child.
struct Writing {
    number: u64,
    /// This rank's events the image holds.
    clock: u64,
    /// Per sender: its messages `1..=upto` are all in the image.
    upto: Vec<u64>,
    /// Channel memory: the frames of this rank's stream the image's process had taken.
    stream_at: Option<u64>,
    pending: steadfast_ckpt::Pending,
    started: Instant,
}

/// The engine's side of single-rank images in the logging modes.
pub struct Images {
    /// Where images go: `rank-R.img-N`.
    dir: PathBuf,
    /// The job directory (its shared mappings are left out of images).
    jobdir: PathBuf,
    reconnect: Reconnect,
    /// Number of the newest image taken by this rank (also across restores).
    number: u64,
    /// An image is wanted.
    due: bool,
    writing: Option<Writing>,
    /// Reported to the launcher, not yet confirmed: (number, per-sender `upto`, stream
    /// position).
    reported: Option<(u64, Vec<u64>, Option<u64>)>,
    files: Vec<SavedFile>,
    /// Images completed, and restores from one (for `MPIX_Checkpoint` and statistics).
    pub taken: u64,
    pub restores: u64,
    /// No image can ever be taken of this process (its own threads, or randomization).
    refused: Option<String>,
}

impl Images {
    pub fn new(dir: PathBuf, jobdir: PathBuf, reconnect: Reconnect) -> Images {
        Images { dir, jobdir, reconnect, number: 0, due: false, writing: None, reported: None, files: Vec::new(), taken: 0, restores: 0, refused: None }
    }

    /// An image is wanted or being written: the engine looks at it every round.
    pub fn due_now(&self) -> bool {
        self.due || self.writing.is_some()
    }

    fn image_path(&self, rank: u32, number: u64) -> PathBuf {
        self.dir.join(format!("rank-{rank}.img-{number}"))
    }

    /// The directory of images (the spill file of the log goes there too, so that a
    /// restored process finds it).
    pub fn dir(&self) -> &FsPath {
        &self.dir
    }
}

fn other(msg: impl std::fmt::Display) -> MpiError {
    MpiError::new(ErrorClass::Other, format!("message logging: process image: {msg}"))
}

impl Engine {
    fn images_mut(&mut self) -> Option<&mut Images> {
        self.mlog.as_mut().and_then(|m| m.images.as_mut())
    }

    /// The checkpoint scheduler asks for an image.
    pub(super) fn mlog_image_wanted(&mut self) {
        let rank = self.rank;
        match self.images_mut() {
            Some(im) => im.due = true,
            None => tracing::warn!(rank, "asked for a process image, but images are off in this job"),
        }
    }

    /// No replay, fetch or reconnection under way, and nothing held back: this process's
    /// state is its own and can be saved.
    fn mlog_image_safe(&self) -> bool {
        let Some(h) = self.st.door.hook_ref::<Hook>() else { return false };
        // Channel memory: no sender-based log can send again what was still on its way to
        // a channel memory when the image was taken, so nothing may be.
        let flushed = !self.st.channel_memory || (self.st.busy_peers.is_empty() && self.net.as_ref().is_none_or(|n| n.backlog() == 0));
        h.quiet() && self.st.rejoined.is_empty() && flushed
    }

    /// A progress round's share: finish an image being written, take one that is due.
    /// Returns whether the event logger's acknowledgement is awaited for an image.
    pub(super) fn mlog_images_step(&mut self) -> MpiResult<bool> {
        let rank = self.rank;
        let incarnation = self.st.door.incarnation;
        let Some(im) = self.images_mut() else { return Ok(false) };
        if let Some(w) = im.writing.as_mut() {
            let report = match w.pending.try_wait() {
                Ok(None) => None,
                Ok(Some(stats)) => {
                    let Some(w) = im.writing.take() else { return Ok(false) };
                    tracing::info!(rank, number = w.number, bytes = stats.bytes, secs = w.started.elapsed().as_secs_f64(), "process image stored");
                    im.taken += 1;
                    let msg = ToLogger::Checkpointed { incarnation, number: w.number, clock: w.clock };
                    im.reported = Some((w.number, w.upto, w.stream_at));
                    Some(msg)
                }
                Err(e) => {
                    let number = w.number;
                    im.writing = None;
                    eprintln!("steadfast: rank {rank}: process image {number}: {e}");
                    None
                }
            };
            if let (Some(msg), Some(b)) = (report, self.boot.as_mut()) {
                b.send_recovery(&msg.encode()).map_err(other)?;
            }
            return Ok(false);
        }
        if !im.due || im.reported.is_some() || im.refused.is_some() {
            return Ok(false);
        }
        if !self.mlog_image_safe() {
            return Ok(false);
        }
        let stored = self.st.door.hook_ref::<Hook>().is_some_and(|h| h.all_stored());
        if !stored {
            // The step ships the batch; wait for the acknowledgement.
            return Ok(true);
        }
        self.mlog_take_image()?;
        Ok(false)
    }

    /// Take this rank's image now (it continues here twice: in this process, and in a
    /// process restored from the image).
    fn mlog_take_image(&mut self) -> MpiResult<()> {
        let rank = self.rank;
        let clock = self.st.door.hook_ref::<Hook>().map_or(0, |h| h.clock());
        let upto = self.mlog_image_holds();
        let stream_at = self.net.as_ref().and_then(|n| n.stream_position());
        let Some(im) = self.images_mut() else { return Ok(()) };
        im.due = false;
        let number = im.number + 1;
        let path = im.image_path(rank, number);
        // A file of that number can only be the unfinished image of a process that died.
        let _ = std::fs::remove_file(&path);
        if let Some(b) = self.boot.as_mut() {
            // The launcher takes in what this process wrote before the image.
            b.output_mark(number).map_err(other)?;
        }
        let Some(im) = self.images_mut() else { return Ok(()) };
        let skip = [im.jobdir.as_path(), im.dir.as_path(), FsPath::new("/dev/shm")];
        im.files = saved_files(&skip);
        im.number = number;
        let opts = steadfast_ckpt::Options { ignore_threads: Vec::new(), skip_ranges: skipped_mappings(&im.jobdir) };
        let started = Instant::now();
        let outcome = steadfast_ckpt::checkpoint(&path, &opts);
        if let Ok(steadfast_ckpt::Outcome::Restored) = outcome {
            return self.mlog_after_restore(number, clock);
        }
        let Some(im) = self.images_mut() else { return Ok(()) };
        match outcome {
            Ok(steadfast_ckpt::Outcome::Restored) => Ok(()),
            Ok(steadfast_ckpt::Outcome::Checkpointed(pending)) => {
                im.writing = Some(Writing { number, clock, upto, stream_at, pending, started });
                Ok(())
            }
            Err(e) => {
                im.number = number - 1;
                if matches!(e, steadfast_ckpt::Error::Threads { .. } | steadfast_ckpt::Error::Randomized) {
                    let why = e.to_string();
                    eprintln!("steadfast: rank {rank}: no process image can be taken of this process ({why}); a failure re-executes it from the start");
                    im.refused = Some(why);
                } else {
                    eprintln!("steadfast: rank {rank}: process image {number}: {e}");
                }
                Ok(())
            }
        }
    }

    /// Per sender: the highest sequence number up to which an image taken now holds every
    /// message of it. A message whose head arrived is held only if its data did too: a
    /// rendezvous still announced (unexpected, or probed with `MPI_Mprobe`) or still
    /// streaming is not, and nor is anything after it.
    fn mlog_image_holds(&self) -> Vec<u64> {
        let mut upto: Vec<u64> = self.st.admitted.iter().map(|a| a.upto()).collect();
        let mut incomplete = |w: u32, seq: u64| {
            if let Some(u) = upto.get_mut(w as usize) {
                *u = (*u).min(seq.saturating_sub(1));
            }
        };
        for u in self.st.matcher.unexpected_all() {
            if let super::Body::Rts { from, .. } = &u.msg {
                incomplete(from.world, from.seq);
            }
        }
        for h in self.messages.handles() {
            if let Some(super::ProbedMessage { body: super::Body::Rts { from, .. }, .. }) = self.messages.get(h) {
                incomplete(from.world, from.seq);
            }
        }
        for h in self.st.reqs.handles() {
            let Some(r) = self.st.reqs.get(h) else { continue };
            if let (false, Some(w)) = (r.complete, r.recv.peer.get()) {
                if r.recv.expected > 0 {
                    incomplete(w, r.recv.seq);
                }
            }
        }
        upto
    }

    /// The launcher will restore image `number`: tell the senders to free their logs of
    /// what it holds.
    pub(super) fn mlog_image_kept(&mut self, number: u64) -> MpiResult<()> {
        let me = self.rank;
        let Some(im) = self.images_mut() else { return Ok(()) };
        let Some((n, upto, stream_at)) = im.reported.take_if(|(n, _, _)| *n == number) else { return Ok(()) };
        if self.st.channel_memory {
            // No sender keeps a log in this mode; the channel memory drops the part of this
            // rank's stream the image holds (no older image is ever restored).
            if let (Some(at), Some(net)) = (stream_at, self.net.as_mut()) {
                net.release_stream(at).map_err(|e| MpiError::new(ErrorClass::Other, e.to_string()))?;
            }
            return Ok(());
        }
        tracing::debug!(rank = me, number = n, "image kept by the launcher; senders free their logs");
        for (w, upto) in upto.into_iter().enumerate() {
            let w = w as u32;
            if w == me || upto == 0 {
                continue;
            }
            let bytes = PeerMsg::Checkpointed { upto }.encode();
            let hdr = self.st.door.control(Kind::Recovery, 0, 0, 0, bytes.len() as u64, 0, 0);
            self.emit(w, hdr, &bytes)?;
        }
        Ok(())
    }

    /// Back from image `number` (which holds events `1..=clock`) in a new process: rebuild
    /// what lives in the kernel, rejoin the job as the new incarnation, and recover like a
    /// restarted rank, from the image on.
    fn mlog_after_restore(&mut self, number: u64, clock: u64) -> MpiResult<()> {
        // Channel memory: the stream goes on after the frames the image's process took.
        let stream_from = self.net.as_ref().and_then(|n| n.stream_position()).unwrap_or(0);
        // The image's descriptors, mappings and child are gone: forget, never close, them.
        std::mem::forget(self.net.take());
        std::mem::forget(self.boot.take());
        refresh_environment();
        let rank = self.rank;
        let Some(im) = self.images_mut() else { return Ok(()) };
        if let Some(w) = im.writing.take() {
            std::mem::forget(w);
        }
        im.reported = None;
        im.due = false;
        im.restores += 1;
        let files = std::mem::take(&mut im.files);
        reopen_files(&files);
        let (job, mut boot) = (im.reconnect)()?;
        if let Some(m) = self.mlog.as_mut() {
            m.reopen_spill().map_err(|e| other(format!("reopening the log's spill file: {e}")))?;
        }
        let built = super::build_net(&job, boot.as_mut(), &self.cfg, stream_from)?;
        for w in 0..self.size as usize {
            if let Some(p) = self.st.pids.get_mut(w) {
                *p = built.pids[w];
            }
            if let Some(ok) = self.st.cma_ok.get_mut(w) {
                *ok = *ok && built.shm_peer[w];
            }
        }
        if let Some(p) = self.st.pids.get_mut(rank as usize) {
            *p = std::process::id();
        }
        self.chunk = self.chunk.min(built.net.max_payload());
        self.eager_limit = self.eager_limit.min(self.chunk);
        self.room_eager = self.room_eager.min(self.chunk);
        self.net = Some(built.net);
        // Our addresses are published: the others may reconnect now.
        boot.rejoin().map_err(|e| other(format!("rejoining the job: {e}")))?;
        self.boot = Some(boot);
        let incarnation = job.incarnation;
        self.st.door.restored_as(incarnation);
        if self.st.channel_memory {
            // The rest of the stream is what the image's process would have read next:
            // nothing to end with the others, nothing to send again, and its own earlier
            // messages to itself come as they came.
            self.st.door.admit_own_history();
            tracing::info!(rank, number, clock, incarnation, stream_from, "restored from a process image");
            eprintln!("steadfast: rank {rank}: restored from its process image {number} (incarnation {incarnation}); reading its stream on from message {stream_from}");
            return self.mlog_begin_recovery(incarnation, clock);
        }
        for (hdr, _) in &mut self.st.loopback {
            hdr[2..4].copy_from_slice(&incarnation.to_le_bytes());
        }
        // Whatever was under way with the other processes ends as with a restarted peer:
        // our sends complete (their data is in our log, sent again below), a receive whose
        // data was coming waits for the message to be announced again.
        self.st.rejoined.clear();
        for w in (0..self.size).filter(|&w| w != rank) {
            self.st.mlog_forget_process(w);
        }
        // A rendezvous announced before the image and not matched yet names a send request
        // of the sender's earlier state: the sender announces it again from its log (the
        // image never let it free that message). Taken out of matching and forgotten, the
        // new announcement comes in through the replay gate at its logged turn.
        let mut stale = Vec::new();
        for u in self.st.matcher.unexpected_all() {
            if let super::Body::Rts { from, .. } = &u.msg {
                if from.world != rank {
                    stale.push((from.world, from.seq));
                }
            }
        }
        if !stale.is_empty() {
            self.st.matcher.remove_unexpected_all(|u| matches!(&u.msg, super::Body::Rts { from, .. } if from.world != rank));
            for (w, seq) in &stale {
                if let Some(a) = self.st.admitted.get_mut(*w as usize) {
                    a.forget(*seq);
                }
            }
            tracing::debug!(rank, ?stale, "announcements of the image dropped; their senders announce them again");
        }
        tracing::info!(rank, number, clock, incarnation, "restored from a process image");
        eprintln!("steadfast: rank {rank}: restored from its process image {number} (incarnation {incarnation}); replaying the receptions after it");
        // A message of ours may have been on its way when the earlier process died: every
        // logged message goes again; receivers drop what they have.
        for w in (0..self.size).filter(|&w| w != rank) {
            self.mlog_peer_rejoined(w)?;
        }
        self.mlog_begin_recovery(incarnation, clock)
    }

    /// `MPIX_Checkpoint` in the logging modes: an image of this rank now; returns once it is
    /// written (or, in a process restored from it, once restored).
    pub(super) fn mlog_request_image(&mut self) -> MpiResult<()> {
        let Some(im) = self.images_mut() else {
            return Err(MpiError::new(ErrorClass::Unsupported, "MPIX_Checkpoint with message logging needs images: give mpiexec --ckpt-interval"));
        };
        if let Some(why) = &im.refused {
            return Err(MpiError::new(ErrorClass::Unsupported, format!("no process image can be taken of this process: {why}")));
        }
        im.due = true;
        let (taken, restores) = (im.taken, im.restores);
        self.block_until(|e| {
            e.mlog.as_ref().and_then(|m| m.images.as_ref()).is_none_or(|im| im.taken > taken || im.restores > restores || im.refused.is_some())
        })
    }
}
