/*
 * error.c - status strings and the per-thread detail of the last failure.
 */
#include "lib/internal.h"
#include "lib/thread.h"

#include <stdarg.h>
#include <stdio.h>

/* One slot per thread, tagged with the serial of the context it belongs to
 * (0 for failures without a context), so that a context created at the
 * address of a destroyed one never shows that one's message. */
static _Thread_local struct {
	uint64_t ctx_serial;
	char msg[512];
} last_error;

SHEMB_API const char *shemb_strerror(int code)
{
	switch (code) {
	case SHEMB_OK:
		return "success";
	case SHEMB_EINVAL:
		return "invalid argument";
	case SHEMB_ENOMEM:
		return "out of memory or over budget";
	case SHEMB_ESTATE:
		return "call out of order";
	case SHEMB_ENOTSUP:
		return "not supported by this build or setup";
	case SHEMB_ENODEV:
		return "device not available";
	case SHEMB_EIO:
		return "input/output error";
	case SHEMB_EPEER:
		return "peer failed";
	case SHEMB_ETIMEDOUT:
		return "timed out";
	case SHEMB_ECORRUPT:
		return "data corrupt";
	case SHEMB_EPERM:
		return "operation not permitted";
	case SHEMB_EINTERNAL:
		return "internal error";
	default:
		return "unknown status code";
	}
}

int shemb__fail(const shemb_ctx *ctx, int code, const char *fmt, ...)
{
	va_list ap;

	last_error.ctx_serial = ctx ? ctx->serial : 0;
	va_start(ap, fmt);
	vsnprintf(last_error.msg, sizeof(last_error.msg), fmt, ap);
	va_end(ap);
	/* a failure on a thread of the library (a started step's) reaches
	 * the application's thread, which logs it: log_fn runs on the
	 * thread of the call it logs */
	if (ctx && !shemb__on_library_thread())
		shemb__log(ctx, SHEMB_LOG_DEBUG, "%s: %s", shemb_strerror(code),
			   last_error.msg);
	return code;
}

SHEMB_API const char *shemb_ctx_last_error(const shemb_ctx *ctx)
{
	uint64_t serial = ctx ? ctx->serial : 0;

	if (last_error.ctx_serial != serial)
		return "";
	return last_error.msg;
}
