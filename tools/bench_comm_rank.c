/*
 * bench_comm_rank.c - one rank of the comm benchmark's libshemb job:
 * "shemb-run -n N shemb-bench comm-rank --sizes B,B.. [options]".
 *
 * For each size S (bytes a rank sends per alltoallv, split evenly over the
 * N - 1 other ranks; nothing to itself) every rank runs a few untimed
 * calls, then R timed ones, each after a barrier so that all ranks start
 * together (with --back-to-back K, K calls in a row after each barrier,
 * timed together: a repetition's time is a K-th of theirs).  Then the
 * same for an allreduce (SUM) of S bytes of f32.  The times of each
 * repetition are reduced to the slowest rank's (MAX), and rank 0 prints
 * one line per repetition for the parent (see bench_comm.h).
 * The data received is checked after the timed calls.
 */
#define _GNU_SOURCE
#include "tools/bench_comm.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shemb.h"
#include "tools/bench_util.h"

enum { K_A2A, K_AR };

static const char *const kind_tag[] = { "a2a", "ar" };

struct rank_opts {
	int64_t sizes[COMM_MAX_SIZES];
	int nsizes;
	int reps;            /* 0: comm_auto_reps() */
	int warmup;
	int64_t chunk;       /* 0: the library's default */
	int64_t in_flight;   /* chunks_in_flight; 0: the default */
	int progress;        /* enum shemb_progress */
	bool allreduce;
	bool split;          /* also time the start of each call alone */
	int burst;           /* calls timed back to back after each barrier */
};

struct rank_state {
	const struct rank_opts *o;
	shemb_ctx *ctx;
	int rank, world;
	size_t per;          /* bytes to each other rank */
	char *sb, *rb;       /* alltoallv */
	float *as, *ar;      /* allreduce */
	size_t *sc, *sd, *rc, *rd;
	double *t;           /* [2][reps]: whole call, start alone */
};

static int fail(struct rank_state *s, const char *what, int rc)
{
	fprintf(stderr, "comm-rank %d: %s: %s: %s\n", s->rank, what,
		shemb_strerror(rc), shemb_ctx_last_error(s->ctx));
	return -1;
}

/* ---- buffers ---- */

static void *alloc_touched(size_t bytes)
{
	void *p = NULL;

	if (posix_memalign(&p, 4096, bytes ? bytes : 1))
		return NULL;
	memset(p, 0, bytes);
	return p;
}

static int64_t max_size(const struct rank_opts *o)
{
	int64_t m = 0;

	for (int i = 0; i < o->nsizes; i++)
		m = o->sizes[i] > m ? o->sizes[i] : m;
	return m;
}

static int state_alloc(struct rank_state *s)
{
	size_t big = (size_t)max_size(s->o);
	size_t n = (size_t)s->world;
	/* room for the most repetitions any size takes */
	int reps = s->o->reps ? s->o->reps : comm_auto_reps(1);

	s->sb = alloc_touched(big);
	s->rb = alloc_touched(big);
	s->as = alloc_touched(big);
	s->ar = alloc_touched(big);
	s->sc = calloc(4 * n, sizeof(size_t));
	s->t = calloc(2 * (size_t)reps, sizeof(double));
	if (!s->sb || !s->rb || !s->as || !s->ar || !s->sc || !s->t)
		return -1;
	s->sd = s->sc + n;
	s->rc = s->sc + 2 * n;
	s->rd = s->sc + 3 * n;
	return 0;
}

static void state_free(struct rank_state *s)
{
	free(s->sb);
	free(s->rb);
	free(s->as);
	free(s->ar);
	free(s->sc);
	free(s->t);
}

/* The byte rank `from` sends to rank `to`: checks the routing too. */
static unsigned char pattern(int from, int to)
{
	return (unsigned char)(from * 16 + to + 1);
}

/* Counts and data of an alltoallv of `bytes` per rank; 0 bytes when the
 * size does not split over the other ranks. */
static void a2a_setup(struct rank_state *s, int64_t bytes)
{
	size_t off = 0;

	s->per = (size_t)bytes / (size_t)(s->world - 1);
	for (int p = 0; p < s->world; p++) {
		size_t n = p == s->rank ? 0 : s->per;

		s->sc[p] = s->rc[p] = n;
		s->sd[p] = s->rd[p] = off;
		if (n)
			memset(s->sb + off, pattern(s->rank, p), n);
		off += n;
	}
	memset(s->rb, 0, off);
}

static int a2a_check(const struct rank_state *s)
{
	for (int p = 0; p < s->world; p++) {
		const unsigned char *b = (const unsigned char *)s->rb +
					 s->rd[p];
		unsigned char want = pattern(p, s->rank);

		for (size_t i = 0; i < s->rc[p]; i++) {
			if (b[i] != want) {
				fprintf(stderr, "comm-rank %d: alltoallv: "
					"byte %zu from rank %d is %u, not "
					"%u\n", s->rank, i, p, b[i], want);
				return -1;
			}
		}
	}
	return 0;
}

