/*
 * validate.c - reject bad input before anything changes, naming the set,
 * the bag and the position at fault.
 */
#include "lib/step.h"

#include <string.h>

#include "cpu/half.h"
#include "cpu/threadpool.h"

#define SCAN_CHUNK 65536

int64_t shemb__set_rows(const struct shemb_bags *b)
{
	return b->pooling == SHEMB_POOL_NONE ? b->nids : b->nbags;
}

/* The bag holding position k (offsets already checked). */
static int64_t bag_of_position(const struct shemb_bags *b, int64_t k)
{
	int64_t lo = 0, hi = b->nbags - 1;

	while (lo < hi) {
		int64_t mid = lo + (hi - lo + 1) / 2;

		if (b->offsets[mid] <= k)
			lo = mid;
		else
			hi = mid - 1;
	}
	while (lo + 1 < b->nbags && b->offsets[lo + 1] <= k)
		lo++; /* skip empty bags that start at k */
	return lo;
}

int shemb__check_header(shemb_ctx *ctx, const struct shemb_bags *b, int i)
{
	const shemb_table *t = b->table;

	if (!t)
		return shemb__fail(ctx, SHEMB_EINVAL, "bags[%d]: table is NULL",
				   i);
	if (t->ctx != ctx)
		return shemb__fail(ctx, SHEMB_EINVAL,
				   "bags[%d]: table '%s' belongs to another "
				   "context", i, t->name);
	if (b->pooling < SHEMB_POOL_SUM || b->pooling > SHEMB_POOL_NONE)
		return shemb__fail(ctx, SHEMB_EINVAL,
				   "bags[%d]: pooling %d is not an enum "
				   "shemb_pooling value", i, b->pooling);
	if (b->dim != 0 && b->dim != t->attr.dim)
		return shemb__fail(ctx, SHEMB_EINVAL,
				   "bags[%d]: dim %d but table '%s' has dim %d",
				   i, b->dim, t->name, t->attr.dim);
	if (b->nbags < 0 || b->nids < 0)
		return shemb__fail(ctx, SHEMB_EINVAL,
				   "bags[%d]: nbags %lld and nids %lld must not "
				   "be negative", i, (long long)b->nbags,
				   (long long)b->nids);
	/* before any array is read (or staged from device memory) by
	 * these counts: a table takes fewer of each in a call anyway */
	if (b->nbags > INT32_MAX || b->nids > INT32_MAX)
		return shemb__fail(ctx, SHEMB_EINVAL,
				   "bags[%d]: %lld bags and %lld ids; a table "
				   "takes at most 2^31 - 1 of each in a call",
				   i, (long long)b->nbags, (long long)b->nids);
	if ((b->nbags > 0 && !b->offsets) || (b->nids > 0 && !b->ids))
		return shemb__fail(ctx, SHEMB_EINVAL,
				   "bags[%d]: offsets or ids is NULL with %lld "
				   "bags and %lld ids", i, (long long)b->nbags,
				   (long long)b->nids);
	return 0;
}

static int check_offsets(shemb_ctx *ctx, const struct shemb_bags *b, int i)
{
	const int64_t *o = b->offsets;

	if (!o)
		return b->nids == 0 ? 0
			: shemb__fail(ctx, SHEMB_EINVAL,
				      "bags[%d]: no bags but %lld ids", i,
				      (long long)b->nids);
	if (o[0] != 0)
		return shemb__fail(ctx, SHEMB_EINVAL,
				   "bags[%d]: offsets[0] is %lld, not 0", i,
				   (long long)o[0]);
	for (int64_t k = 0; k < b->nbags; k++)
		if (o[k + 1] < o[k])
			return shemb__fail(ctx, SHEMB_EINVAL,
					   "bags[%d] bag %lld: offsets decrease "
					   "(%lld then %lld)", i, (long long)k,
					   (long long)o[k], (long long)o[k + 1]);
	if (o[b->nbags] != b->nids)
		return shemb__fail(ctx, SHEMB_EINVAL,
				   "bags[%d]: offsets end at %lld but nids is "
				   "%lld", i, (long long)o[b->nbags],
				   (long long)b->nids);
	return 0;
}

/*
 * Scans for the first bad value: chunks are checked in parallel with a
 * branch-free loop (the common case has no bad value), and only a chunk
 * that has one is searched again for the position.
 */
struct scan {
	const void *v;
	int64_t n, rows;
	int (*chunk_bad)(const struct scan *sc, int64_t lo, int64_t hi);
	atomic_int bad;
};

static int ids_bad(const struct scan *sc, int64_t lo, int64_t hi)
{
	const int64_t *ids = sc->v;
	uint64_t bad = 0;

	for (int64_t k = lo; k < hi; k++)
		bad |= (uint64_t)ids[k] >= (uint64_t)sc->rows;
	return bad != 0;
}

