#!/bin/sh
# word2vec.sh - examples/word2vec finds planted pairs again, on one rank
# and on two (over shm, through shemb-run); its vocabulary, the words it
# trains on and its pairs agree with counts made here by sort and awk;
# bad options exit 2, a missing file, an empty vocabulary or a bad path
# 1 (on every rank, before training), an unknown query word gets a
# message.
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
# pass fewer than one of the 40.
#
# The references: the vocabulary, in its order (count descending, then
# bytewise), from sort and uniq; the words trained, epochs times the words
# of the text, on one rank and on two (a rank that drops or repeats part
# of its slice shows); the pairs of one epoch without subsampling against
# their expectation under word2vec's random window, computed in awk: a
# word at position p of a sentence of L words, with window W, pairs with
# min(b, p) + min(b, L - 1 - p) words for b drawn from 1 .. W.  A window
# one short gives 16% fewer; the test allows 1%.  The loss, its gradients,
# the negatives and subsampling are examples/word2vec/word2vec_check's.
#
# No timing is judged; every run is bounded by timeout(1), and the bounds
# add up to under 6 minutes (the test takes seconds, about 2 minutes
# with sanitizers).
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

# words WORDS EPOCHS NAME: the summary line of NAME trained EPOCHS times
# the words of the corpus
words()
{
	got=$(sed -n 's/^\[ *0\] //; s/^trained .*: \([0-9]*\) words, .*/\1/p' \
		"$tmp/$3.out")
	[ "$got" = "$(($1 * $2))" ] ||
		fail "$3: trained '$got' words, not $2 x $1"
	echo "  $got words trained, $2 x the text's"
}

nwords=$(wc -w < "$tmp/corpus.txt")
nwords=$((nwords + 0))

# ---- one rank, with a query word that is not in the text
w2v one 90 $args --query "${query}zzz" --output "$tmp/one.vec" \
	"$tmp/corpus.txt"
[ "$st" -eq 0 ] || fail "one rank: exit $st"
judge one
grep -q "zzz.*not in the vocabulary" "$tmp/one.err" ||
	fail "no message for an unknown query word"
grep -q "^trained 5 epochs" "$tmp/one.out" || fail "no summary line"
words "$nwords" 5 one

# the vocabulary and its order, from sort and uniq (min-count 5)
tr -s ' ' '\n' < "$tmp/corpus.txt" | LC_ALL=C sort | uniq -c |
	LC_ALL=C sort -k1,1nr -k2,2 | awk '$1 >= 5 { print $2 }' \
	> "$tmp/vocab.want"
awk 'NR > 1 { print $1 }' "$tmp/one.vec" > "$tmp/vocab.got"
cmp -s "$tmp/vocab.want" "$tmp/vocab.got" ||
	fail "--output: not the vocabulary of sort | uniq -c, in its order"
echo "  vocabulary: $(wc -l < "$tmp/vocab.got") words, as sort | uniq -c"
rm -f "$tmp/one.vec" "$tmp"/vocab.*

# ---- the pairs of one epoch without subsampling, against awk's
# expectation: sentences are the lines (words of count 5 or more), cut
# every 1000 words as the program cuts them
# (in steps of 65536 pairs, each a fifth of the epoch: the progress
# lines show the loss of the steps done, never a 0 before the first)
w2v pairs 20 --sample 0 --epochs 1 --dim 8 --threads 1 --window 5 \
	--batch 65536 "$tmp/corpus.txt"
[ "$st" -eq 0 ] || fail "--sample 0: exit $st"
grep -q '^progress 100%' "$tmp/pairs.err" || fail "no progress line at 100%"
grep -q '^progress .* loss 0\.0000 ' "$tmp/pairs.err" &&
	fail "a progress line before the first step: loss 0.0000"
got=$(sed -n 's/^trained .* words, \([0-9]*\) pairs.*/\1/p' "$tmp/pairs.out")
res=$(awk -v W=5 -v got="${got:-0}" '
# E(L): the pairs expected of a sentence of L words
function sentence(L,    p, b, e, r) {
	e = 0
	for (p = 0; p < L; p++) {
		for (b = 1; b <= W; b++) {
			r = L - 1 - p
			e += ((b < p ? b : p) + (b < r ? b : r)) / W
		}
	}
	return e
}
NR == FNR { for (i = 1; i <= NF; i++) n[$i]++; next }
{
	L = 0
	for (i = 1; i <= NF; i++) {
		if (n[$i] < 5)
			continue
		if (++L == 1000) {
			want += sentence(L)
			L = 0
		}
	}
	want += sentence(L)
}
END {
	d = (got - want) / want
	printf "%s pairs, %.0f expected (%+.2f%%) %s\n", got, want, 100 * d,
		(d < 0 ? -d : d) <= 0.01 ? "ok" : "BAD"
}' "$tmp/corpus.txt" "$tmp/corpus.txt")
echo "  $res"
case $res in
*ok) ;;
*) fail "--sample 0: pairs not within 1% of the expectation: $res" ;;
esac
words "$nwords" 1 pairs

