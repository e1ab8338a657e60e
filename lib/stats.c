/*
 * stats.c - per-table counters and phase timers.
 */
#include "lib/internal.h"
#include "lib/tier.h"

#include <stdlib.h>
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
	shemb__loader_wait(m); /* the loads of the prefetches made count */
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
		.sent_bytes = LOAD(m, sent_bytes),
		.received_bytes = LOAD(m, received_bytes),
		.exchange_ns = LOAD(m, exchange_ns),
		.phase_ns = { LOAD(m, phase_ns[0]), LOAD(m, phase_ns[1]),
			      LOAD(m, phase_ns[2]) },
		.cache_hits = LOAD(m, cache_hits),
		.cache_misses = LOAD(m, cache_misses),
		.cache_evictions = LOAD(m, cache_evictions),
		.cache_writebacks = LOAD(m, cache_writebacks),
		.cache_bytes_in = LOAD(m, cache_bytes_in),
		.cache_bytes_out = LOAD(m, cache_bytes_out),
		.prefetch_hits = LOAD(m, prefetch_hits),
		.relaxed_lookups = LOAD(m, relaxed_lookups),
		.early_rows = LOAD(m, early_rows),
	};
	/* whole fields only: every field is 8 bytes */
	memcpy((char *)out + sizeof(size_t), (char *)&s + sizeof(size_t),
	       ((out->size < sizeof(s) ? out->size : sizeof(s)) -
		sizeof(size_t)) / 8 * 8);
	return 0;
}

SHEMB_API int shemb_table_stats_reset(shemb_table *t)
{
	if (!t)
		return shemb__fail(NULL, SHEMB_EINVAL, "table is NULL");
	/* as shemb_table_stats(): the loads of the prefetches made so far
	 * belong before the reset */
	shemb__loader_wait(t);
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
	ZERO(t, sent_bytes);
	ZERO(t, received_bytes);
	ZERO(t, exchange_ns);
	for (int ph = 0; ph < 3; ph++)
		ZERO(t, phase_ns[ph]);
	ZERO(t, cache_hits);
	ZERO(t, cache_misses);
	ZERO(t, cache_evictions);
	ZERO(t, cache_writebacks);
	ZERO(t, cache_bytes_in);
	ZERO(t, cache_bytes_out);
	ZERO(t, prefetch_hits);
	ZERO(t, relaxed_lookups);
	ZERO(t, early_rows);
	for (int i = 0; i < 6 * t->ctx->attr.world_size; i++)
		atomic_store_explicit(&t->stats.peer_bytes[i], 0,
				      memory_order_relaxed);
	return 0;
}

int shemb__stats_init(shemb_table *t)
{
	t->stats.peer_bytes = calloc(6 * (size_t)t->ctx->attr.world_size,
				     sizeof(*t->stats.peer_bytes));
	return t->stats.peer_bytes ? 0 : SHEMB_ENOMEM;
}

void shemb__stats_free(shemb_table *t)
{
	free(t->stats.peer_bytes);
}

void shemb__stats_peer(shemb_table *t, int phase, int peer, uint64_t sent,
		       uint64_t received)
{
	size_t w = (size_t)t->ctx->attr.world_size;
	atomic_uint_fast64_t *pb = t->stats.peer_bytes + (size_t)phase * 2 * w;

	atomic_fetch_add_explicit(&pb[peer], sent, memory_order_relaxed);
	atomic_fetch_add_explicit(&pb[w + (size_t)peer], received,
				  memory_order_relaxed);
	if (peer == t->shard.rank)
		return;
	SHEMB__STAT_ADD(t, sent_bytes, sent);
	SHEMB__STAT_ADD(t, received_bytes, received);
}

SHEMB_API int shemb_table_stats_peers(const shemb_table *t, int phase,
				      uint64_t *sent, uint64_t *received)
{
	size_t w;
	atomic_uint_fast64_t *pb;

	if (!t)
		return shemb__fail(NULL, SHEMB_EINVAL, "table is NULL");
	if (phase < SHEMB_PHASE_IDS || phase > SHEMB_PHASE_GRADS)
		return shemb__fail(t->ctx, SHEMB_EINVAL, "phase %d is not an "
				   "enum shemb_phase value", phase);
	w = (size_t)t->ctx->attr.world_size;
	pb = t->stats.peer_bytes + (size_t)phase * 2 * w;
	for (size_t r = 0; r < w; r++) {
		if (sent)
			sent[r] = atomic_load_explicit(&pb[r],
						       memory_order_relaxed);
		if (received)
			received[r] = atomic_load_explicit(
				&pb[w + r], memory_order_relaxed);
	}
	return 0;
}
