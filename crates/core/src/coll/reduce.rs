//! Reduction schedules: reduce, allreduce, reduce-scatter, scan and exscan.
//!
//! Non-commutative ops keep rank order: whenever two partial results meet, the one covering
//! lower ranks is the `src` of the reduce step (`dst = src op dst`), and algorithms that
//! scatter the vector (Rabenseifner, pairwise) are only chosen for commutative ops.

use super::sched::{at, Schedule, SingleCopy};
use super::select::{self, CollConfig};
use super::{gather, pof2_floor, Buf, RBuf, VBuf};
use crate::error::MpiResult;
use crate::datatype::TypeRef;
use crate::op::Reduction;

/// A binomial reduce posts every child's receive at once while the data of all children
/// fits in this many bytes (one round instead of one per child).
const ALL_CHILDREN_AT_ONCE: usize = 64 << 10;
/// The same where the children's vectors are read with a single copy: their reads then
/// overlap and no copy of the own vector starts the fold. Measured on 2 CPUs (medians of
/// 8 launches; one child at a time / all at once): 4 ranks 256 KiB 62 / 51 µs, 1 MiB
/// 383 / 338; 8 ranks 256 KiB 164 / 135, 1 MiB 597 / 507. Without the single copy all at
/// once lost at 64 KiB (12.5 / 14.6 µs on 4 ranks).
const ALL_CHILDREN_AT_ONCE_SINGLE_COPY: usize = 8 << 20;

/// Sub-tag of the message that carries the result to the real root.
pub(crate) const SUB_FINAL: u32 = 0xffe;
/// Sub-tag of the messages that fold the extra ranks of a non-power-of-two size in and out.
pub(crate) const SUB_FOLD: u32 = 0xffd;

/// MPI_Reduce on an intracommunicator.
/// `crowded`, `single_copy`: [`super::Topo::crowded`], [`super::Topo::single_copy`].
#[allow(clippy::too_many_arguments)]
pub fn reduce(s: &mut Schedule, rank: i32, size: i32, root: i32, b: &RBuf, red: &Reduction, cfg: &CollConfig, crowded: bool, single_copy: bool) -> MpiResult<()> {
    if b.count == 0 {
        return Ok(());
    }
    let bytes = red.dtype.packed_size(b.count);
    match select::reduce(cfg, size, b.count, bytes, red.commutative(), crowded) {
        select::Reduce::Binomial => {
            if single_copy && select::reduce_single_copy(cfg, bytes) {
                s.single_copy = SingleCopy::Yes;
            }
            // A rank's one send, to its parent, is its last step: on a crowded host it does
            // not wait for the parent's FIN (`State::copy_sends`).
            s.copy_sends = crowded;
            binomial(s, rank, size, root, b.send, b.recv, b.count, red)
        }
        select::Reduce::ReduceScatterGather => reduce_scatter_gather(s, rank, size, root, b.send, b.recv, b.count, red),
        select::Reduce::Linear => linear(s, rank, size, root, b.send, b.recv, b.count, red),
    }
    Ok(())
}

/// Reduce for run-through mode: every rank sends its contribution to the root, which
/// combines in rank order whatever arrived. A contributor that failed before sending leaves
/// its part out (the root reports MPIX_ERR_PROC_FAILED unless the application already heard
/// of that failure on the communicator), and no other rank depends on it. O(P) at the root.
pub fn linear_tolerant(s: &mut Schedule, rank: i32, size: i32, root: i32, b: &RBuf, red: &Reduction) {
    if b.count == 0 {
        return;
    }
    let t = red.dtype.clone();
    let mine: *const u8 = b.send.unwrap_or(b.recv);
    s.tolerant = true;
    // Chunks bound the root's temporaries (one per rank) to about TOLERANT_TEMP_BYTES.
    let per_elem = t.extent.unsigned_abs().max(1) * size as usize;
    let chunk = (TOLERANT_TEMP_BYTES / per_elem).max(1).min(b.count);
    let chunks = b.count.div_ceil(chunk);
    if rank != root {
        for k in 0..chunks {
            let n = chunk.min(b.count - k * chunk);
            s.send(root, 0, at(mine, &t, k * chunk), n, &t);
            s.round();
        }
        return;
    }
    let temps: Vec<*mut u8> = (0..size).map(|r| if r == rank { std::ptr::null_mut() } else { s.temp_typed(&t, chunk) }).collect();
    let acc = s.temp_typed(&t, chunk);
    for k in 0..chunks {
        let n = chunk.min(b.count - k * chunk);
        let mut parts = Vec::with_capacity(size as usize);
        for r in 0..size {
            if r == rank {
                parts.push((None, at(mine, &t, k * chunk) as *const u8));
            } else {
                parts.push((Some(s.next_step()), temps[r as usize] as *const u8));
                s.recv(r, 0, temps[r as usize], n, &t);
            }
        }
        s.round();
        s.ordered_reduce(parts, acc, at(b.recv, &t, k * chunk), n);
        s.round();
    }
}

