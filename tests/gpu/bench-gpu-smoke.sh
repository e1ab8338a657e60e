#!/bin/sh
# shemb-bench gpu on a small table: it checks its own output against rows
# read back, times training steps too, and must end with its lookup's
# result lines (the device check reads them there);
# skipped (77) without a GPU.
bench=$top_builddir/tools/shemb-bench
out=$("$bench" gpu --rows 5000 --dim 64 --batch 300 --pooling-factor 7 \
	--reps 3 --python none 2>&1)
rc=$?
echo "$out"
[ "$rc" -eq 77 ] && exit 77
[ "$rc" -eq 0 ] || exit 1
echo "$out" | tail -n 1 | grep -q '^result gpu_lookup_vs_copy [0-9]' ||
	exit 1
echo "$out" | grep -q '^libshemb training step ' || exit 1
