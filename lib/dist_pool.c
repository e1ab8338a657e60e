/*
 * dist_pool.c - bags pooled by the owners of their rows.
 *
 * For SUM and MEAN bags of a row-wise or table-wise table, a rank may send
 * each owner, for every bag, the ids of that bag the owner holds (a pair)
 * with their weights (MEAN: divided by the bag's length), instead of its
 * distinct ids.  The owner answers with one pooled row per pair, and the
 * rank adds the owners' rows of each bag in rank order.  In the backward
 * it sends each owner one gradient row per pair (the bag's), which the
 * owner weighs per id, with the weights of the backward's bags: where
 * they have any, they follow the rows (the lookup's may differ).  That
 * moves fewer bytes when bags are long and share few rows;
 * SHEMB_POOL_AT_AUTO compares both per step (see fewer_bytes_pooled).
 * Sums are ordered differently from a single process's, so deterministic
 * mode never pools at the owners.
 *
 * A pooled table's part of the ids message to an owner: the number of
 * ids (int64), each pair's number of ids (int32, padded to 8 bytes), the
 * ids (int64) and their weights (fp32, padded to 8 bytes).  Its header
 * count is -1 - (number of pairs).  Rows and gradients are fp32.
 */
#include "lib/dist.h"

#include <stdlib.h>
#include <string.h>

static bool eligible(const struct shemb__step *st, int g)
{
	const struct shemb__group *grp = &st->groups[g];
	const shemb_table *t = grp->table;

	if (t->attr.pool_at == SHEMB_POOL_AT_REQUESTER ||
	    st->ctx->attr.deterministic || t->attr.wire_dtype != SHEMB_F32 ||
	    t->shard.world < 2 || (t->shard.kind != SHEMB_SHARD_ROW &&
				   t->shard.kind != SHEMB_SHARD_TABLE))
		return false;
	for (int s = 0; s < grp->nsets; s++)
		if (grp->sets[s]->pooling != SHEMB_POOL_SUM &&
		    grp->sets[s]->pooling != SHEMB_POOL_MEAN)
			return false;
	return true;
}

struct cursor {
	int64_t *pair, *occ;   /* [world]: next pair and id of each owner */
	int64_t *last_bag;     /* [world]: the last bag given a pair */
};

/* One pass over the bags in plan order: count (fill false) or fill the
 * pairs and ids of each owner; with coefs, only the weight of each id,
 * in the order of the owners' ids. */
static void walk(const struct shemb__step *st, int g,
		 const struct shemb__plan *p, const int64_t *u_of,
		 struct cursor *cur, bool fill, float *coefs)
{
	const struct shemb__group *grp = &st->groups[g];
	struct shemb__route *r = p->route;
	int w = r->world;

	for (int o = 0; o < w; o++)
		cur->last_bag[o] = -1;
	for (int s = 0; s < grp->nsets; s++) {
		const struct shemb_bags *b = grp->sets[s];
		const struct shemb__plan_set *ps = &p->sets[s];

		for (int64_t bag = 0; bag < b->nbags; bag++) {
			int64_t lo = b->offsets[bag], hi = b->offsets[bag + 1];

			for (int64_t i = lo; i < hi; i++) {
				int64_t u = u_of[ps->pos_base + i];
				int o = r->owner_of[u];
				float coef = b->weights ? b->weights[i] : 1.0f;

				if (cur->last_bag[o] != ps->bag_base + bag) {
					cur->last_bag[o] = ps->bag_base + bag;
					if (fill) {
						r->pair_bag[cur->pair[o]] =
							ps->bag_base + bag;
						r->pair_len[cur->pair[o]] = 0;
					}
					cur->pair[o]++;
				}
				if (b->pooling == SHEMB_POOL_MEAN)
					coef /= (float)(hi - lo);
				if (fill) {
					r->pair_len[cur->pair[o] - 1]++;
					r->occ_id[cur->occ[o]] = p->unique[u];
					r->occ_coef[cur->occ[o]] = coef;
				}
				if (coefs)
					coefs[cur->occ[o]] = coef;
				cur->occ[o]++;
			}
		}
	}
}

static int alloc_pairs(struct shemb__route *r, int64_t npairs, int64_t nocc)
{
	free(r->pair_bag);
	free(r->pair_len);
	free(r->occ_id);
	free(r->occ_coef);
	r->pair_bag = malloc((size_t)(npairs + 1) * sizeof(int64_t));
	r->pair_len = malloc((size_t)(npairs + 1) * sizeof(int32_t));
	r->occ_id = malloc((size_t)(nocc + 1) * sizeof(int64_t));
	r->occ_coef = malloc((size_t)(nocc + 1) * sizeof(float));
	return r->pair_bag && r->pair_len && r->occ_id && r->occ_coef
		       ? 0
		       : SHEMB_ENOMEM;
}

