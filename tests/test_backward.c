/*
 * test_backward.c - the fused backward against the reference loops: every
 * optimizer with every weight decay mode and pooling mode over several
 * steps, fp16 / bf16 storage, learning rate changes, MAX's first argmax,
 * per-table plans, multi-table calls, and the plan rules (ESTATE, EINVAL
 * on bags that differ from the lookup's, with nothing changed).
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shemb.h"
#include "tests/testutil.h"

#define REL_TOL 1e-6f
#define ABS_TOL 1e-7f
#define NO_DECAY (-1)

static const int poolings[] = { SHEMB_POOL_SUM, SHEMB_POOL_MEAN,
				SHEMB_POOL_MAX, SHEMB_POOL_NONE };
static const int optimizers[] = { SHEMB_OPT_SGD, SHEMB_OPT_ADAGRAD,
				  SHEMB_OPT_ROWWISE_ADAGRAD, SHEMB_OPT_ADAM };
static const int decays[] = { NO_DECAY, SHEMB_WD_L2, SHEMB_WD_DECOUPLED };

static shemb_ctx *variant_ctx(int i, int nthreads)
{
	shemb_ctx *ctx = NULL;
	int rc = tu_ctx_create(tu_isas[i], nthreads, &ctx);

	if (rc == SHEMB_ENOTSUP) {
		printf("skipped: no %s kernels here\n", tu_isas[i]);
		return NULL;
	}
	ck_assert_int_eq(rc, 0);
	return ctx;
}

static shemb_ctx *plain_ctx(void)
{
	shemb_ctx *ctx = NULL;

	ck_assert_int_eq(tu_ctx_create(NULL, 2, &ctx), 0);
	return ctx;
}

/* Settings that make every optimizer parameter matter. */
static void train_attr(struct shemb_table_attr *a, int64_t rows, int dim,
		       int dtype, int optimizer, int decay)
{
	shemb_table_attr_init(a);
	a->rows = rows;
	a->dim = dim;
	a->dtype = dtype;
	a->optimizer = optimizer;
	a->lr = 0.05f;
	a->eps = 1e-6f;
	a->beta1 = 0.8f;
	a->beta2 = 0.95f;
	a->init_low = -0.5f;
	a->init_high = 0.5f;
	if (optimizer == SHEMB_OPT_ADAGRAD ||
	    optimizer == SHEMB_OPT_ROWWISE_ADAGRAD)
		a->initial_accumulator = 0.1f;
	if (decay != NO_DECAY) {
		a->weight_decay = 0.02f;
		a->weight_decay_mode = decay;
	}
}

/* ---- one training step over several tables ---- */

struct bw_set {
	int table;          /* index into the step's tables */
	int pooling;
	struct tu_bags bags;
	float *out, *grad;
};

struct bw_step {
	shemb_ctx *ctx;
	int ntables;
	shemb_table **tables;
	struct tu_ref *refs;
	int nsets;
	struct bw_set *sets;
};

static void make_bags(struct bw_set *s, struct tu_rng *r, int64_t rows,
		      int64_t nbags, bool weighted)
{
	struct tu_bag_spec spec = {
		.nbags = nbags, .max_len = 6, .rows = rows,
		.weighted = weighted, .zipf = true, .repeat_pct = 20,
		.empty_pct = 10,
	};

	tu_bags_random(&s->bags, r, &spec);
}

static void alloc_buffers(struct bw_step *st, struct tu_rng *r)
{
	for (int i = 0; i < st->nsets; i++) {
		struct bw_set *s = &st->sets[i];
		size_t n = (size_t)tu_out_rows(&s->bags, s->pooling) *
			   (size_t)st->refs[s->table].dim;

		s->out = tu_calloc(n + 1, sizeof(float));
		s->grad = tu_malloc((n + 1) * sizeof(float));
		tu_rng_fill(r, s->grad, n, -1.0f, 1.0f);
	}
}

static void free_sets(struct bw_step *st)
{
	for (int i = 0; i < st->nsets; i++) {
		free(st->sets[i].out);
		free(st->sets[i].grad);
		tu_bags_free(&st->sets[i].bags);
		st->sets[i].out = st->sets[i].grad = NULL;
	}
}

static struct shemb_bags *views(const struct bw_step *st)
{
	struct shemb_bags *v = tu_calloc((size_t)st->nsets + 1, sizeof(*v));

	for (int i = 0; i < st->nsets; i++)
		v[i] = tu_bags_view(&st->sets[i].bags,
				    st->tables[st->sets[i].table],
				    st->sets[i].pooling);
	return v;
}

