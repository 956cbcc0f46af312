/*
 * A JSON text writer: appends compact JSON (no spaces, "," and ":" as
 * separators) to a growing buffer, with the separators placed by the
 * writer. It writes what jansson's json_dumps(JSON_COMPACT) writes for the
 * same tree, byte for byte, without building the tree: the model's hot
 * encoders (a volume record per store write) use it.
 *
 * Strings: escaped as jansson escapes them ("\"", "\\", "\b", "\f", "\n",
 * "\r", "\t", other bytes below 0x20 as \u00XX; "/" and non-ASCII as is).
 * A string that is not valid UTF-8 (a plugin's text, say) is written with
 * each byte from 0x80 up as '?', as the model did before (jansson refuses
 * such a string).
 *
 * Memory: the buffer may hold secrets, so a growth wipes the old copy
 * before freeing it; jsonw_free wipes too. Out of memory is sticky: every
 * later call does nothing and jsonw_finish reports it.
 *
 * Nesting is at most JSONW_DEPTH_MAX levels (deeper is a programming error
 * and makes the writer fail as if out of memory).
 */
#ifndef CSID_UTIL_JSONW_H
#define CSID_UTIL_JSONW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define JSONW_DEPTH_MAX 63

struct jsonw {
	char *p;
	size_t len, cap;
	bool failed; /* out of memory, or nested too deep */
	bool after_key; /* the next value is the member's, no separator */
	unsigned depth;
	uint64_t has_item; /* bit d: level d holds an item already */
};

/* An empty writer whose buffer starts at hint bytes (0: a default). */
void jsonw_init(struct jsonw *w, size_t hint);

void jsonw_object_open(struct jsonw *w);
void jsonw_object_close(struct jsonw *w);
void jsonw_array_open(struct jsonw *w);
void jsonw_array_close(struct jsonw *w);
/* The key of the next member of the open object. */
void jsonw_key(struct jsonw *w, const char *key);

/* Values: s NULL writes null. */
void jsonw_str(struct jsonw *w, const char *s);
void jsonw_int(struct jsonw *w, int64_t n);
void jsonw_bool(struct jsonw *w, bool b);
/* Text that is JSON already (len bytes), as one value. */
void jsonw_raw_value(struct jsonw *w, const char *json, size_t len);

/* Members: the key, then the value. jsonw_member_str skips a NULL s. */
void jsonw_member_str(struct jsonw *w, const char *key, const char *s);
void jsonw_member_int(struct jsonw *w, const char *key, int64_t n);
void jsonw_member_bool(struct jsonw *w, const char *key, bool b);

/*
 * Keys written as they are: the model's own key names, which need no
 * escape, given as JSONW_KEY("name") (the text "\"name\":" and its
 * length, made by the compiler), so that no key is scanned at run time.
 * Never for a key that comes from data (a map's): those go through
 * jsonw_key.
 */
#define JSONW_KEY(k) ("\"" k "\":"), (sizeof("\"" k "\":") - 1)
void jsonw_lkey(struct jsonw *w, const char *quoted, size_t len);
void jsonw_lmember_str(struct jsonw *w, const char *quoted, size_t len, const char *s);
void jsonw_lmember_int(struct jsonw *w, const char *quoted, size_t len, int64_t n);
void jsonw_lmember_bool(struct jsonw *w, const char *quoted, size_t len, bool b);

/*
 * Hands the text over: *out (malloc'd, NUL-terminated, the caller's) and
 * *len, and empties w. Returns 0, or -1 (w failed: nothing handed over,
 * w wiped and freed).
 */
int jsonw_finish(struct jsonw *w, char **out, size_t *len);
/* Wipes and frees the buffer (after a failure, or to give up). */
void jsonw_free(struct jsonw *w);

#endif
