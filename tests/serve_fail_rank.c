/*
 * serve_fail_rank.c - one rank of tests/test_serve_fail.sh: an owner that
 * fails to serve one table of a lookup of several, after the ids went
 * out.  The lookup's rows go back table by table (lib/dist_lookup.c), so
 * the tables before the failing one may already be on their way; the
 * owner then refuses the failing table and those after it.
 *
 * Usage: serve_fail_rank [--pool-at-owner] [--caller] [--failures N]
 *
 * Tables A, B and C keep their rows in host memory; table F, owned by
 * rank 1, keeps its rows in a device tier of CACHE_ROWS rows (as does G,
 * owned by rank 2 or 0), so a call
 * that needs more distinct rows of it than that fails at its owner with
 * SHEMB_ENOMEM while the owner serves it.  With F first, second and last
 * of three tables, blocking and started without waiting:
 *
 *   - a lookup whose F ids fit the tier: every output equals the sum of
 *     the rows read from a one-rank reference context of the same
 *     tables, pooled by a loop here;
 *   - one whose F ids do not: it fails on every rank with the owner's
 *     SHEMB_ENOMEM and its detail (naming cache_rows), which the other
 *     ranks give as "rank 1: ..."; started, every output reports the
 *     error too;
 *   - then the fitting lookup again, equal to the reference: the failed
 *     one changed nothing and left the ranks' collectives in step;
 *   - the same two lookups started right behind a backward of zero
 *     gradients, where they run relaxed (lib/dist_relax.c): the same,
 *     the other ranks' detail being "rank 1 failed its rows of this
 *     lookup (...): ..." with the cause, and the backwards succeed;
 *   - STORM calls in a row whose two tables' owners both fail (G is
 *     owned by another rank than F; see storm()), then a fitting call,
 *     exact;
 *   - N failing calls in a row (default 1500), then a fitting call,
 *     exact (many_failures());
 *
 * and at the end every row of every table still reads as the
 * reference's.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <shemb.h>

static int rank, world;

#include "rank_check.h"

#define ROWS 64
#define DIM 8
#define NBAGS 4
#define IDS_PER_BAG 3
#define CACHE_ROWS 6
#define NTABLES 5 /* A, B, C, F, G */
#define F 3
#define G 4
#define NCALL 3
#define STORM 80
#define SLOW_ROWS 65536 /* H: rows G's owner serves first in a storm call */
#define SLOW_IDS 16384  /* ... ids of them each rank asks for */

static shemb_ctx *ctx, *ref;
static shemb_table *tab[NTABLES], *ref_tab[NTABLES];
static float ref_rows[NTABLES][ROWS * DIM];
static shemb_table *slow[2]; /* H, of G's owner; H1, of F's */
static int pool_at = SHEMB_POOL_AT_REQUESTER;

static void make_table(int i)
{
	struct shemb_table_attr a;

	shemb_table_attr_init(&a);
	a.rows = ROWS;
	a.dim = DIM;
	a.table_id = 40 + i;
	a.seed = 11;
	a.shard = SHEMB_SHARD_TABLE;
	a.pool_at = pool_at;
	a.shard_owner = i == F ? 1 : i == G ? 2 % world : i % world;
	if (i >= F)
		a.cache_rows = CACHE_ROWS;
	CHECK_RC(ctx, shemb_table_create(ctx, &a, &tab[i]));
	a.shard_owner = -1;
	a.cache_rows = 0;
	CHECK_RC(ref, shemb_table_create(ref, &a, &ref_tab[i]));
}

/* Every row of the reference's tables, read once. */
static void read_reference(void)
{
	int64_t ids[ROWS];

	for (int64_t r = 0; r < ROWS; r++)
		ids[r] = r;
	for (int i = 0; i < NTABLES; i++)
		CHECK_RC(ref, shemb_table_read_rows(ref_tab[i], ROWS, ids,
						    ref_rows[i], SHEMB_F32));
}

/* The ids of one bag set: of F, within the first CACHE_ROWS rows on
 * every rank (fits), or mostly rows of this rank's own beyond them, more
 * than the tier holds (does not), even those alone that a backward
 * before leaves untouched (a relaxed lookup makes them resident apart
 * from the others). */
static void make_ids(int table, bool fits, int64_t *ids)
{
	for (int j = 0; j < NBAGS * IDS_PER_BAG; j++) {
		uint64_t z = mix((uint64_t)(rank * 1000 + table * 100 + j));

		if (table < F)
			ids[j] = (int64_t)(z % ROWS);
		else if (fits || j % 4 == 3)
			ids[j] = (int64_t)(z % CACHE_ROWS);
		else /* 9 distinct per rank, beyond the tier */
			ids[j] = CACHE_ROWS + rank * NBAGS * IDS_PER_BAG + j;
	}
}

