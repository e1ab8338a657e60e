/*
 * kernels_impl.h - the CPU kernels, written once as plain loops that the
 * compiler vectorises, and included by kernels_{generic,avx2,avx512}.c with
 * different target flags.  The including file defines KERNELS_NAME and
 * KERNELS_ISA and the fp16 row helpers load_f16 / store_f16; everything else
 * is shared.  Every variant computes in the same order, so all give the
 * same bits (fp contraction is off).
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "shemb.h"
#include "cpu/half.h"
#include "cpu/kernels.h"
#include "lib/optmath.h"
#include "lib/rowinit.h"
#include "lib/shard.h"

#define PREFETCH_ROWS 8

static void load_bf16(const uint16_t *restrict src, float *restrict dst,
		      int64_t n)
{
	for (int64_t c = 0; c < n; c++)
		dst[c] = shemb__bf16_to_f32(src[c]);
}

static void store_bf16(uint16_t *restrict dst, const float *restrict src,
		       int64_t n)
{
	for (int64_t c = 0; c < n; c++)
		dst[c] = shemb__f32_to_bf16(src[c]);
}

/* Above this scale, code * scale may exceed the largest float although
 * code * scale + bias does not. */
#define INT8_WIDE_SCALE (FLT_MAX / 256)

/* A SHEMB_INT8 row of n values (lib/mem_ops.h): codes, then at the next
 * multiple of 4 bytes its scale and bias. */
static void load_int8(const void *src, float *dst, int64_t n)
{
	const uint8_t *q = src;
	float sb[2];

	memcpy(sb, q + ((n + 3) & ~(int64_t)3), sizeof(sb));
	if (sb[0] > INT8_WIDE_SCALE) { /* code * scale alone may overflow */
		for (int64_t c = 0; c < n; c++)
			dst[c] = (float)((double)q[c] * sb[0] + sb[1]);
		return;
	}
	for (int64_t c = 0; c < n; c++)
		dst[c] = (float)q[c] * sb[0] + sb[1];
}

/* A row whose range exceeds the largest float: its scale and codes come
 * from the range in double, which holds it (in float, the scale was
 * inf and every value read back NaN). */
static void store_int8_wide(uint8_t *q, const float *src, int64_t n,
			    float lo, float hi, float *sb)
{
	sb[0] = (float)(((double)hi - lo) / 255.0);
	for (int64_t c = 0; c < n; c++) {
		double k = nearbyint(((double)src[c] - lo) / sb[0]);

		q[c] = (uint8_t)(k < 0 ? 0 : k > 255 ? 255 : k);
	}
}

/* Quantised as FBGEMM's fused 8-bit rows: bias the row's least value,
 * scale its range / 255, each code the nearest of 0 .. 255. */
static bool row_finite(const float *src, int64_t n)
{
	for (int64_t c = 0; c < n; c++)
		if (!isfinite(src[c]))
			return false;
	return true;
}

static void store_int8(void *dst, const float *src, int64_t n)
{
	uint8_t *q = dst;
	float lo = n ? src[0] : 0.0f, hi = lo, sb[2];

	for (int64_t c = 1; c < n; c++) {
		lo = src[c] < lo ? src[c] : lo;
		hi = src[c] > hi ? src[c] : hi;
	}
	sb[0] = (hi - lo) / 255.0f;
	sb[1] = lo;
	if (!row_finite(src, n)) { /* no code stands for it: all NaN */
		sb[0] = sb[1] = NAN;
		memset(q, 0, (size_t)n);
	} else if (isinf(sb[0])) {
		store_int8_wide(q, src, n, lo, hi, sb);
	} else {
		for (int64_t c = 0; c < n; c++) {
			float k = sb[0] > 0 ? nearbyintf((src[c] - lo) / sb[0])
					    : 0;

			q[c] = (uint8_t)(k < 0 ? 0 : k > 255 ? 255 : k);
		}
	}
	for (int64_t c = n; c < ((n + 3) & ~(int64_t)3); c++)
		q[c] = 0;
	memcpy(q + ((n + 3) & ~(int64_t)3), sb, sizeof(sb));
}

