/*
 * test_gpu_backend.c - the CUDA backend against the CPU backend on the
 * same inputs: twin tables (one per backend) go through the same random
 * lookups (every pooling, weighted or not), backward steps (every
 * optimizer, both weight decay modes), row writes and reads, in every
 * storage dtype, at a row width that takes vector loads and one that does
 * not, resident in device memory or through a small device tier under
 * eviction pressure; outputs and final rows must be bitwise equal.  Then
 * the same with bag sets, outputs and gradients in device memory, and
 * (on the emulated device) ids and gradients of another device refused;
 * on a GPU, a context on the program's own stream waits for the work
 * queued there before each call.  A serving table in device memory,
 * looked up from device bag sets while another thread reloads it, gives
 * one checkpoint's rows or the other's, never freed ones.
 * Without a usable GPU it says why and skips (exit 77).
 */
#define _GNU_SOURCE
#include <ftw.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shemb.h"
#include "tests/gpu/gputest.h"

#define ROWS 300
#define MAX_SETS 16
#define STEPS 5

struct set {
	int pooling;
	int64_t nbags, nids;
	int64_t *offsets, *ids;
	float *weights;
};

/* One set in eight is empty, with NULL offsets (and, weighted, a weight
 * array of nothing), which the library accepts. */
static void random_set(struct set *s, int pooling)
{
	s->pooling = pooling;
	if (rnd() % 8 == 0) {
		s->nbags = s->nids = 0;
		s->offsets = NULL;
		s->ids = NULL;
		s->weights = rnd() % 2 ? xmalloc(sizeof(float)) : NULL;
		return;
	}
	s->nbags = 1 + (int64_t)(rnd() % 6);
	s->offsets = xmalloc(((size_t)s->nbags + 1) * sizeof(int64_t));
	s->offsets[0] = 0;
	for (int64_t b = 0; b < s->nbags; b++)
		s->offsets[b + 1] = s->offsets[b] + (int64_t)(rnd() % 4);
	s->nids = s->offsets[s->nbags];
	s->ids = xmalloc((size_t)s->nids * sizeof(int64_t));
	for (int64_t i = 0; i < s->nids; i++)
		s->ids[i] = (int64_t)(rnd() % ROWS);
	s->weights = NULL;
	if (rnd() % 2) {
		s->weights = xmalloc((size_t)s->nids * sizeof(float));
		for (int64_t i = 0; i < s->nids; i++)
			s->weights[i] = rndf(-1.5f, 1.5f);
	}
}

static void free_set(struct set *s)
{
	free(s->offsets);
	free(s->ids);
	free(s->weights);
}

static int64_t out_rows(const struct set *s)
{
	return s->pooling == SHEMB_POOL_NONE ? s->nids : s->nbags;
}

static struct shemb_bags view(const struct set *s, shemb_table *t)
{
	struct shemb_bags b;

	shemb_bags_init(&b);
	b.table = t;
	b.pooling = s->pooling;
	b.nbags = s->nbags;
	b.nids = s->nids;
	b.offsets = s->offsets;
	b.ids = s->ids;
	b.weights = s->weights;
	return b;
}

struct config {
	int dtype, optimizer, dim, wd_mode;
	int64_t cache_rows;
	int nsets;
};

static shemb_table *twin(shemb_ctx *ctx, const struct config *c)
{
	struct shemb_table_attr a;
	shemb_table *t = NULL;

	shemb_table_attr_init(&a);
	a.rows = ROWS;
	a.dim = c->dim;
	a.dtype = c->dtype;
	a.optimizer = c->optimizer;
	a.lr = 0.05f;
	a.weight_decay = 0.01f;
	a.weight_decay_mode = c->wd_mode;
	a.initial_accumulator = 0.1f;
	a.cache_rows = c->cache_rows;
	a.seed = 7;
	if (shemb_table_create(ctx, &a, &t))
		printf("table_create: %s\n", shemb_ctx_last_error(ctx));
	return t;
}

static int same_bits(const float *a, const float *b, size_t n)
{
	return memcmp(a, b, n * sizeof(float)) == 0;
}

/* Failed reads leave a different mark on each twin (mark), so two
 * failures never compare equal. */
