//! What a channel did, for the `STEADFAST_STATS=1` report and for tests.

use std::fmt;

macro_rules! counters {
    ($( $(#[$doc:meta])* $name:ident ),* $(,)?) => {
        /// Event counts of one channel (or a sum of channels, see [`Counters::add`]).
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub struct Counters {
            $( $(#[$doc])* pub $name: u64, )*
        }

        impl Counters {
            /// Adds every counter of `other` to `self`.
            pub fn add(&mut self, other: &Counters) {
                $( self.$name += other.$name; )*
            }

            /// Name and value of every counter, in declaration order.
            pub fn fields(&self) -> Vec<(&'static str, u64)> {
                vec![ $( (stringify!($name), self.$name), )* ]
            }
        }
    };
}

counters! {
    /// Messages accepted by `send`.
    msgs_sent,
    /// Fragments transmitted for the first time.
    frags_sent,
    /// Payload bytes transmitted for the first time.
    bytes_sent,
    /// Fragment retransmissions (any cause).
    retransmits,
    /// Retransmission timers that fired and led to a resend.
    timeouts,
    /// Resends triggered by the receiver's gap hint before the timer.
    fast_retransmits,
    /// Timers that fired for fragments the receiver holds but has not delivered yet:
    /// re-armed without a resend (LA-MPI's use of the non-specific ACK).
    retransmits_held,
    /// Resends triggered by a NACK.
    nack_retransmits,
    /// Fragments rebound to another route by `fail_route`.
    rebound,
    /// `RetransmitExhausted` reports.
    exhausted,
    /// Fragments of ours acknowledged as delivered.
    frags_acked,
    /// Messages of ours fully acknowledged.
    msgs_acked,
    /// ACK frames received.
    acks_received,
    /// ACKs saying a fragment of ours arrived past a gap and is held by the peer.
    receipts_received,
    /// NACK frames received.
    nacks_received,
    /// Acknowledgment fields claiming sequence numbers we never sent (ignored).
    bad_acks,
    /// Data fragments accepted (checksum verified) into the receive buffer.
    frags_received,
    /// Fragments handed to the application.
    frags_delivered,
    /// Payload bytes handed to the application.
    bytes_delivered,
    /// Messages completely handed to the application.
    msgs_delivered,
    /// Duplicate fragments dropped.
    dup_dropped,
    /// Fragments dropped because they were beyond the receive window or buffer.
    window_dropped,
    /// Frames dropped because the header failed its checksum or was malformed.
    malformed_dropped,
    /// Fragments whose payload failed its checksum (answered with a NACK).
    corrupt_payload,
    /// Fragments without a payload checksum refused because this end requires one.
    unchecked_refused,
    /// Frames carrying another job's key.
    foreign_dropped,
    /// Frames with our key but another source or destination id.
    misdirected_dropped,
    /// ACK frames sent (specific or not).
    acks_sent,
    /// NACK frames sent.
    nacks_sent,
    /// Receipt ACKs sent for fragments that arrived past a gap.
    receipts_sent,
    /// NACKs or receipts not sent because their queue was full.
    answers_skipped,
    /// Fragments delivered out of message order (a peer bug; reported, never expected).
    protocol_errors,
}

impl Counters {
    /// Frames that arrived damaged and were detected (header or payload checksum).
    pub fn corrupt_detected(&self) -> u64 {
        self.malformed_dropped + self.corrupt_payload
    }
}

impl fmt::Display for Counters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (name, value) in self.fields() {
            if value == 0 {
                continue;
            }
            if !first {
                f.write_str(" ")?;
            }
            write!(f, "{name}={value}")?;
            first = false;
        }
        Ok(())
    }
}
