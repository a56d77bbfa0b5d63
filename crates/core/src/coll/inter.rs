//! Intercommunicator collectives.
//!
//! Rooted collectives: the root passes [`super::ROOT`], the other members of its group
//! MPI_PROC_NULL (they take no part), and the other group the root's rank in the root's
//! group. Data moves between the groups directly (gather, scatter, all-to-all forms), or is
//! first combined inside a group with the intracommunicator algorithms run on the local group
//! (`Schedule::local`) and passed between the two groups' rank 0 (barrier, broadcast,
//! reductions), as MPICH does.

use super::sched::{at, Schedule};
use super::select::CollConfig;
use super::{bcast, byte_type, gather, reduce, Buf, Coll, RBuf, Topo, VBuf, ROOT};
use crate::engine::PROC_NULL;
use crate::error::{ErrorClass, MpiError, MpiResult};
use crate::op::Reduction;

/// Sub-tag of the messages between the two groups' leaders.
const SUB_LEADERS: u32 = 0xff0;

fn need<'a, T>(x: Option<&'a T>, what: &str) -> MpiResult<&'a T> {
    x.ok_or_else(|| MpiError::new(ErrorClass::Buffer, format!("MPI_IN_PLACE is not allowed on an intercommunicator ({what})")))
}

fn check_root(root: i32, remote: i32) -> MpiResult<()> {
    if root == ROOT || root == PROC_NULL || (0..remote).contains(&root) {
        Ok(())
    } else {
        Err(MpiError::new(ErrorClass::Root, format!("root {root} is neither MPI_ROOT, MPI_PROC_NULL nor a remote rank")))
    }
}

