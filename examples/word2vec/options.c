/*
 * options.c - the command line of examples/word2vec: every value checked,
 * so that a bad option gives the usage and exit status 2 before any work.
 */
#define _POSIX_C_SOURCE 200809L  /* optarg, optind */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "word2vec.h"

enum {
	OPT_MIN_COUNT = 256, OPT_MAX_VOCAB, OPT_SAMPLE, OPT_NEGATIVE,
	OPT_WINDOW, OPT_DIM, OPT_EPOCHS, OPT_LR, OPT_BATCH, OPT_THREADS,
	OPT_SEED, OPT_QUIET, OPT_QUERY, OPT_TOP, OPT_GENERATE,
	OPT_WRITE_CORPUS, OPT_OUTPUT, OPT_HELP
};

static const struct option long_opts[] = {
	{ "min-count", required_argument, NULL, OPT_MIN_COUNT },
	{ "max-vocab", required_argument, NULL, OPT_MAX_VOCAB },
	{ "sample", required_argument, NULL, OPT_SAMPLE },
	{ "negative", required_argument, NULL, OPT_NEGATIVE },
	{ "window", required_argument, NULL, OPT_WINDOW },
	{ "dim", required_argument, NULL, OPT_DIM },
	{ "epochs", required_argument, NULL, OPT_EPOCHS },
	{ "lr", required_argument, NULL, OPT_LR },
	{ "batch", required_argument, NULL, OPT_BATCH },
	{ "threads", required_argument, NULL, OPT_THREADS },
	{ "seed", required_argument, NULL, OPT_SEED },
	{ "quiet", no_argument, NULL, OPT_QUIET },
	{ "query", required_argument, NULL, OPT_QUERY },
	{ "top", required_argument, NULL, OPT_TOP },
	{ "generate", required_argument, NULL, OPT_GENERATE },
	{ "write-corpus", required_argument, NULL, OPT_WRITE_CORPUS },
	{ "output", required_argument, NULL, OPT_OUTPUT },
	{ "help", no_argument, NULL, OPT_HELP },
	{ NULL, 0, NULL, 0 }
};

void w2v_usage(FILE *f)
{
	fputs("Usage: " W2V_NAME " [options] FILE\n"
	      "       " W2V_NAME " [options] --generate N\n"
	      "Skip-gram word2vec with negative sampling on two libshemb "
	      "tables.\n"
	      "  --min-count N     drop words seen fewer times (5)\n"
	      "  --max-vocab N     keep at most the N most frequent words\n"
	      "  --sample T        subsample words above frequency T "
	      "(1e-3; 0: off)\n"
	      "  --negative K      negatives per pair (5)\n"
	      "  --window W        largest window, shrunk at random (5)\n"
	      "  --dim D           vector size (100)\n"
	      "  --epochs E        passes over the text (5)\n"
	      "  --lr A            starting learning rate of row-wise Adagrad, "
	      "decays\n"
	      "                    linearly to A / 10^4 (0.2)\n"
	      "  --batch B         pairs per step (4096)\n"
	      "  --threads N       the library's threads (0: all CPUs)\n"
	      "  --seed S          random seed (1)\n"
	      "  --query W1,W2...  print the nearest neighbours of these\n"
	      "  --top N           neighbours per query word (5)\n"
	      "  --output PATH     save the vectors in word2vec's text "
	      "format\n"
	      "  --generate N      train on a built-in corpus of N words "
	      "(k, M: 10^3, 10^6)\n"
	      "  --write-corpus P  save that corpus to P\n"
	      "  --quiet           no progress or summary\n"
	      "Across ranks: shemb-run -n 2 " W2V_NAME " ...\n", f);
}

/* An integer in [lo, hi], with an optional k or M (x 10^3, x 10^6). */
static int parse_int(const char *s, long long lo, long long hi,
		     int64_t *out)
{
	char *end;
	long long v, scale = 1;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (end == s || errno)
		return -1;
	if (*end == 'k' || *end == 'K')
		scale = 1000, end++;
	else if (*end == 'm' || *end == 'M')
		scale = 1000000, end++;
	/* v * scale in range, tested without overflowing */
	if (*end || v > hi / scale || v < LLONG_MIN / scale || v * scale < lo)
		return -1;
	*out = v * scale;
	return 0;
}

