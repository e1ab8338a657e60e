/*
 * plan.cu - step plans on the device (mem_ops.h's plan_device): the
 * positions sorted by id with CUB's radix sort (stable, so each row's
 * positions stay ascending, as the backward's sums need), the distinct
 * ids and their runs by run-length encoding, and the plan bag of each
 * position.  Also the two checks the backward of such a plan makes on
 * the device: its sets against the plan's, and its gradients finite.
 */
#include <stdint.h>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_run_length_encode.cuh>
#include <cub/device/device_scan.cuh>

#include "shemb.h"
#include "gpu/cuda_int.h"

#define THREADS 256
#define MAX_GRID 4096

__global__ static void iota_kernel(int32_t *v, int64_t n)
{
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
	     i < n; i += (int64_t)gridDim.x * blockDim.x)
		v[i] = (int32_t)i;
}

/* One thread per plan bag of one set: its positions' bag. */
__global__ static void bag_of_kernel(struct shemb__bwd_set s, int32_t *bag_of)
{
	for (int64_t b = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
	     b < s.nbags; b += (int64_t)gridDim.x * blockDim.x) {
		if (s.pooling == SHEMB_POOL_NONE) {
			bag_of[s.pos_base + b] = (int32_t)(s.bag_base + b);
			continue;
		}
		for (int64_t k = s.offsets[b]; k < s.offsets[b + 1]; k++)
			bag_of[s.pos_base + k] = (int32_t)(s.bag_base + b);
	}
}

static unsigned grid_for(int64_t n)
{
	unsigned g = shemb__blocks(n, THREADS);

	return g == 0 ? 1 : g < MAX_GRID ? g : MAX_GRID;
}

static int id_bits(int64_t rows)
{
	int bits = 1;

	while (bits < 63 && (INT64_C(1) << bits) < rows)
		bits++;
	return bits;
}

/* Scratch of one plan: sorted keys, the iota, run lengths, the run
 * count, and CUB's own, at these offsets of c->plan_room (the run count
 * is read through the staging area). */
struct plan_room {
	size_t keys, iota, counts, temp;
	size_t temp_bytes;
};

static size_t room_put(size_t *at, size_t n)
{
	size_t o = *at;

	*at += (n + 255) & ~(size_t)255;
	return o;
}

static void *room_at(struct shemb__cuda *c, size_t off)
{
	return c->plan_room + off;
}

/* Device memory only: the staging area would take as much page-locked
 * host memory beside it, which a plan never uses.  It grows by a quarter
 * again, as the plans' blocks do: each growth frees, and cudaFree waits
 * for the whole device. */
static int reserve_room(struct shemb__cuda *c, size_t bytes)
{
	cudaError_t e;

	if (bytes <= c->plan_room_cap)
		return 0;
	bytes += bytes / 4;
	cudaFree(c->plan_room);
	c->plan_room_cap = 0;
	e = cudaMalloc((void **)&c->plan_room, bytes);
	if (e != cudaSuccess) {
		c->plan_room = NULL;
		return shemb__cuda_fail(c, e, "cudaMalloc of a plan's scratch");
	}
	c->plan_room_cap = bytes;
	return 0;
}

static cudaError_t temp_sizes(const struct shemb__dplan_job *job,
			      size_t *bytes)
{
	int n = (int)job->nids;
	size_t a = 0, b = 0, c = 0;
	cudaError_t e;

	e = cub::DeviceRadixSort::SortPairs(
		NULL, a, (const uint64_t *)NULL, (uint64_t *)NULL,
		(const int32_t *)NULL, (int32_t *)NULL, n, 0,
		id_bits(job->rows));
	if (e == cudaSuccess)
		e = cub::DeviceRunLengthEncode::Encode(
			NULL, b, (const uint64_t *)NULL, (uint64_t *)NULL,
			(int32_t *)NULL, (int32_t *)NULL, n);
	if (e == cudaSuccess)
		e = cub::DeviceScan::ExclusiveSum(NULL, c, (int32_t *)NULL,
						  (int32_t *)NULL,
						  (int64_t)n + 1);
	*bytes = a > b ? (a > c ? a : c) : (b > c ? b : c);
	return e;
}

static int sort_positions(struct shemb__cuda *c,
			  const struct shemb__dplan_job *job,
			  const struct plan_room *r)
{
	int n = (int)job->nids;
	size_t tb = r->temp_bytes;
	int32_t *iota = (int32_t *)room_at(c, r->iota);
	cudaError_t e;

	iota_kernel<<<grid_for(n), THREADS, 0, c->stream>>>(iota, n);
	e = cub::DeviceRadixSort::SortPairs(
		room_at(c, r->temp), tb, (const uint64_t *)job->ids,
		(uint64_t *)room_at(c, r->keys), iota, job->pos, n, 0,
		id_bits(job->rows), c->stream);
	return shemb__cuda_fail(c, e, "sorting the plan's ids");
}

