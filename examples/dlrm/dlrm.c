/*
 * dlrm.c - a DLRM-style click model trained with libshemb: options, the
 * epochs, and what is printed.
 *
 * Dense features go through a bottom MLP; each categorical feature is a
 * libshemb table whose bags are SUM-pooled by shemb_lookup; the pairwise
 * dot products of those vectors feed a top MLP whose output is the
 * log-odds of a click.  The data is a synthetic click log with a planted
 * answer (data.c); the held-out loss and AUC are printed after every
 * epoch, one line each:
 *
 *	epoch 1 loss 0.5177 auc 0.7905 train_loss 0.5649 samples/s 112000
 *
 * with "epoch 0" for the model before training, and the AUC of the
 * planted model's own scores, the best any model can expect:
 *
 *	oracle auc 0.9208
 *
 * The same program trains across ranks: `shemb-run -n 2 dlrm` shards the
 * tables over two processes (the context reads its rank from the
 * environment), each training on its own half of every batch; only rank 0
 * prints.
 *
 * Usage: dlrm [--epochs N] [--samples N] [--eval N] [--batch N] [--lr F]
 *	       [--emb-lr F] [--dim N] [--threads N] [--seed N] [--quiet]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "examples/dlrm/train.h"

struct opts {
	int epochs;
	int64_t samples, eval;
	int batch, dim, threads;
	float lr, emb_lr;
	uint64_t seed;
	bool quiet;
};

static const char usage[] =
	"Usage: %s [options]\n"
	"  --epochs N    passes over the training samples (3)\n"
	"  --samples N   training samples (100000)\n"
	"  --eval N      held-out samples (a quarter of --samples)\n"
	"  --batch N     samples per step, over all ranks (1024)\n"
	"  --lr F        Adam's learning rate, dense layers (0.001)\n"
	"  --emb-lr F    Adagrad's learning rate, embeddings (0.2)\n"
	"  --dim N       embedding width (16)\n"
	"  --threads N   threads of the library and of the products\n"
	"                (0: the library's default, and one product thread)\n"
	"  --seed N      the data, the tables and the dense weights (1)\n"
	"  --quiet       only the result lines\n"
	"A whole number N may end in k (thousands) or M (millions).\n";

static double seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/*
 * The ranges of the options: wide enough for any run that fits in
 * memory, narrow enough that no product of them overflows (samples times
 * the ids of a sample in int64_t, a batch's slice times dim times 4 bytes
 * in size_t).  A log too large for the memory fails cleanly later.
 */
#define MAX_EPOCHS 10000
#define MAX_SAMPLES INT64_C(1000000000)
#define MAX_BATCH (1 << 20)
#define MAX_DIM 1024
#define MAX_THREADS 1024
#define MIN_LR 1e-12
#define MAX_LR 10.0

/*
 * A whole number in lo..hi, in decimal with an optional k (10^3) or M
 * (10^6) after it, into *v; else a message naming the option, and false.
 * Nothing else may follow the digits: atoi would read "1e6" as 1 and
 * "2x" as 2 without a word.
 */
static bool whole(const char *opt, const char *arg, long long lo,
		  long long hi, long long *v)
{
	char *end;
	long long x, scale = 1;

	errno = 0;
	x = strtoll(arg, &end, 10);
	if (*end == 'k' || *end == 'M')
		scale = *end++ == 'k' ? 1000 : 1000000;
	/* a digit first: strtoll would take spaces and a sign */
	if (arg[0] < '0' || arg[0] > '9' || *end || errno ||
	    x > hi / scale || x * scale < lo) {
		fprintf(stderr, "dlrm: --%s: '%s' is not a whole number in "
			"%lld..%lld\n", opt, arg, lo, hi);
		return false;
	}
	*v = x * scale;
	return true;
}

/* A finite real number in lo..hi into *v; else a message and false. */
static bool real(const char *opt, const char *arg, double lo, double hi,
		 float *v)
{
	char *end;
	double x;

	errno = 0;
	x = strtod(arg, &end);
	if (end == arg || *end || errno || !isfinite(x) || x < lo || x > hi) {
		fprintf(stderr, "dlrm: --%s: '%s' is not a number in %g..%g\n",
			opt, arg, lo, hi);
		return false;
	}
	*v = (float)x;
	return true;
}

