/*
 * bench_sched.c - shemb-bench sched: how communication and computation
 * overlap across ranks on this host, in one run.
 *
 * (1) The latency of a small alltoallv of high priority (a lookup's)
 *     started while a 64 MiB allreduce of low priority (dense gradients)
 *     is in flight, against the same alltoallv alone; timed on each rank
 *     from its call to its return, and from the last rank's call to the
 *     last rank's return.
 * (2) A training loop with a dense computation: steps made with the
 *     blocking calls (compute and communication one after the other)
 *     against steps whose backward and next lookup are started without
 *     waiting and overlap the computation; the fraction of the embedding
 *     steps' time hidden, (blocking - started) / embedding steps alone.
 *     The computation is a busy loop on the application thread, then a
 *     sleep (off the host: a thread waiting for a device), by default
 *     twice as long as the steps alone, half of it able to hide them.
 * (3) A lookup of four tables started without waiting: when its first
 *     table's outputs are final (shemb_wait_part), against the whole;
 *     rows sent whole (the order of rows is what lets the first table
 *     finish early), then as the library chooses (pooled at the owners
 *     where that halves the bytes: small replies that land together).
 *
 * Every figure is the slowest rank's median.  The launcher starts the
 * ranks with shemb-run and prints what rank 0 reports.
 */
#define _GNU_SOURCE
#include "config.h"
#include "tools/bench.h"
#include "tools/bench_comm.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

const char bench_sched_usage[] =
"Options of sched (ranks on this host, started with shemb-run):\n"
"  -n, --ranks N       ranks (default 4)\n"
"  --provider P        libfabric provider (default shm)\n"
"  --compute-us N      dense computation per step, microseconds (default:\n"
"                      twice the embedding steps alone)\n"
"  --steps N           timed training steps per mode (default 30)\n"
"  --reps N            repetitions of the latency measurement (default 20)\n"
"  --chunk BYTES       libshemb's chunk_bytes (default: the library's)\n"
"  --in-flight N       libshemb's chunks_in_flight (default: the library's)\n"
"  --slice US          libshemb's comm_slice_us (default: the library's;\n"
"                      -1: the kernel's default slice)\n"
"  --slice-pairs N     then N runs of (2) at that slice and N at the\n"
"                      kernel's default, alternating (default 0)\n"
"  --shemb-run PATH    the launcher (default: next to this program)\n"
"  --csv FILE          append one line of the figures to FILE\n";

#define MAX_SLICE_PAIRS 50

struct sched_opts {
	int ranks, compute_us, steps, reps, in_flight, slice_us, slice_pairs;
	int64_t chunk;
	const char *provider, *shemb_run, *csv;
};

enum { SO_PROVIDER = 1, SO_COMPUTE, SO_STEPS, SO_REPS, SO_RUN, SO_CHUNK,
       SO_IN_FLIGHT, SO_SLICE, SO_SLICE_PAIRS, SO_CSV };

/*
 * Rank 0's figures for the launcher, a line after the ones it prints:
 *   @sched figures ALONE LOADED COMM BLOCKING STARTED FIRST WHOLE
 *                  OFF_BLOCKING OFF_STARTED CPUS FIRST_AUTO WHOLE_AUTO
 * seconds (CPUS: the CPUs the steps alone kept busy); then
 *   @sched setup CHUNK_BYTES CHUNKS_IN_FLIGHT COMPUTE_US COMM_SLICE_US
 * the values the context took and the dense computation of a step.
 */
#define SCHED_TAG "@sched"

static const struct option sched_long[] = {
	{ "ranks", required_argument, NULL, 'n' },
	{ "provider", required_argument, NULL, SO_PROVIDER },
	{ "compute-us", required_argument, NULL, SO_COMPUTE },
	{ "steps", required_argument, NULL, SO_STEPS },
	{ "reps", required_argument, NULL, SO_REPS },
	{ "shemb-run", required_argument, NULL, SO_RUN },
	{ "chunk", required_argument, NULL, SO_CHUNK },
	{ "in-flight", required_argument, NULL, SO_IN_FLIGHT },
	{ "slice", required_argument, NULL, SO_SLICE },
	{ "slice-pairs", required_argument, NULL, SO_SLICE_PAIRS },
	{ "csv", required_argument, NULL, SO_CSV },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 }
};

