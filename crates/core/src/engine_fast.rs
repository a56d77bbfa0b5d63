//! Blocking MPI_Send / MPI_Recv without a request object.
//!
//! Small-message latency is mostly instructions, not wire time: a request costs a slab slot,
//! a copy of the spec, a completion record and a release. The common blocking cases skip it:
//!
//! - **send**: a standard or ready mode, contiguous message up to the eager limit to a peer
//!   whose output queue is empty goes straight to the path. If the path is full (or anything
//!   else is unusual) the general request path runs instead, so nothing changes for it.
//!   `MPI_Isend` of such a message does the same and returns a request that is already
//!   complete (an eager send's request completes at once on the general path too).
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

/// Shortest eager payload copied into a posted receive while being checked (below it, the
/// separate check costs less than looking the receive up twice).
const FUSED_POSTED_MIN: usize = 1024;

/// A blocking receive waiting without a request: `cap` bytes at `buf` (a contiguous buffer).
pub(super) struct Waiting {
    buf: *mut u8,
    cap: usize,
    comm: Handle,
    src: i32,
    tag: i32,
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
        if !(w.open() && w.ctx == h.ctx && accepts(w.src, w.tag, h.src, h.tag)) {
            return false;
        }
        let n = payload.len().min(w.cap);
        // SAFETY: the slot's buffer holds `cap` bytes (checked when it was filled).
        unsafe { steadfast_paths::copy::copy(payload.as_ptr(), w.buf, n) };
        let error = (payload.len() > w.cap).then_some(ErrorClass::Truncate);
        w.status = Some(Status { source: h.src, tag: h.tag, error, bytes: n as u64, cancelled: false });
        true
    }

    /// An eager message whose payload the path has not checked yet (its header it has): if
    /// the waiting slot accepts it, copy it in while checking its CRC32C (`seed`: the CRC of
    /// what precedes the payload; `expected`: the sender's) and return Some(whether it was
    /// intact). A damaged payload leaves the slot open (the bytes already copied are not
    /// the receive's result; the path has the message sent again). None, having done
    /// nothing, when the slot does not take it: the caller checks it and goes the usual way.
    pub(super) fn eager_to_waiting_checked(&mut self, peer: u32, h: &Header, payload: &[u8], seed: u32, expected: u32) -> Option<bool> {
        if h.kind != Kind::Eager || h.len != payload.len() as u64 || self.logging {
            return None;
        }
        let w = self.waiting.as_mut()?;
        if !(w.open() && w.ctx == h.ctx && accepts(w.src, w.tag, h.src, h.tag)) {
            return None;
        }
        // SAFETY: the slot's buffer holds `cap` bytes (checked when it was filled).
        let Some((n, error)) = (unsafe { copy_checked(w.buf, w.cap, payload, seed, expected) }) else {
            return Some(false);
        };
        w.status = Some(Status { source: h.src, tag: h.tag, error, bytes: n as u64, cancelled: false });
        self.eager_taken(peer, h);
        Some(true)
    }

    /// What `handle_packet` does for an eager message a receive took, for the checked copies
    /// that take it without going through there.
    fn eager_taken(&mut self, peer: u32, h: &Header) {
        self.events += 1;
        let from = self.door.ident(peer, h.a);
        if self.channel_memory && h.flags & crate::wire::FLAG_SYNC != 0 {
            self.sync_from.insert((peer, h.a));
        }
        self.door.matched(from, h.ctx, h.src, h.tag);
        self.sync_matched(from);
    }

    /// An eager message whose payload the path has not checked yet, for a receive posted
    /// with a request (MPI_Irecv, a collective's receive) into a contiguous buffer: copy it
    /// in while checking its CRC32C, then match it, where the general code would check it in
    /// one pass and copy it in another. Some(whether it was intact), as
    /// [`State::eager_to_waiting_checked`] (a damaged payload leaves the receive posted);
    /// None, having done nothing, when no such receive takes it or it is too short to gain.
    pub(super) fn eager_to_posted_checked(&mut self, peer: u32, h: &Header, payload: &[u8], seed: u32, expected: u32) -> Option<bool> {
        if h.kind != Kind::Eager || h.len != payload.len() as u64 || self.logging || payload.len() < FUSED_POSTED_MIN {
            return None;
        }
        let r = self.matcher.first_posted(h.ctx, h.src, h.tag)?;
        let Some(Op::Recv(s)) = self.reqs.get(r).map(|q| &q.op) else { return None };
        if !s.dtype.is_contiguous() {
            return None;
        }
        let cap = s.dtype.packed_size(s.count);
        if cap == 0 {
            return None;
        }
        // SAFETY: the receive request's buffer holds `count` elements of its contiguous type.
        let Some((n, error)) = (unsafe { copy_checked(s.buf, cap, payload, seed, expected) }) else {
            return Some(false);
        };
        let taken = self.matcher.arrive(h.ctx, h.src, h.tag, || unreachable!("a posted receive matches"));
        debug_assert_eq!(taken, Some(r));
        self.eager_taken(peer, h);
        self.complete(r, Status { source: h.src, tag: h.tag, error, bytes: n as u64, cancelled: false });
        Some(true)
    }

    /// A message the general code must handle (rendezvous) is about to be matched: if the
    /// waiting slot would accept it, make the slot a posted request first, ahead of any
    /// receive posted after it.
    pub(super) fn promote_waiting(&mut self, ctx: u32, src: i32, tag: i32) {
        let Some(w) = self.waiting.as_mut() else { return };
        if !(w.open() && w.ctx == ctx && accepts(w.src, w.tag, src, tag)) {
            return;
        }
        // The buffer is contiguous: receiving its bytes as MPI_BYTE is the same receive.
        let spec = RecvSpec { buf: w.buf, count: w.cap, dtype: crate::coll::byte_type(), comm: w.comm, src: w.src, tag: w.tag };
        let h = self.reqs.insert_with(|| super::posted_recv(spec, ctx));
        self.matcher.post_first(ctx, w.src, w.tag, h);
        w.promoted = Some(h);
    }
}

