/*
 * update.cu - the backward on the device: one block per distinct row sums
 * the shares of its positions column by column, in position order, and
 * applies the optimizer to the row and its state in place (or, for
 * row-wise Adagrad over column slices, gives the squared gradients
 * instead).  The arithmetic is lib/optmath.h's, as on the CPU.
 */
#include <stdint.h>

#include "shemb.h"
#include "cpu/half.h"
#include "gpu/cuda_int.h"
#include "lib/optmath.h"

#define THREADS 128

struct update_args {
	char *base;
	size_t stride, state_off;
	int dim, dtype, nsets;
	const struct shemb__bwd_set *sets; /* device arrays */
	const int64_t *unique;
	const int32_t *seg, *pos, *bag_of;
	struct shemb__opt opt;
	const float *rowsum;
	float *squares;         /* NULL: apply */
	int per_column;
};

/* Column c of distinct row u's coalesced gradient (cpu add_grad). */
__device__ static float coalesce_col(const update_args &a, int64_t u, int c)
{
	float g = 0.0f;

	for (int32_t k = a.seg[u]; k < a.seg[u + 1]; k++) {
		int32_t p = a.pos[k];
		int64_t bag = a.bag_of[p];
		const struct shemb__bwd_set *set =
			shemb__set_of_bag(a.sets, a.nsets, bag);
		int64_t lb = bag - set->bag_base;
		float gr = set->grad[(size_t)lb * (size_t)a.dim + (size_t)c];
		float coef = shemb__position_coef(set, p, lb);

		if (set->pooling == SHEMB_POOL_MAX)
			g += set->argmax[(size_t)lb * (size_t)a.dim +
					 (size_t)c] == p
				     ? coef * gr
				     : 0.0f;
		else if (coef == 1.0f)
			g += gr;
		else
			g += coef * gr;
	}
	return g;
}

__device__ static float load_w(const char *rec, int c, int dtype)
{
	if (dtype == SHEMB_F16)
		return shemb__f16_to_f32(((const uint16_t *)rec)[c]);
	if (dtype == SHEMB_BF16)
		return shemb__bf16_to_f32(((const uint16_t *)rec)[c]);
	return ((const float *)rec)[c];
}

__device__ static void store_w(char *rec, int c, int dtype, float w)
{
	if (dtype == SHEMB_F16)
		((uint16_t *)rec)[c] = shemb__f32_to_f16(w);
	else if (dtype == SHEMB_BF16)
		((uint16_t *)rec)[c] = shemb__f32_to_bf16(w);
	else
		((float *)rec)[c] = w;
}

/* The sum of the squares of g[0 .. n) in column order, as the CPU
 * loops add them. */
__device__ static float ordered_squares(const float *g, int n)
{
	float t = 0.0f;

	for (int c = 0; c < n; c++)
		t += g[c] * g[c];
	return t;
}

__device__ static void apply_col(const update_args &a, float *w, float g,
				 float *state, int c, float step)
{
	switch (a.opt.kind) {
	case SHEMB_OPT_ADAGRAD:
		shemb__adagrad(&a.opt, w, g, &state[c]);
		break;
	case SHEMB_OPT_ROWWISE_ADAGRAD:
		*w -= step * g;
		break;
	case SHEMB_OPT_ADAM:
		shemb__adam(&a.opt, w, g, &state[c], &state[a.dim + c]);
		break;
	default:
		shemb__sgd(&a.opt, w, g);
		break;
	}
}

/* Shared memory: the row's gradient and its values after decay, 2 * dim
 * floats (32 KiB at most). */
