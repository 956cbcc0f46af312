/*
 * JSON pull reader (see jsonr.h). The cursor moves over the caller's
 * text; containers only count their depth (the caller's loops know
 * whether they are in an object or an array), so a reader is a few
 * pointers. Strings are decoded in one pass into the caller's buffer or
 * arena: an escape never makes a string longer, so the raw span bounds
 * the decoded length.
 */
#include "util/jsonr.h"

#include <string.h>

#include "util/utf8.h"

void jsonr_init(struct jsonr *r, const char *text, size_t len)
{
	memset(r, 0, sizeof(*r));
	r->start = r->p = text;
	r->end = text + len;
}

int jsonr_fail(struct jsonr *r, const char *msg)
{
	if (!r->err) {
		r->err = msg;
		r->err_at = r->p;
	}
	return -1;
}

void jsonr_where(const struct jsonr *r, int *line, int *column)
{
	const char *at = r->err ? r->err_at : r->p;

	*line = 1;
	*column = 1;
	for (const char *q = r->start; q < at; q++) {
		if (*q == '\n') {
			(*line)++;
			*column = 1;
		} else {
			(*column)++;
		}
	}
}

static void jsonr_ws(struct jsonr *r)
{
	while (r->p < r->end && (*r->p == ' ' || *r->p == '\n' || *r->p == '\r' || *r->p == '\t'))
		r->p++;
}

enum jsonr_kind jsonr_peek(struct jsonr *r)
{
	if (r->err)
		return JSONR_BAD;
	jsonr_ws(r);
	if (r->p >= r->end) {
		jsonr_fail(r, "unexpected end of text");
		return JSONR_BAD;
	}
	switch (*r->p) {
	case '{':
		return JSONR_OBJECT;
	case '[':
		return JSONR_ARRAY;
	case '"':
		return JSONR_STRING;
	case 't':
	case 'f':
		return JSONR_BOOL;
	case 'n':
		return JSONR_NULL;
	case '-':
		return JSONR_NUMBER;
	default:
		if (*r->p >= '0' && *r->p <= '9')
			return JSONR_NUMBER;
		jsonr_fail(r, "invalid token");
		return JSONR_BAD;
	}
}

int jsonr_open(struct jsonr *r)
{
	if (r->err)
		return -1;
	if (r->depth >= JSONR_DEPTH_MAX)
		return jsonr_fail(r, "nested too deeply");
	r->depth++;
	r->p++;
	return 0;
}

/* Four hex digits at p (checked to be there) as a code unit; -1 when not hex. */
static long jsonr_hex4(const char *p)
{
	long v = 0;

	for (int i = 0; i < 4; i++) {
		char c = p[i];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= c - '0';
		else if (c >= 'a' && c <= 'f')
			v |= c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			v |= c - 'A' + 10;
		else
			return -1;
	}
	return v;
}

/* Puts n bytes into dst while they fit below cap (a NUL stays possible). */
static void jsonr_out(char *dst, size_t cap, size_t *len, const char *s, size_t n)
{
	if (dst && *len + n < cap)
		memcpy(dst + *len, s, n);
	*len += n;
}

