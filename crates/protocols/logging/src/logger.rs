//! The event logger (MPICH-V2's "event logger"): stores every rank's determinants durably,
//! acknowledges them, and gives a recovering rank its own back.
//!
//! The machine keeps the events in memory; the host makes them durable: it takes each
//! appended batch with [`EventLogger::poll_persist`], writes it (a [`journal`] record per
//! batch, synced), and calls [`EventLogger::stored`], which sends the acknowledgement. An
//! acknowledgement therefore always means "on disk". A logger started again reads the
//! journals back ([`EventLogger::recovered`]) and goes on where it stopped.
//!
//! Events of an earlier incarnation of a rank that arrive after its new incarnation asked
//! for its events are dropped: they were never acknowledged, so in the pessimistic protocol
//! no other rank depends on them, and the new incarnation decides those events afresh.

use std::collections::VecDeque;

use steadfast_proto::Transmit;

use crate::wire::{Event, FromLogger, ToLogger};

#[derive(Debug, Default, Clone)]
struct Stored {
    events: Vec<Event>,
    /// The newest incarnation of the rank that spoke.
    incarnation: u16,
    /// Events `1..=durable` are on disk.
    durable: u64,
    /// The rank's newest complete process image.
    image: Option<Image>,
}

/// A rank's process image as its process reported it (`ToLogger::Checkpointed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Image {
    pub number: u64,
    /// The events the image holds (`1..=clock`): a process restored from it fetches from
    /// `clock + 1`.
    pub clock: u64,
}

/// Counters, for tests and the launcher's report.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct LoggerStats {
    pub events: u64,
    pub batches: u64,
    /// Batches from an incarnation older than the newest known, dropped.
    pub stale: u64,
    /// Batches that start past the end of what is stored (a gap), dropped.
    pub gaps: u64,
    pub fetches: u64,
    /// Process images reported, and reports refused (stale or naming unstored events).
    pub images: u64,
    pub images_refused: u64,
}

/// The event logger of one job.
#[derive(Debug)]
pub struct EventLogger {
    ranks: Vec<Stored>,
    /// Appended batches the host has not persisted yet: (rank, first event number, count).
    persist: VecDeque<(u32, u64, u64)>,
    out: VecDeque<Transmit<FromLogger>>,
    pub stats: LoggerStats,
}

impl EventLogger {
    /// A logger for `size` ranks, with nothing stored.
    pub fn new(size: u32) -> EventLogger {
        EventLogger { ranks: vec![Stored::default(); size as usize], persist: VecDeque::new(), out: VecDeque::new(), stats: LoggerStats::default() }
    }

    /// A logger started again from what its journals held (`per_rank[r]`: rank `r`'s events
    /// from 1, all durable).
    pub fn recovered(per_rank: Vec<Vec<Event>>) -> EventLogger {
        let mut l = EventLogger::new(per_rank.len() as u32);
        for (s, events) in l.ranks.iter_mut().zip(per_rank) {
            s.durable = events.len() as u64;
            s.events = events;
        }
        l
    }

    /// A logger started again: rank `rank`'s newest image as it was recorded.
    pub fn restore_image(&mut self, rank: u32, image: Image) {
        if let Some(s) = self.ranks.get_mut(rank as usize) {
            s.image = Some(image);
        }
    }

    /// Rank `rank`'s newest complete process image, if any.
    pub fn image(&self, rank: u32) -> Option<Image> {
        self.ranks.get(rank as usize).and_then(|s| s.image)
    }

    /// Events of rank `rank` stored so far (durable or not).
    pub fn events(&self, rank: u32) -> &[Event] {
        self.ranks.get(rank as usize).map_or(&[], |s| &s.events)
    }

    /// How many of each rank's events are durable.
    pub fn stable(&self) -> Vec<u64> {
        self.ranks.iter().map(|s| s.durable).collect()
    }

