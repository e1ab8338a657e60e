/*
 * shemb-bench.c - benchmarks of libshemb: options, the setup shared by the
 * modes, and dispatch.  See usage() or shemb-bench --help.
 */
#define _GNU_SOURCE
#include "tools/bench.h"
#include "tools/bench_comm.h"
#include "tools/bench_train.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Keep the ids of all batches of one distribution under this. */
#define BATCH_ID_BYTES_MAX ((size_t)512 << 20)

static const char *const dtype_names[] = { "f32", "f16", "bf16" };
static const char *const opt_names[] = { "sgd", "adagrad", "rowwise_adagrad",
					 "adam" };

static const char usage_text[] =
"Usage: shemb-bench MODE [options]\n"
"\n"
"Modes:\n"
"  lookup    pooled SUM lookups, inference (SHEMB_LOOKUP_NO_GRAD) and\n"
"            training (with the step plan), against a plain parallel gather\n"
"            (memcpy of each row from a malloc'd fp32 array) in the same run\n"
"  backward  shemb_backward after each planned lookup: coalesce the\n"
"            gradients per distinct row and apply the optimizer\n"
"  comm      collectives between ranks on this host: shemb_alltoallv and\n"
"            shemb_allreduce against OpenMPI and raw libfabric (options\n"
"            below)\n"
"  train     a training step loop over N local ranks: sharded tables\n"
"            against dense AllReduce and AllGather of gradients (options\n"
"            below)\n"
"  cache     the device tier (cache_rows): hit rates of LRU, LFU and\n"
"            lookahead with prefetch on id traces next to Belady's\n"
"            optimum, and lookups with the tier against all rows resident\n"
"            (options below)\n"
"  gpu       pooled lookups on a CUDA device (bags and output in device\n"
"            memory) against a device-to-device copy of the same bytes\n"
"            and PyTorch's embedding_bag (options below)\n"
"  sched     ranks on this host: a small alltoallv behind a 64 MiB\n"
"            allreduce against alone, and training steps started without\n"
"            waiting against blocking ones (options below)\n"
"  checkpoint  save and load of a table against dd writing and reading\n"
"            as many bytes in the same directory (options below)\n"
"\n"
"Options of lookup and backward:\n"
"  --rows N            rows of the table (default 4194304)\n"
"  --dim N             values per row (default 128)\n"
"  --pooling-factor L  ids per bag (default 32); a list such as 8,32,128\n"
"                      measures each value\n"
"  --batch L           bags per batch (default 4096); a list such as\n"
"                      1k,4k,16k measures each value with each pooling\n"
"                      factor\n"
"  --threads N         threads of the library and of the baseline (2)\n"
"  --reps N            timed repetitions after one warm-up (default 10)\n"
"  --dist D            zipf, uniform or both (default both)\n"
"  --zipf-s S          Zipf exponent: rank r has probability ~ 1/r^S (1.05)\n"
"  --dtype T           row storage: f32, f16 or bf16 (default f32)\n"
"  --optimizer O       sgd, adagrad, rowwise_adagrad or adam; backward\n"
"                      measures adagrad then sgd unless given, lookup uses\n"
"                      sgd (rows without optimizer state) unless given\n"
"  --seed N            seed of the ids (default 1)\n"
"  --no-thp            no transparent huge pages for the baseline's array\n"
"  --csv FILE          append one line per measured configuration to FILE\n"
"                      (with a header when FILE is new; a FILE with other\n"
"                      columns is refused)\n"
"  -h, --help          this text\n"
"\n"
"N takes a k, M or G suffix (x 2^10, 2^20, 2^30).  Every measurement uses\n"
"its own pre-generated batch, so caches do not hold the previous answer.\n"
"Figures give the best and the median of the repetitions; a ratio is the\n"
"median of ratios of measurements taken back to back.  The output ends\n"
"with lines \"result NAME VALUE\" for scripts; over a sweep of several\n"
"batch sizes or pooling factors each is the smallest over the sweep.\n"
"Every mode takes --csv FILE.  On a terminal, a line on standard error\n"
"shows the progress of long runs.\n";

