/*
 * test_lookup.c - pooled lookups against the plain reference loops: every
 * pooling mode, with and without weights, duplicates, empty bags, zero
 * bags, several sets per call, all storage dtypes, small to maximal dims;
 * under every kernel variant, which must all give the same bits.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shemb.h"
#include "tests/testutil.h"

static const int dtypes[] = { SHEMB_F32, SHEMB_F16, SHEMB_BF16 };
static const int poolings[] = { SHEMB_POOL_SUM, SHEMB_POOL_MEAN,
				SHEMB_POOL_MAX, SHEMB_POOL_NONE };
static const int dims[] = { 1, 3, 16, 128, 129, 4096 };

/* Same order of sums as SEMANTICS prescribes: equality is expected, the
 * tolerance only keeps the check robust. */
#define REL_TOL 1e-6f
#define ABS_TOL 1e-7f

/* A context that forces kernel variant i, or NULL (skip) when this CPU or
 * build lacks it. */
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

/* An output buffer full of NaN, so that a row left unwritten shows. */
static float *nan_buffer(int64_t rows, int dim)
{
	size_t n = (size_t)rows * (size_t)dim;
	float *p = tu_malloc((n + 1) * sizeof(float));

	for (size_t i = 0; i <= n; i++)
		p[i] = NAN;
	return p;
}

/* Look up one set and compare with the reference; returns mismatches. */
static int64_t check_one(shemb_ctx *ctx, shemb_table *t,
			 const struct tu_ref *ref, const struct tu_bags *b,
			 int pooling, unsigned flags)
{
	struct shemb_bags set = tu_bags_view(b, t, pooling);
	int64_t rows = tu_out_rows(b, pooling);
	float *got = nan_buffer(rows, ref->dim);
	float *want = nan_buffer(rows, ref->dim);
	int64_t bad;
	char what[96];

	ck_assert_int_eq(shemb_lookup(ctx, 1, &set, &got, flags), 0);
	tu_ref_lookup(ref, b, pooling, want);
	snprintf(what, sizeof(what), "dtype %d dim %d pooling %d%s",
		 ref->dtype, ref->dim, pooling,
		 b->weights ? " weighted" : "");
	bad = tu_mismatches(what, got, want, rows * ref->dim, REL_TOL,
			    ABS_TOL);
	free(got);
	free(want);
	return bad;
}

static void random_bags(struct tu_bags *b, struct tu_rng *r, int64_t nbags,
			int max_len, int64_t rows, bool weighted)
{
	struct tu_bag_spec spec = {
		.nbags = nbags, .max_len = max_len, .rows = rows,
		.weighted = weighted, .zipf = true, .repeat_pct = 25,
		.empty_pct = 10,
	};

	tu_bags_random(b, r, &spec);
}

/* Every pooling mode, weighted or not, planned and NO_GRAD, on one table. */
static int64_t check_all_modes(shemb_ctx *ctx, shemb_table *t,
			       struct tu_rng *r, int64_t nbags)
{
	struct tu_ref ref;
	int64_t bad = 0;

	tu_ref_init(&ref, t);
	for (int weighted = 0; weighted < 2; weighted++) {
		struct tu_bags b;

		random_bags(&b, r, nbags, 8, ref.rows, weighted);
		for (size_t p = 0; p < TU_ARRAY_SIZE(poolings); p++) {
			bad += check_one(ctx, t, &ref, &b, poolings[p], 0);
			bad += check_one(ctx, t, &ref, &b, poolings[p],
					 SHEMB_LOOKUP_NO_GRAD);
		}
		tu_bags_free(&b);
	}
	tu_ref_free(&ref);
	return bad;
}

START_TEST(modes_dtypes_dims)
{
	shemb_ctx *ctx = variant_ctx(_i, 2);
	struct tu_rng r;
	int64_t bad = 0;

	if (!ctx)
		return;
	tu_rng_seed(&r, 1000 + (uint64_t)_i);
	for (size_t d = 0; d < TU_ARRAY_SIZE(dtypes); d++) {
		for (size_t k = 0; k < TU_ARRAY_SIZE(dims); k++) {
			bool wide = dims[k] >= 1024;
			shemb_table *t = tu_table(ctx, wide ? 40 : 300,
						  dims[k], dtypes[d],
						  SHEMB_OPT_SGD);

			bad += check_all_modes(ctx, t, &r, wide ? 6 : 40);
			shemb_table_destroy(t);
		}
	}
	ck_assert_int_eq(bad, 0);
	shemb_ctx_destroy(ctx);
}
END_TEST

/* Tens of thousands of ids: the plan and the pooling are cut into many
 * tasks over the threads. */
