//! Sender half: fragmentation, the in-flight window, timers and retransmission.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use bytes::Bytes;

use super::rtt::{backoff, RttEstimator};
use super::{Channel, Event, MsgId, RouteId, Transmit, WouldBlock};
use crate::config::Config;
use crate::crc;
use crate::frame::{FrameRepr, Kind, FLAG_NO_PAYLOAD_CRC, HEADER_LEN};

/// Round-trip samples above this are ignored (a peer echoing garbage timestamps).
const MAX_RTT_SAMPLE_NS: u64 = 60_000_000_000;

/// Message bytes handed to `send`.
pub(super) enum Payload<'a> {
    /// Borrowed: copied (and checksummed in the same pass).
    Copy(&'a [u8]),
    /// Owned: kept as is (checksummed in one read pass).
    Owned(Bytes),
}

impl Payload<'_> {
    fn len(&self) -> usize {
        match self {
            Payload::Copy(b) => b.len(),
            Payload::Owned(b) => b.len(),
        }
    }
}

/// One fragment retained until the peer acknowledges its delivery.
#[derive(Debug)]
struct Frag {
    msg_id: u64,
    msg_len: u64,
    offset: u64,
    payload: Bytes,
    crc: u32,
    /// Transmissions so far (goes on the wire).
    send_count: u32,
    /// Route of the latest transmission (or the one it is bound to).
    route: RouteId,
    /// Transmissions on `route` since it was bound there: drives backoff and exhaustion.
    route_sends: u32,
    /// Channel-wide order of the latest transmission.
    tx_serial: u64,
    /// When the retransmission timer fires (valid while sent, unacked, not queued).
    deadline: u64,
    acked: bool,
    /// The peer reported it received intact (past a gap): wait, do not resend.
    held: bool,
    retx_pending: bool,
}

#[derive(Debug)]
pub(super) struct Sender {
    /// Retained fragments, sequence numbers `base..base + frags.len()`.
    frags: VecDeque<Frag>,
    /// Sequence number of `frags[0]`; everything below was acknowledged.
    base: u64,
    /// First sequence number never transmitted.
    next_new: u64,
    next_msg: u64,
    /// Our messages not fully acknowledged: (id, last seq).
    msgs: VecDeque<(u64, u64)>,
    buffered_bytes: usize,
    inflight_bytes: usize,
    /// Fragments due for resending, in the order they became due.
    retx: VecDeque<u64>,
    /// Retransmission deadlines (lazy deletion: stale entries are skipped).
    timers: BinaryHeap<Reverse<(u64, u64)>>,
    tx_serial: u64,
    peer_cum_received: u64,
    pub(super) rtt: RttEstimator,
    /// Unacked fragments sent at least twice on their route (backed off).
    backed_off: usize,
    /// Routes that proved alive while handling the current frame (bit per route).
    alive: [u64; 4],
}

impl Sender {
    pub(super) fn new(_cfg: &Config) -> Sender {
        Sender {
            frags: VecDeque::new(),
            base: 1,
            next_new: 1,
            next_msg: 1,
            msgs: VecDeque::new(),
            buffered_bytes: 0,
            inflight_bytes: 0,
            retx: VecDeque::new(),
            timers: BinaryHeap::new(),
            tx_serial: 0,
            peer_cum_received: 0,
            rtt: RttEstimator::default(),
            backed_off: 0,
            alive: [0; 4],
        }
    }

    /// Sets a fragment's per-route send count, keeping `backed_off` in step.
    fn set_route_sends(&mut self, i: usize, v: u32) {
        let f = &mut self.frags[i];
        let was = f.route_sends >= 2 && !f.acked;
        f.route_sends = v;
        let is = v >= 2 && !f.acked;
        match (was, is) {
            (false, true) => self.backed_off += 1,
            (true, false) => self.backed_off -= 1,
            _ => {}
        }
    }

    /// Marks a fragment acknowledged, keeping `backed_off` in step.
    fn mark_acked(&mut self, i: usize) {
        let f = &mut self.frags[i];
        if !f.acked && f.route_sends >= 2 {
            self.backed_off -= 1;
        }
        f.acked = true;
    }

