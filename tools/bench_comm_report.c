/*
 * bench_comm_report.c - shemb-bench comm: the samples, the table of each
 * provider, the CSV lines and the closing "result" lines.
 */
#define _GNU_SOURCE
#include "tools/bench_comm.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/bench_util.h"

/* ---- samples ---- */

int comm_samples_add(struct comm_samples *s, int64_t bytes, double t)
{
	if (s->n == s->cap) {
		int cap = s->cap ? 2 * s->cap : 64;
		double *p = realloc(s->t, (size_t)cap * sizeof(*p));

		if (!p)
			return -1;
		s->t = p;
		s->cap = cap;
	}
	s->t[s->n++] = t;
	s->bytes = bytes;
	return 0;
}

void comm_samples_free(struct comm_samples *s)
{
	free(s->t);
	memset(s, 0, sizeof(*s));
}

double comm_rate(const struct comm_samples *s)
{
	struct bench_stat st;

	if (!s || s->n == 0)
		return NAN;
	st = bench_stat_of(s->t, s->n);
	return st.median > 0 ? (double)s->bytes / st.median : NAN;
}

/* ---- what a row holds ---- */

/* OpenMPI's figures count only when it ran where it was sent: the ofi
 * MTL names the provider it took in its log. */
static bool mpi_valid(const struct comm_prov *p)
{
	return !p->mpi_ofi || !p->seen[SEEN_MPI][0] ||
	       !strcmp(p->seen[SEEN_MPI], p->name);
}

struct row {
	double shemb, mpi, vs_mpi, raw, vs_raw, shemb_ar, mpi_ar;
	double load, vs_load; /* the raw streams under the same load */
	double start;         /* median start of an alltoallv, seconds */
	int shemb_n, mpi_n;
};

static struct row row_of(const struct comm_prov *p, int ri, int k)
{
	const struct comm_samples *c = p->cell[ri][k];
	struct row r;
	bool mpi = mpi_valid(p);

	r.shemb = comm_rate(&c[S_SHEMB_A2A]);
	r.mpi = mpi ? comm_rate(&c[S_MPI_A2A]) : NAN;
	r.vs_mpi = r.shemb / r.mpi;
	r.raw = comm_rate(&p->raw);
	r.vs_raw = r.shemb / r.raw;
	r.load = comm_rate(&p->raw_load[ri]);
	r.vs_load = r.shemb / r.load;
	r.shemb_ar = comm_rate(&c[S_SHEMB_AR]);
	r.mpi_ar = mpi ? comm_rate(&c[S_MPI_AR]) : NAN;
	r.start = c[S_SHEMB_A2A_START].n ?
		  bench_stat_of(c[S_SHEMB_A2A_START].t,
				c[S_SHEMB_A2A_START].n).median : NAN;
	r.shemb_n = c[S_SHEMB_A2A].n;
	r.mpi_n = c[S_MPI_A2A].n;
	return r;
}

/* ---- the table ---- */

static void print_notes(const struct comm_opts *o,
			const struct comm_prov *p);

/* A figure after one space; n/a for what was not measured. */
static void cell(double v, double scale, int width, int prec)
{
	if (isnan(v))
		printf(" %*s", width, "n/a");
	else
		printf(" %*.*f", width, prec, v * scale);
}

static const char *mpi_label(const struct comm_prov *p)
{
	return p->mpi_ofi ? "OpenMPI, cm PML over its ofi MTL" :
			    "OpenMPI with its defaults (its own shared "
			    "memory, not libfabric)";
}

/* How alltoallv's bulk data moved (shemb_ctx_get_attr's single_copy) */
static const char *single_copy_note(int seen)
{
	return seen > 0 ? ";\n               alltoallv data by single copy "
			  "(process_vm_readv)" : "";
}

