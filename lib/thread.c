/*
 * thread.c - how the library starts a thread of its own: with every
 * signal blocked (the host's handlers run on the host's threads) and a
 * name that says whose it is; and the scheduling slice its threads that
 * move collectives ask for.
 */
#define _GNU_SOURCE
#include "lib/thread.h"

#include <errno.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The first version of the kernel's struct sched_attr (48 bytes): glibc
 * before 2.41 has none, and <linux/sched/types.h>, which has it, redefines
 * glibc's struct sched_param (pthread.h brings in <sched.h>). */
struct slice_attr {
	uint32_t size;
	uint32_t policy;
	uint64_t flags;
	int32_t nice;
	uint32_t priority;
	uint64_t runtime; /* a fair policy's slice (Linux 6.12 and later) */
	uint64_t deadline;
	uint64_t period;
};

#define SLICE_FLAG_RESET_ON_FORK 0x01

/*
 * Linux 6.12's scheduler (EEVDF) lets a task of the normal policy ask for
 * a slice other than the default (sched_setattr(2), sched_runtime): a
 * shorter one puts its deadline sooner, so the task runs sooner when it
 * wakes or yields, for less time at a go.  The threads that move
 * collectives wait on other ranks in short turns, and where ranks share
 * CPUs with a busy application thread the default slice made each turn
 * wait out the application's.  Kernels before 6.12 ignore the field.
 * The thread's nice value and policy are kept.
 */
static int ask_slice(int us)
{
#if defined(SYS_sched_getattr) && defined(SYS_sched_setattr)
	struct slice_attr a = { 0 };

	if (us <= 0)
		return 0;
	if (syscall(SYS_sched_getattr, 0, &a, (unsigned)sizeof(a), 0u))
		return errno;
	if (a.policy != SCHED_OTHER && a.policy != SCHED_BATCH)
		return 0;
	a.size = sizeof(a);
	a.flags &= SLICE_FLAG_RESET_ON_FORK;
	a.runtime = (uint64_t)us * 1000u;
	if (syscall(SYS_sched_setattr, 0, &a, 0u))
		return errno;
	return 0;
#else
	return us > 0 ? ENOSYS : 0;
#endif
}

/* What a new thread needs before it runs fn: its slice to ask for, and
 * the semaphore on which its creator waits until it has. */
struct start {
	void *(*fn)(void *);
	void *arg;
	int slice_us;
	sem_t asked;
};

static _Thread_local bool library_thread;

bool shemb__on_library_thread(void)
{
	return library_thread;
}

static void *thread_main(void *p)
{
	struct start *s = p;
	void *(*fn)(void *) = s->fn;
	void *arg = s->arg;

	library_thread = true;
	ask_slice(s->slice_us); /* a hint: failure is fine */
	sem_post(&s->asked); /* s, on the creator's stack, is gone after */
	return fn(arg);
}

/* The thread has its slice when this returns: a caller that reads it
 * (or relies on it) right after the start sees it. */
int shemb__thread_start(pthread_t *t, void *(*fn)(void *), void *arg,
			const char *name, int slice_us)
{
	struct start s = { .fn = fn, .arg = arg, .slice_us = slice_us };
	sigset_t all, old;
	int rc;

	if (sem_init(&s.asked, 0, 0))
		return errno;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(t, NULL, thread_main, &s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!rc) {
		pthread_setname_np(*t, name);
		while (sem_wait(&s.asked) && errno == EINTR)
			;
	}
	sem_destroy(&s.asked);
	return rc;
}
