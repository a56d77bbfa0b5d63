//! Collective buffering: the two-phase method.
//!
//! All ranks agree on the accessed range `[lo, hi)` of the file, split it into `cb_nodes`
//! equal file domains, one per aggregator, and walk the domains in windows of
//! `cb_buffer_size` bytes. In each round every rank sends each aggregator the pieces of its
//! request that fall in the aggregator's window (offsets and lengths, then the data for a
//! write), and the aggregator does one contiguous file access per window: a plain write when
//! the pieces cover the window's span, a read-modify-write otherwise; for a read, one read
//! of the span and the pieces sent back. Many small noncontiguous accesses become a few
//! large contiguous ones.

use std::ffi::c_void;

use super::{mpi, pread_full, pwrite_full, read_segs, write_segs, FileObj, Hints, Tri, R};
use crate::abi;

/// One piece of a rank's request inside one window.
#[derive(Clone, Copy)]
struct Piece {
    off: i64,
    len: u64,
    /// Position of the piece in the rank's stream buffer.
    spos: u64,
    aggr: usize,
}

/// A collective access of `segs` (stream order) with stream buffer `data` (`nbytes` bytes).
/// Returns the data bytes read or written.
pub(super) unsafe fn collective(fo: &FileObj, h: &Hints, write: bool, segs: &[(i64, u64)], data: *mut u8, nbytes: u64) -> R<u64> {
    let nprocs = fo.nprocs as usize;
    // Reads stop at the end of file: clip the request first, so aggregators never read
    // past it and every rank knows its count.
    let mut segs: Vec<(i64, u64)> = segs.to_vec();
    let mut total = nbytes;
    if !write {
        let eof = fo.size()?;
        let mut kept = 0u64;
        let mut out = Vec::with_capacity(segs.len());
        for &(off, len) in &segs {
            if off >= eof {
                break;
            }
            let take = (len as i64).min(eof - off) as u64;
            out.push((off, take));
            kept += take;
            if take < len {
                break;
            }
        }
        segs = out;
        total = kept;
    }
    let lo = segs.iter().map(|s| s.0).min().unwrap_or(i64::MAX);
    let hi = segs.iter().map(|s| s.0 + s.1 as i64).max().unwrap_or(i64::MIN);
    let noncontig = (segs.len() > 1) as i64;
    // One MIN reduction gives min(lo), max(hi) and whether anyone is noncontiguous.
    let mut v = [lo, hi.saturating_neg(), -noncontig];
    fo.allreduce_i64(&mut v, abi::MPI_MIN)?;
    let (glo, ghi, any_noncontig) = (v[0], -v[1], v[2] < 0);
    let mode = if write { h.cb_write } else { h.cb_read };
    let use_cb = match mode {
        Tri::Enable => true,
        Tri::Disable => false,
        Tri::Auto => any_noncontig && nprocs > 1,
    };
    if !use_cb || glo >= ghi {
        let buf = std::slice::from_raw_parts_mut(data, nbytes as usize);
        return if write {
            write_segs(fo, h, false, &segs, buf)?;
            Ok(nbytes)
        } else {
            read_segs(fo, h, false, &segs, &mut buf[..total as usize])
        };
    }
    let naggr = h.cb_nodes.clamp(1, nprocs);
    let aggr_rank = |a: usize| (a * nprocs / naggr) as i32;
    let my_aggr = (0..naggr).find(|&a| aggr_rank(a) == fo.rank);
    // File domains: equal shares, rounded up to the striping unit when one is given.
    let mut dsize = ((ghi - glo) as u64).div_ceil(naggr as u64).max(1);
    if h.striping_unit > 0 {
        dsize = dsize.div_ceil(h.striping_unit as u64) * h.striping_unit as u64;
    }
    let cbs = h.cb_buffer_size as u64;
    let rounds = dsize.div_ceil(cbs) as usize;
    // Split the request into pieces per (round, aggregator).
    let mut by_round: Vec<Vec<Piece>> = vec![Vec::new(); rounds];
    let mut sp = 0u64;
    for &(off, len) in &segs {
        let mut o = off;
        let mut left = len;
        while left > 0 {
            let rel = (o - glo) as u64;
            let a = (rel / dsize) as usize;
            let within = rel - a as u64 * dsize;
            let r = (within / cbs) as usize;
            let wend = (a as u64 * dsize + ((r as u64 + 1) * cbs).min(dsize)) as i64 + glo;
            let take = left.min((wend - o) as u64);
            by_round[r].push(Piece { off: o, len: take, spos: sp, aggr: a });
            o += take as i64;
            sp += take;
            left -= take;
        }
    }
    let comm = fo.mpi_comm();
    let mut scount = vec![0i64; 2 * nprocs];
    let mut rcount = vec![0i64; 2 * nprocs];
    for pieces in by_round.iter_mut() {
        pieces.sort_by_key(|p| p.aggr);
        scount.fill(0);
        for p in pieces.iter() {
            let d = aggr_rank(p.aggr) as usize;
            scount[2 * d] += 2;
            scount[2 * d + 1] += p.len as i64;
        }
        let rc = crate::coll::PMPI_Alltoall(scount.as_ptr() as *const c_void, 2, abi::MPI_INT64_T as _, rcount.as_mut_ptr() as *mut c_void, 2, abi::MPI_INT64_T as _, comm);
        mpi(rc, "MPI_Alltoall")?;
        // Offsets and lengths of the pieces.
        let mut meta: Vec<i64> = pieces.iter().flat_map(|p| [p.off, p.len as i64]).collect();
        meta.push(0);
        let (sc, sd) = counts_displs((0..nprocs).map(|d| scount[2 * d]));
        let (rc_, rd) = counts_displs((0..nprocs).map(|d| rcount[2 * d]));
        // Never an empty vector: its dangling pointer could look like MPI_IN_PLACE.
        let mut rmeta = vec![0i64; rd.last().map_or(0, |&x| x as usize) + rc_.last().map_or(0, |&x| x as usize) + 1];
        let rc = crate::coll::PMPI_Alltoallv_c(meta.as_ptr() as *const c_void, sc.as_ptr(), sd.as_ptr(), abi::MPI_INT64_T as _, rmeta.as_mut_ptr() as *mut c_void, rc_.as_ptr(), rd.as_ptr(), abi::MPI_INT64_T as _, comm);
        mpi(rc, "MPI_Alltoallv")?;
        // Data bytes each rank sends / receives in this round.
        let (bsc, bsd) = counts_displs((0..nprocs).map(|d| scount[2 * d + 1]));
        let (brc, brd) = counts_displs((0..nprocs).map(|d| rcount[2 * d + 1]));
        let recv_total = brd.last().map_or(0, |&x| x as usize) + brc.last().map_or(0, |&x| x as usize);
        let send_total = bsd.last().map_or(0, |&x| x as usize) + bsc.last().map_or(0, |&x| x as usize);
        // The incoming pieces: (file offset, length, position in the data buffer).
        let mut inc: Vec<(i64, u64, usize)> = Vec::with_capacity(rmeta.len() / 2);
        let mut dp = 0usize;
        for pair in rmeta[..rmeta.len() - 1].chunks_exact(2) {
            inc.push((pair[0], pair[1] as u64, dp));
            dp += pair[1] as usize;
        }
        if write {
            let mut sbuf = Vec::with_capacity(send_total + 1);
            for p in pieces.iter() {
                sbuf.extend_from_slice(std::slice::from_raw_parts(data.add(p.spos as usize), p.len as usize));
            }
            sbuf.push(0);
            let mut rbuf = vec![0u8; recv_total + 1];
            let rc = crate::coll::PMPI_Alltoallv_c(sbuf.as_ptr() as *const c_void, bsc.as_ptr(), bsd.as_ptr(), abi::MPI_BYTE as _, rbuf.as_mut_ptr() as *mut c_void, brc.as_ptr(), brd.as_ptr(), abi::MPI_BYTE as _, comm);
            mpi(rc, "MPI_Alltoallv")?;
            if my_aggr.is_some() && !inc.is_empty() {
                aggregate_write(fo, &mut inc, &rbuf)?;
            }
        } else {
            // Aggregator: read the span once and answer each request in order.
            let mut sbuf = vec![0u8; recv_total + 1];
            if my_aggr.is_some() && !inc.is_empty() {
                let s = inc.iter().map(|x| x.0).min().unwrap_or(0);
                let e = inc.iter().map(|x| x.0 + x.1 as i64).max().unwrap_or(0);
                let mut span = vec![0u8; (e - s) as usize];
                pread_full(&fo.file, &mut span, s)?;
                for &(off, len, p) in &inc {
                    let b = (off - s) as usize;
                    sbuf[p..p + len as usize].copy_from_slice(&span[b..b + len as usize]);
                }
            }
            let mut rbuf = vec![0u8; send_total + 1];
            // The reply goes the other way: what I received as requests, I send back as data.
            let rc = crate::coll::PMPI_Alltoallv_c(sbuf.as_ptr() as *const c_void, brc.as_ptr(), brd.as_ptr(), abi::MPI_BYTE as _, rbuf.as_mut_ptr() as *mut c_void, bsc.as_ptr(), bsd.as_ptr(), abi::MPI_BYTE as _, comm);
            mpi(rc, "MPI_Alltoallv")?;
            let mut q = 0usize;
            for p in pieces.iter() {
                std::ptr::copy_nonoverlapping(rbuf.as_ptr().add(q), data.add(p.spos as usize), p.len as usize);
                q += p.len as usize;
            }
        }
    }
    Ok(total)
}

