//! The launcher in the message-logging modes (`--ft pessimistic`, `--ft causal`): it hosts
//! the event logger of `steadfast-logging` (determinants from the ranks' control
//! connections, journals under the job's log directory, acknowledgements back), starts a
//! failed rank again (the relaunch policy) while the others run, and forwards the new
//! process's output only past what the earlier processes of that rank forwarded (a
//! re-execution writes the same bytes again).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;

use steadfast_logging::{EventLogger, ToLogger};

use super::output::{LineBuffer, OutPos, StreamKind};
use super::Launcher;
use crate::event::LauncherEvent;
use crate::wire::ServerMsg;

/// The launcher's message-logging state.
pub(super) struct Logging {
    logger: EventLogger,
    /// Journals of the event logger (`rank-R.events`).
    pub(super) dir: PathBuf,
    /// Remove `dir` when the job ends well (it was not chosen by the user).
    temporary: bool,
    journals: Vec<Option<File>>,
    /// [rank][stream] output positions.
    out: Vec<[OutPos; 2]>,
    /// Partial last lines of processes that ended, continued by the rank's next process.
    pub(super) carry: Vec<[Option<LineBuffer>; 2]>,
}

impl Logging {
    pub(super) fn new(np: u32, dir: Option<PathBuf>, jobid: &str) -> std::io::Result<Logging> {
        let (dir, temporary) = match dir {
            Some(d) => (d, false),
            None => (std::env::temp_dir().join(format!("steadfast-log-{jobid}")), true),
        };
        std::fs::create_dir_all(&dir)?;
        Ok(Logging {
            logger: EventLogger::new(np),
            dir,
            temporary,
            journals: (0..np).map(|_| None).collect(),
            out: vec![[OutPos::default(); 2]; np as usize],
            carry: (0..np).map(|_| [None, None]).collect(),
        })
    }

    /// Of `data` just read from rank `rank`'s `kind` stream, the part not forwarded before.
    pub(super) fn fresh<'a>(&mut self, rank: usize, kind: StreamKind, data: &'a [u8]) -> &'a [u8] {
        match self.out.get_mut(rank) {
            Some(o) => o[kind as usize].fresh(data),
            None => data,
        }
    }

    /// Append a batch to rank `rank`'s journal. The page cache is enough to survive the
    /// launcher's own death; a synced journal (durable against a crash of the host) would
    /// cost a disk flush per batch on the message path.
    fn persist(&mut self, rank: u32, first: u64, events: &[steadfast_logging::Event]) -> std::io::Result<()> {
        let slot = self.journals.get_mut(rank as usize).ok_or_else(|| std::io::Error::other("no such rank"))?;
        if slot.is_none() {
            let path = self.dir.join(format!("rank-{rank}.events"));
            *slot = Some(OpenOptions::new().create(true).append(true).open(path)?);
        }
        let record = steadfast_logging::logger::journal::record(first, events);
        slot.as_mut().map_or(Ok(()), |f| f.write_all(&record))
    }
}

impl Launcher {
    /// A message from rank `rank` to the event logger.
    pub(super) fn mlog_recovery(&mut self, rank: u32, bytes: &[u8]) {
        let Some(l) = self.mlog.as_mut() else { return };
        let msg = match ToLogger::decode(bytes) {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(rank, error = %e, "malformed message for the event logger");
                return;
            }
        };
        l.logger.handle(rank, msg);
        let mut stored = Vec::new();
        while let Some((r, first, events)) = l.logger.poll_persist() {
            let upto = first + events.len() as u64 - 1;
            let events = events.to_vec();
            match l.persist(r, first, &events) {
                Ok(()) => stored.push((r, upto)),
                // Not acknowledged: a pessimistic rank then waits, and the job is told why.
                Err(e) => tracing::error!(rank = r, error = %e, "cannot write the event journal"),
            }
        }
        for (r, upto) in stored {
            l.logger.stored(r, upto);
        }
        while let Some(t) = l.logger.poll_transmit() {
            self.core.send_to(t.to, ServerMsg::Event(LauncherEvent::Recovery { bytes: t.message.encode() }));
        }
        self.pump_core();
    }

    /// Rank `idx` is about to be started again: its new process writes its output again
    /// from the beginning.
    pub(super) fn mlog_restarting(&mut self, idx: usize) {
        // What the ended process's pipes still hold is its output, not the new one's.
        self.pipe_readable(idx, StreamKind::Stdout);
        self.pipe_readable(idx, StreamKind::Stderr);
        if let Some(o) = self.mlog.as_mut().and_then(|l| l.out.get_mut(idx)) {
            o.iter_mut().for_each(|p| p.restart(0));
        }
    }

    /// The job ended: flush carried partial lines, remove a temporary log directory.
    pub(super) fn mlog_finish(&mut self, ok: bool) {
        let Some(l) = self.mlog.as_mut() else { return };
        let carry = std::mem::take(&mut l.carry);
        let (dir, temporary) = (l.dir.clone(), l.temporary);
        let stats = l.logger.stats;
        tracing::debug!(?stats, "event logger");
        self.flush_carried(carry);
        if ok && temporary {
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}
