/*
 * bench_comm.c - shemb-bench comm: libshemb's collectives between ranks
 * against OpenMPI and raw libfabric, side by side in one run.
 *
 * For each provider, every measurement runs as a job of its own (see
 * bench_comm.h), bounded in time and reaped: the raw libfabric stream,
 * then for each rank count the libshemb job and the OpenMPI job.  The
 * whole sweep runs --passes times, the two jobs of a rank count in
 * alternating order, and the repetitions of all passes are pooled, so
 * that drift of the shared machine hits libshemb and OpenMPI alike.
 * bench_comm_report.c prints what was measured.
 */
#define _GNU_SOURCE
#include "config.h"
#include "tools/bench_comm.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shemb.h"
#include "tools/bench_util.h"

#ifndef BENCH_MPIRUN
#define BENCH_MPIRUN "mpirun"
#endif

static const char *const prov_names[2] = { "shm", "tcp;ofi_rxm" };

const char bench_comm_usage[] =
"Options of comm (libshemb's alltoallv and allreduce between ranks, side\n"
"by side with OpenMPI's MPI_Alltoallv and raw libfabric streaming):\n"
"  --ranks LIST        rank counts (default 2,4)\n"
"  --sizes LIST        bytes each rank sends per alltoallv, split evenly\n"
"                      over the other ranks; also the allreduce size\n"
"                      (default 1M,16M,64M)\n"
"  --provider P        shm, tcp (tcp;ofi_rxm) or both (default both)\n"
"  --reps N            timed repetitions per size and pass (default: as\n"
"                      many as move 512 MiB, 10 to 200)\n"
"  --passes N          sweeps, libshemb and OpenMPI in alternating order;\n"
"                      repetitions of all passes are pooled (default 2)\n"
"  --back-to-back K    K calls in a row after each barrier, timed together\n"
"                      (a call's time: a K-th of theirs, which spreads how\n"
"                      far apart the ranks leave the barrier over K calls;\n"
"                      default 1); the default reps then move 512 MiB\n"
"                      in K times fewer repetitions\n"
"  --chunk BYTES       libshemb's chunk_bytes (default: the library's)\n"
"  --in-flight N       libshemb's chunks_in_flight (default: the library's)\n"
"  --progress MODE     libshemb's progress: thread or caller\n"
"  --split             also time the start of each libshemb alltoallv\n"
"  --raw-msg BYTES     raw stream message size (default 1M)\n"
"  --raw-total BYTES   raw stream bytes per iteration (default 64M)\n"
"  --raw-iters N       raw stream timed iterations, each time it runs (once\n"
"                      before each rank count's jobs, each pass; default 5)\n"
"  --no-mpi            skip OpenMPI\n"
"  --shemb-run PATH    the launcher (default: next to this program)\n"
"  --mpi-bench PATH    the MPI program (default: shemb-bench-mpi next to\n"
"                      this program, else where it is installed)\n"
"  --mpirun PATH       OpenMPI's launcher (default: found by configure)\n"
"  --timeout SECONDS   limit of each job (default 300)\n"
"  --csv FILE          append one line per provider, rank count and size\n";

/* ---- options ---- */

enum {
	C_RANKS = 256, C_SIZES, C_PROVIDER, C_REPS, C_PASSES, C_CHUNK,
	C_PROGRESS, C_SPLIT, C_RAW_MSG, C_RAW_TOTAL, C_RAW_ITERS, C_NO_MPI,
	C_SHEMB_RUN, C_MPI_BENCH, C_MPIRUN, C_TIMEOUT, C_CSV, C_IN_FLIGHT,
	C_BURST
};

