//! [`FtComm`]: everything run-through fault tolerance needs for one communicator instance at
//! one process — failure bookkeeping, revoke, agree and shrink — behind one sans-IO
//! interface for the engine's progress loop.

use std::collections::{BTreeMap, VecDeque};

use tracing::debug;

use crate::agree::{Agreement, Decided};
use crate::failures::Failures;
use crate::rankset::Rank;
use crate::revoke::Revoke;
use crate::value::{Contribution, Seq, Value};
use crate::wire::{Body, Message, KINDS};
use crate::{Config, Error, Time, Transmit};

/// What an [`FtComm`] tells the engine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The communicator is now revoked (by this process or by a REVOKE from another):
    /// pending and future operations on it, except agree and shrink, fail with
    /// MPIX_ERR_REVOKED.
    Revoked,
    /// MPIX_Comm_agree / iagree instance `seq` completed (same values at every process).
    Agreed {
        /// The instance ([`FtComm::start_agree`] returned it).
        seq: Seq,
        /// Bitwise AND of the contributors' flags.
        flag: i32,
        /// Return MPIX_ERR_PROC_FAILED instead of MPI_SUCCESS (the flag is valid either way).
        proc_failed: bool,
    },
    /// MPIX_Comm_shrink / ishrink instance `seq` completed (same values at every process).
    Shrunk {
        /// The instance ([`FtComm::start_shrink`] returned it).
        seq: Seq,
        /// Old ranks of the new communicator's members; the position is the new rank.
        /// It lacks this process only if this process was reported failed while still
        /// running (a false suspicion): it must then stop, as the runtime is killing it.
        members: Vec<Rank>,
        /// Context id of the new communicator (the largest proposal).
        cid: u64,
    },
    /// An agreement taught this process that `rank` failed before the failure detector
    /// did (the decision names only dead processes). Already recorded in
    /// [`FtComm::get_failed`]; the engine may fail pending operations with that rank.
    FailureLearned {
        /// The failed member.
        rank: Rank,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Agree,
    Shrink,
}

/// Counters for tests and measurements.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Messages sent, per kind ([`crate::wire::KIND_NAMES`]).
    pub sent: [u64; KINDS],
    /// Messages refused by [`FtComm::handle`] (foreign epoch, bad ranks, garbage).
    pub refused: u64,
    /// Agreement instances decided here.
    pub decided: u64,
    /// Conflicting decisions heard (must stay 0).
    pub conflicts: u64,
    /// Agreement messages about instances outside the kept window (dropped).
    pub out_of_window: u64,
}

/// Run-through fault-tolerance state of one communicator instance at one process.
#[derive(Debug)]
pub struct FtComm {
    me: Rank,
    size: u32,
    epoch: u64,
    failures: Failures,
    revoke: Revoke,
    agree: Agreement,
    ops: BTreeMap<Seq, Op>,
    out: VecDeque<Transmit>,
    events: VecDeque<Event>,
    refused: u64,
}

impl FtComm {
    /// State of rank `me` in a communicator of `size` members; `epoch` identifies this
    /// communicator instance in every message (use its context id or a generation number
    /// that is never reused while messages of an older instance may be in flight).
    pub fn new(cfg: Config, epoch: u64, size: u32, me: Rank) -> Result<Self, Error> {
        Ok(FtComm {
            me,
            size,
            epoch,
            failures: Failures::new(size),
            revoke: Revoke::new(),
            agree: Agreement::new(cfg, epoch, size, me)?,
            ops: BTreeMap::new(),
            out: VecDeque::new(),
            events: VecDeque::new(),
            refused: 0,
        })
    }

    /// This process's rank.
    pub fn me(&self) -> Rank {
        self.me
    }

    /// Number of members.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// The communicator instance's epoch.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    // ----- failure detector and bookkeeping ----------------------------------------------

