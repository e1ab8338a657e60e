/*
 * mlp.c - fully connected layers with ReLU, forward and backward, on the
 * matrix product of matmul.h.  A layer computes Y = X W + b for a batch
 * X (rows: samples), so its backward is dX = dY W^T, dW = X^T dY and
 * db = the column sums of dY.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "examples/dlrm/dlrm.h"

size_t mlp_param_count(int nlayers, const int *width)
{
	size_t n = 0;

	for (int l = 0; l < nlayers; l++)
		n += (size_t)width[l] * width[l + 1] + width[l + 1];
	return n;
}

static int widest(const struct mlp *m)
{
	int w = m->layer[0].in;

	for (int l = 0; l < m->nlayers; l++)
		if (m->layer[l].out > w)
			w = m->layer[l].out;
	return w;
}

int mlp_init(struct mlp *m, int nlayers, const int *width, bool relu_last,
	     int cap, float *params, float *grads)
{
	size_t off = 0;

	memset(m, 0, sizeof(*m));
	if (nlayers < 1 || nlayers > DLRM_MAX_LAYERS)
		return -1;
	m->nlayers = nlayers;
	m->cap = cap;
	for (int l = 0; l < nlayers; l++) {
		struct mlp_layer *y = &m->layer[l];
		size_t nw = (size_t)width[l] * width[l + 1];

		y->in = width[l];
		y->out = width[l + 1];
		y->relu = l < nlayers - 1 || relu_last;
		y->w = params + off;
		y->gw = grads + off;
		y->b = params + off + nw;
		y->gb = grads + off + nw;
		off += nw + (size_t)y->out;
		m->out[l] = malloc((size_t)cap * y->out * sizeof(float));
		if (!m->out[l])
			return -1;
	}
	for (int i = 0; i < 2; i++) {
		m->grad[i] = malloc((size_t)cap * widest(m) * sizeof(float));
		if (!m->grad[i])
			return -1;
	}
	return 0;
}

void mlp_free(struct mlp *m)
{
	for (int l = 0; l < m->nlayers; l++)
		free(m->out[l]);
	free(m->grad[0]);
	free(m->grad[1]);
	memset(m, 0, sizeof(*m));
}

void mlp_init_weights(struct mlp *m, uint64_t seed)
{
	uint64_t rng = mix64(seed);

	for (int l = 0; l < m->nlayers; l++) {
		struct mlp_layer *y = &m->layer[l];
		double r = sqrt(6.0 / (y->in + y->out));

		for (size_t i = 0; i < (size_t)y->in * y->out; i++)
			y->w[i] = (float)((2 * unit(&rng) - 1) * r);
		memset(y->b, 0, (size_t)y->out * sizeof(float));
	}
}

const float *mlp_forward(struct mlp *m, struct matmul *mm, const float *x,
			 int n)
{
	m->act[0] = x;
	for (int l = 0; l < m->nlayers; l++) {
		const struct mlp_layer *y = &m->layer[l];
		float *out = m->out[l];

		if (matmul(mm, 0, n, y->out, y->in, m->act[l], y->w, y->b,
			   out))
			return NULL;
		if (y->relu)
			for (size_t i = 0; i < (size_t)n * y->out; i++)
				out[i] = out[i] > 0 ? out[i] : 0;
		m->act[l + 1] = out;
	}
	return m->act[m->nlayers];
}

/* g = dy where the layer's ReLU passed its input, else 0.  An output
 * above zero is exactly an input above zero. */
static void relu_backward(const float *y, const float *dy, float *g,
			  size_t count)
{
	for (size_t i = 0; i < count; i++)
		g[i] = y[i] > 0 ? dy[i] : 0;
}

static void column_sums(const float *g, int n, int width, float *sum)
{
	memset(sum, 0, (size_t)width * sizeof(*sum));
	for (int i = 0; i < n; i++)
		for (int j = 0; j < width; j++)
			sum[j] += g[(size_t)i * width + j];
}

int mlp_backward(struct mlp *m, struct matmul *mm, const float *dy, int n,
		 float *dx)
{
	const float *g = dy;	/* gradient of the current layer's output */

	for (int l = m->nlayers - 1; l >= 0; l--) {
		const struct mlp_layer *y = &m->layer[l];
		float *next = m->grad[l & 1];

		if (y->relu) {
			float *masked = m->grad[(l & 1) ^ 1];

			relu_backward(m->act[l + 1], g, masked,
				      (size_t)n * y->out);
			g = masked;
		}
		/* dW = X^T dY: X is stored n x in, so transposed */
		if (matmul(mm, MATMUL_TRANS_A, y->in, y->out, n, m->act[l], g,
			   NULL, y->gw))
			return -1;
		column_sums(g, n, y->out, y->gb);
		if (l == 0 && !dx)
			break;
		/* dX = dY W^T: W is stored in x out, so transposed */
		if (matmul(mm, MATMUL_TRANS_B, n, y->in, y->out, g, y->w, NULL,
			   l == 0 ? dx : next))
			return -1;
		g = next;
	}
	return 0;
}
