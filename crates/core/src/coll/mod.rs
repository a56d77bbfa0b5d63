//! Collective operations: blocking, nonblocking and persistent, over intra- and
//! intercommunicators.
//!
//! A call is described by a [`Coll`]; [`build`] turns it into a [`Schedule`] for this rank
//! (choosing the algorithm in `select`, the one place that decides), and the engine runs the
//! schedule: to the end for a blocking call, from `Engine::progress` for a nonblocking one.
//! A later fault-tolerant variant only has to produce different schedules.
//!
//! Each collective instance on a communicator gets the next value of a per-communicator
//! sequence number, which goes into the tags of its messages, so overlapping nonblocking
//! collectives never take each other's messages. Blocking and nonblocking (or persistent)
//! collectives are numbered apart, with a tag bit between them: a rank may start a
//! nonblocking collective, then enter a blocking one that another rank enters before it starts
//! its nonblocking one (mpi4py's agreement over MPI_Iallreduce does this), and each still
//! matches its own.

pub mod alltoall;
pub mod bcast;
pub mod channels;
pub(crate) mod multicast;
pub mod corrected;
pub mod gather;
pub mod inter;
pub mod reduce;
pub mod sched;
pub mod select;
mod shmseg;
mod slots;
mod small;
#[cfg(test)]
mod sim;

use std::collections::HashMap;
use std::sync::Arc;

use crate::datatype::TypeRef;
use crate::engine::Engine;
use crate::error::{ErrorClass, MpiError, MpiResult};
use crate::op::{Reduction, UserOp};
use crate::slab::{Handle, Slab};

pub use sched::{Schedule, Step};
pub use select::CollConfig;

/// Root argument of an intercommunicator collective in the root's group.
pub const ROOT: i32 = -4;

/// A buffer: address, element count and datatype.
#[derive(Debug, Clone)]
pub struct Buf {
    pub ptr: *mut u8,
    pub count: usize,
    pub dtype: TypeRef,
}

/// A buffer with one count and displacement (in elements) per rank.
#[derive(Debug, Clone)]
pub struct VBuf {
    pub ptr: *mut u8,
    pub counts: Vec<usize>,
    pub displs: Vec<isize>,
    pub dtype: TypeRef,
}

/// A buffer with one count, byte displacement and datatype per rank (Alltoallw).
#[derive(Debug, Clone)]
pub struct WBuf {
    pub ptr: *mut u8,
    pub counts: Vec<usize>,
    pub displs: Vec<isize>,
    pub dtypes: Vec<TypeRef>,
}

/// The arguments of a reduction: send buffer (None: MPI_IN_PLACE), receive buffer, count.
#[derive(Debug, Clone)]
pub struct RBuf {
    pub send: Option<*const u8>,
    pub recv: *mut u8,
    pub count: usize,
}

/// One collective call. A send side of `None` means MPI_IN_PLACE. Arguments that the
/// standard calls significant only at the root may hold anything elsewhere.
#[derive(Debug, Clone)]
pub enum Coll {
    Barrier,
    Bcast { buf: Buf, root: i32 },
    Gather { send: Option<Buf>, recv: Buf, root: i32 },
    Gatherv { send: Option<Buf>, recv: VBuf, root: i32 },
    Scatter { send: Buf, recv: Option<Buf>, root: i32 },
    Scatterv { send: VBuf, recv: Option<Buf>, root: i32 },
    Allgather { send: Option<Buf>, recv: Buf },
    Allgatherv { send: Option<Buf>, recv: VBuf },
    Alltoall { send: Option<Buf>, recv: Buf },
    Alltoallv { send: Option<VBuf>, recv: VBuf },
    Alltoallw { send: Option<WBuf>, recv: WBuf },
    Reduce { buf: RBuf, red: Reduction, root: i32 },
    Allreduce { buf: RBuf, red: Reduction },
    /// `counts` are the per-rank result counts; `buf.count` is unused.
    ReduceScatter { buf: RBuf, counts: Vec<usize>, red: Reduction },
    /// `buf.count` is the per-rank result count.
    ReduceScatterBlock { buf: RBuf, red: Reduction },
    Scan { buf: RBuf, red: Reduction },
    Exscan { buf: RBuf, red: Reduction },
    /// Neighborhood collective over a process topology: block `j` of `send` goes to
    /// out-neighbor `outs[j]`, block `j` of `recv` comes from in-neighbor `ins[j]`; each
    /// neighbor comes with its tag sub-code (built by `topo`).
    Neighbor { ins: Vec<(i32, u16)>, outs: Vec<(i32, u16)>, send: Vec<Buf>, recv: Vec<Buf> },
}

