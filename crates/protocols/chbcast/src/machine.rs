//! The per-rank machine: binds broadcasts to channels, writes and validates frames, runs the
//! delayed two-phase synchronization, repairs, and fails over to the point-to-point tree.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use crate::frame::{self, HEADER};
use crate::wire::Message;
use crate::{Config, Rank, Seq, Time};

/// Something the driver must do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Transmit {
    /// Write `frame` into channel `channel` of every other rank's buffer with the broadcast
    /// primitive (shared-memory channel, multicast datagram). May be lost, corrupted or
    /// duplicated: the protocol copes.
    Write { channel: u32, frame: Arc<[u8]> },
    /// Send `message` to rank `to` on the reliable, ordered point-to-point path.
    Send { to: Rank, message: Message },
}

/// What happened, for the caller's requests; in sequence order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// Broadcast `seq` (this rank is a receiver) arrived intact: its data.
    Delivered { seq: Seq, root: Rank, data: Vec<u8> },
    /// Broadcast `seq` (this rank is its root) is written: the caller's request completes
    /// (the channel keeps the data for retransmission until the synchronization).
    Sent { seq: Seq },
    /// The channels of every broadcast below `upto` are free again.
    Released { upto: Seq },
    /// The primitive is abandoned: from now this rank's broadcasts go over the tree.
    FailedOver,
}

/// A root's broadcast to write at once ([`Machine::bcast_root_now`]): its sequence number,
/// channel and frame.
pub type DirectWrite = (Seq, u32, Arc<[u8]>);

/// Counters, for tests and the reproduction.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Frames written with the primitive (first writes and retransmissions).
    pub writes: u64,
    /// Of them, retransmissions (after a NACK result or a repair request).
    pub retransmits: u64,
    /// Frames dropped because their length, flags or CRC were wrong.
    pub bad_frames: u64,
    /// Intact frames ignored because this rank already had that broadcast.
    pub repeats: u64,
    /// Frames that arrived before the caller asked for their broadcast (kept).
    pub early: u64,
    /// Frames outside the two windows a rank can hold, dropped.
    pub out_of_window: u64,
    /// Repair requests sent.
    pub repairs_sent: u64,
    /// Synchronization attempts this rank took part in, and of them the failed (NACK) ones.
    pub sync_attempts: u64,
    pub sync_nacks: u64,
    /// Broadcasts written before their window's channels were released (deferred).
    pub deferred: u64,
    /// Frames sent over the point-to-point tree or directly (after the failover).
    pub tree_sends: u64,
}

/// Why a call was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallError {
    /// The root is not a rank of the group.
    Root,
    /// The root must give data, a receiver must not.
    Data,
    /// Data of 4 GiB or more.
    TooLarge,
}

#[derive(Debug)]
struct Call {
    root: Rank,
    /// Root: its frame (shared with the writes that carry it).
    frame: Option<Arc<[u8]>>,
    /// Receiver: the data once the frame arrived intact, until its event takes it.
    data: Option<Vec<u8>>,
    /// Receiver: the broadcast arrived intact (its data may be delivered already).
    have: bool,
    /// Root: written (with the primitive or the tree).
    written: bool,
    /// Receiver: when the next repair request goes out, and how many went.
    repair_at: Option<Time>,
    repairs: u32,
}

#[derive(Debug)]
struct Sync {
    /// Synchronization `k` releases the broadcasts below `k H` (`H` the step, `N` by default).
    k: u64,
    attempt: u32,
    /// This rank's own status is in (reported up, or decided at the manager).
    reported: bool,
    /// Report a NACK at this time if the window is still incomplete (backoff).
    report_at: Time,
    /// `report_at` has passed: the status is a NACK unless the window completes first.
    timed_out: bool,
}

#[derive(Debug, Default, Clone, Copy)]
struct Agg {
    children: u32,
    ok: bool,
    failed: bool,
}

impl Agg {
    /// No child reported yet.
    const NONE: Agg = Agg {
        children: 0,
        ok: true,
        failed: false,
    };
}

