# examples/word2vec/local.mk: rules of examples/word2vec (included by Makefile.am)
