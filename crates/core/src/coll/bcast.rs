//! Barrier and broadcast schedules.

use super::sched::Schedule;
use super::select::{self, CollConfig};
use super::{byte_type, Buf};
use crate::datatype::TypeRef;
use crate::error::MpiResult;

/// MPI_Barrier with the algorithm the selection rule picks for `size` ranks.
pub fn barrier(s: &mut Schedule, rank: i32, size: i32, cfg: &CollConfig) -> MpiResult<()> {
    match select::barrier(cfg, size) {
        select::Barrier::Dissemination => dissemination(s, rank, size),
        select::Barrier::Tree => {
            tree_barrier(s, rank, size);
            Ok(())
        }
        select::Barrier::Linear => {
            linear_barrier(s, rank, size);
            Ok(())
        }
    }
}

/// Flat fan-in to rank 0, then the tree barrier's binomial fan-out: every other rank sends
/// to rank 0 at once (no rank waits for a child), so the barrier is `1 + ⌈log2 n⌉` steps deep
/// instead of `2·⌈log2 n⌉`; rank 0 still leaves first and the rest in broadcast-tree order
/// (see [`tree_barrier`]), at the price of `n - 1` messages into rank 0.
pub fn linear_barrier(s: &mut Schedule, rank: i32, size: i32) {
    let byte = byte_type();
    // The lowest set bit of `rank` (rank 0: the first power of two reaching `size`).
    let mut mask = 1;
    while mask < size && rank & mask == 0 {
        mask <<= 1;
    }
    if rank == 0 {
        for r in 1..size {
            s.recv(r, 0, std::ptr::null_mut(), 0, &byte);
        }
        s.round();
    } else {
        s.send(0, 0, std::ptr::null(), 0, &byte);
        s.recv(rank - mask, 1, std::ptr::null_mut(), 0, &byte);
        s.round();
    }
    barrier_fan_out(s, rank, size, mask);
}

/// The barriers' fan-out: the same tree as the binomial broadcast from rank 0, largest subtree
/// first; `mask` is the lowest set bit of `rank` (for rank 0 the first power of two reaching
/// `size`).
fn barrier_fan_out(s: &mut Schedule, rank: i32, size: i32, mask: i32) {
    let byte = byte_type();
    let mut mask = mask >> 1;
    while mask > 0 {
        if rank + mask < size {
            s.send(rank + mask, 1, std::ptr::null(), 0, &byte);
        }
        mask >>= 1;
    }
    s.round();
}

/// Binomial fan-in to rank 0, then binomial fan-out from it: 2·⌈log2 n⌉ steps, but rank 0
/// leaves first and the rest in tree order, so a rooted collective from rank 0 that follows
/// finds its children still on the way out instead of waiting for them.
pub fn tree_barrier(s: &mut Schedule, rank: i32, size: i32) {
    let byte = byte_type();
    // Fan-in: hear from every child (rank + mask for each mask below the lowest set bit),
    // then tell the parent.
    let mut mask = 1;
    while mask < size {
        if rank & mask != 0 {
            break;
        }
        if rank + mask < size {
            s.recv(rank + mask, 0, std::ptr::null_mut(), 0, &byte);
        }
        mask <<= 1;
    }
    s.round();
    if rank != 0 {
        s.send(rank - mask, 0, std::ptr::null(), 0, &byte);
        s.recv(rank - mask, 1, std::ptr::null_mut(), 0, &byte);
        s.round();
    }
    barrier_fan_out(s, rank, size, mask);
}

/// Dissemination barrier: ⌈log2 n⌉ rounds; in round k rank r signals r + 2^k and waits for
/// r - 2^k.
pub fn dissemination(s: &mut Schedule, rank: i32, size: i32) -> MpiResult<()> {
    let byte = byte_type();
    let mut k = 1;
    let mut round = 0;
    while k < size {
        let to = (rank + k) % size;
        let from = (rank - k + size) % size;
        s.send(to, round, std::ptr::null(), 0, &byte);
        s.recv(from, round, std::ptr::null_mut(), 0, &byte);
        s.round();
        k *= 2;
        round += 1;
    }
    Ok(())
}

