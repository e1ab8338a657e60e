#!/bin/sh
# plot.sh - shemb-bench --csv FILE in every mode that runs on this host,
# on tiny sizes, each file checked on its own: one header, a line per
# measured configuration, numbers where numbers belong, and every ratio
# equal to the figures it is made of; a file with another mode's columns
# refused and left as it was.  Then tools/shemb-plot draws the files and
# every chart it should make is a PNG.  No timing is judged.  The
# plotting part is skipped (77) when gnuplot is not installed.
set -u
. "$top_srcdir/tests/smoke.sh"
plot=$top_builddir/tools/shemb-plot

# check_csv FILE MODE LINES REQUIRED OPTIONAL RATIOS: FILE's header starts
# with "mode"; LINES lines of MODE follow, each with the header's number
# of fields; the REQUIRED columns hold numbers on every line, the
# OPTIONAL ones numbers or nothing.  Each of RATIOS, "r=a/b" or
# "r=a-b/c", holds within the rounding of the fields (6 significant
# digits) wherever its fields are all there, and on one line at least
# unless it starts with "?".
check_csv() {
	awk -F, -v mode="$2" -v want="$3" -v req="$4" -v opt="$5" \
		-v ratios="$6" '
	function num(v) {
		return v ~ /^-?[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?$/
	}
	function abs(x) {
		return x < 0 ? -x : x
	}
	function err(m) {
		printf "  %s line %d: %s\n", FILENAME, NR, m
		bad = 1
	}
	function need(c) {
		if (c != "" && !(c in col))
			err("no column " c)
	}
	NR == 1 {
		if ($1 != "mode")
			err("the header does not start with mode")
		nf = NF
		for (i = 1; i <= NF; i++)
			col[$i] = i
		nrq = split(req, rq, " ")
		nop = split(opt, op, " ")
		for (i = 1; i <= nrq; i++)
			need(rq[i])
		for (i = 1; i <= nop; i++)
			need(op[i])
		nq = split(ratios, rs, " ")
		for (i = 1; i <= nq; i++) {
			s = rs[i]
			may[i] = sub(/^\?/, "", s)
			eq = index(s, "=")
			rn[i] = substr(s, 1, eq - 1)
			s = substr(s, eq + 1)
			sl = index(s, "/")
			rd[i] = substr(s, sl + 1)
			s = substr(s, 1, sl - 1)
			mi = index(s, "-")
			ra[i] = mi ? substr(s, 1, mi - 1) : s
			rb[i] = mi ? substr(s, mi + 1) : ""
			need(rn[i]); need(ra[i]); need(rb[i]); need(rd[i])
		}
		if (bad)
			exit 1
		next
	}
	{
		n++
		if (NF != nf) {
			err(NF " fields, the header has " nf)
			next
		}
		if ($1 != mode)
			err("mode " $1 ", not " mode)
		for (i = 1; i <= nrq; i++)
			if (!num($(col[rq[i]])))
				err(rq[i] " is \"" $(col[rq[i]]) "\"")
		for (i = 1; i <= nop; i++) {
			v = $(col[op[i]])
			if (v != "" && !num(v))
				err(op[i] " is \"" v "\"")
		}
		for (i = 1; i <= nq; i++) {
			r = $(col[rn[i]])
			a = $(col[ra[i]])
			b = rb[i] == "" ? 0 : $(col[rb[i]])
			d = $(col[rd[i]])
			if (r == "" || a == "" || b == "" || d == "" ||
			    d + 0 == 0)
				continue
			e = (a - b) / d
			tol = (abs(a) + abs(b)) / abs(d) + abs(e)
			tol = 2e-5 * tol + 1e-12
			if (abs(r - e) > tol)
				err(rn[i] " is " r "; " rs[i] " gives " e)
			done[i]++
		}
	}
	END {
		if (n != want) {
			printf "  %s: %d lines of figures, not %d\n", FILENAME,
				n, want
			bad = 1
		}
		for (i = 1; i <= nq; i++)
			if (!done[i] && !may[i]) {
				printf "  %s: no line to check %s on\n",
					FILENAME, rs[i]
				bad = 1
			}
		exit bad
	}' "$1" || fail "$1 is not what $2 should write"
	echo "  $1: $3 lines of $2, checked"
}

# lookup's vs_copy is the median of ratios of measurements taken back to
# back: with one repetition, the copy's median_ms over the lookup's, of
# the copy line of the same distribution, batch and pooling factor.
check_vs_copy() {
	awk -F, '
	NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
	{ k = $(col["dist"]) SUBSEP $(col["batch"]) SUBSEP $(col["pooling"])
	  if ($(col["variant"]) == "copy") {
		  copy[k] = $(col["median_ms"])
		  next
	  }
	  n++
	  key[n] = k
	  ms[n] = $(col["median_ms"])
	  r[n] = $(col["vs_copy"]) }
	END { for (i = 1; i <= n; i++) {
		  e = copy[key[i]] / ms[i]
		  d = r[i] - e
		  if (!(key[i] in copy) || d > 5e-5 * e || d < -5e-5 * e) {
			  print "  vs_copy " r[i] " of line " i ", expected " e
			  bad = 1
		  }
	  }
	  exit bad || n == 0 }' "$1" || fail "$1: vs_copy is not copy / lookup"
}

# refuse MODE ARGS... FILE: MODE with --csv FILE (another mode's, or
# not a CSV file of ours) exits with status 2, says why, and leaves FILE
# as it was.
refuse() {
	m=$1
	shift
	eval "f=\${$#}"
	cp "$f" "$tmp/before"
	timeout 60 "$bench" "$m" "$@" > "$tmp/refuse.out" 2>&1
	rc=$?
	[ "$rc" -eq 2 ] || fail "$m with --csv $f exited $rc, not 2"
	grep -q -e 'holds the columns of another measurement' \
		-e 'its first line is empty' "$tmp/refuse.out" ||
		fail "$m: no reason given for refusing $f"
	cmp -s "$f" "$tmp/before" || fail "$m changed $f while refusing it"
}

csvs=
lookup_args="--rows 10000 --dim 16 --threads 1 --reps 1"

# ---- lookup and backward: a 2 x 2 sweep of batch and pooling factor

run lookup timeout 120 "$bench" lookup $lookup_args --batch 32,64 \
	--pooling-factor 2,4 --csv "$tmp/lookup.csv"
# 4 configurations x 2 distributions x 3 kinds (no_grad, train, copy)
check_csv "$tmp/lookup.csv" lookup 24 \
	"rows dim pooling batch threads reps best_ms median_ms ids_per_s
	 rows_per_s gb_per_s" "zipf_s vs_copy" ""
check_vs_copy "$tmp/lookup.csv"
need lookup lookup_vs_copy
need lookup lookup_train_vs_copy
grep -q '^== configuration 4 of 4: 64 bags x 4 ids' "$tmp/lookup.out" ||
	fail "lookup: no heading for the fourth configuration"
# a second run appends its lines under the same header
run lookup1 timeout 60 "$bench" lookup $lookup_args --batch 32 \
	--pooling-factor 2 --dist zipf --csv "$tmp/lookup.csv"
[ "$(grep -c '^mode,' "$tmp/lookup.csv")" -eq 1 ] ||
	fail "the second run wrote a second header"
[ "$(wc -l < "$tmp/lookup.csv")" -eq 28 ] ||
	fail "lookup.csv: not 27 lines of figures after the second run"
csvs="$csvs lookup.csv"

run backward timeout 120 "$bench" backward $lookup_args --batch 32,64 \
	--pooling-factor 2,4 --csv "$tmp/backward.csv"
# 2 optimizers x 4 configurations x 2 distributions
check_csv "$tmp/backward.csv" backward 16 \
	"rows dim pooling batch best_ms median_ms ids_per_s rows_per_s" \
	"gb_per_s vs_copy" ""
need backward backward_rows_per_s
csvs="$csvs backward.csv"
if [ -s "$tmp/lookup.err" ] || [ -s "$tmp/backward.err" ]; then
	fail "progress was written, and stderr is not a terminal"
fi

# ---- cache: a list of capacities

run cache timeout 120 "$bench" cache --quick --capacity 5,25 \
	--csv "$tmp/cache.csv"
# 4 traces x 2 capacities; the throughput on one line, at 5%
check_csv "$tmp/cache.csv" cache 8 \
	"rows used_rows batches batch_ids capacity_pct slots depth
	 lru_hit_rate lfu_hit_rate lookahead_hit_rate belady_hit_rate" \
	"lookahead_over_belady tier_ids_per_s resident_ids_per_s
	 tier_vs_resident tier_lookup_ids_per_s resident_lookup_ids_per_s
	 tier_lookups_vs_resident" \
	"lookahead_over_belady=lookahead_hit_rate/belady_hit_rate
	 tier_vs_resident=tier_ids_per_s/resident_ids_per_s
	 $(printf '%s=%s/%s' tier_lookups_vs_resident tier_lookup_ids_per_s \
		resident_lookup_ids_per_s)"
need cache hit_belady_25
grep -q '^result lookahead_vs_belady_5 ' "$tmp/cache.out" ||
	fail "cache: the throughput's capacity is not the one nearest 10%"
csvs="$csvs cache.csv"

# ---- checkpoint

mkdir "$tmp/ckpt"
run ckpt timeout 120 "$bench" checkpoint --rows 5000 --dim 16 --reps 1 \
	--dir "$tmp/ckpt" --csv "$tmp/checkpoint.csv"
# save and load, then 3 row types x 4 thread counts
check_csv "$tmp/checkpoint.csv" checkpoint 14 "rows dim reps vs_baseline" \
	"threads bytes ms gbps lookups_per_s baseline_ms baseline_gbps
	 baseline_lookups_per_s" \
	"vs_baseline=gbps/baseline_gbps
	 vs_baseline=lookups_per_s/baseline_lookups_per_s"
csvs="$csvs checkpoint.csv"

# ---- gpu, when this host has one

timeout 120 "$bench" gpu --rows 5000 --dim 64 --batch 300 \
	--pooling-factor 7 --reps 3 --python none --csv "$tmp/gpu.csv" \
	> "$tmp/gpu.out" 2>&1
rc=$?
case $rc in
0)
	check_csv "$tmp/gpu.csv" gpu 1 \
		"rows dim pooling batch bytes lookup_ms lookup_gbps" \
		"copy_ms copy_gbps torch_ms torch_gbps vs_copy vs_torch" \
		"vs_copy=copy_ms/lookup_ms ?vs_torch=torch_ms/lookup_ms"
	csvs="$csvs gpu.csv"
	refuse gpu --rows 5000 --dim 64 --batch 300 --pooling-factor 7 \
		--reps 1 --python none --csv "$tmp/cache.csv"
	;;
