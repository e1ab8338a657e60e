/*
 * progress.c - training progress on standard error: a bar redrawn in
 * place on a terminal, else a plain line at each tenth of the work (a log
 * file or a launcher's pipe then gets whole lines).
 */
#define _POSIX_C_SOURCE 200809L  /* clock_gettime, isatty */
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "word2vec.h"

#define BAR_WIDTH 30
#define REDRAW_S 0.1

double w2v_seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void w2v_progress_start(struct w2v_progress *p, bool quiet,
			int64_t total_words)
{
	p->tty = isatty(STDERR_FILENO);
	p->quiet = quiet;
	p->t0 = w2v_seconds();
	p->last_draw = 0;
	p->total_words = total_words > 0 ? total_words : 1;
	p->next_line = 1;
	p->shown_loss = 0;
	p->shown_pairs = 0;
	p->shown_mean = 0;
}

static void draw_bar(double frac, double loss, float lr, double rate)
{
	static const char hashes[] = "##############################";
	int fill = (int)(frac * BAR_WIDTH);

	fprintf(stderr, "\r[%.*s%*s] %3d%%  loss %.4f  lr %.5f  "
		"%.0f words/s ", fill, hashes, BAR_WIDTH - fill, "",
		(int)(frac * 100), loss, lr, rate);
	fflush(stderr);
}

/* The mean loss per pair since the last output (the last mean when no
 * pair was done since), and a new start. */
static double recent_loss(struct w2v_progress *p, double loss,
			  double pairs)
{
	double dl = loss - p->shown_loss, dp = pairs - p->shown_pairs;

	if (dp > 0)
		p->shown_mean = dl / dp;
	p->shown_loss = loss;
	p->shown_pairs = pairs;
	return p->shown_mean;
}

/* words: trained so far by all ranks; loss and pairs: of all the steps
 * so far.  Nothing is shown before the first step is done. */
void w2v_progress_update(struct w2v_progress *p, int64_t words,
			 double loss, double pairs, float lr)
{
	double now = w2v_seconds(), el = now - p->t0;
	double frac = (double)words / (double)p->total_words;

	if (p->quiet || el <= 0 || pairs <= 0)
		return;
	if (frac > 1)
		frac = 1;
	if (p->tty) {
		if (now - p->last_draw >= REDRAW_S || frac >= 1) {
			draw_bar(frac, recent_loss(p, loss, pairs), lr,
				 (double)words / el);
			p->last_draw = now;
		}
		return;
	}
	if (frac * 10 >= p->next_line) {
		double mean = recent_loss(p, loss, pairs);

		fprintf(stderr, "progress %3d%%  loss %.4f  lr %.5f  "
			"%.0f words/s\n", (int)(frac * 100), mean, lr,
			(double)words / el);
		while (frac * 10 >= p->next_line)
			p->next_line++;
	}
}

void w2v_progress_end(struct w2v_progress *p)
{
	if (p->tty && !p->quiet)
		fputc('\n', stderr);
}
