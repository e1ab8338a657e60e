/*
 * bench_lookup.c - shemb-bench lookup: pooled SUM lookups, for inference
 * (NO_GRAD) and for training (the step plan is built too), measured against
 * a plain parallel gather of the same rows in the same run.
 *
 * The baseline copies each looked-up row with one memcpy from a malloc'd
 * fp32 array holding the same values as the table, into an output of
 * nids x dim; each thread takes a contiguous share of the ids.  It reads the
 * same bytes as the lookup (and writes far more); a lookup as fast as it
 * adds nothing to the cost of fetching its rows.
 *
 * The three measurements are interleaved, in an order rotated every
 * repetition, so drift of the shared machine hits them alike; each uses a
 * batch of its own, so none finds its rows in cache from the one before.
 */
#include "tools/bench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum kind { K_NOGRAD, K_TRAIN, K_COPY, NKINDS };

static const char *const kind_names[NKINDS] = {
	"lookup NO_GRAD", "lookup training", "copy (baseline)"
};
static const char *const kind_csv[NKINDS] = { "no_grad", "train", "copy" };

struct lookup_run {
	struct bench_env *e;
	shemb_table *t;
	size_t base_bytes, copy_bytes, out_bytes; /* sized for the sweep */
	float *base;            /* the baseline's rows x dim fp32 array */
	float *copy_out;        /* nids x dim */
	float *out;             /* the lookup's nbags x dim */
	double *times[NKINDS];  /* [reps] */
	double *phase[2][3];    /* [reps]: the library's own validate, plan
				 * and pool time of each lookup kind */
};

/* What one distribution gave: ratios to the copy per lookup kind, the
 * smallest over the configurations of a sweep. */
struct dist_result {
	bool done;
	double vs_copy[2];
};

static void keep_min(double *m, double v)
{
	if (v < *m)
		*m = v;
}

/* ---- the baseline ---- */

struct copy_job {
	const float *base;
	float *out;
	const int64_t *ids;
	int64_t nids;
	int dim;
};

/* A constant size lets the compiler inline the copy for common rows, as a
 * program with a fixed dim would. */
static inline void copy_row(float *dst, const float *src, size_t bytes)
{
	switch (bytes) {
	case 256:
		memcpy(dst, src, 256);
		break;
	case 512:
		memcpy(dst, src, 512);
		break;
	case 1024:
		memcpy(dst, src, 1024);
		break;
	default:
		memcpy(dst, src, bytes);
		break;
	}
}

static void copy_thread(void *arg, int tid, int nthreads)
{
	const struct copy_job *j = arg;
	size_t dim = (size_t)j->dim, bytes = dim * sizeof(float);
	int64_t lo, hi;

	bench_share(j->nids, tid, nthreads, &lo, &hi);
	for (int64_t k = lo; k < hi; k++)
		copy_row(j->out + (size_t)k * dim,
			 j->base + (size_t)j->ids[k] * dim, bytes);
}

static double time_copy(struct lookup_run *r, const struct bench_batch *b)
{
	struct copy_job j = { r->base, r->copy_out, b->ids, b->nids,
			      r->e->o->dim };
	double t0 = bench_now();

	bench_pool_run(r->e->pool, copy_thread, &j);
	return bench_now() - t0;
}

/* The baseline holds the table's values (read as fp32), so the two can be
 * checked against each other. */
static int fill_base(struct lookup_run *r)
{
	const int64_t chunk = 65536;
	int64_t rows = r->e->o->rows;
	int64_t *ids = malloc((size_t)chunk * sizeof(*ids));
	int rc = 0;

	if (!ids)
		return -1;
	for (int64_t r0 = 0; r0 < rows && !rc; r0 += chunk) {
		int64_t n = rows - r0 < chunk ? rows - r0 : chunk;

		for (int64_t i = 0; i < n; i++)
			ids[i] = r0 + i;
		rc = shemb_table_read_rows(r->t, n, ids,
					   r->base + (size_t)r0 * r->e->o->dim,
					   SHEMB_F32);
	}
	free(ids);
	return rc;
}

/* ---- the library ---- */