77)
	# no CUDA device, or a build without CUDA; 2 (bad options, a CSV
	# file refused) is a failure
	echo "  gpu: no CUDA device or build here, left out"
	[ ! -e "$tmp/gpu.csv" ] || fail "gpu wrote a CSV file without a device"
	;;
*)
	fail "shemb-bench gpu exited $rc"
	;;
esac

# ---- comm, train and sched: ranks over libfabric's shm provider

if grep -q '^#define HAVE_LIBFABRIC 1' "$top_builddir/config.h"; then
	mpi=--no-mpi
	if [ -x "$top_builddir/tools/shemb-bench-mpi" ] &&
		command -v mpirun > /dev/null 2>&1; then
		mpi=
	fi
	run comm timeout 120 "$bench" comm --ranks 2 --sizes 64K,256K \
		--provider shm --reps 2 --passes 1 --raw-total 4M \
		--raw-iters 2 --timeout 15 --csv "$tmp/comm.csv" $mpi
	check_csv "$tmp/comm.csv" comm 2 \
		"ranks size_bytes shemb_reps mpi_reps shemb_a2a_gbps" \
		"mpi_a2a_gbps a2a_vs_mpi raw_gbps a2a_vs_raw
		 shemb_allreduce_gbps mpi_allreduce_gbps chunk_bytes
		 raw_load_gbps a2a_vs_raw_load" \
		"a2a_vs_raw=shemb_a2a_gbps/raw_gbps
		 ?a2a_vs_mpi=shemb_a2a_gbps/mpi_a2a_gbps
		 a2a_vs_raw_load=shemb_a2a_gbps/raw_load_gbps"
	csvs="$csvs comm.csv"

	run train timeout 120 "$bench" train -n 2 --scale 200 --batch 64 \
		--steps 2 --passes 1 --timeout 60 --csv "$tmp/train.csv"
	# one line per exchange: libshemb, dense, allgather
	check_csv "$tmp/train.csv" train 3 \
		"ranks batch scale steps passes step_ms steps_per_s
		 sent_bytes_per_rank recv_bytes_per_rank libshemb_step_ms
		 libshemb_sent_bytes_per_rank libshemb_speedup
		 libshemb_bytes_ratio rowwise_imbalance colwise_imbalance" "" \
		"$(printf '%s=%s/%s' libshemb_bytes_ratio \
			libshemb_sent_bytes_per_rank sent_bytes_per_rank)
		 libshemb_speedup=step_ms/libshemb_step_ms"
	for x in libshemb dense allgather; do
		grep -q "^train,.*,$x," "$tmp/train.csv" ||
			fail "train.csv has no line of $x"
	done
	csvs="$csvs train.csv"

	run sched timeout 120 "$bench" sched -n 2 --steps 3 --reps 2 \
		--compute-us 100 --csv "$tmp/sched.csv"
	check_csv "$tmp/sched.csv" sched 1 \
		"ranks chunk_bytes chunks_in_flight alone_us loaded_us
		 priority_latency_vs_alone comm_ms blocking_ms started_ms
		 comm_hidden_fraction first_table_ms whole_lookup_ms
		 first_table_vs_whole_lookup comm_cpus_busy
		 off_host_blocking_ms off_host_started_ms
		 comm_hidden_fraction_compute_off_host first_table_auto_ms
		 whole_lookup_auto_ms first_table_vs_whole_lookup_auto" "" \
		"priority_latency_vs_alone=loaded_us/alone_us
		 first_table_vs_whole_lookup=first_table_ms/whole_lookup_ms
		 $(printf '%s=%s/%s' first_table_vs_whole_lookup_auto \
			first_table_auto_ms whole_lookup_auto_ms)
		 comm_hidden_fraction=blocking_ms-started_ms/comm_ms
		 $(printf '%s=%s-%s/comm_ms' \
			comm_hidden_fraction_compute_off_host \
			off_host_blocking_ms off_host_started_ms)"
	grep -q '^@sched' "$tmp/sched.out" && fail "sched showed rank 0's tags"
	csvs="$csvs sched.csv"

	refuse train -n 2 --steps 1 --csv "$tmp/sched.csv"
	refuse sched -n 2 --csv "$tmp/train.csv"
	refuse comm --ranks 2 --sizes 64K --csv "$tmp/lookup.csv"
