//! `steadfast sim`: the simulator's command line, as a library the `steadfast` program embeds.
//!
//! ```text
//! steadfast sim bcast --tree binomial --correction checked -P 65536 -L 2 -o 1 \
//!                     --faults 1% --runs 100000 --seed 1 [--format csv]
//! steadfast sim paper --out DIR [--runs N]
//! steadfast sim bench [spec options] [--runs N]
//! ```

use std::io::Write;
use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};
use steadfast_coll::{Correction, Numbering, TreeKind};

use crate::bcast::{BcastSim, BcastSpec, DissemSpec, EngineChoice, RunMetrics, StartSpec};
use crate::faults::FaultPlan;
use crate::network::LogPParams;
use crate::runner::{run_batch, Batch};
use crate::stats::{Dist, Summary};

/// Arguments of `steadfast sim`.
#[derive(Debug, Clone, Args)]
#[command(about = "LogP simulator for corrected-tree broadcast (Corrected Trees, PPoPP'19)")]
pub struct SimArgs {
    /// What to simulate.
    #[command(subcommand)]
    pub command: SimCommand,
}

/// Subcommands of `steadfast sim`.
#[derive(Debug, Clone, Subcommand)]
pub enum SimCommand {
    /// Simulate many runs of one broadcast configuration and summarize them.
    Bcast(BcastArgs),
    /// Regenerate the paper's results (tables and figures 1b, 6-10) into a folder.
    Paper(crate::paper::PaperArgs),
    /// Time single runs on one core (thread CPU time and wall time).
    Bench(BenchArgs),
}

/// Broadcast configuration options shared by `bcast` and `bench`.
#[derive(Debug, Clone, Args)]
pub struct SpecArgs {
    /// Dissemination: binomial | kary[:K] | lame[:K] | optimal | gossip[:DURATION].
    #[arg(long, default_value = "binomial")]
    pub tree: String,
    /// Tree numbering.
    #[arg(long, value_enum, default_value_t = NumberingArg::Interleaved)]
    pub numbering: NumberingArg,
    /// Correction: none | checked | failure-proof[:CRASHES] | delayed[:DELAY] |
    /// opportunistic[:D] | optimized[:D].
    #[arg(long, default_value = "checked")]
    pub correction: String,
    /// Correction start: auto | sync | overlapped | a time. auto: synchronized for gossip and
    /// for checked and delayed correction, overlapped for opportunistic correction on trees
    /// (as in the paper).
    #[arg(long, default_value = "auto")]
    pub start: String,
    /// Acknowledged tree (acknowledgments back up the tree; needs --correction none).
    #[arg(long)]
    pub ack: bool,
    /// Opportunistic correction on trees, overlapped: processes reached by correction before
    /// their tree message also send correction messages (as the paper's simulator does).
    #[arg(long)]
    pub relay: bool,
    /// Number of processes.
    #[arg(short = 'P', long = "procs", default_value_t = 65536)]
    pub procs: u32,
    /// LogP latency L.
    #[arg(short = 'L', long = "latency", default_value_t = 2)]
    pub l: u64,
    /// LogP overhead o.
    #[arg(short = 'o', long = "overhead", default_value_t = 1)]
    pub o: u64,
    /// LogP gap g (no effect while g <= o).
    #[arg(short = 'g', long = "gap", default_value_t = 0)]
    pub g: u64,
    /// Faults: none | 1% | 0.01 | ranks:1,4,7 | crash:1%@FROM..UNTIL (root never fails).
    #[arg(long, default_value = "none")]
    pub faults: String,
}

/// Tree numbering on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum NumberingArg {
    /// Interleaved (paper, Definition 1).
    Interleaved,
    /// Depth-first (contiguous subtrees).
    InOrder,
}

/// Engine choice on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EngineArg {
    /// The specialized engine where it applies (synchronized checked correction over a tree,
    /// o = 1, g <= 1, faults from the start), the generic one otherwise; same results.
    Auto,
    /// Always the generic engine (the protocol state machines the runtime uses).
    Generic,
}

impl From<EngineArg> for EngineChoice {
    fn from(e: EngineArg) -> Self {
        match e {
            EngineArg::Auto => EngineChoice::Auto,
            EngineArg::Generic => EngineChoice::Generic,
        }
    }
}

