//! `steadfast`: the command-line program of the Steadfast MPI.
//!
//! Invoked as `mpiexec` or `mpirun` (a link to this binary) it behaves as `steadfast run`.

mod run;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::ffi::OsString;

/// Steadfast: a fault-tolerant MPI.
#[derive(Debug, Parser)]
#[command(
    name = "steadfast",
    version,
    about = "Steadfast: a fault-tolerant MPI",
    propagate_version = true
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// One variant per subcommand; each is one call in `main`.
#[derive(Debug, Subcommand)]
enum Command {
    /// Launch an MPI job (also installed as `mpiexec` / `mpirun`).
    ///
    /// Starts PROGRAM as N ranks on this host. Output of every rank is forwarded line
    /// by line; stdin goes to rank 0 only. The exit status is 0 if every rank exits 0;
    /// otherwise the status of the first failed rank (128+signal if it was killed), the
    /// MPI_Abort code, 124 after --timeout, or 128+signal if the launcher itself was
    /// interrupted (the signal is forwarded to every rank first). MPICH and Open MPI
    /// spellings such as `-np 4`, `-wdir DIR`, `-genv NAME VALUE` and `-x NAME=VALUE`
    /// are accepted.
    Run(run::RunArgs),
    /// Start a job killed as a whole (node loss, time limit) again from its last committed
    /// coordinated checkpoint: every rank is restored from its process image in DIR (the
    /// directory `steadfast run --ft coordinated` named), and the job goes on with
    /// checkpoints in DIR. Output printed before that checkpoint is not printed again.
    Restart {
        /// The job's checkpoint directory.
        dir: std::path::PathBuf,
        /// Time between checkpoints after the restart (`30s`, `2m`, ...).
        #[arg(long = "ckpt-interval", value_name = "TIME", value_parser = run::parse_duration)]
        ckpt_interval: Option<std::time::Duration>,
        /// How often the restarted job may roll back.
        #[arg(long = "max-restarts", value_name = "N", default_value_t = 3)]
        max_restarts: u32,
    },
    /// Ask a running `--ft coordinated` job for a checkpoint now (DIR: its checkpoint
    /// directory).
    Checkpoint {
        /// The job's checkpoint directory.
        dir: std::path::PathBuf,
    },
    /// Run a standalone checkpoint server for `--ft coordinated` jobs on several hosts
    /// (`steadfast run --ckpt-server HOST:PORT --ckpt-server-key-file FILE`): it keeps a
    /// second copy of every rank's image under DIR, from which a rank whose own copy was
    /// lost with its host is restored.
    CkptServer(ServerArgs),
    /// Run a standalone channel memory server for `--ft channel-memory` jobs
    /// (`steadfast run --ft channel-memory --channel-memory-servers HOST:PORT,…
    /// --channel-memory-key-file FILE`): it keeps, in memory, every message to the ranks
    /// r of an NP-rank job with r mod COUNT = INDEX, and gives each its stream.
    ChannelMemory {
        /// Ranks of the job.
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        np: u32,
        /// This server's place among COUNT servers (0-based).
        #[arg(long, default_value_t = 0)]
        index: u32,
        /// How many servers the job uses.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
        count: u32,
        /// Address to listen on (HOST:PORT; port 0 picks a free one).
        #[arg(long, default_value = "127.0.0.1:0")]
        listen: std::net::SocketAddr,
        /// The server's key: read from FILE, or written there (owner-only) if FILE does
        /// not exist.
        #[arg(long = "key-file", value_name = "FILE")]
        key_file: std::path::PathBuf,
    },
    /// Run a standalone event logger for message-logging jobs (`steadfast run --ft
    /// pessimistic|causal|channel-memory --event-logger HOST:PORT --event-logger-key-file
    /// FILE`): it keeps the determinants of the ranks of any number of jobs in journals
    /// under DIR and answers restarted ranks; started again with the same DIR it goes on
    /// where it stopped.
    EventLogger {
        #[command(flatten)]
        server: ServerArgs,
        /// Sync every batch of determinants to the disk before acknowledging it (durable
        /// against a crash of the host, not only of this process; costs a disk flush per
        /// batch).
        #[arg(long)]
        sync: bool,
    },
    /// Every STEADFAST_* environment variable: default, meaning and the value set now
    /// (`--markdown`: the list as docs/configuration.md has it).
    Config {
        #[arg(long)]
        markdown: bool,
    },
    /// Simulate fault-tolerant broadcasts in the LogP model (corrected trees), and
    /// regenerate the paper's tables and figures (`steadfast sim paper`).
    Sim(steadfast_sim::cli::SimArgs),
}

/// What a standalone server keeping files needs (`ckpt-server`, `event-logger`).
#[derive(Debug, clap::Args)]
struct ServerArgs {
    /// Where the server keeps its files (created, owner-only).
    #[arg(long)]
    dir: std::path::PathBuf,
    /// Address to listen on (HOST:PORT; port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: std::net::SocketAddr,
    /// The server's key: read from FILE, or written there (owner-only) if FILE does not
    /// exist. Default: DIR/key.
    #[arg(long = "key-file", value_name = "FILE")]
    key_file: Option<std::path::PathBuf>,
}

impl ServerArgs {
    /// Creates the directory (owner-only) and reads or makes the key: (key, key file).
    fn prepare(&self) -> std::io::Result<([u8; 32], std::path::PathBuf)> {
        use std::os::unix::fs::DirBuilderExt;
        let key_file = self.key_file.clone().unwrap_or_else(|| self.dir.join("key"));
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&self.dir)?;
        let key = steadfast_runtime::ckpt_store::read_or_create_key_file(&key_file)?;
        Ok((key, key_file))
    }
}

