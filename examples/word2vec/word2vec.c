/*
 * word2vec.c - skip-gram word2vec with negative sampling, its embedding
 * tables kept by libshemb: the program reads a text, builds its
 * vocabulary, trains, and prints the nearest neighbours of query words.
 *
 *     word2vec [options] FILE
 *     word2vec [options] --generate 2M --query france,cat,red
 *
 * Across ranks (shemb-run -n 2 word2vec ...), the context reads its rank
 * and the world size from the environment.  Every rank reads the whole
 * text and builds the same vocabulary (the ranks compare a hash of it),
 * then trains on its own slice of the corpus; the two tables are spread
 * over the ranks by rows.  Lookups, backward steps and row reads are
 * collective, so before each step the ranks add up how many pairs each
 * has (an allreduce that also carries the words trained and the loss):
 * they stop an epoch together, when no rank has a pair left, and a rank
 * whose slice ran out first takes part with empty batches.  A failure on
 * one rank before training (the text, the vocabulary, rank 0's files) or
 * before the vectors are read stops every rank at the same point
 * (w2v_agree).  Only rank 0 prints, except errors.
 *
 * Exit status: 0; 1 when the text cannot be read, has no word frequent
 * enough, the ranks' vocabularies differ, a file cannot be written, or
 * the library fails; 2 for a bad command line.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "word2vec.h"

/* What the ranks add up before each step. */
enum {
	SUM_PAIRS,      /* pairs of the coming step */
	SUM_WORDS,      /* words of the steps so far (the learning rate's
			 * clock), counted as they become centres */
	SUM_LOSS,       /* loss of all the steps so far */
	SUM_DONE,       /* pairs of all the steps so far */
	NSUMS
};

struct trainer {
	struct w2v_model *m;
	struct w2v_pairs pairs;
	const struct w2v_opts *o;
	struct w2v_progress progress;
	int64_t total_words;    /* epochs * training words, all ranks */
	double loss, done;      /* this rank's: SUM_LOSS, SUM_DONE */
	double sums[NSUMS];     /* all ranks', from the last exchange */
	double epoch_loss[2];   /* mean loss per pair: first, last epoch */
	long steps;
};

static int load_text(const struct w2v_opts *o, struct w2v_text *t)
{
	if (o->generate)
		return w2v_corpus_generate(o->generate, o->seed, t);
	return w2v_text_read(o->file, t);
}

static int build_vocab(const struct w2v_opts *o, const struct w2v_text *t,
		       struct w2v_vocab *v, struct w2v_corpus *c)
{
	int rc = w2v_vocab_build(t, o, v, c);

	if (rc > 0)
		fprintf(stderr, W2V_NAME ": %s: no word occurs %lld times or "
			"more (%lld words in all; see --min-count)\n",
			o->file ? o->file : "generated corpus",
			(long long)o->min_count, (long long)v->text_words);
	return rc;
}

static int write_corpus(const char *path, const struct w2v_text *t)
{
	FILE *f = fopen(path, "w");
	int bad;

	if (!f) {
		fprintf(stderr, W2V_NAME ": %s: %s\n", path, strerror(errno));
		return -1;
	}
	bad = fwrite(t->buf, 1, t->len, f) != t->len;
	bad |= fclose(f);
	if (bad)
		fprintf(stderr, W2V_NAME ": %s: write failed\n", path);
	return bad ? -1 : 0;
}

static void describe(const struct w2v_model *m, const struct w2v_opts *o,
		     const struct w2v_vocab *v)
{
	printf("%s: %lld words, %lld distinct; vocabulary %lld words "
	       "(min-count %lld), %lld to train on\n",
	       o->file ? o->file : "generated corpus",
	       (long long)v->text_words, (long long)v->distinct,
	       (long long)v->size, (long long)o->min_count,
	       (long long)v->train_words);
	printf("training: %d rank%s, dim %d, window %d, negative %d, "
	       "sample %g, batch %d, %d epoch%s, lr %g\n", m->world,
	       m->world > 1 ? "s" : "", o->dim, o->window, o->negative,
	       o->sample, o->batch, o->epochs, o->epochs > 1 ? "s" : "",
	       (double)o->lr);
	fflush(stdout);
}

