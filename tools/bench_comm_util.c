/*
 * bench_comm_util.c - what the comm benchmark's parent and jobs share:
 * size lists, and running a job bounded in time with its output collected.
 */
#define _GNU_SOURCE
#include "tools/bench_comm.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tools/bench_util.h"

/* ---- sizes ---- */

int comm_parse_count(const char *s, int64_t min, int64_t max, int64_t *out)
{
	char *end;
	long long v;
	int shift = 0;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end == s)
		return -1;
	if (*end == 'k' || *end == 'K')
		shift = 10;
	else if (*end == 'm' || *end == 'M')
		shift = 20;
	else if (*end == 'g' || *end == 'G')
		shift = 30;
	if (shift)
		end++;
	if (*end || v < 0 || v > (INT64_MAX >> shift))
		return -1;
	v <<= shift;
	if (v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

int comm_parse_int(const char *s, int64_t min, int64_t max, int *out)
{
	int64_t v;

	if (comm_parse_count(s, min, max, &v))
		return -1;
	*out = (int)v;
	return 0;
}

int comm_parse_list(const char *s, int64_t min, int64_t max, int64_t *out,
		    int maxn)
{
	char item[64];
	int n = 0;

	while (*s) {
		size_t len = strcspn(s, ",");

		if (len == 0 || len >= sizeof(item) || n == maxn)
			return -1;
		memcpy(item, s, len);
		item[len] = 0;
		if (comm_parse_count(item, min, max, &out[n++]))
			return -1;
		s += len;
		if (*s == ',' && !*++s)
			return -1; /* a trailing comma */
	}
	return n ? n : -1;
}

const char *comm_size_name(int64_t bytes, char *buf, size_t len)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB" };
	int u = 0;

	while (u < 3 && bytes >= 1024 && bytes % 1024 == 0) {
		bytes /= 1024;
		u++;
	}
	snprintf(buf, len, "%lld %s", (long long)bytes, units[u]);
	return buf;
}

int comm_auto_reps(int64_t bytes)
{
	int64_t r = bytes > 0 ? ((int64_t)512 << 20) / bytes : 200;

	return r < 10 ? 10 : r > 200 ? 200 : (int)r;
}

/* ---- where the programs are ---- */

const char *comm_self_exe(void)
{
	static char path[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);

	if (n <= 0)
		return NULL;
	path[n] = 0;
	return path;
}

const char *comm_find_sibling(const char *name)
{
	static char path[PATH_MAX + 64];
	const char *self = comm_self_exe();
	const char *slash = self ? strrchr(self, '/') : NULL;
	int dir;

	if (!slash)
		return NULL;
	dir = (int)(slash - self);
	snprintf(path, sizeof(path), "%.*s/%s", dir, self, name);
	if (access(path, X_OK) == 0)
		return path;
	/* in the build tree, libtool keeps the real program in .libs/ and
	 * the programs it did not link (shemb-run) one level up */
	if (dir >= 6 && !strncmp(self + dir - 6, "/.libs", 6)) {
		snprintf(path, sizeof(path), "%.*s/%s", dir - 6, self, name);
		if (access(path, X_OK) == 0)
			return path;
	}
	return NULL;
}

/* ---- running a job ---- */

#define COMM_OUT_MAX ((size_t)64 << 20)

void comm_buf_free(struct comm_buf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

/* Read what is there; -1 at EOF or on error. */
static int drain(int fd, struct comm_buf *b)
{
	char tmp[65536];
	ssize_t n = read(fd, tmp, sizeof(tmp));

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return 0;
	if (n <= 0)
		return -1;
	if (b->len + (size_t)n + 1 > b->cap && b->len < COMM_OUT_MAX) {
		size_t cap = (b->cap ? 2 * b->cap : 65536) + (size_t)n;
		char *p = realloc(b->p, cap);

		if (!p)
			return 0; /* keep reading, drop the bytes */
		b->p = p;
		b->cap = cap;
	}
	if (b->len + (size_t)n + 1 <= b->cap) {
		memcpy(b->p + b->len, tmp, (size_t)n);
		b->len += (size_t)n;
		b->p[b->len] = 0;
	}
	return 0;
}

static void exec_child(char *const argv[], int out, int err)
{
	int null = open("/dev/null", O_RDONLY);

	setpgid(0, 0);
	/* the job must not outlive a benchmark that was killed */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (null < 0 || dup2(null, 0) < 0 || dup2(out, 1) < 0 ||
	    dup2(err, 2) < 0)
		_exit(127);
	execvp(argv[0], argv);
	fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
	_exit(127);
}

/* Has pid ended?  It stays a zombie (WNOWAIT): its pid, which names its
 * process group, cannot be reused until it is reaped. */
static bool ended(pid_t pid)
{
	siginfo_t si;

	memset(&si, 0, sizeof(si));
	return waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) ==
		       0 && si.si_pid == pid;
}

