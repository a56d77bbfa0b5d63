//! Mailboxes: puts and gets of passive-target epochs on `MPI_Win_create` windows within one
//! host, handed to the target through shared memory instead of a cross-memory system call.
//!
//! The memory of such a window is the application's private memory, which another process
//! reaches only through the kernel: `process_vm_writev` / `readv` cost 1.15 µs for 8 bytes
//! and 66-70 µs for 1 MiB here, against 18 µs for a `memcpy` of 1 MiB (measured with a
//! forked child, pinned, 2000-200 000 calls). So each origin has a ring of [`SLOTS`] slots
//! towards each target in a shared segment of the window: a put copies its data into a slot
//! and returns; a get posts its request and waits for the data. The target applies what
//! arrived whenever it makes progress (its engine's service, `rma_net::NetService`, and the
//! waits of this module). A large transfer is cut into slot-sized pieces, which the target
//! copies out while the origin fills the next ones.
//!
//! A target that is not inside MPI would hold its origins up. So a slot nobody took within
//! [`CLAIM_AFTER`] is *claimed* by its origin, which then moves the data itself with the
//! system call; the slot's state word decides who applies it (one compare-and-swap each),
//! so every record is applied exactly once. After a claim the origin sends its next
//! [`SKIP_AFTER_CLAIM`] operations to that target by the system call directly.
//!
//! A slot's state word is `lap << 3 | phase`: the record of index `i` of a ring is written
//! in slot `i % SLOTS` with lap `i / SLOTS + 1` (modulo 2^29), so a slot holding lap `l`
//! in phase [`DONE`] is free for index `i + SLOTS`. Phases: [`DONE`] (applied, or never
//! used), [`READY`] (written by the origin), [`TAKEN`] (the target applies it), [`CLAIMED`]
//! (the origin applies it). Puts complete at the target by MPI_Win_flush and MPI_Win_unlock
//! ([`Mail::drain`]); a get completes before it returns.
//!
//! The protocol is [`Ring`], on any memory; the unit tests drive it in seeded random
//! interleavings of origins, targets and claims.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use steadfast_core::{ErrorClass, MpiError};

type R<T> = Result<T, MpiError>;

/// Slots of one ring (origin to target).
pub(crate) const SLOTS: u32 = 8;
/// Data bytes of a slot: the largest piece of a transfer.
pub(crate) const SLOT_DATA: usize = 16 * 1024;
/// A slot: a line of header (state word, kind, length, target address), then the data.
const SLOT_HEAD: usize = 64;
const SLOT_STRIDE: usize = SLOT_HEAD + SLOT_DATA;
const RING: usize = SLOTS as usize * SLOT_STRIDE;
/// Largest window with mailboxes: the segment holds a ring per ordered pair of members
/// (in memory only as far as they are used).
pub(crate) const MAX_MEMBERS: usize = 32;
const LAP_MASK: u32 = (1 << 29) - 1;

pub(crate) const DONE: u32 = 0;
pub(crate) const READY: u32 = 1;
pub(crate) const TAKEN: u32 = 2;
pub(crate) const CLAIMED: u32 = 3;

pub(crate) const PUT: u32 = 1;
pub(crate) const GET: u32 = 2;

/// An origin claims a record its target has not taken within this time.
const CLAIM_AFTER: Duration = Duration::from_micros(5);
/// After a claim, this many operations towards that target use the system call directly.
const SKIP_AFTER_CLAIM: u32 = 64;
/// A record its target took and has not finished in this time: check the target lives.
const TAKEN_CHECK: Duration = Duration::from_secs(1);
/// A target that applied a record this recently keeps polling in its waits (yielding the
/// CPU, not sleeping on its path, whose doorbell the mailboxes do not ring): a stream of
/// operations with shorter gaps finds it serving.
const AWAKE_FOR: Duration = Duration::from_millis(10);

/// Nanoseconds since the first call in this process.
fn clock() -> u64 {
    static BASE: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    BASE.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// Lap of the record of index `i` of a ring.
fn lap(i: u32) -> u32 {
    (i / SLOTS).wrapping_add(1) & LAP_MASK
}

fn word(lap: u32, phase: u32) -> u32 {
    (lap << 3) | phase
}

/// One record as a target or a claiming origin sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Record {
    pub kind: u32,
    pub len: usize,
    /// Address at the target, in the target's address space.
    pub addr: usize,
    /// Address of the record's data in the slot.
    pub data: usize,
}

