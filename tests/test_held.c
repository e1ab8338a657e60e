/*
 * test_held.c - the buffers of a failed collective that the transport
 * still holds (lib/held.c): a context of one rank whose communicator is
 * replaced by one that fails its collectives as told, and keeps the
 * failed ones it says it holds, as libfabric does its posted transfers.
 * When the communicator is destroyed, it writes into their receive
 * buffers and reads their send buffers, as a late piece would: a buffer
 * the library freed too early is then written after its free, which
 * ASan and valgrind report.  Without them, a buffer freed too early
 * comes back from the next allocations of its size (the allocators'
 * caches hand out the last freed first), and glibc's fills what is freed.
 *
 * - the library's own exchange (shemb__xchg_*) keeps both buffers until
 *   the context is destroyed when the failure holds them, and frees them
 *   at once when it does not, or when the exchange succeeded;
 * - the application's buffers are remembered, never freed by the
 *   library (the test frees them after the context);
 * - the library's gather of words moves copies of its own: the caller's
 *   arrays are never written after the call.
 * The whole library comes from the static core (one copy), for the
 * internal calls and the context's communicator.
 */
#include "config.h"

#include <check.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shemb.h"
#include "lib/comm.h"
#include "lib/dist.h"
#include "lib/held.h"
#include "lib/internal.h"
#include "tests/check_run.h"

#define BYTES 512 /* small enough for the allocators' per-thread caches */
#define LATE 0xa5 /* what a late piece writes */

struct fake_op {
	struct fake_op *next;
	int status;
	bool hold;
	const void *sendbuf;
	void *recvbuf;
	size_t recv_len;
};

/* The communicator: fails with status (0: runs the collective, one rank)
 * and says it holds the failed ones when hold is set. */
struct fake {
	const struct shemb_comm_ops *self_ops; /* the context's own, */
	void *self;                            /* closed with it */
	int status;
	bool hold;
	bool stuck;                            /* cannot be closed */
	struct fake_op *held;                  /* failed and held */
	int *late_writes;
};

/* The end of the furthest piece of one rank's counts and displacements. */
static size_t extent(const size_t *counts, const size_t *displs)
{
	return counts[0] ? displs[0] + counts[0] : 0;
}

static void run_one_rank(const struct shemb__coll *c)
{
	if (c->kind == SHEMB__ALLTOALLV && c->sendcounts[0])
		memcpy((char *)c->recvbuf + c->rdispls[0],
		       (const char *)c->sendbuf + c->sdispls[0],
		       c->sendcounts[0]);
	if (c->kind == SHEMB__ALLGATHERV && c->sendcount)
		memcpy((char *)c->recvbuf + c->rdispls[0], c->sendbuf,
		       c->sendcount);
}

static int fake_start(void *comm, const struct shemb__coll *c,
		      struct shemb__op **op, char *why, size_t len)
{
	struct fake *f = comm;
	struct fake_op *o = calloc(1, sizeof(*o));

	(void)why;
	(void)len;
	if (!o)
		return SHEMB_ENOMEM;
	o->status = f->status;
	o->hold = f->hold;
	o->sendbuf = c->sendbuf;
	o->recvbuf = c->recvbuf;
	if (c->kind == SHEMB__ALLTOALLV || c->kind == SHEMB__ALLGATHERV)
		o->recv_len = extent(c->recvcounts, c->rdispls);
	if (!o->status)
		run_one_rank(c);
	*op = (struct shemb__op *)o;
	return 0;
}

static int fake_wait(void *comm, struct shemb__op *op, char *why, size_t len)
{
	struct fake_op *o = (struct fake_op *)op;

	(void)comm;
	if (o->status)
		snprintf(why, len, "the fake transport failed it");
	return o->status;
}

static int fake_test(void *comm, struct shemb__op *op, int *done, char *why,
		     size_t len)
{
	*done = 1;
	return fake_wait(comm, op, why, len);
}

/* A failed op it holds stays its own until it is destroyed. */
static void fake_release(void *comm, struct shemb__op *op)
{
	struct fake *f = comm;
	struct fake_op *o = (struct fake_op *)op;

	if (o->status && o->hold) {
		o->next = f->held;
		f->held = o;
		return;
	}
	free(o);
}

static int fake_async_error(void *comm, char *msg, size_t len)
{
	(void)comm;
	(void)msg;
	(void)len;
	return 0;
}

static const char *fake_describe(void *comm)
{
	(void)comm;
	return "fake";
}

/* The late pieces: into every held op's receive buffer, out of its send
 * buffer; then the context's own communicator closes.  A stuck one says
 * it could not close. */
static bool fake_destroy(void *comm)
{
	struct fake *f = comm;
	volatile unsigned char sink = 0;
	bool closed = !f->stuck;

	while (f->held) {
		struct fake_op *o = f->held;

		f->held = o->next;
		memset(o->recvbuf, LATE, o->recv_len);
		if (o->sendbuf)
			sink ^= *(const unsigned char *)o->sendbuf;
		(*f->late_writes)++;
		free(o);
	}
	(void)sink;
	f->self_ops->destroy(f->self);
	free(f);
	return closed;
}

