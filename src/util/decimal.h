/*
 * Integers as decimal text without printf, for the lines and documents
 * written on every request (JSON numbers, the request log).
 */
#ifndef CSID_UTIL_DECIMAL_H
#define CSID_UTIL_DECIMAL_H

#include <stddef.h>

/* The longest text and its NUL: "-9223372036854775808". */
#define DECIMAL_MAX 21

/* v in decimal into buf, NUL-terminated; returns its length. */
size_t decimal_text(char buf[DECIMAL_MAX], long long v);

#endif