static const struct option comm_long[] = {
	{ "ranks", required_argument, NULL, C_RANKS },
	{ "sizes", required_argument, NULL, C_SIZES },
	{ "provider", required_argument, NULL, C_PROVIDER },
	{ "reps", required_argument, NULL, C_REPS },
	{ "passes", required_argument, NULL, C_PASSES },
	{ "back-to-back", required_argument, NULL, C_BURST },
	{ "chunk", required_argument, NULL, C_CHUNK },
	{ "in-flight", required_argument, NULL, C_IN_FLIGHT },
	{ "progress", required_argument, NULL, C_PROGRESS },
	{ "split", no_argument, NULL, C_SPLIT },
	{ "raw-msg", required_argument, NULL, C_RAW_MSG },
	{ "raw-total", required_argument, NULL, C_RAW_TOTAL },
	{ "raw-iters", required_argument, NULL, C_RAW_ITERS },
	{ "no-mpi", no_argument, NULL, C_NO_MPI },
	{ "shemb-run", required_argument, NULL, C_SHEMB_RUN },
	{ "mpi-bench", required_argument, NULL, C_MPI_BENCH },
	{ "mpirun", required_argument, NULL, C_MPIRUN },
	{ "timeout", required_argument, NULL, C_TIMEOUT },
	{ "csv", required_argument, NULL, C_CSV },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 }
};

static void comm_defaults(struct comm_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->ranks[0] = 2;
	o->ranks[1] = 4;
	o->nranks = 2;
	o->sizes[0] = (int64_t)1 << 20;
	o->sizes[1] = (int64_t)16 << 20;
	o->sizes[2] = (int64_t)64 << 20;
	o->nsizes = 3;
	o->provider[0] = o->provider[1] = true;
	o->passes = 2;
	o->burst = 1;
	o->raw_msg = (int64_t)1 << 20;
	o->raw_total = (int64_t)64 << 20;
	o->raw_iters = 5;
	o->timeout_s = 300;
}

static int parse_provider(const char *s, struct comm_opts *o)
{
	bool both = !strcmp(s, "both");

	o->provider[0] = both || !strcmp(s, "shm");
	o->provider[1] = both || !strcmp(s, "tcp") ||
			 !strcmp(s, "tcp;ofi_rxm");
	return o->provider[0] || o->provider[1] ? 0 : -1;
}

static int comm_opt(struct comm_opts *o, int c, const char *arg)
{
	const int64_t big = (int64_t)1 << 40;

	switch (c) {
	case C_RANKS:
		o->nranks = comm_parse_list(arg, 2, 64, o->ranks,
					    COMM_MAX_RANKS);
		return o->nranks < 0 ? -1 : 0;
	case C_SIZES:
		o->nsizes = comm_parse_list(arg, 4, (int64_t)INT32_MAX,
					    o->sizes, COMM_MAX_SIZES);
		return o->nsizes < 0 ? -1 : 0;
	case C_PROVIDER:
		return parse_provider(arg, o);
	case C_REPS:
		return comm_parse_count(arg, 1, 100000, &o->reps);
	case C_PASSES:
		return comm_parse_count(arg, 1, 100, &o->passes);
	case C_BURST:
		return comm_parse_count(arg, 1, 1000, &o->burst);
	case C_CHUNK:
		return comm_parse_count(arg, 1, big, &o->chunk);
	case C_IN_FLIGHT:
		return comm_parse_count(arg, 1, 256, &o->in_flight);
	case C_PROGRESS:
		o->progress = arg;
		return strcmp(arg, "thread") && strcmp(arg, "caller") ? -1 : 0;
	case C_RAW_MSG:
		return comm_parse_count(arg, 8, (int64_t)1 << 30, &o->raw_msg);
	case C_RAW_TOTAL:
		return comm_parse_count(arg, 8, (int64_t)4 << 30,
					&o->raw_total);
	case C_RAW_ITERS:
		return comm_parse_count(arg, 1, 10000, &o->raw_iters);
	case C_TIMEOUT:
		return comm_parse_count(arg, 1, 86400, &o->timeout_s);
	}
	return -1;
}

