//! One-sided communication (MPI_Win_*, MPI_Put / Get / Accumulate and friends).
//!
//! Members on one host are reached directly, without the target's participation:
//! - windows whose memory the library allocates (MPI_Win_allocate, MPI_Win_allocate_shared)
//!   on one host live in one shared-memory segment every member maps: puts and gets are
//!   `memcpy`, and MPI_Win_shared_query hands out direct load/store pointers;
//! - windows over the application's memory (MPI_Win_create, MPI_Win_create_dynamic), and
//!   every window spanning hosts, are reached on the same host with `process_vm_readv` /
//!   `process_vm_writev` (single-copy cross-memory access);
//! - a small shared control segment per window and host holds, for each member, a
//!   reader/writer lock word (MPI_Win_lock) and the mutex that makes accumulates on that
//!   target atomic.
//!
//! Members on other hosts are reached through the network path (`rma_net`): each operation
//! is a request their target service applies, under the same lock word and mutex.
//!
//! Transfers to members of this host complete when the call returns (except small puts and
//! gets of fence epochs on MPI_Win_create windows within one host, staged in the target's
//! inbox and applied at the closing fence: `STAGE_INBOX`; and puts of lock epochs on such
//! windows, and larger ones of fence epochs, posted to the target's mailbox and completed by
//! flush, unlock or fence: `rma_mail`);
//! synchronization calls order them,
//! and flush what went to other hosts: fence is a barrier in the control segment within one
//! host (`ShmBarrier`), a flush, a memory fence and a message-based barrier across hosts;
//! post/start/complete/wait exchange zero-byte messages on the window's private
//! communicator, lock/unlock take the lock word (or ask the remote target's service).
//! MPI_Win_allocate_shared across hosts is refused with MPI_ERR_RMA_SHARED.
//!
//! Entry points run without the library lock (they call collectives and point-to-point
//! through the PMPI layer); errors go to the window's error handler.

// Window handles and target ranks are small integers: FxHash rather than SipHash, which
// showed in every put's and lock's profile.
use rustc_hash::FxHashMap as HashMap;
use std::cell::Cell;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use steadfast_core::datatype::TypeRef;
use steadfast_core::info::Info;
use steadfast_core::op::{PredefOp, Reduction};
use steadfast_core::{ErrorClass, Handle, MpiError};

use crate::abi::{self, MPI_Aint, MPI_Comm, MPI_Count, MPI_Datatype, MPI_Errhandler, MPI_Group, MPI_Info, MPI_Op, MPI_Request, MPI_Win};
use crate::global::{self, dtype, lock, Global, PHASE, PHASE_LIVE};
use crate::rma_net::{Ask, Kind};
use steadfast_core::op::Elem;
use crate::mpi_api;

fn err(class: ErrorClass, msg: impl Into<String>) -> MpiError {
    MpiError::new(class, msg)
}

type R<T> = Result<T, MpiError>;

// ---- shared memory segments -----------------------------------------------------------------

/// A shared mapping, unmapped when dropped.
struct Segment {
    addr: usize,
    len: usize,
}

impl Drop for Segment {
    fn drop(&mut self) {
        // SAFETY: addr/len came from a successful mmap and nothing uses the window any more.
        unsafe { libc::munmap(self.addr as *mut c_void, self.len) };
    }
}

fn page_round(n: usize) -> usize {
    let page = 4096;
    n.max(1).div_ceil(page) * page
}

/// Directory for window segments: the job directory (which the launcher removes however the
/// job ends), or /dev/shm for a singleton.
fn segment_dir() -> String {
    std::env::var("STEADFAST_JOBDIR").unwrap_or_else(|_| "/dev/shm".to_string())
}

fn segment_path(id: u64, what: &str) -> std::ffi::CString {
    let p = format!("{}/win-{id:x}-{what}", segment_dir());
    std::ffi::CString::new(p).unwrap_or_default()
}

/// Create (`create`) or open the segment file and map it.
unsafe fn map_segment(id: u64, what: &str, len: usize, create: bool) -> R<Segment> {
    let path = segment_path(id, what);
    let flags = if create { libc::O_RDWR | libc::O_CREAT | libc::O_EXCL } else { libc::O_RDWR };
    let fd = libc::open(path.as_ptr(), flags | libc::O_CLOEXEC, 0o600);
    if fd < 0 {
        let e = std::io::Error::last_os_error();
        return Err(err(ErrorClass::NoMem, format!("cannot open window segment {path:?}: {e}")));
    }
    if create && libc::ftruncate(fd, len as libc::off_t) != 0 {
        let e = std::io::Error::last_os_error();
        libc::close(fd);
        return Err(err(ErrorClass::NoMem, format!("cannot size window segment to {len} bytes: {e}")));
    }
    let p = libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0);
    libc::close(fd);
    if p == libc::MAP_FAILED {
        let e = std::io::Error::last_os_error();
        return Err(err(ErrorClass::NoMem, format!("cannot map window segment of {len} bytes: {e}")));
    }
    Ok(Segment { addr: p as usize, len })
}

fn unlink_segment(id: u64, what: &str) {
    let path = segment_path(id, what);
    // SAFETY: path is a valid C string.
    unsafe { libc::unlink(path.as_ptr()) };
}

/// Per target: lock word, accumulate mutex and (windows spanning hosts) the count of lock
/// requests of other hosts waiting, whose turn the word is, and the count of this host's
/// lockers waiting (`rma_net`), one cache line each target.
const CTL_STRIDE: usize = 64;
pub(crate) const LOCK_EXCL: u64 = 1 << 63;

/// After the members' lines, windows within one host keep the fence barrier in the control
/// segment (`ShmBarrier`): the count of members arrived and of waiters asleep, and (a line
/// apart, so that the waiters' polling does not slow the arrivals) the release word.
const CTL_BARRIER_LINES: usize = 2;

fn ctl_len(members: usize) -> usize {
    page_round((members + CTL_BARRIER_LINES) * CTL_STRIDE)
}

/// Staging of small puts and gets in fence epochs on MPI_Win_create windows within one host
/// (whose memory the members cannot map: otherwise each is a cross-memory system call of
/// about a microsecond). Each member has an inbox per epoch parity of this many bytes in a
/// shared staging segment: a line holding the bytes reserved, then records of a `StageHead`
/// and the data, each rounded to 16 bytes. Origins reserve room with an atomic add and
/// write their record; the closing fence's members apply their inboxes (puts copied in,
/// gets' data copied out into the record) between two barriers, and origins take their
/// gets' data after the second.
const STAGE_INBOX: usize = 64 * 1024;
/// Larger transfers go through the system call: its cost is then small next to the copies.
const STAGE_MAX: usize = 8 * 1024;
const STAGE_PUT: u32 = 1;
const STAGE_GET: u32 = 2;
/// Marks where a reservation that did not fit begins: the records end there.
const STAGE_END: u32 = 3;
/// Added to the fence barrier's count by a member that staged something.
const STAGED_FLAG: u32 = 1 << 20;

#[repr(C)]
struct StageHead {
    kind: u32,
    len: u32,
    /// Address at the target, in the target's address space.
    addr: u64,
}

// ---- windows --------------------------------------------------------------------------------

/// What an origin knows of one member of the window.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
struct PeerInfo {
    pid: i64,
    host: u64,
    base: u64,
    size: u64,
    disp_unit: i64,
    world_rank: i64,
    id: u64,
}

#[derive(Clone, Copy, Debug)]
struct Peer {
    pid: i32,
    /// Start of the member's window memory: an address in this process when `local`, else
    /// in the member's.
    base: usize,
    size: usize,
    disp_unit: usize,
    world_rank: u32,
    local: bool,
    /// On another host: reached through its target service (`rma_net`).
    remote: bool,
}

/// The network path of a window whose members span hosts (`rma_net`).
struct Net {
    /// Private communicator the requests travel on, and its engine handle.
    comm: MPI_Comm,
    h: Handle,
    /// Targets on other hosts written to (put, accumulate) since their last flush.
    dirty: std::collections::BTreeSet<usize>,
    /// This member's memory when the library allocated it (MPI_Win_allocate).
    _own: Option<Segment>,
}

/// What the put, get and flush fast paths of a window read without the window table's
/// mutex (whose lock and unlock were most of a small put's and flush's cost): its members,
/// and per target whether an access epoch and a passive-target lock are open towards it,
/// mirrored from the window's epoch state by `Win::publish`. Each thread keeps the last
/// window it used (`FAST`).
struct Fast {
    id: usize,
    peers: Vec<Peer>,
    dynamic: bool,
    spans_hosts: bool,
    /// Flushes take the general path: the window spans hosts, or has mailboxes (whose puts
    /// a flush waits for).
    flush_general: bool,
    /// Per target: fence, lock_all, lock or start epoch open (what `check_epoch` asks).
    open: Vec<AtomicBool>,
    /// Per target: locked by lock or lock_all (what a flush needs).
    locked: Vec<AtomicBool>,
    /// `Win::locks` lists a lock or lock_all is open (with `held`: what MPI_Win_flush_all
    /// needs).
    passive: AtomicBool,
    /// A fence epoch or lock_all is open: MPI_Win_lock then takes the general path.
    all_open: AtomicBool,
    /// Per target: a lock taken by the fast path of MPI_Win_lock (windows within one host),
    /// which `Win::locks` does not list: 0 none, HELD_SHARED or HELD_EXCLUSIVE.
    held: Vec<AtomicU8>,
    /// The control segment (lock words).
    ctl: usize,
    /// The staging segment (MPI_Win_create within one host), 0 without one.
    stage: usize,
    /// A fence epoch is open and nothing else: small puts and gets may be staged.
    stage_ok: AtomicBool,
    /// Parity of the open fence epoch: the inboxes its records go to.
    epoch_half: AtomicU32,
    /// This process staged a record in the open epoch.
    staged: AtomicBool,
    /// Gets staged in the open epoch: record data address, origin buffer, length.
    staged_gets: Mutex<Vec<(usize, usize, usize)>>,
    /// Mailboxes of lock epochs and of fence-epoch transfers too large to stage
    /// (MPI_Win_create within one host; `rma_mail`).
    mail: Option<Arc<crate::rma_mail::Mail>>,
    freed: AtomicBool,
}

const HELD_SHARED: u8 = 1;
const HELD_EXCLUSIVE: u8 = 2;

impl Fast {
    /// The inbox of member `target` for epoch parity `half`.
    fn inbox(&self, target: usize, half: u32) -> usize {
        self.stage + (target * 2 + half as usize) * STAGE_INBOX
    }

    /// Stage a put (`write`) or get of `len` bytes at `addr` of member `target` (an address
    /// in its memory) in the open fence epoch; false when the inbox is full (the caller
    /// then transfers directly).
    ///
    /// # Safety
    /// `buf` must hold `len` bytes; for a get it must stay valid until the closing fence.
    unsafe fn stage_transfer(&self, target: usize, addr: usize, buf: *mut u8, len: usize, write: bool) -> bool {
        let inbox = self.inbox(target, self.epoch_half.load(Ordering::Relaxed));
        // SAFETY: the inbox lies in the staging segment, mapped while the window lives.
        let reserved = unsafe { &*(inbox as *const AtomicU32) };
        let need = (std::mem::size_of::<StageHead>() + len).div_ceil(16) * 16;
        // Once full, stay full without adding (the count must not wrap round).
        if reserved.load(Ordering::Relaxed) as usize >= STAGE_INBOX {
            return false;
        }
        let at = CTL_STRIDE + reserved.fetch_add(need as u32, Ordering::Relaxed) as usize;
        let head = std::mem::size_of::<StageHead>();
        self.staged.store(true, Ordering::Relaxed);
        if at + need > STAGE_INBOX {
            // The records end here (later reservations start further on and fail too).
            if at + head <= STAGE_INBOX {
                // SAFETY: [at, at + head) is inside the inbox and reserved by this call.
                unsafe { std::ptr::write((inbox + at) as *mut StageHead, StageHead { kind: STAGE_END, len: 0, addr: 0 }) };
            }
            return false;
        }
        let kind = if write { STAGE_PUT } else { STAGE_GET };
        // SAFETY: [at, at + need) is inside the inbox and reserved by this call.
        unsafe {
            std::ptr::write((inbox + at) as *mut StageHead, StageHead { kind, len: len as u32, addr: addr as u64 });
            if write {
                std::ptr::copy_nonoverlapping(buf, (inbox + at + head) as *mut u8, len);
            }
        }
        if !write {
            self.staged_gets.lock().unwrap_or_else(|p| p.into_inner()).push((inbox + at + head, buf as usize, len));
        }
        true
    }

    /// Apply this member's inbox of parity `half` (every origin has arrived at the fence).
    fn apply_inbox(&self, me: usize, half: u32) {
        let inbox = self.inbox(me, half);
        // SAFETY: as in `stage`.
        let reserved = unsafe { &*(inbox as *const AtomicU32) };
        let end = (CTL_STRIDE + reserved.load(Ordering::Acquire) as usize).min(STAGE_INBOX);
        let head = std::mem::size_of::<StageHead>();
        let mut at = CTL_STRIDE;
        while at + head <= end {
            // SAFETY: the records up to `end` were written by origins that arrived at the
            // fence since; their target addresses lie inside this member's window (checked
            // by the origin) and their data inside the inbox.
            unsafe {
                let h = std::ptr::read((inbox + at) as *const StageHead);
                let (data, len) = (inbox + at + head, h.len as usize);
                if h.kind == STAGE_PUT && at + head + len <= end {
                    std::ptr::copy_nonoverlapping(data as *const u8, h.addr as *mut u8, len);
                } else if h.kind == STAGE_GET && at + head + len <= end {
                    std::ptr::copy_nonoverlapping(h.addr as *const u8, data as *mut u8, len);
                } else {
                    break;
                }
                at += (head + len).div_ceil(16) * 16;
            }
        }
    }

    /// Empty this member's inbox of parity `half` for the epoch that starts.
    fn reset_inbox(&self, me: usize, half: u32) {
        // SAFETY: as in `stage`.
        unsafe { &*(self.inbox(me, half) as *const AtomicU32) }.store(0, Ordering::Relaxed);
    }

    /// Hand the data of this process's staged gets to their buffers.
    fn finish_gets(&self) {
        let gets = std::mem::take(&mut *self.staged_gets.lock().unwrap_or_else(|p| p.into_inner()));
        for (data, buf, len) in gets {
            // SAFETY: the record's data was filled by the target before the second
            // barrier; the buffer is the application's get buffer, valid until the fence.
            unsafe { std::ptr::copy_nonoverlapping(data as *const u8, buf as *mut u8, len) };
        }
        self.staged.store(false, Ordering::Relaxed);
    }

    fn held(&self, r: usize) -> bool {
        self.held.get(r).is_some_and(|h| h.load(Ordering::Relaxed) != 0)
    }

    fn lock_word(&self, target: usize) -> &AtomicU64 {
        // SAFETY: the control segment holds CTL_STRIDE bytes per member, suitably aligned,
        // and stays mapped while the window lives.
        unsafe { &*((self.ctl + target * CTL_STRIDE) as *const AtomicU64) }
    }
}

/// What each thread keeps: one thread-local, so that a put or a flush reaches both with
/// one address lookup (in a shared library every thread-local costs a call).
struct ThreadCache {
    /// This thread's last window: a pointer that owns one strong count of its Arc (a plain
    /// pointer, so that reaching it needs no check for a thread-local destructor, which was
    /// a tenth of a small put's time; the one Fast a thread holds at its exit stays
    /// allocated).
    fast: Cell<*const Fast>,
    /// This thread stored into a member's memory (put, accumulate) since its last memory
    /// fence: a flush needs the fence only then (a get's loads are complete when it
    /// returns; a put's stores may still wait in this CPU's store buffer, where a later
    /// load of this thread could pass them).
    wrote: Cell<bool>,
}

thread_local! {
    static CACHE: ThreadCache = const { ThreadCache { fast: Cell::new(std::ptr::null()), wrote: Cell::new(false) } };
}

