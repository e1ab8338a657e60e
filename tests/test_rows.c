/*
 * test_rows.c - reading and writing rows in every dtype combination,
 * rounding to nearest even, repeated ids, optimizer state kept or reset by
 * writes, and the initial values: deterministic, independent of thread
 * count and creation details, within range, plausibly distributed, and the
 * rounded fp32 values in fp16 / bf16 tables.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shemb.h"
#include "tests/testutil.h"

static const int dtypes[] = { SHEMB_F32, SHEMB_F16, SHEMB_BF16 };

static shemb_ctx *ctx_threads(int nthreads)
{
	shemb_ctx *ctx = NULL;

	ck_assert_int_eq(tu_ctx_create(NULL, nthreads, &ctx), 0);
	return ctx;
}

static int64_t *id_range(int64_t n)
{
	int64_t *ids = tu_malloc((size_t)n * sizeof(int64_t));

	for (int64_t i = 0; i < n; i++)
		ids[i] = i;
	return ids;
}

static float f32_of_bits(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

/* ---- dtype combinations ---- */

/*
 * Values for conversion tests: random ones, fp16 subnormals and values
 * exactly halfway between two fp16 or two bf16 neighbours, so that the
 * rounding direction of ties is checked.  Without tiny, no value is small
 * enough to round to a zero of fp16 (see negative_zero_kept_in_blocks).
 */
static void conversion_values(float *v, size_t n, struct tu_rng *r,
			      bool tiny)
{
	for (size_t i = 0; i < n; i++) {
		switch (i % 6) {
		case 0:
			v[i] = tu_rng_float(r, -3.0f, 3.0f);
			break;
		case 1: /* fp16 subnormal range */
			v[i] = tu_rng_float(r, -6e-5f, 6e-5f);
			if (!tiny && fabsf(v[i]) < 0x1p-23f)
				v[i] = 0x1p-23f;
			break;
		case 2: /* fp16 ties: 1 + (odd) * 2^-11 */
			v[i] = 1.0f + (float)(2 * tu_rng_below(r, 1024) + 1) *
					      0x1p-11f;
			break;
		case 3: /* bf16 ties: dropped half exactly 0x8000 */
			v[i] = f32_of_bits(((uint32_t)0x3e00 +
					    (uint32_t)tu_rng_below(r, 0x300))
						   << 16 |
					   0x8000u);
			break;
		default:
			v[i] = tu_rng_float(r, -100.0f, 100.0f);
			break;
		}
	}
}

/* Write values given in dtype w into a table of dtype s, read them back in
 * dtype rd: the bits must be those of rd(s(w(value))). */
static int64_t check_combination(shemb_ctx *ctx, int s, int w, int rd,
				 int64_t rows, int dim, struct tu_rng *r)
{
	size_t n = (size_t)rows * (size_t)dim;
	float *v = tu_malloc(n * sizeof(float));
	void *in = tu_malloc(n * 4), *got = tu_malloc(n * 4);
	void *want = tu_malloc(n * 4);
	int64_t *ids = id_range(rows);
	shemb_table *t = tu_table(ctx, rows, dim, s, SHEMB_OPT_SGD);
	int64_t bad;
	char what[64];

	/* values that round to -0 only in small blocks (see above) */
	conversion_values(v, n, r, n < 4096);
	tu_store(w, in, v, n);           /* the caller's values */
	tu_load(w, in, v, n);
	for (size_t i = 0; i < n; i++)   /* stored, then read as rd */
		v[i] = tu_round(v[i], s);
	tu_store(rd, want, v, n);
	ck_assert_int_eq(shemb_table_write_rows(t, rows, ids, in, w, 0), 0);
	ck_assert_int_eq(shemb_table_read_rows(t, rows, ids, got, rd), 0);
	snprintf(what, sizeof(what), "store %d write %d read %d", s, w, rd);
	bad = tu_bits_differ(what, got, want, n * tu_dtype_size(rd));
	shemb_table_destroy(t);
	free(ids);
	free(want);
	free(got);
	free(in);
	free(v);
	return bad;
}

/* Whether one of the conversions of a combination is between fp16 and
 * bf16 (no fp32 side). */
static bool half_to_half(int s, int w, int rd)
{
	return (s == SHEMB_F16 && (w == SHEMB_BF16 || rd == SHEMB_BF16)) ||
	       (s == SHEMB_BF16 && (w == SHEMB_F16 || rd == SHEMB_F16));
}