/* Options that take a string as it is. */
static bool comm_flag(struct comm_opts *o, int c, const char *arg)
{
	switch (c) {
	case C_SPLIT:
		o->split = true;
		return true;
	case C_NO_MPI:
		o->no_mpi = true;
		return true;
	case C_SHEMB_RUN:
		o->shemb_run = arg;
		return true;
	case C_MPI_BENCH:
		o->mpi_bench = arg;
		return true;
	case C_MPIRUN:
		o->mpirun = arg;
		return true;
	case C_CSV:
		o->csv = arg;
		return true;
	}
	return false;
}

static int comm_apply(void *opts, int c, const char *arg)
{
	struct comm_opts *o = opts;

	return !comm_flag(o, c, arg) && comm_opt(o, c, arg);
}

static void comm_help(void)
{
	fputs("Usage: shemb-bench comm [options]\n\n", stdout);
	fputs(bench_comm_usage, stdout);
}

static int comm_args(int argc, char **argv, struct comm_opts *o)
{
	comm_defaults(o);
	if (bench_parse_opts(argc, argv, comm_long, comm_apply, o, comm_help))
		return -1;
	if (o->raw_total % o->raw_msg) {
		fprintf(stderr, "shemb-bench: --raw-total must be a multiple "
			"of --raw-msg\n");
		return -1;
	}
	return 0;
}

/* ---- jobs ---- */

/* A job's argument vector, built up one word at a time. */
struct argv_buf {
	char *v[64];
	char words[16][64];
	int n, nw;
};

static void arg(struct argv_buf *a, const char *s)
{
	if (a->n < 63)
		a->v[a->n++] = (char *)s;
	a->v[a->n] = NULL;
}

static void arg_num(struct argv_buf *a, long long v)
{
	char *w = a->words[a->nw < 15 ? a->nw++ : 15];

	snprintf(w, sizeof(a->words[0]), "%lld", v);
	arg(a, w);
}

static const char *size_list(const struct comm_opts *o, char *buf,
			     size_t len)
{
	size_t at = 0;

	buf[0] = 0;
	for (int i = 0; i < o->nsizes && at < len; i++)
		at += (size_t)snprintf(buf + at, len - at, "%s%lld",
				       i ? "," : "", (long long)o->sizes[i]);
	return buf;
}

/* The last non-empty line of a job's stderr, for a note. */
static void last_line(const struct comm_buf *b, char *out, size_t len)
{
	const char *end = b->p ? b->p + b->len : NULL;
	const char *start;

	snprintf(out, len, "no message");
	while (end && end > b->p && (end[-1] == '\n' || end[-1] == ' '))
		end--;
	if (!end || end == b->p)
		return;
	start = end;
	while (start > b->p && start[-1] != '\n')
		start--;
	snprintf(out, len, "%.*s", (int)(end - start), start);
}

/*
 * Run a job; on failure, say why in note (and on stderr).  shemb-run and
 * comm-raw stop themselves at --timeout (own_limit): the margin only
 * catches them failing to.  mpirun is given no limit of its own.
 */
static int run_job(const struct comm_opts *o, struct argv_buf *a,
		   bool own_limit, const char *what, struct comm_buf *out,
		   struct comm_buf *err, char *note, size_t len)
{
	double limit = (double)o->timeout_s + (own_limit ? 15.0 : 0.0);
	char why[200];
	int rc = comm_run(a->v, limit, out, err);

	if (!rc)
		return 0;
	last_line(err, why, sizeof(why));
	if (rc == 124)
		snprintf(note, len, "%s ran past %lld s and was stopped", what,
			 (long long)o->timeout_s);
	else if (rc < 0)
		snprintf(note, len, "%s could not be started (%s)", what,
			 a->v[0]);
	else
		snprintf(note, len, "%s failed (status %d): %s", what, rc,
			 why);
	bench_progress_done();
	fprintf(stderr, "shemb-bench comm: %s\n", note);
	return -1;
}

