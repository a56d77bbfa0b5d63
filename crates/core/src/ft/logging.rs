//! Message logging in the engine (`--ft pessimistic`, `--ft causal`; MPICH-V2 and
//! MPICH-Vcausal): when a rank dies only that rank is started again; it re-executes from
//! the beginning and receives, in the logged order, the messages it had received, while
//! the others go on. Design and limits: `docs/recovery.md`.
//!
//! The parts, and where they live:
//!
//! - **Determinants** are made by the door (`Door::matched`, `Door::completed*`) and go to
//!   the `steadfast-logging` rank log in the door's hook ([`Hook`]), which numbers them
//!   and ships them to the event logger (a part of the launcher) over the control link.
//! - **Pessimistic**: while an event is not acknowledged by the event logger nothing
//!   leaves this process (every packet waits in its peer's output queue), so no other
//!   process ever depends on an event that could be lost.
//! - **Causal**: packets leave at once; the determinants not known stable travel in a
//!   `Recovery` packet in front of each message, minus what its destination is known to
//!   hold.
//! - **Sender-based payload log** ([`MsgLog::sent`]): a copy of every message this process
//!   sent, by destination and sequence number. When a rank comes back, every message it
//!   was ever sent is sent to it again from here (a send of ours that was still under way
//!   completes: its data is in the log).
//! - **Duplicates**: a rank that re-executes sends its messages again with the same
//!   sequence numbers; a receiver that already has one drops it (an `Rts` is answered with
//!   FIN, so the re-executing sender's request completes). A rendezvous whose data was
//!   still coming from the failed process waits for the new process's `Rts` and asks it for
//!   the data again.
//! - **Replay**: a restarted rank fetches its events from the event logger and holds back
//!   every arriving message until its rank log says which one may be matched next.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use steadfast_logging::{Divergence, Event, Forced, FromLogger, Mode, Peer as PeerMsg, RankLog};
use steadfast_paths::RawHeader;

use super::{Engine, OutOp, Sink};
use crate::door::{Completion, CompletionCall, Determinant, Door, Interpose};
use crate::error::{ErrorClass, MpiError, MpiResult};
use crate::request::{Mode as SendMode, Op, Request, SendSpec, Sent};
use crate::wire::{Header, Kind};

/// One message in the sender-based log.
struct Logged {
    ctx: u32,
    src: i32,
    tag: i32,
    /// Sent as a rendezvous (`Rts`): sent again the same way, so that a synchronous send
    /// is matched before the receiver lets it complete.
    rts: bool,
    data: Payload,
}

/// Where a logged message's bytes are.
enum Payload {
    Memory(Vec<u8>),
    /// In the spill file: offset and length.
    Spilled(u64, usize),
}

/// The part of the sender-based log past the memory bound: an unlinked file of this
/// process (it goes when the process does), appended to in sending order.
struct Spill {
    file: std::fs::File,
    len: u64,
    /// With process images the file is named (`rank-R.spill` next to the images): a process
    /// restored from an image opens it again and finds the bytes its log points to.
    path: Option<PathBuf>,
}

impl Spill {
    fn open(named: Option<PathBuf>) -> std::io::Result<Spill> {
        if let Some(path) = named {
            // What a dead process of this rank left there past the image is overwritten.
            let file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path)?;
            return Ok(Spill { file, len: 0, path: Some(path) });
        }
        let dir = std::env::temp_dir();
        let path = dir.join(format!("steadfast-mlog-{}-{:x}", std::process::id(), std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos())));
        let file = std::fs::OpenOptions::new().read(true).write(true).create_new(true).open(&path)?;
        let _ = std::fs::remove_file(&path);
        Ok(Spill { file, len: 0, path: None })
    }

    fn put(&mut self, data: &[u8]) -> std::io::Result<u64> {
        use std::os::unix::fs::FileExt;
        let at = self.len;
        self.file.write_all_at(data, at)?;
        self.len += data.len() as u64;
        Ok(at)
    }

    fn get(&self, at: u64, len: usize) -> std::io::Result<Vec<u8>> {
        use std::os::unix::fs::FileExt;
        let mut v = vec![0u8; len];
        self.file.read_exact_at(&mut v, at)?;
        Ok(v)
    }
}

/// The door's hook in logging modes: the rank log and the replay gate.
pub(super) struct Hook {
    log: RankLog,
    /// Message heads held back while this process's events are fetched or replayed:
    /// (sender, header, payload), in arrival order.
    held: Vec<(u32, RawHeader, Vec<u8>)>,
    /// The engine is releasing a held packet: let it through.
    passing: bool,
    /// A restarted process waits for its events before anything may be matched.
    fetching: bool,
    /// Causal: `Held` answers still expected before the replay may start.
    gathering: u32,
    /// Causal: ranks that asked for the determinants held here.
    gather_from: Vec<u32>,
    diverged: Option<Divergence>,
    /// A restarted process: when its replay began and how many events it had, reported
    /// when it ends.
    replay_started: Option<(std::time::Instant, usize)>,
    /// Receivers whose image holds our messages to them up to a sequence number.
    freed: Vec<(u32, u64)>,
    /// The message the replay waits for (traced once).
    waiting_for: Option<(u32, u64)>,
}

