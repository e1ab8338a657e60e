/*
 * shemb_run_env.c - the environment of a job's ranks: the world size, the
 * rendezvous address (with rank 0's listener, held from the launcher's
 * choice of a port to rank 0's start), the job key and the provider, and
 * no rank variables of other launchers.
 */
#define _GNU_SOURCE
#include "tools/shemb_run_job.h"
#include "tools/free_port.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

/* The job key: random bytes, given to the ranks in hex. */
#define KEY_BYTES 16

/* The rank variables of other launchers, which the library reads when it
 * finds no SHEMB_RANK: a shemb-run inside an srun allocation must not pass
 * them on. */
static const char *const foreign_vars[] = {
	"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
	"PMI_RANK", "PMI_SIZE",
	"SLURM_PROCID", "SLURM_NTASKS",
};

/* A listener at 127.0.0.1 and a free port (tools/free_port.h), which
 * rank 0 inherits as SHEMB_ROOT_FD: the port is never free between the
 * choice and rank 0's start, for another program to take. */
static int free_root(struct job *job, char *buf, size_t len)
{
	unsigned port = 0;

	if (job->opt->nranks > 1)
		job->root_fd = shemb_tool_listen_free_port(&port);
	else	/* one rank meets nobody: no listener to hold */
		port = shemb_tool_free_port();
	if (!port)
		return fail_errno(job, "binding a free port on 127.0.0.1");
	snprintf(buf, len, "127.0.0.1:%u", port);
	return 0;
}

void close_root(struct job *job)
{
	if (job->root_fd >= 0 && close(job->root_fd) < 0)
		fail_errno(job, "close");
	job->root_fd = -1;
}

/* In rank 0's child: keep the listener across exec, and name it. */
int pass_root(struct job *job)
{
	char num[16];

	if (job->root_fd < 0)
		return unsetenv("SHEMB_ROOT_FD");
	snprintf(num, sizeof(num), "%d", job->root_fd);
	return fcntl(job->root_fd, F_SETFD, 0) < 0 ? -1 :
	       setenv("SHEMB_ROOT_FD", num, 1);
}

static int make_job_key(struct job *job, char *hex)
{
	unsigned char raw[KEY_BYTES];
	size_t got = 0;

	while (got < sizeof(raw)) {
		ssize_t n = getrandom(raw + got, sizeof(raw) - got, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return fail_errno(job, "getrandom");
		}
		got += n;
	}
	for (size_t i = 0; i < sizeof(raw); i++)
		sprintf(hex + 2 * i, "%02x", raw[i]);
	return 0;
}

static int set_env(struct job *job, const char *name, const char *value)
{
	if (setenv(name, value, 1) == 0)
		return 0;
	note(job, "setting %s: %s", name, strerror(errno));
	return -1;
}

/* What every rank shares goes into the launcher's own environment, which
 * the ranks inherit; each rank adds SHEMB_RANK. */
int prepare_environment(struct job *job)
{
	const struct options *o = job->opt;
	char root[64], key[2 * KEY_BYTES + 1], size[16];

	for (size_t i = 0; i < ARRAY_SIZE(foreign_vars); i++) {
		if (unsetenv(foreign_vars[i]) < 0)
			return fail_errno(job, "unsetenv");
	}
	if (unsetenv("SHEMB_ROOT_FD") < 0)	/* an outer job's */
		return fail_errno(job, "unsetenv");
	snprintf(size, sizeof(size), "%d", o->nranks);
	if (set_env(job, "SHEMB_WORLD_SIZE", size) < 0)
		return -1;
	if (!o->root && free_root(job, root, sizeof(root)) < 0)
		return -1;
	if (set_env(job, "SHEMB_ROOT", o->root ? o->root : root) < 0)
		return -1;
	/* an empty key is no key: the job would admit anyone */
	if ((!getenv("SHEMB_JOB_KEY") || !*getenv("SHEMB_JOB_KEY")) &&
	    (make_job_key(job, key) < 0 ||
	     set_env(job, "SHEMB_JOB_KEY", key) < 0))
		return -1;
	if (o->provider && set_env(job, "SHEMB_PROVIDER", o->provider) < 0)
		return -1;
	return 0;
}
