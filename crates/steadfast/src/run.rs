//! `steadfast run` / `mpiexec` / `mpirun`: command-line front end of the launcher.

use clap::{ArgMatches, Args, ValueEnum};
use std::ffi::{OsStr, OsString};
use std::path::PathBuf;
use std::time::Duration;
use steadfast_runtime::launcher::{self, CkptServer, LaunchConfig, OnFailure};
use steadfast_runtime::{FtMode, PathKind};

/// Options of `steadfast run` (documented on `Command::Run`).
#[derive(Debug, Args)]
#[command(
    after_help = "Environment given to each rank: STEADFAST_RANK, STEADFAST_SIZE, STEADFAST_LOCAL_RANK, \
STEADFAST_LOCAL_SIZE, STEADFAST_JOBID, STEADFAST_JOB_KEY, STEADFAST_JOBDIR, STEADFAST_CONTROL, \
STEADFAST_PATH, STEADFAST_FT, plus the launcher's own environment.\n\
Set STEADFAST_LOG=debug to see the launcher's logs."
)]
pub struct RunArgs {
    /// Number of ranks to start.
    #[arg(short = 'n', long = "np", value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub np: u32,

    /// Working directory of the ranks (default: the current directory).
    #[arg(long = "wdir", visible_alias = "wd", value_name = "DIR")]
    pub wdir: Option<PathBuf>,

    /// Export NAME with its current value, or set NAME=VALUE, in every rank (repeatable).
    #[arg(short = 'x', value_name = "NAME[=VALUE]")]
    pub export: Vec<String>,

    /// Set NAME=VALUE in every rank (repeatable).
    #[arg(long = "env", value_name = "NAME=VALUE")]
    pub env: Vec<String>,

    /// Set NAME to VALUE in every rank (MPICH spelling, repeatable).
    #[arg(long = "genv", num_args = 2, value_names = ["NAME", "VALUE"])]
    pub genv: Vec<String>,

    /// Data path between ranks on one host (default: $STEADFAST_PATH, else shm). Ranks on
    /// different hosts use udp (or STEADFAST_NET_PATH) when this is shm.
    #[arg(long = "path", value_enum)]
    pub path: Option<PathArg>,

    /// Start ranks on these hosts, in blocks (`h1,h2` or `h1:SLOTS,h2:SLOTS`). Hosts other
    /// than this one are reached through --agent.
    #[arg(long = "hosts", value_name = "HOST[:SLOTS],...", value_delimiter = ',')]
    pub hosts: Vec<String>,

    /// Remote-start agent for --hosts; `{host}` is replaced by the host name, and
    /// `env -C DIR VAR=VALUE... PROGRAM ARGS` is appended (e.g. "ip netns exec {host}").
    #[arg(long = "agent", value_name = "COMMAND", default_value = launcher::DEFAULT_AGENT)]
    pub agent: String,

    /// Address the launcher's control server listens on (IP or IP:PORT); with --hosts the
    /// default is the local address that routes to the first remote host.
    #[arg(long = "control-addr", value_name = "ADDR")]
    pub control_addr: Option<String>,

    /// Fault-tolerance mode: `abort` tears the job down when a rank dies;
    /// `run-through` keeps survivors running and tells them which rank died;
    /// `coordinated` takes consistent global checkpoints of unmodified programs and rolls
    /// every rank back to the last one when a rank dies; `pessimistic` and `causal` log
    /// messages so that only a dead rank starts again and re-executes (docs/recovery.md).
    #[arg(long = "ft", value_enum, default_value_t = FtArg::Abort)]
    pub ft: FtArg,

    /// What the launcher does when a rank fails (default: abort, or continue with
    /// --ft run-through). `relaunch` keeps the survivors running and starts the failed
    /// rank's program again with the same rank (STEADFAST_INCARNATION tells it which
    /// start it is); the survivors reconnect to it on shm and tcp.
    #[arg(long = "on-failure", value_enum)]
    pub on_failure: Option<OnFailureArg>,