/* The distinct ids, and the start of each one's positions. */
static int find_runs(struct shemb__cuda *c, const struct shemb__dplan_job *job,
		     const struct plan_room *r, int64_t *nunique)
{
	int n = (int)job->nids, runs = 0;
	size_t tb = r->temp_bytes, o_runs;
	int32_t *counts = (int32_t *)room_at(c, r->counts);
	struct shemb__pack b;
	cudaError_t e;
	int rc;

	o_runs = shemb__pack_put(&b, NULL, 8);
	rc = shemb__pack_upload(c, &b);
	if (rc)
		return rc;
	e = cub::DeviceRunLengthEncode::Encode(
		room_at(c, r->temp), tb, (const uint64_t *)room_at(c, r->keys),
		(uint64_t *)job->unique, counts,
		(int32_t *)shemb__dev_at(c, o_runs), n, c->stream);
	rc = shemb__cuda_fail(c, e, "finding the plan's distinct ids");
	if (!rc)
		rc = shemb__pack_download(c, o_runs, sizeof(runs), &runs);
	if (rc)
		return rc;
	*nunique = runs;
	/* a last count of 0 makes the scan end with seg[runs] = n */
	e = cudaMemsetAsync(counts + runs, 0, sizeof(*counts), c->stream);
	tb = r->temp_bytes;
	if (e == cudaSuccess)
		e = cub::DeviceScan::ExclusiveSum(room_at(c, r->temp), tb,
						  counts, job->seg,
						  (int64_t)runs + 1,
						  c->stream);
	return shemb__cuda_fail(c, e, "the plan's runs");
}

static void launch_bags(struct shemb__cuda *c,
			const struct shemb__dplan_job *job)
{
	for (int i = 0; i < job->nsets; i++)
		if (job->sets[i].nbags > 0)
			bag_of_kernel<<<grid_for(job->sets[i].nbags), THREADS,
					0, c->stream>>>(job->sets[i],
							job->bag_of);
}

int shemb__cuda_plan(struct shemb__cuda *c, const struct shemb__dplan_job *job,
		     int64_t *nunique)
{
	shemb__cuda_guard g(c);
	struct plan_room r;
	size_t at = 0;
	int rc;

	*nunique = 0;
	if (job->nids == 0) {
		rc = shemb__cuda_fail(c, cudaMemsetAsync(job->seg, 0,
							 sizeof(int32_t),
							 c->stream),
				      "cudaMemsetAsync");
		return rc ? rc : shemb__cuda_finish(c, "an empty plan");
	}
	rc = shemb__cuda_fail(c, temp_sizes(job, &r.temp_bytes),
			      "sizing the plan's sort");
	if (rc)
		return rc;
	r.keys = room_put(&at, (size_t)job->nids * 8);
	r.iota = room_put(&at, (size_t)job->nids * 4);
	r.counts = room_put(&at, ((size_t)job->nids + 1) * 4);
	r.temp = room_put(&at, r.temp_bytes);
	rc = reserve_room(c, at);
	if (!rc)
		rc = sort_positions(c, job, &r);
	if (!rc)
		rc = find_runs(c, job, &r, nunique);
	if (!rc)
		launch_bags(c, job);
	return rc ? rc : shemb__cuda_finish(c, "the plan's bags");
}

__global__ static void differ_kernel(const uint8_t *a, const uint8_t *b,
				     size_t n, int *differ)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		if (a[i] != b[i])
			*differ = 1;
}

/* One int of the staging area, zeroed on the device: a kernel's flag. */
static int flag_word(struct shemb__cuda *c, size_t *off, int fill)
{
	struct shemb__pack b;
	int rc;

	*off = shemb__pack_put(&b, NULL, 8);
	rc = shemb__pack_upload(c, &b);
	if (rc)
		return rc;
	return shemb__cuda_fail(c, cudaMemsetAsync(shemb__dev_at(c, *off),
						   fill, 8, c->stream),
				"cudaMemsetAsync");
}

int shemb__cuda_differ(struct shemb__cuda *c, const void *a, const void *b,
		       size_t n, int *differ)
{
	shemb__cuda_guard g(c);
	size_t o;
	int rc;

	*differ = 0;
	if (n == 0)
		return 0;
	rc = flag_word(c, &o, 0);
	if (rc)
		return rc;
	differ_kernel<<<grid_for((int64_t)n), THREADS, 0, c->stream>>>(
		(const uint8_t *)a, (const uint8_t *)b, n,
		(int *)shemb__dev_at(c, o));
	rc = shemb__cuda_finish(c, "comparing device arrays");
	return rc ? rc : shemb__pack_download(c, o, sizeof(int), differ);
}

__global__ static void finite_kernel(const float *p, int64_t n,
				     unsigned long long *first)
{
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
	     i < n; i += (int64_t)gridDim.x * blockDim.x)
		if (!isfinite(p[i]))
			atomicMin(first, (unsigned long long)i);
}

int shemb__cuda_finite(struct shemb__cuda *c, const float *p, int64_t n,
		       int64_t *bad)
{
	shemb__cuda_guard g(c);
	unsigned long long first = ~0ull;
	size_t o;
	int rc;

	*bad = -1;
	if (n == 0)
		return 0;
	rc = flag_word(c, &o, 0xff);
	if (rc)
		return rc;
	finite_kernel<<<grid_for(n), THREADS, 0, c->stream>>>(
		p, n, (unsigned long long *)shemb__dev_at(c, o));
	rc = shemb__cuda_finish(c, "checking a gradient");
	if (!rc)
		rc = shemb__pack_download(c, o, sizeof(first), &first);
	if (!rc && first != ~0ull)
		*bad = (int64_t)first;
	return rc;
}