/// One rank's channel-broadcast machine for one communicator.
#[derive(Debug)]
pub struct Machine {
    me: Rank,
    n: u32,
    cfg: Config,
    /// Every broadcast below `released` has its channel free (and was complete everywhere).
    released: Seq,
    /// Sequence number of the next call.
    next_seq: Seq,
    /// Next broadcast whose event is due (events go out in sequence order).
    cursor: Seq,
    /// The calls from `base` on, one per sequence number in order (a call is only ever
    /// added at the back and dropped from the front when its window is released): a
    /// broadcast's call is found by index, not by a search.
    calls: VecDeque<Call>,
    base: Seq,
    /// Intact frames of broadcasts not yet called here.
    early: BTreeMap<Seq, Vec<u8>>,
    sync: Option<Sync>,
    /// Children's reports per (synchronization, attempt): a handful at most, in a vector
    /// that keeps its room (a map would allocate a node at every synchronization).
    ups: Vec<((u64, u32), Agg)>,
    /// This rank's children and parent in the synchronization's tree (rooted at the manager).
    sync_children: Vec<Rank>,
    sync_parent: Option<Rank>,
    /// Frames of released broadcasts no write holds any more, reused for later frames of
    /// the same length (a root broadcasting one size allocates nothing once warm).
    spare: Vec<Arc<[u8]>>,
    failed: bool,
    /// No call follows (the communicator was freed, [`Machine::close`]): the
    /// synchronizations go on until every broadcast called is released.
    closing: bool,
    out: VecDeque<Transmit>,
    events: VecDeque<Event>,
    stats: Stats,
}

/// The children of `me` in the binomial tree of `n` ranks rooted at `root`.
pub fn tree_children(root: Rank, me: Rank, n: u32) -> Vec<Rank> {
    let (v, n) = (u64::from(relative(root, me, n)), u64::from(n));
    let mut out = Vec::new();
    let mut mask = 1u64;
    while mask < n && (v & mask) == 0 {
        if v + mask < n {
            out.push(((v + mask + u64::from(root)) % n) as Rank);
        }
        mask <<= 1;
    }
    out
}

/// The parent of `me` in that tree (`None` at the root).
pub fn tree_parent(root: Rank, me: Rank, n: u32) -> Option<Rank> {
    let v = relative(root, me, n);
    (v != 0).then(|| ((u64::from(v & (v - 1)) + u64::from(root)) % u64::from(n)) as Rank)
}

/// `me`'s rank relative to `root`, modulo `n` (0 for an empty group), without overflow.
fn relative(root: Rank, me: Rank, n: u32) -> u32 {
    let n = u64::from(n.max(1));
    ((u64::from(me) % n + n - u64::from(root) % n) % n) as u32
}

/// The synchronization's manager: rank 0 at the root of its tree.
const MANAGER: Rank = 0;

impl Machine {
    /// The machine of rank `me` in a group of `n` ranks.
    ///
    /// # Panics
    /// If `me >= n` or the configuration has no channel.
    pub fn new(me: Rank, n: u32, cfg: Config) -> Machine {
        assert!(me < n, "rank {me} outside a group of {n}");
        assert!(cfg.channels > 0, "at least one channel");
        Machine {
            me,
            n,
            cfg,
            released: 0,
            next_seq: 0,
            cursor: 0,
            calls: VecDeque::new(),
            base: 0,
            early: BTreeMap::new(),
            sync: None,
            ups: Vec::new(),
            sync_children: tree_children(MANAGER, me, n),
            sync_parent: tree_parent(MANAGER, me, n),
            spare: Vec::new(),
            failed: false,
            closing: false,
            out: VecDeque::new(),
            events: VecDeque::new(),
            stats: Stats::default(),
        }
    }

    fn channels(&self) -> u64 {
        u64::from(self.cfg.channels)
    }

    /// Broadcasts one synchronization releases (see [`crate::Config::sync_every`]).
    pub fn sync_step(&self) -> u64 {
        match u64::from(self.cfg.sync_every) {
            0 => self.channels(),
            h => h.min(self.channels()),
        }
    }

    /// The channel broadcast `seq` is bound to.
    pub fn channel_of(&self, seq: Seq) -> u32 {
        (seq % self.channels()) as u32
    }

    /// Broadcasts below this have free channels.
    pub fn released(&self) -> Seq {
        self.released
    }

    /// This rank in the group.
    pub fn rank(&self) -> Rank {
        self.me
    }

