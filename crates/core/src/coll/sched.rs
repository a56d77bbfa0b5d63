//! Schedules: a collective as a list of rounds of sends, receives and local steps.
//!
//! Every algorithm writes its part of a collective into a [`Schedule`]; the blocking call runs
//! it to the end and the nonblocking call lets `Engine::progress` advance it. A round starts
//! every send and receive it holds at once; when all of them have completed, its local steps
//! (reductions and copies) run in order, and the next round starts. Local steps therefore see
//! the round's data, and a buffer sent in a round may be overwritten by that round's local
//! steps.
//!
//! Buffers are raw pointers: the application's (valid until the collective completes, as MPI
//! requires) or temporaries owned by the schedule (heap blocks that never move).

use crate::datatype::TypeRef;
use crate::engine::Engine;
use crate::error::{ErrorClass, MpiError, MpiResult};
use crate::op::Reduction;
use crate::slab::Handle;

/// Tag bits: `LOCAL | seq << SEQ_SHIFT | sub`. Below the engine's internal tags (0x7fff_xxxx).
pub(crate) const SUB_BITS: u32 = 12;
/// Marks traffic inside the local group of an intercommunicator (same context as the
/// traffic between the groups, where the source rank means a rank of the other group).
pub(crate) const LOCAL_BIT: i32 = 1 << 28;
/// Marks the tags of nonblocking and persistent collectives, numbered apart from the blocking
/// ones (as MPICH does): a blocking collective and a nonblocking one started in different
/// orders on different ranks still find their own messages.
pub(crate) const NONBLOCKING_BIT: i32 = 1 << 29;
/// Bits of the per-communicator collective sequence number kept in a tag.
pub(crate) const SEQ_MASK: u32 = 0xffff;

/// One step of a schedule.
#[derive(Debug)]
pub enum Step {
    /// Send `count` elements of `dtype` at `buf` to rank `peer`.
    Send { peer: i32, local: bool, sub: u16, buf: *const u8, count: usize, dtype: TypeRef },
    /// Receive `count` elements of `dtype` into `buf` from rank `peer`.
    Recv { peer: i32, local: bool, sub: u16, buf: *mut u8, count: usize, dtype: TypeRef },
    /// `dst = src op dst` over `count` elements of the schedule's reduction datatype.
    Reduce { src: *const u8, dst: *mut u8, count: usize },
    /// Local copy with type conversion (what a send to oneself would do).
    Copy { src: *const u8, scount: usize, stype: TypeRef, dst: *mut u8, dcount: usize, dtype: TypeRef },
    /// `dst = parts[0] op parts[1] op … ` in order over the parts that arrived (run-through
    /// mode): a part is the receive step that fills it (`None`: this rank's own) and its
    /// buffer. `acc` is a temporary of `count` elements.
    OrderedReduce { parts: Vec<(Option<usize>, *const u8)>, acc: *mut u8, dst: *mut u8, count: usize },
    /// End of a round.
    Round,
}

/// Whether a schedule's large sends are read by their receivers with a single copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SingleCopy {
    /// Through the rings, as any message.
    No,
    /// Where the host allows cross-memory reads: one process would otherwise copy every
    /// block into the rings while the receivers wait (a Scatter's root on a host with more
    /// ranks than CPUs, `select::scatter_single_copy`). Measured faster on the Intel and AMD
    /// guests (docs/performance.md).
    Yes,
    /// Only where this host's single copy is fast (`steadfast_paths::cma::fast_here`): a
    /// linear Bcast's root, whose one buffer every receiver reads and checks, and a
    /// Scatter's root where every rank has a CPU.
    WhereFast,
}