static void ar_setup(struct rank_state *s, size_t count)
{
	for (size_t i = 0; i < count; i++)
		s->as[i] = (float)(s->rank + 1);
}

static int ar_check(const struct rank_state *s, size_t count)
{
	float want = (float)(s->world * (s->world + 1) / 2);

	for (size_t i = 0; i < count; i++) {
		if (s->ar[i] != want) {
			fprintf(stderr, "comm-rank %d: allreduce: value %zu "
				"is %g, not %g\n", s->rank, i, s->ar[i], want);
			return -1;
		}
	}
	return 0;
}

/* ---- timing ---- */

/* Start one call; with req NULL it is also waited for. */
static int start_call(struct rank_state *s, int kind, size_t count,
		      shemb_request **req)
{
	if (kind == K_A2A)
		return shemb_alltoallv(s->ctx, s->sb, s->sc, s->sd, s->rb,
				       s->rc, s->rd, req);
	return shemb_allreduce(s->ctx, s->as, s->ar, count, SHEMB_F32,
			       SHEMB_REDUCE_SUM, req);
}

/* One repetition after a barrier: the whole call in *total, the time to
 * start it (split only) in *start; of `calls` calls in a row, a calls-th
 * of their time, and the start of the last. */
static int one_call(struct rank_state *s, int kind, size_t count, int calls,
		    double *total, double *start)
{
	shemb_request *req = NULL;
	double t0, t1, tn;
	int rc = shemb_barrier(s->ctx, NULL);

	if (rc)
		return fail(s, "barrier", rc);
	t0 = bench_now();
	for (int k = 1; !rc && k < calls; k++)
		rc = start_call(s, kind, count, NULL);
	tn = bench_now();
	if (!rc)
		rc = start_call(s, kind, count, s->o->split ? &req : NULL);
	t1 = bench_now();
	if (!rc && req) {
		rc = shemb_wait(req);
		shemb_request_free(req);
	}
	*total = (bench_now() - t0) / calls;
	*start = t1 - tn;
	return rc ? fail(s, kind == K_A2A ? "alltoallv" : "allreduce", rc)
		  : 0;
}

/* Reps of one kind and size; rank 0 prints the slowest rank's times. */
static int time_kind(struct rank_state *s, int kind, int64_t bytes)
{
	int reps = s->o->reps ? s->o->reps
			      : comm_auto_reps(bytes * s->o->burst);
	size_t count = (size_t)bytes / sizeof(float);
	int64_t sent = kind == K_A2A ? (int64_t)(s->per * (size_t)(s->world -
								   1))
				     : (int64_t)(count * sizeof(float));
	double dummy;
	int rc;

	for (int w = 0; w < s->o->warmup; w++) /* as OpenMPI's: one each */
		if (one_call(s, kind, count, 1, &dummy, &dummy))
			return -1;
	for (int r = 0; r < reps; r++)
		if (one_call(s, kind, count, s->o->burst, &s->t[r],
			     &s->t[reps + r]))
			return -1;
	rc = shemb_allreduce(s->ctx, s->t, s->t, 2 * (size_t)reps, SHEMB_F64,
			     SHEMB_REDUCE_MAX, NULL);
	if (rc)
		return fail(s, "allreduce of the times", rc);
	for (int r = 0; s->rank == 0 && r < reps; r++) {
		printf(COMM_TAG " %s %lld %lld %.9f\n", kind_tag[kind],
		       (long long)bytes, (long long)sent, s->t[r]);
		if (s->o->split)
			printf(COMM_TAG " %s-start %lld %lld %.9f\n",
			       kind_tag[kind], (long long)bytes,
			       (long long)sent, s->t[reps + r]);
	}
	fflush(stdout);
	return 0;
}

static int run_size(struct rank_state *s, int64_t bytes)
{
	size_t count = (size_t)bytes / sizeof(float);

	a2a_setup(s, bytes);
	if (time_kind(s, K_A2A, bytes) || a2a_check(s))
		return -1;
	if (!s->o->allreduce || !count)
		return 0;
	ar_setup(s, count);
	if (time_kind(s, K_AR, bytes) || ar_check(s, count))
		return -1;
	return 0;
}

/* ---- options and setup ---- */

enum { R_SIZES = 256, R_REPS, R_WARMUP, R_CHUNK, R_PROGRESS, R_NO_AR,
       R_SPLIT, R_IN_FLIGHT, R_BURST };

