/*
 * connect.c - give a context its communicator: "self" for one rank, the
 * libfabric one for more.
 */
#include "lib/internal.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/comm.h"
#include "lib/held.h"
#ifdef HAVE_LIBFABRIC
#include "fabric/fabric.h"
#endif

#define DEFAULT_TIMEOUT_MS 30000
/* Well below the sends a lane may have posted (1024): one collective whose
 * chunks wait for a peer must leave room for the others'. */
#define MAX_CHUNKS_IN_FLIGHT 256

extern const struct shemb_comm_ops shemb__self_comm_ops;

static const char *attr_or_env(const char *v, const char *name)
{
	return v && *v ? v : getenv(name);
}

static int check_transport_attrs(struct shemb_ctx_attr *a)
{
	if (a->progress != SHEMB_PROGRESS_THREAD &&
	    a->progress != SHEMB_PROGRESS_CALLER)
		return shemb__fail(NULL, SHEMB_EINVAL, "progress %d is not an "
				   "enum shemb_progress value", a->progress);
	if (a->timeout_ms < 0)
		return shemb__fail(NULL, SHEMB_EINVAL, "timeout_ms %d is "
				   "negative", a->timeout_ms);
	if (!a->timeout_ms)
		a->timeout_ms = DEFAULT_TIMEOUT_MS;
	if (a->chunks_in_flight < 0 ||
	    a->chunks_in_flight > MAX_CHUNKS_IN_FLIGHT)
		return shemb__fail(NULL, SHEMB_EINVAL, "chunks_in_flight %d is "
				   "not in [0, %d]", a->chunks_in_flight,
				   MAX_CHUNKS_IN_FLIGHT);
	if (a->single_copy < -1 || a->single_copy > 1)
		return shemb__fail(NULL, SHEMB_EINVAL, "single_copy %d is not "
				   "-1, 0 or 1", a->single_copy);
	/* chunk_bytes and chunks_in_flight 0: the transport's defaults for
	 * its provider */
	return 0;
}

/* single_copy 0 leaves it to the environment, then to the transport. */
static int single_copy_wanted(const struct shemb_ctx_attr *a)
{
	const char *s = getenv("SHEMB_SINGLE_COPY");

	if (a->single_copy || !s || !*s)
		return a->single_copy;
	return strcmp(s, "0") ? 0 : -1;
}

#ifdef HAVE_LIBFABRIC
/* SHEMB_ROOT_FD: rank 0's listener, bound by the launcher (shemb-run) so
 * that no other program takes the root port before rank 0 starts. */
static int root_fd_from_env(int rank, int *fd)
{
	const char *s = getenv("SHEMB_ROOT_FD");
	char *end;
	long v;

	*fd = 0;
	if (rank != 0 || !s || !*s)
		return 0;
	errno = 0;
	v = strtol(s, &end, 10);
	if (*s < '0' || *s > '9' || *end || errno || v < 3 || v > INT_MAX)
		return shemb__fail(NULL, SHEMB_EINVAL, "SHEMB_ROOT_FD '%s' is "
				   "not the number of an open descriptor above "
				   "2", s);
	*fd = (int)v;
	return 0;
}

static int open_fabric(shemb_ctx *ctx)
{
	struct shemb_ctx_attr *a = &ctx->attr;
	struct shemb__fabric_cfg cfg = {
		.rank = a->rank,
		.world_size = a->world_size,
		.root = attr_or_env(a->root, "SHEMB_ROOT"),
		.job_key = attr_or_env(a->job_key, "SHEMB_JOB_KEY"),
		.provider = a->provider,
		.progress = a->progress,
		.timeout_ms = a->timeout_ms,
		.chunk_bytes = a->chunk_bytes,
		.chunks_in_flight = a->chunks_in_flight,
		.single_copy = single_copy_wanted(a),
		.slice_us = a->comm_slice_us,
		.oob_allgather = a->oob_allgather,
		.oob_arg = a->oob_arg,
	};
	char err[320] = "";
	int rc;

	if (!cfg.oob_allgather &&
	    root_fd_from_env(a->rank, &cfg.root_fd) != 0)
		return SHEMB_EINVAL;
	if (!cfg.oob_allgather && (!cfg.root || !*cfg.root))
		return shemb__fail(NULL, SHEMB_EINVAL,
				   "world size %d needs a rendezvous: set "
				   "SHEMB_ROOT=host:port (or the root attr), or "
				   "give an oob_allgather", a->world_size);
	if (!cfg.oob_allgather) /* the root used, for shemb_ctx_get_attr */
		snprintf(ctx->root, sizeof(ctx->root), "%s", cfg.root);
	rc = shemb__fabric_open(&cfg, &ctx->comm, err, sizeof(err));
	if (rc)
		return shemb__fail(NULL, rc, "rank %d of %d: %s", a->rank,
				   a->world_size, err);
	ctx->comm_ops = &shemb__fabric_ops;
	snprintf(ctx->provider, sizeof(ctx->provider), "%s",
		 shemb__fabric_provider(ctx->comm));
	a->chunk_bytes = shemb__fabric_chunk(ctx->comm);
	a->chunks_in_flight = shemb__fabric_chunks_in_flight(ctx->comm);
	a->single_copy = shemb__fabric_single_copy(ctx->comm) ? 1 : -1;
	return 0;
}
#else
static int open_fabric(shemb_ctx *ctx)
{
	return shemb__fail(NULL, SHEMB_ENOTSUP, "world size %d needs the "
			   "libfabric transport, and this build has no "
			   "libfabric", ctx->attr.world_size);
}
#endif

int shemb__comm_open(shemb_ctx *ctx)
{
	int rc = check_transport_attrs(&ctx->attr);

	if (rc)
		return rc;
	if (ctx->attr.world_size == 1) {
		ctx->attr.single_copy = -1;
		ctx->comm_ops = &shemb__self_comm_ops;
		snprintf(ctx->provider, sizeof(ctx->provider), "self");
		return 0;
	}
	return open_fabric(ctx);
}

int shemb__timeout_ms(const shemb_ctx *ctx)
{
	return ctx->attr.timeout_ms > 0 ? ctx->attr.timeout_ms
					: DEFAULT_TIMEOUT_MS;
}

int shemb__comm_stuck(shemb_ctx *ctx, char *why, size_t len)
{
	if (!ctx->comm_ops || !ctx->comm_ops->stuck)
		return 0;
	return ctx->comm_ops->stuck(ctx->comm, why, len);
}

void shemb__comm_close(shemb_ctx *ctx)
{
	bool closed;

	if (!ctx->comm_ops)
		return;
	shemb__requests_free_all(ctx);
	if (ctx->dev_comm_ops)
		ctx->dev_comm_ops->destroy(ctx->dev_comm);
	ctx->dev_comm_ops = NULL;
	ctx->dev_comm = NULL;
	closed = ctx->comm_ops->destroy(ctx->comm);
	ctx->comm_ops = NULL;
	ctx->comm = NULL;
	shemb__staging_free_all(ctx, closed);
	shemb__held_free_all(ctx, closed);
}
