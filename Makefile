# Steadfast: `make` builds and installs into $(PREFIX); `make demo` runs the ring demo;
# `make test` runs every test; `make bench` runs the side-by-side benchmarks.
PREFIX ?= $(CURDIR)/install
CARGO ?= cargo
CC ?= cc
# C++ and Fortran compilers behind mpicxx and mpifort (Fortran is skipped when FORTRAN is missing).
CXX ?= c++
FORTRAN ?= gfortran
RELEASE := target/release
BUILD := build

.PHONY: all build install demo test test-rust test-c test-net test-cluster test-apps bench bench-osu bench-rma bench-ft bench-io clean

all: install

build:
	$(CARGO) build --release -p steadfast -p steadfast-capi

install: build
	mkdir -p $(PREFIX)/bin $(PREFIX)/lib $(PREFIX)/include
	install -m 755 $(RELEASE)/steadfast $(PREFIX)/bin/steadfast
	ln -sf steadfast $(PREFIX)/bin/mpiexec
	ln -sf steadfast $(PREFIX)/bin/mpirun
	sed 's|@CC@|$(CC)|' tools/mpicc.in > $(PREFIX)/bin/mpicc && chmod 755 $(PREFIX)/bin/mpicc
	install -m 755 $(RELEASE)/libmpi_abi.so $(PREFIX)/lib/libmpi_abi.so.1
	ln -sf libmpi_abi.so.1 $(PREFIX)/lib/libmpi_abi.so
	ln -sf libmpi_abi.so.1 $(PREFIX)/lib/libmpi.so
	install -m 644 include/mpi.h include/mpi-ext.h $(PREFIX)/include/
	sed -e 's|@LANGNAME@|C++|' -e 's|@ENVVAR@|STEADFAST_CXX|' -e 's|@COMPILER@|$(CXX)|' \
	    -e 's|@EXTRALIBS@||' -e 's|@EXTRALIBNAMES@||' tools/mpiwrap.in > $(PREFIX)/bin/mpicxx
	chmod 755 $(PREFIX)/bin/mpicxx
	ln -sf mpicxx $(PREFIX)/bin/mpic++
	fortran/build.sh $(PREFIX) $(CC) $(FORTRAN)
	tools/pkgconfig.sh $(PREFIX) $$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)

demo: install
	mkdir -p $(BUILD)
	$(PREFIX)/bin/mpicc -O2 -o $(BUILD)/ring examples/ring.c
	$(PREFIX)/bin/mpiexec -n 4 $(BUILD)/ring

test: install
	scripts/test-all.sh $(PREFIX)

# Reliability C tests (udp with faults, damage repaired on shm/tcp) and the multi-host
# route failover test in network namespaces (skips without root).
test-net: install
	tests/c/reliable/run.sh $(PREFIX)
	scripts/netns-failover.sh $(PREFIX)

# Every Slurm (srun --mpi=pmi2 / pmix, salloc + mpiexec, sbatch) and Hydra case on a one-node
# Slurm cluster that scripts/slurm-setup.sh brings up, then on three emulated nodes (network
# and UTS namespaces) that scripts/slurm-cluster.sh brings up and tears down (root; installs
# the packages it needs).
test-cluster: install
	scripts/slurm-tests.sh $(PREFIX)
	scripts/slurm-cluster-tests.sh $(PREFIX)

# Real applications from Debian source packages (LAMMPS, ScaLAPACK), built with our wrappers and
# with Debian's Open MPI, answers and times compared (docs/applications.md). The first run
# fetches and builds (~30 min per LAMMPS build on 2 cores) into ~/.cache/steadfast-apps.
test-apps: install
	scripts/apps-tests.sh --prefix $(PREFIX)

bench: install
	scripts/bench-pingpong.sh --prefix $(PREFIX)

# MPICH-V's comparison of the fault-tolerance modes (bench/ft_protocols.py; FT_ARGS=--quick for
# the short form): docs/reproduction/mpich-v/results.md.
bench-ft: install
	python3 bench/ft_protocols.py --prefix $(PREFIX) $(FT_ARGS)

# OSU-style suite against Open MPI and MPICH (bench/osu.py; OSU_ARGS=--quick for the short form).
bench-osu: install
	python3 bench/osu.py --prefix $(PREFIX) $(OSU_ARGS)

# MPI-IO bandwidth against Open MPI (ompio, ROMIO) and MPICH (bench/io.py; IO_ARGS=--quick for
# a smoke check, IO_ARGS="--size-mib 1024" for a 1 GiB file). Drops the page cache when root.
bench-io: install
	python3 bench/io.py --prefix $(PREFIX) $(IO_ARGS)

# One-sided suite against Open MPI (osc sm and pt2pt) and MPICH, 2 ranks on one host
# (bench/rma.py; RMA_ARGS=--quick for the short form).
bench-rma: install
	python3 bench/rma.py --prefix $(PREFIX) $(RMA_ARGS)

clean:
	$(CARGO) clean
	rm -rf $(BUILD) install
