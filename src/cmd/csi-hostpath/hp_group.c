/*
 * Volume group snapshots of csi-hostpath (GroupController service). A
 * group snapshot is a row of group_snapshots plus one ordinary snapshot
 * per source volume (a full copy at <data>/snapshots/<id>, as hp_snapshot
 * makes), each tied to the group in group_members. Members are listed by
 * ListSnapshots and GetSnapshot with their group_snapshot_id, and may be
 * the source of a new volume like any snapshot. Rules, from the CSI spec
 * (§Group Controller Service RPCs):
 *  - CreateVolumeGroupSnapshot is idempotent by name: the same name with
 *    the same set of source volumes (in any order) and the same parameters
 *    answers the existing group; otherwise ALREADY_EXISTS. Each source
 *    volume must exist (NOT_FOUND) and be listed once, at most
 *    HP_GROUP_MAX of them. Mount and block volumes cannot be snapshotted
 *    together ("cannot snapshot multiple volumes together":
 *    FAILED_PRECONDITION). Capacity for every copy must be free
 *    (RESOURCE_EXHAUSTED).
 *  - One consistent point: every copy is made in one call, under the
 *    plugin mutex and inside one SQLite write transaction, so no RPC of
 *    any csi-hostpath sharing the data dir changes a source volume between
 *    the first copy and the last; every member carries the group's one
 *    creation_time. Writes by workloads through their bind mounts are not
 *    fenced (a storage system would hold I/O): this is a test plugin.
 *  - A copy that fails removes the copies made before it, so no snapshot
 *    leaks ("SP SHOULD also do clean up").
 *  - Get and Delete take the group's member snapshot IDs (snapshot_ids is
 *    REQUIRED); a list that does not name exactly the members is
 *    INVALID_ARGUMENT ("snapshot list mismatch"), as the spec asks of a
 *    plugin that can detect it. Get of an unknown group is NOT_FOUND,
 *    Delete of one is OK, whatever snapshot_ids holds (empty included):
 *    the list is checked only against a group that exists, as the
 *    conformance suites (csi-sanity) ask.
 *  - Delete removes the members with the group: their rows in the call's
 *    transaction, then their copies. When removing a copy fails the call
 *    answers INTERNAL and the rows stay; a retry finishes the work. A
 *    member cannot be deleted alone (hp_snap_delete: INVALID_ARGUMENT).
 *    Nothing uses a snapshot once it is cut (volumes made from it are
 *    copies), so Delete never answers FAILED_PRECONDITION.
 */
#include "hp_group.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hp_fs.h"
#include "hp_snapshot.h"
#include "hp_store.h"
#include "hp_valid.h"
#include "util/log.h"

#define HP_OOM(msg) hp_fail(msg, CSI_RESOURCE_EXHAUSTED, "out of memory")

/* The member snapshots of one group (at most HP_GROUP_MAX), in an arena. */
struct hp_group_members {
	struct hp_snap *v;
	size_t n;
};

static int hp_group_members_init(struct hp_group_members *m, struct arena *a, char *msg)
{
	m->n = 0;
	m->v = arena_alloc(a, HP_GROUP_MAX * sizeof(*m->v));
	return m->v ? 0 : HP_OOM(msg);
}

static int hp_group_member_add(void *ctx, const struct hp_snap *s)
{
	struct hp_group_members *m = ctx;

	if (m->n == HP_GROUP_MAX)
		return CSID_ERANGE;
	m->v[m->n++] = *s;
	return 0;
}

/* Loads the members of group id into m. */
static int hp_group_load(struct hp_plugin *p, const char *id, struct hp_group_members *m,
			 struct arena *a, char *msg)
{
	struct err e;
	int rc;

	if ((rc = hp_group_members_init(m, a, msg)))
		return rc;
	rc = hp_store_group_members(p->store, id, hp_group_member_add, m, &e);
	if (rc == CSID_ERANGE)
		return hp_fail(msg, CSI_INTERNAL, "group snapshot %s has more than %d members", id,
			       HP_GROUP_MAX);
	if (rc)
		return hp_ctl_store_fail(&e, msg);
	return 0;
}