/* Results of set_option() and parse() besides 0. */
enum { HELP = 1, UNKNOWN = -1, BAD_VALUE = -2 };

/* One option's value: 0, HELP, UNKNOWN (getopt said so), or BAD_VALUE
 * (said on stderr). */
static int set_option(struct opts *o, int c, const char *name,
		      const char *arg)
{
	long long v = 0;
	bool ok = true;

	switch (c) {
	case 'e':
		ok = whole(name, arg, 1, MAX_EPOCHS, &v);
		o->epochs = (int)v;
		break;
	case 's':
		ok = whole(name, arg, 1, MAX_SAMPLES, &v);
		o->samples = v;
		break;
	case 'v':
		ok = whole(name, arg, 1, MAX_SAMPLES, &v);
		o->eval = v;
		break;
	case 'b':
		ok = whole(name, arg, 1, MAX_BATCH, &v);
		o->batch = (int)v;
		break;
	case 'd':
		ok = whole(name, arg, 1, MAX_DIM, &v);
		o->dim = (int)v;
		break;
	case 't':
		ok = whole(name, arg, 0, MAX_THREADS, &v);
		o->threads = (int)v;
		break;
	case 'S':
		ok = whole(name, arg, 0, INT64_MAX, &v);
		o->seed = (uint64_t)v;
		break;
	case 'l':
		ok = real(name, arg, MIN_LR, MAX_LR, &o->lr);
		break;
	case 'L':
		ok = real(name, arg, MIN_LR, MAX_LR, &o->emb_lr);
		break;
	case 'q':
		o->quiet = true;
		break;
	case 'h':
		return HELP;
	default:
		return UNKNOWN;
	}
	return ok ? 0 : BAD_VALUE;
}

