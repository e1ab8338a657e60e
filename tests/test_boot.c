/*
 * test_boot.c - the rendezvous (fabric/boot.h): SipHash against its
 * reference vectors, the parser and rank 0's admission on plain bytes,
 * then jobs of 2 to 4 processes on 127.0.0.1: joining and allgathers,
 * refusals (key, world size, duplicate rank, rank outside the world),
 * an unreachable root, a second job on a port in use, foreign
 * connections, a rank 0 that misbehaves, and ranks that leave.
 *
 * Every rank is a child process that reports through a pipe; a test
 * waits for each report with a deadline, and kills and reaps every child
 * it started when it ends, fails or is killed itself.
 */
#define _GNU_SOURCE
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#endif

#include "fabric/boot.h"
#include "fabric/boot_int.h"
#include "fabric/boot_proto.h"
#include "fabric/siphash.h"
#include "shemb.h"
#include "tools/free_port.h"

#define MAX_KIDS 16
#define KID_ALARM_S 25       /* a child stuck this long dies */
#define REPORT_MS 10000      /* generous bound on any report */
#define KID_GRACE_MS 5000    /* for children to exit by themselves */
#define KEY "job-key-0123456789abcdef"

/* ---- time ---- */

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static void nap_ms(int ms)
{
	poll(NULL, 0, ms);
}

/* ---- child processes ---- */

struct report {
	int phase;
	int rc;                /* open, then the first failing allgather */
	int contents_ok;       /* every table had the right bytes */
	int left, left_again;  /* liveness: what poll_left said */
	int rc_after;          /* an allgather after a rank left */
	long ms;               /* how long open took */
	int fds_kept;          /* descriptors open after close, not before */
	int cloexec;           /* the inherited listener, once taken */
	int rc_second;         /* a second rank 0 while the first lives */
	int rc_third;          /* ... and once it is closed */
	char ip[64];
	char err[400];
	char err_second[200];
};

struct kid {
	pid_t pid;
	int rfd;               /* reports, child -> test */
	int cfd;               /* commands, test -> child */
};

static struct kid kids[MAX_KIDS];
static int nkids;
static pid_t test_pid;

/* End every child: at once (kill), or after letting them finish for up
 * to grace_ms, which a tool that checks a process at its exit needs; a
 * child that ended on its own must have ended well. */
static void reap_all(int grace_ms)
{
	long end = now_ms() + grace_ms;
	int bad = 0, status;

	if (getpid() != test_pid)
		return;
	for (int i = 0; i < nkids; i++) {
		/* end of commands: a holding rank closes and exits */
		if (kids[i].cfd >= 0)
			close(kids[i].cfd);
		kids[i].cfd = -1;
	}
	for (int i = 0; i < nkids; i++) {
		struct kid *k = &kids[i];
		pid_t done = 0;

		while (k->pid > 0 &&
		       (done = waitpid(k->pid, &status, WNOHANG)) == 0 &&
		       now_ms() < end)
			nap_ms(5);
		if (k->pid > 0 && done == k->pid) {
			if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
				bad = (int)k->pid;
			k->pid = 0;
		}
		if (k->pid > 0) {
			kill(k->pid, SIGKILL);
			waitpid(k->pid, NULL, 0);
		}
		if (k->rfd >= 0)
			close(k->rfd);
		k->pid = 0;
		k->rfd = -1;
	}
	nkids = 0;
	/* not from the exit handler, after a failure */
	if (grace_ms > 0)
		ck_assert_msg(bad == 0, "child %d ended badly (status %d)",
			      bad, status);
}

static void kill_all(void)
{
	reap_all(0);
}

static void finish(void)
{
	reap_all(KID_GRACE_MS);
}

static void setup(void)
{
	static int registered;

	test_pid = getpid();
	nkids = 0;
	/* a failed check ends the test process with exit(): take the
	 * children along */
	if (!registered)
		atexit(kill_all);
	registered = 1;
}

static void teardown(void)
{
	kill_all();
}

struct kid_io {
	int out;               /* where reports go */
	int cmd;               /* where commands come from */
};

static void send_report(const struct kid_io *io, const struct report *r)
{
	/* smaller than PIPE_BUF: written whole */
	if (write(io->out, r, sizeof(*r)) != (ssize_t)sizeof(*r))
		_exit(3);
}

/* A byte from the test, or 0 at end of file. */
static char get_command(const struct kid_io *io)
{
	char c;

	return read(io->cmd, &c, 1) == 1 ? c : 0;
}

static void leak_check(void)
{
#ifdef __SANITIZE_ADDRESS__
	/* LeakSanitizer runs at exit(), which a child does not call */
	if (__lsan_do_recoverable_leak_check())
		_exit(5);
#endif
}

static struct kid *spawn(void (*fn)(void *, const struct kid_io *),
			 void *arg)
{
	int rp[2], cp[2];
	struct kid *k = &kids[nkids];
	pid_t parent = getpid();

	ck_assert_int_lt(nkids, MAX_KIDS);
	ck_assert_int_eq(pipe2(rp, O_CLOEXEC), 0);
	ck_assert_int_eq(pipe2(cp, O_CLOEXEC), 0);
	fflush(NULL);
	k->pid = fork();
	ck_assert_int_ge(k->pid, 0);
	if (k->pid == 0) {
		struct kid_io io = { .out = rp[1], .cmd = cp[0] };

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(4);
		alarm(KID_ALARM_S);
		close(rp[0]);
		close(cp[1]);
		fn(arg, &io);
		/* _exit: the test's exit handlers are not the child's */
		leak_check();
		_exit(0);
	}
	close(rp[1]);
	close(cp[0]);
	k->rfd = rp[0];
	k->cfd = cp[1];
	nkids++;
	return k;
}

/* 1 with the child's next report, 0 if none came in time. */
static int wait_report(struct kid *k, struct report *r, int ms)
{
	struct pollfd pfd = { .fd = k->rfd, .events = POLLIN };

	memset(r, 0, sizeof(*r));
	if (poll(&pfd, 1, ms) != 1)
		return 0;
	return read(k->rfd, r, sizeof(*r)) == (ssize_t)sizeof(*r);
}

static void expect_report(struct kid *k, struct report *r)
{
	ck_assert_msg(wait_report(k, r, REPORT_MS),
		      "no report from child %d within %d ms", (int)k->pid,
		      REPORT_MS);
	ck_assert_msg(r->fds_kept == 0, "child %d kept %d descriptors open",
		      (int)k->pid, r->fds_kept);
}

/* Index of the first of two children to report. */
static int first_report(struct kid *a, struct kid *b, struct report *r)
{
	struct pollfd pfd[2] = { { a->rfd, POLLIN, 0 }, { b->rfd, POLLIN, 0 } };

	ck_assert_int_ge(poll(pfd, 2, REPORT_MS), 1);
	expect_report(pfd[0].revents ? a : b, r);
	return pfd[0].revents ? 0 : 1;
}

static void command(struct kid *k, char c)
{
	ck_assert_int_eq(write(k->cfd, &c, 1), 1);
}

static void kill_kid(struct kid *k)
{
	kill(k->pid, SIGKILL);
	waitpid(k->pid, NULL, 0);
	k->pid = 0;
}

/* ---- addresses ---- */

/* A port nobody listens on right now (outside the ephemeral range, so
 * the connections of tests running alongside do not take it). */
static int unheld_port(void)
{
	unsigned port = shemb_tool_free_port();

	ck_assert_uint_ne(port, 0);
	return (int)port;
}

/* The test's listener at the port free_port() gave last, which spec()
 * hands to rank 0 as its inherited listener: no test running alongside
 * can take the port before rank 0 starts.  Tests about rank 0's own
 * binding, or about nobody listening, use unheld_port(). */
static int held_fd = -1, held_port = -1;

static int free_port(void)
{
	unsigned port;

	if (held_fd >= 0)
		close(held_fd);
	held_fd = shemb_tool_listen_free_port(&port);
	ck_assert_int_ge(held_fd, 3);
	held_port = (int)port;
	return held_port;
}

