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