static int hp_group_strcmp(const void *x, const void *y)
{
	return strcmp(*(const char *const *)x, *(const char *const *)y);
}

/* A sorted copy (in the arena) of the n strings of v; NULL when out of memory. */
static const char **hp_group_sorted(struct arena *a, char *const *v, size_t n)
{
	const char **s = arena_alloc(a, (n ? n : 1) * sizeof(*s));

	if (!s)
		return NULL;
	for (size_t i = 0; i < n; i++)
		s[i] = v[i];
	qsort(s, n, sizeof(*s), hp_group_strcmp);
	return s;
}

/*
 * Whether the sorted list want (n entries) names exactly the members'
 * snapshot IDs (snapshots) or source volume IDs (!snapshots), each once.
 */
static int hp_group_matches(const struct hp_group_members *m, bool snapshots, const char **want,
			    size_t n, struct arena *a, bool *same)
{
	char **have = arena_alloc(a, HP_GROUP_MAX * sizeof(*have));
	const char **sorted;

	*same = false;
	if (!have)
		return CSID_ENOMEM;
	if (n != m->n)
		return 0;
	for (size_t i = 0; i < m->n; i++)
		have[i] = snapshots ? m->v[i].id : m->v[i].source;
	sorted = hp_group_sorted(a, have, m->n);
	if (!sorted)
		return CSID_ENOMEM;
	for (size_t i = 0; i < n; i++)
		if (strcmp(sorted[i], want[i]) != 0)
			return 0;
	*same = true;
	return 0;
}

/*
 * Checks a list of IDs that must not be empty (what names the field):
 * 1..HP_GROUP_MAX valid IDs, none twice. *sorted gets a sorted copy.
 */
static int hp_group_ids(char *const *ids, size_t n, const char *what, const char ***sorted,
			struct arena *a, char *msg)
{
	int rc;

	if (n == 0)
		return hp_fail(msg, CSI_INVALID_ARGUMENT, "%s is required", what);
	if (n > HP_GROUP_MAX)
		return hp_fail(msg, CSI_INVALID_ARGUMENT, "%s has more than %d entries", what,
			       HP_GROUP_MAX);
	for (size_t i = 0; i < n; i++)
		if ((rc = hp_valid_id(ids[i], what, msg)))
			return rc;
	*sorted = hp_group_sorted(a, ids, n);
	if (!*sorted)
		return HP_OOM(msg);
	for (size_t i = 1; i < n; i++)
		if (strcmp((*sorted)[i - 1], (*sorted)[i]) == 0)
			return hp_fail(msg, CSI_INVALID_ARGUMENT, "%s lists %s twice", what,
				       (*sorted)[i]);
	return 0;
}

static Csi__V1__VolumeGroupSnapshot *hp_group_msg(struct arena *a, const struct hp_group *g,
						  const struct hp_group_members *m)
{
	Csi__V1__VolumeGroupSnapshot *vg = arena_alloc(a, sizeof(*vg));
	Google__Protobuf__Timestamp *ts = arena_alloc(a, sizeof(*ts));

	if (!vg || !ts)
		return NULL;
	csi__v1__volume_group_snapshot__init(vg);
	google__protobuf__timestamp__init(ts);
	vg->group_snapshot_id = arena_strdup(a, g->id);
	vg->snapshots = arena_alloc(a, (m->n ? m->n : 1) * sizeof(*vg->snapshots));
	if (!vg->group_snapshot_id || !vg->snapshots)
		return NULL;
	for (size_t i = 0; i < m->n; i++) {
		vg->snapshots[i] = hp_snap_msg(a, &m->v[i]);
		if (!vg->snapshots[i])
			return NULL;
	}
	vg->n_snapshots = m->n;
	ts->seconds = g->created_ns / 1000000000LL;
	ts->nanos = (int32_t)(g->created_ns % 1000000000LL);
	vg->creation_time = ts;
	/* Every copy is complete when the call returns. */
	vg->ready_to_use = true;
	return vg;
}

