//! Point-to-point entry points: sends in every mode, receives, probes, requests, completion.

use std::ffi::{c_int, c_void};

use steadfast_core::datatype::TypeRef;
use steadfast_core::request::{Mode, RecvSpec, SendSpec, Status};
use steadfast_core::{ErrorClass, Handle, MpiError};

use crate::abi::{self, MPI_Comm, MPI_Count, MPI_Datatype, MPI_Message, MPI_Request, MPI_Status};
use crate::global::{api, api_blocking, api_with, comm_handle, dtype, empty_status, multiple, put_status, status_count, Global};
use crate::mpi_api;

/// Largest tag value (the MPI_TAG_UB attribute).
pub const TAG_UB: c_int = i32::MAX;

fn err(class: ErrorClass, msg: impl Into<String>) -> MpiError {
    MpiError::new(class, msg)
}

fn check_count(count: i64) -> Result<usize, MpiError> {
    if count < 0 {
        return Err(err(ErrorClass::Count, format!("count {count} is negative")));
    }
    Ok(count as usize)
}

fn check_buffer(buf: *const c_void, count: usize, t: &steadfast_core::datatype::Datatype) -> Result<(), MpiError> {
    // MPI_BOTTOM (null) with count > 0 is only meaningful for types with absolute addresses.
    if buf.is_null() && count > 0 && t.predefined && t.size > 0 {
        return Err(err(ErrorClass::Buffer, format!("buffer is NULL with count {count} of {}", t.name)));
    }
    Ok(())
}

/// The datatype of a point-to-point call: `MPI_DATATYPE_NULL` is accepted with count 0
/// (as MPICH does; programs synchronize with `MPI_Send(NULL, 0, MPI_DATATYPE_NULL, ...)`)
/// and moves nothing; otherwise as [`dtype`].
fn pt2pt_dtype(g: &Global, datatype: MPI_Datatype, count: usize) -> Result<TypeRef, MpiError> {
    if count == 0 && datatype as usize == abi::MPI_DATATYPE_NULL {
        return dtype(g, abi::MPI_BYTE);
    }
    dtype(g, datatype as usize)
}

/// Validate a send's arguments and build its spec.
pub fn send_spec(
    g: &Global,
    buf: *const c_void,
    count: i64,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    mode: Mode,
) -> Result<SendSpec, MpiError> {
    let ch = comm_handle(g, comm as usize)?;
    let count = check_count(count)?;
    let t = pt2pt_dtype(g, datatype, count)?;
    if dest != abi::MPI_PROC_NULL && !(0..=TAG_UB).contains(&tag) {
        return Err(err(ErrorClass::Tag, format!("invalid tag {tag} (valid: 0..={TAG_UB})")));
    }
    check_buffer(buf, count, &t)?;
    Ok(SendSpec { buf: buf as *const u8, count, dtype: t, comm: ch, dest, tag, mode })
}

/// Validate a receive's arguments and build its spec.
pub fn recv_spec(
    g: &Global,
    buf: *mut c_void,
    count: i64,
    datatype: MPI_Datatype,
    src: c_int,
    tag: c_int,
    comm: MPI_Comm,
) -> Result<RecvSpec, MpiError> {
    let ch = comm_handle(g, comm as usize)?;
    let count = check_count(count)?;
    let t = pt2pt_dtype(g, datatype, count)?;
    if tag != abi::MPI_ANY_TAG && !(0..=TAG_UB).contains(&tag) {
        return Err(err(ErrorClass::Tag, format!("invalid tag {tag} (valid: 0..={TAG_UB} or MPI_ANY_TAG)")));
    }
    check_buffer(buf, count, &t)?;
    Ok(RecvSpec { buf: buf as *mut u8, count, dtype: t, comm: ch, src, tag })
}

/// The error a completed receive's status carries; inlined, the message built out of line.
#[inline]
fn truncated(s: &Status) -> Result<(), MpiError> {
    match s.error {
        None => Ok(()),
        Some(_) => status_error(s),
    }
}

#[cold]
#[inline(never)]
fn status_error(s: &Status) -> Result<(), MpiError> {
    match s.error {
        Some(ErrorClass::Truncate) => Err(err(
            ErrorClass::Truncate,
            format!("message from rank {} with tag {} was longer than the receive buffer", s.source, s.tag),
        )),
        Some(ErrorClass::ProcFailed) => Err(err(ErrorClass::ProcFailed, format!("peer rank {} failed", s.source))),
        Some(c) => Err(err(c, "operation failed")),
        None => Ok(()),
    }
}

unsafe fn out_request(request: *mut MPI_Request, h: Handle) -> Result<(), MpiError> {
    if request.is_null() {
        return Err(err(ErrorClass::Arg, "request pointer is NULL"));
    }
    *request = h.0 as MPI_Request;
    Ok(())
}

fn req_of(r: MPI_Request) -> Option<Handle> {
    if r as usize == abi::MPI_REQUEST_NULL {
        None
    } else {
        Some(Handle(r as u64))
    }
}

/// Bytes of `count` elements of `dt` when the handle is a committed contiguous datatype,
/// looked up without taking a reference to it (the fast paths below touch no refcount).
#[inline]
pub(crate) fn contiguous_bytes(g: &Global, dt: MPI_Datatype, count: i64) -> Option<usize> {
    let t = dt as usize;
    if abi::is_predefined_handle(t) {
        // A table lookup: the layout walk took 88 of a send's 630 instructions.
        let size = *g.predef_contig.get(t)?;
        return (size != usize::MAX && count >= 0).then(|| size.saturating_mul(count as usize));
    }
    let ty = g.types.get(Handle(t as u64))?;
    (ty.committed && ty.is_contiguous() && count >= 0).then(|| ty.packed_size(count as usize))
}

/// MPI_Send's common case straight to the engine's request-free send: valid arguments, a
/// contiguous type, standard or ready mode. Ok(false) (nothing done) sends it the general
/// way, which also reports any argument error.
#[allow(clippy::too_many_arguments)]
fn send_fast(g: &mut Global, buf: *const c_void, count: i64, dt: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm, mode: Mode) -> Result<bool, MpiError> {
    let Some((ch, len)) = fast_send_args(g, buf, count, dt, dest, tag, comm, mode) else { return Ok(false) };
    g.eng.send_contig(ch, buf as *const u8, len, dest, tag)
}

/// The communicator and byte count of a send the request-free path may take (valid
/// arguments, a contiguous type, standard or ready mode); None for the general way.
#[allow(clippy::too_many_arguments)]
#[inline]
fn fast_send_args(g: &Global, buf: *const c_void, count: i64, dt: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm, mode: Mode) -> Option<(Handle, usize)> {
    if !matches!(mode, Mode::Standard | Mode::Ready) || dest < 0 || !(0..=TAG_UB).contains(&tag) {
        return None;
    }
    let len = contiguous_bytes(g, dt, count)?;
    if buf.is_null() && len > 0 {
        return None;
    }
    Some((comm_handle(g, comm as usize).ok()?, len))
}

