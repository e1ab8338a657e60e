/*
 * plugin.c - the one symbol of the shemb_cuda module, through which the
 * library finds the GPU backend (gpu.h).
 */
#include "gpu/gpu.h"

__attribute__((visibility("default")))
const struct shemb__gpu_plugin shemb__gpu_plugin = {
	.size = sizeof(struct shemb__gpu_plugin),
	.count = shemb__gpu_count,
	.create = shemb__gpu_backend_create,
	.destroy = shemb__gpu_backend_destroy,
	.ops = &shemb__gpu_mem_ops,
};