static int hp_group_create_reply(const struct hp_group *g, const struct hp_group_members *m,
				 ProtobufCMessage **resp, struct arena *a, char *msg)
{
	Csi__V1__CreateVolumeGroupSnapshotResponse *out = arena_alloc(a, sizeof(*out));

	if (!out)
		return HP_OOM(msg);
	csi__v1__create_volume_group_snapshot_response__init(out);
	out->group_snapshot = hp_group_msg(a, g, m);
	if (!out->group_snapshot)
		return HP_OOM(msg);
	*resp = &out->base;
	return CSI_OK;
}

HP_CTL_HANDLER(hp_group_caps)
{
	Csi__V1__GroupControllerGetCapabilitiesResponse *out = arena_alloc(a, sizeof(*out));
	Csi__V1__GroupControllerServiceCapability **caps = arena_alloc(a, sizeof(*caps));
	Csi__V1__GroupControllerServiceCapability *c = arena_alloc(a, sizeof(*c));
	Csi__V1__GroupControllerServiceCapability__RPC *rpc = arena_alloc(a, sizeof(*rpc));

	if (!out || !caps || !c || !rpc)
		return HP_OOM(msg);
	csi__v1__group_controller_get_capabilities_response__init(out);
	csi__v1__group_controller_service_capability__init(c);
	csi__v1__group_controller_service_capability__rpc__init(rpc);
	rpc->type =
	    CSI__V1__GROUP_CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT;
	c->type_case = CSI__V1__GROUP_CONTROLLER_SERVICE_CAPABILITY__TYPE_RPC;
	c->rpc = rpc;
	caps[0] = c;
	out->capabilities = caps;
	out->n_capabilities = 1;
	*resp = &out->base;
	return CSI_OK;
}

/*
 * Loads the n source volumes into vols and sums their capacity: NOT_FOUND
 * for a missing one, FAILED_PRECONDITION when they mix block and mount.
 */
static int hp_group_sources(struct hp_plugin *p, char *const *ids, size_t n, struct hp_vol *vols,
			    int64_t *need, char *msg)
{
	int rc;

	*need = 0;
	for (size_t i = 0; i < n; i++) {
		if ((rc = hp_ctl_get_volume_row(p, ids[i], &vols[i], msg)))
			return rc;
		if (vols[i].block != vols[0].block)
			return hp_fail(msg, CSI_FAILED_PRECONDITION,
				       "volumes %s (%s) and %s (%s) cannot be snapshotted together:"
				       " a group holds only block or only mount volumes",
				       vols[0].id, vols[0].block ? "block" : "mount", vols[i].id,
				       vols[i].block ? "block" : "mount");
		*need += vols[i].capacity;
	}
	return 0;
}

/* Removes the copies of the first n members (after a failed create). */
static void hp_group_unmake(struct hp_plugin *p, const struct hp_group_members *m)
{
	char path[HP_PATH_MAX + 64];

	for (size_t i = 0; i < m->n; i++) {
		hp_snapshot_path(p, m->v[i].id, path, sizeof(path));
		hp_fs_remove(path, NULL);
	}
}

/* Copies every source volume and records the group g with its members m. */
static int hp_group_make(struct hp_plugin *p, struct hp_group *g, const struct hp_vol *vols,
			 size_t n, struct hp_group_members *m, char *msg)
{
	char src[HP_PATH_MAX + 64], dst[HP_PATH_MAX + 64];
	struct hp_snap old;
	struct err e;
	int rc = 0;

	if (hp_store_group_insert(p->store, g, &e) != 0)
		return hp_ctl_store_fail(&e, msg);
	for (size_t i = 0; i < n; i++) {
		struct hp_snap *s = &m->v[i];

		memset(s, 0, sizeof(*s));
		do
			hp_ctl_new_id("snap", s->id, sizeof(s->id));
		while (hp_store_snap_get(p->store, s->id, &old, NULL) == 0);
		/* A name no CO can give (names never hold '/'), unique like the ID. */
		snprintf(s->name, sizeof(s->name), "%.60s/%.60s", g->id, s->id);
		snprintf(s->source, sizeof(s->source), "%s", vols[i].id);
		snprintf(s->group, sizeof(s->group), "%s", g->id);
		s->size = vols[i].capacity;
		s->block = vols[i].block;
		s->created_ns = g->created_ns;
		hp_volume_path(p, vols[i].id, src, sizeof(src));
		hp_snapshot_path(p, s->id, dst, sizeof(dst));
		if (hp_fs_copy(src, dst, 0, &e) != 0) {
			rc = hp_fail(
			    msg, e.code == CSID_EEXHAUSTED ? CSI_RESOURCE_EXHAUSTED : CSI_INTERNAL,
			    "snapshot of volume %s: %s", vols[i].id, e.msg);
			break;
		}
		m->n++;
		if (hp_store_snap_insert(p->store, s, &e) != 0 ||
		    hp_store_group_member_add(p->store, g->id, s->id, &e) != 0) {
			rc = hp_ctl_store_fail(&e, msg);
			break;
		}
	}
	if (rc)
		hp_group_unmake(p, m);
	return rc;
}

