/*
 * collectives.c - shemb_alltoallv, shemb_allgatherv, shemb_allreduce,
 * shemb_barrier and their requests: check the arguments, hand them to the
 * context's communicator, report each request's status once.
 */
#include "lib/internal.h"

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/reduce.h"
#include "lib/coll_staged.h"
#include "lib/comm.h"
#include "lib/held.h"
#include "lib/parts.h"
#include "lib/stepq.h"

struct shemb_request {
	shemb_ctx *ctx;
	const struct shemb_comm_ops *ops; /* the communicator running it */
	void *comm;
	struct shemb__op *op;           /* NULL: a step */
	struct shemb__step_job *job;    /* a step started without waiting */
	struct shemb__staging *stage;   /* device buffers through host
					 * memory (coll_staged.c) */
	const void *sendbuf, *recvbuf;  /* what the communicator moves */
	struct shemb_request *prev, *next;
	bool reported;
};

/* ---- requests ---- */

/*
 * A request that cannot be had fails its collective on every rank, and an
 * allreduce cannot run as a refusal: it is told by control message, which
 * leaves receives posted on the others.  So the context keeps one spare,
 * made beside its first request and refilled by the next one freed, for
 * a start that finds no memory.
 */
static void free_request(shemb_ctx *ctx, shemb_request *r)
{
	pthread_mutex_lock(&ctx->lock);
	shemb__spare_free(&ctx->request_spares, r, 1);
	pthread_mutex_unlock(&ctx->lock);
}

/* One per collective: the allocator is called outside the lock, which
 * then only checks the spare (and makes one again after it was used). */
static shemb_request *alloc_request(shemb_ctx *ctx)
{
	shemb_request *r = calloc(1, sizeof(*r));

	pthread_mutex_lock(&ctx->lock);
	if (!r)
		r = shemb__spare_take(&ctx->request_spares, sizeof(*r));
	shemb__spares_fill(&ctx->request_spares, sizeof(*r), 1);
	pthread_mutex_unlock(&ctx->lock);
	return r;
}

static void link_request(shemb_ctx *ctx, shemb_request *r)
{
	pthread_mutex_lock(&ctx->lock);
	r->next = ctx->requests;
	if (ctx->requests)
		ctx->requests->prev = r;
	ctx->requests = r;
	pthread_mutex_unlock(&ctx->lock);
}

static void unlink_request(shemb_request *r)
{
	shemb_ctx *ctx = r->ctx;

	pthread_mutex_lock(&ctx->lock);
	if (r->prev)
		r->prev->next = r->next;
	else
		ctx->requests = r->next;
	if (r->next)
		r->next->prev = r->prev;
	pthread_mutex_unlock(&ctx->lock);
}

static void release(shemb_request *r)
{
	shemb__stage_keep(r->ctx, r->stage); /* never seen to end */
	if (r->op)
		r->ops->release(r->comm, r->op);
	if (r->job)
		shemb__stepq_release(r->ctx, r->job);
	free_request(r->ctx, r);
}

void shemb__requests_free_all(shemb_ctx *ctx)
{
	while (ctx->requests) {
		shemb_request *r = ctx->requests;

		ctx->requests = r->next;
		release(r);
	}
	shemb__spares_drop(&ctx->request_spares);
}

/* The end of r's collective on device buffers staged through host
 * memory: the received pieces go to the device. */
static int finish_stage(shemb_request *r, int rc, bool held)
{
	struct shemb__staging *st = r->stage;

	r->stage = NULL;
	return st ? shemb__stage_finish(r->ctx, st, rc, held) : rc;
}

/* Whether op, which failed, leaves its buffers to the communicator. */
static bool op_holds(const shemb_request *r, struct shemb__op *op)
{
	const struct shemb_comm_ops *o = r->ops;
	size_t need = offsetof(struct shemb_comm_ops, holds) + sizeof(o->holds);

	if (!op || o->size < need || !o->holds)
		return false;
	return o->holds(r->comm, op);
}

/* r's collective (op) ended with rc: a failure's buffers that the
 * communicator still holds are remembered (held.c), or kept with their
 * staging. */
static int report(shemb_request *r, struct shemb__op *op, int rc,
		  const char *why)
{
	bool held = rc && op_holds(r, op);

	r->reported = true;
	if (rc)
		rc = shemb__fail(r->ctx, rc, "%s", why);
	if (held && !r->stage)
		shemb__held_note(r->ctx, r->sendbuf, r->recvbuf);
	return finish_stage(r, rc, held);
}

