/*
 * rows.c - read and overwrite rows by id, for inspection, import and tests.
 */
#include "lib/internal.h"
#include "lib/ckpt_io.h"

#include <stdlib.h>

#include "cpu/half.h"
#include "lib/dist.h"
#include "lib/step.h"
#include "lib/stepq.h"
#include "lib/serve.h"

static int check_dtype(const shemb_table *t, int dtype)
{
	if (dtype != SHEMB_F32 && dtype != SHEMB_F16 && dtype != SHEMB_BF16)
		return shemb__fail(t->ctx, SHEMB_EINVAL,
				   "table '%s': dtype %d is not SHEMB_F32, F16 "
				   "or BF16", t->name, dtype);
	return 0;
}

static int check_io(const shemb_table *t, int64_t n, const int64_t *ids,
		    const void *buf, int dtype, const char *where)
{
	int rc;

	if (n < 0 || (n > 0 && (!ids || !buf)))
		return shemb__fail(t->ctx, SHEMB_EINVAL,
				   "%s (table '%s'): n is %lld with ids or "
				   "rows NULL or n negative", where, t->name,
				   (long long)n);
	rc = check_dtype(t, dtype);
	if (!rc)
		rc = shemb__check_ids(t->ctx, t, n, ids, where);
	return rc;
}

static int f32_finite(float v)
{
	return (shemb__f32_bits(v) & 0x7f800000u) != 0x7f800000u;
}

/* Finite as given, and still finite once rounded to the storage dtype:
 * 1e6 is a fine fp32 but no fp16. */
static int storable(const void *in, int dtype, int64_t k, int storage)
{
	float v;

	if (dtype == SHEMB_F16)
		v = shemb__f16_to_f32(((const uint16_t *)in)[k]);
	else if (dtype == SHEMB_BF16)
		v = shemb__bf16_to_f32(((const uint16_t *)in)[k]);
	else
		v = ((const float *)in)[k];
	if (!f32_finite(v))
		return 0;
	if (storage == SHEMB_F16)
		return f32_finite(shemb__f16_to_f32(shemb__f32_to_f16(v)));
	if (storage == SHEMB_BF16)
		return f32_finite(shemb__bf16_to_f32(shemb__f32_to_bf16(v)));
	return 1;
}

static int64_t first_unstorable(const void *in, int dtype, int64_t n,
				int storage)
{
	for (int64_t k = 0; k < n; k++)
		if (!storable(in, dtype, k, storage))
			return k;
	return -1;
}

static void f32_to(int dtype, const float *in, void *out, int64_t n)
{
	uint16_t *o = out;

	for (int64_t k = 0; k < n; k++)
		o[k] = dtype == SHEMB_F16 ? shemb__f32_to_f16(in[k])
					  : shemb__f32_to_bf16(in[k]);
}

/*
 * Across ranks, a read is a collective lookup of one POOL_NONE set: the
 * rows come from their owners in the storage dtype and are exact in fp32,
 * so converting them here rounds as a local read would.
 */
static int read_dist(shemb_table *t, int64_t n, const int64_t *ids,
		     void *out, int dtype, int status)
{
	struct shemb_bags b;
	struct shemb__step st = { .ctx = t->ctx };
	int64_t *offsets = NULL;
	float *rows = NULL;
	int rc = status;

	shemb_bags_init(&b);
	if (!rc) {
		offsets = malloc((size_t)(n + 1) * sizeof(int64_t));
		rows = dtype == SHEMB_F32 || n == 0
			       ? out
			       : malloc((size_t)(n * t->attr.dim + 1) *
					sizeof(float));
		if (!offsets || (n > 0 && !rows))
			rc = shemb__fail(t->ctx, SHEMB_ENOMEM, "no memory");
	}
	for (int64_t k = 0; !rc && k <= n; k++)
		offsets[k] = k;
	b.table = t;
	b.pooling = SHEMB_POOL_NONE;
	b.nbags = rc ? 0 : n;
	b.offsets = offsets;
	b.nids = rc ? 0 : n;
	b.ids = ids;
	if (!rc)
		rc = shemb__step_begin(&st, t->ctx, 1, &b);
	rc = shemb__lookup_for_read(&st, &rows, rc);
	shemb__step_end(&st);
	if (!rc && dtype != SHEMB_F32 && n > 0)
		f32_to(dtype, rows, out, n * t->attr.dim);
	if (rows != out)
		free(rows);
	free(offsets);
	return rc;
}

