/*
 * Node-stage data of a claimed volume: what the node plugin needs to
 * stage and publish it and the servers' API view never shows (the
 * volume's secrets map, its mount flags and fs_type). A mount of the
 * claim flow (agent/claims.h) reads it, once its claim is granted, with
 *
 *   GET /v1/volume/<vol>/node-stage?alloc_id=<alloc>
 *
 * which the servers answer only to the agent of the node the claim is on
 * (the request carries the agent's instance ID, agent/claims_http.h). The
 * answer is checked (a map of strings, an array of strings, a string),
 * kept only for the mount, and every string of it is zeroed before it is
 * freed; no value of it ever reaches a message or a log line.
 */
#ifndef CSID_AGENT_CLAIMS_STAGE_H
#define CSID_AGENT_CLAIMS_STAGE_H

#include <stddef.h>

#include <jansson.h>

#include "agent/mounter.h"
#include "util/err.h"

/* The node-stage data of a claimed volume (a servers' answer); every string wiped on free. */
struct claims_stage {
	json_t *doc; /* the answer, which every pointer below borrows from */
	struct mount_kv *secrets;
	size_t n_secrets;
	const char **flags;
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
 * The same from a parsed answer, which it takes (wiped and freed on
 * failure). Returns 0 and *out, or a code with e set.
 */
int claims_stage_from(json_t *doc, struct claims_stage **out, struct err *e);

/* Zeroes every string of st, then frees it. NULL is a no-op. */
void claims_stage_free(struct claims_stage *st);

#endif
