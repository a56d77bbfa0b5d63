//! The membership state machine: one instance per process, no I/O, time passed in.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use tracing::{debug, trace, warn};

use crate::config::{Config, ConfigError};
use crate::id::{Member, NodeId, ViewId, MAX_INCARNATION, MAX_NODE_ID};
use crate::view::{View, ViewError};
use crate::wire::{Body, Change, ChangeKind, JoinKind, Message};

pub use steadfast_proto::Time;

/// A message to send to a process; [`Message::encode`] gives its bytes.
pub type Transmit = steadfast_proto::Transmit<Message>;

/// What the machine tells its driver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// This process installed a new view (always one that contains it).
    ViewInstalled {
        /// The view's number.
        view_id: ViewId,
        /// Its members, ascending ids.
        members: Vec<Member>,
    },
    /// At the root: every member of the view installed it or a newer one (the paper's end
    /// of tree stabilization, "the root received all acknowledgments").
    StabilizationComplete {
        /// The view that stabilized.
        view_id: ViewId,
        /// When this process (the root) installed the view: for the coordinator that is the
        /// handling of the failure report, so `now − installed_at` is the paper's Ts.
        installed_at: Time,
    },
    /// This process was removed from the group by `view_id` (it was suspected). With
    /// `auto_rejoin` it is already re-joining under a new incarnation.
    Excluded {
        /// The view that excluded this process.
        view_id: ViewId,
    },
}

/// Where this process stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Member of an installed view.
    Member,
    /// Looking for the root to be added (NEW_NODE / NODE_ALIVE).
    Joining,
    /// Not a member: never joined yet, or removed by a view.
    Outside,
}

/// Misuse of the machine's inputs (never caused by remote data).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The start-up view is empty or does not contain this process.
    #[error("process {me} is not in a start-up view of {size} processes")]
    NotInInitialView {
        /// This process.
        me: NodeId,
        /// Size of the start-up view.
        size: u32,
    },
    /// An id or incarnation above the supported maximum.
    #[error("member {0} out of range")]
    Range(Member),
    /// `join` while already a member or joining.
    #[error("join is only possible from outside the group (status {0:?})")]
    NotOutside(Status),
}

#[derive(Default, Debug)]
struct Stab {
    /// Change forwarded to the children of the current view.
    started: bool,
    /// All children acknowledged (or were superseded); parents have been acked.
    done: bool,
    /// Children still to acknowledge.
    pending: BTreeSet<NodeId>,
    deadline: Option<Time>,
    /// Who sent us the current view and waits for our FAILURE_ACK.
    ack_to: Vec<Member>,
    /// When the current view was installed.
    installed_at: Time,
}

#[derive(Debug)]
struct Report {
    to: NodeId,
    sent: Vec<Member>,
    acked: bool,
    /// Any message from `to` since: it is alive, so silence about the report is no failure.
    heard: bool,
    deadline: Time,
}

#[derive(Debug)]
struct Handoff {
    view: ViewId,
    to: NodeId,
    deadline: Time,
}

#[derive(Debug)]
struct JoinState {
    kind: JoinKind,
    target: NodeId,
    accepted: bool,
    misses: u32,
    redirects: u32,
    deadline: Time,
}

/// Redirects followed per join attempt before falling back to the linear scan.
const MAX_REDIRECTS: u32 = 8;

/// The membership service of one process (see the crate docs for the protocol).
#[derive(Debug)]
pub struct Membership {
    cfg: Config,
    me: NodeId,
    inc: u32,
    status: Status,
    /// Highest id known to exist: the end of the linear join scan and of probing.
    known_max: NodeId,
    /// Highest view epoch seen anywhere; new views number above it.
    max_epoch: u64,
    view: Option<View>,
    /// The delta that produced `view` (no member list); forwarded to children.
    change: Option<Change>,
    stab: Stab,
    /// This process's own suspicions, reported until a view without them is installed.
    suspects: BTreeMap<NodeId, u32>,
    /// Every member of the current view known dead (own suspicions and reports received).
    dead: BTreeMap<NodeId, u32>,
    report: Option<Report>,
    /// Joins accepted as coordinator, waiting for the next view change.
    pending_add: BTreeMap<NodeId, u32>,
    defer_until: Option<Time>,
    handoff: Option<Handoff>,
    /// A newer view we are a member of but have not received: (view, informer, fetch at).
    expect: Option<(ViewId, NodeId, Time)>,
    requested: Option<(ViewId, NodeId)>,
    /// Newest view heard of from a process that has it; a member that is behind it does
    /// not coordinate (its knowledge is stale) until it has fetched that view.
    newest: Option<(ViewId, NodeId)>,
    stale_until: Option<Time>,
    /// The view that excluded us and its root, told to whoever still counts on us.
    left: Option<(ViewId, NodeId)>,
    sync_at: Option<Time>,
    probe_at: Option<Time>,
    probe_cursor: NodeId,
    join: Option<JoinState>,
    out: VecDeque<Transmit>,
    events: VecDeque<Event>,
}

fn members_of(map: &BTreeMap<NodeId, u32>) -> Vec<Member> {
    map.iter().map(|(&id, &inc)| Member::new(id, inc)).collect()
}

fn in_sorted(list: &[Member], m: Member) -> bool {
    list.binary_search_by_key(&m.id, |x| x.id)
        .is_ok_and(|i| list[i] == m)
}

fn change_kind(old_root: NodeId, removed: &[Member], added: &[Member]) -> ChangeKind {
    let root_gone = removed.iter().any(|m| m.id == old_root);
    // A member replaced by its newer incarnation counts as a join, not a failure.
    let failed = removed
        .iter()
        .filter(|r| !added.iter().any(|a| a.id == r.id))
        .count();
    match (failed, added.is_empty()) {
        (0, _) => ChangeKind::NodeJoin,
        (_, false) => ChangeKind::FailedAndJoined,
        (1, true) if root_gone => ChangeKind::RootDead,
        (_, true) if root_gone => ChangeKind::RootAndNodeFailure,
        _ => ChangeKind::FailedNode,
    }
}

impl Membership {
    /// A process of the start-up view `0..initial_size`, installed without any message.
    pub fn new(cfg: Config, me: NodeId, initial_size: u32, now: Time) -> Result<Self, Error> {
        cfg.validate()?;
        if me >= initial_size {
            return Err(Error::NotInInitialView {
                me,
                size: initial_size,
            });
        }
        let view = View::initial(initial_size, cfg.fanout_log2)
            .map_err(|_| Error::Range(Member::new(initial_size.saturating_sub(1), 0)))?;
        let mut m = Self::blank(cfg, Member::new(me, 0), initial_size - 1);
        m.events.push_back(Event::ViewInstalled {
            view_id: view.id(),
            members: view.member_list(),
        });
        if view.root() == me {
            m.probe_at = m.cfg.probe_interval.map(|p| now + p);
        }
        m.view = Some(view);
        m.status = Status::Member;
        // The start-up view needs no stabilization: everybody computed it alone.
        m.stab = Stab {
            started: true,
            done: true,
            ..Stab::default()
        };
        Ok(m)
    }

