/*
 * gputest.h - what the GPU tests share: a failure counter with a CHECK
 * that reports and goes on, the rule for skipping, and device memory for
 * the test's own buffers.
 *
 * Built with SHEMB_TEST_EMU, the same tests run on the emulated device
 * of tests/emu/ (the module at SHEMB_EMU_MODULE), which needs no GPU: its
 * device memory comes from that module, and it never skips.
 */
#ifndef SHEMB_GPUTEST_H
#define SHEMB_GPUTEST_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "shemb.h"

static int failures;

/* splitmix64: the tests' inputs, the same on every run */
static uint64_t rng_state;

static inline uint64_t rnd(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static inline float rndf(float lo, float hi)
{
	return lo + (hi - lo) * (float)((rnd() >> 40) * 0x1p-24);
}

static inline void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p)
		abort();
	return p;
}

#define CHECK(cond, ...)                                                      \
	do {                                                                  \
		if (!(cond)) {                                                \
			failures++;                                           \
			printf("FAIL %s:%d: ", __FILE__, __LINE__);           \
			printf(__VA_ARGS__);                                  \
			printf("\n");                                         \
		}                                                             \
	} while (0)

#ifdef SHEMB_TEST_EMU
#include "tests/devmem.h"

static inline void gpu_test_init(void)
{
	char why[512];

	if (devmem_emu(SHEMB_EMU_MODULE, why, sizeof(why))) {
		printf("FAIL: %s\n", why);
		exit(1);
	}
	setenv("SHEMB_CUDA_PLUGIN", SHEMB_EMU_MODULE, 1);
}

static inline int no_context(void)
{
	printf("FAIL: no context on the emulated device: %s\n",
	       shemb_ctx_last_error(NULL));
	return 1;
}

static inline void *dev_alloc(size_t n)
{
	return devmem_alloc(n);
}

static inline void dev_free(void *p)
{
	devmem.free(p);
}

static inline void dev_put(void *dst, const void *src, size_t n)
{
	devmem.copy(dst, src, n);
}

static inline void dev_get(void *dst, const void *src, size_t n)
{
	devmem.copy(dst, src, n);
}

static inline void dev_fill(void *dst, int byte, size_t n)
{
	devmem.fill(dst, byte, n);
}

/* Memory of another device than the context's, or NULL where there is
 * none to have. */
static inline void *dev_alloc_other(size_t n)
{
	return devmem.alloc_other ? devmem.alloc_other(n ? n : 1) : NULL;
}

/* Once every context is destroyed and the test freed its buffers, no
 * device memory may be left: the backend's stores, tiers and staging
 * included. */
static inline void check_no_device_leak(void)
{
	size_t n = devmem.live ? devmem.live() : 0;

	CHECK(n == 0, "%zu device allocations were never freed", n);
}

/* Step plans made on the device so far, and the backward's checks run
 * there; -1 where that cannot be told (a real device). */
static inline long device_plans(void)
{
	return devmem.plans ? (long)devmem.plans() : -1;
}

static inline long device_checks(void)
{
	return devmem.checks ? (long)devmem.checks() : -1;
}
#else
#include <cuda_runtime.h>

static inline void gpu_test_init(void)
{
}

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

static inline void *dev_alloc(size_t n)
{
	void *p = NULL;

	if (cudaMalloc(&p, n ? n : 1) != cudaSuccess)
		abort();
	return p;
}

static inline void dev_free(void *p)
{
	cudaFree(p);
}

/* Copies and fills wait for the device: the library's streams do not
 * wait for the default one. */
static inline void dev_put(void *dst, const void *src, size_t n)
{
	if (n && cudaMemcpy(dst, src, n, cudaMemcpyHostToDevice) !=
			 cudaSuccess)
		abort();
	cudaDeviceSynchronize();
}

static inline void dev_get(void *dst, const void *src, size_t n)
{
	if (n && cudaMemcpy(dst, src, n, cudaMemcpyDeviceToHost) !=
			 cudaSuccess)
		abort();
}

static inline void dev_fill(void *dst, int byte, size_t n)
{
	cudaMemset(dst, byte, n);
	cudaDeviceSynchronize();
}

/* Another GPU's memory would need a second device made current: the
 * emulated one has it. */
static inline void *dev_alloc_other(size_t n)
{
	(void)n;
	return NULL;
}

/* The CUDA runtime does not count allocations: nothing to check. */
static inline void check_no_device_leak(void)
{
}

static inline long device_plans(void)
{
	return -1;
}

static inline long device_checks(void)
{
	return -1;
}
#endif

/* The GPU context under test and its CPU twin, two threads each: 0, or
 * the test's exit status (no_context()'s without a device). */
static inline int twin_contexts(shemb_ctx **cg, shemb_ctx **cc)
{
	struct shemb_ctx_attr a;
	int rc;

	shemb_ctx_attr_init(&a);
	a.nthreads = 2;
	a.device = SHEMB_DEVICE_CUDA;
	rc = shemb_ctx_create(&a, cg);
	if (rc == SHEMB_ENODEV)
		return no_context();
	a.device = SHEMB_DEVICE_CPU;
	if (rc || shemb_ctx_create(&a, cc)) {
		printf("FAIL: contexts: %s\n", shemb_ctx_last_error(NULL));
		if (!rc)
			shemb_ctx_destroy(*cg);
		return 1;
	}
	return 0;
}

#endif
