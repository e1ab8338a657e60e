/*
 * pool.cu - gather-pool on the device: one warp per bag (per id for
 * POOL_NONE), or several for rows wider than a warp's pass, each lane a
 * few columns, rows read with vector loads when the row layout allows.
 * The arithmetic is the CPU kernels' (sum in bag order, ties of MAX to
 * the first position, MEAN divided at the end), without fused
 * multiply-adds, so both backends give the same bits.
 */
#include <stdint.h>

#include "shemb.h"
#include "cpu/half.h"
#include "gpu/cuda_int.h"

#define WARPS_PER_BLOCK 8

struct pool_args {
	const char *base;
	size_t stride;
	int dim;
	int pooling;
	int64_t nbags;          /* bags, or ids for POOL_NONE */
	const int64_t *offsets;
	const int64_t *ids;
	const float *weights;
	float *out;
	int32_t *argmax;
	int64_t pos_base;
};

__device__ static inline float load1(const uint16_t *r, int c, int dtype)
{
	return dtype == SHEMB_F16 ? shemb__f16_to_f32(r[c])
				  : shemb__bf16_to_f32(r[c]);
}

/* V columns from c of row r as fp32. */
template <typename T, int V>
__device__ static inline void load_cols(const char *r, int c, int dtype,
					float *v)
{
	if (sizeof(T) == 4) {
		if (V == 4) {
			float4 q = *(const float4 *)((const float *)r + c);

			v[0] = q.x;
			v[1] = q.y;
			v[2] = q.z;
			v[3] = q.w;
		} else {
			v[0] = ((const float *)r)[c];
		}
		return;
	}
	if (V == 4) {
		uint2 q = *(const uint2 *)((const uint16_t *)r + c);
		uint16_t h[4] = { (uint16_t)(q.x & 0xffff),
				  (uint16_t)(q.x >> 16),
				  (uint16_t)(q.y & 0xffff),
				  (uint16_t)(q.y >> 16) };

		for (int k = 0; k < 4; k++)
			v[k] = load1(h, k, dtype);
	} else {
		v[0] = load1((const uint16_t *)r, c, dtype);
	}
}

template <typename T, int V>
__device__ static void pool_cols(const pool_args &a, int dtype, int64_t beg,
				 int64_t end, float *o, int32_t *am, int c)
{
	const bool is_max = a.pooling == SHEMB_POOL_MAX;
	float acc[V], v[V];
	int32_t arg[V];

	for (int k = 0; k < V; k++) {
		acc[k] = 0.0f;
		arg[k] = -1;
	}
	for (int64_t i = beg; i < end; i++) {
		const char *r = a.base + (size_t)a.ids[i] * a.stride;
		float w = a.weights ? a.weights[i] : 1.0f;
		int32_t pos = (int32_t)(a.pos_base + i);

		load_cols<T, V>(r, c, dtype, v);
		for (int k = 0; k < V; k++) {
			float x = a.weights || is_max ? __fmul_rn(w, v[k])
						      : v[k];

			if (!is_max) {
				acc[k] = __fadd_rn(acc[k], x);
			} else if (i == beg || x > acc[k]) {
				acc[k] = x;
				arg[k] = pos;
			}
		}
	}
	for (int k = 0; k < V; k++) {
		float x = acc[k];

		if (end == beg)
			x = 0.0f;
		else if (a.pooling == SHEMB_POOL_MEAN)
			x = __fdiv_rn(x, (float)(end - beg));
		o[c + k] = x;
		if (am)
			am[c + k] = arg[k];
	}
}

/* POOL_NONE: out row i is weight * row, nothing added to it. */
template <typename T, int V>
__device__ static void copy_cols(const pool_args &a, int dtype, int64_t i,
				 float *o, int c)
{
	const char *r = a.base + (size_t)a.ids[i] * a.stride;
	float w = a.weights ? a.weights[i] : 1.0f;
	float v[V];

	load_cols<T, V>(r, c, dtype, v);
	for (int k = 0; k < V; k++)
		o[c + k] = __fmul_rn(w, v[k]);
}