/* All combinations of storage, write and read dtype, or only those with
 * (want_half_to_half) or without an fp16 <-> bf16 conversion. */
static int64_t check_combinations(int64_t rows, int dim, int which)
{
	shemb_ctx *ctx = ctx_threads(2);
	struct tu_rng r;
	int64_t bad = 0;

	tu_rng_seed(&r, 10 + (uint64_t)rows);
	for (int s = 0; s < 3; s++)
		for (int w = 0; w < 3; w++)
			for (int rd = 0; rd < 3; rd++) {
				bool hh = half_to_half(dtypes[s], dtypes[w],
						       dtypes[rd]);

				if ((which == 0 && hh) || (which == 1 && !hh))
					continue;
				bad += check_combination(ctx, dtypes[s],
							 dtypes[w], dtypes[rd],
							 rows, dim, &r);
			}
	shemb_ctx_destroy(ctx);
	return bad;
}

/* 30 x 7 values: converted in blocks of fewer than 4096 values. */
START_TEST(all_dtype_combinations_small)
{
	ck_assert_int_eq(check_combinations(30, 7, 2), 0);
}
END_TEST

/* 600 x 33 values: converted in blocks of thousands of values (the
 * library hands such blocks to oneDNN when it has it). */
START_TEST(dtype_combinations_large_via_f32)
{
	ck_assert_int_eq(check_combinations(600, 33, 0), 0);
}
END_TEST

/*
 * Conversions between fp16 and bf16 (an F16 table read or written as
 * BF16, or the reverse) in blocks of 4096 values and more, the size at
 * which a bulk conversion library would take over.
 */
START_TEST(dtype_combinations_large_f16_bf16)
{
	ck_assert_int_eq(check_combinations(600, 33, 1), 0);
}
END_TEST

/* Every value of a block of -0 in dtype w, written to a table of dtype s
 * and read back as rd, must still be -0. */
static int64_t lost_zero_signs(shemb_ctx *ctx, int s, int w, int rd,
			       int64_t rows, int dim)
{
	size_t n = (size_t)rows * (size_t)dim;
	float *v = tu_malloc(n * sizeof(float));
	void *in = tu_malloc(n * 4), *got = tu_malloc(n * 4);
	int64_t *ids = id_range(rows), lost = 0;
	shemb_table *t = tu_table(ctx, rows, dim, s, SHEMB_OPT_SGD);

	for (size_t i = 0; i < n; i++)
		v[i] = -0.0f;
	tu_store(w, in, v, n);
	ck_assert_int_eq(shemb_table_write_rows(t, rows, ids, in, w, 0), 0);
	ck_assert_int_eq(shemb_table_read_rows(t, rows, ids, got, rd), 0);
	tu_load(rd, got, v, n);
	for (size_t i = 0; i < n; i++)
		lost += !(v[i] == 0.0f && signbit(v[i]));
	if (lost)
		fprintf(stderr, "store %d write %d read %d: %lld of %zu "
			"values of -0 came back as +0\n", s, w, rd,
			(long long)lost, n);
	shemb_table_destroy(t);
	free(ids);
	free(got);
	free(in);
	free(v);
	return lost;
}

/*
 * -0 rounds to -0 in every dtype.
 * -0 survives conversions between fp32 and fp16 (write_rows of F32 into
 * an F16 table, read_rows of an F16 table as F32, of an F32 table as F16)
 * in large blocks as in small ones (oneDNN 2.6's reorders lose it).
 */
START_TEST(negative_zero_kept_in_large_blocks)
{
	shemb_ctx *ctx = ctx_threads(2);
	int64_t lost = 0;

	for (int s = 0; s < 3; s++)
		for (int w = 0; w < 3; w++)
			for (int rd = 0; rd < 3; rd++) {
				if (half_to_half(dtypes[s], dtypes[w],
						 dtypes[rd]))
					continue;
				lost += lost_zero_signs(ctx, dtypes[s],
							dtypes[w], dtypes[rd],
							600, 33);
			}
	ck_assert_int_eq(lost, 0);
	shemb_ctx_destroy(ctx);
}
END_TEST

