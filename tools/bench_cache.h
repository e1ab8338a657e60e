/*
 * bench_cache.h - shemb-bench cache: id traces cut into batches, and
 * Belady's offline optimum on them (bench_cache_trace.c), and the options
 * (bench_cache_opts.c), for the mode in bench_cache.c.
 */
#ifndef SHEMB_BENCH_CACHE_H
#define SHEMB_BENCH_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "tools/bench_util.h"

#define MAX_CAPS 16 /* values of --capacity */

/* The options (bench_cache_opts.c). */
struct cache_opts {
	int64_t pcts[MAX_CAPS];  /* --capacity */
	int npct, tput;          /* how many; the throughput's index */
	const char *csv;
	int64_t rows, batches, batch;
	int pooling, dim, tput_dim, depth, window, threads, reps, compute_us;
	bool prefetch_thread;
	double zipf_s;
	uint64_t seed;
	const char *trace;
	bool quick;
};

/* Options from argv (argv[0]: the program's name); -1 after a message. */
int cache_parse(int argc, char **argv, struct cache_opts *o);

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