static int sched_apply(void *p, int c, const char *arg)
{
	struct sched_opts *o = p;

	switch (c) {
	case 'n':
		return comm_parse_int(arg, 1, 64, &o->ranks);
	case SO_PROVIDER:
		o->provider = arg;
		return 0;
	case SO_COMPUTE:
		return comm_parse_int(arg, 0, 10000000, &o->compute_us);
	case SO_STEPS:
		return comm_parse_int(arg, 2, 100000, &o->steps);
	case SO_REPS:
		return comm_parse_int(arg, 1, 10000, &o->reps);
	case SO_RUN:
		o->shemb_run = arg;
		return 0;
	case SO_CHUNK:
		return comm_parse_count(arg, 1, (int64_t)1 << 40, &o->chunk);
	case SO_IN_FLIGHT:
		return comm_parse_int(arg, 1, 256, &o->in_flight);
	case SO_SLICE: /* the library refuses what it does not take */
		if (!strcmp(arg, "-1")) {
			o->slice_us = -1;
			return 0;
		}
		return comm_parse_int(arg, 0, 100000, &o->slice_us);
	case SO_SLICE_PAIRS:
		return comm_parse_int(arg, 0, MAX_SLICE_PAIRS,
				      &o->slice_pairs);
	case SO_CSV:
		o->csv = arg;
		return 0;
	}
	return -1;
}

static void sched_help(void)
{
	fputs("Usage: shemb-bench sched [options]\n\n", stdout);
	fputs(bench_sched_usage, stdout);
}

static void defaults(struct sched_opts *o)
{
	*o = (struct sched_opts){ .ranks = 4, .compute_us = 0,
				  .steps = 30, .reps = 20,
				  .provider = "shm" };
}

/* ---- one rank ---- */

#define BIG_FLOATS ((size_t)16 << 20)  /* 64 MiB of f32 */
#define SMALL_BYTES 4096               /* per peer */
#define ROWS 1000000
#define DIM 64
#define BAGS 2048
#define POOLING 16
#define BATCHES 4

static shemb_ctx *ctx;
static int rank, world;

static void die(const char *what, int rc)
{
	fprintf(stderr, "rank %d: %s: %s: %s\n", rank, what,
		shemb_strerror(rc), shemb_ctx_last_error(ctx));
	exit(1);
}

