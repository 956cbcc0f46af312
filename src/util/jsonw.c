/*
 * JSON text writer (see jsonw.h). The separator state is one bit per open
 * level (whether it holds an item yet) plus whether a key was just
 * written; strings are copied in runs between the bytes that need an
 * escape.
 */
#include "util/jsonw.h"
#include "util/decimal.h"
#include "util/utf8.h"

#include <stdlib.h>
#include <string.h>

#define JSONW_HINT 1024

void jsonw_init(struct jsonw *w, size_t hint)
{
	memset(w, 0, sizeof(*w));
	w->cap = hint ? hint : JSONW_HINT;
	w->p = malloc(w->cap);
	if (!w->p) {
		w->cap = 0;
		w->failed = true;
	}
}

void jsonw_free(struct jsonw *w)
{
	if (w->p) {
		explicit_bzero(w->p, w->cap);
		free(w->p);
	}
	memset(w, 0, sizeof(*w));
}

/* Grows the buffer for n more bytes and a NUL; false (w failed) when it cannot. */
static bool jsonw_grow(struct jsonw *w, size_t n)
{
	size_t cap = w->cap;
	char *np;

	if (w->failed)
		return false;
	while (cap < w->len + n + 1)
		cap = cap ? cap * 2 : JSONW_HINT;
	/* Not realloc: the old copy may hold secrets and is wiped first. */
	np = malloc(cap);
	if (!np) {
		w->failed = true;
		return false;
	}
	memcpy(np, w->p, w->len);
	if (w->p) {
		explicit_bzero(w->p, w->cap);
		free(w->p);
	}
	w->p = np;
	w->cap = cap;
	return true;
}

/* Room for n more bytes and a NUL; false (w failed) when there is none. */
static inline bool jsonw_room(struct jsonw *w, size_t n)
{
	return (w->len + n + 1 <= w->cap && !w->failed) || jsonw_grow(w, n);
}

static inline void jsonw_put(struct jsonw *w, const char *s, size_t n)
{
	if (!jsonw_room(w, n))
		return;
	memcpy(w->p + w->len, s, n);
	w->len += n;
}

static inline void jsonw_byte(struct jsonw *w, char c)
{
	if (jsonw_room(w, 1))
		w->p[w->len++] = c;
}

/* Before a key, or a value outside a member: the separator its level needs. */
static void jsonw_item(struct jsonw *w)
{
	uint64_t bit = (uint64_t)1 << w->depth;

	if (w->after_key) {
		w->after_key = false;
		return;
	}
	if (w->has_item & bit)
		jsonw_byte(w, ',');
	w->has_item |= bit;
}

static void jsonw_open(struct jsonw *w, char c)
{
	jsonw_item(w);
	jsonw_byte(w, c);
	if (w->depth == JSONW_DEPTH_MAX) {
		w->failed = true;
		return;
	}
	w->depth++;
	w->has_item &= ~((uint64_t)1 << w->depth);
}

static void jsonw_close(struct jsonw *w, char c)
{
	if (w->depth > 0)
		w->depth--;
	jsonw_byte(w, c);
}

void jsonw_object_open(struct jsonw *w)
{
	jsonw_open(w, '{');
}

void jsonw_object_close(struct jsonw *w)
{
	jsonw_close(w, '}');
}

void jsonw_array_open(struct jsonw *w)
{
	jsonw_open(w, '[');
}

void jsonw_array_close(struct jsonw *w)
{
	jsonw_close(w, ']');
}

/* The escape of byte c (below 0x20, '"' or '\\') into esc; its length. */
static size_t jsonw_escape(unsigned char c, char esc[8])
{
	static const char hex[] = "0123456789ABCDEF";
	const char *x = NULL;

	switch (c) {
	case '"':
		x = "\\\"";
		break;
	case '\\':
		x = "\\\\";
		break;
	case '\b':
		x = "\\b";
		break;
	case '\f':
		x = "\\f";
		break;
	case '\n':
		x = "\\n";
		break;
	case '\r':
		x = "\\r";
		break;
	case '\t':
		x = "\\t";
		break;
	default:
		memcpy(esc, "\\u00", 4);
		esc[4] = hex[c >> 4];
		esc[5] = hex[c & 15];
		return 6;
	}
	memcpy(esc, x, 2);
	return 2;
}