/// Write this rank's part of intercommunicator collective `c` into `s`.
pub fn build(s: &mut Schedule, t: Topo, c: &Coll, cfg: &CollConfig) -> MpiResult<()> {
    let (rank, size) = (t.rank, t.size);
    let remote = t.remote.unwrap_or(0);
    let byte = byte_type();
    match c {
        Coll::Barrier => {
            s.local = true;
            bcast::barrier(s, rank, size, cfg)?;
            s.local = false;
            if rank == 0 {
                s.send(0, SUB_LEADERS, std::ptr::null(), 0, &byte);
                s.recv(0, SUB_LEADERS, std::ptr::null_mut(), 0, &byte);
                s.round();
            }
            s.local = true;
            bcast::binomial(s, rank, size, 0, std::ptr::null_mut(), 0, &byte);
            s.local = false;
        }
        Coll::Bcast { buf, root } => {
            check_root(*root, remote)?;
            match *root {
                ROOT => {
                    s.send(0, 0, buf.ptr, buf.count, &buf.dtype);
                    s.round();
                }
                PROC_NULL => {}
                r => {
                    if rank == 0 {
                        s.recv(r, 0, buf.ptr, buf.count, &buf.dtype);
                        s.round();
                    }
                    s.local = true;
                    bcast::bcast(s, rank, size, 0, buf, cfg, false)?;
                    s.local = false;
                }
            }
        }
        Coll::Gather { send, recv, root } => {
            check_root(*root, remote)?;
            let v = super::uniform(recv, remote);
            gatherv(s, *root, send.as_ref(), &v, remote)?;
        }
        Coll::Gatherv { send, recv, root } => {
            check_root(*root, remote)?;
            gatherv(s, *root, send.as_ref(), recv, remote)?;
        }
        Coll::Scatter { send, recv, root } => {
            check_root(*root, remote)?;
            let v = super::uniform(send, remote);
            scatterv(s, *root, &v, recv.as_ref(), remote)?;
        }
        Coll::Scatterv { send, recv, root } => {
            check_root(*root, remote)?;
            scatterv(s, *root, send, recv.as_ref(), remote)?;
        }
        Coll::Allgather { send, recv } => {
            let sb = need(send.as_ref(), "sendbuf")?;
            for j in 0..remote {
                s.recv(j, 0, at(recv.ptr, &recv.dtype, j as usize * recv.count), recv.count, &recv.dtype);
                s.send(j, 0, sb.ptr, sb.count, &sb.dtype);
            }
            s.round();
        }
        Coll::Allgatherv { send, recv } => {
            let sb = need(send.as_ref(), "sendbuf")?;
            check_len(recv.counts.len(), remote)?;
            for j in 0..remote as usize {
                s.recv(j as i32, 0, recv.ptr.wrapping_offset(recv.displs[j] * recv.dtype.extent), recv.counts[j], &recv.dtype);
                s.send(j as i32, 0, sb.ptr, sb.count, &sb.dtype);
            }
            s.round();
        }
        Coll::Alltoall { send, recv } => {
            let sb = need(send.as_ref(), "sendbuf")?;
            for j in 0..remote as usize {
                s.recv(j as i32, 0, at(recv.ptr, &recv.dtype, j * recv.count), recv.count, &recv.dtype);
                s.send(j as i32, 0, at(sb.ptr, &sb.dtype, j * sb.count), sb.count, &sb.dtype);
            }
            s.round();
        }
        Coll::Alltoallv { send, recv } => {
            let sb = need(send.as_ref(), "sendbuf")?;
            check_len(recv.counts.len(), remote)?;
            check_len(sb.counts.len(), remote)?;
            for j in 0..remote as usize {
                s.recv(j as i32, 0, recv.ptr.wrapping_offset(recv.displs[j] * recv.dtype.extent), recv.counts[j], &recv.dtype);
                s.send(j as i32, 0, sb.ptr.wrapping_offset(sb.displs[j] * sb.dtype.extent), sb.counts[j], &sb.dtype);
            }
            s.round();
        }
        Coll::Alltoallw { send, recv } => {
            let sb = need(send.as_ref(), "sendbuf")?;
            check_len(recv.counts.len(), remote)?;
            check_len(sb.counts.len(), remote)?;
            for j in 0..remote as usize {
                s.recv(j as i32, 0, recv.ptr.wrapping_offset(recv.displs[j]), recv.counts[j], &recv.dtypes[j]);
                s.send(j as i32, 0, sb.ptr.wrapping_offset(sb.displs[j]), sb.counts[j], &sb.dtypes[j]);
            }
            s.round();
        }
        Coll::Reduce { buf, red, root } => {
            check_root(*root, remote)?;
            s.red = Some(red.clone());
            if buf.count == 0 {
                return Ok(());
            }
            match *root {
                ROOT => {
                    s.recv(0, 0, buf.recv, buf.count, &red.dtype);
                    s.round();
                }
                PROC_NULL => {}
                r => {
                    let tmp = local_reduce(s, rank, size, buf, buf.count, red)?;
                    if rank == 0 {
                        s.send(r, 0, tmp, buf.count, &red.dtype);
                        s.round();
                    }
                }
            }
        }
        Coll::Allreduce { buf, red } => {
            s.red = Some(red.clone());
            if buf.count == 0 {
                return Ok(());
            }
            let tmp = local_reduce(s, rank, size, buf, buf.count, red)?;
            if rank == 0 {
                s.send(0, SUB_LEADERS, tmp, buf.count, &red.dtype);
                s.recv(0, SUB_LEADERS, buf.recv, buf.count, &red.dtype);
                s.round();
            }
            s.local = true;
            let b = Buf { ptr: buf.recv, count: buf.count, dtype: red.dtype.clone() };
            bcast::bcast(s, rank, size, 0, &b, cfg, false)?;
            s.local = false;
        }
        Coll::ReduceScatterBlock { buf, red } => {
            s.red = Some(red.clone());
            let counts = vec![buf.count; size as usize];
            reduce_scatter(s, rank, size, buf, &counts, red)?;
        }
        Coll::ReduceScatter { buf, counts, red } => {
            s.red = Some(red.clone());
            check_len(counts.len(), size)?;
            reduce_scatter(s, rank, size, buf, counts, red)?;
        }
        Coll::Scan { .. } | Coll::Exscan { .. } => {
            return Err(MpiError::new(ErrorClass::Comm, "MPI_Scan and MPI_Exscan are not defined on intercommunicators"));
        }
        Coll::Neighbor { .. } => {
            return Err(MpiError::new(ErrorClass::Topology, "neighborhood collectives need a process topology on an intracommunicator"));
        }
    }
    Ok(())
}

