/*
 * convert.h - bulk dtype conversion of 2-D blocks (rows x cols with row
 * strides), through oneDNN reorders when the build has oneDNN, else
 * through the kernels' portable loops.  Same bits either way.
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

/* Convert rows x cols values from src into dst.  Cannot fail: a oneDNN
 * error falls back to the portable path.  Returns 0. */
int shemb__convert2d(const struct shemb__kernels *k, struct shemb__block dst,
		     struct shemb__block src, int64_t rows, int cols);

/* The portable path alone (also used when oneDNN is absent). */
void shemb__convert2d_portable(const struct shemb__kernels *k,
			       struct shemb__block dst,
			       struct shemb__block src, int64_t rows, int cols);

/* The oneDNN path alone; SHEMB_ENOTSUP in a build without oneDNN. */
int shemb__convert2d_dnnl(struct shemb__block dst, struct shemb__block src,
			  int64_t rows, int cols);

size_t shemb__dtype_size(int dtype);

#endif
