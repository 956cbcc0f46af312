/*
 * A JSON pull reader: walks a text value by value without building a
 * tree, so a decoder fills its own structs straight from the text, its
 * strings copied once into its arena. It holds the text to RFC 8259 as
 * jansson's parser does: the grammar, strings of valid UTF-8 with valid
 * escapes (a lone surrogate is refused; \u0000 is kept as a NUL byte for
 * the caller to judge), nothing but white space after the value, and at
 * most JSONR_DEPTH_MAX levels of nesting. Duplicate keys are for the
 * caller to find (it knows which keys it keeps).
 *
 * Use: jsonr_init, then for each value jsonr_peek its kind and take it
 * with the matching call (jsonr_open for an object or array, then
 * jsonr_key / jsonr_item until they give 0), or jsonr_skip it; last
 * jsonr_end. Every call returns 0 (or a count) on success and -1 on the
 * first error, after which r->err says what (static text) and
 * jsonr_where where; later calls keep failing. The reader never writes
 * into the text and keeps no copy of it.
 */
#ifndef CSID_UTIL_JSONR_H
#define CSID_UTIL_JSONR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/arena.h"

#define JSONR_DEPTH_MAX 512

enum jsonr_kind {
	JSONR_BAD, /* not the start of a value (r->err set) */
	JSONR_NULL,
	JSONR_BOOL,
	JSONR_NUMBER,
	JSONR_STRING,
	JSONR_ARRAY,
	JSONR_OBJECT,
};

struct jsonr {
	const char *start, *p, *end;
	const char *err; /* NULL, or what is wrong at err_at */
	const char *err_at;
	unsigned depth;
};

void jsonr_init(struct jsonr *r, const char *text, size_t len);
/* The kind of the next value, white space skipped, nothing taken. */
enum jsonr_kind jsonr_peek(struct jsonr *r);
/* Takes the '{' or '[' of the next value (jsonr_peek said which). */
int jsonr_open(struct jsonr *r);
/*
 * The next member of the open object: 1 with its key decoded into buf
 * (cap bytes, NUL-terminated) and the ':' taken, or 0 once the closing
 * '}' is taken, or -1. *klen is the key's full length: when it is cap or
 * more, buf holds no key (too long for any the caller knows). n counts
 * the members seen so far (the caller's, 0 to start; updated here).
 */
int jsonr_key(struct jsonr *r, size_t *n, char *buf, size_t cap, size_t *klen);
/* As jsonr_key, the key copied into a instead (*key; its length *klen). */
int jsonr_key_dup(struct jsonr *r, size_t *n, struct arena *a, char **key, size_t *klen);
/* The next item of the open array: 1 when one follows, 0 once ']' is taken, or -1. */
int jsonr_item(struct jsonr *r, size_t *n);
/* Takes a string value, decoded and NUL-terminated into a (*len: its length). */
int jsonr_str(struct jsonr *r, struct arena *a, char **out, size_t *len);
/* Takes a string value into buf as jsonr_key does (*len >= cap: too long, buf holds none). */
int jsonr_str_buf(struct jsonr *r, char *buf, size_t cap, size_t *len);
/*
 * Takes a number: 0 and *out when it is an integer that fits, 1 (taken)
 * when it has a fraction or exponent or does not fit, -1 when it is not
 * a number.
 */
int jsonr_int(struct jsonr *r, int64_t *out);
/* Takes true or false. */
int jsonr_bool(struct jsonr *r, bool *out);
/* Takes null, true or false (whichever jsonr_peek saw). */
int jsonr_literal(struct jsonr *r);
/* Skips the next value whole, checking it as it goes. */
int jsonr_skip(struct jsonr *r);
/* Checks that nothing but white space is left. */
int jsonr_end(struct jsonr *r);
/* Sets the error (msg static) at the current position, if none is set yet; returns -1. */
int jsonr_fail(struct jsonr *r, const char *msg);
/* The 1-based line and column of the error (or of the current position). */
void jsonr_where(const struct jsonr *r, int *line, int *column);

#endif
