/*
 * ops.c - the calls on the libfabric communicator (struct shemb_comm_ops):
 * start (with the reserve a start without memory gives back), test,
 * wait, release, close; the communicator's opening is in comm.c.
 */
#define _GNU_SOURCE
#include "config.h"

#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "shemb.h"
#include "fabric/engine.h"
#include "fabric/fabric.h"

/*
 * A start that finds no memory would fail the op on every rank, and a
 * collective that cannot run as a refusal (an allreduce) is then told by
 * control message, which leaves receives posted on the others (and, over
 * shm, a piece sent to this rank that holds back their later sends).  So
 * the first allocation of a start that fails gives back the reserve (and
 * the spare scratch) and the start tries again; the reserve is taken
 * again by a later start.  Allocations fail where address space runs
 * out (RLIMIT_AS, ulimit -v): the reserve is address space only, a
 * mapping without access that no page ever backs, and given back to the
 * kernel, not to an allocator.
 */
#define RESERVE_BYTES ((size_t)4 << 20)

bool shemb__fab_give_back_reserve(struct fab *f)
{
	bool had = f->reserve || f->spare;

	if (f->reserve)
		munmap(f->reserve, RESERVE_BYTES);
	free(f->spare);
	f->reserve = f->spare = NULL;
	f->spare_len = 0;
	return had;
}

