//! Process-wide library state, handle translation and error reporting for the C entry points.
//!
//! Every MPI object a program holds a handle to has one owner, [`Global`] (behind
//! [`GLOBAL`]): communicators, requests, user ops and the message state live in its
//! [`Engine`]; datatypes, groups, error handlers, attributes, generalized requests and the
//! handle caches live here, next to it. That is the state a checkpoint captures and a
//! restart restores as one. Outside it: info objects (`info.rs`), which MPI allows before
//! MPI_Init and after MPI_Finalize, when there is no `Global`; and the values of the
//! predefined attributes (`attr.rs`), constants of the job set at MPI_Init.
//!
//! One lock guards the engine. Every entry point runs its body through [`api`], which checks
//! that MPI is initialised, runs the body under the lock, and on error consults the
//! communicator's error handler *after* releasing the lock (a user handler may call MPI).

use std::collections::{HashMap, VecDeque};
use std::ffi::c_int;
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, Ordering};

use steadfast_core::datatype::TypeRef;
use steadfast_core::attr::{AttrList, Keyvals};
use steadfast_core::group::Group;
use steadfast_core::info::Info;
use steadfast_core::request::Status;
use steadfast_core::slab::Slab;
use steadfast_core::{Engine, ErrorClass, Handle, MpiError};

use crate::abi;

/// Not yet initialised / initialised / finalised.
pub static PHASE: AtomicU8 = AtomicU8::new(0);
pub const PHASE_NONE: u8 = 0;
pub const PHASE_LIVE: u8 = 1;
pub const PHASE_DONE: u8 = 2;

/// Everything the C layer keeps.
pub struct Global {
    pub eng: Engine,
    pub predef_types: Vec<Option<TypeRef>>,
    /// By predefined handle: the element size of a contiguous type, `usize::MAX` for the
    /// others (the fast paths' byte count without a look at the type's layout).
    pub predef_contig: Vec<usize>,
    pub types: Slab<TypeRef>,
    pub errors: ErrorLog,
    pub thread_level: c_int,
    pub main_thread: std::thread::ThreadId,
    /// Requests of a blocking operation the current call started and waits for once its
    /// body returns, with the lock released (MPI_THREAD_MULTIPLE; see [`api_with`]).
    pub pending: Vec<Handle>,
    /// Attached Bsend buffer (address, size).
    pub bsend_buf: Option<(usize, usize)>,
    /// Groups, error handlers, attributes, user error codes.
    pub tables: Tables,
}

/// Handle tables of groups, error handlers and attributes (info objects live in `info.rs`).
#[derive(Default)]
pub struct Tables {
    pub groups: Slab<Group>,
    pub errhandlers: Slab<crate::errhandler::UserErrhandler>,
    pub keyvals: Keyvals,
    /// Attributes cached on communicators, by engine handle.
    pub comm_attrs: HashMap<Handle, AttrList>,
    /// Attributes cached on datatypes, by application handle.
    pub type_attrs: HashMap<usize, AttrList>,
    /// Attributes cached on windows, by application handle.
    pub win_attrs: HashMap<usize, AttrList>,
    /// Info hints of communicators (Comm_set_info / dup_with_info), by engine handle.
    pub comm_info: HashMap<Handle, Info>,
    /// Error classes, codes and strings added by the application.
    pub user_errors: crate::errhandler::UserErrors,
    /// Callbacks of generalized requests, by engine request handle.
    pub greqs: HashMap<Handle, crate::greq::Greq>,
    /// Application callbacks to run once the current call has released the lock.
    pub deferred: Vec<crate::greq::Deferred>,
    /// Types made by MPI_Type_create_f90_*: one permanent handle per (kind, p, r).
    pub f90_types: Vec<(crate::datatype::F90Key, usize)>,
}

pub static GLOBAL: GlobalLock = GlobalLock::new();

/// Lock the global state.
#[inline]
pub fn lock() -> Guard {
    GLOBAL.lock()
}

