#!/bin/sh
# Checkpoints across ranks: tests/ckpt_rank saves two trained tables with
# one world size and shard plan and loads them with another, over shm;
# the loaded rows, and the rows after one more step, must be those of
# the saving job bit for bit (deterministic mode).  Every run bounded in
# time.
. "$top_srcdir/tests/run_ranks.sh"
rank=$top_builddir/tests/ckpt_rank
dir=$(mktemp -d "${TMPDIR:-/tmp}/test_ckpt_dist.XXXXXX") || exit 99
trap 'rm -rf "$dir"' EXIT

pair() { # saving ranks and plan, loading ranks and plan
	rm -rf "$dir"/*
	mkdir "$dir/adam" "$dir/rowwise"
	job "save n=$1 $2" -n "$1" --provider shm --timeout 120 \
		"$rank" save "$dir" "$2"
	job "load n=$3 $4" -n "$3" --provider shm --timeout 120 \
		"$rank" load "$dir" "$4"
}

pair 1 row 3 column
pair 4 row 2 row
pair 2 column 2 row
pair 3 column 4 table
pair 3 replicated 1 row
pair 2 table 3 replicated
pair 3 column 2 column
pair 2 row 3 saved
[ "$fails" -eq 0 ]
