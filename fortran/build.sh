#!/bin/sh
# Builds and installs the Fortran bindings into PREFIX (after the C library is installed):
# generates the glue and module sources with fortran/gen.py, compiles them with CC and FC,
# links PREFIX/lib/libmpifort.so, installs mpif.h, mpi.mod, mpi_f08.mod and the mpifort
# wrapper (aliases mpif90, mpif77). Without a Fortran compiler it says so and does nothing.
# Usage: fortran/build.sh PREFIX [CC] [FC]
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
prefix=$1
cc=${2:-cc}
fc=${3:-gfortran}
out=$here/build/fortran
if ! command -v "$fc" >/dev/null 2>&1; then
    echo "fortran: no Fortran compiler ($fc): skipping the Fortran bindings and mpifort" \
         "(Debian: apt-get install gfortran; then make again)"
    rm -f "$prefix/bin/mpifort" "$prefix/bin/mpif90" "$prefix/bin/mpif77"
    exit 0
fi
mkdir -p "$out"
nm -D --defined-only "$prefix/lib/libmpi_abi.so.1" | awk '{print $3}' > "$out/exports.txt"
python3 "$here/fortran/gen.py" --include "$here/include" --exports "$out/exports.txt" --out "$out"
cp "$here"/fortran/glue.c "$here"/fortran/glue.h "$here"/fortran/mpi.f90 \
   "$here"/fortran/mpi_f08.f90 "$out/"
cd "$out"
$cc -O2 -fPIC -Wall -Wno-stringop-overflow -I"$here/include" -c glue.c mpi_fortran_gen.c
$fc -O2 -fPIC -c mpi.f90
$fc -O2 -fPIC -c mpi_f08.f90
$cc -shared -Wl,-soname,libmpifort.so.1 -o libmpifort.so.1 glue.o mpi_fortran_gen.o mpi.o \
    mpi_f08.o -L"$prefix/lib" -Wl,-rpath,"$prefix/lib" -lmpi_abi -lgfortran -lpthread
install -m 755 libmpifort.so.1 "$prefix/lib/libmpifort.so.1"
ln -sf libmpifort.so.1 "$prefix/lib/libmpifort.so"
install -m 644 mpif.h mpi.mod mpi_f08.mod "$prefix/include/"
sed -e 's|@LANGNAME@|Fortran|' -e 's|@ENVVAR@|STEADFAST_FC|' -e "s|@COMPILER@|$fc|" \
    -e 's|@EXTRALIBS@|-lmpifort |' -e 's|@EXTRALIBNAMES@|mpifort |' \
    "$here/tools/mpiwrap.in" > "$prefix/bin/mpifort"
chmod 755 "$prefix/bin/mpifort"
ln -sf mpifort "$prefix/bin/mpif90"
ln -sf mpifort "$prefix/bin/mpif77"
echo "fortran: installed libmpifort, mpif.h, the mpi and mpi_f08 modules and mpifort"
