/*
 * loss.c - the loss of skip-gram with negative sampling for one pair, and
 * its gradients, as a host framework would compute them: plain C, apart
 * from the library, so that examples/word2vec/word2vec_check can test
 * them against central differences.
 *
 * For a pair (centre w, context c) with negatives n_1 .. n_K, h the row of
 * w in the input table and u_t the row of t in the output table:
 *
 *     loss = -log sigmoid(h . u_c) - sum_k log sigmoid(-h . u_nk)
 */
#include <math.h>
#include <string.h>

#include "word2vec.h"

/* Eight partial sums, which the compiler can keep in one vector. */
static float dot(const float *a, const float *b, int n)
{
	float part[8] = { 0 }, s = 0;
	int c = 0;

	for (; c + 8 <= n; c += 8)
		for (int k = 0; k < 8; k++)
			part[k] += a[c + k] * b[c + k];
	for (; c < n; c++)
		s += a[c] * b[c];
	for (int k = 0; k < 8; k++)
		s += part[k];
	return s;
}

/* y += a x, eight columns at a time as dot() */
static void axpy(float a, const float *restrict x, float *restrict y, int n)
{
	int c = 0;

	for (; c + 8 <= n; c += 8)
		for (int k = 0; k < 8; k++)
			y[c + k] += a * x[c + k];
	for (; c < n; c++)
		y[c] += a * x[c];
}

/* y = a x */
static void scale(float a, const float *restrict x, float *restrict y,
		  int n)
{
	int c = 0;

	for (; c + 8 <= n; c += 8)
		for (int k = 0; k < 8; k++)
			y[c + k] = a * x[c + k];
	for (; c < n; c++)
		y[c] = a * x[c];
}

float w2v_pair_loss(int dim, int negative, const float *restrict h,
		    const float *restrict u, float *restrict gh,
		    float *restrict gu)
{
	float loss = 0;

	memset(gh, 0, (size_t)dim * sizeof(*gh));
	for (int k = 0; k <= negative; k++) {
		const float *uk = u + (size_t)k * dim;
		float *guk = gu + (size_t)k * dim;
		float s = dot(h, uk, dim), e, g;

		/* past +-30 the loss is linear and the gradient saturated */
		s = s > 30 ? 30 : s < -30 ? -30 : s;
		e = expf(-s);
		/* d loss / d s = sigmoid(s) - label; loss -log sigmoid(s)
		 * = log(1 + e^-s) for the context, -log sigmoid(-s) =
		 * s + log(1 + e^-s) for a negative */
		g = 1.0f / (1.0f + e) - (k == 0);
		loss += logf(1 + e) + (k == 0 ? 0 : s);
		axpy(g, uk, gh, dim);
		scale(g, h, guk, dim);
	}
	return loss;
}
