/*
 * plan.c - deduplicate a table's ids.  Each position becomes one 64-bit key,
 * id << pos_bits | position, and a parallel LSD radix sort orders the keys
 * on the id bits only; one scan then cuts them into groups.  The sort is
 * stable, so each group's positions stay ascending: that fixes the order in
 * which the backward sums a row's gradients, whatever the thread count.
 * One packed array moves 8 bytes per id per pass where (id, position) pairs
 * moved 12, in one write stream instead of two.
 */
#include "lib/plan.h"
#include "lib/dist.h"
#include "lib/radix.h"

#include <stdlib.h>
#include <string.h>

#include "cpu/threadpool.h"

#define RADIX_BITS 11
#define RADIX (1 << RADIX_BITS)
#define MIN_TASK_IDS 8192
#define MIN_TASK_BAGS 1024

/* ---- buffers ---- */

static void *grow(shemb_ctx *ctx, void *old, size_t old_bytes, size_t bytes)
{
	if (old)
		ctx->mem->scratch_free(ctx->be, old, old_bytes);
	return ctx->mem->scratch_alloc(ctx->be, bytes);
}

static void free_id_buffers(shemb_ctx *ctx, struct shemb__plan *p)
{
	size_t n = (size_t)p->cap_ids;

	if (!n)
		return;
	ctx->mem->scratch_free(ctx->be, p->keys, n * sizeof(uint64_t));
	ctx->mem->scratch_free(ctx->be, p->keys_tmp, n * sizeof(uint64_t));
	ctx->mem->scratch_free(ctx->be, p->unique, n * sizeof(int64_t));
	ctx->mem->scratch_free(ctx->be, p->seg, (n + 1) * sizeof(int32_t));
	ctx->mem->scratch_free(ctx->be, p->pos, n * sizeof(int32_t));
	ctx->mem->scratch_free(ctx->be, p->bag_of, n * sizeof(int32_t));
	ctx->mem->scratch_free(ctx->be, p->ids, n * sizeof(int64_t));
	p->cap_ids = 0;
}

static int reserve_ids(shemb_ctx *ctx, struct shemb__plan *p, int64_t nids)
{
	size_t n;

	/* allocated even for no ids: seg[0] always exists */
	if (nids <= p->cap_ids && p->cap_ids > 0)
		return 0;
	free_id_buffers(ctx, p);
	n = (size_t)(nids + nids / 4 + 64);
	p->keys = ctx->mem->scratch_alloc(ctx->be, n * sizeof(uint64_t));
	p->keys_tmp = ctx->mem->scratch_alloc(ctx->be, n * sizeof(uint64_t));
	p->unique = ctx->mem->scratch_alloc(ctx->be, n * sizeof(int64_t));
	p->seg = ctx->mem->scratch_alloc(ctx->be, (n + 1) * sizeof(int32_t));
	p->pos = ctx->mem->scratch_alloc(ctx->be, n * sizeof(int32_t));
	p->bag_of = ctx->mem->scratch_alloc(ctx->be, n * sizeof(int32_t));
	p->ids = ctx->mem->scratch_alloc(ctx->be, n * sizeof(int64_t));
	p->cap_ids = (int64_t)n;
	if (!p->keys || !p->keys_tmp || !p->unique || !p->seg || !p->pos ||
	    !p->bag_of || !p->ids) {
		free_id_buffers(ctx, p);
		return SHEMB_ENOMEM;
	}
	return 0;
}

int shemb__plan_reserve_sets(struct shemb__plan *p, int nsets)
{
	if (nsets > p->cap_sets) {
		void *s = realloc(p->sets, (size_t)nsets * sizeof(*p->sets));

		if (!s)
			return SHEMB_ENOMEM;
		p->sets = s;
		p->cap_sets = nsets;
	}
	return 0;
}

static int reserve(shemb_ctx *ctx, struct shemb__plan *p, int nsets,
		   int64_t nids, int64_t nargmax, int64_t noffsets)
{
	if (shemb__plan_reserve_sets(p, nsets))
		return SHEMB_ENOMEM;
	if (nargmax > p->cap_argmax) {
		p->argmax = grow(ctx, p->argmax,
				 (size_t)p->cap_argmax * sizeof(int32_t),
				 (size_t)nargmax * sizeof(int32_t));
		p->cap_argmax = p->argmax ? nargmax : 0;
		if (!p->argmax)
			return SHEMB_ENOMEM;
	}
	if (noffsets > p->cap_offsets) {
		p->offsets = grow(ctx, p->offsets,
				  (size_t)p->cap_offsets * sizeof(int64_t),
				  (size_t)noffsets * sizeof(int64_t));
		p->cap_offsets = p->offsets ? noffsets : 0;
		if (!p->offsets)
			return SHEMB_ENOMEM;
	}
	return reserve_ids(ctx, p, nids);
}

