/*
 * csi-hostpath core: plugin setup, the dispatcher every RPC goes through,
 * and the Identity service. The dispatcher answers UNIMPLEMENTED for the
 * RPCs the mode does not serve (a controller-only plugin has no Node
 * service and the other way round; PUBLISH_UNPUBLISH_VOLUME can be turned
 * off; the spec's alpha methods, ControllerGetVolume and GetSnapshot, need
 * --enable-alpha), applies the fault script, then runs the handler under the plugin
 * mutex inside one state-store transaction, committed only when the
 * handler succeeded. Handlers that change the file system before an
 * error undo it themselves.
 */
#include "hostpath.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "hp_controller.h"
#include "hp_faults.h"
#include "hp_fs.h"
#include "hp_group.h"
#include "hp_node.h"
#include "hp_snapshot.h"
#include "hp_store.h"
#include "hp_valid.h"
#include "csi/csi_secret.h"
#include "util/log.h"

/* The process exit status of an injected crash, like a SIGKILLed process. */
#define HP_CRASH_STATUS 137

int hp_fail(char *msg, int code, const char *fmt, ...)
{
	va_list ap;

	if (msg) {
		va_start(ap, fmt);
		vsnprintf(msg, CSI_STATUS_MSG_MAX, fmt, ap);
		va_end(ap);
	}
	return code;
}

void hp_volume_path(const struct hp_plugin *p, const char *id, char *buf, size_t len)
{
	snprintf(buf, len, "%s/volumes/%s", p->data_dir, id);
}

void hp_snapshot_path(const struct hp_plugin *p, const char *id, char *buf, size_t len)
{
	snprintf(buf, len, "%s/snapshots/%s", p->data_dir, id);
}

void *hp_map_entry(struct arena *a, const ProtobufCMessageDescriptor *desc, const char *key,
		   const char *value)
{
	struct hp_kv *kv = arena_alloc(a, desc->sizeof_message);

	if (!kv)
		return NULL;
	protobuf_c_message_init(desc, kv);
	kv->key = arena_strdup(a, key);
	kv->value = arena_strdup(a, value);
	return kv->key && kv->value ? kv : NULL;
}

static void *hp_arena_alloc(void *ad, size_t size)
{
	return arena_alloc(ad, size ? size : 1);
}

static void hp_arena_free(void *ad, void *ptr)
{
}

void *hp_dup(struct arena *a, const ProtobufCMessage *m)
{
	ProtobufCAllocator al = {hp_arena_alloc, hp_arena_free, a};
	size_t n = protobuf_c_message_get_packed_size(m);
	uint8_t *buf = arena_alloc(a, n ? n : 1);

	if (!buf)
		return NULL;
	protobuf_c_message_pack(m, buf);
	return protobuf_c_message_unpack(m->descriptor, &al, n, buf);
}

Csi__V1__Topology *hp_topology(struct arena *a, const char *node_id)
{
	Csi__V1__Topology *t = arena_alloc(a, sizeof(*t));

	if (!t)
		return NULL;
	csi__v1__topology__init(t);
	t->segments = arena_alloc(a, sizeof(*t->segments));
	if (!t->segments)
		return NULL;
	t->segments[0] = hp_map_entry(a, &csi__v1__topology__segments_entry__descriptor,
				      HP_TOPOLOGY_KEY, node_id);
	if (!t->segments[0])
		return NULL;
	t->n_segments = 1;
	return t;
}

bool hp_topology_matches(const Csi__V1__Topology *t, const char *node_id)
{
	if (!t)
		return true;
	for (size_t i = 0; i < t->n_segments; i++) {
		const Csi__V1__Topology__SegmentsEntry *s = t->segments[i];

		if (!s || !s->key || strcmp(s->key, HP_TOPOLOGY_KEY) != 0 || !s->value ||
		    strcmp(s->value, node_id) != 0)
			return false;
	}
	return true;
}

/* --- Identity --- */

static int hp_get_plugin_info(struct hp_plugin *p, const void *req, ProtobufCMessage **resp,
			      struct arena *a, char *msg)
{
	Csi__V1__GetPluginInfoResponse *r = arena_alloc(a, sizeof(*r));

