/*
 * corpus_gen.c - a generated text with planted structure, for the demo
 * and for trying options: one sentence a line, of readable words.
 *
 * Three kinds of sentence, mixed with frequent filler words ("the", "of",
 * drawn from a Zipf law, as in real text) and general words that show up
 * everywhere:
 *  - topic sentences: words of one group (animals, colours, numbers,
 *    fruit, weekdays, months, family, instruments) with a few words of
 *    that group's context ("farm", "paint", "count" ...): the words of a
 *    group should end up near each other;
 *  - capital sentences: a country and its capital, always within four
 *    words ("the capital of france is paris"), often with the country's
 *    adjective ("french"), sometimes two such pairs: a capital should be
 *    next to its country, and countries near countries;
 *  - pair sentences: "salt and pepper", "knife and fork" ..., the two
 *    words of a pair never apart, often twice in a sentence, among words
 *    of their theme ("soup", "taste").
 *
 * Skip-gram draws together the words that share contexts, not simply the
 * words that appear together: "salt" and "pepper" end up near each other
 * because both come with "salt", "pepper", "soup" and "taste", while the
 * words of other pairs come with other words.
 * Good queries: france,paris,cat,red,seven,monday,salt,knife,piano.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "word2vec.h"

#define N_OF(a) ((int)(sizeof(a) / sizeof((a)[0])))

struct group {
	const char *words[16];
	const char *context[6];
};

static const struct group groups[] = {
	{ { "cat", "dog", "horse", "cow", "sheep", "goat", "pig", "rabbit",
	    "mouse", "lion", "tiger", "bear", "wolf", "fox", "deer" },
	  { "farm", "zoo", "fur", "tail", "wild" } },
	{ { "red", "green", "blue", "yellow", "purple", "pink", "brown",
	    "black", "white", "grey", "orange" },
	  { "paint", "shade", "bright", "dark", "colour" } },
	{ { "one", "two", "three", "four", "five", "six", "seven", "eight",
	    "nine", "ten" },
	  { "count", "number", "plus", "equals", "times" } },
	{ { "apple", "banana", "cherry", "grape", "lemon", "mango", "pear",
	    "plum", "peach", "melon" },
	  { "ripe", "sweet", "tree", "juice", "fruit" } },
	{ { "monday", "tuesday", "wednesday", "thursday", "friday",
	    "saturday", "sunday" },
	  { "week", "morning", "every", "next", "day" } },
	{ { "january", "february", "march", "april", "may", "june", "july",
	    "august", "september", "october", "november", "december" },
	  { "year", "month", "summer", "winter", "spring" } },
	{ { "mother", "father", "sister", "brother", "son", "daughter",
	    "uncle", "aunt", "grandmother", "grandfather" },
	  { "family", "love", "married", "born", "home" } },
	{ { "piano", "guitar", "violin", "drum", "flute", "trumpet", "cello",
	    "harp" },
	  { "play", "music", "song", "band", "concert" } },
};

/* A country, its capital and its adjective. */
static const char *const capitals[][3] = {
	{ "france", "paris", "french" }, { "germany", "berlin", "german" },
	{ "italy", "rome", "italian" }, { "spain", "madrid", "spanish" },
	{ "japan", "tokyo", "japanese" }, { "china", "beijing", "chinese" },
	{ "russia", "moscow", "russian" }, { "egypt", "cairo", "egyptian" },
	{ "greece", "athens", "greek" }, { "norway", "oslo", "norwegian" },
	{ "peru", "lima", "peruvian" }, { "kenya", "nairobi", "kenyan" },
	{ "canada", "ottawa", "canadian" }, { "poland", "warsaw", "polish" },
	{ "austria", "vienna", "austrian" },
	{ "portugal", "lisbon", "portuguese" },
};

/* Two words that go together, and two words of their theme. */
static const char *const pairs[][4] = {
	{ "salt", "pepper", "soup", "taste" },
	{ "bread", "butter", "toast", "breakfast" },
	{ "knife", "fork", "dinner", "plate" },
	{ "cup", "saucer", "tea", "coffee" },
	{ "needle", "thread", "sew", "cloth" },
	{ "lock", "key", "door", "open" },
	{ "bow", "arrow", "hunter", "shoot" },
	{ "thunder", "lightning", "storm", "rain" },
	{ "fish", "chips", "fried", "vinegar" },
	{ "bucket", "spade", "beach", "sand" },
	{ "hammer", "nail", "wood", "build" },
	{ "pen", "ink", "write", "desk" },
};

/* Most frequent first: filler word k comes up in proportion to 1/(k+1). */
static const char *const filler[] = {
	"the", "of", "and", "to", "a", "in", "is", "it", "that", "was",
	"he", "for", "on", "are", "with", "as", "his", "they", "at", "be",
	"this", "from", "have", "or", "by", "had", "not", "but", "what",
	"all", "were", "when", "we", "there", "can", "an", "your", "which",
	"their", "said", "if", "do", "will", "about", "up", "out", "then",
	"she", "so", "would", "into", "her", "him", "very", "after",
};

static const char *const general[] = {
	"house", "river", "table", "garden", "road", "window", "street",
	"market", "school", "village", "church", "bridge", "office",
	"train", "ship", "letter", "story", "picture", "answer", "question",
	"friend", "doctor", "teacher", "farmer", "soldier", "child", "man",
	"woman", "boy", "girl", "people", "bought", "found", "saw", "took",
	"gave", "made", "told", "left", "came", "went", "walked", "looked",
	"brought", "kept", "carried", "old", "new", "big", "small", "long",
	"short", "good", "bad", "little", "great",
};

