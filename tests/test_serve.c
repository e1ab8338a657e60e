/*
 * test_serve.c - read_only tables and hot reload: training calls are
 * refused and change nothing, lookups equal a plain loop's, rows of an
 * fp32 checkpoint are stored in 16 bits as a plain loop rounds them, a
 * reload
 * swaps in another checkpoint's rows (a bad one changes nothing), and 16
 * threads looking up while reloads swap two checkpoints back and forth
 * each see one checkpoint's rows in every call, never a mix.
 */
#define _GNU_SOURCE
#include <check.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/testutil.h"
#include "tests/check_run.h"

#define ROWS 4096
#define DIM 4
#define THREADS 16

/* A checkpoint in dir of an Adagrad table of ROWS x dim fp32 rows v. */
static void save_values(shemb_ctx *ctx, const char *dir, int dim,
			const float *v)
{
	struct shemb_table_attr a;
	int64_t *ids = tu_malloc(ROWS * sizeof(*ids));
	shemb_table *t;

	shemb_table_attr_init(&a);
	a.rows = ROWS;
	a.dim = dim;
	a.optimizer = SHEMB_OPT_ADAGRAD;
	t = tu_table_attr(ctx, &a);
	for (int64_t r = 0; r < ROWS; r++)
		ids[r] = r;
	ck_assert_int_eq(shemb_table_write_rows(t, ROWS, ids, v, SHEMB_F32,
						0), 0);
	ck_assert_int_eq(shemb_table_save(t, dir, 0), 0);
	shemb_table_destroy(t);
	free(ids);
}

/* ... whose row r holds sign * (r + 1) everywhere. */
static void save_signed(shemb_ctx *ctx, const char *dir, float sign, int dim)
{
	float *v = tu_malloc((size_t)ROWS * (size_t)dim * 4);

	for (int64_t r = 0; r < ROWS; r++)
		for (int c = 0; c < dim; c++)
			v[r * dim + c] = sign * (float)(r + 1);
	save_values(ctx, dir, dim, v);
	free(v);
}

static shemb_table *load_serving(shemb_ctx *ctx, const char *dir)
{
	struct shemb_table_attr a;
	shemb_table *t = NULL;

	shemb_table_attr_init(&a);
	a.rows = ROWS;
	a.dim = DIM;
	a.optimizer = SHEMB_OPT_ADAGRAD;
	a.read_only = 1;
	ck_assert_int_eq(shemb_table_load(ctx, dir, &a, &t), 0);
	return t;
}

/* Every value of t is sign * (row + 1). */
static bool holds(shemb_table *t, float sign)
{
	float *v = tu_read_all_f32(t);
	bool ok = true;

	for (int64_t r = 0; r < ROWS && ok; r++)
		for (int c = 0; c < DIM; c++)
			ok &= v[r * DIM + c] == sign * (float)(r + 1);
	free(v);
	return ok;
}

START_TEST(attributes_are_checked)
{
	shemb_ctx *ctx;
	shemb_table *t = NULL;
	struct shemb_table_attr a;

	ck_assert_int_eq(tu_ctx_create(NULL, 1, &ctx), 0);
	shemb_table_attr_init(&a);
	a.rows = 10;
	a.dim = 2;
	a.read_only = 2;
	ck_assert_int_eq(shemb_table_create(ctx, &a, &t), SHEMB_EINVAL);
	a.read_only = 1;
	a.cache_rows = 4;
	ck_assert_int_eq(shemb_table_create(ctx, &a, &t), SHEMB_EINVAL);
	ck_assert_ptr_nonnull(strstr(shemb_ctx_last_error(ctx), "tier"));
	ck_assert_ptr_null(t);
	shemb_ctx_destroy(ctx);
}
END_TEST

