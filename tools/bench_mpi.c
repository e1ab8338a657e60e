/*
 * bench_mpi.c - the OpenMPI side of shemb-bench comm, built with mpicc
 * (tools/shemb-bench-mpi, installed in pkglibexecdir) and started by the
 * benchmark with mpirun:
 *
 *   mpirun -np N shemb-bench-mpi --sizes B,B.. [--reps R] [--warmup W]
 *                                [--back-to-back K]
 *
 * It measures what bench_comm_rank.c measures for libshemb, the same way:
 * per size S, an MPI_Alltoallv in which each rank sends S bytes split
 * evenly over the N - 1 other ranks (nothing to itself), then an
 * MPI_Allreduce (SUM) of S bytes of float; untimed calls first, a barrier
 * before each timed one (or each K calls in a row, timed together and
 * counted as K calls of a K-th of the time), each repetition's time
 * reduced to the slowest rank's.  Rank 0 prints the lines of
 * bench_comm.h.  It shares no code with libshemb, so that it builds with
 * MPI's compiler alone.
 */
#define _GNU_SOURCE
#include <mpi.h>

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TAG "@comm"
#define MAX_SIZES 16
#define AUTO_REPS_MAX 200

struct mpi_opts {
	long long sizes[MAX_SIZES];
	int nsizes;
	int reps;           /* 0: as many as move about 512 MiB, 10..200 */
	int warmup;
	int allreduce;
	int burst;          /* calls timed back to back after each barrier */
};

struct mpi_state {
	const struct mpi_opts *o;
	int rank, world;
	char *sb, *rb;
	float *as, *ar;
	int *sc, *sd, *rc, *rd;
	double *t;
};

static int rank_of_world;

static void die(const char *what)
{
	fprintf(stderr, "shemb-bench-mpi rank %d: %s\n", rank_of_world, what);
	MPI_Abort(MPI_COMM_WORLD, 1);
	exit(1);
}

/* ---- options ---- */

static int parse_size(const char *s, long long *out)
{
	const char *units = "kmg";
	const char *u;
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end == s || v < 1 || v > (1ll << 40))
		return -1;
	u = *end ? strchr(units, *end | 0x20) : NULL;
	if (u) {
		v <<= 10 * (u - units + 1);
		end++;
	}
	if (*end && *end != ',')
		return -1;
	*out = v;
	return (int)(end - s);
}

static int parse_sizes(const char *s, struct mpi_opts *o)
{
	o->nsizes = 0;
	while (*s) {
		long long *v = &o->sizes[o->nsizes];
		int n = o->nsizes < MAX_SIZES ? parse_size(s, v) : -1;

		if (n < 0 || *v > INT32_MAX)
			return -1; /* MPI counts are ints */
		o->nsizes++;
		s += n;
		if (*s == ',')
			s++;
	}
	return o->nsizes ? 0 : -1;
}

static int parse_args(int argc, char **argv, struct mpi_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->warmup = 2;
	o->allreduce = 1;
	o->burst = 1;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "--no-allreduce")) {
			o->allreduce = 0;
		} else if (!strcmp(a, "--sizes") && v) {
			if (parse_sizes(v, o))
				return -1;
			i++;
		} else if (!strcmp(a, "--reps") && v) {
			o->reps = atoi(v);
			if (o->reps < 1 || o->reps > 100000)
				return -1;
			i++;
		} else if (!strcmp(a, "--back-to-back") && v) {
			o->burst = atoi(v);
			if (o->burst < 1 || o->burst > 1000)
				return -1;
			i++;
		} else if (!strcmp(a, "--warmup") && v) {
			o->warmup = atoi(v);
			i++;
		} else {
			return -1;
		}
	}
	return o->nsizes ? 0 : -1;
}

static int auto_reps(long long bytes)
{
	long long r = (512ll << 20) / bytes;

	return r < 10 ? 10 : r > AUTO_REPS_MAX ? AUTO_REPS_MAX : (int)r;
}

/* ---- measuring ---- */

static void *alloc_touched(size_t bytes)
{
	void *p = NULL;

	if (posix_memalign(&p, 4096, bytes ? bytes : 1))
		die("out of memory");
	memset(p, 0, bytes);
	return p;
}

static unsigned char pattern(int from, int to)
{
	return (unsigned char)(from * 16 + to + 1);
}

/* Bytes to each other rank; the counts and the data to send. */
static int a2a_setup(struct mpi_state *s, long long bytes)
{
	int per = (int)(bytes / (s->world - 1)), off = 0;

	for (int p = 0; p < s->world; p++) {
		int n = p == s->rank ? 0 : per;

		s->sc[p] = s->rc[p] = n;
		s->sd[p] = s->rd[p] = off;
		memset(s->sb + off, pattern(s->rank, p), (size_t)n);
		off += n;
	}
	return per;
}

