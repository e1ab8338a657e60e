/*
 * step.c - copy, check and group the bag sets of a call by table.
 */
#include "lib/step.h"
#include "lib/hostbuf.h"
#include "lib/plan.h"
#include "lib/serve.h"

#include <stdlib.h>
#include <string.h>

/* The size of the first released struct shemb_bags. */
#define BAGS_V1_SIZE (offsetof(struct shemb_bags, weights) + sizeof(void *))

static int copy_sets(struct shemb__step *st, const struct shemb_bags *bags)
{
	size_t stride = bags->size;

	if (stride < BAGS_V1_SIZE)
		return shemb__fail(st->ctx, SHEMB_EINVAL,
				   "bags[0].size %zu is not a struct "
				   "shemb_bags (use shemb_bags_init)",
				   stride);
	for (int i = 0; i < st->n; i++) {
		const struct shemb_bags *src =
			(const void *)((const char *)bags + (size_t)i * stride);

		shemb_bags_init(&st->bags[i]);
		if (src->size != stride ||
		    shemb__copy_sized(&st->bags[i], sizeof(st->bags[i]), src,
				      BAGS_V1_SIZE))
			return shemb__fail(st->ctx, SHEMB_EINVAL,
					   "bags[%d].size %zu differs from "
					   "bags[0].size or sets fields this "
					   "library lacks",
					   i, src->size);
	}
	return 0;
}

static int by_serial(const void *a, const void *b)
{
	const struct shemb__group *x = a, *y = b;

	return (x->table->serial > y->table->serial) -
	       (x->table->serial < y->table->serial);
}

static struct shemb__group *find_group(struct shemb__step *st,
				       const shemb_table *t)
{
	for (int g = 0; g < st->ngroups; g++)
		if (st->groups[g].table == t)
			return &st->groups[g];
	return NULL;
}

/* Sets of one table stay in call order within their group. */
static void group_sets(struct shemb__step *st)
{
	int used = 0;

	for (int i = 0; i < st->n; i++) {
		if (find_group(st, st->bags[i].table))
			continue;
		st->groups[st->ngroups].table = st->bags[i].table;
		st->groups[st->ngroups].nsets = 0;
		st->ngroups++;
	}
	qsort(st->groups, (size_t)st->ngroups, sizeof(*st->groups), by_serial);
	for (int g = 0; g < st->ngroups; g++) {
		struct shemb__group *grp = &st->groups[g];

		grp->sets = st->set_ptrs + used;
		grp->index = st->set_index + used;
		for (int i = 0; i < st->n; i++) {
			if (st->bags[i].table != grp->table)
				continue;
			grp->sets[grp->nsets] = &st->bags[i];
			grp->index[grp->nsets++] = i;
		}
		used += grp->nsets;
	}
}

static int check_totals(struct shemb__step *st)
{
	for (int g = 0; g < st->ngroups; g++) {
		const struct shemb__group *grp = &st->groups[g];
		int64_t ids = 0, bags = 0;

		for (int s = 0; s < grp->nsets; s++) {
			ids += grp->sets[s]->nids;
			bags += shemb__set_rows(grp->sets[s]);
		}
		int64_t most = shemb__plan_max_ids(grp->table->attr.rows);

		if (ids > most || bags > INT32_MAX)
			return shemb__fail(st->ctx, SHEMB_EINVAL,
					   "table '%s': %lld ids and %lld bags "
					   "in one call; at most %lld ids and "
					   "2^31 - 1 bags (split the batch)",
					   grp->table->name, (long long)ids,
					   (long long)bags, (long long)most);
	}
	return 0;
}

/* A device set's buffers must be the context's device memory: a
 * kernel reading host memory would fault and take the device context
 * down with it. */
int shemb__check_device_ptr(shemb_ctx *ctx, const void *p, int i,
			    const char *what)
{
	if (!p || ctx->mem->mem_of(ctx->be, p) == SHEMB_MEM_DEVICE)
		return 0;
	return shemb__fail(ctx, SHEMB_EINVAL, "bags[%d]: mem is DEVICE but "
			   "%s is not memory of the context's device", i,
			   what);
}

static int check_mem(struct shemb__step *st, const struct shemb_bags *b,
		     int i)
{
	shemb_ctx *ctx = st->ctx;

	if (b->mem == SHEMB_MEM_HOST)
		return 0;
	if (b->mem != SHEMB_MEM_DEVICE)
		return shemb__fail(ctx, SHEMB_EINVAL, "bags[%d]: mem %d is not "
				   "an enum shemb_mem value", i, b->mem);
	if (!ctx->mem->transfer)
		return shemb__fail(ctx, SHEMB_EINVAL, "bags[%d]: mem is "
				   "DEVICE but the context runs on the CPU",
				   i);
	if (shemb__check_device_ptr(ctx, b->offsets, i, "offsets") ||
	    shemb__check_device_ptr(ctx, b->ids, i, "ids") ||
	    shemb__check_device_ptr(ctx, b->weights, i, "weights"))
		return SHEMB_EINVAL;
	return 0;
}

