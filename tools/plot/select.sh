# select.sh - picking the points of a chart out of a CSV file with awk
# Sourced by tools/shemb-plot (see there); POSIX sh.

# ---- picking points out of a file ----

# What every program reading a CSV file starts with.  header() reads the
# header line: col[NAME] is a column's field number.  wanted() says
# whether the current line is one of the filter's, the filter being
# "COLUMN=VALUE" items, tab-separated (no field holds a tab), in
# $SHEMB_PLOT_FILTER (see with_filter); values compare as strings.
csv_awk='
function header(   i, n, fl, eq) {
	for (i = 1; i <= NF; i++)
		col[$i] = i
	nf = NF
	n = split(ENVIRON["SHEMB_PLOT_FILTER"], fl, "\t")
	nfl = 0
	for (i = 1; i <= n; i++) {
		eq = index(fl[i], "=")
		if (eq == 0)
			continue
		nfl++
		fk[nfl] = substr(fl[i], 1, eq - 1)
		fv[nfl] = substr(fl[i], eq + 1)
	}
}
function wanted(   j) {
	if (NF != nf)
		return 0
	for (j = 1; j <= nfl; j++)
		if (!(fk[j] in col) || $(col[fk[j]]) "" != fv[j] "")
			return 0
	return 1
}
function field(c) {
	return (c in col) ? $(col[c]) : ""
}
function nan(v) {
	return v == "" ? "NaN" : v
}
BEGIN { FS = "," }
'

# extract FILE FILTER X Y SERIES SCALE OUT: the points (X, Y * SCALE) of
# the lines of FILE that FILTER wants, a data file OUT.N per value of
# column SERIES (none: one series), points sorted by X, the later of two
# lines with the same X and series kept.
# X may be "a/b": column a over column b, times 100 (a percentage).
# Prints "range XMIN XMAX NX" (NX distinct X), then "PATH<tab>VALUE" per
# series, in the order of their values.
extract_awk=$csv_awk'
function need(c) {
	if (!(c in col)) {
		printf "%s: %s: no column \"%s\"\n", me, file, c | "cat 1>&2"
		bad = 1
		exit 1
	}
}
function less(a, b, num) {
	return num ? a + 0 < b + 0 : a < b
}
NR == 1 {
	header()
	for (j = 1; j <= nfl; j++)
		need(fk[j])
	nx = split(xc, xp, "/")
	need(xp[1])
	if (nx > 1)
		need(xp[2])
	need(yc)
	if (sc != "")
		need(sc)
	next
}
!wanted() { next }
{
	x = $(col[xp[1]])
	y = $(col[yc])
	if (x == "" || y == "")
		next
	if (nx > 1) {
		d = $(col[xp[2]])
		if (d == "" || d + 0 == 0)
			next
		x = sprintf("%.6g", 100 * x / d)
	}
	s = sc == "" ? "" : $(col[sc])
	if (!(s in sid)) {
		sid[s] = ++ns
		sname[ns] = s
		num = num == "" ? 1 : num
		if (s !~ /^-?[0-9.]+([eE][-+]?[0-9]+)?$/)
			num = 0
	}
	k = sid[s]
	if (!((k, x) in val)) {
		np[k]++
		px[k, np[k]] = x
	}
	val[k, x] = y * scale
	if (!(x in xs)) {
		xs[x] = 1
		ndx++
		if (ndx == 1 || x + 0 < xmin)
			xmin = x + 0
		if (ndx == 1 || x + 0 > xmax)
			xmax = x + 0
	}
}
END {
	if (bad)
		exit 1
	print "range", xmin + 0, xmax + 0, ndx + 0
	for (i = 1; i <= ns; i++)
		ord[i] = i
	for (i = 2; i <= ns; i++)
		for (j = i; j > 1; j--) {
			if (!less(sname[ord[j]], sname[ord[j - 1]], num))
				break
			t = ord[j]; ord[j] = ord[j - 1]; ord[j - 1] = t
		}
	for (i = 1; i <= ns; i++) {
		k = ord[i]
		for (a = 2; a <= np[k]; a++)
			for (b = a; b > 1; b--) {
				if (px[k, b] + 0 >= px[k, b - 1] + 0)
					break
				t = px[k, b]
				px[k, b] = px[k, b - 1]
				px[k, b - 1] = t
			}
		path = out "." i
		for (a = 1; a <= np[k]; a++)
			print px[k, a], val[k, px[k, a]] > path
		close(path)
		print path "\t" sname[k]
	}
}'

