/*
 * test_engine_ops.c - the ops of the libfabric transport's engine
 * (fabric/engine.c, ops.c) around its failure:
 * - a failed op is freed only once nothing of the engine refers to it:
 *   here, a settling op (fabric/settle.c) whose sinks still wait to be
 *   posted when a peer is found gone.  The engine then stops waiting for
 *   the settle, the caller's wait returns and its release frees the op;
 *   the sinks, which live in the op, must leave the queue first, or the
 *   next pass of the engine walks freed memory;
 * - a start during which the engine fails (the reap of control records
 *   that comes first moves the transfers, and finds a collective timed
 *   out) fails at once: let in after every op was failed, its op would
 *   wait out the timeout, and then report another error.
 *
 * One engine of a world of two is made by hand, over an endpoint whose
 * every receive is refused for the moment (FI_EAGAIN), so that the sinks
 * stay queued, and whose completion queue stays empty.
 */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/fabric.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "shemb.h"
#include "fabric/engine.h"
#include "fabric/fabric.h"
#include "tests/check_run.h"

static ssize_t full_recv(struct fid_ep *ep, void *buf, size_t len,
			 void *desc, fi_addr_t from, uint64_t tag,
			 uint64_t ignore, void *ctx)
{
	return -FI_EAGAIN;
}

static bool takes_sends; /* else refused for the moment */

static ssize_t full_send(struct fid_ep *ep, const void *buf, size_t len,
			 void *desc, fi_addr_t to, uint64_t tag, void *ctx)
{
	return takes_sends ? 0 : -FI_EAGAIN;
}

static ssize_t full_inject(struct fid_ep *ep, const void *buf, size_t len,
			   fi_addr_t to, uint64_t tag)
{
	return -FI_EAGAIN;
}

static struct fi_ops_tagged full_ops = {
	.size = sizeof(struct fi_ops_tagged),
	.recv = full_recv,
	.send = full_send,
	.inject = full_inject,
};

static struct fid_ep full_ep = { .tagged = &full_ops };

static ssize_t nothing_read(struct fid_cq *cq, void *buf, size_t count)
{
	return -FI_EAGAIN;
}

static struct fi_ops_cq idle_cq_ops = {
	.size = sizeof(struct fi_ops_cq),
	.read = nothing_read,
};

static struct fid_cq idle_cq = { .ops = &idle_cq_ops };

/* Rank 0 of two, over tcp;ofi_rxm as far as settling goes. */
static struct fab *make_engine(void)
{
	struct fab *f = calloc(1, sizeof(*f));

	ck_assert_ptr_nonnull(f);
	pthread_mutex_init(&f->lock, NULL);
	pthread_mutex_init(&f->done_lock, NULL);
	pthread_cond_init(&f->done_cond, NULL);
	pthread_cond_init(&f->nap, NULL);
	f->world = 2;
	f->timeout_ms = 30000;
	f->settles = true;
	f->max_recvs = 1024;
	for (int l = 0; l < NLANES; l++) {
		f->ep[l] = &full_ep;
		f->cq[l] = &idle_cq;
		f->chunk[l] = 4096;
		f->max_chunks[l] = 4;
	}
	f->peers = calloc(NLANES * 2, sizeof(fi_addr_t));
	ck_assert_ptr_nonnull(f->peers);
	ck_assert(shemb__fab_discard_room(f));
	return f;
}

static void free_engine(struct fab *f)
{
	ck_assert_ptr_null(f->ops);
	shemb__fab_free_ctrl(f);
	free(f->discard);
	free(f->peers);
	pthread_cond_destroy(&f->nap);
	pthread_cond_destroy(&f->done_cond);
	pthread_mutex_destroy(&f->done_lock);
	pthread_mutex_destroy(&f->lock);
	free(f);
}

/* A barrier of f, started long ago, in its list. */
static struct op *add_op(struct fab *f)
{
	struct op *op = calloc(1, sizeof(*op));

	ck_assert_ptr_nonnull(op);
	op->f = f;
	op->kind = SHEMB__BARRIER;
	op->lane = LANE_URGENT;
	op->prio = 1;
	op->seq = f->next_seq++;
	op->next = f->ops;
	f->ops = op;
	f->active++;
	return op;
}

static bool queued(const struct fab *f)
{
	return f->rq_head || f->sq_head || f->nq_head || f->pq_head;
}

START_TEST(settling_op_freed_with_its_sinks_queued)
{
	struct fab *f = make_engine();
	struct op *op = add_op(f);

	takes_sends = false;
	pthread_mutex_lock(&f->lock);
	/* a transfer fails: the op settles, and posts its sinks */
	shemb__fab_fail_op(f, op, SHEMB_EIO, "a transfer failed");
	shemb__fab_post(f);
	ck_assert(op->done && op->settling && op->posted == 0);
	ck_assert_msg(queued(f), "the sinks were posted, not refused");
	/* the peer leaves before the provider takes them */
	shemb__fab_peer_ended(f, 1);
	ck_assert_msg(!shemb__fab_settle_pending(op),
		      "the caller still waits for the settle");
	pthread_mutex_unlock(&f->lock);
	shemb__fabric_ops.release(f, (struct shemb__op *)op);
	ck_assert_ptr_null(f->ops); /* freed */
	ck_assert_msg(!queued(f), "a freed op's transfer is still queued");
	pthread_mutex_lock(&f->lock);
	shemb__fab_post(f); /* walks the queues: nothing of the op there */
	pthread_mutex_unlock(&f->lock);
	free_engine(f);
}
END_TEST

START_TEST(start_fails_once_the_engine_failed)
{
	struct fab *f = make_engine();
	struct op *failed = add_op(f), *stalled = add_op(f);
	struct shemb__coll c = { .kind = SHEMB__BARRIER };
	struct shemb__op *h = NULL;
	char why[256] = "";
	int rc;

	/* the control message of a failed op: a record in flight, which a
	 * start reaps first (no spare records are kept here) */
	takes_sends = true;
	pthread_mutex_lock(&f->lock);
	shemb__fab_fail_op(f, failed, SHEMB_EIO, "a transfer failed");
	pthread_mutex_unlock(&f->lock);
	ck_assert_int_eq(f->failed, 0);
	/* the other moved nothing for longer than the timeout */
	f->timeout_ms = 1;
	stalled->last_ns = 0;
	rc = shemb__fabric_ops.start(f, &c, &h, why, sizeof(why));
	ck_assert_int_eq(f->failed, SHEMB_ETIMEDOUT);
	ck_assert_msg(rc == SHEMB_ETIMEDOUT && h == NULL,
		      "a start in a failed engine: %d (%s)", rc, why);
	ck_assert_ptr_nonnull(strstr(why, "moved no data"));
	shemb__fabric_ops.release(f, (struct shemb__op *)failed);
	shemb__fabric_ops.release(f, (struct shemb__op *)stalled);
	free_engine(f);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("engine_ops");
	TCase *tc = tcase_create("ops");

	tcase_add_test(tc, settling_op_freed_with_its_sinks_queued);
	tcase_add_test(tc, start_fails_once_the_engine_failed);
	suite_add_tcase(s, tc);
	return tu_run_suite(s);
}
