/*
 * Node-stage data of a claimed volume: what the node plugin needs to
 * stage and publish it and the servers' API view never shows (the
 * volume's secrets map, its mount flags and fs_type). A mount of the
 * claim flow (agent/claims.h) gets it in the answer of the claim that
 * waits (agent/claims_answer.h) or, from an older server or after a
 * publication that took longer than the claim's wait, with
 *
 *   GET /v1/volume/<vol>/node-stage?alloc_id=<alloc>
 *
 * which the servers answer only to the agent of the node the claim is on
 * (the request carries the agent's instance ID, agent/claims_http.h). The
 * answer is read with the pull reader (util/jsonr.h: no tree), checked (a
 * map of strings, an array of strings, a string or null; a key twice is
 * refused), kept only for the mount, and every byte of it is zeroed
 * before it is freed; no value of it ever reaches a message or a log
 * line.
 *
 * The readers of string maps and arrays are shared with the claim
 * answer's decoder.
 */
#ifndef CSID_AGENT_CLAIMS_STAGE_H
#define CSID_AGENT_CLAIMS_STAGE_H

#include <stddef.h>

#include "agent/mounter.h"
#include "util/arena.h"
#include "util/err.h"
#include "util/jsonr.h"

/* The node-stage data of a claimed volume (a servers' answer); every byte wiped on free. */
struct claims_stage {
	struct arena *a; /* every string below (wiped on free); NULL inside a claims_answer */
	struct mount_kv *secrets; /* from a */
	size_t n_secrets;
	const char **flags; /* from a */
	size_t n_flags;
	const char *fs_type; /* NULL: none */
};

/*
 * Decodes a servers' answer to the node-stage read (len bytes:
 * {"secrets": {strings}, "mount_flags": [strings], "fs_type"}). Returns 0
 * and *out (free with claims_stage_free), or CSID_EPROTO / CSID_ENOMEM
 * with e naming what is wrong, never a value.
 */
int claims_stage_decode(const char *body, size_t len, struct claims_stage **out, struct err *e);

/*
 * Reads the node-stage object at r's next value into *st, its strings
 * into a. Returns 0, or -1 with r's error set (static text, no value).
 */
int claims_stage_read(struct jsonr *r, struct arena *a, struct claims_stage *st);

/*
 * Reads the object of strings at r's next value (null: none) into *kv,
 * an array from a (*n entries; a key twice is refused). 0 or -1 (r's
 * error set).
 */
int claims_stage_map(struct jsonr *r, struct arena *a, struct mount_kv **kv, size_t *n);

/* Reads a string or null at r's next value into *out (from a; NULL for null). 0 or -1. */
int claims_stage_str(struct jsonr *r, struct arena *a, const char **out);

/* Zeroes every string of st, then frees it. NULL is a no-op. */
void claims_stage_free(struct claims_stage *st);

#endif
