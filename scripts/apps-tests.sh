#!/usr/bin/env bash
# Real applications, unmodified, from Debian source packages, built twice: with Steadfast's
# wrappers (mpicc, mpicxx, mpifort) and with Debian's Open MPI. Runs each application's own
# inputs or test programs with both, checks that the answers are identical, and prints the time
# per run side by side (docs/applications.md).
#
#   LAMMPS (`lammps`): `lmp` (CMake, BUILD_MPI=on, no optional packages) on examples/melt and
#     bench/in.lj on 1, 2 and 4 ranks; the C, C++ and Fortran drivers of examples/COUPLE/simple
#     (LAMMPS as a library on a communicator split off MPI_COMM_WORLD; the Fortran one passes
#     a Fortran communicator that LAMMPS turns into a C one with MPI_Comm_f2c).
#   ScaLAPACK (`scalapack`): its TESTING programs (xslu, xdqr, ...; Fortran, BLACS over MPI)
#     on 4 ranks, graded by their own "passed/failed" lines. Skipped, saying so, when the
#     package archive has no source for it (so far it never had: this part is unexercised).
#
# Usage: scripts/apps-tests.sh [--prefix PREFIX] [--cache DIR] [--short] [--reps N]
#            [--apps "lammps scalapack"] [--mpis "steadfast openmpi"] [--jobs N] [--out FILE]
#            [--fetch-only] [--build-only]
#   --prefix PREFIX  Steadfast to test (PREFIX/bin/mpicc ..., default ./install)
#   --cache DIR      sources, builds and logs (default $STEADFAST_APPS_CACHE, else
#                    ~/.cache/steadfast-apps); outside the repository, never committed
#   --short          `make test`'s form: only runs what is already built (never fetches or
#                    builds: building LAMMPS takes ~30 min on 2 cores), one run of melt on 1 and
#                    2 ranks and of the Fortran driver on 3; skips with a message when not built
#   --mpis LIST      which builds to make and run (default both; Steadfast is always first)
#   --reps N         timed runs per case and MPI, alternating the two MPIs (default 5)
#   --out FILE       also write the result table (markdown) to FILE
# The Steadfast builds link libmpi_abi.so.1 (the MPI 5.0 standard ABI) by RUNPATH; runs put
# PREFIX/lib first on LD_LIBRARY_PATH, so a cached build runs against the library under test.
# They are rebuilt when PREFIX's mpi.h or mpif.h changes.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
prefix=$here/install
cache=${STEADFAST_APPS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/steadfast-apps}
short=no; reps=5; apps="lammps scalapack"; want_ompi=yes; jobs=2; out=""; fetch_only=no; build_only=no
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) prefix=$(cd "$2" && pwd); shift 2 ;;
        --cache) cache=$2; shift 2 ;;
        --short) short=yes; shift ;;
        --reps) reps=$2; shift 2 ;;
        --apps) apps=$2; shift 2 ;;
        --mpis) case " $2 " in *" openmpi "*) want_ompi=yes ;; *) want_ompi=no ;; esac; shift 2 ;;
        --jobs) jobs=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --fetch-only) fetch_only=yes; shift ;;
        --build-only) build_only=yes; shift ;;
        -h|--help) sed -n '2,29p' "$0"; exit 0 ;;
        *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
    esac
done
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
src=$cache/src
logs=$cache/logs
mkdir -p "$src" "$logs"
sources=/etc/apt/sources.list.d/debian.sources
failures=0
fail() { echo "FAIL: $*"; failures=$((failures+1)); }

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"
    elif command -v sudo >/dev/null 2>&1; then sudo -n "$@"
    else echo "error: need root for: $*" >&2; return 1
    fi
}

# ---- the two MPIs -------------------------------------------------------------------------
sf_cc=$prefix/bin/mpicc; sf_cxx=$prefix/bin/mpicxx; sf_fc=$prefix/bin/mpifort
for w in "$sf_cc" "$sf_cxx" "$prefix/bin/mpiexec"; do
    [ -x "$w" ] || { echo "error: $w missing (run make)" >&2; exit 1; }
