/*
 * train.c - the DLRM model trained through libshemb, on one rank or many.
 *
 * Each step: shemb_lookup pools every sample's bags into its embeddings;
 * the dense network (net.c) computes the logits, the loss and its
 * gradients; shemb_backward hands the library the gradient of each pooled
 * embedding, which it turns into one gradient per distinct row and
 * applies with Adagrad where the row lives; the dense gradients are
 * summed across ranks with shemb_allreduce and Adam applies them.
 *
 * Across ranks this is EmbRace's hybrid: the tables are sharded and their
 * rows move by AlltoAll inside lookup and backward, while every rank
 * holds the whole dense network and averages its gradients by AllReduce.
 * Each rank trains on its own slice of each batch.  Every rank makes the
 * same collective calls in the same order: the lookups and backwards, the
 * dense allreduce of each step, and the gathers of an evaluation.
 *
 * So a failure of one rank's own (out of memory, a product that failed)
 * must not make it skip a collective the others still make: they would
 * wait in it until the library's timeout.  Such a rank carries on with
 * the collectives, and the ranks agree on the status before going
 * further (ranks_agree(), or a flag sent with the dense gradients), so
 * that all of them return the error together.
 */
#include "config.h"	/* HAVE_DNNL: the product matmul_create makes */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "examples/dlrm/train.h"

static int check(struct trainer *t, int rc, const char *what)
{
	if (rc)
		fprintf(stderr, "dlrm: rank %d: %s: %s: %s\n", t->rank, what,
			shemb_strerror(rc), shemb_ctx_last_error(t->ctx));
	return rc;
}

/*
 * Adagrad's accumulators start above zero.  From zero, a row's first
 * step is about lr whatever its gradient, so a row seen in one or two
 * samples learns their labels by heart, noise and all, and the held-out
 * loss rises from the second epoch on.  A sample's share of a batch's
 * gradient of a row is about 1 / batch (a logit's gradient and an
 * embedding value are about 1); starting the accumulator at ten of those
 * squared, a rare row moves in proportion to its gradient, as with SGD,
 * while a frequent one soon takes Adagrad's full steps.
 */
static float adagrad_start(int batch)
{
	return (float)(10.0 / ((double)batch * batch));
}

static int create_tables(struct trainer *t, const struct train_opts *o)
{
	for (int f = 0; f < DLRM_TABLES; f++) {
		struct shemb_table_attr a;

		shemb_table_attr_init(&a);
		a.name = dlrm_features[f].name;
		a.rows = dlrm_features[f].rows;
		a.dim = o->dim;
		a.seed = o->seed;
		a.optimizer = SHEMB_OPT_ADAGRAD;
		a.lr = o->emb_lr;
		a.expected_skew = (float)dlrm_features[f].zipf_s;
		a.initial_accumulator = adagrad_start(o->batch);
		if (check(t, shemb_table_create(t->ctx, &a, &t->table[f]),
			  "shemb_table_create"))
			return -1;
	}
	return 0;
}

int ranks_agree(struct trainer *t, int rc)
{
	int64_t failed = rc != 0;
	int rc2 = check(t, shemb_allreduce(t->ctx, &failed, &failed, 1,
					   SHEMB_I64, SHEMB_REDUCE_MAX, NULL),
			"shemb_allreduce");

	if (rc || rc2)
		return rc ? rc : rc2;
	if (failed) {
		fprintf(stderr, "dlrm: rank %d: stopping, as another rank "
			"failed\n", t->rank);
		return -1;
	}
	return 0;
}

static int alloc_batch(struct trainer *t, int dim)
{
	size_t rows = (size_t)t->cap * dim * sizeof(float);

	for (int f = 0; f < DLRM_TABLES; f++) {
		t->offsets[f] = malloc((size_t)(t->cap + 1) * sizeof(int64_t));
		t->emb[f] = malloc(rows);
		t->demb[f] = malloc(rows);
		if (!t->offsets[f] || !t->emb[f] || !t->demb[f])
			return -1;
	}
	return 0;
}

/*
 * Threads for the products: as asked, else one.  A step's products are
 * small (a batch slice times 64 by 64 at most), so a team of threads
 * gains little, and on a machine busy with other work (or other ranks)
 * it waits at every product for its slowest member: with oneDNN on a
 * 2-vCPU host shared with other work, 2 threads trained 3 to 10 times
 * slower than 1.
 */
static int dense_threads(const struct train_opts *o)
{
	return o->dense_threads > 0 ? o->dense_threads : 1;
}

