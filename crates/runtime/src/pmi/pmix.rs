//! PMIx through OpenPMIx's client library `libpmix.so`, loaded at run time
//! (`srun --mpi=pmix`, PRRTE's `prterun`).
//!
//! `STEADFAST_PMIX_LIB` names another library file (default: `libpmix.so.2`, then
//! `libpmix.so`). Only the stable C ABI of the standard is used: `pmix_proc_t`,
//! `pmix_value_t` and `pmix_info_t` are declared below with the layout of `pmix_common.h`
//! (a test checks the sizes against the installed header when it is present).

use std::ffi::{c_char, c_int, CStr, CString};

use libloading::Library;

use super::{PmiClient, PmiInfo};
use crate::error::BootstrapError;

/// `STEADFAST_PMIX_LIB`: file name or path of the PMIx client library.
pub const LIB_VAR: &str = "STEADFAST_PMIX_LIB";

const MAX_NSLEN: usize = 255;
const MAX_KEYLEN: usize = 511;
const PMIX_SUCCESS: c_int = 0;
const PMIX_BOOL: u16 = 1;
const PMIX_STRING: u16 = 3;
const PMIX_UINT32: u16 = 14;
const PMIX_RANK_WILDCARD: u32 = u32::MAX - 1;
/// `PMIX_GLOBAL`: the value is visible to every process of the job.
const PMIX_GLOBAL: u8 = 3;

/// `pmix_proc_t`.
#[repr(C)]
#[derive(Clone, Copy)]
struct Proc {
    nspace: [c_char; MAX_NSLEN + 1],
    rank: u32,
}

/// `pmix_value_t`: a type tag and a 24-byte union (its largest members are two words
/// plus a size).
#[repr(C)]
struct Value {
    ty: u16,
    data: [u64; 3],
}

/// `pmix_info_t`.
#[repr(C)]
struct Info {
    key: [c_char; MAX_KEYLEN + 1],
    flags: u32,
    value: Value,
}

type InitFn = unsafe extern "C" fn(*mut Proc, *mut Info, usize) -> c_int;
type FinalizeFn = unsafe extern "C" fn(*const Info, usize) -> c_int;
type AbortFn = unsafe extern "C" fn(c_int, *const c_char, *mut Proc, usize) -> c_int;
type PutFn = unsafe extern "C" fn(u8, *const c_char, *mut Value) -> c_int;
type CommitFn = unsafe extern "C" fn() -> c_int;
type FenceFn = unsafe extern "C" fn(*const Proc, usize, *const Info, usize) -> c_int;
type GetFn = unsafe extern "C" fn(*const Proc, *const c_char, *const Info, usize, *mut *mut Value) -> c_int;
type ValueDestructFn = unsafe extern "C" fn(*mut Value);

/// The loaded library and this process's identity.
pub struct Pmix {
    finalize: FinalizeFn,
    abort: AbortFn,
    put: PutFn,
    commit: CommitFn,
    fence: FenceFn,
    get: GetFn,
    value_destruct: Option<ValueDestructFn>,
    me: Proc,
    size: u32,
    jobid: String,
    _lib: Library,
}

impl std::fmt::Debug for Pmix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pmix").field("rank", &self.me.rank).field("nspace", &self.jobid).finish()
    }
}

fn err(msg: impl Into<String>) -> BootstrapError {
    BootstrapError::Pmi(msg.into())
}

fn check(call: &str, rc: c_int) -> Result<(), BootstrapError> {
    if rc == PMIX_SUCCESS {
        Ok(())
    } else {
        Err(err(format!("{call} failed with PMIx status {rc}")))
    }
}

fn info_bool(key: &str, v: bool) -> Info {
    let mut i = Info {
        key: [0; MAX_KEYLEN + 1],
        flags: 0,
        value: Value { ty: PMIX_BOOL, data: [0; 3] },
    };
    for (d, s) in i.key.iter_mut().zip(key.bytes()) {
        *d = s as c_char;
    }
    // A C `bool` is one byte at the start of the union.
    i.value.data[0] = u64::from(v);
    i
}

impl Pmix {
    /// Loads the library, calls `PMIx_Init` and reads the job size.
    pub fn init(get: &dyn Fn(&str) -> Option<String>) -> Result<Pmix, BootstrapError> {
        let lib = super::load_library("PMIx", get(LIB_VAR), &["libpmix.so.2", "libpmix.so"])?;
        let sym = |name: &str| super::symbol(&lib, "PMIx", name);
        // SAFETY: each pointer is the named function of pmix.h, given its prototype.
        let (init, finalize, abort, put, commit, fence, getf) = unsafe {
            (
                std::mem::transmute::<*const (), InitFn>(sym("PMIx_Init")?),
                std::mem::transmute::<*const (), FinalizeFn>(sym("PMIx_Finalize")?),
                std::mem::transmute::<*const (), AbortFn>(sym("PMIx_Abort")?),
                std::mem::transmute::<*const (), PutFn>(sym("PMIx_Put")?),
                std::mem::transmute::<*const (), CommitFn>(sym("PMIx_Commit")?),
                std::mem::transmute::<*const (), FenceFn>(sym("PMIx_Fence")?),
                std::mem::transmute::<*const (), GetFn>(sym("PMIx_Get")?),
            )
        };
        // Libraries before 4.0 release values only through macros: then a value's few
        // bytes leak. SAFETY: as above.
        let value_destruct = sym("PMIx_Value_destruct")
            .ok()
            .map(|p| unsafe { std::mem::transmute::<*const (), ValueDestructFn>(p) });
        let mut me = Proc { nspace: [0; MAX_NSLEN + 1], rank: 0 };
        // SAFETY: a writable pmix_proc_t, no info.
        check("PMIx_Init", unsafe { init(&mut me, std::ptr::null_mut(), 0) })?;
        // SAFETY: PMIx_Init wrote a NUL-terminated namespace into the array.
        let jobid = unsafe { CStr::from_ptr(me.nspace.as_ptr()) }.to_string_lossy().into_owned();
        let mut p = Pmix {
            finalize,
            abort,
            put,
            commit,
            fence,
            get: getf,
            value_destruct,
            me,
            size: 0,
            jobid,
            _lib: lib,
        };
        let mut job = me;
        job.rank = PMIX_RANK_WILDCARD;
        let size = p.get_raw(&job, "pmix.job.size", |v| {
            (v.ty == PMIX_UINT32).then_some(v.data[0] as u32)
        })?;
        match size {
            Some(s) if s > 0 && me.rank < s => p.size = s,
            other => return Err(err(format!("PMIx job size {other:?} does not hold rank {}", me.rank))),
        }
        Ok(p)
    }

