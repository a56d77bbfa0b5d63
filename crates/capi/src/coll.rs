//! Collective entry points: every blocking collective, its nonblocking (MPI_I…) and
//! persistent (MPI_…_init) forms, each with its large-count (_c) twin.
//!
//! This layer checks the arguments that are significant on the calling rank (which depends
//! on the root and, for intercommunicators, on MPI_ROOT / MPI_PROC_NULL), resolves
//! MPI_IN_PLACE and handles, and hands a `Coll` to the engine.

use std::ffi::{c_int, c_void};

use steadfast_core::coll::{Buf, Coll, RBuf, VBuf, WBuf};
use steadfast_core::datatype::{Datatype, TypeRef};
use steadfast_core::op::{Elem, Op, PredefOp, Reduction};
use steadfast_core::{ErrorClass, Handle, MpiError};

use crate::abi::{self, MPI_Aint, MPI_Comm, MPI_Count, MPI_Datatype, MPI_Info, MPI_Op, MPI_Request};
use crate::global::{api, comm_handle, dtype, Global};
use crate::mpi_api;
use crate::op::reduction;

fn err(class: ErrorClass, msg: impl Into<String>) -> MpiError {
    MpiError::new(class, msg)
}

/// How a collective is run.
#[derive(Clone, Copy)]
enum Mode {
    Blocking,
    /// Nonblocking: the request is written here.
    Start(*mut MPI_Request),
    /// Persistent (MPI_…_init): the inactive request is written here.
    Init(*mut MPI_Request),
}

/// This rank's view of the communicator.
struct Ctx {
    h: Handle,
    rank: i32,
    size: i32,
    /// Remote group size of an intercommunicator.
    remote: Option<i32>,
}

impl Ctx {
    /// Number of ranks per-rank arrays describe (the remote group on an intercommunicator).
    fn peers(&self) -> usize {
        self.remote.unwrap_or(self.size) as usize
    }
    fn intra_only(&self, what: &str) -> Result<(), MpiError> {
        if self.remote.is_some() {
            return Err(err(ErrorClass::Comm, format!("{what} is not defined on intercommunicators")));
        }
        Ok(())
    }
}

fn ctx(g: &Global, comm: MPI_Comm) -> Result<Ctx, MpiError> {
    let h = comm_handle(g, comm as usize)?;
    let c = g.eng.comm(h)?;
    Ok(Ctx { h, rank: c.rank, size: c.size(), remote: c.remote.as_ref().map(|r| r.len() as i32) })
}

/// What the calling rank is in a rooted collective.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Root,
    Leaf,
    /// MPI_PROC_NULL in an intercommunicator's root group: takes no part.
    Idle,
}

fn role(c: &Ctx, root: i32) -> Result<Role, MpiError> {
    match c.remote {
        None if (0..c.size).contains(&root) => Ok(if root == c.rank { Role::Root } else { Role::Leaf }),
        None => Err(err(ErrorClass::Root, format!("root {root} is not a rank of the communicator (size {})", c.size))),
        Some(_) if root == abi::MPI_ROOT => Ok(Role::Root),
        Some(_) if root == abi::MPI_PROC_NULL => Ok(Role::Idle),
        Some(rs) if (0..rs).contains(&root) => Ok(Role::Leaf),
        Some(rs) => Err(err(
            ErrorClass::Root,
            format!("root {root} is neither MPI_ROOT, MPI_PROC_NULL nor a rank of the remote group (size {rs})"),
        )),
    }
}

fn in_place(p: *const c_void) -> bool {
    p as usize == abi::MPI_IN_PLACE
}

fn no_in_place_on_inter(c: &Ctx, ps: &[*const c_void]) -> Result<(), MpiError> {
    if c.remote.is_some() && ps.iter().any(|p| in_place(*p)) {
        return Err(err(ErrorClass::Buffer, "MPI_IN_PLACE cannot be used on an intercommunicator"));
    }
    Ok(())
}

fn count_of(n: i64, what: &str) -> Result<usize, MpiError> {
    usize::try_from(n).map_err(|_| err(ErrorClass::Count, format!("{what} {n} is negative")))
}

/// Like [`count_of`] for the count of buffer `what` (message built only on error).
fn buf_count(n: i64, what: &str) -> Result<usize, MpiError> {
    usize::try_from(n).map_err(|_| err(ErrorClass::Count, format!("{what} count {n} is negative")))
}

fn check_buf(p: *const c_void, count: usize, t: &Datatype, what: &str) -> Result<(), MpiError> {
    // NULL is MPI_BOTTOM, meaningful only with types holding absolute addresses.
    if p.is_null() && count > 0 && t.predefined && t.size > 0 {
        return Err(err(ErrorClass::Buffer, format!("{what} is NULL with count {count} of {}", t.name)));
    }
    if in_place(p) {
        return Err(err(ErrorClass::Buffer, format!("MPI_IN_PLACE is not allowed as {what} here")));
    }
    Ok(())
}

/// A significant buffer argument, checked.
fn typed(g: &Global, p: *const c_void, count: i64, dt: MPI_Datatype, what: &str) -> Result<Buf, MpiError> {
    let count = buf_count(count, what)?;
    let t = dtype(g, dt as usize)?;
    check_buf(p, count, &t, what)?;
    Ok(Buf { ptr: p as *mut u8, count, dtype: t })
}

fn byte() -> TypeRef {
    steadfast_core::coll::byte_type()
}

/// An argument that is not significant on this rank.
fn unused() -> Buf {
    Buf { ptr: std::ptr::null_mut(), count: 0, dtype: byte() }
}

fn unused_v() -> VBuf {
    VBuf { ptr: std::ptr::null_mut(), counts: Vec::new(), displs: Vec::new(), dtype: byte() }
}

fn no_alias(send: *const c_void, recv: *const c_void, bytes: usize) -> Result<(), MpiError> {
    if bytes > 0 && !send.is_null() && send == recv {
        return Err(err(ErrorClass::Buffer, "send and receive buffers must differ (use MPI_IN_PLACE)"));
    }
    Ok(())
}

/// MPI forbids the send and receive buffers of a collective to overlap (MPI_IN_PLACE is the
/// way to share them). Checked on the bytes each side spans where both types are
/// contiguous (e.g. a send block inside an allgather's receive buffer), else as equality.
fn no_overlap(send: *const c_void, send_bytes: usize, send_contig: bool, recv: *const c_void, recv_bytes: usize, recv_contig: bool) -> Result<(), MpiError> {
    if !(send_contig && recv_contig) {
        return no_alias(send, recv, send_bytes.min(recv_bytes));
    }
    let (s, r) = (send as usize, recv as usize);
    if send_bytes > 0 && recv_bytes > 0 && !send.is_null() && !recv.is_null() && s < r.saturating_add(recv_bytes) && r < s.saturating_add(send_bytes) {
        return Err(err(ErrorClass::Buffer, "the send buffer overlaps the receive buffer (use MPI_IN_PLACE)"));
    }
    Ok(())
}

