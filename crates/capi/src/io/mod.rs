//! MPI-IO (MPI 5.0 chapter 14) on POSIX files.
//!
//! The file layer sits on top of the library's own MPI calls, the way ROMIO sits on top of
//! MPI: every open file owns a private duplicate of the communicator (error handler
//! MPI_ERRORS_RETURN) and coordinates through ordinary collectives on it. No engine lock is
//! held while a file call runs, except to look up datatypes and make error codes.
//!
//! - Data moves as a *stream*: the bytes of `count` elements of the memory datatype in
//!   type-map order, in the file's data representation. A file view maps stream positions
//!   to file offsets ([`View::map`]); the filetype's runs are flattened once at set_view.
//! - Independent access of a noncontiguous region uses data sieving (one large read, or a
//!   locked read-modify-write) when the hints allow it; collective access reorganises the
//!   data among aggregators (two-phase, `cb.rs`).
//! - Nonblocking calls do their I/O at once and return an already completed generalized
//!   request; nonblocking collective calls (`MPI_File_i*_all`) access the file
//!   independently, which the standard allows (collective access only adds hints) and which
//!   cannot deadlock whatever the application does before the wait. Split collectives do the
//!   collective access in `_begin`.
//! - Shared file pointers live in a small side file next to the data file, updated under a
//!   `fcntl` lock.

mod api;
mod cb;

use std::collections::HashMap;
use std::ffi::{c_int, c_void, CStr};
use std::fs::File;
use std::io::ErrorKind;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use steadfast_core::datatype::TypeRef;
use steadfast_core::{Handle, MpiError};

use crate::abi::{self, MPI_Status};
use crate::global::{self, lock};

// ---- errors --------------------------------------------------------------------------------

/// Why a file call failed: an ABI error class (or a code from a nested MPI call) and a message.
#[derive(Debug)]
pub(crate) struct IoErr {
    class: c_int,
    /// An error code already made by a nested MPI call, handed on unchanged.
    code: Option<c_int>,
    msg: String,
}

type R<T> = Result<T, IoErr>;

fn fail<T>(class: c_int, msg: impl Into<String>) -> R<T> {
    Err(IoErr { class, code: None, msg: msg.into() })
}

impl From<MpiError> for IoErr {
    fn from(e: MpiError) -> IoErr {
        IoErr { class: global::abi_class(e.class), code: None, msg: e.msg }
    }
}

/// The error class of an operating-system error, as the standard names them.
fn os_err(what: &str, e: &std::io::Error) -> IoErr {
    let class = match e.raw_os_error() {
        Some(libc::ENOENT) | Some(libc::ENOTDIR) => abi::MPI_ERR_NO_SUCH_FILE,
        Some(libc::EACCES) | Some(libc::EPERM) => abi::MPI_ERR_ACCESS,
        Some(libc::EEXIST) => abi::MPI_ERR_FILE_EXISTS,
        Some(libc::EROFS) => abi::MPI_ERR_READ_ONLY,
        Some(libc::ENOSPC) | Some(libc::EFBIG) => abi::MPI_ERR_NO_SPACE,
        Some(libc::EDQUOT) => abi::MPI_ERR_QUOTA,
        Some(libc::ENAMETOOLONG) => abi::MPI_ERR_BAD_FILE,
        Some(libc::EISDIR) => abi::MPI_ERR_BAD_FILE,
        Some(libc::ETXTBSY) | Some(libc::EBUSY) => abi::MPI_ERR_FILE_IN_USE,
        _ => abi::MPI_ERR_IO,
    };
    IoErr { class, code: None, msg: format!("{what}: {e}") }
}

/// Check the return code of a nested MPI call.
fn mpi(rc: c_int, what: &str) -> R<()> {
    if rc == abi::MPI_SUCCESS {
        Ok(())
    } else {
        Err(IoErr { class: global::class_of(rc), code: Some(rc), msg: format!("{what} failed") })
    }
}

// ---- handles -------------------------------------------------------------------------------

/// Handles are small integers above the predefined range (their Fortran and `_toint` integers
/// come from the one conversion table of `fint.rs`).
const FIRST_HANDLE: usize = 0x1_0000;
static NEXT_HANDLE: AtomicUsize = AtomicUsize::new(FIRST_HANDLE);

static FILES: Mutex<Option<HashMap<usize, Arc<FileObj>>>> = Mutex::new(None);

fn files() -> MutexGuard<'static, Option<HashMap<usize, Arc<FileObj>>>> {
    FILES.lock().unwrap_or_else(|p| p.into_inner())
}

fn lookup(fh: usize) -> R<Arc<FileObj>> {
    if fh == abi::MPI_FILE_NULL {
        return fail(abi::MPI_ERR_FILE, "MPI_FILE_NULL is not a valid file here");
    }
    files().as_ref().and_then(|m| m.get(&fh).cloned()).map_or_else(|| fail(abi::MPI_ERR_FILE, format!("invalid file handle {fh:#x}")), Ok)
}

/// Error handler of MPI_FILE_NULL: the one files get at open (MPI_ERRORS_RETURN by default).
static DEFAULT_ERRH: AtomicUsize = AtomicUsize::new(abi::MPI_ERRORS_RETURN);

// ---- file objects --------------------------------------------------------------------------

/// enable / disable / automatic, as ROMIO spells its hint values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tri {
    Enable,
    Disable,
    Auto,
}

