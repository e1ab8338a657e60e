/*
 * vocab.c - the tokeniser, the vocabulary and what is derived from it.
 *
 * Words are runs of ASCII letters and digits and of bytes >= 0x80 (so that
 * UTF-8 words stay whole), with ASCII letters lowercased; everything else
 * separates them, and a newline also ends a sentence.  The vocabulary
 * keeps the words seen at least min_count times, most frequent first
 * (ties in byte order, so every rank that reads the same text numbers the
 * words alike), at most max_vocab of them.  Words outside it are dropped
 * from the corpus before windows are taken, as word2vec does.
 */
#define _POSIX_C_SOURCE 200809L  /* strndup */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "word2vec.h"

/* ---- a hash table of words: word -> index of its entry ---- */

struct entry {
	char *word;
	int64_t count;
};

struct word_table {
	struct entry *entries;  /* in insertion order */
	int64_t n, cap;
	int64_t *slots;         /* entry index + 1, 0 when free */
	size_t nslots;          /* a power of two, at most half full */
};

static uint64_t hash_word(const char *s, size_t len)
{
	uint64_t h = 1469598103934665603ull;   /* FNV-1a */

	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
	return h;
}

static int64_t *find_slot(const struct word_table *t, const char *w,
			  size_t len)
{
	size_t i = hash_word(w, len) & (t->nslots - 1);

	for (;; i = (i + 1) & (t->nslots - 1)) {
		int64_t *s = &t->slots[i];
		const char *e;

		if (!*s)
			return s;
		e = t->entries[*s - 1].word;
		if (!strncmp(e, w, len) && !e[len])
			return s;
	}
}

static int grow_slots(struct word_table *t)
{
	struct word_table g = *t;

	g.nslots = t->nslots ? t->nslots * 2 : 1024;
	g.slots = calloc(g.nslots, sizeof(*g.slots));
	if (!g.slots)
		return -1;
	for (int64_t k = 0; k < t->n; k++) {
		const char *w = t->entries[k].word;

		*find_slot(&g, w, strlen(w)) = k + 1;
	}
	free(t->slots);
	*t = g;
	return 0;
}

/* The index of word w[0..len), added with count 0 if new; -1: no memory. */
static int64_t table_intern(struct word_table *t, const char *w, size_t len)
{
	int64_t *s;

	if ((size_t)t->n * 2 >= t->nslots && grow_slots(t))
		return -1;
	s = find_slot(t, w, len);
	if (*s)
		return *s - 1;
	if (t->n == t->cap) {
		int64_t cap = t->cap ? t->cap * 2 : 1024;
		struct entry *e = realloc(t->entries, cap * sizeof(*e));

		if (!e)
			return -1;
		t->entries = e;
		t->cap = cap;
	}
	t->entries[t->n].word = strndup(w, len);
	if (!t->entries[t->n].word)
		return -1;
	t->entries[t->n].count = 0;
	*s = ++t->n;
	return t->n - 1;
}

static void table_free(struct word_table *t, bool free_words)
{
	for (int64_t k = 0; free_words && k < t->n; k++)
		free(t->entries[k].word);
	free(t->entries);
	free(t->slots);
	memset(t, 0, sizeof(*t));
}

/* ---- the tokeniser ---- */

static bool is_word_byte(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c >= 0x80;
}

/* A growing array of int32 */
struct ids {
	int32_t *v;
	int64_t n, cap;
};

static int ids_push(struct ids *a, int32_t id)
{
	if (a->n == a->cap) {
		int64_t cap = a->cap ? a->cap * 2 : 1 << 16;
		int32_t *v = realloc(a->v, cap * sizeof(*v));

		if (!v)
			return -1;
		a->v = v;
		a->cap = cap;
	}
	a->v[a->n++] = id;
	return 0;
}

/* Ends a sentence unless none is open. */
static int end_sentence(struct ids *a)
{
	if (a->n == 0 || a->v[a->n - 1] == W2V_SENTENCE_END)
		return 0;
	return ids_push(a, W2V_SENTENCE_END);
}

/* Every word of the text into t (counted) and its index into a.
 * Returns 0; -1: out of memory; -2: more distinct words than an int32
 * id can number. */
static int tokenise(const struct w2v_text *text, struct word_table *t,
		    struct ids *a)
{
	char word[256];   /* longer words are cut here */
	size_t len = 0;

