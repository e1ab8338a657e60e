#!/bin/sh
# bench-train-smoke.sh - shemb-bench train on tiny tables, 2 ranks over
# shm: it runs, reports every mode and ends with its six result lines,
# each a number.  No timing is judged here.
set -u
. "$top_srcdir/tests/smoke.sh"

set -- train -n 2 --scale 200 --batch 64 --steps 2 --passes 1 --timeout 60
echo "+ shemb-bench $*"
timeout 120 "$bench" "$@" > "$tmp/out" 2> "$tmp/err" ||
	fail "shemb-bench train exited $?"
tail -n 6 "$tmp/out" | awk '
	{ names = names " " $2 }
	NF != 3 || $1 != "result" || $3 !~ /^[0-9]+(\.[0-9]+)?$/ { bad = 1 }
	END {
		want = " bytes_vs_dense_allreduce bytes_vs_allgather" \
		       " steps_vs_dense_allreduce steps_vs_allgather" \
		       " colwise_imbalance rowwise_imbalance"
		exit bad || names != want
	}' || fail "the output does not end with the six result lines"
tail -n 6 "$tmp/out" | sed 's/^/  /'
for m in libshemb dense allgather; do
	grep -q "^  $m  *[0-9]" "$tmp/out" || fail "no figures for $m"
done
grep -q "replicated" "$tmp/out" || fail "no plan listed"
if "$bench" train --steps 0 > /dev/null 2>&1; then
	fail "--steps 0 was accepted"
fi
# a bad value is named, with its option
"$bench" train --batch 1x > /dev/null 2> "$tmp/bad"
[ $? -eq 2 ] && grep -q "bad value '1x' for --batch" "$tmp/bad" ||
	fail "a bad --batch: $(head -n 1 "$tmp/bad")"
exit 0
