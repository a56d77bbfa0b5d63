//! Blocking MPI_Send / MPI_Recv without a request object.
//!
//! Small-message latency is mostly instructions, not wire time: a request costs a slab slot,
//! a copy of the spec, a completion record and a release. The common blocking cases skip it:
//!
//! - **send**: a standard or ready mode, contiguous message up to the eager limit to a peer
//!   whose output queue is empty goes straight to the path. If the path is full (or anything
//!   else is unusual) the general request path runs instead, so nothing changes for it.
//! - **receive**: a contiguous receive on a context with no other receive posted waits in a
//!   single slot ([`Waiting`]) that packet handling checks before the matcher. The slot is
//!   logically the *earliest* posted receive of its context (nothing was posted when it was
//!   filled), so an eager message it accepts is copied straight into the application's buffer.
//!   A rendezvous announcement it accepts turns it into an ordinary posted request at the
//!   front of the context's queue ([`State::promote_waiting`]), and the general code takes
//!   over; ordering is the same as if the request had existed from the start.
//!
//! Both are off in run-through mode, where failure handling needs the request bookkeeping.

use super::*;
use crate::matching::accepts;

/// A blocking receive waiting without a request.
pub(super) struct Waiting {
    spec: RecvSpec,
    ctx: u32,
    /// Set when an eager message was copied in.
    status: Option<Status>,
    /// Set when the slot became a posted request (a rendezvous message matched it).
    promoted: Option<Handle>,
}

// SAFETY: the buffer pointer belongs to the application, which keeps it valid for the
// blocking call; the engine is only used under one lock.
unsafe impl Send for Waiting {}

impl Waiting {
    pub(super) fn open(&self) -> bool {
        self.status.is_none() && self.promoted.is_none()
    }
}

impl State {
    /// An eager message arrived: if the waiting slot accepts it, copy it in and return true.
    pub(super) fn eager_to_waiting(&mut self, h: &Header, payload: &[u8]) -> bool {
        let Some(w) = self.waiting.as_mut() else { return false };
        if !(w.open() && w.ctx == h.ctx && accepts(w.spec.src, w.spec.tag, h.src, h.tag)) {
            return false;
        }
        let cap = w.spec.dtype.packed_size(w.spec.count);
        let n = payload.len().min(cap);
        // SAFETY: the slot's buffer holds `count` contiguous elements (checked when filled).
        unsafe { std::ptr::copy_nonoverlapping(payload.as_ptr(), w.spec.buf, n) };
        let error = (payload.len() > cap).then_some(ErrorClass::Truncate);
        w.status = Some(Status { source: h.src, tag: h.tag, error, bytes: n as u64, cancelled: false });
        true
    }

    /// A message the general code must handle (rendezvous) is about to be matched: if the
    /// waiting slot would accept it, make the slot a posted request first, ahead of any
    /// receive posted after it.
    pub(super) fn promote_waiting(&mut self, ctx: u32, src: i32, tag: i32) {
        let Some(w) = self.waiting.as_mut() else { return };
        if !(w.open() && w.ctx == ctx && accepts(w.spec.src, w.spec.tag, src, tag)) {
            return;
        }
        let mut r = Request::new(Op::Recv(w.spec.clone()), false);
        r.active = true;
        r.recv.ctx = ctx;
        r.recv.posted = true;
        let h = self.reqs.insert(r);
        self.matcher.post_first(ctx, w.spec.src, w.spec.tag, h);
        w.promoted = Some(h);
    }
}

impl Engine {
    /// MPI_Send in every mode but buffered (which the caller handles): returns once the
    /// send buffer may be reused.
    pub fn send(&mut self, spec: SendSpec) -> MpiResult<()> {
        if self.send_now(&spec)? {
            return Ok(());
        }
        let h = self.isend(spec)?;
        let r = self.wait(h);
        self.release(h);
        r.map(|_| ())
    }

