//! MPI_File_* entry points: file management, views, pointers, error handlers, data
//! representations. The read and write families are generated in `rw_api.rs`.

// The generated read/write entry points cast every argument the same way for both count widths.
#![allow(clippy::unnecessary_cast)]

use std::ffi::{c_char, c_int, c_void};
use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use super::*;
use crate::abi::{MPI_Aint, MPI_Comm, MPI_Count, MPI_Datatype, MPI_Errhandler, MPI_File, MPI_Group, MPI_Info, MPI_Offset};
use crate::env::write_cstr;
use crate::mpi_api;

include!("rw_api.rs");

const ACCESS_MODES: c_int = abi::MPI_MODE_RDONLY | abi::MPI_MODE_WRONLY | abi::MPI_MODE_RDWR;

fn check_amode(amode: c_int) -> R<()> {
    let n = [abi::MPI_MODE_RDONLY, abi::MPI_MODE_WRONLY, abi::MPI_MODE_RDWR].iter().filter(|&&m| amode & m != 0).count();
    if n != 1 {
        return fail(abi::MPI_ERR_AMODE, "exactly one of MPI_MODE_RDONLY, MPI_MODE_WRONLY and MPI_MODE_RDWR is required");
    }
    if amode & abi::MPI_MODE_RDONLY != 0 && amode & (abi::MPI_MODE_CREATE | abi::MPI_MODE_EXCL) != 0 {
        return fail(abi::MPI_ERR_AMODE, "MPI_MODE_RDONLY cannot be combined with MPI_MODE_CREATE or MPI_MODE_EXCL");
    }
    if amode & abi::MPI_MODE_RDWR != 0 && amode & abi::MPI_MODE_SEQUENTIAL != 0 {
        return fail(abi::MPI_ERR_AMODE, "MPI_MODE_RDWR cannot be combined with MPI_MODE_SEQUENTIAL");
    }
    let known = ACCESS_MODES
        | abi::MPI_MODE_CREATE
        | abi::MPI_MODE_EXCL
        | abi::MPI_MODE_DELETE_ON_CLOSE
        | abi::MPI_MODE_UNIQUE_OPEN
        | abi::MPI_MODE_SEQUENTIAL
        | abi::MPI_MODE_APPEND;
    if amode & !known != 0 {
        return fail(abi::MPI_ERR_AMODE, format!("unknown access mode bits {:#x}", amode & !known));
    }
    Ok(())
}

/// Open `path` locally: (file, opened for reading too).
fn open_local(path: &std::path::Path, amode: c_int, create: bool, excl: bool) -> Result<(std::fs::File, bool), std::io::Error> {
    let mut o = OpenOptions::new();
    o.custom_flags(libc::O_CLOEXEC);
    if create {
        o.create(true).mode(0o644);
    }
    if excl {
        o.create_new(true);
    }
    if amode & abi::MPI_MODE_RDONLY != 0 {
        return o.read(true).open(path).map(|f| (f, true));
    }
    // Write-only files are opened read-write when possible: data sieving and collective
    // buffering read the holes they write around.
    match o.clone().read(true).write(true).open(path) {
        Ok(f) => Ok((f, true)),
        Err(e) if amode & abi::MPI_MODE_WRONLY != 0 && e.raw_os_error() == Some(libc::EACCES) => o.write(true).open(path).map(|f| (f, false)),
        Err(e) => Err(e),
    }
}

static SHFP_SEQ: Mutex<u64> = Mutex::new(0);

/// Name of the side file holding the shared file pointer (next to the file, hidden).
fn shfp_path(path: &std::path::Path, token: i64) -> std::path::PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
    dir.join(format!(".{name}.shfp.{token:x}"))
}

