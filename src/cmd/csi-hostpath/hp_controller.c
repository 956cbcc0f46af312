/*
 * Controller service of csi-hostpath: volumes. A volume is a row in the
 * store plus <data>/volumes/<id> (a directory, or a sparse file for a
 * block volume). Rules implemented here, from the CSI spec:
 *  - CreateVolume is idempotent by name: the same name with a compatible
 *    request (access type, content source, parameters, capacity within the
 *    new range) answers the existing volume; otherwise ALREADY_EXISTS.
 *  - Capacity: required_bytes is the size given (default 1 GiB, capped by
 *    limit_bytes); limit < required or a size above --capacity is
 *    OUT_OF_RANGE; not enough free capacity left is RESOURCE_EXHAUSTED.
 *  - ControllerPublishVolume only accepts known node IDs: the plugin's own
 *    --node-id and every node ID registered by a node or monolith
 *    csi-hostpath sharing this data dir (others: NOT_FOUND). A volume
 *    published elsewhere under a single-node access mode, or with a second
 *    writer under MULTI_NODE_SINGLE_WRITER, is FAILED_PRECONDITION naming
 *    the node. Unpublish of anything unknown is OK; no node_id means all.
 *  - Expansion: block volumes grow their file here and need nothing on the
 *    node; mount volumes report node_expansion_required, as a real file
 *    system would have to be grown where it is mounted.
 *  - ControllerModifyVolume accepts mutable parameters "iops" (1..1000000)
 *    and "tier" (standard|premium); anything else is INVALID_ARGUMENT and
 *    nothing changes.
 */
#include "hp_controller.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <sys/stat.h>

#include "hp_fs.h"
#include "hp_store.h"
#include "hp_valid.h"
#include "util/log.h"

#define HP_OOM(msg) hp_fail(msg, CSI_RESOURCE_EXHAUSTED, "out of memory")

int hp_ctl_store_fail(const struct err *e, char *msg)
{
	return hp_fail(msg, e->code == CSID_EABORTED ? CSI_ABORTED : CSI_INTERNAL, "%s", e->msg);
}

void hp_ctl_new_id(const char *prefix, char *buf, size_t len)
{
	unsigned long long r;

	if (getrandom(&r, sizeof(r), 0) != sizeof(r)) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		r = hp_fnv(HP_FNV_INIT, &ts, sizeof(ts));
	}
	snprintf(buf, len, "%s-%016llx", prefix, r);
}

int hp_ctl_get_volume_row(struct hp_plugin *p, const char *id, struct hp_vol *v, char *msg)
{
	struct err e;
	int rc = hp_store_vol_get(p->store, id, v, &e);

	if (rc == CSID_ENOTFOUND)
		return hp_fail(msg, CSI_NOT_FOUND, "volume %s not found", id);
	if (rc)
		return hp_ctl_store_fail(&e, msg);
	return 0;
}

int hp_ctl_range(const Csi__V1__CapacityRange *cr, int64_t *req, int64_t *lim, char *msg)
{
	*req = cr ? cr->required_bytes : 0;
	*lim = cr ? cr->limit_bytes : 0;
	if (*req < 0 || *lim < 0)
		return hp_fail(msg, CSI_INVALID_ARGUMENT, "capacity_range must not be negative");
	if (*lim && *req > *lim)
		return hp_fail(msg, CSI_OUT_OF_RANGE,
			       "capacity_range limit_bytes %lld is below required_bytes %lld",
			       (long long)*lim, (long long)*req);
	return 0;
}

void hp_ctl_params_hash(void *const *entries, size_t n, char *buf, size_t len)
{
	unsigned long long h = 0;

	for (size_t i = 0; i < n; i++) {
		const struct hp_kv *kv = entries[i];
		unsigned long long x = hp_fnv(HP_FNV_INIT, kv->key, strlen(kv->key) + 1);

		x = hp_fnv(x, kv->value ? kv->value : "", kv->value ? strlen(kv->value) : 0);
		h ^= x;
	}
	snprintf(buf, len, "%zu:%016llx", n, h);
}

/*
 * Applies mutable parameters to cur ("iops=N\ntier=T\n"), writing out.
 * Every key and value is checked before anything is written.
 */