__global__ static void update_kernel(update_args a)
{
	extern __shared__ float sh[];
	float *sg = sh, *sw = sh + a.dim;
	__shared__ float step;
	int64_t u = blockIdx.x;
	char *rec = a.base + (size_t)a.unique[u] * a.stride;
	float *state = (float *)(rec + a.state_off);
	const bool apply = !a.squares;

	for (int c = threadIdx.x; c < a.dim; c += blockDim.x) {
		float g = coalesce_col(a, u, c), w = load_w(rec, c, a.dtype);

		if (apply || a.opt.wd_mode == SHEMB_WD_L2)
			shemb__decay(&a.opt, &w, &g);
		sg[c] = g;
		sw[c] = w;
	}
	__syncthreads();
	if (!apply) {
		for (int c = threadIdx.x; a.per_column && c < a.dim;
		     c += blockDim.x)
			a.squares[(size_t)u * (size_t)a.dim + (size_t)c] =
				sg[c] * sg[c];
		if (!a.per_column && threadIdx.x == 0)
			a.squares[u] = ordered_squares(sg, a.dim);
		return;
	}
	if (a.opt.kind == SHEMB_OPT_ROWWISE_ADAGRAD && threadIdx.x == 0) {
		float total = a.rowsum ? a.rowsum[u]
				       : ordered_squares(sg, a.dim);

		step = shemb__rowwise_step(&a.opt, &state[0], total, a.dim);
	}
	__syncthreads();
	for (int c = threadIdx.x; c < a.dim; c += blockDim.x) {
		float w = sw[c];

		apply_col(a, &w, sg[c], state, c, step);
		store_w(rec, c, a.dtype, w);
	}
}

/* The number of positions the job's arrays index: bag_of is read at
 * every position of pos. */
static int64_t positions(const struct shemb__update_job *job)
{
	int64_t n = 0;

	for (int32_t k = 0; k < job->seg[job->nunique]; k++)
		if (job->pos[k] + 1 > n)
			n = job->pos[k] + 1;
	return n;
}

static int64_t set_ids(const struct shemb__bwd_set *s)
{
	if (s->pooling == SHEMB_POOL_NONE)
		return s->nbags;
	return s->nbags && s->offsets ? s->offsets[s->nbags] : 0;
}

struct set_offs {
	size_t off, w, grad, am;
};

static void put_sets(struct shemb__pack *b, const struct shemb__update_job *job,
		     int dim, struct set_offs *so)
{
	for (int i = 0; i < job->nsets; i++) {
		const struct shemb__bwd_set *s = &job->sets[i];
		size_t rows = (size_t)s->nbags * (size_t)dim;

		size_t nofs = ((size_t)s->nbags + 1) * 8;

		so[i].off = s->pooling == SHEMB_POOL_NONE || !s->offsets
				    ? 0
				    : shemb__pack_put(b, s->offsets, nofs);
		so[i].w = s->weights ? shemb__pack_put(b, s->weights,
						       (size_t)set_ids(s) * 4)
				     : 0;
		so[i].grad = shemb__pack_put(b, s->grad, rows * 4);
		so[i].am = s->argmax ? shemb__pack_put(b, s->argmax, rows * 4)
				     : 0;
	}
}

static void fill_sets(struct shemb__cuda *c,
		      const struct shemb__update_job *job,
		      const struct set_offs *so, struct shemb__bwd_set *out)
{
	for (int i = 0; i < job->nsets; i++) {
		const struct shemb__bwd_set *s = &job->sets[i];

		out[i] = *s; /* the same set, its arrays' device copies */
		out[i].offsets = s->pooling == SHEMB_POOL_NONE || !s->offsets
					 ? NULL
					 : (const int64_t *)shemb__dev_at(
						   c, so[i].off);
		out[i].weights = s->weights ? (const float *)shemb__dev_at(
						      c, so[i].w)
					    : NULL;
		out[i].grad = (const float *)shemb__dev_at(c, so[i].grad);
		out[i].argmax = s->argmax ? (const int32_t *)shemb__dev_at(
						    c, so[i].am)
					  : NULL;
	}
}

/* Room for the job's arrays; the set table itself goes last, filled
 * with device addresses once the layout is known. */
static void layout(struct shemb__pack *b, const struct shemb__update_job *job,
		   struct set_offs *so, size_t *o)
{
	const struct shemb__store *s = job->store;

	o[0] = shemb__pack_put(b, job->unique, (size_t)job->nunique * 8);
	o[1] = shemb__pack_put(b, job->seg, ((size_t)job->nunique + 1) * 4);
	o[2] = shemb__pack_put(b, job->pos, (size_t)job->seg[job->nunique] * 4);
	o[3] = shemb__pack_put(b, job->bag_of, (size_t)positions(job) * 4);
	o[4] = job->rowsum ? shemb__pack_put(b, job->rowsum,
					     (size_t)job->nunique * 4)
			   : 0;
	put_sets(b, job, s->dim, so);
}

static void common_args(update_args *a, const struct shemb__update_job *job,
			int per_column)
{
	const struct shemb__store *s = job->store;

	a->base = (char *)s->base;
	a->stride = s->stride;
	a->state_off = s->state_off;
	a->dim = s->dim;
	a->dtype = s->dtype;
	a->nsets = job->nsets;
	a->opt = job->opt;
	a->per_column = per_column;
}