static void usage(FILE *f)
{
	fputs(usage_text, f);
	fputc('\n', f);
	fputs(bench_comm_usage, f);
	fputc('\n', f);
	fputs(bench_train_usage, f);
	fputc('\n', f);
	fputs(bench_cache_usage, f);
	fputc('\n', f);
	fputs(bench_gpu_usage, f);
	fputc('\n', f);
	fputs(bench_sched_usage, f);
	fputc('\n', f);
	fputs(bench_ckpt_usage, f);
}

/* ---- options ---- */

static int parse_name(const char *s, const char *const *names, int n)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(s, names[i]))
			return i;
	return -1;
}

static int parse_dist(const char *s, struct bench_opts *o)
{
	o->dist[BENCH_ZIPF] = !strcmp(s, "zipf") || !strcmp(s, "both");
	o->dist[BENCH_UNIFORM] = !strcmp(s, "uniform") || !strcmp(s, "both");
	return o->dist[BENCH_ZIPF] || o->dist[BENCH_UNIFORM] ? 0 : -1;
}

static int parse_real(const char *s, double *out)
{
	char *end;

	errno = 0;
	*out = strtod(s, &end);
	return errno || end == s || *end || !(*out > 0.0) || *out > 100.0
		       ? -1 : 0;
}

enum {
	OPT_ROWS = 256, OPT_DIM, OPT_POOLING, OPT_BATCH, OPT_THREADS,
	OPT_REPS, OPT_DIST, OPT_ZIPF_S, OPT_DTYPE, OPT_OPTIMIZER, OPT_SEED,
	OPT_NO_THP, OPT_CSV
};

static const struct option long_opts[] = {
	{ "rows", required_argument, NULL, OPT_ROWS },
	{ "dim", required_argument, NULL, OPT_DIM },
	{ "pooling-factor", required_argument, NULL, OPT_POOLING },
	{ "batch", required_argument, NULL, OPT_BATCH },
	{ "threads", required_argument, NULL, OPT_THREADS },
	{ "reps", required_argument, NULL, OPT_REPS },
	{ "dist", required_argument, NULL, OPT_DIST },
	{ "zipf-s", required_argument, NULL, OPT_ZIPF_S },
	{ "dtype", required_argument, NULL, OPT_DTYPE },
	{ "optimizer", required_argument, NULL, OPT_OPTIMIZER },
	{ "seed", required_argument, NULL, OPT_SEED },
	{ "no-thp", no_argument, NULL, OPT_NO_THP },
	{ "csv", required_argument, NULL, OPT_CSV },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 }
};

static void set_defaults(struct bench_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->rows = 4194304;
	o->dim = 128;
	o->poolings[0] = 32;
	o->npooling = 1;
	o->batches[0] = 4096;
	o->nbatch = 1;
	o->threads = 2;
	o->reps = 10;
	o->dist[BENCH_ZIPF] = o->dist[BENCH_UNIFORM] = true;
	o->zipf_s = 1.05;
	o->dtype = SHEMB_F32;
	o->optimizer = -1;
	o->seed = 1;
	o->thp = true;
}