static float *read_all(shemb_table *t, int dim, int mark)
{
	int64_t *ids = xmalloc(ROWS * sizeof(int64_t));
	float *rows = xmalloc((size_t)ROWS * (size_t)dim * sizeof(float));

	for (int64_t i = 0; i < ROWS; i++)
		ids[i] = i;
	if (shemb_table_read_rows(t, ROWS, ids, rows, SHEMB_F32)) {
		CHECK(0, "read_rows: %s", shemb_ctx_last_error(NULL));
		memset(rows, mark, (size_t)ROWS * (size_t)dim * sizeof(float));
	}
	free(ids);
	return rows;
}

/* One step on both twins: lookup, compare, backward with the same
 * gradients. */
static void step(shemb_ctx *cg, shemb_table *tg, shemb_ctx *cc,
		 shemb_table *tc, int dim, int nsets, const char *what)
{
	struct set s[MAX_SETS];
	struct shemb_bags bg[MAX_SETS] = { { 0 } }, bc[MAX_SETS] = { { 0 } };
	float *og[MAX_SETS] = { 0 }, *oc[MAX_SETS] = { 0 };
	float *grad[MAX_SETS] = { 0 };
	int rg, rc;

	for (int i = 0; i < nsets; i++) {
		random_set(&s[i], i % 4);
		bg[i] = view(&s[i], tg);
		bc[i] = view(&s[i], tc);
		size_t n = (size_t)out_rows(&s[i]) * (size_t)dim;
		og[i] = xmalloc(n * sizeof(float));
		oc[i] = xmalloc(n * sizeof(float));
		grad[i] = xmalloc(n * sizeof(float));
		for (size_t k = 0; k < n; k++)
			grad[i][k] = rndf(-1.0f, 1.0f);
	}
	rg = shemb_lookup(cg, nsets, bg, og, 0);
	rc = shemb_lookup(cc, nsets, bc, oc, 0);
	CHECK(rg == 0 && rc == 0, "%s: lookup %d / %d: %s", what, rg, rc,
	      shemb_ctx_last_error(cg));
	for (int i = 0; i < nsets; i++)
		CHECK(same_bits(og[i], oc[i],
				(size_t)out_rows(&s[i]) * (size_t)dim),
		      "%s: set %d (pooling %d) lookup differs", what, i,
		      s[i].pooling);
	rg = shemb_backward(cg, nsets, bg, (const float *const *)grad);
	rc = shemb_backward(cc, nsets, bc, (const float *const *)grad);
	CHECK(rg == 0 && rc == 0, "%s: backward %d / %d: %s", what, rg, rc,
	      shemb_ctx_last_error(cg));
	for (int i = 0; i < nsets; i++) {
		free_set(&s[i]);
		free(og[i]);
		free(oc[i]);
		free(grad[i]);
	}
}

/* Rows written (some twice in one call: the last wins) with their state
 * reset, on both. */
static void write_some(shemb_table *tg, shemb_table *tc, int dim,
		       const char *what)
{
	int64_t ids[9];
	float *v = xmalloc(9 * (size_t)dim * sizeof(float));

	for (int i = 0; i < 9; i++)
		ids[i] = (int64_t)(rnd() % ROWS);
	ids[8] = ids[2];
	for (int k = 0; k < 9 * dim; k++)
		v[k] = rndf(-2.0f, 2.0f);
	CHECK(shemb_table_write_rows(tg, 9, ids, v, SHEMB_F32,
				     SHEMB_WRITE_RESET_STATE) == 0 &&
		      shemb_table_write_rows(tc, 9, ids, v, SHEMB_F32,
					     SHEMB_WRITE_RESET_STATE) == 0,
	      "%s: write_rows failed", what);
	free(v);
}

static void run_config(shemb_ctx *cg, shemb_ctx *cc, const struct config *c)
{
	char what[128];
	shemb_table *tg = twin(cg, c), *tc = twin(cc, c);
	float *rg, *rc;

	snprintf(what, sizeof(what), "dtype %d opt %d dim %d wd %d cache %lld",
		 c->dtype, c->optimizer, c->dim, c->wd_mode,
		 (long long)c->cache_rows);
	if (!tg || !tc) {
		CHECK(0, "%s: tables not made", what);
		return;
	}
	for (int k = 0; k < STEPS; k++) {
		step(cg, tg, cc, tc, c->dim, c->nsets, what);
		if (k == 2)
			write_some(tg, tc, c->dim, what);
	}
	rg = read_all(tg, c->dim, 0xff);
	rc = read_all(tc, c->dim, 0xfe);
	CHECK(same_bits(rg, rc, (size_t)ROWS * (size_t)c->dim),
	      "%s: rows differ after training", what);
	free(rg);
	free(rc);
	shemb_table_destroy(tg);
	shemb_table_destroy(tc);
}

