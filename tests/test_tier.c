/*
 * test_tier.c - tiered row storage: a table with a device tier (and a cold
 * file) against the same table with every row in host memory, bitwise,
 * after random interleavings of lookups, backward steps, prefetches, row
 * writes, reads and flushes, for every policy and capacities from one slot
 * to more than the table; cache statistics on sequences whose counts are
 * worked out by hand; failures of the cold file (truncated, I/O errors
 * injected below the library) that fail the call with SHEMB_EIO and lose
 * nothing; budgets and bad attributes.
 */
#define _GNU_SOURCE
#include <check.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shemb.h"
#include "tests/testutil.h"

/* ---- I/O errors injected under the library ---- */

static atomic_int fail_reads, fail_writes;

typedef ssize_t (*pread_fn)(int, void *, size_t, off_t);
typedef ssize_t (*pwrite_fn)(int, const void *, size_t, off_t);

static ssize_t real_pread(const char *name, int fd, void *buf, size_t n,
			  off_t off)
{
	pread_fn f = (pread_fn)dlsym(RTLD_NEXT, name);

	if (atomic_load(&fail_reads)) {
		errno = EIO;
		return -1;
	}
	return f(fd, buf, n, off);
}

static ssize_t real_pwrite(const char *name, int fd, const void *buf,
			   size_t n, off_t off)
{
	pwrite_fn f = (pwrite_fn)dlsym(RTLD_NEXT, name);

	if (atomic_load(&fail_writes)) {
		errno = EIO;
		return -1;
	}
	return f(fd, buf, n, off);
}

ssize_t pread(int fd, void *buf, size_t n, off_t off)
{
	return real_pread("pread", fd, buf, n, off);
}

