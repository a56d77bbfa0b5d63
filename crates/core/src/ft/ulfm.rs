//! The engine as driver of the run-through fault-tolerance protocols (`steadfast-ulfm`):
//! revoke, agree and shrink, one [`FtComm`] per communicator, carried in `Ulfm` packets on
//! the ordinary paths. The protocols decide; this module moves their messages, feeds them
//! failure notices, and turns their events into completed calls.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use steadfast_ulfm::{Event, FtComm, Seq};

use super::{Engine, OutOp, State, PROC_NULL};
use crate::comm::Comm;
use crate::error::{ErrorClass, MpiError, MpiResult};
use crate::mpi_err;
use crate::request::{Op, Status};
use crate::slab::Handle;
use crate::wire::Kind;

/// One communicator's protocol instance and the results waiting for their callers.
pub(super) struct UlfmComm {
    ft: FtComm,
    group: Arc<Vec<u32>>,
    me: i32,
    agreed: HashMap<Seq, (i32, bool)>,
    shrunk: HashMap<Seq, (Vec<u32>, u64)>,
    /// Calls made here but not started yet (one protocol operation runs at a time; calls
    /// start in call order, which MPI makes the same on every member).
    queued: VecDeque<Call>,
    /// Started calls by protocol sequence number.
    started: HashMap<Seq, Call>,
}

/// An agree or shrink call and the request that completes it.
pub(super) struct Call {
    op: CallOp,
    req: Handle,
}

/// Where a call's result goes: application memory, valid until the request completes (as
/// MPI requires of nonblocking calls).
enum CallOp {
    Agree { flag: i32, out: *mut i32 },
    Shrink { out: *mut usize },
}

// SAFETY: the pointers are only written under the engine lock, while the request is pending.
unsafe impl Send for Call {}

/// Protocol instances by point-to-point context id, plus packets that arrived first.
#[derive(Default)]
pub(super) struct UlfmState {
    comms: HashMap<u32, UlfmComm>,
    early: Vec<(u32, i32, Vec<u8>)>,
    origin: Option<Instant>,
    /// Agree and shrink calls queued or running.
    pub(super) calls: usize,
    /// Communicators built by nonblocking shrinks since the C layer last asked.
    new_comms: Vec<Handle>,
    /// Revokes that arrived and are not applied yet.
    pub(super) pending_revokes: Vec<u32>,
}

impl UlfmState {
    fn now(&mut self) -> Duration {
        self.origin.get_or_insert_with(Instant::now).elapsed()
    }
}

impl State {
    /// A protocol packet for context `ctx` from comm rank `src`.
    pub(super) fn ulfm_packet(&mut self, _peer: u32, ctx: u32, src: i32, payload: &[u8]) {
        if !self.ulfm.comms.contains_key(&ctx) {
            match self.comm_by_ctx(ctx) {
                Some(h) => {
                    if self.ulfm_instance(h).is_err() {
                        self.dropped += 1;
                        return;
                    }
                }
                None => {
                    // The communicator is not built here yet (e.g. a shrink still finishing).
                    if self.ulfm.early.len() < 4096 {
                        self.ulfm.early.push((ctx, src, payload.to_vec()));
                    }
                    return;
                }
            }
        }
        let now = self.ulfm.now();
        if let Some(u) = self.ulfm.comms.get_mut(&ctx) {
            if u.ft.handle_bytes(now, src as u32, payload).is_err() {
                self.dropped += 1;
            }
        }
        self.ulfm_drain(ctx);
    }

    /// Whether protocol packets for context `ctx` are waiting for their communicator.
    pub(super) fn ulfm_has_early(&self, ctx: u32) -> bool {
        self.ulfm.early.iter().any(|(c, _, _)| *c == ctx)
    }

    fn comm_by_ctx(&self, ctx: u32) -> Option<Handle> {
        self.comms.handles().into_iter().find(|h| self.comms.get(*h).is_some_and(|c| c.ctx == ctx && c.remote.is_none()))
    }