impl Interpose for Hook {
    fn as_any(&mut self) -> Option<&mut dyn std::any::Any> {
        Some(self)
    }

    fn as_any_ref(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }

    fn arrived(&mut self, from: u32, hdr: &Header, payload: &[u8]) -> bool {
        match hdr.kind {
            Kind::Recovery => {
                match PeerMsg::decode(payload) {
                    Ok(PeerMsg::Piggyback { dets }) => self.log.piggybacked_from(from, dets),
                    Ok(PeerMsg::Gather) => self.gather_from.push(from),
                    Ok(PeerMsg::Held { dets }) => {
                        self.log.held_by_others(dets);
                        self.gathering = self.gathering.saturating_sub(1);
                    }
                    Ok(PeerMsg::Checkpointed { upto }) => self.freed.push((from, upto)),
                    Err(e) => tracing::warn!(from, error = %e, "malformed message-logging packet dropped"),
                }
                false
            }
            // Held while the replay runs, and after it until what was held is released (so
            // that no later packet overtakes them).
            // Channel memory: nothing is held; the stream's order is the logged order.
            Kind::Eager | Kind::Rts
                if self.log.mode() != Mode::ChannelMemory && !self.passing && (self.fetching || self.gathering > 0 || self.log.replaying() || !self.held.is_empty()) =>
            {
                self.held.push((from, hdr.encode(), payload.to_vec()));
                false
            }
            _ => true,
        }
    }

    fn matched(&mut self, det: &Determinant) {
        self.record(Event::Match { from: det.from.world, seq: det.from.seq });
    }

    fn completed(&mut self, c: &Completion) {
        let indices = c.indices.iter().map(|&i| i as u32).collect();
        let probed = c.probed.map(|i| (i.world, i.seq));
        self.record(Event::Choice { call: c.call.code(), indices, failed_before: c.failed_before, probed });
    }

    fn rejoined(&mut self, world: u32, _incarnation: u16) {
        self.log.peer_restarted(world);
    }
}

impl Hook {
    fn record(&mut self, e: Event) {
        if let Err(d) = self.log.record(e) {
            self.diverged.get_or_insert(d);
        }
    }

    /// No fetch, gathering or replay under way and nothing held back.
    pub(super) fn quiet(&self) -> bool {
        !self.fetching && self.gathering == 0 && !self.log.replaying() && self.held.is_empty() && !self.passing
    }

    /// Every event of this process is stored by the event logger.
    pub(super) fn all_stored(&self) -> bool {
        self.log.acked() >= self.log.clock()
    }

    /// Events of this process so far.
    pub(super) fn clock(&self) -> u64 {
        self.log.clock()
    }
}

pub(super) fn hook(door: &mut Door) -> Option<&mut Hook> {
    door.hook_mut::<Hook>()
}

/// Per sender: which of its messages were taken in (sequence numbers `1..=upto`, and
/// `above` past a gap: a replay releases messages out of their senders' order).
#[derive(Debug, Default, Clone)]
pub(crate) struct Admitted {
    upto: u64,
    above: BTreeSet<u64>,
}

impl Admitted {
    /// Every message up to this sequence number was taken in.
    pub(crate) fn upto(&self) -> u64 {
        self.upto
    }

    /// Forget that message `seq` was taken in (it is taken in again when it comes again).
    pub(crate) fn forget(&mut self, seq: u64) {
        if seq == 0 {
            return;
        }
        if seq <= self.upto {
            self.above.extend(seq + 1..=self.upto);
            self.upto = seq - 1;
        } else {
            self.above.remove(&seq);
        }
    }

    /// Whether message `seq` was taken in.
    pub(crate) fn contains(&self, seq: u64) -> bool {
        seq <= self.upto || self.above.contains(&seq)
    }

    /// Note message `seq`; false if it was taken in already (a duplicate).
    pub(crate) fn admit(&mut self, seq: u64) -> bool {
        if seq <= self.upto || !self.above.insert(seq) {
            return false;
        }
        while self.above.remove(&(self.upto + 1)) {
            self.upto += 1;
        }
        true
    }
}

