/*
 * test_gpu_train.c - training steps on one rank of a CUDA context whose
 * bag sets, outputs and gradients are all in device memory: with every
 * table of the call resident in device memory the step plan is made on
 * the device (ids sorted there) and the backward checks and updates
 * there.  Twin tables of a CPU context take the same steps on host
 * copies of the same inputs; outputs and final rows must be bitwise equal.
 * Covered: every storage dtype, optimizer, weight decay mode and pooling,
 * weighted or not, empty sets, several sets of a table and two tables in
 * a call, ids repeated many times, 20000 ids in a set, the started forms;
 * refused: backwards whose ids, offsets, counts or pooling differ from
 * their lookup's, or whose gradient is not finite, lookups of bad ids, a
 * backward without a lookup, each leaving the rows and the step plan as
 * they were; a backward giving the sets back as host memory (the plan
 * comes to the host); and a table with a device tier in such calls.
 * Without a usable GPU it skips (exit 77).
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shemb.h"
#include "tests/gpu/gputest.h"

#define ROWS 1000
#define MAX_SETS 8
#define STEPS 4

static int64_t between(int64_t lo, int64_t hi)
{
	return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1));
}

static void *to_device(const void *p, size_t n)
{
	void *d;

	if (!p)
		return NULL;
	d = dev_alloc(n);
	if (n)
		dev_put(d, p, n);
	return d;
}

/* Sets of nbags in [minbags, maxbags], bags of minlen .. maxlen ids in
 * [0, idrange) (set 0's in [0, idrange0) where that is set); with
 * empties, one set of each call has no bags (offsets NULL). */
struct shape {
	const char *name;
	int64_t minbags, maxbags;
	int minlen, maxlen;
	int64_t idrange, idrange0;
	bool empties;
};

static const struct shape small = { "small", 1, 6, 0, 3, ROWS, 0, true };
static const struct shape dups = { "dups", 20, 40, 0, 30, 4, 1, false };
static const struct shape big = { "big", 1000, 1000, 20, 20, ROWS, 0, false };
static const struct shape fixed = { "fixed", 4, 4, 3, 3, ROWS, 0, false };

/* A bag set: host arrays (the CPU twin's), their device copies (the
 * GPU's), the CPU output, the GPU's (device), and the gradient on both. */
struct set {
	int table, pooling;
	int64_t nbags, nids;
	int64_t *offsets, *ids, *doffsets, *dids;
	float *weights, *dweights;
	size_t n; /* output floats */
	float *out, *dout, *grad, *dgrad;
};

/* Twin tables: g[k] in the CUDA context, c[k] in the CPU one. */
struct twins {
	int n;
	int dim[2];
	shemb_table *g[2], *c[2];
};

/* Set i of step k: pooling i % 4, weighted in turn. */
static void fill_ids(struct set *s, const struct shape *sh, int i, int k,
		     int nsets)
{
	int64_t range = i == 0 && sh->idrange0 ? sh->idrange0 : sh->idrange;
	bool empty = sh->empties && i == (3 * k + 3) % nsets;
	bool weighted = (i / 4 + k) % 2;

	s->pooling = i % 4;
	s->nbags = empty ? 0 : between(sh->minbags, sh->maxbags);
	if (!empty) {
		s->offsets = xmalloc(((size_t)s->nbags + 1) * 8);
		s->offsets[0] = 0;
		for (int64_t b = 0; b < s->nbags; b++)
			s->offsets[b + 1] = s->offsets[b] +
					    between(sh->minlen, sh->maxlen);
		s->nids = s->offsets[s->nbags];
		s->ids = xmalloc((size_t)s->nids * 8);
	}
	for (int64_t p = 0; p < s->nids; p++)
		s->ids[p] = (int64_t)(rnd() % (uint64_t)range);
	if (weighted) {
		s->weights = xmalloc((size_t)s->nids * 4);
		for (int64_t p = 0; p < s->nids; p++)
			s->weights[p] = rndf(-1.5f, 1.5f);
	}
}

