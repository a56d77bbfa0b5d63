//! The engine's settings, read once at MPI_Init through `steadfast_config` (where every
//! `STEADFAST_*` variable is listed with its default and meaning).

use std::time::Duration;

use steadfast_config::{lookup, parse, parse_or};

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
    /// `STEADFAST_PEER_SPIN`: where waits yield at once (`spin` 0), polls a wait for one
    /// rank makes before each yield while that rank runs on another CPU and owes this one
    /// its message (default 10; 0: none).
    pub peer_spin: u32,
    /// `STEADFAST_SLEEP_MS`: longest single sleep while blocked (default 100 ms).
    pub sleep: Duration,
    /// `STEADFAST_CMA`: 1 to move every large message between ranks of one host with a
    /// single `process_vm_readv` copy, 0 never to. Unset: the pipelined copy through the
    /// shared ring, which both ranks' CPUs share, except for the blocks the collectives ask
    /// to be read by their receivers (`coll::sched::SingleCopy`: a linear Scatter's, and
    /// where this host's single copy is fast, [`steadfast_paths::cma::fast_here`], a linear
    /// Bcast's, a crowded Alltoall's of 256 KiB blocks and a crowded binomial Reduce's of
    /// 128 KiB vectors).
    pub cma: Option<bool>,
    /// Path settings (parsed by `steadfast_paths::setup`):
    /// - `STEADFAST_CHECKSUM`: `crc32c` (default) or `none`, for every path or per path
    ///   (`udp=crc32c,shm=none`): end-to-end CRC32C of frames and ring records.
    /// - `STEADFAST_FAULTS`: fault injection, e.g. `path=udp,drop=0.01,corrupt=0.001,seed=7`
    ///   (keys: path, drop, dup, reorder, corrupt, bus, seed, after). Default: none.
    /// - `STEADFAST_ROUTES`: UDP routes: subnets, interface names or addresses, comma
    ///   separated (one socket per route), or `auto`. Default: the interface that reaches
    ///   the launcher (127.0.0.1 on one host).
    /// - `STEADFAST_NET_PATH`: `udp` or `tcp` between ranks on different hosts (default
    ///   udp when the job's path is shm, else the job's path).
    /// - `STEADFAST_HOSTMAP`: host index of each rank (`0*4,1*4`), set by the launcher.
    /// - `STEADFAST_UDP_FRAG`: UDP fragment payload bytes (default 8192; 32768 when every
    ///   route is on the loopback interface).
    /// - `STEADFAST_UDP_WINDOW`: unacknowledged udp bytes in flight per peer (default
    ///   1 MiB off the host, 4 MiB on loopback; the channel has no congestion control).
    /// - `STEADFAST_PROBE_MS`: route heartbeat and fail-back probe interval (default 50);
    ///   a route missing 3 heartbeats while another answers is failed over.
    /// - `STEADFAST_RETRIES`: sends of a fragment on one route before the route is
    ///   declared failed (default 6).
    /// - `STEADFAST_CONTROL`: the launcher's control address (set by the launcher).
    pub paths: steadfast_paths::setup::Settings,
}

impl Config {
    /// Read the configuration from the environment.
    pub fn from_env() -> Config {
        Config {
            eager_limit: parse("STEADFAST_EAGER_LIMIT", "a number of bytes"),
            shm_ring: parse("STEADFAST_SHM_RING", "a number of bytes"),
            spin: parse_or("STEADFAST_SPIN", 2000, "a count"),
            yields: parse_or("STEADFAST_YIELDS", 20, "a count"),
            peer_spin: parse_or("STEADFAST_PEER_SPIN", 10, "a count"),
            sleep: Duration::from_millis(parse_or("STEADFAST_SLEEP_MS", 100, "milliseconds")),
            cma: parse::<u32>("STEADFAST_CMA", "0 or 1").map(|v| v != 0),
            paths: steadfast_paths::setup::Settings {
                checksum: lookup("STEADFAST_CHECKSUM"),
                faults: lookup("STEADFAST_FAULTS"),
                routes: lookup("STEADFAST_ROUTES"),
                net_path: lookup("STEADFAST_NET_PATH"),
                hostmap: lookup("STEADFAST_HOSTMAP"),
                udp_frag: parse("STEADFAST_UDP_FRAG", "a number of bytes"),
                udp_window: parse("STEADFAST_UDP_WINDOW", "a number of bytes"),
                probe_ms: parse("STEADFAST_PROBE_MS", "milliseconds"),
                retries: parse("STEADFAST_RETRIES", "a count"),
                control: parse("STEADFAST_CONTROL", "an IP:PORT address"),
                shm_ring: None,
            },
        }
    }
}