    /// With --ft coordinated: time between checkpoints (`30s`, `500ms`, `2m`, or seconds).
    /// With --ft pessimistic or causal: every TIME one rank takes a process image of
    /// itself (see --ckpt-policy); a failed rank is restored from its newest image instead
    /// of re-executing from the start, and the others free their logs of what it holds.
    #[arg(long = "ckpt-interval", value_name = "TIME", value_parser = parse_duration)]
    pub ckpt_interval: Option<Duration>,

    /// With --ft pessimistic or causal and --ckpt-interval: which rank takes the next image.
    #[arg(long = "ckpt-policy", value_enum, default_value_t = PolicyArg::RoundRobin)]
    pub ckpt_policy: PolicyArg,

    /// With --ft channel-memory: how many channel memory servers the launcher runs (rank
    /// r's messages are kept by server r mod N).
    #[arg(long = "channel-memories", value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub channel_memories: u32,

    /// With --ft channel-memory: use standalone servers (`steadfast channel-memory`) at
    /// these addresses (HOST:PORT,…; server i keeps the messages of ranks r with r mod count
    /// = i) instead of the launcher's own; needs --channel-memory-key-file.
    #[arg(long = "channel-memory-servers", value_name = "ADDRS", value_delimiter = ',')]
    pub channel_memory_servers: Vec<String>,

    /// The standalone channel memory servers' key file (owner-only, on every host).
    #[arg(long = "channel-memory-key-file", value_name = "FILE")]
    pub channel_memory_key_file: Option<PathBuf>,

    /// With --ft pessimistic, causal or channel-memory: relay the ranks' determinants to a
    /// standalone event logger (`steadfast event-logger`) at HOST:PORT instead of the
    /// launcher's own; needs --event-logger-key-file.
    #[arg(long = "event-logger", value_name = "HOST:PORT")]
    pub event_logger: Option<String>,

    /// The standalone event logger's key file (owner-only).
    #[arg(long = "event-logger-key-file", value_name = "FILE")]
    pub event_logger_key_file: Option<PathBuf>,

    /// With --ft coordinated: directory for the process images; with --ft pessimistic or
    /// causal: for the event logger's journals (default: a new directory under $TMPDIR,
    /// removed when the job ends well).
    #[arg(long = "ckpt-dir", value_name = "DIR")]
    pub ckpt_dir: Option<PathBuf>,

    /// With --ft coordinated: where the second copy of every image goes: `builtin` (a
    /// checkpoint server run by the launcher, copies under DIR/server; the default),
    /// `none`, or HOST:PORT of a standalone `steadfast ckpt-server` (then give
    /// --ckpt-server-key-file too).
    #[arg(long = "ckpt-server", value_name = "builtin|none|HOST:PORT", default_value = "builtin")]
    pub ckpt_server: String,

    /// With --ckpt-server HOST:PORT: the file holding that server's key (owner-only
    /// permissions; the same path must hold it on every host of the job).
    #[arg(long = "ckpt-server-key-file", value_name = "FILE")]
    pub ckpt_server_key_file: Option<PathBuf>,

    /// With --ft coordinated and a checkpoint server: `keep` each rank's local copy of the
    /// committed waves (restores read it; the default), or `drop` it once the server holds
    /// the wave, so that every restore fetches its image from the server (MPICH-V/CL's
    /// images without local copies: the server becomes the restart's bottleneck).
    #[arg(long = "ckpt-local", value_name = "keep|drop", default_value = "keep", value_parser = ["keep", "drop"])]
    pub ckpt_local: String,

    /// With --on-failure relaunch: how often one rank may be started again; with
    /// --ft coordinated: how often the job may roll back.
    #[arg(long = "max-restarts", value_name = "N", default_value_t = 3)]
    pub max_restarts: u32,

