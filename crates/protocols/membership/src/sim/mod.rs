//! Deterministic simulation of many membership machines on one virtual clock.
//!
//! One event queue ordered by (time, sequence number) drives all processes; the network is
//! a [`net::NetworkModel`]; crashes, restarts, joins, suspicions and partitions are inputs
//! scheduled in advance from a seed. Every message goes through the wire encoding. After
//! every step the [`check::Checker`] invariants run; a run is a pure function of its seed.

pub mod check;
pub mod net;
pub mod scenario;
#[cfg(test)]
mod tests;

/// The seeded generator every run draws from (shared by the protocol crates' simulations).
pub use steadfast_proto::rng;

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::time::Duration;

use check::{Checker, Life};
use net::{NetworkModel, Route};
use rng::Rng;

use crate::{
    Body, Config, Event, JoinKind, Member, Membership, Message, NodeId, Status, Time, ViewId,
};

/// Something that happens to the simulated system at a given time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    /// The process stops; messages to it are lost from now on.
    Crash(NodeId),
    /// A crashed process restarts with the next incarnation and sends NODE_ALIVE.
    Restart(NodeId),
    /// A process never seen before starts and sends NEW_NODE.
    JoinNew(NodeId),
    /// The failure detector of `at` reports `target` (a precise life).
    Suspect {
        /// Process that detects.
        at: NodeId,
        /// Life it detects as failed.
        target: Member,
    },
    /// The failure detector of `at` reports whatever life of `target` it knows.
    SuspectId {
        /// Process that detects.
        at: NodeId,
        /// Process it detects as failed.
        target: NodeId,
    },
    /// Messages between the listed processes and the others are lost until [`Input::Heal`].
    Partition(Vec<NodeId>),
    /// The partition ends.
    Heal,
}

/// Processing costs, to model the paper's Ocp and LogP-like send gaps (zero by default).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Costs {
    /// Cost of handling a view change or a failure report (tree recalculation), and of a
    /// local suspicion.
    pub ocp: Duration,
    /// Cost of handling any other message (acks).
    pub other: Duration,
    /// Time between two consecutive sends of one process.
    pub gap: Duration,
}

enum Action {
    Deliver {
        to: NodeId,
        life: u32,
        from: Member,
        from_life: u32,
        to_inc: u32,
        lost: bool,
        bytes: Vec<u8>,
    },
    Timer {
        node: NodeId,
        life: u32,
        at: Time,
    },
    Input(Input),
}

struct Item {
    at: Time,
    seq: u64,
    action: Action,
}

impl PartialEq for Item {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Item {}
impl PartialOrd for Item {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Item {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

struct Node {
    m: Option<Membership>,
    life: u32,
    last_inc: u32,
    busy: Time,
    timer: Option<Time>,
}

/// A delivery or event, for observers such as the latency measurements.
#[derive(Clone, Debug)]
pub enum Observed {
    /// A message was handed to `to` at `at` (processing starts then or when it is free).
    Delivered {
        /// Processing start.
        at: Time,
        /// Receiver.
        to: NodeId,
        /// The message.
        body: Body,
    },
    /// A machine produced an event; `at` is the end of the processing that produced it.
    Event {
        /// Processing end.
        at: Time,
        /// Process.
        node: NodeId,
        /// The event.
        event: Event,
    },
}

/// The simulated system.
pub struct Sim<N: NetworkModel> {
    /// Virtual time of the step being processed.
    pub now: Time,
    /// The run's random numbers.
    pub rng: Rng,
    net: N,
    cfg: Config,
    nodes: Vec<Node>,
    queue: BinaryHeap<Reverse<Item>>,
    seq: u64,
    /// Invariant checker.
    pub check: Checker,
    /// Processing costs.
    pub costs: Costs,
    /// After this long the reliable layer gives up on a lost message and reports the peer.
    pub retransmit_give_up: Duration,
    partition: Option<Vec<bool>>,
    trace: VecDeque<String>,
    /// Keep this many trace lines for failure reports (0 = none).
    pub trace_len: usize,
    /// Record deliveries and events here (for measurements).
    pub observe: Option<Vec<Observed>>,
    /// Messages sent.
    pub messages: u64,
    /// Bytes sent.
    pub bytes: u64,
    /// Who hears of a crash from the launcher / heartbeats.
    pub notice: scenario::Notice,
    /// Delay range of those notices.
    pub notice_delay: (Duration, Duration),
}

impl<N: NetworkModel> Sim<N> {
    /// `n` processes in the start-up view, at time zero.
    pub fn new(cfg: Config, n: u32, net: N, seed: u64) -> Result<Self, String> {
        let mut sim = Sim {
            now: Duration::ZERO,
            rng: Rng::new(seed),
            net,
            cfg: cfg.clone(),
            nodes: Vec::new(),
            queue: BinaryHeap::new(),
            seq: 0,
            check: Checker::default(),
            costs: Costs::default(),
            retransmit_give_up: Duration::from_millis(5),
            partition: None,
            trace: VecDeque::new(),
            trace_len: 0,
            observe: None,
            messages: 0,
            bytes: 0,
            notice: scenario::Notice::All,
            notice_delay: (Duration::from_micros(100), Duration::from_millis(5)),
        };
        for id in 0..n {
            let m =
                Membership::new(cfg.clone(), id, n, Duration::ZERO).map_err(|e| e.to_string())?;
            sim.nodes.push(Node {
                m: Some(m),
                life: 0,
                last_inc: 0,
                busy: Duration::ZERO,
                timer: None,
            });
        }
        for id in 0..n {
            sim.drain(id, Duration::ZERO)?;
        }
        Ok(sim)
    }