START_TEST(training_calls_are_refused)
{
	shemb_ctx *ctx;
	shemb_table *t;
	struct tu_snapshot before;
	struct tu_rng r;
	struct tu_bags b;
	struct tu_bag_spec spec = { .nbags = 30, .max_len = 4, .rows = ROWS,
				    .weighted = true };
	struct shemb_bags v;
	struct tu_ref ref;
	float *out, *want, *grad;
	char *dir = tu_temp_dir("test_serve");
	int64_t id = 3;

	ck_assert_int_eq(tu_ctx_create(NULL, 2, &ctx), 0);
	save_signed(ctx, dir, 1.0f, DIM);
	t = load_serving(ctx, dir);
	tu_snapshot_take(&before, t);
	tu_rng_seed(&r, 4);
	tu_bags_random(&b, &r, &spec);
	out = tu_malloc(30 * DIM * 4);
	want = tu_malloc(30 * DIM * 4);
	grad = tu_calloc(30 * DIM, 4);
	v = tu_bags_view(&b, t, SHEMB_POOL_MEAN);
	/* planned or not, a lookup works and keeps no plan */
	ck_assert_int_eq(shemb_lookup(ctx, 1, &v, &out, 0), 0);
	tu_ref_init(&ref, t);
	tu_ref_lookup(&ref, &b, SHEMB_POOL_MEAN, want);
	ck_assert_int_eq(tu_bits_differ("lookup", out, want, 30 * DIM * 4),
			 0);
	ck_assert_int_eq(shemb_backward(ctx, 1, &v,
					(const float *const *)&grad),
			 SHEMB_EPERM);
	ck_assert_ptr_nonnull(strstr(shemb_ctx_last_error(ctx),
				     "read_only"));
	ck_assert_int_eq(shemb_table_write_rows(t, 1, &id, want, SHEMB_F32,
						0), SHEMB_EPERM);
	ck_assert_int_eq(shemb_table_set_lr(t, 0.5f), SHEMB_EPERM);
	ck_assert(tu_unchanged_since(&before, t));
	tu_ref_free(&ref);
	tu_snapshot_free(&before);
	tu_bags_free(&b);
	free(out);
	free(want);
	free(grad);
	shemb_table_destroy(t);
	shemb_ctx_destroy(ctx);
	tu_remove_dir(dir);
}
END_TEST

/* One bag of table t holding the one id *id, its offsets in off[2]. */
static struct shemb_bags one_id(shemb_table *t, int64_t *off,
				const int64_t *id)
{
	struct shemb_bags b;

	off[0] = 0;
	off[1] = 1;
	shemb_bags_init(&b);
	b.table = t;
	b.nbags = 1;
	b.offsets = off;
	b.nids = 1;
	b.ids = id;
	return b;
}

/* Row id of t, column 0. */
static float row0(shemb_table *t, int64_t id)
{
	float v[DIM];

	ck_assert_int_eq(shemb_table_read_rows(t, 1, &id, v, SHEMB_F32), 0);
	return v[0];
}

/*
 * A planned lookup of a trainable table beside a serving one keeps the
 * trainable table's plan (only a call of serving tables alone is made as
 * one without): its backward trains that lookup's rows, and an earlier
 * lookup's plan is replaced.  Before, such a call kept no plan at all:
 * the backward failed, or paired with the plan of an earlier lookup.
 */
START_TEST(trainable_tables_keep_plans_beside_serving)
{
	int64_t id0 = 0, id1 = 1, off[2][2];
	float out[2][DIM], grad[DIM];
	float *outs[2] = { out[0], out[1] };
	const float *g = grad;
	struct shemb_table_attr a;
	struct shemb_bags b[2];
	shemb_table *t, *s;
	shemb_ctx *ctx;
	char *dir = tu_temp_dir("test_serve");

	for (int c = 0; c < DIM; c++)
		grad[c] = 1;
	ck_assert_int_eq(tu_ctx_create(NULL, 2, &ctx), 0);
	save_signed(ctx, dir, 1.0f, DIM);
	s = load_serving(ctx, dir);
	shemb_table_attr_init(&a);
	a.rows = ROWS;
	a.dim = DIM;
	a.init = SHEMB_INIT_ZEROS;
	a.lr = 1;
	t = tu_table_attr(ctx, &a);
	b[0] = one_id(t, off[0], &id1);
	b[1] = one_id(s, off[1], &id1);
	ck_assert_int_eq(shemb_lookup(ctx, 2, b, outs, 0), 0);
	ck_assert_int_eq(shemb_backward(ctx, 1, b, &g), 0);
	ck_assert(row0(t, 1) == -1);
	/* the mixed lookup's plan replaces the one before it */
	b[0] = one_id(t, off[0], &id0);
	ck_assert_int_eq(shemb_lookup(ctx, 1, b, outs, 0), 0);
	b[0] = one_id(t, off[0], &id1);
	ck_assert_int_eq(shemb_lookup(ctx, 2, b, outs, 0), 0);
	ck_assert_int_eq(shemb_backward(ctx, 1, b, &g), 0);
	b[0] = one_id(t, off[0], &id0);
	ck_assert_int_eq(shemb_backward(ctx, 1, b, &g), SHEMB_ESTATE);
	ck_assert(row0(t, 0) == 0);
	ck_assert(row0(t, 1) == -2);
	ck_assert(row0(s, 1) == 2); /* save_signed: row r holds r + 1 */
	shemb_table_destroy(t);
	shemb_table_destroy(s);
	shemb_ctx_destroy(ctx);
	tu_remove_dir(dir);
}
END_TEST