START_TEST(negative_zero_kept_in_small_blocks)
{
	shemb_ctx *ctx = ctx_threads(2);
	int64_t lost = 0;

	for (int s = 0; s < 3; s++)
		for (int w = 0; w < 3; w++)
			for (int rd = 0; rd < 3; rd++)
				lost += lost_zero_signs(ctx, dtypes[s],
							dtypes[w], dtypes[rd],
							30, 7);
	ck_assert_int_eq(lost, 0);
	shemb_ctx_destroy(ctx);
}
END_TEST

/*
 * fp32 subnormals written into a bf16 table round to nearest even like any
 * value (bf16 has fp32's exponent range, so they stay subnormals), in
 * large blocks as in small ones (oneDNN 2.6's reorders flush them to
 * zero: 0x00400000 stored as 0x0000, not 0x0040).
 */
static int64_t flushed_subnormals(int64_t rows, int dim)
{
	shemb_ctx *ctx = ctx_threads(2);
	shemb_table *t = tu_table(ctx, rows, dim, SHEMB_BF16, SHEMB_OPT_SGD);
	size_t n = (size_t)rows * (size_t)dim;
	float *in = tu_malloc(n * sizeof(float));
	uint16_t *got = tu_malloc(n * sizeof(uint16_t));
	int64_t *ids = id_range(rows), bad = 0;
	struct tu_rng r;

	tu_rng_seed(&r, 60);
	for (size_t i = 0; i < n; i++)
		in[i] = f32_of_bits(((uint32_t)tu_rng_next(&r) & 0x807fffffu) |
				    0x00100000u);
	ck_assert_int_eq(shemb_table_write_rows(t, rows, ids, in, SHEMB_F32,
						0), 0);
	ck_assert_int_eq(shemb_table_read_rows(t, rows, ids, got, SHEMB_BF16),
			 0);
	for (size_t i = 0; i < n; i++)
		bad += got[i] != tu_f32_to_bf16(in[i]);
	if (bad)
		fprintf(stderr, "%lld of %zu bf16 subnormals wrong\n",
			(long long)bad, n);
	free(ids);
	free(got);
	free(in);
	shemb_ctx_destroy(ctx);
	return bad;
}

START_TEST(bf16_subnormals_in_small_blocks)
{
	ck_assert_int_eq(flushed_subnormals(30, 7), 0);
}
END_TEST

START_TEST(bf16_subnormals_in_large_blocks)
{
	ck_assert_int_eq(flushed_subnormals(600, 33), 0);
}
END_TEST

/* Known roundings, written as fp32 into a table of dtype and read back in
 * that dtype. */
static void check_roundings(int dtype, const uint32_t *in, const uint16_t *out,
			    int n)
{
	shemb_ctx *ctx = ctx_threads(1);
	shemb_table *t = tu_table(ctx, 1, n, dtype, SHEMB_OPT_SGD);
	const int64_t id = 0;
	uint16_t got[16];

	ck_assert_int_le(n, 16);
	ck_assert_int_eq(shemb_table_write_rows(t, 1, &id, in, SHEMB_F32, 0),
			 0);
	ck_assert_int_eq(shemb_table_read_rows(t, 1, &id, got, dtype), 0);
	for (int i = 0; i < n; i++)
		ck_assert_msg(got[i] == out[i], "%08x -> %04x, want %04x",
			      in[i], got[i], out[i]);
	shemb_ctx_destroy(ctx);
}

START_TEST(write_f32_into_bf16_rounds_to_nearest_even)
{
	static const uint32_t in[] = {
		0x3f808000, /* tie, even below */
		0x3f818000, /* tie, odd below: up */
		0x3f808001, /* above the tie */
		0x3f807fff, /* below the tie */
		0xbf818000, /* negative tie */
		0x00018000, /* subnormal tie, odd below */
		0x3fffffff, /* carry into the exponent */
		0x80000000, /* -0 */
	};
	static const uint16_t out[] = { 0x3f80, 0x3f82, 0x3f81, 0x3f80,
					0xbf82, 0x0002, 0x4000, 0x8000 };

	check_roundings(SHEMB_BF16, in, out, TU_ARRAY_SIZE(in));
}
END_TEST

