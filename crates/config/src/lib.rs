//! Every `STEADFAST_*` environment variable in one place.
//!
//! - [`lookup`] is the one way the project reads one of them;
//! - [`parse`], [`parse_or`] and [`flag`] turn a value into a setting, and a value that
//!   does not parse is ignored with the same warning everywhere ([`ignored`], printed once
//!   per variable by [`warn`]);
//! - [`VARS`] lists every variable with its default and meaning: `steadfast config` prints
//!   it, `docs/configuration.md` is generated from it (`steadfast config --markdown`), and a
//!   test fails when the code names a variable that is not listed here.
//!
//! Components that validate ranges themselves (the membership settings,
//! `steadfast_runtime::ft::FtConfig::from_lookup`) take [`lookup`] as their source and
//! word their warnings with [`ignored`].

use std::str::FromStr;
use std::sync::Mutex;

/// Who sets a variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A setting for users.
    Tunable,
    /// Set by the launcher (or a scheduler's bootstrap) for each rank; not for users.
    Launcher,
    /// For the project's own tests, simulator and benchmarks.
    Developer,
}

/// One variable: name, default (as a user would write it, or a description), meaning.
#[derive(Debug, Clone, Copy)]
pub struct Var {
    pub name: &'static str,
    pub kind: Kind,
    pub default: &'static str,
    pub meaning: &'static str,
}

const fn v(name: &'static str, kind: Kind, default: &'static str, meaning: &'static str) -> Var {
    Var { name, kind, default, meaning }
}

use Kind::{Developer, Launcher, Tunable};

