/*
 * coll_rank.c - one rank of the multi-process collective tests, started by
 * shemb-run (tests/test_coll.sh) or by tests/test_coll_fail.c.
 *
 * Usage: coll_rank SCENARIO [--caller] [--chunk BYTES] [--timeout MS]
 *                 [--in-flight CHUNKS] [--device] [--pin]
 *                 [--single-copy N] [--single-copy-of-rank0 N]
 *                 [--want-single-copy N] [--want-create-error CODE]
 * --pin puts each rank on one CPU of those it was given.
 * --single-copy sets the attr (--single-copy-of-rank0: only rank 0's,
 * as SHEMB_RANK names it, so that ranks disagree); --want-single-copy
 * checks what shemb_ctx_get_attr says of it (1 in use, -1 not);
 * --want-create-error makes shemb_ctx_create's failure with that code (a
 * negative number) the test's success, and its success a failure.  Every
 * rank checks the chunking in use: the one asked for or the default,
 * which depends on whether ranks outnumber their CPUs.
 * Every input is a function of (seed, rank, peer, index), so each rank
 * knows what every other rank sends and checks what it receives against a
 * plain loop.  Exit 0 when every check passed; a message and 1 otherwise.
 *
 * Scenarios: alltoallv, alltoallv-big (one 64 MiB pair), allgatherv,
 * allreduce, barrier, concurrent, many-chunks (an allreduce and an
 * alltoallv of 8 MiB a peer, urgent, together: run with small chunks,
 * thousands of receives), priorities (40 collectives of random
 * priorities in flight), staggered (rings, pairwise alltoallv and
 * allgatherv several megabytes deep in flight, waited for in orders that
 * differ between ranks), late-start (an allreduce and an allgatherv,
 * the allgatherv started by half the ranks only once the allreduce is
 * done), lanes [ROUNDS] (small bulk allreduces each beside an urgent
 * alltoallv), hold (rank 0 waits for an urgent alltoallv while the others
 * wait for the bulk allreduce before it), stall (the last rank makes no
 * call for twice the timeout), mismatch-count, mismatch-order,
 * mismatch-prio, mismatch-args (an allreduce's count, dtype or op, an
 * allgatherv's count),
 * kill-one (rank world-1 dies in the middle of a large alltoallv; the
 * others must fail with SHEMB_EPEER or SHEMB_ETIMEDOUT, or finish it
 * with whole data if the victim took all it was sent first, and a later
 * call must fail), kill-steps (it dies with steps started on the
 * others: each of their requests fails), kill-relaxed (it dies during a
 * backward run with the lookup behind it: their requests end, by success
 * or the death),
 * wedge (rank 0's progress thread never comes back from libfabric,
 * with tests/wedge.c preloaded: every rank's calls fail, rank 0's with
 * SHEMB_EPEER, and every context is destroyed), wedge-steps (its thread
 * of started steps does: rank 0's waits fail with SHEMB_EPEER, and its
 * shemb_ctx_destroy() returns SHEMB_EPEER), slow-steps (healthy steps
 * waited for past a short timeout all succeed), async-error.
 *
 * With --device, the context is a GPU one (of the module SHEMB_CUDA_PLUGIN
 * names: the emulated device of tests/emu/, or the CUDA one on a GPU
 * host), and the collectives of alltoallv, allgatherv, allreduce,
 * concurrent and priorities take mirrors of their buffers in its device
 * memory: over NCCL, or without it through host memory, in their turn
 * and with their priorities.
 */
#define _GNU_SOURCE
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <shemb.h>

static int rank, world, timeout_ms;
static shemb_ctx *ctx;

#include "tests/rank_check.h"
#include "tests/slice.h"
#include "tests/devmem.h"

#define CHECK(call) CHECK_RC(ctx, call)

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- --device: the scenarios' buffers mirrored in device memory ---- */

static bool on_device;

/* A mirror taken back keeps its device memory (host NULL) until the
 * slots run out or the scenario ends: freeing device memory waits for
 * the whole device on a GPU, which would hold back the collectives
 * still in flight. */
struct mirror {
	void *host, *dev;
	size_t n;
};

static struct mirror mirrors[256];

static void free_spent_mirrors(void)
{
	for (size_t i = 0; i < sizeof(mirrors) / sizeof(mirrors[0]); i++) {
		if (mirrors[i].host || !mirrors[i].dev)
			continue;
		devmem.free(mirrors[i].dev);
		mirrors[i] = (struct mirror){ 0 };
	}
}

static struct mirror *free_mirror(void)
{
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < sizeof(mirrors) / sizeof(mirrors[0]);
		     i++)
			if (!mirrors[i].dev)
				return &mirrors[i];
		free_spent_mirrors();
	}
	FAIL("too many device mirrors");
}

/* The buffer a collective gets for host buffer p of n bytes: p itself,
 * or with --device its mirror in the emulated device's memory, made
 * with p's bytes at the first call (a buffer both sent and received
 * has one mirror). */
static void *dev_of(void *p, size_t n)
{
	struct mirror *m;

	if (!on_device || !p)
		return p;
	for (size_t i = 0; i < sizeof(mirrors) / sizeof(mirrors[0]); i++)
		if (mirrors[i].host == p)
			return mirrors[i].dev;
	m = free_mirror();
	*m = (struct mirror){ p, devmem_alloc(n), n };
	devmem.copy(m->dev, p, n);
	return m->dev;
}

/* Once the collective on it is complete: host buffer p takes its
 * mirror's bytes, and the mirror is spent. */
static void take_back(void *p)
{
	for (size_t i = 0; on_device && p &&
			   i < sizeof(mirrors) / sizeof(mirrors[0]);
	     i++) {
		if (mirrors[i].host != p)
			continue;
		devmem.copy(p, mirrors[i].dev, mirrors[i].n);
		mirrors[i].host = NULL;
		return;
	}
}

static uint8_t byte_of(uint64_t seed, int from, int to, size_t k)
{
	return (uint8_t)(mix(seed ^ ((uint64_t)from << 48) ^
			     ((uint64_t)to << 32) ^ (k / 8)) >>
			 (8 * (k % 8)));
}

/* ---- alltoallv ---- */

/* kill-one: every rank sends the last one the big piece, not rank 0
 * alone, so that each survivor's call still waits for the rank that
 * dies (a small piece may travel in its header, whole at once). */
static bool big_from_all;

/* Bytes rank i sends to rank j in round `seed`: often zero, sometimes
 * large, the same function on every rank. */
static size_t a2a_count(uint64_t seed, int i, int j, size_t big)
{
	uint64_t h = mix(seed * 977 + (uint64_t)i * 131 + (uint64_t)j);

	if (big && (i == 0 || big_from_all) && i != j && j == world - 1)
		return big;
	switch (h % 4) {
	case 0:
		return 0;
	case 1:
		return h % 64;
	case 2:
		return h % 5000;
	default:
		return h % 300000;
	}
}

struct a2a {
	size_t sc[64], sd[64], rc[64], rd[64];
	char *sb, *rb;
	size_t stotal, rtotal;
};

static void a2a_prepare(struct a2a *a, uint64_t seed, size_t big)
{
	a->stotal = a->rtotal = 0;
	for (int j = 0; j < world; j++) {
		a->sc[j] = a2a_count(seed, rank, j, big);
		a->rc[j] = a2a_count(seed, j, rank, big);
		a->sd[j] = a->stotal;
		a->rd[j] = a->rtotal + 7; /* odd offsets on purpose */
		a->stotal += a->sc[j];
		a->rtotal += a->rc[j] + 7;
	}
	a->sb = malloc(a->stotal + 1);
	a->rb = malloc(a->rtotal + 1);
	if (!a->sb || !a->rb)
		FAIL("no memory");
	for (int j = 0; j < world; j++)
		for (size_t k = 0; k < a->sc[j]; k++)
			a->sb[a->sd[j] + k] = (char)byte_of(seed, rank, j, k);
	memset(a->rb, 0x5a, a->rtotal + 1);
}

static void a2a_check(struct a2a *a, uint64_t seed)
{
	take_back(a->sb);
	take_back(a->rb);
	for (int j = 0; j < world; j++) /* the 7 bytes before each piece */
		for (size_t k = a->rd[j] - 7; k < a->rd[j]; k++)
			if ((uint8_t)a->rb[k] != 0x5a)
				FAIL("alltoallv %llu: byte %zu, between the "
				     "pieces, was written",
				     (unsigned long long)seed, k);
	for (int j = 0; j < world; j++)
		for (size_t k = 0; k < a->rc[j]; k++)
			if ((uint8_t)a->rb[a->rd[j] + k] !=
			    byte_of(seed, j, rank, k))
				FAIL("alltoallv %llu: byte %zu from rank %d "
				     "wrong", (unsigned long long)seed, k, j);
	free(a->sb);
	free(a->rb);
}

static void run_alltoallv(int rounds, size_t big)
{
	for (int r = 0; r < rounds; r++) {
		struct a2a a;

		a2a_prepare(&a, (uint64_t)r + 1, big);
		CHECK(shemb_alltoallv(ctx, dev_of(a.sb, a.stotal + 1), a.sc,
				      a.sd, dev_of(a.rb, a.rtotal + 1), a.rc,
				      a.rd, NULL));
		a2a_check(&a, (uint64_t)r + 1);
	}
}

/* ---- allgatherv ---- */

