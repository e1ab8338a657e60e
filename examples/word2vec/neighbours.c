/*
 * neighbours.c - the nearest neighbours of query words by cosine
 * similarity of their vectors, one line per query:
 *
 *     neighbours king: queen 0.812, prince 0.790, ...
 *
 * Words outside the vocabulary get a line on standard error instead.
 */
#define _POSIX_C_SOURCE 200809L  /* strdup, strtok_r */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "word2vec.h"

struct hit {
	int64_t id;
	float sim;
};

/* Scale every row to length 1, so that a dot product is the cosine. */
static void normalise(float *vecs, int64_t rows, int dim)
{
	for (int64_t r = 0; r < rows; r++) {
		float *v = vecs + (size_t)r * dim;
		double ss = 0;

		for (int c = 0; c < dim; c++)
			ss += (double)v[c] * v[c];
		if (ss > 0)
			for (int c = 0; c < dim; c++)
				v[c] = (float)(v[c] / sqrt(ss));
	}
}

/* Insert (id, sim) into best[0..*n), kept in descending order, at most
 * top long; ties keep the lower id first. */
static void insert_hit(struct hit *best, int *n, int top, int64_t id,
		       float sim)
{
	int i = *n < top ? (*n)++ : top;

	if (i == top && !(sim > best[top - 1].sim))
		return;
	if (i == top)
		i = top - 1;
	while (i > 0 && sim > best[i - 1].sim) {
		best[i] = best[i - 1];
		i--;
	}
	best[i] = (struct hit){ id, sim };
}

static void print_neighbours(const struct w2v_vocab *v, const float *vecs,
			     int dim, int64_t q, int top, struct hit *best)
{
	const float *qv = vecs + (size_t)q * dim;
	int n = 0;

	for (int64_t id = 0; id < v->size; id++) {
		const float *w = vecs + (size_t)id * dim;
		double s = 0;

		if (id == q)
			continue;
		for (int c = 0; c < dim; c++)
			s += (double)qv[c] * w[c];
		insert_hit(best, &n, top, id, (float)s);
	}
	printf("neighbours %s:", v->words[q]);
	for (int i = 0; i < n; i++)
		printf("%s %s %.3f", i ? "," : "", v->words[best[i].id],
		       best[i].sim);
	putchar('\n');
}

/* query: words separated by commas (and spaces), matched lowercased as
 * the text was. */
void w2v_neighbours_print(const struct w2v_vocab *v, float *vecs, int dim,
			  const char *query, int top)
{
	char *copy = strdup(query), *save = NULL;
	struct hit *best = malloc((size_t)top * sizeof(*best));

	if (!copy || !best) {
		fprintf(stderr, W2V_NAME ": out of memory for the queries\n");
		goto out;
	}
	normalise(vecs, v->size, dim);
	for (char *p = copy; *p; p++)
		if (*p >= 'A' && *p <= 'Z')
			*p = (char)(*p - 'A' + 'a');
	for (char *w = strtok_r(copy, ", ", &save); w;
	     w = strtok_r(NULL, ", ", &save)) {
		int64_t q = w2v_vocab_find(v, w);

		if (q < 0)
			fprintf(stderr, W2V_NAME ": '%s' is not in the "
				"vocabulary\n", w);
		else
			print_neighbours(v, vecs, dim, q, top, best);
	}
	fflush(stdout);
out:
	free(copy);
	free(best);
}