/// A collective ready to run (or running).
pub struct Schedule {
    /// Communicator the traffic goes over.
    pub comm: Handle,
    /// Tag of this collective instance without the `sub` bits.
    pub tag_base: i32,
    /// The steps, rounds separated by [`Step::Round`].
    pub steps: Vec<Step>,
    /// The reduction `Reduce` steps apply.
    pub red: Option<Reduction>,
    /// While set, [`Schedule::send`] and [`Schedule::recv`] address the local group of an
    /// intercommunicator (so intracommunicator algorithms can run inside one group).
    pub local: bool,
    /// Whether the receivers of this schedule's sends read them with a single copy (a
    /// linear Scatter's or Bcast's root; see `State::single_copy_send`).
    pub single_copy: SingleCopy,
    /// Whether this schedule's sends complete once their data is in the path rather than on
    /// the receiver's FIN (`State::copy_sends`: a Gather's non-root ranks and a binomial
    /// Reduce's sends to the parents, on a host with more ranks than CPUs).
    pub copy_sends: bool,
    temps: Vec<Vec<u8>>,
    spare: Vec<Vec<u8>>,
    // Execution state.
    pc: usize,
    round_end: usize,
    in_round: bool,
    pending: Vec<Handle>,
    /// Step index of each entry of `pending`.
    pending_step: Vec<usize>,
    error: Option<ErrorClass>,
    /// Run-through mode: a receive from a failed process leaves its buffer missing instead
    /// of stopping the schedule (see `OrderedReduce`).
    pub(crate) tolerant: bool,
    /// Receive steps whose sender failed before sending (tolerant schedules).
    missing: Vec<usize>,
    /// When a failure in the communicator was first seen while this (nonblocking) schedule
    /// waited.
    pub(crate) failure_seen: Option<std::time::Instant>,
    /// Run by a blocking call outside run-through mode: a round's only receive may wait in
    /// the engine's request-free receive slot instead of as a posted request.
    blocking: bool,
    /// The receive step of the current round left for the slot.
    slot: Option<usize>,
    /// Every receive must bring exactly the bytes its step expects (on by default: in a
    /// collective every count follows from the ranks' equal arguments): a short message
    /// means the ranks' counts differ, an erroneous call reported as MPI_ERR_COUNT.
    pub(crate) exact: bool,
    /// A receive of an exact schedule came short or truncated: later sends carry no data,
    /// so every rank downstream sees the mismatch too instead of taking part of a message
    /// for the whole.
    poisoned: bool,
}

// SAFETY: the raw pointers are application buffers valid for the collective's lifetime (an
// MPI requirement) or point into `temps`; the engine is only used under one lock.
unsafe impl Send for Schedule {}

impl Default for Schedule {
    fn default() -> Self {
        Schedule {
            comm: Handle(0),
            tag_base: 0,
            steps: Vec::new(),
            red: None,
            local: false,
            single_copy: SingleCopy::No,
            copy_sends: false,
            temps: Vec::new(),
            spare: Vec::new(),
            pc: 0,
            round_end: 0,
            in_round: false,
            pending: Vec::new(),
            pending_step: Vec::new(),
            error: None,
            tolerant: false,
            missing: Vec::new(),
            failure_seen: None,
            blocking: false,
            slot: None,
            exact: true,
            poisoned: false,
        }
    }
}

impl Schedule {
    /// The requests of the round in progress.
    pub(crate) fn pending(&self) -> &[Handle] {
        &self.pending
    }

    /// Reset for reuse, keeping allocations (so the small-message path does not allocate).
    pub(crate) fn reset(&mut self, comm: Handle, tag_base: i32) {
        self.comm = comm;
        self.tag_base = tag_base;
        self.steps.clear();
        self.red = None;
        self.local = false;
        self.single_copy = SingleCopy::No;
        self.copy_sends = false;
        self.spare.append(&mut self.temps);
        // Keep a few modest buffers; let large ones go back to the allocator.
        self.spare.retain(|b| b.capacity() <= 1 << 20);
        self.spare.truncate(8);
        self.pc = 0;
        self.round_end = 0;
        self.in_round = false;
        self.pending.clear();
        self.pending_step.clear();
        self.error = None;
        self.tolerant = false;
        self.missing.clear();
        self.failure_seen = None;
        self.blocking = false;
        self.slot = None;
        self.exact = true;
        self.poisoned = false;
    }

