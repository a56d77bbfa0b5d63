//! Channel configuration with documented defaults.

use crate::frame::MAX_PAYLOAD;
use thiserror::Error;

/// First retransmission timeout before any round-trip sample exists: 20 ms.
pub const DEFAULT_RTO_INITIAL_NS: u64 = 20_000_000;
/// Floor of the adaptive timeout: 2 ms (keeps a fast LAN from retransmitting on jitter).
pub const DEFAULT_RTO_MIN_NS: u64 = 2_000_000;
/// Truncation of the exponential backoff: no fragment waits longer than 1 s.
pub const DEFAULT_RTO_MAX_NS: u64 = 1_000_000_000;
/// Sends of one fragment on one route before the route is reported suspect.
pub const DEFAULT_RETRIES_PER_ROUTE: u32 = 6;
/// Fragment payload size: 8 KiB (fits a jumbo-frame UDP datagram with the header).
pub const DEFAULT_MAX_PAYLOAD: usize = 8192;

/// Configuration of one [`crate::Channel`] (both directions between two endpoints).
///
/// Both ends are expected to run the same values (see [`Config::mirrored`]); `validate`
/// requires the receive side to hold a full send window, so in a symmetric setup no
/// fragment is ever dropped for lack of buffer space.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Random per-job key; frames carrying another key are counted and dropped.
    pub job_key: u64,
    /// Our endpoint id (the MPI world rank, for instance).
    pub local_id: u32,
    /// The peer's endpoint id.
    pub peer_id: u32,
    /// Number of routes to the peer (1..=255); route ids are `0..routes`, numbered the
    /// same way on both ends.
    pub routes: u8,
    /// Largest payload of one fragment.
    pub max_payload: usize,
    /// Largest span of sequence numbers in flight (first unacked to last sent).
    pub send_window_frags: usize,
    /// Largest number of unacknowledged payload bytes in flight.
    pub send_window_bytes: usize,
    /// Largest number of payload bytes held by the sender (queued plus in flight);
    /// `send` answers `WouldBlock` beyond it. A message larger than this is still
    /// accepted when nothing else is buffered.
    pub send_buffer_bytes: usize,
    /// Largest number of fragments held by the sender (bounds tiny messages).
    pub send_buffer_frags: usize,
    /// Receiver accepts sequence numbers up to `cum_delivered + recv_window_frags`.
    pub recv_window_frags: usize,
    /// Receiver buffers at most this many payload bytes (out of order or not yet
    /// taken by the application); the next in-order fragment is always accepted.
    pub recv_buffer_bytes: usize,
    /// Retransmission timeout before any round-trip sample, in nanoseconds.
    pub rto_initial_ns: u64,
    /// Lower bound of the adaptive timeout, in nanoseconds.
    pub rto_min_ns: u64,
    /// Upper bound (truncation) of the backed-off timeout, in nanoseconds.
    pub rto_max_ns: u64,
    /// Derive the base timeout from measured round trips (RFC 6298 style) instead of
    /// always using `rto_initial_ns`.
    pub adaptive_rto: bool,
    /// Sends of a fragment on one route before [`crate::Event::RetransmitExhausted`].
    pub retries_per_route: u32,
    /// Fast retransmission: resend a fragment once this many later transmissions were
    /// seen by the receiver while it is still missing; 0 disables it.
    pub reorder_threshold: u64,
    /// Checksum payloads (CRC32C). `false` only to measure what the checksum costs
    /// (`STEADFAST_CHECKSUM=none`): frames then say so, and a receiver configured with
    /// checksums refuses them. Headers are always checksummed.
    pub payload_checksum: bool,
    /// Most NACKs, and separately most receipt ACKs, queued for sending; beyond it one
    /// is skipped (the sender's timer still recovers).
    pub answer_queue: usize,
}

impl Config {
    /// Defaults for a channel between `local_id` and `peer_id` in job `job_key`.
    pub fn new(job_key: u64, local_id: u32, peer_id: u32) -> Config {
        Config {
            job_key,
            local_id,
            peer_id,
            routes: 1,
            max_payload: DEFAULT_MAX_PAYLOAD,
            send_window_frags: 256,
            send_window_bytes: 4 << 20,
            send_buffer_bytes: 16 << 20,
            send_buffer_frags: 8192,
            recv_window_frags: 512,
            recv_buffer_bytes: 8 << 20,
            rto_initial_ns: DEFAULT_RTO_INITIAL_NS,
            rto_min_ns: DEFAULT_RTO_MIN_NS,
            rto_max_ns: DEFAULT_RTO_MAX_NS,
            adaptive_rto: true,
            retries_per_route: DEFAULT_RETRIES_PER_ROUTE,
            reorder_threshold: 3,
            payload_checksum: true,
            answer_queue: 64,
        }
    }

    /// The same configuration seen from the peer (ids swapped).
    pub fn mirrored(&self) -> Config {
        Config {
            local_id: self.peer_id,
            peer_id: self.local_id,
            ..self.clone()
        }
    }

    /// Checks that the values make sense together.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.routes == 0 {
            return Err(ConfigError("routes must be at least 1"));
        }
        if self.max_payload == 0 || self.max_payload > MAX_PAYLOAD {
            return Err(ConfigError("max_payload must be in 1..=MAX_PAYLOAD"));
        }
        if self.send_window_frags == 0 || self.recv_window_frags == 0 {
            return Err(ConfigError("windows must hold at least one fragment"));
        }
        if self.send_buffer_frags == 0 {
            return Err(ConfigError("send_buffer_frags must be at least 1"));
        }
        if self.rto_initial_ns == 0 || self.rto_min_ns == 0 {
            return Err(ConfigError("timeouts must be positive"));
        }
        if self.rto_max_ns < self.rto_initial_ns || self.rto_max_ns < self.rto_min_ns {
            return Err(ConfigError(
                "rto_max_ns must be at least rto_initial_ns and rto_min_ns",
            ));
        }
        if self.retries_per_route == 0 {
            return Err(ConfigError("retries_per_route must be at least 1"));
        }
        // Both ends run the same configuration, so a receiver sized below the sender's
        // window would drop fragments the sender was allowed to send, every round.
        if self.recv_window_frags < self.send_window_frags {
            return Err(ConfigError(
                "recv_window_frags must be at least send_window_frags",
            ));
        }
        if self.recv_buffer_bytes < self.send_window_bytes.max(self.max_payload) {
            return Err(ConfigError(
                "recv_buffer_bytes must hold a full send window",
            ));
        }
        if self.local_id == self.peer_id {
            return Err(ConfigError("local_id and peer_id must differ"));
        }
        Ok(())
    }
}

/// An invalid [`Config`].
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid reliable channel configuration: {0}")]
pub struct ConfigError(pub &'static str);