/// The lock around [`Global`], taken by every entry point.
///
/// Below `MPI_THREAD_MULTIPLE` ([`SOLO`]) it takes no atomic operation at all: the program
/// promised the standard's thread level (one thread calls MPI, or one at a time), and no
/// thread of the library enters the C layer. A locked instruction costs several
/// nanoseconds here, waits for every earlier store to drain, and each entry point paid
/// two of them (a `std::sync::Mutex` takes and releases with one each): a third of a small
/// `MPI_Irecv`'s time. With `MPI_THREAD_MULTIPLE`, taking it is one compare-and-swap and
/// releasing it one plain store; a thread that finds it taken spins briefly, yields, then
/// sleeps on a futex. A release looks for sleepers after its store without a fence, so a
/// sleeper it missed wakes by itself after [`LOCK_NAP`]. A panic in a body releases the
/// lock as it unwinds (no poisoning: a panic already reported itself).
pub struct GlobalLock {
    /// 0 free, 1 taken.
    state: AtomicU32,
    /// Threads asleep (or about to sleep) on `state`.
    sleepers: AtomicU32,
    cell: UnsafeCell<Option<Global>>,
}

// SAFETY: `cell` is only reached through a `Guard`, and at most one exists at a time.
unsafe impl Sync for GlobalLock {}

/// Whether the library runs below `MPI_THREAD_MULTIPLE`, when [`GlobalLock`] takes no atomic
/// operation: set where the engine starts, cleared when it stops.
pub static SOLO: AtomicBool = AtomicBool::new(false);

/// The longest a thread waiting for the lock sleeps before it looks again (a release that
/// raced with its going to sleep wakes nobody).
const LOCK_NAP: std::time::Duration = std::time::Duration::from_micros(200);

impl GlobalLock {
    const fn new() -> GlobalLock {
        GlobalLock { state: AtomicU32::new(0), sleepers: AtomicU32::new(0), cell: UnsafeCell::new(None) }
    }