static int hp_ctl_mutable(const char *cur, void *const *entries, size_t n, char *out, size_t len,
			  char *msg)
{
	long long iops = 0;
	char tier[16] = "";
	const char *s;

	if ((s = strstr(cur, "iops=")))
		iops = strtoll(s + 5, NULL, 10);
	if ((s = strstr(cur, "tier=")))
		sscanf(s + 5, "%15[a-z]", tier);
	for (size_t i = 0; i < n; i++) {
		const struct hp_kv *kv = entries[i];
		const char *v = kv->value ? kv->value : "";
		char *end;

		if (strcmp(kv->key, "iops") == 0) {
			long long x = strtoll(v, &end, 10);

			if (!*v || *end || x < 1 || x > 1000000)
				return hp_fail(msg, CSI_INVALID_ARGUMENT,
					       "mutable parameter iops must be 1..1000000");
			iops = x;
		} else if (strcmp(kv->key, "tier") == 0) {
			if (strcmp(v, "standard") != 0 && strcmp(v, "premium") != 0)
				return hp_fail(
				    msg, CSI_INVALID_ARGUMENT,
				    "mutable parameter tier must be standard or premium");
			snprintf(tier, sizeof(tier), "%s", v);
		} else {
			char q[64];

			snprintf(q, sizeof(q), "%s", kv->key);
			return hp_fail(msg, CSI_INVALID_ARGUMENT,
				       "unknown mutable parameter (accepted: iops, tier): %s", q);
		}
	}
	out[0] = '\0';
	if (iops)
		snprintf(out, len, "iops=%lld\n", iops);
	if (tier[0])
		snprintf(out + strlen(out), len - strlen(out), "tier=%s\n", tier);
	return 0;
}

static int hp_ctl_nodes_add(void *ctx, const char *node)
{
	struct hp_ctl_nodes *ns = ctx;

	if (ns->n >= 64 || strcmp(node, ns->own) == 0)
		return 0;
	ns->ids[ns->n] = arena_strdup(ns->a, node);
	if (!ns->ids[ns->n])
		return CSID_ENOMEM;
	ns->n++;
	return 0;
}

int hp_ctl_nodes(struct hp_plugin *p, struct arena *a, struct hp_ctl_nodes *ns, char *msg)
{
	struct err e;

	ns->a = a;
	ns->own = p->node_id;
	ns->n = 1;
	ns->ids = arena_alloc(a, 65 * sizeof(*ns->ids));
	if (!ns->ids)
		return HP_OOM(msg);
	ns->ids[0] = p->node_id;
	if (hp_store_node_list(p->store, hp_ctl_nodes_add, ns, &e) != 0)
		return hp_ctl_store_fail(&e, msg);
	return 0;
}

static bool hp_ctl_node_known(struct hp_plugin *p, const char *node)
{
	bool known = false;

	if (strcmp(node, p->node_id) == 0)
		return true;
	hp_store_node_known(p->store, node, &known, NULL);
	return known;
}

Csi__V1__Volume *hp_ctl_volume(struct arena *a, const struct hp_vol *v,
			       const struct hp_ctl_nodes *ns)
{
	Csi__V1__Volume *m = arena_alloc(a, sizeof(*m));

	if (!m)
		return NULL;
	csi__v1__volume__init(m);
	m->capacity_bytes = v->capacity;
	m->volume_id = arena_strdup(a, v->id);
	if (v->source[0]) {
		Csi__V1__VolumeContentSource *cs = arena_alloc(a, sizeof(*cs));
		bool snap = strncmp(v->source, "snapshot:", 9) == 0;
		const char *id = strchr(v->source, ':') + 1;

		if (!cs)
			return NULL;
		csi__v1__volume_content_source__init(cs);
		if (snap) {
			cs->type_case = CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_SNAPSHOT;
			cs->snapshot = arena_alloc(a, sizeof(*cs->snapshot));
			if (!cs->snapshot)
				return NULL;
			csi__v1__volume_content_source__snapshot_source__init(cs->snapshot);
			cs->snapshot->snapshot_id = arena_strdup(a, id);
		} else {
			cs->type_case = CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_VOLUME;
			cs->volume = arena_alloc(a, sizeof(*cs->volume));
			if (!cs->volume)
				return NULL;
			csi__v1__volume_content_source__volume_source__init(cs->volume);
			cs->volume->volume_id = arena_strdup(a, id);
		}
		m->content_source = cs;
	}
	m->accessible_topology = arena_alloc(a, ns->n * sizeof(*m->accessible_topology));
	if (!m->accessible_topology || !m->volume_id)
		return NULL;
	for (size_t i = 0; i < ns->n; i++) {
		m->accessible_topology[i] = hp_topology(a, ns->ids[i]);
		if (!m->accessible_topology[i])
			return NULL;
	}
	m->n_accessible_topology = ns->n;
	return m;
}

