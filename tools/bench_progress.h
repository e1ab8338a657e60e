/*
 * bench_progress.h - one line of progress on standard error, rewritten in
 * place, while shemb-bench runs: what is being measured, which of the
 * run's configurations it is, and the time since the run began.
 *
 * Only when standard error is a terminal (bench_progress_init); otherwise
 * every call does nothing, so that logs and tests see no progress at all.
 */
#ifndef SHEMB_BENCH_PROGRESS_H
#define SHEMB_BENCH_PROGRESS_H

#include <stdbool.h>

extern bool bench_progress_on; /* standard error is a terminal */

/* Turn progress on when standard error is a terminal; the elapsed time
 * counts from here. */
void bench_progress_init(void);

/* A run of `total` configurations (a sweep): once the first has begun,
 * the line starts with "[i/total]", i counted by bench_progress_next(). */
void bench_progress_plan(int total);
void bench_progress_next(void);

/* What is being done now: the line is redrawn (at most 20 times a
 * second) with this text and the elapsed time. */
void bench_progress(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

/* Redraw the last text with the elapsed time brought up to date, at most
 * once a second: for loops that wait on a child process. */
void bench_progress_tick(void);

/* Erase the line, before anything is printed on the terminal; the next
 * bench_progress() draws it again. */
void bench_progress_done(void);

#endif
