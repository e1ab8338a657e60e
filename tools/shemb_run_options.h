/*
 * shemb_run_options.h - the command line of shemb-run.
 */
#ifndef SHEMB_RUN_OPTIONS_H
#define SHEMB_RUN_OPTIONS_H

#include <stdbool.h>

#define MAX_RANKS 1024

struct options {
	int nranks;
	const char *provider;
	const char *root;	/* NULL: 127.0.0.1 and a free port */
	const char *timeout_arg;
	double timeout_s;	/* 0: none */
	bool prefix;
	char **argv;		/* PROGRAM and its arguments */
};

/* Returns 0 to run the job, 1 after --help, -1 after a usage error (the
 * usage is printed). */
int shemb_run_parse_options(int argc, char **argv, struct options *o);

#endif
