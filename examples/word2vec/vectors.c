/*
 * vectors.c - the trained word vectors (the input table), read back from
 * the library, and saved in word2vec's text format.
 */
#include <stdio.h>
#include <stdlib.h>

#include "word2vec.h"

/* Rows read per call, to bound the library's staging memory. */
#define READ_CHUNK 65536

/*
 * Rank 0 gets every row into *vecs ([rows][dim]); the other ranks take
 * part with no ids of their own, since a read is collective: every rank
 * makes the same number of calls.  *vecs is NULL on those ranks.  When
 * rank 0 has no memory for the vectors, every rank stops before the first
 * read.
 */
int w2v_vectors_read(struct w2v_model *m, int64_t rows, float **vecs)
{
	int64_t *ids = NULL;
	float *all = NULL;
	int rc = 0;

	*vecs = NULL;
	if (m->rank == 0) {
		ids = malloc(READ_CHUNK * sizeof(*ids));
		all = malloc((size_t)rows * m->dim * sizeof(*all));
		if (!ids || !all) {
			fprintf(stderr, W2V_NAME ": out of memory for the "
				"vectors\n");
			rc = SHEMB_ENOMEM;
		}
	}
	rc = w2v_agree(m, rc, NULL, "memory for the vectors");
	for (int64_t r0 = 0; !rc && r0 < rows; r0 += READ_CHUNK) {
		int64_t n = rows - r0 < READ_CHUNK ? rows - r0 : READ_CHUNK;

		for (int64_t i = 0; ids && i < n; i++)
			ids[i] = r0 + i;
		rc = shemb_table_read_rows(m->in, m->rank == 0 ? n : 0, ids,
					   all ? all + r0 * m->dim : NULL,
					   SHEMB_F32);
		w2v_check(m, rc, "shemb_table_read_rows");
	}
	free(ids);
	if (rc)
		free(all);
	else
		*vecs = all;
	return rc;
}

/* "rows dim", then a line per word: the word and its values; into f,
 * opened on path, which this closes. */
int w2v_vectors_save(FILE *f, const char *path, const struct w2v_vocab *v,
		     const float *vecs, int dim)
{
	fprintf(f, "%lld %d\n", (long long)v->size, dim);
	for (int64_t id = 0; id < v->size; id++) {
		const float *row = vecs + (size_t)id * dim;

		fputs(v->words[id], f);
		for (int c = 0; c < dim; c++)
			fprintf(f, " %.6g", row[c]);
		fputc('\n', f);
	}
	if (ferror(f) | fclose(f)) {
		fprintf(stderr, W2V_NAME ": %s: write failed\n", path);
		return -1;
	}
	return 0;
}