/// MPI_Isend's common case (as [`send_fast`]): the message goes to the path at once and the
/// request returned is complete. None (nothing done) sends it the general way. A null
/// request pointer goes the general way too, which reports it.
#[allow(clippy::too_many_arguments)]
fn isend_fast(g: &mut Global, buf: *const c_void, count: i64, dt: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm, mode: Mode) -> Result<Option<Handle>, MpiError> {
    let Some((ch, len)) = fast_send_args(g, buf, count, dt, dest, tag, comm, mode) else { return Ok(None) };
    g.eng.isend_contig(ch, buf as *const u8, len, dest, tag)
}

/// The communicator and byte capacity of a receive the request-free paths may take (valid
/// source and tag, a contiguous type); None for the general way, which also reports any
/// argument error.
#[inline]
fn fast_recv_args(g: &Global, buf: *mut c_void, count: i64, dt: MPI_Datatype, src: c_int, tag: c_int, comm: MPI_Comm) -> Option<(Handle, usize)> {
    if (src < 0 && src != abi::MPI_ANY_SOURCE) || (tag != abi::MPI_ANY_TAG && !(0..=TAG_UB).contains(&tag)) {
        return None;
    }
    let cap = contiguous_bytes(g, dt, count)?;
    if buf.is_null() && cap > 0 {
        return None;
    }
    Some((comm_handle(g, comm as usize).ok()?, cap))
}

/// MPI_Recv's common case through the engine's receive slot; None (nothing received) runs
/// the general path.
fn recv_fast(g: &mut Global, buf: *mut c_void, count: i64, dt: MPI_Datatype, src: c_int, tag: c_int, comm: MPI_Comm) -> Result<Option<Status>, MpiError> {
    let Some((ch, cap)) = fast_recv_args(g, buf, count, dt, src, tag, comm) else { return Ok(None) };
    g.eng.recv_contig(ch, buf as *mut u8, cap, src, tag)
}

/// MPI_Irecv's common case straight to [`steadfast_core::Engine::irecv_contig`]; None
/// (nothing done) for the general path.
#[inline]
fn irecv_fast(g: &mut Global, buf: *mut c_void, count: i64, dt: MPI_Datatype, src: c_int, tag: c_int, comm: MPI_Comm) -> Result<Option<Handle>, MpiError> {
    let Some((ch, cap)) = fast_recv_args(g, buf, count, dt, src, tag, comm) else { return Ok(None) };
    g.eng.irecv_contig(ch, buf as *mut u8, cap, src, tag)
}

unsafe fn send_impl(func: &str, buf: *const c_void, count: i64, dt: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm, mode: Mode) -> c_int {
    api(func, Some(comm as usize), |g| {
        if !multiple() && send_fast(g, buf, count, dt, dest, tag, comm, mode)? {
            return Ok(());
        }
        let spec = send_spec(g, buf, count, dt, dest, tag, comm, mode)?;
        if mode == Mode::Buffered {
            return g.eng.bsend(spec).map(|_| ());
        }
        if multiple() {
            // Waited for after the body, with the lock released (global::api_with).
            let h = g.eng.isend(spec)?;
            g.pending.push(h);
            return Ok(());
        }
        g.eng.send(spec)
    })
}

#[allow(clippy::too_many_arguments)]
unsafe fn isend_impl(
    func: &str,
    buf: *const c_void,
    count: i64,
    dt: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    mode: Mode,
    request: *mut MPI_Request,
) -> c_int {
    api(func, Some(comm as usize), |g| {
        if !request.is_null() && !multiple() {
            if let Some(h) = isend_fast(g, buf, count, dt, dest, tag, comm, mode)? {
                return out_request(request, h);
            }
        }
        let spec = send_spec(g, buf, count, dt, dest, tag, comm, mode)?;
        let h = if mode == Mode::Buffered {
            let sent = g.eng.bsend(spec)?;
            g.eng.bsend_request(sent)
        } else {
            g.eng.isend(spec)?
        };
        out_request(request, h)
    })
}

#[allow(clippy::too_many_arguments)]
unsafe fn send_init_impl(
    func: &str,
    buf: *const c_void,
    count: i64,
    dt: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    mode: Mode,
    request: *mut MPI_Request,
) -> c_int {
    api(func, Some(comm as usize), |g| {
        let spec = send_spec(g, buf, count, dt, dest, tag, comm, mode)?;
        let h = g.eng.send_init(spec, true)?;
        out_request(request, h)
    })
}