// SAFETY: the raw pointers are application buffers the application keeps valid while the
// collective runs; the engine is only used under one lock.
unsafe impl Send for Coll {}
unsafe impl Send for Buf {}
unsafe impl Send for VBuf {}
unsafe impl Send for WBuf {}
unsafe impl Send for RBuf {}

/// Where this rank stands in the communicator.
#[derive(Debug, Clone, Copy)]
pub struct Topo {
    pub rank: i32,
    pub size: i32,
    /// Size of the remote group for intercommunicators.
    pub remote: Option<i32>,
    /// Every rank of the communicator is on this host, which runs more ranks of the job than
    /// it has CPUs: the same on every rank of the communicator (one host, one count), so
    /// rules may depend on it. There a rank waiting for a CPU is the cost that matters, and
    /// algorithms that trade more data moved for parallel work lose (`select::reduce`).
    pub crowded: bool,
    /// `crowded`, and large blocks of this rank's sends may be read by their receivers with
    /// a fast single copy (`Engine::single_copy`, `SingleCopy::WhereFast`; measured once per
    /// process, so a rule may depend on it only where ranks that disagree still exchange
    /// the same messages).
    pub single_copy: bool,
}

/// A persistent collective: the call it repeats and its tag.
struct Persistent {
    comm: Handle,
    coll: Coll,
    tag_base: i32,
}

/// Collective state kept by the engine.
#[derive(Default)]
pub struct CollState {
    /// Next sequence number per communicator context id (blocking collectives).
    seqs: rustc_hash::FxHashMap<u32, u32>,
    /// The same for nonblocking and persistent collectives.
    nb_seqs: rustc_hash::FxHashMap<u32, u32>,
    /// Nonblocking collectives in progress, with their request.
    active: Vec<(Handle, Box<Schedule>)>,
    persistent: HashMap<Handle, Persistent>,
    /// Reusable schedules (keeps the small-message path free of allocation); boxed so
    /// handing one around moves a pointer.
    #[allow(clippy::vec_box)]
    pool: Vec<Box<Schedule>>,
    /// User-defined operations (MPI_Op handles).
    pub ops: Slab<Arc<UserOp>>,
    cfg: Option<CollConfig>,
    /// Corrected-tree broadcast state (run-through mode).
    corrected: corrected::CorrectedState,
    /// Shared-memory channel broadcast drivers (one host).
    pub(crate) channels: channels::ChannelsState,
    /// Slot-exchange drivers (small collectives of ranks sharing memory).
    pub(crate) slots: slots::SlotsState,
    /// Scratch buffers of the request-free small collectives (`small.rs`), kept between
    /// calls.
    pub(crate) small_scratch: Vec<Vec<u128>>,
    /// Communicators the application freed while operations on them were in progress, and
    /// progress rounds since [`Engine::release_deferred`] last looked at them.
    pub(crate) freed_later: Vec<Handle>,
    freed_rounds: u32,
}

impl CollState {
    /// Whether any nonblocking collective is in progress.
    #[inline]
    pub fn busy(&self) -> bool {
        !self.active.is_empty() || !self.slots.ops.is_empty() || !self.slots.setups.is_empty() || !self.channels.ops.is_empty() || !self.channels.waiting.is_empty() || !self.freed_later.is_empty()
    }
    /// Whether `h` is a persistent collective request.
    pub fn is_persistent(&self, h: Handle) -> bool {
        !self.persistent.is_empty() && self.persistent.contains_key(&h)
    }
    fn schedule(&mut self) -> Box<Schedule> {
        self.pool.pop().unwrap_or_default()
    }
    fn recycle(&mut self, s: Box<Schedule>) {
        if self.pool.len() < 4 {
            self.pool.push(s);
        }
    }
    /// Forget the sequence number of a freed communicator's context.
    pub fn forget_context(&mut self, ctx: u32) {
        self.seqs.remove(&ctx);
        self.nb_seqs.remove(&ctx);
        self.channels.forget(ctx);
        self.slots.forget(ctx);
        self.slots.forget(slots::nb_key(ctx));
    }
}

