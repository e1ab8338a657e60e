#!/bin/sh
# The Python client (examples/python/shemb.py) with the machine's
# python3: it trains its toy model through ctypes, checks a lookup
# against the rows read back, a bad id's error, and that the loss falls.
# Skipped without python3, and for a sanitizer build (which cannot be
# loaded into an uninstrumented interpreter).
so=$top_builddir/.libs/libshemb.so.0
command -v python3 >/dev/null 2>&1 || { echo "no python3: skipped"; exit 77; }
[ -f "$so" ] || { echo "no $so"; exit 1; }
if nm -D "$so" | grep -q ' U __asan_init'; then
	echo "skipped: a sanitizer build"
	exit 77
fi
# a build with jemalloc needs the tunable (README, "Embedding notes")
GLIBC_TUNABLES=glibc.rtld.optional_static_tls=65536 SHEMB_LIB=$so \
	timeout 300 python3 "$top_srcdir/examples/python/shemb.py" --check
