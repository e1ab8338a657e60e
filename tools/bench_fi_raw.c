/*
 * bench_fi_raw.c - the bar for the comm benchmark: how fast libfabric
 * itself streams from one process to another on one host.
 *
 * "shemb-bench comm-raw --provider P [--msg B] [--total B] [--iters N]
 * [--window W] [--bidir]" forks before touching libfabric; both processes
 * open an RDM endpoint with tagged messages, asking for what libshemb asks
 * for (fabric/ep.c: directed receives, manual progress), and swap
 * addresses over pipes.  Each iteration moves `total` bytes as messages of
 * `msg` bytes, at most `window` of them in flight each way.
 *
 * One way (the default), the parent receives and the child sends:
 *   receiver: post `window` receives, send GO(i), re-post as they complete
 *   sender:   on GO(i), stream the messages; GO(i + 1) ends iteration i
 * so an iteration's time, taken by the sender from GO(i) to GO(i + 1),
 * covers the whole transfer up to the last byte landing.
 *
 * Both ways (--bidir), each process sends `total` to the other while it
 * receives as much, as the two ranks of an alltoallv do: each posts its
 * receives, says READY(i), and once it has the other's READY(i) streams
 * until its sends and its receives are all complete; an iteration takes
 * the longer of the two processes' times.
 *
 * --pairs K (both ways only) runs K such pairs at once, 2 K processes on
 * the host as an alltoallv of 2 K ranks has: the first process of every
 * pair meets the others' at a barrier (shared memory) before it says
 * READY(i), so the pairs' iterations start together, and each pair
 * prints its own lines.
 *
 * Iteration 0 is a warm-up.  Progress is manual: every wait loop reads the
 * completion queue.  The first 8 bytes of each message carry (iteration,
 * index), checked on arrival, and the receiving side compares its whole
 * buffer after the last iteration.  The parent prints one
 * "@comm raw TOTAL TOTAL SECONDS" line per timed iteration (bench_comm.h):
 * bytes one way, per direction with --bidir.
 */
#define _GNU_SOURCE
#include "config.h"
#include "tools/bench_comm.h"

#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef HAVE_LIBFABRIC

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "tools/bench_util.h"

#define CTL_TAG (1ull << 62)
#define MAX_WINDOW 1024
#define MAX_PAIRS 64

struct raw_opts {
	const char *provider;
	int64_t msg, total, window;
	int64_t iters;
	int64_t timeout_s;
	int64_t pairs;
	bool bidir;
};

struct raw_pool;

struct raw_op {
	struct fi_context2 fc; /* first: the CQ hands its address back */
	struct raw_pool *pool; /* NULL: a control message */
	int64_t idx;           /* message index */
};

/* The messages of one direction: a window of contexts over a buffer. */
struct raw_pool {
	bool send;
	char *buf;
	struct raw_op ops[MAX_WINDOW];
	int64_t free_ops[MAX_WINDOW];
	int nfree;
	int64_t next, done;    /* posted, completed this iteration */
};

struct raw {
	const struct raw_opts *o;
	bool child;
	pid_t pid;             /* the parent's: the child's pid */
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_cq *cq;
	struct fid_av *av;
	struct fid_ep *ep;
	struct fid_mr *mr[2];
	void *desc[2];
	fi_addr_t peer;
	int64_t nmsg;
	uint64_t iter;         /* stamped into / checked in the messages */
	struct raw_pool tx, rx;
	bool use_tx, use_rx;
	struct raw_op ctl_rx, ctl_tx;
	uint64_t ctl_in, ctl_out;
	int ctl_got, ctl_sent;
	pthread_barrier_t *start; /* --pairs: the pairs' first processes */
};

/* Fail: say why, stop the other process, exit. */
static void __attribute__((noreturn, format(printf, 2, 3)))
die(struct raw *r, const char *fmt, ...)
{
	va_list ap;
	int st;

	fprintf(stderr, "comm-raw %s: ", r->child ? "child" : "parent");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	if (r->pid > 0) {
		kill(r->pid, SIGKILL);
		waitpid(r->pid, &st, 0);
	}
	exit(1);
}