/*
 * SHEMB_POOL_AT_AUTO pools at the owners when that sends at most half
 * the bytes of a step (lookup and backward) sending rows whole would:
 * the owners then gather a row per id occurrence instead of one per
 * distinct id, and merge as many gradient contributions, which the bytes
 * saved must pay for.  Measured on a 2-core host, over shm, pooled
 * against whole: shemb-bench train, 2 ranks, 0.47 of the bytes (3.0
 * against 6.2 MB a step): 24-25 against 35-37 ms a step (27-28 against
 * 40 over tcp on loopback); shemb-bench sched, 4 ranks, 0.27 of the
 * bytes: 32-35 against 64-69 ms; shemb-bench train, 4 ranks, 0.81 of the
 * bytes: 58-63 against 56-60 ms.  (Before the optimizer's loop was made
 * cheaper, pooling had lost at 0.47, 28 against 33 ms, and the threshold
 * was a quarter.)  pool_at = OWNER and REQUESTER force either.
 */
#define POOLED_BYTES_AT_MOST_PART 2

/* Whether a set of table g has weights: its backward then sends them
 * again (shemb__pool_backward_coefs). */
static bool weighted(const struct shemb__step *st, int g)
{
	const struct shemb__group *grp = &st->groups[g];

	for (int s = 0; s < grp->nsets; s++)
		if (grp->sets[s]->weights)
			return true;
	return false;
}

static bool fewer_bytes_pooled(const struct shemb__step *st, int g,
			       const struct shemb__route *r)
{
	const shemb_table *t = st->groups[g].table;
	size_t rows = (size_t)t->attr.dim * shemb__dtype_bytes(t->attr.dtype);
	size_t f32 = (size_t)t->attr.dim * 4;
	size_t whole = (size_t)r->nunique * (16 + rows + f32);
	size_t pooled = (size_t)r->pair_first[r->world] * (4 + 2 * f32) +
			(size_t)r->occ_first[r->world] *
				(weighted(st, g) ? 16 : 12);

	return POOLED_BYTES_AT_MOST_PART * pooled <= whole;
}

/* Decide, and build the pairs, for table g of a lookup. */
int shemb__pool_route(const struct shemb__step *st, int g,
		      struct shemb__plan *p)
{
	struct shemb__route *r = p->route;
	int w = r->world, rc = 0;
	struct cursor cur;
	int64_t *u_of;

	r->pooled = false;
	if (!eligible(st, g) || p->nids == 0)
		return 0;
	free(r->pair_first);
	free(r->occ_first);
	r->pair_first = calloc((size_t)w + 1, sizeof(int64_t));
	r->occ_first = calloc((size_t)w + 1, sizeof(int64_t));
	cur.pair = calloc((size_t)w, sizeof(int64_t));
	cur.occ = calloc((size_t)w, sizeof(int64_t));
	cur.last_bag = calloc((size_t)w, sizeof(int64_t));
	u_of = malloc((size_t)(p->nids + 1) * sizeof(int64_t));
	if (u_of)
		shemb__plan_unique_of(p, u_of);
	if (!r->pair_first || !r->occ_first || !cur.pair || !cur.occ ||
	    !cur.last_bag || !u_of) {
		rc = SHEMB_ENOMEM;
		goto out;
	}
	walk(st, g, p, u_of, &cur, false, NULL);
	for (int o = 0; o < w; o++) {
		r->pair_first[o + 1] = r->pair_first[o] + cur.pair[o];
		r->occ_first[o + 1] = r->occ_first[o] + cur.occ[o];
	}
	if (st->groups[g].table->attr.pool_at != SHEMB_POOL_AT_OWNER &&
	    !fewer_bytes_pooled(st, g, r))
		goto out;
	rc = alloc_pairs(r, r->pair_first[w], r->occ_first[w]);
	if (rc)
		goto out;
	memcpy(cur.pair, r->pair_first, (size_t)w * sizeof(int64_t));
	memcpy(cur.occ, r->occ_first, (size_t)w * sizeof(int64_t));
	walk(st, g, p, u_of, &cur, true, NULL);
	r->pooled = true;
out:
	free(cur.pair);
	free(cur.occ);
	free(cur.last_bag);
	free(u_of);
	return rc;
}

/*
 * Backward: the weight of each id the owners pooled, from the backward's
 * own bags (which may weigh them otherwise than the lookup did), in the
 * order of the owners' ids; NULL where no set of table g has weights
 * (every weight is then the lookup's: 1, or 1 / len for MEAN).
 */
