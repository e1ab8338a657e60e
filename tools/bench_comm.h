/*
 * bench_comm.h - shemb-bench comm: libshemb's alltoallv and allreduce
 * between ranks against OpenMPI's MPI_Alltoallv and raw libfabric
 * streaming, measured side by side in one run.
 *
 * The parent (bench_comm.c) starts every measurement as a job of its own:
 *   shemb-run -n N --provider P shemb-bench comm-rank ...   (libshemb)
 *   mpirun -np N shemb-bench-mpi ...                         (OpenMPI)
 *   shemb-bench comm-raw --provider P ...                    (libfabric)
 * and reads the lines that start with COMM_TAG from what they print.
 */
#ifndef SHEMB_BENCH_COMM_H
#define SHEMB_BENCH_COMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/*
 * The lines the jobs print for the parent, one per timed repetition:
 *   @comm a2a SIZE BYTES SECONDS   one alltoallv of SIZE per rank; BYTES:
 *                                  what a rank sent (SIZE rounded down to
 *                                  a multiple of N - 1)
 *   @comm a2a-start SIZE BYTES SECONDS   the same call's start alone
 *   @comm ar SIZE BYTES SECONDS    one allreduce of SIZE bytes of f32
 *   @comm raw SIZE BYTES SECONDS   one-way stream of BYTES (comm-raw)
 *   @comm info KEY VALUE           what the job ran with (provider ...)
 * SECONDS is the slowest rank's time for that repetition.  The MPI program
 * (tools/bench_mpi.c) prints the same lines.
 */
#define COMM_TAG "@comm"

#define COMM_MAX_SIZES 16
#define COMM_RAW_WINDOW 64 /* raw stream: messages in flight per side */
#define COMM_MAX_RANKS 8

/* ---- modes (entry points from shemb-bench.c) ---- */

/* shemb-bench comm [options]: argv[0] is the program name. */
int bench_comm(int argc, char **argv);
/* One rank of a libshemb job, started by shemb-run (not in the usage). */
int bench_comm_rank(int argc, char **argv);
/* The raw libfabric stream between two forked processes (not in the
 * usage). */
int bench_fi_raw(int argc, char **argv);

/* ---- shared helpers (bench_comm_util.c) ---- */

/* "1M,16M,64M" into sizes[] (k, M, G: x 2^10, 2^20, 2^30; each from min
 * to max); the count, or -1 when the list is bad. */
int comm_parse_list(const char *s, int64_t min, int64_t max, int64_t *out,
		    int maxn);
/* One count with an optional k/M/G suffix; 0, or -1 when bad. */
int comm_parse_count(const char *s, int64_t min, int64_t max, int64_t *out);
/* ... into an int */
int comm_parse_int(const char *s, int64_t min, int64_t max, int *out);
/* "64 KiB", "16 MiB" ... for a size in bytes. */
const char *comm_size_name(int64_t bytes, char *buf, size_t len);
/* Timed repetitions for a size when --reps is not given: enough to move
 * about 512 MiB, between 10 and 200. */
int comm_auto_reps(int64_t bytes);

/* A child's output, collected while it runs. */
struct comm_buf {
	char *p;
	size_t len, cap;
};

void comm_buf_free(struct comm_buf *b);

/*
 * Run argv (searched in PATH when argv[0] has no slash) in a process group
 * of its own, with stdin from /dev/null, collecting its stdout and stderr.
 * After timeout_s seconds the group gets SIGTERM, then SIGKILL 3 s later.
 * Returns the exit status, 128 + signal when killed, 124 on timeout, or
 * -1 when it could not be started.  The child is always reaped.
 */
int comm_run(char *const argv[], double timeout_s, struct comm_buf *out,
	     struct comm_buf *err);
/* Make this process the reaper of its descendants that lose their parent
 * (the ranks of an mpirun that was killed): comm_run() then stops and
 * reaps them after each job. */
void comm_adopt_orphans(void);

/* The path of this program (the target of /proc/self/exe); static. */
const char *comm_self_exe(void);
/* An executable `name` in the directory of this program, or in the one
 * above it when that is libtool's .libs; NULL when there is none.
 * Static storage, overwritten by the next call. */
const char *comm_find_sibling(const char *name);

/* ---- the parent's measurements (bench_comm.c, bench_comm_report.c) ---- */

/* The times of one series, and the bytes each counts. */
struct comm_samples {
	double *t;
	int n, cap;
	int64_t bytes;
};

enum comm_series {
	S_SHEMB_A2A, S_SHEMB_A2A_START, S_SHEMB_AR, S_MPI_A2A, S_MPI_AR,
	NSERIES
};

/* One provider: its raw stream, and a cell per rank count and size. */
struct comm_prov {
	const char *name;        /* libfabric's: "shm", "tcp;ofi_rxm" */
	bool mpi_ofi;            /* OpenMPI forced onto it (else defaults) */
	struct comm_samples raw;
	/* raw streams under the same load: at each rank count N, N / 2
	 * pairs of processes at once, each streaming both ways */
	struct comm_samples raw_load[COMM_MAX_RANKS];
	char seen[3][64];        /* provider reported: libshemb, raw, MPI */
	char note[3][320];       /* why a series is missing: same order */
	/* libshemb's chunk_bytes and chunks_in_flight at each rank count
	 * (the defaults depend on it), and its progress */
	long long chunk_seen[COMM_MAX_RANKS];
	long long in_flight_seen[COMM_MAX_RANKS];
	int single_copy_seen[COMM_MAX_RANKS]; /* 1 in use, -1 not, 0 ? */
	char progress_seen[16];
	struct comm_samples cell[COMM_MAX_RANKS][COMM_MAX_SIZES][NSERIES];
};

enum { SEEN_SHEMB, SEEN_RAW, SEEN_MPI };

struct comm_opts {
	int64_t ranks[COMM_MAX_RANKS];
	int nranks;
	int64_t sizes[COMM_MAX_SIZES];
	int nsizes;
	bool provider[2];        /* shm, tcp;ofi_rxm */
	int64_t reps;            /* 0: comm_auto_reps() */
	int64_t burst;           /* calls timed back to back after a
				  * barrier */
	int64_t passes;
	const char *csv;
	FILE *csv_file;          /* open from the start: a bad file stops
				  * the run before it begins */
	int64_t chunk;           /* 0: the library's default */
	int64_t in_flight;       /* chunks_in_flight; 0: the default */
	const char *progress;    /* NULL: the library's default */
	int64_t raw_msg, raw_total, raw_iters;
	bool no_mpi, split;
	const char *shemb_run, *mpi_bench, *mpirun;
	int64_t timeout_s;       /* per job */
};

int comm_samples_add(struct comm_samples *s, int64_t bytes, double t);
void comm_samples_free(struct comm_samples *s);
/* Bytes per second at the median time; NAN without samples. */
double comm_rate(const struct comm_samples *s);

extern const char bench_comm_usage[];

void comm_print_table(const struct comm_opts *o, const struct comm_prov *p);
extern const char comm_csv_header[];
void comm_write_csv(const struct comm_opts *o, const struct comm_prov *p);
void comm_print_results(const struct comm_opts *o,
			const struct comm_prov *p, int np);

#endif