fn main() {
    init_logging();
    let argv = run::normalize_argv(std::env::args_os().collect::<Vec<OsString>>());
    let matches = Cli::command().get_matches_from(argv);
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    let code = match cli.command {
        Command::Run(args) => {
            let sub = matches.subcommand_matches("run");
            run::execute(args, sub)
        }
        Command::Restart { dir, ckpt_interval, max_restarts } => match steadfast_runtime::launcher::read_manifest(&dir) {
            Ok(mut cfg) => {
                cfg.ckpt_interval = ckpt_interval;
                cfg.max_restarts = max_restarts;
                steadfast_runtime::launcher::run(cfg)
            }
            Err(e) => {
                eprintln!("steadfast restart: {e}");
                1
            }
        },
        Command::Checkpoint { dir } => checkpoint(&dir),
        Command::CkptServer(args) => ckpt_server(&args),
        Command::ChannelMemory { np, index, count, listen, key_file } => channel_memory(np, index, count, listen, &key_file),
        Command::EventLogger { server, sync } => event_logger(&server, sync),
        Command::Config { markdown } => {
            print!("{}", if markdown { steadfast_config::markdown() } else { steadfast_config::text() });
            0
        }
        Command::Sim(args) => match steadfast_sim::cli::run(args) {
            c if c == std::process::ExitCode::SUCCESS => 0,
            _ => 1,
        },
    };
    std::process::exit(code);
}

/// `steadfast checkpoint DIR`: signal the job's launcher (SIGUSR1).
fn checkpoint(dir: &std::path::Path) -> i32 {
    let file = dir.join("launcher.pid");
    let pid = match std::fs::read_to_string(&file).map(|s| s.trim().parse::<i32>()) {
        Ok(Ok(p)) if p > 0 => p,
        _ => {
            eprintln!("steadfast checkpoint: no running job's launcher in {}", file.display());
            return 1;
        }
    };
    // The pid file may be left from a job that ended: only a steadfast launcher is signalled.
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    if !matches!(comm.trim(), "steadfast" | "mpiexec" | "mpirun") {
        eprintln!("steadfast checkpoint: the job of {} is not running", dir.display());
        return 1;
    }
    // SAFETY: sending a signal to a process id.
    if unsafe { libc::kill(pid, libc::SIGUSR1) } != 0 {
        eprintln!("steadfast checkpoint: cannot signal the launcher (pid {pid}): {}", std::io::Error::last_os_error());
        return 1;
    }
    0
}

/// `steadfast ckpt-server`: serve until killed.
fn ckpt_server(args: &ServerArgs) -> i32 {
    let started = args.prepare().and_then(|(key, file)| Ok((steadfast_runtime::ckpt_store::StoreServer::bind(&args.dir, args.listen, key)?, file)));
    match started {
        Ok((server, key_file)) => {
            match server.local_addr() {
                Ok(a) => println!("steadfast ckpt-server: listening on {a}, copies in {}, key in {}", args.dir.display(), key_file.display()),
                Err(e) => eprintln!("steadfast ckpt-server: {e}"),
            }
            server.serve();
            0
        }
        Err(e) => {
            eprintln!("steadfast ckpt-server: {e}");
            1
        }
    }
}

/// `steadfast channel-memory`: serve until killed.
fn channel_memory(np: u32, index: u32, count: u32, listen: std::net::SocketAddr, key_file: &std::path::Path) -> i32 {
    if index >= count {
        eprintln!("steadfast channel-memory: --index {index} is not below --count {count}");
        return 2;
    }
    let hosted: Vec<u32> = (0..np).filter(|r| r % count == index).collect();
    let started = steadfast_runtime::ckpt_store::read_or_create_key_file(key_file)
        .and_then(|key| steadfast_runtime::channel_memory::CmServer::bind(listen, key, np, hosted));
    match started {
        Ok(server) => {
            match server.local_addr() {
                Ok(a) => println!("steadfast channel-memory: listening on {a}, server {index} of {count} for {np} ranks, key in {}", key_file.display()),
                Err(e) => eprintln!("steadfast channel-memory: {e}"),
            }
            server.serve();
            0
        }
        Err(e) => {
            eprintln!("steadfast channel-memory: {e}");
            1
        }
    }
}

/// `steadfast event-logger`: serve until killed.
fn event_logger(args: &ServerArgs, sync: bool) -> i32 {
    use steadfast_runtime::event_logger::LoggerServer;
    let started = args.prepare().and_then(|(key, file)| Ok((LoggerServer::bind(args.listen, &args.dir, key, sync)?, file)));
    match started {
        Ok((server, key_file)) => {
            let kept = server.kept_jobs();
            let job = if kept.is_empty() { String::new() } else { format!(", logs of job(s) {} kept from before", kept.join(" ")) };
            match server.local_addr() {
                Ok(a) => println!("steadfast event-logger: listening on {a}, journals in {}, key in {}{job}", args.dir.display(), key_file.display()),
                Err(e) => eprintln!("steadfast event-logger: {e}"),
            }
            server.serve();
            0
        }
        Err(e) => {
            eprintln!("steadfast event-logger: {e}");
            1
        }
    }
}

/// `STEADFAST_LOG` (e.g. `debug`, `steadfast_runtime=trace`) enables logs on stderr;
/// they are off by default.
fn init_logging() {
    use tracing_subscriber::EnvFilter;
    let filter = steadfast_config::lookup("STEADFAST_LOG").map_or_else(|| EnvFilter::new("off"), EnvFilter::new);
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
