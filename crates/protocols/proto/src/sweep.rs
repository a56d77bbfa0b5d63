//! The seed-sweep harness of the simulation tests: run one scenario under many seeds, and
//! when a seed fails, say which one and how to replay it.
//!
//! - `STEADFAST_SIM_SEEDS=<n>`: how many seeds each sweep runs (each test picks a default).
//! - `STEADFAST_SEED=<s>`: run only seed `s` (a test may then also print a trace).
//!
//! A run is a pure function of its seed, so the printed command reproduces the failure
//! exactly.

use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

/// The variable naming the one seed to replay.
pub const SEED_VAR: &str = "STEADFAST_SEED";

/// The variable setting how many seeds a sweep runs.
pub const COUNT_VAR: &str = "STEADFAST_SIM_SEEDS";

/// The seed to replay (`STEADFAST_SEED`), if one is set.
///
/// # Panics
/// If the variable is set but is not an unsigned integer: a replay that was asked for and
/// silently not done would look like a pass.
pub fn replay() -> Option<u64> {
    env_u64(SEED_VAR)
}

/// How many seeds a sweep runs: `STEADFAST_SIM_SEEDS`, else `default`.
///
/// # Panics
/// If the variable is set but is not an unsigned integer.
pub fn count(default: u64) -> u64 {
    env_u64(COUNT_VAR).unwrap_or(default)
}

/// The seeds of one sweep: the replayed seed alone, else `seed_of(i)` for `i` in
/// `0..count(default)`.
pub fn seeds(default: u64, seed_of: impl Fn(u64) -> u64) -> Vec<u64> {
    match replay() {
        Some(seed) => vec![seed],
        None => (0..count(default)).map(seed_of).collect(),
    }
}

/// The `i`-th seed of a sweep salted with `salt`: consecutive indices land far apart, and
/// different salts (one per scenario) give different seed lists.
pub fn spread(i: u64, salt: u64) -> u64 {
    i.wrapping_mul(0x9e37_79b9).wrapping_add(salt)
}

/// Runs `run(seed)` for every seed in order and returns the results.
///
/// The first seed that fails stops the sweep with a panic that names `label`, the seed and
/// the command replaying it, `STEADFAST_SEED=<seed> <replay>`. A failure `run` returns
/// (`Err(reason)`) becomes the panic message; a panic inside `run` is re-raised unchanged
/// after the replay line is printed to stderr.
pub fn sweep<T>(
    label: &str,
    replay: &str,
    seeds: &[u64],
    mut run: impl FnMut(u64) -> Result<T, String>,
) -> Vec<T> {
    let mut out = Vec::with_capacity(seeds.len());
    for &seed in seeds {
        // Nothing `run` touched is used after a panic: the sweep stops there.
        match catch_unwind(AssertUnwindSafe(|| run(seed))) {
            Ok(Ok(t)) => out.push(t),
            Ok(Err(reason)) => {
                panic!(
                    "{label} failed at seed {seed}: {reason}\nreplay: {SEED_VAR}={seed} {replay}"
                )
            }
            Err(payload) => {
                eprintln!("\n{label} failed at seed {seed} (panic above)\nreplay: {SEED_VAR}={seed} {replay}\n");
                resume_unwind(payload);
            }
        }
    }
    out
}

fn env_u64(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    Some(parse(name, &value))
}

fn parse(name: &str, value: &str) -> u64 {
    value
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{name} must be an unsigned integer, not {value:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn panic_text(f: impl FnOnce()) -> String {
        let payload = catch_unwind(AssertUnwindSafe(f)).expect_err("must panic");
        match payload.downcast::<String>() {
            Ok(s) => *s,
            Err(p) => p
                .downcast::<&str>()
                .map(|s| s.to_string())
                .unwrap_or_default(),
        }
    }

    #[test]
    fn runs_every_seed_in_order() {
        let mut seen = Vec::new();
        let out = sweep("s", "cmd", &[5, 3, 9], |seed| {
            seen.push(seed);
            Ok(seed * 2)
        });
        assert_eq!(seen, [5, 3, 9]);
        assert_eq!(out, [10, 6, 18]);
    }

    #[test]
    fn a_returned_failure_names_seed_and_replay_and_stops() {
        let mut ran = Vec::new();
        let text = panic_text(|| {
            sweep("self-test", "cargo test x", &[1, 2, 3], |seed| {
                ran.push(seed);
                if seed == 2 {
                    Err("deliberate failure".to_string())
                } else {
                    Ok(())
                }
            });
        });
        assert_eq!(ran, [1, 2]);
        assert_eq!(
            text,
            "self-test failed at seed 2: deliberate failure\nreplay: STEADFAST_SEED=2 cargo test x"
        );
    }

    #[test]
    fn a_panic_is_reraised_unchanged() {
        let text = panic_text(|| {
            sweep("self-test", "cmd", &[7], |_| -> Result<(), String> {
                panic!("deliberate panic")
            });
        });
        assert_eq!(text, "deliberate panic");
    }

    #[test]
    fn spread_is_the_recorded_formula() {
        assert_eq!(spread(0, 42), 42);
        assert_eq!(spread(1, 0), 0x9e37_79b9);
        assert_eq!(spread(3, 1_000_003), 3 * 0x9e37_79b9 + 1_000_003);
        assert_eq!(spread(u64::MAX, 0), 0u64.wrapping_sub(0x9e37_79b9));
    }

    #[test]
    fn values_parse_or_say_what_is_wrong() {
        assert_eq!(parse("V", "12"), 12);
        assert_eq!(parse("V", " 12\n"), 12);
        let text = panic_text(|| {
            parse("STEADFAST_SEED", "abc");
        });
        assert_eq!(
            text,
            "STEADFAST_SEED must be an unsigned integer, not \"abc\""
        );
        assert!(!panic_text(|| {
            parse("V", "-1");
        })
        .is_empty());
    }
}
