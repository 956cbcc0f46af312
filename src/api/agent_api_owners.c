/*
 * Claim owners in the agent API (the owners themselves: agent/owners.h,
 * the watching: agent/owners_watch.h):
 *
 *   PUT /v1/agent/volumes/<vol>/mount        {..., "owner": {"pid": 1234}}
 *                                            or {"cgroup": "/sys/fs/cgroup/..."}
 *                                            or {"lease_ms": 30000}
 *   PUT /v1/agent/volumes/<vol>/mount/<alloc>/renew   {"lease_ms": N} (optional)
 *   GET /v1/agent/owners                     every recorded owner
 *
 * A mount's owner is decoded here and checked on the system by the claim
 * flow (agent/claims.h) before anything is claimed (a pid that does not
 * exist, a cgroup that is not a live cgroup v2 directory, a lease out of
 * 1s..24h: 400, nothing claimed); the flow records it and releases the
 * mount, with the reason, when the watch finds it gone.
 */
#include "api/agent_api_int.h"

#include <stdlib.h>
#include <string.h>

/* The largest pid Linux hands out (PID_MAX_LIMIT on 64-bit). */
#define AGENT_API_PID_MAX 4194304

/* An integer member in [min, max]; 0 with *out, or CSID_EINVAL naming it. */
static int agent_api_owner_int(json_t *v, const char *what, int64_t min, int64_t max, int64_t *out,
			       struct err *e)
{
	if (!json_is_integer(v))
		return err_set(e, CSID_EINVAL, "%s: expected an integer", what);
	*out = json_integer_value(v);
	if (*out < min || *out > max)
		return err_set(e, CSID_EINVAL, "%s: %lld is out of range (%lld to %lld)", what,
			       (long long)*out, (long long)min, (long long)max);
	return 0;
}

int agent_api_decode_owner(const char *body, size_t len, struct owners_spec *out, bool *present,
			   struct err *e)
{
	json_t *root = body ? json_loadb(body, len, JSON_REJECT_DUPLICATES, NULL) : NULL;
	json_t *o = json_object_get(root, "owner"), *v;
	const char *key;
	int64_t n = 0;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	*present = false;
	if (!json_is_object(root)) {
		json_decref(root);
		return err_set(e, CSID_EINVAL, "request body must be a JSON object");
	}
	if (!o)
		goto out;
	if (!json_is_object(o) || json_object_size(o) != 1) {
		rc = err_set(e, CSID_EINVAL,
			     "owner: expected an object with one of \"pid\", \"cgroup\" or "
			     "\"lease_ms\"");
		goto out;
	}
	json_object_foreach(o, key, v)
	{
		if (strcmp(key, "pid") == 0) {
			out->kind = OWNERS_PID;
			rc = agent_api_owner_int(v, "owner.pid", 1, AGENT_API_PID_MAX, &n, e);
			out->pid = (int)n;
		} else if (strcmp(key, "lease_ms") == 0) {
			out->kind = OWNERS_LEASE;
			if (!json_is_integer(v))
				rc = err_set(e, CSID_EINVAL, "owner.lease_ms: expected an integer");
			else if ((rc = owners_lease_check(json_integer_value(v), e)))
				err_wrap(e, "owner.lease_ms");
			out->lease_ms = json_integer_value(v);
		} else if (strcmp(key, "cgroup") == 0) {
			out->kind = OWNERS_CGROUP;
			if (!json_is_string(v))
				rc = err_set(e, CSID_EINVAL, "owner.cgroup: expected a string");
			else if ((rc = owners_cgroup_path_check(json_string_value(v), e)))
				err_wrap(e, "owner.cgroup");
			else
				snprintf(out->cgroup, sizeof(out->cgroup), "%s",
					 json_string_value(v));
		} else {
			rc = err_set(e, CSID_EINVAL, "owner: unknown field \"%.64s\"", key);
		}
	}
	*present = rc == 0;
out:
	json_decref(root);
	return rc;
}

int agent_api_owner_renew(struct agent_api *a, const char *vol, const char *alloc, const char *body,
			  size_t len, json_t **out, struct err *e)
{
	json_t *root = NULL, *v;
	struct owners_spec s;
	int64_t lease = 0;
	const char *key;
	int rc = 0;

	if (body && len) {
		root = json_loadb(body, len, JSON_REJECT_DUPLICATES, NULL);
		if (!json_is_object(root)) {
			json_decref(root);
			return err_set(e, CSID_EINVAL, "request body must be a JSON object");
		}
		json_object_foreach(root, key, v)
		{
			if (rc)
				break;
			if (strcmp(key, "lease_ms") != 0)
				rc = err_set(e, CSID_EINVAL, "unknown field \"%.64s\"", key);
			else if (!json_is_integer(v))
				rc = err_set(e, CSID_EINVAL, "lease_ms: expected an integer");
			else if ((rc = owners_lease_check(json_integer_value(v), e)))
				err_wrap(e, "lease_ms");
			else
				lease = json_integer_value(v);
		}
		json_decref(root);
		if (rc)
			return rc;
	}
	if ((rc = claims_owner_renew(a->cfg.claims, vol, alloc, lease, &s, e)))
		return rc;
	*out = json_pack("{s:s, s:s, s:I, s:I}", "volume_id", vol, "alloc_id", alloc, "lease_ms",
			 (json_int_t)s.lease_ms, "expires_ms", (json_int_t)s.expires_ms);
	return *out ? 0 : err_set(e, CSID_ENOMEM, "out of memory");
}

int agent_api_owners_list(struct agent_api *a, json_t **out, struct err *e)
{
	struct owners_entry *v = NULL;
	json_t *list = json_array();
	size_t n = 0;

	if (!list || claims_owners_list(a->cfg.claims, &v, &n)) {
		json_decref(list);
		return err_set(e, CSID_ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < n; i++) {
		const struct owners_spec *s = &v[i].spec;
		json_t *o =
		    json_pack("{s:s, s:s, s:s, s:b}", "volume_id", v[i].vol, "alloc_id", v[i].alloc,
			      "kind", owners_kind_name(s->kind), "gone", v[i].gone);

		if (o && s->kind == OWNERS_PID) {
			json_object_set_new(o, "pid", json_integer(s->pid));
			json_object_set_new(o, "start_time",
					    json_integer((json_int_t)s->start_time));
		} else if (o && s->kind == OWNERS_CGROUP) {
			json_object_set_new(o, "cgroup", json_string(s->cgroup));
		} else if (o) {
			json_object_set_new(o, "lease_ms", json_integer(s->lease_ms));
			json_object_set_new(o, "expires_ms", json_integer(s->expires_ms));
		}
		if (o && v[i].gone)
			json_object_set_new(o, "reason", json_string(v[i].reason));
		json_array_append_new(list, o);
	}
	free(v);
	*out = json_pack("{s:o}", "owners", list);
	return *out ? 0 : err_set(e, CSID_ENOMEM, "out of memory");
}
