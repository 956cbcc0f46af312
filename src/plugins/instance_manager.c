/*
 * Instance manager (see instance_manager.h): the life of one plugin
 * instance as seen by the plugin manager. Three timers drive it: connect
 * (until a client exists), fingerprint (until one succeeds, then every
 * fingerprint interval) and probe (every probe interval once
 * fingerprinted). While the plugin is down, failed connects, fingerprints
 * and Probes are retried with a doubling, jittered delay from 100 ms up to
 * a cap (supervisor_backoff_ms), so a dead plugin is never polled in a
 * tight loop; a success resets it. The status counts the failed attempts
 * and says when the next one is due, so every change of health can be
 * logged with both. Each attempt is a real connection attempt: the gRPC
 * client renews a failed channel on the next call and makes no retries of
 * its own in between (csi_client.h).
 *
 * Health: healthy when the last fingerprint and the last Probe both
 * succeeded and Probe said ready; the description says which call failed
 * and why. The change time is the wall time of the last flip of healthy.
 *
 * Locking: mu guards the state read by other threads (status, client,
 * stop flag). A step copies what it needs, drops mu for each blocking RPC,
 * and takes it again to store the result, unless a stop came meanwhile.
 * The change callback runs after mu is released.
 */
#include "plugins/instance_manager.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugins/supervisor.h"
#include "util/log.h"

/* A client shared by the manager and the plugin_refs handed out. */
struct im_conn {
	atomic_int refs;
	struct csi_client *client;
};

struct instance_manager {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	struct clock *clock;
	instance_manager_connect_fn connect;
	void *connect_ctx;
	instance_manager_change_cb on_change;
	void *on_change_ctx;
	int64_t probe_interval;
	int64_t fingerprint_interval;
	int64_t rpc_timeout;
	int64_t retry_max;
	uint64_t (*random)(void *ctx);
	void *random_ctx;
	uint64_t rng; /* state of the internal generator */

	/* Guarded by mu. */
	struct instance_manager_status st;
	struct im_conn *conn;
	bool stop;
	bool stepping;
	bool thread_started;
	bool thread_exited;
	bool joined;
	pthread_t thread;

	/* Owned by the stepping thread. */
	int64_t next_connect;
	int64_t next_fingerprint;
	int64_t next_probe;
	bool fp_ok;
	bool probe_ok;
	char fp_err[PLUGIN_HEALTH_DESC_MAX];
	char probe_err[PLUGIN_HEALTH_DESC_MAX];
};

static const char *const im_node_caps[] = {
    "UNKNOWN",          "STAGE_UNSTAGE_VOLUME",     "GET_VOLUME_STATS",   "EXPAND_VOLUME",
    "VOLUME_CONDITION", "SINGLE_NODE_MULTI_WRITER", "VOLUME_MOUNT_GROUP",
};

static const char *const im_controller_caps[] = {
    "UNKNOWN",
    "CREATE_DELETE_VOLUME",
    "PUBLISH_UNPUBLISH_VOLUME",
    "LIST_VOLUMES",
    "GET_CAPACITY",
    "CREATE_DELETE_SNAPSHOT",
    "LIST_SNAPSHOTS",
    "CLONE_VOLUME",
    "PUBLISH_READONLY",
    "EXPAND_VOLUME",
    "LIST_VOLUMES_PUBLISHED_NODES",
    "VOLUME_CONDITION",
    "GET_VOLUME",
    "SINGLE_NODE_MULTI_WRITER",
    "MODIFY_VOLUME",
    "GET_SNAPSHOT",
};

static const char *const im_service_caps[] = {
    "UNKNOWN",
    "CONTROLLER_SERVICE",
    "VOLUME_ACCESSIBILITY_CONSTRAINTS",
    "GROUP_CONTROLLER_SERVICE",
    "SNAPSHOT_METADATA_SERVICE",
};

