/*
 * The fake controller plugin of csi_fake.h. Every call takes the fake's
 * lock, logs itself, takes a scripted answer if one is queued for its RPC
 * (or the volume's injected failure), else applies the default behaviour
 * to the in-memory tables, and answers with a response built from them.
 */
#include "csi_fake.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "csi/csi_rules.h"

static void csi_fake_copy(char *dst, const char *src)
{
	snprintf(dst, CSI_FAKE_ID, "%s", src ? src : "");
}

static int csi_fake_find_vol(struct csi_fake *f, const char *id, bool by_name)
{
	for (int i = 0; id && i < f->nvols; i++)
		if (strcmp(by_name ? f->vols[i].name : f->vols[i].id, id) == 0)
			return i;
	return -1;
}

static int csi_fake_find_snap(struct csi_fake *f, const char *id, bool by_name)
{
	for (int i = 0; id && i < f->nsnaps; i++)
		if (strcmp(by_name ? f->snaps[i].name : f->snaps[i].id, id) == 0)
			return i;
	return -1;
}

static int csi_fake_find_pub(struct csi_fake *f, const char *vol, const char *node)
{
	for (int i = 0; i < f->npubs; i++)
		if (strcmp(f->pubs[i].volume, vol) == 0 && strcmp(f->pubs[i].node, node) == 0)
			return i;
	return -1;
}

/* Fills the log entry from the request. */
static void csi_fake_describe(enum csi_rpc rpc, const ProtobufCMessage *req,
			      struct csi_fake_call *c)
{
	memset(c, 0, sizeof(*c));
	c->rpc = rpc;
	switch (rpc) {
	case CSI_RPC_CREATE_VOLUME: {
		const Csi__V1__CreateVolumeRequest *r = (const void *)req;

		csi_fake_copy(c->volume, r->name);
		c->required_bytes = r->capacity_range ? r->capacity_range->required_bytes : 0;
		c->nsecrets = r->n_secrets;
		break;
	}
	case CSI_RPC_DELETE_VOLUME:
		csi_fake_copy(c->volume,
			      ((const Csi__V1__DeleteVolumeRequest *)(const void *)req)->volume_id);
		break;
	case CSI_RPC_CONTROLLER_PUBLISH_VOLUME: {
		const Csi__V1__ControllerPublishVolumeRequest *r = (const void *)req;

		csi_fake_copy(c->volume, r->volume_id);
		csi_fake_copy(c->node, r->node_id);
		c->readonly = r->readonly;
		c->nsecrets = r->n_secrets;
		break;
	}
	case CSI_RPC_CONTROLLER_UNPUBLISH_VOLUME: {
		const Csi__V1__ControllerUnpublishVolumeRequest *r = (const void *)req;

		csi_fake_copy(c->volume, r->volume_id);
		csi_fake_copy(c->node, r->node_id);
		break;
	}
	case CSI_RPC_VALIDATE_VOLUME_CAPABILITIES:
		csi_fake_copy(
		    c->volume,
		    ((const Csi__V1__ValidateVolumeCapabilitiesRequest *)(const void *)req)
			->volume_id);
		break;
	case CSI_RPC_CREATE_SNAPSHOT: {
		const Csi__V1__CreateSnapshotRequest *r = (const void *)req;

		csi_fake_copy(c->volume, r->source_volume_id);
		csi_fake_copy(c->snapshot, r->name);
		break;
	}
	case CSI_RPC_DELETE_SNAPSHOT:
		csi_fake_copy(
		    c->snapshot,
		    ((const Csi__V1__DeleteSnapshotRequest *)(const void *)req)->snapshot_id);
		break;
	case CSI_RPC_LIST_SNAPSHOTS:
		csi_fake_copy(
		    c->snapshot,
		    ((const Csi__V1__ListSnapshotsRequest *)(const void *)req)->snapshot_id);
		break;
	case CSI_RPC_CONTROLLER_EXPAND_VOLUME: {
		const Csi__V1__ControllerExpandVolumeRequest *r = (const void *)req;

		csi_fake_copy(c->volume, r->volume_id);
		c->required_bytes = r->capacity_range ? r->capacity_range->required_bytes : 0;
		break;
	}
	case CSI_RPC_CONTROLLER_MODIFY_VOLUME:
		csi_fake_copy(
		    c->volume,
		    ((const Csi__V1__ControllerModifyVolumeRequest *)(const void *)req)->volume_id);
		break;
	default:
		break;
	}
}