    /// Create the protocol instance of communicator `c` if it has none.
    pub(super) fn ulfm_instance(&mut self, c: Handle) -> MpiResult<u32> {
        let comm = self.comms.get(c).ok_or_else(|| MpiError::new(ErrorClass::Comm, "invalid communicator"))?;
        if comm.remote.is_some() {
            return mpi_err!(Unsupported, "fault-tolerance calls on intercommunicators are not supported");
        }
        let ctx = comm.ctx;
        if self.ulfm.comms.contains_key(&ctx) {
            return Ok(ctx);
        }
        let group = comm.group.clone();
        let me = comm.rank;
        let ft = FtComm::new(Default::default(), ctx as u64, group.len() as u32, me as u32)
            .map_err(|e| MpiError::new(ErrorClass::Intern, format!("fault-tolerance state: {e}")))?;
        self.ulfm.comms.insert(
            ctx,
            UlfmComm {
                ft,
                group: group.clone(),
                me,
                agreed: HashMap::new(),
                shrunk: HashMap::new(),
                queued: VecDeque::new(),
                started: HashMap::new(),
            },
        );
        let now = self.ulfm.now();
        for (r, w) in group.iter().enumerate() {
            if self.ft.is_dead(*w) {
                if let Some(u) = self.ulfm.comms.get_mut(&ctx) {
                    let _ = u.ft.process_failed(now, r as u32);
                }
            }
        }
        let early: Vec<_> = std::mem::take(&mut self.ulfm.early);
        for (x, src, bytes) in early {
            if x == ctx {
                if let Some(u) = self.ulfm.comms.get_mut(&ctx) {
                    let _ = u.ft.handle_bytes(now, src as u32, &bytes);
                }
            } else {
                self.ulfm.early.push((x, src, bytes));
            }
        }
        self.ulfm_drain(ctx);
        Ok(ctx)
    }

    /// Tell every protocol instance whose communicator holds world rank `w` that it failed.
    pub(super) fn ulfm_process_failed(&mut self, w: u32) {
        let now = self.ulfm.now();
        let ctxs: Vec<u32> = self.ulfm.comms.keys().copied().collect();
        for ctx in ctxs {
            if let Some(u) = self.ulfm.comms.get_mut(&ctx) {
                if let Some(r) = u.group.iter().position(|x| *x == w) {
                    let _ = u.ft.process_failed(now, r as u32);
                }
            }
            self.ulfm_drain(ctx);
        }
    }

    /// Send what the instance of `ctx` wants sent and act on its events.
    pub(super) fn ulfm_drain(&mut self, ctx: u32) {
        loop {
            let Some(u) = self.ulfm.comms.get_mut(&ctx) else { return };
            let mut out = Vec::new();
            while let Some(t) = u.ft.poll_transmit() {
                out.push(t);
            }
            let mut events = Vec::new();
            while let Some(e) = u.ft.poll_event() {
                events.push(e);
            }
            let (group, me) = (u.group.clone(), u.me);
            if out.is_empty() && events.is_empty() {
                return;
            }
            for t in out {
                let Some(&w) = group.get(t.to as usize) else { continue };
                if self.ft.is_dead(w) {
                    continue;
                }
                let hdr = self.door.control(Kind::Ulfm, ctx, me, 0, 0, 0, 0);
                let payload = t.message.encode();
                if w == self.rank {
                    self.loopback.push_back((hdr, payload));
                } else {
                    self.queue(w, OutOp::Packet { hdr, payload });
                }
            }
            for e in events {
                match e {
                    // Applied by `progress` after one more pass over the paths, so that what
                    // other members sent before the revoke is still received.
                    Event::Revoked => self.ulfm.pending_revokes.push(ctx),
                    Event::Agreed { seq, flag, proc_failed } => {
                        if let Some(u) = self.ulfm.comms.get_mut(&ctx) {
                            u.agreed.insert(seq, (flag, proc_failed));
                        }
                    }
                    Event::Shrunk { seq, members, cid } => {
                        if let Some(u) = self.ulfm.comms.get_mut(&ctx) {
                            u.shrunk.insert(seq, (members, cid));
                        }
                    }
                    Event::FailureLearned { rank } => {
                        if let Some(&w) = group.get(rank as usize) {
                            self.peer_failed(w);
                        }
                    }
                }
                self.events += 1;
            }
        }
    }

    /// The communicator with context `ctx` was revoked: fail everything pending on it.
    pub(super) fn revoked(&mut self, ctx: u32) {
        self.ft.comm.entry(ctx).or_default().revoked = true;
        for h in self.reqs.handles() {
            let Some(r) = self.reqs.get(h) else { continue };
            if r.complete || !r.active {
                continue;
            }
            let on_comm = match &r.op {
                Op::Send(s) => self.comms.get(s.comm).is_some_and(|c| c.ctx == ctx),
                Op::Recv(s) => self.comms.get(s.comm).is_some_and(|c| c.ctx == ctx),
                Op::Null => false,
            };
            if !on_comm {
                continue;
            }
            let (rctx, posted) = (r.recv.ctx, r.recv.posted);
            if posted {
                self.matcher.cancel(rctx, h);
            }
            self.complete(h, Status { source: PROC_NULL, tag: 0, error: Some(ErrorClass::Revoked), bytes: 0, cancelled: false });
        }
    }
}