/* What trainer_init makes of this rank's own, with no collective. */
static int init_local(struct trainer *t, const struct train_opts *o)
{
	struct net_shape shape;

	if (alloc_batch(t, o->dim))
		goto oom;
	t->mm = matmul_create(dense_threads(o));
	if (!t->mm)
		return -1;
	net_shape_default(&shape, DLRM_TABLES, o->dim);
	/* the same seed on every rank: identical dense weights at start */
	if (net_init(&t->net, &shape, t->mm, t->cap, o->seed, o->lr))
		goto oom;
	return 0;
oom:
	fprintf(stderr, "dlrm: rank %d: out of memory\n", t->rank);
	return -1;
}

int trainer_init(struct trainer *t, const struct train_opts *o)
{
	struct shemb_ctx_attr ca;
	int rc;

	memset(t, 0, sizeof(*t));
	shemb_ctx_attr_init(&ca);
	ca.nthreads = o->threads;
	rc = shemb_ctx_create(&ca, &t->ctx);
	if (rc) {
		fprintf(stderr, "dlrm: shemb_ctx_create: %s\n",
			shemb_ctx_last_error(NULL));
		return rc;
	}
	shemb_ctx_get_attr(t->ctx, &ca);
	t->rank = ca.rank;
	t->world = ca.world_size;
	/* the largest slice of a batch: see rank_slice() */
	t->cap = (o->batch + t->world - 1) / t->world;
	/* shemb_table_create fails on every rank alike */
	if (create_tables(t, o))
		return -1;
	return ranks_agree(t, init_local(t, o));
}

void trainer_free(struct trainer *t)
{
	shemb_ctx_destroy(t->ctx);	/* and its tables */
	net_free(&t->net);
	matmul_destroy(t->mm);
	for (int f = 0; f < DLRM_TABLES; f++) {
		free(t->offsets[f]);
		free(t->emb[f]);
		free(t->demb[f]);
	}
	memset(t, 0, sizeof(*t));
}

/* Point the bag sets at this rank's samples of batch b; returns how many.
 * The library wants each set's offsets to start at 0, so they are copied
 * less the batch's first offset; the ids are used where they are. */
static int set_batch(struct trainer *t, const struct click_log *log,
		     int64_t b)
{
	int64_t first = log->batch_first[b];
	int n = (int)(log->batch_first[b + 1] - first);

	for (int f = 0; f < DLRM_TABLES; f++) {
		const int64_t *off = log->offsets[f] + first;
		struct shemb_bags *s = &t->bags[f];

		for (int i = 0; i <= n; i++)
			t->offsets[f][i] = off[i] - off[0];
		shemb_bags_init(s);
		s->table = t->table[f];
		s->pooling = SHEMB_POOL_SUM;
		s->dim = t->net.shape.dim;
		s->nbags = n;
		s->offsets = t->offsets[f];
		s->nids = off[n] - off[0];
		s->ids = log->ids[f] + off[0];
	}
	return n;
}

/*
 * The dense gradients, summed over the ranks while the embedding
 * gradients travel to their rows' owners, then Adam.  The loss is
 * scaled by 1 / (the batch's samples over all ranks) before the
 * backward, so each rank's gradient is its share of the batch mean and
 * their sum is the mean itself (the library sums the embedding gradients
 * of all ranks the same way).
 *
 * failed: this rank's dense forward or backward of the batch (n samples)
 * failed.  It still makes both collectives, with zero gradients, and
 * says so in one float after the gradients (net.grads has room for it):
 * after the wait every rank sees the sum of the flags, and all return
 * the error together rather than skip Adam on one rank only.  (The other
 * ranks' embedding gradients of that step still reach their rows; no
 * matter, as training stops.)
 */
static int apply_gradients(struct trainer *t, int n, bool failed)
{
	float *flag = &t->net.grads[t->net.nparams];
	shemb_request *req = NULL;
	int rc, rc2;

	if (failed) {
		memset(t->net.grads, 0, t->net.nparams * sizeof(float));
		for (int f = 0; f < DLRM_TABLES; f++)
			memset(t->demb[f], 0, (size_t)n *
			       (size_t)t->net.shape.dim * sizeof(float));
	}
	*flag = failed ? 1.0f : 0.0f;
	rc = check(t, shemb_allreduce(t->ctx, t->net.grads, t->net.grads,
				      t->net.nparams + 1, SHEMB_F32,
				      SHEMB_REDUCE_SUM, &req),
		   "shemb_allreduce");
	if (rc)
		return rc;
	rc = check(t, shemb_backward(t->ctx, DLRM_TABLES, t->bags,
				     (const float *const *)t->demb),
		   "shemb_backward");
	rc2 = check(t, shemb_wait(req), "shemb_allreduce");
	shemb_request_free(req);
	if (rc || rc2)
		return rc ? rc : rc2;
	if (*flag != 0) {
		if (!failed)
			fprintf(stderr, "dlrm: rank %d: stopping, as another "
				"rank's step failed\n", t->rank);
		return -1;
	}
	net_adam_step(&t->net);
	return 0;
}