static void check(struct raw *r, int rc, const char *what)
{
	if (rc)
		die(r, "%s: %s", what, fi_strerror(-rc));
}

/* ---- setup ---- */

static struct fi_info *hints_for(const char *provider, bool ip)
{
	struct fi_info *h = fi_allocinfo();

	if (!h)
		return NULL;
	h->caps = FI_TAGGED | FI_SEND | FI_RECV | FI_DIRECTED_RECV;
	h->mode = FI_CONTEXT | FI_CONTEXT2;
	h->ep_attr->type = FI_EP_RDM;
	h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR |
				  FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	h->domain_attr->threading = FI_THREAD_DOMAIN;
	h->domain_attr->data_progress = FI_PROGRESS_MANUAL;
	if (ip)
		h->addr_format = FI_SOCKADDR_IN;
	h->fabric_attr->prov_name = strdup(provider);
	return h;
}

static void open_ep(struct raw *r)
{
	bool ip = strncmp(r->o->provider, "shm", 3) != 0;
	struct fi_info *h = hints_for(r->o->provider, ip);
	struct fi_cq_attr cqa = { .format = FI_CQ_FORMAT_CONTEXT,
				  .wait_obj = FI_WAIT_NONE,
				  .size = 4 * MAX_WINDOW };
	struct fi_av_attr ava = { .type = FI_AV_TABLE, .count = 2 };

	if (!h)
		die(r, "out of memory");
	/* IP providers: an ephemeral port on the loopback interface */
	check(r, fi_getinfo(FI_VERSION(1, 14), ip ? "127.0.0.1" : NULL, NULL,
			    ip ? FI_SOURCE : 0, h, &r->info), "fi_getinfo");
	fi_freeinfo(h);
	check(r, fi_fabric(r->info->fabric_attr, &r->fabric, NULL),
	      "fi_fabric");
	check(r, fi_domain(r->fabric, r->info, &r->domain, NULL),
	      "fi_domain");
	check(r, fi_cq_open(r->domain, &cqa, &r->cq, NULL), "fi_cq_open");
	check(r, fi_av_open(r->domain, &ava, &r->av, NULL), "fi_av_open");
	check(r, fi_endpoint(r->domain, r->info, &r->ep, NULL),
	      "fi_endpoint");
	check(r, fi_ep_bind(r->ep, &r->av->fid, 0), "fi_ep_bind av");
	check(r, fi_ep_bind(r->ep, &r->cq->fid, FI_TRANSMIT | FI_RECV),
	      "fi_ep_bind cq");
	check(r, fi_enable(r->ep), "fi_enable");
}

/* A direction's buffer: the pattern to send, or zeros to receive into. */
static void open_pool(struct raw *r, struct raw_pool *p, int i, bool send)
{
	size_t bytes = (size_t)r->o->total;

	p->send = send;
	if (posix_memalign((void **)&p->buf, 4096, bytes))
		die(r, "out of memory for %zu bytes", bytes);
	for (size_t k = 0; k < bytes; k++)
		p->buf[k] = send ? (char)(k * 7 + 3) : 0;
	for (int k = 0; k < MAX_WINDOW; k++)
		p->ops[k].pool = p;
	if (r->info->domain_attr->mr_mode & FI_MR_LOCAL) {
		check(r, fi_mr_reg(r->domain, p->buf, bytes,
				   FI_SEND | FI_RECV, 0, 0, 0, &r->mr[i], NULL),
		      "fi_mr_reg");
		r->desc[i] = fi_mr_desc(r->mr[i]);
	}
}

static void xfer_all(struct raw *r, int fd, void *p, size_t n, bool out)
{
	while (n) {
		ssize_t k = out ? write(fd, p, n) : read(fd, p, n);

		if (k <= 0)
			die(r, "the pipe to the other process broke");
		p = (char *)p + k;
		n -= (size_t)k;
	}
}

