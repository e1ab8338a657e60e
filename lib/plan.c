/*
 * plan.c - deduplicate a table's ids: a stable parallel LSD radix sort of
 * (id, position) pairs over just the bits a row number needs, then one scan
 * that cuts the sorted ids into groups.  Stability keeps each group's
 * positions ascending, which fixes the order in which the backward sums a
 * row's gradients: results do not depend on the thread count.
 */
#include "lib/plan.h"

#include <stdlib.h>
#include <string.h>

#include "cpu/threadpool.h"

#define RADIX_BITS 11
#define RADIX (1 << RADIX_BITS)
#define MIN_TASK_IDS 8192

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
	ctx->mem->scratch_free(ctx->be, p->unique, n * sizeof(int64_t));
	ctx->mem->scratch_free(ctx->be, p->keys_tmp, n * sizeof(uint64_t));
	ctx->mem->scratch_free(ctx->be, p->seg, (n + 1) * sizeof(int32_t));
	ctx->mem->scratch_free(ctx->be, p->pos, n * sizeof(int32_t));
	ctx->mem->scratch_free(ctx->be, p->vals_tmp, n * sizeof(int32_t));
	ctx->mem->scratch_free(ctx->be, p->bag_of, n * sizeof(int32_t));
	p->cap_ids = 0;
}

static int reserve_ids(shemb_ctx *ctx, struct shemb__plan *p, int64_t nids)
{
	size_t n;

	if (nids <= p->cap_ids)
		return 0;
	free_id_buffers(ctx, p);
	n = (size_t)(nids + nids / 4 + 64);
	p->unique = ctx->mem->scratch_alloc(ctx->be, n * sizeof(int64_t));
	p->keys_tmp = ctx->mem->scratch_alloc(ctx->be, n * sizeof(uint64_t));
	p->seg = ctx->mem->scratch_alloc(ctx->be, (n + 1) * sizeof(int32_t));
	p->pos = ctx->mem->scratch_alloc(ctx->be, n * sizeof(int32_t));
	p->vals_tmp = ctx->mem->scratch_alloc(ctx->be, n * sizeof(int32_t));
	p->bag_of = ctx->mem->scratch_alloc(ctx->be, n * sizeof(int32_t));
	p->cap_ids = (int64_t)n;
	if (!p->unique || !p->keys_tmp || !p->seg || !p->pos || !p->vals_tmp ||
	    !p->bag_of) {
		free_id_buffers(ctx, p);
		return SHEMB_ENOMEM;
	}
	return 0;
}

static int reserve(shemb_ctx *ctx, struct shemb__plan *p, int nsets,
		   int64_t nids, int64_t nargmax)
{
	if (nsets > p->cap_sets) {
		void *s = realloc(p->sets, (size_t)nsets * sizeof(*p->sets));

		if (!s)
			return SHEMB_ENOMEM;
		p->sets = s;
		p->cap_sets = nsets;
	}
	if (nargmax > p->cap_argmax) {
		p->argmax = grow(ctx, p->argmax,
				 (size_t)p->cap_argmax * sizeof(int32_t),
				 (size_t)nargmax * sizeof(int32_t));
		p->cap_argmax = p->argmax ? nargmax : 0;
		if (!p->argmax)
			return SHEMB_ENOMEM;
	}
	return reserve_ids(ctx, p, nids);
}

void shemb__plan_free(shemb_ctx *ctx, struct shemb__plan *p)
{
	if (!p)
		return;
	free_id_buffers(ctx, p);
	if (p->argmax)
		ctx->mem->scratch_free(ctx->be, p->argmax,
				       (size_t)p->cap_argmax * sizeof(int32_t));
	free(p->sets);
	free(p);
}

/* ---- layout of the sets ---- */

static void describe_sets(struct shemb__plan *p, int dim, int nsets,
			  const struct shemb_bags *const *sets)
{
	p->nsets = nsets;
	p->nids = p->nbags = p->nargmax = 0;
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
		if (b->pooling == SHEMB_POOL_MAX)
			p->nargmax += b->nbags * dim;
		p->nids += b->nids;
		p->nbags += s->plan_bags;
	}
}

/* Positions in call order: keys are the ids, values the positions, and
 * bag_of maps each position to its plan bag. */
static void fill_positions(struct shemb__plan *p,
			   const struct shemb_bags *const *sets)
{
	for (int i = 0; i < p->nsets; i++) {
		const struct shemb_bags *b = sets[i];
		const struct shemb__plan_set *s = &p->sets[i];
		int32_t *bag_of = p->bag_of + s->pos_base;

		memcpy(p->unique + s->pos_base, b->ids,
		       (size_t)b->nids * sizeof(int64_t));
		for (int64_t k = 0; k < b->nids; k++)
			p->pos[s->pos_base + k] = (int32_t)(s->pos_base + k);
		if (b->pooling == SHEMB_POOL_NONE) {
			for (int64_t k = 0; k < b->nids; k++)
				bag_of[k] = (int32_t)(s->bag_base + k);
			continue;
		}
		for (int64_t bag = 0; bag < b->nbags; bag++)
			for (int64_t k = b->offsets[bag];
			     k < b->offsets[bag + 1]; k++)
				bag_of[k] = (int32_t)(s->bag_base + bag);
	}
}

/* ---- parallel radix sort ---- */

struct sort_job {
	const uint64_t *ksrc;
	uint64_t *kdst;
	const int32_t *vsrc;
	int32_t *vdst;
	int64_t n, chunk;
	int shift;
	uint32_t *hist; /* [task][RADIX] counts, then write offsets */
};

