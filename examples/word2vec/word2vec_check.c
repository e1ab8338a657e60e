/*
 * word2vec_check.c - checks of the parts of examples/word2vec that decide
 * what it learns, against references written here:
 *
 *  1. the loss of a pair and its gradients (loss.c) against the loss
 *     written here in double and its central differences;
 *  2. the negatives' alias table (vocab.c): the probability of each word
 *     that the table gives, worked out exactly from the table, against
 *     count^0.75 normalised; and draws from it;
 *  3. subsampling: the keep probability of each word against word2vec's
 *     formula, and the pairs (pairs.c) keeping words that often;
 *  4. the vocabulary's order (count descending, then bytewise), and the
 *     learning rate's word clock of the pairs: a word counts when it
 *     becomes a centre, and every word of the text counts once.
 *
 * Exits 0 when all pass, 1 otherwise, with a line per failure.  Needs
 * nothing of libshemb.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "word2vec.h"

static int failures;

static void __attribute__((format(printf, 1, 2))) fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("FAIL: ", stdout);
	vprintf(fmt, ap);
	putchar('\n');
	va_end(ap);
	failures++;
}

/* ---- 1. the loss and its gradients ---- */

/* -log sigmoid(h . u_0) - sum_k log sigmoid(-h . u_k), in double */
static double ref_loss(int dim, int neg, const double *h, const double *u)
{
	double loss = 0;

	for (int k = 0; k <= neg; k++) {
		double s = 0;

		for (int c = 0; c < dim; c++)
			s += h[c] * u[k * dim + c];
		/* -log sigmoid(x) = log(1 + e^-x) */
		loss += log1p(exp(k == 0 ? -s : s));
	}
	return loss;
}

/* d ref_loss / d x[i] by central differences */
static double central(int dim, int neg, double *h, double *u, double *x)
{
	const double eps = 1e-5;
	double x0 = *x, lp, lm;

	*x = x0 + eps;
	lp = ref_loss(dim, neg, h, u);
	*x = x0 - eps;
	lm = ref_loss(dim, neg, h, u);
	*x = x0;
	return (lp - lm) / (2 * eps);
}

static double gradient_case(int dim, int neg, uint64_t *rng)
{
	int nu = (neg + 1) * dim;
	float *hf = malloc(dim * sizeof(*hf)), *uf = malloc(nu * sizeof(*uf));
	float *gh = malloc(dim * sizeof(*gh)), *gu = malloc(nu * sizeof(*gu));
	double *h = malloc(dim * sizeof(*h)), *u = malloc(nu * sizeof(*u));
	double worst = 0, loss, ref;

	if (!hf || !uf || !gh || !gu || !h || !u) {
		fail("gradients: out of memory");
		goto out;
	}
	/* rows of length about 1.5: h . u well inside +-30 */
	for (int c = 0; c < dim; c++)
		h[c] = hf[c] = (float)((w2v_unit(rng) - 0.5) * 5 / sqrt(dim));
	for (int c = 0; c < nu; c++)
		u[c] = uf[c] = (float)((w2v_unit(rng) - 0.5) * 5 / sqrt(dim));
	loss = w2v_pair_loss(dim, neg, hf, uf, gh, gu);
	ref = ref_loss(dim, neg, h, u);
	if (fabs(loss - ref) > 1e-5 * (1 + ref))
		fail("loss, dim %d negative %d: %.8g, not %.8g", dim, neg,
		     loss, ref);
	for (int c = 0; c < dim; c++) {
		double e = fabs(gh[c] - central(dim, neg, h, u, &h[c]));

		worst = e > worst ? e : worst;
	}
	for (int c = 0; c < nu; c++) {
		double e = fabs(gu[c] - central(dim, neg, h, u, &u[c]));

		worst = e > worst ? e : worst;
	}
out:
	free(hf);
	free(uf);
	free(gh);
	free(gu);
	free(h);
	free(u);
	return worst;
}

static void check_gradients(void)
{
	static const int dims[] = { 1, 7, 8, 17, 100 };
	static const int negs[] = { 1, 5, 15 };
	uint64_t rng = 42;
	double worst = 0;

	for (size_t i = 0; i < sizeof(dims) / sizeof(dims[0]); i++) {
		for (size_t j = 0; j < sizeof(negs) / sizeof(negs[0]); j++) {
			double e = gradient_case(dims[i], negs[j], &rng);

			worst = e > worst ? e : worst;
		}
	}
	printf("gradients: largest error %.2g against central "
	       "differences\n", worst);
	if (worst > 1e-5)
		fail("gradients: error %.3g against central differences",
		     worst);
}

