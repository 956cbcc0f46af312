/*
 * The node half of a volume expansion (mounter_expand in mounter.h): under
 * the volume's lock, NodeExpandVolume for each distinct staging path of
 * the volume's published mounts through the plugin, so a volume staged
 * once and published to several allocations is grown once.
 */
#include <string.h>

#include "agent/mount_rpc.h"
#include "agent/mounter_int.h"

/* Whether an earlier published record of rs[0..i) shares rs[i]'s staging path. */
static bool mounter_expand_seen(struct mount_record **rs, size_t i, const char *plugin_id)
{
	for (size_t j = 0; j < i; j++) {
		const char *a = rs[j]->staging_path ? rs[j]->staging_path : "";
		const char *b = rs[i]->staging_path ? rs[i]->staging_path : "";

		if (rs[j]->state == MOUNT_STATE_PUBLISHED &&
		    strcmp(rs[j]->plugin_id, plugin_id) == 0 && strcmp(a, b) == 0)
			return true;
	}
	return false;
}

int mounter_expand(struct mounter *m, const struct mounter_plugin *p, const char *volume_id,
		   int64_t capacity, struct err *e)
{
	struct mount_record **rs = NULL;
	struct mounter_vlock *v = NULL;
	size_t n = 0, done = 0;
	int rc;

	if (p == NULL || p->client == NULL || p->plugin_id == NULL)
		return err_set(e, CSID_EINVAL, "node expand %s: no node plugin given",
			       volume_id ? volume_id : "?");
	rc = mount_name_check("volume id", volume_id, e);
	if (rc == 0)
		rc = mounter_lock(m, volume_id, &v, e);
	if (rc == 0)
		rc = mount_store_list(m->store, volume_id, &rs, &n, e);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		if (rs[i]->state != MOUNT_STATE_PUBLISHED ||
		    strcmp(rs[i]->plugin_id, p->plugin_id) != 0 ||
		    mounter_expand_seen(rs, i, p->plugin_id))
			continue;
		done++;
		if (p->has_node_expand)
			rc = mount_rpc_expand(p, m->timeout_ms, rs[i], capacity, e);
		if (rc == 0)
			mounter_log(LOG_INFO,
				    p->has_node_expand ? "node expanded"
						       : "node expand not offered by the plugin",
				    rs[i], NULL);
	}
	if (rc == 0 && done == 0)
		rc = err_set(e, CSID_ENOTFOUND, "no mount of it through plugin %s is published",
			     p->plugin_id);
	if (rc)
		err_wrap(e, "node expand %s", volume_id ? volume_id : "?");
	mount_records_free(rs, n);
	mounter_unlock(m, v);
	return rc;
}
