//! The per-peer reliable channel: a sans-IO state machine.
//!
//! Inputs are pushed ([`Channel::send`], [`Channel::handle`], [`Channel::handle_timeout`],
//! [`Channel::fail_route`], [`Channel::restore_route`]); outputs are pulled
//! ([`Channel::poll_transmit`], [`Channel::poll_event`], [`Channel::poll_timeout`]).
//! Time is a `u64` count of nanoseconds chosen by the driver; the channel never reads a
//! clock. After any input, a driver drains `poll_transmit` until `None`, drains
//! `poll_event`, and arms a timer for `poll_timeout`.
//!
//! The protocol (LA-MPI, seed 004): messages are cut into fragments numbered by a 64-bit
//! sequence that runs across messages, so delivering fragments in sequence order also
//! delivers messages in send order (MPI's non-overtaking rule). The receiver verifies
//! each fragment's CRC32C while copying it out of the datagram, buffers out-of-order
//! fragments within a bounded window, and hands fragments to the application in order.
//! When the application takes a fragment ([`Event::Delivered`]) the receiver owes a
//! fragment-specific ACK, which also carries the non-specific fields (largest in-order
//! sequence received and delivered). A duplicate fragment gets a non-specific ACK; a
//! fragment whose payload fails its checksum gets a NACK. The sender keeps every
//! fragment until it is acknowledged as delivered and retransmits on a per-fragment
//! timer with truncated exponential backoff, on a NACK, or when the receiver's gap hint
//! shows the fragment missing while later ones arrived.

mod recv;
mod rtt;
mod send;

use std::collections::VecDeque;

use bytes::Bytes;
use thiserror::Error;

use crate::config::{Config, ConfigError};
use crate::counters::Counters;
use crate::frame::{Frame, FrameError, FrameKey, HEADER_LEN};

pub use rtt::RttEstimator;

/// Index of a route to the peer (`0..Config::routes`).
pub type RouteId = u8;

/// Identity of a message within one direction of a channel: 1, 2, 3, … in send order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MsgId(pub u64);

/// `send` could not take the message: the send buffer is full. Retry after acks arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("send buffer full")]
pub struct WouldBlock;

/// A frame to put on the wire: `header` followed by `payload` (empty for ACK/NACK).
/// Kept as two parts so a path can send with a gather write and no copy.
#[derive(Debug, Clone)]
pub struct Transmit {
    /// Route to send it on.
    pub route: RouteId,
    /// The frame header.
    pub header: [u8; HEADER_LEN],
    /// The payload (a slice of the retained message; cheap to clone).
    pub payload: Bytes,
}

impl Transmit {
    /// Total frame length.
    pub fn len(&self) -> usize {
        HEADER_LEN + self.payload.len()
    }

    /// Always false: a frame has at least a header.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The frame as one contiguous buffer.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.len());
        v.extend_from_slice(&self.header);
        v.extend_from_slice(&self.payload);
        v
    }
}

/// One fragment of an incoming message, handed to the application in send order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// The sender's message number.
    pub msg: MsgId,
    /// Sequence number of the fragment.
    pub seq: u64,
    /// Offset of `data` in the message.
    pub offset: u64,
    /// Total length of the message.
    pub msg_len: u64,
    /// The fragment's bytes, checksum-verified.
    pub data: Vec<u8>,
}

impl Delivery {
    /// True for the first fragment of a message (the one that carries its envelope).
    pub fn is_first(&self) -> bool {
        self.offset == 0
    }

    /// True for the last fragment of a message.
    pub fn is_last(&self) -> bool {
        self.offset + self.data.len() as u64 == self.msg_len
    }
}

/// Something the driver (path scheduler, MPI engine) should know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The next fragment of incoming data, in send order. Taking it counts as the data
    /// reaching its destination: the fragment-specific ACK is generated now.
    Delivered(Delivery),
    /// Every fragment of our message `msg` was delivered to the peer's application.
    Acked {
        /// The message.
        msg: MsgId,
    },
    /// A fragment was sent `retries_per_route` times on `route` without an ACK: the
    /// route is suspect. Reported once per route until it delivers again or is
    /// failed/restored. The channel keeps retransmitting (with the backoff truncated)
    /// until the scheduler calls [`Channel::fail_route`].
    RetransmitExhausted {
        /// The suspect route.
        route: RouteId,
        /// The fragment that exhausted its retries.
        seq: u64,
    },
    /// Damaged frames were detected and dropped since the last such event.
    CorruptDropped {
        /// How many.
        count: u64,
    },
    /// Frames with another job's key were dropped since the last such event.
    ForeignDropped {
        /// How many.
        count: u64,
    },
    /// The peer sent fragments that contradict message order (a peer bug).
    ProtocolError {
        /// What was wrong.
        what: &'static str,
    },
}

