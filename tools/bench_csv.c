/*
 * bench_csv.c - CSV output of shemb-bench (bench_csv.h).
 */
#define _GNU_SOURCE
#include "tools/bench_csv.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The first line of f without its line break (malloc'd), "" for an empty
 * file; NULL when it cannot be read. */
static char *first_line(FILE *f)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;

	rewind(f);
	n = getline(&line, &cap, f);
	if (n < 0) {
		free(line);
		return ferror(f) ? NULL : strdup("");
	}
	while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
		line[--n] = '\0';
	return line;
}

/* A file whose last line lacks its line break (a run killed while it
 * wrote) gets one, so that the next line starts on a line of its own. */
static void end_last_line(FILE *f)
{
	int c = fseek(f, -1, SEEK_END) == 0 ? fgetc(f) : '\n';

	fseek(f, 0, SEEK_END); /* between a read and a write */
	if (c != '\n')
		fputc('\n', f);
}

static FILE *refuse(FILE *f, const char *path, const char *who,
		    const char *had, const char *header)
{
	fprintf(stderr, "%s: %s holds the columns of another measurement;\n"
		"  its header:  %s\n  this mode's: %s\n"
		"write to a new file (--csv) or remove this one\n", who, path,
		had, header);
	fclose(f);
	return NULL;
}

FILE *bench_csv_open(const char *path, const char *header, const char *who)
{
	FILE *f = fopen(path, "a+");
	char *had;

	if (!f) {
		fprintf(stderr, "%s: cannot open %s: %s\n", who, path,
			strerror(errno));
		return NULL;
	}
	had = first_line(f);
	if (!had) {
		fprintf(stderr, "%s: cannot read %s: %s\n", who, path,
			strerror(errno));
		fclose(f);
		return NULL;
	}
	if (had[0] && strcmp(had, header)) {
		refuse(f, path, who, had, header);
		free(had);
		return NULL;
	}
	if (!had[0]) {
		fseek(f, 0, SEEK_END);
		fputs(header, f);
		fputc('\n', f);
	} else {
		end_last_line(f);
	}
	free(had);
	fflush(f);
	return f;
}

void bench_csv_begin(FILE *f, const char *mode)
{
	if (f)
		fputs(mode, f);
}

void bench_csv_str(FILE *f, const char *s)
{
	if (!f)
		return;
	fputc(',', f);
	for (; s && *s; s++)
		fputc(*s == ',' || *s == '"' || (unsigned char)*s < ' '
			      ? '_' : *s, f);
}

void bench_csv_int(FILE *f, long long v)
{
	if (f)
		fprintf(f, ",%lld", v);
}

/* Six significant digits: a ratio computed from two fields agrees with
 * the ratio's own field to about 1e-5. */
void bench_csv_num(FILE *f, double v)
{
	if (!f)
		return;
	fputc(',', f);
	if (isfinite(v))
		fprintf(f, "%.6g", v);
}

void bench_csv_end(FILE *f)
{
	if (!f)
		return;
	fputc('\n', f);
	fflush(f);
}
