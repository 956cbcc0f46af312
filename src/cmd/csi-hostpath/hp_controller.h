/*
 * The Controller service of csi-hostpath for volumes (snapshots are in
 * hp_snapshot). Each handler takes the decoded request, builds its
 * response in the arena and returns a gRPC code with msg set on error;
 * hp_handle calls them under the plugin lock inside a store transaction.
 */
#ifndef HP_CONTROLLER_H
#define HP_CONTROLLER_H

#include "hostpath.h"

#define HP_CTL_HANDLER(fn)                                                                     \
	int fn(struct hp_plugin *p, const void *req, ProtobufCMessage **resp, struct arena *a, \
	       char *msg)

HP_CTL_HANDLER(hp_ctl_create_volume);
HP_CTL_HANDLER(hp_ctl_delete_volume);
HP_CTL_HANDLER(hp_ctl_publish);
HP_CTL_HANDLER(hp_ctl_unpublish);
HP_CTL_HANDLER(hp_ctl_validate);
HP_CTL_HANDLER(hp_ctl_list_volumes);
HP_CTL_HANDLER(hp_ctl_get_capacity);
HP_CTL_HANDLER(hp_ctl_caps);
HP_CTL_HANDLER(hp_ctl_expand);
HP_CTL_HANDLER(hp_ctl_get_volume);
HP_CTL_HANDLER(hp_ctl_modify);

/*
 * Checks a capacity range: negative → INVALID_ARGUMENT, limit below
 * required → OUT_OF_RANGE. Sets *req and *lim (0 = not set).
 */
int hp_ctl_range(const Csi__V1__CapacityRange *cr, int64_t *req, int64_t *lim, char *msg);
struct hp_vol;

/* Node IDs a volume is accessible from: this plugin's and every registered node's. */
struct hp_ctl_nodes {
	struct arena *a;
	const char *own;
	const char **ids;
	size_t n;
};

/* Fills ns (from the arena) with at most 65 node IDs, this plugin's first. */
int hp_ctl_nodes(struct hp_plugin *p, struct arena *a, struct hp_ctl_nodes *ns, char *msg);
/* The CSI Volume message of v, accessible from every node of ns; NULL when out of memory. */
Csi__V1__Volume *hp_ctl_volume(struct arena *a, const struct hp_vol *v,
			       const struct hp_ctl_nodes *ns);
/*
 * Parses a paging token ("" = from the start) of the volumes or snapshots
 * table into *after; a token never issued is ABORTED.
 */
int hp_ctl_token(struct hp_plugin *p, const char *tok, bool snapshots, int64_t *after, char *msg);
/* Loads volume id into v: NOT_FOUND (with msg) when it does not exist. */
int hp_ctl_get_volume_row(struct hp_plugin *p, const char *id, struct hp_vol *v, char *msg);
/* A store error as a gRPC status (ABORTED when the db is busy, else INTERNAL). */
int hp_ctl_store_fail(const struct err *e, char *msg);
/* Order-independent hash of a string map ("n:hash", < 40 bytes), for idempotency checks. */
void hp_ctl_params_hash(void *const *entries, size_t n, char *buf, size_t len);
/* Random ID "<prefix>-<16 hex digits>" into buf (at least 32 bytes). */
void hp_ctl_new_id(const char *prefix, char *buf, size_t len);

#endif
