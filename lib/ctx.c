/*
 * ctx.c - contexts: attributes, thread pool, backend, memory budget.
 */
#define _GNU_SOURCE
#include "lib/internal.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu/hostmem.h"
#include "cpu/threadpool.h"
#include "lib/comm.h"
#include "lib/backend.h"
#include "lib/stepq.h"
#include "lib/table.h"
#include "lib/tier.h"

#define MAX_THREADS 1024
/* The slices the kernel takes (100 us to 100 ms), and the default. */
#define MIN_SLICE_US 100
#define MAX_SLICE_US 100000
#define DEFAULT_SLICE_US 100

/* The size of the first released struct shemb_ctx_attr. */
#define CTX_ATTR_V1_SIZE                                                      \
	(offsetof(struct shemb_ctx_attr, world_size) + sizeof(int))

static atomic_uint_fast64_t next_serial = 1;

SHEMB_API void shemb_ctx_attr_init_size(struct shemb_ctx_attr *attr,
					size_t size)
{
	struct shemb_ctx_attr d = {
		.size = sizeof(d),
		.log_level = SHEMB_LOG_WARN,
		.rank = -1,
		.world_size = 0,
		.progress = SHEMB_PROGRESS_THREAD,
		.device = SHEMB_DEVICE_CPU,
		.device_id = -1,
	};

	shemb__init_sized(attr, size, &d, sizeof(d));
}

static int cpus_available(void)
{
	cpu_set_t set;

	if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
		return CPU_COUNT(&set);
	return (int)sysconf(_SC_NPROCESSORS_ONLN);
}

static uint64_t physical_memory(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);

	return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page
				     : UINT64_MAX;
}

static int check_attr(struct shemb_ctx_attr *a)
{
	if (a->nthreads < 0 || a->nthreads > MAX_THREADS)
		return shemb__fail(NULL, SHEMB_EINVAL,
				   "nthreads %d outside 0 .. %d", a->nthreads,
				   MAX_THREADS);
	if (a->log_level < SHEMB_LOG_OFF || a->log_level > SHEMB_LOG_DEBUG)
		return shemb__fail(NULL, SHEMB_EINVAL,
				   "log_level %d outside 0 .. %d", a->log_level,
				   SHEMB_LOG_DEBUG);
	if (a->prefetch_thread != 0 && a->prefetch_thread != 1)
		return shemb__fail(NULL, SHEMB_EINVAL,
				   "prefetch_thread %d is neither 0 nor 1",
				   a->prefetch_thread);
	if (a->comm_slice_us != -1 && a->comm_slice_us != 0 &&
	    (a->comm_slice_us < MIN_SLICE_US ||
	     a->comm_slice_us > MAX_SLICE_US))
		return shemb__fail(NULL, SHEMB_EINVAL, "comm_slice_us %d is "
				   "not -1, 0 or %d to %d", a->comm_slice_us,
				   MIN_SLICE_US, MAX_SLICE_US);
	if (!a->comm_slice_us)
		a->comm_slice_us = DEFAULT_SLICE_US;
	if (a->device != SHEMB_DEVICE_CPU && a->device != SHEMB_DEVICE_CUDA)
		return shemb__fail(NULL, SHEMB_EINVAL, "device %d is not an "
				   "enum shemb_device value", a->device);
	if (a->device_id < -1)
		return shemb__fail(NULL, SHEMB_EINVAL, "device_id %d is below "
				   "-1", a->device_id);
	if (a->world_size < 0 || a->rank < -1)
		return shemb__fail(NULL, SHEMB_EINVAL,
				   "rank %d of world size %d is impossible",
				   a->rank, a->world_size);
	return shemb__resolve_identity(a);
}

static int ctx_init(shemb_ctx *ctx)
{
	int rc;

	ctx->serial = atomic_fetch_add(&next_serial, 1);
	if (ctx->attr.nthreads == 0)
		ctx->attr.nthreads = cpus_available();
	ctx->host_budget = ctx->attr.host_mem_bytes ? ctx->attr.host_mem_bytes
						    : physical_memory();
	ctx->device_budget = ctx->attr.device_mem_bytes
				     ? ctx->attr.device_mem_bytes
				     : UINT64_MAX;
	pthread_mutex_init(&ctx->lock, NULL);
	if (ctx->attr.world_size > 1) {
		ctx->rank_bytes = calloc((size_t)ctx->attr.world_size,
					 sizeof(*ctx->rank_bytes));
		if (!ctx->rank_bytes)
			return shemb__fail(NULL, SHEMB_ENOMEM, "no memory");
	}
	rc = shemb__pool_create(ctx->attr.nthreads, &ctx->pool);
	if (rc)
		return shemb__fail(NULL, rc, "cannot start %d threads",
				   ctx->attr.nthreads);
	rc = shemb__backend_open(ctx);
	if (!rc)
		rc = shemb__comm_open(ctx);
	if (!rc)
		rc = shemb__backend_open_dev_comm(ctx);
	return rc;
}

