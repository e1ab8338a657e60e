/*
 * testutil.c - see testutil.h.
 */
#include "tests/testutil.h"

#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- memory ---- */

char *tu_temp_dir(const char *prefix)
{
	char *d = tu_malloc(strlen(prefix) + 16);

	sprintf(d, "/tmp/%s.XXXXXX", prefix);
	if (!mkdtemp(d)) {
		perror(d);
		abort();
	}
	return d;
}

void tu_remove_dir(char *dir)
{
	char *cmd = tu_malloc(strlen(dir) + 16);

	sprintf(cmd, "rm -rf '%s'", dir);
	if (system(cmd)) {
		fprintf(stderr, "test: %s failed\n", cmd);
		abort();
	}
	free(cmd);
	free(dir);
}

void *tu_malloc(size_t bytes)
{
	void *p = malloc(bytes ? bytes : 1);

	if (!p) {
		fprintf(stderr, "test: out of memory (%zu bytes)\n", bytes);
		abort();
	}
	return p;
}

void *tu_calloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);

	if (!p) {
		fprintf(stderr, "test: out of memory (%zu x %zu)\n", n, size);
		abort();
	}
	return p;
}

/* ---- random numbers ---- */

void tu_rng_seed(struct tu_rng *r, uint64_t seed)
{
	r->state = seed;
}

