#!/usr/bin/env bash
# Short fuzzing run of every decoder of data from outside the process: the reliable
# channel's frame decoder and state machine, the tcp data stream (handshake and frames),
# the launcher's control protocol, the fault-tolerance control frames, the membership
# messages, shared-memory ring records, the PMI-1 client's reply parser, ULFM wire
# messages and the rollback protocol's messages and channel records.
#
#   scripts/fuzz-frame.sh [seconds-per-target] [target...]
#
# Targets live in fuzz/ (cargo-fuzz layout, libFuzzer, needs a nightly toolchain).
# Uses `cargo fuzz` when it is installed, otherwise builds the same instrumentation by
# hand with `cargo +nightly`. Without nightly it falls back to the randomized harness
# tests on stable (same oracles, no coverage guidance) and says so.
# STEADFAST_FUZZ_JOBS limits build parallelism (default 2). STEADFAST_FUZZ_STABLE=1 runs the
# stable harness even where nightly exists (what `make test` does: bounded by case count).
set -euo pipefail

secs="${1:-30}"
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(frame_decode channel_ops tcp_stream control_wire ft_frame membership_wire
    shm_ring pmi1_wire ulfm_wire rollback_wire ckpt_store_wire logging_wire channel_memory_wire event_logger_wire)
root="$(cd "$(dirname "$0")/.." && pwd)"
jobs="${STEADFAST_FUZZ_JOBS:-2}"

if [ "${STEADFAST_FUZZ_STABLE:-0}" = 1 ] || ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    echo "fuzz-frame: running the randomized harness tests on stable (no nightly toolchain, or STEADFAST_FUZZ_STABLE=1)" >&2
    STEADFAST_FUZZ_CASES="${STEADFAST_FUZZ_CASES:-20000}" \
        cargo test --release -j "$jobs" --manifest-path "$root/Cargo.toml" \
        -p steadfast-reliable --test fuzz_harness
    STEADFAST_FUZZ_CASES="${STEADFAST_FUZZ_CASES:-200000}" \
        cargo test --release -j "$jobs" --manifest-path "$root/Cargo.toml" \
        -p steadfast-runtime --test fuzz_decoders
    exit 0
fi

target_triple="$(rustc +nightly -vV | sed -n 's/^host: //p')"
for t in "${targets[@]}"; do
    mkdir -p "$root/fuzz/corpus/$t" "$root/fuzz/artifacts/$t"
    if cargo +nightly fuzz --help >/dev/null 2>&1; then
        (cd "$root/fuzz" && cargo +nightly fuzz run -j 1 "$t" -- -max_total_time="$secs")
        continue
    fi
    # The flags cargo-fuzz passes by default (sancov + ASan + debug assertions).
    RUSTFLAGS="-Cpasses=sancov-module \
        -Cllvm-args=-sanitizer-coverage-level=4 \
        -Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
        -Cllvm-args=-sanitizer-coverage-pc-table \
        -Cllvm-args=-sanitizer-coverage-trace-compares \
        --cfg fuzzing -Zsanitizer=address -Cdebug-assertions -Coverflow-checks" \
    cargo +nightly build --release -j "$jobs" --manifest-path "$root/fuzz/Cargo.toml" \
        --target "$target_triple" --bin "$t"
    "$root/fuzz/target/$target_triple/release/$t" \
        -max_total_time="$secs" -artifact_prefix="$root/fuzz/artifacts/$t/" \
        "$root/fuzz/corpus/$t"
done
