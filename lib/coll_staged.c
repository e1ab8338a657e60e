/*
 * coll_staged.c - collectives on device buffers without a device
 * communicator (no NCCL, or ranks that share a GPU): the pieces sent are
 * copied into host memory when the call is made, the collective runs on
 * the host transport in its turn and with its priority, like any other,
 * and the pieces received are copied into device memory when its request
 * reports success (collectives.c).
 */
#include "lib/coll_staged.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/reduce.h"
#include "lib/hostbuf.h"

/* Host copies of one collective: the receive counts and displacements
 * below, the pieces sent and received in one buffer of host memory for
 * device copies (page-locked on a GPU). */
struct shemb__staging {
	struct shemb__staging *next;
	struct shemb__coll dev;   /* the call; its receive counts and
				   * displacements are the copies below */
	struct shemb__hostbuf buf; /* the pieces sent, then received */
	char *recv;               /* the host copy of dev.recvbuf */
	int error;                /* the copy of the pieces sent failed */
	char why[200];
	size_t counts[];
};

void shemb__stage_free(shemb_ctx *ctx, struct shemb__staging *st)
{
	if (!st)
		return;
	shemb__host_buf_free(ctx, &st->buf);
	free(st);
}

/* The end of the furthest non-empty piece. */
static size_t extent(const size_t *counts, const size_t *displs, int n)
{
	size_t end = 0;

	for (int j = 0; j < n; j++)
		if (counts[j] && displs[j] + counts[j] > end)
			end = displs[j] + counts[j];
	return end;
}

static size_t send_bytes(const shemb_ctx *ctx, const struct shemb__coll *c)
{
	if (c->kind == SHEMB__ALLTOALLV)
		return extent(c->sendcounts, c->sdispls, ctx->attr.world_size);
	if (c->kind == SHEMB__ALLGATHERV)
		return c->sendcount;
	return c->count * shemb__reduce_elem_size(c->dtype);
}

static size_t recv_bytes(const shemb_ctx *ctx, const struct shemb__coll *c)
{
	if (c->kind == SHEMB__ALLREDUCE)
		return send_bytes(ctx, c);
	return extent(c->recvcounts, c->rdispls, ctx->attr.world_size);
}

int shemb__coll_mem(shemb_ctx *ctx, const struct shemb__coll *c)
{
	static const char *const names[] = { "host", "device",
					     "another device's" };
	int s, r;

	if (!ctx->mem->mem_of || c->kind == SHEMB__BARRIER)
		return SHEMB_MEM_HOST;
	/* a buffer decides even when this rank moves no bytes through it,
	 * so that every rank takes the same transport */
	s = c->sendbuf ? ctx->mem->mem_of(ctx->be, c->sendbuf) : -1;
	r = c->recvbuf ? ctx->mem->mem_of(ctx->be, c->recvbuf) : -1;
	if (s == SHEMB__MEM_OTHER_DEVICE || r == SHEMB__MEM_OTHER_DEVICE) {
		shemb__fail(ctx, SHEMB_EINVAL, "a buffer is memory of another "
			    "device than the context's");
		return -1;
	}
	if (s >= 0 && r >= 0 && s != r) {
		shemb__fail(ctx, SHEMB_EINVAL, "the send buffer is %s memory "
			    "and the receive buffer %s memory: both must be "
			    "one or the other", names[s], names[r]);
		return -1;
	}
	return s >= 0 ? s : r >= 0 ? r : SHEMB_MEM_HOST;
}

int shemb__stage_begin(shemb_ctx *ctx, const struct shemb__coll *c,
		       struct shemb__staging **out, struct shemb__coll *host)
{
	int n = ctx->attr.world_size;
	size_t sb = send_bytes(ctx, c), rb = recv_bytes(ctx, c);
	size_t cn = c->recvcounts ? 2 * (size_t)n : 0;
	/* an alltoallv or allgatherv may send and receive through one
	 * buffer, in pieces apart: only a reduction is in place */
	bool in_place = c->kind == SHEMB__ALLREDUCE &&
			c->sendbuf == c->recvbuf;
	struct shemb__staging *st = calloc(1, sizeof(*st) +
					   cn * sizeof(size_t));
	char *send;

	if (!st || shemb__host_buf(ctx, sb + (in_place ? 0 : rb), &st->buf)) {
		free(st);
		return shemb__fail(ctx, SHEMB_ENOMEM, "no memory to stage %zu "
				   "bytes", sb + rb);
	}
	st->dev = *c;
	if (cn) {
		memcpy(st->counts, c->recvcounts, (size_t)n * sizeof(size_t));
		memcpy(st->counts + n, c->rdispls, (size_t)n * sizeof(size_t));
		st->dev.recvcounts = st->counts;
		st->dev.rdispls = st->counts + n;
	}
	send = st->buf.p;
	st->recv = in_place ? send : send + sb;
	/* a failed copy is reported at the end: the collective still runs,
	 * so that the other ranks are not left waiting for this one */
	st->error = sb ? ctx->mem->transfer(ctx->be, send, c->sendbuf, sb)
		       : 0;
	if (st->error) {
		memset(send, 0, sb);
		snprintf(st->why, sizeof(st->why), "copying %zu bytes of "
			 "device memory to send failed: %s", sb,
			 ctx->mem->describe(ctx->be));
	}
	*host = *c;
	host->sendbuf = send;
	host->recvbuf = st->recv;
	*out = st;
	return 0;
}

/* Received pieces (or the whole result) from host to device memory. */
static int copy_back(shemb_ctx *ctx, const struct shemb__staging *st)
{
	const struct shemb__coll *c = &st->dev;
	int rc = 0;

	if (c->kind == SHEMB__ALLREDUCE)
		return ctx->mem->transfer(ctx->be, c->recvbuf, st->recv,
					  recv_bytes(ctx, c));
	for (int j = 0; !rc && j < ctx->attr.world_size; j++)
		if (c->recvcounts[j])
			rc = ctx->mem->transfer(ctx->be,
						(char *)c->recvbuf +
							c->rdispls[j],
						st->recv + c->rdispls[j],
						c->recvcounts[j]);
	return rc;
}

void shemb__stage_keep(shemb_ctx *ctx, struct shemb__staging *st)
{
	if (!st)
		return;
	pthread_mutex_lock(&ctx->lock);
	st->next = ctx->staging;
	ctx->staging = st;
	pthread_mutex_unlock(&ctx->lock);
}

int shemb__stage_finish(shemb_ctx *ctx, struct shemb__staging *st, int rc,
			bool held)
{
	if (held) { /* the transport may still write into it */
		shemb__stage_keep(ctx, st);
		return rc;
	}
	if (rc) {
		shemb__stage_free(ctx, st);
		return rc;
	}
	if (st->error)
		rc = shemb__fail(ctx, st->error, "%s", st->why);
	else if ((rc = copy_back(ctx, st)))
		rc = shemb__fail(ctx, rc, "copying the received pieces to "
				 "device memory failed: %s",
				 ctx->mem->describe(ctx->be));
	shemb__stage_free(ctx, st);
	return rc;
}

void shemb__staging_free_all(shemb_ctx *ctx, bool closed)
{
	while (ctx->staging) {
		struct shemb__staging *s = ctx->staging;

		ctx->staging = s->next;
		if (closed)
			shemb__stage_free(ctx, s);
	}
}