    pub(super) fn can_accept(&self, cfg: &Config, len: usize) -> bool {
        if self.frags.is_empty() {
            return true;
        }
        let n = frags_for(len, cfg.max_payload);
        self.buffered_bytes.saturating_add(len) <= cfg.send_buffer_bytes
            && self.frags.len().saturating_add(n) <= cfg.send_buffer_frags
    }

    pub(super) fn is_empty(&self) -> bool {
        self.frags.is_empty()
    }

    pub(super) fn unacked_messages(&self) -> usize {
        self.msgs.len()
    }

    fn index(&self, seq: u64) -> Option<usize> {
        let i = usize::try_from(seq.checked_sub(self.base)?).ok()?;
        (i < self.frags.len()).then_some(i)
    }

    fn timer_valid(&self, deadline: u64, seq: u64) -> bool {
        self.index(seq).is_some_and(|i| {
            let f = &self.frags[i];
            seq < self.next_new && !f.acked && !f.retx_pending && f.deadline == deadline
        })
    }

    /// Keeps the lazily-deleted timer heap proportional to the window.
    fn compact_timers(&mut self) {
        if self.timers.len() <= 4 * self.frags.len() + 64 {
            return;
        }
        let live = (self.base..self.next_new)
            .zip(self.frags.iter())
            .filter(|(_, f)| !f.acked && !f.retx_pending)
            .map(|(seq, f)| Reverse((f.deadline, seq)))
            .collect();
        self.timers = live;
    }
}

impl Sender {
    /// Recomputes the running totals from scratch (debug builds check them after every
    /// input: a drifting counter would silently shrink or stall the window).
    #[cfg(debug_assertions)]
    pub(super) fn check_invariants(&self) {
        let sent = ((self.next_new - self.base) as usize).min(self.frags.len());
        let inflight: usize = self
            .frags
            .iter()
            .take(sent)
            .filter(|f| !f.acked)
            .map(|f| f.payload.len())
            .sum();
        let buffered: usize = self.frags.iter().map(|f| f.payload.len()).sum();
        let backed_off = self
            .frags
            .iter()
            .filter(|f| !f.acked && f.route_sends >= 2)
            .count();
        assert_eq!(inflight, self.inflight_bytes, "inflight_bytes drifted");
        assert_eq!(buffered, self.buffered_bytes, "buffered_bytes drifted");
        assert_eq!(backed_off, self.backed_off, "backed_off drifted");
        assert!(self.next_new >= self.base && self.next_new <= self.base + self.frags.len() as u64);
        assert!(
            !matches!(self.frags.front(), Some(f) if f.acked),
            "acked fragment at the front"
        );
    }
}

fn frags_for(len: usize, max_payload: usize) -> usize {
    len.div_ceil(max_payload).max(1)
}

impl Channel {
    pub(super) fn send_impl(&mut self, _now: u64, msg: Payload<'_>) -> Result<MsgId, WouldBlock> {
        let len = msg.len();
        if !self.send.can_accept(&self.cfg, len) {
            return Err(WouldBlock);
        }
        let mp = self.cfg.max_payload;
        // One buffer per fragment when copying: fragment-sized allocations recycle
        // through the allocator's bins, where a message-sized one would be mapped and
        // unmapped (page faults) for every large message.
        let checksum = self.cfg.payload_checksum;
        let pieces: Vec<(Bytes, u32)> = match msg {
            Payload::Copy([]) => vec![(Bytes::new(), 0)],
            Payload::Copy(src) => src
                .chunks(mp)
                .map(|c| {
                    if !checksum {
                        return (Bytes::copy_from_slice(c), 0);
                    }
                    let mut buf = Vec::with_capacity(c.len());
                    let crc = crc::extend_with_crc32c(0, &mut buf, c);
                    (Bytes::from(buf), crc)
                })
                .collect(),
            Payload::Owned(b) if b.is_empty() => vec![(b, 0)],
            Payload::Owned(b) => (0..len)
                .step_by(mp)
                .map(|start| {
                    let piece = b.slice(start..(start + mp).min(len));
                    let crc = if checksum { crc::crc32c(&piece) } else { 0 };
                    (piece, crc)
                })
                .collect(),
        };
        let s = &mut self.send;
        let msg_id = s.next_msg;
        s.next_msg += 1;
        for (i, (payload, crc)) in pieces.into_iter().enumerate() {
            s.frags.push_back(Frag {
                msg_id,
                msg_len: len as u64,
                offset: (i * mp) as u64,
                payload,
                crc,
                send_count: 0,
                route: 0,
                route_sends: 0,
                tx_serial: 0,
                deadline: 0,
                acked: false,
                held: false,
                retx_pending: false,
            });
        }
        s.buffered_bytes += len;
        let last_seq = s.base + s.frags.len() as u64 - 1;
        s.msgs.push_back((msg_id, last_seq));
        self.counters.msgs_sent += 1;
        Ok(MsgId(msg_id))
    }