static ProtobufCMessage *csi_fake_empty(enum csi_rpc rpc)
{
	const ProtobufCMessageDescriptor *d = csi_rpc_info(rpc)->response;
	ProtobufCMessage *m = calloc(1, d->sizeof_message);

	if (m != NULL)
		protobuf_c_message_init(d, m);
	return m;
}

/* The CreateVolume answer for v: context {fake: 1}, topology {zone: z1}. */
static ProtobufCMessage *csi_fake_volume_msg(const struct csi_fake_vol *v)
{
	Csi__V1__Topology__SegmentsEntry seg = CSI__V1__TOPOLOGY__SEGMENTS_ENTRY__INIT;
	Csi__V1__Topology__SegmentsEntry *segs[1] = {&seg};
	Csi__V1__Topology topo = CSI__V1__TOPOLOGY__INIT;
	Csi__V1__Topology *topos[1] = {&topo};
	Csi__V1__Volume__VolumeContextEntry ctx = CSI__V1__VOLUME__VOLUME_CONTEXT_ENTRY__INIT;
	Csi__V1__Volume__VolumeContextEntry *ctxs[1] = {&ctx};
	Csi__V1__Volume m = CSI__V1__VOLUME__INIT;
	Csi__V1__CreateVolumeResponse out = CSI__V1__CREATE_VOLUME_RESPONSE__INIT;

	seg.key = "zone";
	seg.value = "z1";
	topo.n_segments = 1;
	topo.segments = segs;
	ctx.key = "fake";
	ctx.value = "1";
	m.volume_id = (char *)v->id;
	m.capacity_bytes = v->capacity;
	m.n_volume_context = 1;
	m.volume_context = ctxs;
	m.n_accessible_topology = 1;
	m.accessible_topology = topos;
	out.volume = &m;
	return csi_msg_dup(&out.base);
}

/*
 * The CreateSnapshot (or, listed, ListSnapshots) answer for s; every
 * answer counts as a poll, ready_to_use once f->snapshot_polls are past.
 */
static ProtobufCMessage *csi_fake_snapshot_msg(struct csi_fake *f, struct csi_fake_snap *s,
					       bool listed)
{
	Csi__V1__CreateSnapshotResponse out = CSI__V1__CREATE_SNAPSHOT_RESPONSE__INIT;
	Csi__V1__ListSnapshotsResponse list = CSI__V1__LIST_SNAPSHOTS_RESPONSE__INIT;
	Csi__V1__ListSnapshotsResponse__Entry entry = CSI__V1__LIST_SNAPSHOTS_RESPONSE__ENTRY__INIT;
	Csi__V1__ListSnapshotsResponse__Entry *entries[1] = {&entry};
	Csi__V1__Snapshot m = CSI__V1__SNAPSHOT__INIT;
	Google__Protobuf__Timestamp ts = GOOGLE__PROTOBUF__TIMESTAMP__INIT;

	s->polls++;
	m.snapshot_id = s->id;
	m.source_volume_id = s->volume;
	m.size_bytes = 1 << 20;
	ts.seconds = 1700000000;
	m.creation_time = &ts;
	m.ready_to_use = s->polls > f->snapshot_polls;
	if (!listed) {
		out.snapshot = &m;
		return csi_msg_dup(&out.base);
	}
	entry.snapshot = &m;
	list.n_entries = 1;
	list.entries = entries;
	return csi_msg_dup(&list.base);
}

