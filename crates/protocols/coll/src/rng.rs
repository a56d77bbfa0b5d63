//! A tiny deterministic generator for gossip targets (SplitMix64).
//!
//! Kept in-crate so the protocol core has no dependency and its choices replay exactly from a
//! seed on every platform.

/// SplitMix64 step: advances `state` and returns the next output.
#[inline]
pub(crate) fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Uniform integer in `0..n` (n > 0) by multiply-shift; bias below 2^-32 for n < 2^32.
#[inline]
pub(crate) fn below(state: &mut u64, n: u32) -> u32 {
    ((u128::from(splitmix64(state)) * u128::from(n)) >> 64) as u32
}

/// Seed of one process's generator, decorrelated across ranks.
pub(crate) fn seed_for(seed: u64, rank: u32) -> u64 {
    let mut s = seed ^ (u64::from(rank).wrapping_mul(0xD6E8_FEB8_6659_FD93));
    splitmix64(&mut s)
}
