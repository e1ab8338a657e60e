/*
 * mem_ops.h - the memory-and-kernels seam between the core and a backend.
 *
 * A backend (cpu/ now, gpu/ later) owns a table's row store and runs the
 * kernels over it.  The core prepares validated, planned jobs and calls
 * these operations; it never touches rows itself.  The table starts with
 * `size` so it can grow, as libfabric's fi_ops tables do.
 */
#ifndef SHEMB_MEM_OPS_H
#define SHEMB_MEM_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "shemb.h"

struct shemb__shard;

#define SHEMB__MEM_OTHER_DEVICE 2 /* beside enum shemb_mem's values */

/*
 * A table's rows on one backend.  Record r starts at base + r * stride and
 * holds dim values of dtype, then (at state_off) nstate floats of optimizer
 * state, so a row and its state move together.
 */
/* Bytes of a row of dim values stored as dtype: SHEMB_INT8 rows are dim
 * codes, padded to 4 bytes, then the row's scale and bias (fp32). */
static inline size_t shemb__row_bytes(int dtype, int dim)
{
	if (dtype == SHEMB_INT8)
		return (((size_t)dim + 3) & ~(size_t)3) + 8;
	return (size_t)dim * (dtype == SHEMB_F32 ? 4 : 2);
}

struct shemb__store {
	void *base;
	int on_device;       /* base is device memory (else host) */
	size_t stride;
	size_t bytes;
	size_t state_off;
	int64_t rows;
	int dim;
	int dtype;
	int nstate;
};

/* How initial values are made: see lib/rowinit.c. */
struct shemb__init_spec {
	int kind;
	float a, b;          /* uniform: [a, b); normal: mean a, std b;
			      * constant: a */
	uint64_t seed;
	int64_t table_id;
	float state_init;    /* initial value of every state float */
	const struct shemb__shard *shard; /* local rows and columns -> ids */
	int64_t row_base;    /* the store's record 0 is this local row */
};

/* Pool one bag set straight from its ids (lookup). */
struct shemb__pool_job {
	const struct shemb__store *store;
	int pooling;
	int64_t nbags;
	int64_t nids;
	const int64_t *offsets;
	const int64_t *ids;
	const float *weights;
	float *out;
	int out_mem;         /* enum shemb_mem: where out is */
	int in_mem;          /* ... and offsets, ids and weights */
	int32_t *argmax;     /* MAX with a plan: [nbags][dim] positions
			      * (device memory when in_mem is) */
	int64_t pos_base;    /* plan position of ids[0] */
};

struct shemb__opt {
	int kind;
	int wd_mode;
	float lr, eps, beta1, beta2, weight_decay;
	float bc1, bc2;      /* Adam bias corrections 1 - beta^step */
	int full_dim;        /* row-wise Adagrad over a column slice: the
			      * whole row's width (0: the store's) */
};

/* One bag set as seen by the backward kernel. */
struct shemb__bwd_set {
	int pooling;
	int64_t bag_base;    /* plan bag index of this set's bag 0 */
	int64_t pos_base;    /* plan position of this set's id 0 */
	int64_t nbags;       /* plan bags: POOL_NONE counts one per id */
	const int64_t *offsets;
	const float *weights;
	const float *grad;
	const int32_t *argmax;
};

/* Coalesce and apply: one fused update per distinct row of the plan. */
struct shemb__update_job {
	struct shemb__store *store;
	int64_t nunique;
	const int64_t *unique;   /* distinct ids, ascending */
	const int32_t *seg;      /* nunique + 1 */
	const int32_t *pos;      /* plan positions grouped by id */
	const int32_t *bag_of;   /* plan bag of each position */
	int nsets;
	const struct shemb__bwd_set *sets;
	struct shemb__opt opt;
	/* row-wise Adagrad over a column slice: each distinct row's sum of
	 * squared gradients over the whole row (NULL: from the store's
	 * columns) */
	const float *rowsum;
	/* SHEMB_MEM_DEVICE: a device plan's job, every array above and the
	 * sets' arrays in device memory (rowsum NULL) */
	int in_mem;
};

/*
 * The step plan of bag sets in device memory, made on the device: the
 * positions' ids sorted (stable, so a row's positions stay ascending),
 * the distinct ids with the start of each one's positions, and the plan
 * bag of each position (plan.h has the host plan's same arrays).
 */