/* slot: the repetition whose times to record, or -1 for none */
static double time_lookup(struct lookup_run *r, const struct bench_batch *b,
			  enum kind k, int slot)
{
	struct shemb_bags bags = bench_bags_of(r->t, b);
	struct shemb_table_stats s0 = { .size = sizeof(s0) };
	struct shemb_table_stats s1 = { .size = sizeof(s1) };
	float *outs[1] = { r->out };
	unsigned flags = k == K_NOGRAD ? SHEMB_LOOKUP_NO_GRAD : 0;
	double t0, t;
	int rc;

	shemb_table_stats(r->t, &s0);
	t0 = bench_now();
	rc = shemb_lookup(r->e->ctx, 1, &bags, outs, flags);
	t = bench_now() - t0;
	if (rc) {
		fprintf(stderr, "shemb-bench: shemb_lookup: %s: %s\n",
			shemb_strerror(rc), shemb_ctx_last_error(r->e->ctx));
		return -1;
	}
	shemb_table_stats(r->t, &s1);
	if (slot >= 0) {
		r->phase[k][0][slot] = 1e-9 * (double)(s1.validate_ns -
						       s0.validate_ns);
		r->phase[k][1][slot] = 1e-9 * (double)(s1.plan_ns - s0.plan_ns);
		r->phase[k][2][slot] = 1e-9 * (double)(s1.pool_ns - s0.pool_ns);
	}
	return t;
}

/* ---- checks: no figure is printed for wrong output ---- */

static int check_bag(struct lookup_run *r, const struct bench_batch *b,
		     int64_t bag, float *rows)
{
	int dim = r->e->o->dim;
	int64_t beg = b->offsets[bag], len = b->offsets[bag + 1] - beg;
	const float *got = r->out + (size_t)bag * (size_t)dim;

	if (shemb_table_read_rows(r->t, len, b->ids + beg, rows, SHEMB_F32))
		return -1;
	return bench_check_sum(got, rows, len, dim, bag);
}

static int check_copy(struct lookup_run *r, const struct bench_batch *b,
		      int64_t k, float *row)
{
	size_t bytes = (size_t)r->e->o->dim * sizeof(float);

	if (shemb_table_read_rows(r->t, 1, b->ids + k, row, SHEMB_F32) ||
	    memcmp(row, r->copy_out + (size_t)k * (size_t)r->e->o->dim,
		   bytes)) {
		fprintf(stderr, "shemb-bench: CHECK FAILED: the baseline's "
			"copy of id %lld differs from the table's row\n",
			(long long)b->ids[k]);
		return -1;
	}
	return 0;
}

static int check(struct lookup_run *r, const struct bench_batch *b,
		 enum kind k)
{
	size_t dim = (size_t)r->e->o->dim;
	int64_t len = b->offsets[1] - b->offsets[0];
	int64_t last = b->nbags - 1;
	float *buf;
	int rc;

	if (b->offsets[last + 1] - b->offsets[last] > len)
		len = b->offsets[last + 1] - b->offsets[last];
	buf = malloc((size_t)(len + 1) * dim * sizeof(float));
	if (!buf)
		return -1;
	if (k == K_COPY)
		rc = check_copy(r, b, 0, buf) ||
		     check_copy(r, b, b->nids - 1, buf);
	else
		rc = check_bag(r, b, 0, buf) || check_bag(r, b, last, buf);
	free(buf);
	return rc ? -1 : 0;
}

/* ---- one distribution ---- */

static double measure(struct lookup_run *r, const struct bench_batch *b,
		      enum kind k, int slot)
{
	if (k == K_COPY)
		return time_copy(r, b);
	return time_lookup(r, b, k, slot);
}

/* Repetition 0 warms up and is checked; the others are timed. */
static int run_reps(struct lookup_run *r, const struct bench_batch *batches,
		    int dist)
{
	const struct bench_opts *o = r->e->o;
	int n = 0;

	for (int rep = 0; rep <= o->reps; rep++) {
		bench_progress("lookup %s: repetition %d of %d",
			       bench_dist_name(dist), rep, o->reps);
		for (int j = 0; j < NKINDS; j++) {
			enum kind k = (enum kind)((rep + j) % NKINDS);
			const struct bench_batch *b =
				&batches[n++ % r->e->nbatches];
			double t = measure(r, b, k, rep - 1);

			if (t < 0 || (rep == 0 && check(r, b, k)))
				return -1;
			if (rep > 0)
				r->times[k][rep - 1] = t;
		}
	}
	bench_progress_done();
	return 0;
}

/* Median over repetitions of copy time / lookup time, measured back to
 * back: steadier than a ratio of two separate medians. */