START_TEST(large_batch)
{
	shemb_ctx *ctx = variant_ctx(_i, 2);
	struct tu_rng r;
	shemb_table *t;

	if (!ctx)
		return;
	tu_rng_seed(&r, 2000);
	t = tu_table(ctx, 5000, 24, SHEMB_BF16, SHEMB_OPT_SGD);
	ck_assert_int_eq(check_all_modes(ctx, t, &r, 4000), 0);
	shemb_ctx_destroy(ctx);
}
END_TEST

/* Closed forms: a row repeated in a bag, a single id, an empty bag. */
START_TEST(duplicates_in_a_bag)
{
	shemb_ctx *ctx = variant_ctx(_i, 2);
	const int64_t len[4] = { 3, 1, 0, 2 }, ids[6] = { 5, 5, 5, 7, 5, 5 };
	const float wts[6] = { 1.0f, 2.0f, 0.5f, -1.0f, 4.0f, -4.0f };
	struct tu_bags b, bw;
	shemb_table *t;
	float *w, out[4 * 8];
	struct shemb_bags set;
	float *outp = out;

	if (!ctx)
		return;
	t = tu_table(ctx, 10, 8, SHEMB_F32, SHEMB_OPT_SGD);
	w = tu_read_all_f32(t);
	tu_bags_from(&b, 4, len, ids, NULL);
	tu_bags_from(&bw, 4, len, ids, wts);

	set = tu_bags_view(&b, t, SHEMB_POOL_SUM);
	ck_assert_int_eq(shemb_lookup(ctx, 1, &set, &outp, 0), 0);
	for (int c = 0; c < 8; c++) {
		float r5 = w[5 * 8 + c];

		ck_assert(tu_close(out[c], r5 + r5 + r5, REL_TOL, 0));
		ck_assert(out[8 + c] == w[7 * 8 + c]);
		ck_assert(out[16 + c] == 0.0f);
		ck_assert(tu_close(out[24 + c], 2 * r5, REL_TOL, 0));
	}
	set = tu_bags_view(&bw, t, SHEMB_POOL_MAX);
	ck_assert_int_eq(shemb_lookup(ctx, 1, &set, &outp, 0), 0);
	for (int c = 0; c < 8; c++) {
		float r5 = w[5 * 8 + c];

		ck_assert(out[c] == fmaxf(r5, fmaxf(2 * r5, 0.5f * r5)));
		ck_assert(out[8 + c] == -w[7 * 8 + c]);
		ck_assert(out[16 + c] == 0.0f);
		ck_assert(out[24 + c] == fabsf(4 * r5));
	}
	set = tu_bags_view(&bw, t, SHEMB_POOL_MEAN);
	ck_assert_int_eq(shemb_lookup(ctx, 1, &set, &outp, 0), 0);
	for (int c = 0; c < 8; c++) {
		float r5 = w[5 * 8 + c];

		ck_assert(tu_close(out[c], 3.5f * r5 / 3, REL_TOL, 1e-7f));
		ck_assert(out[16 + c] == 0.0f);
		ck_assert(tu_close(out[24 + c], 0.0f, 0, 1e-7f));
	}
	tu_bags_free(&b);
	tu_bags_free(&bw);
	free(w);
	shemb_ctx_destroy(ctx);
}
END_TEST

/* No bags (offsets NULL or {0}, out NULL) and bags that are all empty,
 * which pool to +0. */
static void zero_and_empty(shemb_ctx *ctx, shemb_table *t, int pooling,
			   unsigned flags)
{
	static const int64_t zero_off[1] = { 0 }, empty_off[4] = { 0 };
	float out[3 * 5];
	float *outp = out, *nullp = NULL;
	struct shemb_bags set;

	shemb_bags_init(&set);
	set.table = t;
	set.pooling = pooling;
	ck_assert_int_eq(shemb_lookup(ctx, 1, &set, &nullp, flags), 0);
	set.offsets = zero_off;
	ck_assert_int_eq(shemb_lookup(ctx, 1, &set, &nullp, flags), 0);
	set.nbags = 3;
	set.offsets = empty_off;
	for (int i = 0; i < 15; i++)
		out[i] = NAN;
	ck_assert_int_eq(shemb_lookup(ctx, 1, &set,
				      pooling == SHEMB_POOL_NONE ? &nullp
								 : &outp,
				      flags),
			 0);
	for (int i = 0; pooling != SHEMB_POOL_NONE && i < 15; i++)
		ck_assert(out[i] == 0.0f && !signbit(out[i]));
}

