/*
 * bench_cache.c - shemb-bench cache: hit rates of the device tier's
 * eviction policies on id traces, next to Belady's offline optimum
 * computed here on the same trace, and lookup throughput with the tier
 * against all rows resident.
 *
 * A trace is cut into batches of --batch ids; a batch is one lookup of one
 * bag set, which needs each of its distinct ids resident once.  So every
 * policy is scored alike: requests = distinct ids per batch, summed, and
 * hit rate = 1 - loads / requests, loads being the table's cache_misses
 * (rows loaded into the tier by lookups or prefetches).  Belady minimises
 * exactly those loads (prefetching cannot load less than demand paging),
 * so no policy can beat it.
 */
#define _GNU_SOURCE
#include "tools/bench.h"
#include "tools/bench_cache.h"
#include "tools/bench_comm.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NPCT 4
static const int pcts[NPCT] = { 1, 5, 10, 25 };
#define TPUT_PCT 2 /* the throughput runs at pcts[TPUT_PCT] */

enum { P_LRU, P_LFU, P_LOOKAHEAD, P_BELADY, NPOL };
static const char *const pol_names[NPOL] = { "lru", "lfu", "lookahead",
					     "belady" };
static const int pol_enum[P_BELADY] = { SHEMB_CACHE_LRU, SHEMB_CACHE_LFU,
					SHEMB_CACHE_LOOKAHEAD };

const char bench_cache_usage[] =
"Options of cache (hit rates of the device tier's LRU, LFU and lookahead\n"
"with prefetch against Belady's optimum, at 1, 5, 10 and 25% of the rows,\n"
"and lookup throughput with the tier against all rows resident):\n"
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
"                      given\n";

struct cache_opts {
	int64_t rows, batches, batch;
	int pooling, dim, tput_dim, depth, window, threads, reps, compute_us;
	bool prefetch_thread;
	double zipf_s;
	uint64_t seed;
	const char *trace;
	bool quick;
};

struct cache_run {
	const struct cache_opts *o;
	shemb_ctx *ctx;
	struct bench_pool *pool;
	int64_t *perm;          /* Zipf rank - 1 -> id */
	float *out;             /* one lookup's output, either dim */
	double lookup_s;        /* time in shemb_lookup, summed */
	int compute_us;         /* the dense step after each lookup */
};

/* One capacity of one trace. */
struct cap_result {
	int64_t slots;
	int depth;              /* lookahead's prefetch distance */
	bool raised;
	double rate[NPOL];
};

/* ---- options ---- */

enum {
	CO_TRACE = 256, CO_ROWS, CO_BATCHES, CO_BATCH, CO_POOLING, CO_DIM,
	CO_TPUT_DIM, CO_DEPTH, CO_WINDOW, CO_ZIPF_S, CO_SEED, CO_THREADS,
	CO_REPS, CO_QUICK, CO_COMPUTE, CO_THREAD
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
	}
	return -1;
}

