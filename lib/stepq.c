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
#include "lib/jobq.h"
#include "lib/parts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct shemb__step_job {
	struct shemb__job link;
	int kind, n;
	unsigned flags;
	struct shemb_bags *bags;     /* a copy of the caller's array */
	void **bufs;                 /* out or grad pointers, copied */
	struct shemb__parts *parts;  /* a lookup's outputs that are final */
	int status;
	bool done;
	bool orphan;                 /* released before done: the queue
				      * frees it */
	char why[512];
	/* SHEMB__STEP_COLL: the collective, its arrays, and once started
	 * its operation on ops (released with the job) */
	struct shemb__coll coll;
	size_t *arrays;
	const struct shemb_comm_ops *ops;
	void *comm;
	struct shemb__op *op;
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
	shemb__parts_free(j->parts);
	free(j);
}

/*
 * The lookup queued right behind the running backward, if any.  A caller
 * that starts a backward and then the next lookup queues the lookup a few
 * microseconds after the backward, when this thread may already have
 * looked: it waits that long for one.
 */
#define THEN_WAIT_NS 200000L

static bool fetch_then(struct shemb__then *then)
{
	struct shemb__jobq *q = shemb__jobq_peek(&then->ctx->steps);
	struct shemb__step_job *next;

	next = q ? (struct shemb__step_job *)shemb__jobq_next(q, THEN_WAIT_NS)
		 : NULL;
	if (!next || next->kind != SHEMB__STEP_LOOKUP)
		return false;
	then->job = next;
	then->n = next->n;
	then->bags = next->bags;
	then->out = (float *const *)next->bufs;
	then->flags = next->flags;
	then->parts = next->parts;
	return true;
}

/* The backward ran the lookup queued after it: that job is over. */
static void end_then(shemb_ctx *ctx, struct shemb__step_job *next,
		     const struct shemb__then *then)
{
	struct shemb__jobq *q = shemb__jobq_peek(&ctx->steps);

	shemb__jobq_take(q, &next->link);
	next->status = then->status;
	memcpy(next->why, then->why, sizeof(next->why));
	shemb__parts_end(next->parts, next->status);
	shemb__jobq_end(q, &next->link);
}

static void run(void *arg, struct shemb__job *job)
{
	struct shemb__step_job *j = (struct shemb__step_job *)job;
	struct shemb__then then = { .fetch = fetch_then, .ctx = arg };
	shemb_ctx *ctx = arg;

	if (j->kind == SHEMB__STEP_COLL) {
		j->status = j->ops->start(j->comm, &j->coll, &j->op, j->why,
					  sizeof(j->why));
		return;
	}
	if (j->kind == SHEMB__STEP_LOOKUP)
		j->status = shemb__lookup_now(ctx, j->n, j->bags,
					      (float *const *)j->bufs,
					      j->flags, j->parts);
	else
		j->status = shemb__backward_now(ctx, j->n, j->bags,
						(const float *const *)j->bufs,
						&then);
	if (j->status)
		snprintf(j->why, sizeof(j->why), "%s",
			 shemb_ctx_last_error(ctx));
	if (j->parts)
		shemb__parts_end(j->parts, j->status);
	if (then.ran)
		end_then(ctx, then.job, &then);
}

static void job_done(void *arg, struct shemb__job *job)
{
	struct shemb__step_job *j = (struct shemb__step_job *)job;

	(void)arg;
	j->done = true;
	if (j->orphan)
		job_free(j);
}

static const struct shemb__jobq_ops step_ops = {
	.thread_name = "shemb-steps",
	.moves_collectives = true,
	.run = run,
	.done = job_done,
};

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
	if (kind == SHEMB__STEP_LOOKUP)
		j->parts = shemb__parts_new(n > 0 ? n : 0);
	if ((n > 0 && bags && !j->bags) || (n > 0 && bufs && !j->bufs) ||
	    (kind == SHEMB__STEP_LOOKUP && !j->parts)) {
		job_free(j);
		return NULL;
	}
	return j;
}

