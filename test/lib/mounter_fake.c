/*
 * The fake node plugin and mount table of mounter_fake.h. Every call
 * loads the state file, changes it and writes it back through a rename,
 * so a crash leaves either the old or the new state.
 */
#include "mounter_fake.h"

#include "csi/csi_rules.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int mounter_fake_load(const struct mounter_fake *f, struct mounter_fake_view *v)
{
	char line[3 * MOUNTER_FAKE_PATH];
	FILE *fp;

	memset(v, 0, sizeof(*v));
	fp = fopen(f->state_file, "r");
	if (fp == NULL)
		return -1;
	while (fgets(line, sizeof(line), fp) != NULL) {
		struct mounter_fake_counts *c = &v->counts;
		char a[MOUNTER_FAKE_PATH], b[MOUNTER_FAKE_PATH];

		if (line[0] == 'C')
			sscanf(line, "C %d %d %d %d %d %d %d %d", &c->stage, &c->publish,
			       &c->unpublish, &c->unstage, &c->double_stage, &c->unstage_in_use,
			       &c->publish_unstaged, &c->overlap);
		else if (line[0] == 'S' && sscanf(line, "S %511s", a) == 1 &&
			 v->n_staged < MOUNTER_FAKE_MAX)
			snprintf(v->staged[v->n_staged++], MOUNTER_FAKE_PATH, "%s", a);
		else if (line[0] == 'P' && sscanf(line, "P %511s %511s", a, b) == 2 &&
			 v->n_targets < MOUNTER_FAKE_MAX) {
			snprintf(v->targets[v->n_targets], MOUNTER_FAKE_PATH, "%s", a);
			snprintf(v->target_stage[v->n_targets++], MOUNTER_FAKE_PATH, "%s",
				 strcmp(b, "-") == 0 ? "" : b);
		}
	}
	fclose(fp);
	return 0;
}

static int mounter_fake_save(const struct mounter_fake *f, const struct mounter_fake_view *v)
{
	const struct mounter_fake_counts *c = &v->counts;
	char tmp[MOUNTER_FAKE_PATH + 8];
	FILE *fp;

	snprintf(tmp, sizeof(tmp), "%s.tmp", f->state_file);
	fp = fopen(tmp, "w");
	if (fp == NULL)
		return -1;
	fprintf(fp, "C %d %d %d %d %d %d %d %d\n", c->stage, c->publish, c->unpublish, c->unstage,
		c->double_stage, c->unstage_in_use, c->publish_unstaged, c->overlap);
	for (int i = 0; i < v->n_staged; i++)
		fprintf(fp, "S %s\n", v->staged[i]);
	for (int i = 0; i < v->n_targets; i++)
		fprintf(fp, "P %s %s\n", v->targets[i],
			v->target_stage[i][0] ? v->target_stage[i] : "-");
	if (fclose(fp) != 0)
		return -1;
	return rename(tmp, f->state_file);
}

int mounter_fake_view(const struct mounter_fake *f, struct mounter_fake_view *v)
{
	return mounter_fake_load(f, v);
}

static int mounter_fake_find(char (*list)[MOUNTER_FAKE_PATH], int n, const char *path)
{
	for (int i = 0; i < n; i++)
		if (strcmp(list[i], path) == 0)
			return i;
	return -1;
}

int mounter_fake_add_orphan(struct mounter_fake *f, const char *target)
{
	struct mounter_fake_view v;

	if (mounter_fake_load(f, &v) != 0 || v.n_targets >= MOUNTER_FAKE_MAX)
		return -1;
	snprintf(v.targets[v.n_targets], MOUNTER_FAKE_PATH, "%s", target);
	v.target_stage[v.n_targets++][0] = '\0';
	return mounter_fake_save(f, &v);
}