/// Integer types C passes counts and displacements in.
trait AsI64: Copy {
    fn as_i64(self) -> i64;
}
impl AsI64 for c_int {
    fn as_i64(self) -> i64 {
        self as i64
    }
}
impl AsI64 for i64 {
    fn as_i64(self) -> i64 {
        self
    }
}
impl AsI64 for isize {
    fn as_i64(self) -> i64 {
        self as i64
    }
}

unsafe fn array<T: AsI64>(p: *const T, n: usize, what: &str) -> Result<Vec<i64>, MpiError> {
    if n == 0 {
        return Ok(Vec::new());
    }
    if p.is_null() {
        return Err(err(ErrorClass::Arg, format!("{what} array is NULL")));
    }
    Ok(std::slice::from_raw_parts(p, n).iter().map(|x| x.as_i64()).collect())
}

unsafe fn counts<T: AsI64>(p: *const T, n: usize, what: &str) -> Result<Vec<usize>, MpiError> {
    array(p, n, what)?.into_iter().map(|c| count_of(c, what)).collect()
}

unsafe fn displs<T: AsI64>(p: *const T, n: usize, what: &str) -> Result<Vec<isize>, MpiError> {
    Ok(array(p, n, what)?.into_iter().map(|d| d as isize).collect())
}

/// A significant v-buffer argument, checked.
unsafe fn vtyped<C: AsI64, D: AsI64>(g: &Global, p: *const c_void, cs: *const C, ds: *const D, dt: MPI_Datatype, n: usize, what: &str) -> Result<VBuf, MpiError> {
    let counts = counts(cs, n, &format!("{what} counts"))?;
    let displs = displs(ds, n, &format!("{what} displacements"))?;
    let t = dtype(g, dt as usize)?;
    check_buf(p, counts.iter().sum(), &t, what)?;
    Ok(VBuf { ptr: p as *mut u8, counts, displs, dtype: t })
}

/// A significant w-buffer argument (per-rank types, byte displacements), checked.
unsafe fn wtyped<C: AsI64, D: AsI64>(g: &Global, p: *const c_void, cs: *const C, ds: *const D, ts: *const MPI_Datatype, n: usize, what: &str) -> Result<WBuf, MpiError> {
    let counts = counts(cs, n, &format!("{what} counts"))?;
    let displs = displs(ds, n, &format!("{what} displacements"))?;
    if n > 0 && ts.is_null() {
        return Err(err(ErrorClass::Arg, format!("{what} types array is NULL")));
    }
    let mut dtypes = Vec::with_capacity(n);
    for (i, &c) in counts.iter().enumerate() {
        let h = *ts.add(i);
        // A type only matters for blocks that carry data.
        dtypes.push(if c == 0 { dtype(g, h as usize).unwrap_or_else(|_| byte()) } else { dtype(g, h as usize)? });
        check_buf(p, c, &dtypes[i], what)?;
    }
    Ok(WBuf { ptr: p as *mut u8, counts, displs, dtypes })
}

fn launch(g: &mut Global, comm: Handle, c: Coll, mode: Mode) -> Result<(), MpiError> {
    match mode {
        Mode::Blocking if crate::global::multiple() => {
            // Run as its nonblocking form, waited for after the body with the lock released
            // (global::api_with), so other threads' calls go on meanwhile.
            let h = g.eng.icoll_blocking_user(comm, c)?;
            g.pending.push(h);
            Ok(())
        }
        Mode::Blocking => g.eng.coll(comm, &c),
        Mode::Start(req) | Mode::Init(req) => {
            if req.is_null() {
                return Err(err(ErrorClass::Arg, "request pointer is NULL"));
            }
            let h = if matches!(mode, Mode::Start(_)) { g.eng.icoll(comm, c)? } else { g.eng.coll_init(comm, c)? };
            // SAFETY: checked non-null; the application passed a writable MPI_Request.
            unsafe { *req = h.0 as MPI_Request };
            Ok(())
        }
    }
}

/// A reduction that does nothing (arguments of an intercommunicator rank that takes no part).
fn idle_reduction() -> Reduction {
    Reduction { op: Op::Predef(PredefOp::NoOp), dtype: byte(), elem: Elem::None, type_handle: abi::MPI_BYTE }
}

// ---- implementations ---------------------------------------------------------------------------

unsafe fn barrier_impl(func: &str, comm: MPI_Comm, mode: Mode) -> c_int {
    api(func, Some(comm as usize), |g| {
        let c = ctx(g, comm)?;
        launch(g, c.h, Coll::Barrier, mode)
    })
}

unsafe fn bcast_impl(func: &str, buf: *mut c_void, count: i64, dt: MPI_Datatype, root: c_int, comm: MPI_Comm, mode: Mode) -> c_int {
    api(func, Some(comm as usize), |g| {
        if matches!(mode, Mode::Blocking) && bcast_fast(g, buf, count, dt, root, comm)? {
            return Ok(());
        }
        let c = ctx(g, comm)?;
        let r = role(&c, root)?;
        let b = if r == Role::Idle { unused() } else { typed(g, buf, count, dt, "buffer")? };
        launch(g, c.h, Coll::Bcast { buf: b, root }, mode)
    })
}

/// A blocking MPI_Bcast of a contiguous type straight to the engine's channel broadcast or
/// small tree, where that applies ([`steadfast_core::Engine::bcast_contig`]); Ok(false),
/// nothing done, sends it the general way, which also reports any argument error.
fn bcast_fast(g: &mut Global, buf: *mut c_void, count: i64, dt: MPI_Datatype, root: c_int, comm: MPI_Comm) -> Result<bool, MpiError> {
    if crate::global::multiple() {
        return Ok(false);
    }
    let Some(len) = crate::pt2pt::contiguous_bytes(g, dt, count) else { return Ok(false) };
    if buf.is_null() && len > 0 {
        return Ok(false);
    }
    let Ok(h) = comm_handle(g, comm as usize) else { return Ok(false) };
    g.eng.bcast_contig(h, buf.cast(), len, root)
}

#[allow(clippy::too_many_arguments)]
unsafe fn gather_impl(
    func: &str,
    sendbuf: *const c_void,
    sendcount: i64,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: i64,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    mode: Mode,
) -> c_int {
    api(func, Some(comm as usize), |g| {
        let c = ctx(g, comm)?;
        let r = role(&c, root)?;
        no_in_place_on_inter(&c, &[sendbuf, recvbuf])?;
        let inter = c.remote.is_some();
        let send = match r {
            Role::Idle => None,
            Role::Root if inter || in_place(sendbuf) => None,
            _ if in_place(sendbuf) => return Err(err(ErrorClass::Buffer, "MPI_IN_PLACE is only allowed at the root")),
            _ => Some(typed(g, sendbuf, sendcount, sendtype, "sendbuf")?),
        };
        let recv = if r == Role::Root { typed(g, recvbuf, recvcount, recvtype, "recvbuf")? } else { unused() };
        if let Some(s) = &send {
            no_alias(sendbuf, recvbuf, s.dtype.packed_size(s.count) * usize::from(r == Role::Root))?;
        }
        launch(g, c.h, Coll::Gather { send, recv, root }, mode)
    })
}

