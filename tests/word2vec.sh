#!/bin/sh
# word2vec.sh - examples/word2vec finds planted pairs again, on one rank
# and on two (over shm, through shemb-run); bad options exit 2, a missing
# file or an empty vocabulary 1, an unknown query word gets a message.
#
# The corpus is written here, by awk, independently of the program's own
# --generate: 20 pairs (aI, bI), each with sentences of its own where aI
# and bI appear twice each among 8 noise words (n0 .. n199); no word of a
# pair appears anywhere else.  Skip-gram makes the input vectors of two
# words close when the words share contexts: here aI and bI have the
# same ones (aI, bI and noise), which no other word has.  (Seen once each
# per sentence, they would share only the noise every word has: each
# would be the other's context, which brings aI's input vector near bI's
# output vector, not near bI's input vector.)
#
# Passing takes at least 36 of the 40 planted words with their partner as
# nearest neighbour: 40 is what training gives (partner cosine 0.89 or
# more, the next word below 0.6); the slack covers another awk's rand()
# (mawk and gawk draw different corpora) leaving a pair rarer, while a
# model that learnt nothing (a random neighbour among 239 words) would
# pass fewer than one of the 40.  No timing is judged; every run is bounded by
# timeout(1), the whole test by about 2 minutes at worst.
set -u
: "${top_builddir:=.}"
prog=$top_builddir/examples/word2vec/word2vec
run=$top_builddir/tools/shemb-run
if ! command -v timeout > /dev/null 2>&1; then
	echo "timeout(1) not found; skipped"
	exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/word2vec.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT

fail()
{
	echo "FAIL: $*"
	for f in "$tmp"/*.out "$tmp"/*.err; do
		[ -s "$f" ] && { echo "--- $f"; tail -n 20 "$f"; }
	done
	exit 1
}

# w2v NAME SECONDS ARGS...: the program, output in $tmp/NAME.{out,err},
# status in $st
w2v()
{
	name=$1
	secs=$2
	shift 2
	echo "+ word2vec $*" | cut -c 1-100
	timeout -k 2 "$secs" "$prog" "$@" > "$tmp/$name.out" \
		2> "$tmp/$name.err"
	st=$?
}

awk 'BEGIN {
	srand(7)
	for (s = 0; s < 6000; s++) {
		i = int(rand() * 20)
		n = 0
		for (k = 0; k < 8; k++)
			w[n++] = "n" int(rand() * 200)
		w[n++] = "a" i; w[n++] = "b" i; w[n++] = "a" i; w[n++] = "b" i
		for (k = n - 1; k > 0; k--) {
			j = int(rand() * (k + 1))
			t = w[k]; w[k] = w[j]; w[j] = t
		}
		line = w[0]
		for (k = 1; k < n; k++)
			line = line " " w[k]
		print line
	}
}' > "$tmp/corpus.txt" || fail "awk could not write the corpus"
query=$(awk 'BEGIN { for (i = 0; i < 20; i++) printf "a%d,b%d,", i, i }')
# options of both trainings (split into words where used)
args="--epochs 5 --threads 1 --seed 3 --top 3"

# found NAME: "OK N" with the planted words whose nearest neighbour is
# their partner, and the words answered
found()
{
	sed 's/^\[ *[0-9]*\] //' "$tmp/$1.out" | awk '
	$1 == "neighbours" && $2 ~ /^[ab][0-9]+:$/ {
		w = $2; sub(/:$/, "", w)
		p = (w ~ /^a/ ? "b" : "a") substr(w, 2)
		n++
		if ($3 == p)
			ok++
	}
	END { print ok + 0, n + 0 }'
}

# judge NAME: the rule above
judge()
{
	res=$(found "$1")
	ok=${res% *}
	n=${res#* }
	echo "  $ok of $n planted words have their partner first"
	[ "$n" -eq 40 ] || fail "$1: $n query words answered, not 40"
	[ "$ok" -ge 36 ] || fail "$1: only $ok of 40 partners found"
}

# ---- one rank, with a query word that is not in the text
w2v one 100 $args --query "${query}zzz" "$tmp/corpus.txt"
[ "$st" -eq 0 ] || fail "one rank: exit $st"
judge one
grep -q "zzz.*not in the vocabulary" "$tmp/one.err" ||
	fail "no message for an unknown query word"
grep -q "^trained 5 epochs" "$tmp/one.out" || fail "no summary line"

# ---- the errors
w2v badopt 10 --no-such-option "$tmp/corpus.txt"
[ "$st" -eq 2 ] || fail "an unknown option: exit $st, not 2"
grep -q "Usage" "$tmp/badopt.err" || fail "an unknown option: no usage"
w2v baddim 10 --dim 0 "$tmp/corpus.txt"
[ "$st" -eq 2 ] || fail "--dim 0: exit $st, not 2"
w2v nofile 10 "$tmp/no-such-file.txt"
[ "$st" -eq 1 ] || fail "a missing file: exit $st, not 1"
grep -q "no-such-file.txt" "$tmp/nofile.err" ||
	fail "a missing file: no message naming it"
echo "just a few words" > "$tmp/small.txt"
w2v empty 10 "$tmp/small.txt"
[ "$st" -eq 1 ] || fail "an empty vocabulary: exit $st, not 1"
grep -q "no word occurs" "$tmp/empty.err" ||
	fail "an empty vocabulary: no message"
rm -f "$tmp"/badopt.* "$tmp"/baddim.* "$tmp"/nofile.* "$tmp"/empty.*

# ---- the built-in corpus, saved: as many words as asked for
w2v gen 60 --generate 20k --epochs 1 --quiet --write-corpus \
	"$tmp/gen.txt"
[ "$st" -eq 0 ] || fail "--generate: exit $st"
[ "$(wc -w < "$tmp/gen.txt")" -eq 20000 ] ||
	fail "--write-corpus: not 20000 words"

# ---- two ranks over shm: the build needs libfabric for more than one
if ! grep -q '^#define HAVE_LIBFABRIC 1' "$top_builddir/config.h"; then
	echo "built without libfabric: one rank passed, two ranks skipped"
	exit 77
fi
echo "+ shemb-run -n 2 --provider shm word2vec ..."
timeout -k 5 110 "$run" -n 2 --provider shm --timeout 100 "$prog" $args \
	--query "$query" "$tmp/corpus.txt" > "$tmp/two.out" 2> "$tmp/two.err"
st=$?
[ "$st" -eq 0 ] || fail "two ranks: exit $st"
judge two
grep -q '^\[ *[1-9][0-9]*\]' "$tmp/two.out" &&
	fail "two ranks: a rank other than 0 printed"
grep -q '^\[ *0\] training: 2 ranks' "$tmp/two.out" ||
	fail "two ranks: rank 0 did not see 2 ranks"
exit 0