static bool fake_holds(void *comm, struct shemb__op *op)
{
	(void)comm;
	return ((struct fake_op *)op)->hold;
}

static const struct shemb_comm_ops fake_ops = {
	.size = sizeof(struct shemb_comm_ops),
	.name = "fake",
	.start = fake_start,
	.test = fake_test,
	.wait = fake_wait,
	.release = fake_release,
	.async_error = fake_async_error,
	.describe = fake_describe,
	.destroy = fake_destroy,
	.holds = fake_holds,
};

static int late_writes;

static shemb_ctx *ctx_with_fake(int status, bool hold, struct fake **out)
{
	struct shemb_ctx_attr a;
	shemb_ctx *ctx = NULL;
	struct fake *f = calloc(1, sizeof(*f));

	ck_assert_ptr_nonnull(f);
	shemb_ctx_attr_init(&a);
	a.world_size = 1;
	ck_assert_int_eq(shemb_ctx_create(&a, &ctx), 0);
	f->self_ops = ctx->comm_ops;
	f->self = ctx->comm;
	f->status = status;
	f->hold = hold;
	f->late_writes = &late_writes;
	ctx->comm_ops = &fake_ops;
	ctx->comm = f;
	late_writes = 0;
	*out = f;
	return ctx;
}

/* Neither a nor b was freed: the next allocations of their size (the
 * exchange's, sbytes + 8) do not return them. */
static void check_not_freed(const void *a, const void *b)
{
	void *p[4];

	for (int i = 0; i < 4; i++) {
		p[i] = malloc(BYTES + 8);
		ck_assert_ptr_nonnull(p[i]);
		ck_assert_msg(p[i] != a && p[i] != b, "a buffer was freed");
	}
	for (int i = 0; i < 4; i++)
		free(p[i]);
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(seed + 7 * i);
}

static bool filled(const unsigned char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != (unsigned char)(seed + 7 * i))
			return false;
	return true;
}

/* An exchange of one rank with itself, its send buffer filled. */
static void xchg_ready(struct shemb__xchg *x)
{
	ck_assert_int_eq(shemb__xchg_init(x, 1), 0);
	x->scount[0] = BYTES;
	x->rcount[0] = BYTES;
	ck_assert_int_eq(shemb__xchg_alloc(x), 0);
	fill((unsigned char *)x->sbuf, BYTES, 3);
}

START_TEST(library_exchange_kept_when_held)
{
	struct fake *f;
	shemb_ctx *ctx = ctx_with_fake(SHEMB_EPEER, true, &f);
	struct shemb__xchg x;
	unsigned char *sbuf, *rbuf;
	size_t owned = 0;

	xchg_ready(&x);
	sbuf = (unsigned char *)x.sbuf;
	rbuf = (unsigned char *)x.rbuf;
	ck_assert_int_eq(shemb__xchg_run(ctx, &x), SHEMB_EPEER);
	ck_assert_ptr_nonnull(strstr(shemb_ctx_last_error(ctx), "fake"));
	shemb__xchg_free(ctx, &x);
	ck_assert_uint_eq(shemb__held_count(ctx, &owned), 2);
	ck_assert_uint_eq(owned, 2);
	/* still the library's, untouched: not freed */
	check_not_freed(sbuf, rbuf);
	ck_assert(filled(sbuf, BYTES, 3));
	ck_assert_int_eq(shemb_ctx_destroy(ctx), 0);
	ck_assert_int_eq(late_writes, 1);
}
END_TEST

/* A communicator that cannot be closed (a thread stuck in it) may still
 * touch what it holds: the library leaves its buffers allocated. */
START_TEST(library_exchange_left_when_not_closed)
{
	struct fake *f;
	shemb_ctx *ctx = ctx_with_fake(SHEMB_EPEER, true, &f);
	struct shemb__xchg x;
	char *sbuf, *rbuf;

	xchg_ready(&x);
	sbuf = x.sbuf;
	rbuf = x.rbuf;
	ck_assert_int_eq(shemb__xchg_run(ctx, &x), SHEMB_EPEER);
	shemb__xchg_free(ctx, &x);
	f->stuck = true;
	ck_assert_int_eq(shemb_ctx_destroy(ctx), 0);
	check_not_freed(sbuf, rbuf);
	ck_assert(filled((unsigned char *)sbuf, BYTES, 3));
	free(sbuf); /* the test's, now */
	free(rbuf);
}
END_TEST

