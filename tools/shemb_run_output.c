/*
 * shemb_run_output.c - the ranks' output: read from their pipes, cut into
 * lines, prefixed with the rank, written to the launcher's stdout or stderr.
 *
 * A line goes to the sink only once all of it is here (up to its newline
 * or the end of the pipe), in one piece, so lines of different ranks never
 * mix.  The part of a line read so far waits in its stream, however long
 * it gets.
 */
#define _GNU_SOURCE
#include "tools/shemb_run_output.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Bytes taken from a pipe at a time. */
#define READ_BYTES 65536

void stream_init(struct stream *s, int fd, struct sink *k, const char *prefix)
{
	s->fd = fd;
	s->sink = k;
	s->prefix = prefix;
	s->prefix_len = prefix ? strlen(prefix) : 0;
	s->line = NULL;
	s->len = 0;
	s->cap = 0;
}

/* Write prefix, the held start of the line, then end[0..n), plus a newline
 * when the line has none of its own. */
static void put_line(struct stream *s, const char *end, size_t n,
		     bool add_newline)
{
	struct iovec iov[] = {
		{ .iov_base = (void *)s->prefix, .iov_len = s->prefix_len },
		{ .iov_base = s->line, .iov_len = s->len },
		{ .iov_base = (void *)end, .iov_len = n },
		{ .iov_base = "\n", .iov_len = add_newline },
	};

	/* A broken sink drops the line; the caller sees that on the sink. */
	sink_put(s->sink, iov, 4);
	s->len = 0;
}

static int grow_line(struct stream *s, size_t need)
{
	size_t cap = s->cap ? s->cap : 256;
	char *p;

	while (cap < need) {
		if (cap > SIZE_MAX / 2)
			return -1;
		cap *= 2;
	}
	p = realloc(s->line, cap);
	if (!p)
		return -1;
	s->line = p;
	s->cap = cap;
	return 0;
}

/* Keep the start of a line until its end comes. */
static void hold(struct stream *s, const char *data, size_t n)
{
	if (s->len + n > s->cap && grow_line(s, s->len + n) < 0) {
		/* No memory for a longer line: it goes out in pieces. */
		put_line(s, data, n, true);
		return;
	}
	memcpy(s->line + s->len, data, n);
	s->len += n;
}

static void take_lines(struct stream *s, const char *data, size_t n)
{
	const char *nl;

	while ((nl = memchr(data, '\n', n))) {
		size_t seg = nl - data + 1;

		put_line(s, data, seg, false);
		data += seg;
		n -= seg;
	}
	if (n > 0)
		hold(s, data, n);
}

/*
 * Read once from the pipe (so that no rank can hold up the others) and pass
 * the bytes on.  Returns 1 while the pipe stays open, 0 at its end and -1
 * (errno set) when reading failed; in both cases the stream is closed.
 */
int stream_read(struct stream *s)
{
	static char buf[READ_BYTES];
	ssize_t n;
	int err;

	do
		n = read(s->fd, buf, sizeof(buf));
	while (n < 0 && errno == EINTR);
	if (n < 0 && errno == EAGAIN)
		return 1;
	if (n <= 0) {
		err = n < 0 ? errno : 0;
		stream_close(s);
		errno = err;
		return err ? -1 : 0;
	}
	if (s->prefix)
		take_lines(s, buf, n);
	else
		sink_write(s->sink, buf, n);
	return 1;
}

/* Close the pipe; a last line without its newline gets one. */
int stream_close(struct stream *s)
{
	int rc = 0;

	if (s->len > 0)
		put_line(s, "", 0, true);
	free(s->line);
	s->line = NULL;
	s->cap = 0;
	if (s->fd >= 0) {
		rc = close(s->fd);
		s->fd = -1;
	}
	return rc;
}