    /// The next data frame: a due retransmission first, then a new fragment if the
    /// window allows.
    pub(super) fn next_data(&mut self, now: u64) -> Option<Transmit> {
        while let Some(seq) = self.send.retx.pop_front() {
            let Some(i) = self.send.index(seq) else {
                continue;
            };
            let f = &self.send.frags[i];
            if f.acked || !f.retx_pending {
                continue;
            }
            let bound = f.route;
            let route = self.usable_route(bound);
            let f = &mut self.send.frags[i];
            f.retx_pending = false;
            if route != bound {
                f.route = route;
                self.send.set_route_sends(i, 0);
            }
            self.counters.retransmits += 1;
            return Some(self.transmit_data(now, i));
        }
        let s = &self.send;
        let i = s.index(s.next_new)?;
        if (s.next_new - s.base) as usize >= self.cfg.send_window_frags {
            return None;
        }
        let len = s.frags[i].payload.len();
        if s.inflight_bytes > 0 && s.inflight_bytes + len > self.cfg.send_window_bytes {
            return None;
        }
        let route = self.pick_route();
        let s = &mut self.send;
        s.frags[i].route = route;
        s.frags[i].route_sends = 0;
        s.next_new += 1;
        s.inflight_bytes += len;
        self.counters.frags_sent += 1;
        self.counters.bytes_sent += len as u64;
        Some(self.transmit_data(now, i))
    }

    fn transmit_data(&mut self, now: u64, i: usize) -> Transmit {
        let base_rto = self.base_rto();
        let cfg = &self.cfg;
        let s = &mut self.send;
        let seq = s.base + i as u64;
        s.tx_serial += 1;
        let sends = s.frags[i].route_sends.saturating_add(1);
        s.set_route_sends(i, sends);
        let f = &mut s.frags[i];
        f.send_count = f.send_count.saturating_add(1);
        f.tx_serial = s.tx_serial;
        f.deadline = now.saturating_add(backoff(base_rto, f.route_sends, cfg.rto_max_ns));
        s.timers.push(Reverse((f.deadline, seq)));
        let repr = FrameRepr {
            kind_code: Kind::Data.code(),
            flags: if cfg.payload_checksum {
                0
            } else {
                FLAG_NO_PAYLOAD_CRC
            },
            route: f.route,
            tag: 0,
            src: cfg.local_id,
            dst: cfg.peer_id,
            seq,
            timestamp: now,
            send_count: f.send_count,
            payload_len: f.payload.len() as u32,
            msg_id: f.msg_id,
            msg_len: f.msg_len,
            frag_offset: f.offset,
            cum_received: self.recv.cum_received,
            cum_delivered: self.recv.cum_delivered,
            max_received: self.recv.max_received,
            payload_crc: f.crc,
        };
        let mut header = [0u8; HEADER_LEN];
        repr.write_sealed(&self.key, &mut header);
        let t = Transmit {
            route: f.route,
            header,
            payload: f.payload.clone(),
        };
        s.compact_timers();
        t
    }

    /// Applies the peer's receiver state (piggybacked on every frame it sends).
    /// Returns false (and ignores the fields) when they claim fragments we never sent.
    pub(super) fn on_peer_state(
        &mut self,
        _now: u64,
        cum_recv: u64,
        cum_deliv: u64,
        max_recv: u64,
    ) -> bool {
        if max_recv >= self.send.next_new {
            // Claims about fragments we never sent: a confused or stale peer.
            self.counters.bad_acks += 1;
            return false;
        }
        let s = &mut self.send;
        s.peer_cum_received = s.peer_cum_received.max(cum_recv);
        self.ack_through(cum_deliv);
        if self.cfg.reorder_threshold > 0 && max_recv > cum_recv {
            self.fast_retransmit(cum_recv, max_recv);
        }
        true
    }

