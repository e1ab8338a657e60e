/*
 * devmem.h - device memory for a test's own buffers, on the GPU module
 * the library loaded: the emulated device of tests/emu/ (its module's
 * shemb__emu_* calls), or a real GPU through the CUDA runtime that
 * module loaded (found with dlopen, so the tests need no CUDA headers
 * and link no CUDA library).
 */
#ifndef SHEMB_DEVMEM_H
#define SHEMB_DEVMEM_H

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

static struct {
	void *(*alloc)(size_t);
	void (*free)(void *);
	void (*copy)(void *, const void *, size_t);
	void (*fill)(void *, int, size_t);
	size_t (*live)(void);     /* emulated only: allocations held */
	void *(*alloc_other)(size_t); /* emulated only: another device's */
	unsigned long (*plans)(void);  /* emulated only: step plans made on
					* the device, and checks run there */
	unsigned long (*checks)(void);
} devmem;

/* The emulated device's module at path (dlopen gives the library and
 * the test the same one, whichever loads it first): 0, or -1 with the
 * reason in why. */
static inline int devmem_emu(const char *path, char *why, size_t len)
{
	void *h = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;

	if (!h) {
		snprintf(why, len, "%s", path ? dlerror() : "no module named");
		return -1;
	}
	*(void **)&devmem.alloc = dlsym(h, "shemb__emu_alloc");
	*(void **)&devmem.free = dlsym(h, "shemb__emu_free");
	*(void **)&devmem.copy = dlsym(h, "shemb__emu_copy");
	*(void **)&devmem.fill = dlsym(h, "shemb__emu_fill");
	*(void **)&devmem.live = dlsym(h, "shemb__emu_live");
	*(void **)&devmem.alloc_other = dlsym(h, "shemb__emu_alloc_other");
	*(void **)&devmem.plans = dlsym(h, "shemb__emu_plans");
	*(void **)&devmem.checks = dlsym(h, "shemb__emu_checks");
	if (!devmem.alloc || !devmem.free || !devmem.copy || !devmem.fill) {
		snprintf(why, len, "%s is not the emulated device", path);
		return -1;
	}
	return 0;
}

/* The CUDA runtime's calls, as the module's libcudart.so.13 has them
 * (cudaError_t is an int; cudaMemcpyDefault is 4). */
static struct {
	int (*set_device)(int);
	int (*malloc)(void **, size_t);
	int (*free)(void *);
	int (*memcpy)(void *, const void *, size_t, int);
	int (*memset)(void *, int, size_t);
	int (*sync)(void *);
} cudart;

static void *cuda_alloc(size_t n)
{
	void *p = NULL;

	return cudart.malloc(&p, n) ? NULL : p;
}

static void cuda_free(void *p)
{
	cudart.free(p);
}

/* Copies and fills are done when they return: the library's streams do
 * not wait for the default one.  Only that stream is waited for, not
 * the device, whose other work (collectives in flight) goes on. */
static void cuda_copy(void *dst, const void *src, size_t n)
{
	if (n && cudart.memcpy(dst, src, n, 4))
		abort();
	cudart.sync(NULL);
}

static void cuda_fill(void *dst, int byte, size_t n)
{
	if (n && cudart.memset(dst, byte, n))
		abort();
	cudart.sync(NULL);
}

/* The CUDA runtime the library's GPU module loaded, on device dev. */
static inline int devmem_cuda(int dev, char *why, size_t len)
{
	void *h = dlopen("libcudart.so.13", RTLD_NOW | RTLD_NOLOAD);

	if (!h) {
		snprintf(why, len, "the CUDA runtime is not loaded: %s",
			 dlerror());
		return -1;
	}
	*(void **)&cudart.set_device = dlsym(h, "cudaSetDevice");
	*(void **)&cudart.malloc = dlsym(h, "cudaMalloc");
	*(void **)&cudart.free = dlsym(h, "cudaFree");
	*(void **)&cudart.memcpy = dlsym(h, "cudaMemcpy");
	*(void **)&cudart.memset = dlsym(h, "cudaMemset");
	*(void **)&cudart.sync = dlsym(h, "cudaStreamSynchronize");
	if (!cudart.set_device || !cudart.malloc || !cudart.free ||
	    !cudart.memcpy || !cudart.memset || !cudart.sync ||
	    cudart.set_device(dev)) {
		snprintf(why, len, "no CUDA device %d through the runtime",
			 dev);
		return -1;
	}
	devmem.alloc = cuda_alloc;
	devmem.free = cuda_free;
	devmem.copy = cuda_copy;
	devmem.fill = cuda_fill;
	return 0;
}

/* After a GPU context on device dev was made: the device memory of the
 * module it loaded (SHEMB_CUDA_PLUGIN), emulated or not. */
static inline int devmem_open(int dev, char *why, size_t len)
{
	const char *path = getenv("SHEMB_CUDA_PLUGIN");
	void *h = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
	bool emulated = h && dlsym(h, "shemb__emu_alloc");

	if (h)
		dlclose(h);
	return emulated ? devmem_emu(path, why, len)
			: devmem_cuda(dev, why, len);
}

static inline void *devmem_alloc(size_t n)
{
	void *p = devmem.alloc(n ? n : 1);

	if (!p)
		abort();
	return p;
}

#endif