    #[inline]
    fn lock(&'static self) -> Guard {
        let held = !SOLO.load(Ordering::Relaxed);
        if held && self.state.compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed).is_err() {
            self.lock_contended();
        }
        Guard { lock: self, held, _not_send: std::marker::PhantomData }
    }

    #[cold]
    #[inline(never)]
    fn lock_contended(&self) {
        let mut round = 0u32;
        loop {
            if self.state.load(Ordering::Relaxed) == 0
                && self.state.compare_exchange_weak(0, 1, Ordering::Acquire, Ordering::Relaxed).is_ok()
            {
                return;
            }
            round += 1;
            if round < 100 {
                std::hint::spin_loop();
            } else if round < 120 {
                std::thread::yield_now();
            } else {
                self.sleepers.fetch_add(1, Ordering::SeqCst);
                let timeout = libc::timespec { tv_sec: 0, tv_nsec: LOCK_NAP.as_nanos() as libc::c_long };
                // SAFETY: a futex wait on a word of this process, with a timeout.
                unsafe {
                    libc::syscall(
                        libc::SYS_futex,
                        self.state.as_ptr(),
                        libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                        1u32,
                        &timeout as *const libc::timespec,
                    );
                }
                self.sleepers.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }

    #[inline]
    fn unlock(&self) {
        self.state.store(0, Ordering::Release);
        if self.sleepers.load(Ordering::Relaxed) != 0 {
            self.wake_one();
        }
    }

    #[cold]
    #[inline(never)]
    fn wake_one(&self) {
        // SAFETY: a futex wake on a word of this process.
        unsafe {
            libc::syscall(libc::SYS_futex, self.state.as_ptr(), libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, 1u32);
        }
    }
}

/// The global state, locked; released when dropped. Not `Send`, like a `MutexGuard`.
pub struct Guard {
    lock: &'static GlobalLock,
    /// Whether the lock word was taken (not in [`SOLO`] mode when the guard was made).
    held: bool,
    _not_send: std::marker::PhantomData<*mut ()>,
}

impl std::ops::Deref for Guard {
    type Target = Option<Global>;
    #[inline]
    fn deref(&self) -> &Option<Global> {
        // SAFETY: this guard holds the lock.
        unsafe { &*self.lock.cell.get() }
    }
}

impl std::ops::DerefMut for Guard {
    #[inline]
    fn deref_mut(&mut self) -> &mut Option<Global> {
        // SAFETY: this guard holds the lock, and `&mut self` makes the borrow unique.
        unsafe { &mut *self.lock.cell.get() }
    }
}

impl Drop for Guard {
    #[inline]
    fn drop(&mut self) {
        if self.held {
            self.lock.unlock();
        }
    }
}

// ---- error codes ---------------------------------------------------------------------------

/// Error codes carry a message: code = DYN_BASE + slot * 64 + class, for the standard classes
/// (< 64). The class comes back with MPI_Error_class, the message with MPI_Error_string.
const DYN_BASE: c_int = 0x2000;
const DYN_SLOTS: usize = 120;

/// Recent error messages, indexed by slot.
#[derive(Default)]
pub struct ErrorLog {
    msgs: VecDeque<String>,
    next: usize,
    slots: Vec<String>,
}

impl ErrorLog {
    /// Record `msg` for `class`, returning the error code to hand to the application.
    pub fn code(&mut self, class: c_int, msg: String) -> c_int {
        if !(1..64).contains(&class) {
            return class;
        }
        if self.slots.len() < DYN_SLOTS {
            self.slots.push(String::new());
        }
        let slot = self.next % DYN_SLOTS;
        self.next += 1;
        self.slots[slot] = msg.clone();
        self.msgs.push_back(msg);
        if self.msgs.len() > DYN_SLOTS {
            self.msgs.pop_front();
        }
        DYN_BASE + (slot as c_int) * 64 + class
    }
    /// Whether `code` is one this log handed out.
    pub fn is_library_code(code: c_int) -> bool {
        (DYN_BASE..DYN_BASE + DYN_SLOTS as c_int * 64).contains(&code)
    }
    /// Message recorded under `code`, if it is one of ours.
    pub fn message(&self, code: c_int) -> Option<&str> {
        if !(DYN_BASE..DYN_BASE + DYN_SLOTS as c_int * 64).contains(&code) {
            return None;
        }
        let slot = ((code - DYN_BASE) / 64) as usize;
        self.slots.get(slot).map(|s| s.as_str())
    }
}

/// Class of an error code, including codes the application added.
pub fn class_of_code(g: &Global, code: c_int) -> c_int {
    g.tables.user_errors.class_of(code).unwrap_or_else(|| class_of(code))
}

/// Class of an error code (codes we made, or classes themselves).
pub fn class_of(code: c_int) -> c_int {
    if (DYN_BASE..DYN_BASE + DYN_SLOTS as c_int * 64).contains(&code) {
        (code - DYN_BASE) % 64
    } else {
        code
    }
}

/// ABI value of an engine error class.
pub fn abi_class(c: ErrorClass) -> c_int {
    use ErrorClass::*;
    match c {
        Buffer => abi::MPI_ERR_BUFFER,
        Count => abi::MPI_ERR_COUNT,
        Type => abi::MPI_ERR_TYPE,
        Tag => abi::MPI_ERR_TAG,
        Comm => abi::MPI_ERR_COMM,
        Rank => abi::MPI_ERR_RANK,
        Request => abi::MPI_ERR_REQUEST,
        Root => abi::MPI_ERR_ROOT,
        Group => abi::MPI_ERR_GROUP,
        Op => abi::MPI_ERR_OP,
        Topology => abi::MPI_ERR_TOPOLOGY,
        Dims => abi::MPI_ERR_DIMS,
        Arg => abi::MPI_ERR_ARG,
        Unknown => abi::MPI_ERR_UNKNOWN,
        Truncate => abi::MPI_ERR_TRUNCATE,
        Other => abi::MPI_ERR_OTHER,
        Intern => abi::MPI_ERR_INTERN,
        InStatus => abi::MPI_ERR_IN_STATUS,
        Pending => abi::MPI_ERR_PENDING,
        NoMem => abi::MPI_ERR_NO_MEM,
        Keyval => abi::MPI_ERR_KEYVAL,
        Info => abi::MPI_ERR_INFO,
        InfoKey => abi::MPI_ERR_INFO_KEY,
        InfoValue => abi::MPI_ERR_INFO_VALUE,
        InfoNokey => abi::MPI_ERR_INFO_NOKEY,
        Size => abi::MPI_ERR_SIZE,
        Unsupported => abi::MPI_ERR_UNSUPPORTED_OPERATION,
        ProcFailed => abi::MPIX_ERR_PROC_FAILED,
        ProcFailedPending => abi::MPIX_ERR_PROC_FAILED_PENDING,
        Revoked => abi::MPIX_ERR_REVOKED,
        Win => abi::MPI_ERR_WIN,
        RmaSync => abi::MPI_ERR_RMA_SYNC,
        RmaRange => abi::MPI_ERR_RMA_RANGE,
        RmaConflict => abi::MPI_ERR_RMA_CONFLICT,
        RmaAttach => abi::MPI_ERR_RMA_ATTACH,
        RmaShared => abi::MPI_ERR_RMA_SHARED,
        RmaFlavor => abi::MPI_ERR_RMA_FLAVOR,
        Disp => abi::MPI_ERR_DISP,
        Base => abi::MPI_ERR_BASE,
        Locktype => abi::MPI_ERR_LOCKTYPE,
        Assert => abi::MPI_ERR_ASSERT,
        Spawn => abi::MPI_ERR_SPAWN,
        Port => abi::MPI_ERR_PORT,
        Name => abi::MPI_ERR_NAME,
        Service => abi::MPI_ERR_SERVICE,
        Session => abi::MPI_ERR_SESSION,
        Errhandler => abi::MPI_ERR_ERRHANDLER,
    }
}

/// Short name of an error class ("MPI_ERR_COUNT").
pub fn class_name(class: c_int) -> &'static str {
    abi::ERROR_CLASSES.iter().find(|e| e.0 == class).map_or("MPI_ERR_UNKNOWN", |e| e.1)
}

