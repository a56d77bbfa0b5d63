//! Shared-memory path: one segment per receiving rank, holding a single-producer /
//! single-consumer byte ring per sender and a futex "doorbell" the receiver sleeps on.
//!
//! Segment layout (file `JOBDIR/shm-<rank>`, mapped shared by every rank of the host):
//! ```text
//! 0       control page: magic, pid, nranks, ring size, doorbell (futex word), waiting flag
//! 4096    ring from sender 0: [head line][blocked line][tail line][unused line][data: ring_size bytes]
//! ...     ring from sender i at 4096 + i * (RING_META + ring_size)
//! ```
//! Records in a ring are `[u32 record len][u32 payload len][u32 crc][u32 hcrc][header][payload]`,
//! aligned to pairs of 64-byte cache lines; a record that would straddle the end is preceded by a skip
//! record, and so is a small one that would leave the ring's first 64 KiB once the consumer
//! has read everything (the hot window: small messages keep reusing the same pages and
//! lines). `crc` is the CRC32C of the payload-length word, header and payload, and `hcrc` the
//! same over the length word and header only, computed while copying them into the ring (one
//! fused pass). The receiver checks small records whole before delivery; for larger ones (from
//! 256 payload bytes) it checks the header by `hcrc` and hands the payload over unverified
//! ([`PacketSink::packet_unverified`]) so the engine checks it in the copy it makes anyway.
//! Bit 31 of the payload-length word marks a record sent without checksum
//! (`STEADFAST_CHECKSUM=shm=none`). Nothing damaged is delivered. The consumer owns `head`
//! (a monotonically increasing byte counter); the producer keeps its own tail.
//!
//! **Damage is repaired.** The producer keeps a private copy of every checksummed record at
//! its ring offset (the "shadow", as large as the ring). The consumer moves `head` past a
//! record only after it passed its check, so the copy at that offset is the record's until
//! then. A consumer that finds a record damaged leaves it at the head, stores its position
//! in the ring's repair word, sets the repair flag in the producer's control page and rings
//! its doorbell; it reads nothing more from that ring until the producer answered. The
//! producer looks at its flag on every poll (one load of a line nobody writes unless there
//! is damage), rewrites the record (all but its length word) from the copy and clears the
//! repair word. After [`REPAIR_LIMIT`] rewrites of one record, or when the producer holds
//! no copy of it (it was restarted since), the damage is reported as
//! [`PathError::Corrupt`]. The copy costs one more `memcpy` of each record on the send
//! side, into memory only this process touches, made after the record is published (off
//! the receiver's critical path). Rendezvous data sent with [`Path::send_held`] is not
//! copied: the shadow keeps its header and the address of the caller's buffer, which the
//! engine keeps until the receiver's FIN.
//!
//! **The record-length word is the publication flag.** The consumer polls the word at `head`
//! and a record is there once it is non-zero, so a small message costs the receiver one cache
//! line (length, header and up to 8 payload bytes) instead of a shared tail counter plus the
//! record. For that, the word at the position after the last record is always 0: before
//! publishing a record, the producer makes sure the length word of the line that follows it
//! is zero and keeps one line of the ring free for it. After a small record it zeroes the
//! words of a run of free lines ahead (up to 1 KiB, within the hot window) at once, so the
//! line the consumer polls next is not written twice per message. Record starts are
//! aligned to line pairs, and the producer writes the ring in order, so a zeroed word stays zero
//! until the record that starts there (or a payload that covers it) is written.
//!
//! Sleeping is race-free by a Dekker-style handshake: the sleeper stores `waiting = 1`, then
//! re-checks its rings, then sleeps on the doorbell value it read before; a producer publishes
//! its record, then reads `waiting` and bumps and wakes the doorbell if set. A producer that
//! found a ring full and goes to sleep sets the ring's `blocked` flag the same way, and the
//! consumer wakes it after freeing space.
//!
//! Each side of such a handshake needs a full fence between its store and its load. The
//! busy side (a producer after every record, a consumer after every batch) would pay one per
//! message; instead, where the kernel offers `membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED)`
//! and both ranks registered for it (flag in the control page), the side about to *sleep*
//! issues that barrier, which makes every registered thread on the host execute a full
//! fence, and the busy side uses plain loads (an asymmetric fence, as user-space RCU does).
//! Sleeping is rare and already costs a system call; otherwise both sides fence.

use std::fs::OpenOptions;
use std::path::{Path as FsPath, PathBuf};
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use memmap2::MmapMut;

use crate::checksum::Checksum;
use crate::fault::Injector;
use crate::stores::{StoreChoice, StoreSetting};
use crate::{PacketSink, Path, PathCounters, PathError, RawHeader, SendStatus, HDR_LEN};

const MAGIC: u64 = 0x5354_4446_5348_4d31; // "STDFSHM1"
const CTRL_LEN: usize = 4096;
/// A ring's metadata: two pairs of cache lines, so that every ring's data starts on a pair
/// (the control page and the ring sizes are multiples of 128 bytes). Records are placed on
/// pairs counted from the data's start (see `GRANULE`); with 192 bytes of metadata the
/// rings of even-numbered senders started on the second line of a pair, and there a
/// two-line record's second line shared its pair with the next record's first. Within the
/// metadata, the line the consumer writes with every record (`head`) shares its pair with
/// the one written only around sleeps (`blocked`), and the producer's `tail` has a pair to
/// itself.
const RING_META: usize = 256;
const OFF_HEAD: usize = 0;
const OFF_BLOCKED: usize = 64;
/// Repair request (u64, in the blocked line, which only changes when a side sleeps):
/// 0, or 1 + the ring position of a record the consumer found damaged and wants
/// rewritten. Written by the consumer, cleared by the producer when it rewrote the record.
const OFF_REPAIR: usize = 72;
const OFF_TAIL: usize = 128;
const REC_PREFIX: usize = 16;
/// Payload-length word flag: the record carries no checksum.
const REC_NO_CRC: u32 = 1 << 31;
/// Payloads at least this long are checked in the receiver's copy-out, not in a pass here
/// (the header is checked here by its own CRC). Below it the copy is cheaper than the
/// second call into the checksum code the split costs.
const FUSED_CHECK_MIN: usize = 256;
/// Rendezvous payloads at least this long are kept by reference, not copied, for repair.
const SHADOW_REF_MIN: usize = 4096;
/// A message streamed through a ring goes in about this many pieces, none smaller than
/// [`STREAM_PIECE_MIN`] (nor larger than a record may be): the receiver copies a piece out
/// while the sender copies the next one in, so a ping-pong waits for one piece's copy
/// beyond the sender's, not the whole message's. Two ranks, ping-pong of 64 KiB, 256 KiB
/// and 1 MiB: 8.3-8.7, 26.5-27.4 and 96-98 µs in quarter-ring pieces (256 KiB), 6.6-6.8,
/// 17.1-17.3 and 83-89 in sixteenths. Streaming 1 MiB messages lost 6 % (7.3-7.6 GB/s
/// against 6.9-7.1); in pieces of 16 KiB throughout, 15 %.
const STREAM_PIECES: usize = 16;
const STREAM_PIECE_MIN: usize = 16 << 10;
/// Second word of a skip record (a data record holds its exact payload length there).
const SKIP: u32 = u32::MAX;
/// Records of up to [`HOT_RECORD_MAX`] bytes stay in the first `HOT_WINDOW` bytes of a ring
/// while the consumer keeps up: a record that would end past it goes back to the start
/// behind a skip record (and one that would cross a later multiple of it, after large
/// messages or while the consumer lagged, too, once the consumer has read everything). Small messages then keep reusing the same few pages and cache
/// lines (in both processes and in the producer's private copy) instead of walking the
/// whole ring (2 MiB for two ranks), which touched a fresh page every 64 small messages
/// on the first pass (0-byte ping-pong: 0.20 µs against 0.11 µs) and evicted warmer data
/// after it. Records of up to 4 KiB payloads stay too: walking the ring (and its private
/// copy, see `shadow`) cost 2 KiB ping-pong 0.41-0.52 µs against 0.26 in the window, 4 KiB
/// 0.50-0.55 against 0.34-0.40. Larger records walk the whole ring: with a 16 KiB limit,
/// 8 KiB took 0.60 µs against 0.52 and 16 KiB 1.05-1.11 against 0.82-0.90.
const HOT_WINDOW: usize = 64 << 10;
/// A 4 KiB payload's record (56 bytes of prefix and header, rounded up to a granule).
const HOT_RECORD_MAX: usize = 4096 + GRANULE;

const CTRL_MAGIC: usize = 0;
const CTRL_PID: usize = 8;
const CTRL_NRANKS: usize = 12;
const CTRL_RING: usize = 16;
const CTRL_DOORBELL: usize = 64;
const CTRL_WAITING: usize = 128;
/// 1 when the segment's owner registered for `membarrier` global expedited barriers.
const CTRL_ASYM: usize = 192;
/// Non-zero when a consumer asked the segment's owner (as a producer) to rewrite a
/// damaged record in one of its outbound rings; the owner looks at it on every poll
/// (one load of a line nobody writes unless there is damage).
const CTRL_REPAIR: usize = 256;
/// Rewrites of one record a consumer asks for before it gives up and reports the damage
/// (damage that survives this many fresh copies is not transient).
const REPAIR_LIMIT: u32 = 16;
/// The owner's run state, written only by the owner, read by peers deciding whether to
/// yield (see [`Path::peer_sends_soon`]): the world rank + 1 it waits for in a blocking
/// receive (0: none), and 1 while it yields its CPU.
const CTRL_AWAITING: usize = 320;
const CTRL_OFF_CPU: usize = 324;
/// First word of a record's private copy: the payload is in the copy, or only its address
/// (the caller of [`Path::send_held`] keeps the payload until the message is confirmed).
const SHADOW_COPY: u32 = 0;
const SHADOW_REF: u32 = 1;
/// Value of a ring's repair word when the producer cannot rewrite the record (it holds no
/// copy of it: a restarted producer, or a position it never wrote).
const REPAIR_REFUSED: u64 = u64::MAX;

const MEMBARRIER_CMD_QUERY: libc::c_int = 0;
const MEMBARRIER_CMD_GLOBAL_EXPEDITED: libc::c_int = 1 << 1;
const MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED: libc::c_int = 1 << 2;

