//! Every `STEADFAST_*` setting of the failure detector and the membership service, read in
//! one place, with its default.

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::time::Duration;

use steadfast_membership::Config as ProtocolConfig;

/// `STEADFAST_MEMBERSHIP`: `0` turns the control thread off (default `1`: on whenever the
/// job has more than one rank).
pub const MEMBERSHIP: &str = "STEADFAST_MEMBERSHIP";
/// `STEADFAST_HEARTBEAT_MS`: a tree neighbour silent this long is asked HOW_ARE_YOU
/// (default 200 ms; the query is repeated every period while it stays silent).
pub const HEARTBEAT_MS: &str = "STEADFAST_HEARTBEAT_MS";
/// `STEADFAST_SUSPECT_MS`: a tree neighbour silent this long is reported failed
/// (default 2000 ms; at least twice the heartbeat).
pub const SUSPECT_MS: &str = "STEADFAST_SUSPECT_MS";
/// `STEADFAST_FANOUT_LOG2`: k, the membership tree has 2^k children per node (default 2).
pub const FANOUT_LOG2: &str = "STEADFAST_FANOUT_LOG2";
/// `STEADFAST_MEMBERSHIP_ACK_MS`: wait for FAILURE_ACK per tree level below a node
/// before the silent child counts as failed (default 200 ms).
pub const ACK_MS: &str = "STEADFAST_MEMBERSHIP_ACK_MS";
/// `STEADFAST_MEMBERSHIP_REPORT_MS`: wait for FAILURE_DET_ACK before the coordinator
/// counts as failed (default 500 ms).
pub const REPORT_MS: &str = "STEADFAST_MEMBERSHIP_REPORT_MS";
/// `STEADFAST_MEMBERSHIP_SYNC_MS`: how often a member tells its tree parent which view it
/// holds (default 500 ms; 0 = never).
pub const SYNC_MS: &str = "STEADFAST_MEMBERSHIP_SYNC_MS";
/// `STEADFAST_FT_NOTICE_GRACE_MS`: the launcher tells every survivor about an exit, so only
/// the coordinator (lowest live rank) reports it at once; the others report it only if no
/// view without the rank arrived within this grace (default 100 ms).
pub const NOTICE_GRACE_MS: &str = "STEADFAST_FT_NOTICE_GRACE_MS";
/// `STEADFAST_FT_RT`: `1` runs the control thread at real-time priority (SCHED_RR 1) when
/// the process may (root, CAP_SYS_NICE or RLIMIT_RTPRIO), so detection and view changes are
/// not delayed behind computing or oversubscribed processes. Off by default (`0`): on a
/// machine with few cores, real-time control threads were seen starving the application
/// threads of their own processes (a revoke that never got processed).
pub const FT_RT: &str = "STEADFAST_FT_RT";
/// `STEADFAST_FT_DL_RUNTIME_US` / `STEADFAST_FT_DL_PERIOD_US`: the control thread runs under
/// the deadline scheduler (SCHED_DEADLINE) with this CPU budget per period when the process
/// may (root or CAP_SYS_NICE, and the kernel admits the bandwidth); otherwise it falls back
/// to the short fair slice. A woken deadline thread runs before every fair and real-time
/// thread, so a membership hop does not queue behind the application, and the kernel stops
/// it once it used its budget in a period, so it can never take more than runtime/period
/// of a CPU (10 % by default: 1000 µs every 10 ms). Runtime 0 turns it off.
pub const FT_DL_RUNTIME_US: &str = "STEADFAST_FT_DL_RUNTIME_US";
/// See [`FT_DL_RUNTIME_US`].
pub const FT_DL_PERIOD_US: &str = "STEADFAST_FT_DL_PERIOD_US";
/// `STEADFAST_FT_SLICE_US`: time slice the control thread asks the fair scheduler for
/// (default 100 µs, the kernel's minimum; 0 = the kernel's default). A thread with a shorter
/// slice than the running one preempts it when woken (Linux ≥ 6.12), so a membership hop
/// does not wait for a busy thread's slice to end; it gets no more CPU than before and needs
/// no privilege. Used when the control thread runs neither under the deadline scheduler nor
/// at real-time priority.
pub const FT_SLICE_US: &str = "STEADFAST_FT_SLICE_US";
/// `STEADFAST_FT_TRACE_SCHED`: `1` adds the control thread's run-queue wait to the trace
/// (`rx` lines, and `busy` lines for long turns of the loop); costs two reads of
/// `/proc/thread-self/schedstat` per turn, so it is off by default.
pub const FT_TRACE_SCHED: &str = "STEADFAST_FT_TRACE_SCHED";
/// `STEADFAST_FT_HOST`: address the control channel listens on and publishes
/// (default 127.0.0.1: the launcher starts single-host jobs).
pub const FT_HOST: &str = "STEADFAST_FT_HOST";
/// `STEADFAST_FT_TRACE`: directory where every rank writes `ft.<rank>.trace` (suspicions,
/// installed views, Ts, per-message latency and handling time) when it stops; unset = off.
pub const FT_TRACE: &str = "STEADFAST_FT_TRACE";

