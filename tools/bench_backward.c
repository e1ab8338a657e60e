/*
 * bench_backward.c - shemb-bench backward: the backward of a training step.
 * Each repetition makes a planned lookup of its own batch (not timed), then
 * times shemb_backward with a fixed random gradient: the gradients are
 * coalesced per distinct row and the optimizer updates each row once.
 *
 * Rates: rows/s counts distinct rows updated (the table's rows_updated),
 * ids/s the positions whose gradients were summed.
 */
#include "tools/bench.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct bwd_run {
	struct bench_env *e;
	shemb_table *t;
	int optimizer;
	float lr;
	float *out;             /* the lookup's nbags x dim */
	float *grad;            /* nbags x dim, uniform in [-1, 1) */
	double *times;          /* [reps] */
	double *phase[2];       /* [reps]: the library's own validate and
				 * update time */
	double rows;            /* rows updated, summed over timed reps */
	uint64_t steps;         /* backward calls made on the table */
};

/* What the run reports in its result lines: over a sweep, the smallest
 * of its configurations. */
struct bwd_result {
	bool done;
	double rows_per_s, ids_per_s;
};

static int fail(struct bwd_run *r, const char *what, int rc)
{
	fprintf(stderr, "shemb-bench: %s: %s: %s\n", what, shemb_strerror(rc),
		shemb_ctx_last_error(r->e->ctx));
	return -1;
}

static int lookup(struct bwd_run *r, const struct shemb_bags *bags)
{
	float *outs[1] = { r->out };
	int rc = shemb_lookup(r->e->ctx, 1, bags, outs, 0);

	return rc ? fail(r, "shemb_lookup", rc) : 0;
}

/* One step; returns the backward's time, and the rows it updated.  slot:
 * the repetition whose times to record, or -1 for none. */
static double step(struct bwd_run *r, const struct bench_batch *b,
		   uint64_t *rows, int slot)
{
	struct shemb_bags bags = bench_bags_of(r->t, b);
	struct shemb_table_stats s0 = { .size = sizeof(s0) };
	struct shemb_table_stats s1 = { .size = sizeof(s1) };
	const float *grads[1] = { r->grad };
	double t0, t;
	int rc;

	if (lookup(r, &bags))
		return -1;
	shemb_table_stats(r->t, &s0);
	t0 = bench_now();
	rc = shemb_backward(r->e->ctx, 1, &bags, grads);
	t = bench_now() - t0;
	if (rc)
		return fail(r, "shemb_backward", rc);
	r->steps++;
	shemb_table_stats(r->t, &s1);
	*rows = s1.rows_updated - s0.rows_updated;
	if (slot >= 0) {
		r->phase[0][slot] = 1e-9 * (double)(s1.validate_ns -
						    s0.validate_ns);
		r->phase[1][slot] = 1e-9 * (double)(s1.update_ns -
						    s0.update_ns);
	}
	return t;
}

/* ---- check: one row's update, from a reset state ---- */

/* The coalesced gradient of row id: its positions' bag gradients. */
static void row_grad(const struct bwd_run *r, const struct bench_batch *b,
		     int64_t id, double *g)
{
	int dim = r->e->o->dim;

	memset(g, 0, (size_t)dim * sizeof(*g));
	for (int64_t bag = 0; bag < b->nbags; bag++) {
		const float *gb = r->grad + (size_t)bag * (size_t)dim;

		for (int64_t k = b->offsets[bag]; k < b->offsets[bag + 1]; k++)
			if (b->ids[k] == id)
				for (int c = 0; c < dim; c++)
					g[c] += gb[c];
	}
}

/* The optimizer's step on a row whose state is the initial one (zeros);
 * t is the step count Adam's bias correction uses. */
static void expect(const struct bwd_run *r, double *w, const double *g,
		   uint64_t t)
{
	int dim = r->e->o->dim;
	double lr = r->lr, eps = 1e-8, sum = 0;

	for (int c = 0; c < dim; c++)
		sum += g[c] * g[c];
	for (int c = 0; c < dim; c++) {
		switch (r->optimizer) {
		case SHEMB_OPT_SGD:
			w[c] -= lr * g[c];
			break;
		case SHEMB_OPT_ADAGRAD:
			w[c] -= lr * g[c] / (fabs(g[c]) + eps);
			break;
		case SHEMB_OPT_ROWWISE_ADAGRAD:
			w[c] -= lr * g[c] / (sqrt(sum / dim) + eps);
			break;
		default: /* Adam, beta1 0.9, beta2 0.999 */
			w[c] -= lr * (0.1 * g[c] / (1 - pow(0.9, (double)t))) /
				(sqrt(0.001 * g[c] * g[c] /
				      (1 - pow(0.999, (double)t))) + eps);
			break;
		}
	}
}

