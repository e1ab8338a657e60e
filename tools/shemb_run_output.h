/*
 * shemb_run_output.h - the output side of shemb-run: the pipes of the
 * ranks, cut into lines (shemb_run_output.c), and the launcher's stdout
 * and stderr.
 */
#ifndef SHEMB_RUN_OUTPUT_H
#define SHEMB_RUN_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>

/* What a sink keeps before it writes; a longer line is written directly. */
#define SINK_BYTES (128 * 1024)

/*
 * One of the launcher's own outputs (stdout or stderr).  Complete lines
 * collect in buf and go out together.  After a failed write the sink is
 * broken and drops everything.
 */
struct sink {
	int fd;
	bool broken;
	int error;	/* errno of the failed write */
	size_t len;
	char buf[SINK_BYTES];
};

/*
 * One pipe from a rank (its stdout or its stderr).  With a prefix, the
 * start of a line waits in line until its end arrives; without one, bytes
 * go to the sink as they come.
 */
struct stream {
	int fd;			/* read end; -1 once closed */
	struct sink *sink;
	const char *prefix;	/* "[r] ", or NULL: pass bytes through */
	size_t prefix_len;
	char *line;
	size_t len, cap;
};

void sink_init(struct sink *k, int fd);
int sink_flush(struct sink *k);
int sink_write(struct sink *k, const char *data, size_t len);

void stream_init(struct stream *s, int fd, struct sink *k,
		 const char *prefix);
int stream_read(struct stream *s);
int stream_close(struct stream *s);

#endif