static void make_set(struct set *s, const struct twins *tw,
		     const struct shape *sh, int i, int k, int nsets)
{
	int64_t rows;

	memset(s, 0, sizeof(*s));
	s->table = i % tw->n;
	fill_ids(s, sh, i, k, nsets);
	rows = s->pooling == SHEMB_POOL_NONE ? s->nids : s->nbags;
	s->n = (size_t)rows * (size_t)tw->dim[s->table];
	s->doffsets = to_device(s->offsets, ((size_t)s->nbags + 1) * 8);
	s->dids = to_device(s->ids, (size_t)s->nids * 8);
	s->dweights = to_device(s->weights, (size_t)s->nids * 4);
	s->out = xmalloc(s->n * 4);
	s->dout = dev_alloc(s->n * 4);
	s->grad = xmalloc(s->n * 4);
	for (size_t q = 0; q < s->n; q++)
		s->grad[q] = rndf(-1.0f, 1.0f);
	s->dgrad = to_device(s->grad, s->n * 4);
}

static void free_set(struct set *s)
{
	free(s->offsets);
	free(s->ids);
	free(s->weights);
	free(s->out);
	free(s->grad);
	dev_free(s->doffsets);
	dev_free(s->dids);
	dev_free(s->dweights);
	dev_free(s->dout);
	dev_free(s->dgrad);
}

/* One call's sets, as bags of the GPU (device) and of the CPU (host). */
struct call {
	int n;
	struct set s[MAX_SETS];
	struct shemb_bags bg[MAX_SETS], bc[MAX_SETS];
	float *og[MAX_SETS], *oc[MAX_SETS];
	const float *gg[MAX_SETS], *gc[MAX_SETS];
};

static struct shemb_bags view(const struct set *s, shemb_table *t, bool dev)
{
	struct shemb_bags b;

	shemb_bags_init(&b);
	b.table = t;
	b.pooling = s->pooling;
	b.nbags = s->nbags;
	b.nids = s->nids;
	b.offsets = dev ? s->doffsets : s->offsets;
	b.ids = dev ? s->dids : s->ids;
	b.weights = dev ? s->dweights : s->weights;
	b.mem = dev ? SHEMB_MEM_DEVICE : SHEMB_MEM_HOST;
	return b;
}

static void make_call(struct call *c, const struct twins *tw, int nsets,
		      int k, const struct shape *sh)
{
	c->n = nsets;
	for (int i = 0; i < nsets; i++) {
		struct set *s = &c->s[i];

		make_set(s, tw, sh, i, k, nsets);
		c->bg[i] = view(s, tw->g[s->table], true);
		c->bc[i] = view(s, tw->c[s->table], false);
		c->og[i] = s->dout;
		c->oc[i] = s->out;
		c->gg[i] = s->dgrad;
		c->gc[i] = s->grad;
	}
}

static void free_call(struct call *c)
{
	for (int i = 0; i < c->n; i++)
		free_set(&c->s[i]);
}

static int finish(int rc, shemb_request *req)
{
	if (rc)
		return rc;
	rc = shemb_wait(req);
	shemb_request_free(req);
	return rc;
}

/* Each set's output as shemb_wait_part() says it is final, taken right
 * then (into snap[i], to free): it must be the whole lookup's already. */
static int take_parts(const struct call *c, shemb_request *q, float **snap)
{
	int rc = 0;

	for (int i = 0; i < c->n && !rc; i++) {
		const struct set *s = &c->s[i];

		rc = shemb_wait_part(q, i);
		snap[i] = xmalloc(s->n * 4);
		if (!rc && s->n)
			dev_get(snap[i], s->dout, s->n * 4);
	}
	return rc;
}

/* The GPU's lookup and backward: blocking (mode 0), each started and
 * waited for, the lookup set by set first (1, into snap), or both
 * started before either is waited for (2). */