/// Note a store of this thread into window memory (see `ThreadCache::wrote`).
fn note_write() {
    CACHE.with(|c| c.wrote.set(true));
}

/// Run `f` on the fast part of live window `win`, or None when it is not one.
fn with_fast<T>(win: MPI_Win, f: impl FnOnce(&Fast) -> T) -> Option<T> {
    let cached = CACHE.with(|c| c.fast.get());
    if !cached.is_null() {
        // SAFETY: the cache owns a strong count of the Arc it points to.
        let fast = unsafe { &*cached };
        if fast.id == win as usize && !fast.freed.load(Ordering::Relaxed) {
            return Some(f(fast));
        }
    }
    let fast = wins().as_ref()?.get(&(win as usize))?.fast.clone();
    let r = f(&fast);
    let old = CACHE.with(|c| c.fast.replace(Arc::into_raw(fast)));
    if !old.is_null() {
        // SAFETY: `old` came from Arc::into_raw above, in an earlier call on this thread.
        drop(unsafe { Arc::from_raw(old) });
    }
    Some(r)
}

/// One window.
struct Win {
    fast: Arc<Fast>,
    comm: MPI_Comm,
    flavor: c_int,
    base: usize,
    peers: Vec<Peer>,
    ctl: Segment,
    _data: Option<Segment>,
    _stage: Option<Segment>,
    /// Fences so far: the parity of the epoch a fence opens.
    fences: u32,
    /// This member's rank in the window.
    me: usize,
    errhandler: u64,
    name: String,
    info: Info,
    /// A fence opened an access/exposure epoch.
    fence_epoch: bool,
    /// Sense of this member's last fence barrier in the control segment (windows within
    /// one host).
    fence_sense: u32,
    /// Targets of the open PSCW access epoch (window ranks).
    access: Option<Vec<usize>>,
    /// Origins of the open PSCW exposure epoch and their pending completion messages.
    exposure: Option<Vec<MPI_Request>>,
    /// Passive-target locks held: target -> (lock type, whether the lock word was taken).
    locks: HashMap<usize, (c_int, bool)>,
    lock_all: bool,
    /// Memory attached to a dynamic window (address, size).
    attached: Vec<(usize, usize)>,
    /// Members on other hosts: the network path.
    net: Option<Net>,
    // Storage for the predefined attributes (applications get pointers to these).
    attr_size: MPI_Aint,
    attr_disp_unit: c_int,
    attr_flavor: c_int,
    attr_model: c_int,
}

// SAFETY: the raw handles and addresses in Win are plain values; the mappings are process-wide.
unsafe impl Send for Win {}
// SAFETY: as for Win; the mutable parts of Fast are atomics.
unsafe impl Send for Fast {}
unsafe impl Sync for Fast {}

impl Win {
    /// Whether this process holds a lock on target `r` (MPI_Win_lock, either path).
    fn holds(&self, r: usize) -> bool {
        self.locks.contains_key(&r) || self.fast.held(r)
    }

    /// Whether this process holds any lock (lock_all's marker included).
    fn any_lock(&self) -> bool {
        !self.locks.is_empty() || (0..self.fast.held.len()).any(|r| self.fast.held(r))
    }

    /// Mirror the epoch state into `fast`: for one target (lock, unlock) or all.
    fn publish(&self, target: Option<usize>) {
        let f = &self.fast;
        let all = self.fence_epoch || self.lock_all;
        f.all_open.store(all, Ordering::Relaxed);
        let set = |r: usize| {
            let locked = self.lock_all || self.holds(r);
            f.locked[r].store(locked, Ordering::Relaxed);
            f.open[r].store(all || locked, Ordering::Relaxed);
        };
        match target {
            Some(r) if r < f.open.len() => set(r),
            Some(_) => {}
            None => (0..f.open.len()).for_each(set),
        }
        if let Some(access) = &self.access {
            for &r in access {
                if target.is_none_or(|t| t == r) {
                    f.open[r].store(true, Ordering::Relaxed);
                }
            }
        }
        f.passive.store(self.lock_all || !self.locks.is_empty(), Ordering::Relaxed);
        let only_fence = self.fence_epoch && self.access.is_none() && !self.lock_all && self.locks.is_empty();
        f.stage_ok.store(f.stage != 0 && only_fence && !(0..f.held.len()).any(|r| f.held(r)), Ordering::Relaxed);
    }
}

static WINS: Mutex<Option<HashMap<usize, Box<Win>>>> = Mutex::new(None);
static NEXT_WIN: AtomicU64 = AtomicU64::new(0x5000_0000);
static NEXT_SEG: AtomicU64 = AtomicU64::new(1);

fn wins() -> MutexGuard<'static, Option<HashMap<usize, Box<Win>>>> {
    WINS.lock().unwrap_or_else(|p| p.into_inner())
}

/// Run `f` on window `w`.
fn with_win<T>(w: MPI_Win, f: impl FnOnce(&mut Win) -> R<T>) -> R<T> {
    let mut guard = wins();
    let map = guard.get_or_insert_with(HashMap::default);
    match map.get_mut(&(w as usize)) {
        Some(win) => f(win),
        None if w as usize == abi::MPI_WIN_NULL => Err(err(ErrorClass::Win, "MPI_WIN_NULL is not a valid window here")),
        None => Err(err(ErrorClass::Win, format!("invalid window handle {:#x}", w as usize))),
    }
}

/// Whether `w` is a live window (attribute calls check their object with this).
pub fn exists(w: usize) -> bool {
    wins().as_ref().is_some_and(|m| m.contains_key(&w))
}

type WinErrhandlerFn = unsafe extern "C" fn(*mut MPI_Win, *mut c_int, ...);

/// Report an error of a window call through the window's error handler (MPI_ERRORS_ARE_FATAL
/// unless the application set another).
fn raise(func: &str, w: MPI_Win, e: MpiError) -> c_int {
    let Some(handler) = wins().as_ref().and_then(|m| m.get(&(w as usize)).map(|x| x.errhandler)) else {
        // No window to take the handler from: the error is raised on MPI_COMM_SELF.
        return global::api(func, Some(abi::MPI_COMM_SELF), |_| Err(e));
    };
    crate::errhandler::report_to_object_handler(lock(), func, handler as usize, e, |f, c| {
        let mut win = w;
        // SAFETY: registered with MPI_Win_create_errhandler.
        unsafe {
            let f: WinErrhandlerFn = std::mem::transmute::<usize, WinErrhandlerFn>(f);
            f(&mut win, c);
        }
    })
}

fn live_check(func: &str) {
    if PHASE.load(Ordering::Acquire) != PHASE_LIVE {
        eprintln!("steadfast: {func} called outside MPI_Init / MPI_Finalize");
        std::process::exit(1);
    }
}

/// Run a window call's body (no library lock held) and report its error on window `w`.
fn win_api(func: &str, w: MPI_Win, body: impl FnOnce() -> R<()>) -> c_int {
    live_check(func);
    match body() {
        Ok(()) => abi::MPI_SUCCESS,
        Err(e) => raise(func, w, e),
    }
}

/// A PMPI call's return code as an error.
fn check_rc(what: &str, rc: c_int) -> R<()> {
    if rc == abi::MPI_SUCCESS {
        return Ok(());
    }
    let msg = {
        let guard = lock();
        guard.as_ref().and_then(|g| g.errors.message(rc).map(str::to_owned)).unwrap_or_else(|| format!("error code {rc}"))
    };
    Err(err(ErrorClass::Other, format!("{what} failed: {msg}")))
}

fn g_locked<T>(f: impl FnOnce(&mut Global) -> R<T>) -> R<T> {
    let mut guard = lock();
    match guard.as_mut() {
        Some(g) => f(g),
        None => Err(err(ErrorClass::Other, "MPI is not initialised")),
    }
}

fn host_id() -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    std::env::var("STEADFAST_HOST").unwrap_or_default().hash(&mut h);
    let mut host = [0u8; 256];
    // SAFETY: host is 256 bytes.
    unsafe { libc::gethostname(host.as_mut_ptr() as *mut c_char, host.len()) };
    host.hash(&mut h);
    h.finish()
}

/// Collective part of every window constructor. `mem` is this member's memory for
/// create/dynamic, None when the library allocates (allocate, allocate_shared).
unsafe fn build(comm: MPI_Comm, flavor: c_int, size: MPI_Aint, disp_unit: c_int, info: MPI_Info, mem: usize) -> R<(MPI_Win, usize)> {
    if size < 0 {
        return Err(err(ErrorClass::Size, format!("window size {size} is negative")));
    }
    if disp_unit <= 0 {
        return Err(err(ErrorClass::Disp, format!("displacement unit {disp_unit} must be positive")));
    }
    let (hints, world_rank) = g_locked(|g| {
        global::comm_handle(g, comm as usize)?;
        if g.eng.comm(global::comm_handle(g, comm as usize)?)?.remote.is_some() {
            return Err(err(ErrorClass::Comm, "windows need an intracommunicator"));
        }
        Ok((crate::info::info_arg(g, info)?, g.eng.rank))
    })?;
    let mut wcomm: MPI_Comm = std::ptr::null_mut();
    check_rc("MPI_Comm_dup of the window communicator", crate::comm::PMPI_Comm_dup(comm, &mut wcomm))?;
    crate::errhandler::PMPI_Comm_set_errhandler(wcomm, abi::MPI_ERRORS_RETURN as MPI_Errhandler);
    let fail = |wcomm: &mut MPI_Comm, e: MpiError| -> R<(MPI_Win, usize)> {
        crate::comm::PMPI_Comm_free(wcomm);
        Err(e)
    };
    let mut n = 0;
    let mut me = 0;
    crate::comm::PMPI_Comm_size(wcomm, &mut n);
    crate::comm::PMPI_Comm_rank(wcomm, &mut me);
    let (n, me) = (n as usize, me as usize);
    // Let window members (siblings, not our parent) read and write our memory.
    libc::prctl(libc::PR_SET_PTRACER, libc::PR_SET_PTRACER_ANY as libc::c_ulong, 0, 0, 0);
    let mine = PeerInfo {
        pid: libc::getpid() as i64,
        host: host_id(),
        base: mem as u64,
        size: size as u64,
        disp_unit: disp_unit as i64,
        world_rank: world_rank as i64,
        id: ((libc::getpid() as u64) << 24) | (NEXT_SEG.fetch_add(1, Ordering::Relaxed) & 0xff_ffff),
    };
    let mut all = vec![PeerInfo::default(); n];
    let sz = std::mem::size_of::<PeerInfo>() as c_int;
    let rc = crate::coll::PMPI_Allgather(
        &mine as *const PeerInfo as *const c_void,
        sz,
        abi::MPI_BYTE as MPI_Datatype,
        all.as_mut_ptr() as *mut c_void,
        sz,
        abi::MPI_BYTE as MPI_Datatype,
        wcomm,
    );
    if let Err(e) = check_rc("exchanging window addresses", rc) {
        return fail(&mut wcomm, e);
    }
    let spans = all.iter().any(|p| p.host != all[0].host);
    if spans && flavor == abi::MPI_WIN_FLAVOR_SHARED {
        return fail(&mut wcomm, err(ErrorClass::RmaShared, "MPI_Win_allocate_shared needs every member on one host; the communicator spans hosts"));
    }
    let mut own = None;
    if spans && flavor == abi::MPI_WIN_FLAVOR_ALLOCATE {
        // No segment spans hosts: each member allocates its own part, and the members
        // exchange the addresses (u64::MAX: a member could not allocate).
        let len = page_round(size as usize);
        let p = libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0);
        let mine = if p == libc::MAP_FAILED {
            u64::MAX
        } else {
            own = Some(Segment { addr: p as usize, len });
            p as u64
        };
        let mut bases = vec![0u64; n];
        let rc = crate::coll::PMPI_Allgather(
            &mine as *const u64 as *const c_void,
            8,
            abi::MPI_BYTE as MPI_Datatype,
            bases.as_mut_ptr() as *mut c_void,
            8,
            abi::MPI_BYTE as MPI_Datatype,
            wcomm,
        );
        if let Err(e) = check_rc("exchanging window addresses", rc) {
            return fail(&mut wcomm, e);
        }
        if bases.contains(&u64::MAX) {
            return fail(&mut wcomm, err(ErrorClass::NoMem, format!("a member could not allocate its {size} bytes of window memory")));
        }
        for (p, b) in all.iter_mut().zip(bases) {
            p.base = b;
        }
    }
    // One control segment per host, made by the host's first member.
    let leader = all.iter().position(|p| p.host == all[me].host).unwrap_or(me);
    let id = all[leader].id;
    let library_memory = !spans && (flavor == abi::MPI_WIN_FLAVOR_ALLOCATE || flavor == abi::MPI_WIN_FLAVOR_SHARED);
    // Offsets of each member's part of the data segment: contiguous for allocate_shared (as
    // the standard's default promises), cache-line aligned for allocate.
    let align = if flavor == abi::MPI_WIN_FLAVOR_SHARED { 1 } else { 64 };
    let mut offs = Vec::with_capacity(n);
    let mut total = 0usize;
    for p in &all {
        total = total.div_ceil(align) * align;
        offs.push(total);
        total += p.size as usize;
    }
    let ctl_len = ctl_len(n);
    let data_len = page_round(total);
    // The host's first member creates the segments, the others map them, then it unlinks
    // the names.
    let staging = !spans && flavor == abi::MPI_WIN_FLAVOR_CREATE;
    let stage_len = n * 2 * STAGE_INBOX;
    let mailboxes = staging && n <= crate::rma_mail::MAX_MEMBERS && std::env::var("STEADFAST_RMA_MAILBOX").map_or(true, |v| v != "0");
    let mail_len = crate::rma_mail::segment_len(n);
    let mut first: R<()> = Ok(());
    let mut ctl = None;
    let mut data = None;
    let mut stage_seg = None;
    let mut mail_seg = None;
    if me == leader {
        first = map_segment(id, "ctl", ctl_len, true).map(|s| ctl = Some(s));
        if first.is_ok() && library_memory {
            first = map_segment(id, "data", data_len, true).map(|s| data = Some(s));
        }
        if first.is_ok() && staging {
            first = map_segment(id, "stage", stage_len, true).map(|s| stage_seg = Some(s));
        }
        if first.is_ok() && mailboxes {
            // Optional: without it the transfers take the system call.
            mail_seg = map_segment(id, "mail", mail_len, true).ok();
            if mail_seg.is_none() {
                unlink_segment(id, "mail");
            }
        }
    }
    let mut ok = first.is_ok() as c_int;
    let mut all_ok = 0;
    crate::coll::PMPI_Allreduce(&ok as *const c_int as *const c_void, &mut all_ok as *mut c_int as *mut c_void, 1, abi::MPI_INT as MPI_Datatype, abi::MPI_MIN as MPI_Op, wcomm);
    if all_ok == 0 {
        if me == leader {
            unlink_segment(id, "ctl");
            unlink_segment(id, "data");
            unlink_segment(id, "stage");
            unlink_segment(id, "mail");
        }
        let e = first.err().unwrap_or_else(|| err(ErrorClass::NoMem, "a member could not create the window's segments"));
        return fail(&mut wcomm, e);
    }
    let mut second: R<()> = Ok(());
    if me != leader {
        second = map_segment(id, "ctl", ctl_len, false).map(|s| ctl = Some(s));
        if second.is_ok() && library_memory {
            second = map_segment(id, "data", data_len, false).map(|s| data = Some(s));
        }
        if second.is_ok() && staging {
            second = map_segment(id, "stage", stage_len, false).map(|s| stage_seg = Some(s));
        }
        // The host's first member decided (STEADFAST_RMA_MAILBOX may differ between
        // processes): the others follow whatever it made.
        if second.is_ok() && staging && n <= crate::rma_mail::MAX_MEMBERS {
            mail_seg = map_segment(id, "mail", mail_len, false).ok();
        }
    }
    ok = second.is_ok() as c_int;
    crate::coll::PMPI_Allreduce(&ok as *const c_int as *const c_void, &mut all_ok as *mut c_int as *mut c_void, 1, abi::MPI_INT as MPI_Datatype, abi::MPI_MIN as MPI_Op, wcomm);
    if me == leader {
        unlink_segment(id, "ctl");
        unlink_segment(id, "data");
        unlink_segment(id, "stage");
        unlink_segment(id, "mail");
    }
    let (Some(ctl), true) = (ctl, all_ok != 0) else {
        let e = second.err().unwrap_or_else(|| err(ErrorClass::NoMem, "a member could not map the window's segments"));
        return fail(&mut wcomm, e);
    };
    let pid = libc::getpid();
    let here = all[me].host;
    let peers: Vec<Peer> = all
        .iter()
        .enumerate()
        .map(|(r, p)| {
            let base = match &data {
                Some(d) => d.addr + offs[r],
                None => p.base as usize,
            };
            Peer {
                pid: p.pid as i32,
                base,
                size: p.size as usize,
                disp_unit: p.disp_unit as usize,
                world_rank: p.world_rank as u32,
                local: data.is_some() || (p.pid as i32 == pid && p.host == here),
                remote: p.host != here,
            }
        })
        .collect();
    let base = peers[me].base;
    let mut info_used = Info::new();
    if let Some(h) = &hints {
        for (k, v) in h.iter() {
            info_used.set(k, v)?;
        }
    }
    let net = if spans {
        match open_net(wcomm, flavor, &peers[me], ctl.addr + me * CTL_STRIDE, own) {
            Ok(n) => Some(n),
            Err(e) => return fail(&mut wcomm, e),
        }
    } else {
        None
    };
    let handle = NEXT_WIN.fetch_add(0x1000, Ordering::Relaxed) as usize;
    let mail = mail_seg.map(|seg| {
        let (addr, my) = (seg.addr, &peers[me]);
        // SAFETY: the segment is `mail_len` bytes, mapped by every member, kept by the Mail.
        Arc::new(unsafe { crate::rma_mail::Mail::new(addr, n, me, my.base, my.size, Box::new(seg)) })
    });
    let fast = Arc::new(Fast {
        id: handle,
        peers: peers.clone(),
        dynamic: flavor == abi::MPI_WIN_FLAVOR_DYNAMIC,
        spans_hosts: net.is_some(),
        flush_general: net.is_some() || mail.is_some(),
        open: peers.iter().map(|_| AtomicBool::new(false)).collect(),
        locked: peers.iter().map(|_| AtomicBool::new(false)).collect(),
        passive: AtomicBool::new(false),
        all_open: AtomicBool::new(false),
        held: peers.iter().map(|_| AtomicU8::new(0)).collect(),
        ctl: ctl.addr,
        stage: stage_seg.as_ref().map_or(0, |s| s.addr),
        stage_ok: AtomicBool::new(false),
        epoch_half: AtomicU32::new(0),
        staged: AtomicBool::new(false),
        staged_gets: Mutex::new(Vec::new()),
        mail: mail.clone(),
        freed: AtomicBool::new(false),
    });
    if let Some(m) = mail {
        crate::rma_net::serve_mail(handle as u64, m);
    }
    let win = Win {
        fast,
        comm: wcomm,
        flavor,
        base,
        peers,
        ctl,
        _data: data,
        _stage: stage_seg,
        errhandler: abi::MPI_ERRORS_ARE_FATAL as u64,
        name: String::new(),
        info: info_used,
        fence_epoch: false,
        fence_sense: 0,
        fences: 0,
        me,
        access: None,
        exposure: None,
        locks: HashMap::default(),
        lock_all: false,
        attached: Vec::new(),
        net,
        attr_size: size,
        attr_disp_unit: disp_unit,
        attr_flavor: flavor,
        attr_model: abi::MPI_WIN_UNIFIED,
    };
    wins().get_or_insert_with(HashMap::default).insert(handle, Box::new(win));
    Ok((handle as MPI_Win, base))
}

