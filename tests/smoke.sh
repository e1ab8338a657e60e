# smoke.sh - sourced by the benchmarks' smoke tests: $bench, a temporary
# directory $tmp removed at exit, and the helpers below.
: "${top_builddir:=.}"
bench=$top_builddir/tools/shemb-bench
tmp=$(mktemp -d "${TMPDIR:-/tmp}/${0##*/}.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT

# fail MESSAGE: the message, what the programs printed, and exit 1
fail()
{
	echo "FAIL: $*"
	for f in "$tmp"/*out "$tmp"/*err; do
		[ -s "$f" ] && { echo "--- $f"; cat "$f"; }
	done
	exit 1
}

# run NAME COMMAND...: stdout and stderr kept as $tmp/NAME.{out,err}
run()
{
	name=$1
	shift
	echo "+ $*"
	"$@" > "$tmp/$name.out" 2> "$tmp/$name.err" || fail "$* exited $?"
}

# need NAME RESULT: the line "result RESULT V" with V a positive number
need()
{
	v=$(sed -n "s/^result $2 //p" "$tmp/$1.out")
	awk -v v="$v" 'BEGIN {
		exit !(v ~ /^[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$/ && v + 0 > 0)
	}' || fail "$1: 'result $2' is '$v', not a positive number"
	echo "  result $2 $v"
}
