/*
 * cuda.cu - the GPU backend's device context: device and stream, memory,
 * copies, and the staging areas that carry a job's arrays up and its
 * results back.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shemb.h"
#include "gpu/cuda_int.h"

int shemb__cuda_fail(struct shemb__cuda *c, cudaError_t e, const char *what)
{
	if (e == cudaSuccess)
		return 0;
	snprintf(c->err, sizeof(c->err), "%s: %s", what,
		 cudaGetErrorString(e));
	cudaGetLastError(); /* clear a non-sticky error */
	return e == cudaErrorMemoryAllocation ? SHEMB_ENOMEM
					      : SHEMB_EINTERNAL;
}

static void name_device(struct shemb__cuda *c)
{
	cudaDeviceProp p;

	if (cudaGetDeviceProperties(&p, c->dev) == cudaSuccess)
		snprintf(c->name, sizeof(c->name), "CUDA device %d (%.256s, "
			 "sm_%d%d)", c->dev, p.name, p.major, p.minor);
	else
		snprintf(c->name, sizeof(c->name), "CUDA device %d", c->dev);
}

static void find_ctx_calls(struct shemb__cuda *c)
{
	void *get = NULL, *set = NULL;

	if (cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &get, 12000,
					     cudaEnableDefault, NULL) ||
	    cudaGetDriverEntryPointByVersion("cuCtxSetCurrent", &set, 12000,
					     cudaEnableDefault, NULL) ||
	    !get || !set) {
		cudaGetLastError();
		return;
	}
	c->ctx_get = (int (*)(void **))get;
	c->ctx_set = (int (*)(void *))set;
}

int shemb__cuda_open(int dev, void *stream, struct shemb__cuda **out,
		     char *why, size_t len)
{
	struct shemb__cuda *c = (struct shemb__cuda *)calloc(1, sizeof(*c));
	cudaError_t e;
	int n = 0;

	*out = NULL;
	if (!c)
		return SHEMB_ENOMEM;
	if (stream == (void *)cudaStreamPerThread) {
		snprintf(why, len, "stream is cudaStreamPerThread, which names "
			 "each calling thread's stream, and the context's "
			 "calls run on threads of their own too");
		free(c);
		return SHEMB_EINVAL;
	}
	e = cudaGetDeviceCount(&n);
	if (e == cudaSuccess && dev >= n) {
		snprintf(why, len, "no such device (this process sees %d)", n);
		free(c);
		return SHEMB_ENODEV;
	}
	c->dev = dev;
	if (e == cudaSuccess)
		find_ctx_calls(c);
	if (e == cudaSuccess) {
		shemb__cuda_device_guard g(c);

		e = cudaFree(0); /* makes the context, so a bad driver shows */
		if (e == cudaSuccess && !stream) {
			e = cudaStreamCreateWithFlags(&c->stream,
						      cudaStreamNonBlocking);
			c->own_stream = e == cudaSuccess;
		}
	}
	if (e != cudaSuccess) {
		snprintf(why, len, "%s", cudaGetErrorString(e));
		free(c);
		return SHEMB_ENODEV;
	}
	if (!c->own_stream)
		c->stream = (cudaStream_t)stream;
	pthread_mutex_init(&c->lock, NULL);
	name_device(c);
	*out = c;
	return 0;
}

void shemb__cuda_close(struct shemb__cuda *c)
{
	if (!c)
		return;
	{
		shemb__cuda_guard g(c);

		cudaStreamSynchronize(c->stream);
		cudaFree(c->scratch);
		cudaFree(c->plan_room);
		cudaFreeHost(c->pinned);
		if (c->own_stream)
			cudaStreamDestroy(c->stream);
	}
	pthread_mutex_destroy(&c->lock);
	free(c);
}

const char *shemb__cuda_describe(struct shemb__cuda *c)
{
	snprintf(c->desc, sizeof(c->desc), "%s%s%s", c->name,
		 c->err[0] ? "; last CUDA error: " : "", c->err);
	return c->desc;
}

int shemb__cuda_alloc(struct shemb__cuda *c, size_t bytes, void **p)
{
	shemb__cuda_guard g(c);

	*p = NULL;
	return shemb__cuda_fail(c, cudaMalloc(p, bytes ? bytes : 1),
				"cudaMalloc");
}

void shemb__cuda_free(struct shemb__cuda *c, void *p)
{
	shemb__cuda_guard g(c);

	cudaStreamSynchronize(c->stream);
	cudaFree(p);
}

int shemb__cuda_host_alloc(struct shemb__cuda *c, size_t bytes, void **p)
{
	shemb__cuda_device_guard g(c);

	*p = NULL;
	return shemb__cuda_fail(c, cudaHostAlloc(p, bytes ? bytes : 1,
						 cudaHostAllocPortable),
				"cudaHostAlloc");
}