impl Engine {
    fn topo(&self, comm: Handle) -> MpiResult<(Topo, u32)> {
        let c = self.comm(comm)?;
        let crowded = c.remote.is_none() && self.crowded_host(&c.group);
        // Asked only of crowded communicators: elsewhere no rule uses it, and the first
        // answer costs a measurement.
        let single_copy = crowded && self.single_copy_usable(crate::coll::sched::SingleCopy::WhereFast);
        Ok((Topo { rank: c.rank, size: c.size(), remote: c.remote.as_ref().map(|r| r.len() as i32), crowded, single_copy }, c.ctx))
    }

    /// Whether the world ranks `group` are all on this host and it runs more ranks of the
    /// job than it has CPUs online (the host's count, not this process's affinity, so every
    /// rank of the host agrees).
    fn crowded_host(&self, group: &Arc<Vec<u32>>) -> bool {
        self.host_crowded() && self.group_on_host(group)
    }

    /// Whether this host runs more ranks of the job than it has CPUs online (one flag: no
    /// walk of a group).
    fn host_crowded(&self) -> bool {
        self.coll.channels.host.as_ref().is_some_and(|h| h.crowded)
    }

    /// The world rank every open request of nonblocking collective `h`'s current round
    /// waits for, if it is one (see `peer_spin`).
    pub(crate) fn coll_awaited(&self, h: Handle) -> Option<u32> {
        let (_, s) = self.coll.active.iter().find(|(a, _)| *a == h)?;
        self.requests_awaited(s.pending().iter().copied())
    }

    /// Tag base of the next blocking collective on `comm`.
    fn next_tag(&mut self, ctx: u32) -> i32 {
        let seq = self.coll.seqs.entry(ctx).or_insert(0);
        let t = ((*seq & sched::SEQ_MASK) as i32) << sched::SUB_BITS;
        *seq = seq.wrapping_add(1);
        t
    }

    /// Tag base of the next nonblocking or persistent collective on `comm`.
    fn next_nb_tag(&mut self, ctx: u32) -> i32 {
        let seq = self.coll.nb_seqs.entry(ctx).or_insert(0);
        let t = ((*seq & sched::SEQ_MASK) as i32) << sched::SUB_BITS;
        *seq = seq.wrapping_add(1);
        t | sched::NONBLOCKING_BIT
    }

    fn prepare(&mut self, comm: Handle, c: &Coll, tag: Option<i32>) -> MpiResult<Box<Schedule>> {
        let (topo, ctx) = self.topo(comm)?;
        if self.comm_is_revoked(comm) {
            return Err(bad(ErrorClass::Revoked, "the communicator was revoked"));
        }
        let tag = match tag {
            Some(t) => t,
            None => self.next_tag(ctx),
        };
        let mut s = self.coll.schedule();
        s.reset(comm, tag);
        let run_through = self.run_through();
        let cfg = self.coll.cfg.get_or_insert_with(CollConfig::from_env);
        let built = match c {
            // Run-through mode: contributions go straight to the root, so a failed contributor
            // costs only its own part (see docs/ulfm.md).
            Coll::Reduce { buf, red, root } if run_through && topo.remote.is_none() => {
                if (0..topo.size).contains(root) {
                    s.red = Some(red.clone());
                    reduce::linear_tolerant(&mut s, topo.rank, topo.size, *root, buf, red);
                    Ok(())
                } else {
                    Err(bad(ErrorClass::Root, format!("root {root} is not a rank of the communicator (size {})", topo.size)))
                }
            }
            _ => build(&mut s, topo, c, cfg),
        };
        if let Err(e) = built {
            self.coll.recycle(s);
            return Err(e);
        }
        Ok(s)
    }

