/*
 * pairs.c - the training pairs of one rank, as word2vec makes them.
 *
 * The rank reads its slice of the corpus sentence by sentence, drops
 * frequent words at random (subsampling, before the windows are taken, so
 * that the windows reach further), ends a sentence early when it has kept
 * W2V_MAX_SENTENCE words (word2vec's limit; the rest of the line makes
 * the next sentence), and pairs each remaining word, the centre, with
 * every word within b of it, where b is drawn for each centre uniformly
 * from 1 to window: near words are paired more often than far ones.  Each
 * pair gets its negatives from the unigram distribution to the power 0.75.
 */
#include <string.h>

#include "word2vec.h"

/* Redraws of a negative that hit the pair's own context word. */
#define NEGATIVE_TRIES 8

void w2v_pairs_init(struct w2v_pairs *p, const struct w2v_corpus *c,
		    const struct w2v_vocab *v, const struct w2v_opts *o,
		    int rank, int world)
{
	memset(p, 0, sizeof(*p));
	p->corpus = c;
	p->vocab = v;
	/* Equal slices of the encoded corpus, cut wherever they fall: a
	 * sentence across a cut is two sentences, one on each rank, as
	 * word2vec cuts the text between its threads.  The pairs that
	 * would cross the cut are lost, a few per rank. */
	p->begin = c->len * rank / world;
	p->end = c->len * (rank + 1) / world;
	p->window = o->window;
	p->negative = o->negative;
	p->rng = w2v_mix64(o->seed ^ w2v_mix64((uint64_t)rank + 1));
	w2v_pairs_rewind(p);
}

/* Back to the start of the slice, for the next epoch. */
void w2v_pairs_rewind(struct w2v_pairs *p)
{
	p->pos = p->begin;
	p->slen = 0;
	p->centre = 0;
	p->ctx_pos = 0;
	p->ctx_end = 0;
}

/*
 * The next sentence that keeps a word after subsampling; false at the end
 * of the slice.  Words are counted (words_read, the learning rate's clock)
 * as they become centres: sent_words[i] is 1 for sent[i] and 1 for each
 * word dropped just before it (or, for the last, after it).  The words of
 * a sentence that keeps none are counted at once.
 */
static bool load_sentence(struct w2v_pairs *p)
{
	const int32_t *ids = p->corpus->ids;
	const float *keep = p->vocab->keep;

	while (p->pos < p->end) {
		int64_t dropped = 0;

		p->slen = 0;
		while (p->pos < p->end && p->slen < W2V_MAX_SENTENCE) {
			int32_t id = ids[p->pos++];

			if (id == W2V_SENTENCE_END)
				break;
			if (keep[id] < 1 && w2v_unit(&p->rng) >= keep[id]) {
				dropped++;
				continue;
			}
			p->sent_words[p->slen] = dropped + 1;
			p->sent[p->slen++] = id;
			dropped = 0;
		}
		if (p->slen > 0) {
			p->sent_words[p->slen - 1] += dropped;
			return true;
		}
		p->words_read += dropped;
	}
	return false;
}

/* Move to the next centre and draw its window. */
static bool next_centre(struct w2v_pairs *p)
{
	int shrink, lo, hi;

	if (++p->centre >= p->slen) {
		if (!load_sentence(p))
			return false;
		p->centre = 0;
	}
	p->words_read += p->sent_words[p->centre];
	shrink = (int)(w2v_next(&p->rng) % (uint64_t)p->window);
	lo = p->centre - p->window + shrink;
	hi = p->centre + p->window - shrink + 1;
	p->ctx_pos = lo > 0 ? lo : 0;
	p->ctx_end = hi < p->slen ? hi : p->slen;
	return true;
}

/* targets[1..negative]: negatives, none equal to targets[0] when the
 * vocabulary allows. */
static void draw_negatives(struct w2v_pairs *p, int64_t *targets)
{
	for (int k = 1; k <= p->negative; k++) {
		int tries = 0;

		do {
			targets[k] = w2v_negative(p->vocab, &p->rng);
		} while (targets[k] == targets[0] && ++tries < NEGATIVE_TRIES);
	}
}

/*
 * Up to max pairs: centre[i], and targets[i * (1 + negative) ...] its
 * context word followed by its negatives.  Returns the number of pairs;
 * fewer than max only at the end of the slice.
 */
int w2v_pairs_fill(struct w2v_pairs *p, int max, int64_t *centre,
		   int64_t *targets)
{
	int n = 0;

	while (n < max) {
		int64_t *t = targets + (size_t)n * (1 + p->negative);
		int j;

		if (p->ctx_pos >= p->ctx_end) {
			if (!next_centre(p))
				break;
			continue;
		}
		j = p->ctx_pos++;
		if (j == p->centre)
			continue;
		centre[n] = p->sent[p->centre];
		t[0] = p->sent[j];
		draw_negatives(p, t);
		n++;
	}
	return n;
}
