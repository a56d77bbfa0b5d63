/* ranks: 2 3 4 8
 * timeout: 180
 * slots.c in MPI_THREAD_MULTIPLE: blocking collectives run the slot exchange as requests,
 * waited for with the library lock released.
 */
#define SLOTS_MULTIPLE 1
#include "slots.c"
