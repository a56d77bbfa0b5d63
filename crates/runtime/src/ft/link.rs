//! The launcher's notices (a rank exited) as a failure-detector input, shared between the
//! MPI library's thread and the control thread.

use std::os::fd::RawFd;
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

use crate::client::Bootstrap;
use crate::event::LauncherEvent;

/// Where the control thread gets the launcher's notices from.
pub trait LauncherLink: Send {
    /// A descriptor that becomes readable when a notice may be waiting.
    fn event_fd(&self) -> Option<RawFd>;
    /// The notices received so far, without blocking; `None` when another thread is using
    /// the link right now (it queues the notices it meets; ask again shortly).
    fn try_poll(&mut self) -> Option<Vec<LauncherEvent>>;
    /// A view was installed that leaves out `failed` (every world rank declared failed so
    /// far). Our launcher acts on failures itself, so by default nothing happens; under a
    /// process manager that does not (PMI), abort mode ends the process here
    /// ([`crate::pmi::LeaveOnFailure`]).
    fn on_failures(&mut self, _failed: &[u32]) {}
}

/// A [`Bootstrap`] used by two threads: the MPI library (put, get, fence, finalize, abort)
/// and the control thread (notices). Requests hold the lock for their whole exchange, so
/// replies and notices are never read by the wrong thread.
#[derive(Debug, Clone)]
pub struct SharedBootstrap {
    inner: Arc<Mutex<Bootstrap>>,
    fd: RawFd,
}

impl SharedBootstrap {
    /// Shares `b`.
    pub fn new(b: Bootstrap) -> SharedBootstrap {
        let fd = b.event_fd();
        SharedBootstrap {
            inner: Arc::new(Mutex::new(b)),
            fd,
        }
    }

    /// Exclusive use of the bootstrap for one request.
    pub fn lock(&self) -> MutexGuard<'_, Bootstrap> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl LauncherLink for SharedBootstrap {
    fn event_fd(&self) -> Option<RawFd> {
        Some(self.fd)
    }

    fn try_poll(&mut self) -> Option<Vec<LauncherEvent>> {
        match self.inner.try_lock() {
            Ok(mut b) => Some(b.poll_events()),
            Err(TryLockError::Poisoned(p)) => Some(p.into_inner().poll_events()),
            Err(TryLockError::WouldBlock) => None,
        }
    }
}
