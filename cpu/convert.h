/*
 * convert.h - bulk dtype conversion of 2-D blocks (rows x cols with row
 * strides) through the chosen kernel variant: F16C / AVX-512 instructions
 * or the portable loops, all exact (round to nearest even, subnormals and
 * signed zeros kept), so every path stores the same bits.
 *
 * oneDNN 2.6's reorders are not used for this: measured here, its bf16 path
 * flushes fp32 subnormals to zero and its fp16 path (a scalar reference
 * implementation) turns -0 into +0, so stored bits would depend on whether
 * a block was large enough to be handed to it.
 */
#ifndef SHEMB_CONVERT_H
#define SHEMB_CONVERT_H

#include <stddef.h>
#include <stdint.h>

struct shemb__kernels;

struct shemb__block {
	void *ptr;
	int dtype;
	size_t stride; /* bytes from one row to the next */
};

/* Convert rows x cols values from src into dst. */
void shemb__convert2d(const struct shemb__kernels *k, struct shemb__block dst,
		      struct shemb__block src, int64_t rows, int cols);

size_t shemb__dtype_size(int dtype);

#endif