    /// The failure detector reports that member `rank` died. Call it for every member of
    /// this communicator whose exit the launcher reported (only after the process is dead:
    /// agreement relies on it). Returns whether the failure was new here.
    pub fn process_failed(&mut self, now: Time, rank: Rank) -> Result<bool, Error> {
        if rank >= self.size {
            return Err(Error::Rank {
                rank,
                size: self.size,
            });
        }
        if rank == self.me {
            return Ok(false);
        }
        let new = self.failures.record(rank);
        self.agree.process_failed(now, rank)?;
        self.pump();
        Ok(new)
    }

    /// Known and acknowledged failures.
    pub fn failures(&self) -> &Failures {
        &self.failures
    }

    /// Whether `rank` is known failed.
    pub fn is_failed(&self, rank: Rank) -> bool {
        self.failures.is_failed(rank)
    }

    /// MPIX_Comm_get_failed / MPI_Comm_get_failed: failed members in detection order.
    pub fn get_failed(&self) -> &[Rank] {
        self.failures.failed()
    }

    /// MPIX_Comm_failure_get_acked: acknowledged failed members, in detection order.
    pub fn get_acked(&self) -> &[Rank] {
        self.failures.acked()
    }

    /// MPIX_Comm_failure_ack: acknowledges every failure known now; returns their number.
    pub fn failure_ack(&mut self) -> usize {
        self.failures.ack_all()
    }

    /// MPI_Comm_ack_failed: acknowledges the first `num_to_ack` failures in
    /// [`FtComm::get_failed`] order; returns `num_acked`.
    pub fn ack_failed(&mut self, num_to_ack: usize) -> usize {
        self.failures.ack_first(num_to_ack)
    }

    /// Whether a receive from MPI_ANY_SOURCE must complete with
    /// MPIX_ERR_PROC_FAILED_PENDING: some known failure is not acknowledged.
    pub fn any_source_must_fail(&self) -> bool {
        self.failures.any_source_must_fail()
    }

    // ----- revoke ---------------------------------------------------------------------------

    /// MPIX_Comm_revoke. Emits [`Event::Revoked`] and the REVOKE flood the first time.
    pub fn revoke(&mut self, _now: Time) {
        let (me, size) = (self.me, self.size);
        let failures = &self.failures;
        let first = !self.revoke.is_revoked();
        let to = self.revoke.revoke(me, size, |r| !failures.is_failed(r));
        if first {
            self.on_revoked(to);
        }
    }

    /// MPIX_Comm_is_revoked.
    pub fn is_revoked(&self) -> bool {
        self.revoke.is_revoked()
    }

    fn on_revoked(&mut self, to: Vec<Rank>) {
        debug!(me = self.me, ?to, "revoked");
        self.events.push_back(Event::Revoked);
        for r in to {
            self.out.push_back(Transmit {
                to: r,
                message: Message {
                    epoch: self.epoch,
                    body: Body::Revoke,
                },
            });
        }
    }

    // ----- agree and shrink -----------------------------------------------------------------

    /// MPIX_Comm_agree / iagree: starts the next agreement with this process's `flag` and
    /// its current failure knowledge. The result is [`Event::Agreed`] with the returned
    /// sequence number. Fails only when too many agreements are outstanding.
    pub fn start_agree(&mut self, now: Time, flag: i32) -> Result<Seq, Error> {
        let c = Contribution::agree(
            flag,
            self.failures.failed_set().clone(),
            self.failures.acked_set(),
        );
        self.start(now, c, Op::Agree)
    }

    /// MPIX_Comm_shrink / ishrink: starts the next agreement on the failed set and on the
    /// new communicator's context id. The largest `cid_proposal` wins, so propose an id
    /// above every id this process has ever allocated: the winner is then free at every
    /// member. The result is [`Event::Shrunk`] with the returned sequence number.
    pub fn start_shrink(&mut self, now: Time, cid_proposal: u64) -> Result<Seq, Error> {
        let c = Contribution::shrink(
            cid_proposal,
            self.failures.failed_set().clone(),
            self.failures.acked_set(),
        );
        self.start(now, c, Op::Shrink)
    }