ssize_t pread64(int fd, void *buf, size_t n, off_t off)
{
	return real_pread("pread64", fd, buf, n, off);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
	return real_pwrite("pwrite", fd, buf, n, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off)
{
	return real_pwrite("pwrite64", fd, buf, n, off);
}

/* ---- tables ---- */

#define ROWS 64
#define DIM 5

static const int policies[] = { SHEMB_CACHE_LRU, SHEMB_CACHE_LFU,
				SHEMB_CACHE_LOOKAHEAD };

static int prefetch_thread = 1; /* the contexts' attribute */

static shemb_ctx *new_ctx(void)
{
	struct shemb_ctx_attr a;
	shemb_ctx *ctx = NULL;

	shemb_ctx_attr_init(&a);
	a.nthreads = 2;
	a.prefetch_thread = prefetch_thread;
	ck_assert_int_eq(shemb_ctx_create(&a, &ctx), 0);
	return ctx;
}

static void base_attr(struct shemb_table_attr *a, int dtype, int opt)
{
	shemb_table_attr_init(a);
	a->rows = ROWS;
	a->dim = DIM;
	a->dtype = dtype;
	a->optimizer = opt;
	a->table_id = 7; /* both tables of a pair start alike */
	a->seed = 11;
	a->lr = 0.05f;
	a->weight_decay = 0.01f;
}

static shemb_table *make(shemb_ctx *ctx, const struct shemb_table_attr *a)
{
	shemb_table *t = NULL;
	int rc = shemb_table_create(ctx, a, &t);

	ck_assert_msg(rc == 0, "create: %s", shemb_ctx_last_error(ctx));
	return t;
}

/* A table with a device tier and its all-in-host twin. */
struct pair {
	shemb_ctx *ctx;
	shemb_table *tier, *host;
	int64_t cap;
	char dir[64];
	char path[96];
};

static void pair_open(struct pair *p, int dtype, int opt, int64_t cap,
		      int policy, bool cold)
{
	struct shemb_table_attr a;

	memset(p, 0, sizeof(*p));
	p->ctx = new_ctx();
	p->cap = cap;
	base_attr(&a, dtype, opt);
	p->host = make(p->ctx, &a);
	a.cache_rows = cap;
	a.cache_policy = policy;
	if (cold) {
		snprintf(p->dir, sizeof(p->dir), "/tmp/test_tier.XXXXXX");
		ck_assert_ptr_nonnull(mkdtemp(p->dir));
		snprintf(p->path, sizeof(p->path), "%s/rows", p->dir);
		a.cold_path = p->path;
	}
	p->tier = make(p->ctx, &a);
}

static void pair_close(struct pair *p)
{
	shemb_table_destroy(p->tier);
	if (p->path[0])
		ck_assert_int_ne(access(p->path, F_OK), 0); /* removed */
	if (p->dir[0])
		rmdir(p->dir);
	shemb_table_destroy(p->host);
	shemb_ctx_destroy(p->ctx);
}

static void assert_same_tables(struct pair *p)
{
	struct tu_snapshot a, b;

	tu_snapshot_take(&a, p->tier);
	tu_snapshot_take(&b, p->host);
	ck_assert_msg(tu_snapshot_equal(&a, &b),
		      "tiered table differs from the all-in-host one");
	tu_snapshot_free(&a);
	tu_snapshot_free(&b);
}

/* Bags over at most `distinct` different ids (repeats included). */
static void few_ids_bags(struct tu_bags *b, struct tu_rng *r,
			 int64_t distinct, bool weighted)
{
	int64_t k = 1 + tu_rng_below(r, distinct < 12 ? distinct : 12);
	int64_t pool[12], nbags = 1 + tu_rng_below(r, 6);
	int64_t *len = tu_malloc((size_t)nbags * sizeof(int64_t));
	int64_t *ids, n = 0;
	float *w = NULL;

	for (int64_t i = 0; i < k; i++)
		pool[i] = tu_rng_below(r, ROWS);
	for (int64_t i = 0; i < nbags; i++) {
		len[i] = tu_rng_below(r, 5);
		n += len[i];
	}
	ids = tu_malloc((size_t)(n + 1) * sizeof(int64_t));
	for (int64_t i = 0; i < n; i++)
		ids[i] = pool[tu_rng_below(r, k)];
	if (weighted) {
		w = tu_malloc((size_t)(n + 1) * sizeof(float));
		tu_rng_fill(r, w, (size_t)n, -1.5f, 1.5f);
	}
	tu_bags_from(b, nbags, len, ids, w);
	free(len);
	free(ids);
	free(w);
}

/* lookup (and backward) of one set on both tables; 0 or the tiered
 * table's error, in which case the host twin is left alone. */
static int both_step(struct pair *p, const struct tu_bags *b, int pooling,
		     bool train, struct tu_rng *r)
{
	int64_t nout = tu_out_rows(b, pooling) * DIM;
	float *o1 = tu_calloc((size_t)nout + 1, sizeof(float));
	float *o2 = tu_calloc((size_t)nout + 1, sizeof(float));
	float *g = tu_malloc(((size_t)nout + 1) * sizeof(float));
	struct shemb_bags s1 = tu_bags_view(b, p->tier, pooling);
	struct shemb_bags s2 = tu_bags_view(b, p->host, pooling);
	unsigned fl = train ? 0 : SHEMB_LOOKUP_NO_GRAD;
	const float *gp = g;
	int rc = shemb_lookup(p->ctx, 1, &s1, &o1, fl);

	if (!rc) {
		ck_assert_int_eq(shemb_lookup(p->ctx, 1, &s2, &o2, fl), 0);
		ck_assert_int_eq(tu_bits_differ("lookup", o1, o2,
						(size_t)nout * 4), 0);
	}
	if (!rc && train) {
		tu_rng_fill(r, g, (size_t)nout, -1.0f, 1.0f);
		rc = shemb_backward(p->ctx, 1, &s1, &gp);
		ck_assert_msg(rc == 0, "backward: %s",
			      shemb_ctx_last_error(p->ctx));
		ck_assert_int_eq(shemb_backward(p->ctx, 1, &s2, &gp), 0);
	}
	free(o1);
	free(o2);
	free(g);
	return rc;
}

static void both_write(struct pair *p, struct tu_rng *r)
{
	int64_t n = 1 + tu_rng_below(r, 2 * p->cap + 3), ids[256];
	float v[256 * DIM];

	n = n > 256 ? 256 : n;
	for (int64_t i = 0; i < n; i++)
		ids[i] = tu_rng_below(r, ROWS);
	tu_rng_fill(r, v, (size_t)n * DIM, -2.0f, 2.0f);
	ck_assert_int_eq(shemb_table_write_rows(p->tier, n, ids, v, SHEMB_F32,
						0), 0);
	ck_assert_int_eq(shemb_table_write_rows(p->host, n, ids, v, SHEMB_F32,
						0), 0);
}

static void both_read(struct pair *p, struct tu_rng *r)
{
	int64_t n = 1 + tu_rng_below(r, ROWS), ids[ROWS];
	float a[ROWS * DIM], b[ROWS * DIM];

	for (int64_t i = 0; i < n; i++)
		ids[i] = tu_rng_below(r, ROWS);
	ck_assert_int_eq(shemb_table_read_rows(p->tier, n, ids, a, SHEMB_F32),
			 0);
	ck_assert_int_eq(shemb_table_read_rows(p->host, n, ids, b, SHEMB_F32),
			 0);
	ck_assert_int_eq(tu_bits_differ("read", a, b, sizeof(float) *
					(size_t)n * DIM), 0);
}

static const int poolings[] = { SHEMB_POOL_SUM, SHEMB_POOL_MEAN,
				SHEMB_POOL_MAX, SHEMB_POOL_NONE };

/* Random operations; the next batch is known ahead, and prefetched at
 * random moments before its step. */
static void random_run(struct pair *p, uint64_t seed, int iters)
{
	struct tu_rng r;
	struct tu_bags next;
	int64_t distinct = p->cap < ROWS ? p->cap : ROWS;

	tu_rng_seed(&r, seed);
	few_ids_bags(&next, &r, distinct, true);
	for (int it = 0; it < iters; it++) {
		int op = (int)tu_rng_below(&r, 10);
		int pooling = poolings[tu_rng_below(&r, 4)];
		struct shemb_bags s;

		if (op <= 1) {
			s = tu_bags_view(&next, p->tier, SHEMB_POOL_SUM);
			ck_assert_int_eq(op ? shemb_prefetch(p->ctx, 1, &s)
					    : shemb_announce(p->ctx, 1, &s),
					 0);
		} else if (op == 2) {
			both_write(p, &r);
		} else if (op == 3) {
			both_read(p, &r);
		} else if (op == 4) {
			ck_assert_int_eq(shemb_table_flush(p->tier), 0);
		} else {
			ck_assert_int_eq(both_step(p, &next, pooling, op != 5,
						   &r), 0);
			tu_bags_free(&next);
			few_ids_bags(&next, &r, distinct, tu_rng_below(&r, 2));
		}
	}
	tu_bags_free(&next);
	ck_assert_int_eq(shemb_table_flush(p->tier), 0);
	assert_same_tables(p);
	if (p->cap < 10) { /* the run moved rows both ways */
		struct shemb_table_stats st = { .size = sizeof(st) };

		ck_assert_int_eq(shemb_table_stats(p->tier, &st), 0);
		ck_assert_uint_gt(st.cache_evictions, 0);
		ck_assert_uint_gt(st.cache_writebacks, 0);
	}
}

static void run_matrix(bool cold, const int64_t *caps, int ncaps, int iters)
{
	const int opts[] = { SHEMB_OPT_ADAGRAD, SHEMB_OPT_ADAM };
	const int dtypes[] = { SHEMB_F32, SHEMB_BF16 };

	for (size_t pi = 0; pi < TU_ARRAY_SIZE(policies); pi++)
		for (int c = 0; c < ncaps; c++)
			for (int k = 0; k < 2; k++) {
				struct pair p;

				pair_open(&p, dtypes[k], opts[k], caps[c],
					  policies[pi], cold);
				random_run(&p, 1000 * pi + 10 * c + k, iters);
				pair_close(&p);
			}
}

START_TEST(nothing_lost_host_tier)
{
	const int64_t caps[] = { 1, 2, 7, 30, ROWS, ROWS + 10 };

	run_matrix(false, caps, TU_ARRAY_SIZE(caps), 80);
}
END_TEST

/* Prefetches that load in the call, not in the context's thread. */
START_TEST(nothing_lost_prefetch_in_the_call)
{
	const int64_t caps[] = { 1, 9 };

	prefetch_thread = 0;
	run_matrix(false, caps, TU_ARRAY_SIZE(caps), 60);
	run_matrix(true, caps, TU_ARRAY_SIZE(caps), 40);
	prefetch_thread = 1;
}
END_TEST

START_TEST(nothing_lost_cold_tier)
{
	const int64_t caps[] = { 1, 9, ROWS + 1 };

	run_matrix(true, caps, TU_ARRAY_SIZE(caps), 60);
}
END_TEST

/* Two sets of the tiered table (and one of its twin) in one call, with
 * and without a plan: the tier serves them as the twin does. */
START_TEST(several_sets_of_one_table)
{
	struct pair p;
	struct tu_rng r;

	pair_open(&p, SHEMB_F32, SHEMB_OPT_ADAGRAD, 6, SHEMB_CACHE_LRU, false);
	tu_rng_seed(&r, 31);
	for (int it = 0; it < 20; it++) {
		struct tu_bags b[2];
		struct shemb_bags s[4];
		float *o[4], *g[2];
		const float *gp[4];
		int pool[2] = { poolings[it % 4], poolings[(it + 1) % 4] };
		unsigned fl = it % 2 ? SHEMB_LOOKUP_NO_GRAD : 0;
		int64_t n[2];

		for (int k = 0; k < 2; k++) {
			few_ids_bags(&b[k], &r, 3, k == 1);
			n[k] = tu_out_rows(&b[k], pool[k]) * DIM;
			s[k] = tu_bags_view(&b[k], p.tier, pool[k]);
			s[2 + k] = tu_bags_view(&b[k], p.host, pool[k]);
			o[k] = tu_calloc((size_t)n[k] + 1, sizeof(float));
			o[2 + k] = tu_calloc((size_t)n[k] + 1, sizeof(float));
			g[k] = tu_malloc(((size_t)n[k] + 1) * sizeof(float));
			tu_rng_fill(&r, g[k], (size_t)n[k], -1, 1);
			gp[k] = gp[2 + k] = g[k];
		}
		ck_assert_int_eq(shemb_lookup(p.ctx, 2, s, o, fl), 0);
		ck_assert_int_eq(shemb_lookup(p.ctx, 2, s + 2, o + 2, fl), 0);
		for (int k = 0; k < 2; k++)
			ck_assert_int_eq(tu_bits_differ("sets", o[k], o[2 + k],
							(size_t)n[k] * 4), 0);
		if (!fl) {
			ck_assert_int_eq(shemb_backward(p.ctx, 2, s, gp), 0);
			ck_assert_int_eq(shemb_backward(p.ctx, 2, s + 2,
							gp + 2), 0);
		}
		for (int k = 0; k < 2; k++) {
			free(o[k]);
			free(o[2 + k]);
			free(g[k]);
			tu_bags_free(&b[k]);
		}
	}
	assert_same_tables(&p);
	pair_close(&p);
}
END_TEST

/* ---- statistics, worked out by hand ---- */

enum ids_call { IDS_LOOKUP, IDS_TRAIN, IDS_PREFETCH, IDS_ANNOUNCE };

/* n ids, one bag each (SUM, or POOL_NONE into out when out is given),
 * through a lookup (and backward: IDS_TRAIN), a prefetch or an
 * announcement; the call's return code. */
static int call_ids(shemb_ctx *ctx, shemb_table *t, int n,
		    const int64_t *ids, int call, float *out)
{
	struct tu_bags b;
	int64_t len[16];
	float buf[16 * 16];
	float *o = out ? out : buf;
	const float *g = o;
	struct shemb_bags s;
	int rc;

	for (int i = 0; i < n; i++)
		len[i] = 1;
	tu_bags_from(&b, n, len, ids, NULL);
	s = tu_bags_view(&b, t, out ? SHEMB_POOL_NONE : SHEMB_POOL_SUM);
	if (call == IDS_PREFETCH)
		rc = shemb_prefetch(ctx, 1, &s);
	else if (call == IDS_ANNOUNCE)
		rc = shemb_announce(ctx, 1, &s);
	else
		rc = shemb_lookup(ctx, 1, &s, &o,
				  call == IDS_TRAIN ? 0 : SHEMB_LOOKUP_NO_GRAD);
	if (!rc && call == IDS_TRAIN)
		rc = shemb_backward(ctx, 1, &s, &g);
	tu_bags_free(&b);
	return rc;
}

/* ... asserted to succeed, at the caller's line */
#define lookup_ids(ctx, t, n, ids, train)                                    \
	ck_assert_msg(call_ids(ctx, t, n, ids,                               \
			       (train) ? IDS_TRAIN : IDS_LOOKUP, NULL) == 0, \
		      "lookup: %s", shemb_ctx_last_error(ctx))
#define prefetch_ids(ctx, t, n, ids)                                         \
	ck_assert_int_eq(call_ids(ctx, t, n, ids, IDS_PREFETCH, NULL), 0)
#define announce_ids(ctx, t, n, ids)                                         \
	ck_assert_int_eq(call_ids(ctx, t, n, ids, IDS_ANNOUNCE, NULL), 0)

static struct shemb_table_stats stats_of(shemb_table *t)
{
	struct shemb_table_stats s = { .size = sizeof(s) };

	ck_assert_int_eq(shemb_table_stats(t, &s), 0);
	return s;
}

static shemb_table *cache_table(shemb_ctx *ctx, int64_t cap, int policy)
{
	struct shemb_table_attr a;

	base_attr(&a, SHEMB_F32, SHEMB_OPT_SGD);
	a.dim = 4;
	a.cache_rows = cap;
	a.cache_policy = policy;
	return make(ctx, &a);
}

START_TEST(lru_counts)
{
	shemb_ctx *ctx = new_ctx();
	shemb_table *t = cache_table(ctx, 4, SHEMB_CACHE_LRU);
	const int64_t a[] = { 0, 1, 2, 3 }, b[] = { 0, 1 }, c[] = { 4, 5 };
	const int64_t d[] = { 6, 7, 8, 9 }, e[] = { 10, 11 };
	struct shemb_table_stats s;
	uint64_t stride;

	lookup_ids(ctx, t, 4, a, false);        /* 4 misses */
	lookup_ids(ctx, t, 2, b, false);        /* 2 hits: 2, 3 oldest */
	lookup_ids(ctx, t, 2, c, true);         /* 2 misses evict 2, 3;
						 * the backward hits 4, 5 */
	lookup_ids(ctx, t, 4, d, false);        /* evicts 0, 1 and the
						 * changed 4, 5 */
	s = stats_of(t);
	ck_assert_uint_eq(s.cache_misses, 10);
	ck_assert_uint_eq(s.cache_hits, 4);
	ck_assert_uint_eq(s.cache_evictions, 6);
	ck_assert_uint_eq(s.cache_writebacks, 2);
	stride = s.cache_bytes_in / s.cache_misses;
	ck_assert_uint_ge(stride, 4 * sizeof(float));
	ck_assert_uint_eq(s.cache_bytes_in, 10 * stride);
	ck_assert_uint_eq(s.cache_bytes_out, 2 * stride);
	ck_assert_uint_eq(s.prefetch_hits, 0);

	prefetch_ids(ctx, t, 2, e);             /* 2 misses, evicts 6, 7 */
	lookup_ids(ctx, t, 2, e, false);        /* 2 hits from prefetch */
	lookup_ids(ctx, t, 2, e, false);        /* 2 more, not counted */
	s = stats_of(t);
	ck_assert_uint_eq(s.cache_misses, 12);
	ck_assert_uint_eq(s.cache_evictions, 8);
	ck_assert_uint_eq(s.cache_hits, 8);
	ck_assert_uint_eq(s.prefetch_hits, 2);

	ck_assert_int_eq(shemb_table_stats_reset(t), 0);
	s = stats_of(t);
	ck_assert_uint_eq(s.cache_misses + s.cache_hits + s.prefetch_hits, 0);
	shemb_table_destroy(t);
	shemb_ctx_destroy(ctx);
}
END_TEST

/* A reset right after a prefetch (whose loads the prefetch thread makes)
 * comes after those loads: they are not counted after it.  Loads from a
 * cold file, one row at a time, are slow enough that a reset that did
 * not wait for them came first (all of them counted after it). */
START_TEST(reset_comes_after_the_prefetched_loads)
{
	enum { N = 40000 };
	shemb_ctx *ctx = new_ctx();
	char *dir = tu_temp_dir("test_tier"), path[128];
	struct shemb_table_attr a;
	struct shemb_table_stats s;
	int64_t *ids = tu_malloc(N * sizeof(*ids)), len = N;
	struct shemb_bags v;
	struct tu_bags b;
	shemb_table *t;

	base_attr(&a, SHEMB_F32, SHEMB_OPT_SGD);
	a.rows = 2 * N;
	a.dim = 16;
	a.cache_rows = N;
	snprintf(path, sizeof(path), "%s/cold", dir);
	a.cold_path = path;
	t = make(ctx, &a);
	for (int64_t i = 0; i < N; i++)
		ids[i] = 2 * i;
	tu_bags_from(&b, 1, &len, ids, NULL);
	v = tu_bags_view(&b, t, SHEMB_POOL_SUM);
	ck_assert_int_eq(shemb_prefetch(ctx, 1, &v), 0);
	ck_assert_int_eq(shemb_table_stats_reset(t), 0);
	s = stats_of(t);
	ck_assert_uint_eq(s.cache_misses, 0);
	ck_assert_uint_eq(s.cache_bytes_in, 0);
	tu_bags_free(&b);
	free(ids);
	shemb_table_destroy(t);
	shemb_ctx_destroy(ctx);
	tu_remove_dir(dir);
}
END_TEST

/* Row 0 used three times, row 1 once: a third row evicts 1 under LFU, 0
 * under LRU. */
START_TEST(lfu_keeps_the_frequent_row)
{
	shemb_ctx *ctx = new_ctx();
	const int64_t r0[] = { 0 }, r1[] = { 1 }, r2[] = { 2 };

	for (int lfu = 0; lfu < 2; lfu++) {
		shemb_table *t = cache_table(ctx, 2, lfu ? SHEMB_CACHE_LFU
							 : SHEMB_CACHE_LRU);
		uint64_t misses;

		for (int i = 0; i < 3; i++)
			lookup_ids(ctx, t, 1, r0, false);
		lookup_ids(ctx, t, 1, r1, false);
		lookup_ids(ctx, t, 1, r2, false);
		misses = stats_of(t).cache_misses;
		ck_assert_uint_eq(misses, 3);
		lookup_ids(ctx, t, 1, r0, false);
		ck_assert_uint_eq(stats_of(t).cache_misses,
				  lfu ? misses : misses + 1);
		shemb_table_destroy(t);
	}
	shemb_ctx_destroy(ctx);
}
END_TEST

/* A row an announced step needs stays, even against a more frequent
 * row; LFU (which ignores announcements) evicts it. */
START_TEST(lookahead_keeps_the_announced_row)
{
	shemb_ctx *ctx = new_ctx();
	const int64_t r0[] = { 0 }, r1[] = { 1 }, r2[] = { 2 };

	for (int la = 0; la < 2; la++) {
		shemb_table *t = cache_table(ctx, 2, la ? SHEMB_CACHE_LOOKAHEAD
							: SHEMB_CACHE_LFU);

		for (int i = 0; i < 3; i++)
			lookup_ids(ctx, t, 1, r0, false);
		lookup_ids(ctx, t, 1, r1, false);
		announce_ids(ctx, t, 1, r2);
		announce_ids(ctx, t, 1, r1);
		lookup_ids(ctx, t, 1, r2, false);  /* evicts 0 or 1 */
		lookup_ids(ctx, t, 1, r1, false);
		ck_assert_uint_eq(stats_of(t).cache_misses, la ? 3 : 4);
		shemb_table_destroy(t);
	}
	shemb_ctx_destroy(ctx);
}
END_TEST

/* Rows 1 and 2 held; steps {3} {2} {3} {1} announced: the step {3} evicts
 * row 1, needed last, and the four steps miss twice (evicting row 2
 * would miss three times). */
START_TEST(lookahead_evicts_the_row_needed_last)
{
	shemb_ctx *ctx = new_ctx();
	shemb_table *t = cache_table(ctx, 2, SHEMB_CACHE_LOOKAHEAD);
	const int64_t one[] = { 1 }, two[] = { 2 }, three[] = { 3 };
	const int64_t *steps[] = { three, two, three, one };

	lookup_ids(ctx, t, 1, one, false);
	lookup_ids(ctx, t, 1, two, false);
	for (int i = 0; i < 4; i++)
		announce_ids(ctx, t, 1, steps[i]);
	for (int i = 0; i < 4; i++)
		lookup_ids(ctx, t, 1, steps[i], false);
	ck_assert_uint_eq(stats_of(t).cache_misses, 4);
	shemb_table_destroy(t);
	shemb_ctx_destroy(ctx);
}
END_TEST

/* A prefetch announces its own step when the caller announces none. */
START_TEST(lookahead_prefetch_announces_its_step)
{
	shemb_ctx *ctx = new_ctx();
	shemb_table *t = cache_table(ctx, 2, SHEMB_CACHE_LOOKAHEAD);
	const int64_t r0[] = { 0 }, r1[] = { 1 }, r2[] = { 2 };
	struct shemb_table_stats s;

	for (int i = 0; i < 3; i++)
		lookup_ids(ctx, t, 1, r0, false);
	prefetch_ids(ctx, t, 1, r2); /* the next step: 2 */
	prefetch_ids(ctx, t, 1, r1); /* the one after: 1 */
	lookup_ids(ctx, t, 1, r2, false);
	lookup_ids(ctx, t, 1, r1, false);
	s = stats_of(t);
	ck_assert_uint_eq(s.cache_misses, 3);
	ck_assert_uint_eq(s.prefetch_hits, 2);
	shemb_table_destroy(t);
	shemb_ctx_destroy(ctx);
}
END_TEST

START_TEST(too_many_announced_steps)
{
	shemb_ctx *ctx = new_ctx();
	shemb_table *t = cache_table(ctx, 4, SHEMB_CACHE_LOOKAHEAD);
	shemb_table *lru = cache_table(ctx, 4, SHEMB_CACHE_LRU);
	const int64_t r[] = { 5 };
	struct tu_bags b;
	int64_t len[] = { 1 };
	struct shemb_bags s;

	tu_bags_from(&b, 1, len, r, NULL);
	s = tu_bags_view(&b, t, SHEMB_POOL_SUM);
	for (int i = 0; i < 256; i++)
		ck_assert_int_eq(shemb_announce(ctx, 1, &s), 0);
	ck_assert_int_eq(shemb_announce(ctx, 1, &s), SHEMB_EINVAL);
	ck_assert(tu_contains_all(shemb_ctx_last_error(ctx), "256",
				  "announced", NULL));
	lookup_ids(ctx, t, 1, r, false); /* uses one up */
	ck_assert_int_eq(shemb_announce(ctx, 1, &s), 0);
	s = tu_bags_view(&b, lru, SHEMB_POOL_SUM);
	for (int i = 0; i < 300; i++) /* ignored by LRU */
		ck_assert_int_eq(shemb_announce(ctx, 1, &s), 0);
	ck_assert_uint_eq(stats_of(lru).cache_misses, 0);
	shemb_table_destroy(t);
	/* prefetches that announce their own steps never fail for it */
	t = cache_table(ctx, 4, SHEMB_CACHE_LOOKAHEAD);
	s = tu_bags_view(&b, t, SHEMB_POOL_SUM);
	for (int i = 0; i < 300; i++)
		ck_assert_int_eq(shemb_prefetch(ctx, 1, &s), 0);
	ck_assert_uint_eq(stats_of(t).cache_misses, 1);
	tu_bags_free(&b);
	shemb_table_destroy(t);
	shemb_table_destroy(lru);
	shemb_ctx_destroy(ctx);
}
END_TEST

/* A planned lookup of rows 1 and 2 (a bag each), kept for its
 * backward. */
struct planned {
	struct tu_bags b;
	struct shemb_bags s;
	float out[2 * 4];
};

static void planned_lookup(shemb_ctx *ctx, shemb_table *t, struct planned *p)
{
	static const int64_t rows[] = { 1, 2 };
	int64_t len[] = { 1, 1 };
	float *o = p->out;

	tu_bags_from(&p->b, 2, len, rows, NULL);
	p->s = tu_bags_view(&p->b, t, SHEMB_POOL_SUM);
	ck_assert_int_eq(shemb_lookup(ctx, 1, &p->s, &o, 0), 0);
}

/* Its backward: the misses it took (0: its rows were still there). */
static uint64_t planned_backward(shemb_ctx *ctx, shemb_table *t,
				 struct planned *p)
{
	const float *g = p->out;
	uint64_t before = stats_of(t).cache_misses;

	ck_assert_int_eq(shemb_backward(ctx, 1, &p->s, &g), 0);
	tu_bags_free(&p->b);
	return stats_of(t).cache_misses - before;
}

/* A prefetch of the next step takes none of the rows the current step's
 * backward will update, under any policy, though they were used least. */
START_TEST(prefetch_spares_the_current_step)
{
	shemb_ctx *ctx = new_ctx();
	const int64_t old[] = { 10, 11 }, nxt[] = { 20, 21 };

	for (size_t pi = 0; pi < TU_ARRAY_SIZE(policies); pi++) {
		shemb_table *t = cache_table(ctx, 4, policies[pi]);
		struct planned p;

		for (int i = 0; i < 3; i++)
			lookup_ids(ctx, t, 2, old, false);
		planned_lookup(ctx, t, &p);
		prefetch_ids(ctx, t, 2, nxt);
		ck_assert_uint_eq(stats_of(t).cache_misses, 6);
		ck_assert_uint_eq(planned_backward(ctx, t, &p), 0);
		lookup_ids(ctx, t, 2, nxt, false);
		ck_assert_uint_eq(stats_of(t).cache_misses, 6);
		ck_assert_uint_eq(stats_of(t).prefetch_hits, 2);
		shemb_table_destroy(t);
	}
	shemb_ctx_destroy(ctx);
}
END_TEST

/* A slot that held a row of the pending plan and was reused for another
 * row does not keep the plan's protection. */
START_TEST(reused_slot_leaves_the_plan)
{
	shemb_ctx *ctx = new_ctx();
	shemb_table *t = cache_table(ctx, 2, SHEMB_CACHE_LRU);
	const int64_t a[] = { 0, 1 }, b[] = { 2, 3 }, c[] = { 4 };
	struct tu_bags bags;
	int64_t len[] = { 1, 1 };
	struct shemb_bags s;
	float out[2 * 4];
	float *o = out;

	tu_bags_from(&bags, 2, len, a, NULL);
	s = tu_bags_view(&bags, t, SHEMB_POOL_SUM);
	ck_assert_int_eq(shemb_lookup(ctx, 1, &s, &o, 0), 0); /* planned */
	lookup_ids(ctx, t, 2, b, false); /* evicts the plan's rows */
	prefetch_ids(ctx, t, 1, c);      /* may evict 2 or 3 */
	ck_assert_uint_eq(stats_of(t).cache_misses, 5);
	tu_bags_free(&bags);
	shemb_table_destroy(t);
	shemb_ctx_destroy(ctx);
}
END_TEST

/* ---- a call over the tier's size ---- */

/* The counters of a table that only successful lookups move. */
struct lookup_counts {
	uint64_t lookups, bags, ids, unique_ids, plan_ns, pool_ns;
};

static void counts_of(shemb_table *t, struct lookup_counts *c)
{
	struct shemb_table_stats st = { .size = sizeof(st) };

	ck_assert_int_eq(shemb_table_stats(t, &st), 0);
	*c = (struct lookup_counts){ st.lookups, st.bags, st.ids,
				     st.unique_ids, st.plan_ns, st.pool_ns };
}

/* A call needing more distinct rows than the tier holds is refused, and
 * changes neither a table nor a plan nor the counters of successful
 * calls (shemb_table_stats(3)), which it used to move. */
START_TEST(batch_over_capacity_is_refused)
{
	struct pair p;
	struct tu_bags small, big;
	const int64_t len1[] = { 3 }, ids1[] = { 1, 2, 1 };
	const int64_t len2[] = { 2, 3 }, ids2[] = { 3, 4, 5, 6, 7 };
	float o[2 * DIM], o2[2 * DIM], g[2 * DIM];
	float *op = o;
	const float *gp = g;
	struct shemb_bags s, sb, two[2];
	struct lookup_counts before[2], after[2];
	struct tu_rng r;

	pair_open(&p, SHEMB_F32, SHEMB_OPT_ADAGRAD, 4, SHEMB_CACHE_LRU,
		  false);
	tu_bags_from(&small, 1, len1, ids1, NULL);
	tu_bags_from(&big, 2, len2, ids2, NULL);
	s = tu_bags_view(&small, p.tier, SHEMB_POOL_SUM);
	sb = tu_bags_view(&big, p.tier, SHEMB_POOL_SUM);
	ck_assert_int_eq(shemb_lookup(p.ctx, 1, &s, &op, 0), 0);
	counts_of(p.host, &before[0]);
	counts_of(p.tier, &before[1]);
	ck_assert_int_eq(shemb_lookup(p.ctx, 1, &sb, &op, 0), SHEMB_ENOMEM);
	ck_assert(tu_contains_all(shemb_ctx_last_error(p.ctx), "5", "distinct",
				  "cache_rows", NULL));
	/* a table pooled before the one that fails counts nothing either */
	two[0] = tu_bags_view(&small, p.host, SHEMB_POOL_SUM);
	two[1] = sb;
	ck_assert_int_eq(shemb_lookup(p.ctx, 2, two,
				      (float *const[]){ o, o2 }, 0),
			 SHEMB_ENOMEM);
	counts_of(p.host, &after[0]);
	counts_of(p.tier, &after[1]);
	ck_assert(!memcmp(before, after, sizeof(before)));
	ck_assert_int_eq(shemb_prefetch(p.ctx, 1, &sb), 0); /* what fits */
	assert_same_tables(&p);
	/* the refused lookup left the first one's plan */
	tu_rng_seed(&r, 5);
	tu_rng_fill(&r, g, DIM, -1, 1);
	ck_assert_int_eq(shemb_backward(p.ctx, 1, &s, &gp), 0);
	s = tu_bags_view(&small, p.host, SHEMB_POOL_SUM);
	ck_assert_int_eq(shemb_lookup(p.ctx, 1, &s, &op, 0), 0);
	ck_assert_int_eq(shemb_backward(p.ctx, 1, &s, &gp), 0);
	assert_same_tables(&p);
	tu_bags_free(&small);
	tu_bags_free(&big);
	pair_close(&p);
}
END_TEST

/*
 * A refused planned lookup leaves the device tier as it was: the rows of
 * the plan before it stay out of a prefetch's reach until its backward,
 * under every policy, and it uses up no announced step.  It used to
 * unprotect them (the backward then loaded them again) and to use up a
 * step.
 */
START_TEST(refused_lookup_leaves_the_tier)
{
	shemb_ctx *ctx = new_ctx();
	const int64_t big[] = { 10, 11, 12, 13, 14 };
	const int64_t nxt[] = { 20, 21, 22, 23 };

	for (size_t pi = 0; pi < TU_ARRAY_SIZE(policies); pi++) {
		shemb_table *t = cache_table(ctx, 4, policies[pi]);
		struct planned p;

		planned_lookup(ctx, t, &p);
		ck_assert_int_eq(call_ids(ctx, t, 5, big, IDS_TRAIN, NULL),
				 SHEMB_ENOMEM);
		prefetch_ids(ctx, t, 4, nxt); /* two free slots: two loads */
		ck_assert_uint_eq(stats_of(t).cache_misses, 4);
		ck_assert_uint_eq(planned_backward(ctx, t, &p), 0);
		shemb_table_destroy(t);
	}
	shemb_ctx_destroy(ctx);
}
END_TEST

/* A lookup refused on another thread, which began no plan, gives back
 * none: the plan of a lookup running beside it stays, and its rows stay
 * out of a prefetch's reach until its backward.  Before, the refused
 * lookup undid whichever plan the tier had begun last (about one
 * backward in 150 of this loop then loaded its rows again). */
struct refusing {
	shemb_ctx *ctx;
	shemb_table *t;
	atomic_bool stop;
};

static void *refuse_lookups(void *arg)
{
	struct refusing *r = arg;
	static const int64_t big[] = { 10, 11, 12, 13, 14 };
	float out[16 * 4];

	while (!atomic_load(&r->stop))
		ck_assert_int_eq(call_ids(r->ctx, r->t, 5, big, IDS_LOOKUP,
					  out),
				 SHEMB_ENOMEM);
	return NULL;
}

START_TEST(refused_lookup_beside_leaves_the_plan)
{
	const int64_t nxt[] = { 20, 21, 22, 23 };
	struct refusing r = { .stop = false };
	struct shemb_ctx_attr a;
	pthread_t th;
	int missed = 0;

	shemb_ctx_attr_init(&a);
	a.nthreads = 1;
	ck_assert_int_eq(shemb_ctx_create(&a, &r.ctx), 0);
	r.t = cache_table(r.ctx, 4, SHEMB_CACHE_LRU);
	ck_assert_int_eq(pthread_create(&th, NULL, refuse_lookups, &r), 0);
	for (int i = 0; i < 5000; i++) {
		struct planned p;

		planned_lookup(r.ctx, r.t, &p);
		prefetch_ids(r.ctx, r.t, 4, nxt);
		missed += planned_backward(r.ctx, r.t, &p) != 0;
	}
	atomic_store(&r.stop, true);
	pthread_join(th, NULL);
	ck_assert_int_eq(missed, 0);
	shemb_table_destroy(r.t);
	shemb_ctx_destroy(r.ctx);
}
END_TEST

START_TEST(refused_lookup_uses_up_no_announced_step)
{
	shemb_ctx *ctx = new_ctx();
	shemb_table *t = cache_table(ctx, 4, SHEMB_CACHE_LOOKAHEAD);
	const int64_t r[] = { 5 }, big[] = { 10, 11, 12, 13, 14 };

	for (int i = 0; i < 256; i++)
		announce_ids(ctx, t, 1, r);
	ck_assert_int_eq(call_ids(ctx, t, 5, big, IDS_LOOKUP, NULL),
			 SHEMB_ENOMEM);
	ck_assert_int_eq(call_ids(ctx, t, 1, r, IDS_ANNOUNCE, NULL),
			 SHEMB_EINVAL); /* still 256 */
	lookup_ids(ctx, t, 1, r, false); /* uses one up */
	announce_ids(ctx, t, 1, r);
	shemb_table_destroy(t);
	shemb_ctx_destroy(ctx);
}
END_TEST

/* ---- the cold file failing ---- */

/* Steps over rows 0 .. 7 with a tier of 4: rows go to and from the file. */
static void warm_up(struct pair *p, uint64_t seed)
{
	struct tu_rng r;

	tu_rng_seed(&r, seed);
	for (int i = 0; i < 12; i++) {
		int64_t len[] = { 2 }, ids[2];
		struct tu_bags b;

		ids[0] = tu_rng_below(&r, 8);
		ids[1] = tu_rng_below(&r, 8);
		tu_bags_from(&b, 1, len, ids, NULL);
		ck_assert_int_eq(both_step(p, &b, SHEMB_POOL_SUM, true, &r), 0);
		tu_bags_free(&b);
	}
}

static int step_on(struct pair *p, int64_t a, int64_t b)
{
	int64_t len[] = { 2 }, ids[] = { a, b };
	struct tu_bags bags;
	struct tu_rng r;
	int rc;

	tu_rng_seed(&r, 99);
	tu_bags_from(&bags, 1, len, ids, NULL);
	rc = both_step(p, &bags, SHEMB_POOL_SUM, true, &r);
	tu_bags_free(&bags);
	return rc;
}

START_TEST(cold_read_error_fails_the_step)
{
	struct pair p;

	pair_open(&p, SHEMB_F32, SHEMB_OPT_ADAGRAD, 4, SHEMB_CACHE_LRU, true);
	warm_up(&p, 3);
	atomic_store(&fail_reads, 1);
	ck_assert_int_eq(step_on(&p, 40, 41), SHEMB_EIO);
	ck_assert(tu_contains_all(shemb_ctx_last_error(p.ctx), p.path,
				  "reading", NULL));
	atomic_store(&fail_reads, 0);
	assert_same_tables(&p);
	ck_assert_int_eq(step_on(&p, 40, 41), 0);
	assert_same_tables(&p);
	pair_close(&p);
}
END_TEST

START_TEST(cold_write_error_keeps_the_dirty_rows)
{
	struct pair p;

	pair_open(&p, SHEMB_F32, SHEMB_OPT_ADAM, 4, SHEMB_CACHE_LRU, true);
	warm_up(&p, 4);
	ck_assert_int_eq(step_on(&p, 20, 21), 0);
	ck_assert_int_eq(step_on(&p, 22, 23), 0); /* 4 changed rows held */
	atomic_store(&fail_writes, 1);
	ck_assert_int_eq(step_on(&p, 30, 31), SHEMB_EIO);
	ck_assert_int_eq(shemb_table_flush(p.tier), SHEMB_EIO);
	ck_assert(tu_contains_all(shemb_ctx_last_error(p.ctx), p.path,
				  "writing", NULL));
	atomic_store(&fail_writes, 0);
	ck_assert_int_eq(step_on(&p, 30, 31), 0);
	assert_same_tables(&p);
	pair_close(&p);
}
END_TEST

START_TEST(cold_truncated_file_is_an_io_error)
{
	struct pair p;
	int64_t held[] = { 20, 21, 22, 23 };
	float a[4 * DIM], b[4 * DIM];

	pair_open(&p, SHEMB_F32, SHEMB_OPT_ADAGRAD, 4, SHEMB_CACHE_LRU, true);
	warm_up(&p, 5);
	ck_assert_int_eq(step_on(&p, 20, 21), 0);
	ck_assert_int_eq(step_on(&p, 22, 23), 0);
	ck_assert_int_eq(truncate(p.path, 0), 0);
	ck_assert_int_eq(step_on(&p, 50, 51), SHEMB_EIO);
	ck_assert(tu_contains_all(shemb_ctx_last_error(p.ctx), p.path,
				  "truncated", NULL));
	/* the rows the tier held, changed since the file was written,
	 * are all there */
	ck_assert_int_eq(shemb_table_read_rows(p.tier, 4, held, a, SHEMB_F32),
			 0);
	ck_assert_int_eq(shemb_table_read_rows(p.host, 4, held, b, SHEMB_F32),
			 0);
	ck_assert_int_eq(tu_bits_differ("held", a, b, sizeof(a)), 0);
	pair_close(&p);
}
END_TEST

/* Two tables in one backward: the second one's tier fails to load, and
 * the first, whose rows are all resident, is not changed either, nor
 * taken for changed: a flush writes none of its rows back. */
START_TEST(backward_changes_no_table_when_a_tier_fails)
{
	struct pair p;
	struct shemb_table_attr a;
	shemb_table *t2;
	int64_t len[] = { 2 }, ids[] = { 1, 2 }, other[] = { 30, 31 };
	char path2[128];
	struct tu_bags b;
	struct shemb_bags s[2];
	float o1[DIM], o2[DIM], g[DIM] = { 1, -1, 0.5f, 2, -2 };
	float *out[] = { o1, o2 };
	const float *gr[] = { g, g };

	pair_open(&p, SHEMB_F32, SHEMB_OPT_SGD, 2, SHEMB_CACHE_LRU, true);
	base_attr(&a, SHEMB_F32, SHEMB_OPT_SGD);
	a.table_id = 8;
	a.cache_rows = 2;
	snprintf(path2, sizeof(path2), "%s/rows2", p.dir);
	a.cold_path = path2;
	t2 = make(p.ctx, &a);
	tu_bags_from(&b, 1, len, ids, NULL);
	s[0] = tu_bags_view(&b, p.tier, SHEMB_POOL_SUM);
	s[1] = tu_bags_view(&b, t2, SHEMB_POOL_SUM);
	ck_assert_int_eq(shemb_lookup(p.ctx, 2, s, out, 0), 0);
	lookup_ids(p.ctx, t2, 2, other, false); /* evicts rows 1, 2 of t2 */
	atomic_store(&fail_reads, 1);
	ck_assert_int_eq(shemb_backward(p.ctx, 2, s, gr), SHEMB_EIO);
	atomic_store(&fail_reads, 0);
	/* before the comparison, whose reads evict (and write back) */
	ck_assert_int_eq(shemb_table_stats_reset(p.tier), 0);
	ck_assert_int_eq(shemb_table_flush(p.tier), 0);
	ck_assert_uint_eq(stats_of(p.tier).cache_writebacks, 0);
	assert_same_tables(&p);
	ck_assert_int_eq(shemb_backward(p.ctx, 2, s, gr), 0); /* plans kept */
	tu_bags_free(&b);
	shemb_table_destroy(t2);
	pair_close(&p);
}
END_TEST

/* ---- budgets and attributes ---- */

START_TEST(budgets_and_bad_attributes)
{
	struct shemb_ctx_attr ca;
	struct shemb_table_attr a;
	shemb_ctx *ctx;
	shemb_table *t = NULL;
	char dir[] = "/tmp/test_tier.XXXXXX", path[64];

	shemb_ctx_attr_init(&ca);
	ca.nthreads = 1;
	ca.device_mem_bytes = 1000;
	ck_assert_int_eq(shemb_ctx_create(&ca, &ctx), 0);
	base_attr(&a, SHEMB_F32, SHEMB_OPT_SGD);
	a.cache_rows = 64; /* 64 records of 32 bytes and more */
	ck_assert_int_eq(shemb_table_create(ctx, &a, &t), SHEMB_ENOMEM);
	ck_assert(tu_contains_all(shemb_ctx_last_error(ctx), "device",
				  "budget", NULL));
	ck_assert_ptr_null(t);
	a.cache_rows = 8;
	t = make(ctx, &a);
	shemb_table_destroy(t);

	base_attr(&a, SHEMB_F32, SHEMB_OPT_SGD);
	a.rows = 4096;
	a.host_mem_bytes = 4096;
	ck_assert_int_eq(shemb_table_create(ctx, &a, &t), SHEMB_ENOMEM);
	ck_assert(tu_contains_all(shemb_ctx_last_error(ctx), "host_mem_bytes",
				  "cold_path", NULL));
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/big", dir);
	a.cold_path = path;
	a.cache_rows = 16;
	t = make(ctx, &a);
	ck_assert_int_eq(access(path, F_OK), 0);
	shemb_table_destroy(t);
	ck_assert_int_ne(access(path, F_OK), 0);

	/* a second table on a file in use is refused; the first keeps
	 * its file */
	a.cache_rows = 8; /* two tiers within the device budget */
	t = make(ctx, &a);
	{
		shemb_table *t2 = NULL;
		int64_t id = 5;
		float v[DIM], w[DIM];

		ck_assert_int_eq(shemb_table_read_rows(t, 1, &id, v,
						       SHEMB_F32), 0);
		ck_assert_int_eq(shemb_table_create(ctx, &a, &t2),
				 SHEMB_EINVAL);
		ck_assert(tu_contains_all(shemb_ctx_last_error(ctx), path,
					  "in use", NULL));
		ck_assert_int_eq(access(path, F_OK), 0);
		for (int i = 0; i < 40; i++) { /* rows cycle through the file */
			int64_t other = 100 + i;

			ck_assert_int_eq(shemb_table_read_rows(t, 1, &other, w,
							       SHEMB_F32), 0);
		}
		ck_assert_int_eq(shemb_table_read_rows(t, 1, &id, w,
						       SHEMB_F32), 0);
		ck_assert_int_eq(memcmp(v, w, sizeof(v)), 0);
	}
	shemb_table_destroy(t);
	ck_assert_int_ne(access(path, F_OK), 0);

	a.cold_path = "/nonexistent-dir/rows";
	ck_assert_int_eq(shemb_table_create(ctx, &a, &t), SHEMB_EIO);
	ck_assert(tu_contains_all(shemb_ctx_last_error(ctx),
				  "/nonexistent-dir/rows", NULL));
	a.cold_path = "";
	ck_assert_int_eq(shemb_table_create(ctx, &a, &t), SHEMB_EINVAL);
	a.cold_path = path;
	a.cache_rows = 0;
	ck_assert_int_eq(shemb_table_create(ctx, &a, &t), SHEMB_EINVAL);
	ck_assert(tu_contains_all(shemb_ctx_last_error(ctx), "cold_path",
				  "cache_rows", NULL));
	a.cold_path = NULL;
	a.cache_rows = -1;
	ck_assert_int_eq(shemb_table_create(ctx, &a, &t), SHEMB_EINVAL);
	a.cache_rows = 4;
	a.cache_policy = 3;
	ck_assert_int_eq(shemb_table_create(ctx, &a, &t), SHEMB_EINVAL);
	ck_assert(tu_contains_all(shemb_ctx_last_error(ctx), "cache_policy",
				  NULL));
	{
		shemb_ctx *bad = NULL;

		shemb_ctx_attr_init(&ca);
		ca.prefetch_thread = 2;
		ck_assert_int_eq(shemb_ctx_create(&ca, &bad), SHEMB_EINVAL);
		ck_assert(tu_contains_all(shemb_ctx_last_error(NULL),
					  "prefetch_thread", NULL));
		ck_assert_ptr_null(bad);
	}
	ck_assert_ptr_null(t);
	rmdir(dir);
	shemb_ctx_destroy(ctx);
}
END_TEST

/* ---- lookups from several threads ---- */

#define NTHREADS 4
#define NCALLS 40

struct reader {
	shemb_ctx *ctx;
	shemb_table *t;
	struct tu_bags bags[NCALLS];
	float *want[NCALLS];
	int bad;
};

static void *read_loop(void *arg)
{
	struct reader *rd = arg;

	for (int i = 0; i < NCALLS; i++) {
		int64_t n = rd->bags[i].nbags * DIM;
		float *o = tu_calloc((size_t)n + 1, sizeof(float));
		struct shemb_bags s = tu_bags_view(&rd->bags[i], rd->t,
						   SHEMB_POOL_SUM);

		if (shemb_lookup(rd->ctx, 1, &s, &o, SHEMB_LOOKUP_NO_GRAD) ||
		    memcmp(o, rd->want[i], (size_t)n * sizeof(float)))
			rd->bad++;
		free(o);
	}
	return NULL;
}

START_TEST(concurrent_lookups_share_the_tier)
{
	struct pair p;
	struct reader rd[NTHREADS];
	pthread_t th[NTHREADS];
	struct tu_rng r;

	pair_open(&p, SHEMB_F32, SHEMB_OPT_SGD, 12, SHEMB_CACHE_LRU, false);
	tu_rng_seed(&r, 77);
	for (int k = 0; k < NTHREADS; k++) {
		rd[k] = (struct reader){ .ctx = p.ctx, .t = p.tier };
		for (int i = 0; i < NCALLS; i++) {
			struct tu_bags *b = &rd[k].bags[i];
			struct shemb_bags s;
			float *o;

			few_ids_bags(b, &r, 8, false);
			o = tu_calloc((size_t)(b->nbags * DIM) + 1, 4);
			s = tu_bags_view(b, p.host, SHEMB_POOL_SUM);
			ck_assert_int_eq(shemb_lookup(p.ctx, 1, &s, &o,
						      SHEMB_LOOKUP_NO_GRAD), 0);
			rd[k].want[i] = o;
		}
	}
	for (int k = 0; k < NTHREADS; k++)
		pthread_create(&th[k], NULL, read_loop, &rd[k]);
	for (int k = 0; k < NTHREADS; k++) {
		pthread_join(th[k], NULL);
		ck_assert_int_eq(rd[k].bad, 0);
		for (int i = 0; i < NCALLS; i++) {
			tu_bags_free(&rd[k].bags[i]);
			free(rd[k].want[i]);
		}
	}
	pair_close(&p);
}
END_TEST

/* A call needing most of the slots completes, with the right rows,
 * among a stream of small calls from other threads (the order of the
 * turns they take is checked by test_tier_turns). */
struct stream {
	shemb_ctx *ctx;
	shemb_table *t;
	atomic_int *stop;
	int bad;
};

static void *small_calls(void *arg)
{
	struct stream *s = arg;
	struct tu_rng r;

	tu_rng_seed(&r, (uint64_t)(uintptr_t)s);
	while (!atomic_load(s->stop)) {
		int64_t ids[2] = { tu_rng_below(&r, ROWS),
				   tu_rng_below(&r, ROWS) };

		float out[2 * DIM];

		if (call_ids(s->ctx, s->t, 2, ids, IDS_LOOKUP, out))
			s->bad++;
	}
	return NULL;
}

START_TEST(a_large_call_is_not_starved)
{
	struct pair p;
	struct stream s[3];
	pthread_t th[3];
	atomic_int stop = 0;
	float got[14 * DIM], want[14 * DIM];

	pair_open(&p, SHEMB_F32, SHEMB_OPT_SGD, 16, SHEMB_CACHE_LRU, false);
	for (int k = 0; k < 3; k++) {
		s[k] = (struct stream){ p.ctx, p.tier, &stop, 0 };
		pthread_create(&th[k], NULL, small_calls, &s[k]);
	}
	for (int i = 0; i < 30; i++) {
		int64_t ids[14];

		for (int k = 0; k < 14; k++)
			ids[k] = (i * 14 + k) % ROWS;
		ck_assert_int_eq(call_ids(p.ctx, p.tier, 14, ids, IDS_LOOKUP,
					  got), 0);
		ck_assert_int_eq(call_ids(p.ctx, p.host, 14, ids, IDS_LOOKUP,
					  want), 0);
		ck_assert_int_eq(memcmp(got, want, sizeof(got)), 0);
	}
	atomic_store(&stop, 1);
	for (int k = 0; k < 3; k++) {
		pthread_join(th[k], NULL);
		ck_assert_int_eq(s[k].bad, 0);
	}
	pair_close(&p);
}
END_TEST

/* With prefetch_thread set, the first prefetch starts one thread, which
 * the context ends; without it, none. */
START_TEST(prefetch_thread_is_the_contexts)
{
	const int64_t ids[] = { 3, 4 };

	for (int on = 0; on < 2; on++) {
		int before = tu_thread_baseline();
		shemb_ctx *ctx;
		shemb_table *t;

		prefetch_thread = on;
		ctx = new_ctx();
		t = cache_table(ctx, 4, SHEMB_CACHE_LRU);
		ck_assert_int_eq(tu_thread_count(), before + 1); /* the pool's */
		prefetch_ids(ctx, t, 2, ids);
		ck_assert_int_eq(tu_thread_count(), before + 1 + on);
		ck_assert_uint_eq(stats_of(t).cache_misses, 2);
		shemb_table_destroy(t);
		shemb_ctx_destroy(ctx);
		ck_assert_int_eq(tu_thread_count_settled(before), before);
	}
	prefetch_thread = 1;
}
END_TEST

static Suite *tier_suite(void)
{
	Suite *s = suite_create("tier");
	TCase *tc = tcase_create("nothing lost");
	TCase *ts = tcase_create("statistics");
	TCase *tf = tcase_create("failures");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, nothing_lost_host_tier);
	tcase_add_test(tc, nothing_lost_cold_tier);
	tcase_add_test(tc, nothing_lost_prefetch_in_the_call);
	tcase_add_test(tc, concurrent_lookups_share_the_tier);
	tcase_add_test(tc, several_sets_of_one_table);
	tcase_add_test(tc, a_large_call_is_not_starved);
	tcase_add_test(tc, prefetch_thread_is_the_contexts);
	suite_add_tcase(s, tc);
	tcase_add_test(ts, lru_counts);
	tcase_add_test(ts, reset_comes_after_the_prefetched_loads);
	tcase_add_test(ts, lfu_keeps_the_frequent_row);
	tcase_add_test(ts, lookahead_keeps_the_announced_row);
	tcase_add_test(ts, lookahead_evicts_the_row_needed_last);
	tcase_add_test(ts, lookahead_prefetch_announces_its_step);
	tcase_add_test(ts, too_many_announced_steps);
	tcase_add_test(ts, prefetch_spares_the_current_step);
	tcase_add_test(ts, reused_slot_leaves_the_plan);
	suite_add_tcase(s, ts);
	tcase_set_timeout(tf, 60);
	tcase_add_test(tf, batch_over_capacity_is_refused);
	tcase_add_test(tf, refused_lookup_leaves_the_tier);
	tcase_add_test(tf, refused_lookup_uses_up_no_announced_step);
	tcase_add_test(tf, refused_lookup_beside_leaves_the_plan);
	tcase_add_test(tf, cold_read_error_fails_the_step);
	tcase_add_test(tf, cold_write_error_keeps_the_dirty_rows);
	tcase_add_test(tf, cold_truncated_file_is_an_io_error);
	tcase_add_test(tf, backward_changes_no_table_when_a_tier_fails);
	tcase_add_test(tf, budgets_and_bad_attributes);
	suite_add_tcase(s, tf);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(tier_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