/// This process registered for global expedited barriers (set by [`ShmPath::create`]): a
/// [`ShmWaker`] of a rank that registered too may then ring without a fence of its own.
static FENCES_REGISTERED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Register this process for global expedited barriers; false where the kernel lacks them.
fn register_asymmetric_fences() -> bool {
    // SAFETY: membarrier takes plain integer arguments and touches no memory of ours.
    let supported = unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0) };
    if supported < 0 || supported & libc::c_long::from(MEMBARRIER_CMD_GLOBAL_EXPEDITED) == 0 {
        return false;
    }
    // SAFETY: as above.
    unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0) == 0 }
}

/// The sleeping side's heavy fence: every registered thread on the host executes a full
/// memory barrier before this returns (see the module documentation).
fn heavy_fence() {
    // SAFETY: as above.
    let r = unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0) };
    if r != 0 {
        // Registered but refused now: should not happen; a plain fence keeps this side right
        // and a wake-up lost to the other side's missing fence costs one sleep timeout.
        fence(Ordering::SeqCst);
    }
}

/// Default ring size per sender/receiver pair for a job of `nranks` ranks on one host.
///
/// Large messages stream through the ring in chunks of a quarter of it (at most 256 KiB),
/// and deeper rings with bigger chunks copy faster (on this 2-CPU machine 1 MiB ping-pong
/// went from ~12 to ~19 GB/s from 512 KiB to 2 MiB rings); the segments are sparse files,
/// so only rings that carry traffic take memory. 128 MiB / n² per pair keeps the whole job's
/// worst case at 128 MiB up to 8 ranks and bounded for more.
pub fn default_ring_size(nranks: u32) -> usize {
    let n = nranks.max(1) as usize;
    let per = (128usize << 20) / (n * n);
    per.clamp(128 << 10, 2 << 20).next_power_of_two()
}

/// Largest power-of-two ring size whose rings for every pair of `nranks` ranks fill at most
/// half the free space of the file system holding `jobdir`: the segments are sparse, but a
/// job that streams between all pairs touches every ring, and a small `/dev/shm` (a
/// container's default 64 MiB) must not run out (SIGBUS on a write). Not below
/// [`RING_MIN`]; it was 64 KiB, whose rings for 8 ranks did not fit a 2 MiB `/dev/shm` (nor
/// those of 23 ranks a container's 64 MiB), and a large all-to-all killed a rank with SIGBUS.
pub fn ring_size_fitting(jobdir: &FsPath, nranks: u32) -> usize {
    let Some(free) = free_bytes_at(jobdir) else { return usize::MAX };
    let free = u128::from(free);
    let n = u128::from(nranks.max(1));
    let per = (free / 2 / (n * n)).min(usize::MAX as u128) as usize;
    let mut size = RING_MIN;
    while size * 2 <= per {
        size *= 2;
    }
    if size > per {
        tracing::warn!(
            "shared memory: {} free in {}, less than {} rings of {} bytes need; a job streaming between every pair of ranks may run out",
            free,
            jobdir.display(),
            n * n,
            RING_MIN
        );
    }
    size
}

/// Bytes free to unprivileged users on the file system holding `dir` (None if unknown).
pub fn free_bytes_at(dir: &FsPath) -> Option<u64> {
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).ok()?;
    // SAFETY: statvfs writes into the zeroed struct; `c` is a valid C string.
    let mut v: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut v) } != 0 {
        return None;
    }
    Some(u64::from(v.f_bavail).saturating_mul(v.f_frsize))
}

/// Back `len` bytes at `offset` of the file `f` with memory now (fallocate), so that a full
/// file system is an error here rather than a SIGBUS at the first store into the mapping.
pub fn back(f: &std::fs::File, offset: usize, len: usize) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let (Ok(off), Ok(n)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len)) else {
        return Err(std::io::Error::other("range beyond the file offsets"));
    };
    loop {
        // SAFETY: fallocate on a descriptor this process owns; mode 0 only allocates.
        if unsafe { libc::fallocate(f.as_raw_fd(), 0, off, n) } == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Bytes the job directory `dir` has promised but not yet backed: for each of its files
/// whose name does not start with `except`, its size less what it occupies. The rings'
/// segments and the slot collectives' are sparse files whose pages are taken only when first
/// written, so free space alone does not tell what is left: several communicators' slot
/// segments, each sized to a share of the same free space, together promised more than a
/// small `/dev/shm` held, and the store that found no page killed a rank with SIGBUS
/// (`tests/c/coll/many_segments.c`). Space for a new segment is what is free less this.
pub fn unbacked_bytes(dir: &FsPath, except: &str) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    let mut total = 0u64;
    for e in entries.flatten() {
        if e.file_name().as_encoded_bytes().starts_with(except.as_bytes()) && !except.is_empty() {
            continue;
        }
        // A file removed meanwhile is simply not counted.
        let Ok(m) = e.metadata() else { continue };
        if m.is_file() {
            total = total.saturating_add(m.size().saturating_sub(m.blocks().saturating_mul(512)));
        }
    }
    total
}

/// Space on the file system of job directory `dir` for a new sparse segment: what is free
/// less what the directory's files (other than those named `except*`) already promised
/// ([`unbacked_bytes`]). None if the file system does not say.
pub fn unpromised_bytes(dir: &FsPath, except: &str) -> Option<u64> {
    free_bytes_at(dir).map(|free| free.saturating_sub(unbacked_bytes(dir, except)))
}

/// The smallest ring [`ring_size_fitting`] picks: a quarter of it (less the record's
/// header) is the largest record, so the eager limit becomes about 1 KiB.
pub const RING_MIN: usize = 4 << 10;

/// A cache line.
const LINE: usize = 64;

/// Records start on pairs of cache lines. The consumer's hardware fetches the other line of
/// a 128-byte pair along with the one it reads; with records on single lines, a run of
/// one-line records (payloads up to 8 bytes) had the consumer pull in the line the producer
/// was writing next, which then went back and forth between the CPUs: two ranks streaming
/// 1-4 byte messages managed 12.2-12.8 million per second, 15.5-16.3 million on pairs.
const GRANULE: usize = 2 * LINE;

/// How far ahead of its last record a producer zeroes the rings' length words.
const ZERO_AHEAD: usize = 1024;

fn align_granule(n: usize) -> usize {
    (n + GRANULE - 1) & !(GRANULE - 1)
}

/// The record-length word at byte `at` of a ring's data area.
///
/// # Safety
/// `at` must be a line-aligned offset inside the data area.
unsafe fn len_word<'a>(data: *mut u8, at: usize) -> &'a AtomicU32 {
    &*(data.add(at) as *const AtomicU32)
}

/// A mapped segment (ours or a peer's).
struct Segment {
    map: MmapMut,
    ring_size: usize,
    nranks: u32,
}

impl Segment {
    fn base(&self) -> *mut u8 {
        self.map.as_ptr() as *mut u8
    }
    fn atomic_u32(&self, off: usize) -> &AtomicU32 {
        // SAFETY: offsets are fixed, 4-byte aligned and inside the control page.
        unsafe { &*(self.base().add(off) as *const AtomicU32) }
    }
    fn doorbell(&self) -> &AtomicU32 {
        self.atomic_u32(CTRL_DOORBELL)
    }
    fn waiting(&self) -> &AtomicU32 {
        self.atomic_u32(CTRL_WAITING)
    }
    fn asym(&self) -> bool {
        self.atomic_u32(CTRL_ASYM).load(Ordering::Relaxed) == 1
    }
    fn pid(&self) -> u32 {
        self.atomic_u32(CTRL_PID).load(Ordering::Relaxed)
    }
    fn repair_flag(&self) -> &AtomicU32 {
        self.atomic_u32(CTRL_REPAIR)
    }
    fn ring(&self, sender: u32) -> Ring {
        let off = CTRL_LEN + sender as usize * (RING_META + self.ring_size);
        // SAFETY: `sender < nranks` is checked by callers; the segment was sized for nranks rings.
        Ring { base: unsafe { self.base().add(off) }, size: self.ring_size }
    }
    fn open(path: &FsPath) -> Result<Segment, PathError> {
        Segment::open_backing(path, None)
    }

    /// [`Segment::open`], first backing the ring of sender `ring` with memory if given: the
    /// file is sparse, and with the file system full a store into the ring would be a
    /// SIGBUS; here it is an error of the first send instead.
    fn open_backing(path: &FsPath, ring: Option<u32>) -> Result<Segment, PathError> {
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| PathError::Shm(format!("open {}: {e}", path.display())))?;
        // SAFETY: the file is a job-private shared segment; concurrent access goes through atomics.
        let map = unsafe { MmapMut::map_mut(&f) }
            .map_err(|e| PathError::Shm(format!("map {}: {e}", path.display())))?;
        if map.len() < CTRL_LEN {
            return Err(PathError::Shm(format!("{} is too short", path.display())));
        }
        let rd = |o: usize| u64::from_ne_bytes(map[o..o + 8].try_into().unwrap_or([0; 8]));
        let magic = rd(CTRL_MAGIC);
        if magic != MAGIC {
            return Err(PathError::Shm(format!("{} is not a steadfast segment", path.display())));
        }
        let nranks = u32::from_ne_bytes(map[CTRL_NRANKS..CTRL_NRANKS + 4].try_into().unwrap_or([0; 4]));
        let ring_size = rd(CTRL_RING) as usize;
        let need = CTRL_LEN + nranks as usize * (RING_META + ring_size);
        if map.len() < need || !ring_size.is_power_of_two() {
            return Err(PathError::Shm(format!("{} has an inconsistent layout", path.display())));
        }
        if let Some(sender) = ring.filter(|&r| r < nranks) {
            let off = CTRL_LEN + sender as usize * (RING_META + ring_size);
            back(&f, off, RING_META + ring_size).map_err(|e| {
                PathError::Shm(format!("backing the {ring_size}-byte ring of rank {sender} in {}: {e} (shared memory full?)", path.display()))
            })?;
        }
        Ok(Segment { map, ring_size, nranks })
    }
}

/// View of one ring inside a mapped segment.
#[derive(Clone, Copy)]
struct Ring {
    base: *mut u8,
    size: usize,
}