/* ---- the text for the vocabulary checks ---- */

#define NW 30           /* frequent words w0 .. w29, count 50 (i + 1) */
#define NZ 2000         /* rare words z0 .. z1999 */
#define SAMPLE 5e-3

/* One sentence a line, "wI zJ", in a shuffled order: wI appears
 * 50 (I + 1) times, zJ 11 or 12 times. */
static char *make_text(size_t *len)
{
	int n = 0, *order = malloc(NW * (NW + 1) / 2 * 50 * sizeof(*order));
	char *buf = malloc(NW * (NW + 1) / 2 * 50 * 16 + 16);
	uint64_t rng = 7;
	size_t at = 0;

	if (!order || !buf) {
		free(order);
		free(buf);
		return NULL;
	}
	for (int i = 0; i < NW; i++)
		for (int k = 0; k < 50 * (i + 1); k++)
			order[n++] = i;
	for (int k = n - 1; k > 0; k--) {
		int j = (int)(w2v_next(&rng) % (uint64_t)(k + 1)), t = order[k];

		order[k] = order[j];
		order[j] = t;
	}
	for (int k = 0; k < n; k++)
		at += (size_t)sprintf(buf + at, "w%d z%d\n", order[k], k % NZ);
	free(order);
	*len = at;
	return buf;
}

static int build(struct w2v_vocab *v, struct w2v_corpus *c, double sample)
{
	struct w2v_opts o = { .min_count = 1, .sample = sample };
	struct w2v_text t;

	t.buf = make_text(&t.len);
	if (!t.buf || w2v_vocab_build(&t, &o, v, c)) {
		fail("vocabulary: cannot build it");
		free(t.buf);
		return -1;
	}
	free(t.buf);
	return 0;
}

/* ---- 2. negatives ---- */

static void check_alias(const struct w2v_vocab *v)
{
	int64_t n = v->size;
	double *p = calloc(n, sizeof(*p)), *seen = calloc(n, sizeof(*seen));
	double sum = 0, worst = 0, tv = 0;
	uint64_t rng = 11;
	const long draws = 2000000;

	if (!p || !seen) {
		fail("alias: out of memory");
		goto out;
	}
	/* word i: the table's cell i keeps it with neg_prob[i], and each
	 * cell j whose alias is i gives it 1 - neg_prob[j]; cells 1 / n */
	for (int64_t j = 0; j < n; j++) {
		p[j] += v->neg_prob[j] / (double)n;
		p[v->neg_alias[j]] += (1 - (double)v->neg_prob[j]) / (double)n;
	}
	for (int64_t i = 0; i < n; i++)
		sum += pow((double)v->counts[i], 0.75);
	for (int64_t i = 0; i < n; i++) {
		double want = pow((double)v->counts[i], 0.75) / sum;
		double e = fabs(p[i] - want) / want;

		worst = e > worst ? e : worst;
	}
	printf("alias table: largest relative error %.2g against "
	       "count^0.75\n", worst);
	if (worst > 1e-5)
		fail("alias table: relative error %.3g against count^0.75",
		     worst);
	/* and the draws follow the table (total variation distance) */
	for (long k = 0; k < draws; k++)
		seen[w2v_negative(v, &rng)]++;
	for (int64_t i = 0; i < n; i++)
		tv += fabs(seen[i] / draws - p[i]) / 2;
	if (tv > 0.05)
		fail("negatives: %ld draws are %.3g from the table's "
		     "distribution", draws, tv);
out:
	free(p);
	free(seen);
}

/* ---- 3. subsampling ---- */

/* word2vec: keep a word of count f among N with probability
 * (sqrt(f / (s N)) + 1) (s N) / f */
static double ref_keep(double f, double n, double s)
{
	double p = (sqrt(f / (s * n)) + 1) * (s * n) / f;

	return p < 1 ? p : 1;
}

/* The pairs of the text with window 1: a sentence "wI zJ" gives the pair
 * (wI, zJ) when wI is kept (zJ always is), so each word's pairs as a
 * centre count the times it was kept. */
