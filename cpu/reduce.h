/*
 * reduce.h - element-wise reductions for allreduce.
 */
#ifndef SHEMB_REDUCE_H
#define SHEMB_REDUCE_H

#include <stddef.h>

/* Bytes of one element of dtype (F32, F64, I64, F16, BF16); 0 if none. */
size_t shemb__reduce_elem_size(int dtype);

/* acc[k] = acc[k] op in[k] for k < n.  16-bit values are combined in fp32
 * and rounded to nearest even. */
void shemb__reduce(int dtype, int op, void *acc, const void *in, size_t n);

/* dst[k] = a[k] op b[k] for k < n, in one pass (dst may equal a). */
void shemb__reduce3(int dtype, int op, void *dst, const void *a,
		    const void *b, size_t n);

#endif