	if (!r)
		return hp_fail(msg, CSI_RESOURCE_EXHAUSTED, "out of memory");
	csi__v1__get_plugin_info_response__init(r);
	r->name = p->name;
	r->vendor_version = CSID_VERSION;
	*resp = &r->base;
	return CSI_OK;
}

static int hp_plugin_caps(struct hp_plugin *p, const void *req, ProtobufCMessage **resp,
			  struct arena *a, char *msg)
{
	Csi__V1__GetPluginCapabilitiesResponse *r = arena_alloc(a, sizeof(*r));
	Csi__V1__PluginCapability **caps = arena_alloc(a, 4 * sizeof(*caps));
	/* The group controller is GA in CSI v1.12: offered wherever the controller is. */
	int types[3] = {CSI__V1__PLUGIN_CAPABILITY__SERVICE__TYPE__VOLUME_ACCESSIBILITY_CONSTRAINTS,
			CSI__V1__PLUGIN_CAPABILITY__SERVICE__TYPE__CONTROLLER_SERVICE,
			CSI__V1__PLUGIN_CAPABILITY__SERVICE__TYPE__GROUP_CONTROLLER_SERVICE};
	int nservice = p->mode == HP_MODE_NODE ? 1 : 3;

	if (!r || !caps)
		return hp_fail(msg, CSI_RESOURCE_EXHAUSTED, "out of memory");
	csi__v1__get_plugin_capabilities_response__init(r);
	for (int i = 0; i < nservice; i++) {
		Csi__V1__PluginCapability *c = arena_alloc(a, sizeof(*c));
		Csi__V1__PluginCapability__Service *s = arena_alloc(a, sizeof(*s));

		if (!c || !s)
			return hp_fail(msg, CSI_RESOURCE_EXHAUSTED, "out of memory");
		csi__v1__plugin_capability__init(c);
		csi__v1__plugin_capability__service__init(s);
		s->type = types[i];
		c->type_case = CSI__V1__PLUGIN_CAPABILITY__TYPE_SERVICE;
		c->service = s;
		caps[r->n_capabilities++] = c;
	}
	if (p->mode != HP_MODE_NODE) {
		Csi__V1__PluginCapability *c = arena_alloc(a, sizeof(*c));
		Csi__V1__PluginCapability__VolumeExpansion *x = arena_alloc(a, sizeof(*x));

		if (!c || !x)
			return hp_fail(msg, CSI_RESOURCE_EXHAUSTED, "out of memory");
		csi__v1__plugin_capability__init(c);
		csi__v1__plugin_capability__volume_expansion__init(x);
		x->type = CSI__V1__PLUGIN_CAPABILITY__VOLUME_EXPANSION__TYPE__ONLINE;
		c->type_case = CSI__V1__PLUGIN_CAPABILITY__TYPE_VOLUME_EXPANSION;
		c->volume_expansion = x;
		caps[r->n_capabilities++] = c;
	}
	r->capabilities = caps;
	*resp = &r->base;
	return CSI_OK;
}

static int hp_probe(struct hp_plugin *p, int ready, ProtobufCMessage **resp, struct arena *a,
		    char *msg)
{
	Csi__V1__ProbeResponse *r = arena_alloc(a, sizeof(*r));
	Google__Protobuf__BoolValue *b = arena_alloc(a, sizeof(*b));
	struct stat st;

	if (!r || !b)
		return hp_fail(msg, CSI_RESOURCE_EXHAUSTED, "out of memory");
	if (stat(p->data_dir, &st) != 0)
		return hp_fail(msg, CSI_FAILED_PRECONDITION, "data dir is gone: %s",
			       strerror(errno));
	csi__v1__probe_response__init(r);
	google__protobuf__bool_value__init(b);
	b->value = ready != 0;
	r->ready = b;
	*resp = &r->base;
	return CSI_OK;
}

/* --- dispatch --- */

typedef int (*hp_fn)(struct hp_plugin *p, const void *req, ProtobufCMessage **resp, struct arena *a,
		     char *msg);

