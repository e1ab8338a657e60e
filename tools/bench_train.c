/*
 * bench_train.c - shemb-bench train: starts the ranks of each rank count
 * with shemb-run, reads what rank 0 reports (bench_train.h) and prints
 * steps per second and bytes per step of libshemb's exchange and of the
 * two baselines, their ratios, and the load balance of a skewed table.
 */
#define _GNU_SOURCE
#include "config.h"
#include "tools/bench_train.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shemb.h"
#include "tools/bench_comm.h"
#include "tools/bench_util.h"

#define MAX_RANKS 8
#define MAX_STEPS 4096

const char bench_train_usage[] =
"Options of train (a training step loop over N local ranks: libshemb's\n"
"sharded exchange against dense AllReduce and AllGather baselines):\n"
"  -n, --ranks LIST    rank counts (default 2,4)\n"
"  --provider P        libfabric provider: shm or tcp (default shm)\n"
"  --steps N           timed steps per mode and pass (default 5)\n"
"  --passes N          passes, the modes in rotating order (default 2)\n"
"  --batch N           bags per table and rank (default 2048)\n"
"  --scale N           divide every table's rows by N (default 1)\n"
"  --deterministic     libshemb's deterministic mode\n"
"  --wire T            libshemb's rows and gradients between ranks: f32\n"
"                      (default), bf16 or f16\n"
"  --pool-at W         where libshemb pools SUM bags: auto (default),\n"
"                      requester or owner\n"
"  --timeout SECONDS   limit of each rank count's job (default 600)\n"
"  --shemb-run PATH    the launcher (default: next to this program)\n"
"  --csv FILE          append one line per rank count and exchange\n";

struct result {
	double t[TRAIN_NMODES][MAX_STEPS], bytes[TRAIN_NMODES][MAX_STEPS];
	double recv[TRAIN_NMODES][MAX_STEPS];
	int n[TRAIN_NMODES];
	double bal_max[2], bal_mean[2];
	bool have_bal[2];
	char plan[2048];
};

struct topts {
	int64_t ranks[MAX_RANKS];
	int nranks;
	const char *provider, *shemb_run;
	char pass[16][32]; /* options handed to the ranks */
	int npass;
	double timeout;
	/* what the CSV lines say of the run: the ranks' options */
	const char *csv, *steps, *passes, *batch, *scale, *wire, *pool_at;
	bool deterministic;
	FILE *csv_file;
};

static int mode_of(const char *name)
{
	for (int m = 0; m < TRAIN_NMODES; m++)
		if (!strcmp(name, train_mode_names[m]))
			return m;
	return -1;
}

static void read_line(struct result *res, const char *line)
{
	const char *at = strstr(line, TRAIN_TAG " ");
	char a[64];
	double x, y, z;
	int m;

	if (!at)
		return;
	at += strlen(TRAIN_TAG " ");
	if (!strncmp(at, "plan ", 5)) {
		size_t used = strlen(res->plan);

		snprintf(res->plan + used, sizeof(res->plan) - used,
			 "    %s\n", at + 5);
	} else if (sscanf(at, "step %63s %lf %lf %lf", a, &x, &y, &z) == 4) {
		m = mode_of(a);
		if (m >= 0 && res->n[m] < MAX_STEPS) {
			res->t[m][res->n[m]] = x;
			res->recv[m][res->n[m]] = z;
			res->bytes[m][res->n[m]++] = y;
		}
	} else if (sscanf(at, "balance %63s %lf %lf", a, &x, &y) == 3) {
		int k = !strcmp(a, "column-wise");

		res->bal_max[k] = x;
		res->bal_mean[k] = y;
		res->have_bal[k] = true;
	}
}