unsafe fn open_impl(comm: MPI_Comm, filename: *const c_char, amode: c_int, info: MPI_Info, fh: *mut MPI_File) -> R<()> {
    if fh.is_null() {
        return fail(abi::MPI_ERR_ARG, "file handle pointer is NULL");
    }
    let name = cstr(filename, "filename")?;
    let path = std::path::PathBuf::from(strip_prefix(&name));
    let user_info = {
        let g = lock();
        let g = g.as_ref().ok_or_else(|| IoErr { class: abi::MPI_ERR_OTHER, code: None, msg: "MPI is not initialised".into() })?;
        global::comm_handle(g, comm as usize)?;
        crate::info::info_arg(g, info)?
    };
    let mut inter = 0;
    mpi(crate::comm::PMPI_Comm_test_inter(comm, &mut inter), "MPI_Comm_test_inter")?;
    if inter != 0 {
        return fail(abi::MPI_ERR_COMM, "MPI_File_open needs an intracommunicator");
    }
    let mut dup: MPI_Comm = std::ptr::null_mut();
    mpi(crate::comm::PMPI_Comm_dup(comm, &mut dup), "MPI_Comm_dup")?;
    mpi(crate::errhandler::PMPI_Comm_set_errhandler(dup, abi::MPI_ERRORS_RETURN as _), "MPI_Comm_set_errhandler")?;
    let r = open_on(dup, path, amode, user_info);
    match r {
        Ok(fo) => {
            let h = NEXT_HANDLE.fetch_add(1, Ordering::Relaxed);
            files().get_or_insert_with(HashMap::new).insert(h, Arc::new(fo));
            *fh = h as MPI_File;
            Ok(())
        }
        Err(e) => {
            let mut d = dup;
            crate::comm::PMPI_Comm_free(&mut d);
            Err(e)
        }
    }
}

unsafe fn open_on(dup: MPI_Comm, path: std::path::PathBuf, amode: c_int, user_info: Option<steadfast_core::info::Info>) -> R<FileObj> {
    let (mut rank, mut nprocs) = (0, 0);
    mpi(crate::comm::PMPI_Comm_rank(dup, &mut rank), "MPI_Comm_rank")?;
    mpi(crate::comm::PMPI_Comm_size(dup, &mut nprocs), "MPI_Comm_size")?;
    let bcast = |v: &mut [i64]| mpi(crate::coll::PMPI_Bcast(v.as_mut_ptr() as *mut c_void, v.len() as c_int, abi::MPI_INT64_T as _, 0, dup), "MPI_Bcast");
    let allmax = |v: &mut [i64]| mpi(crate::coll::PMPI_Allreduce(abi::MPI_IN_PLACE as *const c_void, v.as_mut_ptr() as *mut c_void, v.len() as c_int, abi::MPI_INT64_T as _, abi::MPI_MAX as _, dup), "MPI_Allreduce");
    // Every rank checks the mode; all agree on the outcome.
    let mut bad = [check_amode(amode).map_or_else(|e| e.class as i64, |_| 0)];
    allmax(&mut bad)?;
    if bad[0] != 0 {
        check_amode(amode)?;
        return fail(bad[0] as c_int, "another process passed an invalid access mode");
    }
    // Rank 0 creates the file (and the shared-pointer side file); then the others open it.
    let create = amode & abi::MPI_MODE_CREATE != 0;
    let excl = amode & abi::MPI_MODE_EXCL != 0;
    let mut first: Option<R<(std::fs::File, bool)>> = None;
    let mut token = [0i64, 0];
    if rank == 0 {
        let r = open_local(&path, amode, create, excl).map_err(|e| os_err(&format!("open {}", path.display()), &e));
        token[0] = match &r { Ok(_) => 0, Err(e) => e.class as i64 };
        let mut seq = SHFP_SEQ.lock().unwrap_or_else(|p| p.into_inner());
        *seq += 1;
        token[1] = ((std::process::id() as i64) << 24) | (*seq as i64 & 0xff_ffff);
        first = Some(r);
        // The side file of the shared file pointer is made now, so the others find it.
        if token[0] == 0 {
            let sp = shfp_path(&path, token[1]);
            let made = OpenOptions::new().read(true).write(true).create(true).truncate(true).mode(0o600).open(&sp);
            if made.is_err() {
                token[1] = -1;
            }
        }
    }
    bcast(&mut token)?;
    if token[0] != 0 {
        if let Some(Err(e)) = first {
            return Err(e);
        }
        return fail(token[0] as c_int, format!("opening {} failed on rank 0", path.display()));
    }
    let local = match first {
        Some(r) => r,
        None => open_local(&path, amode, false, false).map_err(|e| os_err(&format!("open {}", path.display()), &e)),
    };
    let mut fails = [local.as_ref().map_or_else(|e| e.class as i64, |_| 0)];
    allmax(&mut fails)?;
    if fails[0] != 0 && rank == 0 && token[1] >= 0 {
        // The open failed somewhere: no file object will own the side file.
        let _ = std::fs::remove_file(shfp_path(&path, token[1]));
    }
    let (file, can_read) = match local {
        Err(e) => return Err(e),
        Ok(_) if fails[0] != 0 => return fail(fails[0] as c_int, format!("opening {} failed on another process", path.display())),
        Ok(x) => x,
    };
    let shfp = if token[1] >= 0 {
        let sp = shfp_path(&path, token[1]);
        OpenOptions::new().read(true).write(true).open(&sp).ok().map(|f| (f, sp))
    } else {
        None
    };
    let mut hints = Hints::defaults(nprocs as usize);
    if let Some(i) = &user_info {
        hints.apply(i, nprocs as usize);
    }
    let view = View::default_view()?;
    let fo = FileObj {
        file,
        can_read,
        comm: dup as usize,
        rank,
        nprocs,
        amode,
        path,
        shfp,
        st: Mutex::new(State { view, fp: 0, atomic: false, hints, errh: abi::MPI_ERRORS_RETURN, split: None, owned_types: Vec::new() }),
        cb_bufs: Mutex::new(cb::Buffers::default()),
    };
    let errh = DEFAULT_ERRH.load(Ordering::Acquire);
    set_errh(&fo, errh);
    if amode & abi::MPI_MODE_APPEND != 0 {
        let end = fo.size()?;
        fo.st().fp = end;
        if rank == 0 {
            fo.shared_set(end).ok();
        }
        fo.barrier()?;
    }
    Ok(fo)
}

