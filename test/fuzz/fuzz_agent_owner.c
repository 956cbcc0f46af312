/*
 * Fuzz target: the claim owner of a PUT /v1/agent/volumes/<vol>/mount
 * body (agent_api_decode_owner) and the texts the owner watch reads
 * from the system (a /proc/PID/stat, a cgroup.events). The input is the
 * body, and the same bytes as either file. A decoded owner must be
 * exactly one well-formed kind: a pid in range, a lease in range, a
 * cgroup path that passes the path check; a refusal must say why.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/owners.h"
#include "api/agent_api.h"
#include "util/procstat.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct owners_spec s;
	bool present = true, populated = false;
	uint64_t start = 0;
	char state = 0;
	struct err e;

	err_clear(&e);
	if (agent_api_decode_owner((const char *)data, size, &s, &present, &e) != 0) {
		if (e.code == 0 || !e.msg[0] || present)
			abort();
	} else if (present) {
		if ((s.kind == OWNERS_PID && (s.pid <= 0 || s.pid > 4194304)) ||
		    (s.kind == OWNERS_LEASE && owners_lease_check(s.lease_ms, &e) != 0) ||
		    (s.kind == OWNERS_CGROUP && owners_cgroup_path_check(s.cgroup, &e) != 0) ||
		    (s.kind != OWNERS_PID && s.kind != OWNERS_LEASE && s.kind != OWNERS_CGROUP))
			abort();
	}
	if (procstat_parse((const char *)data, size, &state, &start) == 0 && state == ')')
		abort();
	(void)owners_events_parse((const char *)data, size, &populated);
	return 0;
}
