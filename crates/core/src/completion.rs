//! Which of several requests a test or wait call reports, decided in one place.
//!
//! MPI leaves the choice open (`MPI_Waitany` may return any completed request), and a
//! test that finds nothing is a nondeterministic event too: a message-logging protocol
//! must replay both exactly. So the any/some/all family picks here, by one rule (the
//! lowest index first), and every decision goes through the door
//! ([`crate::door::Door::completed`]), with the count of unsuccessful tests before it.

use steadfast_logging::Forced;

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

    /// In a replay (message logging): the indices the logged run reported at this call,
    /// once those requests are complete, or an empty list where it reported nothing.
    fn replayed(&mut self, call: CompletionCall, hs: &[Option<Handle>]) -> MpiResult<Option<Vec<usize>>> {
        match self.mlog_forced(call) {
            None => Ok(None),
            Some(Forced::Fail) => {
                self.progress()?;
                self.report(call, &[]);
                Ok(Some(Vec::new()))
            }
            Some(Forced::Report { indices, .. }) => {
                let idx: Vec<usize> = indices.iter().map(|&i| i as usize).collect();
                self.block_until(|e| idx.iter().all(|&i| hs.get(i).copied().flatten().is_none_or(|h| e.done(h))))?;
                self.report(call, &idx);
                Ok(Some(idx))
            }
        }
    }

    /// A blocking call in a replay: wait until the logged choice is due and complete.
    fn replayed_wait(&mut self, call: CompletionCall, hs: &[Option<Handle>], any: impl Fn(&Engine) -> bool) -> MpiResult<Option<Vec<usize>>> {
        if self.mlog_forced(call).is_none() {
            return Ok(None);
        }
        let mut chosen = None;
        self.block_until(|e| match e.mlog_forced(call) {
            Some(Forced::Report { indices, .. }) => {
                let ok = indices.iter().all(|&i| hs.get(i as usize).copied().flatten().is_none_or(|h| e.done(h)));
                if ok {
                    chosen = Some(indices.iter().map(|&i| i as usize).collect::<Vec<_>>());
                }
                ok
            }
            Some(Forced::Fail) => false,
            // The replay ended while waiting: decide freely.
            None => any(e),
        })?;
        let idx = match chosen {
            Some(i) => i,
            None => return Ok(None),
        };
        self.report(call, &idx);
        Ok(Some(idx))
    }

    /// MPI_Test: whether `h` completed (progress is made if it had not).
    pub fn test(&mut self, h: Handle) -> MpiResult<bool> {
        if self.logging() {
            if let Some(idx) = self.replayed(CompletionCall::Test, &[Some(h)])? {
                return Ok(!idx.is_empty());
            }
        }
        if !self.is_complete(h)? {
            self.poll_progress()?;
        }
        let done = self.is_complete(h)?;
        self.report(CompletionCall::Test, if done { &[0] } else { &[] });
        Ok(done)
    }

    /// MPI_Testany: the lowest index of a completed request among `hs` (None: inactive or
    /// null entries), after one round of progress.
    pub fn test_any(&mut self, hs: &[Option<Handle>]) -> MpiResult<Option<usize>> {
        if self.logging() {
            if let Some(idx) = self.replayed(CompletionCall::Testany, hs)? {
                return Ok(idx.first().copied());
            }
        }
        self.poll_progress()?;
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
        if self.logging() {
            if let Some(idx) = self.replayed_wait(CompletionCall::Waitany, hs, |e| hs.iter().flatten().any(|h| e.done(*h)))? {
                return Ok(idx.first().copied());
            }
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
        if self.logging() {
            if let Some(idx) = self.replayed(CompletionCall::Testsome, hs)? {
                return Ok(idx);
            }
        }
        self.poll_progress()?;
        let done = self.completed_indices(hs);
        self.report(CompletionCall::Testsome, &done);
        Ok(done)
    }

    /// MPI_Waitsome: block until at least one request among `hs` completes; every
    /// completed index.
    pub fn wait_some(&mut self, hs: &[Option<Handle>]) -> MpiResult<Vec<usize>> {
        if self.logging() {
            if let Some(idx) = self.replayed_wait(CompletionCall::Waitsome, hs, |e| hs.iter().flatten().any(|h| e.done(*h)))? {
                return Ok(idx);
            }
        }
        self.block_until(|e| hs.iter().flatten().any(|h| e.done(*h)))?;
        let done = self.completed_indices(hs);
        self.report(CompletionCall::Waitsome, &done);
        Ok(done)
    }

    /// MPI_Testall: whether every request among `hs` completed, after one round of
    /// progress.
    pub fn test_all(&mut self, hs: &[Option<Handle>]) -> MpiResult<bool> {
        if self.logging() && hs.iter().any(Option::is_some) {
            if let Some(idx) = self.replayed(CompletionCall::Testall, hs)? {
                return Ok(!idx.is_empty());
            }
        }
        self.poll_progress()?;
        let all = hs.iter().flatten().all(|h| self.done(*h));
        let indices: Vec<usize> = if all { hs.iter().enumerate().filter(|(_, h)| h.is_some()).map(|(i, _)| i).collect() } else { Vec::new() };
        if all && indices.is_empty() {
            return Ok(true);
        }
        self.report(CompletionCall::Testall, &indices);
        Ok(all)
    }
}
