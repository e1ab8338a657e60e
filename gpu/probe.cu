/*
 * probe.cu - which CUDA devices this process can use, and a round trip
 * through one of them: the first thing a GPU host's device check runs.
 */
#include <cuda_runtime.h>
#include <stdio.h>

#include "gpu/gpu.h"

static int failed(cudaError_t e, const char *what, char *why, size_t len)
{
	snprintf(why, len, "%s: %s", what, cudaGetErrorString(e));
	return -1;
}

int shemb__gpu_count(char *why, size_t len)
{
	int n = 0;
	cudaError_t e = cudaGetDeviceCount(&n);

	if (e != cudaSuccess) {
		failed(e, "cudaGetDeviceCount", why, len);
		return 0;
	}
	if (n == 0)
		snprintf(why, len, "no CUDA device");
	return n;
}

int shemb__gpu_describe(int dev, char *name, size_t len)
{
	cudaDeviceProp p;
	cudaError_t e = cudaGetDeviceProperties(&p, dev);

	if (e != cudaSuccess)
		return failed(e, "cudaGetDeviceProperties", name, len);
	snprintf(name, len, "%s, compute capability %d.%d, %zu MiB", p.name,
		 p.major, p.minor, p.totalGlobalMem >> 20);
	return 0;
}

__global__ static void scale_add(float *v, int n, float a, float b)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;

	if (i < n)
		v[i] = a * v[i] + b;
}

int shemb__gpu_selftest(int dev, int n, const float *in, float *out,
			float a, float b, char *why, size_t len)
{
	size_t bytes = (size_t)n * sizeof(float);
	float *d = NULL;
	cudaError_t e = cudaSetDevice(dev);

	if (e == cudaSuccess)
		e = cudaMalloc(&d, bytes ? bytes : 1);
	if (e == cudaSuccess)
		e = cudaMemcpy(d, in, bytes, cudaMemcpyHostToDevice);
	if (e == cudaSuccess && n > 0) {
		scale_add<<<(n + 255) / 256, 256>>>(d, n, a, b);
		e = cudaGetLastError();
	}
	if (e == cudaSuccess)
		e = cudaMemcpy(out, d, bytes, cudaMemcpyDeviceToHost);
	if (d)
		cudaFree(d);
	return e == cudaSuccess ? 0 : failed(e, "the self-test", why, len);
}