#define IM_NAME_OF(table, bit) \
	((bit) >= 0 && (size_t)(bit) < sizeof(table) / sizeof(table[0]) ? table[bit] : "UNKNOWN")

const char *plugin_node_cap_name(int bit)
{
	return IM_NAME_OF(im_node_caps, bit);
}

const char *plugin_controller_cap_name(int bit)
{
	return IM_NAME_OF(im_controller_caps, bit);
}

const char *plugin_service_cap_name(int bit)
{
	return IM_NAME_OF(im_service_caps, bit);
}

const char *instance_manager_state_name(enum instance_manager_state s)
{
	switch (s) {
	case INSTANCE_MANAGER_CONNECTING:
		return "connecting";
	case INSTANCE_MANAGER_FINGERPRINTING:
		return "fingerprinting";
	case INSTANCE_MANAGER_RUNNING:
		return "running";
	case INSTANCE_MANAGER_STOPPED:
		return "stopped";
	}
	return "unknown";
}

static void im_conn_put(struct im_conn *c)
{
	if (c != NULL && atomic_fetch_sub(&c->refs, 1) == 1) {
		csi_client_free(c->client);
		free(c);
	}
}

static struct im_conn *im_conn_get(struct im_conn *c)
{
	if (c != NULL)
		atomic_fetch_add(&c->refs, 1);
	return c;
}

int instance_manager_new(const struct instance_manager_config *cfg, struct instance_manager **out,
			 struct err *e)
{
	struct instance_manager *im;

	*out = NULL;
	if (cfg == NULL || cfg->name == NULL || cfg->instance == NULL || cfg->connect == NULL ||
	    (int)cfg->type < 0 || cfg->type >= REGISTRY_TYPE_COUNT)
		return err_set(e, CSID_EINVAL, "instance manager: invalid configuration");
	if (strlen(cfg->name) >= REGISTRY_NAME_MAX)
		return err_set(e, CSID_EINVAL, "instance manager: plugin name too long");
	im = calloc(1, sizeof(*im));
	if (im == NULL)
		return err_set(e, CSID_ENOMEM, "instance manager: out of memory");
	if (clock_cond_init(&im->cond) < 0) {
		free(im);
		return err_set(e, CSID_ENOMEM, "instance manager: out of memory");
	}
	pthread_mutex_init(&im->mu, NULL);
	im->clock = cfg->clock ? cfg->clock : clock_real();
	im->connect = cfg->connect;
	im->connect_ctx = cfg->connect_ctx;
	im->on_change = cfg->on_change;
	im->on_change_ctx = cfg->on_change_ctx;
	im->probe_interval = cfg->probe_interval_ms > 0 ? cfg->probe_interval_ms
							: INSTANCE_MANAGER_PROBE_INTERVAL_MS;
	im->fingerprint_interval = cfg->fingerprint_interval_ms > 0
				       ? cfg->fingerprint_interval_ms
				       : INSTANCE_MANAGER_FINGERPRINT_INTERVAL_MS;
	im->rpc_timeout =
	    cfg->rpc_timeout_ms > 0 ? cfg->rpc_timeout_ms : INSTANCE_MANAGER_RPC_TIMEOUT_MS;
	im->retry_max = cfg->retry_max_ms > 0 ? cfg->retry_max_ms : INSTANCE_MANAGER_RETRY_MAX_MS;
	im->random = cfg->random;
	im->random_ctx = cfg->random_ctx;
	/* Seeded per manager, so that managers started together spread out. */
	im->rng = ((uint64_t)(uintptr_t)im ^ (uint64_t)clock_wall_ms(im->clock)) | 1;
	im->st.type = cfg->type;
	snprintf(im->st.name, sizeof(im->st.name), "%s", cfg->name);
	im->st.instance = *cfg->instance;
	im->st.state = INSTANCE_MANAGER_CONNECTING;
	snprintf(im->st.health.description, sizeof(im->st.health.description), "not yet connected");
	im->st.health.changed_ms = clock_wall_ms(im->clock);
	im->next_connect = clock_now_ms(im->clock);
	im->next_fingerprint = CLOCK_NEVER;
	im->next_probe = CLOCK_NEVER;
	*out = im;
	return 0;
}

