#!/bin/sh
# Alltoallvs refused by one rank or two, thousands in a row, while the
# other ranks send them pieces of every size (tests/refuse_rank.c): every
# rank fails each with a refusing rank's status and detail, the real
# alltoallvs in flight beside them are exact, and nothing is left behind
# to pile up; allreduces that one rank fails once their transfers are
# done, which the others may have finished; 2 to 4 ranks over shm, 2 and
# 3 over tcp;ofi_rxm (loopback), with the progress thread and without,
# and on 3 ranks with posts refused as by a full queue
# (SHEMB_FABRIC_EAGAIN); every run bounded in time.
. "$top_srcdir/tests/run_ranks.sh"
rank=$top_builddir/tests/refuse_rank

one() { # provider ranks [options...]
	ranks_job 240 "$@"
}

for n in 2 3 4; do
	one shm "$n"
done
one shm 2 --caller
one "tcp;ofi_rxm" 2
one "tcp;ofi_rxm" 3 --caller
# about one post in three refused as by a full queue, and posted again
SHEMB_FABRIC_EAGAIN=3
export SHEMB_FABRIC_EAGAIN
one shm 3
one "tcp;ofi_rxm" 3
unset SHEMB_FABRIC_EAGAIN
[ "$fails" -eq 0 ]
