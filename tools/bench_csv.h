/*
 * bench_csv.h - the CSV files of shemb-bench (--csv FILE): one header line
 * naming the columns, then one line per measured configuration, appended
 * run after run.  Every mode's header starts with the column "mode" and
 * its lines with the mode's name, so that a reader (tools/shemb-plot)
 * can tell the files apart.
 *
 * Fields never hold a comma, a quote or a line break (they are replaced
 * by '_'), so a line splits on commas alone.  A figure that was not
 * measured is an empty field.
 */
#ifndef SHEMB_BENCH_CSV_H
#define SHEMB_BENCH_CSV_H

#include <stdio.h>

/*
 * Open path for appending.  An empty file (0 bytes, or a new one) gets
 * `header` as its first line; a file whose first line is not `header`
 * (another mode's header, or anything else) is refused, as is one that
 * cannot be opened or written: NULL after a message on standard error
 * naming `who` (e.g. "shemb-bench train").  The modes exit with status 2
 * then.
 */
FILE *bench_csv_open(const char *path, const char *header, const char *who);

/* One line: begin (the mode, the first column), the other fields in the
 * header's order, end (newline, and flushed, so that a run stopped half
 * way leaves whole lines).  Every call does nothing when f is NULL. */
void bench_csv_begin(FILE *f, const char *mode);
void bench_csv_str(FILE *f, const char *s);       /* NULL: empty */
void bench_csv_int(FILE *f, long long v);
void bench_csv_num(FILE *f, double v);            /* NaN: empty */
void bench_csv_end(FILE *f);

/*
 * Close f (nothing when NULL): 0 when every line reached the file, else
 * -1 after a message naming path and `who` (a full disk, say); the modes
 * exit with status 1 then.
 */
int bench_csv_close(FILE *f, const char *path, const char *who);

#endif
