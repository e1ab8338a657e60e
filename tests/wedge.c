/*
 * wedge.c - a fault for tests, loaded with LD_PRELOAD: the rank named by
 * SHEMB_TEST_WEDGE=RANK:MS[:THREAD], MS milliseconds after its first spin
 * lock, never returns from the next pthread_spin_lock() of its progress
 * thread (or of the thread named THREAD, such as shemb-steps).
 * libfabric's shm provider takes spin locks in shared memory around its
 * queues, so this is what a survivor sees when a peer died holding one:
 * a provider call that does not come back (tests/coll_rank.c, scenarios
 * "wedge" and "wedge-steps").  The thread sleeps rather than spins, to
 * spare the CPU.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

__attribute__((visibility("default"))) int
pthread_spin_lock(pthread_spinlock_t *lock);

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The time after which the next lock never returns; 0: never. */
static uint64_t wedge_at(void)
{
	static _Atomic uint64_t at = UINT64_MAX;
	uint64_t v = atomic_load(&at);
	const char *w, *r;

	if (v != UINT64_MAX)
		return v;
	w = getenv("SHEMB_TEST_WEDGE");
	r = getenv("SHEMB_RANK");
	v = 0;
	if (w && r && atoi(w) == atoi(r) && strchr(w, ':'))
		v = now_ms() + (uint64_t)atoll(strchr(w, ':') + 1);
	atomic_store(&at, v);
	return v;
}

/* By default only the progress thread, the one that reads completions
 * all along, so the most likely to be inside libfabric at a peer's
 * death: a call of the application stuck so would never return,
 * whatever the library did. */
static bool in_wedged_thread(void)
{
	const char *w = getenv("SHEMB_TEST_WEDGE");
	const char *which = w && strchr(w, ':') ? strchr(strchr(w, ':') + 1,
							   ':')
					       : NULL;
	char name[16] = "";

	pthread_getname_np(pthread_self(), name, sizeof(name));
	return !strcmp(name, which ? which + 1 : "shemb-progress");
}

int pthread_spin_lock(pthread_spinlock_t *lock)
{
	static int (*real)(pthread_spinlock_t *);
	uint64_t at = wedge_at();

	if (at && now_ms() >= at && in_wedged_thread())
		for (;;)
			pause();
	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "pthread_spin_lock");
	return real(lock);
}