    /// A message from rank `rank`. Malformed content (a rank outside the job) is ignored.
    pub fn handle(&mut self, rank: u32, msg: ToLogger) {
        let Some(s) = self.ranks.get_mut(rank as usize) else { return };
        match msg {
            ToLogger::Log { incarnation, first, events } => {
                if incarnation < s.incarnation {
                    self.stats.stale += 1;
                    return;
                }
                s.incarnation = incarnation;
                let have = s.events.len() as u64;
                if first > have + 1 {
                    self.stats.gaps += 1;
                    return;
                }
                // A batch sent again (or overlapping what a recovered rank re-sent) adds only
                // what is new.
                let skip = (have + 1 - first) as usize;
                if skip >= events.len() {
                    // Nothing new: acknowledge what is durable, so a sender that lost an
                    // acknowledgement learns it.
                    if s.durable >= first + events.len() as u64 - 1 {
                        let stable = self.stable();
                        let upto = self.ranks[rank as usize].durable;
                        self.out.push_back(Transmit { to: rank, message: FromLogger::Ack { upto, stable } });
                    }
                    return;
                }
                let new = events.len() - skip;
                s.events.extend(events.into_iter().skip(skip));
                self.stats.events += new as u64;
                self.stats.batches += 1;
                self.persist.push_back((rank, have + 1, new as u64));
            }
            ToLogger::Fetch { incarnation, from } => {
                self.stats.fetches += 1;
                if incarnation > s.incarnation {
                    s.incarnation = incarnation;
                }
                // A new incarnation sees only durable events: anything appended but not yet
                // on disk is on its way there, and the answer waits for nothing.
                let start = (from - 1).min(s.events.len() as u64) as usize;
                let events = s.events[start..].to_vec();
                self.out.push_back(Transmit { to: rank, message: FromLogger::Events { first: start as u64 + 1, events } });
            }
            ToLogger::Checkpointed { incarnation, number, clock } => {
                // An image is usable only if every event it holds is stored (a restored
                // process fetches the ones after it) and it is newer than the one known; a
                // report of a process that was replaced meanwhile is not trusted.
                let newer = s.image.is_none_or(|i| number > i.number);
                if incarnation < s.incarnation || clock > s.durable || !newer {
                    self.stats.images_refused += 1;
                    return;
                }
                s.incarnation = incarnation;
                s.image = Some(Image { number, clock });
                self.stats.images += 1;
                self.out.push_back(Transmit { to: rank, message: FromLogger::ImageKept { number } });
            }
            // For the checkpoint scheduler, not stored.
            ToLogger::LogSizes { .. } => {}
        }
    }

    /// The next batch to make durable: (rank, first event number, events).
    pub fn poll_persist(&mut self) -> Option<(u32, u64, &[Event])> {
        let (rank, first, n) = self.persist.pop_front()?;
        let s = &self.ranks[rank as usize];
        let lo = (first - 1) as usize;
        Some((rank, first, &s.events[lo..lo + n as usize]))
    }

    /// The host made rank `rank`'s events up to `upto` durable: acknowledge them.
    pub fn stored(&mut self, rank: u32, upto: u64) {
        let Some(s) = self.ranks.get_mut(rank as usize) else { return };
        s.durable = s.durable.max(upto.min(s.events.len() as u64));
        let upto = s.durable;
        let stable = self.stable();
        self.out.push_back(Transmit { to: rank, message: FromLogger::Ack { upto, stable } });
    }

    /// The next message to send.
    pub fn poll_transmit(&mut self) -> Option<Transmit<FromLogger>> {
        self.out.pop_front()
    }
}

/// The on-disk form of a rank's events: one record per batch, `length (u32 LE) | batch`,
/// where a batch is an encoded [`ToLogger::Log`]. A torn or damaged last record (a crash
/// while writing) ends the journal; everything before it counts.
pub mod journal {
    use super::*;

    /// The record appending `events` numbered from `first`.
    pub fn record(first: u64, events: &[Event]) -> Vec<u8> {
        let body = ToLogger::Log { incarnation: 0, first, events: events.to_vec() }.encode();
        let mut out = Vec::with_capacity(4 + body.len());
        out.extend_from_slice(&(body.len() as u32).to_le_bytes());
        out.extend_from_slice(&body);
        out
    }