static void print_head(const struct comm_opts *o, const struct comm_prov *p)
{
	char msg[32], total[32];

	printf("\n== provider %s\n", p->name);
	printf("   libshemb: libfabric %s, progress %s\n",
	       p->seen[SEEN_SHEMB][0] ? p->seen[SEEN_SHEMB] : "?",
	       p->progress_seen[0] ? p->progress_seen : "?");
	for (int ri = 0; ri < o->nranks; ri++)
		printf("             %lld ranks: chunk_bytes %lld, "
		       "chunks_in_flight %lld%s\n", (long long)o->ranks[ri],
		       p->chunk_seen[ri], p->in_flight_seen[ri],
		       single_copy_note(p->single_copy_seen[ri]));
	printf("   raw:      libfabric %s, one process to another, %s "
	       "messages,\n             %s per iteration, up to %d in "
	       "flight\n",
	       p->seen[SEEN_RAW][0] ? p->seen[SEEN_RAW] : "?",
	       comm_size_name(o->raw_msg, msg, sizeof(msg)),
	       comm_size_name(o->raw_total, total, sizeof(total)),
	       COMM_RAW_WINDOW);
	printf("   OpenMPI:  %s\n", mpi_label(p));
	printf("%5s %9s | %-27s | %-19s | %s\n", "", "",
	       "alltoallv, GB/s per rank", "raw libfabric",
	       o->split ? "allreduce, GB/s     | start" : "allreduce, GB/s");
	printf("%5s %9s | %9s %9s %7s | %9s %9s | %9s %9s%s\n", "ranks",
	       "size", "libshemb", "OpenMPI", "ratio", "GB/s", "shemb/raw",
	       "libshemb", "OpenMPI", o->split ? " |    ms" : "");
}

/* A table line's start (rank count ri, size k), and its figures. */
static struct row row_start(const struct comm_opts *o,
			    const struct comm_prov *p, int ri, int k)
{
	char buf[32];

	printf("%5lld %9s |", (long long)o->ranks[ri],
	       comm_size_name(o->sizes[k], buf, sizeof(buf)));
	return row_of(p, ri, k);
}

/* The same alltoallvs against raw streams under their load. */
static void print_load_table(const struct comm_opts *o,
			     const struct comm_prov *p)
{
	printf("   raw under the same load: as many processes as ranks at "
	       "once, in pairs\n   streaming both ways (the bar of "
	       "alltoallv_vs_raw_same_load)\n");
	printf("%5s %9s | %9s %9s\n", "ranks", "size", "GB/s", "shemb/raw");
	for (int ri = 0; ri < o->nranks; ri++) {
		for (int k = 0; k < o->nsizes; k++) {
			struct row r = row_start(o, p, ri, k);

			cell(r.load, 1e-9, 9, 3);
			cell(r.vs_load, 1, 9, 3);
			printf("\n");
		}
	}
}

void comm_print_table(const struct comm_opts *o, const struct comm_prov *p)
{
	print_head(o, p);
	for (int ri = 0; ri < o->nranks; ri++) {
		for (int k = 0; k < o->nsizes; k++) {
			struct row r = row_start(o, p, ri, k);

			cell(r.shemb, 1e-9, 9, 3);
			cell(r.mpi, 1e-9, 9, 3);
			cell(r.vs_mpi, 1, 7, 3);
			printf(" |");
			cell(r.raw, 1e-9, 9, 3);
			cell(r.vs_raw, 1, 9, 3);
			printf(" |");
			cell(r.shemb_ar, 1e-9, 9, 3);
			cell(r.mpi_ar, 1e-9, 9, 3);
			if (o->split) {
				printf(" |");
				cell(r.start, 1e3, 6, 3);
			}
			printf("\n");
		}
	}
	print_load_table(o, p);
	print_notes(o, p);
}

/* ---- notes under the table ---- */

/* lo and hi (lo -1: none yet) widened to take n in. */
static void widen(int n, int *lo, int *hi)
{
	*lo = *lo < 0 || n < *lo ? n : *lo;
	*hi = n > *hi ? n : *hi;
}

static void sample_counts(const struct comm_opts *o,
			  const struct comm_prov *p, int s, int *lo, int *hi)
{
	*lo = -1;
	*hi = 0;
	for (int ri = 0; ri < o->nranks; ri++) {
		for (int k = 0; k < o->nsizes; k++)
			widen(p->cell[ri][k][s].n, lo, hi);
	}
}

/* The fewest and most raw iterations under load of a rank count. */
static void load_counts(const struct comm_opts *o, const struct comm_prov *p,
			int *lo, int *hi)
{
	*lo = -1;
	*hi = 0;
	for (int ri = 0; ri < o->nranks; ri++)
		widen(p->raw_load[ri].n, lo, hi);
}

