/*
 * Snapshots of csi-hostpath. A snapshot is a full copy of its source
 * volume's directory or file at <data>/snapshots/<id>, made synchronously,
 * so it is ready_to_use as soon as CreateSnapshot returns and it does not
 * depend on its source afterwards (the source may be deleted). Its
 * size_bytes is the source's capacity, which GetCapacity counts as used.
 * CreateSnapshot is idempotent by name (same name, same source → the same
 * snapshot; another source → ALREADY_EXISTS); DeleteSnapshot of an
 * unknown ID is OK, of a member of a volume group snapshot (hp_group)
 * INVALID_ARGUMENT. Listing pages like ListVolumes.
 */
#include "hp_snapshot.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "hp_fs.h"
#include "hp_store.h"
#include "hp_valid.h"
#include "util/log.h"

#define HP_OOM(msg) hp_fail(msg, CSI_RESOURCE_EXHAUSTED, "out of memory")

Csi__V1__Snapshot *hp_snap_msg(struct arena *a, const struct hp_snap *s)
{
	Csi__V1__Snapshot *m = arena_alloc(a, sizeof(*m));
	Google__Protobuf__Timestamp *ts = arena_alloc(a, sizeof(*ts));

	if (!m || !ts)
		return NULL;
	csi__v1__snapshot__init(m);
	google__protobuf__timestamp__init(ts);
	m->size_bytes = s->size;
	m->snapshot_id = arena_strdup(a, s->id);
	m->source_volume_id = arena_strdup(a, s->source);
	ts->seconds = s->created_ns / 1000000000LL;
	ts->nanos = (int32_t)(s->created_ns % 1000000000LL);
	m->creation_time = ts;
	m->ready_to_use = true;
	if (s->group[0]) {
		m->group_snapshot_id = arena_strdup(a, s->group);
		if (!m->group_snapshot_id)
			return NULL;
	}
	return m->snapshot_id && m->source_volume_id ? m : NULL;
}

static int hp_snap_reply(const struct hp_snap *s, ProtobufCMessage **resp, struct arena *a,
			 char *msg)
{
	Csi__V1__CreateSnapshotResponse *r = arena_alloc(a, sizeof(*r));

	if (!r)
		return HP_OOM(msg);
	csi__v1__create_snapshot_response__init(r);
	r->snapshot = hp_snap_msg(a, s);
	if (!r->snapshot)
		return HP_OOM(msg);
	*resp = &r->base;
	return CSI_OK;
}