static struct shemb__jobq *queue_of(shemb_ctx *ctx)
{
	return shemb__jobq_get(ctx, &ctx->steps, &step_ops, ctx);
}

int shemb__stepq_submit(shemb_ctx *ctx, int kind, int n,
			const struct shemb_bags *bags, void *const *bufs,
			unsigned flags, struct shemb__step_job **job)
{
	struct shemb__jobq *q;
	struct shemb__step_job *j;

	if (n > 0 && bags && bags->size < sizeof(size_t))
		return shemb__fail(ctx, SHEMB_EINVAL, "bags[0].size %zu is "
				   "not a struct shemb_bags", bags->size);
	if (shemb__stepq_stuck(ctx)) /* it would never run */
		return SHEMB_EPEER;
	q = queue_of(ctx);
	j = q ? job_new(kind, n, bags, bufs, flags) : NULL;
	if (!j)
		return shemb__fail(ctx, SHEMB_ENOMEM, "no memory or thread "
				   "for a step started without waiting");
	*job = j;
	shemb__jobq_push(q, &j->link);
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
	struct shemb__jobq *q;
	struct shemb__step_job *j;

	if (shemb__stepq_stuck(ctx)) /* it would never run */
		return SHEMB_EPEER;
	q = queue_of(ctx);
	j = q ? calloc(1, sizeof(*j)) : NULL;
	if (!j || copy_coll(j, c, ctx->attr.world_size)) {
		job_free(j);
		return shemb__fail(ctx, SHEMB_ENOMEM, "no memory to queue a "
				   "collective");
	}
	j->kind = SHEMB__STEP_COLL;
	j->ops = ops;
	j->comm = comm;
	*job = j;
	shemb__jobq_push(q, &j->link);
	return 0;
}

struct shemb__op *shemb__stepq_op(struct shemb__step_job *job)
{
	return job->op;
}

/*
 * A step that does not end within the timeout may be one whose thread
 * never comes back from the transport (libfabric's shm provider, when a
 * peer died holding one of its locks).  Waits for started steps ask
 * then whether the transport is stuck; a step that merely takes long
 * passes, since the check only asks for the transport's lock.  A thread
 * that only waited on a stuck transport fails and ends once it sees it
 * so: it is given GRACE_MS for that before it is taken for stuck itself.
 * From then on every wait for the steps fails at once.
 */
#define GRACE_MS 1000

static int steps_stuck(shemb_ctx *ctx)
{
	return shemb__fail(ctx, SHEMB_EPEER, "the context's thread of "
			   "started steps never came back from the "
			   "transport (a step cannot end)");
}

/* A wait for busy(arg) outlasted the timeout: SHEMB_EPEER when the
 * steps' thread is stuck, else 0 (busy(arg) may have become false). */
static int check_stuck(shemb_ctx *ctx, struct shemb__jobq *q,
		       bool (*busy)(void *arg), void *arg)
{
	char why[256] = "";

	if (shemb__jobq_wait_for(q, busy, arg, 0)) /* ended meanwhile */
		return 0;
	if (atomic_load(&ctx->steps_stuck))
		return steps_stuck(ctx);
	if (!shemb__comm_stuck(ctx, why, sizeof(why)) ||
	    shemb__jobq_wait_for(q, busy, arg, GRACE_MS))
		return 0;
	atomic_store(&ctx->steps_stuck, true);
	return shemb__fail(ctx, SHEMB_EPEER, "a started step cannot end: %s",
			   why);
}

/* Until busy(arg) is false, or the steps' thread is stuck (at once
 * once known). */