static void *to_device(const void *p, size_t n)
{
	void *d = dev_alloc(n);

	dev_put(d, p, n);
	return d;
}

/* An inference lookup reads device sets in place (the backend checks
 * them): the same rows as the host path, and bad ids or offsets in
 * device memory refused with the position named. */
static void device_inference(shemb_ctx *cg, struct shemb_bags *bg, float *dout,
			     const float *want, size_t n, int64_t nids)
{
	float *got = xmalloc(n * sizeof(float));
	int64_t bad = ROWS + 5, keep;
	int64_t *ids = (int64_t *)bg->ids, *off = (int64_t *)bg->offsets;

	dev_fill(dout, 0, n * sizeof(float));
	CHECK(shemb_lookup(cg, 1, bg, &dout, SHEMB_LOOKUP_NO_GRAD) == 0,
	      "device inference: %s", shemb_ctx_last_error(cg));
	dev_get(got, dout, n * sizeof(float));
	CHECK(same_bits(got, want, n), "device inference: lookup differs");
	if (nids > 0) {
		dev_get(&keep, ids + nids - 1, 8);
		dev_put(ids + nids - 1, &bad, 8);
		CHECK(shemb_lookup(cg, 1, bg, &dout, SHEMB_LOOKUP_NO_GRAD) ==
				      SHEMB_EINVAL &&
			      strstr(shemb_ctx_last_error(cg), "305"),
		      "device inference: a bad id: %s",
		      shemb_ctx_last_error(cg));
		dev_put(ids + nids - 1, &keep, 8);
	}
	dev_get(&keep, off, 8);
	bad = 1;
	dev_put(off, &bad, 8);
	CHECK(shemb_lookup(cg, 1, bg, &dout, SHEMB_LOOKUP_NO_GRAD) ==
			      SHEMB_EINVAL &&
		      strstr(shemb_ctx_last_error(cg), "offsets[0]"),
	      "device inference: bad offsets: %s", shemb_ctx_last_error(cg));
	dev_put(off, &keep, 8);
	free(got);
}

/* Ids or a gradient in another device's memory are refused, naming the
 * array, and the table is unchanged (where such memory can be had).  bg
 * is a device set of tg whose planned lookup was the last. */
static void other_device_refused(shemb_ctx *cg, shemb_table *tg,
				 struct shemb_bags bg, const int64_t *ids,
				 const float *grad, float *dout, size_t n)
{
	size_t idb = (size_t)bg.nids * 8;
	void *oids = dev_alloc_other(idb), *ograd = dev_alloc_other(n * 4);
	const float *g = ograd;
	float *before, *after;

	if (!oids || !ograd)
		return;
	dev_put(oids, ids, idb);
	dev_put(ograd, grad, n * 4);
	before = read_all(tg, 64, 0xff);
	CHECK(shemb_backward(cg, 1, &bg, &g) == SHEMB_EINVAL &&
		      strstr(shemb_ctx_last_error(cg),
			     "gradient is not memory of the context"),
	      "a gradient of another device: %s", shemb_ctx_last_error(cg));
	bg.ids = oids;
	CHECK(shemb_lookup(cg, 1, &bg, &dout, 0) == SHEMB_EINVAL &&
		      strstr(shemb_ctx_last_error(cg),
			     "ids is not memory of the context"),
	      "ids of another device: %s", shemb_ctx_last_error(cg));
	after = read_all(tg, 64, 0xfe);
	CHECK(same_bits(before, after, (size_t)ROWS * 64),
	      "a refused call changed the table");
	free(after);
	free(before);
	dev_free(oids);
	dev_free(ograd);
}

