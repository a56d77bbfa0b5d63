//! Generalized requests (MPI_Grequest_start / MPI_Grequest_complete).
//!
//! The engine holds an ordinary request that only MPI_Grequest_complete completes; this
//! layer keeps the application's callbacks. Callbacks are application code that may call
//! MPI, so none runs under the library lock:
//! - query_fn runs in the wait or test call that completes the request, after the call
//!   released the lock and before it returns: it fills the status the call hands out, and a
//!   code other than MPI_SUCCESS is the call's error (queued by [`on_complete`]);
//! - free_fn runs when the request is freed: after the completing call has released the
//!   lock (queued by [`on_release`]), in MPI_Request_free for a completed request, or in
//!   MPI_Grequest_complete for a request freed while still pending; a failing free_fn
//!   fails the call that freed the request;
//! - cancel_fn runs in MPI_Cancel, after the lock is released.

use std::ffi::{c_int, c_void};

use steadfast_core::request::Status;
use steadfast_core::{ErrorClass, Handle, MpiError};

use crate::abi::{self, MPI_Request, MPI_Status};
use crate::global::{api, api_unlocked, locked, Failure, Global};
use crate::mpi_api;

type QueryFn = unsafe extern "C" fn(*mut c_void, *mut MPI_Status) -> c_int;
type FreeFn = unsafe extern "C" fn(*mut c_void) -> c_int;
type CancelFn = unsafe extern "C" fn(*mut c_void, c_int) -> c_int;

/// The callbacks of one generalized request.
#[derive(Debug, Clone, Copy)]
pub struct Greq {
    query: usize,
    free: usize,
    cancel: usize,
    extra: usize,
    /// MPI_Request_free was called before completion: free_fn runs at completion.
    freed: bool,
}

/// A callback to run once the library lock is released.
#[derive(Debug, Clone, Copy)]
pub enum Deferred {
    /// query_fn of a request a wait or test completed, filling the status at the pointer
    /// (null: the application ignores it).
    Query(Greq, usize),
    /// free_fn of a request a wait or test freed.
    Free(Greq),
    /// cancel_fn with the `complete` argument.
    Cancel(Greq, bool),
}

fn err(class: ErrorClass, msg: impl Into<String>) -> MpiError {
    MpiError::new(class, msg)
}

unsafe fn call_free(gr: &Greq) -> c_int {
    if gr.free == 0 {
        return abi::MPI_SUCCESS;
    }
    let f: FreeFn = std::mem::transmute::<usize, FreeFn>(gr.free);
    f(gr.extra as *mut c_void)
}

/// A wait or test completes request `h`, whose status goes to `out`: queue query_fn if it
/// is a generalized request (before [`on_release`] queues its free_fn).
#[inline]
pub fn on_complete(g: &mut Global, h: Handle, out: *mut MPI_Status) {
    // Every completed request passes here: skip the hash (and the call) when there are no
    // generalized ones.
    if !g.tables.greqs.is_empty() {
        query_later(g, h, out);
    }
}

#[inline(never)]
fn query_later(g: &mut Global, h: Handle, out: *mut MPI_Status) {
    if let Some(gr) = g.tables.greqs.get(&h).copied() {
        g.tables.deferred.push(Deferred::Query(gr, out as usize));
    }
}

unsafe fn call_query(gr: &Greq, out: *mut MPI_Status) -> c_int {
    if gr.query == 0 {
        return abi::MPI_SUCCESS;
    }
    let mut st: MPI_Status = std::mem::zeroed();
    st.MPI_SOURCE = abi::MPI_UNDEFINED;
    st.MPI_TAG = abi::MPI_UNDEFINED;
    let f: QueryFn = std::mem::transmute::<usize, QueryFn>(gr.query);
    let rc = f(gr.extra as *mut c_void, &mut st);
    if !out.is_null() {
        // MPI_ERROR stays what the completing call set (the array forms set it).
        let o = &mut *out;
        o.MPI_SOURCE = st.MPI_SOURCE;
        o.MPI_TAG = st.MPI_TAG;
        o.internal = st.internal;
    }
    rc
}

