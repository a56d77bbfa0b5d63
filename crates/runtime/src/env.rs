//! The environment contract between `steadfast run` and each rank.
//!
//! The launcher sets every variable below; a process started without `STEADFAST_RANK`
//! is a singleton. Parsing lives here, in one place, for both sides.

use crate::error::BootstrapError;
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;

/// This process's rank in the world, `0..STEADFAST_SIZE`.
pub const RANK: &str = "STEADFAST_RANK";
/// Number of ranks in the world.
pub const SIZE: &str = "STEADFAST_SIZE";
/// This process's index among the ranks on its host.
pub const LOCAL_RANK: &str = "STEADFAST_LOCAL_RANK";
/// CPU binding policy of the ranks (`none`, `core`, `hwthread`; `steadfast run --bind-to`).
pub const BIND_TO: &str = "STEADFAST_BIND_TO";
/// Number of ranks on this host.
pub const LOCAL_SIZE: &str = "STEADFAST_LOCAL_SIZE";
/// Random hex string unique to the job.
pub const JOBID: &str = "STEADFAST_JOBID";
/// Random 64-bit secret, 16 hex digits, proven to the launcher on connect.
pub const JOB_KEY: &str = "STEADFAST_JOB_KEY";
/// Private (mode 0700) per-job directory, removed by the launcher at job end.
pub const JOBDIR: &str = "STEADFAST_JOBDIR";
/// `IP:PORT` of the launcher's control server.
pub const CONTROL: &str = "STEADFAST_CONTROL";
/// Data path between ranks: `shm`, `tcp` or `udp`.
pub const PATH: &str = "STEADFAST_PATH";
/// Host index of every rank (`0*4,1*4`: ranks 0–3 on host 0, 4–7 on host 1); set only
/// for multi-host jobs.
pub const HOSTMAP: &str = "STEADFAST_HOSTMAP";
/// Name of the host a rank was started on (multi-host jobs).
pub const HOST: &str = "STEADFAST_HOST";
/// Fault-tolerance mode: `abort` or `run-through`.
pub const FT: &str = "STEADFAST_FT";
/// Which start of this world rank the process is: 0 (or unset) for the first, k+1 when
/// the launcher's relaunch policy started the rank again after incarnation k died.
pub const INCARNATION: &str = "STEADFAST_INCARNATION";
/// Job-wide process index of this world's rank 0 (0 for the processes started with the
/// job; processes started by `MPI_Comm_spawn` come after every earlier one).
pub const PROC_BASE: &str = "STEADFAST_PROC_BASE";
/// Processes started by `MPI_Comm_spawn`: `CTX:P0,P1,...`, the context id of the
/// intercommunicator to the parents and the parents' job-wide process indices in rank order.
pub const PARENT: &str = "STEADFAST_PARENT";
/// `MPI_APPNUM`: which command of `MPI_Comm_spawn_multiple` started the process (set by the
/// launcher in spawned processes only; 0 when unset).
pub const APPNUM: &str = "STEADFAST_APPNUM";
/// `MPI_UNIVERSE_SIZE`.
pub const UNIVERSE_SIZE: &str = "STEADFAST_UNIVERSE_SIZE";

/// Directory of the job's process images and channel records (`--ft coordinated`).
pub const CKPT_DIR: &str = "STEADFAST_CKPT_DIR";
/// Address (`host:port`) of the job's checkpoint server (`--ft coordinated`).
pub const CKPT_SERVER: &str = "STEADFAST_CKPT_SERVER";
/// File holding a standalone checkpoint server's key (unset: the launcher's own server,
/// whose key is derived from the job key).
pub const CKPT_SERVER_KEY_FILE: &str = "STEADFAST_CKPT_SERVER_KEY_FILE";
/// The job's name on the checkpoint server.
pub const CKPT_JOB: &str = "STEADFAST_CKPT_JOB";
/// `drop`: a rank deletes its local copies of a wave once the wave is committed, so that
/// only the checkpoint server holds images (`--ckpt-local drop`).
pub const CKPT_LOCAL: &str = "STEADFAST_CKPT_LOCAL";
/// `--ft pessimistic`/`causal` with `--ckpt-interval`: directory of the ranks' own process
/// images (`rank-R.img-N`); unset, no images are taken in these modes.
pub const MLOG_IMAGES: &str = "STEADFAST_MLOG_IMAGES";
/// `--ft channel-memory`: the channel memory servers (`host:port,…`; rank r's stream is
/// kept by the (r mod count)-th).
pub const CM_ADDRS: &str = "STEADFAST_CM_ADDRS";
/// Standalone channel memory servers: the file holding their key (owner-only, on every host).
pub const CM_KEY_FILE: &str = "STEADFAST_CM_KEY_FILE";

/// Transport the ranks should use between themselves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PathKind {
    /// Shared-memory rings (same host).
    #[default]
    Shm,
    /// TCP sockets.
    Tcp,
    /// UDP datagrams under the reliable channel.
    Udp,
}