START_TEST(write_f32_into_f16_rounds_to_nearest_even)
{
	static const uint32_t in[] = {
		0x3f801000, /* 1 + 2^-11: tie, even below */
		0x3f803000, /* 1 + 3 * 2^-11: tie, up to even */
		0x477fe000, /* 65504, the largest fp16 */
		0x33800000, /* 2^-24, the smallest subnormal */
		0x33000000, /* 2^-25: tie between 0 and 2^-24 */
		0x33c00000, /* 1.5 * 2^-24: tie, up to even */
		0xc0000000, /* -2 */
		0x387fe000, /* tie just under 2^-14: up to the normal */
	};
	static const uint16_t out[] = { 0x3c00, 0x3c02, 0x7bff, 0x0001,
					0x0000, 0x0002, 0xc000, 0x0400 };

	check_roundings(SHEMB_F16, in, out, TU_ARRAY_SIZE(in));
}
END_TEST

/* Random finite bit patterns, subnormals and -0 included, come back. */
START_TEST(read_in_storage_dtype_is_bit_exact)
{
	shemb_ctx *ctx = ctx_threads(2);
	struct tu_rng r;

	tu_rng_seed(&r, 20);
	for (int d = 0; d < 3; d++) {
		const int64_t rows = 300, dim = 20;
		size_t n = (size_t)(rows * dim), sz = tu_dtype_size(dtypes[d]);
		unsigned char *in = tu_malloc(n * sz), *got = tu_malloc(n * sz);
		int64_t *ids = id_range(rows);
		shemb_table *t = tu_table(ctx, rows, dim, dtypes[d],
					  SHEMB_OPT_SGD);

		for (size_t i = 0; i < n; i++) {
			uint32_t u = (uint32_t)tu_rng_next(&r);

			/* exponent all ones is not finite: clear a bit */
			if (sz == 4 && (u & 0x7f800000u) == 0x7f800000u)
				u &= ~0x00800000u;
			if (sz == 2 && dtypes[d] == SHEMB_F16 &&
			    (u & 0x7c00u) == 0x7c00u)
				u &= ~0x0400u;
			if (sz == 2 && dtypes[d] == SHEMB_BF16 &&
			    (u & 0x7f80u) == 0x7f80u)
				u &= ~0x0080u;
			memcpy(in + i * sz, &u, sz);
		}
		ck_assert_int_eq(shemb_table_write_rows(t, rows, ids, in,
							dtypes[d], 0), 0);
		ck_assert_int_eq(shemb_table_read_rows(t, rows, ids, got,
						       dtypes[d]), 0);
		ck_assert_int_eq(tu_bits_differ("exact", got, in, n * sz), 0);
		shemb_table_destroy(t);
		free(ids);
		free(got);
		free(in);
	}
	shemb_ctx_destroy(ctx);
}
END_TEST

START_TEST(read_f16_from_f32_table)
{
	shemb_ctx *ctx = ctx_threads(2);
	shemb_table *t = tu_table(ctx, 500, 16, SHEMB_F32, SHEMB_OPT_SGD);
	float *w = tu_read_all_f32(t);
	uint16_t *got = tu_malloc(500 * 16 * sizeof(uint16_t));
	int64_t *ids = id_range(500);

	ck_assert_int_eq(shemb_table_read_rows(t, 500, ids, got, SHEMB_F16),
			 0);
	for (int i = 0; i < 500 * 16; i++)
		ck_assert_uint_eq(got[i], tu_f32_to_f16(w[i]));
	free(ids);
	free(got);
	free(w);
	shemb_ctx_destroy(ctx);
}
END_TEST

/* ---- writes: repeated ids, other rows, an arbitrary id order ---- */

START_TEST(repeated_id_keeps_last_row)
{
	shemb_ctx *ctx = ctx_threads(2);
	shemb_table *t = tu_table(ctx, 10, 4, SHEMB_BF16, SHEMB_OPT_SGD);
	static const int64_t ids[5] = { 3, 5, 3, 9, 3 };
	float in[5][4], got[10][4];
	float *before = tu_read_all_f32(t);
	int64_t *all = id_range(10);

	for (int i = 0; i < 5; i++)
		for (int c = 0; c < 4; c++)
			in[i][c] = (float)(i * 4 + c + 1);
	ck_assert_int_eq(shemb_table_write_rows(t, 5, ids, in, SHEMB_F32, 0),
			 0);
	ck_assert_int_eq(shemb_table_read_rows(t, 10, all, got, SHEMB_F32), 0);
	for (int r = 0; r < 10; r++) {
		const float *want = r == 3 ? in[4] : r == 5 ? in[1]
				    : r == 9 ? in[3] : before + r * 4;

		ck_assert(!memcmp(got[r], want, sizeof(got[r])));
	}
	free(all);
	free(before);
	shemb_ctx_destroy(ctx);
}
END_TEST

