# charts_lines.sh - the line charts of lookup, backward and cache
# Sourced by tools/shemb-plot (see there); POSIX sh.

# ---- lookup and backward ----

# One chart of lookup or backward: against AXIS (batch or pooling), a
# line per value of OTHER.
sweep_chart() {
	file=$1 filter=$2 axis=$3 other=$4 ycol=$5 scale=$6 ylabel=$7
	name=$8 title=$9 base_filter=${10}
	extract "$file" "$filter" "$axis" "$ycol" "$other" "$scale" \
		"$tmp/list"
	lx=$(logx "$tmp/list")
	plots=
	add_plots "$tmp/list" "$other " 1
	if [ -n "$base_filter" ]; then
		extract "$file" "$base_filter" "$axis" "$ycol" "$other" \
			"$scale" "$tmp/blist"
		add_plots "$tmp/blist" "copy (baseline), $other " 2
	fi
	[ -n "$plots" ] || return 0
	if [ "$axis" = batch ]; then
		xlabel="bags per batch"
	else
		xlabel="ids per bag (pooling factor)"
	fi
	line_chart "$(chart_path "$file" "$name")" "$title" "$xlabel" \
		"$ylabel" "$lx" "$plots"
}

# Both charts of one filter: against the batch when it varies (or when
# nothing does), against the pooling factor when it varies.  What the
# chart is against goes at the end of the title's first line.
sweep_pair() {
	t1=${7%%"$nl"*}
	t2=${7#"$t1"}
	distinct "$1" "$2" batch > "$tmp/batches"
	distinct "$1" "$2" pooling > "$tmp/poolings"
	nb=$(wc -l < "$tmp/batches")
	npf=$(wc -l < "$tmp/poolings")
	if [ "$nb" -gt 1 ] || [ "$npf" -le 1 ]; then
		sweep_chart "$1" "$2" batch pooling "$3" "$4" "$5" "$6-batch" \
			"$t1 against batch size$t2" "$8"
	fi
	if [ "$npf" -gt 1 ]; then
		sweep_chart "$1" "$2" pooling batch "$3" "$4" "$5" \
			"$6-pooling" "$t1 against pooling factor$t2" "$8"
	fi
}

# The lines of lookup or backward that make a chart: those of one setup.
lookup_setups="rows dim dtype threads optimizer zipf_s"
backward_setups="rows dim dtype threads zipf_s"

# lookup_charts FILE DIST KIND: a pair per setup, the copy of the same
# setup its baseline.
lookup_charts() {
	flt="mode=lookup${tab}dist=$2${tab}variant=$3"
	copy="mode=lookup${tab}dist=$2${tab}variant=copy"
	setups "$1" "$flt" $lookup_setups > "$tmp/setups"
	while IFS= read -r s; do
		split_setup "$s"
		sweep_pair "$1" "$(cat2 "$tab" "$flt" "$s_filter")" \
			gb_per_s 1 "GB/s (rows read)" \
			"$(cat2 - "lookup-$(slug "$2")-$3" "$s_name")" \
			"lookup $3, $2$s_title" \
			"$(cat2 "$tab" "$copy" "$s_filter")"
	done < "$tmp/setups"
}

plot_lookup() {
	distinct "$1" mode=lookup dist > "$tmp/dists"
	while IFS= read -r dist; do
		lookup_charts "$1" "$dist" no_grad
		lookup_charts "$1" "$dist" train
	done < "$tmp/dists"
}

# backward_charts FILE OPTIMIZER DIST: a pair per setup.
backward_charts() {
	flt="mode=backward${tab}optimizer=$2${tab}dist=$3"
	setups "$1" "$flt" $backward_setups > "$tmp/setups"
	while IFS= read -r s; do
		split_setup "$s"
		sweep_pair "$1" "$(cat2 "$tab" "$flt" "$s_filter")" \
			rows_per_s 1e-6 "M rows updated per second" \
			"$(cat2 - "backward-$(slug "$2")-$(slug "$3")" \
				"$s_name")" \
			"backward $2, $3$s_title" ""
	done < "$tmp/setups"
}

plot_backward() {
	distinct "$1" mode=backward optimizer > "$tmp/optimizers"
	distinct "$1" mode=backward dist > "$tmp/dists"
	while IFS= read -r opt; do
		while IFS= read -r dist; do
			backward_charts "$1" "$opt" "$dist"
		done < "$tmp/dists"
	done < "$tmp/optimizers"
}

# ---- cache ----

cache_setups="rows batches batch_ids pooling window"

# cache_charts FILE TRACE: a chart per setup of the trace.
cache_charts() {
	setups "$1" "mode=cache${tab}trace=$2" $cache_setups > "$tmp/setups"
	while IFS= read -r s; do
		split_setup "$s"
		flt=$(cat2 "$tab" "mode=cache${tab}trace=$2" "$s_filter")
		plots=
		c=1
		for pol in lru lfu lookahead belady; do
			extract "$1" "$flt" slots/rows "${pol}_hit_rate" "" 1 \
				"$tmp/list"
			dt=1
			[ "$pol" = belady ] && dt=2
			add_plots "$tmp/list" "$pol" "$dt" "$c"
			c=$((c + 1))
		done
		[ -n "$plots" ] || continue
		lx=$(logx "$tmp/list")
		line_chart "$(chart_path "$1" \
				"$(cat2 - "cache-$(slug "$2")" "$s_name")")" \
			"cache hit rate, trace $2$s_title" \
			"device tier capacity, % of the rows" \
			"hit rate (1 - rows loaded / requests)" "$lx" "$plots"
	done < "$tmp/setups"
}

plot_cache() {
	distinct "$1" mode=cache trace > "$tmp/traces"
	while IFS= read -r tr; do
		cache_charts "$1" "$tr"
	done < "$tmp/traces"
}