static void load_f32(int dtype, const void *src, float *dst, int64_t n)
{
	if (dtype == SHEMB_F16)
		load_f16(src, dst, n);
	else if (dtype == SHEMB_BF16)
		load_bf16(src, dst, n);
	else if (dtype == SHEMB_INT8)
		load_int8(src, dst, n);
	else
		memcpy(dst, src, (size_t)n * sizeof(float));
}

/* n values: for SHEMB_INT8, one whole row. */
static void store_f32(int dtype, void *dst, const float *src, int64_t n)
{
	if (dtype == SHEMB_F16)
		store_f16(dst, src, n);
	else if (dtype == SHEMB_BF16)
		store_bf16(dst, src, n);
	else if (dtype == SHEMB_INT8)
		store_int8(dst, src, n);
	else
		memcpy(dst, src, (size_t)n * sizeof(float));
}

static inline const void *record(const struct shemb__store *s, int64_t id)
{
	return (const char *)s->base + (size_t)id * s->stride;
}

/* The row as fp32: the record itself for F32 storage, else converted
 * into tmp. */
static inline const float *row_f32(const struct shemb__store *s, int64_t id,
				   float *tmp)
{
	const void *r = record(s, id);

	if (s->dtype == SHEMB_F32)
		return r;
	load_f32(s->dtype, r, tmp, s->dim);
	return tmp;
}

/* Every cache line of bytes at p, to be read (write 0) or written. */
static inline void prefetch_span(const void *p, size_t bytes, int write)
{
	for (size_t off = 0; off < bytes; off += 64) {
		if (write)
			__builtin_prefetch((const char *)p + off, 1, 1);
		else
			__builtin_prefetch((const char *)p + off, 0, 1);
	}
}

static inline void prefetch_row(const struct shemb__store *s, int64_t id,
				size_t row_bytes)
{
	prefetch_span(record(s, id), row_bytes, 0);
}

static size_t row_bytes(const struct shemb__store *s)
{
	size_t b = shemb__row_bytes(s->dtype, s->dim);

	return b < 512 ? b : 512; /* more is left to the hardware prefetcher */
}

static void add_row(float *restrict o, const float *restrict r, float w,
		    int dim, int weighted)
{
	if (weighted)
		for (int c = 0; c < dim; c++)
			o[c] += w * r[c];
	else
		for (int c = 0; c < dim; c++)
			o[c] += r[c];
}

/* The first position of a bag sets each column; later ones replace it
 * only when strictly greater, so ties go to the first position, and even a
 * bag whose products all overflow to -inf names a real position. */
static void max_first(float *restrict o, int32_t *restrict am,
		      const float *restrict r, float w, int dim, int32_t pos)
{
	for (int c = 0; c < dim; c++)
		o[c] = w * r[c];
	if (am)
		for (int c = 0; c < dim; c++)
			am[c] = pos;
}

static void max_row(float *restrict o, int32_t *restrict am,
		    const float *restrict r, float w, int dim, int32_t pos)
{
	if (am) {
		for (int c = 0; c < dim; c++) {
			float v = w * r[c];

			if (v > o[c]) {
				o[c] = v;
				am[c] = pos;
			}
		}
	} else {
		for (int c = 0; c < dim; c++) {
			float v = w * r[c];

			o[c] = v > o[c] ? v : o[c];
		}
	}
}

static void finish_bag(const struct shemb__pool_job *job, float *restrict o,
		       int32_t *am, int64_t len, int dim)
{
	if (len == 0) {
		memset(o, 0, (size_t)dim * sizeof(float));
		if (am)
			for (int c = 0; c < dim; c++)
				am[c] = -1;
	} else if (job->pooling == SHEMB_POOL_MEAN) {
		float n = (float)len;

		for (int c = 0; c < dim; c++)
			o[c] /= n;
	}
}