fn check_len(n: usize, want: i32) -> MpiResult<()> {
    if n != want as usize {
        return Err(MpiError::new(ErrorClass::Arg, "per-rank arrays need one entry per rank of the remote group"));
    }
    Ok(())
}

/// Reduce this group's `count`-element send buffers to local rank 0; returns the buffer
/// holding the result there (null elsewhere).
fn local_reduce(s: &mut Schedule, rank: i32, size: i32, buf: &RBuf, count: usize, red: &Reduction) -> MpiResult<*mut u8> {
    let send = buf.send.ok_or_else(|| MpiError::new(ErrorClass::Buffer, "MPI_IN_PLACE is not allowed on an intercommunicator"))?;
    let tmp = if rank == 0 { s.temp_typed(&red.dtype, count) } else { std::ptr::null_mut() };
    s.local = true;
    reduce::binomial(s, rank, size, 0, Some(send), tmp, count, red);
    s.local = false;
    Ok(tmp)
}

/// Reduce this group's vectors to local rank 0, swap the results between the two groups'
/// rank 0, and scatter the other group's result inside this group.
fn reduce_scatter(s: &mut Schedule, rank: i32, size: i32, buf: &RBuf, counts: &[usize], red: &Reduction) -> MpiResult<()> {
    let total: usize = counts.iter().sum();
    if total == 0 {
        return Ok(());
    }
    let t = &red.dtype;
    let mine = local_reduce(s, rank, size, buf, total, red)?;
    let theirs = if rank == 0 { s.temp_typed(t, total) } else { std::ptr::null_mut() };
    if rank == 0 {
        s.send(0, SUB_LEADERS, mine, total, t);
        s.recv(0, SUB_LEADERS, theirs, total, t);
        s.round();
    }
    let mut displs = Vec::with_capacity(counts.len());
    let mut d = 0isize;
    for c in counts {
        displs.push(d);
        d += *c as isize;
    }
    let v = VBuf { ptr: theirs, counts: counts.to_vec(), displs, dtype: t.clone() };
    let r = Buf { ptr: buf.recv, count: counts[rank as usize], dtype: t.clone() };
    s.local = true;
    gather::scatterv(s, rank, size, 0, &v, Some(&r), super::sched::SingleCopy::Yes)?;
    s.local = false;
    Ok(())
}

fn gatherv(s: &mut Schedule, root: i32, send: Option<&Buf>, recv: &VBuf, remote: i32) -> MpiResult<()> {
    match root {
        ROOT => {
            check_len(recv.counts.len(), remote)?;
            for j in 0..remote as usize {
                s.recv(j as i32, 0, recv.ptr.wrapping_offset(recv.displs[j] * recv.dtype.extent), recv.counts[j], &recv.dtype);
            }
            s.round();
        }
        PROC_NULL => {}
        r => {
            let sb = need(send, "sendbuf")?;
            s.send(r, 0, sb.ptr, sb.count, &sb.dtype);
            s.round();
        }
    }
    Ok(())
}

fn scatterv(s: &mut Schedule, root: i32, send: &VBuf, recv: Option<&Buf>, remote: i32) -> MpiResult<()> {
    match root {
        ROOT => {
            check_len(send.counts.len(), remote)?;
            for j in 0..remote as usize {
                s.send(j as i32, 0, send.ptr.wrapping_offset(send.displs[j] * send.dtype.extent), send.counts[j], &send.dtype);
            }
            s.round();
        }
        PROC_NULL => {}
        r => {
            let rb = need(recv, "recvbuf")?;
            s.recv(r, 0, rb.ptr, rb.count, &rb.dtype);
            s.round();
        }
    }
    Ok(())
}