enum hp_side { HP_SIDE_IDENTITY, HP_SIDE_CONTROLLER, HP_SIDE_NODE };

struct hp_route {
	hp_fn fn;
	enum hp_side side;
	bool write;
	bool alpha; /* an alpha_method of the spec: served only with --enable-alpha */
};

static const struct hp_route hp_routes[CSI_RPC_COUNT] = {
    [CSI_RPC_GET_PLUGIN_INFO] = {hp_get_plugin_info, HP_SIDE_IDENTITY, false, false},
    [CSI_RPC_GET_PLUGIN_CAPABILITIES] = {hp_plugin_caps, HP_SIDE_IDENTITY, false, false},
    [CSI_RPC_CREATE_VOLUME] = {hp_ctl_create_volume, HP_SIDE_CONTROLLER, true, false},
    [CSI_RPC_DELETE_VOLUME] = {hp_ctl_delete_volume, HP_SIDE_CONTROLLER, true, false},
    [CSI_RPC_CONTROLLER_PUBLISH_VOLUME] = {hp_ctl_publish, HP_SIDE_CONTROLLER, true, false},
    [CSI_RPC_CONTROLLER_UNPUBLISH_VOLUME] = {hp_ctl_unpublish, HP_SIDE_CONTROLLER, true, false},
    [CSI_RPC_VALIDATE_VOLUME_CAPABILITIES] = {hp_ctl_validate, HP_SIDE_CONTROLLER, false, false},
    [CSI_RPC_LIST_VOLUMES] = {hp_ctl_list_volumes, HP_SIDE_CONTROLLER, false, false},
    [CSI_RPC_GET_CAPACITY] = {hp_ctl_get_capacity, HP_SIDE_CONTROLLER, false, false},
    [CSI_RPC_CONTROLLER_GET_CAPABILITIES] = {hp_ctl_caps, HP_SIDE_CONTROLLER, false, false},
    [CSI_RPC_CREATE_SNAPSHOT] = {hp_snap_create, HP_SIDE_CONTROLLER, true, false},
    [CSI_RPC_DELETE_SNAPSHOT] = {hp_snap_delete, HP_SIDE_CONTROLLER, true, false},
    [CSI_RPC_LIST_SNAPSHOTS] = {hp_snap_list, HP_SIDE_CONTROLLER, false, false},
    [CSI_RPC_GET_SNAPSHOT] = {hp_snap_get, HP_SIDE_CONTROLLER, false, true},
    [CSI_RPC_CONTROLLER_EXPAND_VOLUME] = {hp_ctl_expand, HP_SIDE_CONTROLLER, true, false},
    [CSI_RPC_CONTROLLER_GET_VOLUME] = {hp_ctl_get_volume, HP_SIDE_CONTROLLER, false, true},
    [CSI_RPC_CONTROLLER_MODIFY_VOLUME] = {hp_ctl_modify, HP_SIDE_CONTROLLER, true, false},
    [CSI_RPC_GROUP_CONTROLLER_GET_CAPABILITIES] = {hp_group_caps, HP_SIDE_CONTROLLER, false, false},
    [CSI_RPC_CREATE_VOLUME_GROUP_SNAPSHOT] = {hp_group_create, HP_SIDE_CONTROLLER, true, false},
    [CSI_RPC_GET_VOLUME_GROUP_SNAPSHOT] = {hp_group_get, HP_SIDE_CONTROLLER, false, false},
    [CSI_RPC_DELETE_VOLUME_GROUP_SNAPSHOT] = {hp_group_delete, HP_SIDE_CONTROLLER, true, false},
    [CSI_RPC_NODE_STAGE_VOLUME] = {hp_node_stage, HP_SIDE_NODE, true, false},
    [CSI_RPC_NODE_UNSTAGE_VOLUME] = {hp_node_unstage, HP_SIDE_NODE, true, false},
    [CSI_RPC_NODE_PUBLISH_VOLUME] = {hp_node_publish, HP_SIDE_NODE, true, false},
    [CSI_RPC_NODE_UNPUBLISH_VOLUME] = {hp_node_unpublish, HP_SIDE_NODE, true, false},
    [CSI_RPC_NODE_GET_VOLUME_STATS] = {hp_node_stats, HP_SIDE_NODE, false, false},
    [CSI_RPC_NODE_EXPAND_VOLUME] = {hp_node_expand, HP_SIDE_NODE, false, false},
    [CSI_RPC_NODE_GET_CAPABILITIES] = {hp_node_caps, HP_SIDE_NODE, false, false},
    [CSI_RPC_NODE_GET_INFO] = {hp_node_info, HP_SIDE_NODE, false, false},
};

