//! The properties every simulated run must keep, checked as events happen and at the end.
//!
//! Safety (checked when it happens):
//! - **Integrity**: a process decides an instance at most once, and only one it started,
//!   with the collective it started.
//! - **Uniform agreement**: every decision of an instance, by any process (even one that
//!   crashes right after), is the same value.
//! - **Validity**: the decided flag is the AND, and the context id the MAX, of the inputs
//!   of exactly the members not listed as missing, all of which started the instance;
//!   `proc_failed` follows the documented rule from the recorded inputs.
//! - **Accuracy**: every rank a decision (or a contribution) names as failed had crashed.
//! - **Shrink**: the new members are the old ranks not named failed, in old rank order; no
//!   member is a rank some contributor knew failed when it called shrink.
//! - **Revoke**: a process is only revoked if someone called MPIX_Comm_revoke; it reports
//!   it once.
//!
//! Liveness (at the end): every survivor started and decided every instance; every
//! survivor contributed to each instance and is a member of each shrunk communicator;
//! revocation reached all survivors or none, and all of them if a survivor initiated it;
//! each instance's last decision came within a bound after the moment the survivors had
//! everything they need (all of them started it, all failure notices delivered).

use std::time::Duration;

use super::OpKind;
use crate::{Event, Rank, RankSet, Time, Value};

/// A violated property, with the steps that led to it.
#[derive(Debug, Clone)]
pub struct Failure {
    /// What went wrong.
    pub reason: String,
    /// The last steps (when tracing was on).
    pub trace: String,
}

impl Failure {
    /// A failure without trace.
    pub fn new(reason: String) -> Self {
        Failure {
            reason,
            trace: String::new(),
        }
    }
}

/// What a process put into an instance.
#[derive(Clone, Debug)]
pub struct StartRecord {
    /// When it started.
    pub at: Time,
    /// Its flag.
    pub flag: i32,
    /// Its context id proposal.
    pub cid: u64,
    /// Failures it knew of.
    pub failed: RankSet,
    /// Failures it had acknowledged.
    pub acked: RankSet,
}

/// Termination bound, in maximum message delays after everything needed was in place
/// (the protocol needs at most five: QUERY, VOTE, PROPOSE, ACK, DECIDE).
pub const BOUND_DELAYS: f64 = 6.0;

/// Observed history and the properties it must keep.
pub struct Checker {
    n: u32,
    ops: Vec<OpKind>,
    crashed: Vec<Option<Time>>,
    suspected: Vec<bool>,
    starts: Vec<Vec<Option<StartRecord>>>,
    decided_at: Vec<Vec<Option<Time>>>,
    first: Vec<Option<Value>>,
    initiators: Vec<Rank>,
    revoked: Vec<bool>,
    last_fault: Time,
    decisions: u64,
    last_decision: Time,
}

fn fail<T>(reason: String) -> Result<T, Failure> {
    Err(Failure::new(reason))
}

impl Checker {
    /// A checker for `n` processes running `ops`.
    pub fn new(n: u32, ops: Vec<OpKind>) -> Self {
        let k = ops.len();
        Checker {
            n,
            ops,
            crashed: vec![None; n as usize],
            suspected: vec![false; n as usize],
            starts: vec![vec![None; n as usize]; k],
            decided_at: vec![vec![None; n as usize]; k],
            first: vec![None; k],
            initiators: Vec::new(),
            revoked: vec![false; n as usize],
            last_fault: Time::ZERO,
            decisions: 0,
            last_decision: Time::ZERO,
        }
    }

    /// Decisions observed so far.
    pub fn decisions(&self) -> u64 {
        self.decisions
    }

    /// Whether a process may be named failed: it crashed, or it was suspected (and will
    /// be killed).
    fn is_crashed(&self, r: Rank) -> bool {
        self.crashed.get(r as usize).is_some_and(|c| c.is_some())
            || self.suspected.get(r as usize).copied().unwrap_or(false)
    }

    /// `who` was suspected while still running.
    pub fn suspected(&mut self, who: Rank) {
        self.suspected[who as usize] = true;
    }

    /// Whether `who` was suspected.
    pub fn is_suspected(&self, who: Rank) -> bool {
        self.suspected[who as usize]
    }

    /// The decision of instance `seq`, once someone decided.
    pub fn decided_value(&self, seq: usize) -> Option<&Value> {
        self.first.get(seq).and_then(|v| v.as_ref())
    }

    /// Whether `who` started instance `seq`.
    pub fn has_started(&self, who: Rank, seq: usize) -> bool {
        self.starts
            .get(seq)
            .and_then(|v| v.get(who as usize))
            .is_some_and(|r| r.is_some())
    }

