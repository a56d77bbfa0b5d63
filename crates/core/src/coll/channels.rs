//! MPI_Bcast over channels with delayed synchronization: the driver of the sans-IO machine
//! in `steadfast-chbcast` (docs/chbcast.md), over shared memory on one host and over an IP
//! multicast stream between hosts (`multicast.rs`, [`McastPrim`]: one rank per host in the
//! group, passing frames on through its host's shared-memory channels).
//!
//! Every communicator whose ranks are all on this host gets, at its first broadcast on this
//! path, one segment in the job directory split into `N` channels (slots). Broadcast number
//! `s` of the communicator binds to slot `s mod N`: its root writes the frame (header,
//! CRC32C, data) there once and returns; every other rank reads it from the slot. A slot is
//! written again only after the machine's two-phase tree synchronization (up: ACK/NACK,
//! down: the result), which runs when a call finds no free channel, so once every `N`
//! broadcasts. Its messages, repair requests and, after a failover, the frames themselves
//! travel on the communicator's collective context with one reserved tag.
//!
//! Slot layout: a 64-byte line whose first word is the published sequence number plus one
//! (0: nothing yet), then the frame. The root stores 0, writes the frame (above 16 KiB the
//! data first and the header after it, as the paper does), then stores the sequence
//! number with release ordering; a reader that loads it with acquire ordering and finds
//! the number it waits for copies the frame and hands it to the machine, whose CRC check
//! catches a torn copy. By the protocol a slot is rewritten only once every rank has read
//! it, so a torn copy comes only from a damaged write (the fault hook below).
//!
//! Waiting cooperates with the engine: every round of the wait drives the engine's
//! progress (the synchronization's messages arrive through it, and a rank's own sends
//! leave through it), and an idle wait spins, then yields, then sleeps for growing
//! intervals, like [`Engine::block_until`]. A slot write rings no doorbell, so the sleep is
//! short (at most 1 ms).
//!
//! Repair requests addressed to a root that already returned are answered in its next
//! channel broadcast or whenever it waits idle in any blocking call ([`Engine::channels_service`]),
//! also once it freed the communicator: a freed communicator's driver stays until every
//! broadcast called on it is released everywhere ([`Engine::channel_retiring`]).

use std::path::{Path as FsPath, PathBuf};
use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use steadfast_chbcast::{frame, CallError, Config as ChbConfig, Event, Machine, Message, Transmit};

use super::multicast::{Mcast, Stream};
use super::{select, Buf};
use crate::engine::{Arrived, Engine};
use crate::error::{ErrorClass, MpiError, MpiResult};
use crate::slab::Handle;

/// Tag of the synchronization's messages on the collective context (outside the range of
/// the scheduled collectives' tags).
pub(crate) const TAG: i32 = 0x7ffe_0060;
const MAGIC: u64 = 0x5354_4446_4348_4231; // "STDFCHB1"
const LINE: usize = 64;
/// Names of the segments in the job directory: `{prefix}-{world rank}-{n}`. Their growth is
/// checked against the free space ([`Segment::write`]), so other segments' budgets leave
/// their unwritten pages out.
pub(super) const SEGMENT_PREFIX: &str = "chb";
/// Bytes of each channel backed when its segment is made: its word and small frames.
const FIRST_BACKED: usize = 4096;
/// Frames above this many bytes of data are written as two copies, data then header.
const SPLIT: usize = 16 << 10;
const MAX_SLEEP: Duration = Duration::from_millis(1);
/// Longest sleep on the path's doorbell during a synchronization.
const SYNC_SLEEP: Duration = Duration::from_millis(10);
/// Yields while waiting for a frame before sleeping.
pub(crate) const FRAME_YIELDS: u32 = 2000;

/// The `n`th sleep (from 0) of a wait for a frame: 10 µs doubling up to [`MAX_SLEEP`].
pub(crate) fn frame_sleep(n: u32) -> Duration {
    Duration::from_micros(10).saturating_mul(1 << n.min(7)).min(MAX_SLEEP)
}
/// The first round of a call runs the whole pump (messages, timers) every this many calls.
const FULL_PUMP_EVERY: u32 = 16;
/// How long a member waits for a probe of a new multicast stream.
const PROBE_WAIT: Duration = Duration::from_millis(300);

/// What the engine knows of the host: the job directory and which world ranks share it.
pub(crate) struct Host {
    pub jobdir: PathBuf,
    pub local: Vec<bool>,
    /// This rank's address towards the other hosts (a job spanning hosts): the interface
    /// multicast streams join on.
    pub net_ip: Option<std::net::Ipv4Addr>,
    /// The host of every world rank (from the host map; empty without one). Not the same
    /// as `local`: with `--path tcp` ranks of one host reach each other over tcp.
    pub hosts: Vec<u32>,
    /// This host runs more ranks of the job (`local`, this one included) than it has CPUs
    /// online (`coll::Topo::crowded`).
    pub crowded: bool,
}

/// Channel broadcast state of the engine.
#[derive(Default)]
pub struct ChannelsState {
    /// Per communicator context: its driver, or None when the segment could not be made
    /// (every rank then uses the tree on that communicator).
    drivers: super::shmseg::DriverTable<Driver>,
    pub(crate) host: Option<Host>,
    /// Segments this process created (channels and slots), for unique names.
    pub(super) created: u64,
    /// A multicast stream's probe never reached this rank (or it could not join one):
    /// it declines every later stream at once rather than make each communicator wait
    /// for the probes again.
    mcast_deaf: bool,
    /// Groups of communicators asked about lately and whether each lies on this host
    /// (`Engine::segment_target`).
    pub(super) local_memo: std::cell::RefCell<Vec<(std::sync::Arc<Vec<u32>>, bool)>>,
    /// Broadcasts under way as requests ([`ChannelOp`]): `MPI_Ibcast`s, and the blocking
    /// ones of a rank at `MPI_THREAD_MULTIPLE`.
    pub(crate) ops: Vec<ChannelOp>,
    /// Broadcasts called while their communicator's agreement on its segment runs in the
    /// background, in call order: started when it ends.
    pub(crate) waiting: Vec<Waiting>,
    /// Set while [`Engine::channels_service`] has every driver out of the table: a freed
    /// communicator's driver cannot be looked at then ([`Engine::channel_retiring`]).
    servicing: bool,
    /// Every rank of the job reached MPI_Finalize ([`Engine::channels_end`]): no driver is
    /// served any more, and a freed communicator's goes with it.
    ended: bool,
}

/// A broadcast waiting for its communicator's segment (`ChannelsState::waiting`).
pub(crate) struct Waiting {
    user: Handle,
    pub(crate) comm: Handle,
    ctx: u32,
    coll: super::Coll,
    /// The tag for it by messages should no segment be agreed (see `Setup::tag`).
    tag: Option<i32>,
}

// SAFETY: as for `ChannelOp`.
unsafe impl Send for Waiting {}

/// A channel broadcast as a request that `Engine::coll_progress` advances one round at a
/// time: an `MPI_Ibcast`, or a blocking `MPI_Bcast` of a rank at `MPI_THREAD_MULTIPLE`
/// (the very broadcast the ranks that wait with the library lock held run in
/// `Engine::channel_bcast`: they cannot tell this rank's thread level, so every rank must
/// take the channels where the rule says so) while the caller waits with the lock released.
pub(crate) struct ChannelOp {
    user: Handle,
    pub(crate) ctx: u32,
    seq: u64,
    rank: i32,
    root: i32,
    bytes: usize,
    buf: Buf,
}

// SAFETY: `buf` points into the application's buffer of the call in progress; the engine
// runs under one lock.
unsafe impl Send for ChannelOp {}

impl ChannelsState {
    /// Forget the driver of a freed communicator (its segment stays in the job directory,
    /// which the launcher removes: a member may still be opening it). The communicator is
    /// only released once its driver is quiet ([`Engine::channel_retiring`]), so no rank
    /// needs this one any more.
    pub(crate) fn forget(&mut self, ctx: u32) {
        if let Some(Some(d)) = self.drivers.take(ctx) {
            tracing::debug!("channel broadcast: driver of freed context {ctx} dropped, {} broadcasts released", d.machine.released());
        }
    }
}

/// A per-communicator segment of `channels` slots mapped shared.
pub(super) struct Segment {
    base: *mut u8,
    len: usize,
    channels: usize,
    slot: usize,
    cap: usize,
    /// Ranks with a line in the synchronization area (0: none, a multicast host's segment).
    ranks: usize,
    /// The segment's file, to back a channel's pages before a root first writes them.
    file: std::fs::File,
    /// The job directory holding the segment, whose other files' promises a channel's
    /// backing must respect.
    dir: PathBuf,
    /// Bytes a channel's backing must leave unpromised on the file system: half of what was
    /// unpromised when this process mapped the segment. The shared-memory rings and the slot
    /// collectives' segments are sparse files backed only as traffic touches them, so the
    /// channels must not take their pages (a store into a page the file system cannot back
    /// is a SIGBUS): what they may take is the free space less those files' unwritten bytes
    /// (`steadfast_paths::shm::unpromised_bytes`).
    floor: u64,
    /// Bytes from the start of each channel's slot this process knows are backed.
    backed: Vec<std::cell::Cell<usize>>,
}

// SAFETY: the mapping is only touched through the engine, which one thread drives at a time.
unsafe impl Send for Segment {}

