/*
 * cuda.h - the device side of the GPU backend, as C functions: the .cu
 * files implement them with the CUDA runtime, gpu/backend.c builds struct
 * shemb_mem_ops on them.  Every call runs on the context's stream and
 * returns when its work is done (it synchronizes that stream; only the
 * frees of memory, when buffers grow or go, wait for the whole device, as
 * cudaFree and cudaFreeHost do).  Job arrays are host memory unless a job says otherwise.
 * Errors: SHEMB_ENOMEM or SHEMB_EINTERNAL, with the CUDA message in
 * shemb__cuda_describe().
 */
#ifndef SHEMB_GPU_CUDA_H
#define SHEMB_GPU_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "lib/mem_ops.h"

#ifdef __cplusplus
extern "C" {
#endif

struct shemb__cuda;

/* stream: the caller's cudaStream_t, or NULL for one of our own. */
int shemb__cuda_open(int dev, void *stream, struct shemb__cuda **out,
		     char *why, size_t len);
void shemb__cuda_close(struct shemb__cuda *c);
/* the device, and the last CUDA error if any */
const char *shemb__cuda_describe(struct shemb__cuda *c);

int shemb__cuda_alloc(struct shemb__cuda *c, size_t bytes, void **p);
void shemb__cuda_free(struct shemb__cuda *c, void *p);
/* page-locked host memory, for any device (pinned.c keeps it) */
int shemb__cuda_host_alloc(struct shemb__cuda *c, size_t bytes, void **p);
void shemb__cuda_host_free(struct shemb__cuda *c, void *p);
/* n bytes between any two of host and device memory */
int shemb__cuda_copy(struct shemb__cuda *c, void *dst, const void *src,
		     size_t n);
int shemb__cuda_sync(struct shemb__cuda *c);
/* 1 when p is memory of the context's device (or managed), 2 of another
 * device, 0 host memory */
int shemb__cuda_is_device(struct shemb__cuda *c, const void *p);
/* the device's UUID; -1 when unknown */
int shemb__cuda_uuid(struct shemb__cuda *c, unsigned char uuid[16]);

/* the checks of mem_ops.h's check_bags on a job's device arrays */
int shemb__cuda_check(struct shemb__cuda *c, const struct shemb__pool_job *job,
		      int64_t rows, int64_t bad[3]);
/* gather-pool from a device store (job->out in job->out_mem, its other
 * arrays in job->in_mem) */
int shemb__cuda_pool(struct shemb__cuda *c, const struct shemb__pool_job *job);
/* squares NULL: apply job to its device store; else the squared
 * gradients the update would use, into host squares (mem_ops.h).  The
 * job's arrays are host memory unless its in_mem says device. */
int shemb__cuda_update(struct shemb__cuda *c,
		       const struct shemb__update_job *job, float *squares,
		       int per_column);

/* plan.cu: mem_ops.h's plan_device, device_differ and device_finite */
int shemb__cuda_plan(struct shemb__cuda *c, const struct shemb__dplan_job *job,
		     int64_t *nunique);
int shemb__cuda_differ(struct shemb__cuda *c, const void *a, const void *b,
		       size_t n, int *differ);
int shemb__cuda_finite(struct shemb__cuda *c, const float *p, int64_t n,
		       int64_t *bad);

/* whole records of device store s at at[i] (NULL: i) to / from n
 * contiguous records of s->stride bytes in host memory */
int shemb__cuda_records_out(struct shemb__cuda *c,
			    const struct shemb__store *s, const int64_t *at,
			    int64_t n, void *host);
int shemb__cuda_records_in(struct shemb__cuda *c, struct shemb__store *s,
			   const int64_t *at, int64_t n, const void *host);
/* device store to device store, as copy_records */
int shemb__cuda_records_dd(struct shemb__cuda *c, struct shemb__store *dst,
			   const int64_t *dst_at,
			   const struct shemb__store *src,
			   const int64_t *src_at, int64_t n);
/* the row part (dim values of s->dtype) of records at ids[i], packed,
 * to host; and back, with each record's state set to reset_state
 * (nstate floats) unless NULL.  ids of rows_in are distinct. */
int shemb__cuda_rows_out(struct shemb__cuda *c, const struct shemb__store *s,
			 int64_t n, const int64_t *ids, void *host);
int shemb__cuda_rows_in(struct shemb__cuda *c, struct shemb__store *s,
			int64_t n, const int64_t *ids, const void *host,
			const float *reset_state);

/* NCCL (nccl.cu, in a module built with it): see gpu.h */
struct shemb_comm_ops;
extern const struct shemb_comm_ops shemb__nccl_ops;
int shemb__nccl_unique_id(void *id, size_t len, char *why, size_t wlen);
int shemb__nccl_open(struct shemb__cuda *c, int nranks, int rank,
		     const void *id, int timeout_ms, void **comm, char *why,
		     size_t len);

#ifdef __cplusplus
}
#endif

#endif