static void check_kept(const struct w2v_vocab *v, const struct w2v_corpus *c)
{
	struct w2v_opts o = { .window = 1, .negative = 1, .seed = 5 };
	struct w2v_pairs *p = malloc(sizeof(*p));
	int64_t *kept = calloc(v->size, sizeof(*kept)), centre[256];
	int64_t targets[512];
	int n, bad = 0;

	if (!p || !kept) {
		fail("subsampled pairs: out of memory");
		goto out;
	}
	w2v_pairs_init(p, c, v, &o, 0, 1);
	while ((n = w2v_pairs_fill(p, 256, centre, targets)) > 0)
		for (int i = 0; i < n; i++)
			kept[centre[i]]++;
	for (int64_t id = 0; id < v->size; id++) {
		double k = v->keep[id], f = (double)v->counts[id];
		double sd = sqrt(f * k * (1 - k));

		if (v->words[id][0] == 'w' &&
		    fabs((double)kept[id] - f * k) > 5 * sd + 1)
			bad++;
	}
	if (bad)
		fail("subsampled pairs: %d words kept far from their keep "
		     "probability", bad);
out:
	free(p);
	free(kept);
}

static void check_subsampling(const struct w2v_vocab *v,
			      const struct w2v_corpus *c)
{
	double worst = 0, n = (double)v->train_words;
	int below = 0;

	for (int64_t id = 0; id < v->size; id++) {
		double want = ref_keep((double)v->counts[id], n, SAMPLE);
		double e = fabs(v->keep[id] - want);

		worst = e > worst ? e : worst;
		below += want < 0.9;
	}
	printf("subsampling: largest error %.2g against word2vec's formula "
	       "(%d words kept less than 90%%)\n", worst, below);
	if (worst > 1e-6 || below < 5)
		fail("subsampling: keep probability off by %.3g", worst);
	check_kept(v, c);
}

/* ---- 4. the vocabulary's order; the words' clock ---- */

static void check_order(const struct w2v_vocab *v)
{
	if (v->size != NW + NZ) {
		fail("vocabulary: %lld words, not %d", (long long)v->size,
		     NW + NZ);
		return;
	}
	for (int64_t id = 1; id < v->size; id++) {
		int64_t a = v->counts[id - 1], b = v->counts[id];

		if (a < b || (a == b &&
			      strcmp(v->words[id - 1], v->words[id]) >= 0)) {
			fail("vocabulary: '%s' (%lld) before '%s' (%lld)",
			     v->words[id - 1], (long long)a, v->words[id],
			     (long long)b);
			return;
		}
	}
}

/* One line of 5000 words: the first pairs count the words of their
 * centres only, and every word counts once in all. */
static void check_clock(double sample)
{
	struct w2v_opts o = { .min_count = 1, .sample = sample,
			      .window = 5, .negative = 1, .seed = 9 };
	struct w2v_text t = { malloc(5000 * 8), 0 };
	struct w2v_vocab v;
	struct w2v_corpus c;
	struct w2v_pairs *p = malloc(sizeof(*p));
	int64_t centre[10], targets[20], first = -1;
	int n;

	if (!t.buf || !p) {
		fail("clock: out of memory");
		goto out;
	}
	for (int k = 0; k < 5000; k++)
		t.len += (size_t)sprintf(t.buf + t.len, "x%d ", k % 97);
	if (w2v_vocab_build(&t, &o, &v, &c)) {
		fail("clock: cannot build the vocabulary");
		goto out;
	}
	w2v_pairs_init(p, &c, &v, &o, 0, 1);
	while ((n = w2v_pairs_fill(p, 10, centre, targets)) > 0) {
		if (first < 0)
			first = p->words_read;
	}
	if (sample == 0 && first > 10)
		fail("clock: %lld words counted for the first 10 pairs",
		     (long long)first);
	if (p->words_read != 5000)
		fail("clock, sample %g: %lld words counted, not 5000", sample,
		     (long long)p->words_read);
	w2v_vocab_free(&v);
	w2v_corpus_free(&c);
out:
	free(t.buf);
	free(p);
}

int main(void)
{
	struct w2v_vocab v;
	struct w2v_corpus c;

	check_gradients();
	if (!build(&v, &c, SAMPLE)) {
		check_order(&v);
		check_alias(&v);
		check_subsampling(&v, &c);
		w2v_vocab_free(&v);
		w2v_corpus_free(&c);
	}
	check_clock(0);
	check_clock(1e-4);
	if (failures)
		printf("%d check%s failed\n", failures,
		       failures > 1 ? "s" : "");
	else
		printf("all checks passed\n");
	return failures ? 1 : 0;
}
