# charts_bars.sh - the charts of train, gpu, checkpoint, sched and comm
# Sourced by tools/shemb-plot (see there); POSIX sh.

# ---- train, gpu, checkpoint: bars ----

# pivot FILE FILTER ROW COL VALUE SCALE SUFFIX: a table, a line per value
# of column ROW (in order of appearance; SUFFIX after it), a column per
# value of COL.
pivot_awk=$csv_awk'
NR == 1 { header(); next }
wanted() {
	r = field(rc)
	c = field(cc)
	v = field(vc)
	if (!(r in rs)) { rs[r] = 1; ro[++nr] = r }
	if (!(c in cs)) { cs[c] = 1; co[++nc] = c }
	val[r, c] = v == "" ? "NaN" : v * scale
}
END {
	printf "group"
	for (j = 1; j <= nc; j++)
		printf "\t%s", co[j]
	print ""
	for (i = 1; i <= nr; i++) {
		printf "%s%s", ro[i], suffix
		for (j = 1; j <= nc; j++) {
			v = ((ro[i], co[j]) in val) ? val[ro[i], co[j]] : "NaN"
			printf "\t%s", v
		}
		print ""
	}
}'

pivot() {
	with_filter "$2" -v rc="$3" -v cc="$4" -v vc="$5" -v scale="$6" \
		-v suffix="$7" "$pivot_awk" "$1"
}

train_setups="batch scale wire pool_at deterministic"

# train_charts FILE PROVIDER: bytes and steps per setup.
train_charts() {
	setups "$1" "mode=train${tab}provider=$2" $train_setups \
		> "$tmp/setups"
	while IFS= read -r s; do
		split_setup "$s"
		flt=$(cat2 "$tab" "mode=train${tab}provider=$2" "$s_filter")
		what="($2)$s_title"
		name=$(cat2 - "$(slug "$2")" "$s_name")
		# bytes in MiB: times 1 / 2^20
		pivot "$1" "$flt" ranks exchange sent_bytes_per_rank \
			9.5367431640625e-07 " ranks" > "$tmp/bars"
		bar_chart "$(chart_path "$1" "train-bytes-$name")" \
			"train: bytes a rank sends per step $what" \
			"MiB sent per rank per step" "$tmp/bars"
		pivot "$1" "$flt" ranks exchange steps_per_s 1 " ranks" \
			> "$tmp/bars"
		bar_chart "$(chart_path "$1" "train-steps-$name")" \
			"train: steps per second $what" \
			"steps per second" "$tmp/bars"
	done < "$tmp/setups"
}

plot_train() {
	distinct "$1" mode=train provider > "$tmp/providers"
	while IFS= read -r p; do
		train_charts "$1" "$p"
	done < "$tmp/providers"
}

# A group of bars per configuration (the later line of two alike).
plot_gpu() {
	with_filter mode=gpu "$csv_awk"'
		NR == 1 { header()
			  print "group\tlibshemb lookup\tdevice copy\t" \
				"torch embedding_bag"
			  next }
		wanted() {
			g = field("batch") " x " field("pooling") ", " \
			    field("rows") " x " field("dim") " " field("dtype")
			if (field("device") != "" && field("device") != 0)
				g = g ", device " field("device")
			if (!(g in seen)) { seen[g] = 1; order[++n] = g }
			line[g] = g "\t" nan(field("lookup_gbps")) "\t" \
				nan(field("copy_gbps")) "\t" \
				nan(field("torch_gbps"))
		}
		END { for (i = 1; i <= n; i++) print line[order[i]] }' \
		"$1" > "$tmp/bars"
	bar_chart "$(chart_path "$1" gpu)" \
		"gpu: pooled lookups on the device (bags x ids, rows x dim)" \
		"GB/s (rows read)" "$tmp/bars"
}

ckpt_setups="rows dim optimizer"

# ckpt_io FILE FILTER NAME SETUP: save and load against dd (the later
# line of each); NAME and SETUP (a line break first), the setup's.
ckpt_io() {
	with_filter "$2" "$csv_awk"'
		NR == 1 { header(); print "group\tlibshemb\tdd"; next }
		wanted() {
			m = field("measure")
			if (m == "save" || m == "load")
				v[m] = m "\t" nan(field("gbps")) "\t" \
					nan(field("baseline_gbps"))
		}
		END { if ("save" in v) print v["save"]
		      if ("load" in v) print v["load"] }' "$1" > "$tmp/bars"
	[ "$(wc -l < "$tmp/bars")" -gt 1 ] || return 0
	bar_chart "$(chart_path "$1" "$(cat2 - checkpoint-io "$3")")" \
		"checkpoint: save and load against dd (same bytes)$4" \
		"GB/s" "$tmp/bars"
}

# ckpt_serving FILE FILTER NAME SETUP: lookups per second against
# threads.
ckpt_serving() {
	extract "$1" "$(cat2 "$tab" "$2" measure=serve)" threads \
		lookups_per_s dtype 1 "$tmp/list"
	plots=
	add_plots "$tmp/list" "rows " 1
	[ -n "$plots" ] || return 0
	lx=$(logx "$tmp/list")
	line_chart "$(chart_path "$1" "$(cat2 - checkpoint-serving "$3")")" \
		"checkpoint: serving a read-only table$4" \
		"threads looking up at once" "lookups per second" "$lx" "$plots"
}