/* The argument checks of a content source: one kind set, with a valid ID. */
static int hp_ctl_source_valid(const Csi__V1__VolumeContentSource *cs, char *msg)
{
	if (!cs)
		return 0;
	if (cs->type_case == CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_SNAPSHOT && cs->snapshot)
		return hp_valid_id(cs->snapshot->snapshot_id, "source snapshot_id", msg);
	if (cs->type_case == CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_VOLUME && cs->volume)
		return hp_valid_id(cs->volume->volume_id, "source volume_id", msg);
	return hp_fail(msg, CSI_INVALID_ARGUMENT,
		       "volume_content_source has no snapshot or volume");
}

/*
 * Looks up a content source checked by hp_ctl_source_valid; fills source
 * ("kind:id"), its path, size and type. NOT_FOUND when it does not exist.
 */
static int hp_ctl_source(struct hp_plugin *p, const Csi__V1__VolumeContentSource *cs, char *source,
			 size_t slen, char *path, size_t plen, int64_t *size, bool *block,
			 char *msg)
{
	struct hp_snap s;
	struct hp_vol v;
	struct err e;
	int rc;

	source[0] = '\0';
	if (!cs)
		return 0;
	if (cs->type_case == CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_SNAPSHOT) {
		snprintf(source, slen, "snapshot:%s", cs->snapshot->snapshot_id);
		rc = hp_store_snap_get(p->store, cs->snapshot->snapshot_id, &s, &e);
		if (rc == CSID_ENOTFOUND)
			return hp_fail(msg, CSI_NOT_FOUND, "source snapshot %s not found",
				       cs->snapshot->snapshot_id);
		if (rc)
			return hp_ctl_store_fail(&e, msg);
		hp_snapshot_path(p, s.id, path, plen);
		*size = s.size;
		*block = s.block;
		return 0;
	}
	snprintf(source, slen, "volume:%s", cs->volume->volume_id);
	rc = hp_store_vol_get(p->store, cs->volume->volume_id, &v, &e);
	if (rc == CSID_ENOTFOUND)
		return hp_fail(msg, CSI_NOT_FOUND, "source volume %s not found",
			       cs->volume->volume_id);
	if (rc)
		return hp_ctl_store_fail(&e, msg);
	hp_volume_path(p, v.id, path, plen);
	*size = v.capacity;
	*block = v.block;
	return 0;
}

static int hp_ctl_create_reply(struct hp_plugin *p, const struct hp_vol *v, ProtobufCMessage **resp,
			       struct arena *a, char *msg)
{
	Csi__V1__CreateVolumeResponse *r = arena_alloc(a, sizeof(*r));
	struct hp_ctl_nodes ns;
	int rc;

	if (!r)
		return HP_OOM(msg);
	rc = hp_ctl_nodes(p, a, &ns, msg);
	if (rc)
		return rc;
	csi__v1__create_volume_response__init(r);
	r->volume = hp_ctl_volume(a, v, &ns);
	if (!r->volume)
		return HP_OOM(msg);
	*resp = &r->base;
	return CSI_OK;
}

/* Whether the topology requirement can be met by one of the known nodes. */
static int hp_ctl_reachable(struct hp_plugin *p, const Csi__V1__TopologyRequirement *tr,
			    struct arena *a, char *msg)
{
	struct hp_ctl_nodes ns;
	int rc;

	if (!tr || tr->n_requisite == 0)
		return 0;
	rc = hp_ctl_nodes(p, a, &ns, msg);
	if (rc)
		return rc;
	for (size_t i = 0; i < tr->n_requisite; i++)
		for (size_t k = 0; k < ns.n; k++)
			if (hp_topology_matches(tr->requisite[i], ns.ids[k]))
				return 0;
	return hp_fail(msg, CSI_RESOURCE_EXHAUSTED,
		       "no requisite topology is served by this plugin (key %s)", HP_TOPOLOGY_KEY);
}

