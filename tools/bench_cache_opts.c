/*
 * bench_cache_opts.c - the options of shemb-bench cache: its usage text,
 * their parsing, and the defaults --quick changes.
 */
#define _GNU_SOURCE
#include "tools/bench.h"
#include "tools/bench_cache.h"
#include "tools/bench_comm.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#define TPUT_PCT 10 /* the throughput runs at the capacity nearest this */

const char bench_cache_usage[] =
"Options of cache (hit rates of the device tier's LRU, LFU and lookahead\n"
"with prefetch against Belady's optimum, at each capacity, and lookup\n"
"throughput with the tier against all rows resident, at the capacity\n"
"nearest 10%):\n"
"  --capacity LIST     device tier sizes in percent of the rows, 1 to 100\n"
"                      (default 1,5,10,25)\n"
"  --trace FILE        replay FILE (little-endian int64 ids, or text, one\n"
"                      id a line; rows = largest id + 1) instead of the\n"
"                      Zipf 0.9, --zipf-s and 1.2 and uniform traces\n"
"  --rows N            rows of the synthetic traces (default 262144)\n"
"  --batches N         batches of the synthetic traces (default 256)\n"
"  --batch N           ids per batch, one lookup each (default 4096)\n"
"  --pooling-factor N  ids per bag (default 32)\n"
"  --dim N             values per row for the hit rates (default 16)\n"
"  --tput-dim N        values per row for the throughput (default 128)\n"
"  --depth N           batches lookahead prefetches ahead (default 2)\n"
"  --compute-us N      throughput: a busy loop of N microseconds after each\n"
"                      lookup, as the dense model's step (default 0)\n"
"  --prefetch-thread   the context's prefetch_thread 1: a thread of the\n"
"                      context does the loads of shemb_prefetch\n"
"  --window N          batches lookahead announces ahead (shemb_announce;\n"
"                      default 128, at most 255; 0: none)\n"
"  --zipf-s S          exponent of the Zipf trace the results are of\n"
"                      without --trace (default 1.05)\n"
"  --seed N            seed of the synthetic ids (default 1)\n"
"  --threads N         threads of the library (default 2)\n"
"  --reps N            timed replays for the throughput (default 3)\n"
"  --quick             32768 rows, 64 batches and 1 timed replay unless\n"
"                      given\n"
"  --csv FILE          append one line per trace and capacity\n";

enum {
	CO_TRACE = 256, CO_ROWS, CO_BATCHES, CO_BATCH, CO_POOLING, CO_DIM,
	CO_TPUT_DIM, CO_DEPTH, CO_WINDOW, CO_ZIPF_S, CO_SEED, CO_THREADS,
	CO_REPS, CO_QUICK, CO_COMPUTE, CO_THREAD, CO_CAPACITY, CO_CSV
};

static const struct option cache_long[] = {
	{ "trace", required_argument, NULL, CO_TRACE },
	{ "rows", required_argument, NULL, CO_ROWS },
	{ "batches", required_argument, NULL, CO_BATCHES },
	{ "batch", required_argument, NULL, CO_BATCH },
	{ "pooling-factor", required_argument, NULL, CO_POOLING },
	{ "dim", required_argument, NULL, CO_DIM },
	{ "tput-dim", required_argument, NULL, CO_TPUT_DIM },
	{ "depth", required_argument, NULL, CO_DEPTH },
	{ "window", required_argument, NULL, CO_WINDOW },
	{ "compute-us", required_argument, NULL, CO_COMPUTE },
	{ "prefetch-thread", no_argument, NULL, CO_THREAD },
	{ "zipf-s", required_argument, NULL, CO_ZIPF_S },
	{ "seed", required_argument, NULL, CO_SEED },
	{ "threads", required_argument, NULL, CO_THREADS },
	{ "reps", required_argument, NULL, CO_REPS },
	{ "quick", no_argument, NULL, CO_QUICK },
	{ "capacity", required_argument, NULL, CO_CAPACITY },
	{ "csv", required_argument, NULL, CO_CSV },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 }
};

static int parse_s(const char *s, double *out)
{
	char *end;

	errno = 0;
	*out = strtod(s, &end);
	return errno || end == s || *end || !(*out > 0.0) || *out > 100.0
		       ? -1 : 0;
}

