/*
 * `csictl agent self|plugins|mounts|mount|unmount`: a client of the csid
 * agent's HTTP API over a unix socket (-address unix:PATH, the default
 * unix:/var/lib/csid/agent.sock, or $CSID_AGENT_ADDR) or TCP
 * (http://host:port). The pieces that do not touch the network (address
 * parsing, the mount request body, rendering answers and errors) are
 * exposed here so they can be tested on canned JSON.
 *
 * Exit status: 0 OK, 1 the request failed (an API error prints as
 * "error: <code>: <message>"), 2 usage error.
 */
#ifndef CSICTL_AGENT_H
#define CSICTL_AGENT_H

#include <stdbool.h>
#include <stdio.h>

#include <jansson.h>

#include "csictl_flags.h"
#include "csictl_http.h"
#include "util/err.h"

#define CSICTL_AGENT_DEFAULT_ADDR "unix:/var/lib/csid/agent.sock"

/* What the flags say; strings point into argv. */
struct csictl_agent_opts {
	const char *address;
	const char *output;
	const char *timeout;
	bool help;
	const char *plugin;
	const char *external_id;
	bool readonly;
	bool block;
	const char *attachment_mode;
	const char *access_mode;
	const char *fs_type;
	struct csictl_list mount_flags;
	struct csictl_kv context;
	struct csictl_kv publish_context;
	struct csictl_kv secrets;
	const char *secrets_file;
	const char *context_file;
	json_t *context_doc; /* the volume context read from context_file; owned by the run */
	bool force;
	const char *alloc; /* volume mount, unmount, renew */
	const char *owner_pid; /* volume mount: the claim owners */
	const char *owner_cgroup;
	const char *lease; /* volume mount, renew */
	bool volume; /* the run is `csictl volume mount|unmount|renew` */
};

/*
 * The volume context in the JSON text[0..len) of a -context-file: an
 * object of strings, an object with a "volume_context" object, or the
 * output of `csictl csi create-volume -o json` ({"volume":
 * {"volume_context": {...}}}). Returns 0 and a new object in *out, or
 * CSID_EINVAL with e set (never quoting a value).
 */
int csictl_agent_context_parse(const char *text, size_t len, json_t **out, struct err *e);

/*
 * The JSON body of PUT /v1/agent/mounts for volume and alloc from o:
 * volume_id, external_id (the volume ID unless -external-id), plugin_id,
 * alloc_id, read_only, attachment_mode, access_mode, fs_type,
 * mount_flags, volume_context (o->context_doc, then the -context pairs,
 * which win), publish_context, secrets. Access modes are
 * accepted as our names or CSI's (SINGLE_NODE_WRITER) and sent as ours.
 * Returns 0 and a new reference in *out, or CSID_EINVAL with e set.
 */
int csictl_agent_mount_body(const struct csictl_agent_opts *o, const char *volume,
			    const char *alloc, json_t **out, struct err *e);

/*
 * The "owner" object of a claim mount from -owner-pid, -owner-cgroup or
 * -lease (at most one): {"pid": N}, {"cgroup": PATH} or {"lease_ms": N}
 * with the lease from 1s to 24h; *out NULL when none is given. Returns 0,
 * or CSID_EINVAL with e set.
 */
int csictl_agent_owner_json(const struct csictl_agent_opts *o, json_t **out, struct err *e);
/* The lease of -lease in ms, checked (1s to 24h). Returns 0 or CSID_EINVAL with e set. */
int csictl_agent_lease_parse(const char *s, int64_t *ms, struct err *e);

/* Renders GET /v1/agent/plugins (an array, or {"plugins": [...]}) as a table. */
int csictl_agent_render_plugins(const json_t *j, FILE *out, struct err *e);
/* Renders GET /v1/agent/mounts (an array, or {"mounts": [...]}) as a table. */
int csictl_agent_render_mounts(const json_t *j, FILE *out, struct err *e);
/*
 * Renders any JSON object as "key: value" lines, nested objects with
 * dotted keys (GET /v1/agent/self).
 */
int csictl_agent_render_object(const json_t *j, FILE *out, struct err *e);
/* Renders the answer of PUT /v1/agent/mounts ({"source","target","is_device"}). */
int csictl_agent_render_mount(const json_t *j, FILE *out, struct err *e);
/*
 * Renders the answer of DELETE /v1/agent/mounts/<vol>/<alloc>: the
 * volume and allocation, and for a forced unmount what the plugin
 * skipped, what the agent detached itself and what it left in place.
 */
int csictl_agent_render_unmount(const json_t *j, FILE *out, struct err *e);

/*
 * Runs `csictl agent` with argv holding what follows "agent". Returns the
 * exit status.
 */
int csictl_agent_main(int argc, char **argv, FILE *out, FILE *errf);

/*
 * `csictl volume mount VOL -alloc A [-read-only] [-access-mode M]
 * [-attachment-mode M] [-owner-pid PID | -owner-cgroup PATH | -lease D]`,
 * `csictl volume unmount VOL -alloc A` and `csictl volume renew VOL
 * -alloc A [-lease D]`: a volume of the csid servers claimed and mounted
 * by the local agent (PUT /v1/agent/volumes/<vol>/mount), unmounted and
 * released, or the lease that owns the mount renewed. argv starts at
 * "mount", "unmount" or "renew". Prints the path, or what was done;
 * returns the exit status.
 */
int csictl_agent_volume_main(int argc, char **argv, FILE *out, FILE *errf);

#endif
