/*
 * thread.c - how the library starts a thread of its own: with every
 * signal blocked (the host's handlers run on the host's threads) and a
 * name that says whose it is.
 */
#define _GNU_SOURCE
#include "lib/thread.h"

#include <signal.h>

int shemb__thread_start(pthread_t *t, void *(*fn)(void *), void *arg,
			const char *name)
{
	sigset_t all, old;
	int rc;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(t, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!rc)
		pthread_setname_np(*t, name);
	return rc;
}