    /// The value of `MPI_UNIVERSE_SIZE`: how many processes the job may run at once,
    /// counting those `MPI_Comm_spawn` starts (default: the CPUs of the job's hosts, at
    /// least the number of ranks).
    #[arg(long = "universe-size", value_name = "N")]
    pub universe_size: Option<u32>,

    /// Kill the job after SECS seconds and exit with status 124.
    #[arg(long = "timeout", value_name = "SECS", value_parser = parse_secs)]
    pub timeout: Option<Duration>,

    /// Prefix every output line with `[1,RANK]<stdout>: ` or `[1,RANK]<stderr>: `.
    #[arg(long = "tag-output")]
    pub tag_output: bool,

    /// Report every rank failure on stderr, also when the job continues through failures
    /// (`--ft run-through`); without it only the exit status tells. With `--ft coordinated`,
    /// also the start of every checkpoint wave.
    #[arg(short = 'v', long = "verbose")]
    pub verbose: bool,

    /// Seconds between SIGTERM and SIGKILL when tearing the job down.
    #[arg(long = "kill-grace", value_name = "SECS", value_parser = parse_secs, default_value = "2")]
    pub kill_grace: Duration,

    /// Bind each rank to CPUs: `core` (one core, all its hardware threads) or `hwthread`
    /// (one hardware thread), local rank i of a host to unit i of the CPUs it may use,
    /// wrapping around when ranks outnumber them; `none` (the default) leaves placement to
    /// the kernel. The rank binds itself as the MPI library loads (STEADFAST_BIND_TO).
    #[arg(long = "bind-to", value_enum, value_name = "WHAT")]
    pub bind_to: Option<BindArg>,

    /// Accepted for Open MPI compatibility; oversubscription is always allowed.
    #[arg(long = "oversubscribe", hide = true)]
    pub oversubscribe: bool,

    /// Program to run (searched in PATH when it contains no slash).
    #[arg(value_name = "PROGRAM", required = true)]
    pub program: OsString,

    /// Arguments passed to every rank.
    #[arg(
        value_name = "ARGS",
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub args: Vec<OsString>,
}

/// `--bind-to` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BindArg {
    /// No binding.
    None,
    /// One core per rank.
    Core,
    /// One hardware thread per rank.
    Hwthread,
}

/// `--path` values.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum PathArg {
    /// Shared memory.
    Shm,
    /// TCP sockets.
    Tcp,
    /// UDP datagrams under the reliable channel (checksums, retransmission, routes).
    Udp,
}

/// `--ckpt-policy` values.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum PolicyArg {
    /// Ranks 0, 1, 2, ... in turn.
    RoundRobin,
    /// A rank drawn at random each time.
    Random,
    /// The rank whose image would free the most of the other ranks' sender-based logs
    /// (MPICH-V2's policy; sizes as the ranks last reported them).
    BestEffort,
}

/// `--ft` values.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum FtArg {
    /// Tear the job down when a rank dies.
    Abort,
    /// Survivors keep running.
    RunThrough,
    /// Survivors keep running and a failed rank is started again (same as
    /// --on-failure relaunch).
    Relaunch,
    /// Coordinated checkpoints; every rank rolls back to the last one when a rank dies.
    Coordinated,
    /// Pessimistic message logging (MPICH-V2): only a failed rank is started again; it
    /// re-executes and receives its logged messages again, in the logged order.
    Pessimistic,
    /// Causal message logging (MPICH-Vcausal): as pessimistic, determinants travel with
    /// the messages instead of being waited for.
    Causal,
    /// Channel memories (MPICH-V1): every message goes through its receiver's channel
    /// memory, which keeps it; a failed rank is started again and gets its messages from
    /// there, in the same order.
    ChannelMemory,
}

/// `--on-failure` values.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum OnFailureArg {
    /// Tear the job down.
    Abort,
    /// Keep the survivors running.
    Continue,
    /// Keep the survivors running and start the failed rank again.
    Relaunch,
}

