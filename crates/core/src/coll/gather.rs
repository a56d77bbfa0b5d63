//! Gather, scatter and allgather schedules.

use super::sched::{at, Schedule, SingleCopy};
use super::select::{self, CollConfig};
use super::{byte_type, Buf, VBuf};
use crate::error::{ErrorClass, MpiError, MpiResult};

fn need_send(b: Option<&Buf>) -> MpiResult<&Buf> {
    b.ok_or_else(|| MpiError::new(ErrorClass::Buffer, "MPI_IN_PLACE is only allowed at the root"))
}

/// Linear gather: the root posts every receive at once.
pub fn gatherv(s: &mut Schedule, rank: i32, size: i32, root: i32, send: Option<&Buf>, recv: &VBuf, crowded: bool) -> MpiResult<()> {
    let t = &recv.dtype;
    if rank == root {
        for i in 0..size as usize {
            if i as i32 != root {
                s.recv(i as i32, 0, recv.ptr.wrapping_offset(recv.displs[i] * t.extent), recv.counts[i], t);
            }
        }
        if let Some(sb) = send {
            let r = root as usize;
            s.copy(sb.ptr, sb.count, &sb.dtype, recv.ptr.wrapping_offset(recv.displs[r] * t.extent), recv.counts[r], t);
        }
    } else {
        let sb = need_send(send)?;
        // A large block does not wait for the root's FIN on a crowded host (`State::copy_sends`).
        s.copy_sends = crowded;
        s.send(root, 0, sb.ptr, sb.count, &sb.dtype);
    }
    s.round();
    Ok(())
}

/// Linear scatter: the root starts every send at once; its blocks above the eager limit are
/// read by their receivers with a single copy as `single_copy` says.
pub fn scatterv(s: &mut Schedule, rank: i32, size: i32, root: i32, send: &VBuf, recv: Option<&Buf>, single_copy: SingleCopy) -> MpiResult<()> {
    let t = &send.dtype;
    if rank == root {
        s.single_copy = single_copy;
        for i in 0..size as usize {
            if i as i32 != root {
                s.send(i as i32, 0, send.ptr.wrapping_offset(send.displs[i] * t.extent), send.counts[i], t);
            }
        }
        if let Some(rb) = recv {
            let r = root as usize;
            s.copy(send.ptr.wrapping_offset(send.displs[r] * t.extent), send.counts[r], t, rb.ptr, rb.count, &rb.dtype);
        }
    } else {
        let rb = recv.ok_or_else(|| MpiError::new(ErrorClass::Buffer, "MPI_IN_PLACE is only allowed at the root"))?;
        s.recv(root, 0, rb.ptr, rb.count, &rb.dtype);
    }
    s.round();
    Ok(())
}

/// MPI_Allgather: recursive doubling, Bruck or ring (see `select::allgather`).
pub fn allgather(s: &mut Schedule, rank: i32, size: i32, send: Option<&Buf>, recv: &Buf, cfg: &CollConfig) -> MpiResult<()> {
    let t = &recv.dtype;
    let rc = recv.count;
    let block = t.packed_size(rc);
    if block == 0 {
        return Ok(());
    }
    let me = rank as usize;
    match select::allgather(cfg, size, block * size as usize) {
        select::Allgather::RecursiveDoubling => {
            if let Some(sb) = send {
                s.copy(sb.ptr, sb.count, &sb.dtype, at(recv.ptr, t, me * rc), rc, t);
                s.round();
            }
            // Rank r holds the aligned group of `mask` blocks containing block r.
            let mut mask = 1;
            let mut k = 0;
            while mask < size {
                let partner = rank ^ mask;
                let mine = (rank & !(mask - 1)) as usize;
                let theirs = (partner & !(mask - 1)) as usize;
                s.send(partner, k, at(recv.ptr, t, mine * rc), mask as usize * rc, t);
                s.recv(partner, k, at(recv.ptr, t, theirs * rc), mask as usize * rc, t);
                s.round();
                mask <<= 1;
                k += 1;
            }
        }
        select::Allgather::Ring => {
            let v = super::uniform(recv, size);
            allgatherv(s, rank, size, send, &v)?;
        }
        select::Allgather::Bruck => {
            // Packed blocks in rotated order: slot j holds rank (rank + j) % size's data.
            let byte = byte_type();
            let n = size as usize;
            let tmp = s.temp(block * n);
            match send {
                Some(sb) => s.copy(sb.ptr, sb.count, &sb.dtype, tmp, block, &byte),
                None => s.copy(at(recv.ptr, t, me * rc), rc, t, tmp, block, &byte),
            }
            s.round();
            let mut k = 1usize;
            let mut round = 0;
            while k < n {
                let cnt = k.min(n - k);
                s.send(((me + n - k) % n) as i32, round, tmp, cnt * block, &byte);
                s.recv(((me + k) % n) as i32, round, tmp.wrapping_add(k * block), cnt * block, &byte);
                s.round();
                k *= 2;
                round += 1;
            }
            for j in 0..n {
                let owner = (me + j) % n;
                s.copy(tmp.wrapping_add(j * block), block, &byte, at(recv.ptr, t, owner * rc), rc, t);
            }
            s.round();
        }
    }
    Ok(())
}

/// MPI_Allgatherv (and large MPI_Allgather): ring, n-1 rounds; in round j a rank passes the
/// block it received in round j-1 to its right neighbour.
pub fn allgatherv(s: &mut Schedule, rank: i32, size: i32, send: Option<&Buf>, recv: &VBuf) -> MpiResult<()> {
    let t = &recv.dtype;
    let blk = |i: i32| recv.ptr.wrapping_offset(recv.displs[i as usize] * t.extent);
    if let Some(sb) = send {
        s.copy(sb.ptr, sb.count, &sb.dtype, blk(rank), recv.counts[rank as usize], t);
        s.round();
    }
    if recv.counts.iter().all(|&c| c == 0) {
        return Ok(());
    }
    let left = (rank - 1 + size) % size;
    let right = (rank + 1) % size;
    for j in 0..size - 1 {
        let sb = (rank - j + size) % size;
        let rb = (rank - j - 1 + size) % size;
        s.send(right, j as u32, blk(sb), recv.counts[sb as usize], t);
        s.recv(left, j as u32, blk(rb), recv.counts[rb as usize], t);
        s.round();
    }
    Ok(())
}