struct call {
	struct shemb_bags bags[NCALL];
	int64_t ids[NCALL][NBAGS * IDS_PER_BAG];
	int64_t offsets[NBAGS + 1];
	float out[NCALL][NBAGS * DIM];
	float *outp[NCALL];
};

/* Tables in this order: F at position fpos, A, B, C around it. */
static void make_call(struct call *c, int fpos, bool fits)
{
	int others = 0;

	for (int b = 0; b <= NBAGS; b++)
		c->offsets[b] = b * IDS_PER_BAG;
	for (int i = 0; i < NCALL; i++) {
		int table = i == fpos ? F : others++;

		make_ids(table, fits, c->ids[i]);
		shemb_bags_init(&c->bags[i]);
		c->bags[i].table = tab[table];
		c->bags[i].nbags = NBAGS;
		c->bags[i].offsets = c->offsets;
		c->bags[i].nids = NBAGS * IDS_PER_BAG;
		c->bags[i].ids = c->ids[i];
		c->outp[i] = c->out[i];
		memset(c->out[i], 0, sizeof(c->out[i]));
	}
}

static int table_index(const shemb_table *t)
{
	for (int i = 0; i < NTABLES; i++)
		if (tab[i] == t)
			return i;
	FAIL("a table not made here");
	return -1;
}

/* Each output against the reference's rows, summed bag by bag here. */
static void check_outputs(const struct call *c, const char *what)
{
	for (int i = 0; i < NCALL; i++) {
		int ti = table_index(c->bags[i].table);

		for (int b = 0; b < NBAGS; b++) {
			for (int d = 0; d < DIM; d++) {
				double want = 0;

				for (int64_t k = c->offsets[b];
				     k < c->offsets[b + 1]; k++)
					want += ref_rows[ti][c->ids[i][k] * DIM
							     + d];
				if (fabs(c->out[i][b * DIM + d] - want) >
				    1e-5 * (1 + fabs(want)))
					FAIL("%s: table %d bag %d column %d: "
					     "%g, the reference %g", what, ti,
					     b, d, c->out[i][b * DIM + d],
					     want);
			}
		}
	}
}

static int run_lookup(struct call *c, bool started)
{
	shemb_request *req;
	int rc;

	if (!started)
		return shemb_lookup(ctx, NCALL, c->bags, c->outp,
				    SHEMB_LOOKUP_NO_GRAD);
	CHECK_RC(ctx, shemb_lookup_start(ctx, NCALL, c->bags, c->outp,
					 SHEMB_LOOKUP_NO_GRAD, &req));
	rc = shemb_wait(req);
	/* a lookup that failed gives its error for every output */
	for (int i = 0; i < NCALL; i++) {
		int part = shemb_wait_part(req, i);

		if (part != rc)
			FAIL("output %d reports %d (%s), the lookup %d (%s)",
			     i, part, shemb_strerror(part), rc,
			     shemb_strerror(rc));
	}
	shemb_request_free(req);
	return rc;
}

/* Whether rc and the detail recorded are an owner's refusal to load
 * more rows than its tier holds, as seen on any rank. */
static bool owner_cause(int rc)
{
	return rc == SHEMB_ENOMEM &&
	       strstr(shemb_ctx_last_error(ctx), "(cache_rows)");
}

static int failed_relaxed; /* failing lookups that went relaxed */

/* Every rank fails with the owner's status and cause, which the others
 * give behind its rank: "rank 1: ...", or relaxed (the allgather of
 * lib/dist_relax.c) "rank 1 failed its rows of this lookup (...): ...",
 * the owner's own then not the "serving rank R: ..." of a lookup that
 * did not run relaxed. */
static void check_failure(int rc, int fpos, const char *how, bool relaxed)
{
	const char *why = shemb_ctx_last_error(ctx);

	if (rc == 0)
		FAIL("F at %d (%s): a lookup needing more rows than F's "
		     "tier holds succeeded", fpos, how);
	if (!owner_cause(rc))
		FAIL("F at %d (%s): failed with %d (%s): '%s', not F's "
		     "owner's cause", fpos, how, rc, shemb_strerror(rc), why);
	if (rank != 1 && strncmp(why, relaxed ? "rank 1" : "rank 1: ",
				 relaxed ? 6 : 8))
		FAIL("F at %d (%s): the detail '%s' does not name F's owner",
		     fpos, how, why);
	failed_relaxed += relaxed &&
			  (rank == 1 ? strncmp(why, "serving rank ", 13) != 0
				     : strstr(why, "failed its rows of this "
						   "lookup") != NULL);
}

