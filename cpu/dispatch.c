/*
 * dispatch.c - choose the kernel variant the CPU runs best.
 */
#include "config.h"

#include <string.h>

#include "cpu/kernels.h"

static const struct shemb__kernels *best(void)
{
#ifdef HAVE_X86_KERNELS
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f") &&
	    __builtin_cpu_supports("avx512bw") &&
	    __builtin_cpu_supports("avx512vl") &&
	    __builtin_cpu_supports("avx512dq"))
		return &shemb__kernels_avx512;
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c"))
		return &shemb__kernels_avx2;
#endif
	return &shemb__kernels_generic;
}

const struct shemb__kernels *shemb__kernels_select(const char *want)
{
	const struct shemb__kernels *top = best();

	if (!want || !*want || !strcmp(want, top->isa))
		return top;
	if (!strcmp(want, "generic"))
		return &shemb__kernels_generic;
#ifdef HAVE_X86_KERNELS
	if (!strcmp(want, "avx2") && top == &shemb__kernels_avx512)
		return &shemb__kernels_avx2;
#endif
	return NULL;
}