    /// This rank's own arguments make the call erroneous (its send and receive sizes
    /// differ): it still takes part, but sends no data, so the ranks it sends to fail too
    /// rather than take a wrong block for a right one, and it reports `class` at the end.
    pub(crate) fn refuse(&mut self, class: ErrorClass) {
        self.error.get_or_insert(class);
        self.poisoned = true;
    }

    /// Note a receive step's outcome in an exact schedule: a truncated or short message
    /// is the ranks' disagreement (see [`Schedule::exact`]).
    fn check_received(&mut self, i: usize, error: Option<ErrorClass>, bytes: u64) {
        if !self.exact {
            return;
        }
        let Some(Step::Recv { count, dtype, .. }) = self.steps.get(i) else { return };
        let short = error.is_none() && bytes < dtype.packed_size(*count) as u64;
        if short {
            self.error.get_or_insert(ErrorClass::Count);
        }
        if short || error == Some(ErrorClass::Truncate) {
            self.poisoned = true;
        }
    }

    /// A temporary of `bytes` bytes owned by the schedule; its address never changes.
    pub fn temp(&mut self, bytes: usize) -> *mut u8 {
        let i = self.spare.iter().position(|b| b.capacity() >= bytes);
        let mut v = match i {
            Some(i) => self.spare.swap_remove(i),
            // Zeroed by the allocator: a large block comes as fresh zero pages, not written.
            None => vec![0u8; bytes],
        };
        // A reused block keeps its old bytes, `resize` zeroes only what it adds (every
        // algorithm writes a temporary before it reads it): zeroing a megabyte again on
        // every call cost a 2-rank Reduce of 1 MiB a tenth of its time.
        v.resize(bytes, 0);
        let p = v.as_mut_ptr();
        self.temps.push(v);
        p
    }

    /// A temporary laid out for `count` elements of `t`: returns the address the datatype's
    /// offsets are relative to (which may lie outside the block when the type has a lower
    /// bound), as MPI buffers are.
    pub fn temp_typed(&mut self, t: &TypeRef, count: usize) -> *mut u8 {
        let (lo, hi) = span(t, count);
        let p = self.temp((hi - lo) as usize);
        p.wrapping_offset(-lo)
    }

    /// Append a send (to the local group while [`Schedule::local`] is set).
    pub fn send(&mut self, peer: i32, sub: u32, buf: *const u8, count: usize, dtype: &TypeRef) {
        let local = self.local;
        self.steps.push(Step::Send { peer, local, sub: sub as u16, buf, count, dtype: dtype.clone() });
    }
    /// Append a receive (from the local group while [`Schedule::local`] is set).
    pub fn recv(&mut self, peer: i32, sub: u32, buf: *mut u8, count: usize, dtype: &TypeRef) {
        let local = self.local;
        self.steps.push(Step::Recv { peer, local, sub: sub as u16, buf, count, dtype: dtype.clone() });
    }
    /// Append `dst = src op dst`.
    pub fn reduce(&mut self, src: *const u8, dst: *mut u8, count: usize) {
        if count > 0 {
            self.steps.push(Step::Reduce { src, dst, count });
        }
    }
    /// Append a typed local copy.
    pub fn copy(&mut self, src: *const u8, scount: usize, stype: &TypeRef, dst: *mut u8, dcount: usize, dtype: &TypeRef) {
        if !std::ptr::eq(src, dst) || !same_layout(stype, dtype, scount, dcount) {
            self.steps.push(Step::Copy { src, scount, stype: stype.clone(), dst, dcount, dtype: dtype.clone() });
        }
    }
    /// Append an ordered reduction over the parts that arrived (tolerant schedules).
    pub fn ordered_reduce(&mut self, parts: Vec<(Option<usize>, *const u8)>, acc: *mut u8, dst: *mut u8, count: usize) {
        if count > 0 {
            self.steps.push(Step::OrderedReduce { parts, acc, dst, count });
        }
    }
    /// Index the next appended step will have.
    pub fn next_step(&self) -> usize {
        self.steps.len()
    }
    /// End the current round (no-op when it is empty).
    pub fn round(&mut self) {
        if !matches!(self.steps.last(), None | Some(Step::Round)) {
            self.steps.push(Step::Round);
        }
    }

