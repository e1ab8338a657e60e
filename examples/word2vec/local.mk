# examples/word2vec/local.mk: rules of examples/word2vec, included by
# Makefile.am

# Skip-gram word2vec with negative sampling on two libshemb tables, on one
# rank or several (shemb-run); see examples/word2vec/word2vec.c.
noinst_PROGRAMS += examples/word2vec/word2vec
examples_word2vec_word2vec_SOURCES = examples/word2vec/word2vec.h \
	examples/word2vec/word2vec.c examples/word2vec/options.c \
	examples/word2vec/text.c examples/word2vec/vocab.c \
	examples/word2vec/corpus_gen.c examples/word2vec/rng.c \
	examples/word2vec/pairs.c examples/word2vec/loss.c \
	examples/word2vec/model.c examples/word2vec/progress.c \
	examples/word2vec/vectors.c examples/word2vec/neighbours.c
examples_word2vec_word2vec_LDADD = libshemb.la -lm

# The loss and its gradients, the negatives' table, subsampling, the
# vocabulary's order and the words' clock, against references written in
# the check program; it needs nothing of libshemb.
check_PROGRAMS += examples/word2vec/word2vec_check
examples_word2vec_word2vec_check_SOURCES = examples/word2vec/word2vec.h \
	examples/word2vec/word2vec_check.c examples/word2vec/vocab.c \
	examples/word2vec/pairs.c examples/word2vec/loss.c \
	examples/word2vec/rng.c
examples_word2vec_word2vec_check_LDADD = -lm

# Planted pairs from a corpus the test writes itself, found again on one
# rank and on two; its vocabulary, words and pairs against counts made
# with sort and awk; bad options, bad paths and a missing file.
TESTS += examples/word2vec/word2vec_check tests/word2vec.sh
EXTRA_DIST += tests/word2vec.sh
