//! Which of several requests a test or wait call reports, decided in one place.
//!
//! MPI leaves the choice open (`MPI_Waitany` may return any completed request), and a
//! test that finds nothing is a nondeterministic event too: a message-logging protocol
//! must replay both exactly. So the any/some/all family picks here, by one rule (the
//! lowest index first), and every decision goes through the door
//! ([`crate::door::Door::completed`]), with the count of unsuccessful tests before it.

use crate::door::CompletionCall;
use crate::engine::Engine;
use crate::error::MpiResult;
use crate::slab::Handle;

impl Engine {
    fn done(&self, h: Handle) -> bool {
        self.is_complete(h).unwrap_or(true)
    }

    fn completed_indices(&self, hs: &[Option<Handle>]) -> Vec<usize> {
        hs.iter().enumerate().filter_map(|(i, h)| h.filter(|h| self.done(*h)).map(|_| i)).collect()
    }

    fn report(&mut self, call: CompletionCall, indices: &[usize]) {
        if indices.is_empty() {
            self.door_mut().test_failed();
        } else {
            self.door_mut().completed(call, indices);
        }
    }

    /// MPI_Test: whether `h` completed (progress is made if it had not).
    pub fn test(&mut self, h: Handle) -> MpiResult<bool> {
        if !self.is_complete(h)? {
            self.progress()?;
        }
        let done = self.is_complete(h)?;
        self.report(CompletionCall::Test, if done { &[0] } else { &[] });
        Ok(done)
    }

    /// MPI_Testany: the lowest index of a completed request among `hs` (None: inactive or
    /// null entries), after one round of progress.
    pub fn test_any(&mut self, hs: &[Option<Handle>]) -> MpiResult<Option<usize>> {
        self.progress()?;
        let first = hs.iter().position(|h| h.is_some_and(|h| self.done(h)));
        self.report(CompletionCall::Testany, first.as_slice());
        Ok(first)
    }

    /// MPI_Waitany: block until a request among `hs` completes; the lowest such index.
    /// None when no entry is active.
    pub fn wait_any(&mut self, hs: &[Option<Handle>]) -> MpiResult<Option<usize>> {
        if hs.iter().all(Option::is_none) {
            return Ok(None);
        }
        let mut found = None;
        self.block_until(|e| {
            found = hs.iter().position(|h| h.is_some_and(|h| e.done(h)));
            found.is_some()
        })?;
        self.report(CompletionCall::Waitany, found.as_slice());
        Ok(found)
    }

    /// MPI_Testsome: indices of every completed request among `hs`, after one round of
    /// progress.
    pub fn test_some(&mut self, hs: &[Option<Handle>]) -> MpiResult<Vec<usize>> {
        self.progress()?;
        let done = self.completed_indices(hs);
        self.report(CompletionCall::Testsome, &done);
        Ok(done)
    }

    /// MPI_Waitsome: block until at least one request among `hs` completes; every
    /// completed index.
    pub fn wait_some(&mut self, hs: &[Option<Handle>]) -> MpiResult<Vec<usize>> {
        self.block_until(|e| hs.iter().flatten().any(|h| e.done(*h)))?;
        let done = self.completed_indices(hs);
        self.report(CompletionCall::Waitsome, &done);
        Ok(done)
    }

    /// MPI_Testall: whether every request among `hs` completed, after one round of
    /// progress.
    pub fn test_all(&mut self, hs: &[Option<Handle>]) -> MpiResult<bool> {
        self.progress()?;
        let all = hs.iter().flatten().all(|h| self.done(*h));
        let indices: Vec<usize> = if all { hs.iter().enumerate().filter(|(_, h)| h.is_some()).map(|(i, _)| i).collect() } else { Vec::new() };
        if all && indices.is_empty() {
            return Ok(true);
        }
        self.report(CompletionCall::Testall, &indices);
        Ok(all)
    }
}