    /// Number of rounds (for tests and tracing).
    pub fn rounds(&self) -> usize {
        let n = self.steps.iter().filter(|s| matches!(s, Step::Round)).count();
        n + usize::from(!matches!(self.steps.last(), None | Some(Step::Round)))
    }

    /// First error a receive reported (truncation), if any.
    pub(crate) fn error(&self) -> Option<ErrorClass> {
        self.error
    }
}

fn same_layout(a: &TypeRef, b: &TypeRef, ac: usize, bc: usize) -> bool {
    TypeRef::ptr_eq(a, b) && ac == bc
}

/// (lowest, highest) byte offset touched by `count` elements of `t`, relative to the buffer.
pub fn span(t: &TypeRef, count: usize) -> (isize, isize) {
    if count == 0 || t.size == 0 {
        return (0, 0);
    }
    let last = (count as isize - 1) * t.extent;
    let lo = t.true_lb + last.min(0);
    let hi = t.true_lb + t.true_extent + last.max(0);
    (lo, hi)
}

/// Address of element `i` of a buffer of type `t`.
#[inline]
pub fn at(buf: *const u8, t: &TypeRef, i: usize) -> *mut u8 {
    buf.wrapping_offset(i as isize * t.extent) as *mut u8
}

/// Copy `scount` elements of `stype` at `src` into `dcount` elements of `dtype` at `dst`.
///
/// # Safety
/// Both buffers must be valid for their counts and types.
pub unsafe fn typed_copy(src: *const u8, scount: usize, stype: &TypeRef, dst: *mut u8, dcount: usize, dtype: &TypeRef) {
    let n = stype.packed_size(scount).min(dtype.packed_size(dcount));
    if n == 0 {
        return;
    }
    if stype.is_contiguous() && dtype.is_contiguous() {
        let (s, d) = (src as usize, dst as usize);
        if s.checked_add(n).is_some_and(|e| e <= d) || d.checked_add(n).is_some_and(|e| e <= s) {
            // Apart (an own block between the application's send and receive buffers):
            // `steadfast_paths::copy` keeps clear of glibc's `rep movsb` crawl.
            steadfast_paths::copy::copy(src, dst, n);
        } else {
            std::ptr::copy(src, dst, n);
        }
        return;
    }
    let mut tmp = vec![0u8; stype.packed_size(scount)];
    stype.pack(src, scount, &mut tmp);
    dtype.unpack(&tmp[..n], dst, dcount);
}

/// How long a collective keeps waiting on live peers after a member of its communicator
/// failed, before it reports MPIX_ERR_PROC_FAILED (run-through mode).
pub(crate) const COLL_FAILURE_GRACE: std::time::Duration = std::time::Duration::from_millis(300);