static int64_t check_outputs(const struct bw_step *st)
{
	int64_t bad = 0;

	for (int i = 0; i < st->nsets; i++) {
		const struct bw_set *s = &st->sets[i];
		const struct tu_ref *ref = &st->refs[s->table];
		int64_t n = tu_out_rows(&s->bags, s->pooling) * ref->dim;
		float *want = tu_malloc(((size_t)n + 1) * sizeof(float));

		tu_ref_lookup(ref, &s->bags, s->pooling, want);
		bad += tu_mismatches("lookup", s->out, want, n, REL_TOL,
				     ABS_TOL);
		free(want);
	}
	return bad;
}

/* The reference backward of each table, with its sets in call order. */
static void ref_backward(struct bw_step *st)
{
	struct tu_ref_set *rs = tu_calloc((size_t)st->nsets + 1, sizeof(*rs));

	for (int t = 0; t < st->ntables; t++) {
		int n = 0;

		for (int i = 0; i < st->nsets; i++) {
			if (st->sets[i].table != t)
				continue;
			rs[n].bags = &st->sets[i].bags;
			rs[n].pooling = st->sets[i].pooling;
			rs[n++].grad = st->sets[i].grad;
		}
		if (n > 0)
			tu_ref_backward(&st->refs[t], n, rs);
	}
	free(rs);
}

static int64_t check_tables(const struct bw_step *st)
{
	int64_t bad = 0;

	for (int t = 0; t < st->ntables; t++) {
		const struct tu_ref *ref = &st->refs[t];
		float *got = tu_read_all_f32(st->tables[t]);

		bad += tu_mismatches("table", got, ref->w,
				     ref->rows * ref->dim, REL_TOL, ABS_TOL);
		free(got);
	}
	return bad;
}

/* Planned lookup, then backward of random gradients, each compared with
 * the reference; returns the number of mismatching values. */
static int64_t train_step(struct bw_step *st, struct tu_rng *r)
{
	struct shemb_bags *v = views(st);
	float **out = tu_calloc((size_t)st->nsets + 1, sizeof(*out));
	const float **grad = tu_calloc((size_t)st->nsets + 1, sizeof(*grad));
	int64_t bad;

	alloc_buffers(st, r);
	for (int i = 0; i < st->nsets; i++) {
		out[i] = st->sets[i].out;
		grad[i] = st->sets[i].grad;
	}
	ck_assert_int_eq(shemb_lookup(st->ctx, st->nsets, v, out, 0), 0);
	bad = check_outputs(st);
	ck_assert_int_eq(shemb_backward(st->ctx, st->nsets, v, grad), 0);
	ref_backward(st);
	bad += check_tables(st);
	free(grad);
	free(out);
	free(v);
	return bad;
}

/* ---- every optimizer x weight decay x pooling ---- */

struct bw_case {
	int dtype, optimizer, decay, pooling;
};

static void mark_touched(const struct tu_bags *b, bool *touched)
{
	for (int64_t k = 0; k < b->nids; k++)
		touched[b->ids[k]] = true;
}

/* Untouched rows must keep their initial bits (lazy updates). */
static int64_t changed_untouched(shemb_table *t,
				 const struct tu_snapshot *initial,
				 const bool *touched)
{
	struct tu_snapshot now;
	int64_t bad = 0;

	tu_snapshot_take(&now, t);
	for (int64_t r = 0; r < now.rows; r++)
		if (!touched[r] && !tu_snapshot_row_equal(initial, &now, r))
			bad++;
	tu_snapshot_free(&now);
	return bad;
}

static int64_t run_case(shemb_ctx *ctx, const struct bw_case *c,
			uint64_t seed, int nsteps)
{
	struct shemb_table_attr a;
	struct tu_snapshot initial;
	struct bw_set set = { .table = 0, .pooling = c->pooling };
	struct bw_step st = { ctx, 1, NULL, NULL, 1, &set };
	shemb_table *t;
	struct tu_ref ref;
	struct tu_rng r;
	bool touched[400] = { false };
	int64_t bad = 0;

	tu_rng_seed(&r, seed);
	train_attr(&a, 400, 19, c->dtype, c->optimizer, c->decay);
	t = tu_table_attr(ctx, &a);
	tu_ref_init(&ref, t);
	tu_snapshot_take(&initial, t);
	st.tables = &t;
	st.refs = &ref;
	for (int step = 0; step < nsteps; step++) {
		if (step == nsteps / 2) { /* a new learning rate mid-way */
			ck_assert_int_eq(shemb_table_set_lr(t, 0.02f), 0);
			ref.attr.lr = 0.02f;
		}
		make_bags(&set, &r, 400, 25, step % 2 == 1);
		mark_touched(&set.bags, touched);
		bad += train_step(&st, &r);
		free_sets(&st);
	}
	bad += changed_untouched(t, &initial, touched);
	if (bad)
		fprintf(stderr, "case dtype %d optimizer %d decay %d pooling "
			"%d: %lld mismatches\n", c->dtype, c->optimizer,
			c->decay, c->pooling, (long long)bad);
	tu_snapshot_free(&initial);
	tu_ref_free(&ref);
	shemb_table_destroy(t);
	return bad;
}

