# draw.sh - drawing with gnuplot: line and bar charts, their titles and names
# Sourced by tools/shemb-plot (see there); POSIX sh.

# ---- drawing ----

# gnuplot's single-quoted strings: a quote is written twice.
q() {
	printf '%s' "$1" | sed "s/'/''/g"
}

# A gnuplot string of the lines of TEXT: single-quoted strings joined by
# "\n" (a line break in a title).
gp_text() {
	say "$1" | run_awk -v sq="'" '{ gsub(sq, sq sq)
		printf "%s%s%s%s", (NR > 1 ? ".\"\\n\"." : ""), sq, $0, sq }'
}

# The chart's path: the CSV file's name, then what the chart shows (the
# file's name left out when it is the name of the chart's mode).
chart_path() {
	case $2 in
	"$base" | "$base"-*)
		case $known in
		*" $base "*)
			printf '%s/%s.png' "$outdir" "$2"
			return
			;;
		esac
		;;
	esac
	printf '%s/%s-%s.png' "$outdir" "$base" "$2"
}

# draw OUT: run gnuplot on $tmp/chart.gp, which writes OUT; never the
# same OUT twice in a run.
draw() {
	if grep -Fqx -- "$1" "$tmp/charts"; then
		die "$1 is drawn already (of another file or setup); not" \
			"drawn twice"
	fi
	say "$1" >> "$tmp/charts"
	if ! "$gnuplot" "$tmp/chart.gp" < /dev/null > "$tmp/gnuplot.out" \
		2>&1; then
		cat "$tmp/gnuplot.out" >&2
		die "gnuplot failed on $1"
	fi
	[ -s "$1" ] || die "gnuplot wrote nothing to $1"
	say "$1"
}

# line_chart OUT TITLE XLABEL YLABEL LOGX PLOTS [SET]: PLOTS is gnuplot's
# plot list; LOGX "yes" puts x on a log2 scale; SET, more settings.
line_chart() {
	gt=$(gp_text "$2")
	{
		say "$term"
		say "set output '$(q "$1")'"
		say "set title $gt"
		say "set xlabel '$(q "$3")'"
		say "set ylabel '$(q "$4")'"
		say "set grid"
		say "set key outside right top"
		say "set yrange [0:*]"
		say "set offsets graph 0.03, graph 0.03, 0, 0"
		[ "$5" = yes ] && say "set logscale x 2"
		say "${7:-}"
		say "plot $6"
	} > "$tmp/chart.gp"
	draw "$1"
}

# Bar data without its columns of no value (gnuplot refuses to draw a
# bar with no valid points): the number of columns left, then the table.
bars_kept_awk='
{
	for (i = 1; i <= NF; i++)
		cell[NR, i] = $i
	if (NF > nf)
		nf = NF
	if (NR > 1)
		for (i = 2; i <= NF; i++)
			if ($i != "NaN" && $i != "")
				keep[i] = 1
}
END {
	n = 1
	for (i = 2; i <= nf; i++)
		if (i in keep)
			n++
	print n
	for (r = 1; r <= NR; r++) {
		line = cell[r, 1]
		for (i = 2; i <= nf; i++)
			if (i in keep)
				line = line "\t" cell[r, i]
		print line
	}
}'

# bar_chart OUT TITLE YLABEL DATA: DATA is tab-separated, a header line
# naming the bars, then a group per line (its label first); nothing is
# drawn when no bar has a value.
bar_chart() {
	run_awk -F '\t' "$bars_kept_awk" "$4" > "$tmp/kept"
	ncol=$(sed -n 1p "$tmp/kept")
	[ "$ncol" -gt 1 ] || return 0
	sed 1d "$tmp/kept" > "$4"
	gt=$(gp_text "$2")
	{
		say "$term"
		say "set output '$(q "$1")'"
		say "set title $gt"
		say "set ylabel '$(q "$3")'"
		say "set datafile separator '\t'"
		say "set style data histograms"
		say "set style histogram clustered gap 1"
		say "set style fill solid 0.85 border -1"
		say "set grid ytics"
		say "set key outside right top"
		say "set yrange [0:*]"
		say "plot for [i=2:$ncol] '$(q "$4")' using i:xtic(1)" \
			"title columnheader(i)"
	} > "$tmp/chart.gp"
	draw "$1"
}

# Whether x of a series list (extract's "range XMIN XMAX NX") spans
# enough for a log scale.
logx() {
	run_awk '$1 == "range" {
		r = $2 > 0 && $3 >= 8 * $2 ? "yes" : "no"
		print r
		exit
	}' "$1"
}

# plot_list LIST TITLE_PREFIX DASH [COLOR_START]: gnuplot plot clauses of
# the series in LIST (extract's output), "TITLE_PREFIX VALUE" each.
plot_list() {
	run_awk -F '\t' -v pre="$2" -v dt="$3" -v c0="${4:-1}" '
		$1 == "range" || NF < 2 { next }
		{ gsub(/'\''/, "'\'''\''", $2)
		  printf "%s'\''%s'\'' using 1:2 with linespoints lw 2 pt 7 ", \
			 sep, $1
		  printf "dt %d lc %d title '\''%s%s'\''", dt, c0 + n, pre, $2
		  sep = ", "; n++ }' "$1"
}

# add_plots LIST TITLE_PREFIX DASH [COLOR_START]: plot_list's clauses
# added to $plots.
add_plots() {
	ap=$(plot_list "$@")
	plots=$(cat2 ', ' "$plots" "$ap")
}

