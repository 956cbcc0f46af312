/*
 * Snapshots: create (recorded in state creating; the reconciler sends
 * CreateSnapshot and polls until it is ready to use), get, list (by
 * volume, prefix, in pages) and delete (state deleting; the reconciler
 * sends DeleteSnapshot and removes the record). A snapshot takes its
 * plugin from its source volume. Creating the same snapshot again is
 * idempotent; another spec under a taken ID is CSID_EEXIST.
 */
#include "server/server_int.h"

#include <string.h>

static bool server_snapshot_same(const struct model_snapshot *old,
				 const struct model_snapshot *spec)
{
	const char *name = spec->name ? spec->name : spec->id;

	return strcmp(old->volume_id, spec->volume_id) == 0 && strcmp(old->name, name) == 0 &&
	       model_map_equal(&old->parameters, &spec->parameters) &&
	       model_map_equal(&old->secrets, &spec->secrets);
}

int server_snapshot_create(struct server *s, const struct model_snapshot *spec, struct arena *a,
			   struct model_snapshot **out, struct err *e)
{
	int rc = model_snapshot_validate(spec, e);

	*out = NULL;
	if (rc)
		return rc;
	for (int attempt = 0; attempt < SERVER_CAS_RETRIES; attempt++) {
		struct model_snapshot *old = NULL, *snap;
		struct model_volume *vol = NULL;
		uint64_t index = 0;

		rc = server_get_snapshot(s, spec->id, a, &old, e);
		if (!rc) {
			if (!server_snapshot_same(old, spec))
				return err_set(e, CSID_EEXIST,
					       "create snapshot %s: the ID is taken by a snapshot "
					       "with another spec",
					       spec->id);
			server_status_get(s, STORE_SNAPSHOT, old->id, a, &old->status);
			*out = old;
			return 0;
		}
		if (rc != CSID_ENOTFOUND)
			return rc;
		rc = server_get_volume(s, spec->volume_id, a, &vol, e);
		if (rc)
			return err_wrap(e, "create snapshot %s", spec->id);
		if (vol->state != MODEL_VOL_READY)
			return err_set(e, CSID_EPRECOND,
				       "create snapshot %s: volume %s is %s, not ready", spec->id,
				       vol->id, model_volume_state_name(vol->state));
		snap = arena_alloc(a, sizeof(*snap));
		if (!snap)
			return err_set(e, CSID_ENOMEM, "create snapshot %s: out of memory",
				       spec->id);
		snap->id = spec->id;
		snap->volume_id = spec->volume_id;
		snap->plugin_id = vol->plugin_id;
		snap->name = spec->name ? spec->name : spec->id;
		snap->parameters = spec->parameters;
		snap->secrets = spec->secrets;
		snap->state = MODEL_SNAP_CREATING;
		snap->created_ms = clock_wall_ms(s->clock);
		rc = server_put_snapshot(s, snap, 0, &index, e);
		if (rc == CSID_ECONFLICT)
			continue;
		if (rc)
			return rc;
		snap->create_index = snap->modify_index = index;
		reconciler_enqueue(s->rec, STORE_SNAPSHOT, snap->id);
		*out = snap;
		return 0;
	}
	return err_set(e, CSID_EABORTED, "create snapshot %s: writers raced; try again", spec->id);
}

int server_snapshot_get(struct server *s, const char *id, struct arena *a,
			struct model_snapshot **out, struct err *e)
{
	int rc = server_get_snapshot(s, id, a, out, e);

	if (!rc)
		server_status_get(s, STORE_SNAPSHOT, id, a, &(*out)->status);
	return rc;
}

static int server_snapshot_delete_fn(struct server *s, struct model_snapshot *snap, void *arg,
				     struct arena *scratch, struct err *e)
{
	if (snap->state == MODEL_SNAP_DELETING)
		return SERVER_KEEP;
	snap->state = MODEL_SNAP_DELETING;
	return SERVER_PUT;
}

int server_snapshot_delete(struct server *s, const char *id, struct arena *a,
			   struct model_snapshot **out, struct err *e)
{
	return server_snapshot_update(s, id, server_snapshot_delete_fn, NULL, a, out, e);
}

int server_snapshot_list(struct server *s, const char *volume_id, const char *prefix,
			 size_t per_page, const char *next_token, struct arena *a,
			 struct model_snapshot ***out, size_t *n, char **next_token_out,
			 uint64_t *index, struct err *e)
{
	size_t cap = server_per_page(per_page), count = 0;
	struct model_snapshot **page = arena_alloc(a, cap * sizeof(*page));
	const char *after = next_token;
	bool first = true, more = true, extra = false;
	int rc = 0;

	*out = NULL;
	*n = 0;
	*next_token_out = NULL;
	if (!page)
		return err_set(e, CSID_ENOMEM, "list snapshots: out of memory");
	/* As for volumes: read on until the page is full and one more match is seen. */
	while (more && !extra && !rc) {
		struct store_list l = {0};

		rc = store_list(s->cfg.store, STORE_SNAPSHOT, prefix, after, cap + 1, &l, e);
		if (rc)
			return err_wrap(e, "list snapshots");
		if (first && index)
			*index = l.index;
		first = false;
		more = l.more && l.n > 0;
		for (size_t i = 0; i < l.n && !rc && !extra; i++) {
			struct model_snapshot *snap = NULL;

			rc = model_snapshot_decode(a, l.objs[i].value, l.objs[i].len, &snap, e);
			if (rc) {
				err_wrap(e, "snapshot %s: stored record", l.objs[i].id);
				break;
			}
			snap->create_index = l.objs[i].create_index;
			snap->modify_index = l.objs[i].modify_index;
			if (volume_id && strcmp(snap->volume_id, volume_id) != 0)
				continue;
			if (count == cap)
				extra = true;
			else
				page[count++] = snap;
		}
		if (!rc && l.n && !(after = arena_strdup(a, l.objs[l.n - 1].id)))
			rc = err_set(e, CSID_ENOMEM, "list snapshots: out of memory");
		for (size_t i = 0; i < l.n; i++)
			explicit_bzero(l.objs[i].value, l.objs[i].len);
		store_list_free(&l);
	}
	if (!rc && extra && !(*next_token_out = arena_strdup(a, page[count - 1]->id)))
		rc = err_set(e, CSID_ENOMEM, "list snapshots: out of memory");
	if (rc)
		return rc;
	for (size_t i = 0; i < count; i++)
		server_status_get(s, STORE_SNAPSHOT, page[i]->id, a, &page[i]->status);
	*out = page;
	*n = count;
	return 0;
}