/* The pairs this rank has for the coming step, and its running totals
 * (words: the words of the steps done), summed over the ranks.  The next
 * lookup waits for this sum, so it travels with a lookup's priority (on
 * the library's urgent lane). */
static int exchange(struct trainer *tr, int npairs, int64_t words)
{
	double *s = tr->sums;
	int rc;

	s[SUM_PAIRS] = npairs;
	s[SUM_WORDS] = (double)words;
	s[SUM_LOSS] = tr->loss;
	s[SUM_DONE] = tr->done;
	if (tr->m->world == 1)
		return 0;
	rc = shemb_allreduce_prio(tr->m->ctx, s, s, NSUMS, SHEMB_F64,
				  SHEMB_REDUCE_SUM, SHEMB_PRIO_LOOKUP, NULL);
	return w2v_check(tr->m, rc, "shemb_allreduce_prio");
}

/* word2vec's schedule: linear from lr down to lr / 10^4 at the end,
 * driven by the words of all ranks, so every rank has the same. */
static float learning_rate(const struct trainer *tr)
{
	double left = 1 - tr->sums[SUM_WORDS] /
			  ((double)tr->total_words + 1);

	return (float)(tr->o->lr * (left > 1e-4 ? left : 1e-4));
}

/* One pass over this rank's slice; returns at the same step on every
 * rank.  Progress is shown after each exchange, when the losses of all the
 * steps so far have arrived, and once more after the last step. */
static int train_epoch(struct trainer *tr)
{
	struct w2v_model *m = tr->m;

	w2v_pairs_rewind(&tr->pairs);
	for (;;) {
		int64_t words = tr->pairs.words_read;  /* of the steps done */
		int n = w2v_pairs_fill(&tr->pairs, tr->o->batch, m->centre,
				       m->targets);
		double loss;
		float lr;
		int rc = exchange(tr, n, words);

		if (rc)
			return rc;
		lr = learning_rate(tr);
		if (m->rank == 0)
			w2v_progress_update(&tr->progress,
					    (int64_t)tr->sums[SUM_WORDS],
					    tr->sums[SUM_LOSS],
					    tr->sums[SUM_DONE], lr);
		if (tr->sums[SUM_PAIRS] == 0)
			return 0;
		rc = w2v_model_step(m, n, lr, &loss);
		if (rc)
			return rc;
		tr->loss += loss;
		tr->done += n;
		tr->steps++;
	}
}

static int train(struct trainer *tr)
{
	double loss0 = 0, done0 = 0;

	for (int e = 0; e < tr->o->epochs; e++) {
		int rc = train_epoch(tr);
		double dp = tr->sums[SUM_DONE] - done0;
		double mean = dp > 0 ? (tr->sums[SUM_LOSS] - loss0) / dp : 0;

		if (rc)
			return rc;
		if (e == 0)
			tr->epoch_loss[0] = mean;
		tr->epoch_loss[1] = mean;
		loss0 = tr->sums[SUM_LOSS];
		done0 = tr->sums[SUM_DONE];
	}
	return 0;
}

static void summary(const struct trainer *tr, double secs)
{
	double words = tr->sums[SUM_WORDS], pairs = tr->sums[SUM_DONE];

	printf("trained %d epoch%s: %.0f words, %.0f pairs, %ld steps in "
	       "%.2f s: %.0f words/s, %.0f pairs/s\n", tr->o->epochs,
	       tr->o->epochs > 1 ? "s" : "", words, pairs, tr->steps, secs,
	       words / secs, pairs / secs);
	printf("loss per pair: %.4f in the first epoch, %.4f in the last "
	       "(%.4f at the start)\n", tr->epoch_loss[0], tr->epoch_loss[1],
	       (1 + tr->o->negative) * 0.69314718);
	fflush(stdout);
}

