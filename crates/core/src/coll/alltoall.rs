//! All-to-all schedules: Bruck (small uniform blocks), everything posted at once, and
//! pairwise exchange (large blocks).

use super::sched::{at, Schedule};
use super::select::{self, CollConfig};
use super::{byte_type, uniform, Buf, VBuf, WBuf};
use crate::datatype::TypeRef;
use crate::error::MpiResult;

/// Block `j` of one side: address, count, datatype.
type Block = (*mut u8, usize, TypeRef);

/// MPI_Alltoall.
///
/// `crowded`: this host runs more ranks than it has CPUs (see
/// `select::alltoall_linear_crowded`); `single_copy`: this rank's large blocks may be read
/// with a fast single copy there (see `select::alltoall_single_copy`).
pub fn alltoall(s: &mut Schedule, rank: i32, size: i32, send: Option<&Buf>, recv: &Buf, cfg: &CollConfig, crowded: bool, single_copy: bool) -> MpiResult<()> {
    let block = recv.dtype.packed_size(recv.count);
    if block == 0 {
        return Ok(());
    }
    if select::alltoall(cfg, size, Some(block)) == select::Alltoall::Bruck {
        bruck(s, rank, size, send, recv, block);
        return Ok(());
    }
    let r = uniform(recv, size);
    let sv = send.map(|b| uniform(b, size));
    let read_once = single_copy && select::alltoall_single_copy(cfg, block);
    if read_once || crowded && select::alltoall_linear_crowded(cfg, size, block) {
        // Every rank still sends each other rank one message with the same tag, so ranks
        // that decided otherwise (pairwise, through the rings) exchange with this one.
        if read_once {
            s.single_copy = super::sched::SingleCopy::Yes;
        }
        exchange_v(s, rank, size, sv.as_ref(), &r, select::Alltoall::Linear);
        return Ok(());
    }
    alltoallv(s, rank, size, sv.as_ref(), &r, cfg, Some(block))
}

/// MPI_Alltoallv; `block` is the bytes per block when they are all equal.
pub fn alltoallv(s: &mut Schedule, rank: i32, size: i32, send: Option<&VBuf>, recv: &VBuf, cfg: &CollConfig, block: Option<usize>) -> MpiResult<()> {
    exchange_v(s, rank, size, send, recv, select::alltoall(cfg, size, block));
    Ok(())
}

/// The linear or pairwise exchange of the blocks `send` and `recv` describe.
fn exchange_v(s: &mut Schedule, rank: i32, size: i32, send: Option<&VBuf>, recv: &VBuf, algo: select::Alltoall) {
    let rb = |j: usize| (recv.ptr.wrapping_offset(recv.displs[j] * recv.dtype.extent), recv.counts[j], recv.dtype.clone());
    match send {
        Some(sv) => {
            let sb = |j: usize| (sv.ptr.wrapping_offset(sv.displs[j] * sv.dtype.extent), sv.counts[j], sv.dtype.clone());
            exchange(s, rank, size, &sb, &rb, algo);
        }
        None => in_place(s, rank, size, &rb, algo),
    }
}

/// MPI_Alltoallw (displacements in bytes, one datatype per block).
pub fn alltoallw(s: &mut Schedule, rank: i32, size: i32, send: Option<&WBuf>, recv: &WBuf, cfg: &CollConfig) -> MpiResult<()> {
    let rb = |j: usize| (recv.ptr.wrapping_offset(recv.displs[j]), recv.counts[j], recv.dtypes[j].clone());
    let algo = select::alltoall(cfg, size, None);
    match send {
        Some(sw) => {
            let sb = |j: usize| (sw.ptr.wrapping_offset(sw.displs[j]), sw.counts[j], sw.dtypes[j].clone());
            exchange(s, rank, size, &sb, &rb, algo);
        }
        None => in_place(s, rank, size, &rb, algo),
    }
    Ok(())
}