/* The default behaviour; with f->mu held. Returns the code, *resp on OK. */
static int csi_fake_apply(struct csi_fake *f, enum csi_rpc rpc, const ProtobufCMessage *req,
			  ProtobufCMessage **resp)
{
	int i;

	switch (rpc) {
	case CSI_RPC_CREATE_VOLUME: {
		const Csi__V1__CreateVolumeRequest *r = (const void *)req;
		const char *src = NULL;

		if (r->name == NULL || r->name[0] == '\0' || r->n_volume_capabilities == 0)
			return CSI_INVALID_ARGUMENT;
		if (r->volume_content_source != NULL) {
			const Csi__V1__VolumeContentSource *cs = r->volume_content_source;

			src = cs->type_case == CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_SNAPSHOT
				  ? cs->snapshot->snapshot_id
				  : cs->volume->volume_id;
			if (cs->type_case == CSI__V1__VOLUME_CONTENT_SOURCE__TYPE_SNAPSHOT
				? csi_fake_find_snap(f, src, false) < 0
				: csi_fake_find_vol(f, src, false) < 0)
				return CSI_NOT_FOUND;
		}
		i = csi_fake_find_vol(f, r->name, true);
		if (i < 0) {
			if (f->nvols >= CSI_FAKE_MAX)
				return CSI_RESOURCE_EXHAUSTED;
			i = f->nvols++;
			memset(&f->vols[i], 0, sizeof(f->vols[i]));
			snprintf(f->vols[i].id, CSI_FAKE_ID, "fv-%d", ++f->next_id);
			csi_fake_copy(f->vols[i].name, r->name);
			csi_fake_copy(f->vols[i].source, src);
			f->vols[i].capacity = r->capacity_range && r->capacity_range->required_bytes
						  ? r->capacity_range->required_bytes
						  : 1 << 30;
		}
		*resp = csi_fake_volume_msg(&f->vols[i]);
		return CSI_OK;
	}
	case CSI_RPC_DELETE_VOLUME:
		i = csi_fake_find_vol(
		    f, ((const Csi__V1__DeleteVolumeRequest *)(const void *)req)->volume_id, false);
		if (i >= 0)
			f->vols[i] = f->vols[--f->nvols];
		break;
	case CSI_RPC_CONTROLLER_PUBLISH_VOLUME: {
		const Csi__V1__ControllerPublishVolumeRequest *r = (const void *)req;
		Csi__V1__ControllerPublishVolumeResponse out =
		    CSI__V1__CONTROLLER_PUBLISH_VOLUME_RESPONSE__INIT;
		Csi__V1__ControllerPublishVolumeResponse__PublishContextEntry kv =
		    CSI__V1__CONTROLLER_PUBLISH_VOLUME_RESPONSE__PUBLISH_CONTEXT_ENTRY__INIT;
		Csi__V1__ControllerPublishVolumeResponse__PublishContextEntry *kvs[1] = {&kv};
		char dev[CSI_FAKE_ID + 16];

		if (r->node_id == NULL || r->node_id[0] == '\0' || r->volume_capability == NULL)
			return CSI_INVALID_ARGUMENT;
		if (csi_fake_find_vol(f, r->volume_id, false) < 0)
			return CSI_NOT_FOUND;
		if (csi_fake_find_pub(f, r->volume_id, r->node_id) < 0) {
			if (f->npubs >= CSI_FAKE_MAX)
				return CSI_RESOURCE_EXHAUSTED;
			csi_fake_copy(f->pubs[f->npubs].volume, r->volume_id);
			csi_fake_copy(f->pubs[f->npubs].node, r->node_id);
			f->pubs[f->npubs++].readonly = r->readonly;
		}
		snprintf(dev, sizeof(dev), "/dev/fake/%s", r->volume_id);
		kv.key = "device";
		kv.value = dev;
		out.n_publish_context = 1;
		out.publish_context = kvs;
		*resp = csi_msg_dup(&out.base);
		return CSI_OK;
	}
	case CSI_RPC_CONTROLLER_UNPUBLISH_VOLUME: {
		const Csi__V1__ControllerUnpublishVolumeRequest *r = (const void *)req;

		i = csi_fake_find_pub(f, r->volume_id, r->node_id ? r->node_id : "");
		if (i >= 0)
			f->pubs[i] = f->pubs[--f->npubs];
		break;
	}
	case CSI_RPC_VALIDATE_VOLUME_CAPABILITIES: {
		const Csi__V1__ValidateVolumeCapabilitiesRequest *r = (const void *)req;
		Csi__V1__ValidateVolumeCapabilitiesResponse out =
		    CSI__V1__VALIDATE_VOLUME_CAPABILITIES_RESPONSE__INIT;
		Csi__V1__ValidateVolumeCapabilitiesResponse__Confirmed conf =
		    CSI__V1__VALIDATE_VOLUME_CAPABILITIES_RESPONSE__CONFIRMED__INIT;

		if (csi_fake_find_vol(f, r->volume_id, false) < 0)
			return CSI_NOT_FOUND;
		if (!f->confirm_none) {
			conf.n_volume_capabilities = r->n_volume_capabilities;
			conf.volume_capabilities = r->volume_capabilities;
			out.confirmed = &conf;
		} else {
			out.message = "not supported";
		}
		*resp = csi_msg_dup(&out.base);
		return CSI_OK;
	}
	case CSI_RPC_CREATE_SNAPSHOT: {
		const Csi__V1__CreateSnapshotRequest *r = (const void *)req;

		if (csi_fake_find_vol(f, r->source_volume_id, false) < 0)
			return CSI_NOT_FOUND;
		i = csi_fake_find_snap(f, r->name, true);
		if (i < 0) {
			if (f->nsnaps >= CSI_FAKE_MAX)
				return CSI_RESOURCE_EXHAUSTED;
			i = f->nsnaps++;
			memset(&f->snaps[i], 0, sizeof(f->snaps[i]));
			snprintf(f->snaps[i].id, CSI_FAKE_ID, "fs-%d", ++f->next_id);
			csi_fake_copy(f->snaps[i].name, r->name);
			csi_fake_copy(f->snaps[i].volume, r->source_volume_id);
		}
		*resp = csi_fake_snapshot_msg(f, &f->snaps[i], false);
		return CSI_OK;
	}
	case CSI_RPC_LIST_SNAPSHOTS: {
		const Csi__V1__ListSnapshotsRequest *r = (const void *)req;

		i = csi_fake_find_snap(f, r->snapshot_id, false);
		*resp = i >= 0 ? csi_fake_snapshot_msg(f, &f->snaps[i], true)
			       : csi_fake_empty(CSI_RPC_LIST_SNAPSHOTS);
		return CSI_OK;
	}
	case CSI_RPC_DELETE_SNAPSHOT:
		i = csi_fake_find_snap(
		    f, ((const Csi__V1__DeleteSnapshotRequest *)(const void *)req)->snapshot_id,
		    false);
		if (i >= 0)
			f->snaps[i] = f->snaps[--f->nsnaps];
		break;
	case CSI_RPC_CONTROLLER_EXPAND_VOLUME: {
		const Csi__V1__ControllerExpandVolumeRequest *r = (const void *)req;
		Csi__V1__ControllerExpandVolumeResponse out =
		    CSI__V1__CONTROLLER_EXPAND_VOLUME_RESPONSE__INIT;

		i = csi_fake_find_vol(f, r->volume_id, false);
		if (i < 0)
			return CSI_NOT_FOUND;
		if (r->capacity_range == NULL)
			return CSI_INVALID_ARGUMENT;
		if (r->capacity_range->required_bytes > f->vols[i].capacity)
			f->vols[i].capacity = r->capacity_range->required_bytes;
		out.capacity_bytes = f->vols[i].capacity;
		out.node_expansion_required = f->node_expansion;
		*resp = csi_msg_dup(&out.base);
		return CSI_OK;
	}
	case CSI_RPC_CONTROLLER_MODIFY_VOLUME:
		i = csi_fake_find_vol(
		    f,
		    ((const Csi__V1__ControllerModifyVolumeRequest *)(const void *)req)->volume_id,
		    false);
		if (i < 0)
			return CSI_NOT_FOUND;
		f->vols[i].modified++;
		break;
	default:
		return CSI_UNIMPLEMENTED;
	}
	*resp = csi_fake_empty(rpc);
	return CSI_OK;
}