/* ---- reading what the jobs printed ---- */

static int size_index(const struct comm_opts *o, long long size)
{
	for (int i = 0; i < o->nsizes; i++)
		if (o->sizes[i] == size)
			return i;
	return -1;
}

static int series_of(const char *op, bool mpi)
{
	if (!strcmp(op, "a2a"))
		return mpi ? S_MPI_A2A : S_SHEMB_A2A;
	if (!strcmp(op, "ar"))
		return mpi ? S_MPI_AR : S_SHEMB_AR;
	if (!strcmp(op, "a2a-start") && !mpi)
		return S_SHEMB_A2A_START;
	return -1;
}

/* "@comm info KEY VALUE": the provider a job ended up with. */
static void read_info(struct comm_prov *p, int ri, const char *rest,
		      int who)
{
	char key[32], val[64];

	if (sscanf(rest, "info %31s %63s", key, val) != 2)
		return;
	if (!strcmp(key, "provider") || !strcmp(key, "raw_provider"))
		snprintf(p->seen[who], sizeof(p->seen[who]), "%s", val);
	else if (!strcmp(key, "chunk_bytes"))
		p->chunk_seen[ri] = atoll(val);
	else if (!strcmp(key, "chunks_in_flight"))
		p->in_flight_seen[ri] = atoll(val);
	else if (!strcmp(key, "single_copy"))
		p->single_copy_seen[ri] = atoi(val);
	else if (!strcmp(key, "progress"))
		snprintf(p->progress_seen, sizeof(p->progress_seen), "%.15s",
			 val);
}

/* One line: "[rank] @comm ..." (shemb-run) or "@comm ...". */
static void read_line(const struct comm_opts *o, struct comm_prov *p,
		      int ri, const char *line, int who)
{
	const char *at = strstr(line, COMM_TAG " ");
	char op[16];
	long long size, bytes;
	double t;
	int s, k;

	if (!at || (at != line && at[-1] != ' '))
		return;
	at += strlen(COMM_TAG " ");
	if (!strncmp(at, "info ", 5)) {
		read_info(p, ri, at, who);
		return;
	}
	if (sscanf(at, "%15s %lld %lld %lf", op, &size, &bytes, &t) != 4 ||
	    !(t > 0))
		return;
	if (who == SEEN_RAW && !strcmp(op, "raw")) {
		comm_samples_add(ri < 0 ? &p->raw : &p->raw_load[ri], bytes,
				 t);
		return;
	}
	s = series_of(op, who == SEEN_MPI);
	k = size_index(o, size);
	if (s >= 0 && k >= 0 && ri >= 0)
		comm_samples_add(&p->cell[ri][k][s], bytes, t);
}

static void read_output(const struct comm_opts *o, struct comm_prov *p,
			int ri, struct comm_buf *b, int who)
{
	char *save = NULL;

	if (!b->p)
		return;
	for (char *l = strtok_r(b->p, "\n", &save); l;
	     l = strtok_r(NULL, "\n", &save))
		read_line(o, p, ri, l, who);
}

/* OpenMPI's ofi MTL names its provider in its verbose log. */
static void read_mpi_provider(struct comm_prov *p, const struct comm_buf *b)
{
	const char *key = "mtl:ofi:prov: ";
	const char *at = b->p ? strstr(b->p, key) : NULL;

	if (at)
		sscanf(at + strlen(key), "%63[^\n ]", p->seen[SEEN_MPI]);
}

/* ---- the three kinds of job ---- */

/* The raw stream: ri < 0, one way between two processes; else, as many
 * processes as rank count ri has ranks, in pairs streaming both ways. */