/* Rows are prefetched PREFETCH_ROWS ids ahead, across bag boundaries up
 * to pf_end, the end of the caller's range: bags are short (tens of ids),
 * and stopping at each bag's end would leave its first rows cold. */
static void pool_bag(const struct shemb__pool_job *job, int64_t b,
		     float *tmp, size_t pf_bytes, int64_t pf_end)
{
	const struct shemb__store *s = job->store;
	const int dim = s->dim;
	const int64_t beg = job->offsets[b], end = job->offsets[b + 1];
	const int is_max = job->pooling == SHEMB_POOL_MAX;
	float *o = job->out + (size_t)b * (size_t)dim;
	int32_t *am = job->argmax ? job->argmax + (size_t)b * (size_t)dim
				  : NULL;

	if (!is_max)
		memset(o, 0, (size_t)dim * sizeof(float));
	for (int64_t i = beg; i < end; i++) {
		float w = job->weights ? job->weights[i] : 1.0f;
		int32_t pos = (int32_t)(job->pos_base + i);
		const float *r;

		if (i + PREFETCH_ROWS < pf_end)
			prefetch_row(s, job->ids[i + PREFETCH_ROWS], pf_bytes);
		r = row_f32(s, job->ids[i], tmp);
		if (!is_max)
			add_row(o, r, w, dim, job->weights != NULL);
		else if (i == beg)
			max_first(o, am, r, w, dim, pos);
		else
			max_row(o, am, r, w, dim, pos);
	}
	finish_bag(job, o, am, end - beg, dim);
}

static void pool_bags(const struct shemb__pool_job *job, int64_t b0,
		      int64_t b1)
{
	float tmp[SHEMB_MAX_DIM];
	size_t pf = row_bytes(job->store);

	for (int64_t b = b0; b < b1; b++)
		pool_bag(job, b, tmp, pf, job->offsets[b1]);
}

static void pool_ids(const struct shemb__pool_job *job, int64_t i0,
		     int64_t i1)
{
	const struct shemb__store *s = job->store;
	const int dim = s->dim;
	size_t pf = row_bytes(s);
	float tmp[SHEMB_MAX_DIM];

	for (int64_t i = i0; i < i1; i++) {
		float *restrict o = job->out + (size_t)i * (size_t)dim;
		float w = job->weights ? job->weights[i] : 1.0f;
		const float *restrict r;

		if (i + PREFETCH_ROWS < i1)
			prefetch_row(s, job->ids[i + PREFETCH_ROWS], pf);
		r = row_f32(s, job->ids[i], tmp);
		for (int c = 0; c < dim; c++)
			o[c] = w * r[c];
	}
}

/* ---- backward: coalesce per distinct row, then the optimizer ---- */

/* Position p's bag: its set, its row lb there, and its gradient row. */
static inline const float *grad_of(const struct shemb__update_job *job,
				   int32_t p, int dim,
				   const struct shemb__bwd_set **set,
				   int64_t *lb)
{
	int64_t bag = job->bag_of[p];

	*set = shemb__set_of_bag(job->sets, job->nsets, bag);
	*lb = bag - (*set)->bag_base;
	return (*set)->grad + (size_t)*lb * (size_t)dim;
}

/* Add one position's share of its bag's gradient to g. */
static void add_grad(const struct shemb__update_job *job, int32_t p,
		     float *restrict g, int dim)
{
	const struct shemb__bwd_set *set;
	int64_t lb;
	const float *restrict gr = grad_of(job, p, dim, &set, &lb);
	float coef = shemb__position_coef(set, p, lb);

	if (set->pooling == SHEMB_POOL_MAX) {
		const int32_t *am = set->argmax + (size_t)lb * (size_t)dim;

		for (int c = 0; c < dim; c++)
			g[c] += am[c] == p ? coef * gr[c] : 0.0f;
	} else if (coef == 1.0f) {
		for (int c = 0; c < dim; c++)
			g[c] += gr[c];
	} else {
		for (int c = 0; c < dim; c++)
			g[c] += coef * gr[c];
	}
}

