/*
 * shemb-run.c - start the ranks of a job on this host.
 *
 * "shemb-run -n N PROGRAM" starts N processes of PROGRAM, tells each its
 * rank, the world size, the rendezvous address and the job key through
 * SHEMB_* variables, passes their output on line by line behind the rank,
 * forwards SIGINT, SIGTERM, SIGHUP and SIGQUIT, and stops the whole job as
 * soon as one rank fails.  See usage_text and shemb-run(1).
 *
 * Each rank leads a process group of its own: a Ctrl-C at the terminal
 * reaches the launcher alone, which passes it on once, and a signal to the
 * group also reaches what the rank started.  A rank that has ended stays a
 * zombie until the whole job is over (its end is seen with WNOWAIT): its
 * pid, which is its group's id, cannot be reused meanwhile, so a signal to
 * the group never reaches an unrelated process.
 *
 * The launcher sleeps in poll() on the ranks' pipes and a signalfd that
 * carries SIGCHLD and the signals to forward; the deadlines (--timeout, the
 * grace period between SIGTERM and SIGKILL) are its timeout.  Threads write
 * its stdout and stderr (shemb_run_sink.c): when these take nothing more,
 * the launcher stops reading the pipes that feed them, and goes on with
 * everything else.  The ranks' environment is made in shemb_run_env.c.
 */
#define _GNU_SOURCE
#include "tools/shemb_run_job.h"
#include "tools/shm_regions.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* From SIGTERM to SIGKILL; also how long output may trail the last rank,
 * and how long stdout gets to take what is left after a --timeout or a
 * signal that comes once every rank has ended. */
#define GRACE_MS 3000
/* How long stderr gets for the note that output was dropped. */
#define NOTE_MS 1000
/* Descriptors besides the two pipes per rank: the standard ones, the
 * signalfd, /dev/null, a new rank's pipe ends, and some to spare. */
#define SPARE_FDS 16

#define EXIT_LAUNCHER 1		/* the launcher itself failed */
#define EXIT_USAGE 2
#define EXIT_TIMEOUT 124
#define EXIT_CANNOT_RUN 127


/* ---- messages ---- */

/* A line of the launcher's own on stderr, after the ranks' output so far. */
void note(struct job *job, const char *fmt, ...)
{
	char body[400], line[512];
	va_list ap;
	int len;

	va_start(ap, fmt);
	vsnprintf(body, sizeof(body), fmt, ap);
	va_end(ap);
	len = snprintf(line, sizeof(line), "shemb-run: %s\n", body);
	sink_write_after(&job->sinks.k[1], line, len, &job->sinks.k[0]);
}

int fail_errno(struct job *job, const char *what)
{
	note(job, "%s: %s", what, strerror(errno));
	return -1;
}

/* ---- the launcher's own setup ---- */

/* Pipes must not land on 0, 1 or 2, where the ranks' dup2() would then
 * close them: fill whichever of those is closed with /dev/null. */
static int open_std_fds(void)
{
	for (int fd = 0; fd < 3; fd++) {
		if (fcntl(fd, F_GETFD) >= 0)
			continue;
		if (errno != EBADF)
			return -1;
		/* the lowest free descriptor: fd itself */
		if (open("/dev/null", fd ? O_WRONLY : O_RDONLY) < 0)
			return -1;
	}
	return 0;
}

/* Two pipes per rank are open at once; raise the soft limit when needed
 * (the ranks get the old one back). */
static int raise_fd_limit(struct job *job)
{
	rlim_t need = 2 * (rlim_t)job->opt->nranks + SPARE_FDS;
	struct rlimit lim;

	if (getrlimit(RLIMIT_NOFILE, &job->saved_nofile) < 0)
		return fail_errno(job, "getrlimit");
	lim = job->saved_nofile;
	if (lim.rlim_cur >= need)
		return 0;
	if (lim.rlim_max < need) {
		note(job, "%d ranks need %llu open files, the limit is %llu",
		     job->opt->nranks, (unsigned long long)need,
		     (unsigned long long)lim.rlim_max);
		return -1;
	}
	lim.rlim_cur = need;
	if (setrlimit(RLIMIT_NOFILE, &lim) < 0)
		return fail_errno(job, "setrlimit");
	job->nofile_raised = true;
	return 0;
}

