//! Taking an image: checks in the caller, a fork, and a child that writes the file while
//! the parent goes on (copy-on-write keeps the child's view frozen at the fork).
//!
//! The child saves the memory it is running in, so between reading `/proc/self/maps` and
//! writing the last byte it allocates nothing (no heap change, no new mapping that the list
//! would miss) and runs only below the frame that saved the context (every frame above it
//! must be in the image as it was at the fork; see `sf_checkpoint_fork`).

use std::ffi::{c_int, c_void, CString};
use std::io::Write as _;
use std::ops::Range;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::arch::{self, Context};
use crate::error::Error;
use crate::format::{self, Entry, Header, Kind, ENTRY_LEN, FLAG_DATA, FLAG_DELETED, HEADER_LEN, PAGE};
use crate::maps::{self, MapLine};

/// What a checkpoint may leave out.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Threads (kernel thread ids) that may exist besides the caller: the library's own,
    /// which the caller stops or rebuilds itself. Any other thread makes the checkpoint fail.
    pub ignore_threads: Vec<i32>,
    /// Address ranges not saved (mappings the caller re-creates itself after a restore, such
    /// as shared-memory rings). A `MAP_SHARED` mapping outside them makes the checkpoint fail.
    pub skip_ranges: Vec<Range<u64>>,
}

/// What [`checkpoint`] returned to.
#[derive(Debug)]
pub enum Outcome {
    /// The original process: the image is being written by a child.
    Checkpointed(Pending),
    /// A process restored from the image: execution came back from the checkpoint.
    Restored,
}

/// Facts about a finished image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImageStats {
    /// File size in bytes.
    pub bytes: u64,
    /// Regions in the table.
    pub regions: u32,
    /// Regions whose bytes the image holds.
    pub data_regions: u32,
}

/// An image being written by a child process.
#[derive(Debug)]
pub struct Pending {
    pid: libc::pid_t,
    pipe: c_int,
    tmp: CString,
    reaped: bool,
}

impl Pending {
    /// The writer's process id.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Without blocking: `Ok(None)` while the writer runs, else its result (once).
    pub fn try_wait(&mut self) -> Result<Option<ImageStats>, Error> {
        self.wait_inner(libc::WNOHANG)
    }

    /// Blocks until the image is complete (renamed to its final name) or failed.
    pub fn wait(mut self) -> Result<ImageStats, Error> {
        self.wait_inner(0)?.ok_or(Error::Reaped)
    }

    fn wait_inner(&mut self, flags: c_int) -> Result<Option<ImageStats>, Error> {
        if self.reaped {
            return Err(Error::Reaped);
        }
        let mut status = 0;
        let r = loop {
            // SAFETY: plain system call on our own child.
            let r = unsafe { libc::waitpid(self.pid, &mut status, flags) };
            if r == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            break r;
        };
        if r == 0 {
            return Ok(None);
        }
        self.reaped = true;
        if r == -1 {
            self.cleanup();
            return Err(Error::last_os("waiting for the image writer"));
        }
        let mut msg = Vec::new();
        let mut buf = [0u8; 512];
        loop {
            // SAFETY: reading into a local buffer.
            let n = unsafe { libc::read(self.pipe, buf.as_mut_ptr().cast(), buf.len()) };
            if n <= 0 {
                break;
            }
            msg.extend_from_slice(&buf[..n as usize]);
        }
        let exited_ok = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
        let result = match (msg.first(), exited_ok) {
            (Some(b'K'), true) if msg.len() == 17 => Ok(ImageStats {
                bytes: u64::from_le_bytes(msg[1..9].try_into().expect("8 bytes")),
                regions: u32::from_le_bytes(msg[9..13].try_into().expect("4 bytes")),
                data_regions: u32::from_le_bytes(msg[13..17].try_into().expect("4 bytes")),
            }),
            (Some(b'E'), _) => Err(Error::Writer(String::from_utf8_lossy(&msg[1..]).into_owned())),
            _ => Err(Error::WriterDied(status)),
        };
        self.cleanup();
        if result.is_err() {
            // SAFETY: removing our own temporary file (it may not exist).
            unsafe { libc::unlink(self.tmp.as_ptr()) };
        }
        result.map(Some)
    }

    fn cleanup(&mut self) {
        if self.pipe >= 0 {
            // SAFETY: our pipe's read end.
            unsafe { libc::close(self.pipe) };
            self.pipe = -1;
        }
    }
}

