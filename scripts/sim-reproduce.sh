#!/bin/sh
# Regenerates the numbers and plots of docs/reproduction/corrected-trees.md.
#
#   scripts/sim-reproduce.sh                 # 1000 runs per cell, 50 per figure point
#   scripts/sim-reproduce.sh 100000 1000     # the paper's 10^5 runs per tree type and rate
#
# Needs a TrueType font for the PNG labels (Debian: fonts-dejavu-core) or STEADFAST_FONT.
set -eu
runs=${1:-1000}
fig_runs=${2:-50}
out=${OUT:-docs/reproduction/corrected-trees}
cd "$(dirname "$0")/.."
cargo build --release -p steadfast-sim --bin steadfast-sim
exec target/release/steadfast-sim paper --out "$out" --runs "$runs" --fig-runs "$fig_runs" --seed 1