/// Settings of one rank's control thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FtConfig {
    /// Whether to run the control thread at all.
    pub enabled: bool,
    /// Silence after which a tree neighbour gets a HOW_ARE_YOU query.
    pub heartbeat: Duration,
    /// Silence after which a tree neighbour is suspected.
    pub suspect: Duration,
    /// How long a launcher notice waits at a non-coordinator before it is reported.
    pub notice_grace: Duration,
    /// Protocol parameters (fan-out, ack / report timeouts, sync period).
    pub protocol: ProtocolConfig,
    /// Run the control thread at real-time priority if permitted.
    pub realtime: bool,
    /// Deadline-scheduler budget of the control thread (runtime, period), if permitted.
    pub deadline: Option<(Duration, Duration)>,
    /// Short fair-scheduler time slice for the control thread (`None`: the kernel's default).
    pub slice: Option<Duration>,
    /// Listening address of the control channel.
    pub host: IpAddr,
    /// Where to write the per-rank trace, if anywhere.
    pub trace_dir: Option<PathBuf>,
    /// Add scheduler waits to the trace.
    pub trace_sched: bool,
    /// Leave the process (exit status [`crate::ft::EXIT_EXCLUDED`]) when the group excludes
    /// it: a process declared failed must stay failed (run-through mode). Set by the caller.
    pub exit_when_excluded: bool,
}

impl Default for FtConfig {
    fn default() -> Self {
        FtConfig {
            enabled: true,
            heartbeat: Duration::from_millis(200),
            suspect: Duration::from_millis(2000),
            notice_grace: Duration::from_millis(100),
            protocol: ProtocolConfig {
                fanout_log2: 2,
                ack_timeout: Duration::from_millis(200),
                report_timeout: Duration::from_millis(500),
                join_timeout: Duration::from_millis(500),
                probe_interval: None,
                probe_batch: 8,
                sync_interval: Some(Duration::from_millis(500)),
                auto_rejoin: false,
            },
            realtime: false,
            deadline: Some((Duration::from_micros(1000), Duration::from_micros(10_000))),
            slice: Some(Duration::from_micros(100)),
            host: IpAddr::V4(Ipv4Addr::LOCALHOST),
            trace_dir: None,
            trace_sched: false,
            exit_when_excluded: false,
        }
    }
}

impl FtConfig {
    /// Reads the settings from the process environment (see [`FtConfig::from_lookup`]).
    pub fn from_env() -> (FtConfig, Vec<String>) {
        Self::from_lookup(steadfast_config::lookup)
    }

    /// Reads the settings from `get`; a malformed or out-of-range value keeps its default
    /// and yields a warning (returned, for the caller to print).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> (FtConfig, Vec<String>) {
        let mut c = FtConfig::default();
        let mut warn = Vec::new();
        let mut num = |name: &str, min: u64, max: u64| -> Option<u64> {
            let raw = get(name)?;
            match raw.trim().parse::<u64>() {
                Ok(v) if (min..=max).contains(&v) => Some(v),
                _ => {
                    warn.push(steadfast_config::ignored(name, &raw, &format!("expected an integer in {min}..={max}")));
                    None
                }
            }
        };
        let ms = Duration::from_millis;
        if let Some(v) = num(MEMBERSHIP, 0, 1) {
            c.enabled = v == 1;
        }
        if let Some(v) = num(HEARTBEAT_MS, 1, 3_600_000) {
            c.heartbeat = ms(v);
        }
        if let Some(v) = num(SUSPECT_MS, 1, 3_600_000) {
            c.suspect = ms(v);
        }
        if let Some(v) = num(NOTICE_GRACE_MS, 0, 3_600_000) {
            c.notice_grace = ms(v);
        }
        if let Some(v) = num(FANOUT_LOG2, 1, 8) {
            c.protocol.fanout_log2 = v as u8;
        }
        if let Some(v) = num(ACK_MS, 1, 3_600_000) {
            c.protocol.ack_timeout = ms(v);
        }
        if let Some(v) = num(REPORT_MS, 1, 3_600_000) {
            c.protocol.report_timeout = ms(v);
        }
        if let Some(v) = num(SYNC_MS, 0, 3_600_000) {
            c.protocol.sync_interval = (v > 0).then(|| ms(v));
        }
        if let Some(v) = num(FT_RT, 0, 1) {
            c.realtime = v == 1;
        }
        let dl_runtime = num(FT_DL_RUNTIME_US, 0, 1_000_000);
        let dl_period = num(FT_DL_PERIOD_US, 100, 1_000_000);
        if let Some(v) = num(FT_SLICE_US, 0, 100_000) {
            c.slice = (v > 0).then(|| Duration::from_micros(v.max(100)));
        }
        if let Some(v) = num(FT_TRACE_SCHED, 0, 1) {
            c.trace_sched = v == 1;
        }
        if dl_runtime.is_some() || dl_period.is_some() {
            let (r0, p0) = c.deadline.unwrap_or_default();
            let runtime = dl_runtime.map_or(r0, Duration::from_micros);
            let period = dl_period.map_or(p0, Duration::from_micros);
            if runtime.is_zero() {
                c.deadline = None;
            } else if runtime > period {
                warn.push(format!("ignoring {FT_DL_RUNTIME_US}: the runtime must not exceed the period"));
            } else {
                c.deadline = Some((runtime, period));
            }
        }
        if let Some(raw) = get(FT_HOST) {
            match raw.trim().parse::<IpAddr>() {
                Ok(ip) => c.host = ip,
                Err(_) => warn.push(steadfast_config::ignored(FT_HOST, &raw, "not an IP address")),
            }
        }
        c.trace_dir = get(FT_TRACE).filter(|s| !s.is_empty()).map(PathBuf::from);
        // A neighbour must get at least one query before it can be suspected.
        if c.suspect < c.heartbeat * 2 {
            warn.push(format!(
                "{SUSPECT_MS} ({} ms) is below twice {HEARTBEAT_MS} ({} ms); using {} ms",
                c.suspect.as_millis(),
                c.heartbeat.as_millis(),
                (c.heartbeat * 2).as_millis()
            ));
            c.suspect = c.heartbeat * 2;
        }
        (c, warn)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn with(pairs: &[(&str, &str)]) -> (FtConfig, Vec<String>) {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        FtConfig::from_lookup(|k| map.get(k).cloned())
    }

