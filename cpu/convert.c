/*
 * convert.c - bulk dtype conversion of strided blocks.
 */
#include "config.h"

#include <string.h>

#include "shemb.h"
#include "cpu/convert.h"
#include "cpu/kernels.h"

size_t shemb__dtype_size(int dtype)
{
	return dtype == SHEMB_F32 ? 4 : 2;
}

static const void *row_at(struct shemb__block b, int64_t r)
{
	return (const char *)b.ptr + (size_t)r * b.stride;
}

void shemb__convert2d(const struct shemb__kernels *k, struct shemb__block dst,
		      struct shemb__block src, int64_t rows, int cols)
{
	float tmp[SHEMB_MAX_DIM];

	for (int64_t r = 0; r < rows; r++) {
		void *d = (void *)row_at(dst, r);
		const void *s = row_at(src, r);

		if (dst.dtype == src.dtype) {
			memcpy(d, s, shemb__row_bytes(src.dtype, cols));
		} else if (src.dtype == SHEMB_F32) {
			k->store_f32(dst.dtype, d, s, cols);
		} else if (dst.dtype == SHEMB_F32) {
			k->load_f32(src.dtype, s, d, cols);
		} else {
			k->load_f32(src.dtype, s, tmp, cols);
			k->store_f32(dst.dtype, d, tmp, cols);
		}
	}
}
