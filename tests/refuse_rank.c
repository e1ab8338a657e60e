/*
 * refuse_rank.c - one rank of tests/test_refuse.sh: alltoallvs that a
 * rank refuses (struct shemb__coll refuse: it failed before it could
 * take part, as a lookup's owner that cannot serve a table does), and
 * alltoallvs whose counts disagree between two ranks, many in a row,
 * while the other ranks send them pieces of every size.
 *
 * Usage: refuse_rank [--calls N] [--caller]
 *
 * Call k of N: rank k % world refuses it (with rank k % world + 1 too on
 * every seventh call, from 3 ranks on), with SHEMB_ENOMEM or SHEMB_EIO
 * and a detail naming k; the others run a real alltoallv.  Each rank
 * sends each other rank a piece of none, a few bytes (in the header's
 * message), a few KiB on either side of what travels in a header over
 * tcp;ofi_rxm (16 KiB), or 64 to 192 KiB, picked from k and the two
 * ranks, so that the refusing rank receives pieces sent before their
 * senders could know of the refusal; half the calls above
 * SHEMB_PRIO_DENSE (the urgent lane), half at it (the bulk lane: pairwise
 * rounds, or single copy), half blocking and half started.  Checked:
 *
 *   - the refusing rank gets its own status and detail back, every other
 *     rank the status and "rank R: <R's detail>" of a refusing rank R;
 *   - every fifth call is a real alltoallv of every rank, started, then
 *     the refused one, then another real one, all in flight at once: the
 *     real ones succeed and every byte received is the sender's pattern
 *     (computed here from the ranks and the index);
 *   - every fifth call, rank k % world sends rank k % world + 1 more
 *     bytes than that rank expects (1, 20000 or 100000 more): those two
 *     fail with SHEMB_EINVAL and the counts named, and every other rank
 *     succeeds with every byte as sent;
 *   - every fifth call, rank k % world is given a piece for itself of
 *     another size than it expects, in an alltoallv or an allgatherv:
 *     its build fails, the call runs as a refusal, and every rank fails
 *     with SHEMB_EINVAL, the others naming that rank;
 *   - every tenth call fails by control message, where failed calls
 *     settle (not over shm, fabric/settle.c): one rank (each in turn)
 *     refuses an allreduce, which cannot run as a refusal, or calls a
 *     barrier where the others call an allreduce (of 16 floats, in one
 *     message, or of 64 Ki, in a ring of chunks); every rank fails it,
 *     with that rank's status and detail, or SHEMB_EINVAL;
 *     or, there and over shm (where failed calls are mopped up,
 *     fabric/mop.c), that rank fails the allreduce once its transfers
 *     are done (struct shemb__coll fail_late): it gets its status, every
 *     other rank that status and "rank R: ..." or, where it had finished
 *     the call before it heard, success and the exact sum (it answers
 *     that it finished, even once its call is freed, and the failing
 *     rank settles or mops up with that answer: over shm, before, it
 *     waited for that answer until its timeout); at least one such call
 *     finished on each rank that was not failing;
 *   - every 100 calls, after a barrier, the transport holds no
 *     collective (shemb__fabric_ops_held): a failed one kept for a
 *     receive that never completes would stay; and the context keeps
 *     no buffer for one (shemb__held_count): refusals leave nothing
 *     posted, and calls failed by control message settle before their
 *     wait returns;
 *   - after N calls (defaults to 4000: with one receive or message left
 *     behind per refusal, shm, which holds 1024 receives an endpoint,
 *     would refuse new ones long before), a last real alltoallv, exact;
 *   - with SHEMB_FABRIC_EAGAIN set (test_refuse.sh), that the transport
 *     did refuse some posts as a full queue would, and post them again;
 *   - that each call started on the lane of its priority, and no other
 *     call started with it.
 */
#include "config.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <shemb.h>

#include "lib/comm.h"
#include "lib/internal.h"

static int rank, world;

#include "rank_check.h"
#include "rank_held.h"

#define MAX_RANKS 8
#define REAL_EVERY 5

static shemb_ctx *ctx;

/* The library's internal calls take the context's traffic priority
 * (that of its own step running), not c->prio: each call here sets it
 * to its own, so that the calls above SHEMB_PRIO_DENSE take the urgent
 * lane. */