static bool hp_serves(const struct hp_plugin *p, enum csi_rpc rpc, const struct hp_route *r)
{
	if (r->side == HP_SIDE_CONTROLLER && p->mode == HP_MODE_NODE)
		return false;
	if (r->side == HP_SIDE_NODE && p->mode == HP_MODE_CONTROLLER)
		return false;
	if (r->alpha && !p->enable_alpha)
		return false;
	if ((rpc == CSI_RPC_CONTROLLER_PUBLISH_VOLUME ||
	     rpc == CSI_RPC_CONTROLLER_UNPUBLISH_VOLUME) &&
	    !p->controller_publish)
		return false;
	return true;
}

/* Sleeps ms (in short slices); false when the plugin started stopping. */
static bool hp_sleep(struct hp_plugin *p, int64_t ms)
{
	while (ms > 0 && !atomic_load(&p->stopping)) {
		int64_t slice = ms < 10 ? ms : 10;
		struct timespec ts = {0, slice * 1000000L};

		nanosleep(&ts, NULL);
		ms -= slice;
	}
	return !atomic_load(&p->stopping);
}

static void hp_crash(enum csi_rpc rpc, const char *when)
{
	log_warn("msg=\"injected crash\" rpc=%s when=%s", csi_rpc_info(rpc)->name, when);
	_exit(HP_CRASH_STATUS);
}

/* Applies the fault script; returns a code to answer at once, or -1 to go on. */
static int hp_apply_faults(struct hp_plugin *p, enum csi_rpc rpc, struct hp_fault_action *act,
			   char *msg)
{
	hp_faults_file_match(p->faults, rpc, act);
	if (act->delay_ms && !hp_sleep(p, act->delay_ms))
		return hp_fail(msg, CSI_UNAVAILABLE, "plugin is stopping");
	if (act->hang) {
		log_info("msg=\"injected hang\" rpc=%s", csi_rpc_info(rpc)->name);
		while (!hp_faults_file_changed(p->faults))
			if (!hp_sleep(p, 20))
				return hp_fail(msg, CSI_UNAVAILABLE, "plugin is stopping");
	}
	if (act->crash == HP_CRASH_BEFORE)
		hp_crash(rpc, "before");
	if (act->code) {
		snprintf(msg, CSI_STATUS_MSG_MAX, "%s", act->msg);
		return act->code;
	}
	return -1;
}

static int hp_run(struct hp_plugin *p, const struct hp_route *r, const ProtobufCMessage *req,
		  ProtobufCMessage **resp, struct arena *a, char *msg)
{
	struct err e;
	int rc;

	if (r->side == HP_SIDE_IDENTITY)
		return r->fn(p, req, resp, a, msg);
	pthread_mutex_lock(&p->lock);
	if (hp_store_begin(p->store, r->write, &e) != 0) {
		rc =
		    hp_fail(msg, e.code == CSID_EABORTED ? CSI_ABORTED : CSI_INTERNAL, "%s", e.msg);
		goto done;
	}
	rc = r->fn(p, req, resp, a, msg);
	if (rc == CSI_OK) {
		if (hp_store_commit(p->store, &e) != 0) {
			*resp = NULL;
			rc = hp_fail(msg, CSI_INTERNAL, "%s", e.msg);
		}
	} else {
		*resp = NULL;
		hp_store_rollback(p->store);
	}
done:
	pthread_mutex_unlock(&p->lock);
	return rc;
}