    /// Time of the last decision.
    pub fn last_decision(&self) -> Time {
        self.last_decision
    }

    /// `who` crashed.
    pub fn crashed(&mut self, who: Rank, now: Time) {
        self.crashed[who as usize] = Some(now);
        self.last_fault = self.last_fault.max(now);
    }

    /// A failure notice reached a live process.
    pub fn notice(&mut self, now: Time) {
        self.last_fault = self.last_fault.max(now);
    }

    /// `who` called MPIX_Comm_revoke.
    pub fn revoke_called(&mut self, who: Rank) {
        self.initiators.push(who);
    }

    /// `who` started instance `seq`.
    pub fn started(
        &mut self,
        who: Rank,
        seq: u64,
        op: OpKind,
        rec: StartRecord,
    ) -> Result<(), Failure> {
        let s = seq as usize;
        if self.ops.get(s) != Some(&op) {
            return fail(format!(
                "rank {who} started #{seq} as {op:?}, plan says {:?}",
                self.ops.get(s)
            ));
        }
        if self.starts[s][who as usize].is_some() {
            return fail(format!("rank {who} started #{seq} twice"));
        }
        if let Some(r) = rec.failed.iter().find(|r| !self.is_crashed(*r)) {
            return fail(format!("rank {who} believes live rank {r} failed"));
        }
        if !rec.acked.is_subset(&rec.failed) {
            return fail(format!("rank {who} acknowledged unknown failures"));
        }
        self.starts[s][who as usize] = Some(rec);
        Ok(())
    }

    /// Non-decision events.
    pub fn event(&mut self, who: Rank, _now: Time, ev: &Event) -> Result<(), Failure> {
        match ev {
            Event::Revoked => {
                if self.initiators.is_empty() {
                    return fail(format!("rank {who} revoked though nobody called revoke"));
                }
                if std::mem::replace(&mut self.revoked[who as usize], true) {
                    return fail(format!("rank {who} reported revocation twice"));
                }
            }
            Event::FailureLearned { rank } => {
                if !self.is_crashed(*rank) {
                    return fail(format!("rank {who} learned that live rank {rank} failed"));
                }
            }
            Event::Agreed { .. } | Event::Shrunk { .. } => {
                return fail("decision routed as a plain event".into());
            }
        }
        Ok(())
    }

    /// `who` reported a decision `ev`; `value` is what its machine holds for the instance.
    pub fn decided(
        &mut self,
        who: Rank,
        now: Time,
        ev: &Event,
        value: Option<Value>,
    ) -> Result<(), Failure> {
        let (seq, kind) = match ev {
            Event::Agreed { seq, .. } => (*seq, OpKind::Agree),
            Event::Shrunk { seq, .. } => (*seq, OpKind::Shrink),
            _ => return fail("not a decision".into()),
        };
        let s = seq as usize;
        let Some(v) = value else {
            return fail(format!("rank {who} decided #{seq} but holds no decision"));
        };
        if self.ops.get(s) != Some(&kind) {
            return fail(format!("rank {who} decided #{seq} as {kind:?}"));
        }
        if self.starts[s][who as usize].is_none() {
            return fail(format!("rank {who} decided #{seq} without starting it"));
        }
        if self.decided_at[s][who as usize].replace(now).is_some() {
            return fail(format!("rank {who} decided #{seq} twice"));
        }
        self.decisions += 1;
        self.last_decision = self.last_decision.max(now);
        let consistent = match ev {
            Event::Agreed {
                flag, proc_failed, ..
            } => *flag == v.flag && *proc_failed == v.proc_failed,
            Event::Shrunk { members, cid, .. } => *members == v.survivors(self.n) && *cid == v.cid,
            _ => true,
        };
        if !consistent {
            return fail(format!(
                "rank {who} #{seq}: event {ev:?} disagrees with {v:?}"
            ));
        }
        if let Some(f) = &self.first[s] {
            if *f != v {
                return fail(format!(
                    "uniform agreement violated on #{seq}: rank {who} decided {v:?}, earlier {f:?}"
                ));
            }
            return Ok(());
        }
        self.validity(seq, kind, &v)?;
        self.first[s] = Some(v);
        Ok(())
    }

