//! Collective buffering: the two-phase method.
//!
//! All ranks agree on the accessed range `[lo, hi)` of the file, split it into `cb_nodes`
//! equal file domains, one per aggregator, and walk the domains in windows of
//! `cb_buffer_size` bytes. In each round every rank sends each aggregator the pieces of its
//! request that fall in the aggregator's window (offsets and lengths, then the data for a
//! write), and the aggregator does one contiguous file access per window: a vectored write
//! straight from the received pieces when they tile the window's span, a read-modify-write
//! otherwise; for a read, one (vectored) read of the span and the pieces sent back. Many
//! small noncontiguous accesses become a few large contiguous ones. Data leaves from and
//! arrives in the caller's stream buffer without packing when the view allows it (any view
//! whose offsets grow with the stream), and the buffers the exchange needs are kept with
//! the file between calls.

use std::ffi::{c_int, c_void};
use std::fs::File;
use std::io::ErrorKind;
use std::os::unix::io::AsRawFd;

use super::{fail, mpi, os_err, pread_full, pwrite_full, read_segs, write_segs, FileObj, Hints, Tri, R};
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
    // Taken out of the file for the call, so no lock is held across the exchanges; an error
    // drops them and the next call starts afresh.
    let mut bufs = std::mem::take(&mut *fo.cb_bufs.lock().unwrap_or_else(|p| p.into_inner()));
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
        // My data for this round, in place in the stream buffer: displacements there, or
        // None when some aggregator's pieces are not one run of the stream.
        let in_place = if send_total > 0 { stream_displs(pieces, nprocs, &aggr_rank) } else { None };
        // The incoming pieces: (file offset, length, position in the data buffer).
        let mut inc: Vec<(i64, u64, usize)> = Vec::with_capacity(rmeta.len() / 2);
        let mut dp = 0usize;
        for pair in rmeta[..rmeta.len() - 1].chunks_exact(2) {
            inc.push((pair[0], pair[1] as u64, dp));
            dp += pair[1] as usize;
        }
        if write {
            let (sptr, sdispl) = match &in_place {
                Some(d) => (data as *const u8, d),
                None => {
                    let sbuf = grow(&mut bufs.send, send_total + 1);
                    let mut q = 0usize;
                    for p in pieces.iter() {
                        sbuf[q..q + p.len as usize].copy_from_slice(std::slice::from_raw_parts(data.add(p.spos as usize), p.len as usize));
                        q += p.len as usize;
                    }
                    (sbuf.as_ptr(), &bsd)
                }
            };
            let rbuf = grow(&mut bufs.recv, recv_total + 1);
            let rc = crate::coll::PMPI_Alltoallv_c(sptr as *const c_void, bsc.as_ptr(), sdispl.as_ptr(), abi::MPI_BYTE as _, rbuf.as_mut_ptr() as *mut c_void, brc.as_ptr(), brd.as_ptr(), abi::MPI_BYTE as _, comm);
            mpi(rc, "MPI_Alltoallv")?;
            if my_aggr.is_some() && !inc.is_empty() {
                aggregate_write(fo, &mut inc, &bufs.recv, &mut bufs.span)?;
            }
        } else {
            // Aggregator: read the window and answer each request in order.
            let sbuf = grow(&mut bufs.send, recv_total + 1);
            if my_aggr.is_some() && !inc.is_empty() {
                aggregate_read(fo, &mut inc, sbuf, &mut bufs.span)?;
            }
            // The reply goes the other way: what I received as requests, I send back as data,
            // into the stream buffer itself when the pieces allow it.
            let (rptr, rdispl) = match &in_place {
                Some(d) => (data, d),
                None => (grow(&mut bufs.recv, send_total + 1).as_mut_ptr(), &bsd),
            };
            let rc = crate::coll::PMPI_Alltoallv_c(bufs.send.as_ptr() as *const c_void, brc.as_ptr(), brd.as_ptr(), abi::MPI_BYTE as _, rptr as *mut c_void, bsc.as_ptr(), rdispl.as_ptr(), abi::MPI_BYTE as _, comm);
            mpi(rc, "MPI_Alltoallv")?;
            if in_place.is_none() {
                let mut q = 0usize;
                for p in pieces.iter() {
                    std::ptr::copy_nonoverlapping(bufs.recv.as_ptr().add(q), data.add(p.spos as usize), p.len as usize);
                    q += p.len as usize;
                }
            }
        }
    }
    *fo.cb_bufs.lock().unwrap_or_else(|p| p.into_inner()) = bufs;
    Ok(total)
}

/// The buffers of collective buffering. Allocating and faulting in fresh megabytes for every
/// call cost more than the copies themselves; they grow to the largest window seen and go
/// with the file.
#[derive(Default)]
pub(super) struct Buffers {
    send: Vec<u8>,
    recv: Vec<u8>,
    span: Vec<u8>,
}

/// The first `n` bytes of `v`, grown (never shrunk) as needed. The contents are whatever the
/// last call left: callers write every byte they later send or store.
fn grow(v: &mut Vec<u8>, n: usize) -> &mut [u8] {
    if v.len() < n {
        v.resize(n, 0);
    }
    &mut v[..n]
}