static void run_allgatherv(int rounds)
{
	for (int r = 0; r < rounds; r++) {
		size_t rc[64], rd[64], total = 0, mine;
		char *sb, *rb;

		for (int j = 0; j < world; j++) {
			rc[j] = a2a_count((uint64_t)r + 100, j, 0, 0);
			rd[j] = total;
			total += rc[j];
		}
		mine = rc[rank];
		sb = malloc(mine + 1);
		rb = malloc(total + 1);
		for (size_t k = 0; k < mine; k++)
			sb[k] = (char)byte_of((uint64_t)r, rank, 0, k);
		CHECK(shemb_allgatherv(ctx, dev_of(sb, mine + 1), mine,
				       dev_of(rb, total + 1), rc, rd, NULL));
		take_back(sb);
		take_back(rb);
		for (int j = 0; j < world; j++)
			for (size_t k = 0; k < rc[j]; k++)
				if ((uint8_t)rb[rd[j] + k] !=
				    byte_of((uint64_t)r, j, 0, k))
					FAIL("allgatherv byte %zu of rank %d",
					     k, j);
		free(sb);
		free(rb);
	}
}

/* ---- allreduce ---- */

/* Integer values in [-8, 8]: any summation order is exact in every
 * dtype, so each rank's result must equal the serial one bit for bit. */
static double value_of(int r, size_t k, int seed)
{
	return (double)((int)(mix((uint64_t)seed * 7 + (uint64_t)r * 1000003 +
				  k) % 17) - 8);
}

static void store_value(int dtype, void *buf, size_t k, double v)
{
	switch (dtype) {
	case SHEMB_F32:
		((float *)buf)[k] = (float)v;
		break;
	case SHEMB_F64:
		((double *)buf)[k] = v;
		break;
	case SHEMB_I64:
		((int64_t *)buf)[k] = (int64_t)v;
		break;
	case SHEMB_F16:
		((_Float16 *)buf)[k] = (_Float16)v;
		break;
	default: { /* bf16: small integers are exact */
		float f = (float)v;
		uint32_t u;

		memcpy(&u, &f, 4);
		((uint16_t *)buf)[k] = (uint16_t)(u >> 16);
	}
	}
}

static double load_value(int dtype, const void *buf, size_t k)
{
	switch (dtype) {
	case SHEMB_F32:
		return ((const float *)buf)[k];
	case SHEMB_F64:
		return ((const double *)buf)[k];
	case SHEMB_I64:
		return (double)((const int64_t *)buf)[k];
	case SHEMB_F16:
		return (double)((const _Float16 *)buf)[k];
	default: {
		uint32_t u = (uint32_t)((const uint16_t *)buf)[k] << 16;
		float f;

		memcpy(&f, &u, 4);
		return f;
	}
	}
}

static size_t dsize(int dtype)
{
	return dtype == SHEMB_F32 ? 4 : dtype == SHEMB_F64 ||
						 dtype == SHEMB_I64 ? 8 : 2;
}

static void allreduce_one(int dtype, int op, size_t count, int in_place,
			  int seed)
{
	char *sb = malloc(count * 8 + 8), *rb = malloc(count * 8 + 8);

	for (size_t k = 0; k < count; k++)
		store_value(dtype, sb, k, value_of(rank, k, seed));
	if (in_place)
		memcpy(rb, sb, count * dsize(dtype));
	CHECK(shemb_allreduce(ctx, dev_of(in_place ? rb : sb, count * 8 + 8),
			      dev_of(rb, count * 8 + 8), count, dtype, op,
			      NULL));
	take_back(sb);
	take_back(rb);
	for (size_t k = 0; k < count; k++) {
		double want = value_of(0, k, seed);

		for (int r = 1; r < world; r++) {
			double v = value_of(r, k, seed);

			want = op == SHEMB_REDUCE_MAX ? fmax(want, v)
						      : want + v;
		}
		if (load_value(dtype, rb, k) != want)
			FAIL("allreduce dtype %d op %d count %zu: value %zu is "
			     "%g, want %g", dtype, op, count, k,
			     load_value(dtype, rb, k), want);
	}
	free(sb);
	free(rb);
}

static void run_allreduce(void)
{
	static const int dtypes[] = { SHEMB_F32, SHEMB_F64, SHEMB_I64,
				      SHEMB_BF16, SHEMB_F16 };
	static const size_t counts[] = { 0, 1, 3, 1000, 70000, 1000003 };
	int seed = 1;

	for (size_t d = 0; d < 5; d++)
		for (int op = 0; op < 2; op++)
			for (size_t c = 0; c < 6; c++)
				allreduce_one(dtypes[d], op, counts[c],
					      (int)(c % 2), seed++);
}

/* ---- several collectives in flight ---- */

/* An in-place sum of 5000 floats, started; the buffer, to check and
 * free once it is done. */
static float *start_sum(int i, shemb_request **req)
{
	float *red = malloc(5000 * sizeof(float)), *d;

	if (!red)
		FAIL("no memory");
	for (int k = 0; k < 5000; k++)
		red[k] = (float)(rank + i + k % 7);
	d = dev_of(red, 5000 * sizeof(float));
	CHECK(shemb_allreduce(ctx, d, d, 5000, SHEMB_F32, SHEMB_REDUCE_SUM,
			      req));
	return red;
}

/*
 * many-chunks: an allreduce of 8 MiB and an alltoallv of 8 MiB to every
 * peer, started together on the urgent lane and waited for in turn.  In
 * chunks of 16 KiB, 4 ranks over shm needed some 2300 chunk receives at
 * once, more than shm's 1024 entries, which also keep the messages that
 * came early: a receive was refused (SHEMB_EIO) every time.
 */
static void run_many_chunks(void)
{
	const size_t bytes = (size_t)8 << 20, count = bytes / sizeof(float);
	size_t sc[64], sd[64];
	shemb_request *ar = NULL, *a2a = NULL;
	float *x = malloc(bytes), *y = malloc(bytes);
	unsigned char *sb = malloc(bytes * (size_t)world);
	unsigned char *rb = malloc(bytes * (size_t)world);

	if (!x || !y || !sb || !rb)
		FAIL("no memory");
	for (size_t k = 0; k < count; k++)
		x[k] = (float)(rank + 1 + k % 3);
	for (int j = 0; j < world; j++) {
		sc[j] = bytes;
		sd[j] = (size_t)j * bytes;
		memset(sb + sd[j], rank * 16 + j, bytes);
	}
	CHECK(shemb_allreduce_prio(ctx, x, y, count, SHEMB_F32,
				   SHEMB_REDUCE_SUM, SHEMB_PRIO_LOOKUP, &ar));
	CHECK(shemb_alltoallv_prio(ctx, sb, sc, sd, rb, sc, sd,
				   SHEMB_PRIO_LOOKUP, &a2a));
	CHECK(shemb_wait(ar));
	CHECK(shemb_wait(a2a));
	shemb_request_free(ar);
	shemb_request_free(a2a);
	for (size_t k = 0; k < count; k++)
		if (y[k] != (float)(world * (world + 1) / 2 +
				    world * (int)(k % 3)))
			FAIL("allreduce: value %zu is %g", k, y[k]);
	for (int j = 0; j < world; j++)
		for (size_t k = 0; k < bytes; k++)
			if (rb[sd[j] + k] != (unsigned char)(j * 16 + rank))
				FAIL("alltoallv: byte %zu from rank %d", k, j);
	free(x);
	free(y);
	free(sb);
	free(rb);
}

static void run_concurrent(void)
{
	enum { N = 24 };
	shemb_request *req[N];
	struct a2a a[N];
	float *red[N];
	int order[N];

	for (int i = 0; i < N; i++) {
		order[i] = i;
		if (i % 3 == 2) {
			red[i] = start_sum(i, &req[i]);
		} else if (i % 3 == 1) {
			CHECK(shemb_barrier(ctx, &req[i]));
		} else {
			a2a_prepare(&a[i], 1000 + (uint64_t)i, 0);
			CHECK(shemb_alltoallv(
				ctx, dev_of(a[i].sb, a[i].stotal + 1),
				a[i].sc, a[i].sd,
				dev_of(a[i].rb, a[i].rtotal + 1), a[i].rc,
				a[i].rd, &req[i]));
		}
	}
	/* wait in an order of our own, different on each rank */
	for (int i = N - 1; i > 0; i--) {
		int j = (int)(mix((uint64_t)rank * 31 + (uint64_t)i) %
			      (uint64_t)(i + 1));
		int t = order[i];

		order[i] = order[j];
		order[j] = t;
	}
	for (int n = 0; n < N; n++) {
		int i = order[n];
		int done = 0;

		if (n % 2) /* poll some, wait for others */
			while (!done)
				CHECK(shemb_test(req[i], &done));
		else
			CHECK(shemb_wait(req[i]));
		if (shemb_wait(req[i]) != SHEMB_ESTATE)
			FAIL("a second wait must give SHEMB_ESTATE");
		shemb_request_free(req[i]);
		if (i % 3 == 0)
			a2a_check(&a[i], 1000 + (uint64_t)i);
		if (i % 3 == 2) {
			take_back(red[i]);
			for (int k = 0; k < 5000; k++) {
				float want = 0;

				for (int r = 0; r < world; r++)
					want += (float)(r + i + k % 7);
				if (red[i][k] != want)
					FAIL("concurrent allreduce %d", i);
			}
			free(red[i]);
		}
	}
	/* requests never waited: released by shemb_ctx_destroy, and with
	 * --device the host copies of one on device buffers too */
	CHECK(shemb_barrier(ctx, &req[0]));
	if (on_device) {
		static float never[16];
		float *d = dev_of(never, sizeof(never));

		CHECK(shemb_allreduce(ctx, d, d, 16, SHEMB_F32,
				      SHEMB_REDUCE_SUM, &req[1]));
	}
}