/// Linear reduce of a small vector: every other rank sends its vector to the root and is
/// done; the root reduces them in rank order (`v_i op acc` from the highest rank down), so
/// non-commutative operations keep rank order.
#[allow(clippy::too_many_arguments)]
pub fn linear(s: &mut Schedule, rank: i32, size: i32, root: i32, send: Option<*const u8>, recv: *mut u8, count: usize, red: &Reduction) {
    let t = red.dtype.clone();
    let mine: *const u8 = send.unwrap_or(recv);
    if rank != root {
        s.send(root, 0, mine, count, &t);
        s.round();
        return;
    }
    // The root's own vector aside first: in place, `recv` is overwritten below.
    let own = s.temp_typed(&t, count);
    s.copy(mine, count, &t, own, count, &t);
    s.round();
    let parts: Vec<*const u8> = (0..size)
        .map(|r| {
            if r == rank {
                own as *const u8
            } else {
                let tmp = s.temp_typed(&t, count);
                s.recv(r, 0, tmp, count, &t);
                tmp as *const u8
            }
        })
        .collect();
    s.round();
    let last = parts.len() - 1;
    s.copy(parts[last], count, &t, recv, count, &t);
    s.round();
    for &p in parts[..last].iter().rev() {
        s.reduce(p, recv, count);
    }
    // Whatever the caller appends (the scatter of a reduce-scatter) uses the result.
    s.round();
}

/// Bound on the root's temporaries in [`linear_tolerant`].
const TOLERANT_TEMP_BYTES: usize = 8 << 20;

/// Binomial reduce. Commutative ops use a tree rooted at `root`; non-commutative ones a tree
/// rooted at rank 0 (where every subtree is a contiguous range of ranks), whose result then
/// goes to `root`.
#[allow(clippy::too_many_arguments)]
pub fn binomial(s: &mut Schedule, rank: i32, size: i32, root: i32, send: Option<*const u8>, recv: *mut u8, count: usize, red: &Reduction) {
    let t = red.dtype.clone();
    let commute = red.commutative();
    let troot = if commute { root } else { 0 };
    let vr = (rank - troot + size) % size;
    let mine: *const u8 = send.unwrap_or(recv);
    // Children vr + 1, vr + 2, vr + 4, … below vr's lowest set bit, each covering the next
    // higher range of ranks; then the parent.
    let mut children = [(0i32, 0u32); 32];
    let mut nchildren = 0;
    let mut parent = None;
    let mut mask = 1;
    let mut k = 0;
    while mask < size {
        if vr & mask == 0 {
            if vr | mask < size {
                children[nchildren] = (((vr | mask) + troot) % size, k);
                nchildren += 1;
            }
        } else {
            parent = Some((((vr & !mask) + troot) % size, k));
            break;
        }
        mask <<= 1;
        k += 1;
    }
    let children = &children[..nchildren];
    let is_result = rank == root && troot == root;
    let mut acc = mine as *mut u8;
    let at_once = if s.single_copy == SingleCopy::No { ALL_CHILDREN_AT_ONCE } else { ALL_CHILDREN_AT_ONCE_SINGLE_COPY };
    if !children.is_empty() && t.packed_size(count) * children.len() <= at_once {
        // Small: receive from every child in one round, each into its own buffer, then
        // fold left to right: buf_i = acc op buf_i (lower ranks first, and the send buffer
        // is never written). The last child's data can land in recv directly at the root.
        let last_in_recv = is_result && send.is_some();
        let mut bufs = [std::ptr::null_mut::<u8>(); 32];
        for (i, &(child, k)) in children.iter().enumerate() {
            bufs[i] = if last_in_recv && i + 1 == children.len() { recv } else { s.temp_typed(&t, count) };
            s.recv(child, k, bufs[i], count, &t);
        }
        for b in &bufs[..children.len()] {
            s.reduce(acc, *b, count);
            acc = *b;
        }
        s.round();
    } else if !children.is_empty() {
        // Large: one child at a time, two buffers.
        let mut a = if is_result { recv } else { s.temp_typed(&t, count) };
        s.copy(mine, count, &t, a, count, &t);
        s.round();
        let mut tmp = s.temp_typed(&t, count);
        for &(child, k) in children {
            s.recv(child, k, tmp, count, &t);
            if commute {
                s.reduce(tmp, a, count);
            } else {
                // Received data covers higher ranks: a op tmp, kept in tmp.
                s.reduce(a, tmp, count);
                std::mem::swap(&mut a, &mut tmp);
            }
            s.round();
        }
        acc = a;
    }
    if let Some((p, k)) = parent {
        s.send(p, k, acc, count, &t);
        s.round();
    } else if troot == root {
        s.copy(acc, count, &t, recv, count, &t);
        s.round();
    } else {
        s.send(root, SUB_FINAL, acc, count, &t);
        s.round();
    }
    if rank == root && troot != root {
        s.recv(troot, SUB_FINAL, recv, count, &t);
        s.round();
    }
}

