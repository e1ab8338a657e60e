/*
 * backend.c - choose and open a context's memory backend.
 *
 * The CPU backend, or with attr.device SHEMB_DEVICE_CUDA the CUDA one
 * (gpu/, built behind HAVE_CUDA as the module shemb_cuda.so), which
 * borrows the CPU backend for the host stores under its device tiers.
 * SHEMB_ISA=generic|avx2|avx512 forces a CPU kernel variant (for tests
 * and benchmarks).
 */
#include "lib/backend.h"

#include <stdlib.h>

#include "cpu/cpu.h"
#ifdef HAVE_CUDA
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "cpu/convert.h"
#include "gpu/gpu.h"
#include "lib/comm.h"
#include "lib/dist.h"
#endif

#ifdef HAVE_CUDA
static pthread_mutex_t plugin_lock = PTHREAD_MUTEX_INITIALIZER;
static const struct shemb__gpu_plugin *plugin;

static const struct shemb__gpu_host gpu_host = {
	.size = sizeof(struct shemb__gpu_host),
	.cpu_ops = &shemb__cpu_mem_ops,
	.cpu_create = shemb__cpu_create,
	.cpu_destroy = shemb__cpu_destroy,
	.dtype_size = shemb__dtype_size,
};

/* The GPU module, loaded once and kept (CUDA does not unload cleanly):
 * SHEMB_CUDA_PLUGIN, else the one installed with the library. */
static const struct shemb__gpu_plugin *load_plugin(char *why, size_t len)
{
	const char *path = getenv("SHEMB_CUDA_PLUGIN");
	const struct shemb__gpu_plugin *p;
	void *h;

	if (!path || !*path)
		path = SHEMB_PLUGIN_DIR "/shemb_cuda.so";
	pthread_mutex_lock(&plugin_lock);
	p = plugin;
	if (!p) {
		h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
		p = h ? dlsym(h, SHEMB__GPU_PLUGIN_SYMBOL) : NULL;
		if (!p || p->size < sizeof(*p))
			snprintf(why, len, "cannot load the GPU backend %s: %s",
				 path, h ? "not a shemb_cuda module of this "
					   "library" : dlerror());
		if (p && p->size < sizeof(*p))
			p = NULL;
		if (h && !p)
			dlclose(h);
		plugin = p;
	}
	pthread_mutex_unlock(&plugin_lock);
	return p;
}

/* device_id -1: rank modulo the devices this process sees, so the ranks
 * of a host spread over its GPUs. */
static int open_cuda(shemb_ctx *ctx, const char *isa)
{
	char why[512] = "";
	const struct shemb__gpu_plugin *p = load_plugin(why, sizeof(why));
	int dev = ctx->attr.device_id;
	int rc;

	if (!p)
		return shemb__fail(NULL, SHEMB_ENODEV, "%s", why);
	if (dev < 0) {
		int n = p->count(why, sizeof(why));

		if (n <= 0)
			return shemb__fail(NULL, SHEMB_ENODEV, "no usable CUDA "
					   "device: %s", why);
		dev = ctx->attr.rank % n;
	}
	rc = p->create(&gpu_host, ctx->pool, isa, dev, ctx->attr.stream,
		       &ctx->be, why, sizeof(why));
	if (rc)
		return shemb__fail(NULL, rc, "CUDA device %d: %s", dev, why);
	ctx->attr.device_id = dev;
	ctx->mem = p->ops;
	ctx->device_rows = true;
	return 0;
}
/* What each rank tells the others before NCCL: rank 0 its id (and
 * whether it has one), every rank its device. */
struct nccl_hello {
	int32_t ok;
	unsigned char uuid[16];
	char id[SHEMB__NCCL_ID_BYTES];
};

/* NCCL takes one rank per device: ranks sharing one (a test on a
 * one-GPU host) go through host memory instead, all of them, since
 * every rank sees the same hellos. */
static bool devices_shared(const struct nccl_hello *all, int n)
{
	for (int i = 0; i < n; i++)
		for (int j = i + 1; j < n; j++)
			if (!memcmp(all[i].uuid, all[j].uuid,
				    sizeof(all[i].uuid)))
				return true;
	return false;
}