/// The engine's side of message logging.
pub struct MsgLog {
    mode: Mode,
    rank: u32,
    /// The sender-based log: per destination, sequence number → message.
    sent: Vec<BTreeMap<u64, Logged>>,
    /// Bytes of payload in [`MsgLog::sent`] (in memory and spilled).
    pub bytes: usize,
    /// Of those, per destination (what an image of that rank would free here).
    bytes_to: Vec<u64>,
    /// Of those, in memory; past `memory_bound` the oldest go to the spill file.
    in_memory: usize,
    memory_bound: usize,
    spill: Option<Spill>,
    /// Messages whose bytes went to the spill file, oldest first: (destination, sequence).
    spill_order: std::collections::VecDeque<(u32, u64)>,
    pub spilled: usize,
    polls: u32,
    /// Messages sent again to restarted ranks.
    pub resent: u64,
    /// Messages freed because their receiver's image holds them.
    pub freed: u64,
    /// Process images of this rank (`--ckpt-interval` in these modes).
    pub(super) images: Option<super::logging_images::Images>,
}

impl MsgLog {
    /// Log message `hdr` with `data`; past the memory bound the oldest logged bytes go to
    /// the spill file.
    fn keep(&mut self, peer: u32, hdr: &Header, data: &[u8]) -> MpiResult<()> {
        self.bytes += data.len();
        if let Some(b) = self.bytes_to.get_mut(peer as usize) {
            *b += data.len() as u64;
        }
        self.in_memory += data.len();
        if let Some(q) = self.sent.get_mut(peer as usize) {
            q.insert(hdr.a, Logged { ctx: hdr.ctx, src: hdr.src, tag: hdr.tag, rts: hdr.kind == Kind::Rts, data: Payload::Memory(data.to_vec()) });
            self.spill_order.push_back((peer, hdr.a));
        }
        while self.in_memory > self.memory_bound {
            let Some((to, seq)) = self.spill_order.pop_front() else { break };
            let Some(l) = self.sent.get_mut(to as usize).and_then(|q| q.get_mut(&seq)) else { continue };
            let Payload::Memory(v) = &l.data else { continue };
            if self.spill.is_none() {
                let named = self.images.as_ref().map(|im| im.dir().join(format!("rank-{}.spill", self.rank)));
                self.spill = Some(Spill::open(named).map_err(|e| other(format!("cannot open a file for the log past STEADFAST_MLOG_MEMORY_MB: {e}")))?);
            }
            let Some(s) = self.spill.as_mut() else { break };
            let at = s.put(v).map_err(|e| other(format!("cannot write the log past STEADFAST_MLOG_MEMORY_MB: {e}")))?;
            let n = v.len();
            l.data = Payload::Spilled(at, n);
            self.in_memory -= n;
            self.spilled += n;
        }
        Ok(())
    }

    /// Receiver `to`'s image holds our messages to it up to `upto`: they are never needed
    /// again.
    fn free(&mut self, to: u32, upto: u64) {
        let Some(q) = self.sent.get_mut(to as usize) else { return };
        while let Some(e) = q.first_entry() {
            if *e.key() > upto {
                break;
            }
            let l = e.remove();
            let n = match l.data {
                Payload::Memory(v) => {
                    self.in_memory -= v.len();
                    v.len()
                }
                Payload::Spilled(_, n) => n,
            };
            self.bytes -= n;
            if let Some(b) = self.bytes_to.get_mut(to as usize) {
                *b = b.saturating_sub(n as u64);
            }
            self.freed += 1;
        }
        // `spill_order` keeps the freed messages' places; they are skipped when reached.
    }

    /// In a process restored from an image: the spill file's descriptor is gone; open the
    /// file again by its name.
    pub(super) fn reopen_spill(&mut self) -> std::io::Result<()> {
        let Some(s) = self.spill.as_mut() else { return Ok(()) };
        let Some(path) = s.path.clone() else { return Err(std::io::Error::other("the spill file has no name")) };
        let file = std::fs::OpenOptions::new().read(true).write(true).open(&path)?;
        std::mem::forget(std::mem::replace(&mut s.file, file));
        Ok(())
    }

    /// A logged message's bytes, wherever they are.
    fn bytes_of(&self, p: &Payload) -> std::io::Result<Vec<u8>> {
        match p {
            Payload::Memory(v) => Ok(v.clone()),
            Payload::Spilled(at, len) => self.spill.as_ref().ok_or_else(|| std::io::Error::other("no spill file"))?.get(*at, *len),
        }
    }
}

fn other(msg: impl std::fmt::Display) -> MpiError {
    MpiError::new(ErrorClass::Other, format!("message logging: {msg}"))
}