/// Why an entry point failed: an engine error, or an error code already in ABI form (from a
/// user callback, or the code given to MPI_Comm_call_errhandler).
#[derive(Debug)]
pub enum Failure {
    Mpi(MpiError),
    Code(c_int),
}

impl From<MpiError> for Failure {
    fn from(e: MpiError) -> Failure {
        Failure::Mpi(e)
    }
}


fn not_live(func: &str) -> ! {
    let phase = PHASE.load(Ordering::Acquire);
    let why = if phase == PHASE_DONE { "after MPI_Finalize" } else { "before MPI_Init" };
    eprintln!("steadfast: {func} called {why}");
    std::process::exit(1);
}

/// Run an entry point's body. `comm` selects the error handler (None: MPI_COMM_WORLD's).
pub fn api<F>(func: &str, comm: Option<usize>, body: F) -> c_int
where
    F: FnOnce(&mut Global) -> Result<(), MpiError>,
{
    api_with(func, |_| comm, body)
}

/// [`api`] for calls whose error handler depends on library state (the communicator of a
/// request): `comm_of` picks it under the same lock, before the body runs.
pub fn api_with<C, F>(func: &str, comm_of: C, body: F) -> c_int
where
    C: FnOnce(&Global) -> Option<usize>,
    F: FnOnce(&mut Global) -> Result<(), MpiError>,
{
    let mut guard = lock();
    let Some(g) = guard.as_mut() else { not_live(func) };
    let comm = comm_of(g);
    let mut r = body(g);
    if !g.pending.is_empty() {
        // THREAD_MULTIPLE: the body started a blocking operation and left its requests
        // here; wait for them with the lock released between rounds of progress.
        let hs = std::mem::take(&mut g.pending);
        if r.is_err() {
            return tail(guard, func, comm, r);
        }
        let (back, waited) = wait_released(guard, |g| Ok(hs.iter().all(|h| g.eng.is_complete(*h).unwrap_or(true))));
        guard = back;
        let g = live(&mut guard, func);
        r = waited.and_then(|()| finish_pending(g, &hs));
    }
    tail(guard, func, comm, r)
}

/// The end of every locked entry point: adopt communicators built in the background, run
/// deferred callbacks without the lock, report an error through the error handler.
#[inline]
fn tail(guard: Guard, func: &str, comm: Option<usize>, r: Result<(), MpiError>) -> c_int {
    // The common end, inlined into every entry point: a success with nothing to adopt or
    // call back.
    if let (Ok(()), Some(g)) = (&r, guard.as_ref()) {
        if !g.eng.run_through() && g.tables.deferred.is_empty() {
            drop(guard);
            return abi::MPI_SUCCESS;
        }
    }
    tail_general(guard, func, comm, r)
}

#[inline(never)]
fn tail_general(mut guard: Guard, func: &str, comm: Option<usize>, r: Result<(), MpiError>) -> c_int {
    let g = live(&mut guard, func);
    if g.eng.run_through() {
        adopt_background_comms(g);
    }
    if g.tables.deferred.is_empty() {
        return match r {
            Ok(()) => abi::MPI_SUCCESS,
            Err(e) => raise(guard, func, comm, Failure::Mpi(e)),
        };
    }
    // Application callbacks the body queued (generalized requests) run without the lock.
    let deferred = std::mem::take(&mut g.tables.deferred);
    let code = match r {
        Ok(()) => {
            drop(guard);
            abi::MPI_SUCCESS
        }
        Err(e) => raise(guard, func, comm, Failure::Mpi(e)),
    };
    // SAFETY: the application registered these callbacks with MPI_Grequest_start.
    match unsafe { crate::greq::run_deferred(deferred) } {
        abi::MPI_SUCCESS => code,
        rc if code == abi::MPI_SUCCESS => raise(lock(), func, comm, Failure::Code(rc)),
        _ => code,
    }
}