/// The completion code path (wait, test, their array forms) releases request `h`: queue
/// free_fn if it is a generalized request.
#[inline]
pub fn on_release(g: &mut Global, h: Handle) {
    if !g.tables.greqs.is_empty() {
        free_later(g, h);
    }
}

#[inline(never)]
fn free_later(g: &mut Global, h: Handle) {
    if let Some(gr) = g.tables.greqs.remove(&h) {
        g.tables.deferred.push(Deferred::Free(gr));
    }
}

/// MPI_Request_free of `h` (called under the lock, before the engine forgets it): free_fn
/// is queued if the request is complete, or left for MPI_Grequest_complete.
pub fn on_request_free(g: &mut Global, h: Handle) -> Result<(), MpiError> {
    let complete = g.eng.is_complete(h)?;
    if let Some(gr) = g.tables.greqs.get_mut(&h) {
        if complete {
            if let Some(gr) = g.tables.greqs.remove(&h) {
                g.tables.deferred.push(Deferred::Free(gr));
            }
        } else {
            gr.freed = true;
        }
    }
    Ok(())
}

/// MPI_Cancel of `h` (under the lock): queue cancel_fn if it is a generalized request.
pub fn on_cancel(g: &mut Global, h: Handle) -> Result<bool, MpiError> {
    let Some(gr) = g.tables.greqs.get(&h).copied() else { return Ok(false) };
    let complete = g.eng.is_complete(h)?;
    g.tables.deferred.push(Deferred::Cancel(gr, complete));
    Ok(true)
}

/// Run queued callbacks (no lock held); the first failing one's code.
pub unsafe fn run_deferred(list: Vec<Deferred>) -> c_int {
    let mut rc = abi::MPI_SUCCESS;
    for d in list {
        let r = match d {
            Deferred::Query(gr, out) => call_query(&gr, out as *mut MPI_Status),
            Deferred::Free(gr) => call_free(&gr),
            Deferred::Cancel(gr, complete) if gr.cancel != 0 => {
                let f: CancelFn = std::mem::transmute::<usize, CancelFn>(gr.cancel);
                f(gr.extra as *mut c_void, complete as c_int)
            }
            Deferred::Cancel(..) => abi::MPI_SUCCESS,
        };
        if rc == abi::MPI_SUCCESS {
            rc = r;
        }
    }
    rc
}

mpi_api! {
    fn Grequest_start(query_fn: usize, free_fn: usize, cancel_fn: usize, extra_state: *mut c_void, request: *mut MPI_Request) -> c_int {
        api("MPI_Grequest_start", None, |g| {
            if request.is_null() {
                return Err(err(ErrorClass::Arg, "request pointer is NULL"));
            }
            let h = g.eng.generalized_request();
            g.tables.greqs.insert(h, Greq { query: query_fn, free: free_fn, cancel: cancel_fn, extra: extra_state as usize, freed: false });
            *request = h.0 as MPI_Request;
            Ok(())
        })
    }

    fn Grequest_complete(request: MPI_Request) -> c_int {
        api_unlocked("MPI_Grequest_complete", None, || {
            let h = Handle(request as u64);
            let gr = locked(|g| {
                let gr = g.tables.greqs.get(&h).copied();
                let gr = gr.ok_or_else(|| err(ErrorClass::Request, "not a pending generalized request"))?;
                if g.eng.is_complete(h)? {
                    return Err(err(ErrorClass::Request, "the generalized request is already complete"));
                }
                Ok(gr)
            })?;
            // query_fn runs in the wait or test that completes the request (`on_complete`).
            let status = Status { source: abi::MPI_UNDEFINED, tag: abi::MPI_UNDEFINED, error: None, bytes: 0, cancelled: false };
            let freed = locked(|g| {
                g.eng.complete_generalized(h, status)?;
                let freed = g.tables.greqs.get(&h).is_some_and(|x| x.freed);
                if freed {
                    g.tables.greqs.remove(&h);
                }
                Ok(freed)
            })?;
            if freed {
                match call_free(&gr) {
                    abi::MPI_SUCCESS => {}
                    c => return Err(Failure::Code(c)),
                }
            }
            Ok(())
        })
    }
}
