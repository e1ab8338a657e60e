/*
 * dist_relax.c - a backward and the lookup started behind it, run
 * together (dependency relaxation).
 *
 * The lookup needs the backward's update only for the rows the backward
 * changes, and an owner knows those before any gradient arrives: they
 * are the rows its route of the last lookup holds (dist.h).  So the two
 * steps interleave:
 *
 *   gradients out (SHEMB_PRIO_GRAD); the lookup opens and its ids go out
 *   and come in (SHEMB_PRIO_LOOKUP, ahead of the gradients); each owner
 *   sends the rows the backward leaves alone ("early"); the gradients
 *   land and the update is applied; the owners send the updated rows
 *   ("late"); each rank pools, as the lookup alone would.
 *
 * Every row is read where the strict order would read it, before or
 * after an update that changes it or not, so the outputs are the same,
 * bit for bit.  All ranks run the pair this way or none does: the
 * backward's opening record carries each rank's offer, and the pair runs
 * relaxed only when every rank offers.  A rank offers when the lookup's
 * input passed its checks and its tables are among the backward's (whose
 * exclusive locks then cover them).  On a GPU context the early reads
 * and the update are calls of the backend, each done when it returns, so
 * the order is the same as on the CPU; outputs in device memory are
 * pooled on the host and copied up at the end, as in a lookup alone.
 *
 * A table with a device tier reads its early rows through the tier
 * before the backward's update, which may move other rows in and out:
 * values do not depend on where a row lives.  Its lookup's plan (the
 * rows kept for its backward) begins once the backward has ended the
 * last one, as in the strict order, and takes the early rows in then.
 *
 * Early message, owner to requester, per table of the call whose rows
 * travel whole: a bitmap of the rows asked for (bit set: sent now),
 * padded to 8 bytes, then those rows, padded to 8 bytes.  Late message,
 * per table: the other rows, padded to 8 bytes, or the whole answer of a
 * part the owner pools.  The requester merges both into the layout of
 * the lookup's one rows message and pools from it.
 */
#include "lib/dist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/comm.h"
#include "lib/radix.h"
#include "lib/stepq.h"
#include "lib/tier.h"

struct relax {
	shemb_ctx *ctx;
	struct shemb__step *bst, lst;     /* the backward, the lookup */
	struct shemb__plan **plans;       /* the lookup's */
	struct shemb__xchg ids, early, late, rows;
	size_t *parts;         /* where each part of the ids message starts */
	int ids_refused;       /* their exchange refused here (no memory):
				* its status; the meetings after it still
				* run (send_early) */
	uint8_t **is_early;    /* per table: per id received, sent early */
	shemb_request *ereq;   /* the early rows in flight */
	float **hout;          /* the lookup's outputs, on the host */
	int status;            /* this rank's failure after the early
				* rows' record, and its detail */
	char why[256];
};

/* ---- whether the pair can run relaxed ---- */

static bool in_backward(const struct shemb__step *b, const shemb_table *t)
{
	for (int g = 0; g < b->ngroups; g++)
		if (b->groups[g].table == t)
			return true;
	return false;
}

static bool relaxable(const struct shemb__step *l,
		      const struct shemb__step *b)
{
	for (int g = 0; g < l->ngroups; g++) {
		const shemb_table *t = l->groups[g].table;

		if (!in_backward(b, t))
			return false;
	}
	return true;
}

/* ---- owner: which rows go early ---- */

static const int64_t *ids_header(const struct relax *r, int p)
{
	return (const int64_t *)(r->ids.rbuf + r->ids.rdispl[p]);
}

