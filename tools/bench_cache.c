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

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { P_LRU, P_LFU, P_LOOKAHEAD, P_BELADY, NPOL };
static const char *const pol_names[NPOL] = { "lru", "lfu", "lookahead",
					     "belady" };
static const int pol_enum[P_BELADY] = { SHEMB_CACHE_LRU, SHEMB_CACHE_LFU,
					SHEMB_CACHE_LOOKAHEAD };

struct cache_run {
	const struct cache_opts *o;
	FILE *csv;
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

/* The throughput: ids per second, whole replays and lookups alone, and
 * the medians of the paired ratios tier / all rows resident. */
struct tput_fig {
	double tier, res, ratio;
	double tier_lk, res_lk, ratio_lk;
};

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
	bench_progress_next();
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
	for (int i = 0; i < r->o->npct; i++)
		if (run_capacity(r, tr, (int)r->o->pcts[i], &res[i]))
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

static void print_tput(const struct cache_opts *o, const struct tput_fig *f)
{
	printf("  %-34s %8.2f M ids/s\n", "with the device tier, all",
	       f->tier / 1e6);
	printf("  %-34s %8.2f M ids/s\n", "all rows resident", f->res / 1e6);
	printf("  %-34s %8.3f (median of paired ratios)\n",
	       "tier / resident", f->ratio);
	printf("  %-34s %8.2f M ids/s\n", "with the device tier, lookups",
	       f->tier_lk / 1e6);
	printf("  %-34s %8.3f (prefetches and announcements\n%39s"
	       "run between steps)\n", "tier / resident, lookups alone",
	       f->ratio_lk, "");
}

static struct tput_fig tput_of(const struct cache_opts *o, int64_t ids,
			       const struct tput *s)
{
	struct tput_fig f;

	f.tier = (double)ids / bench_stat_of(s->tier, o->reps).median;
	f.res = (double)ids / bench_stat_of(s->res, o->reps).median;
	f.ratio = bench_stat_of(s->ratio, o->reps).median;
	f.tier_lk = (double)ids / bench_stat_of(s->tier_lk, o->reps).median;
	f.res_lk = (double)ids / bench_stat_of(s->res_lk, o->reps).median;
	f.ratio_lk = bench_stat_of(s->ratio_lk, o->reps).median;
	return f;
}

/* Ids per second with the tier and with all rows resident, whole
 * replays and lookups alone, at capacity c; -1 on failure. */
static int throughput(struct cache_run *r, const struct cache_trace *tr,
		      const struct cap_result *c, struct tput_fig *fig)
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
		*fig = tput_of(o, ids, &s);
		printf("\nthroughput: %s at %lld%% (%lld slots), lookahead, "
		       "prefetch depth %d,\nwindow %d, dim %d; median of %d "
		       "replay%s of %lld ids (lookups, prefetches\nand "
		       "announcements, NO_GRAD; %d us of compute after each "
		       "lookup)\n",
		       tr->name, (long long)o->pcts[o->tput],
		       (long long)c->slots, c->depth, o->window, o->tput_dim,
		       o->reps, o->reps > 1 ? "s" : "", (long long)ids,
		       o->compute_us);
		print_tput(o, fig);
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

/* ---- CSV: a line per trace and capacity ---- */

static const char cache_csv_header[] =
	"mode,trace,rows,used_rows,batches,batch_ids,pooling,dim,threads,"
	"capacity_pct,slots,depth,window,lru_hit_rate,lfu_hit_rate,"
	"lookahead_hit_rate,belady_hit_rate,lookahead_over_belady,tput_dim,"
	"reps,compute_us,tier_ids_per_s,resident_ids_per_s,tier_vs_resident,"
	"tier_lookup_ids_per_s,resident_lookup_ids_per_s,"
	"tier_lookups_vs_resident";

/* The throughput's columns: empty without it. */
static void csv_tput(FILE *f, const struct cache_opts *o,
		     const struct tput_fig *t)
{
	if (!t) {
		for (int k = 0; k < 9; k++)
			bench_csv_str(f, NULL);
		return;
	}
	bench_csv_int(f, o->tput_dim);
	bench_csv_int(f, o->reps);
	bench_csv_int(f, o->compute_us);
	bench_csv_num(f, t->tier);
	bench_csv_num(f, t->res);
	bench_csv_num(f, t->ratio);
	bench_csv_num(f, t->tier_lk);
	bench_csv_num(f, t->res_lk);
	bench_csv_num(f, t->ratio_lk);
}

/* The lines of a trace; tput: the throughput at capacity o->tput, or
 * NULL when it was not measured on this trace. */
static void write_csv(struct cache_run *r, const struct cache_trace *tr,
		      const struct cap_result *res,
		      const struct tput_fig *tput)
{
	const struct cache_opts *o = r->o;
	FILE *f = r->csv;

	for (int i = 0; f && i < o->npct; i++) {
		const struct cap_result *c = &res[i];

		bench_csv_begin(f, "cache");
		bench_csv_str(f, tr->name);
		bench_csv_int(f, tr->rows);
		bench_csv_int(f, tr->nuniq);
		bench_csv_int(f, tr->nb);
		bench_csv_int(f, o->batch);
		bench_csv_int(f, o->pooling);
		bench_csv_int(f, o->dim);
		bench_csv_int(f, o->threads);
		bench_csv_int(f, o->pcts[i]);
		bench_csv_int(f, c->slots);
		bench_csv_int(f, c->depth);
		bench_csv_int(f, o->window);
		for (int p = 0; p < NPOL; p++)
			bench_csv_num(f, c->rate[p]);
		bench_csv_num(f, c->rate[P_LOOKAHEAD] / c->rate[P_BELADY]);
		csv_tput(f, o, i == o->tput ? tput : NULL);
		bench_csv_end(f);
	}
}

/* ---- the runs ---- */

static void print_results(const struct cache_opts *o,
			  const struct cap_result *res,
			  const struct tput_fig *t)
{
	const struct cap_result *c = &res[o->tput];

	putchar('\n');
	for (int i = 0; i < o->npct; i++)
		for (int p = 0; p < NPOL; p++)
			printf("result hit_%s_%lld %.4f\n", pol_names[p],
			       (long long)o->pcts[i], res[i].rate[p]);
	printf("result lookahead_vs_belady_%lld %.2f\n",
	       (long long)o->pcts[o->tput],
	       100.0 * (c->rate[P_BELADY] - c->rate[P_LOOKAHEAD]));
	printf("result tier_vs_resident %.4f\n", t->ratio);
	printf("result tier_lookups_vs_resident %.4f\n", t->ratio_lk);
}

/* Results, throughput and CSV lines of the trace the results are of. */
static int finish(struct cache_run *r, const struct cache_trace *tr,
		  const struct cap_result *res, bool raised)
{
	struct tput_fig t;

	if (raised)
		printf("\n* raised to the most distinct ids of one batch: a "
		       "lookup needs them all at once\n");
	if (throughput(r, tr, &res[r->o->tput], &t))
		return -1;
	write_csv(r, tr, res, &t);
	print_results(r->o, res, &t);
	return 0;
}

static bool any_raised(const struct cache_opts *o,
		       const struct cap_result *res)
{
	for (int i = 0; i < o->npct; i++)
		if (res[i].raised)
			return true;
	return false;
}

static int run_file(struct cache_run *r)
{
	const struct cache_opts *o = r->o;
	struct cap_result res[MAX_CAPS] = { { 0 } };
	struct cache_trace tr = { 0 };
	int64_t n, *ids = cache_load_trace(o->trace, &n, &tr.rows);
	int rc = -1;

	if (!ids)
		return -1;
	bench_progress_plan(o->npct);
	snprintf(tr.name, sizeof(tr.name), "%s", o->trace);
	if (cache_cut_trace(&tr, ids, n, o->batch, o->pooling))
		fprintf(stderr, "shemb-bench: out of memory\n");
	else if (!run_trace(r, &tr, res))
		rc = finish(r, &tr, res, any_raised(o, res));
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
	struct cap_result res[MAX_CAPS] = { { 0 } }, main_res[MAX_CAPS];
	struct cache_trace tr = { 0 }, main_tr = { 0 };
	bool raised = false;
	double s[4];
	int n = synthetic_list(r->o->zipf_s, s), rc = 0;

	bench_progress_plan(n * r->o->npct);

	for (int i = 0; !rc && i < n; i++) {
		rc = make_synthetic(r, s[i], &tr) || run_trace(r, &tr, res);
		raised = raised || (!rc && any_raised(r->o, res));
		if (s[i] == r->o->zipf_s) {
			main_tr = tr;
			memcpy(main_res, res, sizeof(res));
		} else {
			if (!rc)
				write_csv(r, &tr, res, NULL);
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

/* 0, or -1 when the CSV file lacks lines (said why) */
static int close_run(struct cache_run *r)
{
	int rc = bench_csv_close(r->csv, r->o->csv, "shemb-bench cache");

	free(r->out);
	free(r->perm);
	bench_pool_destroy(r->pool);
	shemb_ctx_destroy(r->ctx);
	return rc;
}

int bench_cache(int argc, char **argv)
{
	struct cache_opts o;
	struct cache_run r = { .o = &o };
	int rc;

	if (cache_parse(argc, argv, &o))
		return 2;
	if (o.csv && !(r.csv = bench_csv_open(o.csv, cache_csv_header,
					      "shemb-bench cache")))
		return 2;
	rc = open_run(&r);
	if (!rc)
		rc = o.trace ? run_file(&r) : run_synthetic(&r);
	if (close_run(&r))
		rc = -1;
	return rc ? 1 : 0;
}
