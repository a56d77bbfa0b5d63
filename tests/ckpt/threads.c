/* A program with a thread of its own, which `--ft coordinated` must refuse with a clear
 * error (no image can hold a second thread). Argument:
 *   init    the thread is started before MPI_Init: MPI_Init refuses the process;
 *   fatal   the thread is started after MPI_Init and the default error handler is kept:
 *           the first checkpoint ends the job with the library's message;
 *   return  as `fatal` with MPI_ERRORS_RETURN: the MPI call in which the checkpoint was
 *           refused returns an error of class MPI_ERR_UNSUPPORTED_OPERATION, and the program
 *           calls MPI_Abort with 42 (43 for any other class).
 * Without a refusal the program ends normally after about 10 seconds (exit status 0). */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile int stop;

static void *helper(void *arg) {
    (void)arg;
    while (!stop) usleep(1000);
    return NULL;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "fatal";
    pthread_t t;
    if (strcmp(mode, "init") == 0) pthread_create(&t, NULL, helper, NULL);
    MPI_Init(&argc, &argv);
    if (strcmp(mode, "init") != 0) pthread_create(&t, NULL, helper, NULL);
    if (strcmp(mode, "return") == 0) MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    for (int i = 0; i < 10000; i++) {
        int one = 1, sum = 0;
        int rc = MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) {
            int cls;
            MPI_Error_class(rc, &cls);
            MPI_Abort(MPI_COMM_WORLD, cls == MPI_ERR_UNSUPPORTED_OPERATION ? 42 : 43);
        }
        usleep(1000);
    }
    stop = 1;
    pthread_join(t, NULL);
    MPI_Finalize();
    return 0;
}