/* ---- a rank ---- */

enum after {
	AFTER_EXIT = 0,   /* report, close, exit */
	AFTER_WATCH,      /* report, then poll_left until a rank leaves */
	AFTER_HOLD        /* report, then close on command 'c' */
};

struct rank_spec {
	int rank, world;
	char root[64];
	const char *key;
	int timeout_ms;
	int rounds;
	size_t sizes[6];
	size_t my_size;       /* nonzero: give this length instead */
	int progress_thread;  /* poll_left from a thread meanwhile */
	int root_fd;          /* rank 0: an inherited listener, > 0 */
	int second_root;      /* rank 0: try second_rank0() once joined */
	enum after after;
};

static uint8_t pattern(int rank, int round, size_t i)
{
	return (uint8_t)(rank * 31 + round * 7 + i * 13 + 1);
}

struct progress {
	struct shemb__boot *b;
	atomic_int stop;
	int left;
};

static void *progress_main(void *arg)
{
	struct progress *p = arg;

	while (!atomic_load(&p->stop)) {
		int l = shemb__boot_poll_left(p->b);

		if (l >= 0)
			p->left = l;
		nap_ms(1);
	}
	return NULL;
}

static int run_rounds(const struct rank_spec *s, struct shemb__boot *b,
		      struct report *r)
{
	for (int k = 0; k < s->rounds; k++) {
		size_t len = s->my_size ? s->my_size : s->sizes[k];
		uint8_t *mine = malloc(len + 1);
		uint8_t *all = malloc(len * s->world + 1);

		for (size_t i = 0; i < len; i++)
			mine[i] = pattern(s->rank, k, i);
		r->rc = shemb__boot_allgather(b, mine, all, len, r->err,
					      sizeof(r->err));
		for (int q = 0; r->rc == 0 && q < s->world; q++)
			for (size_t i = 0; i < len; i++)
				if (all[q * len + i] != pattern(q, k, i))
					r->contents_ok = 0;
		free(mine);
		free(all);
		if (r->rc)
			return r->rc;
	}
	return 0;
}

/* Poll as a progress thread would, until a rank is reported. */
static void watch(struct shemb__boot *b, struct report *r)
{
	long end = now_ms() + REPORT_MS;
	uint8_t byte = 1, all[8];

	r->left = -1;
	while (r->left < 0 && now_ms() < end) {
		r->left = shemb__boot_poll_left(b);
		nap_ms(1);
	}
	r->left_again = shemb__boot_poll_left(b);
	for (int i = 0; i < 3; i++)
		if (shemb__boot_poll_left(b) != r->left_again)
			r->left_again = -2;
	r->rc_after = shemb__boot_allgather(b, &byte, all, 1, r->err,
					    sizeof(r->err));
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	if (!d)
		return 0;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/* Rank 0 opens a second rendezvous with the same inherited listener while
 * the first lives (refused: one context holds it), then a third once the
 * first is closed (it holds it again, and waits in vain for rank 1). */
static void second_rank0(const struct shemb__boot_cfg *cfg,
			 struct shemb__boot **b, struct report *r)
{
	struct shemb__boot_cfg c = *cfg;
	struct shemb__boot *other = NULL;
	char err[sizeof(r->err)];

	c.timeout_ms = 300;
	r->rc_second = shemb__boot_open(&c, &other, r->err_second,
					sizeof(r->err_second));
	shemb__boot_close(other);
	shemb__boot_close(*b);
	*b = NULL;
	other = NULL;
	r->rc_third = shemb__boot_open(&c, &other, err, sizeof(err));
	shemb__boot_close(other);
}

static void rank_main(void *arg, const struct kid_io *io)
{
	const struct rank_spec *s = arg;
	struct shemb__boot_cfg cfg = {
		.rank = s->rank, .world_size = s->world, .root = s->root,
		.job_key = s->key, .timeout_ms = s->timeout_ms,
		.root_fd = s->root_fd,
	};
	struct shemb__boot *b = NULL;
	struct progress prog = { .left = -1 };
	struct report r = { .phase = 1, .contents_ok = 1, .left = -1 };
	int fds = count_fds();
	pthread_t th;
	long t0 = now_ms();

	r.rc = shemb__boot_open(&cfg, &b, r.err, sizeof(r.err));
	r.ms = now_ms() - t0;
	if (r.rc == 0) {
		shemb__boot_local_ip(b, r.ip, sizeof(r.ip));
		prog.b = b;
		if (s->progress_thread)
			pthread_create(&th, NULL, progress_main, &prog);
		run_rounds(s, b, &r);
		if (s->progress_thread) {
			atomic_store(&prog.stop, 1);
			pthread_join(th, NULL);
		}
		if (s->root_fd > 0)
			r.cloexec = (fcntl(s->root_fd, F_GETFD) &
				     FD_CLOEXEC) != 0;
		if (s->second_root)
			second_rank0(&cfg, &b, &r);
	}
	/* the last report comes after close: it tells what close left */
	if (r.rc || s->after == AFTER_EXIT) {
		shemb__boot_close(b);
		r.fds_kept = count_fds() - fds;
		send_report(io, &r);
		return;
	}
	send_report(io, &r);
	if (s->after == AFTER_WATCH) {
		r.phase = 2;
		watch(b, &r);
		shemb__boot_close(b);
		r.fds_kept = count_fds() - fds;
		send_report(io, &r);
		return;
	}
	get_command(io);
	shemb__boot_close(b);
}

static struct rank_spec spec(int rank, int world, int port)
{
	struct rank_spec s = {
		.rank = rank, .world = world, .key = KEY,
		.timeout_ms = 8000, .rounds = 1, .sizes = { 16 },
	};

	snprintf(s.root, sizeof(s.root), "127.0.0.1:%d", port);
	if (rank == 0 && port == held_port)
		s.root_fd = held_fd;
	return s;
}

static struct kid *start_rank(const struct rank_spec *s)
{
	/* the child gets a copy of the spec with its memory */
	return spawn(rank_main, (void *)s);
}

static void expect_joined(struct kid *k, int rank)
{
	struct report r;

	expect_report(k, &r);
	ck_assert_msg(r.rc == 0, "rank %d: %d: %s", rank, r.rc, r.err);
	ck_assert_msg(r.contents_ok, "rank %d: wrong allgather contents",
		      rank);
}

static void expect_refused(struct kid *k, int code, const char *words)
{
	struct report r;

	expect_report(k, &r);
	ck_assert_msg(r.rc == code, "expected %d, got %d: %s", code, r.rc,
		      r.err);
	ck_assert_msg(strstr(r.err, words), "message '%s' lacks '%s'", r.err,
		      words);
}

/* ---- a hand-made peer speaking the protocol ---- */

static int tcp_connect(int port, int ms)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons((uint16_t)port) };
	long end = now_ms() + ms;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	while (now_ms() < end) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

		ck_assert_int_ge(fd, 0);
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			return fd;
		close(fd);
		nap_ms(10);
	}
	ck_abort_msg("nothing listens at 127.0.0.1:%d", port);
	return -1;
}

static void send_all(int fd, const void *p, size_t n)
{
	ck_assert_int_eq(send(fd, p, n, MSG_NOSIGNAL), (ssize_t)n);
}

/* The next message: 1, or 0 at end of stream (or reset), -1 on timeout. */
static int recv_msg(int fd, struct shemb__boot_rx *rx,
		    struct shemb__boot_msg *m, int ms)
{
	long end = now_ms() + ms;

	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		const char *why;
		uint8_t *dst;
		size_t room;
		ssize_t n;
		int v = shemb__boot_rx_next(rx, m, &why);

		ck_assert_int_ne(v, SHEMB__BOOT_BAD);
		if (v == SHEMB__BOOT_ONE)
			return 1;
		if (poll(&pfd, 1, (int)(end - now_ms())) != 1)
			return -1;
		ck_assert_int_eq(shemb__boot_rx_room(rx, &dst, &room), 0);
		n = recv(fd, dst, room, 0);
		if (n <= 0)
			return 0;
		shemb__boot_rx_added(rx, (size_t)n);
	}
}