START_TEST(zero_bags_and_empty_bags_no_grad)
{
	shemb_ctx *ctx = variant_ctx(_i, 2);
	shemb_table *t;

	if (!ctx)
		return;
	t = tu_table(ctx, 10, 5, SHEMB_F16, SHEMB_OPT_SGD);
	for (size_t p = 0; p < TU_ARRAY_SIZE(poolings); p++)
		zero_and_empty(ctx, t, poolings[p], SHEMB_LOOKUP_NO_GRAD);
	/* and zero sets */
	ck_assert_int_eq(shemb_lookup(ctx, 0, NULL, NULL, 0), 0);
	shemb_ctx_destroy(ctx);
}
END_TEST

/*
 * A planned lookup whose sets hold no id at all, on a table never planned
 * before: a plan of nothing is still a plan ("zero bags and empty bags are
 * valid").
 */
START_TEST(zero_bags_and_empty_bags_planned)
{
	shemb_ctx *ctx = variant_ctx(_i, 2);

	if (!ctx)
		return;
	for (size_t p = 0; p < TU_ARRAY_SIZE(poolings); p++) {
		/* a fresh table each time: no plan buffers to reuse */
		shemb_table *t = tu_table(ctx, 10, 5, SHEMB_F16,
					  SHEMB_OPT_SGD);

		zero_and_empty(ctx, t, poolings[p], 0);
	}
	shemb_ctx_destroy(ctx);
}
END_TEST

/* Several sets in one call, the same table in two of them, different
 * dtypes and dims: each output equals a lookup of its set alone. */
START_TEST(several_sets_one_call)
{
	shemb_ctx *ctx = variant_ctx(_i, 2);
	struct tu_ref ra, rb;
	struct tu_bags b[4];
	struct shemb_bags sets[4];
	float *got[4], *want[4];
	struct tu_rng r;
	shemb_table *ta, *tb;
	const int pool[4] = { SHEMB_POOL_SUM, SHEMB_POOL_MAX, SHEMB_POOL_NONE,
			      SHEMB_POOL_MEAN };
	int64_t bad = 0;

	if (!ctx)
		return;
	tu_rng_seed(&r, 3000);
	ta = tu_table(ctx, 200, 16, SHEMB_F32, SHEMB_OPT_SGD);
	tb = tu_table(ctx, 50, 3, SHEMB_BF16, SHEMB_OPT_ADAM);
	tu_ref_init(&ra, ta);
	tu_ref_init(&rb, tb);
	for (int i = 0; i < 4; i++) {
		const struct tu_ref *ref = i == 1 ? &rb : &ra;

		random_bags(&b[i], &r, 30, 6, ref->rows, i == 0 || i == 2);
		sets[i] = tu_bags_view(&b[i], i == 1 ? tb : ta, pool[i]);
		got[i] = nan_buffer(tu_out_rows(&b[i], pool[i]), ref->dim);
		want[i] = nan_buffer(tu_out_rows(&b[i], pool[i]), ref->dim);
		tu_ref_lookup(ref, &b[i], pool[i], want[i]);
	}
	for (int flags = 0; flags < 2; flags++) {
		ck_assert_int_eq(shemb_lookup(ctx, 4, sets, got,
					      flags ? SHEMB_LOOKUP_NO_GRAD
						    : 0),
				 0);
		for (int i = 0; i < 4; i++)
			bad += tu_mismatches("set", got[i], want[i],
					     tu_out_rows(&b[i], pool[i]) *
						     (i == 1 ? 3 : 16),
					     REL_TOL, ABS_TOL);
	}
	ck_assert_int_eq(bad, 0);
	for (int i = 0; i < 4; i++) {
		free(got[i]);
		free(want[i]);
		tu_bags_free(&b[i]);
	}
	tu_ref_free(&ra);
	tu_ref_free(&rb);
	shemb_ctx_destroy(ctx);
}
END_TEST

/* bags.dim equal to the table's dim is accepted. */
START_TEST(explicit_dim_accepted)
{
	shemb_ctx *ctx = variant_ctx(_i, 1);
	const int64_t len[1] = { 2 }, ids[2] = { 1, 2 };
	struct tu_bags b;
	struct tu_ref ref;
	shemb_table *t;

	if (!ctx)
		return;
	t = tu_table(ctx, 4, 6, SHEMB_F32, SHEMB_OPT_SGD);
	tu_ref_init(&ref, t);
	tu_bags_from(&b, 1, len, ids, NULL);
	{
		struct shemb_bags set = tu_bags_view(&b, t, SHEMB_POOL_SUM);
		float out[6], want[6];
		float *outp = out;

		set.dim = 6;
		ck_assert_int_eq(shemb_lookup(ctx, 1, &set, &outp, 0), 0);
		tu_ref_lookup(&ref, &b, SHEMB_POOL_SUM, want);
		ck_assert_int_eq(tu_mismatches("dim", out, want, 6, REL_TOL,
					       ABS_TOL), 0);
	}
	tu_bags_free(&b);
	tu_ref_free(&ref);
	shemb_ctx_destroy(ctx);
}
END_TEST

