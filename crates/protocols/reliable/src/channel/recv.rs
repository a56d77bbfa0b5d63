//! Receiver half: checksum-verified copy, duplicate drop, bounded reorder buffer,
//! in-order delivery, and the ACK/NACK answers.

use std::collections::{BTreeMap, VecDeque};

use super::{Channel, Delivery, MsgId, RouteId, Transmit};
use crate::frame::{Frame, FrameRepr, Kind, HEADER_LEN};

/// A fragment received intact and not yet taken by the application.
#[derive(Debug)]
struct Held {
    msg_id: u64,
    msg_len: u64,
    offset: u64,
    data: Vec<u8>,
    /// Echoed in the specific ACK (round-trip sample at the sender).
    timestamp: u64,
    send_count: u32,
    route: RouteId,
}

/// What an ACK or NACK refers to.
#[derive(Debug, Clone, Copy)]
struct Answer {
    seq: u64,
    timestamp: u64,
    send_count: u32,
    route: RouteId,
}

#[derive(Debug)]
pub(super) struct Receiver {
    /// Out-of-order fragments and in-order ones the application has not taken.
    held: BTreeMap<u64, Held>,
    held_bytes: usize,
    /// Every sequence number up to this one was received intact.
    pub(super) cum_received: u64,
    /// Every sequence number up to this one was taken by the application.
    pub(super) cum_delivered: u64,
    /// Largest sequence number received intact.
    pub(super) max_received: u64,
    /// Specific ACK owed for the latest delivery (its cumulative fields cover the rest).
    ack: Option<Answer>,
    /// Non-specific ACK owed (duplicate seen, or a gap the sender should learn about).
    nonspecific: Option<RouteId>,
    nacks: VecDeque<Answer>,
    /// Receipts owed for fragments that arrived past a gap.
    receipts: VecDeque<Answer>,
    /// Message-order check of deliveries: last message id started, whether it is
    /// incomplete, and the offset its next fragment must have.
    last_msg: u64,
    in_msg: bool,
    next_offset: u64,
}

impl Receiver {
    pub(super) fn new() -> Receiver {
        Receiver {
            held: BTreeMap::new(),
            held_bytes: 0,
            cum_received: 0,
            cum_delivered: 0,
            max_received: 0,
            ack: None,
            nonspecific: None,
            nacks: VecDeque::new(),
            receipts: VecDeque::new(),
            last_msg: 0,
            in_msg: false,
            next_offset: 0,
        }
    }

    /// Nothing held and nothing owed to the peer.
    pub(super) fn is_quiet(&self) -> bool {
        self.held.is_empty()
            && self.ack.is_none()
            && self.nonspecific.is_none()
            && self.nacks.is_empty()
            && self.receipts.is_empty()
    }
}

impl Channel {
    pub(super) fn on_data<T: AsRef<[u8]>>(
        &mut self,
        _now: u64,
        frame: &Frame<T>,
        repr: &FrameRepr,
        route: RouteId,
    ) {
        let r = &mut self.recv;
        let seq = repr.seq;
        if seq <= r.cum_received || r.held.contains_key(&seq) {
            // LA-MPI: a duplicate is answered with a non-specific ACK so the sender
            // learns what arrived and what was delivered; one held past a gap gets its
            // receipt again (the first may have been lost).
            self.counters.dup_dropped += 1;
            r.nonspecific = Some(route);
            if seq > r.cum_received {
                let a = Answer {
                    seq,
                    timestamp: repr.timestamp,
                    send_count: repr.send_count,
                    route,
                };
                self.queue_receipt(a);
            }
            return;
        }
        let window_end = r
            .cum_delivered
            .saturating_add(self.cfg.recv_window_frags as u64);
        let len = repr.payload_len as usize;
        let fills_gap = seq == r.cum_received + 1;
        if seq > window_end || (!fills_gap && r.held_bytes + len > self.cfg.recv_buffer_bytes) {
            // Beyond what we may buffer: the sender will retransmit it.
            self.counters.window_dropped += 1;
            return;
        }
        if !frame.has_payload_crc() && self.cfg.payload_checksum {
            self.counters.unchecked_refused += 1;
            tracing::debug!(seq, "reliable: refused a fragment without payload checksum");
            return;
        }
        let mut data = Vec::new();
        if let Err(err) = frame.copy_payload_checked(&mut data) {
            self.counters.corrupt_payload += 1;
            self.pending_corrupt += 1;
            tracing::debug!(seq, %err, "reliable: payload corrupt, sending NACK");
            let r = &mut self.recv;
            if r.nacks.iter().any(|n| n.seq == seq) {
                return;
            }
            if r.nacks.len() >= self.cfg.answer_queue {
                self.counters.answers_skipped += 1;
                return;
            }
            r.nacks.push_back(Answer {
                seq,
                timestamp: repr.timestamp,
                send_count: repr.send_count,
                route,
            });
            return;
        }
        let r = &mut self.recv;
        r.held.insert(
            seq,
            Held {
                msg_id: repr.msg_id,
                msg_len: repr.msg_len,
                offset: repr.frag_offset,
                data,
                timestamp: repr.timestamp,
                send_count: repr.send_count,
                route,
            },
        );
        r.held_bytes += len;
        r.max_received = r.max_received.max(seq);
        self.counters.frags_received += 1;
        while r.held.contains_key(&(r.cum_received + 1)) {
            r.cum_received += 1;
        }
        if seq > r.cum_received {
            // Arrived past a gap: a receipt tells the sender it is held (no resend, no
            // blame on its route), and max_received hints at the gap before it.
            let a = Answer {
                seq,
                timestamp: repr.timestamp,
                send_count: repr.send_count,
                route,
            };
            self.queue_receipt(a);
        }
    }