/// Output format of `bcast`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Human-readable summary.
    Table,
    /// One CSV row per run.
    Csv,
}

/// `steadfast sim bcast`.
#[derive(Debug, Clone, Args)]
pub struct BcastArgs {
    /// The broadcast.
    #[command(flatten)]
    pub spec: SpecArgs,
    /// Number of runs.
    #[arg(long, default_value_t = 1000)]
    pub runs: u64,
    /// Base seed; run i uses a seed derived from it (printed in CSV output).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Replay exactly one run with this run seed (as printed in the CSV `seed` column).
    #[arg(long)]
    pub replay: Option<u64>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
    /// Worker threads (0: all cores).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
    /// No progress bar.
    #[arg(long)]
    pub no_progress: bool,
    /// Simulation engine.
    #[arg(long, value_enum, default_value_t = EngineArg::Auto)]
    pub engine: EngineArg,
}

/// `steadfast sim bench`.
#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// The broadcast (defaults: binomial, checked, P = 65536, 1% faults).
    #[command(flatten)]
    pub spec: SpecArgs,
    /// Number of timed runs.
    #[arg(long, default_value_t = 200)]
    pub runs: u64,
    /// Base seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Simulation engine.
    #[arg(long, value_enum, default_value_t = EngineArg::Auto)]
    pub engine: EngineArg,
}

/// A command-line value that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid --{option} value {value:?}: {why}")]
pub struct ArgError {
    option: &'static str,
    value: String,
    why: &'static str,
}

fn arg_err(option: &'static str, value: &str, why: &'static str) -> ArgError {
    ArgError {
        option,
        value: value.to_string(),
        why,
    }
}

fn split(v: &str) -> (&str, Option<&str>) {
    match v.split_once(':') {
        Some((a, b)) => (a, Some(b)),
        None => (v, None),
    }
}

fn num<T: std::str::FromStr>(option: &'static str, v: &str) -> Result<T, ArgError> {
    v.trim()
        .parse()
        .map_err(|_| arg_err(option, v, "expected a number"))
}

/// Parses a fault fraction: `1%` or `0.01`.
pub fn parse_fraction(v: &str) -> Result<f64, ArgError> {
    let f = match v.strip_suffix('%') {
        Some(p) => num::<f64>("faults", p)? / 100.0,
        None => num::<f64>("faults", v)?,
    };
    if !(0.0..=1.0).contains(&f) {
        return Err(arg_err(
            "faults",
            v,
            "fraction must be within 0..=1 (0%..=100%)",
        ));
    }
    Ok(f)
}

/// Parses `--faults`.
pub fn parse_faults(v: &str) -> Result<FaultPlan, ArgError> {
    let v = v.trim();
    if v.is_empty() || v == "none" || v == "0" || v == "0%" {
        return Ok(FaultPlan::None);
    }
    if let Some(list) = v.strip_prefix("ranks:") {
        let ranks = list
            .split(',')
            .filter(|s| !s.trim().is_empty())
            .map(|s| num::<u32>("faults", s))
            .collect::<Result<Vec<_>, _>>()?;
        return Ok(FaultPlan::List(ranks));
    }
    if let Some(rest) = v.strip_prefix("crash:") {
        let (frac, window) = rest
            .split_once('@')
            .ok_or_else(|| arg_err("faults", v, "expected crash:FRACTION@FROM..UNTIL"))?;
        let (from, until) = window
            .split_once("..")
            .ok_or_else(|| arg_err("faults", v, "expected crash:FRACTION@FROM..UNTIL"))?;
        return Ok(FaultPlan::Crash {
            fraction: parse_fraction(frac)?,
            from: num("faults", from)?,
            until: num("faults", until)?,
        });
    }
    Ok(FaultPlan::Fraction(parse_fraction(v)?))
}