plot_checkpoint() {
	setups "$1" mode=checkpoint $ckpt_setups > "$tmp/setups"
	while IFS= read -r s; do
		split_setup "$s"
		flt=$(cat2 "$tab" mode=checkpoint "$s_filter")
		ckpt_io "$1" "$flt" "$s_name" "$s_title"
		ckpt_serving "$1" "$flt" "$s_name" "$s_title"
	done < "$tmp/setups"
}

# ---- sched: three panels of bars, of the file's last line ----

plot_sched() {
	v=$(values "$1" mode=sched ranks provider alone_us loaded_us \
		comm_ms blocking_ms started_ms first_table_ms whole_lookup_ms \
		off_host_blocking_ms off_host_started_ms)
	[ -n "$v" ] || return 0
	# files of other versions have no off-host columns: no such bars
	say "$v" | run_awk -F '\t' -v d="$tmp" '
		{ print "alone\t" $3 > (d "/s1")
		  print "loaded\t" $4 > (d "/s1")
		  print "alone\t" $5 > (d "/s2")
		  print "blocking\t" $6 > (d "/s2")
		  print "started\t" $7 > (d "/s2")
		  if ($10 != "" && $11 != "") {
			print "blocking*\t" $10 > (d "/s2")
			print "started*\t" $11 > (d "/s2")
		  }
		  print "first\t" $8 > (d "/s3")
		  print "all 4\t" $9 > (d "/s3")
		  print $1 " ranks, " $2 > (d "/s0") }'
	out=$(chart_path "$1" sched)
	{
		say "$term" | sed 's/960,600/1200,600/'
		say "set output '$(q "$out")'"
		say "set datafile separator '\t'"
		say "set style data histograms"
		say "set style fill solid 0.85 border -1"
		say "set boxwidth 0.7"
		say "set offsets 0, 0, graph 0.05, 0"
		say "set key off"
		say "set grid ytics"
		say "set yrange [0:*]"
		say "set multiplot layout 1,3 title 'shemb-bench sched:" \
			"$(q "$(cat "$tmp/s0")")'"
		say "set title \"alltoallv, 4 KiB a peer:\\nalone, and" \
			"behind a 64 MiB allreduce\""
		say "set ylabel 'microseconds'"
		say "plot '$tmp/s1' using 2:xtic(1) lc 1"
		say "set title \"training step: embedding alone, with\\n" \
			"compute blocking and started (*: compute off host)\""
		say "set ylabel 'milliseconds'"
		say "set xtics rotate by 30 right"
		say "plot '$tmp/s2' using 2:xtic(1) lc 2"
		say "set xtics norotate"
		say "set title \"lookup of 4 tables, started:\\nfirst" \
			"table final, all final\""
		say "plot '$tmp/s3' using 2:xtic(1) lc 3"
		say "unset multiplot"
	} > "$tmp/chart.gp"
	draw "$out"
}

# ---- comm ----

comm_setups="mpi_transport chunk_bytes progress"

# comm_charts FILE PROVIDER: a chart per setup.
comm_charts() {
	setups "$1" "mode=comm${tab}provider=$2" $comm_setups > "$tmp/setups"
	while IFS= read -r s; do
		split_setup "$s"
		pflt=$(cat2 "$tab" "mode=comm${tab}provider=$2" "$s_filter")
		plots=
		c=1
		lx=no
		distinct "$1" "$pflt" ranks > "$tmp/ranks"
		while IFS= read -r r; do
			flt="$pflt${tab}ranks=$r"
			extract "$1" "$flt" size_bytes shemb_a2a_gbps "" 1 \
				"$tmp/list"
			lx=$(logx "$tmp/list")
			add_plots "$tmp/list" "libshemb, $r ranks" 1 "$c"
			extract "$1" "$flt" size_bytes mpi_a2a_gbps "" 1 \
				"$tmp/list"
			add_plots "$tmp/list" "OpenMPI, $r ranks" 2 "$c"
			c=$((c + 1))
		done < "$tmp/ranks"
		extract "$1" "$pflt" size_bytes raw_gbps "" 1 "$tmp/list"
		add_plots "$tmp/list" "raw libfabric stream" 3 8
		[ -n "$plots" ] || continue
		title="comm: alltoallv, a rank sending SIZE per call"
		line_chart "$(chart_path "$1" \
				"$(cat2 - "comm-$(slug "$2")" "$s_name")")" \
			"$title ($2)$s_title" \
			"bytes a rank sends per call" \
			"GB/s a rank sends (median)" "$lx" "$plots" \
			"set format x '%.0b %BB'"
	done < "$tmp/setups"
}

plot_comm() {
	distinct "$1" mode=comm provider > "$tmp/providers"
	while IFS= read -r p; do
		comm_charts "$1" "$p"
	done < "$tmp/providers"
}