/// The network path of a new window spanning hosts: its request communicator, and this
/// member exposed to the origins of other hosts (collective over `wcomm`).
unsafe fn open_net(wcomm: MPI_Comm, flavor: c_int, me: &Peer, ctl: usize, own: Option<Segment>) -> R<Net> {
    let mut comm: MPI_Comm = std::ptr::null_mut();
    check_rc("MPI_Comm_dup of the window's request communicator", crate::comm::PMPI_Comm_dup(wcomm, &mut comm))?;
    crate::errhandler::PMPI_Comm_set_errhandler(comm, abi::MPI_ERRORS_RETURN as MPI_Errhandler);
    let h = match g_locked(|g| global::comm_handle(g, comm as usize)) {
        Ok(h) => h,
        Err(e) => {
            crate::comm::PMPI_Comm_free(&mut comm);
            return Err(e);
        }
    };
    let fixed = (flavor != abi::MPI_WIN_FLAVOR_DYNAMIC).then_some((me.base, me.size));
    if let Err(e) = crate::rma_net::expose(h, fixed, ctl) {
        crate::comm::PMPI_Comm_free(&mut comm);
        return Err(e);
    }
    Ok(Net { comm, h, dirty: Default::default(), _own: own })
}

unsafe fn out_win(win: *mut MPI_Win) -> R<()> {
    if win.is_null() {
        Err(err(ErrorClass::Arg, "win pointer is NULL"))
    } else {
        Ok(())
    }
}

// ---- data movement --------------------------------------------------------------------------

/// Copy between the packed buffer `buf` and the byte runs (absolute addresses) of a member.
unsafe fn xfer(peer: &Peer, write: bool, runs: &[(usize, usize)], buf: *mut u8) -> R<()> {
    if write {
        note_write();
    }
    if peer.local {
        let mut p = buf;
        for &(addr, len) in runs {
            if write {
                std::ptr::copy(p, addr as *mut u8, len);
            } else {
                std::ptr::copy(addr as *const u8, p, len);
            }
            p = p.add(len);
        }
        return Ok(());
    }
    let mut p = buf;
    for chunk in runs.chunks(512) {
        let total: usize = chunk.iter().map(|r| r.1).sum();
        if total == 0 {
            continue;
        }
        let remote: Vec<libc::iovec> = chunk.iter().map(|&(a, l)| libc::iovec { iov_base: a as *mut c_void, iov_len: l }).collect();
        let local = libc::iovec { iov_base: p as *mut c_void, iov_len: total };
        let n = if write {
            libc::process_vm_writev(peer.pid, &local, 1, remote.as_ptr(), remote.len() as libc::c_ulong, 0)
        } else {
            libc::process_vm_readv(peer.pid, &local, 1, remote.as_ptr(), remote.len() as libc::c_ulong, 0)
        };
        if n != total as isize {
            let e = std::io::Error::last_os_error();
            return Err(err(
                ErrorClass::RmaRange,
                format!("cross-memory {} of {total} bytes at the target failed ({} bytes moved): {e}", if write { "write" } else { "read" }, n.max(0)),
            ));
        }
        p = p.add(total);
    }
    Ok(())
}

/// Move `len` bytes between `buf` and `addr` of process `pid` with the cross-memory system
/// call (a mailbox record its origin claimed, `rma_mail`).
fn cma_move(pid: i32, write: bool, addr: usize, buf: *mut u8, len: usize) -> R<()> {
    let peer = Peer { pid, base: 0, size: 0, disp_unit: 1, world_rank: 0, local: false, remote: false };
    // SAFETY: `buf` is a mailbox slot's data of `len` bytes; the target range was checked
    // against the target's window by the origin that posted the record.
    unsafe { xfer(&peer, write, &[(addr, len)], buf) }
}

/// Complete the puts this process posted to the mailboxes of `win` towards `target` (every
/// target: None), before a flush or unlock reports them complete.
fn mail_drain(win: MPI_Win, target: Option<usize>) -> R<()> {
    with_fast(win, |f| match &f.mail {
        Some(m) if m.pending(target) => m.drain(target, &|t| f.peers.get(t).map_or(0, |p| p.pid), &cma_move),
        _ => Ok(()),
    })
    .unwrap_or(Ok(()))
}

/// Where an operation lands at the target.
struct Target {
    peer: Peer,
    runs: Vec<(usize, usize)>,
    ty: TypeRef,
    count: usize,
}

fn target_of(w: &Win, rank: c_int, disp: MPI_Aint, count: i64, ty: &TypeRef) -> R<Target> {
    let peer = *usize::try_from(rank)
        .ok()
        .and_then(|r| w.peers.get(r))
        .ok_or_else(|| err(ErrorClass::Rank, format!("target rank {rank} is not in the window (size {})", w.peers.len())))?;
    if count < 0 {
        return Err(err(ErrorClass::Count, format!("count {count} is negative")));
    }
    let dynamic = w.flavor == abi::MPI_WIN_FLAVOR_DYNAMIC;
    if !dynamic && disp < 0 {
        return Err(err(ErrorClass::Disp, format!("target displacement {disp} is negative")));
    }
    let start = if dynamic { disp as usize } else { peer.base.wrapping_add((disp as usize).wrapping_mul(peer.disp_unit)) };
    // Runs that continue each other become one: a contiguous type yields one run per
    // element, and every run costs an iovec of a cross-memory call (which the kernel handles
    // one by one) or a piece of a request to another host.
    let mut runs: Vec<(usize, usize)> = Vec::new();
    ty.for_each_run(count as usize, 0, usize::MAX, |off, len| {
        let a = start.wrapping_add_signed(off);
        match runs.last_mut() {
            Some(last) if last.0.wrapping_add(last.1) == a => last.1 += len,
            _ => runs.push((a, len)),
        }
    });
    if !dynamic {
        for &(a, l) in &runs {
            if a < peer.base || a + l > peer.base + peer.size {
                return Err(err(
                    ErrorClass::RmaRange,
                    format!("access of {l} bytes at displacement {disp} lies outside the target's window of {} bytes", peer.size),
                ));
            }
        }
    }
    Ok(Target { peer, runs, ty: ty.clone(), count: count as usize })
}

/// Check that the window has an epoch open towards `rank`.
fn check_epoch(w: &Win, rank: c_int) -> R<()> {
    // The rank first: a bad rank is MPI_ERR_RANK whatever the epoch.
    let r = usize::try_from(rank)
        .ok()
        .filter(|&r| r < w.peers.len())
        .ok_or_else(|| err(ErrorClass::Rank, format!("target rank {rank} is not in the window (size {})", w.peers.len())))?;
    if w.fence_epoch || w.lock_all || w.holds(r) || w.access.as_ref().is_some_and(|a| a.contains(&r)) {
        Ok(())
    } else {
        Err(err(ErrorClass::RmaSync, format!("no access epoch is open towards target {rank} (fence, start or lock first)")))
    }
}

fn types(origin: MPI_Datatype, target: MPI_Datatype) -> R<(TypeRef, TypeRef)> {
    g_locked(|g| Ok((dtype(g, origin as usize)?, dtype(g, target as usize)?)))
}

unsafe fn pack(ty: &TypeRef, addr: *const c_void, count: i64) -> R<Vec<u8>> {
    if count < 0 {
        return Err(err(ErrorClass::Count, format!("count {count} is negative")));
    }
    let mut buf = vec![0u8; ty.packed_size(count as usize)];
    ty.pack(addr as *const u8, count as usize, &mut buf);
    Ok(buf)
}

fn same_size(a: usize, b: usize) -> R<()> {
    if a == b {
        Ok(())
    } else {
        Err(err(ErrorClass::Type, format!("origin and target data differ in size ({a} and {b} bytes)")))
    }
}

/// The accumulate mutex of `peer` (a spin lock in the control segment).
fn acc_lock(w: &Win, target: usize) -> &AtomicU32 {
    // SAFETY: the control segment holds CTL_STRIDE bytes per member, suitably aligned.
    unsafe { &*((w.ctl.addr + target * CTL_STRIDE + 8) as *const AtomicU32) }
}

fn lock_word(w: &Win, target: usize) -> &AtomicU64 {
    // SAFETY: as for acc_lock.
    unsafe { &*((w.ctl.addr + target * CTL_STRIDE) as *const AtomicU64) }
}