impl Ring {
    fn head(&self) -> &AtomicU64 {
        // SAFETY: fixed aligned offsets inside the ring's metadata block.
        unsafe { &*(self.base.add(OFF_HEAD) as *const AtomicU64) }
    }
    fn tail(&self) -> &AtomicU64 {
        // SAFETY: as above.
        unsafe { &*(self.base.add(OFF_TAIL) as *const AtomicU64) }
    }
    fn blocked(&self) -> &AtomicU32 {
        // SAFETY: as above.
        unsafe { &*(self.base.add(OFF_BLOCKED) as *const AtomicU32) }
    }
    fn repair(&self) -> &AtomicU64 {
        // SAFETY: as above (8-byte aligned).
        unsafe { &*(self.base.add(OFF_REPAIR) as *const AtomicU64) }
    }
    fn data(&self) -> *mut u8 {
        // SAFETY: data follows the metadata block.
        unsafe { self.base.add(RING_META) }
    }
}

/// Producer-side state for one outbound ring.
struct Outbound {
    seg: Segment,
    ring: Ring,
    /// Both ranks use asymmetric fences: the receiver's sleep fences for us.
    fence_free: bool,
    tail: u64,
    cached_head: u64,
    /// Every line of positions `tail..zeroed_to` (byte counters, like `tail`) has a zero
    /// length word (see `send_with`).
    zeroed_to: u64,
    /// Private copy of every record at its ring offset, kept until the consumer moved
    /// `head` past it (it does only after the record passed its check), so a damaged
    /// record can be rewritten. Empty while checksums are off (nothing is verified).
    shadow: Vec<u8>,
    /// Ring offsets below this were written by this process before: their pages are
    /// mapped (a copy to pages touched the first time faults them in, far slower).
    written_to: usize,
}

/// Shared-memory path for the ranks of one host.
pub struct ShmPath {
    rank: u32,
    nranks: u32,
    jobdir: PathBuf,
    /// Shared hold on the job directory (see [`crate::jobdir`]); the last rank of a host
    /// without launcher removes the directory.
    dir_hold: Option<crate::jobdir::Hold>,
    me: Segment,
    heads: Vec<u64>,
    out: Vec<Option<Outbound>>,
    /// Peers' segments mapped for waking producers that blocked on a full ring.
    peer_ctrl: Vec<Option<Segment>>,
    blocked_on: Vec<u32>,
    /// Ring `poll` looks at first.
    first_ring: u32,
    /// This process registered for asymmetric fences.
    asym: bool,
    /// Per sender: 0 not known yet, 1 its producer side fences, 2 asymmetric fences.
    producer_asym: Vec<u8>,
    /// Per sender: rewrites asked for the record at `repair_at` (the position of the last
    /// damaged record; kept this way so that good records cost nothing here).
    repairs: Vec<u32>,
    repair_at: Vec<u64>,
    /// Per sender: a rewrite of the record at its ring's head was asked for and not done yet.
    awaiting: Vec<bool>,
    max_payload: usize,
    counters: PathCounters,
    checksum: Checksum,
    /// Boxed: taken out and put back around every send, which then moves a pointer.
    faults: Option<Box<Injector>>,
    /// Cached or streaming stores for large records ([`crate::stores`]).
    stores: StoreChoice,
}

// SAFETY: raw pointers point into mappings owned by the same struct.
unsafe impl Send for ShmPath {}
unsafe impl Send for Outbound {}

fn segment_path(jobdir: &FsPath, rank: u32) -> PathBuf {
    jobdir.join(format!("shm-{rank}"))
}

impl ShmPath {
    /// Keeps `hold` on the job directory until this path is dropped.
    pub fn set_dir_hold(&mut self, hold: Option<crate::jobdir::Hold>) {
        self.dir_hold = hold;
    }

    /// Create this rank's inbound segment. Peers' segments are mapped lazily on first use, so
    /// every rank must have created its segment before any rank sends (the caller fences).
    pub fn create(jobdir: &FsPath, rank: u32, nranks: u32, ring_size: usize) -> Result<ShmPath, PathError> {
        let ring_size = ring_size.next_power_of_two().max(4096);
        let len = CTRL_LEN + nranks as usize * (RING_META + ring_size);
        let path = segment_path(jobdir, rank);
        let tmp = jobdir.join(format!(".shm-{rank}.tmp"));
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .map_err(|e| PathError::Shm(format!("create {}: {e}", tmp.display())))?;
        f.set_len(len as u64).map_err(|e| PathError::Shm(format!("size {}: {e}", tmp.display())))?;
        // SAFETY: freshly created private file.
        let mut map = unsafe { MmapMut::map_mut(&f) }.map_err(|e| PathError::Shm(format!("map: {e}")))?;
        map[CTRL_PID..CTRL_PID + 4].copy_from_slice(&std::process::id().to_ne_bytes());
        map[CTRL_NRANKS..CTRL_NRANKS + 4].copy_from_slice(&nranks.to_ne_bytes());
        map[CTRL_RING..CTRL_RING + 8].copy_from_slice(&(ring_size as u64).to_ne_bytes());
        let asym = register_asymmetric_fences();
        FENCES_REGISTERED.store(asym, Ordering::Relaxed);
        map[CTRL_ASYM..CTRL_ASYM + 4].copy_from_slice(&u32::from(asym).to_ne_bytes());
        map[CTRL_MAGIC..CTRL_MAGIC + 8].copy_from_slice(&MAGIC.to_ne_bytes());
        // Publish under the final name only once fully initialised.
        std::fs::rename(&tmp, &path).map_err(|e| PathError::Shm(format!("publish {}: {e}", path.display())))?;
        let me = Segment { map, ring_size, nranks };
        let max_payload = (ring_size / 4).min(256 << 10) - HDR_LEN - REC_PREFIX;
        Ok(ShmPath {
            rank,
            nranks,
            jobdir: jobdir.to_path_buf(),
            dir_hold: None,
            me,
            heads: vec![0; nranks as usize],
            out: (0..nranks).map(|_| None).collect(),
            peer_ctrl: (0..nranks).map(|_| None).collect(),
            blocked_on: Vec::new(),
            first_ring: 0,
            asym,
            producer_asym: vec![0; nranks as usize],
            repairs: vec![0; nranks as usize],
            repair_at: vec![u64::MAX; nranks as usize],
            awaiting: vec![false; nranks as usize],
            max_payload,
            counters: PathCounters::default(),
            checksum: Checksum::Crc32c,
            faults: None,
            stores: StoreChoice::new(StoreSetting::Auto),
        })
    }

    /// End-to-end checksum of ring records (default CRC32C).
    pub fn set_checksum(&mut self, c: Checksum) {
        self.checksum = c;
    }

    /// How large records are written (default: chosen from the measured copy speed). Only
    /// checksummed records are ever streamed, by the fused copy's streaming variant.
    pub fn set_stores(&mut self, s: StoreSetting) {
        self.stores = StoreChoice::new(s);
    }

    /// Damage records as `inj` decides (`corrupt` at the sender after the checksum,
    /// `bus` at the receiver before the check).
    pub fn set_faults(&mut self, inj: Injector) {
        self.faults = Some(Box::new(inj));
    }

    /// Process id of a peer on this host (for single-copy reads), mapping its segment if needed.
    pub fn peer_pid(&mut self, peer: u32) -> Result<u32, PathError> {
        self.outbound(peer).map(|o| o.seg.pid())
    }

    #[inline]
    fn outbound(&mut self, peer: u32) -> Result<&mut Outbound, PathError> {
        match self.out.get_mut(peer as usize) {
            Some(Some(_)) => {}
            _ => return self.open_outbound(peer),
        }
        // Split so that the borrow checker sees the early return's borrow end.
        match self.out.get_mut(peer as usize) {
            Some(Some(o)) => Ok(o),
            _ => Err(PathError::Shm("unreachable".into())),
        }
    }

    /// The first send to `peer` maps its segment (kept out of line: every send passes the
    /// check above).
    #[inline(never)]
    fn open_outbound(&mut self, peer: u32) -> Result<&mut Outbound, PathError> {
        if peer >= self.nranks {
            return Err(PathError::Shm(format!("no such peer {peer}")));
        }
        let slot = &mut self.out[peer as usize];
        if slot.is_none() {
            let seg = Segment::open_backing(&segment_path(&self.jobdir, peer), Some(self.rank))?;
            if seg.nranks != self.nranks {
                return Err(PathError::Shm(format!("peer {peer} segment is for {} ranks", seg.nranks)));
            }
            let ring = seg.ring(self.rank);
            let tail = ring.tail().load(Ordering::Acquire);
            let cached_head = ring.head().load(Ordering::Acquire);
            let fence_free = self.asym && seg.asym();
            *slot = Some(Outbound { seg, ring, fence_free, tail, cached_head, zeroed_to: tail, shadow: Vec::new(), written_to: 0 });
        }
        slot.as_mut().ok_or_else(|| PathError::Shm("unreachable".into()))
    }

    /// Map `sender`'s segment (for its doorbell and its fence flag) if not done yet.
    fn peer_segment(&mut self, sender: u32) -> Option<&Segment> {
        if self.peer_ctrl[sender as usize].is_none() {
            match Segment::open(&segment_path(&self.jobdir, sender)) {
                Ok(s) => self.peer_ctrl[sender as usize] = Some(s),
                Err(e) => {
                    tracing::warn!("cannot map segment of rank {sender}: {e}");
                    return None;
                }
            }
        }
        self.peer_ctrl[sender as usize].as_ref()
    }

    /// Whether the consumer side of `sender`'s ring may skip its fence (both asymmetric).
    fn consumer_fence_free(&mut self, sender: u32) -> bool {
        if !self.asym {
            return false;
        }
        if self.producer_asym[sender as usize] == 0 {
            let a = self.peer_segment(sender).is_some_and(|seg| seg.asym());
            self.producer_asym[sender as usize] = if a { 2 } else { 1 };
        }
        self.producer_asym[sender as usize] == 2
    }

    fn wake_producer(&mut self, sender: u32, fence_free: bool) {
        if let Some(seg) = self.peer_segment(sender) {
            ring_doorbell(seg, !fence_free);
        }
    }