static int gpu_step(shemb_ctx *cg, const struct call *c, int mode,
		    float **snap)
{
	shemb_request *ql = NULL, *qb = NULL;
	int rl, rb;

	if (mode == 0) {
		rl = shemb_lookup(cg, c->n, c->bg, c->og, 0);
		return rl ? rl : shemb_backward(cg, c->n, c->bg, c->gg);
	}
	rl = shemb_lookup_start(cg, c->n, c->bg, c->og, 0, &ql);
	if (mode == 1 && !rl)
		rl = take_parts(c, ql, snap);
	if (mode == 1)
		rl = finish(rl, ql);
	rb = rl ? rl : shemb_backward_start(cg, c->n, c->bg, c->gg, &qb);
	if (mode == 2)
		rl = finish(rl, ql);
	rb = finish(rb, qb);
	return rl ? rl : rb;
}

static void outputs_match(const struct call *c, const char *what)
{
	for (int i = 0; i < c->n; i++) {
		const struct set *s = &c->s[i];
		float *got = xmalloc(s->n * 4);

		if (s->n)
			dev_get(got, s->dout, s->n * 4);
		CHECK(memcmp(got, s->out, s->n * 4) == 0,
		      "%s: set %d (pooling %d, %s, %lld ids) lookup differs",
		      what, i, s->pooling, s->weights ? "weighted" : "plain",
		      (long long)s->nids);
		free(got);
	}
}

static void parts_match(const struct call *c, float **snap,
			const char *what)
{
	for (int i = 0; i < c->n; i++) {
		if (!snap[i])
			continue;
		CHECK(memcmp(snap[i], c->s[i].out, c->s[i].n * 4) == 0,
		      "%s: set %d was not final when shemb_wait_part said so",
		      what, i);
		free(snap[i]);
	}
}

static void train_step(shemb_ctx *cg, shemb_ctx *cc, const struct call *c,
		       int mode, const char *what)
{
	float *snap[MAX_SETS] = { NULL };
	int rg = gpu_step(cg, c, mode, snap);
	int rc = shemb_lookup(cc, c->n, c->bc, c->oc, 0);

	if (!rc)
		rc = shemb_backward(cc, c->n, c->bc, c->gc);
	CHECK(rg == 0 && rc == 0, "%s: step (mode %d) %d / %d: %s", what,
	      mode, rg, rc, shemb_ctx_last_error(rg ? cg : cc));
	outputs_match(c, what);
	parts_match(c, snap, what);
}

static void lookup_pair(shemb_ctx *cg, shemb_ctx *cc, const struct call *c,
			const char *what)
{
	int rg = shemb_lookup(cg, c->n, c->bg, c->og, 0);
	int rc = shemb_lookup(cc, c->n, c->bc, c->oc, 0);

	CHECK(rg == 0 && rc == 0, "%s: lookup %d / %d: %s", what, rg, rc,
	      shemb_ctx_last_error(rg ? cg : cc));
	outputs_match(c, what);
}

static void backward_pair(shemb_ctx *cg, shemb_ctx *cc, const struct call *c,
			  const char *what)
{
	int rg = shemb_backward(cg, c->n, c->bg, c->gg);
	int rc = shemb_backward(cc, c->n, c->bc, c->gc);

	CHECK(rg == 0 && rc == 0, "%s: backward %d / %d: %s", what, rg, rc,
	      shemb_ctx_last_error(rg ? cg : cc));
}

/* Every row of the tables t (tw->g or tw->c) into r.  A failed read
 * leaves mark, a different one on each side, so that two failures
 * never compare equal. */
static void read_all(const struct twins *tw, shemb_table *const *t,
		     int mark, float **r)
{
	int64_t *ids = xmalloc(ROWS * sizeof(int64_t));

	for (int64_t i = 0; i < ROWS; i++)
		ids[i] = i;
	for (int k = 0; k < tw->n; k++) {
		size_t n = (size_t)ROWS * (size_t)tw->dim[k] * 4;

		r[k] = xmalloc(n);
		if (shemb_table_read_rows(t[k], ROWS, ids, r[k], SHEMB_F32)) {
			CHECK(0, "read_rows: %s", shemb_ctx_last_error(NULL));
			memset(r[k], mark, n);
		}
	}
	free(ids);
}