else
	echo "  comm, train, sched: no libfabric in this build, left out"
fi

# ---- a file of other columns is refused, by every kind of mode

refuse lookup $lookup_args --csv "$tmp/cache.csv"
refuse backward $lookup_args --csv "$tmp/checkpoint.csv"
refuse cache --quick --csv "$tmp/lookup.csv"
refuse checkpoint --rows 100 --csv "$tmp/cache.csv"
echo "  a file of other columns: refused, left unchanged"

# a file of other content whose first line is empty is no new file
{ echo; echo 'not,ours'; } > "$tmp/blank.csv"
refuse lookup $lookup_args --csv "$tmp/blank.csv"
refuse cache --quick --csv "$tmp/blank.csv"
echo "  a file with an empty first line: refused, left unchanged"

# lines that do not reach the file (here past a file size limit, with
# SIGXFSZ ignored so that writes fail with EFBIG) fail the run
(
	trap '' XFSZ
	ulimit -f 1
	exec timeout 120 "$bench" lookup $lookup_args --batch 32,64 \
		--pooling-factor 2,4 --csv "$tmp/full.csv"
) > /dev/null 2> "$tmp/full.err"
rc=$?
[ "$rc" -eq 1 ] || fail "lookup exited $rc with lines missing from its CSV"
grep -q "could not write every line to $tmp/full.csv" "$tmp/full.err" ||
	fail "lookup did not say that $tmp/full.csv lacks lines"