/* A device set whose counts are beyond what a call takes, beside a host
 * set (so that the device arrays are staged to the host): refused before
 * its arrays are read or copied by those counts, the table unchanged.
 * Staged by the counts, 2^31 ids were read from the device's memory on
 * the host, and 2^61 bags wrapped the copy's size. */
static void huge_device_set_refused(shemb_ctx *cg, shemb_table *tg,
				    struct shemb_bags bg, float *dout,
				    float *hout)
{
	struct shemb_bags b[2];
	float *outs[2] = { hout, dout };
	float *before = read_all(tg, 64, 0xff), *after;

	b[0] = bg;
	b[0].mem = SHEMB_MEM_HOST;
	b[0].nbags = 0;
	b[0].nids = 0;
	b[0].offsets = NULL;
	b[0].ids = NULL;
	b[0].weights = NULL;
	for (int k = 0; k < 2; k++) {
		b[1] = bg;
		if (k)
			b[1].nbags = (int64_t)1 << 61;
		else
			b[1].nids = (int64_t)1 << 31;
		CHECK(shemb_lookup(cg, 2, b, outs, 0) == SHEMB_EINVAL &&
			      strstr(shemb_ctx_last_error(cg), "2^31"),
		      "a device set of %s: %s", k ? "2^61 bags" : "2^31 ids",
		      shemb_ctx_last_error(cg));
	}
	after = read_all(tg, 64, 0xfe);
	CHECK(same_bits(before, after, (size_t)ROWS * 64),
	      "a refused call changed the table");
	free(after);
	free(before);
}

/* Bag sets, outputs and gradients in device memory against host ones. */
static void device_buffers(shemb_ctx *cg, shemb_ctx *cc)
{
	struct config c = { SHEMB_F32, SHEMB_OPT_ADAGRAD, 64, SHEMB_WD_L2, 0,
			    1 };
	shemb_table *tg = twin(cg, &c), *tc = twin(cc, &c);
	struct set s;
	struct shemb_bags bg, bc;
	float *og, *oc, *grad, *dout, *dgrad, *rg, *rc;
	size_t n;

	do {
		random_set(&s, SHEMB_POOL_SUM);
		if (s.nbags == 0)
			free_set(&s);
	} while (s.nbags == 0);
	n = (size_t)s.nbags * 64;
	oc = xmalloc(n * sizeof(float));
	og = xmalloc(n * sizeof(float));
	grad = xmalloc(n * sizeof(float));
	for (size_t k = 0; k < n; k++)
		grad[k] = rndf(-1.0f, 1.0f);
	bc = view(&s, tc);
	bg = view(&s, tg);
	bg.mem = SHEMB_MEM_DEVICE;
	bg.offsets = to_device(s.offsets, ((size_t)s.nbags + 1) * 8);
	bg.ids = to_device(s.ids, (size_t)s.nids * 8);
	bg.weights = s.weights ? to_device(s.weights, (size_t)s.nids * 4)
			       : NULL;
	dout = to_device(og, n * sizeof(float));
	dgrad = to_device(grad, n * sizeof(float));
	CHECK(shemb_lookup(cg, 1, &bg, &dout, 0) == 0 &&
		      shemb_lookup(cc, 1, &bc, &oc, 0) == 0,
	      "device buffers: lookup: %s", shemb_ctx_last_error(cg));
	dev_get(og, dout, n * sizeof(float));
	CHECK(same_bits(og, oc, n), "device buffers: lookup differs");
	device_inference(cg, &bg, dout, oc, n, s.nids);
	other_device_refused(cg, tg, bg, s.ids, grad, dout, n);
	huge_device_set_refused(cg, tg, bg, dout, oc);
	CHECK(shemb_backward(cg, 1, &bg, (const float *const *)&dgrad) == 0 &&
		      shemb_backward(cc, 1, &bc,
				     (const float *const *)&grad) == 0,
	      "device buffers: backward: %s", shemb_ctx_last_error(cg));
	rg = read_all(tg, 64, 0xff);
	rc = read_all(tc, 64, 0xfe);
	CHECK(same_bits(rg, rc, (size_t)ROWS * 64),
	      "device buffers: rows differ after the backward");
	dev_free((void *)bg.offsets);
	dev_free((void *)bg.ids);
	dev_free((void *)bg.weights);
	dev_free(dout);
	dev_free(dgrad);
	free(rg);
	free(rc);
	free(og);
	free(oc);
	free(grad);
	free_set(&s);
	shemb_table_destroy(tg);
	shemb_table_destroy(tc);
}