/* A context of one rank whose host budget is budget bytes, with the
 * serving table of dir loaded in *t (NULL where it does not fit). */
static shemb_ctx *budget_ctx(uint64_t budget, const char *dir, shemb_table **t)
{
	struct shemb_ctx_attr ca;
	struct shemb_table_attr a;
	shemb_ctx *ctx;

	shemb_ctx_attr_init(&ca);
	ca.nthreads = 1;
	ca.host_mem_bytes = budget;
	ck_assert_int_eq(shemb_ctx_create(&ca, &ctx), 0);
	shemb_table_attr_init(&a);
	a.rows = ROWS;
	a.dim = DIM;
	a.optimizer = SHEMB_OPT_ADAGRAD;
	a.read_only = 1;
	*t = NULL;
	if (shemb_table_load(ctx, dir, &a, t))
		ck_assert_int_eq(shemb_ctx_last_error(ctx)[0] != 0, 1);
	return ctx;
}

/* The second copy of a reload counts in the context's budget: with the
 * least budget (in pages) that the table loads in, its reload fails and
 * changes nothing; with twice that, it succeeds. */
START_TEST(reload_needs_room_for_two_copies)
{
	char *da = tu_temp_dir("test_serve"), *db = tu_temp_dir("test_serve");
	uint64_t lo = 0, hi = (uint64_t)1 << 30, page = 4096;
	shemb_ctx *ctx;
	shemb_table *t;

	ck_assert_int_eq(tu_ctx_create(NULL, 1, &ctx), 0);
	save_signed(ctx, da, 1.0f, DIM);
	save_signed(ctx, db, -1.0f, DIM);
	shemb_ctx_destroy(ctx);
	while (hi - lo > page) { /* the least budget it loads in */
		uint64_t mid = lo + (hi - lo) / 2 / page * page;

		ctx = budget_ctx(mid, da, &t);
		if (t)
			hi = mid;
		else
			lo = mid;
		shemb_table_destroy(t);
		shemb_ctx_destroy(ctx);
	}
	ctx = budget_ctx(hi, da, &t);
	ck_assert_ptr_nonnull(t);
	ck_assert_int_eq(shemb_table_reload(t, db), SHEMB_ENOMEM);
	ck_assert_ptr_nonnull(strstr(shemb_ctx_last_error(ctx),
				     "second copy"));
	ck_assert(holds(t, 1.0f));
	shemb_table_destroy(t);
	shemb_ctx_destroy(ctx);
	ctx = budget_ctx(2 * hi, da, &t);
	ck_assert_ptr_nonnull(t);
	ck_assert_int_eq(shemb_table_reload(t, db), 0);
	ck_assert(holds(t, -1.0f));
	shemb_table_destroy(t);
	shemb_ctx_destroy(ctx);
	tu_remove_dir(da);
	tu_remove_dir(db);
}
END_TEST

