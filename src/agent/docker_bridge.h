/*
 * The Docker/Podman volume bridge: what each call of the engines' volume
 * plugin protocol (src/api/docker_plugin.h) does with csid's catalogue
 * and this node's claim flow.
 *
 *   create(name, opts)  the spec of docker_opts.h, created (or registered)
 *                       through the servers; waits until the volume is
 *                       ready, or failed (then its record is dropped, so
 *                       nothing is left behind, and the failure returned)
 *   remove(name)        deletes through the servers what csid created,
 *                       deregisters what the bridge registered; refused by
 *                       the server while claimed, naming the holders; waits
 *                       until the record is gone
 *   mount(name, id)     claims name for allocation `id` (the engine's mount
 *                       ID) on this node, stages and publishes: the path
 *   unmount(name, id)   unpublishes and releases; an id with no mount here
 *                       is done at once
 *
 * Each new mount gets the container that uses it as its claim's owner
 * (agent/docker_owner.h), so a container gone without an Unmount frees
 * its claim.
 *   path, get, list     from the catalogue and this node's mounts
 *
 * Calls on one volume name are serialised here (a Mount racing a Remove
 * of the same volume runs after it, never interleaved); calls on distinct
 * names run in parallel. Every outside effect goes through struct
 * docker_bridge_ops, so the bridge is tested against fakes. Thread-safe:
 * engines call from a thread per connection.
 */
#ifndef CSID_AGENT_DOCKER_BRIDGE_H
#define CSID_AGENT_DOCKER_BRIDGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "util/err.h"

/* Longest mount path answered (bytes, with the NUL). */
#define DOCKER_BRIDGE_PATH_MAX 4096

/*
 * What the bridge needs from the agent. Each returns 0 or a negative
 * csid code with e set; json results are the caller's.
 */
struct docker_bridge_ops {
	/* One request to the servers (body may be NULL): 0 and *doc for a 2xx answer. */
	int (*server)(void *ctx, const char *method, const char *path, json_t *body, json_t **doc,
		      struct err *e);
	/* Claims vol for alloc on this node, stages and publishes it: the path in path (cap). */
	int (*mount)(void *ctx, const char *vol, const char *alloc, char *path, size_t cap,
		     struct err *e);
	/* Unpublishes vol for alloc and releases its claim; reason NULL: the engine asked. */
	int (*unmount)(void *ctx, const char *vol, const char *alloc, const char *reason,
		       struct err *e);
	/* This node's mounts: *out, an array of {"volume_id", "alloc_id", "target"}. */
	int (*mounts)(void *ctx, json_t **out, struct err *e);
	/* The node plugins this node runs: *out, an array of plugin IDs. */
	int (*plugins)(void *ctx, json_t **out, struct err *e);
	/*
	 * Makes pid (a live process) the owner of the mount of vol for
	 * alloc (agent/owners.h); NULL: mounts get no owner.
	 */
	int (*owner)(void *ctx, const char *vol, const char *alloc, int pid, struct err *e);
	void *ctx;
};

struct docker_bridge_config {
	struct docker_bridge_ops ops;
	/* How long create and remove wait for the volume (ms); 0: 120 s. */
	int64_t wait_ms;
	/* The Docker engine's API, for the owners of mounts (docker_owner.h); NULL: none. */
	const char *engine_socket;
	/* Where the node's mounts are made (docker_owner.h's mounts_dir); NULL: none. */
	const char *mounts_dir;
};

struct docker_bridge;

/* Returns 0 and *out, or CSID_ENOMEM. */
int docker_bridge_new(const struct docker_bridge_config *cfg, struct docker_bridge **out,
		      struct err *e);
/* Frees b (no call may be running). NULL is a no-op. */
void docker_bridge_free(struct docker_bridge *b);

/* opts: a JSON object of strings, may be NULL. */
int docker_bridge_create(struct docker_bridge *b, const char *name, json_t *opts, struct err *e);
int docker_bridge_remove(struct docker_bridge *b, const char *name, struct err *e);
/* The mount path into path (DOCKER_BRIDGE_PATH_MAX bytes). */
int docker_bridge_mount(struct docker_bridge *b, const char *name, const char *id, char *path,
			struct err *e);
int docker_bridge_unmount(struct docker_bridge *b, const char *name, const char *id, struct err *e);
/* A path where name is mounted on this node, "" when none (path: DOCKER_BRIDGE_PATH_MAX). */
int docker_bridge_path(struct docker_bridge *b, const char *name, char *path, struct err *e);
/* *out: {"Name", "Mountpoint", "Status": {...}} of the protocol. */
int docker_bridge_get(struct docker_bridge *b, const char *name, json_t **out, struct err *e);
/* *out: [{"Name", "Mountpoint"}] of every catalogue volume. */
int docker_bridge_list(struct docker_bridge *b, json_t **out, struct err *e);

/* Whether id may name an allocation: 1 to 128 bytes of [A-Za-z0-9._-], not "." or "..". */
int docker_bridge_id_check(const char *id, struct err *e);

#endif