static int parse_int32(const char *s, int lo, int hi, int *out)
{
	int64_t v;

	if (parse_int(s, lo, hi, &v))
		return -1;
	*out = (int)v;
	return 0;
}

static int parse_real(const char *s, double lo, double hi, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (end == s || *end || errno || !isfinite(v) || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

static void set_defaults(struct w2v_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->min_count = 5;
	o->sample = 1e-3;
	o->negative = 5;
	o->window = 5;
	o->dim = 100;
	o->epochs = 5;
	o->lr = 0.2f;
	o->batch = 4096;
	o->seed = 1;
	o->top = 5;
}

/* Options that take a number; returns -1 when the value is bad. */
static int parse_number(int c, const char *arg, struct w2v_opts *o)
{
	int64_t v;
	double d;

	switch (c) {
	case OPT_MIN_COUNT:
		return parse_int(arg, 1, INT64_MAX, &o->min_count);
	case OPT_MAX_VOCAB:
		return parse_int(arg, 1, INT32_MAX, &o->max_vocab);
	case OPT_SAMPLE:
		return parse_real(arg, 0, 1, &o->sample);
	case OPT_NEGATIVE:
		return parse_int32(arg, 1, 100, &o->negative);
	case OPT_WINDOW:
		return parse_int32(arg, 1, 100, &o->window);
	case OPT_DIM:
		return parse_int32(arg, 1, SHEMB_MAX_DIM, &o->dim);
	case OPT_EPOCHS:
		return parse_int32(arg, 1, 10000, &o->epochs);
	case OPT_BATCH:
		return parse_int32(arg, 1, 1 << 20, &o->batch);
	case OPT_THREADS:
		return parse_int32(arg, 0, 1024, &o->threads);
	case OPT_TOP:
		return parse_int32(arg, 1, 1000, &o->top);
	case OPT_GENERATE:
		return parse_int(arg, 1, INT32_MAX, &o->generate);
	case OPT_LR:
		if (parse_real(arg, 0, 10, &d) || d == 0)
			return -1;
		o->lr = (float)d;
		return 0;
	case OPT_SEED:
		if (parse_int(arg, 0, INT64_MAX, &v))
			return -1;
		o->seed = (uint64_t)v;
		return 0;
	}
	return -1;
}

static const char *option_name(int c)
{
	for (const struct option *lo = long_opts; lo->name; lo++)
		if (lo->val == c)
			return lo->name;
	return "?";
}

/* Returns 0, 1 for --help, or -1 after a message on a bad command line. */
int w2v_parse_options(int argc, char **argv, struct w2v_opts *o)
{
	int c;

	set_defaults(o);
	while ((c = getopt_long(argc, argv, "h", long_opts, NULL)) != -1) {
		if (c == 'h' || c == OPT_HELP)
			return 1;
		else if (c == '?')
			return -1;
		else if (c == OPT_QUIET)
			o->quiet = true;
		else if (c == OPT_QUERY)
			o->query = optarg;
		else if (c == OPT_WRITE_CORPUS)
			o->write_corpus = optarg;
		else if (c == OPT_OUTPUT)
			o->output = optarg;
		else if (parse_number(c, optarg, o)) {
			fprintf(stderr, W2V_NAME ": bad value for --%s: '%s'\n",
				option_name(c), optarg);
			return -1;
		}
	}
	if (optind < argc)
		o->file = argv[optind++];
	if (optind < argc || !o->file == !o->generate) {
		fprintf(stderr, W2V_NAME ": give one FILE, or --generate N\n");
		return -1;
	}
	if (o->write_corpus && !o->generate) {
		fprintf(stderr, W2V_NAME ": --write-corpus needs --generate\n");
		return -1;
	}
	return 0;
}
