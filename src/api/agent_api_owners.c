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
 * A mount's owner is decoded and checked on the system before anything
 * is claimed (a pid that does not exist, a cgroup that is not a live
 * cgroup v2 directory, a lease out of 1s..24h: 400, nothing claimed), and
 * recorded once the mount is done. When the watch finds it gone, this
 * file's release callback runs the unmount of agent_api_claims.c with
 * the reason, which the release carries to the server's claim note.
 */
#include "api/agent_api_int.h"

#include <stdlib.h>
#include <string.h>

#include "util/clock.h"
#include "util/log.h"

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

int agent_api_owner_check(struct agent_api *a, const char *body, size_t len,
			  struct owners_spec *out, bool *present, struct err *e)
{
	int rc = agent_api_decode_owner(body, len, out, present, e);

	if (rc || !*present)
		return rc;
	if (!a->owners)
		return err_set(e, CSID_EPRECOND,
			       "claim owners need the agent to join servers (config \"servers\")");
	if (out->kind == OWNERS_PID)
		return owners_watch_pid_check(out->pid, &out->start_time, e);
	if (out->kind == OWNERS_CGROUP)
		return owners_watch_cgroup_check(out->cgroup, e);
	return 0;
}

int agent_api_owner_record(struct agent_api *a, const char *vol, const char *alloc,
			   struct owners_spec *s, struct err *e)
{
	if (s->kind == OWNERS_LEASE)
		s->expires_ms = clock_wall_ms(clock_real()) + s->lease_ms;
	return owners_watch_put(a->owners, vol, alloc, s, e);
}

void agent_api_owner_forget(struct agent_api *a, const char *vol, const char *alloc)
{
	if (a->owners)
		owners_watch_forget(a->owners, vol, alloc);
}

/* The owner watch's release: the unmount of a claim mount, with the reason. */
static int agent_api_owners_release(void *ctx, const char *vol, const char *alloc,
				    const char *reason)
{
	struct agent_api *a = ctx;
	bool mounted = true;
	json_t *out = NULL;
	struct err e, e2;
	char q[ERR_MSG_MAX + 64], r[OWNERS_REASON_MAX + 64];
	int rc;

	err_clear(&e);
	err_clear(&e2);
	rc = agent_api_volume_unmount(a, vol, alloc, reason, &out, &e);
	if (rc == 0) {
		log_info("msg=\"claim owner gone: released\" volume=%s alloc=%s release_pending=%d "
			 "reason=%s",
			 vol, alloc, json_is_true(json_object_get(out, "release_pending")),
			 log_q(r, sizeof(r), reason));
		json_decref(out);
		return 0;
	}
	log_warn("msg=\"claim owner gone: release failed\" volume=%s alloc=%s reason=%s error=%s",
		 vol, alloc, log_q(r, sizeof(r), reason), log_q(q, sizeof(q), e.msg));
	/* Unmounted, and the server refused the release for good: nothing left to retry. */
	if (rc != CSID_EUNAVAIL &&
	    mounter_has_mount(a->cfg.mounter, vol, alloc, &mounted, &e2) == 0 && !mounted) {
		agent_api_owner_forget(a, vol, alloc);
		return 0;
	}
	return rc;
}

int agent_api_owners_open(struct agent_api *a, const char *db_path, struct err *e)
{
	struct owners_watch_config wc = {
	    .db_path = db_path,
	    .release = agent_api_owners_release,
	    .ctx = a,
	};

	if (!a->cfg.nservers)
		return 0;
	return owners_watch_start(&wc, &a->owners, e);
}

void agent_api_owners_close(struct agent_api *a)
{
	owners_watch_stop(a->owners);
	a->owners = NULL;
}

int agent_api_owner_renew(struct agent_api *a, const char *vol, const char *alloc, const char *body,
			  size_t len, json_t **out, struct err *e)
{
	json_t *root = NULL, *v;
	struct owners_spec s;
	int64_t lease = 0;
	const char *key;
	int rc = 0;

	if ((rc = mount_name_check("volume id", vol, e)) ||
	    (rc = mount_name_check("alloc id", alloc, e)))
		return rc;
	if (!a->owners)
		return err_set(e, CSID_ENOTFOUND, "volume %s for %s: no owner recorded", vol,
			       alloc);
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
	if ((rc = owners_watch_renew(a->owners, vol, alloc, lease, &s, e)))
		return rc;
	log_info("msg=\"lease renewed\" volume=%s alloc=%s lease_ms=%lld", vol, alloc,
		 (long long)s.lease_ms);
	*out = json_pack("{s:s, s:s, s:I, s:I}", "volume_id", vol, "alloc_id", alloc, "lease_ms",
			 (json_int_t)s.lease_ms, "expires_ms", (json_int_t)s.expires_ms);
	return *out ? 0 : err_set(e, CSID_ENOMEM, "out of memory");
}

int agent_api_owners_list(struct agent_api *a, json_t **out, struct err *e)
{
	struct owners_entry *v = NULL;
	json_t *list = json_array();
	size_t n = 0;

	if (!list || (a->owners && owners_watch_list(a->owners, &v, &n))) {
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
