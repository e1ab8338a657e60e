/*
 * bench_cache.h - shemb-bench cache: id traces cut into batches, and
 * Belady's offline optimum on them (bench_cache_trace.c), for the mode in
 * bench_cache.c.
 */
#ifndef SHEMB_BENCH_CACHE_H
#define SHEMB_BENCH_CACHE_H

#include <stdint.h>

#include "tools/bench_util.h"

/* A trace cut into batches, and what Belady needs of it. */
struct cache_trace {
	char name[64];
	int64_t rows;
	int nb;
	struct bench_batch *b;  /* [nb] */
	int64_t *doff;          /* [nb + 1]: batch t's distinct ids are */
	uint32_t *did;          /* did[doff[t] .. doff[t + 1]), renumbered */
	int32_t *next;          /* per did entry: the next batch that needs
				 * the id, nb if none */
	int64_t requests;       /* distinct ids per batch, summed */
	int64_t maxd;           /* most distinct ids of one batch */
	int64_t nuniq;          /* distinct ids of the trace */
};

/* The ids of a trace file (little-endian int64, or text: one id a line)
 * and its rows (largest id + 1); NULL after a message. */
int64_t *cache_load_trace(const char *path, int64_t *n, int64_t *rows);

/* Batches of `batch` ids, in bags of `pooling` (the last ones shorter). */
int cache_cut_trace(struct cache_trace *tr, const int64_t *ids, int64_t n,
		    int64_t batch, int pooling);

/* Fill doff .. nuniq from the batches. */
int cache_index_trace(struct cache_trace *tr);

void cache_free_trace(struct cache_trace *tr);

/* Rows Belady's policy loads with cap >= tr->maxd slots; -1: no memory. */
int64_t cache_belady_misses(const struct cache_trace *tr, int64_t cap);

#endif
