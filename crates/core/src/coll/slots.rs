//! Small collectives of a communicator whose ranks all share memory: the slot exchange of
//! `steadfast_coll::slots` on a segment in the job directory.
//!
//! Barrier, Allreduce, Allgather, Alltoall and Reduce_scatter(_block) of up to
//! `STEADFAST_COLL_SLOT_BYTES` bytes per rank on up to `STEADFAST_COLL_SLOT_RANKS` ranks
//! write each rank's contribution once into its slot and read the others' straight out of
//! theirs: one step, where the message algorithms take ⌈log2 n⌉ rounds of messages through
//! the rings (or two, rank 0 first, for the barrier). Every part carries a CRC32C; damage is
//! repaired by the writer (see the exchange's documentation). Reductions run in rank order
//! on every rank, so every rank gets the same result, also for non-commutative operations.
//!
//! The same conditions as the channel broadcast keep it off where it cannot serve: ranks on
//! several hosts or without shared memory, run-through mode, message logging, coordinated
//! checkpointing (the segment is not in the image).

use std::cell::Cell;
use std::path::Path as FsPath;
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

use rustc_hash::FxHashMap;
use steadfast_coll::slots::{Board, Exchange, Sink, SlotError};
use steadfast_paths::shm::ShmWaker;

use super::{select, Buf, Coll, RBuf};
use crate::datatype::TypeRef;
use crate::engine::Engine;
use crate::group::{TAG_BCAST_DATA, TAG_BCAST_LEN};
use crate::error::{ErrorClass, MpiError, MpiResult};
use crate::op::Reduction;
use crate::slab::Handle;

const MAGIC: u64 = 0x5354_4446_534c_5433; // "STDFSLT3"
const LINE: usize = 64;
/// Names of the segments in the job directory: `{prefix}-{world rank}-{n}`.
const SEGMENT_PREFIX: &str = "slt";
/// Contributions up to this many bytes are copied for repairs once published; larger ones
/// are answered from the application's buffers, and their writer waits until every rank is
/// done with the call (a copy of 1 MiB on each of 8 ranks costs more than that wait).
const KEEP_MAX: usize = 32 << 10;

fn round_line(n: usize) -> usize {
    n.div_ceil(LINE) * LINE
}

/// Slot-exchange state of the engine.
#[derive(Default)]
pub struct SlotsState {
    /// Per communicator context: its driver, or None when no segment could be made (every
    /// rank then uses the message algorithms on that communicator).
    drivers: super::shmseg::DriverTable<Driver>,
    /// Doorbells of the ranks of this host, by world rank (shared by the communicators).
    wakers: FxHashMap<u32, ShmWaker>,
    /// Drivers of freed communicators whose last call some rank may still be reading: they
    /// answer repairs until their exchange is quiet.
    #[allow(clippy::vec_box)]
    retired: Vec<Box<Driver>>,
    /// Slot calls started as requests (blocking calls of `MPI_THREAD_MULTIPLE` processes).
    pub(crate) ops: Vec<(Handle, SlotOp)>,
    /// Segment agreements running as requests, each with the first call on its communicator
    /// (`Engine::islot`: a blocking agreement would hold the library lock while it waits,
    /// and the rank it waits for may wait for another thread of this process).
    pub(crate) setups: Vec<Setup>,
    /// Set while `islot` prepares a call: a communicator without a driver is noted in
    /// `deferred` instead of agreeing on its segment there and then.
    defer: bool,
    deferred: Option<u32>,
    /// Set while a nonblocking call is prepared: it takes the communicator's second
    /// exchange ([`nb_key`]).
    nb: bool,
    /// Nonblocking calls waiting, in call order, for their communicator's second exchange:
    /// an exchange runs one call at a time, and MPI lets a program start several.
    nb_waiting: Vec<NbWaiting>,
}

/// A nonblocking call that waits for its exchange ([`SlotsState::nb_waiting`]).
struct NbWaiting {
    user: Handle,
    comm: Handle,
    key: u32,
    coll: Coll,
    tag: i32,
}

// SAFETY: as for `Setup`: the application's buffers of a call in progress.
unsafe impl Send for NbWaiting {}

/// The key of a communicator's second exchange, which serves its nonblocking collectives.
/// They are numbered apart from the blocking ones, as their messages are (`NONBLOCKING_BIT`):
/// a program may start one on some ranks while the others are still in a blocking
/// collective (mpi4py's `Comm.Iagree` does, `tests/c/mpi5/iagree_order.c`), and one slot
/// sequence for both would pair different calls. Communicator contexts are even (`ctx + 1`
/// carries the collective messages), so the odd key names no other communicator.
pub(crate) fn nb_key(ctx: u32) -> u32 {
    ctx | 1
}

/// Whether exchange `key` is a communicator's second one ([`nb_key`]).
fn is_nb_key(key: u32) -> bool {
    key & 1 == 1
}

/// Sub-codes of a nonblocking call's tag that carry its background agreement on the second
/// exchange's segment (the blocking agreements use `TAG_BCAST_LEN`/`TAG_BCAST_DATA`, which
/// a nonblocking one started in another order on another rank could take); schedules use
/// small sub-codes.
const NB_SETUP_LEN_SUB: u16 = 4094;
const NB_SETUP_DATA_SUB: u16 = 4095;

/// Longest segment name a background agreement takes (names are "slt-RANK-COUNT").
const SETUP_NAME_MAX: usize = 256;

/// A segment agreement in the background: the messages of the blocking one
/// (`Engine::bcast_bytes` from rank 0: the name's length, then the name, down the binomial
/// tree, on the same tags, so ranks waiting with the lock held meet it), then the call.
pub(crate) struct Setup {
    /// The application's request, completed by the first call (or its message algorithm).
    user: Handle,
    comm: Handle,
    ctx: u32,
    coll: Coll,
    rank: i32,
    size: i32,
    /// The tag reserved for `coll` by messages if no segment is agreed: an `MPI_Ibcast`'s,
    /// taken when it was called (None: a blocking call's, taken when the agreement ends).
    tag: Option<i32>,
    /// A nonblocking call's agreement on the second exchange: its messages go on its own
    /// tags ([`NB_SETUP_LEN_SUB`]), not on the blocking agreements'.
    nb: bool,
    /// Rank 0's segment, made before it sent the name.
    created: Option<Seg>,
    /// The agreement is a channel broadcast's (`coll` its `Bcast`), not a slot call's; rank
    /// 0's channel segment.
    channels: Option<Option<super::channels::Segment>>,
    /// Receive and send buffers of the requests below: boxed, so they stay put.
    len: Box<[u8; 8]>,
    name: Box<[u8; SETUP_NAME_MAX]>,
    name_len: usize,
    stage: SetupStage,
}

// SAFETY: the raw pointers of `coll` are the application's buffers of a call in progress;
// the engine runs under one lock.
unsafe impl Send for Setup {}

impl Setup {
    /// The tags of the name's length and of the name.
    fn tags(&self) -> (i32, i32) {
        match (self.nb, self.tag) {
            (true, Some(t)) => (super::sched::tag_of(t, false, NB_SETUP_LEN_SUB), super::sched::tag_of(t, false, NB_SETUP_DATA_SUB)),
            _ => (TAG_BCAST_LEN, TAG_BCAST_DATA),
        }
    }

    /// Rank 0's segment name, at most [`SETUP_NAME_MAX`] bytes (checked by the caller).
    fn set_name(&mut self, n: &str) {
        self.name[..n.len()].copy_from_slice(n.as_bytes());
        self.name_len = n.len();
    }
}

/// Parent of non-zero `rank` in the binomial tree from rank 0 (`Engine::bcast_bytes`'s).
fn setup_parent(rank: i32) -> i32 {
    rank - (rank & rank.wrapping_neg())
}

enum SetupStage {
    /// Waiting for the length from the parent.
    Len(Handle),
    /// Waiting for the name from the parent.
    Name(Handle),
    /// Sends to the children in flight.
    Send(Vec<Handle>),
}

impl SlotsState {
    pub(crate) fn forget(&mut self, ctx: u32) {
        if let Some(Some(d)) = self.drivers.take(ctx) {
            if !d.ex.quiet(&d.seg) {
                self.retired.push(d);
            }
        }
    }
}

/// A communicator's segment: a header line, one line per rank (its repair counter and count
/// of completed calls), then two line-aligned slots per rank, each the state word, the part
/// CRCs and the data, packed: a small contribution shares the state's line, so a reader's
/// poll that finds it published has already fetched it.
struct Seg {
    base: *mut u8,
    len: usize,
    ranks: usize,
    cap: usize,
    slot: usize,
    /// `STEADFAST_COLL_SLOT_FAULTS=corrupt=P`: damage a written part after its CRC with
    /// chance P (tests of the repair); the xorshift state and the threshold.
    faults: Option<(Cell<u64>, u64)>,
}