static int setup_signals(struct job *job)
{
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	struct sigaction ign = { .sa_handler = SIG_IGN };
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	/* Ctrl-\ reaches the launcher alone too: its ranks' groups get it
	 * (left to its default, the launcher quit and left them running) */
	sigaddset(&set, SIGQUIT);
	/* An inherited SIG_IGN would have the kernel reap the ranks. */
	if (sigaction(SIGCHLD, &dfl, NULL) < 0)
		return fail_errno(job, "sigaction");
	/* An output closed under us shows as EPIPE, handled per sink. */
	if (sigaction(SIGPIPE, &ign, &job->saved_sigpipe) < 0)
		return fail_errno(job, "sigaction");
	if (sigprocmask(SIG_BLOCK, &set, &job->saved_mask) < 0)
		return fail_errno(job, "sigprocmask");
	job->sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (job->sigfd < 0)
		return fail_errno(job, "signalfd");
	return 0;
}

static int count_digits(int v)
{
	int n = 1;

	while (v >= 10) {
		v /= 10;
		n++;
	}
	return n;
}

static int job_init(struct job *job, const struct options *opt)
{
	int n = opt->nranks;
	int width = count_digits(n - 1);

	job->opt = opt;
	job->self = getpid();
	job->sigfd = -1;
	job->stage = RUNNING;
	job->stage_deadline = -1;
	job->timeout_deadline = -1;
	job->output_deadline = -1;
	job->failed_rank = -1;
	job->ranks = calloc(n, sizeof(*job->ranks));
	job->pfds = calloc(2 + 2 * (size_t)n, sizeof(*job->pfds));
	job->pstreams = calloc(2 + 2 * (size_t)n, sizeof(*job->pstreams));
	if (!job->ranks || !job->pfds || !job->pstreams)
		return fail_errno(job, "calloc");
	for (int r = 0; r < n; r++) {
		struct rank *rk = &job->ranks[r];
		int len = snprintf(rk->prefix, sizeof(rk->prefix), "[%*d] ",
				   width, r);

		if (len < 0 || len >= (int)sizeof(rk->prefix))
			return -1;	/* not with at most MAX_RANKS */
		rk->out.fd = -1;
		rk->err.fd = -1;
	}
	job->devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (job->devnull < 0)
		return fail_errno(job, "/dev/null");
	if (raise_fd_limit(job) < 0 || setup_signals(job) < 0)
		return -1;
	return 0;
}

/* ---- clocks and signals to the ranks ---- */