/// Every variable the project reads.
pub static VARS: &[Var] = &[
    // Joining a job.
    v("STEADFAST_BOOTSTRAP", Tunable, "auto", "how a rank joins its job: `launcher`, `pmi1` (Hydra), `pmi2` (Slurm), `pmix`; `auto` decides from the environment (`docs/clusters.md`)"),
    v("STEADFAST_PMI2_LIB", Tunable, "libpmi2.so.0", "PMI-2 client library loaded under `srun --mpi=pmi2`"),
    v("STEADFAST_SLURM", Tunable, "1", "`0`: `steadfast run` inside a Slurm allocation starts every rank on its own host instead of on the allocated nodes through `srun`"),
    v("STEADFAST_PMIX_LIB", Tunable, "libpmix.so.2", "PMIx client library loaded under `srun --mpi=pmix`"),
    // Paths and the engine.
    v("STEADFAST_PATH", Tunable, "shm", "path between ranks on one host: `shm`, `tcp` or `udp` (set by `mpiexec --path`)"),
    v("STEADFAST_NET_PATH", Tunable, "udp", "path between ranks on different hosts when `STEADFAST_PATH=shm` (`udp` or `tcp`)"),
    v("STEADFAST_CHECKSUM", Tunable, "crc32c", "end-to-end CRC32C of every udp/tcp frame and shm ring record; `none`, or per path (`udp=crc32c,shm=none`). shm messages moved by the optional single-copy CMA carry the sender's CRC32C of their data, checked after the read"),
    v("STEADFAST_FAULTS", Tunable, "unset", "seeded fault injection, e.g. `path=udp,drop=0.01,dup=0.01,reorder=0.05,corrupt=0.001,bus=0.0001,seed=7` (also `after=N` frames); shm/tcp take only `corrupt`/`bus`"),
    v("STEADFAST_ROUTES", Tunable, "job interface", "udp routes, one socket each: subnets, interface names or addresses (`10.77.1.0/24,10.77.2.0/24`), or `auto` (every shared subnet)"),
    v("STEADFAST_UDP_FRAG", Tunable, "8192 (32768 on loopback)", "udp fragment payload bytes"),
    v("STEADFAST_UDP_WINDOW", Tunable, "1 MiB (4 MiB on loopback)", "unacknowledged udp bytes in flight per peer, at most what the socket buffers hold (no congestion control: keep it near the bandwidth-delay product)"),
    v("STEADFAST_PROBE_MS", Tunable, "50", "route heartbeat / fail-back probe interval; 3 missed heartbeats fail a route over"),
    v("STEADFAST_RETRIES", Tunable, "6", "sends of a fragment on one route before that route is declared failed"),
    v("STEADFAST_EAGER_LIMIT", Tunable, "16 KiB shm, 64 KiB tcp", "largest message sent eagerly; larger ones use rendezvous. Unset, where a host runs more ranks than it has CPUs, a shm message of up to 64 KiB also goes eagerly while the ring to its receiver has room for it"),
    v("STEADFAST_SHM_RING", Tunable, "128 MiB / ranks², 128 KiB-2 MiB (less, down to 4 KiB, when half the free space of `/dev/shm` holds no more)", "bytes per sender-receiver shared-memory ring (large messages stream through it in pieces of a sixteenth of the message, from 16 KiB up to a quarter of the ring or 256 KiB; whole quarters where ranks outnumber CPUs)"),
    v("STEADFAST_SHM_STORES", Tunable, "auto", "how the sender writes shm ring records of 16 KiB and more: `cached` (ordinary stores), `streaming` (non-temporal stores, to memory), or `auto`: cached, switching to streaming while its timed cached copies run below 8 GB/s and slower than streamed ones (CPUs that exchange cache lines slowly; `docs/performance.md`)"),
    v("STEADFAST_CMA", Tunable, "unset", "single-copy `process_vm_readv` for large shm messages: `1` for every one, `0` for none; unset, only for the root's blocks of a linear Scatter on a host with more ranks than CPUs, but for those that fit the receiver's ring while the shm checksum is on (and, where this host's single copy is fast, of any linear Scatter, of a linear Bcast, of an Alltoall of 256 KiB blocks and of a binomial Reduce of 128 KiB vectors on a host with more ranks than CPUs), the rest through the ring"),
    v("STEADFAST_BIND_TO", Tunable, "none", "`core` or `hwthread`: each rank binds itself as the library loads to one core or hardware thread of the CPUs it may use, local rank i to unit i mod units (`steadfast run --bind-to`; needs the local rank our launcher sets)"),
    v("STEADFAST_SPIN", Tunable, "2000 (0 when ranks outnumber CPUs)", "idle progress polls before yielding the CPU"),
    v("STEADFAST_YIELDS", Tunable, "20", "`sched_yield` rounds before sleeping on a futex / in `poll`"),
    v("STEADFAST_PEER_SPIN", Tunable, "10", "where waits yield at once (`STEADFAST_SPIN` 0): polls a wait for one rank of this host (a receive, `MPI_Wait`, a slot collective's last part) makes before each yield while that rank runs on another CPU and waits for nothing but this one; 0 yields at once"),
    v("STEADFAST_SLEEP_MS", Tunable, "100", "longest single sleep while blocked"),
    v("STEADFAST_STATS", Tunable, "unset", "`1`: print per-rank path counters at MPI_Finalize (faults injected, corruption detected, retransmissions, drops, per-route traffic and failover events)"),
    v("STEADFAST_CC", Tunable, "cc (as at `make` time)", "C compiler behind `mpicc`"),
    v("STEADFAST_CXX", Tunable, "make's `$(CXX)`", "C++ compiler behind `mpicxx`"),
    v("STEADFAST_FC", Tunable, "gfortran", "Fortran compiler behind `mpifort`"),
    v("STEADFAST_LOG", Tunable, "unset", "tracing filter for logs on stderr, e.g. `debug` or `steadfast_core=info`"),
    v("STEADFAST_LOG_FILE", Tunable, "unset", "with `STEADFAST_LOG`: write each process's log to `PREFIX.RANK.PID` instead of stderr (the launcher forwards a restarted rank's stderr only past what its earlier process wrote, which hides a recovering process's log)"),
    // Checkpoints.
    v("STEADFAST_RESTORE_IMAGE", Tunable, "unset", "process image to restore before `main` (`docs/checkpoint.md`)"),
    v("STEADFAST_NORANDMAPS", Tunable, "unset", "`1`: re-execute the program with address-space randomization off so it can be checkpointed"),
    // Collectives.
    v("STEADFAST_COLL_FORCE", Tunable, "unset", "force one collective algorithm (`docs/collectives.md`)"),
    v("STEADFAST_COLL_BCAST_LONG", Tunable, "see docs/collectives.md", "bytes from which MPI_Bcast uses its long-message algorithm"),
    v("STEADFAST_COLL_ALLREDUCE_LONG", Tunable, "see docs/collectives.md", "bytes from which MPI_Allreduce uses its long-message algorithm"),
    v("STEADFAST_COLL_REDUCE_LONG", Tunable, "see docs/collectives.md", "bytes from which MPI_Reduce uses its long-message algorithm"),
    v("STEADFAST_COLL_ALLGATHER_LONG", Tunable, "see docs/collectives.md", "bytes from which MPI_Allgather uses its long-message algorithm"),
    v("STEADFAST_COLL_REDUCE_LINEAR", Tunable, "8", "largest communicator whose Reduce of vectors up to 16 KiB is linear (every rank sends to the root); larger ones use the binomial tree"),
    v("STEADFAST_COLL_BCAST_LINEAR_LONG", Tunable, "4", "largest communicator on a host running more ranks than it has CPUs whose Bcast of 1 MiB or more is linear instead of through the shared-memory channels; 0: never"),
    v("STEADFAST_COLL_BCAST_LINEAR", Tunable, "64", "largest communicator on a host running more ranks than it has CPUs whose Bcast of up to 8 KiB is linear (the root sends to every rank); elsewhere and larger ones use the binomial tree"),
    v("STEADFAST_COLL_SCAN_LINEAR", Tunable, "8", "largest communicator whose Scan and Exscan of vectors up to 16 KiB use the linear algorithm (every rank sends to every higher rank); larger ones use recursive doubling"),
    v("STEADFAST_COLL_SCAN_SEGMENT", Tunable, "65536", "bytes of the segments in which the chained Scan and Exscan (a host running more ranks than it has CPUs) pass long vectors down the chain of ranks; 0 passes whole vectors"),
    v("STEADFAST_COLL_CHANNEL_MIN", Tunable, "12288", "bytes from which MPI_Bcast on a communicator whose ranks share one host uses the shared-memory channels (`docs/chbcast.md`)"),
    v("STEADFAST_COLL_CHANNEL_MAX", Tunable, "1048576", "bytes up to which MPI_Bcast on a communicator whose ranks share one host uses the shared-memory channels"),
    v("STEADFAST_COLL_CHANNELS", Tunable, "16", "channels per communicator of the shared-memory channel broadcast: broadcasts between two synchronizations"),
    v("STEADFAST_COLL_CHANNEL_SYNC", Tunable, "half of STEADFAST_COLL_CHANNELS", "broadcasts one synchronization of the channel broadcast releases; 0 means every channel (the paper's delayed synchronization, started only when no channel is free), fewer start it while channels are still free (`docs/chbcast.md`)"),
    v("STEADFAST_COLL_CHANNEL_SLOT", Tunable, "1048576", "data bytes one channel holds; larger broadcasts use the tree"),
    v("STEADFAST_COLL_CHANNEL_CRC", Tunable, "1", "0 to write channel broadcast frames without their CRC32C (reliability off; for measuring its cost)"),
    v("STEADFAST_CONNECT_TIMEOUT", Tunable, "180", "seconds MPI_Comm_connect waits for an MPI_Comm_accept on the port before it fails with MPI_ERR_PORT (the standard's implementation-defined time-out; the info key `timeout` of one call overrides it; 0 waits forever)"),
    v("STEADFAST_RMA_MAILBOX", Tunable, "1", "0 turns off the one-sided mailboxes: puts and gets of lock epochs on MPI_Win_create windows within one host then use a cross-memory system call instead of shared-memory rings the target applies (docs/mpi5.md, \"Mailboxes\")"),
    v("STEADFAST_COLL_SLOTS", Tunable, "1", "0 turns off the slot exchange: Barrier, Allreduce, Allgather, Alltoall and Reduce_scatter of small data on a communicator whose ranks all share memory, each rank writing its contribution once into its slot of a shared segment and reading the others' from theirs"),
    v("STEADFAST_COLL_SLOT_RANKS", Tunable, "16", "largest communicator that uses the slot exchange"),
    v("STEADFAST_COLL_SLOT_RANKS_CROWDED", Tunable, "64", "largest communicator that uses the slot exchange on a host running more ranks than it has CPUs"),
    v("STEADFAST_COLL_SLOT_BYTES", Tunable, "2097152", "bytes of a rank's slot: the largest contribution (the vector of an Allreduce, all send blocks of an Alltoall, a rank's block of an Allgather, the whole vector of a Reduce_scatter) that uses the slot exchange (Allreduce, and 2-rank calls, stop earlier, see docs/collectives.md); a communicator's segment holds two slots per rank, in memory only as far as calls use them"),
    v("STEADFAST_COLL_SLOT_FAULTS", Developer, "unset", "fault hook of the slot exchange: `corrupt=P` damages a written part after its CRC with chance P (tests of the repair)"),
    v("STEADFAST_COLL_CHANNEL_FAULTS", Developer, "unset", "fault hook of the channel broadcast's writes (shared memory and multicast): `drop=p,corrupt=p,fail_after=n,cut_after=n,seed=s` (tests)"),
    v("STEADFAST_COLL_MCAST", Tunable, "auto", "MPI_Bcast on communicators that span hosts over the channels on IP multicast: `auto` (from 4 ranks, by the size range below), `on` (every size up to a channel), `off` (never)"),
    v("STEADFAST_COLL_MCAST_MIN", Tunable, "12288", "bytes from which MPI_Bcast on a communicator spanning hosts uses the multicast channels (`docs/chbcast.md`)"),
    v("STEADFAST_COLL_MCAST_MAX", Tunable, "65536", "bytes up to which MPI_Bcast on a communicator spanning hosts uses the multicast channels"),
    v("STEADFAST_COLL_MCAST_GROUPS", Tunable, "239.192.0.0/16", "multicast range each communicator's group address is drawn from"),
    v("STEADFAST_COLL_MCAST_TTL", Tunable, "1", "hops a multicast datagram may cross (1: the local network)"),
    v("STEADFAST_COLL_MCAST_FRAGMENT", Tunable, "8192", "bytes of a frame per multicast datagram (512 to 65000; keep it below the network's MTU to avoid IP fragmentation)"),
    v("STEADFAST_COLL_BARRIER_TREE", Tunable, "8", "largest communicator whose MPI_Barrier fans in to rank 0 and out again (from 3 ranks; larger ones use dissemination)"),
    v("STEADFAST_COLL_ALLTOALL_SHORT", Tunable, "see docs/collectives.md", "bytes up to which MPI_Alltoall uses its short-message algorithm"),
    v("STEADFAST_COLL_ALLTOALL_LONG", Tunable, "see docs/collectives.md", "bytes from which MPI_Alltoall uses its long-message algorithm"),
    v("STEADFAST_COLL_REDUCE_SCATTER_LONG", Tunable, "see docs/collectives.md", "bytes from which MPI_Reduce_scatter uses its long-message algorithm"),
    // Membership and failure detection.
    v("STEADFAST_MEMBERSHIP", Tunable, "1", "`0`: no membership control thread (the view stays the start-up one)"),
    v("STEADFAST_HEARTBEAT_MS", Tunable, "200", "a silent tree neighbour is asked HOW_ARE_YOU after this long"),
    v("STEADFAST_SUSPECT_MS", Tunable, "2000", "... and reported failed after this long (at least twice the heartbeat)"),
    v("STEADFAST_FANOUT_LOG2", Tunable, "2", "membership tree fan-out 2^k"),
    v("STEADFAST_MEMBERSHIP_ACK_MS", Tunable, "200", "FAILURE_ACK wait per tree level before a child counts as failed"),
    v("STEADFAST_MEMBERSHIP_REPORT_MS", Tunable, "500", "FAILURE_DET_ACK wait before the coordinator counts as failed"),
    v("STEADFAST_MEMBERSHIP_SYNC_MS", Tunable, "500", "member-to-parent view sync period (0: off)"),
    v("STEADFAST_FT_NOTICE_GRACE_MS", Tunable, "100", "how long a non-coordinator holds the launcher's exit notice"),
    v("STEADFAST_FT_DL_RUNTIME_US", Tunable, "1000", "CPU budget per period of the membership control thread under the deadline scheduler (used when permitted: root or CAP_SYS_NICE); `0` turns it off"),
    v("STEADFAST_FT_DL_PERIOD_US", Tunable, "10000", "period of that budget"),
    v("STEADFAST_FT_RT", Tunable, "0", "`1`: real-time priority (SCHED_RR 1) for the control thread when permitted (faster view changes; can starve application threads on few cores)"),
    v("STEADFAST_FT_SLICE_US", Tunable, "100", "time slice the control thread asks the fair scheduler for, so it preempts busy threads when woken (Linux 6.12 and later; `0`: the kernel's default)"),
    v("STEADFAST_FT_TRACE_SCHED", Tunable, "0", "`1`: membership traces also record the control thread's run-queue waits"),
    v("STEADFAST_FT_HOST", Tunable, "127.0.0.1", "address of the membership control channel (multi-host jobs: the address of the path between hosts)"),
    v("STEADFAST_FT_TRACE", Tunable, "unset", "directory for per-rank membership traces `ft.<rank>.trace`"),
    // The launcher's contract with each rank (crates/runtime/src/env.rs).
    v("STEADFAST_RANK", Launcher, "unset: a singleton", "this process's world rank"),
    v("STEADFAST_SIZE", Launcher, "1", "world size"),
    v("STEADFAST_LOCAL_RANK", Launcher, "0", "rank among the ranks on this host"),
    v("STEADFAST_LOCAL_SIZE", Launcher, "1", "ranks on this host"),
    v("STEADFAST_JOBID", Launcher, "", "job identifier (hex)"),
    v("STEADFAST_JOB_KEY", Launcher, "", "job secret (16 hex digits) proven to the launcher on connect"),
    v("STEADFAST_JOBDIR", Launcher, "", "private (0700) per-job directory"),
    v("STEADFAST_CONTROL", Launcher, "", "IP:PORT of the launcher's control server"),
    v("STEADFAST_FT", Launcher, "abort", "fault-tolerance mode told to the ranks: `abort`, `run-through`, `relaunch`, `coordinated`, `pessimistic` or `causal` (set by `mpiexec --ft` / `--on-failure`)"),
    v("STEADFAST_MLOG_MEMORY_MB", Tunable, "1024", "`--ft pessimistic`/`causal`: megabytes of the sender-based message log a rank keeps in memory; the oldest messages past it go to an unlinked file in `$TMPDIR` (with process images: `rank-R.spill` in their directory)"),
    v("STEADFAST_INCARNATION", Launcher, "0", "which start of this world rank the process is: k after `--on-failure relaunch` started it again k times"),
    v("STEADFAST_PROC_BASE", Launcher, "0", "job-wide process index of this world's rank 0: 0 for the processes `steadfast run` started, the first index past the others for processes started by `MPI_Comm_spawn`"),
    v("STEADFAST_PARENT", Launcher, "", "set in processes started by `MPI_Comm_spawn`: the parents' intercommunicator context id and their job-wide process indices (`CTX:P0,P1,...`)"),
    v("STEADFAST_APPNUM", Launcher, "0", "the value of `MPI_APPNUM`: which command of `MPI_Comm_spawn_multiple` started the process (0 for the job's first processes)"),
    v("STEADFAST_UNIVERSE_SIZE", Launcher, "", "the value of `MPI_UNIVERSE_SIZE`: `--universe-size`, else the CPUs of the job's hosts (at least the world size)"),
    v("STEADFAST_CKPT_SERVER", Launcher, "", "`--ft coordinated`: `host:port` of the job's checkpoint server (set by the launcher from `--ckpt-server`)"),
    v("STEADFAST_CKPT_SERVER_KEY_FILE", Launcher, "unset: the launcher's own server", "`--ft coordinated`: file (mode 0600, on every host) holding the key of a standalone checkpoint server"),
    v("STEADFAST_CKPT_JOB", Launcher, "", "`--ft coordinated`: the job's name on the checkpoint server"),
    v("STEADFAST_CKPT_LOCAL", Launcher, "unset: keep", "`--ft coordinated`: `drop` when the launcher was given `--ckpt-local drop`: a rank deletes its local copies of a wave once it is committed, and a restore fetches its image from the checkpoint server"),
    v("STEADFAST_CM_ADDRS", Launcher, "", "`--ft channel-memory`: the channel memory servers (`host:port,…`); rank r's stream is kept by the (r mod count)-th; set, every packet goes through them"),
    v("STEADFAST_CM_KEY_FILE", Launcher, "", "`--ft channel-memory` with standalone servers (`--channel-memory-servers`): the file holding their key, readable by its owner only, present on every host; unset, the key derives from the job key (the launcher's own servers)"),
    v("STEADFAST_MLOG_IMAGES", Launcher, "", "`--ft pessimistic`/`causal` with `--ckpt-interval`: directory of the ranks' own process images (`rank-R.img-N`) and named spill files; unset, a failed rank re-executes from the start"),
    v("STEADFAST_CKPT_DIR", Launcher, "", "`--ft coordinated`: directory of this job's process images and channel records (`wave-N/rank-R.img`, `.rec`, `COMMITTED`)"),
    v("STEADFAST_HOSTMAP", Launcher, "unset", "host index of each rank (`0*4,1*4`), multi-host jobs"),
    v("STEADFAST_HOST", Launcher, "unset", "name of the host a rank was started on, multi-host jobs"),
    // The project's own tests and tools.
    v("STEADFAST_SEED", Developer, "per test", "replay one seed of a seeded test"),
    v("STEADFAST_SIM_SEEDS", Developer, "per test", "number of seeds a simulation test sweeps"),
    v("STEADFAST_SIM_TRACE", Developer, "unset", "reliable-channel simulation: print every frame that arrives"),
    v("STEADFAST_SIM_DUMP", Developer, "unset", "reliable-channel simulation: dump channel state on failure"),
    v("STEADFAST_SIM_PROFILE", Developer, "unset", "reliable-channel simulation: time per seed"),
    v("STEADFAST_FUZZ_CASES", Developer, "per test", "cases of the stable-toolchain fuzz loops"),
    v("STEADFAST_FUZZ_SEEDS", Developer, "unset", "directory the stable fuzz loops write their valid seed inputs to (corpus seeding)"),
    v("STEADFAST_TEST_CHILD", Developer, "unset", "set by a test that re-runs itself in a child process"),
    v("STEADFAST_FUZZ_JOBS", Developer, "2", "build parallelism of `scripts/fuzz-frame.sh`"),
    v("STEADFAST_FUZZ_STABLE", Developer, "unset", "`1`: `scripts/fuzz-frame.sh` runs the stable harness even where nightly exists (as `make test` does)"),
    v("STEADFAST_TEST_SKIP_LARGE", Developer, "unset", "skip the C tests that need several GiB of memory"),
    v("STEADFAST_PRINT_DIGEST", Developer, "unset", "simulator replay test: print the digests"),
    v("STEADFAST_SLURM_CPUS", Developer, "16", "CPUs the one-node test cluster of `scripts/slurm-setup.sh` declares"),
    v("STEADFAST_CLUSTER_CPUS", Developer, "32", "CPUs each emulated node of `scripts/slurm-cluster.sh` declares"),
    v("STEADFAST_FONT", Developer, "DejaVu Sans", "TrueType font for the simulator's plots"),
    v("STEADFAST_APPS_CACHE", Developer, "~/.cache/steadfast-apps", "sources, builds and logs of `scripts/apps-tests.sh` (LAMMPS, ScaLAPACK)"),
];