fn live<'a>(guard: &'a mut Guard, func: &str) -> &'a mut Global {
    match guard.as_mut() {
        Some(g) => g,
        None => not_live(func),
    }
}

/// Whether MPI_THREAD_MULTIPLE was provided: blocking calls then wait without the lock.
pub static MULTIPLE: AtomicBool = AtomicBool::new(false);

/// Whether blocking calls wait with the library lock released (MPI_THREAD_MULTIPLE).
pub fn multiple() -> bool {
    MULTIPLE.load(Ordering::Relaxed)
}

/// The requests of a blocking operation a body started under MPI_THREAD_MULTIPLE, to be
/// waited for by [`api_with`] after the body: their errors are the call's, and they are
/// released.
fn finish_pending(g: &mut Global, hs: &[Handle]) -> Result<(), MpiError> {
    let mut first = Ok(());
    for h in hs {
        let r = g.eng.wait(*h).and_then(|s| match s.error {
            Some(c) => Err(MpiError::new(c, "the operation failed")),
            None => Ok(()),
        });
        g.eng.release(*h);
        if first.is_ok() {
            first = r;
        }
    }
    first
}

/// MPI_THREAD_MULTIPLE's blocking wait: rounds of progress under the lock until `done`
/// holds, the lock released between rounds so other threads' calls (which may be what
/// `done` waits for) go on. Idle rounds spin (`STEADFAST_SPIN`), then yield
/// (`STEADFAST_YIELDS`), then sleep on the path's doorbell for at most 1 ms each, holding
/// the lock (a singleton, which has none, sleeps without it). Returns the guard, held again.
pub fn wait_released(
    mut guard: Guard,
    mut done: impl FnMut(&mut Global) -> Result<bool, MpiError>,
) -> (Guard, Result<(), MpiError>) {
    let mut idle = 0u32;
    loop {
        let Some(g) = guard.as_mut() else {
            return (guard, Err(MpiError::new(ErrorClass::Other, "MPI was finalized by another thread during a blocking call")));
        };
        let step = (|| {
            if done(g)? {
                return Ok(None);
            }
            let moved = g.eng.progress()?;
            if moved && done(g)? {
                // Control packets queued as the operation completed leave now.
                g.eng.progress()?;
                return Ok(None);
            }
            Ok::<_, MpiError>(Some(moved))
        })();
        let (spin, yields) = (g.eng.cfg.spin, g.eng.cfg.yields);
        match step {
            Err(e) => return (guard, Err(e)),
            Ok(None) => return (guard, Ok(())),
            Ok(Some(true)) => idle = 0,
            Ok(Some(false)) => idle = idle.saturating_add(1),
        }
        if idle == spin.max(1) {
            // Idle, as the engine's own wait serves them (Engine::block_until).
            if let Err(e) = g.eng.serve_collectives() {
                return (guard, Err(e));
            }
        }
        if idle >= spin.saturating_add(yields) && g.eng.size > 1 {
            // Idle for a while: sleep on the path's doorbell, which a peer's packet rings,
            // for at most DOORBELL_NAP with the lock held (other threads of this process wait
            // that long at most), then let them in.
            if let Err(e) = doorbell_nap(g) {
                return (guard, Err(e));
            }
            drop(guard);
            std::thread::yield_now();
        } else {
            drop(guard);
            if idle < spin {
                std::hint::spin_loop();
            } else if idle < spin.saturating_add(yields) {
                std::thread::yield_now();
            } else {
                // A singleton has no doorbell: only another thread of this process can
                // complete what it waits for.
                let pause = (idle - spin - yields).min(100) as u64 * 10;
                std::thread::sleep(std::time::Duration::from_micros(pause.max(10)));
            }
        }
        guard = lock();
    }
}

/// Longest doorbell sleep of a MPI_THREAD_MULTIPLE wait while it holds the lock.
const DOORBELL_NAP: std::time::Duration = std::time::Duration::from_millis(1);