	for (size_t i = 0; i <= text->len; i++) {
		unsigned char c = i < text->len ? text->buf[i] : '\n';

		if (is_word_byte(c)) {
			if (len < sizeof(word))
				word[len++] = (c >= 'A' && c <= 'Z') ?
					      (char)(c - 'A' + 'a') : (char)c;
			continue;
		}
		if (len) {
			int64_t k = table_intern(t, word, len);

			if (k > INT32_MAX)
				return -2;
			if (k < 0 || ids_push(a, (int32_t)k))
				return -1;
			t->entries[k].count++;
			len = 0;
		}
		if (c == '\n' && end_sentence(a))
			return -1;
	}
	return 0;
}

/* ---- the vocabulary ---- */

static int by_count_then_word(const void *pa, const void *pb)
{
	const struct entry *a = pa, *b = pb;

	if (a->count != b->count)
		return a->count > b->count ? -1 : 1;
	return strcmp(a->word, b->word);
}

/* Kept words into v (their strings move there), ordered; old index ->
 * new id, or -1, into map. */
static int select_words(struct word_table *t, const struct w2v_opts *o,
			struct w2v_vocab *v, int32_t *map)
{
	struct entry *sorted = malloc((t->n + 1) * sizeof(*sorted));
	int64_t n = 0;

	if (!sorted)
		return -1;
	for (int64_t k = 0; k < t->n; k++)
		if (t->entries[k].count >= o->min_count)
			sorted[n++] = t->entries[k];
	qsort(sorted, n, sizeof(*sorted), by_count_then_word);
	if (o->max_vocab && n > o->max_vocab)
		n = o->max_vocab;
	v->words = malloc((n + 1) * sizeof(*v->words));
	v->counts = malloc((n + 1) * sizeof(*v->counts));
	if (!v->words || !v->counts) {
		free(v->words);
		free(v->counts);
		v->words = NULL;
		v->counts = NULL;
		free(sorted);
		return -1;
	}
	v->size = n;
	for (int64_t k = 0; k < t->n; k++)
		map[k] = -1;
	for (int64_t id = 0; id < n; id++) {
		const char *w = sorted[id].word;

		map[*find_slot(t, w, strlen(w)) - 1] = (int32_t)id;
		v->words[id] = sorted[id].word;
		v->counts[id] = sorted[id].count;
		v->train_words += sorted[id].count;
	}
	free(sorted);
	return 0;
}

/* Old indices -> vocabulary ids, dropping the words left out. */
static int encode(const struct ids *a, const int32_t *map,
		  struct w2v_corpus *c)
{
	struct ids out = { 0 };

	for (int64_t i = 0; i < a->n; i++) {
		int32_t k = a->v[i];

		if (k == W2V_SENTENCE_END) {
			if (end_sentence(&out))
				goto fail;
		} else if (map[k] >= 0 && ids_push(&out, map[k])) {
			goto fail;
		}
	}
	if (end_sentence(&out))
		goto fail;
	c->ids = out.v;
	c->len = out.n;
	return 0;
fail:
	free(out.v);
	return -1;
}

/* word2vec's subsampling: a word of count f among N is kept with
 * probability (sqrt(f / (s N)) + 1) (s N) / f, capped at 1. */
static void subsampling(struct w2v_vocab *v, double sample)
{
	double sn = sample * (double)v->train_words;

	for (int64_t id = 0; id < v->size; id++) {
		double f = (double)v->counts[id], p = 1;

		if (sample > 0)
			p = (sqrt(f / sn) + 1) * sn / f;
		v->keep[id] = p < 1 ? (float)p : 1.0f;
	}
}

/*
 * Negatives come from the unigram distribution raised to 0.75, drawn in
 * constant time by Vose's alias method: word i is kept with probability
 * neg_prob[i], else replaced by neg_alias[i].  stack holds the words
 * below the mean from its start and those above it from its end.
 */
