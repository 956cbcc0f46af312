/*
 * Decoded volume records, kept by (id, modify_index) so that the reads
 * of one version (a GET, the claim that follows it, the node-stage after
 * a blocking query) parse its JSON once: a record with its 16 past
 * claims is about 5 KB, and its decoding (model_record.c) takes about
 * 20 k instructions per KiB, several times a copy out of the cache. A store
 * index is never reused, so an entry matching the stored modify_index
 * and create_index is that version's decoding. An entry holds the
 * record's secrets in memory, as any decoded record does, until a newer
 * version or another volume of its slot replaces it. A slot also keeps
 * where the claims of its volume's history are (server_vcache_history),
 * so a release that appends to the history need not read it through.
 * Thread-safe.
 */
#ifndef CSID_SERVER_SERVER_VCACHE_H
#define CSID_SERVER_SERVER_VCACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "model/model.h"
#include "util/arena.h"
#include "util/err.h"

struct server_vcache;

/* A cache of SERVER_VCACHE_SLOTS entries, or NULL when out of memory. */
struct server_vcache *server_vcache_new(void);
/* Frees c and every entry; NULL is a no-op. */
void server_vcache_free(struct server_vcache *c);
/*
 * Volume id as stored in json (len bytes) at (create_index, modify_index),
 * into a: copied from c when that version is there, else decoded and
 * kept. The indexes are set on *out. c may be NULL (always decodes).
 * Returns 0 or model_volume_decode's error.
 */
int server_vcache_decode(struct server_vcache *c, const char *id, const char *json, size_t len,
			 uint64_t create_index, uint64_t modify_index, struct arena *a,
			 struct model_volume **out, struct err *e);
/*
 * When c holds volume id's version (create_index, modify_index), calls
 * fn with it, under c's lock (fn only reads it, copies what it keeps, and
 * calls nothing of c), and returns true; else false. For a reader that
 * needs a few fields, not a copy (the metrics' counts).
 */
bool server_vcache_peek(struct server_vcache *c, const char *id, uint64_t create_index,
			uint64_t modify_index, void (*fn)(const struct model_volume *v, void *ctx),
			void *ctx);
/*
 * Keeps v (copied), which its writer has just stored as the version
 * (v->create_index, modify_index), as that version's decoding: the writer
 * holds it decoded already, so the next reader (the reconciler after an
 * API write, the API after a reconciler write) copies it instead of
 * parsing the record. v must be what the store view encodes (a record
 * decoded, then changed): its API-view fields are not kept. c may be
 * NULL (a no-op); out of memory leaves the cache as it was.
 */
void server_vcache_put(struct server_vcache *c, const struct model_volume *v, uint64_t modify_index,
		       const struct model_history_map *history);
/*
 * The slot of a volume also keeps where the claims of its history are
 * (model_history_map), as the last write here that appended to it left
 * them: server_vcache_put's history, written in the same transaction
 * as v (so at modify_index; NULL: the history was not written). The next
 * append copies the kept claims without reading the text through.
 * Copies into *map the map of volume id's history stored at
 * modify_index, len bytes long: true when held.
 */
bool server_vcache_history(struct server_vcache *c, const char *id, uint64_t modify_index,
			   size_t len, struct model_history_map *map);

#endif