    /// `peer` created its segment anew: map the new one on next use. Its ring into our
    /// segment goes on where the earlier incarnation stopped (the producer's position is
    /// in the ring's metadata), so nothing here changes for it.
    fn forget_peer(&mut self, peer: u32) {
        if let Some(slot) = self.out.get_mut(peer as usize) {
            *slot = None;
        }
        if let Some(slot) = self.peer_ctrl.get_mut(peer as usize) {
            *slot = None;
        }
        if let Some(a) = self.producer_asym.get_mut(peer as usize) {
            *a = 0;
        }
        if let Some(r) = self.repairs.get_mut(peer as usize) {
            *r = 0;
        }
        if let Some(r) = self.repair_at.get_mut(peer as usize) {
            *r = u64::MAX;
        }
        if let Some(a) = self.awaiting.get_mut(peer as usize) {
            *a = false;
        }
        self.blocked_on.retain(|p| *p != peer);
    }

    /// Rewrites, from the private copies, the records consumers found damaged in our
    /// outbound rings (a consumer moves `head` past a record only once it passed its check,
    /// so the copy at that offset is still the record's).
    #[cold]
    #[inline(never)]
    fn serve_repairs(&mut self) {
        // Taken before the rings are looked at: a request made meanwhile sets it again.
        self.me.repair_flag().swap(0, Ordering::SeqCst);
        for o in self.out.iter_mut().flatten() {
            let want = o.ring.repair().load(Ordering::Acquire);
            if want == 0 || want == REPAIR_REFUSED {
                continue;
            }
            let pos = want - 1;
            let size = o.ring.size;
            let head = o.ring.head().load(Ordering::Acquire);
            let at = (pos & (size as u64 - 1)) as usize;
            let held = o.shadow.len() == size && pos >= head && pos < o.tail && at.is_multiple_of(GRANULE);
            // SAFETY (reads of the copy): `at` is line-aligned inside the shadow, which has
            // the ring's size; the record's extent is checked against it before the copy.
            let plen = if held {
                let word = unsafe { (o.shadow.as_ptr().add(at + 4) as *const u32).read() };
                word & !REC_NO_CRC
            } else {
                0
            };
            let n = REC_PREFIX + HDR_LEN + plen as usize;
            if !held || at + n > size {
                o.ring.repair().store(REPAIR_REFUSED, Ordering::Release);
            } else {
                // SAFETY: the record at `at` is not released (head has not passed it) and the
                // consumer does not read it while its repair word names it; the length word
                // stays as published, the rest is rewritten.
                unsafe {
                    let sh = o.shadow.as_ptr().add(at);
                    if (sh as *const u32).read() == SHADOW_REF {
                        // The payload is the caller's, valid until the peer confirms the
                        // message, which it has not: this record never passed its check.
                        let head = REC_PREFIX + HDR_LEN;
                        std::ptr::copy_nonoverlapping(sh.add(4), o.ring.data().add(at + 4), head - 4);
                        let src = (sh.add(head) as *const u64).read_unaligned() as usize as *const u8;
                        std::ptr::copy_nonoverlapping(src, o.ring.data().add(at + head), n - head);
                    } else {
                        std::ptr::copy_nonoverlapping(sh.add(4), o.ring.data().add(at + 4), n - 4);
                    }
                    // The copy crosses the same "wire" as the first one did.
                    if let Some(inj) = self.faults.as_mut() {
                        inj.corrupt_outgoing(std::slice::from_raw_parts_mut(o.ring.data().add(at + REC_PREFIX), n - REC_PREFIX));
                    }
                }
                o.ring.repair().store(0, Ordering::Release);
                self.counters.retransmits += 1;
            }
            ring_doorbell(&o.seg, true);
        }
    }

    /// Asks the producer of ring `s` to rewrite the damaged record at `head` from its copy.
    #[cold]
    #[inline(never)]
    fn request_repair(&mut self, s: u32, head: u64) {
        if self.repair_at[s as usize] != head {
            self.repair_at[s as usize] = head;
            self.repairs[s as usize] = 0;
        }
        self.repairs[s as usize] += 1;
        self.awaiting[s as usize] = true;
        self.me.ring(s).repair().store(head + 1, Ordering::Release);
        if let Some(seg) = self.peer_segment(s) {
            seg.repair_flag().store(1, Ordering::SeqCst);
            ring_doorbell(seg, true);
        }
    }

    /// Whether the producer of ring `s` answered our repair request: Ok(true) once it
    /// rewrote the record (read it again), an error if it holds no copy of it.
    #[cold]
    #[inline(never)]
    fn repair_done(&mut self, s: u32) -> Result<bool, PathError> {
        let ring = self.me.ring(s);
        let head = self.heads[s as usize];
        match ring.repair().load(Ordering::Acquire) {
            w if w == head + 1 => Ok(false),
            REPAIR_REFUSED => {
                // The producer holds no copy: report the damage as before repair existed.
                self.awaiting[s as usize] = false;
                ring.repair().store(0, Ordering::Relaxed);
                let at = (head & (ring.size as u64 - 1)) as usize;
                // SAFETY: head is a line-aligned record start that was checked when read.
                let len = unsafe { len_word(ring.data(), at) }.load(Ordering::Acquire) as u64;
                self.counters.frames_dropped += 1;
                let head = head + len.max(GRANULE as u64);
                ring.head().store(head, Ordering::Release);
                self.heads[s as usize] = head;
                Err(PathError::Corrupt { peer: s, path: "shm", what: "damaged record, and the sender holds no copy to resend".into() })
            }
            _ => {
                self.awaiting[s as usize] = false;
                Ok(true)
            }
        }
    }

    fn inbound_pending(&self) -> bool {
        if self.me.repair_flag().load(Ordering::SeqCst) != 0 {
            return true; // a consumer waits for us to rewrite a record
        }
        (0..self.nranks).any(|s| {
            let r = self.me.ring(s);
            if self.awaiting[s as usize] {
                return r.repair().load(Ordering::SeqCst) != self.heads[s as usize] + 1;
            }
            let at = (self.heads[s as usize] & (r.size as u64 - 1)) as usize;
            // SAFETY: head is always a line-aligned record start inside the ring.
            unsafe { len_word(r.data(), at) }.load(Ordering::SeqCst) != 0
        })
    }

    fn outbound_space_freed(&self) -> bool {
        self.blocked_on.iter().any(|&p| match &self.out[p as usize] {
            Some(o) => o.ring.head().load(Ordering::SeqCst) != o.cached_head,
            None => true,
        })
    }
}

/// After publishing (a record, or freed space): wake the segment's owner if it sleeps.
/// `with_fence` unless the owner's sleep issues the heavy fence for us.
fn ring_doorbell(seg: &Segment, with_fence: bool) {
    if with_fence {
        fence(Ordering::SeqCst);
    }
    if seg.waiting().load(Ordering::SeqCst) != 0 {
        seg.doorbell().fetch_add(1, Ordering::SeqCst);
        futex_wake(seg.doorbell());
    }
}

fn futex_wake(word: &AtomicU32) {
    // SAFETY: futex on a word in a shared mapping (not FUTEX_PRIVATE: other processes wait on it).
    unsafe {
        libc::syscall(libc::SYS_futex, word as *const AtomicU32, libc::FUTEX_WAKE, i32::MAX, 0usize, 0usize, 0u32);
    }
}

fn futex_wait(word: &AtomicU32, expected: u32, timeout: Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: as above; a spurious or early return is harmless, callers re-check state.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word as *const AtomicU32,
            libc::FUTEX_WAIT,
            expected,
            &ts as *const libc::timespec,
            0usize,
            0u32,
        );
    }
}

impl ShmPath {
    /// [`ShmPath::send_with`] with this path's fault injector, taken out for the call.
    #[inline]
    fn send_faulted(&mut self, peer: u32, hdr: &RawHeader, payload: &[u8], held: bool) -> Result<SendStatus, PathError> {
        if self.faults.is_none() {
            // No injector (every run but a fault test): nothing to take out and put back.
            return self.send_with(peer, hdr, payload, &mut None, held);
        }
        let mut faults = self.faults.take();
        let r = self.send_with(peer, hdr, payload, &mut faults, held);
        self.faults = faults;
        r
    }

