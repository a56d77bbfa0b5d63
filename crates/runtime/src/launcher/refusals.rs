//! Why control connections were refused, for the launcher's closing message: an operator
//! must be able to tell a wrong key from a duplicate rank or a full connection budget.

use crate::server::{ConnId, RejectReason};
use std::collections::{BTreeMap, HashMap};

/// Tally of refused control connections by cause.
#[derive(Default)]
pub(super) struct Refusals {
    /// Connections the launcher itself closed, with why, before the control core reports
    /// them as incomplete.
    pending: HashMap<ConnId, &'static str>,
    counts: BTreeMap<&'static str, u64>,
}

const OVER_LIMIT: &str = "over the connection limit";
const TIMED_OUT: &str = "no handshake in time";

impl Refusals {
    /// The launcher closes `conn` because a connection budget is full.
    pub(super) fn over_limit(&mut self, conn: ConnId) {
        self.pending.insert(conn, OVER_LIMIT);
    }

    /// The launcher closes `conn` because it sent no valid hello in time.
    pub(super) fn timed_out(&mut self, conn: ConnId) {
        self.pending.insert(conn, TIMED_OUT);
    }

    /// The control core refused `conn` for `reason`.
    pub(super) fn record(&mut self, conn: ConnId, reason: &RejectReason) {
        let cause = match (self.pending.remove(&conn), reason) {
            (Some(c), _) => c,
            (None, RejectReason::BadKey) => "wrong job key",
            (None, RejectReason::DuplicateRank(_)) => "rank already connected or exited",
            (None, RejectReason::BadRank(_)) => "rank outside the job",
            (None, RejectReason::Version(_)) => "other protocol version",
            (None, RejectReason::Malformed(_) | RejectReason::NotHello) => "malformed handshake",
            (None, RejectReason::Incomplete) => "closed before the handshake",
        };
        *self.counts.entry(cause).or_default() += 1;
    }

    /// `2 wrong job key, 1 malformed handshake`.
    pub(super) fn summary(&self) -> String {
        let parts: Vec<String> = self
            .counts
            .iter()
            .map(|(c, n)| format!("{n} {c}"))
            .collect();
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causes_are_named_not_guessed() {
        let mut r = Refusals::default();
        r.record(1, &RejectReason::BadKey);
        r.record(2, &RejectReason::DuplicateRank(0));
        r.over_limit(3);
        r.record(3, &RejectReason::Incomplete);
        r.record(4, &RejectReason::Incomplete);
        r.timed_out(5);
        r.record(5, &RejectReason::Incomplete);
        assert_eq!(
            r.summary(),
            "1 closed before the handshake, 1 no handshake in time, 1 over the connection limit, \
             1 rank already connected or exited, 1 wrong job key"
        );
    }
}
