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
#include "lib/jobq.h"

#include <stdlib.h>
#include <string.h>

struct load_job {
	struct shemb__job link;
	shemb_table *table;
	int64_t n;
	int64_t rows[];
};

static void run_job(void *arg, struct shemb__job *job)
{
	struct load_job *j = (struct load_job *)job;
	struct shemb__rows_view v;

	(void)arg;
	shemb__rows_acquire(j->table, j->n, j->rows, true,
			    SHEMB__ROWS_PREFETCH, &v);
	shemb__rows_release(j->table, &v);
}

static void job_done(void *arg, struct shemb__job *job)
{
	struct load_job *j = (struct load_job *)job;

	(void)arg;
	atomic_fetch_sub(&j->table->tier->loads_queued, 1);
	free(j);
}

static const struct shemb__jobq_ops loader_ops = {
	.thread_name = "shemb-prefetch",
	.run = run_job,
	.done = job_done,
};

/* Queue the load of n distinct local rows of t; -1 when it cannot (no
 * memory or no thread): the caller then loads them itself. */
int shemb__loader_queue(shemb_table *t, int64_t n, const int64_t *rows)
{
	struct shemb__jobq *q;
	struct load_job *j;

	if (!t->ctx->attr.prefetch_thread ||
	    !(q = shemb__jobq_get(t->ctx, &t->ctx->loader, &loader_ops, NULL)))
		return -1;
	j = malloc(sizeof(*j) + ((size_t)n + 1) * sizeof(int64_t));
	if (!j)
		return -1;
	j->table = t;
	j->n = n;
	memcpy(j->rows, rows, (size_t)n * sizeof(int64_t));
	atomic_fetch_add(&t->tier->loads_queued, 1);
	shemb__jobq_push(q, &j->link);
	return 0;
}

static bool loads_queued(void *t)
{
	return atomic_load(&((shemb_table *)t)->tier->loads_queued) > 0;
}

/* Wait until t has no queued or running load. */
void shemb__loader_wait(shemb_table *t)
{
	if (!t->tier || !atomic_load(&t->tier->loads_queued))
		return;
	shemb__jobq_wait(t->ctx->loader, loads_queued, t);
}

/* At context destroy: the queued loads run, then the thread ends. */
void shemb__loader_stop(shemb_ctx *ctx)
{
	shemb__jobq_stop(&ctx->loader);
}
