/*
 * shemb_run_job.h - the launcher's job (shemb-run.c): its ranks, its
 * stages, and the parts of it kept in files of their own (the ranks'
 * environment, shemb_run_env.c).
 */
#ifndef SHEMB_RUN_JOB_H
#define SHEMB_RUN_JOB_H

#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "tools/shemb_run_options.h"
#include "tools/shemb_run_output.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

enum stage {
	RUNNING,	/* only --timeout is pending */
	DRAINING,	/* every rank ended, left-over processes hold output */
	TERMINATING,	/* SIGTERM sent to every group */
	KILLING,	/* SIGKILL sent to every group */
	ABANDONED,	/* output still held after SIGKILL: no longer read */
};

/* Why the job ends early; the first cause is the one that counts. */
enum cause { CAUSE_NONE, CAUSE_RANK_FAILED, CAUSE_TIMEOUT, CAUSE_LAUNCHER };

struct rank {
	pid_t pid;		/* 0: not started */
	bool ended;		/* its end was seen; still a zombie */
	bool reaped;
	int status;		/* exit code, or 128 + signal */
	char prefix[16];
	struct stream out, err;
};

struct job {
	const struct options *opt;
	struct rank *ranks;
	int started;		/* ranks 0..started-1 have a process */
	int running;		/* started and not ended */
	int open;		/* streams not closed */
	int sigfd;
	int devnull;
	int root_fd;		/* rank 0's listener until it starts; -1 */
	pid_t self;
	sigset_t saved_mask;
	struct sigaction saved_sigpipe;
	struct rlimit saved_nofile;
	bool nofile_raised;
	enum stage stage;
	int64_t stage_deadline;		/* ms, CLOCK_MONOTONIC; -1: none */
	int64_t timeout_deadline;	/* -1: no --timeout */
	enum cause cause;
	int failed_rank;
	/* the signalfd, the writers' eventfd, then the streams read */
	struct pollfd *pfds;
	struct stream **pstreams;	/* pstreams[i] reads pfds[i] */
	bool dropped[2];		/* streams of a broken sink closed */
	int64_t output_deadline;	/* output left then is dropped; -1 */
	bool output_dropped;
	struct sinks sinks;		/* stdout, stderr */
};

/* A line of the launcher's own on stderr, after the ranks' output so far
 * (shemb-run.c); fail_errno() notes what failed with errno, returns -1. */
void __attribute__((format(printf, 2, 3)))
note(struct job *job, const char *fmt, ...);
int fail_errno(struct job *job, const char *what);

/* shemb_run_env.c: what every rank shares, into the launcher's own
 * environment; rank 0's listener of the rendezvous, passed on in its
 * child (pass_root) and closed in the launcher once it started. */
int prepare_environment(struct job *job);
int pass_root(struct job *job);
void close_root(struct job *job);

#endif