uint64_t tu_rng_next(struct tu_rng *r)
{
	uint64_t z = (r->state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

double tu_rng_unit(struct tu_rng *r)
{
	return (double)(tu_rng_next(r) >> 11) * 0x1p-53;
}

int64_t tu_rng_below(struct tu_rng *r, int64_t n)
{
	return (int64_t)(tu_rng_unit(r) * (double)n);
}

float tu_rng_float(struct tu_rng *r, float lo, float hi)
{
	float v = lo + (float)((double)(hi - lo) * tu_rng_unit(r));

	return v < hi ? v : lo; /* the rounding may reach hi */
}

void tu_rng_fill(struct tu_rng *r, float *v, size_t n, float lo, float hi)
{
	for (size_t i = 0; i < n; i++)
		v[i] = tu_rng_float(r, lo, hi);
}

/* ---- bags ---- */

/* A cube of a uniform number piles the ids up near row 0: a few rows get
 * most of the traffic, as with the Zipf-distributed ids of real data. */
static int64_t random_id(struct tu_rng *r, const struct tu_bag_spec *spec)
{
	double u = tu_rng_unit(r);

	if (spec->zipf)
		u = u * u * u;
	return (int64_t)(u * (double)spec->rows);
}

static int64_t random_length(struct tu_rng *r, const struct tu_bag_spec *spec)
{
	if (tu_rng_below(r, 100) < spec->empty_pct)
		return 0;
	return tu_rng_below(r, spec->max_len + 1);
}

void tu_bags_random(struct tu_bags *b, struct tu_rng *r,
		    const struct tu_bag_spec *spec)
{
	int64_t cap = spec->nbags * spec->max_len;

	b->nbags = spec->nbags;
	b->offsets = tu_malloc((size_t)(spec->nbags + 1) * sizeof(int64_t));
	b->ids = tu_malloc((size_t)cap * sizeof(int64_t));
	b->weights = spec->weighted ? tu_malloc((size_t)cap * sizeof(float))
				    : NULL;
	b->offsets[0] = 0;
	b->nids = 0;
	for (int64_t bag = 0; bag < spec->nbags; bag++) {
		int64_t len = random_length(r, spec);

		for (int64_t k = 0; k < len; k++, b->nids++) {
			bool repeat = k > 0 &&
				      tu_rng_below(r, 100) < spec->repeat_pct;

			b->ids[b->nids] = repeat ? b->ids[b->nids - 1]
						 : random_id(r, spec);
			if (b->weights)
				b->weights[b->nids] =
					tu_rng_float(r, -1.5f, 1.5f);
		}
		b->offsets[bag + 1] = b->nids;
	}
}

void tu_bags_from(struct tu_bags *b, int64_t nbags, const int64_t *lengths,
		  const int64_t *ids, const float *weights)
{
	b->nbags = nbags;
	b->offsets = tu_malloc((size_t)(nbags + 1) * sizeof(int64_t));
	b->offsets[0] = 0;
	for (int64_t i = 0; i < nbags; i++)
		b->offsets[i + 1] = b->offsets[i] + lengths[i];
	b->nids = b->offsets[nbags];
	b->ids = tu_malloc((size_t)b->nids * sizeof(int64_t));
	memcpy(b->ids, ids, (size_t)b->nids * sizeof(int64_t));
	b->weights = NULL;
	if (weights) {
		b->weights = tu_malloc((size_t)b->nids * sizeof(float));
		memcpy(b->weights, weights, (size_t)b->nids * sizeof(float));
	}
}

void tu_bags_copy(struct tu_bags *dst, const struct tu_bags *src)
{
	int64_t *lengths = tu_malloc((size_t)src->nbags * sizeof(int64_t));

	for (int64_t i = 0; i < src->nbags; i++)
		lengths[i] = src->offsets[i + 1] - src->offsets[i];
	tu_bags_from(dst, src->nbags, lengths, src->ids, src->weights);
	free(lengths);
}

void tu_bags_free(struct tu_bags *b)
{
	free(b->offsets);
	free(b->ids);
	free(b->weights);
	memset(b, 0, sizeof(*b));
}

struct shemb_bags tu_bags_view(const struct tu_bags *b, shemb_table *t,
			       int pooling)
{
	struct shemb_bags v;

	shemb_bags_init(&v);
	v.table = t;
	v.pooling = pooling;
	v.nbags = b->nbags;
	v.offsets = b->offsets;
	v.nids = b->nids;
	v.ids = b->ids;
	v.weights = b->weights;
	return v;
}

int64_t tu_out_rows(const struct tu_bags *b, int pooling)
{
	return pooling == SHEMB_POOL_NONE ? b->nids : b->nbags;
}

/* ---- dtypes ---- */

size_t tu_dtype_size(int dtype)
{
	return dtype == SHEMB_F32 ? sizeof(float) : sizeof(uint16_t);
}

uint32_t tu_bits_of(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

float tu_float_of(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

uint16_t tu_f32_to_f16(float x)
{
	_Float16 h = (_Float16)x;
	uint16_t u;

	memcpy(&u, &h, sizeof(u));
	return u;
}

float tu_f16_to_f32(uint16_t u)
{
	_Float16 h;

	memcpy(&h, &u, sizeof(h));
	return (float)h;
}

/*
 * bf16 keeps the top half of the fp32 bits.  Round to nearest even: look at
 * the dropped half; above the midpoint rounds up, at the midpoint only an
 * odd kept half rounds up.  A carry into the exponent is the right result,
 * up to infinity.  NaNs stay NaNs (quiet, sign kept).
 */
uint16_t tu_f32_to_bf16(float x)
{
	uint32_t u = tu_bits_of(x);
	uint32_t kept = u >> 16, dropped = u & 0xffffu;

	if (isnan(x))
		return (uint16_t)(kept | 0x0040u);
	if (dropped > 0x8000u || (dropped == 0x8000u && (kept & 1u)))
		kept++;
	return (uint16_t)kept;
}

float tu_bf16_to_f32(uint16_t h)
{
	return tu_float_of((uint32_t)h << 16);
}

float tu_round(float x, int dtype)
{
	if (dtype == SHEMB_F16)
		return tu_f16_to_f32(tu_f32_to_f16(x));
	if (dtype == SHEMB_BF16)
		return tu_bf16_to_f32(tu_f32_to_bf16(x));
	return x;
}

void tu_store(int dtype, void *dst, const float *src, size_t n)
{
	uint16_t *h = dst;

	for (size_t i = 0; i < n; i++) {
		if (dtype == SHEMB_F16)
			h[i] = tu_f32_to_f16(src[i]);
		else if (dtype == SHEMB_BF16)
			h[i] = tu_f32_to_bf16(src[i]);
		else
			((float *)dst)[i] = src[i];
	}
}

void tu_load(int dtype, const void *src, float *dst, size_t n)
{
	const uint16_t *h = src;

	for (size_t i = 0; i < n; i++) {
		if (dtype == SHEMB_F16)
			dst[i] = tu_f16_to_f32(h[i]);
		else if (dtype == SHEMB_BF16)
			dst[i] = tu_bf16_to_f32(h[i]);
		else
			dst[i] = ((const float *)src)[i];
	}
}

/* ---- reference table ---- */

static int state_floats(int optimizer, int dim)
{
	switch (optimizer) {
	case SHEMB_OPT_ADAGRAD:
		return dim;
	case SHEMB_OPT_ROWWISE_ADAGRAD:
		return 1;
	case SHEMB_OPT_ADAM:
		return 2 * dim; /* m, then v */
	default:
		return 0;
	}
}

void tu_ref_init(struct tu_ref *ref, shemb_table *t)
{
	memset(ref, 0, sizeof(*ref));
	shemb_table_attr_init(&ref->attr);
	if (shemb_table_get_attr(t, &ref->attr)) {
		fprintf(stderr, "test: shemb_table_get_attr failed\n");
		abort();
	}
	ref->rows = ref->attr.rows;
	ref->dim = ref->attr.dim;
	ref->dtype = ref->attr.dtype;
	ref->nstate = state_floats(ref->attr.optimizer, ref->dim);
	ref->w = tu_read_all_f32(t);
	ref->state = tu_calloc((size_t)ref->rows * (size_t)ref->nstate + 1,
			       sizeof(float));
	for (int64_t r = 0; r < ref->rows; r++)
		tu_ref_reset_state(ref, r);
}

void tu_ref_free(struct tu_ref *ref)
{
	free(ref->w);
	free(ref->state);
	memset(ref, 0, sizeof(*ref));
}

void tu_ref_reset_state(struct tu_ref *ref, int64_t row)
{
	float *s = ref->state + (size_t)row * (size_t)ref->nstate;
	float v = ref->attr.optimizer == SHEMB_OPT_ADAM
			  ? 0.0f
			  : ref->attr.initial_accumulator;

	for (int i = 0; i < ref->nstate; i++)
		s[i] = v;
}

void tu_ref_write(struct tu_ref *ref, int64_t n, const int64_t *ids,
		  const float *in)
{
	for (int64_t i = 0; i < n; i++) {
		float *w = ref->w + (size_t)ids[i] * (size_t)ref->dim;

		for (int c = 0; c < ref->dim; c++)
			w[c] = tu_round(in[(size_t)i * ref->dim + c],
					ref->dtype);
	}
}

static const float *ref_row(const struct tu_ref *ref, int64_t id)
{
	return ref->w + (size_t)id * (size_t)ref->dim;
}

static float weight_at(const struct tu_bags *b, int64_t k)
{
	return b->weights ? b->weights[k] : 1.0f;
}

static void ref_pool_bag(const struct tu_ref *ref, const struct tu_bags *b,
			 int pooling, int64_t bag, float *o)
{
	int64_t beg = b->offsets[bag], end = b->offsets[bag + 1];
	int dim = ref->dim;

	for (int c = 0; c < dim; c++)
		o[c] = pooling == SHEMB_POOL_MAX ? -INFINITY : 0.0f;
	for (int64_t k = beg; k < end; k++) {
		const float *r = ref_row(ref, b->ids[k]);
		float w = weight_at(b, k);

		for (int c = 0; c < dim; c++) {
			if (pooling == SHEMB_POOL_MAX)
				o[c] = w * r[c] > o[c] ? w * r[c] : o[c];
			else
				o[c] += w * r[c];
		}
	}
	for (int c = 0; c < dim; c++) {
		if (end == beg)
			o[c] = 0.0f;
		else if (pooling == SHEMB_POOL_MEAN)
			o[c] /= (float)(end - beg);
	}
}

void tu_ref_lookup(const struct tu_ref *ref, const struct tu_bags *b,
		   int pooling, float *out)
{
	size_t dim = (size_t)ref->dim;

	if (pooling != SHEMB_POOL_NONE) {
		for (int64_t bag = 0; bag < b->nbags; bag++)
			ref_pool_bag(ref, b, pooling, bag, out + bag * dim);
		return;
	}
	for (int64_t k = 0; k < b->nids; k++) {
		const float *r = ref_row(ref, b->ids[k]);

		for (size_t c = 0; c < dim; c++)
			out[k * dim + c] = weight_at(b, k) * r[c];
	}
}

/* MAX: for each column, the first position of the bag whose weighted
 * value is the bag's maximum. */
static void first_argmax(const struct tu_ref *ref, const struct tu_bags *b,
			 int64_t bag, int64_t *am)
{
	int64_t beg = b->offsets[bag], end = b->offsets[bag + 1];

	for (int c = 0; c < ref->dim; c++) {
		float best = -INFINITY;

		am[c] = -1;
		for (int64_t k = beg; k < end; k++) {
			float v = weight_at(b, k) * ref_row(ref, b->ids[k])[c];

			if (am[c] < 0 || v > best) {
				best = v;
				am[c] = k;
			}
		}
	}
}

/* Add position k's share of gradient row gr to its row's sum in g. */
static void add_share(const struct tu_ref *ref, const struct tu_bags *b,
		      int64_t k, float coef, const float *gr,
		      const int64_t *am, float *g, bool *touched)
{
	float *gk = g + (size_t)b->ids[k] * (size_t)ref->dim;

	touched[b->ids[k]] = true;
	for (int c = 0; c < ref->dim; c++) {
		if (!am)
			gk[c] += coef * gr[c];
		else if (am[c] == k)
			gk[c] += coef * gr[c];
	}
}

static void expand_set(const struct tu_ref *ref, const struct tu_ref_set *s,
		       float *g, bool *touched)
{
	const struct tu_bags *b = s->bags;
	size_t dim = (size_t)ref->dim;
	int64_t *am = tu_malloc(dim * sizeof(int64_t));

	if (s->pooling == SHEMB_POOL_NONE) {
		for (int64_t k = 0; k < b->nids; k++)
			add_share(ref, b, k, weight_at(b, k),
				  s->grad + k * dim, NULL, g, touched);
		free(am);
		return;
	}
	for (int64_t bag = 0; bag < b->nbags; bag++) {
		int64_t beg = b->offsets[bag], end = b->offsets[bag + 1];
		bool is_max = s->pooling == SHEMB_POOL_MAX;

		if (is_max)
			first_argmax(ref, b, bag, am);
		for (int64_t k = beg; k < end; k++) {
			float coef = weight_at(b, k);

			if (s->pooling == SHEMB_POOL_MEAN)
				coef = coef / (float)(end - beg);
			add_share(ref, b, k, coef, s->grad + bag * dim,
				  is_max ? am : NULL, g, touched);
		}
	}
	free(am);
}

static void ref_sgd(const struct shemb_table_attr *a, float *w,
		    const float *g, int dim)
{
	for (int c = 0; c < dim; c++)
		w[c] = w[c] - a->lr * g[c];
}

static void ref_adagrad(const struct shemb_table_attr *a, float *w,
			const float *g, float *s, int dim)
{
	for (int c = 0; c < dim; c++) {
		s[c] = s[c] + g[c] * g[c];
		w[c] = w[c] - a->lr * g[c] / (sqrtf(s[c]) + a->eps);
	}
}

static void ref_rowwise_adagrad(const struct shemb_table_attr *a, float *w,
				const float *g, float *s, int dim)
{
	float sum = 0.0f, step;

	for (int c = 0; c < dim; c++)
		sum += g[c] * g[c];
	s[0] = s[0] + sum / (float)dim;
	step = a->lr / (sqrtf(s[0]) + a->eps);
	for (int c = 0; c < dim; c++)
		w[c] = w[c] - step * g[c];
}

static void ref_adam(const struct shemb_table_attr *a, int64_t t, float *w,
		     const float *g, float *s, int dim)
{
	float *m = s, *v = s + dim;
	/* bias corrections 1 - beta^t, in double and then rounded */
	float bc1 = (float)(1.0 - pow((double)a->beta1, (double)t));
	float bc2 = (float)(1.0 - pow((double)a->beta2, (double)t));

	for (int c = 0; c < dim; c++) {
		m[c] = a->beta1 * m[c] + (1.0f - a->beta1) * g[c];
		v[c] = a->beta2 * v[c] + (1.0f - a->beta2) * (g[c] * g[c]);
		w[c] = w[c] - a->lr * (m[c] / bc1) /
				      (sqrtf(v[c] / bc2) + a->eps);
	}
}

static void ref_weight_decay(const struct shemb_table_attr *a, float *w,
			     float *g, int dim)
{
	for (int c = 0; c < dim; c++) {
		if (a->weight_decay_mode == SHEMB_WD_L2)
			g[c] = g[c] + a->weight_decay * w[c];
		else
			w[c] = w[c] - (a->lr * a->weight_decay) * w[c];
	}
}

static void ref_update_row(struct tu_ref *ref, int64_t r, float *g)
{
	const struct shemb_table_attr *a = &ref->attr;
	float *w = ref->w + (size_t)r * (size_t)ref->dim;
	float *s = ref->state + (size_t)r * (size_t)ref->nstate;
	int dim = ref->dim;

	ref_weight_decay(a, w, g, dim);
	switch (a->optimizer) {
	case SHEMB_OPT_ADAGRAD:
		ref_adagrad(a, w, g, s, dim);
		break;
	case SHEMB_OPT_ROWWISE_ADAGRAD:
		ref_rowwise_adagrad(a, w, g, s, dim);
		break;
	case SHEMB_OPT_ADAM:
		ref_adam(a, ref->step, w, g, s, dim);
		break;
	default:
		ref_sgd(a, w, g, dim);
		break;
	}
	for (int c = 0; c < dim; c++)
		w[c] = tu_round(w[c], ref->dtype);
}

void tu_ref_backward(struct tu_ref *ref, int nsets,
		     const struct tu_ref_set *sets)
{
	float *g = tu_calloc((size_t)ref->rows * (size_t)ref->dim,
			     sizeof(float));
	bool *touched = tu_calloc((size_t)ref->rows, sizeof(bool));

	for (int i = 0; i < nsets; i++)
		expand_set(ref, &sets[i], g, touched);
	ref->step++;
	for (int64_t r = 0; r < ref->rows; r++)
		if (touched[r])
			ref_update_row(ref, r,
				       g + (size_t)r * (size_t)ref->dim);
	free(touched);
	free(g);
}

/* ---- comparisons ---- */

bool tu_close(float got, float want, float rel, float abs_floor)
{
	if (isnan(got) || isnan(want))
		return isnan(got) && isnan(want);
	return fabsf(got - want) <= rel * fabsf(want) + abs_floor;
}

int64_t tu_mismatches(const char *what, const float *got, const float *want,
		      int64_t n, float rel, float abs_floor)
{
	int64_t bad = 0;

	for (int64_t i = 0; i < n; i++) {
		if (tu_close(got[i], want[i], rel, abs_floor))
			continue;
		if (bad++ < 5)
			fprintf(stderr, "%s[%lld]: got %.9g, want %.9g\n",
				what, (long long)i, (double)got[i],
				(double)want[i]);
	}
	return bad;
}

int64_t tu_bits_differ(const char *what, const void *a, const void *b,
		       size_t bytes)
{
	const unsigned char *x = a, *y = b;
	int64_t bad = 0;

	for (size_t i = 0; i < bytes; i++) {
		if (x[i] == y[i])
			continue;
		if (bad++ < 5)
			fprintf(stderr, "%s: byte %zu differs (%02x, %02x)\n",
				what, i, x[i], y[i]);
	}
	return bad;
}

/* ---- snapshots ---- */

static int64_t *all_ids(int64_t rows)
{
	int64_t *ids = tu_malloc((size_t)rows * sizeof(int64_t));

	for (int64_t r = 0; r < rows; r++)
		ids[r] = r;
	return ids;
}

static void read_all(shemb_table *t, int dtype, void *out)
{
	struct shemb_table_attr a;
	int64_t *ids;
	int rc;

	shemb_table_attr_init(&a);
	shemb_table_get_attr(t, &a);
	ids = all_ids(a.rows);
	rc = shemb_table_read_rows(t, a.rows, ids, out, dtype);
	free(ids);
	if (rc) {
		fprintf(stderr, "test: read_rows failed: %s\n",
			shemb_strerror(rc));
		abort();
	}
}

void tu_snapshot_take(struct tu_snapshot *s, shemb_table *t)
{
	struct shemb_table_attr a;

	shemb_table_attr_init(&a);
	shemb_table_get_attr(t, &a);
	s->dtype = a.dtype;
	s->rows = a.rows;
	s->dim = a.dim;
	s->bytes = (size_t)a.rows * (size_t)a.dim * tu_dtype_size(a.dtype);
	s->data = tu_malloc(s->bytes);
	read_all(t, a.dtype, s->data);
}

bool tu_snapshot_equal(const struct tu_snapshot *a,
		       const struct tu_snapshot *b)
{
	return a->bytes == b->bytes && !memcmp(a->data, b->data, a->bytes);
}

bool tu_snapshot_row_equal(const struct tu_snapshot *a,
			   const struct tu_snapshot *b, int64_t r)
{
	size_t rb = (size_t)a->dim * tu_dtype_size(a->dtype);

	return !memcmp((const char *)a->data + (size_t)r * rb,
		       (const char *)b->data + (size_t)r * rb, rb);
}

void tu_snapshot_free(struct tu_snapshot *s)
{
	free(s->data);
	memset(s, 0, sizeof(*s));
}

bool tu_unchanged_since(const struct tu_snapshot *before, shemb_table *t)
{
	struct tu_snapshot now;
	bool same;

	tu_snapshot_take(&now, t);
	same = tu_snapshot_equal(before, &now);
	tu_snapshot_free(&now);
	return same;
}

float *tu_read_all_f32(shemb_table *t)
{
	struct shemb_table_attr a;
	float *w;

	shemb_table_attr_init(&a);
	shemb_table_get_attr(t, &a);
	w = tu_malloc((size_t)a.rows * (size_t)a.dim * sizeof(float));
	read_all(t, SHEMB_F32, w);
	return w;
}

/* ---- contexts and tables ---- */

const char *const tu_isas[3] = { "generic", "avx2", "avx512" };

int tu_ctx_create(const char *isa, int nthreads, shemb_ctx **ctx)
{
	struct shemb_ctx_attr a;
	const char *old = getenv("SHEMB_ISA");
	char *saved = old ? strdup(old) : NULL;
	int rc;

	shemb_ctx_attr_init(&a);
	a.nthreads = nthreads;
	if (isa)
		setenv("SHEMB_ISA", isa, 1);
	else
		unsetenv("SHEMB_ISA");
	rc = shemb_ctx_create(&a, ctx);
	if (saved)
		setenv("SHEMB_ISA", saved, 1);
	else
		unsetenv("SHEMB_ISA");
	free(saved);
	return rc;
}

shemb_table *tu_table_attr(shemb_ctx *ctx,
			   const struct shemb_table_attr *attr)
{
	shemb_table *t = NULL;
	int rc = shemb_table_create(ctx, attr, &t);

	if (rc) {
		fprintf(stderr, "test: table_create failed: %s: %s\n",
			shemb_strerror(rc), shemb_ctx_last_error(ctx));
		abort();
	}
	return t;
}

shemb_table *tu_table(shemb_ctx *ctx, int64_t rows, int dim, int dtype,
		      int optimizer)
{
	struct shemb_table_attr a;

	shemb_table_attr_init(&a);
	a.rows = rows;
	a.dim = dim;
	a.dtype = dtype;
	a.optimizer = optimizer;
	return tu_table_attr(ctx, &a);
}

bool tu_contains_all(const char *msg, ...)
{
	const char *word;
	bool all = true;
	va_list ap;

	va_start(ap, msg);
	while ((word = va_arg(ap, const char *)))
		if (!strstr(msg, word))
			all = false;
	va_end(ap);
	return all;
}

/* ---- threads ---- */

int tu_thread_count(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	if (!d)
		abort();
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

int tu_thread_count_settled(int want)
{
	struct timespec ms = { 0, 1000000 };
	int n = tu_thread_count();

	for (int i = 0; i < 5000 && n != want; i++) {
		nanosleep(&ms, NULL);
		n = tu_thread_count();
	}
	return n;
}

static void *tu_no_work(void *arg)
{
	return arg;
}

int tu_thread_baseline(void)
{
	struct timespec ms = { 0, 10000000 };
	pthread_t t;
	int n, last;

	if (pthread_create(&t, NULL, tu_no_work, NULL) == 0)
		pthread_join(t, NULL);
	last = tu_thread_count();
	for (int i = 0; i < 500; i++) {
		nanosleep(&ms, NULL);
		n = tu_thread_count();
		if (n == last)
			break;
		last = n;
	}
	return last;
}
