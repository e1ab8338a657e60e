/*
 * backward.c - shemb_backward: check the gradients and that the bags are
 * those of the planned lookup, then one fused coalesce-and-update per
 * distinct row.  Every table of the call is checked before any changes.
 */
#include "lib/internal.h"
#include "lib/ckpt_io.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/dist.h"
#include "lib/plan.h"
#include "lib/serve.h"
#include "lib/step.h"
#include "lib/stepq.h"

static int differ(shemb_ctx *ctx, const shemb_table *t, int i,
		  const char *what)
{
	return shemb__fail(ctx, SHEMB_EINVAL,
			   "bags[%d] (table '%s'): %s differ from the last "
			   "lookup of this table", i, t->name, what);
}

static int same_shape(shemb_ctx *ctx, const struct shemb__plan *p,
		      const struct shemb__group *grp)
{
	if (p->nsets != grp->nsets)
		return shemb__fail(ctx, SHEMB_EINVAL,
				   "table '%s': the last lookup had %d bag "
				   "sets of it, this backward has %d",
				   grp->table->name, p->nsets, grp->nsets);
	for (int s = 0; s < grp->nsets; s++) {
		const struct shemb_bags *b = grp->sets[s];
		const struct shemb__plan_set *ps = &p->sets[s];

		if (ps->pooling != b->pooling ||
		    ps->weighted != (b->weights != NULL))
			return differ(ctx, grp->table, grp->index[s],
				      "pooling or weights");
		if (ps->nbags != b->nbags || ps->nids != b->nids)
			return differ(ctx, grp->table, grp->index[s],
				      "bag or id counts");
	}
	return 0;
}

/* The plan keeps a copy of the lookup's offsets and ids: compare. */
static int same_contents(shemb_ctx *ctx, const struct shemb__plan *p,
			 const struct shemb__group *grp)
{
	for (int s = 0; s < grp->nsets; s++) {
		const struct shemb_bags *b = grp->sets[s];
		const struct shemb__plan_set *ps = &p->sets[s];

		if (b->nbags > 0 &&
		    memcmp(p->offsets + ps->offsets_off, b->offsets,
			   (size_t)(b->nbags + 1) * sizeof(int64_t)))
			return differ(ctx, grp->table, grp->index[s],
				      "offsets");
		if (b->nids > 0 &&
		    memcmp(p->ids + ps->pos_base, b->ids,
			   (size_t)b->nids * sizeof(int64_t)))
			return differ(ctx, grp->table, grp->index[s], "ids");
	}
	return 0;
}

/* A backward reading its sets in place (direct) pairs with a lookup
 * that planned on the device; a plan on the host sends it the staged
 * way (STAGED).  The plan of a lookup that read device sets in place
 * comes to the host for a backward of host sets. */
#define STAGED 1

static int check_group(shemb_ctx *ctx, const struct shemb__group *grp,
		       bool direct)
{
	struct shemb__plan *p = grp->table->plan;
	int rc;

	if (!p)
		return shemb__fail(ctx, SHEMB_ESTATE,
				   "table '%s': backward without a lookup to "
				   "pair with (none since the last backward, "
				   "or only NO_GRAD lookups)", grp->table->name);
	if (direct && !p->on_device)
		return STAGED;
	rc = same_shape(ctx, p, grp);
	if (!rc && !direct && p->on_device)
		rc = shemb__dplan_to_host(ctx, p);
	if (!rc)
		rc = direct ? shemb__dplan_same_sets(ctx, p, grp)
			    : same_contents(ctx, p, grp);
	return rc;
}

struct shemb__opt shemb__opt_of(const shemb_table *t)
{
	const struct shemb_table_attr *a = &t->attr;
	double step = (double)(t->step + 1);

	return (struct shemb__opt){
		.kind = a->optimizer,
		.wd_mode = a->weight_decay_mode,
		.lr = a->lr,
		.eps = a->eps,
		.beta1 = a->beta1,
		.beta2 = a->beta2,
		.weight_decay = a->weight_decay,
		.bc1 = (float)(1.0 - pow(a->beta1, step)),
		.bc2 = (float)(1.0 - pow(a->beta2, step)),
	};
}

void shemb__bwd_sets(const struct shemb__group *grp,
		     const struct shemb__plan *p, const float *const *grad,
		     struct shemb__bwd_set *sets)
{
	for (int s = 0; s < grp->nsets; s++) {
		const struct shemb__plan_set *ps = &p->sets[s];

		sets[s] = (struct shemb__bwd_set){
			.pooling = ps->pooling,
			.bag_base = ps->bag_base,
			.pos_base = ps->pos_base,
			.nbags = ps->plan_bags,
			.offsets = grp->sets[s]->offsets,
			.weights = grp->sets[s]->weights,
			.grad = grad[grp->index[s]],
			.argmax = ps->pooling == SHEMB_POOL_MAX
					  ? (p->on_device ? p->dev.argmax
							  : p->argmax) +
						    ps->argmax_off
					  : NULL,
		};
	}
}