/// One ring of slots from an origin to a target, at `base` (RING bytes, 8-byte aligned).
#[derive(Clone, Copy)]
pub(crate) struct Ring {
    base: usize,
}

impl Ring {
    pub(crate) fn at(base: usize) -> Ring {
        Ring { base }
    }

    fn slot(&self, i: u32) -> usize {
        self.base + (i % SLOTS) as usize * SLOT_STRIDE
    }

    fn state(&self, i: u32) -> &AtomicU32 {
        // SAFETY: the ring lies in a mapping that outlives it (`Mail` owns the segment; the
        // tests own their buffer), and a slot starts on an 8-byte boundary.
        unsafe { &*(self.slot(i) as *const AtomicU32) }
    }

    /// The record of index `i`, as its origin wrote it.
    fn record(&self, i: u32) -> Record {
        let s = self.slot(i);
        // SAFETY: the header words follow the state word in the slot's first line.
        unsafe {
            Record {
                kind: std::ptr::read_volatile((s + 4) as *const u32),
                len: std::ptr::read_volatile((s + 8) as *const u32) as usize,
                addr: std::ptr::read_volatile((s + 16) as *const u64) as usize,
                data: s + SLOT_HEAD,
            }
        }
    }

    /// Whether index `i` may be written: the record `SLOTS` before it is done (the waits of
    /// `Mail` ask `phase` of that record).
    #[cfg(test)]
    pub(crate) fn free_for(&self, i: u32) -> bool {
        self.done(i.wrapping_sub(SLOTS))
    }

    /// Whether the record of index `i` is applied (or, for a get, its data is in the slot).
    #[cfg(test)]
    pub(crate) fn done(&self, i: u32) -> bool {
        self.state(i).load(Ordering::Acquire) == word(lap(i), DONE)
    }

    /// The phase of the record of index `i` (None once the slot moved to another lap).
    pub(crate) fn phase(&self, i: u32) -> Option<u32> {
        let s = self.state(i).load(Ordering::Acquire);
        (s >> 3 == lap(i)).then_some(s & 7)
    }

    /// Write the record of index `i` (the slot is free for it) and hand it to the target:
    /// `data` is copied in for a put.
    ///
    /// # Safety
    /// `data` holds `len` (≤ SLOT_DATA) bytes when `kind` is PUT; only the ring's origin
    /// calls it, for consecutive indices.
    pub(crate) unsafe fn post(&self, i: u32, kind: u32, addr: usize, data: *const u8, len: usize) {
        let s = self.slot(i);
        // SAFETY: the slot is free for index `i`, so only this origin touches it until the
        // state word below publishes it.
        unsafe {
            std::ptr::write_volatile((s + 4) as *mut u32, kind);
            std::ptr::write_volatile((s + 8) as *mut u32, len as u32);
            std::ptr::write_volatile((s + 16) as *mut u64, addr as u64);
            if kind == PUT {
                steadfast_paths::copy::copy(data, (s + SLOT_HEAD) as *mut u8, len);
            }
        }
        self.state(i).store(word(lap(i), READY), Ordering::Release);
    }

    /// Take a ready record of this ring for the target to apply, looking at the slots from
    /// `from` on (the one after the last taken: the oldest record, while the origin writes
    /// them in order); None when no slot is ready. `finish` must follow. Returns the state
    /// word it was taken in, the record and its slot.
    pub(crate) fn take_any(&self, from: u32) -> Option<(u32, Record, u32)> {
        for k in (0..SLOTS).map(|k| (from + k) % SLOTS) {
            let st = self.state(k);
            let s = st.load(Ordering::Acquire);
            if s & 7 == READY && st.compare_exchange(s, (s & !7) | TAKEN, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                // The index is known only modulo the laps: `finish` keeps the lap.
                return Some((s, self.record(k), k));
            }
        }
        None
    }

    /// The target finished the record `take_any` returned with state word `taken_from`.
    pub(crate) fn finish(&self, taken_from: u32, rec: &Record) {
        let slot = rec.data - SLOT_HEAD;
        // SAFETY: as in `state`.
        let st = unsafe { &*(slot as *const AtomicU32) };
        st.store(taken_from & !7, Ordering::Release);
    }