/// `MPIEXEC_TIMEOUT` (seconds; MPICH's launcher and test suite use it) when `--timeout` is
/// not given; 0 or an unreadable value means no limit.
fn env_timeout() -> Option<Duration> {
    let v = std::env::var("MPIEXEC_TIMEOUT").ok()?;
    match parse_secs(v.trim()) {
        Ok(d) if !d.is_zero() => Some(d),
        Ok(_) => None,
        Err(e) => {
            eprintln!("steadfast: ignoring MPIEXEC_TIMEOUT: {e}");
            None
        }
    }
}

fn parse_secs(s: &str) -> Result<Duration, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of seconds"))?;
    Duration::try_from_secs_f64(v).map_err(|_| format!("{s:?} is not a valid duration"))
}

/// Options written with one dash by MPICH / old Open MPI, and their spelling here.
const SINGLE_DASH_LONG: &[(&str, &str)] = &[
    ("-np", "--np"),
    ("-wdir", "--wdir"),
    ("-wd", "--wdir"),
    ("-genv", "--genv"),
    ("-env", "--genv"),
    ("-tag-output", "--tag-output"),
    ("-timeout", "--timeout"),
    ("-usize", "--universe-size"),
    ("-oversubscribe", "--oversubscribe"),
    ("-bind-to", "--bind-to"),
];

/// Options that take values, with how many, so normalisation can find the program.
const VALUE_OPTS: &[(&str, usize)] = &[
    ("-n", 1),
    ("--np", 1),
    ("--wdir", 1),
    ("--wd", 1),
    ("-x", 1),
    ("--env", 1),
    ("--genv", 2),
    ("--path", 1),
    ("--hosts", 1),
    ("--agent", 1),
    ("--control-addr", 1),
    ("--ft", 1),
    ("--bind-to", 1),
    ("--on-failure", 1),
    ("--max-restarts", 1),
    ("--ckpt-interval", 1),
    ("--ckpt-policy", 1),
    ("--channel-memories", 1),
    ("--channel-memory-servers", 1),
    ("--channel-memory-key-file", 1),
    ("--event-logger", 1),
    ("--event-logger-key-file", 1),
    ("--ckpt-dir", 1),
    ("--ckpt-server", 1),
    ("--ckpt-server-key-file", 1),
    ("--ckpt-local", 1),
    ("--timeout", 1),
    ("--kill-grace", 1),
    ("--universe-size", 1),
];

/// Rewrites argv so clap can parse it: inserts `run` when called as mpiexec/mpirun, and
/// turns single-dash long options (`-np 4`) into their `--` form. Stops at the program
/// name so the program's own arguments are never touched, and puts `--` before it: clap
/// would otherwise still take a program's first arguments that look like ours (`lmp -h`,
/// `lmp -nocite` as `-n ocite`, `prog -x A`) as options of the launcher.
pub fn normalize_argv(mut argv: Vec<OsString>) -> Vec<OsString> {
    let invoked_as = argv
        .first()
        .map(|a0| {
            PathBuf::from(a0)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default()
        })
        .unwrap_or_default();
    let start = if invoked_as.ends_with("mpiexec") || invoked_as.ends_with("mpirun") {
        argv.insert(1.min(argv.len()), OsString::from("run"));
        2
    } else if argv.get(1).map(OsString::as_os_str) == Some(OsStr::new("run")) {
        2
    } else {
        return argv;
    };
    let mut i = start;
    while i < argv.len() {
        let Some(tok) = argv[i].to_str().map(str::to_owned) else {
            break; // not UTF-8: cannot be one of our options, so it is the program
        };
        if tok == "--" || !tok.starts_with('-') || tok == "-" {
            break;
        }
        let tok = match SINGLE_DASH_LONG.iter().find(|(from, _)| *from == tok) {
            Some((_, to)) => {
                argv[i] = OsString::from(*to);
                (*to).to_owned()
            }
            None => tok,
        };
        let takes = VALUE_OPTS
            .iter()
            .find(|(name, _)| *name == tok)
            .map_or(0, |(_, n)| *n);
        i += 1 + takes;
    }
    if i < argv.len() && argv[i].as_os_str() != OsStr::new("--") {
        argv.insert(i, OsString::from("--"));
    }
    argv
}