impl Engine {
    /// Whether communicator `c` was revoked.
    pub fn comm_is_revoked(&self, c: Handle) -> bool {
        self.comm(c).is_ok_and(|comm| self.st.ft.is_revoked(comm.ctx))
    }

    /// MPIX_Comm_revoke: revoke `c` here and on every other live member.
    pub fn revoke(&mut self, c: Handle) -> MpiResult<()> {
        let ctx = self.st.ulfm_instance(c)?;
        let now = self.st.ulfm.now();
        if let Some(u) = self.st.ulfm.comms.get_mut(&ctx) {
            u.ft.revoke(now);
        }
        self.st.ulfm_drain(ctx);
        self.progress()?;
        Ok(())
    }

    /// Acknowledge failures in the protocol instance too (agree's error rule uses it).
    pub(super) fn ulfm_ack(&mut self, c: Handle, n: Option<usize>) {
        let Ok(ctx) = self.st.ulfm_instance(c) else { return };
        if let Some(u) = self.st.ulfm.comms.get_mut(&ctx) {
            match n {
                None => {
                    u.ft.failure_ack();
                }
                Some(n) => {
                    u.ft.ack_failed(n);
                }
            }
        }
    }

    /// MPIX_Comm_agree: fault-tolerant AND of `flag` over the live members of `c`.
    /// Returns the agreed flag and whether to report MPIX_ERR_PROC_FAILED.
    pub fn agree(&mut self, c: Handle, flag: i32) -> MpiResult<(i32, bool)> {
        let mut out = flag;
        let req = self.iagree(c, flag, &mut out)?;
        let st = self.wait(req);
        self.release(req);
        let st = st?;
        Ok((out, st.error == Some(ErrorClass::ProcFailed)))
    }

    /// MPIX_Comm_iagree: start an agreement; `*out` receives the agreed flag when the
    /// returned request completes (with MPIX_ERR_PROC_FAILED in its status when a member
    /// failed unacknowledged).
    pub fn iagree(&mut self, c: Handle, flag: i32, out: *mut i32) -> MpiResult<Handle> {
        self.ulfm_call(c, CallOp::Agree { flag, out })
    }

    /// MPIX_Comm_shrink: a new communicator of the survivors of `c`, identical everywhere.
    pub fn shrink(&mut self, c: Handle) -> MpiResult<Handle> {
        let mut out = 0usize;
        let req = self.ishrink(c, &mut out)?;
        let st = self.wait(req);
        self.release(req);
        if let Some(e) = st?.error {
            return Err(MpiError::new(e, "the shrink did not complete"));
        }
        // The C layer adopts it here, not through `take_new_comms`.
        let h = Handle(out as u64);
        self.st.ulfm.new_comms.retain(|x| *x != h);
        Ok(h)
    }

    /// MPIX_Comm_ishrink: start a shrink; `*out` receives the new communicator's handle when
    /// the returned request completes.
    pub fn ishrink(&mut self, c: Handle, out: *mut usize) -> MpiResult<Handle> {
        self.ulfm_call(c, CallOp::Shrink { out })
    }

    /// Communicators made by nonblocking shrinks since the last call (the C layer takes a
    /// reference on their error handlers).
    pub fn take_new_comms(&mut self) -> Vec<Handle> {
        std::mem::take(&mut self.st.ulfm.new_comms)
    }

    fn ulfm_call(&mut self, c: Handle, op: CallOp) -> MpiResult<Handle> {
        let ctx = self.st.ulfm_instance(c)?;
        let req = self.coll_request(false);
        match self.st.ulfm.comms.get_mut(&ctx) {
            Some(u) => u.queued.push_back(Call { op, req }),
            None => {
                self.release(req);
                return mpi_err!(Intern, "fault-tolerance state vanished");
            }
        }
        self.st.ulfm.calls += 1;
        self.ulfm_service();
        Ok(req)
    }