    /// Hand a small contiguous message straight to the path; false if the general path must
    /// run (nothing was sent then).
    fn send_now(&mut self, s: &SendSpec) -> MpiResult<bool> {
        if !matches!(s.mode, Mode::Standard | Mode::Ready) || s.dest == PROC_NULL || self.st.ft.run_through {
            return Ok(false);
        }
        let len = s.dtype.packed_size(s.count);
        if len > self.eager_limit || !s.dtype.is_contiguous() {
            return Ok(false);
        }
        let Ok(comm) = self.comm(s.comm) else { return Ok(false) };
        let Some(peer) = comm.peer_world(s.dest) else { return Ok(false) };
        let (ctx, src) = (comm.ctx, comm.rank);
        if peer == self.rank || !self.st.outq[peer as usize].is_empty() {
            return Ok(false);
        }
        let Some(net) = self.net.as_mut() else { return Ok(false) };
        let id = self.st.msg_ids + 1;
        let hdr = Header { kind: Kind::Eager, flags: 0, ctx, src, tag: s.tag, len: len as u64, a: 0, b: id }.encode();
        // SAFETY: the application's buffer holds `count` contiguous elements (len bytes).
        let payload = unsafe { std::slice::from_raw_parts(if len == 0 { [].as_ptr() } else { s.buf }, len) };
        match net.send(peer, &hdr, payload) {
            Ok(SendStatus::Done) => {
                self.st.msg_ids = id;
                Ok(true)
            }
            // Full, or an error the general path reports the usual way.
            _ => Ok(false),
        }
    }

    /// MPI_Recv: the status of the received message. In run-through mode an `ANY_SOURCE`
    /// receive that cannot complete because of an unacknowledged failure fails with
    /// `ProcFailed` (a blocking receive cannot stay pending).
    pub fn recv(&mut self, spec: RecvSpec) -> MpiResult<Status> {
        let spec = match self.recv_now(spec)? {
            Ok(status) => return Ok(status),
            Err(spec) => spec,
        };
        let h = self.irecv(spec)?;
        match self.wait(h) {
            Err(e) if e.class == ErrorClass::ProcFailedPending => {
                self.cancel(h)?;
                self.release(h);
                mpi_err!(ProcFailed, "a process failed while receiving from MPI_ANY_SOURCE")
            }
            other => {
                self.release(h);
                other
            }
        }
    }

    /// Receive through the waiting slot; gives the spec back if the general path must run.
    fn recv_now(&mut self, spec: RecvSpec) -> MpiResult<Result<Status, RecvSpec>> {
        let Ok(comm) = self.comm(spec.comm) else { return Ok(Err(spec)) };
        let ctx = comm.ctx;
        if spec.src != ANY_SOURCE && comm.peer_world(spec.src).is_none() {
            return Ok(Err(spec));
        }
        self.recv_slot(ctx, spec)
    }

    /// Wait in the waiting slot for one message on context `ctx` that `spec` accepts (the
    /// caller checked `spec.src` names a member). Gives the spec back, having done nothing,
    /// when the slot cannot be used: run-through mode, a non-contiguous type, a receive
    /// already posted on `ctx`, or a matching rendezvous message already waiting.
    pub(crate) fn recv_slot(&mut self, ctx: u32, spec: RecvSpec) -> MpiResult<Result<Status, RecvSpec>> {
        if self.st.ft.run_through
            || spec.src == PROC_NULL
            || !spec.dtype.is_contiguous()
            || self.st.waiting.is_some()
            || self.st.matcher.has_posted(ctx)
        {
            return Ok(Err(spec));
        }
        match self.st.matcher.peek(ctx, spec.src, spec.tag) {
            Some(u) if matches!(u.msg, Body::Eager { .. }) => {
                let Some(u) = self.st.matcher.take(ctx, spec.src, spec.tag) else { return Ok(Err(spec)) };
                let Body::Eager { data, .. } = u.msg else { return Ok(Err(spec)) };
                // SAFETY: the buffer holds `count` elements of the contiguous type.
                let (n, longer) = unsafe { copy_into(&data, spec.buf, spec.count, &spec.dtype) };
                let error = longer.then_some(ErrorClass::Truncate);
                self.st.events += 1;
                return Ok(Ok(Status { source: u.src, tag: u.tag, error, bytes: n as u64, cancelled: false }));
            }
            Some(_) => return Ok(Err(spec)),
            None => {}
        }
        self.st.waiting = Some(Waiting { spec, ctx, status: None, promoted: None });
        let r = self.block_until(|e| e.st.waiting.as_ref().is_none_or(|w| !w.open()));
        let w = self.st.waiting.take();
        let promoted = w.as_ref().and_then(|w| w.promoted);
        if let Err(e) = r {
            if let Some(h) = promoted {
                let _ = self.cancel(h);
                self.release(h);
            }
            return Err(e);
        }
        match (w.and_then(|w| w.status), promoted) {
            (Some(s), _) => Ok(Ok(s)),
            (None, Some(h)) => {
                let s = self.wait(h);
                self.release(h);
                s.map(Ok)
            }
            (None, None) => mpi_err!(Intern, "blocking receive ended without a message"),
        }
    }
}
