! `use mpi`: nonblocking ring with statuses, split/free, names, logicals, user-defined
! reduction, derived datatype, attributes, Iprobe, MPI_IN_PLACE, processor name.
subroutine addpairs(invec, inoutvec, len, datatype)
  integer :: len, datatype
  integer :: invec(len), inoutvec(len)
  integer :: i
  do i = 1, len
    inoutvec(i) = inoutvec(i) + invec(i)
  end do
end subroutine addpairs

program module_f90
  use mpi
  implicit none
  external :: addpairs
  integer :: ierr, rank, np, errs, i, req(2), stats(MPI_STATUS_SIZE, 2), half, newcomm
  integer :: op, vec, vals(6), got(6), resultlen, keyval
  double precision :: a(4), b(4)
  character(len=MPI_MAX_OBJECT_NAME) :: name
  character(len=MPI_MAX_PROCESSOR_NAME) :: host
  logical :: flag
  integer(kind=MPI_ADDRESS_KIND) :: tagub, val
  errs = 0
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, np, ierr)

  a = rank
  call MPI_Irecv(b, 4, MPI_DOUBLE_PRECISION, mod(rank + np - 1, np), 3, MPI_COMM_WORLD, req(1), ierr)
  call MPI_Isend(a, 4, MPI_DOUBLE_PRECISION, mod(rank + 1, np), 3, MPI_COMM_WORLD, req(2), ierr)
  call MPI_Waitall(2, req, stats, ierr)
  if (any(b /= mod(rank + np - 1, np))) errs = errs + 1
  if (stats(MPI_SOURCE, 1) /= mod(rank + np - 1, np)) errs = errs + 1
  if (req(1) /= MPI_REQUEST_NULL .or. req(2) /= MPI_REQUEST_NULL) errs = errs + 1

  ! Completed requests give their integers back: 2000 rounds reuse the same few.
  do i = 1, 2000
    call MPI_Irecv(b, 1, MPI_DOUBLE_PRECISION, rank, 4, MPI_COMM_WORLD, req(1), ierr)
    call MPI_Isend(a, 1, MPI_DOUBLE_PRECISION, rank, 4, MPI_COMM_WORLD, req(2), ierr)
    if (i == 2000 .and. max(req(1), req(2)) > 4096 + 64) errs = errs + 1
    call MPI_Waitall(2, req, MPI_STATUSES_IGNORE, ierr)
  end do

  half = merge(0, 1, rank < np / 2)
  call MPI_Comm_split(MPI_COMM_WORLD, half, rank, newcomm, ierr)
  call MPI_Comm_set_name(newcomm, "half-world", ierr)
  call MPI_Comm_get_name(newcomm, name, resultlen, ierr)
  if (name /= "half-world" .or. resultlen /= 10) errs = errs + 1
  call MPI_Comm_test_inter(newcomm, flag, ierr)
  if (flag) errs = errs + 1
  call MPI_Comm_free(newcomm, ierr)
  if (newcomm /= MPI_COMM_NULL) errs = errs + 1

  call MPI_Op_create(addpairs, .true., op, ierr)
  vals = rank + 1
  call MPI_Allreduce(vals, got, 6, MPI_INTEGER, op, MPI_COMM_WORLD, ierr)
  if (any(got /= np * (np + 1) / 2)) errs = errs + 1
  call MPI_Op_free(op, ierr)

  call MPI_Type_vector(3, 1, 2, MPI_INTEGER, vec, ierr)
  call MPI_Type_commit(vec, ierr)
  vals = (/ 1, 2, 3, 4, 5, 6 /)
  got = 0
  call MPI_Sendrecv(vals, 1, vec, rank, 0, got, 3, MPI_INTEGER, rank, 0, MPI_COMM_WORLD, &
                    MPI_STATUS_IGNORE, ierr)
  if (any(got(1:3) /= (/ 1, 3, 5 /))) errs = errs + 1
  call MPI_Type_free(vec, ierr)

  call MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, tagub, flag, ierr)
  if (.not. flag .or. tagub < 32767) errs = errs + 1
  call MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, keyval, 0_MPI_ADDRESS_KIND, ierr)
  call MPI_Comm_set_attr(MPI_COMM_WORLD, keyval, 12345_MPI_ADDRESS_KIND, ierr)
  call MPI_Comm_dup(MPI_COMM_WORLD, newcomm, ierr)
  call MPI_Comm_get_attr(newcomm, keyval, val, flag, ierr)
  if (.not. flag .or. val /= 12345) errs = errs + 1
  call MPI_Comm_free(newcomm, ierr)

  call MPI_Iprobe(MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, flag, MPI_STATUS_IGNORE, ierr)
  if (flag) errs = errs + 1
  call MPI_Get_processor_name(host, resultlen, ierr)
  if (resultlen <= 0 .or. len_trim(host) /= resultlen) errs = errs + 1

  call MPI_Allreduce(MPI_IN_PLACE, errs, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (rank == 0 .and. errs == 0) print *, 'No Errors'
  if (rank == 0 .and. errs /= 0) print *, 'Found ', errs, ' errors'
  call MPI_Finalize(ierr)
  if (errs /= 0) stop 1
end program module_f90