/// Builds the launch configuration and runs the job; returns the exit status.
pub fn execute(args: RunArgs, matches: Option<&ArgMatches>) -> i32 {
    let env = match collect_env(&args, matches) {
        Ok(env) => env,
        Err(msg) => {
            eprintln!("steadfast run: {msg}");
            return 2;
        }
    };
    let mut cfg = LaunchConfig::new(args.np, args.program, args.args);
    cfg.wdir = args.wdir;
    cfg.env = env;
    if let Some(b) = args.bind_to {
        use steadfast_runtime::binding::BindTo;
        let name = match b {
            BindArg::None => BindTo::None,
            BindArg::Core => BindTo::Core,
            BindArg::Hwthread => BindTo::Hwthread,
        }
        .name();
        // First, so that an explicit -x/--env STEADFAST_BIND_TO still decides.
        cfg.env.insert(0, (steadfast_runtime::env::BIND_TO.into(), name.into()));
    }
    cfg.path = match args.path {
        Some(PathArg::Shm) => PathKind::Shm,
        Some(PathArg::Tcp) => PathKind::Tcp,
        Some(PathArg::Udp) => PathKind::Udp,
        // The launcher sets STEADFAST_PATH for the ranks, so honour the user's value here.
        None => match steadfast_config::lookup("STEADFAST_PATH").ok_or(()) {
            Ok(v) if !v.trim().is_empty() => match v.trim().parse() {
                Ok(k) => k,
                Err(_) => {
                    eprintln!("steadfast run: STEADFAST_PATH={v:?} is not shm, tcp or udp");
                    return 2;
                }
            },
            _ => PathKind::Shm,
        },
    };
    cfg.hosts = args
        .hosts
        .into_iter()
        .filter(|h| !h.trim().is_empty())
        .collect();
    cfg.agent = args.agent;
    cfg.control_addr = args.control_addr;
    // Inside salloc/sbatch: the ranks go on the allocated nodes, through srun.
    if let Err(msg) = launcher::slurm::place_on_allocation(&mut cfg, &|k| std::env::var(k).ok()) {
        eprintln!("steadfast run: {msg}; give --hosts, or STEADFAST_SLURM=0 to start every rank here");
        return 2;
    }
    cfg.ft = match args.ft {
        FtArg::Abort => FtMode::Abort,
        FtArg::RunThrough => FtMode::RunThrough,
        FtArg::Relaunch => FtMode::Relaunch,
        FtArg::Coordinated => FtMode::Coordinated,
        FtArg::Pessimistic => FtMode::Pessimistic,
        FtArg::Causal => FtMode::Causal,
        FtArg::ChannelMemory => FtMode::ChannelMemory,
    };
    cfg.ckpt_interval = args.ckpt_interval;
    cfg.ckpt_policy = match args.ckpt_policy {
        PolicyArg::RoundRobin => launcher::ImagePolicy::RoundRobin,
        PolicyArg::Random => launcher::ImagePolicy::Random,
        PolicyArg::BestEffort => launcher::ImagePolicy::BestEffort,
    };
    cfg.channel_memories = args.channel_memories;
    cfg.channel_memory_servers = args.channel_memory_servers;
    cfg.channel_memory_key_file = args.channel_memory_key_file;
    if args.event_logger.is_some() && !cfg.ft.logs_messages() {
        eprintln!("steadfast run: --event-logger goes with --ft pessimistic, causal or channel-memory");
        return 2;
    }
    cfg.event_logger = args.event_logger;
    cfg.event_logger_key_file = args.event_logger_key_file;
    cfg.ckpt_dir = args.ckpt_dir;
    cfg.ckpt_server = match (args.ckpt_server.as_str(), args.ckpt_server_key_file) {
        ("builtin", None) => CkptServer::Builtin,
        ("none", None) => CkptServer::Off,
        ("builtin" | "none", Some(_)) => {
            eprintln!("steadfast run: --ckpt-server-key-file goes with --ckpt-server HOST:PORT");
            return 2;
        }
        (addr, Some(key_file)) => CkptServer::At { addr: addr.to_owned(), key_file },
        (addr, None) => {
            eprintln!("steadfast run: --ckpt-server {addr} needs --ckpt-server-key-file (the server's key)");
            return 2;
        }
    };
    cfg.ckpt_drop_local = args.ckpt_local == "drop";
    if cfg.ckpt_drop_local && (cfg.ft != FtMode::Coordinated || matches!(cfg.ckpt_server, CkptServer::Off)) {
        eprintln!("steadfast run: --ckpt-local drop goes with --ft coordinated and a checkpoint server (not --ckpt-server none): the images must be somewhere");
        return 2;
    }
    cfg.verbose = args.verbose;
    cfg.on_failure = args.on_failure.map(|o| match o {
        OnFailureArg::Abort => OnFailure::Abort,
        OnFailureArg::Continue => OnFailure::Continue,
        OnFailureArg::Relaunch => OnFailure::Relaunch,
    });
    cfg.max_restarts = args.max_restarts;
    cfg.universe_size = args.universe_size;
    cfg.timeout = args.timeout.or_else(env_timeout);
    cfg.tag_output = args.tag_output;
    cfg.kill_grace = args.kill_grace;
    launcher::run(cfg)
}