START_TEST(optimizers_decays_poolings_f32)
{
	shemb_ctx *ctx = variant_ctx(_i, 2);
	int64_t bad = 0;
	uint64_t seed = 100;

	if (!ctx)
		return;
	for (size_t o = 0; o < TU_ARRAY_SIZE(optimizers); o++)
		for (size_t d = 0; d < TU_ARRAY_SIZE(decays); d++)
			for (size_t p = 0; p < TU_ARRAY_SIZE(poolings); p++) {
				struct bw_case c = { SHEMB_F32, optimizers[o],
						     decays[d], poolings[p] };

				bad += run_case(ctx, &c, seed++, 6);
			}
	ck_assert_int_eq(bad, 0);
	shemb_ctx_destroy(ctx);
}
END_TEST

/* Low-precision storage: the reference rounds after each update. */
START_TEST(optimizers_decays_low_precision)
{
	static const int low[] = { SHEMB_F16, SHEMB_BF16 };
	shemb_ctx *ctx = variant_ctx(_i, 2);
	int64_t bad = 0;
	uint64_t seed = 200;

	if (!ctx)
		return;
	for (size_t l = 0; l < TU_ARRAY_SIZE(low); l++)
		for (size_t o = 0; o < TU_ARRAY_SIZE(optimizers); o++)
			for (size_t d = 0; d < TU_ARRAY_SIZE(decays); d++) {
				struct bw_case c = {
					low[l], optimizers[o], decays[d],
					poolings[(o + d) % 4]
				};

				bad += run_case(ctx, &c, seed++, 8);
			}
	ck_assert_int_eq(bad, 0);
	shemb_ctx_destroy(ctx);
}
END_TEST

/* Tens of thousands of ids over two threads: parallel plan and update. */
START_TEST(large_batch)
{
	shemb_ctx *ctx = variant_ctx(_i, 2);
	struct shemb_table_attr a;
	struct bw_set set = { .table = 0, .pooling = SHEMB_POOL_SUM };
	struct bw_step st = { ctx, 1, NULL, NULL, 1, &set };
	struct tu_ref ref;
	struct tu_rng r;
	shemb_table *t;

	if (!ctx)
		return;
	tu_rng_seed(&r, 300);
	train_attr(&a, 3000, 16, SHEMB_F32, SHEMB_OPT_ADAGRAD, SHEMB_WD_L2);
	t = tu_table_attr(ctx, &a);
	tu_ref_init(&ref, t);
	st.tables = &t;
	st.refs = &ref;
	for (int step = 0; step < 2; step++) {
		struct tu_bag_spec spec = { .nbags = 6000, .max_len = 10,
					    .rows = 3000, .weighted = true,
					    .zipf = true, .repeat_pct = 10 };

		tu_bags_random(&set.bags, &r, &spec);
		ck_assert_int_eq(train_step(&st, &r), 0);
		free_sets(&st);
	}
	tu_ref_free(&ref);
	shemb_ctx_destroy(ctx);
}
END_TEST

/* ---- MAX goes to the first argmax ---- */

static void lookup_backward_one(shemb_ctx *ctx, shemb_table *t,
				const struct tu_bags *b, int dim)
{
	struct shemb_bags set = tu_bags_view(b, t, SHEMB_POOL_MAX);
	float *out = tu_malloc((size_t)b->nbags * (size_t)dim *
			       sizeof(float));
	float *grad = tu_malloc((size_t)b->nbags * (size_t)dim *
				sizeof(float));
	const float *gp = grad;

	for (int64_t i = 0; i < b->nbags * dim; i++)
		grad[i] = 1.0f;
	ck_assert_int_eq(shemb_lookup(ctx, 1, &set, &out, 0), 0);
	ck_assert_int_eq(shemb_backward(ctx, 1, &set, &gp), 0);
	free(out);
	free(grad);
}