/* The command line into *o: 0, or as set_option(). */
static int parse(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
		{ "epochs", required_argument, NULL, 'e' },
		{ "samples", required_argument, NULL, 's' },
		{ "eval", required_argument, NULL, 'v' },
		{ "batch", required_argument, NULL, 'b' },
		{ "lr", required_argument, NULL, 'l' },
		{ "emb-lr", required_argument, NULL, 'L' },
		{ "dim", required_argument, NULL, 'd' },
		{ "threads", required_argument, NULL, 't' },
		{ "seed", required_argument, NULL, 'S' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	int c, i = -1, rc;

	*o = (struct opts){ .epochs = 3, .samples = 100000, .eval = 0,
			    .batch = 1024, .dim = 16, .lr = 1e-3f,
			    .emb_lr = 0.2f, .seed = 1 };
	while ((c = getopt_long(argc, argv, "h", lo, &i)) != -1) {
		/* i: the option's entry, for its full name in a message */
		rc = set_option(o, c, i >= 0 ? lo[i].name : "", optarg);
		if (rc)
			return rc;
		i = -1;
	}
	if (optind < argc) {
		fprintf(stderr, "dlrm: unexpected argument '%s'\n",
			argv[optind]);
		return UNKNOWN;
	}
	if (o->eval == 0)
		o->eval = o->samples / 4 > 0 ? o->samples / 4 : 1;
	return 0;
}

static int make_logs(const struct opts *o, const struct trainer *t,
		     struct click_log *train, struct click_log *heldout)
{
	/* held-out samples come after the training ones in the same log */
	struct log_spec sp = { o->seed, 0, o->samples, o->batch, t->rank,
			       t->world };

	if (click_log_make(train, &sp))
		return -1;
	sp.first = o->samples;
	sp.count = o->eval;
	return click_log_make(heldout, &sp);
}

static void print_setup(const struct opts *o, const struct trainer *t,
			const struct click_log *train)
{
	const struct net_shape *s = &t->net.shape;
	double clicks = 0;

	for (int64_t i = 0; i < train->n; i++)
		clicks += train->label[i];
	printf("dlrm: libshemb %s, %d rank%s\n", shemb_version_string(),
	       t->world, t->world > 1 ? "s" : "");
	printf("dlrm: %d tables of dim %d (Adagrad, lr %g):", DLRM_TABLES,
	       o->dim, o->emb_lr);
	for (int f = 0; f < DLRM_TABLES; f++)
		printf(" %s %lld%s", dlrm_features[f].name,
		       (long long)dlrm_features[f].rows,
		       dlrm_features[f].max_bag > 1 ? " (multi-hot)" : "");
	printf("\ndlrm: bottom MLP %d-%d-%d, %d dot products, top MLP "
	       "%d-%d-%d-%d (Adam, lr %g), %zu dense parameters\n",
	       s->bottom[0], s->bottom[1], s->bottom[2],
	       s->top[0] - s->dim, s->top[0], s->top[1], s->top[2], s->top[3],
	       o->lr, t->net.nparams);
	printf("dlrm: %lld training samples, %lld held out, batches of %d "
	       "(%d per rank), rank 0's click rate %.3f\n",
	       (long long)o->samples, (long long)o->eval, o->batch, t->cap,
	       train->n ? clicks / (double)train->n : 0.0);
}

static void print_epoch(int epoch, const struct eval *e, double train_loss,
			double rate)
{
	printf("epoch %d loss %.4f auc %.4f", epoch, e->loss, e->auc);
	if (epoch > 0)
		printf(" train_loss %.4f samples/s %.0f", train_loss, rate);
	printf("\n");
	fflush(stdout);
}

/* The epochs, each followed by an evaluation of the held-out log. */
static int run(const struct opts *o, struct trainer *t,
	       const struct click_log *train, const struct click_log *heldout)
{
	bool lead = t->rank == 0;
	double t0, el, total = 0, loss;
	struct eval e;
	int rc = evaluate(t, heldout, &e);

	if (rc)
		return rc;
	if (lead) {
		printf("oracle auc %.4f\n", e.oracle_auc);
		print_epoch(0, &e, 0, 0);
	}
	for (int epoch = 1; epoch <= o->epochs; epoch++) {
		t0 = seconds();
		rc = train_epoch(t, train, &loss);
		el = seconds() - t0;
		total += el;
		if (!rc)
			rc = evaluate(t, heldout, &e);
		if (rc)
			return rc;
		if (lead)
			print_epoch(epoch, &e, loss, (double)o->samples / el);
	}
	if (lead)
		printf("dlrm: trained on %.0f samples/s over %d epochs\n",
		       (double)o->samples * o->epochs / total, o->epochs);
	return 0;
}

/* With several ranks, that every rank ended with the same dense weights
 * (each applies the same averaged gradients to the same start). */
static int check_sync(struct trainer *t)
{
	bool same = false;
	int rc = dense_in_sync(t, &same);

	if (rc)
		return rc;
	if (!same) {
		fprintf(stderr, "dlrm: rank %d: the ranks' dense weights "
			"differ\n", t->rank);
		return -1;
	}
	if (t->rank == 0 && t->world > 1)
		printf("dlrm: dense weights identical on all %d ranks\n",
		       t->world);
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o;
	struct trainer t;
	struct click_log train = { 0 }, heldout = { 0 };
	struct train_opts to;
	int rc = parse(argc, argv, &o);

	if (rc) {
		if (rc != BAD_VALUE)
			fprintf(rc == HELP ? stdout : stderr, usage, argv[0]);
		return rc == HELP ? 0 : 2;
	}
	to = (struct train_opts){ o.threads, o.threads, o.batch, o.dim, o.lr,
				  o.emb_lr, o.seed };
	rc = trainer_init(&t, &to);
	if (!rc) {
		rc = make_logs(&o, &t, &train, &heldout);
		if (rc)
			fprintf(stderr, "dlrm: rank %d: out of memory for the "
				"click log\n", t.rank);
		/* one rank without its log must not leave the others
		 * waiting in the first lookup: all stop together */
		rc = ranks_agree(&t, rc);
	}
	if (!rc && t.rank == 0) {
		if (!o.quiet)
			print_setup(&o, &t, &train);
		printf("matmul %s\n", matmul_name(t.mm));
	}
	if (!rc)
		rc = run(&o, &t, &train, &heldout);
	if (!rc)
		rc = check_sync(&t);
	click_log_free(&train);
	click_log_free(&heldout);
	trainer_free(&t);
	return rc ? 1 : 0;
}