n_out=0
extract() {
	n_out=$((n_out + 1))
	with_filter "$2" -v me="$me" -v file="$1" -v xc="$3" -v yc="$4" \
		-v sc="$5" -v scale="$6" -v out="$tmp/d$n_out" \
		"$extract_awk" "$1" > "$7"
}

# values FILE FILTER COL...: the named columns of the last line that
# FILTER wants, a tab between them (nothing when none is).
values_awk=$csv_awk'
NR == 1 { header(); nc = split(cols, cn, " "); next }
wanted() {
	last = ""
	for (i = 1; i <= nc; i++)
		last = last (i > 1 ? "\t" : "") field(cn[i])
	found = 1
}
END { if (found) print last }'

values() {
	vf=$1
	vfilter=$2
	shift 2
	with_filter "$vfilter" -v cols="$*" "$values_awk" "$vf"
}

# distinct FILE FILTER COL: the distinct values of a column, in the order
# they first appear, a line each.
distinct() {
	with_filter "$2" -v c="$3" "$csv_awk"'
		NR == 1 { header(); next }
		wanted() && (c in col) && $(col[c]) != "" {
			v = $(col[c])
			if (!(v in seen)) { seen[v] = 1; print v }
		}' "$1"
}

# setups FILE FILTER COL...: the setups of the lines that FILTER wants,
# a setup being the values of the COLs (those in the header), in the
# order they first appear.  A line each, of three tab-separated parts: a
# name (the values of the columns that differ between the setups; empty
# when there is one setup), a title (every column's value), and a filter
# of the setup's lines.
setups_awk=$csv_awk'
function label(c, v) {
	if (v == "")
		return "no_" c
	return v ~ /^-?[0-9.]+([eE][-+]?[0-9]+)?$/ ? c v : v
}
NR == 1 {
	header()
	n = split(cols, cs, " ")
	for (i = 1; i <= n; i++)
		if (cs[i] in col)
			cn[++nc] = cs[i]
	next
}
wanted() {
	key = ""
	for (i = 1; i <= nc; i++)
		key = key "\t" cn[i] "=" $(col[cn[i]])
	if (key in seen)
		next
	seen[key] = ++ns
	flt[ns] = substr(key, 2)
	for (i = 1; i <= nc; i++)
		v[ns, i] = $(col[cn[i]]) ""
}
END {
	for (i = 1; i <= nc; i++)
		for (k = 2; k <= ns; k++)
			if (v[k, i] != v[1, i])
				differs[i] = 1
	for (k = 1; k <= ns; k++) {
		name = ""
		title = ""
		for (i = 1; i <= nc; i++) {
			if (i in differs)
				name = name (name == "" ? "" : "-") \
					label(cn[i], v[k, i])
			if (v[k, i] != "")
				title = title (title == "" ? "" : ", ") \
					cn[i] " " v[k, i]
		}
		print name "\t" title "\t" flt[k]
	}
}'

setups() {
	sf=$1
	sfilter=$2
	shift 2
	with_filter "$sfilter" -v cols="$*" "$setups_awk" "$sf"
}

# split_setup LINE: a line of setups as s_name (made a file name's),
# s_title (a line break, then the title; nothing when it is empty) and
# s_filter.
split_setup() {
	s_name=$(slug "${1%%"$tab"*}")
	s_rest=${1#*"$tab"}
	s_title=${s_rest%%"$tab"*}
	s_title=${s_title:+$nl$s_title}
	s_filter=${s_rest#*"$tab"}
}