impl Engine {
    /// MPI_Send in every mode but buffered (which the caller handles), through a request:
    /// returns once the send buffer may be reused. Callers try [`Engine::send_contig`] first.
    pub fn send(&mut self, spec: SendSpec) -> MpiResult<()> {
        let dest = spec.dest;
        let h = self.isend(spec)?;
        let r = self.wait(h);
        self.release(h);
        // A send that ended without delivering (its destination failed, its communicator
        // was revoked) says so in its status: the call fails with that class.
        match r?.error {
            None => Ok(()),
            Some(class) => Err(MpiError::new(class, format!("the send to rank {dest} did not complete ({class:?})"))),
        }
    }

    /// Standard-mode send of `len` contiguous bytes at `buf` straight to the path, if it is
    /// small and the path takes it now; false (nothing sent) if the general path must run.
    pub fn send_contig(&mut self, comm: Handle, buf: *const u8, len: usize, dest: i32, tag: i32) -> MpiResult<bool> {
        Ok(self.transmit_contig(comm, buf, len, dest, tag).is_some())
    }

    /// MPI_Isend's counterpart of [`Engine::send_contig`]: the message goes straight to the
    /// path and the request returned is already complete, as the general path leaves an
    /// eager send's (it keeps what a cancel needs: the message's identity). None (nothing
    /// sent) if the general path must run.
    pub fn isend_contig(&mut self, comm: Handle, buf: *const u8, len: usize, dest: i32, tag: i32) -> MpiResult<Option<Handle>> {
        let Some(sent) = self.transmit_contig(comm, buf, len, dest, tag) else { return Ok(None) };
        let spec = SendSpec { buf, count: len, dtype: crate::coll::byte_type(), comm, dest, tag, mode: Mode::Standard };
        self.st.events += 1;
        Ok(Some(self.st.reqs.insert_with(|| {
            let mut r = Request::new(Op::Send(spec), false);
            r.active = true;
            r.complete = true;
            r.status = Status { source: PROC_NULL, tag, error: None, bytes: 0, cancelled: false };
            r.send.sent = Some(sent);
            r
        })))
    }

    /// An eager message of `len` contiguous bytes at `buf` to `dest` on `comm`, handed to the
    /// path if it is small and the path takes it now: its identity, or None (nothing sent).
    // Inlined: the identity it returns then stays in registers. Returned through memory,
    // it was read back with wider loads than it was written with, a store-forwarding
    // failure that waited for every earlier store to drain, the ring's included (about half
    // of MPI_Isend's time).
    #[inline(always)]
    fn transmit_contig(&mut self, comm: Handle, buf: *const u8, len: usize, dest: i32, tag: i32) -> Option<Sent> {
        if dest == PROC_NULL || self.fast_paths_off() || len > self.eager_limit {
            return None;
        }
        let c = self.comm(comm).ok()?;
        let peer = c.peer_world(dest)?;
        let (ctx, src) = (c.ctx, c.rank);
        if peer == self.rank || !self.st.outq[peer as usize].is_empty() {
            return None;
        }
        let net = self.net.as_mut()?;
        let hdr = self.st.door.message(peer, Kind::Eager, 0, ctx, src, tag, len as u64, 0);
        // SAFETY: the application's buffer holds `len` contiguous bytes.
        let payload = unsafe { std::slice::from_raw_parts(if len == 0 { [].as_ptr() } else { buf }, len) };
        match door::transmit(net.as_mut(), peer, &hdr.encode(), payload) {
            Ok(SendStatus::Done) => {
                self.st.door.commit(peer, &hdr, payload);
                Some(Sent { peer, ctx, src, seq: hdr.a, id: 0, rendezvous: false, buffered: false })
            }
            // Full, or an error the general path reports the usual way.
            _ => None,
        }
    }

