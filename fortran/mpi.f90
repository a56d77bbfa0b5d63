! The `mpi` module: constants, sentinels and explicit interfaces of every binding. Choice
! buffers accept any type and rank (gfortran's NO_ARG_CHECK), handles are INTEGERs.
module mpi
  implicit none
  include 'mpi_consts.f90'
  include 'mpi_ifaces.f90'
  ! Bound by hand in glue.c.
  interface
    subroutine MPI_INIT(ierror)
      integer :: ierror
    end subroutine
    subroutine MPI_INIT_THREAD(required, provided, ierror)
      integer :: required, provided, ierror
    end subroutine
    subroutine MPI_BUFFER_DETACH(buffer_addr, size, ierror)
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: buffer_addr
      type(*), dimension(*) :: buffer_addr
      integer :: size, ierror
    end subroutine
    subroutine MPI_COMM_GET_ATTR(comm, comm_keyval, attribute_val, flag, ierror)
      integer :: comm, comm_keyval, ierror
      integer(kind=8) :: attribute_val
      logical :: flag
    end subroutine
    subroutine MPI_COMM_SET_ATTR(comm, comm_keyval, attribute_val, ierror)
      integer :: comm, comm_keyval, ierror
      integer(kind=8) :: attribute_val
    end subroutine
    subroutine MPI_TYPE_GET_ATTR(datatype, type_keyval, attribute_val, flag, ierror)
      integer :: datatype, type_keyval, ierror
      integer(kind=8) :: attribute_val
      logical :: flag
    end subroutine
    subroutine MPI_TYPE_SET_ATTR(datatype, type_keyval, attribute_val, ierror)
      integer :: datatype, type_keyval, ierror
      integer(kind=8) :: attribute_val
    end subroutine
    subroutine MPI_ATTR_GET(comm, keyval, attribute_val, flag, ierror)
      integer :: comm, keyval, attribute_val, ierror
      logical :: flag
    end subroutine
    subroutine MPI_ATTR_PUT(comm, keyval, attribute_val, ierror)
      integer :: comm, keyval, attribute_val, ierror
    end subroutine
    subroutine MPI_COMM_CREATE_KEYVAL(comm_copy_attr_fn, comm_delete_attr_fn, comm_keyval, &
                                      extra_state, ierror)
      external :: comm_copy_attr_fn, comm_delete_attr_fn
      integer :: comm_keyval, ierror
      integer(kind=8) :: extra_state
    end subroutine
    subroutine MPI_TYPE_CREATE_KEYVAL(type_copy_attr_fn, type_delete_attr_fn, type_keyval, &
                                      extra_state, ierror)
      external :: type_copy_attr_fn, type_delete_attr_fn
      integer :: type_keyval, ierror
      integer(kind=8) :: extra_state
    end subroutine
    subroutine MPI_KEYVAL_CREATE(copy_fn, delete_fn, keyval, extra_state, ierror)
      external :: copy_fn, delete_fn
      integer :: keyval, extra_state, ierror
    end subroutine
    subroutine MPI_INFO_GET_STRING(info, key, buflen, value, flag, ierror)
      integer :: info, buflen, ierror
      character(len=*) :: key, value
      logical :: flag
    end subroutine
    subroutine MPI_ALLOC_MEM(size, info, baseptr, ierror)
      integer(kind=8) :: size, baseptr
      integer :: info, ierror
    end subroutine
    subroutine MPI_INFO_CREATE_ENV(info, ierror)
      integer :: info, ierror
    end subroutine
    subroutine MPI_GREQUEST_START(query_fn, free_fn, cancel_fn, extra_state, request, ierror)
      external :: query_fn, free_fn, cancel_fn
      integer(kind=8) :: extra_state
      integer :: request, ierror
    end subroutine
    subroutine MPI_OP_CREATE(user_fn, commute, op, ierror)
      external :: user_fn
      logical :: commute
      integer :: op, ierror
    end subroutine
    subroutine MPI_COMM_CREATE_ERRHANDLER(comm_errhandler_fn, errhandler, ierror)
      external :: comm_errhandler_fn
      integer :: errhandler, ierror
    end subroutine
    subroutine MPI_ERRHANDLER_CREATE(function, errhandler, ierror)
      external :: function
      integer :: errhandler, ierror
    end subroutine
  end interface
  external :: MPI_COMM_NULL_COPY_FN, MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN
  external :: MPI_TYPE_NULL_COPY_FN, MPI_TYPE_DUP_FN, MPI_TYPE_NULL_DELETE_FN
  external :: MPI_NULL_COPY_FN, MPI_DUP_FN, MPI_NULL_DELETE_FN
  include 'mpi_sizeof_iface.f90'
contains
  include 'mpi_sizeof_impl.f90'
end module mpi