    /// With `held`, the caller keeps `payload` valid and unchanged until the peer confirmed
    /// the message ([`Path::send_held`]): a large payload is then kept by reference.
    fn send_with(
        &mut self,
        peer: u32,
        hdr: &RawHeader,
        payload: &[u8],
        faults: &mut Option<Box<Injector>>,
        held: bool,
    ) -> Result<SendStatus, PathError> {
        if payload.len() > self.max_payload {
            return Err(PathError::Shm(format!("payload {} exceeds packet limit {}", payload.len(), self.max_payload)));
        }
        let checksum = self.checksum.enabled();
        // Only checksummed records of MIN_BYTES or more are timed, streamed and reported:
        // small messages skip the store choice altogether.
        let large = checksum && payload.len() >= crate::stores::MIN_BYTES;
        let stream = large && self.stores.stream(payload.len());
        let may_time = large && self.stores.timed(payload.len());
        let mut copy_nanos = None;
        let timed;
        let o = self.outbound(peer)?;
        let size = o.ring.size as u64;
        let rec = align_granule(REC_PREFIX + HDR_LEN + payload.len()) as u64;
        // Ring sizes are powers of two (checked when a segment is opened): mask, not divide.
        let pos = o.tail & (size - 1);
        let to_end = size - pos;
        // A small record that would cross a multiple of the hot window (with the line after
        // it, zeroed below) goes back to the start of the ring, behind a skip record, if the
        // consumer has read everything: then the whole ring is free behind it. A consumer
        // that lags never loses ring space to a skip; the head is loaded once per window.
        let hot = HOT_WINDOW as u64;
        let skip = to_end < rec
            || (rec <= HOT_RECORD_MAX as u64 && size > hot && (pos & (hot - 1)) + rec + LINE as u64 > hot && {
                o.cached_head = o.ring.head().load(Ordering::Acquire);
                o.cached_head == o.tail
            });
        let used = if skip { to_end + rec } else { rec };
        // One more line: the length word after the record is zeroed before it is published.
        let need = used + LINE as u64;
        if size - (o.tail - o.cached_head) < need {
            o.cached_head = o.ring.head().load(Ordering::Acquire);
            if size - (o.tail - o.cached_head) < need {
                // Full: `wait` asks the consumer to wake us if we end up sleeping.
                if !self.blocked_on.contains(&peer) {
                    self.blocked_on.push(peer);
                }
                return Ok(SendStatus::Full);
            }
        }
        let data = o.ring.data();
        // SAFETY: [tail, tail+need) is free space owned by the producer until `tail` is published.
        unsafe {
            let at = if skip { 0 } else { pos as usize };
            // The next record's length word must read 0 until that record is published.
            // After small records, a run of lines ahead is zeroed at a time (as far as they
            // are free): zeroing the one next line with every record wrote to the line the
            // consumer polls next, which then crossed between the CPUs twice per message
            // instead of once. A large record's successor starts beyond such a run anyway.
            let end = o.tail + used;
            if end >= o.zeroed_to {
                let free_to = o.cached_head + size;
                let ahead = if rec as usize <= ZERO_AHEAD / 4 { ZERO_AHEAD } else { LINE } as u64;
                // Not past the hot window's end, whose lines small records do not reach.
                let window_end = (end & !(hot - 1)) + hot;
                let to = (end + ahead).min(free_to).min(window_end.max(end + LINE as u64));
                // Records only start on granules, whose first words are what must be 0.
                // The second line of each is written too while records fill it (the
                // producer takes those lines over in one run, ahead of time), not after
                // one-line records: the consumer's pull of that line would then cost a
                // transfer back each time round the window (1-4 byte ping-pong 0.194 µs
                // against 0.186).
                let stride = if REC_PREFIX + HDR_LEN + payload.len() > LINE { LINE } else { GRANULE } as u64;
                let mut z = end;
                while z < to {
                    len_word(data, (z & (size - 1)) as usize).store(0, Ordering::Relaxed);
                    z += stride;
                }
                o.zeroed_to = to;
            }
            let p = data.add(at);
            let plen = payload.len() as u32;
            // Not where pages are touched the first time: faulting them in would be timed.
            timed = may_time && at + rec as usize <= o.written_to;
            o.written_to = o.written_to.max(at + rec as usize);
            (p.add(4) as *mut u32).write(if checksum { plen } else { plen | REC_NO_CRC });
            let body = std::slice::from_raw_parts_mut(p.add(REC_PREFIX), HDR_LEN + payload.len());
            let mut sums = (0, 0);
            if checksum {
                let t0 = timed.then(Instant::now);
                let (hcrc, crc) = if stream {
                    steadfast_reliable::crc::copy_record_with_crc32c_streaming(plen, body, hdr, payload)
                } else {
                    steadfast_reliable::crc::copy_record_with_crc32c(plen, body, hdr, payload)
                };
                copy_nanos = t0.map(|t| t.elapsed().as_nanos() as u64);
                (p.add(8) as *mut u32).write(crc);
                (p.add(12) as *mut u32).write(hcrc);
                sums = (crc, hcrc);
            } else {
                body[..HDR_LEN].copy_from_slice(hdr);
                body[HDR_LEN..].copy_from_slice(payload);
                (p.add(8) as *mut u32).write(0);
                (p.add(12) as *mut u32).write(0);
            }
            if let Some(inj) = faults.as_mut() {
                let body = std::slice::from_raw_parts_mut(p.add(REC_PREFIX), HDR_LEN + payload.len());
                inj.corrupt_outgoing(body);
            }
            len_word(data, at).store(rec as u32, Ordering::Release);
            if skip {
                // Published after the record at 0, which the consumer reaches through it.
                let q = data.add(pos as usize);
                (q.add(4) as *mut u32).write(SKIP);
                len_word(data, pos as usize).store(to_end as u32, Ordering::Release);
            }
            if checksum {
                // After publishing: off the consumer's critical path. Only this thread reads
                // the copy, when it serves a repair request in a later poll.
                let (crc, hcrc) = sums;
                // What a damaged record is rewritten from (see `serve_repairs`): a copy, or
                // for a large payload the caller keeps, its address. Built from the sources:
                // the ring may already be the consumer's, and may be damaged.
                if o.shadow.len() != size as usize {
                    o.shadow = vec![0; size as usize];
                }
                let sh = o.shadow.as_mut_ptr().add(at);
                let by_ref = held && payload.len() >= SHADOW_REF_MIN;
                (sh as *mut u32).write(if by_ref { SHADOW_REF } else { SHADOW_COPY });
                (sh.add(4) as *mut u32).write(plen);
                (sh.add(8) as *mut u32).write(crc);
                (sh.add(12) as *mut u32).write(hcrc);
                std::ptr::copy_nonoverlapping(hdr.as_ptr(), sh.add(REC_PREFIX), HDR_LEN);
                if by_ref {
                    (sh.add(REC_PREFIX + HDR_LEN) as *mut u64).write_unaligned(payload.as_ptr() as u64);
                } else {
                    std::ptr::copy_nonoverlapping(payload.as_ptr(), sh.add(REC_PREFIX + HDR_LEN), payload.len());
                }
            }
        }
        o.tail += used;
        o.ring.tail().store(o.tail, Ordering::Release);
        ring_doorbell(&o.seg, !o.fence_free);
        if large {
            self.stores.copied(payload.len(), stream, copy_nanos);
        }
        self.counters.packets_sent += 1;
        self.counters.bytes_sent += payload.len() as u64;
        Ok(SendStatus::Done)
    }

}

impl Path for ShmPath {
    fn send(&mut self, peer: u32, hdr: &RawHeader, payload: &[u8]) -> Result<SendStatus, PathError> {
        self.send_faulted(peer, hdr, payload, false)
    }

    unsafe fn send_held(&mut self, peer: u32, hdr: &RawHeader, payload: &[u8]) -> Result<SendStatus, PathError> {
        self.send_faulted(peer, hdr, payload, true)
    }

    fn holds_references(&self, _peer: u32) -> bool {
        self.checksum.enabled()
    }

    fn set_awaiting(&self, peer: Option<u32>) {
        self.me.atomic_u32(CTRL_AWAITING).store(peer.map_or(0, |p| p + 1), Ordering::Relaxed);
    }

    fn set_off_cpu(&self, off: bool) {
        self.me.atomic_u32(CTRL_OFF_CPU).store(u32::from(off), Ordering::Relaxed);
    }

    fn peer_sends_soon(&mut self, peer: u32) -> bool {
        if peer >= self.nranks || peer == self.rank {
            return false;
        }
        let me = self.rank + 1;
        let seg = match self.out[peer as usize].as_ref() {
            Some(o) => &o.seg,
            None => match self.peer_segment(peer) {
                Some(s) => s,
                None => return false,
            },
        };
        let off = seg.atomic_u32(CTRL_OFF_CPU).load(Ordering::Relaxed) != 0 || seg.waiting().load(Ordering::Relaxed) != 0;
        let waits = seg.atomic_u32(CTRL_AWAITING).load(Ordering::Relaxed);
        !off && (waits == 0 || waits == me)
    }

    fn room(&self, peer: u32) -> usize {
        let Some(Some(o)) = self.out.get(peer as usize) else { return 0 };
        let free = o.ring.size as u64 - (o.tail - o.ring.head().load(Ordering::Acquire));
        // A record that does not fit before the ring's end skips to its start: half of what
        // is free always takes one, less its prefix, header and the line zeroed after it.
        (free / 2).saturating_sub((REC_PREFIX + HDR_LEN + 2 * LINE) as u64) as usize
    }

    fn poll(&mut self, sink: &mut dyn PacketSink) -> Result<usize, PathError> {
        if self.me.repair_flag().load(Ordering::Relaxed) != 0 {
            self.serve_repairs(); // cold
        }
        let mut n = 0;
        let mut stop = false;
        // Start after the ring that ended the last poll early, so no sender is starved.
        let mut next = self.first_ring;
        for _ in 0..self.nranks {
            if stop {
                break;
            }
            let s = next;
            next = if next + 1 == self.nranks { 0 } else { next + 1 };
            let ring = self.me.ring(s);
            let mut head = self.heads[s as usize];
            let size = ring.size as u64;
            let data = ring.data();
            let start = head;
            // At most one ring's worth of records per ring and poll: a peer that left a
            // ring of records wrapping onto itself (never a correct producer: the word after
            // its last record is always 0) cannot keep this call from returning.
            let mut records = ring.size / GRANULE;
            loop {
                if records == 0 {
                    break;
                }
                records -= 1;
                let at = (head & (size - 1)) as usize;
                // SAFETY: head is a line-aligned record start inside the data area.
                let len = unsafe { len_word(data, at) }.load(Ordering::Acquire) as usize;
                if len == 0 {
                    break;
                }
                if self.awaiting[s as usize] && !self.repair_done(s)? {
                    break; // not rewritten yet: nothing after the damaged record is read
                }
                // SAFETY: the producer published the record (release store of its length).
                let kind = unsafe { (data.add(at + 4) as *const u32).read() };
                if len < GRANULE || !len.is_multiple_of(GRANULE) || at + len > ring.size {
                    // A peer that writes garbage into our segment is broken; stop reading it.
                    self.counters.frames_dropped += 1;
                    return Err(PathError::PeerLost(s, format!("corrupt ring record (len {len})")));
                }
                if kind != SKIP {
                    let unchecked = kind & REC_NO_CRC != 0;
                    let plen = (kind & !REC_NO_CRC) as usize;
                    if REC_PREFIX + HDR_LEN + plen > len {
                        // A damaged payload-length word, or a broken peer: the first is
                        // repaired like any damage, the second ends in the error below.
                        if self.checksum.enabled() && (self.repair_at[s as usize] != head || self.repairs[s as usize] < REPAIR_LIMIT) {
                            self.counters.corrupt_detected += 1;
                            self.request_repair(s, head);
                            break;
                        }
                        self.counters.frames_dropped += 1;
                        return Err(PathError::PeerLost(s, "short ring record".into()));
                    }
                    // SAFETY: bounds checked above; the record is ours until `head` moves.
                    let (hdr, payload, stored, stored_head) = unsafe {
                        let r = data.add(at);
                        if let Some(inj) = self.faults.as_mut() {
                            let body = std::slice::from_raw_parts_mut(r.add(REC_PREFIX), HDR_LEN + plen);
                            inj.bus_error(body, HDR_LEN);
                        }
                        let p = r.add(REC_PREFIX);
                        let hdr = &*(p as *const RawHeader);
                        let payload = std::slice::from_raw_parts(p.add(HDR_LEN), plen);
                        (hdr, payload, (r.add(8) as *const u32).read(), (r.add(12) as *const u32).read())
                    };
                    let mut what = None;
                    if !self.checksum.enabled() {
                        sink.packet(s, hdr, payload);
                    } else if unchecked {
                        what = Some("record without checksum (sender runs STEADFAST_CHECKSUM=none)".to_owned());
                    } else if plen >= FUSED_CHECK_MIN {
                        let head = steadfast_reliable::crc::record_crc32c(plen as u32, hdr, &[]);
                        if head != stored_head {
                            what = Some(format!("header CRC32C mismatch: record says {stored_head:08x}, data gives {head:08x}"));
                        } else if !sink.packet_unverified(s, hdr, payload, head, stored) {
                            what = Some(format!("payload CRC32C mismatch (record says {stored:08x})"));
                        }
                    } else {
                        let crc = steadfast_reliable::crc::record_crc32c(plen as u32, hdr, payload);
                        if crc == stored {
                            sink.packet(s, hdr, payload);
                        } else {
                            what = Some(format!("CRC32C mismatch: record says {stored:08x}, data gives {crc:08x}"));
                        }
                    }
                    if let Some(what) = what {
                        self.counters.corrupt_detected += 1;
                        if !unchecked && (self.repair_at[s as usize] != head || self.repairs[s as usize] < REPAIR_LIMIT) {
                            // The ring stays at the record: nothing after it is read before
                            // it is good.
                            self.request_repair(s, head);
                            break;
                        }
                        self.counters.frames_dropped += 1;
                        head += len as u64;
                        ring.head().store(head, Ordering::Release);
                        self.heads[s as usize] = head;
                        return Err(PathError::Corrupt { peer: s, path: "shm", what });
                    }
                    self.counters.packets_received += 1;
                    self.counters.bytes_received += payload.len() as u64;
                    n += 1;
                }
                head += len as u64;
                // Release each record as soon as it is consumed so a blocked producer can go on.
                ring.head().store(head, Ordering::Release);
                if !sink.wants_more() {
                    stop = true;
                    self.first_ring = next;
                    break;
                }
            }
            if head == start {
                continue;
            }
            self.heads[s as usize] = head;
            // Dekker with a producer going to sleep on this full ring (see the module docs).
            let fence_free = self.consumer_fence_free(s);
            if !fence_free {
                fence(Ordering::SeqCst);
            }
            if ring.blocked().load(Ordering::SeqCst) != 0 {
                ring.blocked().store(0, Ordering::SeqCst);
                self.wake_producer(s, fence_free);
            }
        }
        if !self.blocked_on.is_empty() {
            let out = &self.out;
            self.blocked_on.retain(|&p| match &out[p as usize] {
                Some(o) => o.ring.head().load(Ordering::Relaxed) == o.cached_head,
                None => false,
            });
        }
        Ok(n)
    }

