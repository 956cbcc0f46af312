/*
 * Fuzz target: the JSON pull reader (util/jsonr.h) against jansson. Any
 * text jansson parses (NULs in strings allowed) the reader must walk to
 * its end, unless it nests deeper than JSONR_DEPTH_MAX or has a NUL
 * byte outside strings (which jansson passes over after a number); any
 * text the reader walks jansson must parse too, unless a number is
 * beyond what jansson holds (the reader leaves numbers to its caller). Every string the
 * reader decodes must be what jansson decoded, in the same order.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "util/arena.h"
#include "util/jsonr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * Whether jansson's answer binds the reader: the text nests no deeper
 * than the reader allows and has no NUL byte outside strings (jansson
 * passes over a NUL after a number; RFC 8259 does not).
 */
static int fuzz_comparable(const uint8_t *d, size_t n)
{
	size_t depth = 0, max = 0;
	int in_str = 0;

	for (size_t i = 0; i < n; i++) {
		if (in_str) {
			if (d[i] == '\\')
				i++;
			else if (d[i] == '"')
				in_str = 0;
		} else if (d[i] == '"') {
			in_str = 1;
		} else if (d[i] == '\0') {
			return 0;
		} else if (d[i] == '[' || d[i] == '{') {
			if (++depth > max)
				max = depth;
		} else if ((d[i] == ']' || d[i] == '}') && depth) {
			depth--;
		}
	}
	return max <= JSONR_DEPTH_MAX;
}

/* Walks the value at r as jansson's v, comparing strings and keys; false on a difference. */
static int fuzz_walk(struct jsonr *r, struct arena *a, json_t *v)
{
	size_t n = 0, len;
	json_t *item;
	int64_t x;
	char *s;
	int rc;

	switch (jsonr_peek(r)) {
	case JSONR_STRING:
		return jsonr_str(r, a, &s, &len) == 0 && json_is_string(v) &&
		       len == json_string_length(v) && memcmp(s, json_string_value(v), len) == 0;
	case JSONR_NUMBER:
		rc = jsonr_int(r, &x);
		if (rc == 0)
			return json_is_integer(v) && json_integer_value(v) == x;
		return rc > 0 && json_is_number(v);
	case JSONR_NULL:
		return jsonr_literal(r) == 0 && json_is_null(v);
	case JSONR_BOOL:
		return jsonr_literal(r) == 0 && json_is_boolean(v);
	case JSONR_ARRAY:
		if (!json_is_array(v) || jsonr_open(r))
			return 0;
		while ((rc = jsonr_item(r, &n)) == 1)
			if (!fuzz_walk(r, a, json_array_get(v, n - 1)))
				return 0;
		return rc == 0 && n == json_array_size(v);
	case JSONR_OBJECT:
		if (!json_is_object(v) || jsonr_open(r))
			return 0;
		/* jansson keeps the last of duplicate keys: compare only texts without them. */
		while ((rc = jsonr_key_dup(r, &n, a, &s, &len)) == 1) {
			item = json_object_getn(v, s, len);
			if (!item || !fuzz_walk(r, a, item))
				return 0;
		}
		return rc == 0 && n == json_object_size(v);
	default:
		return 0;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct arena *a = arena_new();
	json_error_t jerr;
	struct jsonr r;
	json_t *root;
	int ok;

	if (!a)
		abort();
	jsonr_init(&r, (const char *)data, size);
	ok = jsonr_skip(&r) == 0 && jsonr_end(&r) == 0;
	if (!ok && !r.err)
		abort();
	root = json_loadb((const char *)data, size,
			  JSON_DECODE_ANY | JSON_ALLOW_NUL | JSON_REJECT_DUPLICATES, &jerr);
	if (root && !ok && fuzz_comparable(data, size) && strcmp(r.err, "nested too deeply") != 0)
		abort();
	if (!root && ok && !strstr(jerr.text, "too big") && !strstr(jerr.text, "overflow") &&
	    !strstr(jerr.text, "duplicate"))
		abort();
	if (root && ok) {
		jsonr_init(&r, (const char *)data, size);
		if (!fuzz_walk(&r, a, root) || jsonr_end(&r) != 0)
			abort();
	}
	json_decref(root);
	arena_free(a);
	return 0;
}
