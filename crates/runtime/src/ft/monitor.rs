//! Heartbeat / query-timeout failure detector for silent processes (no I/O, time passed in).
//!
//! Each process watches its tree neighbours in its current view (parent and children).
//! Any frame from a neighbour proves it alive. A neighbour silent for `heartbeat` gets a
//! HOW_ARE_YOU query (repeated every `heartbeat` while it stays silent), which any live
//! process answers whatever its view; a neighbour silent for `suspect` is reported. A crash
//! is usually seen much earlier (launcher notice, broken connection): this input catches
//! processes that hang or stop (SIGSTOP, a frozen node) with their sockets still open.

use std::collections::BTreeMap;
use std::time::Duration;

use steadfast_membership::{Member, NodeId, Time};

#[derive(Debug, Clone, Copy)]
struct Watch {
    incarnation: u32,
    last_heard: Time,
    queried: Option<Time>,
}

/// What the detector wants done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Send HOW_ARE_YOU to this process.
    Query(NodeId),
    /// This life stayed silent past the suspicion timeout.
    Suspect(Member),
}

/// The set of watched neighbours and their silence.
#[derive(Debug)]
pub struct Monitor {
    heartbeat: Duration,
    suspect: Duration,
    watched: BTreeMap<NodeId, Watch>,
}

impl Monitor {
    /// A detector querying after `heartbeat` of silence and suspecting after `suspect`.
    pub fn new(heartbeat: Duration, suspect: Duration) -> Monitor {
        Monitor {
            heartbeat,
            suspect: suspect.max(heartbeat),
            watched: BTreeMap::new(),
        }
    }

    /// Watches exactly `members` from now on; a neighbour already watched keeps its
    /// history, a new one starts with a full grace period.
    pub fn watch(&mut self, now: Time, members: &[Member]) {
        let mut next = BTreeMap::new();
        for m in members {
            let w = match self.watched.get(&m.id) {
                Some(w) if w.incarnation == m.incarnation => *w,
                _ => Watch {
                    incarnation: m.incarnation,
                    last_heard: now,
                    queried: None,
                },
            };
            next.insert(m.id, w);
        }
        self.watched = next;
    }

    /// Stops watching `id` (it left normally, or it is already reported).
    pub fn forget(&mut self, id: NodeId) {
        self.watched.remove(&id);
    }

    /// A frame from `id` arrived: it is alive.
    pub fn heard(&mut self, now: Time, id: NodeId) {
        if let Some(w) = self.watched.get_mut(&id) {
            w.last_heard = w.last_heard.max(now);
            w.queried = None;
        }
    }

    /// Ids currently watched.
    pub fn watched(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.watched.keys().copied()
    }

    /// Queries and suspicions due at `now`; a suspected neighbour is no longer watched.
    pub fn poll(&mut self, now: Time, out: &mut Vec<Action>) {
        let mut gone = Vec::new();
        for (&id, w) in self.watched.iter_mut() {
            let silent = now.saturating_sub(w.last_heard);
            if silent >= self.suspect {
                out.push(Action::Suspect(Member::new(id, w.incarnation)));
                gone.push(id);
            } else if silent >= self.heartbeat
                && w.queried
                    .is_none_or(|q| now.saturating_sub(q) >= self.heartbeat)
            {
                out.push(Action::Query(id));
                w.queried = Some(now);
            }
        }
        for id in gone {
            self.watched.remove(&id);
        }
    }

    /// When [`Monitor::poll`] has something to do next.
    pub fn next_deadline(&self) -> Option<Time> {
        self.watched
            .values()
            .map(|w| {
                let query = match w.queried {
                    None => w.last_heard + self.heartbeat,
                    Some(q) => q + self.heartbeat,
                };
                query.min(w.last_heard + self.suspect)
            })
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn silent_neighbour_is_queried_then_suspected() {
        let mut m = Monitor::new(10 * MS, 35 * MS);
        m.watch(Time::ZERO, &[Member::new(1, 0), Member::new(2, 0)]);
        let mut out = Vec::new();
        m.poll(5 * MS, &mut out);
        assert!(out.is_empty());
        assert_eq!(m.next_deadline(), Some(10 * MS));
        m.heard(8 * MS, 2);
        m.poll(10 * MS, &mut out);
        assert_eq!(out, vec![Action::Query(1)]);
        out.clear();
        // No second query before another heartbeat passed.
        m.poll(15 * MS, &mut out);
        assert!(out.is_empty());
        m.poll(18 * MS, &mut out);
        assert_eq!(out, vec![Action::Query(2)]);
        out.clear();
        // 2 answers, 1 stays silent.
        m.heard(19 * MS, 2);
        m.poll(20 * MS, &mut out);
        assert_eq!(out, vec![Action::Query(1)]);
        out.clear();
        m.poll(35 * MS, &mut out);
        assert!(out.contains(&Action::Suspect(Member::new(1, 0))), "{out:?}");
        out.clear();
        assert_eq!(m.watched().collect::<Vec<_>>(), vec![2]);
        // Suspected once only.
        m.poll(100 * MS, &mut out);
        assert!(!out.contains(&Action::Suspect(Member::new(1, 0))));
    }

    #[test]
    fn rewatch_keeps_history_and_forget_stops() {
        let mut m = Monitor::new(10 * MS, 30 * MS);
        m.watch(Time::ZERO, &[Member::new(1, 0)]);
        m.watch(20 * MS, &[Member::new(1, 0), Member::new(3, 0)]);
        let mut out = Vec::new();
        m.poll(30 * MS, &mut out);
        assert!(out.contains(&Action::Suspect(Member::new(1, 0))));
        assert!(!out
            .iter()
            .any(|a| matches!(a, Action::Suspect(x) if x.id == 3)));
        m.forget(3);
        assert_eq!(m.next_deadline(), None);
        // A new incarnation starts afresh.
        m.watch(40 * MS, &[Member::new(1, 1)]);
        out.clear();
        m.poll(45 * MS, &mut out);
        assert!(out.is_empty());
    }
}