    fn queue_receipt(&mut self, a: Answer) {
        let r = &mut self.recv;
        if r.receipts.iter().any(|x| x.seq == a.seq) {
            return;
        }
        if r.receipts.len() >= self.cfg.answer_queue {
            self.counters.answers_skipped += 1;
            r.nonspecific = Some(a.route);
            return;
        }
        r.receipts.push_back(a);
    }

    /// Hands the next in-order fragment to the application, owing its ACK.
    pub(super) fn deliver_next(&mut self) -> Option<Delivery> {
        let r = &mut self.recv;
        let next = r.cum_delivered + 1;
        let entry = r.held.first_entry()?;
        if *entry.key() != next {
            return None;
        }
        let h = entry.remove();
        r.cum_delivered = next;
        r.held_bytes -= h.data.len();
        let d = Delivery {
            msg: MsgId(h.msg_id),
            seq: next,
            offset: h.offset,
            msg_len: h.msg_len,
            data: h.data,
        };
        // Message order: a first fragment starts message last+1 after a complete
        // message; any other continues the current one at the expected offset.
        let in_order = if d.is_first() {
            !r.in_msg && h.msg_id == r.last_msg + 1
        } else {
            r.in_msg && h.msg_id == r.last_msg && h.offset == r.next_offset
        };
        if !in_order {
            self.counters.protocol_errors += 1;
            self.pending_protocol = Some("fragment out of message order");
            tracing::warn!(
                seq = next,
                msg = h.msg_id,
                offset = h.offset,
                "reliable: fragment out of message order"
            );
        }
        r.last_msg = h.msg_id;
        r.next_offset = h.offset + d.data.len() as u64;
        r.in_msg = !d.is_last();
        r.ack = Some(Answer {
            seq: next,
            timestamp: h.timestamp,
            send_count: h.send_count,
            route: h.route,
        });
        self.counters.frags_delivered += 1;
        self.counters.bytes_delivered += d.data.len() as u64;
        if d.is_last() {
            self.counters.msgs_delivered += 1;
        }
        Some(d)
    }

    /// The next NACK or ACK owed to the peer.
    pub(super) fn next_control(&mut self) -> Option<Transmit> {
        while let Some(n) = self.recv.nacks.pop_front() {
            if n.seq <= self.recv.cum_received || self.recv.held.contains_key(&n.seq) {
                continue; // a good copy arrived meanwhile
            }
            self.counters.nacks_sent += 1;
            return Some(self.control_frame(Kind::Nack, n));
        }
        while let Some(a) = self.recv.receipts.pop_front() {
            if a.seq <= self.recv.cum_delivered {
                continue; // delivered since: the delivery ACK covers it
            }
            self.counters.receipts_sent += 1;
            return Some(self.control_frame(Kind::Ack, a));
        }
        if let Some(a) = self.recv.ack.take() {
            self.recv.nonspecific = None; // the specific ACK carries the same fields
            self.counters.acks_sent += 1;
            return Some(self.control_frame(Kind::Ack, a));
        }
        if let Some(route) = self.recv.nonspecific.take() {
            self.counters.acks_sent += 1;
            let a = Answer {
                seq: 0,
                timestamp: 0,
                send_count: 0,
                route,
            };
            return Some(self.control_frame(Kind::Ack, a));
        }
        None
    }

    fn control_frame(&mut self, kind: Kind, a: Answer) -> Transmit {
        let route = self.usable_route(a.route);
        let repr = FrameRepr {
            kind_code: kind.code(),
            route,
            src: self.cfg.local_id,
            dst: self.cfg.peer_id,
            seq: a.seq,
            timestamp: a.timestamp,
            send_count: a.send_count,
            cum_received: self.recv.cum_received,
            cum_delivered: self.recv.cum_delivered,
            max_received: self.recv.max_received,
            ..FrameRepr::default()
        };
        let mut header = [0u8; HEADER_LEN];
        repr.write_sealed(&self.key, &mut header);
        Transmit {
            route,
            header,
            payload: bytes::Bytes::new(),
        }
    }
}