START_TEST(max_gradient_goes_to_first_argmax)
{
	static const float rows[4][4] = {
		{ 1, 2, 3, 4 }, { 1, 5, 3, 0 }, { 2, 2, 0.5f, 4 },
		{ 0.5f, 1, 1.5f, 2 },
	};
	static const int64_t ids[4] = { 0, 1, 2, 3 };
	shemb_ctx *ctx = variant_ctx(_i, 1);
	struct shemb_table_attr a;
	struct tu_bags b;
	shemb_table *t;
	float got[16];

	if (!ctx)
		return;
	train_attr(&a, 4, 4, SHEMB_F32, SHEMB_OPT_SGD, NO_DECAY);
	a.lr = 1.0f;
	t = tu_table_attr(ctx, &a);
	ck_assert_int_eq(shemb_table_write_rows(t, 4, ids, rows, SHEMB_F32,
						0), 0);
	/* columns: max of row 2 (col 0), row 1 (col 1), a tie of rows 0
	 * and 1 (col 2) and a tie of rows 0 and 2 (col 3) */
	tu_bags_from(&b, 1, (const int64_t[]){ 3 }, ids, NULL);
	lookup_backward_one(ctx, t, &b, 4);
	tu_bags_free(&b);
	ck_assert_int_eq(shemb_table_read_rows(t, 4, ids, got, SHEMB_F32), 0);
	ck_assert(!memcmp(got, (float[]){ 1, 2, 2, 3, 1, 4, 3, 0, 1, 2, 0.5f,
					  4, 0.5f, 1, 1.5f, 2 },
			  sizeof(got)));

	/* weighted: 2 * row 3 ties with 1 * (the new) row 0 everywhere;
	 * row 3 comes first and takes the whole gradient, times 2 */
	ck_assert_int_eq(shemb_table_write_rows(t, 1, ids, rows[0], SHEMB_F32,
						0), 0);
	tu_bags_from(&b, 1, (const int64_t[]){ 2 },
		     (const int64_t[]){ 3, 0 }, (const float[]){ 2, 1 });
	lookup_backward_one(ctx, t, &b, 4);
	tu_bags_free(&b);
	ck_assert_int_eq(shemb_table_read_rows(t, 4, ids, got, SHEMB_F32), 0);
	ck_assert(!memcmp(got, rows[0], sizeof(rows[0])));
	ck_assert(!memcmp(got + 12, (float[]){ -1.5f, -1, -0.5f, 0 },
			  4 * sizeof(float)));
	shemb_ctx_destroy(ctx);
}
END_TEST

/* When every product of a column overflows to -infinity, the first
 * position still holds the maximum and takes the gradient. */
START_TEST(max_all_overflowing_goes_to_first)
{
	static const float rows[2][2] = { { -2e38f, 1 }, { -1.5e38f, 2 } };
	static const int64_t ids[2] = { 0, 1 };
	shemb_ctx *ctx = variant_ctx(_i, 1);
	struct shemb_table_attr a;
	struct tu_bags b;
	shemb_table *t;
	float got[4], out[2];
	float *outp = out;

	if (!ctx)
		return;
	train_attr(&a, 2, 2, SHEMB_F32, SHEMB_OPT_SGD, NO_DECAY);
	a.lr = 1e37f; /* a step big enough to see next to 2e38 */
	t = tu_table_attr(ctx, &a);
	ck_assert_int_eq(shemb_table_write_rows(t, 2, ids, rows, SHEMB_F32,
						0), 0);
	/* weights 10: column 0 is -inf for both rows, column 1 is row 1's */
	tu_bags_from(&b, 1, (const int64_t[]){ 2 }, ids,
		     (const float[]){ 10, 10 });
	{
		struct shemb_bags set = tu_bags_view(&b, t, SHEMB_POOL_MAX);

		ck_assert_int_eq(shemb_lookup(ctx, 1, &set, &outp,
					      SHEMB_LOOKUP_NO_GRAD), 0);
		ck_assert(out[0] == -INFINITY && out[1] == 20.0f);
	}
	lookup_backward_one(ctx, t, &b, 2);
	tu_bags_free(&b);
	ck_assert_int_eq(shemb_table_read_rows(t, 2, ids, got, SHEMB_F32), 0);
	/* grad 1 x weight 10 x lr 1e37: row 0 col 0 and row 1 col 1 move */
	ck_assert(got[0] == -2e38f - 1e38f && got[1] == 1.0f);
	ck_assert(got[2] == -1.5e38f && got[3] == 2.0f - 1e38f);
	shemb_ctx_destroy(ctx);
}
END_TEST

/* ---- the plan rules ---- */

struct plan_env {
	shemb_ctx *ctx;
	shemb_table *t;
	struct tu_ref ref;
	struct tu_bags b;
	struct shemb_bags set;
	float *out, *grad;
};

