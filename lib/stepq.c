/*
 * stepq.c - the queue of steps started without waiting.  Steps of a
 * context run one at a time, in the order they were started, on one
 * thread of the context (started with the first): across ranks they are
 * collective, so every rank runs them in the same order, and a backward
 * finds the plan of the lookup started before it.  A blocking call made
 * while steps are queued queues behind them and waits.
 */
#include "lib/stepq.h"

#include "lib/comm.h"
#include "lib/thread.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct shemb__step_job {
	struct shemb__step_job *next;
	int kind, n;
	unsigned flags;
	struct shemb_bags *bags;     /* a copy of the caller's array */
	void **bufs;                 /* out or grad pointers, copied */
	int status;
	bool done;
	bool orphan;                 /* released before done: the queue
				      * frees it */
	char why[512];
	/* SHEMB__STEP_COLL: the collective, its arrays, and once started
	 * its operation on ops (released by the queue if orphaned) */
	struct shemb__coll coll;
	size_t *arrays;
	const struct shemb_comm_ops *ops;
	void *comm;
	struct shemb__op *op;
};

struct shemb__stepq {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t work;         /* a job came, or stop */
	pthread_cond_t done;         /* a job ended */
	struct shemb__step_job *head, *tail;
	int pending;                 /* queued or running */
	bool stop;
};

static void job_free(struct shemb__step_job *j)
{
	if (!j)
		return;
	if (j->op)
		j->ops->release(j->comm, j->op);
	free(j->bags);
	free(j->bufs);
	free(j->arrays);
	free(j);
}

static void run(shemb_ctx *ctx, struct shemb__step_job *j)
{
	if (j->kind == SHEMB__STEP_COLL) {
		j->status = j->ops->start(j->comm, &j->coll, &j->op, j->why,
					  sizeof(j->why));
		return;
	}
	if (j->kind == SHEMB__STEP_LOOKUP)
		j->status = shemb__lookup_now(ctx, j->n, j->bags,
					      (float *const *)j->bufs,
					      j->flags);
	else
		j->status = shemb__backward_now(ctx, j->n, j->bags,
						(const float *const *)j->bufs);
	if (j->status)
		snprintf(j->why, sizeof(j->why), "%s",
			 shemb_ctx_last_error(ctx));
}

static void *stepq_main(void *arg)
{
	shemb_ctx *ctx = arg;
	struct shemb__stepq *q = ctx->stepq;

	pthread_mutex_lock(&q->mu);
	for (;;) {
		struct shemb__step_job *j;

		while (!q->head && !q->stop)
			pthread_cond_wait(&q->work, &q->mu);
		if (!q->head)
			break; /* stopped, nothing left */
		j = q->head;
		pthread_mutex_unlock(&q->mu);
		run(ctx, j);
		pthread_mutex_lock(&q->mu);
		q->head = j->next;
		if (!q->head)
			q->tail = NULL;
		q->pending--;
		j->done = true;
		if (j->orphan)
			job_free(j);
		pthread_cond_broadcast(&q->done);
	}
	pthread_mutex_unlock(&q->mu);
	return NULL;
}

/* The context's queue, its thread started on first use; NULL without
 * memory or a thread. */
static struct shemb__stepq *queue_of(shemb_ctx *ctx)
{
	struct shemb__stepq *q;

	pthread_mutex_lock(&ctx->lock);
	q = ctx->stepq;
	if (!q && (q = calloc(1, sizeof(*q)))) {
		pthread_mutex_init(&q->mu, NULL);
		pthread_cond_init(&q->work, NULL);
		pthread_cond_init(&q->done, NULL);
		ctx->stepq = q;
		if (shemb__thread_start(&q->thread, stepq_main, ctx,
					"shemb-steps")) {
			pthread_mutex_destroy(&q->mu);
			pthread_cond_destroy(&q->work);
			pthread_cond_destroy(&q->done);
			free(q);
			q = NULL;
			ctx->stepq = NULL;
		}
	}
	pthread_mutex_unlock(&ctx->lock);
	return q;
}

/* The caller's n sets (read with the stride bags[0].size, as the calls
 * do) and n buffer pointers, copied. */
static struct shemb__step_job *job_new(int kind, int n,
				       const struct shemb_bags *bags,
				       void *const *bufs, unsigned flags)
{
	struct shemb__step_job *j = calloc(1, sizeof(*j));
	size_t stride = n > 0 && bags ? bags->size : 0;

	if (!j)
		return NULL;
	j->kind = kind;
	j->n = n;
	j->flags = flags;
	if (n > 0 && bags) {
		j->bags = malloc((size_t)n * stride + 1);
		if (j->bags)
			memcpy(j->bags, bags, (size_t)n * stride);
	}
	if (n > 0 && bufs) {
		j->bufs = malloc((size_t)n * sizeof(void *));
		if (j->bufs)
			memcpy(j->bufs, bufs, (size_t)n * sizeof(void *));
	}
	if ((n > 0 && bags && !j->bags) || (n > 0 && bufs && !j->bufs)) {
		job_free(j);
		return NULL;
	}
	return j;
}

static void enqueue(struct shemb__stepq *q, struct shemb__step_job *j)
{
	pthread_mutex_lock(&q->mu);
	if (q->tail)
		q->tail->next = j;
	else
		q->head = j;
	q->tail = j;
	q->pending++;
	pthread_cond_signal(&q->work);
	pthread_mutex_unlock(&q->mu);
}

