/*
 * The csid error table (include/csid.h) and errors with context.
 */
#include "util/err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

struct err_info {
	const char *code;
	const char *msg;
	int http;
	bool retry;
};

/* clang-format off */
static const struct err_info err_table[] = {
#define ERR_ROW_(name, code, msg, http, retry) {code, msg, http, retry},
	CSID_ERRORS(ERR_ROW_)
#undef ERR_ROW_
};
/* clang-format on */

static const struct err_info *err_lookup(int e)
{
	int i = e - CSID_ERROR_BASE_ - 1;

	if (e >= 0 || i < 0 || i >= (int)(sizeof(err_table) / sizeof(err_table[0])))
		return NULL;
	return &err_table[i];
}

const char *csid_strerror(int e)
{
	const struct err_info *i = err_lookup(e);

	if (e == 0)
		return "ok";
	return i ? i->msg : "unknown error";
}

const char *csid_err_code(int e)
{
	const struct err_info *i = err_lookup(e);

	if (e == 0)
		return "ok";
	return i ? i->code : "unknown";
}

int csid_err_http_status(int e)
{
	const struct err_info *i = err_lookup(e);

	if (e == 0)
		return 200;
	return i ? i->http : 500;
}

bool csid_err_retryable(int e)
{
	const struct err_info *i = err_lookup(e);

	return i ? i->retry : false;
}

void err_clear(struct err *e)
{
	if (!e)
		return;
	e->code = 0;
	e->msg[0] = '\0';
}

int err_set(struct err *e, int code, const char *fmt, ...)
{
	va_list ap;

	if (!e)
		return code;
	e->code = code;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
	return code;
}

int err_wrap(struct err *e, const char *fmt, ...)
{
	char prefix[ERR_MSG_MAX];
	char old[ERR_MSG_MAX];
	va_list ap;

	if (!e)
		return 0;
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	memcpy(old, e->msg, sizeof(old));
	if (old[0])
		snprintf(e->msg, sizeof(e->msg), "%s: %s", prefix, old);
	else
		snprintf(e->msg, sizeof(e->msg), "%s: %s", prefix, csid_strerror(e->code));
	return e->code;
}

int err_from_errno(int errnum)
{
	switch (errnum) {
	case 0:
		return 0;
	case ENOMEM:
		return CSID_ENOMEM;
	case ENOENT:
		return CSID_ENOTFOUND;
	case EEXIST:
		return CSID_EEXIST;
	case EINVAL:
	case ENAMETOOLONG:
		return CSID_EINVAL;
	case EACCES:
	case EPERM:
	case EROFS:
		return CSID_EPERM;
	case ETIMEDOUT:
		return CSID_ETIMEDOUT;
	case EBUSY:
	case EAGAIN:
		return CSID_EABORTED;
	case ECONNREFUSED:
	case ECONNRESET:
	case EPIPE:
		return CSID_EUNAVAIL;
	case ENOSPC:
	case EDQUOT:
		return CSID_EEXHAUSTED;
	case E2BIG:
	case EFBIG:
		return CSID_ETOOBIG;
	default:
		return CSID_EIO;
	}
}

int err_errno(struct err *e, int errnum, const char *fmt, ...)
{
	char what[ERR_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return err_set(e, err_from_errno(errnum), "%s: %s", what, strerror(errnum));
}
