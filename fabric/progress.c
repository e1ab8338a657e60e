/*
 * progress.c - the progress thread of the libfabric communicator: it
 * moves the transfers while no caller does, stands back while callers
 * wait and progress themselves, holds the bulk lane back while a caller
 * waits for an urgent collective, and lets callers take the engine's
 * lock ahead of it.
 */
#define _GNU_SOURCE
#include "config.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
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

/*
 * While a caller waits for an urgent collective (a lookup's exchange),
 * the thread leaves the bulk lane alone for up to HOLD_NS.  Reading the
 * bulk lane is where shm copies the chunks that arrived, milliseconds of
 * CPU; with more ranks than cores, the copies of every rank's thread
 * take the processors from the waiters, and the urgent exchange, each
 * step of which needs every rank to run, lasts as long as they do.
 * Measured (shemb-bench sched -n 4, 2 cores, 4 MiB chunks): a 4 KiB
 * alltoallv behind a 64 MiB allreduce took 29 to 48 times as long as
 * alone without the hold, 7 to 12 times with it; what is left is the
 * copy a thread was already in when the wait began (chunk_bytes).
 *
 * The hold is bounded, since the urgent collective may wait for a rank
 * that first waits for a bulk one (coll_rank hold).  Each wait holds the
 * lane anew: the bulk collectives have the lower priority.  When the
 * wait ends, the thread goes back to the bulk lane at its next look,
 * within a millisecond, not at once: urgent waits come in runs (a
 * barrier and an exchange, a lookup's tables), and a thread woken
 * between them would be in the middle of a copy when the next begins.
 */
#define HOLD_NS 2000000ull

void shemb__fab_urgent_wait_begin(struct fab *f)
{
	if (f->urgent_waiters++ == 0)
		f->bulk_hold_until = shemb__fab_now_ns() + HOLD_NS;
	atomic_store_explicit(&f->urgent_waiting, f->urgent_waiters,
			      memory_order_relaxed);
}

void shemb__fab_urgent_wait_end(struct fab *f)
{
	if (--f->urgent_waiters == 0)
		f->bulk_hold_until = 0;
	atomic_store_explicit(&f->urgent_waiting, f->urgent_waiters,
			      memory_order_relaxed);
}

static bool stand_back(struct fab *f)
{
	if (f->waiters_progressing)
		return true;
	if (!f->urgent_waiters)
		return false;
	return f->active_bulk == 0 ||
	       shemb__fab_now_ns() < f->bulk_hold_until;
}

static void idle_wait(struct fab *f, uint64_t ns)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ns += (uint64_t)ts.tv_nsec;
	ts.tv_sec += (time_t)(ns / 1000000000u);
	ts.tv_nsec = (long)(ns % 1000000000u);
	pthread_cond_timedwait(&f->nap, &f->lock, &ts);
}

/*
 * While callers move the transfers on both lanes, the thread sleeps, at
 * most STAND_BACK_NS (a bound for safety: those callers check liveness
 * and timeouts themselves), and is woken only when it has work: when
 * the last such caller leaves while collectives are still in flight, or
 * when a collective starts that no caller waits for yet.  Waking each
 * millisecond instead, to find the callers still there, cost the ranks
 * CPU and the callers their lock: an alltoallv of 1 MiB over
 * tcp;ofi_rxm, 4 ranks on 2 cores, took 8% longer at the median of 8
 * runs of each taken in turn (from 8% less to 14% more), with 6% more
 * CPU (shemb-bench comm-rank, 2000 calls a run; the thread's context
 * switches went from 11,800 to 800).  A caller that starts a collective
 * and waits for it at once wakes nobody either: waking the thread as
 * every wait ended made it slower than the millisecond naps.
 */
#define STAND_BACK_NS 20000000ull
#define IDLE_NAP_NS 1000000ull

static void wake_thread(struct fab *f)
{
	if (!f->thread_stands_back)
		return;
	f->thread_stands_back = false;
	pthread_cond_signal(&f->nap);
}

void shemb__fab_waiter_leaves(struct fab *f)
{
	if (--f->waiters_progressing == 0 && f->active > 0)
		wake_thread(f);
}

void shemb__fab_unwatched_start(struct fab *f)
{
	if (f->waiters_progressing == 0)
		wake_thread(f);
}

/* The thread's sleep while it stands back: see STAND_BACK_NS. */
static void stand_back_wait(struct fab *f)
{
	if (!f->waiters_progressing) {
		idle_wait(f, IDLE_NAP_NS); /* an urgent waiter's hold */
		return;
	}
	f->thread_stands_back = true;
	idle_wait(f, f->stand_back_ns);
	f->thread_stands_back = false;
}

static void *progress_main(void *arg)
{
	struct fab *f = arg;

	pthread_mutex_lock(&f->lock);
	while (!atomic_load(&f->stop)) {
		int n;

		if (stand_back(f)) {
			/* a caller moves the transfers and checks liveness:
			 * keep off its lock and its CPU */
			stand_back_wait(f);
			continue;
		}
		n = shemb__fab_progress(f, true);
		if (shemb__fab_callers_waiting(f)) {
			let_callers_in(f);
		} else if (f->active == 0) {
			/* liveness is still checked each ms */
			idle_wait(f, IDLE_NAP_NS);
		} else if (n == 0) {
			pthread_mutex_unlock(&f->lock);
			sched_yield();
			pthread_mutex_lock(&f->lock);
		}
	}
	pthread_mutex_unlock(&f->lock);
	return NULL;
}

/* SHEMB_FABRIC_STAND_BACK_MS=N: the bound of STAND_BACK_NS, for tests
 * that make it longer than they wait, so that only the wakes can end a
 * collective that no caller waits for. */
static uint64_t stand_back_asked(void)
{
	const char *s = getenv("SHEMB_FABRIC_STAND_BACK_MS");
	unsigned long ms = s ? strtoul(s, NULL, 10) : 0;

	return ms >= 1 && ms <= 3600000 ? ms * 1000000ull : STAND_BACK_NS;
}

int shemb__fab_start_thread(struct fab *f)
{
	f->stand_back_ns = stand_back_asked();
	if (shemb__thread_start(&f->thread, progress_main, f,
				"shemb-progress", f->slice_us))
		return SHEMB_ENOMEM;
	f->have_thread = true;
	return 0;
}

/* Without the engine's lock, which a stuck thread may hold: the
 * broadcast cuts its sleep short (a nap of a millisecond, or the longer
 * one where it stood back), and it sees stop at its next look. */
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
