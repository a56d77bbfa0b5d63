//! The per-rank side: the cut, markers, in-transit recording, the report, and the restore.

use std::collections::VecDeque;

use crate::wire::{Body, ChannelRecord, DecodeError, Message, Recorded};
use crate::{Ident, Peer, Rank, Transmit, Wave, UNNUMBERED};

/// What the engine must do, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The cut of wave `wave` is now: take the process image (fork) **before** delivering or
    /// sending any further application message, store it (asynchronously is fine), and call
    /// [`RankMachine::image_stored`] when it is on stable storage. The markers of the wave
    /// are already queued in `poll_transmit` and must leave before the next application
    /// message to the same rank.
    TakeImage { wave: Wave },
    /// Every incoming channel of `record.wave` is flushed: store the record next to the
    /// image, then call [`RankMachine::record_stored`].
    StoreRecord { record: ChannelRecord },
    /// Wave `wave` was aborted: delete its image and record (stored or still being written).
    Discard { wave: Wave },
    /// Global checkpoint `wave` is committed: images and records of older waves may be
    /// deleted. A host that falls back to the previous committed wave when an image of
    /// `wave` turns out damaged ([`crate::Scheduler::fall_back`]) keeps that one until the
    /// next commit.
    Committed { wave: Wave },
    /// Roll back: stop the application, abandon writes in progress, delete the images and
    /// records of waves after `wave` (none of them will commit; older committed ones may stay
    /// as the fallback until the next commit), restore the image of `wave` (wave 0: start
    /// from the beginning), load its record ([`ChannelRecord::initial`] for wave 0), and
    /// call [`RankMachine::restored`].
    Restore { wave: Wave, incarnation: u16 },
    /// Every rank restored: let the application go on.
    Resume { incarnation: u16 },
}

/// What to do with an arriving application message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Deliver it (it may also have been recorded as in transit).
    Deliver,
    /// Drop it: it belongs to an incarnation rolled back, or this rank is not restored yet.
    Drop,
}

/// Why [`RankMachine::restored`] refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RestoreError {
    /// No rollback to this wave is in progress (stale or duplicate call).
    #[error("not restoring wave {0}")]
    NotRestoring(Wave),
    /// The record is not this rank's record of this wave, or is inconsistent.
    #[error("channel record does not fit: {0}")]
    BadRecord(String),
}

/// What the engine needs after restoring an image: the messages to re-deliver (in this
/// order, before any message that arrives from now on) and where the sequence numbers of
/// every channel resume.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Replay {
    pub wave: Wave,
    /// The incarnation this rank now is.
    pub incarnation: u16,
    /// Messages that were in transit at the cut.
    pub redeliver: Vec<Recorded>,
    /// Sequence number of the next message to send to each rank.
    pub next_send: Vec<u64>,
    /// Sequence number of the next message expected from each rank.
    pub next_receive: Vec<u64>,
}

/// Counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Local checkpoints started (cuts taken).
    pub cuts: u64,
    /// Application messages recorded in transit.
    pub recorded: u64,
    /// Messages and markers dropped as belonging to an older incarnation.
    pub stale: u64,
    /// Markers of a wave already finished or aborted here, ignored.
    pub late_markers: u64,
    /// Application messages dropped because the rank was not restored yet.
    pub not_live: u64,
    /// Messages that make no sense here (wrong direction, newer incarnation, bad rank).
    pub unexpected: u64,
    /// Sequence numbers that did not follow on (the transport broke FIFO order).
    pub fifo_violations: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Relaunched: knows nothing until the scheduler's ROLLBACK.
    Waiting,
    /// Restoring `wave` as `incarnation`.
    Restoring { wave: Wave, incarnation: u16 },
    /// Running (or restored and waiting for RESUME).
    Live { resumed: bool },
}

/// The local checkpoint of one wave in progress.
#[derive(Debug)]
struct Cut {
    wave: Wave,
    sent: Vec<u64>,
    received: Vec<u64>,
    /// Incoming channel closed by its marker (own entry: true).
    closed: Vec<bool>,
    open: usize,
    in_transit: Vec<Recorded>,
    recorded: u64,
    image_stored: bool,
    record_stored: bool,
    record_emitted: bool,
    reported: bool,
}

/// One rank's side of the protocol.
#[derive(Debug)]
pub struct RankMachine {
    rank: Rank,
    size: u32,
    incarnation: u16,
    phase: Phase,
    /// Last sequence number sent to / received from each rank.
    sent: Vec<u64>,
    received: Vec<u64>,
    /// Highest wave started, finished or heard aborted/committed here: markers and
    /// CHECKPOINTs of waves up to it are late.
    last_wave: Wave,
    committed: Wave,
    cut: Option<Cut>,
    transmits: VecDeque<Transmit>,
    events: VecDeque<Event>,
    stats: Stats,
}

