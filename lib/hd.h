/*
 * hd.h - SHEMB_HD marks small inline functions that both the host
 * compiler and nvcc build, for host and device code alike, so the CPU and
 * CUDA kernels share one piece of arithmetic and give the same bits.
 */
#ifndef SHEMB_HD_H
#define SHEMB_HD_H

#ifdef __CUDACC__
#define SHEMB_HD __host__ __device__
#else
#define SHEMB_HD
#endif

#endif
