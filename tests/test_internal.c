/*
 * test_internal.c - the library's internal conversion pieces, linked in
 * statically: the scalar fp16 / bf16 conversions against the compiler's
 * _Float16 and an independent bf16 formula, the oneDNN block conversion
 * against the portable one, and every kernel variant's row conversions
 * against the scalar functions.
 */
#include "config.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shemb.h"
#include "cpu/convert.h"
#include "cpu/half.h"
#include "cpu/kernels.h"
#include "lib/radix.h"
#include "tests/testutil.h"

static bool f16_is_nan(uint16_t h)
{
	return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu);
}

static bool bf16_is_nan(uint16_t h)
{
	return (h & 0x7f80u) == 0x7f80u && (h & 0x7fu);
}

/* ---- fp32 inputs for the conversion checks ---- */

struct inputs {
	float *v;
	size_t n;
};

/*
 * Random bit patterns (NaNs, infinities and subnormals among them), a
 * sweep of the whole fp32 range, and for every fp16 and bf16 value the
 * fp32 midpoint to its upper neighbour with the values one ulp around it
 * (the ties, and the edges 65504 / 65520 where fp16 overflows).
 */
static void make_inputs(struct inputs *in, size_t nrandom)
{
	size_t cap = nrandom + (1u << 20) + 6 * 65536 + 16, n = 0;
	struct tu_rng r;

	in->v = tu_malloc(cap * sizeof(float));
	tu_rng_seed(&r, 12345);
	for (size_t i = 0; i < nrandom; i++)
		in->v[n++] = tu_float_of((uint32_t)tu_rng_next(&r));
	for (uint64_t u = 0; u < (1ull << 32); u += 4099)
		in->v[n++] = tu_float_of((uint32_t)u);
	for (uint32_t h = 0; h < 65536; h++) {
		/* fp16: h and h + 1 in the positive range */
		uint16_t lo = (uint16_t)h, hi = (uint16_t)(h + 1);
		uint32_t mid;

		if ((lo & 0x7fffu) < 0x7c00u && (hi & 0x7fffu) < 0x7c00u &&
		    (lo & 0x8000u) == (hi & 0x8000u)) {
			mid = tu_bits_of((tu_f16_to_f32(lo) +
					  tu_f16_to_f32(hi)) / 2.0f);
			in->v[n++] = tu_float_of(mid);
			in->v[n++] = tu_float_of(mid + 1);
			in->v[n++] = tu_float_of(mid - 1);
		}
		/* bf16: the dropped half exactly 0x8000, and one around */
		in->v[n++] = tu_float_of(h << 16 | 0x8000u);
		in->v[n++] = tu_float_of(h << 16 | 0x8001u);
		in->v[n++] = tu_float_of(h << 16 | 0x7fffu);
	}
	in->v[n++] = 65504.0f;
	in->v[n++] = 65519.996f;
	in->v[n++] = 65520.0f;
	in->v[n++] = -65520.0f;
	in->v[n++] = 0x1p-24f;
	in->v[n++] = 0x1p-25f;
	in->v[n++] = -0.0f;
	in->n = n;
}

/* ---- scalar conversions ---- */

/* Non-NaN patterns convert exactly; NaNs stay NaN with their sign. */
START_TEST(f16_to_f32_all_patterns)
{
	int64_t bad = 0;

	for (uint32_t h = 0; h < 65536; h++) {
		float got = shemb__f16_to_f32((uint16_t)h);
		float want = tu_f16_to_f32((uint16_t)h);

		if (f16_is_nan((uint16_t)h))
			bad += !isnan(got) || signbit(got) != signbit(want);
		else
			bad += tu_bits_of(got) != tu_bits_of(want);
	}
	ck_assert_int_eq(bad, 0);
}
END_TEST

/*
 * fp16 NaNs come out quiet, as F16C's vcvtph2ps and the _Float16 cast
 * make them (0x7c01 -> 0x7fc02000), so every variant gives the same bits.
 */
START_TEST(f16_to_f32_nan_bits_as_f16c)
{
	int64_t bad = 0;

	for (uint32_t h = 0; h < 65536; h++) {
		if (!f16_is_nan((uint16_t)h))
			continue;
		bad += tu_bits_of(shemb__f16_to_f32((uint16_t)h)) !=
		       tu_bits_of(tu_f16_to_f32((uint16_t)h));
	}
	ck_assert_int_eq(bad, 0);
}
END_TEST