static uint64_t im_random(struct instance_manager *im)
{
	if (im->random != NULL)
		return im->random(im->random_ctx);
	/* xorshift64: jitter needs spread, not secrecy. */
	im->rng ^= im->rng << 13;
	im->rng ^= im->rng >> 7;
	im->rng ^= im->rng << 17;
	return im->rng;
}

/* Counts a failed attempt and returns the delay before the next; with mu held. */
static int64_t im_backoff(struct instance_manager *im)
{
	int64_t d = supervisor_backoff_ms(im->st.attempts, INSTANCE_MANAGER_RETRY_MIN_MS,
					  im->retry_max, im_random(im));

	im->st.attempts++;
	im->st.retry_delay_ms = d;
	im->st.next_attempt_ms = clock_wall_ms(im->clock) + d;
	return d;
}

/* A call succeeded: the plugin is up, the next failure retries soon again. */
static void im_backoff_reset(struct instance_manager *im)
{
	im->st.attempts = 0;
	im->st.retry_delay_ms = 0;
	im->st.next_attempt_ms = 0;
}

/* Formats a failed call into buf: "GetPluginInfo: DEADLINE_EXCEEDED: message". */
static void im_call_error(char *buf, size_t len, const char *what, int rc,
			  const struct csi_status *st)
{
	if (st->code != CSI_OK)
		snprintf(buf, len, "%s: %s%s%s", what, csi_code_name(st->code),
			 st->message[0] ? ": " : "", st->message);
	else
		snprintf(buf, len, "%s: %s", what, csid_strerror(rc));
}

/*
 * Runs one RPC through the client with the manager's deadline. Returns 0
 * and *resp, or -1 with buf describing the failure.
 */
static int im_call(struct instance_manager *im, struct csi_client *c, enum csi_rpc rpc,
		   const ProtobufCMessage *req, ProtobufCMessage **resp, char *buf, size_t len)
{
	const struct csi_rpc_info *info = csi_rpc_info(rpc);
	struct csi_status st;
	int rc;

	memset(&st, 0, sizeof(st));
	*resp = NULL;
	rc = c->call(c, rpc, req, resp, im->rpc_timeout, &st);
	if (rc == 0 && *resp == NULL)
		rc = CSID_EPROTO;
	if (rc == 0 && (*resp)->descriptor != info->response) {
		csi_msg_free(*resp);
		*resp = NULL;
		snprintf(buf, len, "%s: response of the wrong type", info->name);
		return -1;
	}
	if (rc < 0) {
		csi_msg_free(*resp);
		*resp = NULL;
		im_call_error(buf, len, info->name, rc, &st);
		return -1;
	}
	return 0;
}

static int im_segment_cmp(const void *a, const void *b)
{
	return strcmp(((const struct plugin_topology_segment *)a)->key,
		      ((const struct plugin_topology_segment *)b)->key);
}

static int im_fp_info(struct instance_manager *im, struct csi_client *c,
		      struct plugin_fingerprint *fp, char *buf, size_t len)
{
	Csi__V1__GetPluginInfoRequest req = CSI__V1__GET_PLUGIN_INFO_REQUEST__INIT;
	Csi__V1__GetPluginInfoResponse *resp;
	int rc = 0;

	if (im_call(im, c, CSI_RPC_GET_PLUGIN_INFO, &req.base, (ProtobufCMessage **)&resp, buf,
		    len) < 0)
		return -1;
	/* CSI: "The name MUST follow domain name notation ... 63 characters or less". */
	if (resp->name == NULL || resp->name[0] == '\0') {
		snprintf(buf, len, "GetPluginInfo: plugin returned an empty name");
		rc = -1;
	} else if (strlen(resp->name) >= sizeof(fp->plugin_name)) {
		snprintf(buf, len, "GetPluginInfo: plugin name longer than %zu bytes",
			 sizeof(fp->plugin_name) - 1);
		rc = -1;
	} else {
		snprintf(fp->plugin_name, sizeof(fp->plugin_name), "%s", resp->name);
		snprintf(fp->vendor_version, sizeof(fp->vendor_version), "%s",
			 resp->vendor_version ? resp->vendor_version : "");
	}
	csi_msg_free(&resp->base);
	return rc;
}