    /// Run collective `c` on `comm` to completion.
    pub fn coll(&mut self, comm: Handle, c: &Coll) -> MpiResult<()> {
        if let Coll::Bcast { buf, root } = c {
            if self.use_corrected_bcast(comm, buf.dtype.packed_size(buf.count)) {
                if self.comm_is_revoked(comm) {
                    return Err(bad(ErrorClass::Revoked, "the communicator was revoked"));
                }
                return self.bcast_corrected(comm, buf, *root);
            }
        }
        if self.coll_slots(comm, c)? {
            return Ok(());
        }
        let small = match c {
            Coll::Bcast { buf, root } => self.bcast_channels(comm, buf, *root)? || self.bcast_small(comm, buf, *root)?,
            Coll::Allreduce { buf, red } => self.allreduce_small(comm, buf, red)?,
            Coll::Scan { buf, red } => self.scan_small(comm, buf, red, false)?,
            Coll::Scatter { send, recv, root } => self.scatter_small(comm, send, recv.as_ref(), *root)?,
            Coll::Gather { send, recv, root } => self.gather_small(comm, send.as_ref(), recv, *root)?,
            Coll::Reduce { buf, red, root } => self.reduce_small(comm, buf, red, *root)?,
            Coll::Exscan { buf, red } => self.scan_small(comm, buf, red, true)?,
            _ => false,
        };
        if small {
            return Ok(());
        }
        let mut s = self.prepare(comm, c, None)?;
        let r = self.sched_run(&mut s);
        if r.is_err() {
            self.sched_abandon(&mut s);
        }
        self.coll_forget_abort(comm, s.tag_base);
        self.coll.recycle(s);
        r
    }

    /// Start nonblocking collective `c` on `comm`; returns its request.
    pub fn icoll(&mut self, comm: Handle, c: Coll) -> MpiResult<Handle> {
        let ctx = self.comm(comm)?.ctx;
        let tag = self.next_nb_tag(ctx);
        // MPI_Ibcast takes the channels wherever the rule picks them, as MPI_Bcast does: the
        // root's request completes once its frame is in the slot. Every rank decides alike
        // (the rule sees only the size and the communicator), and the channels number
        // their broadcasts in call order, which MPI makes the same on every rank for
        // blocking and nonblocking collectives together. The tag stays reserved for the
        // messages should the communicator's first one find no segment.
        if let Coll::Bcast { buf, root } = &c {
            if let Some(h) = self.ichannel(comm, &c, Some(tag))? {
                return Ok(h);
            }
            if let Some(h) = self.ibcast_small(comm, buf, *root, tag)? {
                return Ok(h);
            }
        }
        // MPI_Iallreduce through the slots where MPI_Allreduce takes them, on the
        // communicator's second exchange (`slots::nb_key`).
        if matches!(c, Coll::Allreduce { .. }) {
            if let Some(h) = self.islot_nb(comm, &c, tag)? {
                return Ok(h);
            }
        }
        let s = self.prepare(comm, &c, Some(tag))?;
        let h = self.coll_request(false);
        self.coll_launch(h, s)?;
        Ok(h)
    }

    /// Start blocking collective `c` on `comm` as a request the caller waits for (numbered
    /// with the blocking collectives; for callers that wait with the library lock released).
    pub fn icoll_blocking(&mut self, comm: Handle, c: Coll) -> MpiResult<Handle> {
        let s = self.prepare(comm, &c, None)?;
        let h = self.coll_request(false);
        self.coll_launch(h, s)?;
        Ok(h)
    }

    /// An application's blocking collective `c` on `comm` as a request the caller waits for
    /// with the library lock released: [`Engine::icoll_blocking`], or the slot exchange or
    /// the channel broadcast where the rule picks it — as [`Engine::coll`] does for a rank
    /// that waits with the lock held (another thread level), so both meet in the same
    /// exchange or broadcast. (The library's own
    /// collectives inside other calls keep `icoll_blocking`: they must match the engine's
    /// message-based helpers.)
    pub fn icoll_blocking_user(&mut self, comm: Handle, c: Coll) -> MpiResult<Handle> {
        if let Some(h) = self.islot(comm, &c)? {
            return Ok(h);
        }
        if let Some(h) = self.ichannel(comm, &c, None)? {
            return Ok(h);
        }
        self.icoll_blocking(comm, c)
    }