    /// The origin claims the record of index `i` when it is still ready: it then applies it
    /// itself and calls `release`.
    pub(crate) fn claim(&self, i: u32) -> Option<Record> {
        self.state(i)
            .compare_exchange(word(lap(i), READY), word(lap(i), CLAIMED), Ordering::Acquire, Ordering::Relaxed)
            .ok()
            .map(|_| self.record(i))
    }

    pub(crate) fn release(&self, i: u32) {
        self.state(i).store(word(lap(i), DONE), Ordering::Release);
    }
}

/// Bytes of the mail segment of a window of `n` members: a line per member (its doorbell),
/// then a ring per ordered pair.
pub(crate) fn segment_len(n: usize) -> usize {
    rings_offset(n) + n * n * RING
}

fn rings_offset(n: usize) -> usize {
    (n * 64).div_ceil(4096) * 4096
}

/// Origin side of one target.
struct Outbox {
    st: Mutex<Out>,
    /// Records were posted since the last drain.
    pending: AtomicBool,
}

#[derive(Default)]
struct Out {
    /// Index of the next record.
    head: u32,
    /// Operations left to send by the system call after a claim.
    skip: u32,
}

/// The mailboxes of one window, as one member sees them.
pub(crate) struct Mail {
    seg: usize,
    n: usize,
    me: usize,
    /// This member's window memory (what the records may address).
    my_base: usize,
    my_size: usize,
    /// Doorbell value of the last scan of this member's rings.
    seen: AtomicU32,
    /// When this member last applied a record (`clock`), 0 never.
    served_at: AtomicU64,
    /// Per origin: the slot after the last record taken from its ring.
    next: Vec<AtomicU32>,
    out: Vec<Outbox>,
    /// Keeps the segment mapped as long as anyone (window, service, thread cache) holds this.
    _seg: Box<dyn Send + Sync>,
}

/// Moves one claimed record with the system call: `(pid, write, target address, local
/// buffer, len)`.
pub(crate) type Mover<'a> = &'a dyn Fn(i32, bool, usize, *mut u8, usize) -> R<()>;

impl Mail {
    /// # Safety
    /// `seg` is a mapping of `segment_len(n)` bytes shared by the window's members, kept
    /// alive by `keep`.
    pub(crate) unsafe fn new(seg: usize, n: usize, me: usize, my_base: usize, my_size: usize, keep: Box<dyn Send + Sync>) -> Mail {
        Mail {
            seg,
            n,
            me,
            my_base,
            my_size,
            seen: AtomicU32::new(0),
            served_at: AtomicU64::new(0),
            next: (0..n).map(|_| AtomicU32::new(0)).collect(),
            out: (0..n).map(|_| Outbox { st: Mutex::new(Out::default()), pending: AtomicBool::new(false) }).collect(),
            _seg: keep,
        }
    }

    fn doorbell(&self, t: usize) -> &AtomicU32 {
        // SAFETY: the segment's first lines are the members' doorbells.
        unsafe { &*((self.seg + t * 64) as *const AtomicU32) }
    }

    /// Records member `t` applied so far (the doorbell line's second word): an origin does
    /// not claim while it grows.
    fn applied(&self, t: usize) -> &AtomicU32 {
        // SAFETY: as for `doorbell`.
        unsafe { &*((self.seg + t * 64 + 4) as *const AtomicU32) }
    }

    fn ring(&self, origin: usize, target: usize) -> Ring {
        Ring::at(self.seg + rings_offset(self.n) + (target * self.n + origin) * RING)
    }

    /// Whether puts towards `target` (any target: None) wait for a drain.
    pub(crate) fn pending(&self, target: Option<usize>) -> bool {
        match target {
            Some(t) => self.out.get(t).is_some_and(|o| o.pending.load(Ordering::Relaxed)),
            None => self.out.iter().any(|o| o.pending.load(Ordering::Relaxed)),
        }
    }