static int64_t now_ms(void)
{
	struct timespec ts;

	/* Cannot fail with CLOCK_MONOTONIC; the ranks die with the launcher
	 * (PR_SET_PDEATHSIG) if it ever did. */
	if (clock_gettime(CLOCK_MONOTONIC, &ts) < 0)
		abort();
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Signal every rank's group, those of ended ranks too: what they left
 * behind is part of the job. */
static void signal_groups(struct job *job, int sig)
{
	for (int r = 0; r < job->started; r++) {
		struct rank *rk = &job->ranks[r];

		if (rk->reaped || kill(-rk->pid, sig) == 0 || errno == ESRCH)
			continue;
		note(job, "cannot signal rank %d: %s", r, strerror(errno));
	}
}

static void close_stream(struct job *job, struct stream *s)
{
	if (s->fd < 0)
		return;
	if (stream_close(s) < 0)
		fail_errno(job, "close");
	job->open--;
}

static void close_streams(struct job *job)
{
	for (int r = 0; r < job->started; r++) {
		close_stream(job, &job->ranks[r].out);
		close_stream(job, &job->ranks[r].err);
	}
}

/* Whether a process still holds the pipe open: one that nobody holds any
 * more (POLLHUP) has at most data left to read. */
static bool stream_held(const struct stream *s)
{
	struct pollfd p = { .fd = s->fd, .events = POLLIN };

	if (s->fd < 0)
		return false;
	return poll(&p, 1, 0) < 0 || !(p.revents & POLLHUP);
}

static bool streams_held(struct job *job)
{
	for (int r = 0; r < job->started; r++) {
		if (stream_held(&job->ranks[r].out) ||
		    stream_held(&job->ranks[r].err))
			return true;
	}
	return false;
}

/* Close the pipes that processes still hold; the others wait for their
 * sink to take what they have left. */
static void close_held_streams(struct job *job)
{
	for (int r = 0; r < job->started; r++) {
		struct stream *ss[] = { &job->ranks[r].out,
					&job->ranks[r].err };

		for (size_t i = 0; i < ARRAY_SIZE(ss); i++) {
			if (stream_held(ss[i]))
				close_stream(job, ss[i]);
		}
	}
}

static void set_stage(struct job *job, enum stage stage)
{
	job->stage = stage;
	job->stage_deadline = now_ms() + GRACE_MS;
	if (stage == TERMINATING) {
		signal_groups(job, SIGTERM);
	} else if (stage == KILLING) {
		signal_groups(job, SIGKILL);
	} else if (stage == ABANDONED) {
		close_held_streams(job);
		job->stage_deadline = -1;
	}
}

static void stop_job(struct job *job, enum cause cause)
{
	if (job->cause == CAUSE_NONE)
		job->cause = cause;
	if (job->stage < TERMINATING)
		set_stage(job, TERMINATING);
}

/* ---- starting the ranks ---- */

static void __attribute__((noreturn)) child_fail(int r, const char *what)
{
	dprintf(STDERR_FILENO, "shemb-run: rank %d: %s: %s\n", r, what,
		strerror(errno));
	_exit(EXIT_CANNOT_RUN);
}

/* In the child: become rank r and run the program.  Never returns. */
static void __attribute__((noreturn))
exec_rank(struct job *job, int r, int out, int err)
{
	char num[16];

	if (setpgid(0, 0) < 0)
		child_fail(r, "setpgid");
	/* A launcher that dies, even by SIGKILL, takes the rank along. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		child_fail(r, "prctl");
	if (getppid() != job->self)
		_exit(EXIT_CANNOT_RUN);	/* it is already gone */
	/* Ranks in groups of their own would stop on reading a terminal. */
	if (dup2(job->devnull, STDIN_FILENO) < 0 ||
	    dup2(out, STDOUT_FILENO) < 0 || dup2(err, STDERR_FILENO) < 0)
		child_fail(r, "dup2");
	if (job->nofile_raised &&
	    setrlimit(RLIMIT_NOFILE, &job->saved_nofile) < 0)
		child_fail(r, "setrlimit");
	snprintf(num, sizeof(num), "%d", r);
	if (setenv("SHEMB_RANK", num, 1) < 0)
		child_fail(r, "setenv");
	if (r == 0 && pass_root(job) < 0)
		child_fail(r, "passing the root's listener");
	if (sigaction(SIGPIPE, &job->saved_sigpipe, NULL) < 0 ||
	    sigprocmask(SIG_SETMASK, &job->saved_mask, NULL) < 0)
		child_fail(r, "signal setup");
	execvp(job->opt->argv[0], job->opt->argv);
	dprintf(STDERR_FILENO, "shemb-run: cannot run %s: %s\n",
		job->opt->argv[0], strerror(errno));
	_exit(EXIT_CANNOT_RUN);
}

/* On the way out of a failed start: closing a pipe made a moment ago and
 * never used loses nothing, whatever close() says. */
static void close_pipe(int p[2])
{
	(void)close(p[0]);
	(void)close(p[1]);
}

static int start_rank(struct job *job, int r)
{
	struct rank *rk = &job->ranks[r];
	const char *prefix = job->opt->prefix ? rk->prefix : NULL;
	int out[2], err[2];
	pid_t pid;

	/* close-on-exec: no rank may hold another's pipe open */
	if (pipe2(out, O_CLOEXEC) < 0)
		return fail_errno(job, "pipe");
	if (pipe2(err, O_CLOEXEC) < 0) {
		fail_errno(job, "pipe");
		close_pipe(out);
		return -1;
	}
	pid = fork();
	if (pid < 0) {
		fail_errno(job, "fork");
		close_pipe(out);
		close_pipe(err);
		return -1;
	}
	if (pid == 0)
		exec_rank(job, r, out[1], err[1]);

	rk->pid = pid;
	job->started++;
	job->running++;
	stream_init(&rk->out, out[0], &job->sinks.k[0], prefix);
	stream_init(&rk->err, err[0], &job->sinks.k[1], prefix);
	job->open += 2;
	/*
	 * Make the group from this side too: the child may not have run yet,
	 * and a signal sent to a group that does not exist is lost.  EACCES:
	 * the child made it and has already exec'd.
	 */
	if (setpgid(pid, pid) < 0 && errno != EACCES)
		fail_errno(job, "setpgid");
	if (close(out[1]) < 0 || close(err[1]) < 0)
		return fail_errno(job, "close");
	return 0;
}

static void start_ranks(struct job *job)
{
	if (job->opt->timeout_s > 0)
		job->timeout_deadline = now_ms() +
			(int64_t)(job->opt->timeout_s * 1000 + 0.999);
	for (int r = 0; r < job->opt->nranks; r++) {
		if (start_rank(job, r) < 0) {
			stop_job(job, CAUSE_LAUNCHER);
			break;
		}
	}
	close_root(job);	/* rank 0 holds it now: the port ends with it */
}

/* ---- ends of ranks ---- */

/* Pass on what an ended rank left in its pipes, so that its last words
 * come before the launcher's line about it. */
static void drain_rank(struct job *job, struct rank *rk)
{
	struct stream *ss[] = { &rk->out, &rk->err };

	for (size_t i = 0; i < ARRAY_SIZE(ss); i++) {
		/* bounded: left-over processes may keep writing */
		for (int n = 0; n < 64 && ss[i]->fd >= 0; n++) {
			struct pollfd p = { .fd = ss[i]->fd, .events = POLLIN };

			if (poll(&p, 1, 0) <= 0)
				break;
			if (stream_read(ss[i]) <= 0) {
				job->open--;
				break;
			}
		}
	}
}

static void report_failure(struct job *job, int r, const siginfo_t *si)
{
	const char *then = job->running > 0 ? "; stopping the other ranks" : "";

	if (si->si_code == CLD_EXITED) {
		note(job, "rank %d exited with status %d%s", r, si->si_status,
		     then);
		return;
	}
	note(job, "rank %d was killed by signal %d (%s)%s%s", r,
	     si->si_status, strsignal(si->si_status),
	     si->si_code == CLD_DUMPED ? ", core dumped" : "", then);
}

static void rank_ended(struct job *job, int r, const siginfo_t *si)
{
	struct rank *rk = &job->ranks[r];
	bool exited = si->si_code == CLD_EXITED;

	rk->ended = true;
	rk->status = exited ? si->si_status : 128 + si->si_status;
	job->running--;
	if (rk->status == 0 || job->cause != CAUSE_NONE)
		return;
	job->failed_rank = r;
	drain_rank(job, rk);
	report_failure(job, r, si);
	stop_job(job, CAUSE_RANK_FAILED);
}

/* 1 when the process has ended, 0 while it runs, -1 on error; a process
 * that has ended stays a zombie (WNOWAIT). */
static int peek_end(pid_t pid, siginfo_t *si)
{
	int rc;

	do {
		si->si_pid = 0;
		rc = waitid(P_PID, pid, si, WEXITED | WNOHANG | WNOWAIT);
	} while (rc < 0 && errno == EINTR);
	if (rc < 0)
		return -1;
	return si->si_pid != 0;
}

/*
 * Look at every rank still running, without reaping any: the group ids stay
 * taken (see the top of the file).  O(ranks) per SIGCHLD; the signalfd
 * merges SIGCHLDs that come together.
 */
static void check_ranks(struct job *job)
{
	for (int r = 0; r < job->started; r++) {
		struct rank *rk = &job->ranks[r];
		siginfo_t si;
		int rc;

		if (rk->ended)
			continue;
		rc = peek_end(rk->pid, &si);
		if (rc == 0)
			continue;
		if (rc < 0) {
			note(job, "waiting for rank %d: %s", r,
			     strerror(errno));
			/* not a child of ours any more: count it as failed */
			si.si_code = CLD_EXITED;
			si.si_status = EXIT_LAUNCHER;
			rk->reaped = true;
		}
		rank_ended(job, r, &si);
	}
	if (job->running > 0)
		return;
	if (job->stage == RUNNING && job->open > 0)
		set_stage(job, DRAINING);
	if (job->cause == CAUSE_TIMEOUT && job->output_deadline < 0 &&
	    !job->output_dropped)
		job->output_deadline = now_ms() + GRACE_MS;
}

/* A signal to forward that comes once every rank has ended: the output
 * gets GRACE_MS more to go out, and no time after a second one. */
static void limit_output_wait(struct job *job)
{
	if (job->running > 0 || job->output_dropped)
		return;
	if (job->output_deadline < 0)
		job->output_deadline = now_ms() + GRACE_MS;
	else
		job->output_deadline = now_ms();
}

/* ---- the loop ---- */

static void read_signals(struct job *job)
{
	struct signalfd_siginfo si[16];
	bool child = false;
	ssize_t n;

	for (;;) {
		n = read(job->sigfd, si, sizeof(si));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN)
			fail_errno(job, "reading signals");
		if (n <= 0)
			break;
		for (size_t i = 0; i < n / sizeof(si[0]); i++) {
			if (si[i].ssi_signo == SIGCHLD) {
				child = true;
				continue;
			}
			/* a rank that has ended by now counts as ended for
			 * this signal: its SIGCHLD, numbered above, is read
			 * after it */
			check_ranks(job);
			signal_groups(job, si[i].ssi_signo);
			limit_output_wait(job);
		}
	}
	if (child)
		check_ranks(job);
}