/* Wait until rank 0 closes this connection: 1, or 0 if it stays open. */
static int closed_by_peer(int fd, int ms)
{
	long end = now_ms() + ms;
	char buf[256];

	while (now_ms() < end) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (poll(&pfd, 1, (int)(end - now_ms())) != 1)
			return 0;
		n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN))
			return 1;
	}
	return 0;
}

struct raw {
	int fd;
	struct shemb__boot_rx rx;
	uint8_t snonce[16];
	struct shemb__boot_join j;
	char reason[SHEMB__BOOT_REASON_MAX + 1];
};

/* Connect, take the challenge, send a JOIN (with the MAC of key, or a
 * random one), and return the type of rank 0's answer (0: closed). */
static int raw_join(struct raw *c, int port, const char *key, uint32_t rank,
		    uint32_t world, int good_mac)
{
	struct shemb__boot_msg m;
	uint8_t k[16], buf[128];
	int code;

	memset(c, 0, sizeof(*c));
	c->fd = tcp_connect(port, REPORT_MS);
	ck_assert_int_eq(recv_msg(c->fd, &c->rx, &m, REPORT_MS), 1);
	ck_assert_int_eq(m.type, SHEMB__BOOT_CHALLENGE);
	memcpy(c->snonce, m.body, 16);
	shemb__boot_rx_consume(&c->rx, m.size);
	c->j.rank = rank;
	c->j.world = world;
	shemb__boot_random(c->j.cnonce, 16);
	shemb__boot_derive_key(key, k);
	if (good_mac)
		shemb__boot_mac(k, "JOIN", c->snonce, c->j.cnonce, rank, world,
				c->j.mac);
	else
		shemb__boot_random(c->j.mac, 16);
	send_all(c->fd, buf, shemb__boot_encode_join(buf, sizeof(buf), &c->j));
	if (recv_msg(c->fd, &c->rx, &m, REPORT_MS) != 1)
		return 0;
	if (m.type == SHEMB__BOOT_REJECT)
		shemb__boot_get_reason(&m, &code, c->reason,
				       sizeof(c->reason));
	shemb__boot_rx_consume(&c->rx, m.size);
	return m.type;
}

static void raw_close(struct raw *c)
{
	close(c->fd);
	shemb__boot_rx_free(&c->rx);
}

/* A fake rank 0: listen, take one connection, send the challenge, read
 * the JOIN. */
struct fake_root {
	int lfd, fd;
	struct shemb__boot_rx rx;
	uint8_t snonce[16];
	struct shemb__boot_join j;
};

static void fake_listen(struct fake_root *f, int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons((uint16_t)port) };
	int one = 1;

	memset(f, 0, sizeof(*f));
	f->fd = -1;
	if (port == held_port) {	/* free_port()'s listener serves */
		f->lfd = held_fd;
		held_fd = held_port = -1;
		return;
	}
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	f->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	setsockopt(f->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	ck_assert_int_eq(bind(f->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(f->lfd, 8), 0);
}

static void fake_challenge(struct fake_root *f)
{
	struct pollfd pfd = { .fd = f->lfd, .events = POLLIN };
	struct shemb__boot_msg m;
	uint8_t buf[64];

	ck_assert_int_eq(poll(&pfd, 1, REPORT_MS), 1);
	f->fd = accept4(f->lfd, NULL, NULL, SOCK_CLOEXEC);
	ck_assert_int_ge(f->fd, 0);
	shemb__boot_random(f->snonce, 16);
	send_all(f->fd, buf, shemb__boot_encode(buf, sizeof(buf),
						SHEMB__BOOT_CHALLENGE, 0,
						f->snonce, 16));
	ck_assert_int_eq(recv_msg(f->fd, &f->rx, &m, REPORT_MS), 1);
	ck_assert_int_eq(shemb__boot_get_join(&m, &f->j), 0);
	shemb__boot_rx_consume(&f->rx, m.size);
}

/* ACCEPT, its MAC made with key. */
static void fake_accept(struct fake_root *f, const char *key)
{
	uint8_t k[16], mac[16], buf[64];

	shemb__boot_derive_key(key, k);
	shemb__boot_mac(k, "ACPT", f->snonce, f->j.cnonce, f->j.rank,
			f->j.world, mac);
	send_all(f->fd, buf, shemb__boot_encode(buf, sizeof(buf),
						SHEMB__BOOT_ACCEPT, 0, mac,
						16));
}

static void fake_admit(struct fake_root *f, const char *key)
{
	uint8_t buf[64];

	fake_accept(f, key);
	send_all(f->fd, buf, shemb__boot_encode(buf, sizeof(buf),
						SHEMB__BOOT_READY, 0, NULL, 0));
}

static void fake_close(struct fake_root *f)
{
	if (f->fd >= 0)
		close(f->fd);
	close(f->lfd);
	shemb__boot_rx_free(&f->rx);
}

/* ======================================================================
 * Without sockets
 * ====================================================================== */

START_TEST(test_siphash_vectors)
{
	/* From the reference implementation: key 00..0f, message 00..len-1. */
	static const struct {
		size_t len;
		uint64_t h64;
		uint8_t h128[16];
	} v[] = {
		{ 0, 0x726fdb47dd0e0e31ull,
		  { 0xa3, 0x81, 0x7f, 0x04, 0xba, 0x25, 0xa8, 0xe6,
		    0x6d, 0xf6, 0x72, 0x14, 0xc7, 0x55, 0x02, 0x93 } },
		{ 8, 0x93f5f5799a932462ull,
		  { 0x3b, 0x62, 0xa9, 0xba, 0x62, 0x58, 0xf5, 0x61,
		    0x0f, 0x83, 0xe2, 0x64, 0xf3, 0x14, 0x97, 0xb4 } },
		{ 15, 0xa129ca6149be45e5ull,
		  { 0x54, 0x93, 0xe9, 0x99, 0x33, 0xb0, 0xa8, 0x11,
		    0x7e, 0x08, 0xec, 0x0f, 0x97, 0xcf, 0xc3, 0xd9 } },
		{ 63, 0x958a324ceb064572ull,
		  { 0x51, 0x50, 0xd1, 0x77, 0x2f, 0x50, 0x83, 0x4a,
		    0x50, 0x3e, 0x06, 0x9a, 0x97, 0x3f, 0xbd, 0x7c } },
	};
	uint8_t key[16], msg[64], out[16];

	for (int i = 0; i < 16; i++)
		key[i] = (uint8_t)i;
	for (int i = 0; i < 64; i++)
		msg[i] = (uint8_t)i;
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		ck_assert_uint_eq(shemb__siphash24(key, msg, v[i].len),
				  v[i].h64);
		shemb__siphash24_128(key, msg, v[i].len, out);
		ck_assert_mem_eq(out, v[i].h128, 16);
	}
}
END_TEST