static double paired_ratio(const struct lookup_run *r, enum kind k)
{
	int reps = r->e->o->reps;
	double *q = malloc((size_t)reps * sizeof(*q));
	double m;

	if (!q)
		return NAN;
	for (int i = 0; i < reps; i++)
		q[i] = r->times[K_COPY][i] / r->times[k][i];
	m = bench_stat_of(q, reps).median;
	free(q);
	return m;
}

static void print_kind(struct lookup_run *r, int dist, enum kind k,
		       double ratio)
{
	const struct bench_opts *o = r->e->o;
	struct bench_stat st = bench_stat_of(r->times[k], o->reps);
	double nids = (double)o->batch * o->pooling;
	size_t esz = k == K_COPY ? 4 : bench_dtype_size(o->dtype);
	double gb = nids * o->dim * (double)esz / st.median / 1e9;
	struct bench_csv_row row = {
		"lookup", kind_csv[k], bench_optimizer_name(o->optimizer),
		dist, st.best, st.median, nids / st.median,
		nids / st.median, gb, ratio,
	};

	printf("  %-16s %9.3f %9.3f %10.2f %10.2f %8.2f", kind_names[k],
	       st.best * 1e3, st.median * 1e3, nids / st.best / 1e6,
	       nids / st.median / 1e6, gb);
	if (!isnan(ratio))
		printf(" %8.3f", ratio);
	putchar('\n');
	bench_csv_write(r->e, &row);
}

/* Median of the library's own time for a phase, in ms. */
static double phase_ms(const struct lookup_run *r, enum kind k, int phase)
{
	return 1e3 * bench_stat_of(r->phase[k][phase], r->e->o->reps).median;
}

static void print_split(const struct lookup_run *r)
{
	printf("  library's own split, median ms: NO_GRAD validate %.3f pool "
	       "%.3f; training validate %.3f plan %.3f pool %.3f\n",
	       phase_ms(r, K_NOGRAD, 0), phase_ms(r, K_NOGRAD, 2),
	       phase_ms(r, K_TRAIN, 0), phase_ms(r, K_TRAIN, 1),
	       phase_ms(r, K_TRAIN, 2));
}

static void print_dist(struct lookup_run *r, int dist,
		       const struct bench_batch *b, struct dist_result *res)
{
	int64_t d = bench_distinct(b);

	printf("\n%s", bench_dist_name(dist));
	if (dist == BENCH_ZIPF)
		printf(" (s = %g)", r->e->o->zipf_s);
	printf(": %lld distinct rows in a batch of %lld ids (%.1f%%)\n",
	       (long long)d, (long long)b->nids, 100.0 * (double)d /
	       (double)b->nids);
	printf("  %-16s %9s %9s %10s %10s %8s %8s\n", "", "best ms",
	       "median ms", "Mrows/s", "Mrows/s", "GB/s", "vs copy");
	printf("  %-16s %9s %9s %10s %10s %8s %8s\n", "", "", "", "best",
	       "median", "median", "median");
	double nograd = paired_ratio(r, K_NOGRAD);
	double train = paired_ratio(r, K_TRAIN);

	if (!res->done)
		res->vs_copy[K_NOGRAD] = res->vs_copy[K_TRAIN] = INFINITY;
	keep_min(&res->vs_copy[K_NOGRAD], nograd);
	keep_min(&res->vs_copy[K_TRAIN], train);
	res->done = true;
	print_kind(r, dist, K_NOGRAD, nograd);
	print_kind(r, dist, K_TRAIN, train);
	print_kind(r, dist, K_COPY, NAN);
	print_split(r);
}

static int run_dist(struct lookup_run *r, int dist, struct dist_result *res)
{
	struct bench_batch *batches;
	int rc;

	if (bench_batches(r->e, dist, &batches))
		return -1;
	rc = run_reps(r, batches, dist);
	if (!rc)
		print_dist(r, dist, &batches[0], res);
	bench_free_batches(batches, r->e->nbatches);
	return rc;
}

/* ---- setup and results ---- */