/* A large write in shuffled id order, through the blocked path. */
START_TEST(large_write_in_any_order)
{
	shemb_ctx *ctx = ctx_threads(3);
	const int64_t rows = 20000, dim = 12;
	shemb_table *t = tu_table(ctx, rows, dim, SHEMB_F16, SHEMB_OPT_SGD);
	float *in = tu_malloc((size_t)(rows * dim) * sizeof(float));
	float *got = tu_malloc((size_t)(rows * dim) * sizeof(float));
	int64_t *ids = id_range(rows);
	struct tu_rng r;

	tu_rng_seed(&r, 30);
	for (int64_t i = rows - 1; i > 0; i--) { /* Fisher-Yates */
		int64_t j = tu_rng_below(&r, i + 1), x = ids[i];

		ids[i] = ids[j];
		ids[j] = x;
	}
	tu_rng_fill(&r, in, (size_t)(rows * dim), -2.0f, 2.0f);
	ck_assert_int_eq(shemb_table_write_rows(t, rows, ids, in, SHEMB_F32,
						0), 0);
	ck_assert_int_eq(shemb_table_read_rows(t, rows, ids, got, SHEMB_F32),
			 0);
	for (int64_t i = 0; i < rows * dim; i++)
		ck_assert(got[i] == tu_round(in[i], SHEMB_F16));
	free(ids);
	free(got);
	free(in);
	shemb_ctx_destroy(ctx);
}
END_TEST

/* ---- optimizer state and writes ---- */

#define ST_ROWS 20
#define ST_DIM 6

/* One lookup + backward of a bag per row (all rows touched), on the table
 * and on each reference. */
static void state_step(shemb_ctx *ctx, shemb_table *t, struct tu_ref *refs,
		       int nrefs, struct tu_rng *r)
{
	int64_t len[ST_ROWS], ids[ST_ROWS];
	float grad[ST_ROWS * ST_DIM], out[ST_ROWS * ST_DIM];
	float *op = out;
	const float *gp = grad;
	struct shemb_bags set;
	struct tu_bags b;

	for (int i = 0; i < ST_ROWS; i++) {
		len[i] = 1;
		ids[i] = ST_ROWS - 1 - i;
	}
	tu_bags_from(&b, ST_ROWS, len, ids, NULL);
	tu_rng_fill(r, grad, ST_ROWS * ST_DIM, -1.0f, 1.0f);
	set = tu_bags_view(&b, t, SHEMB_POOL_SUM);
	ck_assert_int_eq(shemb_lookup(ctx, 1, &set, &op, 0), 0);
	ck_assert_int_eq(shemb_backward(ctx, 1, &set, &gp), 0);
	for (int k = 0; k < nrefs; k++) {
		struct tu_ref_set rs = { &b, SHEMB_POOL_SUM, grad };

		tu_ref_backward(&refs[k], 1, &rs);
	}
	tu_bags_free(&b);
}

/* Values of the table that differ from the reference (quietly: some
 * callers expect differences). */
static int64_t table_vs_ref(shemb_table *t, const struct tu_ref *ref)
{
	float *got = tu_read_all_f32(t);
	int64_t bad = 0;

	for (int i = 0; i < ST_ROWS * ST_DIM; i++)
		bad += !tu_close(got[i], ref->w[i], 1e-6f, 1e-7f);
	free(got);
	return bad;
}

/*
 * After a step, rows 2..9 are overwritten, once keeping the state and once
 * resetting it; refs[0] keeps the state of every row, refs[1] resets that
 * of the written rows.  The next step tells which happened.
 */
