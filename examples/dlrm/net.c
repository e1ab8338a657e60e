/*
 * net.c - the dense part of the model: bottom MLP, dot interaction, top
 * MLP, the logistic loss, and Adam over every dense parameter.
 *
 * The parameters of both MLPs live in one buffer, and so do their
 * gradients, so that a step averages them across ranks with one
 * shemb_allreduce.
 *
 * The dense parameters take Adam rather than SGD with momentum: their
 * gradients differ in scale by orders of magnitude from layer to layer
 * (the bottom MLP is reached through products of embeddings; the last
 * layer sees the loss directly) and with the batch size, and Adam's step
 * is invariant to that scale, so one learning rate (1e-3, Adam's usual)
 * serves every layer, --batch and --dim.  The embedding rows take
 * Adagrad, applied by the library, which adapts the same way per value.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "examples/dlrm/dlrm.h"

#define ADAM_BETA1 0.9f
#define ADAM_BETA2 0.999f
#define ADAM_EPS 1e-8f

void net_shape_default(struct net_shape *s, int ntables, int dim)
{
	*s = (struct net_shape){
		.ndense = DLRM_DENSE, .dim = dim, .ntables = ntables,
		.bottom = { DLRM_DENSE, 64, dim }, .nbottom = 2,
		.top = { interact_width(ntables + 1, dim), 64, 32, 1 },
		.ntop = 3,
	};
}

static int alloc_buffers(struct net *net)
{
	const struct net_shape *s = &net->shape;
	int width = s->top[0];
	size_t cap = (size_t)net->cap;

	net->params = calloc(net->nparams, sizeof(float));
	/* one float more: see struct net */
	net->grads = calloc(net->nparams + 1, sizeof(float));
	net->adam_m = calloc(net->nparams, sizeof(float));
	net->adam_v = calloc(net->nparams, sizeof(float));
	net->top_in = malloc(cap * width * sizeof(float));
	net->dtop_in = malloc(cap * width * sizeof(float));
	net->dz0 = malloc(cap * s->dim * sizeof(float));
	net->dlogit = malloc(cap * sizeof(float));
	return net->params && net->grads && net->adam_m && net->adam_v &&
	       net->top_in && net->dtop_in && net->dz0 && net->dlogit ? 0 : -1;
}

int net_init(struct net *net, const struct net_shape *s, struct matmul *mm,
	     int cap, uint64_t seed, float lr)
{
	size_t nbottom = mlp_param_count(s->nbottom, s->bottom);

	memset(net, 0, sizeof(*net));
	net->shape = *s;
	net->cap = cap;
	net->mm = mm;
	net->lr = lr;
	if (s->ntables > DLRM_TABLES || s->bottom[0] != s->ndense ||
	    s->bottom[s->nbottom] != s->dim || s->top[s->ntop] != 1 ||
	    s->top[0] != interact_width(s->ntables + 1, s->dim))
		return -1;
	net->nparams = nbottom + mlp_param_count(s->ntop, s->top);
	if (alloc_buffers(net) ||
	    mlp_init(&net->bottom, s->nbottom, s->bottom, true, cap,
		     net->params, net->grads) ||
	    mlp_init(&net->top, s->ntop, s->top, false, cap,
		     net->params + nbottom, net->grads + nbottom))
		return -1;
	/* the same seed on every rank: every rank starts alike */
	mlp_init_weights(&net->bottom, seed);
	mlp_init_weights(&net->top, seed + 1);
	return 0;
}

void net_free(struct net *net)
{
	mlp_free(&net->bottom);
	mlp_free(&net->top);
	free(net->params);
	free(net->grads);
	free(net->adam_m);
	free(net->adam_v);
	free(net->top_in);
	free(net->dtop_in);
	free(net->dz0);
	free(net->dlogit);
	memset(net, 0, sizeof(*net));
}

const float *net_forward(struct net *net, int n, const float *dense,
			 const float *const *emb)
{
	const struct net_shape *s = &net->shape;
	const float *z0 = mlp_forward(&net->bottom, net->mm, dense, n);

	if (!z0)
		return NULL;
	net->z[0] = z0;
	for (int t = 0; t < s->ntables; t++)
		net->z[t + 1] = emb[t];
	interact_forward(n, s->ntables + 1, s->dim, net->z, net->top_in);
	net->logit = mlp_forward(&net->top, net->mm, net->top_in, n);
	return net->logit;
}

/* -log(sigmoid(x)) for a click, -log(1 - sigmoid(x)) for none, written so
 * that neither overflows: max(x, 0) - x y + log(1 + e^-|x|). */
double net_loss(const float *logit, const float *label, int64_t n)
{
	double sum = 0;

	for (int64_t i = 0; i < n; i++) {
		double x = logit[i];

		sum += fmax(x, 0) - x * label[i] + log1p(exp(-fabs(x)));
	}
	return sum;
}

static float sigmoid(float x)
{
	return x >= 0 ? 1 / (1 + expf(-x)) : expf(x) / (1 + expf(x));
}

int net_backward(struct net *net, int n, const float *label, float scale,
		 float *const *demb)
{
	const struct net_shape *s = &net->shape;
	float *dz[1 + DLRM_TABLES];

	/* d loss / d logit = sigmoid(logit) - label, per sample */
	for (int i = 0; i < n; i++)
		net->dlogit[i] = (sigmoid(net->logit[i]) - label[i]) * scale;
	if (mlp_backward(&net->top, net->mm, net->dlogit, n, net->dtop_in))
		return -1;
	dz[0] = net->dz0;
	for (int t = 0; t < s->ntables; t++)
		dz[t + 1] = demb[t];
	interact_backward(n, s->ntables + 1, s->dim, net->z, net->dtop_in,
			  dz);
	return mlp_backward(&net->bottom, net->mm, net->dz0, n, NULL);
}

void net_adam_step(struct net *net)
{
	float c1, c2;

	net->adam_t++;
	/* bias corrections of the moments, which start at zero */
	c1 = 1 - powf(ADAM_BETA1, (float)net->adam_t);
	c2 = 1 - powf(ADAM_BETA2, (float)net->adam_t);
	for (size_t i = 0; i < net->nparams; i++) {
		float g = net->grads[i], m, v;

		m = ADAM_BETA1 * net->adam_m[i] + (1 - ADAM_BETA1) * g;
		v = ADAM_BETA2 * net->adam_v[i] + (1 - ADAM_BETA2) * g * g;
		net->adam_m[i] = m;
		net->adam_v[i] = v;
		net->params[i] -= net->lr * (m / c1) /
				  (sqrtf(v / c2) + ADAM_EPS);
	}
}