SHEMB_API int shemb_table_read_rows(shemb_table *t, int64_t n,
				    const int64_t *ids, void *out, int dtype)
{
	shemb_ctx *ctx;
	int rc;

	if (!t)
		return shemb__fail(NULL, SHEMB_EINVAL, "table is NULL");
	ctx = t->ctx;
	rc = shemb__stepq_drain(ctx);
	if (rc)
		return rc;
	rc = check_io(t, n, ids, out, dtype, "read_rows");
	if (shemb__distributed(ctx))
		return read_dist(t, n, ids, out, dtype, rc);
	if (rc || n == 0)
		return rc;
	pthread_rwlock_rdlock(&t->rows_lock);
	rc = shemb__tier_read(t, n, ids, out, dtype);
	pthread_rwlock_unlock(&t->rows_lock);
	if (rc && rc != SHEMB_EIO)
		return shemb__fail(ctx, rc, "read_rows (table '%s') failed: "
				   "%s", t->name, shemb_strerror(rc));
	return rc;
}

static float *initial_state(const shemb_table *t)
{
	float *st = malloc(((size_t)t->store.nstate + 1) * sizeof(float));
	float v = t->attr.optimizer == SHEMB_OPT_ADAM
			  ? 0.0f
			  : t->attr.initial_accumulator;

	for (int i = 0; st && i < t->store.nstate; i++)
		st[i] = v;
	return st;
}

static int check_write(shemb_table *t, int64_t n, const int64_t *ids,
		       const void *in, int dtype, unsigned flags)
{
	int64_t k;
	int rc;

	if (flags & ~SHEMB_WRITE_RESET_STATE)
		return shemb__fail(t->ctx, SHEMB_EINVAL,
				   "write_rows: unknown flags 0x%x", flags);
	if (shemb__read_only(t))
		return shemb__fail(t->ctx, SHEMB_EPERM, "write_rows: table "
				   "'%s' is read_only", t->name);
	rc = check_io(t, n, ids, in, dtype, "write_rows");
	if (rc || n == 0)
		return rc;
	k = first_unstorable(in, dtype, n * t->attr.dim, t->attr.dtype);
	if (k >= 0)
		return shemb__fail(t->ctx, SHEMB_EINVAL,
				   "write_rows (table '%s') row %lld column "
				   "%d: value is not finite, or overflows the "
				   "table's storage dtype", t->name,
				   (long long)(k / t->attr.dim),
				   (int)(k % t->attr.dim));
	return 0;
}

SHEMB_API int shemb_table_write_rows(shemb_table *t, int64_t n,
				     const int64_t *ids, const void *in,
				     int dtype, unsigned flags)
{
	float *reset = NULL;
	shemb_ctx *ctx;
	int rc;

	if (!t)
		return shemb__fail(NULL, SHEMB_EINVAL, "table is NULL");
	ctx = t->ctx;
	rc = shemb__stepq_drain(ctx);
	if (rc)
		return rc;
	rc = check_write(t, n, ids, in, dtype, flags);
	if (!rc && (flags & SHEMB_WRITE_RESET_STATE)) {
		reset = initial_state(t);
		if (!reset)
			rc = shemb__fail(ctx, SHEMB_ENOMEM, "no memory");
	}
	if (shemb__distributed(ctx)) {
		rc = shemb__dist_write(t, rc ? 0 : n, ids, in, dtype, reset,
				       flags, rc);
		free(reset);
		return rc;
	}
	if (rc || n == 0) {
		free(reset);
		return rc;
	}
	pthread_rwlock_wrlock(&t->rows_lock);
	rc = shemb__tier_write(t, n, ids, in, dtype, reset);
	shemb__ckpt_touch(t, n, ids); /* one rank: ids are local rows */
	pthread_rwlock_unlock(&t->rows_lock);
	free(reset);
	if (rc && rc != SHEMB_EIO)
		return shemb__fail(ctx, rc, "write_rows (table '%s') failed: "
				   "%s", t->name, shemb_strerror(rc));
	return rc;
}