static int im_fp_plugin_caps(struct instance_manager *im, struct csi_client *c,
			     struct plugin_fingerprint *fp, char *buf, size_t len)
{
	Csi__V1__GetPluginCapabilitiesRequest req = CSI__V1__GET_PLUGIN_CAPABILITIES_REQUEST__INIT;
	Csi__V1__GetPluginCapabilitiesResponse *resp;

	if (im_call(im, c, CSI_RPC_GET_PLUGIN_CAPABILITIES, &req.base, (ProtobufCMessage **)&resp,
		    buf, len) < 0)
		return -1;
	for (size_t i = 0; i < resp->n_capabilities; i++) {
		const Csi__V1__PluginCapability *cap = resp->capabilities[i];
		int t;

		/* Unknown kinds and values come from newer plugins: ignore them. */
		if (cap == NULL)
			continue;
		if (cap->type_case == CSI__V1__PLUGIN_CAPABILITY__TYPE_SERVICE && cap->service) {
			t = (int)cap->service->type;
			if (t > 0 && t < 32)
				fp->plugin_caps |= 1u << t;
		} else if (cap->type_case == CSI__V1__PLUGIN_CAPABILITY__TYPE_VOLUME_EXPANSION &&
			   cap->volume_expansion) {
			t = (int)cap->volume_expansion->type;
			if (t > 0 && t < 32)
				fp->expansion_caps |= 1u << t;
		}
	}
	csi_msg_free(&resp->base);
	return 0;
}

static int im_fp_controller(struct instance_manager *im, struct csi_client *c,
			    struct plugin_fingerprint *fp, char *buf, size_t len)
{
	Csi__V1__ControllerGetCapabilitiesRequest req =
	    CSI__V1__CONTROLLER_GET_CAPABILITIES_REQUEST__INIT;
	Csi__V1__ControllerGetCapabilitiesResponse *resp;

	if (!(fp->plugin_caps &
	      (1u << CSI__V1__PLUGIN_CAPABILITY__SERVICE__TYPE__CONTROLLER_SERVICE))) {
		snprintf(buf, len,
			 "GetPluginCapabilities: registered as a controller but "
			 "the plugin does not advertise CONTROLLER_SERVICE");
		return -1;
	}
	if (im_call(im, c, CSI_RPC_CONTROLLER_GET_CAPABILITIES, &req.base,
		    (ProtobufCMessage **)&resp, buf, len) < 0)
		return -1;
	for (size_t i = 0; i < resp->n_capabilities; i++) {
		const Csi__V1__ControllerServiceCapability *cap = resp->capabilities[i];

		if (cap && cap->type_case == CSI__V1__CONTROLLER_SERVICE_CAPABILITY__TYPE_RPC &&
		    cap->rpc && (int)cap->rpc->type > 0 && (int)cap->rpc->type < 64)
			fp->controller_caps |= UINT64_C(1) << (int)cap->rpc->type;
	}
	csi_msg_free(&resp->base);
	return 0;
}

