/*
 * rowinit.h - initial row values, a pure function of (seed, table, row,
 * column): any shard plan, world size or backend makes the same table.
 */
#ifndef SHEMB_ROWINIT_H
#define SHEMB_ROWINIT_H

#include <stdint.h>

#include "lib/mem_ops.h"

/* Write the initial fp32 values of row `row`, columns 0 .. dim - 1. */
void shemb__init_row(const struct shemb__init_spec *spec, int64_t row,
		     int dim, float *out);

#endif
