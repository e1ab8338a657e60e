/*
 * dlrm_check.c - checks of the dense side of the DLRM example:
 *
 *  1. every matrix product the build has (plain loops, and oneDNN's when
 *     configure found it) against a triple loop in double written here,
 *     on odd shapes, with every transpose, with and without bias, each
 *     shape twice on fresh buffers (oneDNN reuses a cached primitive);
 *  2. the interaction, the loss and the AUC (with ties, and NaN scores)
 *     against formulas written here;
 *  3. the whole backward (loss, top MLP, interaction, bottom MLP) against
 *     central differences of the forward, for every dense parameter and
 *     every pooled embedding value, on a tiny batch.
 *
 * Exits 0 when all pass, 1 otherwise, with a line per failure.
 */
#include "config.h"		/* HAVE_DNNL */

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "examples/dlrm/dlrm.h"

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

static uint64_t rng = 12345;

/* Uniform in [-1, 1). */
static float uniform(void)
{
	return (float)(2 * unit(&rng) - 1);
}

static float *random_array(size_t n)
{
	float *v = malloc((n ? n : 1) * sizeof(*v));

	if (!v) {
		fputs("dlrm_check: out of memory\n", stderr);
		exit(99);
	}
	for (size_t i = 0; i < n; i++)
		v[i] = uniform();
	return v;
}

/* ---- 1. matrix products ---- */

struct shape {
	int m, n, k;
};

/* op(A)(i, p) and op(B)(p, j) as matmul.h defines them. */
static double a_at(const float *a, unsigned fl, int m, int k, int i, int p)
{
	if (fl & MATMUL_TRANS_A)
		return a[(size_t)p * m + i];
	return a[(size_t)i * k + p];
}

static double b_at(const float *b, unsigned fl, int n, int k, int p, int j)
{
	if (fl & MATMUL_TRANS_B)
		return b[(size_t)j * k + p];
	return b[(size_t)p * n + j];
}

/* C against the sum in double; a float sum of k products is off by at
 * most about k units of rounding of the sum of their magnitudes, so the
 * bound is (k + 2) FLT_EPSILON times that (twice the worst case). */
static int compare_product(const struct shape *s, unsigned fl,
			   const float *a, const float *b, const float *bias,
			   const float *c)
{
	for (int i = 0; i < s->m; i++)
		for (int j = 0; j < s->n; j++) {
			double sum = bias ? bias[j] : 0;
			double mag = fabs(sum), got;

			for (int p = 0; p < s->k; p++) {
				double x = a_at(a, fl, s->m, s->k, i, p) *
					   b_at(b, fl, s->n, s->k, p, j);

				sum += x;
				mag += fabs(x);
			}
			got = c[(size_t)i * s->n + j];
			mag *= (s->k + 2) * FLT_EPSILON;
			if (!(fabs(got - sum) <= mag))
				return -1;
		}
	return 0;
}

static void check_product(struct matmul *mm, const struct shape *s,
			  unsigned fl, bool with_bias)
{
	size_t na = (size_t)s->m * s->k, nb = (size_t)s->k * s->n;
	float *a = random_array(na), *b = random_array(nb);
	float *bias = with_bias ? random_array((size_t)s->n) : NULL;
	float *c = random_array((size_t)s->m * s->n);	/* overwritten */

	if (matmul(mm, fl, s->m, s->n, s->k, a, b, bias, c))
		fail("%s: m %d n %d k %d flags %u: the product failed",
		     matmul_name(mm), s->m, s->n, s->k, fl);
	else if (compare_product(s, fl, a, b, bias, c))
		fail("%s: m %d n %d k %d flags %u bias %d: wrong values",
		     matmul_name(mm), s->m, s->n, s->k, fl, with_bias);
	free(a);
	free(b);
	free(bias);
	free(c);
}

static void check_products(struct matmul *mm)
{
	static const struct shape shapes[] = {
		{ 1, 1, 1 }, { 1, 7, 3 }, { 5, 1, 9 }, { 3, 5, 7 },
		{ 17, 13, 64 }, { 33, 65, 17 }, { 64, 52, 255 },
		{ 127, 3, 1 }, { 2, 3, 0 }, { 0, 4, 5 }, { 4, 0, 5 },
	};
	int count = 0;

	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
		for (unsigned fl = 0; fl < 4; fl++)
			for (int rep = 0; rep < 4; rep++, count++)
				check_product(mm, &shapes[i], fl, rep & 1);
	printf("%s: %d products checked\n", matmul_name(mm), count);
}

/* ---- 2. interaction and loss ---- */

