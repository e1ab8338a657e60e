/*
 * test_gpu_probe.c - the CUDA devices of this host, and a kernel's round
 * trip through each, against a plain loop.  Without a usable device it
 * says why and skips (exit 77).  With --count, it prints how many devices
 * there are (tests/gpu/test_gpu_ranks.sh).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu.h"

#define N 100003 /* not a multiple of a block */

static int check_device(int dev, const float *in, float *out)
{
	char text[256];
	int bad = 0;

	if (shemb__gpu_describe(dev, text, sizeof(text)) == 0)
		printf("device %d: %s\n", dev, text);
	if (shemb__gpu_selftest(dev, N, in, out, 1.5f, -2.0f, text,
				sizeof(text))) {
		printf("FAIL device %d: %s\n", dev, text);
		return 1;
	}
	for (int i = 0; i < N; i++)
		bad += out[i] != 1.5f * in[i] - 2.0f;
	printf("%s device %d: %d of %d values differ from the loop\n",
	       bad ? "FAIL" : "ok", dev, bad, N);
	return bad != 0;
}

int main(int argc, char **argv)
{
	char why[256] = "";
	int n = shemb__gpu_count(why, sizeof(why)), fails = 0;
	float *in, *out;

	if (argc > 1 && !strcmp(argv[1], "--count")) {
		printf("%d\n", n);
		return 0;
	}
	in = malloc(N * sizeof(float));
	out = malloc(N * sizeof(float));
	if (!in || !out)
		return 99;
	if (n == 0) {
		printf("SKIP: no usable CUDA device (%s)\n", why);
		free(in);
		free(out);
		return 77;
	}
	for (int i = 0; i < N; i++)
		in[i] = (float)(i % 1000) * 0.25f; /* exact in fp32 */
	for (int dev = 0; dev < n; dev++)
		fails += check_device(dev, in, out);
	free(in);
	free(out);
	return fails ? 1 : 0;
}