/// What happens to the job when a rank dies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FtMode {
    /// Tear the whole job down (classic MPI behaviour).
    #[default]
    Abort,
    /// Survivors keep running and are told which rank died.
    RunThrough,
    /// As run-through, and the launcher starts a dead rank again as its next incarnation;
    /// the survivors reconnect to it. The launcher's notices are the failure detector.
    Relaunch,
    /// Coordinated checkpoints (Chandy-Lamport waves) and rollback: when a rank dies, every
    /// rank is started again from the last committed global checkpoint; the application is
    /// not told.
    Coordinated,
    /// Pessimistic message logging (MPICH-V2): a dead rank alone is started again and
    /// re-executes, receiving the logged messages in the logged order; the application is
    /// not told.
    Pessimistic,
    /// Causal message logging (MPICH-Vcausal): as pessimistic, with determinants
    /// piggybacked on messages instead of waited for.
    Causal,
    /// Channel memories (MPICH-V1): every message goes through its receiver's channel
    /// memory, which keeps it and fixes the receiver's order.
    ChannelMemory,
}

impl FtMode {
    /// Failures are reported to the application instead of ending the job.
    pub fn runs_through(self) -> bool {
        matches!(self, FtMode::RunThrough | FtMode::Relaunch)
    }

    /// A message-logging mode (only the failed rank is started again).
    pub fn logs_messages(self) -> bool {
        matches!(self, FtMode::Pessimistic | FtMode::Causal | FtMode::ChannelMemory)
    }

    /// The launcher starts a dead rank again while the others run.
    pub fn relaunches(self) -> bool {
        self == FtMode::Relaunch || self.logs_messages()
    }
}

/// A value that names no known variant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown value {0:?}")]
pub struct UnknownValue(pub String);

impl FromStr for PathKind {
    type Err = UnknownValue;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "shm" => Ok(PathKind::Shm),
            "tcp" => Ok(PathKind::Tcp),
            "udp" => Ok(PathKind::Udp),
            _ => Err(UnknownValue(s.to_owned())),
        }
    }
}

impl fmt::Display for PathKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PathKind::Shm => "shm",
            PathKind::Tcp => "tcp",
            PathKind::Udp => "udp",
        })
    }
}

impl FromStr for FtMode {
    type Err = UnknownValue;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "abort" => Ok(FtMode::Abort),
            "run-through" => Ok(FtMode::RunThrough),
            "relaunch" => Ok(FtMode::Relaunch),
            "coordinated" => Ok(FtMode::Coordinated),
            "pessimistic" => Ok(FtMode::Pessimistic),
            "causal" => Ok(FtMode::Causal),
            "channel-memory" => Ok(FtMode::ChannelMemory),
            _ => Err(UnknownValue(s.to_owned())),
        }
    }
}

impl fmt::Display for FtMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FtMode::Abort => "abort",
            FtMode::RunThrough => "run-through",
            FtMode::Relaunch => "relaunch",
            FtMode::Coordinated => "coordinated",
            FtMode::Pessimistic => "pessimistic",
            FtMode::Causal => "causal",
            FtMode::ChannelMemory => "channel-memory",
        })
    }
}

/// Everything the launcher told a rank through its environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobEnv {
    /// World rank.
    pub rank: u32,
    /// World size.
    pub size: u32,
    /// Rank among the ranks on this host.
    pub local_rank: u32,
    /// Ranks on this host.
    pub local_size: u32,
    /// Job identifier (hex).
    pub jobid: String,
    /// Job secret.
    pub job_key: u64,
    /// Per-job private directory.
    pub jobdir: PathBuf,
    /// Launcher control server address.
    pub control: SocketAddr,
    /// Data path between ranks.
    pub path: PathKind,
    /// Fault-tolerance mode.
    pub ft: FtMode,
    /// Incarnation of this world rank (0: first start).
    pub incarnation: u16,
    /// Job-wide process index of world rank 0 ([`PROC_BASE`]).
    pub proc_base: u32,
    /// [`PARENT`], for processes started by `MPI_Comm_spawn`.
    pub parent: Option<String>,
    /// [`UNIVERSE_SIZE`].
    pub universe_size: Option<u32>,
}

impl JobEnv {
    /// Reads the contract from the process environment. `Ok(None)` means singleton
    /// (no `STEADFAST_RANK`); any other missing or malformed variable is an error.
    pub fn from_env() -> Result<Option<JobEnv>, BootstrapError> {
        Self::from_lookup(steadfast_config::lookup)
    }

