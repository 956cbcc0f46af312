/*
 * Command-line flags for csictl. A command group describes its flags in a
 * table of struct csictl_flag; csictl_flags_parse() walks argv once, fills
 * the destinations and collects the positional arguments in order. Flags
 * may come before, between or after positional arguments; "--" ends the
 * flags, so a name that starts with '-' can still be passed. Both "-name
 * value" and "-name=value" are accepted, with one or two dashes.
 *
 * Ownership: string values and list items point into argv (borrowed);
 * key=value pairs are copied and released by csictl_kv_free().
 */
#ifndef CSICTL_FLAGS_H
#define CSICTL_FLAGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "util/err.h"

/* Upper bounds on what one command line may carry. */
#define CSICTL_KV_MAX 256
#define CSICTL_LIST_MAX 64
#define CSICTL_ARGS_MAX 16

struct csictl_kv_pair {
	char *key; /* owned copy */
	char *value; /* owned copy */
};

/* Ordered key=value pairs from a repeatable flag (-param k=v). */
struct csictl_kv {
	struct csictl_kv_pair *pairs;
	size_t n;
};

/* Values of a repeatable flag (-mount-flag X); items point into argv. */
struct csictl_list {
	const char *items[CSICTL_LIST_MAX];
	size_t n;
};

enum csictl_flag_kind {
	CSICTL_FLAG_STRING, /* const char **; the last one given wins */
	CSICTL_FLAG_BOOL, /* bool *; "-x", "-x=true", "-x=false" */
	CSICTL_FLAG_KV, /* struct csictl_kv *; repeatable k=v, keys unique */
	CSICTL_FLAG_LIST, /* struct csictl_list *; repeatable */
};

struct csictl_flag {
	const char *name; /* without dashes, e.g. "fs-type" */
	enum csictl_flag_kind kind;
	void *dst;
	const char *arg; /* placeholder shown in help, e.g. "SIZE"; NULL for bools */
	const char *help; /* one line */
};

/* Positional arguments in order (borrowed from argv). */
struct csictl_args {
	const char *v[CSICTL_ARGS_MAX];
	int n;
};

/*
 * Parses argv[0..argc) against flags (n entries). Returns 0, or
 * CSID_EINVAL with e saying which argument is wrong (unknown flag,
 * missing value, malformed k=v, duplicate key, too many values).
 * Whatever was stored before an error is still released by
 * csictl_kv_free().
 */
int csictl_flags_parse(const struct csictl_flag *flags, size_t n, int argc, char **argv,
		       struct csictl_args *pos, struct err *e);

/* Prints one line per flag: "  -name ARG   help". */
void csictl_flags_help(const struct csictl_flag *flags, size_t n, FILE *f);

/*
 * Adds the members of the JSON object in file path (strings only, at most
 * 64 KiB) to kv, so secrets need not appear on a command line. Returns 0,
 * or CSID_EINVAL/CSID_EIO/CSID_ETOOBIG with e set (never quoting a value).
 */
int csictl_kv_load_file(struct csictl_kv *kv, const char *path, struct err *e);

/* Releases the pairs of kv, values wiped first; kv itself is the caller's. NULL is a no-op. */
void csictl_kv_free(struct csictl_kv *kv);

/*
 * Parses a size in bytes with model_parse_size: digits with an optional
 * suffix K, M, G, T, P (powers of 1000, also KB...) or Ki, Mi, Gi, Ti, Pi
 * (powers of 1024, also KiB...). Returns 0 and
 * *out, or CSID_EINVAL (garbage, empty, negative) / CSID_ERANGE (does not
 * fit in int64) with e set.
 */
int csictl_size_parse(const char *s, int64_t *out, struct err *e);

/*
 * Formats bytes for a table: "1Gi" when it is an exact multiple of a
 * binary unit, else the plain number. Returns buf.
 */
const char *csictl_size_format(int64_t bytes, char *buf, size_t len);

/*
 * Parses a duration: digits with a unit ms, s, m or h ("15s", "500ms");
 * bare digits are seconds. Must be > 0 and at most 24 h. Returns 0 and
 * *ms, or CSID_EINVAL with e set.
 */
int csictl_duration_parse(const char *s, int64_t *ms, struct err *e);

/* Parses a non-negative decimal int32 strictly; 0 or CSID_EINVAL. */
int csictl_int_parse(const char *s, int32_t *out, struct err *e);

#endif