/* ---- collectives of random priorities in flight ---- */

struct prio_op {
	int kind;          /* 0 alltoallv, 1 allreduce, 2 allgatherv */
	struct a2a a;
	float *red, *mine;
	size_t count;
	shemb_request *req;
};

/* Large and small collectives of random priorities (the same on every
 * rank), started without waiting, so that later urgent ones overtake
 * earlier bulk ones; each must complete once, with its own data. */
static void prio_start(struct prio_op *o, int i)
{
	uint64_t h = mix(5000 + (uint64_t)i);
	int prio = (int)(h % 7) * 1000 - 3000;

	o->kind = (int)((h >> 8) % 3);
	if (o->kind == 1) {
		float *d;

		o->count = h >> 16 & 1 ? 300000 + (size_t)i : 1000;
		o->red = malloc(o->count * sizeof(float));
		for (size_t k = 0; k < o->count; k++)
			o->red[k] = (float)(rank + i + (int)(k % 5));
		d = dev_of(o->red, o->count * sizeof(float));
		CHECK(shemb_allreduce_prio(ctx, d, d, o->count, SHEMB_F32,
					   SHEMB_REDUCE_SUM, prio, &o->req));
	} else if (o->kind == 0) {
		a2a_prepare(&o->a, 7000 + (uint64_t)i,
			    h >> 16 & 1 ? (size_t)3 << 20 : 0);
		CHECK(shemb_alltoallv_prio(ctx, dev_of(o->a.sb,
							o->a.stotal + 1),
					   o->a.sc, o->a.sd,
					   dev_of(o->a.rb, o->a.rtotal + 1),
					   o->a.rc, o->a.rd, prio, &o->req));
	} else {
		size_t n = 1000 + (size_t)i * 37;

		o->count = n;
		o->mine = malloc(n * sizeof(float));
		o->red = malloc((size_t)world * n * sizeof(float));
		for (size_t k = 0; k < n; k++)
			o->mine[k] = (float)(rank * 3 + i);
		for (int r = 0; r < world; r++) {
			o->a.rc[r] = n * sizeof(float);
			o->a.rd[r] = (size_t)r * n * sizeof(float);
		}
		CHECK(shemb_allgatherv_prio(
			ctx, dev_of(o->mine, n * sizeof(float)),
			n * sizeof(float),
			dev_of(o->red, (size_t)world * n * sizeof(float)),
			o->a.rc, o->a.rd, prio, &o->req));
	}
}

static void prio_check(struct prio_op *o, int i)
{
	if (o->kind == 0) {
		a2a_check(&o->a, 7000 + (uint64_t)i);
		return;
	}
	take_back(o->red);
	take_back(o->mine);
	for (size_t k = 0; k < (o->kind == 1 ? o->count
					     : (size_t)world * o->count); k++) {
		float want = 0;

		if (o->kind == 2)
			want = (float)((int)(k / o->count) * 3 + i);
		for (int r = 0; o->kind == 1 && r < world; r++)
			want += (float)(r + i + (int)(k % 5));
		if (o->red[k] != want)
			FAIL("collective %d (kind %d): value %zu is %g, want "
			     "%g", i, o->kind, k, o->red[k], want);
	}
	free(o->red);
	free(o->mine);
}

/* ---- rounds of different collectives, waited for in different orders ---- */

#define STAG_RED 1000000 /* floats: a ring */
#define STAG_GATHER 20000 /* floats per rank */

/* An allreduce and an allgatherv of one round, their inputs a function
 * of (rank, it). */
struct stag {
	float *red, *mine, *all;
	size_t rc[64], rd[64];
};

static void stag_make(struct stag *g, int it)
{
	g->red = malloc(STAG_RED * sizeof(float));
	g->mine = malloc(STAG_GATHER * sizeof(float));
	g->all = malloc((size_t)world * STAG_GATHER * sizeof(float));
	if (!g->red || !g->mine || !g->all)
		FAIL("no memory");
	for (size_t k = 0; k < STAG_RED; k++)
		g->red[k] = (float)(rank + it + (int)(k % 5));
	for (size_t k = 0; k < STAG_GATHER; k++)
		g->mine[k] = (float)(rank * 3 + it);
	for (int r = 0; r < world; r++) {
		g->rc[r] = STAG_GATHER * sizeof(float);
		g->rd[r] = (size_t)r * STAG_GATHER * sizeof(float);
	}
}

static void stag_start_allreduce(struct stag *g, shemb_request **rr)
{
	CHECK(shemb_allreduce(ctx, g->red, g->red, STAG_RED, SHEMB_F32,
			      SHEMB_REDUCE_SUM, rr));
}

static void stag_start_allgatherv(struct stag *g, shemb_request **gr)
{
	CHECK(shemb_allgatherv(ctx, g->mine, STAG_GATHER * sizeof(float),
			       g->all, g->rc, g->rd, gr));
}

/* Against plain loops over every rank's inputs; frees g and the two
 * requests, both waited for. */
static void stag_check(struct stag *g, int it, shemb_request *rr,
		       shemb_request *gr)
{
	shemb_request_free(rr);
	shemb_request_free(gr);
	for (size_t k = 0; k < STAG_RED; k++) {
		float want = 0;

		for (int r = 0; r < world; r++)
			want += (float)(r + it + (int)(k % 5));
		if (g->red[k] != want)
			FAIL("round %d: sum %zu is %g, want %g", it, k,
			     g->red[k], want);
	}
	for (size_t k = 0; k < (size_t)world * STAG_GATHER; k++)
		if (g->all[k] != (float)((int)(k / STAG_GATHER) * 3 + it))
			FAIL("round %d: gathered value %zu wrong", it, k);
	free(g->red);
	free(g->mine);
	free(g->all);
}

/* Ranks finish the alltoallv and enter the allgatherv at different times,
 * and each waits for the allreduce and the allgatherv in an order of its
 * own; every result is checked.  Whether a round's sends wait for their
 * receiver (fabric/coll.c) only shows here when the ranks' timing makes a
 * job without it hang: tests/test_coll_build.c checks that directly. */
static void staggered_one(int it)
{
	shemb_request *rr, *gr;
	struct stag g;
	struct a2a a;

	stag_make(&g, it);
	stag_start_allreduce(&g, &rr);
	a2a_prepare(&a, 9000 + (uint64_t)it, (size_t)3 << 20);
	CHECK(shemb_alltoallv(ctx, a.sb, a.sc, a.sd, a.rb, a.rc, a.rd, NULL));
	a2a_check(&a, 9000 + (uint64_t)it);
	stag_start_allgatherv(&g, &gr);
	if ((rank + it) % 2) {
		CHECK(shemb_wait(gr));
		CHECK(shemb_wait(rr));
	} else {
		CHECK(shemb_wait(rr));
		CHECK(shemb_wait(gr));
	}
	stag_check(&g, it, rr, gr);
}

static void run_staggered(void)
{
	for (int it = 0; it < 12; it++)
		staggered_one(it);
}

/*
 * Every rank starts the allreduce, then the allgatherv; half the ranks
 * wait for the allreduce before they start the allgatherv, the others
 * after the allgatherv.  A rank must not hand the transport a send its
 * receiver will post no receive for until the sender's own later sends
 * are done: over shm, which completes a rank's sends in order, the
 * allgatherv's sends would hold back the allreduce's, which the ranks
 * that have not started the allgatherv wait for.
 */
static void late_start_one(int it)
{
	shemb_request *rr, *gr;
	struct stag g;

	stag_make(&g, it);
	stag_start_allreduce(&g, &rr);
	if ((rank + it) % 2) {
		CHECK(shemb_wait(rr));
		stag_start_allgatherv(&g, &gr);
		CHECK(shemb_wait(gr));
	} else {
		stag_start_allgatherv(&g, &gr);
		CHECK(shemb_wait(gr));
		CHECK(shemb_wait(rr));
	}
	stag_check(&g, it, rr, gr);
}

static void run_late_start(void)
{
	for (int it = 0; it < 12; it++)
		late_start_one(it);
}

static void run_priorities(void)
{
	enum { N = 40 };
	static struct prio_op o[N];

	for (int i = 0; i < N; i++)
		prio_start(&o[i], i);
	for (int n = 0; n < N; n++) {
		/* waits in an order of each rank's own */
		int i = (int)((uint64_t)(n * 17 + rank * 5) % N);

		CHECK(shemb_wait(o[i].req));
		if (shemb_wait(o[i].req) != SHEMB_ESTATE)
			FAIL("a second wait must give SHEMB_ESTATE");
		shemb_request_free(o[i].req);
		prio_check(&o[i], i);
	}
}

/* ---- both lanes at once ---- */