fn spin_until(mut done: impl FnMut() -> bool) {
    let mut spins = 0u32;
    while !done() {
        spins += 1;
        if spins < 64 {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
}

fn with_acc_lock<T>(w: &Win, target: usize, f: impl FnOnce() -> R<T>) -> R<T> {
    let m = acc_lock(w, target);
    spin_until(|| m.compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed).is_ok());
    let r = f();
    m.store(0, Ordering::Release);
    r
}

/// Read the target's data into a buffer laid out like `count` elements of the target type
/// (`layout.1` is the address of element 0 inside `layout.0`).
unsafe fn read_laid_out(t: &Target) -> R<(Vec<u8>, usize)> {
    let span = if t.count == 0 { 0 } else { (t.count as isize - 1) * t.ty.extent + t.ty.true_extent };
    let mut lay = vec![0u8; span.max(0) as usize];
    let base = (lay.as_mut_ptr() as usize).wrapping_add_signed(-t.ty.true_lb);
    let mut packed = vec![0u8; t.ty.packed_size(t.count)];
    xfer(&t.peer, false, &t.runs, packed.as_mut_ptr())?;
    t.ty.unpack(&packed, base as *mut u8, t.count);
    Ok((lay, base))
}

unsafe fn write_laid_out(t: &Target, base: usize) -> R<()> {
    let mut packed = vec![0u8; t.ty.packed_size(t.count)];
    t.ty.pack(base as *const u8, t.count, &mut packed);
    xfer(&t.peer, true, &t.runs, packed.as_mut_ptr())
}

fn check_acc_op(op: MPI_Op) -> R<()> {
    if crate::op::predef_op(op as usize).is_none() {
        return Err(err(ErrorClass::Op, "one-sided accumulates take predefined operations only"));
    }
    Ok(())
}

/// Accumulate `origin` (packed, in the target type's signature) into the target with `op`;
/// the target's previous contents go to `result` (packed) when asked for.
unsafe fn accumulate(w: &Win, t: &Target, target_dt: MPI_Datatype, op: MPI_Op, origin: Option<&[u8]>, result: Option<&mut Vec<u8>>) -> R<()> {
    check_acc_op(op)?;
    if t.count == 0 || t.ty.size == 0 {
        if let Some(res) = result {
            res.clear();
        }
        return Ok(());
    }
    let red: Reduction = g_locked(|g| crate::op::reduction(g, op, target_dt))?;
    let target_rank = w.peers.iter().position(|p| p.pid == t.peer.pid && p.base == t.peer.base).unwrap_or(0);
    with_acc_lock(w, target_rank, || {
        if t.peer.local && t.ty.is_contiguous() && t.runs.len() == 1 {
            // Mapped memory: reduce in place, with no copies of the target's data.
            let at = t.runs[0].0 as *mut u8;
            if let Some(res) = result {
                res.clear();
                res.extend_from_slice(std::slice::from_raw_parts(at, t.runs[0].1));
            }
            if let Some(origin) = origin.filter(|_| op as usize != abi::MPI_NO_OP) {
                note_write();
                red.apply(origin.as_ptr(), at, t.count);
            }
            return Ok(());
        }
        if t.ty.is_contiguous() {
            // Packed data and the target's layout are the same: reduce in one buffer, with
            // no unpacking and packing around it (large accumulates spent most of their
            // time copying).
            let n = t.ty.packed_size(t.count);
            let mut cur: Vec<u8> = Vec::with_capacity(n);
            xfer(&t.peer, false, &t.runs, cur.as_mut_ptr())?;
            // SAFETY: xfer filled all n bytes (it fails otherwise).
            cur.set_len(n);
            if let Some(res) = result {
                res.clear();
                res.extend_from_slice(&cur);
            }
            let Some(origin) = origin else { return Ok(()) };
            if op as usize == abi::MPI_NO_OP {
                return Ok(());
            }
            red.apply(origin.as_ptr(), cur.as_mut_ptr(), t.count);
            return xfer(&t.peer, true, &t.runs, cur.as_mut_ptr());
        }
        let (mut lay, base) = read_laid_out(t)?;
        if let Some(res) = result {
            *res = vec![0u8; t.ty.packed_size(t.count)];
            t.ty.pack(base as *const u8, t.count, res);
        }
        let Some(origin) = origin else { return Ok(()) };
        if op as usize == abi::MPI_NO_OP {
            return Ok(());
        }
        let mut src = vec![0u8; lay.len()];
        let sbase = (src.as_mut_ptr() as usize).wrapping_add_signed(-t.ty.true_lb);
        t.ty.unpack(origin, sbase as *mut u8, t.count);
        red.apply(sbase as *const u8, base as *mut u8, t.count);
        let _ = &mut lay;
        write_laid_out(t, base)
    })
}

// ---- entry points: construction -------------------------------------------------------------

unsafe fn create(func: &str, base: *mut c_void, size: MPI_Aint, disp_unit: c_int, info: MPI_Info, comm: MPI_Comm, win: *mut MPI_Win) -> c_int {
    let r = (|| -> R<()> {
        out_win(win)?;
        let (h, _) = build(comm, abi::MPI_WIN_FLAVOR_CREATE, size, disp_unit, info, base as usize)?;
        *win = h;
        Ok(())
    })();
    comm_result(func, comm, r)
}

unsafe fn allocate(func: &str, flavor: c_int, size: MPI_Aint, disp_unit: c_int, info: MPI_Info, comm: MPI_Comm, baseptr: *mut c_void, win: *mut MPI_Win) -> c_int {
    let r = (|| -> R<()> {
        out_win(win)?;
        if baseptr.is_null() {
            return Err(err(ErrorClass::Arg, "baseptr is NULL"));
        }
        let (h, base) = build(comm, flavor, size, disp_unit, info, 0)?;
        *(baseptr as *mut *mut c_void) = base as *mut c_void;
        *win = h;
        Ok(())
    })();
    comm_result(func, comm, r)
}

/// Window constructors report errors on the communicator, as the standard says.
fn comm_result(func: &str, comm: MPI_Comm, r: R<()>) -> c_int {
    live_check(func);
    match r {
        Ok(()) => abi::MPI_SUCCESS,
        Err(e) => global::api(func, Some(comm as usize), |_| Err(e)),
    }
}

fn count_of(c: MPI_Count) -> i64 {
    c
}

mpi_api! {
    fn Win_create(base: *mut c_void, size: MPI_Aint, disp_unit: c_int, info: MPI_Info, comm: MPI_Comm, win: *mut MPI_Win) -> c_int {
        create("MPI_Win_create", base, size, disp_unit, info, comm, win)
    }
    fn Win_create_c(base: *mut c_void, size: MPI_Aint, disp_unit: MPI_Aint, info: MPI_Info, comm: MPI_Comm, win: *mut MPI_Win) -> c_int {
        let du = c_int::try_from(disp_unit).unwrap_or(-1);
        create("MPI_Win_create_c", base, size, du, info, comm, win)
    }
    fn Win_allocate(size: MPI_Aint, disp_unit: c_int, info: MPI_Info, comm: MPI_Comm, baseptr: *mut c_void, win: *mut MPI_Win) -> c_int {
        allocate("MPI_Win_allocate", abi::MPI_WIN_FLAVOR_ALLOCATE, size, disp_unit, info, comm, baseptr, win)
    }
    fn Win_allocate_c(size: MPI_Aint, disp_unit: MPI_Aint, info: MPI_Info, comm: MPI_Comm, baseptr: *mut c_void, win: *mut MPI_Win) -> c_int {
        let du = c_int::try_from(disp_unit).unwrap_or(-1);
        allocate("MPI_Win_allocate_c", abi::MPI_WIN_FLAVOR_ALLOCATE, size, du, info, comm, baseptr, win)
    }
    fn Win_allocate_shared(size: MPI_Aint, disp_unit: c_int, info: MPI_Info, comm: MPI_Comm, baseptr: *mut c_void, win: *mut MPI_Win) -> c_int {
        allocate("MPI_Win_allocate_shared", abi::MPI_WIN_FLAVOR_SHARED, size, disp_unit, info, comm, baseptr, win)
    }
    fn Win_allocate_shared_c(size: MPI_Aint, disp_unit: MPI_Aint, info: MPI_Info, comm: MPI_Comm, baseptr: *mut c_void, win: *mut MPI_Win) -> c_int {
        let du = c_int::try_from(disp_unit).unwrap_or(-1);
        allocate("MPI_Win_allocate_shared_c", abi::MPI_WIN_FLAVOR_SHARED, size, du, info, comm, baseptr, win)
    }
    fn Win_create_dynamic(info: MPI_Info, comm: MPI_Comm, win: *mut MPI_Win) -> c_int {
        let r = (|| -> R<()> {
            out_win(win)?;
            let (h, _) = build(comm, abi::MPI_WIN_FLAVOR_DYNAMIC, 0, 1, info, 0)?;
            *win = h;
            Ok(())
        })();
        comm_result("MPI_Win_create_dynamic", comm, r)
    }

    fn Win_free(win: *mut MPI_Win) -> c_int {
        if win.is_null() {
            return raise("MPI_Win_free", abi::MPI_WIN_NULL as MPI_Win, err(ErrorClass::Arg, "win pointer is NULL"));
        }
        let w = *win;
        let rc = win_api("MPI_Win_free", w, || {
            let comm = with_win(w, |x| {
                if x.any_lock() || x.lock_all || x.access.is_some() || x.exposure.is_some() {
                    return Err(err(ErrorClass::RmaSync, "the window still has an open epoch (unlock, complete or wait first)"));
                }
                Ok(x.comm)
            })?;
            // Every member's operations on this window are done once all have arrived.
            check_rc("MPI_Barrier on the window communicator", crate::comm::PMPI_Barrier(comm))?;
            crate::attr::delete_win_attrs(w as usize).map_err(|_| err(ErrorClass::Other, "an attribute delete callback failed"))?;
            let x = wins().as_mut().and_then(|m| m.remove(&(w as usize)));
            if let Some(mut x) = x {
                x.fast.freed.store(true, Ordering::Relaxed);
                if x.fast.mail.is_some() {
                    crate::rma_net::withdraw_mail(w as u64);
                }
                if let Some(mut n) = x.net.take() {
                    // After the barrier no request is on its way here.
                    crate::rma_net::withdraw(n.h);
                    crate::comm::PMPI_Comm_free(&mut n.comm);
                }
                g_locked(|g| {
                    crate::errhandler::release(g, x.errhandler);
                    Ok(())
                })?;
                crate::comm::PMPI_Comm_free(&mut x.comm);
            }
            Ok(())
        });
        if rc == abi::MPI_SUCCESS {
            *win = abi::MPI_WIN_NULL as MPI_Win;
        }
        rc
    }

    fn Win_attach(win: MPI_Win, base: *mut c_void, size: MPI_Aint) -> c_int {
        win_api("MPI_Win_attach", win, || with_win(win, |w| {
            if w.flavor != abi::MPI_WIN_FLAVOR_DYNAMIC {
                return Err(err(ErrorClass::RmaFlavor, "memory can be attached to dynamic windows only"));
            }
            if size < 0 || (base.is_null() && size > 0) {
                return Err(err(ErrorClass::RmaAttach, format!("cannot attach {size} bytes at {base:p}")));
            }
            let (b, s) = (base as usize, size as usize);
            if w.attached.iter().any(|&(a, l)| b < a + l && a < b + s) {
                return Err(err(ErrorClass::RmaAttach, "the memory overlaps memory already attached"));
            }
            if let Some(n) = &w.net {
                crate::rma_net::attach(n.h, (b, s), true)?;
            }
            w.attached.push((b, s));
            Ok(())
        }))
    }

    fn Win_detach(win: MPI_Win, base: *const c_void) -> c_int {
        win_api("MPI_Win_detach", win, || with_win(win, |w| {
            if w.flavor != abi::MPI_WIN_FLAVOR_DYNAMIC {
                return Err(err(ErrorClass::RmaFlavor, "memory can be detached from dynamic windows only"));
            }
            let i = w.attached.iter().position(|&(a, _)| a == base as usize)
                .ok_or_else(|| err(ErrorClass::RmaAttach, format!("no memory is attached at {base:p}")))?;
            let region = w.attached.remove(i);
            if let Some(n) = &w.net {
                crate::rma_net::attach(n.h, region, false)?;
            }
            Ok(())
        }))
    }

    fn Win_shared_query(win: MPI_Win, rank: c_int, size: *mut MPI_Aint, disp_unit: *mut c_int, baseptr: *mut c_void) -> c_int {
        win_api("MPI_Win_shared_query", win, || {
            let (s, d, b) = shared_query(win, rank)?;
            if size.is_null() || disp_unit.is_null() || baseptr.is_null() {
                return Err(err(ErrorClass::Arg, "size, disp_unit or baseptr is NULL"));
            }
            *size = s;
            *disp_unit = d as c_int;
            *(baseptr as *mut *mut c_void) = b as *mut c_void;
            Ok(())
        })
    }

    fn Win_shared_query_c(win: MPI_Win, rank: c_int, size: *mut MPI_Aint, disp_unit: *mut MPI_Aint, baseptr: *mut c_void) -> c_int {
        win_api("MPI_Win_shared_query_c", win, || {
            let (s, d, b) = shared_query(win, rank)?;
            if size.is_null() || disp_unit.is_null() || baseptr.is_null() {
                return Err(err(ErrorClass::Arg, "size, disp_unit or baseptr is NULL"));
            }
            *size = s;
            *disp_unit = d as MPI_Aint;
            *(baseptr as *mut *mut c_void) = b as *mut c_void;
            Ok(())
        })
    }
}

fn shared_query(win: MPI_Win, rank: c_int) -> R<(MPI_Aint, usize, usize)> {
    with_win(win, |w| {
        // Memory of a window spanning hosts is each member's own.
        let shared = w.net.is_none() && (w.flavor == abi::MPI_WIN_FLAVOR_SHARED || w.flavor == abi::MPI_WIN_FLAVOR_ALLOCATE);
        if !shared {
            // The application's own memory is not shared: size 0 and a NULL base (MPI 4.1).
            if rank != abi::MPI_PROC_NULL && usize::try_from(rank).ok().filter(|&r| r < w.peers.len()).is_none() {
                return Err(err(ErrorClass::Rank, format!("rank {rank} is not in the window")));
            }
            return Ok((0, 1, 0));
        }
        let p = if rank == abi::MPI_PROC_NULL {
            // The first member with memory, or member 0's (empty) part.
            w.peers.iter().find(|p| p.size > 0).unwrap_or(&w.peers[0])
        } else {
            usize::try_from(rank).ok().and_then(|r| w.peers.get(r)).ok_or_else(|| err(ErrorClass::Rank, format!("rank {rank} is not in the window")))?
        };
        // A member without memory has no base address.
        Ok((p.size as MPI_Aint, p.disp_unit, if p.size == 0 { 0 } else { p.base }))
    })
}

/// Per predefined datatype handle: 0 not looked up yet, NOT_CONTIGUOUS, or 1 + the size of
/// an element of a contiguous type. Predefined types never change, so once filled a put or
/// get of them needs no library lock to learn its byte count.
static PREDEF_BYTES: [AtomicU32; abi::PREDEFINED_HANDLE_MAX_ASSIGNED + 1] = [const { AtomicU32::new(0) }; abi::PREDEFINED_HANDLE_MAX_ASSIGNED + 1];
const NOT_CONTIGUOUS: u32 = u32::MAX;

/// Element size of a contiguous predefined datatype from PREDEF_BYTES, None when the handle
/// is not one or its entry is not filled.
fn predefined_bytes(t: MPI_Datatype) -> Option<usize> {
    let v = PREDEF_BYTES.get(t as usize)?.load(Ordering::Relaxed);
    (v != 0 && v != NOT_CONTIGUOUS).then(|| v as usize - 1)
}

/// Element size of a contiguous predefined datatype, filling its PREDEF_BYTES entry (under
/// the library lock) the first time; None when `t` is not a contiguous predefined type.
fn predefined_bytes_filled(t: MPI_Datatype) -> Option<usize> {
    predefined_bytes(t).or_else(|| fill_predefined(t))
}

#[cold]
fn fill_predefined(t: MPI_Datatype) -> Option<usize> {
    let slot = PREDEF_BYTES.get(t as usize).filter(|_| abi::is_predefined_handle(t as usize))?;
    if slot.load(Ordering::Relaxed) == 0 {
        let guard = lock();
        let g = guard.as_ref()?;
        let v = crate::pt2pt::contiguous_bytes(g, t, 1).and_then(|n| u32::try_from(n).ok()).map_or(NOT_CONTIGUOUS, |n| n + 1);
        slot.store(v, Ordering::Relaxed);
    }
    predefined_bytes(t)
}

/// Bytes of the origin and of the target data when both datatypes are committed and
/// contiguous, looked up without taking references to them; None otherwise.
fn contiguous_pair(otype: MPI_Datatype, ocount: i64, ttype: MPI_Datatype, tcount: i64) -> Option<(usize, usize)> {
    if ocount < 0 || tcount < 0 {
        return None;
    }
    if let (Some(o), Some(t)) = (predefined_bytes(otype), predefined_bytes(ttype)) {
        return Some((o.checked_mul(ocount as usize)?, t.checked_mul(tcount as usize)?));
    }
    for t in [otype, ttype] {
        fill_predefined(t);
    }
    let guard = lock();
    let g = guard.as_ref()?;
    Some((crate::pt2pt::contiguous_bytes(g, otype, ocount)?, crate::pt2pt::contiguous_bytes(g, ttype, tcount)?))
}

/// A put (`write`) or get of contiguous data at a member of this host, in an open epoch and
/// inside its window: one copy between `buf` and the target's memory, with no packed
/// buffer and no byte-run list. Ok(false) leaves the operation to the general path, which
/// also reports every error.
unsafe fn direct(win: MPI_Win, rank: c_int, disp: MPI_Aint, buf: *mut u8, len: usize, write: bool) -> R<bool> {
    with_fast(win, |f| {
        let Some(r) = usize::try_from(rank).ok() else { return Ok(false) };
        let (Some(peer), Some(open)) = (f.peers.get(r), f.open.get(r)) else { return Ok(false) };
        if peer.remote || f.dynamic || disp < 0 || !open.load(Ordering::Relaxed) {
            return Ok(false);
        }
        let Some(start) = (disp as usize).checked_mul(peer.disp_unit).and_then(|o| peer.base.checked_add(o)) else { return Ok(false) };
        if start.checked_add(len).is_none_or(|end| end > peer.base + peer.size) {
            return Ok(false);
        }
        if len == 0 {
            return Ok(true);
        }
        if !peer.local && len <= STAGE_MAX && f.stage_ok.load(Ordering::Relaxed) && f.stage_transfer(r, start, buf, len, write) {
            return Ok(true);
        }
        if let (false, Some(m)) = (peer.local, &f.mail) {
            // Lock epochs, and fence epochs for what is too large to stage (fence drains).
            let epoch = f.locked[r].load(Ordering::Relaxed) || f.stage_ok.load(Ordering::Relaxed);
            if epoch && m.transfer(r, peer.pid, start, buf, len, write, &cma_move)? {
                return Ok(true);
            }
        }
        xfer(peer, write, &[(start, len)], buf)?;
        Ok(true)
    })
    .unwrap_or(Ok(false))
}

/// This thread's cached window when it is live window `win`, with the address of `len` bytes
/// at displacement `disp` of member `rank`, when this process maps that member's memory, an
/// epoch is open towards it and the bytes lie inside its window; None otherwise (the general
/// paths then decide, and report errors).
#[inline(always)]
fn mapped_target(c: &ThreadCache, win: MPI_Win, rank: c_int, disp: MPI_Aint, len: usize) -> Option<(&Fast, usize, usize)> {
    let cached = c.fast.get();
    if cached.is_null() || disp < 0 {
        return None;
    }
    // SAFETY: the cache owns a strong count of the Arc it points to (the thread-local
    // outlives this borrow).
    let f = unsafe { &*cached };
    if f.id != win as usize || f.freed.load(Ordering::Relaxed) || f.dynamic {
        return None;
    }
    let r = usize::try_from(rank).ok()?;
    let (peer, open) = (f.peers.get(r)?, f.open.get(r)?);
    if !peer.local || !open.load(Ordering::Relaxed) {
        return None;
    }
    let start = (disp as usize).checked_mul(peer.disp_unit).and_then(|o| peer.base.checked_add(o))?;
    if start.checked_add(len).is_none_or(|end| end > peer.base + peer.size) {
        return None;
    }
    Some((f, r, start))
}

/// The common put or get, inlined into MPI_Put and MPI_Get: predefined contiguous types of
/// equal size, to the thread's last window, to a member whose memory this process maps, in
/// an open epoch and inside its window: checks on plain loads and one copy. False leaves
/// the call to `put` / `get` (which also report every error). The general path's frame,
/// and passing it the call's arguments, were a third of a small put's time.
#[inline(always)]
unsafe fn mapped_fast(win: MPI_Win, rank: c_int, disp: MPI_Aint, buf: *mut u8, ocount: i64, otype: MPI_Datatype, tcount: i64, ttype: MPI_Datatype, write: bool) -> bool {
    if PHASE.load(Ordering::Acquire) != PHASE_LIVE || ocount < 0 || tcount < 0 {
        return false;
    }
    let (Some(o), Some(t)) = (predefined_bytes(otype), predefined_bytes(ttype)) else { return false };
    let (Some(len), Some(tlen)) = (o.checked_mul(ocount as usize), t.checked_mul(tcount as usize)) else { return false };
    if len != tlen {
        return false;
    }
    CACHE.with(|c| {
        let Some((_, _, start)) = mapped_target(c, win, rank, disp, len) else { return false };
        let (from, to) = if write { (buf as *const u8, start as *mut u8) } else { (start as *const u8, buf) };
        if write {
            c.wrote.set(true);
        }
        // A member may put into or get from its own part: the areas may overlap, and
        // `copy::copy` is for areas apart (asked only at its sizes: small copies are most
        // of what a small put costs).
        let wide = len >= steadfast_paths::copy::WIDE_MIN && ((buf as usize).checked_add(len).is_some_and(|e| e <= start) || start + len <= buf as usize);
        // SAFETY: the target range lies inside the member's mapped window memory; the
        // origin buffer is the application's, of `len` bytes.
        unsafe {
            if wide {
                steadfast_paths::copy::copy(from, to, len);
            } else {
                std::ptr::copy(from, to, len);
            }
        }
        true
    })
}

/// Whether MPI_Compare_and_swap takes `t`: a predefined C or Fortran integer, logical,
/// multi-language (MPI_AINT, MPI_OFFSET, MPI_COUNT) or byte type, as the standard lists;
/// not a floating-point, complex or derived one.
fn cas_type_ok(t: MPI_Datatype) -> bool {
    match crate::op::predef_elem(t as usize) {
        Some(Elem::Num(n)) => !n.is_float(),
        Some(Elem::Bool(_) | Elem::Byte) => true,
        _ => false,
    }
}

/// What an accumulate-class call does at the target.
#[derive(Clone, Copy)]
enum AccKind {
    /// `target = origin op target` (MPI_Accumulate, Get_accumulate, Fetch_and_op), the old
    /// contents to `result` when not null.
    Reduce(PredefOp),
    /// MPI_Compare_and_swap: `origin` replaces the target when the target equals `compare`.
    Swap { compare: *const u8 },
}

/// The common accumulate-class call, inlined into its entry points: `count` elements of one
/// predefined contiguous datatype (origin, target and result alike) with a predefined
/// operation it supports, to a member whose memory this process maps, in an open epoch and
/// inside its window. It takes the target's accumulate mutex as the general path does (so
/// every accumulate on that target stays atomic with respect to this one) and works on the
/// mapped memory in place: no library lock, no datatype reference, no packed buffer. The
/// general path's lookups and allocations were most of a fetch_and_op's time. False leaves
/// the call to the general path (which also reports every error).
#[inline(always)]
unsafe fn acc_fast(win: MPI_Win, rank: c_int, disp: MPI_Aint, origin: *const u8, result: *mut u8, count: i64, dtype: MPI_Datatype, kind: AccKind) -> bool {
    if PHASE.load(Ordering::Acquire) != PHASE_LIVE || count <= 0 {
        return false;
    }
    let Some(esize) = predefined_bytes_filled(dtype) else { return false };
    let Some(len) = esize.checked_mul(count as usize) else { return false };
    let elem = match kind {
        AccKind::Reduce(op) => match crate::op::predef_elem(dtype as usize) {
            Some(e) if e != Elem::None && op.supports(e) && e.size() == esize => Some(e),
            _ => return false,
        },
        AccKind::Swap { .. } => None,
    };
    CACHE.with(|c| {
        let Some((f, r, start)) = mapped_target(c, win, rank, disp, len) else { return false };
        let at = start as *mut u8;
        // SAFETY: the control segment holds CTL_STRIDE bytes per member and stays mapped
        // while the window lives; the mutex is the word after the lock word (`acc_lock`).
        let m = unsafe { &*((f.ctl + r * CTL_STRIDE + 8) as *const AtomicU32) };
        spin_until(|| m.compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed).is_ok());
        // SAFETY (the copies and the reduction): `at` is `len` bytes of the member's mapped
        // window memory; origin, compare and result are the application's buffers of
        // `count` elements of `dtype`. A member may target its own part, hence `copy`.
        unsafe {
            if !result.is_null() {
                std::ptr::copy(at, result, len);
            }
            match (kind, elem) {
                (AccKind::Reduce(PredefOp::NoOp), _) => {}
                (AccKind::Reduce(PredefOp::Replace), _) => {
                    c.wrote.set(true);
                    std::ptr::copy(origin, at, len);
                }
                (AccKind::Reduce(op), Some(e)) => {
                    c.wrote.set(true);
                    steadfast_core::op::apply_dense(op, e, origin, at, count as usize);
                }
                (AccKind::Reduce(_), None) => {}
                (AccKind::Swap { compare }, _) => {
                    let (cur, cmp) = (std::slice::from_raw_parts(at as *const u8, len), std::slice::from_raw_parts(compare, len));
                    if cur == cmp {
                        c.wrote.set(true);
                        std::ptr::copy(origin, at, len);
                    }
                }
            }
        }
        m.store(0, Ordering::Release);
        true
    })
}