static int im_fp_topology(struct plugin_fingerprint *fp, const Csi__V1__Topology *topo, char *buf,
			  size_t len)
{
	if (topo == NULL)
		return 0;
	if (topo->n_segments > PLUGIN_TOPOLOGY_MAX) {
		snprintf(buf, len, "NodeGetInfo: %zu topology segments, more than %d",
			 topo->n_segments, PLUGIN_TOPOLOGY_MAX);
		return -1;
	}
	for (size_t i = 0; i < topo->n_segments; i++) {
		const Csi__V1__Topology__SegmentsEntry *s = topo->segments[i];

		if (s == NULL || s->key == NULL || s->key[0] == '\0' ||
		    strlen(s->key) >= PLUGIN_TOPOLOGY_KEY_MAX || s->value == NULL ||
		    strlen(s->value) >= PLUGIN_TOPOLOGY_VALUE_MAX) {
			snprintf(buf, len, "NodeGetInfo: invalid topology segment %zu", i);
			return -1;
		}
		snprintf(fp->topology[i].key, sizeof(fp->topology[i].key), "%s", s->key);
		snprintf(fp->topology[i].value, sizeof(fp->topology[i].value), "%s", s->value);
	}
	fp->ntopology = (int)topo->n_segments;
	qsort(fp->topology, (size_t)fp->ntopology, sizeof(fp->topology[0]), im_segment_cmp);
	return 0;
}

static int im_fp_node(struct instance_manager *im, struct csi_client *c,
		      struct plugin_fingerprint *fp, char *buf, size_t len)
{
	Csi__V1__NodeGetCapabilitiesRequest creq = CSI__V1__NODE_GET_CAPABILITIES_REQUEST__INIT;
	Csi__V1__NodeGetInfoRequest ireq = CSI__V1__NODE_GET_INFO_REQUEST__INIT;
	Csi__V1__NodeGetCapabilitiesResponse *cresp;
	Csi__V1__NodeGetInfoResponse *iresp;
	int rc = 0;

	if (im_call(im, c, CSI_RPC_NODE_GET_CAPABILITIES, &creq.base, (ProtobufCMessage **)&cresp,
		    buf, len) < 0)
		return -1;
	for (size_t i = 0; i < cresp->n_capabilities; i++) {
		const Csi__V1__NodeServiceCapability *cap = cresp->capabilities[i];

		if (cap && cap->type_case == CSI__V1__NODE_SERVICE_CAPABILITY__TYPE_RPC &&
		    cap->rpc && (int)cap->rpc->type > 0 && (int)cap->rpc->type < 64)
			fp->node_caps |= UINT64_C(1) << (int)cap->rpc->type;
	}
	csi_msg_free(&cresp->base);
	fp->stage_unstage =
	    (fp->node_caps &
	     (UINT64_C(1) << CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__STAGE_UNSTAGE_VOLUME)) !=
	    0;
	fp->node_expand =
	    (fp->node_caps &
	     (UINT64_C(1) << CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__EXPAND_VOLUME)) != 0;
	if (im_call(im, c, CSI_RPC_NODE_GET_INFO, &ireq.base, (ProtobufCMessage **)&iresp, buf,
		    len) < 0)
		return -1;
	/* CSI: node_id "This field is REQUIRED"; max_volumes_per_node "MUST NOT be negative". */
	if (iresp->node_id == NULL || iresp->node_id[0] == '\0') {
		snprintf(buf, len, "NodeGetInfo: plugin returned an empty node_id");
		rc = -1;
	} else if (strlen(iresp->node_id) >= sizeof(fp->node_id)) {
		snprintf(buf, len, "NodeGetInfo: node_id longer than %zu bytes",
			 sizeof(fp->node_id) - 1);
		rc = -1;
	} else if (iresp->max_volumes_per_node < 0) {
		snprintf(buf, len, "NodeGetInfo: negative max_volumes_per_node %lld",
			 (long long)iresp->max_volumes_per_node);
		rc = -1;
	} else {
		snprintf(fp->node_id, sizeof(fp->node_id), "%s", iresp->node_id);
		fp->max_volumes = iresp->max_volumes_per_node;
		rc = im_fp_topology(fp, iresp->accessible_topology, buf, len);
	}
	csi_msg_free(&iresp->base);
	return rc;
}