/// Ranks taking part in recursive halving/doubling after the extra ranks of a
/// non-power-of-two size folded their data into their odd neighbours: returns this rank's
/// new rank (None when it folded out) after writing the fold step.
fn fold_in(s: &mut Schedule, rank: i32, rem: i32, acc: *mut u8, tmp: *mut u8, count: usize, red: &Reduction) -> Option<i32> {
    let t = &red.dtype;
    if rank < 2 * rem {
        if rank % 2 == 0 {
            s.send(rank + 1, SUB_FOLD, acc, count, t);
            s.round();
            None
        } else {
            // The even neighbour is the lower rank: tmp op acc.
            s.recv(rank - 1, SUB_FOLD, tmp, count, t);
            s.reduce(tmp, acc, count);
            s.round();
            Some(rank / 2)
        }
    } else {
        Some(rank - rem)
    }
}

/// Real rank of new rank `n` (see [`fold_in`]).
fn real(n: i32, rem: i32) -> i32 {
    if n < rem {
        n * 2 + 1
    } else {
        n + rem
    }
}

/// Give the result back to the ranks that folded out.
fn fold_out(s: &mut Schedule, rank: i32, rem: i32, acc: *mut u8, recv: *mut u8, count: usize, red: &Reduction) {
    if rank < 2 * rem {
        if rank % 2 == 1 {
            s.send(rank - 1, SUB_FINAL, acc, count, &red.dtype);
        } else {
            s.recv(rank + 1, SUB_FINAL, recv, count, &red.dtype);
        }
        s.round();
    }
}

/// MPI_Allreduce on an intracommunicator.
pub fn allreduce(s: &mut Schedule, rank: i32, size: i32, b: &RBuf, red: &Reduction, cfg: &CollConfig) -> MpiResult<()> {
    let t = &red.dtype;
    if b.count == 0 {
        return Ok(());
    }
    if let Some(sb) = b.send {
        s.copy(sb, b.count, t, b.recv, b.count, t);
        s.round();
    }
    if size == 1 {
        return Ok(());
    }
    let bytes = t.packed_size(b.count);
    match select::allreduce(cfg, size, b.count, bytes, red.commutative()) {
        select::Allreduce::RecursiveDoubling => recursive_doubling(s, rank, size, b.recv, b.count, red),
        select::Allreduce::Rabenseifner => rabenseifner(s, rank, size, b.recv, b.count, red),
    }
    Ok(())
}

/// Recursive doubling on the data already in `recv`: log2 n rounds of full-vector exchanges.
pub fn recursive_doubling(s: &mut Schedule, rank: i32, size: i32, recv: *mut u8, count: usize, red: &Reduction) {
    let t = red.dtype.clone();
    let commute = red.commutative();
    let pof2 = pof2_floor(size);
    let rem = size - pof2;
    let mut acc = recv;
    let mut tmp = s.temp_typed(&t, count);
    if let Some(newrank) = fold_in(s, rank, rem, acc, tmp, count, red) {
        let mut mask = 1;
        let mut k = 0;
        while mask < pof2 {
            let dst = real(newrank ^ mask, rem);
            s.send(dst, k, acc, count, &t);
            s.recv(dst, k, tmp, count, &t);
            if commute || dst < rank {
                s.reduce(tmp, acc, count);
            } else {
                s.reduce(acc, tmp, count);
                std::mem::swap(&mut acc, &mut tmp);
            }
            s.round();
            mask <<= 1;
            k += 1;
        }
    }
    fold_out(s, rank, rem, acc, recv, count, red);
    if acc != recv {
        s.copy(acc, count, &t, recv, count, &t);
        s.round();
    }
}