#[derive(Debug, Clone, Copy)]
struct Route {
    up: bool,
    exhausted_reported: bool,
}

/// A reliable, ordered, checksummed message channel to one peer. See the module docs.
#[derive(Debug)]
pub struct Channel {
    cfg: Config,
    /// Tags our frames and checks the peer's (derived from `cfg.job_key`).
    key: FrameKey,
    routes: Vec<Route>,
    next_route: usize,
    send: send::Sender,
    recv: recv::Receiver,
    counters: Counters,
    events: VecDeque<Event>,
    pending_corrupt: u64,
    pending_foreign: u64,
    pending_protocol: Option<&'static str>,
}

impl Channel {
    /// A channel with the given configuration.
    pub fn new(cfg: Config) -> Result<Channel, ConfigError> {
        cfg.validate()?;
        let routes = vec![
            Route {
                up: true,
                exhausted_reported: false
            };
            usize::from(cfg.routes)
        ];
        Ok(Channel {
            send: send::Sender::new(&cfg),
            recv: recv::Receiver::new(),
            key: FrameKey::from_job_key(cfg.job_key),
            cfg,
            routes,
            next_route: 0,
            counters: Counters::default(),
            events: VecDeque::new(),
            pending_corrupt: 0,
            pending_foreign: 0,
            pending_protocol: None,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// What the channel did so far.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Round-trip estimate from acknowledged fragments.
    pub fn rtt(&self) -> &RttEstimator {
        &self.send.rtt
    }

    /// Queues a message, copying it into the channel and checksumming each fragment in
    /// the same pass. Returns its id, or `WouldBlock` when the send buffer is full.
    pub fn send(&mut self, now: u64, msg: &[u8]) -> Result<MsgId, WouldBlock> {
        self.send_impl(now, send::Payload::Copy(msg))
    }

    /// Queues a message the caller hands over (no copy; the checksum is one read pass).
    pub fn send_bytes(&mut self, now: u64, msg: Bytes) -> Result<MsgId, WouldBlock> {
        self.send_impl(now, send::Payload::Owned(msg))
    }

    /// True when `send` would accept a message of `len` bytes now.
    pub fn can_send(&self, len: usize) -> bool {
        self.send.can_accept(&self.cfg, len)
    }

    /// Processes one datagram from the peer. Damaged, foreign and misdirected frames are
    /// counted and dropped; nothing here panics on any input.
    pub fn handle(&mut self, now: u64, datagram: &[u8]) {
        match Frame::new_checked(datagram) {
            Ok(frame) => self.handle_frame(now, &frame),
            Err(err) => self.note_malformed(&err),
        }
    }

    /// Processes a frame already checked by the caller (e.g. while demultiplexing by
    /// source id).
    pub fn handle_frame<T: AsRef<[u8]>>(&mut self, now: u64, frame: &Frame<T>) {
        if !frame.verify_tag(&self.key) {
            self.counters.foreign_dropped += 1;
            self.pending_foreign += 1;
            tracing::debug!(
                src = frame.src(),
                "reliable: dropped frame with a wrong tag (another job, or forged)"
            );
            return;
        }
        self.handle_authenticated_frame(now, frame);
    }

    /// Processes a frame whose tag the caller already verified with
    /// [`Frame::verify_tag`] under this channel's job key (a path that demultiplexes many
    /// channels checks each datagram once, before it knows the channel).
    pub fn handle_authenticated_frame<T: AsRef<[u8]>>(&mut self, now: u64, frame: &Frame<T>) {
        let repr = frame.repr();
        if repr.src != self.cfg.peer_id || repr.dst != self.cfg.local_id {
            self.counters.misdirected_dropped += 1;
            tracing::debug!(
                src = repr.src,
                dst = repr.dst,
                "reliable: dropped misdirected frame"
            );
            return;
        }
        let route = repr.route % self.cfg.routes;
        let trusted = self.on_peer_state(
            now,
            repr.cum_received,
            repr.cum_delivered,
            repr.max_received,
        );
        match repr.kind() {
            Some(crate::frame::Kind::Data) => self.on_data(now, frame, &repr, route),
            Some(crate::frame::Kind::Ack) if trusted => self.on_ack(now, &repr),
            Some(crate::frame::Kind::Nack) if trusted => self.on_nack(now, &repr),
            _ => {}
        }
        self.reset_backoff(now);
        self.debug_check();
    }

    #[inline]
    fn debug_check(&self) {
        #[cfg(debug_assertions)]
        self.send.check_invariants();
    }

    /// Advances timers: fragments whose retransmission deadline passed are queued for
    /// resending (or re-armed when the receiver is known to hold them).
    pub fn handle_timeout(&mut self, now: u64) {
        self.on_timeout(now);
        self.debug_check();
    }

    /// The next frame to send, if any. `now` stamps data frames and arms their timers.
    pub fn poll_transmit(&mut self, now: u64) -> Option<Transmit> {
        if let Some(t) = self.next_control() {
            return Some(t);
        }
        self.next_data(now)
    }

    /// The next event, if any. Taking an [`Event::Delivered`] generates its ACK.
    pub fn poll_event(&mut self) -> Option<Event> {
        if let Some(e) = self.events.pop_front() {
            return Some(e);
        }
        if self.pending_corrupt > 0 {
            let count = std::mem::take(&mut self.pending_corrupt);
            return Some(Event::CorruptDropped { count });
        }
        if self.pending_foreign > 0 {
            let count = std::mem::take(&mut self.pending_foreign);
            return Some(Event::ForeignDropped { count });
        }
        if let Some(what) = self.pending_protocol.take() {
            return Some(Event::ProtocolError { what });
        }
        self.deliver_next().map(Event::Delivered)
    }

    /// When `handle_timeout` should be called next (nanoseconds), if anything is pending.
    pub fn poll_timeout(&mut self) -> Option<u64> {
        self.next_deadline()
    }

    /// Marks `route` failed: new fragments avoid it and its unacknowledged fragments are
    /// rebound to the remaining routes and resent now. With no route left up, the
    /// channel keeps probing all routes.
    pub fn fail_route(&mut self, route: RouteId) {
        let Some(r) = self.routes.get_mut(usize::from(route)) else {
            return;
        };
        r.up = false;
        r.exhausted_reported = false;
        tracing::debug!(route, "reliable: route failed");
        self.rebind(route);
        self.debug_check();
    }

    /// Marks `route` usable again (fail-back): new fragments may be striped onto it.
    pub fn restore_route(&mut self, route: RouteId) {
        if let Some(r) = self.routes.get_mut(usize::from(route)) {
            r.up = true;
            r.exhausted_reported = false;
            tracing::debug!(route, "reliable: route restored");
        }
    }

    /// Whether `route` is currently considered usable.
    pub fn route_is_up(&self, route: RouteId) -> bool {
        self.routes.get(usize::from(route)).is_some_and(|r| r.up)
    }

    /// True when nothing of ours awaits acknowledgment and nothing is owed to the peer.
    pub fn is_idle(&self) -> bool {
        self.send.is_empty() && self.recv.is_quiet()
    }

    /// Our messages not yet fully acknowledged.
    pub fn unacked_messages(&self) -> usize {
        self.send.unacked_messages()
    }

    /// Largest in-order sequence number delivered to our application.
    pub fn cum_delivered(&self) -> u64 {
        self.recv.cum_delivered
    }

    fn note_malformed(&mut self, err: &FrameError) {
        self.counters.malformed_dropped += 1;
        self.pending_corrupt += 1;
        tracing::debug!(%err, "reliable: dropped malformed frame");
    }

    /// Round-robin over the routes that are up (over all when none is).
    fn pick_route(&mut self) -> RouteId {
        let n = self.routes.len();
        let any_up = self.routes.iter().any(|r| r.up);
        for _ in 0..n {
            let i = self.next_route % n;
            self.next_route = (i + 1) % n;
            if self.routes[i].up || !any_up {
                return i as RouteId;
            }
        }
        0
    }

    /// `route` if it is up, else another one.
    fn usable_route(&mut self, route: RouteId) -> RouteId {
        if self.route_is_up(route) {
            route
        } else {
            self.pick_route()
        }
    }
}
