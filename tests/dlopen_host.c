/*
 * dlopen_host.c - load libshemb at run time, as Python's ctypes or a plugin
 * host does, and make one table and one lookup through dlsym; with the
 * launcher's environment, the context is one of several ranks.
 * The host sets handlers of the signals that a dependency of libfabric
 * (libinfinipath) took over as it was loaded, with libshemb, before it:
 * they must still be the host's after the load, the context and its
 * destruction.  Before, loading libshemb replaced them.
 * Usage: dlopen_host PATH-TO-libshemb.so
 * Exit 0 on success, 2 when dlopen fails (message on stdout), 1 otherwise.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>

#include <shemb.h>

struct api {
	int (*ctx_create)(const struct shemb_ctx_attr *, shemb_ctx **);
	int (*ctx_destroy)(shemb_ctx *);
	void (*table_attr_init)(struct shemb_table_attr *, size_t);
	int (*table_create)(shemb_ctx *, const struct shemb_table_attr *,
			    shemb_table **);
	void (*bags_init)(struct shemb_bags *, size_t);
	int (*lookup)(shemb_ctx *, int, const struct shemb_bags *,
		      float *const *, unsigned);
	int (*read_rows)(shemb_table *, int64_t, const int64_t *, void *, int);
};

static int bind(void *h, struct api *a)
{
	*(void **)&a->ctx_create = dlsym(h, "shemb_ctx_create");
	*(void **)&a->ctx_destroy = dlsym(h, "shemb_ctx_destroy");
	*(void **)&a->table_attr_init = dlsym(h, "shemb_table_attr_init_size");
	*(void **)&a->table_create = dlsym(h, "shemb_table_create");
	*(void **)&a->bags_init = dlsym(h, "shemb_bags_init_size");
	*(void **)&a->lookup = dlsym(h, "shemb_lookup");
	*(void **)&a->read_rows = dlsym(h, "shemb_table_read_rows");
	return a->ctx_create && a->ctx_destroy && a->table_attr_init &&
	       a->table_create && a->bags_init && a->lookup && a->read_rows;
}

/* One bag {1, 2}: its SUM must equal row 1 + row 2 read back. */
static int one_lookup(const struct api *a)
{
	struct shemb_table_attr ta;
	struct shemb_bags b;
	shemb_ctx *ctx;
	shemb_table *t;
	int64_t off[2] = { 0, 2 }, ids[2] = { 1, 2 };
	float out[4], rows[8], *outs[1] = { out };
	int bad = 0;

	if (a->ctx_create(NULL, &ctx))
		return 1;
	a->table_attr_init(&ta, sizeof(ta));
	ta.rows = 10;
	ta.dim = 4;
	a->bags_init(&b, sizeof(b));
	if (a->table_create(ctx, &ta, &t))
		bad = 1;
	b.table = t;
	b.nbags = 1;
	b.offsets = off;
	b.nids = 2;
	b.ids = ids;
	if (!bad && (a->lookup(ctx, 1, &b, outs, SHEMB_LOOKUP_NO_GRAD) ||
		     a->read_rows(t, 2, ids, rows, SHEMB_F32)))
		bad = 1;
	for (int c = 0; !bad && c < 4; c++)
		bad = out[c] != rows[c] + rows[4 + c];
	a->ctx_destroy(ctx);
	return bad;
}

static const int host_signals[] = { SIGSEGV, SIGBUS, SIGILL, SIGABRT,
				    SIGINT, SIGTERM };

static void host_handler(int sig)
{
	(void)sig;
}

static void set_host_handlers(void)
{
	for (size_t i = 0; i < sizeof(host_signals) / sizeof(int); i++)
		signal(host_signals[i], host_handler);
}

/* 0 when every handler is still the host's, else 1 (and which not). */
static int host_handlers_kept(const char *when)
{
	int bad = 0;

	for (size_t i = 0; i < sizeof(host_signals) / sizeof(int); i++) {
		struct sigaction now;
		Dl_info where = { 0 };

		if (sigaction(host_signals[i], NULL, &now) ||
		    now.sa_handler == host_handler)
			continue;
		dladdr((void *)now.sa_handler, &where);
		printf("%s, signal %d has a handler of %s\n", when,
		       host_signals[i],
		       where.dli_fname ? where.dli_fname : "no object");
		bad = 1;
	}
	return bad;
}

int main(int argc, char **argv)
{
	struct api a;
	void *h;
	int rc;

	if (argc != 2)
		return 1;
	set_host_handlers();
	h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		printf("dlopen failed: %s\n", dlerror());
		return 2;
	}
	if (!bind(h, &a)) {
		printf("missing symbols\n");
		return 1;
	}
	rc = host_handlers_kept("after the load");
	rc |= one_lookup(&a);
	rc |= host_handlers_kept("after the context");
	printf("dlopen + lookup: %s\n", rc ? "FAILED" : "ok");
	dlclose(h);
	return rc;
}