/* Size of a new volume from the range and the source size; sets *size. */
static int hp_ctl_size(struct hp_plugin *p, int64_t req, int64_t lim, int64_t src, int64_t *size,
		       char *msg)
{
	int64_t s = req > src ? req : src;

	if (s == 0)
		s = lim && lim < HP_DEFAULT_VOLUME_SIZE ? lim : HP_DEFAULT_VOLUME_SIZE;
	if (lim && s > lim)
		return hp_fail(msg, CSI_OUT_OF_RANGE,
			       "content source of %lld bytes exceeds limit_bytes", (long long)src);
	if (s > p->capacity)
		return hp_fail(msg, CSI_OUT_OF_RANGE, "%lld bytes exceed the plugin's capacity",
			       (long long)s);
	*size = s;
	return 0;
}

HP_CTL_HANDLER(hp_ctl_create_volume)
{
	const Csi__V1__CreateVolumeRequest *r = req;
	struct hp_vol v, old;
	char src_path[HP_PATH_MAX + 64], path[HP_PATH_MAX + 64];
	int64_t rq, lim, src_size = 0, used;
	bool block, src_block = false;
	struct err e;
	int rc;

	memset(&v, 0, sizeof(v));
	if ((rc = hp_valid_name(r->name, "name", msg)) ||
	    (rc = hp_valid_caps(r->volume_capabilities, r->n_volume_capabilities, &block, msg)) ||
	    (rc = hp_valid_map((void *const *)r->parameters, r->n_parameters, "parameters", msg)) ||
	    (rc = hp_valid_map((void *const *)r->secrets, r->n_secrets, "secrets", msg)) ||
	    (rc = hp_valid_map((void *const *)r->mutable_parameters, r->n_mutable_parameters,
			       "mutable_parameters", msg)) ||
	    (rc = hp_ctl_source_valid(r->volume_content_source, msg)) ||
	    (rc = hp_ctl_mutable("", (void *const *)r->mutable_parameters, r->n_mutable_parameters,
				 v.mut, sizeof(v.mut), msg)) ||
	    (rc = hp_ctl_range(r->capacity_range, &rq, &lim, msg)))
		return rc;
	hp_ctl_params_hash((void *const *)r->parameters, r->n_parameters, v.params,
			   sizeof(v.params));
	if (r->volume_content_source) {
		const Csi__V1__VolumeContentSource *cs = r->volume_content_source;
		bool snap = cs->type_case == CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_SNAPSHOT;

		snprintf(v.source, sizeof(v.source), "%s:%s", snap ? "snapshot" : "volume",
			 snap ? cs->snapshot->snapshot_id : cs->volume->volume_id);
	}
	rc = hp_store_vol_by_name(p->store, r->name, &old, &e);
	if (rc == 0) {
		if (old.block != block || strcmp(old.source, v.source) != 0 ||
		    strcmp(old.params, v.params) != 0)
			return hp_fail(msg, CSI_ALREADY_EXISTS,
				       "volume %s exists with another access type, source or"
				       " parameters",
				       old.id);
		if (old.capacity < rq || (lim && old.capacity > lim))
			return hp_fail(msg, CSI_ALREADY_EXISTS,
				       "volume %s exists with capacity %lld outside the range",
				       old.id, (long long)old.capacity);
		return hp_ctl_create_reply(p, &old, resp, a, msg);
	}
	if (rc != CSID_ENOTFOUND)
		return hp_ctl_store_fail(&e, msg);
	rc = hp_ctl_source(p, r->volume_content_source, v.source, sizeof(v.source), src_path,
			   sizeof(src_path), &src_size, &src_block, msg);
	if (rc)
		return rc;
	if (v.source[0] && src_block != block)
		return hp_fail(msg, CSI_INVALID_ARGUMENT,
			       "content source is a %s volume; the request asks for %s",
			       src_block ? "block" : "mount", block ? "block" : "mount");
	if ((rc = hp_ctl_size(p, rq, lim, src_size, &v.capacity, msg)) ||
	    (rc = hp_ctl_reachable(p, r->accessibility_requirements, a, msg)))
		return rc;
	if (hp_store_used(p->store, &used, &e) != 0)
		return hp_ctl_store_fail(&e, msg);
	if (used + v.capacity > p->capacity)
		return hp_fail(msg, CSI_RESOURCE_EXHAUSTED,
			       "insufficient capacity: %lld of %lld bytes free",
			       (long long)(p->capacity - used), (long long)p->capacity);
	snprintf(v.name, sizeof(v.name), "%s", r->name);
	v.block = block;
	do {
		hp_ctl_new_id("vol", v.id, sizeof(v.id));
		rc = hp_store_vol_get(p->store, v.id, &old, &e);
	} while (rc == 0);
	hp_volume_path(p, v.id, path, sizeof(path));
	if (v.source[0])
		rc = hp_fs_copy(src_path, path, block ? v.capacity : 0, &e);
	else
		rc = hp_fs_create(path, block, v.capacity, &e);
	if (rc)
		return hp_fail(msg, rc == CSID_EEXHAUSTED ? CSI_RESOURCE_EXHAUSTED : CSI_INTERNAL,
			       "%s", e.msg);
	if (hp_store_vol_insert(p->store, &v, &e) != 0) {
		hp_fs_remove(path, NULL);
		return hp_ctl_store_fail(&e, msg);
	}
	log_info("msg=\"volume created\" volume=%s capacity=%lld block=%d source=%s", v.id,
		 (long long)v.capacity, v.block, v.source[0] ? v.source : "none");
	return hp_ctl_create_reply(p, &v, resp, a, msg);
}