/// Counts and displacements (MPI_Count / MPI_Aint) from counts.
fn counts_displs(counts: impl Iterator<Item = i64>) -> (Vec<abi::MPI_Count>, Vec<abi::MPI_Aint>) {
    let c: Vec<i64> = counts.collect();
    let mut d = Vec::with_capacity(c.len());
    let mut acc = 0isize;
    for &x in &c {
        d.push(acc);
        acc += x as isize;
    }
    (c, d)
}

/// Write the pieces one window received: one write if they cover their span, otherwise a
/// read-modify-write of the span.
fn aggregate_write(fo: &FileObj, inc: &mut [(i64, u64, usize)], rbuf: &[u8]) -> R<()> {
    inc.sort_by_key(|x| x.0);
    let s = inc[0].0;
    let e = inc.iter().map(|x| x.0 + x.1 as i64).max().unwrap_or(s);
    let mut covered = s;
    let mut holes = false;
    for &(off, len, _) in inc.iter() {
        if off > covered {
            holes = true;
            break;
        }
        covered = covered.max(off + len as i64);
    }
    let mut span = vec![0u8; (e - s) as usize];
    if holes {
        pread_full(&fo.file, &mut span, s)?;
    }
    for &(off, len, p) in inc.iter() {
        let b = (off - s) as usize;
        span[b..b + len as usize].copy_from_slice(&rbuf[p..p + len as usize]);
    }
    pwrite_full(&fo.file, &span, s)
}