    /// Schedules an input.
    pub fn schedule(&mut self, at: Time, input: Input) {
        self.push(at, Action::Input(input));
    }

    fn push(&mut self, at: Time, action: Action) {
        self.seq += 1;
        self.queue.push(Reverse(Item {
            at,
            seq: self.seq,
            action,
        }));
    }

    fn log(&mut self, line: impl FnOnce() -> String) {
        if self.trace_len > 0 {
            if self.trace.len() == self.trace_len {
                self.trace.pop_front();
            }
            let l = line();
            self.trace
                .push_back(format!("{:>10.3}ms {}", self.now.as_secs_f64() * 1e3, l));
        }
    }

    /// The last trace lines, oldest first.
    pub fn trace(&self) -> String {
        self.trace.iter().cloned().collect::<Vec<_>>().join("\n")
    }

    /// The machine of a running process.
    pub fn machine(&self, id: NodeId) -> Option<&Membership> {
        self.nodes.get(id as usize).and_then(|n| n.m.as_ref())
    }

    /// What the simulator knows about every process ever started.
    pub fn world(&self) -> BTreeMap<NodeId, Life> {
        self.nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.m.is_some() || n.life > 0)
            .map(|(id, n)| {
                let life = match &n.m {
                    Some(m) => Life {
                        incarnation: m.incarnation(),
                        alive: true,
                        status: m.status(),
                    },
                    None => Life {
                        incarnation: n.last_inc,
                        alive: false,
                        status: Status::Outside,
                    },
                };
                (id as NodeId, life)
            })
            .collect()
    }

    /// Installed view of every process (None when not a member or crashed).
    pub fn views(&self) -> BTreeMap<NodeId, Option<ViewId>> {
        self.nodes
            .iter()
            .enumerate()
            .map(|(id, n)| (id as NodeId, n.m.as_ref().and_then(|m| m.view_id())))
            .collect()
    }

    /// Ids of running processes.
    pub fn live(&self) -> Vec<NodeId> {
        self.nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.m.is_some())
            .map(|(i, _)| i as NodeId)
            .collect()
    }

    /// Time of the next queued item.
    pub fn next_time(&self) -> Option<Time> {
        self.queue.peek().map(|r| r.0.at)
    }

    /// Runs every item up to and including time `until`, checking invariants after each.
    pub fn run_until(&mut self, until: Time) -> Result<(), String> {
        while self.next_time().is_some_and(|t| t <= until) {
            self.step()?;
        }
        self.now = self.now.max(until);
        Ok(())
    }