/* Each side's address to the other through the pipes. */
static void swap_names(struct raw *r, int rfd, int wfd)
{
	char name[256], peer[256];
	size_t len = sizeof(name), plen;

	check(r, fi_getname(&r->ep->fid, name, &len), "fi_getname");
	xfer_all(r, wfd, &len, sizeof(len), true);
	xfer_all(r, wfd, name, len, true);
	xfer_all(r, rfd, &plen, sizeof(plen), false);
	if (plen > sizeof(peer))
		die(r, "peer address of %zu bytes", plen);
	xfer_all(r, rfd, peer, plen, false);
	if (fi_av_insert(r->av, peer, 1, &r->peer, 0, NULL) != 1)
		die(r, "fi_av_insert failed");
}

static void close_all(struct raw *r)
{
	for (int i = 0; i < 2; i++)
		if (r->mr[i])
			fi_close(&r->mr[i]->fid);
	fi_close(&r->ep->fid);
	fi_close(&r->av->fid);
	fi_close(&r->cq->fid);
	fi_close(&r->domain->fid);
	fi_close(&r->fabric->fid);
	fi_freeinfo(r->info);
	free(r->tx.buf);
	free(r->rx.buf);
}

/* ---- completions ---- */

static uint64_t stamp(uint64_t iter, int64_t idx)
{
	return iter << 32 | (uint64_t)idx;
}

static void on_data(struct raw *r, struct raw_op *op)
{
	struct raw_pool *p = op->pool;

	if (!p->send) {
		uint64_t got;

		memcpy(&got, p->buf + op->idx * r->o->msg, sizeof(got));
		if (got != stamp(r->iter, op->idx))
			die(r, "message %lld of iteration %llu carries "
			    "%llx", (long long)op->idx,
			    (unsigned long long)r->iter,
			    (unsigned long long)got);
	}
	p->free_ops[p->nfree++] = op - p->ops;
	p->done++;
}

static void poll_cq(struct raw *r)
{
	struct fi_cq_entry e[64];
	struct fi_cq_err_entry err;
	ssize_t n = fi_cq_read(r->cq, e, 64);

	if (n == -FI_EAGAIN)
		return;
	if (n == -FI_EAVAIL) {
		memset(&err, 0, sizeof(err));
		fi_cq_readerr(r->cq, &err, 0);
		die(r, "completion error: %s", fi_strerror(err.err));
	}
	if (n < 0)
		die(r, "fi_cq_read: %s", fi_strerror((int)-n));
	for (ssize_t i = 0; i < n; i++) {
		struct raw_op *op = e[i].op_context;

		if (op == &r->ctl_rx)
			r->ctl_got++;
		else if (op == &r->ctl_tx)
			r->ctl_sent++;
		else
			on_data(r, op);
	}
}

/* ---- transfers ---- */

static uint64_t data_tag(uint64_t iter, int64_t idx)
{
	return (iter & 0xffff) << 32 | (uint64_t)idx;
}

/* Post the pool's next message; false when the provider says "later". */
static bool try_post(struct raw *r, struct raw_pool *p)
{
	struct raw_op *op = &p->ops[p->free_ops[p->nfree - 1]];
	char *b = p->buf + p->next * r->o->msg;
	size_t len = (size_t)r->o->msg;
	uint64_t tag = data_tag(r->iter, p->next);
	void *desc = r->desc[p->send];
	ssize_t rc;

	op->idx = p->next;
	if (p->send) {
		uint64_t s = stamp(r->iter, p->next);

		memcpy(b, &s, sizeof(s));
		rc = fi_tsend(r->ep, b, len, desc, r->peer, tag, &op->fc);
	} else {
		rc = fi_trecv(r->ep, b, len, desc, r->peer, tag, 0, &op->fc);
	}
	if (rc == -FI_EAGAIN)
		return false;
	if (rc)
		die(r, "posting message %lld: %s", (long long)p->next,
		    fi_strerror((int)-rc));
	p->nfree--;
	p->next++;
	return true;
}

static void post_more(struct raw *r, struct raw_pool *p)
{
	while (p->next < r->nmsg && p->nfree > 0 && try_post(r, p))
		;
}

static bool pool_busy(const struct raw *r, const struct raw_pool *p,
		      bool used)
{
	return used && p->done < r->nmsg;
}