static int coll_start(const struct shemb__coll *c, shemb_request **req)
{
	bool urgent = c->kind == SHEMB__BARRIER || c->prio > SHEMB_PRIO_DENSE;
	unsigned long on = shemb__fabric_lane_calls(ctx->comm, urgent);
	unsigned long off = shemb__fabric_lane_calls(ctx->comm, !urgent);
	int was = shemb__traffic_prio(ctx, c->prio);
	int rc = shemb__coll_start(ctx, c, req);

	shemb__traffic_prio(ctx, was);
	/* the call took its own lane (a barrier goes first, on the urgent
	 * one), and nothing else started */
	if (shemb__fabric_lane_calls(ctx->comm, urgent) != on + 1 ||
	    shemb__fabric_lane_calls(ctx->comm, !urgent) != off)
		FAIL("a call of priority %d (kind %d) did not start on the "
		     "%s lane alone", c->prio, (int)c->kind,
		     urgent ? "urgent" : "bulk");
	return rc;
}

static int coll_run(const struct shemb__coll *c)
{
	return coll_start(c, NULL);
}

/* The bytes rank `from` sends rank `to` in call k. */
static size_t piece_len(int k, int from, int to)
{
	uint64_t z = mix((uint64_t)k * 1000003u + (uint64_t)from * 1009u +
			 (uint64_t)to);

	if (from == to)
		return z % 64;
	switch (z % 8) {
	case 0:
	case 1:
		return 0;
	case 2:
	case 3:
		return 1 + (z >> 8) % 512;
	case 4:
	case 5:
		return 12288 + (z >> 8) % 8192; /* 12 to 20 KiB */
	default:
		return 65536 + (z >> 8) % 131072;
	}
}

/* Calls whose counts disagree: rank da(k) sends rank db(k) extra(k)
 * bytes more than db(k) expects. */
static bool disagrees(int k)
{
	return k % REAL_EVERY == 3;
}

static int da(int k)
{
	return k % world;
}

static int db(int k)
{
	return (k + 1) % world;
}

static size_t extra(int k)
{
	static const size_t more[] = { 1, 20000, 100000 };

	return more[(k / REAL_EVERY) % 3];
}

/* What `from` sends `to` in call k, by its own count. */
static size_t send_len(int k, int from, int to)
{
	return piece_len(k, from, to) +
	       (disagrees(k) && from == da(k) && to == db(k) ? extra(k) : 0);
}

static uint8_t pattern(int k, int from, int to, size_t i)
{
	return (uint8_t)(k * 7 + from * 31 + to * 131 + (int)(i % 251));
}

struct call {
	size_t sc[MAX_RANKS], sd[MAX_RANKS], rc[MAX_RANKS], rd[MAX_RANKS];
	uint8_t *sbuf, *rbuf;
	struct shemb__coll c;
};

static void make_call(struct call *a, int k, int prio)
{
	size_t s = 0, r = 0;

	for (int p = 0; p < world; p++) {
		a->sc[p] = send_len(k, rank, p);
		a->rc[p] = piece_len(k, p, rank);
		a->sd[p] = s;
		a->rd[p] = r;
		s += a->sc[p];
		r += a->rc[p];
	}
	a->sbuf = malloc(s + 1);
	a->rbuf = malloc(r + 1);
	if (!a->sbuf || !a->rbuf)
		FAIL("no memory");
	for (int p = 0; p < world; p++)
		for (size_t i = 0; i < a->sc[p]; i++)
			a->sbuf[a->sd[p] + i] = pattern(k, rank, p, i);
	memset(a->rbuf, 0, r + 1);
	a->c = (struct shemb__coll){
		.kind = SHEMB__ALLTOALLV, .sendbuf = a->sbuf,
		.recvbuf = a->rbuf, .sendcounts = a->sc, .sdispls = a->sd,
		.recvcounts = a->rc, .rdispls = a->rd, .prio = prio,
	};
}

static void check_call(const struct call *a, int k)
{
	for (int p = 0; p < world; p++)
		for (size_t i = 0; i < a->rc[p]; i++)
			if (a->rbuf[a->rd[p] + i] != pattern(k, p, rank, i))
				FAIL("call %d: byte %zu from rank %d is %u, "
				     "not %u", k, i, p, a->rbuf[a->rd[p] + i],
				     pattern(k, p, rank, i));
	free(a->sbuf);
	free(a->rbuf);
}