/// Element counts and displacements of the pof2 pieces Rabenseifner's algorithm splits a
/// vector of `count` elements into.
fn pieces(count: usize, pof2: i32) -> (Vec<usize>, Vec<usize>) {
    let p = pof2 as usize;
    let cnts: Vec<usize> = (0..p).map(|i| count / p + usize::from(i < count % p)).collect();
    let mut disps = vec![0; p];
    for i in 1..p {
        disps[i] = disps[i - 1] + cnts[i - 1];
    }
    (cnts, disps)
}

/// Recursive halving: after it, new rank r holds the fully reduced piece(s) of `acc`
/// between the returned indices (send_idx, last_idx) of [`pieces`].
#[allow(clippy::too_many_arguments)]
fn reduce_scatter_halving(
    s: &mut Schedule,
    newrank: i32,
    rem: i32,
    pof2: i32,
    acc: *mut u8,
    tmp: *mut u8,
    cnts: &[usize],
    disps: &[usize],
    red: &Reduction,
) -> (usize, usize) {
    let t = &red.dtype;
    let sum = |a: usize, b: usize| cnts[a..b].iter().sum::<usize>();
    let p = pof2 as usize;
    let (mut send_idx, mut recv_idx, mut last_idx) = (0usize, 0usize, p);
    let mut mask = 1usize;
    let mut k = 0;
    while mask < p {
        let newdst = newrank ^ mask as i32;
        let dst = real(newdst, rem);
        let (send_cnt, recv_cnt);
        if newrank < newdst {
            send_idx = recv_idx + p / (mask * 2);
            send_cnt = sum(send_idx, last_idx);
            recv_cnt = sum(recv_idx, send_idx);
        } else {
            recv_idx = send_idx + p / (mask * 2);
            send_cnt = sum(send_idx, recv_idx);
            recv_cnt = sum(recv_idx, last_idx);
        }
        s.send(dst, k, at(acc, t, disps[send_idx]), send_cnt, t);
        s.recv(dst, k, at(tmp, t, disps[recv_idx]), recv_cnt, t);
        s.reduce(at(tmp, t, disps[recv_idx]), at(acc, t, disps[recv_idx]), recv_cnt);
        s.round();
        send_idx = recv_idx;
        mask <<= 1;
        k += 1;
        if mask < p {
            last_idx = recv_idx + p / mask;
        }
    }
    (send_idx, last_idx)
}

/// Rabenseifner's allreduce: reduce-scatter by recursive halving, then allgather by
/// recursive doubling. Commutative ops and count ≥ pof2 only.
pub fn rabenseifner(s: &mut Schedule, rank: i32, size: i32, recv: *mut u8, count: usize, red: &Reduction) {
    let t = red.dtype.clone();
    let pof2 = pof2_floor(size);
    let rem = size - pof2;
    let acc = recv;
    let tmp = s.temp_typed(&t, count);
    if let Some(newrank) = fold_in(s, rank, rem, acc, tmp, count, red) {
        let (cnts, disps) = pieces(count, pof2);
        let sum = |a: usize, b: usize| cnts[a..b].iter().sum::<usize>();
        let (mut send_idx, mut last_idx) = reduce_scatter_halving(s, newrank, rem, pof2, acc, tmp, &cnts, &disps, red);
        let p = pof2 as usize;
        let mut recv_idx;
        let mut mask = p >> 1;
        let mut k = 32;
        while mask > 0 {
            let newdst = newrank ^ mask as i32;
            let dst = real(newdst, rem);
            let (send_cnt, recv_cnt);
            if newrank < newdst {
                if mask != p / 2 {
                    last_idx += p / (mask * 2);
                }
                recv_idx = send_idx + p / (mask * 2);
                send_cnt = sum(send_idx, recv_idx);
                recv_cnt = sum(recv_idx, last_idx);
            } else {
                recv_idx = send_idx - p / (mask * 2);
                send_cnt = sum(send_idx, last_idx);
                recv_cnt = sum(recv_idx, send_idx);
            }
            s.send(dst, k, at(acc, &t, disps[send_idx]), send_cnt, &t);
            s.recv(dst, k, at(acc, &t, disps[recv_idx]), recv_cnt, &t);
            s.round();
            if newrank > newdst {
                send_idx = recv_idx;
            }
            mask >>= 1;
            k += 1;
        }
    }
    fold_out(s, rank, rem, acc, recv, count, red);
}