START_TEST(reload_swaps_rows_or_changes_nothing)
{
	shemb_ctx *ctx;
	shemb_table *t, *w;
	struct shemb_table_attr a;
	char *da = tu_temp_dir("test_serve"), *db = tu_temp_dir("test_serve");
	char *dc = tu_temp_dir("test_serve");
	char path[300];
	FILE *f;

	ck_assert_int_eq(tu_ctx_create(NULL, 1, &ctx), 0);
	save_signed(ctx, da, 1.0f, DIM);
	save_signed(ctx, db, -1.0f, DIM);
	t = load_serving(ctx, da);
	ck_assert(holds(t, 1.0f));
	/* saved, reloaded, saved again incrementally: every row changed,
	 * and the checkpoint holds the reloaded ones */
	ck_assert_int_eq(shemb_table_save(t, dc, 0), 0);
	ck_assert_int_eq(shemb_table_reload(t, db), 0);
	ck_assert(holds(t, -1.0f));
	ck_assert_int_eq(shemb_table_save(t, dc, SHEMB_SAVE_INCREMENTAL), 0);
	w = load_serving(ctx, dc);
	ck_assert(holds(w, -1.0f));
	shemb_table_destroy(w);
	save_signed(ctx, dc, 1.0f, DIM + 1); /* another shape */
	ck_assert_int_eq(shemb_table_reload(t, dc), SHEMB_EINVAL);
	ck_assert(holds(t, -1.0f));
	/* a corrupt checkpoint: refused, the rows stay */
	snprintf(path, sizeof(path), "%s/MANIFEST", da);
	f = fopen(path, "r+b");
	fseek(f, 30, SEEK_SET);
	fputc('x', f);
	fclose(f);
	ck_assert_int_eq(shemb_table_reload(t, da), SHEMB_ECORRUPT);
	ck_assert(holds(t, -1.0f));
	ck_assert_int_eq(shemb_table_reload(t, NULL), SHEMB_EINVAL);
	ck_assert_int_eq(shemb_table_reload(NULL, db), SHEMB_EINVAL);
	/* only a serving table reloads */
	shemb_table_attr_init(&a);
	a.rows = ROWS;
	a.dim = DIM;
	a.optimizer = SHEMB_OPT_ADAGRAD;
	w = tu_table_attr(ctx, &a);
	ck_assert_int_eq(shemb_table_reload(w, db), SHEMB_EPERM);
	shemb_table_destroy(w);
	shemb_table_destroy(t);
	shemb_ctx_destroy(ctx);
	tu_remove_dir(da);
	tu_remove_dir(db);
	tu_remove_dir(dc);
}
END_TEST

/* A serving table may store the rows of an fp32 checkpoint in 16 bits:
 * each value rounded as a plain loop rounds it; a training table may
 * not. */
START_TEST(rows_stored_narrower)
{
	int dtypes[] = { SHEMB_BF16, SHEMB_F16 };
	shemb_ctx *ctx;
	shemb_table *u = NULL;
	struct shemb_table_attr a;
	struct tu_rng r;
	float *v = tu_malloc(ROWS * DIM * 4), *want = tu_malloc(ROWS * DIM * 4);
	uint16_t *half = tu_malloc(ROWS * DIM * 2);
	float *got;
	char *dir = tu_temp_dir("test_serve");

	ck_assert_int_eq(tu_ctx_create(NULL, 1, &ctx), 0);
	tu_rng_seed(&r, 8);
	tu_rng_fill(&r, v, ROWS * DIM, -3, 3);
	save_values(ctx, dir, DIM, v);
	shemb_table_attr_init(&a);
	a.rows = ROWS;
	a.dim = DIM;
	a.optimizer = SHEMB_OPT_ADAGRAD;
	a.dtype = SHEMB_BF16;
	ck_assert_int_eq(shemb_table_load(ctx, dir, &a, &u), SHEMB_EINVAL);
	a.read_only = 1;
	for (int k = 0; k < 2; k++) {
		a.dtype = dtypes[k];
		ck_assert_int_eq(shemb_table_load(ctx, dir, &a, &u), 0);
		tu_store(dtypes[k], half, v, ROWS * DIM);
		tu_load(dtypes[k], half, want, ROWS * DIM);
		got = tu_read_all_f32(u);
		ck_assert_int_eq(tu_bits_differ("rows", got, want,
						ROWS * DIM * 4), 0);
		/* and a reload of the fp32 checkpoint rounds the same way */
		ck_assert_int_eq(shemb_table_reload(u, dir), 0);
		free(got);
		got = tu_read_all_f32(u);
		ck_assert_int_eq(tu_bits_differ("rows", got, want,
						ROWS * DIM * 4), 0);
		free(got);
		shemb_table_destroy(u);
	}
	free(v);
	free(want);
	free(half);
	shemb_ctx_destroy(ctx);
	tu_remove_dir(dir);
}
END_TEST