static void plan_env_open(struct plan_env *e, int optimizer)
{
	struct shemb_table_attr a;
	struct tu_rng r;
	struct tu_bag_spec spec = { .nbags = 12, .max_len = 5, .rows = 60,
				    .zipf = true, .repeat_pct = 20,
				    .empty_pct = 10 };

	e->ctx = plain_ctx();
	train_attr(&a, 60, 6, SHEMB_F32, optimizer, SHEMB_WD_L2);
	e->t = tu_table_attr(e->ctx, &a);
	tu_ref_init(&e->ref, e->t);
	tu_rng_seed(&r, 400);
	tu_bags_random(&e->b, &r, &spec);
	e->set = tu_bags_view(&e->b, e->t, SHEMB_POOL_SUM);
	e->out = tu_calloc((size_t)e->b.nbags * 6 + 1, sizeof(float));
	e->grad = tu_malloc(((size_t)e->b.nbags * 6 + 1) * sizeof(float));
	tu_rng_fill(&r, e->grad, (size_t)e->b.nbags * 6, -1, 1);
}

static void plan_env_close(struct plan_env *e)
{
	free(e->out);
	free(e->grad);
	tu_bags_free(&e->b);
	tu_ref_free(&e->ref);
	shemb_ctx_destroy(e->ctx);
}

static int backward_of(struct plan_env *e, const struct shemb_bags *set,
		       int n)
{
	const float *g[2] = { e->grad, e->grad };

	return shemb_backward(e->ctx, n, set, g);
}

/* The good backward, and the table against the reference. */
static void good_backward(struct plan_env *e)
{
	struct tu_ref_set rs = { &e->b, SHEMB_POOL_SUM, e->grad };
	float *got;

	ck_assert_int_eq(backward_of(e, &e->set, 1), 0);
	tu_ref_backward(&e->ref, 1, &rs);
	got = tu_read_all_f32(e->t);
	ck_assert_int_eq(tu_mismatches("table", got, e->ref.w,
				       e->ref.rows * e->ref.dim, REL_TOL,
				       ABS_TOL),
			 0);
	free(got);
}

/* A refused backward: its code, a detail, and the table unchanged. */
static void refused_backward(struct plan_env *e, const struct shemb_bags *set,
			     int n, int code)
{
	struct tu_snapshot before;

	tu_snapshot_take(&before, e->t);
	ck_assert_int_eq(backward_of(e, set, n), code);
	ck_assert_str_ne(shemb_ctx_last_error(e->ctx), "");
	ck_assert(tu_unchanged_since(&before, e->t));
	tu_snapshot_free(&before);
}

START_TEST(second_backward_is_estate)
{
	struct plan_env e;

	plan_env_open(&e, SHEMB_OPT_ADAM);
	ck_assert_int_eq(shemb_lookup(e.ctx, 1, &e.set, &e.out, 0), 0);
	good_backward(&e);
	refused_backward(&e, &e.set, 1, SHEMB_ESTATE);
	/* the state is as after one step: a new pair works as expected */
	ck_assert_int_eq(shemb_lookup(e.ctx, 1, &e.set, &e.out, 0), 0);
	good_backward(&e);
	plan_env_close(&e);
}
END_TEST

START_TEST(no_grad_lookup_gives_no_plan)
{
	struct plan_env e;

	plan_env_open(&e, SHEMB_OPT_SGD);
	refused_backward(&e, &e.set, 1, SHEMB_ESTATE);
	ck_assert_int_eq(shemb_lookup(e.ctx, 1, &e.set, &e.out,
				      SHEMB_LOOKUP_NO_GRAD), 0);
	refused_backward(&e, &e.set, 1, SHEMB_ESTATE);
	plan_env_close(&e);
}
END_TEST

START_TEST(no_grad_lookup_keeps_earlier_plan)
{
	struct plan_env e;
	struct tu_bags other;
	struct shemb_bags oset;
	float out[8 * 6];
	float *op = out;

	plan_env_open(&e, SHEMB_OPT_ADAGRAD);
	ck_assert_int_eq(shemb_lookup(e.ctx, 1, &e.set, &e.out, 0), 0);
	tu_bags_from(&other, 2, (const int64_t[]){ 1, 2 },
		     (const int64_t[]){ 7, 8, 9 }, NULL);
	oset = tu_bags_view(&other, e.t, SHEMB_POOL_MAX);
	ck_assert_int_eq(shemb_lookup(e.ctx, 1, &oset, &op,
				      SHEMB_LOOKUP_NO_GRAD), 0);
	good_backward(&e);
	tu_bags_free(&other);
	plan_env_close(&e);
}
END_TEST