int shemb__plan_reserve(shemb_ctx *ctx, struct shemb__plan *p)
{
	return reserve(ctx, p, p->nsets, p->nids, p->nargmax, p->noffsets);
}

void shemb__plan_free(shemb_ctx *ctx, struct shemb__plan *p)
{
	if (!p)
		return;
	free_id_buffers(ctx, p);
	if (p->argmax)
		ctx->mem->scratch_free(ctx->be, p->argmax,
				       (size_t)p->cap_argmax * sizeof(int32_t));
	if (p->offsets)
		ctx->mem->scratch_free(ctx->be, p->offsets,
				       (size_t)p->cap_offsets * sizeof(int64_t));
	shemb__route_free(p->route);
	shemb__dplan_release(ctx, p);
	free(p->sets);
	free(p);
}

int64_t shemb__plan_max_ids(int64_t rows)
{
	int free_bits = 64 - shemb__bits_for((uint64_t)(rows - 1));

	return free_bits >= 31 ? INT32_MAX : (INT64_C(1) << free_bits);
}

/* ---- layout of the sets ---- */

void shemb__plan_describe(struct shemb__plan *p, int dim, int nsets,
			  const struct shemb_bags *const *sets)
{
	p->nsets = nsets;
	p->nids = p->nbags = p->nargmax = p->noffsets = 0;
	for (int i = 0; i < nsets; i++) {
		const struct shemb_bags *b = sets[i];
		struct shemb__plan_set *s = &p->sets[i];

		s->pooling = b->pooling;
		s->weighted = b->weights != NULL;
		s->nbags = b->nbags;
		s->nids = b->nids;
		s->pos_base = p->nids;
		s->bag_base = p->nbags;
		s->plan_bags = b->pooling == SHEMB_POOL_NONE ? b->nids : b->nbags;
		s->argmax_off = p->nargmax;
		s->offsets_off = p->noffsets;
		p->noffsets += b->nbags > 0 ? b->nbags + 1 : 0;
		if (b->pooling == SHEMB_POOL_MAX)
			p->nargmax += b->nbags * dim;
		p->nids += b->nids;
		p->nbags += s->plan_bags;
	}
}

/* The plan keeps the sets' offsets, for the backward to check. */
static void copy_offsets(struct shemb__plan *p,
			 const struct shemb_bags *const *sets)
{
	for (int i = 0; i < p->nsets; i++)
		if (sets[i]->nbags > 0)
			memcpy(p->offsets + p->sets[i].offsets_off,
			       sets[i]->offsets,
			       (size_t)(sets[i]->nbags + 1) * sizeof(int64_t));
}

/* ---- keys and bags in call order ---- */

/* A task fills the keys and bag numbers of a run of one set's bags. */
struct fill_job {
	struct shemb__plan *p;
	const struct shemb_bags *const *sets;
	int64_t *first_task;    /* per set: its first task number */
	int64_t *per_task;      /* per set: bags (or NONE ids) per task */
};

static void fill_range(struct shemb__plan *p, const struct shemb_bags *b,
		       const struct shemb__plan_set *s, int64_t lo, int64_t hi)
{
	int32_t *bag_of = p->bag_of + s->pos_base;
	uint64_t *keys = p->keys + s->pos_base;
	int sh = p->pos_bits;

	if (b->pooling == SHEMB_POOL_NONE && hi > lo)
		memcpy(p->ids + s->pos_base + lo, b->ids + lo,
		       (size_t)(hi - lo) * sizeof(int64_t));
	else if (hi > lo && b->offsets[hi] > b->offsets[lo])
		memcpy(p->ids + s->pos_base + b->offsets[lo],
		       b->ids + b->offsets[lo],
		       (size_t)(b->offsets[hi] - b->offsets[lo]) *
			       sizeof(int64_t));

	if (b->pooling == SHEMB_POOL_NONE) {
		for (int64_t k = lo; k < hi; k++) {
			keys[k] = (uint64_t)b->ids[k] << sh |
				  (uint64_t)(s->pos_base + k);
			bag_of[k] = (int32_t)(s->bag_base + k);
		}
		return;
	}
	for (int64_t bag = lo; bag < hi; bag++) {
		for (int64_t k = b->offsets[bag]; k < b->offsets[bag + 1]; k++) {
			keys[k] = (uint64_t)b->ids[k] << sh |
				  (uint64_t)(s->pos_base + k);
			bag_of[k] = (int32_t)(s->bag_base + bag);
		}
	}
}