static size_t own_row_bytes(const struct relax *r, const shemb_table *t)
{
	return shemb__lookup_row_bytes(&r->lst, t, t->shard.rank);
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

/* The local rows the backward updates on this rank: a bitmap over the
 * table's rows where it is not much larger than the rows' list, else
 * the list sorted. */
struct touched {
	uint8_t *bits;
	int64_t *rows;
	int64_t n;
};

/* Local rows (not negative) rows[0 .. n), sorted into tr. */
static int sorted_rows(const int64_t *rows, int64_t n, struct touched *tr)
{
	uint64_t *keys = malloc(((size_t)n + 1) * sizeof(*keys)), max = 0;
	int rc = keys ? 0 : SHEMB_ENOMEM;

	for (int64_t i = 0; !rc && i < n; i++) {
		keys[i] = (uint64_t)rows[i];
		max = keys[i] > max ? keys[i] : max;
	}
	if (!rc)
		rc = shemb__radix_sort(&keys, n, 0, shemb__bits_for(max));
	if (rc) {
		free(keys);
		return rc;
	}
	tr->rows = (int64_t *)keys;
	tr->n = n;
	return 0;
}

/* Those its route of the last lookup received (a replicated table: none
 * needed, its lookups have no exchange). */
static int touched_make(const shemb_table *t, struct touched *tr)
{
	const struct shemb__route *old = t->plan ? t->plan->route : NULL;
	int64_t n = old && old->from_first ? old->from_first[old->world] : 0;
	size_t nbits = (size_t)t->store.rows;

	memset(tr, 0, sizeof(*tr));
	if (nbits / 8 <= 64 * ((size_t)n + 1024)) {
		tr->bits = calloc(nbits / 8 + 1, 1);
		for (int64_t i = 0; tr->bits && i < n; i++)
			tr->bits[old->local[i] / 8] |=
				(uint8_t)(1u << (old->local[i] % 8));
		return tr->bits ? 0 : SHEMB_ENOMEM;
	}
	return sorted_rows(old->local, n, tr);
}

static bool touched(const struct touched *tr, int64_t row)
{
	if (tr->bits)
		return (tr->bits[row / 8] >> (row % 8)) & 1;
	return bsearch(&row, tr->rows, (size_t)tr->n, sizeof(row),
		       cmp_i64) != NULL;
}

/* Table g's ids received: early or not, and each peer's bytes of both
 * messages. */
static int classify_table(struct relax *r, int g)
{
	shemb_table *t = r->lst.groups[g].table;
	const struct shemb__route *nr = r->plans[g]->route;
	size_t rb = own_row_bytes(r, t);
	int64_t all = nr->from_first[nr->world];
	struct touched tr;
	int rc = touched_make(t, &tr);

	r->is_early[g] = calloc((size_t)all + 1, 1);
	if (rc || !r->is_early[g]) {
		free(tr.bits);
		free(tr.rows);
		return SHEMB_ENOMEM;
	}
	for (int p = 0; p < nr->world; p++) {
		int64_t m = ids_header(r, p)[g], lo = nr->from_first[p];
		int64_t n = nr->from_first[p + 1] - lo, k = 0;

		if (m < 0) { /* pooled here: all of it after the update */
			r->late.scount[p] += (size_t)nr->npairs[p] *
					     shemb__pooled_row_bytes(t);
			continue;
		}
		for (int64_t i = lo; i < lo + n; i++) {
			r->is_early[g][i] = !touched(&tr, nr->local[i]);
			k += r->is_early[g][i];
		}
		r->early.scount[p] += shemb__pad8(((size_t)n + 7) / 8) +
				      shemb__pad8((size_t)k * rb);
		r->late.scount[p] += shemb__pad8((size_t)(n - k) * rb);
	}
	free(tr.bits);
	free(tr.rows);
	return 0;
}

static int classify(struct relax *r)
{
	int ng = r->lst.ngroups, rc = 0;

	r->is_early = calloc((size_t)ng + 1, sizeof(*r->is_early));
	if (!r->is_early)
		return shemb__fail(r->ctx, SHEMB_ENOMEM, "no memory");
	for (int g = 0; !rc && g < ng; g++)
		rc = classify_table(r, g);
	return rc ? shemb__fail(r->ctx, rc, "no memory") : 0;
}

/* Owner: table g's rows asked for by peer p (its ids lo .. lo + n) that
 * go early (want true) or late, read into at; returns how many. */
static int64_t read_some(struct relax *r, int g, int64_t lo, int64_t n,
			 bool want, char *at, int *rc)
{
	shemb_table *t = r->lst.groups[g].table;
	const struct shemb__route *nr = r->plans[g]->route;
	int64_t *rows = malloc(((size_t)n + 1) * sizeof(*rows)), k = 0;

	if (!rows) {
		*rc = SHEMB_ENOMEM;
		return 0;
	}
	for (int64_t i = lo; i < lo + n; i++)
		if ((bool)r->is_early[g][i] == want)
			rows[k++] = nr->local[i];
	*rc = k ? shemb__lookup_read_owned(&r->lst, t, k, rows, at) : 0;
	free(rows);
	return k;
}

/* Peer p's early message: per table a bitmap, then the rows.  Once a
 * read failed (rc, or one here), the rest is still laid out whole, the
 * rows zeroed: the peers take the message apart and learn of the failure
 * at the meeting before the late rows, instead of failing on a message
 * that does not match what they asked for. */
static int fill_early(struct relax *r, int p, uint64_t *sent, int rc)
{
	char *at = r->early.sbuf + r->early.sdispl[p];

	for (int g = 0; g < r->lst.ngroups; g++) {
		const struct shemb__route *nr = r->plans[g]->route;
		int64_t lo = nr->from_first[p], n = nr->from_first[p + 1] - lo;
		size_t bm = ((size_t)n + 7) / 8;
		size_t rb = own_row_bytes(r, r->lst.groups[g].table);
		int64_t k = 0;

		if (ids_header(r, p)[g] < 0)
			continue;
		memset(at, 0, shemb__pad8(bm));
		for (int64_t i = 0; i < n; i++) {
			if (r->is_early[g][lo + i]) {
				at[i / 8] |= (char)(1u << (i % 8));
				k++;
			}
		}
		at += shemb__pad8(bm);
		if (!rc)
			read_some(r, g, lo, n, true, at, &rc);
		if (rc) /* the rows' room, not read */
			memset(at, 0, (size_t)k * rb);
		sent[g] += (uint64_t)k;
		at = shemb__zero_pad(at, (size_t)k * rb);
	}
	return rc;
}

/* Peer p's late message: the rest, and the parts pooled here. */
static int fill_late(struct relax *r, int p)
{
	char *at = r->late.sbuf + r->late.sdispl[p];
	int rc = 0;

	for (int g = 0; !rc && g < r->lst.ngroups; g++) {
		shemb_table *t = r->lst.groups[g].table;
		const struct shemb__route *nr = r->plans[g]->route;
		int64_t m = ids_header(r, p)[g], lo = nr->from_first[p];
		int64_t n = nr->from_first[p + 1] - lo, k;

		if (m < 0) {
			size_t part = r->parts[(size_t)p * r->lst.ngroups + g];

			rc = shemb__pool_serve(&r->lst, t, nr, p,
					       r->ids.rbuf + part, m, at);
			at += (size_t)nr->npairs[p] *
			      shemb__pooled_row_bytes(t);
			continue;
		}
		k = read_some(r, g, lo, n, false, at, &rc);
		at = shemb__zero_pad(at, (size_t)k * own_row_bytes(r, t));
	}
	return rc;
}

/* ---- requester: what the owners' messages hold ---- */

/* The distinct ids of table g this rank asked owner p for. */
static int64_t asked(const struct relax *r, int g, int p)
{
	const shemb_table *t = r->lst.groups[g].table;
	int64_t lo, hi;

	if (t->shard.kind == SHEMB_SHARD_REPLICATED)
		return 0;
	shemb__route_slots(r->plans[g]->route, p, &lo, &hi);
	return hi - lo;
}

static int64_t bits_set(const uint8_t *bm, int64_t n)
{
	int64_t k = 0;

	for (int64_t i = 0; i < n; i++)
		k += (bm[i / 8] >> (i % 8)) & 1;
	return k;
}

/* From the early message of owner p, the bytes of its late one. */
static int late_count(struct relax *r, int p)
{
	const char *e = r->early.rbuf + r->early.rdispl[p];
	const char *end = e + r->early.rcount[p];

	r->late.rcount[p] = 0;
	for (int g = 0; g < r->lst.ngroups; g++) {
		const shemb_table *t = r->lst.groups[g].table;
		int64_t n = asked(r, g, p), k;
		size_t rb = shemb__lookup_row_bytes(&r->lst, t, p);
		size_t bm = shemb__pad8(((size_t)n + 7) / 8);

		if (r->plans[g]->route->pooled) {
			r->late.rcount[p] += shemb__lookup_rows_in(
				&r->lst, r->plans, g, p);
			continue;
		}
		if ((size_t)(end - e) < bm)
			break;
		k = bits_set((const uint8_t *)e, n);
		e += bm + shemb__pad8((size_t)k * rb);
		r->late.rcount[p] += shemb__pad8((size_t)(n - k) * rb);
	}
	if (e != end)
		return shemb__fail(r->ctx, SHEMB_EINVAL, "rank %d sent early "
				   "rows that do not match the ids asked for",
				   p);
	return 0;
}

/* Owner p's rows of table g, in the order asked for, from both
 * messages into *dst; the three cursors advance. */
static void merge_part(struct relax *r, int g, int p, const char **e,
		       const char **l, char **dst)
{
	const shemb_table *t = r->lst.groups[g].table;
	int64_t n = asked(r, g, p), k = 0, j = 0;
	size_t rb = shemb__lookup_row_bytes(&r->lst, t, p);
	const uint8_t *bm = (const uint8_t *)*e;
	const char *er = *e + shemb__pad8(((size_t)n + 7) / 8);

	if (r->plans[g]->route->pooled) {
		size_t b = shemb__lookup_rows_in(&r->lst, r->plans, g, p);

		memcpy(*dst, *l, b);
		*dst += b;
		*l += b;
		return;
	}
	for (int64_t i = 0; i < n; i++, *dst += rb) {
		if ((bm[i / 8] >> (i % 8)) & 1)
			memcpy(*dst, er + (size_t)k++ * rb, rb);
		else
			memcpy(*dst, *l + (size_t)j++ * rb, rb);
	}
	*e = er + shemb__pad8((size_t)k * rb);
	*l += shemb__pad8((size_t)j * rb);
}

/* Room for the lookup's one rows message, which merge() builds. */
static int merge_room(struct relax *r)
{
	shemb__lookup_count_rows(&r->lst, r->plans, &r->rows);
	for (int p = 0; p < r->rows.world; p++)
		r->rows.scount[p] = 0; /* only the received side is built */
	if (shemb__xchg_alloc(&r->rows))
		return shemb__fail(r->ctx, SHEMB_ENOMEM, "no memory");
	return 0;
}

/* Both messages into the layout of the lookup's one rows message. */
static void merge(struct relax *r)
{
	for (int p = 0; p < r->rows.world; p++) {
		const char *e = r->early.rbuf + r->early.rdispl[p];
		const char *l = r->late.rbuf + r->late.rdispl[p];
		char *dst = r->rows.rbuf + r->rows.rdispl[p];

		for (int g = 0; g < r->lst.ngroups; g++)
			merge_part(r, g, p, &e, &l, &dst);
	}
}

/* ---- the pair ---- */

static void count_early(struct relax *r, const uint64_t *sent)
{
	for (int g = 0; g < r->lst.ngroups; g++) {
		shemb_table *t = r->lst.groups[g].table;

		SHEMB__STAT_ADD(t, relaxed_lookups, r->lst.groups[g].nsets);
		SHEMB__STAT_ADD(t, early_rows, sent[g]);
	}
}

/* The early rows' record, then the rows themselves, started.  A failure
 * before the record fails the lookup on every rank; one after it is kept
 * for the meeting before the late rows. */
static int send_early(struct relax *r)
{
	int world = r->ctx->attr.world_size, rc;
	uint64_t *sent = calloc((size_t)r->lst.ngroups + 1, sizeof(*sent));
	uint64_t t0 = shemb__now_ns();

	rc = r->ids_refused ? r->ids_refused
			    : shemb__xchg_run(r->ctx, &r->ids);
	shemb__phase_time(&r->lst, SHEMB_PHASE_IDS, shemb__now_ns() - t0);
	r->parts = calloc((size_t)world * (size_t)r->lst.ngroups + 1,
			  sizeof(size_t));
	if (!rc && (!r->parts || !sent))
		rc = shemb__fail(r->ctx, SHEMB_ENOMEM, "no memory");
	if (!rc)
		rc = shemb__lookup_take_in(&r->lst, r->plans, &r->ids,
					   r->parts);
	if (!rc)
		rc = classify(r);
	rc = shemb__dist_agree(r->ctx, SHEMB__DIST_EARLY,
			       rc ? 0
				  : shemb__dist_signature(SHEMB__DIST_LOOKUP,
							  &r->lst),
			       rc, &r->early);
	if (!rc && shemb__xchg_alloc(&r->early)) {
		/* the peers, agreed, start the early rows: refused, and the
		 * meeting before the late rows tells them of it too */
		r->status = shemb__fail(r->ctx, SHEMB_ENOMEM, "no memory for "
					"the early rows");
		snprintf(r->why, sizeof(r->why), "%s",
			 shemb_ctx_last_error(r->ctx));
		shemb__xchg_refuse(r->ctx, r->status, r->why);
		free(sent);
		return 0;
	}
	if (rc) {
		free(sent);
		return rc;
	}
	for (int p = 0; p < world; p++)
		r->status = fill_early(r, p, sent, r->status);
	if (r->status) { /* the cause, recorded by the read, kept */
		snprintf(r->why, sizeof(r->why), "%s",
			 shemb_ctx_last_error(r->ctx));
		r->status = shemb__fail(r->ctx, r->status, "reading rows for "
					"the lookup: %s", r->why);
	} else {
		count_early(r, sent);
	}
	free(sent);
	/* sent even so: the peers expect it, and the meeting before the
	 * late rows tells them of the failure */
	rc = shemb__xchg_start(r->ctx, &r->early, &r->ereq);
	r->status = r->status ? r->status : rc;
	if (r->status) /* the backward's calls come in between */
		snprintf(r->why, sizeof(r->why), "%s",
			 shemb_ctx_last_error(r->ctx));
	return 0;
}

/* Once the update is applied: the early rows in, the late ones out and
 * in, and the pooling, whose memory is taken (and replicated tables
 * pooled) before the ranks meet: once they agreed, none fails alone. */
static int send_late(struct relax *r, float *const *out)
{
	int world = r->ctx->attr.world_size, rc = r->status;
	uint64_t t0 = shemb__now_ns();
	struct shemb__pool_bufs bufs = { 0 };

	if (rc)
		shemb__fail(r->ctx, rc, "%s", r->why);
	if (r->ereq) {
		int end = shemb_wait(r->ereq);

		rc = rc ? rc : end;
	}
	for (int p = 0; !rc && p < world; p++)
		rc = late_count(r, p);
	if (!rc && shemb__xchg_alloc(&r->late))
		rc = shemb__fail(r->ctx, SHEMB_ENOMEM, "no memory");
	for (int p = 0; !rc && p < world; p++)
		rc = fill_late(r, p);
	if (!rc)
		rc = merge_room(r);
	if (!rc)
		rc = shemb__lookup_pool_prepare(&r->lst, r->plans, world, out,
						&bufs);
	rc = shemb__dist_all_ok(r->ctx, rc, "its rows of this lookup");
	if (!rc)
		rc = shemb__xchg_run(r->ctx, &r->late);
	shemb__phase_time(&r->lst, SHEMB_PHASE_ROWS, shemb__now_ns() - t0);
	if (!rc) {
		merge(r);
		rc = shemb__lookup_pool_rows(&r->lst, r->plans, &r->rows, out,
					     &bufs);
	}
	shemb__lookup_pool_bufs_free(&r->lst, &bufs);
	return rc;
}

static void relax_free(struct relax *r)
{
	for (int g = 0; r->is_early && g < r->lst.ngroups; g++)
		free(r->is_early[g]);
	free(r->is_early);
	free(r->parts);
	shemb_request_free(r->ereq);
	shemb__xchg_free(r->ctx, &r->ids);
	shemb__xchg_free(r->ctx, &r->early);
	shemb__xchg_free(r->ctx, &r->late);
	shemb__xchg_free(r->ctx, &r->rows);
}

/* The lookup's part before the update: plans, ids, early rows. */
static int lookup_before(struct relax *r)
{
	int world = r->ctx->attr.world_size, rc = 0;
	int was = shemb__traffic_prio(r->ctx, SHEMB_PRIO_LOOKUP);

	if (shemb__xchg_init(&r->early, world) ||
	    shemb__xchg_init(&r->late, world) ||
	    shemb__xchg_init(&r->rows, world))
		rc = shemb__fail(r->ctx, SHEMB_ENOMEM, "no memory");
	r->plans = shemb__lookup_then_plans(&r->lst, &rc);
	rc = shemb__dist_lookup_open(&r->lst, r->plans, rc,
				     SHEMB__DIST_LOOKUP, &r->ids,
				     &r->ids_refused);
	if (!rc || r->ids_refused)
		rc = send_early(r);
	shemb__traffic_prio(r->ctx, was);
	return rc;
}

/* Once the backward ended its plan: the lookup's begins, with the rows
 * already read (tables with a device tier; a lookup that keeps no plan
 * has none). */
static void begin_plans(struct relax *r)
{
	for (int g = 0; r->lst.planned && g < r->lst.ngroups; g++) {
		shemb_table *t = r->lst.groups[g].table;
		const struct shemb__route *nr;
		int64_t *rows, all, k = 0;

		if (!shemb__tiered(t))
			continue;
		shemb__tier_plan_begin(t, &r->lst.groups[g].begun);
		if (!r->is_early || !r->is_early[g] || !r->plans ||
		    !r->plans[g] || !r->plans[g]->route)
			continue;
		nr = r->plans[g]->route;
		all = nr->from_first[nr->world];
		rows = malloc(((size_t)all + 1) * sizeof(*rows));
		for (int64_t i = 0; rows && i < all; i++)
			if (r->is_early[g][i])
				rows[k++] = nr->local[i];
		/* without memory, the rows only lose their place: the
		 * backward loads them again if they were evicted */
		if (rows)
			shemb__tier_plan_mark(t, k, rows);
		free(rows);
	}
}

static int lookup_after(struct relax *r, float *const *out)
{
	int was = shemb__traffic_prio(r->ctx, SHEMB_PRIO_LOOKUP);
	int rc = send_late(r, r->hout);

	if (!rc)
		rc = shemb__step_deliver_outs(&r->lst, out, r->hout);

	shemb__traffic_prio(r->ctx, was);
	return rc;
}

/* The backward alone, as shemb__dist_backward() runs it. */
static int backward_alone(struct shemb__step *st, struct shemb__dist_bwd *b)
{
	uint64_t t0 = shemb__now_ns();
	int rc = shemb__xchg_run(st->ctx, &b->x);

	shemb__phase_time(st, SHEMB_PHASE_GRADS, shemb__now_ns() - t0);
	return rc ? rc : shemb__dist_backward_apply(st, b);
}

/*
 * The pair: gradients started first, the lookup's ids and early rows
 * while they travel, then the update, then the late rows.  The order of
 * the collectives is the same on every rank.
 */
static int run_pair(struct relax *r, struct shemb__dist_bwd *b,
		    struct shemb__then *then)
{
	shemb_request *greq = NULL;
	uint64_t t0 = shemb__now_ns(), g0;
	char bwhy[512] = "";
	int brc = b->refused ? b->refused
			     : shemb__xchg_start(r->ctx, &b->x, &greq);
	int lrc;

	lrc = lookup_before(r);
	g0 = shemb__now_ns();
	if (!brc)
		brc = shemb_wait(greq);
	shemb_request_free(greq);
	shemb__phase_time(r->bst, SHEMB_PHASE_GRADS, shemb__now_ns() - g0);
	if (!brc)
		brc = shemb__dist_backward_apply(r->bst, b);
	if (brc)
		snprintf(bwhy, sizeof(bwhy), "%s",
			 shemb_ctx_last_error(r->ctx));
	else
		shemb__backward_done(r->bst);
	begin_plans(r);
	if (!lrc)
		lrc = lookup_after(r, then->out);
	for (int g = 0; g < r->lst.ngroups; g++)
		SHEMB__STAT_ADD(r->lst.groups[g].table, exchange_ns,
				shemb__now_ns() - t0);
	then->status = lrc;
	if (lrc)
		snprintf(then->why, sizeof(then->why), "%s",
			 shemb_ctx_last_error(r->ctx));
	return brc ? shemb__fail(r->ctx, brc, "%s", bwhy) : 0;
}

struct offer_arg {
	struct relax *r;
	struct shemb__then *then;
	bool begun;        /* r->lst holds the lookup's step */
};

/* Whether this rank offers to run the lookup queued behind the backward
 * relaxed: asked for as late as the backward can, to give the caller
 * time to queue it. */
static unsigned offer_relax(void *arg, int status)
{
	struct offer_arg *o = arg;
	struct relax *r = o->r;

	if (status || !o->then->fetch(o->then) ||
	    shemb__lookup_then_begin(&r->lst, r->ctx, o->then))
		return 0;
	o->begun = true;
	if (!relaxable(&r->lst, r->bst) ||
	    shemb__step_host_outs(&r->lst, o->then->out, &r->hout))
		return 0;
	return SHEMB__OFFER_RELAX;
}

int shemb__dist_relaxed(struct shemb__step *st, const float *const *grad,
			int status, struct shemb__then *then)
{
	struct relax r = { .ctx = st->ctx, .bst = st };
	struct offer_arg o = { .r = &r, .then = then };
	struct shemb__offer offer = { .make = offer_relax, .arg = &o };
	struct shemb__dist_bwd b;
	int rc = shemb__dist_backward_open(st, grad, status, &offer, &b);

	/* a rank that refused the gradients' exchange still runs the
	 * lookup beside it, as the others do */
	then->ran = (!rc || b.refused) && (offer.agreed & SHEMB__OFFER_RELAX);
	if (then->ran) {
		rc = run_pair(&r, &b, then);
		relax_free(&r);
		shemb__lookup_then_end(&r.lst, r.plans, then->status);
	} else {
		if (o.begun)
			shemb__step_end(&r.lst);
		if (!rc)
			rc = backward_alone(st, &b);
	}
	shemb__dist_backward_close(st, &b);
	return rc;
}
