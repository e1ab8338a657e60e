/*
 * word2vec.h - the pieces of the skip-gram trainer of examples/word2vec:
 * options, the text and its vocabulary, the training pairs, the model on
 * two libshemb tables, progress output and nearest neighbours.
 */
#ifndef WORD2VEC_H
#define WORD2VEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <shemb.h>

#define W2V_NAME "word2vec"
/* ids of the encoded corpus: a word's rank in the vocabulary, or this */
#define W2V_SENTENCE_END (-1)
/* word2vec's MAX_SENTENCE_LENGTH: longer runs are cut into pieces */
#define W2V_MAX_SENTENCE 1000

struct w2v_opts {
	const char *file;          /* the text, or NULL with generate */
	int64_t generate;          /* words of the built-in corpus, or 0 */
	const char *write_corpus;  /* where to save that corpus, or NULL */
	int64_t min_count;
	int64_t max_vocab;         /* 0: no cap */
	double sample;             /* 0: no subsampling */
	int negative;
	int window;
	int dim;
	int epochs;
	float lr;
	int batch;                 /* pairs per step */
	int threads;               /* the library's threads; 0: all CPUs */
	uint64_t seed;
	bool quiet;
	const char *query;         /* comma-separated words, or NULL */
	int top;
	const char *output;        /* vectors in word2vec's text format */
};

/* options.c */
int w2v_parse_options(int argc, char **argv, struct w2v_opts *o);
void w2v_usage(FILE *f);

/* A whole text in memory. */
struct w2v_text {
	char *buf;
	size_t len;
};

int w2v_text_read(const char *path, struct w2v_text *t);
void w2v_text_free(struct w2v_text *t);

/* corpus_gen.c: a text with planted structure, n words, one sentence a
 * line; the same text for the same (n, seed). */
int w2v_corpus_generate(int64_t nwords, uint64_t seed, struct w2v_text *t);

/* vocab.c */
struct w2v_vocab {
	int64_t size;
	char **words;       /* by id: most frequent first */
	int64_t *counts;
	float *keep;        /* subsampling: probability of keeping a word */
	float *neg_prob;    /* negatives: count^0.75, as an alias table */
	int32_t *neg_alias;
	int64_t train_words; /* occurrences of vocabulary words */
	int64_t text_words;  /* all words of the text */
	int64_t distinct;    /* distinct words of the text */
};

/* The text as vocabulary ids, sentences ended by W2V_SENTENCE_END. */
struct w2v_corpus {
	int32_t *ids;
	int64_t len;
};

int w2v_vocab_build(const struct w2v_text *t, const struct w2v_opts *o,
		    struct w2v_vocab *v, struct w2v_corpus *c);
int64_t w2v_vocab_find(const struct w2v_vocab *v, const char *word);
uint64_t w2v_vocab_hash(const struct w2v_vocab *v);
void w2v_vocab_free(struct w2v_vocab *v);
void w2v_corpus_free(struct w2v_corpus *c);

/* rng.c: splitmix64, the same numbers on every platform */
uint64_t w2v_mix64(uint64_t z);
static inline uint64_t w2v_next(uint64_t *state)
{
	*state += 0x9e3779b97f4a7c15ull;
	return w2v_mix64(*state);
}
static inline double w2v_unit(uint64_t *state)
{
	return (double)(w2v_next(state) >> 11) * 0x1p-53;
}

/* A negative: one draw from the vocabulary's alias table, a word, then
 * a coin. */
static inline int64_t w2v_negative(const struct w2v_vocab *v,
				   uint64_t *state)
{
	uint64_t r = w2v_next(state);
	uint64_t i = ((r >> 32) * (uint64_t)v->size) >> 32;
	double coin = (double)(r & 0xffffffffu) * 0x1p-32;

	return coin < v->neg_prob[i] ? (int64_t)i : v->neg_alias[i];
}

/* pairs.c: (centre, context) pairs of one rank's slice of the corpus,
 * with subsampling and word2vec's random window, and their negatives. */
struct w2v_pairs {
	const struct w2v_corpus *corpus;
	const struct w2v_vocab *vocab;
	int64_t begin, end;  /* this rank's slice */
	int64_t pos;         /* next id of the slice to read */
	int window, negative;
	uint64_t rng;
	int32_t sent[W2V_MAX_SENTENCE]; /* the sentence, subsampled */
	/* the words of the text that sent[i] stands for: itself and the
	 * words subsampling dropped next to it */
	int64_t sent_words[W2V_MAX_SENTENCE];
	int slen;
	int centre;          /* position in sent */
	int ctx_pos, ctx_end; /* the centre's window: next, past the last */
	int64_t words_read;  /* raw words of the slice trained so far:
			      * counted as their centre comes */
};

void w2v_pairs_init(struct w2v_pairs *p, const struct w2v_corpus *c,
		    const struct w2v_vocab *v, const struct w2v_opts *o,
		    int rank, int world);
void w2v_pairs_rewind(struct w2v_pairs *p);
int w2v_pairs_fill(struct w2v_pairs *p, int max, int64_t *centre,
		   int64_t *targets);

/* model.c: the two tables and one training step */
struct w2v_model {
	shemb_ctx *ctx;
	int rank, world;
	shemb_table *in, *out;  /* input (word) and output (context) */
	int dim, negative, batch;
	int64_t *in_off, *out_off;     /* CSR offsets: bags of one id */
	int64_t *centre, *targets;     /* ids: batch, batch * (1 + neg) */
	float *h, *u, *gh, *gu;        /* rows and their gradients */
};

int w2v_model_init(struct w2v_model *m, const struct w2v_opts *o);
int w2v_model_tables(struct w2v_model *m, const struct w2v_opts *o,
		     int64_t vocab_size);
void w2v_model_free(struct w2v_model *m);
int w2v_model_step(struct w2v_model *m, int npairs, float lr, double *loss);
int w2v_check(const struct w2v_model *m, int rc, const char *what);
int w2v_agree(const struct w2v_model *m, int rc, const uint64_t *hash,
	      const char *what);

/* loss.c: the loss of one pair (h: the centre's input row; u: the rows
 * of its context word and its negatives, [1 + negative][dim]); its
 * gradients with respect to h into gh, to u into gu. */
float w2v_pair_loss(int dim, int negative, const float *restrict h,
		    const float *restrict u, float *restrict gh,
		    float *restrict gu);

/* progress.c */
struct w2v_progress {
	bool tty, quiet;
	double t0, last_draw;
	int64_t total_words;   /* epochs * train words, all ranks */
	int next_line;         /* next tenth that gets a plain line */
	double shown_loss, shown_pairs; /* totals at the last output */
	double shown_mean;     /* the loss per pair shown last */
};

double w2v_seconds(void);
void w2v_progress_start(struct w2v_progress *p, bool quiet,
			int64_t total_words);
void w2v_progress_update(struct w2v_progress *p, int64_t words,
			 double loss, double pairs, float lr);
void w2v_progress_end(struct w2v_progress *p);

/* vectors.c: the trained input vectors, read back from the table */
int w2v_vectors_read(struct w2v_model *m, int64_t rows, float **vecs);
int w2v_vectors_save(FILE *f, const char *path, const struct w2v_vocab *v,
		     const float *vecs, int dim);

/* neighbours.c */
void w2v_neighbours_print(const struct w2v_vocab *v, float *vecs, int dim,
			  const char *query, int top);

#endif /* WORD2VEC_H */
