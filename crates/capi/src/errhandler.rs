//! Error handlers on communicators, and error classes, codes and strings the application adds.
//!
//! A user error handler is a slab entry holding the C function pointer, reference-counted:
//! the application's handle and every communicator using it each hold one reference, and
//! MPI_Comm_get_errhandler hands out a new one. Handlers run after the library lock is
//! released (see `global::raise`), so they may call MPI.
//!
//! User classes and codes are numbered from MPI_ERR_LASTCODE + 1 (0x4000) up to 0x7fff, above
//! every value the library uses (classes, MPI_T classes, the message-carrying codes at
//! 0x2000.. and the MPIX classes at 0x3ff0..), as applications and mpi4py expect added
//! classes to be greater than MPI_ERR_LASTCODE. Numbers are reused after MPI_Remove_error_*.
//! MPI_LASTUSEDCODE reports max(MPI_ERR_LASTCODE, largest added value), as the standard
//! requires it to be at least MPI_ERR_LASTCODE.

use std::collections::{BTreeSet, HashMap};
use std::ffi::{c_char, c_int};
use std::sync::atomic::{AtomicI32, Ordering};

use steadfast_core::{ErrorClass, Handle, MpiError};

use crate::abi::{self, MPI_Comm, MPI_Errhandler};
use crate::env::write_cstr;
use crate::global::{self, api, api_anytime, class_of_code, comm_handle, lock, Global};
use crate::mpi_api;

fn err(class: ErrorClass, msg: impl Into<String>) -> MpiError {
    MpiError::new(class, msg)
}

/// A user error handler.
#[derive(Debug, Clone, Copy)]
pub struct UserErrhandler {
    /// The MPI_Comm_errhandler_function pointer.
    pub func: usize,
    refs: u32,
}

type CommErrhandlerFn = unsafe extern "C" fn(*mut MPI_Comm, *mut c_int, ...);

/// Call a user communicator error handler.
///
/// # Safety
/// `func` must be a function pointer of type MPI_Comm_errhandler_function.
pub unsafe fn call_comm_handler(func: usize, comm: *mut MPI_Comm, code: *mut c_int) {
    let f: CommErrhandlerFn = std::mem::transmute::<usize, CommErrhandlerFn>(func);
    f(comm, code);
}

/// Whether `e` is one of the predefined error handlers.
pub fn is_predefined(e: usize) -> bool {
    matches!(e, abi::MPI_ERRORS_ARE_FATAL | abi::MPI_ERRORS_RETURN | abi::MPI_ERRORS_ABORT)
}

/// Check an error handler handle the application passed.
pub fn check_errhandler(g: &Global, e: usize) -> Result<(), MpiError> {
    if is_predefined(e) || (e > abi::PREDEFINED_HANDLE_MAX && g.tables.errhandlers.get(Handle(e as u64)).is_some()) {
        Ok(())
    } else if e == abi::MPI_ERRHANDLER_NULL {
        Err(err(ErrorClass::Arg, "MPI_ERRHANDLER_NULL is not a valid error handler here"))
    } else {
        Err(err(ErrorClass::Arg, format!("invalid error handler {e:#x}")))
    }
}

/// Create a user error handler for a window, session or file: all user handlers share one
/// table (the handler function's first argument is the object's handle in each case).
pub unsafe fn create_user(func: &str, f: Option<usize>, errhandler: *mut MPI_Errhandler) -> c_int {
    api(func, None, |g| {
        let Some(f) = f else {
            return Err(err(ErrorClass::Arg, "the error handler function is NULL"));
        };
        if errhandler.is_null() {
            return Err(err(ErrorClass::Arg, "errhandler pointer is NULL"));
        }
        let h = g.tables.errhandlers.insert(UserErrhandler { func: f, refs: 1 });
        *errhandler = h.0 as MPI_Errhandler;
        Ok(())
    })
}

/// Take a reference on error handler `e` (no-op for predefined ones).
pub fn retain(g: &mut Global, e: u64) {
    if let Some(h) = g.tables.errhandlers.get_mut(Handle(e)) {
        h.refs += 1;
    }
}

/// Drop a reference on error handler `e`; the last one frees it.
pub fn release(g: &mut Global, e: u64) {
    if let Some(h) = g.tables.errhandlers.get_mut(Handle(e)) {
        h.refs -= 1;
        if h.refs == 0 {
            g.tables.errhandlers.remove(Handle(e));
        }
    }
}

// ---- user error classes and codes --------------------------------------------------------

const FIRST_USER_CODE: c_int = abi::MPI_ERR_LASTCODE + 1;
const LAST_USER_CODE: c_int = 0x7fff;
const MPI_T_CLASSES: std::ops::RangeInclusive<c_int> = 1000..=1099;

