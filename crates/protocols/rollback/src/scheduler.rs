//! The checkpoint scheduler: waves, commit, abort, and the rollback after a failure.

use std::collections::VecDeque;

use crate::wire::{Body, DecodeError, Message};
use crate::{Config, Peer, Rank, Time, Transmit, Wave};

/// Why a wave was aborted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AbortReason {
    /// These ranks had not reported when the wave timeout expired.
    Timeout { missing: Vec<Rank> },
    /// A rank could not store its image or record.
    StorageFailed { rank: Rank },
    /// A rank failed during the wave: the job rolls back instead.
    RankFailed { rank: Rank },
}

/// What the host of the scheduler (the launcher) must know or do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// Wave `wave` started.
    WaveStarted { wave: Wave },
    /// Global checkpoint `wave` is committed (every rank stored its image and record;
    /// `in_transit` messages were recorded in all). The host persists `wave` before anything
    /// else: it is where a whole-job restart begins.
    Committed { wave: Wave, in_transit: u64 },
    /// Wave `wave` will never be committed.
    WaveAborted { wave: Wave, reason: AbortReason },
    /// Every rank was told to restore checkpoint `wave` as incarnation `incarnation`. The
    /// host persists the incarnation (a later restart must use a higher one).
    RollingBack { wave: Wave, incarnation: u16 },
    /// These ranks did not restore in time; the rollback starts again.
    RestoreTimedOut { missing: Vec<Rank> },
    /// Every rank restored checkpoint `wave`; the job runs again.
    Resumed { wave: Wave, incarnation: u16 },
    /// The incarnation numbers are exhausted: the job cannot roll back any more.
    GaveUp,
}

/// Counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub waves: u64,
    pub commits: u64,
    pub aborts: u64,
    pub rollbacks: u64,
    /// Reports of an older incarnation or a finished wave, ignored.
    pub stale: u64,
    /// Messages a scheduler never receives.
    pub unexpected: u64,
}

#[derive(Clone, Debug)]
struct Progress {
    wave: Wave,
    done: Vec<bool>,
    left: usize,
    in_transit: u64,
    deadline: Time,
}

#[derive(Clone, Debug)]
enum Phase {
    Running {
        wave: Option<Progress>,
        next: Option<Time>,
    },
    Restoring {
        wave: Wave,
        rolled: Vec<bool>,
        left: usize,
        deadline: Time,
    },
    Stopped,
}

/// The job's checkpoint scheduler.
#[derive(Debug)]
pub struct Scheduler {
    size: u32,
    config: Config,
    incarnation: u16,
    committed: Wave,
    last_wave: Wave,
    phase: Phase,
    transmits: VecDeque<Transmit>,
    events: VecDeque<Event>,
    stats: Stats,
}

impl Scheduler {
    /// The scheduler of a job of `size` ranks started at `now`.
    ///
    /// # Panics
    /// If `size` is 0 (the launcher checked it when it parsed `-n`).
    pub fn new(size: u32, config: Config, now: Time) -> Scheduler {
        assert!(size > 0, "a job has at least one rank");
        Scheduler {
            size,
            config,
            incarnation: 0,
            committed: 0,
            last_wave: 0,
            phase: Phase::Running {
                wave: None,
                next: config.interval.map(|i| now + i),
            },
            transmits: VecDeque::new(),
            events: VecDeque::new(),
            stats: Stats::default(),
        }
    }

    /// The scheduler of a whole job started again (every rank relaunched) from what an
    /// earlier scheduler persisted: its last committed wave, the highest wave it started and
    /// its incarnation. It starts the rollback to `committed` right away.
    pub fn restart(
        size: u32,
        config: Config,
        now: Time,
        committed: Wave,
        last_wave: Wave,
        incarnation: u16,
    ) -> Scheduler {
        let mut s = Scheduler::new(size, config, now);
        s.committed = committed;
        s.last_wave = last_wave.max(committed);
        s.incarnation = incarnation;
        s.rollback(now);
        s
    }