/// The entry of `name`, if listed.
pub fn var(name: &str) -> Option<&'static Var> {
    VARS.iter().find(|v| v.name == name)
}

/// The one way to read a `STEADFAST_*` variable.
pub fn lookup(name: &str) -> Option<String> {
    debug_assert!(var(name).is_some(), "{name} is not listed in steadfast_config::VARS");
    std::env::var(name).ok()
}

/// Whether `name` is set at all (to anything).
pub fn is_set(name: &str) -> bool {
    lookup(name).is_some()
}

/// The warning text for a value that is ignored: `ignoring NAME="value" (why)`.
pub fn ignored(name: &str, raw: &str, why: &str) -> String {
    format!("ignoring {name}={raw:?} ({why})")
}

static WARNED: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Print `steadfast: msg` on stderr, once per distinct message in this process.
pub fn warn(msg: &str) {
    let mut seen = WARNED.lock().unwrap_or_else(|p| p.into_inner());
    if !seen.iter().any(|m| m == msg) {
        seen.push(msg.to_owned());
        eprintln!("steadfast: {msg}");
    }
}

/// The value of `name` parsed as `T`; None when unset, or (with a warning) when it does
/// not parse. `what` says what was expected, e.g. "a number of bytes".
pub fn parse<T: FromStr>(name: &str, what: &str) -> Option<T> {
    let raw = lookup(name)?;
    match raw.trim().parse() {
        Ok(v) => Some(v),
        Err(_) => {
            warn(&ignored(name, &raw, &format!("expected {what}; using the default")));
            None
        }
    }
}