/* Applies one RPC to the view; returns the gRPC code the plugin answers. */
static int mounter_fake_apply(struct mounter_fake *f, struct mounter_fake_view *v, enum csi_rpc rpc,
			      const ProtobufCMessage *req)
{
	struct mounter_fake_counts *c = &v->counts;
	int i;

	switch (rpc) {
	case CSI_RPC_NODE_STAGE_VOLUME: {
		const Csi__V1__NodeStageVolumeRequest *r = (const void *)req;

		c->stage++;
		if (r->volume_capability == NULL || r->staging_target_path[0] == '\0')
			return CSI_INVALID_ARGUMENT;
		if (mounter_fake_find(v->staged, v->n_staged, r->staging_target_path) >= 0) {
			c->double_stage++;
			return CSI_OK;
		}
		if (v->n_staged >= MOUNTER_FAKE_MAX)
			return CSI_RESOURCE_EXHAUSTED;
		snprintf(v->staged[v->n_staged++], MOUNTER_FAKE_PATH, "%s", r->staging_target_path);
		return CSI_OK;
	}
	case CSI_RPC_NODE_PUBLISH_VOLUME: {
		const Csi__V1__NodePublishVolumeRequest *r = (const void *)req;

		c->publish++;
		if (r->volume_capability == NULL || r->target_path[0] == '\0')
			return CSI_INVALID_ARGUMENT;
		if (f->needs_stage &&
		    (r->staging_target_path[0] == '\0' ||
		     mounter_fake_find(v->staged, v->n_staged, r->staging_target_path) < 0)) {
			c->publish_unstaged++;
			return CSI_FAILED_PRECONDITION;
		}
		if (mounter_fake_find(v->targets, v->n_targets, r->target_path) >= 0)
			return CSI_OK;
		if (v->n_targets >= MOUNTER_FAKE_MAX)
			return CSI_RESOURCE_EXHAUSTED;
		snprintf(v->targets[v->n_targets], MOUNTER_FAKE_PATH, "%s", r->target_path);
		snprintf(v->target_stage[v->n_targets++], MOUNTER_FAKE_PATH, "%s",
			 r->staging_target_path);
		return CSI_OK;
	}
	case CSI_RPC_NODE_UNPUBLISH_VOLUME: {
		const Csi__V1__NodeUnpublishVolumeRequest *r = (const void *)req;

		c->unpublish++;
		i = mounter_fake_find(v->targets, v->n_targets, r->target_path);
		if (i >= 0) {
			v->n_targets--;
			memmove(v->targets[i], v->targets[v->n_targets], MOUNTER_FAKE_PATH);
			memmove(v->target_stage[i], v->target_stage[v->n_targets],
				MOUNTER_FAKE_PATH);
		}
		return CSI_OK;
	}
	case CSI_RPC_NODE_UNSTAGE_VOLUME: {
		const Csi__V1__NodeUnstageVolumeRequest *r = (const void *)req;

		c->unstage++;
		if (mounter_fake_find(v->target_stage, v->n_targets, r->staging_target_path) >= 0)
			c->unstage_in_use++;
		i = mounter_fake_find(v->staged, v->n_staged, r->staging_target_path);
		if (i >= 0) {
			v->n_staged--;
			memmove(v->staged[i], v->staged[v->n_staged], MOUNTER_FAKE_PATH);
		}
		return CSI_OK;
	}
	case CSI_RPC_NODE_EXPAND_VOLUME: {
		const Csi__V1__NodeExpandVolumeRequest *r = (const void *)req;

		if (r->volume_capability == NULL || r->capacity_range == NULL)
			return CSI_INVALID_ARGUMENT;
		if (mounter_fake_find(v->targets, v->n_targets, r->volume_path) < 0)
			return CSI_NOT_FOUND;
		f->expands++;
		f->expand_bytes = r->capacity_range->required_bytes;
		snprintf(f->expand_path, sizeof(f->expand_path), "%s", r->volume_path);
		snprintf(f->expand_stage, sizeof(f->expand_stage), "%s", r->staging_target_path);
		return CSI_OK;
	}
	default:
		return CSI_UNIMPLEMENTED;
	}
}

/* The plugin's volume ID of a node request (for the per-volume overlap check). */
static const char *mounter_fake_volume(enum csi_rpc rpc, const ProtobufCMessage *req)
{
	switch (rpc) {
	case CSI_RPC_NODE_STAGE_VOLUME:
		return ((const Csi__V1__NodeStageVolumeRequest *)(const void *)req)->volume_id;
	case CSI_RPC_NODE_PUBLISH_VOLUME:
		return ((const Csi__V1__NodePublishVolumeRequest *)(const void *)req)->volume_id;
	case CSI_RPC_NODE_UNPUBLISH_VOLUME:
		return ((const Csi__V1__NodeUnpublishVolumeRequest *)(const void *)req)->volume_id;
	case CSI_RPC_NODE_UNSTAGE_VOLUME:
		return ((const Csi__V1__NodeUnstageVolumeRequest *)(const void *)req)->volume_id;
	case CSI_RPC_NODE_EXPAND_VOLUME:
		return ((const Csi__V1__NodeExpandVolumeRequest *)(const void *)req)->volume_id;
	default:
		return "";
	}
}

static void mounter_fake_wait(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	while (ms > 0 && nanosleep(&ts, &ts) != 0)
		;
}

