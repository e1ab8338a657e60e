/*
 * bench_csv.c - CSV output of shemb-bench (bench_csv.h).
 */
#define _GNU_SOURCE
#include "tools/bench_csv.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>

/* Longer than any header: a longer first line is not one of ours. */
#define FIRST_LINE_MAX 4096

/* The errno of the first failed write of a line (a process writes one
 * file), reported by bench_csv_close. */
static int write_errno;

/* The first line of f without its line break, at most n - 1 bytes of it,
 * into buf; -1 when it cannot be read. */
static int first_line(FILE *f, char *buf, size_t n)
{
	rewind(f);
	if (!fgets(buf, (int)n, f)) {
		buf[0] = '\0';
		return ferror(f) ? -1 : 0;
	}
	buf[strcspn(buf, "\r\n")] = '\0';
	return 0;
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
	if (had[0])
		fprintf(stderr, "%s: %s holds the columns of another "
			"measurement;\n  its header:  %s\n  this mode's: %s\n",
			who, path, had, header);
	else
		fprintf(stderr, "%s: %s is not empty and its first line is "
			"empty, not\n  this mode's header: %s\n", who, path,
			header);
	fprintf(stderr, "write to a new file (--csv) or remove this one\n");
	fclose(f);
	return NULL;
}

static FILE *failed(FILE *f, const char *path, const char *who,
		    const char *what)
{
	fprintf(stderr, "%s: cannot %s %s: %s\n", who, what, path,
		strerror(errno));
	if (f)
		fclose(f);
	return NULL;
}

FILE *bench_csv_open(const char *path, const char *header, const char *who)
{
	FILE *f = fopen(path, "a+");
	char had[FIRST_LINE_MAX];
	struct stat st;

	if (!f)
		return failed(NULL, path, who, "open");
	if (fstat(fileno(f), &st))
		return failed(f, path, who, "read");
	/* new or empty: nothing is read, so a device or a pipe works too */
	if (st.st_size == 0) {
		fputs(header, f);
		fputc('\n', f);
	} else {
		if (first_line(f, had, sizeof(had)))
			return failed(f, path, who, "read");
		if (strcmp(had, header))
			return refuse(f, path, who, had, header);
		end_last_line(f);
	}
	if (fflush(f) || ferror(f))
		return failed(f, path, who, "write");
	write_errno = 0;
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
	if (fflush(f) && !write_errno)
		write_errno = errno ? errno : EIO;
}

int bench_csv_close(FILE *f, const char *path, const char *who)
{
	int err = write_errno;

	if (!f)
		return 0;
	if (fflush(f) && !err)
		err = errno ? errno : EIO;
	if (ferror(f) && !err)
		err = EIO;
	if (fclose(f) && !err)
		err = errno ? errno : EIO;
	write_errno = 0;
	if (!err)
		return 0;
	fprintf(stderr, "%s: could not write every line to %s: %s\n", who,
		path, strerror(err));
	return -1;
}