impl Drop for Pending {
    /// Reaps the writer (blocking) so it leaves no zombie; the image is kept if complete.
    fn drop(&mut self) {
        if !self.reaped {
            let _ = self.wait_inner(0);
        }
        self.cleanup();
    }
}

/// Thread ids of the calling process other than the caller and `ignore`.
pub fn other_threads(ignore: &[i32]) -> Result<Vec<i32>, Error> {
    // SAFETY: gettid has no preconditions.
    let me = unsafe { libc::gettid() };
    let dir = std::fs::read_dir("/proc/self/task").map_err(|e| Error::io("listing /proc/self/task", e))?;
    let mut others = Vec::new();
    for ent in dir {
        let ent = ent.map_err(|e| Error::io("listing /proc/self/task", e))?;
        let Some(tid) = ent.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else { continue };
        if tid != me && !ignore.contains(&tid) {
            others.push(tid);
        }
    }
    others.sort_unstable();
    Ok(others)
}

/// Offsets from the thread pointer of 32-bit words that hold the thread id (the C
/// library's cached id). The child keeps those that changed to its own id: that word is
/// set to the new id after a restore.
const TID_SCAN: usize = 1024;
const MAX_TID_CANDIDATES: usize = 16;

struct Job {
    ctx: Context,
    tmp: CString,
    dest: CString,
    dir: CString,
    skip: Vec<Range<u64>>,
    tid_candidates: [u32; MAX_TID_CANDIDATES],
    ntid: usize,
    pipe_w: c_int,
}

/// Saves the calling thread and the process's memory into the image `path`.
///
/// Returns [`Outcome::Checkpointed`] at once in the original process (the image is written
/// by a child; ask the [`Pending`] whether it finished), and [`Outcome::Restored`] when a
/// process restored from that image comes back here. The image appears under `path` only
/// when complete (it is written to `path.partial` and renamed).
///
/// Refused with an error when the process was not started with `ADDR_NO_RANDOMIZE`, when it
/// has threads other than the caller and `opts.ignore_threads`, or has `MAP_SHARED` mappings
/// outside `opts.skip_ranges`.
pub fn checkpoint(path: &Path, opts: &Options) -> Result<Outcome, Error> {
    if !crate::personality::no_randomize_active() {
        return Err(Error::Randomized);
    }
    let others = other_threads(&opts.ignore_threads)?;
    if !others.is_empty() {
        return Err(Error::Threads { tids: others });
    }
    let cpath = |p: &Path| {
        CString::new(p.as_os_str().as_bytes())
            .map_err(|_| Error::Io { what: format!("image path {}", p.display()), err: "contains a NUL byte".into() })
    };
    let mut tmp_name = path.as_os_str().to_owned();
    tmp_name.push(".partial");
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let (tmp, dest, dir) = (cpath(Path::new(&tmp_name))?, cpath(path)?, cpath(dir)?);
    let mut fds = [0 as c_int; 2];
    // SAFETY: pipe2 fills the array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(Error::last_os("creating the image writer's pipe"));
    }
    let mut job = Box::new(Job {
        ctx: Context::default(),
        tmp,
        dest,
        dir,
        skip: opts.skip_ranges.clone(),
        tid_candidates: [0; MAX_TID_CANDIDATES],
        ntid: 0,
        pipe_w: fds[1],
    });
    // SAFETY: gettid has no preconditions; the thread pointer's first TID_SCAN bytes are the
    // thread descriptor of the C library (x86-64: TLS variant II, descriptor at the pointer).
    unsafe {
        let me = libc::gettid();
        let tp = arch::thread_pointer() as *const i32;
        for i in 0..TID_SCAN / 4 {
            if *tp.add(i) == me && job.ntid < MAX_TID_CANDIDATES {
                job.tid_candidates[job.ntid] = (i * 4) as u32;
                job.ntid += 1;
            }
        }
    }
    // Make sure the checksum code has chosen its implementation (a cached CPU-feature word)
    // before the child saves memory: the child must not change memory while it saves it.
    let _ = crc32c::crc32c(b"warm");

    let job_ptr: *mut Job = &mut *job;
    // SAFETY: job outlives the call in the parent; in the child it is read by child_main.
    let r = unsafe { arch::sf_checkpoint_fork(&mut (*job_ptr).ctx, child_main, job_ptr.cast()) };
    if r == 0 {
        // Restored: the pipe's numbers belong to the old process; do not close them.
        std::mem::forget(job);
        return Ok(Outcome::Restored);
    }
    // SAFETY: closing our own pipe's write end.
    unsafe { libc::close(fds[1]) };
    if r < 0 {
        // SAFETY: our pipe's read end.
        unsafe { libc::close(fds[0]) };
        return Err(Error::io("fork", std::io::Error::from_raw_os_error(-r as i32)));
    }
    Ok(Outcome::Checkpointed(Pending { pid: r as libc::pid_t, pipe: fds[0], tmp: job.tmp.clone(), reaped: false }))
}

