#!/bin/sh
# The same rank programs under OpenMPI's mpirun instead of shemb-run: each
# rank takes its rank and the world size from OMPI_COMM_WORLD_RANK and
# OMPI_COMM_WORLD_SIZE (lib/ident.c), and the root and the job's key from
# SHEMB_ROOT and SHEMB_JOB_KEY, passed on with -x; the programs call no
# MPI themselves.  3 ranks of tests/coll_rank (alltoallv, allreduce and
# many collectives in flight at once, each checked against what the ranks
# sent) over shm and tcp;ofi_rxm, and of tests/dist_rank (distributed
# tables trained against a single-process reference) over shm.  Loopback
# only; each job bounded by timeout(1), and mpirun kills its ranks when
# one fails.  Skipped without mpirun.
: "${top_builddir:=.}"
command -v mpirun > /dev/null 2>&1 || {
	echo "SKIP: no mpirun"
	exit 77
}
# the ranks must find their identity in mpirun's variables only
unset SHEMB_RANK SHEMB_WORLD_SIZE SHEMB_ROOT SHEMB_ROOT_FD SHEMB_JOB_KEY \
	SHEMB_PROVIDER FI_PROVIDER PMI_RANK PMI_SIZE SLURM_PROCID SLURM_NTASKS
tmp=$(mktemp -d "${TMPDIR:-/tmp}/test_mpirun.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
key=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
fails=0

# mpi_job LABEL PROVIDER WANT PROGRAM ARGS...: 3 ranks, whose output
# must hold a line starting with WANT (rank 0 names the world it joined:
# not 3 worlds of 1); a root port taken by another program (the
# bootstrap says so) is tried again on another
mpi_job() {
	label=$1 p=$2 want=$3
	shift 3
	for try in 1 2 3 4 5; do
		port=$((20000 + $(od -An -N2 -tu2 /dev/urandom) % 40000))
		if TMPDIR=$tmp timeout -k 5 120 mpirun --allow-run-as-root \
			--oversubscribe -np 3 -x TMPDIR \
			-x SHEMB_ROOT=127.0.0.1:$port -x SHEMB_JOB_KEY="$key" \
			-x SHEMB_PROVIDER="$p" "$@" > "$tmp/out" 2>&1; then
			if grep -q "^$want" "$tmp/out"; then
				echo "ok   $label"
				return
			fi
			break
		fi
		grep -q -i "in use" "$tmp/out" || break
	done
	echo "FAIL $label"
	tail -n 20 "$tmp/out"
	fails=$((fails + 1))
}

coll=$top_builddir/tests/coll_rank
for p in shm "tcp;ofi_rxm"; do
	for s in alltoallv allreduce concurrent; do
		mpi_job "$p $s" "$p" "3 ranks over " "$coll" "$s"
	done
done
mpi_job "shm dist_rank" shm "ok: 3 ranks" "$top_builddir/tests/dist_rank" \
	--steps 6
[ "$fails" -eq 0 ]