// ---- entry points: communication ------------------------------------------------------------

#[inline(never)]
unsafe fn put(func: &str, origin: *const c_void, ocount: i64, otype: MPI_Datatype, rank: c_int, disp: MPI_Aint, tcount: i64, ttype: MPI_Datatype, win: MPI_Win) -> c_int {
    win_api(func, win, || {
        if rank == abi::MPI_PROC_NULL {
            return Ok(());
        }
        if let Some((olen, tlen)) = contiguous_pair(otype, ocount, ttype, tcount) {
            if olen == tlen && direct(win, rank, disp, origin as *mut u8, olen, true)? {
                crate::rma_net::progress_if_serving();
                return Ok(());
            }
        }
        let (ot, tt) = types(otype, ttype)?;
        let mut data = pack(&ot, origin, ocount)?;
        let net = with_win(win, |w| {
            check_epoch(w, rank)?;
            let t = target_of(w, rank, disp, tcount, &tt)?;
            same_size(data.len(), tt.packed_size(t.count))?;
            if let Some(n) = remote(w, &t, rank, true) {
                return Ok(Some((n, t.runs)));
            }
            xfer(&t.peer, true, &t.runs, data.as_mut_ptr()).map(|()| None)
        })?;
        let Some((comm, runs)) = net else {
            crate::rma_net::progress_if_serving();
            return Ok(());
        };
        let asks = crate::rma_net::pieces(&runs, 1)
            .into_iter()
            .map(|(r, a, b)| Ask { kind: Kind::Put, exclusive: false, elem: Elem::Byte, op: 0, runs: r, data: vec![&data[a..b]], answer: None })
            .collect();
        crate::rma_net::exchange(comm, rank, asks).map(|_| ())
    })
}

/// The network path to `t`, when it is on another host: the request communicator, with
/// the target marked as written to (`write`) until its next flush.
fn remote(w: &mut Win, t: &Target, rank: c_int, write: bool) -> Option<Handle> {
    if !t.peer.remote {
        return None;
    }
    let n = w.net.as_mut()?;
    if write {
        n.dirty.insert(rank as usize);
    }
    Some(n.h)
}

#[inline(never)]
unsafe fn get(func: &str, origin: *mut c_void, ocount: i64, otype: MPI_Datatype, rank: c_int, disp: MPI_Aint, tcount: i64, ttype: MPI_Datatype, win: MPI_Win) -> c_int {
    win_api(func, win, || {
        if rank == abi::MPI_PROC_NULL {
            return Ok(());
        }
        if let Some((olen, tlen)) = contiguous_pair(otype, ocount, ttype, tcount) {
            if olen == tlen && direct(win, rank, disp, origin as *mut u8, olen, false)? {
                crate::rma_net::progress_if_serving();
                return Ok(());
            }
        }
        let (ot, tt) = types(otype, ttype)?;
        if ocount < 0 {
            return Err(err(ErrorClass::Count, format!("count {ocount} is negative")));
        }
        let (mut data, net) = with_win(win, |w| {
            check_epoch(w, rank)?;
            let t = target_of(w, rank, disp, tcount, &tt)?;
            let mut data = vec![0u8; tt.packed_size(t.count)];
            same_size(ot.packed_size(ocount as usize), data.len())?;
            if let Some(n) = remote(w, &t, rank, false) {
                return Ok((data, Some((n, t.runs))));
            }
            xfer(&t.peer, false, &t.runs, data.as_mut_ptr())?;
            Ok((data, None))
        })?;
        if net.is_none() {
            crate::rma_net::progress_if_serving();
        }
        if let Some((comm, runs)) = net {
            let parts = crate::rma_net::pieces(&runs, 1);
            let asks = parts
                .iter()
                .map(|(r, a, b)| Ask { kind: Kind::Get, exclusive: false, elem: Elem::Byte, op: 0, runs: r.clone(), data: Vec::new(), answer: Some(b - a) })
                .collect();
            let got = crate::rma_net::exchange(comm, rank, asks)?;
            for ((_, a, b), piece) in parts.iter().zip(got) {
                if piece.len() != b - a {
                    return Err(err(ErrorClass::Intern, format!("target {rank} answered {} bytes for {}", piece.len(), b - a)));
                }
                data[*a..*b].copy_from_slice(&piece);
            }
        }
        ot.unpack(&data, origin as *mut u8, ocount as usize);
        data.clear();
        Ok(())
    })
}

unsafe fn acc(func: &str, origin: *const c_void, ocount: i64, otype: MPI_Datatype, rank: c_int, disp: MPI_Aint, tcount: i64, ttype: MPI_Datatype, op: MPI_Op, win: MPI_Win) -> c_int {
    win_api(func, win, || {
        if rank == abi::MPI_PROC_NULL {
            return Ok(());
        }
        let (ot, tt) = types(otype, ttype)?;
        let data = pack(&ot, origin, ocount)?;
        let net = with_win(win, |w| {
            check_epoch(w, rank)?;
            let t = target_of(w, rank, disp, tcount, &tt)?;
            same_size(data.len(), tt.packed_size(t.count))?;
            if let Some(n) = remote(w, &t, rank, true) {
                return Ok(Some((n, t.runs)));
            }
            accumulate(w, &t, ttype, op, Some(&data), None).map(|()| None)
        })?;
        let Some((comm, runs)) = net else {
            crate::rma_net::progress_if_serving();
            return Ok(());
        };
        accumulate_net(comm, rank, &runs, ttype, op, Some(&data), None)
    })
}

/// An accumulate-class operation on a target of another host, applied there by its target
/// service (atomic per element: see `rma_net`); the target's previous contents go to
/// `result` (packed) when asked for.
fn accumulate_net(comm: Handle, rank: c_int, runs: &[(usize, usize)], target_dt: MPI_Datatype, op: MPI_Op, origin: Option<&[u8]>, result: Option<&mut Vec<u8>>) -> R<()> {
    check_acc_op(op)?;
    if runs.iter().all(|r| r.1 == 0) {
        // No data (a zero count or a zero-size type): nothing to reduce, whatever the type,
        // as on the target's own host.
        if let Some(res) = result {
            res.clear();
        }
        return Ok(());
    }
    let red: Reduction = g_locked(|g| crate::op::reduction(g, op, target_dt))?;
    let elem = red.elem;
    let parts = crate::rma_net::pieces(runs, elem.size());
    let kind = if result.is_some() { Kind::GetAcc } else { Kind::Acc };
    let asks = parts
        .iter()
        .map(|(r, a, b)| Ask {
            kind,
            exclusive: false,
            elem,
            op: op as u64,
            runs: r.clone(),
            data: origin.map(|d| vec![&d[*a..*b]]).unwrap_or_default(),
            answer: result.is_some().then_some(b - a),
        })
        .collect();
    let got = crate::rma_net::exchange(comm, rank, asks)?;
    if let Some(res) = result {
        res.clear();
        for ((_, a, b), piece) in parts.iter().zip(got) {
            if piece.len() != b - a {
                return Err(err(ErrorClass::Intern, format!("target {rank} answered {} bytes for {}", piece.len(), b - a)));
            }
            res.extend_from_slice(&piece);
        }
    }
    Ok(())
}

unsafe fn get_acc(
    func: &str, origin: *const c_void, ocount: i64, otype: MPI_Datatype, result: *mut c_void, rcount: i64, rtype: MPI_Datatype, rank: c_int,
    disp: MPI_Aint, tcount: i64, ttype: MPI_Datatype, op: MPI_Op, win: MPI_Win,
) -> c_int {
    win_api(func, win, || {
        if rank == abi::MPI_PROC_NULL {
            return Ok(());
        }
        let (rt, tt) = types(rtype, ttype)?;
        let data = if op as usize == abi::MPI_NO_OP {
            None
        } else {
            let ot = types(otype, ttype)?.0;
            Some(pack(&ot, origin, ocount)?)
        };
        if rcount < 0 {
            return Err(err(ErrorClass::Count, format!("result count {rcount} is negative")));
        }
        let mut res = Vec::new();
        let net = with_win(win, |w| {
            check_epoch(w, rank)?;
            let t = target_of(w, rank, disp, tcount, &tt)?;
            if let Some(d) = &data {
                same_size(d.len(), tt.packed_size(t.count))?;
            }
            same_size(rt.packed_size(rcount as usize), tt.packed_size(t.count))?;
            if let Some(n) = remote(w, &t, rank, false) {
                return Ok(Some((n, t.runs)));
            }
            accumulate(w, &t, ttype, op, data.as_deref(), Some(&mut res)).map(|()| None)
        })?;
        match net {
            Some((comm, runs)) => accumulate_net(comm, rank, &runs, ttype, op, data.as_deref(), Some(&mut res))?,
            None => crate::rma_net::progress_if_serving(),
        }
        rt.unpack(&res, result as *mut u8, rcount as usize);
        Ok(())
    })
}

/// Request-based operations complete before they return, so their request is complete too.
unsafe fn complete_request(func: &str, win: MPI_Win, rc: c_int, request: *mut MPI_Request) -> c_int {
    if rc != abi::MPI_SUCCESS {
        return rc;
    }
    win_api(func, win, || {
        if request.is_null() {
            return Err(err(ErrorClass::Arg, "request pointer is NULL"));
        }
        let h = g_locked(|g| Ok(g.eng.completed_request()))?;
        *request = h.0 as MPI_Request;
        Ok(())
    })
}

