/*
 * reduce.c - sums and maxima of fp32, fp64, int64, fp16 and bf16 buffers.
 */
#include "config.h"

#include <stdint.h>

#include "shemb.h"
#include "cpu/half.h"
#include "cpu/reduce.h"

size_t shemb__reduce_elem_size(int dtype)
{
	switch (dtype) {
	case SHEMB_F32:
		return 4;
	case SHEMB_F64:
	case SHEMB_I64:
		return 8;
	case SHEMB_F16:
	case SHEMB_BF16:
		return 2;
	default:
		return 0;
	}
}

#define REDUCE_LOOP(T, acc, in, n, op)                                       \
	do {                                                                 \
		T *restrict a_ = (acc);                                      \
		const T *restrict b_ = (in);                                 \
		if ((op) == SHEMB_REDUCE_MAX)                                \
			for (size_t k = 0; k < (n); k++)                     \
				a_[k] = b_[k] > a_[k] ? b_[k] : a_[k];       \
		else                                                         \
			for (size_t k = 0; k < (n); k++)                     \
				a_[k] += b_[k];                              \
	} while (0)

#define REDUCE3_LOOP(T, dst, a, b, n, op)                                    \
	do {                                                                 \
		T *d_ = (dst);                                               \
		const T *x_ = (a), *y_ = (b);                                \
		if ((op) == SHEMB_REDUCE_MAX)                                \
			for (size_t k = 0; k < (n); k++)                     \
				d_[k] = y_[k] > x_[k] ? y_[k] : x_[k];       \
		else                                                         \
			for (size_t k = 0; k < (n); k++)                     \
				d_[k] = x_[k] + y_[k];                       \
	} while (0)

static float half_value(int dtype, uint16_t h)
{
	return dtype == SHEMB_F16 ? shemb__f16_to_f32(h)
				  : shemb__bf16_to_f32(h);
}

static uint16_t half_bits(int dtype, float v)
{
	return dtype == SHEMB_F16 ? shemb__f32_to_f16(v)
				  : shemb__f32_to_bf16(v);
}

static void reduce_half(int dtype, int op, uint16_t *dst, const uint16_t *x,
			const uint16_t *y, size_t n)
{
	for (size_t k = 0; k < n; k++) {
		float a = half_value(dtype, x[k]);
		float b = half_value(dtype, y[k]);

		dst[k] = half_bits(dtype, op == SHEMB_REDUCE_MAX ? (b > a ? b : a)
								 : a + b);
	}
}

void shemb__reduce(int dtype, int op, void *acc, const void *in, size_t n)
{
	switch (dtype) {
	case SHEMB_F32:
		REDUCE_LOOP(float, acc, in, n, op);
		break;
	case SHEMB_F64:
		REDUCE_LOOP(double, acc, in, n, op);
		break;
	case SHEMB_I64:
		/* wrapping sum: unsigned arithmetic has no overflow */
		if (op == SHEMB_REDUCE_MAX)
			REDUCE_LOOP(int64_t, acc, in, n, op);
		else
			REDUCE_LOOP(uint64_t, acc, in, n, op);
		break;
	default:
		reduce_half(dtype, op, acc, acc, in, n);
		break;
	}
}

void shemb__reduce3(int dtype, int op, void *dst, const void *a,
		    const void *b, size_t n)
{
	switch (dtype) {
	case SHEMB_F32:
		REDUCE3_LOOP(float, dst, a, b, n, op);
		break;
	case SHEMB_F64:
		REDUCE3_LOOP(double, dst, a, b, n, op);
		break;
	case SHEMB_I64:
		if (op == SHEMB_REDUCE_MAX)
			REDUCE3_LOOP(int64_t, dst, a, b, n, op);
		else
			REDUCE3_LOOP(uint64_t, dst, a, b, n, op);
		break;
	default:
		reduce_half(dtype, op, dst, a, b, n);
		break;
	}
}