impl Drop for Seg {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` came from a successful mmap that nothing uses any more.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

fn seg_len(ranks: usize, cap: usize) -> usize {
    LINE + ranks * LINE + 2 * ranks * slot_len(ranks, cap)
}

fn slot_len(ranks: usize, cap: usize) -> usize {
    round_line(data_offset(ranks) + cap)
}

/// Where a slot's contribution size is: after the state word and one CRC per rank, 8-byte
/// aligned.
fn total_offset(ranks: usize) -> usize {
    (8 + 4 * ranks).div_ceil(8) * 8
}

/// Where a slot's data starts: after its contribution size.
fn data_offset(ranks: usize) -> usize {
    total_offset(ranks) + 8
}

/// The largest slot capacity, at most `cap`, whose segment for `ranks` ranks takes at most
/// a quarter of `free` bytes: the space free less what the job directory's sparse files
/// already promised (`steadfast_paths::shm::unpromised_bytes`). The segment is a sparse file
/// whose pages are backed as slots are first written: on a small `/dev/shm` (a container's
/// default is 64 MiB) a segment sized by the setting alone ran out of memory part way
/// through a large collective, and the store that found no page killed the rank with
/// SIGBUS; so did several communicators' segments sized by free space alone, each counting
/// on the same unwritten pages. A quarter leaves room for the channel broadcast and for
/// other communicators' segments (each a quarter of what is left when it is made).
fn fitted_cap(ranks: usize, cap: usize, free: Option<u64>) -> usize {
    let Some(free) = free else { return cap };
    let budget = usize::try_from(free / 4).unwrap_or(usize::MAX);
    let per_slot = budget.saturating_sub(LINE + ranks * LINE) / (2 * ranks.max(1));
    // A slot is its header and data rounded up to lines (`slot_len`).
    let fit = (per_slot / LINE * LINE).saturating_sub(round_line(data_offset(ranks)));
    cap.min(fit)
}

impl Seg {
    /// Rank 0 makes the segment, its capacity `cap` or less where memory is short
    /// ([`fitted_cap`]); the header says which.
    fn create(path: &FsPath, ranks: usize, cap: usize) -> std::io::Result<Seg> {
        let free = path.parent().and_then(|dir| steadfast_paths::shm::unpromised_bytes(dir, super::channels::SEGMENT_PREFIX));
        let cap = fitted_cap(ranks, cap, free);
        let len = seg_len(ranks, cap);
        let base = super::shmseg::create(path, len, MAGIC, &[ranks as u32, cap as u32])?;
        Ok(Seg { base, len, ranks, cap, slot: slot_len(ranks, cap), faults: None })
    }

    /// The other ranks take the capacity rank 0 chose, which is `cap` (their setting) or
    /// less: every rank then decides by the same capacity which calls fit.
    fn open(path: &FsPath, ranks: usize, cap: usize) -> std::io::Result<Seg> {
        let shape = super::shmseg::read_shape(path, MAGIC, 2)?;
        let made = shape.get(1).map_or(usize::MAX, |&c| c as usize);
        if made > cap || shape.first().map(|&r| r as usize) != Some(ranks) {
            return Err(std::io::Error::other("segment of another shape (slot settings differ between ranks?)"));
        }
        let len = seg_len(ranks, made);
        let base = super::shmseg::open(path, len, MAGIC, &[ranks as u32, made as u32], "slot settings")?;
        Ok(Seg { base, len, ranks, cap: made, slot: slot_len(ranks, made), faults: None })
    }

    fn slot_base(&self, r: usize, p: usize) -> *mut u8 {
        debug_assert!(r < self.ranks && p < 2);
        // SAFETY: slot (r, p) lies inside the mapping (`seg_len`).
        unsafe { self.base.add(LINE + self.ranks * LINE + (2 * r + p) * self.slot) }
    }

    fn state_word(&self, r: usize, p: usize) -> &AtomicU64 {
        // SAFETY: the first word of the slot's state line: 8-byte aligned (page-aligned
        // base, line-sized pieces), only ever accessed atomically.
        unsafe { &*self.slot_base(r, p).cast::<AtomicU64>() }
    }

    fn crc_word(&self, r: usize, p: usize, j: usize) -> &AtomicU32 {
        assert!(j < self.ranks, "part {j} beyond the slot's CRCs");
        // SAFETY: CRC `j` < ranks of the slot's CRC array, 4-byte aligned.
        unsafe { &*self.slot_base(r, p).add(8 + 4 * j).cast::<AtomicU32>() }
    }

    fn total_word(&self, r: usize, p: usize) -> &AtomicU64 {
        // SAFETY: the slot's size word, 8-byte aligned (`total_offset`), accessed atomically.
        unsafe { &*self.slot_base(r, p).add(total_offset(self.ranks)).cast::<AtomicU64>() }
    }

    fn data(&self, r: usize, p: usize, off: usize, len: usize) -> *mut u8 {
        assert!(off + len <= self.cap, "slot data access beyond the capacity");
        // SAFETY: inside the slot's data area (checked above).
        unsafe { self.slot_base(r, p).add(data_offset(self.ranks) + off) }
    }

    fn done_word(&self, r: usize) -> &AtomicU64 {
        assert!(r < self.ranks);
        // SAFETY: the second word of rank r's line, accessed atomically.
        unsafe { &*self.base.add(LINE + r * LINE + 8).cast::<AtomicU64>() }
    }

    fn repair_word(&self, r: usize) -> &AtomicU64 {
        assert!(r < self.ranks);
        // SAFETY: rank r's line after the header, 8-byte aligned, accessed atomically.
        unsafe { &*self.base.add(LINE + r * LINE).cast::<AtomicU64>() }
    }
}

impl Board for Seg {
    fn ranks(&self) -> usize {
        self.ranks
    }
    fn capacity(&self) -> usize {
        self.cap
    }
    fn state(&self, r: usize, p: usize) -> u64 {
        self.state_word(r, p).load(Ordering::Acquire)
    }
    fn state_again(&self, r: usize, p: usize) -> u64 {
        fence(Ordering::Acquire);
        self.state_word(r, p).load(Ordering::Relaxed)
    }
    fn set_state(&self, r: usize, p: usize, v: u64, writing: bool) {
        if writing {
            self.state_word(r, p).store(v, Ordering::Relaxed);
            fence(Ordering::Release);
        } else {
            self.state_word(r, p).store(v, Ordering::Release);
        }
    }
    fn put(&self, r: usize, p: usize, off: usize, src: &[u8]) -> u32 {
        let d = self.data(r, p, off, src.len());
        // SAFETY: `src.len()` bytes at `d` lie in this rank's own slot, which only this rank
        // writes; readers copy them only under the state word's generation check.
        let dst = unsafe { std::slice::from_raw_parts_mut(d, src.len()) };
        let crc = steadfast_reliable::crc::copy_with_crc32c(dst, src);
        if let Some((state, threshold)) = &self.faults {
            let mut x = state.get();
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            state.set(x);
            if !dst.is_empty() && x < *threshold {
                dst[(x >> 32) as usize % dst.len()] ^= 0x10;
            }
        }
        crc
    }
    fn take(&self, r: usize, p: usize, off: usize, dst: &mut [u8]) -> u32 {
        let s = self.data(r, p, off, dst.len());
        // SAFETY: `dst.len()` bytes of the slot's data; the exchange discards the copy if
        // the writer changed the slot meanwhile.
        let src = unsafe { std::slice::from_raw_parts(s.cast_const(), dst.len()) };
        steadfast_reliable::crc::copy_with_crc32c(dst, src)
    }
    fn crc(&self, r: usize, p: usize, j: usize) -> u32 {
        self.crc_word(r, p, j).load(Ordering::Relaxed)
    }
    fn set_crc(&self, r: usize, p: usize, j: usize, crc: u32) {
        self.crc_word(r, p, j).store(crc, Ordering::Relaxed);
    }
    fn total(&self, r: usize, p: usize) -> u64 {
        self.total_word(r, p).load(Ordering::Relaxed)
    }
    fn set_total(&self, r: usize, p: usize, bytes: u64) {
        self.total_word(r, p).store(bytes, Ordering::Relaxed);
    }
    fn repairs(&self, r: usize) -> u64 {
        self.repair_word(r).load(Ordering::Acquire)
    }
    fn ask_repair(&self, r: usize) {
        self.repair_word(r).fetch_add(1, Ordering::SeqCst);
    }
    fn done(&self, r: usize) -> u64 {
        self.done_word(r).load(Ordering::Acquire)
    }
    fn set_done(&self, r: usize, calls: u64) {
        self.done_word(r).store(calls, Ordering::Release);
    }
}

/// The exchange of one communicator.
struct Driver {
    seg: Seg,
    ex: Exchange,
    /// World ranks of the communicator's ranks (for their doorbells).
    group: std::sync::Arc<Vec<u32>>,
    /// Received parts of a reduction, or of non-contiguous receive buffers (16-byte aligned).
    scratch: Vec<u128>,
    /// Repairs served, corrupt parts seen: the counts last reported.
    reported: (u64, u64),
    /// The parts list of the last call, kept for the next (no allocation per call).
    spare_parts: Vec<&'static [u8]>,
    /// Waking the other ranks needs a fence first: some rank (or this one) does not use
    /// asymmetric fences, or has no doorbell open.
    wake_fence: bool,
}

// SAFETY: the mapping is only touched through the engine, which one thread drives at a time.
unsafe impl Send for Driver {}

/// Received parts go to `base + r * stride` (`len` bytes each), part `part` of rank `r`.
struct Dests {
    base: *mut u8,
    stride: usize,
    len: usize,
    part: usize,
}

impl Sink for Dests {
    fn dst(&mut self, r: usize) -> (usize, &mut [u8]) {
        // SAFETY: the caller sized the destination for every rank's part (`Dests::new`).
        (self.part, unsafe { std::slice::from_raw_parts_mut(self.base.add(r * self.stride), self.len) })
    }
}

fn slot_error(e: SlotError) -> MpiError {
    MpiError::new(ErrorClass::Intern, format!("slot exchange: {e}"))
}

/// 16-byte words holding `n` blocks of `stride` bytes.
fn scratch_for(v: &mut Vec<u128>, n: usize, stride: usize) -> *mut u8 {
    let words = (n * stride).div_ceil(16).max(1);
    if v.len() < words {
        v.resize(words, 0);
    }
    v.as_mut_ptr().cast()
}

impl Engine {
    /// Where the exchange may apply (`Engine::segment_target`): every rank shares memory
    /// with this one.
    fn slot_target(&mut self, comm: Handle) -> Option<(i32, i32, u32)> {
        match self.segment_target(comm)? {
            (rank, size, ctx, true) => Some((rank, size, if self.coll.slots.nb { nb_key(ctx) } else { ctx })),
            _ => None,
        }
    }

    /// `f` with the calls it prepares taking the second exchange if `nb`.
    fn slot_keyed<T>(&mut self, nb: bool, f: impl FnOnce(&mut Self) -> T) -> T {
        let was = std::mem::replace(&mut self.coll.slots.nb, nb);
        let r = f(self);
        self.coll.slots.nb = was;
        r
    }

    /// Run blocking collective `c` through the slots if the rule picks them; false if the
    /// caller must run another algorithm.
    pub(crate) fn coll_slots(&mut self, comm: Handle, c: &Coll) -> MpiResult<bool> {
        let Some(mut op) = self.slot_prepare(comm, c)? else { return Ok(false) };
        loop {
            let r = self.slot_start(&mut op).and_then(|()| self.slot_wait(&mut op));
            let follow = op.follow.take();
            self.slot_finish(op, r)?;
            match follow {
                Some(next) => op = self.slot_prepare_picked(comm, &next)?.ok_or_else(|| MpiError::new(ErrorClass::Intern, "slot exchange: second step lost its driver"))?,
                None => return Ok(true),
            }
        }
    }

    /// Start blocking collective `c` through the slots as a request (for callers that wait
    /// with the library lock released), if the rule picks them. The first call on a
    /// communicator agrees on its segment in the background (`Setup`).
    pub(crate) fn islot(&mut self, comm: Handle, c: &Coll) -> MpiResult<Option<Handle>> {
        self.islot_start(comm, c, None, None)
    }

    /// Start nonblocking collective `c` (its tag `tag`, reserved by the caller) through the
    /// communicator's second exchange ([`nb_key`]) if the rule picks the slots for it. The
    /// first such call on a communicator agrees on the segment in the background, on its
    /// own tags; where none can be made the call goes by messages with `tag`.
    pub(crate) fn islot_nb(&mut self, comm: Handle, c: &Coll, tag: i32) -> MpiResult<Option<Handle>> {
        let Some(key) = self.slot_keyed(true, |e| e.slot_target(comm)).map(|t| t.2) else { return Ok(None) };
        if self.nb_busy(key) {
            // Decided when its turn comes: the slots, or the messages on `tag` if the rule or
            // the agreement says so (every rank decides alike, in the same order).
            let user = self.coll_request(false);
            self.coll.slots.nb_waiting.push(NbWaiting { user, comm, key, coll: c.clone(), tag });
            return Ok(Some(user));
        }
        self.islot_start(comm, c, Some(tag), None)
    }

    /// Whether the second exchange `key` has a call or an agreement under way.
    fn nb_running(&self, key: u32) -> bool {
        let s = &self.coll.slots;
        s.ops.iter().any(|(_, op)| op.ctx == key) || s.setups.iter().any(|st| st.ctx == key)
    }

    /// Whether the second exchange `key` has a call or an agreement under way, or calls
    /// waiting for it.
    fn nb_busy(&self, key: u32) -> bool {
        self.nb_running(key) || self.coll.slots.nb_waiting.iter().any(|w| w.key == key)
    }

    /// Start the calls waiting for exchange `key` while it is free.
    fn nb_next(&mut self, key: u32) {
        loop {
            if self.nb_running(key) {
                return;
            }
            let Some(i) = self.coll.slots.nb_waiting.iter().position(|w| w.key == key) else { return };
            let w = self.coll.slots.nb_waiting.remove(i);
            let r = (|| -> MpiResult<()> {
                match self.islot_start(w.comm, &w.coll, Some(w.tag), Some(w.user))? {
                    Some(_) => Ok(()),
                    None => {
                        let s = self.prepare(w.comm, &w.coll, Some(w.tag))?;
                        self.coll_launch(w.user, s)
                    }
                }
            })();
            if let Err(e) = r {
                if matches!(self.is_complete(w.user), Ok(false)) {
                    self.coll_request_done(w.user, Some(e.class));
                }
            }
        }
    }

    /// Start `c` through the slots as a request if the rule picks them: a blocking call on
    /// the communicator's exchange (`nb_tag` None), or a nonblocking one on its second
    /// exchange, free now, with `nb_tag` its tag ([`Engine::islot_nb`]). The call runs under
    /// request `user` if given (a call that waited), else under a new one.
    fn islot_start(&mut self, comm: Handle, c: &Coll, nb_tag: Option<i32>, user: Option<Handle>) -> MpiResult<Option<Handle>> {
        self.coll.slots.defer = true;
        let prepared = self.slot_keyed(nb_tag.is_some(), |e| e.slot_prepare(comm, c));
        self.coll.slots.defer = false;
        if let Some(key) = self.coll.slots.deferred.take() {
            prepared?;
            let h = self.slot_setup(comm, key, c, nb_tag)?;
            let Some(user) = user else { return Ok(Some(h)) };
            // The agreement answers the waiting call's request instead.
            if let Some(st) = self.coll.slots.setups.iter_mut().find(|st| st.user == h) {
                st.user = user;
                self.release(h);
                return Ok(Some(user));
            }
            // It ended at once (its request completed with an error): pass that on.
            let err = self.status(h).ok().and_then(|st| st.error);
            self.release(h);
            self.coll_request_done(user, Some(err.unwrap_or(ErrorClass::Intern)));
            return Ok(Some(user));
        }
        let Some(mut op) = prepared? else { return Ok(None) };
        if let Err(e) = self.slot_start(&mut op) {
            self.slot_finish(op, Err(e.clone()))?;
            return Err(e);
        }
        let h = match user {
            Some(u) => u,
            None => self.coll_request(false),
        };
        self.coll.slots.ops.push((h, op));
        Ok(Some(h))
    }

    /// Advance the slot calls started as requests; true if one completed.
    pub(crate) fn slots_progress(&mut self) -> bool {
        let mut ops = std::mem::take(&mut self.coll.slots.ops);
        let mut finished = false;
        // Second exchanges whose call finished: the next call waiting for each starts once
        // `ops` is back in place (so that it sees what still runs).
        let mut freed = Vec::new();
        let mut i = 0;
        while i < ops.len() {
            let (h, op) = &mut ops[i];
            let h = *h;
            let r = match self.slot_step(op) {
                Ok(true) => Some(Ok(())),
                Ok(false) if self.comm_has_failed_member(op.comm) => {
                    Some(Err(MpiError::new(ErrorClass::ProcFailed, "a rank of the communicator failed during a collective")))
                }
                Ok(false) => None,
                Err(e) => Some(Err(e)),
            };
            match r {
                Some(r) => {
                    let (_, mut op) = ops.swap_remove(i);
                    let follow = op.follow.take();
                    let (comm, nb, key) = (op.comm, is_nb_key(op.ctx), op.ctx);
                    let mut r = self.slot_finish(op, r);
                    if let (Ok(()), Some(next)) = (&r, follow) {
                        // The second step of a split Allreduce, under the same request.
                        match self.slot_keyed(nb, |e| e.slot_prepare_picked(comm, &next)) {
                            Ok(Some(mut op)) => match self.slot_start(&mut op) {
                                Ok(()) => {
                                    ops.push((h, op));
                                    continue;
                                }
                                Err(e) => r = self.slot_finish(op, Err(e)),
                            },
                            Ok(None) => r = Err(MpiError::new(ErrorClass::Intern, "slot exchange: second step lost its driver")),
                            Err(e) => r = Err(e),
                        }
                    }
                    self.coll_request_done(h, r.err().map(|e| e.class));
                    finished = true;
                    if nb {
                        freed.push(key);
                    }
                }
                None => i += 1,
            }
        }
        ops.append(&mut self.coll.slots.ops);
        self.coll.slots.ops = ops;
        for key in freed {
            self.nb_next(key);
        }
        finished | self.setups_progress()
    }

    /// Start the background agreement of communicator `comm` (context `ctx`), whose first
    /// slot call is `c`; returns the application's request.
    fn slot_setup(&mut self, comm: Handle, ctx: u32, c: &Coll, tag: Option<i32>) -> MpiResult<Handle> {
        let mut st = self.setup_new(comm, ctx, c)?;
        st.nb = tag.is_some();
        st.tag = tag;
        if st.rank == 0 {
            let cap = self.coll.cfg.get_or_insert_with(super::CollConfig::from_env).slot_bytes;
            if let Some(jobdir) = self.coll.channels.host.as_ref().map(|h| h.jobdir.clone()) {
                let n = self.segment_name(SEGMENT_PREFIX);
                match Seg::create(&jobdir.join(&n), st.size as usize, cap) {
                    Ok(seg) if n.len() <= SETUP_NAME_MAX => {
                        st.created = Some(seg);
                        st.set_name(&n);
                    }
                    Ok(_) => tracing::warn!("slot collectives segment {n}: name too long; using messages on this communicator"),
                    Err(e) => tracing::warn!("slot collectives segment {n}: {e}; using messages on this communicator"),
                }
            }
        }
        self.setup_launch(st)
    }

    /// [`Engine::slot_setup`] for the channel broadcast `c` of a rank at
    /// `MPI_THREAD_MULTIPLE` on communicator `comm` (context `ctx`): the agreement on its
    /// channel segment in the background, then the broadcast under the returned request.
    pub(super) fn channel_setup(&mut self, comm: Handle, ctx: u32, c: &Coll, tag: Option<i32>) -> MpiResult<Handle> {
        let mut st = self.setup_new(comm, ctx, c)?;
        st.channels = Some(None);
        st.tag = tag;
        if st.rank == 0 {
            match self.shm_channel_create(st.size) {
                Some((seg, n)) if n.len() <= SETUP_NAME_MAX => {
                    st.channels = Some(Some(seg));
                    st.set_name(&n);
                }
                Some((_, n)) => tracing::warn!("channel broadcast segment {n}: name too long; using messages on this communicator"),
                None => {}
            }
        }
        self.setup_launch(st)
    }

    /// An agreement on `comm` (context `ctx`) for call `c`, with the application's request,
    /// nothing made or received yet.
    fn setup_new(&mut self, comm: Handle, ctx: u32, c: &Coll) -> MpiResult<Setup> {
        let (rank, size) = {
            let x = self.comm(comm)?;
            (x.rank, x.size())
        };
        Ok(Setup {
            user: self.coll_request(false),
            comm,
            ctx,
            coll: c.clone(),
            rank,
            size,
            tag: None,
            nb: false,
            created: None,
            channels: None,
            len: Box::new([0; 8]),
            name: Box::new([0; SETUP_NAME_MAX]),
            name_len: 0,
            stage: SetupStage::Send(Vec::new()),
        })
    }

    /// Start agreement `st` (rank 0 made its segment and set its name, or left it empty):
    /// rank 0 sends the name to its children, every other rank waits for its parent's.
    fn setup_launch(&mut self, mut st: Setup) -> MpiResult<Handle> {
        let user = st.user;
        let started = if st.rank == 0 {
            self.setup_forward(&mut st)
        } else {
            let (len_tag, _) = st.tags();
            self.coll_irecv(st.comm, setup_parent(st.rank), len_tag, &mut st.len[..]).map(|h| st.stage = SetupStage::Len(h))
        };
        if let Err(e) = started {
            self.coll_request_done(user, Some(e.class));
            return Ok(user);
        }
        self.coll.slots.setups.push(st);
        Ok(user)
    }

    /// Send the length and the name to this rank's children in the binomial tree from rank 0.
    fn setup_forward(&mut self, st: &mut Setup) -> MpiResult<()> {
        *st.len = (st.name_len as u64).to_le_bytes();
        let (rank, size) = (st.rank, st.size);
        let low = if rank == 0 { (size.max(1) as u32).next_power_of_two() as i32 } else { rank & rank.wrapping_neg() };
        let mut sends = Vec::new();
        let mut mask = low >> 1;
        let (len_tag, data_tag) = st.tags();
        while mask > 0 {
            if rank + mask < size {
                sends.push(self.coll_isend(st.comm, rank + mask, len_tag, &st.len[..])?);
                sends.push(self.coll_isend(st.comm, rank + mask, data_tag, &st.name[..st.name_len])?);
            }
            mask >>= 1;
        }
        st.stage = SetupStage::Send(sends);
        Ok(())
    }

    /// Advance the background agreements; true if one finished (its call then runs as a
    /// slot request, or by messages where no segment could be made).
    fn setups_progress(&mut self) -> bool {
        if self.coll.slots.setups.is_empty() {
            return false;
        }
        let mut setups = std::mem::take(&mut self.coll.slots.setups);
        let mut finished = false;
        let mut i = 0;
        while i < setups.len() {
            // Agreements of one communicator (an MPI_Ibcast's, then a slot call's of another
            // thread) share the tags: each posts its receive for the name only after the
            // ones started before it, kept in call order, so each gets its own.
            let (comm, nb, early) = (setups[i].comm, setups[i].nb, &setups[..i]);
            if !nb && early.iter().any(|e| e.comm == comm && !e.nb && !matches!(e.stage, SetupStage::Send(_))) {
                i += 1;
                continue;
            }
            match self.setup_step(&mut setups[i]) {
                Ok(false) => i += 1,
                Ok(true) => {
                    let st = setups.remove(i);
                    self.setup_finish(st);
                    finished = true;
                }
                Err(e) => {
                    let st = setups.remove(i);
                    self.coll_request_done(st.user, Some(e.class));
                    finished = true;
                }
            }
        }
        setups.append(&mut self.coll.slots.setups);
        self.coll.slots.setups = setups;
        finished
    }

    /// One look at an agreement; true once this rank has the name and passed it on.
    fn setup_step(&mut self, st: &mut Setup) -> MpiResult<bool> {
        loop {
            match &mut st.stage {
                SetupStage::Len(h) => {
                    if !self.setup_request_done(*h)? {
                        return Ok(false);
                    }
                    let n = u64::from_le_bytes(*st.len) as usize;
                    if n > SETUP_NAME_MAX {
                        return Err(MpiError::new(ErrorClass::Intern, "slot collectives: segment name too long"));
                    }
                    st.name_len = n;
                    let (_, data_tag) = st.tags();
                    let h = self.coll_irecv(st.comm, setup_parent(st.rank), data_tag, &mut st.name[..n])?;
                    st.stage = SetupStage::Name(h);
                }
                SetupStage::Name(h) => {
                    if !self.setup_request_done(*h)? {
                        return Ok(false);
                    }
                    self.setup_forward(st)?;
                }
                SetupStage::Send(hs) => {
                    for h in hs.iter() {
                        if !self.is_complete(*h)? {
                            return Ok(false);
                        }
                    }
                    for h in std::mem::take(hs) {
                        self.setup_request_done(h)?;
                    }
                    return Ok(true);
                }
            }
        }
    }

    /// Whether request `h` of an agreement completed (it is then released); its failure is
    /// the agreement's.
    fn setup_request_done(&mut self, h: Handle) -> MpiResult<bool> {
        if !self.is_complete(h)? {
            return Ok(false);
        }
        let s = self.status(h)?;
        self.release(h);
        match s.error {
            None => Ok(true),
            Some(c) => Err(MpiError::new(c, "slot collectives: agreeing on the segment failed")),
        }
    }

    /// The agreement ended: install the driver (none without a name) and run the call.
    fn setup_finish(&mut self, st: Setup) {
        let (nb, key) = (st.nb, st.ctx);
        self.setup_finish_call(st);
        if nb {
            self.nb_next(key);
        }
    }

    fn setup_finish_call(&mut self, mut st: Setup) {
        if let Some(created) = st.channels.take() {
            let name = String::from_utf8_lossy(&st.name[..st.name_len]).into_owned();
            if let Err(e) = self.channel_setup_finish(st.user, st.comm, st.ctx, st.rank, st.size, created, &name, &st.coll, st.tag) {
                if matches!(self.is_complete(st.user), Ok(false)) {
                    self.coll_request_done(st.user, Some(e.class));
                }
            }
            return;
        }
        let r = (|| -> MpiResult<()> {
            let seg = match (st.created.take(), st.name_len) {
                (_, 0) => None,
                (Some(seg), _) => Some(seg),
                (None, n) => {
                    let name = String::from_utf8_lossy(&st.name[..n]).into_owned();
                    let cap = self.coll.cfg.get_or_insert_with(super::CollConfig::from_env).slot_bytes;
                    let jobdir = self.coll.channels.host.as_ref().map(|h| h.jobdir.clone()).unwrap_or_default();
                    let seg = Seg::open(&jobdir.join(&name), st.size as usize, cap)
                        .map_err(|e| MpiError::new(ErrorClass::Other, format!("opening slot collectives segment {name}: {e}")))?;
                    Some(seg)
                }
            };
            let driver = match seg {
                Some(seg) => Some(self.slot_driver_from(st.comm, st.rank, st.size, seg)?),
                None => None,
            };
            self.coll.slots.drivers.put(st.ctx, driver);
            let nb = st.nb;
            if let Some(mut op) = self.slot_keyed(nb, |e| e.slot_prepare(st.comm, &st.coll))? {
                if let Err(e) = self.slot_start(&mut op) {
                    self.slot_finish(op, Err(e.clone()))?;
                    return Err(e);
                }
                self.coll.slots.ops.push((st.user, op));
                return Ok(());
            }
            // No segment: the call by messages, under the same request.
            let s = self.prepare(st.comm, &st.coll, st.tag)?;
            self.coll_launch(st.user, s)
        })();
        if let Err(e) = r {
            if matches!(self.is_complete(st.user), Ok(false)) {
                self.coll_request_done(st.user, Some(e.class));
            }
        }
    }

    /// Whether nonblocking calls on communicator `comm` wait for its second exchange.
    pub(crate) fn nb_waiting_on(&self, comm: Handle) -> bool {
        self.coll.slots.nb_waiting.iter().any(|w| w.comm == comm)
    }

    /// Whether slot calls started as requests run on communicator `comm`.
    pub(crate) fn slot_ops_on(&self, comm: Handle) -> bool {
        self.coll.slots.ops.iter().any(|(_, op)| op.comm == comm)
    }

    /// Whether an agreement on a segment of communicator `comm` runs in the background.
    pub(crate) fn setup_running(&self, comm: Handle) -> bool {
        self.coll.slots.setups.iter().any(|st| st.comm == comm)
    }

    /// Whether an agreement on the blocking agreements' tags (`TAG_BCAST_LEN`) runs in the
    /// background on communicator `comm`.
    pub(crate) fn setup_running_shared(&self, comm: Handle) -> bool {
        self.coll.slots.setups.iter().any(|st| st.comm == comm && !st.nb)
    }

    /// Whether the agreement on the channel segment of context `ctx` runs in the background.
    pub(super) fn channel_setup_running(&self, ctx: u32) -> bool {
        self.coll.slots.setups.iter().any(|st| st.ctx == ctx && st.channels.is_some())
    }

    /// Whether a slot call started as a request may go on now (a sleeping rank's last look).
    pub(crate) fn slots_ready(ops: &[(Handle, SlotOp)]) -> bool {
        ops.iter().any(|(_, op)| op.d.ex.ready(&op.d.seg))
    }

    /// The call's exchange, if the rule picks it: its driver taken out of the map, its
    /// contribution, where the parts go and what follows.
    fn slot_prepare(&mut self, comm: Handle, c: &Coll) -> MpiResult<Option<SlotOp>> {
        let name = match c {
            Coll::Barrier => "barrier",
            Coll::Allreduce { .. } => "allreduce",
            Coll::Allgather { .. } => "allgather",
            Coll::Alltoall { .. } => "alltoall",
            Coll::ReduceScatter { .. } | Coll::ReduceScatterBlock { .. } => "reduce_scatter",
            _ => return Ok(None),
        };
        let Some((rank, size, ctx)) = self.slot_target(comm) else { return Ok(None) };
        let Some(bytes) = contribution_bytes(c, size) else { return Ok(None) };
        // The slot target's ranks are all on this host: crowded if the host is.
        let crowded = self.host_crowded();
        let cfg = self.coll.cfg.get_or_insert_with(super::CollConfig::from_env);
        let picked = select::slots(cfg, name, size, bytes, crowded);
        if let Coll::Allreduce { buf, red } = c {
            if !picked && select::slots_allreduce_split(cfg, size, bytes, buf.count, crowded) {
                return self.slot_allreduce_split(comm, buf, red, rank as usize, size as usize);
            }
        }
        if !picked {
            return Ok(None);
        }
        self.slot_prepare_at(comm, c, rank, size, ctx)
    }

    /// An Allreduce too large to reduce every vector on every rank: a Reduce_scatter_block
    /// into this rank's block of the result, then an Allgather of the blocks in place, both
    /// through the slots (each rank reads n blocks of 1/n of the vector, twice).
    fn slot_allreduce_split(&mut self, comm: Handle, buf: &RBuf, red: &Reduction, me: usize, n: usize) -> MpiResult<Option<SlotOp>> {
        let block = buf.count / n;
        let block_bytes = red.dtype.packed_size(block);
        let input = buf.send.unwrap_or(buf.recv.cast_const());
        let scatter = Coll::ReduceScatterBlock { buf: RBuf { send: Some(input), recv: buf.recv.wrapping_add(me * block_bytes), count: block }, red: red.clone() };
        let gather = Coll::Allgather { send: None, recv: Buf { ptr: buf.recv, count: block, dtype: red.dtype.clone() } };
        let Some(mut op) = self.slot_prepare_picked(comm, &scatter)? else { return Ok(None) };
        op.follow = Some(Box::new(gather));
        Ok(Some(op))
    }

    /// [`Engine::slot_prepare`] for a call the rule already picked the exchange for.
    fn slot_prepare_picked(&mut self, comm: Handle, c: &Coll) -> MpiResult<Option<SlotOp>> {
        let Some((rank, size, ctx)) = self.slot_target(comm) else { return Ok(None) };
        self.slot_prepare_at(comm, c, rank, size, ctx)
    }

    /// [`Engine::slot_prepare_picked`] where the caller already has the communicator's
    /// rank, size and context (`Engine::slot_target`).
    fn slot_prepare_at(&mut self, comm: Handle, c: &Coll, rank: i32, size: i32, ctx: u32) -> MpiResult<Option<SlotOp>> {
        // A barrier of more than 2 ranks lets rank 0 out first, then the others (the reason
        // is the message barrier's: docs/collectives.md, "Barrier on few ranks"). On 2 ranks
        // both leave once both arrived, as from the message rule's dissemination barrier:
        // one crossing of a cache line instead of two, and a Reduce, Gather or Allreduce
        // after it does not wait for the rank released last (OSU-style on 2 CPUs, 11-15
        // alternating rounds: the barrier 13-17 % faster, Reduce, Allreduce, Gather,
        // Allgather, Alltoall and Reduce_scatter after it up to 23 %, Bcast within 9 %
        // either way, Scan and Scatter up to 15 % slower; docs/performance.md).
        let rooted = (matches!(c, Coll::Barrier) && size > 2).then_some(0);
        let Some(mut d) = self.slot_driver(comm, ctx, rank, size)? else { return Ok(None) };
        // The rule let no contribution above the setting through; a segment made smaller
        // (`fitted_cap`) is checked again. Every rank reads the same capacity, so all of them
        // take the messages for a call that does not fit.
        let short = self.coll.cfg.as_ref().is_none_or(|cfg| d.seg.cap < cfg.slot_bytes);
        if short && contribution_bytes(c, size).is_none_or(|b| b > d.seg.cap) {
            self.coll.slots.drivers.put(ctx, Some(d));
            return Ok(None);
        }
        match plan(&mut d, rank as usize, size as usize, c) {
            Ok((contribution, sink, finish)) => Ok(Some(SlotOp { ctx, comm, d, contribution, sink, finish, drained: false, seen: (0, 0), follow: None, rooted, is_root: rooted == Some(rank as usize), rank: rank as usize })),
            Err(e) => {
                self.coll.slots.drivers.put(ctx, Some(d));
                Err(e)
            }
        }
    }

    fn slot_start(&mut self, op: &mut SlotOp) -> MpiResult<()> {
        let parts = op.contribution.parts();
        match op.rooted {
            Some(root) => {
                // Every other rank leaves once the root counted the call done. The root
                // still leaves first; releasing the others down the broadcast's binomial
                // tree instead made a rank wait for its parent to be scheduled again after
                // the root (4 ranks on 2 CPUs: 4.5 context switches per barrier against
                // 2.8), for a broadcast after it that was faster by 0.1-2 µs only
                // (docs/collectives.md, "Barrier on few ranks").
                let parent = (op.rank != root).then_some(root);
                op.d.ex.start_rooted(&op.d.seg, root, parent).map_err(slot_error)?
            }
            None => op.d.ex.start(&op.d.seg, parts).map_err(slot_error)?,
        }
        op.seen = (op.d.ex.counters.corrupt_detected, op.d.ex.counters.repairs_served);
        if !op.is_root {
            // An arrival (the root may sleep) or a call's publication.
            self.slot_wake(&op.d);
        }
        Ok(())
    }

    /// Poll the call once; true when it is complete.
    fn slot_step(&mut self, op: &mut SlotOp) -> MpiResult<bool> {
        let parts = op.contribution.parts();
        let d = &mut op.d;
        if d.ex.poll(&d.seg, &mut op.sink, parts).map_err(slot_error)? {
            if d.ex.counters.repairs_served != op.seen.1 || op.contribution.bytes > KEEP_MAX || op.is_root {
                // Ranks may sleep waiting for this rank's count of the call (a held
                // contribution or the release of a barrier rooted here), or a rewrite it
                // made.
                self.slot_wake(d);
            }
            return Ok(true);
        }
        let now = (d.ex.counters.corrupt_detected, d.ex.counters.repairs_served);
        if now != op.seen || d.ex.draining() && !op.drained {
            // A repair asked for (the writer may sleep) or served (its asker may), or this
            // rank's count of a held call that others wait for.
            op.seen = now;
            op.drained |= d.ex.draining();
            self.slot_wake(d);
        }
        Ok(false)
    }

    /// Wait for the call with the engine's spin, yield and sleep. Where waits yield at once,
    /// this rank publishes whom it waits for (as a blocking receive does, `peer_spin`) and
    /// polls on while the one rank it waits for runs and waits for nothing else.
    fn slot_wait(&mut self, op: &mut SlotOp) -> MpiResult<()> {
        let outer = self.awaiting;
        let r = self.slot_wait_polling(op);
        match outer {
            Some(w) => self.set_awaiting(w),
            None => self.end_awaiting(),
        }
        r
    }

    fn slot_wait_polling(&mut self, op: &mut SlotOp) -> MpiResult<()> {
        let (spin, yields, sleep) = (self.cfg.spin, self.cfg.yields, self.cfg.sleep);
        let mut idle = 0u32;
        let mut spun = 0u32;
        loop {
            if self.slot_step(op)? {
                return Ok(());
            }
            idle += 1;
            // Every few polls while spinning: other traffic of this process, the other
            // communicators' exchanges (a rank waiting in one of them may need a rewrite
            // from this rank before it can come to this call) and channel broadcasts (a
            // synchronization may wait for this rank), as the engine's own waits do.
            if idle >= spin || idle.is_multiple_of(16) {
                self.slots_service();
                self.channels_service()?;
                if self.progress()? {
                    continue;
                }
            }
            if idle.is_multiple_of(256) {
                self.poll_failures();
                if self.comm_has_failed_member(op.comm) {
                    return Err(MpiError::new(ErrorClass::ProcFailed, "a rank of the communicator failed during a collective"));
                }
            }
            if idle < spin {
                std::hint::spin_loop();
            } else if self.service_awake() && spin > 0 {
                // One-sided mailboxes in use (`Service::awake`): poll as in the spin phase.
                std::hint::spin_loop();
            } else if idle < spin.saturating_add(yields) || self.service_awake() {
                if self.peer_spin > 0 {
                    let awaited = op.d.ex.awaited().and_then(|r| self.comm(op.comm).ok().and_then(|c| c.peer_world(r as i32)));
                    let word = awaited.unwrap_or(crate::engine::AWAITING_SEVERAL);
                    if self.awaiting != Some(word) {
                        self.set_awaiting(word);
                    }
                }
                if self.poll_on_or_yield(&mut spun) {
                    idle -= 1;
                }
            } else {
                let d = &op.d;
                self.sleep_on_path_unless(sleep, &mut || d.ex.ready(&d.seg))?;
                self.poll_failures();
                if self.comm_has_failed_member(op.comm) {
                    return Err(MpiError::new(ErrorClass::ProcFailed, "a rank of the communicator failed during a collective"));
                }
                idle = spin;
            }
        }
    }

    /// After the call (`r`): the local steps (own block, unpacking, the reduction), the
    /// driver back into the map.
    fn slot_finish(&mut self, op: SlotOp, r: MpiResult<()>) -> MpiResult<()> {
        let SlotOp { ctx, mut d, contribution, finish, .. } = op;
        let c = &d.ex.counters;
        if (c.repairs_served, c.corrupt_detected) != d.reported {
            tracing::warn!(
                "slot collectives: {} damaged parts detected and repaired, {} repairs served so far",
                c.corrupt_detected,
                c.repairs_served
            );
            d.reported = (c.repairs_served, c.corrupt_detected);
        }
        // Ranks whose contributions differ in size (their counts differ: an erroneous
        // call) finished the call without each other's data; the result is not computed.
        let r = r.and_then(|()| match (&finish, d.ex.mismatch()) {
            (Finish::Refuse(e), _) => Err(e.clone()),
            (_, None) => Ok(()),
            (_, Some(m)) => Err(MpiError::new(
                if m.theirs > m.mine { ErrorClass::Truncate } else { ErrorClass::Count },
                format!(
                    "rank {} contributed {} bytes to the collective, this rank {}: the ranks' counts or type signatures differ",
                    m.rank, m.theirs, m.mine
                ),
            )),
        });
        let r = r.map(|()| {
            let parts = contribution.parts();
            // SAFETY: as planned (`plan`): the buffers are the application's, valid for the
            // call, and the scratch blocks hold every rank's part.
            unsafe { finish.run(parts) }
        });
        let mut spare = contribution.parts;
        spare.clear();
        d.spare_parts = spare;
        self.coll.slots.drivers.put(ctx, Some(d));
        r
    }

    /// The communicator's driver; at the first use rank 0 creates the segment and
    /// broadcasts its name over the tree (empty: none, every rank uses the messages).
    fn slot_driver(&mut self, comm: Handle, ctx: u32, rank: i32, size: i32) -> MpiResult<Option<Box<Driver>>> {
        match self.coll.slots.drivers.take(ctx) {
            Some(Some(d)) => return Ok(Some(d)),
            Some(None) => {
                self.coll.slots.drivers.put(ctx, None);
                return Ok(None);
            }
            None => {}
        }
        if self.coll.slots.defer {
            // `islot`: agree in the background instead.
            self.coll.slots.deferred = Some(ctx);
            return Ok(None);
        }
        let cap = self.coll.cfg.get_or_insert_with(super::CollConfig::from_env).slot_bytes;
        let made = self.agree_segment(comm, rank, SEGMENT_PREFIX, "slot collectives", |p| Seg::create(p, size as usize, cap), |p| Seg::open(p, size as usize, cap))?;
        let Some((seg, n)) = made else {
            self.coll.slots.drivers.put(ctx, None);
            return Ok(None);
        };
        if rank == 0 {
            let fitted = if seg.cap < cap { format!(" (of {cap}: the file system is short of memory)") } else { String::new() };
            tracing::info!("slot collectives: segment {n}, {size} ranks, {} bytes a slot{fitted}", seg.cap);
        }
        self.slot_driver_from(comm, rank, size, seg).map(Some)
    }

    /// The driver of an agreed segment: its fault hook, and the other ranks' doorbells.
    fn slot_driver_from(&mut self, comm: Handle, rank: i32, size: i32, mut seg: Seg) -> MpiResult<Box<Driver>> {
        let cfg = self.coll.cfg.get_or_insert_with(super::CollConfig::from_env);
        let faults = match cfg.slot_faults.as_deref() {
            None => None,
            Some(spec) => {
                let p = spec.strip_prefix("corrupt=").and_then(|v| v.parse::<f64>().ok()).filter(|p| (0.0..=1.0).contains(p));
                let Some(p) = p else {
                    return Err(MpiError::new(ErrorClass::Arg, format!("STEADFAST_COLL_SLOT_FAULTS={spec:?}: expected corrupt=P with 0 <= P <= 1")));
                };
                Some((Cell::new(0x9e37_79b9_7f4a_7c15 ^ u64::from(self.rank) << 32 | 1), (p * u64::MAX as f64) as u64))
            }
        };
        let Some(jobdir) = self.coll.channels.host.as_ref().map(|h| h.jobdir.clone()) else {
            return Err(MpiError::new(ErrorClass::Intern, "slot collectives: a segment without a job directory"));
        };
        seg.faults = faults;
        let group = self.comm(comm)?.group.clone();
        for &w in group.iter() {
            if w != self.rank && !self.coll.slots.wakers.contains_key(&w) {
                match ShmWaker::open(&jobdir, w) {
                    Ok(k) => {
                        self.coll.slots.wakers.insert(w, k);
                    }
                    // Without its doorbell a sleeping rank wakes by its timeout only: slower,
                    // still correct.
                    Err(e) => tracing::warn!("slot collectives: no doorbell of rank {w}: {e}"),
                }
            }
        }
        let wakers = &self.coll.slots.wakers;
        let wake_fence = group.iter().any(|w| *w != self.rank && wakers.get(w).is_none_or(|k| !k.fence_free()));
        Ok(Box::new(Driver { seg, ex: Exchange::new(rank as usize, size as usize, KEEP_MAX), group, scratch: Vec::new(), reported: (0, 0), spare_parts: Vec::new(), wake_fence }))
    }

    /// Ring the doorbells of the communicator's other ranks that sleep. The fence between
    /// the publication and the look at a sleeper's `waiting` word is left to the sleepers'
    /// heavy fences where every rank uses asymmetric fences: as a full fence it waited for
    /// the publication's line to leave the readers' caches, a crossing between CPUs in
    /// every call (2 ranks, 4-byte Allreduce after a barrier: 94 % of the samples of the
    /// call's start on the instruction after the fence).
    fn slot_wake(&self, d: &Driver) {
        if d.wake_fence {
            fence(Ordering::SeqCst);
        }
        for &w in d.group.iter() {
            if w != self.rank {
                if let Some(k) = self.coll.slots.wakers.get(&w) {
                    k.wake_fenced();
                }
            }
        }
    }

    /// Answer repair requests of the communicators' exchanges (idle progress).
    pub(crate) fn slots_service(&mut self) {
        if !self.coll.slots.retired.is_empty() {
            let mut retired = std::mem::take(&mut self.coll.slots.retired);
            for d in &mut retired {
                if d.ex.serve(&d.seg, &[]) {
                    self.slot_wake(d);
                }
            }
            retired.retain(|d| !d.ex.quiet(&d.seg));
            self.coll.slots.retired = retired;
        }
        if self.coll.slots.drivers.is_empty() {
            return;
        }
        let mut served = Vec::new();
        for (ctx, d) in self.coll.slots.drivers.iter_mut() {
            if d.ex.serve(&d.seg, &[]) {
                served.push(ctx);
            }
        }
        for ctx in served {
            if let Some(d) = self.coll.slots.drivers.get(ctx) {
                self.slot_wake(d);
            }
        }
    }
}

/// A slot call: the communicator's driver (out of the map while the call runs), the
/// contribution, where received parts go, and the local steps after.
pub(crate) struct SlotOp {
    ctx: u32,
    comm: Handle,
    d: Box<Driver>,
    contribution: Contribution,
    sink: Dests,
    finish: Finish,
    /// Doorbells rung for this rank's count of a held call.
    drained: bool,
    /// Corrupt parts seen and repairs served when the doorbells were last rung.
    seen: (u64, u64),
    /// A second exchange that completes the collective (a split Allreduce's Allgather).
    /// Boxed: a call is moved a few times on its way, and the rare second step made every
    /// call 150 bytes larger.
    follow: Option<Box<Coll>>,
    /// A barrier rooted at this rank (`Exchange::start_rooted`), and whether this rank is
    /// the root (it publishes last).
    rooted: Option<usize>,
    is_root: bool,
    /// This rank in the communicator.
    rank: usize,
}

// SAFETY: the pointers are the application's buffers of a call in progress and the driver's
// scratch; the engine runs under one lock.
unsafe impl Send for SlotOp {}

/// This rank's contribution.
struct Contribution {
    /// The parts: slices of the application's buffers, or of `owned`. Valid while the call
    /// runs (the application keeps its buffers, `owned` is not touched).
    parts: Vec<&'static [u8]>,
    /// Packed data (a non-contiguous send type, or an Alltoall in place).
    _owned: Option<Vec<u8>>,
    bytes: usize,
}

impl Contribution {
    fn parts(&self) -> &[&[u8]] {
        &self.parts
    }

    /// # Safety
    /// `data` stays valid and unchanged while the call runs.
    unsafe fn new(d: &mut Driver, data: std::borrow::Cow<'_, [u8]>, lens: impl Iterator<Item = usize>) -> Contribution {
        let (ptr, bytes, owned) = match data {
            std::borrow::Cow::Borrowed(b) => (b.as_ptr(), b.len(), None),
            std::borrow::Cow::Owned(v) => (v.as_ptr(), v.len(), Some(v)),
        };
        let mut parts = std::mem::take(&mut d.spare_parts);
        parts.clear();
        let mut at = 0;
        for l in lens {
            let l = l.min(bytes - at);
            parts.push(std::slice::from_raw_parts(ptr.add(at), l));
            at += l;
        }
        Contribution { parts, _owned: owned, bytes }
    }
}

/// What follows the exchange on this rank.
enum Finish {
    Nothing,
    /// Nothing, and the call fails with this rank's own argument error (see [`refused`]).
    Refuse(MpiError),
    /// This rank's own part `part` into its receive block at `dst`.
    Own { part: usize, dst: *mut u8 },
    /// Every rank's block from the scratch (this rank's from its part unless in place) into
    /// the non-contiguous receive blocks.
    Unpack { recv: Buf, stride: usize, block: usize, part: usize, me: usize, n: usize, in_place: bool, scratch: *const u8 },
    /// The scratch's `n` vectors reduced in rank order into `recv`.
    Reduce { recv: *mut u8, count: usize, len: usize, stride: usize, n: usize, scratch: *const u8, red: Reduction },
}

impl Finish {
    /// # Safety
    /// The buffers planned for the call are valid; the call completed.
    unsafe fn run(&self, parts: &[&[u8]]) {
        match self {
            Finish::Nothing | Finish::Refuse(_) => {}
            Finish::Own { part, dst } => {
                let p = parts[*part];
                // May be the same memory (an Alltoall in place packs a copy, an Allgather in
                // place plans nothing): `copy`, not `copy_nonoverlapping`.
                std::ptr::copy(p.as_ptr(), *dst, p.len());
            }
            Finish::Unpack { recv, stride, block, part, me, n, in_place, scratch } => {
                for r in 0..*n {
                    if r == *me && *in_place {
                        continue;
                    }
                    let src = if r == *me { parts[*part] } else { std::slice::from_raw_parts(scratch.add(r * block), *block) };
                    recv.dtype.unpack(src, recv.ptr.wrapping_add(r * stride), recv.count);
                }
            }
            Finish::Reduce { recv, count, len, stride, n, scratch, red } => {
                if *len == 0 {
                    return;
                }
                // v0 op (v1 op (... op v[n-1])), the same on every rank.
                std::ptr::copy_nonoverlapping(scratch.add((n - 1) * stride), *recv, *len);
                for r in (0..n - 1).rev() {
                    red.apply(scratch.add(r * stride), *recv, *count);
                }
            }
        }
    }
}

/// Bytes of each rank's contribution to slot collective `c` on `size` ranks (equal on every
/// rank by the type-signature rule); None for a call the exchange does not serve.
fn contribution_bytes(c: &Coll, size: i32) -> Option<usize> {
    Some(match c {
        Coll::Barrier => 0,
        Coll::Allreduce { buf, red } if red.dtype.is_contiguous() => red.dtype.packed_size(buf.count),
        Coll::Allgather { send: Some(s), .. } => s.dtype.packed_size(s.count),
        Coll::Allgather { send: None, recv } => recv.dtype.packed_size(recv.count),
        Coll::Alltoall { send: Some(s), .. } => s.dtype.packed_size(s.count).saturating_mul(size as usize),
        Coll::Alltoall { send: None, recv } => recv.dtype.packed_size(recv.count).saturating_mul(size as usize),
        Coll::ReduceScatter { counts, red, .. } if red.dtype.is_contiguous() && counts.len() == size as usize => {
            red.dtype.packed_size(counts.iter().sum())
        }
        Coll::ReduceScatterBlock { buf, red } if red.dtype.is_contiguous() => red.dtype.packed_size(buf.count).saturating_mul(size as usize),
        _ => return None,
    })
}

/// The contribution, the destinations and the local steps of collective `c` on rank `me`
/// of `n` (the rule picked the exchange for it).
fn plan(d: &mut Driver, me: usize, n: usize, c: &Coll) -> MpiResult<(Contribution, Dests, Finish)> {
    let none = || Dests { base: std::ptr::null_mut(), stride: 0, len: 0, part: 0 };
    // SAFETY (every `Contribution::new` and raw slice below): the application's buffers of
    // the sizes its arguments give, valid and unchanged while the call runs.
    unsafe {
        match c {
            Coll::Barrier => Ok((Contribution::new(d, std::borrow::Cow::Borrowed(&[]), std::iter::empty()), none(), Finish::Nothing)),
            Coll::Allreduce { buf, red } => {
                let len = red.dtype.packed_size(buf.count);
                let own = Contribution::new(d, std::borrow::Cow::Borrowed(own_bytes(buf, len)), std::iter::once(len));
                Ok(reduce_plan(d, me, n, own, 0, buf.recv, buf.count, red))
            }
            Coll::ReduceScatterBlock { buf, red } => {
                let block = red.dtype.packed_size(buf.count);
                let own = Contribution::new(d, std::borrow::Cow::Borrowed(own_bytes(buf, block * n)), std::iter::repeat_n(block, n));
                Ok(reduce_plan(d, me, n, own, me, buf.recv, buf.count, red))
            }
            Coll::ReduceScatter { buf, counts, red } => {
                let size = red.dtype.packed_size(1);
                let total: usize = counts.iter().sum();
                let own = Contribution::new(d, std::borrow::Cow::Borrowed(own_bytes(buf, total * size)), counts.iter().map(|k| k * size));
                Ok(reduce_plan(d, me, n, own, me, buf.recv, counts[me], red))
            }
            Coll::Allgather { send, recv } => {
                let block = recv.dtype.packed_size(recv.count);
                let stride = block_stride(recv);
                let data = match send {
                    None => packed(recv.ptr.wrapping_add(me * stride), recv.count, &recv.dtype),
                    Some(s) => packed(s.ptr, s.count, &s.dtype),
                };
                if data.len() != block {
                    let e = MpiError::new(ErrorClass::Truncate, "allgather: the send data and a receive block differ in size");
                    return Ok(refused(d, n, data, 1, e));
                }
                let own = Contribution::new(d, data, std::iter::once(block));
                Ok(gather_plan(d, me, n, own, 0, recv, send.is_none()))
            }
            Coll::Alltoall { send, recv } => {
                let block = recv.dtype.packed_size(recv.count);
                // In place the receive buffer is also the send buffer: its blocks are packed
                // into a copy first, since received blocks land there while this rank's are
                // still served from it.
                let data = match send {
                    None => std::borrow::Cow::Owned(packed(recv.ptr, recv.count * n, &recv.dtype).into_owned()),
                    Some(s) => packed(s.ptr, s.count * n, &s.dtype),
                };
                if data.len() != block * n {
                    let e = MpiError::new(ErrorClass::Truncate, "alltoall: the send blocks and the receive blocks differ in size");
                    return Ok(refused(d, n, data, n, e));
                }
                let own = Contribution::new(d, data, std::iter::repeat_n(block, n));
                Ok(gather_plan(d, me, n, own, me, recv, false))
            }
            _ => Err(MpiError::new(ErrorClass::Intern, "slot exchange: not a collective it runs")),
        }
    }
}

/// A call this rank's own arguments make erroneous (its send and receive sizes differ): it
/// still takes part, contributing what it has in `parts` equal parts so the other ranks
/// see a contribution of another size and fail too rather than wait for it, takes nothing
/// from anyone into the application's buffers, and reports `e`.
fn refused(d: &mut Driver, n: usize, data: std::borrow::Cow<'_, [u8]>, parts: usize, e: MpiError) -> (Contribution, Dests, Finish) {
    let part = data.len() / parts;
    // SAFETY: `data` is the application's buffer (valid for the call) or owned by the
    // contribution.
    let own = unsafe { Contribution::new(d, std::borrow::Cow::Owned(data.into_owned()), std::iter::repeat_n(part, parts)) };
    let scratch = scratch_for(&mut d.scratch, n, part);
    (own, Dests { base: scratch, stride: part, len: part, part: 0 }, Finish::Refuse(e))
}

/// Part `part` of every rank into the receive blocks of `recv` (block `r` from rank `r`;
/// this rank's own from its contribution unless `in_place`).
fn gather_plan(d: &mut Driver, me: usize, n: usize, own: Contribution, part: usize, recv: &Buf, in_place: bool) -> (Contribution, Dests, Finish) {
    let block = recv.dtype.packed_size(recv.count);
    let stride = block_stride(recv);
    if recv.dtype.is_contiguous() {
        let sink = Dests { base: recv.ptr, stride, len: block, part };
        let finish = if in_place { Finish::Nothing } else { Finish::Own { part, dst: recv.ptr.wrapping_add(me * stride) } };
        return (own, sink, finish);
    }
    let scratch = scratch_for(&mut d.scratch, n, block);
    let sink = Dests { base: scratch, stride: block, len: block, part };
    (own, sink, Finish::Unpack { recv: recv.clone(), stride, block, part, me, n, in_place, scratch })
}

/// Part `part` of every rank into the scratch, reduced into `count` elements at `recv`.
#[allow(clippy::too_many_arguments)]
fn reduce_plan(d: &mut Driver, me: usize, n: usize, own: Contribution, part: usize, recv: *mut u8, count: usize, red: &Reduction) -> (Contribution, Dests, Finish) {
    let len = red.dtype.packed_size(count);
    let stride = len.div_ceil(16) * 16;
    let scratch = scratch_for(&mut d.scratch, n, stride);
    // SAFETY: scratch block `me` holds `stride >= len` bytes; the own part is `len` bytes
    // (equal counts everywhere).
    unsafe { std::ptr::copy_nonoverlapping(own.parts[part].as_ptr(), scratch.add(me * stride), len) };
    let sink = Dests { base: scratch, stride, len, part };
    (own, sink, Finish::Reduce { recv, count, len, stride, n, scratch, red: red.clone() })
}

/// Bytes between the starts of two receive blocks.
fn block_stride(recv: &Buf) -> usize {
    (recv.dtype.extent.max(0) as usize).saturating_mul(recv.count)
}

/// The contribution of a reduction: the send buffer, or the receive buffer in place.
fn own_bytes<'a>(b: &RBuf, bytes: usize) -> &'a [u8] {
    let p = b.send.unwrap_or(b.recv.cast_const());
    // SAFETY: the application's buffer of `bytes` bytes (contiguous type), valid for the call.
    unsafe { std::slice::from_raw_parts(p, bytes) }
}

/// The packed data of `count` elements of `t` at `p`: the buffer itself when contiguous,
/// else a packed copy.
///
/// # Safety
/// `p` holds `count` elements of `t`, valid and unchanged for the returned lifetime.
unsafe fn packed<'a>(p: *const u8, count: usize, t: &TypeRef) -> std::borrow::Cow<'a, [u8]> {
    let n = t.packed_size(count);
    if t.is_contiguous() {
        return std::borrow::Cow::Borrowed(std::slice::from_raw_parts(p, n));
    }
    let mut v = vec![0; n];
    t.pack(p, count, &mut v);
    std::borrow::Cow::Owned(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_segment_fits_a_quarter_of_the_free_space() {
        let cap = 2 << 20;
        // Plenty of room, or unknown: the setting.
        assert_eq!(fitted_cap(4, cap, Some(1 << 40)), cap);
        assert_eq!(fitted_cap(4, cap, None), cap);
        // 4 MiB free: the whole segment within 1 MiB, slots line-sized.
        for ranks in [2, 4, 8, 16] {
            let c = fitted_cap(ranks, cap, Some(4 << 20));
            assert!(c < cap && c % LINE == 0, "{ranks} ranks: {c}");
            assert!(seg_len(ranks, c) <= 1 << 20, "{ranks} ranks: segment {}", seg_len(ranks, c));
            assert!(seg_len(ranks, c + LINE) > 1 << 20, "{ranks} ranks: {c} is not the largest");
        }
        // Nothing free: no data at all (a barrier still fits).
        assert_eq!(fitted_cap(8, cap, Some(0)), 0);
    }
}
