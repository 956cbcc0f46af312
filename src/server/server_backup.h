/*
 * Backup and restore of the catalogue (`csictl operator snapshot save |
 * restore`), and the way an installation moves from one store backend to
 * another (SQLite to etcd): a snapshot is every object of every kind, as
 * stored, read at one store index.
 *
 * Document (JSON):
 *   {"format": "csid-snapshot", "version": 1, "index": N,
 *    "objects": [{"kind": "volume"|"node"|"snapshot", "id": "...",
 *                 "value": "<the stored record, JSON text>"}, ...]}
 *
 * The records hold the secrets volumes and snapshots were created with
 * (the plugin needs them again), so a snapshot is as sensitive as the
 * store: the API asks a write token for it and csictl writes the file
 * with mode 0600. No secret ever reaches a message.
 *
 * The installation record (server_install.h) is saved like any object;
 * restored, it gives the target installation the snapshot's ID and
 * creation time and keeps the target's cluster-wide settings (those its
 * running servers agreed on).
 *
 * Restore goes into an empty store only (the installation record its
 * servers wrote aside), in batches of at most
 * SERVER_BACKUP_BATCH_OPS objects (one store transaction each, within
 * etcd's request limits): the first batch is refused with CSID_EPRECOND
 * when the store holds any object; each object must not exist yet, must
 * decode as its kind and carry its own ID. A restore cut short leaves the
 * batches written so far: restore again into a fresh store.
 *
 * Thread-safety: both calls may run beside the server's other work.
 */
#ifndef CSID_SERVER_SERVER_BACKUP_H
#define CSID_SERVER_SERVER_BACKUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/store.h"
#include "util/err.h"

#define SERVER_BACKUP_FORMAT "csid-snapshot"
#define SERVER_BACKUP_VERSION 1
/* Most objects in one restore batch (one transaction). */
#define SERVER_BACKUP_BATCH_OPS 64
/* Most bytes of one restore batch document. */
#define SERVER_BACKUP_BATCH_MAX (900 * 1024)

/*
 * Reads every object at one index (retrying while writes land between its
 * reads) into a new document *text of *len bytes (the caller frees it,
 * after zeroing: it holds secrets). Returns 0 with *index, CSID_EABORTED
 * when the store never stood still long enough, or a store error.
 */
int server_backup_save(struct store *s, char **text, size_t *len, uint64_t *index, struct err *e);

/*
 * Writes one batch document ({"format", "version", "first", "objects"}),
 * len bytes. first: the store must be empty. Returns 0 with *n the count
 * written, CSID_EINVAL for a bad document (e names the object),
 * CSID_EPRECOND for a store that is not empty, CSID_ECONFLICT for an
 * object that exists already, or a store error.
 */
int server_backup_restore(struct store *s, const char *body, size_t len, size_t *n, struct err *e);

#endif