done
[ -x "$sf_fc" ] || sf_fc=""
# What a Steadfast build depends on besides the sources: the ABI headers it was compiled with.
sf_key=$(cat "$prefix/include/mpi.h" "$prefix/include/mpif.h" 2>/dev/null | sha256sum | cut -c1-16)
sf_run() { local np=$1; shift
    LD_LIBRARY_PATH=$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$prefix/bin/mpiexec" -n "$np" "$@"; }

have_ompi=no
ensure_ompi() {
    if ! command -v mpicxx.openmpi >/dev/null 2>&1 || ! command -v mpirun.openmpi >/dev/null 2>&1; then
        [ "$short" = yes ] && return 0
        echo "== installing Debian's Open MPI (openmpi-bin libopenmpi-dev)"
        as_root apt-get install -y -qq openmpi-bin libopenmpi-dev >/dev/null 2>&1 || \
            { as_root apt-get update -qq && as_root apt-get install -y -qq openmpi-bin libopenmpi-dev >/dev/null; } || true
    fi
    command -v mpicxx.openmpi >/dev/null 2>&1 && command -v mpirun.openmpi >/dev/null 2>&1 && have_ompi=yes
    return 0
}
ompi_run() { local np=$1; shift
    local root=(); [ "$(id -u)" = 0 ] && root=(--allow-run-as-root)
    # --oversubscribe: 4 ranks on a 2-core machine, as Steadfast's launcher allows by default.
    mpirun.openmpi "${root[@]}" --oversubscribe -np "$np" "$@"; }
run_with() { local mpi=$1; shift; if [ "$mpi" = steadfast ]; then sf_run "$@"; else ompi_run "$@"; fi; }

# ---- sources ------------------------------------------------------------------------------
# fetch PKG: apt-get source --download-only into $src; prints nothing, returns 1 if no tarball.
find_orig() { ls "$src"/"$1"_*.orig.tar.* 2>/dev/null | head -n 1 || true; }
fetch() {
    local pkg=$1
    [ -n "$(find_orig "$pkg")" ] && return 0
    [ "$short" = yes ] && return 1
    if [ -f "$sources" ] && grep -Eq '^Types:' "$sources" && \
       grep -E '^Types:' "$sources" | grep -vq 'deb-src'; then
        echo "== enabling deb-src in $sources"
        as_root sed -i -E '/^Types:/{/deb-src/!s/$/ deb-src/}' "$sources"
        as_root apt-get update -qq
    fi
    if [ -z "$(apt-cache showsrc "$pkg" 2>/dev/null | head -n 1)" ]; then
        as_root apt-get update -qq || true
    fi
    command -v dpkg-source >/dev/null 2>&1 || as_root apt-get install -y -qq dpkg-dev >/dev/null
    echo "== apt-get source --download-only $pkg (into $src)"
    (cd "$src" && apt-get source --download-only "$pkg") >"$logs/fetch-$pkg.log" 2>&1 || \
        { echo "   apt-get source $pkg reported errors:"; grep -E '^(E|W):' "$logs/fetch-$pkg.log" | sed 's/^/   /' | head -n 4; }
    [ -n "$(find_orig "$pkg")" ]
}
# unpack PKG: prints the unpacked upstream tree.
unpack() {
    local pkg=$1 orig dir
    orig=$(find_orig "$pkg")
    dir=$src/$(tar -tf "$orig" 2>/dev/null | head -n 1 | cut -d/ -f1 || true)
    if [ ! -e "$dir/.unpacked" ]; then
        echo "== unpacking $(basename "$orig")" >&2
        tar -xf "$orig" -C "$src" && touch "$dir/.unpacked"
    fi
    echo "$dir"
}

# ---- timing helpers -----------------------------------------------------------------------
now() { date +%s.%N; }
median() { sort -g | awk '{a[NR]=$1} END {if (NR==0) print "-"; else if (NR%2) printf "%.2f", a[(NR+1)/2]; else printf "%.2f", (a[NR/2]+a[NR/2+1])/2}'; }
table=()
declare -A first_ref first_np
row() { table+=("$1"); }

# ---- LAMMPS -------------------------------------------------------------------------------
lammps_build() {   # lammps_build MPI TREE -> builds $cache/build/lammps-MPI
    local mpi=$1 tree=$2 b=$cache/build/lammps-$1 cc cxx fc key
    if [ "$mpi" = steadfast ]; then cc=$sf_cc; cxx=$sf_cxx; fc=$sf_fc; key=$sf_key
    else cc=$(command -v mpicc.openmpi); cxx=$(command -v mpicxx.openmpi)
         fc=$(command -v mpif90.openmpi || true); key=openmpi-$(dpkg-query -W -f '${Version}' libopenmpi-dev 2>/dev/null || echo unknown)
    fi
    key="$key $(basename "$tree")"
    if [ -f "$b/built" ] && [ "$(cat "$b/built")" = "$key" ]; then return 0; fi
    if [ "$short" = yes ]; then
        echo "   lammps-$mpi: not built for these headers; run scripts/apps-tests.sh (make test-apps) once"
        return 1
    fi
    echo "== building LAMMPS with $mpi ($cxx) in $b (nice, -j$jobs; ~30 min on 2 cores)"
    # An interrupted build of the same sources with the same headers resumes where it stopped.
    if [ "$(cat "$b/key" 2>/dev/null)" != "$key" ]; then
        rm -rf "$b"; mkdir -p "$b"; echo "$key" >"$b/key"
    fi
    # Minimal package set: no optional packages, no OpenMP, no image/movie/compression output;
    # FFT is not needed without KSPACE.
    if ! (cd "$b" && { [ -f CMakeCache.txt ] || nice -n 10 cmake "$tree/cmake" -DCMAKE_BUILD_TYPE=Release \
            -DBUILD_MPI=on -DBUILD_OMP=off -DCMAKE_CXX_COMPILER="$cxx" -DMPI_CXX_COMPILER="$cxx" \
            -DWITH_JPEG=off -DWITH_PNG=off -DWITH_GZIP=off -DWITH_FFMPEG=off \
            -DBUILD_SHARED_LIBS=off >"$b/cmake.log" 2>&1; } && \
          nice -n 10 make -j"$jobs" lmp >"$b/make.log" 2>&1); then
        fail "LAMMPS build with $mpi (see $b/cmake.log, $b/make.log)"; return 1
    fi
    # The examples/COUPLE/simple drivers, built as its README says, against liblammps.a.
    local s=$tree/examples/COUPLE/simple
    ( cd "$b" && nice -n 10 "$cc" -O2 -I"$tree/src" -c "$s/simple.c" -o simpleC.o && \
      nice -n 10 "$cxx" simpleC.o liblammps.a -o simpleC && \
      nice -n 10 "$cxx" -O2 -I"$tree/src" "$s/simple.cpp" liblammps.a -o simpleCC ) \
        >"$b/drivers.log" 2>&1 || { fail "LAMMPS C/C++ drivers with $mpi (see $b/drivers.log)"; return 1; }
    if [ -n "$fc" ]; then
        ( cd "$b" && nice -n 10 "$fc" -O2 -c "$tree/fortran/lammps.f90" -o lammps_f.o && \
          nice -n 10 "$fc" -O2 "$s/simple.f90" lammps_f.o liblammps.a -lstdc++ -o simpleF ) \
            >>"$b/drivers.log" 2>&1 || { fail "LAMMPS Fortran driver with $mpi (see $b/drivers.log)"; return 1; }
    fi
    echo "$key" >"$b/built"
}

# thermo LOG: the thermo tables (header line "Step ..." and the rows up to "Loop time"), as
# printed. Only rows that start with a step number: lines other ranks print (the C driver's
# "Force on 1 atom" from every LAMMPS rank) may land anywhere among rank 0's.
thermo() { awk '/^ *Step /{on=1; print; next} /^Loop time/{on=0} on && $1 ~ /^[0-9]+$/' "$1"; }
# loop_time LOG: seconds LAMMPS spent in its run loops (summed over the runs a driver makes).
loop_time() { awk '/^Loop time of/{t+=$4} END{printf "%.3f\n", t}' "$1"; }

# lammps_case NAME NP KIND ARGS...: KIND lmp|drv; runs both MPIs REPS times, alternating.
lammps_case() {
    local name=$1 np=$2 kind=$3; shift 3
    local mpis=(steadfast); [ "$have_ompi" = yes ] && [ -f "$cache/build/lammps-openmpi/built" ] && mpis+=(openmpi)
    local d=$logs/lammps/$name-np$np rep mpi i t0 t1 ok=yes
    rm -rf "$d"; mkdir -p "$d"
    declare -A wall loop
    for ((rep = 1; rep <= reps; rep++)); do
        local order=("${mpis[@]}")
        # Alternate which MPI goes first, so a change in machine load hits both alike.
        if [ $((rep % 2)) = 0 ] && [ ${#mpis[@]} = 2 ]; then order=(openmpi steadfast); fi
        for mpi in "${order[@]}"; do
            local b=$cache/build/lammps-$mpi log=$d/$mpi.$rep.log
            t0=$(now)
            if [ "$kind" = lmp ]; then
                (cd "$d" && run_with "$mpi" "$np" "$b/lmp" -log none "$@") >"$log" 2>&1 || ok=no
            else
                # The drivers take the input's path into a CHARACTER(len=64) (Fortran) or
                # read it relative to the working directory: give them a short local name.
                cp "$3" "$d/in.driver"
                (cd "$d" && run_with "$mpi" "$np" "$b/$1" "$2" in.driver) >"$log" 2>&1 || ok=no
            fi
            t1=$(now)
            [ "$ok" = yes ] || { fail "$name np=$np with $mpi exited non-zero (see $log)"; return 0; }
            wall[$mpi]+="$(echo "$t1 - $t0" | bc -l) "
            loop[$mpi]+="$(loop_time "$log") "
            thermo "$log" >"$log.thermo"
            [ -s "$log.thermo" ] || { fail "$name np=$np with $mpi printed no thermo output ($log)"; return 0; }
        done
    done
    # Identical answers: every run of either MPI prints the same thermo table, to the digit.
    local ref=$d/steadfast.1.log.thermo verdict f
    if [ ${#mpis[@]} = 2 ]; then verdict="identical in both MPIs"; else verdict="Open MPI not built"; fi
    for f in "$d"/*.thermo; do
        cmp -s "$ref" "$f" || { verdict="DIFFERENT"; { diff "$ref" "$f" | head -n 6 || true; }; fail "$name np=$np: $(basename "$f") differs from steadfast run 1"; }
    done
    # Against the same input on fewer ranks (first np run): LAMMPS's own decomposition must
    # not change these short runs' printed thermo (it does not, with either MPI).
    local key=${name}_${kind}
    if [ -z "${first_ref[$key]:-}" ]; then first_ref[$key]=$ref; first_np[$key]=$np
    elif cmp -s "${first_ref[$key]}" "$ref"; then verdict="$verdict, = np ${first_np[$key]}"
    else verdict="$verdict, DIFFERENT from np ${first_np[$key]}"; fail "$name: np=$np differs from np=${first_np[$key]}"; fi
    # NVE: total energy (5th thermo column of these inputs) is conserved to well within 2 %.
    if [ "$kind" = lmp ]; then
        local drift
        drift=$(awk '!/^ *Step/{e[++n]=$5} END{d=(e[n]-e[1])/e[1]; if (d<0) d=-d; printf "%.4f", d}' "$ref")
        if awk -v d="$drift" 'BEGIN{exit !(d > 0.02)}'; then verdict="$verdict, ENERGY DRIFT $drift"; fail "$name np=$np: total energy drifted by $drift"; fi
    fi
    local steps; steps=$(grep -cv '^ *Step' "$ref" || true)
    local sw sl ow="-" ol="-"
    sw=$(echo "${wall[steadfast]}" | tr ' ' '\n' | grep . | median)
    sl=$(echo "${loop[steadfast]}" | tr ' ' '\n' | grep . | median)
    if [ ${#mpis[@]} = 2 ]; then
        ow=$(echo "${wall[openmpi]}" | tr ' ' '\n' | grep . | median)
        ol=$(echo "${loop[openmpi]}" | tr ' ' '\n' | grep . | median)
    fi
    local last; last=$(tail -n 1 "$ref" | awk '{$1=$1; print}')
    printf '   %-28s np=%s  %s  wall %s / %s s  loop %s / %s s\n' "$name" "$np" "$verdict" "$sw" "$ow" "$sl" "$ol"
    row "| $name | $np | $sw | $ow | $sl | $ol | $verdict ($steps thermo lines; last: \`$last\`) |"
}

# fortran_vs_lmp NP P INPUT: the Fortran driver feeds INPUT to LAMMPS line by line on P of NP
# ranks, then "run 10" and "run 1"; lmp given the same commands on P ranks must print the
# same thermo (an oracle that needs no second MPI).
fortran_vs_lmp() {
    local np=$1 p=$2 input=$3 d=$logs/lammps/fortran-vs-lmp-P$2
    local drv=$logs/lammps/"COUPLE/simple Fortran (P=$p)-np$np"/steadfast.1.log.thermo
    [ -f "$drv" ] || return 0
    rm -rf "$d"; mkdir -p "$d"
    { cat "$input"; echo "run 10"; echo "run 1"; } >"$d/in.lmp"
    (cd "$d" && sf_run "$p" "$cache/build/lammps-steadfast/lmp" -log none -in in.lmp) >"$d/lmp.log" 2>&1 || \
        { fail "lmp on the Fortran driver's commands (see $d/lmp.log)"; return 0; }
    thermo "$d/lmp.log" >"$d/lmp.thermo"
    if cmp -s "$drv" "$d/lmp.thermo"; then
        echo "   Fortran driver (LAMMPS on $p of $np ranks) = lmp on $p ranks: identical thermo"
        row "| COUPLE/simple Fortran vs lmp | $np / $p | - | - | - | - | identical to lmp on the same commands |"
    else
        diff "$d/lmp.thermo" "$drv" | head -n 6 || true
        fail "Fortran driver's thermo differs from lmp's on the same commands ($d)"
    fi
}

run_lammps() {
    echo "== LAMMPS"
    if ! fetch lammps; then
        if [ "$short" = yes ]; then echo "   skipped: LAMMPS sources not cached (run make test-apps once)"; return 0; fi
        fail "apt-get source lammps gave no source tarball"; return 0
    fi
    local tree; tree=$(unpack lammps)
    [ "$fetch_only" = yes ] && return 0
    lammps_build steadfast "$tree" || return 0
    [ "$have_ompi" = yes ] && { lammps_build openmpi "$tree" || true; }
    [ "$build_only" = yes ] && return 0
    local melt=$tree/examples/melt/in.melt lj=$tree/bench/in.lj simple=$tree/examples/COUPLE/simple/in.lj
    if [ "$short" = yes ]; then
        lammps_case melt 1 lmp -in "$melt"
        lammps_case melt 2 lmp -in "$melt"
        if [ -x "$cache/build/lammps-steadfast/simpleF" ]; then
            lammps_case "COUPLE/simple Fortran (P=2)" 3 drv simpleF 2 "$simple"
            fortran_vs_lmp 3 2 "$simple"
        fi
        return 0
    fi
    local np
    for np in 1 2 4; do lammps_case melt "$np" lmp -in "$melt"; done
    for np in 1 2 4; do lammps_case "bench/in.lj" "$np" lmp -in "$lj"; done
    lammps_case "COUPLE/simple C (P=2)" 3 drv simpleC 2 "$simple"
    lammps_case "COUPLE/simple C++ (P=2)" 3 drv simpleCC 2 "$simple"
    # The C and C++ drivers issue the same calls: same thermo.
    local c=$logs/lammps/"COUPLE/simple C (P=2)-np3"/steadfast.1.log.thermo
    local cc=$logs/lammps/"COUPLE/simple C++ (P=2)-np3"/steadfast.1.log.thermo
    if [ -f "$c" ] && [ -f "$cc" ]; then
        if cmp -s "$c" "$cc"; then echo "   C driver = C++ driver: identical thermo"
        else fail "the C and C++ drivers print different thermo"; fi
    fi
    if [ -x "$cache/build/lammps-steadfast/simpleF" ]; then
        lammps_case "COUPLE/simple Fortran (P=2)" 3 drv simpleF 2 "$simple"
        fortran_vs_lmp 3 2 "$simple"
        lammps_case "COUPLE/simple Fortran (P=4)" 4 drv simpleF 4 "$simple"
        fortran_vs_lmp 4 4 "$simple"
    fi
    return 0
}

# ---- ScaLAPACK ----------------------------------------------------------------------------
# Its TESTING programs read their parameters from TESTING/*.dat in the working directory and
# end with "N tests completed and passed residual checks" / "... failed ..." lines.
scalapack_tests="xslu xdlu xclu xzlu xsqr xdqr xcqr xzqr xsllt xdllt xsinv xdinv xdbrd xdhrd xdtrd xdsep xdsvd xdsdblu xddtlu xdgblu xdpbllt xdptllt"
run_scalapack() {
    echo "== ScaLAPACK"
    if ! fetch scalapack; then
        echo "   skipped: no ScaLAPACK source (apt-get source scalapack found no scalapack_*.orig.tar.* in the package archive)"
        row "| ScaLAPACK TESTING | 4 | - | - | - | - | skipped: no source package in the archive |"
        return 0
    fi
    local tree; tree=$(unpack scalapack)
    [ "$fetch_only" = yes ] && return 0
    local mpi
    for mpi in steadfast openmpi; do
        [ "$mpi" = openmpi ] && [ "$have_ompi" = no ] && continue
        local b=$cache/build/scalapack-$mpi cc fc key
        if [ "$mpi" = steadfast ]; then cc=$sf_cc; fc=$sf_fc; key=$sf_key
            [ -n "$fc" ] || { echo "   skipped: Steadfast was built without Fortran"; return 0; }
        else cc=$(command -v mpicc.openmpi); fc=$(command -v mpif90.openmpi); key=openmpi; fi
        if ! [ -f "$b/built" ] || [ "$(cat "$b/built")" != "$key" ]; then
            if [ "$short" = yes ]; then echo "   skipped: ScaLAPACK not built (make test-apps)"; return 0; fi
            dpkg -s libblas-dev liblapack-dev >/dev/null 2>&1 || as_root apt-get install -y -qq libblas-dev liblapack-dev >/dev/null
            echo "== building ScaLAPACK with $mpi in $b"
            rm -rf "$b"; mkdir -p "$b"
            (cd "$b" && nice -n 10 cmake "$tree" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=ON \
                -DCMAKE_C_COMPILER="$cc" -DCMAKE_Fortran_COMPILER="$fc" \
                -DCMAKE_Fortran_FLAGS="-fallow-argument-mismatch" >"$b/cmake.log" 2>&1 && \
             nice -n 10 make -j"$jobs" >"$b/make.log" 2>&1) || { fail "ScaLAPACK build with $mpi (see $b)"; continue; }
            echo "$key" >"$b/built"
        fi
    done
    [ "$build_only" = yes ] && return 0
    local t d=$logs/scalapack n=$reps
    [ "$short" = yes ] && n=1
    mkdir -p "$d"
    for t in $scalapack_tests; do
        local line="" rep
        declare -A wall=()
        for ((rep = 1; rep <= n; rep++)); do
            for mpi in steadfast openmpi; do
                [ "$mpi" = openmpi ] && [ "$have_ompi" = no ] && continue
                local tb=$cache/build/scalapack-$mpi/TESTING log=$d/$t.$mpi.$rep.log t0 t1
                [ -x "$tb/$t" ] || continue
                t0=$(now); (cd "$tb" && run_with "$mpi" 4 "./$t") >"$log" 2>&1 || fail "$t with $mpi exited non-zero ($log)"; t1=$(now)
                wall[$mpi]+="$(echo "$t1 - $t0" | bc -l) "
                grep -E 'tests? (completed|skipped)|passed|failed' "$log" | sed -E 's/ +/ /g' >"$log.grade" || true
            done
        done
        local s=$d/$t.steadfast.1.log.grade o=$d/$t.openmpi.1.log.grade verdict
        [ -f "$s" ] || continue
        if grep -Eq '[1-9][0-9]* tests? completed and failed' "$s"; then fail "$t: failures with Steadfast"; fi
        if [ -f "$o" ]; then cmp -s "$s" "$o" && verdict=identical || { verdict=DIFFERENT; fail "$t: grades differ"; }
        else verdict="(Open MPI not built)"; fi
        local passed; passed=$(awk '/completed and passed/{n+=$1} END{print n+0}' "$s")
        printf '   %-8s %s passed  %s  wall %s / %s s\n' "$t" "$passed" "$verdict" \
            "$(echo "${wall[steadfast]:-}" | tr ' ' '\n' | grep . | median)" "$(echo "${wall[openmpi]:-}" | tr ' ' '\n' | grep . | median)"
        row "| ScaLAPACK $t | 4 | $(echo "${wall[steadfast]:-}" | tr ' ' '\n' | grep . | median) | $(echo "${wall[openmpi]:-}" | tr ' ' '\n' | grep . | median) | - | - | $verdict, $passed passed |"
    done
}

# ---- main ---------------------------------------------------------------------------------
[ "$want_ompi" = yes ] && ensure_ompi
if [ "$want_ompi" = yes ] && [ "$have_ompi" = no ]; then
    echo "   note: Debian's Open MPI is not available: running Steadfast's builds only"
fi
for app in $apps; do
    case "$app" in
        lammps) run_lammps ;;
        scalapack) run_scalapack ;;
        *) echo "unknown application: $app" >&2; exit 2 ;;
    esac
done
if [ ${#table[@]} -gt 0 ]; then
    {
        echo "| case | ranks | Steadfast wall (s) | Open MPI wall (s) | Steadfast loop (s) | Open MPI loop (s) | answers |"
        echo "|---|---|---|---|---|---|---|"
        printf '%s\n' "${table[@]}"
    } >"$logs/table.md"
    echo; cat "$logs/table.md"
    [ -n "$out" ] && cp "$logs/table.md" "$out"
fi
echo
if [ "$failures" -eq 0 ]; then echo "applications: all checks passed"; else echo "applications: $failures check(s) failed"; fi
[ "$failures" -eq 0 ]