HP_CTL_HANDLER(hp_group_create)
{
	const Csi__V1__CreateVolumeGroupSnapshotRequest *r = req;
	struct hp_group_members m;
	const char **sources;
	struct hp_vol *vols;
	struct hp_group g, old;
	struct timespec now;
	int64_t need, used;
	bool same;
	struct err e;
	int rc;

	if ((rc = hp_valid_name(r->name, "name", msg)) ||
	    (rc = hp_group_ids(r->source_volume_ids, r->n_source_volume_ids, "source_volume_ids",
			       &sources, a, msg)) ||
	    (rc = hp_valid_map((void *const *)r->parameters, r->n_parameters, "parameters", msg)) ||
	    (rc = hp_valid_map((void *const *)r->secrets, r->n_secrets, "secrets", msg)))
		return rc;
	memset(&g, 0, sizeof(g));
	hp_ctl_params_hash((void *const *)r->parameters, r->n_parameters, g.params,
			   sizeof(g.params));
	rc = hp_store_group_by_name(p->store, r->name, &old, &e);
	if (rc == 0) {
		if ((rc = hp_group_load(p, old.id, &m, a, msg)))
			return rc;
		if (hp_group_matches(&m, false, sources, r->n_source_volume_ids, a, &same) != 0)
			return HP_OOM(msg);
		if (!same || strcmp(old.params, g.params) != 0)
			return hp_fail(msg, CSI_ALREADY_EXISTS,
				       "group snapshot %s exists with other source volumes or"
				       " parameters",
				       old.id);
		return hp_group_create_reply(&old, &m, resp, a, msg);
	}
	if (rc != CSID_ENOTFOUND)
		return hp_ctl_store_fail(&e, msg);
	vols = arena_alloc(a, r->n_source_volume_ids * sizeof(*vols));
	if (!vols)
		return HP_OOM(msg);
	if ((rc = hp_group_members_init(&m, a, msg)))
		return rc;
	if ((rc = hp_group_sources(p, r->source_volume_ids, r->n_source_volume_ids, vols, &need,
				   msg)))
		return rc;
	if (hp_store_used(p->store, &used, &e) != 0)
		return hp_ctl_store_fail(&e, msg);
	if (used + need > p->capacity)
		return hp_fail(msg, CSI_RESOURCE_EXHAUSTED,
			       "insufficient capacity for a group snapshot of %lld bytes",
			       (long long)need);
	do
		hp_ctl_new_id("group", g.id, sizeof(g.id));
	while (hp_store_group_get(p->store, g.id, &old, NULL) == 0);
	snprintf(g.name, sizeof(g.name), "%s", r->name);
	clock_gettime(CLOCK_REALTIME, &now);
	g.created_ns = (int64_t)now.tv_sec * 1000000000LL + now.tv_nsec;
	if ((rc = hp_group_make(p, &g, vols, r->n_source_volume_ids, &m, msg)))
		return rc;
	log_info("msg=\"group snapshot created\" group=%s snapshots=%zu", g.id, m.n);
	return hp_group_create_reply(&g, &m, resp, a, msg);
}