    /// Whether the primitive was abandoned.
    pub fn failed(&self) -> bool {
        self.failed
    }

    /// Counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Whether a synchronization is under way.
    pub fn syncing(&self) -> bool {
        self.sync.is_some()
    }

    /// Whether a write or a message waits for [`Machine::poll_transmit`].
    pub fn has_output(&self) -> bool {
        !self.out.is_empty()
    }

    /// No broadcast follows the ones called (the communicator was freed): every rank of the
    /// group closes its machine after the same calls (MPI's collective ordering), and the
    /// synchronizations go on past the last of them, the last one releasing a window the
    /// calls do not fill, until every broadcast called is released, that is, complete at
    /// every rank. Until then the machine must keep being driven (repair requests, the
    /// synchronization's messages, forwarding over the tree after a failover): a receiver
    /// that lost one of the last frames still asks the root for it, and every rank's
    /// report is part of the synchronization. [`Machine::quiet`] says when it may go.
    pub fn close(&mut self, now: Time) {
        if !self.closing {
            self.closing = true;
            self.maybe_start_sync(now);
            self.maybe_report(now);
        }
    }

    /// Whether [`Machine::close`] was called.
    pub fn closing(&self) -> bool {
        self.closing
    }

    /// Whether no other rank can need this machine any more: every broadcast called is
    /// released (complete everywhere) and nothing waits to go out.
    pub fn quiet(&self) -> bool {
        self.released >= self.next_seq && self.out.is_empty()
    }

