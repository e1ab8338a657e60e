/*
 * thread.h - starting the library's own threads (thread.c).
 */
#ifndef SHEMB_THREAD_H
#define SHEMB_THREAD_H

#include <pthread.h>
#include <stdbool.h>

/* A thread of the library running fn(arg): every signal blocked, named
 * name (shemb-...), and, slice_us > 0 (the attr comm_slice_us), having
 * asked the kernel for a scheduling slice of that many microseconds
 * before this returns (a hint: a kernel that refuses it, or a thread
 * outside the normal and batch policies, keeps its own); 0 or an errno
 * of pthread_create or sem_init. */
int shemb__thread_start(pthread_t *t, void *(*fn)(void *), void *arg,
			const char *name, int slice_us);

/* Whether the calling thread is one of the library's own. */
bool shemb__on_library_thread(void);

#endif