impl Drop for Segment {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` came from a successful mmap that nothing uses any more.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

fn slot_len(cap: usize) -> usize {
    (LINE + frame::HEADER + cap).div_ceil(LINE) * LINE
}

/// Bytes of a segment: the header line, one synchronization line per rank, the slots.
fn segment_len(channels: usize, cap: usize, ranks: usize) -> usize {
    LINE + ranks * LINE + channels * slot_len(cap)
}

impl Segment {
    /// Create the segment under a temporary name, initialise it, publish it as `path`.
    ///
    /// The file is sparse: a channel's pages are backed when a root first writes that far
    /// into it ([`Segment::write`]), so a communicator that broadcasts only small messages
    /// costs a few pages. The header, the synchronization lines and each channel's first
    /// page (its word, which every reader polls) are backed here: with the file system full,
    /// creation fails and the communicator uses the tree, instead of a SIGBUS later.
    fn create(path: &FsPath, channels: usize, cap: usize, ranks: usize) -> std::io::Result<Segment> {
        let len = segment_len(channels, cap, ranks);
        let base = super::shmseg::create(path, len, MAGIC, &[channels as u32, cap as u32, ranks as u32])?;
        let seg = Segment::mapped(path, base, len, channels, cap, ranks)?;
        super::shmseg::reserve(&seg.file, 0, seg.slots())?;
        for ch in 0..channels {
            super::shmseg::reserve(&seg.file, seg.slots() + ch * seg.slot, FIRST_BACKED.min(seg.slot))?;
        }
        Ok(seg)
    }

    /// The segment at `base` (mapped from `path`), with its file open for [`Segment::write`];
    /// the mapping is undone if the file cannot be opened.
    fn mapped(path: &FsPath, base: *mut u8, len: usize, channels: usize, cap: usize, ranks: usize) -> std::io::Result<Segment> {
        let file = match std::fs::OpenOptions::new().read(true).write(true).open(path) {
            Ok(f) => f,
            Err(e) => {
                // SAFETY: the mapping just made, used by nobody.
                unsafe { libc::munmap(base.cast(), len) };
                return Err(e);
            }
        };
        let slot = slot_len(cap);
        let backed = (0..channels).map(|_| std::cell::Cell::new(FIRST_BACKED.min(slot))).collect();
        let dir = path.parent().map(FsPath::to_path_buf).unwrap_or_default();
        let floor = steadfast_paths::shm::unpromised_bytes(&dir, SEGMENT_PREFIX).unwrap_or(0) / 2;
        Ok(Segment { base, len, channels, slot, cap, ranks, file, dir, floor, backed })
    }

    /// Map the segment another rank created, checking it has the expected shape.
    fn open(path: &FsPath, channels: usize, cap: usize, ranks: usize) -> std::io::Result<Segment> {
        let len = segment_len(channels, cap, ranks);
        let base = super::shmseg::open(path, len, MAGIC, &[channels as u32, cap as u32, ranks as u32], "channel settings")?;
        Segment::mapped(path, base, len, channels, cap, ranks)
    }

    /// Where the slots start: after the header line and the synchronization lines.
    fn slots(&self) -> usize {
        LINE + self.ranks * LINE
    }

    fn word(&self, ch: usize) -> &AtomicU64 {
        // SAFETY: slot `ch` < channels lies in the mapping; its first word is 8-byte aligned
        // (page-aligned base, 64-byte lines and slots) and only ever accessed atomically.
        unsafe { &*self.base.add(self.slots() + ch * self.slot).cast::<AtomicU64>() }
    }

    fn count(&self, ch: usize) -> &AtomicU64 {
        // SAFETY: as `word`, the next 8-byte word of the slot's line.
        unsafe { &*self.base.add(self.slots() + ch * self.slot + 8).cast::<AtomicU64>() }
    }

    fn body(&self, ch: usize) -> *mut u8 {
        // SAFETY: inside slot `ch` of the mapping.
        unsafe { self.base.add(self.slots() + ch * self.slot + LINE) }
    }

    /// Rank `r`'s synchronization mailbox: word 0 its latest `Up`, word 1 its latest `Down`
    /// (see [`Mailbox`]). Only `r` writes its line; its parent and children read it.
    fn mailbox(&self, r: usize, down: bool) -> Option<&AtomicU64> {
        if r >= self.ranks {
            return None;
        }
        // SAFETY: line `r` < ranks of the synchronization area lies in the mapping, its
        // words are 8-byte aligned and only ever accessed atomically.
        Some(unsafe { &*self.base.add(LINE + r * LINE + usize::from(down) * 8).cast::<AtomicU64>() })
    }

    /// Write `frame` (broadcast `seq`) into channel `ch` and publish it.
    /// False, having written nothing, if the frame does not fit or its pages cannot be
    /// backed (the file system is full): the caller reports the primitive failed, and the
    /// broadcasts move to the point-to-point tree.
    fn write(&self, ch: usize, seq: u64, frame: &[u8]) -> bool {
        if ch >= self.channels || frame.len() > frame::HEADER + self.cap {
            return false;
        }
        let need = LINE + frame.len();
        let backed = self.backed[ch].get();
        if need > backed {
            let grow = (need - backed) as u64;
            if steadfast_paths::shm::unpromised_bytes(&self.dir, SEGMENT_PREFIX).is_some_and(|free| free < self.floor.saturating_add(grow)) {
                tracing::warn!("channel broadcast: {grow} more bytes for channel {ch} would leave less than half the shared memory unpromised at the start; using the tree");
                return false;
            }
            let start = self.slots() + ch * self.slot;
            if let Err(e) = super::shmseg::reserve(&self.file, start, need) {
                tracing::warn!("channel broadcast: backing {need} bytes of channel {ch}: {e}; using the tree");
                return false;
            }
            self.backed[ch].set(need);
        }
        let w = self.word(ch);
        w.store(0, Ordering::Relaxed);
        fence(Ordering::Release);
        let body = self.body(ch);
        // SAFETY: the frame fits the slot (checked above). Readers do not rely on these bytes
        // until the word below says so, and check the CRC of what they copied.
        unsafe {
            if frame.len() > frame::HEADER + SPLIT {
                std::ptr::copy_nonoverlapping(frame[frame::HEADER..].as_ptr(), body.add(frame::HEADER), frame.len() - frame::HEADER);
                std::ptr::copy_nonoverlapping(frame.as_ptr(), body, frame::HEADER);
            } else {
                std::ptr::copy_nonoverlapping(frame.as_ptr(), body, frame.len());
            }
        }
        let c = self.count(ch);
        c.store(c.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
        w.store(seq + 1, Ordering::Release);
        true
    }

    /// Broadcast `seq` of `root` straight from channel `ch` into `dst` (`bytes` bytes, the
    /// caller's contiguous buffer), if its frame is there, says `bytes` and checks (CRC)
    /// against what was copied. False leaves the usual path to it: `dst` may then hold a
    /// damaged copy, which the delivery it waits for overwrites.
    fn read_into(&self, ch: usize, seq: u64, root: u32, dst: *mut u8, bytes: usize) -> bool {
        if ch >= self.channels || bytes > self.cap || self.word(ch).load(Ordering::Acquire) != seq + 1 {
            return false;
        }
        let body = self.body(ch);
        // SAFETY: the header and `bytes` <= cap data bytes lie inside the slot; `dst` holds
        // `bytes` bytes (the caller's buffer of the broadcast's size).
        // The copy computes the CRC as it goes (one pass over the data, not two).
        let checked = unsafe {
            let head = std::ptr::read_unaligned(body.cast::<[u8; frame::HEADER]>());
            let src = std::slice::from_raw_parts(body.add(frame::HEADER).cast_const(), bytes);
            frame::copy_decode(&head, src, std::slice::from_raw_parts_mut(dst, bytes))
        };
        checked.is_ok_and(|h| h.seq == seq && h.root == root)
    }

    /// Copy the frame of broadcast `seq` out of channel `ch` into `out` if it is there and
    /// was written again since the copy of the last call (`last`: the slot's write count
    /// then), so a damaged frame is read once per write, not on every poll.
    fn read(&self, ch: usize, seq: u64, out: &mut Vec<u8>, last: &mut Option<(u64, u64)>) -> bool {
        if self.word(ch).load(Ordering::Acquire) != seq + 1 {
            return false;
        }
        let writes = self.count(ch).load(Ordering::Relaxed);
        if *last == Some((seq, writes)) {
            return false;
        }
        *last = Some((seq, writes));
        let body = self.body(ch);
        let mut head = [0u8; frame::HEADER];
        // SAFETY: the header lies inside the slot.
        unsafe { std::ptr::copy_nonoverlapping(body, head.as_mut_ptr(), frame::HEADER) };
        let len = u32::from_le_bytes([head[12], head[13], head[14], head[15]]) as usize;
        // A length beyond the slot is damage: hand over the header alone, which fails its check.
        let n = frame::HEADER + if len <= self.cap { len } else { 0 };
        out.clear();
        out.reserve(n);
        // SAFETY: `n` bytes lie inside the slot; `out` has room for them.
        unsafe {
            std::ptr::copy_nonoverlapping(body, out.as_mut_ptr(), n);
            out.set_len(n);
        }
        true
    }
}

/// The fault hook of the channel writes (`STEADFAST_COLL_CHANNEL_FAULTS`): for tests of the
/// machine's repairs, retransmissions and failover through a real driver.
#[derive(Clone, Debug, Default)]
pub struct Faults {
    drop: f64,
    corrupt: f64,
    /// Report the primitive failed after this many writes.
    fail_after: Option<u64>,
    /// Lose every write after this many, silently (a network that stops carrying the
    /// primitive: only the repairs' timeouts notice).
    cut_after: Option<u64>,
    state: u64,
    writes: u64,
}

impl Faults {
    /// Parse `drop=p,corrupt=p,fail_after=n,cut_after=n,seed=s`.
    pub fn parse(spec: &str) -> Result<Faults, String> {
        let mut f = Faults { state: 0x9e37_79b9_7f4a_7c15, ..Default::default() };
        for kv in spec.split(',').filter(|s| !s.trim().is_empty()) {
            let (k, v) = kv.split_once('=').ok_or_else(|| format!("`{kv}` is not key=value"))?;
            let bad = |_| format!("`{v}` is not a valid value for `{k}`");
            match k.trim() {
                "drop" => f.drop = v.trim().parse().map_err(bad)?,
                "corrupt" => f.corrupt = v.trim().parse().map_err(bad)?,
                "fail_after" => f.fail_after = Some(v.trim().parse().map_err(|_| format!("`{v}` is not a count"))?),
                "cut_after" => f.cut_after = Some(v.trim().parse().map_err(|_| format!("`{v}` is not a count"))?),
                "seed" => f.state = v.trim().parse::<u64>().map_err(|_| format!("`{v}` is not a seed"))? | 1,
                _ => return Err(format!("unknown key `{k}` (drop, corrupt, fail_after, cut_after, seed)")),
            }
        }
        Ok(f)
    }

    fn chance(&mut self, p: f64) -> bool {
        // xorshift64*
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        let r = self.state.wrapping_mul(0x2545_f491_4f6c_dd1d);
        let x = (r >> 11) as f64 / (1u64 << 53) as f64;
        p > 0.0 && x < p
    }
}

/// The one-to-many primitive under a communicator's channels.
enum Prim {
    /// All ranks on this host: a shared segment.
    Shm(Segment),
    /// Ranks on several hosts: a multicast stream between hosts, shared channels inside one.
    Mcast(McastPrim),
}

/// The primitive across hosts, after the paper's SMP scheme: one member per host (its
/// lowest rank of the communicator, the *leader*) is in the multicast group and passes every
/// frame it receives on into the host's shared channels, which its host-mates read; a root
/// writes its frame into its host's channels and sends it to the group (with loopback off:
/// its host-mates read it from the channels).
struct McastPrim {
    m: Mcast,
    /// Whether this rank is its host's member in the group.
    leader: bool,
    /// The host's channels, when the communicator has other members on this host.
    host: Option<Segment>,
    /// Broadcasts the leader already passed on (at most once each: a second write of a
    /// slot could tear a host-mate's copy of the first).
    relayed: std::collections::BTreeSet<u64>,
}

/// The driver of one communicator.
struct Driver {
    comm: Handle,
    /// The communicator's group when the driver was made: a communicator at `comm` with
    /// this very group (and the driver's context) is the one the driver serves.
    group: std::sync::Arc<Vec<u32>>,
    machine: Machine,
    prim: Prim,
    /// Data bytes a channel holds.
    cap: usize,
    epoch: Instant,
    /// Frame copied out of a slot.
    scratch: Vec<u8>,
    /// Rounds of [`Engine::channel_pump`], to look at the timers every few only.
    rounds: u32,
    /// Broadcast and write count of the last frame copied out of a slot.
    last_read: Option<(u64, u64)>,
    /// Sends too large for one eager packet, kept until complete.
    sends: Vec<(Handle, Vec<u8>)>,
    /// A message too large for one eager packet (a frame over the tree), being received:
    /// the machine takes it once complete, and the driver's later messages after it.
    incoming: Option<Incoming>,
    faults: Option<Faults>,
    /// The synchronization through the segment's lines (one host), if set up.
    mail: Option<Mailbox>,
    /// Calls so far (every few run the whole pump at once, see [`Engine::channel_bcast`]).
    calls: u32,
    /// The last reading of [`Driver::now`].
    clock: Duration,
    /// Completions (`Sent`, `Delivered`) of other broadcasts than the one a round polled
    /// for (several `MPI_Ibcast`s outstanding), kept for their own rounds.
    early: Vec<Event>,
}

/// A driver's message announced by its sender and received without waiting
/// ([`Engine::channel_pump`]): its request, the buffer it lands in, its sender.
struct Incoming {
    req: Handle,
    buf: Vec<u8>,
    src: i32,
}

/// The caller's buffer of a channel broadcast.
#[derive(Clone, Copy)]
enum Dest<'a> {
    /// That many contiguous bytes at this address (the broadcast's size).
    Contig(*mut u8),
    /// Elements of a datatype: packed at the root, unpacked at a receiver.
    Typed(&'a Buf),
}

/// The synchronization's `Up` and `Down` through words of the shared segment instead of
/// messages: the paper's other synchronization (section 4.3: every process writes a
/// number to a global address that the others test, where the hardware offers one), which
/// shared memory offers on one host. The machine and its tree are unchanged; only the
/// transport of its two messages differs. Each rank publishes its latest `Up` and its latest
/// `Down` in its own line; its parent takes the first, its children the second, each value
/// once. A value is never overwritten before it was taken: a child's next `Up` waits for its
/// parent's `Down`, and a parent's next `Down` for every child's next `Up`. A writer rings
/// the reader's doorbell, so a reader asleep in a synchronization wakes at once.
struct Mailbox {
    parent: Option<usize>,
    children: Vec<usize>,
    /// The value last taken from each child's `Up` word, and from the parent's `Down` word.
    seen_up: Vec<u64>,
    seen_down: u64,
    /// Doorbells of the parent and the children (their shared-memory path segments).
    wakers: Vec<(usize, steadfast_paths::shm::ShmWaker)>,
}

/// A synchronization message as a mailbox word (never 0, which means "nothing yet"), if
/// its numbers fit: `(k + 1) << 24 | attempt << 2 | ok << 1 | failed`.
fn mail_word(sync: u64, attempt: u32, ok: bool, failed: bool) -> Option<u64> {
    let k = sync.checked_add(1).filter(|k| *k < 1 << 40)?;
    (attempt < 1 << 22).then(|| k << 24 | u64::from(attempt) << 2 | u64::from(ok) << 1 | u64::from(failed))
}

/// The numbers of a mailbox word: (sync, attempt, ok, failed).
fn mail_parts(w: u64) -> Option<(u64, u32, bool, bool)> {
    let k = (w >> 24).checked_sub(1)?;
    Some((k, ((w >> 2) & ((1 << 22) - 1)) as u32, w & 2 != 0, w & 1 != 0))
}

impl Mailbox {
    /// Rank `rank`'s mailbox in a group of `size` (`group`: their world ranks); None when a
    /// neighbour's doorbell cannot be opened (the messages are used then).
    fn new(jobdir: &FsPath, rank: usize, size: usize, group: &[u32]) -> Option<Mailbox> {
        let parent = steadfast_chbcast::tree_parent(0, rank as u32, size as u32).map(|p| p as usize);
        let children: Vec<usize> = steadfast_chbcast::tree_children(0, rank as u32, size as u32).into_iter().map(|c| c as usize).collect();
        let mut wakers = Vec::new();
        for &r in parent.iter().chain(&children) {
            match steadfast_paths::shm::ShmWaker::open(jobdir, *group.get(r)?) {
                Ok(w) => wakers.push((r, w)),
                Err(e) => {
                    tracing::debug!("channel broadcast: no doorbell of rank {r} ({e}); synchronizing with messages");
                    return None;
                }
            }
        }
        let seen_up = vec![0; children.len()];
        Some(Mailbox { parent, children, seen_up, seen_down: 0, wakers })
    }

    fn wake(&self, r: usize) {
        if let Some((_, w)) = self.wakers.iter().find(|(q, _)| *q == r) {
            w.wake();
        }
    }

    /// Whether a neighbour published a value not taken yet.
    fn pending(&self, seg: &Segment) -> bool {
        let up = self.children.iter().zip(&self.seen_up).any(|(&c, &seen)| seg.mailbox(c, false).is_some_and(|w| w.load(Ordering::Acquire) != seen));
        up || self.parent.and_then(|p| seg.mailbox(p, true)).is_some_and(|w| w.load(Ordering::Acquire) != self.seen_down)
    }
}

impl Driver {
    fn now(&mut self) -> Duration {
        self.clock = self.epoch.elapsed();
        self.clock
    }
}

fn call_error(e: CallError) -> MpiError {
    match e {
        CallError::Root => MpiError::new(ErrorClass::Root, "root is not a rank of the communicator"),
        CallError::TooLarge => MpiError::new(ErrorClass::Count, "broadcast too large for a channel"),
        other => MpiError::new(ErrorClass::Intern, format!("channel broadcast: {other:?}")),
    }
}

impl Engine {
    /// Where the channel path may apply (`Engine::segment_target`: an intracommunicator
    /// outside the fault-tolerant modes) with its ranks on this host or on several hosts.
    /// `spans` says whether the ranks are on several hosts (then the primitive is a
    /// multicast stream, which needs this rank's address towards the other hosts).
    fn channel_target(&self, comm: Handle) -> Option<(i32, i32, u32, bool)> {
        let (rank, size, ctx, local) = self.segment_target(comm)?;
        if local {
            return Some((rank, size, ctx, false));
        }
        // Multicast only where the host map (the same for every rank) puts the members on
        // several hosts: ranks of one host that do not share memory (`--path tcp`) use the tree.
        let host = self.coll.channels.host.as_ref()?;
        let c = self.comm(comm).ok()?;
        let host_of = |w: u32| host.hosts.get(w as usize).copied();
        let first = host_of(c.group[0])?;
        if c.group.iter().all(|&w| host_of(w) == Some(first)) {
            return None;
        }
        Some((rank, size, ctx, true))
    }

    /// MPI_Bcast over the channels; false if the selection rule picks another path.
    pub(crate) fn bcast_channels(&mut self, comm: Handle, b: &Buf, root: i32) -> MpiResult<bool> {
        let Some((rank, size, ctx, spans)) = self.channel_target(comm) else { return Ok(false) };
        let bytes = b.dtype.packed_size(b.count);
        if !(0..size).contains(&root) {
            return Ok(false);
        }
        let crowded = self.host_crowded();
        let cfg = self.coll.cfg.get_or_insert_with(super::CollConfig::from_env);
        let picked = if spans { select::bcast_multicast(cfg, size, bytes) } else { select::bcast_channels(cfg, size, bytes, crowded) };
        if !picked {
            return Ok(false);
        }
        if self.channel_queue_busy(ctx) {
            return self.channel_bcast_queued(comm, b, root).map(|()| true);
        }
        let Some(mut d) = self.channel_driver(comm, ctx, rank, size, spans)? else { return Ok(false) };
        let dest = if b.dtype.is_contiguous() { Dest::Contig(b.ptr) } else { Dest::Typed(b) };
        let r = self.channel_bcast(&mut d, dest, rank, root, bytes);
        self.coll.channels.drivers.put(ctx, Some(d));
        r.map(|()| true)
    }

    /// Whether broadcasts started as requests on context `ctx` are outstanding (or wait for
    /// its segment's agreement).
    fn channel_queue_busy(&self, ctx: u32) -> bool {
        self.coll.channels.ops.iter().any(|op| op.ctx == ctx) || self.coll.channels.waiting.iter().any(|w| w.ctx == ctx) || self.channel_setup_running(ctx)
    }

    /// A blocking broadcast on a communicator with `MPI_Ibcast`s outstanding: the channels
    /// take a communicator's broadcasts in call order and the requests' rounds advance all
    /// of them, so it runs as one more request, waited for here.
    fn channel_bcast_queued(&mut self, comm: Handle, b: &Buf, root: i32) -> MpiResult<()> {
        let Some(h) = self.ichannel(comm, &super::Coll::Bcast { buf: b.clone(), root }, None)? else {
            return Err(MpiError::new(ErrorClass::Intern, "channel broadcast: the rule changed its mind"));
        };
        let waited = self.wait(h);
        self.release(h);
        match waited?.error {
            None => Ok(()),
            Some(c) => Err(MpiError::new(c, "channel broadcast failed")),
        }
    }

    /// MPI_Bcast of `bytes` contiguous bytes at `ptr`, the application's common case without
    /// the general dispatch (no datatype, no collective description): over the shared-memory
    /// channels of a communicator that already has its driver, or, where neither channel
    /// rule picks the size, the small tree of [`Engine::bcast_small`]. False, having done
    /// nothing, wherever the general path might decide otherwise or has work to do first
    /// (the driver's set-up, multicast, a root out of range): the caller then takes the
    /// general path, which applies the same rules.
    pub fn bcast_contig(&mut self, comm: Handle, ptr: *mut u8, bytes: usize, root: i32) -> MpiResult<bool> {
        if self.fast_paths_off() || self.coordinated() {
            return Ok(false);
        }
        let Ok(c) = self.comm(comm) else { return Ok(false) };
        let (ctx, rank, size) = (c.ctx, c.rank, c.size());
        let crowded = self.host_crowded();
        let Some(cfg) = self.coll.cfg.as_ref() else { return Ok(false) };
        if !self.coll.channels.ops.is_empty() || !self.coll.channels.waiting.is_empty() {
            // Behind broadcasts started as requests, perhaps on this communicator.
            return Ok(false);
        }
        if !(0..size).contains(&root) {
            return Ok(false);
        }
        // The size first: the rule keeps small broadcasts on the tree by default.
        if !select::bcast_channels(cfg, size, bytes, crowded) {
            if select::bcast_multicast(cfg, size, bytes) {
                return Ok(false);
            }
            // No channel rule picks it, on this host or across hosts: the general path would
            // come to the small tree next (Bcast is never a slot collective, and run-through
            // is off).
            let b = Buf { ptr, count: bytes, dtype: super::byte_type() };
            return self.bcast_small(comm, &b, root);
        }
        // The driver used last serves this communicator if it was made for it: then the
        // communicator lies on this host (`channel_target`) without looking at its group.
        let hot = self.coll.channels.drivers.get(ctx).is_some_and(|d| d.comm == comm && std::sync::Arc::ptr_eq(&d.group, &c.group) && matches!(d.prim, Prim::Shm(_)));
        if !hot && self.channel_target(comm) != Some((rank, size, ctx, false)) {
            return Ok(false);
        }
        // Out of the table for the call (the broadcast may drive the engine, whose idle
        // waits service every other driver) and back after.
        let mut d = match self.coll.channels.drivers.take(ctx) {
            Some(Some(d)) if matches!(d.prim, Prim::Shm(_)) => d,
            other => {
                if let Some(entry) = other {
                    self.coll.channels.drivers.put(ctx, entry);
                }
                return Ok(false);
            }
        };
        let r = self.channel_bcast(&mut d, Dest::Contig(ptr), rank, root, bytes);
        self.coll.channels.drivers.put(ctx, Some(d));
        r.map(|()| true)
    }

    /// The communicator's driver; at the first use, rank 0 creates the segment and
    /// broadcasts its name over the tree (empty: none, every rank uses the tree).
    fn channel_driver(&mut self, comm: Handle, ctx: u32, rank: i32, size: i32, spans: bool) -> MpiResult<Option<Box<Driver>>> {
        match self.coll.channels.drivers.take(ctx) {
            Some(Some(d)) => return Ok(Some(d)),
            Some(None) => {
                // The tree for good on this communicator: keep saying so.
                self.coll.channels.drivers.put(ctx, None);
                return Ok(None);
            }
            None => {}
        }
        if spans {
            let d = self.mcast_driver(comm, rank, size)?;
            if d.is_none() {
                self.coll.channels.drivers.put(ctx, None);
            }
            return Ok(d);
        }
        let (channels, cap) = self.shm_channel_shape();
        // Checked before the agreement, so that a bad setting fails every rank alike.
        self.channel_faults()?;
        let made = self.agree_segment(
            comm,
            rank,
            SEGMENT_PREFIX,
            "channel broadcast",
            |p| Segment::create(p, channels, cap, size as usize),
            |p| Segment::open(p, channels, cap, size as usize),
        )?;
        let Some((seg, n)) = made else {
            // The tree for good on this communicator.
            self.coll.channels.drivers.put(ctx, None);
            return Ok(None);
        };
        self.shm_channel_driver(comm, rank, size, seg, &n).map(Some)
    }

    /// Channels and bytes per channel of a communicator's segment (the settings).
    fn shm_channel_shape(&mut self) -> (usize, usize) {
        let cfg = self.coll.cfg.get_or_insert_with(super::CollConfig::from_env);
        (cfg.channels.max(1) as usize, cfg.channel_slot)
    }

    /// The fault injection of the channel writes (`STEADFAST_COLL_CHANNEL_FAULTS`), if set.
    fn channel_faults(&mut self) -> MpiResult<Option<Faults>> {
        let cfg = self.coll.cfg.get_or_insert_with(super::CollConfig::from_env);
        match &cfg.channel_faults {
            Some(spec) => Faults::parse(spec).map(Some).map_err(|e| MpiError::new(ErrorClass::Arg, format!("STEADFAST_COLL_CHANNEL_FAULTS: {e}"))),
            None => Ok(None),
        }
    }

    /// The driver of a communicator whose ranks agreed on segment `seg` (named `name`).
    fn shm_channel_driver(&mut self, comm: Handle, rank: i32, size: i32, seg: Segment, name: &str) -> MpiResult<Box<Driver>> {
        let (channels, cap) = self.shm_channel_shape();
        let cfg = self.coll.cfg.get_or_insert_with(super::CollConfig::from_env);
        let (crc, sync_every) = (cfg.channel_crc, select::channel_sync(cfg));
        let faults = self.channel_faults()?;
        if rank == 0 {
            tracing::info!("channel broadcast: segment {name}, {channels} channels of {cap} bytes, {size} ranks");
        }
        let jobdir = self.coll.channels.host.as_ref().map(|h| h.jobdir.clone()).unwrap_or_default();
        let mcfg = ChbConfig { channels: channels as u32, sync_every, crc, ..ChbConfig::default() };
        let machine = Machine::new(rank as u32, size as u32, mcfg);
        let group = self.comm(comm)?.group.clone();
        let mail = Mailbox::new(&jobdir, rank as usize, size as usize, &group);
        Ok(Box::new(Driver { comm, group, machine, prim: Prim::Shm(seg), cap, epoch: Instant::now(), scratch: Vec::new(), last_read: None, rounds: 0, sends: Vec::new(), incoming: None, faults, mail, calls: 0, clock: Duration::ZERO, early: Vec::new() }))
    }

    /// Rank 0's segment for the background agreement of a rank at `MPI_THREAD_MULTIPLE`
    /// (what `agree_segment`'s `make` does): None, and a warning, where it cannot be made.
    pub(super) fn shm_channel_create(&mut self, size: i32) -> Option<(Segment, String)> {
        let (channels, cap) = self.shm_channel_shape();
        let jobdir = self.coll.channels.host.as_ref()?.jobdir.clone();
        let n = self.segment_name(SEGMENT_PREFIX);
        match Segment::create(&jobdir.join(&n), channels, cap, size as usize) {
            Ok(seg) => Some((seg, n)),
            Err(e) => {
                tracing::warn!("channel broadcast segment {n}: {e}; using messages on this communicator");
                None
            }
        }
    }

    /// The background agreement of a rank at `MPI_THREAD_MULTIPLE` ended: install the
    /// driver (rank 0's `created` segment, the one named `name`, or none for good when the
    /// name is empty) and start the broadcast `c` under the application's request `user`,
    /// over the channels or, without them, by messages.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn channel_setup_finish(&mut self, user: Handle, comm: Handle, ctx: u32, rank: i32, size: i32, created: Option<Segment>, name: &str, c: &super::Coll, tag: Option<i32>) -> MpiResult<()> {
        let r = self.channel_setup_install(comm, ctx, rank, size, created, name).and_then(|()| self.channel_start_or_send(user, comm, ctx, rank, c, tag));
        // The broadcasts called meanwhile, in call order, whatever became of this one.
        let (waiting, rest) = std::mem::take(&mut self.coll.channels.waiting).into_iter().partition(|w| w.ctx == ctx);
        self.coll.channels.waiting = rest;
        for w in waiting {
            let Waiting { user, comm, ctx, coll, tag } = w;
            if let Err(e) = self.channel_start_or_send(user, comm, ctx, rank, &coll, tag) {
                if matches!(self.is_complete(user), Ok(false)) {
                    self.coll_request_done(user, Some(e.class));
                }
            }
        }
        r
    }

    /// Broadcast `c` under request `user` over the driver of `ctx`, or by messages (with
    /// `tag`, see `Setup::tag`) where the communicator has none.
    fn channel_start_or_send(&mut self, user: Handle, comm: Handle, ctx: u32, rank: i32, c: &super::Coll, tag: Option<i32>) -> MpiResult<()> {
        let super::Coll::Bcast { buf, root } = c else { return Err(MpiError::new(ErrorClass::Intern, "channel broadcast of another collective")) };
        match self.coll.channels.drivers.take(ctx) {
            Some(Some(d)) => {
                self.coll.channels.drivers.put(ctx, Some(d));
                self.ichannel_start(user, ctx, rank, *root, buf.clone())
            }
            Some(None) => {
                self.coll.channels.drivers.put(ctx, None);
                let s = self.prepare(comm, c, tag)?;
                self.coll_launch(user, s)
            }
            None => Err(MpiError::new(ErrorClass::Intern, "channel broadcast: the communicator has no driver")),
        }
    }

    /// The driver of `ctx` once its agreement ended: rank 0's `created` segment, the one
    /// named `name`, or none for good when the name is empty.
    fn channel_setup_install(&mut self, comm: Handle, ctx: u32, rank: i32, size: i32, created: Option<Segment>, name: &str) -> MpiResult<()> {
        let seg = match created {
            _ if name.is_empty() => None,
            Some(seg) => Some(seg),
            None => {
                let (channels, cap) = self.shm_channel_shape();
                let jobdir = self.coll.channels.host.as_ref().map(|h| h.jobdir.clone()).unwrap_or_default();
                Some(Segment::open(&jobdir.join(name), channels, cap, size as usize).map_err(|e| MpiError::new(ErrorClass::Other, format!("opening channel broadcast segment {name}: {e}")))?)
            }
        };
        let d = match seg {
            Some(seg) => Some(self.shm_channel_driver(comm, rank, size, seg, name)?),
            None => None,
        };
        self.coll.channels.drivers.put(ctx, d);
        Ok(())
    }

    /// [`Engine::bcast_channels`] as a request, for `MPI_Ibcast` (`tag` reserved for it) and
    /// for a rank at `MPI_THREAD_MULTIPLE`, which waits for its blocking calls with the
    /// library lock released (`tag` None): where the rule picks the channels, the broadcast
    /// as a request (the communicator's first one after a background agreement on its
    /// segment, those called during the agreement after it); None where the caller takes
    /// the messages, as every other rank then does.
    pub(crate) fn ichannel(&mut self, comm: Handle, c: &super::Coll, tag: Option<i32>) -> MpiResult<Option<Handle>> {
        let super::Coll::Bcast { buf, root } = c else { return Ok(None) };
        let root = *root;
        let bytes = buf.dtype.packed_size(buf.count);
        // The size first, before the communicator's placement: most MPI_Ibcasts are too
        // small for either rule, and this check is a fifth of their time.
        let Ok(size) = self.comm(comm).map(|c| c.size()) else { return Ok(None) };
        // An MPI_Ibcast takes the channels up to their capacity even where a blocking
        // broadcast would go linear (`select::bcast_linear_long`): the root's linear messages
        // move only while it is in the library, the channels' copies while the receivers
        // are. OSU overlap test, 2 CPUs, medians of 8 alternating launches, µs, linear /
        // channels / Open MPI: 4 ranks 1 MiB 527 / 458 / 459, 512 KiB 242 / 232 / 244;
        // 3 ranks 1 MiB 392 / 376 / 295.
        let crowded = tag.is_none() && self.host_crowded();
        let cfg = self.coll.cfg.get_or_insert_with(super::CollConfig::from_env);
        if !select::bcast_channels(cfg, size, bytes, crowded) && !select::bcast_multicast(cfg, size, bytes) {
            return Ok(None);
        }
        let Some((rank, size, ctx, spans)) = self.channel_target(comm) else { return Ok(None) };
        if spans && tag.is_some() {
            // MPI_Ibcast across hosts keeps the schedule: the stream's set-up would have to
            // run in the background (it waits for every host), and a communicator's first
            // MPI_Ibcast may be called while another rank blocks elsewhere (docs/chbcast.md).
            return Ok(None);
        }
        if !(0..size).contains(&root) || self.use_corrected_bcast(comm, bytes) {
            return Ok(None);
        }
        let cfg = self.coll.cfg.get_or_insert_with(super::CollConfig::from_env);
        let picked = if spans { select::bcast_multicast(cfg, size, bytes) } else { select::bcast_channels(cfg, size, bytes, crowded) };
        if !picked {
            return Ok(None);
        }
        if !spans && self.channel_setup_running(ctx) {
            // The segment is being agreed on: after the broadcast that started that.
            let user = self.coll_request(false);
            self.coll.channels.waiting.push(Waiting { user, comm, ctx, coll: c.clone(), tag });
            return Ok(Some(user));
        }
        match self.coll.channels.drivers.take(ctx) {
            Some(None) => {
                self.coll.channels.drivers.put(ctx, None);
                Ok(None)
            }
            Some(Some(d)) => {
                self.coll.channels.drivers.put(ctx, Some(d));
                let user = self.coll_request(false);
                if let Err(e) = self.ichannel_start(user, ctx, rank, root, buf.clone()) {
                    self.coll_request_done(user, Some(e.class));
                }
                Ok(Some(user))
            }
            None if spans => {
                // The multicast stream's set-up (draw, join, probe, every host's answer)
                // has no background form: it runs here, with the lock held, as on the
                // other ranks (docs/chbcast.md); the broadcasts after it are requests.
                let user = self.coll_request(false);
                match self.bcast_channels(comm, buf, root) {
                    Ok(true) => self.coll_request_done(user, None),
                    Ok(false) => {
                        let s = self.prepare(comm, c, tag)?;
                        self.coll_launch(user, s)?;
                    }
                    Err(e) => self.coll_request_done(user, Some(e.class)),
                }
                Ok(Some(user))
            }
            None => {
                self.channel_faults()?;
                self.channel_setup(comm, ctx, c, tag).map(Some)
            }
        }
    }

    /// Start broadcast `buf` from `root` on the driver of `ctx` as the request `user`.
    fn ichannel_start(&mut self, user: Handle, ctx: u32, rank: i32, root: i32, buf: Buf) -> MpiResult<()> {
        let Some(Some(mut d)) = self.coll.channels.drivers.take(ctx) else {
            return Err(MpiError::new(ErrorClass::Intern, "channel broadcast: the communicator has no driver"));
        };
        let bytes = buf.dtype.packed_size(buf.count);
        let started = (|| {
            let packed;
            let data: Option<&[u8]> = if rank != root {
                None
            } else if buf.dtype.is_contiguous() {
                // SAFETY: the root's buffer holds `bytes` bytes of a contiguous type.
                Some(unsafe { std::slice::from_raw_parts(buf.ptr, bytes) })
            } else {
                let mut v = vec![0u8; bytes];
                // SAFETY: the root's buffer holds `count` elements of its type.
                unsafe { buf.dtype.pack(buf.ptr, buf.count, &mut v) };
                packed = v;
                Some(&packed[..])
            };
            let now = d.now();
            d.machine.bcast(now, root as u32, data).map_err(call_error)
        })();
        self.coll.channels.drivers.put(ctx, Some(d));
        let seq = started?;
        self.coll.channels.ops.push(ChannelOp { user, ctx, seq, rank, root, bytes, buf });
        Ok(())
    }

    /// One round of every broadcast started as a request; whether any completed.
    pub(crate) fn channel_ops_progress(&mut self) -> bool {
        if self.coll.channels.ops.is_empty() {
            return false;
        }
        let mut ops = std::mem::take(&mut self.coll.channels.ops);
        let mut finished = false;
        let mut i = 0;
        while i < ops.len() {
            let op = &ops[i];
            let r = match self.coll.channels.drivers.take(op.ctx) {
                Some(Some(mut d)) => {
                    let dest = if op.buf.dtype.is_contiguous() { Dest::Contig(op.buf.ptr) } else { Dest::Typed(&op.buf) };
                    let r = self.channel_round(&mut d, op.seq, op.rank, op.root, op.bytes, dest, false);
                    self.coll.channels.drivers.put(op.ctx, Some(d));
                    r.map(|(_, done)| done)
                }
                // Out of the table: a caller up the stack pumps it (`channels_service` takes
                // every driver out while it pumps them, and a pump may wait, which comes
                // here). The broadcast goes on once the driver is back.
                None => Ok(false),
                Some(None) => {
                    self.coll.channels.drivers.put(op.ctx, None);
                    Err(MpiError::new(ErrorClass::Intern, "channel broadcast: the communicator has no driver"))
                }
            };
            match r {
                Ok(false) => i += 1,
                Ok(true) => {
                    let op = ops.swap_remove(i);
                    self.coll_request_done(op.user, None);
                    finished = true;
                }
                Err(e) => {
                    let op = ops.swap_remove(i);
                    tracing::warn!("channel broadcast {} (root {}): {e}", op.seq, op.root);
                    self.coll_request_done(op.user, Some(e.class));
                    finished = true;
                }
            }
        }
        ops.append(&mut self.coll.channels.ops);
        self.coll.channels.ops = ops;
        finished
    }

    /// The driver of a communicator spread over hosts: rank 0 draws the stream (group,
    /// port, id) and sends it over the tree; each host's leader joins the group and makes
    /// the host's channels, its host-mates open them; rank 0 probes the stream and every
    /// leader says whether a probe reached it. Any rank that could not take its part makes
    /// every rank use the tree on that communicator for good.
    fn mcast_driver(&mut self, comm: Handle, rank: i32, size: i32) -> MpiResult<Option<Box<Driver>>> {
        let cfg = self.coll.cfg.get_or_insert_with(super::CollConfig::from_env).clone();
        let faults = match &cfg.channel_faults {
            Some(spec) => Some(Faults::parse(spec).map_err(|e| MpiError::new(ErrorClass::Arg, format!("STEADFAST_COLL_CHANNEL_FAULTS: {e}")))?),
            None => None,
        };
        // A rank without an address towards the other hosts still takes part in the set-up
        // (every rank must make the same calls) and declines the stream there.
        let iface = self.coll.channels.host.as_ref().and_then(|h| h.net_ip);
        let channels = cfg.channels.max(1) as usize;
        let partial = 2 * channels + 2;
        let job_key = self.job_key;
        // This host's members of the communicator; the lowest is the one in the group.
        let (mates, leader_world) = {
            let c = self.comm(comm)?;
            let me = self.rank;
            let (local, hosts) = self.coll.channels.host.as_ref().map(|h| (h.local.clone(), h.hosts.clone())).unwrap_or_default();
            let mine = hosts.get(me as usize).copied();
            let same = |w: u32| w == me || mine.is_some() && hosts.get(w as usize).copied() == mine || local.get(w as usize).copied().unwrap_or(false);
            let mates: Vec<i32> = (0..size).filter(|&i| same(c.group[i as usize])).collect();
            let lw = mates.first().map_or(me, |&l| c.group[l as usize]);
            (mates, lw)
        };
        let leader = mates.first() == Some(&rank);
        let jobdir = self.coll.channels.host.as_ref().map(|h| h.jobdir.clone());
        let open = |s: Stream| match iface {
            Some(ip) => Mcast::open(s, ip, leader, cfg.mcast_ttl, rank as u32, job_key, cfg.mcast_fragment, partial),
            None => Err(std::io::Error::other("no address of this rank reaches the other hosts")),
        };
        let mut name = Vec::new();
        let mut mine = None;
        if rank == 0 {
            match Stream::draw(&cfg.mcast_groups) {
                Ok(s) => match open(s) {
                    Ok(m) => {
                        name = s.encode();
                        mine = Some(m);
                    }
                    Err(e) => tracing::warn!("multicast stream {}: {e}; using the tree on this communicator", s.group),
                },
                Err(e) => tracing::warn!("STEADFAST_COLL_MCAST_GROUPS: {e}; using the tree"),
            }
        }
        self.bcast_bytes(comm, 0, &mut name)?;
        if name.is_empty() {
            return Ok(None);
        }
        let Some(stream) = Stream::decode(&name) else { return Err(MpiError::new(ErrorClass::Intern, "multicast stream name garbled on the tree")) };
        let deaf = self.coll.channels.mcast_deaf && leader;
        let m = match mine {
            Some(m) if !deaf => Some(m),
            Some(_) => None,
            None if deaf => None,
            None => match open(stream) {
                Ok(m) => Some(m),
                Err(e) => {
                    tracing::warn!("joining multicast stream {} on {iface:?}: {e}; using the tree on this communicator", stream.group);
                    None
                }
            },
        };
        // The host's channels: the leader makes them, named after the stream and itself, so
        // its host-mates find them without another exchange.
        let seg_path = jobdir.map(|j| j.join(format!("chb-m{:016x}-{leader_world}", stream.id)));
        let mut host = None;
        let mut m = m;
        if leader && mates.len() > 1 && m.is_some() {
            match seg_path.as_ref().map(|p| Segment::create(p, channels, cfg.channel_slot, 0)) {
                Some(Ok(seg)) => host = Some(seg),
                Some(Err(e)) => {
                    tracing::warn!("host channels of multicast stream {}: {e}; using the tree on this communicator", stream.group);
                    m = None;
                }
                None => m = None,
            }
        }
        // Everyone joined (or says it could not) before the probes go out.
        if self.allreduce_max_u64(comm, u64::from(m.is_none()))? != 0 {
            return Ok(None);
        }
        let Some(mut m) = m else { return Ok(None) };
        if !leader {
            match seg_path.as_ref().map(|p| Segment::open(p, channels, cfg.channel_slot, 0)) {
                Some(Ok(seg)) => host = Some(seg),
                Some(Err(e)) => tracing::warn!("opening the host channels of multicast stream {}: {e}", stream.group),
                None => {}
            }
        }
        // Only the leaders other than rank 0 listen for the probes.
        let mut heard = rank == 0 || !leader && host.is_some();
        if rank == 0 {
            // Probes at 0, 1, 2, 4, ... 64 ms: a group the network takes a moment to
            // forward (a switch learning the membership) is still found.
            let mut gap = Duration::from_millis(1);
            for i in 0..8 {
                if let Err(e) = m.probe() {
                    tracing::warn!("probing multicast stream {}: {e}", stream.group);
                    heard = false;
                    break;
                }
                if i < 7 {
                    std::thread::sleep(gap);
                    gap *= 2;
                }
            }
        } else if leader {
            let until = Instant::now() + PROBE_WAIT;
            while !heard {
                let d = m.drain(|_| {});
                for _ in 0..d.refused {
                    self.dropped_packet();
                }
                heard = d.probes > 0;
                let now = Instant::now();
                if heard || now >= until {
                    break;
                }
                m.wait(until - now);
            }
            if !heard {
                self.coll.channels.mcast_deaf = true;
                tracing::warn!("no probe of multicast stream {} reached this rank in {PROBE_WAIT:?}; using the tree on this communicator", stream.group);
            }
        }
        if self.allreduce_max_u64(comm, u64::from(!heard))? != 0 {
            return Ok(None);
        }
        tracing::info!(
            "channel broadcast: multicast stream {} on {}, {channels} channels of {} bytes, {size} ranks, {} on this host; this rank {}",
            stream.group,
            iface.map_or_else(String::new, |i| i.to_string()),
            cfg.channel_slot,
            mates.len(),
            if leader { "is in the group" } else { "reads the host's channels" }
        );
        let mcfg = ChbConfig { channels: channels as u32, sync_every: select::channel_sync(&cfg), crc: cfg.channel_crc, ..ChbConfig::default() };
        let machine = Machine::new(rank as u32, size as u32, mcfg);
        let prim = Prim::Mcast(McastPrim { m, leader, host, relayed: Default::default() });
        let group = self.comm(comm)?.group.clone();
        Ok(Some(Box::new(Driver { comm, group, machine, prim, cap: cfg.channel_slot, epoch: Instant::now(), scratch: Vec::new(), last_read: None, rounds: 0, sends: Vec::new(), incoming: None, faults, mail: None, calls: 0, clock: Duration::ZERO, early: Vec::new() })))
    }

    fn channel_bcast(&mut self, d: &mut Driver, dest: Dest, rank: i32, root: i32, bytes: usize) -> MpiResult<()> {
        let packed;
        let data: Option<&[u8]> = if rank == root {
            match dest {
                // SAFETY: the root's buffer holds `bytes` bytes of a contiguous type.
                Dest::Contig(ptr) => Some(unsafe { std::slice::from_raw_parts(ptr, bytes) }),
                Dest::Typed(b) => {
                    let mut v = vec![0u8; bytes];
                    // SAFETY: the buffer holds `count` elements of its type.
                    unsafe { b.dtype.pack(b.ptr, b.count, &mut v) };
                    packed = v;
                    Some(&packed[..])
                }
            }
        } else {
            None
        };
        // The clock only sets the machine's deadlines: read it where a synchronization
        // starts (its backoff) and every few calls, else pass the last reading.
        d.calls = d.calls.wrapping_add(1);
        let full = d.calls.is_multiple_of(FULL_PUMP_EVERY);
        let now = if full || d.machine.next_call_starts_sync() { d.now() } else { d.clock };
        // The common case on one host, where nothing waits: a root whose channel is free
        // writes its frame straight into it and returns; a receiver whose broadcast is
        // already in its channel (the root ran ahead) checks it and copies it straight into
        // the buffer. No queued write, no event, no frame copy, no message poll: the
        // synchronization's words and anything the machine queued go out as usual, the
        // messages and timers are looked at every few calls.
        if let (Dest::Contig(ptr), Prim::Shm(seg), None) = (dest, &d.prim, &d.faults) {
            let direct = match data {
                Some(data) => match d.machine.bcast_root_now(now, data).map_err(call_error)? {
                    Some((seq, ch, frame)) => {
                        if !seg.write(ch as usize, seq, &frame) {
                            d.machine.primitive_failed();
                        }
                        true
                    }
                    None => false,
                },
                None => d.machine.bcast_in_place(now, root as u32, |seq, ch| seg.read_into(ch as usize, seq, root as u32, ptr, bytes)).map_err(call_error)?.is_some(),
            };
            if direct {
                // Only `Released` and `FailedOver` can be queued here (this call was the
                // next due, no later call exists): taken so they do not pile up.
                while let Some(ev) = d.machine.poll_event() {
                    if ev == Event::FailedOver {
                        tracing::info!("channel broadcast: primitive abandoned, using the point-to-point tree");
                    }
                }
                // Outside a synchronization no word is due: a parent's `Down` answers this
                // rank's `Up`, and a child's `Up` waits in its word until this rank
                // synchronizes too (a child writes its next one only after that `Down`).
                if full {
                    self.channel_pump(d)?;
                } else if d.machine.syncing() {
                    Self::channel_mail(d);
                    self.channel_flush(d)?;
                } else if d.machine.has_output() || !d.sends.is_empty() {
                    self.channel_flush(d)?;
                }
                return Ok(());
            }
        }
        let seq = d.machine.bcast(now, root as u32, data).map_err(call_error)?;
        let mut idle = 0u32;
        let mut sleep = Duration::from_micros(10);
        // The first round of a call only moves what the call itself needs (its write, the
        // synchronization's words); messages and timers are looked at in every later round
        // and in the first round of every few calls.
        let mut light = !full;
        loop {
            let (busy, done) = self.channel_round(d, seq, rank, root, bytes, dest, std::mem::take(&mut light))?;
            if done {
                return Ok(());
            }
            if self.progress()? || busy {
                idle = 0;
                sleep = Duration::from_micros(10);
                continue;
            }
            idle += 1;
            if idle >= self.cfg.spin {
                // The other communicators' channel broadcasts: a rank this one waits for may
                // be waiting for this one there (a repair, a synchronization).
                self.channels_service()?;
            }
            if idle < self.cfg.spin {
                std::hint::spin_loop();
            } else if idle < self.cfg.spin + self.cfg.yields.max(64) {
                self.yield_cpu();
            } else if d.machine.syncing() {
                // The synchronization's messages, and its mailbox writers, ring the path's
                // doorbell; the mailboxes are looked at again after this rank announced its
                // sleep, so a value written just before is not slept through.
                let now = d.now();
                let until = d.machine.poll_timeout().map_or(SYNC_SLEEP, |t| t.saturating_sub(now).min(SYNC_SLEEP));
                match (&d.mail, &d.prim) {
                    (Some(mail), Prim::Shm(seg)) => self.sleep_on_path_unless(until, &mut || mail.pending(seg))?,
                    _ => self.sleep_on_path(until)?,
                }
            } else if let Prim::Mcast(McastPrim { m, leader: true, .. }) = &d.prim {
                // A datagram wakes the poll; the synchronization's and the repairs'
                // messages come through the path, looked at once per sleep.
                m.wait(sleep);
                sleep = (sleep * 2).min(MAX_SLEEP);
            } else if idle < self.cfg.spin + FRAME_YIELDS {
                // A slot write rings no doorbell: the root is a yield away when ranks
                // outnumber CPUs.
                self.yield_cpu();
            } else {
                std::thread::sleep(sleep);
                sleep = (sleep * 2).min(MAX_SLEEP);
                if idle % 1024 == 0 {
                    tracing::debug!(
                        "channel broadcast {seq} (root {root}) still waiting: released {}, syncing {}, {:?}",
                        d.machine.released(),
                        d.machine.syncing(),
                        d.machine.stats()
                    );
                }
            }
        }
    }

    /// One round of broadcast `seq`, started with `Machine::bcast`: move what the driver
    /// has (with `light`, only the synchronization's words and the queued output), read the
    /// frame at a receiver, and take the machine's events, a delivered broadcast into
    /// `dest`; returns whether anything moved and whether the broadcast is complete.
    #[allow(clippy::too_many_arguments)]
    fn channel_round(&mut self, d: &mut Driver, seq: u64, rank: i32, root: i32, bytes: usize, dest: Dest, light: bool) -> MpiResult<(bool, bool)> {
        let mut busy = if light { Self::channel_mail(d) | self.channel_flush(d)? } else { self.channel_pump(d)? };
        let ch = d.machine.channel_of(seq) as usize;
        let mut done = false;
        if let (Dest::Contig(ptr), true) = (dest, rank != root && d.faults.is_none() && matches!(d.prim, Prim::Shm(_))) {
            // The frame straight into the caller's buffer, checked as it is copied (as a
            // blocking receiver that finds it there reads it), where the machine lets the
            // call complete so: one copy instead of the frame's copy, its check, the
            // delivery's buffer and the copy out of it (4 ranks on 2 CPUs, 1 MiB MPI_Ibcast:
            // 109-119 µs of communication against 175-183).
            let now = d.now();
            if let Prim::Shm(seg) = &d.prim {
                done = d.machine.take_in_place(now, seq, |ch| seg.read_into(ch as usize, seq, root as u32, ptr, bytes));
            }
        }
        let seg = match &d.prim {
            Prim::Shm(seg) => Some(seg),
            Prim::Mcast(p) => p.host.as_ref(),
        };
        if let (Some(seg), false) = (seg, done) {
            if rank != root && seg.read(ch, seq, &mut d.scratch, &mut d.last_read) {
                let now = d.now();
                d.machine.frame_arrived(now, &d.scratch);
            }
        }
        let kept = d.early.iter().position(|e| matches!(e, Event::Sent { seq: s } | Event::Delivered { seq: s, .. } if *s == seq));
        let mut kept = kept.map(|i| d.early.swap_remove(i));
        while let Some(ev) = kept.take().or_else(|| d.machine.poll_event()) {
            match ev {
                Event::Sent { seq: s } if s == seq => done = true,
                Event::Sent { .. } => d.early.push(ev),
                Event::Delivered { seq: s, .. } if s != seq => d.early.push(ev),
                Event::Delivered { seq: s, data, .. } if s == seq => {
                    if data.len() != bytes {
                        return Err(MpiError::new(ErrorClass::Truncate, format!("broadcast of {} bytes into a buffer of {bytes}", data.len())));
                    }
                    // SAFETY: the buffer holds `count` elements of its type, `bytes` packed.
                    unsafe {
                        match dest {
                            Dest::Contig(ptr) => std::ptr::copy_nonoverlapping(data.as_ptr(), ptr, bytes),
                            Dest::Typed(b) => {
                                b.dtype.unpack(&data, b.ptr, b.count);
                            }
                        }
                    }
                    done = true;
                }
                Event::FailedOver => tracing::info!("channel broadcast: primitive abandoned, using the point-to-point tree"),
                _ => {}
            }
        }
        // What the events caused (a synchronization's result passed down) leaves now.
        busy |= self.channel_flush(d)?;
        Ok((busy, done))
    }

    /// The synchronization's words of the tree neighbours, into the machine; whether any
    /// was new.
    fn channel_mail(d: &mut Driver) -> bool {
        let mut taken = false;
        if let (Some(mail), Prim::Shm(seg)) = (&mut d.mail, &d.prim) {
            let epoch = d.epoch;
            for (i, &c) in mail.children.iter().enumerate() {
                let Some(w) = seg.mailbox(c, false).map(|w| w.load(Ordering::Acquire)) else { continue };
                if w != mail.seen_up[i] {
                    mail.seen_up[i] = w;
                    if let Some((sync, attempt, ok, failed)) = mail_parts(w) {
                        d.machine.handle(epoch.elapsed(), c as u32, Message::Up { sync, attempt, ok, failed });
                        taken = true;
                    }
                }
            }
            if let Some(p) = mail.parent {
                let w = seg.mailbox(p, true).map_or(0, |w| w.load(Ordering::Acquire));
                if w != mail.seen_down {
                    mail.seen_down = w;
                    if let Some((sync, attempt, ok, failed)) = mail_parts(w) {
                        d.machine.handle(epoch.elapsed(), p as u32, Message::Down { sync, attempt, ok, failed });
                        taken = true;
                    }
                }
            }
        }
        taken
    }

    /// Messages in, timeouts, messages and writes out; whether anything happened.
    fn channel_pump(&mut self, d: &mut Driver) -> MpiResult<bool> {
        let ctx = self.comm(d.comm)?.coll_ctx();
        let mut busy = false;
        if let Prim::Mcast(p) = &mut d.prim {
            let machine = &mut d.machine;
            let epoch = d.epoch;
            let mut frames = 0u32;
            let (host, relayed) = (&p.host, &mut p.relayed);
            let got = p.m.drain(|f| {
                frames += 1;
                // Passed on before the machine sees it: the host-mates wait for it too.
                // Only intact frames of broadcasts not yet released (an older one's slot
                // may hold a newer broadcast by now).
                if let (Some(seg), Ok(h)) = (host, frame::decode(f)) {
                    if h.seq >= machine.released() && relayed.insert(h.seq) {
                        seg.write(machine.channel_of(h.seq) as usize, h.seq, f);
                    }
                }
                machine.frame_arrived(epoch.elapsed(), f);
            });
            busy |= frames > 0;
            for _ in 0..got.refused {
                self.dropped_packet();
            }
            if frames > 0 {
                let released = d.machine.released();
                p.m.forget_below(released);
                p.relayed = p.relayed.split_off(&released);
            }
        }
        busy |= Self::channel_mail(d);
        // A large message is received without waiting for it here: its sender may never
        // stream it while this rank waits (it returned from its broadcast and went on; at
        // the end of the job it sits in MPI_Finalize's fence, which runs no progress, while
        // this rank, still in its own MPI_Finalize, pumps a freed communicator's driver: a
        // late copy of a frame over the tree hung a job so). The receive goes on with the
        // engine's progress; the messages after it wait for it, so the machine sees them in
        // the order they came.
        let waited = d.incoming.is_some();
        let mut intake = self.channel_incoming(d);
        busy |= waited && intake;
        while intake {
            let Some(a) = self.next_arrived(ctx, TAG) else { break };
            busy = true;
            match a {
                Arrived::Data { src, data } => self.channel_message(d, src, &data),
                Arrived::Announced { src, len } => {
                    let mut buf = vec![0u8; usize::try_from(len).unwrap_or(usize::MAX).min(frame::HEADER + d.cap + 64)];
                    let byte = self.byte_type();
                    let req = self.coll_irecv_typed(d.comm, src, TAG, buf.as_mut_ptr(), buf.len(), byte)?;
                    // The buffer moves with its vector, not its bytes: the request's pointer
                    // stays valid while the driver holds it.
                    d.incoming = Some(Incoming { req, buf, src });
                    intake = self.channel_incoming(d);
                }
            }
        }
        // The machine's timers are milliseconds long: look at them every few rounds only
        // (reading the clock and the window's calls costs more than the rest of a round).
        d.rounds = d.rounds.wrapping_add(1);
        if d.rounds % 64 == 0 {
            let now = d.now();
            if d.machine.poll_timeout().is_some_and(|t| t <= now) {
                d.machine.handle_timeout(now);
                busy = true;
            }
        }
        busy |= self.channel_flush(d)?;
        Ok(busy)
    }

    /// A message from `src` of the driver's, into its machine (a malformed one is counted
    /// and dropped).
    fn channel_message(&mut self, d: &mut Driver, src: i32, bytes: &[u8]) {
        match Message::decode(bytes) {
            Ok(m) => {
                let now = d.now();
                d.machine.handle(now, src as u32, m);
            }
            Err(_) => self.dropped_packet(),
        }
    }

    /// The driver's message being received ([`Driver::incoming`]), into its machine if it
    /// completed: whether none is outstanding any more (the later messages may be taken).
    fn channel_incoming(&mut self, d: &mut Driver) -> bool {
        let Some(inc) = &d.incoming else { return true };
        // A request the engine no longer knows counts as ended, its message as lost.
        if !self.is_complete(inc.req).unwrap_or(true) {
            return false;
        }
        let Some(Incoming { req, mut buf, src }) = d.incoming.take() else { return true };
        let status = self.status(req);
        self.release(req);
        match status {
            Ok(st) => {
                buf.truncate(usize::try_from(st.bytes).unwrap_or(usize::MAX));
                self.channel_message(d, src, &buf);
            }
            Err(_) => self.dropped_packet(),
        }
        true
    }

    fn channel_flush(&mut self, d: &mut Driver) -> MpiResult<bool> {
        let mut busy = false;
        if !d.sends.is_empty() {
            d.sends.retain_mut(|(h, _)| !self.test_done(*h));
        }
        while let Some(t) = d.machine.poll_transmit() {
            busy = true;
            match t {
                Transmit::Write { channel, frame } => {
                    let seq = u64::from_le_bytes(frame[..8].try_into().unwrap_or([0; 8]));
                    // The fault hook damages a private copy: the machine keeps the intact frame
                    // for retransmission.
                    let mut damaged: Option<Vec<u8>> = None;
                    let mut skip = false;
                    let mut fail = false;
                    if let Some(f) = d.faults.as_mut() {
                        f.writes += 1;
                        fail = f.fail_after.is_some_and(|n| f.writes > n);
                        skip = f.chance(f.drop) || f.cut_after.is_some_and(|n| f.writes > n);
                        if f.chance(f.corrupt) && !frame.is_empty() {
                            let bit = (f.state as usize) % (frame.len() * 8);
                            let mut copy = frame.to_vec();
                            copy[bit / 8] ^= 1 << (bit % 8);
                            damaged = Some(copy);
                        }
                    }
                    let frame: &[u8] = damaged.as_deref().unwrap_or(&frame);
                    let written = skip
                        || match &mut d.prim {
                            Prim::Shm(seg) => seg.write(channel as usize, seq, frame),
                            Prim::Mcast(p) => match p.m.write(seq, frame) {
                                Ok(()) => p.host.as_ref().is_none_or(|seg| seg.write(channel as usize, seq, frame)),
                                Err(e) => {
                                    tracing::warn!("multicast write of broadcast {seq}: {e}");
                                    false
                                }
                            },
                        };
                    if fail || !written {
                        d.machine.primitive_failed();
                    }
                }
                Transmit::Send { to, message } => {
                    if let (Some(mail), Prim::Shm(seg)) = (&d.mail, &d.prim) {
                        let (word, down) = match message {
                            Message::Up { sync, attempt, ok, failed } => (mail_word(sync, attempt, ok, failed), false),
                            Message::Down { sync, attempt, ok, failed } => (mail_word(sync, attempt, ok, failed), true),
                            _ => (None, false),
                        };
                        let me = d.machine.rank() as usize;
                        if let (Some(v), Some(slot)) = (word, seg.mailbox(me, down)) {
                            // A `Down` goes to each child: one store serves them all.
                            slot.store(v, Ordering::Release);
                            mail.wake(to as usize);
                            continue;
                        }
                    }
                    let bytes = message.encode();
                    if bytes.len() <= self.eager_limit() {
                        self.coll_send_bytes(d.comm, to as i32, TAG, &bytes)?;
                    } else {
                        let byte = self.byte_type();
                        let h = self.coll_isend_typed(d.comm, to as i32, false, TAG, bytes.as_ptr(), bytes.len(), byte)?;
                        d.sends.push((h, bytes));
                    }
                }
            }
        }
        Ok(busy)
    }

    /// Whether request `h` completed; a completed one is released.
    fn test_done(&mut self, h: Handle) -> bool {
        match self.request(h) {
            Ok(r) if !r.complete => false,
            _ => {
                self.release(h);
                true
            }
        }
    }

    /// Answer what the channel broadcasts of other ranks wait for (repair requests, the
    /// synchronization's messages) while this rank waits idle elsewhere: a root that
    /// returned at once would otherwise only answer in its next channel broadcast.
    pub(crate) fn channels_service(&mut self) -> MpiResult<()> {
        if self.coll.channels.drivers.is_empty() || self.coll.channels.ended {
            return Ok(());
        }
        // The drivers leave the engine while they are pumped (should anything a pump calls
        // service the channels again, it finds none; a pump no longer waits for a message,
        // see `channel_pump`); whatever was added meanwhile is kept with them. No
        // allocation: this runs on every idle round of a blocking call.
        let mut drivers = std::mem::take(&mut self.coll.channels.drivers);
        let was = std::mem::replace(&mut self.coll.channels.servicing, true);
        let mut result = Ok(());
        for (_, d) in drivers.iter_mut() {
            if let Err(e) = self.channel_pump(d) {
                result = Err(e);
                break;
            }
        }
        self.coll.channels.servicing = was;
        let added = std::mem::replace(&mut self.coll.channels.drivers, drivers);
        self.coll.channels.drivers.merge(added);
        result
    }

    /// Every rank of the job reached MPI_Finalize (its barrier completed here), so every
    /// channel broadcast called anywhere is complete everywhere (the blocking ones returned,
    /// the nonblocking ones were waited for) and no rank can need a driver of this one any
    /// more: none is served from now on, and the freed communicators waiting for theirs to
    /// go quiet go now (their last synchronization may never end: a rank past the barrier
    /// no longer answers, and one in the launcher's fence runs no progress at all). Until
    /// this point MPI_Finalize serves them like any blocking call: a rank still in a
    /// broadcast may be waiting for this one.
    pub(crate) fn channels_end(&mut self) {
        self.coll.channels.ended = true;
        let kept = self.coll.freed_later.len();
        if kept > 0 {
            self.release_deferred();
            let left = self.coll.freed_later.len();
            tracing::debug!("channel broadcast: every rank in MPI_Finalize; {} of {kept} freed communicators kept so far released, {left} with requests in flight", kept - left);
        }
    }

    /// Communicator `c` is freed and nothing is in progress on it ([`Engine::comm_in_use`]):
    /// whether its channel driver must stay for now, the communicator with it
    /// (`Engine::release_comm` keeps it among the ones freed later).
    ///
    /// A root returns from its last broadcasts as soon as its frames are written, and may
    /// free the communicator while another rank still waits for one of them (lost or
    /// damaged: it asks the root again), for the synchronization its last call needs, or,
    /// after a failover, for a frame this rank passes on over the tree. So the driver is
    /// closed ([`Machine::close`]: a last synchronization releases every broadcast called,
    /// which completes only once every rank has every one of them and freed the
    /// communicator too) and stays, answering as before whenever this rank waits idle
    /// (`Engine::channels_service`) and at each look at the freed communicators
    /// (`Engine::release_deferred`, which pumps it once here), until it is quiet. A
    /// communicator without a driver (the tree for good, or none made yet) goes at once.
    pub(crate) fn channel_retiring(&mut self, c: Handle) -> bool {
        let Ok(ctx) = self.comm(c).map(|c| c.ctx) else { return false };
        if self.coll.channels.ended {
            // No rank needs it any more ([`Engine::channels_end`]); its requests, if any,
            // kept the communicator in use (`Engine::comm_in_use`), so none is left.
            return false;
        }
        if self.coll.channels.servicing {
            // Its driver, if any, is out of the table, being pumped: look again later.
            return true;
        }
        let mut d = match self.coll.channels.drivers.take(ctx) {
            Some(Some(d)) => d,
            Some(None) => {
                self.coll.channels.drivers.put(ctx, None);
                return false;
            }
            None => return false,
        };
        let quiet = |d: &Driver| d.machine.quiet() && d.sends.is_empty() && d.incoming.is_none();
        if !d.machine.closing() {
            let now = d.now();
            d.machine.close(now);
        }
        let mut keep = !quiet(&d);
        if keep {
            match self.channel_pump(&mut d) {
                Ok(_) => keep = !quiet(&d),
                Err(e) => {
                    tracing::warn!("channel broadcast on a freed communicator: {e}; dropping its driver");
                    // Not while a request of its own may still write into (or read from)
                    // a buffer it holds: the communicator stays in use until they end.
                    keep = !d.sends.is_empty() || d.incoming.is_some();
                }
            }
        }
        self.coll.channels.drivers.put(ctx, Some(d));
        keep
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mailbox_words_carry_the_synchronization_messages() {
        for (k, a, ok, failed) in [(0, 0, true, false), (1, 3, false, true), ((1 << 40) - 2, (1 << 22) - 1, true, true)] {
            let w = mail_word(k, a, ok, failed).expect("fits");
            assert_ne!(w, 0, "0 means an empty mailbox");
            assert_eq!(mail_parts(w), Some((k, a, ok, failed)));
        }
        // Numbers that do not fit go as messages.
        assert_eq!(mail_word((1 << 40) - 1, 0, true, false), None);
        assert_eq!(mail_word(0, 1 << 22, true, false), None);
        assert_eq!(mail_word(u64::MAX, 0, true, false), None);
        // Whatever another process left in a word decodes without a panic; 0 is nothing.
        assert_eq!(mail_parts(0), None);
        for w in [1, u64::MAX, 1 << 63, (1 << 24) - 1] {
            let _ = mail_parts(w);
        }
    }
}