fn set_errh(fo: &FileObj, e: usize) {
    let mut g = lock();
    if let Some(g) = g.as_mut() {
        crate::errhandler::retain(g, e as u64);
        let old = std::mem::replace(&mut fo.st().errh, e);
        crate::errhandler::release(g, old as u64);
    }
}

unsafe fn free_types(list: Vec<usize>) {
    for t in list {
        let mut h = t as MPI_Datatype;
        crate::datatype::PMPI_Type_free(&mut h);
    }
}

unsafe fn close_impl(fh: *mut MPI_File) -> R<()> {
    if fh.is_null() {
        return fail(abi::MPI_ERR_ARG, "file handle pointer is NULL");
    }
    let h = *fh as usize;
    let fo = lookup(h)?;
    // Everyone has finished with the file before it (or its side file) goes away.
    fo.barrier()?;
    if fo.rank == 0 {
        if let Some((_, p)) = &fo.shfp {
            let _ = std::fs::remove_file(p);
        }
        if fo.amode & abi::MPI_MODE_DELETE_ON_CLOSE != 0 {
            std::fs::remove_file(&fo.path).map_err(|e| os_err("delete on close", &e))?;
        }
    }
    files().as_mut().and_then(|m| m.remove(&h));
    let (owned, errh) = {
        let mut st = fo.st();
        (std::mem::take(&mut st.owned_types), st.errh)
    };
    free_types(owned);
    {
        let mut g = lock();
        if let Some(g) = g.as_mut() {
            crate::errhandler::release(g, errh as u64);
        }
    }
    let mut c = fo.comm as MPI_Comm;
    crate::comm::PMPI_Comm_free(&mut c);
    *fh = abi::MPI_FILE_NULL as MPI_File;
    Ok(())
}

/// The application handle to keep for a view type: predefined handles as they are, derived
/// types duplicated (the application may free its own).
unsafe fn keep_type(t: MPI_Datatype, owned: &mut Vec<usize>) -> R<usize> {
    if abi::is_predefined_handle(t as usize) {
        return Ok(t as usize);
    }
    let mut d: MPI_Datatype = std::ptr::null_mut();
    mpi(crate::datatype::PMPI_Type_dup(t, &mut d), "MPI_Type_dup")?;
    owned.push(d as usize);
    Ok(d as usize)
}

