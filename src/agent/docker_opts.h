/*
 * The options of a Docker (or Podman) volume create, turned into a volume
 * spec of the csid servers: `docker volume create -d csid -o size=10M
 * -o access-mode=single-node-writer data` gives
 * {"id": "data", "name": "data", "plugin_id": ..., "capacity_min": 10000000,
 *  "capabilities": [{"access_mode": "single-node-writer",
 *                    "attachment_mode": "file-system"}]}.
 *
 *   plugin=ID            the CSI plugin (default: the only node plugin here)
 *   size=10M             capacity_min (model_parse_size: 10M, 1GiB, 4096)
 *   access-mode=MODE     single-node-writer (default) or any access mode
 *   fs-type=ext4         mount_options.fs_type
 *   mount-flags=a,b      mount_options.mount_flags
 *   param.KEY=VALUE      parameters[KEY]
 *   from-snapshot=ID     snapshot_source
 *   clone-of=ID          clone_source
 *   external-id=ID       register this existing volume of the plugin
 *                        instead of creating one
 *
 * Engines show a volume's options to anyone who can list volumes (docker
 * volume inspect), so no option carries a secret: any option that looks
 * like one is refused with a message that says where secrets come from.
 * Pure functions, no I/O.
 */
#ifndef CSID_AGENT_DOCKER_OPTS_H
#define CSID_AGENT_DOCKER_OPTS_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "util/err.h"

/* The spec "name" of a volume the bridge registered (external-id): Remove deregisters it. */
#define DOCKER_OPTS_REGISTERED_NAME "csid-docker-registered"

/*
 * Checks a volume name the engine sent: 1 to 128 bytes of letters,
 * digits, '.', '_' and '-', without "..". Returns 0 or CSID_EINVAL
 * with e saying what is allowed (quoting the name only when it is short
 * and printable).
 */
int docker_opts_name_check(const char *name, struct err *e);

/*
 * Builds the spec of volume name from opts (a JSON object of strings, may
 * be NULL or empty). plugins (n entries) are the node plugins this node
 * runs, for the default plugin. *register_ is set when the spec registers
 * an existing volume (PUT /v1/volume/<id>) rather than creating one (PUT
 * /v1/volume/<id>/create). Returns 0 and *spec (the caller's), or
 * CSID_EINVAL with e naming the option (never its value when it may be a
 * secret) / CSID_ENOMEM.
 */
int docker_opts_spec(const char *name, json_t *opts, const char *const *plugins, size_t n,
		     json_t **spec, bool *register_, struct err *e);

#endif