/// A duration: `30s`, `500ms`, `2m`, `1h`, or plain seconds (`1.5`).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let (num, unit) = match s.find(|c: char| c.is_ascii_alphabetic()) {
        Some(i) => s.split_at(i),
        None => (s, "s"),
    };
    let v: f64 = num.trim().parse().map_err(|_| format!("not a duration: {s:?}"))?;
    let secs = match unit {
        "ms" => v / 1000.0,
        "s" => v,
        "m" | "min" => v * 60.0,
        "h" => v * 3600.0,
        _ => return Err(format!("unknown unit {unit:?} in {s:?} (use ms, s, m or h)")),
    };
    if !secs.is_finite() || secs <= 0.0 {
        return Err(format!("a duration must be positive: {s:?}"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// The environment overrides in command-line order (a later one wins).
fn collect_env(
    args: &RunArgs,
    matches: Option<&ArgMatches>,
) -> Result<Vec<(OsString, OsString)>, String> {
    let indices = |id: &str| -> Vec<usize> {
        matches
            .and_then(|m| m.indices_of(id))
            .map(|it| it.collect())
            .unwrap_or_default()
    };
    let mut ordered: Vec<(usize, OsString, OsString)> = Vec::new();
    let export_idx = indices("export");
    for (n, item) in args.export.iter().enumerate() {
        let pos = export_idx.get(n).copied().unwrap_or(0);
        match item.split_once('=') {
            Some((k, v)) => ordered.push((pos, check_name(k)?, v.into())),
            None => match std::env::var_os(item) {
                Some(v) => ordered.push((pos, check_name(item)?, v)),
                None => eprintln!(
                    "steadfast run: warning: -x {item}: variable is not set; not exported"
                ),
            },
        }
    }
    let env_idx = indices("env");
    for (n, item) in args.env.iter().enumerate() {
        let pos = env_idx.get(n).copied().unwrap_or(0);
        let (k, v) = item
            .split_once('=')
            .ok_or_else(|| format!("--env {item}: expected NAME=VALUE"))?;
        ordered.push((pos, check_name(k)?, v.into()));
    }
    let genv_idx = indices("genv");
    for (n, pair) in args.genv.chunks(2).enumerate() {
        if let [k, v] = pair {
            let pos = genv_idx.get(2 * n).copied().unwrap_or(0);
            ordered.push((pos, check_name(k)?, v.into()));
        }
    }
    ordered.sort_by_key(|(pos, _, _)| *pos);
    Ok(ordered.into_iter().map(|(_, k, v)| (k, v)).collect())
}

fn check_name(name: &str) -> Result<OsString, String> {
    if name.is_empty() || name.contains('=') || name.contains('\0') {
        return Err(format!("invalid environment variable name {name:?}"));
    }
    Ok(name.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn normalizes_mpich_spellings_but_not_program_args() {
        assert_eq!(
            normalize_argv(v(&[
                "/usr/bin/mpiexec",
                "-np",
                "4",
                "-genv",
                "A",
                "-np",
                "prog",
                "-np",
                "x"
            ])),
            v(&[
                "/usr/bin/mpiexec",
                "run",
                "--np",
                "4",
                "--genv",
                "A",
                "-np",
                "--",
                "prog",
                "-np",
                "x"
            ])
        );
        assert_eq!(
            normalize_argv(v(&[
                "steadfast",
                "run",
                "-n",
                "2",
                "-wdir",
                "/tmp",
                "-x",
                "A=1",
                "sh",
                "-wdir"
            ])),
            v(&[
                "steadfast",
                "run",
                "-n",
                "2",
                "--wdir",
                "/tmp",
                "-x",
                "A=1",
                "--",
                "sh",
                "-wdir"
            ])
        );
        assert_eq!(
            normalize_argv(v(&["steadfast", "sim", "-np"])),
            v(&["steadfast", "sim", "-np"])
        );
        assert_eq!(normalize_argv(v(&["mpirun"])), v(&["mpirun", "run"]));
        assert_eq!(
            normalize_argv(v(&["mpiexec", "-n", "1", "--", "prog", "-h"])),
            v(&["mpiexec", "run", "-n", "1", "--", "prog", "-h"])
        );
    }

    /// A program's arguments that are also launcher options reach the program
    /// (`mpiexec -n 4 lmp -h`, `lmp -nocite`, `prog -x A`), parsed as `main` parses them.
    #[test]
    fn program_arguments_that_look_like_launcher_options_reach_the_program() {
        use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
        #[derive(Parser)]
        struct Cli {
            #[command(subcommand)]
            command: Cmd,
        }
        #[derive(Subcommand)]
        enum Cmd {
            Run(RunArgs),
        }
        let parse = |args: &[&str]| -> RunArgs {
            let m = Cli::command()
                .try_get_matches_from(normalize_argv(v(args)))
                .unwrap();
            match Cli::from_arg_matches(&m).unwrap().command {
                Cmd::Run(r) => r,
            }
        };
        let cases: [&[&str]; 6] = [
            &["-h"],
            &["-nocite", "-in", "in.melt"],
            &["-x", "A"],
            &["-n", "3"],
            &["--help"],
            &["-V"],
        ];
        for prog_args in cases {
            let mut argv = vec!["mpiexec", "-n", "2", "-x", "B=1", "lmp"];
            argv.extend_from_slice(prog_args);
            let r = parse(&argv);
            assert_eq!(r.np, 2);
            assert_eq!(r.export, vec!["B=1".to_owned()]);
            assert_eq!(r.program, OsString::from("lmp"));
            assert_eq!(r.args, v(prog_args), "arguments of the program for {argv:?}");
        }
        let r = parse(&["mpiexec", "--tag-output", "-np", "3", "--", "prog", "--", "-n"]);
        assert_eq!(
            (r.np, r.program, r.args),
            (3, OsString::from("prog"), v(&["--", "-n"]))
        );
    }

    #[test]
    fn secs_parse() {
        assert_eq!(parse_secs("1.5"), Ok(Duration::from_millis(1500)));
        assert!(parse_secs("-1").is_err());
        assert!(parse_secs("soon").is_err());
    }
}