START_TEST(test_parser)
{
	uint8_t buf[600], body[300];
	struct shemb__boot_msg m;
	const char *why;
	char text[300];
	size_t n;
	int code;

	memset(body, 0x5a, sizeof(body));
	n = shemb__boot_encode(buf, sizeof(buf), SHEMB__BOOT_GATHER, 3, body,
			       300);
	ck_assert_int_eq(shemb__boot_parse(buf, n, 0, &m, &why),
			 SHEMB__BOOT_ONE);
	ck_assert_uint_eq(m.seq, 3);
	ck_assert_uint_eq(m.len, 300);
	ck_assert_uint_eq(m.size, n);
	/* every truncation asks for more, and says how much is needed */
	for (size_t cut = 0; cut < n; cut++) {
		ck_assert_int_eq(shemb__boot_parse(buf, cut, 0, &m, &why),
				 SHEMB__BOOT_MORE);
		ck_assert_uint_gt(m.size, cut);
	}
	/* garbage is refused at its first byte */
	ck_assert_int_eq(shemb__boot_parse("G", 1, 0, &m, &why),
			 SHEMB__BOOT_BAD);
	ck_assert_ptr_nonnull(strstr(why, "magic"));
	/* another version, as soon as the version is in */
	buf[4] = 2;
	ck_assert_int_eq(shemb__boot_parse(buf, 6, 0, &m, &why),
			 SHEMB__BOOT_BAD);
	ck_assert_uint_eq(m.version, 2);
	buf[4] = 1;
	/* oversized: refused from the header alone */
	shemb__boot_put_hdr(buf, SHEMB__BOOT_GATHER, 1,
			    SHEMB__BOOT_BLOB_MAX + 1);
	ck_assert_int_eq(shemb__boot_parse(buf, SHEMB__BOOT_HDR, 0, &m, &why),
			 SHEMB__BOOT_BAD);
	shemb__boot_put_hdr(buf, SHEMB__BOOT_TABLE, 1, 1001);
	ck_assert_int_eq(shemb__boot_parse(buf, 16, 1000, &m, &why),
			 SHEMB__BOOT_BAD);
	/* unknown type, wrong sizes, a seq where none belongs */
	shemb__boot_put_hdr(buf, 99, 0, 0);
	ck_assert_int_eq(shemb__boot_parse(buf, 16, 0, &m, &why),
			 SHEMB__BOOT_BAD);
	shemb__boot_put_hdr(buf, SHEMB__BOOT_JOIN, 0, 39);
	ck_assert_int_eq(shemb__boot_parse(buf, 16, 0, &m, &why),
			 SHEMB__BOOT_BAD);
	shemb__boot_put_hdr(buf, SHEMB__BOOT_READY, 5, 0);
	ck_assert_int_eq(shemb__boot_parse(buf, 16, 0, &m, &why),
			 SHEMB__BOOT_BAD);
	/* reasons come out printable and terminated */
	n = shemb__boot_encode_reason(buf, sizeof(buf), SHEMB__BOOT_FAIL, 2,
				      SHEMB_EINVAL, "bad\x1b[0m\n");
	ck_assert_int_eq(shemb__boot_parse(buf, n, 0, &m, &why),
			 SHEMB__BOOT_ONE);
	ck_assert_int_eq(shemb__boot_get_reason(&m, &code, text, sizeof(text)),
			 0);
	ck_assert_int_eq(code, SHEMB_EINVAL);
	ck_assert_str_eq(text, "bad?[0m?");
}
END_TEST

START_TEST(test_receive_buffer)
{
	uint8_t buf[64], body[7] = { 0 };
	struct shemb__boot_msg m;
	struct shemb__boot_rx rx = { .table_max = 1000 };
	const char *why;
	size_t n;

	/* a byte at a time, across two messages */
	n = shemb__boot_encode(buf, sizeof(buf), SHEMB__BOOT_TABLE, 1, body, 7);
	n += shemb__boot_encode(buf + n, sizeof(buf) - n, SHEMB__BOOT_LEFT, 0,
				"\3\0\0\0", 4);
	for (size_t i = 0; i < 23; i++)
		ck_assert_uint_eq(shemb__boot_rx_feed(&rx, buf + i, 1), 1);
	/* it takes nothing more while a whole message waits */
	ck_assert_uint_eq(shemb__boot_rx_feed(&rx, buf + 23, 1), 0);
	ck_assert_int_eq(shemb__boot_rx_next(&rx, &m, &why), SHEMB__BOOT_ONE);
	ck_assert_int_eq(m.type, SHEMB__BOOT_TABLE);
	shemb__boot_rx_consume(&rx, m.size);
	for (size_t i = 23; i < n; i++)
		ck_assert_uint_eq(shemb__boot_rx_feed(&rx, buf + i, 1), 1);
	ck_assert_int_eq(shemb__boot_rx_next(&rx, &m, &why), SHEMB__BOOT_ONE);
	ck_assert_int_eq(m.type, SHEMB__BOOT_LEFT);
	shemb__boot_rx_consume(&rx, m.size);
	ck_assert_int_eq(shemb__boot_rx_next(&rx, &m, &why), SHEMB__BOOT_MORE);
	shemb__boot_rx_free(&rx);
}
END_TEST

/* Messages in a stream: their types in order, or 0 past the end. */
static void expect_types(int fd, const uint16_t *types, int n)
{
	struct shemb__boot_rx rx = { .table_max = 1 << 20 };
	struct shemb__boot_msg m;

	for (int i = 0; i < n; i++) {
		ck_assert_int_eq(recv_msg(fd, &rx, &m, REPORT_MS), 1);
		ck_assert_int_eq(m.type, types[i]);
		shemb__boot_rx_consume(&rx, m.size);
	}
	shemb__boot_rx_free(&rx);
}

START_TEST(test_send_queue)
{
	static uint8_t big[SHEMB__BOOT_BLOB_MAX];
	static const uint16_t after_unborrow[] = { SHEMB__BOOT_READY,
						   SHEMB__BOOT_LEFT };
	struct shemb__boot_peer p;
	int sv[2], small = 4096, f;

	/* a borrowed body not sent yet is taken back with its header, and
	 * the messages around it still go out whole */
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	shemb__boot_peer_init(&p, sv[0]);
	ck_assert_int_eq(shemb__boot_txq_push(&p.tx, SHEMB__BOOT_READY, 0,
					      NULL, 0), 0);
	ck_assert_int_eq(shemb__boot_txq_push_borrowed(&p.tx,
			 SHEMB__BOOT_TABLE, 1, big, sizeof(big)), 0);
	ck_assert_int_eq(shemb__boot_txq_push(&p.tx, SHEMB__BOOT_LEFT, 0,
					      "\1\0\0\0", 4), 0);
	ck_assert_int_eq(shemb__boot_txq_unborrow(&p.tx), 0);
	ck_assert_int_eq(shemb__boot_peer_flush(&p), 0);
	expect_types(sv[1], after_unborrow, 2);
	shemb__boot_peer_close(&p);
	close(sv[1]);

	/* half sent: the stream is cut, the queue dropped */
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
	shemb__boot_peer_init(&p, sv[0]);
	ck_assert_int_eq(shemb__boot_txq_push_borrowed(&p.tx,
			 SHEMB__BOOT_TABLE, 1, big, sizeof(big)), 0);
	f = shemb__boot_peer_flush(&p);
	ck_assert_int_eq(f, 1);
	ck_assert_int_eq(shemb__boot_txq_unborrow(&p.tx), 1);
	ck_assert(!shemb__boot_txq_pending(&p.tx));
	shemb__boot_peer_close(&p);
	close(sv[1]);
}
END_TEST

/* Rank 0's verdict on one JOIN in a world of 4 where rank 2 is in. */
static int judge(uint32_t rank, uint32_t world, const char *key,
		 const uint8_t *extra, size_t nextra, char *why)
{
	uint8_t joined[4] = { 0, 0, 1, 0 }, buf[128];
	struct shemb__boot_admit ad = { .world_size = 4, .joined = joined };
	struct shemb__boot_hs hs = { 0 };
	struct shemb__boot_join j = { .rank = rank, .world = world };
	uint8_t k[16];
	size_t n;
	int v;

	shemb__boot_derive_key(KEY, ad.key);
	shemb__boot_derive_key(key, k);
	memset(hs.snonce, 7, 16);
	memset(j.cnonce, 9, 16);
	shemb__boot_mac(k, "JOIN", hs.snonce, j.cnonce, rank, world, j.mac);
	n = shemb__boot_encode_join(buf, sizeof(buf), &j);
	if (nextra)
		memcpy(buf + n, extra, nextra);
	shemb__boot_rx_feed(&hs.rx, buf, n + nextra);
	v = shemb__boot_hs_step(&hs, &ad);
	strcpy(why, hs.why);
	if (v == SHEMB__HS_ACCEPT) {
		uint8_t want[16];

		shemb__boot_mac(ad.key, "ACPT", hs.snonce, j.cnonce, rank, world,
				want);
		ck_assert_mem_eq(hs.mac, want, 16);
	}
	shemb__boot_rx_free(&hs.rx);
	return v;
}

