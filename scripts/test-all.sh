#!/usr/bin/env bash
# Run every test suite: Rust unit/simulation/integration tests, then the C programs compiled
# with our mpicc and run with our launcher over shm and tcp, the NPB kernels and the LU
# pseudo-application at class S, the fast subset of MPICH's test suite, Slurm and Hydra
# launches (short form), then NetPIPE.
# Usage: scripts/test-all.sh [PREFIX]   (PREFIX defaults to ./install; `make test` passes it)
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
prefix=${1:-$here/install}
cd "$here"
passed=0; failed=0; skipped=0; failed_names=""
suite() {   # suite NAME COMMAND...
    local name=$1 t0=$SECONDS; shift
    echo "=== $name"
    if "$@"; then passed=$((passed+1)); echo "=== $name: ok ($((SECONDS - t0)) s)"
    else failed=$((failed+1)); failed_names="$failed_names
  - $name"; echo "=== $name: FAILED ($((SECONDS - t0)) s)"; fi
}
suite "rust tests" cargo test --release --workspace
suite "every function mpi.h declares is exported" scripts/check-abi-symbols.sh "$prefix/lib/libmpi_abi.so"
if [ -x tests/c/run-tests.sh ]; then
    suite "C integration tests" tests/c/run-tests.sh --mpicc "$prefix/bin/mpicc" \
        --mpiexec "$prefix/bin/mpiexec" --paths "shm tcp"
fi
if [ -x bench/npb/test.sh ]; then
    # Our own CG, IS, MG and FT (bench/npb/README.md), checked against the published values.
    suite "NPB kernels (classes S and W)" bench/npb/test.sh "$prefix"
fi
if [ -x tests/c/coll/small-shm.sh ]; then
    suite "slot collectives on a small /dev/shm (skips without root)" tests/c/coll/small-shm.sh "$prefix"
fi
if [ -x tests/c/bind/run.sh ]; then
    suite "CPU binding (mpiexec --bind-to none, core, hwthread)" tests/c/bind/run.sh "$prefix"
fi
if [ -x tests/c/chbcast/run.sh ]; then
    suite "channel broadcast on shared memory (forced on and off, few channels, faults, failover)" \
        tests/c/chbcast/run.sh "$prefix"
fi
if [ -x tests/c/chbcast/hosts.sh ]; then
    suite "channel broadcast across hosts over IP multicast (namespaces; skips without root)" \
        tests/c/chbcast/hosts.sh "$prefix"
fi
if [ -x tests/c/rma/hosts.sh ]; then
    suite "one-sided communication across hosts (namespaces; skips without root)" \
        tests/c/rma/hosts.sh "$prefix"
fi
if [ -x tests/c/run-tests.sh ]; then
    # Single-copy transfers are off by default; keep them working for those who turn them on.
    suite "C point-to-point tests with single copy (STEADFAST_CMA=1)" env STEADFAST_CMA=1 \
        tests/c/run-tests.sh --mpicc "$prefix/bin/mpicc" --mpiexec "$prefix/bin/mpiexec" \
        --paths shm --build-dir "$here/tests/c/build-cma" \
        --filter 'pingpong_sizes|sendrecv|ssend|order|large_count|anysource|probe|cancel|bigxfer|datatype'
fi
if [ -x tests/fortran/run.sh ]; then
    suite "Fortran and C++ programs, wrappers, pkg-config, CMake" tests/fortran/run.sh "$prefix"
fi
if [ -x scripts/mpich-tests.sh ]; then
    suite "MPICH test suite (fast subset)" scripts/mpich-tests.sh --prefix "$prefix" --fast
fi
if [ -x scripts/mpi4py-tests.sh ]; then
    # Builds mpi4py once per library build (cached under $TMPDIR), then a subset on 1 and 2 ranks.
    suite "mpi4py test suite (quick subset)" scripts/mpi4py-tests.sh --prefix "$prefix" --quick
fi
if [ -x tests/c/ft/run.sh ]; then
    suite "run-through fault tolerance (ft_solver with killed ranks)" tests/c/ft/run.sh "$prefix"
fi
if [ -x scripts/ft-tests.sh ]; then
    suite "MPICH ft suite in run-through mode" scripts/ft-tests.sh "$prefix"
fi
if [ -x tests/ckpt/run.sh ]; then
    suite "process images (checkpoint, kill, restore; skips without ADDR_NO_RANDOMIZE)" tests/ckpt/run.sh "$prefix"
    suite "coordinated checkpoints: unmodified program killed and rolled back, shm and tcp" tests/ckpt/coordinated.sh "$prefix"
    suite "message logging (pessimistic, causal, channel memories): unmodified programs, only the killed rank restarts" tests/ckpt/logging.sh "$prefix"
    suite "checkpoints across two hosts (namespaces): a lost local copy from the checkpoint server; message logging with the event logger on a third host" tests/ckpt/hosts.sh "$prefix"
