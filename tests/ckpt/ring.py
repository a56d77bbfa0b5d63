# An unmodified mpi4py program for tests/ckpt/coordinated.sh: a token ring with ANY_SOURCE
# receives and an allreduce per round; rank 0 prints one line per round.
import sys, time
from mpi4py import MPI
comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
acc = 0
for r in range(int(sys.argv[1]) if len(sys.argv) > 1 else 100):
    if rank == 0:
        comm.send(r * 7, dest=1 % size, tag=r)
        tok = comm.recv(source=MPI.ANY_SOURCE, tag=r)
    else:
        st = MPI.Status()
        tok = comm.recv(source=MPI.ANY_SOURCE, tag=r, status=st)
        tok = tok * 3 + rank + st.Get_source()
        comm.send(tok, dest=(rank + 1) % size, tag=r)
    acc = (acc * 31 + tok) % 1000000007
    total = comm.allreduce(acc % 1000)
    if rank == 0:
        print(f"round {r} token {tok} total {total}", flush=True)
    t = time.time()
    while time.time() - t < 0.02:
        pass
