#!/bin/sh
# An owner that fails to serve one table of a lookup of several, after
# the ids went out (tests/serve_fail_rank.c): every rank's lookup fails
# with the owner's status and cause, at once, and the next lookups are
# exact, also behind a backward (relaxed) and after 80 and 1500 failing
# calls in a row; 2 to 4 ranks over shm, 3 over tcp;ofi_rxm (loopback),
# with the bags pooled by the requesters and by the owners, with the
# progress thread and without; every run bounded in time.
. "$top_srcdir/tests/run_ranks.sh"
rank=$top_builddir/tests/serve_fail_rank

one() { # provider ranks [options...]
	ranks_job 120 "$@"
}

for n in 2 3 4; do
	one shm "$n"
done
one shm 3 --pool-at-owner
one shm 2 --caller
one "tcp;ofi_rxm" 3
one "tcp;ofi_rxm" 2 --pool-at-owner --caller
[ "$fails" -eq 0 ]