struct gen {
	struct w2v_text *t;
	size_t cap;
	int64_t words, limit;
	double filler_cdf[N_OF(filler)];
	uint64_t rng;
	bool oom;
};

static int pick(struct gen *g, int n)
{
	return (int)(w2v_unit(&g->rng) * n);
}

static void put_word(struct gen *g, const char *w)
{
	size_t len = strlen(w);

	if (g->oom || g->words >= g->limit)
		return;
	if (g->t->len + len + 2 > g->cap) {
		size_t cap = g->cap ? g->cap * 2 : 1 << 20;
		char *nb = realloc(g->t->buf, cap);

		if (!nb) {
			g->oom = true;
			return;
		}
		g->t->buf = nb;
		g->cap = cap;
	}
	memcpy(g->t->buf + g->t->len, w, len);
	g->t->len += len;
	g->t->buf[g->t->len++] = ' ';
	g->words++;
}

/* Replace the space after the sentence's last word with a newline. */
static void end_line(struct gen *g)
{
	if (!g->oom && g->t->len && g->t->buf[g->t->len - 1] == ' ')
		g->t->buf[g->t->len - 1] = '\n';
}

static void put_filler(struct gen *g)
{
	double u = w2v_unit(&g->rng);
	int k = 0;

	while (k < N_OF(filler) - 1 && g->filler_cdf[k] <= u)
		k++;
	put_word(g, filler[k]);
}

/* n words of padding: mostly filler, some general words. */
static void put_padding(struct gen *g, int n)
{
	for (int i = 0; i < n; i++) {
		if (w2v_unit(&g->rng) < 0.7)
			put_filler(g);
		else
			put_word(g, general[pick(g, N_OF(general))]);
	}
}

static int group_size(const struct group *gr)
{
	int n = 0;

	while (n < N_OF(gr->words) && gr->words[n])
		n++;
	return n;
}

static int context_size(const struct group *gr)
{
	int n = 0;

	while (n < N_OF(gr->context) && gr->context[n])
		n++;
	return n;
}

static void topic_sentence(struct gen *g)
{
	const struct group *gr = &groups[pick(g, N_OF(groups))];
	int len = 6 + pick(g, 7), nw = group_size(gr);
	int nc = context_size(gr);

	for (int i = 0; i < len; i++) {
		double u = w2v_unit(&g->rng);

		if (u < 0.35)
			put_word(g, gr->words[pick(g, nw)]);
		else if (u < 0.5)
			put_word(g, gr->context[pick(g, nc)]);
		else
			put_padding(g, 1);
	}
}

/* One country and its capital, in one of a few forms, sometimes with
 * the country's adjective. */
static void put_capital(struct gen *g)
{
	const char *const *c = capitals[pick(g, N_OF(capitals))];

	switch (pick(g, 3)) {
	case 0:     /* paris the capital of france */
		put_word(g, c[1]);
		put_word(g, "the");
		put_word(g, "capital");
		put_word(g, "of");
		put_word(g, c[0]);
		break;
	case 1:     /* the capital of france is paris */
		put_word(g, "capital");
		put_word(g, "of");
		put_word(g, c[0]);
		put_word(g, "is");
		put_word(g, c[1]);
		break;
	default:    /* paris in france */
		put_word(g, c[1]);
		put_word(g, "in");
		put_word(g, c[0]);
		break;
	}
	if (w2v_unit(&g->rng) < 0.6) {
		put_padding(g, 1);
		put_word(g, c[2]);
	}
}

static void capital_sentence(struct gen *g)
{
	put_padding(g, pick(g, 3));
	put_capital(g);
	if (w2v_unit(&g->rng) < 0.5) {
		put_word(g, "and");
		put_capital(g);
	}
	put_padding(g, pick(g, 3));
}

/* A word of a pair's theme, more often than not. */
static void put_theme(struct gen *g, const char *word)
{
	if (w2v_unit(&g->rng) < 0.4)
		put_word(g, word);
	put_padding(g, 1 + pick(g, 2));
}

/* "salt and pepper", mostly in that order */
static void put_pair(struct gen *g, const char *const *p)
{
	int first = pick(g, 4) == 0;

	put_word(g, p[first]);
	put_word(g, "and");
	put_word(g, p[!first]);
}

static void pair_sentence(struct gen *g)
{
	const char *const *p = pairs[pick(g, N_OF(pairs))];

	put_padding(g, 1 + pick(g, 2));
	put_theme(g, p[2 + pick(g, 2)]);
	put_pair(g, p);
	put_padding(g, 1 + pick(g, 2));
	if (w2v_unit(&g->rng) < 0.5)
		put_pair(g, p);
	else
		put_theme(g, p[2 + pick(g, 2)]);
}

int w2v_corpus_generate(int64_t nwords, uint64_t seed, struct w2v_text *t)
{
	struct gen g = { .t = t, .limit = nwords };
	double sum = 0;

	memset(t, 0, sizeof(*t));
	g.rng = w2v_mix64(seed ^ 0x636f72707573ull);    /* "corpus" */
	for (int k = 0; k < N_OF(filler); k++)
		g.filler_cdf[k] = (sum += 1.0 / (k + 1));
	for (int k = 0; k < N_OF(filler); k++)
		g.filler_cdf[k] /= sum;
	while (!g.oom && g.words < g.limit) {
		double u = w2v_unit(&g.rng);

		if (u < 0.55)
			topic_sentence(&g);
		else if (u < 0.75)
			capital_sentence(&g);
		else
			pair_sentence(&g);
		end_line(&g);
	}
	if (g.oom) {
		fprintf(stderr, W2V_NAME ": out of memory for the corpus\n");
		w2v_text_free(t);
		return -1;
	}
	return 0;
}