/// Where each aggregator's data starts in the stream buffer, when the pieces for every
/// aggregator (sorted by aggregator, stream order within) are one consecutive run of the
/// stream, as they are for any view whose offsets grow with the stream position. Then the
/// exchange sends from, or receives into, the user's buffer without packing.
fn stream_displs(pieces: &[Piece], nprocs: usize, aggr_rank: &dyn Fn(usize) -> i32) -> Option<Vec<abi::MPI_Aint>> {
    let mut d = vec![0 as abi::MPI_Aint; nprocs];
    for (i, p) in pieces.iter().enumerate() {
        match i.checked_sub(1).map(|j| &pieces[j]) {
            Some(q) if q.aggr == p.aggr => {
                if q.spos + q.len != p.spos {
                    return None;
                }
            }
            _ => d[aggr_rank(p.aggr) as usize] = p.spos as abi::MPI_Aint,
        }
    }
    Some(d)
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

/// Write the pieces one window received: when they tile their span exactly, one vectored
/// write straight from the receive buffer; otherwise a read-modify-write of the span.
fn aggregate_write(fo: &FileObj, inc: &mut [(i64, u64, usize)], rbuf: &[u8], span: &mut Vec<u8>) -> R<()> {
    inc.sort_by_key(|x| x.0);
    let s = inc[0].0;
    let e = inc.iter().map(|x| x.0 + x.1 as i64).max().unwrap_or(s);
    if tiles(inc) {
        let iov: Vec<libc::iovec> = inc.iter().map(|&(_, len, p)| libc::iovec { iov_base: rbuf[p..].as_ptr() as *mut c_void, iov_len: len as usize }).collect();
        return pwritev_full(&fo.file, &iov, s);
    }
    let mut covered = s;
    let mut holes = false;
    for &(off, len, _) in inc.iter() {
        if off > covered {
            holes = true;
            break;
        }
        covered = covered.max(off + len as i64);
    }
    let span = grow(span, (e - s) as usize);
    if holes {
        let got = pread_full(&fo.file, span, s)?;
        span[got..].fill(0);
    }
    for &(off, len, p) in inc.iter() {
        let b = (off - s) as usize;
        span[b..b + len as usize].copy_from_slice(&rbuf[p..p + len as usize]);
    }
    pwrite_full(&fo.file, span, s)
}

/// Read the pieces one window was asked for into `sbuf` (each at its position there): when
/// they tile their span exactly, one vectored read straight into place; otherwise one read
/// of the span and a copy of each piece. Bytes past the end of file read as zeros.
fn aggregate_read(fo: &FileObj, inc: &mut [(i64, u64, usize)], sbuf: &mut [u8], span: &mut Vec<u8>) -> R<()> {
    inc.sort_by_key(|x| x.0);
    let s = inc[0].0;
    let e = inc.iter().map(|x| x.0 + x.1 as i64).max().unwrap_or(s);
    if tiles(inc) {
        let base = sbuf.as_mut_ptr();
        let iov: Vec<libc::iovec> = inc.iter().map(|&(_, len, p)| libc::iovec { iov_base: unsafe { base.add(p) } as *mut c_void, iov_len: len as usize }).collect();
        let got = preadv_full(&fo.file, &iov, s)?;
        // A short read (the file shrank under us) leaves zeros, as the span path does.
        let mut at = 0usize;
        for &(_, len, p) in inc.iter() {
            let len = len as usize;
            if at + len > got {
                let keep = got.saturating_sub(at);
                sbuf[p + keep..p + len].fill(0);
            }
            at += len;
        }
        return Ok(());
    }
    let span = grow(span, (e - s) as usize);
    let got = pread_full(&fo.file, span, s)?;
    span[got..].fill(0);
    for &(off, len, p) in inc.iter() {
        let b = (off - s) as usize;
        sbuf[p..p + len as usize].copy_from_slice(&span[b..b + len as usize]);
    }
    Ok(())
}

/// The pieces (sorted by offset) follow one another with neither holes nor overlaps.
fn tiles(inc: &[(i64, u64, usize)]) -> bool {
    inc.windows(2).all(|w| w[0].0 + w[0].1 as i64 == w[1].0)
}

/// The kernel takes at most this many buffers in one vectored call.
const IOV_MAX: usize = 1024;

/// Write all of `iov` at `off`, resuming after partial writes.
fn pwritev_full(f: &File, iov: &[libc::iovec], off: i64) -> R<()> {
    let total: usize = iov.iter().map(|v| v.iov_len).sum();
    let n = vectored(f, iov, off, true)?;
    if n < total {
        return fail(abi::MPI_ERR_IO, format!("write: wrote {n} of {total} bytes"));
    }
    Ok(())
}

/// Read into `iov` from `off`; bytes read (short only at end of file).
fn preadv_full(f: &File, iov: &[libc::iovec], off: i64) -> R<usize> {
    vectored(f, iov, off, false)
}

fn vectored(f: &File, iov: &[libc::iovec], off: i64, write: bool) -> R<usize> {
    if off < 0 {
        return fail(abi::MPI_ERR_ARG, "negative file offset");
    }
    let fd = f.as_raw_fd();
    let mut iov = iov.to_vec();
    let (mut i, mut done) = (0usize, 0usize);
    while i < iov.len() {
        let cnt = (iov.len() - i).min(IOV_MAX) as c_int;
        let at = off + done as i64;
        let n = unsafe {
            if write { libc::pwritev(fd, iov[i..].as_ptr(), cnt, at) } else { libc::preadv(fd, iov[i..].as_ptr(), cnt, at) }
        };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == ErrorKind::Interrupted {
                continue;
            }
            return Err(os_err(if write { "pwritev" } else { "preadv" }, &e));
        }
        if n == 0 {
            break;
        }
        done += n as usize;
        // Skip the buffers done, and the done part of a partly done one.
        let mut left = n as usize;
        while i < iov.len() && left >= iov[i].iov_len {
            left -= iov[i].iov_len;
            i += 1;
        }
        if left > 0 {
            iov[i].iov_base = unsafe { (iov[i].iov_base as *mut u8).add(left) } as *mut c_void;
            iov[i].iov_len -= left;
        }
    }
    Ok(done)
}
