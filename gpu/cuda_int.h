/*
 * cuda_int.h - what the the .cu files of gpu/ files share: the device context, its
 * staging buffers, and packing a job's host arrays into one upload.
 */
#ifndef SHEMB_GPU_CUDA_INT_H
#define SHEMB_GPU_CUDA_INT_H

#include <cuda_runtime.h>
#include <pthread.h>

#include "gpu/cuda.h"

struct shemb__cuda {
	int dev;
	cudaStream_t stream;
	bool own_stream;
	pthread_mutex_t lock;   /* one call at a time uses the buffers */
	char *pinned;           /* page-locked host staging */
	size_t pinned_cap;
	char *scratch;          /* device staging for job arrays */
	size_t scratch_cap;
	char name[160];
	char desc[448];
	char err[256];
};

/* Records e and returns SHEMB_ENOMEM or SHEMB_EINTERNAL (0 for success). */
int shemb__cuda_fail(struct shemb__cuda *c, cudaError_t e, const char *what);

#define SHEMB__PACK_MAX 32

/* A job's arrays laid out in one staging area: inputs are copied to the
 * device in one transfer, outputs read back after the kernel. */
struct shemb__pack {
	struct {
		const void *src;  /* host input, or NULL for an output */
		size_t off, n;
	} p[SHEMB__PACK_MAX];
	int np;
	size_t total;
};

/* Room for n bytes (from src, if an input); its offset in the area. */
size_t shemb__pack_put(struct shemb__pack *b, const void *src, size_t n);
/* Grow the staging buffers, copy the inputs in and up to the device. */
int shemb__pack_upload(struct shemb__cuda *c, const struct shemb__pack *b);
/* The device address of offset off of the area. */
static inline void *shemb__dev_at(struct shemb__cuda *c, size_t off)
{
	return c->scratch + off;
}
/* Device bytes [off, off + n) of the area into host dst (synchronizes). */
int shemb__pack_download(struct shemb__cuda *c, size_t off, size_t n,
			 void *dst);
/* The kernel just launched, then the stream: 0 or the error. */
int shemb__cuda_finish(struct shemb__cuda *c, const char *what);

/* Holds the context for one call: its buffers, on its device; the
 * calling thread's current device is given back at the end, so the
 * library never changes the host's choice. */
struct shemb__cuda_guard {
	struct shemb__cuda *c;
	int caller_dev;

	explicit shemb__cuda_guard(struct shemb__cuda *cc) : c(cc)
	{
		pthread_mutex_lock(&c->lock);
		if (cudaGetDevice(&caller_dev) != cudaSuccess)
			caller_dev = -1;
		if (caller_dev != c->dev)
			cudaSetDevice(c->dev);
	}
	~shemb__cuda_guard()
	{
		if (caller_dev >= 0 && caller_dev != c->dev)
			cudaSetDevice(caller_dev);
		pthread_mutex_unlock(&c->lock);
	}
};

/* Blocks of threads for n items of per threads each. */
static inline unsigned shemb__blocks(int64_t n, int per)
{
	return (unsigned)((n + per - 1) / per);
}

#endif