void shemb__fab_take_reserve(struct fab *f)
{
	void *p;

	if (f->reserve)
		return;
	p = mmap(NULL, RESERVE_BYTES, PROT_NONE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	f->reserve = p == MAP_FAILED ? NULL : p;
}

static int copy_args(struct op *op, const struct shemb__coll *c)
{
	size_t w = (size_t)op->f->world;

	op->c = *c;
	op->counts = calloc(4 * w, sizeof(size_t));
	if (!op->counts)
		return SHEMB_ENOMEM;
	if (c->sendcounts) {
		memcpy(op->counts, c->sendcounts, w * sizeof(size_t));
		memcpy(op->counts + w, c->sdispls, w * sizeof(size_t));
	}
	if (c->recvcounts) {
		memcpy(op->counts + 2 * w, c->recvcounts, w * sizeof(size_t));
		memcpy(op->counts + 3 * w, c->rdispls, w * sizeof(size_t));
	}
	op->c.sendcounts = op->c.sdispls = NULL;
	op->c.recvcounts = op->c.rdispls = NULL;
	return 0;
}

/* The op could not start here, after it took its number: the other ranks
 * are told, so that they fail it too (with status) and every rank stays
 * in step, and it settles (settle.c). */
static int refuse_op(struct fab *f, struct op *op, int status, char *why,
		     size_t len)
{
	snprintf(why, len, "%s", op->why);
	shemb__fab_settle_unstarted(f, op, status);
	return status;
}

/* The kinds that can run as a refusal: one header each way per peer
 * round, and data that waits for it or is taken all the same. */
static bool refusable(int kind)
{
	return kind == SHEMB__ALLTOALLV || kind == SHEMB__ALLGATHERV;
}

/* op as c asks: 0, or SHEMB_ENOMEM or SHEMB_EINVAL with the detail in
 * op->why. */
static int build_call(struct op *op, const struct shemb__coll *c)
{
	int rc = copy_args(op, c);

	if (!rc)
		rc = shemb__coll_build(op->f, op);
	return rc == SHEMB_ENOMEM ? rc : rc ? SHEMB_EINVAL : 0;
}

/*
 * This rank failed op before it could take part (the caller's refusal,
 * c->refuse, or its own arguments failing the build, such as a piece for
 * itself of another size than it expects): op is built again as a
 * refusal (fabric/README.md).  Its headers carry status and op->why, no
 * data moves to or from this rank, and it takes what the peers sent
 * before they knew, so nothing is left behind on either side.
 */
int shemb__fab_build_refusal(struct op *op, int status)
{
	static char nothing; /* buffers of no bytes */
	struct shemb__coll no_data = { .kind = op->kind,
				       .sendbuf = &nothing,
				       .recvbuf = &nothing };

	shemb__fab_clear_op(op);
	op->refusing = true;
	op->refused = status;
	return build_call(op, &no_data);
}

/* No memory for the op: its number is taken all the same (and the
 * aborts peers sent for it), and the others are told, so that they fail
 * it too and every rank stays in step.  A spare op settles it; without
 * one (earlier ghosts still settling after the wait for one), the others
 * are only told, and what they send here stays (over shm, where nothing
 * settles, an orphan made from their later accounts takes it: mop.c). */
static int start_without_memory(struct fab *f, char *why, size_t len)
{
	struct op none = { .f = f }, *ghost = NULL;

	/* before the number is taken: an account for it read while waiting
	 * for a spare would find no op */
	if (f->settles)
		ghost = shemb__fab_ghost(f);
	if (f->failed) { /* found while waiting for a ghost */
		if (ghost)
			shemb__fab_free_op(ghost);
		snprintf(why, len, "%s", f->fail_why);
		return f->failed;
	}
	none.seq = f->next_seq++;
	/* the others name this rank themselves */
	snprintf(why, len, "no memory for collective call %u", none.seq);
	if (!ghost) { /* the others do not wait for it to settle */
		shemb__fab_early_abort(f, &none);
		/* kept: an orphan takes them up once there is memory */
		shemb__fab_note_unsettled(f, &none);
		shemb__fab_clear_op(&none); /* no memory to receive with */
		none.status = SHEMB_ENOMEM;
		none.relayed = false;
		none.unsettled = true;
		snprintf(none.why, sizeof(none.why), "%s", why);
		shemb__fab_tell_all(f, &none);
		return SHEMB_ENOMEM;
	}
	ghost->seq = none.seq;
	shemb__fab_early_abort(f, ghost);
	ghost->relayed = false;
	snprintf(ghost->why, sizeof(ghost->why), "%s", why);
	shemb__fab_settle_unstarted(f, ghost, SHEMB_ENOMEM);
	return SHEMB_ENOMEM;
}

/* A barrier (the application's, the library's, the close's) moves no
 * data: nothing is gained by letting it wait behind any. */
static int prio_of(const struct shemb__coll *c)
{
	return c->kind == SHEMB__BARRIER || c->kind == SHEMB__CLOSE ? INT_MAX
								      : c->prio;
}

static int fab_start(void *comm, const struct shemb__coll *c,
		     struct shemb__op **out, char *why, size_t len)
{
	struct fab *f = comm;
	struct op *op = NULL;
	int early;
	int rc = shemb__fab_lock(f, why, len);

	if (rc)
		return rc;
	/* a start that fails tells the others; where that takes records,
	 * the ones in flight come back first (before the call's number is
	 * taken: an account for it read now would find no op) */
	shemb__fab_ctrl_reap(f);
	/* after the reap, which moves the transfers and may find the
	 * engine failed: a start let in after fail_all() would wait out
	 * the timeout */
	if (f->failed) {
		snprintf(why, len, "%s", f->fail_why);
		rc = f->failed;
		goto out;
	}
	op = calloc(1, sizeof(*op));
	if (!op && shemb__fab_give_back_reserve(f))
		op = calloc(1, sizeof(*op));
	if (!op) {
		rc = start_without_memory(f, why, len);
		goto out;
	}
	shemb__fab_mop_kept(f);
	op->f = f;
	op->kind = c->kind;
	op->prio = prio_of(c);
	op->lane = op->prio > SHEMB_PRIO_DENSE ? LANE_URGENT : LANE_BULK;
	atomic_fetch_add_explicit(&f->lane_calls[op->lane], 1,
				  memory_order_relaxed);
	op->seq = f->next_seq++;
	/* taken on every path: a record left would stay for good */
	early = shemb__fab_early_abort(f, op);
	if (early && !c->refuse) { /* the rank that failed it told all */
		rc = early;
		snprintf(why, len, "%s", op->why);
		shemb__fab_settle_unstarted(f, op, rc);
		goto out;
	}
	if (c->refuse) {
		snprintf(op->why, sizeof(op->why), "%s",
			 c->why && c->why[0] ? c->why
					     : shemb_strerror(c->refuse));
		op->relayed = false;
	}
	rc = c->refuse ? c->refuse : build_call(op, c);
	if (rc == SHEMB_ENOMEM && !c->refuse && shemb__fab_give_back_reserve(f)) {
		shemb__fab_clear_op(op);
		rc = build_call(op, c);
	}
	if (rc && !op->why[0])
		snprintf(op->why, sizeof(op->why), "no memory for "
			 "collective call %u", op->seq);
	/* Run as a refusal where the kind allows and no peer failed it
	 * already (its headers may never come); else only tell the others
	 * (refuse_op). */
	if (rc && refusable(op->kind) && !early &&
	    !shemb__fab_build_refusal(op, rc))
		rc = 0;
	if (rc) {
		rc = refuse_op(f, op, rc, why, len);
		goto out;
	}
	op->next = f->ops;
	f->ops = op;
	f->active++;
	f->active_bulk += op->lane == LANE_BULK;
	op->last_ns = shemb__fab_now_ns();
	shemb__fab_enqueue_round(f, op);
	/* Post the first transfers now, from the caller: the data starts
	 * moving at once without waking the progress thread, which would
	 * only compete for the CPU with a caller about to wait (it looks
	 * for work every millisecond anyway, unless it stood back for
	 * waiters that left: then a call nobody waits for yet wakes it).
	 * Completions are left to the waits and the thread: reading them
	 * here could keep the caller moving the other collectives in
	 * flight for as long as they run. */
	shemb__fab_post(f);
	if (!c->waited_at_once)
		shemb__fab_unwatched_start(f);
	*out = (struct shemb__op *)op;
	shemb__fab_take_reserve(f);
out:
	pthread_mutex_unlock(&f->lock);
	/* The caller holds the only handle of op and waits for it only
	 * after this returns, so the piece is in place before anyone can
	 * see op done; the transfers of the other pieces run meanwhile. */
	if (!rc && op->self_len)
		memmove(op->self_dst, op->self_src, op->self_len);
	return rc;
}

/* Done, and, failed, settled or mopped up (or given up): its caller
 * may go. */
static bool op_over(const struct op *op)
{
	return op->done && !shemb__fab_settle_pending(op) &&
	       !shemb__fab_mop_waits(op);
}

static int op_result(struct op *op, char *why, size_t len)
{
	if (op->status)
		snprintf(why, len, "%s", op->why);
	return op->status;
}

static int fab_test(void *comm, struct shemb__op *h, int *done, char *why,
		    size_t len)
{
	struct fab *f = comm;
	struct op *op = (struct op *)h;
	int rc = shemb__fab_lock(f, why, len);

	*done = rc != 0;
	if (rc)
		return rc;
	if (f->progress_mode == SHEMB_PROGRESS_CALLER)
		shemb__fab_progress(f, true);
	*done = op_over(op);
	if (*done)
		rc = op_result(op, why, len);
	pthread_mutex_unlock(&f->lock);
	return rc;
}

/*
 * A caller that waits moves the transfers itself, as long as they move:
 * a waiter would only spin anyway, and handing each completion over from
 * the progress thread costs a wake-up, which dominates collectives of a
 * megabyte.  After IDLE_NS without a completion (several chunk times on
 * tcp; by the coarse clock, so 10 ms to a tick more) it sleeps, and the
 * progress thread takes over again.
 */
#define IDLE_NS 10000000ull

/* Called with the lock; returns with it, or with SHEMB_EPEER (and why)
 * without it once the engine wedged. */
static int progress_while_moving(struct fab *f, struct op *op, char *why,
				 size_t len)
{
	uint64_t last = shemb__fab_coarse_ns();
	/* with a progress thread, a waiter of the urgent lane leaves the
	 * bulk lane (and its long reads) to the thread */
	bool bulk = !f->have_thread || op->lane == LANE_BULK;
	int rc = 0;

	f->waiters_progressing += bulk;
	if (!bulk)
		shemb__fab_urgent_wait_begin(f);
	while (!op_over(op)) {
		/* a failed op settles on both lanes */
		if (shemb__fab_progress(f, bulk || op->done) > 0) {
			last = shemb__fab_coarse_ns();
			if (!shemb__fab_callers_waiting(f))
				continue;
		}
		if (f->have_thread && shemb__fab_coarse_ns() - last > IDLE_NS)
			break;
		pthread_mutex_unlock(&f->lock);
		sched_yield();
		rc = shemb__fab_lock(f, why, len);
		if (rc) /* wedged: its counts no longer matter */
			return rc;
	}
	if (bulk)
		shemb__fab_waiter_leaves(f);
	else
		shemb__fab_urgent_wait_end(f);
	return 0;
}

/* Once the waiter stops moving the transfers, it sleeps without the
 * lock (which a thread stuck in libfabric may hold), waking when an op
 * finishes, and gives up when the engine wedges. */
static int fab_wait(void *comm, struct shemb__op *h, char *why, size_t len)
{
	struct fab *f = comm;
	struct op *op = (struct op *)h;
	int rc = shemb__fab_lock(f, why, len);

	if (!rc)
		rc = progress_while_moving(f, op, why, len);
	while (!rc && !op_over(op)) {
		uint64_t gen = atomic_load(&f->finished);

		pthread_mutex_unlock(&f->lock);
		rc = shemb__fab_sleep_done(f, gen, why, len);
	}
	if (rc)
		return rc;
	rc = op_result(op, why, len);
	pthread_mutex_unlock(&f->lock);
	return rc;
}

static void fab_release(void *comm, struct shemb__op *h)
{
	struct fab *f = comm;
	struct op *op = (struct op *)h;

	if (shemb__fab_lock(f, NULL, 0))
		return; /* the wedged engine keeps it */
	op->released = true;
	shemb__fab_maybe_free(f, op);
	pthread_mutex_unlock(&f->lock);
}

static int fab_async_error(void *comm, char *msg, size_t len)
{
	struct fab *f = comm;
	int rc = shemb__fab_lock(f, msg, len);

	if (rc)
		return rc;
	rc = f->failed;
	if (rc)
		snprintf(msg, len, "%s", f->fail_why);
	pthread_mutex_unlock(&f->lock);
	return rc;
}

static const char *fab_describe(void *comm)
{
	return ((struct fab *)comm)->desc;
}

/* The ranks leave together: a last barrier, so that no rank closes while
 * another still waits for its messages.  A failed job skips it. */
static bool fab_destroy(void *comm)
{
	struct fab *f = comm;
	struct shemb__coll c = { .kind = SHEMB__CLOSE };
	struct shemb__op *op = NULL;
	char why[256];

	if (!f)
		return true;
	if (!fab_start(f, &c, &op, why, sizeof(why))) {
		fab_wait(f, op, why, sizeof(why));
		fab_release(f, op);
	}
	if (!shemb__fab_stop_thread(f) || shemb__fab_wedged(f, NULL, 0)) {
		shemb__fab_leave_wedged(f);
		return false;
	}
	shemb__fab_free(f);
	return true;
}

static int fab_stuck(void *comm, char *why, size_t len)
{
	return shemb__fab_probe(comm, why, len);
}

/* A wedged engine may still move anything: it holds everything. */
static bool fab_holds(void *comm, struct shemb__op *h)
{
	struct fab *f = comm;
	bool held;

	if (shemb__fab_lock(f, NULL, 0))
		return true;
	held = shemb__fab_op_holds((struct op *)h);
	pthread_mutex_unlock(&f->lock);
	return held;
}

const struct shemb_comm_ops shemb__fabric_ops = {
	.size = sizeof(struct shemb_comm_ops),
	.name = "libfabric",
	.start = fab_start,
	.test = fab_test,
	.wait = fab_wait,
	.release = fab_release,
	.async_error = fab_async_error,
	.describe = fab_describe,
	.destroy = fab_destroy,
	.stuck = fab_stuck,
	.holds = fab_holds,
};
