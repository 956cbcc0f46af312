/*
 * csi-hostpath's crash-safe state: one SQLite database in the data dir.
 * Callers bracket each RPC in hp_store_begin/commit (or rollback); every
 * other function runs inside that transaction. Functions return 0,
 * CSID_ENOTFOUND for a missing row, or another negative code with e set.
 * Not thread-safe: the plugin's mutex serialises callers.
 */
#ifndef HP_STORE_H
#define HP_STORE_H

#include <stdbool.h>
#include <stdint.h>

#include "hp_valid.h"
#include "util/err.h"

struct hp_store;

struct hp_vol {
	int64_t seq; /* insertion order, the ListVolumes token */
	char id[HP_ID_MAX + 1];
	char name[HP_NAME_MAX + 1];
	int64_t capacity;
	bool block;
	char source[HP_ID_MAX + 16]; /* "", "snapshot:<id>" or "volume:<id>" */
	char params[40]; /* hash of the creation parameters */
	char mut[256]; /* mutable parameters, "k=v\n"... (validated) */
};

struct hp_snap {
	int64_t seq;
	char id[HP_ID_MAX + 1];
	char name[HP_NAME_MAX + 1];
	char source[HP_ID_MAX + 1]; /* source volume ID */
	int64_t size;
	bool block;
	int64_t created_ns;
	char group[HP_ID_MAX + 1]; /* ID of its volume group snapshot, "" when none */
};

/* A volume group snapshot; its members are snapshots (hp_store_group_members). */
struct hp_group {
	int64_t seq;
	char id[HP_ID_MAX + 1];
	char name[HP_NAME_MAX + 1];
	char params[40]; /* hash of the creation parameters */
	int64_t created_ns; /* also every member's created_ns */
};

/* A controller publication of a volume to a node. */
struct hp_pub {
	char volume_id[HP_ID_MAX + 1];
	char node_id[HP_NODE_ID_MAX + 1];
	bool readonly;
	char cap[128]; /* hp_cap_key */
};

/* A node-side mount: a staging path (stage) or a publish target (mount). */
struct hp_mnt {
	char node_id[HP_NODE_ID_MAX + 1];
	char volume_id[HP_ID_MAX + 1];
	char path[4096]; /* staging path or target path */
	char staging[4096]; /* for a target: its staging path */
	bool readonly;
	int mode; /* access mode */
	char cap[128]; /* hp_cap_key */
};

/* Opens (creating) the database at path: WAL, synchronous=NORMAL. */
int hp_store_open(const char *path, struct hp_store **out, struct err *e);
void hp_store_close(struct hp_store *s);

int hp_store_begin(struct hp_store *s, bool write, struct err *e);
int hp_store_commit(struct hp_store *s, struct err *e);
void hp_store_rollback(struct hp_store *s);

int hp_store_vol_get(struct hp_store *s, const char *id, struct hp_vol *v, struct err *e);
int hp_store_vol_by_name(struct hp_store *s, const char *name, struct hp_vol *v, struct err *e);
int hp_store_vol_insert(struct hp_store *s, struct hp_vol *v, struct err *e);
int hp_store_vol_delete(struct hp_store *s, const char *id, struct err *e);
int hp_store_vol_update(struct hp_store *s, const struct hp_vol *v, struct err *e);
/* Calls fn for at most limit volumes (-1 = all) with seq > after, in seq order. */
int hp_store_vol_list(struct hp_store *s, int64_t after, int64_t limit,
		      int (*fn)(void *ctx, const struct hp_vol *v), void *ctx, struct err *e);
/* Bytes taken by every volume and snapshot. */
int hp_store_used(struct hp_store *s, int64_t *bytes, struct err *e);
/* Highest seq ever given in table "volumes" or "snapshots". */
int hp_store_max_seq(struct hp_store *s, bool snapshots, int64_t *seq, struct err *e);

int hp_store_snap_get(struct hp_store *s, const char *id, struct hp_snap *v, struct err *e);
int hp_store_snap_by_name(struct hp_store *s, const char *name, struct hp_snap *v, struct err *e);
int hp_store_snap_insert(struct hp_store *s, struct hp_snap *v, struct err *e);
int hp_store_snap_delete(struct hp_store *s, const char *id, struct err *e);
/* Snapshots with seq > after, optionally of one source volume (NULL = all). */
int hp_store_snap_list(struct hp_store *s, int64_t after, const char *source, int64_t limit,
		       int (*fn)(void *ctx, const struct hp_snap *v), void *ctx, struct err *e);

int hp_store_pub_get(struct hp_store *s, const char *vol, const char *node, struct hp_pub *p,
		     struct err *e);
int hp_store_pub_put(struct hp_store *s, const struct hp_pub *p, struct err *e);
/* Deletes the publications of vol on node (NULL = every node). */
int hp_store_pub_delete(struct hp_store *s, const char *vol, const char *node, struct err *e);
/* Calls fn for each publication of vol (NULL = of every volume on node). */
int hp_store_pub_list(struct hp_store *s, const char *vol, const char *node,
		      int (*fn)(void *ctx, const struct hp_pub *p), void *ctx, struct err *e);
/* Number of volumes published to node. */
int hp_store_pub_count(struct hp_store *s, const char *node, int64_t *n, struct err *e);

/* Stages are keyed by (node, volume); mounts (publish targets) by path. */
int hp_store_stage_get(struct hp_store *s, const char *node, const char *vol, struct hp_mnt *m,
		       struct err *e);
int hp_store_stage_put(struct hp_store *s, const struct hp_mnt *m, struct err *e);
int hp_store_stage_delete(struct hp_store *s, const char *node, const char *vol, struct err *e);
int hp_store_mount_get(struct hp_store *s, const char *path, struct hp_mnt *m, struct err *e);
int hp_store_mount_put(struct hp_store *s, const struct hp_mnt *m, struct err *e);
int hp_store_mount_delete(struct hp_store *s, const char *path, struct err *e);
/* Calls fn for each publish target of vol on node. */
int hp_store_mount_list(struct hp_store *s, const char *node, const char *vol,
			int (*fn)(void *ctx, const struct hp_mnt *m), void *ctx, struct err *e);
/* Number of stages plus publish targets of vol on any node. */
int hp_store_node_uses(struct hp_store *s, const char *vol, int64_t *n, struct err *e);

/* Node IDs of the node plugins sharing this data dir. */
int hp_store_node_add(struct hp_store *s, const char *node, struct err *e);
int hp_store_node_known(struct hp_store *s, const char *node, bool *known, struct err *e);
int hp_store_node_list(struct hp_store *s, int (*fn)(void *ctx, const char *node), void *ctx,
		       struct err *e);

/* Volume group snapshots; the members are inserted with hp_store_snap_insert first. */
int hp_store_group_get(struct hp_store *s, const char *id, struct hp_group *g, struct err *e);
int hp_store_group_by_name(struct hp_store *s, const char *name, struct hp_group *g, struct err *e);
int hp_store_group_insert(struct hp_store *s, struct hp_group *g, struct err *e);
/* Makes snapshot snap a member of group. */
int hp_store_group_member_add(struct hp_store *s, const char *group, const char *snap,
			      struct err *e);
/* Calls fn for each member snapshot of group, in creation order. */
int hp_store_group_members(struct hp_store *s, const char *group,
			   int (*fn)(void *ctx, const struct hp_snap *v), void *ctx, struct err *e);
/* Deletes group with its member snapshots' rows (not their copies on disk). */
int hp_store_group_delete(struct hp_store *s, const char *id, struct err *e);

#endif