/* A queued step, or a collective queued to start in its turn: the job,
 * then the collective's operation. */
static int wait_job(shemb_request *r)
{
	char why[256] = "";
	struct shemb__op *op;
	int rc = shemb__stepq_wait(r->ctx, r->job);

	if (!rc && (op = shemb__stepq_op(r->job))) {
		rc = r->ops->wait(r->comm, op, why, sizeof(why));
		return report(r, op, rc, why);
	}
	r->reported = true;
	/* a job that failed may not be done (its thread stuck in the
	 * transport, with the host copies) */
	return finish_stage(r, rc, rc != 0);
}

SHEMB_API int shemb_wait(shemb_request *r)
{
	char why[256] = "";
	int rc;

	if (!r)
		return shemb__fail(NULL, SHEMB_EINVAL, "request is NULL");
	if (r->reported)
		return shemb__fail(r->ctx, SHEMB_ESTATE, "this request already "
				   "reported its status");
	if (r->job)
		return wait_job(r);
	rc = r->op ? r->ops->wait(r->comm, r->op, why, sizeof(why)) : 0;
	return report(r, r->op, rc, why);
}

SHEMB_API int shemb_test(shemb_request *r, int *done)
{
	char why[256] = "";
	struct shemb__op *op = NULL;
	int rc, d = 0;

	if (!r || !done)
		return shemb__fail(r ? r->ctx : NULL, SHEMB_EINVAL,
				   "request or done is NULL");
	if (r->reported)
		return shemb__fail(r->ctx, SHEMB_ESTATE, "this request already "
				   "reported its status");
	d = 1;
	if (r->job) {
		const char *detail;

		d = shemb__stepq_done(r->ctx, r->job, &rc, &detail);
		snprintf(why, sizeof(why), "%s", detail);
		if (d && !rc && (op = shemb__stepq_op(r->job)))
			rc = r->ops->test(r->comm, op, &d, why, sizeof(why));
	} else if (r->op) {
		op = r->op;
		rc = r->ops->test(r->comm, op, &d, why, sizeof(why));
	} else {
		rc = 0;
	}
	*done = d;
	return d ? report(r, op, rc, why) : 0;
}

/* The outputs of the lookup behind r, with the checks of its arguments. */
static int parts_of(shemb_request *r, int i, struct shemb__parts **out)
{
	struct shemb__parts *p;

	if (!r)
		return shemb__fail(NULL, SHEMB_EINVAL, "req is NULL");
	p = shemb__stepq_parts(r->job);
	if (!p)
		return shemb__fail(r->ctx, SHEMB_EINVAL, "the request is not "
				   "one of shemb_lookup_start()");
	if (i < 0 || i >= shemb__parts_count(p))
		return shemb__fail(r->ctx, SHEMB_EINVAL, "bag set %d is not "
				   "in [0, %d) of the lookup", i,
				   shemb__parts_count(p));
	*out = p;
	return 0;
}

static int part_status(shemb_request *r, int rc)
{
	return rc ? shemb__fail(r->ctx, rc, "%s", shemb__stepq_why(r->job))
		  : 0;
}

/* As shemb_wait(), a wait that outlasts the timeout asks whether the
 * step's thread is stuck in the transport (stepq.c). */
SHEMB_API int shemb_wait_part(shemb_request *r, int i)
{
	struct shemb__parts *p;
	int done = 0, rc = parts_of(r, i, &p);

	if (rc)
		return rc;
	rc = shemb__parts_get(p, i, 0, &done);
	if (done)
		return part_status(r, rc);
	rc = shemb__stepq_stuck(r->ctx); /* once known stuck, at once */
	while (!rc) {
		rc = shemb__parts_get(p, i, shemb__timeout_ms(r->ctx), &done);
		if (done) /* the set's, or the step's status */
			return part_status(r, rc);
		rc = shemb__stepq_check(r->ctx, r->job);
	}
	return rc; /* the steps' thread is stuck, recorded */
}

SHEMB_API int shemb_test_part(shemb_request *r, int i, int *done)
{
	struct shemb__parts *p;
	int rc = parts_of(r, i, &p);

	if (!rc && !done)
		rc = shemb__fail(r->ctx, SHEMB_EINVAL, "done is NULL");
	if (rc)
		return rc;
	return part_status(r, shemb__parts_get(p, i, 0, done));
}

SHEMB_API void shemb_request_free(shemb_request *r)
{
	if (!r)
		return;
	unlink_request(r);
	release(r);
}