/* Bags that differ from the lookup's in any documented way: EINVAL,
 * nothing changes, and the plan is still there for the right bags. */
START_TEST(backward_with_other_bags_is_einval)
{
	struct plan_env e;
	struct shemb_bags bad[2];
	struct tu_bags c;
	int64_t k;

	plan_env_open(&e, SHEMB_OPT_ROWWISE_ADAGRAD);
	ck_assert_int_eq(shemb_lookup(e.ctx, 1, &e.set, &e.out, 0), 0);
	tu_bags_copy(&c, &e.b);

	/* another id */
	c.ids[c.nids / 2] = (c.ids[c.nids / 2] + 1) % 60;
	bad[0] = tu_bags_view(&c, e.t, SHEMB_POOL_SUM);
	refused_backward(&e, bad, 1, SHEMB_EINVAL);
	c.ids[c.nids / 2] = e.b.ids[e.b.nids / 2];

	/* a bag boundary moved by one (a non-empty bag first) */
	for (k = 1; k < c.nbags && c.offsets[k] == 0; k++)
		;
	c.offsets[k]--;
	refused_backward(&e, bad, 1, SHEMB_EINVAL);
	c.offsets[k]++;

	/* other pooling; weights where there were none */
	bad[0].pooling = SHEMB_POOL_MEAN;
	refused_backward(&e, bad, 1, SHEMB_EINVAL);
	bad[0].pooling = SHEMB_POOL_SUM;
	c.weights = tu_calloc((size_t)c.nids + 1, sizeof(float));
	bad[0].weights = c.weights;
	refused_backward(&e, bad, 1, SHEMB_EINVAL);
	bad[0].weights = NULL;

	/* the last bag left out, with its ids */
	bad[0].nbags--;
	bad[0].nids = c.offsets[bad[0].nbags];
	refused_backward(&e, bad, 1, SHEMB_EINVAL);
	bad[0] = tu_bags_view(&c, e.t, SHEMB_POOL_SUM);

	/* the same set twice */
	bad[1] = bad[0];
	refused_backward(&e, bad, 2, SHEMB_EINVAL);

	good_backward(&e);
	tu_bags_free(&c);
	plan_env_close(&e);
}
END_TEST

/*
 * shemb_backward(3) asks for the same offsets also without pooling:
 * POOL_NONE sets pair by their offsets too, although their gradient does
 * not depend on them: other offsets are other bags.
 */
START_TEST(backward_none_pooling_other_offsets)
{
	struct plan_env e;
	struct shemb_bags bad;
	struct tu_bags c;
	int64_t k;

	plan_env_open(&e, SHEMB_OPT_SGD);
	e.set.pooling = SHEMB_POOL_NONE;
	free(e.out);
	free(e.grad);
	e.out = tu_calloc((size_t)e.b.nids * 6 + 1, sizeof(float));
	e.grad = tu_calloc((size_t)e.b.nids * 6 + 1, sizeof(float));
	ck_assert_int_eq(shemb_lookup(e.ctx, 1, &e.set, &e.out, 0), 0);
	tu_bags_copy(&c, &e.b);
	for (k = 1; k < c.nbags && c.offsets[k] == 0; k++)
		;
	c.offsets[k]--;
	bad = tu_bags_view(&c, e.t, SHEMB_POOL_NONE);
	refused_backward(&e, &bad, 1, SHEMB_EINVAL);
	tu_bags_free(&c);
	plan_env_close(&e);
}
END_TEST

/* ---- several tables ---- */

static void open_tables(shemb_ctx *ctx, shemb_table **t, struct tu_ref *ref)
{
	struct shemb_table_attr a;

	train_attr(&a, 80, 8, SHEMB_F32, SHEMB_OPT_ADAM, SHEMB_WD_DECOUPLED);
	t[0] = tu_table_attr(ctx, &a);
	train_attr(&a, 50, 5, SHEMB_BF16, SHEMB_OPT_ADAGRAD, NO_DECAY);
	t[1] = tu_table_attr(ctx, &a);
	tu_ref_init(&ref[0], t[0]);
	tu_ref_init(&ref[1], t[1]);
}

/* Four sets over two tables, each table twice: the gradients of a row are
 * coalesced across sets before its single update. */