HP_CTL_HANDLER(hp_snap_create)
{
	const Csi__V1__CreateSnapshotRequest *r = req;
	char src[HP_PATH_MAX + 64], dst[HP_PATH_MAX + 64];
	struct hp_snap s, old;
	struct hp_vol v;
	struct timespec now;
	int64_t used;
	struct err e;
	int rc;

	if ((rc = hp_valid_name(r->name, "name", msg)) ||
	    (rc = hp_valid_id(r->source_volume_id, "source_volume_id", msg)) ||
	    (rc = hp_valid_map((void *const *)r->parameters, r->n_parameters, "parameters", msg)) ||
	    (rc = hp_valid_map((void *const *)r->secrets, r->n_secrets, "secrets", msg)))
		return rc;
	rc = hp_store_snap_by_name(p->store, r->name, &old, &e);
	if (rc == 0) {
		if (strcmp(old.source, r->source_volume_id) != 0)
			return hp_fail(msg, CSI_ALREADY_EXISTS,
				       "snapshot %s exists with another source volume", old.id);
		return hp_snap_reply(&old, resp, a, msg);
	}
	if (rc != CSID_ENOTFOUND)
		return hp_ctl_store_fail(&e, msg);
	rc = hp_store_vol_get(p->store, r->source_volume_id, &v, &e);
	if (rc == CSID_ENOTFOUND)
		return hp_fail(msg, CSI_NOT_FOUND, "source volume %s not found",
			       r->source_volume_id);
	if (rc)
		return hp_ctl_store_fail(&e, msg);
	if (hp_store_used(p->store, &used, &e) != 0)
		return hp_ctl_store_fail(&e, msg);
	if (used + v.capacity > p->capacity)
		return hp_fail(msg, CSI_RESOURCE_EXHAUSTED, "insufficient capacity for a snapshot");
	memset(&s, 0, sizeof(s));
	do {
		hp_ctl_new_id("snap", s.id, sizeof(s.id));
		rc = hp_store_snap_get(p->store, s.id, &old, &e);
	} while (rc == 0);
	snprintf(s.name, sizeof(s.name), "%s", r->name);
	snprintf(s.source, sizeof(s.source), "%s", v.id);
	s.size = v.capacity;
	s.block = v.block;
	clock_gettime(CLOCK_REALTIME, &now);
	s.created_ns = (int64_t)now.tv_sec * 1000000000LL + now.tv_nsec;
	hp_volume_path(p, v.id, src, sizeof(src));
	hp_snapshot_path(p, s.id, dst, sizeof(dst));
	if (hp_fs_copy(src, dst, 0, &e) != 0)
		return hp_fail(msg,
			       e.code == CSID_EEXHAUSTED ? CSI_RESOURCE_EXHAUSTED : CSI_INTERNAL,
			       "%s", e.msg);
	if (hp_store_snap_insert(p->store, &s, &e) != 0) {
		hp_fs_remove(dst, NULL);
		return hp_ctl_store_fail(&e, msg);
	}
	log_info("msg=\"snapshot created\" snapshot=%s volume=%s", s.id, v.id);
	return hp_snap_reply(&s, resp, a, msg);
}

HP_CTL_HANDLER(hp_snap_delete)
{
	const Csi__V1__DeleteSnapshotRequest *r = req;
	char path[HP_PATH_MAX + 64];
	struct hp_snap s;
	struct err e;
	int rc;

	if ((rc = hp_valid_id(r->snapshot_id, "snapshot_id", msg)))
		return rc;
	rc = hp_store_snap_get(p->store, r->snapshot_id, &s, &e);
	if (rc == CSID_ENOTFOUND)
		return CSI_OK;
	if (rc)
		return hp_ctl_store_fail(&e, msg);
	/* "Snapshot is part of a group": it goes only with DeleteVolumeGroupSnapshot. */
	if (s.group[0])
		return hp_fail(msg, CSI_INVALID_ARGUMENT,
			       "snapshot %s is part of group snapshot %s: delete the group", s.id,
			       s.group);
	if (hp_store_snap_delete(p->store, s.id, &e) != 0)
		return hp_ctl_store_fail(&e, msg);
	hp_snapshot_path(p, s.id, path, sizeof(path));
	if (hp_fs_remove(path, &e) != 0)
		return hp_fail(msg, CSI_INTERNAL, "%s", e.msg);
	log_info("msg=\"snapshot deleted\" snapshot=%s", s.id);
	return CSI_OK;
}

struct hp_snap_page {
	struct arena *a;
	Csi__V1__ListSnapshotsResponse__Entry **entries;
	size_t n, cap, want;
	int64_t last_seq;
	bool more;
};

static int hp_snap_page_add(void *ctx, const struct hp_snap *s)
{
	struct hp_snap_page *pg = ctx;
	Csi__V1__ListSnapshotsResponse__Entry *en;

	if (pg->n == pg->want) {
		pg->more = true;
		return 1;
	}
	if (pg->n == pg->cap) {
		size_t ncap = pg->cap ? pg->cap * 2 : 16;
		Csi__V1__ListSnapshotsResponse__Entry **ne = arena_alloc(pg->a, ncap * sizeof(*ne));

		if (!ne)
			return CSID_ENOMEM;
		if (pg->n)
			memcpy(ne, pg->entries, pg->n * sizeof(*ne));
		pg->entries = ne;
		pg->cap = ncap;
	}
	en = arena_alloc(pg->a, sizeof(*en));
	if (!en)
		return CSID_ENOMEM;
	csi__v1__list_snapshots_response__entry__init(en);
	en->snapshot = hp_snap_msg(pg->a, s);
	if (!en->snapshot)
		return CSID_ENOMEM;
	pg->entries[pg->n++] = en;
	pg->last_seq = s->seq;
	return 0;
}