START_TEST(test_admission)
{
	char why[SHEMB__BOOT_REASON_MAX];

	ck_assert_int_eq(judge(1, 4, KEY, NULL, 0, why), SHEMB__HS_ACCEPT);
	ck_assert_int_eq(judge(3, 4, KEY, NULL, 0, why), SHEMB__HS_ACCEPT);
	ck_assert_int_eq(judge(1, 4, "other", NULL, 0, why), SHEMB__HS_REJECT);
	ck_assert_ptr_nonnull(strstr(why, "wrong job key"));
	ck_assert_int_eq(judge(1, 4, NULL, NULL, 0, why), SHEMB__HS_REJECT);
	ck_assert_ptr_nonnull(strstr(why, "wrong job key"));
	ck_assert_int_eq(judge(1, 5, KEY, NULL, 0, why), SHEMB__HS_REJECT);
	ck_assert_str_eq(why, "world size 5, but the job has 4 ranks");
	ck_assert_int_eq(judge(2, 4, KEY, NULL, 0, why), SHEMB__HS_REJECT);
	ck_assert_str_eq(why, "rank 2 has joined already");
	ck_assert_int_eq(judge(4, 4, KEY, NULL, 0, why), SHEMB__HS_REJECT);
	ck_assert_ptr_nonnull(strstr(why, "outside the world of 4 ranks"));
	ck_assert_int_eq(judge(0, 4, KEY, NULL, 0, why), SHEMB__HS_REJECT);
	ck_assert_ptr_nonnull(strstr(why, "root"));
	/* nothing may follow a JOIN */
	ck_assert_int_eq(judge(1, 4, KEY, (const uint8_t *)"x", 1, why),
			 SHEMB__HS_DROP);
}
END_TEST

START_TEST(test_bad_config)
{
	static const char *const bad_roots[] = {
		"127.0.0.1", "127.0.0.1:", "127.0.0.1:0", "127.0.0.1:65536",
		"127.0.0.1:12x", ":5000", "[::1]", "[::1]5000", "", NULL,
	};
	struct shemb__boot_cfg cfg = {
		.rank = 1, .world_size = 2, .root = "127.0.0.1:5000",
		.timeout_ms = 100,
	};
	struct shemb__boot *b = (void *)1;
	char err[256];

	for (size_t i = 0; i < sizeof(bad_roots) / sizeof(*bad_roots); i++) {
		cfg.root = bad_roots[i];
		ck_assert_int_eq(shemb__boot_open(&cfg, &b, err, sizeof(err)),
				 SHEMB_EINVAL);
		ck_assert_ptr_null(b);
		ck_assert_ptr_nonnull(strstr(err, "root"));
	}
	cfg.root = "::1:5000";
	ck_assert_int_eq(shemb__boot_open(&cfg, &b, err, sizeof(err)),
			 SHEMB_EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "brackets"));
	cfg.root = "127.0.0.1:5000";
	cfg.rank = 3;
	cfg.world_size = 3;
	ck_assert_int_eq(shemb__boot_open(&cfg, &b, err, sizeof(err)),
			 SHEMB_EINVAL);
	ck_assert_str_eq(err, "rank 3 is outside the world of 3 ranks (0..2)");
	cfg.rank = 0;
	cfg.world_size = 1;
	ck_assert_int_eq(shemb__boot_open(&cfg, &b, err, sizeof(err)),
			 SHEMB_EINVAL);
	cfg.world_size = 2;
	cfg.timeout_ms = 0;
	ck_assert_int_eq(shemb__boot_open(&cfg, &b, err, sizeof(err)),
			 SHEMB_EINVAL);
	ck_assert_int_eq(shemb__boot_open(NULL, &b, err, sizeof(err)),
			 SHEMB_EINVAL);
	ck_assert_int_eq(shemb__boot_open(&cfg, NULL, NULL, 0), SHEMB_EINVAL);
	/* the other calls take NULL */
	ck_assert_int_eq(shemb__boot_poll_left(NULL), -1);
	ck_assert_int_eq(shemb__boot_allgather(NULL, "", err, 0, err,
					       sizeof(err)), SHEMB_EINVAL);
	ck_assert_int_ne(shemb__boot_local_ip(NULL, err, sizeof(err)), 0);
	shemb__boot_close(NULL);
}
END_TEST

/* ======================================================================
 * Jobs
 * ====================================================================== */

static void run_world(int world, int with_threads)
{
	int port = free_port();
	struct rank_spec s[4];
	struct kid *k[4];
	struct report r;

	for (int i = 0; i < world; i++) {
		s[i] = spec(i, world, port);
		s[i].rounds = 5;
		s[i].sizes[0] = 24;
		s[i].sizes[1] = 1;
		s[i].sizes[2] = SHEMB__BOOT_BLOB_MAX;
		s[i].sizes[3] = 0;
		s[i].sizes[4] = 1000 + (size_t)world;
		s[i].progress_thread = with_threads;
	}
	/* the others before rank 0: they must wait for it */
	for (int i = world - 1; i >= 0; i--)
		k[i] = start_rank(&s[i]);
	for (int i = 0; i < world; i++) {
		expect_report(k[i], &r);
		ck_assert_msg(r.rc == 0, "world %d rank %d: %d: %s", world, i,
			      r.rc, r.err);
		ck_assert_msg(r.contents_ok, "world %d rank %d: wrong table",
			      world, i);
		ck_assert_str_eq(r.ip, "127.0.0.1");
	}
	finish();
}

START_TEST(test_world_2)
{
	run_world(2, 0);
}
END_TEST

START_TEST(test_world_3)
{
	/* with a progress thread calling poll_left next to the allgathers */
	run_world(3, 1);
}
END_TEST

START_TEST(test_world_4)
{
	run_world(4, 0);
}
END_TEST

START_TEST(test_wrong_key)
{
	int port = free_port();
	struct rank_spec s0 = spec(0, 3, port), s1 = spec(1, 3, port);
	struct rank_spec s2 = spec(2, 3, port), bad = spec(1, 3, port);
	struct rank_spec nokey = spec(2, 3, port);
	struct kid *k0 = start_rank(&s0), *k1, *k2;

	bad.key = "not the key";
	nokey.key = NULL;
	expect_refused(start_rank(&bad), SHEMB_EINVAL, "wrong job key");
	expect_refused(start_rank(&nokey), SHEMB_EINVAL, "wrong job key");
	k1 = start_rank(&s1);
	k2 = start_rank(&s2);
	expect_joined(k0, 0);
	expect_joined(k1, 1);
	expect_joined(k2, 2);
	finish();
}
END_TEST

START_TEST(test_no_key)
{
	int port = free_port();
	struct rank_spec s0 = spec(0, 2, port), s1 = spec(1, 2, port);
	struct kid *k0, *k1;

	s0.key = NULL;
	s1.key = "";   /* the same as none */
	k0 = start_rank(&s0);
	k1 = start_rank(&s1);
	expect_joined(k0, 0);
	expect_joined(k1, 1);
	finish();
}
END_TEST

START_TEST(test_wrong_world_size)
{
	int port = free_port();
	struct rank_spec s0 = spec(0, 2, port), s1 = spec(1, 2, port);
	struct rank_spec bad = spec(1, 3, port);
	struct kid *k0 = start_rank(&s0);

	expect_refused(start_rank(&bad), SHEMB_EINVAL,
		       "world size 3, but the job has 2 ranks");
	expect_joined(start_rank(&s1), 1);
	expect_joined(k0, 0);
	finish();
}
END_TEST

