/*
 * plugin.c - the one symbol of the shemb_cuda module, through which the
 * library finds the GPU backend (gpu.h).
 */
#include "config.h"

#include "gpu/cuda.h"
#include "gpu/gpu.h"

int shemb__gpu_uuid(void *be, unsigned char uuid[16]);
#ifdef HAVE_NCCL
int shemb__gpu_nccl_open(void *be, int nranks, int rank, const void *id,
			 int timeout_ms, void **comm, char *why, size_t len);
#endif

__attribute__((visibility("default")))
const struct shemb__gpu_plugin shemb__gpu_plugin = {
	.size = sizeof(struct shemb__gpu_plugin),
	.count = shemb__gpu_count,
	.create = shemb__gpu_backend_create,
	.destroy = shemb__gpu_backend_destroy,
	.ops = &shemb__gpu_mem_ops,
	.device_uuid = shemb__gpu_uuid,
#ifdef HAVE_NCCL
	.nccl_id = shemb__nccl_unique_id,
	.nccl_open = shemb__gpu_nccl_open,
	.nccl_ops = &shemb__nccl_ops,
#endif
};
