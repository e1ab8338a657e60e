#!/bin/sh
# bench-ckpt-smoke.sh - shemb-bench checkpoint on a tiny table, in a
# directory of its own: it runs, prints the lines scripts read, and
# leaves nothing behind.  No timing is judged here.
set -u
. "$top_srcdir/tests/smoke.sh"

mkdir "$tmp/dir"
# --rows with a suffix, as the help promises (5120 rows)
run ckpt "$bench" checkpoint --rows 5k --dim 16 --reps 1 --dir "$tmp/dir"
need ckpt save_vs_disk
need ckpt load_vs_disk
need ckpt serving_bf16_vs_fp32
need ckpt serving_int8_vs_fp32
grep -q "^  8 threads: fp32 " "$tmp/ckpt.out" || fail "no 8-thread line"
[ -z "$(ls "$tmp/dir/ckpt" | grep -v -e '^MANIFEST$' -e '^shard-')" ] ||
	fail "files other than the checkpoint's were left"
[ ! -e "$tmp/dir/dd.bin" ] || fail "dd's file was left"
echo ok