struct job {
	pid_t pid;
	int fd[2];
	struct comm_buf *buf[2];
	double deadline, kill_at, end_at, killed_at;
	bool timed_out;
};

/* One pass of the loop: read output, look at the clock and the child.
 * Returns false once the child ended and its output is closed. */
static bool job_step(struct job *j)
{
	struct pollfd p[2];
	int n = 0, map[2];
	double now;

	for (int i = 0; i < 2; i++) {
		if (j->fd[i] < 0)
			continue;
		p[n].fd = j->fd[i];
		p[n].events = POLLIN;
		map[n++] = i;
	}
	if (n && poll(p, (nfds_t)n, 20) > 0) {
		for (int k = 0; k < n; k++) {
			int i = map[k];

			if (p[k].revents && drain(j->fd[i], j->buf[i]) < 0) {
				close(j->fd[i]); /* EOF */
				j->fd[i] = -1;
			}
		}
	} else if (!n) {
		struct timespec ts = { 0, 20000000 };

		nanosleep(&ts, NULL);
	}
	now = bench_now();
	if (!j->end_at && ended(j->pid))
		j->end_at = now;
	if (j->end_at && j->fd[0] < 0 && j->fd[1] < 0)
		return false;
	/* what holds the output now is outside the group: stop reading */
	if (j->killed_at && now >= j->killed_at + 2.0 && j->end_at) {
		for (int i = 0; i < 2; i++) {
			if (j->fd[i] >= 0)
				close(j->fd[i]);
			j->fd[i] = -1;
		}
		return false;
	}
	if (!j->timed_out && now >= j->deadline) {
		j->timed_out = true;
		kill(-j->pid, SIGTERM);
		j->kill_at = now + 3.0;
	}
	/* after a timeout, and when something the job left behind still
	 * holds its output 3 s after it ended: the whole group goes */
	if (!j->killed_at && ((j->timed_out && now >= j->kill_at) ||
			      (j->end_at && now >= j->end_at + 3.0))) {
		j->killed_at = now;
		kill(-j->pid, SIGKILL);
	}
	return true;
}

/* The processes whose parent is this one, other than `except`: what a
 * job left behind once its launcher was gone (see comm_adopt_orphans). */
static int kill_strays(pid_t except)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d))) {
		char path[64], buf[512], *p;
		long pid = strtol(e->d_name, NULL, 10);
		int ppid = 0;
		FILE *f;

		if (pid <= 0 || pid == except)
			continue;
		snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
		f = fopen(path, "r");
		if (!f)
			continue;
		p = fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;
		fclose(f);
		if (p && sscanf(p, ") %*c %d", &ppid) == 1 &&
		    ppid == getpid()) {
			kill((pid_t)pid, SIGKILL);
			n++;
		}
	}
	if (d)
		closedir(d);
	return n;
}

void comm_adopt_orphans(void)
{
	prctl(PR_SET_CHILD_SUBREAPER, 1);
}

/* After a job: nothing of it runs on, and every child is reaped. */
static void reap_strays(void)
{
	double end = bench_now() + 3.0;
	int st;

	while (kill_strays(0) && bench_now() < end) {
		struct timespec ts = { 0, 10000000 };

		while (waitpid(-1, &st, WNOHANG) > 0)
			;
		nanosleep(&ts, NULL);
	}
	while (waitpid(-1, &st, WNOHANG) > 0)
		;
}

int comm_run(char *const argv[], double timeout_s, struct comm_buf *out,
	     struct comm_buf *err)
{
	int po[2], pe[2], st = 0;
	struct job j = { .buf = { out, err } };

	if (pipe2(po, O_CLOEXEC))
		return -1;
	if (pipe2(pe, O_CLOEXEC)) {
		close(po[0]);
		close(po[1]);
		return -1;
	}
	fflush(NULL);
	j.pid = fork();
	if (j.pid == 0)
		exec_child(argv, po[1], pe[1]);
	close(po[1]);
	close(pe[1]);
	if (j.pid < 0) {
		close(po[0]);
		close(pe[0]);
		return -1;
	}
	setpgid(j.pid, j.pid); /* also here: no race with kill(-pid) */
	j.fd[0] = po[0];
	j.fd[1] = pe[0];
	j.deadline = bench_now() + timeout_s;
	while (job_step(&j))
		bench_progress_tick(); /* the elapsed time moves on */
	kill(-j.pid, SIGKILL); /* anything of the job still running */
	while (waitpid(j.pid, &st, 0) < 0 && errno == EINTR)
		;
	reap_strays();
	if (j.timed_out)
		return 124;
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return WEXITSTATUS(st);
}