void shemb__cuda_host_free(struct shemb__cuda *c, void *p)
{
	shemb__cuda_device_guard g(c);

	cudaFreeHost(p);
}

int shemb__cuda_copy(struct shemb__cuda *c, void *dst, const void *src,
		     size_t n)
{
	shemb__cuda_guard g(c);
	cudaError_t e;

	if (n == 0)
		return 0;
	e = cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, c->stream);
	if (e == cudaSuccess)
		e = cudaStreamSynchronize(c->stream);
	return shemb__cuda_fail(c, e, "copy");
}

int shemb__cuda_sync(struct shemb__cuda *c)
{
	shemb__cuda_guard g(c);

	return shemb__cuda_fail(c, cudaStreamSynchronize(c->stream),
				"cudaStreamSynchronize");
}

int shemb__cuda_uuid(struct shemb__cuda *c, unsigned char uuid[16])
{
	cudaDeviceProp p;

	if (cudaGetDeviceProperties(&p, c->dev) != cudaSuccess) {
		cudaGetLastError();
		return -1;
	}
	memcpy(uuid, &p.uuid, 16);
	return 0;
}

int shemb__cuda_is_device(struct shemb__cuda *c, const void *p)
{
	/* on a thread without a current context, the query would make
	 * device 0's primary context and leave it current */
	shemb__cuda_device_guard g(c);
	cudaPointerAttributes a;

	if (!p || cudaPointerGetAttributes(&a, p) != cudaSuccess) {
		cudaGetLastError();
		return 0;
	}
	if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged)
		return 0;
	return a.type == cudaMemoryTypeManaged || a.device == c->dev ? 1 : 2;
}

int shemb__cuda_finish(struct shemb__cuda *c, const char *what)
{
	cudaError_t e = cudaGetLastError();

	if (e == cudaSuccess)
		e = cudaStreamSynchronize(c->stream);
	return shemb__cuda_fail(c, e, what);
}

size_t shemb__pack_put(struct shemb__pack *b, const void *src, size_t n)
{
	size_t off = (b->total + 255) & ~(size_t)255;

	if (b->np == b->cap) {
		int cap = 2 * b->cap;
		struct shemb__pack_piece *p;

		p = (struct shemb__pack_piece *)malloc((size_t)cap *
						       sizeof(*p));

		if (!p) {
			b->failed = true;
			return 0;
		}
		memcpy(p, b->p, (size_t)b->np * sizeof(*p));
		if (b->p != b->small)
			free(b->p);
		b->p = p;
		b->cap = cap;
	}
	b->p[b->np].src = src;
	b->p[b->np].off = off;
	b->p[b->np].n = n;
	b->np++;
	b->total = off + n;
	return off;
}

/* Buffers grow by half again so that a slowly growing batch does not
 * reallocate every call; nothing of this context's uses them now (every
 * call ends synchronized), and cudaFree waits for the device anyway. */
static int grow(struct shemb__cuda *c, size_t need)
{
	size_t cap = need + need / 2 + 4096;
	cudaError_t e;

	if (need <= c->scratch_cap && need <= c->pinned_cap)
		return 0;
	cudaFree(c->scratch);
	cudaFreeHost(c->pinned);
	c->scratch = NULL;
	c->pinned = NULL;
	c->scratch_cap = c->pinned_cap = 0;
	e = cudaMalloc((void **)&c->scratch, cap);
	if (e == cudaSuccess)
		e = cudaMallocHost((void **)&c->pinned, cap);
	if (e != cudaSuccess)
		return shemb__cuda_fail(c, e, "staging buffers");
	c->scratch_cap = c->pinned_cap = cap;
	return 0;
}

int shemb__pack_upload(struct shemb__cuda *c, const struct shemb__pack *b)
{
	size_t end = 0;
	int rc = b->failed ? SHEMB_ENOMEM : grow(c, b->total);

	if (rc)
		return rc;
	for (int i = 0; i < b->np; i++) {
		if (!b->p[i].src || !b->p[i].n)
			continue;
		memcpy(c->pinned + b->p[i].off, b->p[i].src, b->p[i].n);
		end = b->p[i].off + b->p[i].n;
	}
	if (end == 0)
		return 0;
	return shemb__cuda_fail(c, cudaMemcpyAsync(c->scratch, c->pinned, end,
						   cudaMemcpyHostToDevice,
						   c->stream),
				"upload");
}

int shemb__pack_download(struct shemb__cuda *c, size_t off, size_t n,
			 void *dst)
{
	cudaError_t e;

	if (n == 0)
		return 0;
	e = cudaMemcpyAsync(c->pinned + off, c->scratch + off, n,
			    cudaMemcpyDeviceToHost, c->stream);
	if (e == cudaSuccess)
		e = cudaStreamSynchronize(c->stream);
	if (e == cudaSuccess)
		memcpy(dst, c->pinned + off, n);
	return shemb__cuda_fail(c, e, "download");
}