/* One iteration's messages, re-posting as they complete. */
static void stream(struct raw *r)
{
	while (pool_busy(r, &r->tx, r->use_tx) ||
	       pool_busy(r, &r->rx, r->use_rx)) {
		if (r->use_rx)
			post_more(r, &r->rx);
		if (r->use_tx)
			post_more(r, &r->tx);
		poll_cq(r);
	}
}

static void reset_pool(struct raw *r, struct raw_pool *p)
{
	p->nfree = 0;
	for (int64_t i = 0; i < r->o->window; i++)
		p->free_ops[p->nfree++] = i;
	p->next = p->done = 0;
}

static void start_iteration(struct raw *r, int64_t it)
{
	r->iter = (uint64_t)it;
	reset_pool(r, &r->tx);
	reset_pool(r, &r->rx);
}

/* ---- control messages ---- */

static void post_ctl(struct raw *r, bool send)
{
	ssize_t rc;

	do {
		if (send)
			rc = fi_tsend(r->ep, &r->ctl_out, sizeof(r->ctl_out),
				      NULL, r->peer, CTL_TAG, &r->ctl_tx.fc);
		else
			rc = fi_trecv(r->ep, &r->ctl_in, sizeof(r->ctl_in),
				      NULL, r->peer, CTL_TAG, 0, &r->ctl_rx.fc);
		if (rc == -FI_EAGAIN)
			poll_cq(r);
	} while (rc == -FI_EAGAIN);
	if (rc)
		die(r, "control message: %s", fi_strerror((int)-rc));
}

/* Tell the other side `v`; wait until the send is complete. */
static void say(struct raw *r, uint64_t v)
{
	int want = r->ctl_sent + 1;

	r->ctl_out = v;
	post_ctl(r, true);
	while (r->ctl_sent < want)
		poll_cq(r);
}

/* Wait for the other side's n-th word, check it is `v`, and post the
 * receive of the next one. */
static void hear(struct raw *r, int n, uint64_t v, bool more)
{
	while (r->ctl_got < n)
		poll_cq(r);
	if (r->ctl_in != v)
		die(r, "control word %llu where %llu was due",
		    (unsigned long long)r->ctl_in, (unsigned long long)v);
	if (more)
		post_ctl(r, false);
}

static void check_received(struct raw *r)
{
	const char *b = r->rx.buf;

	for (int64_t i = 0; i < r->o->total; i++) {
		if (i % r->o->msg < 8)
			continue; /* the stamps */
		if (b[i] != (char)(i * 7 + 3))
			die(r, "byte %lld differs", (long long)i);
	}
}

/* ---- the two patterns ---- */

static void one_way_receiver(struct raw *r)
{
	for (int64_t it = 0; it <= r->o->iters; it++) {
		start_iteration(r, it);
		post_more(r, &r->rx);
		say(r, (uint64_t)it); /* GO(it) */
		stream(r);
	}
	say(r, (uint64_t)r->o->iters + 1); /* the last one has landed */
	check_received(r);
}

/* The time of each timed iteration into t[iters]. */
static void one_way_sender(struct raw *r, double *t)
{
	double go = 0;

	post_ctl(r, false);
	for (int64_t it = 0; it <= r->o->iters + 1; it++) {
		double now;

		hear(r, (int)it + 1, (uint64_t)it, it <= r->o->iters);
		now = bench_now();
		if (it >= 2)
			t[it - 2] = now - go;
		go = now;
		if (it > r->o->iters)
			break;
		start_iteration(r, it);
		stream(r);
	}
}

/* Both ways at once: each side's own time of each timed iteration. */
static void both_ways(struct raw *r, double *t)
{
	post_ctl(r, false);
	for (int64_t it = 0; it <= r->o->iters; it++) {
		double t0;

		start_iteration(r, it);
		post_more(r, &r->rx);
		if (r->start && !r->child)
			pthread_barrier_wait(r->start);
		say(r, (uint64_t)it); /* READY(it) */
		hear(r, (int)it + 1, (uint64_t)it, it < r->o->iters);
		t0 = bench_now();
		stream(r);
		if (it > 0)
			t[it - 1] = bench_now() - t0;
	}
	check_received(r);
}

/* ---- options, processes ---- */