    /// Create a persistent collective request for `c` on `comm` (MPI_X_init).
    pub fn coll_init(&mut self, comm: Handle, c: Coll) -> MpiResult<Handle> {
        let (_, ctx) = self.topo(comm)?;
        // Build once now so argument errors show at init time.
        let tag_base = self.next_nb_tag(ctx);
        let s = self.prepare(comm, &c, Some(tag_base))?;
        self.coll.recycle(s);
        let h = self.coll_request(true);
        self.coll.persistent.insert(h, Persistent { comm, coll: c, tag_base });
        Ok(h)
    }

    /// MPI_Start of a persistent collective request.
    pub(crate) fn coll_start_persistent(&mut self, h: Handle) -> MpiResult<()> {
        let p = self.coll.persistent.get(&h).ok_or_else(|| MpiError::new(ErrorClass::Request, "not a collective request"))?;
        let (comm, coll, tag) = (p.comm, p.coll.clone(), p.tag_base);
        if self.coll.active.iter().any(|(a, _)| *a == h) {
            return Err(MpiError::new(ErrorClass::Request, "the persistent collective is still active"));
        }
        let s = self.prepare(comm, &coll, Some(tag))?;
        self.coll_request_activate(h);
        self.coll_launch(h, s)
    }

    /// Drop the description of a freed persistent collective request.
    pub(crate) fn coll_forget_request(&mut self, h: Handle) {
        self.coll.persistent.remove(&h);
    }

    fn coll_launch(&mut self, h: Handle, mut s: Box<Schedule>) -> MpiResult<()> {
        match self.sched_advance(&mut s) {
            Ok(true) => {
                let err = s.error();
                self.coll.recycle(s);
                self.coll_request_done(h, err);
                Ok(())
            }
            Ok(false) => {
                self.coll.active.push((h, s));
                Ok(())
            }
            Err(e) => {
                self.sched_abandon(&mut s);
                self.coll.recycle(s);
                self.coll_request_done(h, Some(e.class));
                Err(e)
            }
        }
    }

    /// Advance every nonblocking collective (called from `progress`). Returns whether any
    /// finished.
    pub(crate) fn coll_progress(&mut self) -> bool {
        // The shared-segment collectives started as requests: slot calls and their
        // agreements, channel broadcasts.
        let segment_done = !(self.coll.slots.ops.is_empty() && self.coll.slots.setups.is_empty()) && self.slots_progress();
        let segment_done = self.channel_ops_progress() | segment_done;
        let mut active = std::mem::take(&mut self.coll.active);
        let mut finished = false;
        let mut i = 0;
        while i < active.len() {
            let (h, s) = &mut active[i];
            let h = *h;
            let done = match self.sched_advance(s) {
                Ok(true) => {
                    if s.error() == Some(ErrorClass::ProcFailed) && !s.tolerant {
                        self.coll_abort_notify(s.comm, s.tag_base);
                    }
                    Some(s.error())
                }
                Ok(false) if self.comm_is_revoked(s.comm) => {
                    self.sched_give_up(s);
                    Some(Some(ErrorClass::Revoked))
                }
                Ok(false) if !s.tolerant && self.comm_has_failed_member(s.comm) => {
                    // As for blocking collectives: live peers get a grace period, then the
                    // collective fails instead of waiting for messages that may never come.
                    let seen = *s.failure_seen.get_or_insert_with(std::time::Instant::now);
                    if seen.elapsed() >= sched::COLL_FAILURE_GRACE || self.coll_aborted(s.comm, s.tag_base) {
                        self.sched_give_up(s);
                        self.coll_abort_notify(s.comm, s.tag_base);
                        Some(Some(ErrorClass::ProcFailed))
                    } else {
                        None
                    }
                }
                Ok(false) => None,
                Err(e) => {
                    tracing::warn!("nonblocking collective failed: {e}");
                    self.sched_abandon(s);
                    Some(Some(e.class))
                }
            };
            if let Some(err) = done {
                let (_, s) = active.swap_remove(i);
                self.coll_forget_abort(s.comm, s.tag_base);
                self.coll.recycle(s);
                self.coll_request_done(h, err);
                finished = true;
            } else {
                i += 1;
            }
        }
        // Collectives started while we advanced (none today) go after the old ones.
        active.append(&mut self.coll.active);
        self.coll.active = active;
        if !self.coll.freed_later.is_empty() {
            self.coll.freed_rounds += 1;
            if finished || segment_done || self.coll.freed_rounds.is_multiple_of(64) {
                self.release_deferred();
            }
        }
        finished || segment_done
    }

