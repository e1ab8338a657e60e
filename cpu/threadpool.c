/*
 * threadpool.c - workers parked on a condition variable, one job at a time,
 * tasks handed out by an atomic counter.
 */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "shemb.h"
#include "cpu/threadpool.h"
#include "lib/thread.h"

/* Spins before a worker parks: back-to-back jobs (one per table of a step)
 * then start without a futex wake-up. */
#define SPIN_ROUNDS 4000

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

struct shemb__pool {
	int nthreads;
	pthread_t *threads;
	pthread_mutex_t job_lock;   /* held by the thread whose job runs */

	pthread_mutex_t mu;
	pthread_cond_t wake;
	pthread_cond_t done;
	atomic_uint_fast64_t gen;   /* bumped for each job */
	int busy_workers;
	atomic_int stop;

	shemb__task_fn fn;
	void *arg;
	int64_t ntasks;
	atomic_int_fast64_t next;
};

static void run_tasks(struct shemb__pool *p)
{
	int64_t t;

	while ((t = atomic_fetch_add(&p->next, 1)) < p->ntasks)
		p->fn(p->arg, t);
}

static uint64_t wait_for_job(struct shemb__pool *p, uint64_t seen)
{
	uint64_t g;

	for (int i = 0; i < SPIN_ROUNDS; i++) {
		g = atomic_load_explicit(&p->gen, memory_order_acquire);
		if (g != seen || p->stop)
			return g;
		cpu_relax();
	}
	pthread_mutex_lock(&p->mu);
	while ((g = atomic_load(&p->gen)) == seen && !p->stop)
		pthread_cond_wait(&p->wake, &p->mu);
	pthread_mutex_unlock(&p->mu);
	return g;
}

static void *worker_main(void *arg)
{
	struct shemb__pool *p = arg;
	uint64_t seen = 0;

	for (;;) {
		seen = wait_for_job(p, seen);
		if (p->stop)
			return NULL;
		run_tasks(p);
		pthread_mutex_lock(&p->mu);
		if (--p->busy_workers == 0)
			pthread_cond_signal(&p->done);
		pthread_mutex_unlock(&p->mu);
	}
}

static int start_workers(struct shemb__pool *p)
{
	int rc = 0, i;

	for (i = 0; i < p->nthreads - 1; i++) {
		rc = shemb__thread_start(&p->threads[i], worker_main, p,
					 "shemb-worker", 0);
		if (rc)
			break;
	}
	if (rc) {
		p->nthreads = i + 1;
		return -1;
	}
	return 0;
}

int shemb__pool_create(int nthreads, struct shemb__pool **pool)
{
	struct shemb__pool *p = calloc(1, sizeof(*p));

	if (!p)
		return SHEMB_ENOMEM;
	p->nthreads = nthreads < 1 ? 1 : nthreads;
	p->threads = calloc((size_t)p->nthreads, sizeof(pthread_t));
	if (!p->threads) {
		free(p);
		return SHEMB_ENOMEM;
	}
	pthread_mutex_init(&p->job_lock, NULL);
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->wake, NULL);
	pthread_cond_init(&p->done, NULL);
	if (start_workers(p)) {
		shemb__pool_destroy(p);
		return SHEMB_ENOMEM;
	}
	*pool = p;
	return 0;
}

void shemb__pool_destroy(struct shemb__pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = 1;
	pthread_cond_broadcast(&p->wake);
	pthread_mutex_unlock(&p->mu);
	for (int i = 0; i < p->nthreads - 1; i++)
		pthread_join(p->threads[i], NULL);
	pthread_cond_destroy(&p->done);
	pthread_cond_destroy(&p->wake);
	pthread_mutex_destroy(&p->mu);
	pthread_mutex_destroy(&p->job_lock);
	free(p->threads);
	free(p);
}

int shemb__pool_nthreads(const struct shemb__pool *p)
{
	return p->nthreads;
}

int64_t shemb__pool_split(const struct shemb__pool *p, int64_t n,
			  int64_t min_per_task)
{
	/* a few tasks per thread balance uneven tasks (skewed bags) */
	int64_t want = (int64_t)p->nthreads * 8;
	int64_t most = (n + min_per_task - 1) / min_per_task;

	if (most < 1)
		return 1;
	return want < most ? want : most;
}

static void run_inline(int64_t ntasks, shemb__task_fn fn, void *arg)
{
	for (int64_t t = 0; t < ntasks; t++)
		fn(arg, t);
}

void shemb__pool_run(struct shemb__pool *p, int64_t ntasks, shemb__task_fn fn,
		     void *arg)
{
	if (ntasks <= 1 || p->nthreads == 1 ||
	    pthread_mutex_trylock(&p->job_lock) == EBUSY) {
		run_inline(ntasks, fn, arg);
		return;
	}
	p->fn = fn;
	p->arg = arg;
	p->ntasks = ntasks;
	atomic_store(&p->next, 0);
	pthread_mutex_lock(&p->mu);
	p->busy_workers = p->nthreads - 1;
	atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
	pthread_cond_broadcast(&p->wake);
	pthread_mutex_unlock(&p->mu);

	run_tasks(p);

	pthread_mutex_lock(&p->mu);
	while (p->busy_workers > 0)
		pthread_cond_wait(&p->done, &p->mu);
	pthread_mutex_unlock(&p->mu);
	pthread_mutex_unlock(&p->job_lock);
}
