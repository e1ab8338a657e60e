/*
 * serve.h - read_only tables: the rows lookups read are a version, which
 * shemb_table_reload replaces while lookups go on.  A lookup enters the
 * current version (a count, no lock) and leaves it when it has pooled;
 * a reload publishes the new version, waits until no lookup is in the
 * old one, and frees it.
 */
#ifndef SHEMB_SERVE_H
#define SHEMB_SERVE_H

#include "lib/internal.h"

struct shemb__version {
	struct shemb__store store;
	atomic_int readers;
	/* the versions this one replaced: a lookup may still count itself
	 * in one (it then sees it is not current and leaves), so they stay
	 * allocated, their rows freed, until the table goes */
	struct shemb__version *retired;
};

static inline bool shemb__read_only(const shemb_table *t)
{
	return t->attr.read_only != 0;
}

/* At create, the first version: the table's own store. */
int shemb__serve_init(shemb_table *t);
/* At destroy (the store itself goes with the table). */
void shemb__serve_fini(shemb_table *t);
/* The version a lookup reads, entered; then left. */
struct shemb__version *shemb__serve_enter(shemb_table *t);
void shemb__serve_leave(struct shemb__version *v);

#endif