/* One step on batch b; adds this rank's samples' losses to *loss. */
static int train_step(struct trainer *t, const struct click_log *log,
		      int64_t b, double *loss)
{
	int n = set_batch(t, log, b);
	const float *first_label = log->label + log->batch_first[b];
	const float *logit;
	bool failed;
	int rc;

	/* the library fails a lookup on every rank alike */
	rc = check(t, shemb_lookup(t->ctx, DLRM_TABLES, t->bags, t->emb, 0),
		   "shemb_lookup");
	if (rc)
		return rc;
	logit = net_forward(&t->net, n, log->dense +
			    (size_t)log->batch_first[b] * DLRM_DENSE,
			    (const float *const *)t->emb);
	failed = !logit || net_backward(&t->net, n, first_label,
					1.0f / (float)log->batch_size[b],
					t->demb);
	if (failed)
		fprintf(stderr, "dlrm: rank %d: the dense network failed on "
			"batch %lld\n", t->rank, (long long)b);
	else
		*loss += net_loss(logit, first_label, n);
	return apply_gradients(t, n, failed);
}

/* Sum of v over the ranks. */
static int sum_ranks(struct trainer *t, double *v)
{
	return check(t, shemb_allreduce(t->ctx, v, v, 1, SHEMB_F64,
					SHEMB_REDUCE_SUM, NULL),
		     "shemb_allreduce");
}

int train_epoch(struct trainer *t, const struct click_log *log,
		double *loss)
{
	double sum = 0, count = (double)log->n;
	int rc;

	for (int64_t b = 0; b < log->nbatches; b++) {
		rc = train_step(t, log, b, &sum);
		if (rc)
			return rc;
	}
	rc = sum_ranks(t, &sum);
	if (!rc)
		rc = sum_ranks(t, &count);
	*loss = count > 0 ? sum / count : 0;
	return rc;
}

/* The model's logits of this rank's samples of log, into score[n]; 0, or
 * the library's error, which every rank gets alike.  A forward that fails
 * (*failed) does not end the loop: the lookups are collective, so this
 * rank makes the rest of them, and the ranks agree after. */
static int score_log(struct trainer *t, const struct click_log *log,
		     float *score, bool *failed)
{
	*failed = false;
	for (int64_t b = 0; b < log->nbatches; b++) {
		int n = set_batch(t, log, b);
		const float *logit;
		int rc;

		rc = check(t, shemb_lookup(t->ctx, DLRM_TABLES, t->bags,
					   t->emb, SHEMB_LOOKUP_NO_GRAD),
			   "shemb_lookup");
		if (rc)
			return rc;
		if (*failed)
			continue;
		logit = net_forward(&t->net, n, log->dense +
				    (size_t)log->batch_first[b] * DLRM_DENSE,
				    (const float *const *)t->emb);
		if (!logit) {
			fprintf(stderr, "dlrm: rank %d: the dense network "
				"failed on held-out batch %lld\n", t->rank,
				(long long)b);
			*failed = true;
			continue;
		}
		memcpy(score + log->batch_first[b], logit,
		       (size_t)n * sizeof(*score));
	}
	return 0;
}

/* Where each rank's values land when every rank's meet on every rank. */
struct gather {
	int64_t *n;			/* values, per rank */
	size_t *counts, *displs;	/* bytes, per rank */
	int64_t total;			/* values over all ranks */
};

static int gather_alloc(struct trainer *t, struct gather *g)
{
	g->n = malloc((size_t)t->world * sizeof(*g->n));
	g->counts = malloc((size_t)t->world * sizeof(size_t));
	g->displs = malloc((size_t)t->world * sizeof(size_t));
	return g->n && g->counts && g->displs ? 0 : -1;
}

static void gather_free(struct gather *g)
{
	free(g->n);
	free(g->counts);
	free(g->displs);
}

/* Each rank holds n values: learn every rank's count.  Every rank gets
 * the same counts, so the check of their total fails on all or none. */