int shemb__pool_backward_coefs(const struct shemb__step *st, int g,
			       const struct shemb__plan *p, float **out)
{
	const struct shemb__route *r = p->route;
	int w = r->world, rc = 0;
	struct cursor cur;
	int64_t *u_of;
	float *coefs;

	*out = NULL;
	if (!weighted(st, g))
		return 0;
	cur.pair = calloc((size_t)w, sizeof(int64_t));
	cur.occ = malloc((size_t)w * sizeof(int64_t));
	cur.last_bag = calloc((size_t)w, sizeof(int64_t));
	u_of = malloc((size_t)(p->nids + 1) * sizeof(int64_t));
	coefs = malloc((size_t)(r->occ_first[w] + 1) * sizeof(float));
	if (cur.pair && cur.occ && cur.last_bag && u_of && coefs) {
		shemb__plan_unique_of(p, u_of);
		memcpy(cur.occ, r->occ_first, (size_t)w * sizeof(int64_t));
		walk(st, g, p, u_of, &cur, false, coefs);
		*out = coefs;
	} else {
		free(coefs);
		rc = SHEMB_ENOMEM;
	}
	free(cur.pair);
	free(cur.occ);
	free(cur.last_bag);
	free(u_of);
	return rc;
}

/* Owner: the weights peer's backward sent for its ids (at coefs) replace
 * those of its lookup. */
void shemb__pool_take_coefs(struct shemb__route *r, int peer,
			    const char *coefs)
{
	int64_t e0 = r->from_first[peer];

	memcpy(&r->coef[e0], coefs,
	       4 * (size_t)(r->from_first[peer + 1] - e0));
}

/* ---- the ids message ---- */

size_t shemb__pool_ids_bytes(const struct shemb__route *r, int o)
{
	int64_t np = r->pair_first[o + 1] - r->pair_first[o];
	int64_t no = r->occ_first[o + 1] - r->occ_first[o];

	return 8 + shemb__pad8(4 * (size_t)np) + 8 * (size_t)no +
	       shemb__pad8(4 * (size_t)no);
}

/* Table's part for owner o at `at`; returns its header count. */
int64_t shemb__pool_pack_ids(const struct shemb__route *r, int o, char *at)
{
	int64_t p0 = r->pair_first[o], np = r->pair_first[o + 1] - p0;
	int64_t o0 = r->occ_first[o], no = r->occ_first[o + 1] - o0;

	memcpy(at, &no, 8);
	at += 8;
	memcpy(at, r->pair_len + p0, 4 * (size_t)np);
	at = shemb__zero_pad(at, 4 * (size_t)np);
	memcpy(at, r->occ_id + o0, 8 * (size_t)no);
	at += 8 * (size_t)no;
	memcpy(at, r->occ_coef + o0, 4 * (size_t)no);
	shemb__zero_pad(at, 4 * (size_t)no);
	return -1 - np;
}

/* The number of ids in a pooled part at seg with header count m. */
int64_t shemb__pool_part_ids(const char *seg)
{
	int64_t no;

	memcpy(&no, seg, 8);
	return no;
}

size_t shemb__pool_part_bytes(const char *seg, int64_t m)
{
	int64_t np = -1 - m, no = shemb__pool_part_ids(seg);

	return 8 + shemb__pad8(4 * (size_t)np) + 8 * (size_t)no +
	       shemb__pad8(4 * (size_t)no);
}

/*
 * Owner: peer's pooled part at seg into the route from index `at`: an
 * entry per id, its weight and its pair.  SHEMB_EINTERNAL for an id this
 * rank does not hold.
 */
int shemb__pool_intake(const shemb_table *t, struct shemb__route *r,
		       int peer, const char *seg, int64_t m, int64_t at)
{
	int64_t np = -1 - m, no = shemb__pool_part_ids(seg), k = 0;
	const char *lens = seg + 8, *ids = lens + shemb__pad8(4 * (size_t)np);
	const char *coefs = ids + 8 * (size_t)no;

	for (int64_t pr = 0; pr < np; pr++) {
		int32_t len;

		memcpy(&len, lens + 4 * pr, 4);
		if (len < 0 || len > no - k)
			return SHEMB_EINTERNAL;
		for (int64_t end = k + len; k < end; k++) {
			int64_t id;

			memcpy(&id, ids + 8 * k, 8);
			if (shemb__route_local(&t->shard, id,
					       &r->local[at + k]))
				return SHEMB_EINTERNAL;
			r->occ[at + k] = 1;
			r->pair[at + k] = pr;
		}
	}
	memcpy(&r->coef[at], coefs, 4 * (size_t)no);
	r->npairs[peer] = np;
	for (int q = peer + 1; q <= r->world; q++)
		r->from_first[q] = at + no;
	return k == no ? 0 : SHEMB_EINTERNAL;
}