START_TEST(test_duplicate_rank)
{
	int port = free_port();
	struct rank_spec s0 = spec(0, 3, port), s1 = spec(1, 3, port);
	struct rank_spec s2 = spec(2, 3, port);
	struct kid *k0 = start_rank(&s0);
	struct kid *a = start_rank(&s1), *b = start_rank(&s1);
	struct report r;
	int first;

	/* whichever rank 1 comes second is refused; rank 2 is not there
	 * yet, so the first waits */
	first = first_report(a, b, &r);
	ck_assert_int_eq(r.rc, SHEMB_EINVAL);
	ck_assert_msg(strstr(r.err, "rank 1 has joined already"), "%s", r.err);
	ck_assert_msg(strstr(r.err, "its connection is from 127.0.0.1:"), "%s",
		      r.err);
	expect_joined(start_rank(&s2), 2);
	expect_joined(first ? a : b, 1);
	expect_joined(k0, 0);
	finish();
}
END_TEST

START_TEST(test_rank_outside)
{
	int port = free_port();
	struct rank_spec s0 = spec(0, 3, port), s1 = spec(1, 3, port);
	struct rank_spec s2 = spec(2, 3, port);
	struct kid *k0 = start_rank(&s0), *k1, *k2;
	struct raw c;

	ck_assert_int_eq(raw_join(&c, port, KEY, 7, 3, 1), SHEMB__BOOT_REJECT);
	ck_assert_str_eq(c.reason,
			 "rank 7 is outside the world of 3 ranks (0..2)");
	raw_close(&c);
	ck_assert_int_eq(raw_join(&c, port, KEY, 0, 3, 1), SHEMB__BOOT_REJECT);
	ck_assert_ptr_nonnull(strstr(c.reason, "root"));
	raw_close(&c);
	k1 = start_rank(&s1);
	k2 = start_rank(&s2);
	expect_joined(k1, 1);
	expect_joined(k2, 2);
	expect_joined(k0, 0);
	finish();
}
END_TEST

START_TEST(test_unreachable_root)
{
	struct rank_spec s = spec(1, 2, unheld_port());
	struct report r;

	s.timeout_ms = 500;
	expect_report(start_rank(&s), &r);
	ck_assert_int_eq(r.rc, SHEMB_ETIMEDOUT);
	ck_assert_msg(strstr(r.err, "could not reach rank 0") &&
		      strstr(r.err, "Connection refused"), "%s", r.err);
	ck_assert_int_ge(r.ms, 500);
	ck_assert_int_lt(r.ms, 500 + 4000);
	finish();
}
END_TEST

START_TEST(test_missing_rank_named)
{
	int port = free_port();
	struct rank_spec s0 = spec(0, 4, port), s1 = spec(1, 4, port);
	struct kid *k0, *k1;

	s0.timeout_ms = 3000;
	k0 = start_rank(&s0);
	k1 = start_rank(&s1);
	expect_refused(k0, SHEMB_ETIMEDOUT, "ranks 2-3 did not join");
	/* the rank that got in hears why rank 0 gave up */
	expect_refused(k1, SHEMB_ETIMEDOUT, "ranks 2-3 did not join");
	finish();
}
END_TEST

START_TEST(test_second_job_same_port)
{
	int port = free_port();
	struct rank_spec a0 = spec(0, 2, port), a1 = spec(1, 2, port);
	struct rank_spec b0 = spec(0, 2, port), b1 = spec(1, 2, port);
	struct kid *ka0 = start_rank(&a0);
	struct report r;

	b0.key = b1.key = "the other job";
	b0.root_fd = 0;	/* job B's rank 0 binds, and finds the port taken */
	b1.timeout_ms = 1000;
	/* job A's rank 0 is up once it answers */
	raw_close(&(struct raw){ .fd = tcp_connect(port, REPORT_MS) });
	expect_refused(start_rank(&b0), SHEMB_EIO, "address is in use");
	expect_report(start_rank(&b1), &r);
	ck_assert_msg(r.rc == SHEMB_EINVAL || r.rc == SHEMB_ETIMEDOUT,
		      "%d: %s", r.rc, r.err);
	expect_joined(start_rank(&a1), 1);
	expect_joined(ka0, 0);
	finish();
}
END_TEST

/* Rank 0 takes the listener it inherits instead of binding: here the
 * test holds the port, so a bind would fail (test_second_job_same_port). */
START_TEST(test_root_fd_taken)
{
	unsigned port;
	int lfd = shemb_tool_listen_free_port(&port);
	struct rank_spec s0 = spec(0, 2, (int)port), s1 = spec(1, 2, (int)port);

	ck_assert_int_ge(lfd, 3);
	s0.root_fd = lfd;
	for (int job = 0; job < 2; job++) {
		/* job 1: the descriptor serves a second job too */
		struct kid *k1 = start_rank(&s1), *k0 = start_rank(&s0);

		expect_joined(k1, 1);
		expect_joined(k0, 0);
	}
	close(lfd);
	finish();
}
END_TEST

/* One context of a process at a time holds the inherited listener; the
 * original descriptor no longer passes to programs run later. */
START_TEST(test_root_fd_held_once)
{
	unsigned port;
	int lfd = shemb_tool_listen_free_port(&port);
	struct rank_spec s0 = spec(0, 2, (int)port), s1 = spec(1, 2, (int)port);
	struct kid *k0, *k1;
	struct report r;

	ck_assert_int_ge(lfd, 3);
	ck_assert_int_eq(fcntl(lfd, F_SETFD, 0), 0);
	s0.root_fd = lfd;
	s0.second_root = 1;
	k0 = start_rank(&s0);
	k1 = start_rank(&s1);
	expect_joined(k1, 1);
	expect_report(k0, &r);
	ck_assert_msg(r.rc == 0, "%d: %s", r.rc, r.err);
	ck_assert_int_eq(r.cloexec, 1);
	ck_assert_msg(r.rc_second == SHEMB_EIO &&
		      strstr(r.err_second, "held by another context"),
		      "second: %d: %s", r.rc_second, r.err_second);
	ck_assert_int_eq(r.rc_third, SHEMB_ETIMEDOUT);
	close(lfd);
	finish();
}
END_TEST

/* A listening socket of the test's at ip, on a port the kernel gives. */
static int listen_at(const char *ip, unsigned *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	ck_assert_int_ge(fd, 3);
	ck_assert_int_eq(inet_pton(AF_INET, ip, &a.sin_addr), 1);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(fd, 16), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	*port = ntohs(a.sin_port);
	return fd;
}

/* A listener at the wildcard address serves the root's; one at another
 * address of the root's port is a mistake, said as such. */
START_TEST(test_root_fd_wildcard_and_other_address)
{
	unsigned port;
	int any = listen_at("0.0.0.0", &port);
	struct rank_spec s0 = spec(0, 2, (int)port), s1 = spec(1, 2, (int)port);
	struct kid *k0;
	int other;

	s0.root_fd = any;
	k0 = start_rank(&s0);
	expect_joined(start_rank(&s1), 1);
	expect_joined(k0, 0);
	close(any);

	other = listen_at("127.0.0.2", &port);
	s0 = spec(0, 2, (int)port);
	s0.root_fd = other;
	expect_refused(start_rank(&s0), SHEMB_EINVAL,
		       "listens on the port of 127.0.0.1");
	close(other);
	finish();
}
END_TEST

/* A listener bound to another port than the root's is left alone. */
START_TEST(test_root_fd_elsewhere)
{
	unsigned other;
	int lfd = shemb_tool_listen_free_port(&other);
	int port = unheld_port();
	struct rank_spec s0 = spec(0, 2, port), s1 = spec(1, 2, port);
	struct kid *k0;

	ck_assert_int_ge(lfd, 3);
	ck_assert_uint_ne(other, (unsigned)port);
	s0.root_fd = lfd;
	k0 = start_rank(&s0);
	expect_joined(start_rank(&s1), 1);
	expect_joined(k0, 0);
	close(lfd);
	finish();
}
END_TEST

START_TEST(test_root_fd_not_listener)
{
	int p[2], sock = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct rank_spec s0 = spec(0, 2, unheld_port());

	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	ck_assert_int_ge(sock, 3);
	s0.root_fd = p[0];
	expect_refused(start_rank(&s0), SHEMB_EINVAL,
		       "is not a listening TCP socket");
	s0.root_fd = sock;	/* a socket, but not listening */
	expect_refused(start_rank(&s0), SHEMB_EINVAL,
		       "is not a listening TCP socket");
	close(p[0]);
	close(p[1]);
	close(sock);
	finish();
}
END_TEST

