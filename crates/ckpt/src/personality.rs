//! The `ADDR_NO_RANDOMIZE` personality that makes every run of an executable get the same
//! address-space layout, which restoring an image needs (in the run that checkpoints and in
//! the run that restores).

use std::ffi::{c_char, c_int};
use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;

const QUERY: libc::c_ulong = 0xffff_ffff;

/// The calling process runs with address-space randomization off.
pub fn no_randomize_active() -> bool {
    // SAFETY: personality(0xffffffff) only queries.
    let p = unsafe { libc::personality(QUERY) };
    p != -1 && p & libc::ADDR_NO_RANDOMIZE != 0
}

/// Turns randomization off for the calling process; it takes effect at the next `execve`.
/// Async-signal-safe (one system call), so it may run in a `pre_exec` hook.
pub fn set_no_randomize() -> io::Result<()> {
    // SAFETY: plain system calls on the calling process.
    let cur = unsafe { libc::personality(QUERY) };
    if cur == -1 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::personality((cur | libc::ADDR_NO_RANDOMIZE) as libc::c_ulong) } == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// For launchers: makes `cmd` start its program with randomization off (what `setarch -R`
/// does), so that its ranks can be checkpointed and restored.
pub fn command_no_randomize(cmd: &mut Command) -> &mut Command {
    // SAFETY: the hook makes one system call and touches no memory shared with the parent.
    unsafe { cmd.pre_exec(set_no_randomize) }
}

/// Re-executes the running program (`/proc/self/exe`, same arguments and environment) with
/// randomization off. Returns only on failure.
///
/// # Safety
/// `argv` and `envp` are NULL-terminated arrays of C strings (those the dynamic loader
/// passes to ELF constructors).
pub unsafe fn reexec_no_randomize(argv: *const *const c_char, envp: *const *const c_char) -> io::Error {
    if let Err(e) = set_no_randomize() {
        return e;
    }
    let exe = c"/proc/self/exe";
    let rc: c_int = libc::execve(exe.as_ptr(), argv, envp);
    debug_assert_eq!(rc, -1);
    io::Error::last_os_error()
}