/*
 * Rounds of a small allreduce (bulk lane) started together with an urgent
 * alltoallv and waited for after it: the waiter of the urgent one posts
 * the allreduce's receives as its headers come, while the progress thread
 * reads the bulk lane's completions.  libfabric 1.17's shm loses a message
 * that arrives while a receive for it is being posted on an endpoint that
 * another thread is progressing: every round must end, with its data.
 * That race is rare: before the engine kept such receives back, 4 ranks
 * over shm hung about once in 66000 rounds under load, so the 400 rounds
 * of test_coll.sh seldom catch a regression; "lanes 3000" in a loop does.
 */
static void run_lanes(int rounds)
{
	enum { COUNT = 64 };

	for (int i = 0; i < rounds; i++) {
		float red[COUNT];
		shemb_request *ar, *aa;
		struct a2a a;

		for (int k = 0; k < COUNT; k++)
			red[k] = (float)(rank + i + k);
		a2a_prepare(&a, 9000 + (uint64_t)i, 0);
		CHECK(shemb_allreduce(ctx, red, red, COUNT, SHEMB_F32,
				      SHEMB_REDUCE_SUM, &ar));
		CHECK(shemb_alltoallv_prio(ctx, a.sb, a.sc, a.sd, a.rb, a.rc,
					   a.rd, SHEMB_PRIO_LOOKUP, &aa));
		CHECK(shemb_wait(aa));
		CHECK(shemb_wait(ar));
		shemb_request_free(aa);
		shemb_request_free(ar);
		a2a_check(&a, 9000 + (uint64_t)i);
		for (int k = 0; k < COUNT; k++)
			if (red[k] != (float)(world * (i + k) +
					      world * (world - 1) / 2))
				FAIL("lanes round %d: value %d is %g", i, k,
				     red[k]);
	}
}

/*
 * hold: every rank starts a bulk allreduce of 16 MiB and then an urgent
 * alltoallv; rank 0 waits for the alltoallv first, the others for the
 * allreduce, which needs rank 0's progress thread to move the bulk lane
 * while rank 0's caller waits for an urgent collective.  That thread
 * keeps off the bulk lane only for a while then (fabric/progress.c): a
 * hold for as long as an urgent collective is unfinished would leave
 * every rank waiting until the timeout.
 */
static void run_hold(void)
{
	enum { COUNT = 4 << 20 };
	float *red = malloc(COUNT * sizeof(float));

	if (!red)
		FAIL("no memory");
	for (int i = 0; i < 4; i++) {
		shemb_request *ar, *aa;
		struct a2a a;

		for (size_t k = 0; k < COUNT; k++)
			red[k] = (float)(rank + i + (int)(k % 7));
		a2a_prepare(&a, 9500 + (uint64_t)i, 0);
		CHECK(shemb_allreduce(ctx, red, red, COUNT, SHEMB_F32,
				      SHEMB_REDUCE_SUM, &ar));
		if (rank)
			CHECK(shemb_wait(ar));
		CHECK(shemb_alltoallv_prio(ctx, a.sb, a.sc, a.sd, a.rb, a.rc,
					   a.rd, SHEMB_PRIO_LOOKUP, &aa));
		CHECK(shemb_wait(aa));
		if (!rank)
			CHECK(shemb_wait(ar));
		shemb_request_free(aa);
		shemb_request_free(ar);
		a2a_check(&a, 9500 + (uint64_t)i);
		for (size_t k = 0; k < COUNT; k++) {
			float want = 0;

			for (int r = 0; r < world; r++)
				want += (float)(r + i + (int)(k % 7));
			if (red[k] != want)
				FAIL("hold %d: sum %zu is %g, want %g", i, k,
				     red[k], want);
		}
	}
	free(red);
}

/*
 * stage-refused (--device, the emulated device): a rank whose device
 * buffers' host copies find no memory refuses its alltoallv, so that the
 * other ranks, committed to it, fail it at once with SHEMB_ENOMEM naming
 * that rank, and every rank goes on in step (before, that rank returned
 * without the collective: the others' next call met another one).  The
 * refusing rank's piece for itself is STAGE_BIG bytes while its address
 * space is held to STAGE_ROOM above what it maps (RLIMIT_AS), for the
 * length of that call, so that only the host copies (twice STAGE_BIG)
 * fail there.  In every other round, a lookup started before the
 * alltoallv is under way, so that the library queues the alltoallv
 * behind it: the refusal then waits for the lookup and comes in its turn
 * (before, that rank failed alone, and its next alltoallv met the
 * others' queued one); some rounds must have found the lookup still
 * under way.  Not under a sanitizer, whose allocator
 * aborts instead of failing.
 */
#define STAGE_BIG ((size_t)512 << 20)
#define STAGE_ROOM ((size_t)256 << 20) /* above what the rank maps */

static bool sanitized(void)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
	return true;
#else
	return false;
#endif
#else
	return false;
#endif
}

/* The address space this process has mapped, from /proc/self/status. */
static size_t mapped_bytes(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[128];
	unsigned long kb = 0;

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmSize: %lu kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	if (!kb)
		FAIL("no VmSize in /proc/self/status");
	return (size_t)kb << 10;
}

/* Rank `refuser` sends itself STAGE_BIG bytes, every other pair 64. */
static int refused_alltoallv(int refuser, char *dev)
{
	size_t sc[64], sd[64], at = 0;

	for (int j = 0; j < world; j++) {
		sc[j] = j == rank && rank == refuser ? STAGE_BIG : 64;
		sd[j] = at;
		at += sc[j];
	}
	return shemb_alltoallv(ctx, dev, sc, sd, dev + at, sc, sd, NULL);
}

static shemb_table *step_table(int64_t rows, int dim, int nbags, int len,
			       int64_t *offsets, int64_t *ids, uint64_t seed,
			       struct shemb_bags *b);

/* A lookup of b's bags, started, still under way (*busy) or not when
 * this returns. */
static shemb_request *start_lookup(struct shemb_bags *b, float *out,
				   bool *busy)
{
	shemb_request *req;
	int done = 0;

	CHECK(shemb_lookup_start(ctx, 1, b, &out, SHEMB_LOOKUP_NO_GRAD, &req));
	CHECK(shemb_test(req, &done));
	*busy = !done;
	return req;
}

static void stage_refused_one(int it, struct shemb_bags *b, float *out,
			      int64_t *queued)
{
	int refuser = it % world, rc;
	size_t n = 2 * (STAGE_BIG + 64 * (size_t)world);
	char *dev = devmem_alloc(rank == refuser ? n : 2 * 64 * (size_t)world);
	shemb_request *lookup = NULL;
	struct rlimit was, held;
	char who[32];
	bool busy = false;

	if (it % 2)
		lookup = start_lookup(b, out, &busy);
	if (rank == refuser) {
		if (getrlimit(RLIMIT_AS, &was))
			FAIL("getrlimit failed");
		held = was;
		held.rlim_cur = mapped_bytes() + STAGE_ROOM;
		if (setrlimit(RLIMIT_AS, &held))
			FAIL("setrlimit failed");
	}
	rc = refused_alltoallv(refuser, dev);
	if (rank == refuser && setrlimit(RLIMIT_AS, &was))
		FAIL("setrlimit failed");
	snprintf(who, sizeof(who), "rank %d", refuser);
	if (rc != SHEMB_ENOMEM ||
	    !strstr(shemb_ctx_last_error(ctx), "no memory to stage") ||
	    (rank != refuser && !strstr(shemb_ctx_last_error(ctx), who)))
		FAIL("round %d (rank %d refusing): %d (%s): %s", it, refuser,
		     rc, shemb_strerror(rc), shemb_ctx_last_error(ctx));
	if (lookup) {
		CHECK(shemb_wait(lookup));
		shemb_request_free(lookup);
		*queued += busy;
	}
	devmem.free(dev);
	run_alltoallv(1, 0); /* in step: a real one, exact */
}

static void run_stage_refused(void)
{
	enum { BAGS = 4096, LEN = 16, DIM = 64 };
	static int64_t offsets[BAGS + 1], ids[BAGS * LEN];
	struct shemb_bags b;
	shemb_table *t;
	float *out;
	int64_t queued = 0;

	if (!on_device)
		FAIL("stage-refused runs with --device");
	if (sanitized()) {
		printf("rank %d: stage-refused skipped under a sanitizer\n",
		       rank);
		return;
	}
	t = step_table(1 << 16, DIM, BAGS, LEN, offsets, ids, 17, &b);
	/* the table's rows are host memory: so is what the lookup writes */
	out = malloc((size_t)BAGS * DIM * sizeof(float));
	if (!out)
		FAIL("no memory");
	for (int it = 0; it < 4 * world; it++)
		stage_refused_one(it, &b, out, &queued);
	CHECK(shemb_allreduce(ctx, &queued, &queued, 1, SHEMB_I64,
			      SHEMB_REDUCE_SUM, NULL));
	if (!queued)
		FAIL("no alltoallv was called while a lookup was under way");
	free(out);
	CHECK(shemb_table_destroy(t));
}

/*
 * unwatched: collectives that no caller waits for, only polled with
 * shemb_test (which moves nothing while the context has a progress
 * thread).  One starts right after a blocking call, while the progress
 * thread may still sleep where it stood back for that call's caller; one
 * is in flight when the caller of a blocking call of higher priority
 * leaves.  Only the thread's wakes (fabric/progress.c) end them before
 * its sleep's bound, which test_coll.sh makes longer than the polls here
 * (SHEMB_FABRIC_STAND_BACK_MS).
 */
#define UNWATCHED_POLL_MS 20000u

