! The `mpi_f08` module: TYPE(MPI_Comm)... handles (one INTEGER, MPI_VAL, so they travel to
! the same C glue as the `mpi` module's INTEGER handles), TYPE(MPI_Status) with the C
! layout, optional IERROR, and generic interfaces that include the large-count (_c) forms.
! Choice buffers accept any type and rank (gfortran's NO_ARG_CHECK); subarrays are not
! supported (MPI_SUBARRAYS_SUPPORTED is .false.).
module mpi_f08
  use, intrinsic :: iso_c_binding, only: c_ptr
  implicit none
  include 'mpi_f08_types.f90'
  type, bind(C) :: MPI_Status
    integer :: MPI_SOURCE, MPI_TAG, MPI_ERROR
    integer :: MPI_internal(5)
  end type MPI_Status
  integer, parameter :: MPI_STATUS_SIZE = 8
  integer, parameter :: MPI_ADDRESS_KIND = 8, MPI_OFFSET_KIND = 8, MPI_COUNT_KIND = 8
  integer, parameter :: MPI_INTEGER_KIND = 4
  logical, parameter :: MPI_SUBARRAYS_SUPPORTED = .false.
  logical, parameter :: MPI_ASYNC_PROTECTS_NONBLOCKING = .false.
  include 'mpi_f08_consts.f90'
  ! Sentinels: the same common blocks as mpif.h and the mpi module.
  integer :: MPI_BOTTOM, MPI_IN_PLACE, MPI_BUFFER_AUTOMATIC
  common /mpi_fortran_bottom/ MPI_BOTTOM
  common /mpi_fortran_in_place/ MPI_IN_PLACE
  common /mpi_fortran_buffer_automatic/ MPI_BUFFER_AUTOMATIC
  type(MPI_Status) :: MPI_STATUS_IGNORE
  common /mpi_fortran_status_ignore/ MPI_STATUS_IGNORE
  type(MPI_Status) :: MPI_STATUSES_IGNORE(1)
  common /mpi_fortran_statuses_ignore/ MPI_STATUSES_IGNORE
  integer :: MPI_ERRCODES_IGNORE(1), MPI_UNWEIGHTED(1), MPI_WEIGHTS_EMPTY(1)
  common /mpi_fortran_errcodes_ignore/ MPI_ERRCODES_IGNORE
  common /mpi_fortran_unweighted/ MPI_UNWEIGHTED
  common /mpi_fortran_weights_empty/ MPI_WEIGHTS_EMPTY
  character(len=1) :: MPI_ARGV_NULL(1), MPI_ARGVS_NULL(1,1)
  common /mpi_fortran_argv_null/ MPI_ARGV_NULL
  common /mpi_fortran_argvs_null/ MPI_ARGVS_NULL
  include 'mpi_f08_ifaces.f90'
  ! Bound by hand in glue.c (the _f08 names are aliases of the same C functions).
  interface MPI_Init
    subroutine MPI_Init_f08(ierror)
      integer, optional :: ierror
    end subroutine
  end interface
  interface MPI_Init_thread
    subroutine MPI_Init_thread_f08(required, provided, ierror)
      integer :: required, provided
      integer, optional :: ierror
    end subroutine
  end interface
  interface MPI_Buffer_detach
    subroutine MPI_Buffer_detach_f08(buffer_addr, size, ierror)
      !GCC$ ATTRIBUTES NO_ARG_CHECK :: buffer_addr
      type(*), dimension(*) :: buffer_addr
      integer :: size
      integer, optional :: ierror
    end subroutine
  end interface
  interface MPI_Comm_get_attr
    subroutine MPI_Comm_get_attr_f08(comm, comm_keyval, attribute_val, flag, ierror)
      import :: MPI_Comm
      type(MPI_Comm) :: comm
      integer :: comm_keyval
      integer(kind=8) :: attribute_val
      logical :: flag
      integer, optional :: ierror
    end subroutine
  end interface
  interface MPI_Comm_set_attr
    subroutine MPI_Comm_set_attr_f08(comm, comm_keyval, attribute_val, ierror)
      import :: MPI_Comm
      type(MPI_Comm) :: comm
      integer :: comm_keyval
      integer(kind=8) :: attribute_val
      integer, optional :: ierror
    end subroutine
  end interface
  interface MPI_Type_get_attr
    subroutine MPI_Type_get_attr_f08(datatype, type_keyval, attribute_val, flag, ierror)
      import :: MPI_Datatype
      type(MPI_Datatype) :: datatype
      integer :: type_keyval
      integer(kind=8) :: attribute_val
      logical :: flag
      integer, optional :: ierror
    end subroutine
  end interface
  interface MPI_Type_set_attr
    subroutine MPI_Type_set_attr_f08(datatype, type_keyval, attribute_val, ierror)
      import :: MPI_Datatype
      type(MPI_Datatype) :: datatype
      integer :: type_keyval
      integer(kind=8) :: attribute_val
      integer, optional :: ierror
    end subroutine
  end interface
  interface MPI_Comm_create_keyval
    subroutine MPI_Comm_create_keyval_f08(comm_copy_attr_fn, comm_delete_attr_fn, &
                                          comm_keyval, extra_state, ierror)
      external :: comm_copy_attr_fn, comm_delete_attr_fn
      integer :: comm_keyval
      integer(kind=8) :: extra_state
      integer, optional :: ierror
    end subroutine
  end interface
  interface MPI_Type_create_keyval
    subroutine MPI_Type_create_keyval_f08(type_copy_attr_fn, type_delete_attr_fn, &
                                          type_keyval, extra_state, ierror)
      external :: type_copy_attr_fn, type_delete_attr_fn
      integer :: type_keyval
      integer(kind=8) :: extra_state
      integer, optional :: ierror
    end subroutine
  end interface
  interface MPI_Info_get_string
    subroutine MPI_Info_get_string_f08(info, key, buflen, value, flag, ierror)
      import :: MPI_Info
      type(MPI_Info) :: info
      character(len=*) :: key, value
      integer :: buflen
      logical :: flag
      integer, optional :: ierror
    end subroutine
  end interface
  interface MPI_Alloc_mem
    subroutine MPI_Alloc_mem_f08(size, info, baseptr, ierror)
      import :: MPI_Info, c_ptr
      integer(kind=8), intent(in) :: size
      type(MPI_Info), intent(in) :: info
      type(c_ptr) :: baseptr
      integer, optional :: ierror
    end subroutine
  end interface
  interface MPI_Info_create_env
    subroutine MPI_Info_create_env_f08(info, ierror)
      import :: MPI_Info
      type(MPI_Info) :: info
      integer, optional :: ierror
    end subroutine
  end interface
  interface MPI_Grequest_start
    subroutine MPI_Grequest_start_f08(query_fn, free_fn, cancel_fn, extra_state, request, ierror)
      import :: MPI_Request
      external :: query_fn, free_fn, cancel_fn
      integer(kind=8) :: extra_state
      type(MPI_Request) :: request
      integer, optional :: ierror
    end subroutine
  end interface
  interface MPI_Op_create
    subroutine MPI_Op_create_f08(user_fn, commute, op, ierror)
      import :: MPI_Op
      external :: user_fn
      logical :: commute
      type(MPI_Op) :: op
      integer, optional :: ierror
    end subroutine
  end interface
  interface MPI_Comm_create_errhandler
    subroutine MPI_Comm_create_errhandler_f08(comm_errhandler_fn, errhandler, ierror)
      import :: MPI_Errhandler
      external :: comm_errhandler_fn
      type(MPI_Errhandler) :: errhandler
      integer, optional :: ierror
    end subroutine
  end interface
  external :: MPI_COMM_NULL_COPY_FN, MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN
  external :: MPI_TYPE_NULL_COPY_FN, MPI_TYPE_DUP_FN, MPI_TYPE_NULL_DELETE_FN
  include 'mpi_f08_sizeof_iface.f90'
contains
  include 'mpi_f08_ops.f90'
  include 'mpi_f08_sizeof_impl.f90'
  ! INTEGER status array <-> TYPE(MPI_Status): the same eight integers.
  subroutine MPI_Status_f2f08(f_status, f08_status, ierror)
    integer, intent(in) :: f_status(MPI_STATUS_SIZE)
    type(MPI_Status), intent(out) :: f08_status
    integer, optional, intent(out) :: ierror
    f08_status%MPI_SOURCE = f_status(1)
    f08_status%MPI_TAG = f_status(2)
    f08_status%MPI_ERROR = f_status(3)
    f08_status%MPI_internal = f_status(4:8)
    if (present(ierror)) ierror = MPI_SUCCESS
  end subroutine MPI_Status_f2f08
  subroutine MPI_Status_f082f(f08_status, f_status, ierror)
    type(MPI_Status), intent(in) :: f08_status
    integer, intent(out) :: f_status(MPI_STATUS_SIZE)
    integer, optional, intent(out) :: ierror
    f_status(1) = f08_status%MPI_SOURCE
    f_status(2) = f08_status%MPI_TAG
    f_status(3) = f08_status%MPI_ERROR
    f_status(4:8) = f08_status%MPI_internal
    if (present(ierror)) ierror = MPI_SUCCESS
  end subroutine MPI_Status_f082f
end module mpi_f08