impl Tri {
    fn parse(s: &str) -> Option<Tri> {
        match s.trim() {
            "enable" | "true" => Some(Tri::Enable),
            "disable" | "false" => Some(Tri::Disable),
            "automatic" => Some(Tri::Auto),
            _ => None,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Tri::Enable => "enable",
            Tri::Disable => "disable",
            Tri::Auto => "automatic",
        }
    }
}

/// The hints a file uses (see docs/io.md).
#[derive(Debug, Clone)]
struct Hints {
    cb_nodes: usize,
    cb_buffer_size: usize,
    cb_read: Tri,
    cb_write: Tri,
    ds_read: Tri,
    ds_write: Tri,
    ind_rd_buffer_size: usize,
    ind_wr_buffer_size: usize,
    striping_unit: usize,
}

impl Hints {
    fn defaults(nprocs: usize) -> Hints {
        Hints {
            cb_nodes: nprocs,
            cb_buffer_size: 16 << 20,
            cb_read: Tri::Auto,
            cb_write: Tri::Auto,
            ds_read: Tri::Auto,
            ds_write: Tri::Auto,
            ind_rd_buffer_size: 4 << 20,
            ind_wr_buffer_size: 512 << 10,
            striping_unit: 0,
        }
    }

    /// Take the hints we understand from `info`; unknown keys and bad values are ignored,
    /// as the standard asks.
    fn apply(&mut self, info: &steadfast_core::info::Info, nprocs: usize) {
        let size = |s: &str| s.trim().parse::<usize>().ok().filter(|v| *v > 0);
        for (k, v) in info.iter() {
            match k {
                "cb_nodes" => {
                    if let Some(n) = size(v) {
                        self.cb_nodes = n.min(nprocs);
                    }
                }
                "cb_buffer_size" => {
                    if let Some(n) = size(v) {
                        // Counts of one exchange must fit an int on every MPI.
                        self.cb_buffer_size = n.clamp(4096, 1 << 30);
                    }
                }
                "romio_cb_read" => self.cb_read = Tri::parse(v).unwrap_or(self.cb_read),
                "romio_cb_write" => self.cb_write = Tri::parse(v).unwrap_or(self.cb_write),
                "collective_buffering" => {
                    if let Some(t) = Tri::parse(v) {
                        self.cb_read = t;
                        self.cb_write = t;
                    }
                }
                "romio_ds_read" => self.ds_read = Tri::parse(v).unwrap_or(self.ds_read),
                "romio_ds_write" => self.ds_write = Tri::parse(v).unwrap_or(self.ds_write),
                "ind_rd_buffer_size" => self.ind_rd_buffer_size = size(v).unwrap_or(self.ind_rd_buffer_size),
                "ind_wr_buffer_size" => self.ind_wr_buffer_size = size(v).unwrap_or(self.ind_wr_buffer_size),
                "striping_unit" => self.striping_unit = size(v).unwrap_or(self.striping_unit),
                _ => {}
            }
        }
    }

    fn to_pairs(&self) -> Vec<(&'static str, String)> {
        vec![
            ("cb_nodes", self.cb_nodes.to_string()),
            ("cb_buffer_size", self.cb_buffer_size.to_string()),
            ("romio_cb_read", self.cb_read.name().into()),
            ("romio_cb_write", self.cb_write.name().into()),
            ("romio_ds_read", self.ds_read.name().into()),
            ("romio_ds_write", self.ds_write.name().into()),
            ("ind_rd_buffer_size", self.ind_rd_buffer_size.to_string()),
            ("ind_wr_buffer_size", self.ind_wr_buffer_size.to_string()),
            ("striping_unit", self.striping_unit.to_string()),
        ]
    }
}

/// A data representation.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Rep {
    Native,
    /// Same bytes as native (the standard leaves "internal" to the implementation).
    Internal,
    External32,
    /// Registered with MPI_Register_datarep (index into [`DATAREPS`]).
    User(usize),
}

/// A file view: displacement, etype, filetype (flattened) and data representation.
#[derive(Clone)]
struct View {
    disp: i64,
    /// Application-visible handles: predefined ones, or our own duplicates of derived types.
    etype_h: usize,
    ftype_h: usize,
    esize: u64,
    /// Data bytes and extent of one filetype.
    fsize: u64,
    fext: i64,
    /// Runs of one filetype (offset from the filetype's origin, length), and the data bytes
    /// before each run.
    runs: Arc<Vec<(i64, u64)>>,
    pre: Arc<Vec<u64>>,
    /// The view is the plain byte stream from `disp` on.
    contiguous: bool,
    rep: Rep,
    rep_name: String,
}

/// Largest number of runs a filetype may flatten into.
const MAX_RUNS: usize = 1 << 24;

