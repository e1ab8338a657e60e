/*
 * zipf_train.c - a small training run with libshemb on a synthetic workload.
 *
 * Two features, "items" (1M rows x 64) and "users" (100k rows x 32), each a
 * table trained with Adagrad.  A sample holds a bag of about 20 ids of each
 * feature, drawn from a Zipf distribution (a few rows are hot, most are
 * rare, and the hot ones are scattered through the table).
 *
 * The answer is planted: every row has a hidden "true" embedding made from
 * a seeded hash, and the target of a sample is a fixed random projection of
 * the mean of its true rows.  The model is the same projection applied to
 * the mean of the learned rows, so training must pull the tables towards
 * the hidden ones; the loss is the mean squared error.  The program
 * computes the gradient of the pooled outputs itself, as a host framework
 * would, and hands it to shemb_backward.
 *
 * Usage: zipf_train [--steps N] [--threads N] [--seconds S] [--quiet]
 * Exits 1 when the loss did not fall below half of its starting value.
 *
 * The same program trains across ranks: `shemb-run -n 2 zipf_train`
 * spreads the tables over two processes (the context reads its rank from
 * the environment), each drawing batches of its own; every call that
 * touches the tables is then collective, so the ranks also agree on when
 * --seconds is up.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <shemb.h>

#define NFEAT 2
#define BATCH 2048          /* samples per step */
#define MAX_BAG 39          /* bag lengths 1 .. 39, 20 on average */
#define OUT 16              /* outputs of the projection */
#define IN 96               /* 64 + 32 pooled values */
#define NDATA 16            /* batches in the data set, used in turn */
#define NEVAL 4             /* of which these are evaluated */
#define LR 0.05f

struct feature {
	const char *name;
	int64_t rows;
	int dim, col;       /* col: where its values start in the input */
	double zipf_s;
	double *cdf;        /* rank -> cumulative probability */
	uint64_t mult;      /* rank -> row: r * mult mod rows, a bijection */
	shemb_table *table;
};

struct batch {
	int64_t *offsets[NFEAT];
	int64_t *ids[NFEAT];
	int64_t nids[NFEAT];
	float *target;      /* [BATCH][OUT] */
};

struct opts {
	long steps;
	int threads;
	double seconds;
	bool quiet;
};

static struct feature feats[NFEAT] = {
	{ "items", 1 << 20, 64, 0, 1.05, NULL, 0, NULL },
	{ "users", 100000, 32, 64, 1.2, NULL, 0, NULL },
};

static float proj[OUT][IN];   /* the fixed projection */

/* ---- random numbers ---- */

