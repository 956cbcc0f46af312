/*
 * Base64 (RFC 4648, the standard alphabet, padded): the one codec of the
 * byte strings JSON documents carry (the agent's remote controller RPCs;
 * the tests that write to etcd's JSON gateway behind the store's back).
 */
#ifndef CSID_UTIL_BASE64_H
#define CSID_UTIL_BASE64_H

#include <stddef.h>

/* The base64 text of n bytes, malloc'd and NUL-terminated (*len its length); NULL when out of
 * memory. */
char *base64_encode(const void *in, size_t n, size_t *len);

/*
 * Decodes n bytes of base64 text (padded, a multiple of 4 long) into a
 * malloc'd buffer *out of *outn bytes, NUL-terminated for convenience.
 * Returns 0, CSID_EPROTO (not base64) or CSID_ENOMEM.
 */
int base64_decode(const char *in, size_t n, char **out, size_t *outn);

#endif