static int status_of(int k)
{
	return k % 2 ? SHEMB_EIO : SHEMB_ENOMEM;
}

static bool refuses(int k, int r)
{
	return r == k % world ||
	       (world > 2 && k % 7 == 0 && r == (k + 1) % world);
}

static int prio_of(int k)
{
	return (k / 2) % 2 ? SHEMB_PRIO_LOOKUP : SHEMB_PRIO_DENSE;
}

/* Call k of this rank, refused or not: a request for it (started), or
 * its result (blocking, *req left NULL). */
static int start(int k, struct call *a, bool started, shemb_request **req)
{
	char why[64];

	*req = NULL;
	make_call(a, k, prio_of(k));
	if (refuses(k, rank)) {
		snprintf(why, sizeof(why), "refused call %d", k);
		a->c = (struct shemb__coll){ .kind = SHEMB__ALLTOALLV,
					     .prio = prio_of(k),
					     .refuse = status_of(k),
					     .why = why };
	}
	return started ? coll_start(&a->c, req)
		       : coll_run(&a->c);
}

/* The result of refused call k on this rank: the refusing rank's status
 * and detail. */
static void check_refused(int k, int rc)
{
	const char *why = shemb_ctx_last_error(ctx);
	char want[64];
	bool ok = false;

	if (rc != status_of(k))
		FAIL("refused call %d: %d (%s): %s", k, rc, shemb_strerror(rc),
		     why);
	if (refuses(k, rank)) { /* its own detail, whoever else refused */
		snprintf(want, sizeof(want), "refused call %d", k);
		ok = strcmp(why, want) == 0;
	}
	for (int r = 0; r < world && !refuses(k, rank) && !ok; r++) {
		snprintf(want, sizeof(want), "rank %d: refused call %d", r, k);
		ok = refuses(k, r) && strcmp(why, want) == 0;
	}
	if (!ok)
		FAIL("refused call %d: detail '%s'", k, why);
}

static int finish(shemb_request *req, int rc)
{
	if (!req)
		return rc;
	rc = shemb_wait(req);
	shemb_request_free(req);
	return rc;
}

static void refused_call(int k)
{
	struct call a;
	shemb_request *req;
	int rc = start(k, &a, k % 4 >= 2, &req);

	check_refused(k, finish(req, rc));
	free(a.sbuf);
	free(a.rbuf);
}

/* How a call fails by control message: one rank refuses it, calls a
 * barrier where the others call an allreduce, or fails it once its
 * transfers are done (struct shemb__coll fail_late). */
enum told_how { REFUSED, BARRIER, LATE };

/* Told call k: how, on which rank, with which status, in which lane, of
 * how many floats (16, in one message; 64 Ki, in a ring of chunks).
 * Taken from k so that every combination comes, on every rank. */
struct told_plan {
	enum told_how how;
	int rank, status, prio;
	size_t n;
};

static struct told_plan told_plan(int k)
{
	int m = k / (2 * REAL_EVERY), q = m / 3, r = q / world;

	return (struct told_plan){
		.how = (enum told_how)(m % 3),
		.rank = q % world,
		.prio = r % 2 ? SHEMB_PRIO_LOOKUP : SHEMB_PRIO_DENSE,
		.n = (r / 2) % 2 ? 65536 : 16,
		.status = (r / 4) % 2 ? SHEMB_EIO : SHEMB_ENOMEM,
	};
}

/* Call k fails by control message (told_call): where failed calls
 * settle, in every way; over shm, where they are mopped up instead, only
 * late (a refusal by control message and calls that disagree leave
 * receives posted there: fabric/README.md). */
static bool told(int k)
{
	if (k % (2 * REAL_EVERY) != 2)
		return false;
	return shemb__fabric_settles(ctx->comm) || told_plan(k).how == LATE;
}

/* The late failures that a rank other than the failing one finished
 * before it heard of them, and those it could have. */
static int late_finished, late_others;

static float told_value(int r, size_t i)
{
	return (float)(r + 1 + (int)(i % 7));
}

/* Whether v holds, in each element, the sum over the ranks of
 * told_value() (small integers: exact). */
static bool told_sum(const float *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		float want = 0;

		for (int r = 0; r < world; r++)
			want += told_value(r, i);
		if (v[i] != want)
			return false;
	}
	return true;
}

