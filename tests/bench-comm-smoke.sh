#!/bin/sh
# bench-comm-smoke.sh - shemb-bench comm on one small size, 2 ranks over
# shm: every job runs, and the output ends with the three result lines,
# each a number or nan; over tcp;ofi_rxm, OpenMPI runs on that provider.
# No timing is judged here.  OpenMPI is left out when shemb-bench-mpi was
# not built or mpirun is missing, and over tcp when it has no ofi MTL.
set -u
. "$top_srcdir/tests/smoke.sh"

mpi=--no-mpi
if [ -x "$top_builddir/tools/shemb-bench-mpi" ] &&
	command -v mpirun > /dev/null 2>&1; then
	mpi=
fi

set -- comm --ranks 2 --sizes 64K --provider shm --reps 2 --passes 1 \
	--raw-total 4M --raw-iters 2 --timeout 15 --csv "$tmp/runs.csv" $mpi
echo "+ shemb-bench $*"
timeout 60 "$bench" "$@" > "$tmp/out" 2> "$tmp/err" ||
	fail "shemb-bench comm exited $?"

# the last three lines, in this order, each a number or nan
tail -n 3 "$tmp/out" | awk '
	{ names = names " " $2 }
	NF != 3 || $1 != "result" { bad = 1 }
	$3 != "nan" && $3 !~ /^[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$/ {
		bad = 1
	}
	END {
		want = " alltoallv_vs_openmpi_shm_min" \
		       " alltoallv_vs_openmpi_ofi_min alltoallv_vs_raw_min"
		exit bad || names != want
	}' || fail "the output does not end with the three result lines"
tail -n 3 "$tmp/out" | sed 's/^/  /'

# libshemb and the raw stream ran (a figure, not n/a, in the row)
grep -q '^ *2 *64 KiB | *[0-9]' "$tmp/out" || fail "no libshemb figure"
grep -q '^result alltoallv_vs_raw_min [0-9]' "$tmp/out" ||
	fail "no raw libfabric figure"
# the raw streams under the same load ran too, their line before the three
tail -n 4 "$tmp/out" | head -n 1 |
	grep -q '^result alltoallv_vs_raw_same_load_min [0-9]' ||
	fail "no figure against the raw streams under the same load"
if [ -z "$mpi" ]; then
	grep -q '^result alltoallv_vs_openmpi_shm_min [0-9]' "$tmp/out" ||
		fail "OpenMPI was there but gave no figure"
fi
# ofi was not asked for: nan, and the output says why
grep -q '^result alltoallv_vs_openmpi_ofi_min nan$' "$tmp/out" ||
	fail "the ofi ratio should be nan with --provider shm"
grep -q 'alltoallv_vs_openmpi_ofi_min: not measured' "$tmp/out" ||
	fail "no reason given for the nan"

# one header and one line for the one configuration
[ "$(wc -l < "$tmp/runs.csv")" -eq 2 ] || fail "runs.csv is not 2 lines"
head -n 1 "$tmp/runs.csv" | grep -q '^mode,provider,' || fail "no CSV header"
[ -s "$tmp/err" ] && fail "wrote to stderr, not a terminal"

# over tcp;ofi_rxm: OpenMPI, where it has an ofi MTL, is forced onto the
# same provider (its cm PML over that MTL) and says which it took
set -- comm --ranks 2 --sizes 64K --provider tcp --reps 2 --passes 1 \
	--raw-total 4M --raw-iters 2 --timeout 15 $mpi
echo "+ shemb-bench $*"
timeout 60 "$bench" "$@" > "$tmp/out" 2> "$tmp/err" ||
	fail "shemb-bench comm --provider tcp exited $?"
grep -q '^ *2 *64 KiB | *[0-9]' "$tmp/out" ||
	fail "no libshemb figure over tcp;ofi_rxm"
if [ -z "$mpi" ] && ompi_info --parsable 2> /dev/null |
	grep -q '^mca:mtl:ofi:'; then
	grep -q '^result alltoallv_vs_openmpi_ofi_min [0-9]' "$tmp/out" ||
		fail "OpenMPI over tcp;ofi_rxm gave no figure"
	grep -q "OpenMPI's ofi MTL said it took provider tcp;ofi_rxm" \
		"$tmp/out" || fail "OpenMPI's provider is not shown"
fi

# calls back to back: the header says so, and both jobs take the option
# (the MPI program refuses options it does not know)
set -- comm --ranks 2 --sizes 8K --provider shm --reps 2 --passes 1 \
	--back-to-back 3 --raw-total 4M --raw-iters 1 --timeout 15 $mpi
echo "+ shemb-bench $*"
timeout 60 "$bench" "$@" > "$tmp/out" 2> "$tmp/err" ||
	fail "shemb-bench comm --back-to-back exited $?"
grep -q 'each 3 calls in a row after a barrier' "$tmp/out" ||
	fail "the header does not tell the calls back to back"
grep -q '^ *2 *8 KiB | *[0-9]' "$tmp/out" ||
	fail "no libshemb figure with --back-to-back"
if [ -z "$mpi" ]; then
	grep -q '^result alltoallv_vs_openmpi_shm_min [0-9]' "$tmp/out" ||
		fail "OpenMPI gave no figure with --back-to-back"
fi

# bad options are refused
if "$bench" comm --back-to-back 0 > /dev/null 2>&1; then
	fail "--back-to-back 0 was accepted"
fi
if "$bench" comm --provider ib > /dev/null 2>&1; then
	fail "--provider ib was accepted"
fi
if "$bench" comm --sizes 1M, > /dev/null 2>&1; then
	fail "a size list with a trailing comma was accepted"
fi
if "$bench" comm-raw --pairs 2 > /dev/null 2>&1; then
	fail "comm-raw took --pairs without --bidir"
fi
exit 0
