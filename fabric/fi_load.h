/*
 * fi_load.h - libfabric, loaded at run time by the first context of more
 * than one rank (fi_load.c): the functions of it the transport calls
 * that are not inline in its headers.
 */
#ifndef SHEMB_FI_LOAD_H
#define SHEMB_FI_LOAD_H

#include <stddef.h>
#include <stdint.h>

#include <rdma/fabric.h>

/* Load libfabric once per process: 0, or SHEMB_ENOTSUP with the reason
 * in err (the library cannot be found or lacks a function). */
int shemb__fi_load(char *err, size_t errlen);

/* libfabric's functions of these names; only after shemb__fi_load(). */
int shemb__fi_getinfo(uint32_t version, const char *node,
		      const char *service, uint64_t flags,
		      const struct fi_info *hints, struct fi_info **info);
void shemb__fi_freeinfo(struct fi_info *info);
struct fi_info *shemb__fi_dupinfo(const struct fi_info *info);
int shemb__fi_fabric(struct fi_fabric_attr *attr, struct fid_fabric **fabric,
		     void *context);
const char *shemb__fi_strerror(int errnum);

#endif
