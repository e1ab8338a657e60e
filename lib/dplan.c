/*
 * dplan.c - step plans made and kept on the device.
 *
 * A training lookup of bag sets in device memory, on one rank, of tables
 * whose rows all live in device memory (lookup.c's device_direct) plans
 * its sets where they are: the backend sorts the ids on the device
 * (plan_device), and the plan keeps device copies of the sets' ids and
 * offsets.  Copying every id to the host, sorting there and sending the
 * plan back would cost more than the lookup itself.  The backward of
 * such a lookup checks its sets against those copies and its gradients
 * on the device, then updates from the plan's device arrays.
 */
#include "lib/internal.h"

#include <math.h>
#include <stdlib.h>

#include "lib/ckpt_io.h"
#include "lib/plan.h"
#include "lib/step.h"

#define DEV_ALIGN 256

bool shemb__dplan_possible(const shemb_ctx *ctx)
{
	const struct shemb_mem_ops *m = ctx->mem;

	return m->device_alloc && m->device_free && m->plan_device &&
	       m->device_differ && m->device_finite && m->transfer;
}

void shemb__dplan_release(shemb_ctx *ctx, struct shemb__plan *p)
{
	if (p->dev_block)
		ctx->mem->device_free(ctx->be, p->dev_block);
	p->dev_block = NULL;
	p->dev_cap = 0;
}

static size_t carve(size_t *at, size_t bytes)
{
	size_t o = *at;

	*at += (bytes + DEV_ALIGN - 1) & ~(size_t)(DEV_ALIGN - 1);
	return o;
}

/* The plan's device arrays in one block, grown when too small. */
static int reserve_device(shemb_ctx *ctx, struct shemb__plan *p)
{
	size_t n = (size_t)p->nids, at = 0, o[7];
	char *b;

	o[0] = carve(&at, n * sizeof(int64_t));
	o[1] = carve(&at, (size_t)p->noffsets * sizeof(int64_t));
	o[2] = carve(&at, n * sizeof(int64_t));
	o[3] = carve(&at, (n + 1) * sizeof(int32_t));
	o[4] = carve(&at, n * sizeof(int32_t));
	o[5] = carve(&at, n * sizeof(int32_t));
	o[6] = carve(&at, (size_t)p->nargmax * sizeof(int32_t));
	if (at > p->dev_cap) {
		shemb__dplan_release(ctx, p);
		at += at / 4;
		p->dev_block = ctx->mem->device_alloc(ctx->be, at);
		if (!p->dev_block)
			return SHEMB_ENOMEM;
		p->dev_cap = at;
	}
	b = p->dev_block;
	p->dev.ids = (int64_t *)(void *)(b + o[0]);
	p->dev.offsets = (int64_t *)(void *)(b + o[1]);
	p->dev.unique = (int64_t *)(void *)(b + o[2]);
	p->dev.seg = (int32_t *)(void *)(b + o[3]);
	p->dev.pos = (int32_t *)(void *)(b + o[4]);
	p->dev.bag_of = (int32_t *)(void *)(b + o[5]);
	p->dev.argmax = (int32_t *)(void *)(b + o[6]);
	return 0;
}

/* The sets' ids (in plan order) and offsets, copied device to device. */
static int keep_arrays(shemb_ctx *ctx, struct shemb__plan *p,
		       const struct shemb_bags *const *sets)
{
	int rc = 0;

	for (int i = 0; !rc && i < p->nsets; i++) {
		const struct shemb_bags *b = sets[i];
		const struct shemb__plan_set *s = &p->sets[i];

		int64_t *ids = p->dev.ids + s->pos_base;
		int64_t *offsets = p->dev.offsets + s->offsets_off;

		if (b->nids > 0)
			rc = ctx->mem->transfer(ctx->be, ids, b->ids,
						(size_t)b->nids *
							sizeof(int64_t));
		if (!rc && b->nbags > 0)
			rc = ctx->mem->transfer(ctx->be, offsets, b->offsets,
						(size_t)(b->nbags + 1) *
							sizeof(int64_t));
	}
	return rc;
}

/* The backend's view of the sets: where their bags and positions start,
 * and their offsets (the plan's copies). */