/* The whole fingerprint; -1 with buf set on the first failure. */
static int im_fingerprint(struct instance_manager *im, struct csi_client *c,
			  struct plugin_fingerprint *fp, char *buf, size_t len)
{
	memset(fp, 0, sizeof(*fp));
	if (im_fp_info(im, c, fp, buf, len) < 0 || im_fp_plugin_caps(im, c, fp, buf, len) < 0)
		return -1;
	if (im->st.type == REGISTRY_CONTROLLER)
		return im_fp_controller(im, c, fp, buf, len);
	return im_fp_node(im, c, fp, buf, len);
}

static int im_probe(struct instance_manager *im, struct csi_client *c, char *buf, size_t len)
{
	Csi__V1__ProbeRequest req = CSI__V1__PROBE_REQUEST__INIT;
	Csi__V1__ProbeResponse *resp;
	int rc = 0;

	if (im_call(im, c, CSI_RPC_PROBE, &req.base, (ProtobufCMessage **)&resp, buf, len) < 0)
		return -1;
	/* CSI: an unset ready field means the plugin is ready. */
	if (resp->ready != NULL && !resp->ready->value) {
		snprintf(buf, len, "Probe: plugin is not ready");
		rc = -1;
	}
	csi_msg_free(&resp->base);
	return rc;
}

/* Recomputes the health from the last results; with mu held. */
static void im_update_health(struct instance_manager *im)
{
	struct plugin_health *h = &im->st.health;
	bool healthy = im->st.fingerprinted && im->fp_ok && im->probe_ok;
	char desc[PLUGIN_HEALTH_DESC_MAX];

	if (healthy)
		snprintf(desc, sizeof(desc), "healthy");
	else if (!im->fp_ok && im->fp_err[0])
		snprintf(desc, sizeof(desc), "%s", im->fp_err);
	else if (!im->probe_ok && im->probe_err[0])
		snprintf(desc, sizeof(desc), "%s", im->probe_err);
	else
		snprintf(desc, sizeof(desc), "%s", h->description);
	if (healthy != h->healthy)
		h->changed_ms = clock_wall_ms(im->clock);
	h->healthy = healthy;
	memcpy(h->description, desc, sizeof(desc));
}

/* Connect step; called with mu held, returns with mu held. */
static void im_do_connect(struct instance_manager *im)
{
	char endpoint[REGISTRY_ENDPOINT_MAX];
	struct csi_client *client = NULL;
	struct im_conn *conn;
	struct err e;
	int rc;

	memcpy(endpoint, im->st.instance.endpoint, sizeof(endpoint));
	pthread_mutex_unlock(&im->mu);
	err_clear(&e);
	rc = im->connect(im->connect_ctx, endpoint, &client, &e);
	conn = rc == 0 ? calloc(1, sizeof(*conn)) : NULL;
	if (rc == 0 && conn == NULL)
		err_set(&e, CSID_ENOMEM, "out of memory");
	pthread_mutex_lock(&im->mu);
	if (conn == NULL || im->stop) {
		csi_client_free(client);
		free(conn);
		if (!im->stop) {
			snprintf(im->fp_err, sizeof(im->fp_err), "connect %s: %s", endpoint,
				 e.msg[0] ? e.msg : csid_strerror(rc));
			im->fp_ok = false;
			im->next_connect = clock_now_ms(im->clock) + im_backoff(im);
		}
		return;
	}
	atomic_init(&conn->refs, 1);
	conn->client = client;
	im->conn = conn;
	im->st.state = INSTANCE_MANAGER_FINGERPRINTING;
	im->next_connect = CLOCK_NEVER;
	im->next_fingerprint = clock_now_ms(im->clock);
}

