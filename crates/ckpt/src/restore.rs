//! Restoring an image into a freshly started process, before `main`.
//!
//! Everything that can fail for a reason worth a message is checked here, with the C library
//! and the allocator, while the process is still intact: the image's checksums (header and
//! every region), the program break's start, the kernel's special mappings, the files to
//! map again. Only then is a plan of raw system calls built in a private mapping, at an
//! address neither layout uses, and handed to the restorer (`arch/x86_64.c`), which runs on
//! a stack in that mapping and jumps into the saved context. A damaged or unfitting image
//! therefore changes nothing: the process reports it and exits.

use std::collections::HashMap;
use std::ffi::c_char;
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, IntoRawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::arch::{self, Op, PlanHead};
use crate::error::Error;
use crate::format::{self, Entry, Kind, Meta, HEADER_LEN, PAGE};
use crate::maps::{self, MapLine};

/// Environment variable naming the image a starting process restores before `main`.
pub const ENV_RESTORE: &str = "STEADFAST_RESTORE_IMAGE";
/// Environment variable (`1`) asking a starting process to re-execute itself with
/// address-space randomization off, so that it can be checkpointed.
pub const ENV_NORANDMAPS: &str = "STEADFAST_NORANDMAPS";
/// Exit status of a process whose restore was refused before anything changed.
pub const EXIT_RESTORE_REFUSED: i32 = 70;
/// Exit status of a process whose restore failed half-way (printed by the restorer).
pub const EXIT_RESTORE_FAILED: i32 = 71;

const RESTORER_STACK: u64 = 256 << 10;

/// Called from the library's ELF constructor, before `main` (`argv`/`envp` as the dynamic
/// loader passes them). Does nothing unless [`ENV_RESTORE`] or [`ENV_NORANDMAPS`] is set;
/// re-executes the program with randomization off when needed; restores the image named by
/// [`ENV_RESTORE`] (and does not return) or exits with [`EXIT_RESTORE_REFUSED`] and a message.
///
/// # Safety
/// Call only from an ELF constructor of the main thread, with the loader's `argv`/`envp`.
pub unsafe fn on_load(argv: *const *const c_char, envp: *const *const c_char) {
    let image = std::env::var_os(ENV_RESTORE).filter(|v| !v.is_empty());
    let norand = std::env::var_os(ENV_NORANDMAPS).is_some_and(|v| v == "1");
    if image.is_none() && !norand {
        return;
    }
    if !crate::personality::no_randomize_active() && !argv.is_null() && !envp.is_null() {
        let err = crate::personality::reexec_no_randomize(argv, envp);
        // Only reached when the re-execution failed.
        if let Some(img) = &image {
            eprintln!(
                "steadfast: cannot restore image {}: cannot turn address-space randomization off ({err})",
                Path::new(img).display()
            );
            std::process::exit(EXIT_RESTORE_REFUSED);
        }
        eprintln!("steadfast: {ENV_NORANDMAPS}=1 but randomization cannot be turned off ({err}); checkpoints will be refused");
        return;
    }
    if let Some(img) = image {
        let e = restore(Path::new(&img)).unwrap_err();
        eprintln!("steadfast: cannot restore process image: {e}");
        std::process::exit(EXIT_RESTORE_REFUSED);
    }
}

/// Descriptor of the environment a restored process was started with (-1: none). Written by
/// the restorer after the image is in place (see `environment_memfd`).
static RESTART_ENV_FD: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(-1);