/* Arrays of one double per repetition; false when one is missing. */
static bool alloc_series(struct lookup_run *r, int reps)
{
	bool ok = true;

	for (int k = 0; k < NKINDS; k++) {
		r->times[k] = calloc((size_t)reps, sizeof(double));
		ok = ok && r->times[k];
	}
	for (int k = 0; k < 2; k++) {
		for (int i = 0; i < 3; i++) {
			r->phase[k][i] = calloc((size_t)reps, sizeof(double));
			ok = ok && r->phase[k][i];
		}
	}
	return ok;
}

/* The outputs, for the largest batch of the sweep. */
static int alloc_run(struct lookup_run *r)
{
	const struct bench_opts *o = r->e->o;
	size_t dim = (size_t)o->dim;

	r->base_bytes = (size_t)o->rows * dim * sizeof(float);
	r->copy_bytes = (size_t)bench_max_ids(o) * dim * sizeof(float);
	r->out_bytes = (size_t)bench_max_batch(o) * dim * sizeof(float);
	r->base = bench_alloc_big(r->e->pool, r->base_bytes, o->thp);
	r->copy_out = bench_alloc_big(r->e->pool, r->copy_bytes, o->thp);
	r->out = bench_alloc_big(r->e->pool, r->out_bytes, false);
	if (!alloc_series(r, o->reps) || !r->base || !r->copy_out ||
	    !r->out) {
		fprintf(stderr, "shemb-bench: out of memory\n");
		return -1;
	}
	return 0;
}

static void free_run(struct lookup_run *r)
{
	bench_free_big(r->base, r->base_bytes);
	bench_free_big(r->copy_out, r->copy_bytes);
	bench_free_big(r->out, r->out_bytes);
	for (int k = 0; k < NKINDS; k++)
		free(r->times[k]);
	for (int k = 0; k < 2; k++)
		for (int i = 0; i < 3; i++)
			free(r->phase[k][i]);
	shemb_table_destroy(r->t);
}

/* Over a sweep, each the smallest of its configurations. */
static void print_results(const struct dist_result *res)
{
	double min[2] = { INFINITY, INFINITY };

	for (int d = 0; d < 2; d++) {
		if (!res[d].done)
			continue;
		for (int k = 0; k < 2; k++)
			if (res[d].vs_copy[k] < min[k])
				min[k] = res[d].vs_copy[k];
	}
	printf("\nresult lookup_vs_copy %.3f\n", min[K_NOGRAD]);
	printf("result lookup_train_vs_copy %.3f\n", min[K_TRAIN]);
	for (int d = 0; d < 2; d++)
		if (res[d].done)
			printf("result lookup_vs_copy_%s %.3f\n",
			       bench_dist_name(d), res[d].vs_copy[K_NOGRAD]);
}

static void print_baseline(const struct lookup_run *r)
{
	long huge = bench_huge_mib();

	printf("  baseline %d threads memcpy each row from a malloc'd fp32 "
	       "array (%zu MiB%s)\n", r->e->o->threads, r->base_bytes >> 20,
	       r->e->o->thp ? ", huge pages requested" : "");
	if (huge >= 0)
		printf("  memory   %ld MiB of this process in huge pages\n",
		       huge);
}

static int prepare(struct lookup_run *r)
{
	if (bench_table_create(r->e, r->e->o->optimizer, &r->t) ||
	    alloc_run(r))
		return -1;
	bench_progress("copying the table into the baseline's array");
	if (fill_base(r)) {
		bench_progress_done();
		fprintf(stderr, "shemb-bench: shemb_table_read_rows: %s\n",
			shemb_ctx_last_error(r->e->ctx));
		return -1;
	}
	bench_progress_done();
	print_baseline(r);
	return 0;
}

int bench_lookup(const struct bench_opts *opts)
{
	struct bench_opts o = *opts;
	struct bench_env e;
	struct lookup_run r;
	struct dist_result res[2] = { { 0 } };
	int rc = 0;

	if (o.optimizer < 0)
		o.optimizer = SHEMB_OPT_SGD;
	if (bench_env_open(&e, &o, "lookup", NKINDS))
		return -1;
	memset(&r, 0, sizeof(r));
	r.e = &e;
	rc = prepare(&r);
	for (int i = 0; !rc && i < bench_configs(&o); i++) {
		bench_env_config(&e, &o, i);
		for (int d = 0; !rc && d < 2; d++)
			if (o.dist[d])
				rc = run_dist(&r, d, &res[d]);
	}
	bench_progress_done();
	if (!rc)
		print_results(res);
	free_run(&r);
	bench_env_close(&e);
	return rc;
}