static double tolerance(int dtype)
{
	if (dtype == SHEMB_F32)
		return 1e-4;
	return dtype == SHEMB_F16 ? 2e-3 : 1.6e-2;
}

static int compare(const struct bwd_run *r, const float *got,
		   const double *want, int64_t id)
{
	double tol = tolerance(r->e->o->dtype);

	for (int c = 0; c < r->e->o->dim; c++) {
		if (fabs(got[c] - want[c]) <= tol * (fabs(want[c]) + r->lr))
			continue;
		fprintf(stderr, "shemb-bench: CHECK FAILED: row %lld column "
			"%d is %g after the update, expected %g\n",
			(long long)id, c, (double)got[c], want[c]);
		return -1;
	}
	return 0;
}

/* The first id's row is reset to its initial optimizer state, stepped, and
 * compared with the optimizer's formula; the number of rows updated must
 * be the batch's distinct ids. */
static int check_step(struct bwd_run *r, const struct bench_batch *b)
{
	int dim = r->e->o->dim;
	int64_t id = b->ids[0];
	float *w = malloc((size_t)dim * sizeof(*w));
	double *g = malloc((size_t)dim * 2 * sizeof(*g)), *want = g + dim;
	uint64_t rows = 0;
	int rc = -1;

	if (!w || !g)
		goto out;
	if (shemb_table_read_rows(r->t, 1, &id, w, SHEMB_F32) ||
	    shemb_table_write_rows(r->t, 1, &id, w, SHEMB_F32,
				   SHEMB_WRITE_RESET_STATE))
		goto out;
	row_grad(r, b, id, g);
	for (int c = 0; c < dim; c++)
		want[c] = w[c];
	expect(r, want, g, r->steps + 1);
	if (step(r, b, &rows, -1) < 0 ||
	    shemb_table_read_rows(r->t, 1, &id, w, SHEMB_F32))
		goto out;
	if ((int64_t)rows != bench_distinct(b)) {
		fprintf(stderr, "shemb-bench: CHECK FAILED: %llu rows updated, "
			"the batch has %lld distinct ids\n",
			(unsigned long long)rows, (long long)bench_distinct(b));
		goto out;
	}
	rc = compare(r, w, want, id);
out:
	free(w);
	free(g);
	return rc;
}

/* ---- one optimizer and distribution ---- */

static int run_reps(struct bwd_run *r, const struct bench_batch *batches,
		    int dist)
{
	const struct bench_opts *o = r->e->o;

	r->rows = 0;
	if (check_step(r, &batches[0]))
		return -1;
	for (int rep = 1; rep <= o->reps; rep++) {
		const struct bench_batch *b = &batches[rep % r->e->nbatches];
		uint64_t rows;
		double t;

		bench_progress("backward %s %s: repetition %d of %d",
			       bench_optimizer_name(r->optimizer),
			       bench_dist_name(dist), rep, o->reps);
		t = step(r, b, &rows, rep - 1);
		if (t < 0)
			return -1;
		r->times[rep - 1] = t;
		r->rows += (double)rows;
	}
	bench_progress_done();
	return 0;
}

static void print_dist(struct bwd_run *r, int dist, struct bwd_result *res)
{
	const struct bench_opts *o = r->e->o;
	struct bench_stat st = bench_stat_of(r->times, o->reps);
	double rows = r->rows / o->reps, ids = (double)o->batch * o->pooling;
	struct bench_csv_row row = {
		"backward", "backward", bench_optimizer_name(r->optimizer),
		dist, st.best, st.median, ids / st.median, rows / st.median,
		NAN, NAN,
	};

	printf("\n%s, %s", bench_optimizer_name(r->optimizer),
	       bench_dist_name(dist));
	if (dist == BENCH_ZIPF)
		printf(" (s = %g)", o->zipf_s);
	printf(": %.0f rows updated per batch of %.0f ids (%.1f%%)\n", rows,
	       ids, 100.0 * rows / ids);
	printf("  %-16s %9s %9s %10s %10s %10s %10s\n", "", "best ms",
	       "median ms", "Mrows/s", "Mrows/s", "Mids/s", "Mids/s");
	printf("  %-16s %9s %9s %10s %10s %10s %10s\n", "", "", "", "best",
	       "median", "best", "median");
	printf("  %-16s %9.3f %9.3f %10.2f %10.2f %10.2f %10.2f\n",
	       "backward", st.best * 1e3, st.median * 1e3, rows / st.best / 1e6,
	       rows / st.median / 1e6, ids / st.best / 1e6,
	       ids / st.median / 1e6);
	printf("  library's own split, median ms: validate %.3f update "
	       "%.3f\n", 1e3 * bench_stat_of(r->phase[0], o->reps).median,
	       1e3 * bench_stat_of(r->phase[1], o->reps).median);
	bench_csv_write(r->e, &row);
	if (!res->done || rows / st.median < res->rows_per_s)
		res->rows_per_s = rows / st.median;
	if (!res->done || ids / st.median < res->ids_per_s)
		res->ids_per_s = ids / st.median;
	res->done = true;
}