static int hp_ctl_first_pub(void *ctx, const struct hp_pub *pub)
{
	snprintf(ctx, HP_NODE_ID_MAX + 1, "%s", pub->node_id);
	return 1;
}

HP_CTL_HANDLER(hp_ctl_delete_volume)
{
	const Csi__V1__DeleteVolumeRequest *r = req;
	char path[HP_PATH_MAX + 64], node[HP_NODE_ID_MAX + 1] = "";
	struct hp_vol v;
	int64_t uses;
	struct err e;
	int rc;

	rc = hp_valid_id(r->volume_id, "volume_id", msg);
	if (rc)
		return rc;
	rc = hp_store_vol_get(p->store, r->volume_id, &v, &e);
	if (rc == CSID_ENOTFOUND)
		return CSI_OK; /* "MUST reply 0 OK" for a volume that does not exist */
	if (rc)
		return hp_ctl_store_fail(&e, msg);
	rc = hp_store_pub_list(p->store, v.id, NULL, hp_ctl_first_pub, node, &e);
	if (rc < 0)
		return hp_ctl_store_fail(&e, msg);
	if (node[0])
		return hp_fail(msg, CSI_FAILED_PRECONDITION, "volume %s is published to node %s",
			       v.id, node);
	if (hp_store_node_uses(p->store, v.id, &uses, &e) != 0)
		return hp_ctl_store_fail(&e, msg);
	if (uses)
		return hp_fail(msg, CSI_FAILED_PRECONDITION,
			       "volume %s is still staged or published on a node", v.id);
	if (hp_store_vol_delete(p->store, v.id, &e) != 0)
		return hp_ctl_store_fail(&e, msg);
	hp_volume_path(p, v.id, path, sizeof(path));
	if (hp_fs_remove(path, &e) != 0)
		return hp_fail(msg, CSI_INTERNAL, "%s", e.msg);
	log_info("msg=\"volume deleted\" volume=%s", v.id);
	return CSI_OK;
}

/* Access mode recorded in a capability key ("mount:<mode>:..." or "block:<mode>"). */
static int hp_ctl_key_mode(const char *key)
{
	const char *c = strchr(key, ':');

	return c ? atoi(c + 1) : 0;
}

struct hp_ctl_conflict {
	const char *node; /* the node being published to */
	int mode;
	bool readonly;
	char other[HP_NODE_ID_MAX + 1];
};

static int hp_ctl_conflict_check(void *ctx, const struct hp_pub *pub)
{
	struct hp_ctl_conflict *c = ctx;
	int other_mode = hp_ctl_key_mode(pub->cap);

	if (strcmp(pub->node_id, c->node) == 0)
		return 0;
	if (!hp_mode_multi_node(c->mode) || !hp_mode_multi_node(other_mode) ||
	    (c->mode == CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_SINGLE_WRITER &&
	     !c->readonly && !pub->readonly)) {
		snprintf(c->other, sizeof(c->other), "%s", pub->node_id);
		return 1;
	}
	return 0;
}