/// Rabenseifner's reduce: reduce-scatter by recursive halving, then a binomial gather of
/// the pieces to new rank 0, whose result goes to `root`. Commutative ops only.
#[allow(clippy::too_many_arguments)]
pub fn reduce_scatter_gather(s: &mut Schedule, rank: i32, size: i32, root: i32, send: Option<*const u8>, recv: *mut u8, count: usize, red: &Reduction) {
    let t = red.dtype.clone();
    let pof2 = pof2_floor(size);
    let rem = size - pof2;
    let mine: *const u8 = send.unwrap_or(recv);
    let acc = if rank == root { recv } else { s.temp_typed(&t, count) };
    s.copy(mine, count, &t, acc, count, &t);
    s.round();
    let tmp = s.temp_typed(&t, count);
    let holder = real(0, rem);
    if let Some(newrank) = fold_in(s, rank, rem, acc, tmp, count, red) {
        let (cnts, disps) = pieces(count, pof2);
        let sum = |a: usize, b: usize| cnts[a..b].iter().sum::<usize>();
        let (send_idx, mut last_idx) = reduce_scatter_halving(s, newrank, rem, pof2, acc, tmp, &cnts, &disps, red);
        // The allgather's index walk, with only the lower partner receiving (the higher
        // one sends what it holds and is done, so `send_idx` never moves).
        let p = pof2 as usize;
        let mut mask = p >> 1;
        let mut k = 32;
        while mask > 0 {
            let newdst = newrank ^ mask as i32;
            let dst = real(newdst, rem);
            if newrank < newdst {
                if mask != p / 2 {
                    last_idx += p / (mask * 2);
                }
                let recv_idx = send_idx + p / (mask * 2);
                let recv_cnt = sum(recv_idx, last_idx);
                s.recv(dst, k, at(acc, &t, disps[recv_idx]), recv_cnt, &t);
                s.round();
            } else {
                let send_cnt = sum(send_idx, last_idx);
                s.send(dst, k, at(acc, &t, disps[send_idx]), send_cnt, &t);
                s.round();
                break;
            }
            mask >>= 1;
            k += 1;
        }
    }
    if rank == holder && root != holder {
        s.send(root, SUB_FINAL, acc, count, &t);
        s.round();
    }
    if rank == root && root != holder {
        s.recv(holder, SUB_FINAL, recv, count, &t);
        s.round();
    }
}

/// MPI_Reduce_scatter (and _block, with equal counts).
pub fn reduce_scatter(s: &mut Schedule, rank: i32, size: i32, b: &RBuf, counts: &[usize], red: &Reduction, cfg: &CollConfig) -> MpiResult<()> {
    let t = red.dtype.clone();
    let total: usize = counts.iter().sum();
    if total == 0 {
        return Ok(());
    }
    let mut displs = Vec::with_capacity(counts.len());
    let mut d = 0;
    for c in counts {
        displs.push(d);
        d += c;
    }
    let mine = counts[rank as usize];
    // In place, the input is the whole vector in `recv`.
    let input: *const u8 = b.send.unwrap_or(b.recv);
    match select::reduce_scatter(cfg, size, t.packed_size(total), red.commutative()) {
        select::ReduceScatter::Pairwise => {
            let input = if b.send.is_none() {
                // The result overwrites the start of the input: work from a copy.
                let c = s.temp_typed(&t, total);
                s.copy(input, total, &t, c, total, &t);
                s.round();
                c as *const u8
            } else {
                input
            };
            s.copy(at(input, &t, displs[rank as usize]), mine, &t, b.recv, mine, &t);
            s.round();
            let tmp = s.temp_typed(&t, mine);
            for i in 1..size {
                let dst = (rank + i) % size;
                let src = (rank - i + size) % size;
                s.send(dst, i as u32, at(input, &t, displs[dst as usize]), counts[dst as usize], &t);
                s.recv(src, i as u32, tmp, mine, &t);
                s.reduce(tmp, b.recv, mine);
                s.round();
            }
        }
        select::ReduceScatter::ReduceThenScatter => {
            let full = if rank == 0 { s.temp_typed(&t, total) } else { std::ptr::null_mut() };
            // The reduce to rank 0 by the Reduce rule's small-vector choice (linear on few
            // ranks: only rank 0 waits).
            if select::reduce(cfg, size, total, t.packed_size(total), red.commutative(), false) == select::Reduce::Linear {
                linear(s, rank, size, 0, Some(input), full, total, red);
            } else {
                binomial(s, rank, size, 0, Some(input), full, total, red);
            }
            let v = VBuf { ptr: full, counts: counts.to_vec(), displs: displs.iter().map(|&x| x as isize).collect(), dtype: t.clone() };
            let r = Buf { ptr: b.recv, count: mine, dtype: t.clone() };
            gather::scatterv(s, rank, size, 0, &v, Some(&r), super::sched::SingleCopy::Yes)?;
        }
    }
    Ok(())
}

