/*
 * cuda_int.h - what the .cu files of gpu/ share: the device context, its
 * staging buffers, and packing a job's host arrays into one upload.
 */
#ifndef SHEMB_GPU_CUDA_INT_H
#define SHEMB_GPU_CUDA_INT_H

#include <cuda_runtime.h>
#include <pthread.h>
#include <stdlib.h>

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
	char *plan_room;        /* device scratch of step plans (plan.cu),
				 * which need no host side */
	size_t plan_room_cap;
	char name[320];
	char desc[640];
	char err[256];
	int (*ctx_get)(void **ctx);     /* cuCtxGetCurrent, or NULL */
	int (*ctx_set)(void *ctx);      /* cuCtxSetCurrent */
};

/* Records e and returns SHEMB_ENOMEM or SHEMB_EINTERNAL (0 for success). */
int shemb__cuda_fail(struct shemb__cuda *c, cudaError_t e, const char *what);

struct shemb__pack_piece {
	const void *src;          /* host input, or NULL for an output */
	size_t off, n;
};

/* A job's arrays laid out in one staging area: inputs are copied to the
 * device in one transfer, outputs read back after the kernel.  A job
 * has a few arrays per bag set, and any number of sets. */
struct shemb__pack {
	struct shemb__pack_piece small[8];
	struct shemb__pack_piece *p = small;
	int np = 0, cap = 8;
	bool failed = false;      /* no memory for a piece: upload fails */
	size_t total = 0;

	shemb__pack() {}
	shemb__pack(const shemb__pack &) = delete;
	shemb__pack &operator=(const shemb__pack &) = delete;
	~shemb__pack()
	{
		if (p != small)
			free(p);
	}
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

/* On the context's device for one call, the thread's current context
 * given back at the end (through the driver's cuCtxGetCurrent and
 * cuCtxSetCurrent, so that "none" is given back as such: restoring a
 * device through the runtime would make a context on it), so the
 * library never changes the host's. */
struct shemb__cuda_device_guard {
	struct shemb__cuda *c;
	void *saved = NULL;
	bool restore = false;

	explicit shemb__cuda_device_guard(struct shemb__cuda *cc) : c(cc)
	{
		restore = c->ctx_get && c->ctx_get(&saved) == 0;
		cudaSetDevice(c->dev);
	}
	~shemb__cuda_device_guard()
	{
		if (restore)
			c->ctx_set(saved);
	}
};

struct shemb__cuda_lock {
	pthread_mutex_t *m;

	explicit shemb__cuda_lock(pthread_mutex_t *mm) : m(mm)
	{
		pthread_mutex_lock(m);
	}
	~shemb__cuda_lock()
	{
		pthread_mutex_unlock(m);
	}
};

/* ... and the only call using the context's staging buffers (members
 * are made in this order and undone in the reverse). */
struct shemb__cuda_guard {
	shemb__cuda_lock held;
	shemb__cuda_device_guard dev;

	explicit shemb__cuda_guard(struct shemb__cuda *c)
		: held(&c->lock), dev(c)
	{
	}
};

/* Blocks of threads for n items of per threads each. */
static inline unsigned shemb__blocks(int64_t n, int per)
{
	return (unsigned)((n + per - 1) / per);
}

#endif