/* The documented quantisation of one row, done here: codes, then
 * code * scale + bias. */
static void int8_row(const float *x, float *out, float *step)
{
	float lo = x[0], hi = x[0], scale;

	for (int c = 1; c < DIM; c++) {
		lo = x[c] < lo ? x[c] : lo;
		hi = x[c] > hi ? x[c] : hi;
	}
	scale = (hi - lo) / 255.0f;
	for (int c = 0; c < DIM; c++) {
		float k = scale > 0 ? nearbyintf((x[c] - lo) / scale) : 0;

		k = k < 0 ? 0 : k > 255 ? 255 : k;
		out[c] = k * scale + lo;
	}
	*step = scale;
}

/* A serving table of int8 rows from an fp32 checkpoint: reads and
 * lookups give the rows as quantised here, each value within half a
 * step of the saved one; such a table is read_only, and not saved. */
START_TEST(int8_rows)
{
	shemb_ctx *ctx;
	shemb_table *u = NULL;
	struct shemb_table_attr a;
	struct tu_rng r;
	struct tu_bags b;
	struct tu_bag_spec spec = { .nbags = 40, .max_len = 6, .rows = ROWS };
	struct shemb_bags v;
	float *x = tu_malloc(ROWS * DIM * 4), *want = tu_malloc(ROWS * DIM * 4);
	float *got, out[40 * DIM], sum[40 * DIM], step;
	char *dir = tu_temp_dir("test_serve");

	ck_assert_int_eq(tu_ctx_create(NULL, 2, &ctx), 0);
	tu_rng_seed(&r, 12);
	tu_rng_fill(&r, x, ROWS * DIM, -2, 5);
	save_values(ctx, dir, DIM, x);
	shemb_table_attr_init(&a);
	a.rows = ROWS;
	a.dim = DIM;
	a.optimizer = SHEMB_OPT_ADAGRAD;
	a.dtype = SHEMB_INT8;
	ck_assert_int_eq(shemb_table_load(ctx, dir, &a, &u), SHEMB_EINVAL);
	a.read_only = 1;
	ck_assert_int_eq(shemb_table_load(ctx, dir, &a, &u), 0);
	for (int64_t i = 0; i < ROWS; i++) {
		int8_row(x + i * DIM, want + i * DIM, &step);
		for (int c = 0; c < DIM; c++)
			ck_assert(fabsf(want[i * DIM + c] - x[i * DIM + c]) <=
				  step * 0.5001f + 1e-6f);
	}
	got = tu_read_all_f32(u);
	ck_assert_int_eq(tu_bits_differ("int8 rows", got, want,
					ROWS * DIM * 4), 0);
	tu_rng_seed(&r, 13);
	tu_bags_random(&b, &r, &spec);
	v = tu_bags_view(&b, u, SHEMB_POOL_SUM);
	float *o = out;
	ck_assert_int_eq(shemb_lookup(ctx, 1, &v, &o, 0), 0);
	for (int64_t k = 0; k < b.nbags; k++)
		for (int c = 0; c < DIM; c++) {
			sum[k * DIM + c] = 0;
			for (int64_t p = b.offsets[k]; p < b.offsets[k + 1];
			     p++)
				sum[k * DIM + c] += want[b.ids[p] * DIM + c];
		}
	ck_assert_int_eq(tu_bits_differ("int8 lookup", out, sum,
					sizeof(out)), 0);
	ck_assert_int_eq(shemb_table_save(u, dir, 0), SHEMB_ENOTSUP);
	tu_bags_free(&b);
	free(got);
	free(x);
	free(want);
	shemb_table_destroy(u);
	shemb_ctx_destroy(ctx);
	tu_remove_dir(dir);
}
END_TEST

/* A checkpoint in dir of an SGD table (lr 1) of ROWS x DIM rows v, after
 * one step that sends column 1 of row `inf_row` past the largest float. */