/// MPI_Scan or MPI_Exscan, linear: every rank sends its vector to every higher rank, then
/// reduces what the lower ranks sent, from the highest down (`v_i op acc`), so the result is
/// `v_0 op ... op v_r` in rank order for non-commutative operations too.
pub fn scan_linear(s: &mut Schedule, rank: i32, size: i32, b: &RBuf, red: &Reduction, exclusive: bool) {
    let t = red.dtype.clone();
    let count = b.count;
    let mine: *const u8 = b.send.unwrap_or(b.recv);
    // The vector goes out from a copy: an in-place exscan overwrites `recv` below.
    let own = s.temp_typed(&t, count);
    s.copy(mine, count, &t, own, count, &t);
    s.round();
    let lower: Vec<*mut u8> = (0..rank).map(|_| s.temp_typed(&t, count)).collect();
    for dst in rank + 1..size {
        s.send(dst, 0, own, count, &t);
    }
    for (src, &buf) in lower.iter().enumerate() {
        s.recv(src as i32, 0, buf, count, &t);
    }
    s.round();
    let r = lower.len();
    if !exclusive {
        s.copy(own, count, &t, b.recv, count, &t);
        s.round();
        for &buf in lower.iter().rev() {
            s.reduce(buf, b.recv, count);
        }
    } else if r > 0 {
        s.copy(lower[r - 1], count, &t, b.recv, count, &t);
        s.round();
        for &buf in lower[..r - 1].iter().rev() {
            s.reduce(buf, b.recv, count);
        }
    }
    s.round();
}

/// MPI_Scan (inclusive) or MPI_Exscan along the chain of ranks ([`select::Scan::Chain`]):
/// rank r receives the prefix of ranks 0..r-1 from rank r-1 and sends the prefix of 0..r
/// to rank r+1, the lower ranks' part first in every reduction.
///
/// Long vectors go down the chain in segments of about `segment` bytes (0: whole), one per
/// round: while rank r reduces segment j, rank r-1 reduces segment j+1 and rank r+1 segment
/// j-1, so the chain keeps more than one CPU busy instead of handing one vector down rank
/// after rank, and each segment's copy, reduction and send stay in the cache.
pub fn scan_chain(s: &mut Schedule, rank: i32, size: i32, b: &RBuf, red: &Reduction, exclusive: bool, segment: usize) {
    let t = red.dtype.clone();
    let count = b.count;
    let mine: *const u8 = b.send.unwrap_or(b.recv);
    let last = rank + 1 == size;
    let per = chain_segment(&t, count, segment);
    let segs: Vec<(usize, usize)> = (0..count).step_by(per).map(|off| (off, per.min(count - off))).collect();
    let seg = |buf: *const u8, j: usize| at(buf, &t, segs[j].0);
    if rank == 0 {
        // Exscan leaves rank 0's buffer alone; an inclusive scan's result is its own vector,
        // sent from where it is while the copy into the receive buffer follows.
        if !last {
            for (j, &(_, n)) in segs.iter().enumerate() {
                s.send(1, j as u32, seg(mine, j), n, &t);
            }
        }
        if !exclusive {
            if let Some(sb) = b.send {
                s.copy(sb, count, &t, b.recv, count, &t);
            }
        }
        s.round();
        return;
    }
    // Where the result of an inclusive scan is `prefix op mine` and the operation commutes,
    // the prefix arrives in the receive buffer and `mine` is reduced into it: no copy.
    let direct = !exclusive && red.commutative() && b.send.is_some();
    // The last rank of an Exscan only keeps the prefix: it too arrives where it belongs.
    let prefix = if direct || exclusive && last { b.recv } else { s.temp_typed(&t, count) };
    // What goes to rank r+1: the inclusive result itself, or for Exscan `prefix op mine`
    // built in a copy of this rank's vector (an in-place exscan's result overwrites it).
    let out = if exclusive && !last { s.temp_typed(&t, count) } else { b.recv };
    for (j, &(_, n)) in segs.iter().enumerate() {
        s.recv(rank - 1, j as u32, seg(prefix, j), n, &t);
        if j > 0 && !last {
            s.send(rank + 1, j as u32 - 1, seg(out, j - 1), segs[j - 1].1, &t);
        }
        // The round's local steps run once its messages are done.
        if exclusive {
            if !last {
                s.copy(seg(mine, j), n, &t, seg(out, j), n, &t);
                s.reduce(seg(prefix, j), seg(out, j), n);
            }
            s.copy(seg(prefix, j), n, &t, seg(b.recv, j), n, &t);
        } else if direct {
            if let Some(sb) = b.send {
                s.reduce(seg(sb, j), seg(b.recv, j), n);
            }
        } else {
            if let Some(sb) = b.send {
                s.copy(seg(sb, j), n, &t, seg(b.recv, j), n, &t);
            }
            s.reduce(seg(prefix, j), seg(b.recv, j), n);
        }
        s.round();
    }
    if !last {
        let j = segs.len() - 1;
        s.send(rank + 1, j as u32, seg(out, j), segs[j].1, &t);
        s.round();
    }
}

