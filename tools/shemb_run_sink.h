/*
 * shemb_run_sink.h - the launcher's stdout and stderr (shemb_run_sink.c).
 *
 * What the main loop writes goes into a queue; a thread per output takes
 * it from there and waits in write() when the output takes no more, so the
 * main loop never does.  The main loop reads the queues' fill level and
 * stops taking in output for a full one.
 */
#ifndef SHEMB_RUN_SINK_H
#define SHEMB_RUN_SINK_H

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* The size of a piece of the queue; a longer line gets a piece of its own. */
#define SINK_CHUNK_BYTES (64 * 1024)
/* Bytes queued beyond which the pipes that feed a sink are not read. */
#define SINK_BACKLOG_BYTES (4 * 1024 * 1024)

enum sink_mode {
	SINK_DIRECT,	/* no writer thread: the main thread writes, waits */
	SINK_THREADED,	/* a writer thread takes the queue */
	SINK_DEAD,	/* given up: whatever comes is dropped */
};

struct sink_chunk;
struct sinks;

/* One of the launcher's outputs.  After a failed write the sink is broken
 * and drops everything. */
struct sink {
	int fd;
	struct sinks *set;
	/* the main thread's alone */
	enum sink_mode mode;
	struct sink_chunk *fill;	/* being filled, not queued yet */
	uint64_t lost;			/* dropped for want of memory */
	pthread_t thread;
	/* under set->lock while the writer runs */
	struct sink_chunk *head, *tail;
	size_t queued;		/* bytes in the queue, in its write too */
	uint64_t total;		/* bytes ever queued (written by main) */
	uint64_t done;		/* bytes of those written or dropped */
	size_t wake_below;	/* poke set->event once queued < this; 0 */
	bool broken;
	int error;		/* errno of the failed write */
	bool closing;		/* write what is queued, then end */
	bool stop;		/* end now (atomic: read in the writes) */
	bool ended;		/* the writer has */
};

/* The two outputs, which share a lock: a line of one may wait for the
 * other (sink_write_after). */
struct sinks {
	pthread_mutex_t lock;
	pthread_cond_t changed;	/* a queue grew or a writer moved on */
	int event;		/* eventfd the writers poke; -1: none */
	struct sink k[2];	/* stdout, stderr */
	struct sigaction saved_action;	/* of SIGURG, before sinks_init */
	bool handler_set;
};

int sinks_init(struct sinks *s, int out_fd, int err_fd);
void sinks_close(struct sinks *s);
int sinks_event_fd(const struct sinks *s);
void sinks_clear_event(struct sinks *s);

void sink_put(struct sink *k, const struct iovec *iov, int n);
void sink_write(struct sink *k, const char *data, size_t len);
void sink_write_after(struct sink *k, const char *data, size_t len,
		      struct sink *first);
void sink_flush(struct sink *k);
bool sink_backlogged(struct sink *k);
bool sink_idle(struct sink *k);
bool sink_broken(struct sink *k, int *error);
uint64_t sink_abandon(struct sink *k);

#endif
