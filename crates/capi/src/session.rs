//! The Sessions Model: MPI_Session_init / finalize, process sets, session error handlers.
//!
//! Sessions share the engine with the World Model: the first of MPI_Init and
//! MPI_Session_init starts it, and it stops when the World Model is finalised and no session
//! is left (after that the library cannot be initialised again in the same process). The
//! process sets are the two every MPI provides, `mpi://WORLD` and `mpi://SELF`.

use std::ffi::{c_char, c_int, CStr};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use steadfast_core::info::Info;
use steadfast_core::slab::Slab;
use steadfast_core::{ErrorClass, Handle, MpiError};

use crate::abi::{self, MPI_Errhandler, MPI_Group, MPI_Info, MPI_Session};
use crate::env::{write_cstr, SESSIONS};
use crate::global::{api, lock, Global};
use crate::mpi_api;

fn err(class: ErrorClass, msg: impl Into<String>) -> MpiError {
    MpiError::new(class, msg)
}

/// One session.
struct Session {
    errhandler: u64,
    thread_level: c_int,
}

static SESSION_TABLE: Mutex<Option<Slab<Session>>> = Mutex::new(None);

fn with_sessions<R>(f: impl FnOnce(&mut Slab<Session>) -> R) -> R {
    let mut guard = SESSION_TABLE.lock().unwrap_or_else(|p| p.into_inner());
    f(guard.get_or_insert_with(Slab::default))
}

/// Check a session handle the application passed.
pub fn check(_g: &Global, s: MPI_Session) -> Result<(), MpiError> {
    let v = s as usize;
    if v == abi::MPI_SESSION_NULL {
        return Err(err(ErrorClass::Session, "MPI_SESSION_NULL is not a valid session here"));
    }
    if with_sessions(|t| t.get(Handle(v as u64)).is_some()) {
        Ok(())
    } else {
        Err(err(ErrorClass::Session, format!("invalid session handle {v:#x}")))
    }
}

const PSETS: [&str; 2] = ["mpi://WORLD", "mpi://SELF"];

fn pset_members(g: &Global, name: &str) -> Result<Vec<u32>, MpiError> {
    match name.to_ascii_lowercase().as_str() {
        "mpi://world" => Ok((0..g.eng.size).collect()),
        "mpi://self" => Ok(vec![g.eng.rank]),
        _ => Err(err(ErrorClass::Arg, format!("no process set named {name:?} (known: mpi://WORLD, mpi://SELF)"))),
    }
}

unsafe fn pset_name(p: *const c_char) -> Result<String, MpiError> {
    if p.is_null() {
        return Err(err(ErrorClass::Arg, "process set name is NULL"));
    }
    Ok(CStr::from_ptr(p).to_string_lossy().into_owned())
}

fn thread_level_of(name: &str) -> Option<c_int> {
    match name.trim().to_ascii_uppercase().as_str() {
        "MPI_THREAD_SINGLE" => Some(abi::MPI_THREAD_SINGLE),
        "MPI_THREAD_FUNNELED" => Some(abi::MPI_THREAD_FUNNELED),
        "MPI_THREAD_SERIALIZED" => Some(abi::MPI_THREAD_SERIALIZED),
        "MPI_THREAD_MULTIPLE" => Some(abi::MPI_THREAD_MULTIPLE),
        _ => None,
    }
}

fn thread_level_name(l: c_int) -> &'static str {
    match l {
        abi::MPI_THREAD_FUNNELED => "MPI_THREAD_FUNNELED",
        abi::MPI_THREAD_SERIALIZED => "MPI_THREAD_SERIALIZED",
        abi::MPI_THREAD_MULTIPLE => "MPI_THREAD_MULTIPLE",
        _ => "MPI_THREAD_SINGLE",
    }
}

type SessionErrhandlerFn = unsafe extern "C" fn(*mut MPI_Session, *mut c_int, ...);

