/*
 * csid public API: error codes shared by the library, the programs and the
 * HTTP API. Every fallible function returns 0 or a negative CSID_E* code.
 * One table gives each code its name (used as the "code" of API errors),
 * its message, the HTTP status the API answers with, and whether an
 * operation that failed with it may be retried unchanged.
 */
#ifndef CSID_H
#define CSID_H

#include <stdbool.h>

/* clang-format off */
/* X(name, short code string, message, http status, retryable) */
#define CSID_ERRORS(X)                                                        \
	X(EINVAL, "invalid_argument", "invalid argument", 400, false)         \
	X(ENOMEM, "no_memory", "out of memory", 500, true)                    \
	X(ENOTFOUND, "not_found", "not found", 404, false)                    \
	X(EEXIST, "already_exists", "already exists", 409, false)             \
	X(ECONFLICT, "conflict", "conflict", 409, false)                      \
	X(EPRECOND, "failed_precondition", "failed precondition", 412, false) \
	X(EABORTED, "aborted", "operation pending, try again", 409, true)     \
	X(ETIMEDOUT, "deadline_exceeded", "deadline exceeded", 504, true)     \
	X(EUNAVAIL, "unavailable", "unavailable", 503, true)                  \
	X(EEXHAUSTED, "resource_exhausted", "resource exhausted", 429, true)  \
	X(ERANGE, "out_of_range", "out of range", 400, false)                 \
	X(EPERM, "permission_denied", "permission denied", 403, false)        \
	X(EUNAUTH, "unauthenticated", "unauthenticated", 401, false)          \
	X(EUNIMPL, "unimplemented", "not implemented", 501, false)            \
	X(ECANCELED, "canceled", "canceled", 499, true)                       \
	X(EPROTO, "protocol_error", "protocol error", 502, false)             \
	X(EIO, "io_error", "i/o error", 500, true)                            \
	X(ETOOBIG, "too_large", "too large", 413, false)                      \
	X(EINTERNAL, "internal", "internal error", 500, false)
/* clang-format on */

enum csid_error {
	CSID_OK = 0,
	CSID_ERROR_BASE_ = -1000,
#define CSID_ERR_ENUM_(name, code, msg, http, retry) CSID_##name,
	CSID_ERRORS(CSID_ERR_ENUM_)
#undef CSID_ERR_ENUM_
	    CSID_ERROR_END_
};

/* Message of a code ("unknown error" for a code outside the table). */
const char *csid_strerror(int err);
/* Short snake_case name of a code, used as "code" in API errors. */
const char *csid_err_code(int err);
/* HTTP status the API answers a code with (200 for 0). */
int csid_err_http_status(int err);
/* Whether an operation that failed with err may be retried unchanged. */
bool csid_err_retryable(int err);

#endif
