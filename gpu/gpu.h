/*
 * gpu.h - what gpu/ offers the rest of the build: which CUDA devices this
 * process can use, a round trip through one of them, and the GPU
 * backend (struct shemb_mem_ops over a device).
 */
#ifndef SHEMB_GPU_H
#define SHEMB_GPU_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* CUDA devices this process can use; 0 with the reason in why (no
 * driver, no device) when there are none. */
int shemb__gpu_count(char *why, size_t len);

/* The name and compute capability of device dev into name. */
int shemb__gpu_describe(int dev, char *name, size_t len);

/* out[i] = a * in[i] + b for i < n, computed on device dev through
 * device memory; 0, or -1 with the CUDA error in why. */
int shemb__gpu_selftest(int dev, int n, const float *in, float *out,
			float a, float b, char *why, size_t len);

struct shemb__pool;
struct shemb_mem_ops;
struct shemb_comm_ops;

/* What the library lends the GPU backend: its CPU backend, for host
 * stores and host-side work. */
struct shemb__gpu_host {
	size_t size;
	const struct shemb_mem_ops *cpu_ops;
	int (*cpu_create)(struct shemb__pool *pool, const char *isa,
			  void **be);
	void (*cpu_destroy)(void *be);
	size_t (*dtype_size)(int dtype);
};

extern const struct shemb_mem_ops shemb__gpu_mem_ops;

/* The backend on device dev, its work ordered on stream (a cudaStream_t,
 * or NULL for one of its own), with a CPU backend on pool for host
 * stores.  SHEMB_ENODEV (or another code) with the reason in why. */
int shemb__gpu_backend_create(const struct shemb__gpu_host *host,
			      struct shemb__pool *pool, const char *isa,
			      int dev, void *stream, void **be, char *why,
			      size_t len);
void shemb__gpu_backend_destroy(void *be);

/*
 * The GPU backend is a module of its own (shemb_cuda.so, in the
 * package's library directory), loaded when a context asks for a CUDA
 * device: the library itself then needs no CUDA runtime, loads on any
 * host, and can be dlopen()ed (the static CUDA runtime's TLS cannot).
 * The module exports one symbol, SHEMB__GPU_PLUGIN_SYMBOL, of this type.
 */
#define SHEMB__GPU_PLUGIN_SYMBOL "shemb__gpu_plugin"

struct shemb__gpu_plugin {
	size_t size;
	int (*count)(char *why, size_t len);
	int (*create)(const struct shemb__gpu_host *host,
		      struct shemb__pool *pool, const char *isa, int dev,
		      void *stream, void **be, char *why, size_t len);
	void (*destroy)(void *be);
	const struct shemb_mem_ops *ops;
	/* NCCL between GPU ranks (NULL in a module built without it): an
	 * id of SHEMB__NCCL_ID_BYTES from one rank, then every rank opens
	 * the communicator with it (collective), ordered on be's stream */
	int (*nccl_id)(void *id, size_t len, char *why, size_t wlen);
	int (*nccl_open)(void *be, int nranks, int rank, const void *id,
			 int timeout_ms, void **comm, char *why, size_t len);
	const struct shemb_comm_ops *nccl_ops;
	/* the 16-byte UUID of be's device (NCCL wants one rank per
	 * device); -1 when unknown */
	int (*device_uuid)(void *be, unsigned char uuid[16]);
};

#define SHEMB__NCCL_ID_BYTES 128

#ifdef __cplusplus
}
#endif

#endif