impl View {
    fn new(disp: i64, etype: TypeRef, etype_h: usize, ftype: &TypeRef, ftype_h: usize, rep: Rep, rep_name: String, overlap_ok: bool) -> R<View> {
        // The standard requires etype and filetype displacements to be non-negative and
        // monotonically nondecreasing; overlaps are only harmless on read-only files (MPICH
        // reports MPI_ERR_IO for these too).
        let mut bad = false;
        let mut check = |start: &mut isize, end: &mut isize, off: isize, len: usize| {
            bad |= off < 0 || off < *start || (!overlap_ok && off < *end);
            *start = off;
            *end = (*end).max(off + len as isize);
        };
        let (mut s0, mut e0) = (0isize, 0isize);
        etype.for_each_run(1, 0, usize::MAX, |off, len| {
            if len > 0 {
                check(&mut s0, &mut e0, off, len);
            }
        });
        let (mut s0, mut e0) = (0isize, 0isize);
        let mut runs: Vec<(i64, u64)> = Vec::new();
        let mut too_many = false;
        ftype.for_each_run(1, 0, usize::MAX, |off, len| {
            if len == 0 || too_many {
                return;
            }
            check(&mut s0, &mut e0, off, len);
            if let Some(last) = runs.last_mut() {
                if last.0 + last.1 as i64 == off as i64 {
                    last.1 += len as u64;
                    return;
                }
            }
            if runs.len() >= MAX_RUNS {
                too_many = true;
                return;
            }
            runs.push((off as i64, len as u64));
        });
        if too_many {
            return fail(abi::MPI_ERR_NO_MEM, "the filetype has too many separate runs");
        }
        if bad {
            return fail(abi::MPI_ERR_IO, "etype and filetype displacements must be non-negative and nondecreasing (and not overlap in a writable file)");
        }
        let mut pre = Vec::with_capacity(runs.len());
        let mut acc = 0u64;
        for r in &runs {
            pre.push(acc);
            acc += r.1;
        }
        let fsize = acc;
        let fext = ftype.extent as i64;
        let contiguous = runs.len() == 1 && runs[0].0 == 0 && fext == fsize as i64;
        Ok(View {
            disp,
            esize: etype.size as u64,
            etype_h,
            ftype_h,
            fsize,
            fext,
            runs: Arc::new(runs),
            pre: Arc::new(pre),
            contiguous,
            rep,
            rep_name,
        })
    }

    fn default_view() -> R<View> {
        let byte = {
            let g = lock();
            let g = g.as_ref().ok_or_else(|| IoErr { class: abi::MPI_ERR_OTHER, code: None, msg: "MPI is not initialised".into() })?;
            global::dtype(g, abi::MPI_BYTE)?
        };
        View::new(0, byte.clone(), abi::MPI_BYTE, &byte, abi::MPI_BYTE, Rep::Native, "native".into(), true)
    }

    /// File segments (offset, length) holding stream bytes `[pos, pos + len)`, in stream
    /// order, adjacent ones merged.
    fn map(&self, pos: u64, len: u64, out: &mut Vec<(i64, u64)>) -> R<()> {
        if len == 0 {
            return Ok(());
        }
        if self.contiguous {
            out.push((self.disp + pos as i64, len));
            return Ok(());
        }
        if self.fsize == 0 {
            return fail(abi::MPI_ERR_ARG, "the file view's filetype holds no data");
        }
        let mut tile = pos / self.fsize;
        let mut r = pos % self.fsize;
        let mut i = self.pre.partition_point(|&p| p <= r) - 1;
        let mut left = len;
        while left > 0 {
            let (off, l) = self.runs[i];
            let within = r - self.pre[i];
            let take = (l - within).min(left);
            let fo = self.disp + tile as i64 * self.fext + off + within as i64;
            match out.last_mut() {
                Some(last) if last.0 + last.1 as i64 == fo => last.1 += take,
                _ => out.push((fo, take)),
            }
            left -= take;
            r += take;
            i += 1;
            if i == self.runs.len() {
                i = 0;
                tile += 1;
                r = 0;
            }
        }
        Ok(())
    }

    /// Stream position of the first byte at or after file offset `eof` (the view's end of
    /// file).
    fn eof_pos(&self, eof: i64) -> u64 {
        if eof <= self.disp {
            return 0;
        }
        let rel = eof - self.disp;
        if self.contiguous {
            return rel as u64;
        }
        if self.fext <= 0 {
            return 0;
        }
        let tile = rel / self.fext;
        let within = rel - tile * self.fext;
        let part: u64 = self.runs.iter().map(|&(o, l)| if o + l as i64 <= within { l } else if o < within { (within - o) as u64 } else { 0 }).sum();
        tile as u64 * self.fsize + part
    }
}

/// Mutable state of an open file.
struct State {
    view: View,
    /// Individual file pointer, in etypes of the view.
    fp: i64,
    atomic: bool,
    hints: Hints,
    errh: usize,
    /// A split collective begun and not yet ended: its data bytes.
    split: Option<u64>,
    /// Our duplicates of derived etype / filetype, freed when the view changes.
    owned_types: Vec<usize>,
}

/// An open file.
pub(crate) struct FileObj {
    file: File,
    /// The file was opened for reading too (data sieving of writes needs it).
    can_read: bool,
    comm: usize,
    rank: i32,
    nprocs: i32,
    amode: c_int,
    path: PathBuf,
    /// Side file holding the shared file pointer (8 bytes, etypes).
    shfp: Option<(File, PathBuf)>,
    st: Mutex<State>,
    /// Collective buffering's buffers, kept from one collective call to the next.
    cb_bufs: Mutex<cb::Buffers>,
}

