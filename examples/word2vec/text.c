/*
 * text.c - a text file read whole into memory.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "word2vec.h"

#define READ_CHUNK (1 << 20)

/* Reads pipes and files alike; returns 0, or -1 after a message. */
int w2v_text_read(const char *path, struct w2v_text *t)
{
	FILE *f = fopen(path, "rb");
	size_t cap = 0, n;

	memset(t, 0, sizeof(*t));
	if (!f) {
		fprintf(stderr, W2V_NAME ": %s: %s\n", path, strerror(errno));
		return -1;
	}
	do {
		if (cap - t->len < READ_CHUNK) {
			size_t ncap = cap + cap / 2 + READ_CHUNK;
			char *nb = realloc(t->buf, ncap);

			if (!nb) {
				fprintf(stderr, W2V_NAME ": %s: out of "
					"memory\n", path);
				goto fail;
			}
			t->buf = nb;
			cap = ncap;
		}
		n = fread(t->buf + t->len, 1, cap - t->len, f);
		t->len += n;
	} while (n > 0);
	if (ferror(f)) {
		fprintf(stderr, W2V_NAME ": %s: %s\n", path, strerror(errno));
		goto fail;
	}
	fclose(f);
	return 0;
fail:
	fclose(f);
	w2v_text_free(t);
	return -1;
}

void w2v_text_free(struct w2v_text *t)
{
	free(t->buf);
	t->buf = NULL;
	t->len = 0;
}