mpi_api! {
    fn Session_init(info: MPI_Info, errhandler: MPI_Errhandler, session: *mut MPI_Session) -> c_int {
        if session.is_null() {
            return abi::MPI_ERR_ARG;
        }
        // The requested thread level comes from the info key "thread_level".
        let requested = if info as usize == abi::MPI_INFO_NULL {
            abi::MPI_THREAD_SINGLE
        } else {
            let value = crate::info::requested_value(info, "thread_level");
            value.as_deref().and_then(thread_level_of).unwrap_or(abi::MPI_THREAD_SINGLE)
        };
        let level = match crate::env::start_engine(requested, false) {
            Ok(l) => l,
            Err(c) => return c,
        };
        SESSIONS.fetch_add(1, Ordering::AcqRel);
        let rc = api("MPI_Session_init", None, |g| {
            let e = errhandler as usize;
            crate::errhandler::check_errhandler(g, e)?;
            crate::errhandler::retain(g, e as u64);
            let h = with_sessions(|t| t.insert(Session { errhandler: e as u64, thread_level: level }));
            *session = h.0 as MPI_Session;
            Ok(())
        });
        if rc != abi::MPI_SUCCESS {
            SESSIONS.fetch_sub(1, Ordering::AcqRel);
        }
        rc
    }

    fn Session_finalize(session: *mut MPI_Session) -> c_int {
        let rc = api("MPI_Session_finalize", None, |g| {
            if session.is_null() {
                return Err(err(ErrorClass::Arg, "session pointer is NULL"));
            }
            check(g, *session)?;
            let s = with_sessions(|t| t.remove(Handle(*session as u64)));
            if let Some(s) = s {
                crate::errhandler::release(g, s.errhandler);
            }
            *session = abi::MPI_SESSION_NULL as MPI_Session;
            Ok(())
        });
        if rc != abi::MPI_SUCCESS {
            return rc;
        }
        if SESSIONS.fetch_sub(1, Ordering::AcqRel) == 1 && !crate::env::WORLD_ACTIVE.load(Ordering::Acquire) {
            return crate::env::stop_engine("MPI_Session_finalize");
        }
        rc
    }

    fn Session_get_num_psets(session: MPI_Session, _info: MPI_Info, npset_names: *mut c_int) -> c_int {
        session_api("MPI_Session_get_num_psets", session, |g| {
            check(g, session)?;
            if npset_names.is_null() {
                return Err(err(ErrorClass::Arg, "npset_names pointer is NULL"));
            }
            *npset_names = PSETS.len() as c_int;
            Ok(())
        })
    }

    fn Session_get_nth_pset(session: MPI_Session, _info: MPI_Info, n: c_int, pset_len: *mut c_int, pset_name: *mut c_char) -> c_int {
        session_api("MPI_Session_get_nth_pset", session, |g| {
            check(g, session)?;
            if pset_len.is_null() {
                return Err(err(ErrorClass::Arg, "pset_len pointer is NULL"));
            }
            let name = usize::try_from(n).ok().and_then(|i| PSETS.get(i)).ok_or_else(|| err(ErrorClass::Arg, format!("process set index {n} out of range")))?;
            // pset_len 0 asks for the length (including the terminating NUL).
            if *pset_len == 0 || pset_name.is_null() {
                *pset_len = name.len() as c_int + 1;
                return Ok(());
            }
            let cap = *pset_len as usize;
            write_cstr(pset_name, name, cap);
            *pset_len = name.len() as c_int + 1;
            Ok(())
        })
    }

    fn Session_get_pset_info(session: MPI_Session, pset_name: *const c_char, info: *mut MPI_Info) -> c_int {
        session_api("MPI_Session_get_pset_info", session, |g| {
            check(g, session)?;
            let name = pset_name_arg(pset_name)?;
            let members = pset_members(g, &name)?;
            let mut i = Info::new();
            i.set("mpi_size", &members.len().to_string())?;
            crate::info::out_info(g, i, info)
        })
    }

    fn Session_get_info(session: MPI_Session, info_used: *mut MPI_Info) -> c_int {
        session_api("MPI_Session_get_info", session, |g| {
            check(g, session)?;
            let level = with_sessions(|t| t.get(Handle(session as u64)).map(|s| s.thread_level)).unwrap_or(abi::MPI_THREAD_SINGLE);
            let mut i = Info::new();
            i.set("thread_level", thread_level_name(level))?;
            crate::info::out_info(g, i, info_used)
        })
    }

    fn Group_from_session_pset(session: MPI_Session, pset_name: *const c_char, newgroup: *mut MPI_Group) -> c_int {
        session_api("MPI_Group_from_session_pset", session, |g| {
            check(g, session)?;
            let name = pset_name_arg(pset_name)?;
            let members = pset_members(g, &name)?;
            crate::group::out_group(g, Arc::new(members), newgroup)
        })
    }

    fn Session_create_errhandler(session_errhandler_fn: Option<SessionErrhandlerFn>, errhandler: *mut MPI_Errhandler) -> c_int {
        crate::errhandler::create_user(
            "MPI_Session_create_errhandler",
            session_errhandler_fn.map(|f| f as usize),
            errhandler,
        )
    }

    fn Session_set_errhandler(session: MPI_Session, errhandler: MPI_Errhandler) -> c_int {
        session_api("MPI_Session_set_errhandler", session, |g| {
            check(g, session)?;
            crate::errhandler::check_errhandler(g, errhandler as usize)?;
            let new = errhandler as u64;
            crate::errhandler::retain(g, new);
            let old = with_sessions(|t| t.get_mut(Handle(session as u64)).map(|s| std::mem::replace(&mut s.errhandler, new)));
            if let Some(old) = old {
                crate::errhandler::release(g, old);
            }
            Ok(())
        })
    }

    fn Session_get_errhandler(session: MPI_Session, errhandler: *mut MPI_Errhandler) -> c_int {
        session_api("MPI_Session_get_errhandler", session, |g| {
            check(g, session)?;
            if errhandler.is_null() {
                return Err(err(ErrorClass::Arg, "errhandler pointer is NULL"));
            }
            let e = with_sessions(|t| t.get(Handle(session as u64)).map(|s| s.errhandler)).unwrap_or(abi::MPI_ERRORS_ARE_FATAL as u64);
            crate::errhandler::retain(g, e);
            *errhandler = e as MPI_Errhandler;
            Ok(())
        })
    }

    fn Session_call_errhandler(session: MPI_Session, errorcode: c_int) -> c_int {
        let mut guard = lock();
        let Some(g) = guard.as_mut() else {
            drop(guard);
            return api("MPI_Session_call_errhandler", None, |_| Ok(()));
        };
        if let Err(e) = check(g, session) {
            drop(guard);
            return api("MPI_Session_call_errhandler", None, |_| Err(e));
        }
        let e = with_sessions(|t| t.get(Handle(session as u64)).map(|s| s.errhandler)).unwrap_or(0) as usize;
        match e {
            abi::MPI_ERRORS_RETURN => abi::MPI_SUCCESS,
            e if e > abi::PREDEFINED_HANDLE_MAX => {
                let Some(f) = g.tables.errhandlers.get(Handle(e as u64)).map(|x| x.func) else {
                    return abi::MPI_SUCCESS;
                };
                drop(guard);
                let mut s = session;
                let mut code = errorcode;
                // SAFETY: registered with MPI_Session_create_errhandler.
                let f: SessionErrhandlerFn = std::mem::transmute::<usize, SessionErrhandlerFn>(f);
                f(&mut s, &mut code);
                abi::MPI_SUCCESS
            }
            _ => {
                let rank = g.eng.rank;
                let msg = format!("rank {rank}: MPI_Session_call_errhandler: error code {errorcode} raised on a session with a fatal error handler");
                eprintln!("steadfast: {msg}");
                let class = crate::global::class_of_code(g, errorcode);
                g.eng.abort(if class == 0 { 1 } else { class }, &msg);
            }
        }
    }
}

/// Like [`api`] for calls on a session: errors go to the session's error handler.
fn session_api(func: &str, session: MPI_Session, body: impl FnOnce(&mut Global) -> Result<(), MpiError>) -> c_int {
    let mut guard = lock();
    let Some(g) = guard.as_mut() else {
        drop(guard);
        return api(func, None, |_| Ok(()));
    };
    let e = match body(g) {
        Ok(()) => return abi::MPI_SUCCESS,
        Err(e) => e,
    };
    let Some(handler) = with_sessions(|t| t.get(Handle(session as u64)).map(|x| x.errhandler)) else {
        drop(guard);
        return api(func, None, |_| Err(e));
    };
    crate::errhandler::report_to_object_handler(guard, func, handler as usize, e, |f, c| {
        let mut s = session;
        // SAFETY: registered with MPI_Session_create_errhandler.
        unsafe {
            let f: SessionErrhandlerFn = std::mem::transmute::<usize, SessionErrhandlerFn>(f);
            f(&mut s, c);
        }
    })
}

unsafe fn pset_name_arg(p: *const c_char) -> Result<String, MpiError> {
    pset_name(p)
}