/// [`parse`] with a default.
pub fn parse_or<T: FromStr>(name: &str, default: T, what: &str) -> T {
    parse(name, what).unwrap_or(default)
}

/// A `0`/`1` switch; None when unset or malformed (with a warning).
pub fn flag(name: &str) -> Option<bool> {
    parse::<u8>(name, "0 or 1").and_then(|v| match v {
        0 => Some(false),
        1 => Some(true),
        _ => {
            warn(&ignored(name, &v.to_string(), "expected 0 or 1; using the default"));
            None
        }
    })
}

/// The list as a Markdown document (`docs/configuration.md`).
pub fn markdown() -> String {
    let mut out = String::from(
        "# Configuration\n\nEvery environment variable Steadfast reads, generated from \
         `crates/config/src/lib.rs` by `steadfast config --markdown` (a test keeps the two \
         equal). A value that does not parse is ignored with a warning on stderr \
         (`steadfast: ignoring NAME=\"value\" (...)`) and the default is used.\n",
    );
    for (kind, title) in [
        (Tunable, "Settings"),
        (Launcher, "Set by the launcher for each rank"),
        (Developer, "For the project's tests and tools"),
    ] {
        out.push_str(&format!("\n## {title}\n\n| variable | default | meaning |\n|---|---|---|\n"));
        for v in VARS.iter().filter(|v| v.kind == kind) {
            let default = if v.default.is_empty() { "—" } else { v.default };
            out.push_str(&format!("| `{}` | {} | {} |\n", v.name, default, v.meaning.replace('|', "\\|")));
        }
    }
    out
}

