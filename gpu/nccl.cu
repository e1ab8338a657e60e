/*
 * nccl.cu - collectives on device buffers between the GPU ranks of a
 * context, over NCCL, as a struct shemb_comm_ops: alltoallv and
 * allgatherv as grouped ncclSend / ncclRecv, allreduce as ncclAllReduce.
 *
 * The communicator is non-blocking, so that neither its setup nor a
 * collective's start can wait longer than the context's timeout.  Its
 * collectives run on a stream of their own, after the work already on
 * the context's stream (an event joins them), so a peer that stops
 * answering holds up collectives only, never lookups; a collective's end
 * is an event that waits poll against the timeout, and a communicator
 * that fails or times out is aborted: everything on it then fails.
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
	cudaStream_t stream;      /* the collectives' own */
	cudaEvent_t joined;       /* context stream -> collective stream */
	pthread_mutex_t lock;     /* starts, and the state below */
	int nranks, rank, timeout_ms;
	int broken;               /* sticky: every later call fails so */
	char broken_why[160];
	char desc[96];
};

struct shemb__op {
	cudaEvent_t done;
};

static double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void pause_us(long us)
{
	struct timespec t = { 0, us * 1000 };

	nanosleep(&t, NULL);
}

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

/* Until the communicator's pending work is in place (a non-blocking
 * call answered ncclInProgress), at most until end. */
static ncclResult_t settle(ncclComm_t comm, ncclResult_t r, double end)
{
	while (r == ncclInProgress) {
		if (now_ms() > end)
			return ncclInProgress;
		pause_us(200);
		if (ncclCommGetAsyncError(comm, &r) != ncclSuccess)
			return ncclInternalError;
	}
	return r;
}

static int open_comm(struct nccl *n, const void *id, char *why, size_t len)
{
	ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
	ncclUniqueId u;
	ncclResult_t r;

	cfg.blocking = 0;
	memcpy(&u, id, sizeof(u));
	r = ncclCommInitRankConfig(&n->comm, n->nranks, u, n->rank, &cfg);
	r = settle(n->comm, r, now_ms() + n->timeout_ms);
	if (r == ncclSuccess)
		return 0;
	snprintf(why, len, "NCCL communicator of %d ranks: %s", n->nranks,
		 r == ncclInProgress ? "not ready within the timeout"
				     : ncclGetErrorString(r));
	if (n->comm)
		ncclCommAbort(n->comm);
	n->comm = NULL;
	return r == ncclInProgress ? SHEMB_ETIMEDOUT : SHEMB_EINTERNAL;
}

int shemb__nccl_open(struct shemb__cuda *c, int nranks, int rank,
		     const void *id, int timeout_ms, void **out, char *why,
		     size_t len)
{
	struct nccl *n = (struct nccl *)calloc(1, sizeof(*n));
	shemb__cuda_device_guard g(c);
	int rc, v = 0;

	if (!n)
		return SHEMB_ENOMEM;
	n->c = c;
	n->nranks = nranks;
	n->rank = rank;
	n->timeout_ms = timeout_ms > 0 ? timeout_ms : 30000;
	if (cudaStreamCreateWithFlags(&n->stream, cudaStreamNonBlocking) ||
	    cudaEventCreateWithFlags(&n->joined, cudaEventDisableTiming)) {
		snprintf(why, len, "a stream for NCCL: %s",
			 cudaGetErrorString(cudaGetLastError()));
		rc = SHEMB_EINTERNAL;
	} else {
		rc = open_comm(n, id, why, len);
	}
	if (rc) {
		if (n->joined)
			cudaEventDestroy(n->joined);
		if (n->stream)
			cudaStreamDestroy(n->stream);
		free(n);
		return rc;
	}
	pthread_mutex_init(&n->lock, NULL);
	ncclGetVersion(&v);
	snprintf(n->desc, sizeof(n->desc), "nccl %d.%d.%d, %d ranks",
		 v / 10000, v / 100 % 100, v % 100, nranks);
	*out = n;
	return 0;
}

/* The runtime keeps cudaErrorNotReady of a query as the thread's last
 * error, where the check after the thread's next kernel launch
 * (shemb__cuda_finish) would take it for the launch's: cleared. */
static cudaError_t cleared(cudaError_t e)
{
	if (e == cudaErrorNotReady)
		(void)cudaGetLastError();
	return e;
}

/* A failed communicator is aborted once and fails everything after;
 * called with n->lock held. */
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
	ncclResult_t r = ncclGroupStart();

	for (int p = 0; r == ncclSuccess && p < n->nranks; p++) {
		bool a2a = k->kind == SHEMB__ALLTOALLV;
		size_t sc = a2a ? k->sendcounts[p] : k->sendcount;
		const char *sb = (const char *)k->sendbuf +
				 (a2a ? k->sdispls[p] : 0);

		if (sc)
			r = ncclSend(sb, sc, ncclInt8, p, n->comm, n->stream);
		if (r == ncclSuccess && k->recvcounts[p])
			r = ncclRecv((char *)k->recvbuf + k->rdispls[p],
				     k->recvcounts[p], ncclInt8, p, n->comm,
				     n->stream);
	}
	if (r == ncclSuccess)
		return ncclGroupEnd();
	ncclGroupEnd();
	return r;
}

static ncclResult_t enqueue(struct nccl *n, const struct shemb__coll *k)
{
	ncclResult_t r;

	if (k->kind == SHEMB__ALLREDUCE)
		r = ncclAllReduce(k->sendbuf, k->recvbuf, k->count,
				  nccl_type(k->dtype),
				  k->op == SHEMB_REDUCE_MAX ? ncclMax : ncclSum,
				  n->comm, n->stream);
	else
		r = exchange(n, k);
	return settle(n->comm, r, now_ms() + n->timeout_ms);
}