static void job_raw(const struct comm_opts *o, struct comm_prov *p, int ri,
		    const char *self)
{
	struct argv_buf a = { .n = 0 };
	struct comm_buf out = { 0 }, err = { 0 };
	int64_t pairs = ri < 0 ? 0 : o->ranks[ri] / 2;

	arg(&a, self);
	arg(&a, "comm-raw");
	if (pairs) {
		arg(&a, "--bidir");
		arg(&a, "--pairs");
		arg_num(&a, pairs);
	}
	arg(&a, "--provider");
	arg(&a, p->name);
	arg(&a, "--msg");
	arg_num(&a, o->raw_msg);
	arg(&a, "--total");
	arg_num(&a, o->raw_total);
	arg(&a, "--iters");
	arg_num(&a, o->raw_iters);
	arg(&a, "--window");
	arg_num(&a, COMM_RAW_WINDOW);
	arg(&a, "--timeout");
	arg_num(&a, o->timeout_s);
	if (!run_job(o, &a, true, pairs ? "the raw libfabric streams "
		     "under load" : "the raw libfabric stream", &out, &err,
		     p->note[SEEN_RAW], sizeof(p->note[0])))
		read_output(o, p, ri, &out, SEEN_RAW);
	comm_buf_free(&out);
	comm_buf_free(&err);
}

/* The repetitions both jobs time, and how. */
static void timing_args(struct argv_buf *a, const struct comm_opts *o)
{
	if (o->reps) {
		arg(a, "--reps");
		arg_num(a, o->reps);
	}
	if (o->burst > 1) {
		arg(a, "--back-to-back");
		arg_num(a, o->burst);
	}
}

static void job_shemb(const struct comm_opts *o, struct comm_prov *p,
		      int ri, const char *self)
{
	struct argv_buf a = { .n = 0 };
	struct comm_buf out = { 0 }, err = { 0 };
	char sizes[512];

	arg(&a, o->shemb_run);
	arg(&a, "-n");
	arg_num(&a, o->ranks[ri]);
	arg(&a, "--provider");
	arg(&a, p->name);
	arg(&a, "--timeout");
	arg_num(&a, o->timeout_s);
	arg(&a, self);
	arg(&a, "comm-rank");
	arg(&a, "--sizes");
	arg(&a, size_list(o, sizes, sizeof(sizes)));
	timing_args(&a, o);
	if (o->chunk) {
		arg(&a, "--chunk");
		arg_num(&a, o->chunk);
	}
	if (o->in_flight) {
		arg(&a, "--in-flight");
		arg_num(&a, o->in_flight);
	}
	if (o->progress) {
		arg(&a, "--progress");
		arg(&a, o->progress);
	}
	if (o->split)
		arg(&a, "--split");
	if (!run_job(o, &a, true, "the libshemb job", &out, &err,
		     p->note[SEEN_SHEMB], sizeof(p->note[0])))
		read_output(o, p, ri, &out, SEEN_SHEMB);
	comm_buf_free(&out);
	comm_buf_free(&err);
}

static const char *const mpi_ofi[] = {
	"--mca", "pml", "cm", "--mca", "mtl", "ofi",
	"--mca", "mtl_ofi_provider_exclude", "",
	"--mca", "mtl_ofi_verbose", "1", "-x"
};

static void job_mpi(const struct comm_opts *o, struct comm_prov *p, int ri)
{
	struct argv_buf a = { .n = 0 };
	struct comm_buf out = { 0 }, err = { 0 };
	char sizes[512], fip[96];

	arg(&a, o->mpirun);
	arg(&a, "--allow-run-as-root");
	arg(&a, "--oversubscribe");
	arg(&a, "-np");
	arg_num(&a, o->ranks[ri]);
	if (p->mpi_ofi) {
		/* the cm PML over the ofi MTL, on our provider (by default
		 * the MTL excludes shm, tcp and more); its verbose log names
		 * the provider it took */
		snprintf(fip, sizeof(fip), "FI_PROVIDER=%s", p->name);
		for (size_t i = 0; i < sizeof(mpi_ofi) / sizeof(mpi_ofi[0]);
		     i++)
			arg(&a, mpi_ofi[i]);
		arg(&a, fip);
	}
	arg(&a, o->mpi_bench);
	arg(&a, "--sizes");
	arg(&a, size_list(o, sizes, sizeof(sizes)));
	timing_args(&a, o);
	if (!run_job(o, &a, false, p->mpi_ofi ? "OpenMPI over its ofi MTL" :
		     "OpenMPI", &out, &err, p->note[SEEN_MPI],
		     sizeof(p->note[0]))) {
		read_output(o, p, ri, &out, SEEN_MPI);
		if (p->mpi_ofi)
			read_mpi_provider(p, &err);
	}
	comm_buf_free(&out);
	comm_buf_free(&err);
}