impl Engine {
    /// Advance `s` as far as it goes without waiting. Returns true when it has finished.
    pub(crate) fn sched_advance(&mut self, s: &mut Schedule) -> MpiResult<bool> {
        loop {
            if s.slot.is_some() {
                return Ok(false);
            }
            if s.in_round {
                for h in &s.pending {
                    if !self.is_complete(*h)? {
                        return Ok(false);
                    }
                }
                // By index, then cleared: the vectors keep their capacity for the next round
                // (taking them freed and regrew both at every round of every call).
                for k in 0..s.pending.len().min(s.pending_step.len()) {
                    let (h, i) = (s.pending[k], s.pending_step[k]);
                    let st = match self.status(h) {
                        Ok(st) => st,
                        Err(e) => {
                            s.pending.clear();
                            s.pending_step.clear();
                            return Err(e);
                        }
                    };
                    self.release(h);
                    s.check_received(i, st.error, st.bytes);
                    match st.error {
                        Some(ErrorClass::ProcFailed) if s.tolerant && matches!(s.steps[i], Step::Recv { .. }) => {
                            s.missing.push(i);
                            // A failure the application already heard of on this
                            // communicator is excused; a new one is reported.
                            let Step::Recv { peer, .. } = s.steps[i] else { continue };
                            if !self.failure_reported(s.comm, peer) {
                                s.error.get_or_insert(ErrorClass::ProcFailed);
                            }
                        }
                        Some(e) => {
                            s.error.get_or_insert(e);
                        }
                        None => {}
                    }
                }
                s.pending.clear();
                s.pending_step.clear();
                if matches!(s.error, Some(ErrorClass::Revoked))
                    || (!s.tolerant && matches!(s.error, Some(ErrorClass::ProcFailed)))
                {
                    // Stop here: later rounds would let ranks downstream of the failure
                    // finish without it. They wait, learn of the failure, and fail too.
                    s.pc = s.steps.len();
                    s.in_round = false;
                    return Ok(true);
                }
                for i in s.pc..s.round_end {
                    match &s.steps[i] {
                        Step::Reduce { src, dst, count } => {
                            let red = s.red.as_ref().ok_or_else(|| MpiError::new(ErrorClass::Intern, "reduce step without an op"))?;
                            // SAFETY: the algorithm sized both buffers for `count` elements.
                            unsafe { red.apply(*src, *dst, *count) };
                        }
                        Step::Copy { src, scount, stype, dst, dcount, dtype } => {
                            // SAFETY: as above, for the types and counts recorded.
                            unsafe { typed_copy(*src, *scount, stype, *dst, *dcount, dtype) };
                        }
                        Step::OrderedReduce { parts, acc, dst, count } => {
                            let red = s.red.as_ref().ok_or_else(|| MpiError::new(ErrorClass::Intern, "reduce step without an op"))?;
                            let arrived: Vec<*const u8> = parts
                                .iter()
                                .filter(|(step, _)| step.is_none_or(|i| !s.missing.contains(&i)))
                                .map(|(_, b)| *b)
                                .collect();
                            if let Some((last, rest)) = arrived.split_last() {
                                let t = &red.dtype;
                                // SAFETY: every part and `acc` hold `count` elements of the
                                // reduction type; `acc = part op acc` from the right keeps the
                                // rank order for non-commutative operations.
                                unsafe {
                                    typed_copy(*last, *count, t, *acc, *count, t);
                                    for p in rest.iter().rev() {
                                        red.apply(*p, *acc, *count);
                                    }
                                    typed_copy(*acc, *count, t, *dst, *count, t);
                                }
                            }
                        }
                        _ => {}
                    }
                }
                s.in_round = false;
                s.pc = s.round_end + 1;
            }
            if s.pc >= s.steps.len() {
                return Ok(true);
            }
            let mut end = s.pc;
            while end < s.steps.len() && !matches!(s.steps[end], Step::Round) {
                end += 1;
            }
            s.round_end = end;
            s.in_round = true;
            let slot_ok = s.blocking && {
                let mut recvs = s.steps[s.pc..end].iter().filter(|st| matches!(st, Step::Recv { .. }));
                matches!((recvs.next(), recvs.next()), (Some(Step::Recv { dtype, .. }), None) if dtype.is_contiguous())
            };
            // Receives first, so arrivals find them posted. Messages that already arrived and
            // eager sends complete at once, without a request.
            for pass in 0..2 {
                for i in s.pc..end {
                    let h = match (&s.steps[i], pass) {
                        (Step::Recv { .. }, 0) if slot_ok => {
                            // Received by `sched_run` after the round's sends left.
                            s.slot = Some(i);
                            continue;
                        }
                        (Step::Recv { peer, local, sub, buf, count, dtype }, 0) => {
                            let tag = tag_of(s.tag_base, *local, *sub);
                            let mut bytes = 0;
                            match self.coll_recv_or_post(s.comm, *peer, tag, *buf, *count, dtype.clone(), &mut s.error, &mut bytes)? {
                                Some(h) => h,
                                None => {
                                    let e = s.error;
                                    s.check_received(i, e, bytes);
                                    continue;
                                }
                            }
                        }
                        (Step::Send { peer, local, sub, buf, count, dtype }, 1) => {
                            let tag = tag_of(s.tag_base, *local, *sub);
                            let count = if s.poisoned { 0 } else { *count };
                            if self.coll_send_now(s.comm, *peer, *local, tag, *buf, count, dtype)? {
                                continue;
                            }
                            self.set_single_copy_send(s.single_copy);
                            self.set_copy_sends(s.copy_sends);
                            let h = self.coll_isend_typed(s.comm, *peer, *local, tag, *buf, count, dtype.clone());
                            self.set_single_copy_send(SingleCopy::No);
                            self.set_copy_sends(false);
                            h?
                        }
                        _ => continue,
                    };
                    s.pending.push(h);
                    s.pending_step.push(i);
                }
            }
        }
    }

