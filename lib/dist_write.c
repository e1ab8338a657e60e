/*
 * dist_write.c - shemb_table_write_rows across ranks: every rank's rows
 * go to their owners (column-wise: each owner its slice; replicated:
 * every rank), which store them in rank order, so that of an id written
 * twice the last row of the highest rank stays, as in a single process
 * given every rank's rows in rank order.
 *
 * Message to each peer: the number of ids (int64), the ids, then their
 * rows in the storage dtype, of the receiver's columns, padded to 8
 * bytes.
 */
#include "lib/dist.h"
#include "lib/ckpt_io.h"

#include <stdlib.h>
#include <string.h>

#include "lib/rowinit.h"

static size_t slice_bytes(const shemb_table *t, int r)
{
	int c0, n;

	shemb__shard_columns(&t->shard, r, &c0, &n);
	return (size_t)n * shemb__dtype_bytes(t->attr.dtype);
}

static bool goes_to(const shemb_table *t, int64_t id, int peer)
{
	int o = shemb__shard_owner(&t->shard, id);

	return o < 0 || o == peer;
}

static int64_t count_to(const shemb_table *t, int64_t n, const int64_t *ids,
			int peer)
{
	int64_t k = 0;

	for (int64_t i = 0; i < n; i++)
		k += goes_to(t, ids[i], peer);
	return k;
}

static void pack(const shemb_table *t, int64_t n, const int64_t *ids,
		 const char *rows, struct shemb__xchg *x)
{
	size_t full = (size_t)t->attr.dim * shemb__dtype_bytes(t->attr.dtype);

	for (int p = 0; p < x->world; p++) {
		int64_t *m = (int64_t *)(x->sbuf + x->sdispl[p]), k = 0;
		size_t sb = slice_bytes(t, p), off;
		int c0, nc;
		char *at;

		shemb__shard_columns(&t->shard, p, &c0, &nc);
		off = (size_t)c0 * shemb__dtype_bytes(t->attr.dtype);
		m[0] = count_to(t, n, ids, p);
		at = (char *)(m + 1 + m[0]);
		for (int64_t i = 0; i < n; i++) {
			if (!goes_to(t, ids[i], p))
				continue;
			m[1 + k++] = ids[i];
			memcpy(at, rows + (size_t)i * full + off, sb);
			at += sb;
		}
		shemb__zero_pad((char *)(m + 1 + m[0]), (size_t)k * sb);
	}
}

/* Room for the local ids of the most any peer may send (its message's
 * words), taken before the exchange: a rank without it refuses the
 * exchange instead of storing some peers' rows and not the others'. */
static int64_t *local_ids_room(const struct shemb__xchg *x)
{
	size_t most = 0;

	for (int p = 0; p < x->world; p++)
		most = x->rcount[p] / 8 > most ? x->rcount[p] / 8 : most;
	return malloc((most + 1) * sizeof(int64_t));
}

/* Each peer's rows, in rank order, into this rank's store. */
static int store_all(shemb_table *t, const struct shemb__xchg *x,
		     const float *reset, int64_t *local)
{
	for (int p = 0; p < x->world; p++) {
		const int64_t *m = (const int64_t *)(x->rbuf + x->rdispl[p]);
		int64_t n = m[0];
		int rc;

		for (int64_t i = 0; i < n; i++)
			local[i] = shemb__shard_local(&t->shard, m[1 + i]);
		rc = shemb__tier_write(t, n, local, m + 1 + n, t->attr.dtype,
				       reset);
		shemb__ckpt_touch(t, n, local);
		if (rc)
			return rc;
	}
	return 0;
}

/* The caller's rows in the storage dtype (NULL: no memory). */
static char *stored_form(shemb_table *t, int64_t n, const void *in,
			 int dtype)
{
	size_t es = shemb__dtype_bytes(t->attr.dtype), dim = t->attr.dim;
	char *rows = malloc((size_t)n * dim * es + 8);

	if (rows && t->ctx->mem->convert(t->ctx->be, rows, t->attr.dtype,
					 dim * es, in, dtype,
					 dim * shemb__dtype_bytes(dtype), n,
					 (int)dim)) {
		free(rows);
		rows = NULL;
	}
	return rows;
}

static uint64_t write_signature(const shemb_table *t, unsigned flags)
{
	uint64_t h = shemb__mix64((uint64_t)SHEMB__DIST_WRITE << 32 | flags);

	return shemb__dist_mix_table(h, t) | 1;
}

int shemb__dist_write(shemb_table *t, int64_t n, const int64_t *ids,
		      const void *in, int dtype, const float *reset,
		      unsigned flags, int status)
{
	shemb_ctx *ctx = t->ctx;
	struct shemb__xchg x = { 0 };
	int64_t *local = NULL;
	char *rows = NULL;
	int rc;

	/* without its counts, this rank still meets the others, failed */
	if (shemb__xchg_init(&x, ctx->attr.world_size) && !status)
		status = shemb__fail(ctx, SHEMB_ENOMEM, "no memory");
	if (!status && n > 0) {
		rows = stored_form(t, n, in, dtype);
		if (!rows)
			status = shemb__fail(ctx, SHEMB_ENOMEM, "no memory");
	}
	for (int p = 0; !status && p < x.world; p++)
		x.scount[p] = 8 * (size_t)(1 + count_to(t, n, ids, p)) +
			      shemb__pad8((size_t)count_to(t, n, ids, p) *
				   slice_bytes(t, p));
	pthread_rwlock_wrlock(&t->rows_lock);
	rc = shemb__dist_agree(ctx, SHEMB__DIST_WRITE,
			       status ? 0 : write_signature(t, flags), status,
			       &x);
	/* the others, committed to the rows' exchange, learn it there */
	if (!rc && (shemb__xchg_alloc(&x) || !(local = local_ids_room(&x))))
		rc = shemb__xchg_refuse(ctx, SHEMB_ENOMEM,
					"no memory for the rows' exchange");
	if (!rc) {
		pack(t, n, ids, rows, &x);
		rc = shemb__xchg_run(ctx, &x);
	}
	if (!rc && (rc = store_all(t, &x, reset, local)))
		shemb__fail(ctx, rc, "write_rows (table '%s') failed in the "
			    "backend", t->name);
	pthread_rwlock_unlock(&t->rows_lock);
	free(local);
	free(rows);
	shemb__xchg_free(ctx, &x);
	return rc;
}