    fn validity(&self, seq: u64, kind: OpKind, v: &Value) -> Result<(), Failure> {
        let s = seq as usize;
        if !v.missing.is_subset(&v.failed) {
            return fail(format!("#{seq}: missing {:?} not all failed", v.missing));
        }
        if let Some(r) = v.failed.iter().find(|r| !self.is_crashed(*r)) {
            return fail(format!("#{seq}: decision names live rank {r} failed"));
        }
        let mut flag = -1i32;
        let mut cid = 0u64;
        let mut acked_by_all: Option<RankSet> = None;
        let mut someone_unacked = false;
        for r in 0..self.n {
            if v.missing.contains(r) {
                continue;
            }
            let Some(rec) = &self.starts[s][r as usize] else {
                return fail(format!(
                    "#{seq}: rank {r} counted as contributor but never started"
                ));
            };
            flag &= rec.flag;
            cid = cid.max(rec.cid);
            acked_by_all = Some(match acked_by_all {
                None => rec.acked.clone(),
                Some(a) => a.intersection(&rec.acked),
            });
            someone_unacked |= !rec.failed.is_subset(&rec.acked);
            if !rec.failed.is_subset(&v.failed) {
                return fail(format!(
                    "#{seq}: contributor {r} knew {:?} failed, decision names {:?}",
                    rec.failed, v.failed
                ));
            }
        }
        if flag != v.flag {
            return fail(format!(
                "#{seq}: flag {:#x}, AND of contributors is {flag:#x}",
                v.flag
            ));
        }
        if cid != v.cid {
            return fail(format!(
                "#{seq}: cid {}, MAX of contributors is {cid}",
                v.cid
            ));
        }
        let expect_pf = someone_unacked || !v.missing.is_subset(&acked_by_all.unwrap_or_default());
        if expect_pf != v.proc_failed {
            return fail(format!(
                "#{seq}: proc_failed {} but the rule gives {expect_pf}",
                v.proc_failed
            ));
        }
        if kind == OpKind::Shrink {
            let members = v.survivors(self.n);
            if members.windows(2).any(|w| w[0] >= w[1]) {
                return fail(format!("#{seq}: members not in old rank order"));
            }
        }
        Ok(())
    }

    /// Cheap checks after every step.
    pub fn after_step(&self, _now: Time) -> Result<(), Failure> {
        // Decisions never outnumber starts.
        let starts: usize = self.starts.iter().map(|v| v.iter().flatten().count()).sum();
        if self.decisions as usize > starts {
            return fail("more decisions than starts".into());
        }
        Ok(())
    }

    /// End-state properties. `bound`: the maximum message delay when the termination
    /// bound applies. Returns the worst instance latency in maximum delays.
    pub fn at_end(
        &self,
        alive: &[bool],
        revoked: &[bool],
        bound: Option<Duration>,
    ) -> Result<f64, Failure> {
        let survivors: Vec<Rank> = (0..self.n).filter(|r| alive[*r as usize]).collect();
        if survivors.is_empty() {
            return fail("no survivor (the scenario must keep one)".into());
        }
        let mut worst = 0f64;
        for (s, first) in self.first.iter().enumerate() {
            let Some(v) = first else {
                return fail(format!("#{s} never decided"));
            };
            let mut ready = self.last_fault;
            let mut last = Time::ZERO;
            for &r in &survivors {
                let Some(rec) = &self.starts[s][r as usize] else {
                    return fail(format!("survivor {r} never started #{s}"));
                };
                let Some(at) = self.decided_at[s][r as usize] else {
                    return fail(format!("survivor {r} never decided #{s} (termination)"));
                };
                if v.missing.contains(r) || v.failed.contains(r) {
                    return fail(format!("#{s}: survivor {r} excluded by {v:?}"));
                }
                ready = ready.max(rec.at);
                last = last.max(at);
            }
            if let Some(d) = bound {
                let rounds = last.saturating_sub(ready).as_secs_f64() / d.as_secs_f64();
                worst = worst.max(rounds);
                if rounds > BOUND_DELAYS {
                    return fail(format!(
                        "#{s}: last survivor decided {:?} after everything was in place ({rounds:.2} max delays > {BOUND_DELAYS})",
                        last.saturating_sub(ready)
                    ));
                }
            }
        }
        let any = survivors.iter().any(|r| revoked[*r as usize]);
        let all = survivors.iter().all(|r| revoked[*r as usize]);
        if any && !all {
            return fail("revocation reached some survivors but not all".into());
        }
        if let Some(i) = self.initiators.iter().find(|i| alive[**i as usize]) {
            if !all {
                return fail(format!(
                    "survivor {i} revoked but not every survivor is revoked"
                ));
            }
        }
        for &r in &survivors {
            if revoked[r as usize] != self.revoked[r as usize] {
                return fail(format!("rank {r}: is_revoked disagrees with its events"));
            }
        }
        Ok(worst)
    }
}
