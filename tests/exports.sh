#!/bin/sh
# libshemb.so exports only shemb_* functions.
so=$top_builddir/.libs/libshemb.so
[ -f "$so" ] || { echo "no $so"; exit 1; }
bad=$(nm -D --defined-only "$so" | awk '$3 !~ /^shemb_/ {print $3}')
if [ -n "$bad" ]; then
	echo "symbols outside the shemb_ prefix are exported:"
	echo "$bad"
	exit 1
fi
n=$(nm -D --defined-only "$so" | awk '$2 == "T" {n++} END {print n + 0}')
[ "$n" -gt 0 ] || { echo "no functions exported"; exit 1; }
echo "$n shemb_ functions exported"
