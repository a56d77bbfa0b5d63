//! Tunables of the membership protocol, with defaults for a real job.

use std::time::Duration;

/// Protocol parameters; the runtime fills them from its `STEADFAST_*` settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// k: every tree node has 2^k children (1 = binary, 2 = four children, ...).
    pub fanout_log2: u8,
    /// Wait for a FAILURE_ACK per tree level below a node; a silent child is then suspected.
    pub ack_timeout: Duration,
    /// Wait for FAILURE_DET_ACK after reporting a failure; silence means the root is dead too.
    pub report_timeout: Duration,
    /// Wait for an answer from one join candidate before trying the next (linear scan).
    pub join_timeout: Duration,
    /// How often a root probes known ids outside its view so split groups merge after a
    /// partition heals; `None` turns healing off (a partition then leaves separate groups).
    pub probe_interval: Option<Duration>,
    /// At most this many ids probed per probe round.
    pub probe_batch: u32,
    /// How often a member tells its tree parent which view it holds, so a process left
    /// behind (its group moved on or merged elsewhere) finds out; `None` turns it off.
    pub sync_interval: Option<Duration>,
    /// When excluded by a view (a false suspicion), re-join at once with a new incarnation.
    pub auto_rejoin: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            fanout_log2: 2,
            ack_timeout: Duration::from_millis(50),
            report_timeout: Duration::from_millis(100),
            join_timeout: Duration::from_millis(200),
            probe_interval: None,
            probe_batch: 8,
            sync_interval: Some(Duration::from_millis(500)),
            auto_rejoin: false,
        }
    }
}

/// A configuration value out of its allowed range.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// fanout_log2 must be in 1..=8.
    #[error("fanout_log2 must be in 1..=8, got {0}")]
    Fanout(u8),
    /// A timeout was zero.
    #[error("{0} must be greater than zero")]
    ZeroTimeout(&'static str),
    /// probe_batch was zero while probing is on.
    #[error("probe_batch must be at least 1 when probing is enabled")]
    ProbeBatch,
}

impl Config {
    /// Checks every field; the state machine only accepts a validated config.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(1..=8).contains(&self.fanout_log2) {
            return Err(ConfigError::Fanout(self.fanout_log2));
        }
        for (name, d) in [
            ("ack_timeout", self.ack_timeout),
            ("report_timeout", self.report_timeout),
            ("join_timeout", self.join_timeout),
        ] {
            if d.is_zero() {
                return Err(ConfigError::ZeroTimeout(name));
            }
        }
        if self.sync_interval.is_some_and(|d| d.is_zero()) {
            return Err(ConfigError::ZeroTimeout("sync_interval"));
        }
        if let Some(p) = self.probe_interval {
            if p.is_zero() {
                return Err(ConfigError::ZeroTimeout("probe_interval"));
            }
            if self.probe_batch == 0 {
                return Err(ConfigError::ProbeBatch);
            }
        }
        Ok(())
    }
}
