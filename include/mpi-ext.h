/*
 * mpi-ext.h -- Steadfast extensions to the MPI 5.0 interface.
 *
 * Include this after (or instead of) mpi.h to use the fault-tolerance
 * interface: the ULFM names (MPIX_Comm_revoke, MPIX_Comm_shrink,
 * MPIX_Comm_agree, ...) with the signatures used by the ULFM proposal and
 * its implementations, so existing fault-tolerant programs compile
 * unchanged.
 */
#ifndef STEADFAST_MPI_EXT_H
#define STEADFAST_MPI_EXT_H

#include "mpi.h"

#if defined(__cplusplus)
extern "C" {
#endif

/* Lets programs detect this library at compile time. */
#define STEADFAST_MPI                  1

/* The ULFM fault-tolerance interface below is available. */
#define MPIX_ULFM                      1

/*
 * Error classes for process failures.
 *
 * MPI 5.0 defines no value for these classes.  Its ABI assigns the standard
 * classes from 0 upwards (0..62 today, MPI_T classes 1001..1018) and caps
 * all predefined classes at MPI_ERR_LASTCODE (0x3fff).  Steadfast takes its
 * own classes from the top of that space, 0x3ff0 and up, so that classes a
 * later standard appends after 62 cannot collide with them.
 */
#define MPIX_ERR_PROC_FAILED           16368 /* 0x3ff0: a peer process failed */
#define MPIX_ERR_PROC_FAILED_PENDING   16369 /* 0x3ff1: a failure blocks a wildcard receive */
#define MPIX_ERR_REVOKED               16370 /* 0x3ff2: the communicator was revoked */

/* Names the fault-tolerance proposal uses for the standard (MPI 6) spelling. */
#ifndef MPI_ERR_PROC_FAILED
#define MPI_ERR_PROC_FAILED            MPIX_ERR_PROC_FAILED
#endif
#ifndef MPI_ERR_PROC_FAILED_PENDING
#define MPI_ERR_PROC_FAILED_PENDING    MPIX_ERR_PROC_FAILED_PENDING
#endif
#ifndef MPI_ERR_REVOKED
#define MPI_ERR_REVOKED                MPIX_ERR_REVOKED
#endif

/* Revocation: make every pending and future operation on comm fail. */
int MPIX_Comm_revoke(MPI_Comm comm);
int MPIX_Comm_is_revoked(MPI_Comm comm, int *flag);

/* Shrink: build a new communicator from the surviving processes. */
int MPIX_Comm_shrink(MPI_Comm comm, MPI_Comm *newcomm);
int MPIX_Comm_ishrink(MPI_Comm comm, MPI_Comm *newcomm, MPI_Request *request);

/* Agreement: fault-tolerant bitwise AND of flag over the live processes. */
int MPIX_Comm_agree(MPI_Comm comm, int *flag);
int MPIX_Comm_iagree(MPI_Comm comm, int *flag, MPI_Request *request);

/* Failure discovery and acknowledgement (current ULFM interface). */
int MPIX_Comm_get_failed(MPI_Comm comm, MPI_Group *failedgrp);
int MPIX_Comm_ack_failed(MPI_Comm comm, int num_to_ack, int *num_acked);

/* Failure acknowledgement (older ULFM interface, kept for existing programs). */
int MPIX_Comm_failure_ack(MPI_Comm comm);
int MPIX_Comm_failure_get_acked(MPI_Comm comm, MPI_Group *failedgrp);

/* Profiling twins */
int PMPIX_Comm_revoke(MPI_Comm comm);
int PMPIX_Comm_is_revoked(MPI_Comm comm, int *flag);
int PMPIX_Comm_shrink(MPI_Comm comm, MPI_Comm *newcomm);
int PMPIX_Comm_ishrink(MPI_Comm comm, MPI_Comm *newcomm, MPI_Request *request);
int PMPIX_Comm_agree(MPI_Comm comm, int *flag);
int PMPIX_Comm_iagree(MPI_Comm comm, int *flag, MPI_Request *request);
int PMPIX_Comm_get_failed(MPI_Comm comm, MPI_Group *failedgrp);
int PMPIX_Comm_ack_failed(MPI_Comm comm, int num_to_ack, int *num_acked);
int PMPIX_Comm_failure_ack(MPI_Comm comm);
int PMPIX_Comm_failure_get_acked(MPI_Comm comm, MPI_Group *failedgrp);

/*
 * Steadfast membership view (seed 000): which ranks are alive, as agreed by
 * every survivor.  The view is kept by a background control thread in each
 * rank (failure detector + radix-tree membership protocol); a job started
 * with `mpiexec --on-failure continue` (or `--ft run-through`) keeps its
 * survivors running when ranks die, and their views drop the dead ranks.
 * Epoch 0 is the start-up view (all ranks); it grows with every change.
 */

/* The current view: epoch, number of live ranks, and the first maxlen live
 * world ranks in ascending order.  epoch and nlive may be NULL;
 * live_world_ranks may be NULL when maxlen is 0. */
int MPIX_Steadfast_view(int *epoch, int *nlive, int *live_world_ranks, int maxlen);

/* The world ranks declared failed: their number and the first maxlen of
 * them in ascending order. */
int MPIX_Steadfast_failed(int *nfailed, int *failed_world_ranks, int maxlen);

/* Block until the view's epoch is at least min_epoch, or timeout_s seconds
 * passed (negative: no limit).  *epoch (if not NULL) receives the epoch at
 * return: *epoch < min_epoch means the wait timed out.  Does not progress
 * MPI communication. */
int MPIX_Steadfast_wait_view(int min_epoch, double timeout_s, int *epoch);

/* The incarnation of a world rank as this process knows it: 0 for a first
 * start, k after `mpiexec --on-failure relaunch` started the rank again k
 * times (the calling rank's own incarnation for itself). */
int MPIX_Steadfast_incarnation(int world_rank, int *incarnation);

/* `mpiexec --ft coordinated`: ask for a coordinated checkpoint now and return
 * once this rank has taken its part of it (its process image is being written;
 * the checkpoint is committed when every rank took its part).  In a process
 * restored from that checkpoint the call returns too.  MPI_ERR_UNSUPPORTED_OPERATION
 * in other modes. */
int MPIX_Checkpoint(void);

int PMPIX_Checkpoint(void);
int PMPIX_Steadfast_view(int *epoch, int *nlive, int *live_world_ranks, int maxlen);
int PMPIX_Steadfast_incarnation(int world_rank, int *incarnation);
int PMPIX_Steadfast_failed(int *nfailed, int *failed_world_ranks, int maxlen);
int PMPIX_Steadfast_wait_view(int min_epoch, double timeout_s, int *epoch);

/*
 * Process images (docs/checkpoint.md): write an image of the calling process
 * to path and wait until it is complete.  *restored is 0 in the original
 * process and 1 when a process started with STEADFAST_RESTORE_IMAGE=path
 * (and address-space randomization off) comes back from this call.  Today
 * only for a process with no thread but the caller (before MPI_Init); x86-64
 * Linux only.  Returns MPI_SUCCESS, MPI_ERR_ARG, MPI_ERR_IO or MPI_ERR_OTHER
 * (with a message on stderr).
 */
int MPIX_Steadfast_image_checkpoint(const char *path, int *restored);
int PMPIX_Steadfast_image_checkpoint(const char *path, int *restored);

#if defined(__cplusplus)
}
#endif

#endif /* STEADFAST_MPI_EXT_H */
