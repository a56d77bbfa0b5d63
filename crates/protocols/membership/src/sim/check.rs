//! Invariants checked after every simulation step, and at the end of a run.
//!
//! Safety (after every step):
//! - self inclusion: a process only installs views that contain its current life;
//! - agreement: one view id always names the same member set, across all processes and
//!   the whole run (what makes "same-view delivery" meaningful);
//! - no duplication: a process installs a view id at most once, and within one life its
//!   views strictly increase;
//! - no spurious exclusion: a coordinator never removes a live, unsuspected member (one
//!   that is neither crashed, nor suspected by a failure detector, nor cut off from a peer);
//! - stabilization is only announced by the root of the view, after installing it.
//!
//! Liveness (at the end): within a bound after the last fault, every live process is a
//! member of one and the same view, that view is exactly the set of live processes, and its
//! root announced the end of stabilization.

use std::collections::{BTreeMap, BTreeSet};

use crate::{Member, NodeId, Status, Time, ViewId};

/// What the simulator knows about one process right now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Life {
    /// Current incarnation of the process.
    pub incarnation: u32,
    /// Whether it runs (not crashed).
    pub alive: bool,
    /// Its membership status.
    pub status: Status,
}

/// Records installs and checks the invariants.
#[derive(Default, Debug)]
pub struct Checker {
    views: BTreeMap<ViewId, Vec<Member>>,
    last: BTreeMap<NodeId, (u32, ViewId)>,
    decided: BTreeSet<ViewId>,
    seen: BTreeSet<(NodeId, ViewId)>,
    tainted: BTreeSet<Member>,
    crashed: BTreeSet<Member>,
    /// When each view's root announced stabilization.
    pub stabilized: BTreeMap<ViewId, Time>,
    /// Number of installs observed.
    pub installs: u64,
    /// Time of the latest install or stabilization announcement.
    pub last_activity: Time,
    /// Exclusions of live processes (false suspicions honoured).
    pub exclusions: u64,
}

impl Checker {
    /// A life was suspected by the failure detector while possibly alive: it may be removed.
    pub fn taint(&mut self, m: Member) {
        self.tainted.insert(m);
    }

    /// A life crashed.
    pub fn crashed(&mut self, m: Member) {
        self.crashed.insert(m);
    }

    /// A process installed a view.
    pub fn on_install(
        &mut self,
        now: Time,
        node: Member,
        view: ViewId,
        members: &[Member],
    ) -> Result<(), String> {
        self.installs += 1;
        self.last_activity = now;
        if !members.contains(&node) {
            return Err(format!(
                "self inclusion: {node} installed {view} without itself"
            ));
        }
        match self.views.get(&view) {
            Some(known) if known != members => {
                return Err(format!(
                    "agreement: {view} installed by {node} as {} but elsewhere as {}",
                    list(members),
                    list(known)
                ))
            }
            Some(_) => {}
            None => {
                self.views.insert(view, members.to_vec());
            }
        }
        if !self.seen.insert((node.id, view)) {
            return Err(format!("duplication: {node} installed {view} twice"));
        }
        if let Some((inc, prev)) = self.last.get(&node.id) {
            if *inc == node.incarnation && view <= *prev {
                return Err(format!(
                    "monotonicity: {node} installed {view} after {prev}"
                ));
            }
        }
        self.last.insert(node.id, (node.incarnation, view));
        Ok(())
    }

    /// A coordinator sent out a view change removing `removed`: each removed life must be
    /// crashed, suspected by a failure detector (or cut off), or no longer that life.
    pub fn on_decision(
        &mut self,
        view: ViewId,
        removed: &[Member],
        world: &BTreeMap<NodeId, Life>,
    ) -> Result<(), String> {
        if !self.decided.insert(view) {
            return Ok(());
        }
        for x in removed {
            let legit = self.crashed.contains(x)
                || self.tainted.contains(x)
                || world.get(&x.id).is_none_or(|l| {
                    !l.alive || l.incarnation != x.incarnation || l.status != Status::Member
                });
            if !legit {
                return Err(format!(
                    "spurious exclusion: {view} removes live, unsuspected {x}"
                ));
            }
        }
        Ok(())
    }

    /// A process announced the end of stabilization: it must be the root, and every member
    /// still living that life must have installed the view (or a newer one) by now.
    pub fn on_stabilized(
        &mut self,
        now: Time,
        node: Member,
        view: ViewId,
        world: &BTreeMap<NodeId, Life>,
    ) -> Result<(), String> {
        let members = self
            .views
            .get(&view)
            .ok_or(format!("{node} stabilized unknown {view}"))?;
        if members.first().map(|m| m.id) != Some(node.id) {
            return Err(format!(
                "{node} announced stabilization of {view} but is not its root"
            ));
        }
        for m in members {
            let same_life = world
                .get(&m.id)
                .is_some_and(|l| l.alive && l.incarnation == m.incarnation);
            let reached = self.seen.contains(&(m.id, view))
                || self
                    .last
                    .get(&m.id)
                    .is_some_and(|(inc, v)| *inc == m.incarnation && *v > view);
            if same_life && !reached {
                return Err(format!(
                    "{node} announced stabilization of {view} before {m} installed it"
                ));
            }
        }
        match self.last.get(&node.id) {
            Some((inc, _)) if *inc == node.incarnation && self.seen.contains(&(node.id, view)) => {}
            _ => {
                return Err(format!(
                    "{node} announced stabilization of {view} it never installed"
                ))
            }
        }
        self.stabilized.entry(view).or_insert(now);
        self.last_activity = now;
        Ok(())
    }

    /// End-of-run liveness: one view, equal to the live set, stabilized. Returns that view.
    pub fn converged(
        &self,
        views: &BTreeMap<NodeId, Option<ViewId>>,
        world: &BTreeMap<NodeId, Life>,
    ) -> Result<ViewId, String> {
        let live: Vec<Member> = world
            .iter()
            .filter(|(_, l)| l.alive)
            .map(|(&id, l)| Member::new(id, l.incarnation))
            .collect();
        let mut ids = BTreeSet::new();
        for m in &live {
            match views.get(&m.id).copied().flatten() {
                Some(v) => {
                    ids.insert(v);
                }
                None => {
                    let st = world.get(&m.id).map(|l| l.status);
                    return Err(format!("liveness: live {m} is not a member ({st:?})"));
                }
            }
        }
        if ids.len() != 1 {
            let per: Vec<String> = live
                .iter()
                .map(|m| {
                    format!(
                        "{}:{}",
                        m.id,
                        views
                            .get(&m.id)
                            .copied()
                            .flatten()
                            .map_or("-".into(), |v| v.to_string())
                    )
                })
                .collect();
            return Err(format!(
                "liveness: live processes disagree on the view: {}",
                per.join(" ")
            ));
        }
        let v = *ids.iter().next().ok_or("liveness: no live process")?;
        let members = self
            .views
            .get(&v)
            .ok_or("liveness: final view never recorded")?;
        if members != &live {
            return Err(format!(
                "liveness: final view {v} is {} but the live set is {}",
                list(members),
                list(&live)
            ));
        }
        if v != ViewId::INITIAL && !self.stabilized.contains_key(&v) {
            return Err(format!(
                "liveness: final view {v} never announced stabilization"
            ));
        }
        Ok(v)
    }
}

fn list(ms: &[Member]) -> String {
    let v: Vec<String> = ms.iter().map(|m| m.to_string()).collect();
    format!("[{}]", v.join(" "))
}
