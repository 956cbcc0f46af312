/*
 * JSON text writer (see jsonw.h). The separator state is one bit per open
 * level (whether it holds an item yet) plus whether a key was just
 * written; strings are copied in runs between the bytes that need an
 * escape.
 */
#include "util/jsonw.h"

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

/* Room for n more bytes and a NUL; false (w failed) when there is none. */
static bool jsonw_room(struct jsonw *w, size_t n)
{
	size_t cap = w->cap;
	char *np;

	if (w->failed)
		return false;
	if (w->len + n + 1 <= cap)
		return true;
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

static void jsonw_put(struct jsonw *w, const char *s, size_t n)
{
	if (!jsonw_room(w, n))
		return;
	memcpy(w->p + w->len, s, n);
	w->len += n;
}

static void jsonw_byte(struct jsonw *w, char c)
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

/*
 * The length of the UTF-8 sequence at s (n bytes left), or 0 when it is
 * not one: RFC 3629, as jansson checks it (no overlong forms, no
 * surrogates, nothing above U+10FFFF).
 */
static size_t jsonw_utf8_len(const unsigned char *s, size_t n)
{
	uint32_t cp;
	size_t len;

	if (s[0] < 0x80)
		return 1;
	if (s[0] < 0xc2 || s[0] > 0xf4)
		return 0;
	len = s[0] < 0xe0 ? 2 : s[0] < 0xf0 ? 3 : 4;
	if (len > n)
		return 0;
	cp = s[0] & (0x7f >> len);
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
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

static bool jsonw_plain(unsigned char c)
{
	return c >= 0x20 && c != '"' && c != '\\';
}

/*
 * s (n bytes) as a JSON string, copied in runs between the bytes that
 * need an escape. ascii: each byte from 0x80 up as '?'. Returns false
 * (nothing kept) when s is not valid UTF-8 and ascii is not set.
 */
static bool jsonw_string(struct jsonw *w, const char *s, size_t n, bool ascii)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t run = 0, start = w->len, i = 0;
	char esc[8];

	jsonw_byte(w, '"');
	while (i < n) {
		size_t len;

		if (u[i] < 0x80 && jsonw_plain(u[i])) {
			i++;
			continue;
		}
		if (u[i] >= 0x80 && !ascii) {
			if ((len = jsonw_utf8_len(u + i, n - i)) == 0) {
				w->len = start;
				return false;
			}
			i += len;
			continue;
		}
		jsonw_put(w, s + run, i - run);
		if (u[i] >= 0x80)
			jsonw_byte(w, '?');
		else
			jsonw_put(w, esc, jsonw_escape(u[i], esc));
		run = ++i;
	}
	jsonw_put(w, s + run, n - run);
	jsonw_byte(w, '"');
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
	/* Digits from the end; the magnitude as unsigned, so INT64_MIN fits. */
	uint64_t m = n < 0 ? 0 - (uint64_t)n : (uint64_t)n;
	char buf[24];
	size_t at = sizeof(buf);

	do {
		buf[--at] = (char)('0' + m % 10);
		m /= 10;
	} while (m);
	if (n < 0)
		buf[--at] = '-';
	jsonw_item(w);
	jsonw_put(w, buf + at, sizeof(buf) - at);
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