/// MPI_Bcast on an intracommunicator.
pub fn bcast(s: &mut Schedule, rank: i32, size: i32, root: i32, b: &Buf, cfg: &CollConfig, crowded: bool) -> MpiResult<()> {
    let bytes = b.dtype.packed_size(b.count);
    if bytes == 0 || size == 1 {
        return Ok(());
    }
    match select::bcast(cfg, size, bytes, crowded) {
        select::Bcast::Binomial => binomial(s, rank, size, root, b.ptr, b.count, &b.dtype),
        select::Bcast::Linear => linear(s, rank, size, root, b.ptr, b.count, &b.dtype),
        select::Bcast::ScatterAllgather => scatter_allgather(s, rank, size, root, b.ptr, b.count, &b.dtype),
    }
    Ok(())
}

/// Binomial tree rooted at `root`: a rank receives from its parent, then sends to its
/// children, largest subtree first.
pub fn binomial(s: &mut Schedule, rank: i32, size: i32, root: i32, buf: *mut u8, count: usize, t: &TypeRef) {
    let vr = (rank - root + size) % size;
    let mut mask = 1;
    while mask < size {
        if vr & mask != 0 {
            s.recv((rank - mask + size) % size, 0, buf, count, t);
            s.round();
            break;
        }
        mask <<= 1;
    }
    mask >>= 1;
    while mask > 0 {
        if vr + mask < size {
            s.send((rank + mask) % size, 0, buf, count, t);
        }
        mask >>= 1;
    }
    s.round();
}

/// Linear: the root sends to every other rank in one round.
pub fn linear(s: &mut Schedule, rank: i32, size: i32, root: i32, buf: *mut u8, count: usize, t: &TypeRef) {
    if rank == root {
        s.single_copy = super::sched::SingleCopy::WhereFast;
        for i in 1..size {
            s.send((root + i) % size, 0, buf, count, t);
        }
    } else {
        s.recv(root, 0, buf, count, t);
    }
    s.round();
}

/// Van de Geijn: binomial scatter of ⌈bytes/n⌉-byte chunks, then a ring allgather of the
/// chunks. Moves about 2·bytes per rank instead of bytes·log2 n at the root.
pub fn scatter_allgather(s: &mut Schedule, rank: i32, size: i32, root: i32, buf: *mut u8, count: usize, t: &TypeRef) {
    let byte = byte_type();
    let nbytes = t.packed_size(count);
    let packed = !t.is_contiguous();
    let work = if packed { s.temp(nbytes) } else { buf };
    if packed && rank == root {
        s.copy(buf, count, t, work, nbytes, &byte);
        s.round();
    }
    let chunk = nbytes.div_ceil(size as usize);
    // Bytes of the chunks of relative ranks [c, c + m).
    let range = |c: i32, m: i32| {
        let lo = (c as usize * chunk).min(nbytes);
        let hi = ((c + m) as usize * chunk).min(nbytes);
        (lo, hi - lo)
    };
    let vr = (rank - root + size) % size;
    let mut mask = 1;
    while mask < size {
        if vr & mask != 0 {
            let (off, len) = range(vr, mask);
            if len > 0 {
                s.recv((rank - mask + size) % size, 0, work.wrapping_add(off), len, &byte);
                s.round();
            }
            break;
        }
        mask <<= 1;
    }
    mask >>= 1;
    while mask > 0 {
        if vr + mask < size {
            let (off, len) = range(vr + mask, mask);
            if len > 0 {
                s.send((rank + mask) % size, 0, work.wrapping_add(off), len, &byte);
            }
        }
        mask >>= 1;
    }
    s.round();
    let left = (rank - 1 + size) % size;
    let right = (rank + 1) % size;
    for j in 0..size - 1 {
        let (so, sl) = range((vr - j + size) % size, 1);
        let (ro, rl) = range((vr - j - 1 + size) % size, 1);
        if sl > 0 {
            s.send(right, 1 + j as u32, work.wrapping_add(so), sl, &byte);
        }
        if rl > 0 {
            s.recv(left, 1 + j as u32, work.wrapping_add(ro), rl, &byte);
        }
        s.round();
    }
    if packed && rank != root {
        s.copy(work, nbytes, &byte, buf, count, t);
        s.round();
    }
}