/* One option; returns -1 with a message when its value is bad. */
static int apply_opt(struct bench_opts *o, int c, const char *arg)
{
	int64_t v = 0;
	int rc = 0;

	switch (c) {
	case OPT_ROWS:
		rc = comm_parse_count(arg, 1, SHEMB_MAX_ROWS, &o->rows);
		break;
	case OPT_DIM:
		rc = comm_parse_count(arg, 1, SHEMB_MAX_DIM, &v);
		o->dim = (int)v;
		break;
	case OPT_POOLING:
		o->npooling = comm_parse_list(arg, 1, 1 << 20, o->poolings,
					      BENCH_MAX_SWEEP);
		rc = o->npooling < 1 ? -1 : 0;
		break;
	case OPT_BATCH:
		o->nbatch = comm_parse_list(arg, 1, INT32_MAX, o->batches,
					    BENCH_MAX_SWEEP);
		rc = o->nbatch < 1 ? -1 : 0;
		break;
	case OPT_THREADS:
		rc = comm_parse_count(arg, 1, 1024, &v);
		o->threads = (int)v;
		break;
	case OPT_REPS:
		rc = comm_parse_count(arg, 1, 100000, &v);
		o->reps = (int)v;
		break;
	case OPT_DIST:
		rc = parse_dist(arg, o);
		break;
	case OPT_ZIPF_S:
		rc = parse_real(arg, &o->zipf_s);
		break;
	case OPT_DTYPE:
		o->dtype = parse_name(arg, dtype_names, 3);
		rc = o->dtype < 0 ? -1 : 0;
		break;
	case OPT_OPTIMIZER:
		o->optimizer = parse_name(arg, opt_names, 4);
		rc = o->optimizer < 0 ? -1 : 0;
		break;
	case OPT_SEED:
		rc = comm_parse_count(arg, 0, INT64_MAX, &v);
		o->seed = (uint64_t)v;
		break;
	case OPT_NO_THP:
		o->thp = false;
		break;
	case OPT_CSV:
		o->csv = arg;
		break;
	}
	return rc;
}

static int lookup_apply(void *o, int c, const char *arg)
{
	return apply_opt(o, c, arg);
}

static void help(void)
{
	usage(stdout);
}

static int parse_args(int argc, char **argv, struct bench_opts *o)
{
	set_defaults(o);
	if (bench_parse_opts(argc, argv, long_opts, lookup_apply, o, help))
		return -1;
	if (bench_max_ids(o) > INT32_MAX) {
		fprintf(stderr, "shemb-bench: --batch x --pooling-factor must "
			"stay below 2^31 ids\n");
		return -1;
	}
	o->batch = o->batches[0];
	o->pooling = (int)o->poolings[0];
	return 0;
}

/* ---- names ---- */

const char *bench_dtype_name(int dtype)
{
	return dtype_names[dtype];
}

const char *bench_optimizer_name(int optimizer)
{
	return opt_names[optimizer];
}

size_t bench_dtype_size(int dtype)
{
	return dtype == SHEMB_F32 ? 4 : 2;
}

/* ---- the shared setup ---- */

/* ---- the sweep ---- */

int bench_configs(const struct bench_opts *o)
{
	return o->nbatch * o->npooling;
}

int64_t bench_max_batch(const struct bench_opts *o)
{
	int64_t m = 0;

	for (int i = 0; i < o->nbatch; i++)
		m = o->batches[i] > m ? o->batches[i] : m;
	return m;
}

int64_t bench_max_ids(const struct bench_opts *o)
{
	int64_t m = 0;

	for (int i = 0; i < o->npooling; i++)
		m = o->poolings[i] > m ? o->poolings[i] : m;
	return m * bench_max_batch(o);
}

static int batches_per_dist(const struct bench_opts *o, int per_rep)
{
	size_t one = (size_t)o->batch * (size_t)o->pooling * sizeof(int64_t);
	int64_t want = (int64_t)per_rep * (o->reps + 1);
	int64_t most = (int64_t)(BATCH_ID_BYTES_MAX / (one ? one : 1));

	if (most < 2)
		most = 2;
	return (int)(want < most ? want : most);
}

static void print_list(const char *what, const int64_t *v, int n)
{
	printf(" %s", what);
	for (int i = 0; i < n; i++)
		printf("%s%lld", i ? "," : " ", (long long)v[i]);
}

static void print_setup(const struct bench_env *e, const char *mode)
{
	const struct bench_opts *o = e->o;
	int64_t nids = o->batch * o->pooling;

	printf("shemb-bench %s: libshemb %s\n", mode, shemb_version_string());
	if (bench_configs(o) > 1) {
		printf("  sweep   ");
		print_list("bags per batch", o->batches, o->nbatch);
		print_list("x ids per bag", o->poolings, o->npooling);
		printf(": %d configurations\n", bench_configs(o));
	} else {
		printf("  batch    %lld bags x %d ids = %lld ids; %d batches "
		       "per distribution\n", (long long)o->batch, o->pooling,
		       (long long)nids, e->nbatches);
	}
	printf("  threads  %d; %d timed repetitions after one warm-up\n",
	       o->threads, o->reps);
}