    /// Apply what origins posted to this member; true if something was.
    pub(crate) fn serve(&self) -> bool {
        let bell = self.doorbell(self.me).load(Ordering::Acquire);
        if bell == self.seen.load(Ordering::Relaxed) {
            return false;
        }
        self.seen.store(bell, Ordering::Relaxed);
        let mut applied = 0u32;
        for o in 0..self.n {
            if o == self.me {
                continue;
            }
            let ring = self.ring(o, self.me);
            let next = &self.next[o];
            while let Some((from, rec, k)) = ring.take_any(next.load(Ordering::Relaxed)) {
                self.apply(&rec);
                ring.finish(from, &rec);
                next.store((k + 1) % SLOTS, Ordering::Relaxed);
                applied += 1;
            }
        }
        if applied > 0 {
            self.served_at.store(clock().max(1), Ordering::Relaxed);
            self.applied(self.me).fetch_add(applied, Ordering::Relaxed);
        }
        applied > 0
    }

    /// Whether this member applied a record within `AWAKE_FOR`.
    pub(crate) fn recently_served(&self) -> bool {
        let at = self.served_at.load(Ordering::Relaxed);
        at != 0 && clock().saturating_sub(at) < AWAKE_FOR.as_nanos() as u64
    }

    /// Apply a record taken from one of this member's rings. One whose range is not inside
    /// this member's window (the origin checked it; the segment is shared with the job's
    /// other processes only) is dropped with a warning.
    fn apply(&self, rec: &Record) {
        let inside = rec.len <= SLOT_DATA && rec.addr >= self.my_base && rec.addr.checked_add(rec.len).is_some_and(|e| e <= self.my_base + self.my_size);
        if !inside || (rec.kind != PUT && rec.kind != GET) {
            tracing::warn!("one-sided mailbox: dropped a record of kind {} for {} bytes at {:#x}, outside this window", rec.kind, rec.len, rec.addr);
            return;
        }
        // SAFETY: the range lies inside this member's window memory; the data in the slot.
        unsafe {
            if rec.kind == PUT {
                steadfast_paths::copy::copy(rec.data as *const u8, rec.addr as *mut u8, rec.len);
            } else {
                steadfast_paths::copy::copy(rec.addr as *const u8, rec.data as *mut u8, rec.len);
            }
        }
    }

    /// Move `len` bytes between `buf` and `addr` at member `target` (process `pid`): a put
    /// (`write`) returns once the data is in the slots, a get once it is in `buf`. False
    /// when the caller is to use the system call (after a claim, see the module doc).
    ///
    /// # Safety
    /// `buf` holds `len` bytes; `[addr, addr + len)` lies inside the target's window.
    pub(crate) unsafe fn transfer(&self, target: usize, pid: i32, addr: usize, buf: *mut u8, len: usize, write: bool, mover: Mover) -> R<bool> {
        let Some(ob) = self.out.get(target) else { return Ok(false) };
        let mut out = ob.st.lock().unwrap_or_else(|p| p.into_inner());
        if out.skip > 0 {
            out.skip -= 1;
            return Ok(false);
        }
        let ring = self.ring(self.me, target);
        let bell = self.doorbell(target);
        let mut off = 0;
        // Gets in flight: index, offset in `buf`, length.
        let mut gets: std::collections::VecDeque<(u32, usize, usize)> = Default::default();
        while off < len || !gets.is_empty() {
            if off < len && out.skip > 0 {
                // A record was claimed: the target is not serving; the rest of the transfer
                // goes by the system call at once rather than piece by piece after a wait.
                // SAFETY: `buf + off` holds `len - off` bytes; the range is the caller's.
                mover(pid, write, addr + off, unsafe { buf.add(off) }, len - off)?;
                off = len;
            } else if off < len && gets.len() < SLOTS as usize {
                let i = out.head;
                self.wait(&ring, target, i.wrapping_sub(SLOTS), pid, &mut out, mover)?;
                let piece = (len - off).min(SLOT_DATA);
                // SAFETY: the slot is free for index `i`; `buf + off` holds `piece` bytes.
                unsafe { ring.post(i, if write { PUT } else { GET }, addr + off, buf.add(off), piece) };
                out.head = i.wrapping_add(1);
                bell.fetch_add(1, Ordering::Release);
                if !write {
                    gets.push_back((i, off, piece));
                }
                off += piece;
            } else if let Some((i, o, l)) = gets.pop_front() {
                self.wait(&ring, target, i, pid, &mut out, mover)?;
                // SAFETY: the record is done: the slot holds the target's data until this
                // origin writes the slot again.
                unsafe { steadfast_paths::copy::copy((ring.slot(i) + SLOT_HEAD) as *const u8, buf.add(o), l) };
            }
        }
        if write {
            ob.pending.store(true, Ordering::Relaxed);
        }
        Ok(true)
    }

