//! The engine's door to the paths: every packet it sends gets its header here and leaves
//! through [`transmit`]; every packet it receives is checked and admitted by
//! [`Door::admit`] before anything else looks at it.
//!
//! The door also gives messages their identities and records what a recovery protocol
//! needs to know about receptions:
//!
//! - **Identity**: every message (an `Eager` packet or a rendezvous `Rts`, point-to-point or
//!   collective) is named by (sender world rank, sender incarnation, per-destination send
//!   sequence number, context). The world rank is the path's peer (every path names the
//!   sender of each packet); the incarnation is in every header; the sequence number counts
//!   the messages this incarnation sent to that destination, from 1.
//! - **Incarnations**: a world rank that died may be started again as incarnation k+1.
//!   Packets from an older incarnation than the newest known are counted and dropped; a
//!   packet from a newer one announces the restart ([`Admitted::Rejoined`]).
//! - **Determinants**: every reception (a message matched to a receive) advances this
//!   process's reception clock and is described by a [`Determinant`]; completions of the
//!   any/some/test family and of probes are [`Completion`]s. Both are reported to one
//!   [`Interpose`] hook, the place where logging protocols and checkpoint markers plug in.
//!   Without a hook the cost is one branch on an `Option`.

use steadfast_paths::{Path, PathError, RawHeader, SendStatus};

use crate::wire::{Header, Kind};

/// Who sent a message, and which of their messages to us it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ident {
    /// Sender's world rank.
    pub world: u32,
    /// Sender's incarnation (0 for the first start).
    pub incarnation: u16,
    /// Sender's sequence number of this message among those it sent to this process (from 1).
    pub seq: u64,
}

/// One reception, as a message-logging protocol records it: which message (sender and its
/// sequence number) was delivered to which receive, at which point of this process's
/// reception clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Determinant {
    pub from: Ident,
    /// Context id the message was matched on.
    pub ctx: u32,
    /// Source (communicator rank) and tag the message carried.
    pub src: i32,
    pub tag: i32,
    /// This process's reception clock after the reception (1 for the first).
    pub clock: u64,
}

/// Which kind of call made a nondeterministic completion choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompletionCall {
    Test,
    Testany,
    Testsome,
    Testall,
    Waitany,
    Waitsome,
    Iprobe,
    Improbe,
}

impl CompletionCall {
    /// The call's number in a logged determinant.
    pub fn code(self) -> u8 {
        self as u8
    }
}

/// A completion decision: `call` reported `indices` (empty: nothing yet) after
/// `failed_before` unsuccessful calls of the test/probe family since the previous
/// successful one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    pub call: CompletionCall,
    pub indices: Vec<usize>,
    pub failed_before: u64,
    /// The reception clock at the decision.
    pub clock: u64,
    /// A successful probe: the message it saw.
    pub probed: Option<Ident>,
}

/// The interposition hook: a recovery protocol sees every message sent and every
/// nondeterministic decision made, in the order they happen in this process.
pub trait Interpose: Send {
    /// A message (`Eager` or `Rts`) to world rank `to` was given its identity (this
    /// process's rank and incarnation, and the sequence number) and leaves.
    fn sent(&mut self, _to: u32, _ident: &Ident, _hdr: &Header, _payload: &[u8]) {}
    /// A packet from world rank `from` was admitted (checked, current incarnation) and is
    /// about to be acted on: the moment it becomes part of this process's state, which a
    /// checkpoint protocol records. Returning false consumes it here (the protocol's own
    /// packets, or one it holds back).
    fn arrived(&mut self, _from: u32, _hdr: &Header, _payload: &[u8]) -> bool {
        true
    }
    /// A message was matched to a receive.
    fn matched(&mut self, _det: &Determinant) {}
    /// A test/wait/probe call of the any/some family chose what to report.
    fn completed(&mut self, _c: &Completion) {}
    /// World rank `world` came back as `incarnation`.
    fn rejoined(&mut self, _world: u32, _incarnation: u16) {}
    /// The hook itself, for its owner to reach its state through [`Door::hook_mut`].
    fn as_any(&mut self) -> Option<&mut dyn std::any::Any> {
        None
    }
    /// As [`Interpose::as_any`], read-only ([`Door::hook_ref`]).
    fn as_any_ref(&self) -> Option<&dyn std::any::Any> {
        None
    }
}