/* Compare rows a and b table by table, and free them. */
static void same_rows(const struct twins *tw, float **a, float **b,
		      const char *what, const char *how)
{
	for (int k = 0; k < tw->n; k++) {
		CHECK(memcmp(a[k], b[k], (size_t)ROWS * tw->dim[k] * 4) == 0,
		      "%s: rows of table %d %s", what, k, how);
		free(a[k]);
		free(b[k]);
	}
}

static void rows_match(const struct twins *tw, const char *what)
{
	float *g[2], *c[2];

	read_all(tw, tw->g, 0xff, g);
	read_all(tw, tw->c, 0xfe, c);
	same_rows(tw, g, c, what, "differ from the CPU's");
}

/* The GPU tables' rows, after a refused call, against r from before. */
static void snap_check(const struct twins *tw, float **r, const char *what)
{
	float *now[2];

	read_all(tw, tw->g, 0xfe, now);
	same_rows(tw, r, now, what, "changed by a refused call");
}

struct config {
	int dtype, opt, dim, wd_mode, ntables;
	int64_t cache_rows; /* of table 0 */
	int nsets;
	const struct shape *shape;
};

static shemb_table *make_table(shemb_ctx *ctx, const struct config *c,
			       int k, int dim)
{
	struct shemb_table_attr a;
	shemb_table *t = NULL;

	shemb_table_attr_init(&a);
	a.rows = ROWS;
	a.dim = dim;
	a.dtype = c->dtype;
	a.optimizer = c->opt;
	a.lr = 0.05f;
	a.weight_decay = 0.01f;
	a.weight_decay_mode = c->wd_mode;
	a.initial_accumulator = 0.1f;
	a.cache_rows = k == 0 ? c->cache_rows : 0;
	a.seed = 7;
	a.table_id = k;
	if (shemb_table_create(ctx, &a, &t))
		printf("table_create: %s\n", shemb_ctx_last_error(ctx));
	return t;
}

/* Table 1 has another width than table 0, odd where 0's is even. */
static bool make_twins(shemb_ctx *cg, shemb_ctx *cc, const struct config *c,
		       struct twins *tw)
{
	bool ok = true;

	tw->n = c->ntables;
	for (int k = 0; k < tw->n; k++) {
		tw->dim[k] = k ? c->dim / 2 + 3 : c->dim;
		tw->g[k] = make_table(cg, c, k, tw->dim[k]);
		tw->c[k] = make_table(cc, c, k, tw->dim[k]);
		ok = ok && tw->g[k] && tw->c[k];
	}
	CHECK(ok, "tables not made");
	return ok;
}

static void free_twins(struct twins *tw)
{
	for (int k = 0; k < tw->n; k++) {
		shemb_table_destroy(tw->g[k]);
		shemb_table_destroy(tw->c[k]);
	}
}

/* On the emulated device, which counts them: plans made on the device
 * since plans0 (one per table and lookup read in place, none when a
 * table of the call has a device tier), and backward checks there with
 * them. */
static void took_path(long plans0, long checks0, long want,
		      const char *what)
{
	long plans = device_plans() - plans0;
	long checks = device_checks() - checks0;

	if (plans0 < 0)
		return; /* a real device does not tell */
	CHECK(plans == want, "%s: %ld plans made on the device, not %ld",
	      what, plans, want);
	CHECK((checks > 0) == (want > 0), "%s: %ld checks on the device",
	      what, checks);
}

static void run_config(shemb_ctx *cg, shemb_ctx *cc, const struct config *c)
{
	char what[160];
	struct twins tw;
	struct call call;

	snprintf(what, sizeof(what), "dtype %d opt %d dim %d wd %d tables %d "
		 "tier %lld %s", c->dtype, c->opt, c->dim, c->wd_mode,
		 c->ntables, (long long)c->cache_rows, c->shape->name);
	long plans = device_plans(), checks = device_checks();

	if (make_twins(cg, cc, c, &tw)) {
		for (int k = 0; k < STEPS; k++) {
			make_call(&call, &tw, c->nsets, k, c->shape);
			train_step(cg, cc, &call, k % 3, what);
			free_call(&call);
		}
		rows_match(&tw, what);
		took_path(plans, checks, c->cache_rows == 0 ? STEPS * tw.n : 0,
			  what);
	}
	free_twins(&tw);
}