START_TEST(multi_table_calls)
{
	static const int table_of[4] = { 0, 1, 0, 1 };
	static const int pool_of[4] = { SHEMB_POOL_SUM, SHEMB_POOL_MAX,
					SHEMB_POOL_MEAN, SHEMB_POOL_NONE };
	shemb_ctx *ctx = variant_ctx(_i, 2);
	shemb_table *t[2];
	struct tu_ref ref[2];
	struct bw_set sets[4];
	struct bw_step st = { ctx, 2, t, ref, 4, sets };
	struct tu_rng r;

	if (!ctx)
		return;
	open_tables(ctx, t, ref);
	tu_rng_seed(&r, 500);
	memset(sets, 0, sizeof(sets));
	for (int step = 0; step < 5; step++) {
		for (int i = 0; i < 4; i++) {
			sets[i].table = table_of[i];
			sets[i].pooling = pool_of[(i + step) % 4];
			make_bags(&sets[i], &r, ref[table_of[i]].rows, 15,
				  (i + step) % 2 == 0);
		}
		ck_assert_int_eq(train_step(&st, &r), 0);
		free_sets(&st);
	}
	tu_ref_free(&ref[0]);
	tu_ref_free(&ref[1]);
	shemb_ctx_destroy(ctx);
}
END_TEST

/* Plans are per table: one lookup of two tables, then a backward of each
 * on its own.  Adam's t counts the backward calls of its table only. */
START_TEST(per_table_plans_and_adam_steps)
{
	shemb_ctx *ctx = plain_ctx();
	shemb_table *t[2];
	struct tu_ref ref[2];
	struct bw_set sets[2];
	struct bw_step both = { ctx, 2, t, ref, 2, sets };
	struct shemb_bags v[2];
	struct tu_rng r;
	struct shemb_table_attr a;

	train_attr(&a, 40, 4, SHEMB_F32, SHEMB_OPT_ADAM, NO_DECAY);
	t[0] = tu_table_attr(ctx, &a);
	t[1] = tu_table_attr(ctx, &a);
	tu_ref_init(&ref[0], t[0]);
	tu_ref_init(&ref[1], t[1]);
	tu_rng_seed(&r, 600);
	memset(sets, 0, sizeof(sets));

	/* a step of table 0 alone: its t is 1, table 1's still 0 */
	sets[0].table = 0;
	make_bags(&sets[0], &r, 40, 10, false);
	both.nsets = 1;
	ck_assert_int_eq(train_step(&both, &r), 0);
	free_sets(&both);

	/* one lookup of both, two backward calls */
	for (int i = 0; i < 2; i++) {
		sets[i].table = i;
		make_bags(&sets[i], &r, 40, 10, true);
	}
	both.nsets = 2;
	alloc_buffers(&both, &r);
	v[0] = tu_bags_view(&sets[0].bags, t[0], SHEMB_POOL_SUM);
	v[1] = tu_bags_view(&sets[1].bags, t[1], SHEMB_POOL_SUM);
	ck_assert_int_eq(shemb_lookup(ctx, 2, v,
				      (float *[]){ sets[0].out, sets[1].out },
				      0), 0);
	ck_assert_int_eq(check_outputs(&both), 0);
	for (int i = 1; i >= 0; i--) {
		const float *g = sets[i].grad;
		struct tu_ref_set rs = { &sets[i].bags, SHEMB_POOL_SUM, g };

		ck_assert_int_eq(shemb_backward(ctx, 1, &v[i], &g), 0);
		tu_ref_backward(&ref[i], 1, &rs);
	}
	ck_assert_int_eq(check_tables(&both), 0);
	/* both plans are used up now */
	ck_assert_int_eq(shemb_backward(ctx, 1, &v[0],
					(const float *[]){ sets[0].grad }),
			 SHEMB_ESTATE);
	free_sets(&both);
	tu_ref_free(&ref[0]);
	tu_ref_free(&ref[1]);
	shemb_ctx_destroy(ctx);
}
END_TEST

/* A backward whose sets hold no id changes no row but is a step of the
 * table all the same (Adam's t counts it). */
START_TEST(empty_backward_counts_as_adam_step)
{
	shemb_ctx *ctx = plain_ctx();
	struct shemb_table_attr a;
	struct bw_set set = { .table = 0, .pooling = SHEMB_POOL_MEAN };
	struct bw_step st = { ctx, 1, NULL, NULL, 1, &set };
	struct tu_snapshot before;
	struct tu_ref ref;
	struct tu_rng r;
	shemb_table *t;

	train_attr(&a, 30, 4, SHEMB_F32, SHEMB_OPT_ADAM, NO_DECAY);
	t = tu_table_attr(ctx, &a);
	tu_ref_init(&ref, t);
	st.tables = &t;
	st.refs = &ref;
	tu_rng_seed(&r, 700);
	make_bags(&set, &r, 30, 8, false);
	ck_assert_int_eq(train_step(&st, &r), 0);
	free_sets(&st);

	tu_snapshot_take(&before, t);
	tu_bags_from(&set.bags, 3, (const int64_t[]){ 0, 0, 0 },
		     (const int64_t[]){ 0 }, NULL);
	ck_assert_int_eq(train_step(&st, &r), 0);
	free_sets(&st);
	ck_assert(tu_unchanged_since(&before, t));

	make_bags(&set, &r, 30, 8, false);
	ck_assert_int_eq(train_step(&st, &r), 0);
	free_sets(&st);
	ck_assert_int_eq(ref.step, 3);
	tu_snapshot_free(&before);
	tu_ref_free(&ref);
	shemb_ctx_destroy(ctx);
}
END_TEST

