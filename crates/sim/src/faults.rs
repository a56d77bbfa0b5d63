//! Fault injection plans: which processes fail, and when.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::network::Liveness;

/// Which processes fail in a run. The root (rank 0) never fails: it starts the broadcast.
#[derive(Debug, Clone, PartialEq)]
pub enum FaultPlan {
    /// No failures.
    None,
    /// Exactly these ranks are dead from the start.
    List(Vec<u32>),
    /// `round(fraction · P)` ranks, drawn uniformly among `1..P`, are dead from the start.
    Fraction(f64),
    /// These ranks crash at the given times (time 0: dead from the start); they act normally
    /// before that.
    At(Vec<(u32, u64)>),
    /// `round(fraction · P)` ranks crash at a uniform time in `from..=until` (they act
    /// normally before that).
    Crash {
        /// Fraction of processes that crash.
        fraction: f64,
        /// Earliest crash time.
        from: u64,
        /// Latest crash time.
        until: u64,
    },
}

/// Why a fault plan does not fit a run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FaultError {
    /// A listed rank is the root or outside the group.
    #[error("cannot fail rank {rank} of {procs} (the root, rank 0, is protected)")]
    Rank {
        /// Offending rank.
        rank: u32,
        /// Group size.
        procs: u32,
    },
    /// The fraction is not within `0..=1`.
    #[error("fault fraction {0} is outside 0..=1")]
    Fraction(f64),
    /// The crash window is empty.
    #[error("crash window {from}..={until} is empty")]
    Window {
        /// Start.
        from: u64,
        /// End.
        until: u64,
    },
}

impl FaultPlan {
    /// Checks the plan against a group of `procs` processes.
    pub fn validate(&self, procs: u32) -> Result<(), FaultError> {
        match self {
            FaultPlan::None => Ok(()),
            FaultPlan::List(ranks) => match ranks.iter().find(|&&r| r == 0 || r >= procs) {
                Some(&rank) => Err(FaultError::Rank { rank, procs }),
                None => Ok(()),
            },
            FaultPlan::At(list) => match list.iter().find(|&&(r, _)| r == 0 || r >= procs) {
                Some(&(rank, _)) => Err(FaultError::Rank { rank, procs }),
                None => Ok(()),
            },
            FaultPlan::Fraction(f) | FaultPlan::Crash { fraction: f, .. }
                if !(0.0..=1.0).contains(f) =>
            {
                Err(FaultError::Fraction(*f))
            }
            FaultPlan::Crash { from, until, .. } if from > until => Err(FaultError::Window {
                from: *from,
                until: *until,
            }),
            _ => Ok(()),
        }
    }

    /// Number of processes that fail in a group of `procs`.
    pub fn count(&self, procs: u32) -> u32 {
        let frac = |f: f64| ((f * f64::from(procs)).round() as u32).min(procs.saturating_sub(1));
        match self {
            FaultPlan::None => 0,
            FaultPlan::List(r) => r.len() as u32,
            FaultPlan::At(r) => r.len() as u32,
            FaultPlan::Fraction(f) => frac(*f),
            FaultPlan::Crash { fraction, .. } => frac(*fraction),
        }
    }

    /// Marks the failing processes of one run in `live` (which must be all-alive), drawing
    /// from `rng`. Returns how many fail.
    pub fn apply(&self, live: &mut Liveness, rng: &mut ChaCha8Rng) -> u32 {
        let procs = live.procs();
        match self {
            FaultPlan::None => 0,
            FaultPlan::List(ranks) => {
                for &r in ranks {
                    live.kill(r, 0);
                }
                ranks.len() as u32
            }
            FaultPlan::At(list) => {
                for &(r, at) in list {
                    live.kill(r, at);
                }
                list.len() as u32
            }
            FaultPlan::Fraction(_) => {
                let n = self.count(procs);
                choose(live, rng, n, |_| 0);
                n
            }
            FaultPlan::Crash { from, until, .. } => {
                let n = self.count(procs);
                let (from, until) = (*from, *until);
                choose(live, rng, n, |rng| rng.gen_range(from..=until));
                n
            }
        }
    }
}

/// Floyd's sampling of `n` distinct ranks among `1..procs`, using `live` as the set.
fn choose(
    live: &mut Liveness,
    rng: &mut ChaCha8Rng,
    n: u32,
    mut when: impl FnMut(&mut ChaCha8Rng) -> u64,
) {
    let pool = live.procs() - 1;
    for j in (pool - n)..pool {
        let t = rng.gen_range(0..=j) + 1;
        let pick = if live.ever_fails(t) { j + 1 } else { t };
        let at = when(rng);
        live.kill(pick, at);
    }
}

/// Per-run generator derived from a base seed and a run index.
pub fn run_rng(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fraction_kills_exact_count_and_spares_root() {
        let mut live = Liveness::all_alive(1000);
        let mut rng = run_rng(7);
        let n = FaultPlan::Fraction(0.04).apply(&mut live, &mut rng);
        assert_eq!(n, 40);
        assert!(!live.ever_fails(0));
        assert_eq!((0..1000).filter(|&r| live.ever_fails(r)).count(), 40);
    }

    #[test]
    fn full_fraction_kills_everybody_but_root() {
        let mut live = Liveness::all_alive(50);
        let n = FaultPlan::Fraction(1.0).apply(&mut live, &mut run_rng(1));
        assert_eq!(n, 49);
        assert!((1..50).all(|r| live.ever_fails(r)));
    }

    #[test]
    fn validation() {
        assert!(FaultPlan::List(vec![0]).validate(4).is_err());
        assert!(FaultPlan::List(vec![4]).validate(4).is_err());
        assert!(FaultPlan::List(vec![3]).validate(4).is_ok());
        assert!(FaultPlan::Fraction(1.5).validate(4).is_err());
        assert!(FaultPlan::Crash {
            fraction: 0.1,
            from: 5,
            until: 4
        }
        .validate(4)
        .is_err());
    }
}