struct shemb__update_job shemb__plan_job(const struct shemb__plan *p,
					 struct shemb__store *store, int nsets,
					 const struct shemb__bwd_set *sets)
{
	if (p->on_device)
		return (struct shemb__update_job){
			.store = store,
			.nunique = p->nunique,
			.unique = p->dev.unique,
			.seg = p->dev.seg,
			.pos = p->dev.pos,
			.bag_of = p->dev.bag_of,
			.nsets = nsets,
			.sets = sets,
			.in_mem = SHEMB_MEM_DEVICE,
		};
	return (struct shemb__update_job){
		.store = store,
		.nunique = p->nunique,
		.unique = p->unique,
		.seg = p->seg,
		.pos = p->pos,
		.bag_of = p->bag_of,
		.nsets = nsets,
		.sets = sets,
	};
}

static const int64_t *plan_rows(const struct shemb__plan *p)
{
	return p->on_device ? p->dev.unique : p->unique;
}

/* sets: room for the group's sets, allocated before any table changed;
 * v: the plan's rows, acquired */
static int update_group(shemb_ctx *ctx, const struct shemb__group *grp,
			const float *const *grad, struct shemb__bwd_set *sets,
			const struct shemb__rows_view *v)
{
	shemb_table *t = grp->table;
	const struct shemb__plan *p = t->plan;
	struct shemb__update_job job = shemb__plan_job(p, v->store,
						       grp->nsets, sets);

	job.unique = v->at;
	job.opt = shemb__opt_of(t);
	shemb__bwd_sets(grp, p, grad, sets);
	if (!p->on_device) /* else before any update: apply_all */
		shemb__ckpt_touch(t, p->nunique, p->unique); /* local */
	return ctx->mem->apply_updates(ctx->be, &job);
}

/* The plan is used up: keep its buffers as the spare. */
static void consume_plan(shemb_table *t)
{
	struct shemb__plan *drop;

	pthread_mutex_lock(&t->plan_lock);
	drop = t->spare;
	t->spare = t->plan;
	t->plan = NULL;
	pthread_mutex_unlock(&t->plan_lock);
	shemb__plan_free(t->ctx, drop);
}

static void step_done(const struct shemb__group *grp)
{
	grp->table->step++;
	SHEMB__STAT_ADD(grp->table, backwards, grp->nsets);
	consume_plan(grp->table);
}

void shemb__backward_done(const struct shemb__step *st)
{
	for (int g = 0; g < st->ngroups; g++)
		step_done(&st->groups[g]);
}

static int update_all(shemb_ctx *ctx, struct shemb__step *st,
		      const float *const *grad, struct shemb__bwd_set *sets,
		      const struct shemb__rows_view *views)
{
	for (int g = 0; g < st->ngroups; g++) {
		const struct shemb__group *grp = &st->groups[g];
		shemb_table *t = grp->table;
		uint64_t t0 = shemb__now_ns();
		int rc = update_group(ctx, grp, grad, sets, &views[g]);

		if (rc)
			return shemb__fail(ctx, rc, "table '%s': update failed "
					   "in the backend", t->name);
		SHEMB__STAT_ADD(t, rows_updated, t->plan->nunique);
		SHEMB__STAT_ADD(t, update_ns, shemb__now_ns() - t0);
		step_done(grp);
		sets += grp->nsets;
	}
	return 0;
}

/* Every table's rows are acquired (loaded into device tiers) before the
 * first changes, so a tier that fails changes no table. */
static int apply_all(shemb_ctx *ctx, struct shemb__step *st,
		     const float *const *grad, struct shemb__bwd_set *sets)
{
	struct shemb__rows_view *views = calloc((size_t)st->ngroups + 1,
						sizeof(*views));
	int rc = views ? 0 : shemb__fail(ctx, SHEMB_ENOMEM, "no memory");

	for (int g = 0; !rc && g < st->ngroups; g++) {
		shemb_table *t = st->groups[g].table;

		rc = shemb__rows_acquire(t, t->plan->nunique,
					 plan_rows(t->plan), true,
					 SHEMB__ROWS_WRITE, &views[g]);
		/* a device plan's rows come to the host for the checkpoint's
		 * record, which may fail: before the first update */
		if (!rc && t->plan->on_device)
			rc = shemb__dplan_touch(t, t->plan);
	}
	bool updated = !rc;

	if (updated)
		rc = update_all(ctx, st, grad, sets, views);
	for (int g = 0; views && g < st->ngroups; g++) {
		if (!rc)
			shemb__tier_plan_end(st->groups[g].table);
		if (!updated) /* a tier failed before any update */
			shemb__rows_unwritten(&views[g]);
		shemb__rows_release(st->groups[g].table, &views[g]);
	}
	free(views);
	return rc;
}