mpi_api! {
    fn Put(origin_addr: *const c_void, origin_count: c_int, origin_datatype: MPI_Datatype, target_rank: c_int, target_disp: MPI_Aint,
           target_count: c_int, target_datatype: MPI_Datatype, win: MPI_Win) -> c_int {
        if mapped_fast(win, target_rank, target_disp, origin_addr as *mut u8, origin_count as i64, origin_datatype, target_count as i64, target_datatype, true) {
            crate::rma_net::progress_if_serving();
            return abi::MPI_SUCCESS;
        }
        put("MPI_Put", origin_addr, origin_count as i64, origin_datatype, target_rank, target_disp, target_count as i64, target_datatype, win)
    }
    fn Put_c(origin_addr: *const c_void, origin_count: MPI_Count, origin_datatype: MPI_Datatype, target_rank: c_int, target_disp: MPI_Aint,
             target_count: MPI_Count, target_datatype: MPI_Datatype, win: MPI_Win) -> c_int {
        put("MPI_Put_c", origin_addr, count_of(origin_count), origin_datatype, target_rank, target_disp, count_of(target_count), target_datatype, win)
    }
    fn Get(origin_addr: *mut c_void, origin_count: c_int, origin_datatype: MPI_Datatype, target_rank: c_int, target_disp: MPI_Aint,
           target_count: c_int, target_datatype: MPI_Datatype, win: MPI_Win) -> c_int {
        if mapped_fast(win, target_rank, target_disp, origin_addr as *mut u8, origin_count as i64, origin_datatype, target_count as i64, target_datatype, false) {
            crate::rma_net::progress_if_serving();
            return abi::MPI_SUCCESS;
        }
        get("MPI_Get", origin_addr, origin_count as i64, origin_datatype, target_rank, target_disp, target_count as i64, target_datatype, win)
    }
    fn Get_c(origin_addr: *mut c_void, origin_count: MPI_Count, origin_datatype: MPI_Datatype, target_rank: c_int, target_disp: MPI_Aint,
             target_count: MPI_Count, target_datatype: MPI_Datatype, win: MPI_Win) -> c_int {
        get("MPI_Get_c", origin_addr, count_of(origin_count), origin_datatype, target_rank, target_disp, count_of(target_count), target_datatype, win)
    }
    fn Accumulate(origin_addr: *const c_void, origin_count: c_int, origin_datatype: MPI_Datatype, target_rank: c_int, target_disp: MPI_Aint,
                  target_count: c_int, target_datatype: MPI_Datatype, op: MPI_Op, win: MPI_Win) -> c_int {
        if origin_datatype == target_datatype && origin_count == target_count {
            if let Some(p) = crate::op::predef_op(op as usize) {
                if acc_fast(win, target_rank, target_disp, origin_addr as *const u8, std::ptr::null_mut(), origin_count as i64, origin_datatype, AccKind::Reduce(p)) {
                    crate::rma_net::progress_if_serving();
                    return abi::MPI_SUCCESS;
                }
            }
        }
        acc("MPI_Accumulate", origin_addr, origin_count as i64, origin_datatype, target_rank, target_disp, target_count as i64, target_datatype, op, win)
    }
    fn Accumulate_c(origin_addr: *const c_void, origin_count: MPI_Count, origin_datatype: MPI_Datatype, target_rank: c_int, target_disp: MPI_Aint,
                    target_count: MPI_Count, target_datatype: MPI_Datatype, op: MPI_Op, win: MPI_Win) -> c_int {
        acc("MPI_Accumulate_c", origin_addr, origin_count, origin_datatype, target_rank, target_disp, target_count, target_datatype, op, win)
    }
    fn Get_accumulate(origin_addr: *const c_void, origin_count: c_int, origin_datatype: MPI_Datatype, result_addr: *mut c_void, result_count: c_int,
                      result_datatype: MPI_Datatype, target_rank: c_int, target_disp: MPI_Aint, target_count: c_int, target_datatype: MPI_Datatype,
                      op: MPI_Op, win: MPI_Win) -> c_int {
        // MPI_NO_OP ignores the origin's arguments.
        let same = result_datatype == target_datatype && result_count == target_count
            && (op as usize == abi::MPI_NO_OP || (origin_datatype == target_datatype && origin_count == target_count));
        if same && !result_addr.is_null() {
            if let Some(p) = crate::op::predef_op(op as usize) {
                if acc_fast(win, target_rank, target_disp, origin_addr as *const u8, result_addr as *mut u8, target_count as i64, target_datatype, AccKind::Reduce(p)) {
                    crate::rma_net::progress_if_serving();
                    return abi::MPI_SUCCESS;
                }
            }
        }
        get_acc("MPI_Get_accumulate", origin_addr, origin_count as i64, origin_datatype, result_addr, result_count as i64, result_datatype,
                target_rank, target_disp, target_count as i64, target_datatype, op, win)
    }
    fn Get_accumulate_c(origin_addr: *const c_void, origin_count: MPI_Count, origin_datatype: MPI_Datatype, result_addr: *mut c_void, result_count: MPI_Count,
                        result_datatype: MPI_Datatype, target_rank: c_int, target_disp: MPI_Aint, target_count: MPI_Count, target_datatype: MPI_Datatype,
                        op: MPI_Op, win: MPI_Win) -> c_int {
        get_acc("MPI_Get_accumulate_c", origin_addr, origin_count, origin_datatype, result_addr, result_count, result_datatype,
                target_rank, target_disp, target_count, target_datatype, op, win)
    }
    fn Fetch_and_op(origin_addr: *const c_void, result_addr: *mut c_void, datatype: MPI_Datatype, target_rank: c_int, target_disp: MPI_Aint,
                    op: MPI_Op, win: MPI_Win) -> c_int {
        if !result_addr.is_null() {
            if let Some(p) = crate::op::predef_op(op as usize) {
                if acc_fast(win, target_rank, target_disp, origin_addr as *const u8, result_addr as *mut u8, 1, datatype, AccKind::Reduce(p)) {
                    crate::rma_net::progress_if_serving();
                    return abi::MPI_SUCCESS;
                }
            }
        }
        get_acc("MPI_Fetch_and_op", origin_addr, 1, datatype, result_addr, 1, datatype, target_rank, target_disp, 1, datatype, op, win)
    }
    fn Compare_and_swap(origin_addr: *const c_void, compare_addr: *const c_void, result_addr: *mut c_void, datatype: MPI_Datatype,
                        target_rank: c_int, target_disp: MPI_Aint, win: MPI_Win) -> c_int {
        if !result_addr.is_null() && !compare_addr.is_null() && !origin_addr.is_null()
            && cas_type_ok(datatype)
            && acc_fast(win, target_rank, target_disp, origin_addr as *const u8, result_addr as *mut u8, 1, datatype, AccKind::Swap { compare: compare_addr as *const u8 })
        {
            crate::rma_net::progress_if_serving();
            return abi::MPI_SUCCESS;
        }
        win_api("MPI_Compare_and_swap", win, || {
            if target_rank == abi::MPI_PROC_NULL {
                return Ok(());
            }
            let t = types(datatype, datatype)?.0;
            if !cas_type_ok(datatype) {
                return Err(err(ErrorClass::Type, format!("compare-and-swap takes a predefined integer, logical or byte datatype, not {}", t.name)));
            }
            let n = t.size;
            let new = std::slice::from_raw_parts(origin_addr as *const u8, n).to_vec();
            let cmp = std::slice::from_raw_parts(compare_addr as *const u8, n).to_vec();
            let old = with_win(win, |w| {
                check_epoch(w, target_rank)?;
                let tg = target_of(w, target_rank, target_disp, 1, &t)?;
                if let Some(comm) = remote(w, &tg, target_rank, false) {
                    let ask = Ask { kind: Kind::Cas, exclusive: false, elem: Elem::Byte, op: 0, runs: tg.runs.clone(), data: vec![&new, &cmp], answer: Some(n) };
                    return Ok(Err((comm, ask)));
                }
                with_acc_lock(w, target_rank as usize, || {
                    let mut old = vec![0u8; n];
                    xfer(&tg.peer, false, &tg.runs, old.as_mut_ptr())?;
                    if old == cmp {
                        let mut v = new.clone();
                        xfer(&tg.peer, true, &tg.runs, v.as_mut_ptr())?;
                    }
                    Ok(Ok(old))
                })
            })?;
            let old = match old {
                Ok(old) => {
                    crate::rma_net::progress_if_serving();
                    old
                }
                Err((comm, ask)) => crate::rma_net::exchange(comm, target_rank, vec![ask])?.pop().unwrap_or_default(),
            };
            if old.len() != n {
                return Err(err(ErrorClass::Intern, format!("target {target_rank} answered {} bytes for {n}", old.len())));
            }
            std::ptr::copy_nonoverlapping(old.as_ptr(), result_addr as *mut u8, n);
            Ok(())
        })
    }

    fn Rput(origin_addr: *const c_void, origin_count: c_int, origin_datatype: MPI_Datatype, target_rank: c_int, target_disp: MPI_Aint,
            target_count: c_int, target_datatype: MPI_Datatype, win: MPI_Win, request: *mut MPI_Request) -> c_int {
        let rc = put("MPI_Rput", origin_addr, origin_count as i64, origin_datatype, target_rank, target_disp, target_count as i64, target_datatype, win);
        complete_request("MPI_Rput", win, rc, request)
    }
    fn Rput_c(origin_addr: *const c_void, origin_count: MPI_Count, origin_datatype: MPI_Datatype, target_rank: c_int, target_disp: MPI_Aint,
              target_count: MPI_Count, target_datatype: MPI_Datatype, win: MPI_Win, request: *mut MPI_Request) -> c_int {
        let rc = put("MPI_Rput_c", origin_addr, origin_count, origin_datatype, target_rank, target_disp, target_count, target_datatype, win);
        complete_request("MPI_Rput_c", win, rc, request)
    }
    fn Rget(origin_addr: *mut c_void, origin_count: c_int, origin_datatype: MPI_Datatype, target_rank: c_int, target_disp: MPI_Aint,
            target_count: c_int, target_datatype: MPI_Datatype, win: MPI_Win, request: *mut MPI_Request) -> c_int {
        let rc = get("MPI_Rget", origin_addr, origin_count as i64, origin_datatype, target_rank, target_disp, target_count as i64, target_datatype, win);
        complete_request("MPI_Rget", win, rc, request)
    }
    fn Rget_c(origin_addr: *mut c_void, origin_count: MPI_Count, origin_datatype: MPI_Datatype, target_rank: c_int, target_disp: MPI_Aint,
              target_count: MPI_Count, target_datatype: MPI_Datatype, win: MPI_Win, request: *mut MPI_Request) -> c_int {
        let rc = get("MPI_Rget_c", origin_addr, origin_count, origin_datatype, target_rank, target_disp, target_count, target_datatype, win);
        complete_request("MPI_Rget_c", win, rc, request)
    }
    fn Raccumulate(origin_addr: *const c_void, origin_count: c_int, origin_datatype: MPI_Datatype, target_rank: c_int, target_disp: MPI_Aint,
                   target_count: c_int, target_datatype: MPI_Datatype, op: MPI_Op, win: MPI_Win, request: *mut MPI_Request) -> c_int {
        let rc = acc("MPI_Raccumulate", origin_addr, origin_count as i64, origin_datatype, target_rank, target_disp, target_count as i64, target_datatype, op, win);
        complete_request("MPI_Raccumulate", win, rc, request)
    }
    fn Raccumulate_c(origin_addr: *const c_void, origin_count: MPI_Count, origin_datatype: MPI_Datatype, target_rank: c_int, target_disp: MPI_Aint,
                     target_count: MPI_Count, target_datatype: MPI_Datatype, op: MPI_Op, win: MPI_Win, request: *mut MPI_Request) -> c_int {
        let rc = acc("MPI_Raccumulate_c", origin_addr, origin_count, origin_datatype, target_rank, target_disp, target_count, target_datatype, op, win);
        complete_request("MPI_Raccumulate_c", win, rc, request)
    }
    fn Rget_accumulate(origin_addr: *const c_void, origin_count: c_int, origin_datatype: MPI_Datatype, result_addr: *mut c_void, result_count: c_int,
                       result_datatype: MPI_Datatype, target_rank: c_int, target_disp: MPI_Aint, target_count: c_int, target_datatype: MPI_Datatype,
                       op: MPI_Op, win: MPI_Win, request: *mut MPI_Request) -> c_int {
        let rc = get_acc("MPI_Rget_accumulate", origin_addr, origin_count as i64, origin_datatype, result_addr, result_count as i64, result_datatype,
                         target_rank, target_disp, target_count as i64, target_datatype, op, win);
        complete_request("MPI_Rget_accumulate", win, rc, request)
    }
    fn Rget_accumulate_c(origin_addr: *const c_void, origin_count: MPI_Count, origin_datatype: MPI_Datatype, result_addr: *mut c_void, result_count: MPI_Count,
                         result_datatype: MPI_Datatype, target_rank: c_int, target_disp: MPI_Aint, target_count: MPI_Count, target_datatype: MPI_Datatype,
                         op: MPI_Op, win: MPI_Win, request: *mut MPI_Request) -> c_int {
        let rc = get_acc("MPI_Rget_accumulate_c", origin_addr, origin_count, origin_datatype, result_addr, result_count, result_datatype,
                         target_rank, target_disp, target_count, target_datatype, op, win);
        complete_request("MPI_Rget_accumulate_c", win, rc, request)
    }
}

// ---- entry points: synchronization ----------------------------------------------------------

/// The fence barrier of a window within one host: a sense-reversing counter in its
/// control segment (after the members' lines). The window's members map the same segment,
/// so an arrival is one atomic add and the release one store, where the message-based
/// barrier took a round of messages through the engine.
struct ShmBarrier {
    ctl: usize,
    members: usize,
    /// The sense this barrier completes with (the member's previous one, flipped).
    sense: u32,
    /// The window's mailboxes (MPI_Win_create): a member waiting at the fence applies what
    /// origins of the closing epoch still post to it (every few polls, not only at the
    /// rounds of progress).
    mail: Option<Arc<crate::rma_mail::Mail>>,
}

impl ShmBarrier {
    fn word(&self, line: usize) -> &AtomicU32 {
        // SAFETY: the control segment holds CTL_BARRIER_LINES lines after the members'
        // (`ctl_len`) and stays mapped while the window lives; a fence on a window being
        // freed is erroneous.
        unsafe { &*((self.ctl + (self.members + line) * CTL_STRIDE) as *const AtomicU32) }
    }

    /// Arrive, and return once every member has; true when some member said it `staged`
    /// records (then the release word carries 2 besides the sense). The sequentially
    /// consistent add and the acquiring load order this member's transfers of the closing
    /// epoch before the others leave, and theirs before this member's next ones.
    fn wait(&self, comm: MPI_Comm, staged: bool) -> R<bool> {
        // Line 0: the count of arrivals and the count of waiters asleep on the release word;
        // line 1: the release word.
        let (count, released) = (self.word(0), self.word(1));
        // SAFETY: as in `word`; the sleepers' count is the second word of line 0.
        let sleepers = unsafe { &*((self.word(0) as *const AtomicU32 as usize + 8) as *const AtomicU32) };
        let add = 1 + if staged { STAGED_FLAG } else { 0 };
        let total = count.fetch_add(add, Ordering::SeqCst).wrapping_add(add);
        if (total % STAGED_FLAG) as usize == self.members {
            // Last to arrive: nobody touches the count again before the release below.
            count.store(0, Ordering::Relaxed);
            let any = total >= STAGED_FLAG;
            released.store(self.sense | if any { 2 } else { 0 }, Ordering::SeqCst);
            // A waiter counts itself before it sleeps and sleeps only while the word holds
            // the old sense, so either it sees the release or this load sees it.
            if sleepers.load(Ordering::SeqCst) != 0 {
                futex(released, libc::FUTEX_WAKE, i32::MAX as u32, None);
            }
            return Ok(any);
        }
        let (spin, yields) = g_locked(|g| Ok((g.eng.cfg.spin, g.eng.cfg.yields)))?;
        // Rounds of 64 polls of the release word, each followed by a round of progress
        // (other traffic of this process, failure notices) and a look for failed members.
        // As in the engine's own waits: `spin` rounds spinning, then `yields` rounds that
        // let the CPU go (when ranks outnumber cores the members still to arrive need it),
        // then sleeps on the release word (woken by the last arrival, or after a
        // millisecond for the progress), each followed by yielding rounds again.
        let mut rounds = 0u32;
        loop {
            for i in 0..64 {
                let r = released.load(Ordering::Acquire);
                if r & 1 == self.sense {
                    return Ok(r & 2 != 0);
                }
                if i % 8 == 0 {
                    if let Some(m) = &self.mail {
                        m.serve();
                    }
                }
                std::hint::spin_loop();
            }
            rounds = rounds.saturating_add(1);
            let failed = g_locked(|g| {
                if let Err(e) = g.eng.progress() {
                    tracing::warn!("MPI_Win_fence: progress failed: {e}");
                }
                Ok(g.eng.comm_has_failed_member(global::comm_handle(g, comm as usize)?))
            })?;
            if failed {
                return Err(err(ErrorClass::ProcFailed, "a member of the window failed during MPI_Win_fence"));
            }
            if rounds < spin {
                continue;
            }
            if rounds < spin.saturating_add(yields) {
                std::thread::yield_now();
                continue;
            }
            sleepers.fetch_add(1, Ordering::SeqCst);
            // Sleeps only while the word still holds the previous barrier's value.
            let old = released.load(Ordering::SeqCst);
            if old & 1 != self.sense {
                futex(released, libc::FUTEX_WAIT, old, Some(std::time::Duration::from_millis(1)));
            }
            sleepers.fetch_sub(1, Ordering::SeqCst);
            rounds = spin;
        }
    }
}

