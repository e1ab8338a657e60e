/*
 * dlrm.h - the pieces of the DLRM example: the synthetic click log
 * (data.c), the dense layers (mlp.c), the dot interaction (interact.c),
 * the dense network around them with its loss and optimizer (net.c), the
 * held-out AUC (auc.c) and the training loop over libshemb (train.c).
 *
 * Layout of a step, per sample:
 *
 *   dense x (13) -> bottom MLP 13-64-d (ReLU) --------------- z0 (d) --+
 *   categorical bags -> shemb_lookup, SUM pooled -> z1 .. zT (d each) -+
 *        +-> interaction: [z0, <zi, zj> for i < j] -> top MLP -> logit
 *
 * Every array of a batch is row-major with one row per sample.
 */
#ifndef DLRM_H
#define DLRM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "examples/dlrm/matmul.h"

#define DLRM_DENSE 13		/* dense features of a sample */
#define DLRM_TABLES 8		/* categorical features, one table each */
#define DLRM_MAX_LAYERS 4	/* layers of one MLP */

/* ---- random numbers: a counter through a 64-bit mixer (splitmix64) ---- */

static inline uint64_t mix64(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in [0, 1), advancing *state. */
static inline double unit(uint64_t *state)
{
	*state += 0x9e3779b97f4a7c15ull;
	return (double)(mix64(*state) >> 11) * 0x1p-53;
}

/* ---- data.c: the synthetic click log ---- */

struct feature {
	const char *name;
	int64_t rows;		/* distinct values */
	int max_bag;		/* ids per sample: 1 .. max_bag */
	double zipf_s;		/* skew of the values' frequencies */
};

extern const struct feature dlrm_features[DLRM_TABLES];

/* Which samples a click log holds: samples first .. first + count - 1 of
 * the endless log that seed defines, cut in batches of `batch` samples,
 * of each of which this rank holds its slice. */
struct log_spec {
	uint64_t seed;
	int64_t first, count;
	int batch;
	int rank, world;
};

struct click_log {
	int64_t n;			/* samples held by this rank */
	int64_t nbatches;		/* batches, on every rank */
	int64_t *batch_first;		/* [nbatches + 1]: local index of
					 * each batch's first sample */
	int64_t *batch_size;		/* [nbatches]: samples of each batch
					 * over all ranks */
	float *dense;			/* [n][DLRM_DENSE] */
	float *label;			/* [n]: 1 click, 0 none */
	float *oracle;			/* [n]: planted logit, noiseless */
	int64_t *offsets[DLRM_TABLES];	/* [n + 1]: the bags, CSR */
	int64_t *ids[DLRM_TABLES];
};

int click_log_make(struct click_log *log, const struct log_spec *spec);
void click_log_free(struct click_log *log);

/* The part of `len` items that rank `rank` of `world` takes: [*lo, *hi). */
static inline void rank_slice(int64_t len, int rank, int world, int64_t *lo,
			      int64_t *hi)
{
	*lo = len * rank / world;
	*hi = len * (rank + 1) / world;
}

/* ---- mlp.c: fully connected layers ---- */

struct mlp_layer {
	int in, out;
	bool relu;
	float *w, *b;		/* w: [in][out], b: [out] */
	float *gw, *gb;		/* their gradients */
};

struct mlp {
	int nlayers, cap;	/* cap: most rows of a batch */
	struct mlp_layer layer[DLRM_MAX_LAYERS];
	const float *act[DLRM_MAX_LAYERS + 1];	/* act[0]: the input */
	float *out[DLRM_MAX_LAYERS];		/* act[l + 1] */
	float *grad[2];				/* backward scratch */
};

/* Weights and biases of an MLP of nlayers layers, width[0] inputs and
 * width[l + 1] outputs of layer l. */
size_t mlp_param_count(int nlayers, const int *width);
/* Lay the MLP's parameters and gradients at params and grads (each
 * mlp_param_count() floats).  Every layer but the last has a ReLU; the
 * last too with relu_last.  0, or -1 when out of memory. */
int mlp_init(struct mlp *m, int nlayers, const int *width, bool relu_last,
	     int cap, float *params, float *grads);
void mlp_free(struct mlp *m);
/* Glorot-uniform weights and zero biases, from seed. */
void mlp_init_weights(struct mlp *m, uint64_t seed);
/* The output of n rows x (n <= cap), kept for the backward; NULL when the
 * product failed.  x must stay as it is until then. */
const float *mlp_forward(struct mlp *m, struct matmul *mm, const float *x,
			 int n);
/* From dy, the gradient of the last forward's output: the gradients of
 * the parameters (overwritten) and, when dx is not NULL, of the input. */
int mlp_backward(struct mlp *m, struct matmul *mm, const float *dy, int n,
		 float *dx);

/* ---- interact.c: the dot interaction ---- */

/* Values per sample of [z0, <zi, zj> for 0 <= i < j < nvec]. */
int interact_width(int nvec, int dim);
void interact_forward(int n, int nvec, int dim, const float *const *z,
		      float *out);
/* dz[i] (n x dim each, overwritten) from dout, the gradient of out. */
void interact_backward(int n, int nvec, int dim, const float *const *z,
		       const float *dout, float *const *dz);

/* ---- net.c: the dense network, its loss and its optimizer ---- */

struct net_shape {
	int ndense, dim, ntables;
	int bottom[DLRM_MAX_LAYERS + 1];	/* widths, ndense .. dim */
	int nbottom;				/* layers */
	int top[DLRM_MAX_LAYERS + 1];		/* widths after the
						 * interaction's, .. 1 */
	int ntop;
};

struct net {
	struct net_shape shape;
	int cap;
	struct matmul *mm;
	struct mlp bottom, top;
	size_t nparams;
	float *params;		/* every weight and bias, one buffer */
	float *grads;		/* their gradients, and one float more
				 * for the caller: train.c sends a flag
				 * with them */
	float *adam_m, *adam_v;	/* Adam's moment estimates */
	long adam_t;		/* Adam steps taken */
	float lr;
	const float *z[1 + DLRM_TABLES];	/* the last forward's
						 * interaction inputs */
	float *top_in, *dtop_in, *dz0, *dlogit;
	const float *logit;	/* the last forward's, [n] */
};

/* The example's shape: bottom ndense-64-dim, top -> 64 -> 32 -> 1. */
void net_shape_default(struct net_shape *s, int ntables, int dim);
/* 0, or -1 when out of memory; weights from seed. */
int net_init(struct net *net, const struct net_shape *s, struct matmul *mm,
	     int cap, uint64_t seed, float lr);
void net_free(struct net *net);
/* Logits of n samples from their dense features and pooled embeddings
 * (emb[t]: n x dim), kept for the backward; NULL on failure. */
const float *net_forward(struct net *net, int n, const float *dense,
			 const float *const *emb);
/* Sum of the binary cross-entropy of n logits against their labels. */
double net_loss(const float *logit, const float *label, int64_t n);
/* Backward of the last forward for loss = scale * the sum of the
 * samples' losses: the gradients of the parameters (net->grads,
 * overwritten) and of the pooled embeddings (demb[t]: n x dim). */
int net_backward(struct net *net, int n, const float *label, float scale,
		 float *const *demb);
/* One Adam step of the parameters with net->grads. */
void net_adam_step(struct net *net);

/* ---- auc.c ---- */

/* Area under the ROC curve of n scores against 0/1 labels, exactly (ties
 * count half; NaN scores rank above all others, tied); NaN when one class
 * is missing.  -1 when out of memory. */
double auc(const float *score, const float *label, int64_t n);

#endif /* DLRM_H */