    /// A process outside the group (a new node, or a recovered rank with a higher
    /// incarnation); `known_ids` bounds the linear scan for the root. Call [`Self::join`].
    pub fn new_outside(cfg: Config, me: Member, known_ids: u32) -> Result<Self, Error> {
        cfg.validate()?;
        if me.id > MAX_NODE_ID || me.incarnation > MAX_INCARNATION {
            return Err(Error::Range(me));
        }
        let known_max = known_ids.saturating_sub(1).min(MAX_NODE_ID).max(me.id);
        Ok(Self::blank(cfg, me, known_max))
    }

    fn blank(cfg: Config, me: Member, known_max: NodeId) -> Self {
        Membership {
            cfg,
            me: me.id,
            inc: me.incarnation,
            status: Status::Outside,
            known_max,
            max_epoch: 0,
            view: None,
            change: None,
            stab: Stab::default(),
            suspects: BTreeMap::new(),
            dead: BTreeMap::new(),
            report: None,
            pending_add: BTreeMap::new(),
            defer_until: None,
            handoff: None,
            expect: None,
            requested: None,
            newest: None,
            stale_until: None,
            left: None,
            sync_at: None,
            probe_at: None,
            probe_cursor: 0,
            join: None,
            out: VecDeque::new(),
            events: VecDeque::new(),
        }
    }

    // ----- accessors -------------------------------------------------------------------

    /// This process's id.
    pub fn id(&self) -> NodeId {
        self.me
    }

    /// This process's current incarnation.
    pub fn incarnation(&self) -> u32 {
        self.inc
    }

    /// This life of this process.
    pub fn member(&self) -> Member {
        Member::new(self.me, self.inc)
    }

    /// Member, joining or outside.
    pub fn status(&self) -> Status {
        self.status
    }

    /// The installed view, if a member.
    pub fn view(&self) -> Option<&View> {
        self.view.as_ref()
    }

    /// Number of the installed view, if a member.
    pub fn view_id(&self) -> Option<ViewId> {
        self.view.as_ref().map(View::id)
    }

    /// Same-view delivery filter for application messages stamped with the sender's view:
    /// deliver only if this process is a member of exactly that view.
    pub fn accepts(&self, stamped: ViewId) -> bool {
        self.view_id() == Some(stamped)
    }

    /// Whether this process is the root of its installed view.
    pub fn is_root(&self) -> bool {
        self.view.as_ref().is_some_and(|v| v.root() == self.me)
    }

    // ----- driver interface ------------------------------------------------------------

