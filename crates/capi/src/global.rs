//! Process-wide library state, handle translation and error reporting for the C entry points.
//!
//! One lock guards the engine. Every entry point runs its body through [`api`], which checks
//! that MPI is initialised, runs the body under the lock, and on error consults the
//! communicator's error handler *after* releasing the lock (a user handler may call MPI).

use std::collections::VecDeque;
use std::ffi::c_int;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Mutex, MutexGuard};

use steadfast_core::datatype::TypeRef;
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
    pub types: Slab<TypeRef>,
    pub errors: ErrorLog,
    pub thread_level: c_int,
    pub main_thread: std::thread::ThreadId,
    /// Attached Bsend buffer (address, size).
    pub bsend_buf: Option<(usize, usize)>,
}

pub static GLOBAL: Mutex<Option<Global>> = Mutex::new(None);

/// Lock the global state, surviving a poisoned lock (a panic already reported itself).
pub fn lock() -> MutexGuard<'static, Option<Global>> {
    GLOBAL.lock().unwrap_or_else(|p| p.into_inner())
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
    /// Message recorded under `code`, if it is one of ours.
    pub fn message(&self, code: c_int) -> Option<&str> {
        if !(DYN_BASE..DYN_BASE + DYN_SLOTS as c_int * 64).contains(&code) {
            return None;
        }
        let slot = ((code - DYN_BASE) / 64) as usize;
        self.slots.get(slot).map(|s| s.as_str())
    }
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
    }
}

/// Short name of an error class ("MPI_ERR_COUNT").
pub fn class_name(class: c_int) -> &'static str {
    abi::ERROR_CLASSES.iter().find(|e| e.0 == class).map_or("MPI_ERR_UNKNOWN", |e| e.1)
}

/// Run an entry point's body. `comm` selects the error handler (None: MPI_COMM_WORLD's).
pub fn api<F>(func: &str, comm: Option<usize>, body: F) -> c_int
where
    F: FnOnce(&mut Global) -> Result<(), MpiError>,
{
    let mut guard = lock();
    let Some(g) = guard.as_mut() else {
        let phase = PHASE.load(Ordering::Acquire);
        let why = if phase == PHASE_DONE { "after MPI_Finalize" } else { "before MPI_Init" };
        drop(guard);
        eprintln!("steadfast: {func} called {why}");
        std::process::exit(1);
    };
    let Err(e) = body(g) else { return abi::MPI_SUCCESS };
    let class = abi_class(e.class);
    let text = format!("{func}: {} ({})", e.msg, class_name(class));
    let code = g.errors.code(class, text.clone());
    let handler = comm
        .and_then(|c| comm_handle(g, c).ok())
        .and_then(|h| g.eng.comm(h).ok())
        .map_or(0, |c| c.errhandler);
    let handler = if handler == 0 {
        g.eng.comm(g.eng.world).map_or(0, |c| c.errhandler)
    } else {
        handler
    };
    if handler as usize == abi::MPI_ERRORS_RETURN {
        return code;
    }
    let rank = g.eng.rank;
    eprintln!("steadfast: rank {rank}: {text}");
    g.eng.abort(class, &format!("rank {rank}: {text}"));
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

/// Engine handle of communicator `c`.
pub fn comm_handle(g: &Global, c: usize) -> Result<Handle, MpiError> {
    match c {
        abi::MPI_COMM_WORLD => Ok(g.eng.world),
        abi::MPI_COMM_SELF => Ok(g.eng.self_comm),
        abi::MPI_COMM_NULL => Err(MpiError::new(ErrorClass::Comm, "MPI_COMM_NULL is not a valid communicator here")),
        v => {
            let h = Handle(v as u64);
            g.eng.comm(h).map(|_| h).map_err(|_| MpiError::new(ErrorClass::Comm, format!("invalid communicator handle {v:#x}")))
        }
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