static int run_dist(struct bwd_run *r, int dist, struct bwd_result *res)
{
	struct bench_batch *batches;
	int rc;

	if (bench_batches(r->e, dist, &batches))
		return -1;
	rc = run_reps(r, batches, dist);
	if (!rc)
		print_dist(r, dist, res);
	bench_free_batches(batches, r->e->nbatches);
	return rc;
}

/* ---- setup ---- */

/* Outputs and gradients for the largest batch of the sweep. */
static int alloc_run(struct bwd_run *r)
{
	const struct bench_opts *o = r->e->o;
	size_t n = (size_t)bench_max_batch(o) * (size_t)o->dim;
	struct bench_rng rng;

	r->out = malloc(n * sizeof(float));
	r->grad = malloc(n * sizeof(float));
	r->times = calloc((size_t)o->reps, sizeof(double));
	r->phase[0] = calloc((size_t)o->reps, sizeof(double));
	r->phase[1] = calloc((size_t)o->reps, sizeof(double));
	if (!r->out || !r->grad || !r->times || !r->phase[0] ||
	    !r->phase[1]) {
		fprintf(stderr, "shemb-bench: out of memory\n");
		return -1;
	}
	bench_rng_seed(&rng, o->seed, 0x67726164); /* "grad" */
	for (size_t i = 0; i < n; i++)
		r->grad[i] = (float)(2.0 * bench_rng_unit(&rng) - 1.0);
	return 0;
}

static void free_run(struct bwd_run *r)
{
	free(r->out);
	free(r->grad);
	free(r->times);
	free(r->phase[0]);
	free(r->phase[1]);
}

/* Measure every configuration and chosen distribution with one table of
 * this optimizer. */
static int run_optimizer(struct bwd_run *r, struct bench_opts *o, int opt,
			 struct bwd_result *res)
{
	struct shemb_table_attr ta = { .size = sizeof(ta) };
	int rc = 0;

	r->optimizer = opt;
	r->steps = 0;
	if (bench_table_create(r->e, opt, &r->t))
		return -1;
	shemb_table_get_attr(r->t, &ta);
	r->lr = ta.lr;
	for (int i = 0; !rc && i < bench_configs(o); i++) {
		bench_env_config(r->e, o, i);
		for (int d = 0; !rc && d < 2; d++)
			if (o->dist[d])
				rc = run_dist(r, d, &res[d]);
	}
	shemb_table_destroy(r->t);
	r->t = NULL;
	return rc;
}

/* adagrad on Zipf ids when measured, else the first configuration. */
static void print_results(const struct bwd_result *res, int nopt)
{
	const struct bwd_result *pick = NULL;

	for (int i = 0; i < nopt * 2 && !pick; i++)
		if (res[i].done)
			pick = &res[i];
	if (!pick)
		return;
	printf("\nresult backward_rows_per_s %.0f\n", pick->rows_per_s);
	printf("result backward_ids_per_s %.0f\n", pick->ids_per_s);
}

int bench_backward(const struct bench_opts *opts_in)
{
	struct bench_opts copy = *opts_in, *o = &copy;
	int opts[2] = { SHEMB_OPT_ADAGRAD, SHEMB_OPT_SGD };
	int nopt = 2;
	struct bwd_result res[4] = { { 0 } };
	struct bench_env e;
	struct bwd_run r;
	int rc;

	if (o->optimizer >= 0) {
		opts[0] = o->optimizer;
		nopt = 1;
	}
	if (bench_env_open(&e, o, "backward", 1))
		return -1;
	bench_progress_plan(nopt * bench_configs(o));
	memset(&r, 0, sizeof(r));
	r.e = &e;
	rc = alloc_run(&r);
	for (int i = 0; !rc && i < nopt; i++)
		rc = run_optimizer(&r, o, opts[i], &res[2 * i]);
	bench_progress_done();
	if (!rc)
		print_results(res, nopt);
	free_run(&r);
	bench_env_close(&e);
	return rc;
}
