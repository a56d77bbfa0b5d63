#!/usr/bin/env bash
# Ping-pong and collective comparison: Steadfast (shm, tcp) vs Open MPI (vader,
# tcp) vs MPICH, one markdown report on stdout. All options go to
# bench/pingpong.py (see --help there), e.g.
#   scripts/bench-pingpong.sh --prefix ./install
#   PREFIX=/opt/steadfast scripts/bench-pingpong.sh --only sf-shm,ompi-vader --no-coll
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
exec python3 "$here/../bench/pingpong.py" "$@"