void bench_env_config(struct bench_env *e, struct bench_opts *o, int i)
{
	o->batch = o->batches[i / o->npooling];
	o->pooling = (int)o->poolings[i % o->npooling];
	e->nbatches = batches_per_dist(o, e->per_rep);
	bench_progress_next();
	if (bench_configs(o) < 2)
		return;
	printf("\n== configuration %d of %d: %lld bags x %d ids = %lld ids; "
	       "%d batches per distribution\n", i + 1, bench_configs(o),
	       (long long)o->batch, o->pooling,
	       (long long)(o->batch * o->pooling), e->nbatches);
}

int bench_env_open(struct bench_env *e, const struct bench_opts *o,
		   const char *mode, int measures_per_rep)
{
	struct shemb_ctx_attr ca;
	int rc;

	memset(e, 0, sizeof(*e));
	e->o = o;
	e->per_rep = measures_per_rep;
	e->nbatches = batches_per_dist(o, measures_per_rep);
	shemb_ctx_attr_init(&ca);
	ca.nthreads = o->threads;
	rc = shemb_ctx_create(&ca, &e->ctx);
	if (rc) {
		fprintf(stderr, "shemb-bench: shemb_ctx_create: %s: %s\n",
			shemb_strerror(rc), shemb_ctx_last_error(NULL));
		return -1;
	}
	if (bench_pool_create(o->threads, &e->pool))
		goto fail;
	if (o->dist[BENCH_ZIPF] && !(e->perm = bench_make_perm(o->rows,
							       o->seed)))
		goto fail;
	e->csv = o->csv_file;
	bench_progress_plan(bench_configs(o));
	print_setup(e, mode);
	return 0;
fail:
	fprintf(stderr, "shemb-bench: out of memory\n");
	bench_env_close(e);
	return -1;
}

void bench_env_close(struct bench_env *e)
{
	free(e->perm);
	bench_pool_destroy(e->pool);
	shemb_ctx_destroy(e->ctx);
	memset(e, 0, sizeof(*e));
}

int bench_table_create(struct bench_env *e, int optimizer, shemb_table **t)
{
	const struct bench_opts *o = e->o;
	struct shemb_table_attr ta;
	double t0 = bench_now();
	int rc;

	shemb_table_attr_init(&ta);
	ta.name = "bench";
	ta.rows = o->rows;
	ta.dim = o->dim;
	ta.dtype = o->dtype;
	ta.optimizer = optimizer;
	bench_progress("creating a %lld x %d table", (long long)o->rows,
		       o->dim);
	rc = shemb_table_create(e->ctx, &ta, t);
	bench_progress_done();
	if (rc) {
		fprintf(stderr, "shemb-bench: shemb_table_create: %s: %s\n",
			shemb_strerror(rc), shemb_ctx_last_error(e->ctx));
		return -1;
	}
	printf("  table    %lld x %d %s, optimizer %s, made in %.2f s\n",
	       (long long)o->rows, o->dim, bench_dtype_name(o->dtype),
	       bench_optimizer_name(optimizer), bench_now() - t0);
	return 0;
}

int bench_batches(struct bench_env *e, int dist, struct bench_batch **out)
{
	const struct bench_opts *o = e->o;
	struct bench_idgen g = {
		.dist = dist, .rows = o->rows, .perm = e->perm
	};
	int rc;

	if (dist == BENCH_ZIPF)
		bench_zipf_init(&g.zipf, o->rows, o->zipf_s);
	bench_progress("making %d %s batches", e->nbatches,
		       bench_dist_name(dist));
	rc = bench_make_batches(e->pool, &g, o->seed, o->batch, o->pooling,
				e->nbatches, out);
	bench_progress_done();
	if (rc)
		fprintf(stderr, "shemb-bench: out of memory for the batches\n");
	return rc;
}

