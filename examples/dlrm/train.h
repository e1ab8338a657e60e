/*
 * train.h - the model over libshemb (train.c): the context and the
 * embedding tables, the dense network, and the training and evaluation
 * passes over a click log, on one rank or many.
 */
#ifndef DLRM_TRAIN_H
#define DLRM_TRAIN_H

#include <shemb.h>

#include "examples/dlrm/dlrm.h"

struct train_opts {
	int threads;		/* the library's threads; 0: its default */
	int dense_threads;	/* the products'; 0: one */
	int batch;		/* samples per step over all ranks */
	int dim;		/* embedding width, bottom MLP output */
	float lr;		/* Adam, dense parameters */
	float emb_lr;		/* Adagrad, embedding rows */
	uint64_t seed;		/* dense weights and embedding rows */
};

struct trainer {
	shemb_ctx *ctx;
	int rank, world;
	int cap;		/* most samples of a batch on one rank */
	shemb_table *table[DLRM_TABLES];
	struct shemb_bags bags[DLRM_TABLES];
	int64_t *offsets[DLRM_TABLES];	/* a batch's bags, from 0 */
	float *emb[DLRM_TABLES];	/* its pooled embeddings */
	float *demb[DLRM_TABLES];	/* and their gradients */
	struct matmul *mm;
	struct net net;
};

/* The evaluation of a held-out log, over every rank's samples. */
struct eval {
	double loss;		/* mean binary cross-entropy */
	double auc;
	double oracle_auc;	/* of the planted log-odds */
};

/* Collective: every rank calls it alike.  0, or a negative SHEMB_E* code
 * (or -1) after a message on stderr; trainer_free() either way.  So are
 * the calls below but trainer_free(), and they fail on every rank
 * together, whichever rank's failure it was. */
int trainer_init(struct trainer *t, const struct train_opts *o);
void trainer_free(struct trainer *t);
/* One pass over log: a step per batch; *loss gets the mean training loss
 * over every rank's samples. */
int train_epoch(struct trainer *t, const struct click_log *log,
		double *loss);
/* The model's loss and AUC on log (and the oracle's AUC); every rank
 * scores its own samples, and the scores meet on every rank. */
int evaluate(struct trainer *t, const struct click_log *log,
	     struct eval *e);
/* Whether every rank holds the same dense parameters, bit for bit. */
int dense_in_sync(struct trainer *t, bool *same);
/* Collective: after a step of this rank's own whose status is rc, the
 * status of all ranks: 0 when rc is 0 on every rank; else rc where it is
 * not 0, and -1 elsewhere (after a message).  A rank that stopped alone
 * would leave the others waiting in their next collective. */
int ranks_agree(struct trainer *t, int rc);

#endif /* DLRM_TRAIN_H */