/* The vectors, once trained: the file (*out, closed here), the
 * neighbours of the queries. */
static int results(struct w2v_model *m, const struct w2v_opts *o,
		   const struct w2v_vocab *v, FILE **out)
{
	float *vecs = NULL;
	int rc = 0;

	if (!o->query && !o->output)
		return 0;
	rc = w2v_vectors_read(m, v->size, &vecs);
	if (!rc && m->rank == 0) {
		if (*out && w2v_vectors_save(*out, o->output, v, vecs, o->dim))
			rc = -1;
		*out = NULL;
		if (o->query)
			w2v_neighbours_print(v, vecs, o->dim, o->query,
					     o->top);
	}
	free(vecs);
	return rc;
}

static int run(struct w2v_model *m, const struct w2v_opts *o,
	       const struct w2v_vocab *v, const struct w2v_corpus *c,
	       FILE **out)
{
	struct trainer tr = { .m = m, .o = o };
	bool talk = m->rank == 0 && !o->quiet;
	double t0;
	int rc;

	tr.total_words = (int64_t)o->epochs * v->train_words;
	w2v_pairs_init(&tr.pairs, c, v, o, m->rank, m->world);
	if (talk)
		describe(m, o, v);
	w2v_progress_start(&tr.progress, m->rank != 0 || o->quiet,
			   tr.total_words);
	t0 = w2v_seconds();
	rc = train(&tr);
	w2v_progress_end(&tr.progress);
	if (rc)
		return rc;
	if (talk)
		summary(&tr, w2v_seconds() - t0);
	return results(m, o, v, out);
}

/* The text and its vocabulary, the same on every rank (checked). */
static int vocabulary(struct w2v_model *m, const struct w2v_opts *o,
		      struct w2v_text *text, struct w2v_vocab *v,
		      struct w2v_corpus *c, int rc)
{
	uint64_t hash = 0;

	if (!rc)
		rc = load_text(o, text);
	if (!rc)
		rc = build_vocab(o, text, v, c);
	if (!rc)
		hash = w2v_vocab_hash(v);
	return w2v_agree(m, rc, &hash, "the text and its vocabulary");
}

/* Rank 0's files: the corpus written, the output opened (before the
 * training that it would otherwise lose). */
static int files(const struct w2v_model *m, const struct w2v_opts *o,
		 const struct w2v_text *text, FILE **out)
{
	int rc = 0;

	if (m->rank == 0 && o->write_corpus)
		rc = write_corpus(o->write_corpus, text);
	if (!rc && m->rank == 0 && o->output) {
		*out = fopen(o->output, "w");
		if (!*out) {
			fprintf(stderr, W2V_NAME ": %s: %s\n", o->output,
				strerror(errno));
			rc = -1;
		}
	}
	return w2v_agree(m, rc, NULL, "the output files");
}

int main(int argc, char **argv)
{
	struct w2v_opts o;
	struct w2v_text text = { 0 };
	struct w2v_vocab v = { 0 };
	struct w2v_corpus c = { 0 };
	struct w2v_model m;
	FILE *out = NULL;
	int rc = w2v_parse_options(argc, argv, &o);

	if (rc) {
		w2v_usage(rc > 0 ? stdout : stderr);
		return rc > 0 ? 0 : 2;
	}
	/* the context first, so that the ranks can stop together */
	rc = w2v_model_init(&m, &o);
	if (m.ctx) {
		rc = vocabulary(&m, &o, &text, &v, &c, rc);
		if (!rc)
			rc = files(&m, &o, &text, &out);
		w2v_text_free(&text);
		if (!rc)
			rc = w2v_model_tables(&m, &o, v.size);
		if (!rc)
			rc = run(&m, &o, &v, &c, &out);
	}
	if (out)
		fclose(out);
	w2v_model_free(&m);
	w2v_vocab_free(&v);
	w2v_corpus_free(&c);
	return rc ? 1 : 0;
}