impl Engine {
    /// Turn message logging on (`--ft pessimistic` / `--ft causal`). A process that is a
    /// restarted rank (incarnation > 0) fetches its events and starts replaying them.
    /// `images`: single-rank process images are taken when asked (`--ckpt-interval`).
    pub fn enable_logging(&mut self, mode: Mode, images: Option<super::logging_images::Images>) -> MpiResult<()> {
        let incarnation = self.st.door.incarnation;
        self.st.door.set_hook(Some(Box::new(Hook {
            log: RankLog::new(mode, self.rank, self.size),
            held: Vec::new(),
            passing: false,
            fetching: false,
            gathering: 0,
            gather_from: Vec::new(),
            diverged: None,
            replay_started: None,
            freed: Vec::new(),
            waiting_for: None,
        })));
        self.st.logging = true;
        self.st.admitted = vec![Admitted::default(); self.size as usize];
        if mode == Mode::ChannelMemory {
            self.st.channel_memory = true;
            self.st.door.admit_own_history();
        }
        let memory_bound = steadfast_config::parse_or("STEADFAST_MLOG_MEMORY_MB", 1024usize, "megabytes") << 20;
        self.mlog = Some(Box::new(MsgLog {
            mode,
            rank: self.rank,
            sent: (0..self.size).map(|_| BTreeMap::new()).collect(),
            bytes: 0,
            bytes_to: vec![0; self.size as usize],
            in_memory: 0,
            memory_bound,
            spill: None,
            spill_order: std::collections::VecDeque::new(),
            spilled: 0,
            polls: 0,
            resent: 0,
            freed: 0,
            images,
        }));
        if incarnation > 0 {
            self.mlog_begin_recovery(incarnation, 0)?;
        }
        Ok(())
    }