#[allow(clippy::too_many_arguments)]
unsafe fn gatherv_impl<C: AsI64, D: AsI64>(
    func: &str,
    sendbuf: *const c_void,
    sendcount: i64,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const C,
    displs: *const D,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    mode: Mode,
) -> c_int {
    api(func, Some(comm as usize), |g| {
        let c = ctx(g, comm)?;
        let r = role(&c, root)?;
        no_in_place_on_inter(&c, &[sendbuf, recvbuf])?;
        let inter = c.remote.is_some();
        let send = match r {
            Role::Idle => None,
            Role::Root if inter || in_place(sendbuf) => None,
            _ if in_place(sendbuf) => return Err(err(ErrorClass::Buffer, "MPI_IN_PLACE is only allowed at the root")),
            _ => Some(typed(g, sendbuf, sendcount, sendtype, "sendbuf")?),
        };
        let recv = if r == Role::Root { vtyped(g, recvbuf, recvcounts, displs, recvtype, c.peers(), "recvbuf")? } else { unused_v() };
        if let Some(s) = &send {
            no_alias(sendbuf, recvbuf, s.dtype.packed_size(s.count) * usize::from(r == Role::Root))?;
        }
        launch(g, c.h, Coll::Gatherv { send, recv, root }, mode)
    })
}

#[allow(clippy::too_many_arguments)]
unsafe fn scatter_impl(
    func: &str,
    sendbuf: *const c_void,
    sendcount: i64,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: i64,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    mode: Mode,
) -> c_int {
    api(func, Some(comm as usize), |g| {
        let c = ctx(g, comm)?;
        let r = role(&c, root)?;
        no_in_place_on_inter(&c, &[sendbuf, recvbuf])?;
        let inter = c.remote.is_some();
        let send = if r == Role::Root { typed(g, sendbuf, sendcount, sendtype, "sendbuf")? } else { unused() };
        let recv = match r {
            Role::Idle => None,
            Role::Root if inter || in_place(recvbuf) => None,
            _ if in_place(recvbuf) => return Err(err(ErrorClass::Buffer, "MPI_IN_PLACE is only allowed at the root")),
            _ => Some(typed(g, recvbuf, recvcount, recvtype, "recvbuf")?),
        };
        if let Some(rb) = &recv {
            no_alias(sendbuf, recvbuf, rb.dtype.packed_size(rb.count) * usize::from(r == Role::Root))?;
        }
        launch(g, c.h, Coll::Scatter { send, recv, root }, mode)
    })
}

#[allow(clippy::too_many_arguments)]
unsafe fn scatterv_impl<C: AsI64, D: AsI64>(
    func: &str,
    sendbuf: *const c_void,
    sendcounts: *const C,
    displs: *const D,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: i64,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    mode: Mode,
) -> c_int {
    api(func, Some(comm as usize), |g| {
        let c = ctx(g, comm)?;
        let r = role(&c, root)?;
        no_in_place_on_inter(&c, &[sendbuf, recvbuf])?;
        let inter = c.remote.is_some();
        let send = if r == Role::Root { vtyped(g, sendbuf, sendcounts, displs, sendtype, c.peers(), "sendbuf")? } else { unused_v() };
        let recv = match r {
            Role::Idle => None,
            Role::Root if inter || in_place(recvbuf) => None,
            _ if in_place(recvbuf) => return Err(err(ErrorClass::Buffer, "MPI_IN_PLACE is only allowed at the root")),
            _ => Some(typed(g, recvbuf, recvcount, recvtype, "recvbuf")?),
        };
        if let Some(rb) = &recv {
            no_alias(sendbuf, recvbuf, rb.dtype.packed_size(rb.count) * usize::from(r == Role::Root))?;
        }
        launch(g, c.h, Coll::Scatterv { send, recv, root }, mode)
    })
}

#[allow(clippy::too_many_arguments)]
unsafe fn allgather_impl(
    func: &str,
    sendbuf: *const c_void,
    sendcount: i64,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: i64,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    mode: Mode,
    all_to_all: bool,
) -> c_int {
    api(func, Some(comm as usize), |g| {
        let c = ctx(g, comm)?;
        no_in_place_on_inter(&c, &[sendbuf, recvbuf])?;
        let send = if in_place(sendbuf) { None } else { Some(typed(g, sendbuf, sendcount, sendtype, "sendbuf")?) };
        let recv = typed(g, recvbuf, recvcount, recvtype, "recvbuf")?;
        if let Some(s) = &send {
            let all = recv.dtype.packed_size(recv.count).saturating_mul(c.peers());
            no_overlap(sendbuf, s.dtype.packed_size(s.count), s.dtype.is_contiguous(), recvbuf, all, recv.dtype.is_contiguous())?;
        }
        let coll = if all_to_all { Coll::Alltoall { send, recv } } else { Coll::Allgather { send, recv } };
        launch(g, c.h, coll, mode)
    })
}

#[allow(clippy::too_many_arguments)]
unsafe fn allgatherv_impl<C: AsI64, D: AsI64>(
    func: &str,
    sendbuf: *const c_void,
    sendcount: i64,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const C,
    displs: *const D,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    mode: Mode,
) -> c_int {
    api(func, Some(comm as usize), |g| {
        let c = ctx(g, comm)?;
        no_in_place_on_inter(&c, &[sendbuf, recvbuf])?;
        let send = if in_place(sendbuf) { None } else { Some(typed(g, sendbuf, sendcount, sendtype, "sendbuf")?) };
        let recv = vtyped(g, recvbuf, recvcounts, displs, recvtype, c.peers(), "recvbuf")?;
        if let Some(s) = &send {
            // The blocks' span, in elements, when no displacement is negative.
            let span = recv.counts.iter().zip(&recv.displs).try_fold(0usize, |m, (&n, &d)| usize::try_from(d).ok().map(|d| if n == 0 { m } else { m.max(d.saturating_add(n)) }));
            let (all, contig) = match span {
                Some(e) => (recv.dtype.packed_size(1).saturating_mul(e), recv.dtype.is_contiguous()),
                None => (recv.dtype.packed_size(recv.counts.iter().sum()), false),
            };
            no_overlap(sendbuf, s.dtype.packed_size(s.count), s.dtype.is_contiguous(), recvbuf, all, contig)?;
        }
        launch(g, c.h, Coll::Allgatherv { send, recv }, mode)
    })
}

#[allow(clippy::too_many_arguments)]
unsafe fn alltoallv_impl<C: AsI64, D: AsI64>(
    func: &str,
    sendbuf: *const c_void,
    sendcounts: *const C,
    sdispls: *const D,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const C,
    rdispls: *const D,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    mode: Mode,
) -> c_int {
    api(func, Some(comm as usize), |g| {
        let c = ctx(g, comm)?;
        no_in_place_on_inter(&c, &[sendbuf, recvbuf])?;
        let n = c.peers();
        let send = if in_place(sendbuf) { None } else { Some(vtyped(g, sendbuf, sendcounts, sdispls, sendtype, n, "sendbuf")?) };
        let recv = vtyped(g, recvbuf, recvcounts, rdispls, recvtype, n, "recvbuf")?;
        if let Some(s) = &send {
            no_alias(sendbuf, recvbuf, s.dtype.packed_size(s.counts.iter().sum()))?;
        }
        launch(g, c.h, Coll::Alltoallv { send, recv }, mode)
    })
}