    /// Whether operations in progress use communicator `c`: nonblocking collectives (their
    /// schedules, channel broadcasts, slot calls, segment agreements) and point-to-point
    /// requests not yet complete.
    pub(crate) fn comm_in_use(&self, c: Handle) -> bool {
        let Ok(comm) = self.comm(c) else { return false };
        let ctx = comm.ctx;
        let coll = &self.coll;
        coll.active.iter().any(|(_, s)| s.comm == c)
            || coll.channels.ops.iter().any(|op| op.ctx == ctx)
            || coll.channels.waiting.iter().any(|w| w.comm == c)
            || self.setup_running(c)
            || self.slot_ops_on(c)
            || self.nb_waiting_on(c)
            || self.requests_on(c)
    }

    /// Free the communicators of `freed_later` whose operations have all completed and whose
    /// channel driver no rank needs any more ([`Engine::channel_retiring`]).
    pub(crate) fn release_deferred(&mut self) {
        let pending = std::mem::take(&mut self.coll.freed_later);
        for c in pending {
            if self.comm_in_use(c) || self.channel_retiring(c) {
                self.coll.freed_later.push(c);
            } else if let Err(e) = self.release_comm_now(c) {
                tracing::warn!("freeing a communicator after its last operation: {e}");
            }
        }
    }

    /// MPI_Barrier.
    pub fn barrier(&mut self, c: Handle) -> MpiResult<()> {
        self.coll(c, &Coll::Barrier)
    }
}

fn bad(class: ErrorClass, msg: impl Into<String>) -> MpiError {
    MpiError::new(class, msg)
}

/// Write this rank's part of collective `c` into `s`.
/// A uniform collective's send block must hold what a receive block holds (the same type
/// signature on both sides); where this rank's differ, its schedule refuses the call.
fn refuse_unequal(s: &mut Schedule, send: Option<&Buf>, block: usize) {
    if let Some(sb) = send {
        let sent = sb.dtype.packed_size(sb.count);
        if sent != block {
            s.refuse(if sent > block { ErrorClass::Truncate } else { ErrorClass::Count });
        }
    }
}