static void check_state_after_write(int optimizer, unsigned flags)
{
	shemb_ctx *ctx = ctx_threads(2);
	struct shemb_table_attr a;
	struct tu_ref refs[2];
	float in[8 * ST_DIM];
	int64_t ids[8];
	struct tu_rng r;
	shemb_table *t;
	int keep_bad, reset_bad;

	shemb_table_attr_init(&a);
	a.rows = ST_ROWS;
	a.dim = ST_DIM;
	a.optimizer = optimizer;
	a.lr = 0.1f;
	a.initial_accumulator = 0.25f;
	t = tu_table_attr(ctx, &a);
	tu_ref_init(&refs[0], t);
	tu_ref_init(&refs[1], t);
	tu_rng_seed(&r, 40 + optimizer);
	state_step(ctx, t, refs, 2, &r);
	state_step(ctx, t, refs, 2, &r);

	for (int i = 0; i < 8; i++)
		ids[i] = 2 + i;
	tu_rng_fill(&r, in, 8 * ST_DIM, -0.5f, 0.5f);
	ck_assert_int_eq(shemb_table_write_rows(t, 8, ids, in, SHEMB_F32,
						flags), 0);
	for (int k = 0; k < 2; k++)
		tu_ref_write(&refs[k], 8, ids, in);
	for (int i = 0; i < 8; i++)
		tu_ref_reset_state(&refs[1], ids[i]);
	ck_assert_int_eq(table_vs_ref(t, &refs[0]), 0);

	state_step(ctx, t, refs, 2, &r);
	keep_bad = table_vs_ref(t, &refs[0]) != 0;
	reset_bad = table_vs_ref(t, &refs[1]) != 0;
	if (flags & SHEMB_WRITE_RESET_STATE)
		ck_assert(reset_bad == 0 && keep_bad == 1);
	else
		ck_assert(keep_bad == 0 && reset_bad == 1);
	tu_ref_free(&refs[0]);
	tu_ref_free(&refs[1]);
	shemb_ctx_destroy(ctx);
}

START_TEST(write_keeps_optimizer_state)
{
	check_state_after_write(SHEMB_OPT_ADAGRAD, 0);
	check_state_after_write(SHEMB_OPT_ROWWISE_ADAGRAD, 0);
	check_state_after_write(SHEMB_OPT_ADAM, 0);
}
END_TEST

START_TEST(write_reset_state_restores_initial_state)
{
	check_state_after_write(SHEMB_OPT_ADAGRAD, SHEMB_WRITE_RESET_STATE);
	check_state_after_write(SHEMB_OPT_ROWWISE_ADAGRAD,
				SHEMB_WRITE_RESET_STATE);
	check_state_after_write(SHEMB_OPT_ADAM, SHEMB_WRITE_RESET_STATE);
}
END_TEST

/* ---- initial values ---- */

static void init_attr(struct shemb_table_attr *a, int64_t rows, int dim,
		      int dtype, int init)
{
	shemb_table_attr_init(a);
	a->rows = rows;
	a->dim = dim;
	a->dtype = dtype;
	a->init = init;
	a->init_mean = 0.5f;
	a->init_std = 2.0f;
	a->init_value = 0.1f;
}

/* The whole table in its storage dtype, made in a fresh context. */
static struct tu_snapshot fresh_table(const struct shemb_table_attr *a,
				      int nthreads)
{
	shemb_ctx *ctx = ctx_threads(nthreads);
	struct tu_snapshot s;

	tu_snapshot_take(&s, tu_table_attr(ctx, a));
	shemb_ctx_destroy(ctx);
	return s;
}

static int64_t equal_values(const struct tu_snapshot *a,
			    const struct tu_snapshot *b)
{
	size_t sz = tu_dtype_size(a->dtype), n = a->bytes / sz;
	int64_t same = 0;

	for (size_t i = 0; i < n; i++)
		same += !memcmp((char *)a->data + i * sz,
				(char *)b->data + i * sz, sz);
	return same;
}

START_TEST(init_same_attrs_same_bytes)
{
	for (int d = 0; d < 3; d++)
		for (int init = SHEMB_INIT_UNIFORM; init <= SHEMB_INIT_CONSTANT;
		     init++) {
			struct shemb_table_attr a;
			struct tu_snapshot x, y;

			init_attr(&a, 300, 10, dtypes[d], init);
			a.seed = 77;
			x = fresh_table(&a, 1);
			y = fresh_table(&a, 2);
			ck_assert(tu_snapshot_equal(&x, &y));
			tu_snapshot_free(&x);
			tu_snapshot_free(&y);
		}
}
END_TEST