static int raw_args(int argc, char **argv, struct raw_opts *o)
{
	static const struct option lo[] = {
		{ "provider", required_argument, NULL, 'p' },
		{ "msg", required_argument, NULL, 'm' },
		{ "total", required_argument, NULL, 't' },
		{ "iters", required_argument, NULL, 'i' },
		{ "window", required_argument, NULL, 'w' },
		{ "timeout", required_argument, NULL, 'T' },
		{ "bidir", no_argument, NULL, 'b' },
		{ "pairs", required_argument, NULL, 'P' },
		{ NULL, 0, NULL, 0 }
	};
	int c, bad = 0;

	*o = (struct raw_opts){ .provider = "shm", .msg = 1 << 20,
				.total = 64 << 20, .window = COMM_RAW_WINDOW,
				.iters = 5, .timeout_s = 120, .pairs = 1 };
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'p':
			o->provider = optarg;
			bad |= !*optarg;
			break;
		case 'm':
			bad |= comm_parse_count(optarg, 8, 1 << 30, &o->msg);
			break;
		case 't':
			bad |= comm_parse_count(optarg, 8, (int64_t)4 << 30,
						&o->total);
			break;
		case 'i':
			bad |= comm_parse_count(optarg, 1, 10000, &o->iters);
			break;
		case 'w':
			bad |= comm_parse_count(optarg, 1, MAX_WINDOW,
						&o->window);
			break;
		case 'T':
			bad |= comm_parse_count(optarg, 1, 86400,
						&o->timeout_s);
			break;
		case 'b':
			o->bidir = true;
			break;
		case 'P':
			bad |= comm_parse_count(optarg, 1, MAX_PAIRS,
						&o->pairs);
			break;
		default:
			bad = 1;
		}
	}
	if (bad || o->total % o->msg || o->total / o->msg >= (1ll << 32) ||
	    (o->pairs > 1 && !o->bidir)) {
		fprintf(stderr, "comm-raw: bad arguments (total must be a "
			"multiple of msg, --pairs goes with --bidir)\n");
		return -1;
	}
	return 0;
}

/* Endpoint, buffers, the other's address; who sends and receives. */
static void open_side(struct raw *r, int rfd, int wfd)
{
	r->use_tx = r->o->bidir || r->child;
	r->use_rx = r->o->bidir || !r->child;
	open_ep(r);
	if (r->use_tx)
		open_pool(r, &r->tx, 1, true);
	if (r->use_rx)
		open_pool(r, &r->rx, 0, false);
	swap_names(r, rfd, wfd);
}

static int run_child(struct raw *r, int rfd, int wfd, int tfd)
{
	double *t = calloc((size_t)r->o->iters, sizeof(double));

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	alarm((unsigned)r->o->timeout_s); /* not inherited over fork */
	if (!t)
		die(r, "out of memory");
	open_side(r, rfd, wfd);
	if (r->o->bidir)
		both_ways(r, t);
	else
		one_way_sender(r, t);
	xfer_all(r, tfd, t, (size_t)r->o->iters * sizeof(double), true);
	close_all(r);
	free(t);
	return 0;
}

/* The parent: its side, then the child's times, then the lines. */
static int run_parent(struct raw *r, int rfd, int wfd, int tfd)
{
	size_t n = (size_t)r->o->iters;
	double *t = calloc(n, sizeof(double));
	double *mine = calloc(n, sizeof(double));
	int st;

	if (!t || !mine)
		die(r, "out of memory");
	open_side(r, rfd, wfd);
	printf(COMM_TAG " info raw_provider %s\n",
	       r->info->fabric_attr->prov_name);
	if (r->o->bidir)
		both_ways(r, mine);
	else
		one_way_receiver(r);
	xfer_all(r, tfd, t, n * sizeof(double), false);
	close_all(r);
	if (waitpid(r->pid, &st, 0) != r->pid || !WIFEXITED(st) ||
	    WEXITSTATUS(st)) {
		fprintf(stderr, "comm-raw: the child failed\n");
		free(t);
		free(mine);
		return 1;
	}
	for (size_t i = 0; i < n; i++)
		printf(COMM_TAG " raw %lld %lld %.9f\n",
		       (long long)r->o->total, (long long)r->o->total,
		       t[i] > mine[i] ? t[i] : mine[i]);
	free(t);
	free(mine);
	return 0;
}