int hp_handle(void *ctx, enum csi_rpc rpc, const ProtobufCMessage *req, ProtobufCMessage **resp,
	      struct arena *a, char *msg)
{
	struct hp_plugin *p = ctx;
	const struct hp_route *r;
	struct hp_fault_action act = {.ready = -1};
	struct timespec t0, t1;
	int rc;

	*resp = NULL;
	if ((unsigned)rpc >= CSI_RPC_COUNT)
		return hp_fail(msg, CSI_UNIMPLEMENTED, "unknown method");
	r = &hp_routes[rpc];
	if (rpc != CSI_RPC_PROBE && (!r->fn || !hp_serves(p, rpc, r)))
		return hp_fail(msg, CSI_UNIMPLEMENTED, "%s is not served by this plugin",
			       csi_rpc_info(rpc)->name);
	if (!req)
		return hp_fail(msg, CSI_INVALID_ARGUMENT, "missing request");
	if (p->log_requests) {
		char text[1024];

		/* csi_secret_format prints secrets and mount flags as <redacted>. */
		log_debug("rpc=%s req=%s", csi_rpc_info(rpc)->name,
			  log_q(text + 512, 512, csi_secret_format(req, text, 512)));
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (p->faults) {
		rc = hp_apply_faults(p, rpc, &act, msg);
		if (rc >= 0)
			goto done;
	}
	if (rpc == CSI_RPC_PROBE)
		rc = hp_probe(p, act.ready, resp, a, msg);
	else
		rc = hp_run(p, r, req, resp, a, msg);
	if (act.crash == HP_CRASH_AFTER && rc == CSI_OK)
		hp_crash(rpc, "after");
done:
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (rc != CSI_OK) {
		char q[CSI_STATUS_MSG_MAX + 8];

		log_msg(r->write ? LOG_INFO : LOG_DEBUG, "rpc=%s code=%s msg=%s us=%lld",
			csi_rpc_info(rpc)->name, csi_code_name(rc), log_q(q, sizeof(q), msg),
			(long long)((t1.tv_sec - t0.tv_sec) * 1000000LL +
				    (t1.tv_nsec - t0.tv_nsec) / 1000));
	} else {
		log_debug("rpc=%s code=OK us=%lld", csi_rpc_info(rpc)->name,
			  (long long)((t1.tv_sec - t0.tv_sec) * 1000000LL +
				      (t1.tv_nsec - t0.tv_nsec) / 1000));
	}
	return rc;
}

/* --- lifecycle --- */

static int hp_mkdirs(const char *path, struct err *e)
{
	char buf[HP_PATH_MAX];
	size_t len = strlen(path);

	if (len >= sizeof(buf))
		return err_set(e, CSID_EINVAL, "data dir path too long");
	memcpy(buf, path, len + 1);
	for (char *c = buf + 1; *c; c++) {
		if (*c != '/')
			continue;
		*c = '\0';
		if (mkdir(buf, 0750) != 0 && errno != EEXIST)
			return err_errno(e, errno, "mkdir %s", buf);
		*c = '/';
	}
	if (mkdir(buf, 0750) != 0 && errno != EEXIST)
		return err_errno(e, errno, "mkdir %s", buf);
	return 0;
}

/* Entries of volumes/ or snapshots/ older than this and unknown to the store are leftovers. */
#define HP_ORPHAN_AGE_S 60

/*
 * Removes what a crash between creating a volume's (or snapshot's)
 * backing store and committing its row left behind. Only entries older
 * than HP_ORPHAN_AGE_S are touched, so a create in flight in another
 * process sharing the data dir is never removed.
 */
static void hp_sweep(struct hp_plugin *p, bool snapshots)
{
	char dir[HP_PATH_MAX + 16], path[HP_PATH_MAX + 300];
	struct dirent *de;
	struct hp_snap s;
	struct hp_vol v;
	struct stat st;
	DIR *d;
	int rc;

	snprintf(dir, sizeof(dir), "%s/%s", p->data_dir, snapshots ? "snapshots" : "volumes");
	d = opendir(dir);
	if (!d)
		return;
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		rc = snapshots ? hp_store_snap_get(p->store, de->d_name, &s, NULL)
			       : hp_store_vol_get(p->store, de->d_name, &v, NULL);
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (rc != CSID_ENOTFOUND || lstat(path, &st) != 0 ||
		    st.st_mtime > time(NULL) - HP_ORPHAN_AGE_S)
			continue;
		if (hp_fs_remove(path, NULL) == 0)
			log_info("msg=\"removed leftover of an unfinished create\" path=%s", path);
	}
	closedir(d);
}