/*
 * s (n bytes) as a JSON string. Room for the plain case (n bytes and
 * the quotes) is made once and plain bytes are stored straight into it,
 * eight at a time while none of them is special; an escape or a UTF-8
 * sequence goes the slow way and makes room for the rest again. ascii:
 * each byte from 0x80 up as '?'. Returns false (nothing kept) when s is
 * not valid UTF-8 and ascii is not set.
 */
static bool jsonw_string(struct jsonw *w, const char *s, size_t n, bool ascii)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t start = w->len, i = 0, j;
	char esc[8], *d;

	if (!jsonw_room(w, n + 2))
		return true;
	d = w->p;
	j = w->len;
	d[j++] = '"';
	while (i < n) {
		size_t len;
		uint64_t x;

		if (n - i >= 8) {
			memcpy(&x, u + i, 8);
			if (utf8_json_plain8(x)) {
				memcpy(d + j, &x, 8);
				i += 8;
				j += 8;
				continue;
			}
		}
		if (utf8_json_class[u[i]] == 0) {
			d[j++] = (char)u[i++];
			continue;
		}
		w->len = j;
		if (u[i] < 0x80) {
			jsonw_put(w, esc, jsonw_escape(u[i], esc));
			i++;
		} else if (ascii) {
			jsonw_byte(w, '?');
			i++;
		} else {
			if ((len = utf8_seq_len(u + i, n - i)) == 0) {
				w->len = start;
				return false;
			}
			jsonw_put(w, s + i, len);
			i += len;
		}
		if (!jsonw_room(w, n - i + 1))
			return true;
		d = w->p;
		j = w->len;
	}
	d[j++] = '"';
	w->len = j;
	return true;
}

static void jsonw_text(struct jsonw *w, const char *s)
{
	size_t n = strlen(s);

	/* Not UTF-8 (rare: a plugin's text): written again, ASCII only. */
	if (!jsonw_string(w, s, n, false))
		jsonw_string(w, s, n, true);
}

void jsonw_key(struct jsonw *w, const char *key)
{
	jsonw_item(w);
	jsonw_text(w, key);
	jsonw_byte(w, ':');
	w->after_key = true;
}

void jsonw_str(struct jsonw *w, const char *s)
{
	jsonw_item(w);
	if (s)
		jsonw_text(w, s);
	else
		jsonw_put(w, "null", 4);
}

void jsonw_int(struct jsonw *w, int64_t n)
{
	char buf[DECIMAL_MAX];
	size_t len = decimal_text(buf, n);

	jsonw_item(w);
	jsonw_put(w, buf, len);
}

void jsonw_bool(struct jsonw *w, bool b)
{
	jsonw_item(w);
	if (b)
		jsonw_put(w, "true", 4);
	else
		jsonw_put(w, "false", 5);
}

void jsonw_raw_value(struct jsonw *w, const char *json, size_t len)
{
	jsonw_item(w);
	jsonw_put(w, json, len);
}

void jsonw_member_str(struct jsonw *w, const char *key, const char *s)
{
	if (!s)
		return;
	jsonw_key(w, key);
	jsonw_str(w, s);
}

void jsonw_member_int(struct jsonw *w, const char *key, int64_t n)
{
	jsonw_key(w, key);
	jsonw_int(w, n);
}

void jsonw_member_bool(struct jsonw *w, const char *key, bool b)
{
	jsonw_key(w, key);
	jsonw_bool(w, b);
}

void jsonw_lkey(struct jsonw *w, const char *quoted, size_t len)
{
	jsonw_item(w);
	jsonw_put(w, quoted, len);
	w->after_key = true;
}

void jsonw_lmember_str(struct jsonw *w, const char *quoted, size_t len, const char *s)
{
	if (!s)
		return;
	jsonw_lkey(w, quoted, len);
	jsonw_str(w, s);
}

void jsonw_lmember_int(struct jsonw *w, const char *quoted, size_t len, int64_t n)
{
	jsonw_lkey(w, quoted, len);
	jsonw_int(w, n);
}

void jsonw_lmember_bool(struct jsonw *w, const char *quoted, size_t len, bool b)
{
	jsonw_lkey(w, quoted, len);
	jsonw_bool(w, b);
}

int jsonw_finish(struct jsonw *w, char **out, size_t *len)
{
	if (w->failed || !w->p) {
		jsonw_free(w);
		return -1;
	}
	w->p[w->len] = '\0';
	*out = w->p;
	*len = w->len;
	memset(w, 0, sizeof(*w));
	return 0;
}