static void job_sets(const struct shemb__plan *p, struct shemb__bwd_set *js)
{
	for (int i = 0; i < p->nsets; i++) {
		const struct shemb__plan_set *s = &p->sets[i];

		js[i] = (struct shemb__bwd_set){
			.pooling = s->pooling,
			.bag_base = s->bag_base,
			.pos_base = s->pos_base,
			.nbags = s->plan_bags,
			.offsets = s->nbags > 0
					   ? p->dev.offsets + s->offsets_off
					   : NULL,
		};
	}
}

static int plan_on_device(shemb_table *t, struct shemb__plan *p)
{
	shemb_ctx *ctx = t->ctx;
	struct shemb__bwd_set *js = calloc((size_t)p->nsets + 1, sizeof(*js));
	struct shemb__dplan_job job = {
		.nids = p->nids,
		.rows = t->attr.rows,
		.ids = p->dev.ids,
		.nsets = p->nsets,
		.sets = js,
		.unique = p->dev.unique,
		.seg = p->dev.seg,
		.pos = p->dev.pos,
		.bag_of = p->dev.bag_of,
	};
	int rc;

	if (!js)
		return SHEMB_ENOMEM;
	job_sets(p, js);
	rc = ctx->mem->plan_device(ctx->be, &job, &p->nunique);
	free(js);
	return rc;
}

int shemb__dplan_build(shemb_table *t, int nsets,
		       const struct shemb_bags *const *sets,
		       struct shemb__plan **planp)
{
	shemb_ctx *ctx = t->ctx;
	struct shemb__plan *p = *planp;
	int rc;

	if (!p) {
		p = calloc(1, sizeof(*p));
		if (!p)
			return SHEMB_ENOMEM;
		*planp = p;
	}
	if (shemb__plan_reserve_sets(p, nsets))
		return SHEMB_ENOMEM;
	shemb__plan_describe(p, t->attr.dim, nsets, sets);
	p->on_device = true;
	p->nunique = 0;
	rc = reserve_device(ctx, p);
	if (!rc)
		rc = keep_arrays(ctx, p, sets);
	if (!rc)
		rc = plan_on_device(t, p);
	return rc;
}

/* The backward's device sets against the ones the plan was made of. */
static int device_differ(shemb_ctx *ctx, const void *a, const void *b,
			 size_t n, int *differ)
{
	int rc = ctx->mem->device_differ(ctx->be, a, b, n, differ);

	if (rc)
		return shemb__fail(ctx, rc, "comparing device bag sets with "
				   "the lookup's failed: %s",
				   ctx->mem->describe(ctx->be));
	return 0;
}

int shemb__dplan_same_sets(shemb_ctx *ctx, const struct shemb__plan *p,
			   const struct shemb__group *grp)
{
	for (int s = 0; s < grp->nsets; s++) {
		const struct shemb_bags *b = grp->sets[s];
		const struct shemb__plan_set *ps = &p->sets[s];
		const int64_t *offsets = p->dev.offsets + ps->offsets_off;
		int diff = 0, rc = 0;

		if (b->nbags > 0)
			rc = device_differ(ctx, offsets, b->offsets,
					   (size_t)(b->nbags + 1) *
						   sizeof(int64_t),
					   &diff);
		if (!rc && diff)
			return shemb__fail(ctx, SHEMB_EINVAL,
					   "bags[%d] (table '%s'): offsets "
					   "differ from the last lookup of "
					   "this table", grp->index[s],
					   grp->table->name);
		if (!rc && b->nids > 0)
			rc = device_differ(ctx, p->dev.ids + ps->pos_base,
					   b->ids,
					   (size_t)b->nids * sizeof(int64_t),
					   &diff);
		if (!rc && diff)
			return shemb__fail(ctx, SHEMB_EINVAL,
					   "bags[%d] (table '%s'): ids differ "
					   "from the last lookup of this table",
					   grp->index[s], grp->table->name);
		if (rc)
			return rc;
	}
	return 0;
}

/* The first of n device floats at p that is not finite (*bad, -1 when
 * none), and its kind. */
static int find_non_finite(shemb_ctx *ctx, const float *p, int64_t n,
			   int64_t *bad, const char **kind)
{
	float v = NAN;
	int rc = ctx->mem->device_finite(ctx->be, p, n, bad);

	if (rc)
		return shemb__fail(ctx, rc, "checking device input failed: "
				   "%s", ctx->mem->describe(ctx->be));
	if (*bad >= 0 && ctx->mem->transfer(ctx->be, &v, p + *bad, sizeof(v)))
		v = NAN;
	*kind = isnan(v) ? "NaN" : "infinite";
	return 0;
}

