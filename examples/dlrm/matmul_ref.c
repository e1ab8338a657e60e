/*
 * matmul_ref.c - the matrix product of matmul.h in plain C loops, for
 * builds without oneDNN.  One thread; the loop order keeps the innermost
 * loop on contiguous memory so that the compiler can vectorise it.
 */
#include <stdlib.h>
#include <string.h>

#include "examples/dlrm/matmul.h"

/* C row i starts as the bias, or zeros. */
static void init_rows(int m, int n, const float *bias, float *c)
{
	for (int i = 0; i < m; i++) {
		float *ci = c + (size_t)i * n;

		if (bias)
			memcpy(ci, bias, (size_t)n * sizeof(*ci));
		else
			memset(ci, 0, (size_t)n * sizeof(*ci));
	}
}

/* op(B) = B stored k x n: add a(i,p) times row p of B to row i of C. */
static void rows_times_b(unsigned flags, int m, int n, int k,
			 const float *a, const float *b, float *c)
{
	for (int i = 0; i < m; i++) {
		float *ci = c + (size_t)i * n;

		for (int p = 0; p < k; p++) {
			float aip = flags & MATMUL_TRANS_A ?
				    a[(size_t)p * m + i] : a[(size_t)i * k + p];
			const float *bp = b + (size_t)p * n;

			for (int j = 0; j < n; j++)
				ci[j] += aip * bp[j];
		}
	}
}

/* op(B) = B^T, B stored n x k: C(i,j) is the dot product of row i of
 * op(A) and row j of B. */
static void rows_dot_bt(unsigned flags, int m, int n, int k, const float *a,
			const float *b, float *c)
{
	for (int i = 0; i < m; i++) {
		float *ci = c + (size_t)i * n;

		for (int j = 0; j < n; j++) {
			const float *bj = b + (size_t)j * k;
			float s = 0;

			if (flags & MATMUL_TRANS_A)
				for (int p = 0; p < k; p++)
					s += a[(size_t)p * m + i] * bj[p];
			else
				for (int p = 0; p < k; p++)
					s += a[(size_t)i * k + p] * bj[p];
			ci[j] += s;
		}
	}
}

static int ref_run(struct matmul *mm, unsigned flags, int m, int n, int k,
		   const float *a, const float *b, const float *bias, float *c)
{
	(void)mm;
	if (m < 0 || n < 0 || k < 0)
		return -1;
	init_rows(m, n, bias, c);
	if (flags & MATMUL_TRANS_B)
		rows_dot_bt(flags, m, n, k, a, b, c);
	else
		rows_times_b(flags, m, n, k, a, b, c);
	return 0;
}

static void ref_destroy(struct matmul *mm)
{
	free(mm);
}

static const struct matmul_ops ref_ops = {
	.run = ref_run,
	.destroy = ref_destroy,
};

struct matmul *matmul_ref_create(void)
{
	struct matmul *mm = malloc(sizeof(*mm));

	if (mm)
		*mm = (struct matmul){ &ref_ops, "plain loops" };
	return mm;
}