#[allow(clippy::too_many_arguments)]
unsafe fn alltoallw_impl<C: AsI64, D: AsI64>(
    func: &str,
    sendbuf: *const c_void,
    sendcounts: *const C,
    sdispls: *const D,
    sendtypes: *const MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const C,
    rdispls: *const D,
    recvtypes: *const MPI_Datatype,
    comm: MPI_Comm,
    mode: Mode,
) -> c_int {
    api(func, Some(comm as usize), |g| {
        let c = ctx(g, comm)?;
        no_in_place_on_inter(&c, &[sendbuf, recvbuf])?;
        let n = c.peers();
        let send = if in_place(sendbuf) { None } else { Some(wtyped(g, sendbuf, sendcounts, sdispls, sendtypes, n, "sendbuf")?) };
        let recv = wtyped(g, recvbuf, recvcounts, rdispls, recvtypes, n, "recvbuf")?;
        if let Some(s) = &send {
            let bytes: usize = s.counts.iter().zip(&s.dtypes).map(|(c, t)| t.packed_size(*c)).sum();
            no_alias(sendbuf, recvbuf, bytes)?;
        }
        launch(g, c.h, Coll::Alltoallw { send, recv }, mode)
    })
}

/// Which reduction collective.
#[derive(Clone, Copy, PartialEq, Eq)]
enum RKind {
    Reduce(c_int),
    Allreduce,
    ReduceScatterBlock,
    Scan,
    Exscan,
}

#[allow(clippy::too_many_arguments)]
unsafe fn reduce_impl(
    func: &str,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: i64,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    kind: RKind,
    mode: Mode,
) -> c_int {
    api(func, Some(comm as usize), |g| {
        let c = ctx(g, comm)?;
        if matches!(kind, RKind::Scan | RKind::Exscan) {
            c.intra_only(func)?;
        }
        no_in_place_on_inter(&c, &[sendbuf, recvbuf])?;
        let r = match kind {
            RKind::Reduce(root) => role(&c, root)?,
            _ => Role::Root,
        };
        let count = count_of(count, "count")?;
        if r == Role::Idle {
            let buf = RBuf { send: None, recv: std::ptr::null_mut(), count: 0 };
            let RKind::Reduce(root) = kind else { return Err(err(ErrorClass::Intern, "idle rank outside reduce")) };
            return launch(g, c.h, Coll::Reduce { buf, red: idle_reduction(), root }, mode);
        }
        let red = reduction(g, op, datatype)?;
        let t = red.dtype.clone();
        let inter = c.remote.is_some();
        // Elements in the input vector and in the result on this rank.
        let (in_count, out_count) = match kind {
            // On an intercommunicator too the vector has count × (local group size) elements.
            RKind::ReduceScatterBlock => (count * c.size as usize, count),
            _ => (count, count),
        };
        let ip = in_place(sendbuf);
        if ip && matches!(kind, RKind::Reduce(_)) && r != Role::Root {
            return Err(err(ErrorClass::Buffer, "MPI_IN_PLACE is only allowed at the root"));
        }
        // Significant buffers: the send buffer unless in place (or the root of an
        // intercommunicator reduce, which only receives); the receive buffer except at
        // the leaves of a reduce.
        let send_used = !(ip || inter && r == Role::Root && matches!(kind, RKind::Reduce(_)));
        if send_used {
            check_buf(sendbuf, in_count, &t, "sendbuf")?;
        }
        let recv_used = !matches!(kind, RKind::Reduce(_)) || r == Role::Root;
        if recv_used {
            check_buf(recvbuf, if ip { in_count } else { out_count }, &t, "recvbuf")?;
            if send_used {
                no_alias(sendbuf, recvbuf, t.packed_size(out_count))?;
            }
        }
        let buf = RBuf { send: (!ip).then_some(sendbuf as *const u8), recv: recvbuf as *mut u8, count };
        let coll = match kind {
            RKind::Reduce(root) => Coll::Reduce { buf, red, root },
            RKind::Allreduce => Coll::Allreduce { buf, red },
            RKind::ReduceScatterBlock => Coll::ReduceScatterBlock { buf, red },
            RKind::Scan => Coll::Scan { buf, red },
            RKind::Exscan => Coll::Exscan { buf, red },
        };
        launch(g, c.h, coll, mode)
    })
}

#[allow(clippy::too_many_arguments)]
unsafe fn reduce_scatter_impl<C: AsI64>(
    func: &str,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcounts: *const C,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    mode: Mode,
) -> c_int {
    api(func, Some(comm as usize), |g| {
        let c = ctx(g, comm)?;
        no_in_place_on_inter(&c, &[sendbuf, recvbuf])?;
        let cs = counts(recvcounts, c.size as usize, "recvcounts")?;
        let red = reduction(g, op, datatype)?;
        let t = red.dtype.clone();
        let total: usize = cs.iter().sum();
        let mine = cs.get(c.rank as usize).copied().unwrap_or(0);
        let ip = in_place(sendbuf);
        if !ip {
            check_buf(sendbuf, total, &t, "sendbuf")?;
            no_alias(sendbuf, recvbuf, t.packed_size(mine))?;
        }
        check_buf(recvbuf, if ip { total } else { mine }, &t, "recvbuf")?;
        let buf = RBuf { send: (!ip).then_some(sendbuf as *const u8), recv: recvbuf as *mut u8, count: 0 };
        launch(g, c.h, Coll::ReduceScatter { buf, counts: cs, red }, mode)
    })
}

// ---- entry points ----------------------------------------------------------------------------