impl SpecArgs {
    /// Builds the simulation spec.
    pub fn to_spec(&self) -> Result<BcastSpec, ArgError> {
        let logp = LogPParams {
            l: self.l,
            o: self.o,
            g: self.g,
        };
        let (name, param) = split(self.tree.trim());
        let k = |default: u32| param.map_or(Ok(default), |p| num::<u32>("tree", p));
        let numbering = match self.numbering {
            NumberingArg::Interleaved => Numbering::Interleaved,
            NumberingArg::InOrder => Numbering::InOrder,
        };
        let tree = |kind| DissemSpec::Tree { kind, numbering };
        let dissemination = match name {
            "binomial" => tree(TreeKind::Binomial),
            "kary" | "k-ary" => tree(TreeKind::KAry { k: k(2)? }),
            "lame" => tree(TreeKind::Lame { k: k(2)? }),
            "optimal" => {
                let l = u32::try_from(self.l).map_err(|_| arg_err("latency", "", "too large"))?;
                let o = u32::try_from(self.o).map_err(|_| arg_err("overhead", "", "too large"))?;
                tree(TreeKind::Optimal { l, o })
            }
            "gossip" => DissemSpec::Gossip {
                duration: match param {
                    Some(p) => num("tree", p)?,
                    None => default_gossip_time(self.procs, logp),
                },
            },
            _ => {
                return Err(arg_err(
                    "tree",
                    &self.tree,
                    "expected binomial, kary[:K], lame[:K], optimal or gossip[:DURATION]",
                ))
            }
        };
        let (cname, cparam) = split(self.correction.trim());
        let d = |default: u32| cparam.map_or(Ok(default), |p| num::<u32>("correction", p));
        let correction = match cname {
            "none" => Correction::None,
            "checked" => Correction::Checked,
            "delayed" => Correction::Delayed {
                delay: match cparam {
                    Some(p) => num("correction", p)?,
                    None => 2 * self.o + self.l,
                },
            },
            "opportunistic" => Correction::Opportunistic {
                distance: d(4)?,
                optimized: false,
                relay: self.relay,
            },
            "optimized" => Correction::Opportunistic {
                distance: d(4)?,
                optimized: true,
                relay: self.relay,
            },
            "failure-proof" => Correction::FailureProof { crashes: d(1)? },
            _ => {
                return Err(arg_err(
                    "correction",
                    &self.correction,
                    "expected none, checked, failure-proof[:CRASHES], delayed[:DELAY], \
                     opportunistic[:D] or optimized[:D]",
                ))
            }
        };
        let start = match self.start.trim() {
            "auto" => match (dissemination, correction) {
                (DissemSpec::Gossip { .. }, _) => StartSpec::Synchronized,
                (_, Correction::Opportunistic { .. }) => StartSpec::Overlapped,
                (DissemSpec::Tree { .. }, Correction::None) => StartSpec::Overlapped,
                _ => StartSpec::Synchronized,
            },
            "sync" | "synchronized" => StartSpec::Synchronized,
            "overlapped" => StartSpec::Overlapped,
            t => StartSpec::SynchronizedAt(num("start", t)?),
        };
        Ok(BcastSpec {
            procs: self.procs,
            logp,
            dissemination,
            correction,
            start,
            ack: self.ack,
            faults: parse_faults(&self.faults)?,
        })
    }
}

/// Default gossip phase length: enough rounds of `2o + L` for the colored set to double
/// about `log2 P` times, plus one round.
pub fn default_gossip_time(procs: u32, logp: LogPParams) -> u64 {
    let log2 = u64::from(32 - procs.max(2).saturating_sub(1).leading_zeros());
    (log2 + 1) * (logp.o + logp.l) + logp.o
}