/* b, freed at step_end; the list is made with the step's first device
 * set (a step of host sets has none): at most three arrays per set, then
 * in a backward the gradients' array and one gradient per set, or in a
 * lookup across ranks the outputs' array and one output per set. */
static int keep_buf(struct shemb__step *st, struct shemb__hostbuf *b)
{
	if (!st->staged)
		st->staged = calloc(4 * (size_t)st->n + 1,
				    sizeof(*st->staged));
	if (!st->staged || st->nstaged == 4 * st->n + 1) {
		shemb__host_buf_free(st->ctx, b);
		return shemb__fail(st->ctx, st->staged ? SHEMB_EINTERNAL
						       : SHEMB_ENOMEM,
				   st->staged ? "a step kept more host copies "
						"than it can"
					      : "no memory");
	}
	st->staged[st->nstaged++] = *b;
	return 0;
}

/* p from malloc */
static int keep(struct shemb__step *st, void *p)
{
	struct shemb__hostbuf b = { .p = p };

	return keep_buf(st, &b);
}

/* n bytes of host memory for device copies, kept until step_end */
static void *host_copy(struct shemb__step *st, size_t n)
{
	struct shemb__hostbuf b;

	if (shemb__host_buf(st->ctx, n, &b)) {
		shemb__fail(st->ctx, SHEMB_ENOMEM, "no memory for %zu bytes "
			    "of host copies of device buffers", n);
		return NULL;
	}
	return keep_buf(st, &b) ? NULL : b.p;
}

/* A host copy of n bytes of device memory at src, kept until step_end;
 * *dst stays NULL when src is. */
static int stage(struct shemb__step *st, const void *src, size_t n,
		 const void **dst)
{
	shemb_ctx *ctx = st->ctx;
	void *p;
	int rc;

	if (!src)
		return 0;
	p = host_copy(st, n);
	if (!p)
		return SHEMB_ENOMEM;
	rc = ctx->mem->transfer(ctx->be, p, src, n);
	if (rc)
		return shemb__fail(ctx, rc, "copying %zu bytes of device "
				   "input failed: %s", n,
				   ctx->mem->describe(ctx->be));
	*dst = p;
	return 0;
}

/* Device arrays of set i are read through host copies: checks, plans
 * and tiers work on the host; the kernels still write the set's output
 * to device memory (the pool job's out_mem). */
static int stage_set(struct shemb__step *st, struct shemb_bags *b, int i)
{
	const void *p;
	int rc = check_mem(st, b, i);

	if (rc || b->mem == SHEMB_MEM_HOST)
		return rc;
	st->device_sets = true;
	if (b->nbags < 0 || b->nids < 0 || b->nbags > INT32_MAX ||
	    b->nids > INT32_MAX)
		return 0; /* refused by check_set before any array is read */
	p = NULL;
	rc = stage(st, b->offsets, ((size_t)b->nbags + 1) * sizeof(int64_t),
		   &p);
	b->offsets = p;
	p = NULL;
	if (!rc)
		rc = stage(st, b->ids, (size_t)b->nids * sizeof(int64_t), &p);
	b->ids = p;
	p = NULL;
	if (!rc)
		rc = stage(st, b->weights, (size_t)b->nids * sizeof(float), &p);
	b->weights = p;
	return rc;
}

/* Bytes of set i's output (or gradient). */
static size_t set_out_bytes(const struct shemb__step *st, int i)
{
	const struct shemb_bags *b = &st->bags[i];

	return (size_t)shemb__set_rows(b) * (size_t)b->table->attr.dim *
	       sizeof(float);
}

/* An array of a pointer per set, kept until step_end; NULL without
 * memory. */
static void *kept_array(struct shemb__step *st)
{
	void *a = calloc((size_t)st->n, sizeof(void *));

	if (!a || keep(st, a)) { /* keep frees it */
		shemb__fail(st->ctx, SHEMB_ENOMEM, "no memory");
		return NULL;
	}
	return a;
}

int shemb__step_host_grads(struct shemb__step *st, const float *const *grad,
			   const float ***out)
{
	*out = (const float **)grad;
	if (!grad || !st->device_sets)
		return 0;
	*out = kept_array(st);
	if (!*out)
		return SHEMB_ENOMEM;
	for (int i = 0; i < st->n; i++) {
		const struct shemb_bags *b = &st->bags[i];
		const void *p = grad[i];
		int rc;

		if (b->mem == SHEMB_MEM_DEVICE && grad[i])
			rc = shemb__check_device_ptr(st->ctx, grad[i], i,
						     "its gradient")
				     ? SHEMB_EINVAL
				     : stage(st, grad[i],
					     set_out_bytes(st, i), &p);
		else
			rc = 0;
		if (rc)
			return rc;
		(*out)[i] = p;
	}
	return 0;
}