static void print_notes(const struct comm_opts *o, const struct comm_prov *p)
{
	int lo, hi;

	sample_counts(o, p, S_SHEMB_A2A, &lo, &hi);
	printf("   samples:  libshemb %d to %d repetitions per figure", lo, hi);
	sample_counts(o, p, S_MPI_A2A, &lo, &hi);
	printf(", OpenMPI %d to %d;\n", lo, hi);
	load_counts(o, p, &lo, &hi);
	printf("             raw %d iterations, under load %d to %d per "
	       "rank count\n", p->raw.n, lo, hi);
	if (p->mpi_ofi && p->seen[SEEN_MPI][0])
		printf("   OpenMPI's ofi MTL said it took provider %s%s\n",
		       p->seen[SEEN_MPI], mpi_valid(p) ? "" :
		       ": not the one it was given, its figures are left out");
	else if (p->mpi_ofi && hi > 0)
		printf("   OpenMPI's ofi MTL did not name its provider\n");
	for (int i = 0; i < 3; i++)
		if (p->note[i][0])
			printf("   note: %s\n", p->note[i]);
}

/* ---- CSV ---- */

const char comm_csv_header[] =
	"mode,provider,mpi_transport,ranks,size_bytes,shemb_reps,mpi_reps,"
	"shemb_a2a_gbps,mpi_a2a_gbps,a2a_vs_mpi,raw_gbps,a2a_vs_raw,"
	"shemb_allreduce_gbps,mpi_allreduce_gbps,chunk_bytes,progress,"
	"raw_load_gbps,a2a_vs_raw_load";

/* One line per rank count and size of provider p. */
void comm_write_csv(const struct comm_opts *o, const struct comm_prov *p)
{
	FILE *f = o->csv_file;

	for (int ri = 0; f && ri < o->nranks; ri++) {
		for (int k = 0; k < o->nsizes; k++) {
			struct row r = row_of(p, ri, k);

			bench_csv_begin(f, "comm");
			bench_csv_str(f, p->name);
			bench_csv_str(f, p->mpi_ofi ? "ofi" : "default");
			bench_csv_int(f, o->ranks[ri]);
			bench_csv_int(f, o->sizes[k]);
			bench_csv_int(f, r.shemb_n);
			bench_csv_int(f, r.mpi_n);
			bench_csv_num(f, r.shemb * 1e-9);
			bench_csv_num(f, r.mpi * 1e-9);
			bench_csv_num(f, r.vs_mpi);
			bench_csv_num(f, r.raw * 1e-9);
			bench_csv_num(f, r.vs_raw);
			bench_csv_num(f, r.shemb_ar * 1e-9);
			bench_csv_num(f, r.mpi_ar * 1e-9);
			bench_csv_int(f, p->chunk_seen[ri]);
			bench_csv_str(f, o->progress);
			bench_csv_num(f, r.load * 1e-9);
			bench_csv_num(f, r.vs_load);
			bench_csv_end(f);
		}
	}
}

/* ---- the result lines ---- */

enum bar { VS_MPI, VS_RAW, VS_LOAD };

/* The smallest ratio over the rows of p; counts the rows without one. */
static double min_ratio(const struct comm_opts *o, const struct comm_prov *p,
			enum bar bar, int *missing)
{
	double m = NAN;

	for (int ri = 0; ri < o->nranks; ri++) {
		for (int k = 0; k < o->nsizes; k++) {
			struct row r = row_of(p, ri, k);
			double v = bar == VS_RAW    ? r.vs_raw
				   : bar == VS_LOAD ? r.vs_load
						    : r.vs_mpi;

			if (isnan(v))
				(*missing)++;
			else if (isnan(m) || v < m)
				m = v;
		}
	}
	return m;
}

static const struct comm_prov *find(const struct comm_prov *p, int np,
				    bool ofi)
{
	for (int i = 0; i < np; i++)
		if (p[i].mpi_ofi == ofi)
			return &p[i];
	return NULL;
}