unsafe fn set_view_impl(fo: &FileObj, disp: MPI_Offset, etype: MPI_Datatype, filetype: MPI_Datatype, datarep: *const c_char, info: MPI_Info) -> R<()> {
    let rep_name = cstr(datarep, "datarep")?;
    let rep = rep_by_name(&rep_name)?;
    let et = dtype(etype as usize)?;
    let ft = dtype(filetype as usize)?;
    if et.size == 0 {
        return fail(abi::MPI_ERR_TYPE, "the etype holds no data");
    }
    if ft.size % et.size != 0 {
        return fail(abi::MPI_ERR_TYPE, "the filetype is not made of whole etypes");
    }
    if !rep_keeps_sizes(&rep, &et) || !rep_keeps_sizes(&rep, &ft) {
        return fail(abi::MPI_ERR_UNSUPPORTED_DATAREP, format!("the etype or filetype changes size in {rep_name}; not supported in file views"));
    }
    let disp = if disp == abi::MPI_DISPLACEMENT_CURRENT {
        if fo.amode & abi::MPI_MODE_SEQUENTIAL == 0 {
            return fail(abi::MPI_ERR_ARG, "MPI_DISPLACEMENT_CURRENT needs MPI_MODE_SEQUENTIAL");
        }
        // The current shared position of the old view, as a byte offset.
        let v = fo.st().view.clone();
        let p = fo.shared_fetch_add(0)?;
        let mut segs = Vec::new();
        v.map(p as u64 * v.esize, 1, &mut segs)?;
        let d = segs.first().map_or(v.disp, |s| s.0);
        // Everyone reads the old shared position before rank 0 resets it below.
        fo.barrier()?;
        d
    } else if disp < 0 {
        return fail(abi::MPI_ERR_ARG, format!("negative displacement {disp}"));
    } else {
        disp
    };
    let user_info = {
        let g = lock();
        let g = g.as_ref().ok_or_else(|| IoErr { class: abi::MPI_ERR_OTHER, code: None, msg: "MPI is not initialised".into() })?;
        crate::info::info_arg(g, info)?
    };
    let mut owned = Vec::new();
    let eh = keep_type(etype, &mut owned)?;
    let fth = keep_type(filetype, &mut owned)?;
    let view = match View::new(disp, et, eh, &ft, fth, rep, rep_name, fo.amode & abi::MPI_MODE_RDONLY != 0) {
        Ok(v) => v,
        Err(e) => {
            free_types(owned);
            return Err(e);
        }
    };
    let old = {
        let mut st = fo.st();
        st.view = view;
        st.fp = 0;
        if let Some(i) = &user_info {
            st.hints.apply(i, fo.nprocs as usize);
        }
        std::mem::replace(&mut st.owned_types, owned)
    };
    free_types(old);
    if fo.rank == 0 && fo.shfp.is_some() {
        fo.shared_set(0)?;
    }
    fo.barrier()
}