struct shemb_bags bench_bags_of(shemb_table *t, const struct bench_batch *b)
{
	struct shemb_bags bags;

	shemb_bags_init(&bags);
	bags.table = t;
	bags.pooling = SHEMB_POOL_SUM;
	bags.nbags = b->nbags;
	bags.offsets = b->offsets;
	bags.nids = b->nids;
	bags.ids = b->ids;
	return bags;
}

/* ---- CSV ---- */

void bench_csv_write(struct bench_env *e, const struct bench_csv_row *r)
{
	const struct bench_opts *o = e->o;
	FILE *f = e->csv;

	bench_csv_begin(f, r->mode);
	bench_csv_str(f, r->variant);
	bench_csv_str(f, bench_dist_name(r->dist));
	bench_csv_num(f, r->dist == BENCH_ZIPF ? o->zipf_s : NAN);
	bench_csv_str(f, bench_dtype_name(o->dtype));
	bench_csv_str(f, r->optimizer);
	bench_csv_int(f, o->rows);
	bench_csv_int(f, o->dim);
	bench_csv_int(f, o->pooling);
	bench_csv_int(f, o->batch);
	bench_csv_int(f, o->threads);
	bench_csv_int(f, o->reps);
	bench_csv_num(f, r->best_s * 1e3);
	bench_csv_num(f, r->median_s * 1e3);
	bench_csv_num(f, r->ids_per_s);
	bench_csv_num(f, r->rows_per_s);
	bench_csv_num(f, r->gb_per_s);
	bench_csv_num(f, r->vs_copy);
	bench_csv_end(f);
}

/* ---- main ---- */

/* The modes with options of their own, and the jobs that comm, train and
 * sched start (comm-rank, comm-raw, train-rank, sched-rank: not in the
 * usage). */
static const struct {
	const char *name;
	int (*run)(int argc, char **argv);
} own_modes[] = {
	{ "cache", bench_cache },
	{ "checkpoint", bench_ckpt },
	{ "gpu", bench_gpu },
	{ "sched", bench_sched },
	{ "sched-rank", bench_sched_rank },
	{ "train", bench_train },
	{ "train-rank", bench_train_rank },
	{ "comm", bench_comm },
	{ "comm-rank", bench_comm_rank },
	{ "comm-raw", bench_fi_raw },
};

int main(int argc, char **argv)
{
	struct bench_opts o;
	const char *mode;
	int rc;

	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	mode = argv[1];
	bench_progress_init();
	if (!strcmp(mode, "-h") || !strcmp(mode, "--help")) {
		usage(stdout);
		return 0;
	}
	/* the mode is argv[1]: parse what follows it as a command line of
	 * its own, with the program's name in front for getopt's messages */
	argv[1] = (char *)"shemb-bench";
	for (size_t i = 0; i < sizeof(own_modes) / sizeof(own_modes[0]); i++)
		if (!strcmp(mode, own_modes[i].name))
			return own_modes[i].run(argc - 1, argv + 1);
	if (strcmp(mode, "lookup") && strcmp(mode, "backward")) {
		fprintf(stderr, "shemb-bench: unknown mode '%s' (lookup, "
			"backward, comm, train, cache, gpu, sched or "
			"checkpoint; see --help)\n", mode);
		return 2;
	}
	if (parse_args(argc - 1, argv + 1, &o))
		return 2;
	/* refused before anything is measured, with the status of the
	 * other modes */
	if (o.csv && !(o.csv_file = bench_csv_open(o.csv, BENCH_CSV_HEADER,
						   "shemb-bench")))
		return 2;
	rc = !strcmp(mode, "lookup") ? bench_lookup(&o) : bench_backward(&o);
	if (bench_csv_close(o.csv_file, o.csv, "shemb-bench"))
		rc = -1;
	return rc ? 1 : 0;
}