/// Child side: write the image, report through the pipe, exit status 0 or 1.
unsafe extern "C" fn child_main(arg: *mut c_void) -> c_int {
    let job = &*(arg as *const Job);
    let mut msg = [0u8; 512];
    let res = std::panic::catch_unwind(|| write_image(job));
    let (n, code) = match res {
        Ok(Ok(stats)) => {
            msg[0] = b'K';
            msg[1..9].copy_from_slice(&stats.bytes.to_le_bytes());
            msg[9..13].copy_from_slice(&stats.regions.to_le_bytes());
            msg[13..17].copy_from_slice(&stats.data_regions.to_le_bytes());
            (17, 0)
        }
        Ok(Err(e)) => {
            msg[0] = b'E';
            let mut w = &mut msg[1..];
            let _ = write!(w, "{}", e);
            (512 - w.len(), 1)
        }
        Err(_) => {
            msg[0] = b'E';
            let m = b"panic in the image writer";
            msg[1..1 + m.len()].copy_from_slice(m);
            (1 + m.len(), 1)
        }
    };
    libc::write(job.pipe_w, msg.as_ptr().cast(), n);
    code
}

/// A failure inside the child, described without allocating.
#[derive(Debug)]
struct ChildError {
    what: &'static str,
    errno: i32,
}

impl std::fmt::Display for ChildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.errno != 0 {
            write!(f, "{} ({})", self.what, std::io::Error::from_raw_os_error(self.errno))
        } else {
            f.write_str(self.what)
        }
    }
}

fn os_err(what: &'static str) -> ChildError {
    ChildError { what, errno: std::io::Error::last_os_error().raw_os_error().unwrap_or(0) }
}

fn plain(what: &'static str) -> ChildError {
    ChildError { what, errno: 0 }
}

const MAPS_AREA: usize = 4 << 20;
const META_AREA: usize = 3 << 20;
const CMP_AREA: usize = 1 << 20;
const SCRATCH: usize = MAPS_AREA + META_AREA + CMP_AREA;

/// An anonymous mapping, unmapped on drop (the child's only memory of its own).
struct Scratch {
    ptr: *mut u8,
    len: usize,
}

impl Scratch {
    fn new(len: usize) -> Result<Scratch, ChildError> {
        // SAFETY: a fresh private anonymous mapping.
        let p = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
        };
        if p == libc::MAP_FAILED {
            return Err(os_err("mapping scratch memory"));
        }
        Ok(Scratch { ptr: p.cast(), len })
    }

    fn range(&self) -> Range<u64> {
        self.ptr as u64..self.ptr as u64 + self.len as u64
    }

    fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: the mapping is ours, readable and writable.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        // SAFETY: our mapping.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

struct Fd(c_int);

impl Drop for Fd {
    fn drop(&mut self) {
        // SAFETY: our descriptor.
        unsafe { libc::close(self.0) };
    }
}

fn read_file_into(path: &std::ffi::CStr, buf: &mut [u8]) -> Result<usize, ChildError> {
    // SAFETY: plain system calls into our buffer.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(os_err("opening a /proc file"));
    }
    let fd = Fd(fd);
    let mut n = 0;
    while n < buf.len() {
        // SAFETY: reading into the unused part of buf.
        let r = unsafe { libc::read(fd.0, buf[n..].as_mut_ptr().cast(), buf.len() - n) };
        if r < 0 {
            if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return Err(os_err("reading a /proc file"));
        }
        if r == 0 {
            return Ok(n);
        }
        n += r as usize;
    }
    Err(plain("a /proc file is larger than the space set aside for it"))
}

fn pwrite_all(fd: c_int, mut data: &[u8], mut off: u64) -> Result<(), ChildError> {
    while !data.is_empty() {
        let chunk = data.len().min(1 << 30);
        // SAFETY: writing from a readable slice.
        let r = unsafe { libc::pwrite(fd, data.as_ptr().cast(), chunk, off as libc::off_t) };
        if r < 0 {
            if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return Err(os_err("writing the image"));
        }
        data = &data[r as usize..];
        off += r as u64;
    }
    Ok(())
}