static void check_late(int k, const struct told_plan *t, int rc,
		       const float *v)
{
	const char *why = shemb_ctx_last_error(ctx);
	char want[64];

	if (rank == t->rank) {
		if (rc != t->status || !strstr(why, "local step of round"))
			FAIL("call %d, failed after its transfers here: %d "
			     "(%s): %s", k, rc, shemb_strerror(rc), why);
		return;
	}
	late_others++;
	if (rc == 0) { /* finished before the failure came */
		if (!told_sum(v, t->n))
			FAIL("call %d, finished here while rank %d failed "
			     "it late: wrong sum", k, t->rank);
		late_finished++;
		return;
	}
	snprintf(want, sizeof(want), "rank %d: local step of round",
		 t->rank);
	if (rc != t->status || strncmp(why, want, strlen(want)))
		FAIL("call %d, failed late by rank %d: %d (%s): %s", k,
		     t->rank, rc, shemb_strerror(rc), why);
}

static void check_told(int k, const struct told_plan *t, int rc)
{
	const char *why = shemb_ctx_last_error(ctx);
	char want[64];

	if (t->how == BARRIER) {
		if (rc != SHEMB_EINVAL || !strstr(why, "barrier"))
			FAIL("call %d, a barrier on rank %d only: %d (%s): %s",
			     k, t->rank, rc, shemb_strerror(rc), why);
		return;
	}
	if (rank == t->rank)
		snprintf(want, sizeof(want), "refused allreduce %d", k);
	else
		snprintf(want, sizeof(want), "rank %d: refused allreduce %d",
			 t->rank, k);
	if (rc != t->status || strcmp(why, want))
		FAIL("call %d, an allreduce rank %d refuses: %d (%s): %s", k,
		     t->rank, rc, shemb_strerror(rc), why);
}

static void told_call(int k)
{
	struct told_plan t = told_plan(k);
	float *v = calloc(t.n, sizeof(*v));
	struct shemb__coll c = { .kind = SHEMB__ALLREDUCE, .sendbuf = v,
				 .recvbuf = v, .count = t.n,
				 .dtype = SHEMB_F32, .op = SHEMB_REDUCE_SUM,
				 .prio = t.prio };
	char why[64];
	int rc;

	if (!v)
		FAIL("no memory");
	for (size_t i = 0; i < t.n; i++)
		v[i] = told_value(rank, i);
	if (rank == t.rank && t.how == BARRIER) {
		c = (struct shemb__coll){ .kind = SHEMB__BARRIER };
	} else if (rank == t.rank && t.how == LATE) {
		c.fail_late = t.status;
	} else if (rank == t.rank) {
		snprintf(why, sizeof(why), "refused allreduce %d", k);
		c.refuse = t.status;
		c.why = why;
	}
	rc = coll_run(&c);
	if (t.how == LATE)
		check_late(k, &t, rc, v);
	else
		check_told(k, &t, rc);
	free(v);
}

/* A real call k - 1, the refused call k and a real call k + 1, all
 * started before any is waited for. */
static void sandwich(int k)
{
	struct call a[3];
	shemb_request *req[3];
	int rc[3];

	for (int i = 0; i < 3; i++) {
		if (i == 1)
			rc[i] = start(k, &a[i], true, &req[i]);
		else {
			make_call(&a[i], k - 1 + i, prio_of(k + i));
			rc[i] = coll_start(&a[i].c, &req[i]);
		}
		if (rc[i] && i != 1) /* a refusal may fail at its start */
			FAIL("starting call %d of three: %d (%s): %s", i, rc[i],
			     shemb_strerror(rc[i]), shemb_ctx_last_error(ctx));
	}
	for (int i = 0; i < 3; i++) {
		rc[i] = finish(req[i], rc[i]);
		if (i == 1)
			check_refused(k, rc[i]);
		else if (rc[i])
			FAIL("real call %d beside refused call %d: %d (%s): %s",
			     k - 1 + i, k, rc[i], shemb_strerror(rc[i]),
			     shemb_ctx_last_error(ctx));
	}
	check_call(&a[0], k - 1);
	check_call(&a[2], k + 1);
	free(a[1].sbuf);
	free(a[1].rbuf);
}

/* Call k, whose counts disagree between ranks da(k) and db(k): those
 * two fail with SHEMB_EINVAL and the counts named; every other rank
 * succeeds, with every byte from every rank as sent. */