pub fn build(s: &mut Schedule, t: Topo, c: &Coll, cfg: &CollConfig) -> MpiResult<()> {
    if t.remote.is_some() {
        return inter::build(s, t, c, cfg);
    }
    let (rank, size) = (t.rank, t.size);
    let check_root = |root: i32| {
        if (0..size).contains(&root) {
            Ok(())
        } else {
            Err(bad(ErrorClass::Root, format!("root {root} is not a rank of the communicator (size {size})")))
        }
    };
    match c {
        Coll::Barrier => bcast::barrier(s, rank, size, cfg),
        Coll::Bcast { buf, root } => {
            check_root(*root)?;
            bcast::bcast(s, rank, size, *root, buf, cfg, t.crowded)
        }
        Coll::Gather { send, recv, root } => {
            check_root(*root)?;
            let v = uniform(recv, size);
            gather::gatherv(s, rank, size, *root, send.as_ref(), &v, t.crowded)
        }
        Coll::Gatherv { send, recv, root } => {
            check_root(*root)?;
            check_v(recv, size, rank == *root)?;
            gather::gatherv(s, rank, size, *root, send.as_ref(), recv, t.crowded)
        }
        Coll::Scatter { send, recv, root } => {
            check_root(*root)?;
            let v = uniform(send, size);
            gather::scatterv(s, rank, size, *root, &v, recv.as_ref(), select::scatter_single_copy(t.crowded))
        }
        Coll::Scatterv { send, recv, root } => {
            check_root(*root)?;
            check_v(send, size, rank == *root)?;
            gather::scatterv(s, rank, size, *root, send, recv.as_ref(), select::scatter_single_copy(t.crowded))
        }
        Coll::Allgather { send, recv } => {
            refuse_unequal(s, send.as_ref(), recv.dtype.packed_size(recv.count));
            gather::allgather(s, rank, size, send.as_ref(), recv, cfg)
        }
        Coll::Allgatherv { send, recv } => {
            check_v(recv, size, true)?;
            gather::allgatherv(s, rank, size, send.as_ref(), recv)
        }
        Coll::Alltoall { send, recv } => {
            refuse_unequal(s, send.as_ref(), recv.dtype.packed_size(recv.count));
            alltoall::alltoall(s, rank, size, send.as_ref(), recv, cfg, t.crowded, t.single_copy)
        }
        Coll::Alltoallv { send, recv } => {
            check_v(recv, size, true)?;
            if let Some(sv) = send {
                check_v(sv, size, true)?;
            }
            alltoall::alltoallv(s, rank, size, send.as_ref(), recv, cfg, None)
        }
        Coll::Alltoallw { send, recv } => {
            check_w(recv, size)?;
            if let Some(sw) = send {
                check_w(sw, size)?;
            }
            alltoall::alltoallw(s, rank, size, send.as_ref(), recv, cfg)
        }
        Coll::Reduce { buf, red, root } => {
            check_root(*root)?;
            s.red = Some(red.clone());
            reduce::reduce(s, rank, size, *root, buf, red, cfg, t.crowded, t.single_copy)
        }
        Coll::Allreduce { buf, red } => {
            s.red = Some(red.clone());
            reduce::allreduce(s, rank, size, buf, red, cfg)
        }
        Coll::ReduceScatter { buf, counts, red } => {
            if counts.len() != size as usize {
                return Err(bad(ErrorClass::Count, "recvcounts must have one entry per rank"));
            }
            s.red = Some(red.clone());
            reduce::reduce_scatter(s, rank, size, buf, counts, red, cfg)
        }
        Coll::ReduceScatterBlock { buf, red } => {
            s.red = Some(red.clone());
            let counts = vec![buf.count; size as usize];
            reduce::reduce_scatter(s, rank, size, buf, &counts, red, cfg)
        }
        Coll::Scan { buf, red } => {
            s.red = Some(red.clone());
            reduce::scan(s, rank, size, buf, red, false, cfg, t.crowded)
        }
        Coll::Exscan { buf, red } => {
            s.red = Some(red.clone());
            reduce::scan(s, rank, size, buf, red, true, cfg, t.crowded)
        }
        Coll::Neighbor { ins, outs, send, recv } => crate::topo::neighbor_schedule(s, ins, outs, send, recv),
    }
}

/// The v-form of a uniform buffer: `b.count` elements per rank, packed back to back.
pub(crate) fn uniform(b: &Buf, size: i32) -> VBuf {
    let n = size.max(0) as usize;
    VBuf {
        ptr: b.ptr,
        counts: vec![b.count; n],
        displs: (0..n).map(|i| (i * b.count) as isize).collect(),
        dtype: b.dtype.clone(),
    }
}

fn check_v(v: &VBuf, size: i32, significant: bool) -> MpiResult<()> {
    if significant && (v.counts.len() != size as usize || v.displs.len() != size as usize) {
        return Err(bad(ErrorClass::Arg, "count and displacement arrays need one entry per rank"));
    }
    Ok(())
}

fn check_w(w: &WBuf, size: i32) -> MpiResult<()> {
    let n = size as usize;
    if w.counts.len() != n || w.displs.len() != n || w.dtypes.len() != n {
        return Err(bad(ErrorClass::Arg, "count, displacement and type arrays need one entry per rank"));
    }
    Ok(())
}

/// Largest power of two not above `n` (n ≥ 1).
pub(crate) fn pof2_floor(n: i32) -> i32 {
    let mut p = 1;
    while p * 2 <= n {
        p *= 2;
    }
    p
}

/// The MPI_BYTE datatype used for packed data.
#[inline]
pub fn byte_type() -> TypeRef {
    // Made once and kept: copying it into a request is a pointer copy.
    static BYTE: std::sync::LazyLock<TypeRef> = std::sync::LazyLock::new(|| {
        TypeRef::forever(crate::datatype::Datatype::predefined(
            "MPI_BYTE", 1, 1, crate::datatype::BasicKind::Opaque,
            vec![crate::datatype::Block { off: 0, len: 1 }]))
    });
    BYTE.clone()
}

/// CPUs online on this host (the same for every process on it, whatever its affinity).
pub(crate) fn host_cpus() -> usize {
    steadfast_runtime::binding::host_cpus()
}
