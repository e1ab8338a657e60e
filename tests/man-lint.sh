#!/bin/sh
# man-lint.sh - check the man pages under $top_srcdir/man.
#
#  - groff -man -ww prints nothing for any page (aliases included);
#  - mandoc -Tlint -Wwarning prints nothing for any page that is not a
#    .so alias (when mandoc is installed);
#  - every page has a .TH line naming it, in the section of its file;
#  - every man3 page that is not a .so alias has the sections NAME,
#    SYNOPSIS, DESCRIPTION, RETURN VALUE, ERRORS, THREAD SAFETY and
#    SEE ALSO; shemb.7 has NAME, DESCRIPTION, ENVIRONMENT, EXAMPLE, NOTES
#    and SEE ALSO;
#  - a .so alias points to an existing page that is not itself an alias,
#    and whose NAME section lists the alias;
#  - every function exported by the built library (nm -D) and every
#    function declared in shemb.h has man/man3/NAME.3, whose page shows
#    it in its SYNOPSIS;
#  - the example program of shemb.7 is examples/basic.c, exactly;
#  - man -l renders every page (when man is installed).
#
# Run by make check with top_srcdir, top_builddir and GROFF in the
# environment.  Exit 77 (skipped) when GROFF is empty.

if test -z "$GROFF"; then
	echo "man-lint: groff not found by configure; skipped"
	exit 77
fi
: "${top_srcdir:?man-lint: top_srcdir is not set}"
: "${top_builddir:?man-lint: top_builddir is not set}"

mandir=$top_srcdir/man
lib=$top_builddir/.libs/libshemb.so
header=$top_srcdir/include/shemb.h
nfail=0

fail() {
	echo "man-lint: FAIL: $*" >&2
	nfail=$((nfail + 1))
}

tmp=${TMPDIR:-/tmp}/man-lint.$$
rm -rf "$tmp"
mkdir "$tmp" || exit 99
trap 'rm -rf "$tmp"' 0 1 2 15

# The target of a .so alias (man3/x.3), or nothing for a real page.
so_target() {
	awk '/^\.\\"/ { next } /^\.so[ \t]/ { print $2 } { exit }' "$1"
}

# Whether the text on standard input has the word $1 (letters, digits
# and _ make up words).
has_word() {
	grep -Eq "(^|[^A-Za-z0-9_])$1([^A-Za-z0-9_]|\$)"
}