    /// Run `s` to completion (blocking collectives).
    pub(crate) fn sched_run(&mut self, s: &mut Schedule) -> MpiResult<()> {
        s.blocking = !s.tolerant && !self.run_through();
        loop {
            if self.sched_advance(s)? {
                break;
            }
            if let Some(i) = s.slot.take() {
                self.sched_slot_recv(s, i)?;
                continue;
            }
            let pending = &s.pending;
            let comm = s.comm;
            if s.tolerant {
                // Every receive ends with its message or its sender's failure.
                self.block_until(|e| pending.iter().all(|h| e.is_complete(*h).unwrap_or(true)) || e.comm_is_revoked(comm))?;
                if self.comm_is_revoked(comm) {
                    for h in s.pending.drain(..) {
                        let _ = self.cancel(h);
                        let _ = self.request_free(h);
                    }
                    s.pending_step.clear();
                    return Err(MpiError::new(ErrorClass::Revoked, "the communicator was revoked"));
                }
                continue;
            }
            self.block_until(|e| {
                pending.iter().all(|h| e.is_complete(*h).unwrap_or(true))
                    || e.comm_has_failed_member(comm)
                    || e.comm_is_revoked(comm)
            })?;
            if !self.comm_is_revoked(comm) && !s.pending.iter().all(|h| self.is_complete(*h).unwrap_or(true)) {
                // A member failed, but what we wait for may come from live peers that are
                // still fine (the dead rank may have done its part before dying): give them a
                // grace period. Receives from the dead rank itself already failed.
                let deadline = std::time::Instant::now() + COLL_FAILURE_GRACE;
                let pending = &s.pending;
                let tag = s.tag_base;
                self.block_until(|e| {
                    pending.iter().all(|h| e.is_complete(*h).unwrap_or(true))
                        || e.comm_is_revoked(comm)
                        || e.coll_aborted(comm, tag)
                        || std::time::Instant::now() >= deadline
                })?;
            }
            if !s.pending.iter().all(|h| self.is_complete(*h).unwrap_or(true)) {
                // A member failed or the communicator was revoked: give up on every survivor
                // rather than wait for messages that may never come.
                let revoked = self.comm_is_revoked(comm);
                for h in s.pending.drain(..) {
                    let _ = self.cancel(h);
                    let _ = self.request_free(h);
                }
                s.pending_step.clear();
                if !revoked {
                    self.coll_abort_notify(comm, s.tag_base);
                }
                return Err(if revoked {
                    MpiError::new(ErrorClass::Revoked, "the communicator was revoked")
                } else {
                    MpiError::new(ErrorClass::ProcFailed, "a member of the communicator failed")
                });
            }
        }
        if s.error == Some(ErrorClass::ProcFailed) && !s.tolerant {
            self.coll_abort_notify(s.comm, s.tag_base);
        }
        match s.error {
            Some(ErrorClass::Count) => Err(MpiError::new(
                ErrorClass::Count,
                "a message of the collective was shorter than this rank's count: the ranks' counts or type signatures differ",
            )),
            Some(ErrorClass::Truncate) => Err(MpiError::new(ErrorClass::Truncate, "message truncated: a receive buffer was smaller than the data sent")),
            Some(ErrorClass::ProcFailed) if s.tolerant => {
                Err(MpiError::new(ErrorClass::ProcFailed, "a member of the communicator failed; the result leaves out its contribution"))
            }
            Some(c) => Err(MpiError::new(c, "a transfer of the collective failed")),
            None => Ok(()),
        }
    }