    /// Start queued agree / shrink calls whose turn came and complete those that finished
    /// (called from `progress` while any are outstanding).
    pub(super) fn ulfm_service(&mut self) {
        let ctxs: Vec<u32> = self
            .st
            .ulfm
            .comms
            .iter()
            .filter(|(_, u)| !u.queued.is_empty() || !u.started.is_empty())
            .map(|(k, _)| *k)
            .collect();
        for ctx in ctxs {
            // Finish what is done.
            let mut done = Vec::new();
            if let Some(u) = self.st.ulfm.comms.get_mut(&ctx) {
                let seqs: Vec<Seq> = u.started.keys().copied().collect();
                for seq in seqs {
                    let ready = match u.started.get(&seq).map(|c| &c.op) {
                        Some(CallOp::Agree { .. }) => u.agreed.contains_key(&seq),
                        Some(CallOp::Shrink { .. }) => u.shrunk.contains_key(&seq),
                        None => false,
                    };
                    if ready {
                        if let Some(call) = u.started.remove(&seq) {
                            done.push((seq, call));
                        }
                    }
                }
            }
            for (seq, call) in done {
                self.st.ulfm.calls = self.st.ulfm.calls.saturating_sub(1);
                let error = match call.op {
                    CallOp::Agree { out, .. } => self.finish_agree(ctx, seq, out),
                    CallOp::Shrink { out } => self.finish_shrink(ctx, seq, out),
                };
                self.coll_request_done(call.req, error);
            }
            // Start the next call when the protocol is free.
            loop {
                let now = self.st.ulfm.now();
                let proposal = self.next_ctx as u64;
                let Some(u) = self.st.ulfm.comms.get_mut(&ctx) else { break };
                if u.queued.is_empty() || !u.ft.can_start() {
                    break;
                }
                let Some(call) = u.queued.pop_front() else { break };
                let started = match call.op {
                    CallOp::Agree { flag, .. } => u.ft.start_agree(now, flag),
                    CallOp::Shrink { .. } => u.ft.start_shrink(now, proposal),
                };
                match started {
                    Ok(seq) => {
                        u.started.insert(seq, call);
                        self.st.ulfm_drain(ctx);
                    }
                    Err(e) => {
                        tracing::warn!("fault-tolerance call could not start: {e}");
                        self.st.ulfm.calls = self.st.ulfm.calls.saturating_sub(1);
                        self.coll_request_done(call.req, Some(ErrorClass::Intern));
                    }
                }
            }
        }
    }

    fn finish_agree(&mut self, ctx: u32, seq: Seq, out: *mut i32) -> Option<ErrorClass> {
        let u = self.st.ulfm.comms.get_mut(&ctx)?;
        let (flag, proc_failed) = u.agreed.remove(&seq)?;
        // SAFETY: the caller keeps `out` valid until the request completes.
        unsafe { *out = flag };
        if proc_failed {
            if let Some(c) = self.st.comm_by_ctx(ctx) {
                self.comm_mark_reported(c);
            }
            return Some(ErrorClass::ProcFailed);
        }
        None
    }

    fn finish_shrink(&mut self, ctx: u32, seq: Seq, out: *mut usize) -> Option<ErrorClass> {
        match self.build_shrunk(ctx, seq) {
            Ok(h) => {
                // SAFETY: the caller keeps `out` valid until the request completes.
                unsafe { *out = h.0 as usize };
                self.st.ulfm.new_comms.push(h);
                None
            }
            Err(e) => {
                tracing::warn!("shrink failed: {e}");
                Some(e.class)
            }
        }
    }

    /// Build the communicator a finished shrink decided on.
    fn build_shrunk(&mut self, ctx: u32, seq: Seq) -> MpiResult<Handle> {
        let c = self.st.comm_by_ctx(ctx).ok_or_else(|| MpiError::new(ErrorClass::Comm, "the shrunk communicator was freed"))?;
        let u = self.st.ulfm.comms.get_mut(&ctx).ok_or_else(|| MpiError::new(ErrorClass::Intern, "fault-tolerance state vanished"))?;
        let (members, cid) = u.shrunk.remove(&seq).ok_or_else(|| MpiError::new(ErrorClass::Intern, "shrink without a result"))?;
        let (group, me) = (u.group.clone(), u.me);
        let new_group: Vec<u32> = members.iter().filter_map(|r| group.get(*r as usize).copied()).collect();
        let rank = members
            .iter()
            .position(|r| *r as i32 == me)
            .ok_or_else(|| MpiError::new(ErrorClass::Intern, "this process is not in the shrunk communicator"))?;
        let cid = u32::try_from(cid).map_err(|_| MpiError::new(ErrorClass::Intern, "context id out of range"))?;
        self.next_ctx = self.next_ctx.max(cid + 2);
        let old = self.comm(c)?;
        let comm = Comm {
            ctx: cid,
            rank: rank as i32,
            group: Arc::new(new_group),
            remote: None,
            name: String::new(),
            errhandler: old.errhandler,
            ..old.clone()
        };
        let h = self.add_comm(comm);
        // Members that failed after the decision are failed in the new communicator too.
        let _ = self.st.ulfm_instance(h);
        Ok(h)
    }
}
