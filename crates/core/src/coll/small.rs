//! Small blocking broadcasts, allreduces, reduces, scans, scatters and gathers without a
//! schedule.
//!
//! For a few bytes the cost of a collective is instructions, and with more ranks than cores
//! every rank's instructions add up on the shared CPUs. Building a [`Schedule`](super::sched)
//! (steps, temporaries, requests) costs several times what the messages do, so the blocking
//! calls below run the *same* algorithms the schedules encode — the binomial tree of
//! [`super::bcast::binomial`] (or [`super::bcast::linear`] on a crowded host), the
//! recursive doubling of
//! [`super::reduce::recursive_doubling`] and [`super::reduce::scan`], with the same tags, peers, message order and
//! reduction order — directly over the request-free primitives: eager sends straight to the
//! path and the engine's receive slot. Wire traffic is identical, so a rank on this path and
//! a rank on the schedule path (a different eager limit on another host) still match.
//!
//! They apply outside run-through mode, on intracommunicators, for contiguous buffers up to
//! the eager limit, and only where the selection rule picks these algorithms (Reduce only
//! where it is linear; Scatter and Gather are always linear, [`super::gather::scatterv`]
//! and [`super::gather::gatherv`]); otherwise the caller builds the schedule as before.

use super::reduce::{SUB_FINAL, SUB_FOLD};
use super::sched::tag_of;
use super::{pof2_floor, select, Buf, CollConfig, RBuf};
use crate::datatype::TypeRef;
use crate::engine::Engine;
use crate::error::{ErrorClass, MpiError, MpiResult};
use crate::op::Reduction;
use crate::slab::Handle;

/// Scratch buffers kept between small collectives, and the largest one kept.
const SCRATCH_KEPT: usize = 2;
const SCRATCH_MAX_BYTES: usize = 1 << 20;

impl Engine {
    /// Where the small path applies: the communicator's rank and size, its point-to-point
    /// context (which numbers its collectives) and its collective context.
    fn small_coll_target(&mut self, comm: Handle, dtype: &TypeRef, count: usize) -> Option<(i32, i32, u32, u32)> {
        if self.fast_paths_off() || !dtype.is_contiguous() || dtype.packed_size(count) > self.eager_limit() {
            return None;
        }
        let c = self.comm(comm).ok()?;
        if c.remote.is_some() || c.size() < 2 {
            return None;
        }
        Some((c.rank, c.size(), c.ctx, c.coll_ctx()))
    }

    /// A scratch buffer of at least `words` 16-byte words (aligned for any element type) for
    /// one call, holding whatever an earlier call left: every use writes a block before it
    /// reads it. Given back with [`Engine::small_scratch_put`]. A fresh zeroed buffer per
    /// call cost more than the call's messages: on 2 ranks, calloc and memset took half of
    /// a 1 KiB MPI_Scan's instructions.
    fn small_scratch(&mut self, words: usize) -> Vec<u128> {
        let mut v = self.coll.small_scratch.pop().unwrap_or_default();
        if v.len() < words {
            v.resize(words, 0);
        }
        v
    }

    /// Keep `v` for the next call (a few, and none of more than 1 MiB).
    fn small_scratch_put(&mut self, v: Vec<u128>) {
        if self.coll.small_scratch.len() < SCRATCH_KEPT && v.len() * 16 <= SCRATCH_MAX_BYTES {
            self.coll.small_scratch.push(v);
        }
    }

    fn small_cfg(&mut self) -> &CollConfig {
        self.coll.cfg.get_or_insert_with(CollConfig::from_env)
    }