/* Rank 0's hello as every rank sees it, with ok cleared when NCCL must
 * not be used. */
static int share_nccl_id(shemb_ctx *ctx, struct nccl_hello *h, char *why,
			 size_t len)
{
	int n = ctx->attr.world_size;
	struct nccl_hello *all = calloc((size_t)n, sizeof(*all));
	int rc = shemb__allgather_bytes(ctx, h, sizeof(*h), all);

	if (rc) {
		snprintf(why, len, "sharing the NCCL id failed");
	} else {
		*h = all[0];
		if (devices_shared(all, n)) {
			h->ok = 0;
			snprintf(why, len, "ranks share a device");
		}
	}
	free(all);
	return rc;
}

int shemb__backend_open_dev_comm(shemb_ctx *ctx)
{
	const char *env = getenv("SHEMB_NCCL");
	struct nccl_hello h = { 0 };
	char why[256] = "";
	int rc;

	if (!plugin || ctx->mem != plugin->ops)
		return 0; /* no device buffers */
	if (!plugin->nccl_open || (env && !strcmp(env, "0"))) {
		shemb__log(ctx, SHEMB_LOG_INFO, "no NCCL (%s): collectives on "
			   "device buffers go through host memory",
			   plugin->nccl_open ? "SHEMB_NCCL=0"
					     : "the GPU module has none");
		return 0;
	}
	if (plugin->device_uuid(ctx->be, h.uuid))
		memset(h.uuid, 0, sizeof(h.uuid));
	if (ctx->attr.rank == 0)
		h.ok = plugin->nccl_id(h.id, sizeof(h.id), why,
				       sizeof(why)) == 0;
	if (ctx->attr.world_size > 1 &&
	    share_nccl_id(ctx, &h, why, sizeof(why)))
		return shemb__fail(NULL, SHEMB_EPEER, "%s", why);
	if (!h.ok) {
		shemb__log(ctx, SHEMB_LOG_INFO, "no NCCL (%s): collectives on "
			   "device buffers go through host memory", why);
		return 0;
	}
	rc = plugin->nccl_open(ctx->be, ctx->attr.world_size, ctx->attr.rank,
			       h.id, ctx->attr.timeout_ms, &ctx->dev_comm, why,
			       sizeof(why));
	if (rc)
		return shemb__fail(NULL, rc, "NCCL communicator: %s", why);
	ctx->dev_comm_ops = plugin->nccl_ops;
	shemb__log(ctx, SHEMB_LOG_INFO, "collectives on device buffers: %s",
		   ctx->dev_comm_ops->describe(ctx->dev_comm));
	return 0;
}
#else
int shemb__backend_open_dev_comm(shemb_ctx *ctx)
{
	(void)ctx;
	return 0;
}

static int open_cuda(shemb_ctx *ctx, const char *isa)
{
	(void)ctx;
	(void)isa;
	return shemb__fail(NULL, SHEMB_ENODEV, "a CUDA device was asked for, "
			   "but this library was built without CUDA");
}
#endif

int shemb__backend_open(shemb_ctx *ctx)
{
	const char *isa = getenv("SHEMB_ISA");
	int rc;

	if (ctx->attr.device == SHEMB_DEVICE_CUDA)
		return open_cuda(ctx, isa);
	rc = shemb__cpu_create(ctx->pool, isa, &ctx->be);

	if (rc == SHEMB_ENOTSUP)
		return shemb__fail(NULL, rc,
				   "SHEMB_ISA=%s: this CPU or build has no such "
				   "kernels (use generic, avx2 or avx512)",
				   isa);
	if (rc)
		return shemb__fail(NULL, rc, "cannot set up the CPU backend");
	ctx->mem = &shemb__cpu_mem_ops;
	return 0;
}

void shemb__backend_close(shemb_ctx *ctx)
{
	if (ctx->mem == &shemb__cpu_mem_ops)
		shemb__cpu_destroy(ctx->be);
#ifdef HAVE_CUDA
	else if (plugin && ctx->mem == plugin->ops)
		plugin->destroy(ctx->be);
#endif
	ctx->be = NULL;
	ctx->mem = NULL;
}
