/*
 * The installation record: what makes a store one csid installation and
 * what every server of it must agree on. The first server to start on an
 * empty store (any backend) writes it, one object of kind
 * STORE_INSTALLATION, ID SERVER_INSTALL_RECORD:
 *
 *   {"format": "csid-installation", "version": 1, "id": "<32 hex digits>",
 *    "created_ms": N,
 *    "settings": {"node_ttl": MS, "node_grace": MS, "leader_ttl": MS,
 *                 "backoff_min": MS, "backoff_max": MS}}
 *
 * Every later start compares (server_install_check), before the server
 * serves anything:
 *
 *   store holds                      this server                  outcome
 *   a record                         cluster_id set, another ID   refused, naming both IDs
 *   a record                         cluster_id unset or equal    the record's ID, logged
 *   a record                         node_ttl, node_grace or      refused, naming each key
 *                                    leader_ttl differ            with both values
 *   a record                         backoff_min/max differ       warned; the record's
 *                                                                 values are used
 *   a record csid cannot decode      -                            refused
 *   no record, keys that are not     -                            refused: not a csid
 *   csid's under its prefix                                       installation
 *   no record, csid objects          -                            the record is written
 *   (an installation older than                                   with this server's
 *   the record)                                                   settings, logged
 *   nothing                          -                            the record is written
 *
 * Why these keys. node_ttl decides when the leader marks a node down and
 * how often every server writes its member record; node_grace when the
 * leader releases a down node's claims; leader_ttl how long the cluster
 * is without a leader and when a paused leader's writes are fenced off.
 * A server that disagrees would change these decisions for everyone the
 * moment it leads, so it is refused. backoff_min/max only pace the
 * reconciler's retries: a server adopts the stored values (with a warning)
 * so pacing does not change with the leader, and refusing it would be
 * out of proportion. Per-server keys (workers, rpc_timeout,
 * plugin_concurrency, listeners, plugins, tokens) are not compared.
 *
 * A deliberate change: update every server's config, then start one
 * server with `csid server -update-settings`; it rewrites the record's
 * settings with its own (each change logged), and the others, restarted
 * with the new config, agree again. Servers still running keep their old
 * values until restarted.
 */
#ifndef CSID_SERVER_SERVER_INSTALL_H
#define CSID_SERVER_SERVER_INSTALL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/store.h"
#include "util/err.h"

#define SERVER_INSTALL_RECORD "record"
#define SERVER_INSTALL_FORMAT "csid-installation"
#define SERVER_INSTALL_VERSION 1
/* Longest installation ID (a configured cluster_id; a generated one is 32 hex digits). */
#define SERVER_INSTALL_ID_MAX 64

/* The cluster-wide settings, in ms, every default resolved. */
struct server_install_settings {
	int64_t node_ttl_ms, node_grace_ms, leader_ttl_ms; /* must agree */
	int64_t backoff_min_ms, backoff_max_ms; /* adopted from the record */
};

struct server_install {
	char id[SERVER_INSTALL_ID_MAX + 1];
	int64_t created_ms; /* wall clock */
	struct server_install_settings set;
};

struct server_install_opts {
	const char *want_id; /* config "cluster_id"; NULL: adopt the stored one */
	struct server_install_settings set; /* this server's, defaults resolved */
	bool update_settings; /* write set into the record instead of refusing */
};

/* Whether id is a valid cluster_id: 1 to SERVER_INSTALL_ID_MAX of [A-Za-z0-9._-]. */
bool server_install_id_ok(const char *id);

/*
 * The settings one by one (GET /v1/status/installation): key i's name
 * as the record and the config spell it, whether servers must agree on
 * it, and its value in *set; i < server_install_nkeys().
 */
size_t server_install_nkeys(void);
const char *server_install_key(size_t i, bool *must_agree);
int64_t server_install_value(const struct server_install_settings *set, size_t i);

/* Encodes a record into a new NUL-terminated *text (caller frees). */
int server_install_encode(const struct server_install *in, char **text, size_t *len, struct err *e);
/* Decodes a record; CSID_EPROTO with e saying what is wrong. */
int server_install_decode(const char *text, size_t len, struct server_install *out, struct err *e);

/*
 * Compares the stored settings with this server's *ours: 0 when every
 * must-agree key matches (the adopted keys of *ours are set to the
 * stored ones, each difference logged), else CSID_EPRECOND naming each
 * differing key with both values.
 */
int server_install_compare(const struct server_install_settings *stored,
			   struct server_install_settings *ours, struct err *e);

/*
 * The check at a server's start (the table above): reads, writes or
 * rewrites the record of store s as o asks, and fills *out with the
 * installation as it now is (its settings those this server must run
 * with). Returns 0, CSID_EPRECOND with a message for the operator, or a
 * store error.
 */
int server_install_check(struct store *s, const struct server_install_opts *o,
			 struct server_install *out, struct err *e);

/*
 * A snapshot's record restored into store s (server_backup.c): the
 * installation keeps its current settings (those its running servers
 * agreed on) and takes the snapshot's ID and creation time, so a moved
 * installation keeps its identity. Fills op (value in *text, caller
 * frees) to write in the restore's transaction. Returns 0, CSID_EINVAL
 * for a record that does not decode, or a store error.
 */
int server_install_restore_op(struct store *s, const char *value, size_t len, struct store_op *op,
			      char **text, struct err *e);

#endif
