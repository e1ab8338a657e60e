/*
 * records.cu - moving whole records (row and optimizer state) and row
 * values between a device store and host memory: the tiers' loads and
 * write-backs, and row reads and writes.  Host data goes through the
 * context's page-locked staging area in one transfer each way; a kernel
 * gathers or scatters the records on the device, a block per record.
 */
#include <stdint.h>
#include <string.h>

#include "shemb.h"
#include "gpu/cuda_int.h"

#define THREADS 128

/* Copy n bytes, by 4-byte words when both ends and n allow it. */
__device__ static void copy_bytes(char *dst, const char *src, size_t n)
{
	if (n % 4 == 0 && (uintptr_t)dst % 4 == 0 && (uintptr_t)src % 4 == 0) {
		for (size_t i = threadIdx.x; i < n / 4; i += blockDim.x)
			((uint32_t *)dst)[i] = ((const uint32_t *)src)[i];
		return;
	}
	for (size_t i = threadIdx.x; i < n; i += blockDim.x)
		dst[i] = src[i];
}

/* Record i: n bytes from src + src_at[i] * ss to dst + dst_at[i] * ds
 * (a NULL map means i). */
__global__ static void move_kernel(char *dst, size_t ds, const int64_t *dst_at,
				   const char *src, size_t ss,
				   const int64_t *src_at, size_t n)
{
	int64_t i = blockIdx.x;
	int64_t d = dst_at ? dst_at[i] : i, s = src_at ? src_at[i] : i;

	copy_bytes(dst + (size_t)d * ds, src + (size_t)s * ss, n);
}

/* Record ids[i]'s state: nstate floats of reset. */
__global__ static void reset_kernel(char *base, size_t stride, size_t off,
				    const int64_t *ids, const float *reset,
				    int nstate)
{
	float *st = (float *)(base + (size_t)ids[blockIdx.x] * stride + off);

	for (int k = threadIdx.x; k < nstate; k += blockDim.x)
		st[k] = reset[k];
}

static size_t row_bytes(const struct shemb__store *s)
{
	return (size_t)s->dim * (s->dtype == SHEMB_F32 ? 4 : 2);
}

/* n records of `bytes` each between the store and packed host memory;
 * out: store to host. */
static int move_host(struct shemb__cuda *c, const struct shemb__store *s,
		     const int64_t *at, int64_t n, void *host, size_t bytes,
		     bool out, const float *reset)
{
	struct shemb__pack b;
	size_t o_at = 0, o_data, o_reset = 0;
	size_t total = (size_t)n * bytes;
	char *d;
	int rc;

	if (n == 0)
		return 0;
	if (at)
		o_at = shemb__pack_put(&b, at, (size_t)n * 8);
	if (reset)
		o_reset = shemb__pack_put(&b, reset, (size_t)s->nstate * 4);
	o_data = shemb__pack_put(&b, out ? NULL : host, total);
	rc = shemb__pack_upload(c, &b);
	if (rc)
		return rc;
	d = (char *)shemb__dev_at(c, o_data);
	if (out)
		move_kernel<<<(unsigned)n, THREADS, 0, c->stream>>>(
			d, bytes, NULL, (const char *)s->base, s->stride,
			at ? (const int64_t *)shemb__dev_at(c, o_at) : NULL,
			bytes);
	else
		move_kernel<<<(unsigned)n, THREADS, 0, c->stream>>>(
			(char *)s->base, s->stride,
			at ? (const int64_t *)shemb__dev_at(c, o_at) : NULL, d,
			bytes, NULL, bytes);
	if (reset)
		reset_kernel<<<(unsigned)n, THREADS, 0, c->stream>>>(
			(char *)s->base, s->stride, s->state_off,
			(const int64_t *)shemb__dev_at(c, o_at),
			(const float *)shemb__dev_at(c, o_reset), s->nstate);
	rc = shemb__cuda_finish(c, "record kernel");
	if (!rc && out)
		rc = shemb__pack_download(c, o_data, total, host);
	return rc;
}

#define PIECE (INT64_C(1) << 30)
/* host data moves through staging in pieces of about this many bytes */
#define STAGE_BYTES ((size_t)64 << 20)

static int move_pieces(struct shemb__cuda *c, const struct shemb__store *s,
		       const int64_t *at, int64_t n, char *host, size_t bytes,
		       bool out, const float *reset)
{
	shemb__cuda_guard g(c);
	int64_t piece = (int64_t)(STAGE_BYTES / bytes);
	int rc = 0;

	if (piece < 1)
		piece = 1;
	for (int64_t i = 0; i < n && !rc; i += piece) {
		int64_t m = n - i < piece ? n - i : piece;
		int64_t *shifted = NULL;

		if (!at && reset)
			return SHEMB_EINTERNAL; /* resets need ids */
		if (!at && i) {
			/* the i-th piece of an identity map */
			shifted = (int64_t *)malloc((size_t)m * 8);
			if (!shifted)
				return SHEMB_ENOMEM;
			for (int64_t k = 0; k < m; k++)
				shifted[k] = i + k;
		}
		rc = move_host(c, s, at ? at + i : shifted, m,
			       host + (size_t)i * bytes, bytes, out, reset);
		free(shifted);
	}
	return rc;
}

int shemb__cuda_records_out(struct shemb__cuda *c,
			    const struct shemb__store *s, const int64_t *at,
			    int64_t n, void *host)
{
	return move_pieces(c, s, at, n, (char *)host, s->stride, true, NULL);
}

int shemb__cuda_records_in(struct shemb__cuda *c, struct shemb__store *s,
			   const int64_t *at, int64_t n, const void *host)
{
	return move_pieces(c, s, at, n, (char *)host, s->stride, false, NULL);
}

int shemb__cuda_rows_out(struct shemb__cuda *c, const struct shemb__store *s,
			 int64_t n, const int64_t *ids, void *host)
{
	return move_pieces(c, s, ids, n, (char *)host, row_bytes(s), true,
			   NULL);
}

int shemb__cuda_rows_in(struct shemb__cuda *c, struct shemb__store *s,
			int64_t n, const int64_t *ids, const void *host,
			const float *reset_state)
{
	return move_pieces(c, s, ids, n, (char *)host, row_bytes(s), false,
			   s->nstate ? reset_state : NULL);
}

int shemb__cuda_records_dd(struct shemb__cuda *c, struct shemb__store *dst,
			   const int64_t *dst_at,
			   const struct shemb__store *src,
			   const int64_t *src_at, int64_t n)
{
	shemb__cuda_guard g(c);
	struct shemb__pack b;
	size_t o_d = 0, o_s = 0;
	int rc;

	if (n == 0)
		return 0;
	if (n > PIECE)
		return SHEMB_EINTERNAL; /* a tier has fewer than 2^31 slots */
	if (dst_at)
		o_d = shemb__pack_put(&b, dst_at, (size_t)n * 8);
	if (src_at)
		o_s = shemb__pack_put(&b, src_at, (size_t)n * 8);
	rc = shemb__pack_upload(c, &b);
	if (rc)
		return rc;
	move_kernel<<<(unsigned)n, THREADS, 0, c->stream>>>(
		(char *)dst->base, dst->stride,
		dst_at ? (const int64_t *)shemb__dev_at(c, o_d) : NULL,
		(const char *)src->base, src->stride,
		src_at ? (const int64_t *)shemb__dev_at(c, o_s) : NULL,
		src->stride < dst->stride ? src->stride : dst->stride);
	return shemb__cuda_finish(c, "record kernel");
}