/* ---- a serving table reloaded under device lookups ---- */

struct serving {
	shemb_ctx *ctx;
	shemb_table *t;
	atomic_bool stop;
	long lookups, mixed, failed;
};

/* A checkpoint of a ROWS x 64 table whose every value is v, in a new
 * directory (NULL if it cannot be made). */
static char *checkpoint_of(shemb_ctx *cc, float v)
{
	char tmpl[] = "/tmp/test_gpu_serve.XXXXXX", *dir = NULL;
	struct shemb_table_attr a;
	float *x = xmalloc((size_t)ROWS * 64 * sizeof(float));
	int64_t ids[ROWS];
	shemb_table *t = NULL;

	shemb_table_attr_init(&a);
	a.rows = ROWS;
	a.dim = 64;
	for (int i = 0; i < ROWS; i++)
		ids[i] = i;
	for (size_t k = 0; k < (size_t)ROWS * 64; k++)
		x[k] = v;
	if (mkdtemp(tmpl) && !shemb_table_create(cc, &a, &t) &&
	    !shemb_table_write_rows(t, ROWS, ids, x, SHEMB_F32, 0) &&
	    !shemb_table_save(t, tmpl, 0))
		dir = strdup(tmpl);
	CHECK(dir != NULL, "a checkpoint to serve: %s",
	      shemb_ctx_last_error(cc));
	shemb_table_destroy(t);
	free(x);
	return dir;
}

static int remove_one(const char *path, const struct stat *st, int flag,
		      struct FTW *ftw)
{
	return remove(path);
}

static void remove_checkpoint(char *dir)
{
	if (dir)
		nftw(dir, remove_one, 8, FTW_DEPTH | FTW_PHYS);
	free(dir);
}

/* Device lookups of one bag of every row, until told to stop: the sum is
 * ROWS times one checkpoint's value in every column. */
static void *look_up_while_reloaded(void *arg)
{
	struct serving *s = arg;
	int64_t off[2] = { 0, ROWS }, ids[ROWS];
	float got[64], *dout = dev_alloc(sizeof(got));
	struct shemb_bags b;

	for (int i = 0; i < ROWS; i++)
		ids[i] = i;
	shemb_bags_init(&b);
	b.table = s->t;
	b.mem = SHEMB_MEM_DEVICE;
	b.nbags = 1;
	b.nids = ROWS;
	b.offsets = to_device(off, sizeof(off));
	b.ids = to_device(ids, sizeof(ids));
	while (!atomic_load(&s->stop)) {
		if (shemb_lookup(s->ctx, 1, &b, &dout,
				 SHEMB_LOOKUP_NO_GRAD)) {
			s->failed++;
			continue;
		}
		dev_get(got, dout, sizeof(got));
		s->lookups++;
		for (int c = 0; c < 64; c++)
			if (got[c] != got[0] || (got[0] != ROWS &&
						 got[0] != -ROWS)) {
				s->mixed++;
				break;
			}
	}
	dev_free((void *)b.offsets);
	dev_free((void *)b.ids);
	dev_free(dout);
	return NULL;
}

static void serving_reloaded(shemb_ctx *cg, shemb_ctx *cc)
{
	char *dir[2] = { checkpoint_of(cc, 1.0f), checkpoint_of(cc, -1.0f) };
	struct serving s = { .ctx = cg };
	struct shemb_table_attr a;
	pthread_t reader;
	int reloads = 0;

	shemb_table_attr_init(&a);
	a.rows = ROWS;
	a.dim = 64;
	a.read_only = 1;
	if (!dir[0] || !dir[1] || shemb_table_load(cg, dir[0], &a, &s.t)) {
		CHECK(0, "serving: load: %s", shemb_ctx_last_error(cg));
		goto out;
	}
	if (pthread_create(&reader, NULL, look_up_while_reloaded, &s)) {
		CHECK(0, "serving: a thread");
		goto out;
	}
	/* until the lookups ran among the reloads, and at most 2000 */
	for (int k = 1; reloads < 2000 && (reloads < 200 || s.lookups < 50);
	     k++) {
		CHECK(shemb_table_reload(s.t, dir[k % 2]) == 0,
		      "serving: reload: %s", shemb_ctx_last_error(cg));
		reloads++;
	}
	atomic_store(&s.stop, true);
	pthread_join(reader, NULL);
	CHECK(s.lookups > 0 && s.mixed == 0 && s.failed == 0,
	      "serving: %ld lookups during %d reloads, %ld of them mixed or "
	      "freed rows, %ld failed", s.lookups, reloads, s.mixed,
	      s.failed);
out:
	shemb_table_destroy(s.t);
	remove_checkpoint(dir[0]);
	remove_checkpoint(dir[1]);
}

