//! Asynchronous notices the launcher pushes to ranks.

use std::fmt;

/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExitStatus {
    /// Normal exit with this code.
    Exited(i32),
    /// Killed by this signal number.
    Signaled(i32),
}

impl ExitStatus {
    /// True for `Exited(0)`.
    pub fn success(&self) -> bool {
        matches!(self, ExitStatus::Exited(0))
    }

    /// The status a shell would report: the code, or 128 + signal number.
    pub fn shell_code(&self) -> i32 {
        match self {
            ExitStatus::Exited(c) => *c,
            ExitStatus::Signaled(s) => 128 + s,
        }
    }

    /// Decodes a raw `waitpid` status word.
    pub fn from_wait_status(raw: i32) -> ExitStatus {
        if libc::WIFSIGNALED(raw) {
            ExitStatus::Signaled(libc::WTERMSIG(raw))
        } else {
            ExitStatus::Exited(libc::WEXITSTATUS(raw))
        }
    }
}

impl fmt::Display for ExitStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExitStatus::Exited(c) => write!(f, "exited with status {c}"),
            ExitStatus::Signaled(s) => {
                write!(f, "killed by signal {s} ({})", signal_name(*s))
            }
        }
    }
}

/// Conventional name of a signal number, e.g. `SIGKILL`.
pub fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        libc::SIGSYS => "SIGSYS",
        _ => "unknown signal",
    }
}

/// A notice pushed by the launcher, returned by [`crate::Bootstrap::poll_events`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LauncherEvent {
    /// A rank's process ended. `finalized` tells whether it had reached MPI_Finalize
    /// first; a rank that exits without finalizing is a failed process. Sent to every
    /// connected survivor, except for ranks that finalized and exited with status 0.
    RankExited {
        rank: u32,
        status: ExitStatus,
        finalized: bool,
    },
    /// World rank `rank` was started again as incarnation `incarnation` (relaunch policy)
    /// and has published its new addresses: reconnect to it.
    RankRejoined { rank: u32, incarnation: u16 },
    /// A message of the checkpoint scheduler (`steadfast-rollback` wire bytes: CHECKPOINT,
    /// COMMIT, ABORT, ROLLBACK, RESUME), coordinated-checkpoint mode.
    Recovery { bytes: Vec<u8> },
    /// The control connection to the launcher was lost (launcher died or closed it).
    /// Synthesised by the client, never sent on the wire.
    Disconnected,
}