static void csi_fake_pause(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	while (ms > 0 && nanosleep(&ts, &ts) != 0)
		;
}

static int csi_fake_call(struct csi_client *c, enum csi_rpc rpc, const ProtobufCMessage *req,
			 ProtobufCMessage **resp, int64_t timeout_ms, struct csi_status *st)
{
	struct csi_fake *f = (struct csi_fake *)(void *)c;
	struct csi_fake_call call;
	int code = -1;

	*resp = NULL;
	csi_fake_describe(rpc, req, &call);
	pthread_mutex_lock(&f->mu);
	f->calls[rpc]++;
	if (++f->in_flight > f->max_in_flight)
		f->max_in_flight = f->in_flight;
	pthread_mutex_unlock(&f->mu);
	csi_fake_pause(f->delay_ms);

	pthread_mutex_lock(&f->mu);
	for (int i = 0; i < f->nscript; i++)
		if (f->script[i].rpc == rpc) {
			code = f->script[i].code;
			memmove(&f->script[i], &f->script[i + 1],
				(size_t)(f->nscript - i - 1) * sizeof(f->script[0]));
			f->nscript--;
			break;
		}
	if (code < 0 && f->fail_volume_code != 0 &&
	    (strcmp(call.volume, f->fail_volume) == 0 ||
	     (csi_fake_find_vol(f, f->fail_volume, true) >= 0 &&
	      strcmp(f->vols[csi_fake_find_vol(f, f->fail_volume, true)].id, call.volume) == 0)))
		code = f->fail_volume_code;
	if (code < 0)
		code = csi_fake_apply(f, rpc, req, resp);
	else if (code == CSI_OK)
		code = csi_fake_apply(f, rpc, req, resp);
	if (code == CSI_OK && *resp == NULL)
		code = CSI_INTERNAL;
	call.code = code;
	if (f->nlog < CSI_FAKE_LOG)
		f->log[f->nlog] = call;
	f->nlog++;
	f->in_flight--;
	pthread_mutex_unlock(&f->mu);
	if (f->hook != NULL)
		f->hook(f->hook_ctx, rpc, code);

	st->code = code;
	if (code != CSI_OK) {
		csi_msg_free(*resp);
		*resp = NULL;
		snprintf(st->message, sizeof(st->message), "fake: injected %s",
			 csi_code_name(code));
		return csi_status_to_err(code);
	}
	st->message[0] = '\0';
	return 0;
}

