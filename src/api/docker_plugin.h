/*
 * The Docker volume plugin protocol (also spoken by Podman), served by
 * the agent on its own unix socket: JSON over HTTP/1.1, every request a
 * POST whose path names the call.
 *
 *   /Plugin.Activate             {} -> {"Implements": ["VolumeDriver"]}
 *   /VolumeDriver.Create         {"Name", "Opts": {strings}} -> {"Err"}
 *   /VolumeDriver.Remove         {"Name"} -> {"Err"}
 *   /VolumeDriver.Mount          {"Name", "ID"} -> {"Mountpoint", "Err"}
 *   /VolumeDriver.Unmount        {"Name", "ID"} -> {"Err"}
 *   /VolumeDriver.Path           {"Name"} -> {"Mountpoint", "Err"}
 *   /VolumeDriver.Get            {"Name"} -> {"Volume": {"Name", "Mountpoint",
 *                                             "Status"}, "Err"}
 *   /VolumeDriver.List           {} -> {"Volumes": [{"Name", "Mountpoint"}], "Err"}
 *   /VolumeDriver.Capabilities   {} -> {"Capabilities": {"Scope": "global"}}
 *
 * Every failure is status 200 with {"Err": "<csid's message>"} (the
 * engine shows it as is); an unknown path is 404 with an Err too, and so
 * are the HTTP layer's own refusals (a body over DOCKER_PLUGIN_BODY_MAX:
 * 413). What each call does is agent/docker_bridge.h; this file only
 * decodes, calls and encodes. The engine is untrusted: bodies are parsed
 * strictly (docker_plugin_decode, fuzzed), names checked before use.
 */
#ifndef CSID_API_DOCKER_PLUGIN_H
#define CSID_API_DOCKER_PLUGIN_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "agent/config.h"
#include "util/err.h"

/* Largest request body (bytes): a Create with every option fits easily. */
#define DOCKER_PLUGIN_BODY_MAX (64 * 1024)

enum docker_plugin_op {
	DOCKER_PLUGIN_ACTIVATE,
	DOCKER_PLUGIN_CREATE,
	DOCKER_PLUGIN_REMOVE,
	DOCKER_PLUGIN_MOUNT,
	DOCKER_PLUGIN_UNMOUNT,
	DOCKER_PLUGIN_PATH,
	DOCKER_PLUGIN_GET,
	DOCKER_PLUGIN_LIST,
	DOCKER_PLUGIN_CAPABILITIES,
};

/* A decoded request; the strings point into doc. */
struct docker_plugin_req {
	enum docker_plugin_op op;
	const char *name; /* NULL for Activate, List, Capabilities */
	const char *id; /* Mount and Unmount only */
	json_t *opts; /* Create only: an object of strings, or NULL */
	json_t *doc; /* owned */
};

/*
 * Decodes a request for url (the path) with body (len bytes; empty is
 * {}): the call from the path, then a JSON object with the members the
 * call needs (Name, ID: non-empty strings without NUL bytes, at most 1024
 * bytes; Opts: null or an object of strings). Other members are ignored,
 * as the protocol may grow. Returns 0 and *out (clear with
 * docker_plugin_req_clear), CSID_ENOTFOUND for an unknown path, or
 * CSID_EINVAL naming what is wrong.
 */
int docker_plugin_decode(const char *url, const char *body, size_t len,
			 struct docker_plugin_req *out, struct err *e);
void docker_plugin_req_clear(struct docker_plugin_req *r);

struct agent_api;
struct docker_plugin;

/*
 * Serves the protocol for agent a on cfg->socket (its directory made;
 * a stale socket replaced) and writes cfg->spec_file when set. Returns 0
 * and *out, or a code with e set.
 */
int docker_plugin_start(struct agent_api *a, const struct config_docker *cfg,
			struct docker_plugin **out, struct err *e);
/* Stops serving, removes the socket and the spec file, frees. NULL is a no-op. */
void docker_plugin_stop(struct docker_plugin *p);

#endif