/* A request of a collective on comm; with stage, on device buffers
 * staged through host memory (its stage is then the request's, freed
 * if the request cannot be made). */
static shemb_request *new_request(shemb_ctx *ctx,
				   const struct shemb_comm_ops *ops, void *comm,
				   struct shemb__staging *stage)
{
	shemb_request *r = alloc_request(ctx);

	if (!r) {
		shemb__stage_free(ctx, stage); /* nothing writes into it */
		shemb__fail(ctx, SHEMB_ENOMEM, "no memory for a request");
		return NULL;
	}
	r->ctx = ctx;
	r->ops = ops;
	r->comm = comm;
	r->stage = stage;
	return r;
}

/* This rank cannot take part in c (no memory for its request, its place
 * in the queue of started steps or its buffers' host copies): c is
 * refused all the same (lib/comm.h), so
 * that the other ranks, committed to it, fail it too and every rank
 * stays in step; waited for here.  SHEMB_ENOMEM, with the detail why. */
static int refuse_without_memory(shemb_ctx *ctx,
				 const struct shemb_comm_ops *ops, void *comm,
				 const struct shemb__coll *c, const char *why)
{
	struct shemb__coll mine = *c;
	struct shemb__op *op = NULL;
	char err[256];

	mine.refuse = SHEMB_ENOMEM;
	mine.why = why;
	mine.waited_at_once = true; /* no need to wake the progress thread */
	if (!ops->start(comm, &mine, &op, err, sizeof(err))) {
		ops->wait(comm, op, err, sizeof(err));
		ops->release(comm, op);
	}
	return shemb__fail(ctx, SHEMB_ENOMEM, "%s", why);
}

/* Start c on a communicator; with req NULL, wait for it too. */
static int launch_on(shemb_ctx *ctx, const struct shemb_comm_ops *ops,
		     void *comm, const struct shemb__coll *c,
		     struct shemb__staging *stage, shemb_request **req)
{
	shemb_request *r = new_request(ctx, ops, comm, stage);
	struct shemb__coll mine = *c;
	char why[256] = "";
	int rc;

	if (!r)
		return refuse_without_memory(ctx, ops, comm, c,
					     "no memory for a request");
	r->sendbuf = c->sendbuf;
	r->recvbuf = c->recvbuf;
	mine.waited_at_once = !req;
	rc = ops->start(comm, &mine, &r->op, why, sizeof(why));
	if (rc) {
		/* a start that fails leaves nothing posted */
		shemb__stage_free(ctx, stage);
		free_request(ctx, r);
		return shemb__fail(ctx, rc, "%s", why);
	}
	link_request(ctx, r);
	if (req) {
		*req = r;
		return 0;
	}
	return shemb__request_finish(r);
}

/* The failure just recorded in why, then the wait until the steps
 * started before are over (their turn is this call's), as
 * shemb__stepq_drain(). */
static int wait_for_turn(shemb_ctx *ctx, char *why, size_t len)
{
	snprintf(why, len, "%s", shemb_ctx_last_error(ctx));
	return shemb__stepq_drain(ctx);
}

/*
 * A step this rank could not start (no memory for its request, its job
 * or the queue's thread; bags[0].size that is no struct size): on the
 * other ranks it runs in its turn, behind the steps started before it,
 * and waits for this rank's part.  So, as a collective does
 * (refuse_in_turn), the rank waits for those steps, then runs its part
 * as a refusal with status, and every rank fails the step.
 */
static int refuse_step_in_turn(shemb_ctx *ctx, int kind, int n,
			       const struct shemb_bags *bags,
			       void *const *bufs, unsigned flags, int status)
{
	char why[256];
	int rc;

	if (!shemb__distributed(ctx)) /* alone: nobody waits for it */
		return status;
	rc = wait_for_turn(ctx, why, sizeof(why));
	if (rc)
		return rc;
	if (kind == SHEMB__STEP_LOOKUP)
		rc = shemb__lookup_refuse(ctx, n, bags, (float *const *)bufs,
					  flags, status);
	else
		rc = shemb__backward_refuse(ctx, n, bags,
					    (const float *const *)bufs,
					    status);
	/* a peer lost or a timeout says more than the refusal */
	if (rc == SHEMB_EPEER || rc == SHEMB_ETIMEDOUT)
		return rc;
	return shemb__fail(ctx, status, "%s", why);
}

