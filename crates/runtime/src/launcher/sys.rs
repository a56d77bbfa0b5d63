//! Thin, checked wrappers over the few system calls the launcher needs.

use crate::event::ExitStatus;
use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

/// Fills `buf` with random bytes from the kernel (getrandom, else /dev/urandom).
pub fn random_bytes(buf: &mut [u8]) -> io::Result<()> {
    let mut filled = 0;
    while filled < buf.len() {
        let rest = &mut buf[filled..];
        // SAFETY: the pointer and length describe `rest`, which we own mutably.
        let n = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
        if n < 0 {
            let err = io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::ENOSYS) => return urandom(buf),
                _ => return Err(err),
            }
        }
        filled += n as usize;
    }
    Ok(())
}

fn urandom(buf: &mut [u8]) -> io::Result<()> {
    use std::io::Read;
    std::fs::File::open("/dev/urandom")?.read_exact(buf)
}

/// A random 64-bit value.
pub fn random_u64() -> io::Result<u64> {
    let mut b = [0u8; 8];
    random_bytes(&mut b)?;
    Ok(u64::from_ne_bytes(b))
}

/// Sets or clears O_NONBLOCK on a descriptor we own.
pub fn set_nonblocking(fd: RawFd, on: bool) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor owned by the caller; no memory is passed.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 {
            return Err(io::Error::last_os_error());
        }
        let new = if on {
            flags | libc::O_NONBLOCK
        } else {
            flags & !libc::O_NONBLOCK
        };
        if new != flags && libc::fcntl(fd, libc::F_SETFL, new) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Makes this process the reaper of its orphaned descendants, so every process of the
/// job (even one whose rank parent died) is reaped here and no pid is reused while
/// its process group may still be signalled.
pub fn become_subreaper() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: PR_SET_CHILD_SUBREAPER takes an integer flag and touches no memory.
        let rc = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
        if rc != 0 {
            tracing::debug!(error = %io::Error::last_os_error(), "cannot become subreaper");
        }
    }
}

/// Reaps one terminated child, if any: `Some((pid, status))`, or `None` when no child
/// has exited (or there are no children left).
pub fn reap_one() -> Option<(i32, ExitStatus)> {
    loop {
        let mut raw = 0;
        // SAFETY: waitpid writes the status word into `raw`, a valid local.
        let pid = unsafe { libc::waitpid(-1, &mut raw, libc::WNOHANG) };
        if pid > 0 {
            return Some((pid, ExitStatus::from_wait_status(raw)));
        }
        if pid < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
            continue;
        }
        return None;
    }
}

/// Sends `sig` to every process in group `pgid`. Returns false if the group is empty.
pub fn kill_group(pgid: i32, sig: i32) -> bool {
    if pgid <= 1 {
        // Never signal "every process" (-1) or our own group (0) by mistake.
        return false;
    }
    // SAFETY: kill takes plain integers.
    let rc = unsafe { libc::kill(-pgid, sig) };
    rc == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// Whether process group `pgid` still has members (zombies included).
pub fn group_alive(pgid: i32) -> bool {
    kill_group(pgid, 0)
}

/// One entry of a poll set.
pub type PollFd = libc::pollfd;

/// Builds a poll entry.
pub fn pollfd(fd: RawFd, events: i16) -> PollFd {
    libc::pollfd {
        fd,
        events,
        revents: 0,
    }
}

/// Readable.
pub const POLLIN: i16 = libc::POLLIN;
/// Writable.
pub const POLLOUT: i16 = libc::POLLOUT;
/// Any condition that means "stop using this descriptor" besides plain readability.
pub const POLLERRS: i16 = libc::POLLERR | libc::POLLHUP | libc::POLLNVAL;

/// Waits for readiness on `fds` for at most `timeout` (None = forever).
pub fn poll(fds: &mut [PollFd], timeout: Option<Duration>) -> io::Result<usize> {
    let ms = match timeout {
        None => -1,
        // Round up so a deadline 0.4 ms away does not turn into a busy loop.
        Some(d) => d.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32,
    };
    // SAFETY: `fds` is a valid, exclusively borrowed slice of pollfd structs.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
    if n < 0 {
        let err = io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EINTR) {
            return Ok(0);
        }
        return Err(err);
    }
    Ok(n as usize)
}

/// `access(path, X_OK)`: may this process execute `path`?
pub fn is_executable(path: &std::path::Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a valid NUL-terminated string for the duration of the call.
    unsafe { libc::access(c.as_ptr(), libc::X_OK) == 0 }
}

/// `access(path, W_OK | X_OK)`: may this process create entries in directory `path`?
pub fn is_writable_dir(path: &std::path::Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    if !path.is_dir() {
        return false;
    }
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a valid NUL-terminated string for the duration of the call.
    unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) == 0 }
}
