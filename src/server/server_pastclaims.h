/*
 * The claim history of each volume: its freed claims, newest last, the
 * last MODEL_PAST_CLAIMS_MAX of them, in a record of their own (store kind
 * STORE_CLAIM_HISTORY, ID the volume's, model_history_append's shape), so
 * a volume record stays small however often the volume is used.
 *
 * A write of a volume whose claims reached freed (model_volume_claim_move
 * puts them in v->past_claims) carries, in the same store transaction,
 * the history with them appended, on the history's index as read (a
 * conflict retries the write like one on the volume), and the volume
 * record is written without them (server_pastclaims_take). A record
 * written before the history existed still holds its past claims: it is
 * read as it is, and its next write moves them into the history (the
 * migration happens on write; nothing is lost if it never comes). The
 * history goes with its volume's record. What shows or looks up past
 * claims reads both (server_pastclaims_read).
 */
#ifndef CSID_SERVER_SERVER_PASTCLAIMS_H
#define CSID_SERVER_SERVER_PASTCLAIMS_H

#include <stdbool.h>
#include <stddef.h>

#include "model/model.h"
#include "server/server_vcache.h"
#include "store/store.h"
#include "util/arena.h"
#include "util/err.h"

/*
 * Takes the past claims out of v (v->past_claims emptied, so the record
 * is written without them) and, when there were any, fills *op (strings
 * in a) with the write of v's history with them appended (the oldest
 * dropped past MODEL_PAST_CLAIMS_MAX): *have says whether it did, and
 * *made is the new text's map, for server_vcache_put once written (made
 * may be NULL). vc (may be NULL) holds the map of the history as this
 * server last wrote it, which spares reading it through.
 * *taken, *ntaken: the claims taken (to show in an answer). Returns 0, or
 * a code with e set (the store's, CSID_EPROTO for a damaged history,
 * CSID_ENOMEM).
 */
int server_pastclaims_take(struct store *st, struct server_vcache *vc, struct model_volume *v,
			   struct arena *a, struct store_op *op, bool *have,
			   struct model_history_map *made, struct model_claim **taken,
			   size_t *ntaken, struct err *e);

/* The removal of volume id's history, with its record (no condition). */
struct store_op server_pastclaims_delete(const char *id);

/*
 * Sets v->past_claims (in a) to v's past claims: its history's, then any
 * its record still holds, the last MODEL_PAST_CLAIMS_MAX. Returns 0 or a
 * code with e set.
 */
int server_pastclaims_read(struct store *st, struct model_volume *v, struct arena *a,
			   struct err *e);

#endif
