/*
 * gputest.h - what the GPU tests share: a failure counter with a CHECK
 * that reports and goes on, and the rule for skipping.
 */
#ifndef SHEMB_GPUTEST_H
#define SHEMB_GPUTEST_H

#include <cuda_runtime.h>
#include <stdio.h>

#include "shemb.h"

static int failures;

#define CHECK(cond, ...)                                                      \
	do {                                                                  \
		if (!(cond)) {                                                \
			failures++;                                           \
			printf("FAIL %s:%d: ", __FILE__, __LINE__);           \
			printf(__VA_ARGS__);                                  \
			printf("\n");                                         \
		}                                                             \
	} while (0)

/* The exit status when no CUDA context could be made: skipped (77) only
 * where there is no device; with one, it is a failure (the module did not
 * load, say). */
static inline int no_context(void)
{
	int n = 0;

	if (cudaGetDeviceCount(&n) == cudaSuccess && n > 0) {
		printf("FAIL: %d devices, but: %s\n", n,
		       shemb_ctx_last_error(NULL));
		return 1;
	}
	printf("skipped: %s\n", shemb_ctx_last_error(NULL));
	return 77;
}

#endif