static void save_with_inf_row(shemb_ctx *ctx, const char *dir,
			      const float *v, int64_t inf_row)
{
	struct shemb_table_attr a;
	int64_t *ids = tu_malloc(ROWS * sizeof(*ids)), offsets[2] = { 0, 1 };
	float out[DIM], grad[DIM] = { 0, -FLT_MAX, 0, 0 }, *o = out;
	const float *g = grad;
	struct shemb_bags b;
	shemb_table *t;

	shemb_table_attr_init(&a);
	a.rows = ROWS;
	a.dim = DIM;
	a.lr = 1;
	t = tu_table_attr(ctx, &a);
	for (int64_t r = 0; r < ROWS; r++)
		ids[r] = r;
	ck_assert_int_eq(shemb_table_write_rows(t, ROWS, ids, v, SHEMB_F32,
						0), 0);
	shemb_bags_init(&b);
	b.table = t;
	b.nbags = 1;
	b.nids = 1;
	b.offsets = offsets;
	b.ids = &inf_row;
	ck_assert_int_eq(shemb_lookup(ctx, 1, &b, &o, 0), 0);
	ck_assert_int_eq(shemb_backward(ctx, 1, &b, &g), 0);
	ck_assert_int_eq(shemb_table_read_rows(t, 1, &inf_row, out,
					       SHEMB_F32), 0);
	ck_assert(isinf(out[1]));
	ck_assert_int_eq(shemb_table_save(t, dir, 0), 0);
	shemb_table_destroy(t);
	free(ids);
}

/* Rows whose range exceeds the largest float (up to 2 * FLT_MAX) read
 * back finite, each value within half a step of the saved one, the step
 * being the row's range / 255 taken exactly (in double); a row holding
 * an infinity reads back NaN. */
START_TEST(int8_rows_of_any_finite_range)
{
	static const float wide[5][DIM] = {
		{ -FLT_MAX, FLT_MAX, 0.0f, 1e38f },
		{ -3e38f, -1e38f, 2e38f, 3.3e38f },
		{ 1.0f, -2e38f, 2e38f, -1.0f },
		{ -1.5f, 0.25f, 3.0f, 2.0f },
		{ 1.0f, 3e38f, 2.0f, 3.0f }, /* column 1 becomes inf */
	};
	shemb_ctx *ctx;
	shemb_table *u = NULL;
	struct shemb_table_attr a;
	float *x = tu_malloc(ROWS * DIM * 4), *got;
	char *dir = tu_temp_dir("test_serve");

	ck_assert_int_eq(tu_ctx_create(NULL, 2, &ctx), 0);
	for (int64_t i = 0; i < ROWS; i++)
		memcpy(x + i * DIM, wide[i % 5], sizeof(wide[0]));
	save_with_inf_row(ctx, dir, x, 4);
	shemb_table_attr_init(&a);
	a.rows = ROWS;
	a.dim = DIM;
	a.dtype = SHEMB_INT8;
	a.read_only = 1;
	ck_assert_int_eq(shemb_table_load(ctx, dir, &a, &u), 0);
	got = tu_read_all_f32(u);
	for (int c = 0; c < DIM; c++)
		ck_assert(isnan(got[4 * DIM + c]));
	for (int64_t i = 0; i < ROWS; i++) {
		const float *w = wide[i % 5];
		double lo = w[0], hi = w[0], half;

		if (i == 4)
			continue;
		for (int c = 1; c < DIM; c++) {
			lo = w[c] < lo ? w[c] : lo;
			hi = w[c] > hi ? w[c] : hi;
		}
		half = (hi - lo) / 255 * 0.5001;
		for (int c = 0; c < DIM; c++) {
			float g = got[i * DIM + c];

			ck_assert_msg(isfinite(g) && fabs((double)g - w[c]) <=
					  half, "row %lld value %d: %g for %g",
				      (long long)i, c, g, w[c]);
		}
	}
	free(got);
	free(x);
	shemb_table_destroy(u);
	shemb_ctx_destroy(ctx);
	tu_remove_dir(dir);
}
END_TEST

/* ---- lookups during reloads ---- */

struct reader {
	pthread_t thread;
	shemb_ctx *ctx;
	shemb_table *t;
	uint64_t seed;
	atomic_long calls;
	long seen[2];        /* calls that saw the + and the - rows */
	bool mixed;
};

static atomic_bool stop;

