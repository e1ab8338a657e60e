/*
 * model.c - skip-gram with negative sampling on two libshemb tables.
 *
 * The input table holds a vector per word (word2vec's syn0), the output
 * table a vector per word as a context (syn1neg); loss.c has the loss of
 * a pair and its gradients.
 *
 * A step looks up the centres in the input table and the contexts and
 * negatives in the output table, in one call (bags of one id, so the
 * pooled rows are the rows themselves), computes the loss and its
 * gradients with respect to those rows here, as a host framework would,
 * and hands them to one shemb_backward, which sums them per distinct row
 * and updates each row once, on the rank that holds it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "word2vec.h"

enum { SET_IN, SET_OUT, NSETS };

int w2v_check(const struct w2v_model *m, int rc, const char *what)
{
	if (rc)
		fprintf(stderr, W2V_NAME ": %s: %s: %s\n", what,
			shemb_strerror(rc), shemb_ctx_last_error(m->ctx));
	return rc;
}

/*
 * Every rank calls this at the same point with its own status rc (0, or
 * nonzero after its own message); what names the work just done, as a
 * noun.  The ranks take the largest failure flag, so that all fail
 * together: a rank that did not fail itself says that another did.  hash,
 * when not NULL, must come out the same on every rank, or all fail.
 * Returns 0, or -1 on every rank.
 */
int w2v_agree(const struct w2v_model *m, int rc, const uint64_t *hash,
	      const char *what)
{
	/* failed, hash, -hash: max(hash) + max(-hash) = max - min, zero
	 * only when every rank has the same hash */
	int64_t v[3] = { rc != 0, 0, 0 };
	int lrc;

	if (hash) {
		v[1] = (int64_t)(*hash & INT64_MAX);
		v[2] = -v[1];
	}
	if (m->world == 1)
		return rc ? -1 : 0;
	lrc = shemb_allreduce(m->ctx, v, v, 3, SHEMB_I64, SHEMB_REDUCE_MAX,
			      NULL);
	if (w2v_check(m, lrc, "shemb_allreduce"))
		return -1;
	if (v[0] == 0 && v[1] + v[2] != 0) {
		fprintf(stderr, W2V_NAME ": rank %d: the ranks differ in %s "
			"(hash %016llx here)\n", m->rank, what,
			(unsigned long long)*hash);
		return -1;
	}
	if (v[0] != 0 && rc == 0)
		fprintf(stderr, W2V_NAME ": rank %d: stopping: another rank "
			"failed (%s)\n", m->rank, what);
	return v[0] ? -1 : 0;
}

/*
 * Row-wise Adagrad rather than word2vec's plain SGD.  word2vec applies
 * each pair's gradient as soon as it has it, one pair after another; the
 * library sums the gradients of a row over the whole batch and updates it
 * once.  A frequent word (or any word of a small vocabulary) gets hundreds
 * of gradients in a batch, and plain SGD with word2vec's rate then
 * overshoots: the generated corpus diverges to NaN with --batch 8192.
 * Row-wise Adagrad adds each step's mean square gradient of a row to that
 * row's state and divides the row's step by the root of the sum, so the
 * step stays bounded whatever the batch and the word's frequency; its
 * state is one float per row (Adagrad's would double the tables).  The
 * learning rate still decays linearly, as word2vec's.
 */
static int create_table(struct w2v_model *m, const char *name,
			int64_t rows, const struct w2v_opts *o, bool input,
			shemb_table **t)
{
	struct shemb_table_attr a;

	shemb_table_attr_init(&a);
	a.name = name;
	a.rows = rows;
	a.dim = o->dim;
	a.seed = o->seed;
	if (input) {
		/* word2vec's start: uniform in +-0.5 / dim */
		a.init = SHEMB_INIT_UNIFORM;
		a.init_low = -0.5f / (float)o->dim;
		a.init_high = 0.5f / (float)o->dim;
	} else {
		a.init = SHEMB_INIT_ZEROS;
	}
	a.optimizer = SHEMB_OPT_ROWWISE_ADAGRAD;
	a.lr = o->lr;
	/*
	 * Each row on one rank, by a hash of the id, so that the frequent
	 * words (the low ids) spread over the ranks.  SHEMB_SHARD_AUTO
	 * would copy a small vocabulary to every rank instead.
	 */
	a.shard = SHEMB_SHARD_ROW;
	return w2v_check(m, shemb_table_create(m->ctx, &a, t),
			 "shemb_table_create");
}