impl FileObj {
    fn st(&self) -> MutexGuard<'_, State> {
        self.st.lock().unwrap_or_else(|p| p.into_inner())
    }
    fn mpi_comm(&self) -> abi::MPI_Comm {
        self.comm as abi::MPI_Comm
    }
    fn barrier(&self) -> R<()> {
        mpi(unsafe { crate::comm::PMPI_Barrier(self.mpi_comm()) }, "MPI_Barrier")
    }
    fn bcast_i64(&self, v: &mut [i64], root: c_int) -> R<()> {
        let rc = unsafe { crate::coll::PMPI_Bcast(v.as_mut_ptr() as *mut c_void, v.len() as c_int, abi::MPI_INT64_T as _, root, self.mpi_comm()) };
        mpi(rc, "MPI_Bcast")
    }
    fn allreduce_i64(&self, v: &mut [i64], op: usize) -> R<()> {
        let rc = unsafe {
            crate::coll::PMPI_Allreduce(abi::MPI_IN_PLACE as *const c_void, v.as_mut_ptr() as *mut c_void, v.len() as c_int, abi::MPI_INT64_T as _, op as _, self.mpi_comm())
        };
        mpi(rc, "MPI_Allreduce")
    }
    fn size(&self) -> R<i64> {
        let m = self.file.metadata().map_err(|e| os_err("fstat", &e))?;
        Ok(m.len() as i64)
    }
    fn check_writable(&self) -> R<()> {
        if self.amode & abi::MPI_MODE_RDONLY != 0 {
            return fail(abi::MPI_ERR_READ_ONLY, "the file was opened MPI_MODE_RDONLY");
        }
        Ok(())
    }
    fn check_readable(&self) -> R<()> {
        if self.amode & abi::MPI_MODE_WRONLY != 0 {
            return fail(abi::MPI_ERR_ACCESS, "the file was opened MPI_MODE_WRONLY");
        }
        Ok(())
    }
    fn check_not_sequential(&self) -> R<()> {
        if self.amode & abi::MPI_MODE_SEQUENTIAL != 0 {
            return fail(abi::MPI_ERR_UNSUPPORTED_OPERATION, "not allowed on a file opened MPI_MODE_SEQUENTIAL");
        }
        Ok(())
    }

    /// Add `n` etypes to the shared file pointer; its old value.
    fn shared_fetch_add(&self, n: i64) -> R<i64> {
        let (f, _) = self.shfp.as_ref().ok_or_else(|| IoErr { class: abi::MPI_ERR_UNSUPPORTED_OPERATION, code: None, msg: "no shared file pointer: its side file could not be created".into() })?;
        static LOCAL: Mutex<()> = Mutex::new(());
        let _l = LOCAL.lock().unwrap_or_else(|p| p.into_inner());
        let _k = RangeLock::new(f, 0, 8, true)?;
        let mut b = [0u8; 8];
        let got = f.read_at(&mut b, 0).map_err(|e| os_err("shared file pointer", &e))?;
        let old = if got == 8 { i64::from_le_bytes(b) } else { 0 };
        if n != 0 {
            f.write_all_at(&(old + n).to_le_bytes(), 0).map_err(|e| os_err("shared file pointer", &e))?;
        }
        Ok(old)
    }
    fn shared_set(&self, v: i64) -> R<()> {
        let (f, _) = self.shfp.as_ref().ok_or_else(|| IoErr { class: abi::MPI_ERR_UNSUPPORTED_OPERATION, code: None, msg: "no shared file pointer".into() })?;
        let _k = RangeLock::new(f, 0, 8, true)?;
        f.write_all_at(&v.to_le_bytes(), 0).map_err(|e| os_err("shared file pointer", &e))
    }
}

/// A POSIX advisory lock on a byte range, released on drop.
struct RangeLock {
    fd: c_int,
    start: i64,
    len: i64,
}