int shemb__step_host_outs(struct shemb__step *st, float *const *out,
			  float ***hout)
{
	*hout = (float **)out;
	if (!out || !st->device_sets)
		return 0;
	*hout = kept_array(st);
	if (!*hout)
		return SHEMB_ENOMEM;
	for (int i = 0; i < st->n; i++) {
		struct shemb_bags *b = &st->bags[i];
		size_t n = set_out_bytes(st, i);

		(*hout)[i] = out[i];
		if (b->mem != SHEMB_MEM_DEVICE)
			continue;
		(*hout)[i] = host_copy(st, n);
		if (!(*hout)[i])
			return SHEMB_ENOMEM;
		b->mem = SHEMB_MEM_HOST; /* from here the set is host memory */
		st->outs_staged = true;
	}
	return 0;
}

int shemb__step_deliver_outs(struct shemb__step *st, float *const *out,
			     float *const *hout)
{
	shemb_ctx *ctx = st->ctx;

	for (int i = 0; hout != out && i < st->n; i++) {
		size_t n = set_out_bytes(st, i);
		int rc;

		if (hout[i] == out[i] || n == 0)
			continue;
		rc = ctx->mem->transfer(ctx->be, out[i], hout[i], n);
		if (rc)
			return shemb__fail(ctx, rc, "copying %zu bytes of "
					   "output to the device failed: %s",
					   n, ctx->mem->describe(ctx->be));
	}
	return 0;
}

static int begin(struct shemb__step *st, shemb_ctx *ctx, int n,
		 const struct shemb_bags *bags, bool direct);

int shemb__step_begin(struct shemb__step *st, shemb_ctx *ctx, int n,
		      const struct shemb_bags *bags)
{
	return begin(st, ctx, n, bags, false);
}

int shemb__step_begin_direct(struct shemb__step *st, shemb_ctx *ctx, int n,
			     const struct shemb_bags *bags)
{
	return begin(st, ctx, n, bags, true);
}

static int begin(struct shemb__step *st, shemb_ctx *ctx, int n,
		 const struct shemb_bags *bags, bool direct)
{
	int rc;

	memset(st, 0, sizeof(*st));
	st->ctx = ctx;
	st->n = n;
	if (n < 0 || (n > 0 && !bags))
		return shemb__fail(ctx, SHEMB_EINVAL,
				   "n is %d and bags is %s", n,
				   bags ? "set" : "NULL");
	if (n == 0)
		return 0;
	st->bags = calloc((size_t)n, sizeof(*st->bags));
	st->groups = calloc((size_t)n, sizeof(*st->groups));
	st->set_ptrs = calloc((size_t)n, sizeof(*st->set_ptrs));
	st->set_index = calloc((size_t)n, sizeof(*st->set_index));
	if (!st->bags || !st->groups || !st->set_ptrs || !st->set_index) {
		shemb__step_end(st);
		return shemb__fail(ctx, SHEMB_ENOMEM, "no memory for %d sets", n);
	}
	st->direct = direct;
	rc = copy_sets(st, bags);
	for (int i = 0; !rc && !direct && i < n; i++)
		rc = stage_set(st, &st->bags[i], i);
	for (int i = 0; !rc && direct && i < n; i++)
		rc = check_mem(st, &st->bags[i], i);
	for (int i = 0; !rc && i < n; i++)
		rc = direct ? shemb__check_header(ctx, &st->bags[i], i)
			    : shemb__check_set(ctx, &st->bags[i], i);
	if (!rc) {
		group_sets(st);
		rc = check_totals(st);
	}
	if (rc)
		shemb__step_end(st);
	return rc;
}

/* Leaves an empty step of the same context (a failed step still meets
 * the other ranks through it). */
void shemb__step_end(struct shemb__step *st)
{
	shemb_ctx *ctx = st->ctx;

	free(st->bags);
	free(st->groups);
	free(st->set_ptrs);
	free(st->set_index);
	for (int i = 0; i < st->nstaged; i++)
		shemb__host_buf_free(ctx, &st->staged[i]);
	free(st->staged);
	memset(st, 0, sizeof(*st));
	st->ctx = ctx;
}

/* read_only tables are not locked: no step changes them, and a reload
 * swaps their rows under their lookups (serve.h). */
void shemb__step_lock(struct shemb__step *st, bool exclusive)
{
	for (int g = 0; g < st->ngroups; g++) {
		pthread_rwlock_t *l = &st->groups[g].table->rows_lock;

		if (shemb__read_only(st->groups[g].table))
			continue;
		if (exclusive)
			pthread_rwlock_wrlock(l);
		else
			pthread_rwlock_rdlock(l);
	}
}

void shemb__step_unlock(struct shemb__step *st)
{
	for (int g = st->ngroups - 1; g >= 0; g--)
		if (!shemb__read_only(st->groups[g].table))
			pthread_rwlock_unlock(&st->groups[g].table->rows_lock);
}

SHEMB_API void shemb_bags_init_size(struct shemb_bags *bags, size_t size)
{
	struct shemb_bags d = { .size = sizeof(d), .pooling = SHEMB_POOL_SUM };

	shemb__init_sized(bags, size, &d, sizeof(d));
}