START_TEST(init_seed_and_table_id_matter)
{
	struct shemb_table_attr a;
	struct tu_snapshot base, other;
	int64_t n = 300 * 10;

	for (int init = SHEMB_INIT_UNIFORM; init <= SHEMB_INIT_NORMAL;
	     init++) {
		init_attr(&a, 300, 10, SHEMB_F32, init);
		a.table_id = 4;
		base = fresh_table(&a, 1);
		a.seed = 1;
		other = fresh_table(&a, 1);
		/* independent values coincide only by rare chance */
		ck_assert_int_lt(equal_values(&base, &other), n / 100);
		tu_snapshot_free(&other);
		a.seed = 0;
		a.table_id = 5;
		other = fresh_table(&a, 1);
		ck_assert_int_lt(equal_values(&base, &other), n / 100);
		tu_snapshot_free(&other);
		tu_snapshot_free(&base);
	}
}
END_TEST

/* Rows of the second table of a context (table_id 1 by creation order)
 * equal those of a table given table_id 1 in a new context. */
START_TEST(init_explicit_id_equals_default_ordinal)
{
	shemb_ctx *ctx = ctx_threads(2);
	struct shemb_table_attr a;
	struct tu_snapshot second, explicit_id;

	init_attr(&a, 200, 8, SHEMB_BF16, SHEMB_INIT_NORMAL);
	a.seed = 9;
	tu_table_attr(ctx, &a);
	tu_snapshot_take(&second, tu_table_attr(ctx, &a));
	shemb_ctx_destroy(ctx);
	a.table_id = 1;
	explicit_id = fresh_table(&a, 1);
	ck_assert(tu_snapshot_equal(&second, &explicit_id));
	tu_snapshot_free(&second);
	tu_snapshot_free(&explicit_id);
}
END_TEST

START_TEST(init_independent_of_thread_count)
{
	for (int d = 0; d < 3; d++) {
		struct shemb_table_attr a;
		struct tu_snapshot one, three;

		init_attr(&a, 40000, 8, dtypes[d], SHEMB_INIT_UNIFORM);
		a.seed = 5;
		one = fresh_table(&a, 1);
		three = fresh_table(&a, 3);
		ck_assert(tu_snapshot_equal(&one, &three));
		tu_snapshot_free(&one);
		tu_snapshot_free(&three);
	}
}
END_TEST

static void check_uniform_range(const struct shemb_table_attr *a, float lo,
				float hi)
{
	struct tu_snapshot s = fresh_table(a, 2);
	const float *v = s.data;
	size_t n = s.bytes / sizeof(float);
	float mn = INFINITY, mx = -INFINITY;

	for (size_t i = 0; i < n; i++) {
		ck_assert(v[i] >= lo && v[i] <= hi);
		mn = fminf(mn, v[i]);
		mx = fmaxf(mx, v[i]);
	}
	/* and the values fill the range (in double: it may be wider than a
	 * float holds) */
	ck_assert(mn < (double)lo + 0.01 * ((double)hi - lo));
	ck_assert(mx > (double)hi - 0.01 * ((double)hi - lo));
	tu_snapshot_free(&s);
}

START_TEST(init_uniform_within_range)
{
	struct shemb_table_attr a;
	float r = (float)sqrt(1.0 / 10000.0);

	init_attr(&a, 10000, 4, SHEMB_F32, SHEMB_INIT_UNIFORM);
	check_uniform_range(&a, -r, r);
	a.init_low = -3.0f;
	a.init_high = -1.0f;
	check_uniform_range(&a, -3.0f, -1.0f);
	/* wider than a float holds: init_high - init_low overflows */
	a.init_low = -3e38f;
	a.init_high = 3e38f;
	check_uniform_range(&a, -3e38f, 3e38f);
}
END_TEST

/* Mean and standard deviation of 200000 seeded values: the bounds are
 * many standard errors wide, and the data fixed. */
START_TEST(init_normal_statistics)
{
	struct shemb_table_attr a;
	struct tu_snapshot s;
	double sum = 0, sq = 0, mean, sd;
	const float *v;
	size_t n;

	init_attr(&a, 20000, 10, SHEMB_F32, SHEMB_INIT_NORMAL);
	a.seed = 3;
	s = fresh_table(&a, 2);
	v = s.data;
	n = s.bytes / sizeof(float);
	for (size_t i = 0; i < n; i++) {
		sum += v[i];
		sq += (double)v[i] * v[i];
	}
	mean = sum / (double)n;
	sd = sqrt(sq / (double)n - mean * mean);
	ck_assert_msg(fabs(mean - 0.5) < 0.03, "mean %g", mean);
	ck_assert_msg(fabs(sd - 2.0) < 0.04, "std %g", sd);
	tu_snapshot_free(&s);
}
END_TEST

