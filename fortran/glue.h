/* Helpers shared by the generated Fortran glue (mpi_fortran_gen.c) and the hand-written
 * bindings (glue.c). Fortran passes every argument by reference, strings with a hidden
 * size_t length after the other arguments (gfortran >= 8), LOGICAL as a 4-byte 0/1. */
#ifndef STEADFAST_FORTRAN_GLUE_H
#define STEADFAST_FORTRAN_GLUE_H

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "mpi.h"
#include "mpi-ext.h"

/* Sentinel variables: Fortran sees them in common blocks (mpif.h, the modules); the glue
 * recognises their addresses and passes the C sentinel instead. */
extern MPI_Fint mpi_fortran_bottom_, mpi_fortran_in_place_, mpi_fortran_buffer_automatic_;
extern MPI_Fint mpi_fortran_status_ignore_[MPI_F_STATUS_SIZE];
extern MPI_Fint mpi_fortran_statuses_ignore_[MPI_F_STATUS_SIZE];
extern MPI_Fint mpi_fortran_errcodes_ignore_[1], mpi_fortran_unweighted_[1];
extern MPI_Fint mpi_fortran_weights_empty_[1];
extern char mpi_fortran_argv_null_[1], mpi_fortran_argvs_null_[1];

#define F_BUF(p) ((void *)(p) == (void *)&mpi_fortran_bottom_ ? MPI_BOTTOM \
                : (void *)(p) == (void *)&mpi_fortran_in_place_ ? MPI_IN_PLACE \
                : (void *)(p) == (void *)&mpi_fortran_buffer_automatic_ ? MPI_BUFFER_AUTOMATIC \
                : (void *)(p))
#define F_STATUS(p) ((p) == mpi_fortran_status_ignore_ ? MPI_STATUS_IGNORE : (MPI_Status *)(p))
#define F_STATUSES(p) ((p) == mpi_fortran_statuses_ignore_ || (p) == mpi_fortran_status_ignore_ \
                       ? MPI_STATUSES_IGNORE : (MPI_Status *)(p))
#define F_INTS(p) ((p) == mpi_fortran_errcodes_ignore_ ? MPI_ERRCODES_IGNORE \
                 : (p) == mpi_fortran_unweighted_ ? MPI_UNWEIGHTED \
                 : (p) == mpi_fortran_weights_empty_ ? MPI_WEIGHTS_EMPTY : (void *)(p))
#define F_LOGICAL(x) ((x) ? 1 : 0)

/* Gives a Fortran integer back to the library's conversion table (crates/capi fint.rs). */
void steadfast_fint_release(int kind, MPI_Fint f);

/* Blank-padded Fortran string -> fresh NUL-terminated copy without the trailing blanks. */
char *glue_cstr(const char *f, size_t len);
/* The same, also without leading blanks (Info keys and values). */
char *glue_cstr_info(const char *f, size_t len);
/* Buffer for a C string result going to the Fortran string `f` of `len` characters; holds
 * f's current text, so a call that writes nothing leaves `f` as it was. */
char *glue_strbuf(const char *f, size_t len);
/* C string -> Fortran string of `len` characters, blank-padded (truncated if longer). */
void glue_fstr(const char *c, char *f, size_t len);
void *glue_alloc(int n, size_t size);
void glue_free(void *p);
/* Length of a datatype array argument of communicator `comm`: which 0 = size (remote size
 * of an intercommunicator), 1 = out-degree, 2 = in-degree of its topology. */
int glue_comm_len(MPI_Comm comm, int which);

#endif