START_TEST(library_exchange_freed_when_not_held)
{
	struct fake *f;
	shemb_ctx *ctx = ctx_with_fake(SHEMB_EINVAL, false, &f);
	struct shemb__xchg x;
	size_t owned = 1;

	xchg_ready(&x);
	ck_assert_int_eq(shemb__xchg_run(ctx, &x), SHEMB_EINVAL);
	shemb__xchg_free(ctx, &x);
	ck_assert_uint_eq(shemb__held_count(ctx, &owned), 0);
	ck_assert_uint_eq(owned, 0);
	/* and after success: the pieces moved, nothing kept */
	f->status = 0;
	xchg_ready(&x);
	ck_assert_int_eq(shemb__xchg_run(ctx, &x), 0);
	ck_assert(filled((unsigned char *)x.rbuf, BYTES, 3));
	shemb__xchg_free(ctx, &x);
	ck_assert_uint_eq(shemb__held_count(ctx, NULL), 0);
	ck_assert_int_eq(shemb_ctx_destroy(ctx), 0);
	ck_assert_int_eq(late_writes, 0);
}
END_TEST

/* Remembered, so that the library never takes them for its own, and
 * never freed by it: the test frees them after the context. */
START_TEST(application_buffers_never_freed)
{
	struct fake *f;
	shemb_ctx *ctx = ctx_with_fake(SHEMB_ETIMEDOUT, true, &f);
	unsigned char *sbuf = malloc(BYTES + 8), *rbuf = malloc(BYTES + 8);
	float *sum = malloc(4 * sizeof(float));
	size_t count = BYTES, displ = 0, owned = 1;
	shemb_request *req = NULL;
	int done = 0;

	ck_assert_ptr_nonnull(sbuf);
	ck_assert_ptr_nonnull(rbuf);
	ck_assert_ptr_nonnull(sum);
	fill(sbuf, BYTES, 5);
	ck_assert_int_eq(shemb_alltoallv(ctx, sbuf, &count, &displ, rbuf,
					 &count, &displ, NULL),
			 SHEMB_ETIMEDOUT);
	ck_assert_uint_eq(shemb__held_count(ctx, &owned), 2);
	ck_assert_uint_eq(owned, 0);
	/* a request waited for, the same */
	ck_assert_int_eq(shemb_alltoallv(ctx, sbuf, &count, &displ, rbuf,
					 &count, &displ, &req), 0);
	ck_assert_int_eq(shemb_wait(req), SHEMB_ETIMEDOUT);
	shemb_request_free(req);
	ck_assert_uint_eq(shemb__held_count(ctx, NULL), 2);
	/* an allreduce in place, tested: one buffer */
	ck_assert_int_eq(shemb_allreduce(ctx, sum, sum, 4, SHEMB_F32,
					 SHEMB_REDUCE_SUM, &req), 0);
	ck_assert_int_eq(shemb_test(req, &done), SHEMB_ETIMEDOUT);
	ck_assert_int_eq(done, 1);
	shemb_request_free(req);
	ck_assert_uint_eq(shemb__held_count(ctx, &owned), 3);
	ck_assert_uint_eq(owned, 0);
	ck_assert_int_eq(shemb_ctx_destroy(ctx), 0);
	ck_assert_int_eq(late_writes, 3);
	free(sum);
	check_not_freed(sbuf, rbuf);
	ck_assert_uint_eq(rbuf[BYTES - 1], LATE);
	ck_assert(filled(sbuf, BYTES, 5));
	free(sbuf);
	free(rbuf);
}
END_TEST

/* The gather's buffer is the library's: kept; the caller's array only
 * gets the words on success, so the late piece never reaches it. */
START_TEST(gather_moves_copies)
{
	struct fake *f;
	shemb_ctx *ctx = ctx_with_fake(SHEMB_EPEER, true, &f);
	uint64_t all[2] = { 11, 12 };
	size_t owned = 0;

	ck_assert_int_eq(shemb__allgather_word(ctx, 42, all), SHEMB_EPEER);
	ck_assert_uint_eq(shemb__held_count(ctx, &owned), 2);
	ck_assert_uint_eq(owned, 1); /* the receive part lies inside it */
	ck_assert_int_eq(shemb_ctx_destroy(ctx), 0);
	ck_assert_int_eq(late_writes, 1);
	ck_assert_uint_eq(all[0], 11);
	ck_assert_uint_eq(all[1], 12);
	ctx = ctx_with_fake(0, false, &f);
	ck_assert_int_eq(shemb__allgather_word(ctx, 42, all), 0);
	ck_assert_uint_eq(all[0], 42);
	ck_assert_uint_eq(all[1], 12);
	ck_assert_uint_eq(shemb__held_count(ctx, NULL), 0);
	ck_assert_int_eq(shemb_ctx_destroy(ctx), 0);
}
END_TEST

int main(void)
{
	Suite *s;
	TCase *tc;

	mallopt(M_PERTURB, 0x5a); /* glibc's malloc: fill freed memory */
	s = suite_create("held");
	tc = tcase_create("held");

	tcase_add_test(tc, library_exchange_kept_when_held);
	tcase_add_test(tc, library_exchange_left_when_not_closed);
	tcase_add_test(tc, library_exchange_freed_when_not_held);
	tcase_add_test(tc, application_buffers_never_freed);
	tcase_add_test(tc, gather_moves_copies);
	suite_add_tcase(s, tc);
	return tu_run_suite(s);
}
