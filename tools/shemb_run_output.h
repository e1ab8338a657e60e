/*
 * shemb_run_output.h - the pipes of the ranks, cut into lines
 * (shemb_run_output.c) for the launcher's stdout and stderr
 * (shemb_run_sink.h).
 */
#ifndef SHEMB_RUN_OUTPUT_H
#define SHEMB_RUN_OUTPUT_H

#include "tools/shemb_run_sink.h"

#include <stddef.h>

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

void stream_init(struct stream *s, int fd, struct sink *k,
		 const char *prefix);
int stream_read(struct stream *s);
int stream_close(struct stream *s);

#endif