    fn max_payload(&self) -> usize {
        self.max_payload
    }

    fn stream_piece(&self, _peer: u32, len: usize) -> usize {
        // Not `clamp`: a small ring's records hold less than the minimum piece.
        (len / STREAM_PIECES).max(STREAM_PIECE_MIN).min(self.max_payload)
    }

    fn wait(&mut self, timeout: Duration) -> Result<(), PathError> {
        self.wait_unless(timeout, &mut || false)
    }

    fn wait_unless(&mut self, timeout: Duration, ready: &mut dyn FnMut() -> bool) -> Result<(), PathError> {
        let bell = self.me.doorbell();
        let v = bell.load(Ordering::SeqCst);
        self.me.waiting().store(1, Ordering::SeqCst);
        // Ask the consumers of the rings we could not write to to wake us when they free space.
        for &p in &self.blocked_on {
            if let Some(o) = &self.out[p as usize] {
                o.ring.blocked().store(1, Ordering::SeqCst);
            }
        }
        if self.asym {
            heavy_fence();
        }
        if !self.inbound_pending() && !self.outbound_space_freed() && !ready() {
            futex_wait(self.me.doorbell(), v, timeout);
        }
        self.me.waiting().store(0, Ordering::SeqCst);
        Ok(())
    }

    fn peer_rejoined(&mut self, peer: u32, _ex: &mut dyn crate::setup::Exchange) -> Result<(), PathError> {
        self.forget_peer(peer);
        Ok(())
    }

    fn backlog(&self) -> usize {
        0
    }

    fn counters_by_path(&self) -> Vec<(&'static str, PathCounters)> {
        vec![("shm", self.counters())]
    }

    /// A peer may still find damage in a record we wrote and ask us to rewrite it while we
    /// block in the final fence: keep serving such requests.
    fn needs_linger(&self) -> bool {
        self.checksum.enabled()
    }

    fn counters(&self) -> PathCounters {
        let mut c = self.counters;
        c.records_streamed = self.stores.streamed;
        if let Some(inj) = &self.faults {
            c.injected_corrupt += inj.counts.injected_corrupt;
            c.injected_bus += inj.counts.injected_bus;
        }
        c
    }
}

/// Wake a rank sleeping in [`ShmPath::wait`] from another process or thread, after
/// publishing something it waits for.
pub struct ShmWaker {
    seg: Segment,
    /// This process and the sleeper both use asymmetric fences: the sleeper's heavy fence
    /// orders our publication before our look at its `waiting` word (as for a ring's
    /// producer, see the module documentation).
    fence_free: bool,
}

impl ShmWaker {
    /// Map `rank`'s segment for waking it.
    pub fn open(jobdir: &FsPath, rank: u32) -> Result<ShmWaker, PathError> {
        let seg = Segment::open(&segment_path(jobdir, rank))?;
        let fence_free = FENCES_REGISTERED.load(Ordering::Relaxed) && seg.asym();
        Ok(ShmWaker { seg, fence_free })
    }
    /// Ring the doorbell.
    pub fn wake(&self) {
        ring_doorbell(&self.seg, true);
    }
    /// Ring the doorbell after the caller's own sequentially consistent fence (one fence
    /// for waking several ranks).
    pub fn wake_fenced(&self) {
        ring_doorbell(&self.seg, false);
    }
    /// Whether [`ShmWaker::wake_fenced`] needs no fence before it at all: the sleeper's
    /// heavy fence stands in for it.
    pub fn fence_free(&self) -> bool {
        self.fence_free
    }
}

