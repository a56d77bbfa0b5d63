//! The view board: what the control thread publishes and the MPI library reads.
//!
//! The control thread is the only writer. Readers never block the writer for long (one
//! short mutex), and they can notice a change with one atomic load ([`ViewBoard::generation`],
//! cheap enough for a progress loop) or sleep until one happens ([`ViewBoard::wait_newer`],
//! [`ViewBoard::wait_for`]). Suspicions from the MPI library (the reliable layer's
//! retransmission exhaustion) travel the other way through [`ViewBoard::report_suspect`],
//! which wakes the control thread.

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use steadfast_membership::ViewId;

/// One installed view as the MPI library sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewSnapshot {
    /// Number of the view (epoch, coordinator, coordinator incarnation).
    pub view_id: ViewId,
    /// Live members: world ranks, ascending.
    pub members: Vec<u32>,
    /// World ranks of the start-up group that are not members: failed, ascending.
    pub failed: Vec<u32>,
    /// CLOCK_MONOTONIC time (ns) this process installed the view (0 for the start-up view).
    pub installed_at_ns: u64,
    /// This process was removed from the group (it was suspected by the others).
    pub excluded: bool,
    /// Bumped by every publication (view installed, exclusion).
    pub generation: u64,
}

impl ViewSnapshot {
    /// The start-up view of `size` ranks: everybody, epoch 0.
    pub fn initial(size: u32) -> ViewSnapshot {
        ViewSnapshot {
            view_id: ViewId::INITIAL,
            members: (0..size).collect(),
            failed: Vec::new(),
            installed_at_ns: 0,
            excluded: false,
            generation: 0,
        }
    }

    /// The view's epoch (increases with every view change).
    pub fn epoch(&self) -> u64 {
        self.view_id.epoch
    }
}

/// Inputs for the control thread that come from other threads.
#[derive(Debug, Default)]
pub(crate) struct Inbox {
    /// Ranks reported by the MPI library (retransmission exhaustion).
    pub suspects: Vec<u32>,
    /// Leave the group: say goodbye (normal stop) or just vanish (fault injection).
    pub stop: Option<StopMode>,
}

/// How the control thread ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopMode {
    /// MPI_Finalize: tell connected peers (BYE) so they do not take the silence for a failure.
    Graceful,
    /// Fault injection for tests: close every socket at once, as a crash would.
    Crash,
    /// Fault injection for tests: stop answering but keep the sockets open (a hung process).
    Freeze,
}

/// Shared state between the control thread and the MPI library.
#[derive(Debug)]
pub struct ViewBoard {
    size: u32,
    state: Mutex<ViewSnapshot>,
    changed: Condvar,
    generation: AtomicU64,
    inbox: Mutex<Inbox>,
    /// The owner is done with the control thread (ends even a frozen one).
    ended: AtomicBool,
    /// Write end of the control thread's wake-up socket (None without a control thread).
    waker: Option<UnixStream>,
}

/// A cheap handle that remembers which generation its owner has seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subscription {
    seen: u64,
}

impl Subscription {
    /// Whether the board changed since this subscription last looked; marks it seen.
    pub fn changed(&mut self, board: &ViewBoard) -> bool {
        let g = board.generation();
        let changed = g != self.seen;
        self.seen = g;
        changed
    }