/* ---- the sweep ---- */

/* The libshemb and OpenMPI jobs of one rank count, in the order given. */
static void job_pair(const struct comm_opts *o, struct comm_prov *p, int ri,
		     const char *self, int pass, bool mpi_first)
{
	for (int k = 0; k < 2; k++) {
		bool mpi = (k == 0) == mpi_first;

		if (mpi && (o->no_mpi || !o->mpi_bench))
			continue;
		bench_progress("%s: %lld ranks, %s, pass %d of %lld", p->name,
			       (long long)o->ranks[ri],
			       mpi ? "OpenMPI" : "libshemb", pass + 1,
			       (long long)o->passes);
		if (mpi)
			job_mpi(o, p, ri);
		else
			job_shemb(o, p, ri, self);
	}
}

/* Each rank count's jobs next to a raw stream of their own, so that the
 * bar is measured when they are; who goes first alternates. */
static void sweep_provider(const struct comm_opts *o, struct comm_prov *p,
			   const char *self)
{
	for (int pass = 0; pass < o->passes; pass++) {
		for (int ri = 0; ri < o->nranks; ri++) {
			bench_progress_next();
			bench_progress("%s: raw libfabric stream, pass %d of "
				       "%lld", p->name, pass + 1,
				       (long long)o->passes);
			job_raw(o, p, -1, self);
			job_raw(o, p, ri, self);
			job_pair(o, p, ri, self, pass, (pass + ri) % 2 == 1);
		}
	}
	bench_progress_done();
}

/* Find the programs; say what is missing. */
/* Copies for the whole run: the finders return one static buffer. */
static const char *keep(char *slot, size_t len, const char *s)
{
	snprintf(slot, len, "%s", s);
	return slot;
}

static int locate(struct comm_opts *o, const char **self)
{
	static char self_path[4096], run_path[4096], mpi_path[4096];
	const char *s;

	*self = comm_self_exe();
	if (!*self) {
		fprintf(stderr, "shemb-bench comm: cannot find this program "
			"(/proc/self/exe)\n");
		return -1;
	}
	*self = keep(self_path, sizeof(self_path), *self);
	if (!o->shemb_run && (s = comm_find_sibling("shemb-run")))
		o->shemb_run = keep(run_path, sizeof(run_path), s);
	if (!o->shemb_run)
		o->shemb_run = "shemb-run"; /* from PATH */
	if (!o->mpi_bench && (s = comm_find_sibling("shemb-bench-mpi")))
		o->mpi_bench = keep(mpi_path, sizeof(mpi_path), s);
	/* installed: in pkglibexecdir */
	if (!o->mpi_bench && access(BENCH_MPI_PROGRAM, X_OK) == 0)
		o->mpi_bench = BENCH_MPI_PROGRAM;
	if (!o->mpirun)
		o->mpirun = *BENCH_MPIRUN ? BENCH_MPIRUN : "mpirun";
	return *self ? 0 : -1;
}

