//! Info objects. MPI_INFO_ENV describes how the program was started and is read-only.
//!
//! Info calls are allowed before MPI_Init and after MPI_Finalize (MPI 4.0), so the table of
//! info objects lives outside the library state, behind its own lock (always taken after
//! the library lock when both are held).

use std::ffi::{c_char, c_int, CStr};
use std::sync::atomic::Ordering;
use std::sync::{LazyLock, Mutex, MutexGuard};

use steadfast_core::info::Info;
use steadfast_core::slab::Slab;
use steadfast_core::{ErrorClass, Handle, MpiError};

use crate::abi::{self, MPI_Info};
use crate::env::write_cstr;
use crate::global::{abi_class, api, Global, PHASE, PHASE_LIVE};
use crate::mpi_api;

static INFOS: LazyLock<Mutex<Slab<Info>>> = LazyLock::new(|| Mutex::new(Slab::default()));

fn infos() -> MutexGuard<'static, Slab<Info>> {
    INFOS.lock().unwrap_or_else(|p| p.into_inner())
}

/// What MPI_INFO_ENV needs to know about the process.
#[derive(Clone, Copy)]
struct EnvFacts {
    size: u32,
    thread_level: c_int,
}

impl EnvFacts {
    fn of(g: Option<&Global>) -> EnvFacts {
        match g {
            Some(g) => EnvFacts { size: g.eng.size, thread_level: g.thread_level },
            // Before MPI_Init: what the launcher said, or a singleton.
            None => EnvFacts {
                size: steadfast_config::parse("STEADFAST_SIZE", "a rank count").unwrap_or(1),
                thread_level: abi::MPI_THREAD_SINGLE,
            },
        }
    }
}

/// Run an info entry point: through [`api`] while MPI is live, else returning the error
/// class directly.
fn info_api(func: &str, body: impl FnOnce(EnvFacts) -> Result<(), MpiError>) -> c_int {
    if PHASE.load(Ordering::Acquire) == PHASE_LIVE {
        api(func, None, |g| body(EnvFacts::of(Some(g))))
    } else {
        match body(EnvFacts::of(None)) {
            Ok(()) => abi::MPI_SUCCESS,
            Err(e) => abi_class(e.class),
        }
    }
}

fn err(class: ErrorClass, msg: impl Into<String>) -> MpiError {
    MpiError::new(class, msg)
}

fn thread_level_name(l: c_int) -> &'static str {
    match l {
        abi::MPI_THREAD_FUNNELED => "MPI_THREAD_FUNNELED",
        abi::MPI_THREAD_SERIALIZED => "MPI_THREAD_SERIALIZED",
        abi::MPI_THREAD_MULTIPLE => "MPI_THREAD_MULTIPLE",
        _ => "MPI_THREAD_SINGLE",
    }
}

/// The contents of MPI_INFO_ENV.
fn env_info(g: EnvFacts) -> Info {
    let mut i = Info::new();
    let cmdline = std::fs::read("/proc/self/cmdline").unwrap_or_default();
    let args: Vec<String> =
        cmdline.split(|&b| b == 0).filter(|a| !a.is_empty()).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
    let mut set = |k: &str, v: &str| {
        // Values longer than an info value can hold are left out rather than cut.
        let _ = i.set(k, v);
    };
    if let Some(cmd) = args.first() {
        set("command", cmd);
    }
    if args.len() > 1 {
        set("argv", &args[1..].join(" "));
    }
    set("maxprocs", &g.size.to_string());
    set("soft", &g.size.to_string());
    let mut host = [0u8; 256];
    // SAFETY: host is 256 bytes.
    if unsafe { libc::gethostname(host.as_mut_ptr() as *mut c_char, host.len()) } == 0 {
        let end = host.iter().position(|&b| b == 0).unwrap_or(host.len());
        set("host", &String::from_utf8_lossy(&host[..end]));
    }
    set("arch", std::env::consts::ARCH);
    if let Ok(d) = std::env::current_dir() {
        set("wdir", &d.to_string_lossy());
    }
    set("thread_level", thread_level_name(g.thread_level));
    i
}