    /// The generation this subscription has seen.
    pub fn seen(&self) -> u64 {
        self.seen
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl ViewBoard {
    /// A board for `size` ranks showing the start-up view; `waker` wakes the control thread.
    pub(crate) fn new(size: u32, waker: Option<UnixStream>) -> ViewBoard {
        ViewBoard {
            size,
            state: Mutex::new(ViewSnapshot::initial(size)),
            changed: Condvar::new(),
            generation: AtomicU64::new(0),
            inbox: Mutex::new(Inbox::default()),
            ended: AtomicBool::new(false),
            waker,
        }
    }

    /// A board that never changes (singleton, or membership turned off).
    pub fn fixed(size: u32) -> ViewBoard {
        ViewBoard::new(size, None)
    }

    /// Ranks in the start-up group.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// Whether a control thread feeds this board.
    pub fn is_live(&self) -> bool {
        self.waker.is_some()
    }

    /// The current view.
    pub fn snapshot(&self) -> ViewSnapshot {
        lock(&self.state).clone()
    }

    /// Whether the current view declares `rank` failed (no copy of the view).
    pub fn is_failed(&self, rank: u32) -> bool {
        lock(&self.state).failed.binary_search(&rank).is_ok()
    }

    /// Changes so far; one atomic load, for polling from a progress loop.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// A subscription that has seen everything published so far.
    pub fn subscribe(&self) -> Subscription {
        Subscription {
            seen: self.generation(),
        }
    }

    /// Sleeps until the generation differs from `seen` or `timeout` passes; returns the
    /// generation then.
    pub fn wait_newer(&self, seen: u64, timeout: Duration) -> u64 {
        self.wait_for(timeout, |v| v.generation != seen).generation
    }

    /// Sleeps until `pred` holds for the current view or `timeout` passes; returns the view
    /// then (check `pred` again to tell the two apart).
    pub fn wait_for(
        &self,
        timeout: Duration,
        pred: impl Fn(&ViewSnapshot) -> bool,
    ) -> ViewSnapshot {
        let deadline = Instant::now().checked_add(timeout);
        let mut st = lock(&self.state);
        while !pred(&st) {
            let left = match deadline {
                Some(d) => d.saturating_duration_since(Instant::now()),
                None => Duration::from_secs(3600),
            };
            if left.is_zero() {
                break;
            }
            st = self
                .changed
                .wait_timeout(st, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        st.clone()
    }

    /// Failure-detector input from the MPI library: `rank` looks dead (for example the
    /// reliable layer gave up retransmitting to it). Never blocks.
    pub fn report_suspect(&self, rank: u32) {
        if rank >= self.size {
            return;
        }
        lock(&self.inbox).suspects.push(rank);
        self.wake();
    }

    /// Asks the control thread to stop (it acts on it at its next wake-up, at once).
    pub(crate) fn request_stop(&self, mode: StopMode) {
        lock(&self.inbox).stop.get_or_insert(mode);
        self.wake();
    }

    pub(crate) fn end(&self) {
        self.ended.store(true, Ordering::Release);
        self.wake();
    }

    pub(crate) fn is_ended(&self) -> bool {
        self.ended.load(Ordering::Acquire)
    }

    pub(crate) fn take_inbox(&self) -> Inbox {
        std::mem::take(&mut *lock(&self.inbox))
    }

    fn wake(&self) {
        if let Some(w) = &self.waker {
            // Non-blocking: a full socket means a wake-up is already pending.
            let _ = (&*w).write(&[1]);
        }
    }

    /// Publishes a newly installed view (control thread only).
    pub(crate) fn publish(&self, view_id: ViewId, members: Vec<u32>, installed_at_ns: u64) {
        let failed = {
            let mut f = Vec::new();
            let mut it = members.iter().peekable();
            for r in 0..self.size {
                if it.peek() == Some(&&r) {
                    it.next();
                } else {
                    f.push(r);
                }
            }
            f
        };
        self.update(|s| {
            s.view_id = view_id;
            s.members = members;
            s.failed = failed;
            s.installed_at_ns = installed_at_ns;
            s.excluded = false;
        });
    }

    /// Publishes a view kept by someone other than the control thread (the engine in
    /// relaunch mode, from the launcher's notices of exits and restarts): the next epoch,
    /// with `members` (world ranks, ascending) live. A no-op when nothing changed.
    pub fn publish_external(&self, members: Vec<u32>, installed_at_ns: u64) {
        let current = self.snapshot();
        if current.members == members {
            return;
        }
        let view_id = ViewId {
            epoch: current.view_id.epoch + 1,
            coordinator: members.first().copied().unwrap_or(0),
            coordinator_incarnation: 0,
        };
        self.publish(view_id, members, installed_at_ns);
    }

    /// Records that the group excluded this process (control thread only).
    pub(crate) fn set_excluded(&self) {
        self.update(|s| s.excluded = true);
    }

    fn update(&self, f: impl FnOnce(&mut ViewSnapshot)) {
        let mut st = lock(&self.state);
        f(&mut st);
        st.generation += 1;
        self.generation.store(st.generation, Ordering::Release);
        drop(st);
        self.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn publish_computes_failed_and_wakes_waiters() {
        let b = Arc::new(ViewBoard::fixed(6));
        let mut sub = b.subscribe();
        assert!(!sub.changed(&b));
        let b2 = b.clone();
        let t = std::thread::spawn(move || {
            b2.wait_for(Duration::from_secs(10), |s| s.members.len() == 4)
        });
        std::thread::sleep(Duration::from_millis(20));
        let id = ViewId {
            epoch: 1,
            coordinator: 0,
            coordinator_incarnation: 0,
        };
        b.publish(id, vec![0, 2, 3, 5], 42);
        let s = t.join().unwrap();
        assert_eq!(s.members, vec![0, 2, 3, 5]);
        assert_eq!(s.failed, vec![1, 4]);
        assert!(b.is_failed(4) && !b.is_failed(5));
        assert_eq!(s.epoch(), 1);
        assert!(sub.changed(&b));
        assert!(!sub.changed(&b));
        assert_eq!(b.wait_newer(0, Duration::from_millis(1)), 1);
        // Times out without a change.
        let t0 = Instant::now();
        assert_eq!(b.wait_newer(1, Duration::from_millis(30)), 1);
        assert!(t0.elapsed() >= Duration::from_millis(30));
    }

    #[test]
    fn inbox_collects_suspects_in_range() {
        let b = ViewBoard::fixed(4);
        b.report_suspect(2);
        b.report_suspect(9);
        b.request_stop(StopMode::Graceful);
        b.request_stop(StopMode::Crash);
        let i = b.take_inbox();
        assert_eq!(i.suspects, vec![2]);
        assert_eq!(i.stop, Some(StopMode::Graceful));
        assert!(b.take_inbox().suspects.is_empty());
    }
}