int shemb__stepq_submit(shemb_ctx *ctx, int kind, int n,
			const struct shemb_bags *bags, void *const *bufs,
			unsigned flags, struct shemb__step_job **job)
{
	struct shemb__stepq *q;
	struct shemb__step_job *j;

	if (n > 0 && bags && bags->size < sizeof(size_t))
		return shemb__fail(ctx, SHEMB_EINVAL, "bags[0].size %zu is "
				   "not a struct shemb_bags", bags->size);
	q = queue_of(ctx);
	j = q ? job_new(kind, n, bags, bufs, flags) : NULL;
	if (!j)
		return shemb__fail(ctx, SHEMB_ENOMEM, "no memory or thread "
				   "for a step started without waiting");
	enqueue(q, j);
	*job = j;
	return 0;
}

/* c's per-rank arrays into one block of the job's. */
static int copy_coll(struct shemb__step_job *j, const struct shemb__coll *c,
		     int world)
{
	const size_t *src[4] = { c->sendcounts, c->sdispls, c->recvcounts,
				 c->rdispls };
	const size_t **dst[4] = { &j->coll.sendcounts, &j->coll.sdispls,
				  &j->coll.recvcounts, &j->coll.rdispls };

	j->coll = *c;
	j->arrays = malloc(4 * (size_t)world * sizeof(size_t));
	if (!j->arrays)
		return -1;
	for (int k = 0; k < 4; k++) {
		if (!src[k])
			continue;
		memcpy(j->arrays + (size_t)k * (size_t)world, src[k],
		       (size_t)world * sizeof(size_t));
		*dst[k] = j->arrays + (size_t)k * (size_t)world;
	}
	return 0;
}

int shemb__stepq_submit_coll(shemb_ctx *ctx, const struct shemb__coll *c,
			     const struct shemb_comm_ops *ops, void *comm,
			     struct shemb__step_job **job)
{
	struct shemb__stepq *q = queue_of(ctx);
	struct shemb__step_job *j = q ? calloc(1, sizeof(*j)) : NULL;

	if (!j || copy_coll(j, c, ctx->attr.world_size)) {
		job_free(j);
		return shemb__fail(ctx, SHEMB_ENOMEM, "no memory to queue a "
				   "collective");
	}
	j->kind = SHEMB__STEP_COLL;
	j->ops = ops;
	j->comm = comm;
	enqueue(q, j);
	*job = j;
	return 0;
}

struct shemb__op *shemb__stepq_op(struct shemb__step_job *job)
{
	return job->op;
}

void shemb__stepq_drain(shemb_ctx *ctx)
{
	struct shemb__stepq *q;

	pthread_mutex_lock(&ctx->lock);
	q = ctx->stepq;
	pthread_mutex_unlock(&ctx->lock);
	if (!q || pthread_equal(pthread_self(), q->thread))
		return;
	pthread_mutex_lock(&q->mu);
	while (q->pending > 0)
		pthread_cond_wait(&q->done, &q->mu);
	pthread_mutex_unlock(&q->mu);
}

bool shemb__stepq_done(shemb_ctx *ctx, struct shemb__step_job *job,
		       int *status, const char **why)
{
	struct shemb__stepq *q = ctx->stepq;
	bool done = true; /* no queue: stopped, everything ran */

	if (q) {
		pthread_mutex_lock(&q->mu);
		done = job->done;
		pthread_mutex_unlock(&q->mu);
	}
	/* the job's results are read only once it is seen done */
	*status = done ? job->status : 0;
	*why = done ? job->why : "";
	return done;
}

int shemb__stepq_wait(shemb_ctx *ctx, struct shemb__step_job *job)
{
	struct shemb__stepq *q = ctx->stepq;

	if (q) {
		pthread_mutex_lock(&q->mu);
		while (!job->done)
			pthread_cond_wait(&q->done, &q->mu);
		pthread_mutex_unlock(&q->mu);
	}
	return job->status ? shemb__fail(ctx, job->status, "%s", job->why)
			   : 0;
}

void shemb__stepq_release(shemb_ctx *ctx, struct shemb__step_job *job)
{
	struct shemb__stepq *q = ctx->stepq;
	bool done;

	if (!job)
		return;
	if (!q) {
		job_free(job);
		return;
	}
	pthread_mutex_lock(&q->mu);
	done = job->done;
	job->orphan = !done;
	pthread_mutex_unlock(&q->mu);
	if (done)
		job_free(job);
}

bool shemb__stepq_busy(shemb_ctx *ctx)
{
	struct shemb__stepq *q;
	bool busy;

	pthread_mutex_lock(&ctx->lock);
	q = ctx->stepq;
	pthread_mutex_unlock(&ctx->lock);
	if (!q)
		return false;
	pthread_mutex_lock(&q->mu);
	busy = q->pending > 0;
	pthread_mutex_unlock(&q->mu);
	return busy;
}

void shemb__stepq_stop(shemb_ctx *ctx)
{
	struct shemb__stepq *q = ctx->stepq;

	if (!q)
		return;
	pthread_mutex_lock(&q->mu);
	q->stop = true;
	pthread_cond_signal(&q->work);
	pthread_mutex_unlock(&q->mu);
	pthread_join(q->thread, NULL);
	pthread_mutex_destroy(&q->mu);
	pthread_cond_destroy(&q->work);
	pthread_cond_destroy(&q->done);
	free(q);
	ctx->stepq = NULL;
}