fn lookup(f: EnvFacts, h: MPI_Info) -> Result<Info, MpiError> {
    match h as usize {
        abi::MPI_INFO_NULL => Err(err(ErrorClass::Info, "MPI_INFO_NULL is not a valid info object here")),
        abi::MPI_INFO_ENV => Ok(env_info(f)),
        v => infos().get(Handle(v as u64)).cloned().ok_or_else(|| err(ErrorClass::Info, format!("invalid info handle {v:#x}"))),
    }
}

/// The info object behind handle `h` (a copy; MPI_INFO_ENV's contents for MPI_INFO_ENV).
pub fn info_of(g: &Global, h: MPI_Info) -> Result<Info, MpiError> {
    lookup(EnvFacts::of(Some(g)), h)
}

/// An optional info argument: MPI_INFO_NULL means none.
pub fn info_arg(g: &Global, h: MPI_Info) -> Result<Option<Info>, MpiError> {
    if h as usize == abi::MPI_INFO_NULL {
        Ok(None)
    } else {
        info_of(g, h).map(Some)
    }
}

/// Change the info object behind `h` with `f`.
fn modify(h: MPI_Info, f: impl FnOnce(&mut Info) -> Result<(), MpiError>) -> Result<(), MpiError> {
    match h as usize {
        abi::MPI_INFO_NULL => Err(err(ErrorClass::Info, "MPI_INFO_NULL is not a valid info object here")),
        abi::MPI_INFO_ENV => Err(err(ErrorClass::Info, "MPI_INFO_ENV is read-only")),
        v => match infos().get_mut(Handle(v as u64)) {
            Some(i) => f(i),
            None => Err(err(ErrorClass::Info, format!("invalid info handle {v:#x}"))),
        },
    }
}

fn store(info: Info, out: *mut MPI_Info) -> Result<(), MpiError> {
    if out.is_null() {
        return Err(err(ErrorClass::Arg, "info pointer is NULL"));
    }
    let h = infos().insert(info);
    // SAFETY: checked non-null; the application passed a writable MPI_Info.
    unsafe { *out = h.0 as MPI_Info };
    Ok(())
}

/// Store `info` and write its new handle.
pub unsafe fn out_info(_g: &mut Global, info: Info, out: *mut MPI_Info) -> Result<(), MpiError> {
    store(info, out)
}

unsafe fn key_arg(key: *const c_char) -> Result<String, MpiError> {
    if key.is_null() {
        return Err(err(ErrorClass::InfoKey, "key is NULL"));
    }
    Ok(CStr::from_ptr(key).to_string_lossy().into_owned())
}