/* The pipes feeding a sink that is behind by too much are left unread:
 * their ranks wait in their writes, as they would on the output itself. */
static int gather_pollfds(struct job *job)
{
	bool backlogged[] = { sink_backlogged(&job->sinks.k[0]),
			      sink_backlogged(&job->sinks.k[1]) };
	int n = 0;

	job->pfds[n].fd = job->sigfd;
	job->pfds[n].events = POLLIN;
	job->pstreams[n++] = NULL;
	job->pfds[n].fd = sinks_event_fd(&job->sinks);
	job->pfds[n].events = POLLIN;
	job->pstreams[n++] = NULL;
	for (int r = 0; r < job->started; r++) {
		struct stream *ss[] = { &job->ranks[r].out,
					&job->ranks[r].err };

		for (size_t i = 0; i < ARRAY_SIZE(ss); i++) {
			if (ss[i]->fd < 0 || backlogged[i])
				continue;
			job->pfds[n].fd = ss[i]->fd;
			job->pfds[n].events = POLLIN;
			job->pstreams[n++] = ss[i];
		}
	}
	return n;
}

static void read_streams(struct job *job, int n)
{
	for (int i = 2; i < n; i++) {
		struct stream *s = job->pstreams[i];
		int rc;

		/* drain_rank() may have closed it in this round */
		if (!job->pfds[i].revents || s->fd < 0)
			continue;
		rc = stream_read(s);
		if (rc < 0)
			fail_errno(job, "reading the output of a rank");
		if (rc <= 0)
			job->open--;
	}
}