static int run_ranks(const struct topts *o, int64_t n, struct result *res)
{
	char *argv[32], num[32], tmo[32];
	struct comm_buf out = { 0 }, err = { 0 };
	char *save = NULL;
	int k = 0, rc;

	snprintf(num, sizeof(num), "%lld", (long long)n);
	snprintf(tmo, sizeof(tmo), "%.0f", o->timeout);
	argv[k++] = (char *)o->shemb_run;
	argv[k++] = (char *)"-n";
	argv[k++] = num;
	argv[k++] = (char *)"--provider";
	argv[k++] = (char *)o->provider;
	argv[k++] = (char *)"--timeout";
	argv[k++] = tmo;
	argv[k++] = (char *)comm_self_exe();
	argv[k++] = (char *)"train-rank";
	for (int i = 0; i < o->npass; i++)
		argv[k++] = (char *)o->pass[i];
	argv[k] = NULL;
	memset(res, 0, sizeof(*res));
	rc = comm_run(argv, o->timeout + 10, &out, &err);
	for (char *l = out.p ? strtok_r(out.p, "\n", &save) : NULL; l;
	     l = strtok_r(NULL, "\n", &save))
		read_line(res, l);
	if (rc)
		fprintf(stderr, "shemb-bench train: %lld ranks: exit %d\n%s",
			(long long)n, rc, err.p ? err.p : "");
	comm_buf_free(&out);
	comm_buf_free(&err);
	return rc;
}

/* ---- report ---- */

static double median(const double *v, int n)
{
	double *c = malloc((size_t)(n + 1) * sizeof(double));
	struct bench_stat s;

	memcpy(c, v, (size_t)n * sizeof(double));
	s = bench_stat_of(c, n);
	free(c);
	return s.median;
}

struct figures {
	double step_s[TRAIN_NMODES], bytes[TRAIN_NMODES], recv[TRAIN_NMODES];
	double imbalance[2];
};

static int report(int64_t n, const struct result *res, struct figures *f)
{
	printf("\n== %lld ranks\n", (long long)n);
	printf("  plans (libshemb's SHARD_AUTO):\n%s", res->plan);
	printf("  %-10s %10s %9s %10s %10s   %s\n", "mode", "step ms",
	       "steps/s", "MB sent", "MB recv", "libshemb/this");
	for (int m = 0; m < TRAIN_NMODES; m++) {
		if (res->n[m] == 0) {
			fprintf(stderr, "shemb-bench train: no %s steps\n",
				train_mode_names[m]);
			return 1;
		}
		f->step_s[m] = median(res->t[m], res->n[m]);
		f->bytes[m] = median(res->bytes[m], res->n[m]);
		f->recv[m] = median(res->recv[m], res->n[m]);
	}
	for (int m = 0; m < TRAIN_NMODES; m++)
		printf("  %-10s %10.2f %9.2f %10.3f %10.3f   bytes %.4f   "
		       "steps/s %.2f\n", train_mode_names[m],
		       f->step_s[m] * 1e3, 1.0 / f->step_s[m],
		       f->bytes[m] / 1048576.0, f->recv[m] / 1048576.0,
		       f->bytes[TRAIN_OURS] / f->bytes[m],
		       f->step_s[m] / f->step_s[TRAIN_OURS]);
	printf("  (MB: 2^20 bytes a rank sent and received per step)\n");
	for (int k = 0; k < 2; k++) {
		f->imbalance[k] = res->have_bal[k] && res->bal_mean[k] > 0
					  ? res->bal_max[k] / res->bal_mean[k]
					  : 0.0;
		printf("  Zipf 1.2 table %s: bytes per rank max/mean %.3f, "
		       "mean %.2f MB\n", k ? "column-wise" : "row-wise   ",
		       f->imbalance[k], res->bal_mean[k] / 1048576.0);
	}
	return 0;
}

/* ---- CSV ---- */

static const char train_csv_header[] =
	"mode,provider,ranks,batch,scale,steps,passes,wire,pool_at,"
	"deterministic,exchange,step_ms,steps_per_s,sent_bytes_per_rank,"
	"recv_bytes_per_rank,libshemb_step_ms,libshemb_sent_bytes_per_rank,"
	"libshemb_speedup,libshemb_bytes_ratio,rowwise_imbalance,"
	"colwise_imbalance";

