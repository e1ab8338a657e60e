/*
 * data.c - a synthetic click log with an answer planted in it.
 *
 * A sample has 13 dense features, Gaussian, and one bag of values of each
 * categorical feature: a single value for most, one to several for the
 * multi-hot ones (an item's categories, a query's terms, a user's
 * interests).  Values are drawn with Zipf-like frequencies, the hot ones
 * scattered through the table as hashed ids are.
 *
 * Every value has a hidden latent vector and a hidden bias, from a seeded
 * hash.  The log-odds of a click are
 *
 *	C0 + sum over some feature pairs (a, b) of <La, Lb>
 *	   + BIAS * (the values' biases) + w . x + GAMMA * <P x, L_user>
 *	   + noise,
 *
 * La being the sum of the latent vectors of feature a's bag, w and P fixed
 * by the seed; the click is drawn from that probability.  The model can
 * express every term: pairwise dot products of pooled embeddings, dot
 * products with the bottom MLP's output, and that output itself.  The
 * planted model's own scores (the log-odds without the noise) bound the
 * AUC any model can reach; the model approaches them as it sees more
 * samples (rare values, seen too seldom to learn, keep it below).
 *
 * Sample i of the log depends on (seed, i) alone, so each rank makes only
 * the samples of its own slices, and held-out samples (further along the
 * same log) come from the same distribution as the training ones.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "examples/dlrm/dlrm.h"

#define LATENT 4	/* width of the hidden vectors */
#define C0 (-1.0)	/* log-odds of a sample with nothing special */
#define BIAS 0.5	/* weight of the values' own biases */
#define GAMMA 0.5	/* weight of the dense-to-user interaction */
#define SIGMA 0.5	/* noise on the log-odds, unseen by the oracle */

const struct feature dlrm_features[DLRM_TABLES] = {
	{ "user", 100000, 1, 1.25 },
	{ "item", 50000, 1, 1.3 },
	{ "advertiser", 20000, 1, 1.3 },
	{ "publisher", 10000, 1, 1.35 },
	{ "category", 5000, 3, 1.4 },
	{ "device", 3000, 1, 1.5 },
	{ "query_terms", 8000, 5, 1.3 },
	{ "interests", 2000, 6, 1.4 },
};

/* Feature pairs whose latent vectors meet in the log-odds. */
static const int pairs[][2] = {
	{ 0, 1 }, { 0, 2 }, { 1, 3 }, { 4, 7 }, { 5, 2 }, { 6, 1 },
};

#define NPAIRS ((int)(sizeof(pairs) / sizeof(pairs[0])))

struct planted {
	uint64_t seed;
	float w[DLRM_DENSE];		/* the dense features' weights */
	float proj[LATENT][DLRM_DENSE];	/* dense -> latent space */
	uint64_t mult[DLRM_TABLES];	/* permutes frequency ranks */
};

/* Value c of the hidden latent vector (c < LATENT) or, c = LATENT, the
 * hidden bias of value `row` of feature t: uniform in [-1, 1). */
static float hidden(const struct planted *pl, int t, int64_t row, int c)
{
	uint64_t h = mix64(mix64(pl->seed ^ ((uint64_t)t << 56) ^
				 (uint64_t)row) + (uint64_t)c);

	return (float)((double)(h >> 11) * 0x1p-52 - 1.0);
}

static double gaussian(uint64_t *rng)
{
	double u = unit(rng), v = unit(rng);

	return sqrt(-2 * log1p(-u)) * cos(2 * M_PI * v);
}

static uint64_t gcd(uint64_t a, uint64_t b)
{
	while (b) {
		uint64_t t = a % b;

		a = b;
		b = t;
	}
	return a;
}

static void planted_init(struct planted *pl, uint64_t seed)
{
	uint64_t rng = mix64(seed ^ 0x706c616e746564ull);

	pl->seed = mix64(seed);
	for (int c = 0; c < DLRM_DENSE; c++)
		pl->w[c] = (float)(0.4 * gaussian(&rng));
	for (int k = 0; k < LATENT; k++)
		for (int c = 0; c < DLRM_DENSE; c++)
			pl->proj[k][c] = (float)(gaussian(&rng) /
						 sqrt(DLRM_DENSE));
	/* any multiplier coprime with rows permutes the rows */
	for (int t = 0; t < DLRM_TABLES; t++) {
		uint64_t rows = (uint64_t)dlrm_features[t].rows;
		uint64_t m = mix64(pl->seed + (uint64_t)t) % rows;

		while (gcd(m, rows) != 1)
			m++;
		pl->mult[t] = m;
	}
}

/* A value of feature t: frequency rank r with probability about
 * proportional to (r + 1)^-s (the continuous inverse of Zipf's CDF),
 * mapped to an id by the feature's permutation. */
static int64_t draw_value(const struct planted *pl, int t, uint64_t *rng)
{
	const struct feature *f = &dlrm_features[t];
	double e = 1 - f->zipf_s;
	double top = pow((double)f->rows + 1, e) - 1;
	double x = pow(1 + unit(rng) * top, 1 / e);
	int64_t r = (int64_t)x - 1;

	if (r < 0)
		r = 0;
	if (r >= f->rows)
		r = f->rows - 1;
	/* r and mult are below rows (100000 at most): no overflow */
	return (int64_t)((uint64_t)r * pl->mult[t] % (uint64_t)f->rows);
}