    /// This process is rank's incarnation `incarnation`, with its events `1..=clock` (0:
    /// started from the beginning; else restored from an image): fetch the later ones from
    /// the event logger (causal: and from the other ranks) and start replaying them.
    pub(super) fn mlog_begin_recovery(&mut self, incarnation: u16, clock: u64) -> MpiResult<()> {
        let others = self.size.saturating_sub(1);
        let (fetch, gathering) = {
            let Some(h) = hook(&mut self.st.door) else { return Ok(()) };
            let fetch = h.log.restarted(incarnation, clock);
            h.fetching = true;
            h.gathering = if h.log.mode() == Mode::Causal { others } else { 0 };
            h.held.clear();
            h.passing = false;
            h.gather_from.clear();
            h.diverged = None;
            (fetch, h.gathering)
        };
        let boot = self.boot.as_mut().ok_or_else(|| other("no launcher link"))?;
        boot.send_recovery(&fetch.encode()).map_err(other)?;
        if gathering > 0 {
            let bytes = PeerMsg::Gather.encode();
            let me = self.rank;
            for w in (0..self.size).filter(|&w| w != me) {
                let hdr = self.st.door.control(Kind::Recovery, 0, 0, 0, bytes.len() as u64, 0, 0);
                self.emit(w, hdr, &bytes)?;
            }
        }
        // Other ranks may be dead as well and never answer: their determinants of ours
        // are lost with them, and what the logger has must do.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        self.block_until(|e| {
            let Some(h) = e.st.door.hook_ref::<Hook>() else { return true };
            !h.fetching && (h.gathering == 0 || std::time::Instant::now() >= deadline)
        })?;
        if let Some(h) = hook(&mut self.st.door) {
            h.gathering = 0;
            h.log.close_gather();
            h.replay_started = Some((std::time::Instant::now(), h.log.replay_left()));
            tracing::info!(rank = self.rank, incarnation, events = h.log.replay_left(), held = h.held.len(), "restarted: replaying");
        }
        Ok(())
    }

    /// What this process waits for (traced at debug level when a blocking call makes no
    /// progress for seconds): the replay's next event, the messages held back, the
    /// unfinished requests and the output queues.
    pub(super) fn mlog_trace_stall(&self) {
        let rank = self.rank;
        let (next, held, fetching, gathering) = match self.st.door.hook_ref::<Hook>() {
            Some(h) => (
                h.log.next_to_replay().map(|(e, released)| format!("{e:?} released {released}")),
                h.held.iter().take(16).map(|(f, raw, _)| Header::decode(raw).map_or((*f, 0, 0), |x| (*f, x.a, x.kind as u8))).collect::<Vec<_>>(),
                h.fetching,
                h.gathering,
            ),
            None => return,
        };
        let mut reqs = Vec::new();
        for h in self.st.reqs.handles() {
            let Some(r) = self.st.reqs.get(h) else { continue };
            if r.complete || !r.active {
                continue;
            }
            reqs.push(match &r.op {
                Op::Send(sp) => format!("send to {} tag {} sent {:?}", sp.dest, sp.tag, r.send.sent.map(|s| (s.peer, s.seq, s.rendezvous))),
                Op::Recv(rp) => format!("recv from {} tag {} posted {} peer {:?} seq {} {}/{}", rp.src, rp.tag, r.recv.posted, r.recv.peer.get(), r.recv.seq, r.recv.received, r.recv.expected),
                Op::Null => "null".into(),
            });
        }
        let outq: Vec<usize> = self.st.outq.iter().map(|q| q.len()).collect();
        let awaiting: Vec<(u32, u64)> = self.st.awaiting.keys().copied().collect();
        // Unexpected messages (sender, its sequence number, tag, rendezvous) and how far each
        // sender's messages were taken in.
        let unexpected: Vec<(u32, u64, i32, bool)> = self
            .st
            .matcher
            .unexpected_all()
            .take(16)
            .map(|u| {
                let from = u.msg.from();
                (from.world, from.seq, u.tag, matches!(u.msg, super::Body::Rts { .. }))
            })
            .collect();
        let admitted: Vec<u64> = self.st.admitted.iter().map(|a| a.upto()).collect();
        tracing::debug!(rank, ?next, ?held, fetching, gathering, ?reqs, ?outq, ?awaiting, ?unexpected, ?admitted, "blocked without progress");
    }

    /// Whether message logging is on.
    pub fn logging(&self) -> bool {
        self.mlog.is_some()
    }

    /// Pessimistic: some event is not stable yet, so nothing may leave.
    #[inline]
    pub(super) fn mlog_gate_closed(&self) -> bool {
        self.st.door.hook_ref::<Hook>().is_some_and(|h| !h.log.may_send())
    }

    /// A send call of the application: wait until what it queued behind the closed gate has
    /// left (MPICH-V2's send waiting for the event logger), unless called from inside a
    /// round of progress.
    pub(super) fn mlog_send_now(&mut self) -> MpiResult<()> {
        if self.progress_depth > 0 || !self.mlog_gate_closed() {
            return Ok(());
        }
        self.block_until(|e| !e.mlog_gate_closed())?;
        self.flush()
    }

    /// An answer of the event logger is awaited (an acknowledgement, or a restarted
    /// process's events).
    pub(super) fn mlog_awaits_launcher(&mut self) -> bool {
        hook(&mut self.st.door).is_some_and(|h| h.fetching || !h.log.may_send())
    }

    /// Keep a copy of message `hdr` (with all of its data) for resending it to a rank that
    /// restarts; causal: send the determinants its destination lacks in front of it.
    pub(super) fn mlog_keep(&mut self, peer: u32, hdr: &Header, data: &[u8]) -> MpiResult<()> {
        // Channel memory: the receiver's channel memory keeps it.
        if peer == self.rank || self.st.channel_memory {
            // A restarted process sends these to itself again.
            return Ok(());
        }
        let Some(m) = self.mlog.as_mut() else { return Ok(()) };
        m.keep(peer, hdr, data)?;
        if m.mode == Mode::Causal {
            let dets = hook(&mut self.st.door).map(|h| h.log.piggyback_for(peer)).unwrap_or_default();
            if !dets.is_empty() {
                let bytes = PeerMsg::Piggyback { dets }.encode();
                let h = self.st.door.control(Kind::Recovery, 0, 0, 0, bytes.len() as u64, 0, 0);
                self.emit(peer, h, &bytes)?;
            }
        }
        Ok(())
    }

    /// A progress round's share of message logging.
    pub(super) fn mlog_step(&mut self) -> MpiResult<()> {
        let Some(m) = self.mlog.as_mut() else { return Ok(()) };
        m.polls += 1;
        let poll_now = m.polls >= 256;
        let causal = m.mode == Mode::Causal;
        let image_due = m.images.as_ref().is_some_and(|im| im.due_now());
        let (batch, waiting, gather, diverged, freed) = {
            let Some(h) = hook(&mut self.st.door) else { return Ok(()) };
            // Causal: nothing waits for the logger (the determinants travel with the
            // messages), so events go to it in batches, not one write per event. An image
            // waits for all of them to be stored.
            let ship = !causal || poll_now || h.log.unsent() >= 64 || h.log.replaying() || image_due;
            let batch = if ship { h.log.take_batch() } else { None };
            (batch, !h.log.may_send() || h.fetching, std::mem::take(&mut h.gather_from), h.diverged.take(), std::mem::take(&mut h.freed))
        };
        if let Some(m) = self.mlog.as_mut() {
            for (to, upto) in freed {
                m.free(to, upto);
            }
        }
        if let Some(h) = hook(&mut self.st.door) {
            if !h.log.replaying() {
                if let Some((t, n)) = h.replay_started.take() {
                    let rank = self.rank;
                    tracing::info!(rank, events = n, secs = t.elapsed().as_secs_f64(), "replay done");
                    if steadfast_config::flag("STEADFAST_STATS") == Some(true) {
                        eprintln!("steadfast stats rank {rank}: replayed {n} events in {:.3} s", t.elapsed().as_secs_f64());
                    }
                }
            }
        }
        if let Some(d) = diverged {
            let rank = self.rank;
            self.abort(
                1,
                &format!("rank {rank}: the re-executed program did not do what it did before the failure ({d}); it is not piecewise deterministic, so message logging cannot recover it (docs/recovery.md)"),
            );
        }
        if let Some(b) = batch {
            if let Some(boot) = self.boot.as_mut() {
                boot.send_recovery(&b.encode()).map_err(other)?;
            }
        }
        for from in gather {
            if self.st.rejoined.contains(&from) {
                // Our path still leads to its earlier process: answer once it is reconnected.
                if let Some(h) = hook(&mut self.st.door) {
                    h.gather_from.push(from);
                }
                continue;
            }
            let dets = hook(&mut self.st.door).map(|h| h.log.held_of(from)).unwrap_or_default();
            let bytes = PeerMsg::Held { dets }.encode();
            let hdr = self.st.door.control(Kind::Recovery, 0, 0, 0, bytes.len() as u64, 0, 0);
            self.emit(from, hdr, &bytes)?;
        }
        let image_waits = if image_due || self.mlog.as_ref().is_some_and(|m| m.images.is_some()) && poll_now { self.mlog_images_step()? } else { false };
        // The event logger's answers arrive on the launcher link: read it at once while
        // they are awaited, else now and then (exits and restarts of other ranks).
        if waiting || poll_now || image_waits {
            if let Some(m) = self.mlog.as_mut() {
                m.polls = 0;
            }
            self.poll_launcher();
        }
        self.mlog_release();
        Ok(())
    }

    /// Replay: let the next logged message into matching once it arrived; after the log,
    /// everything held, in arrival order.
    fn mlog_release(&mut self) {
        loop {
            // Held packets were admitted when they arrived; their sender may have died and
            // come back since. A held message of its earlier process is still that message
            // (the new process sends the same one again, dropped then as a duplicate) and is
            // let in as it is: the door would drop it as stale, after the replay counted it
            // as let in, and the copy the new process sends would then never be. A
            // rendezvous announcement of an earlier process is dropped before its turn
            // instead: its data went with that process, and the new process announces it
            // again.
            if hook(&mut self.st.door).is_none_or(|h| h.held.is_empty()) {
                // The common case in every progress round: nothing held, nothing to do.
                return;
            }
            let known: Vec<u16> = (0..self.size).map(|w| self.st.door.incarnation_of(w)).collect();
            let stale = |from: u32, raw: &RawHeader| Header::decode(raw).filter(|x| known.get(from as usize).is_some_and(|&k| x.incarnation < k));
            let next = {
                let Some(h) = hook(&mut self.st.door) else { return };
                let before = h.held.len();
                h.held.retain(|(from, raw, _)| !stale(*from, raw).is_some_and(|x| x.kind == Kind::Rts));
                if h.held.len() < before {
                    tracing::debug!(dropped = before - h.held.len(), "rendezvous announcements of dead processes dropped from the replay gate");
                }
                if h.held.is_empty() || h.fetching || h.gathering > 0 {
                    return;
                }
                // A message taken in before (sent again from a sender's log) does not take
                // part in matching: it goes through at once, so that a rendezvous whose data
                // was still coming when this process's image was taken is asked for again.
                let admitted = &self.st.admitted;
                let dup = h.held.iter().position(|(from, raw, _)| Header::decode(raw).is_some_and(|x| admitted.get(*from as usize).is_some_and(|a| a.contains(x.a))));
                if let Some(i) = dup {
                    h.passing = true;
                    h.held.remove(i)
                } else if h.log.replaying() {
                    let Some(want) = h.log.to_release() else { return };
                    let Some(i) = h.held.iter().position(|(from, raw, _)| *from == want.0 && Header::decode(raw).is_some_and(|x| x.a == want.1)) else {
                        // A process restored from an image: the message arrived before the
                        // image was taken and waits in matching already.
                        if self.st.admitted.get(want.0 as usize).is_some_and(|a| a.contains(want.1)) {
                            h.log.released(want);
                            continue;
                        }
                        if h.waiting_for != Some(want) {
                            h.waiting_for = Some(want);
                            let held: Vec<(u32, u64)> = h.held.iter().take(16).map(|(f, raw, _)| (*f, Header::decode(raw).map_or(0, |x| x.a))).collect();
                            let upto = self.st.admitted.get(want.0 as usize).map(|a| a.upto());
                            tracing::debug!(?want, ?held, ?upto, left = h.log.replay_left(), "replay waits for a message");
                        }
                        return;
                    };
                    h.log.released(want);
                    h.passing = true;
                    h.held.remove(i)
                } else {
                    // After the log: in each sender's order (a message sent again from a
                    // sender's log may have arrived after a newer one of that sender).
                    let seq = |raw: &RawHeader| Header::decode(raw).map_or(0, |x| x.a);
                    let i = (0..h.held.len()).min_by_key(|&i| (h.held[i].0, seq(&h.held[i].1))).unwrap_or(0);
                    h.passing = true;
                    h.held.remove(i)
                }
            };
            let (from, raw, payload) = next;
            match stale(from, &raw) {
                // Past the door's incarnation check, which it passed when it arrived.
                Some(x) => {
                    if self.st.door.arrived(from, &x, &payload) {
                        self.st.handle_packet(from, &x, &payload);
                    }
                }
                None => steadfast_paths::PacketSink::packet(&mut Sink(&mut self.st), from, &raw, &payload),
            }
            if let Some(h) = hook(&mut self.st.door) {
                h.passing = false;
            }
        }
    }

    /// A message from the event logger.
    pub(super) fn mlog_from_logger(&mut self, bytes: &[u8]) {
        let msg = match FromLogger::decode(bytes) {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(error = %e, "malformed message from the event logger dropped");
                return;
            }
        };
        match msg {
            FromLogger::Checkpoint => return self.mlog_image_wanted(),
            FromLogger::ReportLog => {
                // The best-effort checkpoint policy: which rank's image would free the most.
                let bytes = self.mlog.as_ref().map_or_else(Vec::new, |m| m.bytes_to.clone());
                if let Some(boot) = self.boot.as_mut() {
                    if let Err(e) = boot.send_recovery(&steadfast_logging::ToLogger::LogSizes { bytes }.encode()) {
                        tracing::warn!(error = %e, "reporting the log's size to the checkpoint scheduler");
                    }
                }
                return;
            }
            FromLogger::ImageKept { number } => {
                if let Err(e) = self.mlog_image_kept(number) {
                    tracing::warn!(error = %e, "telling the senders to free their logs");
                }
                return;
            }
            _ => {}
        }
        if let Some(h) = hook(&mut self.st.door) {
            if matches!(msg, FromLogger::Events { .. }) {
                h.fetching = false;
            }
            h.log.from_logger(msg);
        }
    }

    /// World rank `w` came back (its path leads to the new process now): send it every
    /// message it was ever sent from here, complete our sends to it that were under way,
    /// and wait for the new process's `Rts` of what was still being streamed from it.
    pub(super) fn mlog_peer_rejoined(&mut self, w: u32) -> MpiResult<()> {
        if w == self.rank || self.mlog.is_none() || self.st.channel_memory {
            return Ok(());
        }
        let wu = w as usize;
        let inc = self.st.door.incarnation;
        let byte = self.byte_type();
        let world = self.world;
        let seqs: Vec<u64> = self.mlog.as_ref().and_then(|m| m.sent.get(wu)).map_or_else(Vec::new, |q| q.keys().copied().collect());
        let n = seqs.len() as u64;
        for seq in seqs {
            let Some(m) = self.mlog.as_ref() else { break };
            let Some(l) = m.sent.get(wu).and_then(|q| q.get(&seq)) else { continue };
            let (ctx, src, tag, rts) = (l.ctx, l.src, l.tag, l.rts);
            let data = m.bytes_of(&l.data).map_err(|e| other(format!("reading the spilled log: {e}")))?;
            let len = data.len() as u64;
            if !rts {
                let hdr = Header { kind: Kind::Eager, flags: 0, incarnation: inc, ctx, src, tag, len, a: seq, b: 0 };
                self.emit(w, hdr.encode(), &data)?;
                continue;
            }
            // A request of our own holds the copy until the receiver took it.
            let spec = SendSpec { buf: data.as_ptr(), count: data.len(), dtype: byte.clone(), comm: world, dest: 0, tag, mode: SendMode::Standard };
            let mut r = Request::new(Op::Send(spec), false);
            r.active = true;
            r.freed = true;
            r.send.owned = Some(data);
            let h = self.st.reqs.insert(r);
            if let Some(r) = self.st.reqs.get_mut(h) {
                r.send.sent = Some(Sent { peer: w, ctx, src, seq, id: h.0, rendezvous: true, buffered: false });
            }
            let hdr = Header { kind: Kind::Rts, flags: 0, incarnation: inc, ctx, src, tag, len, a: seq, b: h.0 };
            self.emit(w, hdr.encode(), &0u64.to_le_bytes())?;
        }
        if let Some(m) = self.mlog.as_mut() {
            m.resent += n;
        }
        tracing::info!(rank = self.rank, peer = w, resent = n, "sent the restarted rank its messages again");
        Ok(())
    }

    /// The outcome a test/probe call must report in a replay (None: decide freely).
    pub(crate) fn mlog_forced(&self, call: CompletionCall) -> Option<Forced> {
        let failed = self.st.door.failed_tests();
        self.st.door.hook_ref::<Hook>()?.log.forced(call.code(), failed)
    }

    /// What `STEADFAST_STATS=1` prints about message logging: the sender-based log's size
    /// (and how much of it is in its file), messages freed by their receivers' images,
    /// messages sent again to restarted ranks, duplicates dropped, and this rank's images.
    pub fn mlog_stats(&self) -> Option<String> {
        let m = self.mlog.as_ref()?;
        let mut line = format!(
            "message log {} bytes ({} in its file), {} messages freed, {} messages sent again to restarted ranks, {} duplicates dropped",
            m.bytes, m.spilled, m.freed, m.resent, self.st.dup_messages
        );
        if let Some(im) = &m.images {
            line += &format!(", {} process images taken, {} restores", im.taken, im.restores);
        }
        Some(line)
    }
}

