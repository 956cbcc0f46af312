/*
 * Error values with context. A struct err carries a csid code and a
 * message that grows a prefix at each level on the way up, so the operator
 * reads "mount vol-7: node stage: plugin hostpath: deadline exceeded".
 * Never put a secret into a message.
 */
#ifndef CSID_UTIL_ERR_H
#define CSID_UTIL_ERR_H

#include "csid.h"

#define ERR_MSG_MAX 512

struct err {
	int code; /* 0 or a negative CSID_E* */
	char msg[ERR_MSG_MAX]; /* human text, never secrets */
};

/* Clears e. e may be NULL in every err_* function (then they only return code). */
void err_clear(struct err *e);
/* Sets code and message (printf format); returns code. */
int err_set(struct err *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Prefixes the message with "context: "; returns e->code. */
int err_wrap(struct err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Maps an errno value to a csid code. */
int err_from_errno(int errnum);
/* Sets e from errno with the message "<what>: strerror(errno)"; returns code. */
int err_errno(struct err *e, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