static int alloc_buffers(struct w2v_model *m)
{
	size_t b = (size_t)m->batch, t = b * (1 + (size_t)m->negative);
	size_t d = (size_t)m->dim;

	m->in_off = malloc((b + 1) * sizeof(*m->in_off));
	m->out_off = malloc((t + 1) * sizeof(*m->out_off));
	m->centre = malloc(b * sizeof(*m->centre));
	m->targets = malloc(t * sizeof(*m->targets));
	m->h = malloc(b * d * sizeof(*m->h));
	m->gh = malloc(b * d * sizeof(*m->gh));
	m->u = malloc(t * d * sizeof(*m->u));
	m->gu = malloc(t * d * sizeof(*m->gu));
	if (!m->in_off || !m->out_off || !m->centre || !m->targets ||
	    !m->h || !m->gh || !m->u || !m->gu)
		return SHEMB_ENOMEM;
	/* bags of one id: offsets 0, 1, 2, ... serve any count */
	for (size_t i = 0; i <= t; i++) {
		if (i <= b)
			m->in_off[i] = (int64_t)i;
		m->out_off[i] = (int64_t)i;
	}
	return 0;
}

/* The context, and the buffers of a step.  Returns 0, or an error after
 * a message: fatal when m->ctx is NULL, else for the caller to pass to
 * w2v_agree(), which stops every rank. */
int w2v_model_init(struct w2v_model *m, const struct w2v_opts *o)
{
	struct shemb_ctx_attr ca;
	int rc;

	memset(m, 0, sizeof(*m));
	shemb_ctx_attr_init(&ca);
	ca.nthreads = o->threads;
	rc = shemb_ctx_create(&ca, &m->ctx);
	if (rc) {
		fprintf(stderr, W2V_NAME ": shemb_ctx_create: %s: %s\n",
			shemb_strerror(rc), shemb_ctx_last_error(NULL));
		return rc;
	}
	shemb_ctx_get_attr(m->ctx, &ca);
	m->rank = ca.rank;
	m->world = ca.world_size;
	m->dim = o->dim;
	m->negative = o->negative;
	m->batch = o->batch;
	rc = alloc_buffers(m);
	if (rc)
		fprintf(stderr, W2V_NAME ": out of memory for a batch\n");
	return rc;
}

/* The two tables, once every rank has the vocabulary; collective. */
int w2v_model_tables(struct w2v_model *m, const struct w2v_opts *o,
		     int64_t vocab_size)
{
	int rc = create_table(m, "input", vocab_size, o, true, &m->in);

	if (!rc)
		rc = create_table(m, "output", vocab_size, o, false, &m->out);
	return rc;
}

void w2v_model_free(struct w2v_model *m)
{
	shemb_ctx_destroy(m->ctx);  /* and its tables */
	free(m->in_off);
	free(m->out_off);
	free(m->centre);
	free(m->targets);
	free(m->h);
	free(m->gh);
	free(m->u);
	free(m->gu);
	memset(m, 0, sizeof(*m));
}

static void set_bags(const struct w2v_model *m, struct shemb_bags *bags,
		     int npairs)
{
	int64_t ntargets = (int64_t)npairs * (1 + m->negative);

	shemb_bags_init(&bags[SET_IN]);
	bags[SET_IN].table = m->in;
	bags[SET_IN].dim = m->dim;
	bags[SET_IN].nbags = npairs;
	bags[SET_IN].offsets = m->in_off;
	bags[SET_IN].nids = npairs;
	bags[SET_IN].ids = m->centre;
	shemb_bags_init(&bags[SET_OUT]);
	bags[SET_OUT].table = m->out;
	bags[SET_OUT].dim = m->dim;
	bags[SET_OUT].nbags = ntargets;
	bags[SET_OUT].offsets = m->out_off;
	bags[SET_OUT].nids = ntargets;
	bags[SET_OUT].ids = m->targets;
}

/* One step of npairs pairs (0 on a rank that has none left: it still
 * takes part, since lookup and backward are collective).  *loss gets the
 * sum of the pairs' losses. */
int w2v_model_step(struct w2v_model *m, int npairs, float lr, double *loss)
{
	struct shemb_bags bags[NSETS];
	float *out[NSETS] = { m->h, m->u };
	const float *grad[NSETS] = { m->gh, m->gu };
	size_t dim = (size_t)m->dim, per = 1 + (size_t)m->negative;
	int rc;

	set_bags(m, bags, npairs);
	rc = shemb_table_set_lr(m->in, lr);
	if (!rc)
		rc = shemb_table_set_lr(m->out, lr);
	if (w2v_check(m, rc, "shemb_table_set_lr"))
		return rc;
	rc = shemb_lookup(m->ctx, NSETS, bags, out, 0);
	if (w2v_check(m, rc, "shemb_lookup"))
		return rc;
	*loss = 0;
	for (size_t i = 0; i < (size_t)npairs; i++)
		*loss += w2v_pair_loss(m->dim, m->negative, m->h + i * dim,
				       m->u + i * per * dim, m->gh + i * dim,
				       m->gu + i * per * dim);
	rc = shemb_backward(m->ctx, NSETS, bags, grad);
	return w2v_check(m, rc, "shemb_backward");
}
