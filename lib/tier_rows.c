/*
 * tier_rows.c - reading and writing rows through the device tier, in
 * passes of at most its slots, so that reads and writes of any number of
 * rows work on a table whose tier is small (each row is independent; the
 * passes keep the order, so a repeated id still ends with its last row).
 */
#include "lib/tier_int.h"

static int64_t pass_rows(const shemb_table *t, int64_t n)
{
	return t->tier && t->tier->nslots < n ? t->tier->nslots : n;
}

static size_t row_bytes(const shemb_table *t, int dtype)
{
	return (size_t)t->store.dim * (dtype == SHEMB_F32 ? 4 : 2);
}

/* Reads into out, or (in given) writes from in, pass by pass. */
static int in_passes(shemb_table *t, int64_t n, const int64_t *rows,
		     void *out, const void *in, int dtype,
		     const float *reset_state)
{
	shemb_ctx *ctx = t->ctx;
	int64_t step = pass_rows(t, n);
	size_t rb = row_bytes(t, dtype);
	int rc = 0;

	for (int64_t i = 0; !rc && i < n; i += step) {
		int64_t m = n - i < step ? n - i : step;
		struct shemb__rows_view v;

		rc = shemb__rows_acquire(t, m, rows + i, false,
					 in ? SHEMB__ROWS_WRITE
					    : SHEMB__ROWS_READ, &v);
		if (!rc && in)
			rc = ctx->mem->write_rows(ctx->be, v.store, m, v.at,
						  (const char *)in +
							  (size_t)i * rb,
						  dtype, reset_state);
		else if (!rc)
			rc = ctx->mem->read_rows(ctx->be, v.store, m, v.at,
						 (char *)out + (size_t)i * rb,
						 dtype);
		shemb__rows_release(t, &v);
	}
	return rc;
}

/* The table's record layout over host memory at base, for n records. */
static struct shemb__store host_records(const shemb_table *t, void *base,
					int64_t n)
{
	struct shemb__store h = t->store;

	h.base = base;
	h.on_device = 0;
	h.rows = n;
	h.bytes = (size_t)n * h.stride;
	return h;
}

int shemb__tier_records(shemb_table *t, int64_t n, const int64_t *rows,
			void *buf, bool write, bool distinct)
{
	shemb_ctx *ctx = t->ctx;
	int64_t step = pass_rows(t, n);
	int rc = 0;

	for (int64_t i = 0; !rc && i < n; i += step) {
		int64_t m = n - i < step ? n - i : step;
		struct shemb__store h = host_records(
			t, (char *)buf + (size_t)i * t->store.stride, m);
		struct shemb__rows_view v;

		rc = shemb__rows_acquire(t, m, rows + i, distinct,
					 write ? SHEMB__ROWS_WRITE
					       : SHEMB__ROWS_READ, &v);
		if (!rc && write)
			rc = ctx->mem->copy_records(ctx->be, v.store, v.at, &h,
						    NULL, m);
		else if (!rc)
			rc = ctx->mem->copy_records(ctx->be, &h, NULL, v.store,
						    v.at, m);
		shemb__rows_release(t, &v);
	}
	return rc;
}

int shemb__tier_read(shemb_table *t, int64_t n, const int64_t *rows,
		     void *out, int dtype)
{
	return in_passes(t, n, rows, out, NULL, dtype, NULL);
}

int shemb__tier_write(shemb_table *t, int64_t n, const int64_t *rows,
		      const void *in, int dtype, const float *reset_state)
{
	return in_passes(t, n, rows, NULL, in, dtype, reset_state);
}