    /// The events a journal holds, from 1, contiguous.
    pub fn read(bytes: &[u8]) -> Vec<Event> {
        let mut events = Vec::new();
        let mut at = 0usize;
        while let Some(len) = bytes.get(at..at + 4).and_then(|b| <[u8; 4]>::try_from(b).ok()).map(u32::from_le_bytes) {
            let Some(body) = bytes.get(at + 4..at + 4 + len as usize) else { break };
            let Ok(ToLogger::Log { first, events: batch, .. }) = ToLogger::decode(body) else { break };
            let have = events.len() as u64;
            if first > have + 1 {
                break;
            }
            events.extend(batch.into_iter().skip((have + 1 - first) as usize));
            at += 4 + len as usize;
        }
        events
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(seq: u64) -> Event {
        Event::Match { from: 1, seq }
    }

    fn drain(l: &mut EventLogger) -> Vec<Transmit<FromLogger>> {
        while let Some((rank, first, ev)) = l.poll_persist() {
            let upto = first + ev.len() as u64 - 1;
            l.stored(rank, upto);
        }
        std::iter::from_fn(|| l.poll_transmit()).collect()
    }

    #[test]
    fn keeps_the_newest_image_whose_events_are_stored() {
        let mut l = EventLogger::new(2);
        l.handle(1, ToLogger::Log { incarnation: 0, first: 1, events: vec![m(1), m(2)] });
        // Event 2 is not on disk yet: an image holding it cannot be restored from.
        l.handle(1, ToLogger::Checkpointed { incarnation: 0, number: 1, clock: 2 });
        assert_eq!(l.image(1), None);
        drain(&mut l);
        l.handle(1, ToLogger::Checkpointed { incarnation: 0, number: 1, clock: 2 });
        assert_eq!(l.image(1), Some(Image { number: 1, clock: 2 }));
        // An older number, or a report of a process that was replaced, changes nothing.
        l.handle(1, ToLogger::Checkpointed { incarnation: 0, number: 1, clock: 1 });
        l.handle(1, ToLogger::Fetch { incarnation: 1, from: 3 });
        l.handle(1, ToLogger::Checkpointed { incarnation: 0, number: 2, clock: 2 });
        assert_eq!(l.image(1).map(|i| i.number), Some(1));
        assert_eq!(l.stats.images_refused, 3);
        l.handle(1, ToLogger::Checkpointed { incarnation: 1, number: 2, clock: 2 });
        assert_eq!(l.image(1), Some(Image { number: 2, clock: 2 }));
        assert_eq!(l.image(0), None);
        // Each accepted image, and only those, is confirmed to its rank.
        let kept: Vec<_> = std::iter::from_fn(|| l.poll_transmit()).filter(|t| matches!(t.message, FromLogger::ImageKept { .. })).collect();
        assert_eq!(kept, vec![Transmit { to: 1, message: FromLogger::ImageKept { number: 1 } }, Transmit { to: 1, message: FromLogger::ImageKept { number: 2 } }]);
    }

    #[test]
    fn acknowledges_only_what_is_durable_and_answers_fetches() {
        let mut l = EventLogger::new(2);
        l.handle(0, ToLogger::Log { incarnation: 0, first: 1, events: vec![m(1), m(2)] });
        assert!(l.poll_transmit().is_none(), "no acknowledgement before the host stored it");
        let out = drain(&mut l);
        assert_eq!(out, vec![Transmit { to: 0, message: FromLogger::Ack { upto: 2, stable: vec![2, 0] } }]);
        // Overlap: only the new event is appended.
        l.handle(0, ToLogger::Log { incarnation: 0, first: 2, events: vec![m(2), m(3)] });
        drain(&mut l);
        assert_eq!(l.events(0), &[m(1), m(2), m(3)]);
        // A gap is refused.
        l.handle(0, ToLogger::Log { incarnation: 0, first: 9, events: vec![m(9)] });
        assert_eq!(l.stats.gaps, 1);
        l.handle(0, ToLogger::Fetch { incarnation: 1, from: 2 });
        assert_eq!(l.poll_transmit().map(|t| t.message), Some(FromLogger::Events { first: 2, events: vec![m(2), m(3)] }));
        // The old incarnation's late batch is dropped.
        l.handle(0, ToLogger::Log { incarnation: 0, first: 4, events: vec![m(4)] });
        assert_eq!(l.stats.stale, 1);
        assert_eq!(l.events(0).len(), 3);
    }

    #[test]
    fn journal_survives_a_torn_last_record() {
        let mut j = journal::record(1, &[m(1), m(2)]);
        j.extend(journal::record(3, &[m(3)]));
        let full = journal::read(&j);
        assert_eq!(full, vec![m(1), m(2), m(3)]);
        for cut in 0..j.len() {
            let got = journal::read(&j[..cut]);
            assert!(full.starts_with(&got));
        }
        let l = EventLogger::recovered(vec![full, vec![]]);
        assert_eq!(l.stable(), vec![3, 0]);
    }
}