/// One round of the engine's own blocking wait, cut short: progress, and if nothing moved one
/// sleep on the doorbell of at most [`DOORBELL_NAP`].
fn doorbell_nap(g: &mut Global) -> Result<(), MpiError> {
    let saved = (g.eng.cfg.spin, g.eng.cfg.yields, g.eng.cfg.sleep);
    g.eng.cfg.spin = 0;
    g.eng.cfg.yields = 0;
    g.eng.cfg.sleep = saved.2.min(DOORBELL_NAP);
    let mut checks = 0;
    // The first check precedes the engine's round of progress; the second follows either
    // that progress or one sleep.
    let r = g.eng.block_until(|_| {
        checks += 1;
        checks > 1
    });
    (g.eng.cfg.spin, g.eng.cfg.yields, g.eng.cfg.sleep) = saved;
    r
}

/// A blocking entry point's body: the lock, and waits that release it under
/// MPI_THREAD_MULTIPLE (see [`api_blocking`]).
pub struct Call {
    guard: Option<Guard>,
    func: &'static str,
}

impl Call {
    /// The library state (the lock is held).
    pub fn g(&mut self) -> &mut Global {
        let func = self.func;
        live(self.guard.as_mut().expect("the lock is held between waits"), func)
    }

    /// Block until `done` holds: the engine's own wait, which keeps the lock, or under
    /// MPI_THREAD_MULTIPLE [`wait_released`].
    pub fn until(&mut self, mut done: impl FnMut(&Engine) -> bool) -> Result<(), MpiError> {
        if !multiple() {
            return self.g().eng.block_until(done);
        }
        self.until_mut(|g| Ok(done(&g.eng)))
    }

    /// [`Call::until`] with a condition that needs the state mutably (a probe); always
    /// waits with the lock released between rounds.
    pub fn until_mut(&mut self, done: impl FnMut(&mut Global) -> Result<bool, MpiError>) -> Result<(), MpiError> {
        let guard = self.guard.take().expect("the lock is held between waits");
        let (guard, r) = wait_released(guard, done);
        self.guard = Some(guard);
        r
    }

    /// Wait for request `h` as MPI_Wait does (done, inactive, or an ANY_SOURCE receive
    /// blocked by an unacknowledged failure), then let the engine's wait report it.
    pub fn wait(&mut self, h: Handle) -> Result<Status, MpiError> {
        if multiple() {
            self.until(|e| e.request(h).map_or(true, |r| r.complete || (r.persistent && !r.active)) || e.any_source_blocked(h))?;
        }
        self.g().eng.wait(h)
    }
}

