//! The small MPI 4.1 / 5.0 additions: status field accessors, handle conversion to and from
//! `int`, buffer flushing and per-communicator buffers, ABI queries, hardware resource
//! information and the non-destructive multi-request status queries.

use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::sync::Mutex;

use steadfast_core::info::Info;
use steadfast_core::{ErrorClass, Handle, MpiError};

use crate::abi::{self, MPI_Comm, MPI_Count, MPI_Info, MPI_Request, MPI_Session, MPI_Status};
use crate::global::{api, api_anytime, comm_handle, empty_status, put_status, Global};
use crate::mpi_api;

fn err(class: ErrorClass, msg: impl Into<String>) -> MpiError {
    MpiError::new(class, msg)
}

// ---- handle <-> int -------------------------------------------------------------------------
// MPI_*_toint / MPI_*_fromint share the table of the Fortran conversions (`fint.rs`): one
// integer per handle, whichever call asked first.

// ---- status fields --------------------------------------------------------------------------

unsafe fn status_field(status: *mut MPI_Status, f: impl FnOnce(&mut MPI_Status)) -> c_int {
    api_anytime(|| {
        if status.is_null() {
            return Err(abi::MPI_ERR_ARG);
        }
        f(&mut *status);
        Ok(())
    })
}

unsafe fn status_get(status: *const MPI_Status, out: *mut c_int, f: impl FnOnce(&MPI_Status) -> c_int) -> c_int {
    api_anytime(|| {
        if status.is_null() || out.is_null() {
            return Err(abi::MPI_ERR_ARG);
        }
        *out = f(&*status);
        Ok(())
    })
}

mpi_api! {
    fn Status_set_source(status: *mut MPI_Status, source: c_int) -> c_int {
        status_field(status, |s| s.MPI_SOURCE = source)
    }
    fn Status_set_tag(status: *mut MPI_Status, tag: c_int) -> c_int {
        status_field(status, |s| s.MPI_TAG = tag)
    }
    fn Status_set_error(status: *mut MPI_Status, error: c_int) -> c_int {
        status_field(status, |s| s.MPI_ERROR = error)
    }
    fn Status_get_source(status: *const MPI_Status, source: *mut c_int) -> c_int {
        status_get(status, source, |s| s.MPI_SOURCE)
    }
    fn Status_get_tag(status: *const MPI_Status, tag: *mut c_int) -> c_int {
        status_get(status, tag, |s| s.MPI_TAG)
    }
    fn Status_get_error(status: *const MPI_Status, error: *mut c_int) -> c_int {
        status_get(status, error, |s| s.MPI_ERROR)
    }
}

// ---- buffers --------------------------------------------------------------------------------

/// Buffers attached to one communicator or session. The engine keeps one budget for
/// buffered sends, so an attached buffer adds its size to that budget while attached; a
/// program that attaches enough buffer for its buffered sends on each communicator never
/// runs out, which is what the standard promises.
#[derive(Default)]
pub struct ScopedBuffers {
    by_scope: HashMap<(u8, usize), (usize, usize)>,
}

static SCOPED: Mutex<Option<ScopedBuffers>> = Mutex::new(None);

const SCOPE_COMM: u8 = 0;
const SCOPE_SESSION: u8 = 1;

fn flush(g: &mut Global) -> Result<(), MpiError> {
    g.eng.block_until(|e| e.bsend_in_use() == 0)
}

unsafe fn scoped_attach(g: &mut Global, scope: (u8, usize), buffer: *mut c_void, size: i64) -> Result<(), MpiError> {
    if size < 0 {
        return Err(err(ErrorClass::Arg, format!("buffer size {size} is negative")));
    }
    let automatic = buffer as usize == abi::MPI_BUFFER_AUTOMATIC;
    if buffer.is_null() && size > 0 {
        return Err(err(ErrorClass::Buffer, "buffer is NULL"));
    }
    let mut guard = SCOPED.lock().unwrap_or_else(|p| p.into_inner());
    let t = guard.get_or_insert_with(ScopedBuffers::default);
    if t.by_scope.contains_key(&scope) {
        return Err(err(ErrorClass::Buffer, "a buffer is already attached here"));
    }
    // MPI_BUFFER_AUTOMATIC: the library allocates as needed (the engine copies buffered
    // messages into its own memory, so the budget is simply unbounded).
    let budget = if automatic { usize::MAX / 4 } else { size as usize };
    t.by_scope.insert(scope, (buffer as usize, budget));
    g.eng.bsend_capacity = g.eng.bsend_capacity.saturating_add(budget);
    Ok(())
}