/// What [`Door::admit`] made of an incoming packet.
pub enum Admitted {
    /// A packet to act on.
    Packet(Header),
    /// The first packet of a new incarnation of the sender: act on the restart, then on it.
    Rejoined(Header),
    /// Dropped (malformed, or from an earlier incarnation); counted.
    Dropped,
}

/// Per-process message bookkeeping of the door.
pub struct Door {
    /// This process's world rank.
    rank: u32,
    /// This process's incarnation.
    pub incarnation: u16,
    /// Last sequence number sent to each world rank.
    sent: Vec<u64>,
    /// Newest known incarnation of each world rank.
    peer_incarnation: Vec<u16>,
    /// Receptions so far (the reception clock).
    clock: u64,
    /// Unsuccessful test/probe calls since the last successful one.
    failed_tests: u64,
    /// Packets dropped as coming from an earlier incarnation.
    pub stale: u64,
    /// Packets dropped as malformed (unknown kind, bad length).
    pub malformed: u64,
    hook: Option<Box<dyn Interpose>>,
}

impl Door {
    /// The door of incarnation `incarnation` of world rank `rank` in a job of `size` ranks.
    pub fn new(rank: u32, incarnation: u16, size: u32) -> Door {
        let mut peer_incarnation = vec![0; size as usize];
        if let Some(me) = peer_incarnation.get_mut(rank as usize) {
            *me = incarnation;
        }
        Door {
            rank,
            incarnation,
            sent: vec![0; size as usize],
            peer_incarnation,
            clock: 0,
            failed_tests: 0,
            stale: 0,
            malformed: 0,
            hook: None,
        }
    }

    /// Room for `n` peers: processes of other worlds get indices past the world's.
    pub fn grow(&mut self, n: usize) {
        if self.sent.len() < n {
            self.sent.resize(n, 0);
            self.peer_incarnation.resize(n, 0);
        }
    }

    /// Plug a recovery protocol in (replaces any earlier one).
    pub fn set_hook(&mut self, hook: Option<Box<dyn Interpose>>) {
        self.hook = hook;
    }

    /// A control packet's header (everything but `Eager` and `Rts`).
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub fn control(&self, kind: Kind, ctx: u32, src: i32, tag: i32, len: u64, a: u64, b: u64) -> RawHeader {
        Header { kind, flags: 0, incarnation: self.incarnation, ctx, src, tag, len, a, b }.encode()
    }

    /// The sequence number the next message to `to` will carry.
    #[inline]
    pub fn next_seq(&self, to: u32) -> u64 {
        self.sent[to as usize] + 1
    }

