/*
 * tier.c - a table's device tier: made with the table, flushed, destroyed.
 */
#include "lib/tier_int.h"

#include <stdlib.h>
#include <string.h>

#include "lib/table.h"
#include "lib/stepq.h"

static int alloc_arrays(struct shemb__tier *tr, int32_t n)
{
	size_t k = (size_t)n + 1;

	tr->slot = calloc(k, sizeof(*tr->slot));
	tr->free_slots = malloc(k * sizeof(*tr->free_slots));
	if (!tr->slot || !tr->free_slots)
		return SHEMB_ENOMEM;
	for (int32_t s = 0; s < n; s++) {
		tr->slot[s].row = -1;
		tr->slot[s].next_use = -1;
		tr->slot[s].list = -1;
		tr->free_slots[s] = n - 1 - s; /* slot 0 taken first */
	}
	tr->nfree = n;
	shemb__lists_init(&tr->order, tr->slot);
	return shemb__rowmap_init(&tr->index, sizeof(struct shemb__index_rec),
				  (uint64_t)n);
}

/* Slots, and the LFU counts, are memory of the context's budgets: the
 * CPU backend's device tier is host memory too. */
static int reserve(shemb_table *t, struct shemb__tier *tr)
{
	shemb_ctx *ctx = t->ctx;
	uint64_t dev = (uint64_t)tr->nslots * t->store.stride;
	uint64_t counts = tr->policy != SHEMB_CACHE_LRU
				  ? (uint64_t)t->store.rows * 4
				  : 0;
	uint64_t host = (ctx->device_rows ? 0 : dev) + counts;
	int rc = shemb__budget_claim(ctx, t->name, "its device tier", dev,
				     true);

	if (rc)
		return rc;
	tr->reserved_device = dev;
	rc = shemb__budget_claim(ctx, t->name, "its device tier", host,
				 false);
	if (!rc)
		tr->reserved_host = host;
	return rc;
}

static int make_tier(shemb_table *t, struct shemb__tier *tr,
		     const struct shemb__init_spec *spec)
{
	shemb_ctx *ctx = t->ctx;
	int rc = reserve(t, tr);

	if (rc)
		return rc;
	tr->dev = t->store;
	tr->dev.rows = tr->nslots;
	tr->dev.bytes = (size_t)tr->nslots * t->store.stride;
	tr->dev.base = NULL;
	tr->dev.on_device = ctx->device_rows;
	if (alloc_arrays(tr, tr->nslots) ||
	    (tr->policy != SHEMB_CACHE_LRU &&
	     !(tr->freq = calloc((size_t)t->store.rows, sizeof(uint32_t)))))
		return shemb__fail(ctx, SHEMB_ENOMEM, "table '%s': no memory "
				   "for its device tier", t->name);
	rc = ctx->mem->store_alloc(ctx->be, &tr->dev);
	if (rc)
		return shemb__fail(ctx, rc, "table '%s': cannot allocate a "
				   "device tier of %zu bytes", t->name,
				   tr->dev.bytes);
	if (t->attr.cold_path)
		return shemb__cold_create(t, &tr->cold, spec);
	return 0;
}

int shemb__tier_create(shemb_table *t, const struct shemb__init_spec *spec)
{
	struct shemb__tier *tr;
	int64_t n = t->attr.cache_rows < t->store.rows ? t->attr.cache_rows
						       : t->store.rows;
	int rc;

	if (t->attr.cache_rows == 0 || t->store.rows == 0)
		return 0;
	if (n > INT32_MAX - 1)
		return shemb__fail(t->ctx, SHEMB_EINVAL, "table '%s': "
				   "cache_rows over 2^31 - 2", t->name);
	tr = calloc(1, sizeof(*tr));
	if (!tr)
		return shemb__fail(t->ctx, SHEMB_ENOMEM, "no memory");
	tr->policy = t->attr.cache_policy;
	tr->nslots = (int32_t)n;
	tr->cold.fd = -1;
	pthread_mutex_init(&tr->lock, NULL);
	pthread_cond_init(&tr->unpinned, NULL);
	t->tier = tr;
	rc = make_tier(t, tr, spec);
	if (rc)
		shemb__tier_destroy(t);
	return rc;
}

void shemb__tier_destroy(shemb_table *t)
{
	struct shemb__tier *tr = t->tier;
	shemb_ctx *ctx = t->ctx;

	if (!tr)
		return;
	shemb__loader_wait(t);
	shemb__cold_close(&tr->cold);
	if (tr->dev.base)
		ctx->mem->store_free(ctx->be, &tr->dev);
	shemb__budget_release(ctx, tr->reserved_device, true);
	shemb__budget_release(ctx, tr->reserved_host, false);
	shemb__rowmap_free(&tr->index);
	free(tr->slot);
	shemb__ahead_free(&tr->ahead);
	free(tr->free_slots);
	free(tr->freq);
	pthread_mutex_destroy(&tr->lock);
	pthread_cond_destroy(&tr->unpinned);
	free(tr);
	t->tier = NULL;
}

int shemb__tier_flush(shemb_table *t)
{
	struct shemb__tier *tr = t->tier;
	int64_t *rows, *slots, n = 0;
	int rc;

	if (!tr)
		return 0;
	shemb__loader_wait(t);
	rows = malloc(((size_t)tr->nslots + 1) * sizeof(*rows));
	slots = malloc(((size_t)tr->nslots + 1) * sizeof(*slots));
	if (!rows || !slots) {
		free(rows);
		free(slots);
		return shemb__fail(t->ctx, SHEMB_ENOMEM, "no memory");
	}
	pthread_mutex_lock(&tr->lock);
	for (int32_t s = 0; s < tr->nslots; s++) {
		if (!tr->slot[s].dirty)
			continue;
		rows[n] = tr->slot[s].row;
		slots[n++] = s;
	}
	rc = shemb__tier_write_back(t, n, slots, rows);
	for (int64_t i = 0; !rc && i < n; i++)
		tr->slot[slots[i]].dirty = 0;
	pthread_mutex_unlock(&tr->lock);
	free(rows);
	free(slots);
	return rc;
}

SHEMB_API int shemb_table_flush(shemb_table *t)
{
	int rc;

	if (!t)
		return shemb__fail(NULL, SHEMB_EINVAL, "table is NULL");
	rc = shemb__stepq_drain(t->ctx);
	if (rc)
		return rc;
	pthread_rwlock_wrlock(&t->rows_lock);
	rc = shemb__tier_flush(t);
	pthread_rwlock_unlock(&t->rows_lock);
	return rc;
}