/* Every row of every table as the reference's. */
static void check_unchanged(void)
{
	static float got[ROWS * DIM];
	int64_t ids[ROWS];

	for (int64_t r = 0; r < ROWS; r++)
		ids[r] = r;
	for (int i = 0; i < NTABLES; i++) {
		CHECK_RC(ctx, shemb_table_read_rows(tab[i], ROWS, ids, got,
						    SHEMB_F32));
		if (memcmp(got, ref_rows[i], sizeof(got)))
			FAIL("table %d changed", i);
	}
}

static void scenario(int fpos, bool started)
{
	struct call c;
	char what[64];

	snprintf(what, sizeof(what), "F at %d, %s", fpos,
		 started ? "started" : "blocking");
	make_call(&c, fpos, true);
	CHECK_RC(ctx, run_lookup(&c, started));
	check_outputs(&c, what);
	make_call(&c, fpos, false);
	check_failure(run_lookup(&c, started), fpos,
		      started ? "started" : "blocking", false);
	make_call(&c, fpos, true);
	CHECK_RC(ctx, run_lookup(&c, started));
	check_outputs(&c, what);
}

static uint64_t relaxed_lookups(void)
{
	uint64_t n = 0;

	for (int i = 0; i < NTABLES; i++) {
		struct shemb_table_stats st = { .size = sizeof(st) };

		CHECK_RC(ctx, shemb_table_stats(tab[i], &st));
		n += st.relaxed_lookups;
	}
	return n;
}

/* A backward of zero gradients (no row changes), started, with lookup
 * next started right behind it: next's result, the backward's 0. */
static int behind_backward(struct call *done, struct call *next)
{
	static float zero[NCALL][NBAGS * DIM];
	const float *grads[NCALL];
	shemb_request *bw, *lk;
	int rc;

	for (int i = 0; i < NCALL; i++)
		grads[i] = zero[i];
	CHECK_RC(ctx, shemb_backward_start(ctx, NCALL, done->bags, grads,
					   &bw));
	CHECK_RC(ctx, shemb_lookup_start(ctx, NCALL, next->bags, next->outp,
					 0, &lk));
	rc = shemb_wait(lk);
	shemb_request_free(lk);
	CHECK_RC(ctx, shemb_wait(bw));
	shemb_request_free(bw);
	return rc;
}

/* The same behind a backward, where the lookup may run relaxed
 * (lib/dist_relax.c): its rows before and after the update. */
static void relaxed_scenario(int fpos)
{
	struct call c, n;

	make_call(&c, fpos, true);
	CHECK_RC(ctx, shemb_lookup(ctx, NCALL, c.bags, c.outp, 0));
	check_outputs(&c, "before a backward");
	make_call(&n, fpos, true);
	CHECK_RC(ctx, behind_backward(&c, &n));
	check_outputs(&n, "behind a backward");
	make_call(&c, fpos, false);
	check_failure(behind_backward(&n, &c), fpos, "relaxed", true);
	make_call(&c, fpos, true);
	CHECK_RC(ctx, shemb_lookup(ctx, NCALL, c.bags, c.outp,
				   SHEMB_LOOKUP_NO_GRAD));
	check_outputs(&c, "after a failed lookup behind a backward");
}

/* H and H1, plain tables of G's and F's owners, that every rank asks
 * many rows of. */
static void make_slow_tables(void)
{
	struct shemb_table_attr a;

	for (int i = 0; i < 2; i++) {
		shemb_table_attr_init(&a);
		a.rows = SLOW_ROWS;
		a.dim = DIM;
		a.table_id = 60 + i;
		a.shard = SHEMB_SHARD_TABLE;
		a.pool_at = SHEMB_POOL_AT_REQUESTER;
		a.shard_owner = i ? 1 : 2 % world;
		CHECK_RC(ctx, shemb_table_create(ctx, &a, &slow[i]));
	}
}

/* The lookup of b, which must fail with an owner's cause. */
static void expect_enomem(int n, const struct shemb_bags *b,
			  float *const *out, const char *what, int k)
{
	int rc = shemb_lookup(ctx, n, b, out, SHEMB_LOOKUP_NO_GRAD);

	if (!owner_cause(rc))
		FAIL("failing call %d of %s: %d (%s): %s", k, what, rc,
		     shemb_strerror(rc), shemb_ctx_last_error(ctx));
}

/*
 * H, F and G, STORM times, F's and G's rows more than their tiers hold.
 * F's owner fails at F and refuses F and G at once; G's owner first
 * serves H (many rows), so F's owner's refusal of G may come before its
 * own, and both refuse G: the transport takes every record of an abort
 * that came early when the collective starts (fabric/ctrl.c, checked
 * alone by test_coll_build); records left to pile up would, past what
 * it keeps, lose a later abort and time its collective out.  Then
 * calls of H1 and G, where F's owner, serving H1, may hear of G's
 * refusal before it starts G; then F and G with rows that fit: exact.
 */
