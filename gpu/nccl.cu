/*
 * nccl.cu - collectives on device buffers between the GPU ranks of a
 * context, over NCCL, as a struct shemb_comm_ops: alltoallv and
 * allgatherv as grouped ncclSend / ncclRecv, allreduce as ncclAllReduce,
 * all on the context's stream.  A collective's end is an event on that
 * stream; waiting polls it against the context's timeout and aborts the
 * communicator when a peer stops answering, so no call hangs.
 */
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shemb.h"
#include "gpu/cuda_int.h"
#include "gpu/gpu.h"
#include "lib/comm.h"

struct nccl {
	struct shemb__cuda *c;
	ncclComm_t comm;
	int nranks, rank, timeout_ms;
	int broken;               /* a sticky failure: every later call */
	char broken_why[160];
	char desc[96];
};

struct shemb__op {
	cudaEvent_t done;
	int status;
};

int shemb__nccl_unique_id(void *id, size_t len, char *why, size_t wlen)
{
	ncclUniqueId u;
	ncclResult_t r = ncclGetUniqueId(&u);

	if (r != ncclSuccess || len < sizeof(u)) {
		snprintf(why, wlen, "ncclGetUniqueId: %s",
			 ncclGetErrorString(r));
		return SHEMB_EINTERNAL;
	}
	memcpy(id, &u, sizeof(u));
	return 0;
}

int shemb__nccl_open(struct shemb__cuda *c, int nranks, int rank,
		     const void *id, int timeout_ms, void **out, char *why,
		     size_t len)
{
	struct nccl *n = (struct nccl *)calloc(1, sizeof(*n));
	ncclUniqueId u;
	ncclResult_t r;
	int v = 0;

	if (!n)
		return SHEMB_ENOMEM;
	memcpy(&u, id, sizeof(u));
	{
		shemb__cuda_guard g(c);

		r = ncclCommInitRank(&n->comm, nranks, u, rank);
	}
	if (r != ncclSuccess) {
		snprintf(why, len, "ncclCommInitRank: %s",
			 ncclGetErrorString(r));
		free(n);
		return SHEMB_EINTERNAL;
	}
	ncclGetVersion(&v);
	n->c = c;
	n->nranks = nranks;
	n->rank = rank;
	n->timeout_ms = timeout_ms > 0 ? timeout_ms : 30000;
	snprintf(n->desc, sizeof(n->desc), "nccl %d.%d.%d, %d ranks",
		 v / 10000, v / 100 % 100, v % 100, nranks);
	*out = n;
	return 0;
}

static int nccl_fail(struct nccl *n, ncclResult_t r, const char *what,
		     char *why, size_t len)
{
	snprintf(why, len, "%s: %s", what, ncclGetErrorString(r));
	return r == ncclSystemError || r == ncclRemoteError ? SHEMB_EPEER
							     : SHEMB_EINTERNAL;
}

static ncclDataType_t nccl_type(int dtype)
{
	switch (dtype) {
	case SHEMB_F16:
		return ncclFloat16;
	case SHEMB_BF16:
		return ncclBfloat16;
	case SHEMB_F64:
		return ncclFloat64;
	case SHEMB_I64:
		return ncclInt64;
	default:
		return ncclFloat32;
	}
}

/* Point-to-point pieces of alltoallv and allgatherv: every non-empty
 * piece is one send or receive; peers with nothing cost nothing. */
static ncclResult_t exchange(struct nccl *n, const struct shemb__coll *k)
{
	cudaStream_t s = n->c->stream;
	ncclResult_t r = ncclGroupStart();

	for (int p = 0; r == ncclSuccess && p < n->nranks; p++) {
		size_t sc = k->kind == SHEMB__ALLTOALLV ? k->sendcounts[p]
							: k->sendcount;
		const char *sb = (const char *)k->sendbuf +
				 (k->kind == SHEMB__ALLTOALLV ? k->sdispls[p]
							      : 0);

		if (sc)
			r = ncclSend(sb, sc, ncclInt8, p, n->comm, s);
		if (r == ncclSuccess && k->recvcounts[p])
			r = ncclRecv((char *)k->recvbuf + k->rdispls[p],
				     k->recvcounts[p], ncclInt8, p, n->comm,
				     s);
	}
	if (r == ncclSuccess)
		return ncclGroupEnd();
	ncclGroupEnd();
	return r;
}

