/*
 * Claim owners of the claim flow's mounts (the owners themselves:
 * agent/owners.h, the watching: agent/owners_watch.h). A mount's owner
 * is checked on the system before anything is claimed (a pid that does
 * not exist, a cgroup that is not a live cgroup v2 directory: refused,
 * nothing claimed), and recorded once the mount is done. When the watch
 * finds it gone, its release callback here runs the flow's unmount with
 * the reason, which the release carries to the server's claim note.
 */
#include "agent/claims_int.h"

#include <stdlib.h>

#include "util/log.h"

int claims_owner_check(struct claims *c, struct owners_spec *s, struct err *e)
{
	if (!c->owners)
		return err_set(e, CSID_EPRECOND,
			       "claim owners need the agent to join servers (config \"servers\")");
	if (s->kind == OWNERS_PID)
		return owners_watch_pid_check(s->pid, &s->start_time, e);
	if (s->kind == OWNERS_CGROUP)
		return owners_watch_cgroup_check(s->cgroup, e);
	return owners_lease_check(s->lease_ms, e);
}

int claims_owner_record(struct claims *c, const char *vol, const char *alloc, struct owners_spec *s,
			struct err *e)
{
	/* The owner watch keeps leases on the real wall clock, as it checks them. */
	if (s->kind == OWNERS_LEASE)
		s->expires_ms = clock_wall_ms(clock_real()) + s->lease_ms;
	return owners_watch_put(c->owners, vol, alloc, s, e);
}

void claims_owner_forget(struct claims *c, const char *vol, const char *alloc)
{
	if (c->owners)
		owners_watch_forget(c->owners, vol, alloc);
}

/* The owner watch's release: the unmount of a claim mount, with the reason. */
static int claims_owners_release(void *ctx, const char *vol, const char *alloc, const char *reason)
{
	struct claims *c = ctx;
	struct claims_unmount_result res;
	bool mounted = true;
	struct err e, e2;
	char q[ERR_MSG_MAX + 64], r[OWNERS_REASON_MAX + 64];
	int rc;

	err_clear(&e);
	err_clear(&e2);
	rc = claims_unmount(c, vol, alloc, reason, &res, &e);
	if (rc == 0) {
		log_info("msg=\"claim owner gone: released\" volume=%s alloc=%s release_pending=%d "
			 "reason=%s",
			 vol, alloc, res.release_pending, log_q(r, sizeof(r), reason));
		return 0;
	}
	log_warn("msg=\"claim owner gone: release failed\" volume=%s alloc=%s reason=%s error=%s",
		 vol, alloc, log_q(r, sizeof(r), reason), log_q(q, sizeof(q), e.msg));
	/* Unmounted, and the server refused the release for good: nothing left to retry. */
	if (rc != CSID_EUNAVAIL &&
	    mounter_has_mount(c->cfg.mounter, vol, alloc, &mounted, &e2) == 0 && !mounted) {
		claims_owner_forget(c, vol, alloc);
		return 0;
	}
	return rc;
}

int claims_owners_open(struct claims *c, const char *db_path, struct err *e)
{
	struct owners_watch_config wc = {
	    .db_path = db_path,
	    .release = claims_owners_release,
	    .ctx = c,
	};

	return owners_watch_start(&wc, &c->owners, e);
}

void claims_owners_close(struct claims *c)
{
	owners_watch_stop(c->owners);
	c->owners = NULL;
}

int claims_owner_renew(struct claims *c, const char *vol, const char *alloc, int64_t lease_ms,
		       struct owners_spec *out, struct err *e)
{
	int rc;

	if ((rc = mount_name_check("volume id", vol, e)) ||
	    (rc = mount_name_check("alloc id", alloc, e)))
		return rc;
	if (!c->owners)
		return err_set(e, CSID_ENOTFOUND, "volume %s for %s: no owner recorded", vol,
			       alloc);
	if ((rc = owners_watch_renew(c->owners, vol, alloc, lease_ms, out, e)))
		return rc;
	log_info("msg=\"lease renewed\" volume=%s alloc=%s lease_ms=%lld", vol, alloc,
		 (long long)out->lease_ms);
	return 0;
}

int claims_owners_list(struct claims *c, struct owners_entry **out, size_t *n)
{
	*out = NULL;
	*n = 0;
	return c->owners ? owners_watch_list(c->owners, out, n) : 0;
}