/* What --quick and the defaults give to the options not set. */
static void fill_defaults(struct cache_opts *o)
{
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

static int parse(int argc, char **argv, struct cache_opts *o)
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

/* ---- the library ---- */

static int failed(shemb_ctx *ctx, const char *what, int rc)
{
	fprintf(stderr, "shemb-bench: %s: %s: %s\n", what, shemb_strerror(rc),
		shemb_ctx_last_error(ctx));
	return -1;
}

/* slots 0: no device tier. */
static int make_table(struct cache_run *r, int64_t rows, int dim,
		      int64_t slots, int policy, shemb_table **t)
{
	struct shemb_table_attr ta;
	int rc;

	shemb_table_attr_init(&ta);
	ta.name = "cache";
	ta.rows = rows;
	ta.dim = dim;
	ta.cache_rows = slots;
	ta.cache_policy = policy;
	*t = NULL;
	rc = shemb_table_create(r->ctx, &ta, t);
	if (rc)
		return failed(r->ctx, "shemb_table_create", rc);
	rc = shemb_table_stats_reset(*t);
	if (rc) {
		failed(r->ctx, "shemb_table_stats_reset", rc);
		shemb_table_destroy(*t);
		return -1;
	}
	return 0;
}

enum step_kind { LOOKUP, PREFETCH, ANNOUNCE };

static int step(struct cache_run *r, shemb_table *t,
		const struct bench_batch *b, enum step_kind kind)
{
	struct shemb_bags bags = bench_bags_of(t, b);
	float *outs[1] = { r->out };
	double t0;
	int rc;

	if (kind == PREFETCH) {
		rc = shemb_prefetch(r->ctx, 1, &bags);
		return rc ? failed(r->ctx, "shemb_prefetch", rc) : 0;
	}
	if (kind == ANNOUNCE) {
		rc = shemb_announce(r->ctx, 1, &bags);
		return rc ? failed(r->ctx, "shemb_announce", rc) : 0;
	}
	t0 = bench_now();
	rc = shemb_lookup(r->ctx, 1, &bags, outs, SHEMB_LOOKUP_NO_GRAD);
	r->lookup_s += bench_now() - t0;
	return rc ? failed(r->ctx, "shemb_lookup", rc) : 0;
}

/* Lookups in order; with window > 0, batch t + window announced and with
 * depth > 0, batch t + depth prefetched, before batch t is looked up. */
static int replay(struct cache_run *r, shemb_table *t,
		  const struct cache_trace *tr, int depth, int window)
{
	for (int k = 0; k < window && k < tr->nb; k++)
		if (step(r, t, &tr->b[k], ANNOUNCE))
			return -1;
	for (int k = 0; k < depth && k < tr->nb; k++)
		if (step(r, t, &tr->b[k], PREFETCH))
			return -1;
	for (int k = 0; k < tr->nb; k++) {
		if (window && k + window < tr->nb &&
		    step(r, t, &tr->b[k + window], ANNOUNCE))
			return -1;
		if (depth && k + depth < tr->nb &&
		    step(r, t, &tr->b[k + depth], PREFETCH))
			return -1;
		if (step(r, t, &tr->b[k], LOOKUP))
			return -1;
		if (r->compute_us) /* the dense step, overlapping the loads */
			bench_busy_us(r->compute_us);
	}
	return 0;
}

/* A bag of the last lookup against the sum of its rows. */
static int check_bag(struct cache_run *r, shemb_table *t,
		     const struct bench_batch *b, int64_t bag, int dim)
{
	int64_t beg = b->offsets[bag], len = b->offsets[bag + 1] - beg;
	float *rows = malloc(((size_t)len + 1) * (size_t)dim * sizeof(*rows));
	const float *got = r->out + (size_t)bag * (size_t)dim;
	int rc = rows ? shemb_table_read_rows(t, len, b->ids + beg, rows,
					      SHEMB_F32) : SHEMB_ENOMEM;

	if (!rc && bench_check_sum(got, rows, len, dim, bag)) {
		free(rows);
		return -1;
	}
	free(rows);
	return rc ? failed(r->ctx, "shemb_table_read_rows", rc) : 0;
}

/* Lookups alone hit or load each distinct id once; no more rows stay
 * than there are slots. */
static int check_counts(const struct cache_trace *tr,
			const struct shemb_table_stats *st, int64_t slots,
			bool prefetched)
{
	if (!prefetched && st->cache_hits + st->cache_misses !=
			   (uint64_t)tr->requests) {
		fprintf(stderr, "shemb-bench: CHECK FAILED: %s: %llu hits "
			"and %llu loads for %lld distinct ids looked up\n",
			tr->name, (unsigned long long)st->cache_hits,
			(unsigned long long)st->cache_misses,
			(long long)tr->requests);
		return -1;
	}
	if (st->cache_misses - st->cache_evictions > (uint64_t)slots) {
		fprintf(stderr, "shemb-bench: CHECK FAILED: %s: %llu loads "
			"and %llu evictions in %lld slots\n", tr->name,
			(unsigned long long)st->cache_misses,
			(unsigned long long)st->cache_evictions,
			(long long)slots);
		return -1;
	}
	return 0;
}

static int policy_rate(struct cache_run *r, const struct cache_trace *tr,
		       int pol, const struct cap_result *c, double *rate)
{
	struct shemb_table_stats st = { .size = sizeof(st) };
	const struct bench_batch *last = &tr->b[tr->nb - 1];
	int depth = pol == P_LOOKAHEAD ? c->depth : 0;
	int window = pol == P_LOOKAHEAD ? r->o->window : 0;
	int dim = r->o->dim, rc;
	shemb_table *t;

	if (make_table(r, tr->rows, dim, c->slots, pol_enum[pol], &t))
		return -1;
	rc = replay(r, t, tr, depth, window);
	if (!rc && (rc = shemb_table_stats(t, &st)))
		failed(r->ctx, "shemb_table_stats", rc);
	if (!rc)
		rc = check_counts(tr, &st, c->slots, depth > 0) ||
		     check_bag(r, t, last, 0, dim) ||
		     check_bag(r, t, last, last->nbags - 1, dim);
	shemb_table_destroy(t);
	*rate = 1.0 - (double)st.cache_misses / (double)tr->requests;
	return rc ? -1 : 0;
}

/* ---- hit rates ---- */

/* Slots for pct% of the rows, and lookahead's depth in them. */
static void capacity(const struct cache_run *r,
		     const struct cache_trace *tr, int pct,
		     struct cap_result *c)
{
	int64_t slots = tr->rows * pct / 100;

	c->slots = slots > 1 ? slots : 1;
	c->raised = c->slots < tr->maxd;
	if (c->raised)
		c->slots = tr->maxd;
	/* the batches prefetched and not yet looked up are kept */
	c->depth = r->o->depth;
	while (c->depth > 0 && (c->depth + 1) * tr->maxd > c->slots)
		c->depth--;
}

static int run_capacity(struct cache_run *r,
			const struct cache_trace *tr, int pct,
			struct cap_result *c)
{
	int64_t m;

	capacity(r, tr, pct, c);
	for (int p = 0; p < P_BELADY; p++) {
		bench_progress("%s at %d%%: %s", tr->name, pct, pol_names[p]);
		if (policy_rate(r, tr, p, c, &c->rate[p])) {
			bench_progress_done();
			return -1;
		}
	}
	bench_progress_done();
	m = cache_belady_misses(tr, c->slots);
	if (m < 0) {
		fprintf(stderr, "shemb-bench: out of memory\n");
		return -1;
	}
	c->rate[P_BELADY] = 1.0 - (double)m / (double)tr->requests;
	printf("  %5d%% %9lld%c %5d", pct, (long long)c->slots,
	       c->raised ? '*' : ' ', c->depth);
	for (int p = 0; p < NPOL; p++)
		printf(" %10.4f", c->rate[p]);
	putchar('\n');
	fflush(stdout);
	return 0;
}

static int run_trace(struct cache_run *r, struct cache_trace *tr,
		     struct cap_result *res)
{
	if (cache_index_trace(tr)) {
		fprintf(stderr, "shemb-bench: out of memory\n");
		return -1;
	}
	printf("\n%s: %lld rows, %lld of them used; %d batches, %lld "
	       "requests,\nat most %lld in a batch\n", tr->name,
	       (long long)tr->rows, (long long)tr->nuniq, tr->nb,
	       (long long)tr->requests, (long long)tr->maxd);
	printf("  %6s %10s %5s", "cap", "slots", "depth");
	for (int p = 0; p < NPOL; p++)
		printf(" %10s", pol_names[p]);
	putchar('\n');
	for (int i = 0; i < NPCT; i++)
		if (run_capacity(r, tr, pcts[i], &res[i]))
			return -1;
	return 0;
}

/* ---- throughput ---- */

/* [reps]: seconds of whole replays and of their lookups alone, and the
 * ratios resident / tier of both */
struct tput {
	double *tier, *res, *ratio;
	double *tier_lk, *res_lk, *ratio_lk;
};

static int time_replays(struct cache_run *r,
			const struct cache_trace *tr,
			const struct cap_result *c, struct tput *s)
{
	const struct cache_opts *o = r->o;
	shemb_table *res, *t;
	int rc = 0;

	if (make_table(r, tr->rows, o->tput_dim, 0, 0, &res))
		return -1;
	for (int i = 0; !rc && i < o->reps; i++) {
		double t0;

		bench_progress("throughput: replay %d of %d", i + 1, o->reps);
		rc = make_table(r, tr->rows, o->tput_dim, c->slots,
				SHEMB_CACHE_LOOKAHEAD, &t);
		if (rc)
			break;
		r->compute_us = o->compute_us;
		t0 = bench_now();
		r->lookup_s = 0;
		rc = replay(r, t, tr, c->depth, o->window);
		s->tier[i] = bench_now() - t0;
		s->tier_lk[i] = r->lookup_s;
		shemb_table_destroy(t);
		t0 = bench_now();
		r->lookup_s = 0;
		rc = rc || replay(r, res, tr, c->depth, 0);
		s->res[i] = bench_now() - t0;
		s->res_lk[i] = r->lookup_s;
		r->compute_us = 0;
		s->ratio[i] = s->res[i] / s->tier[i];
		s->ratio_lk[i] = s->res_lk[i] / s->tier_lk[i];
	}
	bench_progress_done();
	shemb_table_destroy(res);
	return rc ? -1 : 0;
}

static double *zeros(int n)
{
	return calloc((size_t)n, sizeof(double));
}

static void print_tput(const struct cache_opts *o, int64_t ids,
		       const struct tput *s)
{
	printf("  %-34s %8.2f M ids/s\n", "with the device tier, all",
	       (double)ids / bench_stat_of(s->tier, o->reps).median / 1e6);
	printf("  %-34s %8.2f M ids/s\n", "all rows resident",
	       (double)ids / bench_stat_of(s->res, o->reps).median / 1e6);
	printf("  %-34s %8.3f (median of paired ratios)\n",
	       "tier / resident", bench_stat_of(s->ratio, o->reps).median);
	printf("  %-34s %8.2f M ids/s\n", "with the device tier, lookups",
	       (double)ids / bench_stat_of(s->tier_lk, o->reps).median / 1e6);
	printf("  %-34s %8.3f (prefetches and announcements\n%39s"
	       "run between steps)\n", "tier / resident, lookups alone",
	       bench_stat_of(s->ratio_lk, o->reps).median, "");
}

/* Ids per second with the tier over all rows resident, whole replays
 * and lookups alone; -1 on failure. */
static int throughput(struct cache_run *r, const struct cache_trace *tr,
		      const struct cap_result *c, double ratio[2])
{
	const struct cache_opts *o = r->o;
	struct tput s = { zeros(o->reps), zeros(o->reps), zeros(o->reps),
			  zeros(o->reps), zeros(o->reps), zeros(o->reps) };
	int64_t ids = 0;
	int rc = -1;

	for (int t = 0; t < tr->nb; t++)
		ids += tr->b[t].nids;
	if (s.tier && s.res && s.ratio && s.tier_lk && s.res_lk &&
	    s.ratio_lk && !time_replays(r, tr, c, &s)) {
		ratio[0] = bench_stat_of(s.ratio, o->reps).median;
		ratio[1] = bench_stat_of(s.ratio_lk, o->reps).median;
		printf("\nthroughput: %s at %d%% (%lld slots), lookahead, "
		       "prefetch depth %d,\nwindow %d, dim %d; median of %d "
		       "replay%s of %lld ids (lookups, prefetches\nand "
		       "announcements, NO_GRAD; %d us of compute after each "
		       "lookup)\n",
		       tr->name, pcts[TPUT_PCT], (long long)c->slots,
		       c->depth, o->window, o->tput_dim, o->reps,
		       o->reps > 1 ? "s" : "", (long long)ids, o->compute_us);
		print_tput(o, ids, &s);
		rc = 0;
	}
	free(s.tier);
	free(s.res);
	free(s.ratio);
	free(s.tier_lk);
	free(s.res_lk);
	free(s.ratio_lk);
	return rc;
}

/* ---- the runs ---- */

static void print_results(const struct cap_result *res,
			  const double ratio[2])
{
	putchar('\n');
	for (int i = 0; i < NPCT; i++)
		for (int p = 0; p < NPOL; p++)
			printf("result hit_%s_%d %.4f\n", pol_names[p],
			       pcts[i], res[i].rate[p]);
	printf("result lookahead_vs_belady_%d %.2f\n", pcts[TPUT_PCT],
	       100.0 * (res[TPUT_PCT].rate[P_BELADY] -
			res[TPUT_PCT].rate[P_LOOKAHEAD]));
	printf("result tier_vs_resident %.4f\n", ratio[0]);
	printf("result tier_lookups_vs_resident %.4f\n", ratio[1]);
}

/* Results, and the throughput, of the trace the results are of. */
static int finish(struct cache_run *r, const struct cache_trace *tr,
		  const struct cap_result *res, bool raised)
{
	double ratio[2];

	if (raised)
		printf("\n* raised to the most distinct ids of one batch: a "
		       "lookup needs them all at once\n");
	if (throughput(r, tr, &res[TPUT_PCT], ratio))
		return -1;
	print_results(res, ratio);
	return 0;
}

static bool any_raised(const struct cap_result *res)
{
	for (int i = 0; i < NPCT; i++)
		if (res[i].raised)
			return true;
	return false;
}

static int run_file(struct cache_run *r)
{
	const struct cache_opts *o = r->o;
	struct cap_result res[NPCT] = { { 0 } };
	struct cache_trace tr = { 0 };
	int64_t n, *ids = cache_load_trace(o->trace, &n, &tr.rows);
	int rc = -1;

	if (!ids)
		return -1;
	snprintf(tr.name, sizeof(tr.name), "%s", o->trace);
	if (cache_cut_trace(&tr, ids, n, o->batch, o->pooling))
		fprintf(stderr, "shemb-bench: out of memory\n");
	else if (!run_trace(r, &tr, res))
		rc = finish(r, &tr, res, any_raised(res));
	free(ids);
	cache_free_trace(&tr);
	return rc;
}

static int make_synthetic(struct cache_run *r, double s, struct cache_trace *tr)
{
	const struct cache_opts *o = r->o;
	struct bench_idgen g = { .dist = s > 0 ? BENCH_ZIPF : BENCH_UNIFORM,
				 .rows = o->rows, .perm = r->perm };
	int64_t nbags = (o->batch + o->pooling - 1) / o->pooling;

	if (s > 0) {
		bench_zipf_init(&g.zipf, o->rows, s);
		snprintf(tr->name, sizeof(tr->name), "zipf %g", s);
	} else {
		snprintf(tr->name, sizeof(tr->name), "uniform");
	}
	tr->rows = o->rows;
	tr->nb = (int)o->batches;
	bench_progress("making the %s trace", tr->name);
	if (bench_make_batches(r->pool, &g, o->seed, nbags, o->pooling,
			       tr->nb, &tr->b)) {
		bench_progress_done();
		fprintf(stderr, "shemb-bench: out of memory for the trace\n");
		return -1;
	}
	bench_progress_done();
	/* whole bags were drawn: keep --batch ids */
	for (int t = 0; t < tr->nb; t++) {
		tr->b[t].nids = o->batch;
		tr->b[t].offsets[nbags] = o->batch;
	}
	return 0;
}

/* Zipf 0.9, --zipf-s and 1.2 in order, then uniform (s = 0). */
static int synthetic_list(double zipf_s, double *s)
{
	double z[3] = { 0.9, 1.2, zipf_s };
	int n = 0;

	for (int i = 0; i < 3; i++) {
		for (int j = i + 1; j < 3; j++) {
			if (z[j] < z[i]) {
				double x = z[i];

				z[i] = z[j];
				z[j] = x;
			}
		}
		if (n == 0 || z[i] != s[n - 1])
			s[n++] = z[i];
	}
	s[n++] = 0;
	return n;
}

static int run_synthetic(struct cache_run *r)
{
	struct cap_result res[NPCT] = { { 0 } }, main_res[NPCT];
	struct cache_trace tr = { 0 }, main_tr = { 0 };
	bool raised = false;
	double s[4];
	int n = synthetic_list(r->o->zipf_s, s), rc = 0;

	for (int i = 0; !rc && i < n; i++) {
		rc = make_synthetic(r, s[i], &tr) || run_trace(r, &tr, res);
		raised = raised || any_raised(res);
		if (s[i] == r->o->zipf_s) {
			main_tr = tr;
			memcpy(main_res, res, sizeof(res));
		} else {
			cache_free_trace(&tr);
		}
		memset(&tr, 0, sizeof(tr));
	}
	if (!rc)
		rc = finish(r, &main_tr, main_res, raised);
	cache_free_trace(&main_tr);
	return rc;
}

/* ---- setup ---- */

static int open_run(struct cache_run *r)
{
	const struct cache_opts *o = r->o;
	int dim = o->dim > o->tput_dim ? o->dim : o->tput_dim;
	size_t nbags = (size_t)((o->batch + o->pooling - 1) / o->pooling);
	struct shemb_ctx_attr ca;
	int rc;

	shemb_ctx_attr_init(&ca);
	ca.nthreads = o->threads;
	ca.prefetch_thread = o->prefetch_thread;
	rc = shemb_ctx_create(&ca, &r->ctx);
	if (rc)
		return failed(NULL, "shemb_ctx_create", rc);
	r->out = malloc(nbags * (size_t)dim * sizeof(float));
	if (!r->out || bench_pool_create(o->threads, &r->pool) ||
	    (!o->trace && !(r->perm = bench_make_perm(o->rows, o->seed)))) {
		fprintf(stderr, "shemb-bench: out of memory\n");
		return -1;
	}
	printf("shemb-bench cache: libshemb %s\n", shemb_version_string());
	printf("  batches  %lld ids each, one lookup (NO_GRAD) of bags of %d "
	       "ids (SUM)\n", (long long)o->batch, o->pooling);
	printf("  policies lru, lfu: lookups only; lookahead: batch t + window "
	       "announced and\n           batch t + depth prefetched before "
	       "batch t is looked up (window %d,\n           depth %d, "
	       "lowered where depth + 1 batches do not fit); belady:\n"
	       "           the offline optimum, computed here\n", o->window,
	       o->depth);
	printf("  hit rate 1 - rows loaded into the tier / requests "
	       "(distinct ids of each batch,\n           summed); rows of "
	       "dim %d; threads %d\n", o->dim, o->threads);
	return 0;
}

static void close_run(struct cache_run *r)
{
	free(r->out);
	free(r->perm);
	bench_pool_destroy(r->pool);
	shemb_ctx_destroy(r->ctx);
}

int bench_cache(int argc, char **argv)
{
	struct cache_opts o;
	struct cache_run r = { .o = &o };
	int rc;

	if (parse(argc, argv, &o))
		return 2;
	bench_progress_on = isatty(STDERR_FILENO);
	rc = open_run(&r);
	if (!rc)
		rc = o.trace ? run_file(&r) : run_synthetic(&r);
	close_run(&r);
	return rc ? 1 : 0;
}
