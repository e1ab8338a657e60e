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

int shemb__tier_read(shemb_table *t, int64_t n, const int64_t *rows,
		     void *out, int dtype)
{
	shemb_ctx *ctx = t->ctx;
	int64_t step = pass_rows(t, n);
	int rc = 0;

	for (int64_t i = 0; !rc && i < n; i += step) {
		int64_t m = n - i < step ? n - i : step;
		struct shemb__rows_view v;

		rc = shemb__rows_acquire(t, m, rows + i, false,
					 SHEMB__ROWS_READ, &v);
		if (!rc)
			rc = ctx->mem->read_rows(ctx->be, v.store, m, v.at,
						 (char *)out + (size_t)i *
						 row_bytes(t, dtype), dtype);
		shemb__rows_release(t, &v);
	}
	return rc;
}

int shemb__tier_write(shemb_table *t, int64_t n, const int64_t *rows,
		      const void *in, int dtype, const float *reset_state)
{
	shemb_ctx *ctx = t->ctx;
	int64_t step = pass_rows(t, n);
	int rc = 0;

	for (int64_t i = 0; !rc && i < n; i += step) {
		int64_t m = n - i < step ? n - i : step;
		struct shemb__rows_view v;

		rc = shemb__rows_acquire(t, m, rows + i, false,
					 SHEMB__ROWS_WRITE, &v);
		if (!rc)
			rc = ctx->mem->write_rows(ctx->be, v.store, m, v.at,
						  (const char *)in + (size_t)i *
						  row_bytes(t, dtype), dtype,
						  reset_state);
		shemb__rows_release(t, &v);
	}
	return rc;
}