mpi_api! {
    fn Info_create(info: *mut MPI_Info) -> c_int {
        info_api("MPI_Info_create", |_| store(Info::new(), info))
    }

    fn Info_create_env(_argc: c_int, _argv: *mut *mut c_char, info: *mut MPI_Info) -> c_int {
        info_api("MPI_Info_create_env", |f| store(env_info(f), info))
    }

    fn Info_set(info: MPI_Info, key: *const c_char, value: *const c_char) -> c_int {
        info_api("MPI_Info_set", |_| {
            let k = key_arg(key)?;
            if value.is_null() {
                return Err(err(ErrorClass::InfoValue, "value is NULL"));
            }
            let v = CStr::from_ptr(value).to_string_lossy().into_owned();
            modify(info, |i| i.set(&k, &v))
        })
    }

    fn Info_delete(info: MPI_Info, key: *const c_char) -> c_int {
        info_api("MPI_Info_delete", |_| {
            let k = key_arg(key)?;
            modify(info, |i| i.delete(&k))
        })
    }

    fn Info_get(info: MPI_Info, key: *const c_char, valuelen: c_int, value: *mut c_char, flag: *mut c_int) -> c_int {
        info_api("MPI_Info_get", |f| {
            let i = lookup(f, info)?;
            let k = key_arg(key)?;
            if valuelen < 0 {
                return Err(err(ErrorClass::Arg, format!("negative valuelen {valuelen}")));
            }
            if flag.is_null() || value.is_null() {
                return Err(err(ErrorClass::Arg, "value or flag is NULL"));
            }
            match i.get(&k)? {
                Some(v) => {
                    // valuelen excludes the terminating NUL.
                    write_cstr(value, v, valuelen as usize + 1);
                    *flag = 1;
                }
                None => *flag = 0,
            }
            Ok(())
        })
    }

    fn Info_get_string(info: MPI_Info, key: *const c_char, buflen: *mut c_int, value: *mut c_char, flag: *mut c_int) -> c_int {
        info_api("MPI_Info_get_string", |f| {
            let i = lookup(f, info)?;
            let k = key_arg(key)?;
            if flag.is_null() || buflen.is_null() {
                return Err(err(ErrorClass::Arg, "buflen or flag is NULL"));
            }
            match i.get(&k)? {
                Some(v) => {
                    if *buflen > 0 {
                        if value.is_null() {
                            return Err(err(ErrorClass::Arg, "value is NULL"));
                        }
                        write_cstr(value, v, *buflen as usize);
                    }
                    *buflen = v.len() as c_int + 1;
                    *flag = 1;
                }
                None => *flag = 0,
            }
            Ok(())
        })
    }

    fn Info_get_valuelen(info: MPI_Info, key: *const c_char, valuelen: *mut c_int, flag: *mut c_int) -> c_int {
        info_api("MPI_Info_get_valuelen", |f| {
            let i = lookup(f, info)?;
            let k = key_arg(key)?;
            if flag.is_null() || valuelen.is_null() {
                return Err(err(ErrorClass::Arg, "valuelen or flag is NULL"));
            }
            match i.get(&k)? {
                Some(v) => {
                    *valuelen = v.len() as c_int;
                    *flag = 1;
                }
                None => *flag = 0,
            }
            Ok(())
        })
    }

    fn Info_get_nkeys(info: MPI_Info, nkeys: *mut c_int) -> c_int {
        info_api("MPI_Info_get_nkeys", |f| {
            let i = lookup(f, info)?;
            if nkeys.is_null() {
                return Err(err(ErrorClass::Arg, "nkeys is NULL"));
            }
            *nkeys = i.len() as c_int;
            Ok(())
        })
    }

    fn Info_get_nthkey(info: MPI_Info, n: c_int, key: *mut c_char) -> c_int {
        info_api("MPI_Info_get_nthkey", |f| {
            let i = lookup(f, info)?;
            if key.is_null() {
                return Err(err(ErrorClass::Arg, "key is NULL"));
            }
            write_cstr(key, i.nth_key(n)?, abi::MPI_MAX_INFO_KEY as usize);
            Ok(())
        })
    }

    fn Info_dup(info: MPI_Info, newinfo: *mut MPI_Info) -> c_int {
        info_api("MPI_Info_dup", |f| {
            let i = lookup(f, info)?;
            store(i, newinfo)
        })
    }

    fn Info_free(info: *mut MPI_Info) -> c_int {
        info_api("MPI_Info_free", |_| {
            if info.is_null() {
                return Err(err(ErrorClass::Arg, "info pointer is NULL"));
            }
            let h = *info as usize;
            if h == abi::MPI_INFO_ENV {
                return Err(err(ErrorClass::Info, "MPI_INFO_ENV cannot be freed"));
            }
            modify(*info, |_| Ok(()))?;
            infos().remove(Handle(h as u64));
            *info = abi::MPI_INFO_NULL as MPI_Info;
            Ok(())
        })
    }
}

/// Value of `key` in info object `h`, read before the library is initialised (the
/// MPI_Session_init thread level); None for a missing key or an invalid handle.
pub fn requested_value(h: MPI_Info, key: &str) -> Option<String> {
    infos().get(Handle(h as u64)).and_then(|i| i.get(key).ok().flatten().map(str::to_owned))
}