impl Drop for ShmPath {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(segment_path(&self.jobdir, self.rank));
        if let Some(h) = self.dir_hold.take() {
            h.release_and_remove_if_last();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    struct Collect(Vec<(u32, RawHeader, Vec<u8>)>);
    impl PacketSink for Collect {
        fn packet(&mut self, peer: u32, hdr: &RawHeader, payload: &[u8]) {
            self.0.push((peer, *hdr, payload.to_vec()));
        }
    }

    #[test]
    fn ring_keeps_order_and_bytes_across_wraps() {
        ring_round_trip("wraps", 8192, StoreSetting::Auto, 2000);
    }

    #[test]
    fn streamed_records_arrive_whole_and_in_order() {
        // 1 MiB ring: records of up to 256 KiB, most of them past the streaming threshold.
        ring_round_trip("streaming", 1 << 20, StoreSetting::Streaming, 200);
        ring_round_trip("cached", 1 << 20, StoreSetting::Cached, 200);
    }

    /// Sends `count` records of random lengths through a ring of `ring` bytes written as
    /// `stores` says, polling at random, and checks every one arrived unchanged, in order.
    fn ring_round_trip(name: &str, ring: usize, stores: StoreSetting, count: u32) {
        let dir = std::env::temp_dir().join(format!("sf-shm-test-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut a = ShmPath::create(&dir, 0, 2, ring).unwrap();
        let mut b = ShmPath::create(&dir, 1, 2, ring).unwrap();
        a.set_stores(stores);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let mut expect = std::collections::VecDeque::new();
        let mut got = Collect(Vec::new());
        let mut sent = 0u32;
        while sent < count {
            let len = rng.gen_range(0..a.max_payload());
            let payload: Vec<u8> = (0..len).map(|i| (i as u32 ^ sent) as u8).collect();
            let mut hdr = [0u8; HDR_LEN];
            hdr[..4].copy_from_slice(&sent.to_le_bytes());
            match a.send(1, &hdr, &payload).unwrap() {
                SendStatus::Done => {
                    expect.push_back((hdr, payload));
                    sent += 1;
                }
                SendStatus::Full => {
                    b.poll(&mut got).unwrap();
                }
            }
            if rng.gen_bool(0.1) {
                b.poll(&mut got).unwrap();
            }
        }
        b.poll(&mut got).unwrap();
        assert_all_from_rank_0(&got, &expect);
        let streamed = a.counters().records_streamed;
        match stores {
            StoreSetting::Streaming if steadfast_reliable::crc::streaming_available() => assert!(streamed > 50, "{streamed}"),
            StoreSetting::Cached => assert_eq!(streamed, 0),
            _ => {}
        }
        drop(a);
        drop(b);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A rank sees a peer as about to send to it only while the peer runs (no yield, no
    /// sleep announced) and waits for nothing or for this rank.
    #[test]
    fn a_peer_sends_soon_only_while_it_runs_and_waits_for_nothing_else() {
        let dir = std::env::temp_dir().join(format!("sf-shm-runs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let a = ShmPath::create(&dir, 0, 3, 64 << 10).unwrap();
        let mut b = ShmPath::create(&dir, 1, 3, 64 << 10).unwrap();
        let _c = ShmPath::create(&dir, 2, 3, 64 << 10).unwrap();
        // Running, in no receive: it may be about to send.
        assert!(b.peer_sends_soon(0));
        a.set_awaiting(Some(1));
        assert!(b.peer_sends_soon(0), "it waits for this rank, which sent already");
        a.set_awaiting(Some(2));
        assert!(!b.peer_sends_soon(0), "it waits for another rank first");
        a.set_awaiting(None);
        a.set_off_cpu(true);
        assert!(!b.peer_sends_soon(0), "it yields its CPU");
        a.set_off_cpu(false);
        a.me.waiting().store(1, Ordering::SeqCst);
        assert!(!b.peer_sends_soon(0), "it sleeps");
        a.me.waiting().store(0, Ordering::SeqCst);
        assert!(b.peer_sends_soon(0));
        // Never oneself, nor a rank outside the job.
        assert!(!b.peer_sends_soon(1));
        assert!(!b.peer_sends_soon(3));
        drop((a, b, _c));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Pieces fit a record on every ring size, also where a record holds less than the
    /// smallest piece (a 16 KiB ring's quarter).
    #[test]
    fn stream_pieces_fit_a_record_on_every_ring() {
        let dir = std::env::temp_dir().join(format!("sf-shm-piece-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for ring in [RING_MIN, 16 << 10, 64 << 10, 256 << 10, 2 << 20] {
            let a = ShmPath::create(&dir, 0, 2, ring).unwrap();
            for len in [1, STREAM_PIECE_MIN, 64 << 10, 1 << 20, 8 << 20] {
                let piece = a.stream_piece(1, len);
                assert!(piece >= 1 && piece <= a.max_payload(), "ring {ring}, message {len}: piece {piece}");
            }
        }
        std::fs::remove_dir_all(&dir).ok();
    }

    /// `room` is a promise: a record of at most that much payload is taken at once, wherever
    /// the ring's end falls; it shrinks as records go in and grows as the consumer reads.
    #[test]
    fn room_is_never_more_than_a_send_takes() {
        let dir = std::env::temp_dir().join(format!("sf-shm-room-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ring = 256 << 10;
        let mut a = ShmPath::create(&dir, 0, 2, ring).unwrap();
        let mut b = ShmPath::create(&dir, 1, 2, ring).unwrap();
        let hdr = [0u8; HDR_LEN];
        // Nothing is known of a ring not opened yet.
        assert_eq!(a.room(1), 0);
        a.send(1, &hdr, &[]).unwrap();
        let mut got = Collect(Vec::new());
        b.poll(&mut got).unwrap();
        let empty = a.room(1);
        assert!(empty >= ring / 2 - 256 && empty < ring / 2, "room of an empty ring: {empty}");
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        let (mut taken, mut polls) = (0, 0);
        while taken < 3000 {
            let room = a.room(1);
            // Small records too, so that large ones meet the ring's end anywhere.
            let len = if rng.gen_bool(0.5) { rng.gen_range(0..200) } else { rng.gen_range(0..=room.min(a.max_payload())) };
            if len > room {
                continue;
            }
            let payload = vec![taken as u8; len];
            assert!(matches!(a.send(1, &hdr, &payload).unwrap(), SendStatus::Done), "a record of {len} bytes refused with room {room}");
            taken += 1;
            assert!(a.room(1) <= room, "room grew by a send");
            if a.room(1) < 64 << 10 || rng.gen_bool(0.05) {
                let before = a.room(1);
                b.poll(&mut got).unwrap();
                polls += 1;
                assert!(a.room(1) >= before, "room shrank by a read");
            }
        }
        assert!(polls > 10, "the ring filled only {polls} times");
        drop(a);
        drop(b);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Every record `expect` lists arrived from rank 0, in order, byte for byte.
    fn assert_all_from_rank_0<'a>(got: &Collect, expect: impl IntoIterator<Item = &'a ([u8; HDR_LEN], Vec<u8>)>) {
        let expect: Vec<_> = expect.into_iter().collect();
        assert_eq!(got.0.len(), expect.len());
        for ((peer, h, p), (eh, ep)) in got.0.iter().zip(expect) {
            assert_eq!(*peer, 0);
            assert_eq!(h, eh);
            assert_eq!(p, ep);
        }
    }

    /// Small records stay in the hot window while the consumer keeps up, and go on past it
    /// (never reporting a full ring that has room) while it lags.
    #[test]
    fn small_records_stay_in_the_hot_window_unless_the_consumer_lags() {
        let dir = std::env::temp_dir().join(format!("sf-shm-hot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ring = 1 << 20;
        let mut a = ShmPath::create(&dir, 0, 2, ring).unwrap();
        let mut b = ShmPath::create(&dir, 1, 2, ring).unwrap();
        let mut got = Collect(Vec::new());
        let mut expect = Vec::new();
        // Ping-pong style: every record is consumed before the next one is sent. Ten
        // times the window's worth of bytes goes through.
        for i in 0..(10 * HOT_WINDOW / 512) as u32 {
            // Payloads up to the largest that stays in the window (4 KiB).
            let payload = vec![i as u8; 300 + (i as usize * 37) % 3797];
            let mut hdr = [0u8; HDR_LEN];
            hdr[..4].copy_from_slice(&i.to_le_bytes());
            assert!(matches!(a.send(1, &hdr, &payload).unwrap(), SendStatus::Done));
            expect.push((hdr, payload));
            b.poll(&mut got).unwrap();
        }
        let data = b.me.ring(0).data();
        // SAFETY: the ring's data area is `ring` bytes of our own mapping.
        let beyond = unsafe { std::slice::from_raw_parts(data.add(HOT_WINDOW), ring - HOT_WINDOW) };
        assert!(beyond.iter().all(|&x| x == 0), "a small record was written past the hot window");
        // A consumer that lags: records go on past the window until the ring is full.
        let mut sent = 0u32;
        loop {
            let payload = vec![0xA5u8; 1000];
            let mut hdr = [0u8; HDR_LEN];
            hdr[..4].copy_from_slice(&(1_000_000 + sent).to_le_bytes());
            match a.send(1, &hdr, &payload).unwrap() {
                SendStatus::Done => {
                    expect.push((hdr, payload));
                    sent += 1;
                }
                SendStatus::Full => break,
            }
        }
        assert!(sent as usize * 1088 > ring - HOT_WINDOW, "only {sent} records fit a {ring}-byte ring");
        while b.poll(&mut got).unwrap() > 0 {}
        assert_all_from_rank_0(&got, &expect);
        drop(a);
        drop(b);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Producer and consumer on two threads: the length word is the only publication flag,
    /// so this checks that no record is seen early, late, twice or torn across many wraps.
    #[test]
    fn concurrent_producer_and_consumer_agree() {
        let dir = std::env::temp_dir().join(format!("sf-shm-conc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut a = ShmPath::create(&dir, 0, 2, 8192).unwrap();
        let mut b = ShmPath::create(&dir, 1, 2, 8192).unwrap();
        const N: u32 = 20_000;
        let max = a.max_payload();
        let producer = std::thread::spawn(move || {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
            let mut i = 0u32;
            while i < N {
                let len = if rng.gen_bool(0.7) { rng.gen_range(0..16) } else { rng.gen_range(0..max) };
                let payload: Vec<u8> = (0..len).map(|k| (k as u32).wrapping_mul(31).wrapping_add(i) as u8).collect();
                let mut hdr = [0u8; HDR_LEN];
                hdr[..4].copy_from_slice(&i.to_le_bytes());
                hdr[4..8].copy_from_slice(&(len as u32).to_le_bytes());
                match a.send(1, &hdr, &payload).unwrap() {
                    SendStatus::Done => i += 1,
                    SendStatus::Full => std::thread::yield_now(),
                }
            }
            a
        });
        struct Check(u32);
        impl PacketSink for Check {
            fn packet(&mut self, peer: u32, hdr: &RawHeader, payload: &[u8]) {
                assert_eq!(peer, 0);
                let i = u32::from_le_bytes(hdr[..4].try_into().unwrap());
                let len = u32::from_le_bytes(hdr[4..8].try_into().unwrap()) as usize;
                assert_eq!(i, self.0, "record out of order");
                assert_eq!(payload.len(), len);
                for (k, &x) in payload.iter().enumerate() {
                    assert_eq!(x, (k as u32).wrapping_mul(31).wrapping_add(i) as u8, "record {i} byte {k}");
                }
                self.0 += 1;
            }
        }
        let mut got = Check(0);
        while got.0 < N {
            if b.poll(&mut got).unwrap() == 0 {
                std::hint::spin_loop();
            }
        }
        let a = producer.join().unwrap();
        assert_eq!(b.poll(&mut got).unwrap(), 0, "records after the last one");
        drop(a);
        drop(b);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn ring_sizes_are_powers_of_two_within_bounds() {
        for n in [1, 2, 3, 8, 16, 64, 1000] {
            let r = default_ring_size(n);
            assert!(r.is_power_of_two() && (128 << 10..=2 << 20).contains(&r), "{n}: {r}");
            let f = ring_size_fitting(&std::env::temp_dir(), n);
            assert!(f.is_power_of_two() && f >= RING_MIN, "{n}: {f}");
        }
        assert!(default_ring_size(2) >= default_ring_size(64));
    }

    /// A sparse file counts with its unwritten bytes; backed ranges and the excepted
    /// prefix do not.
    #[test]
    fn unbacked_bytes_count_unwritten_pages() {
        use std::os::unix::fs::FileExt;
        let dir = std::env::temp_dir().join(format!("sf-shm-unbacked-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let len = 1usize << 20;
        let f = std::fs::File::create(dir.join("slt-0-0")).unwrap();
        f.set_len(len as u64).unwrap();
        assert!(unbacked_bytes(&dir, "chb") >= len as u64 - 4096);
        f.write_all_at(&[1u8; 8192], 0).unwrap();
        back(&f, 256 << 10, 256 << 10).unwrap();
        let left = unbacked_bytes(&dir, "chb");
        assert!(left <= (len - (256 << 10) - 8192) as u64 && left >= (len / 4) as u64, "{left}");
        let g = std::fs::File::create(dir.join("chb-0-1")).unwrap();
        g.set_len(len as u64).unwrap();
        assert_eq!(unbacked_bytes(&dir, "chb"), left);
        assert!(unbacked_bytes(&dir, "") >= left + len as u64 - 4096);
        let free = free_bytes_at(&dir).unwrap();
        assert!(unpromised_bytes(&dir, "chb").unwrap() <= free);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Both sides sleep whenever they cannot go on (the producer on a full ring, the consumer
    /// on an empty one): a lost wake-up shows as a wait that runs into its 2 s timeout.
    #[test]
    fn sleepers_are_always_woken() {
        let dir = std::env::temp_dir().join(format!("sf-shm-sleep-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut a = ShmPath::create(&dir, 0, 2, 4096).unwrap();
        let mut b = ShmPath::create(&dir, 1, 2, 4096).unwrap();
        const N: u32 = 5_000;
        const LIMIT: Duration = Duration::from_secs(2);
        let producer = std::thread::spawn(move || {
            let mut slow = 0;
            let mut i = 0u32;
            while i < N {
                let mut hdr = [0u8; HDR_LEN];
                hdr[..4].copy_from_slice(&i.to_le_bytes());
                match a.send(1, &hdr, &[i as u8; 300]).unwrap() {
                    SendStatus::Done => i += 1,
                    SendStatus::Full => {
                        let t = std::time::Instant::now();
                        a.wait(LIMIT).unwrap();
                        if t.elapsed() >= LIMIT / 2 {
                            slow += 1;
                            break;
                        }
                    }
                }
            }
            (a, slow)
        });
        let mut got = Collect(Vec::new());
        let mut slow = 0;
        while got.0.len() < N as usize {
            if b.poll(&mut got).unwrap() == 0 {
                let t = std::time::Instant::now();
                b.wait(LIMIT).unwrap();
                if t.elapsed() >= LIMIT / 2 {
                    slow += 1;
                    break;
                }
            }
        }
        assert_eq!(slow, 0, "the consumer's wait ran into its timeout: a wake-up was lost");
        let (a, producer_slow) = producer.join().unwrap();
        assert_eq!(producer_slow, 0, "the producer's wait ran into its timeout: a wake-up was lost");
        for (i, (_, h, p)) in got.0.iter().enumerate() {
            assert_eq!(u32::from_le_bytes(h[..4].try_into().unwrap()), i as u32);
            assert_eq!(p[0], i as u8);
        }
        drop(a);
        drop(b);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Damage after the checksum (sender: `corrupt`, receiver: `bus`) is detected, never
    /// delivered, and repaired: the producer rewrites the record from its copy and the
    /// consumer delivers it, then what followed it, in order.
    #[test]
    fn damaged_records_are_rewritten_and_delivered_in_order() {
        use crate::fault::{FaultSpec, Injector};
        let dir = std::env::temp_dir().join(format!("sf-shm-crc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // 1000 bytes: checked whole here; 12000: header here, payload in the sink's copy.
        for (who, spec, size) in
            [("sender", "corrupt=1", 1000), ("receiver", "bus=1", 1000), ("sender", "corrupt=1", 12000), ("receiver", "bus=1", 12000)]
        {
            let mut a = ShmPath::create(&dir, 0, 2, 1 << 16).unwrap();
            let mut b = ShmPath::create(&dir, 1, 2, 1 << 16).unwrap();
            let inj = Injector::new(FaultSpec::parse(spec).unwrap(), 0);
            if who == "sender" {
                a.set_faults(inj);
            } else {
                b.set_faults(inj);
            }
            a.send(1, &[3; HDR_LEN], &vec![7u8; size]).unwrap();
            a.faults = None;
            a.send(1, &[4; HDR_LEN], &vec![8u8; size]).unwrap();
            let mut got = Collect(Vec::new());
            assert_eq!(b.poll(&mut got).unwrap(), 0, "{who} {size}");
            assert!(got.0.is_empty(), "{who} {size}: damaged record (or one after it) delivered");
            assert_eq!(b.counters().corrupt_detected, 1);
            b.faults = None;
            // Nothing moves until the producer rewrote the record.
            assert_eq!(b.poll(&mut got).unwrap(), 0);
            assert!(b.inbound_pending() == false, "{who} {size}: the consumer could not sleep");
            assert!(a.inbound_pending(), "{who} {size}: the producer would sleep through the request");
            assert_eq!(a.poll(&mut Collect(Vec::new())).unwrap(), 0);
            assert_eq!(a.counters().retransmits, 1);
            assert!(b.inbound_pending());
            assert_eq!(b.poll(&mut got).unwrap(), 2, "{who} {size}");
            assert_eq!((got.0[0].1, &got.0[0].2), ([3; HDR_LEN], &vec![7u8; size]));
            assert_eq!((got.0[1].1, &got.0[1].2), ([4; HDR_LEN], &vec![8u8; size]));
            drop(a);
            drop(b);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Rendezvous data kept by reference (`send_held`): a damaged record is rewritten from
    /// the caller's buffer, which the caller keeps until the message is confirmed.
    #[test]
    fn damaged_record_kept_by_reference_is_rewritten_from_the_callers_buffer() {
        use crate::fault::{FaultSpec, Injector};
        let dir = std::env::temp_dir().join(format!("sf-shm-ref-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut a = ShmPath::create(&dir, 0, 2, 1 << 16).unwrap();
        let mut b = ShmPath::create(&dir, 1, 2, 1 << 16).unwrap();
        assert!(a.holds_references(1));
        let data: Vec<u8> = (0..12000u32).map(|i| (i * 31) as u8).collect();
        a.set_faults(Injector::new(FaultSpec::parse("corrupt=1").unwrap(), 0));
        // SAFETY: `data` outlives the exchange and is not changed.
        assert_eq!(unsafe { a.send_held(1, &[5; HDR_LEN], &data) }.unwrap(), SendStatus::Done);
        a.faults = None;
        let mut got = Collect(Vec::new());
        assert_eq!(b.poll(&mut got).unwrap(), 0);
        assert_eq!(b.counters().corrupt_detected, 1);
        a.poll(&mut Collect(Vec::new())).unwrap();
        assert_eq!(a.counters().retransmits, 1);
        assert_eq!(b.poll(&mut got).unwrap(), 1);
        assert_eq!(got.0[0].2, data);
        drop(a);
        drop(b);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A damaged payload-length word (which the record's CRC covers) makes the record look
    /// longer than its slot: it is rewritten like any other damage.
    #[test]
    fn damaged_length_word_is_rewritten() {
        let dir = std::env::temp_dir().join(format!("sf-shm-plen-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut a = ShmPath::create(&dir, 0, 2, 1 << 16).unwrap();
        let mut b = ShmPath::create(&dir, 1, 2, 1 << 16).unwrap();
        a.send(1, &[3; HDR_LEN], &[7u8; 100]).unwrap();
        // SAFETY: the record starts the ring; the consumer has not looked at it yet.
        unsafe { *b.me.ring(0).data().add(5) ^= 0x40 };
        let mut got = Collect(Vec::new());
        assert_eq!(b.poll(&mut got).unwrap(), 0);
        assert_eq!(b.counters().corrupt_detected, 1);
        a.poll(&mut Collect(Vec::new())).unwrap();
        assert_eq!(b.poll(&mut got).unwrap(), 1);
        assert_eq!(got.0[0].2, vec![7u8; 100]);
        drop(a);
        drop(b);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Damage that every fresh copy meets again is not transient: after `REPAIR_LIMIT`
    /// rewrites the consumer reports it, and nothing damaged is delivered.
    #[test]
    fn persistent_damage_is_reported_after_the_repair_limit() {
        use crate::fault::{FaultSpec, Injector};
        let dir = std::env::temp_dir().join(format!("sf-shm-limit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut a = ShmPath::create(&dir, 0, 2, 1 << 16).unwrap();
        let mut b = ShmPath::create(&dir, 1, 2, 1 << 16).unwrap();
        b.set_faults(Injector::new(FaultSpec::parse("bus=1").unwrap(), 1));
        a.send(1, &[3; HDR_LEN], &[7u8; 100]).unwrap();
        let mut got = Collect(Vec::new());
        let err = loop {
            match b.poll(&mut got) {
                Ok(_) => assert_eq!(a.poll(&mut Collect(Vec::new())).unwrap(), 0),
                Err(e) => break e,
            }
            assert!(a.counters().retransmits <= u64::from(REPAIR_LIMIT));
        };
        assert!(matches!(err, PathError::Corrupt { peer: 0, path: "shm", .. }), "{err}");
        assert_eq!(a.counters().retransmits, u64::from(REPAIR_LIMIT));
        assert!(got.0.is_empty());
        drop(a);
        drop(b);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Fuzz entry point (fuzz/fuzz_targets/shm_ring.rs and the stable randomized test): lays
/// `data` into the ring a peer writes into this rank's segment (record-length words, skip
/// records, headers, checksums, as a broken or hostile peer process could leave them) and
/// lets `poll` consume it. Only a bug panics; a corrupt ring must come back as an error.
/// The segments (4 KiB rings) live in a private temporary directory made once per thread.
#[doc(hidden)]
pub fn fuzz_ring(data: &[u8]) {
    struct Budget(usize);
    impl PacketSink for Budget {
        fn packet(&mut self, _peer: u32, _hdr: &RawHeader, payload: &[u8]) {
            assert!(payload.len() <= 4096);
            self.0 = self.0.saturating_sub(1);
        }
        // A ring of valid records that wraps onto itself is read again and again: stop
        // after a bounded number of deliveries, as a satisfied receive would.
        fn wants_more(&self) -> bool {
            self.0 > 0
        }
    }
    thread_local! {
        static PAIR: std::cell::RefCell<Option<(ShmPath, ShmPath)>> = const { std::cell::RefCell::new(None) };
    }
    PAIR.with(|pair| {
        let mut pair = pair.borrow_mut();
        if pair.is_none() {
            let dir = std::env::temp_dir().join(format!("steadfast-fuzz-shm-{}-{:?}", std::process::id(), std::thread::current().id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir(&dir).expect("fuzz: temporary directory");
            let a = ShmPath::create(&dir, 0, 2, 4096).expect("fuzz: segment 0");
            let b = ShmPath::create(&dir, 1, 2, 4096).expect("fuzz: segment 1");
            // The mappings stay valid after the files are gone.
            let _ = std::fs::remove_dir_all(&dir);
            *pair = Some((a, b));
        }
        let Some((_, b)) = pair.as_mut() else { return };
        let ring = b.me.ring(0);
        let n = data.len().min(ring.size);
        // SAFETY: the ring's data area is `ring.size` bytes of our own mapping.
        unsafe {
            std::ptr::write_bytes(ring.data(), 0, ring.size);
            std::ptr::copy_nonoverlapping(data.as_ptr(), ring.data(), n);
        }
        ring.head().store(0, Ordering::Relaxed);
        ring.tail().store(n as u64, Ordering::Relaxed);
        ring.blocked().store(0, Ordering::Relaxed);
        ring.repair().store(0, Ordering::Relaxed);
        b.heads[0] = 0;
        b.first_ring = 0;
        // A record that failed its check in the last case asked for a rewrite that never
        // comes (no producer): start each case afresh.
        b.awaiting[0] = false;
        b.repairs[0] = 0;
        b.repair_at[0] = u64::MAX;
        let mut sink = Budget(64);
        for _ in 0..4 {
            match b.poll(&mut sink) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    });
}
