//! Stand-alone `steadfast-sim`: the same command line as `steadfast sim`.

use std::process::ExitCode;

use clap::Parser;

/// Steadfast's discrete-event LogP simulator.
#[derive(Debug, Parser)]
#[command(name = "steadfast-sim", version)]
struct Cli {
    #[command(flatten)]
    sim: steadfast_sim::cli::SimArgs,
}

fn main() -> ExitCode {
    steadfast_sim::cli::run(Cli::parse().sim)
}