START_TEST(lookup_leaves_table_unchanged)
{
	shemb_ctx *ctx = variant_ctx(_i, 2);
	struct tu_snapshot before;
	struct tu_rng r;
	shemb_table *t;

	if (!ctx)
		return;
	tu_rng_seed(&r, 4000);
	t = tu_table(ctx, 100, 9, SHEMB_F16, SHEMB_OPT_ADAGRAD);
	tu_snapshot_take(&before, t);
	ck_assert_int_eq(check_all_modes(ctx, t, &r, 20), 0);
	ck_assert(tu_unchanged_since(&before, t));
	tu_snapshot_free(&before);
	shemb_ctx_destroy(ctx);
}
END_TEST

/* ---- every variant gives the same bits ---- */

struct variant_outputs {
	size_t bytes;
	unsigned char *data;
};

/* Outputs of a fixed set of lookups in a fresh context of variant i, all
 * concatenated; false when the variant is missing. */
static bool variant_run(int i, struct variant_outputs *v)
{
	shemb_ctx *ctx = variant_ctx(i, 2);
	size_t cap = 4 << 20;

	if (!ctx)
		return false;
	v->data = tu_malloc(cap);
	v->bytes = 0;
	for (size_t d = 0; d < TU_ARRAY_SIZE(dtypes); d++) {
		static const int vdims[] = { 1, 7, 16, 129, 4096 };

		for (size_t k = 0; k < TU_ARRAY_SIZE(vdims); k++) {
			shemb_table *t = tu_table(ctx, 64, vdims[k], dtypes[d],
						  SHEMB_OPT_SGD);
			struct tu_rng r;

			tu_rng_seed(&r, 5000 + d * 10 + k);
			for (int weighted = 0; weighted < 2; weighted++) {
				struct tu_bags b;

				random_bags(&b, &r, 5, 6, 64, weighted);
				for (size_t p = 0; p < 4; p++) {
					struct shemb_bags set = tu_bags_view(
						&b, t, poolings[p]);
					size_t n = (size_t)tu_out_rows(
							   &b, poolings[p]) *
						   (size_t)vdims[k] *
						   sizeof(float);
					float *out = (float *)(v->data +
							       v->bytes);

					ck_assert_uint_le(v->bytes + n, cap);
					ck_assert_int_eq(shemb_lookup(ctx, 1,
								      &set,
								      &out, 0),
							 0);
					v->bytes += n;
				}
				tu_bags_free(&b);
			}
			shemb_table_destroy(t);
		}
	}
	shemb_ctx_destroy(ctx);
	return true;
}

START_TEST(variants_bitwise_identical)
{
	struct variant_outputs base, other;
	int compared = 0;

	ck_assert(variant_run(0, &base)); /* generic is always there */
	for (int i = 1; i < 3; i++) {
		if (!variant_run(i, &other))
			continue;
		ck_assert_uint_eq(other.bytes, base.bytes);
		ck_assert_int_eq(tu_bits_differ(tu_isas[i], other.data,
						base.data, base.bytes), 0);
		free(other.data);
		compared++;
	}
	printf("lookup outputs of %d variants compared with generic\n",
	       compared);
	free(base.data);
}
END_TEST

static Suite *lookup_suite(void)
{
	Suite *s = suite_create("lookup");
	TCase *tc = tcase_create("per variant");
	TCase *tv = tcase_create("across variants");
	TCase *reg = tcase_create("regressions");

	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, modes_dtypes_dims, 0, 3);
	tcase_add_loop_test(tc, large_batch, 0, 3);
	tcase_add_loop_test(tc, duplicates_in_a_bag, 0, 3);
	tcase_add_loop_test(tc, zero_bags_and_empty_bags_no_grad, 0, 3);
	tcase_add_loop_test(tc, several_sets_one_call, 0, 3);
	tcase_add_loop_test(tc, explicit_dim_accepted, 0, 3);
	tcase_add_loop_test(tc, lookup_leaves_table_unchanged, 0, 3);
	suite_add_tcase(s, tc);
	tcase_set_timeout(tv, 60);
	tcase_add_test(tv, variants_bitwise_identical);
	suite_add_tcase(s, tv);
	tcase_add_loop_test(reg, zero_bags_and_empty_bags_planned, 0, 3);
	suite_add_tcase(s, reg);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(lookup_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