static int wait_steps(shemb_ctx *ctx, bool (*busy)(void *arg), void *arg)
{
	struct shemb__jobq *q = shemb__jobq_peek(&ctx->steps);
	int rc = 0;

	while (q && !rc &&
	       !shemb__jobq_wait_for(q, busy, arg,
				     atomic_load(&ctx->steps_stuck)
					     ? 0
					     : shemb__timeout_ms(ctx)))
		rc = check_stuck(ctx, q, busy, arg);
	return rc;
}

static bool any_pending(void *q)
{
	return shemb__jobq_pending(q) > 0;
}

int shemb__stepq_drain(shemb_ctx *ctx)
{
	struct shemb__jobq *q = shemb__jobq_peek(&ctx->steps);

	return q ? wait_steps(ctx, any_pending, q) : 0;
}

/* Without a queue (stopped: everything ran) a job is done. */
struct done_query {
	struct shemb__step_job *job;
	bool done;
};

static void read_done(void *arg)
{
	struct done_query *d = arg;

	d->done = d->job->done;
}

bool shemb__stepq_done(shemb_ctx *ctx, struct shemb__step_job *job,
		       int *status, const char **why)
{
	struct shemb__jobq *q = shemb__jobq_peek(&ctx->steps);
	struct done_query d = { job, true };

	if (q)
		shemb__jobq_locked(q, read_done, &d);
	/* the job's results are read only once it is seen done */
	*status = d.done ? job->status : 0;
	*why = d.done ? job->why : "";
	return d.done;
}

static bool not_done(void *job)
{
	return !((struct shemb__step_job *)job)->done;
}

int shemb__stepq_wait(shemb_ctx *ctx, struct shemb__step_job *job)
{
	int rc = wait_steps(ctx, not_done, job);

	if (rc)
		return rc;
	return job->status ? shemb__fail(ctx, job->status, "%s", job->why)
			   : 0;
}

static void mark_orphan(void *arg)
{
	struct done_query *d = arg;

	d->done = d->job->done;
	d->job->orphan = !d->done;
}

void shemb__stepq_release(shemb_ctx *ctx, struct shemb__step_job *job)
{
	struct shemb__jobq *q = shemb__jobq_peek(&ctx->steps);
	struct done_query d = { job, true };

	if (!job)
		return;
	if (q)
		shemb__jobq_locked(q, mark_orphan, &d);
	if (d.done)
		job_free(job);
}

struct shemb__parts *shemb__stepq_parts(struct shemb__step_job *job)
{
	return job ? job->parts : NULL;
}

/* Read once the parts say the step ended, which orders it after the
 * write. */
const char *shemb__stepq_why(const struct shemb__step_job *job)
{
	return job->why;
}

bool shemb__stepq_busy(shemb_ctx *ctx)
{
	struct shemb__jobq *q = shemb__jobq_peek(&ctx->steps);

	return q && shemb__jobq_pending(q) > 0;
}

static bool comm_stuck(void *ctx)
{
	char why[256];

	return shemb__comm_stuck(ctx, why, sizeof(why)) != 0;
}

int shemb__stepq_stuck(shemb_ctx *ctx)
{
	return atomic_load(&ctx->steps_stuck) ? steps_stuck(ctx) : 0;
}

int shemb__stepq_check(shemb_ctx *ctx, struct shemb__step_job *job)
{
	struct shemb__jobq *q = shemb__jobq_peek(&ctx->steps);

	return q ? check_stuck(ctx, q, not_done, job) : 0;
}

static bool known_stuck(void *ctx)
{
	(void)ctx;
	return true;
}

/* A thread already found stuck by a wait still gets the grace to end. */
bool shemb__stepq_stop(shemb_ctx *ctx)
{
	bool known = atomic_load(&ctx->steps_stuck);

	if (shemb__jobq_stop_unless(&ctx->steps,
				    known ? known_stuck : comm_stuck, ctx,
				    known ? 0 : shemb__timeout_ms(ctx),
				    GRACE_MS))
		return true;
	atomic_store(&ctx->steps_stuck, true);
	return false;
}
