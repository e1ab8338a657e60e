/*
 * consumer.c - the smallest user program: built against the installed
 * library by tests/consumer.sh with only pkg-config's flags.
 */
#include <shemb.h>
#include <stdio.h>

int main(void)
{
	struct shemb_table_attr a;
	shemb_ctx *ctx;
	shemb_table *t;

	if (shemb_version() != SHEMB_VERSION_NUMBER) {
		printf("header %d, library %u\n", SHEMB_VERSION_NUMBER,
		       shemb_version());
		return 1;
	}
	shemb_table_attr_init(&a);
	a.rows = 100;
	a.dim = 16;
	if (shemb_ctx_create(NULL, &ctx) || shemb_table_create(ctx, &a, &t)) {
		printf("error: %s\n", shemb_ctx_last_error(ctx));
		return 1;
	}
	printf("libshemb %s: table of %lld rows ready\n",
	       shemb_version_string(), (long long)a.rows);
	return shemb_ctx_destroy(ctx);
}