START_TEST(init_zeros_and_constant)
{
	for (int d = 0; d < 3; d++) {
		struct shemb_table_attr a;
		struct tu_snapshot s;
		float *v;

		init_attr(&a, 500, 6, dtypes[d], SHEMB_INIT_ZEROS);
		s = fresh_table(&a, 2);
		for (size_t i = 0; i < s.bytes; i++)
			ck_assert_uint_eq(((unsigned char *)s.data)[i], 0);
		tu_snapshot_free(&s);

		init_attr(&a, 500, 6, dtypes[d], SHEMB_INIT_CONSTANT);
		a.init_value = -0.1f;
		{
			shemb_ctx *ctx = ctx_threads(2);

			v = tu_read_all_f32(tu_table_attr(ctx, &a));
			shemb_ctx_destroy(ctx);
		}
		for (int i = 0; i < 500 * 6; i++)
			ck_assert(v[i] == tu_round(-0.1f, dtypes[d]));
		free(v);
	}
}
END_TEST

/* fp16 / bf16 tables hold the rounded values of the fp32 table of the same
 * attributes. */
START_TEST(init_low_precision_is_rounded_f32)
{
	for (int init = SHEMB_INIT_UNIFORM; init <= SHEMB_INIT_CONSTANT;
	     init++) {
		struct shemb_table_attr a;
		struct tu_snapshot f32, low;
		void *want;

		init_attr(&a, 3000, 10, SHEMB_F32, init);
		a.seed = 11;
		a.table_id = 2;
		a.init_value = 1.0f / 3.0f;
		f32 = fresh_table(&a, 2);
		for (int d = 1; d < 3; d++) {
			a.dtype = dtypes[d];
			low = fresh_table(&a, 2);
			want = tu_malloc(low.bytes);
			tu_store(dtypes[d], want, f32.data,
				 f32.bytes / sizeof(float));
			ck_assert_int_eq(tu_bits_differ("init", low.data, want,
							low.bytes), 0);
			free(want);
			tu_snapshot_free(&low);
		}
		tu_snapshot_free(&f32);
	}
}
END_TEST

static Suite *rows_suite(void)
{
	Suite *s = suite_create("rows");
	TCase *tc = tcase_create("read and write");
	TCase *ti = tcase_create("initial values");
	TCase *reg = tcase_create("regressions");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, all_dtype_combinations_small);
	tcase_add_test(tc, dtype_combinations_large_via_f32);
	tcase_add_test(tc, negative_zero_kept_in_small_blocks);
	tcase_add_test(tc, bf16_subnormals_in_small_blocks);
	tcase_add_test(tc, write_f32_into_bf16_rounds_to_nearest_even);
	tcase_add_test(tc, write_f32_into_f16_rounds_to_nearest_even);
	tcase_add_test(tc, read_in_storage_dtype_is_bit_exact);
	tcase_add_test(tc, read_f16_from_f32_table);
	tcase_add_test(tc, repeated_id_keeps_last_row);
	tcase_add_test(tc, large_write_in_any_order);
	tcase_add_test(tc, write_keeps_optimizer_state);
	tcase_add_test(tc, write_reset_state_restores_initial_state);
	suite_add_tcase(s, tc);
	tcase_set_timeout(ti, 60);
	tcase_add_test(ti, init_same_attrs_same_bytes);
	tcase_add_test(ti, init_seed_and_table_id_matter);
	tcase_add_test(ti, init_explicit_id_equals_default_ordinal);
	tcase_add_test(ti, init_independent_of_thread_count);
	tcase_add_test(ti, init_uniform_within_range);
	tcase_add_test(ti, init_normal_statistics);
	tcase_add_test(ti, init_zeros_and_constant);
	tcase_add_test(ti, init_low_precision_is_rounded_f32);
	suite_add_tcase(s, ti);
	tcase_add_test(reg, dtype_combinations_large_f16_bf16);
	tcase_add_test(reg, negative_zero_kept_in_large_blocks);
	tcase_add_test(reg, bf16_subnormals_in_large_blocks);
	suite_add_tcase(s, reg);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(rows_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