/*
 * The optimizer on one row.  It works on a copy of the settings: through
 * the pointer, a store to w could change them as far as the compiler
 * knows, so it read them again for every column, and ran the decay loop
 * of a row (dim tests of a zero weight_decay) even when there is none.
 */
static void apply_opt(const struct shemb__opt *opt, float *restrict w,
		      float *restrict g, float *restrict s, int dim,
		      const float *rowsum)
{
	const struct shemb__opt settings = *opt, *o = &settings;

	if (o->weight_decay != 0.0f)
		for (int c = 0; c < dim; c++)
			shemb__decay(o, &w[c], &g[c]);
	switch (o->kind) {
	case SHEMB_OPT_ADAGRAD:
		for (int c = 0; c < dim; c++)
			shemb__adagrad(o, &w[c], g[c], &s[c]);
		break;
	case SHEMB_OPT_ROWWISE_ADAGRAD: {
		float total = 0.0f, step;

		if (rowsum)
			total = *rowsum;
		else
			for (int c = 0; c < dim; c++)
				total += g[c] * g[c];
		step = shemb__rowwise_step(o, &s[0], total, dim);
		for (int c = 0; c < dim; c++)
			w[c] -= step * g[c];
		break;
	}
	case SHEMB_OPT_ADAM:
		for (int c = 0; c < dim; c++)
			shemb__adam(o, &w[c], g[c], &s[c], &s[dim + c]);
		break;
	default:
		for (int c = 0; c < dim; c++)
			shemb__sgd(o, &w[c], g[c]);
		break;
	}
}

/* A record about to be updated (the row and its optimizer state), with
 * the intent to write: a row's own arithmetic is far shorter than a
 * random read of it from DRAM.  A record is the row and its state, twice
 * a gathered row or more, so fewer of them are asked for ahead (in
 * shemb-bench backward, 4 beat 2 in every run; 8 gained less). */
#define UPDATE_PREFETCH_ROWS 4

static inline void prefetch_record_rw(const struct shemb__store *s,
				      int64_t id)
{
	prefetch_span(record(s, id), s->stride, 1);
}

/* The gradient rows of distinct row u's positions, to be read.  Across
 * ranks they are rows of the received gradients, in the order the
 * senders packed them, not in the rows' order: random reads of
 * megabytes, each a miss as costly as the record's. */
static inline void prefetch_grads(const struct shemb__update_job *job,
				  int64_t u, int dim)
{
	for (int32_t k = job->seg[u]; k < job->seg[u + 1]; k++) {
		const struct shemb__bwd_set *set;
		int64_t lb;

		prefetch_span(grad_of(job, job->pos[k], dim, &set, &lb),
			      (size_t)dim * sizeof(float), 0);
	}
}

static void update_rows(const struct shemb__update_job *job, int64_t u0,
			int64_t u1)
{
	struct shemb__store *s = job->store;
	const int dim = s->dim;
	float g[SHEMB_MAX_DIM], wbuf[SHEMB_MAX_DIM];

	for (int64_t u = u0; u < u1; u++) {
		char *rec = (char *)s->base +
			    (size_t)job->unique[u] * s->stride;
		float *state = (float *)(rec + s->state_off);
		float *w = s->dtype == SHEMB_F32 ? (float *)rec : wbuf;
		int64_t ahead = u + UPDATE_PREFETCH_ROWS;

		if (ahead < u1) {
			prefetch_record_rw(s, job->unique[ahead]);
			prefetch_grads(job, ahead, dim);
		}
		memset(g, 0, (size_t)dim * sizeof(float));
		for (int32_t k = job->seg[u]; k < job->seg[u + 1]; k++)
			add_grad(job, job->pos[k], g, dim);
		if (w == wbuf)
			load_f32(s->dtype, rec, wbuf, dim);
		apply_opt(&job->opt, w, g, state, dim,
			  job->rowsum ? &job->rowsum[u] : NULL);
		if (w == wbuf)
			store_f32(s->dtype, rec, wbuf, dim);
	}
}