    /// Everything up to `cum` was delivered: release it.
    fn ack_through(&mut self, cum: u64) {
        while self.send.base <= cum {
            let Some(f) = self.send.frags.pop_front() else {
                break;
            };
            self.send.base += 1;
            self.release(&f);
        }
        self.pop_acked_front();
    }

    /// Drops acknowledged fragments at the front and reports completed messages.
    fn pop_acked_front(&mut self) {
        let s = &mut self.send;
        while s.frags.front().is_some_and(|f| f.acked) {
            if let Some(f) = s.frags.pop_front() {
                s.buffered_bytes -= f.payload.len();
            }
            s.base += 1;
        }
        while let Some(&(id, last)) = s.msgs.front() {
            if last >= s.base {
                break;
            }
            s.msgs.pop_front();
            self.counters.msgs_acked += 1;
            self.events.push_back(Event::Acked { msg: MsgId(id) });
        }
    }

    /// Accounting for a fragment leaving the buffer (acked cumulatively).
    fn release(&mut self, f: &Frag) {
        self.send.buffered_bytes -= f.payload.len();
        if !f.acked {
            if f.route_sends >= 2 {
                self.send.backed_off -= 1;
            }
            self.send.inflight_bytes -= f.payload.len();
            self.counters.frags_acked += 1;
            self.route_delivered(f.route);
        }
    }

    fn route_delivered(&mut self, route: RouteId) {
        if let Some(r) = self.routes.get_mut(usize::from(route)) {
            r.exhausted_reported = false;
        }
        self.send.alive[usize::from(route / 64)] |= 1 << (route % 64);
    }

    /// A route that just delivered is alive: fragments backed off on it go back to the
    /// base timeout, so one loss burst does not leave them waiting for `rto_max`.
    pub(super) fn reset_backoff(&mut self, now: u64) {
        let alive = std::mem::take(&mut self.send.alive);
        if self.send.backed_off == 0 || alive == [0; 4] {
            return;
        }
        let base = self.base_rto();
        let sent = ((self.send.next_new - self.send.base) as usize).min(self.send.frags.len());
        for i in 0..sent {
            let f = &self.send.frags[i];
            let on_alive = alive[usize::from(f.route / 64)] & (1 << (f.route % 64)) != 0;
            if f.acked || f.held || f.retx_pending || f.route_sends < 2 || !on_alive {
                continue;
            }
            self.send.set_route_sends(i, 1);
            let deadline = now.saturating_add(base);
            let f = &mut self.send.frags[i];
            if deadline < f.deadline {
                f.deadline = deadline;
                let seq = self.send.base + i as u64;
                self.send.timers.push(Reverse((deadline, seq)));
            }
        }
    }

    fn base_rto(&self) -> u64 {
        let cfg = &self.cfg;
        if cfg.adaptive_rto {
            self.send
                .rtt
                .base_rto(cfg.rto_initial_ns, cfg.rto_min_ns, cfg.rto_max_ns)
        } else {
            cfg.rto_initial_ns
        }
    }

    /// Resends fragments the receiver is missing although `threshold` later
    /// transmissions reached it.
    fn fast_retransmit(&mut self, cum_recv: u64, max_recv: u64) {
        let s = &mut self.send;
        let Some(hi) = s.index(max_recv) else { return };
        let serial_hi = s.frags[hi].tx_serial;
        let start = (cum_recv + 1).max(s.base);
        for seq in start..max_recv.min(s.next_new) {
            let Some(i) = s.index(seq) else { continue };
            let f = &mut s.frags[i];
            if f.acked || f.retx_pending || f.held {
                continue;
            }
            if f.tx_serial.saturating_add(self.cfg.reorder_threshold) <= serial_hi {
                f.retx_pending = true;
                s.retx.push_back(seq);
                self.counters.fast_retransmits += 1;
            }
        }
    }