static const struct option rank_long[] = {
	{ "sizes", required_argument, NULL, R_SIZES },
	{ "reps", required_argument, NULL, R_REPS },
	{ "warmup", required_argument, NULL, R_WARMUP },
	{ "chunk", required_argument, NULL, R_CHUNK },
	{ "in-flight", required_argument, NULL, R_IN_FLIGHT },
	{ "progress", required_argument, NULL, R_PROGRESS },
	{ "no-allreduce", no_argument, NULL, R_NO_AR },
	{ "split", no_argument, NULL, R_SPLIT },
	{ "back-to-back", required_argument, NULL, R_BURST },
	{ NULL, 0, NULL, 0 }
};

static int rank_opt(struct rank_opts *o, int c, const char *arg)
{
	int64_t v = 0;

	switch (c) {
	case R_SIZES:
		o->nsizes = comm_parse_list(arg, 1, (int64_t)1 << 40, o->sizes,
					    COMM_MAX_SIZES);
		return o->nsizes < 0 ? -1 : 0;
	case R_REPS:
	case R_WARMUP:
		if (comm_parse_count(arg, c == R_REPS, 100000, &v))
			return -1;
		*(c == R_REPS ? &o->reps : &o->warmup) = (int)v;
		return 0;
	case R_CHUNK:
		return comm_parse_count(arg, 0, (int64_t)1 << 40, &o->chunk);
	case R_IN_FLIGHT:
		return comm_parse_count(arg, 0, 256, &o->in_flight);
	case R_BURST:
		if (comm_parse_count(arg, 1, 1000, &v))
			return -1;
		o->burst = (int)v;
		return 0;
	case R_PROGRESS:
		o->progress = !strcmp(arg, "caller") ? SHEMB_PROGRESS_CALLER
						     : SHEMB_PROGRESS_THREAD;
		return strcmp(arg, "caller") && strcmp(arg, "thread") ? -1 : 0;
	case R_NO_AR:
		o->allreduce = false;
		return 0;
	case R_SPLIT:
		o->split = true;
		return 0;
	}
	return -1;
}

static int rank_args(int argc, char **argv, struct rank_opts *o)
{
	int c, idx = 0;

	memset(o, 0, sizeof(*o));
	o->warmup = 2;
	o->burst = 1;
	o->allreduce = true;
	o->progress = SHEMB_PROGRESS_THREAD;
	while ((c = getopt_long(argc, argv, "", rank_long, &idx)) != -1) {
		if (c == '?' || rank_opt(o, c, optarg)) {
			fprintf(stderr, "comm-rank: bad arguments\n");
			return -1;
		}
	}
	if (o->nsizes <= 0) {
		fprintf(stderr, "comm-rank: --sizes is required\n");
		return -1;
	}
	return 0;
}

static void print_info(struct rank_state *s)
{
	struct shemb_ctx_attr a;

	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	if (s->rank || shemb_ctx_get_attr(s->ctx, &a))
		return;
	printf(COMM_TAG " info ranks %d\n", a.world_size);
	printf(COMM_TAG " info provider %s\n", a.provider ? a.provider : "?");
	printf(COMM_TAG " info chunk_bytes %zu\n", a.chunk_bytes);
	printf(COMM_TAG " info chunks_in_flight %d\n", a.chunks_in_flight);
	printf(COMM_TAG " info single_copy %d\n", a.single_copy);
	printf(COMM_TAG " info progress %s\n",
	       a.progress == SHEMB_PROGRESS_CALLER ? "caller" : "thread");
	fflush(stdout);
}

static int open_ctx(struct rank_state *s)
{
	struct shemb_ctx_attr a;
	int rc;

	shemb_ctx_attr_init(&a);
	a.progress = s->o->progress;
	a.chunk_bytes = (size_t)s->o->chunk;
	a.chunks_in_flight = (int)s->o->in_flight;
	rc = shemb_ctx_create(&a, &s->ctx);
	if (rc)
		return fail(s, "shemb_ctx_create", rc);
	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	rc = shemb_ctx_get_attr(s->ctx, &a);
	if (rc)
		return fail(s, "shemb_ctx_get_attr", rc);
	s->rank = a.rank;
	s->world = a.world_size;
	if (s->world < 2) {
		fprintf(stderr, "comm-rank: needs 2 ranks or more (start it "
			"with shemb-run -n N)\n");
		return -1;
	}
	return 0;
}

int bench_comm_rank(int argc, char **argv)
{
	struct rank_opts o;
	struct rank_state s = { .o = &o };
	int rc = -1, dr;

	if (rank_args(argc, argv, &o))
		return 2;
	if (open_ctx(&s))
		goto out;
	if (state_alloc(&s)) {
		fprintf(stderr, "comm-rank %d: out of memory\n", s.rank);
		goto out;
	}
	print_info(&s);
	rc = 0;
	for (int i = 0; !rc && i < o.nsizes; i++)
		rc = run_size(&s, o.sizes[i]);
out:
	state_free(&s);
	dr = shemb_ctx_destroy(s.ctx);
	s.ctx = NULL;
	if (dr && !rc)
		rc = fail(&s, "shemb_ctx_destroy", dr);
	return rc ? 1 : 0;
}