START_TEST(f32_to_f16_matches_float16_casts)
{
	struct inputs in;
	int64_t bad = 0, nans = 0;

	make_inputs(&in, 3000000);
	for (size_t i = 0; i < in.n; i++) {
		uint16_t got = shemb__f32_to_f16(in.v[i]);
		uint16_t want = tu_f32_to_f16(in.v[i]);

		if (isnan(in.v[i])) {
			nans++;
			bad += !f16_is_nan(got) ||
			       (got & 0x8000u) != (want & 0x8000u);
		} else if (got != want && bad++ < 5) {
			fprintf(stderr, "%08x: %04x, want %04x\n",
				tu_bits_of(in.v[i]), got, want);
		}
	}
	ck_assert_int_gt(nans, 1000);
	ck_assert_int_eq(bad, 0);
	free(in.v);
}
END_TEST

START_TEST(f32_to_bf16_matches_reference)
{
	struct inputs in;
	int64_t bad = 0;

	make_inputs(&in, 3000000);
	for (size_t i = 0; i < in.n; i++) {
		uint16_t got = shemb__f32_to_bf16(in.v[i]);
		uint16_t want = tu_f32_to_bf16(in.v[i]);

		if (isnan(in.v[i]))
			bad += !bf16_is_nan(got) ||
			       (got & 0x8000u) != (want & 0x8000u);
		else if (got != want && bad++ < 5)
			fprintf(stderr, "%08x: %04x, want %04x\n",
				tu_bits_of(in.v[i]), got, want);
	}
	ck_assert_int_eq(bad, 0);
	free(in.v);
}
END_TEST

/* Every non-NaN half value survives the trip through fp32. */
START_TEST(half_round_trips)
{
	for (uint32_t h = 0; h < 65536; h++) {
		if (!f16_is_nan((uint16_t)h))
			ck_assert_uint_eq(shemb__f32_to_f16(shemb__f16_to_f32(
						  (uint16_t)h)),
					  h);
		if (!bf16_is_nan((uint16_t)h))
			ck_assert_uint_eq(shemb__f32_to_bf16(shemb__bf16_to_f32(
						  (uint16_t)h)),
					  h);
	}
}
END_TEST

/* ---- block conversion: oneDNN against the portable loops ---- */

#define BLK_ROWS 37
#define BLK_COLS 129
#define SRC_PAD 5 /* values between rows */
#define DST_PAD 3
#define SENTINEL 0xa5

/* NORMAL: non-zero values that are normal in fp32 (fp16 subnormals are);
 * NEGATIVE_ZERO: -0 only; SUBNORMAL: fp32 (and bf16) subnormals. */
enum value_kind { NORMAL, NEGATIVE_ZERO, SUBNORMAL };

static float value_of_kind(enum value_kind kind, size_t i, struct tu_rng *r)
{
	uint32_t u = (uint32_t)tu_rng_next(r);
	float v = tu_float_of(u);

	if (kind == NEGATIVE_ZERO)
		return -0.0f;
	if (kind == SUBNORMAL) /* sign and mantissa random, exponent 0 */
		return tu_float_of((u & 0x807fffffu) | 0x00010000u);
	if (!isnormal(v))
		v = 1.0f;
	if (i % 3 == 0) /* keep a third within fp16's range */
		v = ldexpf(fmodf(v, 2.0f), -(int)(i % 30)) + 0x1p-30f;
	return v;
}

/* A source block of dtype with random values of the kind, in rows
 * SRC_PAD values apart. */
static void *source_block(int dtype, enum value_kind kind, struct tu_rng *r)
{
	size_t sz = shemb__dtype_size(dtype);
	size_t n = (size_t)BLK_ROWS * (BLK_COLS + SRC_PAD);
	float *f = tu_malloc(n * sizeof(float));
	uint16_t *h;
	void *blk = tu_malloc(n * sz);

	for (size_t i = 0; i < n; i++)
		f[i] = value_of_kind(kind, i, r);
	tu_store(dtype, blk, f, n);
	h = blk;
	/* values that rounded to a zero of fp16 */
	for (size_t i = 0; dtype == SHEMB_F16 && kind == NORMAL && i < n; i++)
		if (!(h[i] & 0x7fffu))
			h[i] = 0x3c00;
	free(f);
	return blk;
}

