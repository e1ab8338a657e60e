/*
 * plugin.c - the emulated device as a GPU module (gpu/gpu.h): one device,
 * gpu/backend.c over tests/emu/device.c, no NCCL.  Tests load it through
 * SHEMB_CUDA_PLUGIN.
 */
#include "config.h"

#include <stdio.h>

#include "shemb.h"
#include "gpu/cuda.h"
#include "gpu/gpu.h"
#include "tests/emu/emu.h"

int shemb__gpu_uuid(void *be, unsigned char uuid[16]);

static int count(char *why, size_t len)
{
	(void)why;
	(void)len;
	return 1;
}

static int create(const struct shemb__gpu_host *host,
		  struct shemb__pool *pool, const char *isa, int dev,
		  void *stream, void **be, char *why, size_t len)
{
	shemb__emu_next = (struct shemb__emu_open){ host, pool, isa };
	return shemb__gpu_backend_create(host, pool, isa, dev, stream, be, why,
					 len);
}

__attribute__((visibility("default")))
const struct shemb__gpu_plugin shemb__gpu_plugin = {
	.size = sizeof(struct shemb__gpu_plugin),
	.count = count,
	.create = create,
	.destroy = shemb__gpu_backend_destroy,
	.ops = &shemb__gpu_mem_ops,
	.device_uuid = shemb__gpu_uuid,
};
