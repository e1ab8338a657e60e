# run_ranks.sh - sourced by the multi-rank test scripts: job LABEL ARGS...
# runs one job of shemb-run with ARGS (which bound its time), prints "ok"
# or "FAIL" with the tail of its output, and counts the failures in
# $fails.
fails=0

job() {
	label=$1
	shift
	if out=$("$top_builddir/tools/shemb-run" "$@" 2>&1); then
		echo "ok   $label"
	else
		echo "FAIL $label (exit $?)"
		echo "$out" | tail -n 20
		fails=$((fails + 1))
	fi
}

# ranks_job LIMIT PROVIDER N [ARGS...]: $rank with ARGS on N ranks over
# PROVIDER, stopped after LIMIT seconds, as a job labelled by what it runs.
ranks_job() {
	limit=$1 p=$2 n=$3
	shift 3
	e=${SHEMB_FABRIC_EAGAIN:+ (EAGAIN 1/$SHEMB_FABRIC_EAGAIN)}
	job "$p n=$n $*$e" -n "$n" --provider "$p" --timeout "$limit" \
		"$rank" "$@"
}