HP_CTL_HANDLER(hp_snap_list)
{
	const Csi__V1__ListSnapshotsRequest *r = req;
	Csi__V1__ListSnapshotsResponse *out = arena_alloc(a, sizeof(*out));
	struct hp_snap_page pg = {0};
	struct hp_snap s;
	int64_t after;
	struct err e;
	int rc;

	if (!out)
		return HP_OOM(msg);
	csi__v1__list_snapshots_response__init(out);
	*resp = &out->base;
	if (r->max_entries < 0)
		return hp_fail(msg, CSI_INVALID_ARGUMENT, "max_entries must not be negative");
	if ((r->snapshot_id && *r->snapshot_id &&
	     (rc = hp_valid_id(r->snapshot_id, "snapshot_id", msg))) ||
	    (r->source_volume_id && *r->source_volume_id &&
	     (rc = hp_valid_id(r->source_volume_id, "source_volume_id", msg))) ||
	    (rc = hp_ctl_token(p, r->starting_token, true, &after, msg)))
		return rc;
	pg.a = a;
	pg.want = r->max_entries ? (size_t)r->max_entries : (size_t)-1;
	if (r->snapshot_id && *r->snapshot_id) {
		/* One snapshot by ID (empty when unknown or of another source). */
		rc = hp_store_snap_get(p->store, r->snapshot_id, &s, &e);
		if (rc && rc != CSID_ENOTFOUND)
			return hp_ctl_store_fail(&e, msg);
		if (rc == 0 && s.seq > after &&
		    (!r->source_volume_id || !*r->source_volume_id ||
		     strcmp(s.source, r->source_volume_id) == 0))
			rc = hp_snap_page_add(&pg, &s);
		else
			rc = 0;
	} else {
		rc = hp_store_snap_list(
		    p->store, after,
		    r->source_volume_id && *r->source_volume_id ? r->source_volume_id : NULL,
		    r->max_entries ? (int64_t)r->max_entries + 1 : -1, hp_snap_page_add, &pg, &e);
	}
	if (rc == CSID_ENOMEM)
		return HP_OOM(msg);
	if (rc < 0)
		return hp_ctl_store_fail(&e, msg);
	out->entries = pg.entries;
	out->n_entries = pg.n;
	if (pg.more)
		out->next_token = arena_printf(a, "%lld", (long long)pg.last_seq);
	return CSI_OK;
}

HP_CTL_HANDLER(hp_snap_get)
{
	const Csi__V1__GetSnapshotRequest *r = req;
	Csi__V1__GetSnapshotResponse *out = arena_alloc(a, sizeof(*out));
	struct hp_snap s;
	struct err e;
	int rc;

	if (!out)
		return HP_OOM(msg);
	if ((rc = hp_valid_id(r->snapshot_id, "snapshot_id", msg)))
		return rc;
	rc = hp_store_snap_get(p->store, r->snapshot_id, &s, &e);
	if (rc == CSID_ENOTFOUND)
		return hp_fail(msg, CSI_NOT_FOUND, "snapshot %s not found", r->snapshot_id);
	if (rc)
		return hp_ctl_store_fail(&e, msg);
	csi__v1__get_snapshot_response__init(out);
	out->snapshot = hp_snap_msg(a, &s);
	if (!out->snapshot)
		return HP_OOM(msg);
	*resp = &out->base;
	return CSI_OK;
}