/* Warps share a bag when its row is wider than one warp's pass (32
 * lanes of V columns), up to a block's worth, so a wide row is read by
 * as many warps as it has passes: warp w of a bag takes the passes
 * w, w + wpb, ... */
template <typename T, int V>
__global__ static void pool_kernel(pool_args a, int dtype, int wpb)
{
	int64_t warp = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
	int64_t b = warp / wpb;
	int lane = threadIdx.x % 32, first = (int)(warp % wpb) * 32 * V;
	float *o;

	if (b >= a.nbags)
		return;
	o = a.out + (size_t)b * (size_t)a.dim;
	if (a.pooling == SHEMB_POOL_NONE) {
		for (int c = first + lane * V; c < a.dim; c += wpb * 32 * V)
			copy_cols<T, V>(a, dtype, b, o, c);
		return;
	}
	for (int c = first + lane * V; c < a.dim; c += wpb * 32 * V)
		pool_cols<T, V>(a, dtype, a.offsets[b], a.offsets[b + 1], o,
				a.argmax ? a.argmax + (size_t)b * (size_t)a.dim
					 : NULL,
				c);
}

template <typename T>
static void launch_typed(const pool_args &a, int dtype, cudaStream_t s)
{
	const bool vec = a.dim % 4 == 0 && a.stride % (4 * sizeof(T)) == 0;
	const int pass = 32 * (vec ? 4 : 1);
	const unsigned threads = 32 * WARPS_PER_BLOCK;
	int wpb = (a.dim + pass - 1) / pass;
	unsigned grid;

	wpb = wpb < WARPS_PER_BLOCK ? wpb : WARPS_PER_BLOCK;
	while (WARPS_PER_BLOCK % wpb)
		wpb--; /* a bag's warps stay in one block */
	grid = shemb__blocks(a.nbags * wpb, WARPS_PER_BLOCK);
	if (vec)
		pool_kernel<T, 4><<<grid, threads, 0, s>>>(a, dtype, wpb);
	else
		pool_kernel<T, 1><<<grid, threads, 0, s>>>(a, dtype, wpb);
}

static void launch(const pool_args &a, int dtype, cudaStream_t s)
{
	if (dtype == SHEMB_F32)
		launch_typed<float>(a, dtype, s);
	else
		launch_typed<uint16_t>(a, dtype, s);
}

/* atomicMin of the first bad index of each kind: CSR offsets, ids out
 * of range, non-finite weights. */
__global__ static void check_kernel(const int64_t *offsets, int64_t nbags,
				    const int64_t *ids, int64_t nids,
				    const float *weights, int64_t rows,
				    unsigned long long *bad)
{
	int64_t n = nbags + 1 > nids ? nbags + 1 : nids;

	for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
	     i < n; i += (int64_t)gridDim.x * blockDim.x) {
		if (i <= nbags) {
			int64_t o = offsets[i];
			bool ok = i == 0 ? o == 0 : o >= offsets[i - 1];

			if (!ok || (i == nbags ? o != nids : o > nids))
				atomicMin(&bad[0], (unsigned long long)i);
		}
		if (i < nids) {
			if (ids[i] < 0 || ids[i] >= rows)
				atomicMin(&bad[1], (unsigned long long)i);
			if (weights && !isfinite(weights[i]))
				atomicMin(&bad[2], (unsigned long long)i);
		}
	}
}