static int hp_setup(struct hp_plugin *p, const struct hp_config *cfg, struct err *e)
{
	char path[HP_PATH_MAX + 32], real[HP_PATH_MAX];
	char msg[CSI_STATUS_MSG_MAX];
	int rc;

	if (!cfg->data_dir || cfg->data_dir[0] != '/')
		return err_set(e, CSID_EINVAL, "--data-dir must be an absolute path");
	if (hp_valid_node_id(cfg->node_id, "node id", msg) != 0)
		return err_set(e, CSID_EINVAL, "%s", msg);
	if (cfg->capacity <= 0 || cfg->max_volumes_per_node < 0)
		return err_set(e, CSID_EINVAL, "capacity must be positive");
	rc = hp_mkdirs(cfg->data_dir, e);
	if (rc)
		return rc;
	if (!realpath(cfg->data_dir, real))
		return err_errno(e, errno, "data dir %s", cfg->data_dir);
	if (strlen(real) > HP_PATH_MAX - 200)
		return err_set(e, CSID_EINVAL, "data dir path too long");
	snprintf(p->data_dir, sizeof(p->data_dir), "%s", real);
	snprintf(p->node_id, sizeof(p->node_id), "%s", cfg->node_id);
	snprintf(p->name, sizeof(p->name), "%s", cfg->name ? cfg->name : HP_DEFAULT_NAME);
	p->mode = cfg->mode;
	p->controller_publish = cfg->controller_publish;
	p->log_requests = cfg->log_requests;
	p->enable_alpha = cfg->enable_alpha;
	snprintf(p->require_stage_secret, sizeof(p->require_stage_secret), "%s",
		 cfg->require_stage_secret ? cfg->require_stage_secret : "");
	p->max_volumes_per_node = cfg->max_volumes_per_node;
	p->capacity = cfg->capacity;
	p->ops = cfg->ops ? cfg->ops : &hp_mount_real;
	p->ops_ctx = cfg->ops_ctx;
	for (int i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/%s", p->data_dir, i ? "snapshots" : "volumes");
		if (mkdir(path, 0750) != 0 && errno != EEXIST)
			return err_errno(e, errno, "mkdir %s", path);
	}
	snprintf(path, sizeof(path), "%s/hostpath.db", p->data_dir);
	rc = hp_store_open(path, &p->store, e);
	if (rc)
		return rc;
	if (p->mode != HP_MODE_CONTROLLER) {
		rc = hp_store_node_add(p->store, p->node_id, e);
		if (rc)
			return rc;
	}
	if (p->mode != HP_MODE_NODE) {
		hp_sweep(p, false);
		hp_sweep(p, true);
	}
	if (cfg->faults_path)
		return hp_faults_file_new(cfg->faults_path, &p->faults, e);
	return 0;
}

int hp_new(const struct hp_config *cfg, struct hp_plugin **out, struct err *e)
{
	struct hp_plugin *p = calloc(1, sizeof(*p));
	int rc;

	if (!p)
		return err_set(e, CSID_ENOMEM, "out of memory");
	pthread_mutex_init(&p->lock, NULL);
	atomic_init(&p->stopping, false);
	rc = hp_setup(p, cfg, e);
	if (rc) {
		hp_free(p);
		return rc;
	}
	*out = p;
	return 0;
}

void hp_shutdown(struct hp_plugin *p)
{
	if (p)
		atomic_store(&p->stopping, true);
}

void hp_free(struct hp_plugin *p)
{
	if (!p)
		return;
	hp_faults_file_free(p->faults);
	hp_store_close(p->store);
	pthread_mutex_destroy(&p->lock);
	free(p);
}