/* Set i's weights (the lookup's were checked, these are not compared)
 * and gradient, in device memory: the context's, and finite. */
static int check_device_set(shemb_ctx *ctx, const struct shemb_bags *b,
			    int i, const float *grad)
{
	int dim = b->table->attr.dim;
	const char *kind;
	int64_t bad = -1;
	int rc = 0;

	if (shemb__check_rows_out(ctx, b, i, grad, "grad") ||
	    shemb__check_device_ptr(ctx, grad, i, "its gradient"))
		return SHEMB_EINVAL;
	if (b->weights && b->nids > 0)
		rc = find_non_finite(ctx, b->weights, b->nids, &bad, &kind);
	if (!rc && bad >= 0)
		return shemb__fail(ctx, SHEMB_EINVAL, "bags[%d]: weights[%lld] "
				   "is %s", i, (long long)bad, kind);
	if (!rc && grad)
		rc = find_non_finite(ctx, grad, shemb__set_rows(b) * dim,
				     &bad, &kind);
	if (!rc && bad >= 0)
		return shemb__fail(ctx, SHEMB_EINVAL,
				   "grad[%d] (table '%s') row %lld column %d: "
				   "value is %s", i, b->table->name,
				   (long long)(bad / dim), (int)(bad % dim),
				   kind);
	return rc;
}

int shemb__dplan_check_grads(struct shemb__step *st, const float *const *grad)
{
	if (st->n > 0 && !grad)
		return shemb__fail(st->ctx, SHEMB_EINVAL, "grad is NULL");
	for (int i = 0; i < st->n; i++) {
		int rc = check_device_set(st->ctx, &st->bags[i], i, grad[i]);

		if (rc)
			return rc;
	}
	return 0;
}

/* An incremental checkpoint follows the rows changed: it needs the
 * plan's distinct ids on the host. */
int shemb__dplan_touch(shemb_table *t, const struct shemb__plan *p)
{
	shemb_ctx *ctx = t->ctx;
	int64_t *ids;
	int rc;

	if (!t->ckpt_dirty || p->nunique == 0)
		return 0;
	ids = malloc((size_t)p->nunique * sizeof(*ids));
	if (!ids)
		return shemb__fail(ctx, SHEMB_ENOMEM, "no memory");
	rc = ctx->mem->transfer(ctx->be, ids, p->dev.unique,
				(size_t)p->nunique * sizeof(*ids));
	if (rc)
		rc = shemb__fail(ctx, rc, "reading the plan's rows from the "
				 "device failed: %s",
				 ctx->mem->describe(ctx->be));
	else
		shemb__ckpt_touch(t, p->nunique, ids);
	free(ids);
	return rc;
}

/* A backward may give back from host memory the sets a lookup read from
 * the device: its plan comes to the host, once. */
static int copy_plan_down(shemb_ctx *ctx, struct shemb__plan *p)
{
	const struct {
		void *dst;
		const void *src;
		size_t n;
	} mv[] = {
		{ p->ids, p->dev.ids, (size_t)p->nids * 8 },
		{ p->offsets, p->dev.offsets, (size_t)p->noffsets * 8 },
		{ p->unique, p->dev.unique, (size_t)p->nunique * 8 },
		{ p->seg, p->dev.seg, ((size_t)p->nunique + 1) * 4 },
		{ p->pos, p->dev.pos, (size_t)p->nids * 4 },
		{ p->bag_of, p->dev.bag_of, (size_t)p->nids * 4 },
		{ p->argmax, p->dev.argmax, (size_t)p->nargmax * 4 },
	};

	for (size_t i = 0; i < sizeof(mv) / sizeof(mv[0]); i++) {
		int rc = mv[i].n ? ctx->mem->transfer(ctx->be, mv[i].dst,
						      mv[i].src, mv[i].n)
				 : 0;

		if (rc)
			return shemb__fail(ctx, rc, "copying a step plan from "
					   "the device failed: %s",
					   ctx->mem->describe(ctx->be));
	}
	return 0;
}

int shemb__dplan_to_host(shemb_ctx *ctx, struct shemb__plan *p)
{
	int rc = shemb__plan_reserve(ctx, p); /* the host arrays, first */

	if (rc)
		return shemb__fail(ctx, rc, "no memory for a step plan");
	rc = copy_plan_down(ctx, p);
	if (!rc)
		p->on_device = false;
	return rc;
}