/* Owner: one pooled fp32 row per pair of peer's part, into out. */
int shemb__pool_serve(struct shemb__step *st, shemb_table *t,
		      const struct shemb__route *r, int peer, const char *seg,
		      int64_t m, char *out)
{
	shemb_ctx *ctx = st->ctx;
	int64_t np = -1 - m, e0 = r->from_first[peer];
	size_t bytes = (size_t)np * (size_t)t->attr.dim * sizeof(float);
	int64_t *offsets = malloc((size_t)(np + 1) * sizeof(int64_t));
	float *rows = malloc(bytes + 8);
	struct shemb__pool_job job = {
		.store = &t->store,
		.pooling = SHEMB_POOL_SUM,
		.nbags = np,
		.nids = r->from_first[peer + 1] - e0,
		.offsets = offsets,
		.ids = r->local + e0,
		.weights = r->coef + e0,
		.out = rows,
	};
	int rc = offsets && rows ? 0 : SHEMB_ENOMEM;

	for (int64_t pr = 0; !rc && pr <= np; pr++) {
		int32_t len = 0;

		if (pr > 0)
			memcpy(&len, seg + 8 + 4 * (pr - 1), 4);
		offsets[pr] = pr ? offsets[pr - 1] + len : 0;
	}
	if (!rc && np) {
		struct shemb__rows_view v;

		rc = shemb__rows_acquire(t, job.nids, job.ids, false,
					 shemb__lookup_use(st), &v);
		job.store = v.store;
		job.ids = v.at;
		if (!rc)
			rc = ctx->mem->gather_pool(ctx->be, &job);
		shemb__rows_release(t, &v);
	}
	if (!rc)
		memcpy(out, rows, bytes);
	free(offsets);
	free(rows);
	return rc;
}

/* ---- the rank that asked ---- */

static float *out_row(const struct shemb__step *st, int g,
		      const struct shemb__plan *p, float *const *out,
		      int64_t pb)
{
	const struct shemb__group *grp = &st->groups[g];
	int s = grp->nsets - 1;

	while (s > 0 && p->sets[s].bag_base > pb)
		s--;
	return out[grp->index[s]] +
	       (size_t)(pb - p->sets[s].bag_base) *
		       (size_t)grp->table->attr.dim;
}

/* Every bag of table g: the owners' rows added in rank order; rows_at[o]
 * is where owner o's rows of the table start. */
void shemb__pool_combine(const struct shemb__step *st, int g,
			 const struct shemb__plan *p, float *const *out,
			 const char *const *rows_at)
{
	const struct shemb__group *grp = &st->groups[g];
	const struct shemb__route *r = p->route;
	int dim = grp->table->attr.dim;

	for (int s = 0; s < grp->nsets; s++)
		memset(out[grp->index[s]], 0,
		       (size_t)grp->sets[s]->nbags * (size_t)dim *
			       sizeof(float));
	for (int o = 0; o < r->world; o++) {
		const char *from = rows_at[o];

		for (int64_t k = r->pair_first[o]; k < r->pair_first[o + 1];
		     k++, from += (size_t)dim * sizeof(float)) {
			float *dst = out_row(st, g, p, out, r->pair_bag[k]);
			float v[SHEMB_MAX_DIM];

			memcpy(v, from, (size_t)dim * sizeof(float));
			for (int c = 0; c < dim; c++)
				dst[c] += v[c];
		}
	}
}

/* Backward: the gradient row of each of owner o's pairs (its bag's), at
 * `at`. */
void shemb__pool_pack_grads(const struct shemb__step *st, int g,
			    const struct shemb__plan *p,
			    const float *const *grad, int o, char *at)
{
	const struct shemb__group *grp = &st->groups[g];
	const struct shemb__route *r = p->route;
	size_t row = (size_t)grp->table->attr.dim * sizeof(float);

	for (int64_t k = r->pair_first[o]; k < r->pair_first[o + 1]; k++) {
		int64_t pb = r->pair_bag[k];
		int s = grp->nsets - 1;

		while (s > 0 && p->sets[s].bag_base > pb)
			s--;
		memcpy(at, (const char *)grad[grp->index[s]] +
				   (size_t)(pb - p->sets[s].bag_base) * row,
		       row);
		at += row;
	}
}