unsafe fn scoped_detach(g: &mut Global, scope: (u8, usize), buffer_addr: *mut c_void, size: &mut i64) -> Result<(), MpiError> {
    if buffer_addr.is_null() {
        return Err(err(ErrorClass::Arg, "buffer_addr is NULL"));
    }
    flush(g)?;
    let mut guard = SCOPED.lock().unwrap_or_else(|p| p.into_inner());
    let t = guard.get_or_insert_with(ScopedBuffers::default);
    let (addr, budget) = t.by_scope.remove(&scope).ok_or_else(|| err(ErrorClass::Buffer, "no buffer is attached here"))?;
    g.eng.bsend_capacity = g.eng.bsend_capacity.saturating_sub(budget);
    *(buffer_addr as *mut *mut c_void) = addr as *mut c_void;
    *size = if addr == abi::MPI_BUFFER_AUTOMATIC { 0 } else { budget as i64 };
    Ok(())
}

fn session_key(g: &Global, s: MPI_Session) -> Result<usize, MpiError> {
    crate::session::check(g, s)?;
    Ok(s as usize)
}

/// Nonblocking flush: the engine sends buffered messages eagerly or by rendezvous from its
/// own copy, so a flush only waits for those copies to drain; the request completes when
/// they have (the wait happens here, then the request is returned complete).
unsafe fn iflush(g: &mut Global, request: *mut MPI_Request) -> Result<(), MpiError> {
    if request.is_null() {
        return Err(err(ErrorClass::Arg, "request pointer is NULL"));
    }
    flush(g)?;
    *request = g.eng.completed_request().0 as MPI_Request;
    Ok(())
}

