/*
 * rng.c - splitmix64: a small, fast generator whose numbers are the same
 * on every platform, so that every rank builds the same generated corpus.
 */
#include "word2vec.h"

uint64_t w2v_mix64(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}