/// The current environment (`NAME=VALUE` NUL-terminated) in an anonymous file.
fn environment_memfd() -> Option<i32> {
    use std::io::Write;
    use std::os::unix::ffi::OsStrExt;
    // SAFETY: memfd_create with a NUL-terminated name.
    let fd = unsafe { libc::memfd_create(c"steadfast-restart-env".as_ptr(), 0) };
    if fd < 0 {
        return None;
    }
    // SAFETY: the descriptor was just created and is owned here until handed over.
    let mut f = unsafe { <File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    for (k, v) in std::env::vars_os() {
        let ok = f.write_all(k.as_bytes()).and_then(|()| f.write_all(b"=")).and_then(|()| f.write_all(v.as_bytes())).and_then(|()| f.write_all(b"\0"));
        if ok.is_err() {
            return None;
        }
    }
    Some(std::os::fd::IntoRawFd::into_raw_fd(f))
}

/// In a process restored from an image: the environment it was started with (its own
/// variables, such as a new launcher's address), once; `None` elsewhere or after the first
/// call. `std::env` and `/proc/self/environ` show the image's environment.
pub fn restart_environment() -> Option<Vec<(std::ffi::OsString, std::ffi::OsString)>> {
    use std::io::{Read, Seek};
    use std::os::unix::ffi::OsStrExt;
    let fd = RESTART_ENV_FD.swap(-1, std::sync::atomic::Ordering::SeqCst);
    if fd < 0 {
        return None;
    }
    // SAFETY: the restorer handed this descriptor over; nothing else owns it.
    let mut f = unsafe { <File as std::os::fd::FromRawFd>::from_raw_fd(fd as i32) };
    let mut raw = Vec::new();
    f.seek(std::io::SeekFrom::Start(0)).ok()?;
    f.read_to_end(&mut raw).ok()?;
    Some(
        raw.split(|&b| b == 0)
            .filter_map(|kv| {
                let i = kv.iter().position(|&b| b == b'=')?;
                Some((std::ffi::OsStr::from_bytes(&kv[..i]).to_owned(), std::ffi::OsStr::from_bytes(&kv[i + 1..]).to_owned()))
            })
            .collect(),
    )
}

/// Checks the image at `path` without restoring it: header, region table and every
/// region's checksum. Returns the image's size in bytes.
pub fn verify(path: &Path) -> Result<u64, Error> {
    open_checked(path, &path.display().to_string()).map(|(_, len, _)| len)
}

/// Opens the image at `path` and checks its header, table and every region's checksum
/// (reading it once): the file, its length and its description.
fn open_checked(path: &Path, shown: &str) -> Result<(File, u64, format::Meta), Error> {
    let mut f = File::open(path).map_err(|e| Error::io(format!("opening image {shown}"), e))?;
    let file_len = f.metadata().map_err(|e| Error::io(format!("image {shown}"), e))?.len();
    let fmt = |err| Error::Format { path: shown.to_owned(), err };
    let mut head = vec![0u8; HEADER_LEN];
    read_exact_or(&mut f, &mut head, || fmt(format::FormatError::Truncated("shorter than the header")))?;
    let meta_len = format::meta_len_from_header(&head).map_err(fmt)?;
    if meta_len > file_len {
        return Err(fmt(format::FormatError::Truncated("region table or strings missing")));
    }
    head.resize(meta_len as usize, 0);
    read_exact_or(&mut f, &mut head[HEADER_LEN..], || fmt(format::FormatError::Truncated("region table or strings missing")))?;
    let meta = format::parse_meta(&head, file_len).map_err(fmt)?;
    verify_data(&mut f, &meta, shown)?;
    Ok((f, file_len, meta))
}

/// Replaces this process's memory and calling thread with the image at `path` and returns
/// into the [`checkpoint`](crate::checkpoint) call that wrote it. Returns only with an error,
/// and then nothing was changed. The process must run the same executable and libraries as
/// the one that was saved, with `ADDR_NO_RANDOMIZE`, and have no other thread.
pub fn restore(path: &Path) -> Result<std::convert::Infallible, Error> {
    let shown = path.display().to_string();
    if !crate::personality::no_randomize_active() {
        return Err(Error::Randomized);
    }
    let others = crate::checkpoint::other_threads(&[])?;
    if !others.is_empty() {
        return Err(Error::Threads { tids: others });
    }
    let (f, _, meta) = open_checked(path, &shown)?;

    let layout = |why: String| Error::Layout { path: shown.clone(), why };
    let stat = std::fs::read("/proc/self/stat").map_err(|e| Error::io("reading /proc/self/stat", e))?;
    let start_brk = maps::stat_start_brk(&stat).ok_or_else(|| layout("no start_brk in /proc/self/stat".into()))?;
    if start_brk != meta.header.start_brk {
        return Err(layout(format!(
            "the program break starts at {start_brk:#x} here but at {:#x} in the image (another executable, or started differently)",
            meta.header.start_brk
        )));
    }
    let text = std::fs::read_to_string("/proc/self/maps").map_err(|e| Error::io("reading /proc/self/maps", e))?;
    let current: Vec<MapLine<'_>> = maps::lines(&text).collect();
    let by_start: HashMap<u64, &MapLine<'_>> = current.iter().map(|l| (l.start, l)).collect();
    let saved_line = |e: &Entry| MapLine {
        start: e.start,
        end: e.end,
        prot: e.prot,
        shared: e.flags & format::FLAG_SHARED != 0,
        offset: e.map_offset,
        inode: e.inode,
        path: std::str::from_utf8(meta.path(e)).unwrap_or(""),
    };
    let identical = |e: &Entry| {
        let s = saved_line(e);
        by_start.get(&e.start).is_some_and(|c| c.same_mapping(&s) || (e.kind() == Kind::Special && c.end == s.end && c.path == s.path))
    };
    for e in meta.entries.iter().filter(|e| e.kind() == Kind::Special) {
        if !identical(e) {
            return Err(layout(format!(
                "the kernel's {} mapping is not at {:#x} here",
                String::from_utf8_lossy(meta.path(e)).trim(),
                e.start
            )));
        }
    }

    let mut ops: Vec<Op> = Vec::new();
    let mut files: Vec<File> = Vec::new();
    let overlaps_saved = |l: &MapLine<'_>| meta.entries.iter().any(|e| e.start < l.end && l.start < e.end);
    for l in &current {
        if !l.is_kernel_special() && l.path != "[stack]" && l.path != "[heap]" && !overlaps_saved(l) {
            ops.push(Op { op: arch::OP_UNMAP, addr: l.start, len: l.end - l.start, ..Op::default() });
        }
    }
    ops.push(Op { op: arch::OP_BRK, addr: meta.header.brk, ..Op::default() });
    let image_fd = f.as_raw_fd();
    for (i, e) in meta.entries.iter().enumerate() {
        let what = || format!("region {i} at {:#x}-{:#x} ({})", e.start, e.end, String::from_utf8_lossy(meta.path(e)));
        match e.kind() {
            Kind::Special => {}
            Kind::Heap => {
                if e.has_data() {
                    ops.push(Op { op: arch::OP_READ_INTO, prot: e.prot, addr: e.start, len: e.len(), off: e.data_offset, fd: image_fd, flags: 0 });
                }
            }
            Kind::Stack => {
                let cur = current.iter().find(|l| l.path == "[stack]").ok_or_else(|| layout("this process has no [stack]".into()))?;
                if cur.end != e.end || !e.has_data() {
                    return Err(layout(format!("the stack ends at {:#x} here but at {:#x} in the image", cur.end, e.end)));
                }
                if e.start < cur.start {
                    ops.push(Op { op: arch::OP_GROW_STACK, addr: e.start, len: cur.start - e.start, ..Op::default() });
                }
                ops.push(Op { op: arch::OP_READ_INTO, prot: e.prot, addr: e.start, len: e.len(), off: e.data_offset, fd: image_fd, flags: 0 });
            }
            Kind::Anon | Kind::File if e.has_data() => {
                if e.flags & format::FLAG_SHARED != 0 {
                    return Err(layout(format!("{} is a shared mapping with data", what())));
                }
                let read_only = e.prot & libc::PROT_WRITE as u32 == 0;
                if !(read_only && identical(e)) {
                    ops.push(Op { op: arch::OP_MAP_DATA, prot: e.prot, addr: e.start, len: e.len(), off: e.data_offset, fd: image_fd, flags: 0 });
                }
            }
            Kind::Anon | Kind::File => {
                if identical(e) {
                    continue;
                }
                if e.prot == 0 {
                    ops.push(Op { op: arch::OP_MAP_NONE, addr: e.start, len: e.len(), ..Op::default() });
                    continue;
                }
                if e.kind() == Kind::Anon || e.flags & format::FLAG_DELETED != 0 {
                    return Err(layout(format!("{} has no saved bytes and no file to map", what())));
                }
                let p = std::ffi::OsStr::from_bytes(meta.path(e));
                let file = File::open(p).map_err(|err| Error::io(format!("{}: opening the file to map it again", what()), err))?;
                let ino = file.metadata().map_err(|err| Error::io(what(), err))?.ino();
                if ino != e.inode {
                    return Err(layout(format!("{}: the file was replaced since the checkpoint", what())));
                }
                let shared = e.flags & format::FLAG_SHARED != 0;
                ops.push(Op {
                    op: arch::OP_MAP_FILE,
                    prot: e.prot,
                    addr: e.start,
                    len: e.len(),
                    off: e.map_offset,
                    fd: file.as_raw_fd(),
                    flags: if shared { libc::MAP_SHARED } else { libc::MAP_PRIVATE } as u32,
                });
                files.push(file);
            }
        }
    }
    if meta.header.tid_offset != format::NO_TID_OFFSET {
        ops.push(Op { op: arch::OP_SET_TID, addr: meta.header.ctx.fsbase + meta.header.tid_offset, ..Op::default() });
    }
    // The environment this process was started with is lost with its stack (and
    // /proc/self/environ then shows the image's): keep it in an anonymous file whose
    // descriptor the restored process finds in RESTART_ENV_FD.
    if let Some(fd) = environment_memfd() {
        ops.push(Op { op: arch::OP_STORE64, addr: std::ptr::addr_of!(RESTART_ENV_FD) as u64, off: fd as u64, ..Op::default() });
    }
    for file in files {
        ops.push(Op { op: arch::OP_CLOSE, fd: file.into_raw_fd(), ..Op::default() });
    }
    ops.push(Op { op: arch::OP_CLOSE, fd: f.into_raw_fd(), ..Op::default() });

    // The plan and the restorer's stack, where neither layout has anything.
    let plan_bytes = std::mem::size_of::<PlanHead>() as u64 + ops.len() as u64 * std::mem::size_of::<Op>() as u64;
    let len = plan_bytes.div_ceil(PAGE) * PAGE + RESTORER_STACK;
    let area = place_area(len, &meta, &current).ok_or_else(|| layout("no free address range for the restorer".into()))?;
    let head = PlanHead { ctx: meta.header.ctx, self_addr: area, self_len: len, nops: ops.len() as u32, pad: 0 };
    // SAFETY: the area is a fresh mapping of `len` bytes; PlanHead is followed by the ops,
    // both plain-old-data with 8-byte alignment.
    unsafe {
        std::ptr::write(area as *mut PlanHead, head);
        let dst = (area as usize + std::mem::size_of::<PlanHead>()) as *mut Op;
        std::ptr::copy_nonoverlapping(ops.as_ptr(), dst, ops.len());
    }
    drop(ops);
    drop(by_start);
    drop(current);
    drop(text);
    drop(meta);
    // SAFETY: the plan is complete; the restorer never returns.
    unsafe { arch::sf_restore_enter(area as *const PlanHead, area + len) }
}

fn read_exact_or(f: &mut File, buf: &mut [u8], err: impl FnOnce() -> Error) -> Result<(), Error> {
    f.read_exact(buf).map_err(|_| err())
}

/// Reads every region's bytes and compares its checksum (before anything is changed).
fn verify_data(f: &mut File, meta: &Meta, shown: &str) -> Result<(), Error> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; 4 << 20];
    for (i, e) in meta.entries.iter().enumerate().filter(|(_, e)| e.has_data()) {
        let mut crc = 0u32;
        let mut done = 0u64;
        while done < e.data_len {
            let n = (e.data_len - done).min(buf.len() as u64) as usize;
            f.read_exact_at(&mut buf[..n], e.data_offset + done)
                .map_err(|err| Error::io(format!("reading image {shown}"), err))?;
            crc = crc32c::crc32c_append(crc, &buf[..n]);
            done += n as u64;
        }
        if crc != e.data_crc {
            return Err(Error::Damaged {
                path: shown.to_string(),
                why: format!(
                    "checksum mismatch in region {i} ({:#x}-{:#x} {}): the image is damaged",
                    e.start,
                    e.end,
                    String::from_utf8_lossy(meta.path(e))
                ),
            });
        }
    }
    Ok(())
}

/// Maps `len` bytes at an address used by neither the image nor this process.
fn place_area(len: u64, meta: &Meta, current: &[MapLine<'_>]) -> Option<u64> {
    let busy = |a: u64| {
        meta.entries.iter().any(|e| e.start < a + len && a < e.end) || current.iter().any(|l| l.start < a + len && a < l.end)
    };
    let step = 1u64 << 36;
    (1..64u64).map(|k| 0x6000_0000_0000u64 - k * step).filter(|&a| !busy(a)).find(|&a| {
        // SAFETY: MAP_FIXED_NOREPLACE never replaces an existing mapping.
        let p = unsafe {
            libc::mmap(
                a as *mut libc::c_void,
                len as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE,
                -1,
                0,
            )
        };
        if p as u64 == a {
            return true;
        }
        if p != libc::MAP_FAILED {
            // SAFETY: an old kernel placed it elsewhere; give it back.
            unsafe { libc::munmap(p, len as usize) };
        }
        false
    })
}