/* Across ranks: every rank meets, even when its own checks failed. */
static int apply_dist(struct shemb__step *st, const float *const *grad,
		      int status, struct shemb__then *then)
{
	int was = shemb__traffic_prio(st->ctx, SHEMB_PRIO_GRAD);
	int rc = then ? shemb__dist_relaxed(st, grad, status, then)
		      : shemb__dist_backward(st, grad, status);

	shemb__traffic_prio(st->ctx, was);
	if (!rc && !(then && then->ran))
		shemb__backward_done(st);
	return rc;
}

static int check_grads(struct shemb__step *st, const float *const *grad)
{
	if (st->n > 0 && !grad)
		return shemb__fail(st->ctx, SHEMB_EINVAL, "grad is NULL");
	for (int i = 0; i < st->n; i++)
		if (shemb__check_grad(st->ctx, &st->bags[i], i, grad[i]))
			return SHEMB_EINVAL;
	return 0;
}

/* The sets of the call, checked, and their gradients unless direct
 * (read in place: backward_run checks those once paired); device sets
 * and gradients through host copies. */
static int begin_backward(struct shemb__step *st, shemb_ctx *ctx, int n,
			  const struct shemb_bags *bags,
			  const float *const **grad, bool direct)
{
	const float **hgrad;
	int rc;

	if (direct) /* gradients checked once paired (backward_run) */
		return shemb__step_begin_direct(st, ctx, n, bags);
	rc = shemb__step_begin(st, ctx, n, bags);
	if (!rc)
		rc = shemb__step_host_grads(st, *grad, &hgrad);
	if (!rc)
		*grad = hgrad;
	if (!rc)
		rc = check_grads(st, *grad);
	return rc;
}

/* status: this rank's part refused with it (shemb__backward_refuse) */
static int backward_run(shemb_ctx *ctx, int n, const struct shemb_bags *bags,
			const float *const *grad, struct shemb__then *then,
			bool direct, int status)
{
	struct shemb__bwd_set *sets;
	struct shemb__step st;
	uint64_t t0 = shemb__now_ns();
	int rc;

	rc = begin_backward(&st, ctx, n, bags, &grad, direct);
	if (!rc)
		rc = status;
	sets = calloc((size_t)n + 1, sizeof(*sets));
	if (!rc && !sets)
		rc = shemb__fail(ctx, SHEMB_ENOMEM, "no memory for %d sets", n);
	if (rc && !shemb__distributed(ctx)) {
		free(sets);
		shemb__step_end(&st);
		return rc;
	}
	for (int g = 0; !rc && g < st.ngroups; g++)
		if (shemb__read_only(st.groups[g].table))
			rc = shemb__fail(ctx, SHEMB_EPERM, "backward: table "
					 "'%s' is read_only",
					 st.groups[g].table->name);
	shemb__step_lock(&st, true);
	for (int g = 0; !rc && g < st.ngroups; g++)
		rc = check_group(ctx, &st.groups[g], direct);
	/* on the device, and only once the plans said the sets are read in
	 * place: a backward sent the staged way checks them there */
	if (!rc && direct)
		rc = shemb__dplan_check_grads(&st, grad);
	for (int g = 0; g < st.ngroups; g++)
		SHEMB__STAT_ADD(st.groups[g].table, validate_ns,
				(shemb__now_ns() - t0) / (uint64_t)st.ngroups);
	if (shemb__distributed(ctx))
		rc = apply_dist(&st, grad, rc, then);
	else if (!rc)
		rc = apply_all(ctx, &st, grad, sets);
	shemb__step_unlock(&st);
	shemb__step_end(&st);
	free(sets);
	return rc;
}

int shemb__backward_now(shemb_ctx *ctx, int n, const struct shemb_bags *bags,
			const float *const *grad, struct shemb__then *then)
{
	int rc;

	if (!ctx)
		return shemb__fail(NULL, SHEMB_EINVAL, "ctx is NULL");
	if (!shemb__device_direct(ctx, n, bags, true))
		return backward_run(ctx, n, bags, grad, then, false, 0);
	rc = backward_run(ctx, n, bags, grad, then, true, 0);
	return rc == STAGED ? backward_run(ctx, n, bags, grad, then, false, 0)
			    : rc;
}

int shemb__backward_refuse(shemb_ctx *ctx, int n,
			   const struct shemb_bags *bags,
			   const float *const *grad, int status)
{
	return backward_run(ctx, n, bags, grad, NULL, false, status);
}

SHEMB_API int shemb_backward(shemb_ctx *ctx, int n,
			     const struct shemb_bags *bags,
			     const float *const *grad)
{
	shemb_request *req;
	int rc;

	if (!ctx || !shemb__stepq_busy(ctx))
		return shemb__backward_now(ctx, n, bags, grad, NULL);
	rc = shemb_backward_start(ctx, n, bags, grad, &req);
	return rc ? rc : shemb__request_finish(req);
}

SHEMB_API int shemb_backward_start(shemb_ctx *ctx, int n,
				   const struct shemb_bags *bags,
				   const float *const *grad,
				   shemb_request **req)
{
	return shemb__request_step(ctx, SHEMB__STEP_BACKWARD, n, bags,
				   (void *const *)grad, 0, req);
}