static void disagreeing_call(int k)
{
	struct call a;
	shemb_request *req = NULL;
	int rc;

	make_call(&a, k, prio_of(k));
	if (k % 4 >= 2)
		rc = coll_start(&a.c, &req);
	else
		rc = coll_run(&a.c);
	rc = finish(req, rc);
	if (rank == da(k) || rank == db(k)) {
		if (rc != SHEMB_EINVAL ||
		    !strstr(shemb_ctx_last_error(ctx), "sends"))
			FAIL("call %d, whose counts disagree: %d (%s): %s", k,
			     rc, shemb_strerror(rc), shemb_ctx_last_error(ctx));
		free(a.sbuf);
		free(a.rbuf);
		return;
	}
	if (rc)
		FAIL("call %d, whose counts disagree elsewhere: %d (%s): %s",
		     k, rc, shemb_strerror(rc), shemb_ctx_last_error(ctx));
	check_call(&a, k);
}

/*
 * Call k, in which rank k % world is given a piece for itself of another
 * size than it expects (an alltoallv, or an allgatherv every other time):
 * its build fails and the call runs as a refusal with that detail, so
 * every rank fails it with SHEMB_EINVAL, the others naming that rank.
 */
static void self_mismatch_call(int k)
{
	int v = k % world;
	bool gather = (k / REAL_EVERY) % 2;
	size_t cnt[MAX_RANKS], dsp[MAX_RANKS], at = 0;
	struct call a;
	char want[32];
	int rc;

	make_call(&a, k, prio_of(k));
	if (gather) {
		for (int p = 0; p < world; p++) {
			cnt[p] = piece_len(k, p, (p + 1) % world);
			dsp[p] = at;
			at += cnt[p];
		}
		free(a.rbuf);
		a.rbuf = malloc(at + 2);
		if (!a.rbuf)
			FAIL("no memory");
		a.c = (struct shemb__coll){
			.kind = SHEMB__ALLGATHERV, .sendbuf = a.sbuf,
			.sendcount = cnt[rank], .recvbuf = a.rbuf,
			.recvcounts = cnt, .rdispls = dsp, .prio = prio_of(k),
		};
	}
	if (rank == v && gather)
		cnt[v]++;
	else if (rank == v)
		a.rc[v]++;
	rc = coll_run(&a.c);
	snprintf(want, sizeof(want), "rank %d: ", v);
	if (rc != SHEMB_EINVAL ||
	    !strstr(shemb_ctx_last_error(ctx), "itself") ||
	    (rank != v && strncmp(shemb_ctx_last_error(ctx), want,
				  strlen(want))))
		FAIL("call %d, whose rank %d expects another piece from "
		     "itself: %d (%s): %s", k, v, rc, shemb_strerror(rc),
		     shemb_ctx_last_error(ctx));
	free(a.sbuf);
	free(a.rbuf);
}

int main(int argc, char **argv)
{
	struct shemb_ctx_attr attr;
	int calls = 4000;
	struct call last;

	shemb_ctx_attr_init(&attr);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--calls") && i + 1 < argc)
			calls = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--caller"))
			attr.progress = SHEMB_PROGRESS_CALLER;
		else
			FAIL("unknown argument %s", argv[i]);
	}
	ctx = open_rank_ctx(&attr, &world, MAX_RANKS);
	for (int k = 0; k < calls; k++) {
		if (k % REAL_EVERY == 1)
			sandwich(k);
		else if (disagrees(k))
			disagreeing_call(k);
		else if (k % REAL_EVERY == 4)
			self_mismatch_call(k);
		else if (told(k))
			told_call(k);
		else
			refused_call(k);
		if (k % 100 == 99)
			check_nothing_held(ctx, "call", k);
	}
	/* a rank that finished a call before it heard that another failed
	 * it answers so, and the failing rank settles or mops up with that
	 * answer */
	if (late_others && !late_finished)
		FAIL("none of %d calls failed late elsewhere finished here",
		     late_others);
	if (late_others)
		printf("calls failed late elsewhere: %d of %d finished here\n",
		       late_finished, late_others);
	make_call(&last, calls, SHEMB_PRIO_DENSE);
	CHECK_RC(ctx, coll_run(&last.c));
	check_call(&last, calls);
	check_no_wrong_message(ctx);
	check_test_refusals(ctx);
	CHECK_RC(ctx, shemb_ctx_destroy(ctx));
	return 0;
}
