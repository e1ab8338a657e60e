/*
 * parts.h - which outputs of a lookup started without waiting are final:
 * the step thread marks a bag set's output once it is written (pooling
 * goes table by table), the caller waits for one (shemb_wait_part).
 */
#ifndef SHEMB_PARTS_H
#define SHEMB_PARTS_H

#include <stdbool.h>

struct shemb__parts;

/* For n bag sets, none final; NULL without memory. */
struct shemb__parts *shemb__parts_new(int n);
void shemb__parts_free(struct shemb__parts *p);
int shemb__parts_count(const struct shemb__parts *p);
/* The outputs of the sets at index[0 .. n) are final. */
void shemb__parts_mark(struct shemb__parts *p, const int *index, int n);
/* The step ended with status: every output is as final as it will be. */
void shemb__parts_end(struct shemb__parts *p, int status);
/* *done: set i's output is final (or the step failed: its status is
 * returned).  With wait_ms > 0, waits until it is, at most that long. */
int shemb__parts_get(struct shemb__parts *p, int i, int wait_ms, int *done);

#endif