/* One lookup of 64 one-id bags: 1 (+ rows), 0 (- rows), -1 (a mix). */
static int one_lookup(struct reader *rd, struct tu_rng *r)
{
	int64_t offsets[65], ids[64];
	float out[64 * DIM];
	float *o = out;
	struct shemb_bags b;
	int sign = 2;

	shemb_bags_init(&b);
	b.table = rd->t;
	b.nbags = 64;
	b.nids = 64;
	b.offsets = offsets;
	b.ids = ids;
	for (int i = 0; i <= 64; i++)
		offsets[i] = i;
	for (int i = 0; i < 64; i++)
		ids[i] = tu_rng_below(r, ROWS);
	if (shemb_lookup(rd->ctx, 1, &b, &o, SHEMB_LOOKUP_NO_GRAD))
		return -1;
	for (int i = 0; i < 64 * DIM; i++) {
		float mag = (float)(ids[i / DIM] + 1);
		int s = out[i] == mag ? 1 : out[i] == -mag ? 0 : -1;

		if (s < 0 || (sign != 2 && s != sign))
			return -1;
		sign = s;
	}
	return sign;
}

static void *read_loop(void *arg)
{
	struct reader *rd = arg;
	struct tu_rng r;

	tu_rng_seed(&r, rd->seed);
	while (!atomic_load(&stop)) {
		int s = one_lookup(rd, &r);

		if (s < 0)
			rd->mixed = true;
		else
			rd->seen[s]++;
		atomic_fetch_add(&rd->calls, 1);
	}
	return NULL;
}

/* Until every reader has made a whole call since (the one under way
 * may have begun before). */
static void each_reads_again(struct reader *rd)
{
	long was[THREADS];

	for (int i = 0; i < THREADS; i++)
		was[i] = atomic_load(&rd[i].calls);
	for (int i = 0; i < THREADS; i++)
		while (atomic_load(&rd[i].calls) < was[i] + 2)
			usleep(100);
}

START_TEST(lookups_see_one_checkpoint)
{
	shemb_ctx *ctx;
	shemb_table *t;
	struct reader rd[THREADS];
	char *dir[2] = { tu_temp_dir("test_serve"), tu_temp_dir("test_serve") };

	ck_assert_int_eq(tu_ctx_create(NULL, 2, &ctx), 0);
	save_signed(ctx, dir[0], -1.0f, DIM);
	save_signed(ctx, dir[1], 1.0f, DIM);
	t = load_serving(ctx, dir[1]);
	atomic_store(&stop, false);
	memset(rd, 0, sizeof(rd));
	for (int i = 0; i < THREADS; i++) {
		rd[i].ctx = ctx;
		rd[i].t = t;
		rd[i].seed = 100 + (uint64_t)i;
		ck_assert_int_eq(pthread_create(&rd[i].thread, NULL, read_loop,
						&rd[i]), 0);
	}
	for (int k = 0; k < 20; k++) {
		each_reads_again(rd);
		ck_assert_int_eq(shemb_table_reload(t, dir[k % 2]), 0);
	}
	each_reads_again(rd);
	atomic_store(&stop, true);
	for (int i = 0; i < THREADS; i++) {
		pthread_join(rd[i].thread, NULL);
		ck_assert_msg(!rd[i].mixed, "reader %d saw a mix of rows", i);
		ck_assert(rd[i].seen[0] > 0 && rd[i].seen[1] > 0);
	}
	shemb_table_destroy(t);
	shemb_ctx_destroy(ctx);
	tu_remove_dir(dir[0]);
	tu_remove_dir(dir[1]);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("serve");
	TCase *tc = tcase_create("serve");

	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, attributes_are_checked);
	tcase_add_test(tc, training_calls_are_refused);
	tcase_add_test(tc, trainable_tables_keep_plans_beside_serving);
	tcase_add_test(tc, reload_swaps_rows_or_changes_nothing);
	tcase_add_test(tc, reload_needs_room_for_two_copies);
	tcase_add_test(tc, rows_stored_narrower);
	tcase_add_test(tc, int8_rows);
	tcase_add_test(tc, int8_rows_of_any_finite_range);
	tcase_add_test(tc, lookups_see_one_checkpoint);
	suite_add_tcase(s, tc);
	return tu_run_suite(s);
}