static void csi_fake_client_free(struct csi_client *c)
{
}

void csi_fake_init(struct csi_fake *f, const char *plugin_id)
{
	memset(f, 0, sizeof(*f));
	f->client.call = csi_fake_call;
	f->client.free = csi_fake_client_free;
	f->client.endpoint = "fake";
	f->plugin_id = plugin_id;
	f->caps = CSI_FAKE_CAPS_ALL;
	pthread_mutex_init(&f->mu, NULL);
}

void csi_fake_fini(struct csi_fake *f)
{
	pthread_mutex_destroy(&f->mu);
}

void csi_fake_script(struct csi_fake *f, enum csi_rpc rpc, int code, int n)
{
	pthread_mutex_lock(&f->mu);
	for (int i = 0; i < n && f->nscript < CSI_FAKE_MAX; i++) {
		f->script[f->nscript].rpc = rpc;
		f->script[f->nscript++].code = code;
	}
	pthread_mutex_unlock(&f->mu);
}

void csi_fake_fail_volume(struct csi_fake *f, const char *volume, int code)
{
	pthread_mutex_lock(&f->mu);
	csi_fake_copy(f->fail_volume, volume);
	f->fail_volume_code = code;
	pthread_mutex_unlock(&f->mu);
}

int csi_fake_calls(struct csi_fake *f, enum csi_rpc rpc)
{
	int n;

	pthread_mutex_lock(&f->mu);
	n = f->calls[rpc];
	pthread_mutex_unlock(&f->mu);
	return n;
}

bool csi_fake_has_volume(struct csi_fake *f, const char *name)
{
	bool has;

	pthread_mutex_lock(&f->mu);
	has = csi_fake_find_vol(f, name, true) >= 0;
	pthread_mutex_unlock(&f->mu);
	return has;
}

bool csi_fake_has_pub(struct csi_fake *f, const char *volume_id, const char *node)
{
	bool has;

	pthread_mutex_lock(&f->mu);
	has = csi_fake_find_pub(f, volume_id, node) >= 0;
	pthread_mutex_unlock(&f->mu);
	return has;
}

bool csi_fake_has_snapshot(struct csi_fake *f, const char *name)
{
	bool has;

	pthread_mutex_lock(&f->mu);
	has = csi_fake_find_snap(f, name, true) >= 0;
	pthread_mutex_unlock(&f->mu);
	return has;
}

void csi_fake_volume_id(struct csi_fake *f, const char *name, char *out, size_t len)
{
	int i;

	pthread_mutex_lock(&f->mu);
	i = csi_fake_find_vol(f, name, true);
	snprintf(out, len, "%s", i >= 0 ? f->vols[i].id : "");
	pthread_mutex_unlock(&f->mu);
}

static int csi_fake_acquire(void *ctx, const char *plugin_id, struct csi_client **client,
			    uint64_t *caps, struct err *e)
{
	struct csi_fake *f = ctx;

	*client = NULL;
	*caps = 0;
	for (; f != NULL; f = f->next)
		if (strcmp(f->plugin_id, plugin_id) == 0)
			break;
	if (f == NULL || f->no_controller)
		return err_set(e, CSID_ENOTFOUND, "no controller plugin %s", plugin_id);
	if (f->down)
		return err_set(e, CSID_EUNAVAIL, "no healthy controller for plugin %s", plugin_id);
	pthread_mutex_lock(&f->mu);
	f->acquired++;
	pthread_mutex_unlock(&f->mu);
	*client = &f->client;
	*caps = f->caps;
	return 0;
}

static void csi_fake_release(void *ctx, const char *plugin_id, struct csi_client *client)
{
	struct csi_fake *f = (struct csi_fake *)(void *)client;

	pthread_mutex_lock(&f->mu);
	f->acquired--;
	pthread_mutex_unlock(&f->mu);
}

struct reconciler_controllers csi_fake_controllers(struct csi_fake *first)
{
	struct reconciler_controllers c = {csi_fake_acquire, csi_fake_release, first};

	return c;
}
