//! Summaries of many runs: means and nearest-rank percentiles.

use crate::bcast::RunMetrics;

/// Distribution of one metric over runs.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Dist {
    /// Number of values.
    pub count: usize,
    /// Mean.
    pub mean: f64,
    /// Smallest value.
    pub min: f64,
    /// 5th percentile.
    pub p5: f64,
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Largest value.
    pub max: f64,
}

/// Nearest-rank percentile of sorted values (`p` in percent).
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    // The epsilon keeps e.g. 99.9% of 1000 at rank 999 despite rounding in p / 100 · n.
    let rank = ((p / 100.0) * sorted.len() as f64 - 1e-9).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

impl Dist {
    /// Summarizes `values` (sorted in place).
    pub fn of(values: &mut [f64]) -> Dist {
        if values.is_empty() {
            return Dist::default();
        }
        values.sort_by(|a, b| a.total_cmp(b));
        let n = values.len();
        Dist {
            count: n,
            mean: values.iter().sum::<f64>() / n as f64,
            min: values[0],
            p5: percentile(values, 5.0),
            p50: percentile(values, 50.0),
            p95: percentile(values, 95.0),
            p99: percentile(values, 99.0),
            p999: percentile(values, 99.9),
            max: values[n - 1],
        }
    }
}

/// Summary of a batch of broadcast runs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    /// Runs.
    pub runs: usize,
    /// Coloring latency.
    pub coloring: Dist,
    /// Quiescence latency.
    pub quiescence: Dist,
    /// Quiescence minus synchronized correction start (synchronized runs only).
    pub correction: Dist,
    /// Messages per process.
    pub messages: Dist,
    /// Maximum gap after dissemination.
    pub max_gap: Dist,
    /// Failed processes.
    pub failed: Dist,
    /// Runs leaving at least one live process uncolored.
    pub runs_with_uncolored: usize,
    /// Uncolored live processes over all runs.
    pub uncolored_total: u64,
    /// Runs stopped at the time limit.
    pub hit_limit: usize,
}

impl Summary {
    /// Summarizes runs.
    pub fn of(runs: &[RunMetrics]) -> Summary {
        let col = |f: &dyn Fn(&RunMetrics) -> Option<f64>| {
            let mut v: Vec<f64> = runs.iter().filter_map(f).collect();
            Dist::of(&mut v)
        };
        Summary {
            runs: runs.len(),
            coloring: col(&|m| Some(m.coloring_latency as f64)),
            quiescence: col(&|m| Some(m.quiescence_latency as f64)),
            correction: col(&|m| m.correction_latency.map(|l| l as f64)),
            messages: col(&|m| Some(m.messages_per_process())),
            max_gap: col(&|m| Some(f64::from(m.max_gap))),
            failed: col(&|m| Some(f64::from(m.failed))),
            runs_with_uncolored: runs.iter().filter(|m| m.uncolored > 0).count(),
            uncolored_total: runs.iter().map(|m| u64::from(m.uncolored)).sum(),
            hit_limit: runs.iter().filter(|m| m.hit_limit).count(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank() {
        let v: Vec<f64> = (1..=1000).map(f64::from).collect();
        assert_eq!(percentile(&v, 99.0), 990.0);
        assert_eq!(percentile(&v, 99.9), 999.0);
        assert_eq!(percentile(&v, 100.0), 1000.0);
        assert_eq!(percentile(&v, 0.0), 1.0);
        assert_eq!(percentile(&[7.0], 50.0), 7.0);
    }
}