/// A futex operation on a word of a shared mapping (the control segment: a shared futex,
/// not a process-private one). Interrupted and spurious returns are the caller's to retry.
fn futex(word: &AtomicU32, op: c_int, val: u32, timeout: Option<std::time::Duration>) {
    let ts = timeout.map(|d| libc::timespec { tv_sec: d.as_secs() as libc::time_t, tv_nsec: d.subsec_nanos() as libc::c_long });
    let tsp = ts.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `word` is a valid, aligned u32 for the duration of the call.
    unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), op, val, tsp, std::ptr::null::<u32>(), 0u32) };
}

const TAG_POST: c_int = 1;
const TAG_DONE: c_int = 2;

fn window_ranks(w: &Win, group: MPI_Group) -> R<Vec<usize>> {
    let members = g_locked(|g| crate::group::group_of(g, group))?;
    members
        .iter()
        .map(|&wr| {
            w.peers.iter().position(|p| p.world_rank == wr).ok_or_else(|| err(ErrorClass::Group, format!("process {wr} of the group is not in the window")))
        })
        .collect()
}

fn check_assert(assert: c_int) -> R<()> {
    let known = abi::MPI_MODE_NOCHECK | abi::MPI_MODE_NOPRECEDE | abi::MPI_MODE_NOPUT | abi::MPI_MODE_NOSTORE | abi::MPI_MODE_NOSUCCEED;
    if assert & !known != 0 {
        return Err(err(ErrorClass::Assert, format!("unknown assertion bits {:#x}", assert & !known)));
    }
    Ok(())
}

mpi_api! {
    fn Win_fence(assert: c_int, win: MPI_Win) -> c_int {
        win_api("MPI_Win_fence", win, || {
            check_assert(assert)?;
            // Puts of the closing epoch waiting in mailboxes are applied before this member
            // arrives (the barrier then orders them before every member's next epoch).
            mail_drain(win, None)?;
            let (comm, local) = with_win(win, |w| {
                if w.access.is_some() || w.exposure.is_some() || w.any_lock() || w.lock_all {
                    return Err(err(ErrorClass::RmaSync, "MPI_Win_fence inside a post/start or lock epoch"));
                }
                // Within one host every transfer of the epoch is complete when its call
                // returns (a staged one once the barrier below is passed), so the fence is
                // a barrier in the control segment; the barrier's reads and writes order
                // the epoch's transfers before and after it.
                if w.net.is_none() {
                    w.fence_sense ^= 1;
                    w.fences = w.fences.wrapping_add(1);
                    let local = ShmBarrier { ctl: w.ctl.addr, members: w.peers.len(), sense: w.fence_sense, mail: w.fast.mail.clone() };
                    w.fence_epoch = assert & abi::MPI_MODE_NOSUCCEED == 0;
                    let half = w.fences % 2;
                    if w.fast.stage != 0 {
                        // The inbox the epoch that starts fills: its last records were
                        // applied at the previous fence, and nobody stages into it before
                        // every member has arrived at this one (the barrier's add orders
                        // the store before their reservations).
                        w.fast.reset_inbox(w.me, half);
                    }
                    w.fast.epoch_half.store(half, Ordering::Relaxed);
                    w.publish(None);
                    return Ok((w.comm, Some((local, w.fast.clone(), w.me, half))));
                }
                Ok((w.comm, None))
            })?;
            if let Some((b, fast, me, half)) = local {
                // Staged records (MPI_Win_create windows, `STAGE_INBOX`): once every origin
                // has arrived each member applies its inbox of the closing epoch; after a
                // second barrier the origins take their gets' data.
                if b.wait(comm, fast.staged.load(Ordering::Relaxed))? {
                    fast.apply_inbox(me, half ^ 1);
                    let second = with_win(win, |w| {
                        w.fence_sense ^= 1;
                        Ok(ShmBarrier { ctl: w.ctl.addr, members: w.peers.len(), sense: w.fence_sense, mail: None })
                    })?;
                    second.wait(comm, false)?;
                    fast.finish_gets();
                }
                return Ok(());
            }
            // Writes to other hosts are applied there before anyone leaves the barrier.
            flush_net(win, None)?;
            fence(Ordering::SeqCst);
            check_rc("MPI_Barrier on the window communicator", crate::comm::PMPI_Barrier(comm))?;
            fence(Ordering::SeqCst);
            with_win(win, |w| {
                w.fence_epoch = assert & abi::MPI_MODE_NOSUCCEED == 0;
                w.publish(None);
                Ok(())
            })
        })
    }

    fn Win_post(group: MPI_Group, assert: c_int, win: MPI_Win) -> c_int {
        win_api("MPI_Win_post", win, || {
            check_assert(assert)?;
            let (comm, origins) = with_win(win, |w| {
                if w.exposure.is_some() {
                    return Err(err(ErrorClass::RmaSync, "an exposure epoch is already open"));
                }
                Ok((w.comm, window_ranks(w, group)?))
            })?;
            fence(Ordering::SeqCst);
            let mut reqs = Vec::with_capacity(origins.len());
            for &o in &origins {
                if assert & abi::MPI_MODE_NOCHECK == 0 {
                    check_rc("MPI_Send of the post notice", crate::pt2pt::PMPI_Send(std::ptr::null(), 0, abi::MPI_BYTE as MPI_Datatype, o as c_int, TAG_POST, comm))?;
                }
                let mut r: MPI_Request = std::ptr::null_mut();
                check_rc("MPI_Irecv of the completion notice", crate::pt2pt::PMPI_Irecv(std::ptr::null_mut(), 0, abi::MPI_BYTE as MPI_Datatype, o as c_int, TAG_DONE, comm, &mut r))?;
                reqs.push(r);
            }
            with_win(win, |w| {
                w.exposure = Some(reqs);
                Ok(())
            })
        })
    }

    fn Win_start(group: MPI_Group, assert: c_int, win: MPI_Win) -> c_int {
        win_api("MPI_Win_start", win, || {
            check_assert(assert)?;
            let (comm, targets) = with_win(win, |w| {
                if w.access.is_some() {
                    return Err(err(ErrorClass::RmaSync, "an access epoch is already open"));
                }
                Ok((w.comm, window_ranks(w, group)?))
            })?;
            if assert & abi::MPI_MODE_NOCHECK == 0 {
                for &t in &targets {
                    check_rc("MPI_Recv of the post notice", crate::pt2pt::PMPI_Recv(std::ptr::null_mut(), 0, abi::MPI_BYTE as MPI_Datatype, t as c_int, TAG_POST, comm, std::ptr::null_mut()))?;
                }
            }
            fence(Ordering::SeqCst);
            with_win(win, |w| {
                w.access = Some(targets);
                w.publish(None);
                Ok(())
            })
        })
    }

    fn Win_complete(win: MPI_Win) -> c_int {
        win_api("MPI_Win_complete", win, || {
            let (comm, targets) = with_win(win, |w| {
                let t = w.access.take().ok_or_else(|| err(ErrorClass::RmaSync, "MPI_Win_complete without MPI_Win_start"))?;
                w.publish(None);
                Ok((w.comm, t))
            })?;
            flush_net(win, Some(&targets))?;
            fence(Ordering::SeqCst);
            for &t in &targets {
                check_rc("MPI_Send of the completion notice", crate::pt2pt::PMPI_Send(std::ptr::null(), 0, abi::MPI_BYTE as MPI_Datatype, t as c_int, TAG_DONE, comm))?;
            }
            Ok(())
        })
    }

    fn Win_wait(win: MPI_Win) -> c_int {
        win_api("MPI_Win_wait", win, || {
            let mut reqs = with_win(win, |w| w.exposure.take().ok_or_else(|| err(ErrorClass::RmaSync, "MPI_Win_wait without MPI_Win_post")))?;
            check_rc("MPI_Waitall on the completion notices", crate::pt2pt::PMPI_Waitall(reqs.len() as c_int, reqs.as_mut_ptr(), std::ptr::null_mut()))?;
            fence(Ordering::SeqCst);
            Ok(())
        })
    }

    fn Win_test(win: MPI_Win, flag: *mut c_int) -> c_int {
        win_api("MPI_Win_test", win, || {
            if flag.is_null() {
                return Err(err(ErrorClass::Arg, "flag pointer is NULL"));
            }
            let mut reqs = with_win(win, |w| w.exposure.take().ok_or_else(|| err(ErrorClass::RmaSync, "MPI_Win_test without MPI_Win_post")))?;
            let mut done = 0;
            let rc = crate::pt2pt::PMPI_Testall(reqs.len() as c_int, reqs.as_mut_ptr(), &mut done, std::ptr::null_mut());
            if done == 0 || rc != abi::MPI_SUCCESS {
                with_win(win, |w| {
                    w.exposure = Some(reqs);
                    Ok(())
                })?;
            } else {
                fence(Ordering::SeqCst);
            }
            check_rc("MPI_Testall on the completion notices", rc)?;
            *flag = done;
            Ok(())
        })
    }

    fn Win_lock(lock_type: c_int, rank: c_int, assert: c_int, win: MPI_Win) -> c_int {
        win_api("MPI_Win_lock", win, || {
            check_assert(assert)?;
            if lock_type != abi::MPI_LOCK_EXCLUSIVE && lock_type != abi::MPI_LOCK_SHARED {
                return Err(err(ErrorClass::Locktype, format!("invalid lock type {lock_type}")));
            }
            if rank == abi::MPI_PROC_NULL {
                return Ok(());
            }
            let take = assert & abi::MPI_MODE_NOCHECK == 0;
            if take && lock_fast(win, rank, lock_type == abi::MPI_LOCK_EXCLUSIVE) {
                return Ok(());
            }
            let net = with_win(win, |w| {
                let r = usize::try_from(rank).ok().filter(|&r| r < w.peers.len())
                    .ok_or_else(|| err(ErrorClass::Rank, format!("target rank {rank} is not in the window")))?;
                if w.holds(r) || w.lock_all {
                    return Err(err(ErrorClass::RmaSync, format!("target {rank} is already locked by this process")));
                }
                if w.access.is_some() {
                    return Err(err(ErrorClass::RmaSync, "MPI_Win_lock inside an access epoch of MPI_Win_start (complete it first)"));
                }
                // A fence epoch ends at the next fence; a lock may follow a fence that
                // opened none, so only a post/start epoch conflicts.
                let was_fence = w.fence_epoch;
                w.fence_epoch = false;
                let far = w.peers[r].remote;
                if take && !far {
                    acquire(w, r, lock_type);
                }
                w.locks.insert(r, (lock_type, take));
                w.publish(if was_fence { None } else { Some(r) });
                Ok(w.net.as_ref().filter(|_| take && far).map(|n| n.h))
            })?;
            if let Some(comm) = net {
                // The target's service grants it (at once, or when the holders let go).
                if let Err(e) = crate::rma_net::exchange(comm, rank, vec![control(Kind::Lock, lock_type == abi::MPI_LOCK_EXCLUSIVE)]) {
                    with_win(win, |w| {
                        w.locks.remove(&(rank as usize));
                        w.publish(Some(rank as usize));
                        Ok(())
                    })?;
                    return Err(e);
                }
            }
            Ok(())
        })
    }

    fn Win_unlock(rank: c_int, win: MPI_Win) -> c_int {
        win_api("MPI_Win_unlock", win, || {
            if rank == abi::MPI_PROC_NULL {
                return Ok(());
            }
            if let Ok(r) = usize::try_from(rank) {
                mail_drain(win, Some(r))?;
            }
            if unlock_fast(win, rank) {
                return Ok(());
            }
            let net = with_win(win, |w| {
                let r = rank as usize;
                let (ty, taken) = w.locks.remove(&r).ok_or_else(|| err(ErrorClass::RmaSync, format!("target {rank} is not locked by this process")))?;
                w.publish(Some(r));
                fence(Ordering::SeqCst);
                let far = w.peers.get(r).is_some_and(|p| p.remote);
                if taken && !far {
                    release_lock(w, r, ty);
                }
                Ok(w.net.as_mut().filter(|_| far).map(|n| {
                    n.dirty.remove(&r);
                    (n.h, ty, taken)
                }))
            })?;
            // The target answers once this origin's operations before it are applied.
            if let Some((comm, ty, taken)) = net {
                let ask = if taken { control(Kind::Unlock, ty == abi::MPI_LOCK_EXCLUSIVE) } else { control(Kind::Flush, false) };
                crate::rma_net::exchange(comm, rank, vec![ask])?;
            }
            Ok(())
        })
    }

    fn Win_lock_all(assert: c_int, win: MPI_Win) -> c_int {
        win_api("MPI_Win_lock_all", win, || {
            check_assert(assert)?;
            let net = with_win(win, |w| {
                if w.lock_all || w.any_lock() {
                    return Err(err(ErrorClass::RmaSync, "the window is already locked by this process"));
                }
                let mut far = Vec::new();
                if assert & abi::MPI_MODE_NOCHECK == 0 {
                    for r in 0..w.peers.len() {
                        if w.peers[r].remote {
                            far.push(r);
                        } else {
                            acquire(w, r, abi::MPI_LOCK_SHARED);
                        }
                    }
                }
                w.lock_all = true;
                w.fence_epoch = false;
                w.locks.clear();
                // Remember whether the words were taken through a marker entry.
                if assert & abi::MPI_MODE_NOCHECK != 0 {
                    w.locks.insert(usize::MAX, (abi::MPI_LOCK_SHARED, false));
                }
                w.publish(None);
                Ok(w.net.as_ref().map(|n| (n.h, far)))
            })?;
            if let Some((comm, far)) = net {
                for r in far {
                    crate::rma_net::exchange(comm, r as c_int, vec![control(Kind::Lock, false)])?;
                }
            }
            Ok(())
        })
    }

    fn Win_unlock_all(win: MPI_Win) -> c_int {
        win_api("MPI_Win_unlock_all", win, || {
            mail_drain(win, None)?;
            let net = with_win(win, |w| {
                if !w.lock_all {
                    return Err(err(ErrorClass::RmaSync, "MPI_Win_unlock_all without MPI_Win_lock_all"));
                }
                fence(Ordering::SeqCst);
                let taken = w.locks.remove(&usize::MAX).is_none();
                let mut far = Vec::new();
                for r in 0..w.peers.len() {
                    if w.peers[r].remote {
                        far.push(r);
                    } else if taken {
                        release_lock(w, r, abi::MPI_LOCK_SHARED);
                    }
                }
                w.lock_all = false;
                w.publish(None);
                Ok(w.net.as_mut().map(|n| {
                    n.dirty.clear();
                    (n.h, far, taken)
                }))
            })?;
            // Each target answers once this origin's operations before it are applied.
            if let Some((comm, far, taken)) = net {
                for r in far {
                    let ask = if taken { control(Kind::Unlock, false) } else { control(Kind::Flush, false) };
                    crate::rma_net::exchange(comm, r as c_int, vec![ask])?;
                }
            }
            Ok(())
        })
    }

    fn Win_flush(rank: c_int, win: MPI_Win) -> c_int {
        if flush_fast(Some(rank), win) {
            crate::rma_net::progress_if_serving();
            return abi::MPI_SUCCESS;
        }
        flush("MPI_Win_flush", Some(rank), win)
    }
    fn Win_flush_all(win: MPI_Win) -> c_int {
        if flush_fast(None, win) {
            crate::rma_net::progress_if_serving();
            return abi::MPI_SUCCESS;
        }
        flush("MPI_Win_flush_all", None, win)
    }
    fn Win_flush_local(rank: c_int, win: MPI_Win) -> c_int {
        if flush_fast(Some(rank), win) {
            crate::rma_net::progress_if_serving();
            return abi::MPI_SUCCESS;
        }
        flush("MPI_Win_flush_local", Some(rank), win)
    }
    fn Win_flush_local_all(win: MPI_Win) -> c_int {
        if flush_fast(None, win) {
            crate::rma_net::progress_if_serving();
            return abi::MPI_SUCCESS;
        }
        flush("MPI_Win_flush_local_all", None, win)
    }
    fn Win_sync(win: MPI_Win) -> c_int {
        win_api("MPI_Win_sync", win, || {
            with_win(win, |_| {
                fence(Ordering::SeqCst);
                Ok(())
            })?;
            crate::rma_net::progress_if_serving();
            Ok(())
        })
    }
}

