/*
 * Internals shared by the model's files: the JSON decoding context and
 * helpers (model_json.c) that both the store decoders and the strict spec
 * decoder (model_spec.c) use, and the sanitiser for untrusted names in
 * messages (model.c). Not for use outside src/model.
 */
#ifndef CSID_MODEL_MODEL_INT_H
#define CSID_MODEL_MODEL_INT_H

#include <jansson.h>

#include "model/model.h"

/* The names of one of the model's enums, indexed by value (NULL: none). */
struct model_names {
	const char *what; /* "access mode", for messages */
	const char *const *names;
	int n;
};

extern const struct model_names model_names_access, model_names_attachment, model_names_claim_state,
    model_names_claim_mode, model_names_pub_state, model_names_volume_state,
    model_names_snapshot_state, model_names_plugin_type, model_names_node_status;

/* The name of v, or NULL outside the table. */
const char *model_names_get(const struct model_names *t, int v);
/* The value named s; CSID_EINVAL listing the names otherwise. */
int model_names_parse(const struct model_names *t, const char *s, int *out, struct err *e);

/* Longest JSON path kept for a message. */
#define MODEL_PATH_MAX 160

/*
 * One decoding: where objects go, where errors go, and how strict to be.
 * Strict (outside input): unknown keys are refused, strings and maps are
 * held to the CSI limits, errors are CSID_EINVAL. Otherwise (a store
 * record): unknown keys are skipped so an older program reads a newer
 * record, and errors are CSID_EPROTO. Messages read "<what>: <path>: ...".
 */
struct model_dec {
	struct arena *a;
	struct err *e;
	bool strict;
	const char *what; /* "volume spec", "volume record", ... */
};

/* A printable prefix of an untrusted string: at most 32 bytes, anything
 * but ID characters as '?', "..." when cut. */
const char *model_sanitize(char *buf, size_t cap, const char *s, size_t len);

/* Sets the decoding error at path; returns its code. */
int model_dec_fail(struct model_dec *d, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* parent.key (or key at the top) into buf. */
const char *model_dec_path(char *buf, const char *parent, const char *key);
/* Checks that v is an object and, when strict, that it holds only keys
 * of allowed (NULL-terminated). */
int model_dec_object(struct model_dec *d, json_t *v, const char *path, const char *const *allowed);
/* obj[key] as a string of at most max bytes (0: any) copied into d->a;
 * absent or null leaves *out NULL. secret: the value is never named. */
int model_dec_str(struct model_dec *d, json_t *obj, const char *key, const char *path, size_t max,
		  char **out);
/* As model_dec_str, but the key must be present and the string non-empty. */
int model_dec_str_req(struct model_dec *d, json_t *obj, const char *key, const char *path,
		      size_t max, char **out);
int model_dec_bool(struct model_dec *d, json_t *obj, const char *key, const char *path, bool *out);
/* An integer >= 0 (absent: 0). */
int model_dec_int(struct model_dec *d, json_t *obj, const char *key, const char *path,
		  int64_t *out);
/* A map of strings; secret: neither keys nor values are named in errors. */
int model_dec_map(struct model_dec *d, json_t *obj, const char *key, const char *path, bool secret,
		  struct model_map *out);
/* A node fingerprint from root (keys checked when strict). */
int model_dec_node(struct model_dec *d, json_t *root, struct model_node *n);
/* The spec keys of a volume from obj (keys checked by the caller). */
int model_dec_volume_spec(struct model_dec *d, json_t *obj, struct model_volume *v);

#endif
