//! Transports ("paths") that move packets between ranks.
//!
//! A packet is a fixed-size header (opaque to this crate, [`HDR_LEN`] bytes, encoded by the
//! message layer in `steadfast-core`) followed by a payload. Every path keeps packets from one
//! sender to one receiver in order, which is what MPI's non-overtaking rule is built on.
//!
//! Paths never block: `send` either takes the packet (copying what it must) or says
//! [`SendStatus::Full`], and `poll` hands over whatever complete packets arrived. Blocking
//! (spin, then sleep on a futex or in `poll(2)`) is done by the caller through [`Path::wait`].

pub mod bridge;
pub mod checksum;
pub mod cm;
pub mod cma;
pub mod composite;
pub mod copy;
pub mod fault;
pub mod jobdir;
pub mod linger;
pub mod reliable;
pub mod setup;
pub mod shm;
pub mod stores;
pub mod tcp;
pub mod udp;

use std::fmt;
use std::time::Duration;

/// Length of the message-layer header carried in front of every payload.
pub const HDR_LEN: usize = 40;

/// A packet header as raw bytes; its meaning belongs to the message layer.
pub type RawHeader = [u8; HDR_LEN];

/// What happened to a packet handed to [`Path::send`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendStatus {
    /// The path took the packet; the caller's buffer may be reused.
    Done,
    /// No room right now; nothing was taken. Retry after progress.
    Full,
}

/// Errors a path reports. Data from peers that is malformed is counted and dropped, not
/// reported here; these are local failures or a peer becoming unreachable.
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    #[error("shared memory: {0}")]
    Shm(String),
    #[error("tcp: {0}")]
    Tcp(String),
    #[error("udp: {0}")]
    Udp(String),
    #[error("peer {0} is unreachable: {1}")]
    PeerLost(u32, String),
    /// Damaged data from `peer` was detected by the end-to-end checksum on shm or tcp and
    /// could not be repaired (see docs/security.md, "Damaged data"). Nothing of it was
    /// delivered.
    #[error("corrupt data from rank {peer} detected on the {path} path ({what}); it was not delivered")]
    Corrupt { peer: u32, path: &'static str, what: String },
    #[error("configuration: {0}")]
    Config(String),
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
}

/// Counters a path keeps for the statistics report (`STEADFAST_STATS=1`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PathCounters {
    pub packets_sent: u64,
    pub packets_received: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// Frames dropped because they were malformed or carried the wrong job key.
    pub frames_dropped: u64,
    /// Frames whose end-to-end checksum failed (header or payload), never delivered.
    pub corrupt_detected: u64,
    /// Frames carrying another job's key (or a bad handshake), dropped.
    pub foreign_dropped: u64,
    /// Duplicate fragments dropped by the reliable channel.
    pub dup_dropped: u64,
    /// Frames of another incarnation of a peer than the one this rank talks to (sent
    /// before it was restarted, or addressed to an earlier incarnation of this rank),
    /// dropped by the reliable path.
    pub stale_dropped: u64,
    /// Fragments sent again (timeout, NACK, gap hint or route failover).
    pub retransmits: u64,
    /// tcp: times the byte stream from a peer was found again after a damaged frame prefix
    /// (length word) made the receiver lose the frame boundaries.
    pub resyncs: u64,
    /// tcp: repair requests sent again because no answer came in time.
    pub requests_repeated: u64,
    /// Fragments moved to another route when theirs failed.
    pub rebound: u64,
    /// Routes declared failed (retransmissions exhausted or socket errors).
    pub route_failures: u64,
    /// Routes restored after a successful probe (fail-back).
    pub route_restores: u64,
    /// Fault injector: frames dropped.
    pub injected_drop: u64,
    /// Fault injector: frames sent twice.
    pub injected_dup: u64,
    /// Fault injector: frames held back and sent after later ones.
    pub injected_reorder: u64,
    /// Fault injector: frames damaged on the wire (after the sender's checksum).
    pub injected_corrupt: u64,
    /// Fault injector: frames damaged in memory at the receiver, after the wire and
    /// before the end-to-end check ("bus error").
    pub injected_bus: u64,
    /// shm: large ring records written with streaming stores (`STEADFAST_SHM_STORES`).
    pub records_streamed: u64,
}

