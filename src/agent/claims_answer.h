/*
 * The volume as a mount on this node needs it, read from a servers'
 * answer with the pull reader (util/jsonr.h): no tree is built, and only
 * what the mount uses is kept. Two shapes are read:
 *
 *   - the answer of the claim that waits (docs/server-api.md, "The claim
 *     that waits"): {"volume": {...}, "claim": {...}, "publication",
 *     "publication_state", "node_stage": {...}};
 *   - a volume alone (a volume read, a blocking query, an older server's
 *     claim answer): its members at the top level.
 *
 * Of the volume: plugin_id, external_id, capacity, context,
 * mount_options.fs_type, node_expansion_required, the claims (node_id,
 * node_expanded), the publications (node_id, state, access_mode,
 * attachment_mode, context), status.last_error and modify_index; of the
 * claim its access and attachment modes. Other members are skipped
 * unread (a newer server may add some). The node-stage data holds
 * secrets: every string is in one arena, wiped when freed, and no
 * message quotes a value.
 */
#ifndef CSID_AGENT_CLAIMS_ANSWER_H
#define CSID_AGENT_CLAIMS_ANSWER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/claims_stage.h"
#include "agent/mounter.h"
#include "util/err.h"

/* The volume's publication to one node. */
struct claims_answer_pub {
	const char *state; /* "published", "publishing", ...; "" when none given */
	const char *access_mode; /* "" when none given */
	const char *attachment_mode; /* NULL when none given */
	struct mount_kv *context;
	size_t n_context;
};

/* A decoded answer; every string lives in a (wiped when freed). */
struct claims_answer {
	struct arena *a;
	/* The volume. */
	const char *plugin_id; /* "" when none given */
	const char *external_id; /* NULL when none given */
	const char *fs_type; /* mount_options.fs_type; NULL when none given */
	struct mount_kv *context;
	size_t n_context;
	int64_t capacity;
	int64_t modify_index;
	bool node_expansion_required;
	/* A claim of this node not marked node_expanded (NodeExpandVolume wanted here). */
	bool expand_here;
	const char *last_error; /* status.last_error; NULL when none given */
	/* The publication to this node; NULL: none. */
	const struct claims_answer_pub *pub;
	/* The claim that waits; waited false: a volume alone. */
	bool waited; /* publication_state given */
	bool has_volume; /* the waited answer had its "volume" object */
	const char *publication_state; /* "" when none given */
	bool has_claim; /* "claim" given */
	const char *claim_access_mode; /* "" when none given */
	const char *claim_attachment_mode; /* NULL when none given */
	/* The node-stage data; NULL: not answered. */
	struct claims_stage *stage;
};

/*
 * Decodes text (len bytes) for node (whose claims and publication are
 * kept). Returns 0 and *out (free with claims_answer_free), or
 * CSID_EPROTO (not JSON, or a member of the wrong kind: e names where,
 * never a value) / CSID_ENOMEM with e set.
 */
int claims_answer_decode(const char *text, size_t len, const char *node, struct claims_answer **out,
			 struct err *e);

/* Wipes and frees; NULL is a no-op. */
void claims_answer_free(struct claims_answer *ans);

#endif
