//! Fault-tolerant uniform consensus on a [`Value`] for one communicator: the engine of
//! MPIX_Comm_agree and MPIX_Comm_shrink. One [`Agreement`] per process and communicator
//! runs any number of numbered instances (at most `max_outstanding` undecided at once).
//!
//! Per instance it is a Paxos whose ballots are coordinator ranks and whose quorum is
//! "every member not known failed" — sound because the failure detector is perfect (a
//! failure notice only follows the process's death):
//! - every member sends VOTE(contribution, lock) to its coordinator, the lowest rank it does
//!   not know failed (or a higher one that asked it, QUERY), and again when that changes;
//! - the coordinator waits for a vote from every member it does not know failed; it adopts a
//!   decision if a vote carries one, else the accepted value of the highest ballot, else
//!   folds the contributions ([`Value::combine`]); it PROPOSEs that value, waits for an ACK
//!   from every member it does not know failed, decides and sends DECIDE;
//! - a member accepts a proposal unless it promised a higher ballot or knows the proposer
//!   failed; a DECIDE is adopted from anyone.
//!
//! The argument for uniform agreement and termination is in `docs/ulfm.md`.

use std::collections::{BTreeMap, VecDeque};

use tracing::{debug, trace, warn};

use crate::rankset::{Rank, RankSet};
use crate::value::{Ballot, Contribution, Lock, Seq, Value};
use crate::wire::{Body, Message, KINDS};
use crate::{Config, Error, Time, Transmit};

/// A decision, reported once per started instance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decided {
    /// The instance.
    pub seq: Seq,
    /// The decided value (identical everywhere).
    pub value: Value,
}

/// Counters for tests and measurements.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AgreeStats {
    /// Messages sent, per kind ([`crate::wire::KIND_NAMES`]).
    pub sent: [u64; KINDS],
    /// Instances decided here.
    pub decided: u64,
    /// Messages about instances older than the history or too far ahead (dropped).
    pub out_of_window: u64,
    /// Proposals and queries refused because of a promise to a higher ballot or a known
    /// failure of the sender.
    pub stale: u64,
    /// Two different decisions heard for one instance (must stay 0: uniform agreement).
    pub conflicts: u64,
}

#[derive(Debug)]
enum Phase {
    /// Waiting for a vote from every member not known failed.
    Collecting,
    /// Proposed `value`; waiting for an ACK from every member not known failed.
    Proposing { value: Value, acks: RankSet },
}

#[derive(Debug)]
struct Instance {
    /// This process's input, once it started the instance.
    mine: Option<Contribution>,
    /// Acceptor state: accepted proposal or decision.
    lock: Lock,
    /// Highest ballot this process promised (it ignores proposals below it).
    promised: Ballot,
    /// Votes received (index = sender); empty until the first one arrives.
    votes: Vec<Option<(Contribution, Lock)>>,
    /// Set while this process coordinates the instance.
    lead: Option<Phase>,
    /// Where this process's latest vote went (itself when it leads).
    target: Option<Rank>,
    /// The last vote sent: to whom, with which lock (order). A QUERY from there is then
    /// already answered (the vote is on its way), which saves a message per member when
    /// a coordinator takes over.
    sent_vote: Option<(Rank, (u8, Ballot))>,
    /// Next re-send, when configured.
    resend_at: Option<Time>,
}

impl Instance {
    fn new() -> Self {
        Instance {
            mine: None,
            lock: Lock::Free,
            promised: 0,
            votes: Vec::new(),
            lead: None,
            target: None,
            sent_vote: None,
            resend_at: None,
        }
    }

    fn decided(&self) -> Option<&Value> {
        match &self.lock {
            Lock::Decided(v) => Some(v),
            _ => None,
        }
    }

    fn active(&self) -> bool {
        self.mine.is_some() && self.decided().is_none()
    }
}

/// The agreement machine of one process in one communicator.
#[derive(Debug)]
pub struct Agreement {
    me: Rank,
    size: u32,
    epoch: u64,
    cfg: Config,
    /// Members known failed (detector notices and decisions, which only name dead ones).
    failed: RankSet,
    /// Lowest rank not known failed.
    coord: Rank,
    /// Failures learned since the instances were last re-examined.
    dirty: bool,
    next_seq: Seq,
    instances: BTreeMap<Seq, Instance>,
    out: VecDeque<Transmit>,
    decided: VecDeque<Decided>,
    stats: AgreeStats,
}