static void negative_alias(struct w2v_vocab *v, double *p, int32_t *stack)
{
	int64_t n = v->size, ns = 0, nl = 0;
	double sum = 0;

	for (int64_t i = 0; i < n; i++)
		sum += p[i] = pow((double)v->counts[i], 0.75);
	for (int64_t i = 0; i < n; i++) {
		v->neg_alias[i] = (int32_t)i;
		p[i] *= (double)n / sum;
		if (p[i] < 1)
			stack[ns++] = (int32_t)i;
		else
			stack[n - ++nl] = (int32_t)i;
	}
	while (ns > 0 && nl > 0) {
		int32_t small = stack[--ns], large = stack[n - nl];

		v->neg_prob[small] = (float)p[small];
		v->neg_alias[small] = large;
		p[large] -= 1 - p[small];
		if (p[large] < 1) {
			nl--;
			stack[ns++] = large;
		}
	}
	/* what is left is 1 up to rounding */
	while (ns > 0)
		v->neg_prob[stack[--ns]] = 1;
	while (nl > 0)
		v->neg_prob[stack[n - nl--]] = 1;
}

static int derive(struct w2v_vocab *v, const struct w2v_opts *o)
{
	double *p = malloc(v->size * sizeof(*p));
	int32_t *stack = malloc(v->size * sizeof(*stack));
	int rc = -1;

	v->keep = malloc(v->size * sizeof(*v->keep));
	v->neg_prob = malloc(v->size * sizeof(*v->neg_prob));
	v->neg_alias = malloc(v->size * sizeof(*v->neg_alias));
	if (p && stack && v->keep && v->neg_prob && v->neg_alias) {
		subsampling(v, o->sample);
		negative_alias(v, p, stack);
		rc = 0;
	}
	free(p);
	free(stack);
	return rc;
}

/*
 * Build the vocabulary of the text and encode it.  Returns 0; -1 after a
 * message when memory runs out; 1 when no word is frequent enough (the
 * caller words the message, which depends on where the text came from).
 */
int w2v_vocab_build(const struct w2v_text *text, const struct w2v_opts *o,
		    struct w2v_vocab *v, struct w2v_corpus *c)
{
	struct word_table t = { 0 };
	struct ids all = { 0 };
	int32_t *map = NULL;
	int rc = -1, trc;

	memset(v, 0, sizeof(*v));
	memset(c, 0, sizeof(*c));
	trc = tokenise(text, &t, &all);
	if (trc == -2)
		fprintf(stderr, W2V_NAME ": the text has more than 2^31 "
			"distinct words, more than word ids can number\n");
	if (trc)
		goto out;
	v->distinct = t.n;
	for (int64_t k = 0; k < t.n; k++)
		v->text_words += t.entries[k].count;
	map = malloc((t.n + 1) * sizeof(*map));
	if (!map || select_words(&t, o, v, map))
		goto out;
	for (int64_t k = 0; k < t.n; k++)
		if (map[k] < 0)
			free(t.entries[k].word);
	t.n = 0;        /* the kept words belong to v now */
	rc = v->size ? 0 : 1;
	if (!rc && (derive(v, o) || encode(&all, map, c)))
		rc = -1;
out:
	if (rc < 0 && trc != -2)
		fprintf(stderr, W2V_NAME ": out of memory for the "
			"vocabulary\n");
	table_free(&t, true);
	free(all.v);
	free(map);
	return rc;
}

/* FNV-1a of the words and their counts, in order: the same on two ranks
 * when they built the same vocabulary. */
uint64_t w2v_vocab_hash(const struct w2v_vocab *v)
{
	uint64_t h = 1469598103934665603ull;

	for (int64_t id = 0; id < v->size; id++) {
		const unsigned char *w = (const unsigned char *)v->words[id];
		size_t len = strlen(v->words[id]) + 1;   /* and its NUL */
		uint64_t n = (uint64_t)v->counts[id];

		for (size_t i = 0; i < len; i++)
			h = (h ^ w[i]) * 1099511628211ull;
		for (int b = 0; b < 64; b += 8)
			h = (h ^ ((n >> b) & 0xff)) * 1099511628211ull;
	}
	return h;
}

int64_t w2v_vocab_find(const struct w2v_vocab *v, const char *word)
{
	for (int64_t id = 0; id < v->size; id++)
		if (!strcmp(v->words[id], word))
			return id;
	return -1;
}

void w2v_vocab_free(struct w2v_vocab *v)
{
	for (int64_t id = 0; v->words && id < v->size; id++)
		free(v->words[id]);
	free(v->words);
	free(v->counts);
	free(v->keep);
	free(v->neg_prob);
	free(v->neg_alias);
	memset(v, 0, sizeof(*v));
}

void w2v_corpus_free(struct w2v_corpus *c)
{
	free(c->ids);
	c->ids = NULL;
	c->len = 0;
}