/*
 * Once a sink is broken (stdout closed by its reader, a full disk), stop
 * reading the pipes that feed it: ranks that write there then get EPIPE or
 * SIGPIPE, as they would writing to the broken output themselves.
 */
static void drop_broken_sinks(struct job *job)
{
	for (int k = 0; k < 2; k++) {
		int error;

		if (job->dropped[k] || !sink_broken(&job->sinks.k[k], &error))
			continue;
		job->dropped[k] = true;
		if (k == 0 && error != EPIPE)
			note(job, "writing to stdout: %s", strerror(error));
		for (int r = 0; r < job->started; r++)
			close_stream(job, k ? &job->ranks[r].err
					    : &job->ranks[r].out);
	}
}

/* Milliseconds until deadline (-1: none), for poll(). */
static int ms_until(int64_t deadline)
{
	int64_t left;

	if (deadline < 0)
		return -1;
	left = deadline - now_ms();
	return left <= 0 ? 0 : left > INT_MAX ? INT_MAX : (int)left;
}

static int poll_timeout(const struct job *job)
{
	int64_t deadline = job->stage == RUNNING ? job->timeout_deadline
						 : job->stage_deadline;

	if (deadline < 0 || (job->output_deadline >= 0 &&
			     job->output_deadline < deadline))
		deadline = job->output_deadline;
	return ms_until(deadline);
}