/* Fingerprint step; called with mu held, returns with mu held. */
static void im_do_fingerprint(struct instance_manager *im)
{
	struct im_conn *conn = im_conn_get(im->conn);
	struct plugin_fingerprint *fp = malloc(sizeof(*fp));
	char buf[PLUGIN_HEALTH_DESC_MAX];
	int rc = -1;

	pthread_mutex_unlock(&im->mu);
	if (fp == NULL)
		snprintf(buf, sizeof(buf), "fingerprint: out of memory");
	else
		rc = im_fingerprint(im, conn->client, fp, buf, sizeof(buf));
	pthread_mutex_lock(&im->mu);
	im_conn_put(conn);
	if (!im->stop && rc == 0) {
		im->st.fingerprint = *fp;
		im->st.fingerprinted = true;
		im->st.state = INSTANCE_MANAGER_RUNNING;
		im->fp_ok = true;
		im->fp_err[0] = '\0';
		im_backoff_reset(im);
		im->next_fingerprint = clock_now_ms(im->clock) + im->fingerprint_interval;
		/* Probe right after a fingerprint, so health follows at once. */
		im->next_probe = clock_now_ms(im->clock);
	} else if (!im->stop) {
		im->fp_ok = false;
		snprintf(im->fp_err, sizeof(im->fp_err), "%s", buf);
		im->next_fingerprint = clock_now_ms(im->clock) + im_backoff(im);
	}
	free(fp);
}

/* Probe step; called with mu held, returns with mu held. */
static void im_do_probe(struct instance_manager *im)
{
	struct im_conn *conn = im_conn_get(im->conn);
	char buf[PLUGIN_HEALTH_DESC_MAX];
	int rc;

	pthread_mutex_unlock(&im->mu);
	rc = im_probe(im, conn->client, buf, sizeof(buf));
	pthread_mutex_lock(&im->mu);
	im_conn_put(conn);
	if (im->stop)
		return;
	im->probe_ok = rc == 0;
	im->st.last_probe_ms = clock_wall_ms(im->clock);
	if (rc < 0) {
		snprintf(im->probe_err, sizeof(im->probe_err), "%s", buf);
		im->next_probe = clock_now_ms(im->clock) + im_backoff(im);
	} else {
		im_backoff_reset(im);
		im->next_probe = clock_now_ms(im->clock) + im->probe_interval;
	}
}

static bool im_status_differs(const struct instance_manager_status *a,
			      const struct instance_manager_status *b)
{
	return a->state != b->state || a->fingerprinted != b->fingerprinted ||
	       a->attempts != b->attempts || a->health.healthy != b->health.healthy ||
	       strcmp(a->health.description, b->health.description) != 0 ||
	       memcmp(&a->fingerprint, &b->fingerprint, sizeof(a->fingerprint)) != 0;
}

int64_t instance_manager_step(struct instance_manager *im)
{
	struct instance_manager_status *old = malloc(2 * sizeof(*old));
	int64_t now, next = CLOCK_NEVER;
	bool changed = false;

	pthread_mutex_lock(&im->mu);
	if (im->stop || old == NULL) {
		/* Out of memory: try again a little later rather than spin. */
		next = im->stop ? CLOCK_NEVER
				: clock_now_ms(im->clock) + INSTANCE_MANAGER_RETRY_MIN_MS;
		pthread_mutex_unlock(&im->mu);
		free(old);
		return next;
	}
	im->stepping = true;
	old[0] = im->st;
	now = clock_now_ms(im->clock);
	if (im->conn == NULL && now >= im->next_connect)
		im_do_connect(im);
	now = clock_now_ms(im->clock);
	if (!im->stop && im->conn != NULL && now >= im->next_fingerprint)
		im_do_fingerprint(im);
	now = clock_now_ms(im->clock);
	if (!im->stop && im->conn != NULL && im->st.fingerprinted && now >= im->next_probe)
		im_do_probe(im);
	if (!im->stop) {
		im_update_health(im);
		next = im->conn == NULL ? im->next_connect : im->next_fingerprint;
		if (im->st.fingerprinted && im->next_probe < next)
			next = im->next_probe;
		changed = im_status_differs(&old[0], &im->st);
		old[1] = im->st;
	}
	im->stepping = false;
	pthread_cond_broadcast(&im->cond);
	pthread_mutex_unlock(&im->mu);
	if (changed && im->on_change != NULL)
		im->on_change(im->on_change_ctx, im, &old[0], &old[1]);
	free(old);
	return next;
}