impl RangeLock {
    fn new(f: &File, start: i64, len: i64, write: bool) -> R<RangeLock> {
        let fd = f.as_raw_fd();
        let mut fl: libc::flock = unsafe { std::mem::zeroed() };
        fl.l_type = if write { libc::F_WRLCK } else { libc::F_RDLCK } as _;
        fl.l_whence = libc::SEEK_SET as _;
        fl.l_start = start;
        fl.l_len = len;
        loop {
            // SAFETY: fd is open for the lifetime of `f`; fl is a valid flock.
            let rc = unsafe { libc::fcntl(fd, libc::F_SETLKW, &fl) };
            if rc == 0 {
                return Ok(RangeLock { fd, start, len });
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != ErrorKind::Interrupted {
                return Err(os_err("fcntl lock", &e));
            }
        }
    }
}

impl Drop for RangeLock {
    fn drop(&mut self) {
        let mut fl: libc::flock = unsafe { std::mem::zeroed() };
        fl.l_type = libc::F_UNLCK as _;
        fl.l_whence = libc::SEEK_SET as _;
        fl.l_start = self.start;
        fl.l_len = self.len;
        // SAFETY: as in new.
        unsafe { libc::fcntl(self.fd, libc::F_SETLK, &fl) };
    }
}

// ---- raw file access -----------------------------------------------------------------------

/// Read as much of `buf` as the file holds at `off`; bytes read (short only at end of file).
fn pread_full(f: &File, buf: &mut [u8], off: i64) -> R<usize> {
    if off < 0 {
        return fail(abi::MPI_ERR_ARG, "negative file offset");
    }
    let mut done = 0;
    while done < buf.len() {
        match f.read_at(&mut buf[done..], off as u64 + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(os_err("read", &e)),
        }
    }
    Ok(done)
}

fn pwrite_full(f: &File, buf: &[u8], off: i64) -> R<()> {
    if off < 0 {
        return fail(abi::MPI_ERR_ARG, "negative file offset");
    }
    f.write_all_at(buf, off as u64).map_err(|e| os_err("write", &e))
}

/// Write stream `data` to segments `segs` (in stream order) independently.
fn write_segs(fo: &FileObj, h: &Hints, atomic: bool, segs: &[(i64, u64)], data: &[u8]) -> R<()> {
    if segs.is_empty() {
        return Ok(());
    }
    let lo = segs.iter().map(|s| s.0).min().unwrap_or(0);
    let hi = segs.iter().map(|s| s.0 + s.1 as i64).max().unwrap_or(0);
    let _lock = if atomic { Some(RangeLock::new(&fo.file, lo, hi - lo, true)?) } else { None };
    if segs.len() == 1 {
        return pwrite_full(&fo.file, data, segs[0].0);
    }
    let sorted = segs.windows(2).all(|w| w[0].0 + w[0].1 as i64 <= w[1].0);
    let sieve = match h.ds_write {
        Tri::Disable => false,
        // Sieving pays when the pieces are small compared with the holes between them.
        Tri::Enable | Tri::Auto => fo.can_read && sorted && (data.len() as u64 / segs.len() as u64) < 64 << 10,
    };
    if !sieve {
        let mut p = 0usize;
        for &(off, len) in segs {
            pwrite_full(&fo.file, &data[p..p + len as usize], off)?;
            p += len as usize;
        }
        return Ok(());
    }
    // Data sieving: read a window, lay the pieces over it, write it back, under a lock
    // so concurrent writers of the holes are not overwritten with stale bytes.
    let win = h.ind_wr_buffer_size.max(4096) as i64;
    let mut buf = Vec::new();
    let (mut i, mut p) = (0usize, 0usize);
    let mut piece_done = 0u64;
    while i < segs.len() {
        let start = segs[i].0 + piece_done as i64;
        let mut end = start;
        // Pieces (or parts of them) that start inside [start, start + win).
        let mut j = i;
        while j < segs.len() && segs[j].0 < start + win {
            end = (segs[j].0 + segs[j].1 as i64).min(start + win).max(end);
            j += 1;
        }
        let span = (end - start) as usize;
        buf.resize(span, 0);
        let _l = if atomic { None } else { Some(RangeLock::new(&fo.file, start, span as i64, true)?) };
        let got = pread_full(&fo.file, &mut buf, start)?;
        buf[got..].fill(0);
        let mut last_end = start;
        while i < segs.len() && segs[i].0 + piece_done as i64 <= end {
            let off = segs[i].0 + piece_done as i64;
            let avail = (end - off).max(0) as u64;
            let take = (segs[i].1 - piece_done).min(avail);
            if take == 0 && segs[i].1 - piece_done > 0 {
                break;
            }
            let b = (off - start) as usize;
            buf[b..b + take as usize].copy_from_slice(&data[p..p + take as usize]);
            p += take as usize;
            last_end = last_end.max(off + take as i64);
            piece_done += take;
            if piece_done == segs[i].1 {
                i += 1;
                piece_done = 0;
            } else {
                break;
            }
        }
        // Never extend the file past the last byte written.
        pwrite_full(&fo.file, &buf[..(last_end - start) as usize], start)?;
    }
    Ok(())
}

/// Read segments `segs` into stream `data` independently; data bytes read (stops at the
/// end of file).
fn read_segs(fo: &FileObj, h: &Hints, atomic: bool, segs: &[(i64, u64)], data: &mut [u8]) -> R<u64> {
    if segs.is_empty() {
        return Ok(0);
    }
    let lo = segs.iter().map(|s| s.0).min().unwrap_or(0);
    let hi = segs.iter().map(|s| s.0 + s.1 as i64).max().unwrap_or(0);
    let _lock = if atomic { Some(RangeLock::new(&fo.file, lo, hi - lo, false)?) } else { None };
    if segs.len() == 1 {
        return Ok(pread_full(&fo.file, data, segs[0].0)? as u64);
    }
    let eof = fo.size()?;
    let sorted = segs.windows(2).all(|w| w[0].0 + w[0].1 as i64 <= w[1].0);
    let sieve = match h.ds_read {
        Tri::Disable => false,
        Tri::Enable | Tri::Auto => sorted && (data.len() as u64 / segs.len() as u64) < 64 << 10,
    };
    let mut p = 0usize;
    if !sieve {
        for &(off, len) in segs {
            if off >= eof {
                break;
            }
            let take = (len as i64).min(eof - off) as usize;
            let got = pread_full(&fo.file, &mut data[p..p + take], off)?;
            p += got;
            if got < len as usize {
                break;
            }
        }
        return Ok(p as u64);
    }
    let win = h.ind_rd_buffer_size.max(4096) as i64;
    let mut buf = Vec::new();
    let mut i = 0usize;
    let mut piece_done = 0u64;
    while i < segs.len() {
        let start = segs[i].0 + piece_done as i64;
        if start >= eof {
            break;
        }
        let end = (start + win).min(eof);
        buf.resize((end - start) as usize, 0);
        let got = pread_full(&fo.file, &mut buf, start)?;
        let end = start + got as i64;
        while i < segs.len() {
            let off = segs[i].0 + piece_done as i64;
            if off >= end {
                break;
            }
            let take = (segs[i].1 - piece_done).min((end - off) as u64) as usize;
            let b = (off - start) as usize;
            data[p..p + take].copy_from_slice(&buf[b..b + take]);
            p += take;
            piece_done += take as u64;
            if piece_done == segs[i].1 {
                i += 1;
                piece_done = 0;
            } else {
                break;
            }
        }
        if got == 0 {
            break;
        }
    }
    Ok(p as u64)
}

// ---- data representations -------------------------------------------------------------------

type ConvFn = unsafe extern "C" fn(*mut c_void, abi::MPI_Datatype, c_int, *mut c_void, abi::MPI_Offset, *mut c_void) -> c_int;
type ConvFnC = unsafe extern "C" fn(*mut c_void, abi::MPI_Datatype, abi::MPI_Count, *mut c_void, abi::MPI_Offset, *mut c_void) -> c_int;
type ExtentFn = unsafe extern "C" fn(abi::MPI_Datatype, *mut abi::MPI_Aint, *mut c_void) -> c_int;

/// A data representation registered with MPI_Register_datarep.
#[derive(Debug, Clone)]
struct Datarep {
    name: String,
    read: usize,
    write: usize,
    extent: usize,
    extra: usize,
    /// The conversion functions take an MPI_Count (MPI_Register_datarep_c).
    large: bool,
}

static DATAREPS: Mutex<Vec<Datarep>> = Mutex::new(Vec::new());

fn datareps() -> MutexGuard<'static, Vec<Datarep>> {
    DATAREPS.lock().unwrap_or_else(|p| p.into_inner())
}