#define MUST(call)                                                            \
	do {                                                                  \
		int rc_ = (call);                                             \
		if (rc_)                                                      \
			die(#call, rc_);                                      \
	} while (0)

/* The slowest rank's value. */
static double slowest(double v)
{
	double m;

	MUST(shemb_allreduce(ctx, &v, &m, 1, SHEMB_F64, SHEMB_REDUCE_MAX,
			     NULL));
	return m;
}

struct small {
	char *sb, *rb;
	size_t *counts, *displs;
};

static void small_make(struct small *s)
{
	s->sb = calloc((size_t)world, SMALL_BYTES);
	s->rb = calloc((size_t)world, SMALL_BYTES);
	s->counts = calloc((size_t)world, sizeof(size_t));
	s->displs = calloc((size_t)world, sizeof(size_t));
	if (!s->sb || !s->rb || !s->counts || !s->displs)
		die("memory", SHEMB_ENOMEM);
	for (int r = 0; r < world; r++) {
		s->counts[r] = SMALL_BYTES;
		s->displs[r] = (size_t)r * SMALL_BYTES;
	}
}

/* (1)'s medians, in seconds: [0] the slowest rank's of its own, [1] from
 * the last rank's call to the last rank's return (medians()). */
struct sched_latency {
	double quiet[2], alone[2], loaded[2];
};

/* One call after a barrier: its start and end on this host's clock
 * (CLOCK_MONOTONIC, the same for every rank here), in *t0 and *t1. */
static void small_once(struct small *s, double *t0, double *t1)
{
	MUST(shemb_barrier(ctx, NULL));
	*t0 = bench_now();
	MUST(shemb_alltoallv_prio(ctx, s->sb, s->counts, s->displs, s->rb,
				  s->counts, s->displs, SHEMB_PRIO_LOOKUP,
				  NULL));
	*t1 = bench_now();
}

/* Medians of n calls of every rank: the slowest rank's of its own times
 * from call to return (*own), and of the times from the last rank's call
 * to the last rank's return (*last).  The first includes the ranks'
 * skew out of the barrier, the second leaves it out. */
static void medians(int n, double *t0, double *t1, double *own,
		    double *last)
{
	double *d = calloc((size_t)n + 1, sizeof(double));
	double *all = calloc(4 * (size_t)n + 1, sizeof(double));
	double *mx = all + 2 * n;

	if (!d || !all)
		die("memory", SHEMB_ENOMEM);
	for (int r = 0; r < n; r++) {
		d[r] = t1[r] - t0[r];
		all[r] = t0[r];
		all[n + r] = t1[r];
	}
	*own = slowest(bench_stat_of(d, n).median);
	MUST(shemb_allreduce(ctx, all, mx, 2 * (size_t)n, SHEMB_F64,
			     SHEMB_REDUCE_MAX, NULL));
	for (int r = 0; r < n; r++)
		d[r] = mx[n + r] - mx[r];
	*last = bench_stat_of(d, n).median;
	free(d);
	free(all);
}

/*
 * (1): medians of the small alltoallv alone and behind the allreduce,
 * taken in turn, and alone back to back before any allreduce ran
 * (quiet).  Back to back, the ranks' threads still spin from the call
 * before and answer at once: with 4 ranks on 2 CPUs, a quiet call took
 * 0.04-0.11 ms, but 0.19 ms with 20 ms of pause before each, as long as
 * one after an allreduce.  The first is the baseline of like for like.
 * Each is taken both ways (medians()): with 4 ranks on 2 CPUs, the
 * ranks leave the barrier before each call up to 0.2 ms apart, as the
 * scheduler runs them, and the first to leave waits that long for the
 * last.
 */
static void latency(int reps, struct sched_latency *l)
{
	float *big = calloc(BIG_FLOATS, sizeof(float));
	float *sum = calloc(BIG_FLOATS, sizeof(float));
	double *t = calloc(4 * (size_t)reps, sizeof(double));
	double *a0 = t, *a1 = t + reps, *l0 = t + 2 * reps;
	double *l1 = t + 3 * reps;
	struct small s;

	if (!big || !sum || !t)
		die("memory", SHEMB_ENOMEM);
	small_make(&s);
	small_once(&s, a0, a1); /* warm-up: connections */
	for (int r = 0; r < reps; r++)
		small_once(&s, &a0[r], &a1[r]);
	medians(reps, a0, a1, &l->quiet[0], &l->quiet[1]);
	for (int r = 0; r < reps; r++) {
		shemb_request *req;

		small_once(&s, &a0[r], &a1[r]);
		MUST(shemb_allreduce(ctx, big, sum, BIG_FLOATS, SHEMB_F32,
				     SHEMB_REDUCE_SUM, &req));
		small_once(&s, &l0[r], &l1[r]);
		MUST(shemb_wait(req));
		shemb_request_free(req);
	}
	medians(reps, a0, a1, &l->alone[0], &l->alone[1]);
	medians(reps, l0, l1, &l->loaded[0], &l->loaded[1]);
	free(big);
	free(sum);
	free(t);
	free(s.sb);
	free(s.rb);
	free(s.counts);
	free(s.displs);
}

struct batch {
	int64_t offsets[BAGS + 1];
	int64_t *ids;
	float *out, *grad;
	struct shemb_bags b;
};

static void make_batches(shemb_table *t, struct batch *b)
{
	struct bench_rng r;

	bench_rng_seed(&r, 7, (uint64_t)rank);
	for (int k = 0; k < BATCHES; k++) {
		b[k].ids = malloc(BAGS * POOLING * sizeof(int64_t));
		b[k].out = malloc(BAGS * DIM * sizeof(float));
		b[k].grad = malloc(BAGS * DIM * sizeof(float));
		if (!b[k].ids || !b[k].out || !b[k].grad)
			die("memory", SHEMB_ENOMEM);
		for (int i = 0; i <= BAGS; i++)
			b[k].offsets[i] = (int64_t)i * POOLING;
		for (int i = 0; i < BAGS * POOLING; i++)
			b[k].ids[i] = (int64_t)bench_rng_below(&r, ROWS);
		for (int i = 0; i < BAGS * DIM; i++)
			b[k].grad[i] = 1e-3f * (float)(bench_rng_below(&r, 2001)
						       - 1000) / 1000.0f;
		shemb_bags_init(&b[k].b);
		b[k].b.table = t;
		b[k].b.nbags = BAGS;
		b[k].b.offsets = b[k].offsets;
		b[k].b.nids = BAGS * POOLING;
		b[k].b.ids = b[k].ids;
	}
}

static const float *const *grads(struct batch *b)
{
	return (const float *const *)&b->grad;
}

/* (3): a lookup of TABLES tables started without waiting: when the
 * first table's outputs are final (shemb_wait_part) and when all are,
 * medians of the slowest rank; the tables' pool_at as given. */
#define TABLES 4

static void per_table(int reps, int pool_at, double *first, double *whole)
{
	static int64_t offsets[BAGS + 1];
	int64_t *ids = malloc((size_t)TABLES * BAGS * POOLING * sizeof(*ids));
	float *out[TABLES];
	double *t1 = calloc((size_t)reps, sizeof(double));
	double *t2 = calloc((size_t)reps, sizeof(double));
	struct shemb_bags b[TABLES];
	shemb_table *t[TABLES];
	struct bench_rng r;

	if (!ids || !t1 || !t2)
		die("memory", SHEMB_ENOMEM);
	bench_rng_seed(&r, 11, (uint64_t)rank);
	for (int i = 0; i <= BAGS; i++)
		offsets[i] = (int64_t)i * POOLING;
	for (int k = 0; k < TABLES; k++) {
		struct shemb_table_attr ta;
		int64_t *mine = ids + (size_t)k * BAGS * POOLING;

		shemb_table_attr_init(&ta);
		ta.rows = ROWS / TABLES;
		ta.dim = DIM;
		ta.pool_at = pool_at;
		MUST(shemb_table_create(ctx, &ta, &t[k]));
		for (int i = 0; i < BAGS * POOLING; i++)
			mine[i] = (int64_t)bench_rng_below(&r, ROWS / TABLES);
		out[k] = malloc(BAGS * DIM * sizeof(float));
		if (!out[k])
			die("memory", SHEMB_ENOMEM);
		shemb_bags_init(&b[k]);
		b[k].table = t[k];
		b[k].nbags = BAGS;
		b[k].offsets = offsets;
		b[k].nids = BAGS * POOLING;
		b[k].ids = mine;
	}
	for (int i = -1; i < reps; i++) { /* one untimed */
		shemb_request *req;
		double t0;

		MUST(shemb_barrier(ctx, NULL));
		t0 = bench_now();
		MUST(shemb_lookup_start(ctx, TABLES, b, out,
					SHEMB_LOOKUP_NO_GRAD, &req));
		MUST(shemb_wait_part(req, 0));
		if (i >= 0)
			t1[i] = bench_now() - t0;
		MUST(shemb_wait(req));
		if (i >= 0)
			t2[i] = bench_now() - t0;
		shemb_request_free(req);
	}
	*first = slowest(bench_stat_of(t1, reps).median);
	*whole = slowest(bench_stat_of(t2, reps).median);
	for (int k = 0; k < TABLES; k++) {
		shemb_table_destroy(t[k]);
		free(out[k]);
	}
	free(ids);
	free(t1);
	free(t2);
}

/* The dense computation of a step: a busy loop on this thread, or (off
 * the host) a sleep, as a thread waiting for a device spends it. */
static void dense(int us, int off_host)
{
	struct timespec ts = { us / 1000000, (long)(us % 1000000) * 1000 };

	if (!off_host)
		bench_busy_us(us);
	else if (us > 0)
		while (nanosleep(&ts, &ts) && errno == EINTR)
			;
}

/*
 * The slowest rank's median of n training steps with c us of dense
 * computation, half before the embedding backward and the next lookup,
 * half after them (blocking calls) or while they run (started).
 */
static double step_loop(int n, int c, int off_host, int started,
			struct batch *b)
{
	double *t = calloc((size_t)n, sizeof(double)), med;

	if (!t)
		die("memory", SHEMB_ENOMEM);
	MUST(shemb_lookup(ctx, 1, &b[0].b, &b[0].out, 0));
	MUST(shemb_barrier(ctx, NULL));
	for (int s = 0; s < n; s++) {
		struct batch *x = &b[s % BATCHES];
		struct batch *y = &b[(s + 1) % BATCHES];
		shemb_request *bw, *lk;
		double t0 = bench_now();

		dense(c / 2, off_host); /* the dense forward */
		if (!started) {
			MUST(shemb_backward(ctx, 1, &x->b, grads(x)));
			MUST(shemb_lookup(ctx, 1, &y->b, &y->out, 0));
			dense(c - c / 2, off_host); /* the dense backward */
		} else {
			MUST(shemb_backward_start(ctx, 1, &x->b, grads(x),
						  &bw));
			MUST(shemb_lookup_start(ctx, 1, &y->b, &y->out, 0,
						&lk));
			dense(c - c / 2, off_host); /* meanwhile */
			MUST(shemb_wait(bw));
			MUST(shemb_wait(lk));
			shemb_request_free(bw);
			shemb_request_free(lk);
		}
		t[s] = bench_now() - t0;
	}
	/* the last lookup's plan is used up before the next loop */
	MUST(shemb_backward(ctx, 1, &b[n % BATCHES].b,
			    grads(&b[n % BATCHES])));
	med = slowest(bench_stat_of(t, n).median);
	free(t);
	return med;
}

static double cpu_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The ranks' processor time over the slowest rank's wall time. */
static double cpus_busy(double cpu, double wall)
{
	double sum;

	MUST(shemb_allreduce(ctx, &cpu, &sum, 1, SHEMB_F64, SHEMB_REDUCE_SUM,
			     NULL));
	wall = slowest(wall);
	return wall > 0 ? sum / wall : NAN;
}

struct step_figs {
	double comm;            /* embedding steps alone */
	double cpus;            /* the CPUs they kept busy, all ranks */
	int compute_us;         /* dense computation per step */
	double serial[2];       /* blocking: busy, off the host */
	double overlap[2];      /* started: busy, off the host */
};

/*
 * (2): the embedding steps alone, then with the computation, busy and off
 * the host, blocking and started.  compute_us 0: twice the steps alone,
 * so that the half that can run under them is as long as they are.
 */
static void steps(int n, int compute_us, struct batch *b,
		  struct step_figs *f)
{
	double c0 = cpu_seconds(), w0 = bench_now();

	f->comm = step_loop(n, 0, 0, 0, b);
	f->cpus = cpus_busy(cpu_seconds() - c0, bench_now() - w0);
	/* every rank has the same f->comm (slowest), so the same c */
	f->compute_us = compute_us ? compute_us : (int)(2e6 * f->comm + 0.5);
	for (int off = 0; off < 2; off++) {
		f->serial[off] = step_loop(n, f->compute_us, off, 0, b);
		f->overlap[off] = step_loop(n, f->compute_us, off, 1, b);
	}
}

/* The slowest rank's medians, in seconds. */
struct sched_figs {
	struct sched_latency lat;      /* (1) */
	struct step_figs st;           /* (2) */
	double first[2], whole[2];     /* (3): rows whole, pool_at AUTO */
};

/* (blocking - started) / the embedding steps alone */
static double hidden(double comm, double serial, double overlap)
{
	return comm > 0 ? (serial - overlap) / comm : NAN;
}

/*
 * (2) in words.  The steps can run only under the half of the computation
 * after their start, so at most that half over the steps alone is hidden.
 */
static void report_steps(const struct step_figs *f)
{
	double half = 1e-6 * (f->compute_us - f->compute_us / 2);
	double most = f->comm > 0 ? fmin(half, f->comm) / f->comm : NAN;
	static const char *const kind[2] = {
		"busy on the application thread",
		"off the host (the thread sleeps, as one waiting for a "
		"device)"
	};

	printf("(2) step of %d bags x %d ids, %d x %d table, dense compute "
	       "%d us a step:\n", BAGS, POOLING, ROWS, DIM, f->compute_us);
	printf("    embedding steps alone %.2f ms (the ranks kept %.2f of "
	       "this host's %ld CPUs busy)\n", f->comm * 1e3, f->cpus,
	       sysconf(_SC_NPROCESSORS_ONLN));
	for (int off = 0; off < 2; off++)
		printf("    compute %s:\n      blocking %.2f ms, started "
		       "without waiting %.2f ms: %.2f of the steps hidden\n",
		       kind[off], f->serial[off] * 1e3, f->overlap[off] * 1e3,
		       hidden(f->comm, f->serial[off], f->overlap[off]));
	printf("    (the steps run under half the compute: at most %.2f "
	       "can be hidden)\n", most);
}

static void report_latency(const struct sched_latency *l)
{
	static const char *const how[2] = {
		"each rank from its call to its return",
		"from the last rank's call to the last rank's return"
	};

	printf("(1) alltoallv of %d B per peer, alone (each time after an "
	       "allreduce), while a\n    64 MiB allreduce is in flight, and "
	       "quiet (back to back before any ran):\n", SMALL_BYTES);
	for (int k = 0; k < 2; k++)
		printf("    %s:\n      alone %.1f us, in flight %.1f us "
		       "(%.2fx); quiet %.1f us (%.2fx)\n", how[k],
		       l->alone[k] * 1e6, l->loaded[k] * 1e6,
		       l->loaded[k] / l->alone[k], l->quiet[k] * 1e6,
		       l->loaded[k] / l->quiet[k]);
}

/* Rank 0's report: the text, the result lines, then the tagged figures
 * for the launcher's CSV line. */
static void report(const struct shemb_ctx_attr *ca, const struct sched_figs *f)
{
	const struct step_figs *st = &f->st;

	printf("ranks %d, provider %s, 1 thread each, chunk_bytes %zu, "
	       "chunks_in_flight %d, comm_slice_us %d\n", world, ca->provider,
	       ca->chunk_bytes, ca->chunks_in_flight, ca->comm_slice_us);
	report_latency(&f->lat);
	report_steps(st);
	printf("(3) lookup of %d tables of %d x %d (%d bags x %d ids each), "
	       "started:\n    rows sent whole (pool_at REQUESTER): first "
	       "table final after %.2f ms, all after %.2f ms\n    the "
	       "library's choice (pool_at AUTO): %.2f ms, %.2f ms\n", TABLES,
	       ROWS / TABLES, DIM, BAGS, POOLING, f->first[0] * 1e3,
	       f->whole[0] * 1e3, f->first[1] * 1e3, f->whole[1] * 1e3);
	/* the headline figures end the output */
	printf("result comm_hidden_fraction_compute_off_host %.3f\n",
	       hidden(st->comm, st->serial[1], st->overlap[1]));
	printf("result priority_latency_vs_alone_from_last_call %.3f\n",
	       f->lat.loaded[1] / f->lat.alone[1]);
	printf("result first_table_vs_whole_lookup_auto %.3f\n",
	       f->first[1] / f->whole[1]);
	printf("result first_table_vs_whole_lookup %.3f\n",
	       f->first[0] / f->whole[0]);
	printf("result priority_latency_vs_alone %.3f\n",
	       f->lat.loaded[0] / f->lat.alone[0]);
	printf("result comm_hidden_fraction %.3f\n",
	       hidden(st->comm, st->serial[0], st->overlap[0]));
	printf(SCHED_TAG " figures %.9g %.9g %.9g %.9g %.9g %.9g %.9g %.9g "
	       "%.9g %.9g %.9g %.9g\n", f->lat.alone[0], f->lat.loaded[0],
	       st->comm,
	       st->serial[0], st->overlap[0], f->first[0], f->whole[0],
	       st->serial[1], st->overlap[1], st->cpus, f->first[1],
	       f->whole[1]);
	printf(SCHED_TAG " setup %zu %d %d %d\n", ca->chunk_bytes,
	       ca->chunks_in_flight, st->compute_us, ca->comm_slice_us);
}

int bench_sched_rank(int argc, char **argv)
{
	struct sched_opts o;
	struct shemb_ctx_attr ca;
	struct shemb_table_attr ta;
	struct batch b[BATCHES];
	struct sched_figs f;
	shemb_table *t;

	defaults(&o);
	if (bench_parse_opts(argc, argv, sched_long, sched_apply, &o,
			     sched_help))
		return 2;
	shemb_ctx_attr_init(&ca);
	ca.nthreads = 1;
	ca.chunk_bytes = (size_t)o.chunk;
	ca.chunks_in_flight = o.in_flight;
	ca.comm_slice_us = o.slice_us;
	MUST(shemb_ctx_create(&ca, &ctx));
	shemb_ctx_get_attr(ctx, &ca);
	rank = ca.rank;
	world = ca.world_size;
	latency(o.reps, &f.lat);
	per_table(o.reps, SHEMB_POOL_AT_REQUESTER, &f.first[0], &f.whole[0]);
	per_table(o.reps, SHEMB_POOL_AT_AUTO, &f.first[1], &f.whole[1]);
	shemb_table_attr_init(&ta);
	ta.name = "sched";
	ta.rows = ROWS;
	ta.dim = DIM;
	MUST(shemb_table_create(ctx, &ta, &t));
	make_batches(t, b);
	steps(o.steps, o.compute_us, b, &f.st);
	if (rank == 0)
		report(&ca, &f);
	for (int k = 0; k < BATCHES; k++) {
		free(b[k].ids);
		free(b[k].out);
		free(b[k].grad);
	}
	shemb_table_destroy(t);
	shemb_ctx_destroy(ctx);
	return 0;
}

/* ---- the launcher ---- */

static const char sched_csv_header[] =
	"mode,provider,ranks,chunk_bytes,chunks_in_flight,comm_slice_us,"
	"compute_us,steps,"
	"reps,alltoallv_bytes_per_peer,alone_us,loaded_us,"
	"priority_latency_vs_alone,comm_ms,blocking_ms,started_ms,"
	"comm_hidden_fraction,first_table_ms,whole_lookup_ms,"
	"first_table_vs_whole_lookup,comm_cpus_busy,off_host_blocking_ms,"
	"off_host_started_ms,comm_hidden_fraction_compute_off_host,"
	"first_table_auto_ms,whole_lookup_auto_ms,"
	"first_table_vs_whole_lookup_auto";

/* The figures of rank 0's SCHED_TAG lines, in their order. */
enum { V_ALONE, V_LOADED, V_COMM, V_BLOCKING, V_STARTED, V_FIRST, V_WHOLE,
       V_OFF_BLOCKING, V_OFF_STARTED, V_CPUS, V_FIRST_AUTO, V_WHOLE_AUTO,
       V_CHUNK, V_IN_FLIGHT, V_COMPUTE, V_SLICE, V_COUNT };

/* The CSV line of rank 0's figures. */
static void write_csv(const struct sched_opts *o, FILE *f, const double *v)
{
	bench_csv_begin(f, "sched");
	bench_csv_str(f, o->provider);
	bench_csv_int(f, o->ranks);
	bench_csv_int(f, (long long)v[V_CHUNK]);
	bench_csv_int(f, (long long)v[V_IN_FLIGHT]);
	bench_csv_int(f, (long long)v[V_SLICE]);
	bench_csv_int(f, (long long)v[V_COMPUTE]);
	bench_csv_int(f, o->steps);
	bench_csv_int(f, o->reps);
	bench_csv_int(f, SMALL_BYTES);
	bench_csv_num(f, v[V_ALONE] * 1e6);
	bench_csv_num(f, v[V_LOADED] * 1e6);
	bench_csv_num(f, v[V_LOADED] / v[V_ALONE]);
	bench_csv_num(f, v[V_COMM] * 1e3);
	bench_csv_num(f, v[V_BLOCKING] * 1e3);
	bench_csv_num(f, v[V_STARTED] * 1e3);
	bench_csv_num(f, hidden(v[V_COMM], v[V_BLOCKING], v[V_STARTED]));
	bench_csv_num(f, v[V_FIRST] * 1e3);
	bench_csv_num(f, v[V_WHOLE] * 1e3);
	bench_csv_num(f, v[V_FIRST] / v[V_WHOLE]);
	bench_csv_num(f, v[V_CPUS]);
	bench_csv_num(f, v[V_OFF_BLOCKING] * 1e3);
	bench_csv_num(f, v[V_OFF_STARTED] * 1e3);
	bench_csv_num(f, hidden(v[V_COMM], v[V_OFF_BLOCKING],
				v[V_OFF_STARTED]));
	bench_csv_num(f, v[V_FIRST_AUTO] * 1e3);
	bench_csv_num(f, v[V_WHOLE_AUTO] * 1e3);
	bench_csv_num(f, v[V_FIRST_AUTO] / v[V_WHOLE_AUTO]);
	bench_csv_end(f);
}

#define MAX_RESULTS 16

/* Rank 0's lines of a job: its figures into v; with res, its other lines
 * printed but for the result lines, which res keeps (pointers into out)
 * for the end of the output.  0, or -1 when the figures are missing. */
static int read_figures(char *out, double *v, char **res, int *nres)
{
	int have = 0;
	char *save = NULL;

	for (char *l = out ? strtok_r(out, "\n", &save) : NULL; l;
	     l = strtok_r(NULL, "\n", &save)) {
		if (strncmp(l, "[0] ", 4))
			continue;
		l += 4;
		if (sscanf(l, SCHED_TAG " figures %lf %lf %lf %lf %lf %lf %lf "
			   "%lf %lf %lf %lf %lf", &v[0], &v[1], &v[2], &v[3],
			   &v[4], &v[5], &v[6], &v[7], &v[8], &v[9], &v[10],
			   &v[11]) == V_CHUNK)
			have |= 1;
		else if (sscanf(l, SCHED_TAG " setup %lf %lf %lf %lf",
				&v[V_CHUNK], &v[V_IN_FLIGHT], &v[V_COMPUTE],
				&v[V_SLICE]) == 4)
			have |= 2;
		else if (!res)
			continue;
		else if (!strncmp(l, "result ", 7) && *nres < MAX_RESULTS)
			res[(*nres)++] = l;
		else
			puts(l);
	}
	return have == 3 ? 0 : -1;
}

/* The ranks, with shemb-run: its exit status. */
static int run_ranks(const struct sched_opts *o, struct comm_buf *out,
		     struct comm_buf *err)
{
	char num[16], us[16], st[16], reps[16], chunk[24], flight[16];
	char slice[16];
	char *argv[] = { (char *)o->shemb_run, (char *)"-n", num,
			 (char *)"--provider", (char *)o->provider,
			 (char *)"--timeout", (char *)"600",
			 (char *)comm_self_exe(), (char *)"sched-rank",
			 (char *)"--compute-us", us, (char *)"--steps", st,
			 (char *)"--reps", reps, NULL, NULL, NULL, NULL, NULL,
			 NULL, NULL };
	int n = 15;

	snprintf(num, sizeof(num), "%d", o->ranks);
	snprintf(us, sizeof(us), "%d", o->compute_us);
	snprintf(st, sizeof(st), "%d", o->steps);
	snprintf(reps, sizeof(reps), "%d", o->reps);
	snprintf(chunk, sizeof(chunk), "%lld", (long long)o->chunk);
	snprintf(flight, sizeof(flight), "%d", o->in_flight);
	snprintf(slice, sizeof(slice), "%d", o->slice_us);
	if (o->chunk) {
		argv[n++] = (char *)"--chunk";
		argv[n++] = chunk;
	}
	if (o->in_flight) {
		argv[n++] = (char *)"--in-flight";
		argv[n++] = flight;
	}
	if (o->slice_us) {
		argv[n++] = (char *)"--slice";
		argv[n++] = slice;
	}
	bench_progress("sched: %d ranks", o->ranks);
	n = comm_run(argv, 620, out, err);
	bench_progress_done();
	return n;
}

/* The figures (4) compares: a started step (busy computation), the
 * fraction of the embedding steps it hid, the urgent latency ratio. */
enum { F_STARTED, F_HIDDEN, F_LATENCY, F_COUNT };

static void slice_figures(const double *v, double *f)
{
	f[F_STARTED] = v[V_STARTED];
	f[F_HIDDEN] = hidden(v[V_COMM], v[V_BLOCKING], v[V_STARTED]);
	f[F_LATENCY] = v[V_LOADED] / v[V_ALONE];
}

static double median_of(double *x, int n)
{
	return bench_stat_of(x, n).median;
}

/*
 * (4): the jobs again, o->slice_pairs times at the first job's slice and
 * as often at the kernel's default (comm_slice_us -1), alternating which
 * goes first, each with the first job's computation; the medians of
 * each.  0, or the first failing job's status.
 */
static int compare_slices(const struct sched_opts *o, const double *first)
{
	static double f[2][F_COUNT][MAX_SLICE_PAIRS];
	struct sched_opts alt[2] = { *o, *o };
	int n = o->slice_pairs;

	alt[0].compute_us = alt[1].compute_us = (int)first[V_COMPUTE];
	alt[0].slice_us = (int)first[V_SLICE];
	alt[1].slice_us = -1;
	for (int i = 0; i < 2 * n; i++) {
		int s = (i + i / 2) % 2; /* 0 1, 1 0, 0 1 ... */
		struct comm_buf out = { 0 }, err = { 0 };
		double v[V_COUNT], one[F_COUNT];
		int rc = run_ranks(&alt[s], &out, &err);

		if (!rc && read_figures(out.p, v, NULL, NULL))
			rc = 1;
		if (rc)
			fprintf(stderr, "shemb-bench sched: a job of (4) "
				"failed: exit %d\n%s", rc, err.p ? err.p : "");
		comm_buf_free(&out);
		comm_buf_free(&err);
		if (rc)
			return rc;
		slice_figures(v, one);
		for (int k = 0; k < F_COUNT; k++)
			f[s][k][i / 2] = one[k];
	}
	printf("(4) the threads moving collectives at comm_slice_us %d and at "
	       "the kernel's\n    default slice (-1): %d runs of each, "
	       "alternating, compute %d us; medians:\n",
	       alt[0].slice_us, n, alt[0].compute_us);
	for (int s = 0; s < 2; s++)
		printf("      %-15s started step %.2f ms, %.2f of the steps "
		       "hidden, latency %.2fx\n",
		       s ? "kernel default:" : "comm_slice_us:",
		       median_of(f[s][F_STARTED], n) * 1e3,
		       median_of(f[s][F_HIDDEN], n),
		       median_of(f[s][F_LATENCY], n));
	printf("result started_step_slice_vs_kernel_default %.3f\n",
	       median_of(f[0][F_STARTED], n) / median_of(f[1][F_STARTED], n));
	return 0;
}

/* The job, then (4) if asked for, then the result lines. */
static int run_all(const struct sched_opts *o, FILE *csv)
{
	struct comm_buf out = { 0 }, err = { 0 };
	char *res[MAX_RESULTS];
	double v[V_COUNT];
	int nres = 0, rc = run_ranks(o, &out, &err);

	if (!rc && read_figures(out.p, v, res, &nres)) {
		fprintf(stderr, "shemb-bench sched: rank 0 gave no figures\n");
		rc = 1;
	} else if (rc) {
		fprintf(stderr, "shemb-bench sched: exit %d\n%s", rc,
			err.p ? err.p : "");
	}
	if (!rc) {
		write_csv(o, csv, v);
		fflush(stdout);
		if (o->slice_pairs)
			rc = compare_slices(o, v);
		for (int i = 0; i < nres; i++) /* the figures last */
			puts(res[i]);
	}
	comm_buf_free(&out);
	comm_buf_free(&err);
	return rc;
}

int bench_sched(int argc, char **argv)
{
	struct sched_opts o;
	FILE *csv = NULL;
	int rc;

	defaults(&o);
	if (bench_parse_opts(argc, argv, sched_long, sched_apply, &o,
			     sched_help))
		return 2;
	if (!o.shemb_run)
		o.shemb_run = comm_find_sibling("shemb-run");
	if (!o.shemb_run) {
		fprintf(stderr, "shemb-bench sched: shemb-run not found\n");
		return 2;
	}
	if (o.csv && !(csv = bench_csv_open(o.csv, sched_csv_header,
					    "shemb-bench sched")))
		return 2;
	comm_adopt_orphans();
	printf("shemb-bench sched: libshemb %s\n", shemb_version_string());
	fflush(stdout);
	rc = run_all(&o, csv);
	if (bench_csv_close(csv, o.csv, "shemb-bench sched"))
		rc = 1;
	return rc ? 1 : 0;
}