/* The planted log-odds of a sample from its dense features, the sums of
 * its bags' latent vectors and the sum of its values' biases. */
static double log_odds(const struct planted *pl, const float *x,
		       double lat[][LATENT], double bias)
{
	double z = C0 + BIAS * bias;

	for (int p = 0; p < NPAIRS; p++)
		for (int k = 0; k < LATENT; k++)
			z += lat[pairs[p][0]][k] * lat[pairs[p][1]][k];
	for (int c = 0; c < DLRM_DENSE; c++)
		z += pl->w[c] * x[c];
	for (int k = 0; k < LATENT; k++) {
		double px = 0;

		for (int c = 0; c < DLRM_DENSE; c++)
			px += pl->proj[k][c] * x[c];
		z += GAMMA * px * lat[0][k];
	}
	return z;
}

/* Sample g of the log into slot i of the rank's log; nids[t] counts the
 * ids of feature t stored so far. */
static void make_sample(const struct planted *pl, uint64_t g,
			struct click_log *log, int64_t i, int64_t *nids)
{
	uint64_t rng = mix64(pl->seed + mix64(g));
	float *x = log->dense + (size_t)i * DLRM_DENSE;
	double lat[DLRM_TABLES][LATENT] = { { 0 } }, bias = 0, z, noisy;

	for (int c = 0; c < DLRM_DENSE; c++)
		x[c] = (float)gaussian(&rng);
	for (int t = 0; t < DLRM_TABLES; t++) {
		int len = 1 + (int)(unit(&rng) * dlrm_features[t].max_bag);

		for (int j = 0; j < len; j++) {
			int64_t id = draw_value(pl, t, &rng);

			log->ids[t][nids[t]++] = id;
			for (int k = 0; k < LATENT; k++)
				lat[t][k] += hidden(pl, t, id, k);
			bias += hidden(pl, t, id, LATENT);
		}
		log->offsets[t][i + 1] = nids[t];
	}
	z = log_odds(pl, x, lat, bias);
	noisy = z + SIGMA * gaussian(&rng);
	log->oracle[i] = (float)z;
	log->label[i] = unit(&rng) < 1 / (1 + exp(-noisy)) ? 1.0f : 0.0f;
}

/* The batches, and how many samples this rank holds of each. */
static int plan_batches(struct click_log *log, const struct log_spec *sp)
{
	int64_t lo, hi;

	log->nbatches = (sp->count + sp->batch - 1) / sp->batch;
	log->batch_first = malloc((size_t)(log->nbatches + 1) *
				  sizeof(int64_t));
	log->batch_size = malloc((size_t)(log->nbatches + 1) *
				 sizeof(int64_t));
	if (!log->batch_first || !log->batch_size)
		return -1;
	log->n = 0;
	for (int64_t b = 0; b < log->nbatches; b++) {
		int64_t size = sp->count - b * sp->batch;

		log->batch_size[b] = size < sp->batch ? size : sp->batch;
		rank_slice(log->batch_size[b], sp->rank, sp->world, &lo, &hi);
		log->batch_first[b] = log->n;
		log->n += hi - lo;
	}
	log->batch_first[log->nbatches] = log->n;
	return 0;
}

static int alloc_samples(struct click_log *log)
{
	size_t n = (size_t)log->n;

	log->dense = malloc((n ? n : 1) * DLRM_DENSE * sizeof(float));
	log->label = malloc((n ? n : 1) * sizeof(float));
	log->oracle = malloc((n ? n : 1) * sizeof(float));
	if (!log->dense || !log->label || !log->oracle)
		return -1;
	for (int t = 0; t < DLRM_TABLES; t++) {
		size_t most = (n ? n : 1) * (size_t)dlrm_features[t].max_bag;

		log->offsets[t] = malloc((n + 1) * sizeof(int64_t));
		log->ids[t] = malloc(most * sizeof(int64_t));
		if (!log->offsets[t] || !log->ids[t])
			return -1;
		log->offsets[t][0] = 0;
	}
	return 0;
}

int click_log_make(struct click_log *log, const struct log_spec *sp)
{
	struct planted pl;
	int64_t nids[DLRM_TABLES] = { 0 }, i = 0;

	memset(log, 0, sizeof(*log));
	if (sp->batch < 1 || sp->count < 0 || plan_batches(log, sp) ||
	    alloc_samples(log))
		return -1;
	planted_init(&pl, sp->seed);
	for (int64_t b = 0; b < log->nbatches; b++) {
		int64_t lo, hi;
		int64_t g0 = sp->first + b * sp->batch;

		rank_slice(log->batch_size[b], sp->rank, sp->world, &lo, &hi);
		for (int64_t s = lo; s < hi; s++)
			make_sample(&pl, (uint64_t)(g0 + s), log, i++, nids);
	}
	return 0;
}

void click_log_free(struct click_log *log)
{
	free(log->batch_first);
	free(log->batch_size);
	free(log->dense);
	free(log->label);
	free(log->oracle);
	for (int t = 0; t < DLRM_TABLES; t++) {
		free(log->offsets[t]);
		free(log->ids[t]);
	}
	memset(log, 0, sizeof(*log));
}
