#include <mpi.h>
#include <stdio.h>
#include <dirent.h>
#include <unistd.h>
static int nfds(void){int n=0;DIR*d=opendir("/proc/self/fd");struct dirent*e;while((e=readdir(d)))n++;closedir(d);return n-3;}
int main(int argc,char**argv){
  MPI_Init(&argc,&argv);
  int rank; MPI_Comm_rank(MPI_COMM_WORLD,&rank);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int x=1; MPI_Allreduce(MPI_IN_PLACE,&x,1,MPI_INT,MPI_SUM,MPI_COMM_WORLD);
  if(rank==0){printf("fds before %d\n",nfds());fflush(stdout);}
  double t0=MPI_Wtime(); int bad=0, most=0;
  while(MPI_Wtime()-t0<6.0){int flag; int rc=MPI_Iprobe(MPI_ANY_SOURCE,0,MPI_COMM_WORLD,&flag,MPI_STATUS_IGNORE); if(rc!=MPI_SUCCESS){bad++; if(bad==1){char s[256];int l;MPI_Error_string(rc,s,&l);printf("rank %d Iprobe failed: %s\n",rank,s);fflush(stdout);}} int n=nfds(); if(n>most)most=n; usleep(1000);}
  printf("rank %d: %d failed Iprobe calls, most open files %d\n",rank,bad,most);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize(); return bad!=0;
}