    pub(super) fn on_ack(&mut self, now: u64, repr: &FrameRepr) {
        self.counters.acks_received += 1;
        if repr.seq == 0 {
            return;
        }
        // The echoed timestamp is our own clock at the acked transmission.
        if repr.timestamp != 0 && repr.timestamp <= now && now - repr.timestamp <= MAX_RTT_SAMPLE_NS
        {
            self.send.rtt.sample(now - repr.timestamp);
        }
        if let Some(i) = self.send.index(repr.seq) {
            let f = &mut self.send.frags[i];
            if repr.seq > repr.cum_delivered {
                // A receipt: held by the peer, not yet delivered.
                if !f.held {
                    f.held = true;
                    let route = f.route;
                    self.counters.receipts_received += 1;
                    self.route_delivered(route);
                }
            } else if repr.seq < self.send.next_new && !f.acked {
                let (len, route) = (f.payload.len(), f.route);
                self.send.mark_acked(i);
                self.send.inflight_bytes -= len;
                self.counters.frags_acked += 1;
                self.route_delivered(route);
            }
        }
        self.pop_acked_front();
    }

    pub(super) fn on_nack(&mut self, _now: u64, repr: &FrameRepr) {
        self.counters.nacks_received += 1;
        let s = &mut self.send;
        let Some(i) = s.index(repr.seq) else { return };
        if repr.seq >= s.next_new {
            return;
        }
        let f = &mut s.frags[i];
        // Only a NACK of the latest transmission triggers a resend: older ones were
        // already answered.
        if !f.acked && !f.retx_pending && f.send_count == repr.send_count {
            f.retx_pending = true;
            s.retx.push_back(repr.seq);
            self.counters.nack_retransmits += 1;
        }
    }

    pub(super) fn on_timeout(&mut self, now: u64) {
        let cfg_base = self.base_rto();
        while let Some(&Reverse((deadline, seq))) = self.send.timers.peek() {
            if deadline > now {
                break;
            }
            self.send.timers.pop();
            if !self.send.timer_valid(deadline, seq) {
                continue;
            }
            let Some(i) = self.send.index(seq) else {
                continue;
            };
            let s = &mut self.send;
            let f = &mut s.frags[i];
            let held = f.held || seq <= s.peer_cum_received;
            if held {
                // The receiver has it but its application has not taken it: wait
                // (LA-MPI's use of the non-specific ACK), without counting a failure.
                f.deadline =
                    now.saturating_add(backoff(cfg_base, f.route_sends, self.cfg.rto_max_ns));
                s.timers.push(Reverse((f.deadline, seq)));
                self.counters.retransmits_held += 1;
                continue;
            }
            f.retx_pending = true;
            let (route, route_sends) = (f.route, f.route_sends);
            s.retx.push_back(seq);
            self.counters.timeouts += 1;
            if route_sends >= self.cfg.retries_per_route {
                if let Some(r) = self.routes.get_mut(usize::from(route)) {
                    if !r.exhausted_reported {
                        r.exhausted_reported = true;
                        self.counters.exhausted += 1;
                        tracing::debug!(route, seq, "reliable: retransmissions exhausted on route");
                        self.events
                            .push_back(Event::RetransmitExhausted { route, seq });
                    }
                }
            }
        }
    }

    pub(super) fn next_deadline(&mut self) -> Option<u64> {
        while let Some(&Reverse((deadline, seq))) = self.send.timers.peek() {
            if self.send.timer_valid(deadline, seq) {
                return Some(deadline);
            }
            self.send.timers.pop();
        }
        None
    }

    /// Moves the unacknowledged fragments of a failed route to the others.
    pub(super) fn rebind(&mut self, failed: RouteId) {
        if !self.routes.iter().any(|r| r.up) {
            return; // nowhere to go; keep probing where they are
        }
        let sent = (self.send.next_new - self.send.base) as usize;
        for i in 0..sent.min(self.send.frags.len()) {
            let f = &self.send.frags[i];
            // Held fragments already reached the peer: nothing to resend.
            if f.acked || f.held || f.route != failed {
                continue;
            }
            let route = self.pick_route();
            let seq = self.send.base + i as u64;
            self.send.set_route_sends(i, 0);
            let f = &mut self.send.frags[i];
            f.route = route;
            self.counters.rebound += 1;
            if !f.retx_pending {
                f.retx_pending = true;
                self.send.retx.push_back(seq);
            }
        }
    }
}
