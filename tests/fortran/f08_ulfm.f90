! `use mpi_f08`: TYPE(MPI_Comm) handles and ==, TYPE(MPI_Status), optional ierror, a
! large-count (_c) call through the generic name, MPI_ERRORS_RETURN with error classes,
! and the ULFM calls (revoke-free agreement, shrink) on a healthy communicator.
program f08_ulfm
  use mpi_f08
  implicit none
  type(MPI_Comm) :: dup, shrunk
  type(MPI_Status) :: status
  type(MPI_Request) :: req
  type(MPI_Group) :: failed
  integer :: rank, np, errs, ierr, flag, cls, n, buf(4), rbuf(4), fstatus(MPI_STATUS_SIZE)
  integer(kind=MPI_COUNT_KIND) :: bigcount
  logical :: done
  errs = 0
  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, np)
  call MPI_Comm_dup(MPI_COMM_WORLD, dup)
  if (dup == MPI_COMM_WORLD .or. dup == MPI_COMM_NULL) errs = errs + 1

  buf = rank
  call MPI_Isend(buf, 4, MPI_INTEGER, mod(rank + 1, np), 5, dup, req)
  call MPI_Recv(rbuf, 4, MPI_INTEGER, MPI_ANY_SOURCE, MPI_ANY_TAG, dup, status)
  call MPI_Wait(req, MPI_STATUS_IGNORE)
  if (status%MPI_SOURCE /= mod(rank + np - 1, np) .or. status%MPI_TAG /= 5) errs = errs + 1
  call MPI_Get_count(status, MPI_INTEGER, n)
  if (n /= 4 .or. any(rbuf /= mod(rank + np - 1, np))) errs = errs + 1
  if (req /= MPI_REQUEST_NULL) errs = errs + 1
  call MPI_Status_f082f(status, fstatus)
  if (fstatus(1) /= status%MPI_SOURCE .or. fstatus(2) /= 5) errs = errs + 1

  bigcount = 4
  call MPI_Bcast(buf, bigcount, MPI_INTEGER, 0, dup)
  if (any(buf /= 0)) errs = errs + 1
  call MPI_Test(req, done, MPI_STATUS_IGNORE)
  if (.not. done) errs = errs + 1

  call MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN)
  call MPI_Send(buf, 1, MPI_INTEGER, np + 5, 0, dup, ierr)
  call MPI_Error_class(ierr, cls)
  if (cls /= MPI_ERR_RANK) errs = errs + 1

  flag = 1
  call MPIX_Comm_agree(dup, flag)
  if (flag /= 1) errs = errs + 1
  call MPIX_Comm_get_failed(dup, failed)
  call MPI_Group_size(failed, n)
  if (n /= 0) errs = errs + 1
  call MPI_Group_free(failed)
  call MPIX_Comm_shrink(dup, shrunk)
  call MPI_Comm_size(shrunk, n)
  if (n /= np) errs = errs + 1
  call MPI_Comm_free(shrunk)
  call MPI_Comm_free(dup)
  if (dup /= MPI_COMM_NULL) errs = errs + 1

  call MPI_Allreduce(MPI_IN_PLACE, errs, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD)
  if (rank == 0 .and. errs == 0) print *, 'No Errors'
  if (rank == 0 .and. errs /= 0) print *, 'Found ', errs, ' errors'
  call MPI_Finalize()
  if (errs /= 0) stop 1
end program f08_ulfm
