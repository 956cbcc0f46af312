/*
 * Claims from the node: the agent API's volume resource, a thin front
 * end of the claim flow (agent/claims.h), which mounts a volume of the
 * csid servers for an allocation and unmounts it again.
 *
 *   PUT    /v1/agent/volumes/<vol>/mount          {"alloc_id", "read_only",
 *                                                 "access_mode", "attachment_mode",
 *                                                 "owner" (agent_api_owners.c)}
 *   DELETE /v1/agent/volumes/<vol>/mount/<alloc>
 *
 * A mount answers {"volume_id", "alloc_id", "node_id", "path", "source",
 * "is_device"}; an unmount {"volume_id", "alloc_id", "unmounted",
 * "released", "release_pending"} and, while the release is pending,
 * "release_error".
 */
#include "api/agent_api_int.h"

#include <stdlib.h>
#include <string.h>

static const char *const agent_api_claim_keys[] = {"alloc_id",        "read_only", "access_mode",
						   "attachment_mode", "owner",     NULL};

void agent_api_claim_clear(struct agent_api_claim *c)
{
	json_decref(c->doc_);
	c->doc_ = NULL;
}

/* An optional string member of root into *out (NULL when absent). */
static int agent_api_claim_string(json_t *root, const char *key, const char **out, struct err *e)
{
	json_t *v = json_object_get(root, key);

	if (v && !json_is_string(v))
		return err_set(e, CSID_EINVAL, "%s: expected a string", key);
	*out = json_string_value(v);
	return 0;
}

int agent_api_decode_claim(const char *body, size_t len, struct agent_api_claim *out, struct err *e)
{
	json_t *root = body ? json_loadb(body, len, JSON_REJECT_DUPLICATES, NULL) : NULL, *v;
	bool owned = false;
	const char *key;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if (!json_is_object(root)) {
		json_decref(root);
		return err_set(e, CSID_EINVAL, "request body must be a JSON object");
	}
	json_object_foreach(root, key, v)
	{
		bool ok = false;

		for (int i = 0; agent_api_claim_keys[i]; i++)
			ok = ok || strcmp(key, agent_api_claim_keys[i]) == 0;
		if (!ok) {
			rc = err_set(e, CSID_EINVAL, "unknown field \"%.64s\"", key);
			goto out;
		}
	}
	out->req.alloc_id = json_string_value(json_object_get(root, "alloc_id"));
	if (!out->req.alloc_id) {
		rc = err_set(e, CSID_EINVAL, "alloc_id: required");
		goto out;
	}
	if ((rc = mount_name_check("alloc_id", out->req.alloc_id, e)))
		goto out;
	v = json_object_get(root, "read_only");
	if (v && !json_is_boolean(v)) {
		rc = err_set(e, CSID_EINVAL, "read_only: expected true or false");
		goto out;
	}
	out->req.read_only = json_is_true(v);
	if ((rc = agent_api_claim_string(root, "access_mode", &out->req.access_mode, e)) ||
	    (rc = agent_api_claim_string(root, "attachment_mode", &out->req.attachment_mode, e)) ||
	    (rc = agent_api_decode_owner(body, len, &out->owner, &owned, e)))
		goto out;
	out->req.owner = owned ? &out->owner : NULL;
	out->doc_ = root;
	return 0;
out:
	memset(out, 0, sizeof(*out));
	json_decref(root);
	return rc;
}

int agent_api_volume_mount(struct agent_api *a, const char *vol, const char *body, size_t len,
			   json_t **out, struct err *e)
{
	struct claims_mount_result *res = NULL;
	struct agent_api_claim c;
	int rc;

	if ((rc = mount_name_check("volume id", vol, e)) ||
	    (rc = agent_api_decode_claim(body, len, &c, e)))
		return rc;
	c.req.volume_id = vol;
	if (!(res = calloc(1, sizeof(*res)))) {
		rc = err_set(e, CSID_ENOMEM, "out of memory");
		goto out;
	}
	if ((rc = claims_mount(a->cfg.claims, &c.req, res, e)))
		goto out;
	*out = json_pack("{s:s, s:s, s:s, s:s, s:s, s:b}", "volume_id", vol, "alloc_id",
			 c.req.alloc_id, "node_id", a->node_name, "path", res->path, "source",
			 res->source, "is_device", res->is_device);
	if (!*out)
		rc = err_set(e, CSID_ENOMEM, "out of memory");
out:
	free(res);
	agent_api_claim_clear(&c);
	return rc;
}

int agent_api_volume_unmount(struct agent_api *a, const char *vol, const char *alloc, json_t **out,
			     struct err *e)
{
	struct claims_unmount_result res;
	int rc = claims_unmount(a->cfg.claims, vol, alloc, NULL, &res, e);

	if (rc)
		return rc;
	*out = json_pack("{s:s, s:s, s:b, s:b, s:b}", "volume_id", vol, "alloc_id", alloc,
			 "unmounted", res.unmounted, "released", res.released, "release_pending",
			 res.release_pending);
	if (*out && res.release_pending)
		json_object_set_new(*out, "release_error", json_string(res.release_error));
	return *out ? 0 : err_set(e, CSID_ENOMEM, "out of memory");
}