static int apply_opt(struct cache_opts *o, int c, const char *arg)
{
	int64_t v;

	switch (c) {
	case CO_TRACE:
		o->trace = arg;
		return 0;
	case CO_ROWS:
		return comm_parse_count(arg, 1, SHEMB_MAX_ROWS, &o->rows);
	case CO_BATCHES:
		return comm_parse_count(arg, 1, 1 << 24, &o->batches);
	case CO_BATCH:
		return comm_parse_count(arg, 1, 1 << 30, &o->batch);
	case CO_POOLING:
		return comm_parse_int(arg, 1, 1 << 20, &o->pooling);
	case CO_DIM:
		return comm_parse_int(arg, 1, SHEMB_MAX_DIM, &o->dim);
	case CO_TPUT_DIM:
		return comm_parse_int(arg, 1, SHEMB_MAX_DIM, &o->tput_dim);
	case CO_DEPTH:
		return comm_parse_int(arg, 0, 64, &o->depth);
	case CO_WINDOW:
		return comm_parse_int(arg, 0, 255, &o->window);
	case CO_COMPUTE:
		return comm_parse_int(arg, 0, 1000000, &o->compute_us);
	case CO_THREAD:
		o->prefetch_thread = true;
		return 0;
	case CO_ZIPF_S:
		return parse_s(arg, &o->zipf_s);
	case CO_SEED:
		if (comm_parse_count(arg, 0, INT64_MAX, &v))
			return -1;
		o->seed = (uint64_t)v;
		return 0;
	case CO_THREADS:
		return comm_parse_int(arg, 1, 1024, &o->threads);
	case CO_REPS:
		return comm_parse_int(arg, 1, 1000, &o->reps);
	case CO_QUICK:
		o->quick = true;
		return 0;
	case CO_CAPACITY:
		o->npct = comm_parse_list(arg, 1, 100, o->pcts, MAX_CAPS);
		return o->npct < 1 ? -1 : 0;
	case CO_CSV:
		o->csv = arg;
		return 0;
	}
	return -1;
}

/* The capacity nearest TPUT_PCT, the smaller of two as near. */
static int tput_index(const struct cache_opts *o)
{
	int best = 0;

	for (int i = 1; i < o->npct; i++) {
		int64_t d = llabs(o->pcts[i] - TPUT_PCT);
		int64_t db = llabs(o->pcts[best] - TPUT_PCT);

		if (d < db || (d == db && o->pcts[i] < o->pcts[best]))
			best = i;
	}
	return best;
}

/* What --quick and the defaults give to the options not set. */
static void fill_defaults(struct cache_opts *o)
{
	static const int64_t pcts[] = { 1, 5, 10, 25 };

	if (!o->npct) {
		memcpy(o->pcts, pcts, sizeof(pcts));
		o->npct = 4;
	}
	o->tput = tput_index(o);
	if (o->rows < 0)
		o->rows = o->quick ? 32768 : 262144;
	if (o->batches < 0)
		o->batches = o->quick ? 64 : 256;
	if (o->reps < 0)
		o->reps = o->quick ? 1 : 3;
}

static int cache_apply(void *o, int c, const char *arg)
{
	return apply_opt(o, c, arg);
}

static void cache_help(void)
{
	fputs("Usage: shemb-bench cache [options]\n\n", stdout);
	fputs(bench_cache_usage, stdout);
}

int cache_parse(int argc, char **argv, struct cache_opts *o)
{
	*o = (struct cache_opts){ .rows = -1, .batches = -1, .batch = 4096,
				  .pooling = 32, .dim = 16, .tput_dim = 128,
				  .depth = 2, .window = 128, .threads = 2,
				  .reps = -1,
				  .zipf_s = 1.05, .seed = 1 };
	if (bench_parse_opts(argc, argv, cache_long, cache_apply, o,
			     cache_help))
		return -1;
	fill_defaults(o);
	if (!o->trace && o->batches * o->batch > INT32_MAX) {
		fprintf(stderr, "shemb-bench: --batches x --batch must stay "
			"below 2^31 ids\n");
		return -1;
	}
	return 0;
}