/// [`api_with`] for calls that block: the body gets a [`Call`], whose waits release the
/// lock under MPI_THREAD_MULTIPLE.
pub fn api_blocking<C, F>(func: &'static str, comm_of: C, body: F) -> c_int
where
    C: FnOnce(&Global) -> Option<usize>,
    F: FnOnce(&mut Call) -> Result<(), MpiError>,
{
    let mut guard = lock();
    let comm = comm_of(live(&mut guard, func));
    let mut call = Call { guard: Some(guard), func };
    let r = body(&mut call);
    tail(call.guard.take().expect("the lock is held after the body"), func, comm, r)
}

/// Communicators the engine built in the background (MPIX_Comm_ishrink) hold a reference on
/// the error handler they inherited, like every communicator handed to the application.
fn adopt_background_comms(g: &mut Global) {
    for h in g.eng.take_new_comms() {
        if let Ok(c) = g.eng.comm(h) {
            let e = c.errhandler;
            crate::errhandler::retain(g, e);
        }
    }
}

/// Like [`api`] for bodies that call application callbacks (attribute copy / delete
/// functions): the body takes the lock itself, phase by phase, with [`locked`], and calls
/// callbacks between phases, so a callback may call MPI.
pub fn api_unlocked<F>(func: &str, comm: Option<usize>, body: F) -> c_int
where
    F: FnOnce() -> Result<(), Failure>,
{
    if lock().is_none() {
        not_live(func);
    }
    match body() {
        Ok(()) => abi::MPI_SUCCESS,
        Err(f) => raise(lock(), func, comm, f),
    }
}

/// Run one phase of an [`api_unlocked`] body under the lock.
pub fn locked<R>(f: impl FnOnce(&mut Global) -> Result<R, MpiError>) -> Result<R, Failure> {
    let mut guard = lock();
    let Some(g) = guard.as_mut() else {
        return Err(Failure::Mpi(MpiError::new(ErrorClass::Other, "MPI is not initialised")));
    };
    let r = f(g);
    if g.pending.is_empty() {
        return r.map_err(Failure::Mpi);
    }
    // A blocking operation the phase started (THREAD_MULTIPLE), as in `api_with`.
    let hs = std::mem::take(&mut g.pending);
    let v = r.map_err(Failure::Mpi)?;
    let (mut guard, waited) = wait_released(guard, |g| Ok(hs.iter().all(|h| g.eng.is_complete(*h).unwrap_or(true))));
    let Some(g) = guard.as_mut() else {
        return Err(Failure::Mpi(MpiError::new(ErrorClass::Other, "MPI was finalized during a blocking call")));
    };
    waited.and_then(|()| finish_pending(g, &hs)).map_err(Failure::Mpi)?;
    Ok(v)
}

/// The error handler that applies to calls on `comm` (MPI_COMM_WORLD's when `comm` is None
/// or invalid).
fn handler_of(g: &Global, comm: Option<usize>) -> (u64, usize) {
    if let Some(c) = comm {
        if let Ok(h) = comm_handle(g, c) {
            if let Ok(x) = g.eng.comm(h) {
                if x.errhandler != 0 {
                    return (x.errhandler, c);
                }
            }
        }
    }
    (g.eng.comm(g.eng.world).map_or(0, |c| c.errhandler), abi::MPI_COMM_WORLD)
}

/// Turn a failure into the code handed to the application, and apply the error handler:
/// MPI_ERRORS_RETURN returns the code, a user handler is called (after the lock is
/// released, since it may call MPI) and then the code is returned, anything else aborts.
fn raise(mut guard: Guard, func: &str, comm: Option<usize>, f: Failure) -> c_int {
    let Some(g) = guard.as_mut() else { not_live(func) };
    if let (Failure::Mpi(e), Some(c)) = (&f, comm) {
        if e.class == ErrorClass::ProcFailed {
            // From now on the application knows: run-through collectives on this
            // communicator go on without the failed members.
            if let Ok(h) = comm_handle(g, c) {
                g.eng.comm_mark_reported(h);
            }
        }
    }
    let (code, text) = match f {
        Failure::Code(c) if crate::errhandler::is_known_code(g, c) => {
            let class = class_of_code(g, c);
            (c, format!("{func}: error code {c} ({})", class_name(class)))
        }
        Failure::Code(c) => {
            let text = format!("{func}: a callback returned error code {c}, which is not a valid MPI error code (MPI_ERR_OTHER)");
            (g.errors.code(abi::MPI_ERR_OTHER, text.clone()), text)
        }
        Failure::Mpi(e) => {
            let class = abi_class(e.class);
            let text = format!("{func}: {} ({})", e.msg, class_name(class));
            (g.errors.code(class, text.clone()), text)
        }
    };
    let (handler, comm_value) = handler_of(g, comm);
    match handler as usize {
        abi::MPI_ERRORS_RETURN => code,
        h if h > abi::PREDEFINED_HANDLE_MAX => {
            let Some(func_ptr) = g.tables.errhandlers.get(Handle(handler)).map(|e| e.func) else {
                return code;
            };
            drop(guard);
            let mut c = comm_value as abi::MPI_Comm;
            let mut code_arg = code;
            // SAFETY: the application registered `func_ptr` as an MPI_Comm_errhandler_function.
            unsafe { crate::errhandler::call_comm_handler(func_ptr, &mut c, &mut code_arg) };
            code
        }
        _ => {
            let rank = g.eng.rank;
            eprintln!("steadfast: rank {rank}: {text}");
            g.eng.abort(class_of_code(g, code), &format!("rank {rank}: {text}"));
        }
    }
}

/// Like [`api`] for calls allowed before MPI_Init / after MPI_Finalize.
pub fn api_anytime<F>(body: F) -> c_int
where
    F: FnOnce() -> Result<(), c_int>,
{
    match body() {
        Ok(()) => abi::MPI_SUCCESS,
        Err(c) => c,
    }
}

// ---- handle translation --------------------------------------------------------------------

/// Engine handle of communicator `c`. Inlined where it is called (every communication call
/// makes it); the errors are built out of line.
#[inline]
pub fn comm_handle(g: &Global, c: usize) -> Result<Handle, MpiError> {
    match c {
        abi::MPI_COMM_WORLD => Ok(g.eng.world),
        abi::MPI_COMM_SELF => Ok(g.eng.self_comm),
        v => {
            let h = Handle(v as u64);
            if v != abi::MPI_COMM_NULL && g.eng.comm(h).is_ok() {
                Ok(h)
            } else {
                Err(bad_comm(v))
            }
        }
    }
}

#[cold]
#[inline(never)]
fn bad_comm(v: usize) -> MpiError {
    if v == abi::MPI_COMM_NULL {
        MpiError::new(ErrorClass::Comm, "MPI_COMM_NULL is not a valid communicator here")
    } else {
        MpiError::new(ErrorClass::Comm, format!("invalid communicator handle {v:#x}"))
    }
}

/// The datatype behind handle `t`.
pub fn dtype(g: &Global, t: usize) -> Result<TypeRef, MpiError> {
    if t == abi::MPI_DATATYPE_NULL {
        return Err(MpiError::new(ErrorClass::Type, "MPI_DATATYPE_NULL is not a valid datatype here"));
    }
    let found = if abi::is_predefined_handle(t) {
        g.predef_types.get(t).and_then(|x| x.clone())
    } else {
        g.types.get(Handle(t as u64)).cloned()
    };
    let ty = found.ok_or_else(|| MpiError::new(ErrorClass::Type, format!("invalid datatype handle {t:#x}")))?;
    if !ty.committed {
        return Err(MpiError::new(ErrorClass::Type, format!("datatype {} is not committed", ty.name)));
    }
    Ok(ty)
}

/// Build the predefined datatype table from the ABI description.
pub fn predefined_types() -> Vec<Option<TypeRef>> {
    crate::datatype::predefined_table()
}

/// [`Global::predef_contig`] of the predefined types `types` (their layouts never change;
/// only names and attributes do).
pub fn predefined_contig(types: &[Option<TypeRef>]) -> Vec<usize> {
    types.iter().map(|t| t.as_ref().filter(|t| t.committed && t.is_contiguous()).map_or(usize::MAX, |t| t.size)).collect()
}

// ---- status ---------------------------------------------------------------------------------

/// Write an engine status into a C status (unless MPI_STATUS_IGNORE). `with_error` also sets
/// MPI_ERROR (only the multiple-completion calls do).
///
/// # Safety
/// `out` is null or points to a writable MPI_Status.
pub unsafe fn put_status(out: *mut abi::MPI_Status, s: &Status, with_error: Option<c_int>) {
    if out.is_null() {
        return;
    }
    let o = &mut *out;
    o.MPI_SOURCE = s.source;
    o.MPI_TAG = s.tag;
    if let Some(e) = with_error {
        o.MPI_ERROR = e;
    }
    set_status_count(o, s.bytes as i64);
    o.internal[2] = s.cancelled as i32;
}

/// Store a byte count in a status's private words.
pub fn set_status_count(o: &mut abi::MPI_Status, bytes: i64) {
    o.internal[0] = bytes as u32 as i32;
    o.internal[1] = (bytes >> 32) as i32;
}

/// Byte count stored in a status.
pub fn status_count(o: &abi::MPI_Status) -> i64 {
    (o.internal[0] as u32 as i64) | ((o.internal[1] as i64) << 32)
}

/// An empty status (what waits on null or inactive requests return).
pub fn empty_status() -> Status {
    Status { source: abi::MPI_ANY_SOURCE, tag: abi::MPI_ANY_TAG, error: None, bytes: 0, cancelled: false }
}

/// Whether a thread other than the one that initialised MPI may call in.
pub fn is_main_thread(g: &Global) -> bool {
    std::thread::current().id() == g.main_thread
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    /// With the lock in use (not [`SOLO`]), threads that take it are never inside together:
    /// a count kept with separate load and store (no atomic add) loses no update, also when
    /// waiters go to sleep on the futex (a body that sleeps makes the others wait long).
    #[test]
    fn the_lock_excludes_threads() {
        static COUNT: AtomicU64 = AtomicU64::new(0);
        static INSIDE: AtomicU32 = AtomicU32::new(0);
        SOLO.store(false, Ordering::Relaxed);
        let threads: Vec<_> = (0..4)
            .map(|t| {
                std::thread::spawn(move || {
                    for i in 0..20_000u32 {
                        let guard = lock();
                        assert_eq!(INSIDE.fetch_add(1, Ordering::SeqCst), 0, "two threads inside the lock");
                        let v = COUNT.load(Ordering::Relaxed);
                        if (i + t) % 5_000 == 0 {
                            std::thread::sleep(std::time::Duration::from_millis(2));
                        }
                        COUNT.store(v + 1, Ordering::Relaxed);
                        INSIDE.fetch_sub(1, Ordering::SeqCst);
                        drop(guard);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("thread ran");
        }
        assert_eq!(COUNT.load(Ordering::Relaxed), 80_000);
        assert_eq!(GLOBAL.state.load(Ordering::Relaxed), 0, "released at the end");
    }
}