static void *im_thread(void *arg)
{
	struct instance_manager *im = arg;
	int64_t next;

	for (;;) {
		next = instance_manager_step(im);
		pthread_mutex_lock(&im->mu);
		if (!im->stop)
			clock_wait(im->clock, &im->cond, &im->mu, next);
		if (im->stop) {
			im->thread_exited = true;
			pthread_cond_broadcast(&im->cond);
			pthread_mutex_unlock(&im->mu);
			return NULL;
		}
		pthread_mutex_unlock(&im->mu);
	}
}

int instance_manager_start(struct instance_manager *im, struct err *e)
{
	int rc = 0;

	pthread_mutex_lock(&im->mu);
	if (!im->thread_started && !im->stop) {
		if (pthread_create(&im->thread, NULL, im_thread, im) != 0)
			rc = err_set(e, CSID_ENOMEM, "instance manager: cannot start a thread");
		else
			im->thread_started = true;
	}
	pthread_mutex_unlock(&im->mu);
	return rc;
}

void instance_manager_stop(struct instance_manager *im)
{
	pthread_mutex_lock(&im->mu);
	im->stop = true;
	im->st.state = INSTANCE_MANAGER_STOPPED;
	im->st.health.healthy = false;
	snprintf(im->st.health.description, sizeof(im->st.health.description), "stopped");
	pthread_cond_broadcast(&im->cond);
	pthread_mutex_unlock(&im->mu);
}

bool instance_manager_done(struct instance_manager *im)
{
	bool done;

	pthread_mutex_lock(&im->mu);
	done = im->stop && !im->stepping && (!im->thread_started || im->thread_exited);
	pthread_mutex_unlock(&im->mu);
	return done;
}

void instance_manager_join(struct instance_manager *im)
{
	bool join;

	instance_manager_stop(im);
	pthread_mutex_lock(&im->mu);
	join = im->thread_started && !im->joined;
	im->joined = true;
	pthread_mutex_unlock(&im->mu);
	if (join)
		pthread_join(im->thread, NULL);
}

void instance_manager_free(struct instance_manager *im)
{
	if (im == NULL)
		return;
	instance_manager_join(im);
	im_conn_put(im->conn);
	pthread_cond_destroy(&im->cond);
	pthread_mutex_destroy(&im->mu);
	free(im);
}

void instance_manager_status(struct instance_manager *im, struct instance_manager_status *out)
{
	pthread_mutex_lock(&im->mu);
	*out = im->st;
	pthread_mutex_unlock(&im->mu);
}

int instance_manager_ref(struct instance_manager *im, struct plugin_ref *out, struct err *e)
{
	int rc = 0;

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&im->mu);
	if (im->stop || im->conn == NULL || !im->st.fingerprinted) {
		rc = err_set(e, CSID_EUNAVAIL, "plugin %s/%s instance %s is %s: %s",
			     registry_type_name(im->st.type), im->st.name,
			     im->st.instance.instance_id, instance_manager_state_name(im->st.state),
			     im->st.health.description);
	} else {
		struct im_conn *conn = im_conn_get(im->conn);

		out->conn_ = conn;
		out->client = conn->client;
		out->type = im->st.type;
		memcpy(out->name, im->st.name, sizeof(out->name));
		out->instance = im->st.instance;
		out->fingerprint = im->st.fingerprint;
		out->health = im->st.health;
	}
	pthread_mutex_unlock(&im->mu);
	return rc;
}

void plugin_ref_release(struct plugin_ref *ref)
{
	if (ref == NULL)
		return;
	im_conn_put(ref->conn_);
	/* It holds nothing now (the copies of the fingerprint are left: 14 KB not cleared). */
	ref->conn_ = NULL;
	ref->client = NULL;
}