# ---- the errors
w2v badopt 10 --no-such-option "$tmp/corpus.txt"
[ "$st" -eq 2 ] || fail "an unknown option: exit $st, not 2"
grep -q "Usage" "$tmp/badopt.err" || fail "an unknown option: no usage"
w2v baddim 10 --dim 0 "$tmp/corpus.txt"
[ "$st" -eq 2 ] || fail "--dim 0: exit $st, not 2"
# v * 1000 would overflow: rejected, not wrapped round into range
w2v badwin 10 --window -9223372036854776k "$tmp/corpus.txt"
[ "$st" -eq 2 ] || fail "--window -9223372036854776k: exit $st, not 2"
w2v badwin 10 --window -239807672958224171k "$tmp/corpus.txt"
[ "$st" -eq 2 ] || fail "--window -239807672958224171k: exit $st, not 2"
w2v nofile 10 "$tmp/no-such-file.txt"
[ "$st" -eq 1 ] || fail "a missing file: exit $st, not 1"
grep -q "no-such-file.txt" "$tmp/nofile.err" ||
	fail "a missing file: no message naming it"
echo "just a few words" > "$tmp/small.txt"
w2v empty 10 "$tmp/small.txt"
[ "$st" -eq 1 ] || fail "an empty vocabulary: exit $st, not 1"
grep -q "no word occurs" "$tmp/empty.err" ||
	fail "an empty vocabulary: no message"
# an output that cannot be opened fails before training, not after
w2v badout 10 --output "$tmp/no-such-dir/x.vec" "$tmp/corpus.txt"
[ "$st" -eq 1 ] || fail "a bad --output: exit $st, not 1"
grep -q "^word2vec: .*no-such-dir/x.vec: " "$tmp/badout.err" ||
	fail "a bad --output: no message naming it"
grep -q "^training" "$tmp/badout.out" &&
	fail "a bad --output: training started"
rm -f "$tmp"/bad* "$tmp"/nofile.* "$tmp"/empty.* "$tmp"/pairs.*

# ---- the built-in corpus, saved: as many words as asked for
w2v gen 20 --generate 20k --epochs 1 --quiet --write-corpus \
	"$tmp/gen.txt"
[ "$st" -eq 0 ] || fail "--generate: exit $st"
[ "$(wc -w < "$tmp/gen.txt")" -eq 20000 ] ||
	fail "--write-corpus: not 20000 words"

# ---- two ranks over shm: the build needs libfabric for more than one
if ! grep -q '^#define HAVE_LIBFABRIC 1' "$top_builddir/config.h"; then
	echo "built without libfabric: one rank passed, two ranks skipped"
	exit 0
fi

# w2v2 NAME SECONDS ARGS...: as w2v, on two ranks
w2v2()
{
	name=$1
	secs=$2
	shift 2
	echo "+ shemb-run -n 2 --provider shm word2vec $*" | cut -c 1-100
	timeout -k 5 "$secs" "$run" -n 2 --provider shm \
		--timeout $((secs - 10)) "$prog" "$@" > "$tmp/$name.out" \
		2> "$tmp/$name.err"
	st=$?
}

w2v2 two 100 $args --query "$query" "$tmp/corpus.txt"
[ "$st" -eq 0 ] || fail "two ranks: exit $st"
judge two
grep -q '^\[ *[1-9][0-9]*\]' "$tmp/two.out" &&
	fail "two ranks: a rank other than 0 printed"
grep -q '^\[ *0\] training: 2 ranks' "$tmp/two.out" ||
	fail "two ranks: rank 0 did not see 2 ranks"
words "$nwords" 5 two

# a failure of rank 0 alone stops rank 1 too, with a message of its own,
# before any collective of the library fails
w2v2 badcorpus 20 --generate 20k --write-corpus "$tmp/no-such-dir/x"
[ "$st" -ne 0 ] || fail "two ranks, a bad --write-corpus: exit 0"
grep -q 'no-such-dir/x: ' "$tmp/badcorpus.err" ||
	fail "two ranks, a bad --write-corpus: no message naming it"
grep -q 'rank 1: stopping: another rank failed' "$tmp/badcorpus.err" ||
	fail "two ranks, a bad --write-corpus: rank 1 did not say why"
grep -q 'word2vec: shemb_' "$tmp/badcorpus.err" &&
	fail "two ranks, a bad --write-corpus: a library call failed"
# ranks that read different texts (the environment differs in
# SHEMB_RANK) stop before training
w2v2 differ 20 --min-count 1 /proc/self/environ
[ "$st" -ne 0 ] || fail "two ranks, different texts: exit 0"
grep -q 'the ranks differ in the text and its vocabulary' \
	"$tmp/differ.err" || fail "two ranks, different texts: no message"
grep -q 'training' "$tmp/differ.out" &&
	fail "two ranks, different texts: training started"
exit 0