/* A GPU backward that must fail with want, changing no row. */
static int refused(shemb_ctx *cg, const struct twins *tw,
		   const struct call *c, const struct shemb_bags *b,
		   const float *const *grad, int want, const char *what)
{
	float *before[2];
	int rc;

	read_all(tw, tw->g, 0xff, before);
	rc = shemb_backward(cg, c->n, b, grad);
	CHECK(rc == want && shemb_ctx_last_error(cg)[0],
	      "%s: backward gave %d, not %d ('%s')", what, rc, want,
	      rc ? shemb_ctx_last_error(cg) : "");
	snap_check(tw, before, what);
	return rc;
}

/* 3c: a weight of the backward's (the lookup's were checked; these are
 * not compared with them) that is not finite. */
static void refuse_weight(shemb_ctx *cg, const struct twins *tw,
			  const struct call *c)
{
	for (int i = 0; i < c->n; i++) {
		const struct set *s = &c->s[i];
		float nan = NAN, keep;

		if (!s->dweights || s->nids < 2)
			continue;
		dev_get(&keep, s->dweights + 1, 4);
		dev_put(s->dweights + 1, &nan, 4);
		refused(cg, tw, c, c->bg, c->gg, SHEMB_EINVAL,
			"3c: a NaN weight");
		dev_put(s->dweights + 1, &keep, 4);
		return;
	}
	CHECK(0, "3c: no weighted set to give a NaN weight");
}

/* 3a-c: one id, one offset, one gradient value changed on the device. */
static void refuse_contents(shemb_ctx *cg, const struct twins *tw,
			    const struct call *c)
{
	const struct set *s = &c->s[1];
	int64_t keep, v;
	float f, nonfinite[2] = { NAN, INFINITY };

	dev_get(&keep, s->dids + 5, 8);
	v = (keep + 1) % ROWS;
	dev_put(s->dids + 5, &v, 8);
	refused(cg, tw, c, c->bg, c->gg, SHEMB_EINVAL, "3a: an id differs");
	dev_put(s->dids + 5, &keep, 8);
	v = 2;
	dev_put(s->doffsets + 1, &v, 8);
	refused(cg, tw, c, c->bg, c->gg, SHEMB_EINVAL, "3b: offsets differ");
	dev_put(s->doffsets + 1, &s->offsets[1], 8);
	for (int i = 0; i < 2; i++) {
		s = &c->s[i ? 0 : 3];
		dev_get(&f, s->dgrad + s->n - 1, 4);
		dev_put(s->dgrad + s->n - 1, &nonfinite[i], 4);
		refused(cg, tw, c, c->bg, c->gg, SHEMB_EINVAL,
			i ? "3c: an infinite gradient" : "3c: a NaN gradient");
		dev_put(s->dgrad + s->n - 1, &f, 4);
	}
	refuse_weight(cg, tw, c);
}

/* 3d: set 1 with another pooling, then with one more (empty) bag. */
static void refuse_shape(shemb_ctx *cg, const struct twins *tw,
			 const struct call *c)
{
	const struct set *s = &c->s[1];
	struct shemb_bags b[MAX_SETS];
	const float *g[MAX_SETS];
	int64_t *off = dev_alloc(((size_t)s->nbags + 2) * 8);
	size_t gn = s->n + (size_t)tw->dim[1];
	float *dg = dev_alloc(gn * 4);

	memcpy(b, c->bg, sizeof(b));
	memcpy(g, c->gg, sizeof(g));
	b[1].pooling = SHEMB_POOL_SUM;
	refused(cg, tw, c, b, g, SHEMB_EINVAL, "3d: another pooling");
	b[1].pooling = s->pooling;
	dev_put(off, s->offsets, ((size_t)s->nbags + 1) * 8);
	dev_put(off + s->nbags + 1, &s->nids, 8);
	b[1].offsets = off;
	b[1].nbags = s->nbags + 1;
	dev_fill(dg, 0, gn * 4);
	dev_put(dg, s->grad, s->n * 4);
	g[1] = dg;
	refused(cg, tw, c, b, g, SHEMB_EINVAL, "3d: one more bag");
	dev_free(off);
	dev_free(dg);
}