static int hp_ctl_publish_reply(bool readonly, ProtobufCMessage **resp, struct arena *a, char *msg)
{
	Csi__V1__ControllerPublishVolumeResponse *r = arena_alloc(a, sizeof(*r));

	if (!r)
		return HP_OOM(msg);
	csi__v1__controller_publish_volume_response__init(r);
	if (readonly) {
		r->publish_context = arena_alloc(a, sizeof(*r->publish_context));
		if (!r->publish_context)
			return HP_OOM(msg);
		r->publish_context[0] = hp_map_entry(
		    a,
		    &csi__v1__controller_publish_volume_response__publish_context_entry__descriptor,
		    HP_CTX_READONLY, "true");
		if (!r->publish_context[0])
			return HP_OOM(msg);
		r->n_publish_context = 1;
	}
	*resp = &r->base;
	return CSI_OK;
}

HP_CTL_HANDLER(hp_ctl_publish)
{
	const Csi__V1__ControllerPublishVolumeRequest *r = req;
	struct hp_ctl_conflict c = {0};
	struct hp_pub pub, old;
	struct hp_vol v;
	int64_t count;
	bool block = false;
	struct err e;
	int rc;

	if ((rc = hp_valid_id(r->volume_id, "volume_id", msg)) ||
	    (rc = hp_valid_node_id(r->node_id, "node_id", msg)) ||
	    (rc = hp_valid_cap(r->volume_capability, "volume_capability", &block, msg)) ||
	    (rc = hp_valid_map((void *const *)r->secrets, r->n_secrets, "secrets", msg)) ||
	    (rc = hp_valid_map((void *const *)r->volume_context, r->n_volume_context,
			       "volume_context", msg)))
		return rc;
	if ((rc = hp_ctl_get_volume_row(p, r->volume_id, &v, msg)))
		return rc;
	if (!hp_ctl_node_known(p, r->node_id))
		return hp_fail(msg, CSI_NOT_FOUND, "node %s is not known to this plugin",
			       r->node_id);
	if (block != v.block)
		return hp_fail(msg, CSI_INVALID_ARGUMENT, "volume %s is a %s volume", v.id,
			       v.block ? "block" : "mount");
	memset(&pub, 0, sizeof(pub));
	snprintf(pub.volume_id, sizeof(pub.volume_id), "%s", v.id);
	snprintf(pub.node_id, sizeof(pub.node_id), "%s", r->node_id);
	pub.readonly = r->readonly;
	hp_cap_key(r->volume_capability, pub.cap, sizeof(pub.cap));
	rc = hp_store_pub_get(p->store, v.id, r->node_id, &old, &e);
	if (rc == 0) {
		if (old.readonly != pub.readonly || strcmp(old.cap, pub.cap) != 0)
			return hp_fail(msg, CSI_ALREADY_EXISTS,
				       "volume %s is published to node %s with other arguments",
				       v.id, r->node_id);
		return hp_ctl_publish_reply(pub.readonly, resp, a, msg);
	}
	if (rc != CSID_ENOTFOUND)
		return hp_ctl_store_fail(&e, msg);
	c.node = r->node_id;
	c.mode = (int)r->volume_capability->access_mode->mode;
	c.readonly = r->readonly;
	rc = hp_store_pub_list(p->store, v.id, NULL, hp_ctl_conflict_check, &c, &e);
	if (rc < 0)
		return hp_ctl_store_fail(&e, msg);
	if (c.other[0])
		return hp_fail(msg, CSI_FAILED_PRECONDITION,
			       "volume %s is published to node %s and the access mode does not"
			       " allow another node",
			       v.id, c.other);
	if (p->max_volumes_per_node) {
		if (hp_store_pub_count(p->store, r->node_id, &count, &e) != 0)
			return hp_ctl_store_fail(&e, msg);
		if (count >= p->max_volumes_per_node)
			return hp_fail(msg, CSI_RESOURCE_EXHAUSTED,
				       "node %s has its maximum of %lld volumes", r->node_id,
				       (long long)p->max_volumes_per_node);
	}
	if (hp_store_pub_put(p->store, &pub, &e) != 0)
		return hp_ctl_store_fail(&e, msg);
	log_info("msg=\"volume published\" volume=%s readonly=%d", v.id, pub.readonly);
	return hp_ctl_publish_reply(pub.readonly, resp, a, msg);
}