    /// `PMIx_Get` of `key` from `proc`, with `read` turning the value into a result.
    fn get_raw<T>(
        &self,
        proc: &Proc,
        key: &str,
        read: impl FnOnce(&Value) -> Option<T>,
    ) -> Result<Option<T>, BootstrapError> {
        let k = CString::new(key).map_err(|_| err("key contains a NUL byte"))?;
        let mut out: *mut Value = std::ptr::null_mut();
        // SAFETY: valid proc and key; PMIx allocates `out` on success.
        check(&format!("PMIx_Get({key})"), unsafe { (self.get)(proc, k.as_ptr(), std::ptr::null(), 0, &mut out) })?;
        if out.is_null() {
            return Err(err(format!("PMIx_Get({key}) returned no value")));
        }
        // SAFETY: PMIx returned a valid value.
        let r = read(unsafe { &*out });
        if let Some(destruct) = self.value_destruct {
            // SAFETY: `out` came from PMIx_Get (malloc'ed by the library) and is released
            // once: its contents, then the value itself.
            unsafe {
                destruct(out);
                libc::free(out.cast());
            }
        }
        Ok(r)
    }
}

impl PmiClient for Pmix {
    fn info(&self) -> PmiInfo {
        PmiInfo {
            rank: self.me.rank,
            size: self.size,
            jobid: self.jobid.clone(),
        }
    }

    fn put(&mut self, key: &str, value: &str) -> Result<(), BootstrapError> {
        if key.len() > MAX_KEYLEN {
            return Err(err(format!("key {key:?} is too long for PMIx")));
        }
        let k = CString::new(key).map_err(|_| err("key contains a NUL byte"))?;
        let v = CString::new(value).map_err(|_| err("value contains a NUL byte"))?;
        let mut val = Value { ty: PMIX_STRING, data: [v.as_ptr() as u64, 0, 0] };
        // SAFETY: PMIx copies the string during the call.
        check("PMIx_Put", unsafe { (self.put)(PMIX_GLOBAL, k.as_ptr(), &mut val) })
    }

    fn get(&mut self, owner: Option<u32>, key: &str) -> Result<String, BootstrapError> {
        let mut from = self.me;
        from.rank = owner.ok_or_else(|| err(format!("PMIx needs the rank that put {key:?}")))?;
        let v = self.get_raw(&from, key, |v| {
            if v.ty != PMIX_STRING || v.data[0] == 0 {
                return None;
            }
            // SAFETY: a PMIX_STRING value holds a NUL-terminated string pointer.
            Some(unsafe { CStr::from_ptr(v.data[0] as *const c_char) }.to_string_lossy().into_owned())
        })?;
        v.ok_or_else(|| err(format!("PMIx value of {key:?} is not a string")))
    }

    fn fence(&mut self) -> Result<(), BootstrapError> {
        // SAFETY: no arguments.
        check("PMIx_Commit", unsafe { (self.commit)() })?;
        let mut all = self.me;
        all.rank = PMIX_RANK_WILDCARD;
        // Collect the data in the fence, so gets afterwards are answered locally.
        let collect = info_bool("pmix.collect", true);
        // SAFETY: one proc and one info, both valid for the call.
        check("PMIx_Fence", unsafe { (self.fence)(&all, 1, &collect, 1) })
    }

    fn abort(&mut self, code: i32, msg: &str) {
        let m = CString::new(msg.replace('\0', " ")).unwrap_or_default();
        // SAFETY: NULL procs = the whole namespace.
        unsafe { (self.abort)(code, m.as_ptr(), std::ptr::null_mut(), 0) };
    }

    fn finalize(&mut self) -> Result<(), BootstrapError> {
        // SAFETY: no info.
        check("PMIx_Finalize", unsafe { (self.finalize)(std::ptr::null(), 0) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sizes and offsets printed by a C program against OpenPMIx 4's `pmix_common.h`.
    #[test]
    fn layout_matches_pmix_common_h() {
        assert_eq!(std::mem::size_of::<Proc>(), 260);
        assert_eq!(std::mem::offset_of!(Proc, rank), 256);
        assert_eq!(std::mem::size_of::<Value>(), 32);
        assert_eq!(std::mem::offset_of!(Value, data), 8);
        assert_eq!(std::mem::size_of::<Info>(), 552);
        assert_eq!(std::mem::offset_of!(Info, flags), 512);
        assert_eq!(std::mem::offset_of!(Info, value), 520);
    }
}
