/*
 * progress.c - the progress thread of the libfabric communicator: it
 * moves the transfers while no caller does, stands back while callers
 * wait and progress themselves, and lets callers take the engine's lock
 * ahead of it.
 */
#define _GNU_SOURCE
#include "config.h"

#include <pthread.h>
#include <sched.h>
#include <time.h>

#include "shemb.h"
#include "fabric/engine.h"
#include "lib/thread.h"

/* Hand the lock to the callers waiting for it, then take it back.  A
 * mutex is not fair: unlocking and locking again would mostly keep it. */
static void let_callers_in(struct fab *f)
{
	pthread_mutex_unlock(&f->lock);
	/* bounded: callers that keep coming must not stop the thread */
	for (int i = 0; i < 64 && shemb__fab_callers_waiting(f); i++)
		sched_yield();
	pthread_mutex_lock(&f->lock);
}

static void idle_wait(struct fab *f)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_nsec += 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_cond_timedwait(&f->nap, &f->lock, &ts);
}

static void *progress_main(void *arg)
{
	struct fab *f = arg;

	pthread_mutex_lock(&f->lock);
	while (!atomic_load(&f->stop)) {
		int n;

		if (f->waiters_progressing ||
		    (f->urgent_waiters && f->active_bulk == 0)) {
			/* a caller moves the transfers and checks liveness:
			 * keep off its lock and its CPU */
			idle_wait(f);
			continue;
		}
		n = shemb__fab_progress(f, true);
		if (shemb__fab_callers_waiting(f)) {
			let_callers_in(f);
		} else if (f->active == 0) {
			idle_wait(f); /* liveness is still checked each ms */
		} else if (n == 0) {
			pthread_mutex_unlock(&f->lock);
			sched_yield();
			pthread_mutex_lock(&f->lock);
		}
	}
	pthread_mutex_unlock(&f->lock);
	return NULL;
}

int shemb__fab_start_thread(struct fab *f)
{
	if (shemb__thread_start(&f->thread, progress_main, f,
				"shemb-progress"))
		return SHEMB_ENOMEM;
	f->have_thread = true;
	return 0;
}

/* Without the engine's lock, which a stuck thread may hold: the thread
 * sees stop within a millisecond of sleep anyway. */
bool shemb__fab_stop_thread(struct fab *f)
{
	bool ended;

	if (!f->have_thread)
		return true;
	atomic_store(&f->stop, true);
	pthread_cond_broadcast(&f->nap);
	ended = shemb__fab_join(f);
	f->have_thread = false;
	return ended;
}