/* Convert with the generic kernels and with this CPU's best variant into
 * sentinel-filled destinations; returns 1 when both are the generic one
 * (nothing to compare). */
static int convert_both(int sd, int dd, const void *src, void *portable,
			void *best, size_t dst_bytes)
{
	const struct shemb__kernels *g = shemb__kernels_select("generic");
	const struct shemb__kernels *b = shemb__kernels_select(NULL);
	size_t src_stride = (BLK_COLS + SRC_PAD) * shemb__dtype_size(sd);
	size_t dst_stride = (BLK_COLS + DST_PAD) * shemb__dtype_size(dd);
	struct shemb__block s = { (void *)src, sd, src_stride };
	struct shemb__block d1 = { portable, dd, dst_stride };
	struct shemb__block d2 = { best, dd, dst_stride };

	memset(portable, SENTINEL, dst_bytes);
	memset(best, SENTINEL, dst_bytes);
	shemb__convert2d(g, d1, s, BLK_ROWS, BLK_COLS);
	shemb__convert2d(b, d2, s, BLK_ROWS, BLK_COLS);
	return g == b;
}

/* Bytes where the two paths differ, over the whole strided blocks (the
 * padding between rows must be left as it was by both). */
static int64_t compare_paths(int sd, int dd, enum value_kind kind,
			     bool *skipped)
{
	size_t dst_bytes = (size_t)BLK_ROWS * (BLK_COLS + DST_PAD) *
			   shemb__dtype_size(dd);
	unsigned char *p = tu_malloc(dst_bytes), *d = tu_malloc(dst_bytes);
	struct tu_rng r;
	void *src;
	int64_t bad;
	int rc;
	char what[48];

	tu_rng_seed(&r, (uint64_t)(sd * 3 + dd));
	src = source_block(sd, kind, &r);
	rc = convert_both(sd, dd, src, p, d, dst_bytes);
	*skipped = rc == 1;
	snprintf(what, sizeof(what), "%d -> %d", sd, dd);
	bad = *skipped ? 0 : tu_bits_differ(what, d, p, dst_bytes);
	for (size_t i = 0; i < dst_bytes; i++) { /* padding untouched */
		size_t v = i / shemb__dtype_size(dd);

		if (v % (BLK_COLS + DST_PAD) >= BLK_COLS)
			bad += p[i] != SENTINEL || (!*skipped &&
						    d[i] != SENTINEL);
	}
	free(src);
	free(d);
	free(p);
	return bad;
}

/*
 * Compare the paths for each pair of different dtypes (shemb__convert2d()
 * copies equal dtypes itself): those between fp16 and bf16, or the others.
 * fp32 subnormals are zeros in fp16: that kind leaves fp16 out.
 */
static int64_t compare_pairs(enum value_kind kind, bool half_to_half)
{
	static const int dt[3] = { SHEMB_F32, SHEMB_F16, SHEMB_BF16 };
	int64_t bad = 0;
	bool skipped = false;

	for (int s = 0; s < 3; s++)
		for (int d = 0; d < 3; d++) {
			bool hh = dt[s] != SHEMB_F32 && dt[d] != SHEMB_F32;

			if (s == d || hh != half_to_half)
				continue;
			if (kind == SUBNORMAL &&
			    (dt[s] == SHEMB_F16 || dt[d] == SHEMB_F16))
				continue;
			bad += compare_paths(dt[s], dt[d], kind, &skipped);
		}
	if (skipped)
		printf("skipped: this CPU has only the generic kernels\n");
	return bad;
}

START_TEST(convert2d_variants_match)
{
	ck_assert_int_eq(compare_pairs(NORMAL, false), 0);
}
END_TEST

/* -0 stays -0 between fp32 and fp16, both ways, on every path. */
START_TEST(convert2d_keeps_negative_zero)
{
	ck_assert_int_eq(compare_pairs(NEGATIVE_ZERO, false), 0);
}
END_TEST