static void fill_task(void *arg, int64_t task)
{
	struct fill_job *j = arg;
	int i = 0;
	int64_t lo, hi;

	while (i + 1 < j->p->nsets && j->first_task[i + 1] <= task)
		i++;
	lo = (task - j->first_task[i]) * j->per_task[i];
	hi = lo + j->per_task[i];
	if (hi > j->p->sets[i].plan_bags)
		hi = j->p->sets[i].plan_bags;
	fill_range(j->p, j->sets[i], &j->p->sets[i], lo, hi);
}

static int fill_keys(shemb_ctx *ctx, struct shemb__plan *p,
		     const struct shemb_bags *const *sets)
{
	struct fill_job j = { p, sets, NULL, NULL };
	int64_t ntasks = 0;

	j.first_task = malloc(2 * (size_t)p->nsets * sizeof(int64_t));
	if (!j.first_task)
		return SHEMB_ENOMEM;
	j.per_task = j.first_task + p->nsets;
	for (int i = 0; i < p->nsets; i++) {
		int64_t n = p->sets[i].plan_bags;
		int64_t t = n ? shemb__pool_split(ctx->pool, n, MIN_TASK_BAGS)
			      : 0;

		j.first_task[i] = ntasks;
		j.per_task[i] = t ? (n + t - 1) / t : 1;
		ntasks += t ? (n + j.per_task[i] - 1) / j.per_task[i] : 0;
	}
	shemb__pool_run(ctx->pool, ntasks, fill_task, &j);
	free(j.first_task);
	return 0;
}

/* ---- parallel radix sort on the id bits of the keys ---- */

struct sort_job {
	const uint64_t *src;
	uint64_t *dst;
	int64_t n, chunk;
	int shift;
	uint32_t *hist; /* [task][RADIX] counts, then write offsets */
};

static void chunk_range(int64_t n, int64_t chunk, int64_t t, int64_t *lo,
			int64_t *hi)
{
	*lo = t * chunk;
	*hi = *lo + chunk < n ? *lo + chunk : n;
}

static void count_task(void *arg, int64_t t)
{
	struct sort_job *j = arg;
	uint32_t *h = j->hist + (size_t)t * RADIX;
	int64_t lo, hi;

	chunk_range(j->n, j->chunk, t, &lo, &hi);
	memset(h, 0, RADIX * sizeof(*h));
	for (int64_t k = lo; k < hi; k++)
		h[(j->src[k] >> j->shift) & (RADIX - 1)]++;
}

static void scatter_task(void *arg, int64_t t)
{
	struct sort_job *j = arg;
	uint32_t *off = j->hist + (size_t)t * RADIX;
	int64_t lo, hi;

	chunk_range(j->n, j->chunk, t, &lo, &hi);
	for (int64_t k = lo; k < hi; k++) {
		uint64_t key = j->src[k];

		j->dst[off[(key >> j->shift) & (RADIX - 1)]++] = key;
	}
}

/* Turn counts into write offsets (digit-major, then task, which keeps the
 * sort stable).  Returns 1 if every key has the same digit: no move. */
static int prefix(struct sort_job *j, int64_t ntasks)
{
	uint32_t sum = 0;

	for (int d = 0; d < RADIX; d++) {
		uint32_t digit_total = 0;

		for (int64_t t = 0; t < ntasks; t++) {
			uint32_t c = j->hist[t * RADIX + d];

			j->hist[t * RADIX + d] = sum;
			sum += c;
			digit_total += c;
		}
		if (digit_total == (uint32_t)j->n)
			return 1;
	}
	return 0;
}

static int sort_keys(shemb_ctx *ctx, struct shemb__plan *p, int id_bits)
{
	/* One chunk per thread: smaller chunks would give each bucket too few
	 * keys per chunk, and the scatter would write scattered lines. */
	int64_t ntasks = (p->nids + MIN_TASK_IDS - 1) / MIN_TASK_IDS;
	int top = p->pos_bits + id_bits;
	struct sort_job j = { 0 };

	if (ntasks > shemb__pool_nthreads(ctx->pool))
		ntasks = shemb__pool_nthreads(ctx->pool);

	j.n = p->nids;
	j.chunk = (p->nids + ntasks - 1) / ntasks;
	j.hist = malloc((size_t)ntasks * RADIX * sizeof(uint32_t));
	if (!j.hist)
		return SHEMB_ENOMEM;
	for (j.shift = p->pos_bits; j.shift < top; j.shift += RADIX_BITS) {
		uint64_t *swap;

		j.src = p->keys;
		j.dst = p->keys_tmp;
		shemb__pool_run(ctx->pool, ntasks, count_task, &j);
		if (prefix(&j, ntasks))
			continue;
		shemb__pool_run(ctx->pool, ntasks, scatter_task, &j);
		swap = p->keys;
		p->keys = p->keys_tmp;
		p->keys_tmp = swap;
	}
	free(j.hist);
	return 0;
}

