/*
 * tier_loader.c - the loads of prefetches, done by a thread of the context
 * while the caller computes its step.
 *
 * With the context's prefetch_thread attribute set, shemb_prefetch()
 * plans its rows and queues them here; one thread per context (started
 * at the first prefetch) loads them into the tables'
 * device tiers, under each tier's own lock.  Any other call that acquires
 * rows of a table first waits for that table's queued loads, so it sees
 * what a synchronous prefetch would have left.  A load that fails loses
 * nothing (nothing was evicted unwritten) and is not reported: the call
 * that needs the rows loads them itself and reports its own error.
 */
#include "lib/tier_int.h"
#include "lib/thread.h"

#include <stdlib.h>
#include <string.h>

struct load_job {
	struct load_job *next;
	shemb_table *table;
	int64_t n;
	int64_t rows[];
};

struct shemb__loader {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t work;     /* a job came, or stop */
	pthread_cond_t done;     /* a job ended */
	struct load_job *head, *tail;
	bool stop;
};

static void run_job(struct load_job *j)
{
	struct shemb__rows_view v;

	shemb__rows_acquire(j->table, j->n, j->rows, true,
			    SHEMB__ROWS_PREFETCH, &v);
	shemb__rows_release(j->table, &v);
}

static void *loader_main(void *arg)
{
	struct shemb__loader *l = arg;

	pthread_mutex_lock(&l->mu);
	for (;;) {
		struct load_job *j;

		while (!l->head && !l->stop)
			pthread_cond_wait(&l->work, &l->mu);
		if (!l->head)
			break; /* stop, and nothing left */
		j = l->head;
		l->head = j->next;
		if (!l->head)
			l->tail = NULL;
		pthread_mutex_unlock(&l->mu);
		run_job(j);
		pthread_mutex_lock(&l->mu);
		atomic_fetch_sub(&j->table->tier->loads_queued, 1);
		pthread_cond_broadcast(&l->done);
		free(j);
	}
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

/* The context's loader, started when first needed (NULL: none). */
static struct shemb__loader *loader_of(shemb_ctx *ctx)
{
	struct shemb__loader *l;

	pthread_mutex_lock(&ctx->lock);
	l = ctx->loader;
	if (!l && (l = calloc(1, sizeof(*l)))) {
		pthread_mutex_init(&l->mu, NULL);
		pthread_cond_init(&l->work, NULL);
		pthread_cond_init(&l->done, NULL);
		if (shemb__thread_start(&l->thread, loader_main, l,
					"shemb-prefetch")) {
			pthread_mutex_destroy(&l->mu);
			pthread_cond_destroy(&l->work);
			pthread_cond_destroy(&l->done);
			free(l);
			l = NULL;
		}
		ctx->loader = l;
	}
	pthread_mutex_unlock(&ctx->lock);
	return l;
}

/* Queue the load of n distinct local rows of t; -1 when it cannot (no
 * memory or no thread): the caller then loads them itself. */
int shemb__loader_queue(shemb_table *t, int64_t n, const int64_t *rows)
{
	struct shemb__loader *l;
	struct load_job *j;

	if (!t->ctx->attr.prefetch_thread || !(l = loader_of(t->ctx)))
		return -1;
	j = malloc(sizeof(*j) + ((size_t)n + 1) * sizeof(int64_t));
	if (!j)
		return -1;
	j->next = NULL;
	j->table = t;
	j->n = n;
	memcpy(j->rows, rows, (size_t)n * sizeof(int64_t));
	pthread_mutex_lock(&l->mu);
	atomic_fetch_add(&t->tier->loads_queued, 1);
	if (l->tail)
		l->tail->next = j;
	else
		l->head = j;
	l->tail = j;
	pthread_cond_signal(&l->work);
	pthread_mutex_unlock(&l->mu);
	return 0;
}

/* Wait until t has no queued or running load. */
void shemb__loader_wait(shemb_table *t)
{
	struct shemb__loader *l = t->ctx->loader;

	if (!t->tier || !atomic_load(&t->tier->loads_queued))
		return;
	pthread_mutex_lock(&l->mu);
	while (atomic_load(&t->tier->loads_queued))
		pthread_cond_wait(&l->done, &l->mu);
	pthread_mutex_unlock(&l->mu);
}

/* At context destroy: the queued loads run, then the thread ends. */
void shemb__loader_stop(shemb_ctx *ctx)
{
	struct shemb__loader *l = ctx->loader;

	if (!l)
		return;
	pthread_mutex_lock(&l->mu);
	l->stop = true;
	pthread_cond_signal(&l->work);
	pthread_mutex_unlock(&l->mu);
	pthread_join(l->thread, NULL);
	pthread_mutex_destroy(&l->mu);
	pthread_cond_destroy(&l->work);
	pthread_cond_destroy(&l->done);
	free(l);
	ctx->loader = NULL;
}