/* One ratio against OpenMPI: its value, and why it is missing. */
static double vs_mpi(const struct comm_opts *o, const struct comm_prov *p,
		     const char *name, char *why, size_t len)
{
	int missing = 0;
	double m;

	if (!p) {
		snprintf(why, len, "%s: not measured (see --provider)", name);
		return NAN;
	}
	m = min_ratio(o, p, VS_MPI, &missing);
	if (isnan(m))
		snprintf(why, len, "%s: nan, %s", name, p->note[SEEN_MPI][0] ?
			 p->note[SEEN_MPI] : p->note[SEEN_SHEMB][0] ?
			 p->note[SEEN_SHEMB] : !mpi_valid(p) ?
			 "OpenMPI ran on another provider" : "no figures");
	else if (missing)
		snprintf(why, len, "%s: over the rows measured; %d of %d "
			 "rows have no figure", name, missing,
			 o->nranks * o->nsizes);
	return m;
}

static void print_meaning(void)
{
	printf("\nWhat the ratios mean:\n"
"  alltoallv_vs_openmpi_*: libshemb's per-rank alltoallv throughput over\n"
"    OpenMPI's at the same size and rank count, in the same run; >= 1 is\n"
"    as fast.  shm: against OpenMPI's own shared-memory transport (vader);\n"
"    ofi: against OpenMPI on the same libfabric provider (tcp;ofi_rxm).\n"
"  alltoallv_vs_raw: the rate at which a rank sends in libshemb's\n"
"    alltoallv, while it also receives as much and N - 1 peers do the\n"
"    same, over the rate at which one process streams to one idle other\n"
"    process over the same provider (no collective, no other traffic).\n"
"    1.0 means a rank sends as fast inside the all-to-all as a lone\n"
"    one-way stream; with more processes than CPUs, the ranks\n"
"    share the CPUs that move the bytes, which caps this below 1.\n"
"  alltoallv_vs_raw_same_load: the same rate over a raw stream's when\n"
"    as many processes as ranks stream at once, in pairs, both ways\n"
"    (each sends as much as it receives, as a rank of an alltoallv\n"
"    does); the raw streams poll their completion queues without\n"
"    pause, as libfabric's manual progress has them do.\n"
"  Each figure is the minimum over sizes and rank counts.\n");
}

static void print_result(const char *name, double v)
{
	if (isnan(v))
		printf("result %s nan\n", name);
	else
		printf("result %s %.3f\n", name, v);
}

void comm_print_results(const struct comm_opts *o,
			const struct comm_prov *p, int np)
{
	char why[4][400] = { "", "", "", "" };
	double shm, ofi, raw = NAN, load = NAN;
	int missing = 0, load_missing = 0;

	shm = vs_mpi(o, find(p, np, false), "alltoallv_vs_openmpi_shm_min",
		     why[0], sizeof(why[0]));
	ofi = vs_mpi(o, find(p, np, true), "alltoallv_vs_openmpi_ofi_min",
		     why[1], sizeof(why[1]));
	for (int i = 0; i < np; i++) {
		double m = min_ratio(o, &p[i], VS_RAW, &missing);
		double l = min_ratio(o, &p[i], VS_LOAD, &load_missing);

		raw = isnan(raw) || m < raw ? m : raw;
		load = isnan(load) || l < load ? l : load;
	}
	if (isnan(raw))
		snprintf(why[2], sizeof(why[2]), "alltoallv_vs_raw_min: nan, "
			 "no raw or no libshemb figures");
	else if (missing)
		snprintf(why[2], sizeof(why[2]), "alltoallv_vs_raw_min: over "
			 "the rows measured; %d rows have no figure", missing);
	if (isnan(load))
		snprintf(why[3], sizeof(why[3]), "alltoallv_vs_raw_same_load_"
			 "min: nan, no raw or no libshemb figures");
	else if (load_missing)
		snprintf(why[3], sizeof(why[3]), "alltoallv_vs_raw_same_load_"
			 "min: over the rows measured; %d rows have no figure",
			 load_missing);
	print_meaning();
	for (int i = 0; i < 4; i++)
		if (why[i][0])
			printf("  %s\n", why[i]);
	printf("\n");
	/* before the three, which end the output */
	print_result("alltoallv_vs_raw_same_load_min", load);
	print_result("alltoallv_vs_openmpi_shm_min", shm);
	print_result("alltoallv_vs_openmpi_ofi_min", ofi);
	print_result("alltoallv_vs_raw_min", raw);
}