    /// MPI_Recv through a request: the status of the received message. Callers try
    /// [`Engine::recv_contig`] first. In run-through mode an `ANY_SOURCE` receive that cannot
    /// complete because of an unacknowledged failure fails with `ProcFailed` (a blocking
    /// receive cannot stay pending).
    pub fn recv(&mut self, spec: RecvSpec) -> MpiResult<Status> {
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

    /// MPI_Irecv of `cap` contiguous bytes at `buf`, the request built from the arguments
    /// where it is stored (no receive description passed down by value through the layers,
    /// whose copies stalled on their own stores); None (nothing done) for the general path:
    /// a null or invalid source, a dead source or revoked communicator, the fault-tolerant
    /// modes.
    pub fn irecv_contig(&mut self, comm: Handle, buf: *mut u8, cap: usize, src: i32, tag: i32) -> MpiResult<Option<Handle>> {
        if self.fast_paths_off() {
            return Ok(None);
        }
        let Ok(c) = self.comm(comm) else { return Ok(None) };
        let ctx = c.ctx;
        if src != ANY_SOURCE && c.peer_world(src).is_none_or(|w| self.st.ft.is_dead(w)) {
            return Ok(None);
        }
        if self.st.ft.is_revoked(ctx) {
            return Ok(None);
        }
        let h = self.st.reqs.insert_with(|| {
            super::posted_recv(RecvSpec { buf, count: cap, dtype: crate::coll::byte_type(), comm, src, tag }, ctx)
        });
        self.post_stored(h, ctx, src, tag)?;
        Ok(Some(h))
    }

    /// Blocking receive into `cap` contiguous bytes at `buf` through the receive slot; None
    /// (nothing received) if the general path must run.
    pub fn recv_contig(&mut self, comm: Handle, buf: *mut u8, cap: usize, src: i32, tag: i32) -> MpiResult<Option<Status>> {
        let Ok(c) = self.comm(comm) else { return Ok(None) };
        let ctx = c.ctx;
        if src != ANY_SOURCE && c.peer_world(src).is_none() {
            return Ok(None);
        }
        self.recv_slot(ctx, comm, buf, cap, src, tag)
    }

    /// Wait in the receive slot for one message on context `ctx` (of communicator `comm`)
    /// from `src` with `tag` into `cap` contiguous bytes at `buf`; the caller checked `src`
    /// names a member. None, having done nothing, when the slot cannot be used: run-through
    /// mode, a receive already posted on `ctx`, or a matching rendezvous message waiting.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn recv_slot(&mut self, ctx: u32, comm: Handle, buf: *mut u8, cap: usize, src: i32, tag: i32) -> MpiResult<Option<Status>> {
        if self.fast_paths_off() || src == PROC_NULL || self.st.waiting.is_some() || self.st.matcher.has_posted(ctx) {
            return Ok(None);
        }
        match self.st.matcher.peek(ctx, src, tag) {
            Some(u) if matches!(u.msg, Body::Eager { .. }) => {
                let Some(u) = self.st.take(ctx, src, tag) else { return Ok(None) };
                let Body::Eager { data, .. } = u.msg else { return Ok(None) };
                let n = data.len().min(cap);
                // SAFETY: the buffer holds `cap` bytes.
                unsafe { steadfast_paths::copy::copy(data.as_ptr(), buf, n) };
                let error = (data.len() > cap).then_some(ErrorClass::Truncate);
                self.st.spares.put(data);
                self.st.events += 1;
                return Ok(Some(Status { source: u.src, tag: u.tag, error, bytes: n as u64, cancelled: false }));
            }
            Some(_) => return Ok(None),
            None => {}
        }
        self.st.waiting = Some(Waiting { buf, cap, comm, src, tag, ctx, status: None, promoted: None });
        // Where waits yield at once: whom this one waits for (see `peer_spin`).
        let peer = if self.peer_spin > 0 && src != ANY_SOURCE { self.comm(comm).ok().and_then(|c| c.peer_world(src)) } else { None };
        let r = self.block_until_for(peer, |e| e.st.waiting.as_ref().is_none_or(|w| !w.open()));
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
            (Some(s), _) => Ok(Some(s)),
            (None, Some(h)) => {
                let s = self.wait(h);
                self.release(h);
                s.map(Some)
            }
            (None, None) => mpi_err!(Intern, "blocking receive ended without a message"),
        }
    }
}

/// Copy what fits of `payload` into the `cap` bytes at `buf` while checking the whole
/// payload's CRC32C (`seed`: the CRC of what precedes it; `expected`: the sender's).
/// Some((bytes copied, Truncate if the payload was longer)) when it is intact; None when
/// it is damaged (the bytes copied are then not a result).
///
/// # Safety
/// `buf` must be valid for `cap` byte writes; it is an application buffer, which cannot
/// overlap the path's memory `payload` lies in.
unsafe fn copy_checked(buf: *mut u8, cap: usize, payload: &[u8], seed: u32, expected: u32) -> Option<(usize, Option<ErrorClass>)> {
    let n = payload.len().min(cap);
    let into = std::slice::from_raw_parts_mut(buf, n);
    let crc = steadfast_paths::checksum::copy_with_crc32c_append(seed, into, &payload[..n]);
    let intact = steadfast_paths::checksum::crc32c_append(crc, &payload[n..]) == expected;
    intact.then(|| (n, (payload.len() > cap).then_some(ErrorClass::Truncate)))
}