    /// A message's header for world rank `to`, with the next sequence number: `kind` is
    /// `Eager` or `Rts`. Call [`Door::commit`] once the message is on its way.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub fn message(&self, to: u32, kind: Kind, flags: u8, ctx: u32, src: i32, tag: i32, len: u64, b: u64) -> Header {
        Header { kind, flags, incarnation: self.incarnation, ctx, src, tag, len, a: self.next_seq(to), b }
    }

    /// The message with header `hdr` to `to` leaves: its sequence number is used.
    // Inlined, and the hook's call kept out of line with its own copy of the header: a
    // header whose address escapes is built in memory with 4-byte stores, and encoding it
    // read it back with 8-byte loads, a store-forwarding failure on every send.
    #[inline(always)]
    pub fn commit(&mut self, to: u32, hdr: &Header, payload: &[u8]) {
        self.sent[to as usize] = hdr.a;
        if self.hook.is_some() {
            self.commit_to_hook(to, *hdr, payload);
        }
    }

    #[cold]
    #[inline(never)]
    fn commit_to_hook(&mut self, to: u32, hdr: Header, payload: &[u8]) {
        if let Some(hook) = self.hook.as_mut() {
            let ident = Ident { world: self.rank, incarnation: self.incarnation, seq: hdr.a };
            hook.sent(to, &ident, &hdr, payload);
        }
    }

    /// Check an incoming packet from world rank `peer`.
    #[inline]
    pub fn admit(&mut self, peer: u32, raw: &RawHeader) -> Admitted {
        let Some(h) = Header::decode(raw) else {
            self.malformed += 1;
            return Admitted::Dropped;
        };
        let Some(known) = self.peer_incarnation.get_mut(peer as usize) else {
            self.malformed += 1;
            return Admitted::Dropped;
        };
        if h.incarnation == *known {
            Admitted::Packet(h)
        } else if h.incarnation < *known {
            self.stale += 1;
            Admitted::Dropped
        } else {
            Admitted::Rejoined(h)
        }
    }

    /// Whether any rank of the job (this one included) was restarted.
    pub fn any_restart(&self) -> bool {
        self.incarnation > 0 || self.peer_incarnation.iter().any(|&i| i > 0)
    }

    /// Whether a recovery protocol is plugged in.
    #[inline]
    /// The hook, if it is a `T` (and offers itself, see [`Interpose::as_any`]).
    pub fn hook_mut<T: 'static>(&mut self) -> Option<&mut T> {
        self.hook.as_mut()?.as_any()?.downcast_mut::<T>()
    }

    /// The hook, if it is a `T` (and offers itself, see [`Interpose::as_any_ref`]).
    pub fn hook_ref<T: 'static>(&self) -> Option<&T> {
        self.hook.as_ref()?.as_any_ref()?.downcast_ref::<T>()
    }

    pub fn has_hook(&self) -> bool {
        self.hook.is_some()
    }

    /// The hook's say on an admitted packet (true without a hook): see
    /// [`Interpose::arrived`].
    pub fn arrived(&mut self, from: u32, hdr: &Header, payload: &[u8]) -> bool {
        self.hook.as_mut().is_none_or(|h| h.arrived(from, hdr, payload))
    }

    /// Newest known incarnation of world rank `w`.
    pub fn incarnation_of(&self, w: u32) -> u16 {
        self.peer_incarnation.get(w as usize).copied().unwrap_or(0)
    }

    /// World rank `w` is now incarnation `inc`; returns false if that was known already
    /// (or is older than what is known).
    pub fn rejoined(&mut self, w: u32, inc: u16) -> bool {
        let Some(known) = self.peer_incarnation.get_mut(w as usize) else { return false };
        if inc <= *known {
            return false;
        }
        *known = inc;
        if let Some(hook) = self.hook.as_mut() {
            hook.rejoined(w, inc);
        }
        true
    }

    /// `--ft channel-memory`: this process's stream begins with the packets its earlier
    /// processes sent to themselves, which it takes in as they did; its own new ones then
    /// count as a rejoin of itself.
    pub fn admit_own_history(&mut self) {
        if let Some(me) = self.peer_incarnation.get_mut(self.rank as usize) {
            *me = 0;
        }
    }

    /// This process was restored from its own image (message logging) as incarnation `inc`;
    /// the others keep theirs.
    pub fn restored_as(&mut self, inc: u16) {
        self.incarnation = inc;
        if let Some(me) = self.peer_incarnation.get_mut(self.rank as usize) {
            *me = inc;
        }
    }

    /// After a coordinated rollback every rank of the job is incarnation `inc`.
    pub fn restart_all(&mut self, inc: u16) {
        self.incarnation = inc;
        for k in &mut self.peer_incarnation {
            *k = inc;
        }
    }

    /// The identity of a message from world rank `peer` with sequence number `seq`.
    #[inline]
    pub fn ident(&self, peer: u32, seq: u64) -> Ident {
        Ident { world: peer, incarnation: self.incarnation_of(peer), seq }
    }

    /// A message was matched to a receive: advance the reception clock.
    #[inline]
    pub fn matched(&mut self, from: Ident, ctx: u32, src: i32, tag: i32) {
        self.clock += 1;
        if let Some(hook) = self.hook.as_mut() {
            hook.matched(&Determinant { from, ctx, src, tag, clock: self.clock });
        }
    }

    /// Receptions so far.
    pub fn clock(&self) -> u64 {
        self.clock
    }

    /// A test/probe call found nothing (counted until one succeeds).
    #[inline]
    pub fn test_failed(&mut self) {
        self.failed_tests += 1;
    }

    /// A test/wait/probe call reports `indices` (a choice among several requests, or a
    /// successful test or probe).
    #[inline]
    pub fn completed(&mut self, call: CompletionCall, indices: &[usize]) {
        self.completed_probe(call, indices, None);
    }

    /// As [`Door::completed`], for a probe that saw message `probed`.
    #[inline]
    pub fn completed_probe(&mut self, call: CompletionCall, indices: &[usize], probed: Option<Ident>) {
        let failed_before = std::mem::take(&mut self.failed_tests);
        if let Some(hook) = self.hook.as_mut() {
            hook.completed(&Completion { call, indices: indices.to_vec(), failed_before, clock: self.clock, probed });
        }
    }

    /// Unsuccessful test/probe calls since the last successful one.
    pub fn failed_tests(&self) -> u64 {
        self.failed_tests
    }
}

