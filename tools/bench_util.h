/*
 * bench_util.h - the pieces shemb-bench's modes share: clocks, random ids,
 * bag batches, a small pthread pool, order statistics and output helpers.
 */
#ifndef SHEMB_BENCH_UTIL_H
#define SHEMB_BENCH_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tools/bench_csv.h"
#include "tools/bench_progress.h"

/* ---- clocks ---- */

double bench_now(void); /* CLOCK_MONOTONIC, seconds */

/* ---- random numbers ---- */

uint64_t bench_mix64(uint64_t z);

struct bench_rng {
	uint64_t s;
};

void bench_rng_seed(struct bench_rng *r, uint64_t seed, uint64_t stream);
uint64_t bench_rng_next(struct bench_rng *r);
double bench_rng_unit(struct bench_rng *r);           /* [0, 1) */
uint64_t bench_rng_below(struct bench_rng *r, uint64_t n); /* [0, n) */

/*
 * Zipf(s) over ranks 1..n by rejection-inversion (Hormann and Derflinger,
 * 1996): O(1) per draw, no table, any s > 0.
 */
struct bench_zipf {
	double s, n;
	double h_x1, h_n, cut;
};

void bench_zipf_init(struct bench_zipf *z, int64_t n, double s);
int64_t bench_zipf_rank(const struct bench_zipf *z, struct bench_rng *r);

/* ---- bag batches ---- */

enum bench_dist {
	BENCH_ZIPF = 0,
	BENCH_UNIFORM = 1
};

const char *bench_dist_name(int dist);

/* How the ids of a distribution are drawn. */
struct bench_idgen {
	int dist;
	int64_t rows;
	struct bench_zipf zipf;
	const int64_t *perm;    /* Zipf rank - 1 -> row; NULL for uniform */
};

/* One batch of nbags bags of `pooling` ids each, in CSR form. */
struct bench_batch {
	int64_t nbags, nids;
	int64_t *offsets;
	int64_t *ids;
};

struct bench_pool;

/* A random permutation of 0..rows-1 (hot Zipf ranks land anywhere). */
int64_t *bench_make_perm(int64_t rows, uint64_t seed);

/* Fill n batches in parallel; batch i depends only on (seed, i). */
int bench_make_batches(struct bench_pool *pool, const struct bench_idgen *g,
		       uint64_t seed, int64_t nbags, int pooling, int n,
		       struct bench_batch **out);
void bench_free_batches(struct bench_batch *b, int n);

/* Distinct ids of a batch (sorts a copy). */
int64_t bench_distinct(const struct bench_batch *b);

/* ---- a pool of threads that run one function on every thread ---- */

/* fn runs once on each of the pool's threads: tid 0 is the caller. */
typedef void (*bench_thread_fn)(void *arg, int tid, int nthreads);

int bench_pool_create(int nthreads, struct bench_pool **out);
void bench_pool_destroy(struct bench_pool *p);
int bench_pool_nthreads(const struct bench_pool *p);
void bench_pool_run(struct bench_pool *p, bench_thread_fn fn, void *arg);

/* The contiguous share [*lo, *hi) of n items that thread tid takes. */
void bench_share(int64_t n, int tid, int nthreads, int64_t *lo, int64_t *hi);

/* ---- memory ---- */

/* Zeroed, 2 MiB aligned, transparent huge pages requested when thp. */
void *bench_alloc_big(struct bench_pool *pool, size_t bytes, bool thp);
void bench_free_big(void *p, size_t bytes);

/* A mode's options: getopt_long from argv[1] with -h and the mode's long
 * options, each given to apply (which returns non-zero for a bad value);
 * -h or --help calls help and exits 0.  -1, with a message, for an
 * unknown option, a bad value or a stray argument. */
struct option;
typedef int (*bench_apply_fn)(void *opts, int c, const char *arg);
int bench_parse_opts(int argc, char **argv, const struct option *lo,
		     bench_apply_fn apply, void *opts, void (*help)(void));

/* Keep this thread busy for us microseconds (a simulated computation). */
void bench_busy_us(int us);

/* 0 when got[dim] is the sum of rows[len][dim] (within 1e-5 of the sum
 * of magnitudes), else -1 with a message naming bag. */
int bench_check_sum(const float *got, const float *rows, int64_t len,
		    int dim, int64_t bag);
/* AnonHugePages of this process, in MiB; -1 when unknown. */
long bench_huge_mib(void);

/* ---- statistics ---- */

struct bench_stat {
	double best, median;
};

/* Best (smallest) and median of n > 0 values; t is left as it is. */
struct bench_stat bench_stat_of(const double *t, int n);

/* ---- output: bench_progress.h and bench_csv.h ---- */

#endif