#[allow(clippy::too_many_arguments)]
unsafe fn recv_impl(
    func: &'static str,
    buf: *mut c_void,
    count: i64,
    dt: MPI_Datatype,
    src: c_int,
    tag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> c_int {
    api_blocking(func, |_| Some(comm as usize), |c| {
        let s = if multiple() {
            let spec = recv_spec(c.g(), buf, count, dt, src, tag, comm)?;
            let h = c.g().eng.irecv(spec)?;
            let s = c.wait(h);
            c.g().eng.release(h);
            s?
        } else {
            let g = c.g();
            match recv_fast(g, buf, count, dt, src, tag, comm)? {
                Some(s) => s,
                None => {
                    let spec = recv_spec(g, buf, count, dt, src, tag, comm)?;
                    g.eng.recv(spec)?
                }
            }
        };
        put_status(status, &s, None);
        truncated(&s)
    })
}

#[allow(clippy::too_many_arguments)]
unsafe fn irecv_impl(
    func: &str,
    buf: *mut c_void,
    count: i64,
    dt: MPI_Datatype,
    src: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
    persistent: bool,
) -> c_int {
    api(func, Some(comm as usize), |g| {
        if !persistent && !request.is_null() {
            if let Some(h) = irecv_fast(g, buf, count, dt, src, tag, comm)? {
                return out_request(request, h);
            }
        }
        let spec = recv_spec(g, buf, count, dt, src, tag, comm)?;
        let h = if persistent { g.eng.recv_init(spec, true)? } else { g.eng.irecv(spec)? };
        out_request(request, h)
    })
}

#[allow(clippy::too_many_arguments)]
unsafe fn sendrecv_impl(
    func: &'static str,
    sendbuf: *const c_void,
    sendcount: i64,
    sendtype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: i64,
    recvtype: MPI_Datatype,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> c_int {
    api_blocking(func, |_| Some(comm as usize), |c| {
        let g = c.g();
        let sspec = send_spec(g, sendbuf, sendcount, sendtype, dest, sendtag, comm, Mode::Standard)?;
        let rspec = recv_spec(g, recvbuf, recvcount, recvtype, source, recvtag, comm)?;
        let r = g.eng.irecv(rspec)?;
        let s = g.eng.isend(sspec)?;
        c.wait(s)?;
        c.g().eng.release(s);
        let st = c.wait(r)?;
        c.g().eng.release(r);
        put_status(status, &st, None);
        truncated(&st)
    })
}

#[allow(clippy::too_many_arguments)]
unsafe fn sendrecv_replace_impl(
    func: &'static str,
    buf: *mut c_void,
    count: i64,
    dt: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> c_int {
    api_blocking(func, |_| Some(comm as usize), |c| {
        let g = c.g();
        let sspec = send_spec(g, buf, count, dt, dest, sendtag, comm, Mode::Standard)?;
        let rspec = recv_spec(g, buf, count, dt, source, recvtag, comm)?;
        // Send from a packed copy so the receive may overwrite the buffer at once.
        let n = sspec.dtype.packed_size(sspec.count);
        let mut copy = vec![0u8; n];
        sspec.dtype.pack(sspec.buf, sspec.count, &mut copy);
        let byte = dtype(g, abi::MPI_BYTE)?;
        let packed = SendSpec { buf: copy.as_ptr(), count: n, dtype: byte, ..sspec };
        let r = g.eng.irecv(rspec)?;
        let s = g.eng.isend(packed)?;
        c.wait(s)?;
        c.g().eng.release(s);
        let st = c.wait(r)?;
        c.g().eng.release(r);
        drop(copy);
        put_status(status, &st, None);
        truncated(&st)
    })
}

#[allow(clippy::too_many_arguments)]
unsafe fn isendrecv_impl(
    func: &str,
    sendbuf: *const c_void,
    sendcount: i64,
    sendtype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: i64,
    recvtype: MPI_Datatype,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    api(func, Some(comm as usize), |g| {
        if request.is_null() {
            return Err(err(ErrorClass::Arg, "request pointer is NULL"));
        }
        let sspec = send_spec(g, sendbuf, sendcount, sendtype, dest, sendtag, comm, Mode::Standard)?;
        let rspec = recv_spec(g, recvbuf, recvcount, recvtype, source, recvtag, comm)?;
        let h = g.eng.isendrecv(sspec, rspec)?;
        out_request(request, h)
    })
}

#[allow(clippy::too_many_arguments)]
unsafe fn isendrecv_replace_impl(
    func: &str,
    buf: *mut c_void,
    count: i64,
    dt: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    api(func, Some(comm as usize), |g| {
        if request.is_null() {
            return Err(err(ErrorClass::Arg, "request pointer is NULL"));
        }
        let sspec = send_spec(g, buf, count, dt, dest, sendtag, comm, Mode::Standard)?;
        let rspec = recv_spec(g, buf, count, dt, source, recvtag, comm)?;
        let h = g.eng.isendrecv_replace(sspec, rspec)?;
        out_request(request, h)
    })
}

unsafe fn request_slice<'a>(count: c_int, reqs: *mut MPI_Request) -> Result<&'a mut [MPI_Request], MpiError> {
    if count < 0 {
        return Err(err(ErrorClass::Count, format!("count {count} is negative")));
    }
    if count > 0 && reqs.is_null() {
        return Err(err(ErrorClass::Arg, "array of requests is NULL"));
    }
    if count == 0 {
        return Ok(&mut []);
    }
    Ok(std::slice::from_raw_parts_mut(reqs, count as usize))
}

/// A request that waits/tests consider: not null and not an inactive persistent request.
/// The communicator, as the application names it, of the request at `r`: completion calls
/// on a point-to-point request raise errors through its error handler.
unsafe fn request_comm(g: &Global, r: *const MPI_Request) -> Option<usize> {
    if r.is_null() {
        return None;
    }
    let h = req_of(*r)?;
    let c = match &g.eng.request(h).ok()?.op {
        steadfast_core::request::Op::Send(s) => s.comm,
        steadfast_core::request::Op::Recv(s) => s.comm,
        steadfast_core::request::Op::Null => return None,
    };
    Some(if c == g.eng.world {
        abi::MPI_COMM_WORLD
    } else if c == g.eng.self_comm {
        abi::MPI_COMM_SELF
    } else {
        c.0 as usize
    })
}

/// Whether a wait must still wait for this request: not complete, and not an inactive
/// persistent request (a wait on which returns at once).
fn still_open(q: &steadfast_core::request::Request) -> bool {
    !q.complete && (q.active || !q.persistent)
}

fn live(g: &Global, r: MPI_Request) -> Result<Option<Handle>, MpiError> {
    match req_of(r) {
        None => Ok(None),
        Some(h) => Ok(if g.eng.is_inactive(h)? { None } else { Some(h) }),
    }
}

/// Record the completion of `reqs[i]`: fill the status, release the request (an inactive
/// persistent request has nothing to complete: an empty status). `out` is where the
/// caller writes the status (null: ignored): a generalized request's query_fn fills it
/// once the lock is released (`greq::on_complete`; generalized requests are never
/// persistent).
// Inlined with the engine's `take_status`: returned through memory, the status was written
// a field at a time and read back a word at a time, a store-forwarding failure on every
// completed request.
#[inline(always)]
unsafe fn finish(g: &mut Global, reqs: &mut [MPI_Request], i: usize, out: *mut MPI_Status) -> Result<Status, MpiError> {
    let h = req_of(reqs[i]).ok_or_else(|| err(ErrorClass::Intern, "finishing a null request"))?;
    crate::greq::on_complete(g, h, out);
    let Some((s, released)) = g.eng.take_status(h)? else { return Ok(empty_status()) };
    if released {
        reqs[i] = abi::MPI_REQUEST_NULL as MPI_Request;
        crate::greq::on_release(g, h);
    }
    Ok(s)
}

fn error_code_of(s: &Status) -> c_int {
    s.error.map_or(abi::MPI_SUCCESS, crate::global::abi_class)
}

mpi_api! {
    fn Send(buf: *const c_void, count: c_int, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm) -> c_int {
        send_impl("MPI_Send", buf, count as i64, datatype, dest, tag, comm, Mode::Standard)
    }
    fn Send_c(buf: *const c_void, count: MPI_Count, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm) -> c_int {
        send_impl("MPI_Send_c", buf, count, datatype, dest, tag, comm, Mode::Standard)
    }
    fn Ssend(buf: *const c_void, count: c_int, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm) -> c_int {
        send_impl("MPI_Ssend", buf, count as i64, datatype, dest, tag, comm, Mode::Synchronous)
    }
    fn Ssend_c(buf: *const c_void, count: MPI_Count, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm) -> c_int {
        send_impl("MPI_Ssend_c", buf, count, datatype, dest, tag, comm, Mode::Synchronous)
    }
    fn Rsend(buf: *const c_void, count: c_int, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm) -> c_int {
        send_impl("MPI_Rsend", buf, count as i64, datatype, dest, tag, comm, Mode::Ready)
    }
    fn Rsend_c(buf: *const c_void, count: MPI_Count, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm) -> c_int {
        send_impl("MPI_Rsend_c", buf, count, datatype, dest, tag, comm, Mode::Ready)
    }
    fn Bsend(buf: *const c_void, count: c_int, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm) -> c_int {
        send_impl("MPI_Bsend", buf, count as i64, datatype, dest, tag, comm, Mode::Buffered)
    }
    fn Bsend_c(buf: *const c_void, count: MPI_Count, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm) -> c_int {
        send_impl("MPI_Bsend_c", buf, count, datatype, dest, tag, comm, Mode::Buffered)
    }

    fn Isend(buf: *const c_void, count: c_int, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        isend_impl("MPI_Isend", buf, count as i64, datatype, dest, tag, comm, Mode::Standard, request)
    }
    fn Isend_c(buf: *const c_void, count: MPI_Count, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        isend_impl("MPI_Isend_c", buf, count, datatype, dest, tag, comm, Mode::Standard, request)
    }
    fn Issend(buf: *const c_void, count: c_int, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        isend_impl("MPI_Issend", buf, count as i64, datatype, dest, tag, comm, Mode::Synchronous, request)
    }
    fn Issend_c(buf: *const c_void, count: MPI_Count, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        isend_impl("MPI_Issend_c", buf, count, datatype, dest, tag, comm, Mode::Synchronous, request)
    }
    fn Irsend(buf: *const c_void, count: c_int, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        isend_impl("MPI_Irsend", buf, count as i64, datatype, dest, tag, comm, Mode::Ready, request)
    }
    fn Irsend_c(buf: *const c_void, count: MPI_Count, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        isend_impl("MPI_Irsend_c", buf, count, datatype, dest, tag, comm, Mode::Ready, request)
    }
    fn Ibsend(buf: *const c_void, count: c_int, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        isend_impl("MPI_Ibsend", buf, count as i64, datatype, dest, tag, comm, Mode::Buffered, request)
    }
    fn Ibsend_c(buf: *const c_void, count: MPI_Count, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        isend_impl("MPI_Ibsend_c", buf, count, datatype, dest, tag, comm, Mode::Buffered, request)
    }

    fn Send_init(buf: *const c_void, count: c_int, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        send_init_impl("MPI_Send_init", buf, count as i64, datatype, dest, tag, comm, Mode::Standard, request)
    }
    fn Send_init_c(buf: *const c_void, count: MPI_Count, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        send_init_impl("MPI_Send_init_c", buf, count, datatype, dest, tag, comm, Mode::Standard, request)
    }
    fn Ssend_init(buf: *const c_void, count: c_int, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        send_init_impl("MPI_Ssend_init", buf, count as i64, datatype, dest, tag, comm, Mode::Synchronous, request)
    }
    fn Ssend_init_c(buf: *const c_void, count: MPI_Count, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        send_init_impl("MPI_Ssend_init_c", buf, count, datatype, dest, tag, comm, Mode::Synchronous, request)
    }
    fn Rsend_init(buf: *const c_void, count: c_int, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        send_init_impl("MPI_Rsend_init", buf, count as i64, datatype, dest, tag, comm, Mode::Ready, request)
    }
    fn Rsend_init_c(buf: *const c_void, count: MPI_Count, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        send_init_impl("MPI_Rsend_init_c", buf, count, datatype, dest, tag, comm, Mode::Ready, request)
    }
    fn Bsend_init(buf: *const c_void, count: c_int, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        send_init_impl("MPI_Bsend_init", buf, count as i64, datatype, dest, tag, comm, Mode::Buffered, request)
    }
    fn Bsend_init_c(buf: *const c_void, count: MPI_Count, datatype: MPI_Datatype, dest: c_int, tag: c_int, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        send_init_impl("MPI_Bsend_init_c", buf, count, datatype, dest, tag, comm, Mode::Buffered, request)
    }

    fn Recv(buf: *mut c_void, count: c_int, datatype: MPI_Datatype, source: c_int, tag: c_int, comm: MPI_Comm, status: *mut MPI_Status) -> c_int {
        recv_impl("MPI_Recv", buf, count as i64, datatype, source, tag, comm, status)
    }
    fn Recv_c(buf: *mut c_void, count: MPI_Count, datatype: MPI_Datatype, source: c_int, tag: c_int, comm: MPI_Comm, status: *mut MPI_Status) -> c_int {
        recv_impl("MPI_Recv_c", buf, count, datatype, source, tag, comm, status)
    }
    fn Irecv(buf: *mut c_void, count: c_int, datatype: MPI_Datatype, source: c_int, tag: c_int, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        irecv_impl("MPI_Irecv", buf, count as i64, datatype, source, tag, comm, request, false)
    }
    fn Irecv_c(buf: *mut c_void, count: MPI_Count, datatype: MPI_Datatype, source: c_int, tag: c_int, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        irecv_impl("MPI_Irecv_c", buf, count, datatype, source, tag, comm, request, false)
    }
    fn Recv_init(buf: *mut c_void, count: c_int, datatype: MPI_Datatype, source: c_int, tag: c_int, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        irecv_impl("MPI_Recv_init", buf, count as i64, datatype, source, tag, comm, request, true)
    }
    fn Recv_init_c(buf: *mut c_void, count: MPI_Count, datatype: MPI_Datatype, source: c_int, tag: c_int, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        irecv_impl("MPI_Recv_init_c", buf, count, datatype, source, tag, comm, request, true)
    }

    fn Sendrecv(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, dest: c_int, sendtag: c_int,
                recvbuf: *mut c_void, recvcount: c_int, recvtype: MPI_Datatype, source: c_int, recvtag: c_int,
                comm: MPI_Comm, status: *mut MPI_Status) -> c_int {
        sendrecv_impl("MPI_Sendrecv", sendbuf, sendcount as i64, sendtype, dest, sendtag, recvbuf, recvcount as i64, recvtype, source, recvtag, comm, status)
    }
    fn Sendrecv_c(sendbuf: *const c_void, sendcount: MPI_Count, sendtype: MPI_Datatype, dest: c_int, sendtag: c_int,
                recvbuf: *mut c_void, recvcount: MPI_Count, recvtype: MPI_Datatype, source: c_int, recvtag: c_int,
                comm: MPI_Comm, status: *mut MPI_Status) -> c_int {
        sendrecv_impl("MPI_Sendrecv_c", sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag, comm, status)
    }
    fn Sendrecv_replace(buf: *mut c_void, count: c_int, datatype: MPI_Datatype, dest: c_int, sendtag: c_int,
                        source: c_int, recvtag: c_int, comm: MPI_Comm, status: *mut MPI_Status) -> c_int {
        sendrecv_replace_impl("MPI_Sendrecv_replace", buf, count as i64, datatype, dest, sendtag, source, recvtag, comm, status)
    }
    fn Sendrecv_replace_c(buf: *mut c_void, count: MPI_Count, datatype: MPI_Datatype, dest: c_int, sendtag: c_int,
                        source: c_int, recvtag: c_int, comm: MPI_Comm, status: *mut MPI_Status) -> c_int {
        sendrecv_replace_impl("MPI_Sendrecv_replace_c", buf, count, datatype, dest, sendtag, source, recvtag, comm, status)
    }

    fn Isendrecv(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, dest: c_int, sendtag: c_int,
                 recvbuf: *mut c_void, recvcount: c_int, recvtype: MPI_Datatype, source: c_int, recvtag: c_int,
                 comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        isendrecv_impl("MPI_Isendrecv", sendbuf, sendcount as i64, sendtype, dest, sendtag, recvbuf, recvcount as i64, recvtype, source, recvtag, comm, request)
    }
    fn Isendrecv_c(sendbuf: *const c_void, sendcount: MPI_Count, sendtype: MPI_Datatype, dest: c_int, sendtag: c_int,
                   recvbuf: *mut c_void, recvcount: MPI_Count, recvtype: MPI_Datatype, source: c_int, recvtag: c_int,
                   comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        isendrecv_impl("MPI_Isendrecv_c", sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag, comm, request)
    }
    fn Isendrecv_replace(buf: *mut c_void, count: c_int, datatype: MPI_Datatype, dest: c_int, sendtag: c_int,
                         source: c_int, recvtag: c_int, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        isendrecv_replace_impl("MPI_Isendrecv_replace", buf, count as i64, datatype, dest, sendtag, source, recvtag, comm, request)
    }
    fn Isendrecv_replace_c(buf: *mut c_void, count: MPI_Count, datatype: MPI_Datatype, dest: c_int, sendtag: c_int,
                           source: c_int, recvtag: c_int, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        isendrecv_replace_impl("MPI_Isendrecv_replace_c", buf, count, datatype, dest, sendtag, source, recvtag, comm, request)
    }

    fn Buffer_attach(buffer: *mut c_void, size: c_int) -> c_int {
        buffer_attach("MPI_Buffer_attach", buffer, size as i64)
    }
    fn Buffer_attach_c(buffer: *mut c_void, size: MPI_Count) -> c_int {
        buffer_attach("MPI_Buffer_attach_c", buffer, size)
    }
    fn Buffer_detach(buffer_addr: *mut c_void, size: *mut c_int) -> c_int {
        let mut sz: i64 = 0;
        let rc = buffer_detach("MPI_Buffer_detach", buffer_addr, &mut sz);
        if rc == abi::MPI_SUCCESS && !size.is_null() {
            *size = sz as c_int;
        }
        rc
    }
    fn Buffer_detach_c(buffer_addr: *mut c_void, size: *mut MPI_Count) -> c_int {
        let mut sz: i64 = 0;
        let rc = buffer_detach("MPI_Buffer_detach_c", buffer_addr, &mut sz);
        if rc == abi::MPI_SUCCESS && !size.is_null() {
            *size = sz;
        }
        rc
    }

    fn Start(request: *mut MPI_Request) -> c_int {
        api("MPI_Start", None, |g| {
            if request.is_null() {
                return Err(err(ErrorClass::Request, "request pointer is NULL"));
            }
            let h = req_of(*request).ok_or_else(|| err(ErrorClass::Request, "MPI_REQUEST_NULL cannot be started"))?;
            if !g.eng.request(h)?.persistent {
                return Err(err(ErrorClass::Request, "only persistent requests can be started"));
            }
            if crate::part::on_start(g, h)? {
                return Ok(());
            }
            g.eng.start(h)
        })
    }
    fn Startall(count: c_int, array_of_requests: *mut MPI_Request) -> c_int {
        api("MPI_Startall", None, |g| {
            let reqs = request_slice(count, array_of_requests)?;
            for r in reqs.iter() {
                let h = req_of(*r).ok_or_else(|| err(ErrorClass::Request, "MPI_REQUEST_NULL cannot be started"))?;
                if !g.eng.request(h)?.persistent {
                    return Err(err(ErrorClass::Request, "only persistent requests can be started"));
                }
            }
            for r in reqs.iter() {
                if !crate::part::on_start(g, Handle(*r as u64))? {
                    g.eng.start(Handle(*r as u64))?;
                }
            }
            Ok(())
        })
    }

    fn Wait(request: *mut MPI_Request, status: *mut MPI_Status) -> c_int {
        api_blocking("MPI_Wait", |g| request_comm(g, request), |c| {
            if request.is_null() {
                return Err(err(ErrorClass::Request, "request pointer is NULL"));
            }
            let reqs = std::slice::from_raw_parts_mut(request, 1);
            let Some(h) = live(c.g(), reqs[0])? else {
                put_status(status, &empty_status(), None);
                return Ok(());
            };
            c.wait(h)?;
            let s = finish(c.g(), reqs, 0, status)?;
            put_status(status, &s, None);
            truncated(&s)
        })
    }

    fn Test(request: *mut MPI_Request, flag: *mut c_int, status: *mut MPI_Status) -> c_int {
        api_with("MPI_Test", |g| request_comm(g, request), |g| {
            if request.is_null() || flag.is_null() {
                return Err(err(ErrorClass::Arg, "request or flag pointer is NULL"));
            }
            let reqs = std::slice::from_raw_parts_mut(request, 1);
            let Some(h) = live(g, reqs[0])? else {
                *flag = 1;
                put_status(status, &empty_status(), None);
                return Ok(());
            };
            if !g.eng.test(h)? {
                *flag = 0;
                return Ok(());
            }
            *flag = 1;
            let s = finish(g, reqs, 0, status)?;
            put_status(status, &s, None);
            truncated(&s)
        })
    }

    fn Waitany(count: c_int, array_of_requests: *mut MPI_Request, index: *mut c_int, status: *mut MPI_Status) -> c_int {
        api_blocking("MPI_Waitany", |_| None, |c| {
            let reqs = request_slice(count, array_of_requests)?;
            if index.is_null() {
                return Err(err(ErrorClass::Arg, "index pointer is NULL"));
            }
            let handles: Vec<Option<Handle>> = reqs.iter().map(|r| live(c.g(), *r).ok().flatten()).collect();
            if multiple() && handles.iter().any(Option::is_some) {
                c.until(|e| handles.iter().flatten().any(|h| e.is_complete(*h).unwrap_or(true)))?;
            }
            let g = c.g();
            let Some(i) = g.eng.wait_any(&handles)? else {
                *index = abi::MPI_UNDEFINED;
                put_status(status, &empty_status(), None);
                return Ok(());
            };
            *index = i as c_int;
            let s = finish(g, reqs, i, status)?;
            put_status(status, &s, None);
            truncated(&s)
        })
    }

    fn Testany(count: c_int, array_of_requests: *mut MPI_Request, index: *mut c_int, flag: *mut c_int, status: *mut MPI_Status) -> c_int {
        api("MPI_Testany", None, |g| {
            let reqs = request_slice(count, array_of_requests)?;
            if index.is_null() || flag.is_null() {
                return Err(err(ErrorClass::Arg, "index or flag pointer is NULL"));
            }
            let handles: Vec<Option<Handle>> = reqs.iter().map(|r| live(g, *r)).collect::<Result<_, _>>()?;
            let any_live = handles.iter().any(Option::is_some);
            if let Some(i) = g.eng.test_any(&handles)? {
                *flag = 1;
                *index = i as c_int;
                let s = finish(g, reqs, i, status)?;
                put_status(status, &s, None);
                return truncated(&s);
            }
            *index = abi::MPI_UNDEFINED;
            *flag = (!any_live) as c_int;
            if !any_live {
                put_status(status, &empty_status(), None);
            }
            Ok(())
        })
    }

    fn Waitall(count: c_int, array_of_requests: *mut MPI_Request, array_of_statuses: *mut MPI_Status) -> c_int {
        api_blocking("MPI_Waitall", |_| None, |c| {
            let reqs = request_slice(count, array_of_requests)?;
            // Nothing is allocated: the array is looked at again where needed (its requests
            // stay until completed below). The first look, before any progress, checks every
            // handle (an invalid one fails the call before it waits) and finds the first
            // request still open; a request stays complete until it is released below, so
            // each later round looks again only from there, not at the whole array.
            let mut open = None;
            let mut invalid = None;
            c.until(|e| {
                let from = match open {
                    Some(i) => i,
                    None => {
                        let mut first_open = reqs.len();
                        for (i, r) in reqs.iter().enumerate() {
                            let Some(h) = req_of(*r) else { continue };
                            match e.request(h) {
                                Ok(q) => {
                                    if first_open == reqs.len() && still_open(q) {
                                        first_open = i;
                                    }
                                }
                                Err(x) => {
                                    invalid = Some(x);
                                    return true;
                                }
                            }
                        }
                        first_open
                    }
                };
                let mut i = from;
                while let Some(r) = reqs.get(i) {
                    if req_of(*r).is_some_and(|h| e.request(h).is_ok_and(still_open)) {
                        open = Some(i);
                        return false;
                    }
                    i += 1;
                }
                true
            })?;
            if let Some(x) = invalid {
                return Err(x);
            }
            complete_all(c.g(), reqs, array_of_statuses)
        })
    }

    fn Testall(count: c_int, array_of_requests: *mut MPI_Request, flag: *mut c_int, array_of_statuses: *mut MPI_Status) -> c_int {
        api("MPI_Testall", None, |g| {
            let reqs = request_slice(count, array_of_requests)?;
            if flag.is_null() {
                return Err(err(ErrorClass::Arg, "flag pointer is NULL"));
            }
            let handles: Vec<Option<Handle>> = reqs.iter().map(|r| live(g, *r)).collect::<Result<_, _>>()?;
            let all = g.eng.test_all(&handles)?;
            *flag = all as c_int;
            if !all {
                return Ok(());
            }
            complete_all(g, reqs, array_of_statuses)
        })
    }

    fn Waitsome(incount: c_int, array_of_requests: *mut MPI_Request, outcount: *mut c_int, array_of_indices: *mut c_int, array_of_statuses: *mut MPI_Status) -> c_int {
        api_blocking("MPI_Waitsome", |_| None, |c| {
            let reqs = request_slice(incount, array_of_requests)?;
            if outcount.is_null() {
                return Err(err(ErrorClass::Arg, "outcount pointer is NULL"));
            }
            let handles: Vec<Option<Handle>> = reqs.iter().map(|r| live(c.g(), *r)).collect::<Result<_, _>>()?;
            if handles.iter().all(|h| h.is_none()) {
                *outcount = abi::MPI_UNDEFINED;
                return Ok(());
            }
            c.until(|e| handles.iter().flatten().any(|h| e.is_complete(*h).unwrap_or(true)))?;
            let g = c.g();
            let done = g.eng.wait_some(&handles)?;
            complete_some(g, reqs, &done, outcount, array_of_indices, array_of_statuses)
        })
    }

    fn Testsome(incount: c_int, array_of_requests: *mut MPI_Request, outcount: *mut c_int, array_of_indices: *mut c_int, array_of_statuses: *mut MPI_Status) -> c_int {
        api("MPI_Testsome", None, |g| {
            let reqs = request_slice(incount, array_of_requests)?;
            if outcount.is_null() {
                return Err(err(ErrorClass::Arg, "outcount pointer is NULL"));
            }
            let handles: Vec<Option<Handle>> = reqs.iter().map(|r| live(g, *r)).collect::<Result<_, _>>()?;
            if handles.iter().all(|h| h.is_none()) {
                *outcount = abi::MPI_UNDEFINED;
                return Ok(());
            }
            let done = g.eng.test_some(&handles)?;
            complete_some(g, reqs, &done, outcount, array_of_indices, array_of_statuses)
        })
    }

    fn Request_free(request: *mut MPI_Request) -> c_int {
        api("MPI_Request_free", None, |g| {
            if request.is_null() {
                return Err(err(ErrorClass::Request, "request pointer is NULL"));
            }
            let h = req_of(*request).ok_or_else(|| err(ErrorClass::Request, "MPI_REQUEST_NULL cannot be freed"))?;
            crate::greq::on_request_free(g, h)?;
            g.eng.request_free(h)?;
            *request = abi::MPI_REQUEST_NULL as MPI_Request;
            Ok(())
        })
    }

    fn Request_get_status(request: MPI_Request, flag: *mut c_int, status: *mut MPI_Status) -> c_int {
        api("MPI_Request_get_status", None, |g| {
            if flag.is_null() {
                return Err(err(ErrorClass::Arg, "flag pointer is NULL"));
            }
            let Some(h) = live(g, request)? else {
                *flag = 1;
                put_status(status, &empty_status(), None);
                return Ok(());
            };
            if !g.eng.is_complete(h)? {
                g.eng.poll_progress()?;
            }
            *flag = g.eng.is_complete(h)? as c_int;
            if *flag != 0 {
                put_status(status, &g.eng.status(h)?, None);
            }
            Ok(())
        })
    }

    fn Cancel(request: *mut MPI_Request) -> c_int {
        api("MPI_Cancel", None, |g| {
            if request.is_null() {
                return Err(err(ErrorClass::Request, "request pointer is NULL"));
            }
            let h = req_of(*request).ok_or_else(|| err(ErrorClass::Request, "MPI_REQUEST_NULL cannot be cancelled"))?;
            if crate::greq::on_cancel(g, h)? {
                return Ok(());
            }
            g.eng.cancel(h)
        })
    }

    fn Test_cancelled(status: *const MPI_Status, flag: *mut c_int) -> c_int {
        api("MPI_Test_cancelled", None, |_| {
            if status.is_null() || flag.is_null() {
                return Err(err(ErrorClass::Arg, "status or flag pointer is NULL"));
            }
            *flag = ((*status).internal[2] != 0) as c_int;
            Ok(())
        })
    }

    fn Status_set_cancelled(status: *mut MPI_Status, flag: c_int) -> c_int {
        api("MPI_Status_set_cancelled", None, |_| {
            if status.is_null() {
                return Err(err(ErrorClass::Arg, "status pointer is NULL"));
            }
            (*status).internal[2] = (flag != 0) as i32;
            Ok(())
        })
    }

    fn Probe(source: c_int, tag: c_int, comm: MPI_Comm, status: *mut MPI_Status) -> c_int {
        api_blocking("MPI_Probe", |_| Some(comm as usize), |c| {
            let (ch, source, tag) = probe_args(c.g(), source, tag, comm)?;
            let s = if multiple() {
                let mut found = None;
                c.until_mut(|g| {
                    found = g.eng.iprobe(ch, source, tag)?;
                    Ok(found.is_some())
                })?;
                found.ok_or_else(|| err(ErrorClass::Intern, "probe ended without a message"))?
            } else {
                c.g().eng.probe(ch, source, tag)?
            };
            put_status(status, &s, None);
            Ok(())
        })
    }

    fn Iprobe(source: c_int, tag: c_int, comm: MPI_Comm, flag: *mut c_int, status: *mut MPI_Status) -> c_int {
        api("MPI_Iprobe", Some(comm as usize), |g| {
            let (ch, source, tag) = probe_args(g, source, tag, comm)?;
            if flag.is_null() {
                return Err(err(ErrorClass::Arg, "flag pointer is NULL"));
            }
            match g.eng.iprobe(ch, source, tag)? {
                Some(s) => {
                    *flag = 1;
                    put_status(status, &s, None);
                }
                None => *flag = 0,
            }
            Ok(())
        })
    }

    fn Mprobe(source: c_int, tag: c_int, comm: MPI_Comm, message: *mut MPI_Message, status: *mut MPI_Status) -> c_int {
        api_blocking("MPI_Mprobe", |_| Some(comm as usize), |c| {
            let (ch, source, tag) = probe_args(c.g(), source, tag, comm)?;
            if message.is_null() {
                return Err(err(ErrorClass::Arg, "message pointer is NULL"));
            }
            let (m, s) = if multiple() {
                let mut found = None;
                c.until_mut(|g| {
                    found = g.eng.improbe(ch, source, tag)?;
                    Ok(found.is_some())
                })?;
                found.ok_or_else(|| err(ErrorClass::Intern, "probe ended without a message"))?
            } else {
                c.g().eng.mprobe(ch, source, tag)?
            };
            *message = message_handle(m);
            put_status(status, &s, None);
            Ok(())
        })
    }

    fn Improbe(source: c_int, tag: c_int, comm: MPI_Comm, flag: *mut c_int, message: *mut MPI_Message, status: *mut MPI_Status) -> c_int {
        api("MPI_Improbe", Some(comm as usize), |g| {
            let (ch, source, tag) = probe_args(g, source, tag, comm)?;
            if flag.is_null() || message.is_null() {
                return Err(err(ErrorClass::Arg, "flag or message pointer is NULL"));
            }
            match g.eng.improbe(ch, source, tag)? {
                Some((m, s)) => {
                    *flag = 1;
                    *message = message_handle(m);
                    put_status(status, &s, None);
                }
                None => *flag = 0,
            }
            Ok(())
        })
    }

    fn Mrecv(buf: *mut c_void, count: c_int, datatype: MPI_Datatype, message: *mut MPI_Message, status: *mut MPI_Status) -> c_int {
        mrecv_impl("MPI_Mrecv", buf, count as i64, datatype, message, status)
    }
    fn Mrecv_c(buf: *mut c_void, count: MPI_Count, datatype: MPI_Datatype, message: *mut MPI_Message, status: *mut MPI_Status) -> c_int {
        mrecv_impl("MPI_Mrecv_c", buf, count, datatype, message, status)
    }
    fn Imrecv(buf: *mut c_void, count: c_int, datatype: MPI_Datatype, message: *mut MPI_Message, request: *mut MPI_Request) -> c_int {
        imrecv_impl("MPI_Imrecv", buf, count as i64, datatype, message, request)
    }
    fn Imrecv_c(buf: *mut c_void, count: MPI_Count, datatype: MPI_Datatype, message: *mut MPI_Message, request: *mut MPI_Request) -> c_int {
        imrecv_impl("MPI_Imrecv_c", buf, count, datatype, message, request)
    }

    fn Get_count(status: *const MPI_Status, datatype: MPI_Datatype, count: *mut c_int) -> c_int {
        let mut c = 0i64;
        let rc = get_count_impl("MPI_Get_count", status, datatype, &mut c, false);
        if rc == abi::MPI_SUCCESS && !count.is_null() {
            *count = if c > i32::MAX as i64 { abi::MPI_UNDEFINED } else { c as c_int };
        }
        rc
    }
    fn Get_count_c(status: *const MPI_Status, datatype: MPI_Datatype, count: *mut MPI_Count) -> c_int {
        let mut c = 0i64;
        let rc = get_count_impl("MPI_Get_count_c", status, datatype, &mut c, false);
        if rc == abi::MPI_SUCCESS && !count.is_null() {
            *count = c;
        }
        rc
    }
    fn Get_elements(status: *const MPI_Status, datatype: MPI_Datatype, count: *mut c_int) -> c_int {
        let mut c = 0i64;
        let rc = get_count_impl("MPI_Get_elements", status, datatype, &mut c, true);
        if rc == abi::MPI_SUCCESS && !count.is_null() {
            *count = if c > i32::MAX as i64 { abi::MPI_UNDEFINED } else { c as c_int };
        }
        rc
    }
    fn Get_elements_c(status: *const MPI_Status, datatype: MPI_Datatype, count: *mut MPI_Count) -> c_int {
        let mut c = 0i64;
        let rc = get_count_impl("MPI_Get_elements_c", status, datatype, &mut c, true);
        if rc == abi::MPI_SUCCESS && !count.is_null() {
            *count = c;
        }
        rc
    }
    fn Get_elements_x(status: *const MPI_Status, datatype: MPI_Datatype, count: *mut MPI_Count) -> c_int {
        let mut c = 0i64;
        let rc = get_count_impl("MPI_Get_elements_x", status, datatype, &mut c, true);
        if rc == abi::MPI_SUCCESS && !count.is_null() {
            *count = c;
        }
        rc
    }
}

unsafe fn buffer_attach(func: &str, buffer: *mut c_void, size: i64) -> c_int {
    api(func, None, |g| {
        if size < 0 {
            return Err(err(ErrorClass::Arg, format!("buffer size {size} is negative")));
        }
        if buffer.is_null() && size > 0 {
            return Err(err(ErrorClass::Buffer, "buffer is NULL"));
        }
        if g.bsend_buf.is_some() {
            return Err(err(ErrorClass::Buffer, "a Bsend buffer is already attached"));
        }
        g.bsend_buf = Some((buffer as usize, size as usize));
        g.eng.bsend_capacity = size as usize;
        Ok(())
    })
}

unsafe fn buffer_detach(func: &'static str, buffer_addr: *mut c_void, size: &mut i64) -> c_int {
    api_blocking(func, |_| None, |c| {
        if buffer_addr.is_null() {
            return Err(err(ErrorClass::Arg, "buffer_addr is NULL"));
        }
        // Detach waits until every buffered message has left the buffer.
        c.until(|e| e.bsend_in_use() == 0)?;
        let g = c.g();
        let (addr, sz) = g.bsend_buf.take().unwrap_or((0, 0));
        g.eng.bsend_capacity = 0;
        *(buffer_addr as *mut *mut c_void) = addr as *mut c_void;
        *size = sz as i64;
        Ok(())
    })
}

fn probe_args(g: &Global, source: c_int, tag: c_int, comm: MPI_Comm) -> Result<(Handle, c_int, c_int), MpiError> {
    let ch = comm_handle(g, comm as usize)?;
    if tag != abi::MPI_ANY_TAG && !(0..=TAG_UB).contains(&tag) {
        return Err(err(ErrorClass::Tag, format!("invalid tag {tag}")));
    }
    Ok((ch, source, tag))
}

fn message_handle(m: Option<Handle>) -> MPI_Message {
    match m {
        Some(h) => h.0 as MPI_Message,
        None => abi::MPI_MESSAGE_NO_PROC as MPI_Message,
    }
}

unsafe fn take_message(message: *mut MPI_Message) -> Result<Option<Handle>, MpiError> {
    if message.is_null() {
        return Err(err(ErrorClass::Arg, "message pointer is NULL"));
    }
    let m = *message as usize;
    if m == abi::MPI_MESSAGE_NULL {
        return Err(err(ErrorClass::Request, "MPI_MESSAGE_NULL cannot be received"));
    }
    *message = abi::MPI_MESSAGE_NULL as MPI_Message;
    Ok(if m == abi::MPI_MESSAGE_NO_PROC { None } else { Some(Handle(m as u64)) })
}

unsafe fn mrecv_impl(func: &'static str, buf: *mut c_void, count: i64, dt: MPI_Datatype, message: *mut MPI_Message, status: *mut MPI_Status) -> c_int {
    api_blocking(func, |_| None, |c| {
        let spec = recv_spec(c.g(), buf, count, dt, abi::MPI_ANY_SOURCE, abi::MPI_ANY_TAG, abi::MPI_COMM_SELF as MPI_Comm)?;
        let m = take_message(message)?;
        let h = c.g().eng.imrecv(m, spec)?;
        let s = c.wait(h);
        c.g().eng.release(h);
        let s = s?;
        put_status(status, &s, None);
        truncated(&s)
    })
}

unsafe fn imrecv_impl(func: &str, buf: *mut c_void, count: i64, dt: MPI_Datatype, message: *mut MPI_Message, request: *mut MPI_Request) -> c_int {
    api(func, None, |g| {
        let spec = recv_spec(g, buf, count, dt, abi::MPI_ANY_SOURCE, abi::MPI_ANY_TAG, abi::MPI_COMM_SELF as MPI_Comm)?;
        let m = take_message(message)?;
        let h = g.eng.imrecv(m, spec)?;
        out_request(request, h)
    })
}

unsafe fn get_count_impl(func: &str, status: *const MPI_Status, datatype: MPI_Datatype, out: &mut i64, elements: bool) -> c_int {
    api(func, None, |g| {
        if status.is_null() {
            return Err(err(ErrorClass::Arg, "status is NULL (MPI_STATUS_IGNORE cannot be queried)"));
        }
        let t = dtype(g, datatype as usize)?;
        let bytes = status_count(&*status);
        *out = if t.size == 0 {
            0
        } else if elements {
            t.elements_in(bytes as usize).map_or(abi::MPI_UNDEFINED as i64, |e| e as i64)
        } else if bytes as usize % t.size == 0 {
            bytes / t.size as i64
        } else {
            abi::MPI_UNDEFINED as i64
        };
        Ok(())
    })
}

/// Finish every request of `reqs` (all complete; null and inactive ones report an empty
/// status) and write the statuses. Their error fields are written only if some request
/// failed (MPI_ERR_IN_STATUS), and then all of them.
unsafe fn complete_all(g: &mut Global, reqs: &mut [MPI_Request], statuses: *mut MPI_Status) -> Result<(), MpiError> {
    let mut any_error = false;
    for i in 0..reqs.len() {
        let out = if statuses.is_null() { statuses } else { statuses.add(i) };
        let s = match req_of(reqs[i]) {
            Some(_) => finish(g, reqs, i, out)?,
            None => empty_status(),
        };
        if s.error.is_some() && !any_error {
            any_error = true;
            // The statuses written before this one all succeeded: now their error fields say so.
            for j in 0..i {
                if !statuses.is_null() {
                    (*statuses.add(j)).MPI_ERROR = abi::MPI_SUCCESS;
                }
            }
        }
        put_status(out, &s, any_error.then(|| error_code_of(&s)));
    }
    if any_error {
        return Err(err(ErrorClass::InStatus, "one or more requests failed; see the statuses"));
    }
    Ok(())
}

/// Finish the requests at `completed` (indices the engine chose) and report them.
unsafe fn complete_some(
    g: &mut Global,
    reqs: &mut [MPI_Request],
    completed: &[usize],
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut MPI_Status,
) -> Result<(), MpiError> {
    let mut n = 0usize;
    let mut done = Vec::new();
    for &i in completed {
        done.push((i, finish(g, reqs, i, if statuses.is_null() { statuses } else { statuses.add(done.len()) })?));
    }
    let any_error = done.iter().any(|(_, s)| s.error.is_some());
    for (i, s) in &done {
        if !indices.is_null() {
            *indices.add(n) = *i as c_int;
        }
        if !statuses.is_null() {
            put_status(statuses.add(n), s, any_error.then(|| error_code_of(s)));
        }
        n += 1;
    }
    *outcount = n as c_int;
    if any_error {
        return Err(err(ErrorClass::InStatus, "one or more requests failed; see the statuses"));
    }
    Ok(())
}