/// One-line description of a spec.
pub fn describe(spec: &BcastSpec) -> String {
    let dis = match spec.dissemination {
        DissemSpec::Tree { kind, numbering } => {
            let kind = match kind {
                TreeKind::Binomial => "binomial".to_string(),
                TreeKind::KAry { k } => format!("{k}-ary"),
                TreeKind::Lame { k } => format!("Lamé k={k}"),
                TreeKind::Optimal { l, o } => format!("optimal (L={l}, o={o})"),
            };
            let num = match numbering {
                Numbering::Interleaved => "interleaved",
                Numbering::InOrder => "in-order",
            };
            format!("{kind} tree ({num})")
        }
        DissemSpec::Gossip { duration } => format!("gossip for {duration}"),
    };
    let cor = match spec.correction {
        Correction::None if spec.ack => "acknowledgments".to_string(),
        Correction::None => "no correction".to_string(),
        Correction::Checked => "checked correction".to_string(),
        Correction::Delayed { delay } => format!("delayed correction (delay {delay})"),
        Correction::FailureProof { crashes } => {
            format!("failure-proof checked correction (tolerates {crashes} crashes)")
        }
        Correction::Opportunistic {
            distance,
            optimized,
            relay,
        } => format!(
            "{}opportunistic correction d={distance}{}",
            if optimized { "optimized " } else { "" },
            if relay { " (relayed)" } else { "" }
        ),
    };
    let start = match spec.start {
        StartSpec::Overlapped => "overlapped".to_string(),
        StartSpec::Synchronized => "synchronized".to_string(),
        StartSpec::SynchronizedAt(t) => format!("synchronized at {t}"),
    };
    let faults = match &spec.faults {
        FaultPlan::None => "no faults".to_string(),
        FaultPlan::List(r) => format!("{} listed faults", r.len()),
        FaultPlan::At(r) => format!("{} scheduled crashes", r.len()),
        FaultPlan::Fraction(f) => {
            format!(
                "{}% faults ({} processes)",
                f * 100.0,
                spec.faults.count(spec.procs)
            )
        }
        FaultPlan::Crash {
            fraction,
            from,
            until,
        } => {
            format!("{}% crash between {from} and {until}", fraction * 100.0)
        }
    };
    let LogPParams { l, o, g } = spec.logp;
    format!(
        "{dis}, {cor} ({start}), P={}, L={l} o={o} g={g}, {faults}",
        spec.procs
    )
}

/// Runs `steadfast sim`.
pub fn run(args: SimArgs) -> ExitCode {
    match args.command {
        SimCommand::Bcast(a) => bcast(a),
        SimCommand::Paper(a) => crate::paper::run(a),
        SimCommand::Bench(a) => bench(a),
    }
}

fn fail(msg: impl std::fmt::Display, code: u8) -> ExitCode {
    eprintln!("steadfast sim: {msg}");
    ExitCode::from(code)
}

const CSV_HEADER: &str = "run,seed,procs,failed,uncolored,coloring_latency,quiescence_latency,\
correction_latency,messages,tree_messages,gossip_messages,correction_messages,ack_messages,\
messages_per_process,max_gap,gaps,hit_limit";

fn csv_row(run: u64, m: &RunMetrics) -> String {
    format!(
        "{run},{},{},{},{},{},{},{},{},{},{},{},{},{:.4},{},{},{}",
        m.seed,
        m.procs,
        m.failed,
        m.uncolored,
        m.coloring_latency,
        m.quiescence_latency,
        m.correction_latency
            .map_or(String::new(), |l| l.to_string()),
        m.messages,
        m.tree_messages,
        m.gossip_messages,
        m.correction_messages,
        m.ack_messages,
        m.messages_per_process(),
        m.max_gap,
        m.gaps,
        m.hit_limit
    )
}

fn bcast(a: BcastArgs) -> ExitCode {
    let spec = match a.spec.to_spec() {
        Ok(s) => s,
        Err(e) => return fail(e, 2),
    };
    let sim = match BcastSim::with_engine(spec.clone(), a.engine.into()) {
        Ok(s) => s,
        Err(e) => return fail(e, 2),
    };
    let (runs, seeds) = match a.replay {
        Some(seed) => {
            let mut sim = sim;
            (vec![sim.run(seed)], 1)
        }
        None => {
            let batch = Batch {
                runs: a.runs,
                seed: a.seed,
                threads: a.threads,
                progress: !a.no_progress && a.runs >= 100,
                label: "bcast".into(),
                engine: a.engine.into(),
            };
            match run_batch(&spec, &batch) {
                Ok(r) => (r, a.runs),
                Err(e) => return fail(e, 2),
            }
        }
    };
    let mut out = std::io::stdout().lock();
    let res = match a.format {
        Format::Csv => (|| {
            writeln!(out, "{CSV_HEADER}")?;
            for (i, m) in runs.iter().enumerate() {
                writeln!(out, "{}", csv_row(i as u64, m))?;
            }
            Ok::<(), std::io::Error>(())
        })(),
        Format::Table => {
            let sim = BcastSim::new(spec.clone());
            let (diss, sync) = sim.map_or((0, None), |s| (s.dissemination_latency(), s.sync_at()));
            write_table(&mut out, &spec, &runs, seeds, a.seed, diss, sync)
        }
    };
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => fail(e, 1),
    }
}

