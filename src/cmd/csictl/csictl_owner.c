/*
 * The claim owner flags of `csictl volume mount` (-owner-pid,
 * -owner-cgroup, -lease) and `csictl volume renew` (-lease), turned into
 * the "owner" object the agent API takes. The agent checks the owner on
 * its system (the pid lives, the cgroup is a populated cgroup v2
 * directory); here only the form is checked, so a mistake is reported
 * without a round trip.
 */
#include <string.h>

#include "csictl_agent.h"

/* The lease range the agent accepts (agent/owners.h). */
#define CSICTL_LEASE_MIN_MS 1000

int csictl_agent_lease_parse(const char *s, int64_t *ms, struct err *e)
{
	if (csictl_duration_parse(s, ms, e))
		return err_wrap(e, "-lease: a lease is from 1s to 24h");
	if (*ms < CSICTL_LEASE_MIN_MS)
		return err_set(e, CSID_EINVAL,
			       "-lease: a lease is from 1s to 24h: \"%.64s\" is shorter", s);
	return 0;
}

int csictl_agent_owner_json(const struct csictl_agent_opts *o, json_t **out, struct err *e)
{
	int given = (o->owner_pid != NULL) + (o->owner_cgroup != NULL) + (o->lease != NULL);
	int64_t lease = 0;
	int32_t pid = 0;

	*out = NULL;
	if (given > 1)
		return err_set(e, CSID_EINVAL,
			       "-owner-pid, -owner-cgroup and -lease exclude each other: a mount "
			       "has one owner");
	if (o->owner_pid) {
		if (csictl_int_parse(o->owner_pid, &pid, e) || pid <= 0)
			return err_set(e, CSID_EINVAL,
				       "-owner-pid: expected a process ID, not "
				       "\"%.64s\"",
				       o->owner_pid);
		*out = json_pack("{s:i}", "pid", (int)pid);
	} else if (o->owner_cgroup) {
		if (o->owner_cgroup[0] != '/')
			return err_set(e, CSID_EINVAL,
				       "-owner-cgroup: expected the absolute path of a cgroup v2 "
				       "directory");
		*out = json_pack("{s:s}", "cgroup", o->owner_cgroup);
	} else if (o->lease) {
		if (csictl_agent_lease_parse(o->lease, &lease, e))
			return CSID_EINVAL;
		*out = json_pack("{s:I}", "lease_ms", (json_int_t)lease);
	} else {
		return 0;
	}
	return *out ? 0 : err_set(e, CSID_ENOMEM, "out of memory");
}