static void poll_alone(shemb_request *req, const char *what, int it)
{
	uint64_t t0 = now_ms();
	int done = 0;

	for (;;) {
		CHECK(shemb_test(req, &done));
		if (done)
			break;
		if (now_ms() - t0 > UNWATCHED_POLL_MS)
			FAIL("unwatched round %d: %s is not done after %u ms "
			     "that nobody waited for it", it, what,
			     UNWATCHED_POLL_MS);
		usleep(200);
	}
	shemb_request_free(req);
}

static void start_a2a(struct a2a *a, int prio, shemb_request **req)
{
	CHECK(shemb_alltoallv_prio(ctx, a->sb, a->sc, a->sd, a->rb, a->rc,
				   a->rd, prio, req));
}

static void run_unwatched(void)
{
	const size_t big = (size_t)16 << 20;
	const char *sb = getenv("SHEMB_FABRIC_STAND_BACK_MS");

	/* with the default bound (20 ms), the polls would end anyway */
	if (!sb || strtoul(sb, NULL, 10) <= UNWATCHED_POLL_MS)
		FAIL("unwatched runs with SHEMB_FABRIC_STAND_BACK_MS above %u",
		     UNWATCHED_POLL_MS);

	for (int it = 0; it < 10; it++) {
		uint64_t seed = 600 + 4 * (uint64_t)it;
		struct a2a a, b;
		shemb_request *r;

		/* long enough a wait for the thread to stand back */
		a2a_prepare(&a, seed, big);
		start_a2a(&a, SHEMB_PRIO_DENSE, NULL);
		a2a_check(&a, seed);
		a2a_prepare(&b, seed + 1, 0);
		start_a2a(&b, SHEMB_PRIO_DENSE, &r);
		poll_alone(r, "an alltoallv started after a blocking one", it);
		a2a_check(&b, seed + 1);

		/* the blocking call goes first, and its caller moves the
		 * big one too until its own is done */
		a2a_prepare(&a, seed + 2, big);
		a2a_prepare(&b, seed + 3, 0);
		start_a2a(&a, SHEMB_PRIO_DENSE - 1, &r);
		start_a2a(&b, SHEMB_PRIO_DENSE, NULL);
		a2a_check(&b, seed + 3);
		poll_alone(r, "an alltoallv in flight when a waiter left", it);
		a2a_check(&a, seed + 2);
	}
}

/* A row-wise table of rows x dim, and in b nbags bags of len ids each
 * (into the arrays given), the ids a mix of seed, position and rank. */
static shemb_table *step_table(int64_t rows, int dim, int nbags, int len,
			       int64_t *offsets, int64_t *ids, uint64_t seed,
			       struct shemb_bags *b)
{
	struct shemb_table_attr ta;
	shemb_table *t;

	shemb_table_attr_init(&ta);
	ta.rows = rows;
	ta.dim = dim;
	/* spread, so that lookups exchange rows: SHARD_AUTO would keep a
	 * small table whole on every rank */
	ta.shard = SHEMB_SHARD_ROW;
	CHECK(shemb_table_create(ctx, &ta, &t));
	for (int k = 0; k <= nbags; k++)
		offsets[k] = (int64_t)k * len;
	for (int k = 0; k < nbags * len; k++)
		ids[k] = (int64_t)(mix((uint64_t)k * seed + (uint64_t)rank) %
				   (uint64_t)rows);
	shemb_bags_init(b);
	b->table = t;
	b->nbags = nbags;
	b->offsets = offsets;
	b->nids = (int64_t)nbags * len;
	b->ids = ids;
	return t;
}

/* ---- a provider call that never returns ---- */

/*
 * Rank 0 runs with tests/wedge.c preloaded: after a while one of its
 * threads never comes back from libfabric, perhaps holding the engine's
 * lock, as when a peer dies holding a lock of the shm provider.  Every
 * rank goes on with small alltoallvs and bulk allreduces until one
 * fails: rank 0's calls must fail with SHEMB_EPEER, the other ranks' with
 * SHEMB_ETIMEDOUT or SHEMB_EPEER (rank 0 stopped answering, then left),
 * and every shemb_ctx_destroy() must return.  Without that, rank 0 waits
 * for good and the job runs out of time.  How long the failed call took
 * is printed, not judged.
 */
/* One round: a small alltoallv (urgent lane), or on odd rounds a bulk
 * allreduce (the bulk lane, whose completions are read without the
 * engine's lock). */
static int wedge_round(int r)
{
	enum { BULK = 1 << 16 };
	static float bulk[BULK];
	struct a2a a;
	int rc;

	if (r % 2)
		return shemb_allreduce_prio(ctx, bulk, bulk, BULK, SHEMB_F32,
					    SHEMB_REDUCE_SUM, SHEMB_PRIO_DENSE,
					    NULL);
	a2a_prepare(&a, 20000 + (uint64_t)r, 0);
	rc = shemb_alltoallv(ctx, a.sb, a.sc, a.sd, a.rb, a.rc, a.rd, NULL);
	if (!rc) {
		a2a_check(&a, 20000 + (uint64_t)r);
	} else {
		free(a.sb);
		free(a.rb);
	}
	return rc;
}

static void run_wedge(void)
{
	uint64_t t0 = 0, ms;
	int rc = 0, r;

	for (r = 0; r < 200000 && !rc; r++) {
		t0 = now_ms();
		rc = wedge_round(r);
	}
	/* rank 0's engine is wedged (or its peers left it): SHEMB_EPEER;
	 * the others see rank 0 stop answering, or leave */
	if (rc != SHEMB_EPEER && (rank == 0 || rc != SHEMB_ETIMEDOUT))
		FAIL("round %d ended with %d (%s): %s", r, rc,
		     shemb_strerror(rc), shemb_ctx_last_error(ctx));
	ms = now_ms() - t0;
	printf("round %d failed after %llu ms: %s\n", r,
	       (unsigned long long)ms, shemb_ctx_last_error(ctx));
}

/*
 * wedge-steps: a thread of rank 0 never comes back from libfabric while
 * every rank starts lookups and backward calls of a table and waits for
 * each (the lookup of odd rounds set by set first), until one fails:
 * rank 0's wait must fail with SHEMB_EPEER, the others' with
 * SHEMB_ETIMEDOUT or SHEMB_EPEER.
 * - The thread of started steps (SHEMB_TEST_WEDGE=0:MS:shemb-steps):
 *   rank 0's step cannot end.  Its later calls that wait for the steps
 *   (a table's destroy, a row read, a new step) must fail at once with
 *   SHEMB_EPEER, and shemb_ctx_destroy() must return SHEMB_EPEER (the
 *   context is left to the stuck thread).  Before, they waited for good.
 * - The progress thread (SHEMB_TEST_WEDGE=0:MS): the step fails with the
 *   transport's own error and ends.
 * Every shemb_ctx_destroy() returns: 0, or SHEMB_EPEER where a thread of
 * steps spins for good on a lock the wedged thread holds (destroy_ctx).
 */
static bool steps_thread_wedged(void)
{
	const char *w = getenv("SHEMB_TEST_WEDGE");

	return w && strstr(w, ":shemb-steps");
}
static int finish(shemb_request *req)
{
	int rc = shemb_wait(req);

	shemb_request_free(req);
	return rc;
}

static int wedge_steps_round(struct shemb_bags *b, float *out, float *grad,
			     int r)
{
	shemb_request *req = NULL;
	int rc = shemb_lookup_start(ctx, 1, b, &out, 0, &req);

	if (!rc && r % 2) {
		rc = shemb_wait_part(req, 0);
		if (rc) {
			shemb_request_free(req);
			return rc;
		}
	}
	if (!rc)
		rc = finish(req);
	if (!rc)
		rc = shemb_backward_start(ctx, 1, b,
					  (const float *const *)&grad, &req);
	if (!rc)
		rc = finish(req);
	return rc;
}

static shemb_table *wedged_table;

/* Rank 0, its thread of started steps stuck: what waits for the steps
 * fails at once, and its table stays (the thread may still use it). */
static void after_stuck_steps(struct shemb_bags *b, float *out,
			      shemb_table **tp)
{
	int64_t id = 1;
	shemb_request *req = NULL;
	uint64_t t0 = now_ms();

	if (shemb_table_read_rows(*tp, 1, &id, out, SHEMB_F32) != SHEMB_EPEER)
		FAIL("read_rows after the stuck step: %s",
		     shemb_ctx_last_error(ctx));
	if (shemb_lookup_start(ctx, 1, b, &out, 0, &req) != SHEMB_EPEER)
		FAIL("a step started after the stuck one: %s",
		     shemb_ctx_last_error(ctx));
	if (shemb_table_destroy(*tp) != SHEMB_EPEER)
		FAIL("table_destroy after the stuck step: %s",
		     shemb_ctx_last_error(ctx));
	printf("after the stuck step: %llu ms: %s\n",
	       (unsigned long long)(now_ms() - t0), shemb_ctx_last_error(ctx));
}