    /// Processes one queued item.
    pub fn step(&mut self) -> Result<(), String> {
        let Some(Reverse(item)) = self.queue.pop() else {
            return Ok(());
        };
        self.now = item.at;
        match item.action {
            Action::Deliver {
                to,
                life,
                from,
                from_life,
                to_inc,
                lost,
                bytes,
            } => self.deliver(to, life, from, from_life, to_inc, lost, bytes),
            Action::Timer { node, life, at } => {
                let n = &mut self.nodes[node as usize];
                if n.life != life || n.timer != Some(at) {
                    return Ok(());
                }
                n.timer = None;
                let start = self.now.max(n.busy);
                if let Some(m) = n.m.as_mut() {
                    m.handle_timeout(start);
                }
                self.log(|| format!("{node}: timeout"));
                self.drain(node, start)
            }
            Action::Input(input) => self.input(input),
        }
    }

    fn cut(&self, a: NodeId, b: NodeId) -> bool {
        match &self.partition {
            Some(side) => {
                side.get(a as usize).copied().unwrap_or(false)
                    != side.get(b as usize).copied().unwrap_or(false)
            }
            None => false,
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn deliver(
        &mut self,
        to: NodeId,
        life: u32,
        sender: Member,
        from_life: u32,
        to_inc: u32,
        lost: bool,
        bytes: Vec<u8>,
    ) -> Result<(), String> {
        let from = sender.id;
        let reachable = self
            .nodes
            .get(to as usize)
            .is_some_and(|n| n.life == life && n.m.is_some());
        if lost || !reachable || self.cut(from, to) {
            // Whoever cannot reach whom may end up suspected by a timeout: both are fair game.
            self.check.taint(sender);
            self.check.taint(Member::new(to, to_inc));
            // The sender's reliable layer gives up and reports the peer.
            if self
                .nodes
                .get(from as usize)
                .is_some_and(|n| n.life == from_life && n.m.is_some())
            {
                let at = self.now + self.retransmit_give_up;
                self.push(
                    at,
                    Action::Input(Input::Suspect {
                        at: from,
                        target: Member::new(to, to_inc),
                    }),
                );
            }
            return Ok(());
        }
        let msg = Message::decode(&bytes).map_err(|e| format!("own encoding rejected: {e}"))?;
        let cost = match msg.body {
            Body::ViewChange(_) | Body::NodeFailure { .. } | Body::RootFailure { .. } => {
                self.costs.ocp
            }
            _ => self.costs.other,
        };
        let n = &mut self.nodes[to as usize];
        let start = self.now.max(n.busy);
        n.busy = start + cost;
        let end = n.busy;
        if let Some(obs) = self.observe.as_mut() {
            obs.push(Observed::Delivered {
                at: start,
                to,
                body: msg.body.clone(),
            });
        }
        self.log(|| format!("{from} -> {to}: {}", brief(&msg)));
        if let Some(m) = self.nodes[to as usize].m.as_mut() {
            m.handle(start, from, msg);
        }
        self.drain(to, end)
    }

    fn input(&mut self, input: Input) -> Result<(), String> {
        self.log(|| format!("input {input:?}"));
        match input {
            Input::Crash(id) => {
                let Some(n) = self.nodes.get_mut(id as usize) else {
                    return Ok(());
                };
                if let Some(m) = n.m.take() {
                    n.last_inc = m.incarnation();
                    n.life += 1;
                    n.timer = None;
                    let dead = Member::new(id, n.last_inc);
                    self.check.crashed(dead);
                    self.notify_crash(dead);
                }
                Ok(())
            }
            Input::Restart(id) => {
                let known = self.nodes.len() as u32;
                let cfg = self.cfg.clone();
                let now = self.now;
                let Some(n) = self.nodes.get_mut(id as usize) else {
                    return Ok(());
                };
                if n.m.is_some() {
                    return Ok(());
                }
                let mut m = Membership::new_outside(cfg, Member::new(id, n.last_inc + 1), known)
                    .map_err(|e| e.to_string())?;
                m.join(now, JoinKind::Recovered)
                    .map_err(|e| e.to_string())?;
                n.m = Some(m);
                n.life += 1;
                n.busy = now;
                self.drain(id, now)
            }
            Input::JoinNew(id) => {
                while self.nodes.len() <= id as usize {
                    self.nodes.push(Node {
                        m: None,
                        life: 0,
                        last_inc: 0,
                        busy: self.now,
                        timer: None,
                    });
                }
                let known = self.nodes.len() as u32;
                let now = self.now;
                let n = &mut self.nodes[id as usize];
                if n.m.is_some() || n.life > 0 {
                    return Ok(());
                }
                let mut m = Membership::new_outside(self.cfg.clone(), Member::new(id, 0), known)
                    .map_err(|e| e.to_string())?;
                m.join(now, JoinKind::New).map_err(|e| e.to_string())?;
                n.m = Some(m);
                n.life += 1;
                self.drain(id, now)
            }
            Input::Suspect { at, target } => self.suspect(at, Some(target), target.id),
            Input::SuspectId { at, target } => self.suspect(at, None, target),
            Input::Partition(side) => {
                let mut s = vec![
                    false;
                    self.nodes
                        .len()
                        .max(side.iter().map(|&i| i as usize + 1).max().unwrap_or(0))
                ];
                for i in side {
                    s[i as usize] = true;
                }
                self.partition = Some(s);
                Ok(())
            }
            Input::Heal => {
                self.partition = None;
                Ok(())
            }
        }
    }

    /// Schedules the failure detector's notices of a crash, as the notice model says.
    fn notify_crash(&mut self, dead: Member) {
        let live = self.live();
        // Processes whose view holds the dead life: at least one of them notices (a
        // heartbeat or connection to a tree neighbour), as the runtime's detector does.
        let holders: Vec<NodeId> = live
            .iter()
            .copied()
            .filter(|&id| {
                self.machine(id)
                    .and_then(|m| m.view())
                    .is_some_and(|v| v.contains_member(dead))
            })
            .collect();
        let mut told: Vec<NodeId> = match self.notice {
            scenario::Notice::All => live.clone(),
            scenario::Notice::Some(p) => live
                .iter()
                .copied()
                .filter(|_| self.rng.chance(p))
                .collect(),
            scenario::Notice::One => Vec::new(),
        };
        if !told.iter().any(|t| holders.contains(t)) {
            let pool = if holders.is_empty() { &live } else { &holders };
            told.extend(self.rng.pick(pool));
        }
        // Heartbeats between tree neighbours: whoever has the dead life as parent or child
        // in its view notices it too (later than the launcher would).
        for &h in &holders {
            let neighbour = self
                .machine(h)
                .and_then(|m| m.view())
                .is_some_and(|v| v.parent(h) == Some(dead.id) || v.parent(dead.id) == Some(h));
            if neighbour && !told.contains(&h) {
                let when = self.now
                    + self.notice_delay.1
                    + self.rng.duration(Duration::ZERO, self.notice_delay.1);
                self.push(
                    when,
                    Action::Input(Input::Suspect {
                        at: h,
                        target: dead,
                    }),
                );
            }
        }
        for at in told {
            let when = self.now + self.rng.duration(self.notice_delay.0, self.notice_delay.1);
            self.push(when, Action::Input(Input::Suspect { at, target: dead }));
        }
    }

    fn suspect(&mut self, at: NodeId, life: Option<Member>, target: NodeId) -> Result<(), String> {
        let Some(n) = self.nodes.get_mut(at as usize) else {
            return Ok(());
        };
        let now = self.now;
        let start = now.max(n.busy);
        let Some(m) = n.m.as_mut() else { return Ok(()) };
        let life = life.or_else(|| {
            m.view()
                .and_then(|v| v.incarnation(target))
                .map(|i| Member::new(target, i))
        });
        if let Some(l) = life {
            // The detector may be wrong: the suspected life may legitimately be removed.
            self.check.taint(l);
            m.suspect_member(start, l);
        } else {
            m.suspect(start, target);
        }
        n.busy = start + self.costs.ocp;
        let end = n.busy;
        self.drain(at, end)
    }

    /// Sends what `id` produced, records its events, checks invariants, re-arms its timer.
    fn drain(&mut self, id: NodeId, end: Time) -> Result<(), String> {
        let mut out = Vec::new();
        let mut events = Vec::new();
        let (life, inc, timeout) = {
            let n = &mut self.nodes[id as usize];
            let Some(m) = n.m.as_mut() else { return Ok(()) };
            while let Some(t) = m.poll_transmit() {
                out.push(t);
            }
            while let Some(e) = m.poll_event() {
                events.push(e);
            }
            (n.life, m.incarnation(), m.poll_timeout())
        };
        let me = Member::new(id, inc);
        for (i, t) in out.into_iter().enumerate() {
            if let Body::ViewChange(c) = &t.message.body {
                if c.view.coordinator == id {
                    let world = self.world();
                    self.check.on_decision(c.view, &c.removed, &world)?;
                }
            }
            let depart = end + self.costs.gap * i as u32;
            let bytes = t.message.encode();
            self.messages += 1;
            self.bytes += bytes.len() as u64;
            let to_life = self.nodes.get(t.to as usize).map_or(0, |n| n.life);
            let to_inc = self
                .nodes
                .get(t.to as usize)
                .map_or(0, |n| n.m.as_ref().map_or(n.last_inc, |m| m.incarnation()));
            let mk = |bytes, lost| Action::Deliver {
                to: t.to,
                life: to_life,
                from: me,
                from_life: life,
                to_inc,
                lost,
                bytes,
            };
            let route = if self.cut(id, t.to) {
                Route::Drop
            } else {
                self.net.route(depart, id, t.to, &mut self.rng)
            };
            match route {
                // Lost in transit: delivery fails at the receiver and the sender is told.
                Route::Drop => self.push(depart, mk(bytes, true)),
                Route::Deliver(d) => self.push(depart + d, mk(bytes, false)),
                Route::Duplicate(d1, d2) => {
                    self.push(depart + d1, mk(bytes.clone(), false));
                    self.push(depart + d2, mk(bytes, false));
                }
            }
        }
        for e in events {
            if let Some(obs) = self.observe.as_mut() {
                obs.push(Observed::Event {
                    at: end,
                    node: id,
                    event: e.clone(),
                });
            }
            self.log(|| match &e {
                Event::ViewInstalled { view_id, members } => {
                    format!("{id}: installed {view_id} {}", ids(members))
                }
                e => format!("{id}: {e:?}"),
            });
            match &e {
                Event::ViewInstalled { view_id, members } => {
                    self.check.on_install(end, me, *view_id, members)?
                }
                Event::StabilizationComplete { view_id, .. } => {
                    let world = self.world();
                    self.check.on_stabilized(end, me, *view_id, &world)?
                }
                Event::Excluded { .. } => self.check.exclusions += 1,
            }
        }
        let n = &mut self.nodes[id as usize];
        if let Some(t) = timeout {
            if n.timer != Some(t) {
                n.timer = Some(t);
                let at = t.max(self.now);
                self.push(
                    at,
                    Action::Timer {
                        node: id,
                        life,
                        at: t,
                    },
                );
            }
        } else {
            n.timer = None;
        }
        Ok(())
    }
}

fn ids(ms: &[Member]) -> String {
    let v: Vec<String> = ms
        .iter()
        .map(|m| {
            if m.incarnation == 0 {
                m.id.to_string()
            } else {
                m.to_string()
            }
        })
        .collect();
    format!("[{}]", v.join(" "))
}

/// One-line rendering of a message for traces.
pub fn brief(m: &Message) -> String {
    let head = format!("{}#{}", m.body.name(), m.sender_incarnation);
    match &m.body {
        Body::NodeFailure { view, dead } | Body::RootFailure { view, dead } => {
            format!("{head} {view} dead {}", ids(dead))
        }
        Body::ViewChange(c) => format!(
            "{head} {} base {} -{} +{}{}",
            c.view,
            c.base,
            ids(&c.removed),
            ids(&c.added),
            if c.members.is_some() { " full" } else { "" }
        ),
        Body::Join {
            member, max_epoch, ..
        } => format!("{head} {member} max_epoch {max_epoch}"),
        Body::JoinDetAck { view, root }
        | Body::Redirect { view, root }
        | Body::Probe { view, root } => {
            format!("{head} {view} root {root}")
        }
        Body::Stale { view, root, member } => format!("{head} {view} root {root} member {member}"),
        Body::FailureDetAck { view }
        | Body::FailureAck { view }
        | Body::ViewRequest { view }
        | Body::Sync { view } => {
            format!("{head} {view}")
        }
    }
}