/* For row-wise Adagrad over column slices: the squares of the gradient
 * of distinct rows [u0, u1) as apply_opt would see it (coalesced, L2
 * weight decay added), per column, or summed in column order. */
static void grad_squares(const struct shemb__update_job *job, int64_t u0,
			 int64_t u1, float *out, int per_column)
{
	const struct shemb__store *s = job->store;
	const int dim = s->dim;
	float g[SHEMB_MAX_DIM], wbuf[SHEMB_MAX_DIM];

	for (int64_t u = u0; u < u1; u++) {
		const void *rec = record(s, job->unique[u]);
		float sum = 0.0f;

		memset(g, 0, (size_t)dim * sizeof(float));
		for (int32_t k = job->seg[u]; k < job->seg[u + 1]; k++)
			add_grad(job, job->pos[k], g, dim);
		load_f32(s->dtype, rec, wbuf, dim);
		if (job->opt.wd_mode == SHEMB_WD_L2)
			for (int c = 0; c < dim; c++)
				shemb__decay(&job->opt, &wbuf[c], &g[c]);
		for (int c = 0; c < dim; c++) {
			float q = g[c] * g[c];

			if (per_column)
				out[(size_t)u * (size_t)dim + (size_t)c] = q;
			sum += q;
		}
		if (!per_column)
			out[u] = sum;
	}
}

/* Gradient rows of distinct rows [u0, u1), each the sum of its
 * positions' shares, or (expand) one row per position, in the order of
 * job->pos; the same arithmetic as update_rows, so a sum of expanded rows
 * in position order gives update_rows' bits. */
static void coalesce_rows(const struct shemb__update_job *job, int64_t u0,
			  int64_t u1, float *out, int expand)
{
	const int dim = job->store->dim;

	for (int64_t u = u0; u < u1; u++) {
		float *g = out + (size_t)u * (size_t)dim;

		if (!expand)
			memset(g, 0, (size_t)dim * sizeof(float));
		for (int32_t k = job->seg[u]; k < job->seg[u + 1]; k++) {
			if (expand) {
				g = out + (size_t)k * (size_t)dim;
				memset(g, 0, (size_t)dim * sizeof(float));
			}
			add_grad(job, job->pos[k], g, dim);
		}
	}
}

/* Local rows r0 .. r0 + n - 1 of this rank's store, dim columns each. */
static void init_rows(const struct shemb__init_spec *spec, int64_t r0,
		      int64_t n, int dim, float *out)
{
	const struct shemb__shard *sh = spec->shard;
	float full[SHEMB_MAX_DIM];

	for (int64_t r = 0; r < n; r++) {
		float *o = out + (size_t)r * (size_t)dim;
		int64_t id = sh ? shemb__shard_global(sh, r0 + r) : r0 + r;

		if (!sh || sh->ncols == sh->dim) {
			shemb__init_row(spec, id, dim, o);
			continue;
		}
		shemb__init_row(spec, id, sh->dim, full);
		memcpy(o, full + sh->col0, (size_t)dim * sizeof(float));
	}
}

const struct shemb__kernels KERNELS_NAME = {
	.isa = KERNELS_ISA,
	.pool_bags = pool_bags,
	.pool_ids = pool_ids,
	.update_rows = update_rows,
	.coalesce_rows = coalesce_rows,
	.grad_squares = grad_squares,
	.init_rows = init_rows,
	.load_f32 = load_f32,
	.store_f32 = store_f32,
};
