/*
 * shemb_run_sink.c - the launcher's stdout and stderr, each written by a
 * thread of its own.
 *
 * The main thread gathers lines in a piece of memory (fill) and hands it to
 * the queue of the sink; the writer thread of the sink writes the queue out
 * in order.  One thread writes each output and a line is never split
 * between two pieces by another line, so lines of different ranks never
 * mix.  A piece may have to wait for the other sink to write what was
 * queued there before it (sink_write_after): the launcher's own notes come
 * after the ranks' last lines, as they would with one writer for both.
 *
 * The writers block every signal but SIGURG, which is how sink_abandon()
 * gets one out of a write() that never returns: its handler does nothing,
 * so the write fails with EINTR (or returns short) and the writer sees that
 * it is to stop.  SIGURG is ignored by default: one from elsewhere changes
 * nothing.
 */
#define _GNU_SOURCE
#include "tools/shemb_run_sink.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

/* How often sink_abandon() pokes a writer until it has ended: a poke that
 * comes just before its write() is lost. */
#define POKE_NS (10 * 1000 * 1000)
#define STOP_SIGNAL SIGURG

struct sink_chunk {
	struct sink_chunk *next;
	/* written once wait_for->done reaches wait_until; NULL: at once */
	struct sink *wait_for;
	uint64_t wait_until;
	size_t off;		/* written so far, by the writer */
	size_t len, cap;
	char data[];
};

/* ---- writing ---- */

static bool stopping(struct sink *k)
{
	return __atomic_load_n(&k->stop, __ATOMIC_ACQUIRE);
}

/*
 * The launcher does not own the file descriptions of its stdout and stderr;
 * whoever shares them may have made them non-blocking.  Wait for room then
 * (or for a signal: the caller looks whether it is to stop).
 */
static int wait_writable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLOUT };

	return poll(&p, 1, -1) >= 0 || errno == EINTR ? 0 : -1;
}

/* Write what is left of c; 0, the errno of the write that failed, or -1
 * when the sink is to stop. */
static int write_chunk(struct sink *k, struct sink_chunk *c)
{
	while (c->off < c->len) {
		ssize_t n;

		if (stopping(k))
			return -1;
		n = write(k->fd, c->data + c->off, c->len - c->off);
		if (n >= 0) {
			c->off += n;
			continue;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN && wait_writable(k->fd) == 0)
			continue;
		return errno;
	}
	return 0;
}

static struct sink_chunk *chunk_new(size_t cap)
{
	struct sink_chunk *c = malloc(sizeof(*c) + cap);

	if (!c)
		return NULL;
	c->next = NULL;
	c->wait_for = NULL;
	c->wait_until = 0;
	c->off = 0;
	c->len = 0;
	c->cap = cap;
	return c;
}

/* ---- the writer thread (all of it under the lock but the write) ---- */

static void poke_main(struct sinks *s)
{
	uint64_t one = 1;

	/* fails only when the count is about to overflow: poked already */
	(void)!write(s->event, &one, sizeof(one));
}

static bool chunk_ready(const struct sink_chunk *c)
{
	return !c->wait_for || c->wait_for->done >= c->wait_until;
}

/* The piece to write next, once there is one; NULL when the writer is to
 * end. */
static struct sink_chunk *next_chunk(struct sink *k)
{
	for (;;) {
		if (stopping(k) || k->broken)
			return NULL;
		if (k->head && chunk_ready(k->head))
			return k->head;
		if (!k->head && k->closing)
			return NULL;
		pthread_cond_wait(&k->set->changed, &k->set->lock);
	}
}

/* Empty the queue; returns the bytes it held that were not written. */
static uint64_t drop_queue(struct sink *k)
{
	uint64_t left = 0;

	while (k->head) {
		struct sink_chunk *c = k->head;

		k->head = c->next;
		left += c->len - c->off;
		free(c);
	}
	k->tail = NULL;
	k->queued = 0;
	k->done = k->total;
	return left;
}

/* The head of the queue is written, or writing it failed with err. */
static void chunk_written(struct sink *k, int err)
{
	struct sink_chunk *c = k->head;

	k->head = c->next;
	if (!k->head)
		k->tail = NULL;
	k->queued -= c->len;
	k->done += c->len;
	free(c);
	if (err) {
		k->broken = true;
		k->error = err;
		drop_queue(k);
		poke_main(k->set);
	} else if (k->queued < k->wake_below) {
		k->wake_below = 0;
		poke_main(k->set);
	}
	/* a piece of the other sink may wait for this one */
	pthread_cond_broadcast(&k->set->changed);
}