impl super::State {
    /// World rank `w` is a new process now (the launcher's notice, or its first packet):
    /// what was under way with the earlier one ends here, before any packet of the new
    /// one is looked at. Our sends to it complete (their data is in the log and goes to
    /// the new process once the path leads there), output queued for the earlier process
    /// goes, and a receive whose rendezvous data was coming from it waits for the new
    /// process to announce the message again.
    pub(super) fn mlog_forget_process(&mut self, w: u32) {
        let mut sends = Vec::new();
        let mut receives = Vec::new();
        for h in self.reqs.handles() {
            let Some(r) = self.reqs.get(h) else { continue };
            if r.complete {
                continue;
            }
            match &r.op {
                Op::Send(_) if r.send.sent.is_some_and(|s| s.peer == w) => sends.push(h),
                Op::Recv(_) if r.recv.peer.get() == Some(w) && r.recv.expected > 0 => receives.push((h, r.recv.seq)),
                _ => {}
            }
        }
        if let Some(q) = self.outq.get_mut(w as usize) {
            q.clear();
        }
        self.busy_peers.retain(|p| *p != w);
        for h in sends {
            self.complete_send(h);
        }
        for (h, seq) in receives {
            if let Some(r) = self.reqs.get_mut(h) {
                r.recv.received = 0;
            }
            self.awaiting.insert((w, seq), h);
        }
    }

