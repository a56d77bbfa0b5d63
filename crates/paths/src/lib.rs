//! Transports ("paths") that move packets between ranks.
//!
//! A packet is a fixed-size header (opaque to this crate, [`HDR_LEN`] bytes, encoded by the
//! message layer in `steadfast-core`) followed by a payload. Every path keeps packets from one
//! sender to one receiver in order, which is what MPI's non-overtaking rule is built on.
//!
//! Paths never block: `send` either takes the packet (copying what it must) or says
//! [`SendStatus::Full`], and `poll` hands over whatever complete packets arrived. Blocking
//! (spin, then sleep on a futex or in `poll(2)`) is done by the caller through [`Path::wait`].

pub mod cma;
pub mod shm;
pub mod tcp;

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
    #[error("peer {0} is unreachable: {1}")]
    PeerLost(u32, String),
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
}

/// Counters a path keeps for the statistics report.
#[derive(Debug, Default, Clone, Copy)]
pub struct PathCounters {
    pub packets_sent: u64,
    pub packets_received: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// Frames dropped because they were malformed or carried the wrong job key.
    pub frames_dropped: u64,
}

/// Receives packets from [`Path::poll`].
pub trait PacketSink {
    /// One complete packet from `peer` (a world rank). `payload` is only valid during the call.
    fn packet(&mut self, peer: u32, hdr: &RawHeader, payload: &[u8]);
}

/// A transport between the ranks of one job.
pub trait Path: Send {
    /// Hand one packet to the path for `peer`.
    fn send(&mut self, peer: u32, hdr: &RawHeader, payload: &[u8]) -> Result<SendStatus, PathError>;
    /// Deliver every complete packet that has arrived; returns how many were delivered.
    fn poll(&mut self, sink: &mut dyn PacketSink) -> Result<usize, PathError>;
    /// Largest payload a single packet may carry on this path.
    fn max_payload(&self) -> usize;
    /// Sleep until something may have arrived for this rank, or `timeout` passes.
    fn wait(&mut self, timeout: Duration) -> Result<(), PathError>;
    /// Packets this path still holds for sending (0 when everything reached the peer's queue).
    fn backlog(&self) -> usize;
    /// Counters for the statistics report.
    fn counters(&self) -> PathCounters;
}
