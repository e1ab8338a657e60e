/*
 * stepq.h - steps started without waiting (shemb_lookup_start,
 * shemb_backward_start): a queue per context, run in call order by a
 * thread of the context, each step completing a request.
 */
#ifndef SHEMB_STEPQ_H
#define SHEMB_STEPQ_H

#include "lib/internal.h"

enum shemb__step_kind {
	SHEMB__STEP_LOOKUP = 1,
	SHEMB__STEP_BACKWARD = 2,
	SHEMB__STEP_COLL = 3      /* a collective started in its turn */
};

struct shemb__step_job;
struct shemb__parts;
struct shemb__coll;
struct shemb__op;
struct shemb__plan;
struct shemb__step;
struct shemb_comm_ops;

/* Queue a step; the caller's arrays (bags and what they point to, out or
 * grad) must stay as they are until it is done.  *job is the handle. */
int shemb__stepq_submit(shemb_ctx *ctx, int kind, int n,
			const struct shemb_bags *bags, void *const *bufs,
			unsigned flags, struct shemb__step_job **job);
/* Queue the start of collective c on a communicator, so that it takes
 * its place among the queued steps' collectives on every rank; c's
 * arrays are copied. */
int shemb__stepq_submit_coll(shemb_ctx *ctx, const struct shemb__coll *c,
			     const struct shemb_comm_ops *ops, void *comm,
			     struct shemb__step_job **job);
/* A done collective job's operation (NULL: none, it failed to start). */
struct shemb__op *shemb__stepq_op(struct shemb__step_job *job);
/* Until nothing is queued or running (a no-op on the queue's thread):
 * the calls that are not steps but must keep their place among them.
 * SHEMB_EPEER (recorded) when the steps' thread is stuck in the
 * transport: the caller returns it at once, without meeting the other
 * ranks, which fail by their own timeout. */
int shemb__stepq_drain(shemb_ctx *ctx);
/* Whether job is done (and then its status and detail). */
bool shemb__stepq_done(shemb_ctx *ctx, struct shemb__step_job *job,
		       int *status, const char **why);
/* Wait for job; its status, the detail recorded on this thread. */
int shemb__stepq_wait(shemb_ctx *ctx, struct shemb__step_job *job);
/* The caller is done with job: freed now, or by the queue when it ends. */
void shemb__stepq_release(shemb_ctx *ctx, struct shemb__step_job *job);
/* Steps queued or running: a blocking call then queues behind them. */
bool shemb__stepq_busy(shemb_ctx *ctx);
/* A started lookup's outputs (NULL for other jobs). */
struct shemb__parts *shemb__stepq_parts(struct shemb__step_job *job);
/* The detail of a failed step (read after it ended). */
const char *shemb__stepq_why(const struct shemb__step_job *job);
/* Context destroy: run what is queued, then stop the thread; false when
 * the thread never comes back from the transport (it may still use the
 * context, which must then be left as it is). */
bool shemb__stepq_stop(shemb_ctx *ctx);
/* A wait for job outlasted the timeout: SHEMB_EPEER (recorded) when the
 * thread of started steps is stuck in the transport, else 0. */
int shemb__stepq_check(shemb_ctx *ctx, struct shemb__step_job *job);
/* SHEMB_EPEER (recorded) once that thread was found stuck, else 0. */
int shemb__stepq_stuck(shemb_ctx *ctx);

/* collectives.c: a request for a step queued now, and the wait and
 * release of a blocking call that had to queue */
int shemb__request_step(shemb_ctx *ctx, int kind, int n,
			const struct shemb_bags *bags, void *const *bufs,
			unsigned flags, shemb_request **req);
int shemb__request_finish(shemb_request *r);

/*
 * The lookup queued right behind a started backward, which the backward
 * may run with itself, relaxed (dist_relax.c): fetch looks for it (as
 * late as the backward can) and fills in its call; then whether it ran,
 * with its status and detail.
 */
struct shemb__then {
	bool (*fetch)(struct shemb__then *then);
	shemb_ctx *ctx;
	void *job;
	int n;
	const struct shemb_bags *bags;
	float *const *out;
	unsigned flags;
	struct shemb__parts *parts;
	bool ran;
	int status;
	char why[512];
};

/* lookup.c, backward.c: the steps themselves, on the calling thread */
/* parts: a started lookup's (which outputs are final), else NULL */
int shemb__lookup_now(shemb_ctx *ctx, int n, const struct shemb_bags *bags,
		      float *const *out, unsigned flags,
		      struct shemb__parts *parts);
/* then: the lookup queued next, or NULL */
int shemb__backward_now(shemb_ctx *ctx, int n, const struct shemb_bags *bags,
			const float *const *grad, struct shemb__then *then);
/* The step as this rank's refusal with status, across the ranks: its
 * part fails there with status and the others fail it too, naming this
 * rank (a step that could not be queued for lack of memory). */
int shemb__lookup_refuse(shemb_ctx *ctx, int n, const struct shemb_bags *bags,
			 float *const *out, unsigned flags, int status);
int shemb__backward_refuse(shemb_ctx *ctx, int n,
			   const struct shemb_bags *bags,
			   const float *const *grad, int status);

/* lookup.c: the lookup a backward runs with itself, on its thread and
 * under its locks: begin takes the call in (0, or its failure with
 * nothing held), plans makes the step plans (*rc: their status; free
 * them with end), end keeps them (rc 0 and planned) or gives them back,
 * and ends the step. */
int shemb__lookup_then_begin(struct shemb__step *st, shemb_ctx *ctx,
			     const struct shemb__then *then);
struct shemb__plan **shemb__lookup_then_plans(struct shemb__step *st,
					      int *rc);
void shemb__lookup_then_end(struct shemb__step *st,
			    struct shemb__plan **plans, int rc);

#endif