    /// Logging modes: a message head from `peer` that was taken in before (a restarted
    /// rank re-executing) is handled here; true if it was.
    pub(super) fn mlog_duplicate(&mut self, peer: u32, h: &Header, payload: &[u8]) -> bool {
        // Channel memory: a re-executing process sends itself its messages again too.
        if peer == self.rank && !self.channel_memory {
            return false;
        }
        let Some(a) = self.admitted.get_mut(peer as usize) else { return false };
        if a.admit(h.a) {
            return false;
        }
        self.dup_messages += 1;
        if h.kind != Kind::Rts {
            return true;
        }
        let Some((addr, crc)) = crate::wire::decode_rts(h.flags, payload) else { return true };
        let from = self.door.ident(peer, h.a);
        if let Some(rreq) = self.awaiting.remove(&(peer, h.a)) {
            // Matched already; its data was coming from the failed process: ask again.
            self.start_rndv(rreq, h.src, h.tag, from, h.len, addr, h.b, h.flags, crc);
            return true;
        }
        let seq = h.a;
        if let Some(u) = self.matcher.find_unexpected_mut(h.ctx, |u| matches!(&u.msg, super::Body::Rts { from, .. } if from.world == peer && from.seq == seq)) {
            // Not matched yet: the data will come from the new process.
            u.msg = super::Body::Rts { from, len: h.len, addr, sreq: h.b, flags: h.flags, crc };
            return true;
        }
        // Matched, and its data asked of a sender's request that may be gone (a restored
        // sender announces its log again, and again when it learns of this process; the
        // later announcement ended the earlier request): while none of the data came, ask
        // this announcement's request instead.
        let waiting = self.reqs.handles().into_iter().find(|&r| {
            self.reqs.get(r).is_some_and(|r| {
                !r.complete && r.recv.peer.get() == Some(peer) && r.recv.seq == seq && r.recv.expected > 0 && r.recv.received == 0 && r.recv.sreq != h.b
            })
        });
        if let Some(rreq) = waiting {
            tracing::debug!(peer, seq, "rendezvous announced again while its data was awaited: asking the new announcement");
            self.start_rndv(rreq, h.src, h.tag, from, h.len, addr, h.b, h.flags, crc);
            return true;
        }
        // Received completely before: the re-executed send is done.
        let fin = self.door.control(Kind::Fin, 0, 0, 0, 0, 0, h.b);
        self.queue(peer, OutOp::Packet { hdr: fin, payload: Vec::new() });
        true
    }
}

#[cfg(test)]
mod tests {
    use super::Admitted;

    #[test]
    fn a_forgotten_message_is_taken_in_again_and_the_rest_stay() {
        let mut a = Admitted::default();
        for s in [1, 2, 4, 3, 5] {
            assert!(a.admit(s));
        }
        assert_eq!(a.upto(), 5);
        a.forget(3);
        assert!(!a.contains(3));
        assert!([1, 2, 4, 5].iter().all(|&s| a.contains(s)));
        assert!(!a.admit(4), "still a duplicate");
        assert!(a.admit(3));
        assert_eq!(a.upto(), 5);
        a.forget(9);
        a.forget(0);
        assert_eq!(a.upto(), 5);
    }
}
