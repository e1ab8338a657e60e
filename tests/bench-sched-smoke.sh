#!/bin/sh
# bench-sched-smoke.sh - shemb-bench sched with 2 ranks over shm and few
# steps, and one pair of runs comparing slices (--slice-pairs): it runs,
# reports the comparison, and ends with its three result lines, each a
# number.  No timing is judged here (the hidden fraction is negative when the
# started steps came out slower, as noise can make them).
set -u
. "$top_srcdir/tests/smoke.sh"

set -- sched -n 2 --steps 3 --reps 2 --compute-us 100 --slice-pairs 1
echo "+ shemb-bench $*"
timeout 120 "$bench" "$@" > "$tmp/out" 2> "$tmp/err" ||
	fail "shemb-bench sched exited $?"
tail -n 3 "$tmp/out" | awk '
	{ names = names " " $2 }
	NF != 3 || $1 != "result" || $3 !~ /^-?[0-9]+(\.[0-9]+)?$/ { bad = 1 }
	END {
		exit bad || names != " first_table_vs_whole_lookup" \
				     " priority_latency_vs_alone" \
				     " comm_hidden_fraction"
	}' || fail "the output does not end with the three result lines"
grep -Eq '^result started_step_slice_vs_kernel_default [0-9]+(\.[0-9]+)?$' \
	"$tmp/out" || fail "no comparison of slices"
grep -q 'comm_slice_us: *started step' "$tmp/out" &&
	grep -q 'kernel default: *started step' "$tmp/out" ||
	fail "the comparison lacks a side"
cat "$tmp/out" | sed 's/^/  /'
if "$bench" sched -n 0 > /dev/null 2>&1; then
	fail "-n 0 was accepted"
fi
exit 0