    /// Next message to send, if any.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.out.pop_front()
    }

    /// Next event for the driver, if any.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// When [`Self::handle_timeout`] must be called next.
    pub fn poll_timeout(&self) -> Option<Time> {
        [
            self.stab.deadline,
            self.report.as_ref().map(|r| r.deadline),
            self.handoff.as_ref().map(|h| h.deadline),
            self.join.as_ref().map(|j| j.deadline),
            self.expect.map(|e| e.2),
            self.stale_until,
            self.sync_at,
            self.probe_at,
            self.defer_until,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Input from the failure detector: process `id` (its life in the current view) is
    /// dead — the launcher saw it exit, a connection broke, the reliable layer gave up, or a
    /// heartbeat timed out.
    pub fn suspect(&mut self, now: Time, id: NodeId) {
        match self.status {
            Status::Member => {
                if let Some(inc) = self.view.as_ref().and_then(|v| v.incarnation(id)) {
                    self.suspect_many(now, &[Member::new(id, inc)]);
                }
            }
            Status::Joining => self.joiner_lost(now, id),
            Status::Outside => {}
        }
    }

    /// Like [`Self::suspect`] for one exact life; ignored if that life is not a member.
    pub fn suspect_member(&mut self, now: Time, m: Member) {
        match self.status {
            Status::Member => self.suspect_many(now, &[m]),
            Status::Joining => self.joiner_lost(now, m.id),
            Status::Outside => {}
        }
    }

    /// Starts joining: NEW_NODE for a process never seen before, NODE_ALIVE for a recovered
    /// rank keeping its id (with an incarnation above its previous life's).
    pub fn join(&mut self, now: Time, kind: JoinKind) -> Result<(), Error> {
        if self.status != Status::Outside {
            return Err(Error::NotOutside(self.status));
        }
        self.start_join(now, kind, None);
        Ok(())
    }

    /// After [`Event::Excluded`]: comes back under the next incarnation (NODE_ALIVE).
    pub fn rejoin(&mut self, now: Time) -> Result<(), Error> {
        if self.status != Status::Outside {
            return Err(Error::NotOutside(self.status));
        }
        if self.inc >= MAX_INCARNATION {
            return Err(Error::Range(self.member()));
        }
        self.inc += 1;
        self.start_join(now, JoinKind::Recovered, None);
        Ok(())
    }

    /// Decodes and handles one message; bad bytes are an error and change nothing.
    pub fn handle_bytes(
        &mut self,
        now: Time,
        from: NodeId,
        bytes: &[u8],
    ) -> Result<(), crate::DecodeError> {
        let msg = Message::decode(bytes)?;
        self.handle(now, from, msg);
        Ok(())
    }

    /// Handles one message from process `from`.
    pub fn handle(&mut self, now: Time, from: NodeId, msg: Message) {
        if from == self.me || from > MAX_NODE_ID {
            return;
        }
        let sender = Member::new(from, msg.sender_incarnation);
        trace!(me = self.me, %sender, msg = msg.body.name(), "recv");
        self.note(from, &msg.body);
        self.known_max = self.known_max.max(from);
        if let Some(v) = &self.view {
            match v.incarnation(from) {
                // A message of an earlier life of a restarted process: that life is over.
                Some(i) if i > sender.incarnation => return,
                Some(i) if i < sender.incarnation && !matches!(msg.body, Body::Join { .. }) => {
                    self.suspect_many(now, &[Member::new(from, i)]);
                }
                _ => {}
            }
        }
        if let Some(r) = &mut self.report {
            if r.to == from {
                r.heard = true;
            }
        }
        match msg.body {
            Body::NodeFailure { view, dead } | Body::RootFailure { view, dead } => {
                self.on_report(now, sender, view, dead)
            }
            Body::FailureDetAck { view: _ } => self.on_det_ack(now, sender),
            Body::ViewChange(ch) => self.on_change(now, sender, ch),
            Body::FailureAck { view } => self.on_ack(now, sender, view),
            Body::Join {
                kind: _,
                member,
                max_epoch: _,
            } => self.on_join(now, sender, member),
            Body::JoinDetAck { view: _, root } => self.on_join_ack(now, root),
            Body::Redirect { view, root } => self.on_redirect(now, sender, view, root),
            Body::Stale { view, root, member } => self.on_stale(now, sender, view, root, member),
            Body::Probe { view, root } => self.on_probe(now, sender, view, root),
            Body::ViewRequest { view } => self.on_view_request(sender, view),
            Body::Sync { view } => self.on_sync(sender, view),
        }
    }

    /// Fires every timer due at `now`.
    pub fn handle_timeout(&mut self, now: Time) {
        if self.stab.deadline.is_some_and(|d| d <= now) {
            self.stab.deadline = None;
            // Missing FAILURE_ACKs: the silent children are treated as new failures.
            let silent: Vec<Member> = match &self.view {
                Some(v) => self
                    .stab
                    .pending
                    .iter()
                    .filter_map(|&c| v.incarnation(c).map(|i| Member::new(c, i)))
                    .collect(),
                None => Vec::new(),
            };
            debug!(me = self.me, ?silent, "ack timeout");
            self.suspect_many(now, &silent);
        }
        if self.report.as_ref().is_some_and(|r| r.deadline <= now) {
            self.on_report_timeout(now);
        }
        if self.handoff.as_ref().is_some_and(|h| h.deadline <= now) {
            if let Some(h) = self.handoff.take() {
                self.suspect(now, h.to);
            }
        }
        if self.join.as_ref().is_some_and(|j| j.deadline <= now) {
            self.on_join_timeout(now);
        }
        if self.expect.is_some_and(|e| e.2 <= now) {
            if let Some((view, from, _)) = self.expect.take() {
                self.request_view(from, view);
            }
        }
        if self.probe_at.is_some_and(|p| p <= now) {
            self.send_probes(now);
        }
        if self.sync_at.is_some_and(|p| p <= now) {
            self.send_sync(now);
        }
        if self.stale_until.is_some_and(|d| d <= now) {
            // The newer view we heard of never came: proceed with what we have.
            self.stale_until = None;
            self.newest = None;
            self.requested = None;
            self.start_change(now);
        }
        if self.defer_until.is_some_and(|d| d <= now) {
            self.defer_until = None;
            self.start_change(now);
        }
    }

    // ----- helpers ---------------------------------------------------------------------

    fn send(&mut self, to: NodeId, body: Body) {
        if to == self.me {
            return;
        }
        trace!(me = self.me, to, msg = body.name(), "send");
        self.out.push_back(Transmit {
            to,
            message: Message {
                sender_incarnation: self.inc,
                body,
            },
        });
    }

    fn me_member(&self) -> Member {
        Member::new(self.me, self.inc)
    }

    /// Records epochs and ids seen, so new views number above everything known, and the
    /// newest view some process holds.
    fn note(&mut self, from: NodeId, body: &Body) {
        let held = match body {
            Body::NodeFailure { view, .. }
            | Body::RootFailure { view, .. }
            | Body::FailureDetAck { view }
            | Body::FailureAck { view }
            | Body::JoinDetAck { view, .. }
            | Body::Redirect { view, .. }
            | Body::Stale { view, .. }
            | Body::Probe { view, .. }
            | Body::Sync { view } => Some(*view),
            Body::ViewChange(c) => Some(c.view),
            // The requester heard of the view but may not hold it.
            Body::ViewRequest { view } => {
                self.max_epoch = self.max_epoch.max(view.epoch);
                None
            }
            Body::Join {
                max_epoch, member, ..
            } => {
                self.known_max = self.known_max.max(member.id);
                self.max_epoch = self.max_epoch.max(*max_epoch);
                None
            }
        };
        if let Some(v) = held {
            self.max_epoch = self.max_epoch.max(v.epoch);
            // Who answered a Redirect: the named root holds the view, not the sender.
            let holder = match body {
                Body::Redirect { root, .. } if *root != self.me => *root,
                _ => from,
            };
            if self.newest.is_none_or(|(n, _)| v > n) {
                self.newest = Some((v, holder));
            }
        }
    }

    /// Whether a newer view than ours is known to exist (then we must not coordinate).
    fn behind(&self) -> Option<(ViewId, NodeId)> {
        let cur = self.view_id()?;
        self.newest.filter(|(n, _)| *n > cur)
    }

    /// Lowest member of the current view not known dead; this process may coordinate its
    /// own removal, so it is never skipped.
    fn coordinator(&self) -> Option<NodeId> {
        let v = self.view.as_ref()?;
        v.members()
            .find(|m| m.id == self.me || self.dead.get(&m.id) != Some(&m.incarnation))
            .map(|m| m.id)
    }

    fn levels(&self, id: NodeId) -> u32 {
        self.view.as_ref().map_or(1, |v| v.subtree_levels_bound(id))
    }

    /// The current view's change, with the full member list attached.
    fn full_change(&self) -> Option<Change> {
        let v = self.view.as_ref()?;
        let mut ch = self.change.clone().unwrap_or_else(|| Change {
            kind: ChangeKind::FailedNode,
            view: v.id(),
            base: v.id(),
            len: v.len(),
            digest: v.digest(),
            removed: Vec::new(),
            added: Vec::new(),
            members: None,
        });
        ch.members = Some(v.member_list());
        Some(ch)
    }

    /// The current change as `to` needs it: a delta, or the full list if `to` is new.
    fn change_for(&self, to: Member) -> Option<Change> {
        match &self.change {
            Some(ch) if !in_sorted(&ch.added, to) => Some(ch.clone()),
            _ => self.full_change(),
        }
    }

    fn request_view(&mut self, from: NodeId, view: ViewId) {
        if self.requested == Some((view, from)) {
            return;
        }
        self.requested = Some((view, from));
        self.send(from, Body::ViewRequest { view });
    }

    // ----- failure detection and reports ------------------------------------------------

    fn suspect_many(&mut self, now: Time, ms: &[Member]) {
        if self.status != Status::Member {
            return;
        }
        let Some(v) = &self.view else { return };
        let mut fresh = false;
        for &m in ms {
            if m.id != self.me
                && v.contains_member(m)
                && self.suspects.get(&m.id) != Some(&m.incarnation)
            {
                self.suspects.insert(m.id, m.incarnation);
                self.dead.insert(m.id, m.incarnation);
                fresh = true;
            }
        }
        if fresh {
            debug!(me = self.me, suspects = ?self.suspects, "suspect");
            if self
                .handoff
                .as_ref()
                .is_some_and(|h| ms.iter().any(|m| m.id == h.to))
            {
                self.handoff = None;
            }
            self.send_report(now);
        }
    }

    /// NODE_FAILURE to the root, or ROOT_FAILURE to the next live id if the root is dead;
    /// acts directly when this process is itself the coordinator.
    fn send_report(&mut self, now: Time) {
        if self.status != Status::Member || self.suspects.is_empty() {
            self.report = None;
            return;
        }
        let Some(c) = self.coordinator() else {
            self.report = None;
            return;
        };
        if c == self.me {
            self.report = None;
            self.start_change(now);
            return;
        }
        let Some(v) = &self.view else { return };
        let dead = members_of(&self.dead);
        if let Some(r) = &self.report {
            if r.to == c && r.sent == dead && (r.acked || r.deadline > now) {
                return;
            }
        }
        let (view, root_dead) = (v.id(), self.dead.contains_key(&v.root()));
        let body = if root_dead {
            Body::RootFailure {
                view,
                dead: dead.clone(),
            }
        } else {
            Body::NodeFailure {
                view,
                dead: dead.clone(),
            }
        };
        self.send(c, body);
        self.report = Some(Report {
            to: c,
            sent: dead,
            acked: false,
            heard: false,
            deadline: now + self.cfg.report_timeout,
        });
    }

    fn on_report_timeout(&mut self, now: Time) {
        let Some(r) = self.report.take() else { return };
        if !r.acked && !r.heard {
            // No FAILURE_DET_ACK: the coordinator we reported to is dead as well.
            let inc = self.view.as_ref().and_then(|v| v.incarnation(r.to));
            match inc {
                Some(i) => self.suspect_many(now, &[Member::new(r.to, i)]),
                None => self.send_report(now),
            }
        } else {
            // Acknowledged but no view honoured it yet: report again.
            self.send_report(now);
        }
    }

    fn on_det_ack(&mut self, now: Time, from: Member) {
        let honour = self.cfg.report_timeout + self.cfg.ack_timeout * (self.levels(from.id) + 2);
        if let Some(r) = &mut self.report {
            if r.to == from.id && !r.acked {
                r.acked = true;
                r.deadline = now + honour;
            }
        }
    }

    fn on_report(&mut self, now: Time, from: Member, rview: ViewId, list: Vec<Member>) {
        if self.status != Status::Member {
            return;
        }
        let Some(v) = &self.view else { return };
        let (cur, root) = (v.id(), v.root());
        if !v.contains_member(from) {
            if rview > cur {
                self.request_view(from.id, rview);
            } else {
                self.send(
                    from.id,
                    Body::Stale {
                        view: cur,
                        root,
                        member: false,
                    },
                );
            }
            return;
        }
        for m in list {
            if v.contains_member(m) {
                self.dead.insert(m.id, m.incarnation);
            }
        }
        if rview > cur {
            // The reporter is ahead: take note, fetch its view, act once installed.
            self.send(from.id, Body::FailureDetAck { view: cur });
            self.request_view(from.id, rview);
            return;
        }
        match self.coordinator() {
            Some(c) if c == self.me => {
                self.send(from.id, Body::FailureDetAck { view: cur });
                if rview < cur {
                    self.send(
                        from.id,
                        Body::Stale {
                            view: cur,
                            root,
                            member: true,
                        },
                    );
                }
                self.start_change(now);
            }
            Some(c) => self.send(from.id, Body::Redirect { view: cur, root: c }),
            None => {}
        }
    }

    fn on_redirect(&mut self, now: Time, from: Member, view: ViewId, root: NodeId) {
        match self.status {
            Status::Member => {
                let Some(v) = &self.view else { return };
                let newer = view > v.id();
                let usable = root != self.me && v.contains(root) && !self.dead.contains_key(&root);
                if newer && root != self.me {
                    // Ask the coordinator of the newer view for it: we either belong to it
                    // or learn that we were left out (and re-join there).
                    self.request_view(root, view);
                }
                let Some(v) = &self.view else { return };
                if let Some(r) = &self.report {
                    if r.to == from.id && usable {
                        let (vid, root_dead) = (v.id(), self.dead.contains_key(&v.root()));
                        let dead = r.sent.clone();
                        let body = if root_dead {
                            Body::RootFailure {
                                view: vid,
                                dead: dead.clone(),
                            }
                        } else {
                            Body::NodeFailure {
                                view: vid,
                                dead: dead.clone(),
                            }
                        };
                        self.send(root, body);
                        self.report = Some(Report {
                            to: root,
                            sent: dead,
                            acked: false,
                            heard: false,
                            deadline: now + self.cfg.report_timeout,
                        });
                    }
                }
            }
            Status::Joining => self.redirect_join(now, root),
            Status::Outside => {}
        }
    }

    // ----- coordinator: computing a new view --------------------------------------------

    /// As coordinator (lowest live member), computes the next view from the known dead and
    /// the accepted joins and sends it down the tree (FAILED_NODE, ROOT_DEAD, ...).
    fn start_change(&mut self, now: Time) {
        if self.status != Status::Member || self.coordinator() != Some(self.me) {
            return;
        }
        if let Some((view, holder)) = self.behind() {
            // Deciding from a stale view could override a newer one: catch up first, and
            // give up on that view if its holder does not answer in time.
            self.request_view(holder, view);
            if self.stale_until.is_none() {
                self.stale_until = Some(now + self.cfg.report_timeout);
            }
            return;
        }
        let Some(v) = &self.view else { return };
        let mut removed: Vec<Member> = members_of(&self.dead)
            .into_iter()
            .filter(|m| v.contains_member(*m))
            .collect();
        let mut added = Vec::new();
        for (&id, &inc) in &self.pending_add {
            match v.incarnation(id) {
                Some(i) if i >= inc => {}
                Some(i) => {
                    if !removed.iter().any(|r| r.id == id) {
                        removed.push(Member::new(id, i));
                    }
                    added.push(Member::new(id, inc));
                }
                None => added.push(Member::new(id, inc)),
            }
        }
        removed.sort_unstable();
        if removed.is_empty() && added.is_empty() {
            self.pending_add.clear();
            return;
        }
        let epoch = self.max_epoch.saturating_add(1);
        self.max_epoch = epoch;
        let id = ViewId {
            epoch,
            coordinator: self.me,
            coordinator_incarnation: self.inc,
        };
        let kind = change_kind(v.root(), &removed, &added);
        let next = match v.apply(id, &removed, &added) {
            Ok(w) => Some(w),
            Err(ViewError::Empty) => None,
            Err(e) => {
                warn!(me = self.me, error = %e, "cannot compute view change");
                return;
            }
        };
        let change = Change {
            kind,
            view: id,
            base: v.id(),
            len: next.as_ref().map_or(0, View::len),
            digest: next.as_ref().map_or(0, View::digest),
            removed,
            added,
            members: None,
        };
        debug!(me = self.me, view = %id, kind = change.paper_name(), removed = ?change.removed, added = ?change.added, "view change");
        self.dead.clear();
        self.pending_add.clear();
        self.defer_until = None;
        let Some(w) = next else {
            // Every member, this one included, is dead: nothing is left to lead.
            self.become_excluded(now, id, self.me);
            return;
        };
        let root = w.root();
        if !w.contains_member(self.me_member()) {
            // This process was reported dead: it hands the view to the new root and leaves.
            let mut ch = change;
            if in_sorted(
                &ch.added,
                Member::new(root, w.incarnation(root).unwrap_or(0)),
            ) {
                ch.members = Some(w.member_list());
            }
            self.send(root, Body::ViewChange(ch));
            self.become_excluded(now, id, root);
            return;
        }
        let levels = w.subtree_levels_bound(root);
        self.install(now, w, Some(change), None);
        if root == self.me {
            self.start_stab(now);
        } else {
            // A joiner with a lower id becomes root: it disseminates, we wait for its ack.
            let to = Member::new(
                root,
                self.view
                    .as_ref()
                    .and_then(|v| v.incarnation(root))
                    .unwrap_or(0),
            );
            if let Some(ch) = self.change_for(to) {
                self.send(root, Body::ViewChange(ch));
            }
            self.handoff = Some(Handoff {
                view: id,
                to: root,
                deadline: now + self.cfg.ack_timeout * (levels + 1),
            });
        }
    }

    // ----- installing and disseminating views -------------------------------------------

    fn install(&mut self, now: Time, w: View, change: Option<Change>, from: Option<Member>) {
        let me = self.me_member();
        debug_assert!(w.contains_member(me), "self inclusion");
        // Parents still waiting on the abandoned view learn that it was superseded.
        if !self.stab.done {
            for p in std::mem::take(&mut self.stab.ack_to) {
                let member = w.contains_member(p);
                self.send(
                    p.id,
                    Body::Stale {
                        view: w.id(),
                        root: w.root(),
                        member,
                    },
                );
            }
        }
        self.known_max = self.known_max.max(w.max_id());
        self.max_epoch = self.max_epoch.max(w.id().epoch);
        let keep = |id: &NodeId, inc: &mut u32| w.contains_member(Member::new(*id, *inc));
        self.suspects.retain(keep);
        self.dead.retain(keep);
        self.pending_add
            .retain(|id, inc| w.incarnation(*id).is_none_or(|i| i < *inc));
        if self.expect.is_some_and(|e| e.0 <= w.id()) {
            self.expect = None;
        }
        if self.newest.is_none_or(|(n, _)| n <= w.id()) {
            self.newest = Some((w.id(), self.me));
            self.stale_until = None;
        }
        self.handoff = None;
        self.events.push_back(Event::ViewInstalled {
            view_id: w.id(),
            members: w.member_list(),
        });
        debug!(me = self.me, view = %w.id(), len = w.len(), root = w.root(), "installed");
        self.status = Status::Member;
        self.join = None;
        self.probe_at = if w.root() == self.me {
            self.probe_at.or(self.cfg.probe_interval.map(|p| now + p))
        } else {
            None
        };
        self.sync_at = if w.root() != self.me {
            self.sync_at.or(self.cfg.sync_interval.map(|p| now + p))
        } else {
            None
        };
        self.left = None;
        self.view = Some(w);
        self.change = change.map(|mut c| {
            c.members = None;
            c
        });
        self.stab = Stab {
            installed_at: now,
            ..Stab::default()
        };
        if let Some(f) = from {
            self.stab.ack_to.push(f);
            self.start_stab(now);
        }
        if self.coordinator() != Some(self.me) {
            self.pending_add.clear();
            self.defer_until = None;
        }
        self.report = None;
        if !self.suspects.is_empty() {
            self.send_report(now);
        } else if !self.dead.is_empty() || !self.pending_add.is_empty() {
            self.start_change(now);
        }
    }

    /// Forwards the current view to this node's children and waits for their acks.
    fn start_stab(&mut self, now: Time) {
        if self.stab.started || self.status != Status::Member {
            return;
        }
        let Some(v) = &self.view else { return };
        let kids: Vec<Member> = v
            .children(self.me)
            .into_iter()
            .map(|c| Member::new(c, v.incarnation(c).unwrap_or(0)))
            .collect();
        let deadline = now + self.cfg.ack_timeout * v.subtree_levels_bound(self.me);
        self.stab.started = true;
        if kids.is_empty() {
            self.finish_stab(now);
            return;
        }
        for &c in &kids {
            if let Some(ch) = self.change_for(c) {
                self.send(c.id, Body::ViewChange(ch));
            }
        }
        self.stab.pending = kids.iter().map(|m| m.id).collect();
        self.stab.deadline = Some(deadline);
    }

    /// The subtree is stable: FAILURE_ACK to the parents; at the root, stabilization ends.
    fn finish_stab(&mut self, now: Time) {
        let Some(v) = &self.view else { return };
        let (vid, is_root) = (v.id(), v.root() == self.me);
        self.stab.done = true;
        self.stab.deadline = None;
        for p in std::mem::take(&mut self.stab.ack_to) {
            self.send(p.id, Body::FailureAck { view: vid });
        }
        if is_root {
            debug!(me = self.me, view = %vid, "stabilization complete");
            let installed_at = self.stab.installed_at;
            self.events.push_back(Event::StabilizationComplete {
                view_id: vid,
                installed_at,
            });
            if !self.pending_add.is_empty() || !self.dead.is_empty() {
                self.start_change(now);
            }
        }
    }

    fn on_change(&mut self, now: Time, from: Member, ch: Change) {
        match self.status {
            Status::Outside => {
                self.tell_left(from.id);
                return;
            }
            Status::Joining => {
                let me = self.me_member();
                match &ch.members {
                    Some(ms) if in_sorted(ms, me) => match self.build(&ch) {
                        Ok(w) => self.install(now, w, Some(ch), Some(from)),
                        Err(e) => warn!(me = self.me, error = e, "bad view change"),
                    },
                    // A delta may overtake the full view meant for us: ask for the list.
                    None => self.request_view(from.id, ch.view),
                    // Someone still counts on our previous life: say where the group went.
                    _ => self.tell_left(from.id),
                }
                return;
            }
            Status::Member => {}
        }
        let Some(v) = &self.view else { return };
        let cur = v.id();
        if ch.view < cur {
            let (root, member) = (v.root(), v.contains_member(from));
            self.send(
                from.id,
                Body::Stale {
                    view: cur,
                    root,
                    member,
                },
            );
            return;
        }
        if ch.view == cur {
            if !self.stab.ack_to.contains(&from) {
                self.stab.ack_to.push(from);
            }
            if !self.stab.started {
                self.start_stab(now);
            } else if self.stab.done {
                for p in std::mem::take(&mut self.stab.ack_to) {
                    self.send(p.id, Body::FailureAck { view: cur });
                }
            }
            return;
        }
        let w = match self.build(&ch) {
            Ok(w) => w,
            Err(e) => {
                trace!(
                    me = self.me,
                    reason = e,
                    "cannot apply change, requesting full view"
                );
                self.request_view(from.id, ch.view);
                return;
            }
        };
        if !w.contains_member(self.me_member()) {
            self.become_excluded(now, w.id(), w.root());
            return;
        }
        self.install(now, w, Some(ch), Some(from));
    }

    fn build(&self, ch: &Change) -> Result<View, &'static str> {
        let k = self.cfg.fanout_log2;
        let w = match (&ch.members, &self.view) {
            (Some(ms), _) => View::from_members(ch.view, k, ms).map_err(|_| "bad member list")?,
            (None, Some(v)) if v.id() == ch.base => v
                .apply(ch.view, &ch.removed, &ch.added)
                .map_err(|_| "delta does not fit base")?,
            _ => return Err("base view missing"),
        };
        if w.len() != ch.len || w.digest() != ch.digest {
            return Err("digest mismatch");
        }
        Ok(w)
    }

    fn on_ack(&mut self, now: Time, from: Member, view: ViewId) {
        if self
            .handoff
            .as_ref()
            .is_some_and(|h| h.view == view && h.to == from.id)
        {
            self.handoff = None;
        }
        if self.status == Status::Member
            && self.view_id() == Some(view)
            && self.stab.started
            && !self.stab.done
            && self.stab.pending.remove(&from.id)
            && self.stab.pending.is_empty()
        {
            self.finish_stab(now);
        }
    }

    fn on_view_request(&mut self, from: Member, view: ViewId) {
        if self.status == Status::Member && self.view_id().is_some_and(|c| c >= view) {
            if let Some(ch) = self.full_change() {
                self.send(from.id, Body::ViewChange(ch));
            }
        }
    }

    /// The sender knows a view newer than ours.
    fn on_stale(&mut self, now: Time, from: Member, view: ViewId, root: NodeId, member: bool) {
        match self.status {
            Status::Member => {
                if self.view_id().is_none_or(|c| view <= c) {
                    return;
                }
                if !member {
                    self.become_excluded(now, view, root);
                    return;
                }
                // The sender moved on to a view we belong to: it is alive, so stop waiting
                // for it; the view reaches us down its tree, else we fetch it.
                if self.handoff.as_ref().is_some_and(|h| h.to == from.id) {
                    self.handoff = None;
                }
                if self.stab.started
                    && !self.stab.done
                    && self.stab.pending.remove(&from.id)
                    && self.stab.pending.is_empty()
                {
                    self.finish_stab(now);
                }
                if self.expect.is_none_or(|e| e.0 < view) {
                    self.expect = Some((view, from.id, now + self.cfg.ack_timeout));
                }
            }
            Status::Joining => {
                if member {
                    self.request_view(from.id, view);
                } else {
                    self.redirect_join(now, root);
                }
            }
            Status::Outside => {}
        }
    }

    /// Removes this process from the group after a view excluded it.
    fn become_excluded(&mut self, now: Time, by: ViewId, root: NodeId) {
        debug!(me = self.me, view = %by, "excluded");
        self.events.push_back(Event::Excluded { view_id: by });
        // A leaving root would strand its group: point every member at the newer view.
        let group: Vec<NodeId> = match &self.view {
            Some(v) if v.root() == self.me => v
                .members()
                .map(|m| m.id)
                .filter(|&id| id != self.me)
                .collect(),
            _ => Vec::new(),
        };
        let rejoin = self.cfg.auto_rejoin && self.inc < MAX_INCARNATION;
        if rejoin {
            // The new life's messages also tell the group that the old one has ended.
            self.inc += 1;
        }
        if root != self.me {
            for id in group {
                self.send(id, Body::Redirect { view: by, root });
            }
        }
        self.status = Status::Outside;
        self.view = None;
        self.change = None;
        self.stab = Stab::default();
        self.suspects.clear();
        self.dead.clear();
        self.report = None;
        self.pending_add.clear();
        self.defer_until = None;
        self.handoff = None;
        self.expect = None;
        self.requested = None;
        self.stale_until = None;
        self.probe_at = None;
        self.sync_at = None;
        self.left = Some((by, root));
        if rejoin {
            self.start_join(now, JoinKind::Recovered, Some(root));
        }
    }

    // ----- joins ---------------------------------------------------------------------------

    fn on_join(&mut self, now: Time, from: Member, member: Member) {
        if member != from || self.status != Status::Member {
            return;
        }
        let Some(v) = &self.view else { return };
        let cur = v.id();
        match self.coordinator() {
            Some(c) if c == self.me => {}
            Some(c) => {
                self.send(from.id, Body::Redirect { view: cur, root: c });
                return;
            }
            None => return,
        }
        match v.incarnation(member.id) {
            Some(i) if i == member.incarnation => {
                // Already a member (a retry): answer with the view itself.
                self.send(
                    from.id,
                    Body::JoinDetAck {
                        view: cur,
                        root: self.me,
                    },
                );
                if let Some(ch) = self.full_change() {
                    self.send(from.id, Body::ViewChange(ch));
                }
                return;
            }
            Some(i) if i > member.incarnation => return,
            Some(i) => {
                self.dead.insert(member.id, i);
            }
            None => {}
        }
        self.known_max = self.known_max.max(member.id);
        self.pending_add.insert(member.id, member.incarnation);
        let stabilizing = v.root() == self.me && self.stab.started && !self.stab.done;
        self.send(
            from.id,
            Body::JoinDetAck {
                view: cur,
                root: self.me,
            },
        );
        if stabilizing && self.dead.is_empty() {
            // Joins wait for the running stabilization (bounded), failures never wait.
            let bound = now + self.cfg.ack_timeout * self.levels(self.me);
            self.defer_until = Some(self.defer_until.map_or(bound, |d| d.min(bound)));
        } else {
            self.start_change(now);
        }
    }

    fn start_join(&mut self, now: Time, kind: JoinKind, hint: Option<NodeId>) {
        self.status = Status::Joining;
        self.view = None;
        let target = hint
            .filter(|&h| h != self.me && h <= MAX_NODE_ID)
            .or_else(|| self.next_candidate(None));
        match target {
            None => self.form_singleton(now),
            Some(t) => {
                self.join = Some(JoinState {
                    kind,
                    target: t,
                    accepted: false,
                    misses: 0,
                    redirects: 0,
                    deadline: now,
                });
                self.send_join(now);
            }
        }
    }

    /// Linear scan: the next id after `after` (wrapping), skipping this process.
    fn next_candidate(&self, after: Option<NodeId>) -> Option<NodeId> {
        let n = self.known_max as u64 + 1;
        let start = after.map_or(0, |a| a as u64 + 1);
        (0..n)
            .map(|i| ((start + i) % n) as NodeId)
            .find(|&c| c != self.me)
    }

    fn send_join(&mut self, now: Time) {
        let (me, max_epoch) = (self.me_member(), self.max_epoch);
        let Some(j) = &mut self.join else { return };
        j.deadline = now + self.cfg.join_timeout;
        let (to, kind) = (j.target, j.kind);
        self.send(
            to,
            Body::Join {
                kind,
                member: me,
                max_epoch,
            },
        );
    }

    fn on_join_ack(&mut self, now: Time, root: NodeId) {
        if self.status != Status::Joining {
            return;
        }
        let wait = self.cfg.join_timeout * 4;
        if let Some(j) = &mut self.join {
            j.accepted = true;
            j.misses = 0;
            j.target = root;
            j.deadline = now + wait;
        }
    }

    fn redirect_join(&mut self, now: Time, root: NodeId) {
        if self.status != Status::Joining || root == self.me {
            return;
        }
        let Some(j) = &mut self.join else { return };
        if j.accepted || j.redirects >= MAX_REDIRECTS || j.target == root {
            return;
        }
        j.redirects += 1;
        j.target = root;
        self.send_join(now);
    }

    /// The join candidate is known dead: move on at once.
    fn joiner_lost(&mut self, now: Time, id: NodeId) {
        if self.join.as_ref().is_some_and(|j| j.target == id) {
            self.on_join_timeout(now);
        }
    }

    fn on_join_timeout(&mut self, now: Time) {
        let scan_len = self.known_max;
        let Some(j) = &mut self.join else { return };
        let after = if j.accepted {
            // Accepted but no view came: the root died meanwhile; scan again.
            j.accepted = false;
            j.misses = 0;
            None
        } else {
            j.misses += 1;
            Some(j.target)
        };
        if j.misses > scan_len {
            // Nobody answered in a whole scan: start a group of one (probes merge it later).
            self.form_singleton(now);
            return;
        }
        j.redirects = 0;
        match self.next_candidate(after) {
            Some(t) => {
                if let Some(j) = &mut self.join {
                    j.target = t;
                }
                self.send_join(now);
            }
            None => self.form_singleton(now),
        }
    }

    fn form_singleton(&mut self, now: Time) {
        let epoch = self.max_epoch.saturating_add(1);
        self.max_epoch = epoch;
        let id = ViewId {
            epoch,
            coordinator: self.me,
            coordinator_incarnation: self.inc,
        };
        match View::from_members(id, self.cfg.fanout_log2, &[self.me_member()]) {
            Ok(w) => {
                debug!(me = self.me, view = %id, "forming a group of one");
                self.install(now, w, None, None);
                self.start_stab(now);
            }
            Err(e) => warn!(me = self.me, error = %e, "cannot form a group"),
        }
    }

    /// Tells a process that still counts on our excluded life which view replaced it.
    fn tell_left(&mut self, to: NodeId) {
        if let Some((view, root)) = self.left {
            if root != to {
                self.send(to, Body::Redirect { view, root });
            }
        }
    }

    fn send_sync(&mut self, now: Time) {
        self.sync_at = None;
        let (Some(p), Some(v)) = (self.cfg.sync_interval, &self.view) else {
            return;
        };
        if self.status != Status::Member {
            return;
        }
        if let Some(parent) = v.parent(self.me) {
            let view = v.id();
            self.send(parent, Body::Sync { view });
            self.sync_at = Some(now + p);
        }
    }

    /// A child (by its view) says which view it holds: answer only if ours differs.
    fn on_sync(&mut self, from: Member, view: ViewId) {
        match self.status {
            Status::Member => {
                let Some(v) = &self.view else { return };
                let (cur, root, member) = (v.id(), v.root(), v.contains_member(from));
                if view < cur || !member {
                    self.send(
                        from.id,
                        Body::Stale {
                            view: cur,
                            root,
                            member,
                        },
                    );
                } else if view > cur {
                    self.request_view(from.id, view);
                }
            }
            Status::Joining | Status::Outside => self.tell_left(from.id),
        }
    }

    // ----- partitions: probes ----------------------------------------------------------------

    fn send_probes(&mut self, now: Time) {
        let (Some(p), Some(v)) = (self.cfg.probe_interval, &self.view) else {
            self.probe_at = None;
            return;
        };
        if self.status != Status::Member || v.root() != self.me {
            self.probe_at = None;
            return;
        }
        let vid = v.id();
        let mut targets = Vec::new();
        let mut tried = 0u64;
        while (targets.len() as u32) < self.cfg.probe_batch && tried <= self.known_max as u64 {
            let id = self.probe_cursor;
            self.probe_cursor = if id >= self.known_max { 0 } else { id + 1 };
            tried += 1;
            if id != self.me && !v.contains(id) {
                targets.push(id);
            }
        }
        for t in targets {
            self.send(
                t,
                Body::Probe {
                    view: vid,
                    root: self.me,
                },
            );
        }
        self.probe_at = Some(now + p);
    }

    /// A root of a view that does not contain us says hello.
    fn on_probe(&mut self, now: Time, from: Member, view: ViewId, root: NodeId) {
        match self.status {
            Status::Member => {
                let Some(v) = &self.view else { return };
                let cur = v.id();
                if view > cur {
                    // A newer view exists and we are not in it: leave, re-join that group.
                    self.become_excluded(now, view, root);
                } else if view < cur {
                    let (r, member) = (v.root(), v.contains_member(from));
                    self.send(
                        from.id,
                        Body::Stale {
                            view: cur,
                            root: r,
                            member,
                        },
                    );
                }
            }
            Status::Joining => self.redirect_join(now, root),
            Status::Outside => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn cfg() -> Config {
        Config {
            fanout_log2: 1,
            ..Config::default()
        }
    }

    fn ms(t: u64) -> Time {
        Duration::from_millis(t)
    }

    fn drain(m: &mut Membership) -> Vec<Transmit> {
        std::iter::from_fn(|| m.poll_transmit()).collect()
    }

    #[test]
    fn startup_needs_no_messages() {
        let mut m = Membership::new(cfg(), 3, 8, ms(0)).unwrap();
        assert!(drain(&mut m).is_empty());
        assert!(matches!(
            m.poll_event(),
            Some(Event::ViewInstalled {
                view_id: ViewId::INITIAL,
                ..
            })
        ));
        assert_eq!(m.poll_timeout(), None);
        assert!(Membership::new(cfg(), 8, 8, ms(0)).is_err());
    }

    #[test]
    fn detector_reports_to_root_and_root_to_next_live_id() {
        let mut m = Membership::new(cfg(), 5, 8, ms(0)).unwrap();
        m.suspect(ms(1), 4);
        let t = drain(&mut m);
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].to, 0);
        assert!(
            matches!(&t[0].message.body, Body::NodeFailure { dead, .. } if dead == &[Member::new(4, 0)])
        );
        // No FAILURE_DET_ACK: the root is treated as failed, ROOT_FAILURE goes to id 1.
        let deadline = m.poll_timeout().unwrap();
        m.handle_timeout(deadline);
        let t = drain(&mut m);
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].to, 1);
        assert!(matches!(&t[0].message.body, Body::RootFailure { dead, .. } if dead.len() == 2));
    }

    #[test]
    fn joiner_scans_linearly_and_follows_redirects() {
        let mut j = Membership::new_outside(cfg(), Member::new(9, 0), 9).unwrap();
        j.join(ms(0), JoinKind::New).unwrap();
        let t = drain(&mut j);
        assert_eq!((t[0].to, t[0].message.body.name()), (0, "NEW_NODE"));
        // Id 0 is silent: try 1, the next in the list.
        j.handle_timeout(j.poll_timeout().unwrap());
        assert_eq!(drain(&mut j)[0].to, 1);
        // 1 is a member but not the root: it names the root, 3.
        let redirect = Body::Redirect {
            view: ViewId::INITIAL,
            root: 3,
        };
        j.handle(
            ms(30),
            1,
            Message {
                sender_incarnation: 0,
                body: redirect,
            },
        );
        assert_eq!(drain(&mut j)[0].to, 3);
        j.handle(
            ms(31),
            3,
            Message {
                sender_incarnation: 0,
                body: Body::JoinDetAck {
                    view: ViewId::INITIAL,
                    root: 3,
                },
            },
        );
        assert_eq!(j.status(), Status::Joining);
    }

    #[test]
    fn root_adds_a_recovered_rank_with_its_old_id() {
        let mut root = Membership::new(cfg(), 0, 4, ms(0)).unwrap();
        let _ = root.poll_event();
        // Rank 2 crashed and came back (incarnation 1) before anyone noticed.
        let alive = Body::Join {
            kind: JoinKind::Recovered,
            member: Member::new(2, 1),
            max_epoch: 0,
        };
        root.handle(
            ms(1),
            2,
            Message {
                sender_incarnation: 1,
                body: alive,
            },
        );
        let t = drain(&mut root);
        assert!(matches!(t[0].message.body, Body::JoinDetAck { .. }));
        let Some(Event::ViewInstalled { members, .. }) = root.poll_event() else {
            panic!("no view")
        };
        assert_eq!(
            members,
            vec![
                Member::new(0, 0),
                Member::new(1, 0),
                Member::new(2, 1),
                Member::new(3, 0)
            ]
        );
        // The recovered life gets the full list, the others a two-entry delta.
        let to2 = t
            .iter()
            .find(|t| t.to == 2 && t.message.body.name() == "NODE_JOIN")
            .unwrap();
        assert!(matches!(&to2.message.body, Body::ViewChange(c) if c.members.is_some()));
        let to1 = t.iter().find(|t| t.to == 1).unwrap();
        assert!(
            matches!(&to1.message.body, Body::ViewChange(c) if c.members.is_none() && c.removed == [Member::new(2, 0)])
        );
    }

    #[test]
    fn stale_view_change_is_answered_not_applied() {
        let mut m = Membership::new(cfg(), 1, 4, ms(0)).unwrap();
        let _ = m.poll_event();
        let v1 = ViewId {
            epoch: 1,
            coordinator: 0,
            coordinator_incarnation: 0,
        };
        let v = View::initial(4, 1)
            .unwrap()
            .apply(v1, &[Member::new(3, 0)], &[])
            .unwrap();
        let ch = Change {
            kind: ChangeKind::FailedNode,
            view: v1,
            base: ViewId::INITIAL,
            len: v.len(),
            digest: v.digest(),
            removed: vec![Member::new(3, 0)],
            added: vec![],
            members: None,
        };
        m.handle(
            ms(1),
            0,
            Message {
                sender_incarnation: 0,
                body: Body::ViewChange(ch.clone()),
            },
        );
        assert_eq!(m.view_id(), Some(v1));
        let mut old = ch;
        old.view = ViewId::INITIAL;
        drain(&mut m);
        m.handle(
            ms(2),
            0,
            Message {
                sender_incarnation: 0,
                body: Body::ViewChange(old),
            },
        );
        assert_eq!(m.view_id(), Some(v1));
        let t = drain(&mut m);
        assert!(matches!(t[0].message.body, Body::Stale { view, member: true, .. } if view == v1));
    }

    #[test]
    fn root_acks_and_sends_failed_node_down() {
        let mut root = Membership::new(cfg(), 0, 7, ms(0)).unwrap();
        let msg = Message {
            sender_incarnation: 0,
            body: Body::NodeFailure {
                view: ViewId::INITIAL,
                dead: vec![Member::new(1, 0)],
            },
        };
        root.handle(ms(1), 5, msg);
        let t = drain(&mut root);
        assert!(matches!(t[0].message.body, Body::FailureDetAck { .. }));
        // Node 1's children 3 and 4 now hang under the root beside 2.
        let to: Vec<NodeId> = t[1..].iter().map(|t| t.to).collect();
        assert_eq!(to, vec![2, 3, 4]);
        assert!(t[1..].iter().all(
            |t| matches!(&t.message.body, Body::ViewChange(c) if c.kind == ChangeKind::FailedNode)
        ));
    }
}
