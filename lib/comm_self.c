/*
 * comm_self.c - the communicator of a one-rank context: every collective
 * is a local copy, done before start() returns.
 */
#include "lib/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/reduce.h"
#include "lib/comm.h"

struct self_op {
	int status;
};

static int run(const struct shemb__coll *c, char *why, size_t len)
{
	switch (c->kind) {
	case SHEMB__ALLTOALLV:
		if (c->sendcounts[0] != c->recvcounts[0]) {
			snprintf(why, len, "alltoallv: rank 0 sends %zu bytes "
				 "to itself but expects %zu", c->sendcounts[0],
				 c->recvcounts[0]);
			return SHEMB_EINVAL;
		}
		if (c->sendcounts[0])
			memmove((char *)c->recvbuf + c->rdispls[0],
				(const char *)c->sendbuf + c->sdispls[0],
				c->sendcounts[0]);
		return 0;
	case SHEMB__ALLGATHERV:
		if (c->sendcount != c->recvcounts[0]) {
			snprintf(why, len, "allgatherv: rank 0 sends %zu bytes "
				 "but expects %zu from itself", c->sendcount,
				 c->recvcounts[0]);
			return SHEMB_EINVAL;
		}
		if (c->sendcount)
			memmove((char *)c->recvbuf + c->rdispls[0], c->sendbuf,
				c->sendcount);
		return 0;
	case SHEMB__ALLREDUCE:
		if (c->count && c->recvbuf != c->sendbuf)
			memmove(c->recvbuf, c->sendbuf,
				c->count * shemb__reduce_elem_size(c->dtype));
		return 0;
	default:
		return 0;
	}
}

static int self_start(void *comm, const struct shemb__coll *c,
		      struct shemb__op **out, char *why, size_t len)
{
	struct self_op *op;
	int rc;

	if (c->refuse) { /* nobody else to tell */
		snprintf(why, len, "%s", c->why ? c->why : "");
		return c->refuse;
	}
	rc = run(c, why, len);

	if (rc)
		return rc;
	op = calloc(1, sizeof(*op));
	if (!op)
		return SHEMB_ENOMEM;
	*out = (struct shemb__op *)op;
	return 0;
}

static int self_test(void *comm, struct shemb__op *op, int *done, char *why,
		     size_t len)
{
	*done = 1;
	return ((struct self_op *)op)->status;
}

static int self_wait(void *comm, struct shemb__op *op, char *why, size_t len)
{
	return ((struct self_op *)op)->status;
}

static void self_release(void *comm, struct shemb__op *op)
{
	free(op);
}

static int self_async_error(void *comm, char *msg, size_t len)
{
	return 0;
}

static const char *self_describe(void *comm)
{
	return "self (one rank)";
}

static bool self_destroy(void *comm)
{
	(void)comm;
	return true;
}

const struct shemb_comm_ops shemb__self_comm_ops = {
	.size = sizeof(struct shemb_comm_ops),
	.name = "self",
	.start = self_start,
	.test = self_test,
	.wait = self_wait,
	.release = self_release,
	.async_error = self_async_error,
	.describe = self_describe,
	.destroy = self_destroy,
};