SHEMB_API int shemb_ctx_create(const struct shemb_ctx_attr *attr,
			       shemb_ctx **out)
{
	shemb_ctx *ctx;
	int rc;

	if (!out)
		return shemb__fail(NULL, SHEMB_EINVAL, "ctx pointer is NULL");
	*out = NULL;
	ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return shemb__fail(NULL, SHEMB_ENOMEM, "no memory for a context");
	shemb_ctx_attr_init(&ctx->attr);
	if (attr && shemb__copy_sized(&ctx->attr, sizeof(ctx->attr), attr,
				      CTX_ATTR_V1_SIZE)) {
		free(ctx);
		return shemb__fail(NULL, SHEMB_EINVAL,
				   "attr->size %zu is not a struct "
				   "shemb_ctx_attr this library knows "
				   "(set it with shemb_ctx_attr_init)",
				   attr->size);
	}
	rc = check_attr(&ctx->attr);
	if (!rc)
		rc = ctx_init(ctx);
	if (rc) {
		shemb_ctx_destroy(ctx);
		return rc;
	}
	shemb__log(ctx, SHEMB_LOG_INFO, "context: %s, %s, host budget %llu "
		   "MiB", ctx->mem->describe(ctx->be),
		   ctx->comm_ops->describe(ctx->comm),
		   (unsigned long long)(ctx->host_budget >> 20));
	*out = ctx;
	return 0;
}

SHEMB_API int shemb_ctx_destroy(shemb_ctx *ctx)
{
	if (!ctx)
		return 0;
	if (!shemb__stepq_stop(ctx)) /* a thread stuck with the context */
		return shemb__fail(ctx, SHEMB_EPEER, "the context's thread of "
				   "started steps never came back from the "
				   "transport: the context is left as it is, "
				   "its memory not freed");
	shemb__comm_close(ctx);
	shemb__loader_stop(ctx);
	while (ctx->tables)
		shemb_table_destroy(ctx->tables);
	if (ctx->mem)
		shemb__backend_close(ctx);
	shemb__pool_destroy(ctx->pool);
	pthread_mutex_destroy(&ctx->lock);
	free(ctx->rank_bytes);
	free(ctx->rank_budget);
	free(ctx);
	shemb__hostmem_release_all();
	return 0;
}

SHEMB_API int shemb_ctx_get_attr(const shemb_ctx *ctx,
				 struct shemb_ctx_attr *attr)
{
	struct shemb_ctx_attr a;

	if (!ctx || !attr)
		return shemb__fail(ctx, SHEMB_EINVAL, "ctx or attr is NULL");
	if (attr->size < CTX_ATTR_V1_SIZE)
		return shemb__fail(ctx, SHEMB_EINVAL,
				   "attr->size %zu is too small", attr->size);
	a = ctx->attr;
	a.host_mem_bytes = ctx->host_budget;
	a.root = ctx->root[0] ? ctx->root : NULL;
	a.provider = ctx->provider;
	a.job_key = NULL; /* a secret: not handed out again */
	memcpy((char *)attr + sizeof(size_t), (const char *)&a + sizeof(size_t),
	       (attr->size < sizeof(a) ? attr->size : sizeof(a)) -
		       sizeof(size_t));
	return 0;
}

int shemb__budget_take(uint64_t budget, atomic_uint_fast64_t *used,
		       uint64_t bytes)
{
	uint_fast64_t u = atomic_load(used);

	do {
		if (bytes > budget || u > budget - bytes)
			return -1;
	} while (!atomic_compare_exchange_weak(used, &u, u + bytes));
	return 0;
}

int shemb__budget_claim(shemb_ctx *ctx, const char *table, const char *what,
			uint64_t bytes, bool device)
{
	const char *kind = device ? "device" : "host";
	uint64_t budget = device ? ctx->device_budget : ctx->host_budget;
	atomic_uint_fast64_t *used = device ? &ctx->device_used
					    : &ctx->host_used;

	if (!shemb__budget_take(budget, used, bytes))
		return 0;
	return shemb__fail(ctx, SHEMB_ENOMEM, "table '%s': %s needs %llu "
			   "bytes of %s memory; %s budget %llu, in use %llu",
			   table, what, (unsigned long long)bytes, kind, kind,
			   (unsigned long long)budget,
			   (unsigned long long)atomic_load(used));
}

void shemb__budget_release(shemb_ctx *ctx, uint64_t bytes, bool device)
{
	atomic_fetch_sub(device ? &ctx->device_used : &ctx->host_used, bytes);
}