START_TEST(convert2d_f16_bf16)
{
	ck_assert_int_eq(compare_pairs(NORMAL, true), 0);
}
END_TEST

/* fp32 subnormals round to bf16 subnormals (0x00400000 -> 0x0040), never
 * flushed to zero, on every path. */
START_TEST(convert2d_keeps_subnormals)
{
	ck_assert_int_eq(compare_pairs(SUBNORMAL, false), 0);
}
END_TEST

/* ---- kernel variants ---- */

START_TEST(kernels_select_names)
{
	const struct shemb__kernels *best = shemb__kernels_select(NULL);

	ck_assert_ptr_nonnull(best);
	ck_assert_ptr_eq(shemb__kernels_select(""), best);
	ck_assert_ptr_eq(shemb__kernels_select(best->isa), best);
	ck_assert_ptr_nonnull(shemb__kernels_select("generic"));
	ck_assert_str_eq(shemb__kernels_select("generic")->isa, "generic");
	ck_assert_ptr_null(shemb__kernels_select("sse9"));
}
END_TEST

/* An odd count, so that vector loops leave a scalar tail. */
#define ROW_VALUES 100003

static const struct shemb__kernels *variant(int i)
{
	const struct shemb__kernels *k = shemb__kernels_select(tu_isas[i]);

	if (!k)
		printf("skipped: no %s kernels here\n", tu_isas[i]);
	return k;
}

START_TEST(variant_store_f32_matches_scalar)
{
	const struct shemb__kernels *k = variant(_i);
	float *v = tu_malloc(ROW_VALUES * sizeof(float));
	uint16_t *got = tu_malloc(ROW_VALUES * sizeof(uint16_t));
	float *got32 = tu_malloc(ROW_VALUES * sizeof(float));
	struct tu_rng r;

	if (!k)
		goto out;
	tu_rng_seed(&r, 77);
	for (int i = 0; i < ROW_VALUES; i++) /* every kind, NaNs too */
		v[i] = tu_float_of((uint32_t)tu_rng_next(&r));
	for (int i = 0; i < ROW_VALUES; i += 7)
		v[i] = tu_rng_float(&r, -70000.0f, 70000.0f);
	k->store_f32(SHEMB_F16, got, v, ROW_VALUES);
	for (int i = 0; i < ROW_VALUES; i++)
		ck_assert_uint_eq(got[i], shemb__f32_to_f16(v[i]));
	k->store_f32(SHEMB_BF16, got, v, ROW_VALUES);
	for (int i = 0; i < ROW_VALUES; i++)
		ck_assert_uint_eq(got[i], shemb__f32_to_bf16(v[i]));
	k->store_f32(SHEMB_F32, got32, v, ROW_VALUES);
	ck_assert(!memcmp(got32, v, ROW_VALUES * sizeof(float)));
out:
	free(got32);
	free(got);
	free(v);
}
END_TEST

/* Loads of every fp16 and bf16 pattern but the NaNs (see below). */
static void check_loads(const struct shemb__kernels *k, bool nans)
{
	uint16_t *h = tu_malloc(65536 * sizeof(uint16_t));
	float *got = tu_malloc(65536 * sizeof(float));
	int64_t bad = 0;

	for (uint32_t i = 0; i < 65536; i++)
		h[i] = (uint16_t)i;
	k->load_f32(SHEMB_F16, h, got, 65536);
	for (uint32_t i = 0; i < 65536; i++)
		if (f16_is_nan(h[i]) == nans)
			bad += tu_bits_of(got[i]) !=
			       tu_bits_of(shemb__f16_to_f32(h[i]));
	k->load_f32(SHEMB_BF16, h, got, 65536);
	for (uint32_t i = 0; i < 65536; i++)
		if (bf16_is_nan(h[i]) == nans)
			bad += tu_bits_of(got[i]) !=
			       tu_bits_of(shemb__bf16_to_f32(h[i]));
	ck_assert_int_eq(bad, 0);
	free(got);
	free(h);
}

START_TEST(variant_load_f32_matches_scalar)
{
	const struct shemb__kernels *k = variant(_i);

	if (k)
		check_loads(k, false);
}
END_TEST

