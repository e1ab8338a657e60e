/*
 * stats.c - per-table counters and phase timers.
 */
#include "lib/internal.h"

#include <string.h>

#define STATS_V1_SIZE                                                        \
	(offsetof(struct shemb_table_stats, update_ns) + sizeof(uint64_t))

#define LOAD(t, f) atomic_load_explicit(&(t)->stats.f, memory_order_relaxed)
#define ZERO(t, f) atomic_store_explicit(&(t)->stats.f, 0, memory_order_relaxed)

SHEMB_API int shemb_table_stats(const shemb_table *t,
				struct shemb_table_stats *out)
{
	struct shemb_table_stats s;
	shemb_table *m = (shemb_table *)t; /* atomics: loads only */

	if (!t || !out)
		return shemb__fail(t ? t->ctx : NULL, SHEMB_EINVAL,
				   "table or stats is NULL");
	if (out->size < STATS_V1_SIZE)
		return shemb__fail(t->ctx, SHEMB_EINVAL,
				   "stats->size %zu is too small (set it to "
				   "sizeof(struct shemb_table_stats))",
				   out->size);
	s = (struct shemb_table_stats){
		.size = sizeof(s),
		.lookups = LOAD(m, lookups),
		.backwards = LOAD(m, backwards),
		.bags = LOAD(m, bags),
		.ids = LOAD(m, ids),
		.unique_ids = LOAD(m, unique_ids),
		.rows_updated = LOAD(m, rows_updated),
		.validate_ns = LOAD(m, validate_ns),
		.plan_ns = LOAD(m, plan_ns),
		.pool_ns = LOAD(m, pool_ns),
		.update_ns = LOAD(m, update_ns),
	};
	memcpy((char *)out + sizeof(size_t), (char *)&s + sizeof(size_t),
	       (out->size < sizeof(s) ? out->size : sizeof(s)) -
		       sizeof(size_t));
	return 0;
}

SHEMB_API int shemb_table_stats_reset(shemb_table *t)
{
	if (!t)
		return shemb__fail(NULL, SHEMB_EINVAL, "table is NULL");
	ZERO(t, lookups);
	ZERO(t, backwards);
	ZERO(t, bags);
	ZERO(t, ids);
	ZERO(t, unique_ids);
	ZERO(t, rows_updated);
	ZERO(t, validate_ns);
	ZERO(t, plan_ns);
	ZERO(t, pool_ns);
	ZERO(t, update_ns);
	return 0;
}