static int nccl_start(void *comm, const struct shemb__coll *k,
		      struct shemb__op **out, char *why, size_t len)
{
	struct nccl *n = (struct nccl *)comm;
	shemb__cuda_guard g(n->c);
	struct shemb__op *op;
	ncclResult_t r;

	if (n->broken) {
		snprintf(why, len, "%s", n->broken_why);
		return n->broken;
	}
	op = (struct shemb__op *)calloc(1, sizeof(*op));
	if (!op)
		return SHEMB_ENOMEM;
	if (k->kind == SHEMB__ALLREDUCE)
		r = ncclAllReduce(k->sendbuf, k->recvbuf, k->count,
				  nccl_type(k->dtype),
				  k->op == SHEMB_REDUCE_MAX ? ncclMax : ncclSum,
				  n->comm, n->c->stream);
	else
		r = exchange(n, k);
	if (r != ncclSuccess) {
		free(op);
		return nccl_fail(n, r, "NCCL collective", why, len);
	}
	if (cudaEventCreateWithFlags(&op->done, cudaEventDisableTiming) ||
	    cudaEventRecord(op->done, n->c->stream)) {
		free(op);
		snprintf(why, len, "cudaEventRecord failed");
		return SHEMB_EINTERNAL;
	}
	*out = op;
	return 0;
}

/* A failed communicator is aborted once and fails everything after. */
static int break_comm(struct nccl *n, int rc, const char *why)
{
	if (!n->broken) {
		n->broken = rc;
		snprintf(n->broken_why, sizeof(n->broken_why), "%s", why);
		ncclCommAbort(n->comm);
		n->comm = NULL;
	}
	return n->broken;
}

static int nccl_test(void *comm, struct shemb__op *op, int *done, char *why,
		     size_t len)
{
	struct nccl *n = (struct nccl *)comm;
	shemb__cuda_guard g(n->c);
	ncclResult_t async = ncclSuccess;
	cudaError_t e;

	*done = 0;
	if (n->broken) {
		*done = 1;
		snprintf(why, len, "%s", n->broken_why);
		return n->broken;
	}
	e = cudaEventQuery(op->done);
	if (e == cudaSuccess) {
		*done = 1;
		return 0;
	}
	if (e != cudaErrorNotReady) {
		*done = 1;
		snprintf(why, len, "collective: %s", cudaGetErrorString(e));
		return break_comm(n, SHEMB_EINTERNAL, why);
	}
	ncclCommGetAsyncError(n->comm, &async);
	if (async != ncclSuccess && async != ncclInProgress) {
		*done = 1;
		nccl_fail(n, async, "NCCL", why, len);
		return break_comm(n, SHEMB_EPEER, why);
	}
	return 0;
}

static double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int nccl_wait(void *comm, struct shemb__op *op, char *why, size_t len)
{
	struct nccl *n = (struct nccl *)comm;
	double end = now_ms() + n->timeout_ms;
	struct timespec pause = { 0, 20000 };
	int done = 0, rc;

	for (;;) {
		rc = nccl_test(comm, op, &done, why, len);
		if (done)
			return rc;
		if (now_ms() > end) {
			snprintf(why, len, "an NCCL collective made no progress "
				 "in %d ms", n->timeout_ms);
			return break_comm(n, SHEMB_ETIMEDOUT, why);
		}
		nanosleep(&pause, NULL);
	}
}

static void nccl_release(void *comm, struct shemb__op *op)
{
	struct nccl *n = (struct nccl *)comm;
	shemb__cuda_guard g(n->c);

	if (!op)
		return;
	cudaEventDestroy(op->done); /* safe before the event completes */
	free(op);
}

static int nccl_async_error(void *comm, char *msg, size_t len)
{
	struct nccl *n = (struct nccl *)comm;

	if (n->broken)
		snprintf(msg, len, "%s", n->broken_why);
	return n->broken;
}

static const char *nccl_describe(void *comm)
{
	return ((struct nccl *)comm)->desc;
}

static void nccl_destroy(void *comm)
{
	struct nccl *n = (struct nccl *)comm;

	if (!n)
		return;
	if (n->comm) {
		shemb__cuda_guard g(n->c);

		cudaStreamSynchronize(n->c->stream);
		ncclCommDestroy(n->comm);
	}
	free(n);
}

extern "C" const struct shemb_comm_ops shemb__nccl_ops = {
	sizeof(struct shemb_comm_ops),
	"nccl",
	nccl_start,
	nccl_test,
	nccl_wait,
	nccl_release,
	nccl_async_error,
	nccl_describe,
	nccl_destroy,
};