static void *writer_main(void *arg)
{
	struct sink *k = arg;
	struct sinks *s = k->set;
	struct sink_chunk *c;
	sigset_t stop;

	sigemptyset(&stop);
	sigaddset(&stop, STOP_SIGNAL);
	pthread_sigmask(SIG_UNBLOCK, &stop, NULL);
	pthread_mutex_lock(&s->lock);
	while ((c = next_chunk(k))) {
		int err;

		pthread_mutex_unlock(&s->lock);
		err = write_chunk(k, c);
		pthread_mutex_lock(&s->lock);
		if (err < 0)
			break;	/* sink_abandon() drops the queue */
		chunk_written(k, err);
	}
	k->ended = true;
	pthread_cond_broadcast(&s->changed);
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

static void on_stop_signal(int sig)
{
	(void)sig;	/* only there to interrupt a write */
}

/* ---- the main thread's side ---- */

static void sink_init(struct sink *k, struct sinks *s, int fd)
{
	memset(k, 0, sizeof(*k));
	k->fd = fd;
	k->set = s;
	k->mode = SINK_DIRECT;
}

/* Join the writers, which end once their queues are empty; the sinks write
 * directly from then on. */
static void end_writers(struct sinks *s)
{
	pthread_mutex_lock(&s->lock);
	for (int i = 0; i < 2; i++)
		s->k[i].closing = true;
	pthread_cond_broadcast(&s->changed);
	pthread_mutex_unlock(&s->lock);
	for (int i = 0; i < 2; i++) {
		struct sink *k = &s->k[i];

		if (k->mode != SINK_THREADED)
			continue;
		pthread_join(k->thread, NULL);
		k->mode = SINK_DIRECT;
		pthread_mutex_lock(&s->lock);	/* the other may read done */
		drop_queue(k);	/* empty by now */
		pthread_mutex_unlock(&s->lock);
	}
	if (s->event >= 0)
		(void)close(s->event);
	s->event = -1;
}

/*
 * Start a writer thread per sink.  Returns 0, or -1 with errno set when
 * they could not start: the sinks then write directly, and a stalled
 * output stalls the caller.
 */
int sinks_init(struct sinks *s, int out_fd, int err_fd)
{
	struct sigaction act = { .sa_handler = on_stop_signal };
	pthread_condattr_t attr;
	sigset_t all, old;
	int rc = 0;

	pthread_mutex_init(&s->lock, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&s->changed, &attr);
	pthread_condattr_destroy(&attr);
	sink_init(&s->k[0], s, out_fd);
	sink_init(&s->k[1], s, err_fd);
	s->event = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (s->event < 0)
		return -1;
	/* no SA_RESTART: the signal is to end a write() */
	if (sigaction(STOP_SIGNAL, &act, &s->saved_action) < 0)
		return -1;
	s->handler_set = true;
	/* Signals are the main thread's, read from its signalfd; a thread
	 * starts with the mask of its creator. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	for (int i = 0; i < 2 && !rc; i++) {
		rc = pthread_create(&s->k[i].thread, NULL, writer_main,
				    &s->k[i]);
		if (!rc)
			s->k[i].mode = SINK_THREADED;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!rc)
		return 0;
	end_writers(s);
	errno = rc;
	return -1;
}

/* Write what is queued, waiting as long as that takes, and end the
 * writers.  A sink still writes directly afterwards. */
void sinks_close(struct sinks *s)
{
	sink_flush(&s->k[0]);
	sink_flush(&s->k[1]);
	end_writers(s);
	if (s->handler_set)
		(void)sigaction(STOP_SIGNAL, &s->saved_action, NULL);
	s->handler_set = false;
	pthread_cond_destroy(&s->changed);
	pthread_mutex_destroy(&s->lock);
}

/* Readable when a writer moved on: see sink_backlogged(), sink_idle(). */
int sinks_event_fd(const struct sinks *s)
{
	return s->event;
}

void sinks_clear_event(struct sinks *s)
{
	uint64_t count;

	(void)!read(s->event, &count, sizeof(count));
}

static void write_direct(struct sink *k, struct sink_chunk *c)
{
	int err;

	if (!k->broken) {
		err = write_chunk(k, c);
		if (err) {
			k->broken = true;
			k->error = err;
		}
	}
	free(c);
}

/* Append c to the queue, into the last piece when that has room and is not
 * being written. */
static void queue_chunk(struct sink *k, struct sink_chunk *c)
{
	struct sinks *s = k->set;
	struct sink_chunk *t;

	pthread_mutex_lock(&s->lock);
	k->total += c->len;
	if (k->broken) {
		k->done += c->len;
		pthread_mutex_unlock(&s->lock);
		free(c);
		return;
	}
	k->queued += c->len;
	t = k->tail;
	if (!c->wait_for && t && t != k->head && t->cap - t->len >= c->len) {
		memcpy(t->data + t->len, c->data, c->len);
		t->len += c->len;
		pthread_mutex_unlock(&s->lock);
		free(c);
		return;
	}
	if (t)
		t->next = c;
	else
		k->head = c;
	k->tail = c;
	pthread_cond_broadcast(&s->changed);
	pthread_mutex_unlock(&s->lock);
}

/* Hand what was put since the last time to the writer. */
void sink_flush(struct sink *k)
{
	struct sink_chunk *c = k->fill;

	if (!c)
		return;
	k->fill = NULL;
	if (k->mode == SINK_THREADED)
		queue_chunk(k, c);
	else if (k->mode == SINK_DIRECT)
		write_direct(k, c);
	else
		free(c);
}

/* Put the pieces of iov as one unit: they are never split between two
 * writes of the sink by another unit. */
void sink_put(struct sink *k, const struct iovec *iov, int n)
{
	size_t total = 0;
	char *p;

	for (int i = 0; i < n; i++)
		total += iov[i].iov_len;
	if (k->mode == SINK_DEAD)
		return;
	if (k->fill && total > k->fill->cap - k->fill->len)
		sink_flush(k);
	if (!k->fill)
		k->fill = chunk_new(total > SINK_CHUNK_BYTES ? total :
				    SINK_CHUNK_BYTES);
	if (!k->fill) {
		k->lost += total;
		return;
	}
	p = k->fill->data + k->fill->len;
	for (int i = 0; i < n; i++) {
		if (!iov[i].iov_len)
			continue; /* an empty piece may have no base */
		memcpy(p, iov[i].iov_base, iov[i].iov_len);
		p += iov[i].iov_len;
	}
	k->fill->len += total;
}

void sink_write(struct sink *k, const char *data, size_t len)
{
	struct iovec iov = { .iov_base = (void *)data, .iov_len = len };

	sink_put(k, &iov, 1);
}

/* Write data on k, but only once what is queued on first so far has been
 * written (or dropped). */
void sink_write_after(struct sink *k, const char *data, size_t len,
		      struct sink *first)
{
	sink_flush(first);
	sink_flush(k);
	sink_write(k, data, len);
	/* total is the main thread's to change: no lock to read it */
	if (k->fill && k->mode == SINK_THREADED &&
	    first->mode == SINK_THREADED) {
		k->fill->wait_for = first;
		k->fill->wait_until = first->total;
	}
	sink_flush(k);
}

/* True when more than SINK_BACKLOG_BYTES wait: the caller then stops
 * feeding the sink, and sinks_event_fd() is poked once it has room. */
bool sink_backlogged(struct sink *k)
{
	bool full;

	if (k->mode != SINK_THREADED)
		return false;
	pthread_mutex_lock(&k->set->lock);
	full = k->queued > SINK_BACKLOG_BYTES && !k->broken;
	if (full)
		k->wake_below = SINK_BACKLOG_BYTES / 2;
	pthread_mutex_unlock(&k->set->lock);
	return full;
}

/* True when everything put is written (or the sink dropped it); otherwise
 * sinks_event_fd() is poked once it is. */
bool sink_idle(struct sink *k)
{
	bool idle;

	sink_flush(k);
	if (k->mode != SINK_THREADED)
		return true;
	pthread_mutex_lock(&k->set->lock);
	idle = !k->head || k->broken;
	if (!idle)
		k->wake_below = 1;
	pthread_mutex_unlock(&k->set->lock);
	return idle;
}

bool sink_broken(struct sink *k, int *error)
{
	bool broken;

	if (k->mode != SINK_THREADED) {
		*error = k->error;
		return k->broken;
	}
	pthread_mutex_lock(&k->set->lock);
	broken = k->broken;
	*error = k->error;
	pthread_mutex_unlock(&k->set->lock);
	return broken;
}

/* Under the lock: until the writer of k has ended, poking it out of a
 * write() or poll() that may never return. */
static void stop_writer(struct sink *k)
{
	struct sinks *s = k->set;

	__atomic_store_n(&k->stop, true, __ATOMIC_RELEASE);
	pthread_cond_broadcast(&s->changed);
	while (!k->ended) {
		struct timespec t;

		pthread_kill(k->thread, STOP_SIGNAL);
		clock_gettime(CLOCK_MONOTONIC, &t);
		t.tv_nsec += POKE_NS;
		if (t.tv_nsec >= 1000000000) {
			t.tv_sec++;
			t.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&s->changed, &s->lock, &t);
	}
}

/*
 * Give up on the sink: its writer ends, even in the middle of a write that
 * never returns, and what it held and whatever comes later is dropped.
 * Returns the bytes dropped.
 */
uint64_t sink_abandon(struct sink *k)
{
	struct sinks *s = k->set;
	uint64_t left;

	sink_flush(k);
	if (k->mode != SINK_THREADED) {
		k->mode = SINK_DEAD;
		return 0;
	}
	pthread_mutex_lock(&s->lock);
	stop_writer(k);
	pthread_mutex_unlock(&s->lock);
	pthread_join(k->thread, NULL);
	k->mode = SINK_DEAD;
	pthread_mutex_lock(&s->lock);
	left = drop_queue(k);
	/* a piece of the other sink may wait for this one */
	pthread_cond_broadcast(&s->changed);
	pthread_mutex_unlock(&s->lock);
	return left;
}