fn rep_by_name(name: &str) -> R<Rep> {
    Ok(match name {
        "native" => Rep::Native,
        "internal" => Rep::Internal,
        "external32" => Rep::External32,
        other => match datareps().iter().position(|d| d.name == other) {
            Some(i) => Rep::User(i),
            None => return fail(abi::MPI_ERR_UNSUPPORTED_DATAREP, format!("unknown data representation {other:?}")),
        },
    })
}

/// Whether stream bytes of `t` have the same length in the representation as in memory
/// (the views here lay the file out with native extents).
fn rep_keeps_sizes(rep: &Rep, t: &TypeRef) -> bool {
    match rep {
        Rep::External32 => t.ext32_packed_size(1) == Some(t.size),
        _ => true,
    }
}

/// Call a user conversion function on `count` elements.
unsafe fn user_convert(d: &Datarep, read: bool, user: *mut u8, dt: usize, count: i64, filebuf: *mut u8) -> R<()> {
    let f = if read { d.read } else { d.write };
    if f == 0 {
        // MPI_CONVERSION_FN_NULL: the representation stores native bytes.
        return Ok(());
    }
    let rc = if d.large {
        let f: ConvFnC = std::mem::transmute::<usize, ConvFnC>(f);
        f(user as *mut c_void, dt as _, count, filebuf as *mut c_void, 0, d.extra as *mut c_void)
    } else {
        if count > c_int::MAX as i64 {
            return fail(abi::MPI_ERR_COUNT, "count too large for the datarep's conversion function");
        }
        let f: ConvFn = std::mem::transmute::<usize, ConvFn>(f);
        f(user as *mut c_void, dt as _, count as c_int, filebuf as *mut c_void, 0, d.extra as *mut c_void)
    };
    if rc != abi::MPI_SUCCESS {
        return Err(IoErr { class: global::class_of(rc), code: Some(rc), msg: "data representation conversion failed".into() });
    }
    Ok(())
}

// ---- entry-point plumbing ------------------------------------------------------------------

type FileErrhFn = unsafe extern "C" fn(*mut abi::MPI_File, *mut c_int, ...);

/// Run a file call: on error make a code and apply the file's error handler (the default
/// file handler for calls without a file).
fn file_api(func: &str, fh: Option<usize>, body: impl FnOnce() -> R<()>) -> c_int {
    if global::PHASE.load(Ordering::Acquire) != global::PHASE_LIVE {
        eprintln!("steadfast: {func} called while MPI is not initialised");
        std::process::exit(1);
    }
    match body() {
        Ok(()) => abi::MPI_SUCCESS,
        Err(e) => raise(func, fh, e),
    }
}

fn handler_of(fh: Option<usize>) -> usize {
    fh.and_then(|h| lookup(h).ok()).map_or_else(|| DEFAULT_ERRH.load(Ordering::Acquire), |f| f.st().errh)
}

fn raise(func: &str, fh: Option<usize>, e: IoErr) -> c_int {
    let handler = handler_of(fh);
    let mut guard = lock();
    let Some(g) = guard.as_mut() else { return e.class };
    let text = format!("{func}: {} ({})", e.msg, global::class_name(e.class));
    let code = e.code.unwrap_or_else(|| g.errors.code(e.class, text.clone()));
    call_handler(guard, handler, fh.unwrap_or(abi::MPI_FILE_NULL), code, &text)
}

fn call_handler(mut guard: global::Guard, handler: usize, fh: usize, code: c_int, text: &str) -> c_int {
    let Some(g) = guard.as_mut() else { return code };
    match handler {
        abi::MPI_ERRORS_RETURN => code,
        h if h > abi::PREDEFINED_HANDLE_MAX => {
            let Some(func) = g.tables.errhandlers.get(Handle(h as u64)).map(|e| e.func) else { return code };
            drop(guard);
            let mut f = fh as abi::MPI_File;
            let mut c = code;
            // SAFETY: registered through MPI_File_create_errhandler.
            unsafe {
                let f2: FileErrhFn = std::mem::transmute::<usize, FileErrhFn>(func);
                f2(&mut f, &mut c);
            }
            // The call returns the code as the handler left it (a handler may clear it, as
            // MPICH's errors/io/fileerrret expects).
            c
        }
        _ => {
            let rank = g.eng.rank;
            eprintln!("steadfast: rank {rank}: {text}");
            let class = global::class_of_code(g, code);
            g.eng.abort(class, &format!("rank {rank}: {text}"));
        }
    }
}

/// The datatype behind `t`, committed.
fn dtype(t: usize) -> R<TypeRef> {
    let g = lock();
    let g = g.as_ref().ok_or_else(|| IoErr { class: abi::MPI_ERR_OTHER, code: None, msg: "MPI is not initialised".into() })?;
    Ok(global::dtype(g, t)?)
}