static void a2a_check(const struct mpi_state *s)
{
	for (int p = 0; p < s->world; p++) {
		const unsigned char *b = (unsigned char *)s->rb + s->rd[p];

		for (int i = 0; i < s->rc[p]; i++)
			if (b[i] != pattern(p, s->rank))
				die("alltoallv delivered wrong data");
	}
}

static void ar_check(const struct mpi_state *s, int count)
{
	float want = (float)(s->world * (s->world + 1) / 2);

	for (int i = 0; i < count; i++)
		if (s->ar[i] != want)
			die("allreduce gave a wrong sum");
}

static void call(struct mpi_state *s, int ar, int count)
{
	if (ar)
		MPI_Allreduce(s->as, s->ar, count, MPI_FLOAT, MPI_SUM,
			      MPI_COMM_WORLD);
	else
		MPI_Alltoallv(s->sb, s->sc, s->sd, MPI_BYTE, s->rb, s->rc,
			      s->rd, MPI_BYTE, MPI_COMM_WORLD);
}

static void time_kind(struct mpi_state *s, int ar, long long bytes,
		      long long sent)
{
	int reps = s->o->reps ? s->o->reps : auto_reps(bytes * s->o->burst);
	int count = (int)(bytes / (long long)sizeof(float));

	for (int w = 0; w < s->o->warmup; w++)
		call(s, ar, count);
	for (int r = 0; r < reps; r++) {
		double t0;

		MPI_Barrier(MPI_COMM_WORLD);
		t0 = MPI_Wtime();
		for (int k = 0; k < s->o->burst; k++)
			call(s, ar, count);
		s->t[r] = (MPI_Wtime() - t0) / s->o->burst;
	}
	MPI_Allreduce(MPI_IN_PLACE, s->t, reps, MPI_DOUBLE, MPI_MAX,
		      MPI_COMM_WORLD);
	for (int r = 0; s->rank == 0 && r < reps; r++)
		printf(TAG " %s %lld %lld %.9f\n", ar ? "ar" : "a2a", bytes,
		       sent, s->t[r]);
	fflush(stdout);
}

static void run_size(struct mpi_state *s, long long bytes)
{
	int per = a2a_setup(s, bytes);
	int count = (int)(bytes / (long long)sizeof(float));

	time_kind(s, 0, bytes, (long long)per * (s->world - 1));
	a2a_check(s);
	if (!s->o->allreduce || !count)
		return;
	for (int i = 0; i < count; i++)
		s->as[i] = (float)(s->rank + 1);
	time_kind(s, 1, bytes, (long long)count * (long long)sizeof(float));
	ar_check(s, count);
}

static void print_info(const struct mpi_state *s)
{
	char v[MPI_MAX_LIBRARY_VERSION_STRING];
	int len = 0;

	MPI_Get_library_version(v, &len);
	v[strcspn(v, ",\n")] = 0;
	printf(TAG " info ranks %d\n", s->world);
	printf(TAG " info mpi %s\n", v);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	struct mpi_opts o;
	struct mpi_state s = { .o = &o };
	long long big = 0;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &s.rank);
	MPI_Comm_size(MPI_COMM_WORLD, &s.world);
	rank_of_world = s.rank;
	if (parse_args(argc, argv, &o))
		die("usage: shemb-bench-mpi --sizes B[,B...] [--reps R] "
		    "[--warmup W] [--back-to-back K] [--no-allreduce]");
	if (s.world < 2)
		die("needs 2 ranks or more");
	for (int i = 0; i < o.nsizes; i++)
		big = o.sizes[i] > big ? o.sizes[i] : big;
	s.sb = alloc_touched((size_t)big);
	s.rb = alloc_touched((size_t)big);
	s.as = alloc_touched((size_t)big);
	s.ar = alloc_touched((size_t)big);
	s.sc = calloc(4 * (size_t)s.world, sizeof(int));
	s.t = calloc(o.reps ? (size_t)o.reps : AUTO_REPS_MAX, sizeof(double));
	if (!s.sc || !s.t)
		die("out of memory");
	s.sd = s.sc + s.world;
	s.rc = s.sc + 2 * s.world;
	s.rd = s.sc + 3 * s.world;
	if (s.rank == 0)
		print_info(&s);
	for (int i = 0; i < o.nsizes; i++)
		run_size(&s, o.sizes[i]);
	free(s.sb);
	free(s.rb);
	free(s.as);
	free(s.ar);
	free(s.sc);
	free(s.t);
	MPI_Finalize();
	return 0;
}