impl PathCounters {
    /// Adds every counter of `o` to `self`.
    pub fn add(&mut self, o: &PathCounters) {
        self.packets_sent += o.packets_sent;
        self.packets_received += o.packets_received;
        self.bytes_sent += o.bytes_sent;
        self.bytes_received += o.bytes_received;
        self.frames_dropped += o.frames_dropped;
        self.corrupt_detected += o.corrupt_detected;
        self.foreign_dropped += o.foreign_dropped;
        self.dup_dropped += o.dup_dropped;
        self.stale_dropped += o.stale_dropped;
        self.retransmits += o.retransmits;
        self.resyncs += o.resyncs;
        self.requests_repeated += o.requests_repeated;
        self.rebound += o.rebound;
        self.route_failures += o.route_failures;
        self.route_restores += o.route_restores;
        self.injected_drop += o.injected_drop;
        self.injected_dup += o.injected_dup;
        self.injected_reorder += o.injected_reorder;
        self.injected_corrupt += o.injected_corrupt;
        self.injected_bus += o.injected_bus;
        self.records_streamed += o.records_streamed;
    }

    /// Faults the injector applied, all kinds.
    pub fn injected(&self) -> u64 {
        self.injected_drop + self.injected_dup + self.injected_reorder + self.injected_corrupt + self.injected_bus
    }
}

/// `packets sent N received N bytes sent N received N dropped N`, then the reliability
/// counters that are not zero (`name=value`).
impl fmt::Display for PathCounters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "packets sent {} received {} bytes sent {} received {} dropped {}",
            self.packets_sent, self.packets_received, self.bytes_sent, self.bytes_received, self.frames_dropped
        )?;
        let rest = [
            ("corrupt_detected", self.corrupt_detected),
            ("foreign_dropped", self.foreign_dropped),
            ("dup_dropped", self.dup_dropped),
            ("stale_dropped", self.stale_dropped),
            ("retransmitted", self.retransmits),
            ("resynced", self.resyncs),
            ("requests_repeated", self.requests_repeated),
            ("rebound", self.rebound),
            ("route_failures", self.route_failures),
            ("route_restores", self.route_restores),
            ("records_streamed", self.records_streamed),
        ];
        for (name, v) in rest.iter().filter(|(_, v)| *v > 0) {
            write!(f, " {name}={v}")?;
        }
        if self.injected() > 0 {
            write!(
                f,
                " | injected drop={} dup={} reorder={} corrupt={} bus={}",
                self.injected_drop, self.injected_dup, self.injected_reorder, self.injected_corrupt, self.injected_bus
            )?;
        }
        Ok(())
    }
}

/// Receives packets from [`Path::poll`].
pub trait PacketSink {
    /// One complete packet from `peer` (a world rank). `payload` is only valid during the call.
    fn packet(&mut self, peer: u32, hdr: &RawHeader, payload: &[u8]);

    /// Whether the path should go on handing over packets in this poll. A sink whose
    /// consumer is satisfied (a blocking receive got its message) says no, so later packets
    /// wait in the path, without a copy, for the next poll. Paths may ignore it.
    fn wants_more(&self) -> bool {
        true
    }

    /// One complete packet whose header is verified but whose payload is not yet: the
    /// packet is valid only if `crc32c_append(seed, payload) == expected`.
    ///
    /// Returns false, and must leave no effect visible to the application, when the check
    /// fails. The point is to let the sink fuse the check into the copy it makes anyway
    /// ([`checksum::copy_with_crc32c_append`]): it may copy into its final destination
    /// first, as long as nothing is completed, matched or counted before the CRC is known
    /// to match. The default checks in a pass of its own and then calls
    /// [`PacketSink::packet`].
    fn packet_unverified(&mut self, peer: u32, hdr: &RawHeader, payload: &[u8], seed: u32, expected: u32) -> bool {
        if checksum::crc32c_append(seed, payload) != expected {
            return false;
        }
        self.packet(peer, hdr, payload);
        true
    }
}

