/*
 * csi-hostpath: the plugin core shared by its modules. A struct hp_plugin
 * holds the configuration, the state store (hp_store), the fault script
 * (hp_faults) and the host operations on CO-given paths (hp_mount), and
 * hp_handle() is the one entry point the CSI server calls for every RPC.
 *
 * Data model on disk, all under --data-dir:
 *   hostpath.db            SQLite state (volumes, snapshots, publications, stages, mounts)
 *                          and volume group snapshots, whose members are snapshots
 *   volumes/<volume id>    a directory (mount volume) or a sparse file (block volume)
 *   snapshots/<snap id>    a copy of the volume's directory or file
 * Volume and snapshot IDs are generated ("vol-" / "snap-" + 16 hex digits),
 * so every path the plugin builds under --data-dir is safe by construction;
 * IDs that come back from the CO are checked by hp_valid before any use.
 *
 * Concurrency: handlers run on the server's worker threads; hp_handle
 * serialises them with one mutex and one SQLite transaction per call (the
 * data dir may be shared with other csi-hostpath processes, e.g. a
 * controller and node plugins, which SQLite serialises across processes).
 */
#ifndef HP_HOSTPATH_H
#define HP_HOSTPATH_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "csi/csi_server.h"
#include "hp_mount.h"

#define HP_DEFAULT_NAME "hostpath.csi.csid.dev"
#define HP_TOPOLOGY_KEY "topology.hostpath.csi/node"
/* publish_context key set by ControllerPublishVolume(readonly=true). */
#define HP_CTX_READONLY "hostpath.csi/readonly"
#define HP_DEFAULT_VOLUME_SIZE (1LL << 30)
#define HP_DEFAULT_CAPACITY (100LL << 30)
#define HP_PATH_MAX 4096

enum hp_mode { HP_MODE_MONOLITH, HP_MODE_CONTROLLER, HP_MODE_NODE };

struct hp_config {
	const char *data_dir; /* absolute; created when missing */
	const char *node_id; /* this plugin's node ID */
	const char *name; /* plugin name; NULL = HP_DEFAULT_NAME */
	enum hp_mode mode;
	bool controller_publish; /* advertise PUBLISH_UNPUBLISH_VOLUME */
	int64_t max_volumes_per_node; /* 0 = no limit */
	int64_t capacity; /* total bytes GetCapacity starts from */
	const char *faults_path; /* fault script, NULL = none */
	bool log_requests; /* log each request (secrets redacted) at debug level */
	bool enable_alpha; /* serve and advertise what the spec marks alpha */
	/* NodeStageVolume refuses a request whose secrets lack this key; NULL = none. */
	const char *require_stage_secret;
	const struct hp_mount_ops *ops; /* NULL = the real mount(2) operations */
	void *ops_ctx;
};

struct hp_store;
struct hp_faults_file;

struct hp_plugin {
	char data_dir[HP_PATH_MAX];
	char node_id[257];
	char name[64];
	enum hp_mode mode;
	bool controller_publish;
	bool log_requests;
	bool enable_alpha;
	char require_stage_secret[129]; /* "" = none */
	int64_t max_volumes_per_node;
	int64_t capacity;
	const struct hp_mount_ops *ops;
	void *ops_ctx;
	struct hp_store *store;
	struct hp_faults_file *faults;
	pthread_mutex_t lock; /* serialises handlers */
	atomic_bool stopping; /* releases hung and delayed calls */
};

/* Creates the plugin (data dirs, state store, fault script). */
int hp_new(const struct hp_config *cfg, struct hp_plugin **out, struct err *e);
/* Frees p; NULL is a no-op. Stop the server first. */
void hp_free(struct hp_plugin *p);
/* Makes calls held by a "hang" or a delay fault return (UNAVAILABLE) soon. */
void hp_shutdown(struct hp_plugin *p);
/* The csi_handler_fn of csi_server.h; ctx is the struct hp_plugin. */
int hp_handle(void *ctx, enum csi_rpc rpc, const ProtobufCMessage *req, ProtobufCMessage **resp,
	      struct arena *a, char *msg);

/* --- shared by the handler modules --- */

/* Writes a status message (CSI_STATUS_MSG_MAX) and returns code. */
int hp_fail(char *msg, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Backing path of a volume or snapshot: <data>/volumes/<id>, <data>/snapshots/<id>. */
void hp_volume_path(const struct hp_plugin *p, const char *id, char *buf, size_t len);
void hp_snapshot_path(const struct hp_plugin *p, const char *id, char *buf, size_t len);
/*
 * Generic map entry of any protobuf-c map field (all have the layout
 * base, key, value); desc is the entry's descriptor. NULL when out of memory.
 */
void *hp_map_entry(struct arena *a, const ProtobufCMessageDescriptor *desc, const char *key,
		   const char *value);
/* Deep copy of m into arena a (NULL when out of memory). */
void *hp_dup(struct arena *a, const ProtobufCMessage *m);
/* The Topology of node_id ({HP_TOPOLOGY_KEY: node_id}) from arena a. */
Csi__V1__Topology *hp_topology(struct arena *a, const char *node_id);
/* Whether a topology requirement entry matches node_id. */
bool hp_topology_matches(const Csi__V1__Topology *t, const char *node_id);

#endif