static int mounter_fake_call(struct csi_client *c, enum csi_rpc rpc, const ProtobufCMessage *req,
			     ProtobufCMessage **resp, int64_t timeout_ms, struct csi_status *st)
{
	struct mounter_fake *f = (struct mounter_fake *)(void *)c;
	const char *vol = mounter_fake_volume(rpc, req);
	struct mounter_fake_view v;
	int n, code, overlap = 0, slot = -1;
	bool fail;

	*resp = NULL;
	pthread_mutex_lock(&f->mu);
	n = f->calls++;
	f->last_timeout_ms = timeout_ms;
	fail = (f->fail_at >= 0 && n >= f->fail_at && n < f->fail_at + f->fail_count) ||
	       (f->fail_rpc >= 0 && (int)rpc == f->fail_rpc);
	if (mounter_fake_find(f->busy, f->n_busy, vol) >= 0)
		overlap = 1;
	else if (f->n_busy < MOUNTER_FAKE_MAX)
		snprintf(f->busy[slot = f->n_busy++], MOUNTER_FAKE_PATH, "%s", vol);
	pthread_mutex_unlock(&f->mu);

	if (f->crash_at == n && !f->crash_after)
		_exit(MOUNTER_FAKE_CRASH_EXIT);
	mounter_fake_wait(f->delay_ms);

	pthread_mutex_lock(&f->mu);
	if (mounter_fake_load(f, &v) != 0) {
		code = CSI_INTERNAL;
	} else {
		v.counts.overlap += overlap;
		code = fail ? f->fail_code : mounter_fake_apply(f, &v, rpc, req);
		if (mounter_fake_save(f, &v) != 0)
			code = CSI_INTERNAL;
	}
	if (slot >= 0) {
		int i = mounter_fake_find(f->busy, f->n_busy, vol);

		if (i >= 0) {
			f->n_busy--;
			memmove(f->busy[i], f->busy[f->n_busy], MOUNTER_FAKE_PATH);
		}
	}
	pthread_mutex_unlock(&f->mu);

	if (f->crash_at == n && f->crash_after)
		_exit(MOUNTER_FAKE_CRASH_EXIT);
	st->code = code;
	if (code != CSI_OK) {
		snprintf(st->message, sizeof(st->message), "fake: injected %s",
			 csi_code_name(code));
		return csi_status_to_err(code);
	}
	st->message[0] = '\0';
	*resp = calloc(1, csi_rpc_info(rpc)->response->sizeof_message);
	if (*resp != NULL)
		protobuf_c_message_init(csi_rpc_info(rpc)->response, *resp);
	return 0;
}

static void mounter_fake_free(struct csi_client *c)
{
}

static int mounter_fake_table_load(struct mount_table *t, struct mount_set *out, struct err *e)
{
	struct mounter_fake *f = t->ctx;
	struct mounter_fake_view v;
	int rc = 0;

	out->paths = NULL;
	out->n = 0;
	pthread_mutex_lock(&f->mu);
	if (mounter_fake_load(f, &v) != 0)
		rc = err_set(e, CSID_EIO, "fake table: cannot read %s", f->state_file);
	pthread_mutex_unlock(&f->mu);
	for (int i = 0; rc == 0 && i < v.n_staged; i++)
		rc = mount_set_add(out, v.staged[i], e);
	for (int i = 0; rc == 0 && i < v.n_targets; i++)
		rc = mount_set_add(out, v.targets[i], e);
	if (rc != 0)
		mount_set_clear(out);
	return rc;
}

static int mounter_fake_table_unmount(struct mount_table *t, const char *path, struct err *e)
{
	struct mounter_fake *f = t->ctx;
	struct mounter_fake_view v;
	int i, rc = 0;

	pthread_mutex_lock(&f->mu);
	if (mounter_fake_load(f, &v) != 0) {
		rc = err_set(e, CSID_EIO, "fake table: cannot read %s", f->state_file);
		goto out;
	}
	i = mounter_fake_find(v.targets, v.n_targets, path);
	if (i >= 0) {
		v.n_targets--;
		memmove(v.targets[i], v.targets[v.n_targets], MOUNTER_FAKE_PATH);
		memmove(v.target_stage[i], v.target_stage[v.n_targets], MOUNTER_FAKE_PATH);
	}
	i = mounter_fake_find(v.staged, v.n_staged, path);
	if (i >= 0) {
		v.n_staged--;
		memmove(v.staged[i], v.staged[v.n_staged], MOUNTER_FAKE_PATH);
	}
	if (mounter_fake_save(f, &v) != 0)
		rc = err_set(e, CSID_EIO, "fake table: cannot write %s", f->state_file);
out:
	pthread_mutex_unlock(&f->mu);
	return rc;
}

static int mounter_fake_table_detach(struct mount_table *t, const char *path, bool *lazy,
				     struct err *e)
{
	struct mounter_fake *f = t->ctx;

	*lazy = f->busy_mount[0] != '\0' && strcmp(f->busy_mount, path) == 0;
	return mounter_fake_table_unmount(t, path, e);
}

void mounter_fake_init(struct mounter_fake *f, const char *state_file)
{
	struct mounter_fake_view v;

	memset(f, 0, sizeof(*f));
	f->client.call = mounter_fake_call;
	f->client.free = mounter_fake_free;
	f->client.endpoint = "fake";
	f->table.load = mounter_fake_table_load;
	f->table.unmount = mounter_fake_table_unmount;
	f->table.detach = mounter_fake_table_detach;
	f->table.ctx = f;
	snprintf(f->state_file, sizeof(f->state_file), "%s", state_file);
	f->fail_at = -1;
	f->fail_count = 1;
	f->fail_rpc = -1;
	f->crash_at = -1;
	f->needs_stage = true;
	pthread_mutex_init(&f->mu, NULL);
	if (access(state_file, F_OK) != 0) {
		memset(&v, 0, sizeof(v));
		mounter_fake_save(f, &v);
	}
}

void mounter_fake_fini(struct mounter_fake *f)
{
	pthread_mutex_destroy(&f->mu);
}
