/*
 * UTF-8 sequence checks shared by the JSON writer (util/jsonw.h) and
 * reader (util/jsonr.h), so both hold text to the same rule: RFC 3629 as
 * jansson checks it (no overlong forms, no surrogates, nothing above
 * U+10FFFF).
 */
#ifndef CSID_UTIL_UTF8_H
#define CSID_UTIL_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The length of the UTF-8 sequence at s (n > 0 bytes left), or 0 when it is not one. */
size_t utf8_seq_len(const unsigned char *s, size_t n);

/*
 * Each byte's class in a JSON string: 0 as is, 1 escaped ('"', '\\',
 * control characters), 2 a byte of a UTF-8 sequence (from 0x80).
 */
extern const unsigned char utf8_json_class[256];

/*
 * Whether none of the 8 bytes in x (loaded from text with memcpy) needs
 * a JSON string's slow way: a control character (below 0x20), '"', '\\'
 * or a byte of a UTF-8 sequence (from 0x80). Eight bytes of a string are
 * checked at once, a few instructions instead of a few per byte.
 */
static inline bool utf8_json_plain8(uint64_t x)
{
	const uint64_t ones = 0x0101010101010101ULL, high = 0x8080808080808080ULL;
	uint64_t quote = x ^ (ones * '"'), bslash = x ^ (ones * '\\');

	return ((x |
		 ((x - ones * 0x20) | ((quote - ones) & ~quote) | ((bslash - ones) & ~bslash))) &
		high) == 0;
}

#endif
