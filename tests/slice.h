/*
 * slice.h - what the kernel says of a thread's scheduling slice (the
 * attr comm_slice_us): the tests read it back from the threads the
 * library runs.
 */
#ifndef SHEMB_TESTS_SLICE_H
#define SHEMB_TESTS_SLICE_H

#include <stdbool.h>

/* The id of this process's thread named name (its comm), or -1. */
int slice_thread_named(const char *name);
/* The slice of thread tid, in nanoseconds, or -1 if it cannot be read. */
long long slice_of_thread(int tid);
/* Whether the kernel takes a slice a thread asks for (Linux 6.12 and
 * later), tried on a thread of its own; and the slice such a thread has
 * without asking (*dflt, -1 if none). */
bool slice_kernel_takes(long long *dflt);

#endif