static int run_update(struct shemb__cuda *c,
		      const struct shemb__update_job *job,
		      const update_args *a)
{
	update_kernel<<<(unsigned)job->nunique, THREADS,
			2 * (size_t)job->store->dim * sizeof(float),
			c->stream>>>(*a);
	return shemb__cuda_finish(c, "backward kernel");
}

/* A device plan's job: its arrays are on the device already, only the
 * set table goes up (and the squares, if asked, come back). */
static int update_in_place(struct shemb__cuda *c,
			   const struct shemb__update_job *job,
			   float *squares, int per_column)
{
	size_t cols = per_column ? (size_t)job->store->dim : 1;
	size_t sq_bytes = squares ? (size_t)job->nunique * 4 * cols : 0;
	struct shemb__pack b;
	size_t o_sets, o_sq = 0;
	update_args a = {};
	int rc;

	o_sets = shemb__pack_put(&b, job->sets,
				 (size_t)job->nsets * sizeof(*job->sets));
	if (squares)
		o_sq = shemb__pack_put(&b, NULL, sq_bytes);
	rc = shemb__pack_upload(c, &b);
	if (rc)
		return rc;
	common_args(&a, job, per_column);
	a.sets = (const struct shemb__bwd_set *)shemb__dev_at(c, o_sets);
	a.unique = job->unique;
	a.seg = job->seg;
	a.pos = job->pos;
	a.bag_of = job->bag_of;
	a.rowsum = NULL;
	a.squares = squares ? (float *)shemb__dev_at(c, o_sq) : NULL;
	rc = run_update(c, job, &a);
	if (!rc && squares)
		rc = shemb__pack_download(c, o_sq, sq_bytes, squares);
	return rc;
}

int shemb__cuda_update(struct shemb__cuda *c,
		       const struct shemb__update_job *job, float *squares,
		       int per_column)
{
	shemb__cuda_guard guard(c);
	const struct shemb__store *s = job->store;
	size_t sq_bytes = squares ? (size_t)job->nunique * 4 *
					    (per_column ? (size_t)s->dim : 1)
				  : 0;
	struct shemb__pack b, room;
	struct set_offs *so;
	struct shemb__bwd_set *sets;
	size_t o[5], o_sets, o_sq = 0;
	update_args a = {};
	int rc;

	if (job->nunique == 0)
		return 0;
	if (job->in_mem == SHEMB_MEM_DEVICE)
		return update_in_place(c, job, squares, per_column);
	so = (struct set_offs *)calloc((size_t)job->nsets + 1, sizeof(*so));
	sets = (struct shemb__bwd_set *)calloc((size_t)job->nsets + 1,
					      sizeof(*sets));
	if (!so || !sets) {
		free(so);
		free(sets);
		return SHEMB_ENOMEM;
	}
	layout(&b, job, so, o);
	o_sets = shemb__pack_put(&b, sets, (size_t)job->nsets * sizeof(*sets));
	if (squares)
		o_sq = shemb__pack_put(&b, NULL, sq_bytes);
	/* the staging area is in place once grown: grow it, then fill in
	 * the set table's device addresses before the real upload */
	room.total = b.total;
	rc = shemb__pack_upload(c, &room);
	if (!rc) {
		fill_sets(c, job, so, sets);
		rc = shemb__pack_upload(c, &b);
	}
	free(so);
	if (rc) {
		free(sets);
		return rc;
	}
	common_args(&a, job, per_column);
	a.sets = (const struct shemb__bwd_set *)shemb__dev_at(c, o_sets);
	a.unique = (const int64_t *)shemb__dev_at(c, o[0]);
	a.seg = (const int32_t *)shemb__dev_at(c, o[1]);
	a.pos = (const int32_t *)shemb__dev_at(c, o[2]);
	a.bag_of = (const int32_t *)shemb__dev_at(c, o[3]);
	a.rowsum = job->rowsum ? (const float *)shemb__dev_at(c, o[4]) : NULL;
	a.squares = squares ? (float *)shemb__dev_at(c, o_sq) : NULL;
	rc = run_update(c, job, &a);
	free(sets);
	if (!rc && squares)
		rc = shemb__pack_download(c, o_sq, sq_bytes, squares);
	return rc;
}
