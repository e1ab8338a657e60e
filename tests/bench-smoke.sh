#!/bin/sh
# bench-smoke.sh - shemb-bench and the zipf_train example on tiny sizes: they
# run, check their own output, and print the lines scripts read.  No timing
# is judged here.
set -u
. "$top_srcdir/tests/smoke.sh"
train=$top_builddir/examples/zipf_train

tiny="--rows 10000 --batch 64 --reps 2"

run lookup "$bench" lookup $tiny --csv "$tmp/runs.csv"
for r in lookup_vs_copy lookup_train_vs_copy lookup_vs_copy_zipf \
	 lookup_vs_copy_uniform; do
	need lookup $r
done
# progress goes to a terminal only
[ -s "$tmp/lookup.err" ] && fail "lookup wrote to stderr, not a terminal"

run backward "$bench" backward $tiny --csv "$tmp/runs.csv"
need backward backward_rows_per_s
need backward backward_ids_per_s

# one header, then 3 lookup lines and 2 x 2 backward lines per distribution
lines=$(wc -l < "$tmp/runs.csv")
[ "$lines" -eq 11 ] || fail "runs.csv has $lines lines, not 11"
head -n 1 "$tmp/runs.csv" | grep -q '^mode,variant,dist,' ||
	fail "runs.csv has no header"

# the other storage types and optimizers, one distribution each
run lookup16 "$bench" lookup $tiny --dtype f16 --dist zipf --zipf-s 1.2
need lookup16 lookup_vs_copy_zipf
run adam "$bench" backward $tiny --dtype bf16 --dist uniform \
	--optimizer adam
need adam backward_rows_per_s
run rowwise "$bench" backward $tiny --optimizer rowwise_adagrad \
	--dist zipf --pooling-factor 3 --dim 7 --threads 1
need rowwise backward_ids_per_s

# the device tier's policies against Belady's optimum: every hit rate in
# [0, 1], and none above Belady's, which loads the fewest rows
run cache "$bench" cache --quick
awk '$1 == "result" && $2 ~ /^hit_/ {
	split($2, k, "_")
	if (!($3 ~ /^[0-9]+(\.[0-9]+)?$/ && $3 >= 0 && $3 <= 1)) {
		print "  " $2 " is " $3
		bad = 1
	}
	v[k[2], k[3]] = $3
}
$1 == "result" && $2 == "lookahead_vs_belady_10" { d = $3; nd++ }
END {
	split("lru lfu lookahead belady", q, " ")
	split("1 5 10 25", p, " ")
	for (i = 1; i <= 4; i++) {
		for (j = 1; j <= 4; j++) {
			if (!((q[j], p[i]) in v)) {
				print "  no result hit_" q[j] "_" p[i]
				bad = 1
			} else if (v[q[j], p[i]] > v["belady", p[i]] + 1e-6) {
				print "  " q[j] " above belady at " p[i] "%"
				bad = 1
			}
		}
	}
	e = 100 * (v["belady", 10] - v["lookahead", 10]) - d
	if (nd != 1 || d < 0 || e > 0.02 || e < -0.02) {
		print "  lookahead_vs_belady_10 is " d
		bad = 1
	}
	exit bad
}' "$tmp/cache.out" || fail "cache: bad hit rates"
need cache tier_vs_resident
if printf '1\n-2\n' > "$tmp/neg.trace" &&
	"$bench" cache --quick --trace "$tmp/neg.trace" > /dev/null 2>&1; then
	fail "cache took a trace with a negative id"
fi

run help "$bench" --help
grep -q '^Usage: shemb-bench MODE' "$tmp/help.out" || fail "--help"
if "$bench" lookup --rows 0 > /dev/null 2>&1; then
	fail "--rows 0 was accepted"
fi
if "$bench" sideways > /dev/null 2>&1; then
	fail "an unknown mode was accepted"
fi

# the demo: it exits 0 only when its loss fell below half of the start
run train "$train" --steps 40 --quiet
grep -q 'loss .*start .*end' "$tmp/train.out" || fail "no loss summary"
sed -n 's/^ *loss/  loss/p' "$tmp/train.out"
exit 0