int shemb__cuda_check(struct shemb__cuda *c, const struct shemb__pool_job *job,
		      int64_t rows, int64_t bad[3])
{
	shemb__cuda_guard g(c);
	struct shemb__pack b;
	unsigned long long got[3];
	size_t o = shemb__pack_put(&b, NULL, sizeof(got));
	unsigned long long *d;
	int64_t n = job->nbags + 1 > job->nids ? job->nbags + 1 : job->nids;
	unsigned grid = shemb__blocks(n, 256);
	int rc;

	bad[0] = bad[1] = bad[2] = -1;
	if (!job->offsets) { /* no bags: only an empty set is right */
		bad[0] = job->nids ? 0 : -1;
		return 0;
	}
	rc = shemb__pack_upload(c, &b);
	if (rc)
		return rc;
	d = (unsigned long long *)shemb__dev_at(c, o);
	rc = shemb__cuda_fail(c, cudaMemsetAsync(d, 0xff, sizeof(got),
						 c->stream),
			      "cudaMemsetAsync");
	if (rc)
		return rc;
	check_kernel<<<grid < 4096 ? grid : 4096, 256, 0, c->stream>>>(
		job->offsets, job->nbags, job->ids, job->nids, job->weights,
		rows, d);
	rc = shemb__cuda_finish(c, "input check kernel");
	if (!rc)
		rc = shemb__pack_download(c, o, sizeof(got), got);
	for (int k = 0; k < 3; k++)
		bad[k] = got[k] == ~0ull ? -1 : (int64_t)got[k];
	return rc;
}

int shemb__cuda_pool(struct shemb__cuda *c, const struct shemb__pool_job *job)
{
	shemb__cuda_guard g(c);
	const struct shemb__store *s = job->store;
	const bool none = job->pooling == SHEMB_POOL_NONE;
	const int64_t nrows = none ? job->nids : job->nbags;
	const size_t out_bytes = (size_t)nrows * (size_t)s->dim * sizeof(float);
	const size_t am_bytes = job->argmax ? (size_t)job->nbags *
						      (size_t)s->dim * 4
					    : 0;
	const bool dev_out = job->out_mem == SHEMB_MEM_DEVICE;
	const bool dev_in = job->in_mem == SHEMB_MEM_DEVICE;
	struct shemb__pack b;
	size_t o_off, o_ids, o_w = 0, o_out = 0, o_am = 0;
	pool_args a = {};
	int rc;

	if (nrows == 0)
		return 0;
	o_off = none || dev_in ? 0
			       : shemb__pack_put(&b, job->offsets,
						 ((size_t)job->nbags + 1) * 8);
	o_ids = dev_in ? 0
		       : shemb__pack_put(&b, job->ids, (size_t)job->nids * 8);
	if (job->weights && !dev_in)
		o_w = shemb__pack_put(&b, job->weights, (size_t)job->nids * 4);
	if (!dev_out)
		o_out = shemb__pack_put(&b, NULL, out_bytes);
	if (am_bytes && !dev_in)
		o_am = shemb__pack_put(&b, NULL, am_bytes);
	rc = shemb__pack_upload(c, &b);
	if (rc)
		return rc;
	a.base = (const char *)s->base;
	a.stride = s->stride;
	a.dim = s->dim;
	a.pooling = job->pooling;
	a.nbags = nrows;
	if (dev_in) {
		a.offsets = job->offsets;
		a.ids = job->ids;
		a.weights = job->weights;
	} else {
		a.offsets = none ? NULL
				 : (const int64_t *)shemb__dev_at(c, o_off);
		a.ids = (const int64_t *)shemb__dev_at(c, o_ids);
		a.weights = job->weights ? (const float *)shemb__dev_at(c, o_w)
					 : NULL;
	}
	a.out = dev_out ? job->out : (float *)shemb__dev_at(c, o_out);
	if (dev_in) /* a device plan's */
		a.argmax = job->argmax;
	else
		a.argmax = am_bytes ? (int32_t *)shemb__dev_at(c, o_am) : NULL;
	a.pos_base = job->pos_base;
	launch(a, s->dtype, c->stream);
	rc = shemb__cuda_finish(c, "gather-pool kernel");
	if (!rc && !dev_out)
		rc = shemb__pack_download(c, o_out, out_bytes, job->out);
	if (!rc && am_bytes && !dev_in)
		rc = shemb__pack_download(c, o_am, am_bytes, job->argmax);
	return rc;
}