    fn start(&mut self, now: Time, c: Contribution, op: Op) -> Result<Seq, Error> {
        let seq = self.agree.next_seq();
        self.agree.start(now, seq, c)?;
        self.ops.insert(seq, op);
        self.pump();
        Ok(seq)
    }

    /// The decided value of instance `seq`, while it is in the history.
    pub fn decision(&self, seq: Seq) -> Option<&Value> {
        self.agree.decision(seq)
    }

    /// Whether the next agree or shrink may start now (at most `max_outstanding` past the
    /// oldest undecided one); otherwise the engine keeps the request queued until a
    /// decision comes.
    pub fn can_start(&self) -> bool {
        self.agree.can_start()
    }

    /// The agreement machine (read-only, for diagnostics and tests).
    pub fn agreement(&self) -> &Agreement {
        &self.agree
    }

    /// Number of started, undecided agreements.
    pub fn outstanding(&self) -> usize {
        self.agree.outstanding()
    }

    // ----- I/O ------------------------------------------------------------------------------

    /// Handles a message from member `from`. An error means the message was refused (and
    /// counted): log it and go on.
    pub fn handle(&mut self, now: Time, from: Rank, msg: Message) -> Result<(), Error> {
        let r = self.handle_inner(now, from, msg);
        if r.is_err() {
            self.refused += 1;
        }
        r
    }

    /// Decodes and handles bytes from member `from`.
    pub fn handle_bytes(&mut self, now: Time, from: Rank, bytes: &[u8]) -> Result<(), Error> {
        match Message::decode(bytes, self.size) {
            Ok(m) => self.handle(now, from, m),
            Err(e) => {
                self.refused += 1;
                Err(e.into())
            }
        }
    }

    fn handle_inner(&mut self, now: Time, from: Rank, msg: Message) -> Result<(), Error> {
        if from >= self.size {
            return Err(Error::Rank {
                rank: from,
                size: self.size,
            });
        }
        if msg.epoch != self.epoch {
            return Err(Error::Epoch {
                got: msg.epoch,
                want: self.epoch,
            });
        }
        match msg.body {
            Body::Revoke => {
                if from == self.me {
                    return Err(Error::FromSelf);
                }
                let (me, size) = (self.me, self.size);
                let failures = &self.failures;
                let first = !self.revoke.is_revoked();
                let to = self
                    .revoke
                    .on_revoke(me, from, size, |r| !failures.is_failed(r));
                if first {
                    self.on_revoked(to);
                }
                Ok(())
            }
            _ => {
                let r = self.agree.handle(now, from, msg);
                self.pump();
                r
            }
        }
    }

    /// Runs timers (re-sends, only with `Config::resend_interval`).
    pub fn handle_timeout(&mut self, now: Time) {
        self.agree.handle_timeout(now);
        self.pump();
    }

    /// When [`FtComm::handle_timeout`] wants to run next.
    pub fn poll_timeout(&self) -> Option<Time> {
        self.agree.poll_timeout()
    }