fn exchange(s: &mut Schedule, rank: i32, size: i32, sb: &dyn Fn(usize) -> Block, rb: &dyn Fn(usize) -> Block, algo: select::Alltoall) {
    let me = rank as usize;
    let (sp, sc, st) = sb(me);
    let (rp, rc, rt) = rb(me);
    s.copy(sp, sc, &st, rp, rc, &rt);
    for i in 1..size {
        let dst = ((rank + i) % size) as usize;
        let src = ((rank - i + size) % size) as usize;
        let (rp, rc, rt) = rb(src);
        s.recv(src as i32, 0, rp, rc, &rt);
        let (sp, sc, st) = sb(dst);
        s.send(dst as i32, 0, sp, sc, &st);
        if algo == select::Alltoall::Pairwise {
            s.round();
        }
    }
    s.round();
}

/// MPI_IN_PLACE: the data to send is in the receive blocks; pack it aside first.
fn in_place(s: &mut Schedule, rank: i32, size: i32, rb: &dyn Fn(usize) -> Block, algo: select::Alltoall) {
    let byte = byte_type();
    let n = size as usize;
    let mut offs = Vec::with_capacity(n + 1);
    let mut total = 0;
    for j in 0..n {
        offs.push(total);
        let (_, c, t) = rb(j);
        total += t.packed_size(c);
    }
    offs.push(total);
    let tmp = s.temp(total);
    for j in 0..n {
        if j != rank as usize {
            let (p, c, t) = rb(j);
            s.copy(p, c, &t, tmp.wrapping_add(offs[j]), offs[j + 1] - offs[j], &byte);
        }
    }
    s.round();
    let sb = |j: usize| -> Block {
        if j == rank as usize {
            rb(j)
        } else {
            (tmp.wrapping_add(offs[j]), offs[j + 1] - offs[j], byte.clone())
        }
    };
    exchange(s, rank, size, &sb, rb, algo);
}

/// Bruck's alltoall for small uniform blocks: ⌈log2 n⌉ rounds. Blocks are packed and
/// rotated so slot i holds the data for rank (rank + i) % n; in round k every slot with bit
/// k set travels k ranks to the right; a final rotation puts slot i at rank (rank - i) % n.
fn bruck(s: &mut Schedule, rank: i32, size: i32, send: Option<&Buf>, recv: &Buf, block: usize) {
    let byte = byte_type();
    let n = size as usize;
    let me = rank as usize;
    let tmp = s.temp(block * n);
    let (src, sc, st) = match send {
        Some(b) => (b.ptr, b.count, b.dtype.clone()),
        None => (recv.ptr, recv.count, recv.dtype.clone()),
    };
    for i in 0..n {
        let j = (me + i) % n;
        s.copy(at(src, &st, j * sc), sc, &st, tmp.wrapping_add(i * block), block, &byte);
    }
    s.round();
    let stage = s.temp(block * n.div_ceil(2));
    let inbox = s.temp(block * n.div_ceil(2));
    let mut k = 1usize;
    let mut round = 0;
    while k < n {
        let slots: Vec<usize> = (0..n).filter(|i| i & k != 0).collect();
        for (x, &i) in slots.iter().enumerate() {
            s.copy(tmp.wrapping_add(i * block), block, &byte, stage.wrapping_add(x * block), block, &byte);
        }
        s.round();
        let bytes = slots.len() * block;
        s.send(((me + k) % n) as i32, round, stage, bytes, &byte);
        s.recv(((me + n - k) % n) as i32, round, inbox, bytes, &byte);
        for (x, &i) in slots.iter().enumerate() {
            s.copy(inbox.wrapping_add(x * block), block, &byte, tmp.wrapping_add(i * block), block, &byte);
        }
        s.round();
        k *= 2;
        round += 1;
    }
    let t = &recv.dtype;
    for i in 0..n {
        let j = (me + n - i) % n;
        s.copy(tmp.wrapping_add(i * block), block, &byte, at(recv.ptr, t, j * recv.count), recv.count, t);
    }
    s.round();
}