mpi_api! {
    fn Buffer_flush() -> c_int {
        api("MPI_Buffer_flush", None, flush)
    }
    fn Buffer_iflush(request: *mut MPI_Request) -> c_int {
        api("MPI_Buffer_iflush", None, |g| iflush(g, request))
    }
    fn Comm_attach_buffer(comm: MPI_Comm, buffer: *mut c_void, size: c_int) -> c_int {
        api("MPI_Comm_attach_buffer", Some(comm as usize), |g| {
            comm_handle(g, comm as usize)?;
            scoped_attach(g, (SCOPE_COMM, comm as usize), buffer, size as i64)
        })
    }
    fn Comm_attach_buffer_c(comm: MPI_Comm, buffer: *mut c_void, size: MPI_Count) -> c_int {
        api("MPI_Comm_attach_buffer_c", Some(comm as usize), |g| {
            comm_handle(g, comm as usize)?;
            scoped_attach(g, (SCOPE_COMM, comm as usize), buffer, size)
        })
    }
    fn Comm_detach_buffer(comm: MPI_Comm, buffer_addr: *mut c_void, size: *mut c_int) -> c_int {
        api("MPI_Comm_detach_buffer", Some(comm as usize), |g| {
            comm_handle(g, comm as usize)?;
            let mut sz = 0i64;
            scoped_detach(g, (SCOPE_COMM, comm as usize), buffer_addr, &mut sz)?;
            if !size.is_null() {
                *size = sz.min(c_int::MAX as i64) as c_int;
            }
            Ok(())
        })
    }
    fn Comm_detach_buffer_c(comm: MPI_Comm, buffer_addr: *mut c_void, size: *mut MPI_Count) -> c_int {
        api("MPI_Comm_detach_buffer_c", Some(comm as usize), |g| {
            comm_handle(g, comm as usize)?;
            let mut sz = 0i64;
            scoped_detach(g, (SCOPE_COMM, comm as usize), buffer_addr, &mut sz)?;
            if !size.is_null() {
                *size = sz;
            }
            Ok(())
        })
    }
    fn Comm_flush_buffer(comm: MPI_Comm) -> c_int {
        api("MPI_Comm_flush_buffer", Some(comm as usize), |g| {
            comm_handle(g, comm as usize)?;
            flush(g)
        })
    }
    fn Comm_iflush_buffer(comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        api("MPI_Comm_iflush_buffer", Some(comm as usize), |g| {
            comm_handle(g, comm as usize)?;
            iflush(g, request)
        })
    }
    fn Session_attach_buffer(session: MPI_Session, buffer: *mut c_void, size: c_int) -> c_int {
        api("MPI_Session_attach_buffer", None, |g| {
            let k = session_key(g, session)?;
            scoped_attach(g, (SCOPE_SESSION, k), buffer, size as i64)
        })
    }
    fn Session_attach_buffer_c(session: MPI_Session, buffer: *mut c_void, size: MPI_Count) -> c_int {
        api("MPI_Session_attach_buffer_c", None, |g| {
            let k = session_key(g, session)?;
            scoped_attach(g, (SCOPE_SESSION, k), buffer, size)
        })
    }
    fn Session_detach_buffer(session: MPI_Session, buffer_addr: *mut c_void, size: *mut c_int) -> c_int {
        api("MPI_Session_detach_buffer", None, |g| {
            let k = session_key(g, session)?;
            let mut sz = 0i64;
            scoped_detach(g, (SCOPE_SESSION, k), buffer_addr, &mut sz)?;
            if !size.is_null() {
                *size = sz.min(c_int::MAX as i64) as c_int;
            }
            Ok(())
        })
    }
    fn Session_detach_buffer_c(session: MPI_Session, buffer_addr: *mut c_void, size: *mut MPI_Count) -> c_int {
        api("MPI_Session_detach_buffer_c", None, |g| {
            let k = session_key(g, session)?;
            let mut sz = 0i64;
            scoped_detach(g, (SCOPE_SESSION, k), buffer_addr, &mut sz)?;
            if !size.is_null() {
                *size = sz;
            }
            Ok(())
        })
    }
    fn Session_flush_buffer(session: MPI_Session) -> c_int {
        api("MPI_Session_flush_buffer", None, |g| {
            session_key(g, session)?;
            flush(g)
        })
    }
    fn Session_iflush_buffer(session: MPI_Session, request: *mut MPI_Request) -> c_int {
        api("MPI_Session_iflush_buffer", None, |g| {
            session_key(g, session)?;
            iflush(g, request)
        })
    }
}

// ---- ABI and hardware information -------------------------------------------------------------

/// Fortran facts the application (or a Fortran binding layer) registered: the library has no
/// Fortran binding of its own, so it only reports what it was told.
struct FortranFacts {
    info: Option<Info>,
    booleans: HashMap<c_int, (Vec<u8>, Vec<u8>)>,
}

static FORTRAN: Mutex<Option<FortranFacts>> = Mutex::new(None);