    /// Same as [`JobEnv::from_env`] with an arbitrary variable source (for tests).
    pub fn from_lookup(
        get: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<JobEnv>, BootstrapError> {
        if get(RANK).is_none() {
            return Ok(None);
        }
        let var = |name: &'static str| get(name).ok_or(BootstrapError::MissingVar(name));
        fn parse<T: FromStr>(name: &'static str, value: String) -> Result<T, BootstrapError>
        where
            T::Err: fmt::Display,
        {
            value.parse::<T>().map_err(|e| BootstrapError::BadVar {
                name,
                reason: format!("{value:?}: {e}"),
            })
        }
        let env = JobEnv {
            rank: parse(RANK, var(RANK)?)?,
            size: parse(SIZE, var(SIZE)?)?,
            local_rank: parse(LOCAL_RANK, var(LOCAL_RANK)?)?,
            local_size: parse(LOCAL_SIZE, var(LOCAL_SIZE)?)?,
            jobid: var(JOBID)?,
            job_key: {
                let raw = var(JOB_KEY)?;
                u64::from_str_radix(&raw, 16).map_err(|e| BootstrapError::BadVar {
                    name: JOB_KEY,
                    reason: e.to_string(),
                })?
            },
            jobdir: PathBuf::from(var(JOBDIR)?),
            control: parse(CONTROL, var(CONTROL)?)?,
            path: parse(PATH, var(PATH)?)?,
            ft: parse(FT, var(FT)?)?,
            incarnation: match get(INCARNATION) {
                Some(v) => parse(INCARNATION, v)?,
                None => 0,
            },
            proc_base: match get(PROC_BASE) {
                Some(v) => parse(PROC_BASE, v)?,
                None => 0,
            },
            parent: get(PARENT).filter(|p| !p.is_empty()),
            universe_size: match get(UNIVERSE_SIZE) {
                Some(v) if !v.is_empty() => Some(parse(UNIVERSE_SIZE, v)?),
                _ => None,
            },
        };
        let bad = |name, reason: &str| BootstrapError::BadVar {
            name,
            reason: reason.to_owned(),
        };
        if env.size == 0 {
            return Err(bad(SIZE, "world size is zero"));
        }
        if env.rank >= env.size {
            return Err(bad(RANK, "rank is not below the world size"));
        }
        if env.local_size == 0 || env.local_size > env.size {
            return Err(bad(LOCAL_SIZE, "local size outside 1..=size"));
        }
        if env.local_rank >= env.local_size {
            return Err(bad(LOCAL_RANK, "local rank is not below the local size"));
        }
        if env.jobid.is_empty() || !env.jobid.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad(JOBID, "job id must be non-empty hex"));
        }
        Ok(Some(env))
    }

    /// The variables a launcher must set for this rank, as (name, value) pairs.
    pub fn to_vars(&self) -> Vec<(&'static str, String)> {
        vec![
            (RANK, self.rank.to_string()),
            (SIZE, self.size.to_string()),
            (LOCAL_RANK, self.local_rank.to_string()),
            (LOCAL_SIZE, self.local_size.to_string()),
            (JOBID, self.jobid.clone()),
            (JOB_KEY, format!("{:016x}", self.job_key)),
            (JOBDIR, self.jobdir.to_string_lossy().into_owned()),
            (CONTROL, self.control.to_string()),
            (PATH, self.path.to_string()),
            (FT, self.ft.to_string()),
            (INCARNATION, self.incarnation.to_string()),
            (PROC_BASE, self.proc_base.to_string()),
            (PARENT, self.parent.clone().unwrap_or_default()),
            (UNIVERSE_SIZE, self.universe_size.map(|u| u.to_string()).unwrap_or_default()),
        ]
    }

    /// This process's job-wide index (the rank it names itself by to the launcher).
    pub fn proc_index(&self) -> u32 {
        self.proc_base + self.rank
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn sample() -> JobEnv {
        JobEnv {
            rank: 3,
            size: 8,
            local_rank: 3,
            local_size: 8,
            jobid: "00ff12ab".into(),
            job_key: 0x0123_4567_89ab_cdef,
            jobdir: "/dev/shm/steadfast-00ff12ab".into(),
            control: "127.0.0.1:4567".parse().unwrap(),
            path: PathKind::Tcp,
            ft: FtMode::RunThrough,
            incarnation: 0,
            proc_base: 0,
            parent: None,
            universe_size: Some(16),
        }
    }

    #[test]
    fn vars_roundtrip() {
        let env = sample();
        let map: HashMap<_, _> = env.to_vars().into_iter().collect();
        let back = JobEnv::from_lookup(|k| map.get(k).cloned())
            .unwrap()
            .unwrap();
        assert_eq!(back, env);
    }

    #[test]
    fn singleton_and_errors() {
        assert_eq!(JobEnv::from_lookup(|_| None).unwrap(), None);
        let env = sample();
        let mut map: HashMap<_, _> = env.to_vars().into_iter().collect();
        map.remove(CONTROL);
        assert!(matches!(
            JobEnv::from_lookup(|k| map.get(k).cloned()),
            Err(BootstrapError::MissingVar(CONTROL))
        ));
        let mut map: HashMap<_, _> = env.to_vars().into_iter().collect();
        map.insert(RANK, "8".into());
        assert!(matches!(
            JobEnv::from_lookup(|k| map.get(k).cloned()),
            Err(BootstrapError::BadVar { name: RANK, .. })
        ));
        let mut map: HashMap<_, _> = env.to_vars().into_iter().collect();
        map.insert(FT, "sometimes".into());
        assert!(matches!(
            JobEnv::from_lookup(|k| map.get(k).cloned()),
            Err(BootstrapError::BadVar { name: FT, .. })
        ));
    }
}