    /// MPI_Bcast of a small buffer over the binomial tree, or linear on a crowded host;
    /// false if the general path must run.
    pub(crate) fn bcast_small(&mut self, comm: Handle, b: &Buf, root: i32) -> MpiResult<bool> {
        let Some((rank, size, pctx, ctx)) = self.small_coll_target(comm, &b.dtype, b.count) else { return Ok(false) };
        let bytes = b.dtype.packed_size(b.count);
        if bytes == 0 || !(0..size).contains(&root) {
            return Ok(false);
        }
        // Whether the group is on one crowded host walks the group: only asked where it
        // can change the choice (a crowded host, or a broadcast long enough to scatter).
        let mut algo = select::bcast(self.small_cfg(), size, bytes, false);
        if algo != select::Bcast::Binomial || self.host_crowded() && size as usize <= self.small_cfg().bcast_linear {
            let crowded = self.topo(comm)?.0.crowded;
            algo = select::bcast(self.small_cfg(), size, bytes, crowded);
        }
        if algo == select::Bcast::ScatterAllgather {
            return Ok(false);
        }
        // Numbered only once this path runs the call (the general path numbers it otherwise).
        let tag = tag_of(self.next_tag(pctx), false, 0);
        let mut mismatch = None;
        if algo == select::Bcast::Linear {
            // As [`super::bcast::linear`]: the root sends to root + 1, root + 2, ….
            if rank == root {
                let mut pending = Vec::new();
                for i in 1..size {
                    self.small_send(comm, (root + i) % size, tag, b.ptr, b.count, &b.dtype, &mut pending, &None)?;
                }
                self.small_wait_all(pending)?;
            } else {
                self.small_recv(comm, ctx, root, tag, b.ptr, b.count, &b.dtype, &mut mismatch)?;
            }
            return mismatch.map_or(Ok(true), Err);
        }
        let vr = (rank - root + size) % size;
        let mut mask = 1;
        // A truncated or short receive (this rank's count differs from the root's: an
        // erroneous call) is reported after this rank passed an empty message on, so its
        // subtree, which would otherwise wait forever or take part of a message for the
        // whole, fails too (as the schedule's `exact` mode does).
        while mask < size {
            if vr & mask != 0 {
                self.small_recv(comm, ctx, (rank - mask + size) % size, tag, b.ptr, b.count, &b.dtype, &mut mismatch)?;
                break;
            }
            mask <<= 1;
        }
        mask >>= 1;
        let mut pending = Vec::new();
        while mask > 0 {
            if vr + mask < size {
                self.small_send(comm, (rank + mask) % size, tag, b.ptr, b.count, &b.dtype, &mut pending, &mismatch)?;
            }
            mask >>= 1;
        }
        self.small_wait_all(pending)?;
        mismatch.map_or(Ok(true), Err)
    }

    /// MPI_Ibcast of a small contiguous buffer where the rule picks the linear broadcast (a
    /// crowded host; on two ranks the binomial tree is the same): without a schedule, as
    /// [`Engine::bcast_small`] runs MPI_Bcast. The root sends to every rank at once (eager
    /// sends leave or queue without a request) and returns a completed request; any other
    /// rank's request is its one receive ([`crate::request::RecvState::coll`]). Same tags,
    /// peers and messages as [`super::bcast::linear`] under `tag`, so ranks that build the
    /// schedule still match. None if the general path must run.
    pub(crate) fn ibcast_small(&mut self, comm: Handle, b: &Buf, root: i32, tag: i32) -> MpiResult<Option<Handle>> {
        if self.coordinated() {
            return Ok(None);
        }
        let Some((rank, size, _, _)) = self.small_coll_target(comm, &b.dtype, b.count) else { return Ok(None) };
        let bytes = b.dtype.packed_size(b.count);
        if bytes == 0 || !(0..size).contains(&root) {
            return Ok(None);
        }
        if size > 2 {
            if !(self.host_crowded() && size as usize <= self.small_cfg().bcast_linear) {
                return Ok(None);
            }
            let crowded = self.topo(comm)?.0.crowded;
            if select::bcast(self.small_cfg(), size, bytes, crowded) != select::Bcast::Linear {
                return Ok(None);
            }
        }
        let tag = tag_of(tag, false, 0);
        if rank == root {
            let mut rest = Vec::new();
            for i in 1..size {
                let peer = (root + i) % size;
                if !rest.is_empty() || !self.coll_send_now(comm, peer, false, tag, b.ptr, b.count, &b.dtype)? {
                    rest.push(peer);
                }
            }
            let h = self.coll_request(false);
            if rest.is_empty() {
                self.coll_request_done(h, None);
                return Ok(Some(h));
            }
            // Not reached while the buffer is contiguous and within the eager limit; should
            // a send need a request after all, the rest go through a schedule.
            let mut s = self.coll.schedule();
            s.reset(comm, tag);
            for peer in rest {
                s.send(peer, 0, b.ptr, b.count, &b.dtype);
            }
            s.round();
            self.coll_launch(h, s)?;
            return Ok(Some(h));
        }
        let (mut error, mut received) = (None, 0);
        match self.coll_recv_or_post(comm, root, tag, b.ptr, b.count, b.dtype.clone(), &mut error, &mut received)? {
            Some(h) => {
                self.coll_recv_request(h);
                Ok(Some(h))
            }
            None => {
                // It had arrived and is copied: a completed request.
                let h = self.coll_request(false);
                let short = error.is_none() && received < bytes as u64;
                self.coll_request_done(h, error.or(short.then_some(ErrorClass::Count)));
                Ok(Some(h))
            }
        }
    }