/* A \u escape at r->p (after the backslash's 'u') as UTF-8 into dst. */
static int jsonr_unicode(struct jsonr *r, char *dst, size_t cap, size_t *len)
{
	unsigned char u[4];
	long cp, lo;
	size_t n;

	if (r->end - r->p < 5 || (cp = jsonr_hex4(r->p + 1)) < 0)
		return jsonr_fail(r, "invalid \\u escape");
	r->p += 5;
	if (cp >= 0xdc00 && cp <= 0xdfff)
		return jsonr_fail(r, "invalid \\u escape: a lone low surrogate");
	if (cp >= 0xd800 && cp <= 0xdbff) {
		if (r->end - r->p < 6 || r->p[0] != '\\' || r->p[1] != 'u' ||
		    (lo = jsonr_hex4(r->p + 2)) < 0xdc00 || lo > 0xdfff)
			return jsonr_fail(r, "invalid \\u escape: a high surrogate alone");
		r->p += 6;
		cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
	}
	if (cp < 0x80) {
		u[0] = (unsigned char)cp;
		n = 1;
	} else if (cp < 0x800) {
		u[0] = (unsigned char)(0xc0 | (cp >> 6));
		u[1] = (unsigned char)(0x80 | (cp & 0x3f));
		n = 2;
	} else if (cp < 0x10000) {
		u[0] = (unsigned char)(0xe0 | (cp >> 12));
		u[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
		u[2] = (unsigned char)(0x80 | (cp & 0x3f));
		n = 3;
	} else {
		u[0] = (unsigned char)(0xf0 | (cp >> 18));
		u[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
		u[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
		u[3] = (unsigned char)(0x80 | (cp & 0x3f));
		n = 4;
	}
	jsonr_out(dst, cap, len, (const char *)u, n);
	return 0;
}

/* One backslash escape at r->p (the backslash) into dst. */
static int jsonr_escape(struct jsonr *r, char *dst, size_t cap, size_t *len)
{
	char c;

	if (r->end - r->p < 2)
		return jsonr_fail(r, "unterminated string");
	r->p++;
	switch (*r->p) {
	case '"':
	case '\\':
	case '/':
		c = *r->p;
		break;
	case 'b':
		c = '\b';
		break;
	case 'f':
		c = '\f';
		break;
	case 'n':
		c = '\n';
		break;
	case 'r':
		c = '\r';
		break;
	case 't':
		c = '\t';
		break;
	case 'u':
		return jsonr_unicode(r, dst, cap, len);
	default:
		return jsonr_fail(r, "invalid escape in a string");
	}
	r->p++;
	jsonr_out(dst, cap, len, &c, 1);
	return 0;
}

/*
 * The string at r->p (its opening quote) decoded into dst (cap bytes,
 * NUL-terminated when it fits; dst NULL: checked only); *len its full
 * decoded length.
 */
static int jsonr_string(struct jsonr *r, char *dst, size_t cap, size_t *len)
{
	*len = 0;
	r->p++;
	for (;;) {
		const char *run = r->p;
		unsigned char c;
		size_t n;

		for (uint64_t x; r->end - r->p >= 8; r->p += 8) {
			memcpy(&x, r->p, 8);
			if (!utf8_json_plain8(x))
				break;
		}
		while (r->p < r->end && utf8_json_class[(unsigned char)*r->p] == 0)
			r->p++;
		jsonr_out(dst, cap, len, run, (size_t)(r->p - run));
		if (r->p >= r->end)
			return jsonr_fail(r, "unterminated string");
		c = (unsigned char)*r->p;
		if (c == '"')
			break;
		if (c == '\\') {
			if (jsonr_escape(r, dst, cap, len))
				return -1;
			continue;
		}
		if (c < 0x20)
			return jsonr_fail(r, "control character in a string");
		n = utf8_seq_len((const unsigned char *)r->p, (size_t)(r->end - r->p));
		if (!n)
			return jsonr_fail(r, "invalid UTF-8 in a string");
		jsonr_out(dst, cap, len, r->p, n);
		r->p += n;
	}
	r->p++;
	if (dst && *len < cap)
		dst[*len] = '\0';
	return 0;
}

/* Bytes up to the closing quote of the string at r->p: a bound of its decoded length. */
static size_t jsonr_span(const struct jsonr *r)
{
	const char *q = r->p + 1;

	while (q < r->end && *q != '"')
		q += *q == '\\' ? 2 : 1;
	return (size_t)((q < r->end ? q : r->end) - r->p);
}

int jsonr_str(struct jsonr *r, struct arena *a, char **out, size_t *len)
{
	size_t cap;

	*out = NULL;
	*len = 0;
	if (r->err)
		return -1;
	cap = jsonr_span(r);
	*out = arena_alloc(a, cap);
	if (!*out)
		return jsonr_fail(r, "out of memory");
	return jsonr_string(r, *out, cap, len);
}

int jsonr_str_buf(struct jsonr *r, char *buf, size_t cap, size_t *len)
{
	*len = 0;
	if (r->err)
		return -1;
	return jsonr_string(r, buf, cap, len);
}

/* Before a member or item: 1 when one follows (a ',' taken after the first), 0 at close. */
static int jsonr_next(struct jsonr *r, size_t *n, char close)
{
	if (r->err)
		return -1;
	jsonr_ws(r);
	if (r->p >= r->end)
		return jsonr_fail(r, "unexpected end of text");
	if (*r->p == close) {
		r->p++;
		r->depth--;
		return 0;
	}
	if (*n > 0) {
		if (*r->p != ',')
			return jsonr_fail(r, close == '}' ? "expected ',' or '}'"
							  : "expected ',' or ']'");
		r->p++;
		jsonr_ws(r);
	}
	(*n)++;
	return 1;
}

/* The ':' after a key. */
static int jsonr_colon(struct jsonr *r)
{
	jsonr_ws(r);
	if (r->p >= r->end || *r->p != ':')
		return jsonr_fail(r, "expected ':'");
	r->p++;
	return 0;
}

int jsonr_key(struct jsonr *r, size_t *n, char *buf, size_t cap, size_t *klen)
{
	int rc = jsonr_next(r, n, '}');

	*klen = 0;
	if (rc <= 0)
		return rc;
	if (r->p >= r->end || *r->p != '"')
		return jsonr_fail(r, "expected a string as key");
	if (jsonr_string(r, buf, cap, klen) || jsonr_colon(r))
		return -1;
	return 1;
}

int jsonr_key_dup(struct jsonr *r, size_t *n, struct arena *a, char **key, size_t *klen)
{
	int rc = jsonr_next(r, n, '}');

	*key = NULL;
	*klen = 0;
	if (rc <= 0)
		return rc;
	if (r->p >= r->end || *r->p != '"')
		return jsonr_fail(r, "expected a string as key");
	if (jsonr_str(r, a, key, klen) || jsonr_colon(r))
		return -1;
	return 1;
}

int jsonr_item(struct jsonr *r, size_t *n)
{
	return jsonr_next(r, n, ']');
}

static bool jsonr_digit(const struct jsonr *r)
{
	return r->p < r->end && *r->p >= '0' && *r->p <= '9';
}

int jsonr_int(struct jsonr *r, int64_t *out)
{
	bool neg = false, fits = true, integral = true;
	uint64_t m = 0;

	*out = 0;
	if (r->err)
		return -1;
	if (r->p < r->end && *r->p == '-') {
		neg = true;
		r->p++;
	}
	if (!jsonr_digit(r))
		return jsonr_fail(r, "invalid number");
	if (*r->p == '0') {
		r->p++;
		if (jsonr_digit(r))
			return jsonr_fail(r, "invalid number: a leading zero");
	}
	while (jsonr_digit(r)) {
		unsigned d = (unsigned)(*r->p++ - '0');

		if (m > (UINT64_MAX - d) / 10)
			fits = false;
		else
			m = m * 10 + d;
	}
	if (r->p < r->end && *r->p == '.') {
		r->p++;
		integral = false;
		if (!jsonr_digit(r))
			return jsonr_fail(r, "invalid number: no digit after '.'");
		while (jsonr_digit(r))
			r->p++;
	}
	if (r->p < r->end && (*r->p == 'e' || *r->p == 'E')) {
		r->p++;
		integral = false;
		if (r->p < r->end && (*r->p == '+' || *r->p == '-'))
			r->p++;
		if (!jsonr_digit(r))
			return jsonr_fail(r, "invalid number: no digit in the exponent");
		while (jsonr_digit(r))
			r->p++;
	}
	if (!integral || !fits || m > (uint64_t)INT64_MAX + neg)
		return 1;
	*out = neg ? (int64_t)(0 - m) : (int64_t)m;
	return 0;
}

int jsonr_literal(struct jsonr *r)
{
	static const char *const lits[] = {"true", "false", "null"};

	if (r->err)
		return -1;
	for (size_t i = 0; i < 3; i++) {
		size_t n = strlen(lits[i]);

		if ((size_t)(r->end - r->p) >= n && memcmp(r->p, lits[i], n) == 0) {
			r->p += n;
			return 0;
		}
	}
	return jsonr_fail(r, "invalid literal");
}

int jsonr_bool(struct jsonr *r, bool *out)
{
	*out = r->p < r->end && *r->p == 't';
	return jsonr_literal(r);
}

int jsonr_skip(struct jsonr *r)
{
	size_t n = 0, len;
	int64_t x;
	int rc;

	switch (jsonr_peek(r)) {
	case JSONR_NULL:
	case JSONR_BOOL:
		return jsonr_literal(r);
	case JSONR_NUMBER:
		return jsonr_int(r, &x) < 0 ? -1 : 0;
	case JSONR_STRING:
		return jsonr_string(r, NULL, 0, &len);
	case JSONR_ARRAY:
		if (jsonr_open(r))
			return -1;
		while ((rc = jsonr_item(r, &n)) == 1)
			if (jsonr_skip(r))
				return -1;
		return rc;
	case JSONR_OBJECT:
		if (jsonr_open(r))
			return -1;
		while ((rc = jsonr_key(r, &n, NULL, 0, &len)) == 1)
			if (jsonr_skip(r))
				return -1;
		return rc;
	default:
		return -1;
	}
}

int jsonr_end(struct jsonr *r)
{
	if (r->err)
		return -1;
	jsonr_ws(r);
	if (r->p != r->end)
		return jsonr_fail(r, "end of text expected");
	return 0;
}