static void check_interaction(void)
{
	enum { N = 3, NVEC = 4, DIM = 5 };
	float *z[NVEC], *out = random_array((size_t)N * (DIM + 6));
	int width = interact_width(NVEC, DIM);

	if (width != DIM + NVEC * (NVEC - 1) / 2)
		fail("interaction width %d", width);
	for (int v = 0; v < NVEC; v++)
		z[v] = random_array((size_t)N * DIM);
	interact_forward(N, NVEC, DIM, (const float *const *)z, out);
	for (int s = 0; s < N; s++) {
		const float *o = out + (size_t)s * width;
		int col = DIM;

		for (int c = 0; c < DIM; c++)
			if (o[c] != z[0][s * DIM + c])
				fail("interaction: z0 not copied");
		/* the pairs, column by column of the upper triangle */
		for (int j = 1; j < NVEC; j++)
			for (int i = 0; i < j; i++, col++) {
				double d = 0;

				for (int c = 0; c < DIM; c++)
					d += (double)z[i][s * DIM + c] *
					     z[j][s * DIM + c];
				if (fabs(o[col] - d) > 1e-5)
					fail("interaction: <z%d, z%d>", i, j);
			}
	}
	for (int v = 0; v < NVEC; v++)
		free(z[v]);
	free(out);
	printf("interaction checked\n");
}

static void check_loss(void)
{
	static const float logit[] = { -30, -2.5f, -0.1f, 0, 0.7f, 3, 40 };
	static const float label[] = { 0, 1, 0, 1, 1, 0, 1 };

	for (int i = 0; i < 7; i++) {
		double p = 1 / (1 + exp(-(double)logit[i]));
		double want = label[i] > 0 ? -log(p) : -log1p(-p);
		double got = net_loss(&logit[i], &label[i], 1);

		if (fabs(got - want) > 1e-9 * (1 + want))
			fail("loss of logit %g label %g: %g, not %g",
			     logit[i], label[i], got, want);
	}
	printf("loss checked\n");
}

/* The AUC by its definition: over every (click, non-click) pair, 1 when
 * the click scores higher, 1/2 on a tie. */
static double auc_by_pairs(const float *score, const float *label, int n)
{
	double sum = 0, pairs = 0;

	for (int i = 0; i < n; i++)
		for (int j = 0; j < n; j++)
			if (label[i] > 0.5f && label[j] < 0.5f) {
				sum += score[i] > score[j] ? 1 :
				       score[i] == score[j] ? 0.5 : 0;
				pairs++;
			}
	return sum / pairs;
}

/* NaN scores rank as +infinity would: above the rest, tied together. */
static void check_auc_nan(float *score, const float *label, int n)
{
	double got, want;

	for (int i = 0; i < n; i += 7)
		score[i] = INFINITY;
	want = auc_by_pairs(score, label, n);
	for (int i = 0; i < n; i += 7)
		score[i] = NAN;
	got = auc(score, label, n);
	if (!(fabs(got - want) < 1e-12))
		fail("auc with NaN scores %.15f, by pairs %.15f", got, want);
}

static void check_auc(void)
{
	enum { N = 301 };
	float score[N], label[N];
	double got, want;

	/* few distinct scores, so that most pairs tie */
	for (int i = 0; i < N; i++) {
		score[i] = (float)(int)(4 * uniform());
		label[i] = uniform() + 0.2f * score[i] > 0;
	}
	got = auc(score, label, N);
	want = auc_by_pairs(score, label, N);
	if (!(fabs(got - want) < 1e-12))
		fail("auc %.15f, by pairs %.15f", got, want);
	check_auc_nan(score, label, N);
	for (int i = 0; i < N; i++)
		label[i] = 1;
	if (!isnan(auc(score, label, N)))
		fail("auc of one class is not NaN");
	printf("auc checked (%.4f with ties)\n", want);
}

/* ---- 3. the backward against central differences ---- */

/*
 * Within a region where no ReLU changes state, the logit is linear in any
 * single parameter or embedding value (the interaction multiplies two
 * different vectors, each linear in it), so the loss is the logistic loss
 * of a linear function of it, whose third derivative is small: a central
 * difference with a step h = 1e-2 is off by about h^2 / 6 times that, a
 * few 1e-6 of the gradient, and the float forward's rounding (some 1e-7
 * on the loss) adds about 1e-7 / 2h = 5e-6.  The tolerance allows four
 * times each, tight enough that an error of 1% in one term of the
 * backward fails.  A step that flips a ReLU breaks the linearity: such
 * values are skipped (counted), found by comparing which hidden units
 * are active.
 */
#define FD_STEP 1e-2f
#define FD_ATOL 2e-5
#define FD_RTOL 2e-5

enum { FD_N = 6, FD_TABLES = 3, FD_DIM = 3, FD_DENSE = 5 };

struct fd_case {
	struct net net;
	float *dense, *label, *emb[FD_TABLES];
};

static double loss_of(struct fd_case *fc)
{
	const float *logit = net_forward(&fc->net, FD_N, fc->dense,
					 (const float *const *)fc->emb);

	return logit ? net_loss(logit, fc->label, FD_N) / FD_N : NAN;
}

/* A hash of which hidden units of the last forward passed their ReLU. */
static uint64_t relu_pattern(const struct net *net)
{
	const struct mlp *mlps[2] = { &net->bottom, &net->top };
	uint64_t h = 0xcbf29ce484222325ull;

	for (int i = 0; i < 2; i++)
		for (int l = 0; l < mlps[i]->nlayers; l++) {
			const struct mlp_layer *y = &mlps[i]->layer[l];
			const float *act = mlps[i]->act[l + 1];

			for (int j = 0; y->relu && j < FD_N * y->out; j++)
				h = (h ^ (act[j] > 0)) * 0x100000001b3ull;
		}
	return h;
}

