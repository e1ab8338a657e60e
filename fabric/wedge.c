/*
 * wedge.c - an engine that a provider call never gives back.
 *
 * libfabric 1.17's shm takes spin locks in shared memory; a rank killed
 * while it holds one leaves any survivor's call that takes it spinning
 * for good, perhaps with the engine's lock held.  The engine cannot free
 * that thread, but no other thread must hang behind it: the application's
 * calls take the engine's lock within the context's timeout or give up,
 * waits sleep on a lock of their own, and a stop does not join a thread
 * that does not end.  Once the lock could not be had for that long, the
 * engine is "wedged": every call fails at once, and destroying the
 * context leaves the engine (and the stuck thread) as they are.
 */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>

#include "shemb.h"
#include "fabric/boot.h"
#include "fabric/engine.h"

/* Deadlines of the lock and the join are on the realtime clock, those
 * of done_cond (made so) on the monotonic one: the calls that take the
 * clock as an argument are unknown to the thread sanitizer. */
static struct timespec deadline_in(clockid_t clock, int ms)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}

static void mark_wedged(struct fab *f, const char *what)
{
	pthread_mutex_lock(&f->done_lock);
	if (!atomic_load(&f->wedged)) {
		snprintf(f->wedge_why, sizeof(f->wedge_why),
			 "rank %d: the transport is stuck: a libfabric call "
			 "%s for %d ms (over shm, a rank that died holding a "
			 "lock of the provider's shared memory does this); "
			 "the context can only be destroyed", f->rank, what,
			 f->timeout_ms);
		atomic_store(&f->wedged, SHEMB_EPEER);
	}
	pthread_cond_broadcast(&f->done_cond);
	pthread_mutex_unlock(&f->done_lock);
}

int shemb__fab_wedged(struct fab *f, char *why, size_t len)
{
	int rc = atomic_load(&f->wedged);

	if (rc && why) {
		pthread_mutex_lock(&f->done_lock);
		snprintf(why, len, "%s", f->wedge_why);
		pthread_mutex_unlock(&f->done_lock);
	}
	return rc;
}

/* With the lock: a read of the bulk lane that never returns holds no
 * lock, but no bulk transfer moves again. */
static int stuck(struct fab *f, char *why, size_t len)
{
	uint64_t limit = (uint64_t)f->timeout_ms * 1000000u;

	if (f->bulk_reader && f->timeout_ms > 0 &&
	    shemb__fab_now_ns() - f->bulk_read_ns > limit)
		mark_wedged(f, "reading the bulk lane has not returned");
	return shemb__fab_wedged(f, why, len);
}

int shemb__fab_lock(struct fab *f, char *why, size_t len)
{
	struct timespec dl;
	int rc;

	if (shemb__fab_wedged(f, why, len))
		return SHEMB_EPEER;
	if (pthread_mutex_trylock(&f->lock) == 0) /* the common case */
		goto locked;
	dl = deadline_in(CLOCK_REALTIME, f->timeout_ms);
	atomic_fetch_add_explicit(&f->callers, 1, memory_order_relaxed);
	rc = pthread_mutex_timedlock(&f->lock, &dl);
	atomic_fetch_sub_explicit(&f->callers, 1, memory_order_relaxed);
	if (rc) {
		if (rc == ETIMEDOUT)
			mark_wedged(f, "has held its lock");
		if (!shemb__fab_wedged(f, why, len)) {
			snprintf(why, len, "the transport's lock: error %d",
				 rc);
			return SHEMB_EINTERNAL;
		}
		return SHEMB_EPEER;
	}
locked:
	if (!atomic_load(&f->wedged))
		return 0;
	pthread_mutex_unlock(&f->lock);
	return shemb__fab_wedged(f, why, len);
}

int shemb__fab_probe(struct fab *f, char *why, size_t len)
{
	int rc = shemb__fab_lock(f, why, len);

	if (!rc) {
		rc = stuck(f, why, len);
		pthread_mutex_unlock(&f->lock);
	}
	return rc;
}

void shemb__fab_op_done(struct fab *f)
{
	pthread_mutex_lock(&f->done_lock);
	atomic_fetch_add(&f->finished, 1);
	pthread_cond_broadcast(&f->done_cond);
	pthread_mutex_unlock(&f->done_lock);
}

int shemb__fab_sleep_done(struct fab *f, uint64_t gen, char *why,
			  size_t len)
{
	struct timespec dl = deadline_in(CLOCK_MONOTONIC, WAKE_MS);
	int rc;

	pthread_mutex_lock(&f->done_lock);
	while (atomic_load(&f->finished) == gen && !atomic_load(&f->wedged))
		if (pthread_cond_timedwait(&f->done_cond, &f->done_lock,
					   &dl) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&f->done_lock);
	rc = shemb__fab_lock(f, why, len);
	if (!rc && (rc = stuck(f, why, len)))
		pthread_mutex_unlock(&f->lock);
	return rc;
}

/* A wedged engine's thread is given a moment only: it is most likely the
 * stuck one, or waits behind it. */
bool shemb__fab_join(struct fab *f)
{
	struct timespec dl = deadline_in(CLOCK_REALTIME,
					 atomic_load(&f->wedged)
						 ? WAKE_MS
						 : f->timeout_ms);

	if (pthread_timedjoin_np(f->thread, NULL, &dl)) {
		pthread_detach(f->thread);
		return false;
	}
	return true;
}

/* The rendezvous goes, so that the other ranks learn that this one left,
 * when the lock can be had within a second: the progress thread reads
 * it under the lock, and may only be slow.  The endpoint cannot be
 * closed under a thread stuck in it. */
void shemb__fab_leave_wedged(struct fab *f)
{
	struct timespec dl = deadline_in(CLOCK_REALTIME, 1000);

	if (pthread_mutex_timedlock(&f->lock, &dl))
		return;
	shemb__boot_close(f->boot);
	f->boot = NULL;
	pthread_mutex_unlock(&f->lock);
}
