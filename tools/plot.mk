# tools/plot.mk: rules of tools (included by Makefile.am)
#
# shemb-bench's CSV output and progress line, shared by every mode, and
# tools/shemb-plot, which draws the CSV files as PNG charts with gnuplot.
tools_shemb_bench_SOURCES += tools/bench_csv.c tools/bench_csv.h \
	tools/bench_progress.c tools/bench_progress.h tools/bench_cache_opts.c
# The script is made from shemb-plot.in with the places of its parts
# (sourced files, installed in $(pkgdatadir)/plot; else the source tree).
bin_SCRIPTS = tools/shemb-plot
plotlibdir = $(pkgdatadir)/plot
dist_plotlib_DATA = tools/plot/select.sh tools/plot/draw.sh \
	tools/plot/charts_lines.sh tools/plot/charts_bars.sh
EXTRA_DIST += tools/shemb-plot.in
MOSTLYCLEANFILES = tools/shemb-plot
tools/shemb-plot: $(srcdir)/tools/shemb-plot.in Makefile
	@$(MKDIR_P) tools
	$(AM_V_GEN)sed -e 's|@pkgdatadir[@]|$(pkgdatadir)|g' \
		-e 's|@abs_top_srcdir[@]|$(abs_top_srcdir)|g' \
		$(srcdir)/tools/shemb-plot.in > $@.tmp && \
		chmod +x $@.tmp && mv $@.tmp $@
dist_man1_MANS += man/man1/shemb-bench.1 man/man1/shemb-plot.1
# every mode's CSV checked on its own, then drawn (no timing judged)
TESTS += tests/plot.sh
EXTRA_DIST += tests/plot.sh
