/*
 * Controller service of csi-hostpath: the read-only volume queries
 * (ListVolumes, ControllerGetVolume, GetCapacity, capabilities). Paging
 * tokens are the store's insertion sequence number of the last entry
 * sent, so a volume deleted between pages does not shift the next page;
 * a token that was never issued is ABORTED, as the spec asks. Part of the
 * controller module: its handlers are declared in hp_controller.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "hp_controller.h"
#include "hp_store.h"
#include "hp_valid.h"

#define HP_OOM(msg) hp_fail(msg, CSI_RESOURCE_EXHAUSTED, "out of memory")

/* Status of a volume: the nodes it is published to and whether its backing store exists. */
struct hp_ctl_status {
	struct arena *a;
	char **ids;
	size_t n, cap;
};

static int hp_ctl_status_add(void *ctx, const struct hp_pub *pub)
{
	struct hp_ctl_status *s = ctx;

	if (s->n == s->cap) {
		size_t ncap = s->cap ? s->cap * 2 : 4;
		char **ids = arena_alloc(s->a, ncap * sizeof(*ids));

		if (!ids)
			return CSID_ENOMEM;
		if (s->n)
			memcpy(ids, s->ids, s->n * sizeof(*ids));
		s->ids = ids;
		s->cap = ncap;
	}
	s->ids[s->n] = arena_strdup(s->a, pub->node_id);
	if (!s->ids[s->n])
		return CSID_ENOMEM;
	s->n++;
	return 0;
}

static Csi__V1__VolumeCondition *hp_ctl_condition(struct hp_plugin *p, struct arena *a,
						  const struct hp_vol *v)
{
	Csi__V1__VolumeCondition *c = arena_alloc(a, sizeof(*c));
	char path[HP_PATH_MAX + 64];
	struct stat st;

	if (!c)
		return NULL;
	csi__v1__volume_condition__init(c);
	hp_volume_path(p, v->id, path, sizeof(path));
	if (lstat(path, &st) != 0 || (v->block ? !S_ISREG(st.st_mode) : !S_ISDIR(st.st_mode))) {
		c->abnormal = true;
		c->message = "the volume's backing store is missing";
	} else {
		c->message = "healthy";
	}
	return c;
}

static int hp_ctl_published(struct hp_plugin *p, struct arena *a, const char *vol,
			    struct hp_ctl_status *s, char *msg)
{
	struct err e;
	int rc;

	memset(s, 0, sizeof(*s));
	s->a = a;
	rc = hp_store_pub_list(p->store, vol, NULL, hp_ctl_status_add, s, &e);
	if (rc == CSID_ENOMEM)
		return HP_OOM(msg);
	if (rc)
		return hp_ctl_store_fail(&e, msg);
	return 0;
}

struct hp_ctl_list {
	struct hp_plugin *p;
	struct arena *a;
	const struct hp_ctl_nodes *ns;
	Csi__V1__ListVolumesResponse__Entry **entries;
	size_t n, cap, want;
	int64_t last_seq;
	bool more;
	char *msg;
	int rc;
};

static int hp_ctl_list_add(void *ctx, const struct hp_vol *v)
{
	struct hp_ctl_list *l = ctx;
	Csi__V1__ListVolumesResponse__Entry *en;
	Csi__V1__ListVolumesResponse__VolumeStatus *st;
	struct hp_ctl_status s;

	if (l->n == l->want) {
		l->more = true;
		return 1;
	}
	if (l->n == l->cap) {
		size_t ncap = l->cap ? l->cap * 2 : 16;
		Csi__V1__ListVolumesResponse__Entry **ne = arena_alloc(l->a, ncap * sizeof(*ne));

		if (!ne)
			return CSID_ENOMEM;
		if (l->n)
			memcpy(ne, l->entries, l->n * sizeof(*ne));
		l->entries = ne;
		l->cap = ncap;
	}
	en = arena_alloc(l->a, sizeof(*en));
	st = arena_alloc(l->a, sizeof(*st));
	if (!en || !st)
		return CSID_ENOMEM;
	csi__v1__list_volumes_response__entry__init(en);
	csi__v1__list_volumes_response__volume_status__init(st);
	en->volume = hp_ctl_volume(l->a, v, l->ns);
	if (!en->volume)
		return CSID_ENOMEM;
	/* volume_condition is an alpha_field: only with VOLUME_CONDITION advertised. */
	if (l->p->enable_alpha && !(st->volume_condition = hp_ctl_condition(l->p, l->a, v)))
		return CSID_ENOMEM;
	if (l->p->controller_publish) {
		l->rc = hp_ctl_published(l->p, l->a, v->id, &s, l->msg);
		if (l->rc)
			return CSID_EINTERNAL;
		st->published_node_ids = s.ids;
		st->n_published_node_ids = s.n;
	}
	en->status = st;
	l->entries[l->n++] = en;
	l->last_seq = v->seq;
	return 0;
}

