# tools/plot.mk: rules of tools (included by Makefile.am)
#
# shemb-bench's CSV output and progress line, shared by every mode, and
# tools/shemb-plot, which draws the CSV files as PNG charts with gnuplot.
tools_shemb_bench_SOURCES += tools/bench_csv.c tools/bench_csv.h \
	tools/bench_progress.c tools/bench_progress.h tools/bench_cache_opts.c
dist_bin_SCRIPTS = tools/shemb-plot
dist_man1_MANS += man/man1/shemb-bench.1 man/man1/shemb-plot.1
# every mode's CSV checked on its own, then drawn (no timing judged)
TESTS += tests/plot.sh
EXTRA_DIST += tests/plot.sh