static int gather_plan(struct trainer *t, int64_t n, int64_t total,
		       struct gather *g)
{
	int rc;

	for (int r = 0; r < t->world; r++) {
		g->counts[r] = sizeof(int64_t);
		g->displs[r] = (size_t)r * sizeof(int64_t);
	}
	rc = check(t, shemb_allgatherv(t->ctx, &n, sizeof(n), g->n, g->counts,
				       g->displs, NULL), "shemb_allgatherv");
	if (rc)
		return rc;
	g->total = 0;
	for (int r = 0; r < t->world; r++) {
		g->counts[r] = (size_t)g->n[r] * sizeof(float);
		g->displs[r] = (size_t)g->total * sizeof(float);
		g->total += g->n[r];
	}
	if (g->total != total) {
		fprintf(stderr, "dlrm: rank %d: the ranks hold %lld held-out "
			"samples, not %lld\n", t->rank, (long long)g->total,
			(long long)total);
		return -1;
	}
	return 0;
}

static int gather_floats(struct trainer *t, const struct gather *g,
			 const float *mine, int64_t n, float *all)
{
	return check(t, shemb_allgatherv(t->ctx, mine, (size_t)n *
					 sizeof(float), all, g->counts,
					 g->displs, NULL), "shemb_allgatherv");
}

/* The loss and the AUCs of n gathered scores, labels and oracle scores;
 * -1 when auc() ran out of memory. */
static int figures(struct trainer *t, float *const all[3], int64_t n,
		   struct eval *e)
{
	e->loss = n ? net_loss(all[0], all[1], n) / (double)n : 0;
	e->auc = auc(all[0], all[1], n);
	e->oracle_auc = auc(all[2], all[1], n);
	if (e->auc < 0 || e->oracle_auc < 0) {
		fprintf(stderr, "dlrm: rank %d: out of memory for the AUC\n",
			t->rank);
		return -1;
	}
	return 0;
}

/*
 * Lookups are collective, so every rank scores its own slice of every
 * batch; the scores, labels and oracle scores then meet on every rank,
 * which computes the same figures from them.  Every buffer is allocated
 * first (the log says how many samples all ranks hold), and the ranks
 * agree on each step's local status before the collectives that follow
 * it: a rank out of memory must not skip lookups or gathers that the
 * others make.
 */
int evaluate(struct trainer *t, const struct click_log *log,
	     struct eval *e)
{
	struct gather g = { 0 };
	int64_t total = 0;
	float *score = malloc((size_t)(log->n + 1) * sizeof(float));
	float *all[3];		/* score, label, oracle of every rank */
	const float *mine[3] = { score, log->label, log->oracle };
	int rc = score && !gather_alloc(t, &g) ? 0 : -1;
	bool failed = false;

	for (int64_t b = 0; b < log->nbatches; b++)
		total += log->batch_size[b];
	for (int i = 0; i < 3; i++) {
		all[i] = malloc((size_t)(total + 1) * sizeof(float));
		if (!all[i])
			rc = -1;
	}
	if (rc)
		fprintf(stderr, "dlrm: rank %d: out of memory\n", t->rank);
	rc = ranks_agree(t, rc);
	if (!rc)
		rc = score_log(t, log, score, &failed);
	if (!rc)
		rc = ranks_agree(t, failed ? -1 : 0);
	if (!rc)
		rc = gather_plan(t, log->n, total, &g);
	for (int i = 0; !rc && i < 3; i++)
		rc = gather_floats(t, &g, mine[i], log->n, all[i]);
	if (!rc)
		rc = ranks_agree(t, figures(t, all, total, e));
	for (int i = 0; i < 3; i++)
		free(all[i]);
	gather_free(&g);
	free(score);
	return rc;
}

/* FNV-1a of the dense parameters' bytes, in 62 bits so that it can be
 * negated: the ranks agree when the largest hash is the smallest. */
int dense_in_sync(struct trainer *t, bool *same)
{
	const unsigned char *p = (const unsigned char *)t->net.params;
	uint64_t h = 0xcbf29ce484222325ull;
	int64_t v[2];
	int rc;

	for (size_t i = 0; i < t->net.nparams * sizeof(float); i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	v[0] = (int64_t)(h >> 2);
	v[1] = -v[0];
	rc = check(t, shemb_allreduce(t->ctx, v, v, 2, SHEMB_I64,
				      SHEMB_REDUCE_MAX, NULL),
		   "shemb_allreduce");
	*same = !rc && v[0] == -v[1];
	return rc;
}