/* Parses a paging token ("" = start) issued for the given table. */
int hp_ctl_token(struct hp_plugin *p, const char *tok, bool snapshots, int64_t *after, char *msg)
{
	int64_t max;
	char *end;
	struct err e;
	long long t;

	*after = 0;
	if (!tok || !*tok)
		return 0;
	errno = 0;
	t = strtoll(tok, &end, 10);
	if (hp_store_max_seq(p->store, snapshots, &max, &e) != 0)
		return hp_ctl_store_fail(&e, msg);
	if (errno || *end || t <= 0 || t > max || tok[0] < '0' || tok[0] > '9')
		return hp_fail(msg, CSI_ABORTED,
			       "starting_token is not valid; list again from"
			       " the start");
	*after = t;
	return 0;
}

HP_CTL_HANDLER(hp_ctl_list_volumes)
{
	const Csi__V1__ListVolumesRequest *r = req;
	Csi__V1__ListVolumesResponse *out = arena_alloc(a, sizeof(*out));
	struct hp_ctl_nodes ns;
	struct hp_ctl_list l = {0};
	int64_t after;
	struct err e;
	int rc;

	if (!out)
		return HP_OOM(msg);
	if (r->max_entries < 0)
		return hp_fail(msg, CSI_INVALID_ARGUMENT, "max_entries must not be negative");
	if ((rc = hp_ctl_token(p, r->starting_token, false, &after, msg)) ||
	    (rc = hp_ctl_nodes(p, a, &ns, msg)))
		return rc;
	l.p = p;
	l.a = a;
	l.ns = &ns;
	l.msg = msg;
	l.want = r->max_entries ? (size_t)r->max_entries : (size_t)-1;
	/* One more than a page tells whether a next page exists; in 64 bits, as
	 * max_entries may be INT32_MAX. */
	rc = hp_store_vol_list(p->store, after, r->max_entries ? (int64_t)r->max_entries + 1 : -1,
			       hp_ctl_list_add, &l, &e);
	if (l.rc)
		return l.rc;
	if (rc == CSID_ENOMEM)
		return HP_OOM(msg);
	if (rc < 0)
		return hp_ctl_store_fail(&e, msg);
	csi__v1__list_volumes_response__init(out);
	out->entries = l.entries;
	out->n_entries = l.n;
	if (l.more)
		out->next_token = arena_printf(a, "%lld", (long long)l.last_seq);
	*resp = &out->base;
	return CSI_OK;
}

HP_CTL_HANDLER(hp_ctl_get_capacity)
{
	const Csi__V1__GetCapacityRequest *r = req;
	Csi__V1__GetCapacityResponse *out = arena_alloc(a, sizeof(*out));
	Google__Protobuf__Int64Value *max = arena_alloc(a, sizeof(*max));
	struct hp_ctl_nodes ns;
	int64_t used, avail;
	bool block, reachable = false;
	struct err e;
	int rc;

	if (!out || !max)
		return HP_OOM(msg);
	for (size_t i = 0; i < r->n_volume_capabilities; i++)
		if ((rc =
			 hp_valid_cap(r->volume_capabilities[i], "volume capability", &block, msg)))
			return rc;
	if ((rc = hp_valid_map((void *const *)r->parameters, r->n_parameters, "parameters", msg)) ||
	    (rc = hp_ctl_nodes(p, a, &ns, msg)))
		return rc;
	for (size_t k = 0; k < ns.n && !reachable; k++)
		reachable = hp_topology_matches(r->accessible_topology, ns.ids[k]);
	if (hp_store_used(p->store, &used, &e) != 0)
		return hp_ctl_store_fail(&e, msg);
	avail = reachable && used < p->capacity ? p->capacity - used : 0;
	csi__v1__get_capacity_response__init(out);
	google__protobuf__int64_value__init(max);
	out->available_capacity = avail;
	max->value = avail;
	out->maximum_volume_size = max;
	*resp = &out->base;
	return CSI_OK;
}