    /// The next broadcast: every rank of the group calls it in the same order with the same
    /// `root` (MPI's collective ordering); the root gives `data`. Returns its sequence
    /// number; [`Event::Sent`] / [`Event::Delivered`] completes it.
    pub fn bcast(&mut self, now: Time, root: Rank, data: Option<&[u8]>) -> Result<Seq, CallError> {
        if root >= self.n {
            return Err(CallError::Root);
        }
        if (root == self.me) != data.is_some() {
            return Err(CallError::Data);
        }
        if data.is_some_and(|d| u32::try_from(d.len()).is_err()) {
            return Err(CallError::TooLarge);
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        let frame = data.map(|d| self.encode(seq, root, d));
        let mut call = Call {
            root,
            frame,
            data: None,
            have: false,
            written: false,
            repair_at: None,
            repairs: 0,
        };
        if root != self.me {
            if let Some(f) = self.early.remove(&seq) {
                if frame::decode(&f).is_ok_and(|h| h.root == root) {
                    call.data = Some(f[HEADER..].to_vec());
                    call.have = true;
                }
            }
        }
        self.push_call(seq, call);
        if seq < self.released + self.channels() {
            self.bind(now, seq);
        } else if root == self.me {
            self.stats.deferred += 1;
        }
        self.flush_events();
        self.maybe_start_sync(now);
        Ok(seq)
    }

    /// [`Machine::bcast`] for a root whose broadcast can be written at once: its channel is
    /// free, every earlier call completed and nothing waits to go out. Returns its sequence
    /// number, channel and frame, which the driver writes now (what `bcast` would queue as a
    /// [`Transmit::Write`]); the call is complete (no [`Event::Sent`] follows; the events of
    /// earlier calls may still be queued before). `Ok(None)`, nothing changed, where `bcast`
    /// must take it.
    pub fn bcast_root_now(&mut self, now: Time, data: &[u8]) -> Result<Option<DirectWrite>, CallError> {
        if u32::try_from(data.len()).is_err() {
            return Err(CallError::TooLarge);
        }
        let seq = self.next_seq;
        if self.failed || !self.out.is_empty() || self.cursor != seq || seq >= self.released + self.channels() {
            return Ok(None);
        }
        self.next_seq += 1;
        let frame = self.encode(seq, self.me, data);
        self.push_call(
            seq,
            Call {
                root: self.me,
                frame: Some(frame.clone()),
                data: None,
                have: false,
                written: true,
                repair_at: None,
                repairs: 0,
            },
        );
        self.stats.writes += 1;
        self.cursor += 1;
        self.maybe_start_sync(now);
        self.maybe_report(now);
        Ok(Some((seq, self.channel_of(seq), frame)))
    }

    /// [`Machine::bcast`] for a receiver whose broadcast may already be in its channel:
    /// `read(seq, channel)` copies it from there to the caller and says whether it was
    /// there intact (checked as [`Machine::frame_arrived`] would). Then the call is complete
    /// (no [`Event::Delivered`] follows; the events of earlier calls may still be queued
    /// before) and its sequence number is returned; `Ok(None)`,
    /// nothing changed, where `bcast` must take it (also when `read` found nothing).
    pub fn bcast_in_place(&mut self, now: Time, root: Rank, read: impl FnOnce(Seq, u32) -> bool) -> Result<Option<Seq>, CallError> {
        if root >= self.n {
            return Err(CallError::Root);
        }
        if root == self.me {
            return Err(CallError::Data);
        }
        let seq = self.next_seq;
        if self.failed || self.cursor != seq || seq >= self.released + self.channels() || self.early.contains_key(&seq) || !read(seq, self.channel_of(seq)) {
            return Ok(None);
        }
        self.next_seq += 1;
        self.push_call(
            seq,
            Call {
                root,
                frame: None,
                data: None,
                have: true,
                written: false,
                repair_at: None,
                repairs: 0,
            },
        );
        self.cursor += 1;
        self.maybe_start_sync(now);
        self.maybe_report(now);
        Ok(Some(seq))
    }

    /// For a receiver's call `seq`, made with [`Machine::bcast`], whose broadcast has not
    /// arrived: `read(channel)` copies it from its channel straight to the caller and says
    /// whether it was there intact (checked as [`Machine::frame_arrived`] would). Then the
    /// call is complete (no [`Event::Delivered`] follows for it) and true is returned;
    /// false, nothing changed, where the frame must come through `frame_arrived`: it is
    /// not there, the call is not the next to complete (its event would overtake earlier
    /// ones), or the primitive failed.
    pub fn take_in_place(&mut self, now: Time, seq: Seq, read: impl FnOnce(u32) -> bool) -> bool {
        if self.failed || seq != self.cursor || seq >= self.released + self.channels() {
            return false;
        }
        let me = self.me;
        if !self.call(seq).is_some_and(|c| c.root != me && !c.have) || !read(self.channel_of(seq)) {
            return false;
        }
        if let Some(call) = self.call_mut(seq) {
            call.have = true;
            call.repair_at = None;
        }
        self.cursor += 1;
        self.flush_events();
        self.maybe_report(now);
        true
    }

    /// Add the call of broadcast `seq`, the next sequence number (calls are held in order).
    fn push_call(&mut self, seq: Seq, call: Call) {
        if self.calls.is_empty() {
            self.base = seq;
        }
        self.calls.push_back(call);
    }

    /// The frame of broadcast `seq`, in a spare frame of its length if one is free.
    fn encode(&mut self, seq: Seq, root: Rank, data: &[u8]) -> Arc<[u8]> {
        let len = HEADER + data.len();
        if let Some(i) = self.spare.iter().position(|f| f.len() == len) {
            let mut f = self.spare.swap_remove(i);
            if let Some(out) = Arc::get_mut(&mut f) {
                frame::encode_into(out, seq, root, data, self.cfg.crc);
                return f;
            }
        }
        frame::encode_shared(seq, root, data, self.cfg.crc)
    }

    /// Whether the next call starts a synchronization, which reads the time to set its
    /// backoff: a driver may pass a time some calls old to every other call (the time only
    /// sets deadlines, which an older time makes earlier: a repair request sent early is
    /// answered like any other, while a synchronization's backoff must not start in the past).
    pub fn next_call_starts_sync(&self) -> bool {
        self.sync.is_none() && self.next_seq + 1 > self.released + self.sync_step()
    }

    /// The channel of `seq` is free: the root writes, a receiver starts its repair clock.
    fn bind(&mut self, now: Time, seq: Seq) {
        let me = self.me;
        let timeout = self.cfg.repair_timeout;
        let Some(call) = self.call_mut(seq) else {
            return;
        };
        if call.root == me {
            if !call.written {
                call.written = true;
                let frame = call.frame.clone().expect("a root's call holds its frame");
                self.send_frame(seq, frame, false);
            }
        } else if !call.have && call.repair_at.is_none() {
            call.repair_at = Some(now + timeout);
        }
    }

    fn call(&self, seq: Seq) -> Option<&Call> {
        self.calls.get(usize::try_from(seq.checked_sub(self.base)?).ok()?)
    }

    fn call_mut(&mut self, seq: Seq) -> Option<&mut Call> {
        self.calls.get_mut(usize::try_from(seq.checked_sub(self.base)?).ok()?)
    }

    /// The calls of `lo .. hi` that are held, with their sequence numbers.
    fn calls_in(&self, lo: Seq, hi: Seq) -> impl Iterator<Item = (Seq, &Call)> {
        let base = self.base;
        let skip = usize::try_from(lo.saturating_sub(base)).unwrap_or(usize::MAX);
        self.calls
            .iter()
            .enumerate()
            .skip(skip)
            .map(move |(i, c)| (base + i as Seq, c))
            .take_while(move |(s, _)| *s < hi)
    }

    fn send_frame(&mut self, seq: Seq, frame: Arc<[u8]>, retransmit: bool) {
        if self.failed {
            self.stats.tree_sends += 1;
            for c in tree_children(self.me, self.me, self.n) {
                self.out.push_back(Transmit::Send {
                    to: c,
                    message: Message::Data {
                        forward: true,
                        frame: frame.to_vec(),
                    },
                });
            }
        } else {
            self.stats.writes += 1;
            self.stats.retransmits += u64::from(retransmit);
            self.out.push_back(Transmit::Write {
                channel: self.channel_of(seq),
                frame,
            });
        }
    }

    /// A frame read from this rank's channel buffer (written by the primitive). Dropped if
    /// damaged; ignored if this rank already has that broadcast (its channel state).
    pub fn frame_arrived(&mut self, now: Time, bytes: &[u8]) {
        let h = match frame::decode(bytes) {
            Ok(h) => h,
            Err(_) => {
                self.stats.bad_frames += 1;
                return;
            }
        };
        let seq = h.seq;
        if h.root == self.me || h.root >= self.n || seq < self.released {
            self.stats.repeats += 1;
            return;
        }
        // A root writes window w + 1 only once every rank completed window w, so an intact
        // frame lies in the released window or the next one.
        if seq >= self.released + 2 * self.channels() {
            self.stats.out_of_window += 1;
            return;
        }
        if let Some(call) = self.call_mut(seq) {
            if call.have {
                self.stats.repeats += 1;
            } else if call.root != h.root {
                self.stats.bad_frames += 1;
            } else {
                call.data = Some(bytes[HEADER..].to_vec());
                call.have = true;
                call.repair_at = None;
                self.flush_events();
                self.maybe_report(now);
            }
        } else if self.early.contains_key(&seq) {
            self.stats.repeats += 1;
        } else {
            self.stats.early += 1;
            self.early.insert(seq, bytes.to_vec());
        }
    }

    fn flush_events(&mut self) {
        let me = self.me;
        loop {
            let seq = self.cursor;
            let Some(call) = self.call_mut(seq) else { break };
            let ev = if call.root == me {
                if !call.written {
                    break;
                }
                Event::Sent { seq }
            } else {
                let Some(data) = call.data.take() else { break };
                Event::Delivered {
                    seq,
                    root: call.root,
                    data,
                }
            };
            self.events.push_back(ev);
            self.cursor += 1;
        }
    }

    /// A point-to-point message from `from`.
    pub fn handle(&mut self, now: Time, from: Rank, msg: Message) {
        match msg {
            Message::Up {
                sync,
                attempt,
                ok,
                failed,
            } => {
                let i = match self.ups.iter().position(|(key, _)| *key == (sync, attempt)) {
                    Some(i) => i,
                    None => {
                        self.ups.push(((sync, attempt), Agg::NONE));
                        self.ups.len() - 1
                    }
                };
                let a = &mut self.ups[i].1;
                a.children += 1;
                a.ok &= ok;
                a.failed |= failed;
                self.maybe_report(now);
            }
            Message::Down {
                sync,
                attempt,
                ok,
                failed,
            } => self.down(now, sync, attempt, ok, failed),
            Message::Repair { seq, failed } => {
                if failed && !self.failed {
                    self.fail_over();
                }
                let Some(call) = self.call(seq) else {
                    return;
                };
                if call.root != self.me || !call.written {
                    return;
                }
                let frame = call.frame.clone().expect("a root's call holds its frame");
                if self.failed {
                    self.stats.tree_sends += 1;
                    self.out.push_back(Transmit::Send {
                        to: from,
                        message: Message::Data {
                            forward: false,
                            frame: frame.to_vec(),
                        },
                    });
                } else {
                    self.send_frame(seq, frame, true);
                }
            }
            Message::Data { forward, frame } => {
                // Taken first: if it completes this rank's window, the synchronization may
                // release it here and then, and nobody needs it passed on.
                self.frame_arrived(now, &frame);
                if forward {
                    if let Ok(h) = frame::decode(&frame) {
                        // Below `released` every rank has it already.
                        if h.root < self.n && h.seq >= self.released {
                            for c in tree_children(h.root, self.me, self.n) {
                                self.out.push_back(Transmit::Send {
                                    to: c,
                                    message: Message::Data {
                                        forward: true,
                                        frame: frame.clone(),
                                    },
                                });
                            }
                        }
                    }
                }
            }
        }
    }

    /// The driver saw the primitive fail (a write error, the fault layer): abandon it.
    pub fn primitive_failed(&mut self) {
        if !self.failed {
            self.fail_over();
        }
    }

    /// From now every frame goes over the point-to-point tree; the outstanding broadcasts
    /// this rank is root of are rebound to it.
    fn fail_over(&mut self) {
        self.failed = true;
        self.events.push_back(Event::FailedOver);
        let mine: Vec<(Seq, Arc<[u8]>)> = self
            .calls_in(self.base, Seq::MAX)
            .filter(|(_, c)| c.root == self.me && c.written)
            .map(|(s, c)| (s, c.frame.clone().expect("a root's call holds its frame")))
            .collect();
        for (seq, f) in mine {
            self.send_frame(seq, f, true);
        }
    }

    /// The next synchronization starts once a call lies past the broadcasts it releases:
    /// with the default step, when the channels run out (the paper's delayed
    /// synchronization); with a smaller one, while channels are still free.
    fn maybe_start_sync(&mut self, now: Time) {
        if self.sync.is_none() && (self.next_seq > self.released + self.sync_step() || self.closing && self.next_seq > self.released) {
            let k = self.released / self.sync_step() + 1;
            self.sync = Some(Sync {
                k,
                attempt: 0,
                reported: false,
                report_at: now + self.cfg.sync_backoff,
                timed_out: false,
            });
            self.stats.sync_attempts += 1;
            self.maybe_report(now);
        }
    }

    /// Whether this rank completed the broadcasts the running synchronization releases (once
    /// closing, the window may end at the last call).
    fn window_complete(&self) -> bool {
        self.cursor >= self.released + self.sync_step() || self.closing && self.cursor >= self.next_seq
    }

    fn backoff(&self, attempt: u32) -> Duration {
        let d = self.cfg.sync_backoff.saturating_mul(1 << attempt.min(16));
        d.min(self.cfg.max_backoff.max(self.cfg.sync_backoff))
    }

    /// Reports this rank's subtree status once its own is known (window complete, or the
    /// backoff ran out: NACK) and every child reported.
    fn maybe_report(&mut self, now: Time) {
        let complete = self.window_complete();
        let Some(s) = &mut self.sync else { return };
        s.timed_out |= now >= s.report_at;
        if s.reported || !(complete || s.timed_out) {
            return;
        }
        let children = self.sync_children.len() as u32;
        let key = (s.k, s.attempt);
        let at = self.ups.iter().position(|(k, _)| *k == key);
        let agg = at.map_or(Agg::NONE, |i| self.ups[i].1);
        if agg.children < children {
            return;
        }
        s.reported = true;
        let (k, attempt) = key;
        if let Some(i) = at {
            self.ups.swap_remove(i);
        }
        let ok = agg.ok && complete;
        let failed = agg.failed || self.failed;
        match self.sync_parent {
            Some(p) => self.out.push_back(Transmit::Send {
                to: p,
                message: Message::Up {
                    sync: k,
                    attempt,
                    ok,
                    failed,
                },
            }),
            None => self.down(now, k, attempt, ok, failed),
        }
    }

    fn down(&mut self, now: Time, k: u64, attempt: u32, ok: bool, failed: bool) {
        // Only the result of the attempt this rank reported for (the manager reports to
        // itself): anything else is not from this protocol's run.
        if !self
            .sync
            .as_ref()
            .is_some_and(|s| s.k == k && s.attempt == attempt && s.reported)
        {
            return;
        }
        for &c in &self.sync_children {
            self.out.push_back(Transmit::Send {
                to: c,
                message: Message::Down {
                    sync: k,
                    attempt,
                    ok,
                    failed,
                },
            });
        }
        if ok {
            self.sync = None;
            let upto = k * self.sync_step();
            self.released = upto;
            while self.base < upto {
                let Some(call) = self.calls.pop_front() else { break };
                self.base += 1;
                if let Some(f) = call.frame.filter(|f| Arc::strong_count(f) == 1) {
                    if self.spare.len() < self.cfg.channels as usize {
                        self.spare.push(f);
                    }
                }
            }
            if self.calls.is_empty() {
                self.base = self.next_seq;
            }
            self.early.retain(|s, _| *s >= upto);
            // A failure reported with the release: the failover resends only what lies past
            // the window (the window's broadcasts are complete everywhere; sent again over
            // the tree they were only late traffic, at the end of a job too: the last
            // synchronization of a freed communicator), and the window the release opens
            // goes over the tree from the start.
            if failed && !self.failed {
                self.fail_over();
            }
            self.events.push_back(Event::Released { upto });
            let window = upto.max(self.base)..(upto + self.channels()).min(self.next_seq);
            for s in window {
                self.bind(now, s);
            }
            self.flush_events();
            self.maybe_start_sync(now);
        } else {
            if failed && !self.failed {
                self.fail_over();
            }
            self.stats.sync_nacks += 1;
            // The manager does not say which broadcast failed: every root retransmits all of
            // its broadcasts of the window; receivers that have them ignore the repeats. Over
            // the tree (reliable) nothing is lost, so nothing is sent again.
            if !self.failed {
                let lo = self.released;
                let mine: Vec<(Seq, Arc<[u8]>)> = self
                    .calls_in(lo, lo + self.channels())
                    .filter(|(_, c)| c.root == self.me && c.written)
                    .map(|(s, c)| (s, c.frame.clone().expect("a root's call holds its frame")))
                    .collect();
                for (s, f) in mine {
                    self.send_frame(s, f, true);
                }
            }
            let next = attempt + 1;
            let report_at = now + self.backoff(next);
            self.sync = Some(Sync {
                k,
                attempt: next,
                reported: false,
                report_at,
                timed_out: false,
            });
            self.stats.sync_attempts += 1;
            self.maybe_report(now);
        }
    }

    /// When [`Machine::handle_timeout`] wants to run next.
    pub fn poll_timeout(&self) -> Option<Time> {
        let repair = self.calls.iter().filter_map(|c| c.repair_at).min();
        let sync = self
            .sync
            .as_ref()
            .filter(|s| !s.reported && !s.timed_out)
            .map(|s| s.report_at);
        match (repair, sync) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Runs what is due at `now`: repair requests for broadcasts that did not arrive in time
    /// (after `max_repairs` of them the primitive is abandoned), and the NACK of a
    /// synchronization whose backoff ran out.
    pub fn handle_timeout(&mut self, now: Time) {
        let due: Vec<Seq> = self
            .calls_in(self.base, Seq::MAX)
            .filter(|(_, c)| c.repair_at.is_some_and(|t| t <= now))
            .map(|(s, _)| s)
            .collect();
        for seq in due {
            let (timeout, max) = (self.cfg.repair_timeout, self.cfg.max_repairs);
            let call = self.call_mut(seq).expect("listed above");
            call.repairs += 1;
            let n = call.repairs;
            call.repair_at = Some(now + timeout.saturating_mul(1 << n.min(6)));
            let root = call.root;
            if n >= max && !self.failed {
                self.fail_over();
            }
            self.stats.repairs_sent += 1;
            self.out.push_back(Transmit::Send {
                to: root,
                message: Message::Repair {
                    seq,
                    failed: self.failed,
                },
            });
        }
        self.maybe_report(now);
    }

    /// The next thing to do.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.out.pop_front()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }
}
