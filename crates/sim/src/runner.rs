//! Many runs of one broadcast configuration, spread over threads, with a progress bar.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::bcast::{BcastSim, BcastSpec, EngineChoice, RunMetrics, SimError};

/// Seed of run `index` of a batch started from `base` (SplitMix64 of both, so runs are
/// independent of how they are spread over threads).
pub fn run_seed(base: u64, index: u64) -> u64 {
    let mut z = base.wrapping_add(index.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// How to run a batch.
#[derive(Debug, Clone)]
pub struct Batch {
    /// Number of runs.
    pub runs: u64,
    /// Base seed.
    pub seed: u64,
    /// Worker threads (0: all cores).
    pub threads: usize,
    /// Show a progress bar on standard error.
    pub progress: bool,
    /// Label for the progress bar.
    pub label: String,
    /// Engine (results are the same either way).
    pub engine: EngineChoice,
}

/// Runs `batch.runs` broadcasts of `spec`; results are in run order.
pub fn run_batch(spec: &BcastSpec, batch: &Batch) -> Result<Vec<RunMetrics>, SimError> {
    // Fail early, on this thread, if the spec is bad.
    drop(BcastSim::with_engine(spec.clone(), batch.engine)?);
    let threads = match batch.threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
    .min(batch.runs.max(1) as usize);
    let bar = if batch.progress {
        let bar = ProgressBar::with_draw_target(Some(batch.runs), ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template(
            "{msg:>28} [{elapsed_precise}] {wide_bar} {pos}/{len} runs (eta {eta})",
        ) {
            bar.set_style(style);
        }
        bar.set_message(batch.label.clone());
        bar
    } else {
        ProgressBar::hidden()
    };
    let next = AtomicU64::new(0);
    let results: Mutex<Vec<(u64, RunMetrics)>> =
        Mutex::new(Vec::with_capacity(batch.runs as usize));
    const CHUNK: u64 = 8;
    let outcome: Result<(), SimError> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| -> Result<(), SimError> {
                    let mut sim = BcastSim::with_engine(spec.clone(), batch.engine)?;
                    let mut local = Vec::new();
                    loop {
                        let start = next.fetch_add(CHUNK, Ordering::Relaxed);
                        if start >= batch.runs {
                            break;
                        }
                        let end = (start + CHUNK).min(batch.runs);
                        for i in start..end {
                            local.push((i, sim.run(run_seed(batch.seed, i))));
                        }
                        bar.inc(end - start);
                    }
                    if let Ok(mut all) = results.lock() {
                        all.extend(local);
                    }
                    Ok(())
                })
            })
            .collect();
        for w in workers {
            match w.join() {
                Ok(r) => r?,
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        Ok(())
    });
    outcome?;
    bar.finish_and_clear();
    let mut all = results.into_inner().unwrap_or_else(|e| e.into_inner());
    all.sort_unstable_by_key(|(i, _)| *i);
    Ok(all.into_iter().map(|(_, m)| m).collect())
}
