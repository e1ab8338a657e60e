/*
 * backend.c - choose and open a context's memory backend.
 *
 * Only the CPU backend exists in this release; a CUDA one registers here
 * behind HAVE_CUDA.  SHEMB_ISA=generic|avx2|avx512 forces a CPU kernel
 * variant (for tests and benchmarks).
 */
#include "lib/backend.h"

#include <stdlib.h>

#include "cpu/cpu.h"

int shemb__backend_open(shemb_ctx *ctx)
{
	const char *isa = getenv("SHEMB_ISA");
	int rc = shemb__cpu_create(ctx->pool, isa, &ctx->be);

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
	ctx->be = NULL;
	ctx->mem = NULL;
}
