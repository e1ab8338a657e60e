/*
 * log.c - log lines to the host's callback or to stderr.
 */
#include "lib/internal.h"

#include <stdarg.h>
#include <stdio.h>

static const char *level_name(int level)
{
	static const char *const names[] = { "off", "error", "warn", "info",
					     "debug" };

	if (level < 0 || level > SHEMB_LOG_DEBUG)
		return "?";
	return names[level];
}

void shemb__log(const shemb_ctx *ctx, int level, const char *fmt, ...)
{
	char line[640];
	va_list ap;

	if (!ctx || level > ctx->attr.log_level || level <= SHEMB_LOG_OFF)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (ctx->attr.log_fn)
		ctx->attr.log_fn(ctx->attr.log_arg, level, line);
	else
		fprintf(stderr, "shemb[%d] %s: %s\n", ctx->attr.rank,
			level_name(level), line);
}