/* One line per exchange, each with libshemb's figures beside it. */
static void write_csv(const struct topts *o, int64_t n,
		      const struct figures *f)
{
	FILE *c = o->csv_file;

	for (int m = 0; c && m < TRAIN_NMODES; m++) {
		bench_csv_begin(c, "train");
		bench_csv_str(c, o->provider);
		bench_csv_int(c, n);
		bench_csv_str(c, o->batch);
		bench_csv_str(c, o->scale);
		bench_csv_str(c, o->steps);
		bench_csv_str(c, o->passes);
		bench_csv_str(c, o->wire);
		bench_csv_str(c, o->pool_at);
		bench_csv_int(c, o->deterministic);
		bench_csv_str(c, train_mode_names[m]);
		bench_csv_num(c, f->step_s[m] * 1e3);
		bench_csv_num(c, 1.0 / f->step_s[m]);
		bench_csv_int(c, llround(f->bytes[m]));
		bench_csv_int(c, llround(f->recv[m]));
		bench_csv_num(c, f->step_s[TRAIN_OURS] * 1e3);
		bench_csv_int(c, llround(f->bytes[TRAIN_OURS]));
		bench_csv_num(c, f->step_s[m] / f->step_s[TRAIN_OURS]);
		bench_csv_num(c, f->bytes[TRAIN_OURS] / f->bytes[m]);
		bench_csv_num(c, f->imbalance[0]);
		bench_csv_num(c, f->imbalance[1]);
		bench_csv_end(c);
	}
}

static void results(const struct figures *f)
{
	printf("\nresult bytes_vs_dense_allreduce %.4f\n",
	       f->bytes[TRAIN_OURS] / f->bytes[TRAIN_DENSE]);
	printf("result bytes_vs_allgather %.4f\n",
	       f->bytes[TRAIN_OURS] / f->bytes[TRAIN_ALLGATHER]);
	printf("result steps_vs_dense_allreduce %.4f\n",
	       f->step_s[TRAIN_DENSE] / f->step_s[TRAIN_OURS]);
	printf("result steps_vs_allgather %.4f\n",
	       f->step_s[TRAIN_ALLGATHER] / f->step_s[TRAIN_OURS]);
	printf("result colwise_imbalance %.4f\n", f->imbalance[1]);
	printf("result rowwise_imbalance %.4f\n", f->imbalance[0]);
}

/* ---- options ---- */

static void pass_opt(struct topts *o, const char *name, const char *val)
{
	snprintf(o->pass[o->npass++], sizeof(o->pass[0]), "%s", name);
	if (val)
		snprintf(o->pass[o->npass++], sizeof(o->pass[0]), "%s", val);
}

static const struct option train_long[] = {
	{ "ranks", required_argument, NULL, 'n' },
	{ "provider", required_argument, NULL, 'P' },
	{ "steps", required_argument, NULL, 's' },
	{ "passes", required_argument, NULL, 'p' },
	{ "batch", required_argument, NULL, 'b' },
	{ "scale", required_argument, NULL, 'c' },
	{ "deterministic", no_argument, NULL, 'd' },
	{ "wire", required_argument, NULL, 'w' },
	{ "pool-at", required_argument, NULL, 'a' },
	{ "timeout", required_argument, NULL, 't' },
	{ "shemb-run", required_argument, NULL, 'R' },
	{ "csv", required_argument, NULL, 'C' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 }
};

/* What the ranks run with when not told: bench_train_rank.c's
 * defaults, for the CSV lines. */
static void defaults(struct topts *o)
{
	memset(o, 0, sizeof(*o));
	o->ranks[0] = 2;
	o->ranks[1] = 4;
	o->nranks = 2;
	o->provider = "shm";
	o->timeout = 600;
	o->steps = "5";
	o->passes = "2";
	o->batch = "2048";
	o->scale = "1";
	o->wire = "f32";
	o->pool_at = "auto";
}

/* An option handed to the ranks, kept for the CSV lines too. */
static int pass_count(struct topts *o, int c, const char *arg)
{
	static const char *const pass_names[] = {
		['s'] = "--steps", ['p'] = "--passes", ['b'] = "--batch",
		['c'] = "--scale",
	};
	const char **keep = c == 's' ? &o->steps : c == 'p' ? &o->passes :
			    c == 'b' ? &o->batch : &o->scale;
	char plain[24];
	int64_t v;

	/* a k, M or G suffix as the other modes take; the ranks get the
	 * plain number */
	if (comm_parse_count(arg, 1, INT32_MAX, &v))
		return -1;
	snprintf(plain, sizeof(plain), "%lld", (long long)v);
	pass_opt(o, pass_names[c], plain);
	*keep = o->pass[o->npass - 1];
	return 0;
}