echo "  lines that did not reach the file: exit status 1"

# ---- shemb-plot

if GNUPLOT=/nonexistent/gnuplot sh "$plot" "$tmp/lookup.csv" \
	> "$tmp/nognu.out" 2>&1; then
	fail "shemb-plot ran without gnuplot"
fi
grep -q 'gnuplot-nox' "$tmp/nognu.out" ||
	fail "shemb-plot did not name gnuplot-nox"
# awk failing (as a broken awk program would) is status 1, not 2
mkdir "$tmp/badawk"
printf '#!/bin/sh\nexit 2\n' > "$tmp/badawk/awk"
chmod +x "$tmp/badawk/awk"
PATH="$tmp/badawk:$PATH" sh "$plot" -o "$tmp/png" "$tmp/lookup.csv" \
	> "$tmp/badawk.out" 2>&1
rc=$?
[ "$rc" -eq 1 ] || fail "shemb-plot exited $rc when awk failed, not 1"
grep -q '^shemb-plot: awk failed' "$tmp/badawk.out" ||
	fail "shemb-plot did not say that awk failed"
if ! command -v gnuplot > /dev/null 2>&1; then
	echo "CSV files checked; gnuplot is not installed: plotting skipped"
	exit 77
fi

sh "$plot" --help > "$tmp/help.out" || fail "shemb-plot --help exited $?"
grep -q '^Usage: shemb-plot' "$tmp/help.out" || fail "shemb-plot --help"
printf 'a,b\n1,2\n' > "$tmp/other.csv"
for bad in "$tmp/nothere.csv" "$tmp/other.csv"; do
	if sh "$plot" -o "$tmp/png" "$bad" > "$tmp/bad.out" 2>&1; then
		fail "shemb-plot took $bad"
	fi
	grep -q "^shemb-plot: $bad: " "$tmp/bad.out" ||
		fail "shemb-plot gave no reason for refusing $bad"