static void run_wedge_steps(shemb_table **tp)
{
	enum { BAGS = 64, LEN = 4, DIM = 16 };
	static int64_t offsets[BAGS + 1], ids[BAGS * LEN];
	static float out[BAGS * DIM], grad[BAGS * DIM];
	struct shemb_bags b;
	uint64_t t0 = 0;
	int rc = 0, r;

	*tp = step_table(4096, DIM, BAGS, LEN, offsets, ids, 7, &b);
	for (int k = 0; k < BAGS * DIM; k++)
		grad[k] = 0.001f;
	for (r = 0; r < 1000000 && !rc; r++) {
		t0 = now_ms();
		rc = wedge_steps_round(&b, out, grad, r);
	}
	if (rc != SHEMB_EPEER && (rank == 0 || rc != SHEMB_ETIMEDOUT))
		FAIL("step round %d ended with %d (%s): %s", r, rc,
		     shemb_strerror(rc), shemb_ctx_last_error(ctx));
	printf("step round %d failed after %llu ms: %s\n", r,
	       (unsigned long long)(now_ms() - t0), shemb_ctx_last_error(ctx));
	if (rank == 0 && steps_thread_wedged())
		after_stuck_steps(&b, out, tp);
}

/*
 * slow-steps: with a short timeout (--timeout), many healthy lookups
 * started back to back, the last waited for (set by set, then whole)
 * well after the timeout and the second the check gives a step to end:
 * every wait must succeed (a healthy step passes the check for a stuck
 * thread) and every context go.  The time of the wait is printed; the
 * check is that nothing fails.
 */
static void run_slow_steps(void)
{
	enum { STEPS = 400, BAGS = 4096, LEN = 16, DIM = 64 };
	static int64_t offsets[BAGS + 1], ids[BAGS * LEN];
	static float out[BAGS * DIM]; /* one after the other */
	shemb_request *req[STEPS];
	struct shemb_bags b;
	shemb_table *t = step_table(1 << 18, DIM, BAGS, LEN, offsets, ids, 13,
				    &b);
	uint64_t t0;

	t0 = now_ms();
	for (int s = 0; s < STEPS; s++) {
		float *o = out;

		CHECK(shemb_lookup_start(ctx, 1, &b, &o, SHEMB_LOOKUP_NO_GRAD,
					 &req[s]));
	}
	CHECK(shemb_wait_part(req[STEPS - 1], 0));
	for (int s = 0; s < STEPS; s++) {
		CHECK(shemb_wait(req[s]));
		shemb_request_free(req[s]);
	}
	printf("%d lookups waited for %llu ms, timeout %d ms\n", STEPS,
	       (unsigned long long)(now_ms() - t0), timeout_ms);
	CHECK(shemb_table_destroy(t));
}

/*
 * slice: the progress thread (shemb-progress) has the slice the context's
 * comm_slice_us asks for, or the one a thread has without asking for -1,
 * where the kernel takes slices (Linux 6.12 and later); then collectives
 * work as ever.
 */
static void run_slice(void)
{
	struct shemb_ctx_attr a;
	long long dflt, want, got;
	int tid = slice_thread_named("shemb-progress");

	shemb_ctx_attr_init(&a);
	CHECK(shemb_ctx_get_attr(ctx, &a));
	if (!slice_kernel_takes(&dflt)) {
		printf("the kernel takes no slice a thread asks for: not "
		       "checked\n");
	} else if (a.progress == SHEMB_PROGRESS_THREAD) {
		want = a.comm_slice_us == -1 ? dflt
					     : a.comm_slice_us * 1000LL;
		got = tid > 0 ? slice_of_thread(tid) : -1;
		if (got != want)
			FAIL("comm_slice_us %d: the progress thread (%d) has "
			     "a slice of %lld ns, not %lld", a.comm_slice_us,
			     tid, got, want);
		printf("progress thread's slice %lld ns\n", got);
	}
	run_alltoallv(4, 0);
}

/* ---- mismatched calls ---- */

static void expect_einval(int rc, const char *what)
{
	if (rc != SHEMB_EINVAL)
		FAIL("%s: want SHEMB_EINVAL, got %d (%s): %s", what, rc,
		     shemb_strerror(rc), shemb_ctx_last_error(ctx));
	printf("%s: %s\n", what, shemb_ctx_last_error(ctx));
}

/* Rank 0 thinks it sends one byte more to rank 1 than rank 1 expects:
 * both fail with the disagreement named; every other rank fails too when
 * their notice reaches it before its own exchanges finish, and may succeed
 * otherwise (what it sent and received was consistent). */
static void run_mismatch_count(void)
{
	size_t sc[64] = { 0 }, sd[64] = { 0 }, rc[64] = { 0 }, rd[64] = { 0 };
	char sb[64] = { 0 }, rb[64];
	int st;

	if (rank == 0)
		sc[1] = 9;
	if (rank == 1)
		rc[0] = 8;
	st = shemb_alltoallv(ctx, sb, sc, sd, rb, rc, rd, NULL);
	if (rank > 1 && st == 0)
		printf("uninvolved rank finished first\n");
	else
		expect_einval(st, "count mismatch");
	if (rank <= 1 && !strstr(shemb_ctx_last_error(ctx), "9 bytes") &&
	    !strstr(shemb_ctx_last_error(ctx), "sends 9"))
		FAIL("the detail must name the counts: %s",
		     shemb_ctx_last_error(ctx));
	/* the next collective works */
	CHECK(shemb_barrier(ctx, NULL));
}

/* Rank 0 calls a barrier where the others call an allreduce; then an
 * alltoallv where the others call a barrier, its request freed before
 * the collective ends (it goes on without it). */
static void run_mismatch_order(void)
{
	static float v = 1;
	static char sb[64], rb[64];
	static size_t cnt[64], dsp[64];
	shemb_request *req = NULL;
	int st = rank == 0 ? shemb_barrier(ctx, NULL)
			   : shemb_allreduce(ctx, &v, &v, 1, SHEMB_F32,
					     SHEMB_REDUCE_SUM, NULL);

	expect_einval(st, "order mismatch");
	CHECK(shemb_barrier(ctx, NULL));
	if (world > 64)
		FAIL("at most 64 ranks");
	for (int p = 0; p < world; p++) {
		cnt[p] = 1;
		dsp[p] = (size_t)p;
	}
	if (rank == 0) {
		CHECK(shemb_alltoallv(ctx, sb, cnt, dsp, rb, cnt, dsp, &req));
		shemb_request_free(req);
	} else {
		expect_einval(shemb_barrier(ctx, NULL),
			      "order mismatch, request freed");
	}
	CHECK(shemb_barrier(ctx, NULL));
}

/* Rank 0 gives an allreduce an urgent priority, the others the default:
 * their data would travel on different lanes, which the headers tell. */
static void run_mismatch_prio(void)
{
	float v = 1;
	int st = shemb_allreduce_prio(ctx, &v, &v, 1, SHEMB_F32,
				      SHEMB_REDUCE_SUM,
				      rank == 0 ? SHEMB_PRIO_LOOKUP
						: SHEMB_PRIO_DENSE, NULL);

	expect_einval(st, "priority mismatch");
	/* priorities on the same side of SHEMB_PRIO_DENSE may differ */
	v = 1;
	st = shemb_allreduce_prio(ctx, &v, &v, 1, SHEMB_F32, SHEMB_REDUCE_SUM,
				  SHEMB_PRIO_DENSE - rank, NULL);
	CHECK(st);
	if (v != (float)world)
		FAIL("allreduce after the mismatch: %g, want %d", v, world);
}

/* An allreduce where rank 0 differs in count, then dtype, then op, and
 * an allgatherv where rank 0 sends one byte more than the others expect
 * of it (and expects of itself): each call pairs every rank with rank 0,
 * so every rank fails each, and the next collective works. */
static void run_mismatch_args(void)
{
	static const struct {
		size_t count;
		int dtype, op;
		const char *what;
	} ar[] = {
		{ 3, SHEMB_F16, SHEMB_REDUCE_SUM, "allreduce count mismatch" },
		/* as many bytes: only the header's dtype tells */
		{ 2, SHEMB_BF16, SHEMB_REDUCE_SUM, "allreduce dtype mismatch" },
		{ 2, SHEMB_F16, SHEMB_REDUCE_MAX, "allreduce op mismatch" },
	};
	uint16_t v[4] = { 0 };
	size_t rc[64], rd[64];
	char sb[4] = { 0 }, rb[256];

	for (size_t i = 0; i < sizeof(ar) / sizeof(ar[0]); i++) {
		int st = rank == 0
			? shemb_allreduce(ctx, v, v, ar[i].count, ar[i].dtype,
					  ar[i].op, NULL)
			: shemb_allreduce(ctx, v, v, 2, SHEMB_F16,
					  SHEMB_REDUCE_SUM, NULL);

		expect_einval(st, ar[i].what);
		CHECK(shemb_barrier(ctx, NULL));
	}
	if (world > 64)
		FAIL("at most 64 ranks");
	for (int p = 0; p < world; p++) {
		rc[p] = 2;
		rd[p] = (size_t)p * 4;
	}
	if (rank == 0)
		rc[0] = 3;	/* its own counts agree */
	expect_einval(shemb_allgatherv(ctx, sb, rank == 0 ? 3 : 2, rb, rc, rd,
				       NULL),
		      "allgatherv count mismatch");
	CHECK(shemb_barrier(ctx, NULL));
}

/* ---- a rank that stops answering ---- */

/*
 * Rank world - 1 makes no call for twice the timeout: the others'
 * allreduce fails with SHEMB_ETIMEDOUT within it, and the detail names
 * the rank whose header never came.  The silent rank then makes its call
 * without a check of the result: its peers' messages may have landed
 * before they gave up (success), or they may have left (SHEMB_EPEER).
 * With more ranks, the first waiting one to time out leaves, and the
 * others may see that first (SHEMB_EPEER); the rank that timed out
 * prints its detail, which test_coll.sh requires of at least one.
 */
