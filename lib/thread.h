/*
 * thread.h - starting the library's own threads (thread.c).
 */
#ifndef SHEMB_THREAD_H
#define SHEMB_THREAD_H

#include <pthread.h>

/* A thread of the library running fn(arg): every signal blocked, named
 * name (shemb-...); 0 or the errno of pthread_create. */
int shemb__thread_start(pthread_t *t, void *(*fn)(void *), void *arg,
			const char *name);

/* The calling thread asks the kernel for a scheduling slice of us
 * microseconds (> 0; the attr comm_slice_us); a no-op for us <= 0 and
 * for threads outside the normal and batch policies.  0 or an errno. */
int shemb__thread_ask_slice(int us);

#endif