done

files=
for c in $csvs; do
	files="$files $tmp/$c"
done
echo "+ shemb-plot -o $tmp/png$files"
timeout 120 sh "$plot" -o "$tmp/png" $files > "$tmp/plot.out" \
	2> "$tmp/plot.err" || fail "shemb-plot exited $?"

# the charts each file should give
want=
for d in zipf uniform; do
	for v in no_grad train; do
		want="$want lookup-$d-$v-batch lookup-$d-$v-pooling"
	done
	for o in adagrad sgd; do
		want="$want backward-$o-$d-batch backward-$o-$d-pooling"
	done
done
want="$want cache-zipf-0.9 cache-zipf-1.05 cache-zipf-1.2 cache-uniform"
want="$want checkpoint-io checkpoint-serving"
case $csvs in *gpu.csv*) want="$want gpu" ;; esac
case $csvs in
*comm.csv*) want="$want comm-shm train-bytes-shm train-steps-shm sched" ;;
esac

sig=89504e470d0a1a0a
for w in $want; do
	png=$tmp/png/$w.png
	[ -f "$png" ] || fail "shemb-plot made no $w.png"
	grep -qx "$png" "$tmp/plot.out" || fail "shemb-plot did not name $png"
	[ "$(od -An -tx1 -N8 "$png" | tr -d ' \n')" = "$sig" ] ||
		fail "$w.png is not a PNG file"
done
n=$(echo $want | wc -w)
[ "$(wc -l < "$tmp/plot.out")" -eq "$n" ] ||
	fail "shemb-plot named $(wc -l < "$tmp/plot.out") files, not $n"
echo "  shemb-plot: $n PNG charts"

# two setups in one file: two runs of other --dim give charts of their
# own, named after the dim
for d in 16 8; do
	run "setup$d" timeout 60 "$bench" lookup --rows 10000 --dim "$d" \
		--threads 1 --reps 1 --dist zipf --batch 32,64 \
		--pooling-factor 2 --csv "$tmp/setups.csv"
done
want=
for v in no_grad train; do
	want="$want setups-lookup-zipf-$v-dim16-batch"
	want="$want setups-lookup-zipf-$v-dim8-batch"
done
# and a provider whose name holds a ';' (tcp;ofi_rxm): train's lines of
# shm written again as if of tcp
if [ -f "$tmp/train.csv" ]; then
	{ cat "$tmp/train.csv"
	  sed -n 's/^train,shm,/train,tcp;ofi_rxm,/p' "$tmp/train.csv"
	} > "$tmp/providers.csv"
	want="$want providers-train-bytes-shm providers-train-steps-shm"
	want="$want providers-train-bytes-tcp-ofi_rxm"
	want="$want providers-train-steps-tcp-ofi_rxm"
	set -- "$tmp/providers.csv"
else
	set --
fi
echo "+ shemb-plot -o $tmp/png2 $tmp/setups.csv $*"
timeout 120 sh "$plot" -o "$tmp/png2" "$tmp/setups.csv" "$@" \
	> "$tmp/plot2.out" 2> "$tmp/plot2.err" || fail "shemb-plot exited $?"
for w in $want; do
	png=$tmp/png2/$w.png
	[ -f "$png" ] || fail "shemb-plot made no $w.png"
	[ "$(od -An -tx1 -N8 "$png" | tr -d ' \n')" = "$sig" ] ||
		fail "$w.png is not a PNG file"
done
n=$(echo $want | wc -w)
[ "$(wc -l < "$tmp/plot2.out")" -eq "$n" ] ||
	fail "shemb-plot named $(wc -l < "$tmp/plot2.out") files, not $n"
echo "  shemb-plot: a chart per setup and provider, $n in all"

# two files of the same name would overwrite each other's charts
mkdir "$tmp/a" "$tmp/b"
cp "$tmp/lookup.csv" "$tmp/a/lookup.csv"
cp "$tmp/lookup.csv" "$tmp/b/lookup.csv"
sh "$plot" -o "$tmp/png3" "$tmp/a/lookup.csv" "$tmp/b/lookup.csv" \
	> "$tmp/same.out" 2>&1
rc=$?
[ "$rc" -eq 1 ] || fail "shemb-plot exited $rc on two lookup.csv, not 1"
grep -q 'would give charts of the same names' "$tmp/same.out" ||
	fail "shemb-plot gave no reason for refusing two lookup.csv"
[ ! -e "$tmp/png3" ] || fail "shemb-plot drew charts before refusing"
echo "  two files of one name: refused"
exit 0
