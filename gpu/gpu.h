/*
 * gpu.h - what gpu/ offers the rest of the build so far: which CUDA
 * devices this process can use, and a round trip through one of them.
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

#ifdef __cplusplus
}
#endif

#endif
