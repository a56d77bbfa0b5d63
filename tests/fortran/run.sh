#!/usr/bin/env bash
# Fortran and C++ programs with Steadfast's wrappers: mpif.h (fixed form), `use mpi`,
# `use mpi_f08` with the ULFM calls, a C++ program through mpicxx/mpic++, the wrappers'
# -show/-showme inspection, the pkg-config files, and CMake's find_package(MPI).
# Usage: tests/fortran/run.sh [PREFIX]   (default ./install; `make test` runs it)
# Fortran parts are skipped (with a message) when PREFIX has no mpifort, CMake when cmake is
# missing.
set -u
here=$(cd "$(dirname "$0")/../.." && pwd)
prefix=${1:-$here/install}
prefix=$(cd "$prefix" && pwd)
build=$here/build/lang-tests
mkdir -p "$build"
np=${NP:-4}
pass=0; fail=0; skipped=""
ok() { pass=$((pass+1)); echo "ok   $1"; }
bad() { fail=$((fail+1)); echo "FAIL $1"; [ -n "${2:-}" ] && sed 's/^/     /' "$2" | tail -n 15; }

# run NAME EXE [PATH [EXPECTED]]: expects EXPECTED (default "No Errors") in the output and
# exit status 0.
run() {
    local name=$1 exe=$2 path=${3:-shm} expect=${4:-No Errors} log=$build/$1.${3:-shm}.log
    if timeout 60 "$prefix/bin/mpiexec" -n "$np" --path "$path" "$exe" > "$log" 2>&1 &&
       grep -q "$expect" "$log"; then ok "$name ($path)"; else bad "$name ($path)" "$log"; fi
}
compile() {   # compile NAME WRAPPER SOURCE [FLAGS]
    local name=$1 wrap=$2 src=$3; shift 3
    if "$prefix/bin/$wrap" -O1 "$@" -o "$build/$name" "$src" > "$build/$name.build.log" 2>&1
    then return 0; else bad "build $name with $wrap" "$build/$name.build.log"; return 1; fi
}

fortran=yes
[ -x "$prefix/bin/mpifort" ] || { fortran=no; skipped="$skipped Fortran(no mpifort: install gfortran and run make)"; }

if [ $fortran = yes ]; then
    for p in basic_f77.f module_f90.f90 f08_ulfm.f90; do
        n=${p%.*}
        if compile "$n" mpifort "$here/tests/fortran/$p"; then run "$n" "$build/$n" shm; fi
    done
    # mpif90 / mpif77 are the same wrapper; one run over tcp.
    compile basic_f77_tcp mpif77 "$here/tests/fortran/basic_f77.f" && run basic_f77 "$build/basic_f77_tcp" tcp
    compile module_f90_tcp mpif90 "$here/tests/fortran/module_f90.f90" && run module_f90 "$build/module_f90_tcp" tcp
fi
compile collectives_cxx mpicxx "$here/tests/cxx/collectives.cpp" -std=c++17 && run collectives_cxx "$build/collectives_cxx" shm
compile collectives_cxx2 mpic++ "$here/tests/cxx/collectives.cpp" -std=c++17 && run collectives_cxx "$build/collectives_cxx2" tcp

# Inspection, as MPICH (-show) and Open MPI (-showme:...) users expect.
check_show() {   # check_show WRAPPER EXPECTED-SUBSTRING
    local out; out=$("$prefix/bin/$1" "${@:3}" 2>&1)
    case "$out" in *"$2"*) ok "$1 ${*:3}";; *) fail=$((fail+1)); echo "FAIL $1 ${*:3}: $out";; esac
}
check_show mpicxx "-lmpi" -show
check_show mpic++ "$prefix/include" -showme:compile
check_show mpicxx "$prefix/lib" -showme:link
if [ $fortran = yes ]; then
    check_show mpifort "-lmpifort -lmpi" -show
    check_show mpif90 "gfortran" -showme:command
    check_show mpif77 "mpifort mpi" -showme:libs
fi

# pkg-config
if command -v pkg-config >/dev/null; then
    export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
    # shellcheck disable=SC2046
    if cc -o "$build/ring_pc" "$here/examples/ring.c" $(pkg-config --cflags --libs mpi-c) \
        > "$build/pc.log" 2>&1; then run ring_pkgconfig "$build/ring_pc" shm ": correct"; else bad "pkg-config mpi-c" "$build/pc.log"; fi
    pkg-config --exists mpi mpi-cxx && ok "pkg-config mpi mpi-cxx" || bad "pkg-config mpi mpi-cxx"
    if [ $fortran = yes ]; then
        # shellcheck disable=SC2046
        if gfortran -o "$build/f90_pc" "$here/tests/fortran/module_f90.f90" \
            $(pkg-config --cflags --libs mpi-fort) > "$build/pcf.log" 2>&1; then
            run f90_pkgconfig "$build/f90_pc" shm; else bad "pkg-config mpi-fort" "$build/pcf.log"; fi
    fi
else
    skipped="$skipped pkg-config(not installed)"
fi

# CMake FindMPI through the wrappers on PATH.
if command -v cmake >/dev/null; then
    rm -rf "$build/cmake"
    withf=ON; [ $fortran = yes ] || withf=OFF
    if PATH=$prefix/bin:$PATH cmake -S "$here/tests/cmake" -B "$build/cmake" -DWITH_FORTRAN=$withf \
          > "$build/cmake.log" 2>&1 &&
       grep -q "MPI_C_LIBRARIES=$prefix/lib/libmpi" "$build/cmake.log" &&
       cmake --build "$build/cmake" >> "$build/cmake.log" 2>&1; then
        ok "cmake find_package(MPI) C CXX$([ $withf = ON ] && echo ' Fortran')"
        run cmake_ring "$build/cmake/ring_c" shm ": correct"
        run cmake_cxx "$build/cmake/collectives_cxx" shm
        [ $withf = ON ] && run cmake_f08 "$build/cmake/f08_ulfm" shm
    else
        bad "cmake find_package(MPI)" "$build/cmake.log"
    fi
else
    skipped="$skipped cmake(not installed)"
fi

echo "language tests: $pass passed, $fail failed${skipped:+; skipped:$skipped}"
[ "$fail" -eq 0 ]