    /// Where a small linear Scatter or Gather applies: this rank's messages go from or to
    /// `at_root` at the root, which copies its own block to or from `local` (None: in
    /// place), and from or to `elsewhere` at the other ranks (None there is an error the
    /// general path reports). Returns this rank's buffer, the rank, the size, the two
    /// contexts and the bytes of one block.
    #[allow(clippy::type_complexity)]
    fn linear_small_target<'a>(&mut self, comm: Handle, root: i32, at_root: &'a Buf, local: Option<&Buf>, elsewhere: Option<&'a Buf>) -> Option<(&'a Buf, i32, i32, u32, u32, usize)> {
        let is_root = self.comm(comm).ok()?.rank == root;
        let mine = if is_root { at_root } else { elsewhere? };
        let (rank, size, pctx, ctx) = self.small_coll_target(comm, &mine.dtype, mine.count)?;
        let bytes = mine.dtype.packed_size(mine.count);
        if bytes == 0 || !(0..size).contains(&root) {
            return None;
        }
        // The root's own block: a plain copy, or the schedule's typed one.
        if is_root && local.is_some_and(|l| !l.dtype.is_contiguous() || l.dtype.packed_size(l.count) != bytes) {
            return None;
        }
        Some((mine, rank, size, pctx, ctx, bytes))
    }

    /// MPI_Scatter of small contiguous blocks, linear as [`super::gather::scatterv`] (one
    /// message from the root to every other rank, the same tag); false if the general path
    /// must run.
    pub(crate) fn scatter_small(&mut self, comm: Handle, send: &Buf, recv: Option<&Buf>, root: i32) -> MpiResult<bool> {
        let Some((mine, rank, size, pctx, ctx, bytes)) = self.linear_small_target(comm, root, send, recv, recv) else { return Ok(false) };
        let tag = tag_of(self.next_tag(pctx), false, 0);
        let mut mismatch = None;
        if rank == root {
            let mut pending = Vec::new();
            for i in (0..size).filter(|&i| i != root) {
                // Block `i` of the root's buffer: `count` contiguous elements per rank.
                let block = send.ptr.wrapping_add(i as usize * bytes);
                self.small_send(comm, i, tag, block, send.count, &send.dtype, &mut pending, &mismatch)?;
            }
            if let Some(r) = recv {
                // SAFETY: the root's block and its receive buffer hold `bytes` bytes each (checked
                // above); they may overlap only if the application passed aliased buffers.
                unsafe { std::ptr::copy(send.ptr.add(root as usize * bytes), r.ptr, bytes) };
            }
            self.small_wait_all(pending)?;
        } else {
            self.small_recv(comm, ctx, root, tag, mine.ptr, mine.count, &mine.dtype, &mut mismatch)?;
        }
        mismatch.map_or(Ok(true), Err)
    }

    /// MPI_Gather of small contiguous blocks, linear as [`super::gather::gatherv`] (one
    /// message from every other rank to the root, the same tag); false if the general path
    /// must run.
    pub(crate) fn gather_small(&mut self, comm: Handle, send: Option<&Buf>, recv: &Buf, root: i32) -> MpiResult<bool> {
        let Some((mine, rank, size, pctx, ctx, bytes)) = self.linear_small_target(comm, root, recv, send, send) else { return Ok(false) };
        let tag = tag_of(self.next_tag(pctx), false, 0);
        let mut mismatch = None;
        if rank == root {
            if let Some(s) = send {
                // SAFETY: the root's send buffer and its block of the receive buffer hold
                // `bytes` bytes each (checked above).
                unsafe { std::ptr::copy(s.ptr, recv.ptr.add(root as usize * bytes), bytes) };
            }
            for i in (0..size).filter(|&i| i != root) {
                let block = recv.ptr.wrapping_add(i as usize * bytes);
                self.small_recv(comm, ctx, i, tag, block, recv.count, &recv.dtype, &mut mismatch)?;
            }
        } else {
            let mut pending = Vec::new();
            self.small_send(comm, root, tag, mine.ptr, mine.count, &mine.dtype, &mut pending, &mismatch)?;
            self.small_wait_all(pending)?;
        }
        mismatch.map_or(Ok(true), Err)
    }

    /// MPI_Reduce of a small vector, linear as [`super::reduce::linear`] (every other rank
    /// sends its vector to the root, which reduces them in rank order: `v_i op acc` from the
    /// highest rank down); false if the general path must run.
    pub(crate) fn reduce_small(&mut self, comm: Handle, b: &RBuf, red: &Reduction, root: i32) -> MpiResult<bool> {
        let t = &red.dtype;
        let count = b.count;
        let Some((rank, size, pctx, ctx)) = self.small_coll_target(comm, t, count) else { return Ok(false) };
        let bytes = t.packed_size(count);
        if count == 0 || !(0..size).contains(&root) {
            return Ok(false);
        }
        // The rule looks at whether the host is crowded only for vectors long enough to split.
        let crowded = self.topo(comm)?.0.crowded;
        if select::reduce(self.small_cfg(), size, count, bytes, red.commutative(), crowded) != select::Reduce::Linear {
            return Ok(false);
        }
        let tag = tag_of(self.next_tag(pctx), false, 0);
        let mine: *const u8 = b.send.unwrap_or(b.recv);
        let mut mismatch = None;
        if rank != root {
            let mut pending = Vec::new();
            self.small_send(comm, root, tag, mine, count, t, &mut pending, &mismatch)?;
            self.small_wait_all(pending)?;
            return mismatch.map_or(Ok(true), Err);
        }
        // Every rank's vector in a block of its own (the root's too: in place, the result
        // overwrites it), aligned for any element type.
        let stride = bytes.div_ceil(16) * 16;
        let mut parts = self.small_scratch(size as usize * stride / 16);
        let base = parts.as_mut_ptr().cast::<u8>();
        let block = |r: i32| base.wrapping_add(r as usize * stride);
        // SAFETY: the root's vector holds `count` elements, its block `stride >= bytes` bytes.
        unsafe { std::ptr::copy_nonoverlapping(mine, block(root), bytes) };
        for r in (0..size).filter(|&r| r != root) {
            self.small_recv(comm, ctx, r, tag, block(r), count, t, &mut mismatch)?;
        }
        let recv = b.recv;
        // SAFETY: every block and `recv` hold `count` elements; the lower ranks' data goes
        // first (non-commutative operations keep rank order).
        unsafe {
            std::ptr::copy_nonoverlapping(block(size - 1), recv, bytes);
            for r in (0..size - 1).rev() {
                red.apply(block(r), recv, count);
            }
        }
        self.small_scratch_put(parts);
        mismatch.map_or(Ok(true), Err)
    }

    /// MPI_Allreduce of a small vector by recursive doubling; false if the general path must
    /// run.
    pub(crate) fn allreduce_small(&mut self, comm: Handle, b: &RBuf, red: &Reduction) -> MpiResult<bool> {
        let t = &red.dtype;
        let count = b.count;
        let Some((rank, size, pctx, ctx)) = self.small_coll_target(comm, t, count) else { return Ok(false) };
        let bytes = t.packed_size(count);
        let commute = red.commutative();
        if count == 0 || select::allreduce(self.small_cfg(), size, count, bytes, commute) != select::Allreduce::RecursiveDoubling {
            return Ok(false);
        }
        let base = self.next_tag(pctx);
        let recv = b.recv;
        if let Some(sb) = b.send {
            if !std::ptr::eq(sb, recv) {
                // SAFETY: both buffers hold `count` elements of the contiguous type.
                unsafe { std::ptr::copy(sb, recv, bytes) };
            }
        }
        // Temporary for the partner's vector, aligned for any element type.
        let mut scratch = self.small_scratch(bytes.div_ceil(16));
        let mut tmp = scratch.as_mut_ptr().cast::<u8>();
        let mut acc = recv;
        let pof2 = pof2_floor(size);
        let rem = size - pof2;
        let real = |n: i32| if n < rem { n * 2 + 1 } else { n + rem };
        let mut pending = Vec::new();
        let mut mismatch = None;
        let newrank = if rank < 2 * rem {
            if rank % 2 == 0 {
                self.small_send(comm, rank + 1, tag_of(base, false, SUB_FOLD as u16), acc, count, t, &mut pending, &mismatch)?;
                self.small_wait_all(std::mem::take(&mut pending))?;
                None
            } else {
                self.small_recv(comm, ctx, rank - 1, tag_of(base, false, SUB_FOLD as u16), tmp, count, t, &mut mismatch)?;
                // SAFETY: both hold `count` elements; the even neighbour is the lower rank.
                unsafe { red.apply(tmp, acc, count) };
                Some(rank / 2)
            }
        } else {
            Some(rank - rem)
        };
        if let Some(newrank) = newrank {
            let mut mask = 1;
            let mut k = 0u16;
            while mask < pof2 {
                let dst = real(newrank ^ mask);
                let tag = tag_of(base, false, k);
                self.small_send(comm, dst, tag, acc, count, t, &mut pending, &mismatch)?;
                self.small_recv(comm, ctx, dst, tag, tmp, count, t, &mut mismatch)?;
                self.small_wait_all(std::mem::take(&mut pending))?;
                // SAFETY: `acc` and `tmp` hold `count` elements each. The lower rank's data
                // goes first for non-commutative operations.
                unsafe {
                    if commute || dst < rank {
                        red.apply(tmp, acc, count);
                    } else {
                        red.apply(acc, tmp, count);
                        std::mem::swap(&mut acc, &mut tmp);
                    }
                }
                mask <<= 1;
                k += 1;
            }
        }
        if rank < 2 * rem {
            if rank % 2 == 1 {
                self.small_send(comm, rank - 1, tag_of(base, false, SUB_FINAL as u16), acc, count, t, &mut pending, &mismatch)?;
                self.small_wait_all(std::mem::take(&mut pending))?;
            } else {
                self.small_recv(comm, ctx, rank + 1, tag_of(base, false, SUB_FINAL as u16), recv, count, t, &mut mismatch)?;
            }
        }
        if acc != recv {
            // SAFETY: `acc` is the scratch block here, `count` elements like `recv`.
            unsafe { std::ptr::copy_nonoverlapping(acc, recv, bytes) };
        }
        self.small_scratch_put(scratch);
        mismatch.map_or(Ok(true), Err)
    }

    /// MPI_Scan (inclusive) or MPI_Exscan of a small vector by recursive doubling, the
    /// algorithm of [`super::reduce::scan`] with its tags, peers and reduction order; false
    /// if the general path must run.
    pub(crate) fn scan_small(&mut self, comm: Handle, b: &RBuf, red: &Reduction, exclusive: bool) -> MpiResult<bool> {
        let t = &red.dtype;
        let count = b.count;
        let Some((rank, size, pctx, ctx)) = self.small_coll_target(comm, t, count) else { return Ok(false) };
        if count == 0 {
            return Ok(false);
        }
        let bytes = t.packed_size(count);
        // The chain runs as a schedule (before a tag is taken: the schedule takes its own).
        // Whether the host is crowded only matters where the linear scan is not taken or the
        // vector is too long for it on a crowded host, and finding out walks the group:
        // small vectors on few ranks skip it.
        let mut algo = select::scan(self.small_cfg(), size, bytes, false);
        if algo != select::Scan::Linear || bytes > select::SCAN_LINEAR_BYTES_CROWDED && self.host_crowded() {
            let crowded = self.topo(comm)?.0.crowded;
            algo = select::scan(self.small_cfg(), size, bytes, crowded);
        }
        if algo == select::Scan::Chain {
            return Ok(false);
        }
        let commute = red.commutative();
        let base = self.next_tag(pctx);
        let recv = b.recv;
        let mine: *const u8 = b.send.unwrap_or(recv);
        // `partial`: the reduction of the ranks heard of, this one included; `tmp`: the
        // partner's. Aligned for any element type.
        let mut scratch = self.small_scratch(2 * bytes.div_ceil(16));
        let half = bytes.div_ceil(16) * 16;
        let base_ptr = scratch.as_mut_ptr().cast::<u8>();
        let mut partial = base_ptr;
        // SAFETY: the scratch holds two blocks of `half >= bytes` bytes.
        let mut tmp = unsafe { base_ptr.add(half) };
        // SAFETY: `mine` holds `count` elements of the contiguous type (`bytes` bytes); so do
        // `partial` and, for an inclusive scan with a separate send buffer, `recv`.
        unsafe {
            std::ptr::copy_nonoverlapping(mine, partial, bytes);
            if !exclusive {
                if let Some(sb) = b.send {
                    if !std::ptr::eq(sb, recv) {
                        std::ptr::copy(sb, recv, bytes);
                    }
                }
            }
        }
        if algo == select::Scan::Linear {
            self.scan_small_linear(comm, ctx, rank, size, base, partial, b, red, exclusive)?;
            self.small_scratch_put(scratch);
            return Ok(true);
        }
        // Exscan: recv holds nothing valid until the first lower partner's data arrives.
        let mut have = !exclusive;
        let mut pending = Vec::new();
        let mut mismatch = None;
        let mut mask = 1;
        let mut k = 0u16;
        while mask < size {
            let dst = rank ^ mask;
            if dst < size {
                let tag = tag_of(base, false, k);
                self.small_send(comm, dst, tag, partial, count, t, &mut pending, &mismatch)?;
                self.small_recv(comm, ctx, dst, tag, tmp, count, t, &mut mismatch)?;
                self.small_wait_all(std::mem::take(&mut pending))?;
                // SAFETY: `tmp`, `partial` and `recv` hold `count` elements each; the lower
                // ranks' data goes first for non-commutative operations.
                unsafe {
                    if rank > dst {
                        red.apply(tmp, partial, count);
                        if have {
                            red.apply(tmp, recv, count);
                        } else {
                            std::ptr::copy_nonoverlapping(tmp, recv, bytes);
                            have = true;
                        }
                    } else if commute {
                        red.apply(tmp, partial, count);
                    } else {
                        red.apply(partial, tmp, count);
                        std::mem::swap(&mut partial, &mut tmp);
                    }
                }
            }
            mask <<= 1;
            k += 1;
        }
        self.small_scratch_put(scratch);
        mismatch.map_or(Ok(true), Err)
    }

    /// The linear scan of [`super::reduce::scan_linear`] (same tags, peers and reduction
    /// order) over the request-free primitives; `own` is a copy of this rank's vector.
    #[allow(clippy::too_many_arguments)]
    fn scan_small_linear(&mut self, comm: Handle, ctx: u32, rank: i32, size: i32, base: i32, own: *mut u8, b: &RBuf, red: &Reduction, exclusive: bool) -> MpiResult<()> {
        let t = &red.dtype;
        let count = b.count;
        let bytes = t.packed_size(count);
        let tag = tag_of(base, false, 0);
        let mut pending = Vec::new();
        let mut mismatch = None;
        for dst in rank + 1..size {
            self.small_send(comm, dst, tag, own, count, t, &mut pending, &mismatch)?;
        }
        // The lower ranks' vectors, one block each, aligned for any element type.
        let r = rank as usize;
        let stride = bytes.div_ceil(16) * 16;
        let mut lower = self.small_scratch((r * stride / 16).max(1));
        let lp = lower.as_mut_ptr().cast::<u8>();
        for src in 0..r {
            // SAFETY: block `src` of `lower` holds `stride >= bytes` bytes.
            self.small_recv(comm, ctx, src as i32, tag, unsafe { lp.add(src * stride) }, count, t, &mut mismatch)?;
        }
        let recv = b.recv;
        // SAFETY: every block of `lower`, `own` and `recv` hold `count` elements; the lower
        // ranks' data goes first (`v_i op acc` from the highest down).
        unsafe {
            if exclusive {
                if r > 0 {
                    std::ptr::copy_nonoverlapping(lp.add((r - 1) * stride), recv, bytes);
                    for i in (0..r - 1).rev() {
                        red.apply(lp.add(i * stride), recv, count);
                    }
                }
            } else {
                std::ptr::copy_nonoverlapping(own, recv, bytes);
                for i in (0..r).rev() {
                    red.apply(lp.add(i * stride), recv, count);
                }
            }
        }
        self.small_scratch_put(lower);
        // `own` lives in the caller's scratch, which outlives these sends.
        self.small_wait_all(pending)?;
        mismatch.map_or(Ok(()), Err)
    }

    #[allow(clippy::too_many_arguments)]
    /// Send `count` elements, or nothing once this rank's part of the collective saw the
    /// ranks disagree (`mismatch`): the peer then sees the disagreement too instead of
    /// taking part of a message for the whole.
    #[allow(clippy::too_many_arguments)]
    fn small_send(
        &mut self,
        comm: Handle,
        peer: i32,
        tag: i32,
        buf: *const u8,
        count: usize,
        t: &TypeRef,
        pending: &mut Vec<Handle>,
        mismatch: &Option<MpiError>,
    ) -> MpiResult<()> {
        let count = if mismatch.is_some() { 0 } else { count };
        if !self.coll_send_now(comm, peer, false, tag, buf, count, t)? {
            pending.push(self.coll_isend_typed(comm, peer, false, tag, buf, count, t.clone())?);
        }
        Ok(())
    }

    /// Receive `count` elements. A message longer (truncated) or shorter than that means the
    /// ranks' counts differ, an erroneous call: it is noted in `mismatch` (the first one
    /// wins) and the algorithm goes on, so no rank waits forever for one that stopped; the
    /// caller reports it at the end.
    #[allow(clippy::too_many_arguments)]
    fn small_recv(&mut self, comm: Handle, ctx: u32, src: i32, tag: i32, buf: *mut u8, count: usize, t: &TypeRef, mismatch: &mut Option<MpiError>) -> MpiResult<()> {
        let status = match self.recv_slot(ctx, comm, buf, t.packed_size(count), src, tag)? {
            Some(s) => s,
            None => {
                let h = self.coll_irecv_typed(comm, src, tag, buf, count, t.clone())?;
                let s = self.wait(h);
                self.release(h);
                s?
            }
        };
        let disagreement = match status.error {
            None if status.bytes < t.packed_size(count) as u64 => MpiError::new(
                ErrorClass::Count,
                "a message of the collective was shorter than this rank's count: the ranks' counts or type signatures differ",
            ),
            None => return Ok(()),
            Some(ErrorClass::Truncate) => MpiError::new(ErrorClass::Truncate, "message truncated: a receive buffer was smaller than the data sent"),
            Some(c) => return Err(MpiError::new(c, "a transfer of the collective failed")),
        };
        mismatch.get_or_insert(disagreement);
        Ok(())
    }

    fn small_wait_all(&mut self, pending: Vec<Handle>) -> MpiResult<()> {
        let mut first = Ok(());
        for h in pending {
            let r = self.wait(h);
            self.release(h);
            if let (Ok(()), Err(e)) = (&first, r) {
                first = Err(e);
            }
        }
        first
    }
}