/// Operations on members of this host complete when issued, so for them a flush only
/// orders memory; targets on other hosts answer a flush request once this origin's
/// operations before it are applied. It is an error outside a passive-target epoch.
/// The common flush, inlined into the MPI_Win_flush family: the thread's last window,
/// within one host and without mailboxes, with a lock open towards the target (or any, for
/// the `_all` forms).
/// False leaves the call to `flush`.
#[inline(always)]
fn flush_fast(rank: Option<c_int>, win: MPI_Win) -> bool {
    if PHASE.load(Ordering::Acquire) != PHASE_LIVE {
        return false;
    }
    CACHE.with(|c| {
        let cached = c.fast.get();
        if cached.is_null() {
            return false;
        }
        // SAFETY: the cache owns a strong count of the Arc it points to.
        let f = unsafe { &*cached };
        if f.id != win as usize || f.freed.load(Ordering::Relaxed) || f.flush_general {
            return false;
        }
        let ok = match rank {
            Some(r) => usize::try_from(r).ok().and_then(|r| f.locked.get(r)).is_some_and(|l| l.load(Ordering::Relaxed)),
            None => f.passive.load(Ordering::Relaxed) || (0..f.held.len()).any(|t| f.held(t)),
        };
        if ok && c.wrote.replace(false) {
            fence(Ordering::SeqCst);
        }
        ok
    })
}

#[inline(never)]
fn flush(func: &str, rank: Option<c_int>, win: MPI_Win) -> c_int {
    win_api(func, win, || {
        // (A negative rank drains nothing: MPI_PROC_NULL, or an error reported below.)
        if rank.is_none_or(|r| r >= 0) {
            mail_drain(win, rank.map(|r| r as usize))?;
        }
        let local_only = with_fast(win, |f| {
            let ok = match rank {
                Some(r) => r == abi::MPI_PROC_NULL || usize::try_from(r).ok().and_then(|r| f.locked.get(r)).is_some_and(|l| l.load(Ordering::Relaxed)),
                None => f.passive.load(Ordering::Relaxed) || (0..f.held.len()).any(|t| f.held(t)),
            };
            ok && !f.spans_hosts
        });
        if local_only == Some(true) {
            fence(Ordering::SeqCst);
            crate::rma_net::progress_if_serving();
            return Ok(());
        }
        let spans_hosts = with_win(win, |w| {
            let ok = w.lock_all || match rank {
                Some(r) => r == abi::MPI_PROC_NULL || w.holds(r as usize),
                None => w.any_lock(),
            };
            if !ok {
                return Err(err(ErrorClass::RmaSync, "flush outside a passive-target (lock) epoch"));
            }
            fence(Ordering::SeqCst);
            Ok(w.net.is_some())
        })?;
        if !spans_hosts {
            crate::rma_net::progress_if_serving();
            return Ok(());
        }
        match rank {
            Some(r) if r == abi::MPI_PROC_NULL => Ok(()),
            Some(r) => flush_net(win, Some(&[r as usize])),
            None => flush_net(win, None),
        }
    })
}

/// A synchronization request without data.
fn control(kind: Kind, exclusive: bool) -> Ask<'static> {
    Ask { kind, exclusive, elem: Elem::None, op: 0, runs: Vec::new(), data: Vec::new(), answer: Some(0) }
}

/// Flush the targets on other hosts written to since their last flush (all, or those of
/// `only`): each answers once this origin's operations before the request are applied.
fn flush_net(win: MPI_Win, only: Option<&[usize]>) -> R<()> {
    let (comm, targets) = with_win(win, |w| {
        let Some(n) = w.net.as_mut() else { return Ok((None, Vec::new())) };
        let t: Vec<usize> = match only {
            Some(o) => o.iter().copied().filter(|r| n.dirty.remove(r)).collect(),
            None => std::mem::take(&mut n.dirty).into_iter().collect(),
        };
        Ok((Some(n.h), t))
    })?;
    let Some(comm) = comm else { return Ok(()) };
    for t in targets {
        crate::rma_net::exchange(comm, t as c_int, vec![control(Kind::Flush, false)])?;
    }
    // Flushing nothing remote (a loop of local operations and flushes) still serves others.
    crate::rma_net::progress_if_serving();
    Ok(())
}

/// MPI_Win_lock on a window within one host, outside fence and lock_all epochs, of a target
/// not locked yet: the lock word and the epoch flags, without the window table's mutex.
/// False leaves the call to the general path (which also reports errors).
fn lock_fast(win: MPI_Win, rank: c_int, exclusive: bool) -> bool {
    with_fast(win, |f| {
        let Some(r) = usize::try_from(rank).ok().filter(|&r| r < f.held.len()) else { return false };
        if f.spans_hosts || f.all_open.load(Ordering::Relaxed) || f.open[r].load(Ordering::Relaxed) || f.locked[r].load(Ordering::Relaxed) || f.held(r) {
            return false;
        }
        let word = f.lock_word(r);
        spin_until(|| crate::rma_net::try_lock(word, exclusive));
        f.held[r].store(if exclusive { HELD_EXCLUSIVE } else { HELD_SHARED }, Ordering::Relaxed);
        f.locked[r].store(true, Ordering::Relaxed);
        f.open[r].store(true, Ordering::Relaxed);
        true
    })
    .unwrap_or(false)
}

/// MPI_Win_unlock of a lock `lock_fast` took; false when it took none on `rank`.
fn unlock_fast(win: MPI_Win, rank: c_int) -> bool {
    with_fast(win, |f| {
        let Some(r) = usize::try_from(rank).ok().filter(|&r| r < f.held.len()) else { return false };
        let held = f.held[r].load(Ordering::Relaxed);
        if held == 0 {
            return false;
        }
        // The transfers of the epoch are done; order them before the word is let go.
        fence(Ordering::SeqCst);
        f.held[r].store(0, Ordering::Relaxed);
        f.locked[r].store(false, Ordering::Relaxed);
        // A lock excludes start and fence epochs towards its target, so none stays open.
        f.open[r].store(false, Ordering::Relaxed);
        crate::rma_net::unlock(f.lock_word(r), held == HELD_EXCLUSIVE);
        true
    })
    .unwrap_or(false)
}

fn acquire(w: &Win, target: usize, lock_type: c_int) {
    let word = lock_word(w, target);
    let exclusive = lock_type == abi::MPI_LOCK_EXCLUSIVE;
    if w.net.is_none() {
        spin_until(|| crate::rma_net::try_lock(word, exclusive));
        return;
    }
    // An origin of another host may hold the word, or wait for it: then this host's lockers
    // take it only in their turn (`rma_net::lock_turn`). Its unlock and the grants are
    // served by the progress of the target, which may be this process.
    let ctl = w.ctl.addr + target * CTL_STRIDE;
    let (waiters, turn) = (crate::rma_net::remote_waiters(ctl), crate::rma_net::lock_turn(ctl));
    let attempt = || {
        (waiters.load(Ordering::Acquire) == 0 || turn.load(Ordering::Acquire) == crate::rma_net::LOCAL_TURN)
            && crate::rma_net::try_lock(word, exclusive)
    };
    if !attempt() {
        let waiting = crate::rma_net::local_waiters(ctl);
        waiting.fetch_add(1, Ordering::AcqRel);
        let (mut spins, mut idle) = (0u32, 0u32);
        while !attempt() {
            spins += 1;
            if spins % 64 == 0 {
                crate::rma_net::lock_wait_round(&mut idle);
            } else {
                std::hint::spin_loop();
            }
        }
        waiting.fetch_sub(1, Ordering::AcqRel);
    }
    turn.store(crate::rma_net::REMOTE_TURN, Ordering::Release);
}

fn release_lock(w: &Win, target: usize, lock_type: c_int) {
    crate::rma_net::unlock(lock_word(w, target), lock_type == abi::MPI_LOCK_EXCLUSIVE);
}

// ---- entry points: window properties ---------------------------------------------------------

mpi_api! {
    fn Win_get_group(win: MPI_Win, group: *mut MPI_Group) -> c_int {
        win_api("MPI_Win_get_group", win, || {
            let comm = with_win(win, |w| Ok(w.comm))?;
            check_rc("MPI_Comm_group", crate::group::PMPI_Comm_group(comm, group))
        })
    }

    fn Win_set_name(win: MPI_Win, win_name: *const c_char) -> c_int {
        win_api("MPI_Win_set_name", win, || {
            if win_name.is_null() {
                return Err(err(ErrorClass::Arg, "win_name is NULL"));
            }
            let name = CStr::from_ptr(win_name).to_string_lossy().into_owned();
            with_win(win, |w| {
                w.name = name.chars().take(abi::MPI_MAX_OBJECT_NAME as usize - 1).collect();
                Ok(())
            })
        })
    }

    fn Win_get_name(win: MPI_Win, win_name: *mut c_char, resultlen: *mut c_int) -> c_int {
        win_api("MPI_Win_get_name", win, || {
            if win_name.is_null() || resultlen.is_null() {
                return Err(err(ErrorClass::Arg, "win_name or resultlen is NULL"));
            }
            if win as usize == abi::MPI_WIN_NULL {
                *resultlen = crate::env::write_cstr(win_name, "MPI_WIN_NULL", abi::MPI_MAX_OBJECT_NAME as usize);
                return Ok(());
            }
            let name = with_win(win, |w| Ok(w.name.clone()))?;
            *resultlen = crate::env::write_cstr(win_name, &name, abi::MPI_MAX_OBJECT_NAME as usize);
            Ok(())
        })
    }

    fn Win_set_info(win: MPI_Win, info: MPI_Info) -> c_int {
        win_api("MPI_Win_set_info", win, || {
            let i = g_locked(|g| crate::info::info_of(g, info))?;
            with_win(win, |w| {
                for (k, v) in i.iter() {
                    w.info.set(k, v)?;
                }
                Ok(())
            })
        })
    }

    fn Win_get_info(win: MPI_Win, info_used: *mut MPI_Info) -> c_int {
        win_api("MPI_Win_get_info", win, || {
            let mut i = with_win(win, |w| Ok(w.info.clone()))?;
            let defaults = [("no_locks", "false"), ("accumulate_ordering", "rar,raw,war,waw"), ("accumulate_ops", "same_op_no_op"),
                            ("same_size", "false"), ("same_disp_unit", "false"), ("alloc_shared_noncontig", "false")];
            for (k, v) in defaults {
                if i.get(k)?.is_none() {
                    i.set(k, v)?;
                }
            }
            g_locked(|g| crate::info::out_info(g, i, info_used))
        })
    }

    fn Win_create_errhandler(win_errhandler_fn: Option<WinErrhandlerFn>, errhandler: *mut MPI_Errhandler) -> c_int {
        crate::errhandler::create_user("MPI_Win_create_errhandler", win_errhandler_fn.map(|f| f as usize), errhandler)
    }

    fn Win_set_errhandler(win: MPI_Win, errhandler: MPI_Errhandler) -> c_int {
        win_api("MPI_Win_set_errhandler", win, || {
            with_win(win, |_| Ok(()))?;
            let new = errhandler as u64;
            g_locked(|g| {
                crate::errhandler::check_errhandler(g, new as usize)?;
                crate::errhandler::retain(g, new);
                Ok(())
            })?;
            let old = with_win(win, |w| Ok(std::mem::replace(&mut w.errhandler, new)))?;
            g_locked(|g| {
                crate::errhandler::release(g, old);
                Ok(())
            })
        })
    }

    fn Win_get_errhandler(win: MPI_Win, errhandler: *mut MPI_Errhandler) -> c_int {
        win_api("MPI_Win_get_errhandler", win, || {
            if errhandler.is_null() {
                return Err(err(ErrorClass::Arg, "errhandler pointer is NULL"));
            }
            let e = with_win(win, |w| Ok(w.errhandler))?;
            g_locked(|g| {
                crate::errhandler::retain(g, e);
                Ok(())
            })?;
            *errhandler = e as MPI_Errhandler;
            Ok(())
        })
    }

    fn Win_call_errhandler(win: MPI_Win, errorcode: c_int) -> c_int {
        live_check("MPI_Win_call_errhandler");
        let handler = match with_win(win, |w| Ok(w.errhandler)) {
            Ok(h) => h as usize,
            Err(e) => return raise("MPI_Win_call_errhandler", win, e),
        };
        match handler {
            abi::MPI_ERRORS_RETURN => abi::MPI_SUCCESS,
            h if h > abi::PREDEFINED_HANDLE_MAX => {
                let f = lock().as_ref().and_then(|g| g.tables.errhandlers.get(Handle(h as u64)).map(|x| x.func));
                if let Some(f) = f {
                    let mut w = win;
                    let mut c = errorcode;
                    let f: WinErrhandlerFn = std::mem::transmute::<usize, WinErrhandlerFn>(f);
                    f(&mut w, &mut c);
                }
                abi::MPI_SUCCESS
            }
            _ => {
                let mut guard = lock();
                let Some(g) = guard.as_mut() else { return errorcode };
                let rank = g.eng.rank;
                let class = global::class_of_code(g, errorcode);
                let msg = format!("rank {rank}: MPI_Win_call_errhandler: error code {errorcode} raised on a window with a fatal error handler");
                eprintln!("steadfast: {msg}");
                g.eng.abort(if class == 0 { 1 } else { class }, &msg);
            }
        }
    }
}

/// Address of a predefined window attribute's value, if `keyval` is one.
pub fn predefined_attr(w: usize, keyval: c_int) -> Option<*mut c_void> {
    let mut guard = wins();
    let win = guard.as_mut()?.get_mut(&w)?;
    Some(match keyval {
        abi::MPI_WIN_BASE => win.base as *mut c_void,
        abi::MPI_WIN_SIZE => &mut win.attr_size as *mut MPI_Aint as *mut c_void,
        abi::MPI_WIN_DISP_UNIT => &mut win.attr_disp_unit as *mut c_int as *mut c_void,
        abi::MPI_WIN_CREATE_FLAVOR => &mut win.attr_flavor as *mut c_int as *mut c_void,
        abi::MPI_WIN_MODEL => &mut win.attr_model as *mut c_int as *mut c_void,
        _ => return None,
    })
}

/// Whether `keyval` is a predefined window attribute key.
pub fn is_predefined_key(keyval: c_int) -> bool {
    (abi::MPI_WIN_BASE..=abi::MPI_WIN_MODEL).contains(&keyval)
}