/* 3e: the same sets and gradients given back as host memory: the plan
 * made on the device comes to the host, and the rows are the CPU's. */
static void host_backward(shemb_ctx *cg, shemb_ctx *cc,
			  const struct twins *tw, const struct call *c)
{
	struct shemb_bags b[MAX_SETS];

	for (int i = 0; i < c->n; i++)
		b[i] = view(&c->s[i], tw->g[c->s[i].table], false);
	CHECK(shemb_backward(cg, c->n, b, c->gc) == 0,
	      "3e: host sets after a device-plan lookup: %s",
	      shemb_ctx_last_error(cg));
	CHECK(shemb_backward(cc, c->n, c->bc, c->gc) == 0, "3e: CPU: %s",
	      shemb_ctx_last_error(cc));
}

/* The reverse: a lookup of host sets plans on the host, and the
 * backward of the same sets from device memory goes through host copies
 * to pair with it. */
static void host_lookup(shemb_ctx *cg, shemb_ctx *cc, const struct twins *tw,
			const struct call *c)
{
	struct shemb_bags b[MAX_SETS];
	float *out[MAX_SETS];

	for (int i = 0; i < c->n; i++) {
		b[i] = view(&c->s[i], tw->g[c->s[i].table], false);
		out[i] = xmalloc(c->s[i].n * 4);
	}
	CHECK(shemb_lookup(cg, c->n, b, out, 0) == 0 &&
		      shemb_lookup(cc, c->n, c->bc, c->oc, 0) == 0,
	      "a lookup of host sets: %s", shemb_ctx_last_error(cg));
	for (int i = 0; i < c->n; i++) {
		CHECK(memcmp(out[i], c->s[i].out, c->s[i].n * 4) == 0,
		      "a lookup of host sets: set %d differs", i);
		free(out[i]);
	}
}

/* 3f: lookups of an id out of range are refused on both twins; the
 * plan stays the good lookup's before them. */
static void refuse_bad_ids(shemb_ctx *cg, shemb_ctx *cc,
			   const struct twins *tw, struct call *c)
{
	static const int64_t bad[2] = { ROWS, -1 };
	struct set *s = &c->s[2];
	float *before[2];

	lookup_pair(cg, cc, c, "3f: the good lookup");
	read_all(tw, tw->g, 0xff, before);
	for (int i = 0; i < 2; i++) {
		int64_t keep = s->ids[7];
		int rg, rc;

		s->ids[7] = bad[i];
		dev_put(s->dids + 7, &bad[i], 8);
		rg = shemb_lookup(cg, c->n, c->bg, c->og, 0);
		CHECK(rg == SHEMB_EINVAL && shemb_ctx_last_error(cg)[0],
		      "3f: GPU lookup of id %lld gave %d",
		      (long long)bad[i], rg);
		rc = shemb_lookup(cc, c->n, c->bc, c->oc, 0);
		CHECK(rc == SHEMB_EINVAL && shemb_ctx_last_error(cc)[0],
		      "3f: CPU lookup of id %lld gave %d",
		      (long long)bad[i], rc);
		s->ids[7] = keep;
		dev_put(s->dids + 7, &keep, 8);
	}
	snap_check(tw, before, "3f: bad ids");
	backward_pair(cg, cc, c, "3f: backward of the good lookup");
	rows_match(tw, "3f: backward of the good lookup");
}

/* Rule 3: each refused call leaves the rows, and the plan pairs with
 * the right backward afterwards.  Sets 1 and 3 are table 1's: table 0
 * must not change either.  3g first: fresh tables have no plan. */