static uint64_t mix64(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double unit(uint64_t *state)
{
	*state += 0x9e3779b97f4a7c15ull;
	return (double)(mix64(*state) >> 11) * 0x1p-53;
}

/* The hidden embedding: value c of row `row` of feature f, in [-1, 1). */
static float truth(int f, int64_t row, int c)
{
	uint64_t h = mix64(mix64(((uint64_t)f << 56) ^ (uint64_t)row) + c);

	return (float)((double)(h >> 11) * 0x1p-52 - 1.0);
}

static double seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- the workload ---- */

static uint64_t gcd(uint64_t a, uint64_t b)
{
	while (b) {
		uint64_t t = a % b;

		a = b;
		b = t;
	}
	return a;
}

static int zipf_init(struct feature *f)
{
	double sum = 0;

	f->cdf = malloc((size_t)f->rows * sizeof(double));
	if (!f->cdf)
		return -1;
	for (int64_t r = 0; r < f->rows; r++) {
		sum += pow((double)(r + 1), -f->zipf_s);
		f->cdf[r] = sum;
	}
	for (int64_t r = 0; r < f->rows; r++)
		f->cdf[r] /= sum;
	/* any multiplier coprime with rows permutes the rows */
	f->mult = 0x9e3779b97f4a7c15ull % (uint64_t)f->rows;
	while (gcd(f->mult, (uint64_t)f->rows) != 1)
		f->mult++;
	return 0;
}

static int64_t zipf_row(const struct feature *f, uint64_t *rng)
{
	double u = unit(rng);
	int64_t lo = 0, hi = f->rows - 1;

	while (lo < hi) {
		int64_t mid = lo + (hi - lo) / 2;

		if (f->cdf[mid] < u)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (int64_t)(((unsigned __int128)lo * f->mult) % (uint64_t)f->rows);
}

/* Bags of one feature, and the sum of their true rows into x[b][col..]. */
static int make_bags(struct batch *bt, int fi, uint64_t *rng, float *x)
{
	const struct feature *f = &feats[fi];
	int64_t *off = malloc((BATCH + 1) * sizeof(*off));
	int64_t *ids = malloc((size_t)BATCH * MAX_BAG * sizeof(*ids));
	int64_t n = 0;

	if (!off || !ids)
		return -1;
	for (int b = 0; b < BATCH; b++) {
		int len = 1 + (int)(unit(rng) * MAX_BAG);
		float *xb = x + (size_t)b * IN + f->col;

		off[b] = n;
		for (int k = 0; k < len; k++, n++) {
			ids[n] = zipf_row(f, rng);
			for (int c = 0; c < f->dim; c++)
				xb[c] += truth(fi, ids[n], c) / (float)len;
		}
	}
	off[BATCH] = n;
	bt->offsets[fi] = off;
	bt->ids[fi] = ids;
	bt->nids[fi] = n;
	return 0;
}

/* y[b] = proj x[b] */
static void project(const float *x, float *y)
{
	for (int b = 0; b < BATCH; b++)
		for (int o = 0; o < OUT; o++) {
			float s = 0;

			for (int i = 0; i < IN; i++)
				s += proj[o][i] * x[(size_t)b * IN + i];
			y[(size_t)b * OUT + o] = s;
		}
}

static int make_batch(struct batch *bt, uint64_t seed)
{
	float *x = calloc((size_t)BATCH * IN, sizeof(*x));
	uint64_t rng = mix64(seed);
	int rc = 0;

	bt->target = malloc((size_t)BATCH * OUT * sizeof(float));
	if (!x || !bt->target)
		rc = -1;
	for (int f = 0; !rc && f < NFEAT; f++)
		rc = make_bags(bt, f, &rng, x);
	if (!rc)
		project(x, bt->target);
	free(x);
	return rc;
}

static void free_batch(struct batch *bt)
{
	for (int f = 0; f < NFEAT; f++) {
		free(bt->offsets[f]);
		free(bt->ids[f]);
	}
	free(bt->target);
}

static void init_proj(void)
{
	uint64_t rng = 42;

	for (int o = 0; o < OUT; o++)
		for (int i = 0; i < IN; i++)
			proj[o][i] = (float)((unit(&rng) * 2 - 1) *
					     sqrt(3.0 / IN));
}

/* ---- the model ---- */

struct model {
	shemb_ctx *ctx;
	int rank, world;
	struct shemb_bags bags[NFEAT];
	float *out[NFEAT];      /* pooled rows, [BATCH][dim] */
	float *grad[NFEAT];     /* their gradients */
	float *err;             /* [BATCH][OUT]: prediction - target */
};

static void set_bags(struct model *m, const struct batch *bt)
{
	for (int f = 0; f < NFEAT; f++) {
		struct shemb_bags *b = &m->bags[f];

		shemb_bags_init(b);
		b->table = feats[f].table;
		b->pooling = SHEMB_POOL_MEAN;
		b->dim = feats[f].dim;
		b->nbags = BATCH;
		b->offsets = bt->offsets[f];
		b->nids = bt->nids[f];
		b->ids = bt->ids[f];
	}
}

/* Forward of the dense part; returns the loss, leaves the error. */
static double forward(struct model *m, const struct batch *bt)
{
	double loss = 0;

	for (int b = 0; b < BATCH; b++) {
		for (int o = 0; o < OUT; o++) {
			float s = 0, e;

			for (int f = 0; f < NFEAT; f++) {
				const float *p = m->out[f] +
						 (size_t)b * feats[f].dim;

				for (int c = 0; c < feats[f].dim; c++)
					s += proj[o][feats[f].col + c] * p[c];
			}
			e = s - bt->target[(size_t)b * OUT + o];
			m->err[(size_t)b * OUT + o] = e;
			loss += (double)e * e;
		}
	}
	return loss / (BATCH * OUT);
}

/* d loss / d pooled = proj^T * 2 (prediction - target) / (BATCH * OUT) */
static void backward_dense(struct model *m)
{
	const float k = 2.0f / (BATCH * OUT);

	for (int f = 0; f < NFEAT; f++) {
		int dim = feats[f].dim, col = feats[f].col;

		for (int b = 0; b < BATCH; b++) {
			float *g = m->grad[f] + (size_t)b * dim;
			const float *e = m->err + (size_t)b * OUT;

			for (int c = 0; c < dim; c++) {
				float s = 0;

				for (int o = 0; o < OUT; o++)
					s += proj[o][col + c] * e[o];
				g[c] = k * s;
			}
		}
	}
}

static int check(struct model *m, int rc, const char *what)
{
	if (rc)
		fprintf(stderr, "zipf_train: %s: %s: %s\n", what,
			shemb_strerror(rc), shemb_ctx_last_error(m->ctx));
	return rc;
}

/* One training step: lookup, dense forward and backward, sparse update. */
static int train_step(struct model *m, const struct batch *bt, double *loss)
{
	int rc;

	set_bags(m, bt);
	rc = check(m, shemb_lookup(m->ctx, NFEAT, m->bags, m->out, 0),
		   "shemb_lookup");
	if (rc)
		return rc;
	*loss = forward(m, bt);
	backward_dense(m);
	return check(m, shemb_backward(m->ctx, NFEAT, m->bags,
				       (const float *const *)m->grad),
		     "shemb_backward");
}

/* Mean loss over the first NEVAL batches, without training. */
static int evaluate(struct model *m, const struct batch *data, double *loss)
{
	*loss = 0;
	for (int i = 0; i < NEVAL; i++) {
		int rc;

		set_bags(m, &data[i]);
		rc = check(m, shemb_lookup(m->ctx, NFEAT, m->bags, m->out,
					   SHEMB_LOOKUP_NO_GRAD),
			   "shemb_lookup");
		if (rc)
			return rc;
		*loss += forward(m, &data[i]) / NEVAL;
	}
	return 0;
}

static int create_tables(struct model *m)
{
	for (int f = 0; f < NFEAT; f++) {
		struct shemb_table_attr a;
		int rc;

		shemb_table_attr_init(&a);
		a.name = feats[f].name;
		a.rows = feats[f].rows;
		a.dim = feats[f].dim;
		a.optimizer = SHEMB_OPT_ADAGRAD;
		a.lr = LR;
		rc = shemb_table_create(m->ctx, &a, &feats[f].table);
		if (check(m, rc, "shemb_table_create"))
			return rc;
	}
	return 0;
}

static int model_init(struct model *m, int threads)
{
	struct shemb_ctx_attr ca;
	int rc;

	memset(m, 0, sizeof(*m));
	shemb_ctx_attr_init(&ca);
	ca.nthreads = threads;
	rc = shemb_ctx_create(&ca, &m->ctx);
	if (rc) {
		fprintf(stderr, "zipf_train: shemb_ctx_create: %s\n",
			shemb_ctx_last_error(NULL));
		return rc;
	}
	shemb_ctx_get_attr(m->ctx, &ca);
	m->rank = ca.rank;
	m->world = ca.world_size;
	for (int f = 0; f < NFEAT; f++) {
		size_t bytes = (size_t)BATCH * feats[f].dim * sizeof(float);

		m->out[f] = malloc(bytes);
		m->grad[f] = malloc(bytes);
		if (!m->out[f] || !m->grad[f])
			return SHEMB_ENOMEM;
	}
	m->err = malloc((size_t)BATCH * OUT * sizeof(float));
	if (!m->err)
		return SHEMB_ENOMEM;
	return create_tables(m);
}

static void model_free(struct model *m)
{
	shemb_ctx_destroy(m->ctx);  /* and its tables */
	for (int f = 0; f < NFEAT; f++) {
		free(m->out[f]);
		free(m->grad[f]);
	}
	free(m->err);
}

/* ---- progress and summary ---- */

struct progress {
	bool tty, quiet;
	long steps;
	double t0, last;
	int64_t ids;        /* looked up so far, both features */
};

static void show_bar(const struct progress *p, long step, double loss,
		     double el)
{
	int width = 30, fill = (int)((double)width * step / p->steps);

	printf("\r[%.*s%*s] %3ld%%  loss %.5f  %6.1f steps/s  %5.2f Mrows/s",
	       fill, "##############################", width - fill, "",
	       100 * step / p->steps, loss, step / el, p->ids / el / 1e6);
	fflush(stdout);
}

static void progress(struct progress *p, long step, double loss)
{
	double now = seconds(), el = now - p->t0;
	long every = p->steps >= 10 ? p->steps / 10 : 1;

	if (p->quiet || el <= 0)
		return;
	if (p->tty && (now - p->last >= 0.1 || step == p->steps)) {
		show_bar(p, step, loss, el);
		p->last = now;
	} else if (!p->tty && (step % every == 0 || step == p->steps)) {
		printf("step %ld/%ld  loss %.5f  %.1f steps/s  %.2f Mrows/s\n",
		       step, p->steps, loss, step / el, p->ids / el / 1e6);
	}
}

static void print_table_stats(const struct feature *f)
{
	struct shemb_table_stats s = { .size = sizeof(s) };

	if (shemb_table_stats(f->table, &s))
		return;
	printf("  table '%s' (%lld x %d, adagrad): %llu ids looked up, "
	       "%llu row updates (%.1f%% of the ids)\n", f->name,
	       (long long)f->rows, f->dim, (unsigned long long)s.ids,
	       (unsigned long long)s.rows_updated,
	       s.ids ? 100.0 * (double)s.rows_updated / (double)s.ids : 0.0);
	printf("    library time, s: validate %.3f  plan %.3f  pool %.3f  "
	       "update %.3f\n", s.validate_ns * 1e-9, s.plan_ns * 1e-9,
	       s.pool_ns * 1e-9, s.update_ns * 1e-9);
}

static void summary(const struct progress *p, long steps, double el,
		    double start, double end)
{
	printf("zipf_train: %ld steps of %d samples in %.2f s: %.1f steps/s, "
	       "lookups %.2f Mrows/s\n", steps, BATCH, el, steps / el,
	       p->ids / el / 1e6);
	printf("  loss (mean squared error over %d of the batches): start "
	       "%.5f, end %.5f (%.1f%% of start)\n", NEVAL, start, end,
	       100.0 * end / start);
	for (int f = 0; f < NFEAT; f++)
		print_table_stats(&feats[f]);
}

/* ---- main ---- */

static int parse(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
		{ "steps", required_argument, NULL, 's' },
		{ "threads", required_argument, NULL, 't' },
		{ "seconds", required_argument, NULL, 'S' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	int c;

	*o = (struct opts){ 600, 0, 20.0, false };
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		if (c == 's')
			o->steps = atol(optarg);
		else if (c == 't')
			o->threads = atoi(optarg);
		else if (c == 'S')
			o->seconds = atof(optarg);
		else if (c == 'q')
			o->quiet = true;
		else
			return c == 'h' ? 1 : -1;
	}
	if (o->steps < 1 || o->threads < 0 || !(o->seconds > 0))
		return -1;
	return 0;
}

/* Every rank draws batches of its own. */
static int make_data(struct batch *data, int rank)
{
	init_proj();
	for (int f = 0; f < NFEAT; f++)
		if (zipf_init(&feats[f]))
			return -1;
	for (int i = 0; i < NDATA; i++)
		if (make_batch(&data[i], 1000 + (uint64_t)i +
					       1000003 * (uint64_t)rank))
			return -1;
	return 0;
}

/* Whether any rank's time is up: with several ranks they must stop at
 * the same step, since every step is collective. */
static bool time_up(const struct model *m, bool mine)
{
	int64_t v = mine;

	if (m->world > 1 && shemb_allreduce(m->ctx, &v, &v, 1, SHEMB_I64,
					    SHEMB_REDUCE_MAX, NULL))
		return true;
	return v != 0;
}

/* Train until o->steps or o->seconds; *done gets the steps made. */
static int train(struct model *m, const struct batch *data,
		 const struct opts *o, struct progress *p, long *done)
{
	for (*done = 0; *done < o->steps;) {
		const struct batch *bt = &data[*done % NDATA];
		double loss;
		int rc = train_step(m, bt, &loss);

		if (rc)
			return rc;
		++*done;
		p->ids += bt->nids[0] + bt->nids[1];
		progress(p, *done, loss);
		if (time_up(m, seconds() - p->t0 > o->seconds))
			break;
	}
	if (p->tty && !p->quiet)
		putchar('\n');
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o;
	struct model m;
	struct batch data[NDATA];
	struct progress p;
	double start, end, el;
	long done = 0;
	int rc = parse(argc, argv, &o);

	if (rc) {
		fprintf(rc > 0 ? stdout : stderr, "Usage: %s [--steps N] "
			"[--threads N] [--seconds S] [--quiet]\n", argv[0]);
		return rc > 0 ? 0 : 2;
	}
	memset(data, 0, sizeof(data));
	if (model_init(&m, o.threads) || make_data(data, m.rank)) {
		fprintf(stderr, "zipf_train: setup failed\n");
		return 1;
	}
	memset(&p, 0, sizeof(p));
	p.tty = isatty(STDOUT_FILENO);
	p.quiet = o.quiet;
	p.steps = o.steps;
	rc = evaluate(&m, data, &start);
	p.t0 = seconds();
	if (!rc)
		rc = train(&m, data, &o, &p, &done);
	el = seconds() - p.t0;
	if (!rc)
		rc = evaluate(&m, data, &end);
	if (!rc) {
		summary(&p, done, el, start, end);
		if (!(end < 0.5 * start)) {
			fprintf(stderr, "zipf_train: the loss did not fall "
				"below half of its start\n");
			rc = 1;
		}
	}
	model_free(&m);
	for (int i = 0; i < NDATA; i++)
		free_batch(&data[i]);
	for (int f = 0; f < NFEAT; f++)
		free(feats[f].cdf);
	return rc ? 1 : 0;
}