impl Agreement {
    /// The machine of rank `me` in a communicator of `size` members whose instance is
    /// identified by `epoch` (carried in every message).
    pub fn new(cfg: Config, epoch: u64, size: u32, me: Rank) -> Result<Self, Error> {
        if me >= size {
            return Err(Error::Rank { rank: me, size });
        }
        if cfg.max_outstanding == 0 {
            return Err(Error::Config("max_outstanding must be at least 1"));
        }
        Ok(Agreement {
            me,
            size,
            epoch,
            cfg,
            failed: RankSet::new(),
            coord: 0,
            dirty: false,
            next_seq: 0,
            instances: BTreeMap::new(),
            out: VecDeque::new(),
            decided: VecDeque::new(),
            stats: AgreeStats::default(),
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

    /// Sequence number the next [`Agreement::start`] must use.
    pub fn next_seq(&self) -> Seq {
        self.next_seq
    }

    /// The coordinator this process believes in (lowest rank not known failed).
    pub fn coordinator(&self) -> Rank {
        self.coord
    }

    /// Members known failed.
    pub fn failed(&self) -> &RankSet {
        &self.failed
    }

    /// Counters.
    pub fn stats(&self) -> &AgreeStats {
        &self.stats
    }

    /// Number of started, undecided instances.
    pub fn outstanding(&self) -> usize {
        self.instances.values().filter(|i| i.active()).count()
    }

    /// Oldest started instance not decided yet.
    pub fn oldest_undecided(&self) -> Option<Seq> {
        self.instances
            .iter()
            .find(|(_, i)| i.active())
            .map(|(s, _)| *s)
    }

    /// Whether [`Agreement::start`] may start the next instance: it must be less than
    /// `max_outstanding` past the oldest undecided one. (A window, not a count: a process
    /// that misses one decision must not let the others run arbitrarily far ahead, or they
    /// could forget the instance it still needs; see `docs/ulfm.md`.)
    pub fn can_start(&self) -> bool {
        match self.oldest_undecided() {
            None => true,
            Some(u) => self.next_seq - u < self.cfg.max_outstanding as u64,
        }
    }

    /// Starts instance `seq` (must be [`Agreement::next_seq`]) with this process's input.
    /// The decision comes out of [`Agreement::poll_decided`].
    pub fn start(&mut self, now: Time, seq: Seq, input: Contribution) -> Result<(), Error> {
        if seq != self.next_seq {
            return Err(Error::OutOfOrder {
                seq,
                next: self.next_seq,
            });
        }
        if !self.can_start() {
            return Err(Error::TooManyOutstanding(self.outstanding() as u32));
        }
        if let Some(r) = input.failed.max().filter(|r| *r >= self.size) {
            return Err(Error::Rank {
                rank: r,
                size: self.size,
            });
        }
        if !input.acked.is_subset(&input.failed) {
            return Err(Error::Config(
                "acknowledged failures must be known failures",
            ));
        }
        self.next_seq += 1;
        self.prune();
        let me = self.me;
        let resend = self.cfg.resend_interval.map(|d| now + d);
        let size = self.size as usize;
        let inst = self.instances.entry(seq).or_insert_with(Instance::new);
        inst.mine = Some(input.clone());
        store_vote(&mut inst.votes, size, me, input, inst.lock.clone());
        if let Some(v) = inst.decided().cloned() {
            // Heard of the decision before starting (only possible if the others took this
            // process for dead): report it at once.
            self.report(seq, v);
            return Ok(());
        }
        inst.resend_at = resend;
        debug!(me, seq, coord = self.coord, "agreement started");
        self.send_vote(seq, false);
        self.refresh();
        Ok(())
    }

    /// The failure detector says `rank` failed (a notice that follows its death). Returns
    /// whether the failure was new.
    pub fn process_failed(&mut self, _now: Time, rank: Rank) -> Result<bool, Error> {
        if rank >= self.size {
            return Err(Error::Rank {
                rank,
                size: self.size,
            });
        }
        if rank == self.me {
            warn!(
                me = self.me,
                "told that this process itself failed; ignored"
            );
            return Ok(false);
        }
        let new = self.note_failed(rank);
        self.refresh();
        Ok(new)
    }

    /// Handles a message from member `from`.
    pub fn handle(&mut self, _now: Time, from: Rank, msg: Message) -> Result<(), Error> {
        self.check(from, &msg)?;
        let Some(seq) = msg.body.seq() else {
            return Err(Error::Unexpected(msg.body.name()));
        };
        if !self.in_window(seq) {
            self.stats.out_of_window += 1;
            trace!(
                me = self.me,
                seq,
                from,
                "message outside the instance window dropped"
            );
            return Ok(());
        }
        self.instances.entry(seq).or_insert_with(Instance::new);
        match msg.body {
            Body::Vote {
                contribution, lock, ..
            } => self.on_vote(seq, from, contribution, lock),
            Body::Query { ballot, .. } => self.on_query(seq, from, ballot),
            Body::Propose { ballot, value, .. } => self.on_propose(seq, from, ballot, value),
            Body::Ack { ballot, .. } => self.on_ack(seq, from, ballot),
            Body::Decide { value, .. } => self.decide(seq, value),
            Body::Revoke => return Err(Error::Unexpected("REVOKE")),
        }
        self.refresh();
        Ok(())
    }

    /// Re-sends what undecided instances wait for (only with `resend_interval`).
    pub fn handle_timeout(&mut self, now: Time) {
        let Some(iv) = self.cfg.resend_interval else {
            return;
        };
        let due: Vec<Seq> = self
            .instances
            .iter()
            .filter(|(_, i)| i.active() && i.resend_at.is_some_and(|t| t <= now))
            .map(|(s, _)| *s)
            .collect();
        for seq in due {
            if let Some(inst) = self.instances.get_mut(&seq) {
                inst.resend_at = Some(now + iv);
            }
            self.resend(seq);
        }
    }

    /// When [`Agreement::handle_timeout`] wants to run next.
    pub fn poll_timeout(&self) -> Option<Time> {
        self.instances
            .values()
            .filter(|i| i.active())
            .filter_map(|i| i.resend_at)
            .min()
    }

    /// Next message to send.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.out.pop_front()
    }

    /// Next decision of an instance this process started.
    pub fn poll_decided(&mut self) -> Option<Decided> {
        self.decided.pop_front()
    }

    /// The decision of `seq`, if known and still in the history.
    pub fn decision(&self, seq: Seq) -> Option<&Value> {
        self.instances.get(&seq).and_then(|i| i.decided())
    }

    /// This process's acceptor state for `seq` (accepted proposal or decision), while the
    /// instance is kept. For tests and diagnostics.
    pub fn lock(&self, seq: Seq) -> Option<&Lock> {
        self.instances.get(&seq).map(|i| &i.lock)
    }

    /// Highest ballot this process promised for `seq`. For tests and diagnostics.
    pub fn promised(&self, seq: Seq) -> Option<Ballot> {
        self.instances.get(&seq).map(|i| i.promised)
    }

    // ----- inputs -------------------------------------------------------------------------

    fn check(&self, from: Rank, msg: &Message) -> Result<(), Error> {
        if from >= self.size {
            return Err(Error::Rank {
                rank: from,
                size: self.size,
            });
        }
        if from == self.me {
            return Err(Error::FromSelf);
        }
        if msg.epoch != self.epoch {
            return Err(Error::Epoch {
                got: msg.epoch,
                want: self.epoch,
            });
        }
        msg.validate(self.size)?;
        match &msg.body {
            Body::Query { ballot, .. } | Body::Propose { ballot, .. } if *ballot != from => {
                Err(Error::BallotMismatch {
                    from,
                    ballot: *ballot,
                })
            }
            _ => Ok(()),
        }
    }

    /// Instances this machine keeps state for: the decided history (`2 · max_outstanding`
    /// instances) and a bounded stretch ahead (others may start instances before this
    /// process does, at most `max_outstanding` ahead).
    fn in_window(&self, seq: Seq) -> bool {
        let l = self.cfg.max_outstanding as u64;
        seq >= self.low() && seq < self.next_seq.saturating_add(2 * l)
    }

    fn low(&self) -> Seq {
        self.next_seq
            .saturating_sub(2 * self.cfg.max_outstanding as u64)
    }

    fn prune(&mut self) {
        let low = self.low();
        while let Some((&s, _)) = self.instances.first_key_value() {
            if s >= low {
                break;
            }
            self.instances.remove(&s);
        }
    }

    fn on_vote(&mut self, seq: Seq, from: Rank, c: Contribution, lock: Lock) {
        let size = self.size as usize;
        let Some(inst) = self.instances.get_mut(&seq) else {
            return;
        };
        if let Some(v) = inst.decided().cloned() {
            if !matches!(lock, Lock::Decided(_)) {
                self.send(from, Body::Decide { seq, value: v });
            }
            return;
        }
        if let Lock::Decided(v) = lock {
            self.decide(seq, v);
            return;
        }
        store_vote(&mut inst.votes, size, from, c, lock);
        if inst.lead.is_some() {
            self.progress(seq);
        }
    }

    fn on_query(&mut self, seq: Seq, from: Rank, ballot: Ballot) {
        let me = self.me;
        let known_failed = self.failed.contains(ballot);
        let Some(inst) = self.instances.get_mut(&seq) else {
            return;
        };
        if let Some(v) = inst.decided().cloned() {
            self.send(from, Body::Decide { seq, value: v });
            return;
        }
        if known_failed || ballot < inst.promised {
            self.stats.stale += 1;
            return;
        }
        inst.promised = ballot;
        if ballot > me {
            // A higher coordinator exists: this process no longer coordinates.
            inst.lead = None;
        }
        if let Some(c) = inst.mine.clone() {
            inst.target = Some(ballot);
            if inst.sent_vote == Some((ballot, inst.lock.rank())) {
                return;
            }
            inst.sent_vote = Some((ballot, inst.lock.rank()));
            let lock = inst.lock.clone();
            self.send(
                ballot,
                Body::Vote {
                    seq,
                    contribution: c,
                    lock,
                },
            );
        }
    }

    fn on_propose(&mut self, seq: Seq, from: Rank, ballot: Ballot, value: Value) {
        let me = self.me;
        let known_failed = self.failed.contains(ballot);
        let Some(inst) = self.instances.get_mut(&seq) else {
            return;
        };
        if let Some(v) = inst.decided().cloned() {
            self.send(from, Body::Decide { seq, value: v });
            return;
        }
        if known_failed || ballot < inst.promised {
            self.stats.stale += 1;
            return;
        }
        if inst.mine.is_none() {
            // A proposal needs this process's vote, so this cannot come from a correct
            // coordinator that believes this process alive.
            warn!(
                me,
                seq, from, "proposal for an instance not started here; ignored"
            );
            return;
        }
        inst.promised = ballot;
        inst.lock = Lock::Accepted { ballot, value };
        inst.target = Some(ballot);
        if ballot > me {
            inst.lead = None;
        }
        self.send(ballot, Body::Ack { seq, ballot });
    }

    fn on_ack(&mut self, seq: Seq, from: Rank, ballot: Ballot) {
        if ballot != self.me {
            return;
        }
        let Some(inst) = self.instances.get_mut(&seq) else {
            return;
        };
        if let Some(Phase::Proposing { acks, .. }) = &mut inst.lead {
            acks.insert(from);
            self.progress(seq);
        }
    }

    // ----- protocol steps -----------------------------------------------------------------

    /// Lowest rank at or above `promised` not known failed (the coordinator this process
    /// must vote for), if any.
    fn target_for(&self, promised: Ballot) -> Option<Rank> {
        (promised.max(self.coord)..self.size).find(|r| !self.failed.contains(*r))
    }

    fn note_failed(&mut self, rank: Rank) -> bool {
        if rank == self.me || !self.failed.insert(rank) {
            return false;
        }
        while self.coord < self.size && self.failed.contains(self.coord) {
            self.coord += 1;
        }
        self.dirty = true;
        true
    }

    /// Re-examines active instances after failures were learned: re-vote to a new
    /// coordinator, take over as coordinator, or stop waiting for the dead.
    fn refresh(&mut self) {
        while self.dirty {
            self.dirty = false;
            let active: Vec<Seq> = self
                .instances
                .iter()
                .filter(|(_, i)| i.active())
                .map(|(s, _)| *s)
                .collect();
            for seq in active {
                let Some(inst) = self.instances.get(&seq) else {
                    continue;
                };
                if !inst.active() {
                    continue;
                }
                let (old, leading) = (inst.target, inst.lead.is_some());
                let new = self.target_for(inst.promised);
                if new != old {
                    self.send_vote(seq, true);
                } else if leading {
                    self.progress(seq);
                }
            }
        }
    }

    /// Votes for `seq` at the current target, or coordinates it if that is this process.
    /// `takeover`: the coordinator changed while the instance ran, so a new coordinator
    /// asks every member it has no vote from (some may have decided and moved on).
    fn send_vote(&mut self, seq: Seq, takeover: bool) {
        let me = self.me;
        let Some(inst) = self.instances.get(&seq) else {
            return;
        };
        let target = self.target_for(inst.promised);
        let Some(inst) = self.instances.get_mut(&seq) else {
            return;
        };
        inst.target = target;
        let Some(t) = target else {
            // Every member at or above the promised ballot is known failed: only possible
            // if this process is taken for dead; nothing useful to do.
            return;
        };
        if t == me {
            inst.promised = inst.promised.max(me);
            if inst.lead.is_none() {
                inst.lead = Some(Phase::Collecting);
            }
            if takeover {
                let missing: Vec<Rank> = (0..self.size)
                    .filter(|r| {
                        *r != me
                            && !self.failed.contains(*r)
                            && inst.votes.get(*r as usize).is_none_or_none()
                    })
                    .collect();
                debug!(me, seq, ?missing, "taking over as coordinator");
                for r in missing {
                    self.send(r, Body::Query { seq, ballot: me });
                }
            }
            self.progress(seq);
        } else if let Some(c) = inst.mine.clone() {
            inst.promised = inst.promised.max(t);
            inst.sent_vote = Some((t, inst.lock.rank()));
            let lock = inst.lock.clone();
            self.send(
                t,
                Body::Vote {
                    seq,
                    contribution: c,
                    lock,
                },
            );
        }
    }

    /// Coordinator: moves `seq` forward if everything it waits for has arrived.
    fn progress(&mut self, seq: Seq) {
        let me = self.me;
        let size = self.size;
        let Some(inst) = self.instances.get_mut(&seq) else {
            return;
        };
        if inst.decided().is_some() || inst.mine.is_none() {
            return;
        }
        match &inst.lead {
            None => {}
            Some(Phase::Collecting) => {
                let all_in = (0..size).all(|r| {
                    self.failed.contains(r)
                        || inst.votes.get(r as usize).is_some_and(|v| v.is_some())
                });
                if !all_in {
                    return;
                }
                // A decision anywhere is the decision.
                let mut best: Option<(Ballot, Value)> = match &inst.lock {
                    Lock::Accepted { ballot, value } => Some((*ballot, value.clone())),
                    _ => None,
                };
                let mut decided = None;
                for (r, v) in inst.votes.iter().enumerate() {
                    let Some((_, lock)) = v else { continue };
                    if r as Rank == me {
                        continue;
                    }
                    match lock {
                        Lock::Decided(v) => decided = Some(v.clone()),
                        Lock::Accepted { ballot, value } => {
                            if best.as_ref().is_none_or_lower(*ballot) {
                                best = Some((*ballot, value.clone()));
                            }
                        }
                        Lock::Free => {}
                    }
                }
                if let Some(v) = decided {
                    self.decide(seq, v);
                    return;
                }
                let value = match best {
                    // Some earlier coordinator's proposal may have been decided: keep it.
                    Some((_, v)) => v,
                    None => Value::combine(
                        size,
                        inst.votes
                            .iter()
                            .enumerate()
                            .filter_map(|(r, v)| v.as_ref().map(|(c, _)| (r as Rank, c))),
                        &self.failed,
                    ),
                };
                debug!(me, seq, ?value, "proposing");
                inst.lock = Lock::Accepted {
                    ballot: me,
                    value: value.clone(),
                };
                inst.lead = Some(Phase::Proposing {
                    value: value.clone(),
                    acks: RankSet::from_ranks([me]),
                });
                for r in 0..size {
                    if r != me && !self.failed.contains(r) {
                        self.send(
                            r,
                            Body::Propose {
                                seq,
                                ballot: me,
                                value: value.clone(),
                            },
                        );
                    }
                }
                self.progress(seq);
            }
            Some(Phase::Proposing { value, acks }) => {
                let all = (0..size).all(|r| self.failed.contains(r) || acks.contains(r));
                if all {
                    let v = value.clone();
                    self.decide(seq, v);
                }
            }
        }
    }

    /// Decides `seq` (from ACKs, or adopting a decision heard of: DECIDE, or a vote
    /// carrying one), tells whoever may wait on this process, and reports the decision if
    /// this process started the instance.
    fn decide(&mut self, seq: Seq, value: Value) {
        let me = self.me;
        let size = self.size;
        let Some(inst) = self.instances.get_mut(&seq) else {
            return;
        };
        if let Some(old) = inst.decided() {
            if *old != value {
                self.stats.conflicts += 1;
                warn!(me, seq, ?old, new = ?value, "conflicting decisions");
            }
            return;
        }
        // Whoever may be waiting on this process: everyone if it coordinates, else those
        // whose votes reached it (they took it for the coordinator).
        let leading = inst.target == Some(me) || self.coord == me;
        let waiting: Vec<Rank> = (0..size)
            .filter(|r| {
                *r != me
                    && !self.failed.contains(*r)
                    && (leading
                        || inst.votes.get(*r as usize).is_some_and(|v| {
                            v.as_ref()
                                .is_some_and(|(_, l)| !matches!(l, Lock::Decided(_)))
                        }))
            })
            .collect();
        inst.lock = Lock::Decided(value.clone());
        inst.lead = None;
        inst.votes = Vec::new();
        inst.resend_at = None;
        let started = inst.mine.is_some();
        for r in waiting {
            self.send(
                r,
                Body::Decide {
                    seq,
                    value: value.clone(),
                },
            );
        }
        // The decision names only dead members: learn them too.
        for r in value.failed.iter() {
            self.note_failed(r);
        }
        if started {
            self.report(seq, value);
        }
    }

    fn report(&mut self, seq: Seq, value: Value) {
        self.stats.decided += 1;
        debug!(me = self.me, seq, ?value, "decided");
        self.decided.push_back(Decided { seq, value });
    }

    fn resend(&mut self, seq: Seq) {
        let me = self.me;
        let Some(inst) = self.instances.get(&seq) else {
            return;
        };
        let mut sends = Vec::new();
        match &inst.lead {
            Some(Phase::Collecting) => {
                for r in 0..self.size {
                    if r != me
                        && !self.failed.contains(r)
                        && inst.votes.get(r as usize).is_none_or_none()
                    {
                        sends.push((r, Body::Query { seq, ballot: me }));
                    }
                }
            }
            Some(Phase::Proposing { value, acks }) => {
                for r in 0..self.size {
                    if !self.failed.contains(r) && !acks.contains(r) {
                        sends.push((
                            r,
                            Body::Propose {
                                seq,
                                ballot: me,
                                value: value.clone(),
                            },
                        ));
                    }
                }
            }
            None => {
                if let (Some(t), Some(c)) = (inst.target, inst.mine.clone()) {
                    if t != me {
                        sends.push((
                            t,
                            Body::Vote {
                                seq,
                                contribution: c,
                                lock: inst.lock.clone(),
                            },
                        ));
                    }
                }
            }
        }
        for (r, b) in sends {
            self.send(r, b);
        }
    }

    fn send(&mut self, to: Rank, body: Body) {
        self.stats.sent[body.kind_index()] += 1;
        trace!(me = self.me, to, msg = body.name(), seq = ?body.seq(), "send");
        self.out.push_back(Transmit {
            to,
            message: Message {
                epoch: self.epoch,
                body,
            },
        });
    }
}

/// Records a vote, keeping the most advanced lock heard from that member (messages may
/// arrive out of order; a member's lock only grows).
fn store_vote(
    votes: &mut Vec<Option<(Contribution, Lock)>>,
    size: usize,
    from: Rank,
    c: Contribution,
    lock: Lock,
) {
    if votes.is_empty() {
        votes.resize(size, None);
    }
    let Some(slot) = votes.get_mut(from as usize) else {
        return;
    };
    match slot {
        Some((_, old)) if old.rank() >= lock.rank() => {}
        Some((_, old)) => *old = lock,
        None => *slot = Some((c, lock)),
    }
}

trait SlotExt {
    fn is_none_or_none(&self) -> bool;
}

impl SlotExt for Option<&Option<(Contribution, Lock)>> {
    /// No vote recorded (no vote table yet, or an empty slot).
    fn is_none_or_none(&self) -> bool {
        !matches!(self, Some(Some(_)))
    }
}

trait BestExt {
    fn is_none_or_lower(&self, ballot: Ballot) -> bool;
}

impl BestExt for Option<&(Ballot, Value)> {
    fn is_none_or_lower(&self, ballot: Ballot) -> bool {
        self.is_none_or(|(b, _)| *b < ballot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Time = Time::ZERO;

    fn machine(size: u32, me: Rank) -> Agreement {
        Agreement::new(Config::default(), 9, size, me).unwrap()
    }

    fn input(flag: i32) -> Contribution {
        Contribution::agree(flag, RankSet::new(), RankSet::new())
    }

    fn value(flag: i32) -> Value {
        Value {
            flag,
            proc_failed: false,
            cid: 0,
            failed: RankSet::new(),
            missing: RankSet::new(),
        }
    }

    fn msg(body: Body) -> Message {
        Message { epoch: 9, body }
    }

    fn drain(a: &mut Agreement) -> Vec<Transmit> {
        std::iter::from_fn(|| a.poll_transmit()).collect()
    }

    fn vote(flag: i32, lock: Lock) -> Message {
        msg(Body::Vote {
            seq: 0,
            contribution: input(flag),
            lock,
        })
    }

    /// A new coordinator that hears of two accepted proposals keeps the later one (the
    /// earlier may have been superseded by a decision it cannot see).
    #[test]
    fn highest_ballot_wins() {
        let mut a = machine(5, 2);
        a.start(T, 0, input(1)).unwrap();
        a.process_failed(T, 0).unwrap();
        a.process_failed(T, 1).unwrap();
        let v0 = value(10);
        let v1 = value(11);
        a.handle(
            T,
            3,
            vote(
                1,
                Lock::Accepted {
                    ballot: 1,
                    value: v1.clone(),
                },
            ),
        )
        .unwrap();
        a.handle(
            T,
            4,
            vote(
                1,
                Lock::Accepted {
                    ballot: 0,
                    value: v0,
                },
            ),
        )
        .unwrap();
        let out = drain(&mut a);
        let proposals: Vec<&Value> = out
            .iter()
            .filter_map(|t| match &t.message.body {
                Body::Propose {
                    value, ballot: 2, ..
                } => Some(value),
                _ => None,
            })
            .collect();
        assert_eq!(proposals, vec![&v1, &v1]);
    }

    /// A vote that carries a decision ends the instance at once, for everyone.
    #[test]
    fn decided_vote_is_adopted_and_announced() {
        let mut a = machine(4, 1);
        a.start(T, 0, input(1)).unwrap();
        a.process_failed(T, 0).unwrap();
        let vd = value(7);
        a.handle(T, 2, vote(3, Lock::Decided(vd.clone()))).unwrap();
        assert_eq!(
            a.poll_decided(),
            Some(Decided {
                seq: 0,
                value: vd.clone()
            })
        );
        let decides: Vec<Rank> = drain(&mut a)
            .iter()
            .filter(|t| matches!(&t.message.body, Body::Decide { value, .. } if *value == vd))
            .map(|t| t.to)
            .collect();
        // Rank 3 may still wait on this coordinator.
        assert!(decides.contains(&3), "{decides:?}");
    }

    /// Answering a QUERY is a promise: a late proposal of a lower ballot is refused even
    /// before its sender is known failed.
    #[test]
    fn query_is_a_promise() {
        let mut a = machine(4, 3);
        a.start(T, 0, input(1)).unwrap();
        drain(&mut a);
        a.handle(T, 2, msg(Body::Query { seq: 0, ballot: 2 }))
            .unwrap();
        assert!(matches!(
            drain(&mut a)[..],
            [Transmit {
                to: 2,
                message: Message {
                    body: Body::Vote { .. },
                    ..
                }
            }]
        ));
        a.handle(
            T,
            1,
            msg(Body::Propose {
                seq: 0,
                ballot: 1,
                value: value(5),
            }),
        )
        .unwrap();
        assert!(drain(&mut a).is_empty());
        assert_eq!(a.lock(0), Some(&Lock::Free));
        assert_eq!(a.stats().stale, 1);
    }

    /// A process that took no part as coordinator but received votes (their senders
    /// believed it coordinates) tells them the decision it hears of.
    #[test]
    fn decision_reaches_those_who_voted_here() {
        let mut a = machine(4, 1);
        a.start(T, 0, input(1)).unwrap();
        drain(&mut a);
        // Rank 2 already knows 0 failed and votes here; this process does not know yet.
        a.handle(T, 2, vote(1, Lock::Free)).unwrap();
        let vd = value(3);
        a.handle(
            T,
            0,
            msg(Body::Decide {
                seq: 0,
                value: vd.clone(),
            }),
        )
        .unwrap();
        let out = drain(&mut a);
        assert!(out
            .iter()
            .any(|t| t.to == 2
                && matches!(&t.message.body, Body::Decide { value, .. } if *value == vd)));
        assert!(!out.iter().any(|t| t.to == 3));
    }

    /// Fault-free run of one instance between four machines, by hand: four rounds.
    #[test]
    fn four_rounds_fault_free() {
        let mut ms: Vec<Agreement> = (0..4).map(|r| machine(4, r)).collect();
        for (r, m) in ms.iter_mut().enumerate() {
            m.start(T, 0, input(!(1 << r))).unwrap();
        }
        let mut rounds = 0;
        loop {
            let out: Vec<(Rank, Transmit)> = ms
                .iter_mut()
                .enumerate()
                .flat_map(|(r, m)| drain(m).into_iter().map(move |t| (r as Rank, t)))
                .collect();
            if out.is_empty() {
                break;
            }
            rounds += 1;
            for (from, t) in out {
                ms[t.to as usize].handle(T, from, t.message).unwrap();
            }
        }
        assert_eq!(rounds, 4);
        for m in &mut ms {
            let d = m.poll_decided().unwrap();
            assert_eq!(d.value.flag, !0b1111);
            assert!(!d.value.proc_failed);
        }
    }

    #[test]
    fn window_and_order() {
        let cfg = Config {
            max_outstanding: 2,
            resend_interval: None,
        };
        let mut a = Agreement::new(cfg, 9, 3, 1).unwrap();
        assert_eq!(
            a.start(T, 1, input(1)),
            Err(Error::OutOfOrder { seq: 1, next: 0 })
        );
        a.start(T, 0, input(1)).unwrap();
        a.start(T, 1, input(1)).unwrap();
        assert!(!a.can_start());
        assert_eq!(a.start(T, 2, input(1)), Err(Error::TooManyOutstanding(2)));
        // Deciding #1 does not help: #0 is still undecided and the window is anchored there.
        a.handle(
            T,
            0,
            msg(Body::Decide {
                seq: 1,
                value: value(1),
            }),
        )
        .unwrap();
        assert!(!a.can_start());
        a.handle(
            T,
            0,
            msg(Body::Decide {
                seq: 0,
                value: value(1),
            }),
        )
        .unwrap();
        assert!(a.can_start());
    }

    #[test]
    fn refuses_foreign_and_inconsistent_messages() {
        let mut a = machine(3, 0);
        let m = |epoch, body| Message { epoch, body };
        assert_eq!(
            a.handle(T, 1, m(8, Body::Ack { seq: 0, ballot: 0 })),
            Err(Error::Epoch { got: 8, want: 9 })
        );
        assert_eq!(
            a.handle(T, 3, m(9, Body::Ack { seq: 0, ballot: 0 })),
            Err(Error::Rank { rank: 3, size: 3 })
        );
        assert_eq!(
            a.handle(T, 0, m(9, Body::Ack { seq: 0, ballot: 0 })),
            Err(Error::FromSelf)
        );
        assert_eq!(
            a.handle(T, 1, m(9, Body::Query { seq: 0, ballot: 2 })),
            Err(Error::BallotMismatch { from: 1, ballot: 2 })
        );
        // Far ahead of the window: dropped and counted, not an error.
        a.handle(
            T,
            1,
            m(
                9,
                Body::Query {
                    seq: 1000,
                    ballot: 1,
                },
            ),
        )
        .unwrap();
        assert_eq!(a.stats().out_of_window, 1);
    }
}