/* The processes this one stops and reaps when out of time: its pair's
 * other, or (--pairs) the pairs' first ones. */
static pid_t alarm_pids[MAX_PAIRS];
static int alarm_npids;

static void kill_all(int sig)
{
	int st;

	for (int i = 0; i < alarm_npids; i++) {
		if (alarm_pids[i] > 0) {
			kill(alarm_pids[i], sig);
			waitpid(alarm_pids[i], &st, 0);
		}
	}
}

/* Out of time: the others go first, and are reaped. */
static void on_alarm(int sig)
{
	kill_all(SIGKILL);
	_exit(124);
}

static int run_pair(struct raw_opts *o, pthread_barrier_t *start)
{
	static struct raw r; /* large: the windows' contexts */
	int a[2], b[2], tp[2];

	r.o = o;
	r.start = start;
	r.nmsg = o->total / o->msg;
	if (o->window > r.nmsg)
		o->window = r.nmsg;
	if (pipe(a) || pipe(b) || pipe(tp)) {
		perror("comm-raw: pipe");
		return 1;
	}
	fflush(stdout);
	r.pid = fork(); /* before any libfabric call */
	if (r.pid < 0) {
		perror("comm-raw: fork");
		return 1;
	}
	if (r.pid == 0) {
		r.child = true;
		return run_child(&r, a[0], b[1], tp[1]);
	}
	alarm_pids[0] = r.pid;
	alarm_npids = 1;
	signal(SIGALRM, on_alarm);
	alarm((unsigned)o->timeout_s); /* bounded, whatever happens */
	return run_parent(&r, b[0], a[1], tp[0]);
}

/* The first process of pair i, a child of the one that runs them all. */
static void __attribute__((noreturn))
pair_process(struct raw_opts *o, pthread_barrier_t *start)
{
	int rc;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	rc = run_pair(o, start);
	fflush(stdout);
	exit(rc);
}

/* --pairs: the pairs at once; the first failure stops the others. */
static int run_pairs(struct raw_opts *o)
{
	pthread_barrier_t *start = mmap(NULL, sizeof(*start),
					PROT_READ | PROT_WRITE,
					MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	pthread_barrierattr_t ba;
	int rc = 0;

	if (start == MAP_FAILED) {
		perror("comm-raw: mmap");
		return 1;
	}
	pthread_barrierattr_init(&ba);
	pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED);
	pthread_barrier_init(start, &ba, (unsigned)o->pairs);
	fflush(stdout);
	signal(SIGALRM, on_alarm);
	alarm((unsigned)o->timeout_s + 5); /* the pairs stop themselves */
	for (int i = 0; i < o->pairs; i++) {
		pid_t pid = fork(); /* before any libfabric call */

		if (pid == 0)
			pair_process(o, start);
		if (pid < 0) {
			perror("comm-raw: fork");
			kill_all(SIGKILL);
			return 1;
		}
		alarm_pids[alarm_npids++] = pid;
	}
	for (int left = alarm_npids; left > 0; left--) {
		int st;
		pid_t pid = wait(&st);

		for (int i = 0; i < alarm_npids; i++)
			if (alarm_pids[i] == pid)
				alarm_pids[i] = 0;
		if (pid < 0 || !WIFEXITED(st) || WEXITSTATUS(st)) {
			fprintf(stderr, "comm-raw: a pair failed\n");
			kill_all(SIGKILL);
			rc = 1;
			break;
		}
	}
	return rc;
}

int bench_fi_raw(int argc, char **argv)
{
	static struct raw_opts o;
	const char *env = getenv("FI_PROVIDER");

	if (raw_args(argc, argv, &o))
		return 2;
	if (env && !*env)
		unsetenv("FI_PROVIDER"); /* "" breaks fi_getinfo */
	return o.pairs > 1 ? run_pairs(&o) : run_pair(&o, NULL);
}

#else /* !HAVE_LIBFABRIC */

int bench_fi_raw(int argc, char **argv)
{
	fprintf(stderr, "comm-raw: this build has no libfabric\n");
	return 1;
}

#endif