/* What the ranks' pipes hold that was not read. */
static uint64_t unread_bytes(struct job *job)
{
	uint64_t total = 0;

	for (int r = 0; r < job->started; r++) {
		struct stream *ss[] = { &job->ranks[r].out,
					&job->ranks[r].err };

		for (size_t i = 0; i < ARRAY_SIZE(ss); i++) {
			int fd = ss[i]->fd, n;

			if (fd >= 0 && ioctl(fd, FIONREAD, &n) == 0)
				total += n;
		}
	}
	return total;
}

/* Until everything put on k is written, ms at most; false if it is not. */
static bool wait_idle(struct job *job, struct sink *k, int ms)
{
	int64_t end = now_ms() + ms;

	while (!sink_idle(k)) {
		struct pollfd p = { .fd = sinks_event_fd(&job->sinks),
				    .events = POLLIN };

		if (now_ms() >= end)
			return false;
		if (poll(&p, 1, ms_until(end)) > 0)
			sinks_clear_event(&job->sinks);
	}
	return true;
}

/*
 * Give up on the output that is not out yet: what the ranks' pipes hold is
 * dropped, and so is what is queued for a stdout that did not take it.  A
 * note on stderr says how much, if stderr takes it.
 */
static void drop_output(struct job *job)
{
	struct sink *out = &job->sinks.k[0], *err = &job->sinks.k[1];
	uint64_t lost = unread_bytes(job);

	job->output_deadline = -1;
	job->output_dropped = true;
	close_streams(job);
	if (!sink_idle(out))
		lost += sink_abandon(out);
	if (lost)
		note(job, "dropped %llu bytes of output not written in time",
		     (unsigned long long)lost);
	if (!wait_idle(job, err, NOTE_MS))
		sink_abandon(err);
}

static void check_deadlines(struct job *job)
{
	int64_t now = now_ms();

	/* Pipes that processes still hold are the stages' business first. */
	if (job->output_deadline >= 0 && now >= job->output_deadline) {
		if (streams_held(job))
			job->output_deadline = now + GRACE_MS;
		else
			drop_output(job);
	}
	if (job->stage == RUNNING) {
		if (job->timeout_deadline < 0 || now < job->timeout_deadline)
			return;
		note(job, "timed out after %s s; stopping the ranks",
		     job->opt->timeout_arg);
		stop_job(job, CAUSE_TIMEOUT);
		return;
	}
	if (job->stage_deadline < 0 || now < job->stage_deadline)
		return;
	if (job->stage == DRAINING && !streams_held(job))
		job->stage_deadline = now + GRACE_MS;	/* data for a sink */
	else if (job->stage == DRAINING)
		set_stage(job, TERMINATING);
	else if (job->stage == TERMINATING)
		set_stage(job, KILLING);
	else if (job->running == 0)
		set_stage(job, ABANDONED);
	else
		job->stage_deadline = now + GRACE_MS;	/* SIGKILL pending */
}