int shemb__request_step(shemb_ctx *ctx, int kind, int n,
			const struct shemb_bags *bags, void *const *bufs,
			unsigned flags, shemb_request **req)
{
	shemb_request *r;
	int rc;

	if (!ctx)
		return shemb__fail(NULL, SHEMB_EINVAL, "ctx is NULL");
	if (!req) { /* across ranks, in turn: the others fail it too */
		shemb__fail(ctx, SHEMB_EINVAL, "req is NULL");
		return refuse_step_in_turn(ctx, kind, n, bags, bufs, flags,
					   SHEMB_EINVAL);
	}
	*req = NULL;
	r = new_request(ctx, NULL, NULL, NULL);
	if (!r)
		return refuse_step_in_turn(ctx, kind, n, bags, bufs, flags,
					   SHEMB_ENOMEM);
	rc = shemb__stepq_submit(ctx, kind, n, bags, bufs, flags, &r->job);
	if (rc) {
		free_request(ctx, r);
		/* SHEMB_EPEER: the queue's thread is stuck, no step runs */
		return rc == SHEMB_EPEER ? rc
					 : refuse_step_in_turn(ctx, kind, n,
							       bags, bufs,
							       flags, rc);
	}
	link_request(ctx, r);
	*req = r;
	return 0;
}

int shemb__request_finish(shemb_request *r)
{
	int rc = shemb_wait(r);

	shemb_request_free(r);
	return rc;
}

int shemb__coll_start(shemb_ctx *ctx, const struct shemb__coll *c,
		      shemb_request **req)
{
	struct shemb__coll mine = *c;

	mine.prio = atomic_load_explicit(&ctx->traffic_prio,
					 memory_order_relaxed);
	return launch_on(ctx, ctx->comm_ops, ctx->comm, &mine, NULL, req);
}

int shemb__coll_run(shemb_ctx *ctx, const struct shemb__coll *c)
{
	return shemb__coll_start(ctx, c, NULL);
}

int shemb__traffic_prio(shemb_ctx *ctx, int prio)
{
	return atomic_exchange_explicit(&ctx->traffic_prio, prio,
					memory_order_relaxed);
}

/*
 * This rank cannot queue c behind the steps started without waiting (no
 * memory for its request, its place in the queue or its buffers' host
 * copies): once those steps are over, c would have been next, so its
 * refusal comes in its turn there.  Sent at once instead, it would meet
 * a collective of those steps on the other ranks; failed here alone, c
 * would keep them waiting for this rank's part, and this rank's next
 * collective would meet it there.  The wait is for every step queued,
 * which are those before c: a context's calls come one at a time.
 */
static int refuse_in_turn(shemb_ctx *ctx, const struct shemb_comm_ops *ops,
			  void *comm, const struct shemb__coll *c)
{
	char why[256];
	int rc = wait_for_turn(ctx, why, sizeof(why));

	return rc ? rc : refuse_without_memory(ctx, ops, comm, c, why);
}

/* Behind steps started without waiting, c starts in its turn (every
 * rank's collectives must start in the same order). */
static int queue_coll(shemb_ctx *ctx, const struct shemb_comm_ops *ops,
		      void *comm, const struct shemb__coll *c,
		      struct shemb__staging *stage, shemb_request **req)
{
	shemb_request *r = new_request(ctx, ops, comm, stage);
	int rc;

	if (!r)
		return refuse_in_turn(ctx, ops, comm, c);
	r->sendbuf = c->sendbuf;
	r->recvbuf = c->recvbuf;
	rc = shemb__stepq_submit_coll(ctx, c, ops, comm, &r->job);
	if (rc) {
		shemb__stage_free(ctx, stage); /* not queued */
		free_request(ctx, r);
		return rc == SHEMB_ENOMEM ? refuse_in_turn(ctx, ops, comm, c)
					  : rc;
	}
	link_request(ctx, r);
	if (req) {
		*req = r;
		return 0;
	}
	return shemb__request_finish(r);
}

/* Start c on the communicator of its buffers' memory: device buffers
 * go through host copies without a device communicator. */