struct shemb__dplan_job {
	int64_t nids;             /* positions, all sets together */
	int64_t rows;             /* every id is in [0, rows) */
	const int64_t *ids;       /* [nids]: the sets' ids in plan order */
	int nsets;
	const struct shemb__bwd_set *sets; /* pooling, bag_base, pos_base,
					    * nbags and offsets (device) */
	int64_t *unique;          /* out, room for nids */
	int32_t *seg;             /* out, room for nids + 1 */
	int32_t *pos;             /* out, [nids] */
	int32_t *bag_of;          /* out, [nids] */
};

struct shemb_mem_ops {
	size_t size;
	const char *name;
	int (*store_alloc)(void *be, struct shemb__store *s);
	void (*store_free)(void *be, struct shemb__store *s);
	int (*init_rows)(void *be, struct shemb__store *s,
			 const struct shemb__init_spec *init);
	int (*gather_pool)(void *be, const struct shemb__pool_job *job);
	int (*apply_updates)(void *be, const struct shemb__update_job *job);
	/* the gradient rows of job's distinct rows, without applying them:
	 * one per row, or with expand one per position (job->pos order);
	 * only job->store->dim is read of the store */
	int (*coalesce)(void *be, const struct shemb__update_job *job,
			float *out, int expand);
	/* the squares of the gradient each distinct row's update would use
	 * (coalesced, L2 weight decay added), per column ([nunique][dim]) or
	 * summed over the store's columns ([nunique]) */
	int (*grad_squares)(void *be, const struct shemb__update_job *job,
			    float *out, int per_column);
	int (*read_rows)(void *be, const struct shemb__store *s, int64_t n,
			 const int64_t *ids, void *out, int dtype);
	int (*write_rows)(void *be, struct shemb__store *s, int64_t n,
			  const int64_t *ids, const void *in, int dtype,
			  const float *reset_state);
	/* whole records (row and state): dst's record dst_at[i] becomes
	 * src's record src_at[i], i < n (NULL: i); the tiers' moves */
	int (*copy_records)(void *be, struct shemb__store *dst,
			    const int64_t *dst_at,
			    const struct shemb__store *src,
			    const int64_t *src_at, int64_t n);
	/* rows x cols values from a strided block of one dtype to another
	 * (exact: round to nearest even) */
	int (*convert)(void *be, void *dst, int dst_dtype, size_t dst_stride,
		       const void *src, int src_dtype, size_t src_stride,
		       int64_t rows, int cols);
	/* staging memory for plans and scratch, from the backend's arena */
	void *(*scratch_alloc)(void *be, size_t bytes);
	void (*scratch_free)(void *be, void *p, size_t bytes);
	int (*synchronize)(void *be);
	const char *(*describe)(void *be);
	/* bytes from src to dst, either or both of them device memory;
	 * NULL for a backend without device memory */
	int (*transfer)(void *be, void *dst, const void *src, size_t bytes);
	/* enum shemb_mem: where p is, or SHEMB__MEM_OTHER_DEVICE for
	 * memory of a device not the backend's (NULL: always host) */
	int (*mem_of)(void *be, const void *p);
	/* the checks of shemb_lookup's input for a job whose offsets, ids
	 * and weights are device memory: bad[0] the first offsets index
	 * that breaks the CSR form, bad[1] the first position of an id
	 * outside [0, rows), bad[2] the first non-finite weight; -1 where
	 * there is none.  NULL without device memory. */
	int (*check_bags)(void *be, const struct shemb__pool_job *job,
			  int64_t rows, int64_t bad[3]);
	/* host memory the backend's device copies to and from fastest
	 * (page-locked), for host copies of device buffers, or NULL when it
	 * has none of that size to give; NULL for a backend without device
	 * memory (lib/hostbuf.h falls back on malloc either way) */
	void *(*host_alloc)(void *be, size_t bytes);
	void (*host_free)(void *be, void *p, size_t bytes);
	/* Step plans kept in device memory (NULL, all of them, without):
	 * memory of the device, NULL when there is none to give ... */
	void *(*device_alloc)(void *be, size_t bytes);
	void (*device_free)(void *be, void *p);
	/* ... the plan of job, and its number of distinct ids ... */
	int (*plan_device)(void *be, const struct shemb__dplan_job *job,
			   int64_t *nunique);
	/* ... whether the n bytes at a and b differ (*differ 1 or 0) ... */
	int (*device_differ)(void *be, const void *a, const void *b,
			     size_t n, int *differ);
	/* ... and the first of the n floats at p that is not finite, or
	 * -1, into *bad.  All pointers are device memory. */
	int (*device_finite)(void *be, const float *p, int64_t n,
			     int64_t *bad);
};

#endif