static int start_locked(struct nccl *n, const struct shemb__coll *k,
			struct shemb__op *op, char *why, size_t len)
{
	ncclResult_t r;

	if (n->broken) {
		snprintf(why, len, "%s", n->broken_why);
		return n->broken;
	}
	/* the buffers are written by work already on the context's stream */
	if (cudaEventRecord(n->joined, n->c->stream) ||
	    cudaStreamWaitEvent(n->stream, n->joined, 0)) {
		snprintf(why, len, "joining the streams: %s",
			 cudaGetErrorString(cudaGetLastError()));
		return SHEMB_EINTERNAL;
	}
	r = enqueue(n, k);
	if (r != ncclSuccess) {
		snprintf(why, len, "NCCL collective: %s",
			 r == ncclInProgress ? "not started within the timeout"
					     : ncclGetErrorString(r));
		return break_comm(n, r == ncclInProgress ? SHEMB_ETIMEDOUT
							 : SHEMB_EPEER,
				  why);
	}
	if (cudaEventRecord(op->done, n->stream)) {
		snprintf(why, len, "cudaEventRecord: %s",
			 cudaGetErrorString(cudaGetLastError()));
		return SHEMB_EINTERNAL;
	}
	return 0;
}

static int nccl_start(void *comm, const struct shemb__coll *k,
		      struct shemb__op **out, char *why, size_t len)
{
	struct nccl *n = (struct nccl *)comm;
	shemb__cuda_device_guard g(n->c);
	struct shemb__op *op = (struct shemb__op *)calloc(1, sizeof(*op));
	int rc;

	if (!op)
		return SHEMB_ENOMEM;
	if (cudaEventCreateWithFlags(&op->done, cudaEventDisableTiming)) {
		free(op);
		snprintf(why, len, "cudaEventCreate failed");
		return SHEMB_EINTERNAL;
	}
	pthread_mutex_lock(&n->lock);
	rc = start_locked(n, k, op, why, len);
	pthread_mutex_unlock(&n->lock);
	if (rc) {
		cudaEventDestroy(op->done);
		free(op);
		return rc;
	}
	*out = op;
	return 0;
}

static int nccl_test(void *comm, struct shemb__op *op, int *done, char *why,
		     size_t len)
{
	struct nccl *n = (struct nccl *)comm;
	shemb__cuda_device_guard g(n->c);
	ncclResult_t async = ncclSuccess;
	cudaError_t e;
	int rc = 0;

	*done = 1;
	pthread_mutex_lock(&n->lock);
	if (n->broken) {
		snprintf(why, len, "%s", n->broken_why);
		rc = n->broken;
	} else if ((e = cleared(cudaEventQuery(op->done))) == cudaSuccess) {
		rc = 0;
	} else if (e != cudaErrorNotReady) {
		snprintf(why, len, "collective: %s", cudaGetErrorString(e));
		rc = break_comm(n, SHEMB_EINTERNAL, why);
	} else if (ncclCommGetAsyncError(n->comm, &async) == ncclSuccess &&
		   async != ncclSuccess && async != ncclInProgress) {
		snprintf(why, len, "NCCL: %s", ncclGetErrorString(async));
		rc = break_comm(n, SHEMB_EPEER, why);
	} else {
		*done = 0;
	}
	pthread_mutex_unlock(&n->lock);
	return rc;
}

static int nccl_wait(void *comm, struct shemb__op *op, char *why, size_t len)
{
	struct nccl *n = (struct nccl *)comm;
	double end = now_ms() + n->timeout_ms;
	int done = 0, rc;

	for (;;) {
		rc = nccl_test(comm, op, &done, why, len);
		if (done)
			return rc;
		if (now_ms() > end) {
			snprintf(why, len, "an NCCL collective made no "
				 "progress in %d ms", n->timeout_ms);
			pthread_mutex_lock(&n->lock);
			rc = break_comm(n, SHEMB_ETIMEDOUT, why);
			pthread_mutex_unlock(&n->lock);
			return rc;
		}
		pause_us(20);
	}
}

static void nccl_release(void *comm, struct shemb__op *op)
{
	struct nccl *n = (struct nccl *)comm;
	shemb__cuda_device_guard g(n->c);

	if (!op)
		return;
	cudaEventDestroy(op->done); /* safe before the event completes */
	free(op);
}

static int nccl_async_error(void *comm, char *msg, size_t len)
{
	struct nccl *n = (struct nccl *)comm;
	int rc;

	pthread_mutex_lock(&n->lock);
	rc = n->broken;
	if (rc)
		snprintf(msg, len, "%s", n->broken_why);
	pthread_mutex_unlock(&n->lock);
	return rc;
}

static const char *nccl_describe(void *comm)
{
	return ((struct nccl *)comm)->desc;
}

/* Collectives still running get the timeout to finish; then the
 * communicator is destroyed, or aborted if they did not. */
static bool nccl_destroy(void *comm)
{
	struct nccl *n = (struct nccl *)comm;
	double end;

	if (!n)
		return true;
	{
		shemb__cuda_device_guard g(n->c);

		end = now_ms() + n->timeout_ms;
		while (n->comm && now_ms() < end &&
		       cleared(cudaStreamQuery(n->stream)) ==
			       cudaErrorNotReady)
			pause_us(200);
		if (n->comm &&
		    cleared(cudaStreamQuery(n->stream)) == cudaSuccess)
			ncclCommDestroy(n->comm);
		else if (n->comm)
			ncclCommAbort(n->comm);
		cudaEventDestroy(n->joined);
		cudaStreamDestroy(n->stream);
	}
	pthread_mutex_destroy(&n->lock);
	free(n);
	return true;
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