/* errno of a connection to ip:port, 0 if it was accepted */
static int connect_errno(const char *ip, int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), err = 0;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(inet_pton(AF_INET, ip, &sa.sin_addr), 1);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)))
		err = errno;
	close(fd);
	return err;
}

/* Rank 0 listens at the root's address only: 127.0.0.2, also this host,
 * finds nothing at the port (a listener on every address would take it),
 * and the job still forms. */
START_TEST(test_root_binds_its_address)
{
	int port = unheld_port();	/* the library binds it itself */
	struct rank_spec s0 = spec(0, 2, port), s1 = spec(1, 2, port);
	struct kid *k0 = start_rank(&s0);

	close(tcp_connect(port, REPORT_MS)); /* listening by now */
	ck_assert_int_eq(connect_errno("127.0.0.2", port), ECONNREFUSED);
	expect_joined(start_rank(&s1), 1);
	expect_joined(k0, 0);
	finish();
}
END_TEST

START_TEST(test_foreign_connections)
{
	int port = free_port();
	struct rank_spec s0 = spec(0, 3, port), s1 = spec(1, 3, port);
	struct rank_spec s2 = spec(2, 3, port);
	struct kid *k0 = start_rank(&s0), *k1, *k2;
	uint8_t junk[64], half[SHEMB__BOOT_HDR];
	int garbage, stall, idle[70];
	struct raw c;

	/* a scanner: connect, close, again and again */
	for (int i = 0; i < 20; i++)
		close(tcp_connect(port, REPORT_MS));
	/* garbage: dropped at its first byte */
	garbage = tcp_connect(port, REPORT_MS);
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (uint8_t)(i * 37 + 11);
	send_all(garbage, junk, sizeof(junk));
	ck_assert(closed_by_peer(garbage, REPORT_MS));
	close(garbage);
	/* half a message, then silence */
	stall = tcp_connect(port, REPORT_MS);
	shemb__boot_put_hdr(half, SHEMB__BOOT_JOIN, 0, SHEMB__BOOT_JOIN_LEN);
	send_all(stall, half, 10);
	/* more idle connections than rank 0 serves at once */
	for (int i = 0; i < 70; i++)
		idle[i] = tcp_connect(port, REPORT_MS);
	/* a JOIN that looks right but for its MAC */
	ck_assert_int_eq(raw_join(&c, port, KEY, 1, 3, 0), SHEMB__BOOT_REJECT);
	ck_assert_ptr_nonnull(strstr(c.reason, "wrong job key"));
	raw_close(&c);

	k1 = start_rank(&s1);
	k2 = start_rank(&s2);
	expect_joined(k1, 1);
	expect_joined(k2, 2);
	expect_joined(k0, 0);
	/* none of them got in: all are closed by now */
	ck_assert(closed_by_peer(stall, REPORT_MS));
	close(stall);
	for (int i = 0; i < 70; i++) {
		ck_assert(closed_by_peer(idle[i], REPORT_MS));
		close(idle[i]);
	}
	finish();
}
END_TEST

START_TEST(test_handshake_deadline)
{
	int port = free_port();
	struct rank_spec s0 = spec(0, 2, port), s1 = spec(1, 2, port);
	struct kid *k0;
	uint8_t half[SHEMB__BOOT_HDR];
	int stall;

	/* a connection gets half of rank 0's timeout to join */
	s0.timeout_ms = 10000;
	k0 = start_rank(&s0);
	stall = tcp_connect(port, REPORT_MS);
	shemb__boot_put_hdr(half, SHEMB__BOOT_JOIN, 0, SHEMB__BOOT_JOIN_LEN);
	send_all(stall, half, 10);
	ck_assert(closed_by_peer(stall, REPORT_MS));
	close(stall);
	/* ... and rank 0 still waits for the real rank 1 */
	expect_joined(start_rank(&s1), 1);
	expect_joined(k0, 0);
	finish();
}
END_TEST

START_TEST(test_late_joiner)
{
	int port = free_port();
	struct rank_spec s0 = spec(0, 2, port), s1 = spec(1, 2, port);
	struct rank_spec late = spec(1, 2, port);
	struct kid *k0, *k1;

	s0.after = AFTER_WATCH;   /* keeps calling poll_left */
	s1.after = AFTER_HOLD;
	k0 = start_rank(&s0);
	k1 = start_rank(&s1);
	expect_joined(k0, 0);
	expect_joined(k1, 1);
	expect_refused(start_rank(&late), SHEMB_EINVAL,
		       "a job cannot be joined once it has started");
	finish();
}
END_TEST

START_TEST(test_length_mismatch)
{
	int port = free_port();
	struct rank_spec s[3];
	struct kid *k[3];

	for (int i = 0; i < 3; i++) {
		s[i] = spec(i, 3, port);
		s[i].sizes[0] = 8;
	}
	s[2].my_size = 12;
	for (int i = 0; i < 3; i++)
		k[i] = start_rank(&s[i]);
	for (int i = 0; i < 3; i++)
		expect_refused(k[i], SHEMB_EINVAL,
			       "rank 2 gave 12 bytes, rank 0 gave 8");
	finish();
}
END_TEST

/* ---- a rank 0 or a rank that does not follow the protocol ---- */

START_TEST(test_sequence_mismatch_at_root)
{
	int port = free_port();
	struct rank_spec s0 = spec(0, 2, port);
	struct shemb__boot_msg m;
	struct raw c;
	uint8_t buf[64];
	int code;

	s0.sizes[0] = 4;
	start_rank(&s0);
	ck_assert_int_eq(raw_join(&c, port, KEY, 1, 2, 1), SHEMB__BOOT_ACCEPT);
	ck_assert_int_eq(recv_msg(c.fd, &c.rx, &m, REPORT_MS), 1);
	ck_assert_int_eq(m.type, SHEMB__BOOT_READY);
	shemb__boot_rx_consume(&c.rx, m.size);
	/* one allgather ahead */
	send_all(c.fd, buf, shemb__boot_encode(buf, sizeof(buf),
					       SHEMB__BOOT_GATHER, 2, "abcd", 4));
	expect_refused(&kids[0], SHEMB_ESTATE, "rank 1 is at allgather #2");
	ck_assert_int_eq(recv_msg(c.fd, &c.rx, &m, REPORT_MS), 1);
	ck_assert_int_eq(m.type, SHEMB__BOOT_FAIL);
	shemb__boot_get_reason(&m, &code, c.reason, sizeof(c.reason));
	ck_assert_int_eq(code, SHEMB_ESTATE);
	raw_close(&c);
	finish();
}
END_TEST

START_TEST(test_sequence_mismatch_at_rank)
{
	int port = free_port();
	struct rank_spec s1 = spec(1, 2, port);
	struct fake_root f;
	struct shemb__boot_msg m;
	uint8_t buf[64];

	s1.sizes[0] = 4;
	fake_listen(&f, port);
	start_rank(&s1);
	fake_challenge(&f);
	fake_admit(&f, KEY);
	ck_assert_int_eq(recv_msg(f.fd, &f.rx, &m, REPORT_MS), 1);
	ck_assert_int_eq(m.type, SHEMB__BOOT_GATHER);
	ck_assert_uint_eq(m.seq, 1);
	/* the table of another round */
	send_all(f.fd, buf, shemb__boot_encode(buf, sizeof(buf),
					       SHEMB__BOOT_TABLE, 2,
					       "abcdefgh", 8));
	expect_refused(&kids[0], SHEMB_ESTATE, "allgather #2, rank 1 is at #1");
	fake_close(&f);
	finish();
}
END_TEST