unsafe fn put_count(status: *mut MPI_Status, bytes: u64) {
    if status.is_null() || status as usize == abi::MPI_STATUS_IGNORE {
        return;
    }
    let s = &mut *status;
    s.MPI_SOURCE = abi::MPI_UNDEFINED;
    s.MPI_TAG = abi::MPI_UNDEFINED;
    s.MPI_ERROR = abi::MPI_SUCCESS;
    global::set_status_count(s, bytes as i64);
    s.internal[2] = 0;
}

unsafe fn cstr(p: *const std::ffi::c_char, what: &str) -> R<String> {
    if p.is_null() {
        return fail(abi::MPI_ERR_ARG, format!("{what} is NULL"));
    }
    Ok(CStr::from_ptr(p).to_string_lossy().into_owned())
}

/// Strip a ROMIO-style file-system prefix ("ufs:", "nfs:" ...).
fn strip_prefix(name: &str) -> &str {
    for p in ["ufs:", "nfs:", "lustre:", "gpfs:", "pvfs2:", "xfs:", "testfs:", "file:"] {
        if let Some(rest) = name.strip_prefix(p) {
            return rest;
        }
    }
    name
}

// ---- nonblocking requests ------------------------------------------------------------------

unsafe extern "C" fn greq_query(extra: *mut c_void, status: *mut MPI_Status) -> c_int {
    let bytes = *(extra as *const u64);
    put_count(status, bytes);
    abi::MPI_SUCCESS
}

unsafe extern "C" fn greq_free(extra: *mut c_void) -> c_int {
    drop(Box::from_raw(extra as *mut u64));
    abi::MPI_SUCCESS
}

unsafe extern "C" fn greq_cancel(_extra: *mut c_void, _complete: c_int) -> c_int {
    // The I/O is already done: nothing to cancel.
    abi::MPI_SUCCESS
}

/// A completed request reporting `bytes` (the operation already ran).
unsafe fn done_request(bytes: u64, out: *mut abi::MPI_Request) -> R<()> {
    if out.is_null() {
        return fail(abi::MPI_ERR_ARG, "request pointer is NULL");
    }
    let extra = Box::into_raw(Box::new(bytes)) as *mut c_void;
    let rc = crate::greq::PMPI_Grequest_start(greq_query as *const () as usize, greq_free as *const () as usize, greq_cancel as *const () as usize, extra, out);
    if rc != abi::MPI_SUCCESS {
        drop(Box::from_raw(extra as *mut u64));
        return mpi(rc, "MPI_Grequest_start");
    }
    mpi(crate::greq::PMPI_Grequest_complete(*out), "MPI_Grequest_complete")
}

// ---- the read / write engine ---------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Pos {
    At(i64),
    Indiv,
    Shared,
    Ordered,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Out {
    Status(*mut MPI_Status),
    Request(*mut abi::MPI_Request),
    Begin,
}

/// One read or write call of any flavour.
pub(crate) unsafe fn rw(func: &str, fh: abi::MPI_File, pos: Pos, write: bool, coll: bool, buf: *mut c_void, count: i64, dt: abi::MPI_Datatype, out: Out) -> c_int {
    let fhv = fh as usize;
    file_api(func, Some(fhv), || {
        let fo = lookup(fhv)?;
        let bytes = rw_body(&fo, pos, write, coll, buf as *mut u8, count, dt as usize, out)?;
        match out {
            Out::Status(s) => put_count(s, bytes),
            Out::Request(r) => done_request(bytes, r)?,
            Out::Begin => fo.st().split = Some(bytes),
        }
        Ok(())
    })
}