fn write_table(
    out: &mut impl Write,
    spec: &BcastSpec,
    runs: &[RunMetrics],
    count: u64,
    seed: u64,
    dissemination: u64,
    sync: Option<u64>,
) -> std::io::Result<()> {
    let s = Summary::of(runs);
    writeln!(out, "{}", describe(spec))?;
    writeln!(out, "{count} runs, seed {seed}")?;
    match spec.dissemination {
        DissemSpec::Tree { .. } => {
            writeln!(out, "fault-free dissemination latency: {dissemination}")?
        }
        DissemSpec::Gossip { .. } => writeln!(out, "gossip phase: {dissemination}")?,
    }
    if let Some(t) = sync {
        writeln!(out, "correction starts at: {t}")?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "{:<28} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8}",
        "metric", "mean", "p50", "p95", "p99", "p99.9", "max"
    )?;
    let v = |x: f64| {
        if x.fract() == 0.0 {
            format!("{x}")
        } else {
            format!("{x:.3}")
        }
    };
    let row = |out: &mut dyn Write, name: &str, d: &Dist| -> std::io::Result<()> {
        if d.count == 0 {
            return Ok(());
        }
        writeln!(
            out,
            "{name:<28} {:>9.3} {:>8} {:>8} {:>8} {:>8} {:>8}",
            d.mean,
            v(d.p50),
            v(d.p95),
            v(d.p99),
            v(d.p999),
            v(d.max)
        )
    };
    row(out, "coloring latency", &s.coloring)?;
    row(out, "quiescence latency", &s.quiescence)?;
    row(out, "correction latency (L_SCC)", &s.correction)?;
    row(out, "messages per process", &s.messages)?;
    row(out, "max gap after dissemination", &s.max_gap)?;
    writeln!(out)?;
    writeln!(
        out,
        "runs leaving live processes uncolored: {} of {} ({} processes in total)",
        s.runs_with_uncolored, s.runs, s.uncolored_total
    )?;
    if s.hit_limit > 0 {
        writeln!(out, "runs stopped at the time limit: {}", s.hit_limit)?;
    }
    Ok(())
}

fn bench(a: BenchArgs) -> ExitCode {
    let mut spec_args = a.spec.clone();
    if spec_args.faults == "none" {
        spec_args.faults = "1%".into();
    }
    let spec = match spec_args.to_spec() {
        Ok(s) => s,
        Err(e) => return fail(e, 2),
    };
    let setup = crate::cputime::thread_cpu_time();
    let mut sim = match BcastSim::with_engine(spec.clone(), a.engine.into()) {
        Ok(s) => s,
        Err(e) => return fail(e, 2),
    };
    let setup = crate::cputime::thread_cpu_time() - setup;
    // One warm-up run sizes every buffer.
    sim.run(crate::runner::run_seed(a.seed, u64::MAX));
    let mut cpu = Vec::with_capacity(a.runs as usize);
    let mut wall = Vec::with_capacity(a.runs as usize);
    let mut messages = 0u64;
    for i in 0..a.runs {
        let w = std::time::Instant::now();
        let c = crate::cputime::thread_cpu_time();
        let m = sim.run(crate::runner::run_seed(a.seed, i));
        cpu.push((crate::cputime::thread_cpu_time() - c).as_secs_f64() * 1e3);
        wall.push(w.elapsed().as_secs_f64() * 1e3);
        messages += m.messages;
    }
    let c = Dist::of(&mut cpu);
    let w = Dist::of(&mut wall);
    println!("{}", describe(&spec));
    println!(
        "{} runs on one thread ({} engine), {:.0} messages per run",
        a.runs,
        if sim.is_fast() {
            "specialized"
        } else {
            "generic"
        },
        messages as f64 / a.runs as f64
    );
    println!(
        "setup (once per simulator and thread): {:.3} ms cpu",
        setup.as_secs_f64() * 1e3
    );
    println!(
        "cpu time per run:  median {:.3} ms  p5 {:.3}  p95 {:.3}  min {:.3}",
        c.p50, c.p5, c.p95, c.min
    );
    println!(
        "wall time per run: median {:.3} ms  p5 {:.3}  p95 {:.3}  min {:.3}",
        w.p50, w.p5, w.p95, w.min
    );
    println!(
        "per message (cpu, median run): {:.1} ns",
        c.p50 * 1e6 / (messages as f64 / a.runs as f64)
    );
    ExitCode::SUCCESS
}