HP_CTL_HANDLER(hp_ctl_unpublish)
{
	const Csi__V1__ControllerUnpublishVolumeRequest *r = req;
	struct err e;
	int rc;

	rc = hp_valid_id(r->volume_id, "volume_id", msg);
	if (rc)
		return rc;
	if (r->node_id && *r->node_id && (rc = hp_valid_node_id(r->node_id, "node_id", msg)))
		return rc;
	if (hp_store_pub_delete(p->store, r->volume_id,
				r->node_id && *r->node_id ? r->node_id : NULL, &e) != 0)
		return hp_ctl_store_fail(&e, msg);
	return CSI_OK;
}

HP_CTL_HANDLER(hp_ctl_validate)
{
	const Csi__V1__ValidateVolumeCapabilitiesRequest *r = req;
	Csi__V1__ValidateVolumeCapabilitiesResponse *out = arena_alloc(a, sizeof(*out));
	Csi__V1__ValidateVolumeCapabilitiesResponse__Confirmed *conf;
	char hash[40], mut[256];
	struct hp_vol v;
	bool block = false;
	int rc;

	if (!out)
		return HP_OOM(msg);
	csi__v1__validate_volume_capabilities_response__init(out);
	if ((rc = hp_valid_id(r->volume_id, "volume_id", msg)))
		return rc;
	if (r->n_volume_capabilities == 0)
		return hp_fail(msg, CSI_INVALID_ARGUMENT, "volume_capabilities is required");
	for (size_t i = 0; i < r->n_volume_capabilities; i++)
		if ((rc =
			 hp_valid_cap(r->volume_capabilities[i], "volume capability", &block, msg)))
			return rc;
	if ((rc = hp_valid_map((void *const *)r->parameters, r->n_parameters, "parameters", msg)) ||
	    (rc = hp_valid_map((void *const *)r->mutable_parameters, r->n_mutable_parameters,
			       "mutable_parameters", msg)))
		return rc;
	if ((rc = hp_ctl_get_volume_row(p, r->volume_id, &v, msg)))
		return rc;
	*resp = &out->base;
	for (size_t i = 0; i < r->n_volume_capabilities; i++) {
		hp_valid_cap(r->volume_capabilities[i], "volume capability", &block, msg);
		if (block != v.block) {
			out->message = arena_printf(a, "volume %s is a %s volume", v.id,
						    v.block ? "block" : "mount");
			return CSI_OK;
		}
	}
	hp_ctl_params_hash((void *const *)r->parameters, r->n_parameters, hash, sizeof(hash));
	if (r->n_parameters && strcmp(hash, v.params) != 0) {
		out->message = "parameters differ from the volume's";
		return CSI_OK;
	}
	if (hp_ctl_mutable(v.mut, (void *const *)r->mutable_parameters, r->n_mutable_parameters,
			   mut, sizeof(mut), msg) != 0) {
		out->message = arena_strdup(a, msg);
		msg[0] = '\0';
		return CSI_OK;
	}
	/* Echo what was confirmed, copied out of the borrowed request. */
	conf = arena_alloc(a, sizeof(*conf));
	if (!conf)
		return HP_OOM(msg);
	csi__v1__validate_volume_capabilities_response__confirmed__init(conf);
	conf->volume_capabilities =
	    arena_alloc(a, r->n_volume_capabilities * sizeof(*conf->volume_capabilities));
	if (!conf->volume_capabilities)
		return HP_OOM(msg);
	for (size_t i = 0; i < r->n_volume_capabilities; i++) {
		conf->volume_capabilities[i] = hp_dup(a, &r->volume_capabilities[i]->base);
		if (!conf->volume_capabilities[i])
			return HP_OOM(msg);
	}
	conf->n_volume_capabilities = r->n_volume_capabilities;
	out->confirmed = conf;
	return CSI_OK;
}