/// The region's bytes equal the file's at the mapping's offset (a read-only part of a
/// library that was never written): the restore maps the file instead of storing a copy.
fn same_as_file(l: &MapLine<'_>, cmp: &mut [u8]) -> bool {
    let mut p = [0u8; 4097];
    let b = l.path.as_bytes();
    if b.len() >= p.len() {
        return false;
    }
    p[..b.len()].copy_from_slice(b);
    // SAFETY: NUL-terminated path in a local buffer.
    let fd = unsafe { libc::open(p.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return false;
    }
    let fd = Fd(fd);
    let len = (l.end - l.start) as usize;
    let mut done = 0;
    while done < len {
        let want = (len - done).min(cmp.len());
        // SAFETY: reading into the comparison buffer.
        let r = unsafe { libc::pread(fd.0, cmp.as_mut_ptr().cast(), want, (l.offset + done as u64) as libc::off_t) };
        if r != want as isize {
            return false; // short file (mapping past its end) or error: keep a copy
        }
        // SAFETY: the region is readable (checked by the caller) and mapped.
        let mem = unsafe { std::slice::from_raw_parts((l.start as usize + done) as *const u8, want) };
        if mem != &cmp[..want] {
            return false;
        }
        done += want;
    }
    true
}

fn overlaps(r: &Range<u64>, l: &MapLine<'_>) -> bool {
    l.start < r.end && r.start < l.end
}

fn write_image(job: &Job) -> Result<ImageStats, ChildError> {
    let mut scratch = Scratch::new(SCRATCH)?;
    let own = scratch.range();
    let mut stat = [0u8; 4096];
    let stat_len = read_file_into(c"/proc/self/stat", &mut stat)?;
    let start_brk = maps::stat_start_brk(&stat[..stat_len]).ok_or(plain("no start_brk in /proc/self/stat"))?;
    // SAFETY: sbrk(0) only reads the break.
    let brk = unsafe { libc::sbrk(0) } as u64;

    let all = scratch.bytes();
    let (maps_buf, rest) = all.split_at_mut(MAPS_AREA);
    let (meta, cmp) = rest.split_at_mut(META_AREA);
    let maps_len = read_file_into(c"/proc/self/maps", maps_buf)?;
    let text = std::str::from_utf8(&maps_buf[..maps_len]).map_err(|_| plain("/proc/self/maps is not UTF-8"))?;

    let keep = |l: &MapLine<'_>| !overlaps(&own, l) && !job.skip.iter().any(|r| overlaps(r, l));
    let (mut nregions, mut strings_len) = (0usize, 0usize);
    for l in maps::lines(text).filter(keep) {
        // A read-only shared mapping of a file (such as glibc's gconv cache) is mapped
        // again from the file; a writable or anonymous one holds state the image cannot.
        let writable_shared = l.prot & libc::PROT_WRITE as u32 != 0 || !l.is_file() || l.is_deleted();
        if l.shared && !l.is_kernel_special() && writable_shared {
            return Err(plain("the process has a writable or anonymous MAP_SHARED mapping, which images cannot hold yet"));
        }
        nregions += 1;
        strings_len += l.path.len();
    }
    let table_end = HEADER_LEN + nregions * ENTRY_LEN;
    let meta_len = table_end + strings_len;
    if meta_len > meta.len() {
        return Err(plain("too many mappings for the image table"));
    }
    let data_offset = (meta_len as u64).div_ceil(PAGE) * PAGE;
    let mut next_data = data_offset;
    let mut path_off = 0usize;
    let mut data_regions = 0u32;
    for (i, l) in maps::lines(text).filter(keep).enumerate() {
        let kind = if l.is_kernel_special() {
            Kind::Special
        } else if l.path == "[heap]" {
            Kind::Heap
        } else if l.path == "[stack]" {
            Kind::Stack
        } else if l.is_file() {
            Kind::File
        } else {
            Kind::Anon
        };
        let readable = l.prot & libc::PROT_READ as u32 != 0;
        let writable = l.prot & libc::PROT_WRITE as u32 != 0;
        let exec = l.prot & libc::PROT_EXEC as u32 != 0;
        let save = match kind {
            Kind::Special => false,
            Kind::Heap | Kind::Stack | Kind::Anon => readable,
            Kind::File => {
                readable && !l.shared && (writable || l.is_deleted() || (!exec && !same_as_file(&l, cmp)))
            }
        };
        let mut e = Entry {
            start: l.start,
            end: l.end,
            map_offset: l.offset,
            inode: l.inode,
            prot: l.prot,
            kind: kind as u32,
            flags: if l.shared { format::FLAG_SHARED } else { 0 } | if l.is_deleted() { FLAG_DELETED } else { 0 },
            ..Entry::default()
        };
        if !l.path.is_empty() {
            e.path_off = path_off as u32;
            e.path_len = l.path.len() as u32;
            meta[table_end + path_off..table_end + path_off + l.path.len()].copy_from_slice(l.path.as_bytes());
            path_off += l.path.len();
        }
        if save {
            e.flags |= FLAG_DATA;
            e.data_offset = next_data;
            e.data_len = l.end - l.start;
            next_data += e.data_len;
            data_regions += 1;
        }
        e.encode(&mut meta[HEADER_LEN + i * ENTRY_LEN..]);
    }

    // SAFETY: plain system calls with NUL-terminated paths from the parent.
    let fd = unsafe { libc::open(job.tmp.as_ptr(), libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC | libc::O_CLOEXEC, 0o600) };
    if fd < 0 {
        return Err(os_err("creating the image file"));
    }
    let fd = Fd(fd);

    // The bytes. The stack is copied first: this code's own frames are in it and change
    // while it runs, so checksum and file must both come from one frozen copy. So is the
    // region holding the thread's descriptor and static TLS: once a process has ever had a
    // second thread, the C library's system-call wrappers mark and unmark the calling
    // thread as cancellable around every call (a field of the descriptor), and errno lives
    // there too, so this code changes that region while it writes it.
    let tls = job.ctx.fsbase;
    for i in 0..nregions {
        let at = HEADER_LEN + i * ENTRY_LEN;
        let mut e = format::entry_at(meta, at);
        if !e.has_data() {
            continue;
        }
        // SAFETY: the region is mapped and readable (it was listed so, and this process
        // unmaps nothing it listed).
        let mem = unsafe { std::slice::from_raw_parts(e.start as *const u8, e.len() as usize) };
        if e.kind() == Kind::Stack || (e.start..e.start + e.len()).contains(&tls) {
            let mut copy = Scratch::new(e.len() as usize)?;
            copy.bytes().copy_from_slice(mem);
            let frozen = copy.bytes();
            e.data_crc = crc32c::crc32c(frozen);
            pwrite_all(fd.0, frozen, e.data_offset)?;
        } else {
            e.data_crc = crc32c::crc32c(mem);
            pwrite_all(fd.0, mem, e.data_offset)?;
        }
        e.encode(&mut meta[at..]);
    }

    let (tid_offset, ntid_match) = {
        // SAFETY: gettid has no preconditions; the candidates were in the descriptor.
        let me = unsafe { libc::gettid() };
        let tp = job.ctx.fsbase as *const i32;
        let mut found = format::NO_TID_OFFSET;
        let mut n = 0;
        for &off in &job.tid_candidates[..job.ntid] {
            // SAFETY: inside the thread descriptor (checked by the parent's scan).
            if unsafe { *tp.add(off as usize / 4) } == me {
                found = off as u64;
                n += 1;
            }
        }
        (found, n)
    };
    let total_len = next_data;
    let header = Header {
        nregions: nregions as u32,
        strings_len: strings_len as u32,
        start_brk,
        brk,
        data_offset,
        total_len,
        tid_offset: if ntid_match == 1 { tid_offset } else { format::NO_TID_OFFSET },
        ctx: job.ctx,
    };
    header.encode_and_seal(&mut meta[..meta_len]);
    pwrite_all(fd.0, &meta[..meta_len], 0)?;
    // SAFETY: plain system calls on our descriptor and paths.
    unsafe {
        if libc::ftruncate(fd.0, total_len as libc::off_t) != 0 {
            return Err(os_err("setting the image length"));
        }
        if libc::fsync(fd.0) != 0 {
            return Err(os_err("syncing the image"));
        }
        if libc::rename(job.tmp.as_ptr(), job.dest.as_ptr()) != 0 {
            return Err(os_err("renaming the image into place"));
        }
        let d = libc::open(job.dir.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC);
        if d >= 0 {
            libc::fsync(d);
            libc::close(d);
        }
    }
    Ok(ImageStats { bytes: total_len, regions: nregions as u32, data_regions })
}