mpi_api! {
    fn Abi_get_info(info: *mut MPI_Info) -> c_int {
        api("MPI_Abi_get_info", None, |g| {
            let mut i = Info::new();
            i.set("mpi_aint_size", &std::mem::size_of::<abi::MPI_Aint>().to_string())?;
            i.set("mpi_count_size", &std::mem::size_of::<abi::MPI_Count>().to_string())?;
            i.set("mpi_offset_size", &std::mem::size_of::<abi::MPI_Offset>().to_string())?;
            crate::info::out_info(g, i, info)
        })
    }
    fn Abi_get_fortran_info(info: *mut MPI_Info) -> c_int {
        api("MPI_Abi_get_fortran_info", None, |g| {
            if info.is_null() {
                return Err(err(ErrorClass::Arg, "info pointer is NULL"));
            }
            let known = FORTRAN.lock().unwrap_or_else(|p| p.into_inner()).as_ref().and_then(|f| f.info.clone());
            match known {
                Some(i) => crate::info::out_info(g, i, info),
                None => {
                    // No Fortran layer registered its facts.
                    *info = abi::MPI_INFO_NULL as MPI_Info;
                    Ok(())
                }
            }
        })
    }
    fn Abi_set_fortran_info(info: MPI_Info) -> c_int {
        api("MPI_Abi_set_fortran_info", None, |g| {
            let i = crate::info::info_of(g, info)?;
            let mut guard = FORTRAN.lock().unwrap_or_else(|p| p.into_inner());
            let f = guard.get_or_insert_with(|| FortranFacts { info: None, booleans: HashMap::new() });
            if f.info.is_some() {
                return Err(err(ErrorClass::Other, "the Fortran ABI information was already set"));
            }
            f.info = Some(i);
            Ok(())
        })
    }
    fn Abi_get_fortran_booleans(logical_size: c_int, logical_true: *mut c_void, logical_false: *mut c_void, is_set: *mut c_int) -> c_int {
        api("MPI_Abi_get_fortran_booleans", None, |_| {
            if is_set.is_null() || logical_size <= 0 || logical_size > 16 {
                return Err(err(ErrorClass::Arg, format!("invalid logical size {logical_size} or NULL is_set")));
            }
            let guard = FORTRAN.lock().unwrap_or_else(|p| p.into_inner());
            match guard.as_ref().and_then(|f| f.booleans.get(&logical_size)) {
                Some((t, f)) => {
                    if logical_true.is_null() || logical_false.is_null() {
                        return Err(err(ErrorClass::Arg, "logical_true or logical_false is NULL"));
                    }
                    std::ptr::copy_nonoverlapping(t.as_ptr(), logical_true as *mut u8, t.len());
                    std::ptr::copy_nonoverlapping(f.as_ptr(), logical_false as *mut u8, f.len());
                    *is_set = 1;
                }
                None => *is_set = 0,
            }
            Ok(())
        })
    }
    fn Abi_set_fortran_booleans(logical_size: c_int, logical_true: *mut c_void, logical_false: *mut c_void) -> c_int {
        api("MPI_Abi_set_fortran_booleans", None, |_| {
            if logical_size <= 0 || logical_size > 16 || logical_true.is_null() || logical_false.is_null() {
                return Err(err(ErrorClass::Arg, format!("invalid logical size {logical_size} or NULL value pointer")));
            }
            let n = logical_size as usize;
            let t = std::slice::from_raw_parts(logical_true as *const u8, n).to_vec();
            let f = std::slice::from_raw_parts(logical_false as *const u8, n).to_vec();
            let mut guard = FORTRAN.lock().unwrap_or_else(|p| p.into_inner());
            let facts = guard.get_or_insert_with(|| FortranFacts { info: None, booleans: HashMap::new() });
            if facts.booleans.contains_key(&logical_size) {
                return Err(err(ErrorClass::Other, format!("Fortran booleans of size {logical_size} were already set")));
            }
            facts.booleans.insert(logical_size, (t, f));
            Ok(())
        })
    }
    fn Get_hw_resource_info(hw_info: *mut MPI_Info) -> c_int {
        api("MPI_Get_hw_resource_info", None, |g| {
            // The hardware this process may run on: its CPU affinity set.
            let mut i = Info::new();
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0 {
                let cpus: Vec<String> =
                    (0..libc::CPU_SETSIZE as usize).filter(|&c| libc::CPU_ISSET(c, &set)).map(|c| c.to_string()).collect();
                i.set("mpi_hw_resource_type", "cpu")?;
                i.set("cpu_count", &cpus.len().to_string())?;
                i.set("cpu_list", &cpus.join(","))?;
            }
            crate::info::out_info(g, i, hw_info)
        })
    }
}

// ---- non-destructive multi-request status ---------------------------------------------------

/// For each request: None if null or inactive, else whether it is complete (after one
/// progress pass if none is).
fn states(g: &mut Global, reqs: &[MPI_Request]) -> Result<Vec<Option<bool>>, MpiError> {
    let handles: Vec<Option<Handle>> = reqs
        .iter()
        .map(|&r| {
            if r as usize == abi::MPI_REQUEST_NULL {
                Ok(None)
            } else {
                let h = Handle(r as u64);
                Ok(if g.eng.is_inactive(h)? { None } else { Some(h) })
            }
        })
        .collect::<Result<_, MpiError>>()?;
    let done = |g: &Global| -> Result<Vec<Option<bool>>, MpiError> {
        handles.iter().map(|h| h.map(|h| g.eng.is_complete(h)).transpose()).collect()
    };
    let first = done(g)?;
    if first.iter().all(|s| *s != Some(false)) {
        return Ok(first);
    }
    g.eng.poll_progress()?;
    done(g)
}