static void run_stall(void)
{
	double v = rank, sum = 0;
	char want[64];
	int rc;

	if (rank == world - 1)
		usleep((useconds_t)timeout_ms * 2000u);
	rc = shemb_allreduce(ctx, &v, &sum, 1, SHEMB_F64, SHEMB_REDUCE_SUM,
			     NULL);
	if (rank == world - 1)
		return;
	if (rc == SHEMB_EPEER && world > 2)
		return;
	if (rc != SHEMB_ETIMEDOUT)
		FAIL("allreduce beside a silent rank gave %d, not "
		     "SHEMB_ETIMEDOUT: %s", rc, shemb_ctx_last_error(ctx));
	snprintf(want, sizeof(want), "header from rank %d", world - 1);
	if (!strstr(shemb_ctx_last_error(ctx), want))
		FAIL("the timeout's detail '%s' lacks '%s'",
		     shemb_ctx_last_error(ctx), want);
	printf("timed out: %s\n", shemb_ctx_last_error(ctx));
}

/* ---- a rank that dies ---- */

static void run_kill_one(void)
{
	struct a2a a;
	int st;

	big_from_all = true;
	a2a_prepare(&a, 77, (size_t)64 << 20);
	if (rank == world - 1) {
		/* die while the transfers are under way */
		shemb_request *req;

		CHECK(shemb_alltoallv(ctx, a.sb, a.sc, a.sd, a.rb, a.rc,
					 a.rd, &req));
		usleep(20000);
		raise(SIGKILL);
	}
	st = shemb_alltoallv(ctx, a.sb, a.sc, a.sd, a.rb, a.rc, a.rd, NULL);
	/* the victim's sleep may run long on a loaded machine, and it may
	 * take all it was sent before it dies: then the data must be whole,
	 * and the barrier fails */
	if (st == 0) {
		printf("finished before rank %d died\n", world - 1);
		a2a_check(&a, 77);
		a.sb = a.rb = NULL;
	} else if (st != SHEMB_EPEER && st != SHEMB_ETIMEDOUT)
		FAIL("want SHEMB_EPEER or SHEMB_ETIMEDOUT, got %d: %s", st,
		     shemb_ctx_last_error(ctx));
	else
		printf("failed as it should: %s\n",
		       shemb_ctx_last_error(ctx));
	st = shemb_barrier(ctx, NULL);
	if (st != SHEMB_EPEER && st != SHEMB_ETIMEDOUT)
		FAIL("a later call must fail too, got %d", st);
	if (shemb_ctx_async_error(ctx) == 0)
		FAIL("shemb_ctx_async_error must report the failure");
	free(a.sb);
	free(a.rb);
}

static void want_peer_failure(int st, const char *what)
{
	if (st != SHEMB_EPEER && st != SHEMB_ETIMEDOUT)
		FAIL("%s: want SHEMB_EPEER or SHEMB_ETIMEDOUT, got %d: %s",
		     what, st, shemb_ctx_last_error(ctx));
}

/* Rank world-1 dies with steps started but not yet run on the others:
 * every one of their requests (lookups and a dense allreduce queued
 * among them) must fail, none hang. */
static void run_kill_steps(void)
{
	enum { STEPS = 6, BAGS = 64, LEN = 4, DIM = 16 };
	static int64_t offsets[BAGS + 1], ids[BAGS * LEN];
	static float out[STEPS][BAGS * DIM];
	double dense[32] = { 0 }, sum[32];
	struct shemb_bags b;
	shemb_request *req[STEPS + 1] = { NULL };
	shemb_table *t = step_table(4096, DIM, BAGS, LEN, offsets, ids, 31, &b);
	int st;

	/* Rank world-1 may leave the barrier before the others have taken
	 * its last message, and they may learn of its death first: then
	 * the barrier fails here, and the steps below are started after
	 * the failure is known, which they must report just the same. */
	st = shemb_barrier(ctx, NULL);
	if (rank == world - 1)
		raise(SIGKILL);
	if (st)
		want_peer_failure(st, "the barrier before the steps");
	for (int s = 0; s < STEPS; s++) {
		float *o = out[s];

		CHECK(shemb_lookup_start(ctx, 1, &b, &o,
					 s % 2 ? SHEMB_LOOKUP_NO_GRAD : 0,
					 &req[s]));
		/* its start fails at once when the failure is known */
		if (s == 2 && shemb_allreduce(ctx, dense, sum, 32, SHEMB_F64,
					      SHEMB_REDUCE_SUM, &req[STEPS]))
			want_peer_failure(shemb_ctx_async_error(ctx),
					  "starting an allreduce");
	}
	for (int s = 0; s <= STEPS; s++) {
		const char *what = s < STEPS ? "a started lookup"
					     : "a queued allreduce";

		if (req[s])
			want_peer_failure(shemb_wait(req[s]), what);
		shemb_request_free(req[s]);
	}
	printf("every started step failed as it should: %s\n",
	       shemb_ctx_last_error(ctx));
	shemb_table_destroy(t);
}

/* One request of a relaxed pair: done, or failed as a dead peer makes
 * it (then every later one must fail too). */
static bool pair_request(shemb_request *r, bool *failed, const char *what)
{
	int st = shemb_wait(r);

	shemb_request_free(r);
	if (!st && *failed)
		FAIL("%s succeeded after an earlier one saw rank %d dead",
		     what, world - 1);
	if (st)
		want_peer_failure(st, what);
	*failed |= st != 0;
	return st == 0;
}

/* Rank world-1 dies a moment after starting a backward with the next
 * lookup behind it, so the others' pairs, run relaxed, lose it at any
 * point: each of their requests succeeds or fails with the peer's
 * death, never hangs, and once one failed the later ones fail. */
static void run_kill_relaxed(void)
{
	enum { PAIRS = 40, VICTIM_PAIR = 6, BAGS = 256, LEN = 8, DIM = 32 };
	static int64_t offsets[BAGS + 1], ids[2][BAGS * LEN];
	static float out[2][BAGS * DIM], grad[BAGS * DIM];
	const float *g = grad;
	struct shemb_table_attr ta;
	struct shemb_bags b[2];
	bool failed = false;
	shemb_table *t;
	int done = 0;

	shemb_table_attr_init(&ta);
	ta.rows = 1 << 16;
	ta.dim = DIM;
	CHECK(shemb_table_create(ctx, &ta, &t));
	for (int k = 0; k <= BAGS; k++)
		offsets[k] = (int64_t)k * LEN;
	for (int k = 0; k < BAGS * DIM; k++)
		grad[k] = 0.01f;
	for (int s = 0; s < 2; s++) {
		shemb_bags_init(&b[s]);
		b[s].table = t;
		b[s].nbags = BAGS;
		b[s].offsets = offsets;
		b[s].nids = BAGS * LEN;
		b[s].ids = ids[s];
	}
	for (int k = 0; k < BAGS * LEN; k++)
		ids[0][k] = (int64_t)(mix((uint64_t)k * 31 + (uint64_t)rank) %
				      (1 << 16));
	CHECK(shemb_lookup(ctx, 1, &b[0], (float *const[]){ out[0] }, 0));
	for (int p = 0; p < PAIRS && !failed; p++) {
		int cur = p % 2, nxt = cur ^ 1;
		shemb_request *bw, *lk;

		for (int k = 0; k < BAGS * LEN; k++)
			ids[nxt][k] = (int64_t)(mix((uint64_t)(k + p * 7919) *
						    31 + (uint64_t)rank) %
						(1 << 16));
		if (shemb_backward_start(ctx, 1, &b[cur], &g, &bw) ||
		    shemb_lookup_start(ctx, 1, &b[nxt],
				       (float *const[]){ out[nxt] }, 0, &lk)) {
			want_peer_failure(shemb_ctx_async_error(ctx),
					  "starting a pair");
			break;
		}
		if (rank == world - 1 && p == VICTIM_PAIR) {
			usleep((useconds_t)(mix((uint64_t)getpid()) % 3000));
			raise(SIGKILL);
		}
		pair_request(bw, &failed, "a started backward");
		done += pair_request(lk, &failed, "the lookup behind it");
	}
	if (!failed)
		FAIL("%d pairs ran with rank %d dead", PAIRS, world - 1);
	want_peer_failure(shemb_barrier(ctx, NULL), "a barrier after them");
	printf("%d lookups ran before the failure was seen: %s\n", done,
	       shemb_ctx_last_error(ctx));
	shemb_table_destroy(t);
}

/*
 * --pin: each rank on one CPU of those it was given, rank modulo their
 * count, before the context sees them.  Returns their count.
 */
static int pin_to_one_cpu(void)
{
	const char *r = getenv("SHEMB_RANK");
	cpu_set_t cpus, one;
	int n, pick, seen = 0;

	if (!r || sched_getaffinity(0, sizeof(cpus), &cpus))
		FAIL("--pin needs SHEMB_RANK and sched_getaffinity");
	n = CPU_COUNT(&cpus);
	pick = atoi(r) % n;
	CPU_ZERO(&one);
	for (int c = 0; c < CPU_SETSIZE; c++) {
		if (CPU_ISSET(c, &cpus) && seen++ == pick) {
			CPU_SET(c, &one);
			break;
		}
	}
	if (sched_setaffinity(0, sizeof(one), &one))
		FAIL("sched_setaffinity failed");
	return n;
}