/// The list as plain text, with the values set in this environment.
pub fn text() -> String {
    let mut out = String::new();
    for v in VARS.iter().filter(|v| v.kind != Developer) {
        let now = std::env::var(v.name).map(|s| format!("  [set: {s}]")).unwrap_or_default();
        out.push_str(&format!("{:32} default {}{}\n    {}\n", v.name, v.default, now, v.meaning));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_prefixed() {
        for (i, a) in VARS.iter().enumerate() {
            assert!(a.name.starts_with("STEADFAST_"), "{}", a.name);
            assert!(VARS[i + 1..].iter().all(|b| b.name != a.name), "{} listed twice", a.name);
        }
    }

    #[test]
    fn bad_values_fall_back_with_the_same_warning() {
        assert_eq!(ignored("STEADFAST_SPIN", "x", "why"), "ignoring STEADFAST_SPIN=\"x\" (why)");
        // SAFETY of set_var: single-threaded test of this process's own variable.
        std::env::set_var("STEADFAST_YIELDS", "lots");
        assert_eq!(parse_or("STEADFAST_YIELDS", 20u32, "a count"), 20);
        std::env::set_var("STEADFAST_YIELDS", " 7 ");
        assert_eq!(parse_or("STEADFAST_YIELDS", 20u32, "a count"), 7);
        std::env::set_var("STEADFAST_STATS", "2");
        assert_eq!(flag("STEADFAST_STATS"), None);
        std::env::set_var("STEADFAST_STATS", "1");
        assert_eq!(flag("STEADFAST_STATS"), Some(true));
    }
}
