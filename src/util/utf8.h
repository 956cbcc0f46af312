/*
 * UTF-8 sequence checks shared by the JSON writer (util/jsonw.h) and
 * reader (util/jsonr.h), so both hold text to the same rule: RFC 3629 as
 * jansson checks it (no overlong forms, no surrogates, nothing above
 * U+10FFFF).
 */
#ifndef CSID_UTIL_UTF8_H
#define CSID_UTIL_UTF8_H

#include <stddef.h>

/* The length of the UTF-8 sequence at s (n > 0 bytes left), or 0 when it is not one. */
size_t utf8_seq_len(const unsigned char *s, size_t n);

#endif