    pub fn size(&self) -> u32 {
        self.size
    }

    /// The last committed wave (0: none yet, the start of the job).
    pub fn committed(&self) -> Wave {
        self.committed
    }

    /// The highest wave started so far (persisted with the commit record for a restart).
    pub fn last_wave(&self) -> Wave {
        self.last_wave
    }

    /// The job's current incarnation.
    pub fn incarnation(&self) -> u16 {
        self.incarnation
    }

    /// The wave in progress, if any.
    pub fn current_wave(&self) -> Option<Wave> {
        match &self.phase {
            Phase::Running { wave: Some(p), .. } => Some(p.wave),
            _ => None,
        }
    }

    /// Running, no wave in progress, no rollback in progress.
    pub fn is_idle(&self) -> bool {
        matches!(self.phase, Phase::Running { wave: None, .. })
    }

    /// A rollback is in progress.
    pub fn is_restoring(&self) -> bool {
        matches!(self.phase, Phase::Restoring { .. })
    }

    pub fn stats(&self) -> Stats {
        self.stats
    }

    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.transmits.pop_front()
    }

    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// When [`Scheduler::handle_timeout`] must be called next.
    pub fn poll_timeout(&self) -> Option<Time> {
        match &self.phase {
            Phase::Running { wave: Some(p), .. } => Some(p.deadline),
            Phase::Running { wave: None, next } => *next,
            Phase::Restoring { deadline, .. } => Some(*deadline),
            Phase::Stopped => None,
        }
    }

    /// Starts a wave now (`MPIX_Checkpoint`, `steadfast checkpoint`). `None` if a wave or a
    /// rollback is in progress.
    pub fn checkpoint_now(&mut self, now: Time) -> Option<Wave> {
        if self.is_idle() {
            Some(self.start_wave(now))
        } else {
            None
        }
    }

    fn send_all(&mut self, body: Body) {
        for r in 0..self.size {
            self.transmits.push_back(Transmit {
                to: Peer::Rank(r),
                message: Message::new(self.incarnation, body.clone()),
            });
        }
    }

    fn start_wave(&mut self, now: Time) -> Wave {
        // 2^64 waves do not happen; saturating keeps a corrupt restart value from panicking.
        self.last_wave = self.last_wave.saturating_add(1);
        let wave = self.last_wave;
        self.stats.waves += 1;
        self.phase = Phase::Running {
            wave: Some(Progress {
                wave,
                done: vec![false; self.size as usize],
                left: self.size as usize,
                in_transit: 0,
                deadline: now + self.config.wave_timeout,
            }),
            next: None,
        };
        self.events.push_back(Event::WaveStarted { wave });
        self.send_all(Body::Checkpoint { wave });
        wave
    }

    fn idle_from(&mut self, now: Time) {
        self.phase = Phase::Running {
            wave: None,
            next: self.config.interval.map(|i| now + i),
        };
    }

    fn abort(&mut self, now: Time, reason: AbortReason) {
        if let Phase::Running { wave: Some(p), .. } = &self.phase {
            let wave = p.wave;
            self.stats.aborts += 1;
            self.events.push_back(Event::WaveAborted { wave, reason });
            self.send_all(Body::Abort { wave });
            self.idle_from(now);
        }
    }

    /// The launcher saw rank `rank` fail (and relaunched it, or will): every rank rolls
    /// back to the last committed checkpoint.
    pub fn rank_failed(&mut self, now: Time, rank: Rank) {
        if let Phase::Running { wave: Some(p), .. } = &self.phase {
            self.stats.aborts += 1;
            self.events.push_back(Event::WaveAborted {
                wave: p.wave,
                reason: AbortReason::RankFailed { rank },
            });
        }
        self.rollback(now);
    }

    /// The images of the committed wave turned out unusable (damaged or missing on the
    /// host): roll back to the earlier committed wave `to` (0: the start) instead, as the
    /// next incarnation. Ignored unless `to` is older than the committed wave.
    pub fn fall_back(&mut self, now: Time, to: Wave) {
        if to >= self.committed {
            self.stats.unexpected += 1;
            return;
        }
        self.committed = to;
        self.rollback(now);
    }

    fn rollback(&mut self, now: Time) {
        if matches!(self.phase, Phase::Stopped) {
            return;
        }
        let Some(incarnation) = self.incarnation.checked_add(1) else {
            self.phase = Phase::Stopped;
            self.events.push_back(Event::GaveUp);
            return;
        };
        self.incarnation = incarnation;
        self.stats.rollbacks += 1;
        let wave = self.committed;
        self.phase = Phase::Restoring {
            wave,
            rolled: vec![false; self.size as usize],
            left: self.size as usize,
            deadline: now + self.config.restore_timeout,
        };
        self.events
            .push_back(Event::RollingBack { wave, incarnation });
        self.send_all(Body::Rollback { wave });
    }

    /// Time passed: wave and restore timeouts, the periodic wave.
    pub fn handle_timeout(&mut self, now: Time) {
        match &self.phase {
            Phase::Running { wave: Some(p), .. } if p.deadline <= now => {
                let missing = (0..self.size).filter(|&r| !p.done[r as usize]).collect();
                self.abort(now, AbortReason::Timeout { missing });
            }
            Phase::Running {
                wave: None,
                next: Some(t),
            } if *t <= now => {
                self.start_wave(now);
            }
            Phase::Restoring {
                rolled, deadline, ..
            } if *deadline <= now => {
                let missing = (0..self.size).filter(|&r| !rolled[r as usize]).collect();
                self.events.push_back(Event::RestoreTimedOut { missing });
                self.rollback(now);
            }
            _ => {}
        }
    }

    /// A protocol message from rank `from`, in its encoded form.
    pub fn handle_bytes(&mut self, now: Time, from: Rank, bytes: &[u8]) -> Result<(), DecodeError> {
        let msg = Message::decode(bytes)?;
        self.handle(now, from, msg);
        Ok(())
    }

    /// A protocol message from rank `from`.
    pub fn handle(&mut self, now: Time, from: Rank, msg: Message) {
        if from >= self.size {
            self.stats.unexpected += 1;
            return;
        }
        if msg.incarnation != self.incarnation {
            self.stats.stale += 1;
            return;
        }
        let i = from as usize;
        match (msg.body, &mut self.phase) {
            (Body::Done { wave, in_transit }, Phase::Running { wave: Some(p), .. })
                if p.wave == wave =>
            {
                if !p.done[i] {
                    p.done[i] = true;
                    p.left -= 1;
                    p.in_transit = p.in_transit.saturating_add(in_transit);
                }
                if p.left == 0 {
                    let in_transit = p.in_transit;
                    // The commit point: from here on a failure rolls back to `wave`.
                    self.committed = wave;
                    self.stats.commits += 1;
                    self.events.push_back(Event::Committed { wave, in_transit });
                    self.send_all(Body::Commit { wave });
                    self.idle_from(now);
                }
            }
            (Body::Failed { wave }, Phase::Running { wave: Some(p), .. }) if p.wave == wave => {
                self.abort(now, AbortReason::StorageFailed { rank: from });
            }
            (
                Body::RolledBack { wave },
                Phase::Restoring {
                    wave: target,
                    rolled,
                    left,
                    ..
                },
            ) if *target == wave => {
                if !rolled[i] {
                    rolled[i] = true;
                    *left -= 1;
                }
                if *left == 0 {
                    self.events.push_back(Event::Resumed {
                        wave,
                        incarnation: self.incarnation,
                    });
                    self.send_all(Body::Resume);
                    self.idle_from(now);
                }
            }
            (Body::Done { .. } | Body::Failed { .. } | Body::RolledBack { .. }, _) => {
                self.stats.stale += 1
            }
            _ => self.stats.unexpected += 1,
        }
    }
}
