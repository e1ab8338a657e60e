/*
 * test_coll_fail.c - a rank killed in the middle of a large alltoallv, or
 * with steps started without waiting on the others (also a backward with
 * the lookup behind it, run relaxed): they must fail with
 * SHEMB_EPEER (or SHEMB_ETIMEDOUT) within the timeout, never hang.
 * Starts its own ranks (shemb-run would kill them all as soon as one
 * dies), on loopback, over shm and tcp;ofi_rxm; every child is killed and
 * reaped if the test runs out of time.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tools/free_port.h"
#include "tools/shm_regions.h"

#define WORLD 3
#define LIMIT_S 240

static pid_t kids[WORLD];

/* Rank 0 inherits the listener (lfd) as SHEMB_ROOT_FD, as from shemb-run:
 * no other test can take the port in between. */
static void start_rank(int r, const char *prog, const char *scenario,
		       const char *provider, int port, int lfd)
{
	char v[64];

	kids[r] = fork();
	if (kids[r] < 0)
		exit(99);
	if (kids[r])
		return;
	snprintf(v, sizeof(v), "%d", r);
	setenv("SHEMB_RANK", v, 1);
	snprintf(v, sizeof(v), "%d", WORLD);
	setenv("SHEMB_WORLD_SIZE", v, 1);
	snprintf(v, sizeof(v), "127.0.0.1:%d", port);
	setenv("SHEMB_ROOT", v, 1);
	setenv("SHEMB_JOB_KEY", "test-coll-fail", 1);
	setenv("SHEMB_PROVIDER", provider, 1);
	if (r == 0) {
		snprintf(v, sizeof(v), "%d", lfd);
		setenv("SHEMB_ROOT_FD", v, 1);
		if (fcntl(lfd, F_SETFD, 0) < 0)
			_exit(127);
	}
	execl(prog, prog, scenario, "--timeout", "15000", (char *)NULL);
	_exit(127);
}

static void kill_all(void)
{
	for (int r = 0; r < WORLD; r++)
		if (kids[r] > 0)
			kill(kids[r], SIGKILL);
}

static const char *running = "", *running_on = "";

/* Out of time: say which scenario and which ranks had not ended (with
 * async-signal-safe calls only; WORLD < 10). */
static void on_alarm(int sig)
{
	static const char head[] = "FAIL: out of time in ";
	char msg[64] = "; ranks not ended:";
	size_t n = strlen(msg);
	ssize_t w;

	for (int r = 0; r < WORLD; r++) {
		if (kids[r] > 0) {
			msg[n++] = ' ';
			msg[n++] = (char)('0' + r);
		}
	}
	msg[n++] = '\n';
	w = write(STDOUT_FILENO, head, sizeof(head) - 1);
	w = write(STDOUT_FILENO, running, strlen(running));
	w = write(STDOUT_FILENO, " over ", 6);
	w = write(STDOUT_FILENO, running_on, strlen(running_on));
	w = write(STDOUT_FILENO, msg, n);
	(void)w;
	(void)sig;
	kill_all();
	_exit(1);
}

/* The survivors exit 0 (they saw the failure), the victim by SIGKILL. */
static int run(const char *prog, const char *scenario, const char *provider)
{
	unsigned port;
	int ok = 1, lfd = shemb_tool_listen_free_port(&port);

	if (lfd < 0)
		return 0;
	running = scenario;
	running_on = provider;
	for (int r = 0; r < WORLD; r++)
		start_rank(r, prog, scenario, provider, (int)port, lfd);
	close(lfd);
	for (int r = 0; r < WORLD; r++) {
		int st;

		if (waitpid(kids[r], &st, 0) < 0)
			return 0;
		shemb_run_remove_shm_regions(kids[r]);
		kids[r] = 0;
		if (r == WORLD - 1)
			ok &= WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
		else
			ok &= WIFEXITED(st) && WEXITSTATUS(st) == 0;
	}
	printf("%s %s %s\n", ok ? "ok  " : "FAIL", scenario, provider);
	return ok;
}

int main(void)
{
	const char *top = getenv("top_builddir");
	char prog[4096];
	int ok;

	snprintf(prog, sizeof(prog), "%s/tests/coll_rank", top ? top : ".");
	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGALRM, on_alarm);
	alarm(LIMIT_S);
	ok = run(prog, "kill-one", "shm");
	ok &= run(prog, "kill-one", "tcp;ofi_rxm");
	ok &= run(prog, "kill-steps", "shm");
	ok &= run(prog, "kill-steps", "tcp;ofi_rxm");
	ok &= run(prog, "kill-relaxed", "shm");
	ok &= run(prog, "kill-relaxed", "tcp;ofi_rxm");
	return ok ? 0 : 1;
}
