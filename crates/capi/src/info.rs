//! Info objects. MPI_INFO_ENV describes how the program was started and is read-only.

use std::ffi::{c_char, c_int, CStr};

use steadfast_core::info::Info;
use steadfast_core::{ErrorClass, Handle, MpiError};

use crate::abi::{self, MPI_Info};
use crate::env::write_cstr;
use crate::global::{api, Global};
use crate::mpi_api;

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
pub fn env_info(g: &Global) -> Info {
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
    set("maxprocs", &g.eng.size.to_string());
    set("soft", &g.eng.size.to_string());
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

/// The info object behind handle `h` (a copy for MPI_INFO_ENV).
pub fn info_of(g: &Global, h: MPI_Info) -> Result<Info, MpiError> {
    match h as usize {
        abi::MPI_INFO_NULL => Err(err(ErrorClass::Info, "MPI_INFO_NULL is not a valid info object here")),
        abi::MPI_INFO_ENV => Ok(env_info(g)),
        v => g.tables.infos.get(Handle(v as u64)).cloned().ok_or_else(|| err(ErrorClass::Info, format!("invalid info handle {v:#x}"))),
    }
}

/// An optional info argument: MPI_INFO_NULL means none.
pub fn info_arg(g: &Global, h: MPI_Info) -> Result<Option<Info>, MpiError> {
    if h as usize == abi::MPI_INFO_NULL {
        Ok(None)
    } else {
        info_of(g, h).map(Some)
    }
}

fn info_mut(g: &mut Global, h: MPI_Info) -> Result<&mut Info, MpiError> {
    match h as usize {
        abi::MPI_INFO_NULL => Err(err(ErrorClass::Info, "MPI_INFO_NULL is not a valid info object here")),
        abi::MPI_INFO_ENV => Err(err(ErrorClass::Info, "MPI_INFO_ENV is read-only")),
        v => g.tables.infos.get_mut(Handle(v as u64)).ok_or_else(|| err(ErrorClass::Info, format!("invalid info handle {v:#x}"))),
    }
}

/// Store `info` and write its new handle.
pub unsafe fn out_info(g: &mut Global, info: Info, out: *mut MPI_Info) -> Result<(), MpiError> {
    if out.is_null() {
        return Err(err(ErrorClass::Arg, "info pointer is NULL"));
    }
    *out = g.tables.infos.insert(info).0 as MPI_Info;
    Ok(())
}

unsafe fn key_arg(key: *const c_char) -> Result<String, MpiError> {
    if key.is_null() {
        return Err(err(ErrorClass::InfoKey, "key is NULL"));
    }
    Ok(CStr::from_ptr(key).to_string_lossy().into_owned())
}

mpi_api! {
    fn Info_create(info: *mut MPI_Info) -> c_int {
        api("MPI_Info_create", None, |g| out_info(g, Info::new(), info))
    }

    fn Info_create_env(_argc: c_int, _argv: *mut *mut c_char, info: *mut MPI_Info) -> c_int {
        api("MPI_Info_create_env", None, |g| {
            let i = env_info(g);
            out_info(g, i, info)
        })
    }

    fn Info_set(info: MPI_Info, key: *const c_char, value: *const c_char) -> c_int {
        api("MPI_Info_set", None, |g| {
            let k = key_arg(key)?;
            if value.is_null() {
                return Err(err(ErrorClass::InfoValue, "value is NULL"));
            }
            let v = CStr::from_ptr(value).to_string_lossy().into_owned();
            info_mut(g, info)?.set(&k, &v)
        })
    }

    fn Info_delete(info: MPI_Info, key: *const c_char) -> c_int {
        api("MPI_Info_delete", None, |g| {
            let k = key_arg(key)?;
            info_mut(g, info)?.delete(&k)
        })
    }

    fn Info_get(info: MPI_Info, key: *const c_char, valuelen: c_int, value: *mut c_char, flag: *mut c_int) -> c_int {
        api("MPI_Info_get", None, |g| {
            let i = info_of(g, info)?;
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
        api("MPI_Info_get_string", None, |g| {
            let i = info_of(g, info)?;
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
        api("MPI_Info_get_valuelen", None, |g| {
            let i = info_of(g, info)?;
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
        api("MPI_Info_get_nkeys", None, |g| {
            let i = info_of(g, info)?;
            if nkeys.is_null() {
                return Err(err(ErrorClass::Arg, "nkeys is NULL"));
            }
            *nkeys = i.len() as c_int;
            Ok(())
        })
    }

    fn Info_get_nthkey(info: MPI_Info, n: c_int, key: *mut c_char) -> c_int {
        api("MPI_Info_get_nthkey", None, |g| {
            let i = info_of(g, info)?;
            if key.is_null() {
                return Err(err(ErrorClass::Arg, "key is NULL"));
            }
            write_cstr(key, i.nth_key(n)?, abi::MPI_MAX_INFO_KEY as usize);
            Ok(())
        })
    }

    fn Info_dup(info: MPI_Info, newinfo: *mut MPI_Info) -> c_int {
        api("MPI_Info_dup", None, |g| {
            let i = info_of(g, info)?;
            out_info(g, i, newinfo)
        })
    }

    fn Info_free(info: *mut MPI_Info) -> c_int {
        api("MPI_Info_free", None, |g| {
            if info.is_null() {
                return Err(err(ErrorClass::Arg, "info pointer is NULL"));
            }
            let h = *info as usize;
            if h == abi::MPI_INFO_ENV {
                return Err(err(ErrorClass::Info, "MPI_INFO_ENV cannot be freed"));
            }
            info_mut(g, *info)?;
            g.tables.infos.remove(Handle(h as u64));
            *info = abi::MPI_INFO_NULL as MPI_Info;
            Ok(())
        })
    }
}