unsafe fn rw_body(fo: &FileObj, pos: Pos, write: bool, coll: bool, buf: *mut u8, count: i64, dt: usize, out: Out) -> R<u64> {
    if count < 0 {
        return fail(abi::MPI_ERR_COUNT, format!("negative count {count}"));
    }
    let t = dtype(dt)?;
    if write { fo.check_writable()? } else { fo.check_readable()? }
    if matches!(pos, Pos::At(_) | Pos::Indiv) {
        fo.check_not_sequential()?;
    }
    if let Pos::At(o) = pos {
        if o < 0 {
            return fail(abi::MPI_ERR_ARG, format!("negative offset {o}"));
        }
    }
    let (view, hints, atomic, fp) = {
        let st = fo.st();
        if out == Out::Begin && st.split.is_some() {
            return fail(abi::MPI_ERR_OTHER, "a split collective is already active on this file");
        }
        (st.view.clone(), st.hints.clone(), st.atomic, st.fp)
    };
    let nbytes = (t.size as u64).checked_mul(count as u64).ok_or_else(|| IoErr { class: abi::MPI_ERR_COUNT, code: None, msg: "count * datatype size overflows".into() })?;
    // A null buffer is MPI_BOTTOM, which only derived types with absolute addresses use.
    if nbytes > 0 && buf.is_null() && t.predefined {
        return fail(abi::MPI_ERR_BUFFER, "buffer is NULL");
    }
    if view.esize == 0 || nbytes % view.esize != 0 {
        return fail(abi::MPI_ERR_TYPE, "the datatype does not hold a whole number of etypes");
    }
    if !rep_keeps_sizes(&view.rep, &t) {
        return fail(abi::MPI_ERR_UNSUPPORTED_DATAREP, format!("{} changes size in {}; such types are not supported in file views", t.name, view.rep_name));
    }
    let netypes = (nbytes / view.esize) as i64;
    // Start of the access, in etypes of the view.
    let start = match pos {
        Pos::At(o) => o,
        Pos::Indiv => fp,
        Pos::Shared => fo.shared_fetch_add(netypes)?,
        Pos::Ordered => {
            // Ranks access in rank order from the shared pointer: offsets are prefix sums.
            let n = fo.nprocs as usize;
            let mut all = vec![0i64; n];
            let rc = crate::coll::PMPI_Allgather(&netypes as *const i64 as *const c_void, 1, abi::MPI_INT64_T as _, all.as_mut_ptr() as *mut c_void, 1, abi::MPI_INT64_T as _, fo.mpi_comm());
            mpi(rc, "MPI_Allgather")?;
            let total: i64 = all.iter().sum();
            let mut base = [0i64];
            if fo.rank == 0 {
                base[0] = fo.shared_fetch_add(total)?;
            }
            fo.bcast_i64(&mut base, 0)?;
            base[0] + all[..fo.rank as usize].iter().sum::<i64>()
        }
    };
    let spos = start as u64 * view.esize;
    let mut segs = Vec::new();
    view.map(spos, nbytes, &mut segs)?;
    let contiguous_mem = t.is_contiguous() && matches!(view.rep, Rep::Native | Rep::Internal);
    // Collective buffering for the collective calls; atomic mode and the shared-pointer
    // forms go independent (same result, and locking is simpler without aggregators).
    let two_phase = coll && !atomic && pos != Pos::Ordered && !matches!(out, Out::Request(_));
    let done = if write {
        let mut packed;
        let data: &[u8] = if contiguous_mem {
            if nbytes == 0 { &[] } else { std::slice::from_raw_parts(buf.wrapping_offset(t.true_lb), nbytes as usize) }
        } else {
            packed = vec![0u8; nbytes as usize];
            to_file_rep(&view.rep, &t, dt, buf, count, &mut packed)?;
            &packed
        };
        if two_phase {
            cb::collective(fo, &hints, true, &segs, data.as_ptr() as *mut u8, nbytes)?;
        } else {
            write_segs(fo, &hints, atomic, &segs, data)?;
        }
        nbytes
    } else {
        let mut packed;
        let data: &mut [u8] = if contiguous_mem {
            if nbytes == 0 { &mut [] } else { std::slice::from_raw_parts_mut(buf.wrapping_offset(t.true_lb), nbytes as usize) }
        } else {
            packed = vec![0u8; nbytes as usize];
            &mut packed
        };
        let got = if two_phase {
            cb::collective(fo, &hints, false, &segs, data.as_mut_ptr(), nbytes)?
        } else {
            read_segs(fo, &hints, atomic, &segs, data)?
        };
        if !contiguous_mem {
            from_file_rep(&view.rep, &t, dt, buf, count, &data[..got as usize])?;
        }
        got
    };
    if pos == Pos::Indiv {
        fo.st().fp = start + (done / view.esize) as i64;
    }
    if atomic && write {
        // Atomic mode: make the data visible to every process before returning.
        fo.file.sync_data().map_err(|e| os_err("fdatasync", &e))?;
    }
    Ok(done)
}

/// Memory (count elements of t at buf) -> file representation stream.
unsafe fn to_file_rep(rep: &Rep, t: &TypeRef, dt: usize, buf: *mut u8, count: i64, out: &mut [u8]) -> R<()> {
    match rep {
        Rep::Native | Rep::Internal => {
            t.pack(buf, count as usize, out);
        }
        Rep::External32 => {
            t.pack_external(buf, count as usize, out).ok_or_else(|| IoErr { class: abi::MPI_ERR_CONVERSION, code: None, msg: "external32 conversion failed".into() })?;
        }
        Rep::User(i) => {
            let d = datareps()[*i].clone();
            if d.write == 0 {
                t.pack(buf, count as usize, out);
            } else {
                user_convert(&d, false, buf, dt, count, out.as_mut_ptr())?;
            }
        }
    }
    Ok(())
}

/// File representation stream (possibly short) -> memory.
unsafe fn from_file_rep(rep: &Rep, t: &TypeRef, dt: usize, buf: *mut u8, count: i64, data: &[u8]) -> R<()> {
    match rep {
        Rep::Native | Rep::Internal => {
            t.unpack(data, buf, count as usize);
        }
        Rep::External32 => {
            // Whole elements only: a partial element at the end of file stays untouched.
            let whole = data.len().checked_div(t.size).unwrap_or(0);
            t.unpack_external(&data[..whole * t.size], buf, whole).ok_or_else(|| IoErr { class: abi::MPI_ERR_CONVERSION, code: None, msg: "external32 conversion failed".into() })?;
        }
        Rep::User(i) => {
            let d = datareps()[*i].clone();
            if d.read == 0 {
                t.unpack(data, buf, count as usize);
            } else {
                let whole = data.len().checked_div(t.size).unwrap_or(0);
                let mut tmp = data[..whole * t.size].to_vec();
                user_convert(&d, true, buf, dt, whole as i64, tmp.as_mut_ptr())?;
            }
        }
    }
    Ok(())
}

/// MPI_File_read_all_end and friends: the status of the split collective begun on `fh`.
pub(crate) unsafe fn split_end(func: &str, fh: abi::MPI_File, status: *mut MPI_Status) -> c_int {
    let fhv = fh as usize;
    file_api(func, Some(fhv), || {
        let fo = lookup(fhv)?;
        let bytes = fo.st().split.take().ok_or_else(|| IoErr { class: abi::MPI_ERR_OTHER, code: None, msg: "no split collective is active on this file".into() })?;
        put_count(status, bytes);
        Ok(())
    })
}