    #[test]
    fn defaults_are_valid() {
        let (c, w) = with(&[]);
        assert!(w.is_empty());
        assert_eq!(c, FtConfig::default());
        assert!(c.protocol.validate().is_ok());
    }

    #[test]
    fn values_are_read_and_checked() {
        let (c, w) = with(&[
            (HEARTBEAT_MS, "20"),
            (SUSPECT_MS, "150"),
            (FANOUT_LOG2, "1"),
            (ACK_MS, "30"),
            (REPORT_MS, "40"),
            (SYNC_MS, "0"),
            (NOTICE_GRACE_MS, "7"),
            (MEMBERSHIP, "0"),
            (FT_RT, "0"),
            (FT_DL_RUNTIME_US, "0"),
            (FT_SLICE_US, "0"),
            (FT_TRACE_SCHED, "1"),
            (FT_HOST, "::1"),
            (FT_TRACE, "/tmp/x"),
        ]);
        assert!(w.is_empty(), "{w:?}");
        assert!(!c.enabled);
        assert!(!c.realtime);
        assert_eq!(c.deadline, None);
        assert_eq!(c.slice, None);
        assert!(c.trace_sched);
        assert_eq!(c.heartbeat, Duration::from_millis(20));
        assert_eq!(c.suspect, Duration::from_millis(150));
        assert_eq!(c.protocol.fanout_log2, 1);
        assert_eq!(c.protocol.ack_timeout, Duration::from_millis(30));
        assert_eq!(c.protocol.report_timeout, Duration::from_millis(40));
        assert_eq!(c.protocol.sync_interval, None);
        assert_eq!(c.notice_grace, Duration::from_millis(7));
        assert_eq!(c.host, "::1".parse::<IpAddr>().unwrap());
        assert_eq!(c.trace_dir, Some(PathBuf::from("/tmp/x")));

        let (c, w) = with(&[(FANOUT_LOG2, "9"), (HEARTBEAT_MS, "x"), (FT_HOST, "nope")]);
        assert_eq!(w.len(), 3, "{w:?}");
        let (c2, w2) = with(&[(FT_SLICE_US, "30")]);
        assert!(w2.is_empty());
        assert_eq!(
            c2.slice,
            Some(Duration::from_micros(100)),
            "the kernel's minimum"
        );
        assert_eq!(c.protocol.fanout_log2, 2);
        assert_eq!(c.heartbeat, FtConfig::default().heartbeat);

        let (c3, w3) = with(&[(FT_DL_RUNTIME_US, "500"), (FT_DL_PERIOD_US, "2000")]);
        assert!(w3.is_empty(), "{w3:?}");
        assert_eq!(c3.deadline, Some((Duration::from_micros(500), Duration::from_micros(2000))));
        let (c4, w4) = with(&[(FT_DL_RUNTIME_US, "5000"), (FT_DL_PERIOD_US, "2000")]);
        assert_eq!(w4.len(), 1, "{w4:?}");
        assert_eq!(c4.deadline, FtConfig::default().deadline);

        let (c, w) = with(&[(HEARTBEAT_MS, "100"), (SUSPECT_MS, "150")]);
        assert_eq!(w.len(), 1);
        assert_eq!(c.suspect, Duration::from_millis(200));
    }
}
