/*
 * The index of active claims by node (store kind STORE_CLAIM), so the
 * lost-claim pass reads the claims of the nodes it judges instead of
 * decoding every volume record. One entry per claim in state claimed:
 * ID "<node>/<volume>/<alloc>" (IDs never hold '/'), value
 * {"updated_ms": N, "held_by_agent": B}, the two fields the pass's rules
 * read besides the IDs.
 *
 * Every write of a volume by the server's compare-and-set loop carries,
 * in the same store transaction, the index changes its claims made
 * (server_claimidx_diff), so the index never lags a committed claim.
 * Stores written before the index existed, and a write whose changes did
 * not fit one transaction, are repaired by server_claimidx_rebuild, which
 * never deletes an entry written after it listed the index. An entry left
 * behind anyway names a claim the pass finds gone when it reads the
 * volume, and the pass deletes it then.
 */
#ifndef CSID_SERVER_SERVER_CLAIMIDX_H
#define CSID_SERVER_SERVER_CLAIMIDX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/model.h"
#include "store/store.h"
#include "util/arena.h"
#include "util/err.h"

/* One entry (strings borrowed or in an arena). */
struct server_claimidx_entry {
	const char *node_id, *volume_id, *alloc_id;
	int64_t updated_ms;
	bool held_by_agent;
};

/* The entries of v's claimed claims, in a: *out, *n. CSID_ENOMEM. */
int server_claimidx_of(const struct model_volume *v, struct arena *a,
		       struct server_claimidx_entry **out, size_t *n);

/*
 * The store ops (in a) that turn the entries old[0..nold) of a volume into
 * nw[0..nnew): appended to ops[*n..cap). Returns 0, CSID_ERANGE when they
 * do not fit (ops as far as they went), or CSID_ENOMEM.
 */
int server_claimidx_diff(const struct server_claimidx_entry *old, size_t nold,
			 const struct server_claimidx_entry *nw, size_t nnew, struct arena *a,
			 struct store_op *ops, size_t cap, size_t *n);

/* The prefix of node_id's entries ("<node>/"), in a; NULL when out of memory. */
char *server_claimidx_prefix(struct arena *a, const char *node_id);

/* Reads entry o (its ID and value) into out (strings in a). CSID_EPROTO if damaged. */
int server_claimidx_parse(const struct store_obj *o, struct arena *a,
			  struct server_claimidx_entry *out, struct err *e);

/*
 * Makes the index of st match its volumes: lists the index, then pages
 * through every volume, puts each missing or changed entry (on the
 * entry's index as listed, or on its absence) and deletes each entry no
 * claimed claim backs (on its index as listed). A condition that fails
 * means someone wrote the entry meanwhile: it is left as written.
 */
int server_claimidx_rebuild(struct store *st, struct err *e);

#endif