/*
 * Finds group id and checks snapshot_ids against its members: 0 with g
 * and m set, CSID_ENOTFOUND (msg set) when there is no such group, or a
 * gRPC code. snapshot_ids is looked at only once the group is found.
 */
static int hp_group_find(struct hp_plugin *p, const char *id, char *const *ids, size_t n,
			 struct hp_group *g, struct hp_group_members *m, struct arena *a, char *msg)
{
	const char **want;
	struct err e;
	bool same;
	int rc;

	if ((rc = hp_valid_id(id, "group_snapshot_id", msg)))
		return rc;
	rc = hp_store_group_get(p->store, id, g, &e);
	if (rc == CSID_ENOTFOUND) {
		hp_fail(msg, CSI_NOT_FOUND, "group snapshot %s not found", id);
		return rc;
	}
	if (rc)
		return hp_ctl_store_fail(&e, msg);
	if ((rc = hp_group_ids(ids, n, "snapshot_ids", &want, a, msg)))
		return rc;
	if ((rc = hp_group_load(p, g->id, m, a, msg)))
		return rc;
	if (hp_group_matches(m, true, want, n, a, &same) != 0)
		return HP_OOM(msg);
	if (!same)
		return hp_fail(msg, CSI_INVALID_ARGUMENT,
			       "snapshot_ids do not match the %zu snapshots of group snapshot %s",
			       m->n, g->id);
	return 0;
}

HP_CTL_HANDLER(hp_group_get)
{
	const Csi__V1__GetVolumeGroupSnapshotRequest *r = req;
	Csi__V1__GetVolumeGroupSnapshotResponse *out = arena_alloc(a, sizeof(*out));
	struct hp_group_members m;
	struct hp_group g;
	int rc;

	if (!out)
		return HP_OOM(msg);
	if ((rc = hp_valid_map((void *const *)r->secrets, r->n_secrets, "secrets", msg)))
		return rc;
	rc = hp_group_find(p, r->group_snapshot_id, r->snapshot_ids, r->n_snapshot_ids, &g, &m, a,
			   msg);
	if (rc == CSID_ENOTFOUND)
		return CSI_NOT_FOUND;
	if (rc)
		return rc;
	csi__v1__get_volume_group_snapshot_response__init(out);
	out->group_snapshot = hp_group_msg(a, &g, &m);
	if (!out->group_snapshot)
		return HP_OOM(msg);
	*resp = &out->base;
	return CSI_OK;
}

HP_CTL_HANDLER(hp_group_delete)
{
	const Csi__V1__DeleteVolumeGroupSnapshotRequest *r = req;
	Csi__V1__DeleteVolumeGroupSnapshotResponse *out = arena_alloc(a, sizeof(*out));
	char path[HP_PATH_MAX + 64];
	struct hp_group_members m;
	struct hp_group g;
	struct err e;
	int rc;

	if (!out)
		return HP_OOM(msg);
	csi__v1__delete_volume_group_snapshot_response__init(out);
	if ((rc = hp_valid_map((void *const *)r->secrets, r->n_secrets, "secrets", msg)))
		return rc;
	rc = hp_group_find(p, r->group_snapshot_id, r->snapshot_ids, r->n_snapshot_ids, &g, &m, a,
			   msg);
	if (rc == CSID_ENOTFOUND) {
		/* "does not exist ... the Plugin MUST reply 0 OK". */
		msg[0] = '\0';
		*resp = &out->base;
		return CSI_OK;
	}
	if (rc)
		return rc;
	if (hp_store_group_delete(p->store, g.id, &e) != 0)
		return hp_ctl_store_fail(&e, msg);
	for (size_t i = 0; i < m.n; i++) {
		hp_snapshot_path(p, m.v[i].id, path, sizeof(path));
		if (hp_fs_remove(path, &e) != 0)
			return hp_fail(msg, CSI_INTERNAL, "snapshot %s: %s", m.v[i].id, e.msg);
	}
	log_info("msg=\"group snapshot deleted\" group=%s snapshots=%zu", g.id, m.n);
	*resp = &out->base;
	return CSI_OK;
}