static void chunk_range(const struct sort_job *j, int64_t t, int64_t *lo,
			int64_t *hi)
{
	*lo = t * j->chunk;
	*hi = *lo + j->chunk < j->n ? *lo + j->chunk : j->n;
}

static void count_task(void *arg, int64_t t)
{
	struct sort_job *j = arg;
	uint32_t *h = j->hist + (size_t)t * RADIX;
	int64_t lo, hi;

	chunk_range(j, t, &lo, &hi);
	memset(h, 0, RADIX * sizeof(*h));
	for (int64_t k = lo; k < hi; k++)
		h[(j->ksrc[k] >> j->shift) & (RADIX - 1)]++;
}

static void scatter_task(void *arg, int64_t t)
{
	struct sort_job *j = arg;
	uint32_t *off = j->hist + (size_t)t * RADIX;
	int64_t lo, hi;

	chunk_range(j, t, &lo, &hi);
	for (int64_t k = lo; k < hi; k++) {
		uint32_t d = (uint32_t)(j->ksrc[k] >> j->shift) & (RADIX - 1);
		uint32_t at = off[d]++;

		j->kdst[at] = j->ksrc[k];
		j->vdst[at] = j->vsrc[k];
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

static int key_bits(int64_t rows)
{
	int bits = 0;

	while (bits < 63 && ((uint64_t)(rows - 1) >> bits))
		bits++;
	return bits;
}

static int sort_pairs(shemb_ctx *ctx, struct shemb__plan *p, int64_t rows)
{
	struct sort_job j = { 0 };
	int64_t ntasks = shemb__pool_split(ctx->pool, p->nids, MIN_TASK_IDS);
	int bits = key_bits(rows);

	j.n = p->nids;
	j.chunk = (p->nids + ntasks - 1) / ntasks;
	j.hist = malloc((size_t)ntasks * RADIX * sizeof(uint32_t));
	if (!j.hist)
		return SHEMB_ENOMEM;
	for (j.shift = 0; j.shift < bits; j.shift += RADIX_BITS) {
		uint64_t *kt;
		int32_t *vt;

		j.ksrc = (uint64_t *)p->unique;
		j.kdst = p->keys_tmp;
		j.vsrc = p->pos;
		j.vdst = p->vals_tmp;
		shemb__pool_run(ctx->pool, ntasks, count_task, &j);
		if (prefix(&j, ntasks))
			continue;
		shemb__pool_run(ctx->pool, ntasks, scatter_task, &j);
		kt = (uint64_t *)p->unique;
		p->unique = (int64_t *)p->keys_tmp;
		p->keys_tmp = kt;
		vt = p->pos;
		p->pos = p->vals_tmp;
		p->vals_tmp = vt;
	}
	free(j.hist);
	return 0;
}

/* ---- cut sorted ids into groups ---- */

struct group_job {
	struct shemb__plan *p;
	int64_t chunk;
	int64_t *first; /* per task: group index of its first boundary */
};

static int is_boundary(const int64_t *keys, int64_t k)
{
	return k == 0 || keys[k] != keys[k - 1];
}

static void group_count_task(void *arg, int64_t t)
{
	struct group_job *g = arg;
	int64_t lo = t * g->chunk, hi = lo + g->chunk, c = 0;

	if (hi > g->p->nids)
		hi = g->p->nids;
	for (int64_t k = lo; k < hi; k++)
		c += is_boundary(g->p->unique, k);
	g->first[t] = c;
}

static void group_write_task(void *arg, int64_t t)
{
	struct group_job *g = arg;
	struct shemb__plan *p = g->p;
	int64_t lo = t * g->chunk, hi = lo + g->chunk, u = g->first[t];
	uint64_t *out = p->keys_tmp;

	if (hi > p->nids)
		hi = p->nids;
	for (int64_t k = lo; k < hi; k++) {
		if (is_boundary(p->unique, k)) {
			out[u] = (uint64_t)p->unique[k];
			p->seg[u++] = (int32_t)k;
		}
	}
}

static int make_groups(shemb_ctx *ctx, struct shemb__plan *p)
{
	int64_t ntasks = shemb__pool_split(ctx->pool, p->nids, MIN_TASK_IDS);
	struct group_job g = { p, (p->nids + ntasks - 1) / ntasks, NULL };
	int64_t sum = 0;
	uint64_t *kt;

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
	kt = (uint64_t *)p->unique;
	p->unique = (int64_t *)p->keys_tmp;
	p->keys_tmp = kt;
	return 0;
}

int shemb__plan_build(shemb_table *t, int nsets,
		      const struct shemb_bags *const *sets,
		      struct shemb__plan **planp)
{
	shemb_ctx *ctx = t->ctx;
	struct shemb__plan *p = *planp;
	int64_t nids = 0, nargmax = 0;
	int rc;

	if (!p) {
		p = calloc(1, sizeof(*p));
		if (!p)
			return SHEMB_ENOMEM;
		*planp = p;
	}
	for (int i = 0; i < nsets; i++) {
		nids += sets[i]->nids;
		if (sets[i]->pooling == SHEMB_POOL_MAX)
			nargmax += sets[i]->nbags * t->attr.dim;
	}
	rc = reserve(ctx, p, nsets, nids, nargmax);
	if (rc)
		return rc;
	describe_sets(p, t->attr.dim, nsets, sets);
	p->nunique = 0;
	if (p->nids == 0) {
		p->seg[0] = 0;
		return 0;
	}
	fill_positions(p, sets);
	rc = sort_pairs(ctx, p, t->attr.rows);
	if (!rc)
		rc = make_groups(ctx, p);
	return rc;
}