/// A transport between the ranks of one job.
pub trait Path: Send {
    /// Hand one packet to the path for `peer`.
    fn send(&mut self, peer: u32, hdr: &RawHeader, payload: &[u8]) -> Result<SendStatus, PathError>;
    /// As [`Path::send`], for a caller that keeps `payload` valid and unchanged after
    /// `Done`, until the peer's message layer confirmed the whole message (rendezvous data,
    /// completed by a FIN). A path that keeps data for resending may then keep a reference
    /// instead of a copy; [`Path::holds_references`] says whether it does for `peer`.
    ///
    /// # Safety
    /// `payload` must stay valid for reads and unchanged until the peer confirmed the
    /// message, whenever `holds_references(peer)` is true.
    unsafe fn send_held(&mut self, peer: u32, hdr: &RawHeader, payload: &[u8]) -> Result<SendStatus, PathError> {
        self.send(peer, hdr, payload)
    }
    /// Whether [`Path::send_held`] to `peer` keeps a reference to the caller's data (the
    /// caller must then wait for the peer's confirmation before releasing it).
    fn holds_references(&self, _peer: u32) -> bool {
        false
    }
    /// Deliver every complete packet that has arrived; returns how many were delivered.
    fn poll(&mut self, sink: &mut dyn PacketSink) -> Result<usize, PathError>;
    /// Largest payload a single packet may carry on this path.
    fn max_payload(&self) -> usize;
    /// Payload bytes of each piece a message of `len` bytes is streamed to `peer` in, where
    /// sender and receiver run at the same time (at most [`Path::max_payload`]): smaller
    /// pieces let the receiver start copying out sooner, larger ones cost fewer packets.
    fn stream_piece(&self, _peer: u32, _len: usize) -> usize {
        self.max_payload()
    }
    /// Sleep until something may have arrived for this rank, or `timeout` passes.
    fn wait(&mut self, timeout: Duration) -> Result<(), PathError>;
    /// As [`Path::wait`], but no sleep when `ready` says something this path does not
    /// carry is already there (a word another rank writes in a shared segment before it
    /// rings this rank's doorbell). A path with a doorbell asks `ready` after announcing the
    /// sleep, so such a write is never slept through; this default asks before.
    fn wait_unless(&mut self, timeout: Duration, ready: &mut dyn FnMut() -> bool) -> Result<(), PathError> {
        if ready() {
            return Ok(());
        }
        self.wait(timeout)
    }
    /// Packets this path still holds for sending (0 when everything reached the peer's queue).
    fn backlog(&self) -> usize;
    /// Payload bytes one packet to `peer` could take now without waiting for the peer to
    /// read (0 when the path cannot tell): where ranks outnumber CPUs the engine sends a
    /// message above its eager limit eagerly when it fits.
    fn room(&self, _peer: u32) -> usize {
        0
    }
    /// Say which peer this rank now waits for in a blocking receive (None: none), for
    /// [`Path::peer_sends_soon`] on the peers' side. Paths without shared state ignore it.
    fn set_awaiting(&self, _peer: Option<u32>) {}
    /// Say this rank is about to give up its CPU (`true`: a yield) or has it back.
    fn set_off_cpu(&self, _off: bool) {}
    /// Whether `peer` runs on a CPU now and waits for nothing but this rank (or for
    /// nothing): a message it owes this rank may be a few hundred nanoseconds away. False
    /// when the path cannot tell.
    fn peer_sends_soon(&mut self, _peer: u32) -> bool {
        false
    }
    /// Counters for the statistics report.
    fn counters(&self) -> PathCounters;
    /// The counters of each kind of path this one is made of, by name (`shm`, `tcp`, `udp`),
    /// for the MPI_T performance variables (none for a path that does not say).
    fn counters_by_path(&self) -> Vec<(&'static str, PathCounters)> {
        Vec::new()
    }
    /// True when the path must keep answering its peers after this rank's own traffic is
    /// acknowledged (a reliable path: a peer may still wait for an ACK that was lost, or
    /// ask again for data it found damaged). The engine then keeps it polled on a helper thread while it blocks in the final
    /// fence ([`linger::Linger`]).
    fn needs_linger(&self) -> bool {
        false
    }
    /// `peer` is known to have failed (run-through mode): forget what is owed to it, so
    /// it no longer counts in [`Path::backlog`] and nothing is retransmitted to it.
    fn peer_failed(&mut self, _peer: u32) {}
    /// `peer` was started again (a new incarnation of the same rank, which created its
    /// endpoints anew and published them through `ex`): forget the old incarnation's
    /// endpoints so that later sends reach the new one. Paths that cannot do this return
    /// an error and the peer stays failed.
    fn peer_rejoined(&mut self, _peer: u32, _ex: &mut dyn crate::setup::Exchange) -> Result<(), PathError> {
        Ok(())
    }
    /// Channel memory: how many frames of this rank's stream were handed over so far (where
    /// a process restored from an image of this one reads on); None for the other paths.
    fn stream_position(&self) -> Option<u64> {
        None
    }
    /// Channel memory: a process image of this rank that read the stream up to frame
    /// `upto` is kept by the launcher, so the server may drop the frames before it. The
    /// other paths keep no stream.
    fn release_stream(&mut self, _upto: u64) -> Result<(), PathError> {
        Ok(())
    }
    /// Extra lines for the statistics report (per-route detail), if any.
    fn stats_detail(&self) -> Vec<String> {
        Vec::new()
    }
    /// The path as `Any`, for the one kind the engine reconfigures at run time
    /// ([`bridge::Bridged`]); `None` for the others.
    fn as_any_mut(&mut self) -> Option<&mut dyn std::any::Any> {
        None
    }
}
