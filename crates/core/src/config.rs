//! Every `STEADFAST_*` tunable the engine reads, with its default, in one place.

use std::time::Duration;

fn env_parse<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(v) => v.trim().parse().unwrap_or_else(|_| {
            eprintln!("steadfast: ignoring {name}={v:?} (not a valid value)");
            default
        }),
        Err(_) => default,
    }
}

/// Engine configuration read from the environment at MPI_Init.
#[derive(Debug, Clone)]
pub struct Config {
    /// `STEADFAST_EAGER_LIMIT`: largest message sent eagerly (bytes); larger ones use
    /// rendezvous. Default: 16 KiB on shared memory, 64 KiB on TCP.
    pub eager_limit: Option<usize>,
    /// `STEADFAST_SHM_RING`: bytes per sender/receiver ring (default scales with ranks).
    pub shm_ring: Option<usize>,
    /// `STEADFAST_SPIN`: idle progress polls before yielding the CPU (default 2000).
    pub spin: u32,
    /// `STEADFAST_YIELDS`: `sched_yield` rounds after spinning, before sleeping (default 20).
    pub yields: u32,
    /// `STEADFAST_SLEEP_MS`: longest single sleep while blocked (default 100 ms).
    pub sleep: Duration,
    /// `STEADFAST_CMA`: 1 to use single-copy `process_vm_readv` on one host (default 1).
    pub cma: bool,
}

impl Config {
    /// Read the configuration from the environment.
    pub fn from_env() -> Config {
        Config {
            eager_limit: std::env::var("STEADFAST_EAGER_LIMIT").ok().and_then(|v| v.parse().ok()),
            shm_ring: std::env::var("STEADFAST_SHM_RING").ok().and_then(|v| v.parse().ok()),
            spin: env_parse("STEADFAST_SPIN", 2000),
            yields: env_parse("STEADFAST_YIELDS", 20),
            sleep: Duration::from_millis(env_parse("STEADFAST_SLEEP_MS", 100)),
            cma: env_parse::<u32>("STEADFAST_CMA", 1) != 0,
        }
    }
}