struct fd_stats {
	int checked, skipped;
	double worst;	/* largest error over its tolerance */
};

/* Compare the gradient `an` of *x with a central difference. */
static void fd_one(struct fd_case *fc, float *x, double an, uint64_t pat,
		   struct fd_stats *st, const char *what, int idx)
{
	float keep = *x, hi = keep + FD_STEP, lo = keep - FD_STEP;
	double lp, lm, fd, err;
	uint64_t pp, pm;

	*x = hi;
	lp = loss_of(fc);
	pp = relu_pattern(&fc->net);
	*x = lo;
	lm = loss_of(fc);
	pm = relu_pattern(&fc->net);
	*x = keep;
	if (pp != pat || pm != pat) {
		st->skipped++;
		return;
	}
	fd = (lp - lm) / ((double)hi - (double)lo);
	err = fabs(fd - an) / (FD_ATOL + FD_RTOL * fabs(an));
	st->checked++;
	if (err > st->worst)
		st->worst = err;
	if (!(err <= 1))
		fail("gradient of %s %d: backward %.7g, differences %.7g",
		     what, idx, an, fd);
}

static void fd_setup(struct fd_case *fc, struct matmul *mm)
{
	struct net_shape s = {
		.ndense = FD_DENSE, .dim = FD_DIM, .ntables = FD_TABLES,
		.bottom = { FD_DENSE, 6, FD_DIM }, .nbottom = 2,
		.top = { interact_width(FD_TABLES + 1, FD_DIM), 7, 4, 1 },
		.ntop = 3,
	};

	rng = 777;	/* the same case whatever the checks before took */
	if (net_init(&fc->net, &s, mm, FD_N, 7, 1e-3f)) {
		fputs("dlrm_check: net_init failed\n", stderr);
		exit(99);
	}
	/* biases too, so that units start on both sides of their ReLU */
	for (size_t i = 0; i < fc->net.nparams; i++)
		fc->net.params[i] = 0.7f * uniform();
	fc->dense = random_array(FD_N * FD_DENSE);
	fc->label = random_array(FD_N);
	for (int i = 0; i < FD_N; i++)
		fc->label[i] = i % 3 == 0;
	for (int t = 0; t < FD_TABLES; t++)
		fc->emb[t] = random_array(FD_N * FD_DIM);
}

static void check_gradients(struct matmul *mm)
{
	struct fd_case fc;
	struct fd_stats st = { 0, 0, 0 };
	float *demb[FD_TABLES], *grads;
	uint64_t pat;

	fd_setup(&fc, mm);
	for (int t = 0; t < FD_TABLES; t++)
		demb[t] = random_array(FD_N * FD_DIM);
	grads = random_array(fc.net.nparams);
	if (!(loss_of(&fc) >= 0) ||
	    net_backward(&fc.net, FD_N, fc.label, 1.0f / FD_N, demb)) {
		fail("forward or backward of the tiny network");
		return;
	}
	pat = relu_pattern(&fc.net);
	memcpy(grads, fc.net.grads, fc.net.nparams * sizeof(float));
	for (size_t i = 0; i < fc.net.nparams; i++)
		fd_one(&fc, &fc.net.params[i], grads[i], pat, &st,
		       "parameter", (int)i);
	for (int t = 0; t < FD_TABLES; t++)
		for (int i = 0; i < FD_N * FD_DIM; i++)
			fd_one(&fc, &fc.emb[t][i], demb[t][i], pat, &st,
			       "embedding value", t * FD_N * FD_DIM + i);
	printf("gradients: %d values checked (worst error %.2f of its "
	       "tolerance), %d skipped at a ReLU\n", st.checked, st.worst,
	       st.skipped);
	/* most values must be checked, not skipped (this case skips one) */
	if (st.skipped * 4 > st.checked + st.skipped)
		fail("%d of %d values skipped", st.skipped,
		     st.checked + st.skipped);
	for (int t = 0; t < FD_TABLES; t++) {
		free(demb[t]);
		free(fc.emb[t]);
	}
	free(grads);
	free(fc.dense);
	free(fc.label);
	net_free(&fc.net);
}

int main(void)
{
	struct matmul *ref = matmul_ref_create();
	struct matmul *mm = matmul_create(1);

	if (!ref || !mm) {
		fputs("dlrm_check: no matrix product\n", stderr);
		return 99;
	}
	check_products(ref);
#ifdef HAVE_DNNL
	check_products(mm);
#endif
	check_interaction();
	check_loss();
	check_auc();
	/* the backward with the product the dlrm program uses */
	printf("backward with %s\n", matmul_name(mm));
	check_gradients(mm);
	matmul_destroy(mm);
	matmul_destroy(ref);
	printf("%s\n", failures ? "FAILED" : "all passed");
	return failures ? 1 : 0;
}