/* ---- every variant trains to the same bits ---- */

/* Final rows of a fixed training of every optimizer and dtype under
 * variant i, concatenated; NULL when the variant is missing. */
static unsigned char *variant_training(int i, size_t *bytes)
{
	static const int dts[3] = { SHEMB_F32, SHEMB_F16, SHEMB_BF16 };
	shemb_ctx *ctx = variant_ctx(i, 2);
	unsigned char *all = NULL;

	*bytes = 0;
	if (!ctx)
		return NULL;
	for (size_t o = 0; o < TU_ARRAY_SIZE(optimizers); o++) {
		for (int d = 0; d < 3; d++) {
			struct shemb_table_attr a;
			struct bw_set set = { 0 };
			struct bw_step st = { ctx, 1, NULL, NULL, 1, &set };
			struct tu_snapshot snap;
			struct tu_ref ref;
			struct tu_rng r;
			shemb_table *t;

			train_attr(&a, 300, 37, dts[d], optimizers[o],
				   o % 2 ? SHEMB_WD_DECOUPLED : SHEMB_WD_L2);
			t = tu_table_attr(ctx, &a);
			tu_ref_init(&ref, t);
			st.tables = &t;
			st.refs = &ref;
			tu_rng_seed(&r, 800 + o * 3 + (uint64_t)d);
			for (int step = 0; step < 4; step++) {
				set.pooling = poolings[step];
				make_bags(&set, &r, 300, 30, step % 2);
				ck_assert_int_eq(train_step(&st, &r), 0);
				free_sets(&st);
			}
			tu_snapshot_take(&snap, t);
			all = realloc(all, *bytes + snap.bytes);
			ck_assert_ptr_nonnull(all);
			memcpy(all + *bytes, snap.data, snap.bytes);
			*bytes += snap.bytes;
			tu_snapshot_free(&snap);
			tu_ref_free(&ref);
		}
	}
	shemb_ctx_destroy(ctx);
	return all;
}

START_TEST(variants_train_bitwise_identical)
{
	size_t nbase, nother;
	unsigned char *base = variant_training(0, &nbase), *other;

	ck_assert_ptr_nonnull(base);
	for (int i = 1; i < 3; i++) {
		other = variant_training(i, &nother);
		if (!other)
			continue;
		ck_assert_uint_eq(nother, nbase);
		ck_assert_int_eq(tu_bits_differ(tu_isas[i], other, base,
						nbase), 0);
		free(other);
	}
	free(base);
}
END_TEST

static Suite *backward_suite(void)
{
	Suite *s = suite_create("backward");
	TCase *tv = tcase_create("per variant");
	TCase *tp = tcase_create("plans");
	TCase *reg = tcase_create("regressions");

	tcase_set_timeout(tv, 60);
	tcase_add_loop_test(tv, optimizers_decays_poolings_f32, 0, 3);
	tcase_add_loop_test(tv, optimizers_decays_low_precision, 0, 3);
	tcase_add_loop_test(tv, large_batch, 0, 3);
	tcase_add_loop_test(tv, max_gradient_goes_to_first_argmax, 0, 3);
	tcase_add_loop_test(tv, max_all_overflowing_goes_to_first, 0, 3);
	tcase_add_loop_test(tv, multi_table_calls, 0, 3);
	tcase_add_test(tv, variants_train_bitwise_identical);
	suite_add_tcase(s, tv);
	tcase_set_timeout(tp, 30);
	tcase_add_test(tp, second_backward_is_estate);
	tcase_add_test(tp, no_grad_lookup_gives_no_plan);
	tcase_add_test(tp, no_grad_lookup_keeps_earlier_plan);
	tcase_add_test(tp, backward_with_other_bags_is_einval);
	tcase_add_test(tp, per_table_plans_and_adam_steps);
	tcase_add_test(tp, empty_backward_counts_as_adam_step);
	suite_add_tcase(s, tp);
	tcase_add_test(reg, backward_none_pooling_other_offsets);
	suite_add_tcase(s, reg);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(backward_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