/// Value behind the MPI_LASTUSEDCODE attribute (its address is handed out).
pub static LAST_USED_CODE: AtomicI32 = AtomicI32::new(abi::MPI_ERR_LASTCODE);

/// Error classes, codes and strings added with MPI_Add_error_*.
#[derive(Debug, Default)]
pub struct UserErrors {
    /// Added classes and the number of codes added under each.
    classes: HashMap<c_int, usize>,
    /// Added codes and their class.
    codes: HashMap<c_int, c_int>,
    /// Strings of added classes and codes.
    strings: HashMap<c_int, String>,
    /// Removed values, handed out again first (smallest first).
    free: BTreeSet<c_int>,
    /// Next value never handed out.
    next: c_int,
}

impl UserErrors {
    fn alloc(&mut self) -> Result<c_int, MpiError> {
        let v = match self.free.pop_first() {
            Some(v) => v,
            None => {
                let mut v = self.next.max(FIRST_USER_CODE);
                if MPI_T_CLASSES.contains(&v) {
                    v = *MPI_T_CLASSES.end() + 1;
                }
                if v > LAST_USER_CODE {
                    return Err(err(ErrorClass::NoMem, "no error codes left to add"));
                }
                self.next = v + 1;
                v
            }
        };
        self.publish();
        Ok(v)
    }

    fn unalloc(&mut self, v: c_int) {
        self.free.insert(v);
        self.publish();
    }

    fn publish(&self) {
        // Every added value lies below `next`; the standard wants at least MPI_ERR_LASTCODE.
        LAST_USED_CODE.store((self.next - 1).max(abi::MPI_ERR_LASTCODE), Ordering::Relaxed);
    }

    /// Class of an added class or code.
    pub fn class_of(&self, code: c_int) -> Option<c_int> {
        if self.classes.contains_key(&code) {
            Some(code)
        } else {
            self.codes.get(&code).copied()
        }
    }

    /// Whether `code` is an added class or code.
    pub fn contains(&self, code: c_int) -> bool {
        self.class_of(code).is_some()
    }

    /// String added for `code` ("" if none).
    pub fn string(&self, code: c_int) -> Option<&str> {
        self.contains(code).then(|| self.strings.get(&code).map_or("", |s| s.as_str()))
    }
}

/// Whether `code` is a valid error class or code: predefined, made by the library, or added.
/// Report error `e` of `func` to `handler`, the error handler of a window or session
/// (taken under `guard`, which is released before a user handler runs): the error code for
/// MPI_ERRORS_RETURN, a user handler called through `invoke(func_address, &mut code)`,
/// the job ended otherwise (MPI_ERRORS_ARE_FATAL, MPI_ERRORS_ABORT).
pub fn report_to_object_handler(
    mut guard: crate::global::Guard,
    func: &str,
    handler: usize,
    e: MpiError,
    invoke: impl FnOnce(usize, &mut c_int),
) -> c_int {
    let Some(g) = guard.as_mut() else { return abi::MPI_ERR_OTHER };
    let class = global::abi_class(e.class);
    let text = format!("{func}: {} ({})", e.msg, global::class_name(class));
    let code = g.errors.code(class, text.clone());
    match handler {
        abi::MPI_ERRORS_RETURN => code,
        h if h > abi::PREDEFINED_HANDLE_MAX => {
            let Some(f) = g.tables.errhandlers.get(Handle(h as u64)).map(|x| x.func) else { return code };
            drop(guard);
            let mut c = code;
            invoke(f, &mut c);
            code
        }
        _ => {
            let rank = g.eng.rank;
            eprintln!("steadfast: rank {rank}: {text}");
            g.eng.abort(class, &format!("rank {rank}: {text}"));
        }
    }
}

pub fn is_known_code(g: &Global, code: c_int) -> bool {
    abi::error_class_text(code).is_some()
        || global::ErrorLog::is_library_code(code)
        || g.tables.user_errors.contains(code)
}

fn is_predefined_class(class: c_int) -> bool {
    class == abi::MPI_SUCCESS || abi::error_class_text(class).is_some()
}

