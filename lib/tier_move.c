/*
 * tier_move.c - records between the device tier and the tier below it:
 * the table's host rows, or its cold file through a staging buffer.
 */
#include "lib/tier_int.h"

#include <string.h>

/* A scratch store of n records laid out as the table's. */
static int staging(shemb_table *t, int64_t n, struct shemb__store *s)
{
	shemb_ctx *ctx = t->ctx;

	*s = t->store;
	s->rows = n;
	s->bytes = (size_t)n * t->store.stride;
	s->base = ctx->mem->scratch_alloc(ctx->be, s->bytes ? s->bytes : 1);
	if (!s->base)
		return shemb__fail(ctx, SHEMB_ENOMEM, "table '%s': no memory "
				   "to stage %lld rows of its cold tier",
				   t->name, (long long)n);
	return 0;
}

static void unstage(shemb_table *t, struct shemb__store *s)
{
	t->ctx->mem->scratch_free(t->ctx->be, s->base,
				  s->bytes ? s->bytes : 1);
}

/* Through a staging buffer: rows read from the file, then copied into
 * their slots (in), or slots copied out, then written to the file. */
static int cold_move(shemb_table *t, int64_t n, const int64_t *slots,
		     const int64_t *rows, bool in)
{
	shemb_ctx *ctx = t->ctx;
	struct shemb__tier *tr = t->tier;
	struct shemb__store s;
	int rc = staging(t, n, &s);

	if (!rc && !in)
		rc = ctx->mem->copy_records(ctx->be, &s, NULL, &tr->dev, slots,
					    n);
	for (int64_t i = 0; !rc && i < n; i++) {
		char *rec = (char *)s.base + (size_t)i * s.stride;

		rc = in ? shemb__cold_read(t, &tr->cold, rows[i], rec)
			: shemb__cold_write(t, &tr->cold, rows[i], rec);
	}
	if (!rc && in)
		rc = ctx->mem->copy_records(ctx->be, &tr->dev, slots, &s, NULL,
					    n);
	if (s.base)
		unstage(t, &s);
	return rc;
}

/* Records between the device tier and the tier below: loads (`in`) or
 * write-backs, with their statistics. */
static int move(shemb_table *t, int64_t n, const int64_t *slots,
		const int64_t *rows, bool in)
{
	shemb_ctx *ctx = t->ctx;
	struct shemb__tier *tr = t->tier;
	uint64_t bytes = (uint64_t)n * t->store.stride;
	int rc;

	if (n == 0)
		return 0;
	if (tr->cold.fd >= 0)
		rc = cold_move(t, n, slots, rows, in);
	else if (in)
		rc = ctx->mem->copy_records(ctx->be, &tr->dev, slots,
					    &t->store, rows, n);
	else
		rc = ctx->mem->copy_records(ctx->be, &t->store, rows,
					    &tr->dev, slots, n);
	if (rc)
		return rc;
	if (in) {
		SHEMB__STAT_ADD(t, cache_misses, n);
		SHEMB__STAT_ADD(t, cache_bytes_in, bytes);
	} else {
		SHEMB__STAT_ADD(t, cache_writebacks, n);
		SHEMB__STAT_ADD(t, cache_bytes_out, bytes);
	}
	return 0;
}

int shemb__tier_load(shemb_table *t, int64_t n, const int64_t *slots,
		     const int64_t *rows)
{
	return move(t, n, slots, rows, true);
}

int shemb__tier_write_back(shemb_table *t, int64_t n, const int64_t *slots,
			   const int64_t *rows)
{
	return move(t, n, slots, rows, false);
}