static int launch(shemb_ctx *ctx, const struct shemb__coll *c,
		  shemb_request **req)
{
	int mem = shemb__coll_mem(ctx, c);
	const struct shemb_comm_ops *ops = ctx->comm_ops;
	void *comm = ctx->comm;
	struct shemb__staging *stage = NULL;
	struct shemb__coll host;

	if (mem < 0)
		return SHEMB_EINVAL;
	if (mem == SHEMB_MEM_DEVICE && !ctx->dev_comm_ops) {
		int rc = shemb__stage_begin(ctx, c, &stage, &host);

		if (rc)
			return refuse_in_turn(ctx, ops, comm, c);
		c = &host;
	} else if (mem == SHEMB_MEM_DEVICE) {
		ops = ctx->dev_comm_ops;
		comm = ctx->dev_comm;
	}
	if (shemb__stepq_busy(ctx))
		return queue_coll(ctx, ops, comm, c, stage, req);
	return launch_on(ctx, ops, comm, c, stage, req);
}

/* ---- argument checks ---- */

struct span {
	uintptr_t lo, hi;
};

/* The bytes a buffer's pieces cover, or SHEMB_EINVAL if a piece wraps. */
static int pieces_span(shemb_ctx *ctx, const void *buf, const size_t *counts,
		       const size_t *displs, int n, const char *what,
		       const char *side, struct span *s)
{
	s->lo = UINTPTR_MAX;
	s->hi = 0;
	for (int j = 0; j < n; j++) {
		uintptr_t lo = (uintptr_t)buf + displs[j];

		if (!counts[j])
			continue;
		if (!buf || displs[j] > UINTPTR_MAX - (uintptr_t)buf ||
		    counts[j] > UINTPTR_MAX - lo)
			return shemb__fail(ctx, SHEMB_EINVAL,
					   "%s %s: %zu bytes at offset %zu "
					   "for rank %d are not a valid range "
					   "(NULL buffer or overflow)", what,
					   side, counts[j], displs[j], j);
		s->lo = lo < s->lo ? lo : s->lo;
		s->hi = lo + counts[j] > s->hi ? lo + counts[j] : s->hi;
	}
	return 0;
}

static bool overlap(struct span a, struct span b)
{
	return a.lo < a.hi && b.lo < b.hi && a.lo < b.hi && b.lo < a.hi;
}

/* One side of a collective: a buffer and its n pieces. */
struct pieces {
	const void *buf;
	const size_t *counts, *displs;
	int n;
};

/* Each side's pieces must be valid ranges, and the sides must not overlap
 * unless in_place allows them to be the very same buffer. */
static int check_sides(shemb_ctx *ctx, const char *what, struct pieces snd,
		       struct pieces rcv, bool in_place)
{
	struct span s, r;
	int rc;

	/* the detail is formatted on failure only: these checks run on
	 * every call, whose whole cost is a few microseconds */
	rc = pieces_span(ctx, snd.buf, snd.counts, snd.displs, snd.n, what,
			 "send", &s);
	if (rc)
		return rc;
	rc = pieces_span(ctx, rcv.buf, rcv.counts, rcv.displs, rcv.n, what,
			 "receive", &r);
	if (rc)
		return rc;
	if (in_place && snd.buf == rcv.buf)
		return 0;
	if (overlap(s, r))
		return shemb__fail(ctx, SHEMB_EINVAL, "%s: the send and "
				   "receive regions overlap", what);
	return 0;
}

static int check_ctx(shemb_ctx *ctx)
{
	char why[256];
	int rc;

	if (!ctx)
		return shemb__fail(NULL, SHEMB_EINVAL, "ctx is NULL");
	rc = ctx->comm_ops->async_error(ctx->comm, why, sizeof(why));
	if (!rc && ctx->dev_comm_ops)
		rc = ctx->dev_comm_ops->async_error(ctx->dev_comm, why,
						    sizeof(why));
	return rc ? shemb__fail(ctx, rc, "%s", why) : 0;
}

SHEMB_API int shemb_alltoallv_prio(shemb_ctx *ctx, const void *sendbuf,
				   const size_t *sendcounts,
				   const size_t *sdispls, void *recvbuf,
				   const size_t *recvcounts,
				   const size_t *rdispls, int priority,
				   shemb_request **req)
{
	struct shemb__coll c = { .kind = SHEMB__ALLTOALLV, .prio = priority };
	int rc = check_ctx(ctx), n;

	if (rc)
		return rc;
	n = ctx->attr.world_size;
	if (!sendcounts || !sdispls || !recvcounts || !rdispls)
		return shemb__fail(ctx, SHEMB_EINVAL, "alltoallv: counts and "
				   "displacements must not be NULL");
	rc = check_sides(ctx, "alltoallv",
			 (struct pieces){ sendbuf, sendcounts, sdispls, n },
			 (struct pieces){ recvbuf, recvcounts, rdispls, n },
			 false);
	if (rc)
		return rc;
	c.sendbuf = sendbuf;
	c.recvbuf = recvbuf;
	c.sendcounts = sendcounts;
	c.sdispls = sdispls;
	c.recvcounts = recvcounts;
	c.rdispls = rdispls;
	return launch(ctx, &c, req);
}