static void rejections(shemb_ctx *cg, shemb_ctx *cc)
{
	struct config cfg = { SHEMB_F32, SHEMB_OPT_ADAGRAD, 64, SHEMB_WD_L2,
			      2, 0, 4, &fixed };
	struct twins tw;
	struct call c;

	if (!make_twins(cg, cc, &cfg, &tw)) {
		free_twins(&tw);
		return;
	}
	make_call(&c, &tw, 4, 1, &fixed);
	refused(cg, &tw, &c, c.bg, c.gg, SHEMB_ESTATE, "3g: no lookup");
	CHECK(shemb_backward(cc, c.n, c.bc, c.gc) == SHEMB_ESTATE,
	      "3g: CPU backward without a lookup");
	lookup_pair(cg, cc, &c, "rejections: lookup");
	refuse_contents(cg, &tw, &c);
	refuse_shape(cg, &tw, &c);
	backward_pair(cg, cc, &c, "rejections: the backward");
	rows_match(&tw, "rejections");
	free_call(&c);
	make_call(&c, &tw, 4, 3, &dups);
	lookup_pair(cg, cc, &c, "3e: lookup");
	host_backward(cg, cc, &tw, &c);
	rows_match(&tw, "3e: a backward of host sets");
	free_call(&c);
	make_call(&c, &tw, 4, 4, &dups);
	host_lookup(cg, cc, &tw, &c);
	backward_pair(cg, cc, &c, "a backward of device sets after a lookup "
		      "of host sets");
	rows_match(&tw, "a backward of device sets after host sets");
	free_call(&c);
	make_call(&c, &tw, 4, 2, &fixed);
	refuse_bad_ids(cg, cc, &tw, &c);
	free_call(&c);
	free_twins(&tw);
}

static const int dtypes[] = { SHEMB_F32, SHEMB_F16, SHEMB_BF16 };
static const int dims[] = { 64, 13, 300 };

/* Rule 1: every dtype, optimizer and width, one or two tables. */
static void all_configs(shemb_ctx *cg, shemb_ctx *cc)
{
	for (int d = 0; d < 3; d++)
		for (int opt = SHEMB_OPT_SGD; opt <= SHEMB_OPT_ADAM; opt++)
			for (int w = 0; w < 3; w++) {
				struct config c = {
					dtypes[d], opt, dims[w], (opt + w) % 2,
					1 + (opt + w + d) % 2, 0, MAX_SETS,
					&small
				};

				run_config(cg, cc, &c);
			}
}

/* Many repeats of few ids, 20000 ids in a set, and (rule 4) a table
 * with a device tier, alone or with a resident one. */
static void special_configs(shemb_ctx *cg, shemb_ctx *cc)
{
	for (int opt = SHEMB_OPT_SGD; opt <= SHEMB_OPT_ADAM; opt++) {
		struct config dup = { dtypes[opt % 3], opt, 64, opt % 2, 2,
				      0, 4, &dups };
		struct config many = { dtypes[(opt + 1) % 3], opt,
				       opt % 2 ? 13 : 64, (opt + 1) % 2, 1,
				       0, 4, &big };
		struct config tier = { dtypes[(opt + 2) % 3], opt,
				       dims[opt % 3], opt % 2, 1 + opt % 2,
				       64, 2 + 2 * (opt % 2), &small };

		run_config(cg, cc, &dup);
		run_config(cg, cc, &many);
		run_config(cg, cc, &tier);
	}
}

int main(void)
{
	shemb_ctx *cg, *cc;
	int rc;

	gpu_test_init();
	rc = twin_contexts(&cg, &cc);
	if (rc)
		return rc;
	rng_state = 20240611;
	all_configs(cg, cc);
	special_configs(cg, cc);
	rejections(cg, cc);
	shemb_ctx_destroy(cg);
	check_no_device_leak();
	shemb_ctx_destroy(cc);
	printf("%s: %d failure(s)\n", failures ? "FAIL" : "ok", failures);
	return failures ? 1 : 0;
}
