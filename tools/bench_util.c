/*
 * bench_util.c - clocks, random ids, batches, a thread pool, statistics
 * and output helpers for shemb-bench.
 */
#define _GNU_SOURCE
#include "tools/bench_util.h"

#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define HUGE_PAGE ((size_t)2 << 20)

/* ---- clocks ---- */

double bench_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- random numbers: splitmix64 ---- */

uint64_t bench_mix64(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void bench_rng_seed(struct bench_rng *r, uint64_t seed, uint64_t stream)
{
	r->s = bench_mix64(bench_mix64(seed) ^ bench_mix64(~stream));
}

uint64_t bench_rng_next(struct bench_rng *r)
{
	r->s += 0x9e3779b97f4a7c15ull;
	return bench_mix64(r->s);
}

double bench_rng_unit(struct bench_rng *r)
{
	return (double)(bench_rng_next(r) >> 11) * 0x1p-53;
}

/* Lemire's multiply-shift: no division, bias below 2^-64 * n. */
uint64_t bench_rng_below(struct bench_rng *r, uint64_t n)
{
	return (uint64_t)(((unsigned __int128)bench_rng_next(r) * n) >> 64);
}

/* ---- Zipf by rejection-inversion ---- */

/* log1p(t) / t and expm1(t) / t, accurate near t = 0. */
static double log1p_over(double t)
{
	if (fabs(t) > 1e-8)
		return log1p(t) / t;
	return 1.0 - t * (0.5 - t * (1.0 / 3.0 - 0.25 * t));
}

static double expm1_over(double t)
{
	if (fabs(t) > 1e-8)
		return expm1(t) / t;
	return 1.0 + t * 0.5 * (1.0 + t / 3.0 * (1.0 + 0.25 * t));
}

static double zipf_h(const struct bench_zipf *z, double x)
{
	return exp(-z->s * log(x));
}

/* H(x) = (x^(1-s) - 1) / (1 - s), a primitive of h; log(x) when s = 1. */
static double zipf_hint(const struct bench_zipf *z, double x)
{
	double lx = log(x);

	return expm1_over((1.0 - z->s) * lx) * lx;
}

static double zipf_hint_inv(const struct bench_zipf *z, double y)
{
	double t = y * (1.0 - z->s);

	if (t < -1.0)
		t = -1.0; /* rounding at the far end of the range */
	return exp(log1p_over(t) * y);
}

void bench_zipf_init(struct bench_zipf *z, int64_t n, double s)
{
	z->s = s;
	z->n = (double)n;
	z->h_x1 = zipf_hint(z, 1.5) - 1.0;
	z->h_n = zipf_hint(z, z->n + 0.5);
	z->cut = 2.0 - zipf_hint_inv(z, zipf_hint(z, 2.5) - zipf_h(z, 2.0));
}

int64_t bench_zipf_rank(const struct bench_zipf *z, struct bench_rng *r)
{
	for (;;) {
		double u = z->h_n + bench_rng_unit(r) * (z->h_x1 - z->h_n);
		double x = zipf_hint_inv(z, u);
		double k = floor(x + 0.5);

		if (k < 1.0)
			k = 1.0;
		else if (k > z->n)
			k = z->n;
		/* most draws are accepted by the first, cheap test */
		if (k - x <= z->cut ||
		    u >= zipf_hint(z, k + 0.5) - zipf_h(z, k))
			return (int64_t)k;
	}
}

/* ---- batches ---- */

const char *bench_dist_name(int dist)
{
	return dist == BENCH_ZIPF ? "zipf" : "uniform";
}

int64_t *bench_make_perm(int64_t rows, uint64_t seed)
{
	int64_t *p = malloc((size_t)rows * sizeof(*p));
	struct bench_rng r;

	if (!p)
		return NULL;
	bench_rng_seed(&r, seed, 0x7065726d); /* "perm" */
	for (int64_t i = 0; i < rows; i++)
		p[i] = i;
	for (int64_t i = rows - 1; i > 0; i--) {
		int64_t j = (int64_t)bench_rng_below(&r, (uint64_t)i + 1);
		int64_t t = p[i];

		p[i] = p[j];
		p[j] = t;
	}
	return p;
}

static int64_t draw_id(const struct bench_idgen *g, struct bench_rng *r)
{
	if (g->dist == BENCH_UNIFORM)
		return (int64_t)bench_rng_below(r, (uint64_t)g->rows);
	return g->perm[bench_zipf_rank(&g->zipf, r) - 1];
}

static int fill_batch(struct bench_batch *b, const struct bench_idgen *g,
		      uint64_t seed, uint64_t index, int64_t nbags,
		      int pooling)
{
	struct bench_rng r;

	b->nbags = nbags;
	b->nids = nbags * pooling;
	b->offsets = malloc((size_t)(nbags + 1) * sizeof(int64_t));
	b->ids = malloc((size_t)(b->nids ? b->nids : 1) * sizeof(int64_t));
	if (!b->offsets || !b->ids)
		return -1;
	for (int64_t i = 0; i <= nbags; i++)
		b->offsets[i] = i * pooling;
	bench_rng_seed(&r, seed, ((uint64_t)g->dist << 32) ^ index);
	for (int64_t k = 0; k < b->nids; k++)
		b->ids[k] = draw_id(g, &r);
	return 0;
}

struct batch_job {
	const struct bench_idgen *g;
	uint64_t seed;
	int64_t nbags;
	int pooling, n, failed;
	struct bench_batch *b;
};

static void batch_thread(void *arg, int tid, int nthreads)
{
	struct batch_job *j = arg;

	for (int i = tid; i < j->n; i += nthreads)
		if (fill_batch(&j->b[i], j->g, j->seed, (uint64_t)i, j->nbags,
			       j->pooling))
			j->failed = 1;
}

int bench_make_batches(struct bench_pool *pool, const struct bench_idgen *g,
		       uint64_t seed, int64_t nbags, int pooling, int n,
		       struct bench_batch **out)
{
	struct batch_job j = { g, seed, nbags, pooling, n, 0, NULL };

	j.b = calloc((size_t)n, sizeof(*j.b));
	if (!j.b)
		return -1;
	bench_pool_run(pool, batch_thread, &j);
	if (j.failed) {
		bench_free_batches(j.b, n);
		return -1;
	}
	*out = j.b;
	return 0;
}

void bench_free_batches(struct bench_batch *b, int n)
{
	if (!b)
		return;
	for (int i = 0; i < n; i++) {
		free(b[i].offsets);
		free(b[i].ids);
	}
	free(b);
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

int64_t bench_distinct(const struct bench_batch *b)
{
	int64_t *s = malloc((size_t)(b->nids ? b->nids : 1) * sizeof(*s));
	int64_t d = 0;

	if (!s)
		return -1;
	memcpy(s, b->ids, (size_t)b->nids * sizeof(*s));
	qsort(s, (size_t)b->nids, sizeof(*s), cmp_i64);
	for (int64_t k = 0; k < b->nids; k++)
		d += k == 0 || s[k] != s[k - 1];
	free(s);
	return d;
}

/* ---- thread pool: workers sleep on a condition variable between jobs ---- */

struct bench_worker {
	struct bench_pool *pool;
	int tid;
	pthread_t th;
};

struct bench_pool {
	int n;
	struct bench_worker *w;
	pthread_mutex_t mu;
	pthread_cond_t go, done;
	uint64_t gen;
	int pending;
	bool stop;
	bench_thread_fn fn;
	void *arg;
};

static void *worker_main(void *arg)
{
	struct bench_worker *w = arg;
	struct bench_pool *p = w->pool;
	uint64_t seen = 0;

	for (;;) {
		bench_thread_fn fn;
		void *fa;

		pthread_mutex_lock(&p->mu);
		while (p->gen == seen && !p->stop)
			pthread_cond_wait(&p->go, &p->mu);
		if (p->stop) {
			pthread_mutex_unlock(&p->mu);
			return NULL;
		}
		seen = p->gen;
		fn = p->fn;
		fa = p->arg;
		pthread_mutex_unlock(&p->mu);
		fn(fa, w->tid, p->n);
		pthread_mutex_lock(&p->mu);
		if (--p->pending == 0)
			pthread_cond_signal(&p->done);
		pthread_mutex_unlock(&p->mu);
	}
}

int bench_pool_create(int nthreads, struct bench_pool **out)
{
	struct bench_pool *p = calloc(1, sizeof(*p));

	if (!p)
		return -1;
	p->n = nthreads < 1 ? 1 : nthreads;
	p->w = calloc((size_t)p->n, sizeof(*p->w));
	if (!p->w) {
		free(p);
		return -1;
	}
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->go, NULL);
	pthread_cond_init(&p->done, NULL);
	for (int i = 1; i < p->n; i++) {
		p->w[i].pool = p;
		p->w[i].tid = i;
		if (pthread_create(&p->w[i].th, NULL, worker_main, &p->w[i])) {
			p->n = i; /* destroy joins the ones started */
			bench_pool_destroy(p);
			return -1;
		}
	}
	*out = p;
	return 0;
}

void bench_pool_destroy(struct bench_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = true;
	pthread_cond_broadcast(&p->go);
	pthread_mutex_unlock(&p->mu);
	for (int i = 1; i < p->n; i++)
		pthread_join(p->w[i].th, NULL);
	pthread_cond_destroy(&p->done);
	pthread_cond_destroy(&p->go);
	pthread_mutex_destroy(&p->mu);
	free(p->w);
	free(p);
}

int bench_pool_nthreads(const struct bench_pool *p)
{
	return p->n;
}

void bench_pool_run(struct bench_pool *p, bench_thread_fn fn, void *arg)
{
	if (p->n == 1) {
		fn(arg, 0, 1);
		return;
	}
	pthread_mutex_lock(&p->mu);
	p->fn = fn;
	p->arg = arg;
	p->pending = p->n - 1;
	p->gen++;
	pthread_cond_broadcast(&p->go);
	pthread_mutex_unlock(&p->mu);

	fn(arg, 0, p->n);

	pthread_mutex_lock(&p->mu);
	while (p->pending > 0)
		pthread_cond_wait(&p->done, &p->mu);
	pthread_mutex_unlock(&p->mu);
}

void bench_share(int64_t n, int tid, int nthreads, int64_t *lo, int64_t *hi)
{
	*lo = n * tid / nthreads;
	*hi = n * (tid + 1) / nthreads;
}

/* ---- memory ---- */

struct touch_job {
	char *p;
	size_t bytes;
};

static void touch_thread(void *arg, int tid, int nthreads)
{
	struct touch_job *j = arg;
	int64_t pages = (int64_t)((j->bytes + 4095) / 4096), lo, hi;
	size_t from, to;

	bench_share(pages, tid, nthreads, &lo, &hi);
	from = (size_t)lo * 4096;
	to = (size_t)hi * 4096 < j->bytes ? (size_t)hi * 4096 : j->bytes;
	if (from < to)
		memset(j->p + from, 0, to - from);
}

/* First touch from every thread, as the library fills its rows: the pages
 * are in place (and huge where granted) before anything is timed. */
void *bench_alloc_big(struct bench_pool *pool, size_t bytes, bool thp)
{
	struct touch_job j = { NULL, bytes };

	if (posix_memalign((void **)&j.p, HUGE_PAGE, bytes ? bytes : 1))
		return NULL;
#ifdef MADV_HUGEPAGE
	if (thp && bytes >= HUGE_PAGE)
		madvise(j.p, bytes, MADV_HUGEPAGE);
#endif
	bench_pool_run(pool, touch_thread, &j);
	return j.p;
}

void bench_free_big(void *p, size_t bytes)
{
	free(p);
}

long bench_huge_mib(void)
{
	FILE *f = fopen("/proc/self/smaps_rollup", "r");
	char line[256];
	long kb = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "AnonHugePages: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb < 0 ? -1 : kb / 1024;
}

/* ---- statistics ---- */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

struct bench_stat bench_stat_of(const double *t, int n)
{
	struct bench_stat st = { 0, 0 };
	double *s = malloc((size_t)n * sizeof(*s));

	if (!s || n < 1) {
		free(s);
		return st;
	}
	memcpy(s, t, (size_t)n * sizeof(*s));
	qsort(s, (size_t)n, sizeof(*s), cmp_double);
	st.best = s[0];
	st.median = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
	free(s);
	return st;
}

/* ---- checks and helpers ---- */

int bench_check_sum(const float *got, const float *rows, int64_t len,
		    int dim, int64_t bag)
{
	for (int c = 0; c < dim; c++) {
		float sum = 0.0f, mag = 0.0f;

		for (int64_t i = 0; i < len; i++) {
			sum += rows[(size_t)i * (size_t)dim + (size_t)c];
			mag += fabsf(rows[(size_t)i * (size_t)dim + (size_t)c]);
		}
		if (!(fabsf(got[c] - sum) <= 1e-5f * mag + 1e-30f)) {
			fprintf(stderr, "shemb-bench: CHECK FAILED: bag %lld "
				"column %d is %g, the sum of its rows %g\n",
				(long long)bag, c, (double)got[c], (double)sum);
			return -1;
		}
	}
	return 0;
}

void bench_busy_us(int us)
{
	double end = bench_now() + 1e-6 * us;

	while (bench_now() < end)
		;
}

int bench_parse_opts(int argc, char **argv, const struct option *lo,
		     bench_apply_fn apply, void *opts, void (*help)(void))
{
	char shorts[64] = "h";
	int c, k = 1;

	/* a long option whose value is a letter is also -letter */
	for (const struct option *o = lo; o->name && k < 60; o++)
		if (o->val > ' ' && o->val < 127 && o->val != 'h') {
			shorts[k++] = (char)o->val;
			if (o->has_arg == required_argument)
				shorts[k++] = ':';
		}
	shorts[k] = '\0';
	optind = 1;
	while ((c = getopt_long(argc, argv, shorts, lo, NULL)) != -1) {
		if (c == 'h') {
			help();
			exit(0);
		}
		if (c == '?') {
			fprintf(stderr, "Try 'shemb-bench --help'.\n");
			return -1;
		}
		if (apply(opts, c, optarg)) {
			const char *name = "?";

			for (const struct option *o = lo; o->name; o++)
				if (o->val == c)
					name = o->name;
			fprintf(stderr, "shemb-bench: bad value '%s' for "
				"--%s\n", optarg, name);
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "shemb-bench: unexpected argument '%s'\n",
			argv[optind]);
		return -1;
	}
	return 0;
}
