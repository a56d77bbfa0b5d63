//! Round-trip estimation and the retransmission timeout (RFC 6298 shape).

/// Smoothed round trip and its variation, from the timestamps ACKs echo.
#[derive(Debug, Clone, Copy, Default)]
pub struct RttEstimator {
    srtt: u64,
    rttvar: u64,
    samples: u64,
}

impl RttEstimator {
    /// Adds one round-trip sample in nanoseconds.
    pub fn sample(&mut self, rtt: u64) {
        if self.samples == 0 {
            self.srtt = rtt;
            self.rttvar = rtt / 2;
        } else {
            let err = self.srtt.abs_diff(rtt);
            // rttvar = 3/4 rttvar + 1/4 |err|; srtt = 7/8 srtt + 1/8 rtt
            self.rttvar = self.rttvar - self.rttvar / 4 + err / 4;
            self.srtt = self.srtt - self.srtt / 8 + rtt / 8;
        }
        self.samples += 1;
    }

    /// Smoothed round trip, if any sample was taken.
    pub fn srtt(&self) -> Option<u64> {
        (self.samples > 0).then_some(self.srtt)
    }

    /// Number of samples taken.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Base timeout: `srtt + 4 rttvar` clamped to `[min, max]`, or `initial` before the
    /// first sample.
    pub fn base_rto(&self, initial: u64, min: u64, max: u64) -> u64 {
        if self.samples == 0 {
            return initial;
        }
        self.srtt
            .saturating_add(self.rttvar.saturating_mul(4))
            .clamp(min, max)
    }
}

/// Timeout for the `attempt`-th send on a route (1-based): `base * 2^(attempt-1)`,
/// truncated at `max`.
pub fn backoff(base: u64, attempt: u32, max: u64) -> u64 {
    let shift = attempt.saturating_sub(1).min(30);
    base.saturating_mul(1u64 << shift).min(max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_then_truncates() {
        assert_eq!(backoff(10, 1, 1000), 10);
        assert_eq!(backoff(10, 2, 1000), 20);
        assert_eq!(backoff(10, 5, 1000), 160);
        assert_eq!(backoff(10, 8, 1000), 1000);
        assert_eq!(backoff(10, u32::MAX, 1000), 1000);
    }

    #[test]
    fn estimator_tracks_samples() {
        let mut r = RttEstimator::default();
        assert_eq!(r.base_rto(7, 1, 100), 7);
        r.sample(40);
        assert_eq!(r.srtt(), Some(40));
        assert_eq!(r.base_rto(7, 1, 1000), 40 + 4 * 20);
        for _ in 0..100 {
            r.sample(40);
        }
        assert!(r.base_rto(7, 50, 1000) >= 50);
    }
}