#ifndef SHEMB_TEST_EMU
static void CUDART_CB hold_stream(void *arg)
{
	(void)arg;
	usleep(200000);
}

/* Work queued on stream st, then a copy of n bytes to dst behind it: the
 * copy lands only once the host function has slept, so a call that did
 * not order its work after st's would find dst as it was. */
static void queue_late_copy(cudaStream_t st, void *dst, const void *src,
			    size_t n)
{
	CHECK(cudaLaunchHostFunc(st, hold_stream, NULL) == cudaSuccess &&
		      cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice,
				      st) == cudaSuccess,
	      "user stream: queueing the late copy");
}

static void *pinned_copy(const void *p, size_t n)
{
	void *h = NULL;

	if (cudaMallocHost(&h, n ? n : 1) != cudaSuccess)
		abort();
	memcpy(h, p, n);
	return h;
}

/* A non-empty set of SUM bags. */
static void busy_set(struct set *s)
{
	do {
		random_set(s, SHEMB_POOL_SUM);
		if (s->nbags == 0 || s->nids == 0)
			free_set(s);
	} while (s->nbags == 0 || s->nids == 0);
}

/* One lookup and backward of the set on both twins, the GPU one with the
 * ids and the gradient copied in late on the program's stream st (over
 * zeros); outputs and rows compared. */
static void late_step(cudaStream_t st, shemb_ctx *cu, shemb_table *tg,
		      shemb_ctx *cc, shemb_table *tc, const struct set *s,
		      bool late, const char *what)
{
	size_t n = (size_t)s->nbags * 64, idb = (size_t)s->nids * 8;
	float *og = xmalloc(n * 4), *oc = xmalloc(n * 4), *grad, *hgrad;
	float *dout = dev_alloc(n * 4), *dgrad = dev_alloc(n * 4), *rg, *rc;
	struct shemb_bags bg = view(s, tg), bc = view(s, tc);
	int64_t *hids = pinned_copy(s->ids, idb);

	grad = xmalloc(n * 4);
	for (size_t k = 0; k < n; k++)
		grad[k] = rndf(-1.0f, 1.0f);
	hgrad = pinned_copy(grad, n * 4);
	bg.mem = SHEMB_MEM_DEVICE;
	bg.offsets = to_device(s->offsets, ((size_t)s->nbags + 1) * 8);
	bg.ids = dev_alloc(idb);
	bg.weights = s->weights ? to_device(s->weights, (size_t)s->nids * 4)
				: NULL;
	dev_fill((void *)bg.ids, 0, idb);
	dev_fill(dgrad, 0, n * 4);
	if (late)
		queue_late_copy(st, (void *)bg.ids, hids, idb);
	else
		dev_put((void *)bg.ids, hids, idb);
	CHECK(shemb_lookup(cu, 1, &bg, &dout, 0) == 0 &&
		      shemb_lookup(cc, 1, &bc, &oc, 0) == 0,
	      "%s: lookup: %s", what, shemb_ctx_last_error(cu));
	dev_get(og, dout, n * 4);
	CHECK(same_bits(og, oc, n), "%s: the lookup did not wait for the "
	      "ids queued on the program's stream", what);
	if (late)
		queue_late_copy(st, dgrad, hgrad, n * 4);
	else
		dev_put(dgrad, hgrad, n * 4);
	CHECK(shemb_backward(cu, 1, &bg, (const float *const *)&dgrad) == 0 &&
		      shemb_backward(cc, 1, &bc,
				     (const float *const *)&grad) == 0,
	      "%s: backward: %s", what, shemb_ctx_last_error(cu));
	rg = read_all(tg, 64, 0xff);
	rc = read_all(tc, 64, 0xfe);
	CHECK(same_bits(rg, rc, (size_t)ROWS * 64), "%s: the backward did "
	      "not wait for the gradient queued on the stream", what);
	dev_free((void *)bg.offsets);
	dev_free((void *)bg.ids);
	dev_free((void *)bg.weights);
	dev_free(dout);
	dev_free(dgrad);
	cudaFreeHost(hids);
	cudaFreeHost(hgrad);
	free(rg);
	free(rc);
	free(og);
	free(oc);
	free(grad);
}