START_TEST(test_root_closes_midway)
{
	int port = free_port();
	struct rank_spec s1 = spec(1, 2, port);
	struct pollfd pfd;
	struct fake_root f;

	/* after the JOIN, before a verdict, as rank 0 drops a connection
	 * when too many are in their handshake: the rank tries again */
	fake_listen(&f, port);
	start_rank(&s1);
	fake_challenge(&f);
	close(f.fd);
	fake_challenge(&f);
	/* admitted, before the job starts */
	fake_accept(&f, KEY);
	close(f.fd);
	expect_refused(&kids[0], SHEMB_EPEER,
		       "closed the connection before it sent the start of the job");
	/* before its challenge: again */
	start_rank(&s1);
	pfd = (struct pollfd){ .fd = f.lfd, .events = POLLIN };
	ck_assert_int_eq(poll(&pfd, 1, REPORT_MS), 1);
	close(accept4(f.lfd, NULL, NULL, SOCK_CLOEXEC));
	fake_challenge(&f);
	fake_accept(&f, KEY);
	close(f.fd);
	expect_refused(&kids[1], SHEMB_EPEER,
		       "closed the connection before it sent the start of the job");
	/* admitted by a process that does not know the key */
	start_rank(&s1);
	fake_challenge(&f);
	fake_accept(&f, "the wrong key");
	expect_refused(&kids[2], SHEMB_EINVAL, "it is not this job's rank 0");
	close(f.fd);
	f.fd = -1;
	fake_close(&f);
	finish();
}
END_TEST

START_TEST(test_not_a_root)
{
	int port = free_port();
	struct rank_spec s1 = spec(1, 2, port);
	struct fake_root f;
	struct pollfd pfd;
	const char *http = "HTTP/1.1 400 Bad Request\r\n\r\n";

	fake_listen(&f, port);
	start_rank(&s1);
	pfd = (struct pollfd){ .fd = f.lfd, .events = POLLIN };
	ck_assert_int_eq(poll(&pfd, 1, REPORT_MS), 1);
	f.fd = accept(f.lfd, NULL, NULL);
	send_all(f.fd, http, strlen(http));
	expect_refused(&kids[0], SHEMB_EINVAL, "not as a libshemb rank 0");
	fake_close(&f);
	finish();
}
END_TEST

/* ---- liveness ---- */

/* A world of 3 joins; then the test does `act` to rank `victim`, and the
 * two others must report it. */
static void run_leave(int victim, char act)
{
	int port = free_port();
	struct rank_spec s[3];
	struct kid *k[3];
	struct report r;

	for (int i = 0; i < 3; i++) {
		s[i] = spec(i, 3, port);
		s[i].after = i == victim ? AFTER_HOLD : AFTER_WATCH;
		k[i] = start_rank(&s[i]);
	}
	for (int i = 0; i < 3; i++)
		expect_joined(k[i], i);
	if (act == 'k')
		kill_kid(k[victim]);
	else
		command(k[victim], act);
	for (int i = 0; i < 3; i++) {
		if (i == victim)
			continue;
		expect_report(k[i], &r);
		ck_assert_int_eq(r.phase, 2);
		ck_assert_msg(r.left == victim, "rank %d saw %d leave, not %d",
			      i, r.left, victim);
		ck_assert_int_eq(r.left_again, victim);
		ck_assert_int_eq(r.rc_after, SHEMB_EPEER);
	}
	finish();
}

START_TEST(test_rank_killed)
{
	run_leave(2, 'k');
}
END_TEST

START_TEST(test_rank0_killed)
{
	run_leave(0, 'k');
}
END_TEST

START_TEST(test_rank_closes)
{
	run_leave(1, 'c');
}
END_TEST

START_TEST(test_ipv6_loopback)
{
	struct sockaddr_in6 sa = { .sin6_family = AF_INET6,
				   .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET6, SOCK_STREAM, 0), port;
	struct rank_spec s0, s1;
	struct report r;
	struct kid *k0, *k1;

	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		/* no IPv6 here: nothing to test */
		if (fd >= 0)
			close(fd);
		return;
	}
	getsockname(fd, (struct sockaddr *)&sa, &sl);
	port = ntohs(sa.sin6_port);
	close(fd);
	s0 = spec(0, 2, port);
	s1 = spec(1, 2, port);
	snprintf(s0.root, sizeof(s0.root), "[::1]:%d", port);
	snprintf(s1.root, sizeof(s1.root), "[::1]:%d", port);
	k0 = start_rank(&s0);
	k1 = start_rank(&s1);
	expect_report(k0, &r);
	ck_assert_msg(r.rc == 0, "%s", r.err);
	ck_assert_str_eq(r.ip, "::1");
	expect_report(k1, &r);
	ck_assert_msg(r.rc == 0, "%s", r.err);
	ck_assert_str_eq(r.ip, "::1");
	finish();
}
END_TEST

START_TEST(test_root_by_name)
{
	int port = unheld_port();
	struct rank_spec s0 = spec(0, 2, port), s1 = spec(1, 2, port);
	struct kid *k0, *k1;
	struct report r;

	/* rank 0 listens on every address of the name on this host */
	snprintf(s0.root, sizeof(s0.root), "localhost:%d", port);
	snprintf(s1.root, sizeof(s1.root), "localhost:%d", port);
	k1 = start_rank(&s1);
	k0 = start_rank(&s0);
	expect_report(k0, &r);
	ck_assert_msg(r.rc == 0, "%s", r.err);
	ck_assert_msg(!strcmp(r.ip, "127.0.0.1") || !strcmp(r.ip, "::1"),
		      "%s", r.ip);
	expect_joined(k1, 1);
	finish();
}
END_TEST

static TCase *tcase(const char *name)
{
	TCase *tc = tcase_create(name);

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 20);
	return tc;
}

static Suite *boot_suite(void)
{
	Suite *s = suite_create("boot");
	TCase *tc = tcase("bytes");

	tcase_add_test(tc, test_siphash_vectors);
	tcase_add_test(tc, test_parser);
	tcase_add_test(tc, test_receive_buffer);
	tcase_add_test(tc, test_admission);
	tcase_add_test(tc, test_send_queue);
	tcase_add_test(tc, test_bad_config);
	suite_add_tcase(s, tc);

	tc = tcase("jobs");
	tcase_add_test(tc, test_world_2);
	tcase_add_test(tc, test_world_3);
	tcase_add_test(tc, test_world_4);
	tcase_add_test(tc, test_no_key);
	tcase_add_test(tc, test_length_mismatch);
	tcase_add_test(tc, test_ipv6_loopback);
	tcase_add_test(tc, test_root_by_name);
	suite_add_tcase(s, tc);

	tc = tcase("refusals");
	tcase_add_test(tc, test_wrong_key);
	tcase_add_test(tc, test_wrong_world_size);
	tcase_add_test(tc, test_duplicate_rank);
	tcase_add_test(tc, test_rank_outside);
	tcase_add_test(tc, test_unreachable_root);
	tcase_add_test(tc, test_missing_rank_named);
	tcase_add_test(tc, test_second_job_same_port);
	tcase_add_test(tc, test_root_fd_taken);
	tcase_add_test(tc, test_root_fd_elsewhere);
	tcase_add_test(tc, test_root_fd_not_listener);
	tcase_add_test(tc, test_root_fd_held_once);
	tcase_add_test(tc, test_root_fd_wildcard_and_other_address);
	tcase_add_test(tc, test_late_joiner);
	suite_add_tcase(s, tc);

	tc = tcase("hostile");
	tcase_add_test(tc, test_root_binds_its_address);
	tcase_add_test(tc, test_foreign_connections);
	tcase_add_test(tc, test_handshake_deadline);
	tcase_add_test(tc, test_sequence_mismatch_at_root);
	tcase_add_test(tc, test_sequence_mismatch_at_rank);
	tcase_add_test(tc, test_root_closes_midway);
	tcase_add_test(tc, test_not_a_root);
	suite_add_tcase(s, tc);

	tc = tcase("liveness");
	tcase_add_test(tc, test_rank_killed);
	tcase_add_test(tc, test_rank0_killed);
	tcase_add_test(tc, test_rank_closes);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(boot_suite());
	int failed;

	/* a closed peer must fail a write, not kill the test */
	signal(SIGPIPE, SIG_IGN);
	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