static int apply(void *opts, int c, const char *arg)
{
	struct topts *o = opts;

	switch (c) {
	case 'n':
		o->nranks = comm_parse_list(arg, 1, MAX_RANKS, o->ranks,
					    MAX_RANKS);
		if (o->nranks < 1)
			return -1;
		break;
	case 'P':
		o->provider = !strcmp(arg, "tcp") ? "tcp;ofi_rxm" : arg;
		break;
	case 's':
	case 'p':
	case 'b':
	case 'c':
		if (pass_count(o, c, arg))
			return -1;
		break;
	case 'd':
		pass_opt(o, "--deterministic", NULL);
		o->deterministic = true;
		break;
	case 'w':
		if (strcmp(arg, "f32") && strcmp(arg, "bf16") &&
		    strcmp(arg, "f16"))
			return -1;
		pass_opt(o, "--wire", arg);
		o->wire = arg;
		break;
	case 'a':
		if (strcmp(arg, "auto") && strcmp(arg, "owner") &&
		    strcmp(arg, "requester"))
			return -1;
		pass_opt(o, "--pool-at", arg);
		o->pool_at = arg;
		break;
	case 't':
		o->timeout = atof(arg);
		break;
	case 'R':
		o->shemb_run = arg;
		break;
	case 'C':
		o->csv = arg;
		break;
	default:
		return -1;
	}
	return 0;
}

static void help(void)
{
	fputs(bench_train_usage, stdout);
}

static int refused(const char *why)
{
	fprintf(stderr, "shemb-bench train: %s\n", why);
	return -1;
}

static int parse(int argc, char **argv, struct topts *o)
{
	defaults(o);
	if (bench_parse_opts(argc, argv, train_long, apply, o, help))
		return -1;
	if (!o->shemb_run)
		o->shemb_run = comm_find_sibling("shemb-run");
	if (!o->shemb_run)
		return refused("no shemb-run next to this program (give "
			       "--shemb-run PATH)");
	if (!(o->timeout > 0))
		return refused("--timeout must be above 0");
	return 0;
}

int bench_train(int argc, char **argv)
{
	struct result *res = malloc(sizeof(*res));
	struct figures f;
	struct topts o;
	int rc = 0;

	memset(&f, 0, sizeof(f));
	if (!res || parse(argc, argv, &o)) {
		fprintf(stderr, "%s", bench_train_usage);
		free(res);
		return 2;
	}
	if (o.csv && !(o.csv_file = bench_csv_open(o.csv, train_csv_header,
						   "shemb-bench train"))) {
		free(res);
		return 2;
	}
	comm_adopt_orphans();
	printf("shemb-bench train: libshemb %s, provider %s\n",
	       shemb_version_string(), o.provider);
	printf("  model   4 tables, SUM pooling, SGD: 2M x 64 (Zipf 1.05, 16 "
	       "ids a bag), 200k x 64\n          (Zipf 1.2, 8), 1M x 32 "
	       "(uniform, 8), 1000 x 16 (uniform, 4); rows / scale\n");
	printf("  modes   libshemb: sharded tables (SHARD_AUTO), one "
	       "exchange per lookup and backward;\n          dense: replicas, "
	       "shemb_allreduce of every table's full gradient;\n"
	       "          allgather: replicas, shemb_allgatherv of every "
	       "(id, gradient row) occurrence\n");
	printf("  figures median over timed steps of the slowest rank's step "
	       "time; bytes a rank\n          sends per step, mean over "
	       "ranks\n");
	bench_progress_plan(o.nranks);
	for (int i = 0; !rc && i < o.nranks; i++) {
		bench_progress_next();
		bench_progress("train: %lld ranks, every exchange",
			       (long long)o.ranks[i]);
		rc = run_ranks(&o, o.ranks[i], res);
		bench_progress_done();
		if (!rc)
			rc = report(o.ranks[i], res, &f);
		if (!rc)
			write_csv(&o, o.ranks[i], &f);
	}
	if (!rc)
		results(&f); /* of the last rank count */
	if (bench_csv_close(o.csv_file, o.csv, "shemb-bench train"))
		rc = -1;
	free(res);
	return rc ? 1 : 0;
}