# The text of section $2 of page $1: the lines after .SH $2 up to the
# next .SH.
section_text() {
	awk -v want="$2" '
		/^\.SH[ \t]/ {
			s = $0
			sub(/^\.SH[ \t]+/, "", s)
			gsub(/"/, "", s)
			sub(/[ \t]+$/, "", s)
			on = (s == want)
			next
		}
		on { print }
	' "$1"
}

has_section() {
	grep -Eq "^\.SH[ 	]+\"?$2\"?[ 	]*\$" "$1"
}

pages=$(cd "$mandir" &&
	for f in man*/*.[1-9]; do test -f "$f" && echo "$f"; done)
if test -z "$pages"; then
	fail "no pages found under $mandir"
	exit 1
fi

npages=0
naliases=0
for rel in $pages; do
	page=$mandir/$rel
	base=${rel##*/}
	name=${base%.*}
	sect=${base##*.}
	npages=$((npages + 1))

	# groff, from the man directory so that .so man3/x.3 resolves
	out=$(cd "$mandir" && "$GROFF" -man -ww -z "$rel" 2>&1)
	if test -n "$out"; then
		fail "$rel: groff -man -ww prints:"
		printf '%s\n' "$out" | sed 's/^/    /' >&2
	fi

	target=$(so_target "$page")
	if test -n "$target"; then
		naliases=$((naliases + 1))
		if test "$(grep -vc '^\.\\"' "$page")" -ne 1; then
			fail "$rel: a .so alias must hold the .so line only"
		fi
		if test ! -f "$mandir/$target"; then
			fail "$rel: .so target $target does not exist"
			continue
		fi
		if test -n "$(so_target "$mandir/$target")"; then
			fail "$rel: .so target $target is itself an alias"
			continue
		fi
		if ! section_text "$mandir/$target" NAME | has_word "$name"
		then
			fail "$rel: the NAME section of $target does not list $name"
		fi
		continue
	fi

	if command -v mandoc >/dev/null 2>&1; then
		out=$(cd "$mandir" && mandoc -Tlint -Wwarning "$rel" 2>&1)
		if test -n "$out"; then
			fail "$rel: mandoc -Tlint prints:"
			printf '%s\n' "$out" | sed 's/^/    /' >&2
		fi
	fi

	upper=$(printf '%s' "$name" | tr 'abcdefghijklmnopqrstuvwxyz' \
		'ABCDEFGHIJKLMNOPQRSTUVWXYZ')
	if ! grep -Eq "^\.TH[ 	]+\"?$upper\"?[ 	]+\"?$sect\"?[ 	]" \
		"$page"; then
		fail "$rel: no .TH $upper $sect line"
	fi
	if ! section_text "$page" NAME | has_word "$name"; then
		fail "$rel: the NAME section does not list $name"
	fi

	case $rel in
	man3/*)
		required="NAME SYNOPSIS DESCRIPTION RETURN_VALUE ERRORS"
		required="$required THREAD_SAFETY SEE_ALSO"
		;;
	man7/shemb.7)
		required="NAME DESCRIPTION ENVIRONMENT EXAMPLE NOTES SEE_ALSO"
		;;
	*)
		required="NAME DESCRIPTION SEE_ALSO"
		;;
	esac
	for s in $required; do
		s=$(printf '%s' "$s" | tr _ ' ')
		has_section "$page" "$s" || fail "$rel: no section $s"
	done

	if command -v man >/dev/null 2>&1; then
		if ! (cd "$mandir" && MANWIDTH=80 man -l "$rel" \
			>"$tmp/rendered" 2>"$tmp/man.err") ||
			! grep -q "^NAME" "$tmp/rendered"; then
			fail "$rel: man -l does not render it:"
			sed 's/^/    /' "$tmp/man.err" >&2
		fi
	fi
done

# ---- one page per function: exported by the library, declared in the header
funcs=
nm=${NM:-nm}
if test -f "$lib"; then
	exported=$("$nm" -D --defined-only "$lib" |
		awk '$2 == "T" && $3 ~ /^shemb_/ { sub(/@.*/, "", $3); print $3 }')
	if test -z "$exported"; then
		fail "$nm -D --defined-only $lib lists no shemb_ function"
	fi
	funcs=$exported
else
	fail "$lib not found: cannot list the exported functions"
fi
declared=$(sed -n 's/^SHEMB_API[^(]*[ *]\(shemb_[a-z0-9_]*\)(.*/\1/p' \
	"$header")
if test -z "$declared"; then
	fail "no SHEMB_API function found in $header"
fi
funcs=$(printf '%s\n%s\n' "$funcs" "$declared" | LC_ALL=C sort -u |
	sed '/^$/d')

nfuncs=0
for f in $funcs; do
	nfuncs=$((nfuncs + 1))
	rel=man3/$f.3
	if test ! -f "$mandir/$rel"; then
		fail "$f has no page $rel"
		continue
	fi
	doc=$rel
	target=$(so_target "$mandir/$rel")
	test -n "$target" && doc=$target
	test -f "$mandir/$doc" || continue
	if ! section_text "$mandir/$doc" SYNOPSIS | grep -q "$f("; then
		fail "$f: not in the SYNOPSIS of $doc"
	fi
done

# ---- the example of shemb.7 is examples/basic.c
if test -f "$mandir/man7/shemb.7" && test -f "$top_srcdir/examples/basic.c"
then
	section_text "$mandir/man7/shemb.7" EXAMPLE |
		awk '/^\.EE/ { exit } on { print } /^\.EX/ { on = 1 }' |
		sed -e 's/^\\&//' \
		    -e 's/\\-/-/g' \
		    -e "s/\\\\(aq/'/g" \
		    -e 's/\\(ha/^/g' \
		    -e 's/\\(ti/~/g' \
		    -e 's/\\(ga/`/g' \
		    -e 's/\\e/\\/g' >"$tmp/example.c"
	if ! cmp -s "$tmp/example.c" "$top_srcdir/examples/basic.c"; then
		fail "man7/shemb.7: EXAMPLE differs from examples/basic.c:"
		diff "$top_srcdir/examples/basic.c" "$tmp/example.c" |
			sed 's/^/    /' >&2
	fi
else
	fail "man7/shemb.7 or examples/basic.c is missing"
fi

echo "man-lint: $npages pages ($naliases .so aliases), $nfuncs functions"
if test "$nfail" -gt 0; then
	echo "man-lint: $nfail problem(s)" >&2
	exit 1
fi
echo "man-lint: all pages pass"
exit 0
