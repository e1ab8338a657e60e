/*
 * bench.h - shemb-bench: options, the setup every mode shares, and the
 * modes themselves.
 */
#ifndef SHEMB_BENCH_H
#define SHEMB_BENCH_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "shemb.h"
#include "tools/bench_util.h"

#define BENCH_MAX_SWEEP 16 /* values in a --batch or --pooling-factor list */

struct bench_opts {
	int64_t rows;
	int dim;
	int pooling;          /* ids per bag, of the configuration measured */
	int64_t batch;        /* bags per batch, ditto */
	int64_t batches[BENCH_MAX_SWEEP];  /* --batch: the sweep's values */
	int64_t poolings[BENCH_MAX_SWEEP]; /* --pooling-factor: ditto */
	int nbatch, npooling;
	int threads;
	int reps;
	bool dist[2];         /* indexed by enum bench_dist */
	double zipf_s;
	int dtype;            /* enum shemb_dtype */
	int optimizer;        /* enum shemb_optimizer; -1: the mode's default */
	const char *csv;      /* NULL: no CSV */
	FILE *csv_file;       /* csv, opened (and closed) by main */
	uint64_t seed;
	bool thp;             /* huge pages for the baseline's array */
};

/* What every mode holds while it runs. */
struct bench_env {
	const struct bench_opts *o;
	shemb_ctx *ctx;
	struct bench_pool *pool;  /* the bench's own threads (baseline) */
	int64_t *perm;            /* Zipf rank -> row */
	int nbatches;             /* batches made per distribution */
	int per_rep;              /* measurements per repetition */
	FILE *csv;                /* o->csv_file */
};

int bench_env_open(struct bench_env *e, const struct bench_opts *o,
		   const char *mode, int measures_per_rep);
void bench_env_close(struct bench_env *e);

/*
 * The sweep: every --batch value with every --pooling-factor value, batch
 * by batch.  bench_configs() counts them; bench_env_config() makes
 * configuration i the one measured (o is what e->o points to): its batch
 * and pooling in o, the batches to make in e, and a heading on the
 * standard output when there are several.
 */
int bench_configs(const struct bench_opts *o);
void bench_env_config(struct bench_env *e, struct bench_opts *o, int i);
/* The most bags, and the most ids, of one batch over the sweep. */
int64_t bench_max_batch(const struct bench_opts *o);
int64_t bench_max_ids(const struct bench_opts *o);

/* A table of the options' shape, with the given optimizer. */
int bench_table_create(struct bench_env *e, int optimizer, shemb_table **t);

/* The batches of one distribution, made in parallel. */
int bench_batches(struct bench_env *e, int dist, struct bench_batch **out);

/* Wrap a batch as the library's bag set of table t. */
struct shemb_bags bench_bags_of(shemb_table *t, const struct bench_batch *b);

const char *bench_dtype_name(int dtype);
const char *bench_optimizer_name(int optimizer);
size_t bench_dtype_size(int dtype);

/* CSV columns of lookup and backward; the rates are those of the median
 * time. */
#define BENCH_CSV_HEADER                                                    \
	"mode,variant,dist,zipf_s,dtype,optimizer,rows,dim,pooling,batch,"  \
	"threads,reps,best_ms,median_ms,ids_per_s,rows_per_s,gb_per_s,"     \
	"vs_copy"

/* One CSV line; empty fields for NaN. */
struct bench_csv_row {
	const char *mode, *variant, *optimizer;
	int dist;
	double best_s, median_s;
	double ids_per_s, rows_per_s, gb_per_s, vs_copy;
};

void bench_csv_write(struct bench_env *e, const struct bench_csv_row *r);

int bench_lookup(const struct bench_opts *o);
int bench_backward(const struct bench_opts *o);

/* shemb-bench cache [options], its own options: argv[0] is the program's
 * name. */
extern const char bench_cache_usage[];
int bench_cache(int argc, char **argv);
extern const char bench_gpu_usage[];
int bench_gpu(int argc, char **argv);
extern const char bench_ckpt_usage[];
int bench_ckpt(int argc, char **argv);
extern const char bench_sched_usage[];
int bench_sched(int argc, char **argv);
int bench_sched_rank(int argc, char **argv);

#endif