static int floats_bad(const struct scan *sc, int64_t lo, int64_t hi)
{
	const float *v = sc->v;
	uint32_t bad = 0;

	for (int64_t k = lo; k < hi; k++)
		bad |= (shemb__f32_bits(v[k]) & 0x7f800000u) == 0x7f800000u;
	return bad != 0;
}

static void scan_task(void *arg, int64_t t)
{
	struct scan *sc = arg;
	int64_t lo = t * SCAN_CHUNK;
	int64_t hi = lo + SCAN_CHUNK < sc->n ? lo + SCAN_CHUNK : sc->n;

	if (sc->chunk_bad(sc, lo, hi))
		atomic_store(&sc->bad, 1);
}

/* The first position whose value is bad, or -1. */
static int64_t first_bad(const shemb_ctx *ctx, struct scan *sc)
{
	int64_t nchunks = (sc->n + SCAN_CHUNK - 1) / SCAN_CHUNK;

	atomic_init(&sc->bad, 0);
	shemb__pool_run(ctx->pool, nchunks, scan_task, sc);
	if (!atomic_load(&sc->bad))
		return -1;
	for (int64_t k = 0; k < sc->n; k++)
		if (sc->chunk_bad(sc, k, k + 1))
			return k;
	return -1;
}

static int64_t first_bad_id(const shemb_ctx *ctx, const int64_t *ids,
			    int64_t n, int64_t rows)
{
	struct scan sc = { .v = ids, .n = n, .rows = rows,
			   .chunk_bad = ids_bad };

	return first_bad(ctx, &sc);
}

static int64_t first_non_finite(const shemb_ctx *ctx, const float *v,
				int64_t n)
{
	struct scan sc = { .v = v, .n = n, .chunk_bad = floats_bad };

	return first_bad(ctx, &sc);
}

static const char *non_finite_name(float v)
{
	return v != v ? "NaN" : "infinite";
}

static int check_values(shemb_ctx *ctx, const struct shemb_bags *b, int i)
{
	int64_t k = first_bad_id(ctx, b->ids, b->nids, b->table->attr.rows);

	if (k >= 0) {
		int64_t bag = bag_of_position(b, k);

		return shemb__fail(ctx, SHEMB_EINVAL,
				   "bags[%d] (table '%s') bag %lld position "
				   "%lld: id %lld outside [0, %lld)", i,
				   b->table->name, (long long)bag,
				   (long long)(k - b->offsets[bag]),
				   (long long)b->ids[k],
				   (long long)b->table->attr.rows);
	}
	if (!b->weights)
		return 0;
	k = first_non_finite(ctx, b->weights, b->nids);
	if (k >= 0) {
		int64_t bag = bag_of_position(b, k);

		return shemb__fail(ctx, SHEMB_EINVAL,
				   "bags[%d] (table '%s') bag %lld position "
				   "%lld: weight is %s", i, b->table->name,
				   (long long)bag,
				   (long long)(k - b->offsets[bag]),
				   non_finite_name(b->weights[k]));
	}
	return 0;
}

int shemb__check_set(shemb_ctx *ctx, const struct shemb_bags *b, int i)
{
	int rc = shemb__check_header(ctx, b, i);

	if (!rc)
		rc = check_offsets(ctx, b, i);
	if (!rc)
		rc = check_values(ctx, b, i);
	return rc;
}

int shemb__check_rows_out(shemb_ctx *ctx, const struct shemb_bags *b, int i,
			  const void *buf, const char *what)
{
	if (!buf && shemb__set_rows(b) > 0)
		return shemb__fail(ctx, SHEMB_EINVAL,
				   "%s[%d] is NULL but bags[%d] has %lld rows",
				   what, i, i, (long long)shemb__set_rows(b));
	return 0;
}

int shemb__check_grad(shemb_ctx *ctx, const struct shemb_bags *b, int i,
		      const float *grad)
{
	int dim = b->table->attr.dim;
	int64_t k;

	if (shemb__check_rows_out(ctx, b, i, grad, "grad"))
		return SHEMB_EINVAL;
	k = first_non_finite(ctx, grad, shemb__set_rows(b) * dim);
	if (k >= 0)
		return shemb__fail(ctx, SHEMB_EINVAL,
				   "grad[%d] (table '%s') row %lld column %d: "
				   "value is %s", i, b->table->name,
				   (long long)(k / dim), (int)(k % dim),
				   non_finite_name(grad[k]));
	return 0;
}

int shemb__check_ids(shemb_ctx *ctx, const shemb_table *t, int64_t n,
		     const int64_t *ids, const char *where)
{
	int64_t k = first_bad_id(ctx, ids, n, t->attr.rows);

	if (k >= 0)
		return shemb__fail(ctx, SHEMB_EINVAL,
				   "%s (table '%s') ids[%lld]: id %lld outside "
				   "[0, %lld)", where, t->name, (long long)k,
				   (long long)ids[k], (long long)t->attr.rows);
	return 0;
}