    /// Next message to send.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.out.pop_front().or_else(|| self.agree.poll_transmit())
    }

    /// Next event.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Counters.
    pub fn stats(&self) -> Stats {
        let a = self.agree.stats();
        let mut sent = a.sent;
        sent[Body::Revoke.kind_index()] += self.revoke.sent();
        Stats {
            sent,
            refused: self.refused,
            decided: a.decided,
            conflicts: a.conflicts,
            out_of_window: a.out_of_window,
        }
    }

    /// Turns decisions into events, recording the failures they name first.
    fn pump(&mut self) {
        while let Some(Decided { seq, value }) = self.agree.poll_decided() {
            for r in value.failed.iter() {
                if r != self.me && self.failures.record(r) {
                    self.events.push_back(Event::FailureLearned { rank: r });
                }
            }
            let ev = match self.ops.remove(&seq) {
                Some(Op::Shrink) => Event::Shrunk {
                    seq,
                    members: value.survivors(self.size),
                    cid: value.cid,
                },
                _ => Event::Agreed {
                    seq,
                    flag: value.flag,
                    proc_failed: value.proc_failed,
                },
            };
            self.events.push_back(ev);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Time = Time::ZERO;

    /// Members of a communicator with a lossless network delivered in rounds; `dead`
    /// members drop everything.
    struct Net {
        ms: Vec<FtComm>,
        dead: Vec<bool>,
        events: Vec<Vec<Event>>,
    }

    impl Net {
        fn new(n: u32) -> Net {
            Net {
                ms: (0..n)
                    .map(|r| FtComm::new(Config::default(), 5, n, r).unwrap())
                    .collect(),
                dead: vec![false; n as usize],
                events: vec![Vec::new(); n as usize],
            }
        }

        fn run(&mut self) {
            loop {
                let mut out = Vec::new();
                for (r, m) in self.ms.iter_mut().enumerate() {
                    while let Some(e) = m.poll_event() {
                        self.events[r].push(e);
                    }
                    while let Some(t) = m.poll_transmit() {
                        if !self.dead[r] {
                            out.push((r as Rank, t.to, t.message.encode()));
                        }
                    }
                }
                if out.is_empty() {
                    return;
                }
                for (from, to, bytes) in out {
                    if !self.dead[to as usize] {
                        self.ms[to as usize].handle_bytes(T, from, &bytes).unwrap();
                    }
                }
            }
        }

        fn live(&self) -> Vec<usize> {
            (0..self.ms.len()).filter(|r| !self.dead[*r]).collect()
        }

        fn take(&mut self, r: usize) -> Vec<Event> {
            std::mem::take(&mut self.events[r])
        }
    }

    /// MPICH's ft/agree pattern: a rank died before the call; agree reports it everywhere
    /// (even at a rank whose detector has not said so yet); after failure_ack the next
    /// agree succeeds.
    #[test]
    fn agree_reports_then_ack_clears() {
        let mut net = Net::new(4);
        net.dead[3] = true;
        // Ranks 0 and 2 heard of the failure; rank 1 not yet.
        net.ms[0].process_failed(T, 3).unwrap();
        net.ms[2].process_failed(T, 3).unwrap();
        for r in net.live() {
            net.ms[r].start_agree(T, 1 | (r as i32) << 4).unwrap();
        }
        net.run();
        for r in net.live() {
            let evs = net.take(r);
            let agreed: Vec<&Event> = evs
                .iter()
                .filter(|e| matches!(e, Event::Agreed { .. }))
                .collect();
            assert_eq!(
                agreed,
                vec![&Event::Agreed {
                    seq: 0,
                    flag: 1,
                    proc_failed: true
                }],
                "rank {r}"
            );
            // Rank 1 learned the failure from the decision.
            assert_eq!(
                evs.contains(&Event::FailureLearned { rank: 3 }),
                r == 1,
                "rank {r}: {evs:?}"
            );
            assert_eq!(net.ms[r].get_failed(), &[3]);
            assert!(net.ms[r].any_source_must_fail());
            assert_eq!(net.ms[r].failure_ack(), 1);
            assert!(!net.ms[r].any_source_must_fail());
        }
        for r in net.live() {
            net.ms[r].start_agree(T, 1).unwrap();
        }
        net.run();
        for r in net.live() {
            assert_eq!(
                net.take(r),
                vec![Event::Agreed {
                    seq: 1,
                    flag: 1,
                    proc_failed: false
                }],
                "rank {r}"
            );
            assert_eq!(net.ms[r].get_acked(), &[3]);
        }
    }

    /// One acknowledgement missing (a partial ack_failed) is enough for the error, at all.
    #[test]
    fn one_unacknowledged_caller_means_error_for_all() {
        let mut net = Net::new(4);
        net.dead[0] = true;
        net.dead[2] = true;
        for r in net.live() {
            net.ms[r].process_failed(T, 2).unwrap();
            net.ms[r].process_failed(T, 0).unwrap();
            // get_failed order is detection order.
            assert_eq!(net.ms[r].get_failed(), &[2, 0]);
        }
        net.ms[1].failure_ack();
        assert_eq!(net.ms[3].ack_failed(1), 1);
        assert_eq!(net.ms[3].get_acked(), &[2]);
        for r in net.live() {
            net.ms[r].start_agree(T, -1).unwrap();
        }
        net.run();
        for r in net.live() {
            assert_eq!(
                net.take(r),
                vec![Event::Agreed {
                    seq: 0,
                    flag: -1,
                    proc_failed: true
                }]
            );
        }
    }

    #[test]
    fn shrink_builds_the_same_communicator() {
        let mut net = Net::new(6);
        net.dead[4] = true;
        // Rank 1 contributes, then dies; rank 5 learns of it before calling shrink, the
        // coordinator (rank 0) does not: the union still excludes it.
        net.ms[1].start_shrink(T, 40).unwrap();
        net.run();
        net.dead[1] = true;
        net.ms[5].process_failed(T, 1).unwrap();
        let cids = [10u64, 0, 30, 20, 0, 5];
        for r in [0, 2, 3, 5] {
            net.ms[r].start_shrink(T, cids[r]).unwrap();
        }
        net.run();
        // Nobody can decide while rank 4's death is unknown to the coordinator.
        assert!(net.live().iter().all(|r| net.take(*r).is_empty()));
        for r in net.live() {
            net.ms[r].process_failed(T, 4).unwrap();
        }
        // The coordinator proposes now; it waits for rank 1's acknowledgement until it
        // hears that rank 1 died, but its proposal already excludes rank 1.
        net.run();
        for r in [0, 2, 3] {
            net.ms[r].process_failed(T, 1).unwrap();
        }
        net.run();
        for r in net.live() {
            let evs = net.take(r);
            // Rank 1's proposal counts: it contributed before it died.
            assert!(
                evs.contains(&Event::Shrunk {
                    seq: 0,
                    members: vec![0, 2, 3, 5],
                    cid: 40
                }),
                "rank {r}: {evs:?}"
            );
        }
    }

    #[test]
    fn revoke_floods_once() {
        let mut net = Net::new(5);
        net.dead[4] = true;
        net.ms[2].revoke(T);
        net.ms[2].revoke(T);
        net.run();
        for r in net.live() {
            assert!(net.ms[r].is_revoked());
            assert_eq!(net.take(r), vec![Event::Revoked]);
            assert!(net.ms[r].stats().sent[0] <= 4);
        }
        // The initiator sent to all four others (it did not know 4 was dead), each
        // forwarder to the three others but the one it heard from.
        let total: u64 = net.live().iter().map(|r| net.ms[*r].stats().sent[0]).sum();
        assert_eq!(total, 4 + 3 * 3);
    }

    /// Without failures the flood costs (n − 1)² messages: n − 1 from the initiator, n − 2
    /// from each forwarder.
    #[test]
    fn revoke_cost() {
        for n in [4u32, 8, 16] {
            let mut net = Net::new(n);
            net.ms[(n / 2) as usize].revoke(T);
            net.run();
            let total: u64 = net.ms.iter().map(|m| m.stats().sent[0]).sum();
            assert_eq!(total, (n as u64 - 1).pow(2));
            assert!(net.ms.iter().all(|m| m.is_revoked()));
        }
    }

    #[test]
    fn refused_messages_are_counted() {
        let mut m = FtComm::new(Config::default(), 5, 3, 0).unwrap();
        assert!(m.handle_bytes(T, 1, &[1, 2, 3]).is_err());
        let foreign = Message {
            epoch: 6,
            body: Body::Revoke,
        };
        assert!(m.handle(T, 1, foreign).is_err());
        assert!(!m.is_revoked());
        assert_eq!(m.stats().refused, 2);
        assert_eq!(
            m.process_failed(T, 7),
            Err(Error::Rank { rank: 7, size: 3 })
        );
    }
}