/// Most segments a chained scan cuts a vector into (each is a round and a tag sub-code).
const CHAIN_MAX_SEGMENTS: usize = 64;

/// Elements per segment of a chained scan of `count` elements of `t` cut at about `segment`
/// bytes (0: one segment).
fn chain_segment(t: &TypeRef, count: usize, segment: usize) -> usize {
    let elem = t.packed_size(1).max(1);
    let per = if segment == 0 { count } else { (segment / elem).max(1) };
    per.max(count.div_ceil(CHAIN_MAX_SEGMENTS)).max(1)
}

/// MPI_Scan (inclusive) or MPI_Exscan by recursive doubling: log2 n rounds; `partial` holds
/// the reduction of the ranks this rank has heard of including itself, `recv` the prefix.
#[allow(clippy::too_many_arguments)]
pub fn scan(s: &mut Schedule, rank: i32, size: i32, b: &RBuf, red: &Reduction, exclusive: bool, cfg: &CollConfig, crowded: bool) -> MpiResult<()> {
    let t = red.dtype.clone();
    let count = b.count;
    if count == 0 {
        return Ok(());
    }
    match select::scan(cfg, size, t.packed_size(count), crowded) {
        select::Scan::Linear => {
            scan_linear(s, rank, size, b, red, exclusive);
            return Ok(());
        }
        select::Scan::Chain => {
            scan_chain(s, rank, size, b, red, exclusive, cfg.scan_segment);
            return Ok(());
        }
        select::Scan::RecursiveDoubling => {}
    }
    let commute = red.commutative();
    let mine: *const u8 = b.send.unwrap_or(b.recv);
    let mut partial = s.temp_typed(&t, count);
    let mut tmp = s.temp_typed(&t, count);
    s.copy(mine, count, &t, partial, count, &t);
    if !exclusive {
        if let Some(sb) = b.send {
            s.copy(sb, count, &t, b.recv, count, &t);
        }
    }
    s.round();
    // Exscan: recv holds nothing valid until the first lower partner's data arrives.
    let mut have = !exclusive;
    let mut mask = 1;
    let mut k = 0;
    while mask < size {
        let dst = rank ^ mask;
        if dst < size {
            s.send(dst, k, partial, count, &t);
            s.recv(dst, k, tmp, count, &t);
            if rank > dst {
                s.reduce(tmp, partial, count);
                if have {
                    s.reduce(tmp, b.recv, count);
                } else {
                    s.copy(tmp, count, &t, b.recv, count, &t);
                    have = true;
                }
            } else if commute {
                s.reduce(tmp, partial, count);
            } else {
                s.reduce(partial, tmp, count);
                std::mem::swap(&mut partial, &mut tmp);
            }
            s.round();
        }
        mask <<= 1;
        k += 1;
    }
    Ok(())
}