/*
 * The chunking in use (the bulk lane's): the one asked for (over shm, at
 * least 8192 bytes), or the documented default.  The ranks of these
 * tests share one host and job_cpus CPUs between them: more ranks than
 * those make shm's defaults the small ones.
 */
static void want_in_use(const struct shemb_ctx_attr *a, size_t chunk,
			int in_flight, int job_cpus)
{
	bool shm = !strncmp(a->provider, "shm", 3);
	bool crowded = a->world_size > job_cpus;

	if (!chunk)
		chunk = !shm ? 1u << 20 : crowded ? 64u << 10 : 4u << 20;
	else if (shm && chunk < 8192)
		chunk = 8192;
	if (!in_flight)
		in_flight = !shm ? 32 : crowded ? 4 : 16;
	if (shm && a->world_size > 1 &&
	    in_flight > 1016 / (4 * (a->world_size - 1)))
		in_flight = 1016 / (4 * (a->world_size - 1));
	if (a->chunk_bytes != chunk || a->chunks_in_flight != in_flight)
		FAIL("chunks of %zu B, %d in flight in use, want %zu B, %d "
		     "(%d ranks, %d CPUs)", a->chunk_bytes,
		     a->chunks_in_flight, chunk, in_flight, a->world_size,
		     job_cpus);
}

static void single_copy_of_rank0(struct shemb_ctx_attr *a, const char *v)
{
	const char *s = getenv("SHEMB_RANK");

	if (s && !strcmp(s, "0"))
		a->single_copy = atoi(v);
}

/* --want-create-error: the code shemb_ctx_create must fail with. */
static void check_create_error(int rc, int want)
{
	if (!rc)
		FAIL("shemb_ctx_create succeeded; want %d (%s)", want,
		     shemb_strerror(want));
	if (rc != want)
		FAIL("shemb_ctx_create gave %d (%s): %s; want %d", rc,
		     shemb_strerror(rc), shemb_ctx_last_error(NULL), want);
	printf("shemb_ctx_create refused, as it should: %s\n",
	       shemb_ctx_last_error(NULL));
	exit(0);
}

static void open_ctx(int argc, char **argv)
{
	struct shemb_ctx_attr a;
	size_t chunk;
	int rc, in_flight, pinned_of = 0, job_cpus, want_copy = 0;
	int want_error = 0;
	cpu_set_t cpus;

	shemb_ctx_attr_init(&a);
	a.nthreads = 1;
	a.timeout_ms = 20000;
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--caller"))
			a.progress = SHEMB_PROGRESS_CALLER;
		else if (!strcmp(argv[i], "--chunk") && i + 1 < argc)
			a.chunk_bytes = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--timeout") && i + 1 < argc)
			a.timeout_ms = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--in-flight") && i + 1 < argc)
			a.chunks_in_flight = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--slice") && i + 1 < argc)
			a.comm_slice_us = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--device"))
			on_device = true;
		else if (!strcmp(argv[i], "--pin") && !pinned_of)
			pinned_of = pin_to_one_cpu();
		else if (!strcmp(argv[i], "--single-copy") && i + 1 < argc)
			a.single_copy = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--single-copy-of-rank0") &&
			 i + 1 < argc)
			single_copy_of_rank0(&a, argv[++i]);
		else if (!strcmp(argv[i], "--want-single-copy") &&
			 i + 1 < argc)
			want_copy = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--want-create-error") &&
			 i + 1 < argc)
			want_error = atoi(argv[++i]);
	}
	if (on_device)
		a.device = SHEMB_DEVICE_CUDA;
	rc = shemb_ctx_create(&a, &ctx);
	if (want_error)
		check_create_error(rc, want_error);
	if (rc) {
		fprintf(stderr, "shemb_ctx_create: %s: %s\n", shemb_strerror(rc),
			shemb_ctx_last_error(NULL));
		exit(1);
	}
	chunk = a.chunk_bytes;
	in_flight = a.chunks_in_flight;
	shemb_ctx_get_attr(ctx, &a);
	rank = a.rank;
	world = a.world_size;
	timeout_ms = a.timeout_ms;
	if (on_device) {
		char why[512];

		if (devmem_open(a.device_id, why, sizeof(why)))
			FAIL("--device: %s", why);
	}
	if (sched_getaffinity(0, sizeof(cpus), &cpus))
		FAIL("sched_getaffinity failed");
	/* pinned ranks have one CPU each, but all of them between them */
	job_cpus = pinned_of ? (world < pinned_of ? world : pinned_of)
			     : CPU_COUNT(&cpus);
	want_in_use(&a, chunk, in_flight, job_cpus);
	if (want_copy && a.single_copy != want_copy)
		FAIL("single_copy %d in use, want %d", a.single_copy,
		     want_copy);
	/* the per-rank arrays of the scenarios that exchange data */
	if (world > 64 && (argc < 2 || strcmp(argv[1], "barrier")))
		FAIL("this test handles at most 64 ranks but in barrier");
	if (rank == 0)
		printf("%d ranks over %s%s\n", world, a.provider,
		       a.single_copy > 0 ? ", single copy" : "");
}

/*
 * After wedge-steps, rank 0's context stays with its stuck thread of
 * steps.  The thread wedged may hold a real lock of the shm provider's
 * shared memory (taken before the one it never gets): then a thread of
 * another rank, or the steps' thread of rank 0 when its progress thread
 * is the one wedged, spins on it for good as well, and that context
 * stays too.  Either way, destroy must return.
 */
static void destroy_ctx(const char *s)
{
	bool wedged = !strcmp(s, "wedge-steps");
	/* a rank killed while it held a lock of shm's shared memory leaves
	 * a survivor's thread spinning in libfabric for good, the known hang
	 * of tests/test_coll_fail.c: if it is the thread of started steps,
	 * the context stays (SHEMB_EPEER), as documented */
	bool killed = !strncmp(s, "kill-", 5);
	int rc = shemb_ctx_destroy(ctx);
	/* a context that failed to go is still there to ask */
	const char *why = rc ? shemb_ctx_last_error(ctx) : "";

	if (wedged && rank == 0 && steps_thread_wedged() && rc != SHEMB_EPEER)
		FAIL("shemb_ctx_destroy gave %d (%s), not SHEMB_EPEER", rc,
		     shemb_strerror(rc));
	if (rc && !((wedged || killed) && rc == SHEMB_EPEER))
		FAIL("shemb_ctx_destroy gave %d (%s): %s", rc,
		     shemb_strerror(rc), why);
	if (rc)
		printf("rank %d: the context stays: %s\n", rank, why);
}

int main(int argc, char **argv)
{
	const char *s = argc > 1 ? argv[1] : "";

	/* a line at a time: a rank killed by its test keeps what it said */
	setvbuf(stdout, NULL, _IOLBF, 0);
	open_ctx(argc, argv);
	if (!strcmp(s, "alltoallv"))
		run_alltoallv(12, 0);
	else if (!strcmp(s, "alltoallv-big"))
		run_alltoallv(2, (size_t)64 << 20);
	else if (!strcmp(s, "allgatherv"))
		run_allgatherv(8);
	else if (!strcmp(s, "allreduce"))
		run_allreduce();
	else if (!strcmp(s, "barrier"))
		for (int i = 0; i < 50; i++)
			CHECK(shemb_barrier(ctx, NULL));
	else if (!strcmp(s, "concurrent"))
		run_concurrent();
	else if (!strcmp(s, "many-chunks"))
		run_many_chunks();
	else if (!strcmp(s, "priorities"))
		run_priorities();
	else if (!strcmp(s, "staggered"))
		run_staggered();
	else if (!strcmp(s, "late-start"))
		run_late_start();
	else if (!strcmp(s, "stall"))
		run_stall();
	else if (!strcmp(s, "wedge"))
		run_wedge();
	else if (!strcmp(s, "wedge-steps"))
		run_wedge_steps(&wedged_table);
	else if (!strcmp(s, "slow-steps"))
		run_slow_steps();
	else if (!strcmp(s, "slice"))
		run_slice();
	else if (!strcmp(s, "hold"))
		run_hold();
	else if (!strcmp(s, "unwatched"))
		run_unwatched();
	else if (!strcmp(s, "stage-refused"))
		run_stage_refused();
	else if (!strcmp(s, "lanes"))
		run_lanes(argc > 2 ? atoi(argv[2]) : 400);
	else if (!strcmp(s, "mismatch-count"))
		run_mismatch_count();
	else if (!strcmp(s, "mismatch-order"))
		run_mismatch_order();
	else if (!strcmp(s, "mismatch-prio"))
		run_mismatch_prio();
	else if (!strcmp(s, "mismatch-args"))
		run_mismatch_args();
	else if (!strcmp(s, "kill-one"))
		run_kill_one();
	else if (!strcmp(s, "kill-steps"))
		run_kill_steps();
	else if (!strcmp(s, "kill-relaxed"))
		run_kill_relaxed();
	else
		FAIL("unknown scenario '%s'", s);
	destroy_ctx(s);
	if (on_device)
		free_spent_mirrors();
	if (!strcmp(s, "wedge"))
		printf("rank %d: context destroyed\n", rank);
	return 0;
}
