#!/bin/sh
# Writes pkg-config files for an installed Steadfast: mpi.pc and mpi-c.pc (C), mpi-cxx.pc
# (C++ through the C API) and, when the Fortran bindings were built, mpi-fort.pc.
# Usage: tools/pkgconfig.sh PREFIX VERSION
set -eu
prefix=$1
version=$2
dir=$prefix/lib/pkgconfig
mkdir -p "$dir"
write() {   # write FILE NAME DESCRIPTION LIBS
    cat > "$dir/$1" <<PC
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: $2
Description: $3
Version: $version
Cflags: -I\${includedir}
Libs: -L\${libdir} -Wl,-rpath,\${libdir} $4
PC
}
write mpi.pc steadfast "Steadfast MPI (C)" "-lmpi"
write mpi-c.pc steadfast-c "Steadfast MPI (C)" "-lmpi"
write mpi-cxx.pc steadfast-cxx "Steadfast MPI (C++ programs using the C API)" "-lmpi"
if [ -e "$prefix/lib/libmpifort.so" ]; then
    write mpi-fort.pc steadfast-fort "Steadfast MPI (Fortran: mpif.h, mpi, mpi_f08)" "-lmpifort -lmpi"
else
    rm -f "$dir/mpi-fort.pc"
fi