    /// Complete every put posted towards `target` (every target: None).
    pub(crate) fn drain(&self, target: Option<usize>, pid_of: &dyn Fn(usize) -> i32, mover: Mover) -> R<()> {
        let targets: Vec<usize> = match target {
            Some(t) => vec![t],
            None => (0..self.n).collect(),
        };
        for t in targets {
            let Some(ob) = self.out.get(t) else { continue };
            if !ob.pending.load(Ordering::Relaxed) {
                continue;
            }
            let mut out = ob.st.lock().unwrap_or_else(|p| p.into_inner());
            let ring = self.ring(self.me, t);
            // Records more than a ring behind the head are done (their slots were reused);
            // those before the first lap read as done (lap 0).
            let mut i = out.head.wrapping_sub(SLOTS);
            while i != out.head {
                self.wait(&ring, t, i, pid_of(t), &mut out, mover)?;
                i = i.wrapping_add(1);
            }
            ob.pending.store(false, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Wait until the record of index `i` towards `target` is done: serve this member's own
    /// rings meanwhile (its target may be waiting for it in the same way), claim it once
    /// it stayed ready for `CLAIM_AFTER` while the target applied nothing.
    fn wait(&self, ring: &Ring, target: usize, i: u32, pid: i32, out: &mut Out, mover: Mover) -> R<()> {
        let mut start = Instant::now();
        let mut polls = 0u32;
        let mut applied = self.applied(target).load(Ordering::Relaxed);
        loop {
            match ring.phase(i) {
                // Done, or (the slot moved on) done long ago.
                Some(DONE) | None => return Ok(()),
                Some(READY) if polls >= 64 && start.elapsed() >= CLAIM_AFTER => {
                    if let Some(rec) = ring.claim(i) {
                        let moved = mover(pid, rec.kind == PUT, rec.addr, rec.data as *mut u8, rec.len);
                        ring.release(i);
                        out.skip = SKIP_AFTER_CLAIM;
                        moved?;
                        return Ok(());
                    }
                }
                // SAFETY (kill): signal 0 only checks that the process exists.
                Some(_)
                    if polls % 4096 == 4095
                        && start.elapsed() >= TAKEN_CHECK
                        && unsafe { libc::kill(pid, 0) } != 0
                        && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH) =>
                {
                    return Err(MpiError::new(ErrorClass::ProcFailed, format!("the target process {pid} of a one-sided transfer ended while applying it")));
                }
                _ => {}
            }
            polls = polls.wrapping_add(1);
            if polls.is_multiple_of(64) {
                let now = self.applied(target).load(Ordering::Relaxed);
                if now != applied {
                    // The target is serving (other records first): give it time.
                    applied = now;
                    start = Instant::now();
                }
                self.serve();
                if polls >= 64 * 64 {
                    std::thread::yield_now();
                }
            } else {
                std::hint::spin_loop();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use rand::{Rng as _, SeedableRng};

    /// A seeded generator: a failing seed replays.
    struct Rng(rand_chacha::ChaCha8Rng);
    impl Rng {
        fn new(seed: u64) -> Rng {
            Rng(rand_chacha::ChaCha8Rng::seed_from_u64(seed))
        }
        fn below(&mut self, n: u64) -> u64 {
            self.0.gen_range(0..n)
        }
    }

    /// One origin's writes of `ops` records through one ring to one target, interleaved at
    /// random with the target taking and finishing records and the origin claiming the
    /// oldest unfinished one, as the real code's steps are. After every step: no slot is
    /// written while its record is not done; at the end every record was applied exactly
    /// once with its own bytes, and every get saw the data of the put before it.
    fn run(seed: u64, ops: u32, claims: bool) {
        let mut rng = Rng::new(seed);
        let mut mem = vec![0u64; RING / 8 + 1];
        let ring = Ring::at(mem.as_mut_ptr() as usize);
        // The target's memory: one word per record index, written by puts.
        let mut target = vec![0u64; ops as usize];
        let mut applied = vec![0u32; ops as usize];
        let mut head = 0u32;
        let mut taken: Vec<(u32, Record)> = Vec::new();
        let mut claimed: Vec<(u32, Record)> = Vec::new();
        let value = |i: u32| (seed << 20) ^ u64::from(i) ^ 0x5a5a;
        let apply = |rec: &Record, target: &mut Vec<u64>, applied: &mut Vec<u32>| {
            let idx = rec.addr;
            assert_eq!(rec.len, 8);
            // SAFETY: the record's data is 8 bytes of the ring's buffer.
            unsafe {
                if rec.kind == PUT {
                    target[idx] = std::ptr::read(rec.data as *const u64);
                } else {
                    std::ptr::write(rec.data as *mut u64, target[idx]);
                }
            }
            applied[idx] += 1;
        };
        let mut steps = 0;
        while applied.iter().any(|&a| a == 0) {
            steps += 1;
            assert!(steps < 1_000_000, "seed {seed}: no progress");
            match rng.below(if claims { 4 } else { 3 }) {
                0 if head < ops => {
                    if ring.free_for(head) {
                        let v = value(head);
                        // SAFETY: 8 bytes from `v`.
                        unsafe { ring.post(head, PUT, head as usize, &v as *const u64 as *const u8, 8) };
                        head += 1;
                    }
                }
                1 => {
                    if let Some((from, rec, _)) = ring.take_any(rng.below(u64::from(SLOTS)) as u32) {
                        taken.push((from, rec));
                    }
                }
                2 if !taken.is_empty() => {
                    let (from, rec) = taken.swap_remove(rng.below(taken.len() as u64) as usize);
                    apply(&rec, &mut target, &mut applied);
                    ring.finish(from, &rec);
                }
                3 => {
                    if !claimed.is_empty() {
                        let (i, rec) = claimed.remove(0);
                        apply(&rec, &mut target, &mut applied);
                        ring.release(i);
                    } else {
                        let oldest = (head.saturating_sub(SLOTS)..head).find(|&i| !ring.done(i));
                        if let Some(i) = oldest {
                            if let Some(rec) = ring.claim(i) {
                                assert_eq!(rec.addr, i as usize, "seed {seed}: claimed the wrong record");
                                claimed.push((i, rec));
                            }
                        }
                    }
                }
                _ => {}
            }
            // No slot holds more than one live record: the origin never laps the target.
            let live = (head.saturating_sub(2 * SLOTS)..head).filter(|&i| !ring.done(i) && ring.phase(i).is_some()).count();
            assert!(live <= SLOTS as usize, "seed {seed}: {live} records live in {SLOTS} slots");
        }
        for i in 0..ops {
            assert_eq!(applied[i as usize], 1, "seed {seed}: record {i} applied {} times", applied[i as usize]);
            assert_eq!(target[i as usize], value(i), "seed {seed}: record {i} carried other bytes");
        }
    }

    #[test]
    fn every_record_is_applied_once_whoever_applies_it() {
        let seeds: u64 = std::env::var("STEADFAST_SIM_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(2000);
        for seed in 0..seeds {
            run(seed, 1 + (seed % 50) as u32, seed % 3 != 0);
        }
    }

    #[test]
    fn laps_wrap_around_the_index() {
        // The indices just before the u32 wrap and after it keep distinct, consecutive laps.
        for i in [u32::MAX - 20, u32::MAX - 8, u32::MAX, 0, 7, 8] {
            assert_ne!(lap(i), lap(i.wrapping_sub(SLOTS)), "index {i}");
            assert_eq!(lap(i.wrapping_sub(SLOTS)), lap(i).wrapping_sub(1) & LAP_MASK, "index {i}");
        }
    }

    #[test]
    fn gets_see_the_targets_bytes() {
        let mut mem = vec![0u64; RING / 8 + 1];
        let ring = Ring::at(mem.as_mut_ptr() as usize);
        for i in 0..40u32 {
            assert!(ring.free_for(i));
            // SAFETY: a get copies nothing in.
            unsafe { ring.post(i, GET, 3, std::ptr::null(), 8) };
            let (from, rec, k) = ring.take_any(i % SLOTS).expect("ready");
            assert_eq!(k, i % SLOTS);
            // SAFETY: 8 bytes of the slot.
            unsafe { std::ptr::write(rec.data as *mut u64, 1000 + u64::from(i)) };
            ring.finish(from, &rec);
            assert!(ring.done(i));
            // SAFETY: as above.
            assert_eq!(unsafe { std::ptr::read((ring.slot(i) + SLOT_HEAD) as *const u64) }, 1000 + u64::from(i));
        }
    }
}