impl RankMachine {
    /// Rank `rank` of a job of `size` ranks at its first start (incarnation 0, running).
    ///
    /// # Panics
    /// If `rank >= size` (the engine checked both when it read them).
    pub fn new(rank: Rank, size: u32) -> RankMachine {
        assert!(rank < size, "rank {rank} outside a job of {size}");
        RankMachine {
            rank,
            size,
            incarnation: 0,
            phase: Phase::Live { resumed: true },
            sent: vec![0; size as usize],
            received: vec![0; size as usize],
            last_wave: 0,
            committed: 0,
            cut: None,
            transmits: VecDeque::new(),
            events: VecDeque::new(),
            stats: Stats::default(),
        }
    }

    /// Rank `rank` started again after a failure (or for a whole-job restart): it drops
    /// everything until the scheduler's ROLLBACK tells it which checkpoint to restore.
    pub fn relaunched(rank: Rank, size: u32) -> RankMachine {
        let mut m = RankMachine::new(rank, size);
        m.phase = Phase::Waiting;
        m
    }

    pub fn rank(&self) -> Rank {
        self.rank
    }

    /// The job incarnation this rank is in; the door stamps it on every message it sends.
    pub fn incarnation(&self) -> u16 {
        self.incarnation
    }

    /// Restored (or never rolled back) and told to run: the application may go on.
    pub fn is_running(&self) -> bool {
        self.phase == Phase::Live { resumed: true }
    }

    /// Restored or running: application messages are accepted.
    pub fn is_live(&self) -> bool {
        matches!(self.phase, Phase::Live { .. })
    }

    /// The wave being restored, if a rollback is in progress here.
    pub fn restoring(&self) -> Option<Wave> {
        match self.phase {
            Phase::Restoring { wave, .. } => Some(wave),
            _ => None,
        }
    }

    /// The wave whose local checkpoint is in progress (cut taken, not yet resolved).
    pub fn current_wave(&self) -> Option<Wave> {
        self.cut.as_ref().map(|c| c.wave)
    }

    /// Last committed wave this rank knows of.
    pub fn committed(&self) -> Wave {
        self.committed
    }

    /// Last sequence number sent to each rank.
    pub fn sent_counts(&self) -> &[u64] {
        &self.sent
    }