/*
 * Signalling fp16 NaNs are quieted alike by the vector loads and by the
 * scalar code of their tails.
 */
START_TEST(variant_load_f32_nans_match_scalar)
{
	const struct shemb__kernels *k = variant(_i);

	if (k)
		check_loads(k, true);
}
END_TEST

/* ---- the radix sort of lib/radix.c ---- */

struct keyed {
	uint64_t digits; /* the bits sorted on */
	int64_t at;      /* the key's first place */
};

static int by_digits_then_place(const void *a, const void *b)
{
	const struct keyed *x = a, *y = b;

	if (x->digits != y->digits)
		return x->digits < y->digits ? -1 : 1;
	return (x->at > y->at) - (x->at < y->at);
}

static uint64_t next_rand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Keys with bits inside and outside [lo, hi), few distinct digits (many
 * ties) or many, against a stable reference sort in the test. */
START_TEST(radix_sort_is_stable_on_its_bits)
{
	static const int ranges[][2] = { { 0, 64 }, { 0, 5 }, { 7, 19 },
					 { 20, 53 }, { 40, 41 }, { 3, 3 } };
	static const int64_t sizes[] = { 0, 1, 2, 3, 100, 5000, 70000 };
	uint64_t seed = 88172645463325252ull;

	for (size_t r = 0; r < sizeof(ranges) / sizeof(ranges[0]); r++) {
		int lo = ranges[r][0], hi = ranges[r][1];
		uint64_t mask = hi - lo >= 64 ? ~UINT64_C(0)
			       : ((UINT64_C(1) << (hi - lo)) - 1) << lo;

		for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
			int64_t n = sizes[z];
			uint64_t *keys = malloc((size_t)(n + 1) * 8), *orig;
			struct keyed *ref = malloc((size_t)(n + 1) *
						   sizeof(*ref));

			orig = malloc((size_t)(n + 1) * 8);
			ck_assert(keys && ref && orig);
			for (int64_t i = 0; i < n; i++) {
				uint64_t v = next_rand(&seed);

				if (z % 2) /* eight digits at most: ties */
					v = (v & ~mask) |
					    (((v >> lo) & 7) << lo & mask);
				keys[i] = orig[i] = v;
				ref[i] = (struct keyed){ v & mask, i };
			}
			qsort(ref, (size_t)n, sizeof(*ref),
			      by_digits_then_place);
			ck_assert_int_eq(shemb__radix_sort(&keys, n, lo, hi),
					 0);
			for (int64_t i = 0; i < n; i++)
				ck_assert_msg(keys[i] == orig[ref[i].at],
					      "bits [%d, %d), %lld keys: "
					      "place %lld differs", lo, hi,
					      (long long)n, (long long)i);
			free(keys);
			free(ref);
			free(orig);
		}
	}
}
END_TEST

static Suite *internal_suite(void)
{
	Suite *s = suite_create("internal");
	TCase *tc = tcase_create("scalar");
	TCase *tb = tcase_create("blocks");
	TCase *tk = tcase_create("kernels");
	TCase *reg = tcase_create("regressions");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, f16_to_f32_all_patterns);
	tcase_add_test(tc, f32_to_f16_matches_float16_casts);
	tcase_add_test(tc, f32_to_bf16_matches_reference);
	tcase_add_test(tc, half_round_trips);
	suite_add_tcase(s, tc);
	tcase_add_test(tb, convert2d_variants_match);
	suite_add_tcase(s, tb);
	tcase_add_test(tk, kernels_select_names);
	tcase_add_test(tk, radix_sort_is_stable_on_its_bits);
	tcase_add_loop_test(tk, variant_store_f32_matches_scalar, 0, 3);
	tcase_add_loop_test(tk, variant_load_f32_matches_scalar, 0, 3);
	suite_add_tcase(s, tk);
	tcase_add_test(reg, f16_to_f32_nan_bits_as_f16c);
	tcase_add_loop_test(reg, variant_load_f32_nans_match_scalar, 0, 3);
	tcase_add_test(reg, convert2d_keeps_negative_zero);
	tcase_add_test(reg, convert2d_keeps_subnormals);
	tcase_add_test(reg, convert2d_f16_bf16);
	suite_add_tcase(s, reg);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(internal_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