SHEMB_API int shemb_allgatherv_prio(shemb_ctx *ctx, const void *sendbuf,
				    size_t sendcount, void *recvbuf,
				    const size_t *recvcounts,
				    const size_t *rdispls, int priority,
				    shemb_request **req)
{
	struct shemb__coll c = { .kind = SHEMB__ALLGATHERV,
				 .prio = priority };
	const size_t zero = 0;
	int rc = check_ctx(ctx);

	if (rc)
		return rc;
	if (!recvcounts || !rdispls)
		return shemb__fail(ctx, SHEMB_EINVAL, "allgatherv: counts and "
				   "displacements must not be NULL");
	rc = check_sides(ctx, "allgatherv",
			 (struct pieces){ sendbuf, &sendcount, &zero, 1 },
			 (struct pieces){ recvbuf, recvcounts, rdispls,
					  ctx->attr.world_size },
			 false);
	if (rc)
		return rc;
	c.sendbuf = sendbuf;
	c.sendcount = sendcount;
	c.recvbuf = recvbuf;
	c.recvcounts = recvcounts;
	c.rdispls = rdispls;
	return launch(ctx, &c, req);
}

SHEMB_API int shemb_allreduce_prio(shemb_ctx *ctx, const void *sendbuf,
				   void *recvbuf, size_t count, int dtype,
				   int op, int priority, shemb_request **req)
{
	struct shemb__coll c = { .kind = SHEMB__ALLREDUCE, .prio = priority };
	size_t es = shemb__reduce_elem_size(dtype);
	const size_t zero = 0;
	size_t bytes;
	int rc = check_ctx(ctx);

	if (rc)
		return rc;
	if (!es || (op != SHEMB_REDUCE_SUM && op != SHEMB_REDUCE_MAX))
		return shemb__fail(ctx, SHEMB_EINVAL, "allreduce: dtype %d or "
				   "op %d is not one this supports", dtype, op);
	if (count > SIZE_MAX / es)
		return shemb__fail(ctx, SHEMB_EINVAL, "allreduce: %zu values "
				   "overflow", count);
	bytes = count * es;
	rc = check_sides(ctx, "allreduce",
			 (struct pieces){ sendbuf, &bytes, &zero, 1 },
			 (struct pieces){ recvbuf, &bytes, &zero, 1 }, true);
	if (rc)
		return rc;
	c.sendbuf = sendbuf;
	c.recvbuf = recvbuf;
	c.count = count;
	c.dtype = dtype;
	c.op = op;
	return launch(ctx, &c, req);
}

SHEMB_API int shemb_alltoallv(shemb_ctx *ctx, const void *sendbuf,
			      const size_t *sendcounts, const size_t *sdispls,
			      void *recvbuf, const size_t *recvcounts,
			      const size_t *rdispls, shemb_request **req)
{
	return shemb_alltoallv_prio(ctx, sendbuf, sendcounts, sdispls, recvbuf,
				    recvcounts, rdispls, SHEMB_PRIO_DENSE, req);
}

SHEMB_API int shemb_allgatherv(shemb_ctx *ctx, const void *sendbuf,
			       size_t sendcount, void *recvbuf,
			       const size_t *recvcounts, const size_t *rdispls,
			       shemb_request **req)
{
	return shemb_allgatherv_prio(ctx, sendbuf, sendcount, recvbuf,
				     recvcounts, rdispls, SHEMB_PRIO_DENSE,
				     req);
}

SHEMB_API int shemb_allreduce(shemb_ctx *ctx, const void *sendbuf,
			      void *recvbuf, size_t count, int dtype, int op,
			      shemb_request **req)
{
	return shemb_allreduce_prio(ctx, sendbuf, recvbuf, count, dtype, op,
				    SHEMB_PRIO_DENSE, req);
}

SHEMB_API int shemb_barrier(shemb_ctx *ctx, shemb_request **req)
{
	struct shemb__coll c = { .kind = SHEMB__BARRIER };
	int rc = check_ctx(ctx);

	return rc ? rc : launch(ctx, &c, req);
}

SHEMB_API int shemb_ctx_async_error(shemb_ctx *ctx)
{
	return check_ctx(ctx);
}