mpi_api! {
    fn Ibarrier(comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        barrier_impl("MPI_Ibarrier", comm, Mode::Start(request))
    }
    fn Barrier_init(comm: MPI_Comm, _info: MPI_Info, request: *mut MPI_Request) -> c_int {
        barrier_impl("MPI_Barrier_init", comm, Mode::Init(request))
    }

    fn Bcast(buffer: *mut c_void, count: c_int, datatype: MPI_Datatype, root: c_int, comm: MPI_Comm) -> c_int {
        bcast_impl("MPI_Bcast", buffer, count as i64, datatype, root, comm, Mode::Blocking)
    }
    fn Bcast_c(buffer: *mut c_void, count: MPI_Count, datatype: MPI_Datatype, root: c_int, comm: MPI_Comm) -> c_int {
        bcast_impl("MPI_Bcast_c", buffer, count, datatype, root, comm, Mode::Blocking)
    }
    fn Ibcast(buffer: *mut c_void, count: c_int, datatype: MPI_Datatype, root: c_int, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        bcast_impl("MPI_Ibcast", buffer, count as i64, datatype, root, comm, Mode::Start(request))
    }
    fn Ibcast_c(buffer: *mut c_void, count: MPI_Count, datatype: MPI_Datatype, root: c_int, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        bcast_impl("MPI_Ibcast_c", buffer, count, datatype, root, comm, Mode::Start(request))
    }
    fn Bcast_init(buffer: *mut c_void, count: c_int, datatype: MPI_Datatype, root: c_int, comm: MPI_Comm, _info: MPI_Info, request: *mut MPI_Request) -> c_int {
        bcast_impl("MPI_Bcast_init", buffer, count as i64, datatype, root, comm, Mode::Init(request))
    }
    fn Bcast_init_c(buffer: *mut c_void, count: MPI_Count, datatype: MPI_Datatype, root: c_int, comm: MPI_Comm, _info: MPI_Info, request: *mut MPI_Request) -> c_int {
        bcast_impl("MPI_Bcast_init_c", buffer, count, datatype, root, comm, Mode::Init(request))
    }

    fn Gather(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: MPI_Datatype, root: c_int, comm: MPI_Comm) -> c_int {
        gather_impl("MPI_Gather", sendbuf, sendcount as i64, sendtype, recvbuf, recvcount as i64, recvtype, root, comm, Mode::Blocking)
    }
    fn Gather_c(sendbuf: *const c_void, sendcount: MPI_Count, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: MPI_Count, recvtype: MPI_Datatype, root: c_int, comm: MPI_Comm) -> c_int {
        gather_impl("MPI_Gather_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, Mode::Blocking)
    }
    fn Igather(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: MPI_Datatype, root: c_int, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        gather_impl("MPI_Igather", sendbuf, sendcount as i64, sendtype, recvbuf, recvcount as i64, recvtype, root, comm, Mode::Start(request))
    }
    fn Igather_c(sendbuf: *const c_void, sendcount: MPI_Count, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: MPI_Count, recvtype: MPI_Datatype, root: c_int, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        gather_impl("MPI_Igather_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, Mode::Start(request))
    }
    fn Gather_init(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: MPI_Datatype, root: c_int, comm: MPI_Comm, _info: MPI_Info, request: *mut MPI_Request) -> c_int {
        gather_impl("MPI_Gather_init", sendbuf, sendcount as i64, sendtype, recvbuf, recvcount as i64, recvtype, root, comm, Mode::Init(request))
    }
    fn Gather_init_c(sendbuf: *const c_void, sendcount: MPI_Count, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: MPI_Count, recvtype: MPI_Datatype, root: c_int, comm: MPI_Comm, _info: MPI_Info, request: *mut MPI_Request) -> c_int {
        gather_impl("MPI_Gather_init_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, Mode::Init(request))
    }

    fn Gatherv(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: MPI_Datatype, root: c_int, comm: MPI_Comm) -> c_int {
        gatherv_impl("MPI_Gatherv", sendbuf, sendcount as i64, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm, Mode::Blocking)
    }
    fn Gatherv_c(sendbuf: *const c_void, sendcount: MPI_Count, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const MPI_Count, displs: *const MPI_Aint, recvtype: MPI_Datatype, root: c_int, comm: MPI_Comm) -> c_int {
        gatherv_impl("MPI_Gatherv_c", sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm, Mode::Blocking)
    }
    fn Igatherv(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: MPI_Datatype, root: c_int, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        gatherv_impl("MPI_Igatherv", sendbuf, sendcount as i64, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm, Mode::Start(request))
    }
    fn Igatherv_c(sendbuf: *const c_void, sendcount: MPI_Count, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const MPI_Count, displs: *const MPI_Aint, recvtype: MPI_Datatype, root: c_int, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        gatherv_impl("MPI_Igatherv_c", sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm, Mode::Start(request))
    }
    fn Gatherv_init(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: MPI_Datatype, root: c_int, comm: MPI_Comm, _info: MPI_Info, request: *mut MPI_Request) -> c_int {
        gatherv_impl("MPI_Gatherv_init", sendbuf, sendcount as i64, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm, Mode::Init(request))
    }
    fn Gatherv_init_c(sendbuf: *const c_void, sendcount: MPI_Count, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const MPI_Count, displs: *const MPI_Aint, recvtype: MPI_Datatype, root: c_int, comm: MPI_Comm, _info: MPI_Info, request: *mut MPI_Request) -> c_int {
        gatherv_impl("MPI_Gatherv_init_c", sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm, Mode::Init(request))
    }

    fn Scatter(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: MPI_Datatype, root: c_int, comm: MPI_Comm) -> c_int {
        scatter_impl("MPI_Scatter", sendbuf, sendcount as i64, sendtype, recvbuf, recvcount as i64, recvtype, root, comm, Mode::Blocking)
    }
    fn Scatter_c(sendbuf: *const c_void, sendcount: MPI_Count, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: MPI_Count, recvtype: MPI_Datatype, root: c_int, comm: MPI_Comm) -> c_int {
        scatter_impl("MPI_Scatter_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, Mode::Blocking)
    }
    fn Iscatter(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: MPI_Datatype, root: c_int, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        scatter_impl("MPI_Iscatter", sendbuf, sendcount as i64, sendtype, recvbuf, recvcount as i64, recvtype, root, comm, Mode::Start(request))
    }
    fn Iscatter_c(sendbuf: *const c_void, sendcount: MPI_Count, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: MPI_Count, recvtype: MPI_Datatype, root: c_int, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        scatter_impl("MPI_Iscatter_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, Mode::Start(request))
    }
    fn Scatter_init(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: MPI_Datatype, root: c_int, comm: MPI_Comm, _info: MPI_Info, request: *mut MPI_Request) -> c_int {
        scatter_impl("MPI_Scatter_init", sendbuf, sendcount as i64, sendtype, recvbuf, recvcount as i64, recvtype, root, comm, Mode::Init(request))
    }
    fn Scatter_init_c(sendbuf: *const c_void, sendcount: MPI_Count, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: MPI_Count, recvtype: MPI_Datatype, root: c_int, comm: MPI_Comm, _info: MPI_Info, request: *mut MPI_Request) -> c_int {
        scatter_impl("MPI_Scatter_init_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, Mode::Init(request))
    }

    fn Scatterv(sendbuf: *const c_void, sendcounts: *const c_int, displs: *const c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: MPI_Datatype, root: c_int, comm: MPI_Comm) -> c_int {
        scatterv_impl("MPI_Scatterv", sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount as i64, recvtype, root, comm, Mode::Blocking)
    }
    fn Scatterv_c(sendbuf: *const c_void, sendcounts: *const MPI_Count, displs: *const MPI_Aint, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: MPI_Count, recvtype: MPI_Datatype, root: c_int, comm: MPI_Comm) -> c_int {
        scatterv_impl("MPI_Scatterv_c", sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm, Mode::Blocking)
    }
    fn Iscatterv(sendbuf: *const c_void, sendcounts: *const c_int, displs: *const c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: MPI_Datatype, root: c_int, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        scatterv_impl("MPI_Iscatterv", sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount as i64, recvtype, root, comm, Mode::Start(request))
    }
    fn Iscatterv_c(sendbuf: *const c_void, sendcounts: *const MPI_Count, displs: *const MPI_Aint, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: MPI_Count, recvtype: MPI_Datatype, root: c_int, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        scatterv_impl("MPI_Iscatterv_c", sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm, Mode::Start(request))
    }
    fn Scatterv_init(sendbuf: *const c_void, sendcounts: *const c_int, displs: *const c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: MPI_Datatype, root: c_int, comm: MPI_Comm, _info: MPI_Info, request: *mut MPI_Request) -> c_int {
        scatterv_impl("MPI_Scatterv_init", sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount as i64, recvtype, root, comm, Mode::Init(request))
    }
    fn Scatterv_init_c(sendbuf: *const c_void, sendcounts: *const MPI_Count, displs: *const MPI_Aint, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: MPI_Count, recvtype: MPI_Datatype, root: c_int, comm: MPI_Comm, _info: MPI_Info, request: *mut MPI_Request) -> c_int {
        scatterv_impl("MPI_Scatterv_init_c", sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm, Mode::Init(request))
    }

    fn Allgather(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: MPI_Datatype, comm: MPI_Comm) -> c_int {
        allgather_impl("MPI_Allgather", sendbuf, sendcount as i64, sendtype, recvbuf, recvcount as i64, recvtype, comm, Mode::Blocking, false)
    }
    fn Allgather_c(sendbuf: *const c_void, sendcount: MPI_Count, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: MPI_Count, recvtype: MPI_Datatype, comm: MPI_Comm) -> c_int {
        allgather_impl("MPI_Allgather_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, Mode::Blocking, false)
    }
    fn Iallgather(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: MPI_Datatype, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        allgather_impl("MPI_Iallgather", sendbuf, sendcount as i64, sendtype, recvbuf, recvcount as i64, recvtype, comm, Mode::Start(request), false)
    }
    fn Iallgather_c(sendbuf: *const c_void, sendcount: MPI_Count, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: MPI_Count, recvtype: MPI_Datatype, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        allgather_impl("MPI_Iallgather_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, Mode::Start(request), false)
    }
    fn Allgather_init(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: MPI_Datatype, comm: MPI_Comm, _info: MPI_Info, request: *mut MPI_Request) -> c_int {
        allgather_impl("MPI_Allgather_init", sendbuf, sendcount as i64, sendtype, recvbuf, recvcount as i64, recvtype, comm, Mode::Init(request), false)
    }
    fn Allgather_init_c(sendbuf: *const c_void, sendcount: MPI_Count, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: MPI_Count, recvtype: MPI_Datatype, comm: MPI_Comm, _info: MPI_Info, request: *mut MPI_Request) -> c_int {
        allgather_impl("MPI_Allgather_init_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, Mode::Init(request), false)
    }

    fn Allgatherv(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: MPI_Datatype, comm: MPI_Comm) -> c_int {
        allgatherv_impl("MPI_Allgatherv", sendbuf, sendcount as i64, sendtype, recvbuf, recvcounts, displs, recvtype, comm, Mode::Blocking)
    }
    fn Allgatherv_c(sendbuf: *const c_void, sendcount: MPI_Count, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const MPI_Count, displs: *const MPI_Aint, recvtype: MPI_Datatype, comm: MPI_Comm) -> c_int {
        allgatherv_impl("MPI_Allgatherv_c", sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, Mode::Blocking)
    }
    fn Iallgatherv(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: MPI_Datatype, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        allgatherv_impl("MPI_Iallgatherv", sendbuf, sendcount as i64, sendtype, recvbuf, recvcounts, displs, recvtype, comm, Mode::Start(request))
    }
    fn Iallgatherv_c(sendbuf: *const c_void, sendcount: MPI_Count, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const MPI_Count, displs: *const MPI_Aint, recvtype: MPI_Datatype, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        allgatherv_impl("MPI_Iallgatherv_c", sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, Mode::Start(request))
    }
    fn Allgatherv_init(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: MPI_Datatype, comm: MPI_Comm, _info: MPI_Info, request: *mut MPI_Request) -> c_int {
        allgatherv_impl("MPI_Allgatherv_init", sendbuf, sendcount as i64, sendtype, recvbuf, recvcounts, displs, recvtype, comm, Mode::Init(request))
    }
    fn Allgatherv_init_c(sendbuf: *const c_void, sendcount: MPI_Count, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const MPI_Count, displs: *const MPI_Aint, recvtype: MPI_Datatype, comm: MPI_Comm, _info: MPI_Info, request: *mut MPI_Request) -> c_int {
        allgatherv_impl("MPI_Allgatherv_init_c", sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, Mode::Init(request))
    }

    fn Alltoall(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: MPI_Datatype, comm: MPI_Comm) -> c_int {
        allgather_impl("MPI_Alltoall", sendbuf, sendcount as i64, sendtype, recvbuf, recvcount as i64, recvtype, comm, Mode::Blocking, true)
    }
    fn Alltoall_c(sendbuf: *const c_void, sendcount: MPI_Count, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: MPI_Count, recvtype: MPI_Datatype, comm: MPI_Comm) -> c_int {
        allgather_impl("MPI_Alltoall_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, Mode::Blocking, true)
    }
    fn Ialltoall(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: MPI_Datatype, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        allgather_impl("MPI_Ialltoall", sendbuf, sendcount as i64, sendtype, recvbuf, recvcount as i64, recvtype, comm, Mode::Start(request), true)
    }
    fn Ialltoall_c(sendbuf: *const c_void, sendcount: MPI_Count, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: MPI_Count, recvtype: MPI_Datatype, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        allgather_impl("MPI_Ialltoall_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, Mode::Start(request), true)
    }
    fn Alltoall_init(sendbuf: *const c_void, sendcount: c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: c_int, recvtype: MPI_Datatype, comm: MPI_Comm, _info: MPI_Info, request: *mut MPI_Request) -> c_int {
        allgather_impl("MPI_Alltoall_init", sendbuf, sendcount as i64, sendtype, recvbuf, recvcount as i64, recvtype, comm, Mode::Init(request), true)
    }
    fn Alltoall_init_c(sendbuf: *const c_void, sendcount: MPI_Count, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcount: MPI_Count, recvtype: MPI_Datatype, comm: MPI_Comm, _info: MPI_Info, request: *mut MPI_Request) -> c_int {
        allgather_impl("MPI_Alltoall_init_c", sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, Mode::Init(request), true)
    }

    fn Alltoallv(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: MPI_Datatype, comm: MPI_Comm) -> c_int {
        alltoallv_impl("MPI_Alltoallv", sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm, Mode::Blocking)
    }
    fn Alltoallv_c(sendbuf: *const c_void, sendcounts: *const MPI_Count, sdispls: *const MPI_Aint, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const MPI_Count, rdispls: *const MPI_Aint, recvtype: MPI_Datatype, comm: MPI_Comm) -> c_int {
        alltoallv_impl("MPI_Alltoallv_c", sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm, Mode::Blocking)
    }
    fn Ialltoallv(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: MPI_Datatype, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        alltoallv_impl("MPI_Ialltoallv", sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm, Mode::Start(request))
    }
    fn Ialltoallv_c(sendbuf: *const c_void, sendcounts: *const MPI_Count, sdispls: *const MPI_Aint, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const MPI_Count, rdispls: *const MPI_Aint, recvtype: MPI_Datatype, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        alltoallv_impl("MPI_Ialltoallv_c", sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm, Mode::Start(request))
    }
    fn Alltoallv_init(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: MPI_Datatype, comm: MPI_Comm, _info: MPI_Info, request: *mut MPI_Request) -> c_int {
        alltoallv_impl("MPI_Alltoallv_init", sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm, Mode::Init(request))
    }
    fn Alltoallv_init_c(sendbuf: *const c_void, sendcounts: *const MPI_Count, sdispls: *const MPI_Aint, sendtype: MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const MPI_Count, rdispls: *const MPI_Aint, recvtype: MPI_Datatype, comm: MPI_Comm, _info: MPI_Info, request: *mut MPI_Request) -> c_int {
        alltoallv_impl("MPI_Alltoallv_init_c", sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm, Mode::Init(request))
    }

    fn Alltoallw(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtypes: *const MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtypes: *const MPI_Datatype, comm: MPI_Comm) -> c_int {
        alltoallw_impl("MPI_Alltoallw", sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm, Mode::Blocking)
    }
    fn Alltoallw_c(sendbuf: *const c_void, sendcounts: *const MPI_Count, sdispls: *const MPI_Aint, sendtypes: *const MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const MPI_Count, rdispls: *const MPI_Aint, recvtypes: *const MPI_Datatype, comm: MPI_Comm) -> c_int {
        alltoallw_impl("MPI_Alltoallw_c", sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm, Mode::Blocking)
    }
    fn Ialltoallw(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtypes: *const MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtypes: *const MPI_Datatype, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        alltoallw_impl("MPI_Ialltoallw", sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm, Mode::Start(request))
    }
    fn Ialltoallw_c(sendbuf: *const c_void, sendcounts: *const MPI_Count, sdispls: *const MPI_Aint, sendtypes: *const MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const MPI_Count, rdispls: *const MPI_Aint, recvtypes: *const MPI_Datatype, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        alltoallw_impl("MPI_Ialltoallw_c", sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm, Mode::Start(request))
    }
    fn Alltoallw_init(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtypes: *const MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtypes: *const MPI_Datatype, comm: MPI_Comm, _info: MPI_Info, request: *mut MPI_Request) -> c_int {
        alltoallw_impl("MPI_Alltoallw_init", sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm, Mode::Init(request))
    }
    fn Alltoallw_init_c(sendbuf: *const c_void, sendcounts: *const MPI_Count, sdispls: *const MPI_Aint, sendtypes: *const MPI_Datatype, recvbuf: *mut c_void, recvcounts: *const MPI_Count, rdispls: *const MPI_Aint, recvtypes: *const MPI_Datatype, comm: MPI_Comm, _info: MPI_Info, request: *mut MPI_Request) -> c_int {
        alltoallw_impl("MPI_Alltoallw_init_c", sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm, Mode::Init(request))
    }

    fn Reduce(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: MPI_Datatype, op: MPI_Op, root: c_int, comm: MPI_Comm) -> c_int {
        reduce_impl("MPI_Reduce", sendbuf, recvbuf, count as i64, datatype, op, comm, RKind::Reduce(root), Mode::Blocking)
    }
    fn Reduce_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: MPI_Count, datatype: MPI_Datatype, op: MPI_Op, root: c_int, comm: MPI_Comm) -> c_int {
        reduce_impl("MPI_Reduce_c", sendbuf, recvbuf, count, datatype, op, comm, RKind::Reduce(root), Mode::Blocking)
    }
    fn Ireduce(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: MPI_Datatype, op: MPI_Op, root: c_int, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        reduce_impl("MPI_Ireduce", sendbuf, recvbuf, count as i64, datatype, op, comm, RKind::Reduce(root), Mode::Start(request))
    }
    fn Ireduce_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: MPI_Count, datatype: MPI_Datatype, op: MPI_Op, root: c_int, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        reduce_impl("MPI_Ireduce_c", sendbuf, recvbuf, count, datatype, op, comm, RKind::Reduce(root), Mode::Start(request))
    }
    fn Reduce_init(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: MPI_Datatype, op: MPI_Op, root: c_int, comm: MPI_Comm, _info: MPI_Info, request: *mut MPI_Request) -> c_int {
        reduce_impl("MPI_Reduce_init", sendbuf, recvbuf, count as i64, datatype, op, comm, RKind::Reduce(root), Mode::Init(request))
    }
    fn Reduce_init_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: MPI_Count, datatype: MPI_Datatype, op: MPI_Op, root: c_int, comm: MPI_Comm, _info: MPI_Info, request: *mut MPI_Request) -> c_int {
        reduce_impl("MPI_Reduce_init_c", sendbuf, recvbuf, count, datatype, op, comm, RKind::Reduce(root), Mode::Init(request))
    }

    fn Allreduce(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: MPI_Datatype, op: MPI_Op, comm: MPI_Comm) -> c_int {
        reduce_impl("MPI_Allreduce", sendbuf, recvbuf, count as i64, datatype, op, comm, RKind::Allreduce, Mode::Blocking)
    }
    fn Allreduce_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: MPI_Count, datatype: MPI_Datatype, op: MPI_Op, comm: MPI_Comm) -> c_int {
        reduce_impl("MPI_Allreduce_c", sendbuf, recvbuf, count, datatype, op, comm, RKind::Allreduce, Mode::Blocking)
    }
    fn Iallreduce(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: MPI_Datatype, op: MPI_Op, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        reduce_impl("MPI_Iallreduce", sendbuf, recvbuf, count as i64, datatype, op, comm, RKind::Allreduce, Mode::Start(request))
    }
    fn Iallreduce_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: MPI_Count, datatype: MPI_Datatype, op: MPI_Op, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        reduce_impl("MPI_Iallreduce_c", sendbuf, recvbuf, count, datatype, op, comm, RKind::Allreduce, Mode::Start(request))
    }
    fn Allreduce_init(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: MPI_Datatype, op: MPI_Op, comm: MPI_Comm, _info: MPI_Info, request: *mut MPI_Request) -> c_int {
        reduce_impl("MPI_Allreduce_init", sendbuf, recvbuf, count as i64, datatype, op, comm, RKind::Allreduce, Mode::Init(request))
    }
    fn Allreduce_init_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: MPI_Count, datatype: MPI_Datatype, op: MPI_Op, comm: MPI_Comm, _info: MPI_Info, request: *mut MPI_Request) -> c_int {
        reduce_impl("MPI_Allreduce_init_c", sendbuf, recvbuf, count, datatype, op, comm, RKind::Allreduce, Mode::Init(request))
    }

    fn Reduce_scatter_block(sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: c_int, datatype: MPI_Datatype, op: MPI_Op, comm: MPI_Comm) -> c_int {
        reduce_impl("MPI_Reduce_scatter_block", sendbuf, recvbuf, recvcount as i64, datatype, op, comm, RKind::ReduceScatterBlock, Mode::Blocking)
    }
    fn Reduce_scatter_block_c(sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: MPI_Count, datatype: MPI_Datatype, op: MPI_Op, comm: MPI_Comm) -> c_int {
        reduce_impl("MPI_Reduce_scatter_block_c", sendbuf, recvbuf, recvcount, datatype, op, comm, RKind::ReduceScatterBlock, Mode::Blocking)
    }
    fn Ireduce_scatter_block(sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: c_int, datatype: MPI_Datatype, op: MPI_Op, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        reduce_impl("MPI_Ireduce_scatter_block", sendbuf, recvbuf, recvcount as i64, datatype, op, comm, RKind::ReduceScatterBlock, Mode::Start(request))
    }
    fn Ireduce_scatter_block_c(sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: MPI_Count, datatype: MPI_Datatype, op: MPI_Op, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        reduce_impl("MPI_Ireduce_scatter_block_c", sendbuf, recvbuf, recvcount, datatype, op, comm, RKind::ReduceScatterBlock, Mode::Start(request))
    }
    fn Reduce_scatter_block_init(sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: c_int, datatype: MPI_Datatype, op: MPI_Op, comm: MPI_Comm, _info: MPI_Info, request: *mut MPI_Request) -> c_int {
        reduce_impl("MPI_Reduce_scatter_block_init", sendbuf, recvbuf, recvcount as i64, datatype, op, comm, RKind::ReduceScatterBlock, Mode::Init(request))
    }
    fn Reduce_scatter_block_init_c(sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: MPI_Count, datatype: MPI_Datatype, op: MPI_Op, comm: MPI_Comm, _info: MPI_Info, request: *mut MPI_Request) -> c_int {
        reduce_impl("MPI_Reduce_scatter_block_init_c", sendbuf, recvbuf, recvcount, datatype, op, comm, RKind::ReduceScatterBlock, Mode::Init(request))
    }

    fn Reduce_scatter(sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const c_int, datatype: MPI_Datatype, op: MPI_Op, comm: MPI_Comm) -> c_int {
        reduce_scatter_impl("MPI_Reduce_scatter", sendbuf, recvbuf, recvcounts, datatype, op, comm, Mode::Blocking)
    }
    fn Reduce_scatter_c(sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const MPI_Count, datatype: MPI_Datatype, op: MPI_Op, comm: MPI_Comm) -> c_int {
        reduce_scatter_impl("MPI_Reduce_scatter_c", sendbuf, recvbuf, recvcounts, datatype, op, comm, Mode::Blocking)
    }
    fn Ireduce_scatter(sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const c_int, datatype: MPI_Datatype, op: MPI_Op, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        reduce_scatter_impl("MPI_Ireduce_scatter", sendbuf, recvbuf, recvcounts, datatype, op, comm, Mode::Start(request))
    }
    fn Ireduce_scatter_c(sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const MPI_Count, datatype: MPI_Datatype, op: MPI_Op, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        reduce_scatter_impl("MPI_Ireduce_scatter_c", sendbuf, recvbuf, recvcounts, datatype, op, comm, Mode::Start(request))
    }
    fn Reduce_scatter_init(sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const c_int, datatype: MPI_Datatype, op: MPI_Op, comm: MPI_Comm, _info: MPI_Info, request: *mut MPI_Request) -> c_int {
        reduce_scatter_impl("MPI_Reduce_scatter_init", sendbuf, recvbuf, recvcounts, datatype, op, comm, Mode::Init(request))
    }
    fn Reduce_scatter_init_c(sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const MPI_Count, datatype: MPI_Datatype, op: MPI_Op, comm: MPI_Comm, _info: MPI_Info, request: *mut MPI_Request) -> c_int {
        reduce_scatter_impl("MPI_Reduce_scatter_init_c", sendbuf, recvbuf, recvcounts, datatype, op, comm, Mode::Init(request))
    }

    fn Scan(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: MPI_Datatype, op: MPI_Op, comm: MPI_Comm) -> c_int {
        reduce_impl("MPI_Scan", sendbuf, recvbuf, count as i64, datatype, op, comm, RKind::Scan, Mode::Blocking)
    }
    fn Scan_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: MPI_Count, datatype: MPI_Datatype, op: MPI_Op, comm: MPI_Comm) -> c_int {
        reduce_impl("MPI_Scan_c", sendbuf, recvbuf, count, datatype, op, comm, RKind::Scan, Mode::Blocking)
    }
    fn Iscan(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: MPI_Datatype, op: MPI_Op, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        reduce_impl("MPI_Iscan", sendbuf, recvbuf, count as i64, datatype, op, comm, RKind::Scan, Mode::Start(request))
    }
    fn Iscan_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: MPI_Count, datatype: MPI_Datatype, op: MPI_Op, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        reduce_impl("MPI_Iscan_c", sendbuf, recvbuf, count, datatype, op, comm, RKind::Scan, Mode::Start(request))
    }
    fn Scan_init(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: MPI_Datatype, op: MPI_Op, comm: MPI_Comm, _info: MPI_Info, request: *mut MPI_Request) -> c_int {
        reduce_impl("MPI_Scan_init", sendbuf, recvbuf, count as i64, datatype, op, comm, RKind::Scan, Mode::Init(request))
    }
    fn Scan_init_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: MPI_Count, datatype: MPI_Datatype, op: MPI_Op, comm: MPI_Comm, _info: MPI_Info, request: *mut MPI_Request) -> c_int {
        reduce_impl("MPI_Scan_init_c", sendbuf, recvbuf, count, datatype, op, comm, RKind::Scan, Mode::Init(request))
    }

    fn Exscan(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: MPI_Datatype, op: MPI_Op, comm: MPI_Comm) -> c_int {
        reduce_impl("MPI_Exscan", sendbuf, recvbuf, count as i64, datatype, op, comm, RKind::Exscan, Mode::Blocking)
    }
    fn Exscan_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: MPI_Count, datatype: MPI_Datatype, op: MPI_Op, comm: MPI_Comm) -> c_int {
        reduce_impl("MPI_Exscan_c", sendbuf, recvbuf, count, datatype, op, comm, RKind::Exscan, Mode::Blocking)
    }
    fn Iexscan(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: MPI_Datatype, op: MPI_Op, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        reduce_impl("MPI_Iexscan", sendbuf, recvbuf, count as i64, datatype, op, comm, RKind::Exscan, Mode::Start(request))
    }
    fn Iexscan_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: MPI_Count, datatype: MPI_Datatype, op: MPI_Op, comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
        reduce_impl("MPI_Iexscan_c", sendbuf, recvbuf, count, datatype, op, comm, RKind::Exscan, Mode::Start(request))
    }
    fn Exscan_init(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: MPI_Datatype, op: MPI_Op, comm: MPI_Comm, _info: MPI_Info, request: *mut MPI_Request) -> c_int {
        reduce_impl("MPI_Exscan_init", sendbuf, recvbuf, count as i64, datatype, op, comm, RKind::Exscan, Mode::Init(request))
    }
    fn Exscan_init_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: MPI_Count, datatype: MPI_Datatype, op: MPI_Op, comm: MPI_Comm, _info: MPI_Info, request: *mut MPI_Request) -> c_int {
        reduce_impl("MPI_Exscan_init_c", sendbuf, recvbuf, count, datatype, op, comm, RKind::Exscan, Mode::Init(request))
    }
}