unsafe fn req_slice<'a>(count: c_int, reqs: *const MPI_Request) -> Result<&'a [MPI_Request], MpiError> {
    if count < 0 {
        return Err(err(ErrorClass::Count, format!("count {count} is negative")));
    }
    if count > 0 && reqs.is_null() {
        return Err(err(ErrorClass::Arg, "request array is NULL"));
    }
    Ok(if count == 0 { &[] } else { std::slice::from_raw_parts(reqs, count as usize) })
}

mpi_api! {
    fn Request_get_status_any(count: c_int, array_of_requests: *const MPI_Request, indx: *mut c_int, flag: *mut c_int, status: *mut MPI_Status) -> c_int {
        api("MPI_Request_get_status_any", None, |g| {
            let reqs = req_slice(count, array_of_requests)?;
            if indx.is_null() || flag.is_null() {
                return Err(err(ErrorClass::Arg, "indx or flag pointer is NULL"));
            }
            let st = states(g, reqs)?;
            if st.iter().all(|s| s.is_none()) {
                *flag = 1;
                *indx = abi::MPI_UNDEFINED;
                put_status(status, &empty_status(), Some(abi::MPI_SUCCESS));
                return Ok(());
            }
            match st.iter().position(|s| *s == Some(true)) {
                Some(i) => {
                    *flag = 1;
                    *indx = i as c_int;
                    put_status(status, &g.eng.status(Handle(reqs[i] as u64))?, None);
                }
                None => {
                    *flag = 0;
                    *indx = abi::MPI_UNDEFINED;
                }
            }
            Ok(())
        })
    }
    fn Request_get_status_all(count: c_int, array_of_requests: *const MPI_Request, flag: *mut c_int, array_of_statuses: *mut MPI_Status) -> c_int {
        api("MPI_Request_get_status_all", None, |g| {
            let reqs = req_slice(count, array_of_requests)?;
            if flag.is_null() {
                return Err(err(ErrorClass::Arg, "flag pointer is NULL"));
            }
            let st = states(g, reqs)?;
            *flag = st.iter().all(|s| *s != Some(false)) as c_int;
            if *flag != 0 && !array_of_statuses.is_null() {
                for (i, s) in st.iter().enumerate() {
                    let out = array_of_statuses.add(i);
                    match s {
                        Some(_) => put_status(out, &g.eng.status(Handle(reqs[i] as u64))?, None),
                        None => put_status(out, &empty_status(), Some(abi::MPI_SUCCESS)),
                    }
                }
            }
            Ok(())
        })
    }
    fn Request_get_status_some(incount: c_int, array_of_requests: *const MPI_Request, outcount: *mut c_int, array_of_indices: *mut c_int, array_of_statuses: *mut MPI_Status) -> c_int {
        api("MPI_Request_get_status_some", None, |g| {
            let reqs = req_slice(incount, array_of_requests)?;
            if outcount.is_null() {
                return Err(err(ErrorClass::Arg, "outcount pointer is NULL"));
            }
            let st = states(g, reqs)?;
            if st.iter().all(|s| s.is_none()) {
                *outcount = abi::MPI_UNDEFINED;
                return Ok(());
            }
            let done: Vec<usize> = (0..st.len()).filter(|&i| st[i] == Some(true)).collect();
            if !done.is_empty() && array_of_indices.is_null() {
                return Err(err(ErrorClass::Arg, "array_of_indices is NULL"));
            }
            for (k, &i) in done.iter().enumerate() {
                *array_of_indices.add(k) = i as c_int;
                if !array_of_statuses.is_null() {
                    put_status(array_of_statuses.add(k), &g.eng.status(Handle(reqs[i] as u64))?, None);
                }
            }
            *outcount = done.len() as c_int;
            Ok(())
        })
    }
}