mpi_api! {
    fn Comm_create_errhandler(comm_errhandler_fn: Option<CommErrhandlerFn>, errhandler: *mut MPI_Errhandler) -> c_int {
        api("MPI_Comm_create_errhandler", None, |g| {
            let Some(f) = comm_errhandler_fn else {
                return Err(err(ErrorClass::Arg, "the error handler function is NULL"));
            };
            if errhandler.is_null() {
                return Err(err(ErrorClass::Arg, "errhandler pointer is NULL"));
            }
            let h = g.tables.errhandlers.insert(UserErrhandler { func: f as usize, refs: 1 });
            *errhandler = h.0 as MPI_Errhandler;
            Ok(())
        })
    }

    fn Comm_set_errhandler(comm: MPI_Comm, errhandler: MPI_Errhandler) -> c_int {
        api("MPI_Comm_set_errhandler", Some(comm as usize), |g| {
            let h = comm_handle(g, comm as usize)?;
            check_errhandler(g, errhandler as usize)?;
            let new = errhandler as u64;
            retain(g, new);
            let old = std::mem::replace(&mut g.eng.comm_mut(h)?.errhandler, new);
            release(g, old);
            Ok(())
        })
    }

    fn Comm_get_errhandler(comm: MPI_Comm, errhandler: *mut MPI_Errhandler) -> c_int {
        api("MPI_Comm_get_errhandler", Some(comm as usize), |g| {
            let h = comm_handle(g, comm as usize)?;
            if errhandler.is_null() {
                return Err(err(ErrorClass::Arg, "errhandler pointer is NULL"));
            }
            let mut e = g.eng.comm(h)?.errhandler;
            if e == 0 {
                e = abi::MPI_ERRORS_ARE_FATAL as u64;
            }
            // The application gets a new reference, which it frees with MPI_Errhandler_free.
            retain(g, e);
            *errhandler = e as MPI_Errhandler;
            Ok(())
        })
    }

    fn Errhandler_free(errhandler: *mut MPI_Errhandler) -> c_int {
        api("MPI_Errhandler_free", None, |g| {
            if errhandler.is_null() {
                return Err(err(ErrorClass::Arg, "errhandler pointer is NULL"));
            }
            let e = *errhandler as usize;
            check_errhandler(g, e)?;
            release(g, e as u64);
            *errhandler = abi::MPI_ERRHANDLER_NULL as MPI_Errhandler;
            Ok(())
        })
    }

    fn Comm_call_errhandler(comm: MPI_Comm, errorcode: c_int) -> c_int {
        let mut guard = lock();
        let Some(g) = guard.as_mut() else {
            drop(guard);
            return api("MPI_Comm_call_errhandler", None, |_| Ok(()));
        };
        let h = match comm_handle(g, comm as usize) {
            Ok(h) => h,
            Err(e) => {
                drop(guard);
                return api("MPI_Comm_call_errhandler", Some(comm as usize), |_| Err(e));
            }
        };
        let e = g.eng.comm(h).map_or(0, |c| c.errhandler) as usize;
        match e {
            abi::MPI_ERRORS_RETURN => abi::MPI_SUCCESS,
            e if e > abi::PREDEFINED_HANDLE_MAX => {
                let Some(f) = g.tables.errhandlers.get(Handle(e as u64)).map(|x| x.func) else {
                    return abi::MPI_SUCCESS;
                };
                drop(guard);
                let mut c = comm;
                let mut code = errorcode;
                call_comm_handler(f, &mut c, &mut code);
                abi::MPI_SUCCESS
            }
            _ => {
                let rank = g.eng.rank;
                let class = class_of_code(g, errorcode);
                let msg = format!(
                    "rank {rank}: MPI_Comm_call_errhandler: error code {errorcode} ({}) raised on a communicator with a fatal error handler",
                    global::class_name(class)
                );
                eprintln!("steadfast: {msg}");
                g.eng.abort(if class == 0 { 1 } else { class }, &msg);
            }
        }
    }

    fn Add_error_class(errorclass: *mut c_int) -> c_int {
        api("MPI_Add_error_class", None, |g| {
            if errorclass.is_null() {
                return Err(err(ErrorClass::Arg, "errorclass pointer is NULL"));
            }
            let u = &mut g.tables.user_errors;
            let c = u.alloc()?;
            u.classes.insert(c, 0);
            *errorclass = c;
            Ok(())
        })
    }

    fn Add_error_code(errorclass: c_int, errorcode: *mut c_int) -> c_int {
        api("MPI_Add_error_code", None, |g| {
            if errorcode.is_null() {
                return Err(err(ErrorClass::Arg, "errorcode pointer is NULL"));
            }
            let u = &mut g.tables.user_errors;
            if errorclass == abi::MPI_SUCCESS || !(is_predefined_class(errorclass) || u.classes.contains_key(&errorclass)) {
                return Err(err(ErrorClass::Arg, format!("{errorclass} is not a valid error class")));
            }
            let c = u.alloc()?;
            u.codes.insert(c, errorclass);
            if let Some(n) = u.classes.get_mut(&errorclass) {
                *n += 1;
            }
            *errorcode = c;
            Ok(())
        })
    }

    fn Add_error_string(errorcode: c_int, string: *const c_char) -> c_int {
        api("MPI_Add_error_string", None, |g| {
            if string.is_null() {
                return Err(err(ErrorClass::Arg, "string is NULL"));
            }
            let s = std::ffi::CStr::from_ptr(string).to_string_lossy().into_owned();
            if s.len() >= abi::MPI_MAX_ERROR_STRING as usize {
                return Err(err(ErrorClass::Arg, format!("error string of {} bytes is too long", s.len())));
            }
            let u = &mut g.tables.user_errors;
            if !u.contains(errorcode) {
                return Err(err(ErrorClass::Arg, format!("{errorcode} is not an error class or code added by the application")));
            }
            u.strings.insert(errorcode, s);
            Ok(())
        })
    }

    fn Remove_error_class(errorclass: c_int) -> c_int {
        api("MPI_Remove_error_class", None, |g| {
            let u = &mut g.tables.user_errors;
            match u.classes.get(&errorclass) {
                None => Err(err(ErrorClass::Arg, format!("{errorclass} is not an error class added by the application"))),
                Some(&n) if n > 0 => Err(err(ErrorClass::Arg, format!("error class {errorclass} still has {n} error codes"))),
                // MPI 4.1: a class or code is removed only after its string.
                Some(_) if u.strings.contains_key(&errorclass) => {
                    Err(err(ErrorClass::Arg, format!("error class {errorclass} still has a string (MPI_Remove_error_string first)")))
                }
                Some(_) => {
                    u.classes.remove(&errorclass);
                    u.strings.remove(&errorclass);
                    u.unalloc(errorclass);
                    Ok(())
                }
            }
        })
    }

    fn Remove_error_code(errorcode: c_int) -> c_int {
        api("MPI_Remove_error_code", None, |g| {
            let u = &mut g.tables.user_errors;
            if u.codes.contains_key(&errorcode) && u.strings.contains_key(&errorcode) {
                return Err(err(ErrorClass::Arg, format!("error code {errorcode} still has a string (MPI_Remove_error_string first)")));
            }
            let Some(class) = u.codes.remove(&errorcode) else {
                return Err(err(ErrorClass::Arg, format!("{errorcode} is not an error code added by the application")));
            };
            if let Some(n) = u.classes.get_mut(&class) {
                *n -= 1;
            }
            u.strings.remove(&errorcode);
            u.unalloc(errorcode);
            Ok(())
        })
    }

    fn Remove_error_string(errorcode: c_int) -> c_int {
        api("MPI_Remove_error_string", None, |g| {
            let u = &mut g.tables.user_errors;
            if !u.contains(errorcode) {
                return Err(err(ErrorClass::Arg, format!("{errorcode} is not an error class or code added by the application")));
            }
            if u.strings.remove(&errorcode).is_none() {
                return Err(err(ErrorClass::Arg, format!("error code {errorcode} has no string")));
            }
            Ok(())
        })
    }

    fn Error_class(errorcode: c_int, errorclass: *mut c_int) -> c_int {
        api_anytime(|| {
            if errorclass.is_null() {
                return Err(abi::MPI_ERR_ARG);
            }
            let user = lock().as_ref().and_then(|g: &Global| g.tables.user_errors.class_of(errorcode));
            let class = user.unwrap_or_else(|| global::class_of(errorcode));
            if user.is_none() && !is_predefined_class(class) {
                return Err(abi::MPI_ERR_ARG);
            }
            *errorclass = class;
            Ok(())
        })
    }

    fn Error_string(errorcode: c_int, string: *mut c_char, resultlen: *mut c_int) -> c_int {
        api_anytime(|| {
            if string.is_null() || resultlen.is_null() {
                return Err(abi::MPI_ERR_ARG);
            }
            let class = global::class_of(errorcode);
            let (recorded, user) = match lock().as_ref() {
                Some(g) => (
                    g.errors.message(errorcode).map(str::to_owned),
                    g.tables.user_errors.string(errorcode).map(str::to_owned),
                ),
                None => (None, None),
            };
            let text = match (user, recorded, abi::error_class_text(class)) {
                (Some(u), _, _) => u,
                (None, Some(m), _) => m,
                (None, None, Some(t)) => format!("{}: {t}", global::class_name(class)),
                (None, None, None) if class == abi::MPI_SUCCESS => "MPI_SUCCESS: no error".to_string(),
                (None, None, None) => return Err(abi::MPI_ERR_ARG),
            };
            *resultlen = write_cstr(string, &text, abi::MPI_MAX_ERROR_STRING as usize);
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_codes_skip_reserved_ranges_and_are_reused() {
        let mut u = UserErrors::default();
        let a = u.alloc().unwrap();
        let b = u.alloc().unwrap();
        assert_eq!((a, b), (abi::MPI_ERR_LASTCODE + 1, abi::MPI_ERR_LASTCODE + 2));
        u.unalloc(a);
        assert_eq!(u.alloc().unwrap(), abi::MPI_ERR_LASTCODE + 1);
        u.next = LAST_USER_CODE + 1;
        assert_eq!(u.alloc().unwrap_err().class, ErrorClass::NoMem);
        assert!(LAST_USED_CODE.load(Ordering::Relaxed) >= abi::MPI_ERR_LASTCODE);
    }
}
