//! PMI-2 through Slurm's client library `libpmi2.so`, loaded at run time (`srun --mpi=pmi2`).
//!
//! The library is opened with `dlopen` only when the environment asks for PMI-2, so
//! Steadfast has no link-time dependency on Slurm. `STEADFAST_PMI2_LIB` names another
//! library file (default: `libpmi2.so.0`, then `libpmi2.so`).

use std::ffi::{c_char, c_int, CStr, CString};

use libloading::Library;

use super::{PmiClient, PmiInfo};
use crate::error::BootstrapError;

/// `STEADFAST_PMI2_LIB`: file name or path of the PMI-2 client library.
pub const LIB_VAR: &str = "STEADFAST_PMI2_LIB";
/// `PMI2_MAX_VALLEN` of `pmi2.h`.
const MAX_VALLEN: usize = 1024;
/// `PMI2_MAX_KEYLEN` of `pmi2.h`.
const MAX_KEYLEN: usize = 64;
/// `PMI2_ID_NULL` of `pmi2.h`: the key's owner is not known.
const ID_NULL: c_int = -1;
/// Room for the job id (Slurm's are short: `<job>.<step>`).
const JOBID_LEN: usize = 256;

type InitFn = unsafe extern "C" fn(*mut c_int, *mut c_int, *mut c_int, *mut c_int) -> c_int;
type VoidFn = unsafe extern "C" fn() -> c_int;
type AbortFn = unsafe extern "C" fn(c_int, *const c_char) -> c_int;
type JobIdFn = unsafe extern "C" fn(*mut c_char, c_int) -> c_int;
type PutFn = unsafe extern "C" fn(*const c_char, *const c_char) -> c_int;
type GetFn =
    unsafe extern "C" fn(*const c_char, c_int, *const c_char, *mut c_char, c_int, *mut c_int) -> c_int;

/// The loaded library and the process's place in the job.
pub struct Pmi2 {
    finalize: VoidFn,
    abort: AbortFn,
    put: PutFn,
    fence: VoidFn,
    get: GetFn,
    rank: u32,
    size: u32,
    jobid: String,
    jobid_c: CString,
    // Keeps the functions above valid; dropped last.
    _lib: Library,
}

impl std::fmt::Debug for Pmi2 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pmi2").field("rank", &self.rank).field("jobid", &self.jobid).finish()
    }
}

fn err(msg: impl Into<String>) -> BootstrapError {
    BootstrapError::Pmi(msg.into())
}

fn check(call: &str, rc: c_int) -> Result<(), BootstrapError> {
    if rc == 0 {
        Ok(())
    } else {
        Err(err(format!("{call} failed with PMI-2 error {rc}")))
    }
}

fn cstr(what: &str, s: &str) -> Result<CString, BootstrapError> {
    CString::new(s).map_err(|_| err(format!("{what} {s:?} contains a NUL byte")))
}

impl Pmi2 {
    /// Loads the library and calls `PMI2_Init` and `PMI2_Job_GetId`.
    pub fn init(get: &dyn Fn(&str) -> Option<String>) -> Result<Pmi2, BootstrapError> {
        let lib = super::load_library("PMI-2", get(LIB_VAR), &["libpmi2.so.0", "libpmi2.so"])?;
        let sym = |name: &str| super::symbol(&lib, "PMI-2", name);
        // SAFETY: each pointer is the named function of pmi2.h, transmuted to its prototype.
        let (init, finalize, abort, jobid_fn, put, fence, getf) = unsafe {
            (
                std::mem::transmute::<*const (), InitFn>(sym("PMI2_Init")?),
                std::mem::transmute::<*const (), VoidFn>(sym("PMI2_Finalize")?),
                std::mem::transmute::<*const (), AbortFn>(sym("PMI2_Abort")?),
                std::mem::transmute::<*const (), JobIdFn>(sym("PMI2_Job_GetId")?),
                std::mem::transmute::<*const (), PutFn>(sym("PMI2_KVS_Put")?),
                std::mem::transmute::<*const (), VoidFn>(sym("PMI2_KVS_Fence")?),
                std::mem::transmute::<*const (), GetFn>(sym("PMI2_KVS_Get")?),
            )
        };
        let (mut spawned, mut size, mut rank, mut appnum) = (0, 0, 0, 0);
        // SAFETY: four valid out-pointers.
        check("PMI2_Init", unsafe { init(&mut spawned, &mut size, &mut rank, &mut appnum) })?;
        if size <= 0 || rank < 0 || rank >= size {
            return Err(err(format!("PMI2_Init gave rank {rank} of {size}")));
        }
        let mut buf = vec![0u8; JOBID_LEN];
        // SAFETY: `buf` holds JOBID_LEN bytes.
        check("PMI2_Job_GetId", unsafe { jobid_fn(buf.as_mut_ptr().cast(), JOBID_LEN as c_int) })?;
        let jobid = CStr::from_bytes_until_nul(&buf)
            .map_err(|_| err("PMI2_Job_GetId returned an unterminated id"))?
            .to_string_lossy()
            .into_owned();
        Ok(Pmi2 {
            finalize,
            abort,
            put,
            fence,
            get: getf,
            rank: rank as u32,
            size: size as u32,
            jobid_c: cstr("job id", &jobid)?,
            jobid,
            _lib: lib,
        })
    }
}

impl PmiClient for Pmi2 {
    fn info(&self) -> PmiInfo {
        PmiInfo {
            rank: self.rank,
            size: self.size,
            jobid: self.jobid.clone(),
        }
    }

    fn put(&mut self, key: &str, value: &str) -> Result<(), BootstrapError> {
        if key.len() >= MAX_KEYLEN || value.len() >= MAX_VALLEN {
            return Err(err(format!("key {key:?} or its value is longer than PMI-2 accepts")));
        }
        let (k, v) = (cstr("key", key)?, cstr("value", value)?);
        // SAFETY: two NUL-terminated strings.
        check("PMI2_KVS_Put", unsafe { (self.put)(k.as_ptr(), v.as_ptr()) })
    }

    fn get(&mut self, owner: Option<u32>, key: &str) -> Result<String, BootstrapError> {
        let k = cstr("key", key)?;
        let mut buf = vec![0u8; MAX_VALLEN + 1];
        let mut len: c_int = 0;
        let src = owner.map_or(ID_NULL, |o| o as c_int);
        // SAFETY: `buf` holds MAX_VALLEN + 1 bytes, and we pass MAX_VALLEN.
        let rc = unsafe {
            (self.get)(self.jobid_c.as_ptr(), src, k.as_ptr(), buf.as_mut_ptr().cast(), MAX_VALLEN as c_int, &mut len)
        };
        check(&format!("PMI2_KVS_Get({key})"), rc)?;
        let v = CStr::from_bytes_until_nul(&buf).map_err(|_| err("PMI2_KVS_Get returned an unterminated value"))?;
        Ok(v.to_string_lossy().into_owned())
    }

    fn fence(&mut self) -> Result<(), BootstrapError> {
        // SAFETY: no arguments.
        check("PMI2_KVS_Fence", unsafe { (self.fence)() })
    }

    fn abort(&mut self, _code: i32, msg: &str) {
        let m = CString::new(msg.replace('\0', " ")).unwrap_or_default();
        // SAFETY: flag 1 = abort the whole job; a NUL-terminated message.
        unsafe { (self.abort)(1, m.as_ptr()) };
    }

    fn finalize(&mut self) -> Result<(), BootstrapError> {
        // SAFETY: no arguments.
        check("PMI2_Finalize", unsafe { (self.finalize)() })
    }
}