unsafe fn write_info(pairs: Vec<(&'static str, String)>, out: *mut MPI_Info) -> R<()> {
    if out.is_null() {
        return fail(abi::MPI_ERR_ARG, "info pointer is NULL");
    }
    let mut i = steadfast_core::info::Info::new();
    for (k, v) in pairs {
        i.set(k, &v)?;
    }
    let mut g = lock();
    let g = g.as_mut().ok_or_else(|| IoErr { class: abi::MPI_ERR_OTHER, code: None, msg: "MPI is not initialised".into() })?;
    crate::info::out_info(g, i, out)?;
    Ok(())
}

unsafe fn seek_target(fo: &FileObj, cur: i64, offset: MPI_Offset, whence: c_int) -> R<i64> {
    let v = fo.st().view.clone();
    let p = match whence {
        abi::MPI_SEEK_SET => offset,
        abi::MPI_SEEK_CUR => cur + offset,
        abi::MPI_SEEK_END => {
            let eof = v.eof_pos(fo.size()?);
            eof.div_ceil(v.esize) as i64 + offset
        }
        w => return fail(abi::MPI_ERR_ARG, format!("invalid whence {w}")),
    };
    if p < 0 {
        return fail(abi::MPI_ERR_ARG, format!("seek to a negative position ({p})"));
    }
    Ok(p)
}

fn with_file<T>(fh: MPI_File, f: impl FnOnce(&FileObj) -> R<T>) -> R<T> {
    let fo = lookup(fh as usize)?;
    f(&fo)
}

unsafe fn register_datarep(name: *const c_char, read: usize, write: usize, extent: usize, extra: *mut c_void, large: bool) -> R<()> {
    let name = cstr(name, "datarep")?;
    if name.len() >= abi::MPI_MAX_DATAREP_STRING as usize {
        return fail(abi::MPI_ERR_ARG, "data representation name too long");
    }
    if extent == 0 {
        return fail(abi::MPI_ERR_ARG, "the extent function is required");
    }
    let mut d = datareps();
    if ["native", "internal", "external32"].contains(&name.as_str()) || d.iter().any(|x| x.name == name) {
        return fail(abi::MPI_ERR_DUP_DATAREP, format!("data representation {name:?} is already defined"));
    }
    d.push(Datarep { name, read, write, extent, extra: extra as usize, large });
    Ok(())
}

mpi_api! {
    fn File_open(comm: MPI_Comm, filename: *const c_char, amode: c_int, info: MPI_Info, fh: *mut MPI_File) -> c_int {
        file_api("MPI_File_open", None, || open_impl(comm, filename, amode, info, fh))
    }

    fn File_close(fh: *mut MPI_File) -> c_int {
        let h = if fh.is_null() { abi::MPI_FILE_NULL } else { *fh as usize };
        file_api("MPI_File_close", Some(h), || close_impl(fh))
    }

    fn File_delete(filename: *const c_char, _info: MPI_Info) -> c_int {
        file_api("MPI_File_delete", None, || {
            let name = cstr(filename, "filename")?;
            let p = strip_prefix(&name);
            std::fs::remove_file(p).map_err(|e| os_err(&format!("delete {p}"), &e))
        })
    }

    fn File_set_size(fh: MPI_File, size: MPI_Offset) -> c_int {
        file_api("MPI_File_set_size", Some(fh as usize), || with_file(fh, |fo| {
            if size < 0 {
                return fail(abi::MPI_ERR_ARG, format!("negative size {size}"));
            }
            fo.check_writable()?;
            fo.check_not_sequential()?;
            let mut v = [size, -size];
            fo.allreduce_i64(&mut v, abi::MPI_MIN)?;
            if v[0] != -v[1] {
                return fail(abi::MPI_ERR_NOT_SAME, "processes passed different sizes");
            }
            let r = if fo.rank == 0 { fo.file.set_len(size as u64).map_err(|e| os_err("ftruncate", &e)) } else { Ok(()) };
            fo.barrier()?;
            r
        }))
    }

    fn File_preallocate(fh: MPI_File, size: MPI_Offset) -> c_int {
        file_api("MPI_File_preallocate", Some(fh as usize), || with_file(fh, |fo| {
            if size < 0 {
                return fail(abi::MPI_ERR_ARG, format!("negative size {size}"));
            }
            fo.check_writable()?;
            fo.check_not_sequential()?;
            let mut r = Ok(());
            if fo.rank == 0 && size > fo.size()? {
                // SAFETY: a valid descriptor and range.
                let rc = unsafe { libc::posix_fallocate(fo.file.as_raw_fd(), 0, size) };
                if rc == libc::EOPNOTSUPP || rc == libc::EINVAL {
                    // File systems without fallocate: extend with zeros.
                    let cur = fo.size()?;
                    let zeros = vec![0u8; 1 << 20];
                    let mut off = cur;
                    while off < size && r.is_ok() {
                        let n = ((size - off) as usize).min(zeros.len());
                        r = pwrite_full(&fo.file, &zeros[..n], off);
                        off += n as i64;
                    }
                } else if rc != 0 {
                    r = Err(os_err("posix_fallocate", &std::io::Error::from_raw_os_error(rc)));
                }
            }
            fo.barrier()?;
            r
        }))
    }

    fn File_get_size(fh: MPI_File, size: *mut MPI_Offset) -> c_int {
        file_api("MPI_File_get_size", Some(fh as usize), || with_file(fh, |fo| {
            if size.is_null() {
                return fail(abi::MPI_ERR_ARG, "size pointer is NULL");
            }
            *size = fo.size()?;
            Ok(())
        }))
    }

    fn File_get_group(fh: MPI_File, group: *mut MPI_Group) -> c_int {
        file_api("MPI_File_get_group", Some(fh as usize), || with_file(fh, |fo| {
            if group.is_null() {
                return fail(abi::MPI_ERR_ARG, "group pointer is NULL");
            }
            mpi(crate::group::PMPI_Comm_group(fo.mpi_comm(), group), "MPI_Comm_group")
        }))
    }

    fn File_get_amode(fh: MPI_File, amode: *mut c_int) -> c_int {
        file_api("MPI_File_get_amode", Some(fh as usize), || with_file(fh, |fo| {
            if amode.is_null() {
                return fail(abi::MPI_ERR_ARG, "amode pointer is NULL");
            }
            *amode = fo.amode;
            Ok(())
        }))
    }

    fn File_set_info(fh: MPI_File, info: MPI_Info) -> c_int {
        file_api("MPI_File_set_info", Some(fh as usize), || with_file(fh, |fo| {
            let i = {
                let g = lock();
                let g = g.as_ref().ok_or_else(|| IoErr { class: abi::MPI_ERR_OTHER, code: None, msg: "MPI is not initialised".into() })?;
                crate::info::info_arg(g, info)?
            };
            if let Some(i) = i {
                fo.st().hints.apply(&i, fo.nprocs as usize);
            }
            Ok(())
        }))
    }

    fn File_get_info(fh: MPI_File, info_used: *mut MPI_Info) -> c_int {
        file_api("MPI_File_get_info", Some(fh as usize), || with_file(fh, |fo| {
            let pairs = fo.st().hints.to_pairs();
            write_info(pairs, info_used)
        }))
    }

    fn File_set_view(fh: MPI_File, disp: MPI_Offset, etype: MPI_Datatype, filetype: MPI_Datatype, datarep: *const c_char, info: MPI_Info) -> c_int {
        file_api("MPI_File_set_view", Some(fh as usize), || with_file(fh, |fo| set_view_impl(fo, disp, etype, filetype, datarep, info)))
    }

    fn File_get_view(fh: MPI_File, disp: *mut MPI_Offset, etype: *mut MPI_Datatype, filetype: *mut MPI_Datatype, datarep: *mut c_char) -> c_int {
        file_api("MPI_File_get_view", Some(fh as usize), || with_file(fh, |fo| {
            if disp.is_null() || etype.is_null() || filetype.is_null() || datarep.is_null() {
                return fail(abi::MPI_ERR_ARG, "an output pointer is NULL");
            }
            let v = fo.st().view.clone();
            *disp = v.disp;
            // Derived types come back as new handles the application frees.
            let mut dummy = Vec::new();
            *etype = keep_type(v.etype_h as MPI_Datatype, &mut dummy)? as MPI_Datatype;
            *filetype = keep_type(v.ftype_h as MPI_Datatype, &mut dummy)? as MPI_Datatype;
            write_cstr(datarep, &v.rep_name, abi::MPI_MAX_DATAREP_STRING as usize);
            Ok(())
        }))
    }

    fn File_get_type_extent(fh: MPI_File, datatype: MPI_Datatype, extent: *mut MPI_Aint) -> c_int {
        let mut e: MPI_Count = 0;
        let rc = type_extent("MPI_File_get_type_extent", fh, datatype, &mut e);
        if rc == abi::MPI_SUCCESS && !extent.is_null() {
            *extent = e as MPI_Aint;
        }
        rc
    }

    fn File_get_type_extent_c(fh: MPI_File, datatype: MPI_Datatype, extent: *mut MPI_Count) -> c_int {
        type_extent("MPI_File_get_type_extent_c", fh, datatype, extent)
    }

    fn File_set_atomicity(fh: MPI_File, flag: c_int) -> c_int {
        file_api("MPI_File_set_atomicity", Some(fh as usize), || with_file(fh, |fo| {
            let f = (flag != 0) as i64;
            let mut v = [f, -f];
            fo.allreduce_i64(&mut v, abi::MPI_MIN)?;
            if v[0] != -v[1] {
                return fail(abi::MPI_ERR_NOT_SAME, "processes passed different atomicity flags");
            }
            fo.st().atomic = flag != 0;
            fo.barrier()
        }))
    }

    fn File_get_atomicity(fh: MPI_File, flag: *mut c_int) -> c_int {
        file_api("MPI_File_get_atomicity", Some(fh as usize), || with_file(fh, |fo| {
            if flag.is_null() {
                return fail(abi::MPI_ERR_ARG, "flag pointer is NULL");
            }
            *flag = fo.st().atomic as c_int;
            Ok(())
        }))
    }

    fn File_sync(fh: MPI_File) -> c_int {
        file_api("MPI_File_sync", Some(fh as usize), || with_file(fh, |fo| {
            let r = if fo.amode & abi::MPI_MODE_RDONLY == 0 { fo.file.sync_all().map_err(|e| os_err("fsync", &e)) } else { Ok(()) };
            fo.barrier()?;
            r
        }))
    }

    fn File_seek(fh: MPI_File, offset: MPI_Offset, whence: c_int) -> c_int {
        file_api("MPI_File_seek", Some(fh as usize), || with_file(fh, |fo| {
            fo.check_not_sequential()?;
            let cur = fo.st().fp;
            let p = seek_target(fo, cur, offset, whence)?;
            fo.st().fp = p;
            Ok(())
        }))
    }

    fn File_get_position(fh: MPI_File, offset: *mut MPI_Offset) -> c_int {
        file_api("MPI_File_get_position", Some(fh as usize), || with_file(fh, |fo| {
            if offset.is_null() {
                return fail(abi::MPI_ERR_ARG, "offset pointer is NULL");
            }
            fo.check_not_sequential()?;
            *offset = fo.st().fp;
            Ok(())
        }))
    }

    fn File_get_byte_offset(fh: MPI_File, offset: MPI_Offset, disp: *mut MPI_Offset) -> c_int {
        file_api("MPI_File_get_byte_offset", Some(fh as usize), || with_file(fh, |fo| {
            if disp.is_null() {
                return fail(abi::MPI_ERR_ARG, "disp pointer is NULL");
            }
            if offset < 0 {
                return fail(abi::MPI_ERR_ARG, format!("negative offset {offset}"));
            }
            fo.check_not_sequential()?;
            let v = fo.st().view.clone();
            let mut segs = Vec::new();
            v.map(offset as u64 * v.esize, 1, &mut segs)?;
            *disp = segs.first().map_or(v.disp, |s| s.0);
            Ok(())
        }))
    }

    fn File_seek_shared(fh: MPI_File, offset: MPI_Offset, whence: c_int) -> c_int {
        file_api("MPI_File_seek_shared", Some(fh as usize), || with_file(fh, |fo| {
            let mut v = [offset, -offset, whence as i64, -(whence as i64)];
            fo.allreduce_i64(&mut v, abi::MPI_MIN)?;
            if v[0] != -v[1] || v[2] != -v[3] {
                return fail(abi::MPI_ERR_NOT_SAME, "processes passed different offsets or whence");
            }
            let mut r = Ok(());
            if fo.rank == 0 {
                r = fo.shared_fetch_add(0).and_then(|cur| seek_target(fo, cur, offset, whence)).and_then(|p| fo.shared_set(p));
            }
            let mut bad = [r.as_ref().map_or_else(|e| e.class as i64, |_| 0)];
            fo.bcast_i64(&mut bad, 0)?;
            r?;
            if bad[0] != 0 {
                return fail(bad[0] as c_int, "seek_shared failed on rank 0");
            }
            Ok(())
        }))
    }

    fn File_get_position_shared(fh: MPI_File, offset: *mut MPI_Offset) -> c_int {
        file_api("MPI_File_get_position_shared", Some(fh as usize), || with_file(fh, |fo| {
            if offset.is_null() {
                return fail(abi::MPI_ERR_ARG, "offset pointer is NULL");
            }
            *offset = fo.shared_fetch_add(0)?;
            Ok(())
        }))
    }

    fn Register_datarep(datarep: *const c_char, read_conversion_fn: usize, write_conversion_fn: usize, dtype_file_extent_fn: usize, extra_state: *mut c_void) -> c_int {
        file_api("MPI_Register_datarep", None, || register_datarep(datarep, read_conversion_fn, write_conversion_fn, dtype_file_extent_fn, extra_state, false))
    }

    fn Register_datarep_c(datarep: *const c_char, read_conversion_fn: usize, write_conversion_fn: usize, dtype_file_extent_fn: usize, extra_state: *mut c_void) -> c_int {
        file_api("MPI_Register_datarep_c", None, || register_datarep(datarep, read_conversion_fn, write_conversion_fn, dtype_file_extent_fn, extra_state, true))
    }

    fn File_create_errhandler(file_errhandler_fn: usize, errhandler: *mut MPI_Errhandler) -> c_int {
        // File and communicator handlers share one table: only the pointer is kept.
        let f: Option<unsafe extern "C" fn(*mut MPI_Comm, *mut c_int, ...)> = std::mem::transmute::<usize, _>(file_errhandler_fn);
        crate::errhandler::PMPI_Comm_create_errhandler(f, errhandler)
    }

    fn File_set_errhandler(file: MPI_File, errhandler: MPI_Errhandler) -> c_int {
        file_api("MPI_File_set_errhandler", Some(file as usize), || {
            {
                let g = lock();
                let g = g.as_ref().ok_or_else(|| IoErr { class: abi::MPI_ERR_OTHER, code: None, msg: "MPI is not initialised".into() })?;
                crate::errhandler::check_errhandler(g, errhandler as usize)?;
            }
            if file as usize == abi::MPI_FILE_NULL {
                let mut g = lock();
                if let Some(g) = g.as_mut() {
                    crate::errhandler::retain(g, errhandler as u64);
                    let old = DEFAULT_ERRH.swap(errhandler as usize, Ordering::AcqRel);
                    crate::errhandler::release(g, old as u64);
                }
                return Ok(());
            }
            let fo = lookup(file as usize)?;
            set_errh(&fo, errhandler as usize);
            Ok(())
        })
    }

    fn File_get_errhandler(file: MPI_File, errhandler: *mut MPI_Errhandler) -> c_int {
        file_api("MPI_File_get_errhandler", Some(file as usize), || {
            if errhandler.is_null() {
                return fail(abi::MPI_ERR_ARG, "errhandler pointer is NULL");
            }
            let e = if file as usize == abi::MPI_FILE_NULL { DEFAULT_ERRH.load(Ordering::Acquire) } else { lookup(file as usize)?.st().errh };
            let mut g = lock();
            if let Some(g) = g.as_mut() {
                crate::errhandler::retain(g, e as u64);
            }
            *errhandler = e as MPI_Errhandler;
            Ok(())
        })
    }

    fn File_call_errhandler(fh: MPI_File, errorcode: c_int) -> c_int {
        let handler = handler_of(Some(fh as usize));
        if fh as usize != abi::MPI_FILE_NULL && lookup(fh as usize).is_err() {
            return raise("MPI_File_call_errhandler", None, IoErr { class: abi::MPI_ERR_FILE, code: None, msg: "invalid file handle".into() });
        }
        let g = lock();
        let text = format!("MPI_File_call_errhandler: error code {errorcode}");
        call_handler(g, handler, fh as usize, errorcode, &text);
        abi::MPI_SUCCESS
    }

}

unsafe fn type_extent(func: &str, fh: MPI_File, datatype: MPI_Datatype, extent: *mut MPI_Count) -> c_int {
    file_api(func, Some(fh as usize), || with_file(fh, |fo| {
        if extent.is_null() {
            return fail(abi::MPI_ERR_ARG, "extent pointer is NULL");
        }
        let t = dtype(datatype as usize)?;
        let rep = fo.st().view.rep.clone();
        *extent = match rep {
            Rep::Native | Rep::Internal => t.extent as MPI_Count,
            Rep::External32 => t.ext32_packed_size(1).map_or(t.extent as MPI_Count, |s| s as MPI_Count),
            Rep::User(i) => {
                let d = datareps()[i].clone();
                let f: ExtentFn = std::mem::transmute::<usize, ExtentFn>(d.extent);
                let mut e: MPI_Aint = 0;
                let rc = f(datatype, &mut e, d.extra as *mut c_void);
                if rc != abi::MPI_SUCCESS {
                    return Err(IoErr { class: global::class_of(rc), code: Some(rc), msg: "the datarep extent function failed".into() });
                }
                e as MPI_Count
            }
        };
        Ok(())
    }))
}
