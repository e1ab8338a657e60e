/*
 * interact.c - DLRM's dot interaction.  Of the nvec vectors of a sample
 * (z0 from the bottom MLP, then one pooled embedding per table), the top
 * MLP sees z0 itself followed by the dot product of every pair i < j, in
 * the order (0,1), (0,2), (1,2), (0,3), (1,3), (2,3), ...: the upper
 * triangle of the Gram matrix, column by column.
 */
#include <string.h>

#include "examples/dlrm/dlrm.h"

int interact_width(int nvec, int dim)
{
	return dim + nvec * (nvec - 1) / 2;
}

static float dot(const float *a, const float *b, int dim)
{
	float s = 0;

	for (int c = 0; c < dim; c++)
		s += a[c] * b[c];
	return s;
}

void interact_forward(int n, int nvec, int dim, const float *const *z,
		      float *out)
{
	int width = interact_width(nvec, dim);

	for (int s = 0; s < n; s++) {
		float *o = out + (size_t)s * width;
		size_t row = (size_t)s * dim;

		memcpy(o, z[0] + row, (size_t)dim * sizeof(*o));
		o += dim;
		for (int j = 1; j < nvec; j++)
			for (int i = 0; i < j; i++)
				*o++ = dot(z[i] + row, z[j] + row, dim);
	}
}

/* d<zi, zj> / dzi = zj and / dzj = zi: each pair's gradient g adds g zj
 * to dzi and g zi to dzj. */
void interact_backward(int n, int nvec, int dim, const float *const *z,
		       const float *dout, float *const *dz)
{
	int width = interact_width(nvec, dim);

	for (int s = 0; s < n; s++) {
		const float *g = dout + (size_t)s * width;
		size_t row = (size_t)s * dim;

		memcpy(dz[0] + row, g, (size_t)dim * sizeof(*g));
		for (int i = 1; i < nvec; i++)
			memset(dz[i] + row, 0, (size_t)dim * sizeof(*g));
		g += dim;
		for (int j = 1; j < nvec; j++) {
			for (int i = 0; i < j; i++, g++) {
				const float *zi = z[i] + row, *zj = z[j] + row;
				float *di = dz[i] + row, *dj = dz[j] + row;

				for (int c = 0; c < dim; c++) {
					di[c] += *g * zj[c];
					dj[c] += *g * zi[c];
				}
			}
		}
	}
}
