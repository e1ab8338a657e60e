/*
 * matmul.h - the one operation the dense layers need, a matrix product,
 * behind a small interface with two implementations: oneDNN
 * (matmul_dnnl.c, every oneDNN call of the example) and plain loops
 * (matmul_ref.c, used when configure found no oneDNN).
 *
 * All matrices are row-major floats.  A product computes
 *
 *	C[m][n] = op(A)[m][k] * op(B)[k][n] (+ bias[n] on every row)
 *
 * where op(A) is A, stored m x k, or with MATMUL_TRANS_A the transpose of
 * A, stored k x m; likewise op(B) is B, stored k x n, or with
 * MATMUL_TRANS_B the transpose of B, stored n x k.  m, n or k may be 0:
 * with k = 0, C is the bias (or zeros).  C must not overlap A, B or bias.
 */
#ifndef DLRM_MATMUL_H
#define DLRM_MATMUL_H

enum matmul_flags {
	MATMUL_TRANS_A = 1u << 0,
	MATMUL_TRANS_B = 1u << 1
};

struct matmul;

struct matmul_ops {
	int (*run)(struct matmul *mm, unsigned flags, int m, int n, int k,
		   const float *a, const float *b, const float *bias,
		   float *c);
	void (*destroy)(struct matmul *mm);
};

/* Each implementation's state starts with this. */
struct matmul {
	const struct matmul_ops *ops;
	const char *name;	/* printed by the programs */
};

/* Plain loops; never fails but for memory.  NULL on failure. */
struct matmul *matmul_ref_create(void);

/* oneDNN on the CPU with `threads` threads (0: its default); NULL, with a
 * message on stderr, when oneDNN cannot start. */
struct matmul *matmul_dnnl_create(int threads);

/* The implementation of this build (HAVE_DNNL comes from config.h, which
 * the including file reads first). */
static inline struct matmul *matmul_create(int threads)
{
#ifdef HAVE_DNNL
	return matmul_dnnl_create(threads);
#else
	(void)threads;
	return matmul_ref_create();
#endif
}

/* C = op(A) op(B) (+ bias); 0, or -1 when the implementation failed. */
static inline int matmul(struct matmul *mm, unsigned flags, int m, int n,
			 int k, const float *a, const float *b,
			 const float *bias, float *c)
{
	return mm->ops->run(mm, flags, m, n, k, a, b, bias, c);
}

static inline const char *matmul_name(const struct matmul *mm)
{
	return mm->name;
}

/* NULL is a no-op. */
static inline void matmul_destroy(struct matmul *mm)
{
	if (mm)
		mm->ops->destroy(mm);
}

#endif /* DLRM_MATMUL_H */