    /// The round's only receive, step `i`, through the engine's receive slot (or as a posted
    /// request when the slot cannot take it).
    fn sched_slot_recv(&mut self, s: &mut Schedule, i: usize) -> MpiResult<()> {
        let Step::Recv { peer, local, sub, buf, count, dtype } = &s.steps[i] else {
            return Err(MpiError::new(ErrorClass::Intern, "slot step is not a receive"));
        };
        let tag = tag_of(s.tag_base, *local, *sub);
        let ctx = self.comm(s.comm)?.coll_ctx();
        let (buf, count, dtype, src) = (*buf, *count, dtype.clone(), *peer);
        // The round's receive steps are contiguous when the slot is used (sched_advance).
        match self.recv_slot(ctx, s.comm, buf, dtype.packed_size(count), src, tag)? {
            Some(st) => {
                if let Some(e) = st.error {
                    s.error.get_or_insert(e);
                }
                s.check_received(i, st.error, st.bytes);
            }
            None => {
                let h = self.coll_irecv_typed(s.comm, src, tag, buf, count, dtype)?;
                s.pending.push(h);
                s.pending_step.push(i);
            }
        }
        Ok(())
    }

    /// Abandon the requests of a schedule that failed part way.
    pub(crate) fn sched_abandon(&mut self, s: &mut Schedule) {
        for h in s.pending.drain(..) {
            let _ = self.request_free(h);
        }
        s.pending_step.clear();
    }

    /// Give up on a schedule whose peers failed or whose communicator was revoked: cancel
    /// its posted receives and free its requests.
    pub(crate) fn sched_give_up(&mut self, s: &mut Schedule) {
        for h in s.pending.drain(..) {
            let _ = self.cancel(h);
            let _ = self.request_free(h);
        }
        s.pending_step.clear();
    }
}

/// Tag of a collective message: the instance's base, the step's sub-code, the local bit.
pub(crate) fn tag_of(base: i32, local: bool, sub: u16) -> i32 {
    base | (sub as i32 & ((1 << SUB_BITS) - 1)) | if local { LOCAL_BIT } else { 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A recycled schedule must not send the next collective's messages for single-copy
    /// reads because the last one did (a 4-rank Gather of 256 KiB after a Reduce took
    /// 111-117 µs instead of 58-66).
    #[test]
    fn reset_forgets_the_last_collectives_single_copy() {
        let mut s = Schedule::default();
        s.single_copy = SingleCopy::Yes;
        s.local = true;
        s.reset(Handle(1), 7);
        assert_eq!(s.single_copy, SingleCopy::No);
        assert!(!s.local);
    }
}
