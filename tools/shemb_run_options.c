/*
 * shemb_run_options.c - parse and check shemb-run's command line.
 */
#define _GNU_SOURCE
#include "tools/shemb_run_options.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage_text[] =
"Usage: shemb-run -n N [options] [--] PROGRAM [ARGS...]\n"
"\n"
"Start N ranks of PROGRAM on this host and pass their output on, line by\n"
"line, behind the rank: \"[r] \".\n"
"\n"
"Options:\n"
"  -n N                number of ranks, 1 to 1024\n"
"  --provider P        set SHEMB_PROVIDER=P in every rank\n"
"  --root HOST:PORT    where rank 0 listens for the others ([ADDRESS]:PORT\n"
"                      for IPv6); default 127.0.0.1 and a free port\n"
"  --timeout SECONDS   stop the ranks after this long and exit with 124\n"
"  --no-prefix         pass the output on as it comes, without prefixes\n"
"  -h, --help          this text\n"
"\n"
"Every rank gets SHEMB_RANK, SHEMB_WORLD_SIZE, SHEMB_ROOT and SHEMB_JOB_KEY\n"
"(kept from the environment when set and not empty), SHEMB_PROVIDER\n"
"with --provider, and not the rank variables of other launchers.  SIGINT,\n"
"SIGTERM, SIGHUP and SIGQUIT are forwarded to every rank.  When a rank\n"
"fails, the others are stopped and shemb-run exits with the status of the\n"
"first that failed (128 + N after signal N); 127: the program could not\n"
"be run.\n";

/* ---- options ---- */

static int usage_only(void)
{
	fputs(usage_text, stderr);
	return -1;
}

static int __attribute__((format(printf, 1, 2)))
usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs("shemb-run: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\n\n", stderr);
	return usage_only();
}

static int parse_ranks(const char *s, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < 1 || v > MAX_RANKS)
		return -1;
	*out = (int)v;
	return 0;
}

static int parse_port(const char *s)
{
	char *end;
	long v;

	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtol(s, &end, 10);
	return errno || *end || v < 1 || v > 65535 ? -1 : 0;
}

/* HOST:PORT, or [ADDRESS]:PORT for IPv6, as the ranks' rendezvous takes
 * it; the host itself is left to the ranks to resolve. */
static int check_root(const char *root)
{
	const char *colon = strrchr(root, ':');
	size_t hostlen;

	if (!colon || parse_port(colon + 1) < 0)
		return -1;
	hostlen = colon - root;
	if (root[0] == '[')
		return hostlen > 2 && root[hostlen - 1] == ']' ? 0 : -1;
	return hostlen > 0 && !memchr(root, ':', hostlen) ? 0 : -1;
}

static int parse_seconds(const char *s, double *out)
{
	char *end;

	errno = 0;
	*out = strtod(s, &end);
	return errno || end == s || *end || !(*out > 0) || *out > 1e9 ? -1 : 0;
}

enum { OPT_PROVIDER = 256, OPT_ROOT, OPT_TIMEOUT, OPT_NO_PREFIX };

static const struct option long_opts[] = {
	{ "provider", required_argument, NULL, OPT_PROVIDER },
	{ "root", required_argument, NULL, OPT_ROOT },
	{ "timeout", required_argument, NULL, OPT_TIMEOUT },
	{ "no-prefix", no_argument, NULL, OPT_NO_PREFIX },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 }
};

static int apply_option(struct options *o, int c, const char *arg)
{
	switch (c) {
	case 'n':
		if (parse_ranks(arg, &o->nranks) < 0)
			return usage_error("-n %s: from 1 to %d ranks", arg,
					   MAX_RANKS);
		return 0;
	case OPT_PROVIDER:
		if (!*arg)
			return usage_error("--provider takes a name");
		o->provider = arg;
		return 0;
	case OPT_ROOT:
		if (check_root(arg) < 0)
			return usage_error("--root %s: not HOST:PORT", arg);
		o->root = arg;
		return 0;
	case OPT_TIMEOUT:
		if (parse_seconds(arg, &o->timeout_s) < 0)
			return usage_error("--timeout %s: not seconds > 0",
					   arg);
		o->timeout_arg = arg;
		return 0;
	case OPT_NO_PREFIX:
		o->prefix = false;
		return 0;
	default:
		/* getopt has said what is wrong */
		return usage_only();
	}
}

/* Returns 0 to run the job, 1 after --help, -1 after a usage error. */
int shemb_run_parse_options(int argc, char **argv, struct options *o)
{
	int c;

	memset(o, 0, sizeof(*o));
	o->prefix = true;
	/* "+": the options end at PROGRAM, whose own options stay its own. */
	while ((c = getopt_long(argc, argv, "+n:h", long_opts, NULL)) != -1) {
		if (c == 'h') {
			if (fputs(usage_text, stdout) == EOF || fflush(stdout))
				return -1;
			return 1;
		}
		if (apply_option(o, c, optarg) < 0)
			return -1;
	}
	if (!o->nranks)
		return usage_error("-n N is required");
	if (optind >= argc)
		return usage_error("no program given");
	o->argv = argv + optind;
	return 0;
}