/* Until every rank has ended and its output is passed on. */
static void run_job(struct job *job)
{
	while (job->running > 0 || job->open > 0) {
		int n = gather_pollfds(job);
		int ready = poll(job->pfds, n, poll_timeout(job));

		if (ready < 0 && errno != EINTR) {
			fail_errno(job, "poll");
			stop_job(job, CAUSE_LAUNCHER);
			return;
		}
		if (ready > 0 && job->pfds[0].revents)
			read_signals(job);
		if (ready > 0 && job->pfds[1].revents)
			sinks_clear_event(&job->sinks);
		if (ready > 0)
			read_streams(job, n);
		sink_flush(&job->sinks.k[0]);
		sink_flush(&job->sinks.k[1]);
		drop_broken_sinks(job);
		check_deadlines(job);
	}
}

/* Kill what is left of every group and reap the ranks: nothing of the job
 * outlives the launcher. */
static void reap_ranks(struct job *job)
{
	signal_groups(job, SIGKILL);
	for (int r = 0; r < job->started; r++) {
		struct rank *rk = &job->ranks[r];
		int st;

		if (rk->reaped)
			continue;
		while (waitpid(rk->pid, &st, 0) < 0) {
			if (errno != EINTR) {
				note(job, "waiting for rank %d: %s", r,
				     strerror(errno));
				break;
			}
		}
		rk->reaped = true;
		shemb_run_remove_shm_regions(rk->pid);
	}
}

/*
 * Once the job is over: until stdout and stderr have taken what is queued,
 * however long that takes, unless a --timeout or a signal limited the wait
 * (limit_output_wait()).  The writers end then.
 */
static void finish_output(struct job *job)
{
	int64_t *deadline = &job->output_deadline;

	close_streams(job);
	while (!sink_idle(&job->sinks.k[0]) || !sink_idle(&job->sinks.k[1])) {
		struct pollfd p[] = {
			{ .fd = job->sigfd, .events = POLLIN },
			{ .fd = sinks_event_fd(&job->sinks), .events = POLLIN },
		};
		int ready = poll(p, ARRAY_SIZE(p), ms_until(*deadline));

		if (ready < 0 && errno != EINTR) {
			fail_errno(job, "poll");
			drop_output(job);
			break;
		}
		if (ready > 0 && p[0].revents)
			read_signals(job);
		if (ready > 0 && p[1].revents)
			sinks_clear_event(&job->sinks);
		if (*deadline >= 0 && now_ms() >= *deadline)
			drop_output(job);
	}
	for (int k = 0; k < 2; k++) {
		if (job->sinks.k[k].lost)
			note(job, "dropped %llu bytes of output: out of memory",
			     (unsigned long long)job->sinks.k[k].lost);
	}
	sinks_close(&job->sinks);
}

static int exit_status(const struct job *job)
{
	switch (job->cause) {
	case CAUSE_NONE:
		return 0;
	case CAUSE_RANK_FAILED:
		return job->ranks[job->failed_rank].status;
	case CAUSE_TIMEOUT:
		return EXIT_TIMEOUT;
	default:
		return EXIT_LAUNCHER;
	}
}

static void job_free(struct job *job)
{
	close_streams(job);
	if (job->sigfd >= 0 && close(job->sigfd) < 0)
		fail_errno(job, "close");
	if (job->devnull >= 0 && close(job->devnull) < 0)
		fail_errno(job, "close");
	close_root(job);
	free(job->ranks);
	free(job->pfds);
	free(job->pstreams);
}

int main(int argc, char **argv)
{
	static struct job job;
	struct options opt;
	int status;

	status = shemb_run_parse_options(argc, argv, &opt);
	if (status)
		return status > 0 ? 0 : EXIT_USAGE;
	if (open_std_fds() < 0) {
		perror("shemb-run: standard descriptors");
		return EXIT_LAUNCHER;
	}
	job.sigfd = -1;
	job.devnull = -1;
	job.root_fd = -1;
	if (sinks_init(&job.sinks, STDOUT_FILENO, STDERR_FILENO) < 0)
		note(&job, "cannot start the threads that write the output: %s",
		     strerror(errno));
	status = EXIT_LAUNCHER;
	if (job_init(&job, &opt) == 0 && prepare_environment(&job) == 0) {
		start_ranks(&job);
		run_job(&job);
		reap_ranks(&job);
		status = exit_status(&job);
	}
	finish_output(&job);
	job_free(&job);
	return status;
}