static void storm(void)
{
	static int64_t hids[SLOW_IDS], hoff[NBAGS + 1];
	static float hout[NBAGS * DIM];
	struct shemb_bags b[3];
	float *out[3] = { hout };
	struct call c;

	for (int k = 0; k < SLOW_IDS; k++)
		hids[k] = (int64_t)(mix((uint64_t)(rank * 100000 + k)) %
				    SLOW_ROWS);
	for (int i = 0; i <= NBAGS; i++)
		hoff[i] = (int64_t)i * (SLOW_IDS / NBAGS);
	make_call(&c, 0, false);
	make_ids(G, false, c.ids[1]);
	shemb_bags_init(&b[0]);
	b[0].table = slow[0];
	b[0].nbags = NBAGS;
	b[0].offsets = hoff;
	b[0].nids = SLOW_IDS;
	b[0].ids = hids;
	b[1] = c.bags[0]; /* F */
	b[2] = c.bags[1];
	b[2].table = tab[G];
	out[1] = c.out[0];
	out[2] = c.out[1];
	for (int k = 0; k < STORM; k++)
		expect_enomem(3, b, out, "H, F and G", k);
	b[0].table = slow[1];
	b[1] = b[2]; /* G */
	out[1] = out[2];
	for (int k = 0; k < 8; k++)
		expect_enomem(2, b, out, "H1 and G", k);
	make_call(&c, 0, true);
	c.bags[1].table = tab[G];
	make_ids(G, true, c.ids[1]);
	CHECK_RC(ctx, shemb_lookup(ctx, NCALL, c.bags, c.outp,
				   SHEMB_LOOKUP_NO_GRAD));
	check_outputs(&c, "F and G after the failing ones");
	CHECK_RC(ctx, shemb_table_destroy(slow[0]));
	CHECK_RC(ctx, shemb_table_destroy(slow[1]));
}

/*
 * n failing calls in a row, F first, then a fitting call, exact.  A
 * refused exchange must leave nothing behind at any rank: a receive
 * posted for a message that never comes, or a message nobody receives,
 * would pile up call after call until the provider took no more
 * (shm holds 1024 receives an endpoint).
 */
static void many_failures(int n)
{
	struct call c;

	make_call(&c, 0, false);
	for (int k = 0; k < n; k++)
		expect_enomem(NCALL, c.bags, c.outp, "F, A and B", k);
	make_call(&c, 0, true);
	CHECK_RC(ctx, shemb_lookup(ctx, NCALL, c.bags, c.outp,
				   SHEMB_LOOKUP_NO_GRAD));
	check_outputs(&c, "after many failing calls");
}

static int failures = 1500; /* --failures N: many_failures(N) */

static void parse_args(int argc, char **argv, struct shemb_ctx_attr *a)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--failures") && i + 1 < argc)
			failures = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--pool-at-owner"))
			pool_at = SHEMB_POOL_AT_OWNER;
		else if (!strcmp(argv[i], "--caller"))
			a->progress = SHEMB_PROGRESS_CALLER;
		else
			FAIL("unknown argument %s", argv[i]);
	}
}

int main(int argc, char **argv)
{
	struct shemb_ctx_attr a;

	shemb_ctx_attr_init(&a);
	a.nthreads = 1;
	a.timeout_ms = 60000;
	parse_args(argc, argv, &a);
	CHECK_RC(NULL, shemb_ctx_create(&a, &ctx));
	CHECK_RC(ctx, shemb_ctx_get_attr(ctx, &a));
	rank = a.rank;
	world = a.world_size;
	if (world < 2)
		FAIL("needs 2 ranks or more, has %d", world);
	shemb_ctx_attr_init(&a);
	a.nthreads = 1;
	a.rank = 0;
	a.world_size = 1;
	CHECK_RC(NULL, shemb_ctx_create(&a, &ref));
	for (int i = 0; i < NTABLES; i++)
		make_table(i);
	read_reference();
	for (int fpos = 0; fpos < NCALL; fpos++) {
		scenario(fpos, false);
		scenario(fpos, true);
		relaxed_scenario(fpos);
	}
	make_slow_tables();
	storm();
	many_failures(failures);
	/* the odds that no lookup behind a backward ran relaxed are nil
	 * (lib/stepq.c) */
	if (relaxed_lookups() == 0)
		FAIL("no lookup behind a backward ran relaxed");
	if (failed_relaxed == 0)
		FAIL("no failing lookup behind a backward ran relaxed");
	check_unchanged();
	for (int i = 0; i < NTABLES; i++) {
		CHECK_RC(ctx, shemb_table_destroy(tab[i]));
		shemb_table_destroy(ref_tab[i]);
	}
	shemb_ctx_destroy(ref);
	CHECK_RC(ctx, shemb_ctx_destroy(ctx));
	return 0;
}