/// The call of [`Path::send`] in the engine (see also [`transmit_held`]).
#[inline]
pub fn transmit(net: &mut dyn Path, peer: u32, hdr: &RawHeader, payload: &[u8]) -> Result<SendStatus, PathError> {
    net.send(peer, hdr, payload)
}

/// As [`transmit`], for rendezvous data whose buffer the sender keeps until the receiver's
/// FIN when the path holds references ([`Path::send_held`]).
///
/// # Safety
/// As [`Path::send_held`].
pub unsafe fn transmit_held(net: &mut dyn Path, peer: u32, hdr: &RawHeader, payload: &[u8]) -> Result<SendStatus, PathError> {
    // SAFETY: the caller's promise is passed on.
    unsafe { net.send_held(peer, hdr, payload) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_numbers_count_per_destination() {
        let mut d = Door::new(0, 0, 3);
        let h = d.message(1, Kind::Eager, 0, 0, 0, 5, 8, 0);
        assert_eq!(h.a, 1);
        d.commit(1, &h, &[]);
        assert_eq!(d.message(1, Kind::Eager, 0, 0, 0, 5, 8, 0).a, 2);
        assert_eq!(d.message(2, Kind::Eager, 0, 0, 0, 5, 8, 0).a, 1);
    }

    #[test]
    fn older_incarnations_are_dropped_newer_announce_a_restart() {
        let mut d = Door::new(0, 0, 2);
        let raw = |inc: u16| Header { kind: Kind::Eager, flags: 0, incarnation: inc, ctx: 0, src: 1, tag: 0, len: 0, a: 1, b: 0 }.encode();
        assert!(matches!(d.admit(1, &raw(0)), Admitted::Packet(_)));
        assert!(matches!(d.admit(1, &raw(1)), Admitted::Rejoined(_)));
        assert!(d.rejoined(1, 1));
        assert!(!d.rejoined(1, 1));
        assert!(matches!(d.admit(1, &raw(0)), Admitted::Dropped));
        assert_eq!(d.stale, 1);
        assert!(matches!(d.admit(1, &raw(1)), Admitted::Packet(_)));
        // A peer outside the job is malformed, not a crash.
        assert!(matches!(d.admit(9, &raw(0)), Admitted::Dropped));
        assert_eq!(d.malformed, 1);
    }

    #[derive(Default)]
    struct Record(std::sync::Arc<std::sync::Mutex<Vec<String>>>);
    impl Interpose for Record {
        fn matched(&mut self, det: &Determinant) {
            self.0.lock().unwrap().push(format!("m {} {} {}", det.from.world, det.from.seq, det.clock));
        }
        fn completed(&mut self, c: &Completion) {
            self.0.lock().unwrap().push(format!("c {:?} {:?} {}", c.call, c.indices, c.failed_before));
        }
    }

    struct Gate;
    impl Interpose for Gate {
        fn arrived(&mut self, _from: u32, hdr: &Header, _payload: &[u8]) -> bool {
            hdr.tag != 99
        }
    }

    #[test]
    fn hook_may_consume_arrivals() {
        let mut d = Door::new(0, 0, 2);
        let h = |tag| Header { kind: Kind::Eager, flags: 0, incarnation: 0, ctx: 0, src: 1, tag, len: 0, a: 1, b: 0 };
        assert!(d.arrived(1, &h(99), &[]), "without a hook everything passes");
        d.set_hook(Some(Box::new(Gate)));
        assert!(d.has_hook());
        assert!(d.arrived(1, &h(5), &[]));
        assert!(!d.arrived(1, &h(99), &[]));
    }

        #[test]
    fn hook_sees_determinants_and_completions() {
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut d = Door::new(0, 0, 2);
        d.set_hook(Some(Box::new(Record(log.clone()))));
        d.matched(d.ident(1, 1), 0, 1, 7);
        d.test_failed();
        d.test_failed();
        d.completed(CompletionCall::Testany, &[2]);
        d.matched(d.ident(1, 2), 0, 1, 7);
        assert_eq!(*log.lock().unwrap(), vec!["m 1 1 1", "c Testany [2] 2", "m 1 2 2"]);
    }
}