fi
if [ -x tests/c/reliable/run.sh ]; then
    suite "reliability (udp with faults; damage repaired on shm and tcp)" tests/c/reliable/run.sh "$prefix"
fi
if [ -x tests/security/run.sh ]; then
    suite "descriptor flood by another user (skips without root)" tests/security/run.sh "$prefix"
fi
if [ -x scripts/fuzz-frame.sh ]; then
    # Bounded: the stable randomized harness of every fuzz target (20000 cases each, and
    # 200000 for the runtime's decoders). Coverage-guided runs: scripts/fuzz-frame.sh SECS.
    suite "decoders of outside data under random input (stable fuzz harness)" env STEADFAST_FUZZ_STABLE=1 scripts/fuzz-frame.sh
fi
if [ -x tests/security/wire.sh ]; then
    suite "job key never on the wire (tcp and udp under strace)" tests/security/wire.sh "$prefix"
fi
if [ -x scripts/netns-failover.sh ]; then
    suite "multi-host failover (network namespaces; skips without root)" scripts/netns-failover.sh "$prefix"
fi
if [ -x scripts/slurm-tests.sh ]; then
    # Full form: `make test-cluster`. Installs Slurm, munge and MPICH's Hydra when missing;
    # skips the Slurm cases where the cluster cannot start (not root).
    suite "Slurm (srun pmi2/pmix, salloc) and Hydra, short form" scripts/slurm-tests.sh --short "$prefix"
fi
if [ -x scripts/slurm-cluster-tests.sh ]; then
    # Three emulated nodes (network + UTS namespaces), torn down after; full form:
    # `make test-cluster`. Skips where namespaces or the daemons cannot run (not root).
    suite "Slurm on 3 emulated nodes (srun -N 3 pmi2/pmix, salloc + mpiexec, Hydra), short form" \
        scripts/slurm-cluster-tests.sh --short "$prefix"
fi
if [ -x scripts/hdf5-tests.sh ]; then
    # Building parallel HDF5 takes minutes: the short form runs only once
    # scripts/hdf5-tests.sh has built it (docs/io.md).
    if [ -f build/hdf5/built ]; then
        suite "parallel HDF5 testpar (short)" scripts/hdf5-tests.sh --prefix "$prefix" --short
    else
        echo "=== parallel HDF5 testpar: skipped (not built; run scripts/hdf5-tests.sh once)"
    fi
fi
if [ -x bench/npb/test-lu.sh ]; then
    # NAS LU class S on 4 ranks: many small messages (pipelined sweeps), checked against the
    # published residual, error and surface-integral values (bench/npb/LU.md).
    suite "NPB LU (classes S and W)" bench/npb/test-lu.sh "$prefix"
fi
if [ -f bench/ft_protocols.py ]; then
    # The protocol comparison's short form (bench/ft_protocols.py --quick, under a minute on
    # a quiet machine): NetPIPE per mode on shm and tcp, the NAS kernels at class S per mode,
    # LU class W with 0-2 faults per fault configuration; every run must verify. Into a
    # scratch directory (the committed results come from the longer runs).
    ft_out=$(mktemp -d)
    suite "protocol comparison, short form (--quick: NetPIPE, NPB, faults)" \
        python3 bench/ft_protocols.py --quick --prefix "$prefix" --out "$ft_out"
    rm -rf "$ft_out"
fi
if [ -f bench/osu.py ]; then
    # Ratios to Open MPI against bench/osu/baseline.json (full suite: `make bench-osu`).
    suite "OSU-style ratios to Open MPI against the stored baseline" \
        python3 bench/osu.py --ci --prefix "$prefix"
fi
if [ -x scripts/apps-tests.sh ]; then
    # Building LAMMPS takes ~30 min on 2 cores: the short form runs only what `make test-apps`
    # has built and cached (docs/applications.md), and says so when there is nothing.
    suite "applications: LAMMPS melt and its Fortran driver (short; needs make test-apps once)" \
        scripts/apps-tests.sh --prefix "$prefix" --short --reps 1
fi
if [ -x scripts/netpipe-test.sh ]; then
    suite "NetPIPE" env PREFIX="$prefix" scripts/netpipe-test.sh
fi
echo
echo "suites: $passed passed, $failed failed"
[ "$failed" -eq 0 ] || printf "failed suites:%b\n" "$failed_names"
[ "$failed" -eq 0 ]