/* A context on the program's stream: a call's work comes after what the
 * program queued there before it, with the tables in device memory (sets
 * read in place) and through a device tier (sets staged).  A first step
 * with nothing late grows the context's buffers, so that the late one
 * finds them made. */
static void user_stream(shemb_ctx *cc)
{
	struct shemb_ctx_attr a;
	cudaStream_t st = NULL;
	shemb_ctx *cu = NULL;

	if (cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) !=
	    cudaSuccess) {
		CHECK(0, "user stream: cudaStreamCreate");
		return;
	}
	shemb_ctx_attr_init(&a);
	a.nthreads = 2;
	a.device = SHEMB_DEVICE_CUDA;
	/* each thread's own stream: refused */
	a.stream = cudaStreamPerThread;
	CHECK(shemb_ctx_create(&a, &cu) == SHEMB_EINVAL &&
		      strstr(shemb_ctx_last_error(NULL), "cudaStreamPerThread"),
	      "cudaStreamPerThread: %s", shemb_ctx_last_error(NULL));
	a.stream = st;
	if (shemb_ctx_create(&a, &cu)) {
		CHECK(0, "user stream: context: %s",
		      shemb_ctx_last_error(NULL));
		cudaStreamDestroy(st);
		return;
	}
	for (int tier = 0; tier < 2; tier++) {
		struct config c = { SHEMB_F32, SHEMB_OPT_ADAM, 64, SHEMB_WD_L2,
				    tier ? 64 : 0, 1 };
		shemb_table *tg = twin(cu, &c), *tc = twin(cc, &c);
		struct set s;

		busy_set(&s);
		late_step(st, cu, tg, cc, tc, &s, false, "user stream");
		late_step(st, cu, tg, cc, tc, &s, true, tier ?
			  "user stream, device tier" : "user stream");
		free_set(&s);
		shemb_table_destroy(tg);
		shemb_table_destroy(tc);
	}
	shemb_ctx_destroy(cu);
	cudaStreamDestroy(st);
}
#endif

int main(void)
{
	static const int dtypes[] = { SHEMB_F32, SHEMB_F16, SHEMB_BF16 };
	static const int dims[] = { 64, 13, 300 };
	shemb_ctx *cg, *cc;
	int rc;

	gpu_test_init();
	rc = twin_contexts(&cg, &cc);
	if (rc)
		return rc;
	rng_state = 12345;
	for (size_t d = 0; d < sizeof(dtypes) / sizeof(dtypes[0]); d++)
		for (int opt = SHEMB_OPT_SGD; opt <= SHEMB_OPT_ADAM; opt++)
			for (size_t w = 0; w < 3; w++)
				for (int tier = 0; tier < 2; tier++) {
					struct config c = {
						dtypes[d], opt, dims[w],
						(opt + (int)w) % 2,
						tier ? 64 : 0, 4
					};

					run_config(cg, cc, &c);
				}
	for (int opt = SHEMB_OPT_SGD; opt <= SHEMB_OPT_ADAM; opt++) {
		/* many sets in one call: many arrays for the kernels */
		struct config c = { SHEMB_BF16, opt, 40, opt % 2, 0,
				    MAX_SETS };

		run_config(cg, cc, &c);
	}
	device_buffers(cg, cc);
	serving_reloaded(cg, cc);
#ifndef SHEMB_TEST_EMU
	user_stream(cc);
#endif
	shemb_ctx_destroy(cg);
	check_no_device_leak();
	shemb_ctx_destroy(cc);
	printf("%s: %d failure(s)\n", failures ? "FAIL" : "ok", failures);
	return failures ? 1 : 0;
}