HP_CTL_HANDLER(hp_ctl_caps)
{
	/* alpha: an alpha_enum_value of spec v1.12, advertised only with --enable-alpha. */
	static const struct {
		int type;
		bool alpha, publish;
	} all[] = {
	    {CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__CREATE_DELETE_VOLUME, false, false},
	    {CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__LIST_VOLUMES, false, false},
	    {CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__GET_CAPACITY, false, false},
	    {CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__CREATE_DELETE_SNAPSHOT, false,
	     false},
	    {CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__LIST_SNAPSHOTS, false, false},
	    {CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__CLONE_VOLUME, false, false},
	    {CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__EXPAND_VOLUME, false, false},
	    {CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__MODIFY_VOLUME, false, false},
	    {CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__VOLUME_CONDITION, true, false},
	    {CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__GET_VOLUME, true, false},
	    {CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__SINGLE_NODE_MULTI_WRITER, true,
	     false},
	    {CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__GET_SNAPSHOT, true, false},
	    {CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__PUBLISH_UNPUBLISH_VOLUME, false,
	     true},
	    {CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__PUBLISH_READONLY, false, true},
	    {CSI__V1__CONTROLLER_SERVICE_CAPABILITY__RPC__TYPE__LIST_VOLUMES_PUBLISHED_NODES, false,
	     true},
	};
	size_t max = sizeof(all) / sizeof(all[0]), n = 0;
	Csi__V1__ControllerGetCapabilitiesResponse *out = arena_alloc(a, sizeof(*out));
	Csi__V1__ControllerServiceCapability **caps = arena_alloc(a, max * sizeof(*caps));

	if (!out || !caps)
		return HP_OOM(msg);
	csi__v1__controller_get_capabilities_response__init(out);
	for (size_t i = 0; i < max; i++) {
		Csi__V1__ControllerServiceCapability *c;
		Csi__V1__ControllerServiceCapability__RPC *rpc;

		if ((all[i].alpha && !p->enable_alpha) ||
		    (all[i].publish && !p->controller_publish))
			continue;
		c = arena_alloc(a, sizeof(*c));
		rpc = arena_alloc(a, sizeof(*rpc));
		if (!c || !rpc)
			return HP_OOM(msg);
		csi__v1__controller_service_capability__init(c);
		csi__v1__controller_service_capability__rpc__init(rpc);
		rpc->type = all[i].type;
		c->type_case = CSI__V1__CONTROLLER_SERVICE_CAPABILITY__TYPE_RPC;
		c->rpc = rpc;
		caps[n++] = c;
	}
	out->capabilities = caps;
	out->n_capabilities = n;
	*resp = &out->base;
	return CSI_OK;
}

HP_CTL_HANDLER(hp_ctl_get_volume)
{
	const Csi__V1__ControllerGetVolumeRequest *r = req;
	Csi__V1__ControllerGetVolumeResponse *out = arena_alloc(a, sizeof(*out));
	Csi__V1__ControllerGetVolumeResponse__VolumeStatus *st = arena_alloc(a, sizeof(*st));
	struct hp_ctl_status s;
	struct hp_ctl_nodes ns;
	struct hp_vol v;
	int rc;

	if (!out || !st)
		return HP_OOM(msg);
	if ((rc = hp_valid_id(r->volume_id, "volume_id", msg)))
		return rc;
	if ((rc = hp_ctl_get_volume_row(p, r->volume_id, &v, msg)))
		return rc;
	if ((rc = hp_ctl_nodes(p, a, &ns, msg)))
		return rc;
	csi__v1__controller_get_volume_response__init(out);
	csi__v1__controller_get_volume_response__volume_status__init(st);
	out->volume = hp_ctl_volume(a, &v, &ns);
	st->volume_condition = hp_ctl_condition(p, a, &v);
	if (!out->volume || !st->volume_condition)
		return HP_OOM(msg);
	if (p->controller_publish) {
		if ((rc = hp_ctl_published(p, a, v.id, &s, msg)))
			return rc;
		st->published_node_ids = s.ids;
		st->n_published_node_ids = s.n;
	}
	out->status = st;
	*resp = &out->base;
	return CSI_OK;
}