/* ---- cut sorted keys into groups ---- */

struct group_job {
	struct shemb__plan *p;
	int64_t chunk;
	int64_t *first; /* per task: group index of its first boundary */
};

static int is_boundary(const struct shemb__plan *p, int64_t k)
{
	return k == 0 || (p->keys[k] >> p->pos_bits) !=
				 (p->keys[k - 1] >> p->pos_bits);
}

static void group_count_task(void *arg, int64_t t)
{
	struct group_job *g = arg;
	int64_t lo, hi, c = 0;

	chunk_range(g->p->nids, g->chunk, t, &lo, &hi);
	for (int64_t k = lo; k < hi; k++)
		c += is_boundary(g->p, k);
	g->first[t] = c;
}

static void group_write_task(void *arg, int64_t t)
{
	struct group_job *g = arg;
	struct shemb__plan *p = g->p;
	uint64_t mask = (UINT64_C(1) << p->pos_bits) - 1;
	int64_t lo, hi, u = g->first[t];

	chunk_range(p->nids, g->chunk, t, &lo, &hi);
	for (int64_t k = lo; k < hi; k++) {
		if (is_boundary(p, k)) {
			p->unique[u] = (int64_t)(p->keys[k] >> p->pos_bits);
			p->seg[u++] = (int32_t)k;
		}
		p->pos[k] = (int32_t)(p->keys[k] & mask);
	}
}

static int make_groups(shemb_ctx *ctx, struct shemb__plan *p)
{
	int64_t ntasks = shemb__pool_split(ctx->pool, p->nids, MIN_TASK_IDS);
	struct group_job g = { p, (p->nids + ntasks - 1) / ntasks, NULL };
	int64_t sum = 0;

	g.first = malloc((size_t)ntasks * sizeof(int64_t));
	if (!g.first)
		return SHEMB_ENOMEM;
	shemb__pool_run(ctx->pool, ntasks, group_count_task, &g);
	for (int64_t t = 0; t < ntasks; t++) {
		int64_t c = g.first[t];

		g.first[t] = sum;
		sum += c;
	}
	shemb__pool_run(ctx->pool, ntasks, group_write_task, &g);
	free(g.first);
	p->nunique = sum;
	p->seg[sum] = (int32_t)p->nids;
	return 0;
}

int shemb__plan_build(shemb_table *t, int nsets,
		      const struct shemb_bags *const *sets,
		      struct shemb__plan **planp)
{
	shemb_ctx *ctx = t->ctx;
	struct shemb__plan *p = *planp;
	int64_t nids = 0, nargmax = 0, noffsets = 0;
	int rc;

	if (!p) {
		p = calloc(1, sizeof(*p));
		if (!p)
			return SHEMB_ENOMEM;
		*planp = p;
	}
	for (int i = 0; i < nsets; i++) {
		nids += sets[i]->nids;
		noffsets += sets[i]->nbags > 0 ? sets[i]->nbags + 1 : 0;
		if (sets[i]->pooling == SHEMB_POOL_MAX)
			nargmax += sets[i]->nbags * t->attr.dim;
	}
	rc = reserve(ctx, p, nsets, nids, nargmax, noffsets);
	if (rc)
		return rc;
	shemb__plan_describe(p, t->attr.dim, nsets, sets);
	copy_offsets(p, sets);
	p->on_device = false;
	p->nunique = 0;
	if (p->nids == 0) {
		p->seg[0] = 0;
		return 0;
	}
	p->pos_bits = shemb__bits_for((uint64_t)(p->nids - 1));
	rc = fill_keys(ctx, p, sets);
	if (!rc)
		rc = sort_keys(ctx, p,
			       shemb__bits_for((uint64_t)(t->attr.rows - 1)));
	if (!rc)
		rc = make_groups(ctx, p);
	return rc;
}

void shemb__plan_unique_of(const struct shemb__plan *p, int64_t *out)
{
	for (int64_t u = 0; u < p->nunique; u++)
		for (int32_t k = p->seg[u]; k < p->seg[u + 1]; k++)
			out[p->pos[k]] = u;
}