HP_CTL_HANDLER(hp_ctl_expand)
{
	const Csi__V1__ControllerExpandVolumeRequest *r = req;
	Csi__V1__ControllerExpandVolumeResponse *out = arena_alloc(a, sizeof(*out));
	char path[HP_PATH_MAX + 64];
	int64_t rq, lim, want, used;
	struct hp_vol v;
	bool block = false;
	struct err e;
	int rc;

	if (!out)
		return HP_OOM(msg);
	if ((rc = hp_valid_id(r->volume_id, "volume_id", msg)))
		return rc;
	if (!r->capacity_range)
		return hp_fail(msg, CSI_INVALID_ARGUMENT, "capacity_range is required");
	if ((r->volume_capability &&
	     (rc = hp_valid_cap(r->volume_capability, "volume_capability", &block, msg))) ||
	    (rc = hp_valid_map((void *const *)r->secrets, r->n_secrets, "secrets", msg)))
		return rc;
	if (!r->capacity_range->required_bytes && !r->capacity_range->limit_bytes)
		return hp_fail(msg, CSI_INVALID_ARGUMENT,
			       "capacity_range needs required_bytes or limit_bytes");
	if ((rc = hp_ctl_range(r->capacity_range, &rq, &lim, msg)))
		return rc;
	want = rq ? rq : lim;
	if ((rc = hp_ctl_get_volume_row(p, r->volume_id, &v, msg)))
		return rc;
	if (r->volume_capability && block != v.block)
		return hp_fail(msg, CSI_INVALID_ARGUMENT, "volume %s is a %s volume", v.id,
			       v.block ? "block" : "mount");
	if (want > p->capacity)
		return hp_fail(msg, CSI_OUT_OF_RANGE, "%lld bytes exceed the plugin's capacity",
			       (long long)want);
	if (want > v.capacity) {
		if (hp_store_used(p->store, &used, &e) != 0)
			return hp_ctl_store_fail(&e, msg);
		if (used + want - v.capacity > p->capacity)
			return hp_fail(msg, CSI_OUT_OF_RANGE,
				       "insufficient capacity to grow to %lld", (long long)want);
		if (v.block) {
			hp_volume_path(p, v.id, path, sizeof(path));
			if (hp_fs_grow(path, want, &e) != 0)
				return hp_fail(msg, CSI_INTERNAL, "%s", e.msg);
		}
		v.capacity = want;
		if (hp_store_vol_update(p->store, &v, &e) != 0)
			return hp_ctl_store_fail(&e, msg);
		log_info("msg=\"volume expanded\" volume=%s capacity=%lld", v.id,
			 (long long)v.capacity);
	}
	csi__v1__controller_expand_volume_response__init(out);
	out->capacity_bytes = v.capacity;
	out->node_expansion_required = !v.block;
	*resp = &out->base;
	return CSI_OK;
}

HP_CTL_HANDLER(hp_ctl_modify)
{
	const Csi__V1__ControllerModifyVolumeRequest *r = req;
	Csi__V1__ControllerModifyVolumeResponse *out = arena_alloc(a, sizeof(*out));
	char mut[sizeof(((struct hp_vol *)0)->mut)];
	struct hp_vol v;
	struct err e;
	int rc;

	if (!out)
		return HP_OOM(msg);
	if ((rc = hp_valid_id(r->volume_id, "volume_id", msg)) ||
	    (rc = hp_valid_map((void *const *)r->mutable_parameters, r->n_mutable_parameters,
			       "mutable_parameters", msg)) ||
	    (rc = hp_valid_map((void *const *)r->secrets, r->n_secrets, "secrets", msg)))
		return rc;
	if (r->n_mutable_parameters == 0)
		return hp_fail(msg, CSI_INVALID_ARGUMENT, "mutable_parameters is required");
	if ((rc = hp_ctl_get_volume_row(p, r->volume_id, &v, msg)))
		return rc;
	if ((rc = hp_ctl_mutable(v.mut, (void *const *)r->mutable_parameters,
				 r->n_mutable_parameters, mut, sizeof(mut), msg)))
		return rc;
	memcpy(v.mut, mut, sizeof(mut));
	if (hp_store_vol_update(p->store, &v, &e) != 0)
		return hp_ctl_store_fail(&e, msg);
	csi__v1__controller_modify_volume_response__init(out);
	*resp = &out->base;
	return CSI_OK;
}
