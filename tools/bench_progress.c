/*
 * bench_progress.c - the progress line of shemb-bench (bench_progress.h).
 *
 * The line is drawn with "\r", the text, and "ESC [K" (erase to the end of
 * the line), cut to the terminal's width so that it never wraps: a
 * wrapped line could not be rewritten in place.
 */
#define _GNU_SOURCE
#include "tools/bench_progress.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "tools/bench_util.h"

#define ERASE "\r\033[K"

bool bench_progress_on;

static struct {
	double start, drawn;  /* bench_now() at init and at the last draw */
	int total, index;     /* configurations of the run, the current */
	bool shown;           /* the line is on the terminal */
	char text[256];       /* the last text given */
} pg;

void bench_progress_init(void)
{
	bench_progress_on = isatty(STDERR_FILENO);
	memset(&pg, 0, sizeof(pg));
	pg.start = bench_now();
}

void bench_progress_plan(int total)
{
	pg.total = total;
	pg.index = 0;
}

void bench_progress_next(void)
{
	if (pg.index < pg.total)
		pg.index++;
}

static int columns(void)
{
	struct winsize ws;

	if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 8)
		return ws.ws_col;
	return 80;
}

static void draw(double now)
{
	char line[384];
	int sec = (int)(now - pg.start), n = 0, width = columns() - 1;

	if (pg.total > 1 && pg.index > 0)
		n = snprintf(line, sizeof(line), "[%d/%d] ", pg.index,
			     pg.total);
	snprintf(line + n, sizeof(line) - (size_t)n, "%s  %d:%02d", pg.text,
		 sec / 60, sec % 60);
	if ((int)strlen(line) > width)
		line[width] = '\0';
	fprintf(stderr, ERASE "%s", line);
	fflush(stderr);
	pg.drawn = now;
	pg.shown = true;
}

void bench_progress(const char *fmt, ...)
{
	double now;
	va_list ap;

	if (!bench_progress_on)
		return;
	va_start(ap, fmt);
	vsnprintf(pg.text, sizeof(pg.text), fmt, ap);
	va_end(ap);
	now = bench_now();
	/* a fast loop would spend its time writing to the terminal */
	if (!pg.shown || now - pg.drawn >= 0.05)
		draw(now);
}

void bench_progress_tick(void)
{
	double now;

	if (!bench_progress_on || !pg.text[0])
		return;
	now = bench_now();
	if (now - pg.drawn >= 1.0)
		draw(now);
}

void bench_progress_done(void)
{
	if (!bench_progress_on)
		return;
	if (pg.shown) {
		fputs(ERASE, stderr);
		fflush(stderr);
	}
	pg.shown = false;
	pg.text[0] = '\0';
}