    /// Last sequence number received from each rank.
    pub fn received_counts(&self) -> &[u64] {
        &self.received
    }

    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// Whether a message waits in [`RankMachine::poll_transmit`].
    pub fn has_transmit(&self) -> bool {
        !self.transmits.is_empty()
    }

    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.transmits.pop_front()
    }

    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// A protocol message in its encoded form.
    pub fn handle_bytes(&mut self, from: Peer, bytes: &[u8]) -> Result<(), DecodeError> {
        let msg = Message::decode(bytes)?;
        self.handle(from, msg);
        Ok(())
    }

    /// A protocol message from the scheduler or another rank.
    pub fn handle(&mut self, from: Peer, msg: Message) {
        match from {
            Peer::Scheduler => self.on_scheduler(msg),
            Peer::Rank(j) => self.on_rank(j, msg),
        }
    }

    fn on_scheduler(&mut self, msg: Message) {
        if let Body::Rollback { wave } = msg.body {
            // Compared with the incarnation a restore in progress is heading for, so a
            // repeated ROLLBACK does not start the same restore again.
            let newest = match self.phase {
                Phase::Restoring { incarnation, .. } => incarnation,
                _ => self.incarnation,
            };
            let newer = self.phase == Phase::Waiting || msg.incarnation > newest;
            if newer {
                // Whatever wave was in progress dies with this execution; the engine keeps
                // only the images of `wave`.
                self.cut = None;
                self.phase = Phase::Restoring {
                    wave,
                    incarnation: msg.incarnation,
                };
                self.events.push_back(Event::Restore {
                    wave,
                    incarnation: msg.incarnation,
                });
            } else {
                self.stats.stale += 1;
            }
            return;
        }
        if !self.is_live() || msg.incarnation != self.incarnation {
            if msg.incarnation < self.incarnation || !self.is_live() {
                self.stats.stale += 1;
            } else {
                self.stats.unexpected += 1;
            }
            return;
        }
        match msg.body {
            Body::Checkpoint { wave } => {
                if wave > self.last_wave {
                    self.take_cut(wave);
                }
            }
            Body::Commit { wave } => {
                self.last_wave = self.last_wave.max(wave);
                if wave > self.committed {
                    self.committed = wave;
                    self.events.push_back(Event::Committed { wave });
                }
                if self.cut.as_ref().is_some_and(|c| c.wave <= wave) {
                    self.cut = None;
                }
            }
            Body::Abort { wave } => {
                self.last_wave = self.last_wave.max(wave);
                if self.cut.as_ref().is_some_and(|c| c.wave == wave) {
                    self.cut = None;
                }
                self.events.push_back(Event::Discard { wave });
            }
            Body::Resume => {
                if self.phase == (Phase::Live { resumed: false }) {
                    self.phase = Phase::Live { resumed: true };
                    self.events.push_back(Event::Resume {
                        incarnation: self.incarnation,
                    });
                }
            }
            _ => self.stats.unexpected += 1,
        }
    }

    fn on_rank(&mut self, j: Rank, msg: Message) {
        let Body::Marker { wave, sent_upto } = msg.body else {
            self.stats.unexpected += 1;
            return;
        };
        if j >= self.size || j == self.rank {
            self.stats.unexpected += 1;
            return;
        }
        if !self.is_live() || msg.incarnation < self.incarnation {
            self.stats.stale += 1;
            return;
        }
        if msg.incarnation > self.incarnation {
            self.stats.unexpected += 1;
            return;
        }
        let current = self.cut.as_ref().map(|c| c.wave);
        if current != Some(wave) {
            if wave <= self.last_wave {
                self.stats.late_markers += 1;
                return;
            }
            // The first news of wave `wave` here: the cut is taken before the marker's
            // channel is closed, so nothing that follows the marker is before the cut.
            self.take_cut(wave);
        }
        self.close_channel(j, sent_upto);
    }

    fn take_cut(&mut self, wave: Wave) {
        // An unfinished earlier wave was superseded: the scheduler started `wave` only
        // after ending it, and its COMMIT or ABORT is on the way (FIFO from the scheduler).
        self.last_wave = wave;
        self.stats.cuts += 1;
        let n = self.size as usize;
        let me = self.rank as usize;
        let mut closed = vec![false; n];
        closed[me] = true;
        self.cut = Some(Cut {
            wave,
            sent: self.sent.clone(),
            received: self.received.clone(),
            closed,
            open: n - 1,
            in_transit: Vec::new(),
            recorded: 0,
            image_stored: false,
            record_stored: false,
            record_emitted: false,
            reported: false,
        });
        self.events.push_back(Event::TakeImage { wave });
        for j in 0..self.size {
            if j != self.rank {
                self.transmits.push_back(Transmit {
                    to: Peer::Rank(j),
                    message: Message::new(
                        self.incarnation,
                        Body::Marker {
                            wave,
                            sent_upto: self.sent[j as usize],
                        },
                    ),
                });
            }
        }
        self.maybe_emit_record();
    }

    fn close_channel(&mut self, j: Rank, sent_upto: u64) {
        let received = self.received[j as usize];
        let Some(cut) = self.cut.as_mut() else { return };
        if cut.closed[j as usize] {
            self.stats.unexpected += 1;
            return;
        }
        if received != sent_upto {
            // On a FIFO channel every message sent before the marker arrived before it.
            self.stats.fifo_violations += 1;
        }
        cut.closed[j as usize] = true;
        cut.open -= 1;
        self.maybe_emit_record();
    }

    fn maybe_emit_record(&mut self) {
        let Some(cut) = self.cut.as_mut() else { return };
        if cut.open > 0 || cut.record_emitted {
            return;
        }
        cut.record_emitted = true;
        let record = ChannelRecord {
            rank: self.rank,
            wave: cut.wave,
            sent: cut.sent.clone(),
            received: cut.received.clone(),
            in_transit: std::mem::take(&mut cut.in_transit),
        };
        self.events.push_back(Event::StoreRecord { record });
    }

    fn maybe_report(&mut self) {
        let Some(cut) = self.cut.as_mut() else { return };
        if cut.reported || !cut.image_stored || !cut.record_stored {
            return;
        }
        cut.reported = true;
        self.transmits.push_back(Transmit {
            to: Peer::Scheduler,
            message: Message::new(
                self.incarnation,
                Body::Done {
                    wave: cut.wave,
                    in_transit: cut.recorded,
                },
            ),
        });
    }

    fn storage_failed(&mut self, wave: Wave) {
        if let Some(cut) = self.cut.as_mut() {
            if cut.wave == wave && !cut.reported {
                cut.reported = true;
                self.transmits.push_back(Transmit {
                    to: Peer::Scheduler,
                    message: Message::new(self.incarnation, Body::Failed { wave }),
                });
            }
        }
    }

    /// The image of `wave` is on stable storage (`ok`), or could not be stored.
    pub fn image_stored(&mut self, wave: Wave, ok: bool) {
        if !ok {
            return self.storage_failed(wave);
        }
        if let Some(cut) = self.cut.as_mut().filter(|c| c.wave == wave) {
            cut.image_stored = true;
            self.maybe_report();
        }
    }

    /// The channel record of `wave` is on stable storage (`ok`), or could not be stored.
    pub fn record_stored(&mut self, wave: Wave, ok: bool) {
        if !ok {
            return self.storage_failed(wave);
        }
        if let Some(cut) = self
            .cut
            .as_mut()
            .filter(|c| c.wave == wave && c.record_emitted)
        {
            cut.record_stored = true;
            self.maybe_report();
        }
    }

    /// The engine sent application message `ident` to rank `to` (the door's `sent` hook).
    /// A packet without a sequence number of its own ([`UNNUMBERED`]: the CTS, DATA or FIN
    /// of a rendezvous) is not counted.
    pub fn sent(&mut self, to: Rank, ident: Ident) {
        if !self.is_live() || to >= self.size || to == self.rank {
            self.stats.unexpected += 1;
            return;
        }
        if ident.seq == UNNUMBERED {
            return;
        }
        let last = &mut self.sent[to as usize];
        if last.checked_add(1) != Some(ident.seq) {
            self.stats.fifo_violations += 1;
        }
        *last = ident.seq;
    }

    /// An application message arrived (the door admitted it): whether to deliver it. A
    /// message that arrives after this rank's cut and before its sender's marker is
    /// recorded (its bytes copied) as in transit. Packets that carry no sequence number of
    /// their own (the CTS, DATA and FIN of a rendezvous: `from.seq` = [`UNNUMBERED`]) are
    /// fed here too, so that a rendezvous cut in the middle is recorded and replayed like
    /// any other traffic of the channel.
    pub fn arrived(&mut self, from: Ident, bytes: &[u8]) -> Verdict {
        if !self.is_live() {
            self.stats.not_live += 1;
            return Verdict::Drop;
        }
        let w = from.world as usize;
        if from.world >= self.size || from.world == self.rank {
            self.stats.unexpected += 1;
            return Verdict::Drop;
        }
        if from.incarnation != self.incarnation {
            if from.incarnation < self.incarnation {
                self.stats.stale += 1;
            } else {
                self.stats.unexpected += 1;
            }
            return Verdict::Drop;
        }
        if from.seq != UNNUMBERED {
            if self.received[w].checked_add(1) != Some(from.seq) {
                self.stats.fifo_violations += 1;
            }
            self.received[w] = from.seq;
        }
        if let Some(cut) = self.cut.as_mut() {
            if !cut.closed[w] {
                cut.in_transit.push(Recorded {
                    from,
                    bytes: bytes.to_vec(),
                });
                cut.recorded += 1;
                self.stats.recorded += 1;
            }
        }
        Verdict::Deliver
    }

    /// The engine restored the image of `wave` and loaded its channel record: this rank
    /// becomes the rollback's incarnation, reports to the scheduler, and returns what to
    /// re-deliver and where sequence numbers resume. The application waits for
    /// [`Event::Resume`].
    pub fn restored(&mut self, wave: Wave, record: ChannelRecord) -> Result<Replay, RestoreError> {
        let Phase::Restoring {
            wave: expected,
            incarnation,
        } = self.phase
        else {
            return Err(RestoreError::NotRestoring(wave));
        };
        if expected != wave {
            return Err(RestoreError::NotRestoring(wave));
        }
        if record.rank != self.rank || record.size() != self.size || record.wave != wave {
            return Err(RestoreError::BadRecord(format!(
                "record of rank {} wave {} in a job of {}, expected rank {} wave {wave} of {}",
                record.rank,
                record.wave,
                record.size(),
                self.rank,
                self.size
            )));
        }
        record
            .validate()
            .map_err(|e| RestoreError::BadRecord(e.to_string()))?;
        self.sent = record.sent.clone();
        self.received = record.received_after_replay();
        self.incarnation = incarnation;
        self.phase = Phase::Live { resumed: false };
        self.cut = None;
        self.last_wave = self.last_wave.max(wave);
        self.committed = wave;
        self.transmits.push_back(Transmit {
            to: Peer::Scheduler,
            message: Message::new(incarnation, Body::RolledBack { wave }),
        });
        Ok(Replay {
            wave,
            incarnation,
            next_send: self.sent.iter().map(|s| s.saturating_add(1)).collect(),
            next_receive: self.received.iter().map(|r| r.saturating_add(1)).collect(),
            redeliver: record.in_transit,
        })
    }
}