static void print_setup(const struct comm_opts *o, const char *self)
{
	char buf[32];

	printf("shemb-bench comm: libshemb %s\n", shemb_version_string());
	printf("  alltoallv  each rank sends SIZE bytes per call, SIZE / "
	       "(N - 1) to each\n             other rank, nothing to "
	       "itself; allreduce: SIZE bytes of f32 (SUM)\n");
	printf("  sizes     ");
	for (int i = 0; i < o->nsizes; i++)
		printf(" %s", comm_size_name(o->sizes[i], buf, sizeof(buf)));
	printf("; ranks");
	for (int i = 0; i < o->nranks; i++)
		printf(" %lld", (long long)o->ranks[i]);
	printf("\n  reps       ");
	if (o->reps)
		printf("%lld per size and pass", (long long)o->reps);
	else
		printf("per size and pass: as many as move 512 MiB (10 to "
		       "200)");
	if (o->burst > 1)
		printf(",\n             each %lld calls in a row after a "
		       "barrier, after 2 untimed calls\n",
		       (long long)o->burst);
	else
		printf(",\n             each after a barrier, after 2 "
		       "untimed calls\n");
	printf("  passes     %lld, libshemb and OpenMPI in alternating order, "
	       "repetitions pooled\n", (long long)o->passes);
	printf("  figures    GB/s = bytes a rank sends / median time of a "
	       "call (slowest rank)%s\n", o->burst > 1 ? ";\n             "
	       "a call's time: a repetition's over its calls" : "");
	printf("  programs   %s; %s; %s\n", o->shemb_run,
	       o->no_mpi ? "OpenMPI skipped (--no-mpi)" :
	       o->mpi_bench ? o->mpi_bench : "no shemb-bench-mpi",
	       o->no_mpi ? "-" : o->mpirun);
	fflush(stdout);
}

int bench_comm(int argc, char **argv)
{
	struct comm_opts o;
	struct comm_prov *p;
	const char *self, *fi = getenv("FI_PROVIDER");
	int np = 0;

	if (comm_args(argc, argv, &o) || locate(&o, &self))
		return 2;
	if (o.csv && !(o.csv_file = bench_csv_open(o.csv, comm_csv_header,
						   "shemb-bench comm")))
		return 2;
	comm_adopt_orphans();
	p = calloc(2, sizeof(*p));
	if (!p)
		return 1;
	print_setup(&o, self);
	/* every job names its provider itself; FI_PROVIDER would filter
	 * them all (and "" breaks fi_getinfo) */
	if (fi) {
		printf("  note       FI_PROVIDER=\"%s\" is ignored\n", fi);
		unsetenv("FI_PROVIDER");
	}
	bench_progress_plan((o.provider[0] + o.provider[1]) *
			    (int)o.passes * o.nranks);
	for (int i = 0; i < 2; i++) {
		if (!o.provider[i])
			continue;
		p[np].name = prov_names[i];
		p[np].mpi_ofi = i == 1;
		if (o.no_mpi || !o.mpi_bench)
			snprintf(p[np].note[SEEN_MPI], sizeof(p->note[0]), "%s",
				 o.no_mpi ? "OpenMPI skipped (--no-mpi)" :
				 "no shemb-bench-mpi next to shemb-bench "
				 "or in " BENCH_MPI_PROGRAM " (built "
				 "only where configure finds mpicc)");
		sweep_provider(&o, &p[np], self);
		comm_print_table(&o, &p[np]);
		comm_write_csv(&o, &p[np]);
		np++;
	}
	comm_print_results(&o, p, np);
	for (int i = 0; i < np; i++) {
		comm_samples_free(&p[i].raw);
		for (int ri = 0; ri < COMM_MAX_RANKS; ri++)
			comm_samples_free(&p[i].raw_load[ri]);
		for (int r = 0; r < COMM_MAX_RANKS; r++)
			for (int k = 0; k < COMM_MAX_SIZES; k++)
				for (int s = 0; s < NSERIES; s++)
					comm_samples_free(&p[i].cell[r][k][s]);
	}
	free(p);
	return bench_csv_close(o.csv_file, o.csv, "shemb-bench comm") ? 1 : 0;
}
