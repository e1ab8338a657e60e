#!/bin/sh
# Build a program against the INSTALLED library with pkg-config alone and
# run it, as a user would:  cc prog.c $(pkg-config --cflags --libs shemb)
# Usage: consumer.sh PKGCONFIGDIR LIBDIR MANDIR SRCDIR CC
set -e
pcdir=$1 libdir=$2 mandir=$3 srcdir=$4 cc=${5:-cc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
flags=$(PKG_CONFIG_PATH=$pcdir pkg-config --cflags --libs shemb)
echo "pkg-config --cflags --libs shemb: $flags"
$cc -o "$tmp/consumer" "$srcdir/tests/consumer.c" $flags -Wl,-rpath,"$libdir"
"$tmp/consumer"
for page in "$mandir/man3/shemb_lookup.3" "$mandir/man7/shemb.7"; do
	[ -f "$page" ] || { echo "not installed: $page"; exit 1; }
done
echo "installed library, header, pkg-config file and man pages work"
